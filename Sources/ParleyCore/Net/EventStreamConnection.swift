import Dispatch
import Glibc

/// The client's real-time connection: `GET /v3/users/{user_id}/events` (Server-Sent
/// Events, docs/PROTOCOL.md §9) with a state machine, backoff and resume.
///
/// States: `start()` goes closed → connecting; the server's `connected` event makes it
/// open. A drop (network error, 5xx/408/429, idle timeout, the server ending the stream)
/// goes → reconnecting, waits the policy's delay, then → connecting again with
/// `Last-Event-ID` set to the last event id accepted, so the server replays what was missed.
/// Answers that retrying cannot fix go → closed with the error: 4xx other than
/// 401/408/429, and 401 when the session key was never accepted.
///
/// Session tokens: 401 with code 400302 (expired) — or 400301 (unknown key) once this
/// token had been accepted, which is how a revoked or lost session shows — calls
/// `tokenExpired` and waits in `.reconnecting` without retrying until `updateSessionToken`.
/// 400301 for a token that never worked is a configuration error: → closed, `.unauthorized`.
///
/// Events reach the handler in id order, each id at most once: ids not above the last
/// one accepted are dropped as duplicates (the server's replay makes them impossible, this
/// is a defence). An event whose id is missing or not an integer is skipped, counted and
/// reported through `eventSkipped`; the connection stays up. Event data is handed on as the
/// server wrote it, not parsed (`StreamFrame`).
///
/// The resume point: `lastEventID` is the id of the last event handed to the handler (or
/// of the last `resync`). A fresh connection (no id yet) adopts the server's newest id from
/// its `connected` event, so a later reconnect misses nothing even when no event arrived in
/// between. The server's `retry:` advice is ignored: the policy decides, with a refusal's
/// `Retry-After` (503 or 429) as the least delay.
public final class EventStreamConnection: Sendable {
    private let http: HTTPClient
    private let streamURL: String
    private let policy: ReconnectPolicy
    private let handler: EventStreamHandler
    private let core: Locked<Core>
    /// Signalled when a delivery run ends, for `stop` waiting on another thread's.
    private let deliveryEnded = ConditionLock()

    /// Bodies of error answers are kept up to this size for their error code.
    private static let maxErrorBodyBytes = 64 * 1024
    private static let maxEventBytes = 4 << 20

    /// Throws `.invalidArgument` for an empty or non-HTTP server URL, an empty user id, an
    /// invalid session token, a negative `lastEventID` or an invalid policy.
    public init(
        http: HTTPClient,
        serverURL: String,
        userID: String,
        sessionToken: String,
        lastEventID: Int64?,
        policy: ReconnectPolicy = ReconnectPolicy(),
        handler: EventStreamHandler
    ) throws(ParleyError) {
        var base = serverURL
        while base.hasSuffix("/") { base.removeLast() }
        guard base.hasPrefix("http://") || base.hasPrefix("https://"), base.utf8.count > "https://".utf8.count - 1 else {
            throw .invalidArgument("serverURL must be an http:// or https:// URL (got '\(serverURL)')")
        }
        guard !userID.isEmpty else { throw .invalidArgument("userID must not be empty") }
        try Self.validateToken(sessionToken)
        if let lastEventID, lastEventID < 0 {
            throw .invalidArgument("lastEventID must not be negative (got \(lastEventID))")
        }
        try policy.validate()
        self.http = http
        self.streamURL = base + Endpoints.eventStream(userID: userID)
        self.policy = policy
        self.handler = handler
        self.core = Locked(Core(token: sessionToken, resumeID: lastEventID))
    }

    deinit {
        let task = core.withLock { core -> HTTPTask? in
            defer { core.task = nil }
            return core.task
        }
        task?.cancel()
    }

    // MARK: Public API

    public var state: ConnectionState { core.withLock { $0.state } }

