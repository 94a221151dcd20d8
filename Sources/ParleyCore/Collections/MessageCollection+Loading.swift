// The message collection's loads: the start (cache, then the server's page that replaces
// it), pages both ways, the gap check after a reconnection, and the server's page after a
// start that could not reach it. Paging (Sync/Paging.swift) reads, fetches and stores each
// page; the view decides which page it wants and brings its range and list to the result.
// All run on the engine queue, one at a time.

extension MessageCollection {
    /// The view's channel and filters, as Paging reads and lists them.
    var scope: MessageScope { MessageScope(channelURL: channelURL, filter: view.filter, serverQuery: params.serverQuery) }

    /// The older side of the first page ends here: messages at or before it (`created_at`
    /// up to the starting point, or just before it when not inclusive). nil: the newest end.
    var startAnchorTime: Int64? {
        // A point in the future is the newest end: nothing can be created after it yet.
        guard startingPoint != Self.newestStartingPoint, startingPoint <= Engine.nowMs() else { return nil }
        return params.isInclusive ? startingPoint : startingPoint - 1
    }

    /// An inclusive start at a timestamp: `previous_result_size` counts the messages before
    /// it, and those created exactly at it come besides (as the reference counts them).
    var startCountsBeforeAnchor: Bool { params.isInclusive && startAnchorTime != nil }

    func perform(_ kind: Operation.Kind) {
        switch kind {
        case .start(let cacheResult, let apiResult): performStart(cacheResult, apiResult)
        case .previous(let completion): performPrevious(completion)
        case .next(let completion): performNext(completion)
        case .gapCheck: performGapCheck()
        case .reload: performReload()
        }
    }

    /// Fails the running load's caller and ends it.
    private func fail(_ completion: @escaping MessagesCompletion, _ error: ParleyError) {
        complete(completion, .failure(error))
        operationFinished()
    }

    // MARK: Start

    private func performStart(_ cacheResult: @escaping MessagesCompletion, _ apiResult: @escaping MessagesCompletion) {
        guard !view.started else {
            let error = ParleyError.invalidState("start: the collection is started already")
            complete(cacheResult, .failure(error))
            return fail(apiResult, error)
        }
        guard context.hasCache else {
            let error = ParleyError.invalidState("start: the client has no cache open")
            complete(cacheResult, .failure(error))
            return fail(apiResult, error)
        }
        let anchorTime = startAnchorTime
        let anchorKey = anchorTime.map { MessageKey(createdAt: $0, messageID: .max) } ?? .newest
        let filter = view.filter
        var cached = CachedStart(messages: [], locals: [], reachesOldest: false)
        do throws(ParleyError) {
            cached = try context.cachedStart(
                scope, anchor: anchorTime.map { _ in anchorKey }, extraAtAnchor: startCountsBeforeAnchor,
                previous: params.previousResultSize, next: params.nextResultSize)
        } catch {
            context.log(.warning, "message collection: reading the cache failed: \(error)")
        }
        view.started = true
        for message in cached.messages {
            view.put(MessageItem(stored: message), key: message.key, id: message.messageID)
        }
        for local in cached.locals {
            guard let value = try? JSONValue.parse(local.json), filter.matches(value) else { continue }
            view.insertLocal(LocalEntry(
                reqID: local.reqID, createdAt: local.createdAt, status: local.status == .pending ? .pending : .failed, message: value))
        }
        // A chunk that reaches the oldest end vouches for the whole older side, as the server's flag does.
        view.low = cached.reachesOldest ? .oldest : (view.keys.first ?? anchorKey)
        view.high = anchorTime == nil ? .newest : (view.keys.last.map { max($0, anchorKey) } ?? anchorKey)
        view.hasPrevious = !cached.reachesOldest
        view.hasNext = anchorTime != nil
        complete(cacheResult, .success(wholeList()), origin: .cache)
        view.running = { error in apiResult(.failure(error)) }
        guard context.isConnected else {
            return fail(apiResult, ParleyError(.network, "start: offline; the view shows the cache until the server's page follows"))
        }
        refreshChannel()
        loadStartPage(background: false, apiResult)
    }

