import Dispatch
import Glibc

// Opening the per-user cache, and applying real-time events and operation results to it
// (through the cache writer). Everything here runs on the engine queue.

extension Engine {
    /// Opens the cache of `userID` (closing another user's). A cache that cannot be opened
    /// is never fatal: the engine logs why and continues with an in-memory cache. The one
    /// exception: an encrypted cache file that the configured secret does not open (or no
    /// secret) throws `.cacheKey`, and the file stays as it is.
    func openCache(userID: String) throws(ParleyError) {
        assertOnQueue()
        if cache != nil, store.userID == userID { return }
        closeCache()
        let limit = configuration.cacheSizeLimitBytes
        var location = SQLiteLocation.memory
        var fallback: String?
        if configuration.cacheMode == .persistent {
            switch Self.cacheFilePath(configuration: configuration, userID: userID) {
            case .success(let path): location = .file(path: path)
            case .failure(let error): fallback = error.message
            }
        }
        var opened: ChatCache?
        do throws(ParleyError) {
            opened = try ChatCache(location: location, sizeLimitBytes: limit, secret: cacheSecret)
        } catch where error.code == .cacheKey {
            store = StoreState()
            throw error
        } catch {
            fallback = "cannot open \(location): \(error)"
            opened = try? ChatCache(location: .memory, sizeLimitBytes: limit)
        }
        if let recovery = opened?.recovery {
            log(.warning, "cache: \(recovery); starting with an empty cache")
        }
        opened?.appliesSearchNotesAtEveryCommit = store.openSearchViews > 0
        store.writer = opened.map { CacheWriter(cache: $0, feed: feed) }
        store.userID = userID
        if opened != nil, fallback == nil, case .file(let path) = location {
            cacheReader.attach(path: path)
        } else {
            cacheReader.attach(path: nil)
        }
        if let opened, opened.integrityCheckDeferred, case .file(let path) = location,
            !SQLiteFiles.modifiedWithin(path + SQLiteDatabase.checkedMarkerSuffix, seconds: SQLiteDatabase.fullCheckIntervalSeconds)
        {
            // A large file was opened on its schema alone: the full walk runs beside the
            // engine, at most once a day and at the lowest CPU priority (it reads the whole
            // file; reads and writes right after connect must not wait for it); damage it
            // finds is replaced at the next open, like a bad row.
            let weak = WeakReference(self)
            // An encrypted file stays readable for the walk after the cache closes.
            let walkKey = opened.isEncrypted ? SealedFileKey.sharing(path, with: path) : nil
            // A thread of its own that ends with the walk: its priority is never handed back
            // (raising it again needs a privilege) and must not stay on a shared pool's thread.
            let thread = try? NativeThread.start(name: "parley-check") {
                SQLiteFiles.lowerThisThreadsPriority()
                defer { walkKey?.release() }
                guard let problem = SQLiteDatabase.quickCheck(path: path) else {
                    SQLiteFiles.writeSmallFile(path + SQLiteDatabase.checkedMarkerSuffix, "quick_check ok")
                    return
                }
                SQLiteFiles.writeSmallFile(path + SQLiteDatabase.damageMarkerSuffix, "quick_check: \(problem)")
                weak.object?.log(.error, "cache: the integrity check found damage (\(problem)); the file is replaced, "
                    + "unsent messages kept, when it is next opened")
            }
            thread?.detach()
        }
        if let salvage = opened?.salvage {
            log(.warning, "cache: carried over \(salvage.restoredReqIDs.count) unsent message(s) from the damaged file "
                + "(\(salvage.restoredFromJournal.count) from the outbox journal); "
                + "\(salvage.lostUnknown ? "unknown" : "\(salvage.lost.count)") lost\(salvage.unreadable.map { " (\($0))" } ?? "")")
            // Each lost message is reported as failed: the application learns which sends did not survive.
            let lost = salvage.lost.filter { !$0.reqID.isEmpty }.map { message in
                CacheChange.localMessageStatusChanged(LocalMessageChange(
                    reqID: message.reqID, channelURL: message.channelURL, status: .failed,
                    message: .object([
                        WireField.reqID: .string(message.reqID), WireField.channelURL: .string(message.channelURL),
                        WireField.messageID: .int(0),
                        "sending_status": .string("failed"), "error_code": .int(Int64(ParleyErrorCode.cache.rawValue)),
                        "error_message": .string("lost with the damaged cache file"),
                    ]),
                    error: ParleyError(.cache, "lost with the damaged cache file")))
            }
            feed.publish(cause: .cacheRecovered(salvage), changes: lost)
        }
        if let fallback {
            // Nothing sent from now on survives the process: the application must know.
            log(.error, "cache: \(fallback); using an in-memory cache")
            feed.publish(cause: .cacheUnavailable(reason: fallback), changes: [])
        }
    }

