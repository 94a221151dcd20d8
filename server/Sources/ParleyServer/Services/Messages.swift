import Foundation

// Messages: send (JSON or multipart), list, get, update, delete, reactions, pin, copy,
// sorted meta arrays (PROTOCOL.md §7).

struct MessageFilter {
    var messageType: String?
    var customTypes: [String]?
    var senderIds: [String]?
    var replyType = "NONE"
    var parentId: Int64?

    static func parse(_ i: Input, defaultReplyType: String = "NONE") throws -> MessageFilter {
        var f = MessageFilter()
        if i.has("message_type") {
            let t = try i.enumValue("message_type", ["MESG", "FILE", "ADMM", ""], default: "")
            f.messageType = t.isEmpty ? nil : t
        }
        if let types = try i.stringList("custom_types"), !types.isEmpty, !types.contains("*") { f.customTypes = types }
        var senders = try i.stringList("sender_ids") ?? []
        senders += try i.stringList("sender_id") ?? []
        if !senders.isEmpty { f.senderIds = senders }
        f.replyType = try i.enumValue("include_reply_type", ["NONE", "ALL", "ONLY_REPLY_TO_CHANNEL"], default: defaultReplyType)
        f.parentId = try i.int("parent_message_id", min: 1)
        return f
    }
}

extension MessageView {
    static func parse(_ i: Input) throws -> MessageView {
        MessageView(
            reactions: try i.bool("include_reactions", default: false),
            threadInfo: try i.bool("include_thread_info", default: false),
            parentInfo: try i.bool("include_parent_message_info", default: false),
            metaArray: try i.bool("with_sorted_meta_array") ?? i.bool("include_meta_array", default: false))
    }
}

// Message rules, shared by the services (Services/Interfaces.swift).
extension MessageRecords where Self: ChannelRecords {
    /// The member whose history offset applies to a read (session user, or admin's `user_id`).
    func readerMember(_ c: ChannelRecord, _ ctx: Ctx) throws -> MemberRecord? {
        if ctx.caller.isAdmin {
            guard let uid = try ctx.input.string("user_id", maxBytes: 80) else { return nil }
            return c.members[uid]
        }
        try requireJoined(c, ctx)
        return c.members[ctx.caller.userId!]
    }

    /// The visible messages of a channel matching a filter, as a query condition.
    func messageCondition(_ url: String, _ filter: MessageFilter, reader: MemberRecord?) -> SQLCondition {
        MessageQueries.condition(channel: url, filter: filter, visibleAfter: reader?.tsMessageOffset)
    }

    func message(_ c: ChannelRecord, _ idText: String) async throws -> MessageRecord {
        guard let id = Int64(idText), id > 0 else { throw APIError.invalid("message_id", "must be a positive integer.") }
        return try await message(c, id)
    }

    func message(_ c: ChannelRecord, _ id: Int64) async throws -> MessageRecord {
        guard let m = try await messageRecord(id), m.channelUrl == c.url else { throw APIError.notFound("Message \(id)") }
        return m
    }

    func requireCanSend(_ c: ChannelRecord, sender: String, ctx: Ctx) throws {
        guard c.isJoined(sender) else {
            if activeBan(c, sender, ctx.now) != nil { throw APIError.banned }
            throw APIError.forbidden("the sender is not a member of this channel.")
        }
        if activeMute(c, sender, ctx.now) != nil { throw APIError.muted }
        if c.freeze && !c.isOperator(sender) && !ctx.caller.isAdmin { throw APIError.frozen }
    }

    func requireSenderOrOperator(_ c: ChannelRecord, _ m: MessageRecord, _ ctx: Ctx) throws {
        if ctx.caller.isAdmin { return }
        guard let me = ctx.caller.userId else { throw APIError.forbidden("no user.") }
        if m.senderId == me && c.isJoined(me) { return }
        if c.isOperator(me) && c.isJoined(me) { return }
        throw APIError.forbidden("only the sender or an operator may change this message.")
    }

    /// Recomputes the channel's last message after a delete.
    func refreshLastMessage(_ c: inout ChannelRecord) async throws {
        c.lastMessageId = try await lastCountableMessage(channel: c.url)?.id ?? 0
    }
}

extension MessageRecords where Self: ChannelRecords & UserRecords & EventEmitter & Rendering {
    /// A new message shows the channel again to members who hid it allowing auto-unhide.
    func unhideOnNewMessage(_ c: inout ChannelRecord, now: Int64) {
        // The few hidden members are picked out before sorting (the order of their events).
        let hidden = c.members.values.filter { $0.hiddenState == "hidden_allow_auto_unhide" }.map(\.userId)
        for uid in hidden.sorted() {
            unhideMember(&c, uid, now: now)
        }
    }
}

