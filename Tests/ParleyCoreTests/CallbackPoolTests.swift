import Glibc
import Synchronization
import Testing
@testable import ParleyCore

/// Per-client records of what ran, and whether two callbacks of one client ever overlapped.
private final class ClientLog: Sendable {
    let values = Locked<[Int]>([])
    let inside = Atomic<Int>(0)
    let overlaps = Atomic<Int>(0)
    let threads = Locked<[pthread_t]>([])

    func record(_ value: Int) {
        if inside.add(1, ordering: .sequentiallyConsistent).newValue != 1 { overlaps.add(1, ordering: .sequentiallyConsistent) }
        values.withLock { $0.append(value) }
        threads.withLock { $0.append(pthread_self()) }
        inside.subtract(1, ordering: .sequentiallyConsistent)
    }

    var snapshot: [Int] { values.withLock { $0 } }
}

/// A gate callbacks wait at until the test opens it.
private final class Gate: Sendable {
    private let open = Atomic<Bool>(false)
    let waiting = Atomic<Int>(0)

    func wait() {
        waiting.add(1, ordering: .sequentiallyConsistent)
        while !open.current { usleep(1000) }
        waiting.subtract(1, ordering: .sequentiallyConsistent)
    }

    func release() { open.store(true, ordering: .sequentiallyConsistent) }
}

private func waitUntil(timeoutMs: Int = 10_000, _ condition: () -> Bool) -> Bool {
    for _ in 0..<(timeoutMs / 5) {
        if condition() { return true }
        usleep(5000)
    }
    return condition()
}

private func pool(workers: Int, batch: Int = 32, extraIdleExitMs: Int = 5_000) -> CallbackPool {
    var limits = CallbackPool.Limits(coreWorkers: workers)
    limits.batchSize = batch
    limits.extraIdleExitMs = extraIdleExitMs
    return CallbackPool(limits: limits)
}

// A property, not a call: #expect would copy the atomic to show a call's receiver.
extension Atomic where Value == Int {
    var current: Int { load(ordering: .sequentiallyConsistent) }
}

extension Atomic where Value == Bool {
    var current: Bool { load(ordering: .sequentiallyConsistent) }
}

@Suite struct CallbackPoolTests {
    @Test func manyClientsOnTwoWorkersEachRunInOrderExactlyOnceAndNeverConcurrently() throws {
        let workers = pool(workers: 2, batch: 8)
        let clients = 40, perProducer = 150, producers = 3
        let dispatchers = try (0..<clients).map { _ in try CallbackDispatcher(mode: .thread, pool: workers) }
        let logs = (0..<clients).map { _ in ClientLog() }
        DispatchQueueless.concurrentPerform(iterations: producers) { producer in
            for index in 0..<perProducer {
                for client in 0..<clients {
                    dispatchers[client].enqueue { logs[client].record(producer * 10_000 + index) }
                }
            }
        }
        #expect(waitUntil { logs.allSatisfy { $0.snapshot.count == producers * perProducer } })
        for (client, log) in logs.enumerated() {
            let values = log.snapshot
            for producer in 0..<producers {
                #expect(values.filter { $0 / 10_000 == producer } == (0..<perProducer).map { producer * 10_000 + $0 }, "client \(client)")
            }
            #expect(log.overlaps.current == 0)
        }
        dispatchers.forEach { $0.close() }
        #expect(logs.allSatisfy { $0.snapshot.count == producers * perProducer })  // nothing ran twice
        #expect(workers.statistics.coreWorkers == 2)
    }

    @Test func aBusyClientCannotStarveAnotherOnOneWorker() throws {
        let workers = pool(workers: 1, batch: 32)
        let busy = try CallbackDispatcher(mode: .thread, pool: workers)
        let other = try CallbackDispatcher(mode: .thread, pool: workers)
        let gate = Gate()
        let busyRan = Atomic<Int>(0)
        let busyRanWhenOtherRan = Atomic<Int>(-1)
        busy.enqueue { gate.wait() }
        for _ in 0..<10_000 { busy.enqueue { busyRan.add(1, ordering: .sequentiallyConsistent) } }
        other.enqueue { busyRanWhenOtherRan.store(busyRan.current, ordering: .sequentiallyConsistent) }
        gate.release()
        #expect(waitUntil { busyRanWhenOtherRan.current >= 0 })
        // The other client ran after one batch of the busy one, not after all 10,000.
        #expect(busyRanWhenOtherRan.current < 100)
        busy.close()
        other.close()
        #expect(busyRan.current == 10_000)
    }

    @Test func blockedCallbacksStallOnlyTheirOwnClients() throws {
        let workers = pool(workers: 2, extraIdleExitMs: 300)
        let gate = Gate()
        let blocked = try (0..<2).map { _ in try CallbackDispatcher(mode: .thread, pool: workers) }
        // Each blocked client waits at the gate with one more callback behind it.
        let blockedLogs = (0..<2).map { _ in ClientLog() }
        for (index, dispatcher) in blocked.enumerated() {
            dispatcher.enqueue { gate.wait() }
            dispatcher.enqueue { blockedLogs[index].record(1) }
        }
        #expect(waitUntil { gate.waiting.current == 2 })
        let others = try (0..<20).map { _ in try CallbackDispatcher(mode: .thread, pool: workers) }
        let ran = Atomic<Int>(0)
        let start = monotonicNanoseconds()
        for dispatcher in others { dispatcher.enqueue { ran.add(1, ordering: .sequentiallyConsistent) } }
        // Both core workers are stuck at the gate: the others run on an extra worker.
        #expect(waitUntil(timeoutMs: 3_000) { ran.current == 20 })
        #expect(monotonicNanoseconds() - start < 2_000_000_000)
        #expect(workers.statistics.extraWorkersStarted >= 1)
        #expect(workers.statistics.extraWorkersStarted <= workers.limits.maxExtraWorkers)
        // The blocked clients' own next callbacks still wait behind their blocked ones (FIFO).
        #expect(blockedLogs.allSatisfy { $0.snapshot.isEmpty })
        gate.release()
        #expect(waitUntil { blockedLogs.allSatisfy { $0.snapshot == [1] } })
        // Extra workers end once idle for a while; the core ones stay.
        #expect(waitUntil { workers.statistics.extraWorkers == 0 })
        #expect(workers.statistics.coreWorkers == 2)
        (blocked + others).forEach { $0.close() }
    }

