// The message search view: the cached messages matching a query, live.
//
// Design note. The view shows a *window* of the cache's search results (Store/
// ChatCache+Search.swift) and keeps it equal to a fresh search of the cache after every
// committed batch of changes (Sync/ChangeFeed.swift), reporting the difference as added /
// updated / deleted:
// - time order: every hit at or newer than the oldest one loaded (all of them once the
//   cache has no older one), so a new matching message is added at the top and nothing
//   leaves the window but what stops matching or leaves the cache;
// - relevance order: the first N hits of the ranked matches, N = `limit` × the loads so far,
//   whatever the number of hits was when they ran: a view equals a new search given as many
//   loads. The ranked matches are a `RelevanceWindow`, formed by the first load: the newest
//   `relevanceWindow` matches then (all of them when fewer) and every newer one that comes
//   later, so that a page costs in proportion to the window, not to every match of a common
//   word, and loads page through one set. `loadOlder` replaces it with the next window down
//   (as many matches, older than it) and starts its pages over. A new better hit pushes the
//   last one shown out (reported deleted), and hits that go make room for the next.
// `hasMore` is true exactly while the cache holds a hit outside the page window but within
// the ranked matches (or the server may have more), and is searched again with the window
// after every change, as is the relevance window's edge (`relevanceWindowEdge`).
// With `searchServer` each load also asks the server (docs/PROTOCOL.md §7.7) for its next
// page and the view shows both, each message once: the cache's copy wins for a message the
// cache holds (it is kept live and judged by the cache's index), the server's copy shows a
// message the cache lacks (kept current by the message events, dropped by a deletion).
// In time order both sources are merged by key. In relevance order the two scores cannot
// be compared: the server's hits come first in the server's order, then the cache's other
// hits in the cache's order.
//
// State lives on the engine queue; loads run one at a time in the order asked. What the
// application reads (`results`, `hasMore`) is a copy updated in callback order.

/// What a search view looks for, and how it pages.
public struct MessageSearchParams: Sendable, Equatable {
    /// Plain text: every word must occur, the last one as a prefix; the words are those the
    /// index makes of the text (`MessageSearchText`).
    /// With `advancedQuery`, an FTS5 query expression (docs/C-API.md "Searching messages").
    public var query: String
    public var advancedQuery = false
    /// Channels, custom types, senders and times; the highlight marks (at most 16 bytes each).
    public var filter = MessageSearchFilter()
    public var order: MessageSearchOrder = .time
    /// Results per load (1–100).
    public var limit = 20
    /// Relevance order: how many of the newest matches a window ranks (`relevanceWindowSizes`).
    public var relevanceWindow = 5_000
    /// Loads also ask the server, which searches every message the user may see.
    public var searchServer = false

    public init(query: String) { self.query = query }

    static let fieldNames: Set<String> = [
        "query", "advanced_query", "channel_urls", "custom_types", "sender_ids", "message_ts_from", "message_ts_to", "order",
        "limit", "highlight_start", "highlight_end", "search_server", "relevance_window",
    ]

    /// Ranking costs a few tenths of a microsecond a match: a page of the largest window takes a
    /// few hundred milliseconds, and a larger one would be no bound on the work.
    public static let relevanceWindowSizes: ClosedRange<Int> = 1...1_000_000

