import Glibc
import CParleySystem

/// How a client delivers its callbacks to the application.
public enum CallbackMode: String, Sendable {
    /// A dedicated thread per client runs callbacks in FIFO order.
    case thread
    /// Callbacks wait in a queue; the application runs them with `dispatch` on a thread of
    /// its own, woken by `eventFD` becoming readable (for event loops: asyncio, libuv, epoll).
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
public final class CallbackDispatcher: Sendable {
    public typealias Job = @Sendable () -> Void

    private struct State {
        var queue: [Job] = []
        var head = 0
        var closed = false
        /// Thread currently running a callback (or draining), if any.
        var runner: pthread_t?
        var callbackThreadFinished = false
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
    nonisolated(unsafe) private var callbackThread: NativeThread?  // written once in init

    public init(mode: CallbackMode, name: String = "parley-callbacks") throws(ParleyError) {
        self.mode = mode
        if mode == .manual {
            let fd = parley_eventfd_nonblocking()
            guard fd >= 0 else { throw ParleyError(.internalError, "eventfd failed: errno \(errno)") }
            eventFD = fd
        } else {
            eventFD = -1
            callbackThread = try NativeThread.start(name: name) { [self] in runCallbackThread() }
        }
    }

    deinit {
        if eventFD >= 0 { Glibc.close(eventFD) }
    }

    /// Queues a callback. Returns false (and drops it) once the dispatcher is closed.
    @discardableResult
    public func enqueue(_ job: @escaping Job) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !state.closed else { return false }
        let wasEmpty = state.count == 0
        state.queue.append(job)
        if wasEmpty {
            if eventFD >= 0 { signalFD() }
            lock.broadcast()
        }
        return true
    }

    public var pendingCount: Int { lock.withLock { state.count } }

    /// Callbacks waiting, callbacks run, and the longest a callback has taken so far.
    public var statistics: CallbackStatistics {
        lock.withLock {
            CallbackStatistics(queueDepth: state.count, callbacksRun: state.callbacksRun, slowestCallbackNs: state.slowestCallbackNs)
        }
    }

    /// Runs a callback and returns how long it took: two clock reads, far below a callback's own cost.
    private static func run(_ job: Job) -> Int64 {
        let start = monotonicNanoseconds()
        job()
        return monotonicNanoseconds() - start
    }

    public var isClosed: Bool { lock.withLock { state.closed } }

    /// True when the calling thread is inside one of this dispatcher's callbacks.
    public var isCallbackThread: Bool {
        lock.withLock { state.runner.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
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
        state.runner = pthread_self()
        let limit = max > 0 ? max : state.count
        var ran = 0
        while ran < limit, let job = state.pop() {
            if state.count == 0 { drainFD() }
            lock.unlock()
            let took = Self.run(job)
            ran += 1
            lock.lock()
            state.noteRun(tookNs: took)
        }
        state.runner = nil
        lock.broadcast()
        lock.unlock()
        return ran
    }

    /// Stops accepting callbacks, runs every callback still queued, and returns when none
    /// can run any more. Idempotent.
    public func close() {
        lock.lock()
        state.closed = true
        lock.broadcast()
        let calledFromCallback = state.runner.map { pthread_equal($0, pthread_self()) != 0 } ?? false
        if calledFromCallback {
            // Drain nested on this thread; the runner loop around us finds the queue empty.
            while let job = state.pop() {
                lock.unlock()
                let took = Self.run(job)
                lock.lock()
                state.noteRun(tookNs: took)
            }
            if eventFD >= 0 { drainFD() }
            // The thread's closure holds this dispatcher: dropping the thread object here
            // breaks that cycle (the thread ends by itself once the callback returns).
            let thread = callbackThread
            callbackThread = nil
            lock.unlock()
            if mode == .thread { thread?.detach() }
            return
        }
        switch mode {
        case .thread:
            while !state.callbackThreadFinished { lock.wait() }
            lock.unlock()
            callbackThread?.join()
            callbackThread = nil
        case .manual:
            while state.runner != nil { lock.wait() }
            state.runner = pthread_self()
            while let job = state.pop() {
                lock.unlock()
                let took = Self.run(job)
                lock.lock()
                state.noteRun(tookNs: took)
            }
            drainFD()
            state.runner = nil
            lock.broadcast()
            lock.unlock()
        }
    }

    private func runCallbackThread() {
        lock.lock()
        while true {
            if let job = state.pop() {
                state.runner = pthread_self()
                lock.unlock()
                let took = Self.run(job)
                lock.lock()
                state.noteRun(tookNs: took)
                state.runner = nil
                lock.broadcast()
                continue
            }
            if state.closed { break }
            lock.wait()
        }
        state.callbackThreadFinished = true
        lock.broadcast()
        lock.unlock()
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
