// The SyncManager-style view: the older API's message view, for applications that move over
// without rewriting their view code (shared/SEMANTICS.md "SyncManager-style view").
//
// Design note. A sync view is a message collection (MessageCollection.swift, same cache,
// same range and chunk rules, no second sync engine) seen through an adapter that turns its
// added / updated / deleted reports into the older API's actions (insert / update / remove /
// clear) on three lists: succeeded, pending and failed messages. The adapter keeps what it
// told the application per list, so a message moves between lists with a remove on one and
// an insert on the other (a send: insert pending; accepted: remove pending, insert
// succeeded; failed: remove pending, insert failed; canceled or removed — the collection's
// `updated` with status canceled —: remove on the list that held it), and nothing is
// inserted twice.
// Differences to the collection, on purpose:
// - the first fetch (either direction) loads `limit` messages on each side of the viewpoint
//   (the newest `limit` at the newest end); later fetches page one way;
// - the view does not fill what it missed while offline by itself: once the stream is back
//   its `has more` toward newer messages turns true and `fetch(.next)` or `fetchAllNext`
//   brings the missed messages (no huge-gap report);
// - a fetch that cannot reach the server completes with `offline` set and what the cache
//   holds provably (the first fetch: what the cache holds around the viewpoint; the
//   server's version of it follows as actions once online).
// `resetViewpoint` disposes the inner collection and creates a new one: a `clear` on each
// list, then only what the new viewpoint loads; fetches of the old one complete with
// `.cancelled` and change nothing.
//
// Threading: the adapter runs on the client's callback context (where the collection
// reports), its lists behind a lock so that the application may read them from anywhere.

/// Which way a fetch pages.
public enum SyncViewDirection: Int32, Sendable, CaseIterable {
    /// Older messages.
    case previous = 1
    /// Newer messages, toward the newest end.
    case next = 2
}

/// What the application does to one of its lists.
public enum SyncViewAction: Int32, Sendable, CaseIterable {
    case insert = 1
    case update = 2
    case remove = 3
    /// The list is emptied (the viewpoint was reset); no messages.
    case clear = 4
}

/// The three lists of a sync view.
public enum SyncViewList: Int32, Sendable, CaseIterable {
    /// The server's messages (this client's once accepted), in (created_at, message_id) order.
    case succeeded = 1
    /// This client's messages on their way to the server, in send order.
    case pending = 2
    /// This client's messages whose send failed, kept for a resend or removal.
    case failed = 3
}

/// What a sync view shows and how much a fetch loads.
public struct SyncViewOptions: Sendable, Equatable {
    /// Messages a fetch loads (1–200); `fetchAllNext` ignores it.
    public var limit = 30
    /// The filters and optional parts, as for a message collection (its page sizes, order
    /// and gap threshold are the sync view's own). Replies are shown by default.
    public var filter = MessageListParams()

    public init() { filter.replyType = .all }

    static let fieldNames: Set<String> = [
        "limit", "message_type_filter", "custom_types", "sender_user_ids", "reply_type", "include_thread_info",
        "include_parent_message_info", "include_reactions", "include_meta_array",
    ]

    /// Reads the options from their JSON form (the C ABI's and Python's): `limit` and the
    /// filter fields above, every one optional. Unknown fields and wrong types are refused.
    public init(json: JSONValue) throws(ParleyError) {
        self.init()
        let reader = try JSONReader(json, path: "options")
        try reader.rejectUnknownKeys(allowed: Self.fieldNames)
        limit = Int(try reader.int("limit", default: Int64(limit), in: 1...200))
        var fields = reader.fields
        fields["limit"] = nil
        if fields["reply_type"] == nil { fields["reply_type"] = .string(ReplyTypeFilter.all.rawValue) }
        filter = try MessageListParams(json: .object(fields), path: "options")
    }

    /// The inner collection's parameters.
    var collectionParams: MessageListParams {
        var params = filter
        params.previousResultSize = limit
        params.nextResultSize = limit
        params.isInclusive = true
        params.reverse = false
        params.hugeGapThreshold = 1_000_000
        return params
    }
}

/// How a fetch ended.
public struct SyncFetchResult: Sendable, Equatable {
    /// More messages exist that way (toward newer ones: also after a reconnection, until
    /// fetched).
    public var hasMore: Bool
    /// The server could not be reached: the fetch gave what the cache holds.
    public var offline: Bool
    /// Where the fetched messages came from (`fetchAllNext`: the server's only when every
    /// page was).
    public var origin: PageOrigin

