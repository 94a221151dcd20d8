// Channels and their members are read from the database per request, never held in memory
// across requests: a request loads the channels it touches (`channels`), listings are keyset
// queries in the orders of docs/PROTOCOL.md "Sort orders".
// The columns the orders use are kept by RecordTables: `channels.name_key` and
// `channel_metadata.value_key` (texts in NFC, `textOrderKey`), `channels.last_message_at`.

enum ChannelQueries {
    /// IN lists are cut to this many values: under both engines' parameter limits even when
    /// a statement repeats its list four times (PostgreSQL 65,535; SQLite 32,766 since 3.32,
    /// and the server needs 3.35 for RETURNING).
    static let chunkSize = 500

    static func chunks<T>(_ values: [T]) -> [ArraySlice<T>] {
        stride(from: 0, to: values.count, by: chunkSize).map { values[$0..<min(values.count, $0 + chunkSize)] }
    }

    // MARK: loading records

    /// The channels of `urls` that exist, whole: members, operators, restrictions, metadata
    /// and counters; and the last message of each that has one. On PostgreSQL one statement
    /// per 500 channels, since there every statement is a round trip: a server reading
    /// another server's events loads the channel again after every message. There a channel
    /// with an older copy in `bases` reads only the members written since the copy
    /// ("Members written since a copy" below). SQLite, in process, reads the parts apart.
    /// On PostgreSQL the same statement reads the versions of the users of `users` (those the
    /// copies show) and of the last messages' senders and mentions, returned by id, so that a
    /// load needs no statement of its own to check the cached users it shows; SQLite reads none.
    static func channels(_ urls: [String], bases: [String: CachedChannel] = [:], users: [String] = [],
                         _ db: any SQLSession) async throws -> (channels: [CachedChannel], userVersions: [String: Int64]) {
        var out: [CachedChannel] = []
        var userVersions: [String: Int64] = [:]
        var users = users
        for part in chunks(Array(Set(urls)).sorted()) {
            guard db.dialect == .postgres else {
                out += try await partsApart(part, db).assembled(bases: [:]).channels
                continue
            }
            let parts = try await partsInOneStatement(part, bases: bases, users: users, db)
            users = []
            userVersions.merge(parts.userVersions) { _, read in read }
            let read = try parts.assembled(bases: bases)
            out += read.channels
            ServerMetrics.shared.loaded(fromCopies: read.fromCopies)
            if !read.membersLeft.isEmpty {
                out += try await partsInOneStatement(read.membersLeft[...], bases: [:], users: [], db).assembled(bases: [:]).channels
            }
        }
        return (out, userVersions)
    }

    // Members written since a copy (PostgreSQL). Every write of a member row gives it the next
    // number of one sequence (`members.written`, set by a trigger, migration 29). A channel's
    // members are written only by the writer holding its lock, which takes the number after
    // the lock and gives the lock up once its commit is visible: so the numbers of one
    // channel's rows grow in commit order, and a snapshot that sees a row numbered n sees
    // every row of the channel numbered below n as it stands. A load notes the highest
    // number it saw (`CachedChannel.memberMark`); a later load from that copy reads only the
    // rows numbered above it, the members written since, and takes the rest from the copy.
    // Rows deleted since (members who left) do not show that way: the load also counts the
    // channel's members, and a channel whose count differs from the copy's members with the
    // new rows is read again whole. A writer's copy keeps the mark of the copy it loaded
    // (its own rows are numbered above it and read again: a row or two). A copy is a base only
    // for statements whose snapshots are taken after it was committed
    // (`RequestTransaction.loadsFromCopies`): a read in one snapshot that began earlier would
    // take rows newer than its snapshot from the copy.

    /// Migration 29 (PostgreSQL): the number of each member row's last write, from one
    /// sequence (its default cache of 1 hands numbers out in the order they are asked for),
    /// set on every insert and update whatever the statement, and the index a load from a copy
    /// reads by. Each may run again on a database that has them (a schema taken back by a test).
    static let memberWritesDefinitions = [
        "CREATE SEQUENCE IF NOT EXISTS member_writes",
        "ALTER TABLE members ADD COLUMN IF NOT EXISTS written BIGINT NOT NULL DEFAULT 0",
        "CREATE INDEX IF NOT EXISTS members_by_write ON members (channel_url, written)",
        """
        CREATE OR REPLACE FUNCTION parley_member_written() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.written := nextval('member_writes');
            RETURN NEW;
        END $$
        """,
        """
        CREATE OR REPLACE TRIGGER members_written BEFORE INSERT OR UPDATE ON members
            FOR EACH ROW EXECUTE FUNCTION parley_member_written()
        """,
    ]

