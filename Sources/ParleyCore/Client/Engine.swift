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
    /// The connected user's cache (kept open after disconnect so that cached reads work
    /// offline; replaced when another user connects).
    var cache: ChatCache?
    var cacheUserID: String?
    /// The real-time stream while connected.
    var stream: EventStreamConnection?
    /// Bumped by connect/disconnect so that late stream callbacks of an old session are ignored.
    var sessionEpoch: UInt64 = 0
    /// The stream was open at least once in this session (tells "connected" from "reconnected").
    var streamWasOpen = false
    /// Failed reconnection attempts since the stream was last open.
    var reconnectFailures = 0
    /// The current session's stream is being caught up by changelogs.
    var syncInProgress = false
    /// req_ids of sends in flight, so that a resend or drain never sends one twice at once.
    var sendsInFlight: Set<String> = []
    /// req_ids this client delivered lately, newest last (bounded): the server's
    /// `message_received` echo of one of them is not reported, `message_sent` was.
    var recentlySent = RecentKeys(capacity: 1024)
    /// Uploads in flight by req_id, to cancel them.
    var uploadTasks: [String: HTTPTask] = [:]
    /// Completions of sends the app started (by req_id); auto-resends after a restart have none.
    var sendFinishers: [String: @Sendable (Result<JSONValue, ParleyError>) -> Void] = [:]
    /// Upload progress handlers of file sends (by req_id).
    var uploadProgress: [String: HTTPUploadProgress] = [:]
    /// Uploads the app canceled while in flight.
    var canceledUploads: Set<String> = []
    /// The outbox is being drained; `drainRequestedAgain` asks for another pass after it.
    var draining = false
    var drainRequestedAgain = false
    /// When each channel's access time was last written (to write it at most once a minute).
    var lastTouched: [String: Int64] = [:]
    /// Callers waiting for the running catch-up, and whether another was asked for meanwhile.
    var syncWaiters: [@Sendable () -> Void] = []
    var syncRequestedAgain = false

    private static let queueKey = DispatchSpecificKey<UInt8>()

    init(configuration: ClientConfiguration) {
        self.configuration = configuration
        queue = DispatchQueue(label: "parley.engine")
        queue.setSpecific(key: Self.queueKey, value: 1)
    }

    /// True on the engine queue (where waiting for the queue would deadlock).
    var isOnQueue: Bool { DispatchQueue.getSpecific(key: Self.queueKey) != nil }

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
}


/// A reference that does not keep the client alive (the stream's callbacks hold it).
final class WeakClient: Sendable {
    weak let client: ParleyClient?

    init(_ client: ParleyClient) { self.client = client }
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
