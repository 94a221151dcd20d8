// Polls of group channels: create, get, update, close, delete, options, votes, listings and
// changelogs (PROTOCOL.md §7.6). A poll is created in a channel and then sent: a message
// with `poll_id` carries it (Services/Messages.swift).

/// Limits of what a poll holds (PROTOCOL.md §7.6).
enum PollLimits {
    static let maxOptions = 20
    static let maxTitleBytes = 2000
    static let maxOptionTextBytes = 2000
}

// Polls as JSON: the services' and the renderer's (Events/Render.swift).
extension PollRecords {
    /// The polls as JSON by id, each with the viewer's own votes when there is a viewer.
    func renderPolls(_ polls: [PollRecord], viewer: String?, now: Int64) async throws -> [Int64: JSON] {
        let ids = polls.map(\.id)
        let tallies = try await pollTallies(ids)
        var votes: [Int64: [Int64]]? = nil
        if let viewer { votes = try await pollVotes(ids, of: viewer) }
        var out: [Int64: JSON] = [:]
        for p in polls {
            out[p.id] = Polls.json(p, tallies[p.id] ?? PollTally(), voted: votes.map { $0[p.id] ?? [] }, now: now)
        }
        return out
    }

    func renderPoll(_ p: PollRecord, viewer: String?, now: Int64) async throws -> JSON {
        try await renderPolls([p], viewer: viewer, now: now)[p.id]!
    }
}

// Poll rules and events, shared by the services that touch polls (Services/Interfaces.swift).
extension PollRecords where Self: ChannelRecords & MessageRecords & EventEmitter & Rendering {
    /// Whether the member sees the poll: as they see its message (no message yet: everyone).
    func isVisible(_ p: PollRecord, message: MessageRecord?, to member: MemberRecord?) -> Bool {
        guard p.messageId != 0, let message else { return true }
        return isVisible(message, to: member) || hasVisibleReplies(message, to: member)
    }

    /// Emits a poll event to the joined members who see the poll (as message events go,
    /// Services/Channels.swift `emitMessageEvent`). Each recipient's `poll` carries their own
    /// `voted_option_ids`: the recipients are grouped by their votes, one event per group, so
    /// that the event log and its replay stay what they are for every other event.
    func emitPollEvent(_ category: String, _ c: ChannelRecord, _ p: PollRecord, message: MessageRecord?,
                       now: Int64) async throws {
        let audience = c.members.values.filter { $0.state == "joined" && isVisible(p, message: message, to: $0) }.map(\.userId)
        if audience.isEmpty { return }
        let tally = try await pollTallies([p.id])[p.id] ?? PollTally()
        let votes = try await pollVotesByUser(p.id)
        var groups: [[Int64]: [String]] = [:]
        for uid in audience { groups[votes[uid] ?? [], default: []].append(uid) }
        // In the order of each group's first user id, so that the events' order is the same each time.
        let ordered = groups.map { (voted: $0.key, users: $0.value.sorted()) }.sorted { $0.users[0] < $1.users[0] }
        for group in ordered {
            emit(category, channelUrl: c.url, to: Set(group.users), fields: [
                ("channel", eventChannelJSON(c, now: now)), ("poll", Polls.json(p, tally, voted: group.voted, now: now)),
            ], now: now)
        }
    }

    /// The poll's message goes: the poll goes with it (its voters hear `poll_deleted`).
    func deletePoll(carriedBy m: MessageRecord, in c: ChannelRecord, now: Int64) async throws {
        guard let id = m.pollId, let p = try await pollRecord(id) else { return }
        emitPollDeleted(c, p, message: m, now: now)
        try await deletePoll(p, at: now)
    }

    func emitPollDeleted(_ c: ChannelRecord, _ p: PollRecord, message: MessageRecord?, now: Int64) {
        let audience = c.members.values.filter { $0.state == "joined" && isVisible(p, message: message, to: $0) }.map(\.userId)
        emit("poll_deleted", channelUrl: c.url, to: Set(audience), fields: [
            ("channel", eventChannelJSON(c, now: now)), ("poll_id", .int(p.id)),
        ], now: now)
    }
}

enum Polls {
    /// What the poll service uses of a request (Services/Interfaces.swift).
    typealias Needs = UserRecords & ChannelRecords & MessageRecords & PollRecords & EventEmitter & ChangeSequence & Rendering