    /// What `channels` assembles: each channel's row (`channelColumns` and `version`) with
    /// its members, the entries of the four small tables by channel, the last messages by id;
    /// on PostgreSQL each channel's member mark and count ("Members written since a copy"),
    /// and the members are those written since the copy in `bases`, if it had one.
    struct ChannelParts {
        var channels: [(row: SQLRow, members: [String: MemberRecord])] = []
        var memberMarks: [String: (mark: Int64, count: Int64)] = [:]
        var operators: [String: [(Int64, String)]] = [:]
        var bans: [String: [String: RestrictionRecord]] = [:]
        var mutes: [String: [String: RestrictionRecord]] = [:]
        var metadata: [String: [String: String]] = [:]
        var metacounters: [String: [String: Int64]] = [:]
        var lastMessages: [Int64: MessageRecord] = [:]
        /// PostgreSQL: the versions of the users the statement was asked for that exist.
        var userVersions: [String: Int64] = [:]

        /// The channels whole, each with its last message; and the channels read from a copy
        /// that lost members since, which must be read again whole.
        func assembled(bases: [String: CachedChannel]) throws
            -> (channels: [CachedChannel], membersLeft: [String], fromCopies: Int) {
            var membersLeft: [String] = []
            var fromCopies = 0
            let whole = try channels.compactMap { row, members -> CachedChannel? in
                let url = row.text(0)
                var members = members
                let stored = memberMarks[url]
                if let stored, let base = bases[url], base.memberMark >= 0 {
                    members = base.channel.members.merging(members) { _, written in written }
                    guard members.count == stored.count else {
                        membersLeft.append(url)
                        return nil
                    }
                    fromCopies += 1
                }
                var c = ChannelRecord(
                    url: url, name: row.text(1), coverUrl: row.text(2), customType: row.text(3), data: row.text(4),
                    createdAt: row.int(5), updatedAt: row.int(6), createdBy: row.optionalText(7), isDistinct: row.bool(8),
                    isSuper: row.bool(9), isPublic: row.bool(10), isEphemeral: row.bool(11), freeze: row.bool(12),
                    members: members,
                    operatorIds: (operators[url] ?? []).sorted { $0.0 < $1.0 }.map(\.1),
                    bans: bans[url] ?? [:], mutes: mutes[url] ?? [:], metadata: metadata[url] ?? [:],
                    metacounters: metacounters[url] ?? [:],
                    pinnedMessageIds: try RecordTables.decodeList([Int64].self, row.text(13), "pinned message ids"),
                    lastMessageId: row.int(14), changeSeq: row.int(15), changedAt: row.int(16))
                c.countedMessages = row.int(17)
                c.countedMentions = row.int(18)
                let message = c.lastMessageId != 0 ? lastMessages[c.lastMessageId] : nil
                return CachedChannel(version: row.int(19), channel: c, lastMessage: message,
                                     lastMessageSeq: message?.changeSeq ?? -1, memberMark: stored?.mark ?? -1)
            }
            return (whole, membersLeft, fromCopies)
        }

        /// A row of the four small tables: (table, channel, user or key, text, number, number).
        mutating func addEntry(_ row: SQLRow, from o: Int) {
            let url = row.text(o + 1)
            switch row.text(o) {
            case "operator": operators[url, default: []].append((row.int(o + 4), row.text(o + 2)))
            case "metadata": metadata[url, default: [:]][row.text(o + 2)] = row.text(o + 3)
            case "metacounter": metacounters[url, default: [:]][row.text(o + 2)] = row.int(o + 4)
            case "user": userVersions[row.text(o + 2)] = row.int(o + 4)
            case let kind:
                let r = RestrictionRecord(userId: row.text(o + 2), startAt: row.int(o + 4), endAt: row.int(o + 5),
                                          description: row.text(o + 3))
                if kind == "ban" { bans[url, default: [:]][r.userId] = r } else { mutes[url, default: [:]][r.userId] = r }
            }
        }
    }

    private static let channelSelectColumns = (RecordTables.channelColumns + ["version"]).map { "c.\($0)" }.joined(separator: ", ")
    private static let memberSelectColumns = RecordTables.memberColumns.map { "m.\($0)" }.joined(separator: ", ")

