import Dispatch
import Synchronization

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
}

/// The user a client acts for, and the credential it acts with.
struct Session: Sendable {
    var userID: String
    var token: String
}

/// The mutable heart of a client. Everything in it is touched only on `queue`, the
/// client's serial engine executor (shared/DESIGN.md §3): cache writes, sync decisions
/// and session state happen there, in order, without locks.
final class Engine: @unchecked Sendable {
    let queue: DispatchQueue
    let configuration: ClientConfiguration

    // Guarded by `queue`.
    var session: Session?
    var user: JSONValue?

    init(configuration: ClientConfiguration) {
        self.configuration = configuration
        queue = DispatchQueue(label: "parley.engine")
    }

    func assertOnQueue() { dispatchPrecondition(condition: .onQueue(queue)) }
}

extension Engine {
    /// Applies an operation's effect to the cache. A cache failure never fails the
    /// operation (the server accepted it); it is logged through `warn`.
    func applyToCache(_ effect: CacheEffect, params: JSONValue, answer: JSONValue, warn: (String) -> Void) {
        assertOnQueue()
        _ = (effect, params, answer, warn)  // the cache arrives with the Store layer
    }
}
