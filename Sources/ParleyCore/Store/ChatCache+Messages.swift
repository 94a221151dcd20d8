// Server messages: upsert with dedupe (by message_id, and by req_id against local
// messages), update-only-when-newer, delete, and keyset pages with filters.

extension ChatCache {
    /// The columns a stored server message needs, read from its object.
    struct MessageColumns {
        var messageID: Int64
        var channelURL: String
        var createdAt: Int64
        var updatedAt: Int64
        var reqID: String
        var type: String
        var customType: String
        var senderID: String
        var parentMessageID: Int64
        var isReplyToChannel: Bool
        /// The id of the poll the message carries (0: none).
        var pollID: Int64
        /// What search finds it by (ChatCache+Search.swift): its text and its file's name
        /// ("" when absent or not text).
        var searchText: String
        var searchFileName: String
        /// How many translations it carries: the server only adds to them until an edit
        /// (which moves `updated_at`), so more of them at the same `updated_at` is newer.
        var translationCount: Int

        init(_ message: JSONValue) throws(ParleyError) {
            let reader = try JSONReader(message, path: "message", errorCode: .protocolViolation)
            messageID = try reader.int("message_id", in: 1...Int64.max)
            channelURL = try reader.string("channel_url")
            guard !channelURL.isEmpty else { throw reader.error("channel_url", "must not be empty") }
            createdAt = try reader.int("created_at")
            updatedAt = try reader.int("updated_at", default: 0)
            reqID = try reader.string("req_id", default: "")
            type = try reader.string("type", default: "")
            customType = try reader.string("custom_type", default: "")
            senderID = try reader.optionalObject("user")?.string("user_id", default: "") ?? ""
            parentMessageID = try reader.int("parent_message_id", default: 0)
            isReplyToChannel = try reader.bool("is_reply_to_channel", default: false)
            pollID = try reader.optionalObject("poll")?.int("id", default: 0) ?? 0
            searchText = message[WireField.message]?.stringValue ?? ""
            searchFileName = message[WireField.file]?[WireField.name]?.stringValue ?? ""
            translationCount = message[WireField.translations]?.objectValue?.count ?? 0
        }
    }

    /// Stores one message the server sent (it must have `message_id` > 0, `channel_url`
    /// and `created_at`; else `.protocolViolation` naming the field).
    ///
    /// - A local (pending/failed) message of the same channel with the same non-empty
    ///   `req_id` is replaced by it, and its outbox row removed: `.replacedLocal`.
    /// - A message already stored under `message_id` is replaced only when the incoming
    ///   `updated_at` is newer, or when `force` is true (reaction, thread-info and poll
    ///   changes do not move `updated_at`); otherwise it is kept (`.unchanged`).
    @discardableResult
    public func upsertMessage(_ message: JSONValue, force: Bool = false) throws(ParleyError) -> MessageUpsertOutcome {
        let columns = try MessageColumns(message)
        return try transaction { () throws(ParleyError) in
            try storeMessage(columns, json: message.canonicalText, force: force)
        }
    }

    /// Stores several messages in one transaction (all or none); outcomes in input order.
    @discardableResult
    public func upsertMessages(_ messages: [JSONValue], force: Bool = false) throws(ParleyError) -> [MessageUpsertOutcome] {
        // Validate everything first so that a bad element fails before any write.
        var prepared: [(MessageColumns, JSONValue)] = []
        prepared.reserveCapacity(messages.count)
        for (index, message) in messages.enumerated() {
            do throws(ParleyError) {
                prepared.append((try MessageColumns(message), message))
            } catch {
                throw ParleyError(error.code, "messages[\(index)]: \(error.message)")
            }
        }
        return try transaction { () throws(ParleyError) in
            var outcomes: [MessageUpsertOutcome] = []
            outcomes.reserveCapacity(prepared.count)
            for (columns, message) in prepared {
                outcomes.append(try storeMessage(columns, json: message.canonicalText, force: force))
            }
            return outcomes
        }
    }

    /// The translations a stored message carries (0 when its text cannot be read).
    static func translationCount(storedJSON: String) -> Int {
        (try? JSONValue.parse(storedJSON))?[WireField.translations]?.objectValue?.count ?? 0
    }

