import Foundation

/// Runs requests. Read requests take no lock: they run in their own snapshots beside the
/// writers. On SQLite write requests run one at a time (the lock; SQLite has one writer); on
/// PostgreSQL several run at once, each holding the database's locks on what it changes
/// (`ServerState.lockForWriting`). A writer registers with the hub before it takes a number
/// and, once committed, hands its events over; the hub delivers them in id order.
final class Service: @unchecked Sendable {
    private let writeLock = AsyncLock()
    /// PostgreSQL: the writers that may run at once, so that some pooled connections are
    /// always left to readers and streams.
    private let writerSlots: AsyncPool<Int>
    let shared: SharedState
    /// Queued deliveries past which a writer waits for its own.
    static let deliveryBacklog = 32

    init(shared: SharedState, concurrentWriters: Int = 12) {
        self.shared = shared
        writerSlots = AsyncPool(Array(0..<max(1, concurrentWriters)))
    }

    /// Reads the counters and starts the event hub (at start).
    func load() async throws {
        let counters = try await Counters.load(shared.database)
        shared.committed = counters
        if shared.concurrentWriters {
            shared.sharedCounters = SharedCounters(counters)
            shared.setEventCount(counters.storedEvents)
        }
        shared.hub.start(deliveredThrough: counters.seq)
    }

    /// PostgreSQL: writers of one channel (as named by their route) queue here, before they
    /// begin a transaction, rather than in the database, where each waiter would hold a
    /// transaction and a pooled connection and every hand-over costs a wake-up of several
    /// processes (P7 into one channel: 229 msg/s with the queue in the database, see
    /// docs/BENCHMARKS.md). The database's locks stay what makes them correct.
    private let channelQueues = KeyedAsyncLocks()

    /// `readOnly`: the request only reads the database (a GET). One that changes something
    /// all the same (a first login) runs again as a write request. `channel`: the channel the
    /// route names, if any.
    func run<T>(readOnly: Bool = false, channel: String? = nil, _ body: (ServerState) async throws -> T) async throws -> T {
        if readOnly, let result = try await ServerState(shared: shared, readOnly: true).handleReading(body) {
            return result
        }
        if let channel, shared.concurrentWriters {
            return try await channelQueues.withLock(channel) { try await write(body) }
        }
        return try await write(body)
    }

    private func write<T>(_ body: (ServerState) async throws -> T) async throws -> T {
        if let group = shared.database as? any GroupCommitting { return try await writeInGroup(group, body) }
        let counters = shared.sharedCounters
        let slot: Int? = counters != nil ? await writerSlots.borrow() : nil
        if slot == nil { await writeLock.lock() }
        let release = { if let slot { self.writerSlots.giveBack(slot) } else { self.writeLock.unlock() } }
        let ticket = shared.hub.beginWriter { counters?.nextSeq ?? self.shared.committed.seq + 1 }
        let request = ServerState(shared: shared, readOnly: false)
        let result: T
        do {
            result = try await request.handleWriting(body)
        } catch {
            _ = shared.hub.finishWriter(ticket, nil)
            release()
            throw error
        }
        let delivery = shared.hub.finishWriter(ticket, request.committedChanges)
        release()
        if counters != nil, let drop = shared.addedEvents(request.committedChanges.events.count) {
            await pruneEvents(drop)
        }
        // Writers faster than the streams wait for their events to go out (not holding a
        // lock), so that the queue, and the finished requests it holds, stays bounded: at most
        // `deliveryBacklog` plus one per writer in flight.
        if shared.hub.backlog > Service.deliveryBacklog { await delivery.wait() }
        return result
    }

    // MARK: group commit (SQLite)

    /// The commit group writers are joining (guarded by `writeLock`).
    private var openGroup: CommitGroup? = nil
    /// Writers one commit covers at most, so that the first one's answer does not wait long.
    static let groupLimit = 16

