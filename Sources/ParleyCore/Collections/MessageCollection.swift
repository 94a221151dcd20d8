
// The message collection: the live chat view of one channel.
//
// Design note. The view holds a *key range* `low...high` of the channel's messages (keys
// are (created_at, message_id), the server's order) and shows every message in it that
// matches the filters; `high` is `MessageKey.newest` while the view reaches the newest end
// and the real-time stream vouches that nothing was missed. Three rules keep it exact, all
// driven by the change feed (Sync/ChangeFeed.swift), in commit order:
// - a message whose key lies in the range and matches is shown (`added`, or `updated`);
//   one shown that stops matching or leaves the cache is `deleted`; nothing outside the
//   range is reported (it arrives with the page that reaches it);
// - a range grows only by a page the cache provably holds (a chunk covers it) or the
//   server's answer (stored first, recorded as a chunk); `has_previous` / `has_next` come
//   from the server's flags or a chunk's end flags, never from "the page was full";
// - when the stream drops, a view at the newest end stops at its last message and owes a
//   gap check: after the catch-up it asks the server what it missed (`messages_gap`) and
//   fills it (`message_fill`) or reports a huge gap.
// Messages this client sends (pending, failed) are shown after the server's messages, in
// send order, until the server's copy replaces them (`updated`, succeeded) or they go.
//
// Loads (start, pages, gap checks) run one at a time, in the order asked, through Paging
// (Sync/Paging.swift), which reads the cache or the server and stores what the server sent.
//
// State lives on the engine queue. What the application reads (`messages`, `hasPrevious`,
// `hasNext`) is a copy updated in callback order.

/// The sending state a collection event carries (`PARLEY_SENDING_STATUS_*`).
public enum MessageSendingStatus: Int32, Sendable, CaseIterable {
    /// Not about a message (channel events, huge gap).
    case none = 0
    case pending = 1
    case failed = 2
    case canceled = 3
    /// A server message (sent by anyone), or this client's message once accepted.
    case succeeded = 4
}

/// Why a message collection reported a change.
public struct MessageEventContext: Sendable {
    public var source: CollectionEventSource
    /// The real-time event's category as the server named it, or the operation's name; "" otherwise.
    public var detail: String
    public var sendingStatus: MessageSendingStatus

    public init(source: CollectionEventSource, detail: String, sendingStatus: MessageSendingStatus) {
        self.source = source
        self.detail = detail
        self.sendingStatus = sendingStatus
    }
}

/// The callbacks of a message collection. They run on the client's callback context
/// (docs/THREADING.md), one at a time, never after `dispose()` returned. Message lists are
/// in the view's order (newest first with `reverse`); `channel` is the channel as cached, as
/// its stored text (every live message changes the channel: handing on its text costs
/// nothing per member; `.value` parses it).
public struct MessageCollectionHandler: Sendable {
    public var added: @Sendable (MessageEventContext, JSONText, MessageList) -> Void
    public var updated: @Sendable (MessageEventContext, JSONText, MessageList) -> Void
    public var deleted: @Sendable (MessageEventContext, JSONText, MessageList) -> Void
    public var channelUpdated: @Sendable (MessageEventContext, JSONText) -> Void
    public var channelDeleted: @Sendable (MessageEventContext, String) -> Void
    /// More messages than the threshold were missed while offline: dispose the view and
    /// create a new one (it shows the newest end, or the point the application chooses).
    public var hugeGapDetected: @Sendable () -> Void
    /// A background step failed (a gap check, the server's page after an offline start).
    public var error: @Sendable (ParleyError) -> Void
    /// The view's freshness changed (only real changes, in order with the other callbacks).
    public var freshnessChanged: @Sendable (ViewFreshness) -> Void

    public init(
        added: @escaping @Sendable (MessageEventContext, JSONText, MessageList) -> Void = { _, _, _ in },
        updated: @escaping @Sendable (MessageEventContext, JSONText, MessageList) -> Void = { _, _, _ in },
        deleted: @escaping @Sendable (MessageEventContext, JSONText, MessageList) -> Void = { _, _, _ in },
        channelUpdated: @escaping @Sendable (MessageEventContext, JSONText) -> Void = { _, _ in },
        channelDeleted: @escaping @Sendable (MessageEventContext, String) -> Void = { _, _ in },
        hugeGapDetected: @escaping @Sendable () -> Void = {},
        error: @escaping @Sendable (ParleyError) -> Void = { _ in },
        freshnessChanged: @escaping @Sendable (ViewFreshness) -> Void = { _ in }
    ) {
        self.added = added
        self.updated = updated
        self.deleted = deleted
        self.channelUpdated = channelUpdated
        self.channelDeleted = channelDeleted
        self.hugeGapDetected = hugeGapDetected
        self.error = error
        self.freshnessChanged = freshnessChanged
    }
}

