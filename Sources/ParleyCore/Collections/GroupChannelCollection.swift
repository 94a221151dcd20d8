
// The group channel collection: the live list of the user's channels for one query.
//
// Design note. The list is a *loaded range* of the query's order: every channel that
// matches the query and sorts at or before `boundary` (the last channel of the last page;
// everything once `hasMore` is false). The collection is a subscriber of the change feed
// (Sync/ChangeFeed.swift), so it sees every change of the cache in commit order and keeps
// the range exact with three rules:
// - a channel that matches and sorts inside the range is shown (`added` if new, else
//   `updated`, also when it moved);
// - a shown channel that stops matching, leaves the range or leaves the cache is `deleted`;
// - nothing outside the range is reported (it arrives with the page that reaches it).
//
// Pages come from the cache when the cache holds the query's listing whole (a mark per query
// identity in the cache: the server's listing was walked to the end and every change since
// was applied), else from the server, whose answer is stored first (through the cache
// writer, so other views learn of it too). The first page is read from the cache at once,
// also offline; when the cache is not known whole the server's first page follows and
// the difference is reported with source `api_load`.
//
// During a catch-up (replayed events and changelogs after the stream opens) the view is
// kept exact but its changes are not reported; at its end the net difference is reported
// with source `channel_changelog`, once.
//
// Every step adds up (shared rule, docs/C-API.md): the view keeps `told`, the channels as
// the application holds them (every page and event applied in order). Reports are always
// the difference between `told` and the view for the channels a step touched, and the list
// the application reads is `told`; outside a catch-up the two are equal after every step.
// A page loaded during a catch-up hands out only channels the application does not hold
// (those it holds but whose copy is stale are `updated` first, with the page's source); the
// rest of the catch-up's difference waits for its end.
//
// State lives on the engine queue. What the application reads (`hasMore`, `channels`) is
// a copy updated in callback order, so it always agrees with the callbacks received.
//
// Channels are handed out as the cache's text (`JSONText`), cut to what the query shows: a
// live message changes its channel, and a channel of thousands of members would otherwise
// be parsed and encoded again for every message. The view keeps a parsed copy without
// members for matching and sorting (with them only when the query filters by members).

/// The callbacks of a group channel collection. They run on the client's callback context
/// (docs/THREADING.md), one at a time, never after `dispose()` returned. Channels come as
/// their JSON text (`.value` parses one).
public struct GroupChannelCollectionHandler: Sendable {
    public var added: @Sendable (CollectionEventContext, [JSONText]) -> Void
    public var updated: @Sendable (CollectionEventContext, [JSONText]) -> Void
    /// The URLs of the channels that left the view.
    public var deleted: @Sendable (CollectionEventContext, [String]) -> Void
    /// The same report as `deleted` (called right after it, same order), with the channels
    /// as the application held them: an application keyed by object needs no lookup.
    public var deletedChannels: @Sendable (CollectionEventContext, [JSONText]) -> Void
    /// A background step failed (the server's first page after the cached one); the view
    /// keeps what it has.
    public var error: @Sendable (ParleyError) -> Void
    /// The view's freshness changed (only real changes, in order with the other callbacks).
    public var freshnessChanged: @Sendable (ViewFreshness) -> Void

    public init(
        added: @escaping @Sendable (CollectionEventContext, [JSONText]) -> Void = { _, _ in },
        updated: @escaping @Sendable (CollectionEventContext, [JSONText]) -> Void = { _, _ in },
        deleted: @escaping @Sendable (CollectionEventContext, [String]) -> Void = { _, _ in },
        deletedChannels: @escaping @Sendable (CollectionEventContext, [JSONText]) -> Void = { _, _ in },
        error: @escaping @Sendable (ParleyError) -> Void = { _ in },
        freshnessChanged: @escaping @Sendable (ViewFreshness) -> Void = { _ in }
    ) {
        self.added = added
        self.updated = updated
        self.deleted = deleted
        self.deletedChannels = deletedChannels
        self.error = error
        self.freshnessChanged = freshnessChanged
    }
}

