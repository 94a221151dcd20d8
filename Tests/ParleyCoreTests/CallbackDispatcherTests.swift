import Glibc
import Synchronization
import Testing
@testable import ParleyCore

/// Records what callbacks observed, from any thread.
private final class Recorder: Sendable {
    let values = Locked<[Int]>([])
    let concurrent = Atomic<Int>(0)
    let maxConcurrent = Atomic<Int>(0)

    func record(_ value: Int) {
        let now = concurrent.add(1, ordering: .sequentiallyConsistent).newValue
        if now > maxConcurrent.load(ordering: .sequentiallyConsistent) { maxConcurrent.store(now, ordering: .sequentiallyConsistent) }
        usleep(50)
        values.withLock { $0.append(value) }
        concurrent.subtract(1, ordering: .sequentiallyConsistent)
    }

    var snapshot: [Int] { values.withLock { $0 } }
}

private func waitUntil(timeoutMs: Int = 5000, _ condition: () -> Bool) -> Bool {
    for _ in 0..<(timeoutMs / 5) {
        if condition() { return true }
        usleep(5000)
    }
    return condition()
}

private func pollReadable(_ fd: Int32, timeoutMs: Int32) -> Bool {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    return poll(&descriptor, 1, timeoutMs) == 1 && descriptor.revents & Int16(POLLIN) != 0
}

@Suite struct CallbackDispatcherTests {
    @Test(arguments: [CallbackMode.thread, .manual])
    func fifoOrderAndNoConcurrencyWithManyProducers(mode: CallbackMode) throws {
        let dispatcher = try CallbackDispatcher(mode: mode)
        let recorder = Recorder()
        let producers = 4, perProducer = 200
        DispatchQueueless.concurrentPerform(iterations: producers) { producer in
            for index in 0..<perProducer {
                dispatcher.enqueue { recorder.record(producer * 10_000 + index) }
            }
        }
        if mode == .manual {
            var total = 0
            while total < producers * perProducer { total += try dispatcher.dispatch() }
        }
        #expect(waitUntil { recorder.snapshot.count == producers * perProducer })
        let values = recorder.snapshot
        // Each producer's callbacks ran in the order it enqueued them.
        for producer in 0..<producers {
            let mine = values.filter { $0 / 10_000 == producer }
            #expect(mine == (0..<perProducer).map { producer * 10_000 + $0 })
        }
        #expect(recorder.maxConcurrent.load(ordering: .sequentiallyConsistent) == 1)
        dispatcher.close()
    }

    @Test(arguments: [CallbackMode.thread, .manual])
    func callbackMayEnqueueAndQueryReentrantly(mode: CallbackMode) throws {
        let dispatcher = try CallbackDispatcher(mode: mode)
        let recorder = Recorder()
        dispatcher.enqueue {
            recorder.record(1)
            #expect(dispatcher.isCallbackThread)
            // Re-entrant use from a callback must not deadlock: enqueue, inspect, and a nested dispatch is refused (0).
            dispatcher.enqueue { recorder.record(3) }
            #expect(dispatcher.pendingCount >= 1)
            if mode == .manual { #expect((try? dispatcher.dispatch()) == 0) }
            recorder.record(2)
        }
        if mode == .manual { _ = try dispatcher.dispatch(); _ = try dispatcher.dispatch() }
        #expect(waitUntil { recorder.snapshot.count == 3 })
        #expect(recorder.snapshot == [1, 2, 3])
        #expect(!dispatcher.isCallbackThread)
        dispatcher.close()
    }

    @Test(arguments: [CallbackMode.thread, .manual])
    func closeDrainsQueuedCallbacksAndRejectsLaterOnes(mode: CallbackMode) throws {
        let dispatcher = try CallbackDispatcher(mode: mode)
        let recorder = Recorder()
        let gate = Atomic<Bool>(false)
        // In thread mode, hold the first callback so later ones are still queued at close.
        dispatcher.enqueue {
            while !gate.load(ordering: .sequentiallyConsistent) { usleep(100) }
            recorder.record(0)
        }
        for index in 1...50 { dispatcher.enqueue { recorder.record(index) } }
        gate.store(true, ordering: .sequentiallyConsistent)
        dispatcher.close()
        // Everything enqueued before close ran, in order, before close returned.
        #expect(recorder.snapshot == Array(0...50))
        #expect(dispatcher.enqueue { recorder.record(99) } == false)
        usleep(20_000)
        #expect(recorder.snapshot.count == 51)
        dispatcher.close()  // idempotent
    }

    @Test(arguments: [CallbackMode.thread, .manual])
    func closeFromInsideACallbackRunsTheRestBeforeReturning(mode: CallbackMode) throws {
        let dispatcher = try CallbackDispatcher(mode: mode)
        let recorder = Recorder()
        let closeReturned = Atomic<Bool>(false)
        let queued = Atomic<Bool>(false)
        dispatcher.enqueue {
            // In thread mode, wait until the two callbacks after this one are queued.
            while !queued.load(ordering: .sequentiallyConsistent) { usleep(100) }
            recorder.record(1)
            dispatcher.close()
            // The two callbacks queued after this one already ran, nested.
            #expect(recorder.snapshot == [1, 2, 3])
            closeReturned.store(true, ordering: .sequentiallyConsistent)
        }
        dispatcher.enqueue { recorder.record(2) }
        dispatcher.enqueue { recorder.record(3) }
        queued.store(true, ordering: .sequentiallyConsistent)
        if mode == .manual { _ = try dispatcher.dispatch() }
        #expect(waitUntil { closeReturned.load(ordering: .sequentiallyConsistent) })
        #expect(recorder.snapshot == [1, 2, 3])
    }

    @Test func manualModeEventFDIsReadableExactlyWhileCallbacksAreQueued() throws {
        let dispatcher = try CallbackDispatcher(mode: .manual)
        #expect(dispatcher.eventFD >= 0)
        #expect(!pollReadable(dispatcher.eventFD, timeoutMs: 0))
        let recorder = Recorder()
        for index in 0..<5 { dispatcher.enqueue { recorder.record(index) } }
        #expect(pollReadable(dispatcher.eventFD, timeoutMs: 0))
        #expect(try dispatcher.dispatch(max: 2) == 2)
        #expect(pollReadable(dispatcher.eventFD, timeoutMs: 0))  // 3 still queued
        #expect(try dispatcher.dispatch() == 3)
        #expect(!pollReadable(dispatcher.eventFD, timeoutMs: 0))
        #expect(recorder.snapshot == [0, 1, 2, 3, 4])
        // Another thread enqueues while we wait on the fd, as an event loop would.
        let producer = try NativeThread.start(name: "producer") {
            usleep(20_000)
            dispatcher.enqueue { recorder.record(5) }
        }
        #expect(pollReadable(dispatcher.eventFD, timeoutMs: 2000))
        #expect(try dispatcher.dispatch() == 1)
        producer.join()
        dispatcher.close()
    }

    @Test func dispatchIsRefusedInThreadMode() throws {
        let dispatcher = try CallbackDispatcher(mode: .thread)
        #expect(dispatcher.eventFD == -1)
        #expect(throws: ParleyError.self) { _ = try dispatcher.dispatch() }
        dispatcher.close()
    }
}

/// Minimal stand-in for concurrentPerform without Foundation: one pthread per iteration.
enum DispatchQueueless {
    static func concurrentPerform(iterations: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let threads = (0..<iterations).compactMap { index in try? NativeThread.start(name: "worker\(index)") { body(index) } }
        threads.forEach { $0.join() }
    }
}
