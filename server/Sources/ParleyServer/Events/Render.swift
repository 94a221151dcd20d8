// Wire rendering of records (docs/PROTOCOL.md §4). Fields without a value are omitted,
// never null; integers stay integers.

struct ChannelView {
    var viewer: String? = nil
    var showMember = false
    var showMetadata = false
    var showMetacounter = false
    var showReadReceipt = false
    var showDeliveryReceipt = false
    var includeOperators = true
    var showLastMessage = true
}

struct MessageView {
    var reactions = false
    var threadInfo = false
    var parentInfo = false
    var metaArray = false
    /// The parents of the messages rendered, for `parentInfo` (looked up by `render`).
    var parents: [Int64: MessageRecord] = [:]
    /// Whose `voted_option_ids` the polls of the messages show (nil: nobody's, as in events,
    /// which every recipient shares).
    var pollViewer: String? = nil
    /// The polls the messages carry, rendered (looked up by `render`).
    var polls: [Int64: JSON] = [:]

    static let full = MessageView(reactions: true, threadInfo: true, parentInfo: true, metaArray: true)
}

/// The records of one request as the protocol shows them (`Rendering`), from what its stores
/// loaded: its answers while it runs and, once it committed, its events (the hub holds the
/// renderer of each committed request and renders from it; EventHub.swift).
final class RecordRenderer: Rendering {
    private let shared: SharedState
    private let users: UserStore
    private let channels: ChannelStore
    private let messages: MessageStore
    private let polls: PollStore

    init(shared: SharedState, users: UserStore, channels: ChannelStore, messages: MessageStore, polls: PollStore) {
        self.shared = shared
        self.users = users
        self.channels = channels
        self.messages = messages
        self.polls = polls
    }

    private var publicBaseURL: String { shared.publicBaseURL }
    private var loadedChannels: [String: ChannelRecord] { channels.loadedChannels }
    private func loadedUser(_ id: String) -> UserRecord? { users.loadedUser(id) }

    /// The user has a stream open on this server or another one on the database.
    func isOnline(_ userId: String) -> Bool { shared.isOnline(userId) }

    /// Messages as JSON, with the parent messages `view` asks for looked up at once.
    func render(_ messages: [MessageRecord], _ view: MessageView) async throws -> [JSON] {
        var view = view
        if view.parentInfo {
            let ids = messages.compactMap { $0.parentId != 0 ? $0.parentId : nil }
            if !ids.isEmpty { view.parents = try await self.messages.messages(ids) }
        }
        // Everything the renders show: the channels (roles, pins) and every user named.
        try await channels.loadChannels(Array(Set(messages.map(\.channelUrl))))
        var shown = Set<String>()
        for m in messages {
            if let sender = m.senderId { shown.insert(sender) }
            shown.formUnion(m.mentionedUserIds)
            if view.threadInfo { shown.formUnion(m.recentReplierIds) }
        }
        for parent in view.parents.values { if let sender = parent.senderId { shown.insert(sender) } }
        try await users.loadUsers(shown)
        let pollIds = messages.compactMap(\.pollId)
        if !pollIds.isEmpty {
            view.polls = try await polls.renderPolls(Array(try await polls.pollRecords(pollIds).values), viewer: view.pollViewer,
                                                     now: nowMillis())
        }
        return messages.map { messageJSON($0, view) }
    }

    func render(_ message: MessageRecord, _ view: MessageView) async throws -> JSON {
        try await render([message], view)[0]
    }
}

extension RecordRenderer {
    func basicUser(_ userId: String, in channel: ChannelRecord?) -> JSON {
        let u = loadedUser(userId)
        var fields: [(String, JSON?)] = [
            ("user_id", .string(userId)),
            ("nickname", .string(u?.nickname ?? "")),
            ("profile_url", .string(u?.profileUrl ?? "")),
            ("is_active", .bool(u?.isActive ?? false)),
            ("require_auth_for_profile_image", false),
            ("metadata", .stringMap(u?.metadata ?? [:])),
        ]
        if let channel { fields.append(("role", .string(channel.isOperator(userId) ? "operator" : ""))) }
        return .obj(fields)
    }

