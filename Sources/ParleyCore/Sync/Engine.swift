import Dispatch

// The Sync layer's core: the engine that keeps a client's cache in step with the server.
//
// Design note. One serial queue (`queue`, shared/DESIGN.md §3) owns all of it; nothing here
// takes a lock. Its state is split by concern:
// - `session`: who is connected, the event stream, and its lifecycle counters;
// - `store`: the open cache and its one writer (`CacheWriter`, the only code that mutates
//   the cache; every write is published as typed changes on `feed`);
// - `outbox`: sends in flight, their completions and uploads (Engine+Outbox.swift);
// - `catchUp`: the changelog catch-up after (re)connecting (Engine+Catchup.swift).
// Real-time events are applied in Engine+Events.swift. Views (the application's event
// handler, later the collections) subscribe to `feed` and learn every change from it, in
// commit order, with its cause.

/// Connection states reported to the application (`PARLEY_CONNECTION_*`).
public enum ConnectionEvent: Int32, Sendable {
    /// `connect` started (first connection).
    case connecting = 1
    /// The event stream is open.
    case connected = 2
    /// The stream dropped; automatic reconnection started.
    case reconnectStarted = 3
    /// A reconnection attempt succeeded (after catching up with changelogs).
    case reconnectSucceeded = 4
    /// A reconnection attempt failed; another will follow after a backoff delay.
    case reconnectFailed = 5
    /// `disconnect` was called, or the connection stopped for good (see the error).
    case disconnected = 6
    /// The session token expired: call `setSessionToken` with a new one.
    case sessionTokenRequired = 7

    /// Stable lower-case name: the constant's suffix (`PARLEY_CONNECTION_RECONNECT_STARTED` is
    /// "reconnect_started"), as the bindings name it.
    public var name: String {
        switch self {
        case .connecting: "connecting"
        case .connected: "connected"
        case .reconnectStarted: "reconnect_started"
        case .reconnectSucceeded: "reconnect_succeeded"
        case .reconnectFailed: "reconnect_failed"
        case .disconnected: "disconnected"
        case .sessionTokenRequired: "session_token_required"
        }
    }
}

/// The user a client acts for, and the credential it acts with.
struct Session: Sendable {
    var userID: String
    var token: String
}

/// Who is connected and the stream that keeps them current.
struct SessionState {
    var current: Session?
    var user: JSONValue?
    /// The real-time stream while connected.
    var stream: EventStreamConnection?
    /// Bumped by connect/disconnect so that late stream callbacks of an old session are ignored.
    var epoch: UInt64 = 0
    /// The stream was open at least once in this session (tells "connected" from "reconnected").
    var streamWasOpen = false
    /// The last event id of the server's replay after a resume: events up to it happened while
    /// the client was away, and collections report them as the changelogs' (0: none).
    var replayThrough: Int64 = 0
    /// Failed reconnection attempts since the stream was last open.
    var reconnectFailures = 0
    /// The engine queue applied the stream's `connected` and no drop since: what views'
    /// freshness reads (`isStreamOpen` reads the stream's own state, which runs ahead of
    /// what the engine applied). Changes are published as `connectivityChanged`.
    var linkOpen = false
    /// Bumped whenever events may have been missed (the stream dropped, or resumed past the
    /// server's retention): a page asked for before a bump cannot vouch for the newest end.
    var streamBreaks: UInt64 = 0
    /// `streamBreaks` when the stream last opened resuming from a position (the server then
    /// replays what was missed, each channel's first replayed event with its member list);
    /// nil when it opened fresh.
    var resumedAtBreaks: UInt64?
}

/// The open cache: its writer (reads go through `writer.cache`).
struct StoreState {
    var writer: CacheWriter?
    var userID: String?
    /// When each channel's access time was last written (to write it at most once a minute).
    var lastTouched: [String: Int64] = [:]
    /// Search views not yet disposed (they keep the cache's search index current at every commit).
    var openSearchViews = 0
    /// The metrics' figures of an in-memory cache (a file cache's are the reader's).
    var statistics = CacheStatisticsKeeper()
}