    /// The start's reload after a start that only reached the cache.
    private func performReload() {
        guard view.started, !view.verified, context.isConnected else { return operationFinished() }
        loadStartPage(background: true, nil)
    }

    /// Gets the server's page around the starting point and makes it the view (and the
    /// cache's copy of that range). In the background its difference is reported as events.
    private func loadStartPage(background: Bool, _ apiResult: MessagesCompletion?) {
        view.currentLoad = context.loadStartPage(
            scope, anchorTime: startAnchorTime, extraAtAnchor: startCountsBeforeAnchor, previous: params.previousResultSize,
            next: params.nextResultSize
        ) { _, result in
            guard self.view.running != nil else { return }  // disposed meanwhile
            do throws(ParleyError) {
                let page = try result.get()
                let before = background ? Dictionary(zip(self.view.keys.map(\.messageID), self.view.messages), uniquingKeysWith: { a, _ in a }) : [:]
                self.view.removeAll()
                for message in page.stored.messages {
                    let item = MessageItem(stored: message)
                    self.view.put(item, key: message.key, id: message.messageID)
                    _ = self.adoptConfirmedLocal(item)
                }
                self.view.low = page.low
                self.view.hasPrevious = page.hasPrevious
                self.view.verified = true
                self.view.hasNext = page.hasNext
                self.view.high = page.high
                self.view.gapCheckOwed = false
                if page.high == .newest {
                    self.view.waitsForFetchNext = false
                    if !page.live { self.stopAtLastMessage() }
                }
                var events = MessageEvents()
                // Before confirming: the page's copies of messages still shown as pending or failed.
                let replacing = Set(zip(self.view.keys, self.view.messages).filter { self.replacesShownLocal($0.1) }.map(\.0.messageID))
                self.reportConfirmed(page.stored.confirmedLocals, into: &events)
                if background {
                    var after = Set<Int64>()
                    for (key, message) in zip(self.view.keys, self.view.messages) {
                        after.insert(key.messageID)
                        if let old = before[key.messageID] {
                            if !old.sameContent(as: message) { events.add(.updated, .succeeded, message) }
                        } else if !replacing.contains(key.messageID) {
                            events.add(.added, .succeeded, message)
                        }
                    }
                    for (id, message) in before where !after.contains(id) { events.add(.deleted, .succeeded, message) }
                    self.report(events, MessageEventContext(source: .apiLoad, detail: "", sendingStatus: .succeeded))
                    if events.isEmpty { self.deliver(self.snapshot()) {} }
                } else {
                    self.report(events, MessageEventContext(source: .localSend, detail: "", sendingStatus: .succeeded))
                    if let apiResult { self.complete(apiResult, .success(self.wholeList()), origin: .server) }
                }
            } catch {
                if let apiResult {
                    self.complete(apiResult, .failure(error))
                } else {
                    self.reportBackgroundError(error)
                }
            }
            self.afterServerLoad()
        }
    }

    // MARK: Pages

    private func performPrevious(_ completion: @escaping MessagesCompletion) {
        guard view.started else { return fail(completion, .invalidState("load_previous: call start first")) }
        guard view.hasPrevious else {
            complete(completion, .success([]))
            return operationFinished()
        }
        guard context.hasCache else { return fail(completion, .invalidState("load_previous: the client has no cache open")) }
        let low = view.low
        if let page = context.cachedPage(scope, before: low, size: params.previousResultSize) {
            let added = showCached(page.messages)
            view.low = page.more ? (page.messages.first?.key ?? low) : .oldest
            view.hasPrevious = page.more
            complete(completion, .success(added), origin: .cache)
            return operationFinished()
        }
        guard context.isConnected else {
            return fail(completion, ParleyError(.network, "load_previous: offline, and the cache does not hold these messages continuously"))
        }
        view.currentLoad = context.loadPage(scope, before: low, size: params.previousResultSize) { _, result in
            guard self.view.running != nil else { return }
            do throws(ParleyError) {
                let page = try result.get()
                let added = self.showStored(page.stored.messages)
                self.view.low = page.low
                self.view.hasPrevious = page.hasPrevious
                self.finishServerPage(completion, added: added, confirmed: page.stored.confirmedLocals)
            } catch {
                self.complete(completion, .failure(error))
            }
            self.afterServerLoad()
        }
    }