    /// `privateFields`: `discovery_keys` (contact keys for finding friends) are for the user
    /// and admins only.
    func userJSON(_ u: UserRecord, unread: (messages: Int64, channels: Int64)?, privateFields: Bool) -> JSON {
        let online = isOnline(u.userId)
        return .obj([
            ("user_id", .string(u.userId)),
            ("nickname", .string(u.nickname)),
            ("profile_url", .string(u.profileUrl)),
            ("is_active", .bool(u.isActive)),
            ("is_online", .bool(online)),
            ("last_seen_at", .int(online ? 0 : u.lastSeenAt)),
            ("created_at", .int(u.createdAt)),
            ("has_ever_logged_in", .bool(u.hasEverLoggedIn)),
            ("metadata", .stringMap(u.metadata)),
            ("discovery_keys", privateFields ? .strings(u.discoveryKeys) : nil),
            ("preferred_languages", .strings(u.preferredLanguages)),
            ("require_auth_for_profile_image", false),
            ("is_hide_me_from_friends", false),
            ("is_shadow_blocked", false),
            ("locale", ""),
            ("unread_message_count", unread.map { .int($0.messages) }),
            ("unread_channel_count", unread.map { .int($0.channels) }),
        ])
    }

    func memberJSON(_ channel: ChannelRecord, _ m: MemberRecord, now: Int64) -> JSON {
        let u = loadedUser(m.userId)
        let mute = channel.mutes[m.userId].flatMap { $0.isActive(at: now) ? $0 : nil }
        let online = isOnline(m.userId)
        return .obj([
            ("user_id", .string(m.userId)),
            ("nickname", .string(u?.nickname ?? "")),
            ("profile_url", .string(u?.profileUrl ?? "")),
            ("is_active", .bool(u?.isActive ?? false)),
            ("require_auth_for_profile_image", false),
            ("metadata", .stringMap(u?.metadata ?? [:])),
            ("state", .string(m.state)),
            ("role", .string(channel.isOperator(m.userId) ? "operator" : "")),
            ("is_muted", .bool(mute != nil)),
            ("muted_end_at", mute.map { .int($0.endAt) }),
            ("muted_description", mute.map { .string($0.description) }),
            ("is_online", .bool(online)),
            ("last_seen_at", .int(online ? 0 : (u?.lastSeenAt ?? 0))),
            ("read_ts", .int(m.readTs)),
            ("delivered_ts", .int(m.deliveredTs)),
            ("push_enabled", true),
            ("is_blocked_by_me", false),
            ("is_blocking_me", false),
        ])
    }

    /// Members sorted by nickname then user id (the default member order).
    func sortedMembers(_ channel: ChannelRecord) -> [MemberRecord] {
        // Nicknames' order keys computed once each, not per comparison; keys compared as the
        // listings compare them (compareKeys), so the order is total and the same in both.
        channel.members.values.map { ([nameOrderKey(loadedUser($0.userId)?.nickname ?? ""), .string($0.userId)], $0) }
            .sorted { compareKeys($0.0, $1.0) < 0 }.map { $0.1 }
    }

    func isVisible(_ m: MessageRecord, to member: MemberRecord?) -> Bool {
        guard let member else { return true }
        return m.createdAt > member.tsMessageOffset
    }

    /// Messages counted as unread for a member (UnreadCounters.swift keeps them).
    func unreadCounts(_ channel: ChannelRecord, _ userId: String) -> (messages: Int64, mentions: Int64) {
        channel.unreadCounts(of: userId)
    }

    func lastMessage(_ channel: ChannelRecord, for userId: String?) -> MessageRecord? {
        guard channel.lastMessageId != 0, let m = channels.lastMessages[channel.url], m.id == channel.lastMessageId else { return nil }
        if let userId, let member = channel.members[userId], !isVisible(m, to: member) { return nil }
        return m
    }

