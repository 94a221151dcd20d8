// The message collection's side of the change feed: every committed change of the cache
// that concerns its channel is applied to the view and reported (design note in
// MessageCollection.swift).

/// Reports queued by one step, in order; consecutive ones of the same kind, status and source
/// merge. An item's source is the step's unless it names its own (`message_sent`).
struct MessageEvents {
    enum Kind { case added, updated, deleted }
    var items: [(kind: Kind, status: MessageSendingStatus, source: CollectionEventSource?, messages: [MessageItem])] = []
    var channelChanged = false
    var channelDeleted = false

    mutating func add(_ kind: Kind, _ status: MessageSendingStatus, _ message: JSONValue, source: CollectionEventSource? = nil) {
        add(kind, status, .value(message), source: source)
    }

    mutating func add(_ kind: Kind, _ status: MessageSendingStatus, _ message: MessageItem, source: CollectionEventSource? = nil) {
        if let last = items.last, last.kind == kind, last.status == status, last.source == source {
            items[items.count - 1].messages.append(message)
        } else {
            items.append((kind, status, source, [message]))
        }
    }

    var isEmpty: Bool { items.isEmpty && !channelChanged && !channelDeleted }
}

extension MessageCollection {
    func observe(_ batch: ChangeBatch) {
        freshnessTracker.observe(batch)
        defer { refreshFreshness() }
        switch batch.cause {
        case .catchUpStarted:
            view.catchingUp = true
            if !view.holdsChannel {
                view.holdsChannel = true
                view.shownChannel = view.channel
            }
            return
        case .catchUpFinished:
            view.catchingUp = false
            scheduleCatchUpWork()
            refreshChannel()
            return
        default:
            break
        }
        if case .pageLoad(let load) = batch.cause, load == view.currentLoad { return }
        var events = MessageEvents()
        for change in batch.changes {
            apply(change, into: &events)
        }
        if view.holdsChannel { events.channelChanged = false }
        report(events, context(of: batch.cause))
    }

    /// Refreshes the channel from the server (as the reference's collection does at start and
    /// after each reconnection): a change is stored and reported with source `channel_refresh`;
    /// after a catch-up, with the changes the catch-up made to it (one `channel_updated`).
    func refreshChannel() {
        context.refreshChannel(channelURL) { self.releaseHeldChannel() }
    }

    /// Ends holding back channel changes (unless another catch-up began): the net change is reported.
    private func releaseHeldChannel() {
        guard view.holdsChannel, !view.catchingUp else { return }
        view.holdsChannel = false
        defer { refreshFreshness() }
        guard view.observerID != nil, !view.channelDeleted, let channel = view.channel, channel != view.shownChannel else { return }
        var events = MessageEvents()
        events.channelChanged = true
        report(events, MessageEventContext(source: .channelRefresh, detail: "", sendingStatus: .none))
    }

    /// After a catch-up: the server's page a start could not get, and the gap check.
    func scheduleCatchUpWork() {
        guard view.started else { return }
        let queued = view.operations.map(\.kind)
        if !view.verified && !queued.contains(where: { if case .reload = $0 { true } else { false } }) {
            view.operations.append(Operation(kind: .reload, fail: { _ in }))
        }
        if view.gapCheckOwed && view.waitsForFetchNext {
            // The application fetches what it missed: tell it there may be more.
            if !view.hasNext {
                view.hasNext = true
                deliver(snapshot()) {}
            }
        } else if view.gapCheckOwed && !queued.contains(where: { if case .gapCheck = $0 { true } else { false } }) {
            view.operations.append(Operation(kind: .gapCheck, fail: { _ in }))
        }
        // Never from inside the feed's delivery: a load's own write must not be delivered late.
        context.queue.async { self.runOperations() }
    }

    func context(of cause: ChangeCause) -> MessageEventContext {
        switch cause {
        case .realtime(let event):
            MessageEventContext(source: CollectionEventSource(cause), detail: event.name, sendingStatus: .succeeded)
        case .operation(let name):
            MessageEventContext(source: .localOperation, detail: name, sendingStatus: .succeeded)
        case .messageChangelog:
            MessageEventContext(source: .messageChangelog, detail: "", sendingStatus: .succeeded)
        default:
            MessageEventContext(source: CollectionEventSource(cause), detail: "", sendingStatus: .succeeded)
        }
    }