/// Sends in flight and what hangs off them.
struct OutboxState {
    /// req_ids of sends in flight, so that a resend or drain never sends one twice at once.
    var sendsInFlight: Set<String> = []
    /// req_ids in flight whose server copy the stream's echo brought before the answer: the
    /// send was completed then (`applyStreamEvent`), the answer only ends the request.
    var confirmedByEcho: Set<String> = []
    /// req_ids whose first attempt was counted when they were stored and has not gone out.
    var attemptCounted: Set<String> = []
    /// req_ids this client delivered lately, newest last (bounded): the server's
    /// `message_received` echo of one of them is not reported, `message_sent` was.
    var recentlySent = RecentKeys(capacity: 1024)
    /// Messages this client is editing (`update_message` in flight, by id: how many), and the
    /// edits it made lately ("id:updated_at", bounded): their `message_updated` events are
    /// this device's own edits (`RealtimeEvent.isOwnEdit`).
    var editsInFlight: [Int64: Int] = [:]
    var recentEdits = RecentKeys(capacity: 256)
    /// Uploads in flight by req_id, to cancel them.
    var uploadTasks: [String: HTTPTask] = [:]
    /// Completions of sends the app started (by req_id); auto-resends after a restart have none.
    var finishers: [String: @Sendable (Result<JSONValue, ParleyError>) -> Void] = [:]
    /// Upload progress handlers of file sends (by req_id).
    var uploadProgress: [String: HTTPUploadProgress] = [:]
    /// Uploads the app canceled while in flight.
    var canceledUploads: Set<String> = []
    /// The outbox is being drained; `drainRequestedAgain` asks for another pass after it.
    var draining = false
    var drainRequestedAgain = false
    /// A drain is scheduled after the server's `Retry-After` (`scheduleResend`).
    var resendScheduled = false
}

/// The changelog catch-up.
struct CatchUpState {
    var inProgress = false
    /// `catchUpStarted` was published and `catchUpFinished` is owed (a second pass folded
    /// into the first announces nothing new).
    var announced = false
    /// Callers waiting for the running catch-up, and whether another was asked for meanwhile.
    var waiters: [@Sendable () -> Void] = []
    var requestedAgain = false
    /// The stream resumed past the server's retention and the `resync` report is owed.
    var resync: PendingResync?
    /// The running pass: the channels its channel changelogs listed, whether they failed,
    /// and `SessionState.streamBreaks` when it started (a pass started after the last break
    /// finds everything missed in it).
    var passChannelURLs: Set<String> = []
    var passFailed = false
    /// A changelog of the running pass failed in a way that may pass later (the network, a
    /// timeout, the server's 5xx or 429): another pass follows (`scheduleCatchUpRetry`).
    var passIncomplete = false
    /// Passes in a row that were incomplete, for the wait before the next; and whether that
    /// next pass is scheduled.
    var incompletePasses = 0
    var retryScheduled = false
    var passBreaks: UInt64 = 0
    /// When the running pass started (`monotonicNanoseconds`), for the metrics' catch-up time.
    var passStartedNs: Int64 = 0
    /// The channels the channel changelogs of the last pass that read them to the end listed,
    /// with that pass's `passBreaks`: a `resync` that arrives after such a pass (the stream
    /// can open after the pass is done) counts them too.
    var lastPassChannelURLs: Set<String> = []
    var lastPassBreaks: UInt64?
    /// The session (`SessionState.epoch`) of that pass.
    var lastPassEpoch: UInt64?
}

/// Answers about channels (changelogs, operation results, a channel refresh) read while
/// events arrive. An answer shows each channel as of some moment while it was in flight; a
/// live event applied meanwhile may show an earlier or a later one, and nothing tells which.
/// So a channel that events touched after the request went out is not simply stored from the
/// answer (Engine+Events.swift, `storeAnswerChannel`): after an event that carried the whole
/// render, or removed the channel, the answer's copy is set aside and the channel is read
/// again (a read sent after the event was applied is at least as new as the event); events
/// without `members` (PROTOCOL.md §9.1) leave the cache newer in everything but the member
/// list, which the answer may know better (a member changed before the stream opened), so the
/// answer gives its members and the events' `changed_members` stay. The catch-up does not
/// set a changelog page aside: it asks for the same page again (Engine+Catchup.swift), so
/// that its token never passes a change it did not apply.
enum ChannelTouch {
    /// An event carried the channel's whole render, or removed the channel.
    case whole
    /// Only events without `members`: the members they changed, by user id, the last one kept.
    case partial(changedMembers: [String: JSONValue])
}

/// Channels to read again whole from the server (Engine+Events.swift, `fetchWantedChannels`).
struct ChannelRereads {
    var wanted: Set<String> = []
    var inFlight: Set<String> = []
    /// Channels this session stored from channel changelogs read without member lists: a
    /// `resync` (events lost) reads them again whole.
    var storedWithoutMembers: Set<String> = []
}