    func channelJSON(_ c: ChannelRecord, _ view: ChannelView, now: Int64) -> JSON {
        var f = channelCommonFields(c)
        if view.includeOperators {
            f.append(("operators", .array(c.operatorIds.map { basicUser($0, in: c) })))
        }
        if view.showLastMessage, let last = lastMessage(c, for: view.viewer) {
            f.append(("last_message", messageJSON(last, MessageView())))
        }
        if view.showMember {
            f.append(("members", .array(sortedMembers(c).map { memberJSON(c, $0, now: now) })))
        }
        if view.showMetadata { f.append(("metadata", .stringMap(c.metadata))) }
        if view.showMetacounter { f.append(("metacounter", .intMap(c.metacounters))) }
        if view.showReadReceipt {
            f.append(("read_receipt", .intMap(c.members.values.reduce(into: [:]) { $0[$1.userId] = $1.readTs })))
        }
        if view.showDeliveryReceipt {
            f.append(("delivery_receipt", .intMap(c.members.values.reduce(into: [:]) { $0[$1.userId] = $1.deliveredTs })))
        }
        if let viewer = view.viewer {
            f.append(contentsOf: channelViewerFields(c, viewer, now: now))
        } else {
            f.append(("unread_message_count", 0))
            f.append(("unread_mention_count", 0))
        }
        return .obj(f)
    }

    /// The fields every rendering of the channel starts with, whoever views it.
    func channelCommonFields(_ c: ChannelRecord) -> [(String, JSON?)] {
        [
            ("channel_url", .string(c.url)),
            ("channel_type", "group"),
            ("name", .string(c.name)),
            ("cover_url", .string(absoluteURL(c.coverUrl))),
            ("custom_type", .string(c.customType)),
            ("data", .string(c.data)),
            ("created_at", .int(c.createdAt)),
            ("updated_at", .int(c.updatedAt)),
            ("created_by", c.createdBy.map { basicUser($0) }),
            ("is_distinct", .bool(c.isDistinct)),
            ("is_super", .bool(c.isSuper)),
            ("is_public", .bool(c.isPublic)),
            ("is_ephemeral", .bool(c.isEphemeral)),
            ("freeze", .bool(c.freeze)),
            ("is_broadcast", false),
            ("is_exclusive", false),
            ("is_access_code_required", false),
            ("is_discoverable", .bool(c.isPublic)),
            ("member_count", .int(Int64(c.members.count))),
            ("joined_member_count", .int(Int64(c.joinedCount))),
            ("max_length_message", 5000),
            ("message_survival_seconds", -1),
            ("pinned_message_ids", .array(c.pinnedMessageIds.map { .int($0) })),
        ]
    }

    /// The fields that end the channel as `viewer` sees it (their membership and read state).
    func channelViewerFields(_ c: ChannelRecord, _ viewer: String, now: Int64) -> [(String, JSON?)] {
        let member = c.members[viewer]
        let unread = unreadCounts(c, viewer)
        let mute = c.mutes[viewer].flatMap { $0.isActive(at: now) ? $0 : nil }
        var f: [(String, JSON?)] = [
            ("member_state", .string(member?.state ?? "none")),
            ("my_role", .string(c.isOperator(viewer) ? "operator" : "")),
            ("hidden_state", .string(member?.hiddenState ?? "unhidden")),
            ("is_hidden", .bool((member?.hiddenState ?? "unhidden") != "unhidden")),
            ("is_muted", .bool(mute != nil)),
            ("is_push_enabled", true),
            ("count_preference", "all"),
            ("unread_message_count", .int(unread.messages)),
            ("unread_mention_count", .int(unread.mentions)),
            ("user_last_read", .int(member?.readTs ?? 0)),
            ("ts_message_offset", .int(member?.tsMessageOffset ?? 0)),
        ]
        if let member {
            if member.invitedAt > 0 { f.append(("invited_at", .int(member.invitedAt))) }
            if let inviter = member.inviterId { f.append(("inviter", basicUser(inviter))) }
            if member.state == "joined" { f.append(("joined_ts", .int(member.joinedAt))) }
        }
        return f
    }

