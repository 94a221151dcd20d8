import Glibc
import Synchronization

/// The process-wide worker threads that run the callbacks of every client in thread dispatch
/// mode, so that the threads of a process do not grow with its clients.
///
/// - A client with callbacks waiting is in the pool's ready list once; a worker takes it,
///   runs a batch of its callbacks (at most `batchSize`, in order; the client's dispatcher
///   keeps them serialized) and puts it back at the end of the list if more wait, so a busy
///   client cannot starve the others.
/// - `coreWorkers` threads are started as work first needs them and then stay, waiting on a
///   condition when idle (no polling).
/// - A callback that blocks (an application waiting for its own I/O) holds one worker. When
///   every worker has been inside one callback for `stallThresholdMs` while other clients'
///   callbacks wait, the monitor starts one extra worker (libdispatch's overcommit), up to
///   `maxExtraWorkers`; an extra worker ends after `extraIdleExitMs` without work. The
///   monitor ticks only while callbacks wait and no worker is free.
public final class CallbackPool: Sendable {
    /// The pool's bounds and timings.
    public struct Limits: Sendable, Equatable {
        public var coreWorkers: Int
        public var maxExtraWorkers = 64
        public var stallThresholdMs = 50
        public var extraIdleExitMs = 5_000
        public var batchSize = 32

        public init(coreWorkers: Int = CallbackPool.defaultWorkerCount) {
            self.coreWorkers = coreWorkers
        }
    }

