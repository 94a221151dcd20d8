import Glibc

/// The client's local cache (one SQLite file per user, or in memory): channels, messages,
/// continuous message ranges ("chunks"), changelog tokens, key-value meta, pending/failed
/// local messages and the outbox of sends waiting for the network.
///
/// Threading: NOT thread-safe and deliberately not `Sendable`. A cache belongs to its
/// client's one serial engine executor, which makes every call in order, never two at
/// once; no locks are taken inside.
///
/// Storage: each object is stored as its canonical JSON text (`JSONValue.canonicalText`)
/// plus the columns that queries and ordering need; reads hand that text back unchanged
/// (no decode / re-encode on the read path). Field names are the wire names of
/// docs/PROTOCOL.md. Server messages live in `messages` (keyed by `message_id`, paged by
/// `(created_at, message_id)` keysets, never OFFSET); messages not yet accepted by the
/// server live apart in `local_messages` (pending / failed, in creation order), which is
/// how they always sort after succeeded ones: a view appends the local list to its page.
///
/// Errors are `ParleyError`: `.cache` for SQLite failures, `.protocolViolation` for a server
/// object missing what the cache needs (the message names the field), `.invalidArgument`
/// for bad input from the engine. Multi-step changes run in one transaction.
public final class ChatCache {
    /// `clear_cached_data` and eviction never go below this limit (public init).
    public static let minimumSizeLimitBytes: Int64 = 64 << 20
    public static let defaultSizeLimitBytes: Int64 = 256 << 20
    /// Eviction stops once the used size is at or below this fraction of the limit, so
    /// that it does not run again after every write near the limit.
    static let evictionTargetPercent: Int64 = 90

    /// Sync-token scope of the channel changelog token.
    public static let channelsTokenScope = "channels"
    /// Sync-token scope of one channel's message changelog token.
    public static func messagesTokenScope(channelURL: String) -> String { "messages:\(channelURL)" }

    /// Sync-token scope of a channel's poll changelogs.
    public static func pollsTokenScope(channelURL: String) -> String { "polls:\(channelURL)" }

    /// Sync-token scope that marks a channel list query (by its identity) as held whole by
    /// the cache: its listing was walked to the end and changes have been applied since.
    public static func channelListScope(queryIdentity: String) -> String { "channel_list:\(queryIdentity)" }

    let database: SQLiteDatabase
    /// The size above which `evictIfNeeded` removes channels' messages.
    public let sizeLimitBytes: Int64
    /// How many noted changes a commit waits for before it applies them to the search
    /// index (read by the commit hook, which must not hold the cache).
    let searchNotesPerCommit = SearchNotesPerCommit()
    /// A read-only connection (`init(readerOf:)`): it cannot bring the search index up to date.
    let readsOnly: Bool

    /// While true, every commit applies the search notes it made, as when a search view is
    /// open: it searches again after each change, which then finds nothing left to apply
    /// (and no write of its own to make). Otherwise they wait for `searchIndexBatch`.
    public var appliesSearchNotesAtEveryCommit: Bool {
        get { searchNotesPerCommit.count == 1 }
        set { searchNotesPerCommit.count = newValue ? 1 : Self.searchIndexBatch }
    }

    /// Opens (creating or migrating) the cache at `location`. A corrupt file, or one
    /// written by a newer version, is moved aside and a fresh cache created: `recovery`
    /// says so, for the log. `sizeLimitBytes` below `minimumSizeLimitBytes` is refused.
    /// With a `secret` the file is encrypted at rest (a plain one is encrypted first); a
    /// secret that does not open an encrypted file, or none for one, throws `.cacheKey` and
    /// leaves the file as it was (`CacheSealing`).
    public convenience init(location: SQLiteLocation, sizeLimitBytes: Int64 = ChatCache.defaultSizeLimitBytes,
                            secret: CacheSecret? = nil) throws(ParleyError) {
        guard sizeLimitBytes >= Self.minimumSizeLimitBytes else {
            throw ParleyError.invalidArgument(
                "cache size limit must be at least \(Self.minimumSizeLimitBytes) bytes (64 MiB), got \(sizeLimitBytes)")
        }
        try self.init(location: location, uncheckedSizeLimitBytes: sizeLimitBytes, secret: secret)
    }

