// Polls are read from and written to the database as the request goes, like messages (the
// tables are in Storage/Migrations.swift, migration 8). Every read below is one indexed
// query, or one per table for a batch of polls.

enum PollQueries {
    static let pollColumns = ["id", "channel_url", "message_id", "title", "allow_user_suggestion", "allow_multiple_votes",
                              "close_at", "is_closed", "created_by", "created_at", "updated_at", "next_option_id",
                              "change_seq", "changed_at"]
    static let columnList = pollColumns.map { "p." + $0 }.joined(separator: ", ")
    static let upsertPollSQL = RecordTables.upsertSQL("polls", pollColumns, key: ["id"])
    static let upsertOptionSQL = RecordTables.upsertSQL(
        "poll_options", ["poll_id", "id", "text", "created_by", "created_at", "updated_at"], key: ["poll_id", "id"])

    /// Writes the poll row and its options as the record has them (removed options go, with
    /// their votes).
    static func put(_ p: PollRecord, _ db: any SQLSession) async throws {
        try await db.execute(upsertPollSQL, [
            .int(p.id), .text(p.channelUrl), .int(p.messageId), .text(p.title), .bool(p.allowUserSuggestion),
            .bool(p.allowMultipleVotes), .int(p.closeAt), .bool(p.isClosed), .optional(p.createdBy), .int(p.createdAt),
            .int(p.updatedAt), .int(p.nextOptionId), .int(p.changeSeq), .int(p.changedAt),
        ])
        let kept = p.options.map { SQLValue.int($0.id) }
        let notKept = kept.isEmpty ? "" : " AND id NOT IN (\(SQLCondition.placeholders(kept.count)))"
        let optionNotKept = kept.isEmpty ? "" : " AND option_id NOT IN (\(SQLCondition.placeholders(kept.count)))"
        try await db.execute("DELETE FROM poll_votes WHERE poll_id = ?" + optionNotKept, [.int(p.id)] + kept)
        try await db.execute("DELETE FROM poll_options WHERE poll_id = ?" + notKept, [.int(p.id)] + kept)
        for o in p.options {
            try await db.execute(upsertOptionSQL, [.int(p.id), .int(o.id), .text(o.text), .optional(o.createdBy),
                                                   .int(o.createdAt), .int(o.updatedAt)])
        }
    }

    /// Polls selected by `tail` (SQL after `FROM polls p WHERE`, may end with ORDER BY/LIMIT),
    /// with their options, in the order of `tail`.
    static func load(_ db: any SQLSession, _ tail: String, _ binds: [SQLValue]) async throws -> [PollRecord] {
        let rows = try await db.query("SELECT \(columnList) FROM polls p WHERE \(tail)", binds)
        if rows.isEmpty { return [] }
        let ids = rows.map { $0.int(0) }
        var options: [Int64: [PollOptionRecord]] = [:]
        for row in try await db.query("""
            SELECT poll_id, id, text, created_by, created_at, updated_at FROM poll_options
            WHERE poll_id IN (\(SQLCondition.placeholders(ids.count))) ORDER BY poll_id, id
            """, ids.map { .int($0) }) {
            options[row.int(0), default: []].append(PollOptionRecord(
                id: row.int(1), text: row.text(2), createdBy: row.optionalText(3), createdAt: row.int(4), updatedAt: row.int(5)))
        }
        return rows.map { row in
            PollRecord(id: row.int(0), channelUrl: row.text(1), messageId: row.int(2), title: row.text(3),
                       allowUserSuggestion: row.bool(4), allowMultipleVotes: row.bool(5), closeAt: row.int(6),
                       isClosed: row.bool(7), createdBy: row.optionalText(8), createdAt: row.int(9), updatedAt: row.int(10),
                       nextOptionId: row.int(11), changeSeq: row.int(12), changedAt: row.int(13),
                       options: options[row.int(0)] ?? [])
        }
    }

