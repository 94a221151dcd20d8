// The application's settings (PROTOCOL.md §6.5): whether members who join later see the
// messages sent before they joined, how many group channels one user may have joined, and
// how many members one group channel may hold.
// The command line gives the defaults (Config/Settings.swift); the admin API stores values
// in the database, where every server on it reads them, and those win.

struct ApplicationSettings: Sendable, Equatable {
    /// Off: a member's history starts when they join (their `ts_message_offset` is set to the
    /// channel's newest message at that moment, as a history reset does).
    var chatHistory = true
    /// Joined group channels per user; a join beyond it is refused, an invitation left out.
    var maxChannelsPerUser = 2_000
    /// Members (joined and invited) of one group channel; a creation, invitation or join that
    /// would go beyond it is refused. The command line alone sets these two.
    var maxMembersPerChannel = 2_000
    /// The same for Supergroup channels (`is_super`).
    var maxMembersPerSuperChannel = 20_000

    static let channelLimitRange: ClosedRange<Int> = 1...1_000_000
    static let memberLimitRange: ClosedRange<Int> = 1...1_000_000

    func memberLimit(isSuper: Bool) -> Int { isSuper ? maxMembersPerSuperChannel : maxMembersPerChannel }

    /// The stored names, one row each (`application_settings`).
    static let chatHistoryName = "chat_history"
    static let maxChannelsPerUserName = "max_channels_per_user"

    /// The defaults with the stored values laid over them (unknown or unreadable rows are
    /// ignored: a newer server may have written them).
    func overridden(by stored: [String: String]) -> ApplicationSettings {
        var settings = self
        switch stored[Self.chatHistoryName] {
        case "on": settings.chatHistory = true
        case "off": settings.chatHistory = false
        default: break
        }
        if let text = stored[Self.maxChannelsPerUserName], let value = Int(text), Self.channelLimitRange.contains(value) {
            settings.maxChannelsPerUser = value
        }
        return settings
    }

    var json: JSON {
        .obj([(Self.chatHistoryName, .bool(chatHistory)), (Self.maxChannelsPerUserName, .int(Int64(maxChannelsPerUser)))])
    }
}

/// The application's settings and the membership counts they limit.
protocol ApplicationRecords: AnyObject {
    /// The settings in force: the stored ones over the server's defaults.
    func applicationSettings() async throws -> ApplicationSettings
    /// Stores values (nil: the server's default again) in the request's transaction.
    func storeApplicationSettings(_ values: [String: String?]) async throws
    /// The group channels the user has joined, counted in the request's (write) transaction:
    /// two joins of one user count one after the other (one SQLite writer at a time; on
    /// PostgreSQL a lock named by the user, `ChannelStore.joinedChannelCount`).
    func joinedChannelCount(of userId: String) async throws -> Int
}

extension APIError {
    static func channelLimit(_ userId: String, _ limit: Int) -> APIError {
        APIError(status: 403, code: 900070,
                 message: "\"\(userId)\" has joined the most group channels a user may (\(limit)).")
    }

    static func memberLimit(_ limit: Int) -> APIError {
        APIError(status: 403, code: 900030,
                 message: "The channel would hold more than the \(limit) members a channel may.")
    }
}

// Membership under the settings: the history start and the channel limit.
extension ApplicationRecords where Self: MessageRecords {
    /// Where the history of a member who joins now starts: 0 (everything) with chat history
    /// on, else after the channel's newest message.
    func historyStartForNewMember(of url: String, _ settings: ApplicationSettings) async throws -> Int64 {
        settings.chatHistory ? 0 : try await newestMessageTs(url)
    }

    /// Whether the user may join one more channel.
    func hasRoomForChannel(_ userId: String, _ settings: ApplicationSettings) async throws -> Bool {
        try await joinedChannelCount(of: userId) < settings.maxChannelsPerUser
    }
}

enum ApplicationAdmin {
    typealias Needs = ApplicationRecords

    /// `GET /v3/applications/settings`: the settings in force (admin only).
    static func getSettings(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        return .json(try await s.applicationSettings().json)
    }

    /// `PUT /v3/applications/settings`: changes the settings given, keeps the others.
    static func updateSettings(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        let i = ctx.input
        var values: [String: String?] = [:]
        if let chatHistory = try i.bool(ApplicationSettings.chatHistoryName) {
            values[ApplicationSettings.chatHistoryName] = chatHistory ? "on" : "off"
        }
        let range = ApplicationSettings.channelLimitRange
        if let limit = try i.int(ApplicationSettings.maxChannelsPerUserName, min: Int64(range.lowerBound), max: Int64(range.upperBound)) {
            values[ApplicationSettings.maxChannelsPerUserName] = String(limit)
        }
        if values.isEmpty {
            throw APIError.missing("\(ApplicationSettings.chatHistoryName)\" or \"\(ApplicationSettings.maxChannelsPerUserName)")
        }
        try await s.storeApplicationSettings(values)
        return .json(try await s.applicationSettings().json)
    }

    /// `DELETE /v3/applications/settings`: back to the server's defaults (its command line).
    static func resetSettings(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        try await s.storeApplicationSettings([ApplicationSettings.chatHistoryName: nil, ApplicationSettings.maxChannelsPerUserName: nil])
        return .json(try await s.applicationSettings().json)
    }
}