    /// SQLite: writers still run one at a time, but a writer that finds others waiting does
    /// not commit: it hands the lock to the next one, whose changes go into the same
    /// transaction (in a savepoint of their own), and waits. The last writer of the group —
    /// the one nobody waits behind, or the `groupLimit`th — commits for all of them: one
    /// fsync for the group instead of one each. Every member answers, and hands its events
    /// to the hub, only after that commit; if it fails, every member fails and the counters
    /// go back to where the group began.
    private func writeInGroup<T>(_ database: any GroupCommitting, _ body: (ServerState) async throws -> T) async throws -> T {
        await writeLock.lock()
        let group: CommitGroup
        if let open = openGroup {
            group = open
        } else {
            group = CommitGroup(countersBefore: shared.committed)
            openGroup = group
        }
        group.members += 1
        let ticket = shared.hub.beginWriter { self.shared.committed.seq + 1 }
        let request = ServerState(shared: shared, readOnly: false)
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await request.handleWriting(group: database, body))
        } catch {
            outcome = .failure(error)
        }
        let commitFailure: (any Error)?
        if writeLock.hasWaiters && group.members < Service.groupLimit {
            writeLock.unlock()
            commitFailure = await group.outcome()
        } else {
            openGroup = nil
            do {
                try await database.commitGroup()
                commitFailure = nil
            } catch {
                shared.committed = group.countersBefore
                commitFailure = error
            }
            writeLock.unlock()
            group.finish(commitFailure)
        }
        guard case .success(let result) = outcome, commitFailure == nil else {
            _ = shared.hub.finishWriter(ticket, nil)
            if case .failure(let error) = outcome { throw error }
            throw APIError.internal("storage commit failed: \(commitFailure.map { "\($0)" } ?? "")")
        }
        request.groupCommitted()
        let delivery = shared.hub.finishWriter(ticket, request.committedChanges)
        if shared.hub.backlog > Service.deliveryBacklog { await delivery.wait() }
        return result
    }

    /// PostgreSQL: drops the oldest `count` events, in a transaction of its own (one writer at
    /// a time prunes). A failure leaves them for the next try.
    private func pruneEvents(_ count: Int) async {
        var dropped = 0
        do {
            dropped = try await shared.database.write { tx in try await ServerState.pruneOldest(count, tx) }
        } catch {
            dropped = 0
        }
        shared.prunedEvents(dropped)
    }

    /// A read request that must not write (a stream's replay, run on the hub's queue).
    func read<T>(_ body: (ServerState) async throws -> T) async throws -> T {
        guard let result = try await ServerState(shared: shared, readOnly: true).handleReading(body) else {
            throw APIError.internal("a read-only request changed something")
        }
        return result
    }
}

/// Writers sharing one SQLite commit (`Service.writeInGroup`): the counters as they stood
/// before the first, to go back to if the commit fails, and the members waiting for it.
final class CommitGroup: @unchecked Sendable {
    let countersBefore: Counters
    /// Guarded by the service's write lock.
    var members = 0
    private let mutex = NSLock()
    private var finished = false
    private var failure: (any Error)? = nil
    private var waiters: [CheckedContinuation<(any Error)?, Never>] = []

    init(countersBefore: Counters) { self.countersBefore = countersBefore }

    /// Waits for the commit: nil when it succeeded, else why it failed.
    func outcome() async -> (any Error)? {
        await withCheckedContinuation { (waiter: CheckedContinuation<(any Error)?, Never>) in
            let result: (done: Bool, failure: (any Error)?) = mutex.withLock {
                if finished { return (true, failure) }
                waiters.append(waiter)
                return (false, nil)
            }
            if result.done { waiter.resume(returning: result.failure) }
        }
    }

    func finish(_ failure: (any Error)?) {
        let waiting = mutex.withLock {
            finished = true
            self.failure = failure
            defer { waiters = [] }
            return waiters
        }
        for waiter in waiting { waiter.resume(returning: failure) }
    }
}