    /// The id of the last event handed to the handler (or of the last `resync`, or the
    /// server's position adopted at a fresh connect); what the next connection resumes from.
    public var lastEventID: Int64? { core.withLock { $0.deliveredID } }

    /// Events dropped as malformed since creation.
    public var skippedEventCount: Int { core.withLock { $0.skippedEvents } }

    /// Events dropped because their id was not above the last accepted one.
    public var duplicateEventCount: Int { core.withLock { $0.duplicateEvents } }

    /// closed → connecting. Does nothing in any other state.
    public func start() {
        perform { core in
            guard core.state == .closed else { return }
            core.reconnectCount = 0
            core.awaitingToken = false
            self.move(to: .connecting, error: nil, &core)
            self.beginAttempt(&core)
        }
    }

    /// → closed, from any state; idempotent. Cancels the request in flight and any
    /// scheduled attempt. Events accepted from the wire but not yet handed to the handler
    /// are dropped and the resume point falls back to the last one handed over, so a later
    /// `start()` replays them.
    ///
    /// When `stop` returns, no handler closure runs any more, except this one call:
    /// `stateChanged(old, .closed, nil)`, which runs before `stop` returns when called from
    /// another thread (it waits for a handler call in progress to finish), and right after
    /// the current handler returns when `stop` is called from inside a handler.
    public func stop() {
        let fromHandler = perform { core -> Bool in
            let fromHandler = core.deliveringThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            guard core.state != .closed else { return fromHandler }
            core.epoch &+= 1
            core.resumeID = core.deliveredID
            core.awaitingToken = false
            self.abandonAttempt(&core)
            self.move(to: .closed, error: nil, &core)
            return fromHandler
        }
        if !fromHandler {
            waitForDeliveries()
        }
    }

    /// Reconnects at once. Waiting to reconnect: skips the backoff wait. Open: drops the
    /// connection (it may be silently dead, e.g. after a network change) and opens a new
    /// one resuming from the last accepted event, passing through `.reconnecting` so the
    /// handler sees a regular drop and recovery. Connecting: restarts the attempt. Does
    /// nothing when closed or waiting for a new token after `tokenExpired`.
    public func reconnectNow() {
        perform { core in
            switch core.state {
            case .closed:
                return
            case .connecting:
                self.abandonAttempt(&core)
            case .reconnecting:
                guard !core.awaitingToken else { return }
                core.timerID &+= 1
                self.move(to: .connecting, error: nil, &core)
            case .open:
                self.abandonAttempt(&core)
                core.reconnectCount = 0
                self.move(to: .reconnecting, error: nil, &core)
                self.move(to: .connecting, error: nil, &core)
            }
            self.beginAttempt(&core)
        }
    }

    /// Replaces the session token used by the following attempts. After `tokenExpired`, it
    /// starts connecting at once. Throws `.invalidArgument` for an empty token or one with
    /// control characters (it goes into a header).
    public func updateSessionToken(_ token: String) throws(ParleyError) {
        try Self.validateToken(token)
        perform { core in
            core.token = token
            core.tokenAccepted = false
            guard core.state == .reconnecting, core.awaitingToken else { return }
            core.awaitingToken = false
            self.move(to: .connecting, error: nil, &core)
            self.beginAttempt(&core)
        }
    }

    // MARK: State