public typealias MessagesCompletion = @Sendable (Result<MessageList, ParleyError>) -> Void

public final class MessageCollection: Sendable {
    public let channelURL: String
    /// The starting point (ms); `Int64.max` for the newest end.
    public let startingPoint: Int64
    public let params: MessageListParams
    /// What the view reaches below itself: the engine (Sync/MessageViewContext.swift).
    let context: any MessageViewContext
    let dispatcher: CallbackDispatcher
    let handler: MessageCollectionHandler
    let guardState = DisposeGuard()
    let published = Locked(PublishedMessages())
    /// Live, cached, catching up or offline (Sync/ViewFreshness.swift).
    let freshnessTracker: FreshnessTracker
    /// Where the last load's result came from (nil before one, and after a failed one).
    let publishedOrigin = Locked<PageOrigin?>(nil)
    /// What sends go through (the client), held weakly: a collection does not keep its client alive.
    private let outbox: WeakSender
    /// Engine-queue state.
    let view: MessageViewState
    /// After the stream dropped the view checks and fills what it missed at its newest end by
    /// itself; false for the SyncManager-style view (SyncView.swift), whose application asks
    /// with a fetch of newer messages (`has_next` turns true once the stream is back).
    let fillsGapsByItself: Bool

    /// The starting point that means "the newest end".
    public static let newestStartingPoint = Int64.max

    convenience init(
        client: ParleyClient, channelURL: String, startingPoint: Int64, params: MessageListParams, handler: MessageCollectionHandler,
        fillsGapsByItself: Bool = true
    ) throws(ParleyError) {
        try self.init(
            context: client.engine, dispatcher: client.dispatcher, outbox: WeakSender(client), channelURL: channelURL,
            startingPoint: startingPoint, params: params, handler: handler, fillsGapsByItself: fillsGapsByItself)
    }

    /// A view over `context` (the engine, or a test's stand-in); sends go through `outbox`.
    init(
        context: any MessageViewContext, dispatcher: CallbackDispatcher, outbox: WeakSender, channelURL: String, startingPoint: Int64,
        params: MessageListParams, handler: MessageCollectionHandler, fillsGapsByItself: Bool = true
    ) throws(ParleyError) {
        try params.validate()
        guard !channelURL.isEmpty else { throw .invalidArgument("channel_url must not be empty") }
        guard startingPoint >= 0 else { throw .invalidArgument("starting_point must be a time in ms (>= 0), got \(startingPoint)") }
        self.channelURL = channelURL
        self.startingPoint = startingPoint
        self.params = params
        self.context = context
        self.dispatcher = dispatcher
        self.handler = handler
        self.fillsGapsByItself = fillsGapsByItself
        self.outbox = outbox
        let userID: String? = context.runNow { context.cacheUserID }
        guard userID != nil else { throw .invalidState("message collection: connect first (the cache is per user)") }
        view = MessageViewState(filter: params.filter)
        freshnessTracker = FreshnessTracker()
        let view = self.view
        context.attach(
            self, state: view, channelURL: channelURL, freshness: freshnessTracker,
            setUp: {
                view.channel = context.cachedChannelText(channelURL)
                context.retainChannel(channelURL)
            },
            observe: { collection, batch in collection.observe(batch) })
    }

    deinit { dispose() }

    // MARK: What the application reads

    /// The shown messages in the view's order: the server's messages by (created_at,
    /// message_id), then this client's pending and failed ones in send order (all reversed
    /// with `reverse`). Updated in callback order.
    public var messages: [JSONValue] {
        let state = published.withLock { $0 }
        let omitted = params.omittedMembers
        var list = state.messages.map { $0.presented(params, omitting: omitted).value }
        list += state.locals.map(params.presented)
        return params.reverse ? list.reversed() : list
    }