enum Messages {
    /// What the message service uses of a request (Services/Interfaces.swift).
    typealias Needs = UserRecords & ChannelRecords & MessageRecords & PollRecords & EventEmitter & Rendering

    /// Users a message mentions by name, at most: of the ids given, the first this many
    /// distinct ones are mentioned and the rest are not (PROTOCOL.md §7.1).
    static let mentionLimit = 10

    /// The first `mentionLimit` distinct ids given, in the order first named.
    static func mentionable(_ ids: [String]) -> [String] {
        var seen = Set<String>()
        var first: [String] = []
        for id in ids where first.count < mentionLimit && seen.insert(id).inserted { first.append(id) }
        return first
    }

    /// Mentioned ids as stored: of the `mentionable` ids, the users that exist (loaded).
    static func mentioned(_ ids: [String], _ s: some Needs) async throws -> [String] {
        let first = mentionable(ids)
        try await s.loadUsers(first)
        return first.filter { s.loadedUser($0) != nil }
    }

    /// What a send asks for, read from its body, before any number is taken.
    struct SendRequest {
        var type: String
        var sender: String?
        var reqId: String
        var text = ""
        var customType = ""
        var data = ""
        var mentionType = "users"
        var mentioned: [String] = []
        var metaArray: [MetaArrayItem] = []
        var parentId: Int64 = 0
        var replyToChannel = false
        var silent = false
        var markAsRead = true
        var poll: PollRecord? = nil
        var createdAtGiven: Int64? = nil
        var file: FileInfoRecord? = nil
        var thumbnails: [ThumbnailRecord] = []
        /// Uploaded bytes, stored once the message has its id.
        var uploads: [(FileRecord, [UInt8])] = []
    }

    static func send(_ s: some Needs & PushRecords & TranslationRecords, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        var upload: MultipartPart? = nil
        var input = ctx.input
        if ctx.isMultipart {
            let form = try UploadForm(ctx, fileFields: ["file"], jsonFields: ["thumbnails", "sorted_metaarray", "mentioned_user_ids"],
                                      limit: s.uploadLimit)
            upload = form.files["file"]
            input = form.input
        }
        let type = try input.enumValue("message_type", ["MESG", "FILE", "ADMM"], default: "", caseInsensitive: false)
        if type.isEmpty { throw APIError.missing("message_type") }
        let sender = try await sendingUser(s, type: type, input, ctx)
        let reqId = try input.string("req_id", maxBytes: 128) ?? input.string("dedup_id", maxBytes: 128) ?? ""
        if !reqId.isEmpty {
            switch try await s.earlierSend(channel: c.url, sender: sender, requestId: reqId) {
            case .stored(let id)?:
                if let m = try await s.messageRecord(id) { return .json(try await s.render(m, .full)) }
            case .deleted(let id)?:
                throw APIError.sentThenDeleted(id)
            case nil:
                break
            }
        }
        if let sender { try s.requireCanSend(c, sender: sender, ctx: ctx) }
        var request = SendRequest(type: type, sender: sender, reqId: reqId)
        try await readContent(s, input, into: &request, channel: c, ctx)
        if type == "FILE" { try readFile(input, upload: upload, into: &request, channel: c.url, ctx) }
        let push = try PushDeliveryRequest(input)
        let languages = try Translation.languagesForSend(input, type: type, s)
        let m = try await storeNewMessage(s, request, in: &c, ctx)
        let answer = try await announceNewMessage(s, m, in: c, ctx)
        try await Push.notify(s, m, in: c, request: push, now: ctx.now)
        Translation.queueForNewMessage(s, m, languages: languages, now: ctx.now)
        return .json(answer)
    }

    /// Who sends: nobody for an admin message, the session's user, or the admin's `user_id`.
    private static func sendingUser(_ s: some Needs, type: String, _ i: Input, _ ctx: Ctx) async throws -> String? {
        if type == "ADMM" {
            try ctx.requireAdmin()
            return nil
        }
        if let me = ctx.caller.userId {
            if let given = try i.string("user_id", maxBytes: 80), given != me { throw APIError.forbidden("a session user can only send as themselves.") }
            return me
        }
        guard let given = try i.string("user_id", maxBytes: 80) else { throw APIError.missing("user_id") }
        _ = try await s.user(given)
        return given
    }