    /// The upsert itself; runs inside the caller's transaction.
    func storeMessage(_ columns: MessageColumns, json: String, force: Bool) throws(ParleyError) -> MessageUpsertOutcome {
        var replacedReqID: String?
        if !columns.reqID.isEmpty {
            let removed = try database.statement(
                "DELETE FROM local_messages WHERE req_id = ?1 AND channel_url = ?2"
            ).run([.text(columns.reqID), .text(columns.channelURL)])
            if removed > 0 {
                replacedReqID = columns.reqID
                if try database.statement("DELETE FROM outbox WHERE req_id = ?1").run([.text(columns.reqID)]) > 0 {
                    journal(.done(reqID: columns.reqID))
                }
            }
        }
        var stored: (updatedAt: Int64, json: String)?
        try database.statement("SELECT updated_at, json FROM messages WHERE message_id = ?1")
            .rows([.integer(columns.messageID)]) { row in stored = (row.int64(0), row.string(1) ?? "") }
        let outcome: MessageUpsertOutcome
        if let stored {
            let isNewer = columns.updatedAt > stored.updatedAt
                || (columns.updatedAt == stored.updatedAt && columns.translationCount > 0
                    && columns.translationCount > Self.translationCount(storedJSON: stored.json))
            if (isNewer || force) && !utf8Equal(stored.json, json) {
                try writeMessage(columns, json: json)
                outcome = .updated
            } else {
                outcome = .unchanged
            }
        } else {
            try writeMessage(columns, json: json)
            outcome = .inserted
        }
        if let replacedReqID { return .replacedLocal(reqID: replacedReqID) }
        return outcome
    }

    private func writeMessage(_ columns: MessageColumns, json: String) throws(ParleyError) {
        let check = StoredTextCheck.value(of: json)
        try database.statement("""
            INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type,
                                  sender_id, parent_message_id, is_reply_to_channel, json, json_check, poll_id,
                                  search_text, search_file_name, optional_members)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
            ON CONFLICT (message_id) DO UPDATE SET
                channel_url = excluded.channel_url, created_at = excluded.created_at, updated_at = excluded.updated_at,
                req_id = excluded.req_id, type = excluded.type, custom_type = excluded.custom_type,
                sender_id = excluded.sender_id, parent_message_id = excluded.parent_message_id,
                is_reply_to_channel = excluded.is_reply_to_channel, json = excluded.json, json_check = excluded.json_check,
                poll_id = excluded.poll_id, search_text = excluded.search_text, search_file_name = excluded.search_file_name,
                optional_members = excluded.optional_members
            """).run([
                .integer(columns.messageID), .text(columns.channelURL), .integer(columns.createdAt),
                .integer(columns.updatedAt), .text(columns.reqID), .text(columns.type), .text(columns.customType),
                .text(columns.senderID), .integer(columns.parentMessageID), SQLiteValue(columns.isReplyToChannel),
                .text(json), .integer(check), .integer(columns.pollID), .text(columns.searchText),
                .text(columns.searchFileName), OptionalMemberSpans.scanning(json).map { .blob($0.encoded(textCheck: check)) } ?? .null,
            ])
    }

    /// Removes a server message (a delete event or changelog); true when it was stored.
    /// Chunks are unaffected: a range stays continuous when a message leaves it.
    @discardableResult
    public func deleteMessage(messageID: Int64) throws(ParleyError) -> Bool {
        let delete = { () throws(ParleyError) -> Bool in
            try self.database.statement("DELETE FROM messages WHERE message_id = ?1").run([.integer(messageID)]) > 0
        }
        // In a transaction of its own when called alone, so that the search index follows.
        return database.isInTransaction ? try delete() : try transaction(delete)
    }

    /// Removes several messages in one transaction; returns the ids that were stored.
    @discardableResult
    public func deleteMessages(messageIDs: [Int64]) throws(ParleyError) -> [Int64] {
        try transaction { () throws(ParleyError) in
            var removed: [Int64] = []
            for id in messageIDs where try deleteMessage(messageID: id) {
                removed.append(id)
            }
            return removed
        }
    }

