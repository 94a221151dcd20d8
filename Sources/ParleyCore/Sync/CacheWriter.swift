// The one writer of the cache. Every mutation of a client's cache goes through
// `CacheWriter.write`, which runs it in one SQLite transaction, collects what each step
// changed as `CacheChange` values, and after the commit hands them, with their cause, to
// the change feed. A rolled-back write publishes nothing (except a real-time event's
// batch, published empty, so that the event still reaches its observers).
//
// Reads go straight to the cache (`writer.cache`); only writes are funnelled here.

final class CacheWriter {
    let cache: ChatCache
    private let feed: ChangeFeed
    private var open: CacheTransaction?

    init(cache: ChatCache, feed: ChangeFeed) {
        self.cache = cache
        self.feed = feed
    }

    /// Runs `body` in one transaction and publishes its changes with `cause`. A write
    /// started inside another (from an observer or a nested step) joins it.
    @discardableResult
    func write<T>(_ cause: ChangeCause, _ body: (CacheTransaction) throws(ParleyError) -> T) throws(ParleyError) -> T {
        if let open {
            // A savepoint: if it fails, what it recorded is dropped with what it wrote.
            let mark = open.changes.count
            do {
                return try cache.transaction { () throws(ParleyError) in try body(open) }
            } catch {
                open.dropChanges(after: mark)
                throw error
            }
        }
        let transaction = CacheTransaction(cache: cache)
        open = transaction
        let result: Result<T, ParleyError>
        do throws(ParleyError) {
            result = .success(try cache.transaction { () throws(ParleyError) in try body(transaction) })
        } catch {
            result = .failure(error)
        }
        open = nil
        switch result {
        case .success:
            if !transaction.changes.isEmpty || cause.publishesWhenEmpty {
                feed.publish(cause: cause, changes: transaction.changes)
            }
        case .failure:
            if cause.publishesWhenEmpty { feed.publish(cause: cause, changes: []) }
        }
        return try result.get()
    }

    /// Runs several steps in one transaction, each in its own savepoint (a failing step is
    /// rolled back alone and reported in the result; the others stay), then `finishing`, and
    /// after the commit publishes each step's changes with the cause it named, in order (then
    /// `finishing`'s with `finishingCause`): observers see the same batches as from one
    /// `write` per step, at the cost of one commit. `step(index, transaction)` returns its
    /// cause; it is asked for in order, inside the transaction, so it may read what the
    /// steps before it wrote. If the whole transaction fails nothing is kept, and only the
    /// causes that publish when empty are published (without changes).
    func writeBatch(
        count: Int, step: (Int, CacheTransaction) throws(ParleyError) -> ChangeCause,
        failedCause: (Int) -> ChangeCause,
        finishing: (CacheTransaction) throws(ParleyError) -> Void, finishingCause: ChangeCause
    ) -> (stepErrors: [ParleyError?], error: ParleyError?) {
        precondition(open == nil, "writeBatch inside another write")
        let transaction = CacheTransaction(cache: cache)
        open = transaction
        var segments: [(cause: ChangeCause, range: Range<Int>)] = []
        var stepErrors: [ParleyError?] = []
        var finishingStart = 0
        var failure: ParleyError?
        do throws(ParleyError) {
            try cache.transaction { () throws(ParleyError) in
                for index in 0..<count {
                    let mark = transaction.changes.count
                    var cause = failedCause(index)
                    do throws(ParleyError) {
                        try cache.transaction { () throws(ParleyError) in cause = try step(index, transaction) }
                        stepErrors.append(nil)
                    } catch {
                        transaction.dropChanges(after: mark)
                        stepErrors.append(error)
                    }
                    segments.append((cause, mark..<transaction.changes.count))
                }
                finishingStart = transaction.changes.count
                try finishing(transaction)
            }
        } catch {
            failure = error
        }
        open = nil
        if failure != nil {
            for segment in segments where segment.cause.publishesWhenEmpty { feed.publish(cause: segment.cause, changes: []) }
            return (stepErrors, failure)
        }
        let changes = transaction.changes
        for segment in segments where !segment.range.isEmpty || segment.cause.publishesWhenEmpty {
            feed.publish(cause: segment.cause, changes: Array(changes[segment.range]))
        }
        if finishingStart < changes.count { feed.publish(cause: finishingCause, changes: Array(changes[finishingStart...])) }
        return (stepErrors, nil)
    }

