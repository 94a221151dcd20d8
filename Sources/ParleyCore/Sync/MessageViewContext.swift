import Dispatch

/// What every view reaches below itself: the queue it runs on, the change feed, and the
/// session's state as far as a view must know it. Every call but `runNow` is made on `queue`.
protocol ViewContext: AnyObject, Sendable {
    var queue: DispatchQueue { get }
    /// Runs `body` on the queue and waits (inline when already there).
    func runNow<T>(_ body: () -> T) -> T
    var isConnected: Bool { get }
    var hasCache: Bool { get }
    var isStreamOpen: Bool { get }
    var cacheUserID: String? { get }
    func subscribe(_ observer: @escaping ChangeFeed.Observer) -> UInt64
    /// Only the batches that concern `channelURL` (`ChangeBatch.channelScope`).
    func subscribe(channelURL: String, _ observer: @escaping ChangeFeed.Observer) -> UInt64
    func unsubscribe(_ id: UInt64)
    /// The session's side of the view's freshness now (read where the view subscribes).
    var freshnessLink: FreshnessLink { get }
}

extension ViewContext {
    /// Stand-ins that script no session: the stream as they say, no catch-up running.
    var freshnessLink: FreshnessLink { FreshnessLink(streamOpen: isConnected && isStreamOpen, catchingUp: false) }
}

/// A view's engine-queue state, as far as its place on the change feed goes.
protocol FeedSubscriber: AnyObject {
    /// Set while the view is subscribed: from its creation until it is disposed.
    var observerID: UInt64? { get set }
}

extension ViewContext {
    /// Puts a new view on the feed: in one turn of the queue, `setUp` runs, the view's
    /// freshness starts from the session's side as it is now, and the view subscribes (to
    /// the batches of `channelURL` only, when given). Called last in the view's init, once
    /// every property is stored: the queue's `sync` orders them before any batch reaches
    /// the view, so none is missed or raced. The feed holds the view weakly.
    func attach<View: AnyObject & Sendable>(
        _ view: View, state: some FeedSubscriber, channelURL: String? = nil, freshness: FreshnessTracker,
        setUp: () -> Void = {}, observe: @escaping (View, ChangeBatch) -> Void
    ) {
        let weakView = WeakReference(view)
        runNow {
            setUp()
            freshness.start(link: freshnessLink)
            let observer: ChangeFeed.Observer = { batch in
                if let view = weakView.object { observe(view, batch) }
            }
            state.observerID = channelURL.map { subscribe(channelURL: $0, observer) } ?? subscribe(observer)
        }
    }

    /// Takes the view off the feed (on the queue); false when it already was.
    @discardableResult
    func detach(_ state: some FeedSubscriber) -> Bool {
        guard let id = state.observerID else { return false }
        unsubscribe(id)
        state.observerID = nil
        return true
    }
}

/// Everything a message view (Collections/MessageCollection.swift) reaches below itself: the
/// queue it runs on, the change feed, the session's state as far as a view must know it,
/// keeping its channel from eviction, the channel's refresh, and Paging's loads. The engine
/// is the one real implementation; the view's unit tests give a stand-in that serves scripted
/// pages (Tests/ParleyCoreTests/MessageViewLogicTests.swift). Every call but `runNow` is made
/// on `queue`.
protocol MessageViewContext: ViewContext {
    func log(_ level: LogLevel, _ message: String)
    func retainChannel(_ channelURL: String)
    func releaseChannel(_ channelURL: String)
    /// The channel as cached (its stored text), nil when not cached.
    func cachedChannelText(_ channelURL: String) -> JSONText?
    func refreshChannel(_ channelURL: String, then done: @escaping @Sendable () -> Void)