    /// The stored server message with this id.
    public func message(id messageID: Int64) throws(ParleyError) -> CachedMessage? {
        var result: CachedMessage?
        try database.statement(Self.messageByID)
            .rows([.integer(messageID)]) { row throws(ParleyError) in result = try self.readMessage(row) }
        return result
    }

    /// The stored server message of `channelURL` sent with `reqID` (non-empty).
    public func message(channelURL: String, reqID: String) throws(ParleyError) -> CachedMessage? {
        guard !reqID.isEmpty else { return nil }
        var result: CachedMessage?
        try database.statement(
            "SELECT \(Self.messageColumns) FROM messages WHERE channel_url = ?1 AND req_id = ?2 LIMIT 1"
        ).rows([.text(channelURL), .text(reqID)]) { row throws(ParleyError) in result = try self.readMessage(row) }
        return result
    }

    // MARK: Pages

    /// Up to `limit` messages of the channel older than `key` (`<= key` when `inclusive`)
    /// that match `filter`: the nearest ones to `key`, returned oldest first.
    public func messages(
        channelURL: String, before key: MessageKey, inclusive: Bool = false, limit: Int,
        filter: MessageFilter = MessageFilter()
    ) throws(ParleyError) -> [CachedMessage] {
        let comparison = inclusive ? "<=" : "<"
        var page = try messagePage(
            channelURL: channelURL, key: key, limit: limit, filter: filter,
            bound: "(created_at, message_id) \(comparison) (?2, ?3)", order: "DESC")
        page.withUnsafeMutableBufferPointer { $0.reverse() }  // moves, where Array's own reverse copied each message
        return page
    }

    /// Appends the stored JSON texts of up to `limit` messages of the channel older than
    /// `key` — the nearest ones, oldest first — to `buffer`, each preceded by a comma unless
    /// the buffer is empty or ends with `[`. The bytes go from SQLite straight into the
    /// buffer: no per-row objects, for results handed to the app as one JSON array.
    /// Returns how many texts were appended.
    @discardableResult
    public func appendMessageTexts(
        channelURL: String, before key: MessageKey, limit: Int, to buffer: inout [UInt8]
    ) throws(ParleyError) -> Int {
        guard limit >= 0 else { throw ParleyError.invalidArgument("message page limit must not be negative, got \(limit)") }
        if limit == 0 { return 0 }
        // Walk the index newest first (what LIMIT needs), then lay the texts out oldest first.
        let statement = try database.statement("""
            SELECT json, json_check, CASE WHEN json_check IS NULL THEN json_valid(json) END
            FROM messages WHERE channel_url = ?1 AND (created_at, message_id) < (?2, ?3)
            ORDER BY created_at DESC, message_id DESC LIMIT ?4
            """)
        var scratch: [UInt8] = []
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(min(limit, 1024))
        try statement.rows([.text(channelURL), .integer(key.createdAt), .integer(key.messageID), .integer(Int64(limit))]) { row throws(ParleyError) in
            let valid = row.withTextBytes(0) { bytes in
                guard Self.isStoredObject(bytes), Self.matchesCheck(bytes, row, check: 1, parsed: 2) else { return false }
                let start = scratch.count
                scratch.append(contentsOf: bytes)
                ranges.append(start..<scratch.count)
                return true
            }
            if valid == false { throw damaged("a message of \(channelURL)") }
        }
        buffer.reserveCapacity(buffer.count + scratch.count + ranges.count + 2)
        for range in ranges.reversed() {
            Self.appendArrayElement(scratch[range], to: &buffer)
        }
        return ranges.count
    }

    /// Appends one element's JSON text to a comma-separated JSON array being built.
    static func appendArrayElement(_ bytes: some Collection<UInt8>, to buffer: inout [UInt8]) {
        if let last = buffer.last, last != UInt8(ascii: "[") { buffer.append(UInt8(ascii: ",")) }
        buffer.append(contentsOf: bytes)
    }

