// A pool of libpq connections (PQConnection.swift), each with its thread. Connections are
// made when a lease finds none idle and fewer than `maximum` open; a lease beyond that waits
// for one to come back, first come first served. A connection that failed, or comes back
// inside a transaction, is closed and its thread kept for the next one made.
import Logging
import Synchronization

final class PQPool: Sendable {
    /// libpq's connection keywords.
    private let settings: [(String, String)]
    private let maximum: Int
    private let threadName: String
    private let logger: Logger

    private enum Grant: Sendable {
        case connection(PQConnection)
        /// A place in the pool: make a connection on this thread.
        case slot(ThreadExecutor)
    }

    private struct State {
        var idle: [(connection: PQConnection, since: ContinuousClock.Instant)] = []
        var leased: [ObjectIdentifier: PQConnection] = [:]
        var open = 0
        var waiters: [CheckedContinuation<Grant, Never>] = []
        var spareThreads: [ThreadExecutor] = []
        var threadsMade = 0
        var closed = false
    }

    private let state = Mutex(State())

    init(settings: [(String, String)], maximum: Int, threadName: String, logger: Logger) {
        self.settings = settings
        self.maximum = maximum
        self.threadName = threadName
        self.logger = logger
    }

    /// A connection for the caller alone until it is handed back with `release`.
    func lease() async throws -> PQConnection {
        while true {
            let grant: Grant
            if let now = state.withLock({ grantNow(&$0) }) {
                grant = now
            } else {
                grant = await withCheckedContinuation { (waiter: CheckedContinuation<Grant, Never>) in
                    let now = state.withLock { state -> Grant? in
                        if let now = grantNow(&state) { return now }
                        state.waiters.append(waiter)
                        return nil
                    }
                    if let now { waiter.resume(returning: now) }
                }
            }
            switch grant {
            case .connection(let connection):
                // PostgreSQL ends a session idle too long, or all of them as it shuts down.
                if connection.endedWhileIdle() {
                    discard(connection)
                    continue
                }
                return connection
            case .slot(let thread):
                do {
                    let connection = try await PQConnection.connect(settings, on: thread)
                    state.withLock { $0.leased[ObjectIdentifier(connection)] = connection }
                    return connection
                } catch {
                    freeSlot(thread)
                    throw error
                }
            }
        }
    }

    /// Gives back a leased connection: lent again if it is whole and outside any transaction,
    /// closed otherwise.
    func release(_ connection: PQConnection) {
        guard connection.isReusable else {
            discard(connection)
            return
        }
        let waiter = state.withLock { state -> CheckedContinuation<Grant, Never>? in
            if !state.waiters.isEmpty, !state.closed { return state.waiters.removeFirst() }
            state.leased[ObjectIdentifier(connection)] = nil
            state.idle.append((connection, .now))
            return nil
        }
        waiter?.resume(returning: .connection(connection))
    }

    /// Cuts every leased connection (PQConnection.abandon): the database is known to be
    /// unreachable, and a statement in flight might never complete.
    func abandonLeased() {
        for connection in state.withLock({ Array($0.leased.values) }) { connection.abandon() }
    }

    /// Runs a short statement on every connection idle for `after`, so that PostgreSQL's
    /// `idle_session_timeout` does not end it.
    func keepIdleAlive(after: Duration) async {
        let cutoff = ContinuousClock.now - after
        let stale = state.withLock { state -> [PQConnection] in
            let (old, fresh) = (state.idle.filter { $0.since < cutoff }, state.idle.filter { $0.since >= cutoff })
            state.idle = fresh
            for entry in old { state.leased[ObjectIdentifier(entry.connection)] = entry.connection }
            return old.map(\.connection)
        }
        for connection in stale {
            do {
                _ = try await connection.run("SELECT 1")
            } catch {
                logger.debug("an idle connection to PostgreSQL failed its keep-alive: \(error)")
            }
            release(connection)
        }
    }

    /// Closes the idle connections; those leased close as they come back.
    func close() {
        let idle = state.withLock { state -> [PQConnection] in
            state.closed = true
            defer { state.idle = [] }
            return state.idle.map(\.connection)
        }
        for connection in idle { discard(connection) }
    }

    private func grantNow(_ state: inout State) -> Grant? {
        if let entry = state.idle.popLast() {
            state.leased[ObjectIdentifier(entry.connection)] = entry.connection
            return .connection(entry.connection)
        }
        guard state.open < maximum else { return nil }
        state.open += 1
        if let thread = state.spareThreads.popLast() { return .slot(thread) }
        state.threadsMade += 1
        return .slot(ThreadExecutor(name: "\(threadName)-\(state.threadsMade)"))
    }

    private func discard(_ connection: PQConnection) {
        connection.close()
        state.withLock { $0.leased[ObjectIdentifier(connection)] = nil }
        freeSlot(connection.thread)
    }

    /// A place in the pool came free: the first waiter takes it, with the thread.
    private func freeSlot(_ thread: ThreadExecutor) {
        let waiter = state.withLock { state -> CheckedContinuation<Grant, Never>? in
            if !state.waiters.isEmpty { return state.waiters.removeFirst() }
            state.open -= 1
            state.spareThreads.append(thread)
            return nil
        }
        waiter?.resume(returning: .slot(thread))
    }
}
