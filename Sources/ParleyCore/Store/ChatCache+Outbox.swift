// Local (pending / failed) messages and the outbox of requests waiting to be sent.
//
// Durability: `insertPendingMessage(_:outbox:)` writes the pending message and its outbox
// row in one committed transaction, before the engine does any network I/O for it. In WAL
// mode with synchronous=NORMAL a committed transaction survives the process being killed
// (not necessarily a power loss), which is what "accepted by send survives a crash" needs.
//
// The outbox journal (`OutboxJournal`, `<cache file>.outbox`) keeps the unsent messages a
// second time, apart from the SQLite file, so that a file destroyed as a whole (header
// overwritten, truncated) does not take them along: after the commit that accepts a message,
// an "add" record with its pending message and outbox request is appended; after the commit
// that removes its outbox row (sent, canceled, removed), a "done" record.
// Records are queued while a transaction is open and written when the outermost one commits
// (dropped when it, or the savepoint that made them, rolls back). The guarantee is the
// cache's own (a process crash, not a power loss: no fsync); the one window, a crash between
// the commit and the append, loses only the journal's copy of that change, and every open
// rewrites the journal from the cache when they disagree, so it matters only if the file is
// destroyed before the next open.

extension ChatCache {
    /// Stores a message the app just sent, before any network I/O: it must have a
    /// non-empty `req_id` (unique among local messages), `channel_url` and `created_at`;
    /// `message_id`, if present, must be 0. The stored JSON gets `message_id` 0 and
    /// `sending_status` "pending" (returned in `CachedLocalMessage.json`). With `outbox`,
    /// the request is queued in the same transaction (both or neither are stored).
    @discardableResult
    public func insertPendingMessage(_ message: JSONValue, outbox: OutboxRequest? = nil) throws(ParleyError) -> CachedLocalMessage {
        let reader = try JSONReader(message, path: "message", errorCode: .invalidArgument)
        let reqID = try reader.string("req_id")
        guard !reqID.isEmpty else { throw reader.error("req_id", "a pending message needs a non-empty req_id") }
        let channelURL = try reader.string("channel_url")
        guard !channelURL.isEmpty else { throw reader.error("channel_url", "must not be empty") }
        let createdAt = try reader.int("created_at")
        if let messageID = try reader.optionalInt("message_id"), messageID != 0 {
            throw reader.error("message_id", "a pending message has message_id 0, got \(messageID)")
        }
        var fields = reader.fields
        fields["message_id"] = .int(0)
        fields["sending_status"] = .string(LocalSendingStatus.pending.rawValue)
        let json = JSONValue.object(fields).canonicalText
        return try transaction { () throws(ParleyError) in
            let exists = try scalarInt("SELECT count(*) FROM local_messages WHERE req_id = ?1", [.text(reqID)]) > 0
            guard !exists else {
                throw ParleyError.invalidArgument("message.req_id: a local message with req_id '\(reqID)' already exists")
            }
            try database.statement("""
                INSERT INTO local_messages (req_id, channel_url, created_at, sending_status, json)
                VALUES (?1, ?2, ?3, 'pending', ?4)
                """).run([.text(reqID), .text(channelURL), .integer(createdAt), .text(json)])
            if let outbox {
                try enqueueOutbox(
                    reqID: reqID, channelURL: channelURL, kind: outbox.kind, requestJSON: outbox.requestJSON, attempts: outbox.attempts)
                journal(.add(OutboxJournal.Record(
                    reqID: reqID, channelURL: channelURL, createdAt: createdAt, kind: outbox.kind, messageJSON: json,
                    requestJSON: outbox.requestJSON)))
            }
            return CachedLocalMessage(
                reqID: reqID, channelURL: channelURL, createdAt: createdAt, status: .pending,
                errorCode: 0, errorMessage: "", json: json)
        }
    }

    /// The local message with `reqID`, nil when there is none.
    public func localMessage(reqID: String) throws(ParleyError) -> CachedLocalMessage? {
        var result: CachedLocalMessage?
        try database.statement(Self.localMessageByReqIDSQL)
            .rows([.text(reqID)]) { row throws(ParleyError) in result = try self.readLocalMessage(row) }
        return result
    }