    public init(hasMore: Bool, offline: Bool, origin: PageOrigin = .cache) {
        self.hasMore = hasMore
        self.offline = offline
        self.origin = origin
    }
}

public typealias SyncFetchCompletion = @Sendable (Result<SyncFetchResult, ParleyError>) -> Void

/// The callbacks of a sync view. They run on the client's callback context, one at a time,
/// never after `dispose()` returned.
public struct SyncViewHandler: Sendable {
    /// Apply `action` to `list` with `messages` (in the list's order; none for `clear`).
    public var action: @Sendable (SyncViewAction, SyncViewList, [JSONValue]) -> Void
    /// A background step failed (the server's page after an offline first fetch).
    public var error: @Sendable (ParleyError) -> Void
    /// The view's freshness changed (only real changes, in order with the actions).
    public var freshnessChanged: @Sendable (ViewFreshness) -> Void

    public init(
        action: @escaping @Sendable (SyncViewAction, SyncViewList, [JSONValue]) -> Void = { _, _, _ in },
        error: @escaping @Sendable (ParleyError) -> Void = { _ in },
        freshnessChanged: @escaping @Sendable (ViewFreshness) -> Void = { _ in }
    ) {
        self.action = action
        self.error = error
        self.freshnessChanged = freshnessChanged
    }
}

public final class SyncView: Sendable {
    public let channelURL: String
    public let options: SyncViewOptions
    let dispatcher: CallbackDispatcher
    let handler: SyncViewHandler
    let guardState = DisposeGuard()
    /// Held weakly. A sync view is built on message collections of its client (it makes a
    /// new one at each reset), so it knows the client itself.
    private let owner: WeakReference<ParleyClient>
    private let state: Locked<SyncViewState>
    /// Held for a whole `resetViewpoint`.
    private let resetting = Locked<Void>(())

    /// The viewpoint that means "the newest end" (the default).
    public static let newestViewpoint = Int64.max

    init(client: ParleyClient, channelURL: String, viewpoint: Int64, options: SyncViewOptions, handler: SyncViewHandler)
        throws(ParleyError)
    {
        guard viewpoint >= 0 else { throw .invalidArgument("viewpoint must be a time in ms (>= 0), got \(viewpoint)") }
        try options.collectionParams.validate()
        self.channelURL = channelURL
        self.options = options
        self.dispatcher = client.dispatcher
        self.handler = handler
        self.owner = WeakReference(client)
        self.state = Locked(SyncViewState(viewpoint: viewpoint))
        let collection = try makeCollection(client: client, viewpoint: viewpoint, generation: 0)
        state.withLock {
            $0.collection = collection
            $0.freshness = collection.freshness
        }
    }

    deinit { dispose() }

    public var isDisposed: Bool { guardState.isDisposed }

    /// Live, cached, catching up or offline, as of the callbacks delivered so far: the
    /// message collection's underneath (`SyncViewHandler.freshnessChanged` reports changes).
    public var freshness: ViewFreshness { state.withLock { $0.freshness } }

    /// Where the result the last fetch completion got came from: read inside a completion,
    /// that fetch's. nil before the first completion and after one with an error.
    public var lastFetchOrigin: PageOrigin? { state.withLock { $0.lastFetchOrigin } }

    /// The viewpoint (ms) the view started from; `newestViewpoint` for the newest end.
    public var viewpoint: Int64 { state.withLock { $0.viewpoint } }

    /// What the view has shown on `list`: updated just before the actions of each batch are
    /// handed over (docs/THREADING.md rule 7).
    public func messages(_ list: SyncViewList) -> [JSONValue] {
        let lists = state.withLock { $0.lists }
        return switch list {
        case .succeeded: lists.succeeded.values.sorted { $0.key < $1.key }.map(\.message)
        case .pending: lists.pending.map(\.message)
        case .failed: lists.failed.map(\.message)
        }
    }

    // MARK: Fetching

    /// Fetches `limit` messages `direction` (the first fetch: around the viewpoint): from the
    /// cache where it provably holds them, else from the server (the view waits for it
    /// rather than giving a short page). They arrive as `insert` actions before the
    /// completion. Offline the completion says so and the view keeps what the cache gave.
    public func fetch(_ direction: SyncViewDirection, completion: @escaping SyncFetchCompletion) {
        guard let claimed = claimFetch(completion) else { return }
        fetch(direction, claimed) { result, _ in self.completeFetch(completion, result) }
    }