    /// Any positive limit, so that tests can exercise eviction with small files.
    init(location: SQLiteLocation, uncheckedSizeLimitBytes: Int64, secret: CacheSecret? = nil) throws(ParleyError) {
        guard uncheckedSizeLimitBytes > 0 else {
            throw ParleyError.invalidArgument("cache size limit must be positive, got \(uncheckedSizeLimitBytes)")
        }
        if case .file(let path) = location {
            sealedKey = try CacheSealing.register(path: path, secret: secret)
        } else {
            sealedKey = nil
        }
        do throws(ParleyError) {
            database = try SQLiteDatabase(location: location, migrations: Self.migrations)
        } catch {
            sealedKey?.release()
            throw error
        }
        sizeLimitBytes = uncheckedSizeLimitBytes
        readsOnly = false
        let perCommit = searchNotesPerCommit
        database.beforeCommit = { (database) throws(ParleyError) in
            try Self.indexChangedMessages(database, once: perCommit.count)
        }
        guard case .file(let path) = location else { return }
        let journalPath = OutboxJournal.path(forCache: path)
        let sealedBy = sealedKey == nil ? nil : path
        let contents = OutboxJournal.read(path: journalPath, sealedBy: sealedBy)
        if case .movedAside(.corrupt(let detail), let movedTo)? = database.recovery {
            // A damaged sealed file is read under the same key (a plain one as it is).
            var movedKey: SealedFileKey?
            if sealedKey != nil, case .sealed? = try? CacheSealing.kind(of: movedTo) {
                movedKey = SealedFileKey.sharing(path, with: movedTo)
            }
            var salvage = salvageUnsentMessages(from: movedTo, reason: detail)
            movedKey?.release()
            restoreFromJournal(contents, into: &salvage)
            self.salvage = salvage
            if contents.failure != nil && SQLiteFiles.exists(journalPath) {
                // Kept beside the damaged file for inspection; a fresh journal follows.
                _ = rename(journalPath, movedTo + ".outbox")
            }
        }
        // The journal is rewritten to what the cache holds when the two disagree (an older
        // version kept none, a crash fell between a commit and its append) or it grew: from
        // here on, each change is appended after its commit. Without a journal (it could not
        // be written) the cache works as before, and a later recovery says its losses are unknown.
        journal = try? OutboxJournal(path: journalPath, records: journalRecordsFromCache(), current: contents, sealedBy: sealedBy)
    }

    /// A read-only second connection to the cache file at `path` (opened by a `ChatCache`
    /// already): only the read methods work; writes fail.
    public init(readerOf path: String) throws(ParleyError) {
        database = try SQLiteDatabase(readingExisting: path)
        sizeLimitBytes = Self.minimumSizeLimitBytes
        readsOnly = true
        sealedKey = nil
    }

    /// The registration of the key of an encrypted cache file (nil: plain, in memory, or a
    /// reader, which uses its writer's).
    let sealedKey: SealedFileKey?

    /// The file is encrypted at rest.
    public var isEncrypted: Bool { sealedKey != nil }

    /// After a damaged file was replaced: the unsent messages carried over from it, and
    /// what could not be (see `CacheSalvage`). Nil when the file opened as it was.
    public private(set) var salvage: CacheSalvage?

    /// The outbox journal of a file cache (nil in memory, read-only, or when it could not be
    /// opened) and the operations waiting for the outermost transaction's commit.
    var journal: OutboxJournal?
    var journalPending: [OutboxJournal.Operation] = []

    /// Opening skipped the full structural check of a large file (`SQLiteDatabase.quickCheck`
    /// runs it later).
    public var integrityCheckDeferred: Bool { database.integrityCheckDeferred }

    /// Nil when the file opened as it was; otherwise where the unusable file was moved.
    public var recovery: SQLiteRecovery? { database.recovery }

    /// The schema version in effect (the newest migration once opened).
    public var schemaVersion: Int32 { database.userVersion }

    /// Gives the page cache's memory back (`SQLiteDatabase.releaseMemory`).
    public func releaseMemory() { database.releaseMemory() }

    /// Closes the database; later calls throw `.invalidState`. Idempotent.
    public func close() {
        database.close()
        journal?.close()
        journal = nil
        sealedKey?.release()
    }

    /// Runs `body` atomically: everything it does to the cache is committed together or
    /// not at all. Nested calls are savepoints.
    @discardableResult
    public func transaction<T>(_ body: () throws(ParleyError) -> T) throws(ParleyError) -> T {
        guard journal != nil else { return try database.transaction(body) }
        // Journal records wait for the commit: what a rollback undoes is never journaled.
        let outermost = !database.isInTransaction
        let mark = journalPending.count
        let value: T
        do throws(ParleyError) {
            value = try database.transaction(body)
        } catch {
            journalPending.removeSubrange(min(mark, journalPending.count)...)
            throw error
        }
        if outermost { flushJournal() }
        return value
    }