public final class GroupChannelCollection: Sendable {
    public let query: GroupChannelListQuery
    /// What the view reaches below itself: the engine (Sync/MessageViewContext.swift).
    private let context: any ChannelViewContext
    private let dispatcher: CallbackDispatcher
    private let handler: GroupChannelCollectionHandler
    private let guardState = DisposeGuard()
    /// The list as the application sees it, updated in callback order.
    private let published = Locked<(hasMore: Bool, channels: [JSONText])>((true, []))
    /// Live, cached, catching up or offline (Sync/ViewFreshness.swift).
    private let freshnessTracker: FreshnessTracker
    /// Where the last page's result came from (nil before one, and after a failed one).
    private let publishedOrigin = Locked<PageOrigin?>(nil)
    /// Engine-queue state.
    private let view: ViewState

    convenience init(client: ParleyClient, query: GroupChannelListQuery, handler: GroupChannelCollectionHandler) throws(ParleyError) {
        try self.init(context: client.engine, dispatcher: client.dispatcher, query: query, handler: handler)
    }

    /// A view over `context` (the engine, or a test's stand-in).
    init(
        context: any ChannelViewContext, dispatcher: CallbackDispatcher, query: GroupChannelListQuery, handler: GroupChannelCollectionHandler
    ) throws(ParleyError) {
        try query.validate()
        self.query = query
        self.context = context
        self.dispatcher = dispatcher
        self.handler = handler
        let userID: String? = context.runNow { context.cacheUserID }
        guard let userID else { throw .invalidState("group channel collection: connect first (the cache is per user)") }
        let view = ViewState(userID: userID)
        self.view = view
        freshnessTracker = FreshnessTracker()
        context.attach(self, state: view, freshness: freshnessTracker) { collection, batch in collection.observe(batch) }
    }

    deinit { dispose() }

    // MARK: What the application reads

    /// True while the server (or the cache) has channels after the loaded ones. Updated in
    /// callback order: it agrees with the callbacks delivered so far.
    public var hasMore: Bool { published.withLock { $0.hasMore } }

    /// The loaded channels in the query's order, as the callbacks delivered so far left them.
    public var channelTexts: [JSONText] { published.withLock { $0.channels } }

    /// `channelTexts` parsed.
    public var channels: [JSONValue] { channelTexts.map(\.value) }

    public var isDisposed: Bool { guardState.isDisposed }

    /// Live, cached, catching up or offline, as of the callbacks delivered so far
    /// (`GroupChannelCollectionHandler.freshnessChanged` reports each change).
    public var freshness: ViewFreshness { freshnessTracker.published }

    /// Where the result the last `loadMore` completion got came from: read inside a completion,
    /// that page's. nil before the first completion and after one with an error.
    public var lastLoadOrigin: PageOrigin? { publishedOrigin.withLock { $0 } }

    // MARK: Loading

    /// Loads the next page: the first call the first page. The completion runs once on the
    /// callback context with the channels the page added to the view (in order; none when
    /// there is no more), or an error: `.invalidState` when disposed or when a page is
    /// loading; a network error when offline and the cache does not hold the list whole;
    /// `.cancelled` when the collection is disposed meanwhile.
    public func loadMore(completion: @escaping @Sendable (Result<[JSONText], ParleyError>) -> Void) {
        guard !guardState.isDisposed else {
            dispatcher.enqueue { completion(.failure(.invalidState("the collection is disposed"))) }
            return
        }
        context.queue.async { self.startLoad(completion) }
    }

    // MARK: Disposing

