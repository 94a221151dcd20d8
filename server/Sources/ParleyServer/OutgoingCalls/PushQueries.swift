// The tables of push notifications (migration 22): device tokens, the users' preferences and
// their options per channel. The same statements on both backends.

enum PushQueries {
    static func tokens(of users: [String], type: PushTokenType?, _ db: any SQLSession) async throws -> [String: [PushToken]] {
        guard !users.isEmpty else { return [:] }
        var c = SQLCondition()
        c.add("user_id IN (\(SQLCondition.placeholders(users.count)))", users.map { .text($0) })
        if let type { c.add("token_type = ?", [.text(type.rawValue)]) }
        var found: [String: [PushToken]] = [:]
        for row in try await db.query("""
            SELECT user_id, token_type, token FROM push_tokens WHERE \(c.sql) ORDER BY user_id, created_at, token
            """, c.binds) {
            guard let type = PushTokenType(rawValue: row.text(1)) else { continue }
            found[row.text(0), default: []].append(PushToken(type: type, token: row.text(2)))
        }
        return found
    }

    /// A token is one device's: registered for another user, it moves to this one. Beyond
    /// `PushTokenType.limitPerUser` of a type, the oldest go.
    static func add(_ token: PushToken, for userId: String, now: Int64, _ db: any SQLSession) async throws {
        try await db.execute("DELETE FROM push_tokens WHERE token_type = ? AND token = ? AND user_id <> ?",
                             [.text(token.type.rawValue), .text(token.token), .text(userId)])
        try await db.execute(RecordTables.upsertSQL("push_tokens", ["user_id", "token_type", "token", "created_at"],
                                                    key: ["user_id", "token_type", "token"]),
                             [.text(userId), .text(token.type.rawValue), .text(token.token), .int(now)])
        let kept = try await db.query("""
            SELECT token FROM push_tokens WHERE user_id = ? AND token_type = ? ORDER BY created_at DESC, token DESC
            """, [.text(userId), .text(token.type.rawValue)])
        for row in kept.dropFirst(PushTokenType.limitPerUser) {
            try await db.execute("DELETE FROM push_tokens WHERE user_id = ? AND token_type = ? AND token = ?",
                                 [.text(userId), .text(token.type.rawValue), .text(row.text(0))])
        }
    }

    static func remove(of userId: String, type: PushTokenType?, token: String?, _ db: any SQLSession) async throws -> [String] {
        var c = SQLCondition()
        c.add("user_id = ?", [.text(userId)])
        if let type { c.add("token_type = ?", [.text(type.rawValue)]) }
        if let token { c.add("token = ?", [.text(token)]) }
        let removed = try await db.query("SELECT token FROM push_tokens WHERE \(c.sql) ORDER BY created_at, token", c.binds).map { $0.text(0) }
        if !removed.isEmpty { try await db.execute("DELETE FROM push_tokens WHERE \(c.sql)", c.binds) }
        return removed
    }

    static let preferenceColumns = ["user_id", "trigger_option", "do_not_disturb", "start_hour", "start_min", "end_hour",
                                    "end_min", "timezone", "snooze_enabled", "snooze_start_ts", "snooze_end_ts"]

    static func preferences(of users: [String], _ db: any SQLSession) async throws -> [String: PushPreference] {
        guard !users.isEmpty else { return [:] }
        var found: [String: PushPreference] = [:]
        for row in try await db.query("""
            SELECT \(preferenceColumns.joined(separator: ", ")) FROM push_preferences
            WHERE user_id IN (\(SQLCondition.placeholders(users.count)))
            """, users.map { .text($0) }) {
            found[row.text(0)] = PushPreference(
                triggerOption: row.text(1), doNotDisturb: row.bool(2), startHour: Int(row.int(3)), startMinute: Int(row.int(4)),
                endHour: Int(row.int(5)), endMinute: Int(row.int(6)), timeZone: row.text(7), snoozeEnabled: row.bool(8),
                snoozeStart: row.int(9), snoozeEnd: row.int(10))
        }
        return found
    }

