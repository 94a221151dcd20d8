import Glibc
import CParleySystem

/// How a client delivers its callbacks to the application.
public enum CallbackMode: String, Sendable {
    /// The process-wide callback pool (`CallbackPool.shared`) runs callbacks in FIFO order.
    case thread
    /// Callbacks wait in a queue; the application runs them with `dispatch` on a thread of
    /// its own, woken by `eventFD` becoming readable (for event loops: asyncio, libuv, epoll),
    /// or with the `CallbackGroup` the client is attached to.
    case manual
}

/// The single place through which every application-visible callback of one client runs.
///
/// Guarantees, in both modes:
/// - callbacks run one at a time, in the order they were enqueued;
/// - no internal lock is held while a callback runs, so a callback may call any API;
/// - after `close()` returns, every callback enqueued before it has run and none runs later.
///
/// Closing from inside a callback is allowed: the callbacks still queued run on that
/// thread, nested, before `close()` returns (there is no other way to keep the last rule).
///
/// Thread mode: the dispatcher is in its pool's ready list (`scheduled`) from the moment a
/// callback waits until a worker finds its queue empty; one worker at a time runs it.
/// Manual mode: `dispatch` runs it, or its group's `dispatch` (`CallbackGroup`).
public final class CallbackDispatcher: Sendable {
    public typealias Job = @Sendable () -> Void

    private struct State {
        var queue: [Job] = []
        var head = 0
        var closed = false
        /// Thread currently running a callback (or draining), if any.
        var runner: pthread_t?
        /// Thread mode: in the pool's ready list, or a worker runs it.
        var scheduled = false
        /// Manual mode: the group it is attached to, and whether the group lists it (or a
        /// visit of the group is starting on it).
        var group: CallbackGroup?
        var listedInGroup = false
        /// Callbacks run so far, and the longest one took (for the client's metrics).
        var callbacksRun = 0
        var slowestCallbackNs: Int64 = 0
        var count: Int { queue.count - head }
        static let done: Job = {}

        mutating func noteRun(tookNs: Int64) {
            callbacksRun += 1
            slowestCallbackNs = max(slowestCallbackNs, tookNs)
        }

        mutating func pop() -> Job? {
            guard head < queue.count else { return nil }
            let job = queue[head]
            // The slot lets go of the job at once: what it captured must not outlive its run.
            queue[head] = State.done
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 256 && head * 2 > queue.count {
                // Compact occasionally instead of removeFirst (O(n) each time).
                queue.removeFirst(head)
                head = 0
            }
            return job
        }
    }

    public let mode: CallbackMode
    private let lock = ConditionLock()
    nonisolated(unsafe) private var state = State()  // guarded by `lock`
    /// Manual mode: readable while the queue is non-empty. Thread mode: -1.
    public let eventFD: Int32
    /// Thread mode: the pool whose workers run the callbacks.
    private let pool: CallbackPool?

    public convenience init(mode: CallbackMode) throws(ParleyError) {
        try self.init(mode: mode, pool: mode == .thread ? CallbackPool.shared : nil)
    }

    /// `pool`: thread mode's pool (a pool of its own in tests).
    init(mode: CallbackMode, pool: CallbackPool?) throws(ParleyError) {
        self.mode = mode
        if mode == .manual {
            let fd = parley_eventfd_nonblocking()
            guard fd >= 0 else { throw ParleyError(.internalError, "eventfd failed: errno \(errno)") }
            eventFD = fd
            self.pool = nil
        } else {
            eventFD = -1
            self.pool = pool ?? CallbackPool.shared
        }
    }

    deinit {
        if eventFD >= 0 { Glibc.close(eventFD) }
    }