    /// `rekey_cache`: the open cache file is closed, rewritten under `secret` (nil: plain)
    /// atomically (`CacheSealing.rewrite`) and opened again with it.
    func rekeyCache(to secret: CacheSecret?) throws(ParleyError) {
        assertOnQueue()
        guard let cache, case .file(let path) = cache.database.location, let userID = store.userID else {
            throw .invalidState("rekey_cache: no cache file is open (connect first; an in-memory cache has no key)")
        }
        let kept = store
        closeCache()
        var failure: ParleyError?
        do throws(ParleyError) {
            try CacheSealing.rewrite(path: path, from: cacheSecret, to: secret)
            cacheSecret = secret
        } catch {
            failure = error
        }
        try openCache(userID: userID)
        store.lastTouched = kept.lastTouched
        store.openSearchViews = kept.openSearchViews
        self.cache?.appliesSearchNotesAtEveryCommit = kept.openSearchViews > 0
        if let failure { throw failure }
    }

    func closeCache() {
        assertOnQueue()
        cacheReader.attach(path: nil)
        cache?.close()
        store = StoreState()
    }

    /// `<dir>/<server host>/<user id>.sqlite`, names percent-encoded so that any user id or
    /// server URL makes one safe file name; directories created with mode 0700.
    static func cacheFilePath(configuration: ClientConfiguration, userID: String) -> Result<String, ParleyError> {
        var directory: String
        if let configured = configuration.cacheDirectory {
            directory = configured
        } else if let xdg = getenv("XDG_CACHE_HOME").map({ String(cString: $0) }), xdg.hasPrefix("/") {
            directory = xdg + "/parley"
        } else if let home = getenv("HOME").map({ String(cString: $0) }), !home.isEmpty {
            directory = home + "/.cache/parley"
        } else {
            return .failure(.invalidState("no cache_dir configured and neither XDG_CACHE_HOME nor HOME is set"))
        }
        var server = configuration.serverURL ?? "no-server"
        for scheme in ["https://", "http://"] where server.hasPrefix(scheme) {
            server.removeFirst(scheme.count)
        }
        directory += "/" + URLEncoding.percentEncode(server)
        if let error = makeDirectories(directory) { return .failure(error) }
        return .success(directory + "/" + URLEncoding.percentEncode(userID) + ".sqlite")
    }

    private static func makeDirectories(_ path: String) -> ParleyError? {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                return .invalidState("cannot create the cache directory '\(prefix)': \(String(cString: strerror(errno)))")
            }
            prefix += "/"
        }
        return nil
    }
}

// MARK: Real-time events

extension Engine {
    /// Applies real-time events to the cache in one transaction (each event in its own
    /// savepoint, so a bad one is skipped alone), the resume point written once after the
    /// last, and publishes each event with what it changed, in order.
    func applyStreamEvents(_ streams: [StreamEvent]) {
        assertOnQueue()
        guard let writer = store.writer, let last = streams.last else {
            log(.warning, "cache: no cache open; \(streams.count) event(s) not applied")
            return
        }
        var confirmed: [(index: Int, reqID: String, message: JSONValue)] = []
        var receivedMessages = false
        let outcome = writer.writeBatch(
            count: streams.count,
            step: { (index, transaction) throws(ParleyError) -> ChangeCause in
                let (event, confirmation) = try applyStreamEvent(streams[index], transaction)
                if let confirmation { confirmed.append((index, confirmation.reqID, confirmation.message)) }
                if event.category == .messageReceived { receivedMessages = true }
                return .realtime(event)
            },
            failedCause: { index in .realtime(Self.realtimeEvent(streams[index], isOwnEcho: false)) },
            finishing: { (transaction) throws(ParleyError) in
                try transaction.setMetaValue(String(last.id), forKey: "last_event_id")
                if receivedMessages { try evictIfNeeded(transaction) }
            },
            finishingCause: .eviction)
        for (index, error) in outcome.stepErrors.enumerated() {
            if let error { log(.warning, "cache: applying event \(streams[index].id) (\(streams[index].category)) failed: \(error)") }
        }
        // A confirmation whose step or batch was rolled back did not happen: its answer
        // completes the send as usual.
        var committed: [(index: Int, reqID: String, message: JSONValue)] = []
        for confirmation in confirmed {
            if outcome.error == nil && outcome.stepErrors[confirmation.index] == nil {
                committed.append(confirmation)
            } else {
                outbox.confirmedByEcho.remove(confirmation.reqID)
            }
        }
        if let error = outcome.error {
            log(.error, "cache: applying \(streams.count) event(s) failed: \(error)")
            return
        }
        metrics.eventsApplied.add(outcome.stepErrors.count(where: { $0 == nil }))
        for confirmation in committed { completeSend(reqID: confirmation.reqID, .success(confirmation.message)) }
        settleHiddenStateWaits()
        fetchWantedChannels()
    }