    /// The channel's pending and failed messages (or only those with `status`), in the
    /// order they were created. They sort after every succeeded message of the channel.
    public func localMessages(channelURL: String, status: LocalSendingStatus? = nil) throws(ParleyError) -> [CachedLocalMessage] {
        var result: [CachedLocalMessage] = []
        try database.statement(Self.localMessagesOfChannelSQL).rows([.text(channelURL), SQLiteValue(status?.rawValue)]) {
            row throws(ParleyError) in
            result.append(try self.readLocalMessage(row))
        }
        return result
    }

    /// Appends the JSON texts of the channel's pending and failed messages, in creation
    /// order, to a comma-separated JSON array being built in `buffer` (see
    /// `appendMessageTexts`). Returns how many.
    @discardableResult
    public func appendLocalMessageTexts(channelURL: String, to buffer: inout [UInt8]) throws(ParleyError) -> Int {
        var count = 0
        try database.statement("SELECT json FROM local_messages WHERE channel_url = ?1 ORDER BY local_id")
            .rows([.text(channelURL)]) { row throws(ParleyError) in
                try appendStoredJSON(row, 0, "a local message", to: &buffer)
                count += 1
            }
        return count
    }

    /// Marks a local message failed with `error` (its JSON's `sending_status` becomes
    /// "failed") and records the failure on its outbox row: `retryable` false means
    /// auto-resend skips it (a manual resend calls `markPending`). False when there is
    /// no local message with `reqID`.
    @discardableResult
    public func markFailed(reqID: String, error: ParleyError, retryable: Bool) throws(ParleyError) -> Bool {
        try transaction { () throws(ParleyError) in
            guard try setLocalStatus(reqID: reqID, .failed, errorCode: error.code.rawValue, errorMessage: error.message) else {
                return false
            }
            try database.statement("""
                UPDATE outbox SET retryable = ?2, last_error_code = ?3, last_error_message = ?4 WHERE req_id = ?1
                """).run([.text(reqID), SQLiteValue(retryable), .integer(Int64(error.code.rawValue)), .text(error.message)])
            return true
        }
    }

    /// Puts a failed message back to pending for a resend (same `req_id`, so the server
    /// dedups): error cleared, outbox row retryable again; `resetAttempts` (a resend the
    /// application asked for) gives automatic resends their full count again. False when
    /// there is none.
    @discardableResult
    public func markPending(reqID: String, resetAttempts: Bool = true) throws(ParleyError) -> Bool {
        try transaction { () throws(ParleyError) in
            guard try setLocalStatus(reqID: reqID, .pending, errorCode: 0, errorMessage: "") else { return false }
            try database.statement("UPDATE outbox SET retryable = 1, attempts = CASE WHEN ?2 THEN 0 ELSE attempts END WHERE req_id = ?1")
                .run([.text(reqID), SQLiteValue(resetAttempts)])
            return true
        }
    }

    private func setLocalStatus(
        reqID: String, _ status: LocalSendingStatus, errorCode: Int32, errorMessage: String
    ) throws(ParleyError) -> Bool {
        guard let local = try localMessage(reqID: reqID) else { return false }
        // Rewriting the JSON costs a parse, but only on a state change, never on reads.
        var fields = try JSONReader.parse(local.json, path: "local message", errorCode: .cache).fields
        fields["sending_status"] = .string(status.rawValue)
        // A failed message carries its failure wherever it is read (pages, cached reads).
        fields["error_code"] = status == .failed ? .int(Int64(errorCode)) : nil
        fields["error_message"] = status == .failed ? .string(errorMessage) : nil
        try database.statement("""
            UPDATE local_messages SET sending_status = ?2, error_code = ?3, error_message = ?4, json = ?5 WHERE req_id = ?1
            """).run([
                .text(reqID), .text(status.rawValue), .integer(Int64(errorCode)), .text(errorMessage),
                .text(JSONValue.object(fields).canonicalText),
            ])
        return true
    }