    /// Queues a callback. Returns false (and drops it) once the dispatcher is closed.
    @discardableResult
    public func enqueue(_ job: @escaping Job) -> Bool {
        lock.lock()
        guard !state.closed else {
            lock.unlock()
            return false
        }
        state.queue.append(job)
        let schedules = state.count == 1 && becameNonEmpty()
        lock.unlock()
        // The pool is told after the lock is given up: the worker it wakes takes this lock
        // first thing, and would otherwise block on it and be woken a second time. Until then
        // the dispatcher is `scheduled` but in no ready list, which only delays its callbacks.
        if schedules { pool?.submit(self) }
        return true
    }

    public var pendingCount: Int { lock.withLock { state.count } }

    /// Callbacks waiting, callbacks run, and the longest a callback has taken so far.
    public var statistics: CallbackStatistics {
        lock.withLock {
            CallbackStatistics(queueDepth: state.count, callbacksRun: state.callbacksRun, slowestCallbackNs: state.slowestCallbackNs)
        }
    }

    /// Runs a callback and returns how long it took: two clock reads, far below a callback's own
    /// cost. A pool worker's slot shows the monitor when the callback began.
    private static func run(_ job: Job, slot: CallbackPool.WorkerSlot? = nil) -> Int64 {
        let start = monotonicNanoseconds()
        slot?.callbackStartNs.store(start, ordering: .relaxed)
        job()
        slot?.callbackStartNs.store(0, ordering: .relaxed)
        return monotonicNanoseconds() - start
    }

    public var isClosed: Bool { lock.withLock { state.closed } }

    /// True when the calling thread is inside one of this dispatcher's callbacks.
    public var isCallbackThread: Bool {
        lock.withLock { isRunnerLocked }
    }

    private var isRunnerLocked: Bool { state.runner.map { pthread_equal($0, pthread_self()) != 0 } ?? false }

    /// The group this manual-mode dispatcher is attached to, if any.
    public var group: CallbackGroup? { lock.withLock { state.group } }

    /// Manual mode: attaches the dispatcher to `group` (its callbacks waiting now count at once),
    /// or with nil detaches it. `.invalidState` in thread mode, once closed, or when attached to
    /// another group (detach first); attaching to its own group again changes nothing.
    public func setGroup(_ group: CallbackGroup?) throws(ParleyError) {
        lock.lock()
        defer { lock.unlock() }
        guard mode == .manual else {
            throw .invalidState("the client is in thread dispatch mode: only manual-mode clients join a dispatch group")
        }
        guard !state.closed else { throw .invalidState("the client is closed") }
        if state.group === group { return }
        if let group {
            guard state.group == nil else {
                throw .invalidState("the client is attached to another dispatch group: detach it first")
            }
            try group.attach(waiting: state.count > 0, self)
            state.group = group
            state.listedInGroup = state.count > 0
        } else {
            detachLocked()
        }
    }

    /// Manual mode: runs up to `max` queued callbacks (0 = all queued now) on the calling
    /// thread and returns how many ran. Returns 0 at once when another thread is already
    /// dispatching, or when called from inside a callback (no nesting).
    public func dispatch(max: Int = 0) throws(ParleyError) -> Int {
        guard mode == .manual else {
            throw ParleyError(.invalidState, "dispatch is only for clients in manual callback mode")
        }
        lock.lock()
        guard state.runner == nil else {
            lock.unlock()
            return 0
        }
        let ran = runLocked(limit: max > 0 ? max : state.count)
        lock.broadcast()
        lock.unlock()
        return ran
    }