    /// The poll as the protocol shows it. `voted`: the viewer's votes (nil: no viewer, the
    /// field is omitted).
    static func json(_ p: PollRecord, _ tally: PollTally, voted: [Int64]?, now: Int64) -> JSON {
        .obj([
            ("id", .int(p.id)),
            ("title", .string(p.title)),
            ("channel_url", .string(p.channelUrl)),
            ("message_id", .int(p.messageId)),
            ("allow_user_suggestion", .bool(p.allowUserSuggestion)),
            ("allow_multiple_votes", .bool(p.allowMultipleVotes)),
            ("close_at", .int(p.closeAt)),
            ("status", .string(p.isOpen(at: now) ? "open" : "closed")),
            ("created_by", p.createdBy.map { .string($0) }),
            ("created_at", .int(p.createdAt)),
            ("updated_at", .int(p.updatedAt)),
            ("voter_count", .int(tally.voterCount)),
            ("options", .array(p.options.map { o in
                .obj([
                    ("poll_id", .int(p.id)), ("id", .int(o.id)), ("text", .string(o.text)),
                    ("vote_count", .int(tally.counts[o.id] ?? 0)), ("created_by", o.createdBy.map { .string($0) }),
                    ("created_at", .int(o.createdAt)), ("updated_at", .int(o.updatedAt)),
                ])
            })),
            ("voted_option_ids", voted.map { ids in .array(ids.map { .int($0) }) }),
        ])
    }

    // MARK: parameters

    /// The poll of the path, which must belong to the channel.
    static func poll(_ s: some Needs, _ c: ChannelRecord, _ ctx: Ctx) async throws -> PollRecord {
        let id = try ctx.pollId
        guard let p = try await s.pollRecord(id), p.channelUrl == c.url else { throw APIError.notFound("Poll \(id)") }
        return p
    }

    static func carrier(of p: PollRecord, _ s: some Needs) async throws -> MessageRecord? {
        p.messageId == 0 ? nil : try await s.messageRecord(p.messageId)
    }

    /// The poll, if the reader (nil: an admin reading as nobody) sees it; else not found.
    static func visiblePoll(_ s: some Needs, _ c: ChannelRecord, _ ctx: Ctx,
                            reader: MemberRecord?) async throws -> (PollRecord, MessageRecord?) {
        let p = try await poll(s, c, ctx)
        let m = try await carrier(of: p, s)
        if !s.isVisible(p, message: m, to: reader) { throw APIError.notFound("Poll \(p.id)") }
        return (p, m)
    }

    static func parseTitle(_ i: Input, required: Bool) throws -> String? {
        if required && !i.has("title") { throw APIError.missing("title") }
        guard let t = try i.string("title", maxBytes: PollLimits.maxTitleBytes) else { return nil }
        if t.isEmpty { throw APIError.invalid("title", "must not be empty.") }
        return t
    }

    static func parseOptionText(_ i: Input) throws -> String {
        let t = try i.requiredString("text", maxBytes: PollLimits.maxOptionTextBytes)
        if t.isEmpty { throw APIError.invalid("text", "must not be empty.") }
        return t
    }

    /// `close_at`: -1 (never) or a time after now.
    static func parseCloseAt(_ i: Input, now: Int64) throws -> Int64? {
        guard let t = try i.int("close_at", min: -1) else { return nil }
        if t != -1 && t <= now { throw APIError.invalid("close_at", "must be -1 (never) or a time in the future (ms).") }
        return t
    }

    /// The option texts of a new poll: a JSON list of 1 to `maxOptions` non-empty strings.
    static func parseOptionTexts(_ i: Input) throws -> [String] {
        let name = i.body["options"] != nil ? "options" : "option_texts"
        guard let value = i.body[name], value != .null else { throw APIError.missing("options") }
        guard case .array(let items) = value else { throw APIError.invalid(name, "must be a list of strings, not \(value.typeName).") }
        if items.isEmpty || items.count > PollLimits.maxOptions {
            throw APIError.invalid(name, "must hold 1 to \(PollLimits.maxOptions) options.")
        }
        return try items.map { item in
            guard case .string(let text) = item else { throw APIError.invalid(name, "must be a list of strings.") }
            if text.isEmpty { throw APIError.invalid(name, "must not hold an empty text.") }
            if text.utf8.count > PollLimits.maxOptionTextBytes { throw APIError.tooLong(name, PollLimits.maxOptionTextBytes) }
            return text
        }
    }