    /// Fetches every newer message, whatever the limit (for a user who was at the newest end
    /// and comes back online), page after page until none is left.
    public func fetchAllNext(completion: @escaping SyncFetchCompletion) {
        guard let claimed = claimFetch(completion) else { return }
        fetchAllNext(claimed, completion: completion)
    }

    private func fetchAllNext(_ claimed: ClaimedFetch, origin: PageOrigin? = nil, completion: @escaping SyncFetchCompletion) {
        fetch(.next, claimed) { result, added in
            // The pages as one result: the server's only when it gave each of them.
            var result = result
            if case .success(var outcome) = result, let origin {
                outcome.origin = origin.combined(with: outcome.origin)
                result = .success(outcome)
            }
            // Stops at the end, offline, on an error, and on a page that brought nothing (no
            // loop on a view that cannot move).
            guard case .success(let outcome) = result, outcome.hasMore, !outcome.offline, added > 0 else {
                return self.completeFetch(completion, result)
            }
            guard let next = self.claimFetch(completion, generation: claimed.generation) else { return }
            self.fetchAllNext(next, origin: outcome.origin, completion: completion)
        }
    }

    /// Runs a fetch's completion (on the callback context), its origin readable meanwhile.
    private func completeFetch(_ completion: SyncFetchCompletion, _ result: Result<SyncFetchResult, ParleyError>) {
        let origin: PageOrigin? = if case .success(let outcome) = result { outcome.origin } else { nil }
        state.withLock { $0.lastFetchOrigin = origin }
        completion(result)
    }

    /// Starts over from `viewpoint` (ms, or `newestViewpoint`): a `clear` on each list, then
    /// the next fetch loads around the new viewpoint. Fetches in flight complete with
    /// `.cancelled` and change nothing.
    public func resetViewpoint(_ viewpoint: Int64) throws(ParleyError) {
        guard viewpoint >= 0 else { throw .invalidArgument("viewpoint must be a time in ms (>= 0), got \(viewpoint)") }
        // Resets run one at a time: each gets the next generation and its own collection.
        try resetting.withLock { _ throws(ParleyError) in
            guard !guardState.isDisposed else { throw .invalidState("the sync view is disposed") }
            guard let client = owner.object else { throw .invalidState("the sync view's client is closed") }
            let generation = state.withLock { $0.generation } + 1
            let fresh = try makeCollection(client: client, viewpoint: viewpoint, generation: generation)
            let state = self.state
            let handler = self.handler
            let guardState = self.guardState
            let weakSelf = WeakReference(self)
            // The swap and the queued clears in one step: a fetch of the new collection can
            // only be claimed after it, so its actions follow the clears.
            let old = state.withLock { view -> MessageCollection?? in
                guard !guardState.isDisposed else { return .none }
                view.generation = generation
                view.viewpoint = viewpoint
                view.started = false
                defer { view.collection = fresh }
                dispatcher.enqueue {
                    guardState.run {
                        let current = state.withLock { view -> Bool in
                            guard view.generation == generation else { return false }
                            view.lists = SyncViewLists()
                            return true
                        }
                        guard current else { return }
                        for list in SyncViewList.allCases { handler.action(.clear, list, []) }
                    }
                    // The new collection's freshness, unless it reported one already.
                    weakSelf.object?.forwardFreshness(fresh.freshness, generation)
                }
                return .some(view.collection)
            }
            guard let old else {
                fresh.dispose()
                throw .invalidState("the sync view is disposed")
            }
            old?.dispose()
        }
    }

    // MARK: Disposing

    /// Stops the view (the older API's `remove`): after it returns no callback of it runs.
    /// Fetches in flight complete with `.cancelled` (one asked at the same moment may get
    /// `.invalidState`). Idempotent; safe inside a callback.
    public func dispose() {
        guard guardState.markDisposed() else { return }
        let collection = state.withLock { view -> MessageCollection? in
            defer { view.collection = nil }
            return view.collection
        }
        collection?.dispose()
        guardState.waitForRunningCallback(dispatcher: dispatcher)
    }

    // MARK: The adapter

