/// The state of the real-time event stream (`EventStreamConnection`).
public enum ConnectionState: String, Sendable {
    /// Not started, stopped by `stop()`, or given up after an error that retrying cannot fix.
    case closed
    /// A request for the stream is in flight; the server's `connected` event has not arrived yet.
    case connecting
    /// The server's `connected` event arrived; events flow.
    case open
    /// Waiting before the next attempt (backoff), or waiting for a new session token after
    /// `tokenExpired` (then no attempt is scheduled until `updateSessionToken`).
    case reconnecting
}

/// One event of the user's stream (docs/PROTOCOL.md §9) as the connection frames it: its id,
/// its SSE type and its data as the server wrote it. The data is parsed by the engine
/// (`StreamEvent(frame:)`), on the thread that then applies and frees it: the network
/// threads of all clients only read and frame.
public struct StreamFrame: Sendable, Equatable {
    /// The server's event id: strictly increasing, global (not contiguous for one user).
    public let id: Int64
    /// The SSE `event:` name ("message" when the line is missing).
    public let type: String
    public let dataText: String

    public init(id: Int64, type: String, dataText: String) {
        self.id = id
        self.type = type
        self.dataText = dataText
    }
}

/// One event of the user's stream (docs/PROTOCOL.md §9), parsed.
public struct StreamEvent: Sendable, Equatable {
    /// The server's event id: strictly increasing, global (not contiguous for one user).
    public let id: Int64
    /// The SSE `event:` name, or the data's `category` when the `event:` line is missing.
    public let category: String
    /// The parsed `data` object.
    public let data: JSONValue
    /// `data` as the server wrote it: what the app is handed, so that a received event is
    /// not written out again for each client (nil: `data`'s canonical text).
    public let dataText: String?

    public init(id: Int64, category: String, data: JSONValue, dataText: String? = nil) {
        self.id = id
        self.category = category
        self.data = data
        self.dataText = dataText
    }

    /// Parses a frame's data, which must be a JSON object; an event sent without an `event:`
    /// line is named by the data's `category`. Throws with the reason ("event 12: data is not
    /// JSON (...)") otherwise.
    public init(frame: StreamFrame) throws(ParleyError) {
        let data: JSONValue
        do throws(ParleyError) {
            data = try JSONValue.parse(frame.dataText)
        } catch {
            throw ParleyError(error.code, "event \(frame.id): data is not JSON (\(error.message))")
        }
        guard case .object = data else {
            throw ParleyError(.protocolViolation, "event \(frame.id): data is a JSON \(data.typeName), not an object")
        }
        var category = frame.type
        if category == "message", let named = WireEventData(data).category, !named.isEmpty {
            category = named
        }
        self.init(id: frame.id, category: category, data: data, dataText: frame.dataText)
    }
}

/// When and how often the stream reconnects after a failure.
///
/// The delay before reconnection attempt `n` (1-based, counted since the stream was last
/// open) has the ceiling `min(maxDelayMs, initialDelayMs * multiplier^(n-1))`, then jitter:
/// - `.equal` (default): a uniformly random value in `ceiling/2 ... ceiling`, so delays still
///   grow visibly with `n` while clients that dropped together spread out;
/// - `.full`: uniformly random in `0 ... ceiling` (spreads best, may retry at once);
/// - `.none`: exactly the ceiling.
public struct ReconnectPolicy: Sendable, Equatable {
    public enum Jitter: String, Sendable {
        case none, equal, full
    }

    public var initialDelayMs: Int
    public var maxDelayMs: Int
    public var multiplier: Double
    public var jitter: Jitter
    /// Reconnection attempts after which the stream gives up and closes; 0 = never gives up.
    public var maxAttempts: Int
    /// The stream is considered dead, and reconnected, when no byte (not even a heartbeat
    /// comment) arrived for this many seconds; 0 = no idle watchdog. The default is three
    /// times the server's default heartbeat interval (15 s). It also bounds how long an
    /// attempt may wait for the response to start.
    public var idleTimeoutSec: Int
    /// Limit for establishing the TCP/TLS connection of one attempt.
    public var connectTimeoutMs: Int

    public init(
        initialDelayMs: Int = 500,
        maxDelayMs: Int = 30_000,
        multiplier: Double = 2,
        jitter: Jitter = .equal,
        maxAttempts: Int = 0,
        idleTimeoutSec: Int = 45,
        connectTimeoutMs: Int = 10_000
    ) {
        self.initialDelayMs = initialDelayMs
        self.maxDelayMs = maxDelayMs
        self.multiplier = multiplier
        self.jitter = jitter
        self.maxAttempts = maxAttempts
        self.idleTimeoutSec = idleTimeoutSec
        self.connectTimeoutMs = connectTimeoutMs
    }