    /// The four small tables as rows of `ChannelParts.addEntry`; `list` is the IN list,
    /// `before` and `after` columns (each ending, or starting, with a comma) pad the rows.
    private static func smallTablesSQL(_ list: String, before: String = "", after: String = "") -> [String] {
        ["SELECT \(before)'operator', channel_url, user_id, '', position, 0\(after) FROM channel_operators WHERE channel_url IN (\(list))",
         "SELECT \(before)kind, channel_url, user_id, description, start_at, end_at\(after) FROM channel_restrictions WHERE channel_url IN (\(list))",
         "SELECT \(before)'metadata', channel_url, key, value, 0, 0\(after) FROM channel_metadata WHERE channel_url IN (\(list))",
         "SELECT \(before)'metacounter', channel_url, key, '', value, 0\(after) FROM channel_metacounters WHERE channel_url IN (\(list))"]
    }

    /// SQLite: the small tables in one statement, the members, the channel rows and the last
    /// messages in one each (a join would repeat every channel column for every member).
    private static func partsApart(_ part: ArraySlice<String>, _ db: any SQLSession) async throws -> ChannelParts {
        var parts = ChannelParts()
        let binds = part.map { SQLValue.text($0) }
        let list = SQLCondition.placeholders(part.count)
        for row in try await db.query(smallTablesSQL(list).joined(separator: " UNION ALL "), binds + binds + binds + binds) {
            parts.addEntry(row, from: 0)
        }
        var members: [String: [String: MemberRecord]] = [:]
        for row in try await db.query("SELECT \(memberSelectColumns) FROM members m WHERE m.channel_url IN (\(list))", binds) {
            members[row.text(0), default: [:]][row.text(1)] = RecordTables.memberRecord(row)
        }
        var lastIds: [Int64] = []
        for row in try await db.query("SELECT \(channelSelectColumns) FROM channels c WHERE c.url IN (\(list))", binds) {
            parts.channels.append((row, members[row.text(0)] ?? [:]))
            if row.int(14) != 0 { lastIds.append(row.int(14)) }
        }
        parts.lastMessages = try await MessageQueries.messages(db, ids: lastIds)
        return parts
    }

    /// PostgreSQL: one `UNION ALL` of four kinds of rows side by side — the channels' rows,
    /// their members' rows, the small tables' entries, the last messages with their mentions —
    /// each padded with NULLs where the other kinds' columns are (`OneStatementParts`).
    /// Members are those written since the copy in `bases`, or all of a channel without one.
    private static func partsInOneStatement(_ part: ArraySlice<String>, bases: [String: CachedChannel], users: [String],
                                            _ db: any SQLSession) async throws -> ChannelParts {
        let statement = OneStatementParts.statement(Array(part), marks: part.map { bases[$0]?.memberMark ?? -1 }, users: users)
        var reader = OneStatementParts.Reader()
        for row in try await db.query(statement.sql, statement.binds) {
            try reader.add(row)
        }
        return reader.parts
    }

    /// PostgreSQL: the statement of `partsInOneStatement` and its rows.
    enum OneStatementParts {
        /// The channel's row: its columns, its version, its members' mark and count.
        static let memberOffset = RecordTables.channelColumns.count + 3
        static let entryOffset = memberOffset + RecordTables.memberColumns.count
        static let messageOffset = entryOffset + 6
        static let messageWidth = RecordTables.messageColumns.count + 1

        private static func nulls(_ count: Int) -> String { Array(repeating: "NULL", count: count).joined(separator: ", ") }

        /// Every column as a NULL of its type, for a first branch of a `UNION ALL` that has
        /// none of them: PostgreSQL types a UNION's columns pairwise from the left, and two
        /// untyped NULLs would make a text column.
        private static let typedNullColumns = RecordTables.channelColumns.map { "(NULL::channels).\($0)" }
            + ["NULL::bigint", "NULL::bigint", "NULL::bigint"]
            + RecordTables.memberColumns.map { "(NULL::members).\($0)" }
            + ["NULL::text", "NULL::text", "NULL::text", "NULL::text", "NULL::bigint", "NULL::bigint"]
            + RecordTables.messageColumns.map { "(NULL::messages).\($0)" } + ["NULL::text"]