    private func makeCollection(client: ParleyClient, viewpoint: Int64, generation: UInt64) throws(ParleyError) -> MessageCollection {
        let weakSelf = WeakReference(self)
        let handler = MessageCollectionHandler(
            added: { context, _, messages in weakSelf.object?.translate(.added, context.sendingStatus, Array(messages), generation) },
            updated: { context, _, messages in weakSelf.object?.translate(.updated, context.sendingStatus, Array(messages), generation) },
            deleted: { context, _, messages in weakSelf.object?.translate(.deleted, context.sendingStatus, Array(messages), generation) },
            error: { failure in weakSelf.object?.reportError(failure, generation) },
            freshnessChanged: { freshness in weakSelf.object?.forwardFreshness(freshness, generation) })
        return try MessageCollection(
            client: client, channelURL: channelURL, startingPoint: viewpoint, params: options.collectionParams, handler: handler,
            fillsGapsByItself: false)
    }

    /// The collection a fetch goes to, with its generation and whether it is the first fetch.
    struct ClaimedFetch {
        var collection: MessageCollection
        var generation: UInt64
        var first: Bool
    }

    /// Claims the current collection for a fetch; nil (and the completion told) when the view
    /// is disposed, or when `generation` is given and the viewpoint was reset since.
    private func claimFetch(_ completion: @escaping SyncFetchCompletion, generation: UInt64? = nil) -> ClaimedFetch? {
        let claimed = state.withLock { view -> Result<ClaimedFetch, ParleyError> in
            guard let collection = view.collection else { return .failure(.invalidState("the sync view is disposed")) }
            if let generation, generation != view.generation { return .failure(.cancelled("the viewpoint was reset")) }
            defer { view.started = true }
            return .success(ClaimedFetch(collection: collection, generation: view.generation, first: !view.started))
        }
        switch claimed {
        case .success(let fetch) where !guardState.isDisposed:
            return fetch
        case .success:
            dispatcher.enqueue { completion(.failure(.invalidState("the sync view is disposed"))) }
        case .failure(let error):
            dispatcher.enqueue { completion(.failure(error)) }
        }
        return nil
    }

    /// Runs one claimed fetch; `done` gets the outcome and how many messages it showed.
    private func fetch(
        _ direction: SyncViewDirection, _ claimed: ClaimedFetch, done: @escaping @Sendable (Result<SyncFetchResult, ParleyError>, Int) -> Void
    ) {
        let collection = claimed.collection
        let generation = claimed.generation
        if claimed.first {
            // Online the server's page is what the view shows (no stale cached page first);
            // when the server cannot give it, what the cache held.
            let cached = Locked<[JSONValue]>([])
            collection.start(
                cacheResult: { result in
                    if case .success(let list) = result { cached.withLock { $0 = Array(list) } }
                },
                apiResult: { result in
                    if case .failure(let error) = result, error.code != .cancelled {
                        _ = self.show(cached.withLock { $0 }, generation: generation, removingOthers: false)
                    }
                    self.finish(result, direction: direction, collection: collection, generation: generation, whole: true, done)
                })
            return
        }
        let finish: MessagesCompletion = { result in
            self.finish(result, direction: direction, collection: collection, generation: generation, whole: false, done)
        }
        switch direction {
        case .previous: collection.loadPrevious(completion: finish)
        case .next: collection.loadNext(completion: finish)
        }
    }

    /// Ends a fetch: its messages are shown (unless the viewpoint was reset or the view
    /// disposed meanwhile), then the completion runs.
    private func finish(
        _ result: Result<MessageList, ParleyError>, direction: SyncViewDirection, collection: MessageCollection, generation: UInt64,
        whole: Bool, _ done: @Sendable (Result<SyncFetchResult, ParleyError>, Int) -> Void
    ) {
        guard isCurrent(generation) else { return done(.failure(.cancelled("the viewpoint was reset")), 0) }
        let hasMore = direction == .previous ? collection.hasPrevious : collection.hasNext
        switch result {
        case .success(let messages):
            let shown = show(Array(messages), generation: generation, removingOthers: whole)
            // An action callback may have reset the viewpoint: this fetch then belongs to the old one.
            guard isCurrent(generation) else { return done(.failure(.cancelled("the viewpoint was reset")), 0) }
            let offline = owner.object.map { $0.connectionState == .closed } ?? true
            // The collection's completion runs now: its origin is this result's.
            let origin = collection.lastLoadOrigin ?? .cache
            done(.success(SyncFetchResult(hasMore: hasMore, offline: offline, origin: origin)), shown)
        case .failure(let error) where error.isRetryable:
            // The first fetch shows what the cache held.
            done(.success(SyncFetchResult(hasMore: hasMore, offline: true, origin: .cache)), 0)
        case .failure(let error):
            done(.failure(error), 0)
        }
    }