    private func apply(_ change: CacheChange, into events: inout MessageEvents) {
        switch change {
        case .messageUpserted(let upsert) where upsert.channelURL == channelURL:
            guard view.started else { return }
            if let reqID = upsert.replacedLocalReqID {
                confirmLocal(reqID: reqID, message: upsert.message, key: upsert.key, into: &events)
            } else {
                applyMessage(upsert.message, key: upsert.key, into: &events)
            }
        case .messageRemoved(let url, let id) where url == channelURL:
            if let removed = view.remove(id: id) {
                events.add(.deleted, .succeeded, removed)
            } else if let index = view.confirmedLocalIndex(messageID: id) {
                events.add(.deleted, .succeeded, view.locals.remove(at: index).message)
            }
        case .messagesTruncated(let url, let through, _) where url == channelURL:
            while let first = view.keys.first, first.createdAt <= through, let removed = view.remove(id: first.messageID) {
                events.add(.deleted, .succeeded, removed)
            }
            for local in view.locals where local.status == .succeeded && (WireMessage(local.message).createdAt ?? 0) <= through {
                events.add(.deleted, .succeeded, local.message)
            }
            view.locals.removeAll { $0.status == .succeeded && (WireMessage($0.message).createdAt ?? 0) <= through }
            if view.started && view.low.createdAt <= through {
                view.low = MessageKey(createdAt: through, messageID: .max)
                view.hasPrevious = false
                if view.high < view.low { view.high = view.low }
            }
        case .localMessageStatusChanged(let local) where local.channelURL == channelURL:
            guard view.started else { return }
            applyLocal(local, into: &events)
        case .channelUpserted(let upsert) where upsert.url == channelURL:
            view.channel = upsert.channelText
            events.channelChanged = true
        case .channelRemoved(let url, _) where url == channelURL:
            view.channelDeleted = true
            events.channelDeleted = true
        case .newestEndUnknown(let url) where url == nil || url == channelURL:
            if view.started && view.atNewestEnd {
                stopAtLastMessage()
                if !fillsGapsByItself { view.waitsForFetchNext = true }
            }
        case .channelMessagesEvicted(let url) where url == channelURL:
            forgetMessages(into: &events)
        case .cleared:
            forgetMessages(into: &events)
            // The outbox went with the cache: this client's unsent messages are gone too.
            if view.started {
                for local in view.locals where local.status != .succeeded { events.add(.deleted, local.status, local.message) }
                view.locals.removeAll { $0.status != .succeeded }
            }
            reloadAfterClear()
        default:
            break
        }
    }

    /// `clear_cached_data` emptied the view: it loads the server's page around its starting
    /// point again (reported as `added`, source `api_load`) and refreshes its channel, now if
    /// online, else after the next catch-up (docs/C-API.md "Clearing the cache with views open").
    private func reloadAfterClear() {
        guard view.started else { return }
        view.verified = false
        if !view.operations.contains(where: { if case .reload = $0.kind { true } else { false } }) {
            view.operations.append(Operation(kind: .reload, fail: { _ in }))
        }
        // Never from inside the feed's delivery (as after a catch-up). The channel went with
        // the cache too: refreshed, so that what depends on the cached channel (the history
        // offset, how a hide is attributed) holds again.
        context.queue.async {
            self.runOperations()
            self.refreshChannel()
        }
    }

    /// The stream dropped while the view showed the newest end: messages may arrive unseen,
    /// so the view ends at its last message until a gap check brings it to the end again.
    /// The application's `has_next` stays false: nothing newer is known.
    func stopAtLastMessage() {
        view.high = view.keys.last ?? view.low
        view.gapCheckOwed = true
    }

    /// The cache lost the channel's messages: the view empties and loads again from its bounds.
    private func forgetMessages(into events: inout MessageEvents) {
        guard view.started else { return }
        for message in view.messages { events.add(.deleted, .succeeded, message) }
        if view.atNewestEnd { view.high = view.keys.last ?? view.low }
        if let first = view.keys.first { view.low = first }
        view.removeAll()
        view.high = max(view.low, view.high)
        view.hasPrevious = true
        view.hasNext = true
        view.gapCheckOwed = false
        view.waitsForFetchNext = false
    }

    /// A server message changed (or is new): shown when it lies in the range and matches,
    /// else removed from the view.
    func applyMessage(_ message: JSONValue, key: MessageKey, into events: inout MessageEvents) {
        let matches = view.filter.matches(message)
        if !(matches && view.contains(key)), let index = view.confirmedLocalIndex(messageID: key.messageID) {
            // Shown where the application saw it confirmed (`confirmLocal`), and not (yet)
            // moving into place (`adoptConfirmedLocal`): changed there, or gone.
            if matches {
                view.locals[index].message = message
                events.add(.updated, .succeeded, message)
            } else {
                events.add(.deleted, .succeeded, view.locals.remove(at: index).message)
            }
        } else if view.keyByID[key.messageID] != nil {
            if matches {
                view.put(message, key: key, id: key.messageID)
                events.add(.updated, .succeeded, message)
            } else if let removed = view.remove(id: key.messageID) {
                events.add(.deleted, .succeeded, removed)
            }
        } else if matches && view.contains(key) {
            view.put(message, key: key, id: key.messageID)
            if !adoptConfirmedLocal(.value(message)) { events.add(.added, .succeeded, message) }
        }
    }