        /// One channel (another server's message): its URL, its URL with its copy's mark (-1:
        /// none), then its URL once for each of the five other branches, then the users whose
        /// versions it reads as a JSON array, then its URL for the users of its last message.
        static let oneChannelSQL = statement(
            list: "?", marked: "(VALUES (CAST(? AS text) COLLATE \"C\", CAST(? AS bigint))) AS k(url, mark)")

        /// Several channels (a listing's page): one text for any number, prepared
        /// (HotStatements.swift). The URLs as a JSON array, then the URLs with their marks as a
        /// JSON array of objects, then the URLs once for each of the five other branches. An IN
        /// list of placeholders was a new text for every count, planned each time (about 3.7 ms
        /// for this statement). Then the users and the URLs again, as for one channel.
        static let channelsSQL = statement(
            list: "SELECT json_array_elements_text(?::json)", marked: "json_to_recordset(?::json) AS k(url text, mark bigint)")

        /// The statement over the channels `list` names (an IN list or a subquery), with
        /// `marked` naming each with its copy's mark (`url`, `mark`), so that the plan looks each
        /// channel's member rows up by the index of migration 29.
        private static func statement(list: String, marked: String) -> String {
            let typedAfterChannel = typedNullColumns.dropFirst(memberOffset).joined(separator: ", ")
            var branches = [
                """
                SELECT \(channelSelectColumns),
                    (SELECT coalesce(max(mw.written), 0) FROM members mw WHERE mw.channel_url = c.url),
                    (SELECT count(*) FROM members mc WHERE mc.channel_url = c.url), \(typedAfterChannel)
                FROM channels c WHERE c.url IN (\(list))
                """,
                """
                SELECT \(nulls(memberOffset)), \(memberSelectColumns), \(nulls(6)), \(nulls(messageWidth))
                FROM \(marked) JOIN members m ON m.channel_url = k.url AND m.written > k.mark
                """,
            ]
            branches += smallTablesSQL(list, before: nulls(entryOffset) + ", ", after: ", " + nulls(messageWidth))
            // Each last message looked up by its id from its channel's row, in a subquery the
            // planner cannot merge into a join (OFFSET 0): a prepared statement's generic plan
            // is made once, often while `messages` is nearly empty, and a plan chosen then
            // (a scan of the whole table, or a hash join over it) would stay in use as the
            // table grows, until the next ANALYZE.
            branches.append("""
                SELECT \(nulls(messageOffset)), \(RecordTables.messageColumns.map { "lm.\($0)" }.joined(separator: ", ")),
                    array_to_json(ARRAY(SELECT mm.user_id FROM message_mentions mm WHERE mm.message_id = lm.id ORDER BY mm.position))::text
                FROM channels lc CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.id = lc.last_message_id OFFSET 0) lm
                WHERE lc.url IN (\(list))
                """)
            // The users' versions, as entries of kind "user"; each a probe of its key, as above.
            // Those given, and the sender and mentions of each last message: a copy's last
            // message is older than the one loaded, whose users its render shows too.
            branches.append("""
                SELECT \(nulls(entryOffset)), 'user', '', u.user_id, '', u.version, 0, \(nulls(messageWidth))
                FROM (SELECT json_array_elements_text(?::json)
                      UNION ALL
                      SELECT lu.id FROM channels lc CROSS JOIN LATERAL (
                          SELECT m.sender_id FROM messages m WHERE m.id = lc.last_message_id
                          UNION ALL SELECT mm.user_id FROM message_mentions mm WHERE mm.message_id = lc.last_message_id
                          OFFSET 0) AS lu(id)
                      WHERE lc.url IN (\(list))) AS w(id)
                CROSS JOIN LATERAL (SELECT x.user_id, x.version FROM users x WHERE x.user_id = w.id OFFSET 0) u
                """)
            return branches.joined(separator: " UNION ALL ")
        }

        /// The statement for `urls` with the marks of their copies and the users of `users`, and its values.
        static func statement(_ urls: [String], marks: [Int64], users: [String]) -> (sql: String, binds: [SQLValue]) {
            let userList = SQLValue.text(JSON.array(users.map { .string($0) }).serialized())
            if urls.count == 1 {
                let url = SQLValue.text(urls[0])
                return (oneChannelSQL, [url, url, .int(marks[0])] + Array(repeating: url, count: 5) + [userList, url])
            }
            let list = SQLValue.text(JSON.array(urls.map { .string($0) }).serialized())
            let marked = SQLValue.text(JSON.array(zip(urls, marks).map { url, mark in
                JSON.obj([("url", .string(url)), ("mark", .int(mark))])
            }).serialized())
            return (channelsSQL, [list, marked] + Array(repeating: list, count: 5) + [userList, list])
        }