    /// `clear_cached_data`: everything goes, and the file is compacted (which cannot run
    /// inside a transaction, hence not through `write`).
    func clear() throws(ParleyError) {
        guard open == nil else { throw .invalidState("the cache cannot be cleared inside a write") }
        try cache.clear()
        feed.publish(cause: .clear, changes: [.cleared])
    }
}

extension ChangeCause {
    /// Real-time events reach observers even when they changed nothing in the cache.
    var publishesWhenEmpty: Bool {
        if case .realtime = self { return true }
        return false
    }
}

/// The mutations available inside `CacheWriter.write`; each records what it changed.
final class CacheTransaction {
    let cache: ChatCache
    fileprivate(set) var changes: [CacheChange] = []
    /// Channels' message contexts read in this transaction (nil inside: not cached).
    private var contexts: [String: MessageChannelContext?] = [:]

    fileprivate init(cache: ChatCache) { self.cache = cache }

    func record(_ change: CacheChange) { changes.append(change) }

    fileprivate func dropChanges(after mark: Int) {
        changes.removeSubrange(mark...)
        contexts = [:]
    }

    // MARK: Channels

    /// Fields that only some renders of a channel carry (they depend on the query's show_*
    /// options): a render without one says nothing about it, so the cached value stays.
    static let viewDependentKeys = [
        WireField.members, WireField.metadata, WireField.metacounter, WireField.operators, WireField.readReceipt,
        WireField.deliveryReceipt,
    ]

    /// Fields of the stored channel that a new render is compared with: a grown history
    /// offset, changed operators and pinned messages (`updateDerivedMessageFields`).
    static let comparedKeys = [WireField.tsMessageOffset, WireField.operators, WireField.pinnedMessageIDs]

    /// What a render for the user reads of the stored channel: both lists, each name once.
    static let keysReadForUserRender = viewDependentKeys + comparedKeys.filter { !viewDependentKeys.contains($0) }

    /// Stores a channel the server sent. A render for this user (it has `member_state`)
    /// replaces every per-user field, `last_message` included (absent: none visible to the
    /// user); a shared render (no per-user fields) keeps the cached per-user fields. Fields
    /// of other views are kept when absent. A grown `ts_message_offset` removes the
    /// messages the user can no longer see. `changedMembers` (from an event whose channel
    /// comes without `members`, PROTOCOL.md §9.1) replace those members in the stored list.
    ///
    /// A channel that is not from the event stream (`fromEvent` false: a changelog, a list
    /// page, an operation's answer) may have been rendered before events that were applied
    /// while it travelled. Members' read and delivery receipts change through events that
    /// name only the member they move, so such an answer must not take them back: for a
    /// member in both lists the later `read_ts` and `delivered_ts` are kept (they only grow
    /// while a membership lasts; a new membership comes with an event that renders the list).
    func storeChannel(_ channel: JSONValue, changedMembers: [JSONValue] = [], fromEvent: Bool = false) throws(ParleyError) {
        guard case .object(var incoming) = channel, let url = incoming[WireField.channelURL]?.stringValue, !url.isEmpty else {
            throw ParleyError(.protocolViolation, "channel: expected an object with a non-empty channel_url")
        }
        if !fromEvent, case .array(let members)? = incoming[WireField.members], let stored = try cache.channelMemberTexts(url: url) {
            incoming[WireField.members] = .array(Self.keepingLaterReceipts(members, stored: stored))
        }
        // The row without its member list: merging into it costs nothing per member. It is
        // read once: the store below writes over it without reading it again.
        let before = try cache.channelRowBefore(url: url)
        let stored = before?.channel
        var merged = incoming
        // Only the answer to creating a channel says whether it was created: not channel state.
        merged[WireField.isCreated] = nil
        var oldOffset: Int64 = 0
        var previous: [String: JSONValue] = [:]
        if let stored {
            let rendersForUser = incoming[WireField.memberState] != nil
            // A render for this user takes from the stored copy only the fields of other views
            // it lacks and what is compared below: those members are read from the stored
            // text, not the whole of it parsed (this runs for every live message).
            let old: [String: JSONValue]? =
                if rendersForUser,
                    let some = CanonicalObjectText.members(named: Self.keysReadForUserRender, in: stored.json)
                {
                    some
                } else if case .object(let whole)? = try? JSONValue.parse(stored.json) {
                    whole
                } else {
                    nil
                }
            if let old {
                previous = old
                oldOffset = old[WireField.tsMessageOffset]?.int64Value ?? 0
                if rendersForUser {
                    for key in Self.viewDependentKeys where merged[key] == nil {
                        if let value = old[key] { merged[key] = value }
                    }
                } else {
                    for (key, value) in old where merged[key] == nil { merged[key] = value }
                }
            }
        }
        let value = JSONValue.object(merged)
        let columns = try ChatCache.ChannelColumns(value)
        var storedText: String?
        var outcome = try cache.upsertChannel(value, columns: columns, storedText: &storedText, before: .read(before))
        // Stored without a member list, the row keeps whether it had one.
        if merged[WireField.members] == nil, !changedMembers.isEmpty,
            try cache.updateChannelMembers(url: url, changedMembers, membersKnown: before?.membersKnown ?? false),
            outcome == .unchanged
        {

            outcome = .updated
        }
        // What the messages after it in this transaction copy from the channel, as stored now.
        contexts[url] = .some(columns.messageContext)

        if outcome != .unchanged {
            let newKey = columns.orderKey
            let current: StoredChannelValue
            if merged[WireField.members] != nil {
                current = StoredChannelValue(value, text: storedText)
            } else {
                let cache = self.cache
                current = StoredChannelValue(
                    reading: { (try? cache.channel(url: url))??.json ?? value.canonicalText }, fallback: value)
            }
            var withoutMembers = merged
            withoutMembers[WireField.members] = nil
            record(.channelUpserted(ChannelUpsert(
                channelWithoutMembers: .object(withoutMembers), stored: current, url: url, oldKey: stored?.orderKey, newKey: newKey)))
        }
        let offset = merged[WireField.tsMessageOffset]?.int64Value ?? 0
        if offset > oldOffset {
            let removed = try cache.truncateHistory(channelURL: url, through: offset)
            if removed > 0 { record(.messagesTruncated(channelURL: url, through: offset, removedCount: removed)) }
        }
        if stored != nil { try updateDerivedMessageFields(url, old: previous, new: merged) }
    }

