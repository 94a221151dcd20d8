import Glibc
import CParleySystem

/// Manual dispatch for many clients: one event fd and one `dispatch` for every client attached
/// (librdkafka's forwarded queues), so that an event loop serving thousands of clients watches
/// one descriptor.
///
/// - `eventFD` is readable exactly while an attached client has callbacks waiting.
/// - `dispatch` visits the clients with callbacks waiting in the order they began to wait, and
///   runs a batch of each (its dispatcher keeps its callbacks serialized and in order); a client
///   with more left goes to the end of the list (round robin).
///
/// Locking: a dispatcher calls in here with its own lock held (attach, detach, "waiting",
/// "empty"); the group never calls a dispatcher with its own lock held.
public final class CallbackGroup: Sendable {
    /// A visit runs at most this many callbacks of one client when `dispatch` has a limit.
    static let visitBatch = 16

    private struct State {
        /// Clients that began to wait, each listed at most once (an entry may be stale: a client
        /// emptied by its own dispatch or detached meanwhile; a visit then runs nothing).
        var ready: [CallbackDispatcher] = []
        var readyHead = 0
        /// Attached clients whose queue is not empty: the fd is readable while this is > 0.
        var waitingClients = 0
        var members = 0
        var closed = false
        /// The thread running `dispatch`, if any.
        var runner: pthread_t?

        var readyCount: Int { ready.count - readyHead }

        mutating func popReady() -> CallbackDispatcher? {
            guard readyHead < ready.count else { return nil }
            let dispatcher = ready[readyHead]
            readyHead += 1
            if readyHead == ready.count {
                ready.removeAll(keepingCapacity: true)
                readyHead = 0
            } else if readyHead > 256 && readyHead * 2 > ready.count {
                ready.removeFirst(readyHead)
                readyHead = 0
            }
            return dispatcher
        }
    }

    private let lock = ConditionLock()
    nonisolated(unsafe) private var state = State()  // guarded by `lock`
    /// Readable while an attached client has callbacks waiting. Closed with the group's last reference.
    public let eventFD: Int32

    public init() throws(ParleyError) {
        let fd = parley_eventfd_nonblocking()
        guard fd >= 0 else { throw ParleyError(.internalError, "eventfd failed: errno \(errno)") }
        eventFD = fd
    }

    deinit { Glibc.close(eventFD) }

    /// Clients attached now.
    public var memberCount: Int { lock.withLock { state.members } }

    /// Attached clients with callbacks waiting.
    public var waitingClientCount: Int { lock.withLock { state.waitingClients } }

    /// Runs waiting callbacks of the attached clients on the calling thread and returns how many
    /// ran. `max` 0: each client waiting when the call began runs the callbacks it has waiting at
    /// its turn, once round; otherwise at most `max` in all, `visitBatch` per client per round.
    /// Returns 0 at once when another thread is dispatching the group, or from inside a callback
    /// it runs.
    public func dispatch(max: Int = 0) -> Int {
        lock.lock()
        guard state.runner == nil else {
            lock.unlock()
            return 0
        }
        state.runner = pthread_self()
        var ran = 0
        rounds: while true {
            var visits = state.readyCount
            var progressed = false
            while visits > 0, let dispatcher = state.popReady() {
                visits -= 1
                lock.unlock()
                let budget = max > 0 ? Swift.min(Self.visitBatch, max - ran) : 0
                let count = dispatcher.runForGroup(self, limit: budget)
                lock.lock()
                ran += count
                progressed = progressed || count > 0
                if max > 0 && ran >= max { break rounds }
            }
            if max == 0 || !progressed || state.readyCount == 0 { break }
        }
        state.runner = nil
        lock.unlock()
        return ran
    }

    /// Refuses (`.invalidState`) while clients are attached; otherwise stops accepting clients.
    /// The fd stays open until the last reference goes (a dispatch running on another thread).
    public func close() throws(ParleyError) {
        lock.lock()
        defer { lock.unlock() }
        guard !state.closed else { throw ParleyError(.invalidHandle, "the dispatch group is destroyed") }
        guard state.members == 0 else {
            throw .invalidState("\(state.members) client(s) still attached to the dispatch group: destroy or detach them first")
        }
        state.closed = true
        state.ready.removeAll()
        state.readyHead = 0
    }

    public var isClosed: Bool { lock.withLock { state.closed } }

    // MARK: Called by an attached dispatcher, its lock held

    func attach(waiting: Bool, _ dispatcher: CallbackDispatcher) throws(ParleyError) {
        lock.lock()
        defer { lock.unlock() }
        guard !state.closed else { throw ParleyError(.invalidHandle, "the dispatch group is destroyed") }
        state.members += 1
        if waiting { noteWaitingLocked(dispatcher, list: true) }
    }

    func detach(waiting: Bool) {
        lock.withLock {
            state.members -= 1
            if waiting { noteEmptyLocked() }
        }
    }

    /// An attached client's queue became non-empty; `list` when it is not listed already.
    func noteWaiting(_ dispatcher: CallbackDispatcher, list: Bool) {
        lock.withLock { noteWaitingLocked(dispatcher, list: list) }
    }

    /// An attached client's queue became empty.
    func noteEmpty() {
        lock.withLock { noteEmptyLocked() }
    }

    /// A visit left callbacks waiting: the client goes to the end of the list.
    func relist(_ dispatcher: CallbackDispatcher) {
        lock.withLock {
            if !state.closed { state.ready.append(dispatcher) }
        }
    }

    private func noteWaitingLocked(_ dispatcher: CallbackDispatcher, list: Bool) {
        state.waitingClients += 1
        if state.waitingClients == 1 {
            var one: UInt64 = 1
            _ = Glibc.write(eventFD, &one, 8)
        }
        if list && !state.closed { state.ready.append(dispatcher) }
    }

    private func noteEmptyLocked() {
        state.waitingClients -= 1
        if state.waitingClients == 0 {
            var value: UInt64 = 0
            _ = Glibc.read(eventFD, &value, 8)
        }
    }
}