    static func poll(_ db: any SQLSession, id: Int64) async throws -> PollRecord? {
        try await load(db, "p.id = ?", [.int(id)]).first
    }

    static func polls(_ db: any SQLSession, ids: [Int64]) async throws -> [Int64: PollRecord] {
        let unique = Array(Set(ids))
        var out: [Int64: PollRecord] = [:]
        for chunk in stride(from: 0, to: unique.count, by: 500) {
            let part = Array(unique[chunk..<min(unique.count, chunk + 500)])
            for p in try await load(db, "p.id IN (\(SQLCondition.placeholders(part.count)))", part.map { .int($0) }) {
                out[p.id] = p
            }
        }
        return out
    }

    /// A poll is visible to a reader whose history starts after `offset` when no message
    /// carries it yet, or its message is after the offset (as messages are, PROTOCOL.md §7.2).
    static func visibility(after offset: Int64?, to c: inout SQLCondition) {
        guard let offset, offset > 0 else { return }
        c.add("(p.message_id = 0 OR EXISTS (SELECT 1 FROM messages m WHERE m.id = p.message_id AND m.created_at > ?))",
              [.int(offset)])
    }

    /// Up to `limit` polls of the channel with ids below `before`, newest first.
    static func page(_ db: any SQLSession, channel: String, before: Int64?, visibleAfter offset: Int64?,
                     limit: Int) async throws -> [PollRecord] {
        var c = SQLCondition()
        c.add("p.channel_url = ?", [.text(channel)])
        if let before { c.add("p.id < ?", [.int(before)]) }
        visibility(after: offset, to: &c)
        return try await load(db, "\(c.sql) ORDER BY p.id DESC LIMIT \(limit)", c.binds)
    }

    /// Polls of the channel changed (created included) after a changelog start, in change order.
    static func changes(_ db: any SQLSession, channel: String, after start: Sync.Start, visibleAfter offset: Int64?,
                        limit: Int) async throws -> [PollRecord] {
        var c = SQLCondition()
        c.add("p.channel_url = ?", [.text(channel)])
        switch start {
        case .seq(let s): c.add("p.change_seq > ?", [.int(s)])
        case .time(let t): c.add("p.changed_at >= ?", [.int(t)])
        }
        visibility(after: offset, to: &c)
        return try await load(db, "\(c.sql) ORDER BY p.change_seq LIMIT \(limit)", c.binds)
    }

    static func tombstones(_ db: any SQLSession, channel: String, after start: Sync.Start,
                           limit: Int) async throws -> [PollTombstoneRecord] {
        let (clause, value): (String, Int64) = switch start {
        case .seq(let s): ("seq > ?", s)
        case .time(let t): ("deleted_at >= ?", t)
        }
        return try await db.query("""
            SELECT poll_id, channel_url, deleted_at, seq FROM poll_tombstones
            WHERE channel_url = ? AND \(clause) ORDER BY seq LIMIT \(limit)
            """, [.text(channel), .int(value)]).map {
            PollTombstoneRecord(pollId: $0.int(0), channelUrl: $0.text(1), deletedAt: $0.int(2), seq: $0.int(3))
        }
    }

    /// Deletes the poll, its options and votes, and leaves its tombstone.
    static func delete(_ p: PollRecord, tombstone: PollTombstoneRecord, _ db: any SQLSession) async throws {
        try await db.execute("DELETE FROM poll_votes WHERE poll_id = ?", [.int(p.id)])
        try await db.execute("DELETE FROM poll_options WHERE poll_id = ?", [.int(p.id)])
        try await db.execute("DELETE FROM polls WHERE id = ?", [.int(p.id)])
        try await db.execute(RecordTables.upsertSQL("poll_tombstones", ["poll_id", "channel_url", "deleted_at", "seq"], key: ["poll_id"]),
                             [.int(tombstone.pollId), .text(tombstone.channelUrl), .int(tombstone.deletedAt), .int(tombstone.seq)])
    }