    /// Removes a local message and its outbox row (cancel, or "remove failed message").
    /// True when it existed.
    @discardableResult
    public func removeLocalMessage(reqID: String) throws(ParleyError) -> Bool {
        try transaction { () throws(ParleyError) in
            if try database.statement("DELETE FROM outbox WHERE req_id = ?1").run([.text(reqID)]) > 0 {
                journal(.done(reqID: reqID))
            }
            return try database.statement("DELETE FROM local_messages WHERE req_id = ?1").run([.text(reqID)]) > 0
        }
    }

    /// Removes the channel's failed messages (and their outbox rows); returns their req_ids
    /// in creation order.
    @discardableResult
    public func removeFailedMessages(channelURL: String) throws(ParleyError) -> [String] {
        try transaction { () throws(ParleyError) in
            let failed = try localMessages(channelURL: channelURL, status: .failed).map(\.reqID)
            for reqID in failed {
                try removeLocalMessage(reqID: reqID)
            }
            return failed
        }
    }

    // MARK: Outbox

    /// Queues a request to send. Call it inside the transaction that stores what it sends
    /// (`insertPendingMessage(_:outbox:)` does). `reqID` must be unique in the outbox.
    public func enqueueOutbox(
        reqID: String, channelURL: String, kind: String, requestJSON: String, attempts: Int = 0
    ) throws(ParleyError) {
        guard !reqID.isEmpty else { throw ParleyError.invalidArgument("outbox: req_id must not be empty") }
        let exists = try scalarInt("SELECT count(*) FROM outbox WHERE req_id = ?1", [.text(reqID)]) > 0
        guard !exists else { throw ParleyError.invalidArgument("outbox: req_id '\(reqID)' is already queued") }
        try database.statement(
            "INSERT INTO outbox (req_id, channel_url, kind, request_json, attempts) VALUES (?1, ?2, ?3, ?4, ?5)"
        ).run([.text(reqID), .text(channelURL), .text(kind), .text(requestJSON), .integer(Int64(attempts))])
    }

    /// Queued requests in send order (oldest first), of one channel or of all;
    /// `retryableOnly` leaves out those whose last failure cannot be fixed by resending,
    /// `pendingOnly` those of failed messages (only a resend makes them pending again).
    public func outboxEntries(
        channelURL: String? = nil, retryableOnly: Bool = false, pendingOnly: Bool = false, limit: Int? = nil
    ) throws(ParleyError) -> [OutboxEntry] {
        var result: [OutboxEntry] = []
        // LIMIT -1: no limit. The drain takes only the oldest entry: reading them all for it
        // made a burst of n queued sends read n²/2 entries.
        try database.statement("""
            SELECT sequence, req_id, channel_url, kind, request_json, attempts, retryable, last_error_code, last_error_message
            FROM outbox WHERE (?1 IS NULL OR channel_url = ?1) AND (?2 = 0 OR retryable = 1)
            AND (?3 = 0 OR req_id IN (SELECT req_id FROM local_messages WHERE sending_status = 'pending'))
            ORDER BY sequence LIMIT ?4
            """).rows([SQLiteValue(channelURL), SQLiteValue(retryableOnly), SQLiteValue(pendingOnly), .integer(Int64(limit ?? -1))]) { row in
            result.append(OutboxEntry(
                sequence: row.int64(0), reqID: row.string(1) ?? "", channelURL: row.string(2) ?? "",
                kind: row.string(3) ?? "", requestJSON: row.string(4) ?? "", attempts: row.int(5),
                retryable: row.bool(6), lastErrorCode: Int32(truncatingIfNeeded: row.int64(7)),
                lastErrorMessage: row.string(8) ?? ""))
        }
        return result
    }