    /// Reads the parameters from their JSON form (the C ABI's and Python's); `query` is
    /// required, the rest optional. Unknown fields and wrong types are refused.
    public init(json: JSONValue) throws(ParleyError) {
        let reader = try JSONReader(json, path: "params")
        try reader.rejectUnknownKeys(allowed: Self.fieldNames)
        query = try reader.string("query")
        advancedQuery = try reader.bool("advanced_query", default: false)
        filter.channelURLs = try reader.optionalStrings("channel_urls") ?? []
        filter.customTypes = try reader.optionalStrings("custom_types") ?? []
        filter.senderIDs = try reader.optionalStrings("sender_ids") ?? []
        filter.createdFrom = try reader.optionalInt("message_ts_from")
        filter.createdTo = try reader.optionalInt("message_ts_to")
        filter.highlightStart = try reader.string("highlight_start", default: filter.highlightStart)
        filter.highlightEnd = try reader.string("highlight_end", default: filter.highlightEnd)
        order = try reader.enumeration("order", default: MessageSearchOrder.time)
        limit = Int(try reader.int("limit", default: 20, in: 1...100))
        let sizes = Self.relevanceWindowSizes
        relevanceWindow = Int(try reader.int("relevance_window", default: 5_000, in: Int64(sizes.lowerBound)...Int64(sizes.upperBound)))
        searchServer = try reader.bool("search_server", default: false)
        try validate()
    }

    /// Refuses what no search can answer, naming the field.
    public func validate() throws(ParleyError) {
        let filter = self.filter
        guard !query.allSatisfy(\.isWhitespace) else { throw .invalidArgument("params.query must not be empty") }
        guard query.count <= 1000 else { throw .invalidArgument("params.query: at most 1000 characters, got \(query.count)") }
        guard (1...100).contains(limit) else { throw .invalidArgument("params.limit: must be 1 to 100, got \(limit)") }
        guard Self.relevanceWindowSizes.contains(relevanceWindow) else {
            throw .invalidArgument("params.relevance_window: must be 1 to 1000000, got \(relevanceWindow)")
        }
        for (name, marker) in [("highlight_start", filter.highlightStart), ("highlight_end", filter.highlightEnd)] where marker.utf8.count > 16 {
            throw .invalidArgument("params.\(name): at most 16 bytes, got \(marker.utf8.count)")
        }
        if let from = filter.createdFrom, let to = filter.createdTo, from > to {
            throw .invalidArgument("params.message_ts_from (\(from)) is after message_ts_to (\(to))")
        }
        // Lists travel comma-separated in the server's query string.
        for (name, list) in [("channel_urls", filter.channelURLs), ("custom_types", filter.customTypes), ("sender_ids", filter.senderIDs)] {
            if let bad = list.first(where: { $0.isEmpty || $0.utf8.contains(0x2C) }) {
                throw .invalidArgument("params.\(name): items must be non-empty and without commas, got '\(bad)'")
            }
        }
        if searchServer && advancedQuery {
            throw .invalidArgument("params: search_server takes plain text only (the server does not read FTS5 expressions)")
        }
    }

    /// The cache's form of the query; nil when the text has no words (nothing matches).
    func cacheQuery() throws(ParleyError) -> CacheSearchQuery? {
        guard let match = advancedQuery ? query : try MessageSearchText.matchExpression(query) else { return nil }
        var result = CacheSearchQuery(match: match)
        result.filter = filter
        result.order = order
        return result
    }

    /// What the server is asked (docs/PROTOCOL.md §7.7).
    var serverQuery: ServerSearchQuery {
        ServerSearchQuery(query: query, filter: filter, byRelevance: order == .relevance, limit: limit)
    }
}

/// One result of a search view.
public struct MessageSearchResult: Sendable, Equatable {
    /// Where the shown copy of the message comes from.
    public enum Origin: String, Sendable {
        case cache
        case server
    }

    public var messageID: Int64
    public var channelURL: String
    public var key: MessageKey
    /// The message (the cache's stored text, or the server's object).
    public var message: JSONText
    /// Its text (or file name) around the matches, the matched words between the markers.
    public var snippet: String
    /// Bigger is more relevant; the cache's and the server's scores are not comparable. The
    /// cache gives 0 in time order (it does not rank there).
    public var score: Double
    public var origin: Origin

