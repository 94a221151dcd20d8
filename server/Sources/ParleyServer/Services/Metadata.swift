// Channel metadata (strings) and metacounters (ints) (PROTOCOL.md §6.4).

enum Meta {
    /// What the metadata service uses of a request (Services/Interfaces.swift).
    typealias Needs = UserRecords & ChannelRecords & EventEmitter & Rendering

    /// One set of handlers serves both: the route tells which.
    static func isCounter(_ ctx: Ctx) -> Bool { ctx.route.hasPrefix("/v3/group_channels/:channel_url/metacounter") }

    static func render(_ counter: Bool, _ strings: [String: String], _ ints: [String: Int64]) -> JSON {
        counter ? .intMap(ints) : .stringMap(strings)
    }

    static func getAll(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let keys = try ctx.input.stringList("keys").map(Set.init)
        let counter = isCounter(ctx)
        return .json(render(counter, c.metadata.filter { keys?.contains($0.key) ?? true },
                            c.metacounters.filter { keys?.contains($0.key) ?? true }))
    }

    static func getOne(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
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

    private static func emitChange(_ s: some Needs, _ c: ChannelRecord, counter: Bool, created: [String], updated: [String], now: Int64) {
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

    static func create(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
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

    static func apply(_ s: some Needs, _ ctx: Ctx, _ c: inout ChannelRecord, strings: [String: String]?, ints: [String: Int64]?, upsert: Bool, mode: String) async throws -> JSON {
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

    static func updateMany(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
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

    static func updateOne(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
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

    static func deleteAll(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let counter = isCounter(ctx)
        let keys = counter ? c.metacounters.keys.sorted() : c.metadata.keys.sorted()
        if counter { c.metacounters = [:] } else { c.metadata = [:] }
        try await finishDelete(s, ctx, &c, keys: keys, counter: counter)
        return .json(.obj([]))
    }

    static func deleteOne(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
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

    private static func finishDelete(_ s: some Needs, _ ctx: Ctx, _ c: inout ChannelRecord, keys: [String], counter: Bool) async throws {
        if !keys.isEmpty {
            s.touch(&c, ctx.now)
            try await s.save(c)
            s.emit(counter ? "metacounter_deleted" : "metadata_deleted", channelUrl: c.url, to: s.allMemberIds(c), fields: [
                ("channel", s.eventChannelJSON(c, now: ctx.now)), ("keys", .strings(keys)),
            ], now: ctx.now)
        }
    }
}
