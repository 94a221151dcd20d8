// Group channels: create, list, get, update, delete, membership (PROTOCOL.md §6).

func validateChannelURL(_ url: String, field: String = "channel_url") throws {
    if url.isEmpty || url.utf8.count > 100 { throw APIError.invalid(field, "must be 1 to 100 characters.") }
    let ok = url.unicodeScalars.allSatisfy { c in
        (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9") || c == "_" || c == "-" || c == "."
    }
    if !ok { throw APIError.invalid(field, "may contain only letters, digits, '_', '-' and '.'.") }
    // A path segment of "." or ".." is removed or climbs by URL normalization: no route could reach it.
    if url == "." || url == ".." { throw APIError.invalid(field, "must not be \".\" or \"..\".") }
}

// Membership rules, shared by the services (Services/Interfaces.swift).
extension ChannelRecords {
    func joinedIds(_ c: ChannelRecord) -> Set<String> {
        Set(c.members.values.filter { $0.state == "joined" }.map(\.userId))
    }

    /// Joined and invited members: everyone whose channel list shows the channel, so every
    /// change to the channel as they see it reaches them in an event.
    func allMemberIds(_ c: ChannelRecord) -> Set<String> { Set(c.members.keys) }

    /// A message hidden by the member's history offset still shows, as `parent_message_info`,
    /// in its replies the member can see: its changes concern them too.
    func hasVisibleReplies(_ m: MessageRecord, to member: MemberRecord?) -> Bool {
        m.replyCount > 0 && m.lastRepliedAt > (member?.tsMessageOffset ?? 0)
    }

    func activeBan(_ c: ChannelRecord, _ userId: String, _ now: Int64) -> RestrictionRecord? {
        c.bans[userId].flatMap { $0.isActive(at: now) ? $0 : nil }
    }

    func activeMute(_ c: ChannelRecord, _ userId: String, _ now: Int64) -> RestrictionRecord? {
        c.mutes[userId].flatMap { $0.isActive(at: now) ? $0 : nil }
    }

    /// Admin, or a joined member.
    func requireJoined(_ c: ChannelRecord, _ ctx: Ctx) throws {
        if ctx.caller.isAdmin { return }
        guard let me = ctx.caller.userId, c.isJoined(me) else { throw APIError.forbidden("the user is not a member of this channel.") }
    }

    func requireOperator(_ c: ChannelRecord, _ ctx: Ctx) throws {
        if ctx.caller.isAdmin { return }
        guard let me = ctx.caller.userId, c.isOperator(me), c.isJoined(me) else {
            throw APIError.forbidden("only operators may do this.")
        }
    }
}

// Membership under the application's settings (Services/Application.swift): the channel
// limit, and where a new member's history starts.
extension ChannelRecords where Self: UserRecords & MessageRecords & ApplicationRecords {
    /// Adds users as joined or invited members, honouring each user's auto-accept preference.
    /// A user in `forceJoin` who has joined the most channels allowed is refused; an invitee
    /// who has is left out (their invitation is cancelled, as the reference guide says).
    /// Members beyond the channel's member limit refuse the whole change.
    func addMembers(_ c: inout ChannelRecord, _ ids: [String], inviter: String?, forceJoin: Set<String>,
                    now: Int64) async throws -> (joined: [String], invited: [String]) {
        var joined: [String] = [], invited: [String] = []
        try await loadUsers(ids)
        let settings = try await applicationSettings()
        let historyStart = try await historyStartForNewMember(of: c.url, settings)
        var full = Set<String>()
        for id in Set(ids).sorted() where c.members[id] == nil {
            if try await !hasRoomForChannel(id, settings) {
                if forceJoin.contains(id) { throw APIError.channelLimit(id, settings.maxChannelsPerUser) }
                full.insert(id)
            }
        }
        let newcomers = Set(ids).filter { c.members[$0] == nil && !full.contains($0) }
        let memberLimit = settings.memberLimit(isSuper: c.isSuper)
        if c.members.count + newcomers.count > memberLimit { throw APIError.memberLimit(memberLimit) }
        for id in ids where c.members[id] == nil && !full.contains(id) {
            let autoJoin = forceJoin.contains(id) || (loadedUser(id)?.autoAccept ?? true)
            let isInvitation = inviter != nil && inviter != id
            c.members[id] = MemberRecord(
                userId: id, state: autoJoin ? "joined" : "invited", invitedAt: isInvitation ? now : 0,
                inviterId: isInvitation ? inviter : nil, joinedAt: autoJoin ? now : 0, readTs: 0, deliveredTs: 0,
                hiddenState: "unhidden", tsMessageOffset: historyStart, changeSeq: 0, changedAt: now)
            touchMember(&c, id, now)
            if autoJoin { joined.append(id) } else { invited.append(id) }
        }
        return (joined, invited)
    }

    /// An invited member joins (accepting, or joining a public channel they were invited to):
    /// refused at the channel limit. Their history started at the invitation (`addMembers`).
    func joinInvitedMember(_ c: inout ChannelRecord, _ uid: String, now: Int64) async throws {
        let settings = try await applicationSettings()
        if try await !hasRoomForChannel(uid, settings) { throw APIError.channelLimit(uid, settings.maxChannelsPerUser) }
        c.members[uid]!.state = "joined"
        c.members[uid]!.joinedAt = now
        touchMember(&c, uid, now)
    }
}

// Membership changes and the channel events they announce.
extension ChannelRecords where Self: UserRecords & EventEmitter & Rendering {
    /// Emits `channel_changed` (the channel rendered for each recipient) to `recipients`.
    func emitChannelChanged(_ c: ChannelRecord, to recipients: Set<String>, now: Int64) {
        guard !recipients.isEmpty else { return }  // `emit` would drop it, after rendering the channel
        emit("channel_changed", channelUrl: c.url, to: recipients, fields: [("channel", eventChannelJSON(c, now: now))], now: now)
    }

    /// Emits an event about a message to the joined members who can see `message` (nil: all
    /// joined members). Invitees cannot read messages and a history offset may hide the
    /// message, so the others do not receive it; when `channelChanged` (last message,
    /// `updated_at`, read receipts), they receive `channel_changed` instead.
    func emitMessageEvent(_ category: String, _ c: ChannelRecord, about message: MessageRecord?,
                          fields: [(String, JSON?)], channelChanged: Bool, now: Int64) {
        var told = Set<String>(), others = Set<String>()
        for m in c.members.values {
            if m.state == "joined" && (message.map { isVisible($0, to: m) || hasVisibleReplies($0, to: m) } ?? true) {
                told.insert(m.userId)
            } else {
                others.insert(m.userId)
            }
        }
        emit(category, channelUrl: c.url, to: told, fields: [("channel", eventChannelJSON(c, now: now))] + fields, now: now)
        if channelChanged { emitChannelChanged(c, to: others, now: now) }
    }


    func announceNewMembers(_ c: ChannelRecord, joined: [String], invited: [String], inviter: String?, now: Int64) {
        if !invited.isEmpty {
            emit("invitation_received", channelUrl: c.url, to: allMemberIds(c), fields: [
                ("channel", eventChannelJSON(c, now: now)),
                ("inviter", inviter.map { basicUser($0) }),
                ("invitees", .array(invited.map { basicUser($0) })),
            ], now: now)
        }
        if !joined.isEmpty {
            emit("user_joined", channelUrl: c.url, to: allMemberIds(c), fields: [
                ("channel", eventChannelJSON(c, now: now)),
                ("users", .array(joined.map { basicUser($0, in: c) })),
            ], now: now)
        }
    }

    /// Removes a member (leave, decline, ban, user deletion) and tells the channel and the user.
    func removeMember(_ c: inout ChannelRecord, _ userId: String, now: Int64, category: String, extra: [(String, JSON?)]) {
        guard c.members[userId] != nil else { return }
        let audience = allMemberIds(c)
        c.members.removeValue(forKey: userId)
        c.operatorIds.removeAll { $0 == userId }
        setTyping(userId, in: c.url, since: nil)
        touch(&c, now)
        addMembershipTombstone(user: userId, channel: c.url, at: now)
        var fields: [(String, JSON?)] = [("channel", eventChannelJSON(c, now: now)), ("user", basicUser(userId))]
        fields.append(contentsOf: extra)
        emit(category, channelUrl: c.url, to: audience, fields: fields, now: now)
    }

    func markRead(_ c: inout ChannelRecord, _ userId: String, now: Int64) {
        guard c.members[userId] != nil else { return }
        c.members[userId]!.readTs = max(c.members[userId]!.readTs, now)
        touchMember(&c, userId, now)
        // Every member's render lists read receipts (`members[].read_ts`): changelogs show it to all.
        markChanged(&c, now)
        emit("read_status", channelUrl: c.url, to: allMemberIds(c), fields: [
            ("channel", eventChannelJSON(c, now: now)), ("user", basicUser(userId)), ("read_ts", .int(c.members[userId]!.readTs)),
        ], now: now)
    }

    func unhideMember(_ c: inout ChannelRecord, _ uid: String, now: Int64) {
        c.members[uid]?.hiddenState = "unhidden"
        touchMember(&c, uid, now)
        emitChannelChanged(c, to: [uid], now: now)
    }
}

extension Rendering {
    func channelView(_ ctx: Ctx, viewer: String?, showMemberDefault: Bool) throws -> ChannelView {
        let i = ctx.input
        return ChannelView(
            viewer: viewer,
            showMember: try i.bool("show_member", default: showMemberDefault),
            showMetadata: try i.bool("show_metadata", default: false),
            showMetacounter: try i.bool("show_metacounter", default: false),
            showReadReceipt: try i.bool("show_read_receipt", default: false),
            showDeliveryReceipt: try i.bool("show_delivery_receipt", default: false))
    }
}

enum Channels {
    /// What the channel service uses of a request (Services/Interfaces.swift).
    typealias Needs = UserRecords & ChannelRecords & MessageRecords & PollRecords & ApplicationRecords & EventEmitter & Rendering
        & WebhookRecords

    /// Body lists of users: `user_ids` and/or `users: [{user_id}]`.
    static func userIdList(_ i: Input, _ idsField: String, _ usersField: String?) throws -> [String]? {
        var out = try i.stringList(idsField)
        if let usersField, let v = i.body[usersField], v != .null {
            guard case .array(let items) = v else { throw APIError.invalid(usersField, "must be a list of user objects.") }
            var ids = out ?? []
            for item in items {
                switch item {
                case .object(let o):
                    guard case .string(let id)? = o["user_id"] else { throw APIError.invalid(usersField, "items need a string \"user_id\".") }
                    ids.append(id)
                case .string(let id): ids.append(id)
                default: throw APIError.invalid(usersField, "must be a list of user objects.")
                }
            }
            out = ids
        }
        guard let list = out else { return nil }
        var seen = Set<String>(), unique: [String] = []
        for id in list where seen.insert(id).inserted { unique.append(id) }
        return unique
    }

    /// A create or update as a form with a `cover_file` part (PROTOCOL.md §6.1), or as JSON.
    static func coverForm(_ s: some Needs, _ ctx: Ctx) throws -> (Input, MultipartPart?) {
        guard ctx.isMultipart else { return (ctx.input, nil) }
        let form = try UploadForm(ctx, fileFields: ["cover_file"], jsonFields: ["users", "user_ids", "operator_ids"], limit: s.uploadLimit)
        return (form.input, form.files["cover_file"])
    }

    static func create(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let (i, coverFile) = try coverForm(s, ctx)
        var ids = try userIdList(i, "user_ids", "users") ?? []
        let name = try i.string("name", maxBytes: 2048) ?? ""
        var coverUrl = try i.string("cover_url", maxBytes: 2048) ?? ""
        let customType = try i.string("custom_type", maxBytes: 128) ?? ""
        let data = try i.string("data") ?? ""
        let url = try i.string("channel_url")
        if let url { try validateChannelURL(url) }
        let isDistinct = try i.bool("is_distinct", default: false)
        let isSuper = try i.bool("is_super", default: false)
        let isPublic = try i.bool("is_public", default: false)
        let isEphemeral = try i.bool("is_ephemeral", default: false)
        let operatorIds = try i.stringList("operator_ids") ?? []
        let strict = try i.bool("strict", default: false)
        var inviter = try i.string("inviter_id", maxBytes: 80)
        _ = try i.string("access_code")
        if let me = ctx.caller.userId {
            if let inviter, inviter != me { throw APIError.forbidden("\"inviter_id\" must be the session user.") }
            inviter = me
        }
        if isSuper && isDistinct { throw APIError.invalid("is_distinct", "a super channel cannot be distinct.") }
        if let inviter {
            _ = try await s.user(inviter)
            if !ids.contains(inviter) { ids.insert(inviter, at: 0) }
        }
        for id in ids { try validateUserId(id, field: "user_ids") }
        try await s.loadUsers(ids + operatorIds)
        let unknown = ids.filter { s.loadedUser($0) == nil }
        if strict, let first = unknown.first { throw APIError.notFound("User \"\(first)\"") }
        ids.removeAll { s.loadedUser($0) == nil }
        for op in operatorIds where s.loadedUser(op) == nil { throw APIError.notFound("User \"\(op)\"") }
        for op in operatorIds where !ids.contains(op) { ids.append(op) }
        if let url, try await s.channelIfExists(url) != nil { throw APIError.exists("Channel \"\(url)\"") }

        if isDistinct {
            // Two creations of one distinct channel at once find one channel: one writer at a
            // time on SQLite, a lock on the member set on PostgreSQL (`distinctChannel`).
            if let existingUrl = try await s.distinctChannel(members: Set(ids), customType: customType),
               let existing = try await s.channelIfExists(existingUrl) {
                var out = s.channelJSON(existing, try s.channelView(ctx, viewer: ctx.caller.userId, showMemberDefault: true), now: ctx.now)
                if case .object(var o) = out { o["is_created"] = false; out = .object(o) }
                return .json(out)
            }
        }
        let channelUrl: String
        if let url { channelUrl = url } else { channelUrl = "parley_group_channel_\(try await s.allocateChannelNumber())_\(randomHex(8))" }
        if let coverFile { coverUrl = try await s.storeCover(coverFile, channel: channelUrl) }
        var c = ChannelRecord(
            url: channelUrl, name: name, coverUrl: coverUrl, customType: customType, data: data,
            createdAt: ctx.now, updatedAt: ctx.now, createdBy: inviter, isDistinct: isDistinct, isSuper: isSuper,
            isPublic: isPublic, isEphemeral: isEphemeral, freeze: false, members: [:], operatorIds: [],
            bans: [:], mutes: [:], metadata: [:], metacounters: [:], pinnedMessageIds: [], lastMessageId: 0,
            changeSeq: 0, changedAt: ctx.now)
        s.touch(&c, ctx.now)
        let force = Set([inviter].compactMap { $0 })
        let added = try await s.addMembers(&c, ids, inviter: inviter, forceJoin: force, now: ctx.now)
        c.operatorIds = operatorIds
        try await s.save(c)
        s.queueWebhook(.channelCreated, channelUrl: c.url, fields: [("channel", s.webhookChannelJSON(c, now: ctx.now))], now: ctx.now)
        s.announceNewMembers(c, joined: added.joined, invited: added.invited, inviter: inviter, now: ctx.now)
        var out = s.channelJSON(c, try s.channelView(ctx, viewer: ctx.caller.userId, showMemberDefault: true), now: ctx.now)
        if case .object(var o) = out { o["is_created"] = true; out = .object(o) }
        return .json(out)
    }

    struct ListFilter {
        var viewer: String?
        var showEmpty = true
        var showFrozen = true
        var distinctMode = "all", publicMode = "all", superMode = "all"
        var memberState = "all", hiddenMode = "all", unreadFilter = "all"
        var customTypes: [String]?
        var customTypePrefix: String?
        var urls: [String]?
        var name: String?, nameContains: String?, namePrefix: String?
        var exactly: Set<String>?
        var include: [String]?
        var queryAnd = false
        var createdAfter: Int64?, createdBefore: Int64?
        var metadataKey: String?, metadataValues: [String]?, metadataPrefix: String?
        /// `group_channels` only: `joined` keeps the channels the viewer has joined.
        var joinedOnlyByViewer = false
    }

    static func parseFilter(_ i: Input, viewer: String?, mine: Bool) throws -> ListFilter {
        var f = ListFilter(viewer: viewer)
        f.showEmpty = try i.bool("show_empty", default: !mine)
        f.showFrozen = try i.bool("show_frozen", default: true)
        f.distinctMode = try i.enumValue("distinct_mode", ["all", "distinct", "nondistinct"], default: "all")
        f.publicMode = try i.enumValue("public_mode", ["all", "public", "private"], default: "all")
        f.superMode = try i.enumValue("super_mode", ["all", "super", "nonsuper"], default: "all")
        f.memberState = try i.enumValue("member_state_filter", ["all", "joined_only", "invited_only", "invited_by_friend", "invited_by_non_friend"], default: "all")
        if mine {
            f.hiddenMode = try i.enumValue("hidden_mode", ["unhidden_only", "hidden_only", "hidden_allow_auto_unhide", "hidden_prevent_auto_unhide", "all"], default: "unhidden_only")
            f.unreadFilter = try i.enumValue("unread_filter", ["all", "unread_message"], default: "all")
        } else if try i.enumValue("public_membership_filter", ["all", "joined"], default: "all") == "joined" {
            // The public channel list's membership filter; it needs a user to be a member.
            guard viewer != nil else { throw APIError.invalid("public_membership_filter", "joined needs a user: call with a Session-Key.") }
            f.joinedOnlyByViewer = true
        }
        f.customTypes = try i.stringList("custom_types")
        f.customTypePrefix = try i.string("custom_type_startswith")
        f.urls = try i.stringList("channel_urls")
        f.name = try i.string("name")
        f.nameContains = try i.string("name_contains")
        f.namePrefix = try i.string("name_startswith")
        if let exact = try i.stringList("members_exactly_in") {
            var set = Set(exact)
            if mine, let viewer { set.insert(viewer) }
            f.exactly = set
        }
        f.include = try i.stringList("members_include_in")
        f.queryAnd = try i.enumValue("query_type", ["AND", "OR"], default: "OR") == "AND"
        f.createdAfter = try i.int("created_after")
        f.createdBefore = try i.int("created_before")
        f.metadataKey = try i.string("metadata_key")
        f.metadataValues = try i.stringList("metadata_values")
        f.metadataPrefix = try i.string("metadata_value_startswith")
        return f
    }

    static func matches(_ s: some Needs, _ c: ChannelRecord, _ f: ListFilter) -> Bool {
        if !f.showEmpty && s.lastMessage(c, for: f.viewer) == nil { return false }
        if !f.showFrozen && c.freeze { return false }
        if f.joinedOnlyByViewer && (f.viewer.flatMap { c.members[$0] })?.state != "joined" { return false }
        if f.distinctMode == "distinct" && !c.isDistinct { return false }
        if f.distinctMode == "nondistinct" && c.isDistinct { return false }
        if f.publicMode == "public" && !c.isPublic { return false }
        if f.publicMode == "private" && c.isPublic { return false }
        if f.superMode == "super" && !c.isSuper { return false }
        if f.superMode == "nonsuper" && c.isSuper { return false }
        if let viewer = f.viewer, let m = c.members[viewer] {
            switch f.memberState {
            case "joined_only": if m.state != "joined" { return false }
            case "invited_only", "invited_by_non_friend": if m.state != "invited" { return false }
            case "invited_by_friend": return false
            default: break
            }
            switch f.hiddenMode {
            case "unhidden_only": if m.hiddenState != "unhidden" { return false }
            case "hidden_only": if m.hiddenState == "unhidden" { return false }
            case "hidden_allow_auto_unhide", "hidden_prevent_auto_unhide": if m.hiddenState != f.hiddenMode { return false }
            default: break
            }
            if f.unreadFilter == "unread_message" && s.unreadCounts(c, viewer).messages == 0 { return false }
        }
        if let types = f.customTypes, !types.isEmpty, !types.contains(c.customType) { return false }
        if let p = f.customTypePrefix, !c.customType.hasPrefix(p) { return false }
        if let urls = f.urls, !urls.isEmpty, !urls.contains(c.url) { return false }
        if let n = f.name, c.name != n { return false }
        if let n = f.nameContains, !n.isEmpty, !c.name.lowercased().contains(n.lowercased()) { return false }
        if let n = f.namePrefix, !c.name.hasPrefix(n) { return false }
        if let exact = f.exactly, Set(c.members.keys) != exact { return false }
        if let inc = f.include, !inc.isEmpty {
            let present = inc.filter { c.members[$0] != nil }
            if f.queryAnd ? present.count != inc.count : present.isEmpty { return false }
        }
        if let a = f.createdAfter, c.createdAt <= a { return false }
        if let b = f.createdBefore, c.createdAt >= b { return false }
        if let key = f.metadataKey {
            guard let v = c.metadata[key] else { return false }
            if let values = f.metadataValues, !values.isEmpty, !values.contains(v) { return false }
            if let p = f.metadataPrefix, !v.hasPrefix(p) { return false }
        }
        return true
    }

    static func sortKey(_ s: some Needs, _ order: String, metadataKey: String?, viewer: String?) -> (ChannelRecord) -> [JSON] {
        switch order {
        case "latest_last_message":
            return { c in
                if let m = s.lastMessage(c, for: viewer) { return [.int(0), .int(-m.createdAt), .int(-c.createdAt), .string(c.url)] }
                return [.int(1), .int(-c.createdAt), .int(-c.createdAt), .string(c.url)]
            }
        case "channel_name_alphabetical":
            return { c in [nameOrderKey(c.name), .string(c.url)] }
        case "metadata_value_alphabetical":
            return { c in
                if let key = metadataKey, let v = c.metadata[key] { return [.int(0), textOrderKey(v), .string(c.url)] }
                return [.int(1), .string(""), .string(c.url)]
            }
        default:
            return { c in [.int(-c.createdAt), .string(c.url)] }
        }
    }

    /// The shape of an order's sort key (ChannelQueries.sortExpressions): a token of another
    /// order or a forged one is refused, not compared.
    static func keyShape(_ order: String) -> [JSON] {
        switch order {
        case "latest_last_message": return [.int(0), .int(0), .int(0), .string("")]
        case "channel_name_alphabetical": return [.string(""), .string("")]
        case "metadata_value_alphabetical": return [.int(0), .string(""), .string("")]
        default: return [.int(0), .string("")]
        }
    }

    static func listChannels(_ s: some Needs, _ ctx: Ctx, scope: ChannelQueries.Scope, viewer: String?, mine: Bool) async throws -> Reply {
        let i = ctx.input
        let limit = try i.limit()
        let order = try i.enumValue("order", ["chronological", "latest_last_message", "channel_name_alphabetical", "metadata_value_alphabetical"], default: "chronological")
        let metadataOrderKey = try i.string("metadata_order_key")
        if order == "metadata_value_alphabetical" && metadataOrderKey == nil { throw APIError.missing("metadata_order_key") }
        let filter = try parseFilter(i, viewer: viewer, mine: mine)
        let view = try s.channelView(ctx, viewer: viewer, showMemberDefault: false)
        _ = try i.bool("include_sorted_metaarray_in_last_message")
        var after: [JSON]? = nil
        if let token = try i.string("token") {
            guard let key = decodeToken(token), sameShape(key, keyShape(order)) else { throw APIError.badToken() }
            after = key
        }
        let key = sortKey(s, order, metadataKey: metadataOrderKey, viewer: viewer)
        // Rows come in key order from SQL with the filters it states; `matches` decides on the
        // loaded records, so a batch may keep fewer than it read: read on until the page and
        // one more (which says whether there is a next page) are found.
        var selected: [ChannelRecord] = []
        let batch = limit + 1
        while selected.count <= limit {
            let urls = try await s.channelListing(scope, filter: filter, order: order, metadataOrderKey: metadataOrderKey,
                                                 after: after, limit: batch)
            try await s.loadChannels(urls)
            for url in urls {
                guard let c = s.loadedChannel(url) else { continue }
                let k = key(c)
                if s.verify, let previous = after, compareKeys(previous, k) >= 0 {
                    throw APIError.internal("channel listing out of order: \(k) after \(previous) (\(order))")
                }
                after = k
                if matches(s, c, filter) { selected.append(c) }
            }
            if urls.count < batch { break }
        }
        let page = Array(selected.prefix(limit))
        let next = selected.count > limit ? encodeToken(key(page.last!)) : ""
        return .json(.obj([
            ("channels", .array(page.map { s.channelJSON($0, view, now: ctx.now) })),
            ("next", .string(next)), ("ts", .int(ctx.now)),
        ]))
    }

    static func listAll(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let me = ctx.caller.userId
        return try await listChannels(s, ctx, scope: .visibleTo(me), viewer: me, mine: false)
    }

    static func listMine(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await s.user(ctx.param(.userId))
        try ctx.requireSelfOrAdmin(u.userId)
        return try await listChannels(s, ctx, scope: .memberOf(u.userId), viewer: u.userId, mine: true)
    }

    static func get(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        var viewer = ctx.caller.userId
        if ctx.caller.isAdmin {
            viewer = try ctx.input.string("user_id", maxBytes: 80)
        } else if let me = viewer, c.members[me] == nil && !c.isPublic {
            throw APIError.forbidden("the user is not a member of this channel.")
        }
        _ = try ctx.input.string("member_active_mode")
        return .json(s.channelJSON(c, try s.channelView(ctx, viewer: viewer, showMemberDefault: true), now: ctx.now))
    }

    static func update(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        let (i, coverFile) = try coverForm(s, ctx)
        let name = try i.string("name", maxBytes: 2048)
        var cover = try i.string("cover_url", maxBytes: 2048)
        let customType = try i.string("custom_type", maxBytes: 128)
        let data = try i.string("data")
        let isPublic = try i.bool("is_public")
        let isDistinct = try i.bool("is_distinct")
        let operatorIds = try i.stringList("operator_ids")
        _ = try i.bool("is_super")
        _ = try i.string("access_code")
        if isDistinct == true && c.isSuper { throw APIError.invalid("is_distinct", "a super channel cannot be distinct.") }
        for op in operatorIds ?? [] where c.members[op] == nil { throw APIError.invalid("operator_ids", "\"\(op)\" is not a member.") }
        if let name { c.name = name }
        if let coverFile { cover = try await s.storeCover(coverFile, channel: c.url) }
        if let cover { try await s.replaceCover(&c, with: cover) }
        if let customType { c.customType = customType }
        if let data { c.data = data }
        if let isPublic { c.isPublic = isPublic }
        if let isDistinct { c.isDistinct = isDistinct }
        for op in operatorIds ?? [] where !c.operatorIds.contains(op) { c.operatorIds.append(op) }
        s.touch(&c, ctx.now)
        try await s.save(c)
        s.emitChannelChanged(c, to: s.allMemberIds(c), now: ctx.now)
        s.queueWebhook(.channelChanged, channelUrl: c.url, fields: [("channel", s.webhookChannelJSON(c, now: ctx.now))], now: ctx.now)
        return .json(s.channelJSON(c, try s.channelView(ctx, viewer: ctx.caller.userId, showMemberDefault: true), now: ctx.now))
    }

    static func delete(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireOperator(c, ctx)
        let audience = s.allMemberIds(c)
        for id in c.members.keys.sorted() { s.addMembershipTombstone(user: id, channel: c.url, at: ctx.now) }
        try await s.purgeMessages(of: c.url)
        try await s.purgePolls(of: c.url)
        s.queueWebhook(.channelDeleted, channelUrl: c.url, fields: [("channel", s.webhookChannelJSON(c, now: ctx.now))], now: ctx.now)
        s.deleteChannelRecord(c.url)
        s.emit("channel_deleted", channelUrl: c.url, to: audience, fields: [], now: ctx.now)
        return .json(.obj([]))
    }

    static func invite(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        guard let ids = try userIdList(ctx.input, "user_ids", "users"), !ids.isEmpty else { throw APIError.missing("user_ids") }
        var inviter = try ctx.input.string("inviter_id", maxBytes: 80)
        if let me = ctx.caller.userId {
            if let inviter, inviter != me { throw APIError.forbidden("\"inviter_id\" must be the session user.") }
            inviter = me
        } else if let inv = inviter, !c.isJoined(inv) {
            throw APIError.invalid("inviter_id", "must be a joined member.")
        }
        for id in ids {
            _ = try await s.user(id)
            if s.activeBan(c, id, ctx.now) != nil { throw APIError.banned }
        }
        let added = try await s.addMembers(&c, ids, inviter: inviter, forceJoin: [], now: ctx.now)
        // Inviting only existing members changes nothing (and no event would tell of a change).
        if !added.joined.isEmpty || !added.invited.isEmpty {
            s.touch(&c, ctx.now)
            try await s.save(c)
            s.announceNewMembers(c, joined: added.joined, invited: added.invited, inviter: inviter, now: ctx.now)
        }
        return .json(s.channelJSON(c, try s.channelView(ctx, viewer: ctx.caller.userId, showMemberDefault: true), now: ctx.now))
    }

    /// `uid` has just become a joined member: the channel is saved, its members hear of it,
    /// and the answer is the channel as the user now sees it.
    private static func announceJoin(_ s: some Needs, _ c: inout ChannelRecord, _ uid: String, _ ctx: Ctx) async throws -> Reply {
        s.touch(&c, ctx.now)
        try await s.save(c)
        s.emit("user_joined", channelUrl: c.url, to: s.allMemberIds(c), fields: [
            ("channel", s.eventChannelJSON(c, now: ctx.now)), ("users", .array([s.basicUser(uid, in: c)])),
        ], now: ctx.now)
        return .json(s.channelJSON(c, try s.channelView(ctx, viewer: uid, showMemberDefault: true), now: ctx.now))
    }

    static func accept(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        let uid = try ctx.requiredActingUser()
        guard let m = c.members[uid], m.state == "invited" else { throw APIError.invalid("user_id", "has no pending invitation to this channel.") }
        _ = try ctx.input.string("access_code")
        try await s.joinInvitedMember(&c, uid, now: ctx.now)
        return try await announceJoin(s, &c, uid, ctx)
    }

    static func decline(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        let uid = try ctx.requiredActingUser()
        guard let m = c.members[uid], m.state == "invited" else { throw APIError.invalid("user_id", "has no pending invitation to this channel.") }
        let audience = s.allMemberIds(c)
        c.members.removeValue(forKey: uid)
        s.touch(&c, ctx.now)
        s.addMembershipTombstone(user: uid, channel: c.url, at: ctx.now)
        try await s.save(c)
        s.emit("invitation_declined", channelUrl: c.url, to: audience, fields: [
            ("channel", s.eventChannelJSON(c, now: ctx.now)), ("invitee", s.basicUser(uid)),
            ("inviter", m.inviterId.map { s.basicUser($0) }),
        ], now: ctx.now)
        return .json(.obj([]))
    }

    static func join(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        let uid = try ctx.requiredActingUser()
        _ = try await s.user(uid)
        _ = try ctx.input.string("access_code")
        if s.activeBan(c, uid, ctx.now) != nil { throw APIError.banned }
        if c.isJoined(uid) {
            return .json(s.channelJSON(c, try s.channelView(ctx, viewer: uid, showMemberDefault: true), now: ctx.now))
        }
        if !c.isPublic && c.members[uid] == nil { throw APIError.notPublic }
        if c.members[uid] != nil {
            try await s.joinInvitedMember(&c, uid, now: ctx.now)
        } else {
            _ = try await s.addMembers(&c, [uid], inviter: nil, forceJoin: [uid], now: ctx.now)
        }
        return try await announceJoin(s, &c, uid, ctx)
    }

    static func leave(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let url = try ctx.param(.channelURL)
        var c = try await s.channel(url)
        var ids = try ctx.input.stringList("user_ids") ?? []
        if let single = try ctx.input.string("user_id", maxBytes: 80) { ids.append(single) }
        if let me = ctx.caller.userId {
            if ids.contains(where: { $0 != me }) { throw APIError.forbidden("a session user can only leave themselves.") }
            ids = [me]
        }
        if ids.isEmpty { throw APIError.missing("user_ids") }
        let leaveAll = try ctx.input.bool("should_leave_all", default: false)
        _ = try ctx.input.bool("should_remove_operator_status")
        _ = try ctx.input.string("reason")
        if leaveAll {
            for id in ids {
                for var oc in try await s.memberChannels(of: id) where oc.url != url {
                    s.removeMember(&oc, id, now: ctx.now, category: "user_left", extra: [])
                    try await s.save(oc)
                }
            }
        } else {
            for id in ids where c.members[id] == nil { throw APIError.invalid("user_ids", "\"\(id)\" is not a member of this channel.") }
        }
        for id in ids where c.members[id] != nil {
            s.removeMember(&c, id, now: ctx.now, category: "user_left", extra: [])
        }
        try await s.save(c)
        return .json(.obj([]))
    }

    static func hide(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let uid = try ctx.requiredActingUser()
        let hidePrevious = try ctx.input.bool("hide_previous_messages", default: false)
        let allowAuto = try ctx.input.bool("allow_auto_unhide", default: true)
        let all = try ctx.input.bool("should_hide_all", default: false)
        if c.members[uid] == nil { throw APIError.forbidden("the user is not a member of this channel.") }
        let targets = all ? try await s.memberChannels(of: uid).map(\.url) : [c.url]
        for url in targets {
            guard var ch = try await s.channelIfExists(url) else { continue }
            ch.members[uid]!.hiddenState = allowAuto ? "hidden_allow_auto_unhide" : "hidden_prevent_auto_unhide"
            if hidePrevious {
                let newest = try await s.newestMessageTs(url)
                ch.members[uid]!.tsMessageOffset = max(ch.members[uid]!.tsMessageOffset, newest)
            }
            s.touchMember(&ch, uid, ctx.now)
            try await s.save(ch)
            if hidePrevious {
                // Hiding the history reads it: the members see the read receipt move (read_status).
                s.markRead(&ch, uid, now: ctx.now)
                try await s.save(ch)
            }
            s.emit("channel_hidden", channelUrl: url, to: [uid], fields: [
                ("channel", s.eventChannelJSON(ch, now: ctx.now)), ("user_id", .string(uid)),
                ("hide_previous_messages", .bool(hidePrevious)), ("allow_auto_unhide", .bool(allowAuto)),
            ], now: ctx.now)
        }
        return .json(.obj([]))
    }

    static func unhide(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let uid = try ctx.requiredActingUser()
        let all = try ctx.input.bool("should_unhide_all", default: false)
        if c.members[uid] == nil { throw APIError.forbidden("the user is not a member of this channel.") }
        let targets = all ? try await s.memberChannels(of: uid).map(\.url) : [c.url]
        for url in targets {
            guard var ch = try await s.channelIfExists(url), ch.members[uid]!.hiddenState != "unhidden" else { continue }
            s.unhideMember(&ch, uid, now: ctx.now)
            try await s.save(ch)
        }
        return .json(.obj([]))
    }

    static func resetHistory(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let uid = try ctx.requiredActingUser()
        let all = try ctx.input.bool("reset_all", default: false)
        if c.members[uid] == nil { throw APIError.forbidden("the user is not a member of this channel.") }
        let targets = all ? try await s.memberChannels(of: uid).map(\.url) : [c.url]
        var offset: Int64 = 0
        for url in targets {
            guard var ch = try await s.channelIfExists(url) else { continue }
            let newest = try await s.newestMessageTs(url)
            ch.members[uid]!.tsMessageOffset = max(ch.members[uid]!.tsMessageOffset, newest)
            if url == c.url { offset = ch.members[uid]!.tsMessageOffset }
            s.touchMember(&ch, uid, ctx.now)
            try await s.save(ch)
            // The user's other clients learn of the new offset (and the last message it hides).
            s.emitChannelChanged(ch, to: [uid], now: ctx.now)
        }
        return .json(.obj([("ts_message_offset", .int(offset))]))
    }

    static func setTyping(_ s: some Needs, _ ctx: inout Ctx, typing: Bool) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        var ids = try ctx.input.stringList("user_ids") ?? []
        if let me = ctx.caller.userId {
            if ids.contains(where: { $0 != me }) { throw APIError.forbidden("a session user can only type as themselves.") }
            ids = [me]
        }
        if ids.isEmpty { throw APIError.missing("user_ids") }
        for id in ids where !c.isJoined(id) { throw APIError.forbidden("\"\(id)\" is not a member of this channel.") }
        for id in ids {
            s.setTyping(id, in: c.url, since: typing ? ctx.now : nil)
        }
        let typers = try await s.typers(in: c.url, now: ctx.now)
        s.emit("typing_status", channelUrl: c.url, to: s.joinedIds(c), fields: [
            ("channel", s.eventChannelJSON(c, now: ctx.now)), ("typing_users", .array(typers.map { s.basicUser($0) })),
        ], now: ctx.now)
        return .json(.obj([]))
    }

    static func startTyping(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply { try await setTyping(s, &ctx, typing: true) }
    static func endTyping(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply { try await setTyping(s, &ctx, typing: false) }

    static func members(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        try s.requireJoined(c, ctx)
        let i = ctx.input
        let limit = try i.limit()
        let order = try i.enumValue("order", ["member_nickname_alphabetical", "operator_then_member_alphabetical"], default: "member_nickname_alphabetical")
        let opFilter = try i.enumValue("operator_filter", ["all", "operator", "nonoperator"], default: "all")
        let stateFilter = try i.enumValue("member_state_filter", ["all", "joined_only", "invited_only", "invited_by_friend", "invited_by_non_friend"], default: "all")
        let mutedFilter = try i.enumValue("muted_member_filter", ["all", "muted", "unmuted"], default: "all")
        let prefix = try i.string("nickname_startswith")
        for flag in ["show_delivery_receipt", "show_read_receipt", "show_member_is_muted", "include_push_preference"] { _ = try i.bool(flag) }
        let selected = c.members.values.filter { m in
            let isOp = c.isOperator(m.userId)
            if opFilter == "operator" && !isOp { return false }
            if opFilter == "nonoperator" && isOp { return false }
            if stateFilter == "joined_only" && m.state != "joined" { return false }
            if (stateFilter == "invited_only" || stateFilter == "invited_by_non_friend") && m.state != "invited" { return false }
            if stateFilter == "invited_by_friend" { return false }
            let muted = s.activeMute(c, m.userId, ctx.now) != nil
            if mutedFilter == "muted" && !muted { return false }
            if mutedFilter == "unmuted" && muted { return false }
            if let prefix, !(s.loadedUser(m.userId)?.nickname ?? "").hasPrefix(prefix) { return false }
            return true
        }
        let (page, next) = try keysetPage(Array(selected), key: { m in
            let nick = nameOrderKey(s.loadedUser(m.userId)?.nickname ?? "")
            if order == "operator_then_member_alphabetical" {
                return [.int(c.isOperator(m.userId) ? 0 : 1), nick, .string(m.userId)]
            }
            return [nick, .string(m.userId)]
        }, token: try i.string("token"), limit: limit)
        return .json(.obj([("members", .array(page.map { s.memberJSON(c, $0, now: ctx.now) })), ("next", .string(next))]))
    }

    static func isMember(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        if !ctx.caller.isAdmin, let me = ctx.caller.userId, c.members[me] == nil, try me != ctx.param(.userId) {
            throw APIError.forbidden("the user is not a member of this channel.")
        }
        let state = try c.members[ctx.param(.userId)]?.state ?? "none"
        return .json(.obj([("is_member", .bool(state == "joined")), ("state", .string(state))]))
    }

    static func markAsRead(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        let uid = try ctx.requiredActingUser()
        guard c.isJoined(uid) else { throw APIError.forbidden("the user is not a member of this channel.") }
        s.markRead(&c, uid, now: ctx.now)
        try await s.save(c)
        return .json(.obj([("ts", .int(c.members[uid]!.readTs))]))
    }

    static func markAsDelivered(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        let uid = try ctx.requiredActingUser()
        guard c.isJoined(uid) else { throw APIError.forbidden("the user is not a member of this channel.") }
        c.members[uid]!.deliveredTs = max(c.members[uid]!.deliveredTs, ctx.now)
        s.touchMember(&c, uid, ctx.now)
        // Every member's render lists delivery receipts (`members[].delivered_ts`).
        s.markChanged(&c, ctx.now)
        try await s.save(c)
        s.emit("delivery_status", channelUrl: c.url, to: s.allMemberIds(c), fields: [
            ("channel", s.eventChannelJSON(c, now: ctx.now)), ("user", s.basicUser(uid)),
            ("delivered_ts", .int(c.members[uid]!.deliveredTs)),
        ], now: ctx.now)
        return .json(.obj([("ts", .int(c.members[uid]!.deliveredTs))]))
    }
}