    /// Stops the event callbacks: after it returns none runs. A `loadMore` in flight still
    /// completes, once, with `.cancelled` (queued now, so it may run after this returns).
    /// Idempotent; safe inside a callback and while a page loads.
    public func dispose() {
        guard guardState.markDisposed() else { return }
        let context = self.context
        let view = self.view
        let pending: (@Sendable (Result<[JSONText], ParleyError>) -> Void)? = context.runNow {
            context.detach(view)
            defer {
                view.loadCompletion = nil
                view.waitingLoad = nil
            }
            guard let waiting = view.waitingLoad else { return view.loadCompletion }
            let running = view.loadCompletion
            return { result in
                running?(result)
                waiting(result)
            }
        }
        if let pending {
            // Completions run exactly once, even after dispose.
            dispatcher.enqueue { pending(.failure(.cancelled("the collection was disposed"))) }
        }
        guardState.waitForRunningCallback(dispatcher: dispatcher)
    }

    // MARK: Engine queue

    /// One shown channel: as the query matches and sorts it (`GroupChannelListQuery.kept`),
    /// and as the application gets it.
    struct Entry {
        var url: String
        var key: ChannelSortKey
        var channel: JSONValue
        var text: JSONText
    }

    final class ViewState: FeedSubscriber, @unchecked Sendable {
        let userID: String
        var observerID: UInt64?
        /// The loaded range, sorted by key.
        var entries: [Entry] = []
        /// The last channel's key of the last page; nil before the first page or once `hasMore` is false.
        var boundary: ChannelSortKey?
        var loadedOnce = false
        var hasMore = true
        /// Where the next page comes from: the server's `next`, when the last page came from it.
        var serverToken: String?
        /// The server's listing was walked from its first page (so reaching its end proves the cache whole).
        var walkedFromStart = false
        var loadCompletion: (@Sendable (Result<[JSONText], ParleyError>) -> Void)?
        /// The load in flight is the server's first page after a cached one (no caller waits).
        var backgroundLoad = false
        /// A `loadMore` that arrived while the background page loads; it runs after it.
        var waitingLoad: (@Sendable (Result<[JSONText], ParleyError>) -> Void)?
        /// The channels as the application holds them (see the design note).
        var told: [String: Entry] = [:]
        /// A catch-up runs: changes update `entries` but are reported at its end.
        var catchingUp = false
        /// The cache was cleared: the page in flight is stale, the view loads its first page again.
        var clearedDuringLoad = false
        var reloadOwed = false
        /// The server vouched for the loaded range: its first page came from the server, or
        /// every page from a cache that holds the whole list (as current as the catch-up made it).
        var confirmed = false
        /// The server's first page runs as the view's part of a catch-up (freshness: catching up).
        var followUpLoad = false

        init(userID: String) { self.userID = userID }

        func index(of url: String) -> Int? { entries.firstIndex { $0.url == url } }

        func inRange(_ key: ChannelSortKey) -> Bool {
            guard loadedOnce else { return false }
            guard hasMore, let boundary else { return !hasMore }
            return !(boundary < key)
        }

        /// Inserts at the sorted position.
        func insert(_ entry: Entry) {
            var low = 0, high = entries.count
            while low < high {
                let middle = (low + high) / 2
                if entries[middle].key < entry.key { low = middle + 1 } else { high = middle }
            }
            entries.insert(entry, at: low)
        }
    }

    /// What one step changed in the view, to be reported.
    struct Diff {
        var added: [JSONText] = []
        var updated: [JSONText] = []
        /// The channels that left, as the application held them.
        var deleted: [(url: String, text: JSONText)] = []
        var isEmpty: Bool { added.isEmpty && updated.isEmpty && deleted.isEmpty }
    }