        /// Collects the rows of `statement`.
        struct Reader {
            private var channelRows: [SQLRow] = []
            private var members: [String: [String: MemberRecord]] = [:]
            private var collected = ChannelParts()

            mutating func add(_ row: SQLRow) throws {
                if row.optionalText(0) != nil {
                    channelRows.append(row)
                    let columns = RecordTables.channelColumns.count
                    collected.memberMarks[row.text(0)] = (row.int(columns + 1), row.int(columns + 2))
                } else if let url = row.optionalText(memberOffset) {
                    let member = RecordTables.memberRecord(row, from: memberOffset)
                    members[url, default: [:]][member.userId] = member
                } else if row.optionalText(entryOffset) != nil {
                    collected.addEntry(row, from: entryOffset)
                } else if row.optionalInt(messageOffset) != nil {
                    let fields = SQLRow(values: Array(row.values[messageOffset..<(messageOffset + messageWidth)]))
                    let mentions = try RecordTables.decodeList([String].self, fields.text(messageWidth - 1), "mentions")
                    let message = try RecordTables.messageRecord(fields, mentions: mentions)
                    collected.lastMessages[message.id] = message
                }
            }

            var parts: ChannelParts {
                var parts = collected
                parts.channels = channelRows.map { ($0, members[$0.text(0)] ?? [:]) }
                return parts
            }
        }
    }

    /// What `RecordCache` compares: each existing channel's version and its last message's
    /// `change_seq` (-1 without one). On PostgreSQL the same statement reads the versions of
    /// the users of `users` (those the copies show), so that their check needs no statement
    /// of its own; SQLite reads none.
    static func versions(ofChannels urls: [String], users: [String] = [], _ db: any SQLSession) async throws
        -> (channels: [String: (version: Int64, lastMessageSeq: Int64)], users: [String: Int64]) {
        var out: [String: (Int64, Int64)] = [:]
        if db.dialect == .postgres {
            let list: SQLValue = urls.count == 1 ? .text(urls[0]) : .text(JSON.array(urls.map { .string($0) }).serialized())
            let userList = SQLValue.text(JSON.array(users.map { .string($0) }).serialized())
            var userVersions: [String: Int64] = [:]
            for row in try await db.query(urls.count == 1 ? versionOfOneChannelSQL : versionsOfChannelsSQL, [list, userList]) {
                if let url = row.optionalText(0) { out[url] = (row.int(1), row.int(2)) } else { userVersions[row.text(3)] = row.int(1) }
            }
            return (out, userVersions)
        }
        for part in chunks(urls.sorted()) {
            for row in try await db.query("""
                SELECT c.url, c.version, coalesce(m.change_seq, -1) FROM channels c LEFT JOIN messages m ON m.id = c.last_message_id
                WHERE c.url IN (\(SQLCondition.placeholders(part.count)))
                """, part.map { .text($0) }) {
                out[row.text(0)] = (row.int(1), row.int(2))
            }
        }
        return (out, [:])
    }

    /// PostgreSQL: the statements of `versions(ofChannels:)`, for one channel and for a JSON
    /// array of URLs (prepared: HotStatements.swift). The last message is found by its id
    /// per channel, whatever the plan made while `messages` was small.
    /// The users' versions follow as rows with no URL, the user's id last.
    static let versionOfOneChannelSQL = versionsSQL(of: "?")
    static let versionsOfChannelsSQL = versionsSQL(of: "SELECT json_array_elements_text(?::json)")

    private static func versionsSQL(of list: String) -> String {
        """
        SELECT c.url, c.version, coalesce((SELECT m.change_seq FROM messages m WHERE m.id = c.last_message_id), -1), NULL::text
        FROM channels c WHERE c.url IN (\(list))
        UNION ALL
        SELECT NULL, u.version, 0, u.user_id FROM json_array_elements_text(?::json) AS w(id)
        CROSS JOIN LATERAL (SELECT x.user_id, x.version FROM users x WHERE x.user_id = w.id OFFSET 0) u
        """
    }