    private func performNext(_ completion: @escaping MessagesCompletion) {
        guard view.started else { return fail(completion, .invalidState("load_next: call start first")) }
        // A view that does not fill gaps by itself reaches the newest end again this way.
        guard view.hasNext || view.waitsForFetchNext, !view.atNewestEnd else {
            complete(completion, .success([]))
            return operationFinished()
        }
        guard context.hasCache else { return fail(completion, .invalidState("load_next: the client has no cache open")) }
        let high = view.high
        if let page = context.cachedPage(scope, after: high, size: params.nextPageSize, mayReachNewest: !view.catchingUp) {
            let added = showCached(page.messages)
            view.high = page.more ? (page.messages.last?.key ?? high) : .newest
            view.hasNext = page.more
            if !page.more {
                view.gapCheckOwed = false
                view.waitsForFetchNext = false
            }
            complete(completion, .success(added))
            return operationFinished()
        }
        guard context.isConnected else {
            return fail(completion, ParleyError(.network, "load_next: offline, and the cache does not hold these messages continuously"))
        }
        view.currentLoad = context.loadPage(scope, after: high, size: params.nextPageSize) { _, result in
            guard self.view.running != nil else { return }
            do throws(ParleyError) {
                let page = try result.get()
                let added = self.showStored(page.stored.messages)
                self.view.hasNext = page.hasNext
                self.view.high = page.high
                if page.high == .newest {
                    // The application fetched up to the end: what the stream may still have
                    // missed is filled like any gap.
                    self.view.gapCheckOwed = false
                    self.view.waitsForFetchNext = false
                    if !page.live { self.stopAtLastMessage() }
                }
                self.finishServerPage(completion, added: added, confirmed: page.stored.confirmedLocals)
            } catch {
                self.complete(completion, .failure(error))
            }
            self.afterServerLoad()
        }
    }

    /// Puts a page the server vouched for (as now stored) into the view; returns the messages
    /// new to it.
    private func showStored(_ stored: [CachedMessage]) -> [MessageItem] {
        let items = stored.map(MessageItem.init(stored:))
        return zip(items, view.putPage(keys: stored.map(\.key), items: items)).filter { $1 && !replacesShownLocal($0) }.map(\.0)
    }

    /// Ends a page load from the server: local messages its copies confirmed are reported,
    /// then the caller gets the page.
    private func finishServerPage(_ completion: @escaping MessagesCompletion, added: [MessageItem], confirmed: [ConfirmedLocal]) {
        var events = MessageEvents()
        reportConfirmed(confirmed, into: &events)
        report(events, MessageEventContext(source: .localSend, detail: "", sendingStatus: .succeeded))
        complete(completion, .success(added), origin: .server)
    }

    /// Puts a page read from the cache into the view; returns its messages (the stored texts,
    /// not parsed: the cache checked them when it read them).
    private func showCached(_ page: [CachedMessage]) -> [MessageItem] {
        let items = page.map(MessageItem.init(stored:))
        _ = view.putPage(keys: page.map(\.key), items: items)
        return items
    }

    // MARK: Gap check

