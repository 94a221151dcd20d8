// Client-sync extensions: channel and message changelogs, messages_gap (PROTOCOL.md §8).

enum Sync {
    /// What the sync service uses of a request (Services/Interfaces.swift): it reads, it emits nothing.
    typealias Needs = UserRecords & ChannelRecords & MessageRecords & ChangeSequence & Rendering

    /// The starting point of a changelog read: a token (sequence position) or a time.
    enum Start {
        case seq(Int64)
        case time(Int64)
    }

    static func parseStart(_ i: Input) throws -> Start {
        if let token = try i.string("token"), !token.isEmpty {
            guard let parts = decodeToken(token), parts.count == 1, case .int(let seq) = parts[0], seq >= 0 else {
                throw APIError.badToken()
            }
            return .seq(seq)
        }
        if let ts = try i.int("change_ts", min: 0) { return .time(ts) }
        throw APIError.missing("token")
    }

    /// A changelog page of the changes up to `current` (later ones may have numbers below
    /// which a writer still running will commit: they come in a later page).
    static func page<T>(_ items: [(seq: Int64, item: T)], limit: Int, current: Int64) -> (items: [T], hasMore: Bool, next: String) {
        let sorted = items.filter { $0.seq <= current }.sorted { $0.seq < $1.seq }
        let taken = sorted.prefix(limit)
        let hasMore = sorted.count > limit
        let nextSeq = hasMore ? (taken.last?.seq ?? current) : current
        return (taken.map { $0.item }, hasMore, encodeToken([.int(nextSeq)]))
    }

    enum ChannelChange {
        case updated(ChannelRecord)
        case deleted(String)
    }

    static func channelChangelogs(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await s.user(ctx.param(.userId))
        try ctx.requireSelfOrAdmin(u.userId)
        let i = ctx.input
        let start = try parseStart(i)
        let limit = try i.limit(default: 100, max: 100)
        let view = try s.channelView(ctx, viewer: u.userId, showMemberDefault: false)
        let showEmpty = try i.bool("show_empty", default: true)
        let showFrozen = try i.bool("show_frozen", default: true)
        let customTypes = try i.stringList("custom_types")
        // Up to limit + 1 of each kind, merged in change order: enough to fill the page and
        // to tell whether there is more.
        var items: [(seq: Int64, item: ChannelChange)] = []
        let changed = try await s.changedChannels(
            of: u.userId, after: start, showEmpty: showEmpty, showFrozen: showFrozen, customTypes: customTypes,
            limit: limit + 1)
        try await s.loadChannels(changed.map(\.url))
        for (url, seq) in changed {
            if let c = s.loadedChannel(url) { items.append((seq, .updated(c))) }
        }
        for t in try await s.endedMemberships(of: u.userId, after: start, limit: limit + 1) {
            items.append((t.seq, .deleted(t.channelUrl)))
        }
        let (changes, hasMore, next) = page(items, limit: limit, current: try await s.currentSeq())
        var updated: [JSON] = [], deleted: [JSON] = []
        for change in changes {
            switch change {
            case .updated(let c): updated.append(s.channelJSON(c, view, now: ctx.now))
            case .deleted(let url): deleted.append(.string(url))
            }
        }
        return .json(.obj([("updated", .array(updated)), ("deleted", .array(deleted)),
                           ("has_more", .bool(hasMore)), ("next", .string(next))]))
    }

    enum MessageChange {
        case updated(MessageRecord)
        case deleted(MessageTombstoneRecord)
    }

    static func messageChangelogs(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        let i = ctx.input
        let start = try parseStart(i)
        let limit = try i.limit(default: 100, max: 200)
        let filter = try MessageFilter.parse(i, defaultReplyType: "ALL")
        var view = try MessageView.parse(i)
        view.pollViewer = reader?.userId
        // Up to limit + 1 of each kind, merged in change order: enough to fill the page and
        // to tell whether there is more.
        let base = s.messageCondition(c.url, filter, reader: nil)
        var items: [(seq: Int64, item: MessageChange)] = []
        for m in try await s.messageChanges(base, after: start, visibleAfter: reader?.tsMessageOffset, limit: limit + 1) {
            items.append((m.changeSeq, .updated(m)))
        }
        for t in try await s.messageTombstones(channel: c.url, after: start, limit: limit + 1) {
            items.append((t.seq, .deleted(t)))
        }
        let (changes, hasMore, next) = page(items, limit: limit, current: try await s.currentSeq())
        var changed: [MessageRecord] = [], deleted: [JSON] = []
        for change in changes {
            switch change {
            case .updated(let m): changed.append(m)
            case .deleted(let t): deleted.append(.obj([("message_id", .int(t.messageId)), ("deleted_at", .int(t.deletedAt))]))
            }
        }
        let updated = try await s.render(changed, view)
        return .json(.obj([("updated", .array(updated)), ("deleted", .array(deleted)),
                           ("has_more", .bool(hasMore)), ("next", .string(next))]))
    }