    /// A server message a page brought is this client's message the view still shows as
    /// pending or failed (the page's store replaced the local copy before the send's answer
    /// came back): not news, `reportConfirmed` reports it as `updated`, which the application
    /// applies to the pending entry by req_id. Reporting it as added too would show it twice.
    func replacesShownLocal(_ message: MessageItem) -> Bool {
        let reqID = message.reqID
        guard !reqID.isEmpty, let index = view.localIndex(reqID) else { return false }
        return view.locals[index].status != .succeeded
    }

    /// A server message now in range that the view already shows as a confirmed local
    /// message (sent while a gap check was owed): it moves into place, unreported.
    func adoptConfirmedLocal(_ message: MessageItem) -> Bool {
        let reqID = message.reqID
        guard !reqID.isEmpty, let index = view.localIndex(reqID),
            view.locals[index].status == .succeeded
        else { return false }
        view.locals.remove(at: index)
        return true
    }

    /// The server's copy of a message this client sent replaced the local one.
    private func confirmLocal(reqID: String, message: JSONValue, key: MessageKey, into events: inout MessageEvents) {
        let shown = view.filter.matches(message) && view.contains(key)
        if !shown, let index = view.localIndex(reqID), view.gapCheckOwed, !view.hasNext {
            // The view stops at its last message until the gap check: the confirmed message
            // stays where the application saw it, and the fill will not add it again.
            if view.locals[index].status != .succeeded {
                view.locals[index].status = .succeeded
                view.locals[index].message = message
                events.add(.updated, .succeeded, message, source: .messageSent)
            }
            return
        }
        let local = view.localIndex(reqID).map { view.locals.remove(at: $0) }
        let isNew = shown ? view.put(message, key: key, id: key.messageID) : false
        if let local {
            if shown {
                events.add(.updated, .succeeded, message, source: .messageSent)
            } else {
                events.add(.deleted, .succeeded, local.message, source: .messageSent)
            }
        } else if isNew {
            events.add(.added, .succeeded, message, source: .messageSent)
        }
    }

    private func applyLocal(_ change: LocalMessageChange, into events: inout MessageEvents) {
        switch change.status {
        case .failed where change.dropped:
            // Resend policy none: the failed message is gone with its failure.
            if let index = view.localIndex(change.reqID) {
                view.locals.remove(at: index)
                events.add(.deleted, .failed, change.message)
            }
        case .pending, .failed:
            let status: MessageSendingStatus = change.status == .pending ? .pending : .failed
            if let index = view.localIndex(change.reqID) {
                view.locals[index].status = status
                view.locals[index].message = change.message
                events.add(.updated, status, change.message)
            } else if view.filter.matches(change.message) {
                view.insertLocal(LocalEntry(
                    reqID: change.reqID, createdAt: WireMessage(change.message).createdAt ?? 0, status: status,
                    message: change.message))
                events.add(.added, status, change.message)
            }
        case .canceled:
            // As the reference: one `updated` with status canceled (the message carries
            // `sending_status: "canceled"`), the message already gone from the view's pending
            // and failed messages when the callback runs (docs/C-API.md).
            if let index = view.localIndex(change.reqID) {
                view.locals.remove(at: index)
                events.add(.updated, .canceled, change.message)
            }
        case .succeeded:
            var message = change.message
            if case .object(var fields) = message {
                fields["sending_status"] = nil
                message = .object(fields)
            }
            if let id = WireMessage(message).messageID, id > 0, let createdAt = WireMessage(message).createdAt {
                confirmLocal(reqID: change.reqID, message: message, key: MessageKey(createdAt: createdAt, messageID: id), into: &events)
            } else if let index = view.localIndex(change.reqID) {
                let removed = view.locals.remove(at: index)
                events.add(.deleted, .succeeded, removed.message, source: .messageSent)
            }
        }
    }