    /// `members` with each one's `read_ts` and `delivered_ts` raised to the stored member's.
    static func keepingLaterReceipts(_ members: [JSONValue], stored: [String]) -> [JSONValue] {
        // Three fields of each stored member, read from its text without parsing the rest.
        let read = [WireField.deliveredTs, WireField.readTs, WireField.userID]
        var storedByID: [String: [String: JSONValue]] = [:]
        storedByID.reserveCapacity(stored.count)
        for text in stored {
            let fields: [String: JSONValue]? =
                if let some = CanonicalObjectText.members(named: read, in: text) {
                    some
                } else if case .object(let whole)? = try? JSONValue.parse(text) {
                    whole
                } else {
                    nil
                }
            guard let fields, let id = fields[WireField.userID]?.stringValue else { continue }
            storedByID[id] = fields
        }
        guard !storedByID.isEmpty else { return members }
        return members.map { member in
            guard case .object(var fields) = member, let id = fields[WireField.userID]?.stringValue, let old = storedByID[id] else {
                return member
            }
            for key in [WireField.readTs, WireField.deliveredTs] {
                if let before = old[key]?.int64Value, let now = fields[key]?.int64Value, before > now { fields[key] = .int(before) }
            }
            return .object(fields)
        }
    }

    /// Messages carry copies of channel state that no message event reports: the sender's
    /// role (`user.role`, from the channel's operators) and `is_pinned` (from its pinned
    /// ids). When the channel's copy changes, the cached messages are rewritten to match.
    private func updateDerivedMessageFields(_ url: String, old: [String: JSONValue], new: [String: JSONValue]) throws(ParleyError) {
        func ids(_ value: JSONValue?, _ key: String?) -> Set<String>? {
            guard let items = value?.arrayValue else { return nil }
            return Set(items.compactMap { item in key.map { item[$0]?.stringValue } ?? item.int64Value.map(String.init) })
        }
        if let before = ids(old[WireField.operators], WireField.userID), let after = ids(new[WireField.operators], WireField.userID),
            before != after
        {
            for user in before.symmetricDifference(after) {
                let role: JSONValue = .string(after.contains(user) ? "operator" : "")
                for message in try cache.messages(channelURL: url, senderID: user) {
                    try patchMessage(message.messageID) { fields in
                        guard case .object(var sender)? = fields[WireField.user], sender[WireField.role] != nil else { return }
                        sender[WireField.role] = role
                        fields[WireField.user] = .object(sender)
                    }
                }
            }
        }
        if let before = ids(old[WireField.pinnedMessageIDs], nil), let after = ids(new[WireField.pinnedMessageIDs], nil), before != after {
            for id in before.symmetricDifference(after) {
                guard let messageID = Int64(id) else { continue }
                try patchMessage(messageID) { fields in
                    if fields[WireField.isPinned] != nil { fields[WireField.isPinned] = .bool(after.contains(id)) }
                }
            }
        }
    }

