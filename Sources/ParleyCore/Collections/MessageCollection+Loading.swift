// The message collection's loads: the start (cache, then the server's page that replaces
// it), pages both ways (from the cache inside a chunk, else from the server, whose answer is
// stored and recorded as a chunk), the gap check after a reconnection, and the server's
// page after a start that could not reach it. All run on the engine queue, one at a time.

/// A page of the server's message listing (docs/PROTOCOL.md §7.2), in key order.
struct ServerMessagePage {
    var messages: [JSONValue]
    var keys: [MessageKey]
    var hasPrev: Bool
    var hasNext: Bool

    init(_ answer: JSONValue, channelURL: String, listKey: String = "messages") throws(ParleyError) {
        guard let list = answer[listKey]?.arrayValue else {
            throw ParleyError(.protocolViolation, "message list: expected \(listKey) (an array)")
        }
        var pairs: [(MessageKey, JSONValue)] = []
        for (index, message) in list.enumerated() {
            let columns: ChatCache.MessageColumns
            do throws(ParleyError) {
                columns = try ChatCache.MessageColumns(message)
            } catch {
                throw ParleyError(.protocolViolation, "message list: \(listKey)[\(index)]: \(error.message)")
            }
            guard columns.channelURL == channelURL else {
                throw ParleyError(.protocolViolation, "message list: \(listKey)[\(index)] belongs to another channel")
            }
            pairs.append((MessageKey(createdAt: columns.createdAt, messageID: columns.messageID), message))
        }
        pairs.sort { $0.0 < $1.0 }
        messages = pairs.map(\.1)
        keys = pairs.map(\.0)
        hasPrev = answer["has_prev"]?.boolValue ?? false
        hasNext = answer["has_next"]?.boolValue ?? false
    }
}

extension MessageKey {
    /// The key just before this one, nil for the first possible key.
    var predecessor: MessageKey? {
        if messageID > .min { return MessageKey(createdAt: createdAt, messageID: messageID - 1) }
        if createdAt > .min { return MessageKey(createdAt: createdAt - 1, messageID: .max) }
        return nil
    }

    var successor: MessageKey? { ChatCache.successor(of: self) }
}

extension MessageCollection {
    /// Where a listing is anchored.
    enum Anchor {
        /// The newest end (the server's "now").
        case now
        /// The older side holds `created_at <= ms`, the newer side `created_at > ms`.
        case time(Int64)
        /// Sides strictly before / after the key.
        case key(MessageKey)
    }

    func listPath(_ anchor: Anchor, previous: Int, next: Int) -> String {
        var path = "/v3/group_channels/\(URLEncoding.encodePathSegment(channelURL))/messages?prev_limit=\(previous)"
            + "&next_limit=\(next)&reverse=false" + params.serverQuery
        switch anchor {
        case .now:
            break
        case .time(let ms):
            path += "&message_ts=\(max(0, ms))&include=true"
        case .key(let key) where key.messageID == .max:
            // Before (T, max) is created_at <= T; after it, created_at > T.
            path += "&message_ts=\(max(0, key.createdAt))&include=true"
        case .key(let key) where key.messageID == .min:
            // Before (T, min) is created_at <= T - 1; after it, created_at > T - 1.
            path += "&message_ts=\(key.createdAt > 0 ? key.createdAt - 1 : 0)&include=true"
        case .key(let key):
            path += "&message_ts=\(key.createdAt)&message_id=\(key.messageID)&include=false"
        }
        return path
    }