    /// Local messages a page of this view's own load replaced with the server's copies (the
    /// feed's report of that page is not applied to the view): reported as confirmed.
    func reportConfirmed(_ confirmed: [ConfirmedLocal], into events: inout MessageEvents) {
        for local in confirmed {
            guard let index = view.localIndex(local.reqID), view.locals[index].status != .succeeded else { continue }
            let entry = view.locals.remove(at: index)
            if let shown = view.item(at: local.key) {
                events.add(.updated, .succeeded, shown, source: .messageSent)
            } else {
                events.add(.deleted, .succeeded, entry.message, source: .messageSent)
            }
        }
    }

    // MARK: Reporting

    /// The published state as the view is now.
    func snapshot() -> PublishedMessages {
        PublishedMessages(
            messages: view.messages, locals: view.locals.map(\.message),
            hasPrevious: view.hasPrevious, hasNext: view.hasNext)
    }

    /// Messages in the order the application sees them.
    func presentedList(_ messages: [MessageItem]) -> MessageList {
        let omitted = params.omittedMembers
        let list = messages.map { $0.presented(params, omitting: omitted) }
        return MessageList(items: params.reverse ? list.reversed() : list)
    }

    /// Queues the callbacks of `events`, each updating the application's copy first.
    func report(_ events: MessageEvents, _ context: MessageEventContext) {
        guard !events.isEmpty else { return }
        let state = snapshot()
        let channel = view.channel ?? .null
        let handler = self.handler
        let channelURL = self.channelURL
        let items = events.items.map { ($0.kind, $0.status, $0.source, presentedList($0.messages)) }
        let channelChanged = events.channelChanged
        let channelDeleted = events.channelDeleted
        deliver(state) {
            for (kind, status, source, messages) in items {
                var itemContext = context
                itemContext.sendingStatus = status
                if let source { itemContext.source = source }
                switch kind {
                case .added: handler.added(itemContext, channel, messages)
                case .updated: handler.updated(itemContext, channel, messages)
                case .deleted: handler.deleted(itemContext, channel, messages)
                }
            }
            var channelContext = context
            channelContext.sendingStatus = .none
            if channelChanged && !channelDeleted { handler.channelUpdated(channelContext, channel) }
            if channelDeleted { handler.channelDeleted(channelContext, channelURL) }
        }
    }

    /// Queues `job` on the callback context, publishing `state` just before it (skipped once disposed).
    func deliver(_ state: PublishedMessages, _ job: @escaping @Sendable () -> Void) {
        let guardState = self.guardState
        let published = self.published
        dispatcher.enqueue {
            guardState.run {
                published.withLock { $0 = state }
                job()
            }
        }
    }

    /// Queues a load's completion: it runs even after dispose (exactly once); the published
    /// copy is updated only while the view lives. A freshness change the load made is
    /// reported first, so the completion reads the view's new freshness; `origin` is the
    /// result's (`lastLoadOrigin` while the completion runs).
    func complete(_ completion: @escaping MessagesCompletion, _ result: Result<[MessageItem], ParleyError>, origin: PageOrigin = .cache) {
        refreshFreshness()
        let state = snapshot()
        let guardState = self.guardState
        let published = self.published
        let publishedOrigin = self.publishedOrigin
        let outcome = result.map(presentedList)
        let resultOrigin: PageOrigin? = if case .success = result { origin } else { nil }
        dispatcher.enqueue {
            if !guardState.isDisposed { published.withLock { $0 = state } }
            publishedOrigin.withLock { $0 = resultOrigin }
            completion(outcome)
        }
    }

    // MARK: Freshness

    /// The view's own part of a catch-up still runs: the catch-up itself (its changes are
    /// still arriving), the channel refresh after it, the gap check and the reload of a start
    /// that only reached the cache (queued or running).
    var followsUp: Bool {
        view.catchingUp || view.holdsChannel || view.runningFollowUp || view.operations.contains { $0.kind.isFollowUp }
    }

    /// The server vouched for what the view shows: its start page (or the reload of it) came
    /// from the server, and a view at the newest end that owes a gap check has had it.
    var isConfirmed: Bool { view.verified && !(view.gapCheckOwed && !view.waitsForFetchNext) }

    /// Derives the freshness again after a step; a change is queued behind the step's callbacks.
    func refreshFreshness() {
        guard view.observerID != nil else { return }  // disposed: nothing more is reported
        let handler = self.handler
        freshnessTracker.update(
            followUp: followsUp, confirmed: isConfirmed, deliver: { job in self.deliver(self.snapshot(), job) },
            report: { handler.freshnessChanged($0) })
    }

    /// The whole list as shown (for the start's results).
    func wholeList() -> [MessageItem] {
        Array(view.messages) + view.locals.map { .value($0.message) }
    }
}