struct ChannelReadGuard {
    private var nextRequest: UInt64 = 0
    /// For each request in flight, the channels events touched since it went out.
    private var inFlight: [UInt64: [String: ChannelTouch]] = [:]

    /// A request goes out; hand the result to `end` (success or not).
    mutating func begin() -> UInt64 {
        nextRequest += 1
        inFlight[nextRequest] = [:]
        return nextRequest
    }

    /// An event touched `url`: `whole` when it carried the whole render or removed the
    /// channel, else the members it changed.
    mutating func noteEvent(_ url: String, whole: Bool, changedMembers: [JSONValue]) {
        for request in inFlight.keys {
            if whole {
                inFlight[request]?[url] = .whole
                continue
            }
            guard case .partial(var changed) = inFlight[request]?[url] ?? .partial(changedMembers: [:]) else { continue }
            for member in changedMembers {
                if let id = WireMember(member).userID { changed[id] = member }
            }
            inFlight[request]?[url] = .partial(changedMembers: changed)
        }
    }

    /// The request is answered (or failed): what events did to channels since it went out.
    mutating func end(_ request: UInt64) -> [String: ChannelTouch] {
        inFlight.removeValue(forKey: request) ?? [:]
    }
}

/// A `resync` to report: the channel changelogs of the next pass find which channels
/// changed while events were lost; the report follows once a pass read them to the end.
struct PendingResync {
    var reason: String
    /// A channel changelog pass that started after the events were lost is running.
    var collecting = false
    /// Channels found by a pass that ran since the break, before the `resync` arrived.
    var alreadyFound: Set<String> = []
}

/// How the engine reaches the server, the application's log and its connection handler.
struct EngineServices: Sendable {
    let http: HTTPClient
    let endpoint: APIEndpoint
    let log: @Sendable (LogLevel, String) -> Void
    let connectionEvent: @Sendable (ConnectionEvent, ParleyError?) -> Void
}

/// The mutable heart of a client. Everything in it is touched only on `queue`.
final class Engine: @unchecked Sendable {
    let queue: DispatchQueue
    let configuration: ClientConfiguration
    let services: EngineServices
    /// Every committed change of the cache, in order, with its cause.
    let feed = ChangeFeed()

    // Guarded by `queue`.
    var session = SessionState()
    var store = StoreState()
    /// The cache's secret: the configuration's, until `rekeyCache` changes it.
    lazy var cacheSecret: CacheSecret? = configuration.cacheSecret
    var outbox = OutboxState()
    var catchUp = CatchUpState()
    var channelReads = ChannelReadGuard()
    /// Loads of the views waiting for the server (Sync/Paging.swift).
    var paging = PagingState()
    /// Channels to read whole: cached without their member list, or whose copy in an
    /// answer was set aside because an event touched them meanwhile (Engine+Events.swift).
    var channelRereads = ChannelRereads()
    /// When the cache was last written, and whether a look for idleness is scheduled
    /// (`releaseMemoryWhenIdle`).
    var lastWriteAt = ContinuousClock.now
    var idleReleaseScheduled = false
    /// Channels with an open message collection, and how many: eviction spares them.
    var openMessageViews: [String: Int] = [:]
    /// Completions of hide / unhide waiting for the stream to show the change (Engine+HiddenState.swift).
    var hiddenStateWaits = HiddenStateWaits()
    /// What the event stream delivered and the engine queue has not taken yet (any thread).
    let streamInbox = StreamInbox()
    /// The application's cached reads, beside the engine queue (any thread).
    let cacheReader = CacheReader()
    /// What the engine did, counted for the client's metrics (read from any thread).
    let metrics = EngineMetrics()

    /// Marks this engine's queue. Per engine: with one key for all, another engine's queue
    /// would count as this one's and `runNow` would run inline beside this queue's work.
    private let queueKey = DispatchSpecificKey<UInt8>()

    init(configuration: ClientConfiguration, services: EngineServices) {
        self.configuration = configuration
        self.services = services
        // On the width-limited global pool, not an overcommitting queue of its own: a
        // message that reaches a thousand clients at once must not start a thread for each.
        queue = DispatchQueue(label: "parley.engine", target: .global())
        queue.setSpecific(key: queueKey, value: 1)
        // First of the feed's observers: a load's watch has noted a batch before any view
        // reacts to it (a view may start a load from its observer).
        let weakEngine = WeakReference(self)
        feed.subscribe { batch in weakEngine.object?.notePageLoads(batch) }
    }