    /// The channels a user is a member of (joined or invited), by URL.
    static func urls(memberOf userId: String, _ db: any SQLSession) async throws -> [String] {
        try await db.query("SELECT channel_url FROM members WHERE user_id = ? ORDER BY channel_url", [.text(userId)]).map { $0.text(0) }
    }

    /// The channels whose render shows the user anywhere: as a member, creator or inviter,
    /// or as the sender or a mention of the last message.
    static func urls(showing userId: String, _ db: any SQLSession) async throws -> [String] {
        let id = SQLValue.text(userId)
        return try await db.query("""
            SELECT channel_url FROM members WHERE user_id = ?
            UNION SELECT url FROM channels WHERE created_by = ?
            UNION SELECT channel_url FROM members WHERE inviter_id = ?
            UNION SELECT c.url FROM channels c JOIN messages m ON m.id = c.last_message_id WHERE m.sender_id = ?
            UNION SELECT c.url FROM channels c JOIN message_mentions mm ON mm.message_id = c.last_message_id WHERE mm.user_id = ?
            """, [id, id, id, id, id]).map { $0.text(0) }.sorted()
    }

    /// The group channels the user has joined. The caller keeps a count and the join it allows
    /// apart from another join of the same user (`ChannelStore.joinedChannelCount`).
    static func joinedChannelCount(of userId: String, _ db: any SQLSession) async throws -> Int {
        let row = try await db.queryOne("SELECT count(*) FROM members WHERE user_id = ? AND state = 'joined'", [.text(userId)])
        return Int(row?.int(0) ?? 0)
    }

    /// The oldest distinct, non-super channel of `customType` whose members are exactly `ids`.
    static func distinctChannel(members ids: Set<String>, customType: String, _ db: any SQLSession) async throws -> String? {
        var c = SQLCondition()
        c.add("c.is_distinct = 1 AND c.is_super = 0 AND c.custom_type = ?", [.text(customType)])
        c.add("(SELECT count(*) FROM members x WHERE x.channel_url = c.url) = ?", [.int(Int64(ids.count))])
        let sorted = ids.sorted()
        if let first = sorted.first {
            // Starting from one member's channels keeps this to an index range.
            c.add("c.url IN (SELECT channel_url FROM members WHERE user_id = ?)", [.text(first)])
            if sorted.count <= chunkSize {
                c.add("NOT EXISTS (SELECT 1 FROM members x WHERE x.channel_url = c.url AND x.user_id NOT IN (\(SQLCondition.placeholders(sorted.count))))",
                      sorted.map { .text($0) })
            }
        }
        for url in try await db.query("SELECT c.url FROM channels c WHERE \(c.sql) ORDER BY c.created_at, c.url", c.binds).map({ $0.text(0) }) {
            if sorted.count <= chunkSize { return url }
            // A member list too long for one IN list: compared here.
            let members = try await db.query("SELECT user_id FROM members WHERE channel_url = ?", [.text(url)]).map { $0.text(0) }
            if Set(members) == ids { return url }
        }
        return nil
    }

    // MARK: changelogs

    /// The user's channels changed after `start` (for them: the channel, or their membership),
    /// in change order, with the change's position.
    static func changedChannels(of userId: String, after start: Sync.Start, showEmpty: Bool, showFrozen: Bool,
                                customTypes: [String]?, limit: Int, _ db: any SQLSession) async throws -> [(url: String, seq: Int64)] {
        let seq = "(CASE WHEN c.change_seq > vm.change_seq THEN c.change_seq ELSE vm.change_seq END)"
        let at = "(CASE WHEN c.changed_at > vm.changed_at THEN c.changed_at ELSE vm.changed_at END)"
        var c = SQLCondition()
        c.add("vm.user_id = ?", [.text(userId)])
        switch start {
        case .seq(let s): c.add("\(seq) > ?", [.int(s)])
        case .time(let t): c.add("\(at) >= ?", [.int(t)])
        }
        if !showEmpty { c.add(visibleLastMessage(viewer: true)) }
        if !showFrozen { c.add("c.is_frozen = 0") }
        if let customTypes, !customTypes.isEmpty {
            c.add("c.custom_type IN (\(SQLCondition.placeholders(customTypes.count)))", customTypes.map { .text($0) })
        }
        return try await db.query("""
            SELECT c.url, \(seq) FROM members vm JOIN channels c ON c.url = vm.channel_url
            WHERE \(c.sql) ORDER BY 2 LIMIT \(limit)
            """, c.binds).map { ($0.text(0), $0.int(1)) }
    }

