// Freeze, operators, bans and mutes (PROTOCOL.md §6.3).

enum Moderation {
    /// What the moderation service uses of a request (Services/Interfaces.swift).
    typealias Needs = UserRecords & ChannelRecords & EventEmitter & Rendering

    static func freeze(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        guard let freeze = try ctx.input.bool("freeze") else { throw APIError.missing("freeze") }
        if c.freeze != freeze {
            c.freeze = freeze
            s.touch(&c, ctx.now)
            try await s.save(c)
            s.emit(freeze ? "channel_frozen" : "channel_unfrozen", channelUrl: c.url, to: s.allMemberIds(c),
                   fields: [("channel", s.eventChannelJSON(c, now: ctx.now))], now: ctx.now)
        }
        return .json(s.channelJSON(c, try s.channelView(ctx, viewer: ctx.caller.userId, showMemberDefault: true), now: ctx.now))
    }

    static func listOperators(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let (page, next) = try keysetPage(c.operatorIds, key: { [.string($0)] }, token: try ctx.input.string("token"), limit: try ctx.input.limit())
        return .json(.obj([("operators", .array(page.map { s.basicUser($0, in: c) })), ("next", .string(next))]))
    }

    private static func announceOperators(_ s: some Needs, _ c: ChannelRecord, now: Int64) {
        s.emit("operator_updated", channelUrl: c.url, to: s.allMemberIds(c), fields: [
            ("channel", s.eventChannelJSON(c, now: now)), ("operators", .array(c.operatorIds.map { s.basicUser($0, in: c) })),
        ], now: now)
    }

    static func addOperators(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        guard let ids = try ctx.input.stringList("operator_ids"), !ids.isEmpty else { throw APIError.missing("operator_ids") }
        for id in ids where !c.isJoined(id) { throw APIError.invalid("operator_ids", "\"\(id)\" is not a joined member.") }
        for id in ids where !c.operatorIds.contains(id) { c.operatorIds.append(id) }
        s.touch(&c, ctx.now)
        try await s.save(c)
        announceOperators(s, c, now: ctx.now)
        return .json(.obj([]))
    }

    static func removeOperators(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        let all = try ctx.input.bool("delete_all", default: false)
        let ids = try ctx.input.stringList("operator_ids") ?? []
        if !all && ids.isEmpty { throw APIError.missing("operator_ids") }
        if all { c.operatorIds = [] } else { c.operatorIds.removeAll { ids.contains($0) } }
        s.touch(&c, ctx.now)
        try await s.save(c)
        announceOperators(s, c, now: ctx.now)
        return .json(.obj([]))
    }

    static func restrictionJSON(_ s: some Needs, _ r: RestrictionRecord) -> JSON {
        .obj([("user", s.basicUser(r.userId)), ("start_at", .int(r.startAt)), ("end_at", .int(r.endAt)),
              ("description", .string(r.description))])
    }

    private static func parseRestriction(_ s: some Needs, _ ctx: Ctx, _ c: ChannelRecord) async throws -> RestrictionRecord {
        let uid = try ctx.input.requiredString("user_id", maxBytes: 80)
        _ = try await s.user(uid)
        let seconds = try ctx.input.int("seconds", min: -1, max: 10 * 365 * 86400) ?? -1
        let description = try ctx.input.string("description", maxBytes: 1024) ?? ""
        _ = try ctx.input.string("agent_id", maxBytes: 80)
        if seconds == 0 { throw APIError.invalid("seconds", "must be -1 or positive.") }
        if let me = ctx.caller.userId, me == uid { throw APIError.invalid("user_id", "operators cannot restrict themselves.") }
        return RestrictionRecord(userId: uid, startAt: ctx.now, endAt: seconds < 0 ? -1 : ctx.now + seconds * 1000, description: description)
    }

