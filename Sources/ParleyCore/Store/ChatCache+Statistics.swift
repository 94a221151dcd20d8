// What the cache holds, in numbers, for the client's metrics (`ParleyClient.metrics`).
//
// Read in one read transaction, so that the figures come from one commit. The sizes are a
// few pragmas and counts over small tables (local messages, the search index's backlog);
// the row counts are not: `count(*)` walks a whole b-tree, about 90 ms for 1,000,000
// messages and their index rows. So `CacheStatisticsKeeper` counts rows again only once the
// time since the last count is 100 times what that count took (at most 1% of the time spent
// counting, however often the metrics are asked for), and reads nothing while the cache has
// not changed (`PRAGMA data_version`).

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
    /// The cache's sizes, from one commit; the row counts (`messages`, `channels`,
    /// `searchIndexRows`) only with `countingRows`, else those of `kept`.
    public func statistics(countingRows: Bool, kept: CacheStatistics = CacheStatistics()) throws(ParleyError) -> CacheStatistics {
        var figures = kept
        try transactionForReading { () throws(ParleyError) in
            figures.sizeBytes = try scalarInt("PRAGMA page_count") * scalarInt("PRAGMA page_size")
            figures.pendingMessages = try scalarInt("SELECT count(*) FROM local_messages WHERE sending_status = 'pending'")
            figures.failedMessages = try scalarInt("SELECT count(*) FROM local_messages WHERE sending_status = 'failed'")
            figures.searchIndexBacklog = try scalarInt("SELECT count(*) FROM message_search_changes")
            guard countingRows else { return }
            figures.messages = try scalarInt("SELECT count(*) FROM messages")
            figures.channels = try scalarInt("SELECT count(*) FROM channels")
            // The index's own table of document sizes holds one row per indexed message.
            figures.searchIndexRows = try scalarInt("SELECT count(*) FROM message_search_docsize")
        }
        return figures
    }

    /// Changes whenever another connection commits (SQLite's `PRAGMA data_version`); the
    /// connection's own commits leave it as it is.
    func dataVersion() throws(ParleyError) -> Int64 {
        try scalarInt("PRAGMA data_version")
    }
}

/// The last figures of one cache connection and when its rows were counted (see the file
/// comment). Held by whoever reads that connection, under its lock or queue.
struct CacheStatisticsKeeper {
    /// Rows are counted again once this many times the last count's duration has passed.
    static let countingShare: Int64 = 100

    private var kept: CacheStatistics?
    /// `PRAGMA data_version` when `kept` was read (nil: the connection cannot tell, as the
    /// writer's own commits do not change it).
    private var dataVersion: Int64?
    /// `kept` holds row counts older than its sizes.
    private var rowsBehind = false
    private var countedAtNs: Int64 = 0
    private var countTookNs: Int64 = 0

    /// The figures of `cache`; `dataVersion` nil when unknown (read every time).
    mutating func statistics(of cache: ChatCache, dataVersion: Int64?) throws(ParleyError) -> CacheStatistics {
        if let kept, !rowsBehind, let dataVersion, dataVersion == self.dataVersion { return kept }
        let start = monotonicNanoseconds()
        let counting = kept == nil || start - countedAtNs >= countTookNs * Self.countingShare
        let figures = try cache.statistics(countingRows: counting, kept: kept ?? CacheStatistics())
        if counting {
            countedAtNs = start
            countTookNs = monotonicNanoseconds() - start
        }
        kept = figures
        self.dataVersion = dataVersion
        rowsBehind = !counting
        return figures
    }
}