    /// `{"message": …, "origin": "cache" | "server", "score": …, "snippet": …}`, built without
    /// parsing the message.
    public var json: JSONText {
        let score = score.isFinite ? JSONValue.double(score).canonicalText : "0"
        return JSONText(
            "{\"message\":\(message.text),\"origin\":\"\(origin.rawValue)\",\"score\":\(score),\"snippet\":"
                + JSONValue.string(snippet).canonicalText + "}")
    }

    init(_ hit: CacheSearchHit) {
        messageID = hit.messageID
        channelURL = hit.channelURL
        key = hit.key
        message = JSONText(hit.json)
        snippet = hit.snippet
        score = hit.score
        origin = .cache
    }

    /// One of the server's results (docs/PROTOCOL.md §7.7).
    init(server entry: WireSearchResult) throws(ParleyError) {
        guard let message = entry.message, let id = message.messageID, id > 0, let createdAt = message.createdAt,
            let channelURL = message.channelURL
        else {
            throw ParleyError(.protocolViolation, "search answer: a result without message.message_id, created_at or channel_url")
        }
        messageID = id
        self.channelURL = channelURL
        key = MessageKey(createdAt: createdAt, messageID: id)
        self.message = JSONText(encoding: message.json)
        snippet = entry.snippet ?? ""
        score = entry.score ?? 0
        origin = .server
    }
}

/// The callbacks of a search view. They run on the client's callback context, one at a time,
/// never after `dispose()` returned. Each list is in the view's order; `results` has the
/// whole view.
public struct MessageSearchHandler: Sendable {
    public var added: @Sendable ([MessageSearchResult]) -> Void
    public var updated: @Sendable ([MessageSearchResult]) -> Void
    public var deleted: @Sendable ([MessageSearchResult]) -> Void
    /// A background step failed (the server's page of a load that still showed the cache's).
    public var error: @Sendable (ParleyError) -> Void
    /// The view's freshness changed (only real changes, in order with the other callbacks).
    public var freshnessChanged: @Sendable (ViewFreshness) -> Void

    public init(
        added: @escaping @Sendable ([MessageSearchResult]) -> Void = { _ in },
        updated: @escaping @Sendable ([MessageSearchResult]) -> Void = { _ in },
        deleted: @escaping @Sendable ([MessageSearchResult]) -> Void = { _ in },
        error: @escaping @Sendable (ParleyError) -> Void = { _ in },
        freshnessChanged: @escaping @Sendable (ViewFreshness) -> Void = { _ in }
    ) {
        self.added = added
        self.updated = updated
        self.deleted = deleted
        self.error = error
        self.freshnessChanged = freshnessChanged
    }
}

public typealias MessageSearchCompletion = @Sendable (Result<[MessageSearchResult], ParleyError>) -> Void

public final class MessageSearch: Sendable {
    public let params: MessageSearchParams
    let context: any SearchViewContext
    let dispatcher: CallbackDispatcher
    let handler: MessageSearchHandler
    let guardState = DisposeGuard()
    let published = Locked(PublishedSearch())
    /// Engine-queue state.
    let view: SearchViewState
    /// Live, cached, catching up or offline (Sync/ViewFreshness.swift). A search of the cache
    /// alone is confirmed once it loaded (it shows the cache, which the session keeps
    /// current); one that searches the server too once the server answered a load.
    private let freshnessTracker: FreshnessTracker