    /// After a reconnection, for a view that showed the newest end: asks the server what it
    /// missed after its last message. More than the threshold: `hugeGapDetected`; otherwise
    /// the missing messages are stored and reported as added (`message_fill`), and the view
    /// shows the newest end again.
    private func performGapCheck() {
        guard view.started, view.gapCheckOwed, !view.waitsForFetchNext, !view.atNewestEnd, !view.channelDeleted else {
            return operationFinished()
        }
        guard context.isStreamOpen, !view.catchingUp else { return operationFinished() }  // again after the next catch-up
        gapRound(liveAtRequest: true, filled: 0)
    }

    private func gapRound(liveAtRequest: Bool, filled: Int) {
        let shown = view.keys.first.flatMap { first in view.keys.last.map { (first: first, last: $0, count: view.keys.count) } }
        view.currentLoad = context.checkGap(
            scope, shown: shown, high: view.high, threshold: params.hugeGapThreshold, filled: filled, liveAtRequest: liveAtRequest
        ) { _, result in
            guard self.view.running != nil else { return }
            do throws(ParleyError) {
                guard case .filled(let fill) = try result.get() else {
                    self.view.gapCheckOwed = false
                    self.view.hasNext = true
                    let handler = self.handler
                    self.deliver(self.snapshot()) { handler.hugeGapDetected() }
                    return self.afterServerLoad(checksGapAfter: false)
                }
                var events = MessageEvents()
                if fill.from <= fill.through {
                    let storedIDs = Set(fill.stored.messages.map(\.messageID))
                    for key in self.view.keys where key >= fill.from && key <= fill.through && !storedIDs.contains(key.messageID) {
                        if let removed = self.view.remove(id: key.messageID) { events.add(.deleted, .succeeded, removed) }
                    }
                    for message in fill.stored.messages {
                        let item = MessageItem(stored: message)
                        let shown = self.view.item(at: message.key)
                        guard self.view.put(item, key: message.key, id: message.messageID) else {
                            // A shown message the fill brought again, changed while the stream was away.
                            if let shown, !shown.sameContent(as: item) { events.add(.updated, .succeeded, item) }
                            continue
                        }
                        if !self.adoptConfirmedLocal(item) && !self.replacesShownLocal(item) {
                            events.add(.added, .succeeded, item)
                        }
                    }
                }
                self.view.high = fill.through
                if !fill.more {
                    if fill.live {
                        self.view.gapCheckOwed = false
                        self.view.hasNext = false
                    } else {
                        self.stopAtLastMessage()
                    }
                }
                self.reportConfirmed(fill.stored.confirmedLocals, into: &events)
                self.report(events, MessageEventContext(source: .messageFill, detail: "", sendingStatus: .succeeded))
                if fill.more {
                    self.view.currentLoad = nil
                    self.gapRound(liveAtRequest: fill.streamHeld, filled: filled + fill.count)
                    return
                }
            } catch {
                self.reportBackgroundError(error)
            }
            // A failed check waits for the next catch-up: no retry loop against a failing server.
            self.afterServerLoad(checksGapAfter: false)
        }
    }

    // MARK: Shared steps

    /// Ends a server load; a view that reached the newest end without the stream's word
    /// checks the gap as soon as the stream is open.
    private func afterServerLoad(checksGapAfter: Bool = true) {
        let owesGapCheck = checksGapAfter && view.gapCheckOwed && !view.waitsForFetchNext && context.isStreamOpen && !view.catchingUp
        // Queued before the load ends, so that its freshness passes from this load to the check.
        if owesGapCheck && !view.operations.contains(where: { if case .gapCheck = $0.kind { true } else { false } }) {
            view.operations.append(Operation(kind: .gapCheck, fail: { _ in }))
        }
        operationFinished()
    }

    private func reportBackgroundError(_ error: ParleyError) {
        // Offline is not news to the application: the step runs again after the next connection.
        guard error.code != .network && error.code != .timeout else { return }
        let handler = self.handler
        deliver(snapshot()) { handler.error(error) }
    }
}