    /// The text, mentions, thread, poll and flags of a send.
    private static func readContent(_ s: some Needs, _ i: Input, into r: inout SendRequest, channel c: ChannelRecord,
                                    _ ctx: Ctx) async throws {
        if r.type != "FILE" {
            r.text = try i.requiredString("message", maxBytes: 65535)
            if r.text.isEmpty { throw APIError.invalid("message", "must not be empty.") }
        } else {
            r.text = try i.string("message", maxBytes: 65535) ?? ""
        }
        r.customType = try i.string("custom_type", maxBytes: 128) ?? ""
        r.data = try i.string("data") ?? ""
        r.mentionType = try i.enumValue("mention_type", ["users", "channel"], default: "users")
        r.mentioned = try await mentioned(i.stringList("mentioned_user_ids") ?? [], s)
        r.metaArray = try parseMetaArray(i) ?? []
        r.parentId = try i.int("parent_message_id", min: 0) ?? 0
        r.replyToChannel = try i.bool("is_reply_to_channel", default: false)
        r.silent = try i.bool("is_silent", default: false)
        r.markAsRead = try i.bool("mark_as_read", default: true)
        for flag in ["send_push", "include_poll_details", "require_auth"] { _ = try i.bool(flag) }
        if let pollId = try i.int("poll_id", min: 1) {
            r.poll = try await attachablePoll(s, pollId, to: c, sender: r.sender, ctx: ctx)
        }
        // Test hook, admin only: a creation time from the newest message's
        // (`lastMessageTs(in:)`) to now, so that messages can share a millisecond on purpose;
        // ids stay in time order.
        if ctx.caller.isAdmin, let given = try i.int("created_at") {
            let newest = s.lastMessageTs(in: c.url)
            if given < newest || given > ctx.now {
                throw APIError.invalid("created_at", "must be from the newest message's created_at (\(newest)) to now.")
            }
            r.createdAtGiven = given
        } else {
            _ = try i.int("created_at")
        }
        if r.parentId != 0 {
            guard let parent = try await s.messageRecord(r.parentId), parent.channelUrl == c.url else {
                throw APIError.invalid("parent_message_id", "does not name a message of this channel.")
            }
            if parent.parentId != 0 { throw APIError.invalid("parent_message_id", "must name a top-level message.") }
        }
    }

    /// A file message's file: uploaded (with the thumbnails made of it) or named by URL.
    private static func readFile(_ i: Input, upload: MultipartPart?, into r: inout SendRequest, channel url: String, _ ctx: Ctx) throws {
        r.thumbnails = try parseThumbnails(i)
        let boxes = try Images.requestedBoxes(i)
        let filesObject = try i.object("files")
        func fromFiles(_ k: String) -> JSON? { filesObject?[k] }
        // The reference SDK's spellings (`file_url`, `mime_type`) stand beside the platform's.
        var fileURL = try i.string("url", maxBytes: 2048) ?? i.string("file_url", maxBytes: 2048)
        var name = try i.string("file_name", maxBytes: 1024)
        var size = try i.int("file_size", min: 0)
        var mime = try i.string("file_type", maxBytes: 256) ?? i.string("mime_type", maxBytes: 256)
        if case .string(let v)? = fromFiles("url") ?? fromFiles("file_url"), fileURL == nil { fileURL = v }
        if case .string(let v)? = fromFiles("file_name"), name == nil { name = v }
        if case .int(let v)? = fromFiles("file_size"), size == nil { size = v }
        if case .string(let v)? = fromFiles("file_type") ?? fromFiles("mime_type"), mime == nil { mime = v }
        guard let upload else {
            guard let fileURL, !fileURL.isEmpty else { throw APIError.missing("url") }
            r.file = FileInfoRecord(url: fileURL, name: name ?? "", size: size ?? 0, type: mime ?? "", fileId: nil)
            return
        }
        let fileId = randomHex(16)
        let fileName = name ?? upload.filename ?? "file"
        let record = FileRecord(id: fileId, channelUrl: url, messageId: 0, name: fileName,
                                type: mime ?? upload.contentType ?? "application/octet-stream",
                                size: Int64(upload.data.count))
        r.uploads.append((record, upload.data))
        r.file = FileInfoRecord(url: "/v3/files/\(fileId)/\(fileName.isEmpty ? "file" : percentEncodePathSegment(fileName))", name: fileName,
                                size: record.size, type: record.type, fileId: fileId)
        for (made, record) in Files.thumbnailFiles(ctx.prepared, of: upload.data, boxes: boxes, channel: url) {
            r.uploads.append((record, made.bytes))
            r.thumbnails.append(Files.thumbnailRecord(made, record))
        }
    }