    /// Reads whole, one request per channel at a time, each channel whose member list
    /// events could not give (PROTOCOL.md §9.1: a live event about messages carries only the
    /// members it changed) or whose copy in an answer was set aside (`ChannelReadGuard`). A
    /// channel the server no longer shows to the user is removed. A failed read is tried
    /// again after the next events.
    func fetchWantedChannels() {
        let urls = channelRereads.wanted.subtracting(channelRereads.inFlight)
        channelRereads.wanted.subtract(urls)
        for url in urls.sorted(by: utf8Precedes) {
            channelRereads.inFlight.insert(url)
            let readStart = channelReads.begin()
            let path = Endpoints.channel(url)
            call("GET", path) { result in
                self.channelRereads.inFlight.remove(url)
                let touchedByEvents = self.channelReads.end(readStart)
                let gone: Bool
                switch result {
                case .success(let channel) where WireChannel(channel).channelURL == url:
                    gone = WireChannel(channel).memberState == "none"
                    if !gone {
                        self.write(.channelRefresh(channelURL: url), "storing a channel read again") { transaction throws(ParleyError) in
                            if try !Self.storeAnswerChannel(channel, touchedByEvents, transaction) {
                                self.channelRereads.wanted.insert(url)
                            }
                        }
                    }
                case .success:
                    gone = false
                case .failure(let error) where error.code == .notFound || error.code == .forbidden:
                    gone = true
                case .failure(let error):
                    gone = false
                    self.channelRereads.wanted.insert(url)
                    self.log(.info, "sync: reading the channel \(url) again failed: \(error)")
                }
                if gone {
                    if touchedByEvents[url] == nil {
                        self.write(.channelRefresh(channelURL: url), "removing a channel gone") { transaction throws(ParleyError) in
                            try transaction.removeChannel(url, reason: .accessLost)
                        }
                    } else {
                        self.channelRereads.wanted.insert(url)
                    }
                }
                if case .success = result, !self.channelRereads.wanted.isEmpty { self.fetchWantedChannels() }
            }
        }
    }

    static func realtimeEvent(_ stream: StreamEvent, isOwnEcho: Bool) -> RealtimeEvent {
        RealtimeEvent(id: stream.id, category: EventCategory(rawValue: stream.category), name: stream.category, data: stream.data,
                      dataText: stream.dataText, channelURL: WireEventData(stream.data).channelURL ?? "", isOwnEcho: isOwnEcho)
    }

    /// One event's step of `applyStreamEvents`: returns the event as applied and, for the
    /// echo of this client's send that replaced its local copy, the send's confirmation.
    private func applyStreamEvent(
        _ stream: StreamEvent, _ transaction: CacheTransaction
    ) throws(ParleyError) -> (RealtimeEvent, (reqID: String, message: JSONValue)?) {
        let data = WireEventData(stream.data)
        // The server also streams a sender's own messages. One this client sent reaches the
        // app as `message_sent` (with its req_id), so its echo is applied but not reported
        // as received: a second report would show the message twice. Other devices' sends
        // are reported as usual.
        let echo = EventCategory(rawValue: stream.category) == .messageReceived ? ownSend(data.message) : nil
        var event = Self.realtimeEvent(stream, isOwnEcho: echo != nil)
        event.isReplayed = stream.id <= session.replayThrough
        if event.category == .messageUpdated, let message = data.message { event.isOwnEdit = isOwnEdit(message) }
        try attribute(&event, transaction)
        try apply(event, transaction)
        switch echo {
        case .waitingLocally(let reqID, let channelURL)?, .onTheWire(let reqID, let channelURL)?:
            // The echo replaced the local copy (and with it the outbox entry), so it is the
            // delivery confirmation: of a send not on the wire from here (e.g. sent before a
            // crash, the answer never seen), or of one whose answer has not come yet (the send
            // completes now; `finishSend` then only ends the request).
            guard let message = data.message?.json, try transaction.cache.localMessage(reqID: reqID) == nil else { break }
            try transaction.confirmSent(reqID: reqID, channelURL: channelURL, message: message)
            if case .onTheWire = echo {
                outbox.confirmedByEcho.insert(reqID)
                log(.debug, "outbox: \(reqID) confirmed by its echo before the answer")
            }
            return (event, (reqID, Self.succeeded(message)))
        case .sentLately?, nil:
            break
        }
        return (event, nil)
    }