    /// The option ids of a vote: a JSON list of integers, each once.
    static func parseOptionIds(_ i: Input) throws -> [Int64] {
        guard let value = i.body["option_ids"], value != .null else { throw APIError.missing("option_ids") }
        guard case .array(let items) = value else { throw APIError.invalid("option_ids", "must be a list of integers, not \(value.typeName).") }
        var ids: [Int64] = []
        for item in items {
            guard case .int(let id) = item else { throw APIError.invalid("option_ids", "must be a list of integers.") }
            if ids.contains(id) { throw APIError.invalid("option_ids", "must not name an option twice.") }
            ids.append(id)
        }
        return ids
    }

    // MARK: permissions

    /// The admin, or the poll's creator or an operator, as a joined member.
    static func requireCreatorOrOperator(_ c: ChannelRecord, _ p: PollRecord, _ ctx: Ctx) throws {
        if ctx.caller.isAdmin { return }
        guard let me = ctx.caller.userId, c.isJoined(me) else { throw APIError.forbidden("the user is not a member of this channel.") }
        if p.createdBy == me || c.isOperator(me) { return }
        throw APIError.forbidden("only the poll's creator or an operator may change this poll.")
    }

    static func requireOpen(_ p: PollRecord, now: Int64) throws {
        if !p.isOpen(at: now) { throw APIError.forbidden("the poll is closed.") }
    }

    // MARK: routes

    static func create(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let i = ctx.input
        // The admin may create a poll of nobody (as an admin message has no sender).
        let creator = try ctx.actingUser(optional: true)
        if let creator {
            _ = try await s.user(creator)
            try s.requireCanSend(c, sender: creator, ctx: ctx)
        }
        if c.isEphemeral { throw APIError.invalid("channel_url", "is ephemeral: its messages, and so polls, are not stored.") }
        let title = try parseTitle(i, required: true)!
        let texts = try parseOptionTexts(i)
        let allowSuggestion = try i.bool("allow_user_suggestion", default: false)
        let allowMultiple = try i.bool("allow_multiple_votes", default: false)
        let closeAt = try parseCloseAt(i, now: ctx.now) ?? -1
        let options = texts.enumerated().map { n, text in
            PollOptionRecord(id: Int64(n + 1), text: text, createdBy: creator, createdAt: ctx.now, updatedAt: ctx.now)
        }
        var p = PollRecord(id: try await s.allocatePollId(), channelUrl: c.url, messageId: 0, title: title,
                           allowUserSuggestion: allowSuggestion, allowMultipleVotes: allowMultiple, closeAt: closeAt,
                           isClosed: false, createdBy: creator, createdAt: ctx.now, updatedAt: ctx.now,
                           nextOptionId: Int64(options.count + 1), changeSeq: 0, changedAt: 0, options: options)
        s.touch(&p, ctx.now)
        try await s.save(p)
        // No event: nobody sees the poll before a message carries it (message_received).
        return .json(try await s.renderPoll(p, viewer: creator, now: ctx.now))
    }

    static func get(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        let (p, _) = try await visiblePoll(s, c, ctx, reader: reader)
        return .json(try await s.renderPoll(p, viewer: reader?.userId, now: ctx.now))
    }

    static func list(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        let i = ctx.input
        let limit = try i.limit()
        var before: Int64? = nil
        if let token = try i.string("token"), !token.isEmpty {
            guard let key = decodeToken(token), key.count == 1, case .int(let id) = key[0] else { throw APIError.badToken() }
            before = id
        }
        // One more than asked tells whether there is a next page.
        var found = try await s.pollPage(channel: c.url, before: before, visibleAfter: reader?.tsMessageOffset, limit: limit + 1)
        let more = found.count > limit
        if more { found.removeLast() }
        let rendered = try await s.renderPolls(found, viewer: reader?.userId, now: ctx.now)
        return .json(.obj([
            ("polls", .array(found.map { rendered[$0.id]! })),
            ("next", .string(more ? encodeToken([.int(found.last!.id)]) : "")),
        ]))
    }