    /// The user's memberships that ended after `start` and were not taken up again.
    static func endedMemberships(of userId: String, after start: Sync.Start, limit: Int,
                                 _ db: any SQLSession) async throws -> [MembershipTombstoneRecord] {
        let (clause, value): (String, Int64) = switch start {
        case .seq(let s): ("t.seq > ?", s)
        case .time(let t): ("t.at >= ?", t)
        }
        return try await db.query("""
            SELECT t.user_id, t.channel_url, t.at, t.seq FROM membership_tombstones t
            WHERE t.user_id = ? AND \(clause)
                AND NOT EXISTS (SELECT 1 FROM members m WHERE m.channel_url = t.channel_url AND m.user_id = t.user_id)
            ORDER BY t.seq LIMIT \(limit)
            """, [.text(userId), .int(value)]).map {
            MembershipTombstoneRecord(userId: $0.text(0), channelUrl: $0.text(1), at: $0.int(2), seq: $0.int(3))
        }
    }

    // MARK: listings

    /// "The channel has a last message the viewer may see" (`RecordRenderer.lastMessage`): a
    /// history offset hides an older one. `vm` is the viewer's member row, if any.
    static func visibleLastMessage(viewer: Bool) -> String {
        viewer ? "(c.last_message_id <> 0 AND (vm.user_id IS NULL OR c.last_message_at > vm.ts_message_offset))"
            : "c.last_message_id <> 0"
    }

    enum Scope {
        /// The channels the user is a member of (joined or invited).
        case memberOf(String)
        /// Public channels and the user's own; every channel when nil (the admin).
        case visibleTo(String?)
    }

    /// The SQL expressions of an order's sort key, component by component, in the order and
    /// with the values of `Channels.sortKey` (keep the two in step: a page continues from
    /// the key `sortKey` computes).
    static func sortExpressions(_ order: String, viewer: Bool) -> [String] {
        switch order {
        case "latest_last_message":
            let has = visibleLastMessage(viewer: viewer)
            return ["(CASE WHEN \(has) THEN 0 ELSE 1 END)", "(CASE WHEN \(has) THEN -c.last_message_at ELSE -c.created_at END)",
                    "-c.created_at", "c.url"]
        case "channel_name_alphabetical":
            return ["c.name_key", "c.url"]
        case "metadata_value_alphabetical":
            return ["(CASE WHEN mo.value_key IS NULL THEN 1 ELSE 0 END)", "coalesce(mo.value_key, '')", "c.url"]
        default:
            return ["-c.created_at", "c.url"]
        }
    }