    func cachedStart(
        _ scope: MessageScope, anchor: MessageKey?, extraAtAnchor: Bool, previous: Int, next: Int
    ) throws(ParleyError) -> CachedStart
    func cachedPage(_ scope: MessageScope, before low: MessageKey, size: Int) -> CachedPage?
    func cachedPage(_ scope: MessageScope, after high: MessageKey, size: Int, mayReachNewest: Bool) -> CachedPage?
    func loadStartPage(
        _ scope: MessageScope, anchorTime: Int64?, extraAtAnchor: Bool, previous: Int, next requestedNext: Int,
        _ done: @escaping @Sendable (PageLoad, Result<StartPage, ParleyError>) -> Void
    ) -> PageLoad
    func loadPage(
        _ scope: MessageScope, before low: MessageKey, size: Int,
        _ done: @escaping @Sendable (PageLoad, Result<(stored: StoredMessages, low: MessageKey, hasPrevious: Bool), ParleyError>) -> Void
    ) -> PageLoad
    func loadPage(
        _ scope: MessageScope, after high: MessageKey, size: Int,
        _ done: @escaping @Sendable (PageLoad, Result<(stored: StoredMessages, high: MessageKey, hasNext: Bool, live: Bool), ParleyError>) -> Void
    ) -> PageLoad
    func checkGap(
        _ scope: MessageScope, shown: (first: MessageKey, last: MessageKey, count: Int)?, high: MessageKey,
        threshold: Int, filled: Int, liveAtRequest: Bool,
        _ done: @escaping @Sendable (PageLoad, Result<GapRound, ParleyError>) -> Void
    ) -> PageLoad
}

/// Everything a channel list view (Collections/GroupChannelCollection.swift) reaches below
/// itself; the engine is the one implementation. Every call but `runNow` is made on `queue`.
protocol ChannelViewContext: ViewContext {
    func holdsWholeChannelList(_ listScope: String) -> Bool
    func cachedChannelPage(
        sort: ChannelListSort, after: [SQLiteValue]?, limit: Int, readsMembers: Bool, showsMembers: Bool,
        matches: (JSONValue) -> Bool, sortPosition: (JSONValue) -> [SQLiteValue]
    ) throws(ParleyError) -> (channels: [(value: JSONValue, text: String)], more: Bool)
    func loadChannelPage(
        userID: String, query: String, limit: Int, token: String?, completesScope listScope: String?,
        _ done: @escaping @Sendable (PageLoad, Result<(page: StoredChannelPage, touched: Set<String>), ParleyError>) -> Void
    ) -> PageLoad
}

/// What a search view reaches below itself (the engine, Sync/Engine+Views.swift). Every
/// call but `runNow` is made on `queue`.
protocol SearchViewContext: ViewContext {
    /// A search view opened / was disposed: while any is open, the cache applies its search
    /// notes at every commit (`ChatCache.appliesSearchNotesAtEveryCommit`).
    func searchViewOpened()
    func searchViewClosed()
    func searchCache(_ query: CacheSearchQuery, _ window: ChatCache.SearchWindow) throws(ParleyError) -> [CacheSearchHit]
    /// `ChatCache.formRelevanceWindow` and `ChatCache.relevanceWindowEdge`.
    func formRelevanceWindow(_ query: CacheSearchQuery, size: Int, belowMessageID: Int64?, limit: Int) throws(ParleyError)
        -> (window: RelevanceWindow, edge: RelevanceWindowEdge, hits: [CacheSearchHit])
    func relevanceWindowEdge(_ query: CacheSearchQuery, _ window: RelevanceWindow) throws(ParleyError) -> RelevanceWindowEdge
    /// Which of these messages the cache holds.
    func cachedMessageIDs(_ ids: [Int64]) -> Set<Int64>
    /// A page of the server's search from `token` (nil: the first), the answer on `queue`.
    func searchServer(
        _ query: ServerSearchQuery, token: String?, _ done: @escaping @Sendable (Result<ServerSearchPage, ParleyError>) -> Void)
}

/// A page of the server's search, as it came.
struct ServerSearchPage: Sendable {
    var results: [WireSearchResult]
    /// Nil on the last page.
    var next: String?
}

extension Engine: ChannelViewContext {}

extension Engine: MessageViewContext {
    func cachedChannelText(_ channelURL: String) -> JSONText? {
        read("reading the channel") { cache throws(ParleyError) in
            try cache.channel(url: channelURL).map { JSONText($0.json) }
        } ?? nil
    }
}