    /// Rewrites the cached channel through `change` (when cached).
    func patchChannel(_ url: String, _ change: (inout [String: JSONValue]) -> Void) throws(ParleyError) {
        guard let stored = try cache.channel(url: url, withMembers: false), case .object(var fields) = try JSONValue.parse(stored.json)
        else { return }
        change(&fields)
        try storeChannel(.object(fields))
    }

    /// Removes a channel with its messages (its unsent messages stay: `ChatCache.deleteChannel`).
    func removeChannel(_ url: String, reason: ChannelRemovalReason) throws(ParleyError) {
        if try cache.deleteChannel(url: url) { record(.channelRemoved(url: url, reason: reason)) }
    }

    /// Drops a channel's cached messages, chunks and tokens, keeping the channel (as eviction does).
    func forgetChannelMessages(_ url: String) throws(ParleyError) {
        if try cache.removeChannelMessages(url: url) > 0 { record(.channelMessagesEvicted(channelURL: url)) }
    }

    // MARK: Server messages

    private func recordUpsert(_ outcome: MessageUpsertOutcome, _ message: JSONValue, extendedRange: Bool) throws(ParleyError) {
        let inserted: Bool
        var replaced: String?
        switch outcome {
        case .unchanged: return
        case .inserted: inserted = true
        case .updated: inserted = false
        case .replacedLocal(let reqID):
            inserted = true
            replaced = reqID
        }
        let columns = try ChatCache.MessageColumns(message)
        record(.messageUpserted(MessageUpsert(
            message: message, channelURL: columns.channelURL,
            key: MessageKey(createdAt: columns.createdAt, messageID: columns.messageID),
            inserted: inserted, extendedRange: extendedRange, replacedLocalReqID: replaced)))
    }

    /// Stores a message from the real-time stream (extends the range reaching the newest end).
    @discardableResult
    func appendRealtimeMessage(_ message: JSONValue) throws(ParleyError) -> MessageUpsertOutcome {
        guard let message = try prepared(message) else { return .unchanged }
        let result = try cache.appendRealtimeMessage(message)
        try recordUpsert(result.outcome, message, extendedRange: result.isContinuous)
        return result.outcome
    }

    /// Stores one message (newer-only unless `force`).
    @discardableResult
    func storeMessage(_ message: JSONValue, force: Bool = false) throws(ParleyError) -> MessageUpsertOutcome {
        guard let message = try prepared(message) else {
            // Hidden from the user, but its replies may be visible and summarize it.
            try updateReplies(of: message)
            return .unchanged
        }
        let outcome = try cache.upsertMessage(message, force: force)
        try recordUpsert(outcome, message, extendedRange: false)
        // Also when new here: replies may be cached from before the parent was.
        if outcome == .updated || outcome == .inserted { try updateReplies(of: message) }
        return outcome
    }

    /// A changed message (an event's, a changelog's): stored when cached (newer-only unless
    /// `force`). One the cache does not hold stays out, as reactions, polls and thread info of
    /// such messages do (an event renders its poll without the user's votes; new messages come
    /// by listing); its cached replies still summarize it.
    func updateCachedMessage(_ message: JSONValue, force: Bool = false) throws(ParleyError) {
        guard let id = WireMessage(message).messageID, try cache.message(id: id) != nil else {
            try updateReplies(of: message)
            return
        }
        try storeMessage(message, force: force)
    }

    /// Replies carry a summary of their parent (`parent_message_info`); an edit of the
    /// parent rewrites it, a deletion removes it (as the server renders them).
    func updateReplies(of parent: JSONValue?, deletedID: Int64? = nil) throws(ParleyError) {
        let parentMessage = parent.map(WireMessage.init)
        guard let parentID = deletedID ?? parentMessage?.messageID, (parentMessage?.parentMessageID ?? 0) == 0 else {
            return
        }
        for reply in try cache.replies(to: parentID) {
            try patchMessage(reply.messageID) { fields in
                guard case .object(var info)? = fields[WireField.parentMessageInfo] else { return }
                guard let parent else {
                    fields[WireField.parentMessageInfo] = nil
                    return
                }
                Self.summarize(parent, into: &info)
                fields[WireField.parentMessageInfo] = .object(info)
            }
        }
    }