    /// Up to `limit` messages of the channel newer than `key` (`>= key` when `inclusive`)
    /// that match `filter`: the nearest ones to `key`, oldest first.
    public func messages(
        channelURL: String, after key: MessageKey, inclusive: Bool = false, limit: Int,
        filter: MessageFilter = MessageFilter()
    ) throws(ParleyError) -> [CachedMessage] {
        let comparison = inclusive ? ">=" : ">"
        return try messagePage(
            channelURL: channelURL, key: key, limit: limit, filter: filter,
            bound: "(created_at, message_id) \(comparison) (?2, ?3)", order: "ASC")
    }

    /// How many of the channel's messages with keys in `from...to` match `filter` (the
    /// counts a gap check reports).
    public func messageCount(
        channelURL: String, from: MessageKey, to: MessageKey, filter: MessageFilter = MessageFilter()
    ) throws(ParleyError) -> Int {
        var values = Self.filterValues(filter)
        values.insert(contentsOf: [.text(channelURL), .integer(from.createdAt), .integer(from.messageID)], at: 0)
        values.append(contentsOf: [.integer(to.createdAt), .integer(to.messageID)])
        return Int(try scalarInt("""
            SELECT count(*) FROM messages
            WHERE channel_url = ?1 AND (created_at, message_id) >= (?2, ?3) AND (created_at, message_id) <= (?8, ?9)
            AND \(Self.filterSQL)
            """, values))
    }

    /// The channel's messages with keys in `from...through` that match `filter`, oldest first.
    public func messages(
        channelURL: String, from: MessageKey, through: MessageKey, filter: MessageFilter = MessageFilter()
    ) throws(ParleyError) -> [CachedMessage] {
        guard from <= through else { return [] }
        var values = Self.filterValues(filter)
        values.insert(contentsOf: [.text(channelURL), .integer(from.createdAt), .integer(from.messageID)], at: 0)
        values.append(contentsOf: [.integer(through.createdAt), .integer(through.messageID)])
        var result: [CachedMessage] = []
        try database.statement(Self.messagesInRangeSQL).rows(values) { row throws(ParleyError) in
            result.append(try self.readMessage(row, channelURL: channelURL))
        }
        return result
    }

    /// Whether the channel has any stored server message (one index probe, whatever their number).
    /// The channels with a cached message that carries a poll (index `messages_with_polls`).
    public func channelsWithPolls() throws(ParleyError) -> [String] {
        var urls: [String] = []
        try database.statement(
            "SELECT DISTINCT channel_url FROM messages WHERE poll_id != 0 ORDER BY channel_url"
        ).rows([]) { row in urls.append(row.string(0) ?? "") }
        return urls
    }

    /// The cached message of the channel that carries poll `pollID`, if any.
    public func messageID(carryingPoll pollID: Int64, channelURL: String) throws(ParleyError) -> Int64? {
        var id: Int64?
        try database.statement("""
            SELECT message_id FROM messages WHERE channel_url = ?1 AND poll_id = ?2 AND poll_id != 0 LIMIT 1
            """).rows([.text(channelURL), .integer(pollID)]) { row in id = row.int64(0) }
        return id
    }

    public func hasMessages(channelURL: String) throws(ParleyError) -> Bool {
        try scalarInt("SELECT EXISTS (SELECT 1 FROM messages WHERE channel_url = ?1)", [.text(channelURL)]) != 0
    }

    /// Number of stored server messages of the channel (all of them, unfiltered).
    public func messageCount(channelURL: String) throws(ParleyError) -> Int {
        Int(try scalarInt("SELECT count(*) FROM messages WHERE channel_url = ?1", [.text(channelURL)]))
    }

    private func messagePage(
        channelURL: String, key: MessageKey, limit: Int, filter: MessageFilter, bound: String, order: String
    ) throws(ParleyError) -> [CachedMessage] {
        guard limit >= 0 else { throw ParleyError.invalidArgument("message page limit must not be negative, got \(limit)") }
        if limit == 0 { return [] }
        var values = Self.filterValues(filter)
        values.insert(contentsOf: [.text(channelURL), .integer(key.createdAt), .integer(key.messageID)], at: 0)
        values.append(.integer(Int64(limit)))
        // One SQL text per (direction, inclusive): the filters are parameters that switch
        // themselves off when NULL, so the statement cache holds four page statements.
        let sql = """
            SELECT \(Self.messageColumns) FROM messages
            WHERE channel_url = ?1 AND \(bound) AND \(Self.filterSQL)
            ORDER BY created_at \(order), message_id \(order) LIMIT ?8
            """
        var page: [CachedMessage] = []
        page.reserveCapacity(min(limit, 1024))
        try database.statement(sql).rows(values) { row throws(ParleyError) in page.append(try self.readMessage(row, channelURL: channelURL)) }
        return page
    }