    /// The difference between what the application holds and the view, for `urls`, applied
    /// to `told`: what to report so that the application holds the view again (for those
    /// channels). Added and updated channels come in the view's order.
    private func difference(for urls: some Sequence<String>) -> Diff {
        var diff = Diff()
        var changed: [Entry] = []
        var addedURLs = Set<String>()
        var visited = Set<String>()
        for url in urls where visited.insert(url).inserted {
            let now = view.index(of: url).map { view.entries[$0] }
            switch (view.told[url], now) {
            case (nil, nil):
                continue
            case (.some(let before), nil):
                diff.deleted.append((url, before.text))
                view.told[url] = nil
            case (nil, .some(let entry)):
                changed.append(entry)
                addedURLs.insert(url)
                view.told[url] = entry
            case (.some(let before), .some(let entry)):
                guard before.text != entry.text || before.key < entry.key || entry.key < before.key else { continue }
                changed.append(entry)
                view.told[url] = entry
            }
        }
        diff.deleted.sort { utf8Precedes($0.url, $1.url) }
        for entry in changed.sorted(by: { $0.key < $1.key }) {
            if addedURLs.contains(entry.url) { diff.added.append(entry.text) } else { diff.updated.append(entry.text) }
        }
        return diff
    }

    /// The list the application reads: what it holds, in the view's order.
    private func heldList() -> [JSONText] {
        guard view.catchingUp else { return view.entries.map(\.text) }
        return view.told.values.sorted { $0.key < $1.key }.map(\.text)
    }

    /// Applies the current state of one channel (nil: gone) to the view: `channel` to match
    /// and sort, `text` (the stored text; read only when the channel is shown) to hand out.
    private func apply(url: String, channel: JSONValue?, text: () -> String, into diff: inout Diff) {
        let existing = view.index(of: url)
        if let channel, query.matches(channel, userID: view.userID) {
            let key = query.sortKey(channel)
            if view.inRange(key) {
                let entry = Entry(url: url, key: key, channel: query.kept(channel), text: query.presented(text: text()))
                if let existing {
                    let unchanged = view.entries[existing].text == entry.text && !(view.entries[existing].key < key || key < view.entries[existing].key)
                    view.entries.remove(at: existing)
                    view.insert(entry)
                    if !unchanged { diff.updated.append(entry.text) }
                } else {
                    view.insert(entry)
                    diff.added.append(entry.text)
                }
                return
            }
        }
        if let existing {
            diff.deleted.append((url, view.entries.remove(at: existing).text))
        }
    }

