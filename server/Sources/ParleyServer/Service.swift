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