    /// `messages` as one JSON array text (canonical form), built without parsing what came
    /// from the cache.
    public var messagesJSON: String {
        let state = published.withLock { $0 }
        let omitted = params.omittedMembers
        var items = state.messages.map { $0.presented(params, omitting: omitted) }
        items += state.locals.map { MessageItem.value(params.presented($0)) }
        return MessageList(items: params.reverse ? items.reversed() : items).jsonText
    }

    /// True while older messages (matching the filters) exist beyond the loaded ones.
    public var hasPrevious: Bool { published.withLock { $0.hasPrevious } }
    /// True while newer messages exist beyond the loaded ones (false at the newest end).
    public var hasNext: Bool { published.withLock { $0.hasNext } }

    public var isDisposed: Bool { guardState.isDisposed }

    /// Live, cached, catching up or offline, as of the callbacks delivered so far
    /// (`MessageCollectionHandler.freshnessChanged` reports each change).
    public var freshness: ViewFreshness { freshnessTracker.published }

    /// Where the result the last load completion got came from: read inside a completion, that
    /// result's. nil before the first completion and after one with an error.
    public var lastLoadOrigin: PageOrigin? { publishedOrigin.withLock { $0 } }

    // MARK: Loading

    /// Loads the view around the starting point: `cacheResult` gets what the cache holds there
    /// (possibly empty or stale, also offline), then `apiResult` the server's page, which
    /// replaces it (in the view and in the cache). Each gets the whole list as shown then.
    /// When the server cannot be reached, `apiResult` gets the error and the view keeps the
    /// cached list; the server's page then follows after the next connection, its difference
    /// reported as events (source `api_load`). Both run exactly once.
    public func start(cacheResult: @escaping MessagesCompletion, apiResult: @escaping MessagesCompletion) {
        schedule(.start(cache: cacheResult, api: apiResult)) { error in
            cacheResult(.failure(error))
            apiResult(.failure(error))
        }
    }

    /// Loads `previousResultSize` older messages; the completion gets those it added (in the
    /// view's order; none when `hasPrevious` is false). From the cache when a chunk covers
    /// them, else from the server. Loads run one after another.
    public func loadPrevious(completion: @escaping MessagesCompletion) {
        schedule(.previous(completion)) { completion(.failure($0)) }
    }

    /// Loads newer messages (`nextResultSize`, or `previousResultSize` when that is 0).
    public func loadNext(completion: @escaping MessagesCompletion) {
        schedule(.next(completion)) { completion(.failure($0)) }
    }

    // MARK: Sending through the view

    /// Sends a user message into this channel (see `ParleyClient.sendUserMessage`): it appears
    /// at once as `added` (pending), then `updated` (succeeded or failed).
    public func sendUserMessage(
        params: JSONValue, completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void = { _ in }
    ) throws(ParleyError) -> AcceptedSend {
        guard let sender = outbox.sender else { throw .invalidState("the collection's client is closed") }
        return try sender.sendUserMessage(channelURL: channelURL, params: params, completion: completion)
    }

    /// Resends a failed message of this view (same `req_id`).
    public func resendMessage(reqID: String, completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void = { _ in })
        throws(ParleyError)
    {
        guard let sender = outbox.sender else { throw .invalidState("the collection's client is closed") }
        _ = try sender.resendMessage(reqID: reqID, progress: nil, completion: completion)
    }

    /// Removes this channel's failed messages (reported as deleted, status canceled); returns their req_ids.
    @discardableResult
    public func removeFailedMessages() throws(ParleyError) -> [String] {
        guard let sender = outbox.sender else { throw .invalidState("the collection's client is closed") }
        return try sender.removeFailedMessages(channelURL: channelURL)
    }

    // MARK: Disposing

    /// Stops the event callbacks: after it returns none runs. Loads in flight or waiting
    /// complete, once, with `.cancelled` (queued now, so they may run after this returns).
    /// Idempotent; safe inside a callback and while a page loads.
    public func dispose() {
        guard guardState.markDisposed() else { return }
        let context = self.context
        let view = self.view
        let channelURL = self.channelURL
        let pending: [@Sendable (ParleyError) -> Void] = context.runNow {
            if context.detach(view) { context.releaseChannel(channelURL) }
            var failures = view.running.map { [$0] } ?? []
            failures += view.operations.map(\.fail)
            view.running = nil
            view.operations = []
            return failures
        }
        if !pending.isEmpty {
            dispatcher.enqueue {
                for fail in pending { fail(.cancelled("the collection was disposed")) }
            }
        }
        guardState.waitForRunningCallback(dispatcher: dispatcher)
    }