    static func ban(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        let r = try await parseRestriction(s, ctx, c)
        c.bans[r.userId] = r
        let extra: [(String, JSON?)] = [("end_at", .int(r.endAt)), ("description", .string(r.description))]
        if c.members[r.userId] != nil {
            s.removeMember(&c, r.userId, now: ctx.now, category: "user_banned", extra: extra)
        } else {
            s.touch(&c, ctx.now)
            s.emit("user_banned", channelUrl: c.url, to: s.allMemberIds(c).union([r.userId]), fields: [
                ("channel", s.eventChannelJSON(c, now: ctx.now)), ("user", s.basicUser(r.userId)),
            ] + extra, now: ctx.now)
        }
        try await s.save(c)
        return .json(restrictionJSON(s, r))
    }

    static func listBans(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try await listRestrictions(s, &ctx, bans: true)
    }

    static func listMutes(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try await listRestrictions(s, &ctx, bans: false)
    }

    private static func listRestrictions(_ s: some Needs, _ ctx: inout Ctx, bans: Bool) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        // Who is banned or muted is for the channel's operators (and admins) to see.
        try s.requireOperator(c, ctx)
        let items = (bans ? c.bans : c.mutes).values.filter { $0.isActive(at: ctx.now) }
        let (page, next) = try keysetPage(Array(items), key: { [.string($0.userId)] }, token: try ctx.input.string("token"), limit: try ctx.input.limit())
        return .json(.obj([(bans ? "banned_list" : "muted_list", .array(page.map { restrictionJSON(s, $0) })), ("next", .string(next))]))
    }

    static func getBan(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let r = try s.activeBan(c, ctx.param(.userId), ctx.now)
        return .json(.obj([("is_banned", .bool(r != nil)), ("start_at", r.map { .int($0.startAt) }),
                           ("end_at", r.map { .int($0.endAt) }), ("description", r.map { .string($0.description) })]))
    }

    static func unban(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try await lift(s, &ctx, bans: true)
    }

    static func mute(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        let r = try await parseRestriction(s, ctx, c)
        if c.members[r.userId] == nil { throw APIError.invalid("user_id", "is not a member of this channel.") }
        c.mutes[r.userId] = r
        s.touch(&c, ctx.now)
        try await s.save(c)
        s.emit("user_muted", channelUrl: c.url, to: s.allMemberIds(c), fields: [
            ("channel", s.eventChannelJSON(c, now: ctx.now)), ("user", s.basicUser(r.userId)),
            ("end_at", .int(r.endAt)), ("description", .string(r.description)),
        ], now: ctx.now)
        return .json(restrictionJSON(s, r))
    }

    static func getMute(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let r = try s.activeMute(c, ctx.param(.userId), ctx.now)
        let remaining: Int64? = r.map { $0.endAt < 0 ? -1 : $0.endAt - ctx.now }
        return .json(.obj([("is_muted", .bool(r != nil)), ("remaining_duration", remaining.map { .int($0) }),
                           ("start_at", r.map { .int($0.startAt) }), ("end_at", r.map { .int($0.endAt) }),
                           ("description", r.map { .string($0.description) })]))
    }

    static func unmute(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try await lift(s, &ctx, bans: false)
    }

    /// Ends a ban (`bans`) or a mute of the user the route names. The unbanned user hears of
    /// it too, though no longer a member.
    private static func lift(_ s: some Needs, _ ctx: inout Ctx, bans: Bool) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        let uid = try ctx.param(.userId)
        let removed = bans ? c.bans.removeValue(forKey: uid) : c.mutes.removeValue(forKey: uid)
        guard removed != nil else { throw APIError.notFound("\(bans ? "Ban" : "Mute") of \"\(uid)\"") }
        s.touch(&c, ctx.now)
        try await s.save(c)
        s.emit(bans ? "user_unbanned" : "user_unmuted", channelUrl: c.url,
               to: bans ? s.allMemberIds(c).union([uid]) : s.allMemberIds(c), fields: [
            ("channel", s.eventChannelJSON(c, now: ctx.now)), ("user", s.basicUser(uid)),
        ], now: ctx.now)
        return .json(.obj([]))
    }
}

