import Foundation

// Records (Model.swift) to rows and back. Lists and maps that are only ever shown whole
// (thumbnails, reactions, sorted metaarray, a user's discovery keys) are JSON text
// columns; everything a query filters or orders by has a column or a table of its own.

enum RecordTables {
    private static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }()

    static func json<T: Encodable>(_ value: T) -> SQLValue {
        // Encoding these plain values cannot fail.
        .text((try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "null")
    }

    /// Most stored lists are empty: those skip the encoder (a message has four such lists).
    static func json<T: Encodable>(_ list: [T]) -> SQLValue {
        list.isEmpty ? .text("[]") : .text((try? encoder.encode(list)).map { String(decoding: $0, as: UTF8.self) } ?? "null")
    }

    /// Most stored lists are empty: those skip the decoder.
    static func decodeList<T: Decodable>(_ type: [T].Type, _ text: String, _ what: String) throws -> [T] {
        text == "[]" ? [] : try decode(type, text, what)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String, _ what: String) throws -> T {
        do { return try JSONDecoder().decode(T.self, from: Data(text.utf8)) } catch {
            throw StorageError("stored \(what) is not valid: \(error)")
        }
    }

    /// `INSERT … ON CONFLICT (key) DO UPDATE`: one statement that both engines run.
    /// `values`: what goes in for each column, a placeholder unless given.
    static func upsertSQL(_ table: String, _ columns: [String], key: [String], values: [String]? = nil) -> String {
        let placeholders = (values ?? Array(repeating: "?", count: columns.count)).joined(separator: ", ")
        let updates = columns.filter { !key.contains($0) }.map { "\($0) = excluded.\($0)" }
        let action = updates.isEmpty ? "DO NOTHING" : "DO UPDATE SET " + updates.joined(separator: ", ")
        return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(placeholders)) "
            + "ON CONFLICT (\(key.joined(separator: ", "))) \(action)"
    }

    // MARK: columns

    static let userColumns = ["user_id", "nickname", "profile_url", "is_active", "created_at", "last_seen_at",
                              "has_ever_logged_in", "auto_accept", "discovery_keys", "preferred_languages"]
    static func userRow(_ u: UserRecord) -> [SQLValue] {
        [.text(u.userId), .text(u.nickname), .text(u.profileUrl), .bool(u.isActive), .int(u.createdAt),
         .int(u.lastSeenAt), .bool(u.hasEverLoggedIn), .bool(u.autoAccept), json(u.discoveryKeys),
         json(u.preferredLanguages)]
    }

    static let channelColumns = ["url", "name", "cover_url", "custom_type", "data", "created_at", "updated_at",
                                 "created_by", "is_distinct", "is_super", "is_public", "is_ephemeral", "is_frozen",
                                 "pinned_message_ids", "last_message_id", "change_seq", "changed_at",
                                 "counted_messages", "counted_mentions"]
    /// Written, never read back into the record: the sort keys of listings (ChannelQueries.swift).
    static let channelKeyColumns = ["name_key", "last_message_at"]
    /// `lastMessageAt`: the creation time of the channel's last message (0 without one).
    static func channelRow(_ c: ChannelRecord, lastMessageAt: Int64) -> [SQLValue] {
        [.text(c.url), .text(c.name), .text(c.coverUrl), .text(c.customType), .text(c.data), .int(c.createdAt),
         .int(c.updatedAt), .optional(c.createdBy), .bool(c.isDistinct), .bool(c.isSuper), .bool(c.isPublic),
         .bool(c.isEphemeral), .bool(c.freeze), json(c.pinnedMessageIds), .int(c.lastMessageId), .int(c.changeSeq),
         .int(c.changedAt), .int(c.countedMessages), .int(c.countedMentions), .text(nameOrderKeyText(c.name)),
         .int(lastMessageAt)]
    }

    static let memberColumns = ["channel_url", "user_id", "state", "invited_at", "inviter_id", "joined_at", "read_ts",
                                "delivered_ts", "hidden_state", "ts_message_offset", "change_seq", "changed_at",
                                "unread_base", "mention_base"]
    /// A row of `SELECT memberColumns FROM members`, or those columns from `offset` on.
    static func memberRecord(_ row: SQLRow, from offset: Int = 0) -> MemberRecord {
        let o = offset
        return MemberRecord(
            userId: row.text(o + 1), state: row.text(o + 2), invitedAt: row.int(o + 3), inviterId: row.optionalText(o + 4),
            joinedAt: row.int(o + 5), readTs: row.int(o + 6), deliveredTs: row.int(o + 7), hiddenState: row.text(o + 8),
            tsMessageOffset: row.int(o + 9), changeSeq: row.int(o + 10), changedAt: row.int(o + 11),
            unreadBase: row.int(o + 12), mentionBase: row.int(o + 13))
    }

    static func memberRow(_ url: String, _ m: MemberRecord) -> [SQLValue] {
        [.text(url), .text(m.userId), .text(m.state), .int(m.invitedAt), .optional(m.inviterId), .int(m.joinedAt),
         .int(m.readTs), .int(m.deliveredTs), .text(m.hiddenState), .int(m.tsMessageOffset), .int(m.changeSeq),
         .int(m.changedAt), .int(m.unreadBase), .int(m.mentionBase)]
    }

    static let messageColumns = ["id", "channel_url", "type", "message", "sender_id", "req_id", "custom_type", "data",
                                 "created_at", "updated_at", "mention_type", "is_op_msg", "silent", "parent_id",
                                 "is_reply_to_channel", "file", "thumbnails", "sorted_metaarray", "reactions",
                                 "reply_count", "last_replied_at", "thread_updated_at", "recent_replier_ids",
                                 "change_seq", "changed_at", "poll_id", "translations"]
    static func messageRow(_ m: MessageRecord) -> [SQLValue] {
        [.int(m.id), .text(m.channelUrl), .text(m.type), .text(m.message), .optional(m.senderId), .text(m.reqId),
         .text(m.customType), .text(m.data), .int(m.createdAt), .int(m.updatedAt), .text(m.mentionType),
         .bool(m.isOpMsg), .bool(m.silent), .int(m.parentId), .bool(m.isReplyToChannel),
         m.file.map { json($0) } ?? .null, json(m.thumbnails), json(m.sortedMetaarray), json(m.reactions),
         .int(m.replyCount), .int(m.lastRepliedAt), .int(m.threadUpdatedAt), json(m.recentReplierIds),
         .int(m.changeSeq), .int(m.changedAt), .int(m.pollId ?? 0),
         translationsText(m.translations)]
    }

    static let reportColumns = ["id", "report_type", "category", "reporting_user_id", "offending_user_id",
                                "channel_url", "message_id", "description", "created_at"]
    static func reportRow(_ r: ReportRecord) -> [SQLValue] {
        [.int(r.id), .text(r.reportType), .text(r.category), .optional(r.reportingUserId), .optional(r.offendingUserId),
         .optional(r.channelUrl), .optional(r.messageId), .text(r.description), .int(r.createdAt)]
    }

    // MARK: writes

    /// An upsert that moves the row's `version` (RecordCache.swift) and returns the new one.
    /// A new row starts at a random version (the last bound value, `firstVersion()`): a row
    /// deleted and made again under the same key never takes up a version it had before.
    static func versionedUpsertSQL(_ table: String, _ columns: [String], key: [String]) -> String {
        let placeholders = Array(repeating: "?", count: columns.count + 1).joined(separator: ", ")
        let updates = columns.filter { !key.contains($0) }.map { "\($0) = excluded.\($0)" } + ["version = \(table).version + 1"]
        return "INSERT INTO \(table) (\(columns.joined(separator: ", ")), version) VALUES (\(placeholders)) "
            + "ON CONFLICT (\(key.joined(separator: ", "))) DO UPDATE SET \(updates.joined(separator: ", ")) RETURNING version"
    }

    static let upsertUserSQL = versionedUpsertSQL("users", userColumns, key: ["user_id"])

    static func firstVersion() -> SQLValue {
        let draw = { Int64.random(in: 1...(1 << 60)) }
        // Both runs of a send in one round trip draw the same (Writers/OneFlightSend.swift).
        return .int(VersionTape.current?.next(draw) ?? draw())
    }

    /// Returns the user's new version.
    @discardableResult
    static func putUser(_ u: UserRecord, _ db: any SQLSession) async throws -> Int64 {
        try await db.writeTogether(userWrites(u), selecting: nil, last: false).first?.intOrZero ?? 0
    }

    /// A user's row and its metadata; the first write returns the user's new version.
    static func userWrites(_ u: UserRecord) -> [SQLWrite] {
        let id = SQLValue.text(u.userId)
        return [SQLWrite(sql: upsertUserSQL, binds: userRow(u) + [firstVersion()], table: "users", returnsOne: true),
                SQLWrite(sql: "DELETE FROM user_metadata WHERE user_id = ?", binds: [id], table: "user_metadata")]
            + multiRowWrites("user_metadata", ["user_id", "key", "value"], key: ["user_id", "key"],
                             u.metadata.map { [id, .text($0.key), .text($0.value)] })
    }

    /// A user's deletion, with what hangs off the user. A user made again under this id must
    /// not inherit the devices and push settings.
    static func userDeletion(_ id: String) -> [SQLWrite] {
        ["user_metadata", "push_tokens", "push_preferences", "push_channel_preferences", "users"].map { table in
            SQLWrite(sql: "DELETE FROM \(table) WHERE user_id = ?", binds: [.text(id)], table: table)
        }
    }

    /// Whether a session had the token.
    static func deleteSession(_ token: String, _ db: any SQLSession) async throws -> Bool {
        try await db.execute("DELETE FROM sessions WHERE token = ?", [.text(token)]) > 0
    }

    /// How many sessions the user had.
    static func deleteSessions(ofUser userId: String, _ db: any SQLSession) async throws -> Int {
        try await db.execute("DELETE FROM sessions WHERE user_id = ?", [.text(userId)])
    }

    static func putSession(_ s: SessionRecord, _ db: any SQLSession) async throws {
        try await db.execute(upsertSQL("sessions", ["token", "user_id", "expires_at", "created_at"], key: ["token"]),
                             [.text(s.token), .text(s.userId), .int(s.expiresAt), .int(s.createdAt)])
    }

    /// The channel row and the tables that hang off it (those named in `parts`), except members.
    /// Returns the channel's new version.
    @discardableResult
    static func putChannel(_ c: ChannelRecord, lastMessageAt: Int64, parts: ChannelParts = .all,
                           _ db: any SQLSession) async throws -> Int64 {
        try await db.writeTogether(channelWrites(c, lastMessageAt: lastMessageAt, parts: parts), selecting: nil,
                                   last: false).first?.intOrZero ?? 0
    }

    /// `putChannel`'s writes; the first returns the channel's new version.
    static func channelWrites(_ c: ChannelRecord, lastMessageAt: Int64, parts: ChannelParts) -> [SQLWrite] {
        let url = SQLValue.text(c.url)
        var writes = [SQLWrite(sql: upsertChannelSQL, binds: channelRow(c, lastMessageAt: lastMessageAt) + [firstVersion()],
                               table: "channels", returnsOne: true)]
        func replace(_ table: String, _ columns: [String], key: [String], _ rows: [[SQLValue]]) {
            writes.append(SQLWrite(sql: "DELETE FROM \(table) WHERE channel_url = ?", binds: [url], table: table))
            writes += multiRowWrites(table, columns, key: key, rows)
        }
        if parts.contains(.operators) {
            replace("channel_operators", ["channel_url", "user_id", "position"], key: ["channel_url", "user_id"],
                    c.operatorIds.enumerated().map { [url, .text($1), .int(Int64($0))] })
        }
        if parts.contains(.restrictions) {
            let rows = [("ban", c.bans), ("mute", c.mutes)].flatMap { kind, restrictions in
                restrictions.values.map { r -> [SQLValue] in
                    [url, .text(kind), .text(r.userId), .int(r.startAt), .int(r.endAt), .text(r.description)]
                }
            }
            replace("channel_restrictions", ["channel_url", "kind", "user_id", "start_at", "end_at", "description"],
                    key: ["channel_url", "kind", "user_id"], rows)
        }
        if parts.contains(.metadata) {
            replace("channel_metadata", ["channel_url", "key", "value", "value_key"], key: ["channel_url", "key"],
                    c.metadata.map { [url, .text($0.key), .text($0.value), .text(orderKeyText($0.value))] })
        }
        if parts.contains(.metacounters) {
            replace("channel_metacounters", ["channel_url", "key", "value"], key: ["channel_url", "key"],
                    c.metacounters.map { [url, .text($0.key), .int($0.value)] })
        }
        return writes
    }

    /// Rows of one table in as few statements as the engines allow (one per 500 rows).
    static func putRows(_ table: String, _ columns: [String], key: [String], _ rows: [[SQLValue]],
                        _ db: any SQLSession) async throws {
        for write in multiRowWrites(table, columns, key: key, rows) { try await db.execute(write.sql, write.binds) }
    }

    /// The statement of `putRows` for one table and number of rows. A message rewrites the
    /// member rows of its whole channel, so the same long statement is wanted again and again.
    struct MultiRowUpsert: Hashable {
        let table: String
        let columns: [String]
        let key: [String]
        let rows: Int

        var sql: String {
            let one = "(" + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
            let updates = columns.filter { !key.contains($0) }.map { "\($0) = excluded.\($0)" }
            let action = updates.isEmpty ? "DO NOTHING" : "DO UPDATE SET " + updates.joined(separator: ", ")
            return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES "
                + Array(repeating: one, count: rows).joined(separator: ", ")
                + " ON CONFLICT (\(key.joined(separator: ", "))) \(action)"
        }
    }

    /// Statement texts built so far, bounded: past `limit` different shapes it starts over.
    final class StatementTexts: @unchecked Sendable {
        private let mutex = NSLock()
        private var texts: [MultiRowUpsert: String] = [:]
        private let limit = 512

        func text(for shape: MultiRowUpsert) -> String {
            if let known = mutex.withLock({ texts[shape] }) { return known }
            let built = shape.sql
            mutex.withLock {
                if texts.count >= limit { texts.removeAll() }
                texts[shape] = built
            }
            return built
        }
    }

    static let multiRowUpsertTexts = StatementTexts()

    /// A channel's deletion: its row and the tables that hang off it, except members.
    static func channelDeletion(_ url: String) -> [SQLWrite] {
        ["channel_operators", "channel_restrictions", "channel_metadata", "channel_metacounters", "typing"].map { table in
            SQLWrite(sql: "DELETE FROM \(table) WHERE channel_url = ?", binds: [.text(url)], table: table)
        } + [SQLWrite(sql: "DELETE FROM channels WHERE url = ?", binds: [.text(url)], table: "channels")]
    }

    static func putMember(_ url: String, _ m: MemberRecord, _ db: any SQLSession) async throws {
        try await db.execute(upsertSQL("members", memberColumns, key: ["channel_url", "user_id"]), memberRow(url, m))
    }

    /// `isNew`: no row of the message is stored yet (its id was taken in this transaction),
    /// so there are no old mentions to remove.
    /// The writes are held (`SQLSession.executeHeld`): on PostgreSQL they go with the
    /// request's next statement, usually its final write (`write`).
    static func putMessage(_ m: MessageRecord, isNew: Bool, _ db: any SQLSession) async throws {
        if !isNew { try await db.executeHeld(SQLWrite(sql: deleteMentionsSQL, binds: [.int(m.id)], table: "message_mentions")) }
        if db.dialect == .postgres {
            let vectorOf = [SQLValue.text(m.message), m.file.map { json($0) } ?? .null]
            try await db.executeHeld(SQLWrite(sql: upsertMessageWithVectorSQL, binds: messageRow(m) + vectorOf, table: "messages"))
        } else {
            try await db.executeHeld(SQLWrite(sql: upsertMessageSQL, binds: messageRow(m), table: "messages"))
        }
        // A user named twice keeps the later position (as one upsert after another did): one
        // statement may not upsert a row twice.
        var lastPosition: [String: Int] = [:]
        for (position, id) in m.mentionedUserIds.enumerated() { lastPosition[id] = position }
        let rows = lastPosition.sorted { $0.value < $1.value }.map { id, position -> [SQLValue] in
            [.int(m.id), .text(id), .int(Int64(position))]
        }
        for write in multiRowWrites("message_mentions", ["message_id", "user_id", "position"], key: ["message_id", "user_id"], rows) {
            try await db.executeHeld(write)
        }
    }

    /// Held, as `putMessage`'s writes.
    static func deleteMessage(_ id: Int64, _ db: any SQLSession) async throws {
        try await db.executeHeld(SQLWrite(sql: deleteMentionsSQL, binds: [.int(id)], table: "message_mentions"))
        try await db.executeHeld(SQLWrite(sql: "DELETE FROM messages WHERE id = ?", binds: [.int(id)], table: "messages"))
    }

    /// Held, as `putMessage`'s writes.
    static func putMessageTombstone(_ t: MessageTombstoneRecord, _ db: any SQLSession) async throws {
        try await db.executeHeld(SQLWrite(
            sql: upsertSQL("message_tombstones", ["message_id", "channel_url", "deleted_at", "seq", "sender_id", "req_id"],
                           key: ["message_id"]),
            binds: [.int(t.messageId), .text(t.channelUrl), .int(t.deletedAt), .int(t.seq), .text(t.senderId ?? ""),
                    .text(t.reqId ?? "")],
            table: "message_tombstones"))
    }

    static func putMembershipTombstone(_ t: MembershipTombstoneRecord, _ db: any SQLSession) async throws {
        let write = membershipTombstoneWrite(t)
        try await db.execute(write.sql, write.binds)
    }

    static func membershipTombstoneWrite(_ t: MembershipTombstoneRecord) -> SQLWrite {
        SQLWrite(sql: upsertSQL("membership_tombstones", ["user_id", "channel_url", "at", "seq"], key: ["user_id", "channel_url"]),
                 binds: [.text(t.userId), .text(t.channelUrl), .int(t.at), .int(t.seq)], table: "membership_tombstones")
    }

    /// An uploaded file: its description and its bytes, in the database so that every server
    /// of a deployment can serve it.
    static func putFile(_ f: FileRecord, bytes: [UInt8], _ db: any SQLSession) async throws {
        try await db.execute(upsertSQL("files", ["file_id", "channel_url", "message_id", "name", "type", "size"], key: ["file_id"]),
                             [.text(f.id), .text(f.channelUrl), .int(f.messageId), .text(f.name), .text(f.type), .int(f.size)])
        try await db.execute(upsertSQL("file_blobs", ["file_id", "bytes"], key: ["file_id"]), [.text(f.id), .blob(bytes)])
    }

    static func file(_ id: String, _ db: any SQLSession) async throws -> FileRecord? {
        try await db.queryOne("SELECT file_id, channel_url, message_id, name, type, size FROM files WHERE file_id = ?", [.text(id)])
            .map { FileRecord(id: $0.text(0), channelUrl: $0.text(1), messageId: $0.int(2), name: $0.text(3), type: $0.text(4),
                              size: $0.int(5)) }
    }

    static func fileBytes(_ id: String, _ db: any SQLSession) async throws -> [UInt8]? {
        try await db.queryOne("SELECT bytes FROM file_blobs WHERE file_id = ?", [.text(id)])?.blob(0)
    }

    static func deleteFile(_ id: String, _ db: any SQLSession) async throws {
        try await db.execute("DELETE FROM file_blobs WHERE file_id = ?", [.text(id)])
        try await db.execute("DELETE FROM files WHERE file_id = ?", [.text(id)])
    }

    static func putReport(_ r: ReportRecord, _ db: any SQLSession) async throws {
        try await db.execute(upsertSQL("reports", reportColumns, key: ["id"]), reportRow(r))
    }

    /// The columns `eventRow` fills, in order.
    private static let eventColumns = ["id", "created_at", "category", "recipients", "data"]
    private static let eventRowPlaceholders = "(" + Array(repeating: "?", count: eventColumns.count).joined(separator: ", ") + ")"
    static let insertEventSQL = "INSERT INTO events (\(eventColumns.joined(separator: ", "))) VALUES \(eventRowPlaceholders)"
    static let upsertMessageSQL = upsertSQL("messages", messageColumns, key: ["id"])
    /// PostgreSQL: the same with the search vector, computed from the message's text and file
    /// (Stores/SearchQueries.swift), so that the insert trigger has nothing to do.
    static let upsertMessageWithVectorSQL = upsertSQL(
        "messages", messageColumns + ["search_vector"], key: ["id"],
        values: Array(repeating: "?", count: messageColumns.count) + ["parley_message_search_vector(?, ?)"])
    static let upsertChannelSQL = versionedUpsertSQL("channels", channelColumns + channelKeyColumns, key: ["url"])
    static let deleteMentionsSQL = "DELETE FROM message_mentions WHERE message_id = ?"
    static let sessionSQL = "SELECT token, user_id, expires_at, created_at FROM sessions WHERE token = ?"
    /// A session with its user's version (NULL: no such user), read together in one statement.
    static let sessionWithUserVersionSQL = """
        SELECT s.token, s.user_id, s.expires_at, s.created_at, u.version
        FROM sessions s LEFT JOIN users u ON u.user_id = s.user_id WHERE s.token = ?
        """

    static func putEvent(_ e: StoredEvent, _ db: any SQLSession) async throws {
        try await db.execute(insertEventSQL, eventRow(e))
    }

    /// The values of `insertEventSQL` (recipients between separators, so that a search for
    /// one finds no other).
    private static func eventRow(_ e: StoredEvent) -> [SQLValue] {
        [.int(e.id), .int(e.createdAt), .text(e.category),
         .text(recipientSeparator + e.recipients.joined(separator: recipientSeparator) + recipientSeparator), .text(e.data)]
    }

    static func putCounter(_ name: String, _ value: Int64, _ db: any SQLSession) async throws {
        try await db.execute(upsertSQL("meta", ["name", "value"], key: ["name"]), [.text(name), .int(value)])
    }

    /// The versions the batch gave the channels and users it wrote.
    struct WrittenVersions {
        var channels: [String: Int64] = [:]
        var users: [String: Int64] = [:]
        /// The value of `write`'s `selecting`, if it had one.
        var selected: SQLValue? = nil
    }

    /// A request's writes, in one call of `SQLSession.writeTogether`: on PostgreSQL one round
    /// trip, made while the writer holds its channels' locks, where consecutive writes of
    /// different tables share a statement. First what replaces or removes rows (users,
    /// deleted channels, channels whose other tables changed, members who left, tombstones,
    /// typing), then the rows most requests write: channels whose other tables did not
    /// change, members, the events and the counters, and with them on PostgreSQL the writes
    /// the request held (its messages). Keys go in order, so that both runs of a send in one
    /// round trip (Writers/OneFlightSend.swift) build the same statements.
    ///
    /// `last`: no statement follows in the transaction (`SQLSession.writeTogether`).
    /// `selecting`: a value read with the last statement (`WrittenVersions.selected`).
    @discardableResult
    static func write(_ batch: StorageBatch, last: Bool = false, selecting: SQLExpression? = nil,
                      _ db: any SQLSession) async throws -> WrittenVersions {
        var written = WrittenVersions()
        var writes: [SQLWrite] = []
        // Whose version each write with `returnsOne` gives, in order.
        enum Versioned { case user(String), channel(String) }
        var versioned: [Versioned] = []
        for (id, user) in batch.users.sorted(by: { $0.key < $1.key }) {
            if let user {
                writes += userWrites(user)
                versioned.append(.user(id))
            } else {
                writes += userDeletion(id)
            }
        }
        var channelRows: [SQLWrite] = []
        var rowVersions: [Versioned] = []
        for (url, channel) in batch.channels.sorted(by: { $0.key < $1.key }) {
            guard let channel else {
                writes += channelDeletion(url)
                continue
            }
            let parts = batch.channelParts[url] ?? .all
            let lastMessageAt = batch.lastMessageAt[url] ?? 0
            if parts.isEmpty {
                channelRows.append(SQLWrite(sql: upsertChannelSQL, binds: channelRow(channel, lastMessageAt: lastMessageAt) + [firstVersion()],
                                            table: "channels", returnsOne: true))
                rowVersions.append(.channel(url))
            } else {
                writes += channelWrites(channel, lastMessageAt: lastMessageAt, parts: parts)
                versioned.append(.channel(url))
            }
        }
        // Members in one statement: a message moves the unread counters of every member.
        var memberRows: [[SQLValue]] = []
        for (key, member) in batch.members.sorted(by: { ($0.key.channelUrl, $0.key.userId) < ($1.key.channelUrl, $1.key.userId) }) {
            if let member { memberRows.append(memberRow(key.channelUrl, member)) } else {
                writes.append(SQLWrite(sql: "DELETE FROM members WHERE channel_url = ? AND user_id = ?",
                                       binds: [.text(key.channelUrl), .text(key.userId)], table: "members"))
            }
        }
        for (key, tombstone) in batch.membershipTombstones.sorted(by: { ($0.key.userId, $0.key.channelUrl) < ($1.key.userId, $1.key.channelUrl) }) {
            if let tombstone { writes.append(membershipTombstoneWrite(tombstone)) } else {
                writes.append(SQLWrite(sql: "DELETE FROM membership_tombstones WHERE user_id = ? AND channel_url = ?",
                                       binds: [.text(key.userId), .text(key.channelUrl)], table: "membership_tombstones"))
            }
        }
        for (key, since) in batch.typing.sorted(by: { ($0.key.channelUrl, $0.key.userId) < ($1.key.channelUrl, $1.key.userId) }) {
            if let since {
                writes.append(SQLWrite(sql: upsertSQL("typing", ["channel_url", "user_id", "since"], key: ["channel_url", "user_id"]),
                                       binds: [.text(key.channelUrl), .text(key.userId), .int(since)], table: "typing"))
            } else {
                writes.append(SQLWrite(sql: "DELETE FROM typing WHERE channel_url = ? AND user_id = ?",
                                       binds: [.text(key.channelUrl), .text(key.userId)], table: "typing"))
            }
        }
        writes += channelRows
        versioned += rowVersions
        writes += multiRowWrites("members", memberColumns, key: ["channel_url", "user_id"], memberRows)
        let logTogether = db.dialect == .postgres && batch.events.count <= logStatementLimit
            && batch.counters.count <= logStatementLimit
        if logTogether { writes += logAndCounterWrites(batch.events, batch.counters) }
        let selectedNow = logTogether ? selecting : nil
        let values = try await db.writeTogether(writes, selecting: selectedNow, last: last && logTogether)
        for (owner, value) in zip(versioned, values) {
            switch owner {
            case .user(let id): written.users[id] = value.intOrZero
            case .channel(let url): written.channels[url] = value.intOrZero
            }
        }
        if selectedNow != nil { written.selected = values.last }
        if logTogether { return written }
        for event in batch.events { try await putEvent(event, db) }
        try await putRows("meta", ["name", "value"], key: ["name"], batch.counters.map { [.text($0.key), .int($0.value)] }, db)
        if let selecting { written.selected = try await db.queryOne("SELECT " + selecting.sql, selecting.binds)?.values.first }
        return written
    }

    /// `putRows` as writes for `writeTogether` (one per 500 rows).
    static func multiRowWrites(_ table: String, _ columns: [String], key: [String], _ rows: [[SQLValue]]) -> [SQLWrite] {
        stride(from: 0, to: rows.count, by: 500).map { start in
            let chunk = rows[start..<min(rows.count, start + 500)]
            let shape = MultiRowUpsert(table: table, columns: columns, key: key, rows: chunk.count)
            return SQLWrite(sql: multiRowUpsertTexts.text(for: shape), binds: chunk.flatMap { $0 }, table: table,
                            rowWidth: columns.count)
        }
    }

    /// Events or counters one statement writes at most (`logAndCounterWrites`).
    static let logStatementLimit = 100

    /// PostgreSQL: the events and the counters as two writes of one statement.
    private static func logAndCounterWrites(_ events: [StoredEvent], _ counters: [String: Int64]) -> [SQLWrite] {
        var writes: [SQLWrite] = []
        if !events.isEmpty {
            writes.append(SQLWrite(
                sql: "INSERT INTO events (\(eventColumns.joined(separator: ", "))) VALUES "
                    + Array(repeating: eventRowPlaceholders, count: events.count).joined(separator: ", "),
                binds: events.flatMap(eventRow), table: "events"))
        }
        if !counters.isEmpty {
            writes.append(SQLWrite(
                sql: "INSERT INTO meta (name, value) VALUES " + Array(repeating: "(?, ?)", count: counters.count).joined(separator: ", ")
                    + " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                binds: counters.sorted(by: { $0.key < $1.key }).flatMap { [SQLValue.text($0.key), .int($0.value)] }, table: "meta"))
        }
        return writes
    }

    // MARK: reads

    /// A row of `SELECT id, created_at, category, recipients, data FROM events`, or those
    /// columns from `offset` on.
    static func event(_ row: SQLRow, from offset: Int = 0) -> StoredEvent {
        let o = offset
        return StoredEvent(id: row.int(o), createdAt: row.int(o + 1), category: row.text(o + 2),
                           recipients: row.text(o + 3).split(separator: "\u{1}").map(String.init), data: row.text(o + 4))
    }

    static func report(_ row: SQLRow) -> ReportRecord {
        ReportRecord(id: row.int(0), reportType: row.text(1), category: row.text(2), reportingUserId: row.optionalText(3),
                     offendingUserId: row.optionalText(4), channelUrl: row.optionalText(5), messageId: row.optionalInt(6),
                     description: row.text(7), createdAt: row.int(8))
    }

    /// Translations as a JSON object; `{}` is none.
    static func translationsText(_ translations: [String: String]?) -> SQLValue {
        guard let translations, !translations.isEmpty else { return .text("{}") }
        return .text(JSON.obj(translations.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }).serialized())
    }

    /// Stored as a JSON object; `{}` is none.
    private static func translations(_ text: String) throws -> [String: String]? {
        if text == "{}" || text.isEmpty { return nil }
        let found = try decode([String: String].self, text, "translations")
        return found.isEmpty ? nil : found
    }

    static func messageRecord(_ row: SQLRow, mentions: [String]) throws -> MessageRecord {
        MessageRecord(
            id: row.int(0), channelUrl: row.text(1), type: row.text(2), message: row.text(3), senderId: row.optionalText(4),
            reqId: row.text(5), customType: row.text(6), data: row.text(7), createdAt: row.int(8),
            updatedAt: row.int(9), mentionType: row.text(10), mentionedUserIds: mentions,
            isOpMsg: row.bool(11), silent: row.bool(12), parentId: row.int(13), isReplyToChannel: row.bool(14),
            file: try row.optionalText(15).map { try decode(FileInfoRecord.self, $0, "file") },
            thumbnails: try decodeList([ThumbnailRecord].self, row.text(16), "thumbnails"),
            sortedMetaarray: try decodeList([MetaArrayItem].self, row.text(17), "sorted metaarray"),
            reactions: try decodeList([ReactionRecord].self, row.text(18), "reactions"),
            replyCount: row.int(19), lastRepliedAt: row.int(20), threadUpdatedAt: row.int(21),
            recentReplierIds: try decodeList([String].self, row.text(22), "recent repliers"),
            changeSeq: row.int(23), changedAt: row.int(24), pollId: row.int(25) == 0 ? nil : row.int(25),
            translations: try translations(row.text(26)))
    }

    /// What memory keeps between requests: the counters, and how many events the log holds.
    static func loadCounters(_ db: any SQLSession) async throws -> (counters: [String: Int64], eventCount: Int) {
        let counters = try await loadMeta(db)
        let events = Int(try await db.queryOne("SELECT count(*) FROM events")?.int(0) ?? 0)
        return (counters, events)
    }

    /// The rows of `meta`, by name.
    static func loadMeta(_ db: any SQLSession) async throws -> [String: Int64] {
        var values: [String: Int64] = [:]
        for row in try await db.query("SELECT name, value FROM meta", []) { values[row.text(0)] = row.int(1) }
        return values
    }
}