    static func save(_ p: PushPreference, for userId: String, _ db: any SQLSession) async throws {
        try await db.execute(RecordTables.upsertSQL("push_preferences", preferenceColumns, key: ["user_id"]), [
            .text(userId), .text(p.triggerOption), .bool(p.doNotDisturb), .int(Int64(p.startHour)), .int(Int64(p.startMinute)),
            .int(Int64(p.endHour)), .int(Int64(p.endMinute)), .text(p.timeZone), .bool(p.snoozeEnabled), .int(p.snoozeStart),
            .int(p.snoozeEnd),
        ])
    }

    static func channelTriggers(_ channelUrl: String, users: [String], _ db: any SQLSession) async throws -> [String: String] {
        guard !users.isEmpty else { return [:] }
        var found: [String: String] = [:]
        for row in try await db.query("""
            SELECT user_id, trigger_option FROM push_channel_preferences
            WHERE channel_url = ? AND user_id IN (\(SQLCondition.placeholders(users.count)))
            """, [.text(channelUrl)] + users.map { .text($0) }) {
            found[row.text(0)] = row.text(1)
        }
        return found
    }

    /// `default` is no row.
    static func saveChannelTrigger(_ option: String, for userId: String, in channelUrl: String, _ db: any SQLSession) async throws {
        if option == "default" {
            try await db.execute("DELETE FROM push_channel_preferences WHERE user_id = ? AND channel_url = ?",
                                 [.text(userId), .text(channelUrl)])
            return
        }
        try await db.execute(RecordTables.upsertSQL("push_channel_preferences", ["user_id", "channel_url", "trigger_option"],
                                                    key: ["user_id", "channel_url"]),
                             [.text(userId), .text(channelUrl), .text(option)])
    }

    /// Unread messages per user over their joined channels but one (whose count the request
    /// holds, changed by the message it sends), as `ChannelQueries.unreadTotals` counts them.
    static func unreadMessages(of users: [String], besides channelUrl: String, _ db: any SQLSession) async throws -> [String: Int64] {
        guard !users.isEmpty else { return [:] }
        var found: [String: Int64] = [:]
        for row in try await db.query("""
            SELECT vm.user_id, CAST(coalesce(sum(c.counted_messages - vm.unread_base), 0) AS BIGINT)
            FROM members vm JOIN channels c ON c.url = vm.channel_url
            WHERE vm.user_id IN (\(SQLCondition.placeholders(users.count))) AND vm.state = 'joined' AND c.url <> ?
            GROUP BY vm.user_id
            """, users.map { .text($0) } + [.text(channelUrl)]) {
            found[row.text(0)] = row.int(1)
        }
        return found
    }
}

extension RequestState: PushRecords, TranslationRecords {
    var pushGateway: PushGatewaySettings { shared.webhooks.defaults.push }
    var translator: TranslatorSettings { shared.webhooks.defaults.translator }

    func queueHookCall(_ call: QueuedHookCall) { stores.events.queueHookCall(call) }
    func holdPush(_ push: HeldPush) { stores.events.holdPush(push) }

    func pushTokens(of users: [String], type: PushTokenType?) async throws -> [String: [PushToken]] {
        try await PushQueries.tokens(of: users, type: type, db)
    }

    func addPushToken(_ token: PushToken, for userId: String, now: Int64) async throws {
        try await PushQueries.add(token, for: userId, now: now, db)
    }

    func removePushTokens(of userId: String, type: PushTokenType?, token: String?) async throws -> [String] {
        try await PushQueries.remove(of: userId, type: type, token: token, db)
    }

    func pushPreferences(of users: [String]) async throws -> [String: PushPreference] {
        try await PushQueries.preferences(of: users, db)
    }

    func savePushPreference(_ p: PushPreference, for userId: String) async throws {
        try await PushQueries.save(p, for: userId, db)
    }

    func channelPushTriggers(_ channelUrl: String, users: [String]) async throws -> [String: String] {
        try await PushQueries.channelTriggers(channelUrl, users: users, db)
    }

    func saveChannelPushTrigger(_ option: String, for userId: String, in channelUrl: String) async throws {
        try await PushQueries.saveChannelTrigger(option, for: userId, in: channelUrl, db)
    }

    func unreadMessages(of users: [String], besides channelUrl: String) async throws -> [String: Int64] {
        try await PushQueries.unreadMessages(of: users, besides: channelUrl, db)
    }
}