    // MARK: Engine queue

    /// A load waiting to run, with what to tell its caller when it cannot.
    struct Operation {
        enum Kind {
            case start(cache: MessagesCompletion, api: MessagesCompletion)
            case previous(MessagesCompletion)
            case next(MessagesCompletion)
            /// After a reconnection: what did the view miss at its newest end?
            case gapCheck
            /// The server's page after a start that could not reach it.
            case reload

            /// The view's own part of a catch-up (its freshness is catching up meanwhile).
            var isFollowUp: Bool {
                switch self {
                case .gapCheck, .reload: true
                default: false
                }
            }
        }
        var kind: Kind
        var fail: @Sendable (ParleyError) -> Void
    }

    private func schedule(_ kind: Operation.Kind, fail: @escaping @Sendable (ParleyError) -> Void) {
        guard !guardState.isDisposed else {
            dispatcher.enqueue { fail(.invalidState("the collection is disposed")) }
            return
        }
        context.queue.async {
            guard self.view.observerID != nil else {
                self.dispatcher.enqueue { fail(.invalidState("the collection is disposed")) }
                return
            }
            self.view.operations.append(Operation(kind: kind, fail: fail))
            self.runOperations()
        }
    }

    /// Starts the next waiting load when none runs.
    func runOperations() {
        while view.running == nil, view.observerID != nil, !view.operations.isEmpty {
            let operation = view.operations.removeFirst()
            view.running = operation.fail
            view.runningFollowUp = operation.kind.isFollowUp
            perform(operation.kind)
        }
    }

    /// The running load has finished (its completions are queued).
    func operationFinished() {
        view.running = nil
        view.runningFollowUp = false
        view.currentLoad = nil
        refreshFreshness()
        context.queue.async { self.runOperations() }
    }
}

