// What the cache holds, in numbers, for the client's metrics (`ParleyClient.metrics`).
//
// A few counts and pragmas, read in one read transaction so that they come from one commit.
// `count(*)` walks a table's smallest b-tree (a few milliseconds per 100,000 messages), so
// the file cache's reader keeps the last figures until another connection commits
// (`PRAGMA data_version`, CacheReader.statistics): asking every second costs a pragma while
// nothing changes.

/// The cache's sizes (`ChatCache.statistics`).
public struct CacheStatistics: Sendable, Equatable {
    /// The database file's pages, `page_count * page_size` (the WAL not counted).
    public var sizeBytes: Int64 = 0
    /// Server messages stored.
    public var messages: Int64 = 0
    /// Channels stored.
    public var channels: Int64 = 0
    /// Local messages waiting to be sent (or on the wire).
    public var pendingMessages: Int64 = 0
    /// Local messages whose send failed, kept for a resend or removal.
    public var failedMessages: Int64 = 0
    /// Messages the full-text search index holds.
    public var searchIndexRows: Int64 = 0
    /// Messages changed since the index was last brought up to date (applied in batches).
    public var searchIndexBacklog: Int64 = 0

    public init() {}
}

extension ChatCache {
    /// The cache's sizes, from one commit.
    public func statistics() throws(ParleyError) -> CacheStatistics {
        var figures = CacheStatistics()
        try transactionForReading { () throws(ParleyError) in
            figures.sizeBytes = try scalarInt("PRAGMA page_count") * scalarInt("PRAGMA page_size")
            figures.messages = try scalarInt("SELECT count(*) FROM messages")
            figures.channels = try scalarInt("SELECT count(*) FROM channels")
            figures.pendingMessages = try scalarInt("SELECT count(*) FROM local_messages WHERE sending_status = 'pending'")
            figures.failedMessages = try scalarInt("SELECT count(*) FROM local_messages WHERE sending_status = 'failed'")
            // The index's own table of document sizes holds one row per indexed message.
            figures.searchIndexRows = try scalarInt("SELECT count(*) FROM message_search_docsize")
            figures.searchIndexBacklog = try scalarInt("SELECT count(*) FROM message_search_changes")
        }
        return figures
    }

    /// Changes whenever another connection commits (SQLite's `PRAGMA data_version`); the
    /// connection's own commits leave it as it is.
    func dataVersion() throws(ParleyError) -> Int64 {
        try scalarInt("PRAGMA data_version")
    }
}