    private func observe(_ batch: ChangeBatch) {
        freshnessTracker.observe(batch)
        defer { refreshFreshness() }
        switch batch.cause {
        case .catchUpStarted:
            view.catchingUp = true
            return
        case .catchUpFinished:
            if view.catchingUp {
                let diff = difference(for: Array(view.told.keys) + view.entries.map(\.url))
                view.catchingUp = false
                report(diff, CollectionEventContext(source: .channelChangelog, detail: ""))
            }
            if view.reloadOwed {
                reloadAfterClear(followingUp: true)
            } else if view.loadedOnce, !view.confirmed, view.loadCompletion == nil, context.isConnected, context.isStreamOpen {
                // A first page that only reached the cache (its server page failed: offline):
                // the server's follows now, its difference reported as `api_load`.
                view.followUpLoad = true
                loadFromServer(completion: nil)
            }
            return
        default:
            break
        }
        var diff = Diff()
        var seen = Set<String>()
        for change in batch.changes {
            switch change {
            case .channelUpserted(let upsert):
                seen.insert(upsert.url)
                // The member list is read (and parsed) only for a query that filters by members,
                // and handed on as stored text only to one that shows them.
                let includeMembers = query.includeMemberList
                apply(
                    url: upsert.url, channel: query.filtersByMembers ? upsert.channel : upsert.channelWithoutMembers,
                    text: { includeMembers ? upsert.channelText.text : upsert.channelWithoutMembers.canonicalText }, into: &diff)
            case .channelRemoved(let url, _):
                seen.insert(url)
                apply(url: url, channel: nil, text: { "null" }, into: &diff)
            case .cleared:
                for entry in view.entries { seen.insert(entry.url) }
                view.entries.removeAll()
                // Back to "nothing loaded": the next page is the first, from the server.
                let wasLoaded = view.loadedOnce || view.loadCompletion != nil
                view.loadedOnce = false
                view.hasMore = true
                view.boundary = nil
                view.serverToken = nil
                view.walkedFromStart = false
                view.clearedDuringLoad = view.loadCompletion != nil
                view.reloadOwed = wasLoaded
                view.confirmed = false
            default:
                break
            }
        }
        // What this batch touched, as the application must learn it (the incremental diff
        // above is only how the view changed).
        // A clear is told at once, also during a catch-up: the application must not keep
        // channels the view dropped until the catch-up ends.
        let isClear: Bool = if case .clear = batch.cause { true } else { false }
        if isClear {
            diff = difference(for: seen.union(view.told.keys))
        } else {
            diff = view.catchingUp ? Diff() : difference(for: seen.union(diff.deleted.map(\.url)))
        }
        // Typing changes no stored field: the shown channel is reported with its typers.
        if case .realtime(let event) = batch.cause, event.category == .typingStatus, !seen.contains(event.channelURL),
            !view.catchingUp, let index = view.index(of: event.channelURL)
        {
            let typers = (WireEventData(event.data).typingUsers ?? .array([])).canonicalText
            diff.updated.append(JSONText(CanonicalObjectText.inserting(
                name: WireField.typingUsers, value: typers, into: view.entries[index].text.text)))
        }
        let eventContext: CollectionEventContext
        switch batch.cause {
        case .realtime(let event):
            // Another user's membership change is, to a list of channels, a change of counts.
            // Replayed (the client was away): the changelog's, as every change a catch-up brings.
            let source: CollectionEventSource = event.changedMemberCount && !event.isReplayed
                ? .channelMemberCountChanged : CollectionEventSource(batch.cause)
            eventContext = CollectionEventContext(source: source, detail: event.name)
        case .operation(let name): eventContext = CollectionEventContext(source: .localOperation, detail: name)
        default: eventContext = CollectionEventContext(source: CollectionEventSource(batch.cause), detail: "")
        }
        report(diff, eventContext)
        if view.reloadOwed && !view.catchingUp && view.loadCompletion == nil {
            // Not from inside the feed's delivery: the reload's own write is delivered in turn.
            context.queue.async { self.reloadAfterClear() }
        }
    }

    /// After `clear_cached_data`: the view loads its first page from the server again, in
    /// the background (reported as `added`, source `api_load`); offline, after the next
    /// catch-up (docs/C-API.md "Clearing the cache with views open").
    private func reloadAfterClear(followingUp: Bool = false) {
        guard view.reloadOwed, !guardState.isDisposed, view.loadCompletion == nil, !view.catchingUp else { return }
        // Without the stream the page would likely fail: the catch-up's end tries again.
        guard context.isConnected, context.isStreamOpen else { return }
        view.followUpLoad = followingUp
        loadFromServer(completion: nil)
    }

    /// Queues the callbacks of a diff (deleted, then updated, then added), each updating the
    /// application's copy of the list just before its handler runs.
    private func report(_ diff: Diff, _ context: CollectionEventContext) {
        guard !diff.isEmpty else { return }
        let hasMore = view.hasMore
        let snapshot = heldList()
        let handler = self.handler
        deliver(hasMore: hasMore, channels: snapshot) {
            if !diff.deleted.isEmpty {
                handler.deleted(context, diff.deleted.map(\.url))
                handler.deletedChannels(context, diff.deleted.map(\.text))
            }
            if !diff.updated.isEmpty { handler.updated(context, diff.updated) }
            if !diff.added.isEmpty { handler.added(context, diff.added) }
        }
    }

    private func deliver(hasMore: Bool, channels: [JSONText], _ job: @escaping @Sendable () -> Void) {
        let guardState = self.guardState
        let published = self.published
        dispatcher.enqueue {
            guardState.run {
                published.withLock { $0 = (hasMore, channels) }
                job()
            }
        }
    }