    /// A pool worker runs up to `limit` callbacks. Returns true when callbacks still wait: the
    /// worker then puts the dispatcher back in the ready list (it stays `scheduled`).
    func runBatch(limit: Int, slot: CallbackPool.WorkerSlot) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        // Taken over by a closer on another worker thread, which runs the rest itself.
        guard state.runner == nil else {
            state.scheduled = false
            return false
        }
        _ = runLocked(limit: limit, slot: slot)
        lock.broadcast()
        let more = state.count > 0
        if !more { state.scheduled = false }
        return more
    }

    /// A visit of `group.dispatch`: runs up to `limit` callbacks (0: those waiting now) and
    /// lists the dispatcher again at the group's end when some are left.
    func runForGroup(_ group: CallbackGroup, limit: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        // Detached since it was listed: a stale entry.
        guard state.group === group else { return 0 }
        state.listedInGroup = false
        var ran = 0
        // Another thread runs it (its own dispatch or its destroy): what is left stays listed.
        if state.runner == nil {
            ran = runLocked(limit: limit > 0 ? limit : state.count)
            lock.broadcast()
        }
        if state.count > 0 && state.group === group {
            state.listedInGroup = true
            group.relist(self)
        }
        return ran
    }

    /// Runs up to `limit` callbacks on the calling thread as the runner; the lock is held, and
    /// released around each callback. Stops early once the queue is empty (a callback may
    /// have closed the dispatcher, draining it nested).
    private func runLocked(limit: Int, slot: CallbackPool.WorkerSlot? = nil) -> Int {
        state.runner = pthread_self()
        var ran = 0
        while ran < limit, let job = takeNext() {
            lock.unlock()
            let took = Self.run(job, slot: slot)
            ran += 1
            lock.lock()
            state.noteRun(tookNs: took)
        }
        state.runner = nil
        return ran
    }

    /// Stops accepting callbacks, runs every callback still queued, and returns when none
    /// can run any more. Idempotent.
    ///
    /// Thread mode: the pool's workers run what is queued, and this waits for them; called on
    /// a worker thread (from another client's callback) it runs the rest itself, once the
    /// worker running this client (if any) has finished its batch, so that a full pool never
    /// waits for itself. Manual mode: it waits for a dispatch running on another thread, then
    /// runs the rest on the calling thread.
    public func close() {
        lock.lock()
        defer { lock.unlock() }
        state.closed = true
        if isRunnerLocked {
            // Called from inside a callback: drain nested on this thread; the loop running the
            // callback around us finds the queue empty.
            while let job = takeNext() {
                lock.unlock()
                let took = Self.run(job)
                lock.lock()
                state.noteRun(tookNs: took)
            }
            detachLocked()
            return
        }
        if mode == .thread && !CallbackPool.isWorkerThread {
            while state.runner != nil || state.count > 0 { lock.wait() }
            return
        }
        while state.runner != nil { lock.wait() }
        _ = runLocked(limit: Int.max)
        lock.broadcast()
        detachLocked()
    }

    /// Takes the next callback; the lock is held. The queue's emptiness is mirrored in the fd
    /// and the group.
    private func takeNext() -> Job? {
        guard let job = state.pop() else { return nil }
        if state.count == 0 { becameEmpty() }
        return job
    }

    /// The queue was empty; the lock is held. Returns true when the caller must hand the
    /// dispatcher to the pool (thread mode), once the lock is given up.
    private func becameNonEmpty() -> Bool {
        switch mode {
        case .thread:
            if state.scheduled { return false }
            state.scheduled = true
            return true
        case .manual:
            signalFD()
            if let group = state.group {
                group.noteWaiting(self, list: !state.listedInGroup)
                state.listedInGroup = true
            }
            return false
        }
    }

    private func becameEmpty() {
        guard mode == .manual else { return }
        drainFD()
        state.group?.noteEmpty()
    }

    private func detachLocked() {
        guard let group = state.group else { return }
        group.detach(waiting: state.count > 0)
        state.group = nil
        state.listedInGroup = false
    }

    // The fd mirrors "queue non-empty"; both helpers are called with the lock held.
    private func signalFD() {
        var one: UInt64 = 1
        _ = Glibc.write(eventFD, &one, 8)
    }

    private func drainFD() {
        guard eventFD >= 0 else { return }
        var value: UInt64 = 0
        _ = Glibc.read(eventFD, &value, 8)
    }
}

/// What `CallbackDispatcher.statistics` reports.
public struct CallbackStatistics: Sendable, Equatable {
    public var queueDepth: Int
    public var callbacksRun: Int
    public var slowestCallbackNs: Int64
}