    /// The older side of the first page ends here: messages at or before it (`created_at`
    /// up to the starting point, or just before it when not inclusive). nil: the newest end.
    var startAnchorTime: Int64? {
        // A point in the future is the newest end: nothing can be created after it yet.
        guard startingPoint != Self.newestStartingPoint, startingPoint <= Engine.nowMs() else { return nil }
        return params.isInclusive ? startingPoint : startingPoint - 1
    }

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
        guard let cache = engine.cache else {
            let error = ParleyError.invalidState("start: the client has no cache open")
            complete(cacheResult, .failure(error))
            return fail(apiResult, error)
        }
        let anchorTime = startAnchorTime
        let anchorKey = anchorTime.map { MessageKey(createdAt: $0, messageID: .max) } ?? .newest
        let filter = view.filter
        let scope = filter.continuityScope
        var older: [CachedMessage] = []
        var newer: [CachedMessage] = []
        var locals: [CachedLocalMessage] = []
        var provesOldest = false
        do throws(ParleyError) {
            older = try cache.messages(
                channelURL: channelURL, before: anchorKey, inclusive: true, limit: params.previousResultSize, filter: filter)
            if anchorTime != nil && params.nextResultSize > 0 {
                newer = try cache.messages(channelURL: channelURL, after: anchorKey, limit: params.nextResultSize, filter: filter)
            }
            locals = try cache.localMessages(channelURL: channelURL)
            if older.count < params.previousResultSize, let first = older.first?.key ?? (anchorTime == nil ? nil : anchorKey),
                let chunk = try cache.chunk(channelURL: channelURL, scope: scope, containing: first)
            {
                provesOldest = chunk.reachesOldest
            }
        } catch {
            engine.log(.warning, "message collection: reading the cache failed: \(error)")
        }
        view.started = true
        for message in older + newer {
            view.put(.text(message.json, reqID: message.reqID), key: message.key, id: message.messageID)
        }
        for local in locals {
            guard let value = try? JSONValue.parse(local.json), filter.matches(value) else { continue }
            view.insertLocal(LocalEntry(
                reqID: local.reqID, createdAt: local.createdAt, status: local.status == .pending ? .pending : .failed, message: value))
        }
        view.low = view.keys.first ?? anchorKey
        view.high = anchorTime == nil ? .newest : (view.keys.last.map { max($0, anchorKey) } ?? anchorKey)
        view.hasPrevious = !provesOldest
        view.hasNext = anchorTime != nil
        complete(cacheResult, .success(wholeList()))
        view.running = { error in apiResult(.failure(error)) }
        guard engine.session.current != nil else {
            return fail(apiResult, ParleyError(.network, "start: offline; the view shows the cache until the server's page follows"))
        }
        refreshChannel()
        loadStartPage(background: false, apiResult)
    }

    /// The start's reload after a start that only reached the cache.
    private func performReload() {
        guard view.started, !view.verified, engine.session.current != nil else { return operationFinished() }
        loadStartPage(background: true, nil)
    }

    /// Gets the server's page around the starting point and makes it the view (and the
    /// cache's copy of that range). In the background its difference is reported as events.
    private func loadStartPage(background: Bool, _ apiResult: MessagesCompletion?) {
        let anchorTime = startAnchorTime
        let next = anchorTime == nil ? 0 : params.nextResultSize
        let path = listPath(anchorTime.map(Anchor.time) ?? .now, previous: params.previousResultSize, next: next)
        let liveAtRequest = engine.isStreamOpen
        beginServerLoad()
        engine.call("GET", path) { result in
            guard self.view.running != nil else { return }  // disposed meanwhile
            do throws(ParleyError) {
                let page = try ServerMessagePage(try result.get(), channelURL: self.channelURL)
                let anchorKey = anchorTime.map { MessageKey(createdAt: $0, messageID: .max) } ?? .newest
                let coveredLow: MessageKey = page.hasPrev ? (page.keys.first ?? anchorKey) : .oldest
                let coveredHigh: MessageKey =
                    if anchorTime == nil { .newest } else if next == 0 { anchorKey } else { page.hasNext ? (page.keys.last ?? anchorKey) : .newest }
                let live = coveredHigh == .newest && liveAtRequest && !self.view.droppedDuringLoad && self.engine.isStreamOpen
                let stored = try self.storePage(
                    page.messages, from: coveredLow, through: coveredHigh, reachesOldest: !page.hasPrev, reachesNewest: live)
                let before = background ? Dictionary(zip(self.view.keys.map(\.messageID), self.view.messages), uniquingKeysWith: { a, _ in a }) : [:]
                self.view.removeAll()
                for message in stored {
                    self.view.put(message.item, key: message.key, id: message.key.messageID)
                    _ = self.adoptConfirmedLocal(message.item)
                }
                self.view.low = coveredLow
                self.view.hasPrevious = page.hasPrev
                self.view.verified = true
                if coveredHigh == .newest {
                    self.view.hasNext = false
                    self.view.high = .newest
                    self.view.gapCheckOwed = false
                    self.view.waitsForFetchNext = false
                    if !live { self.stopAtLastMessage() }
                } else {
                    self.view.hasNext = page.hasNext
                    self.view.high = coveredHigh
                    self.view.gapCheckOwed = false
                }
                var events = MessageEvents()
                // Before reconciling: the page's copies of messages still shown as pending or failed.
                let replacing = Set(zip(self.view.keys, self.view.messages).filter { self.replacesShownLocal($0.1) }.map(\.0.messageID))
                self.reconcileLocals(into: &events)
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
                    if let apiResult { self.complete(apiResult, .success(self.wholeList())) }
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
        guard let cache = engine.cache else { return fail(completion, .invalidState("load_previous: the client has no cache open")) }
        let size = params.previousResultSize
        let scope = view.filter.continuityScope
        let low = view.low
        if let cached = try? cache.messages(channelURL: channelURL, before: low, limit: size + 1, filter: view.filter) {
            var page: [CachedMessage]?
            var more = true
            if cached.count == size + 1, (try? cache.chunkCovers(channelURL: channelURL, scope: scope, from: cached[0].key, to: low)) == true {
                page = Array(cached.dropFirst())
            } else if cached.count <= size, let chunk = try? cache.chunk(channelURL: channelURL, scope: scope, containing: low),
                chunk.reachesOldest, chunk.start <= (cached.first?.key ?? low)
            {
                page = cached
                more = false
            }
            if let page {
                let added = showCached(page)
                view.low = more ? (page.first?.key ?? low) : .oldest
                view.hasPrevious = more
                complete(completion, .success(added))
                return operationFinished()
            }
        }
        guard engine.session.current != nil else {
            return fail(completion, ParleyError(.network, "load_previous: offline, and the cache does not hold these messages continuously"))
        }
        let path = listPath(.key(low), previous: size, next: 0)
        beginServerLoad()
        engine.call("GET", path) { result in
            guard self.view.running != nil else { return }
            do throws(ParleyError) {
                let page = try ServerMessagePage(try result.get(), channelURL: self.channelURL)
                let coveredLow: MessageKey = page.hasPrev ? (page.keys.first ?? low) : .oldest
                var added: [MessageItem] = []
                if let through = low.predecessor, coveredLow <= through {
                    added = self.showStored(try self.storePage(
                        page.messages, from: coveredLow, through: through, reachesOldest: !page.hasPrev, reachesNewest: false))
                }
                self.view.low = coveredLow
                self.view.hasPrevious = page.hasPrev
                self.finishServerPage(completion, added: added)
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
        guard let cache = engine.cache else { return fail(completion, .invalidState("load_next: the client has no cache open")) }
        let size = params.nextPageSize
        let scope = view.filter.continuityScope
        let high = view.high
        if let cached = try? cache.messages(channelURL: channelURL, after: high, limit: size + 1, filter: view.filter) {
            var page: [CachedMessage]?
            var more = true
            if cached.count == size + 1,
                (try? cache.chunkCovers(channelURL: channelURL, scope: scope, from: high, to: cached[size].key)) == true
            {
                page = Array(cached.prefix(size))
            } else if cached.count <= size, engine.isStreamOpen, !view.catchingUp,
                let chunk = try? cache.chunk(channelURL: channelURL, scope: scope, containing: high),
                chunk.reachesNewest, chunk.end >= (cached.last?.key ?? high)
            {
                page = cached
                more = false
            }
            if let page {
                let added = showCached(page)
                view.high = more ? (page.last?.key ?? high) : .newest
                view.hasNext = more
                if !more {
                    view.gapCheckOwed = false
                    view.waitsForFetchNext = false
                }
                complete(completion, .success(added))
                return operationFinished()
            }
        }
        guard engine.session.current != nil else {
            return fail(completion, ParleyError(.network, "load_next: offline, and the cache does not hold these messages continuously"))
        }
        let path = listPath(.key(high), previous: 0, next: size)
        let liveAtRequest = engine.isStreamOpen
        beginServerLoad()
        engine.call("GET", path) { result in
            guard self.view.running != nil else { return }
            do throws(ParleyError) {
                let page = try ServerMessagePage(try result.get(), channelURL: self.channelURL)
                let coveredHigh: MessageKey = page.hasNext ? (page.keys.last ?? high) : .newest
                let live = !page.hasNext && liveAtRequest && !self.view.droppedDuringLoad && self.engine.isStreamOpen
                var added: [MessageItem] = []
                if let from = high.successor, from <= coveredHigh {
                    added = self.showStored(try self.storePage(
                        page.messages, from: from, through: coveredHigh, reachesOldest: false, reachesNewest: live))
                }
                self.view.hasNext = page.hasNext
                self.view.high = coveredHigh
                if coveredHigh == .newest {
                    // The application fetched up to the end: what the stream may still have
                    // missed is filled like any gap.
                    self.view.gapCheckOwed = false
                    self.view.waitsForFetchNext = false
                }
                if !page.hasNext && !live { self.stopAtLastMessage() }
                self.finishServerPage(completion, added: added)
            } catch {
                self.complete(completion, .failure(error))
            }
            self.afterServerLoad()
        }
    }

    /// Puts a page the server vouched for (as now stored) into the view; returns the messages
    /// new to it.
    private func showStored(_ stored: [(key: MessageKey, item: MessageItem)]) -> [MessageItem] {
        zip(stored, view.putPage(stored)).filter { $1 && !replacesShownLocal($0.item) }.map(\.0.item)
    }

    /// Ends a page load from the server: local messages its copies confirmed are reported,
    /// then the caller gets the page.
    private func finishServerPage(_ completion: @escaping MessagesCompletion, added: [MessageItem]) {
        var events = MessageEvents()
        reconcileLocals(into: &events)
        report(events, MessageEventContext(source: .localSend, detail: "", sendingStatus: .succeeded))
        complete(completion, .success(added))
    }

    /// Puts a page read from the cache into the view; returns its messages (the stored texts,
    /// not parsed: the cache checked them when it read them).
    private func showCached(_ page: [CachedMessage]) -> [MessageItem] {
        let items = page.map { message in (key: message.key, item: MessageItem.text(message.json, reqID: message.reqID)) }
        _ = view.putPage(items)
        return items.map(\.item)
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
        guard engine.isStreamOpen, !view.catchingUp else { return operationFinished() }  // again after the next catch-up
        gapRound(liveAtRequest: true, filled: 0)
    }

    private func gapRound(liveAtRequest: Bool, filled: Int) {
        let threshold = params.hugeGapThreshold
        let limit = min(threshold, 300)
        let path: String
        let listKey: String
        if let first = view.keys.first, let last = view.keys.last {
            path = "/v3/group_channels/\(URLEncoding.encodePathSegment(channelURL))/messages_gap?prev_start_ts=\(first.createdAt)"
                + "&prev_start_id=\(first.messageID)&prev_end_ts=\(last.createdAt)&prev_end_id=\(last.messageID)"
                + "&prev_cache_count=\(view.keys.count)&huge_gap_threshold=\(max(1, threshold - filled))"
                + "&prev_limit=\(limit)&next_limit=0" + params.serverQuery
            listKey = "prev_messages"
        } else {
            // Nothing shown to compare: everything after the view's end is the gap.
            path = listPath(.key(view.high), previous: 0, next: min(threshold - filled + 1, 200))
            listKey = "messages"
        }
        beginServerLoad()
        engine.call("GET", path) { result in
            guard self.view.running != nil else { return }
            do throws(ParleyError) {
                let answer = try result.get()
                var page: ServerMessagePage?
                let huge: Bool
                let more: Bool
                if listKey == "prev_messages" {
                    guard let isHuge = answer["is_huge_gap"]?.boolValue else {
                        throw ParleyError(.protocolViolation, "messages_gap: expected is_huge_gap")
                    }
                    huge = isHuge
                    more = answer["prev_has_more"]?.boolValue ?? false
                    if !huge { page = try ServerMessagePage(answer, channelURL: self.channelURL, listKey: listKey) }
                } else {
                    let listed = try ServerMessagePage(answer, channelURL: self.channelURL, listKey: listKey)
                    huge = filled + listed.messages.count > threshold
                    more = listed.hasNext
                    page = listed
                }
                guard !huge, let page else {
                    self.view.gapCheckOwed = false
                    self.view.hasNext = true
                    let handler = self.handler
                    self.deliver(self.snapshot()) { handler.hugeGapDetected() }
                    return self.afterServerLoad(checksGapAfter: false)
                }
                let live = !more && liveAtRequest && !self.view.droppedDuringLoad && self.engine.isStreamOpen
                let from = min(page.keys.first ?? .newest, self.view.high.successor ?? .newest)
                let through: MessageKey = more ? (page.keys.last ?? self.view.high) : .newest
                var events = MessageEvents()
                if from <= through {
                    let stored = try self.storePage(page.messages, from: from, through: through, reachesOldest: false, reachesNewest: live)
                    let storedIDs = Set(stored.map(\.key.messageID))
                    for (key, message) in zip(self.view.keys, self.view.messages) where key >= from && key <= through && !storedIDs.contains(key.messageID) {
                        if let removed = self.view.remove(id: key.messageID) { events.add(.deleted, .succeeded, removed) }
                        _ = message
                    }
                    for message in stored where self.view.put(message.item, key: message.key, id: message.key.messageID) {
                        if !self.adoptConfirmedLocal(message.item) && !self.replacesShownLocal(message.item) {
                            events.add(.added, .succeeded, message.item)
                        }
                    }
                }
                self.view.high = through
                if !more {
                    if live {
                        self.view.gapCheckOwed = false
                        self.view.hasNext = false
                    } else {
                        self.stopAtLastMessage()
                    }
                }
                self.reconcileLocals(into: &events)
                self.report(events, MessageEventContext(source: .messageFill, detail: "", sendingStatus: .succeeded))
                if more {
                    let droppedMeanwhile = self.view.droppedDuringLoad
                    self.endServerLoad()
                    self.gapRound(liveAtRequest: liveAtRequest && !droppedMeanwhile, filled: filled + page.messages.count)
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

    private func beginServerLoad() {
        view.loading = true
        view.touched = []
        view.droppedDuringLoad = false
    }

    private func endServerLoad() {
        view.loading = false
        view.touched = []
    }

    /// Ends a server load; a view that reached the newest end without the stream's word
    /// checks the gap as soon as the stream is open.
    private func afterServerLoad(checksGapAfter: Bool = true) {
        let owesGapCheck = checksGapAfter && view.gapCheckOwed && !view.waitsForFetchNext && engine.isStreamOpen && !view.catchingUp
        operationFinished()
        if owesGapCheck && !view.operations.contains(where: { if case .gapCheck = $0.kind { true } else { false } }) {
            view.operations.append(Operation(kind: .gapCheck, fail: { _ in }))
        }
    }

    private func reportBackgroundError(_ error: ParleyError) {
        // Offline is not news to the application: the step runs again after the next connection.
        guard error.code != .network && error.code != .timeout else { return }
        let handler = self.handler
        deliver(snapshot()) { handler.error(error) }
    }

    /// Stores a server page whose range `from...through` the server vouched for: its messages
    /// (except those changed meanwhile by events), minus cached messages of the range that
    /// match the filters but the server no longer lists (deleted unseen), and the range as a
    /// chunk. Returns the range's messages as the cache now holds them.
    func storePage(
        _ messages: [JSONValue], from: MessageKey, through: MessageKey, reachesOldest: Bool, reachesNewest: Bool
    ) throws(ParleyError) -> [(key: MessageKey, item: MessageItem)] {
        guard let writer = engine.store.writer else { throw .invalidState("the client has no cache open") }
        let touched = view.touched
        let filter = view.filter
        let channelURL = self.channelURL
        var listed = Set<Int64>()
        var fresh: [JSONValue] = []
        for message in messages {
            guard let id = message["message_id"]?.int64Value else { continue }
            listed.insert(id)
            if !touched.contains(id) { fresh.append(message) }
        }
        view.ownWrite = true
        defer { view.ownWrite = false }
        let stored = try writer.write(.apiLoad) { transaction throws(ParleyError) -> [CachedMessage] in
            try transaction.storeMessages(fresh)
            var now = try transaction.cache.messages(channelURL: channelURL, from: from, through: through, filter: filter)
            let stale = now.filter { !listed.contains($0.messageID) && !touched.contains($0.messageID) }
            if !stale.isEmpty {
                for message in stale { try transaction.removeMessage(message.messageID) }
                // A removal can rewrite the replies it summarized: read the range as it is now.
                now = try transaction.cache.messages(channelURL: channelURL, from: from, through: through, filter: filter)
            }
            // A chunk ends at a real key: past the last message only the stream can vouch.
            let end = through == .newest ? (now.last?.key ?? from.predecessor ?? from) : through
            let start = min(from, end)
            try transaction.addContinuousRange(
                channelURL: channelURL, scope: filter.continuityScope, from: start, to: end,
                reachesOldest: reachesOldest, reachesNewest: reachesNewest)
            return now
        }
        return stored.map { message in (message.key, MessageItem.text(message.json, reqID: message.reqID)) }
    }
}