    static func update(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        var p = try await poll(s, c, ctx)
        try requireCreatorOrOperator(c, p, ctx)
        let i = ctx.input
        let title = try parseTitle(i, required: false)
        let allowSuggestion = try i.bool("allow_user_suggestion")
        let allowMultiple = try i.bool("allow_multiple_votes")
        let closeAt = try parseCloseAt(i, now: ctx.now)
        if allowMultiple == false, p.allowMultipleVotes,
           try await s.pollVotesByUser(p.id).values.contains(where: { $0.count > 1 }) {
            throw APIError.invalid("allow_multiple_votes", "cannot become false while a voter holds several votes.")
        }
        let before = p
        if let title { p.title = title }
        if let allowSuggestion { p.allowUserSuggestion = allowSuggestion }
        if let allowMultiple { p.allowMultipleVotes = allowMultiple }
        if let closeAt { p.closeAt = closeAt }
        try await announce(s, c, &p, changed: p != before, ctx: ctx)
        return .json(try await s.renderPoll(p, viewer: ctx.actingUser(optional: true), now: ctx.now))
    }

    static func close(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        var p = try await poll(s, c, ctx)
        try requireCreatorOrOperator(c, p, ctx)
        let before = p
        p.isClosed = true
        try await announce(s, c, &p, changed: p != before, ctx: ctx)
        return .json(try await s.renderPoll(p, viewer: ctx.actingUser(optional: true), now: ctx.now))
    }

    static func delete(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        let p = try await poll(s, c, ctx)
        try requireCreatorOrOperator(c, p, ctx)
        let message = try await carrier(of: p, s)
        s.emitPollDeleted(c, p, message: message, now: ctx.now)
        try await s.deletePoll(p, at: ctx.now)
        // The message stays, without its poll: message changelogs and events show that.
        if var m = message {
            m.pollId = nil
            try await Messages.announceUpdate(s, &c, &m, now: ctx.now, channelChanged: false)
        }
        return .json(.obj([]))
    }

    static func addOption(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        var p = try await poll(s, c, ctx)
        let text = try parseOptionText(ctx.input)
        var author: String? = ctx.caller.userId
        if ctx.caller.isAdmin {
            author = try ctx.actingUser(optional: true)
        } else {
            guard let me = ctx.caller.userId, c.isJoined(me) else { throw APIError.forbidden("the user is not a member of this channel.") }
            if p.createdBy != me && !c.isOperator(me) {
                if !p.allowUserSuggestion { throw APIError.forbidden("the poll does not allow user suggestions.") }
                try s.requireCanSend(c, sender: me, ctx: ctx)
            }
        }
        try requireOpen(p, now: ctx.now)
        if p.options.count >= PollLimits.maxOptions {
            throw APIError.invalid("text", "cannot be added: the poll has \(PollLimits.maxOptions) options already.")
        }
        p.options.append(PollOptionRecord(id: p.nextOptionId, text: text, createdBy: author, createdAt: ctx.now, updatedAt: ctx.now))
        p.nextOptionId += 1
        try await announce(s, c, &p, changed: true, ctx: ctx)
        return .json(try await s.renderPoll(p, viewer: author, now: ctx.now))
    }

    static func updateOption(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        var p = try await poll(s, c, ctx)
        let optionId = try ctx.optionId
        guard let index = p.options.firstIndex(where: { $0.id == optionId }) else { throw APIError.notFound("Poll option \(optionId)") }
        try requireCreatorOrOperator(c, p, ctx)
        let text = try parseOptionText(ctx.input)
        let changed = p.options[index].text != text
        if changed {
            p.options[index].text = text
            p.options[index].updatedAt = ctx.now
        }
        try await announce(s, c, &p, changed: changed, ctx: ctx)
        return .json(try await s.renderPoll(p, viewer: ctx.actingUser(optional: true), now: ctx.now))
    }

    static func deleteOption(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        var p = try await poll(s, c, ctx)
        let optionId = try ctx.optionId
        guard p.options.contains(where: { $0.id == optionId }) else { throw APIError.notFound("Poll option \(optionId)") }
        try requireCreatorOrOperator(c, p, ctx)
        if p.options.count == 1 { throw APIError.invalid("option_id", "names the poll's only option: delete the poll instead.") }
        // Saving the poll without the option removes its votes too.
        p.options.removeAll { $0.id == optionId }
        try await announce(s, c, &p, changed: true, ctx: ctx)
        return .json(try await s.renderPoll(p, viewer: ctx.actingUser(optional: true), now: ctx.now))
    }