    /// Up to `limit` channel URLs of a listing after the sort key `after`, in order. The
    /// filters that SQL states exactly are applied here; the caller applies `Channels.matches`
    /// to what it loads (prefix and substring filters compare as Swift compares text).
    static func listing(_ scope: Scope, filter f: Channels.ListFilter, order: String, metadataOrderKey: String?,
                        after: [JSON]?, limit: Int, _ db: any SQLSession) async throws -> [String] {
        var from = ""
        var binds: [SQLValue] = []
        var c = SQLCondition()
        let viewer: Bool
        switch scope {
        case .memberOf(let user):
            from = "members vm JOIN channels c ON c.url = vm.channel_url"
            c.add("vm.user_id = ?", [.text(user)])
            viewer = true
        case .visibleTo(let user?):
            from = "channels c LEFT JOIN members vm ON vm.channel_url = c.url AND vm.user_id = ?"
            binds.append(.text(user))
            c.add("(c.is_public = 1 OR vm.user_id IS NOT NULL)")
            viewer = true
        case .visibleTo(nil):
            from = "channels c"
            viewer = false
        }
        if order == "metadata_value_alphabetical" {
            from += " LEFT JOIN channel_metadata mo ON mo.channel_url = c.url AND mo.key = ?"
            binds.append(.text(metadataOrderKey ?? ""))
        }
        if !f.showEmpty { c.add(visibleLastMessage(viewer: viewer)) }
        if !f.showFrozen { c.add("c.is_frozen = 0") }
        if f.joinedOnlyByViewer { c.add(viewer ? "vm.state = 'joined'" : "1 = 0") }
        switch f.distinctMode {
        case "distinct": c.add("c.is_distinct = 1")
        case "nondistinct": c.add("c.is_distinct = 0")
        default: break
        }
        switch f.publicMode {
        case "public": c.add("c.is_public = 1")
        case "private": c.add("c.is_public = 0")
        default: break
        }
        switch f.superMode {
        case "super": c.add("c.is_super = 1")
        case "nonsuper": c.add("c.is_super = 0")
        default: break
        }
        if viewer {
            // The viewer's member filters apply to channels they are a member of only.
            switch f.memberState {
            case "joined_only": c.add("(vm.user_id IS NULL OR vm.state = 'joined')")
            case "invited_only", "invited_by_non_friend": c.add("(vm.user_id IS NULL OR vm.state = 'invited')")
            case "invited_by_friend": c.add("vm.user_id IS NULL")
            default: break
            }
            switch f.hiddenMode {
            case "unhidden_only": c.add("(vm.user_id IS NULL OR vm.hidden_state = 'unhidden')")
            case "hidden_only": c.add("(vm.user_id IS NULL OR vm.hidden_state <> 'unhidden')")
            case "hidden_allow_auto_unhide", "hidden_prevent_auto_unhide":
                c.add("(vm.user_id IS NULL OR vm.hidden_state = ?)", [.text(f.hiddenMode)])
            default: break
            }
            if f.unreadFilter == "unread_message" {
                c.add("(vm.user_id IS NULL OR (vm.state = 'joined' AND c.counted_messages > vm.unread_base))")
            }
        }
        if let types = f.customTypes, !types.isEmpty {
            c.add("c.custom_type IN (\(SQLCondition.placeholders(types.count)))", types.map { .text($0) })
        }
        if let urls = f.urls, !urls.isEmpty {
            c.add("c.url IN (\(SQLCondition.placeholders(urls.count)))", urls.map { .text($0) })
        }
        // Names compare as Swift compares them (canonical equivalence): by their NFC form.
        if let name = f.name { c.add("c.name_key = ?", [.text(nameOrderKeyText(name))]) }
        if let exact = f.exactly {
            c.add("(SELECT count(*) FROM members x WHERE x.channel_url = c.url) = ?", [.int(Int64(exact.count))])
            if !exact.isEmpty && exact.count <= chunkSize {
                c.add("NOT EXISTS (SELECT 1 FROM members x WHERE x.channel_url = c.url AND x.user_id NOT IN (\(SQLCondition.placeholders(exact.count))))",
                      exact.sorted().map { .text($0) })
            }
        }
        if let include = f.include, !include.isEmpty, include.count <= chunkSize {
            let unique = Array(Set(include)).sorted()
            let list = SQLCondition.placeholders(unique.count)
            if f.queryAnd {
                c.add("(SELECT count(*) FROM members x WHERE x.channel_url = c.url AND x.user_id IN (\(list))) = ?",
                      unique.map { .text($0) } + [.int(Int64(unique.count))])
            } else {
                c.add("EXISTS (SELECT 1 FROM members x WHERE x.channel_url = c.url AND x.user_id IN (\(list)))", unique.map { .text($0) })
            }
        }
        if let a = f.createdAfter { c.add("c.created_at > ?", [.int(a)]) }
        if let b = f.createdBefore { c.add("c.created_at < ?", [.int(b)]) }
        if let key = f.metadataKey {
            var sub = "x.channel_url = c.url AND x.key = ?"
            var subBinds: [SQLValue] = [.text(key)]
            if let values = f.metadataValues, !values.isEmpty {
                sub += " AND x.value_key IN (\(SQLCondition.placeholders(values.count)))"
                subBinds += values.map { .text(orderKeyText($0)) }
            }
            c.add("EXISTS (SELECT 1 FROM channel_metadata x WHERE \(sub))", subBinds)
        }
        let keys = sortExpressions(order, viewer: viewer)
        if let after {
            c.add("(\(keys.joined(separator: ", "))) > (\(SQLCondition.placeholders(keys.count)))", after.map(sqlValue))
        }
        binds.append(contentsOf: c.binds)
        return try await db.query("SELECT c.url FROM \(from) WHERE \(c.sql) ORDER BY \(keys.joined(separator: ", ")) LIMIT \(limit)",
                                  binds).map { $0.text(0) }
    }

    /// A sort key component (an int or a string, as tokens hold them) as a bound value.
    static func sqlValue(_ key: JSON) -> SQLValue {
        switch key {
        case .int(let v): return .int(v)
        case .string(let s): return .text(s)
        default: return .null
        }
    }
}