    /// Runs `body`'s reads in one read transaction (one committed state for all of them);
    /// inside a transaction already, simply runs it. Works on a read-only connection.
    public func transactionForReading<T>(_ body: () throws(ParleyError) -> T) throws(ParleyError) -> T {
        guard !database.isInTransaction else { return try body() }
        try database.execute("BEGIN DEFERRED")
        do throws(ParleyError) {
            let value = try body()
            try database.execute("COMMIT")
            return value
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }

    // MARK: Meta

    /// The meta value stored under `key` (e.g. "last_event_id", "current_user").
    public func metaValue(_ key: String) throws(ParleyError) -> String? {
        var value: String?
        try database.statement("SELECT value FROM meta WHERE key = ?1").rows([.text(key)]) { row in
            value = row.string(0)
        }
        return value
    }

    /// Stores `value` under `key`, replacing any previous value.
    public func setMetaValue(_ value: String, forKey key: String) throws(ParleyError) {
        try database.statement(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        ).run([.text(key), .text(value)])
    }

    /// Removes `key`; true when it was there.
    @discardableResult
    public func removeMetaValue(_ key: String) throws(ParleyError) -> Bool {
        try database.statement("DELETE FROM meta WHERE key = ?1").run([.text(key)]) > 0
    }

    // MARK: Sync tokens

    /// The changelog token saved for `scope` (`channelsTokenScope`, `messagesTokenScope(...)`).
    public func syncToken(scope: String) throws(ParleyError) -> String? {
        var token: String?
        try database.statement("SELECT token FROM sync_tokens WHERE scope = ?1").rows([.text(scope)]) { row in
            token = row.string(0)
        }
        return token
    }

    /// Saves the `next` token of a changelog answer for `scope`.
    public func setSyncToken(_ token: String, scope: String) throws(ParleyError) {
        try database.statement(
            "INSERT INTO sync_tokens (scope, token) VALUES (?1, ?2) ON CONFLICT (scope) DO UPDATE SET token = excluded.token"
        ).run([.text(scope), .text(token)])
    }

    /// Forgets the token of `scope` (an expired token resets what it covers); true when one was saved.
    @discardableResult
    public func removeSyncToken(scope: String) throws(ParleyError) -> Bool {
        try database.statement("DELETE FROM sync_tokens WHERE scope = ?1").run([.text(scope)]) > 0
    }

    /// Forgets every mark of a channel list held whole (the channel changelog starts over:
    /// changes may have been missed).
    public func removeChannelListMarks() throws(ParleyError) {
        try database.statement("DELETE FROM sync_tokens WHERE substr(scope, 1, 13) = 'channel_list:'").run()
    }

    /// Forgets every saved token.
    public func removeAllSyncTokens() throws(ParleyError) {
        try database.statement("DELETE FROM sync_tokens").run()
    }

    // MARK: Clearing

    /// `clear_cached_data`: removes everything — channels, messages, chunks, tokens, meta,
    /// local (pending/failed) messages and the outbox — then compacts the file. The schema
    /// stays; the cache is usable afterwards.
    public func clear() throws(ParleyError) {
        try transaction { () throws(ParleyError) in
            // Emptied at once, rather than a delete per message through the noted changes.
            try database.execute("INSERT INTO message_search (message_search) VALUES ('delete-all')")
            for table in Self.allTables {
                try database.execute("DELETE FROM \(table)")
            }
        }
        // Nothing is unsent any more.
        try? journal?.rewrite([])
        // Outside the transaction (VACUUM cannot run inside one): give the space back to
        // the file system, since clearing is how an app frees it. In-memory: nothing to do.
        if case .file = database.location {
            try database.execute("VACUUM")
            try database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    // MARK: Helpers shared by the extensions

    /// Reads one integer from a single-row query (0 when there is no row).
    func scalarInt(_ sql: String, _ values: [SQLiteValue] = []) throws(ParleyError) -> Int64 {
        var result: Int64 = 0
        try database.statement(sql).rows(values) { row in result = row.int64(0) }
        return result
    }

    /// A JSON array text of strings, bound where SQL reads a list with `json_each`.
    static func jsonArrayText(_ strings: [String]) -> String {
        JSONValue.array(strings.map { .string($0) }).canonicalText
    }
}

@available(*, unavailable, message: "a ChatCache belongs to its client's serial engine executor")
extension ChatCache: Sendable {}