    /// The parent's fields a reply's `parent_message_info` repeats.
    private static func summarize(_ parent: JSONValue, into info: inout [String: JSONValue]) {
        for key in [WireField.message, WireField.customType, WireField.type] { if let value = parent[key] { info[key] = value } }
    }

    /// A reply's summary of its parent as the cached parent reads, when cached. A replayed
    /// event renders the parent as it was when the reply was sent; an edit of the parent the
    /// cache already holds (from a changelog) comes again as an event that changes nothing.
    private func mirrorCachedParent(_ fields: inout [String: JSONValue]) throws(ParleyError) {
        guard case .object(var info)? = fields[WireField.parentMessageInfo],
              let parentID = fields[WireField.parentMessageID]?.int64Value, parentID != 0,
              let stored = try cache.message(id: parentID)
        else { return }
        Self.summarize(try JSONValue.parse(stored.json), into: &info)
        fields[WireField.parentMessageInfo] = .object(info)
    }

    /// Stores messages of a list answer.
    func storeMessages(_ messages: [JSONValue]) throws(ParleyError) {
        var kept: [JSONValue] = []
        kept.reserveCapacity(messages.count)
        for message in messages {
            if let message = try prepared(message) { kept.append(message) }
        }
        let messages = kept
        let outcomes = try cache.upsertMessages(messages)
        for (outcome, message) in zip(outcomes, messages) {
            try recordUpsert(outcome, message, extendedRange: false)
            // The parent's own event may come after and change nothing. A page's new messages
            // cost no lookup: a parent's event or changelog reaches its cached replies first.
            if outcome == .updated { try updateReplies(of: message) }
        }
    }

    /// A message as this cache keeps it, nil when the user no longer sees it (created at or
    /// before the channel's history offset: a replayed event may bring it back after the
    /// history was cut). Its copies of channel state (the sender's `role`, `is_pinned`) are
    /// set from the cached channel: a replayed event carries them as they were when it was
    /// sent, the channel as it is now. Its poll's votes and its parent's summary are the
    /// cache's whether or not the channel is cached (a send's answer may come first).
    private func prepared(_ message: JSONValue) throws(ParleyError) -> JSONValue? {
        guard case .object(var fields) = message, let url = fields[WireField.channelURL]?.stringValue else { return message }
        if case .object(var poll)? = fields[WireField.poll], poll[WireField.votedOptionIDs] == nil {
            // A message event's copy of the poll is every recipient's, without anyone's votes;
            // the user's own come with the poll's events and renders for the user.
            poll[WireField.votedOptionIDs] = try ownVotes(pollID: poll[WireField.id]?.int64Value,
                                                          messageID: fields[WireField.messageID]?.int64Value)
            fields[WireField.poll] = .object(poll)
        }
        try mirrorCachedParent(&fields)
        let context: MessageChannelContext?
        if let known = contexts[url] {
            context = known
        } else {
            context = try cache.messageContext(channelURL: url)
            contexts[url] = context
        }
        guard let context else { return .object(fields) }
        if let createdAt = fields[WireField.createdAt]?.int64Value, createdAt <= context.historyOffset { return nil }
        if let operators = context.operatorIDs, case .object(var sender)? = fields[WireField.user], sender[WireField.role] != nil,
            let id = sender[WireField.userID]?.stringValue
        {
            sender[WireField.role] = .string(operators.contains(id) ? "operator" : "")
            fields[WireField.user] = .object(sender)
        }
        if let pinned = context.pinnedMessageIDs, fields[WireField.isPinned] != nil, let id = fields[WireField.messageID]?.int64Value {
            fields[WireField.isPinned] = .bool(pinned.contains(id))
        }
        return .object(fields)
    }

    /// The user's votes of the poll as the cached message carrying it has them ([] if none).
    private func ownVotes(pollID: Int64?, messageID: Int64?) throws(ParleyError) -> JSONValue {
        guard let pollID, let messageID, let stored = try cache.message(id: messageID),
              let cached = try JSONValue.parse(stored.json)[WireField.poll].map(WirePoll.init), cached.id == pollID,
              let votes = cached.votedOptionIDs
        else { return .array([]) }
        return votes
    }

