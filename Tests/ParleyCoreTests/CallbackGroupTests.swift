import Glibc
import Synchronization
import Testing
@testable import ParleyCore

private func readable(_ fd: Int32, timeoutMs: Int32 = 0) -> Bool {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    return poll(&descriptor, 1, timeoutMs) == 1 && descriptor.revents & Int16(POLLIN) != 0
}

/// What each client's callbacks recorded, in the order they ran.
private final class Runs: Sendable {
    let entries = Locked<[(client: Int, value: Int)]>([])

    func record(_ client: Int, _ value: Int) { entries.withLock { $0.append((client, value)) } }

    func values(of client: Int) -> [Int] { entries.withLock { $0.filter { $0.client == client }.map(\.value) } }
    var clients: [Int] { entries.withLock { $0.map(\.client) } }
    var count: Int { entries.withLock { $0.count } }
}

private func attachedClients(_ count: Int, to group: CallbackGroup) throws -> [CallbackDispatcher] {
    try (0..<count).map { _ in
        let dispatcher = try CallbackDispatcher(mode: .manual)
        try dispatcher.setGroup(group)
        return dispatcher
    }
}

@Suite struct CallbackGroupTests {
    @Test func theGroupsFDIsReadableExactlyWhileAnAttachedClientHasCallbacksWaiting() throws {
        let group = try CallbackGroup()
        let clients = try attachedClients(3, to: group)
        let runs = Runs()
        #expect(!readable(group.eventFD))
        clients[1].enqueue { runs.record(1, 0) }
        clients[2].enqueue { runs.record(2, 0) }
        #expect(readable(group.eventFD))
        #expect(group.dispatch(max: 1) == 1)
        #expect(readable(group.eventFD))  // client 2 still waits
        // The client's own dispatch empties it: the group's fd follows.
        #expect(try clients[2].dispatch() == 1)
        #expect(!readable(group.eventFD))
        #expect(group.dispatch() == 0)  // its stale entry runs nothing
        #expect(runs.clients == [1, 2])
        // A client attached with callbacks waiting counts at once.
        let late = try CallbackDispatcher(mode: .manual)
        late.enqueue { runs.record(3, 0) }
        try late.setGroup(group)
        #expect(readable(group.eventFD))
        #expect(group.dispatch() == 1)
        #expect(!readable(group.eventFD))
        // Detached with callbacks waiting: no longer the group's.
        late.enqueue { runs.record(3, 1) }
        try late.setGroup(nil)
        #expect(!readable(group.eventFD))
        #expect(group.dispatch() == 0)
        #expect(try late.dispatch() == 1)
        (clients + [late]).forEach { $0.close() }
        try group.close()
    }

