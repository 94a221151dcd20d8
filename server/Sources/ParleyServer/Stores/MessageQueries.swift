// Messages are read from the database, never held in memory: every read below is one
// indexed query (the indexes are in Storage/Migrations.swift). A message's position is
// (created_at, id), as in docs/PROTOCOL.md.

/// A condition on messages as SQL text with its parameters, combined with AND.
struct SQLCondition {
    private(set) var clauses: [String] = []
    private(set) var binds: [SQLValue] = []

    mutating func add(_ clause: String, _ values: [SQLValue] = []) {
        clauses.append(clause)
        binds.append(contentsOf: values)
    }

    var sql: String { clauses.isEmpty ? "1 = 1" : clauses.joined(separator: " AND ") }

    static func placeholders(_ n: Int) -> String { Array(repeating: "?", count: n).joined(separator: ", ") }
}

enum KeyBound {
    case below(MessageKey, inclusive: Bool)
    case above(MessageKey, inclusive: Bool)
}

enum MessageQueries {
    static let columns = RecordTables.messageColumns.joined(separator: ", ")

    /// Messages selected by `condition` (SQL after WHERE, may end with ORDER BY/LIMIT), with
    /// their mentions: on PostgreSQL in the same statement (a JSON array per message, since
    /// every statement is a round trip), on SQLite in a second one over all the rows.
    static func load(_ db: any SQLSession, _ tail: String, _ binds: [SQLValue]) async throws -> [MessageRecord] {
        if db.dialect == .postgres {
            let rows = try await db.query(selectWithMentions(tail), binds)
            let mentionsColumn = RecordTables.messageColumns.count
            return try rows.map { row in
                try RecordTables.messageRecord(row, mentions: RecordTables.decodeList([String].self, row.text(mentionsColumn), "mentions"))
            }
        }
        let rows = try await db.query("SELECT \(columns) FROM messages WHERE \(tail)", binds)
        if rows.isEmpty { return [] }
        let ids = rows.map { $0.int(0) }
        var mentions: [Int64: [(Int64, String)]] = [:]
        // Mentions of every message at once; a page is at most a few hundred messages.
        for chunk in stride(from: 0, to: ids.count, by: 500) {
            let part = Array(ids[chunk..<min(ids.count, chunk + 500)])
            let found = try await db.query(
                "SELECT message_id, user_id, position FROM message_mentions WHERE message_id IN (\(SQLCondition.placeholders(part.count)))",
                part.map { .int($0) })
            for row in found { mentions[row.int(0), default: []].append((row.int(2), row.text(1))) }
        }
        return try rows.map { row in
            try RecordTables.messageRecord(row, mentions: (mentions[row.int(0)] ?? []).sorted { $0.0 < $1.0 }.map(\.1))
        }
    }

    static func message(_ db: any SQLSession, id: Int64) async throws -> MessageRecord? {
        try await load(db, "id = ?", [.int(id)]).first
    }

    static func messages(_ db: any SQLSession, ids: [Int64]) async throws -> [Int64: MessageRecord] {
        var out: [Int64: MessageRecord] = [:]
        let unique = Array(Set(ids))
        for chunk in stride(from: 0, to: unique.count, by: 500) {
            let part = Array(unique[chunk..<min(unique.count, chunk + 500)])
            for m in try await load(db, "id IN (\(SQLCondition.placeholders(part.count)))", part.map { .int($0) }) {
                out[m.id] = m
            }
        }
        return out
    }

    /// What became of an earlier send by this sender with this request id, if there was one:
    /// its message's id, stored or deleted since (idempotent sends). One statement: a new send,
    /// the usual case, finds neither. (`req_id <> ''` lets the partial indexes serve it, and a plan
    /// made for any value.)
    static let earlierSendSQL = """
        SELECT (SELECT id FROM messages
                 WHERE channel_url = ? AND coalesce(sender_id, '') = ? AND req_id = ? AND req_id <> '' LIMIT 1),
               (SELECT message_id FROM message_tombstones
                 WHERE channel_url = ? AND sender_id = ? AND req_id = ? AND req_id <> '' LIMIT 1)
        """