    /// A poll as an event, an operation or a poll changelog brought it: the cached message
    /// carrying it (`message_id`) shows it from now on. Polls no message carries yet, or
    /// whose message is not cached, are not kept.
    func storePoll(_ poll: JSONValue) throws(ParleyError) {
        let wire = WirePoll(poll)
        guard case .object(var fields) = poll, let messageID = wire.messageID, messageID > 0 else { return }
        if fields[WireField.votedOptionIDs] == nil {
            fields[WireField.votedOptionIDs] = try ownVotes(pollID: wire.id, messageID: messageID)
        }
        try patchMessage(messageID) { message in message[WireField.poll] = .object(fields) }
    }

    /// Poll `pollID` of the channel was deleted: the cached message that carried it shows none.
    func removePoll(_ pollID: Int64, channelURL: String) throws(ParleyError) {
        guard let messageID = try cache.messageID(carryingPoll: pollID, channelURL: channelURL) else { return }
        try patchMessage(messageID) { message in message[WireField.poll] = nil }
    }

    /// Rewrites a cached message through `change` (when cached): reactions and thread info
    /// do not move `updated_at`, so the write is forced.
    func patchMessage(_ messageID: Int64, _ change: (inout [String: JSONValue]) -> Void) throws(ParleyError) {
        guard let stored = try cache.message(id: messageID), case .object(var fields) = try JSONValue.parse(stored.json) else { return }
        change(&fields)
        try storeMessage(.object(fields), force: true)
    }

    /// Removes a server message; true when it was cached.
    @discardableResult
    func removeMessage(_ messageID: Int64) throws(ParleyError) -> Bool {
        // Replies summarize their parent even when the parent itself is not cached.
        try updateReplies(of: nil, deletedID: messageID)
        guard let stored = try cache.message(id: messageID), try cache.deleteMessage(messageID: messageID) else { return false }
        record(.messageRemoved(channelURL: stored.channelURL, messageID: messageID))
        return true
    }

    /// Removes the channel's messages created at or before `offset` (reset history).
    func truncateHistory(channelURL: String, through offset: Int64) throws(ParleyError) {
        let removed = try cache.truncateHistory(channelURL: channelURL, through: offset)
        if removed > 0 { record(.messagesTruncated(channelURL: channelURL, through: offset, removedCount: removed)) }
    }

    /// Records a continuous range of a channel's messages.
    func addContinuousRange(
        channelURL: String, scope: String, from start: MessageKey, to end: MessageKey, reachesOldest: Bool, reachesNewest: Bool
    ) throws(ParleyError) {
        let chunk = try cache.addContinuousRange(
            channelURL: channelURL, scope: scope, from: start, to: end, reachesOldest: reachesOldest, reachesNewest: reachesNewest)
        record(.rangeExtended(chunk))
    }

    /// No range (of the channel, or of any channel) reaches the newest end any more.
    func forgetNewestEnd(channelURL: String? = nil) throws(ParleyError) {
        try cache.clearReachesNewest(channelURL: channelURL)
        record(.newestEndUnknown(channelURL: channelURL))
    }

    // MARK: Local messages (sending)

    /// Stores a pending message and its outbox request together.
    func insertPending(_ message: JSONValue, outbox: OutboxRequest) throws(ParleyError) -> CachedLocalMessage {
        let stored = try cache.insertPendingMessage(message, outbox: outbox)
        try recordLocal(stored, status: .pending, error: nil)
        return stored
    }

    private func recordLocal(
        _ local: CachedLocalMessage, status: LocalMessageStatus, error: ParleyError?, dropped: Bool = false
    ) throws(ParleyError) {
        var message = try JSONValue.parse(local.json)
        if status == .failed, let error, case .object(var fields) = message {
            fields["error_code"] = .int(Int64(error.code.rawValue))
            fields["error_message"] = .string(error.message)
            message = .object(fields)
        } else if status == .canceled, case .object(var fields) = message {
            fields["sending_status"] = .string(LocalMessageStatus.canceled.rawValue)
            message = .object(fields)
        }
        record(.localMessageStatusChanged(LocalMessageChange(
            reqID: local.reqID, channelURL: local.channelURL, status: status, message: message, error: error, dropped: dropped)))
    }

