import HTTPTypes

// Users: CRUD, session tokens, unread counts, invitation preference (PROTOCOL.md §5).

func validateUserId(_ id: String, field: String = "user_id") throws {
    if id.isEmpty { throw APIError.invalid(field, "must not be empty.") }
    if id.utf8.count > 80 { throw APIError.tooLong(field, 80) }
    if id.unicodeScalars.contains(where: { $0.value < 0x20 }) { throw APIError.invalid(field, "must not contain control characters.") }
    // A path segment of "." or ".." is removed or climbs by URL normalization: no route could reach it.
    if id == "." || id == ".." { throw APIError.invalid(field, "must not be \".\" or \"..\".") }
}

extension ChannelRecords where Self: UserRecords & EventEmitter & Rendering {
    /// After a change to a user's profile (what a basic user shows): every channel whose render
    /// shows that user (as a member, operator, creator, inviter, or in the last message) changed
    /// for all its members, so changelogs list it and the members receive `channel_changed`.
    func announceProfileChange(of userId: String, now: Int64) async throws {
        for url in try await channelURLs(showing: userId) {
            guard var c = try await channelIfExists(url) else { continue }
            let last = lastMessage(c, for: nil)
            let shows = c.members[userId] != nil || c.createdBy == userId
                || c.members.values.contains { $0.inviterId == userId }
                || last?.senderId == userId || (last?.mentionedUserIds.contains(userId) ?? false)
            guard shows else { continue }
            markChanged(&c, now)
            try await save(c)
            emitChannelChanged(c, to: allMemberIds(c), now: now)
        }
    }
}

enum Users {
    /// What the user service uses of a request (Services/Interfaces.swift).
    typealias Needs = UserRecords & ChannelRecords & EventEmitter & Rendering

    static func create(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        let i = ctx.input
        let id = try i.requiredString("user_id", maxBytes: 80)
        try validateUserId(id)
        let nickname = try i.string("nickname", maxBytes: 80) ?? ""
        let profileUrl = try i.string("profile_url", maxBytes: 2048) ?? ""
        let metadata = try i.stringMap("metadata") ?? [:]
        let discovery = try i.stringList("discovery_keys") ?? []
        _ = try i.bool("issue_access_token")
        if try await s.userIfExists(id) != nil { throw APIError.exists("User \"\(id)\"") }
        let u = UserRecord(userId: id, nickname: nickname, profileUrl: profileUrl, isActive: true,
                           createdAt: ctx.now, lastSeenAt: 0, hasEverLoggedIn: false, metadata: metadata,
                           discoveryKeys: discovery, preferredLanguages: [], autoAccept: true)
        s.save(u)
        return .json(s.userJSON(u))
    }

    static func list(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let i = ctx.input
        let limit = try i.limit()
        let after = try i.string("token").map { t throws -> String in
            guard let decoded = decodeToken(t), case .string(let id)? = decoded.first else { throw APIError.badToken() }
            return id
        }
        let ids = try i.stringList("user_ids").map(Set.init)
        let nickname = try i.string("nickname")
        let nicknamePrefix = try i.string("nickname_startswith")
        let active = try i.enumValue("active_mode", ["activated", "deactivated", "all"], default: "activated")
        let metaKey = try i.string("metadatakey")
        let metaValues = try i.stringList("metadatavalues_in")
        _ = try i.bool("show_bot")
        func matches(_ u: UserRecord) -> Bool {
            if let ids, !ids.contains(u.userId) { return false }
            if let nickname, u.nickname != nickname { return false }
            if let nicknamePrefix, !u.nickname.hasPrefix(nicknamePrefix) { return false }
            if active == "activated" && !u.isActive { return false }
            if active == "deactivated" && u.isActive { return false }
            if let metaKey {
                guard let v = u.metadata[metaKey] else { return false }
                if let metaValues, !metaValues.contains(v) { return false }
            }
            return true
        }
        // SQL reads in id order with the filters it states; `matches` decides (see
        // Channels.listChannels), reading on until the page and one more are found.
        var selected: [UserRecord] = []
        var position = after
        while selected.count <= limit {
            let found = try await s.userListing(
                after: position, ids: ids, nickname: nickname, activeMode: active, metadataKey: metaKey,
                metadataValues: metaValues, limit: limit + 1)
            try await s.loadUsers(found)
            for id in found {
                position = id
                if let u = s.loadedUser(id), matches(u) { selected.append(u) }
            }
            if found.count <= limit { break }
        }
        let page = Array(selected.prefix(limit))
        let next = selected.count > limit ? encodeToken([.string(page.last!.userId)]) : ""
        return .json(.obj([("users", .array(page.map { s.userJSON($0, privateFields: ctx.mayReadPrivateFields(of: $0.userId)) })),
                           ("next", .string(next))]))
    }

    static func get(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await s.user(ctx.param(.userId))
        let include = try ctx.input.bool("include_unread_count", default: false)
        let customTypes = try ctx.input.stringList("custom_types")
        let superMode = try ctx.input.enumValue("super_mode", ["all", "super", "nonsuper"], default: "all")
        if include && !ctx.caller.isAdmin && ctx.caller.userId != u.userId {
            throw APIError.forbidden("unread counts of another user.")
        }
        let unread = include ? try await s.unreadTotals(of: u.userId, customTypes: customTypes, superMode: superMode) : nil
        return .json(s.userJSON(u, unread: unread,
                                privateFields: ctx.mayReadPrivateFields(of: u.userId)))
    }