    /// Throws `.invalidArgument` naming the first out-of-range field.
    public func validate() throws(ParleyError) {
        if initialDelayMs < 0 { throw .invalidArgument("initialDelayMs must not be negative (got \(initialDelayMs))") }
        if maxDelayMs < initialDelayMs {
            throw .invalidArgument("maxDelayMs (\(maxDelayMs)) must be at least initialDelayMs (\(initialDelayMs))")
        }
        if !multiplier.isFinite || multiplier < 1 {
            throw .invalidArgument("multiplier must be a finite number >= 1 (got \(multiplier))")
        }
        if maxAttempts < 0 { throw .invalidArgument("maxAttempts must not be negative (got \(maxAttempts))") }
        if idleTimeoutSec < 0 { throw .invalidArgument("idleTimeoutSec must not be negative (got \(idleTimeoutSec))") }
        if connectTimeoutMs < 0 { throw .invalidArgument("connectTimeoutMs must not be negative (got \(connectTimeoutMs))") }
    }

    /// The delay ceiling before reconnection attempt `attempt` (1-based), before jitter.
    public func ceilingMs(attempt: Int) -> Int {
        var delay = Double(initialDelayMs)
        var step = 1
        // Stop multiplying at the cap: large attempt numbers must not overflow.
        while step < attempt && delay < Double(maxDelayMs) {
            delay *= multiplier
            step += 1
        }
        return Int(min(delay, Double(maxDelayMs)))
    }

    /// The delay before reconnection attempt `attempt` (1-based), jitter applied.
    public func delayMs(attempt: Int) -> Int {
        var generator = SystemRandomNumberGenerator()
        return delayMs(attempt: attempt, using: &generator)
    }

    public func delayMs(attempt: Int, using generator: inout some RandomNumberGenerator) -> Int {
        let ceiling = ceilingMs(attempt: attempt)
        switch jitter {
        case .none: return ceiling
        case .full: return Int.random(in: 0...ceiling, using: &generator)
        case .equal: return ceiling - ceiling / 2 + Int.random(in: 0...(ceiling / 2), using: &generator)
        }
    }
}

/// What an `EventStreamConnection` tells its owner. The closures run on the connection's
/// own serial callback queue: in order, never concurrently, never while the connection
/// holds a lock (so they may call any method of the connection). They should return
/// quickly and must not block waiting for a thread that may be calling `stop()`; the
/// engine hops to its own executor from here.
public struct EventStreamHandler: Sendable {
    /// Every state change, with the error that caused it when there is one (a drop, a failed
    /// attempt, a refusal); nil for `start`, `stop`, and progress (connecting → open).
    public var stateChanged: @Sendable (_ old: ConnectionState, _ new: ConnectionState, _ error: ParleyError?) -> Void
    /// The server's `connected` event arrived (right after `stateChanged(_, .open, nil)`).
    /// `resumedFrom` is the `Last-Event-ID` the attempt sent, nil for a fresh connection.
    public var connected: @Sendable (_ resumedFrom: Int64?) -> Void
    /// A resumed stream's `connected` named the newest event id: the events up to
    /// `throughID` that follow are the server's replay of what was missed, not live ones.
    /// Called just before `connected`.
    public var replaying: @Sendable (_ throughID: Int64) -> Void
    /// An event, in id order, each id once across reconnects; its data is not parsed yet.
    public var event: @Sendable (StreamFrame) -> Void
    /// The server could not replay from our resume point (`reason` "retention" or
    /// "unknown_id"): the engine must run changelogs. The stream continues from `newestID`.
    public var resyncRequired: @Sendable (_ reason: String, _ newestID: Int64) -> Void
    /// The session token was refused as expired: no attempt is made until `updateSessionToken`.
    public var tokenExpired: @Sendable () -> Void
    /// A reconnection attempt is scheduled after `delayMs` (`attempt` is 1-based since the
    /// stream was last open).
    public var reconnectAttempt: @Sendable (_ attempt: Int, _ delayMs: Int) -> Void
    /// An event was dropped because its id is missing or not an integer. The connection stays
    /// up; `EventStreamConnection.skippedEventCount` counts them. (Data that is not a JSON
    /// object is found where it is parsed: `StreamEvent(frame:)`.)
    public var eventSkipped: @Sendable (_ reason: String) -> Void

    public init(
        stateChanged: @escaping @Sendable (_ old: ConnectionState, _ new: ConnectionState, _ error: ParleyError?) -> Void = { _, _, _ in },
        connected: @escaping @Sendable (_ resumedFrom: Int64?) -> Void = { _ in },
        replaying: @escaping @Sendable (_ throughID: Int64) -> Void = { _ in },
        event: @escaping @Sendable (StreamFrame) -> Void = { _ in },

        resyncRequired: @escaping @Sendable (_ reason: String, _ newestID: Int64) -> Void = { _, _ in },
        tokenExpired: @escaping @Sendable () -> Void = {},
        reconnectAttempt: @escaping @Sendable (_ attempt: Int, _ delayMs: Int) -> Void = { _, _ in },
        eventSkipped: @escaping @Sendable (_ reason: String) -> Void = { _ in }
    ) {
        self.stateChanged = stateChanged
        self.connected = connected
        self.replaying = replaying
        self.event = event
        self.resyncRequired = resyncRequired
        self.tokenExpired = tokenExpired
        self.reconnectAttempt = reconnectAttempt
        self.eventSkipped = eventSkipped
    }
}