    /// Drops a deleted channel's polls with everything they hold, tombstones included (the
    /// channel's own tombstone covers them). Held, as `MessageQueries.deleteChannelMessages`.
    static func deleteChannelPolls(_ db: any SQLSession, channel: String) async throws {
        let ofChannel = "poll_id IN (SELECT id FROM polls WHERE channel_url = ?)"
        for (table, condition) in [("poll_votes", ofChannel), ("poll_options", ofChannel), ("polls", "channel_url = ?"),
                                   ("poll_tombstones", "channel_url = ?")] {
            try await db.executeHeld(SQLWrite(sql: "DELETE FROM \(table) WHERE \(condition)", binds: [.text(channel)], table: table))
        }
    }

    /// The votes of each poll, counted per option and per voter.
    static func tallies(_ db: any SQLSession, polls ids: [Int64]) async throws -> [Int64: PollTally] {
        if ids.isEmpty { return [:] }
        let unique = Array(Set(ids))
        let list = SQLCondition.placeholders(unique.count)
        let binds = unique.map { SQLValue.int($0) }
        var out: [Int64: PollTally] = [:]
        for row in try await db.query("""
            SELECT poll_id, option_id, count(*) FROM poll_votes WHERE poll_id IN (\(list)) GROUP BY poll_id, option_id
            """, binds) {
            out[row.int(0), default: PollTally()].counts[row.int(1)] = row.int(2)
        }
        for row in try await db.query("""
            SELECT poll_id, count(DISTINCT user_id) FROM poll_votes WHERE poll_id IN (\(list)) GROUP BY poll_id
            """, binds) {
            out[row.int(0), default: PollTally()].voterCount = row.int(1)
        }
        return out
    }

    /// The option ids each given poll has the user's votes on, in option order.
    static func votes(_ db: any SQLSession, polls ids: [Int64], user: String) async throws -> [Int64: [Int64]] {
        if ids.isEmpty { return [:] }
        let unique = Array(Set(ids))
        var out: [Int64: [Int64]] = [:]
        for row in try await db.query("""
            SELECT poll_id, option_id FROM poll_votes WHERE user_id = ? AND poll_id IN (\(SQLCondition.placeholders(unique.count)))
            ORDER BY poll_id, option_id
            """, [.text(user)] + unique.map { .int($0) }) {
            out[row.int(0), default: []].append(row.int(1))
        }
        return out
    }

    /// Every voter of the poll with the option ids they voted for, in option order.
    static func votesByUser(_ db: any SQLSession, poll id: Int64) async throws -> [String: [Int64]] {
        var out: [String: [Int64]] = [:]
        for row in try await db.query("SELECT user_id, option_id FROM poll_votes WHERE poll_id = ? ORDER BY user_id, option_id",
                                      [.int(id)]) {
            out[row.text(0), default: []].append(row.int(1))
        }
        return out
    }

    /// Replaces the user's votes on the poll by votes on `options` (none: the votes go).
    static func setVotes(_ db: any SQLSession, poll id: Int64, user: String, options: [Int64], at now: Int64) async throws {
        try await db.execute("DELETE FROM poll_votes WHERE poll_id = ? AND user_id = ?", [.int(id), .text(user)])
        for option in options {
            try await db.execute("INSERT INTO poll_votes (poll_id, option_id, user_id, voted_at) VALUES (?, ?, ?, ?)",
                                 [.int(id), .int(option), .text(user), .int(now)])
        }
    }

    /// Up to `limit` voters of an option after `after`, by user id.
    static func voters(_ db: any SQLSession, poll id: Int64, option: Int64, after: String?, limit: Int) async throws -> [String] {
        var c = SQLCondition()
        c.add("poll_id = ?", [.int(id)])
        c.add("option_id = ?", [.int(option)])
        if let after { c.add("user_id > ?", [.text(after)]) }
        return try await db.query("SELECT user_id FROM poll_votes WHERE \(c.sql) ORDER BY user_id LIMIT \(limit)", c.binds)
            .map { $0.text(0) }
    }
}