    private func startLoad(_ completion: @escaping @Sendable (Result<[JSONText], ParleyError>) -> Void) {
        guard !guardState.isDisposed else {
            dispatcher.enqueue { completion(.failure(.invalidState("the collection is disposed"))) }
            return
        }
        if view.loadCompletion != nil {
            if view.backgroundLoad && view.waitingLoad == nil {
                // The server's first page is on its way: this one follows it.
                view.waitingLoad = completion
            } else {
                dispatcher.enqueue { completion(.failure(.invalidState("load_more: a page is already loading"))) }
            }
            return
        }
        guard !view.loadedOnce || view.hasMore else {
            // The application may have asked on a has_more its callbacks had not updated yet.
            finishLoad(completion, added: [])
            return
        }
        guard context.hasCache else {
            dispatcher.enqueue { completion(.failure(.invalidState("the client is disconnected from its cache"))) }
            return
        }
        let complete = context.holdsWholeChannelList(ChatCache.channelListScope(queryIdentity: query.identity))
        let online = context.isConnected
        if complete || (!view.loadedOnce && !(online && ((try? cachedPage(after: nil).0.isEmpty) ?? true))) {
            // From the cache: the whole page when the cache holds the list, else the first page at once.
            let page: (channels: [(value: JSONValue, text: String)], more: Bool)
            do {
                page = try cachedPage(after: view.boundary)
            } catch {
                dispatcher.enqueue { completion(.failure(error)) }
                return
            }
            let firstOnly = !complete
            // A whole list's pages are as current as the cache; a first page alone is not.
            view.confirmed = complete && (view.confirmed || !view.loadedOnce)
            view.loadedOnce = true
            var pageURLs: [String] = []
            for (channel, text) in page.channels {
                guard let url = WireChannel(channel).channelURL, view.index(of: url) == nil else { continue }
                let entry = Entry(url: url, key: query.sortKey(channel), channel: query.kept(channel), text: query.presented(text: text))
                view.insert(entry)
                pageURLs.append(url)
            }
            view.hasMore = firstOnly || page.more
            view.boundary = view.hasMore ? (page.channels.last.map { query.sortKey($0.value) } ?? view.boundary) : nil
            finishLoad(completion, added: handOut(pageURLs, source: .cacheLoad), origin: .cache)
            if firstOnly { loadFromServer(completion: nil) }
            return
        }
        guard context.isConnected else {
            dispatcher.enqueue {
                completion(.failure(ParleyError(.network, "load_more: offline, and the cache does not hold this channel list whole")))
            }
            return
        }
        loadFromServer(completion: completion)
    }

    /// Reads up to `limit` matching channels after `after` from the cache, and whether more match.
    private func cachedPage(after: ChannelSortKey?) throws(ParleyError) -> ([(value: JSONValue, text: String)], Bool) {
        let sort: ChannelListSort =
            switch query.order {
            case .chronological: .chronological
            case .latestLastMessage: .latestLastMessage
            case .channelNameAlphabetical: .channelName
            case .metadataValueAlphabetical: .metadataValue(key: query.metadataOrderKey ?? "")
            }
        // Member lists are read only to filter by them, or (as text) for the channels shown.
        let readsMembers = query.filtersByMembers
        let query = self.query
        let userID = view.userID
        return try context.cachedChannelPage(
            sort: sort, after: after.map { $0.elements.map(\.sqliteValue) }, limit: query.limit, readsMembers: readsMembers,
            showsMembers: query.includeMemberList && !readsMembers, matches: { query.matches($0, userID: userID) },
            sortPosition: { query.sortKey($0).elements.map(\.sqliteValue) })
    }

