// What the views (Collections/) and the facade (Client/) reach the engine through: whether
// a session and a cache are there, the feed subscription, keeping a channel from eviction
// while a view shows it, a channel's refresh, and the cache's own upkeep (access times,
// clearing). Pages and gap checks are Paging's (Sync/Paging.swift); the session's calls are
// in Engine+Session.swift, the outbox's in Engine+Outbox.swift. All on the engine queue.

extension Engine {
    /// A session is connected (its stream may be down).
    var isConnected: Bool { session.current != nil }

    /// A cache is open.
    var hasCache: Bool { store.writer != nil }

    /// The user whose cache is open (nil: none yet).
    var cacheUserID: String? { store.userID }

    /// Starts delivering committed batches to `observer`; returns the id to unsubscribe with.
    func subscribe(_ observer: @escaping ChangeFeed.Observer) -> UInt64 { feed.subscribe(observer) }

    /// The same, for an observer of one channel: batches about other channels pass it by.
    func subscribe(channelURL: String, _ observer: @escaping ChangeFeed.Observer) -> UInt64 {
        feed.subscribe(channelURL: channelURL, observer)
    }

    func unsubscribe(_ id: UInt64) { feed.unsubscribe(id) }

    /// A view shows `channelURL`: eviction spares its messages until `releaseChannel`.
    func retainChannel(_ channelURL: String) {
        openMessageViews[channelURL, default: 0] += 1
    }

    func releaseChannel(_ channelURL: String) {
        if let count = openMessageViews[channelURL], count > 1 {
            openMessageViews[channelURL] = count - 1
        } else {
            openMessageViews[channelURL] = nil
        }
    }

    /// Reads a channel again from the server and stores it (cause `channelRefresh`), minding
    /// what events did while the read travelled (`ChannelReadGuard`); `done` runs after, also
    /// when the read failed or the channel is no longer the user's.
    func refreshChannel(_ channelURL: String, then done: @escaping @Sendable () -> Void) {
        let readStart = channelReads.begin()
        call("GET", Endpoints.channel(channelURL)) { result in
            // An event applied meanwhile holds a later copy than this answer.
            let touchedByEvents = self.channelReads.end(readStart)
            if case .success(let channel) = result, WireChannel(channel).channelURL == channelURL,
                WireChannel(channel).memberState != "none"
            {
                self.write(.channelRefresh(channelURL: channelURL), "refreshing a channel") { transaction throws(ParleyError) in
                    try self.storeAnswerChannelOrReread(channel, touchedByEvents, transaction)
                }
                self.fetchWantedChannels()
            }
            done()
        }
    }

    /// Runs `body` on the open cache (on the engine queue).
    func readOpenCache<T>(_ body: (ChatCache) throws(ParleyError) -> T) throws(ParleyError) -> T {
        guard let cache else { throw .invalidState("no cache open (call connect first)") }
        return try body(cache)
    }

    /// The application read a channel's messages: its access time (which orders eviction) is
    /// written, at most once a minute per channel.
    func recordAccess(channelURL: String, at now: Int64) {
        guard store.writer != nil, now - (store.lastTouched[channelURL] ?? .min / 2) >= 60_000 else { return }
        write(.apiLoad, "recording a channel's access time") { transaction throws(ParleyError) in
            try transaction.touchChannel(url: channelURL, at: now)
        }
        store.lastTouched[channelURL] = now
    }

    /// The open cache's sizes, for the metrics (all zero when none is open).
    func cacheStatistics() throws(ParleyError) -> CacheStatistics {
        guard let cache else { return CacheStatistics() }
        return try store.statistics.statistics(of: cache, dataVersion: nil)
    }

    /// `clear_cached_data`: everything cached goes (views learn it as `cleared`).
    func clearCache() throws(ParleyError) {
        guard let writer = store.writer else { throw .invalidState("no cache open (call connect first)") }
        try writer.clear()
        store.lastTouched = [:]
        outbox.attemptCounted = []
    }
}

extension Engine: SearchViewContext {
    func searchViewOpened() {
        store.openSearchViews += 1
        store.writer?.cache.appliesSearchNotesAtEveryCommit = true
    }

    func searchViewClosed() {
        store.openSearchViews = max(0, store.openSearchViews - 1)
        store.writer?.cache.appliesSearchNotesAtEveryCommit = store.openSearchViews > 0
    }

    func searchCache(_ query: CacheSearchQuery, _ window: ChatCache.SearchWindow) throws(ParleyError) -> [CacheSearchHit] {
        try readOpenCache { cache throws(ParleyError) in try cache.searchMessages(query, window) }
    }

    func formRelevanceWindow(_ query: CacheSearchQuery, size: Int, belowMessageID: Int64?, limit: Int) throws(ParleyError)
        -> (window: RelevanceWindow, edge: RelevanceWindowEdge, hits: [CacheSearchHit])
    {
        try readOpenCache { cache throws(ParleyError) in
            try cache.formRelevanceWindow(query, size: size, belowMessageID: belowMessageID, limit: limit)
        }
    }

    func relevanceWindowEdge(_ query: CacheSearchQuery, _ window: RelevanceWindow) throws(ParleyError) -> RelevanceWindowEdge {
        try readOpenCache { cache throws(ParleyError) in try cache.relevanceWindowEdge(query, window) }
    }

    func cachedMessageIDs(_ ids: [Int64]) -> Set<Int64> {
        read("reading which messages are cached") { cache throws(ParleyError) in try cache.storedMessageIDs(among: ids) } ?? []
    }

    func searchServer(
        _ query: ServerSearchQuery, token: String?, _ done: @escaping @Sendable (Result<ServerSearchPage, ParleyError>) -> Void
    ) {
        guard let userID = session.current?.userID else { return done(.failure(.invalidState("not connected"))) }
        call("GET", Endpoints.searchMessages(userID: userID, query, token: token)) { result in
            done(result.flatMap { answer -> Result<ServerSearchPage, ParleyError> in
                let page = WireSearchPage(answer)
                guard let results = page.results else { return .failure(ParleyError(.protocolViolation, "search answer: no results array")) }
                let next = page.next ?? ""
                return .success(ServerSearchPage(results: results, next: page.hasNext == true && !next.isEmpty ? next : nil))
            })
        }
    }
}