    /// Filter conditions on parameters ?4 type, ?5 custom types (JSON array), ?6 sender ids
    /// (JSON array), ?7 reply type (0 all, 1 none, 2 only reply to channel).
    static let filterSQL = """
        (?4 IS NULL OR type = ?4)
        AND (?5 IS NULL OR custom_type IN (SELECT value FROM json_each(?5)))
        AND (?6 IS NULL OR sender_id IN (SELECT value FROM json_each(?6)))
        AND (?7 = 0 OR parent_message_id = 0 OR (?7 = 2 AND is_reply_to_channel = 1))
        """

    static func filterValues(_ filter: MessageFilter) -> [SQLiteValue] {
        let replyCode: Int64 = switch filter.replyType {
        case .all: 0
        case .none: 1
        case .onlyReplyToChannel: 2
        }
        return [
            SQLiteValue(filter.messageType.wireType),
            SQLiteValue(filter.effectiveCustomTypes.map(jsonArrayText)),
            SQLiteValue(filter.effectiveSenderUserIDs.map(jsonArrayText)),
            .integer(replyCode),
        ]
    }

    /// Collections hand stored texts to the application without parsing them
    /// (Collections/MessageList.swift), so every read proves a text is what the cache wrote:
    /// by its check value (Store/StoredTextCheck.swift), or, for a row written before the
    /// cache kept one, by SQLite's JSON check.
    static let messageColumns = """
        message_id, channel_url, created_at, updated_at, req_id, json, json_check,
        CASE WHEN json_check IS NULL THEN json_valid(json) END, optional_members
        """
    private static let messageByID = "SELECT \(messageColumns) FROM messages WHERE message_id = ?1"

    /// Whether a message text read in `row` is the one the cache wrote: its check value in
    /// column `check` matches, or (none kept) SQLite's JSON check in column `parsed` passed.
    /// The caller still checks that it is an object in valid UTF-8 (`isStoredObject`): the
    /// check value vouches for the bytes, not for what wrote them.
    static func matchesCheck(_ text: UnsafeBufferPointer<UInt8>, _ row: SQLiteStatement, check: Int32, parsed: Int32) -> Bool {
        row.isNull(check) ? row.int64(parsed) != 0 : StoredTextCheck.value(of: text) == row.int64(check)
    }

    /// A row of `messageColumns`; `channelURL` is the one the query selected by, if it did
    /// (a page's rows then share that string instead of each making its own).
    func readMessage(_ row: SQLiteStatement, channelURL: String? = nil) throws(ParleyError) -> CachedMessage {
        var optionalMembers: OptionalMemberSpans?
        let json = row.withTextBytes(5) { text -> String? in
            guard text.count >= 2, text.first == UInt8(ascii: "{"), text.last == UInt8(ascii: "}"),
                Self.matchesCheck(text, row, check: 6, parsed: 7), let json = String(validUTF8: text)
            else { return nil }
            // Valid UTF-8: the string holds exactly these bytes, which the spans are checked against.
            optionalMembers = row.withBlobBytes(8) { OptionalMemberSpans(decoding: $0, checkedAgainst: text, textCheck: row.int64(6)) } ?? nil
            return json
        }
        guard let json = json ?? nil else { throw damaged("message \(row.int64(0))") }
        return CachedMessage(
            messageID: row.int64(0), channelURL: channelURL ?? row.string(1) ?? "", createdAt: row.int64(2),
            updatedAt: row.int64(3), reqID: row.string(4) ?? "", json: json, optionalMembers: optionalMembers)
    }
}