    private func apply(_ event: RealtimeEvent, _ transaction: CacheTransaction) throws(ParleyError) {
        let data = WireEventData(event.data)
        let url = event.channelURL
        let me = session.current?.userID
        if let touched = url.isEmpty ? data.channel?.channelURL : url, !touched.isEmpty {
            let channel = data.channel
            let whole = channel?.hasMembers == true || channel?.memberState == "none"
                || [.channelDeleted, .userLeft, .userBanned, .invitationDeclined].contains(event.category)
            channelReads.noteEvent(touched, whole: whole, changedMembers: data.changedMembers?.arrayValue ?? [])
        }
        let removal: ChannelRemovalReason? =
            switch event.category {
            case .channelDeleted: .deleted
            case .userLeft where me != nil && data.user?.userID == me: .left
            case .userBanned where me != nil && data.user?.userID == me: .banned
            case .invitationDeclined where me != nil && data.invitee?.userID == me: .invitationDeclined
            default: nil
            }
        // A replay renders the channel as it is now, on the channel's first replayed event only
        // (PROTOCOL.md §9.1): the user's old leave, ban or decline followed by a new invite or
        // join carries a render with the user a member, and the events after it no channel.
        // That render, not the event, says whether the channel is still the user's.
        let stillMember = data.channel.map { ($0.memberState ?? "none") != "none" } ?? event.isReplayed
        if let removal, event.category == .channelDeleted || !stillMember {
            if !url.isEmpty { try transaction.removeChannel(url, reason: removal) }
            return
        }
        if removal != nil, !url.isEmpty {
            // A member again after being away: what changed in its messages meanwhile reached
            // the user by no event, and its message token may have passed it. Its cached
            // messages go; views and the next catch-up list them again.
            try transaction.forgetChannelMessages(url)
        }
        // The channel's first replayed event found it no longer the user's and removed it: the
        // later ones change nothing (their messages would be cached without their channel).
        if data.channel == nil, event.isReplayed, !url.isEmpty, try !transaction.cache.hasChannel(url: url) { return }
        if let channel = data.channel, case .object = channel.json {
            // Rendered for this user without a membership (e.g. unbanned after the ban
            // removed them): not one of the user's channels.
            if channel.memberState == "none" {
                if !url.isEmpty { try transaction.removeChannel(url, reason: .accessLost) }
                return
            }
            var changedMembers: [JSONValue] = []
            if let changed = data.changedMembers {
                guard let list = changed.arrayValue else {
                    throw ParleyError(.protocolViolation, "\(event.name): changed_members must be an array")
                }
                changedMembers = list
            }
            try transaction.storeChannel(channel.json, changedMembers: changedMembers, fromEvent: true)
            if !channel.hasMembers, !url.isEmpty, try !transaction.cache.channelMembersKnown(url: url) {
                // New to the cache by an event without members: its list comes by a refresh.
                channelRereads.wanted.insert(url)
            }
        }
        switch event.category {
        case .messageReceived:
            if let message = data.message { try transaction.appendRealtimeMessage(message.json) }
        case .messageUpdated:
            if let message = data.message { try transaction.updateCachedMessage(message.json) }
        case .messageDeleted:
            if let id = data.messageID { try transaction.removeMessage(id) }
        case .reactionUpdated:
            if let reaction = data.reaction { try applyReaction(reaction, transaction) }
        case .pollUpdated, .pollVoted:
            if let poll = data.poll { try transaction.storePoll(poll.json) }
        case .pollDeleted:
            if let id = data.pollID, !url.isEmpty { try transaction.removePoll(id, channelURL: url) }
        case .threadInfoUpdated:
            if let parent = data.parentMessageID, let info = data.threadInfo {
                // The server shows no thread info once a thread has no replies left.
                let empty = (info.replyCount ?? 0) == 0
                try transaction.patchMessage(parent) { fields in
                    if empty { fields.removeValue(forKey: WireField.threadInfo) } else { fields[WireField.threadInfo] = info.json }
                }
            }
        default:
            break
        }
    }