    /// A failed message is pending again (resend; `resetAttempts` when the application asked).
    func markPending(reqID: String, resetAttempts: Bool = true) throws(ParleyError) {
        guard try cache.markPending(reqID: reqID, resetAttempts: resetAttempts), let local = try cache.localMessage(reqID: reqID) else {
            return
        }
        try recordLocal(local, status: .pending, error: nil)
    }

    /// A send failed and the message goes with its failure (resend policy none): the local
    /// message and its outbox row are removed, the change says failed and dropped.
    func dropFailed(reqID: String, error: ParleyError) throws(ParleyError) {
        guard let local = try cache.localMessage(reqID: reqID), try cache.removeLocalMessage(reqID: reqID) else { return }
        var failed = local
        if var fields = try? JSONReader.parse(local.json, path: "local message", errorCode: .cache).fields {
            fields["sending_status"] = .string(LocalMessageStatus.failed.rawValue)
            failed = CachedLocalMessage(
                reqID: local.reqID, channelURL: local.channelURL, createdAt: local.createdAt, status: .failed,
                errorCode: error.code.rawValue, errorMessage: error.message, json: JSONValue.object(fields).canonicalText)
        }
        try recordLocal(failed, status: .failed, error: error, dropped: true)
    }

    /// Keeps at most `limit` failed messages in the channel: the oldest others are removed
    /// (reported as canceled). Returns their req_ids.
    func trimFailed(channelURL: String, keeping limit: Int) throws(ParleyError) -> [String] {
        let failed = try cache.localMessages(channelURL: channelURL, status: .failed)
        guard failed.count > limit else { return [] }
        let excess = failed.prefix(failed.count - limit)
        for local in excess { try cancelLocal(local) }
        return excess.map(\.reqID)
    }

    /// A pending message failed (`retryable`: auto-resend may try again).
    func markFailed(reqID: String, error: ParleyError, retryable: Bool) throws(ParleyError) {
        guard try cache.markFailed(reqID: reqID, error: error, retryable: retryable),
            let local = try cache.localMessage(reqID: reqID)
        else { return }
        try recordLocal(local, status: .failed, error: error)
    }

    /// Removes a local message and its outbox row (cancel, remove failed).
    func cancelLocal(_ local: CachedLocalMessage) throws(ParleyError) {
        guard try cache.removeLocalMessage(reqID: local.reqID) else { return }
        try recordLocal(local, status: .canceled, error: nil)
    }

    /// A send was delivered: the server's copy replaces the local one (once), and the
    /// success is recorded even when the echo replaced it already.
    func confirmSent(reqID: String, channelURL: String, message: JSONValue) throws(ParleyError) {
        // An answer that is not a storable message (never from parley-server) still confirms
        // the send; the local copy must not stay behind either way.
        if (try? ChatCache.MessageColumns(message)) != nil { try appendRealtimeMessage(message) }
        try cache.removeLocalMessage(reqID: reqID)
        var confirmed = message
        if case .object(var fields) = message {
            fields["sending_status"] = .string(LocalMessageStatus.succeeded.rawValue)
            confirmed = .object(fields)
        }
        record(.localMessageStatusChanged(LocalMessageChange(
            reqID: reqID, channelURL: channelURL, status: .succeeded, message: confirmed, error: nil)))
    }

    // MARK: Bookkeeping (no change a view sees)

    func setSyncToken(_ token: String, scope: String) throws(ParleyError) { try cache.setSyncToken(token, scope: scope) }
    func removeSyncToken(scope: String) throws(ParleyError) { try cache.removeSyncToken(scope: scope) }
    func removeChannelListMarks() throws(ParleyError) { try cache.removeChannelListMarks() }
    func setMetaValue(_ value: String, forKey key: String) throws(ParleyError) { try cache.setMetaValue(value, forKey: key) }
    func touchChannel(url: String, at time: Int64) throws(ParleyError) { try cache.touchChannel(url: url, at: time) }
    func recordOutboxAttempt(reqID: String) throws(ParleyError) { try cache.recordOutboxAttempt(reqID: reqID) }

    // MARK: Whole-cache

    /// Keeps the cache under its size limit (whole channels' messages, least recently read first).
    func evictIfNeeded(protecting: Set<String> = []) throws(ParleyError) -> EvictionReport {
        let report = try cache.evictIfNeeded(protecting: protecting)
        for url in report.evictedChannelURLs { record(.channelMessagesEvicted(channelURL: url)) }
        return report
    }
}