    private struct Core {
        var state = ConnectionState.closed
        var token: String
        /// The id of the last event accepted from the wire; the next attempt's `Last-Event-ID`.
        var resumeID: Int64?
        /// The id of the last event handed to the handler.
        var deliveredID: Int64?
        /// Bumped by `stop`: callbacks queued before it are dropped.
        var epoch: UInt64 = 0
        /// Identifies the current attempt; network callbacks of any other are ignored.
        var attemptID: UInt64 = 0
        /// Identifies the scheduled backoff timer; other timers are ignored when they fire.
        var timerID: UInt64 = 0
        var task: HTTPTask?
        var parser = SSEParser()
        /// Events parsed from the chunk being read, handed over together (one hop per chunk).
        var eventBatch: [StreamFrame] = []
        var responseStatus = 0
        var errorBody: [UInt8] = []
        /// The refused attempt's `Retry-After`, in ms (0: none).
        var retryAfterMs = 0
        /// The `Last-Event-ID` the current attempt sent.
        var sentResumeID: Int64?
        /// Reconnection attempts since the stream was last open (or started).
        var reconnectCount = 0
        var awaitingToken = false
        /// The current token has opened the stream at least once.
        var tokenAccepted = false
        var skippedEvents = 0
        var duplicateEvents = 0
        /// The thread running a handler closure right now, if any.
        var deliveringThread: pthread_t?
        /// Handler calls not yet made, in order, each with the epoch it was queued in.
        var pending: [(Notification, UInt64)] = []
        /// Work to run once the lock is released (starting requests, cancelling, timers).
        var effects: [Effect] = []

        init(token: String, resumeID: Int64?) {
            self.token = token
            self.resumeID = resumeID
            self.deliveredID = resumeID
        }
    }

    private enum Effect: Sendable {
        case startRequest(attemptID: UInt64, request: HTTPRequest)
        case cancel(HTTPTask)
        case timer(timerID: UInt64, delayMs: Int)
    }

    private enum Notification: Sendable {
        case stateChanged(ConnectionState, ConnectionState, ParleyError?)
        case connected(resumedFrom: Int64?, adoptedPosition: Int64?, replayThrough: Int64?)
        /// Consecutive events, in order.
        case events([StreamFrame])
        case resync(reason: String, newestID: Int64)
        case tokenExpired
        case reconnectAttempt(attempt: Int, delayMs: Int)
        case eventSkipped(String)
    }

    /// Runs `body` under the lock, then the effects it queued, outside the lock (starting a
    /// request may complete it synchronously, which takes the lock again), then the handler
    /// calls it queued.
    @discardableResult
    private func perform<T>(_ body: (inout Core) -> T) -> T {
        let (result, effects) = core.withLock { core in
            let result = body(&core)
            defer { core.effects = [] }
            return (result, core.effects)
        }
        for effect in effects {
            run(effect)
        }
        deliverPending()
        return result
    }