    /// Loads the next page from the server (the first when nothing came from it yet), stores
    /// it, and brings the view to it. `completion` nil: the background page after a cached
    /// first page (its changes are reported as events, a failure to the error handler).
    private func loadFromServer(completion: (@Sendable (Result<[JSONText], ParleyError>) -> Void)?) {
        let token = view.serverToken
        let fromStart = token == nil
        // Set while loading; dispose takes it and cancels.
        view.loadCompletion = completion ?? { _ in }
        view.backgroundLoad = completion == nil
        let listScope = completedListScope(fromStart: fromStart)
        _ = context.loadChannelPage(
            userID: view.userID, query: query.serverQuery, limit: query.limit, token: token, completesScope: listScope
        ) { _, result in
            guard self.view.loadCompletion != nil else { return }  // disposed meanwhile
            self.view.loadCompletion = nil
            self.view.backgroundLoad = false
            self.view.followUpLoad = false
            defer {
                self.refreshFreshness()
                if let waiting = self.view.waitingLoad {
                    self.view.waitingLoad = nil
                    self.startLoad(waiting)
                } else if (try? result.get()) != nil {
                    // A failed reload is not retried at once: the next catch-up's end retries it.
                    self.reloadAfterClear()
                }
            }
            if self.view.clearedDuringLoad {
                // The page continues a list the clear emptied (Paging did not store it): dropped; the reload follows.
                self.view.clearedDuringLoad = false
                if let completion { self.finishLoad(completion, added: []) }
                return
            }
            do throws(ParleyError) {
                let (page, touched) = try result.get()
                let added = self.applyServerPage(page, touched: touched, fromStart: fromStart, background: completion == nil)
                if let completion { self.finishLoad(completion, added: added, origin: .server) }
            } catch {
                if let completion {
                    self.finishLoad(completion, failure: error)
                } else if error.code != .network && error.code != .timeout {
                    let handler = self.handler
                    self.deliver(hasMore: self.view.hasMore, channels: self.heldList()) {
                        handler.error(error)
                    }
                }
            }
        }
    }

    /// The scope a last page records as the whole list: only when the list was walked from its first page.
    private func completedListScope(fromStart: Bool) -> String? {
        fromStart || view.walkedFromStart ? ChatCache.channelListScope(queryIdentity: query.identity) : nil
    }

    /// Brings the view to a stored server page; returns the channels it added (for a
    /// background page they are reported as `added` events instead). `touched`: channels
    /// the feed changed while the page travelled (Paging kept their cached copies).
    private func applyServerPage(_ page: StoredChannelPage, touched: Set<String>, fromStart: Bool, background: Bool) -> [JSONText] {
        let lastKey = page.lastListed.map(query.sortKey)
        if fromStart {
            view.confirmed = true
            view.walkedFromStart = true
            // The server's first page is the reload a clear owed.
            view.reloadOwed = false
        }
        view.loadedOnce = true
        view.serverToken = page.next.isEmpty ? nil : page.next
        view.hasMore = !page.next.isEmpty
        view.boundary = view.hasMore ? (lastKey ?? view.boundary) : nil
        // Bring the view to the page: its channels (as now cached) in, and within the range
        // the server's word for what is not there.
        let pageSet = Set(page.urls)
        var ignored = Diff()  // what changed is reported from `told` below
        for url in page.urls {
            let stored = page.stored[url]
            apply(url: url, channel: stored.flatMap { try? JSONValue.parse($0.json) }, text: { stored?.json ?? "null" }, into: &ignored)
        }
        var removed: [String] = []
        for entry in view.entries where !pageSet.contains(entry.url) && !touched.contains(entry.url) {
            // Shown from the cache, but the server's page (from the start) does not list it.
            if fromStart || !view.inRange(entry.key) {
                if let index = view.index(of: entry.url) { view.entries.remove(at: index) }
                removed.append(entry.url)
            }
        }
        guard !background else {
            let diff = difference(for: page.urls + removed)
            if diff.isEmpty { deliver(hasMore: view.hasMore, channels: heldList()) {} }
            report(diff, CollectionEventContext(source: .apiLoad, detail: ""))
            return []
        }
        return handOut(page.urls, removed: removed, source: .apiLoad)
    }