    private func isCurrent(_ generation: UInt64) -> Bool { state.withLock { $0.generation } == generation }

    /// Shows messages a load returned (each in the list its sending status names); with
    /// `removingOthers` they are the whole view, and succeeded messages shown but not among
    /// them are removed. Returns how many it inserted or updated.
    private func show(_ messages: [JSONValue], generation: UInt64, removingOthers: Bool) -> Int {
        var shown = 0
        guardState.run {
            let actions = state.withLock { view -> [SyncViewLists.Action] in
                guard view.generation == generation else { return [] }
                var actions: [SyncViewLists.Action] = []
                if removingOthers {
                    let kept = Set(messages.compactMap { WireMessage($0).messageID }.filter { $0 > 0 })
                    let gone = view.lists.succeeded.values.filter { !kept.contains($0.key.messageID) }.sorted { $0.key < $1.key }
                    for entry in gone {
                        view.lists.succeeded[entry.key.messageID] = nil
                        SyncViewLists.append(.remove, .succeeded, entry.message, to: &actions)
                    }
                }
                for message in messages {
                    let status = MessageSendingStatus(sendingStatusOf: message)
                    view.lists.apply(.added, status, message, into: &actions)
                }
                return actions
            }
            shown = actions.reduce(0) { $0 + ($1.action == .remove ? 0 : $1.messages.count) }
            deliver(actions, generation: generation)
        }
        return shown
    }

    /// A report of the inner collection, as actions.
    private func translate(_ kind: MessageEvents.Kind, _ status: MessageSendingStatus, _ messages: [JSONValue], _ generation: UInt64) {
        guardState.run {
            let actions = state.withLock { view -> [SyncViewLists.Action] in
                guard view.generation == generation else { return [] }
                var actions: [SyncViewLists.Action] = []
                for message in messages { view.lists.apply(kind, status, message, into: &actions) }
                return actions
            }
            deliver(actions, generation: generation)
        }
    }

    /// The collection underneath reported its freshness: passed on when it changes what the
    /// application was told (a reset makes a new collection, whose value may be the same).
    private func forwardFreshness(_ freshness: ViewFreshness, _ generation: UInt64) {
        guardState.run {
            let changed = state.withLock { view -> Bool in
                guard view.generation == generation, view.freshness != freshness else { return false }
                view.freshness = freshness
                return true
            }
            if changed { handler.freshnessChanged(freshness) }
        }
    }

    private func reportError(_ error: ParleyError, _ generation: UInt64) {
        guard isCurrent(generation) else { return }
        guardState.run { handler.error(error) }
    }

    /// Hands actions to the application, stopping if one of them reset the viewpoint.
    private func deliver(_ actions: [SyncViewLists.Action], generation: UInt64) {
        for action in actions {
            guard isCurrent(generation) else { return }
            handler.action(action.action, action.list, action.messages)
        }
    }
}

struct SyncViewState: Sendable {
    var viewpoint: Int64
    var generation: UInt64 = 0
    var collection: MessageCollection?
    var started = false
    var lists = SyncViewLists()
    /// What the application was told (or the first collection's value before any report).
    var freshness = ViewFreshness.offline
    var lastFetchOrigin: PageOrigin?
}

extension MessageSendingStatus {
    /// The status a message of a load carries: this client's local messages say so in
    /// `sending_status`; the server's messages do not.
    init(sendingStatusOf message: JSONValue) {
        switch message["sending_status"]?.stringValue {
        case "pending": self = .pending
        case "failed": self = .failed
        default: self = .succeeded
        }
    }
}

/// What the application was told, per list: the adapter's memory.
struct SyncViewLists: Sendable {
    struct Entry: Sendable {
        var key: MessageKey
        var message: JSONValue
    }

    struct LocalEntry: Sendable {
        var reqID: String
        var message: JSONValue
    }

    struct Action {
        var action: SyncViewAction
        var list: SyncViewList
        var messages: [JSONValue]
    }