    init(context: any SearchViewContext, dispatcher: CallbackDispatcher, params: MessageSearchParams, handler: MessageSearchHandler)
        throws(ParleyError)
    {
        try params.validate()
        self.params = params
        self.context = context
        self.dispatcher = dispatcher
        self.handler = handler
        let userID: String? = context.runNow { context.cacheUserID }
        guard userID != nil else { throw .invalidState("message search: connect first (the cache is per user)") }
        let query = try params.cacheQuery()
        if params.advancedQuery, var check = query {
            // A syntax error is the caller's: say so now, not at the first load (in time
            // order, which reads one match where ranking would read them all).
            check.order = .time
            let checked: Result<Void, ParleyError> = context.runNow {
                do throws(ParleyError) {
                    _ = try context.searchCache(check, .first(limit: 1))
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            try checked.get()
        }
        view = SearchViewState(query: query)
        freshnessTracker = FreshnessTracker()
        context.runNow { context.searchViewOpened() }
        context.attach(self, state: view, freshness: freshnessTracker) { search, batch in search.observe(batch) }
    }

    deinit { dispose() }

    // MARK: What the application reads

    /// The results shown, in the view's order, as the callbacks delivered so far left them.
    public var results: [MessageSearchResult] { published.withLock { $0.results } }

    /// `results` as one JSON array text.
    public var resultsJSON: String { JSONText.arrayText(results.map(\.json)) }

    /// More results exist beyond those loaded (in the cache, or on the server with `searchServer`);
    /// in relevance order, within the relevance window.
    public var hasMore: Bool { published.withLock { $0.hasMore } }

    /// Relevance order: how many matches the current window ranks and whether older ones lie
    /// below it (`loadOlder` moves there); zero and false in time order and before the first load.
    public var relevanceWindowEdge: RelevanceWindowEdge { published.withLock { $0.windowEdge } }

    /// Whether what the view shows is live or may be stale, as the callbacks so far reported it.
    public var freshness: ViewFreshness { freshnessTracker.published }

    /// Where the last load's results came from: `.server` when the server answered it (with
    /// `searchServer`), else `.cache`; nil before the first load completed and after a failed
    /// one. Read inside a load's completion it is that load's.
    public var lastLoadOrigin: PageOrigin? { published.withLock { $0.lastLoadOrigin } }

    public var isDisposed: Bool { guardState.isDisposed }

    // MARK: Loading

    /// Loads the next `limit` results (the first load: the first ones); the completion gets
    /// the results it added, in the view's order. Changes to results already shown that
    /// happened meanwhile are reported as events before it. With `searchServer`, a server
    /// that cannot be reached leaves the view with the cache's results: the error goes to
    /// the handler's `error` (the completion fails only when the cache gave nothing either),
    /// and the next load asks the server again.
    public func loadMore(completion: @escaping MessageSearchCompletion) {
        guard !guardState.isDisposed else {
            dispatcher.enqueue { completion(.failure(.invalidState("the search is disposed"))) }
            return
        }
        context.queue.async {
            guard self.view.observerID != nil else {
                self.dispatcher.enqueue { completion(.failure(.invalidState("the search is disposed"))) }
                return
            }
            self.view.loads.append(SearchLoad(movesToOlderWindow: false, completion: completion))
            self.runLoads()
        }
    }

    /// Relevance order: replaces the window with the next one down (up to `relevanceWindow`
    /// matches older than it) and loads its first `limit` results; the results shown before are
    /// reported deleted. Without older matches it changes nothing and completes with none;
    /// before the first load it is that load. In time order it fails: `loadMore` goes on there.
    public func loadOlder(completion: @escaping MessageSearchCompletion) throws(ParleyError) {
        guard params.order == .relevance else {
            throw .invalidState("load older: only in relevance order (time order goes on with load more)")
        }
        guard !guardState.isDisposed else { throw .invalidState("the search is disposed") }
        context.queue.async {
            guard self.view.observerID != nil else {
                self.dispatcher.enqueue { completion(.failure(.invalidState("the search is disposed"))) }
                return
            }
            self.view.loads.append(SearchLoad(movesToOlderWindow: true, completion: completion))
            self.runLoads()
        }
    }

    // MARK: Disposing

    /// Stops the callbacks: after it returns none runs. Loads waiting or in flight complete,
    /// once, with `.cancelled`. Idempotent; safe inside a callback.
    public func dispose() {
        guard guardState.markDisposed() else { return }
        let context = self.context
        let view = self.view
        let pending: [MessageSearchCompletion] = context.runNow {
            context.detach(view)
            context.searchViewClosed()
            var pending = view.loads.map(\.completion)
            if let running = view.running { pending.insert(running, at: 0) }
            view.loads = []
            view.running = nil
            return pending
        }
        if !pending.isEmpty {
            dispatcher.enqueue {
                for completion in pending { completion(.failure(.cancelled("the search was disposed"))) }
            }
        }
        guardState.waitForRunningCallback(dispatcher: dispatcher)
    }

    // MARK: Engine queue

    private func runLoads() {
        guard view.running == nil, view.observerID != nil, !view.loads.isEmpty else { return }
        let load = view.loads.removeFirst()
        view.running = load.completion
        if load.movesToOlderWindow, view.window != nil {
            moveToOlderWindow()
            return finishLoad(serverError: nil)
        }
        loadLocalPage()
        guard params.searchServer, view.query != nil, !view.serverExhausted else { return finishLoad(serverError: nil) }
        context.searchServer(params.serverQuery, token: view.serverToken) { result in
            guard self.view.observerID != nil else { return }
            switch result {
            case .success(let page):
                do throws(ParleyError) {
                    var results: [MessageSearchResult] = []
                    for entry in page.results { results.append(try MessageSearchResult(server: entry)) }
                    var known = Set(self.view.serverHits.map(\.messageID))
                    for result in results where known.insert(result.messageID).inserted { self.view.serverHits.append(result) }
                    self.view.serverToken = page.next
                    self.view.serverExhausted = page.next == nil
                    self.view.serverAnswered = true
                    self.finishLoad(serverError: nil, origin: .server)
                } catch {
                    self.finishLoad(serverError: error)
                }
            case .failure(let error):
                self.finishLoad(serverError: error)
            }
        }
    }

    /// Widens the cache window by one page.
    private func loadLocalPage() {
        view.started = true
        guard let query = view.query else {
            view.localExhausted = true
            return
        }
        let limit = params.limit
        do throws(ParleyError) {
            switch params.order {
            case .time:
                guard !view.localExhausted else { return }
                let page = try context.searchCache(query, .olderThan(messageID: view.localBoundary, limit: limit + 1))
                view.localExhausted = page.count <= limit
                if let last = page.prefix(limit).last { view.localBoundary = last.messageID }
                view.localHits += page.prefix(limit)
            case .relevance:
                // Every load widens the page window, also one that finds no more hits now: hits
                // that come later fill it up to the same size as a new search's.
                view.localCount += limit
                if view.window == nil {
                    try formWindow(query, belowMessageID: nil)
                } else {
                    try searchRelevanceWindow(query)
                }
            }
        } catch {
            view.localError = error
        }
    }

    /// Relevance order: the window below the current one, and its first page.
    private func moveToOlderWindow() {
        guard let query = view.query, view.windowEdge.olderMatchesExist, let lowest = view.window?.lowestMessageID else { return }
        do throws(ParleyError) {
            view.localCount = params.limit
            try formWindow(query, belowMessageID: lowest)
        } catch {
            view.localError = error
        }
    }

    /// Relevance order: a window and its first `localCount` hits.
    private func formWindow(_ query: CacheSearchQuery, belowMessageID: Int64?) throws(ParleyError) {
        let formed = try context.formRelevanceWindow(
            query, size: params.relevanceWindow, belowMessageID: belowMessageID, limit: view.localCount + 1)
        view.window = formed.window
        view.windowEdge = formed.edge
        showWindowPage(formed.hits)
    }

    /// Relevance order: the first `localCount` hits of the window.
    private func searchRelevanceWindow(_ query: CacheSearchQuery) throws(ParleyError) {
        guard let window = view.window else { return }
        showWindowPage(try context.searchCache(query, .ranked(window, limit: view.localCount + 1)))
    }

    /// The window's first `localCount` hits of a search for one more (whose presence says more exist).
    private func showWindowPage(_ page: [CacheSearchHit]) {
        view.localExhausted = page.count <= view.localCount
        view.localHits = Array(page.prefix(view.localCount))
    }

    private func finishLoad(serverError: ParleyError?, origin: PageOrigin = .cache) {
        guard let completion = view.running else { return }
        view.running = nil
        let localError = view.localError
        view.localError = nil
        // The page is the window's new part: the window is searched again only when the cache
        // changed while the load ran.
        let changes = recompose(searching: view.changedDuringLoad)
        view.changedDuringLoad = false
        let failure = localError ?? (changes.added.isEmpty && changes.shown.isEmpty ? serverError : nil)
        let reportedServerError = failure == nil ? serverError : nil
        let hasMore = view.hasMore(searchingServer: params.searchServer)
        view.reportedHasMore = hasMore
        let edge = view.windowEdge
        view.reportedEdge = edge
        let handler = self.handler
        let published = self.published
        let resultOrigin: PageOrigin? = failure == nil ? origin : nil
        dispatcher.enqueue {
            self.guardState.run {
                published.withLock { $0.results = changes.shown }
                if !changes.deleted.isEmpty { handler.deleted(changes.deleted) }
                if !changes.updated.isEmpty { handler.updated(changes.updated) }
                if let reportedServerError { handler.error(reportedServerError) }
                published.withLock {
                    $0.hasMore = hasMore
                    $0.windowEdge = edge
                }
            }
        }
        // A freshness change the load made is told before its completion runs.
        refreshFreshness()
        dispatcher.enqueue {
            published.withLock { $0.lastLoadOrigin = resultOrigin }
            // Disposed meanwhile: what was promised then is a cancellation.
            if self.guardState.isDisposed {
                completion(.failure(.cancelled("the search was disposed")))
            } else if let failure {
                completion(.failure(failure))
            } else {
                completion(.success(changes.added))
            }
        }
        context.queue.async { self.runLoads() }
    }

    /// A committed batch: the window is searched again when the batch may change it.
    func observe(_ batch: ChangeBatch) {
        guard view.observerID != nil else { return }
        freshnessTracker.observe(batch)
        defer { refreshFreshness() }
        guard view.started else { return }
        var relevant = false
        for change in batch.changes {
            switch change {
            case .messageUpserted, .messageRemoved, .channelMessagesEvicted:
                relevant = true
            case .messagesTruncated(let url, let through, _):
                relevant = true
                view.serverHits.removeAll { $0.channelURL == url && $0.key.createdAt <= through }
            case .channelRemoved(let url, _):
                relevant = true
                view.serverHits.removeAll { $0.channelURL == url }
            case .cleared:
                relevant = true
            default:
                continue
            }
        }
        // The server's copies of messages the cache lacks follow the message events.
        if case .realtime(let event) = batch.cause, !view.serverHits.isEmpty {
            let data = WireEventData(event.data)
            switch event.category {
            case .messageUpdated:
                if let message = data.message, let id = message.messageID,
                    let index = view.serverHits.firstIndex(where: { $0.messageID == id })
                {
                    view.serverHits[index].message = JSONText(encoding: message.json)
                    relevant = true
                }
            case .messageDeleted:
                if let id = data.messageID, view.serverHits.contains(where: { $0.messageID == id }) {
                    view.serverHits.removeAll { $0.messageID == id }
                    relevant = true
                }
            default:
                break
            }
        }
        guard relevant else { return }
        // While a load runs its end searches again: what changed meanwhile is told then.
        guard view.running == nil else {
            view.changedDuringLoad = true
            return
        }
        let changes = recompose(searching: true)
        let hasMore = view.hasMore(searchingServer: params.searchServer)
        let edge = view.windowEdge
        // A change outside the window may still change whether more results exist.
        guard !(changes.added.isEmpty && changes.updated.isEmpty && changes.deleted.isEmpty) || hasMore != view.reportedHasMore
            || edge != view.reportedEdge
        else { return }
        view.reportedHasMore = hasMore
        view.reportedEdge = edge
        let handler = self.handler
        let published = self.published
        dispatcher.enqueue {
            self.guardState.run {
                published.withLock {
                    $0.results = changes.shown
                    $0.hasMore = hasMore
                    $0.windowEdge = edge
                }
                if !changes.deleted.isEmpty { handler.deleted(changes.deleted) }
                if !changes.updated.isEmpty { handler.updated(changes.updated) }
                if !changes.added.isEmpty { handler.added(changes.added) }
            }
        }
    }

    /// Derives the freshness again after a step; a change is queued behind the step's callbacks.
    private func refreshFreshness() {
        guard view.observerID != nil else { return }  // disposed: nothing more is reported
        let confirmed = params.searchServer && view.query != nil ? view.serverAnswered : view.started
        let handler = self.handler
        let guardState = self.guardState
        freshnessTracker.update(
            followUp: false, confirmed: confirmed,
            deliver: { job in self.dispatcher.enqueue { guardState.run(job) } },
            report: { handler.freshnessChanged($0) })
    }

    struct Changes {
        var shown: [MessageSearchResult]
        var added: [MessageSearchResult] = []
        var updated: [MessageSearchResult] = []
        var deleted: [MessageSearchResult] = []
    }

    /// Searches the window again, builds the view's list and tells what changed since the
    /// last time.
    ///
    /// A result is `updated` when its message, snippet or origin changed, or (relevance order)
    /// it moved among the results shown before and now (a score changes only with its message).
    private func recompose(searching: Bool) -> Changes {
        var list = compose(searching: searching)
        let before = Dictionary(view.shown.map { ($0.messageID, $0) }, uniquingKeysWith: { first, _ in first })
        let now = Set(list.map(\.messageID))
        var changes = Changes(shown: [])
        changes.deleted = view.shown.filter { !now.contains($0.messageID) }
        var oldRank: [Int64: Int] = [:]
        for (rank, id) in view.shown.map(\.messageID).filter(now.contains).enumerated() { oldRank[id] = rank }
        var commonRank = 0
        for index in list.indices {
            let result = list[index]
            guard let old = before[result.messageID] else {
                changes.added.append(result)
                continue
            }
            let moved = params.order == .relevance && oldRank[result.messageID] != commonRank
            commonRank += 1
            if moved || old.message != result.message || old.snippet != result.snippet || old.origin != result.origin {
                changes.updated.append(result)
            } else {
                list[index] = old
            }
        }
        changes.shown = list
        view.shown = list
        return changes
    }

    /// The view's list: the cache's window (searched again with `searching`, else as the
    /// last search left it), and the server's hits (see the design note).
    private func compose(searching: Bool) -> [MessageSearchResult] {
        guard let query = view.query, view.started else { return [] }
        var serverCached: [Int64: CacheSearchHit] = [:]
        var cachedServerIDs: Set<Int64> = []
        do throws(ParleyError) {
            if searching {
                switch params.order {
                case .time:
                    let from = view.localExhausted ? Int64.min : (view.localBoundary ?? Int64.max)
                    view.localHits = try context.searchCache(query, .atOrNewerThan(messageID: from))
                    // Every older hit gone: the window is all of them (and stays so).
                    if !view.localExhausted, try context.searchCache(query, .olderThan(messageID: from, limit: 1)).isEmpty {
                        view.localExhausted = true
                    }
                case .relevance:
                    try searchRelevanceWindow(query)
                    if let window = view.window { view.windowEdge = try context.relevanceWindowEdge(query, window) }
                }
            }
            if !view.serverHits.isEmpty {
                // A message the cache holds is judged by the cache: its copy is current.
                cachedServerIDs = context.cachedMessageIDs(view.serverHits.map(\.messageID))
                for hit in try context.searchCache(query, .among(Array(cachedServerIDs))) { serverCached[hit.messageID] = hit }
            }
        } catch {
            view.localError = error
            return view.shown
        }
        let local = view.localHits
        var list: [MessageSearchResult] = []
        var seen: Set<Int64> = []
        switch params.order {
        case .time:
            for hit in local where seen.insert(hit.messageID).inserted { list.append(MessageSearchResult(hit)) }
            for hit in serverCached.values where seen.insert(hit.messageID).inserted { list.append(MessageSearchResult(hit)) }
            for result in view.serverHits where !cachedServerIDs.contains(result.messageID) && seen.insert(result.messageID).inserted {
                list.append(result)
            }
            list.sort { $0.messageID > $1.messageID }
        case .relevance:
            for result in view.serverHits {
                if cachedServerIDs.contains(result.messageID) {
                    if let hit = serverCached[result.messageID], seen.insert(hit.messageID).inserted { list.append(MessageSearchResult(hit)) }
                } else if seen.insert(result.messageID).inserted {
                    list.append(result)
                }
            }
            for hit in local where seen.insert(hit.messageID).inserted { list.append(MessageSearchResult(hit)) }
        }
        return list
    }
}

/// What the application reads, as the callbacks delivered so far left it.
struct PublishedSearch: Sendable {
    var results: [MessageSearchResult] = []
    var hasMore = true
    var lastLoadOrigin: PageOrigin?
    var windowEdge = RelevanceWindowEdge()
}

/// A load asked for: the next page, or (relevance order) the next window down.
struct SearchLoad {
    var movesToOlderWindow: Bool
    var completion: MessageSearchCompletion
}

/// The search view's state on the engine queue.
final class SearchViewState: FeedSubscriber, @unchecked Sendable {
    /// Nil when the text has no words: nothing matches.
    let query: CacheSearchQuery?
    var observerID: UInt64?
    var started = false
    /// Time order: the oldest cache hit loaded (the window is every hit at or newer than it).
    var localBoundary: Int64?
    /// Relevance order: how many of the window's first hits the view holds (N: `limit` per load).
    var localCount = 0
    /// Relevance order: the matches ranked (nil before the first load), as last counted.
    var window: RelevanceWindow?
    var windowEdge = RelevanceWindowEdge()
    /// `windowEdge` as last reported.
    var reportedEdge = RelevanceWindowEdge()
    /// The cache has no hit beyond the window (time order: the window is then every hit).
    var localExhausted = false
    var localError: ParleyError?
    /// The window's hits as last searched, in order.
    var localHits: [CacheSearchHit] = []
    /// A batch that may change the window was committed while a load ran.
    var changedDuringLoad = false
    /// The server's hits so far, in its order, each once.
    var serverHits: [MessageSearchResult] = []
    var serverToken: String?
    var serverExhausted = false
    /// The server answered a load (the view's results are confirmed by it).
    var serverAnswered = false
    /// The list as last reported.
    var shown: [MessageSearchResult] = []
    /// `hasMore` as last reported (the published value starts true).
    var reportedHasMore = true
    var loads: [SearchLoad] = []
    var running: MessageSearchCompletion?

    init(query: CacheSearchQuery?) {
        self.query = query
    }

    func hasMore(searchingServer: Bool) -> Bool {
        guard query != nil else { return false }
        return !localExhausted || (searchingServer && !serverExhausted)
    }
}

extension ParleyClient {
    /// A live search of the cached messages (see MessageSearch); with `searchServer`, of the
    /// server's too. Needs a connected client (the cache is per user; it may be offline).
    /// Nothing loads until the first `loadMore`.
    public func messageSearch(params: MessageSearchParams, handler: MessageSearchHandler) throws(ParleyError) -> MessageSearch {
        guard !isClosed else { throw .invalidState("the client is closed") }
        let search = try MessageSearch(context: engine, dispatcher: dispatcher, params: params, handler: handler)
        collections.add(search)
        return search
    }
}

extension MessageSearch: DisposableCollection {}