    /// The core worker count used unless `configure(workers:)` said otherwise: the cores, at
    /// least 2 (a blocked callback must not stop everything at once) and at most 8.
    public static var defaultWorkerCount: Int {
        min(max(2, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))), 8)
    }

    /// The largest core worker count `configure(workers:)` accepts.
    public static let maxConfigurableWorkers = 64

    private struct SharedSetting {
        var workers: Int?
        var pool: CallbackPool?
    }

    private static let sharedSetting = Locked(SharedSetting())

    /// The pool of every client in thread dispatch mode, started with the first of them.
    public static var shared: CallbackPool {
        sharedSetting.withLock { setting in
            if let pool = setting.pool { return pool }
            let pool = CallbackPool(limits: Limits(coreWorkers: setting.workers ?? defaultWorkerCount))
            setting.pool = pool
            return pool
        }
    }

    /// The core worker count of the shared pool once it runs; nil before.
    public static var runningCoreWorkers: Int? { sharedSetting.withLock { $0.pool?.limits.coreWorkers } }

    /// Sets the shared pool's core worker count (1...64). Only before the shared pool is first
    /// used (the first client in thread mode); afterwards `.invalidState`.
    public static func configure(workers: Int) throws(ParleyError) {
        guard (1...maxConfigurableWorkers).contains(workers) else {
            throw .invalidArgument("workers must be 1...\(maxConfigurableWorkers), got \(workers)")
        }
        try sharedSetting.withLock { (setting: inout SharedSetting) throws(ParleyError) in
            guard setting.pool == nil else {
                throw .invalidState("the callback pool is already running: configure it before the first client in thread mode is created")
            }
            setting.workers = workers
        }
    }

    /// One worker's view for the monitor: when its current callback began (0: not in one).
    final class WorkerSlot: Sendable {
        let callbackStartNs = Atomic<Int64>(0)
        let isExtra: Bool
        init(isExtra: Bool) { self.isExtra = isExtra }
    }

    private struct State {
        var ready: [CallbackDispatcher] = []
        var readyHead = 0
        var coreStarted = 0
        var extraRunning = 0
        var extraStartedTotal = 0
        var idleWorkers = 0
        /// Idle workers signalled and not yet awake: a burst of submissions wakes each idle
        /// worker once, not once per submission.
        var wakingWorkers = 0
        var slots: [WorkerSlot] = []
        var monitorArmed = false
        var monitorStarted = false

        var readyIsEmpty: Bool { readyHead == ready.count }

        /// A waiting worker is running again (signalled, timed out or woken spuriously).
        mutating func workerAwoke() {
            idleWorkers -= 1
            wakingWorkers = min(max(0, wakingWorkers - 1), idleWorkers)
        }


        mutating func pushReady(_ dispatcher: CallbackDispatcher) { ready.append(dispatcher) }

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

    public let limits: Limits
    private let lock = ConditionLock()
    // Every access holds `lock`. Built with -sanitize=thread, the compiler widens one access
    // scope of the worker loop over the next, and the runtime reports that as a conflict.
    @exclusivity(unchecked) nonisolated(unsafe) private var state = State()  // guarded by `lock`
    /// The monitor sleeps here, apart from the workers, so that waking one worker never wakes it instead.
    private let monitorLock = ConditionLock()
    nonisolated(unsafe) private var monitorKicked = false  // guarded by `monitorLock`

    /// A pool of its own (tests); clients use `shared`.
    public init(limits: Limits) {
        self.limits = limits
    }

    /// What the pool is running now, for metrics and tests.
    public struct Statistics: Sendable, Equatable {
        public var coreWorkers: Int
        public var extraWorkers: Int
        /// Extra workers started so far (each when every worker was stalled in a callback).
        public var extraWorkersStarted: Int
        public var idleWorkers: Int
        public var clientsWaiting: Int
    }

    public var statistics: Statistics {
        lock.withLock {
            Statistics(
                coreWorkers: state.coreStarted, extraWorkers: state.extraRunning, extraWorkersStarted: state.extraStartedTotal,
                idleWorkers: state.idleWorkers, clientsWaiting: state.ready.count - state.readyHead)
        }
    }

    /// True on the pool's worker threads (of any pool).
    static var isWorkerThread: Bool { pthread_getspecific(workerKey) != nil }

    private static let workerKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Queues a dispatcher whose callbacks wait. The dispatcher calls it once per stretch of
    /// waiting (`scheduled`), so it is in the ready list at most once.
    func submit(_ dispatcher: CallbackDispatcher) {
        lock.lock()
        state.pushReady(dispatcher)
        var kickMonitor = false
        var wakesWorker = false
        if state.idleWorkers > 0 {
            if state.idleWorkers > state.wakingWorkers {
                state.wakingWorkers += 1
                wakesWorker = true
            }
        } else if state.coreStarted < limits.coreWorkers {
            startWorker(isExtra: false)
        } else if !state.monitorArmed {
            state.monitorArmed = true
            kickMonitor = true
            if !state.monitorStarted {
                state.monitorStarted = (try? NativeThread.start(name: "parley-cb-watch") { [self] in runMonitor() })
                    .map { $0.detach(); return true } ?? false
            }
        }
        lock.unlock()
        // Signalled after the lock is given up, so that the worker does not wake only to block
        // on it. A worker that woke meanwhile on its own finds the dispatcher all the same.
        if wakesWorker { lock.signal() }
        if kickMonitor {
            monitorLock.withLock {
                monitorKicked = true
                monitorLock.broadcast()
            }
        }
    }

    /// Starts a worker; the lock is held. A failure to start one leaves the work to the others.
    private func startWorker(isExtra: Bool) {
        let slot = WorkerSlot(isExtra: isExtra)
        let index = isExtra ? state.extraStartedTotal + 1 : state.coreStarted + 1
        let name = isExtra ? "parley-cb+\(index)" : "parley-cb-\(index)"
        guard let thread = try? NativeThread.start(name: name, { [self] in runWorker(slot) }) else { return }
        thread.detach()
        state.slots.append(slot)
        if isExtra {
            state.extraRunning += 1
            state.extraStartedTotal += 1
        } else {
            state.coreStarted += 1
        }
    }

    private func runWorker(_ slot: WorkerSlot) {
        pthread_setspecific(Self.workerKey, UnsafeRawPointer(bitPattern: 1))
        lock.lock()
        while true {
            if let dispatcher = state.popReady() {
                lock.unlock()
                let more = dispatcher.runBatch(limit: limits.batchSize, slot: slot)
                lock.lock()
                // Behind every client that waited meanwhile: one busy client cannot starve them.
                if more { state.pushReady(dispatcher) }
                continue
            }
            state.idleWorkers += 1
            if slot.isExtra {
                let woken = lock.wait(timeoutMs: limits.extraIdleExitMs)
                state.workerAwoke()
                if !woken && state.readyIsEmpty { break }
            } else {
                lock.wait()
                state.workerAwoke()
            }
        }
        state.extraRunning -= 1
        state.slots.removeAll { $0 === slot }
        lock.unlock()
    }

    /// Sleeps until armed, then looks every tick while callbacks wait and no worker is free.
    private func runMonitor() {
        let tickMs = max(5, limits.stallThresholdMs / 2)
        let thresholdNs = Int64(limits.stallThresholdMs) * 1_000_000
        while true {
            monitorLock.lock()
            while !monitorKicked { monitorLock.wait() }
            monitorKicked = false
            monitorLock.unlock()
            while true {
                monitorLock.lock()
                monitorLock.wait(timeoutMs: tickMs)
                monitorLock.unlock()
                lock.lock()
                if state.readyIsEmpty || state.idleWorkers > 0 {
                    state.monitorArmed = false
                    lock.unlock()
                    break
                }
                let now = monotonicNanoseconds()
                let everyWorkerStalled = state.slots.allSatisfy { slot in
                    let start = slot.callbackStartNs.load(ordering: .relaxed)
                    return start != 0 && now - start >= thresholdNs
                }
                if everyWorkerStalled && state.extraRunning < limits.maxExtraWorkers {
                    startWorker(isExtra: true)
                }
                lock.unlock()
            }
        }
    }
}