    /// What the event means to this user beyond its category (`RealtimeEvent.reportedCategory`,
    /// `changedMemberCount`), judged against the channel as stored before the event.
    private func attribute(_ event: inout RealtimeEvent, _ transaction: CacheTransaction) throws(ParleyError) {
        guard let me = session.current?.userID, let category = event.category else { return }
        let data = WireEventData(event.data)
        func isMe(_ user: WireUser?) -> Bool { user?.userID == me }
        func stored() throws(ParleyError) -> WireChannel? {
            guard let text = try transaction.cache.channel(url: event.channelURL, withMembers: false)?.json else { return nil }
            return (try? JSONValue.parse(text)).map(WireChannel.init)
        }
        switch category {
        case .messageReceived where !event.isOwnEcho:
            // As the server picks whom to send `mention` (docs/PROTOCOL.md §7.1).
            guard let message = data.message else { return }
            let mentioned = message.mentionType == "channel"
                ? !isMe(message.user) : (message.mentionedUsers ?? []).contains(where: isMe)
            if mentioned { event.reportedCategory = .mention }
        case .readStatus where isMe(data.user):
            // The user's own hide with previous messages moves the read receipt first; the
            // channel it carries is already hidden, its history cut.
            guard let channel = data.channel, let before = try stored() else { return }
            let hidden = (channel.hiddenState ?? "unhidden") != (before.hiddenState ?? "unhidden")
            let cut = (channel.tsMessageOffset ?? 0) > (before.tsMessageOffset ?? 0)
            if hidden || cut { event.reportedCategory = .channelHidden }
        case .userJoined, .userLeft, .userBanned, .invitationReceived, .invitationDeclined:
            let subjects = (data.users ?? []) + (data.invitees ?? []) + [data.user, data.invitee].compactMap { $0 }
            guard !subjects.contains(where: isMe), let channel = data.channel, let before = try stored() else { return }
            event.changedMemberCount = [WireField.memberCount, WireField.joinedMemberCount].contains {
                channel.json[$0] != before.json[$0]
            }
        default:
            break
        }
    }

    private func applyReaction(_ reaction: WireReaction, _ transaction: CacheTransaction) throws(ParleyError) {
        guard let messageID = reaction.messageID, let key = reaction.key, let user = reaction.userID
        else { throw ParleyError(.protocolViolation, "reaction_updated: reaction needs message_id, key and user_id") }
        let adding = !reaction.isDeletion
        let updatedAt = reaction.updatedAt ?? .int(0)
        try transaction.patchMessage(messageID) { fields in
            var reactions = fields[WireField.reactions]?.arrayValue ?? []
            let index = reactions.firstIndex { WireMessageReaction($0).key == key }
            var users = index.flatMap { WireMessageReaction(reactions[$0]).userIDs } ?? []
            users.removeAll { $0.stringValue == user }
            if adding { users.append(.string(user)) }
            let entry: JSONValue = .object([
                WireField.key: .string(key), WireField.userIDs: .array(users), WireField.updatedAt: updatedAt,
            ])
            switch (index, users.isEmpty) {
            case (let at?, true): reactions.remove(at: at)
            case (let at?, false): reactions[at] = entry
            case (nil, false): reactions.append(entry)
            case (nil, true): break
            }
            fields[WireField.reactions] = .array(reactions)
        }
    }

    enum OwnSend {
        /// On the wire now, its answer not in yet: the first of the echo and the answer to
        /// store the server's copy completes the send.
        case onTheWire(reqID: String, channelURL: String)
        /// Confirmed lately: its `message_sent` was reported.
        case sentLately
        /// A pending or failed local message not being sent right now.
        case waitingLocally(reqID: String, channelURL: String)
    }

    /// Whether `message` is one this client sent (by req_id and sender), nil when not.
    private func ownSend(_ message: WireMessage?) -> OwnSend? {
        guard let message, let reqID = message.reqID, !reqID.isEmpty,
            let me = session.current?.userID, message.senderID == me
        else { return nil }
        if outbox.confirmedByEcho.contains(reqID) || outbox.recentlySent.contains(reqID) { return .sentLately }
        if outbox.sendsInFlight.contains(reqID) { return .onTheWire(reqID: reqID, channelURL: message.channelURL ?? "") }
        let local = read("looking up a local message") { cache throws(ParleyError) in try cache.localMessage(reqID: reqID) } ?? nil
        guard let local, local.channelURL == message.channelURL else { return nil }
        return .waitingLocally(reqID: reqID, channelURL: local.channelURL)
    }

    /// Keeps the cache under its size limit (whole channels, least recently read first;
    /// never pending or failed messages).
    func evictIfNeeded(_ transaction: CacheTransaction) throws(ParleyError) {
        let report = try transaction.evictIfNeeded(protecting: Set(openMessageViews.keys))
        metrics.evictedChannels.add(report.evictedChannelURLs.count)
        metrics.evictedMessages.add(report.removedMessageCount)
        if !report.evictedChannelURLs.isEmpty {
            log(.info, "cache: over its size limit (\(report.usedBytesBefore) bytes): evicted the messages of "
                + "\(report.evictedChannelURLs.count) channel(s), now \(report.usedBytesAfter) bytes")
        }
    }
}