    func absoluteURL(_ url: String) -> String {
        url.hasPrefix("/") ? publicBaseURL + url : url
    }

    func messageJSON(_ m: MessageRecord, _ view: MessageView) -> JSON {
        let channel = loadedChannels[m.channelUrl]
        var f: [(String, JSON?)] = [
            ("message_id", .int(m.id)),
            ("type", .string(m.type)),
            ("message", .string(m.message)),
            ("channel_url", .string(m.channelUrl)),
            ("channel_type", "group"),
            ("created_at", .int(m.createdAt)),
            ("updated_at", .int(m.updatedAt)),
            ("user", m.senderId.map { basicUser($0, in: channel) }),
            ("req_id", .string(m.reqId)),
            ("custom_type", .string(m.customType)),
            ("data", .string(m.data)),
            ("mention_type", .string(m.mentionType)),
            ("mentioned_users", .array(m.mentionedUserIds.map { basicUser($0) })),
            ("is_removed", false),
            ("is_op_msg", .bool(m.isOpMsg)),
            ("silent", .bool(m.silent)),
            ("message_retention_hour", -1),
            ("message_survival_seconds", -1),
            ("translations", .obj((m.translations ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
            ("parent_message_id", .int(m.parentId)),
            ("is_reply_to_channel", .bool(m.isReplyToChannel)),
            ("is_pinned", .bool(channel?.pinnedMessageIds.contains(m.id) ?? false)),
        ]
        if let file = m.file {
            f.append(("file", .obj([
                ("url", .string(absoluteURL(file.url))), ("name", .string(file.name)),
                ("size", .int(file.size)), ("type", .string(file.type)),
                ("require_auth", .bool(file.fileId != nil)),
            ])))
            f.append(("thumbnails", .array(m.thumbnails.map { t in
                .obj([("url", .string(absoluteURL(t.url))), ("width", .int(t.width)), ("height", .int(t.height)),
                      ("real_width", .int(t.realWidth)), ("real_height", .int(t.realHeight))])
            })))
        }
        if view.metaArray {
            f.append(("sorted_metaarray", .array(m.sortedMetaarray.map { .obj([("key", .string($0.key)), ("value", .strings($0.value))]) })))
        }
        if view.reactions {
            f.append(("reactions", .array(m.reactions.map {
                .obj([("key", .string($0.key)), ("user_ids", .strings($0.userIds)), ("updated_at", .int($0.updatedAt))])
            })))
        }
        if view.threadInfo && m.replyCount > 0 {
            f.append(("thread_info", threadInfoJSON(m)))
        }
        if view.parentInfo && m.parentId != 0, let parent = view.parents[m.parentId] {
            f.append(("parent_message_info", .obj([
                ("message_id", .int(parent.id)), ("type", .string(parent.type)),
                ("message", .string(parent.message)), ("custom_type", .string(parent.customType)),
                ("ts", .int(parent.createdAt)),
                ("user", parent.senderId.map { basicUser($0) }),
            ])))
        }
        if let pollId = m.pollId, let poll = view.polls[pollId] {
            f.append(("poll", poll))
        }
        return .obj(f)
    }

    func threadInfoJSON(_ m: MessageRecord) -> JSON {
        .obj([
            ("reply_count", .int(m.replyCount)),
            ("last_replied_at", .int(m.lastRepliedAt)),
            ("updated_at", .int(m.threadUpdatedAt)),
            ("most_replies", .array(m.recentReplierIds.map { basicUser($0) })),
        ])
    }

    /// The channel as stored with an event, as of the event and without per-user fields. Each
    /// recipient receives the channel rendered for them instead (`framer`); this copy goes out
    /// only once the channel is gone.
    func eventChannelJSON(_ c: ChannelRecord, now: Int64) -> JSON {
        channelJSON(c, ChannelView(), now: now)
    }

    /// The channel as a webhook carries it: seen by no one in particular, with its members,
    /// metadata and metacounters.
    func webhookChannelJSON(_ c: ChannelRecord, now: Int64) -> JSON {
        channelJSON(c, ChannelView(showMember: true, showMetadata: true, showMetacounter: true), now: now)
    }

    /// The channel as `userId` receives it in an event. Someone who can view it (a member or
    /// invitee, anyone for a public channel) gets what `GET /v3/group_channels/{url}` with
    /// `show_member`, `show_metadata` and `show_metacounter` returns them; someone who cannot
    /// (they left, declined or were banned) learns only that: `member_state` is `none`, and
    /// neither members, metadata nor the last message are shown. `framer` splices the same
    /// fields from parts rendered once per event: keep the two in step.
    /// `withMembers` false: the same without `members` (what events that change no membership
    /// carry, §9.1).
    func recipientChannelJSON(_ c: ChannelRecord, for userId: String, now: Int64, withMembers: Bool = true) -> JSON {
        if canView(c, userId) {
            return channelJSON(c, ChannelView(viewer: userId, showMember: withMembers, showMetadata: true, showMetacounter: true),
                               now: now)
        }
        return channelJSON(c, ChannelView(viewer: userId, showLastMessage: false), now: now)
    }

    /// A member or invitee of the channel, or anyone for a public channel.
    func canView(_ c: ChannelRecord, _ userId: String) -> Bool { c.members[userId] != nil || c.isPublic }

    /// The SSE frame of an event for each recipient: the stored data with its `channel`
    /// rendered for that recipient from the current state. Live delivery runs right after the
    /// change is committed, so that is the state as of the event; a replay gets the newest
    /// state, which is what the client converges to anyway. Events without a channel, or
    /// whose channel is gone, go out as stored.
    ///
    /// A recipient's frame is `prefix + middle + suffix`: the closure writes the recipient's
    /// own fields into `middle` (emptied first; the caller reuses one buffer for every
    /// recipient) and returns the parts every recipient of the same kind shares, rendered once
    /// per event.
    func framer(_ event: StoredEvent, now: Int64) -> (_ userId: String, _ middle: inout String) -> (prefix: String, suffix: String) {
        let head = "id: \(event.id)\nevent: \(event.category)\ndata: "
        guard let data = event.parsedData, data["channel"] != nil,
            case .string(let url)? = data["channel_url"], let c = loadedChannels[url]
        else {
            let frame = head + event.data + "\n\n"
            return { _, middle in
                middle.removeAll(keepingCapacity: true)
                return (frame, "")
            }
        }
        // What every recipient's frame shares is serialized once per event, and each frame
        // spliced from those parts: the same bytes as serializing `data` with `channel`
        // replaced by `recipientChannelJSON` (same keys, same order, nothing repeated).
        let (before, after) = aroundChannel(event, data, head: head)
        // Live, an event that changes no membership carries the channel without `members`
        // and, for its recipients who see the channel, the members it changed (§9.1): what a
        // message costs on the wire does not grow with the channel.
        let memberless = Self.memberlessCategories.contains(event.category)
        var afterForViewers = after
        if memberless {
            var first = false
            let changed = Self.changedMemberIDs(event.category, data).compactMap { c.members[$0] }
            JSON.writeMember("changed_members", .array(changed.map { self.memberJSON(c, $0, now: now) }), first: &first,
                             to: &afterForViewers)
        }
        let suffix = "}" + after + "}\n\n"
        let suffixForViewers = "}" + afterForViewers + "}\n\n"
        var common = before + "{"
        var commonFirst = true
        JSON.writeFields(channelCommonFields(c), first: &commonFirst, to: &common)
        JSON.writeMember("operators", .array(c.operatorIds.map { basicUser($0, in: c) }), first: &commonFirst, to: &common)
        // The prefixes: for those who see the channel with its last message, for those who
        // see it without (their history starts after it), and for those who cannot see it.
        // Each is rendered once, for the first recipient who needs it. The last message and
        // the members and metadata follow other fields, so each starts with its comma.
        let last = self.lastMessage(c, for: nil)
        var withLast: String? = nil
        var withoutLast: String? = nil
        var sharedText: String? = nil
        func shared() -> String {
            if let sharedText { return sharedText }
            var text = ""
            var first = false
            JSON.writeFields([
                ("members", memberless ? nil : .array(self.sortedMembers(c).map { self.memberJSON(c, $0, now: now) })),
                ("metadata", .stringMap(c.metadata)),
                ("metacounter", .intMap(c.metacounters)),
            ], first: &first, to: &text)
            sharedText = text
            return text
        }
        return { userId, middle in
            middle.removeAll(keepingCapacity: true)
            let member = c.members[userId]
            self.writeChannelViewerFields(c, userId, member, now: now, to: &middle)
            guard member != nil || c.isPublic else { return (common, suffix) }
            if let last, self.isVisible(last, to: member) {
                if withLast == nil {
                    var text = common
                    var first = false
                    JSON.writeMember("last_message", self.messageJSON(last, MessageView()), first: &first, to: &text)
                    text += shared()
                    withLast = text
                }
                return (withLast!, suffixForViewers)
            }
            if withoutLast == nil { withoutLast = common + shared() }
            return (withoutLast!, suffixForViewers)
        }
    }

    /// The event's data around its `channel` value: `head` and what precedes the value, and
    /// what follows it up to the closing brace.
    private func aroundChannel(_ event: StoredEvent, _ data: JSONObject, head: String) -> (before: String, after: String) {
        var before: String, after: String
        if let range = event.channelRange, event.fields != nil {
            // Live: `data` is `fields` serialized, and `range` the channel's value in it: the
            // members around it are taken as they were written.
            let utf8 = event.data.utf8
            let start = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
            let end = utf8.index(utf8.startIndex, offsetBy: range.upperBound)
            let last = utf8.index(before: utf8.endIndex)  // the closing brace
            before = head + String(event.data[..<start])
            after = String(event.data[end..<last])
        } else {
            before = head + "{"
            after = ""
            var first = true
            var seenChannel = false
            for (k, value) in data.entries {
                if k == "channel" {
                    if !first { before += "," }
                    first = false
                    JSON.writeString(k, to: &before)
                    before += ":"
                    seenChannel = true
                } else if seenChannel {
                    JSON.writeMember(k, value, first: &first, to: &after)
                } else {
                    JSON.writeMember(k, value, first: &first, to: &before)
                }
            }
        }
        return (before, after)
    }

    /// What `JSON.writeFields(channelViewerFields(c, viewer, now: now), first: false)` writes
    /// (each field with its comma), written directly: once per recipient of every event.
    func writeChannelViewerFields(_ c: ChannelRecord, _ viewer: String, _ member: MemberRecord?, now: Int64,
                                  to out: inout String) {
        let hidden = member?.hiddenState ?? "unhidden"
        out += ",\"member_state\":"
        JSON.writeString(member?.state ?? "none", to: &out)
        out += c.isOperator(viewer) ? ",\"my_role\":\"operator\",\"hidden_state\":" : ",\"my_role\":\"\",\"hidden_state\":"
        JSON.writeString(hidden, to: &out)
        out += hidden != "unhidden" ? ",\"is_hidden\":true" : ",\"is_hidden\":false"
        let muted = c.mutes.isEmpty ? false : c.mutes[viewer].map { $0.isActive(at: now) } ?? false
        out += muted ? ",\"is_muted\":true" : ",\"is_muted\":false"
        let joined = member?.state == "joined"
        let unread = c.unreadCounts(of: member)
        out += ",\"is_push_enabled\":true,\"count_preference\":\"all\",\"unread_message_count\":"
        out += String(unread.messages)
        out += ",\"unread_mention_count\":"
        out += String(unread.mentions)
        out += ",\"user_last_read\":"
        out += String(member?.readTs ?? 0)
        out += ",\"ts_message_offset\":"
        out += String(member?.tsMessageOffset ?? 0)
        if let member {
            if member.invitedAt > 0 {
                out += ",\"invited_at\":"
                out += String(member.invitedAt)
            }
            if let inviter = member.inviterId {
                var first = false
                JSON.writeMember("inviter", basicUser(inviter), first: &first, to: &out)
            }
            if joined {
                out += ",\"joined_ts\":"
                out += String(member.joinedAt)
            }
        }
    }

    /// Categories whose change leaves the member set and every member's profile, role and
    /// mute as they were: live, their channel comes without `members`, with `changed_members`
    /// beside it (PROTOCOL.md §9.1). A replay renders the whole channel instead.
    static let memberlessCategories: Set<String> = [
        "message_received", "message_updated", "message_deleted", "mention", "reaction_updated", "thread_info_updated",
        "read_status", "delivery_status", "typing_status", "poll_updated", "poll_voted", "poll_deleted",
    ]

    /// Whose member render such an event changed: a new message marks its sender read; a
    /// read or delivery receipt moves its user's `read_ts` / `delivered_ts`.
    static func changedMemberIDs(_ category: String, _ data: JSONObject) -> [String] {
        func userID(_ value: JSON?) -> String? {
            guard case .object(let fields)? = value, case .string(let id)? = fields["user_id"] else { return nil }
            return id
        }
        switch category {
        case "message_received", "mention":
            guard case .object(let message)? = data["message"], let sender = userID(message["user"]) else { return [] }
            return [sender]
        case "read_status", "delivery_status":
            return userID(data["user"]).map { [$0] } ?? []
        default:
            return []
        }
    }

    /// The frame of a replayed event for one recipient. A replay renders the newest state of
    /// each channel (see `framer`), the same for every replayed event of the channel: only
    /// the channel's first replayed event carries it (PROTOCOL.md §9.1), so replaying
    /// thousands of events of a few channels costs neither thousands of channel renders nor
    /// thousands of copies of their member lists on the wire. When none of the channel's
    /// replayed events changes its membership, that render leaves out `members` and lists
    /// the members those events changed (`ReplayPlan`), as live events do: a reconnecting
    /// member of a large channel does not fetch its whole member list again.
    /// `data` is the event's data, parsed (`StoredEvent.parsedData`).
    func replayFrame(_ event: StoredEvent, data parsed: JSONObject?, for userId: String, now: Int64,
                     plan: inout ReplayPlan) -> String {
        let head = "id: \(event.id)\nevent: \(event.category)\ndata: "
        guard var data = parsed, data["channel"] != nil, case .string(let url)? = data["channel_url"], let c = loadedChannels[url]
        else {
            return head + event.data + "\n\n"
        }
        if plan.rendered.insert(url).inserted {
            if canView(c, userId), let changed = plan.changedMembers[url] {
                data["channel"] = recipientChannelJSON(c, for: userId, now: now, withMembers: false)
                data["changed_members"] = .array(changed.compactMap { c.members[$0] }.map { memberJSON(c, $0, now: now) })
            } else {
                data["channel"] = recipientChannelJSON(c, for: userId, now: now)
            }
        } else {
            data["channel"] = nil
        }
        return head + JSON.object(data).serialized() + "\n\n"
    }
}

/// How a replay renders each channel's first event (PROTOCOL.md §9.1), worked out from all the
/// replayed events before the first frame is written.
struct ReplayPlan {
    /// The channels whose first replayed event has been written.
    var rendered: Set<String> = []
    /// For each channel whose replayed events all change no membership (`memberlessCategories`),
    /// the members any of them changed (`changedMemberIDs`), in order of first change; a
    /// channel absent here gets the full render, members included.
    private(set) var changedMembers: [String: [String]] = [:]

    init<Events: Sequence>(_ events: Events) where Events.Element == (StoredEvent, JSONObject?) {
        var full = Set<String>()
        var listed: [String: Set<String>] = [:]
        for (event, fields) in events {
            guard let fields, case .string(let url)? = fields["channel_url"], !full.contains(url) else { continue }
            guard RecordRenderer.memberlessCategories.contains(event.category) else {
                full.insert(url)
                changedMembers[url] = nil
                continue
            }
            changedMembers[url, default: []].append(contentsOf: RecordRenderer.changedMemberIDs(event.category, fields).filter {
                listed[url, default: []].insert($0).inserted
            })
        }
    }
}