/// What a message view sends through: the outbox's calls as the facade offers them (checked,
/// registered as operations, completed on the callback context — Client/ParleyClient+Sending.swift).
/// The view knows this much of the client, not the client itself.
protocol MessageViewSender: AnyObject, Sendable {
    func sendUserMessage(
        channelURL: String, params: JSONValue, completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> AcceptedSend
    func resendMessage(
        reqID: String, progress: HTTPUploadProgress?, completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> UInt64
    func removeFailedMessages(channelURL: String) throws(ParleyError) -> [String]
}

final class WeakSender: Sendable {
    weak let sender: (any MessageViewSender)?
    init(_ sender: (any MessageViewSender)?) { self.sender = sender }
}

/// What the application reads, as the callbacks delivered so far left it.
struct PublishedMessages: Sendable {
    var messages = ChunkedList<MessageItem>()
    var locals: [JSONValue] = []
    var hasPrevious = true
    var hasNext = true
}

/// One shown message of this client that the server has not accepted yet.
struct LocalEntry {
    var reqID: String
    var createdAt: Int64
    var status: MessageSendingStatus
    var message: JSONValue
}

/// The view's state on the engine queue.
final class MessageViewState: FeedSubscriber, @unchecked Sendable {
    let filter: MessageFilter
    var observerID: UInt64?
    var channel: JSONText?
    var channelDeleted = false
    /// Shown server messages in key order: the keys, and the messages in chunks, so that the
    /// list is handed out without copying and a change after that copies one chunk.
    var keys: [MessageKey] = []
    var messages = ChunkedList<MessageItem>()
    var keyByID: [Int64: MessageKey] = [:]
    var locals: [LocalEntry] = []
    /// The range the view holds whole (inclusive bounds).
    var low = MessageKey.newest
    var high = MessageKey.oldest
    var hasPrevious = true
    var hasNext = true
    var started = false
    /// The server vouched for the range (false after a start that only reached the cache).
    var verified = false
    /// The view showed the newest end when the stream dropped: it owes a gap check.
    var gapCheckOwed = false
    /// A view that does not fill gaps by itself stays where the stream dropped until the
    /// application fetches newer messages up to the end (then anything still missing is
    /// filled like any gap).
    var waitsForFetchNext = false
    var catchingUp = false
    /// From a catch-up's start until the channel refresh after it, channel changes are not
    /// reported one by one: the refresh reports the net change (source `channel_refresh`)
    /// against `shownChannel`, the channel as the application last saw it.
    var holdsChannel = false
    var shownChannel: JSONText?
    // Loads.
    var operations: [MessageCollection.Operation] = []
    var running: (@Sendable (ParleyError) -> Void)?
    /// The running load is a gap check or the reload of an unconfirmed start.
    var runningFollowUp = false
    /// The server load running for this view (Sync/Paging.swift): the feed's report of its
    /// page is not news to the view, which takes the page from the load's result.
    var currentLoad: PageLoad?

    init(filter: MessageFilter) { self.filter = filter }

    var atNewestEnd: Bool { high == MessageKey.newest }

    func contains(_ key: MessageKey) -> Bool { started && low <= key && key <= high }

    /// The index where `key` is or would be inserted.
    func position(of key: MessageKey) -> Int {
        var lowIndex = 0, highIndex = keys.count
        while lowIndex < highIndex {
            let middle = (lowIndex + highIndex) / 2
            if keys[middle] < key { lowIndex = middle + 1 } else { highIndex = middle }
        }
        return lowIndex
    }

    /// Inserts or replaces a message; true when it was new to the view.
    @discardableResult
    func put(_ message: JSONValue, key: MessageKey, id: Int64) -> Bool {
        put(.value(message), key: key, id: id)
    }

    /// Inserts or replaces a message; true when it was new to the view.
    @discardableResult
    func put(_ message: MessageItem, key: MessageKey, id: Int64) -> Bool {
        let index = position(of: key)
        if index < keys.count, keys[index] == key {
            messages[index] = message
            return false
        }
        keys.insert(key, at: index)
        messages.insert(message, at: index)
        keyByID[id] = key
        return true
    }

    /// Inserts or replaces a page sorted by key; returns which were new to the view. A page
    /// wholly before or after the shown messages goes in with one move of the arrays (a page
    /// inserted message by message at the front shifts the whole view each time).
    func putPage(keys pageKeys: [MessageKey], items: [MessageItem]) -> [Bool] {
        precondition(pageKeys.count == items.count, "a page's keys and messages differ in number")
        guard let first = pageKeys.first, let last = pageKeys.last else { return [] }
        let before = keys.first.map { last < $0 } ?? true
        let after = keys.last.map { first > $0 } ?? true
        guard before || after, zip(pageKeys, pageKeys.dropFirst()).allSatisfy({ $0 < $1 }) else {
            return zip(pageKeys, items).map { put($1, key: $0, id: $0.messageID) }
        }
        let index = before ? 0 : keys.count
        keys.insert(contentsOf: pageKeys, at: index)
        messages.insert(contentsOf: items, at: index)
        // Grown by doubling: reserving just the page's room would rehash the table every page.
        if keyByID.capacity < keyByID.count + pageKeys.count {
            keyByID.reserveCapacity(Swift.max(2 * keyByID.capacity, keyByID.count + pageKeys.count))
        }
        for key in pageKeys { keyByID[key.messageID] = key }
        return Array(repeating: true, count: pageKeys.count)
    }

    /// The shown message at `key`, if any.
    func item(at key: MessageKey) -> MessageItem? {
        let index = position(of: key)
        return index < keys.count && keys[index] == key ? messages[index] : nil
    }

    /// Removes a shown message; returns it.
    func remove(id: Int64) -> MessageItem? {
        guard let key = keyByID.removeValue(forKey: id) else { return nil }
        let index = position(of: key)
        guard index < keys.count, keys[index] == key else { return nil }
        keys.remove(at: index)
        return messages.remove(at: index)
    }

    func removeAll() {
        keys = []
        messages.removeAll()
        keyByID = [:]
    }

    func localIndex(_ reqID: String) -> Int? { locals.firstIndex { $0.reqID == reqID } }

    /// A message of this client shown among the local ones although the server accepted it
    /// (`confirmLocal` keeps it there while a gap check is owed).
    func confirmedLocalIndex(messageID: Int64) -> Int? {
        locals.firstIndex { $0.status == .succeeded && WireMessage($0.message).messageID == messageID }
    }

    func insertLocal(_ entry: LocalEntry) {
        let index = locals.firstIndex { $0.createdAt > entry.createdAt } ?? locals.count
        locals.insert(entry, at: index)
    }
}