    /// The channels with queued requests, ordered by their oldest request (the order in
    /// which auto-resend visits them, one channel at a time).
    public func outboxChannelURLs(retryableOnly: Bool = false, pendingOnly: Bool = false) throws(ParleyError) -> [String] {
        var result: [String] = []
        try database.statement("""
            SELECT channel_url FROM outbox WHERE (?1 = 0 OR retryable = 1)
            AND (?2 = 0 OR req_id IN (SELECT req_id FROM local_messages WHERE sending_status = 'pending'))
            GROUP BY channel_url ORDER BY min(sequence)
            """).rows([SQLiteValue(retryableOnly), SQLiteValue(pendingOnly)]) { row in result.append(row.string(0) ?? "") }
        return result
    }

    /// Counts a send attempt of the queued request (before it goes out). False when not queued.
    @discardableResult
    public func recordOutboxAttempt(reqID: String) throws(ParleyError) -> Bool {
        try database.statement("UPDATE outbox SET attempts = attempts + 1 WHERE req_id = ?1").run([.text(reqID)]) > 0
    }

    /// Removes a queued request (sent, or canceled). False when not queued.
    @discardableResult
    public func removeOutboxEntry(reqID: String) throws(ParleyError) -> Bool {
        guard try database.statement("DELETE FROM outbox WHERE req_id = ?1").run([.text(reqID)]) > 0 else { return false }
        journal(.done(reqID: reqID))
        return true
    }

    // MARK: Outbox journal

    /// Queues a journal record for the commit of the open transaction (written at once
    /// outside one: the statement before it committed itself).
    func journal(_ operation: OutboxJournal.Operation) {
        guard journal != nil else { return }
        journalPending.append(operation)
        if !database.isInTransaction { flushJournal() }
    }

    /// Writes the queued records (after a commit). A journal that could not be written, or
    /// that has grown too long, is rebuilt from the cache.
    func flushJournal() {
        guard let journal, !journalPending.isEmpty else { return }
        let operations = journalPending
        journalPending.removeAll()
        do throws(ParleyError) {
            try journal.append(operations)
            if journal.needsCompaction { try journal.rewrite(try journalRecordsFromCache()) }
        } catch {
            // The file may miss a record: removed by `append`, rebuilt here if possible (if
            // not, a recovery says its losses are unknown, which is the truth).
            try? journal.rewrite(try journalRecordsFromCache())
        }
    }

    /// The journal records of the cache's unsent messages, in outbox order.
    func journalRecordsFromCache() throws(ParleyError) -> [OutboxJournal.Record] {
        var records: [OutboxJournal.Record] = []
        try database.statement("""
            SELECT o.req_id, o.channel_url, l.created_at, o.kind, l.json, o.request_json
            FROM outbox o JOIN local_messages l ON l.req_id = o.req_id ORDER BY o.sequence
            """).rows { row in
            records.append(OutboxJournal.Record(
                reqID: row.string(0) ?? "", channelURL: row.string(1) ?? "", createdAt: row.int64(2),
                kind: row.string(3) ?? "", messageJSON: row.string(4) ?? "{}", requestJSON: row.string(5) ?? "{}"))
        }
        return records
    }

    static let localMessageColumns = "req_id, channel_url, created_at, sending_status, error_code, error_message, json"

    func readLocalMessage(_ row: SQLiteStatement) throws(ParleyError) -> CachedLocalMessage {
        CachedLocalMessage(
            reqID: row.string(0) ?? "", channelURL: row.string(1) ?? "", createdAt: row.int64(2),
            status: LocalSendingStatus(rawValue: row.string(3) ?? "") ?? .failed,
            errorCode: Int32(truncatingIfNeeded: row.int64(4)), errorMessage: row.string(5) ?? "", json: try storedJSON(row, 6, "a local message"))
    }
}

/// SQL texts made once: a statement looked up by the same text storage skips hashing it
/// (`SQLiteDatabase.statement(_:)`).
extension ChatCache {
    static let localMessageByReqIDSQL = "SELECT \(localMessageColumns) FROM local_messages WHERE req_id = ?1"
    static let localMessagesOfChannelSQL = """
        SELECT \(localMessageColumns) FROM local_messages
        WHERE channel_url = ?1 AND (?2 IS NULL OR sending_status = ?2) ORDER BY local_id
        """
}