    static func earlierSend(_ db: any SQLSession, channel: String, sender: String?, requestId: String) async throws -> EarlierSend? {
        let sender = sender ?? ""
        guard let row = try await db.queryOne(
            earlierSendSQL, [.text(channel), .text(sender), .text(requestId), .text(channel), .text(sender), .text(requestId)])
        else { return nil }
        if let id = row.optionalInt(0) { return .stored(id) }
        return row.optionalInt(1).map(EarlierSend.deleted)
    }

    /// The newest message that may stand as a channel's last message (not silent, not a
    /// reply kept in its thread).
    static func lastCountable(_ db: any SQLSession, channel: String) async throws -> MessageRecord? {
        try await load(db, """
            channel_url = ? AND silent = 0 AND (parent_id = 0 OR is_reply_to_channel = 1)
            ORDER BY created_at DESC, id DESC LIMIT 1
            """, [.text(channel)]).first
    }

    static func newestCreatedAt(_ db: any SQLSession, channel: String) async throws -> Int64 {
        try await db.queryOne("SELECT created_at FROM messages WHERE channel_url = ? ORDER BY created_at DESC, id DESC LIMIT 1",
                              [.text(channel)])?.int(0) ?? 0
    }

    static func replies(_ db: any SQLSession, parent: Int64) async throws -> [MessageRecord] {
        try await load(db, "parent_id = ? ORDER BY created_at, id", [.int(parent)])
    }

    /// The filter of a listing and the reader's history offset, as a condition.
    static func condition(channel: String, filter: MessageFilter, visibleAfter offset: Int64?) -> SQLCondition {
        var c = SQLCondition()
        c.add("channel_url = ?", [.text(channel)])
        if let parentId = filter.parentId {
            c.add("parent_id = ?", [.int(parentId)])
        } else {
            switch filter.replyType {
            case "NONE": c.add("parent_id = 0")
            case "ONLY_REPLY_TO_CHANNEL": c.add("(parent_id = 0 OR is_reply_to_channel = 1)")
            default: break
            }
        }
        if let type = filter.messageType { c.add("type = ?", [.text(type)]) }
        if let types = filter.customTypes {
            c.add("custom_type IN (\(SQLCondition.placeholders(types.count)))", types.map { .text($0) })
        }
        if let senders = filter.senderIds {
            c.add("coalesce(sender_id, '') IN (\(SQLCondition.placeholders(senders.count)))", senders.map { .text($0) })
        }
        if let offset { c.add("created_at > ?", [.int(offset)]) }
        return c
    }

    /// Row values, so that both engines use the (channel_url, created_at, id) index as a range
    /// (the same condition spelled with OR is a scan of the whole channel in SQLite).
    static func add(_ bound: KeyBound, to c: inout SQLCondition) {
        switch bound {
        case .below(let k, let inclusive):
            c.add("(created_at, id) \(inclusive ? "<=" : "<") (?, ?)", [.int(k.createdAt), .int(k.messageId)])
        case .above(let k, let inclusive):
            c.add("(created_at, id) \(inclusive ? ">=" : ">") (?, ?)", [.int(k.createdAt), .int(k.messageId)])
        }
    }

    /// Up to `limit` messages matching `base` and the bounds, nearest the bound first when
    /// `descending`, always returned ascending.
    static func page(_ db: any SQLSession, _ base: SQLCondition, _ bounds: [KeyBound], descending: Bool,
                     limit: Int) async throws -> [MessageRecord] {
        if limit <= 0 { return [] }
        var c = base
        for b in bounds { add(b, to: &c) }
        let order = descending ? "created_at DESC, id DESC" : "created_at, id"
        let found = try await load(db, "\(c.sql) ORDER BY \(order) LIMIT \(limit)", c.binds)
        return descending ? found.reversed() : found
    }

    static func count(_ db: any SQLSession, _ base: SQLCondition, _ bounds: [KeyBound]) async throws -> Int64 {
        var c = base
        for b in bounds { add(b, to: &c) }
        return try await db.queryOne("SELECT count(*) FROM messages WHERE \(c.sql)", c.binds)?.int(0) ?? 0
    }