    /// A page's channels for the application, after the events that bring what it already
    /// holds of the page (and `removed`) to the view: the channels it does not hold yet.
    private func handOut(_ pageURLs: [String], removed: [String] = [], source: CollectionEventSource) -> [JSONText] {
        let fresh = pageURLs.filter { view.told[$0] == nil }
        let freshSet = Set(fresh)
        report(difference(for: pageURLs.filter { !freshSet.contains($0) } + removed), CollectionEventContext(source: source, detail: ""))
        var entries: [Entry] = []
        for url in fresh {
            guard let index = view.index(of: url) else { continue }
            entries.append(view.entries[index])
            view.told[url] = view.entries[index]
        }
        return entries.sorted { $0.key < $1.key }.map(\.text)
    }

    /// Queues a load's completion. A freshness change the load made is reported first, so the
    /// completion reads the view's new freshness; `origin` is the page's (`lastLoadOrigin`
    /// while the completion runs).
    private func finishLoad(
        _ completion: @escaping @Sendable (Result<[JSONText], ParleyError>) -> Void, added: [JSONText] = [], failure: ParleyError? = nil,
        origin: PageOrigin = .cache
    ) {
        refreshFreshness()
        let hasMore = view.hasMore
        let snapshot = heldList()
        let presented = added
        let guardState = self.guardState
        let published = self.published
        let publishedOrigin = self.publishedOrigin
        let resultOrigin: PageOrigin? = failure == nil ? origin : nil
        // A completion runs even after dispose (exactly once); the list copy only while live.
        dispatcher.enqueue {
            if !guardState.isDisposed { published.withLock { $0 = (hasMore, snapshot) } }
            publishedOrigin.withLock { $0 = resultOrigin }
            if let failure { completion(.failure(failure)) } else { completion(.success(presented)) }
        }
    }

    /// Derives the freshness again after a step; a change is queued behind the step's callbacks.
    private func refreshFreshness() {
        guard view.observerID != nil else { return }  // disposed: nothing more is reported
        let handler = self.handler
        freshnessTracker.update(
            followUp: view.catchingUp || view.followUpLoad, confirmed: view.confirmed,
            deliver: { job in self.deliver(hasMore: self.view.hasMore, channels: self.heldList(), job) },
            report: { handler.freshnessChanged($0) })
    }
}

extension ChannelSortElement {
    var sqliteValue: SQLiteValue {
        switch self {
        case .int(let value): .integer(value)
        case .string(let value): .text(value)
        }
    }
}

/// Makes "no callback after dispose returns" structural: every callback runs inside
/// `run`, which skips it once disposed; `waitForRunningCallback` waits for one already
/// running on another thread.
final class DisposeGuard: @unchecked Sendable {
    private let lock = ConditionLock()
    private var disposed = false
    private var running = false

    var isDisposed: Bool { lock.withLock { disposed } }

    /// True for the first call.
    func markDisposed() -> Bool {
        lock.withLock {
            defer { disposed = true }
            return !disposed
        }
    }

    func run(_ body: () -> Void) {
        let go = lock.withLock { () -> Bool in
            guard !disposed else { return false }
            running = true
            return true
        }
        guard go else { return }
        body()
        lock.withLock {
            running = false
            lock.broadcast()
        }
    }

    /// Waits until no callback of this guard runs, unless the caller is inside a callback of
    /// the same client (callbacks never overlap, so the one running is the caller's own).
    func waitForRunningCallback(dispatcher: CallbackDispatcher) {
        guard !dispatcher.isCallbackThread else { return }
        lock.lock()
        while running { _ = lock.wait() }
        lock.unlock()
    }
}