// MARK: Operation results

/// What an unfiltered `list_messages` page vouches for: every message of the channel
/// (replies included) from `from` through `through` is in the page.
struct ListedRange {
    var from: MessageKey
    var through: MessageKey
    var listed: Set<Int64>
    var reachesOldest: Bool
    /// The page was the newest (no anchor): nothing newer existed when it was read.
    var atNewestEnd: Bool
}

extension Engine {
    /// Runs a catalog operation for the session: `send` sends the prepared call with the
    /// session's credential; a successful answer is applied to the cache (its `CacheEffect`)
    /// before `finish` gets it. Channels events touched while the answer travelled are
    /// minded (`ChannelReadGuard`).
    func runOperation(
        _ operation: String, effect: CacheEffect, params: JSONValue,
        finish: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void,
        send: (APIEndpoint.Credential, @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void) -> Void
    ) {
        assertOnQueue()
        guard let current = session.current else {
            finish(.failure(.invalidState("\(operation): not connected (call connect first)")))
            return
        }
        // A page read while the stream is up can vouch for the newest end if it stays up.
        let liveSince = isStreamOpen ? session.streamBreaks : nil
        let readStart = channelReads.begin()
        let editing = operation == "update_message" ? Self.messageID(params) : nil
        if let editing { outbox.editsInFlight[editing, default: 0] += 1 }
        send(.session(current.token)) { result in
            guard case .success(let answer) = result else {
                self.queue.async {
                    _ = self.channelReads.end(readStart)
                    if let editing { self.endEdit(editing, answer: nil) }
                }
                finish(result)
                return
            }
            self.queue.async {
                if let editing { self.endEdit(editing, answer: answer) }
                let touchedByEvents = self.channelReads.end(readStart)
                self.applyOperationResult(
                    operation, effect, params: params, answer: answer, liveSince: liveSince, touchedByEvents: touchedByEvents)
                if case .hiddenState(let state) = effect {
                    self.finishWhenHiddenStateShows(Self.expectedHiddenState(state, params: params), params: params) { finish(.success(answer)) }
                } else {
                    finish(.success(answer))
                }
            }
        }
    }

    private static func messageID(_ params: JSONValue) -> Int64? {
        params[WireField.messageID]?.int64Value ?? params[WireField.messageID]?.stringValue.flatMap { Int64($0) }
    }

    private static func editKey(_ message: WireMessage) -> String? {
        guard let id = message.messageID, let updatedAt = message.json[WireField.updatedAt]?.int64Value else { return nil }
        return "\(id):\(updatedAt)"
    }

    /// The edit of `message` is this client's: its `update_message` is in flight (its event
    /// can come before the answer) or answered with this version.
    func isOwnEdit(_ message: WireMessage) -> Bool {
        guard let id = message.messageID else { return false }
        return outbox.editsInFlight[id] != nil || Self.editKey(message).map(outbox.recentEdits.contains) == true
    }

    /// An `update_message` of message `id` ended, with the server's message when it succeeded.
    private func endEdit(_ id: Int64, answer: JSONValue?) {
        if let count = outbox.editsInFlight[id], count > 1 { outbox.editsInFlight[id] = count - 1 } else { outbox.editsInFlight[id] = nil }
        if let answer, let key = Self.editKey(WireMessage(answer)) { outbox.recentEdits.insert(key) }
    }