    var succeeded: [Int64: Entry] = [:]
    var pending: [LocalEntry] = []
    var failed: [LocalEntry] = []

    /// Queues an action; consecutive ones on the same list merge.
    static func append(_ action: SyncViewAction, _ list: SyncViewList, _ message: JSONValue, to actions: inout [Action]) {
        if let last = actions.last, last.action == action, last.list == list {
            actions[actions.count - 1].messages.append(message)
        } else {
            actions.append(Action(action: action, list: list, messages: [message]))
        }
    }

    /// Applies one report of the collection (a message added, updated or deleted with its
    /// sending status) and queues the actions that tell the application.
    mutating func apply(_ kind: MessageEvents.Kind, _ status: MessageSendingStatus, _ message: JSONValue, into actions: inout [Action]) {
        let reqID = WireMessage(message).reqID ?? ""
        let messageID = WireMessage(message).messageID ?? 0
        if kind == .deleted {
            if !reqID.isEmpty, let local = takeLocal(reqID) {
                Self.append(.remove, local.list, local.entry.message, to: &actions)
            } else if messageID > 0, let entry = succeeded.removeValue(forKey: messageID) {
                Self.append(.remove, .succeeded, entry.message, to: &actions)
            }
            return
        }
        switch status {
        case .canceled:
            // The collection reports a cancel (or a removal of failed messages) as `updated`
            // with status canceled: the view has no list of canceled messages, so it is one
            // remove on the list that held it (pending or failed).
            if let local = takeLocal(reqID) { Self.append(.remove, local.list, local.entry.message, to: &actions) }
        case .pending, .failed:
            let list: SyncViewList = status == .pending ? .pending : .failed
            if let local = takeLocal(reqID) {
                if local.list == list {
                    putLocal(LocalEntry(reqID: reqID, message: message), in: list, at: local.index)
                    Self.append(.update, list, message, to: &actions)
                    return
                }
                Self.append(.remove, local.list, local.entry.message, to: &actions)
            }
            putLocal(LocalEntry(reqID: reqID, message: message), in: list, at: nil)
            Self.append(.insert, list, message, to: &actions)
        case .succeeded, .none:
            guard messageID > 0, let createdAt = WireMessage(message).createdAt else { return }
            if !reqID.isEmpty, let local = takeLocal(reqID) {
                Self.append(.remove, local.list, local.entry.message, to: &actions)
            }
            let key = MessageKey(createdAt: createdAt, messageID: messageID)
            if let shown = succeeded[messageID] {
                guard shown.message != message else { return }
                succeeded[messageID] = Entry(key: key, message: message)
                Self.append(.update, .succeeded, message, to: &actions)
            } else {
                succeeded[messageID] = Entry(key: key, message: message)
                Self.append(.insert, .succeeded, message, to: &actions)
            }
        }
    }

    private mutating func takeLocal(_ reqID: String) -> (list: SyncViewList, index: Int, entry: LocalEntry)? {
        guard !reqID.isEmpty else { return nil }
        if let index = pending.firstIndex(where: { $0.reqID == reqID }) { return (.pending, index, pending.remove(at: index)) }
        if let index = failed.firstIndex(where: { $0.reqID == reqID }) { return (.failed, index, failed.remove(at: index)) }
        return nil
    }

    private mutating func putLocal(_ entry: LocalEntry, in list: SyncViewList, at index: Int?) {
        if list == .pending {
            pending.insert(entry, at: min(index ?? pending.count, pending.count))
        } else {
            failed.insert(entry, at: min(index ?? failed.count, failed.count))
        }
    }
}

extension ParleyClient {
    /// The SyncManager-style view of one channel (see SyncView), from `viewpoint` (ms;
    /// `SyncView.newestViewpoint` for the newest end). Needs a connected client (it may be
    /// offline since). Nothing loads until the first fetch.
    public func syncView(
        channelURL: String, viewpoint: Int64 = SyncView.newestViewpoint, options: SyncViewOptions = SyncViewOptions(),
        handler: SyncViewHandler
    ) throws(ParleyError) -> SyncView {
        guard !isClosed else { throw .invalidState("the client is closed") }
        guard !channelURL.isEmpty else { throw .invalidArgument("channel_url must not be empty") }
        let view = try SyncView(client: self, channelURL: channelURL, viewpoint: viewpoint, options: options, handler: handler)
        collections.add(view)
        return view
    }
}

extension SyncView: DisposableCollection {}