    private func run(_ effect: Effect) {
        switch effect {
        case .cancel(let task):
            task.cancel()
        case .timer(let timerID, let delayMs):
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(delayMs)) { [weak self] in
                self?.timerFired(timerID)
            }
        case .startRequest(let attemptID, let request):
            let task = http.stream(
                request,
                onResponseStart: { [weak self] status, headers in
                    self?.responseStarted(attemptID, status: status, headers: headers)
                },
                onBytes: { [weak self] chunk in
                    self?.received(attemptID, chunk) ?? false
                },
                completion: { [weak self] result in
                    self?.finished(attemptID, result)
                })
            let isStale = core.withLock { core -> Bool in
                guard core.attemptID == attemptID else { return true }
                core.task = task
                return false
            }
            // The attempt was abandoned while the request was being submitted.
            if isStale { task.cancel() }
        }
    }

    /// Queues a handler call. Called under the lock, so queue order is state order (events
    /// parsed before it go first).
    private func post(_ notification: Notification, _ core: inout Core) {
        flushEvents(&core)
        enqueue(notification, &core)
    }

    private func enqueue(_ notification: Notification, _ core: inout Core) {
        core.pending.append((notification, core.epoch))
    }

    /// Hands over the events parsed so far, as one notification.
    private func flushEvents(_ core: inout Core) {
        guard !core.eventBatch.isEmpty else { return }
        let events = core.eventBatch
        core.eventBatch = []
        enqueue(.events(events), &core)
    }

    /// Makes the queued handler calls, one at a time and in order, on the calling thread
    /// (the network thread for what the wire brought: no hop before the handler, whose calls
    /// only hand work on). When another thread is making them already, it makes these too;
    /// a call queued from inside a handler runs right after that handler returns.
    private func deliverPending() {
        while true {
            let next = core.withLock { core -> Notification? in
                // Another thread's run picks this up when its handler returns (it looks again
                // under the lock); so does this thread's, when called from inside a handler.
                if core.deliveringThread != nil { return nil }
                while !core.pending.isEmpty {
                    let (notification, epoch) = core.pending.removeFirst()
                    guard core.epoch == epoch else { continue }
                    switch notification {
                    case .events(let events): core.deliveredID = events.last?.id ?? core.deliveredID
                    case .resync(_, let newestID): core.deliveredID = newestID
                    case .connected(_, let adopted?, _): if core.deliveredID == nil { core.deliveredID = adopted }
                    default: break
                    }
                    core.deliveringThread = pthread_self()
                    return notification
                }
                return nil
            }
            guard let next else { break }
            call(next)
            let more = core.withLock { core -> Bool in
                core.deliveringThread = nil
                return !core.pending.isEmpty
            }
            deliveryEnded.withLock { deliveryEnded.broadcast() }
            if !more { break }
        }
    }

    /// Waits until no handler call is running or queued (another thread's run included).
    private func waitForDeliveries() {
        deliverPending()
        deliveryEnded.lock()
        while core.withLock({ $0.deliveringThread != nil || !$0.pending.isEmpty }) {
            deliveryEnded.wait(timeoutMs: 100)
        }
        deliveryEnded.unlock()
    }

    private func call(_ notification: Notification) {
        switch notification {
        case .stateChanged(let old, let new, let error): handler.stateChanged(old, new, error)
        case .connected(let resumedFrom, _, let replayThrough):
            if let replayThrough { handler.replaying(replayThrough) }
            handler.connected(resumedFrom)
        case .events(let events): for event in events { handler.event(event) }
        case .resync(let reason, let newestID): handler.resyncRequired(reason, newestID)
        case .tokenExpired: handler.tokenExpired()
        case .reconnectAttempt(let attempt, let delayMs): handler.reconnectAttempt(attempt, delayMs)
        case .eventSkipped(let reason): handler.eventSkipped(reason)
        }
    }

    private func move(to new: ConnectionState, error: ParleyError?, _ core: inout Core) {
        let old = core.state
        guard old != new else { return }
        core.state = new
        post(.stateChanged(old, new, error), &core)
    }

    private func beginAttempt(_ core: inout Core) {
        core.attemptID &+= 1
        core.parser = SSEParser(maxEventBytes: Self.maxEventBytes)
        core.responseStatus = 0
        core.errorBody = []
        core.retryAfterMs = 0
        core.sentResumeID = core.resumeID
        var headers = [
            HTTPHeader("Session-Key", core.token),
            HTTPHeader("Accept", "text/event-stream"),
            HTTPHeader("Cache-Control", "no-cache"),
        ]
        if let resumeID = core.resumeID {
            headers.append(HTTPHeader("Last-Event-ID", String(resumeID)))
        }
        let request = HTTPRequest(
            method: "GET", url: streamURL, headers: headers,
            timeoutMs: 0,  // a stream has no end; the idle watchdog notices a dead one
            connectTimeoutMs: policy.connectTimeoutMs,
            lowSpeedTimeoutSec: policy.idleTimeoutSec)
        core.effects.append(.startRequest(attemptID: core.attemptID, request: request))
    }

    /// Makes the current attempt stale and cancels its request.
    private func abandonAttempt(_ core: inout Core) {
        core.attemptID &+= 1
        core.timerID &+= 1
        if let task = core.task {
            core.effects.append(.cancel(task))
            core.task = nil
        }
    }

    private func scheduleReconnect(after error: ParleyError, _ core: inout Core) {
        abandonAttempt(&core)
        let attempt = core.reconnectCount + 1
        if policy.maxAttempts > 0 && attempt > policy.maxAttempts {
            var final = error
            final.message += " (gave up after \(policy.maxAttempts) reconnection attempts)"
            move(to: .closed, error: final, &core)
            return
        }
        core.reconnectCount = attempt
        // The server's `Retry-After` (with a 503 or 429) is a floor under the policy's delay.
        let delayMs = max(policy.delayMs(attempt: attempt), error.retryAfterMs)
        move(to: .reconnecting, error: error, &core)
        post(.reconnectAttempt(attempt: attempt, delayMs: delayMs), &core)
        core.effects.append(.timer(timerID: core.timerID, delayMs: delayMs))
    }

    private func close(with error: ParleyError, _ core: inout Core) {
        abandonAttempt(&core)
        core.awaitingToken = false
        move(to: .closed, error: error, &core)
    }

    private func waitForToken(_ error: ParleyError, _ core: inout Core) {
        abandonAttempt(&core)
        core.awaitingToken = true
        move(to: .reconnecting, error: error, &core)
        post(.tokenExpired, &core)
    }

    private func timerFired(_ timerID: UInt64) {
        perform { core in
            guard core.timerID == timerID, core.state == .reconnecting, !core.awaitingToken else { return }
            move(to: .connecting, error: nil, &core)
            beginAttempt(&core)
        }
    }

    // MARK: Network callbacks (network thread)

    private func responseStarted(_ attemptID: UInt64, status: Int, headers: [HTTPHeader]) {
        perform { core in
            guard core.attemptID == attemptID else { return }
            core.responseStatus = status
            guard status == 200 else {
                // The error body follows; judged at the end.
                core.retryAfterMs = APIEndpoint.retryAfterMs(headers.first { $0.name == "retry-after" }?.value)
                return
            }
            let contentType = headers.first { $0.name == "content-type" }?.value ?? ""
            if !asciiLowercased(contentType).hasPrefix("text/event-stream") {
                scheduleReconnect(
                    after: ParleyError(
                        .protocolViolation, "the event stream answered with content type '\(contentType)'",
                        httpStatus: status),
                    &core)
            }
        }
    }

    private func received(_ attemptID: UInt64, _ chunk: UnsafeRawBufferPointer) -> Bool {
        perform { core -> Bool in
            guard core.attemptID == attemptID else { return false }
            guard core.responseStatus == 200 else {
                let room = Self.maxErrorBodyBytes - core.errorBody.count
                if room > 0 { core.errorBody.append(contentsOf: chunk.prefix(room)) }
                return true
            }
            // Swapped out so that event handling may mutate `core` while the parser runs.
            var parser = SSEParser()
            swap(&parser, &core.parser)
            defer { swap(&parser, &core.parser) }
            do throws(ParleyError) {
                try parser.feed(chunk) { event in handle(event, &core) }
                flushEvents(&core)
            } catch {
                flushEvents(&core)
                scheduleReconnect(after: error, &core)
                return false
            }
            // Handling an event never abandons the attempt, but stay safe if it ever does.
            return core.attemptID == attemptID
        }
    }

    private func finished(_ attemptID: UInt64, _ result: Result<HTTPResponse, ParleyError>) {
        perform { core in
            guard core.attemptID == attemptID else { return }
            core.task = nil
            switch result {
            case .success(let response) where response.status == 200:
                scheduleReconnect(after: ParleyError(.network, "the server ended the event stream", httpStatus: 200), &core)
            case .success(let response):
                handleRefusal(status: response.status, &core)
            case .failure(let error):
                switch error.code {
                case .invalidArgument, .invalidState, .cancelled, .noMemory, .internalError:
                    // A bad request or a shut-down HTTP client: retrying cannot help.
                    close(with: error, &core)
                default:
                    scheduleReconnect(after: error, &core)
                }
            }
        }
    }

    private func handleRefusal(status: Int, _ core: inout Core) {
        var serverCode = 0
        var message = "the event stream was refused with HTTP \(status)"
        if let body = (try? JSONValue.parse(core.errorBody)).map(WireError.init) {
            if let code = body.code { serverCode = Int(code) }
            if let text = body.message { message = "event stream: \(text)" }
        }
        switch status {
        case 401:
            let error = ParleyError(.unauthorized, message, httpStatus: status, serverCode: serverCode)
            if serverCode == 400302 || (serverCode == 400301 && core.tokenAccepted) {
                waitForToken(error, &core)
            } else {
                close(with: error, &core)
            }
        default:
            let code: ParleyErrorCode =
                switch status {
                case 403: .forbidden
                case 404: .notFound
                default: .server
                }
            var error = ParleyError(code, message, httpStatus: status, serverCode: serverCode)
            // The server's own trouble (5xx, 408, 429): try again, after its Retry-After if it gave one.
            guard error.isRetryable else { return close(with: error, &core) }
            error.retryAfterMs = core.retryAfterMs
            scheduleReconnect(after: error, &core)
        }
    }

    // MARK: Events

    private func handle(_ event: SSEEvent, _ core: inout Core) {
        switch event.type {
        case "connected":
            let data = (try? JSONValue.parse(event.data)).map(WireStreamNotice.init)
            let newest = data?.lastEventID
            var adopted: Int64?
            if core.resumeID == nil, let newest, newest >= 0 {
                core.resumeID = newest
                adopted = newest
            }
            core.reconnectCount = 0
            core.tokenAccepted = true
            move(to: .open, error: nil, &core)
            // A resumed stream: what follows up to the server's newest id is its replay.
            let replayThrough = core.sentResumeID != nil ? newest : nil
            post(.connected(resumedFrom: core.sentResumeID, adoptedPosition: adopted, replayThrough: replayThrough), &core)
        case "resync":
            let data = (try? JSONValue.parse(event.data)).map(WireStreamNotice.init)
            guard let newest = event.id.flatMap({ Int64($0) }) ?? data?.lastEventID else {
                skip("a resync event without an integer id", &core)
                return
            }
            // Even when lower (the server lost its log): the server's newest id is the new baseline.
            core.resumeID = newest
            post(.resync(reason: data?.reason ?? "unknown", newestID: newest), &core)
        case "error":
            // The server ends the stream: its credential no longer holds (the session key
            // expired, the user was deactivated or deleted). A new token is needed; retrying
            // with the old one would only be refused.
            let data = (try? JSONValue.parse(event.data)).map(WireError.init)
            let serverCode = Int(data?.code ?? 0)
            let text = data?.message ?? "the server ended the event stream"
            let error = ParleyError(.unauthorized, "event stream: \(text)", httpStatus: 401, serverCode: serverCode)
            if serverCode == 400302 || serverCode == 400301 {
                waitForToken(error, &core)
            } else {
                scheduleReconnect(after: ParleyError(.server, "event stream: \(text)", serverCode: serverCode), &core)
            }
        default:
            guard let idText = event.id, let id = Int64(idText) else {
                skip("an event of type '\(event.type)' without an integer id (id: \(event.id ?? "none"))", &core)
                return
            }
            if let resumeID = core.resumeID, id <= resumeID {
                core.duplicateEvents += 1
                return
            }
            core.resumeID = id
            core.eventBatch.append(StreamFrame(id: id, type: event.type, dataText: event.data))

        }
    }

    private func skip(_ reason: String, _ core: inout Core) {
        core.skippedEvents += 1
        post(.eventSkipped(reason), &core)
    }

    // MARK: Helpers

    private static func validateToken(_ token: String) throws(ParleyError) {
        guard !token.isEmpty else { throw .invalidArgument("the session token must not be empty") }
        guard !token.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw .invalidArgument("the session token must not contain control characters")
        }
    }
}