extension ChatCache {
    /// Removes the channel's server messages created at or before `offset` (the user's
    /// history now starts after it: reset history, hide with previous messages) and cuts
    /// the ranges there: what is left of a range starts after `offset` and reaches the
    /// oldest end the user can see. Returns the number of messages removed.
    @discardableResult
    public func truncateHistory(channelURL: String, through offset: Int64) throws(ParleyError) -> Int {
        try transaction { () throws(ParleyError) in
            let removed = try database.statement("DELETE FROM messages WHERE channel_url = ?1 AND created_at <= ?2")
                .run([.text(channelURL), .integer(offset)])
            try database.statement("DELETE FROM chunks WHERE channel_url = ?1 AND end_created_at <= ?2")
                .run([.text(channelURL), .integer(offset)])
            try database.statement("""
                UPDATE chunks SET start_created_at = ?2 + 1, start_message_id = -9223372036854775808, reaches_oldest = 1
                WHERE channel_url = ?1 AND start_created_at <= ?2
                """).run([.text(channelURL), .integer(offset)])
            return removed
        }
    }
}

extension ChatCache {
    /// The channel's cached messages sent by `senderID` (their copy of the sender carries
    /// the sender's role in the channel).
    public func messages(channelURL: String, senderID: String) throws(ParleyError) -> [CachedMessage] {
        var result: [CachedMessage] = []
        try database.statement(Self.messagesBySenderSQL)
            .rows([.text(channelURL), .text(senderID)]) { row throws(ParleyError) in result.append(try self.readMessage(row, channelURL: channelURL)) }
        return result
    }

    /// The cached replies to `parentMessageID` (they carry a summary of their parent).
    public func replies(to parentMessageID: Int64) throws(ParleyError) -> [CachedMessage] {
        var result: [CachedMessage] = []
        try database.statement(Self.repliesToParentSQL)
            .rows([.integer(parentMessageID)]) { row throws(ParleyError) in result.append(try self.readMessage(row)) }
        return result
    }
}

extension ChatCache {
    /// A stored JSON text as read: valid UTF-8 holding a JSON object (what the cache writes).
    /// Anything else is damage the checks at open did not see: the file is marked for
    /// replacement and the read fails, so that no invalid text ever reaches the application.
    func storedJSON(_ row: SQLiteStatement, _ column: Int32, _ what: @autoclosure () -> String) throws(ParleyError) -> String {
        // One pass: validating the UTF-8 gives the string.
        let text = row.withTextBytes(column) { bytes -> String? in
            guard bytes.count >= 2, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else { return nil }
            return String(validUTF8: bytes)
        }
        guard let text = text ?? nil else { throw damaged(what()) }
        return text
    }

    /// Appends a stored JSON text to an array being built (see `storedJSON`).
    func appendStoredJSON(_ row: SQLiteStatement, _ column: Int32, _ what: String, to buffer: inout [UInt8]) throws(ParleyError) {
        let valid = row.withTextBytes(column) { bytes in
            guard Self.isStoredObject(bytes) else { return false }
            Self.appendArrayElement(bytes, to: &buffer)
            return true
        }
        if valid != true { throw damaged(what) }
    }

    /// Canonical JSON of an object: `{` ... `}`, valid UTF-8.
    static func isStoredObject(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else { return false }
        return String(validUTF8: bytes) != nil
    }

    func damaged(_ what: String) -> ParleyError {
        let detail = "\(what) is not valid UTF-8 JSON"
        database.markDamaged(detail)
        return ParleyError(.cache, "the cache is damaged (\(detail)); it is replaced, unsent messages kept, when it is next opened")
    }
}

/// SQL texts made once: a statement looked up by the same text storage skips hashing it
/// (`SQLiteDatabase.statement(_:)`).
extension ChatCache {
    static let messagesInRangeSQL = """
        SELECT \(messageColumns) FROM messages
        WHERE channel_url = ?1 AND (created_at, message_id) >= (?2, ?3) AND (created_at, message_id) <= (?8, ?9)
        AND \(filterSQL)
        ORDER BY created_at, message_id
        """
    static let messagesBySenderSQL = "SELECT \(messageColumns) FROM messages WHERE channel_url = ?1 AND sender_id = ?2"
    static let repliesToParentSQL = "SELECT \(messageColumns) FROM messages WHERE parent_message_id = ?1"
}