    /// Applies a catalog operation's answer to the cache. `liveSince`: the stream's break
    /// count when the request went out with the stream open (nil: it was not open).
    /// `touchedByEvents`: channels events changed while the request was out
    /// (`ChannelReadGuard`), whose copies in the answer are older than the cache's.
    func applyOperationResult(_ operation: String, _ effect: CacheEffect, params: JSONValue, answer: JSONValue, liveSince: UInt64? = nil,
                              touchedByEvents: [String: ChannelTouch] = [:]) {
        let listedRange = operation == "list_messages" ? Self.listedRange(params: params, answer: answer) : nil
        let reachesNewest = listedRange?.atNewestEnd == true && liveSince != nil && liveSince == session.streamBreaks && isStreamOpen
        write(.operation(operation), "storing the result of \(operation)") { transaction throws(ParleyError) in
            switch effect {
            case .none:
                break
            case .storeChannel:
                try storeAnswerChannelOrReread(answer, touchedByEvents, transaction)
            case .storeChannels(let key):
                for channel in answer[key]?.arrayValue ?? [] { try storeAnswerChannelOrReread(channel, touchedByEvents, transaction) }
            case .removeChannel(let reason):
                if let url = params[WireField.channelURL]?.stringValue { try transaction.removeChannel(url, reason: reason) }
            case .storeMessage:
                try transaction.storeMessage(answer)
            case .updateCachedMessage:
                try transaction.updateCachedMessage(answer)
            case .storeMessages(let key):
                try transaction.storeMessages(answer[key]?.arrayValue ?? [])
                if let listedRange, let url = params[WireField.channelURL]?.stringValue {
                    try recordListedRange(listedRange, channelURL: url, reachesNewest: reachesNewest, transaction)
                }
                try evictIfNeeded(transaction)
            case .removeMessage:
                if let id = params[WireField.messageID]?.int64Value ?? params[WireField.messageID]?.stringValue.flatMap({ Int64($0) }) {
                    try transaction.removeMessage(id)
                }
            case .truncateHistory:
                if let url = params[WireField.channelURL]?.stringValue, let offset = WireHistoryReset(answer).tsMessageOffset {
                    try transaction.truncateHistory(channelURL: url, through: offset)
                    try transaction.patchChannel(url) { fields in
                        fields[WireField.tsMessageOffset] = .int(offset)
                        fields[WireField.lastMessage] = nil
                        fields[WireField.unreadMessageCount] = .int(0)
                        fields[WireField.unreadMentionCount] = .int(0)
                    }
                }
            case .channelChangelog:
                channelRereads.wanted.formUnion(try Self.applyChannelChangelog(answer, touchedByEvents: touchedByEvents, transaction))
            case .messageChangelog:
                let url = params[WireField.channelURL]?.stringValue ?? ""
                try Self.applyMessageChangelog(answer, replaceCached: touchedByEvents[url] == nil, transaction)
            case .storePoll:
                try transaction.storePoll(answer)
            case .removePoll:
                if let url = params[WireField.channelURL]?.stringValue,
                   let id = params[WireField.pollID]?.int64Value ?? params[WireField.pollID]?.stringValue.flatMap({ Int64($0) }) {
                    try transaction.removePoll(id, channelURL: url)
                }
            case .pollChangelog:
                if let url = params[WireField.channelURL]?.stringValue { try Self.applyPollChangelog(answer, channelURL: url, transaction) }
            case .hiddenState:
                break  // the stream's event brings the channel as the server now shows it
            }
        }
        fetchWantedChannels()
    }
}

extension Engine {
    /// The parameters with which a `list_messages` page is every message of its range:
    /// anything else filters, or shapes the page without changing which messages it holds.
    private static let listParamsKeepingAll: Set<String> = [
        WireField.channelURL, WireField.messageTs, WireField.prevLimit, WireField.nextLimit, WireField.include, WireField.reverse,
        WireField.includeReplyType, WireField.includeReactions, WireField.includeThreadInfo, WireField.includeParentMessageInfo,
        WireField.withSortedMetaArray, WireField.includePollDetails, WireField.includeMetaArray,
    ]

    /// The range an answer of `list_messages` vouches for, nil when it vouches for none: a
    /// filtered page (replies are left out unless `include_reply_type` is "ALL"), or one
    /// around an anchor (its two sides need not meet). The range ends at the page's newest
    /// message: past it only the stream can vouch.
    static func listedRange(params: JSONValue, answer: JSONValue) -> ListedRange? {
        guard let fields = params.objectValue, fields.keys.allSatisfy(listParamsKeepingAll.contains),
            fields[WireField.includeReplyType]?.stringValue == "ALL",
            // The server's default next side is 15 around an anchor (PROTOCOL.md §7.2): its
            // two sides would then leave out what sits at the anchor itself (`include` false).
            (fields[WireField.nextLimit]?.int64Value ?? (fields[WireField.messageTs] == nil ? 0 : 15)) == 0,
            (fields[WireField.prevLimit]?.int64Value ?? 15) > 0,
            let messages = WireMessageList(answer).messages
        else { return nil }
        var keys: [MessageKey] = []
        var listed = Set<Int64>()
        for message in messages {
            let message = WireMessage(message)
            guard let id = message.messageID, let createdAt = message.createdAt else { return nil }
            keys.append(MessageKey(createdAt: createdAt, messageID: id))
            listed.insert(id)
        }
        guard let from = keys.min(), let through = keys.max() else { return nil }
        return ListedRange(
            from: from, through: through, listed: listed, reachesOldest: WireMessageList(answer).hasPrev == false,
            atNewestEnd: fields[WireField.messageTs] == nil)
    }

