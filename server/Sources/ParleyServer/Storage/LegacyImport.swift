import Foundation

/// Imports a SQLite file of the record layout (before schema version 1: every record one
/// JSON document in `records(kind, key, body)`, plus `events` and `counters`) into the
/// tables of migration 1, inside the migration's transaction. Records are read in pages, so
/// the import holds one page in memory whatever the size of the file.
///
/// Two generations of that layout exist: members as `member` records of their own (keyed
/// "channel URL, U+0001, user id"), and, older, members inside the channel's JSON
/// (`members` map). Both are read; where both name a member, the member record wins, as the
/// server that wrote the file did. Member records whose channel is gone are dropped.
enum LegacyImport {
    /// Moves the old tables out of the way of migration 1 (two of their names are reused).
    static func renameTables(_ db: any SQLSession) async throws {
        try await db.executeScript("""
            ALTER TABLE records RENAME TO legacy_records;
            ALTER TABLE events RENAME TO legacy_events;
            ALTER TABLE counters RENAME TO legacy_counters;
            """)
    }

    private static let pageSize = 2_000

    /// A message `m` unread by the member row `members` (UnreadCounters.swift).
    private static let unreadMessage = """
        m.channel_url = members.channel_url AND coalesce(m.sender_id, '') <> members.user_id
        AND m.created_at > (CASE WHEN members.read_ts > members.ts_message_offset THEN members.read_ts
            ELSE members.ts_message_offset END)
        AND m.silent = 0 AND (m.parent_id = 0 OR m.is_reply_to_channel = 1)
        """

    /// Runs `body` for every record of one kind, in key order, a page at a time.
    private static func forEachRecord(_ kind: String, _ db: any SQLSession,
                                      _ body: (String, String) async throws -> Void) async throws {
        var after: String? = nil
        while true {
            let rows = try await db.query(
                "SELECT key, body FROM legacy_records WHERE kind = ? AND (? IS NULL OR key > ?) ORDER BY key LIMIT \(pageSize)",
                [.text(kind), .optional(after), .optional(after)])
            for row in rows { try await body(row.text(0), row.text(1)) }
            guard rows.count == pageSize, let last = rows.last else { return }
            after = last.text(0)
        }
    }

    private static func record<T: Decodable>(_ type: T.Type, _ body: String) -> T? {
        // A record that no longer decodes was invisible to the server that wrote it (it
        // skipped it at load): it stays invisible.
        try? JSONDecoder().decode(T.self, from: Data(body.utf8))
    }

    /// Returns a short summary of what was imported.
    private struct LegacyFile: Decodable {
        var id: String
        var channelUrl: String
        var messageId: Int64
        var name: String
        var type: String
        var size: Int64
        var path: String
    }

    static func run(_ db: any SQLSession, uploadsDirectory: String?) async throws -> String {
        var counts: [String: Int] = [:]
        try await forEachRecord("user", db) { _, body in
            guard let u = record(UserRecord.self, body) else { return }
            try await RecordTables.putUser(u, db)
            counts["users", default: 0] += 1
        }
        try await forEachRecord("session", db) { _, body in
            guard let s = record(SessionRecord.self, body) else { return }
            try await RecordTables.putSession(s, db)
        }
        var channelUrls = Set<String>()
        try await forEachRecord("channel", db) { _, body in
            guard let c = record(ChannelRecord.self, body) else { return }
            channelUrls.insert(c.url)
            try await RecordTables.putChannel(c, lastMessageAt: 0, db)  // set by migration 2's backfill
            for m in c.members.values { try await RecordTables.putMember(c.url, m, db) }
            counts["channels", default: 0] += 1
        }
        try await forEachRecord("member", db) { key, body in
            let url = String(key[..<(key.firstIndex(of: "\u{1}") ?? key.endIndex)])
            guard channelUrls.contains(url), let m = record(MemberRecord.self, body) else { return }
            try await RecordTables.putMember(url, m, db)
        }
        var nextMessageId: Int64 = 1
        var lastMessageTs: Int64 = 0
        try await forEachRecord("message", db) { _, body in
            guard let m = record(MessageRecord.self, body) else { return }
            try await RecordTables.putMessage(m, isNew: false, db)
            nextMessageId = max(nextMessageId, m.id + 1)
            lastMessageTs = max(lastMessageTs, m.createdAt)
            counts["messages", default: 0] += 1
        }
        try await forEachRecord("message_tombstone", db) { _, body in
            guard let t = record(MessageTombstoneRecord.self, body) else { return }
            try await RecordTables.putMessageTombstone(t, db)
        }
        try await forEachRecord("membership_tombstone", db) { _, body in
            guard let t = record(MembershipTombstoneRecord.self, body) else { return }
            try await RecordTables.putMembershipTombstone(t, db)
        }
        // Uploads were files on disk, named by the path the record kept (relative to the
        // directory the server ran in, when its --database was) or <database>.files/<id>.
        var missingUploads = 0
        try await forEachRecord("file", db) { _, body in
            guard let f = record(LegacyFile.self, body) else { return }
            let candidates = [f.path] + (uploadsDirectory.map { ["\($0)/\(f.id)"] } ?? [])
            guard let data = candidates.lazy.compactMap({ FileManager.default.contents(atPath: $0) }).first else {
                missingUploads += 1
                return
            }
            try await RecordTables.putFile(
                FileRecord(id: f.id, channelUrl: f.channelUrl, messageId: f.messageId, name: f.name, type: f.type, size: f.size),
                bytes: Array(data), db)
            counts["uploads", default: 0] += 1
        }
        if missingUploads > 0 { counts["uploads missing on disk (not imported)"] = missingUploads }
        try await forEachRecord("report", db) { _, body in
            guard let r = record(ReportRecord.self, body) else { return }
            try await RecordTables.putReport(r, db)
        }
        // The old layout counted unread messages per render; the rows keep counters, as bases
        // under the imported channels' totals of 0 (UnreadCounters.swift).
        try await db.execute("""
            UPDATE members SET
                unread_base = -(SELECT count(*) FROM messages m WHERE \(unreadMessage)),
                mention_base = -(SELECT count(*) FROM messages m WHERE \(unreadMessage) AND (m.mention_type = 'channel'
                    OR EXISTS (SELECT 1 FROM message_mentions mm WHERE mm.message_id = m.id AND mm.user_id = members.user_id)))
            WHERE state = 'joined'
            """, [])
        let moved = try await db.execute("""
            INSERT INTO events (id, created_at, category, recipients, data)
            SELECT id, created_at, category, char(1) || recipients || char(1), data FROM legacy_events
            """, [])
        counts["events"] = moved
        var counters: [String: Int64] = [:]
        for row in try await db.query("SELECT name, value FROM legacy_counters", []) { counters[row.text(0)] = row.int(1) }
        counters["next_message_id"] = max(counters["next_message_id"] ?? 1, nextMessageId)
        counters["last_message_ts"] = max(counters["last_message_ts"] ?? 0, lastMessageTs)
        for (name, value) in counters { try await RecordTables.putCounter(name, value, db) }
        try await db.executeScript("DROP TABLE legacy_records; DROP TABLE legacy_events; DROP TABLE legacy_counters;")
        return counts.keys.sorted().map { "\(counts[$0]!) \($0)" }.joined(separator: ", ")
    }
}