    /// Numbers the message and writes it, its files, its poll and the channel it changes.
    private static func storeNewMessage(_ s: some Needs, _ r: SendRequest, in c: inout ChannelRecord, _ ctx: Ctx) async throws -> MessageRecord {
        let (id, createdAt) = try await s.takeMessageNumbers(in: c.url, at: r.createdAtGiven ?? ctx.now)
        let m = MessageRecord(
            id: id, channelUrl: c.url, type: r.type, message: r.text, senderId: r.sender, reqId: r.reqId,
            customType: r.customType, data: r.data, createdAt: createdAt, updatedAt: 0, mentionType: r.mentionType,
            mentionedUserIds: r.mentioned, isOpMsg: r.sender.map { c.isOperator($0) } ?? false, silent: r.silent,
            parentId: r.parentId, isReplyToChannel: r.parentId != 0 && r.replyToChannel, file: r.file,
            thumbnails: r.thumbnails, sortedMetaarray: r.metaArray, reactions: [], replyCount: 0, lastRepliedAt: 0,
            threadUpdatedAt: 0, recentReplierIds: [], changeSeq: 0, changedAt: 0, pollId: r.poll?.id)
        for (upload, bytes) in r.uploads {
            var record = upload
            record.messageId = id
            try await s.store(record, bytes: bytes)
        }
        if !c.isEphemeral {
            try await s.save(m)
            s.countNewMessage(m, in: &c)
            if (r.parentId == 0 || m.isReplyToChannel) && !r.silent { c.lastMessageId = id }
        }
        s.unhideOnNewMessage(&c, now: ctx.now)
        if let sender = r.sender, r.markAsRead, c.members[sender] != nil {
            c.members[sender]!.readTs = max(c.members[sender]!.readTs, createdAt)
            s.touchMember(&c, sender, ctx.now)
        }
        s.touch(&c, ctx.now)
        try await s.save(c)
        if var poll = r.poll {
            poll.messageId = id
            s.touch(&poll, ctx.now)
            try await s.save(poll)
        }
        return m
    }

    /// The new message's events (received, mentions, the thread's parent changed); returns
    /// the message as the answer shows it.
    private static func announceNewMessage(_ s: some Needs, _ m: MessageRecord, in c: ChannelRecord, _ ctx: Ctx) async throws -> JSON {
        let messageJSON = try await s.render(m, .full)
        s.emitMessageEvent("message_received", c, about: m, fields: [("message", messageJSON)], channelChanged: true, now: ctx.now)
        let joined = s.joinedIds(c)
        let mentionTargets = (m.mentionType == "channel" ? joined.subtracting([m.senderId ?? ""]) : Set(m.mentionedUserIds).intersection(joined))
            .filter { s.isVisible(m, to: c.members[$0]) }
        if !mentionTargets.isEmpty {
            s.emit("mention", channelUrl: c.url, to: mentionTargets, fields: [
                ("channel", s.eventChannelJSON(c, now: ctx.now)), ("message", messageJSON),
            ], now: ctx.now)
        }
        if m.parentId != 0, !c.isEphemeral, var parent = try await s.messageRecord(m.parentId) {
            parent.replyCount += 1
            parent.lastRepliedAt = m.createdAt
            parent.threadUpdatedAt = ctx.now
            if let sender = m.senderId {
                parent.recentReplierIds.removeAll { $0 == sender }
                parent.recentReplierIds.insert(sender, at: 0)
                if parent.recentReplierIds.count > 10 { parent.recentReplierIds.removeLast() }
            }
            s.touch(&parent, ctx.now)
            try await s.save(parent)
            // A send loads no member's user it does not show (FirstReads.leavesMembersOut).
            try await s.loadUsers(parent.recentReplierIds)
            s.emitMessageEvent("thread_info_updated", c, about: parent, fields: [
                ("parent_message_id", .int(m.parentId)), ("thread_info", s.threadInfoJSON(parent)),
            ], channelChanged: false, now: ctx.now)
        }
        return messageJSON
    }

    /// The poll a new message may carry: one of the channel's, carried by no message yet,
    /// sent by its creator or an operator (or the admin); ephemeral messages are not stored.
    static func attachablePoll(_ s: some Needs, _ id: Int64, to c: ChannelRecord, sender: String?, ctx: Ctx) async throws -> PollRecord {
        guard let p = try await s.pollRecord(id), p.channelUrl == c.url else {
            throw APIError.invalid("poll_id", "does not name a poll of this channel.")
        }
        if p.messageId != 0 { throw APIError.invalid("poll_id", "is carried by message \(p.messageId) already.") }
        if c.isEphemeral { throw APIError.invalid("poll_id", "cannot be sent in an ephemeral channel.") }
        if !ctx.caller.isAdmin, let sender, p.createdBy != sender && !c.isOperator(sender) {
            throw APIError.forbidden("only the poll's creator or an operator may send it.")
        }
        return p
    }

    /// The most messages at exactly `message_ts` a listing returns as its anchor (only the
    /// Api-Token's `created_at` test hook can store more in one millisecond).
    static let messagesAtAnchorLimit = 1_000