// Reports of messages, channels and users, and their listing for admins (PROTOCOL.md §7.5).

enum Reports {
    /// What the report service uses of a request (Services/Interfaces.swift): no stream events.
    typealias Needs = ReportRecords & UserRecords & ChannelRecords & MessageRecords & Rendering & WebhookRecords

    static let categories = ["suspicious", "harassing", "inappropriate", "spam"]

    static func reportJSON(_ s: some Needs, _ r: ReportRecord) -> JSON {
        .obj([
            ("report_id", .int(r.id)), ("report_type", .string(r.reportType)), ("report_category", .string(r.category)),
            ("reporting_user", r.reportingUserId.map { s.basicUser($0) }),
            ("offending_user", r.offendingUserId.map { s.basicUser($0) }),
            ("channel_url", r.channelUrl.map { .string($0) }), ("message_id", r.messageId.map { .int($0) }),
            ("report_description", .string(r.description)), ("created_at", .int(r.createdAt)),
        ])
    }

    private static func make(_ s: some Needs, _ ctx: Ctx, type: String, channel: ChannelRecord?, messageId: Int64?, offender: String?) async throws -> Reply {
        let category = try ctx.input.enumValue("report_category", categories, default: "")
        if category.isEmpty { throw APIError.missing("report_category") }
        let reporter = try ctx.actingUser("reporting_user_id", optional: true)
        if let reporter { _ = try await s.user(reporter) }
        if let channel, !ctx.caller.isAdmin, let me = ctx.caller.userId, channel.members[me] == nil {
            throw APIError.forbidden("the reporter is not a member of this channel.")
        }
        let description = try ctx.input.string("report_description", maxBytes: 2000) ?? ""
        let r = ReportRecord(id: try await s.allocateReportId(), reportType: type, category: category, reportingUserId: reporter,
                             offendingUserId: offender, channelUrl: channel?.url, messageId: messageId,
                             description: description, createdAt: ctx.now)
        try await s.save(r)
        try await s.loadUsers([reporter, offender].compactMap { $0 })
        s.queueWebhook(.report, channelUrl: channel?.url, fields: [("report", reportJSON(s, r))], now: ctx.now)
        return .json(reportJSON(s, r))
    }

    static func reportMessage(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let m = try await s.message(c, ctx.messageId)
        return try await make(s, ctx, type: "message", channel: c, messageId: m.id, offender: m.senderId)
    }

    static func reportChannel(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        return try await make(s, ctx, type: "channel", channel: c, messageId: nil, offender: nil)
    }

    static func reportUser(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let offender = try await s.user(ctx.param(.userId))
        var channel: ChannelRecord? = nil
        if let url = try ctx.input.string("channel_url", maxBytes: 100) { channel = try await s.channel(url) }
        return try await make(s, ctx, type: "user", channel: channel, messageId: nil, offender: offender.userId)
    }

    static func list(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        let limit = try ctx.input.limit()
        var after: Int64 = 0
        if let token = try ctx.input.string("token") {
            // The token is the last listed id, as every listing's: [id].
            guard let key = decodeToken(token) else { throw APIError.badToken() }
            if key.count == 1, case .int(let id) = key[0] { after = id } else {
                // A token of another listing: refused, unless there is nothing to list anyway.
                if try await s.hasReports() { throw APIError.badToken() }
                after = .max
            }
        }
        let rows = try await s.reports(after: after, limit: limit + 1)
        let page = Array(rows.prefix(limit))
        try await s.loadUsers(page.flatMap { [$0.reportingUserId, $0.offendingUserId].compactMap { $0 } })
        let next = rows.count > limit ? encodeToken([.int(page.last!.id)]) : ""
        return .json(.obj([("reports", .array(page.map { reportJSON(s, $0) })), ("next", .string(next))]))
    }
}