    /// Unread messages and mentions of a member whose history starts after `floor`: the
    /// definition UnreadCounters.swift keeps up to date.
    static let unreadSQL = """
        SELECT count(*), coalesce(sum(CASE WHEN mention_type = 'channel' OR EXISTS (
            SELECT 1 FROM message_mentions mm WHERE mm.message_id = messages.id AND mm.user_id = ?) THEN 1 ELSE 0 END), 0)
        FROM messages WHERE channel_url = ? AND created_at > ? AND coalesce(sender_id, '') <> ?
            AND silent = 0 AND (parent_id = 0 OR is_reply_to_channel = 1)
        """
    /// PostgreSQL: messages with their mentions as a JSON array, after `columns`.
    static func selectWithMentions(_ tail: String) -> String {
        """
        SELECT \(columns), array_to_json(ARRAY(SELECT mm.user_id FROM message_mentions mm
            WHERE mm.message_id = messages.id ORDER BY mm.position))::text
        FROM messages WHERE \(tail)
        """
    }
    /// A message by id on PostgreSQL (`load(db, "id = ?")`), prepared once per connection.
    static let byIdSQL = selectWithMentions("id = ?")

    static func unread(_ db: any SQLSession, channel: String, user: String, floor: Int64) async throws -> (Int64, Int64) {
        let row = try await db.queryOne(unreadSQL, [.text(user), .text(channel), .int(floor), .text(user)])
        return (row?.int(0) ?? 0, row?.int(1) ?? 0)
    }

    /// Changed messages of a channel after a changelog start, in change order.
    static func changes(_ db: any SQLSession, _ base: SQLCondition, after start: Sync.Start, visibleAfter offset: Int64?,
                        limit: Int) async throws -> [MessageRecord] {
        var c = base
        c.add("change_seq > 0")
        switch start {
        case .seq(let s): c.add("change_seq > ?", [.int(s)])
        case .time(let t): c.add("changed_at >= ?", [.int(t)])
        }
        if let offset {
            // Visible, or a hidden parent whose thread has visible replies.
            c.add("(created_at > ? OR (reply_count > 0 AND last_replied_at > ?))", [.int(offset), .int(offset)])
        }
        return try await load(db, "\(c.sql) ORDER BY change_seq LIMIT \(limit)", c.binds)
    }

    static func tombstones(_ db: any SQLSession, channel: String, after start: Sync.Start,
                           limit: Int) async throws -> [MessageTombstoneRecord] {
        let (clause, value): (String, Int64) = switch start {
        case .seq(let s): ("seq > ?", s)
        case .time(let t): ("deleted_at >= ?", t)
        }
        return try await db.query("""
            SELECT message_id, channel_url, deleted_at, seq FROM message_tombstones
            WHERE channel_url = ? AND \(clause) ORDER BY seq LIMIT \(limit)
            """, [.text(channel), .int(value)]).map {
            MessageTombstoneRecord(messageId: $0.int(0), channelUrl: $0.text(1), deletedAt: $0.int(2), seq: $0.int(3))
        }
    }

    /// Drops a deleted channel's messages, their uploads and their tombstones (the channel's
    /// own tombstone covers them). Held (`SQLSession.executeHeld`): on PostgreSQL they go with
    /// the request's write, children before what they hang off.
    static func deleteChannelMessages(_ db: any SQLSession, channel: String) async throws {
        for (table, condition) in [
            ("file_blobs", "file_id IN (SELECT file_id FROM files WHERE channel_url = ?)"),
            ("files", "channel_url = ?"),
            ("message_mentions", "message_id IN (SELECT id FROM messages WHERE channel_url = ?)"),
            ("messages", "channel_url = ?"),
            ("message_tombstones", "channel_url = ?"),
        ] {
            try await db.executeHeld(SQLWrite(sql: "DELETE FROM \(table) WHERE \(condition)", binds: [.text(channel)], table: table))
        }
    }
}