    static func update(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var u = try await s.user(ctx.param(.userId))
        try ctx.requireSelfOrAdmin(u.userId)
        let i = ctx.input
        let nickname = try i.string("nickname", maxBytes: 80)
        let profileUrl = try i.string("profile_url", maxBytes: 2048)
        let isActive = try i.bool("is_active")
        let metadata = try i.stringMap("metadata")
        let discovery = try i.stringList("discovery_keys")
        let languages = try i.stringList("preferred_languages")
        let lastSeen = try i.int("last_seen_at", min: 0)
        _ = try i.bool("issue_access_token")
        _ = try i.bool("leave_all_when_deactivated")
        if isActive != nil && !ctx.caller.isAdmin { throw APIError.forbidden("only the admin may (de)activate users.") }
        let before = (u.nickname, u.profileUrl, u.isActive, u.metadata)
        if let nickname { u.nickname = nickname }
        if let profileUrl { u.profileUrl = profileUrl }
        if let isActive { u.isActive = isActive }
        if let metadata { u.metadata = metadata }
        if let discovery { u.discoveryKeys = discovery }
        if let languages { u.preferredLanguages = languages }
        if let lastSeen { u.lastSeenAt = lastSeen }
        s.save(u)
        if before.2 && !u.isActive { s.endStreams(of: u.userId, message: "The user was deactivated.") }
        if before != (u.nickname, u.profileUrl, u.isActive, u.metadata) {
            try await s.announceProfileChange(of: u.userId, now: ctx.now)
        }
        return .json(s.userJSON(u))
    }

    static func delete(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        let u = try await s.user(ctx.param(.userId))
        s.endStreams(of: u.userId, message: "The user was deleted.")
        for var c in try await s.memberChannels(of: u.userId) {
            s.removeMember(&c, u.userId, now: ctx.now, category: "user_left", extra: [])
            try await s.save(c)
        }
        try await s.deleteSessions(of: u.userId)
        s.deleteUser(u.userId)
        try await s.announceProfileChange(of: u.userId, now: ctx.now)  // creator, inviter or last sender now renders as unknown
        return .json(.obj([]))
    }

    static func issueToken(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        let u = try await s.user(ctx.param(.userId))
        let expiresAt = try ctx.input.int("expires_at", min: 0) ?? 0
        if expiresAt != 0 && expiresAt <= ctx.now { throw APIError.invalid("expires_at", "must be in the future.") }
        let token = randomHex(20)
        try await s.save(SessionRecord(token: token, userId: u.userId, expiresAt: expiresAt, createdAt: ctx.now))
        return .json(.obj([("user_id", .string(u.userId)), ("token", .string(token)), ("expires_at", .int(expiresAt))]))
    }

    static func unreadMessageCount(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try await unread(s, &ctx, channels: false)
    }

    static func unreadChannelCount(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try await unread(s, &ctx, channels: true)
    }

    private static func unread(_ s: some Needs, _ ctx: inout Ctx, channels: Bool) async throws -> Reply {
        let u = try await s.user(ctx.param(.userId))
        try ctx.requireSelfOrAdmin(u.userId)
        let customTypes = try ctx.input.stringList("custom_types")
        let superMode = try ctx.input.enumValue("super_mode", ["all", "super", "nonsuper"], default: "all")
        let totals = try await s.unreadTotals(of: u.userId, customTypes: customTypes, superMode: superMode)
        return .json(.obj([("unread_count", .int(channels ? totals.channels : totals.messages))]))
    }

    static func markAllAsRead(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await s.user(ctx.param(.userId))
        try ctx.requireSelfOrAdmin(u.userId)
        let urls = try ctx.input.stringList("channel_urls")
        for var c in try await s.memberChannels(of: u.userId) {
            if let urls, !urls.contains(c.url) { continue }
            guard c.isJoined(u.userId) else { continue }
            s.markRead(&c, u.userId, now: ctx.now)
            try await s.save(c)
        }
        return .json(.obj([]))
    }

    /// Leaves every channel of the user (optionally only those of one custom type).
    static func leaveAll(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await s.user(ctx.param(.userId))
        try ctx.requireSelfOrAdmin(u.userId)
        let customType = try ctx.input.string("custom_type", maxBytes: 128)
        for var c in try await s.memberChannels(of: u.userId) {
            if let customType, c.customType != customType { continue }
            s.removeMember(&c, u.userId, now: ctx.now, category: "user_left", extra: [])
            try await s.save(c)
        }
        return .json(.obj([]))
    }

    static func getInvitationPreference(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await s.user(ctx.param(.userId))
        try ctx.requireSelfOrAdmin(u.userId)
        return .json(.obj([("auto_accept", .bool(u.autoAccept))]))
    }

    static func setInvitationPreference(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var u = try await s.user(ctx.param(.userId))
        try ctx.requireSelfOrAdmin(u.userId)
        guard let auto = try ctx.input.bool("auto_accept") else { throw APIError.missing("auto_accept") }
        u.autoAccept = auto
        s.save(u)
        return .json(.obj([("auto_accept", .bool(u.autoAccept))]))
    }
}

// Sessions: who a request comes from (PROTOCOL.md §2).
extension UserRecords {
    func authenticate(_ headers: HTTPFields, apiToken: String, now: Int64) async throws -> Caller {
        let sessionField = HTTPField.Name("Session-Key")!
        if try Caller.hasAdminToken(headers, apiToken: apiToken) { return Caller(isAdmin: true, userId: nil) }
        guard let key = headers[sessionField], let session = try await session(key) else { throw APIError.unauthorizedSession }
        if session.expiresAt > 0 && session.expiresAt <= now { throw APIError.expiredSession }
        guard var user = try await userIfExists(session.userId), user.isActive else { throw APIError.unauthorizedSession }
        if !user.hasEverLoggedIn {
            user.hasEverLoggedIn = true
            save(user)
        }
        return Caller(isAdmin: false, userId: session.userId)
    }
}