    @Test func aLimitedDispatchTakesClientsInTurnAndKeepsEachOnesOrder() throws {
        let group = try CallbackGroup()
        let clients = try attachedClients(3, to: group)
        let runs = Runs()
        for value in 0..<100 {
            for (index, client) in clients.enumerated() { client.enqueue { runs.record(index, value) } }
        }
        #expect(group.dispatch(max: 48) == 48)
        // 16 each, client after client.
        for index in 0..<3 { #expect(runs.values(of: index) == Array(0..<16)) }
        #expect(Array(runs.clients.prefix(32)) == Array(repeating: 0, count: 16) + Array(repeating: 1, count: 16))
        #expect(group.dispatch(max: 5) == 5)
        #expect(runs.values(of: 0) == Array(0..<21))
        // 0: everything waiting now.
        #expect(group.dispatch() == 300 - 53)
        for index in 0..<3 { #expect(runs.values(of: index) == Array(0..<100)) }
        #expect(!readable(group.eventFD))
        clients.forEach { $0.close() }
        try group.close()
    }

    @Test func aClientDestroyedInsideItsCallbackDuringAGroupDispatchDrainsNestedAndLeaves() throws {
        let group = try CallbackGroup()
        let clients = try attachedClients(2, to: group)
        let runs = Runs()
        let sawRestBeforeCloseReturned = Atomic<Bool>(false)
        clients[0].enqueue {
            runs.record(0, 0)
            clients[0].close()
            sawRestBeforeCloseReturned.store(runs.values(of: 0) == [0, 1, 2], ordering: .sequentiallyConsistent)
        }
        clients[0].enqueue { runs.record(0, 1) }
        clients[0].enqueue { runs.record(0, 2) }
        clients[1].enqueue { runs.record(1, 0) }
        #expect(group.memberCount == 2)
        #expect(group.dispatch(max: 1) == 1)  // the nested ones are not counted
        #expect(sawRestBeforeCloseReturned.current == true)
        #expect(group.memberCount == 1)
        #expect(group.dispatch() == 1)
        #expect(runs.values(of: 1) == [0])
        #expect(!readable(group.eventFD))
        // Refused while a client is attached; the group stays usable.
        #expect(throws: ParleyError.self) { try group.close() }
        #expect(!group.isClosed)
        clients[1].close()
        try group.close()
        #expect(throws: ParleyError.self) { try group.close() }
    }

    @Test func attachingIsForManualModeAndOneGroupAtATime() throws {
        let group = try CallbackGroup(), other = try CallbackGroup()
        let threaded = try CallbackDispatcher(mode: .thread)
        #expect(throws: ParleyError.self) { try threaded.setGroup(group) }
        let manual = try CallbackDispatcher(mode: .manual)
        try manual.setGroup(group)
        try manual.setGroup(group)  // again: nothing changes
        #expect(group.memberCount == 1)
        #expect(throws: ParleyError.self) { try manual.setGroup(other) }
        try manual.setGroup(nil)
        try manual.setGroup(other)
        #expect(group.memberCount == 0 && other.memberCount == 1)
        manual.close()
        #expect(other.memberCount == 0)
        #expect(throws: ParleyError.self) { try manual.setGroup(group) }  // closed
        try group.close()
        try other.close()
        let closedGroupClient = try CallbackDispatcher(mode: .manual)
        #expect(throws: ParleyError.self) { try closedGroupClient.setGroup(group) }
        threaded.close()
        closedGroupClient.close()
    }

    @Test func anEventLoopServesFiftyClientsFedFromSeveralThreadsThroughOneFD() throws {
        let group = try CallbackGroup()
        let clients = try attachedClients(50, to: group)
        let runs = Runs()
        let perClient = 60
        let total = clients.count * perClient
        let loop = try NativeThread.start(name: "event-loop") {
            var idle = 0
            while runs.count < total && idle < 1000 {
                if readable(group.eventFD, timeoutMs: 10) {
                    idle = 0
                    _ = group.dispatch(max: 64)
                } else {
                    idle += 1
                }
            }
        }
        DispatchQueueless.concurrentPerform(iterations: 5) { producer in
            for value in 0..<perClient {
                for index in stride(from: producer, to: clients.count, by: 5) {
                    clients[index].enqueue { runs.record(index, value) }
                }
            }
        }
        loop.join()
        #expect(runs.count == total)
        for index in clients.indices { #expect(runs.values(of: index) == Array(0..<perClient)) }
        #expect(!readable(group.eventFD))
        #expect(group.waitingClientCount == 0)
        clients.forEach { $0.close() }
        try group.close()
    }

    @Test func closeWaitsForAGroupDispatchRunningTheClientOnAnotherThread() throws {
        let group = try CallbackGroup()
        let client = try attachedClients(1, to: group)[0]
        let runs = Runs()
        let inside = Atomic<Bool>(false)
        let release = Atomic<Bool>(false)
        client.enqueue {
            inside.store(true, ordering: .sequentiallyConsistent)
            while !release.current { usleep(1000) }
            runs.record(0, 0)
        }
        client.enqueue { runs.record(0, 1) }
        let loop = try NativeThread.start(name: "group-dispatch") { _ = group.dispatch(max: 1) }
        while !inside.current { usleep(1000) }
        let closed = Atomic<Bool>(false)
        let closer = try NativeThread.start(name: "closer") {
            client.close()
            closed.store(true, ordering: .sequentiallyConsistent)
        }
        usleep(50_000)
        #expect(closed.current == false)
        release.store(true, ordering: .sequentiallyConsistent)
        closer.join()
        loop.join()
        #expect(runs.values(of: 0) == [0, 1])
        #expect(group.memberCount == 0)
        #expect(!readable(group.eventFD))
        try group.close()
    }
}