    /// The open cache, for reads.
    var cache: ChatCache? { store.writer?.cache }

    /// The real-time stream is open: from now on every change reaches the cache (a drop is
    /// published as `newestEndUnknown` when the engine queue learns of it).
    var isStreamOpen: Bool { session.current != nil && session.stream?.state == .open }

    func log(_ level: LogLevel, _ message: String) { services.log(level, message) }

    /// True on the engine queue (where waiting for the queue would deadlock).
    var isOnQueue: Bool { DispatchQueue.getSpecific(key: queueKey) != nil }

    /// Runs `body` on the queue and waits, or inline when already there (a client released
    /// for the last time by engine work closes itself from the queue).
    func runNow<T>(_ body: () -> T) -> T {
        isOnQueue ? body() : queue.sync(execute: body)
    }

    func assertOnQueue() { dispatchPrecondition(condition: .onQueue(queue)) }

    /// Runs `body` on the engine queue and waits for it (never call from the queue itself).
    func sync<T>(_ body: () throws(ParleyError) -> T) throws(ParleyError) -> T {
        let result: Result<T, ParleyError> = queue.sync {
            do throws(ParleyError) {
                return .success(try body())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Writes to the cache through its writer; a failure is logged, never passed on (the
    /// cache is a copy of the server's state, and what fed it already succeeded). Real-time
    /// causes are published even without a cache.
    func write(_ cause: ChangeCause, _ what: String, _ body: (CacheTransaction) throws(ParleyError) -> Void) {
        assertOnQueue()
        guard let writer = store.writer else {
            if cause.publishesWhenEmpty { feed.publish(cause: cause, changes: []) }
            return
        }
        do {
            try writer.write(cause, body)
        } catch {
            log(.warning, "cache: \(what): \(error)")
        }
        lastWriteAt = .now
        if !idleReleaseScheduled {
            idleReleaseScheduled = true
            scheduleIdleRelease(after: Self.idleReleaseDelay)
        }
    }

    /// A cache not written for this long gives its page cache's memory back: a process
    /// holding thousands of mostly idle clients should not keep a page cache for each.
    static let idleReleaseDelay = Duration.seconds(10)

    private func scheduleIdleRelease(after delay: Duration) {
        let (seconds, attoseconds) = delay.components
        let deadline = DispatchTime.now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000) + 1)
        let weakEngine = WeakReference(self)
        queue.asyncAfter(deadline: deadline) { weakEngine.object?.releaseMemoryWhenIdle() }
    }

    private func releaseMemoryWhenIdle() {
        let idle = ContinuousClock.now - lastWriteAt
        guard idle >= Self.idleReleaseDelay else {
            scheduleIdleRelease(after: Self.idleReleaseDelay - idle)
            return
        }
        idleReleaseScheduled = false
        cache?.releaseMemory()
    }

    /// Reads the cache; a failure is logged and gives nil.
    func read<T>(_ what: String, _ body: (ChatCache) throws(ParleyError) -> T) -> T? {
        assertOnQueue()
        guard let cache else { return nil }
        do {
            return try body(cache)
        } catch {
            log(.warning, "cache: \(what): \(error)")
            return nil
        }
    }

    /// A REST call the engine makes on its own behalf with the session key; the outcome is
    /// handed to `done` on the engine queue.
    func call(
        _ method: String, _ pathAndQuery: String, body: JSONValue? = nil,
        _ done: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) {
        assertOnQueue()
        guard let current = session.current,
            let request = services.endpoint.request(method: method, pathAndQuery: pathAndQuery, body: body, credential: .session(current.token))
        else {
            done(.failure(.invalidState("not connected")))
            return
        }
        log(.debug, "sync: \(method) \(pathAndQuery)")
        _ = services.http.send(request) { result in
            let outcome = result.flatMap(APIEndpoint.decodeAnswer)
            self.queue.async { done(outcome) }
        }
    }
}

/// A bounded set that forgets its oldest keys first.
struct RecentKeys {
    private var order: [String] = []
    private var members: Set<String> = []
    private var head = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    func contains(_ key: String) -> Bool { members.contains(key) }

    mutating func insert(_ key: String) {
        guard members.insert(key).inserted else { return }
        if order.count < capacity {
            order.append(key)
        } else {
            members.remove(order[head])
            order[head] = key
            head = (head + 1) % capacity
        }
    }
}