    static func list(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        let i = ctx.input
        let filter = try MessageFilter.parse(i)
        var view = try MessageView.parse(i)
        view.pollViewer = reader?.userId
        let ts = try i.int("message_ts")
        // 0 means "no message id" (the platform SDK always sends both anchors).
        let anchorId = try i.int("message_id", min: 0).flatMap { $0 == 0 ? nil : $0 }
        let include = try i.bool("include", default: true)
        let reverse = try i.bool("reverse", default: false)
        let anchorIsNow = ts == nil && anchorId == nil
        let prevLimit = Int(try i.int("prev_limit", min: 0, max: 200) ?? 15)
        let nextLimit = Int(try i.int("next_limit", min: 0, max: 200) ?? (anchorIsNow ? 0 : 15))
        for flag in ["including_removed", "include_poll_details", "show_subchannel_messages_only"] { _ = try i.bool(flag) }
        _ = try i.enumValue("operator_filter", ["all", "operator", "nonoperator"], default: "all")

        let base = s.messageCondition(c.url, filter, reader: reader)
        let prevBounds: [KeyBound], nextBounds: [KeyBound]
        var anchorItems: [MessageRecord] = []
        if let anchorId {
            let anchorTs: Int64
            if let ts { anchorTs = ts } else { anchorTs = try await s.message(c, String(anchorId)).createdAt }
            let key = MessageKey(anchorTs, anchorId)
            prevBounds = [.below(key, inclusive: false)]
            nextBounds = [.above(key, inclusive: false)]
            if include {
                anchorItems = try await s.messagePage(
                    base, [.below(key, inclusive: true), .above(key, inclusive: true)], descending: false, limit: 1)
            }
        } else {
            // Without a message id, the messages at exactly `message_ts` are the anchor: with
            // `include` they come between the sides, counted in neither limit (as the
            // reference's `previousResultSize` counts the messages before the timestamp).
            let t = ts ?? Int64.max
            prevBounds = [.below(MessageKey(t, .min), inclusive: false)]
            nextBounds = [.above(MessageKey(t, .max), inclusive: false)]
            if include && ts != nil {
                anchorItems = try await s.messagePage(
                    base, [.above(MessageKey(t, .min), inclusive: true), .below(MessageKey(t, .max), inclusive: true)],
                    descending: false, limit: Self.messagesAtAnchorLimit)
            }
        }
        // One more than asked on each side tells whether there are more.
        var prev = try await s.messagePage(base, prevBounds, descending: true, limit: prevLimit + 1)
        let hasPrev = prev.count > prevLimit
        if hasPrev { prev.removeFirst() }
        var next = try await s.messagePage(base, nextBounds, descending: false, limit: nextLimit + 1)
        let hasNext = next.count > nextLimit
        if hasNext { next.removeLast() }
        var page = prev + anchorItems + next
        if reverse { page.reverse() }
        return .json(.obj([
            ("messages", .array(try await s.render(page, view))),
            ("has_prev", .bool(hasPrev)),
            ("has_next", .bool(hasNext)),
            ("is_continuous_prev_messages", .bool(prevLimit > 0)),
            ("is_continuous_next_messages", .bool(nextLimit > 0)),
        ]))
    }

    static func get(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        let m = try await s.message(c, ctx.messageId)
        if !s.isVisible(m, to: reader) { throw APIError.notFound("Message \(m.id)") }
        for flag in ["include_reactions", "include_thread_info", "include_parent_message_info", "include_poll_details", "with_sorted_meta_array"] {
            _ = try ctx.input.bool(flag)
        }
        var view = MessageView.full
        view.pollViewer = reader?.userId
        return .json(try await s.render(m, view))
    }

    static func totalCount(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        // Every stored message the reader may see, replies included.
        let all = s.messageCondition(c.url, MessageFilter(replyType: "ALL"), reader: reader)
        return .json(.obj([("total", .int(try await s.messageCount(all, [])))]))
    }

    /// Records a message change: touches it (message changelogs) and, when `channelChanged`
    /// (the channel renders it as `last_message`, or unread mention counts moved), the
    /// channel; then, unless the caller sends its own event, tells the members.
    static func announceUpdate(_ s: some Needs, _ c: inout ChannelRecord, _ m: inout MessageRecord, now: Int64,
                               event: Bool = true, channelChanged: Bool) async throws {
        s.touch(&m, now)
        try await s.save(m)
        if channelChanged {
            s.touch(&c, now)
            try await s.save(c)
        }
        if event {
            s.emitMessageEvent("message_updated", c, about: m, fields: [("message", try await s.render(m, .full))],
                               channelChanged: channelChanged, now: now)
        }
    }