    static func messagesGap(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        let i = ctx.input
        guard let prevStart = try i.int("prev_start_ts") else { throw APIError.missing("prev_start_ts") }
        guard let prevEnd = try i.int("prev_end_ts") else { throw APIError.missing("prev_end_ts") }
        // Each bound is a (created_at, message_id) pair: many messages can share a millisecond.
        // Without its id (or with 0), a start bound takes the whole millisecond from its first
        // message and an end bound up to its last.
        func bound(_ ts: Int64, _ idName: String, start: Bool) throws -> MessageKey {
            let id = try i.int(idName, min: 0) ?? 0
            return MessageKey(ts, id != 0 ? id : (start ? .min : .max))
        }
        let prevLow = try bound(prevStart, "prev_start_id", start: true)
        let prevHigh = try bound(prevEnd, "prev_end_id", start: false)
        if prevHigh < prevLow { throw APIError.invalid("prev_end_ts", "(with \"prev_end_id\") must not be before \"prev_start_ts\" (with \"prev_start_id\").") }
        let prevCount = try i.int("prev_cache_count", min: 0)
        let nextStart = try i.int("next_start_ts")
        let nextEnd = try i.int("next_end_ts")
        let nextCount = try i.int("next_cache_count", min: 0)
        if (nextStart == nil) != (nextEnd == nil) { throw APIError.missing(nextStart == nil ? "next_start_ts" : "next_end_ts") }
        var next: (low: MessageKey, high: MessageKey)?
        if let nextStart, let nextEnd {
            let low = try bound(nextStart, "next_start_id", start: true)
            let high = try bound(nextEnd, "next_end_id", start: false)
            if high < low { throw APIError.invalid("next_end_ts", "(with \"next_end_id\") must not be before \"next_start_ts\" (with \"next_start_id\").") }
            if low <= prevHigh { throw APIError.invalid("next_start_ts", "(with \"next_start_id\") must be after \"prev_end_ts\" (with \"prev_end_id\").") }
            next = (low, high)
        }
        let threshold = try i.int("huge_gap_threshold", min: 1) ?? 300
        let prevLimit = Int(try i.int("prev_limit", min: 0, max: 300) ?? 100)
        let nextLimit = Int(try i.int("next_limit", min: 0, max: 300) ?? 100)
        let filter = try MessageFilter.parse(i)
        var view = try MessageView.parse(i)
        view.pollViewer = reader?.userId

        let base = s.messageCondition(c.url, filter, reader: reader)
        let serverPrevCount = try await s.messageCount(base, [.above(prevLow, inclusive: true), .below(prevHigh, inclusive: true)])
        let refillPrev = prevCount != nil && prevCount != serverPrevCount
        var refillNext = false
        if let next, let nextCount {
            refillNext = nextCount != (try await s.messageCount(base, [.above(next.low, inclusive: true), .below(next.high, inclusive: true)]))
        }
        var region: [KeyBound] = [refillPrev ? .above(prevLow, inclusive: true) : .above(prevHigh, inclusive: false)]
        if let next { region.append(refillNext ? .below(next.high, inclusive: true) : .below(next.low, inclusive: false)) }
        let gapCount = try await s.messageCount(base, region)
        if gapCount > threshold {
            return .json(.obj([("is_huge_gap", true), ("gap_count", .int(gapCount))]))
        }
        let prevPart = try await s.messagePage(base, region, descending: false, limit: prevLimit)
        let remaining = Int(gapCount) - prevPart.count
        let nextPart = next != nil
            ? try await s.messagePage(base, region, descending: true, limit: min(nextLimit, remaining)) : []
        let more = Int(gapCount) > prevPart.count + nextPart.count
        return .json(.obj([
            ("is_huge_gap", false), ("gap_count", .int(gapCount)),
            ("prev_messages", .array(try await s.render(prevPart, view))), ("prev_has_more", .bool(more)),
            ("next_messages", .array(try await s.render(nextPart, view))), ("next_has_more", .bool(more)),
        ]))
    }
}

/// A message's position: `(created_at, message_id)`, compared in that order.
struct MessageKey: Comparable {
    let createdAt: Int64
    let messageId: Int64

    init(_ createdAt: Int64, _ messageId: Int64) {
        self.createdAt = createdAt
        self.messageId = messageId
    }

    static func < (a: MessageKey, b: MessageKey) -> Bool { (a.createdAt, a.messageId) < (b.createdAt, b.messageId) }
}