    static func vote(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let voter = try ctx.requiredActingUser()
        _ = try await s.user(voter)
        var p = try await poll(s, c, ctx)
        let message = try await carrier(of: p, s)
        try s.requireCanSend(c, sender: voter, ctx: ctx)
        if !s.isVisible(p, message: message, to: c.members[voter]) { throw APIError.notFound("Poll \(p.id)") }
        let ids = try parseOptionIds(ctx.input)
        try requireOpen(p, now: ctx.now)
        for id in ids where !p.options.contains(where: { $0.id == id }) {
            throw APIError.invalid("option_ids", "names \(id), which is no option of poll \(p.id).")
        }
        if ids.count > 1 && !p.allowMultipleVotes { throw APIError.invalid("option_ids", "may name one option only: the poll allows one vote.") }
        let sorted = ids.sorted()
        let before = try await s.pollVotes([p.id], of: voter)[p.id] ?? []
        if before != sorted {
            try await s.setPollVotes(p.id, user: voter, options: sorted, at: ctx.now)
            s.touch(&p, ctx.now)
            try await s.save(p)
            try await s.emitPollEvent("poll_voted", c, p, message: message, now: ctx.now)
        }
        return .json(try await s.renderPoll(p, viewer: voter, now: ctx.now))
    }

    static func voters(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        let (p, _) = try await visiblePoll(s, c, ctx, reader: reader)
        let optionId = try ctx.optionId
        guard p.options.contains(where: { $0.id == optionId }) else { throw APIError.notFound("Poll option \(optionId)") }
        let i = ctx.input
        let limit = try i.limit()
        var after: String? = nil
        if let token = try i.string("token"), !token.isEmpty {
            guard let key = decodeToken(token), key.count == 1, case .string(let id) = key[0] else { throw APIError.badToken() }
            after = id
        }
        var found = try await s.pollVoters(p.id, option: optionId, after: after, limit: limit + 1)
        let more = found.count > limit
        if more { found.removeLast() }
        try await s.loadUsers(found)
        let tally = try await s.pollTallies([p.id])[p.id] ?? PollTally()
        return .json(.obj([
            ("vote_count", .int(tally.counts[optionId] ?? 0)),
            ("voters", .array(found.map { s.basicUser($0, in: c) })),
            ("next", .string(more ? encodeToken([.string(found.last!)]) : "")),
        ]))
    }

    enum PollChange {
        case updated(PollRecord)
        case deleted(PollTombstoneRecord)
    }

    static func changelogs(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        let i = ctx.input
        let start = try Sync.parseStart(i)
        let limit = try i.limit(default: 100, max: 200)
        // Up to limit + 1 of each kind, merged in change order (as message changelogs, Sync.swift).
        var items: [(seq: Int64, item: PollChange)] = []
        for p in try await s.pollChanges(channel: c.url, after: start, visibleAfter: reader?.tsMessageOffset, limit: limit + 1) {
            items.append((p.changeSeq, .updated(p)))
        }
        for t in try await s.pollTombstones(channel: c.url, after: start, limit: limit + 1) {
            items.append((t.seq, .deleted(t)))
        }
        let (changes, hasMore, next) = Sync.page(items, limit: limit, current: try await s.currentSeq())
        var changed: [PollRecord] = [], deleted: [JSON] = []
        for change in changes {
            switch change {
            case .updated(let p): changed.append(p)
            case .deleted(let t): deleted.append(.obj([("poll_id", .int(t.pollId)), ("deleted_at", .int(t.deletedAt))]))
            }
        }
        let rendered = try await s.renderPolls(changed, viewer: reader?.userId, now: ctx.now)
        return .json(.obj([("updated", .array(changed.map { rendered[$0.id]! })), ("deleted", .array(deleted)),
                           ("has_more", .bool(hasMore)), ("next", .string(next))]))
    }

    /// Records a change of the poll's definition (`updated_at`, changelogs) and tells its
    /// audience (`poll_updated`); nothing when nothing changed.
    private static func announce(_ s: some Needs, _ c: ChannelRecord, _ p: inout PollRecord, changed: Bool, ctx: Ctx) async throws {
        guard changed else { return }
        p.updatedAt = ctx.now
        s.touch(&p, ctx.now)
        try await s.save(p)
        try await s.emitPollEvent("poll_updated", c, p, message: try await carrier(of: p, s), now: ctx.now)
    }
}