    @Test func closeWaitsForTheWorkerRunningTheClientAndRunsEverythingQueued() throws {
        let workers = pool(workers: 2)
        let dispatcher = try CallbackDispatcher(mode: .thread, pool: workers)
        let log = ClientLog()
        let gate = Gate()
        dispatcher.enqueue { gate.wait(); log.record(0) }
        for index in 1...20 { dispatcher.enqueue { log.record(index) } }
        #expect(waitUntil { gate.waiting.current == 1 })
        let closed = Atomic<Bool>(false)
        let closer = try NativeThread.start(name: "closer") {
            dispatcher.close()
            closed.store(true, ordering: .sequentiallyConsistent)
        }
        usleep(50_000)
        #expect(closed.current == false)  // the first callback still runs
        gate.release()
        closer.join()
        #expect(log.snapshot == Array(0...20))
        #expect(log.overlaps.current == 0)
        #expect(!dispatcher.enqueue { log.record(99) })
        usleep(20_000)
        #expect(log.snapshot.count == 21)
    }

    @Test func closingAnotherClientFromACallbackWhileAWorkerRunsItsCallback() throws {
        // One worker is taken by the client being closed; the closer is a callback of another
        // client, on the other worker: it waits for the running callback, then runs the rest.
        let workers = pool(workers: 2)
        let target = try CallbackDispatcher(mode: .thread, pool: workers)
        let closerClient = try CallbackDispatcher(mode: .thread, pool: workers)
        let log = ClientLog()
        let gate = Gate()
        target.enqueue { gate.wait(); log.record(0) }
        for index in 1...10 { target.enqueue { log.record(index) } }
        #expect(waitUntil { gate.waiting.current == 1 })
        let seenAfterClose = Locked<[Int]?>(nil)
        closerClient.enqueue {
            target.close()
            seenAfterClose.withLock { $0 = log.snapshot }
        }
        usleep(50_000)
        #expect(seenAfterClose.withLock { $0 } == nil)
        gate.release()
        #expect(waitUntil { seenAfterClose.withLock { $0 } != nil })
        #expect(seenAfterClose.withLock { $0 } == Array(0...10))
        #expect(log.overlaps.current == 0)
        closerClient.close()
    }

    @Test func closeFromInsideItsOwnCallbackOnAWorkerDrainsNested() throws {
        let workers = pool(workers: 2)
        let dispatcher = try CallbackDispatcher(mode: .thread, pool: workers)
        let log = ClientLog()
        let finished = Atomic<Bool>(false)
        let wasCallbackThread = Atomic<Bool>(false)
        let gate = Gate()  // holds the first callback until the others are queued
        dispatcher.enqueue {
            gate.wait()
            wasCallbackThread.store(dispatcher.isCallbackThread, ordering: .sequentiallyConsistent)
            log.record(1)
            dispatcher.close()
            #expect(log.snapshot == [1, 2, 3])
            finished.store(true, ordering: .sequentiallyConsistent)
        }
        dispatcher.enqueue { log.record(2) }
        dispatcher.enqueue { log.record(3) }
        gate.release()
        #expect(waitUntil { finished.current })
        #expect(wasCallbackThread.current == true)
        #expect(!dispatcher.isCallbackThread)
        #expect(log.snapshot == [1, 2, 3])
    }

    @Test func threadsDoNotGrowWithThreeHundredClients() throws {
        let before = processThreadNames().filter { $0.hasPrefix("parley-cb") }.count
        let dispatchers = try (0..<300).map { _ in try CallbackDispatcher(mode: .thread) }
        let ran = Atomic<Int>(0)
        for _ in 0..<3 {
            for dispatcher in dispatchers { dispatcher.enqueue { ran.add(1, ordering: .sequentiallyConsistent) } }
        }
        #expect(waitUntil { ran.current == 900 })
        let after = processThreadNames().filter { $0.hasPrefix("parley-cb") }.count
        let shared = CallbackPool.shared
        #expect(shared.statistics.coreWorkers <= shared.limits.coreWorkers)
        // At most the core workers and the monitor (the private pools of other tests running
        // meanwhile add a few).
        #expect(after - before < shared.limits.coreWorkers + 40, "threads before \(before), after \(after)")
        dispatchers.forEach { $0.close() }
    }

    @Test func theSharedPoolIsConfiguredOnlyBeforeItsFirstUse() throws {
        #expect(throws: ParleyError.self) { try CallbackPool.configure(workers: 0) }
        #expect(throws: ParleyError.self) { try CallbackPool.configure(workers: CallbackPool.maxConfigurableWorkers + 1) }
        _ = CallbackPool.shared
        do {
            try CallbackPool.configure(workers: 4)
            Issue.record("configure succeeded after the pool started")
        } catch {
            #expect(error.code == .invalidState)
        }
        let workers = CallbackPool.defaultWorkerCount
        #expect(workers >= 2 && workers <= 8)
    }
}
