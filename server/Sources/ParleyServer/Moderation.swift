// Freeze, operators, bans and mutes (PROTOCOL.md §6.3).

enum Moderation {
    static func freeze(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
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

    static func listOperators(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let (page, next) = try keysetPage(c.operatorIds, key: { [.string($0)] }, token: try ctx.input.string("token"), limit: try ctx.input.limit())
        return .json(.obj([("operators", .array(page.map { s.basicUser($0, in: c) })), ("next", .string(next))]))
    }

    private static func announceOperators(_ s: ServerState, _ c: ChannelRecord, now: Int64) {
        s.emit("operator_updated", channelUrl: c.url, to: s.allMemberIds(c), fields: [
            ("channel", s.eventChannelJSON(c, now: now)), ("operators", .array(c.operatorIds.map { s.basicUser($0, in: c) })),
        ], now: now)
    }

    static func addOperators(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
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

    static func removeOperators(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
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

    static func restrictionJSON(_ s: ServerState, _ r: RestrictionRecord) -> JSON {
        .obj([("user", s.basicUser(r.userId)), ("start_at", .int(r.startAt)), ("end_at", .int(r.endAt)),
              ("description", .string(r.description))])
    }

    private static func parseRestriction(_ s: ServerState, _ ctx: Ctx, _ c: ChannelRecord) async throws -> RestrictionRecord {
        let uid = try ctx.input.requiredString("user_id", maxBytes: 80)
        _ = try await s.user(uid)
        let seconds = try ctx.input.int("seconds", min: -1, max: 10 * 365 * 86400) ?? -1
        let description = try ctx.input.string("description", maxBytes: 1024) ?? ""
        _ = try ctx.input.string("agent_id", maxBytes: 80)
        if seconds == 0 { throw APIError.invalid("seconds", "must be -1 or positive.") }
        if let me = ctx.caller.userId, me == uid { throw APIError.invalid("user_id", "operators cannot restrict themselves.") }
        return RestrictionRecord(userId: uid, startAt: ctx.now, endAt: seconds < 0 ? -1 : ctx.now + seconds * 1000, description: description)
    }

    static func ban(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
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

    static func listBans(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        try await listRestrictions(s, &ctx, bans: true)
    }

    static func listMutes(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        try await listRestrictions(s, &ctx, bans: false)
    }

    private static func listRestrictions(_ s: ServerState, _ ctx: inout Ctx, bans: Bool) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        // Who is banned or muted is for the channel's operators (and admins) to see.
        try s.requireOperator(c, ctx)
        let items = (bans ? c.bans : c.mutes).values.filter { $0.isActive(at: ctx.now) }
        let (page, next) = try keysetPage(Array(items), key: { [.string($0.userId)] }, token: try ctx.input.string("token"), limit: try ctx.input.limit())
        return .json(.obj([(bans ? "banned_list" : "muted_list", .array(page.map { restrictionJSON(s, $0) })), ("next", .string(next))]))
    }

    static func getBan(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let r = try s.activeBan(c, ctx.param(.userId), ctx.now)
        return .json(.obj([("is_banned", .bool(r != nil)), ("start_at", r.map { .int($0.startAt) }),
                           ("end_at", r.map { .int($0.endAt) }), ("description", r.map { .string($0.description) })]))
    }

    static func unban(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        let uid = try ctx.param(.userId)
        guard c.bans.removeValue(forKey: uid) != nil else { throw APIError.notFound("Ban of \"\(uid)\"") }
        s.touch(&c, ctx.now)
        try await s.save(c)
        s.emit("user_unbanned", channelUrl: c.url, to: s.allMemberIds(c).union([uid]), fields: [
            ("channel", s.eventChannelJSON(c, now: ctx.now)), ("user", s.basicUser(uid)),
        ], now: ctx.now)
        return .json(.obj([]))
    }

    static func mute(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
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

    static func getMute(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let r = try s.activeMute(c, ctx.param(.userId), ctx.now)
        let remaining: Int64? = r.map { $0.endAt < 0 ? -1 : $0.endAt - ctx.now }
        return .json(.obj([("is_muted", .bool(r != nil)), ("remaining_duration", remaining.map { .int($0) }),
                           ("start_at", r.map { .int($0.startAt) }), ("end_at", r.map { .int($0.endAt) }),
                           ("description", r.map { .string($0.description) })]))
    }

    static func unmute(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        let uid = try ctx.param(.userId)
        guard c.mutes.removeValue(forKey: uid) != nil else { throw APIError.notFound("Mute of \"\(uid)\"") }
        s.touch(&c, ctx.now)
        try await s.save(c)
        s.emit("user_unmuted", channelUrl: c.url, to: s.allMemberIds(c), fields: [
            ("channel", s.eventChannelJSON(c, now: ctx.now)), ("user", s.basicUser(uid)),
        ], now: ctx.now)
        return .json(.obj([]))
    }
}

// Channel metadata (strings) and metacounters (ints) (PROTOCOL.md §6.4).
enum Meta {
    /// One set of handlers serves both: the route tells which.
    static func isCounter(_ ctx: Ctx) -> Bool { ctx.route.hasPrefix("/v3/group_channels/:channel_url/metacounter") }

    static func render(_ counter: Bool, _ strings: [String: String], _ ints: [String: Int64]) -> JSON {
        counter ? .intMap(ints) : .stringMap(strings)
    }

    static func getAll(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let keys = try ctx.input.stringList("keys").map(Set.init)
        let counter = isCounter(ctx)
        return .json(render(counter, c.metadata.filter { keys?.contains($0.key) ?? true },
                            c.metacounters.filter { keys?.contains($0.key) ?? true }))
    }

    static func getOne(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let key = try ctx.param(.key)
        if isCounter(ctx) {
            guard let v = c.metacounters[key] else { throw APIError.notFound("Metacounter key \"\(key)\"") }
            return .json(.intMap([key: v]))
        }
        guard let v = c.metadata[key] else { throw APIError.notFound("Metadata key \"\(key)\"") }
        return .json(.stringMap([key: v]))
    }

    private static func emitChange(_ s: ServerState, _ c: ChannelRecord, counter: Bool, created: [String], updated: [String], now: Int64) {
        let prefix = counter ? "metacounter" : "metadata"
        for (category, keys) in [("\(prefix)_created", created), ("\(prefix)_updated", updated)] where !keys.isEmpty {
            let payload: JSON = counter
                ? .intMap(c.metacounters.filter { keys.contains($0.key) })
                : .stringMap(c.metadata.filter { keys.contains($0.key) })
            s.emit(category, channelUrl: c.url, to: s.allMemberIds(c), fields: [
                ("channel", s.eventChannelJSON(c, now: now)), (prefix, payload),
            ], now: now)
        }
    }

    static func create(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let counter = isCounter(ctx)
        let includeTs = try ctx.input.bool("include_ts", default: false)
        var keys: [String] = []
        if counter {
            guard let map = try ctx.input.intMap("metacounter"), !map.isEmpty else { throw APIError.missing("metacounter") }
            for k in map.keys where c.metacounters[k] != nil { throw APIError.exists("Metacounter key \"\(k)\"") }
            for (k, v) in map { c.metacounters[k] = v }
            keys = map.keys.sorted()
        } else {
            guard let map = try ctx.input.stringMap("metadata"), !map.isEmpty else { throw APIError.missing("metadata") }
            for k in map.keys where c.metadata[k] != nil { throw APIError.exists("Metadata key \"\(k)\"") }
            for (k, v) in map { c.metadata[k] = v }
            keys = map.keys.sorted()
        }
        s.touch(&c, ctx.now)
        try await s.save(c)
        emitChange(s, c, counter: counter, created: keys, updated: [], now: ctx.now)
        let out = render(counter, c.metadata.filter { keys.contains($0.key) }, c.metacounters.filter { keys.contains($0.key) })
        if includeTs {
            return .json(.obj([(counter ? "metacounter" : "metadata", out), ("include_ts", .int(ctx.now))]))
        }
        return .json(out)
    }

    static func apply(_ s: ServerState, _ ctx: Ctx, _ c: inout ChannelRecord, strings: [String: String]?, ints: [String: Int64]?, upsert: Bool, mode: String) async throws -> JSON {
        let counter = isCounter(ctx)
        var created: [String] = [], updated: [String] = []
        if counter, let ints {
            for k in ints.keys where c.metacounters[k] == nil && !upsert { throw APIError.notFound("Metacounter key \"\(k)\"") }
            for (k, v) in ints {
                let old = c.metacounters[k]
                switch mode {
                case "increase": c.metacounters[k] = (old ?? 0) &+ v
                case "decrease": c.metacounters[k] = (old ?? 0) &- v
                default: c.metacounters[k] = v
                }
                if old == nil { created.append(k) } else { updated.append(k) }
            }
        } else if let strings {
            for k in strings.keys where c.metadata[k] == nil && !upsert { throw APIError.notFound("Metadata key \"\(k)\"") }
            for (k, v) in strings {
                if c.metadata[k] == nil { created.append(k) } else { updated.append(k) }
                c.metadata[k] = v
            }
        }
        // An empty map changes nothing (and no event would tell of a change).
        if !created.isEmpty || !updated.isEmpty {
            s.touch(&c, ctx.now)
            try await s.save(c)
            emitChange(s, c, counter: counter, created: created.sorted(), updated: updated.sorted(), now: ctx.now)
        }
        let keys = Set(created + updated)
        return render(counter, c.metadata.filter { keys.contains($0.key) }, c.metacounters.filter { keys.contains($0.key) })
    }

    static func updateMany(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let upsert = try ctx.input.bool("upsert", default: false)
        let mode = try ctx.input.enumValue("mode", ["set", "increase", "decrease"], default: "set")
        if isCounter(ctx) {
            guard let map = try ctx.input.intMap("metacounter") else { throw APIError.missing("metacounter") }
            return .json(try await apply(s, ctx, &c, strings: nil, ints: map, upsert: upsert, mode: mode))
        }
        guard let map = try ctx.input.stringMap("metadata") else { throw APIError.missing("metadata") }
        return .json(try await apply(s, ctx, &c, strings: map, ints: nil, upsert: upsert, mode: mode))
    }

    static func updateOne(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let key = try ctx.param(.key)
        if key.utf8.count > 128 { throw APIError.invalid("key", "must be 1 to 128 bytes.") }
        let upsert = try ctx.input.bool("upsert", default: false)
        let mode = try ctx.input.enumValue("mode", ["set", "increase", "decrease"], default: "set")
        if isCounter(ctx) {
            guard let v = try ctx.input.int("value") else { throw APIError.missing("value") }
            return .json(try await apply(s, ctx, &c, strings: nil, ints: [key: v], upsert: upsert, mode: mode))
        }
        let v = try ctx.input.requiredString("value", maxBytes: 190_000)
        return .json(try await apply(s, ctx, &c, strings: [key: v], ints: nil, upsert: upsert, mode: mode))
    }

    static func deleteAll(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let counter = isCounter(ctx)
        let keys = counter ? c.metacounters.keys.sorted() : c.metadata.keys.sorted()
        if counter { c.metacounters = [:] } else { c.metadata = [:] }
        try await finishDelete(s, ctx, &c, keys: keys, counter: counter)
        return .json(.obj([]))
    }

    static func deleteOne(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let counter = isCounter(ctx)
        let key = try ctx.param(.key)
        if counter {
            guard c.metacounters.removeValue(forKey: key) != nil else { throw APIError.notFound("Metacounter key \"\(key)\"") }
        } else {
            guard c.metadata.removeValue(forKey: key) != nil else { throw APIError.notFound("Metadata key \"\(key)\"") }
        }
        try await finishDelete(s, ctx, &c, keys: [key], counter: counter)
        return .json(.obj([]))
    }

    private static func finishDelete(_ s: ServerState, _ ctx: Ctx, _ c: inout ChannelRecord, keys: [String], counter: Bool) async throws {
        if !keys.isEmpty {
            s.touch(&c, ctx.now)
            try await s.save(c)
            s.emit(counter ? "metacounter_deleted" : "metadata_deleted", channelUrl: c.url, to: s.allMemberIds(c), fields: [
                ("channel", s.eventChannelJSON(c, now: ctx.now)), ("keys", .strings(keys)),
            ], now: ctx.now)
        }
    }
}