    static func update(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        var m = try await s.message(c, ctx.messageId)
        let old = m
        try s.requireSenderOrOperator(c, m, ctx)
        let i = ctx.input
        if i.has("message_type") {
            let t = try i.enumValue("message_type", ["MESG", "FILE", "ADMM"], default: m.type, caseInsensitive: false)
            if t != m.type { throw APIError.invalid("message_type", "does not match the message (\(m.type)).") }
        }
        let text = try i.string("message", maxBytes: 65535)
        if let text, text.isEmpty, m.type != "FILE" { throw APIError.invalid("message", "must not be empty.") }
        let customType = try i.string("custom_type", maxBytes: 128)
        let data = try i.string("data")
        let mentionType = i.has("mention_type") ? try i.enumValue("mention_type", ["users", "channel"], default: "users") : nil
        let mentioned = try i.stringList("mentioned_user_ids")
        let metaArray = try parseMetaArray(i)
        let url = try i.string("url", maxBytes: 2048)
        if url != nil && m.type != "FILE" { throw APIError.invalid("url", "applies to file messages only.") }
        if let text, text != m.message {
            m.message = text
            m.translations = nil  // of the old text
        }
        if let customType { m.customType = customType }
        if let data { m.data = data }
        if let mentionType { m.mentionType = mentionType }
        if let mentioned { m.mentionedUserIds = try await Self.mentioned(mentioned, s) }
        if let metaArray { m.sortedMetaarray = metaArray }
        if let url, m.file != nil { m.file!.url = url; m.file!.fileId = nil }
        m.updatedAt = ctx.now
        // Mentions count in members' unread mention counts, wherever the message is.
        let mentionsChanged = mentionType != nil || mentioned != nil
        if mentionsChanged { s.recountMentions(from: old, to: m, in: &c) }
        try await announceUpdate(s, &c, &m, now: ctx.now, channelChanged: c.lastMessageId == m.id || mentionsChanged)
        return .json(try await s.render(m, .full))
    }

    static func delete(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        let m = try await s.message(c, ctx.messageId)
        try s.requireSenderOrOperator(c, m, ctx)
        try await s.deletePoll(carriedBy: m, in: c, now: ctx.now)
        try await s.deleteMessage(m, at: ctx.now)
        s.uncountMessage(m, in: &c)
        // A copy (`copy`) names the original's stored files: only the message they were uploaded with deletes them.
        for fileId in [m.file?.fileId].compactMap({ $0 }) + m.thumbnails.compactMap(\.fileId) {
            if try await s.file(fileId)?.messageId == m.id { try await s.deleteFile(fileId) }
        }
        c.pinnedMessageIds.removeAll { $0 == m.id }
        if c.lastMessageId == m.id { try await s.refreshLastMessage(&c) }
        s.touch(&c, ctx.now)
        try await s.save(c)
        // Every member hears of it: it may have been their last message or counted as unread.
        s.emitMessageEvent("message_deleted", c, about: nil, fields: [("message_id", .int(m.id))], channelChanged: true, now: ctx.now)
        if m.parentId != 0, var parent = try await s.messageRecord(m.parentId) {
            parent.replyCount = max(0, parent.replyCount - 1)
            parent.threadUpdatedAt = ctx.now
            let remaining = try await s.replies(to: parent.id)
            parent.lastRepliedAt = remaining.last?.createdAt ?? 0
            parent.recentReplierIds = parent.recentReplierIds.filter { uid in remaining.contains { $0.senderId == uid } }
            s.touch(&parent, ctx.now)
            try await s.save(parent)
            try await s.loadUsers(parent.recentReplierIds)
            s.emitMessageEvent("thread_info_updated", c, about: parent, fields: [
                ("parent_message_id", .int(parent.id)), ("thread_info", s.threadInfoJSON(parent)),
            ], channelChanged: false, now: ctx.now)
        }
        return .json(.obj([]))
    }

    static func listReactions(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        _ = try s.readerMember(c, ctx)
        let m = try await s.message(c, ctx.messageId)
        return .json(.obj([("reactions", .array(m.reactions.map {
            .obj([("key", .string($0.key)), ("user_ids", .strings($0.userIds)), ("updated_at", .int($0.updatedAt))])
        }))]))
    }