    /// Records a listed range as continuous, first removing the cached messages of the range
    /// the server no longer lists (deleted while this client was not told).
    private func recordListedRange(
        _ range: ListedRange, channelURL: String, reachesNewest: Bool, _ transaction: CacheTransaction
    ) throws(ParleyError) {
        for message in try transaction.cache.messages(channelURL: channelURL, from: range.from, through: range.through, filter: MessageFilter())
        where !range.listed.contains(message.messageID) {
            try transaction.removeMessage(message.messageID)
        }
        try transaction.addContinuousRange(
            channelURL: channelURL, scope: "", from: range.from, to: range.through,
            reachesOldest: range.reachesOldest, reachesNewest: reachesNewest)
    }
}

extension Engine {
    /// One page of channel changelogs (the catch-up's and the catalog operation's): stores
    /// what changed and removes what went, minding what events did meanwhile (`ChannelTouch`).
    /// Returns the channels whose entries were set aside, to read again.
    static func applyChannelChangelog(_ answer: JSONValue, touchedByEvents: [String: ChannelTouch],
                                      _ transaction: CacheTransaction) throws(ParleyError) -> Set<String> {
        let page = WireChangelogPage(answer)
        var setAside: Set<String> = []
        for channel in page.updated ?? [] {
            if try !storeAnswerChannel(channel, touchedByEvents, transaction), let url = WireChannel(channel).channelURL {
                setAside.insert(url)
            }
        }
        for url in page.deleted ?? [] {
            guard let url = url.stringValue else { continue }
            if touchedByEvents[url] == nil {
                try transaction.removeChannel(url, reason: .changelog)
            } else {
                setAside.insert(url)
            }
        }
        return setAside
    }

    /// One page of a channel's message changelogs (the catch-up's and the catalog
    /// operation's): the cached messages it changed are updated, those it lists as deleted
    /// removed. Messages the cache does not hold are not added (new ones come by listing).
    /// A message changelog page. `replaceCached`: its messages replace the cached copies even
    /// when their `updated_at` did not move (no event touched the channel while it was read).
    static func applyMessageChangelog(_ answer: JSONValue, replaceCached: Bool, _ transaction: CacheTransaction) throws(ParleyError) {
        let page = WireChangelogPage(answer)
        for message in page.updated ?? [] { try transaction.updateCachedMessage(message, force: replaceCached) }
        for id in page.deletedMessageIDs { try transaction.removeMessage(id) }
    }

    /// A poll changelog page of a channel (docs/PROTOCOL.md §7.6): the cached messages carrying
    /// the polls of `updated` show them, those carrying the polls of `deleted` show none.
    static func applyPollChangelog(_ answer: JSONValue, channelURL: String, _ transaction: CacheTransaction) throws(ParleyError) {
        func list(_ key: String) throws(ParleyError) -> [JSONValue] {
            guard let value = answer[key] else { return [] }
            guard let items = value.arrayValue else { throw ParleyError(.protocolViolation, "poll changelogs: \(key) must be an array") }
            return items
        }
        let updated = try list(WireField.updated)
        let deleted = try list(WireField.deleted)
        for poll in updated { try transaction.storePoll(poll) }
        for entry in deleted {
            if let id = entry[WireField.pollID]?.int64Value { try transaction.removePoll(id, channelURL: channelURL) }
        }
    }

    /// `storeAnswerChannel`, and a read again of a channel whose copy was set aside.
    func storeAnswerChannelOrReread(_ channel: JSONValue, _ touchedByEvents: [String: ChannelTouch],
                                    _ transaction: CacheTransaction) throws(ParleyError) {
        if try !Self.storeAnswerChannel(channel, touchedByEvents, transaction), let url = WireChannel(channel).channelURL {
            channelRereads.wanted.insert(url)
        }
    }

    /// Stores a channel read from the server, unless events since the request went out may
    /// hold a later copy: after a whole render (or a removal), nothing of the answer is kept
    /// and false is returned (read the channel again); after events without members, only
    /// the answer's member list, with the members those events changed.
    static func storeAnswerChannel(_ channel: JSONValue, _ touchedByEvents: [String: ChannelTouch],
                                   _ transaction: CacheTransaction) throws(ParleyError) -> Bool {
        guard let url = WireChannel(channel).channelURL, let touch = touchedByEvents[url] else {
            try transaction.storeChannel(channel)
            return true
        }
        guard case .partial(let changedMembers) = touch else { return false }
        guard let stored = try transaction.cache.channel(url: url, withMembers: false),
            case .object(var merged)? = try? JSONValue.parse(stored.json)
        else {
            try transaction.storeChannel(channel)  // the events' copy was not kept: the answer's is the best there is
            return true
        }
        guard let members = WireChannel(channel).members else { return true }
        merged[WireField.members] = .array(members.map { member in
            WireMember(member).userID.flatMap { changedMembers[$0] } ?? member
        })
        try transaction.storeChannel(.object(merged))
        return true
    }
}
