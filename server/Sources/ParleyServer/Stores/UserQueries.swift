// Users are read from the database per request, never held in memory across requests: a
// request loads the users it touches (`users`), checks cached copies by their versions,
// and lists users by keyset queries in id order.

enum UserQueries {
    /// The users of `ids` that exist, with their metadata and versions: one statement (a
    /// user's row comes once per metadata key, once alone without any), since on PostgreSQL
    /// every statement is a round trip.
    static func users(_ ids: [String], _ db: any SQLSession) async throws -> [CachedUser] {
        var out: [CachedUser] = []
        let columns = (RecordTables.userColumns + ["version"]).map { "u.\($0)" }.joined(separator: ", ")
        for part in ChannelQueries.chunks(Array(Set(ids)).sorted()) {
            var rows: [(row: SQLRow, metadata: [String: String])] = []
            var index: [String: Int] = [:]
            for row in try await db.query("""
                SELECT \(columns), md.key, md.value FROM users u LEFT JOIN user_metadata md ON md.user_id = u.user_id
                WHERE u.user_id IN (\(SQLCondition.placeholders(part.count)))
                """, part.map { .text($0) }) {
                let id = row.text(0)
                if index[id] == nil {
                    index[id] = rows.count
                    rows.append((row, [:]))
                }
                if let key = row.optionalText(11) { rows[index[id]!].metadata[key] = row.text(12) }
            }
            for (row, metadata) in rows {
                out.append(CachedUser(version: row.int(10), user: UserRecord(
                    userId: row.text(0), nickname: row.text(1), profileUrl: row.text(2), isActive: row.bool(3),
                    createdAt: row.int(4), lastSeenAt: row.int(5), hasEverLoggedIn: row.bool(6),
                    metadata: metadata,
                    discoveryKeys: try RecordTables.decodeList([String].self, row.text(8), "discovery keys"),
                    preferredLanguages: try RecordTables.decodeList([String].self, row.text(9), "preferred languages"),
                    autoAccept: row.bool(7))))
            }
        }
        return out
    }

    /// The versions of the users of `ids` that exist. Every message of another server checks
    /// those of its channel's members: one statement text for any number of them, prepared once hot.
    static func versions(ofUsers ids: [String], _ db: any SQLSession) async throws -> [String: Int64] {
        guard !ids.isEmpty else { return [:] }
        let sql = "SELECT user_id, version FROM users WHERE \(db.dialect.isInJSONList("user_id"))"
        if db.dialect == .postgres { _ = HotStatements.learn(sql) }
        var out: [String: Int64] = [:]
        for row in try await db.query(sql, [.text(JSON.array(ids.sorted().map { .string($0) }).serialized())]) {
            out[row.text(0)] = row.int(1)
        }
        return out
    }

    /// Unread messages and channels with unread messages of a user's joined channels.
    static func unreadTotals(of userId: String, customTypes: [String]?, superMode: String,
                             _ db: any SQLSession) async throws -> (messages: Int64, channels: Int64) {
        var c = SQLCondition()
        c.add("vm.user_id = ? AND vm.state = 'joined'", [.text(userId)])
        if let customTypes, !customTypes.isEmpty {
            c.add("c.custom_type IN (\(SQLCondition.placeholders(customTypes.count)))", customTypes.map { .text($0) })
        }
        if superMode == "super" { c.add("c.is_super = 1") }
        if superMode == "nonsuper" { c.add("c.is_super = 0") }
        let row = try await db.queryOne("""
            SELECT CAST(coalesce(sum(c.counted_messages - vm.unread_base), 0) AS BIGINT),
                count(CASE WHEN c.counted_messages > vm.unread_base THEN 1 END)
            FROM members vm JOIN channels c ON c.url = vm.channel_url WHERE \(c.sql)
            """, c.binds)
        return (row?.int(0) ?? 0, row?.int(1) ?? 0)
    }

    /// Up to `limit` user ids after `after`, in id order, with the filters SQL states exactly.
    static func userListing(after: String?, ids: Set<String>?, nickname: String?, activeMode: String,
                            metadataKey: String?, metadataValues: [String]?, limit: Int,
                            _ db: any SQLSession) async throws -> [String] {
        var c = SQLCondition()
        if let after { c.add("u.user_id > ?", [.text(after)]) }
        if let ids {
            if ids.isEmpty { c.add("1 = 0") } else if ids.count <= ChannelQueries.chunkSize {
                c.add("u.user_id IN (\(SQLCondition.placeholders(ids.count)))", ids.sorted().map { .text($0) })
            }
        }
        if let nickname { c.add("u.nickname = ?", [.text(nickname)]) }
        switch activeMode {
        case "activated": c.add("u.is_active = 1")
        case "deactivated": c.add("u.is_active = 0")
        default: break
        }
        if let metadataKey {
            var sub = "x.user_id = u.user_id AND x.key = ?"
            var subBinds: [SQLValue] = [.text(metadataKey)]
            if let values = metadataValues {
                sub += values.isEmpty ? " AND 1 = 0" : " AND x.value IN (\(SQLCondition.placeholders(values.count)))"
                subBinds += values.map { .text($0) }
            }
            c.add("EXISTS (SELECT 1 FROM user_metadata x WHERE \(sub))", subBinds)
        }
        return try await db.query("SELECT u.user_id FROM users u WHERE \(c.sql) ORDER BY u.user_id LIMIT \(limit)", c.binds)
            .map { $0.text(0) }
    }
}