    static func react(_ s: some Needs, _ ctx: inout Ctx, add: Bool) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        var m = try await s.message(c, ctx.messageId)
        let uid = try ctx.requiredActingUser()
        let key = try ctx.input.requiredString("reaction", maxBytes: 128)
        if key.isEmpty { throw APIError.invalid("reaction", "must not be empty.") }
        guard c.isJoined(uid) else { throw APIError.forbidden("the user is not a member of this channel.") }
        if let idx = m.reactions.firstIndex(where: { $0.key == key }) {
            if add {
                if !m.reactions[idx].userIds.contains(uid) { m.reactions[idx].userIds.append(uid) }
            } else {
                m.reactions[idx].userIds.removeAll { $0 == uid }
            }
            m.reactions[idx].updatedAt = ctx.now
            if m.reactions[idx].userIds.isEmpty { m.reactions.remove(at: idx) }
        } else if add {
            m.reactions.append(ReactionRecord(key: key, userIds: [uid], updatedAt: ctx.now))
        }
        // Reactions are not part of a channel's `last_message`: the channel does not change.
        try await announceUpdate(s, &c, &m, now: ctx.now, event: false, channelChanged: false)
        let op = add ? "ADD" : "DELETE"
        s.emitMessageEvent("reaction_updated", c, about: m, fields: [
            ("reaction", .obj([("message_id", .int(m.id)), ("key", .string(key)), ("user_id", .string(uid)),
                               ("operation", .string(op)), ("updated_at", .int(ctx.now))])),
        ], channelChanged: false, now: ctx.now)
        return .json(.obj([
            ("reaction", .string(key)), ("user_id", .string(uid)), ("success", true), ("msg_id", .int(m.id)),
            ("updated_at", .int(ctx.now)), ("operation", .string(op)),
        ]))
    }

    static func addReaction(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply { try await react(s, &ctx, add: true) }
    static func removeReaction(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply { try await react(s, &ctx, add: false) }

    static func setPin(_ s: some Needs, _ ctx: inout Ctx, pinned: Bool) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        var m = try await s.message(c, ctx.messageId)
        try s.requireJoined(c, ctx)
        let already = c.pinnedMessageIds.contains(m.id)
        if pinned == already { return .json(.obj([])) }
        if pinned { c.pinnedMessageIds.append(m.id) } else { c.pinnedMessageIds.removeAll { $0 == m.id } }
        s.touch(&c, ctx.now)
        try await s.save(c)
        try await announceUpdate(s, &c, &m, now: ctx.now, event: false, channelChanged: false)  // touched just above
        s.emit("pinned_message_updated", channelUrl: c.url, to: s.allMemberIds(c), fields: [
            ("channel", s.eventChannelJSON(c, now: ctx.now)),
            ("pinned_message_ids", .array(c.pinnedMessageIds.map { .int($0) })),
        ], now: ctx.now)
        return .json(.obj([]))
    }

    static func pin(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply { try await setPin(s, &ctx, pinned: true) }
    static func unpin(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply { try await setPin(s, &ctx, pinned: false) }

    /// A copy is a new message of the destination: its events (mentions included), webhooks
    /// and push notifications are a send's.
    static func copy(_ s: some Needs & PushRecords, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let reader = try s.readerMember(c, ctx)
        let m = try await s.message(c, ctx.messageId)
        if !s.isVisible(m, to: reader) { throw APIError.notFound("Message \(m.id)") }
        if m.type == "ADMM" { throw APIError.invalid("message_id", "admin messages cannot be copied.") }
        if let me = ctx.caller.userId, !ctx.caller.isAdmin, m.senderId != me {
            throw APIError.forbidden("only the sender of a message may copy it.")
        }
        let destUrl = try ctx.input.nonEmptyString("dest_channel_url", maxBytes: 100)
        var dest = try await s.channel(destUrl)
        let sender: String
        if let me = ctx.caller.userId { sender = me } else { sender = try ctx.input.string("user_id", maxBytes: 80) ?? m.senderId ?? "" }
        _ = try await s.user(sender)
        try s.requireCanSend(dest, sender: sender, ctx: ctx)
        let push = try PushDeliveryRequest(ctx.input)
        let (copyId, createdAt) = try await s.takeMessageNumbers(in: dest.url, at: ctx.now)
        var copy = m
        copy.id = copyId
        copy.channelUrl = dest.url
        copy.senderId = sender
        copy.reqId = ""
        copy.createdAt = createdAt
        copy.updatedAt = 0
        copy.parentId = 0
        copy.isReplyToChannel = false
        copy.reactions = []
        copy.replyCount = 0; copy.lastRepliedAt = 0; copy.threadUpdatedAt = 0; copy.recentReplierIds = []
        copy.changeSeq = 0; copy.changedAt = 0
        // A poll belongs to one message: the copy carries none.
        copy.pollId = nil
        copy.isOpMsg = dest.isOperator(sender)
        if !dest.isEphemeral {
            try await s.save(copy)
            s.countNewMessage(copy, in: &dest)
            dest.lastMessageId = copy.id
        }
        s.unhideOnNewMessage(&dest, now: ctx.now)
        s.touch(&dest, ctx.now)
        try await s.save(dest)
        let json = try await announceNewMessage(s, copy, in: dest, ctx)
        try await Push.notify(s, copy, in: dest, request: push, now: ctx.now)
        return .json(json)
    }

    static func addMetaArray(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        var m = try await s.message(c, ctx.messageId)
        try s.requireSenderOrOperator(c, m, ctx)
        guard let items = try parseMetaArray(ctx.input) else { throw APIError.missing("sorted_metaarray") }
        for item in items {
            if let idx = m.sortedMetaarray.firstIndex(where: { $0.key == item.key }) {
                m.sortedMetaarray[idx].value += item.value
            } else {
                m.sortedMetaarray.append(item)
            }
        }
        m.updatedAt = ctx.now
        try await announceUpdate(s, &c, &m, now: ctx.now, channelChanged: c.lastMessageId == m.id)
        return .json(try await s.render(m, .full))
    }

    static func updateMetaArray(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        var c = try await s.channel(ctx.param(.channelURL))
        var m = try await s.message(c, ctx.messageId)
        try s.requireSenderOrOperator(c, m, ctx)
        guard let items = try parseMetaArray(ctx.input) else { throw APIError.missing("sorted_metaarray") }
        let mode = try ctx.input.enumValue("mode", ["add", "remove"], default: "add")
        let upsert = try ctx.input.bool("upsert", default: false)
        for item in items {
            guard let idx = m.sortedMetaarray.firstIndex(where: { $0.key == item.key }) else {
                if mode == "add" {
                    if !upsert { throw APIError.notFound("Meta array key \"\(item.key)\"") }
                    m.sortedMetaarray.append(item)
                }
                continue
            }
            if mode == "add" {
                for v in item.value where !m.sortedMetaarray[idx].value.contains(v) { m.sortedMetaarray[idx].value.append(v) }
            } else {
                m.sortedMetaarray[idx].value.removeAll { item.value.contains($0) }
            }
        }
        m.updatedAt = ctx.now
        try await announceUpdate(s, &c, &m, now: ctx.now, channelChanged: c.lastMessageId == m.id)
        return .json(try await s.render(m, .full))
    }

    static func parseMetaArray(_ i: Input, _ name: String = "sorted_metaarray") throws -> [MetaArrayItem]? {
        guard let v = i.body[name], v != .null else {
            if let q = i.query.first(name) {
                guard let parsed = try? JSONParser.parse(q) else { throw APIError.invalid(name, "must be a JSON list.") }
                return try metaArray(from: parsed, name)
            }
            return nil
        }
        return try metaArray(from: v, name)
    }

    private static func metaArray(from v: JSON, _ name: String) throws -> [MetaArrayItem] {
        guard case .array(let items) = v else { throw APIError.invalid(name, "must be a list of {key, value} objects.") }
        var out: [MetaArrayItem] = []
        for item in items {
            guard case .object(let o) = item, case .string(let key)? = o["key"], !key.isEmpty, key.utf8.count <= 128 else {
                throw APIError.invalid(name, "items need a non-empty string \"key\".")
            }
            var values: [String] = []
            switch o["value"] {
            case .array(let vs)?:
                for x in vs {
                    guard case .string(let s) = x else { throw APIError.invalid(name, "values must be strings.") }
                    values.append(s)
                }
            case .string(let s)?: values = [s]
            case nil, .null?: values = []
            default: throw APIError.invalid(name, "\"value\" must be a list of strings.")
            }
            if let idx = out.firstIndex(where: { $0.key == key }) { out[idx].value += values } else { out.append(MetaArrayItem(key: key, value: values)) }
        }
        return out
    }

    static func parseThumbnails(_ i: Input) throws -> [ThumbnailRecord] {
        var raw: JSON? = i.body["thumbnails"]
        if raw == nil || raw == .null, let q = i.query.first("thumbnails") {
            raw = (try? JSONParser.parse(q)) ?? .array([.string(q)])
        }
        guard let raw, raw != .null else { return [] }
        guard case .array(let items) = raw else { throw APIError.invalid("thumbnails", "must be a list.") }
        var out: [ThumbnailRecord] = []
        for item in items {
            switch item {
            case .string(let url): out.append(ThumbnailRecord(url: url, width: 0, height: 0, realWidth: 0, realHeight: 0))
            case .object(let o):
                guard case .string(let url)? = o["url"] else { throw APIError.invalid("thumbnails", "items need a string \"url\".") }
                func num(_ k: String) throws -> Int64 {
                    switch o[k] {
                    case nil, .null?: return 0
                    case .int(let n)?: return n
                    default: throw APIError.invalid("thumbnails", "\"\(k)\" must be an integer.")
                    }
                }
                out.append(ThumbnailRecord(url: url, width: try num("width"), height: try num("height"),
                                           realWidth: try num("real_width"), realHeight: try num("real_height")))
            default: throw APIError.invalid("thumbnails", "items must be URLs or objects.")
            }
        }
        return out
    }
}
