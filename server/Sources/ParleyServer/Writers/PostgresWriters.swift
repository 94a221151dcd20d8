import Foundation
import Synchronization

/// PostgreSQL's writers: side by side, on this server and across servers, each in a
/// transaction of its own. Those of one channel queue here first, then on the channel's lock
/// in the database (writers of other servers); writers of different channels do not wait for
/// each other. A writer that finds others of its channel queued behind it lets them continue
/// its transaction, and commits for all (ChannelBatch.swift). Once committed a writer hands
/// its events to the hub, which delivers them when the bound says no lower number can still
/// commit (StreamPositions.swift, CommitFollowUp.swift).
final class PostgresWriters: Writers, @unchecked Sendable {
    private let shared: SharedState
    private let positions: StreamPositions
    let rules: any WriterRules
    /// The floor, the announcement and the bound after commits.
    private let followUp: CommitFollowUp
    /// The writers of each channel on this server, one at a time, and their batches.
    private let channelWriters = ChannelWriters()

    init(shared: SharedState) {
        let positions = StreamPositions(node: shared.nodeId, order: shared.order)
        self.shared = shared
        self.positions = positions
        rules = PostgresWriterRules(positions: positions)
        followUp = CommitFollowUp(positions: positions, database: shared.database, executor: shared.hub.thread) {
            [hub = shared.hub] bound, heardAt in hub.advance(committedThrough: bound, heardAt: heardAt)
        }
    }

    /// Tests only (`PARLEY_TEST_HOOKS=1` with `PARLEY_TEST_PEER_READ_DELAY_MS`, at most
    /// 10,000): each read of other servers' events starts this much later, so that a test
    /// sees announcements arrive while one waits.
    private static let testReadDelay: UInt64 = {
        let environment = ProcessInfo.processInfo.environment
        guard environment["PARLEY_TEST_HOOKS"] == "1",
              let milliseconds = environment["PARLEY_TEST_PEER_READ_DELAY_MS"].flatMap({ UInt64($0) }) else { return 0 }
        return min(milliseconds, 10_000) * 1_000_000
    }()

    /// Registers this server among the writers and starts the hub from the bound: numbers come
    /// from sequences, the counters of `meta` are SQLite's.
    func start() async throws {
        _ = try await positions.register(shared.database)
        let bound = try await positions.bound(shared.database).bound
        shared.hub.start(deliveredThrough: bound, puller: { @Sendable ranges in await self.committedEvents(in: ranges) })
    }

    /// Before a stream resumes from an id this server has not delivered yet; after this
    /// server's commits and others' announcements; periodically, in case an announcement was
    /// missed (PeerFollower.swift).
    func catchUp(heardAt: ContinuousClock.Instant?) async throws {
        shared.hub.advance(committedThrough: try await positions.bound(shared.database).bound, heardAt: heardAt)
    }

    /// In the statement that follows commits (CommitFollowUp.swift).
    func catchUpSoon(heardAt: ContinuousClock.Instant?) {
        followUp.ask(announce: false, heardAt: heardAt)
    }

    /// The log's size as this server's last count saw it, plus this server's events committed
    /// since with a higher id than any it saw (an event can be told here after a count saw it).
    /// Other servers' events are counted by the pruning every second.
    private struct LogEstimate {
        /// nil: not counted yet.
        var size: Int?
        /// The newest id the last count saw.
        var countedThrough: Int64 = 0
        /// False when the last count may have missed some of this server's events: one at or
        /// below `countedThrough` told after it began (committed after its snapshot, or before
        /// and told after). Counted again once writes stop.
        var exact = true
        /// The ids of this server's events told while a count runs (nil: none runs).
        var addedDuringCount: [Int64]?
        /// Events told since the last pruning every second.
        var addedSinceTick = 0
    }
    private let estimate = Mutex(LogEstimate())
    /// How many other servers this server's last writer saw in `stream_writers` (nil: none
    /// read yet). With none, every event of the log is this server's.
    private let otherServersSeen = Mutex<Int?>(nil)

    private var pruneLimit: Int { shared.retention + shared.retention / 10 }

    /// True when this server's own writes may have taken the log past the retention and its
    /// tenth (the writer that passes it prunes before it answers).
    private func prunesAfter(_ events: [StoredEvent]) -> Bool {
        guard !events.isEmpty else { return false }
        let limit = pruneLimit
        return estimate.withLock { estimate in
            estimate.addedDuringCount?.append(contentsOf: events.map(\.id))
            estimate.addedSinceTick += events.count
            let new = events.count(where: { $0.id > estimate.countedThrough })
            if new < events.count { estimate.exact = false }
            guard let known = estimate.size else { return true }
            estimate.size = known + new
            return known + new > limit
        }
    }

    /// A pruning of this server is running: the writers that pass the limit meanwhile leave the
    /// log to it rather than count it again each (under load most commits would, while one
    /// pruning's statements run).
    private let pruning = Atomic<Bool>(false)

    /// Every second (PeerFollower.swift). Alone, a count would only confirm the estimate
    /// (about 2.5 ms of PostgreSQL's CPU for a log of 10,000 events); one that may have missed
    /// events is confirmed once this server's writes stop (while they go on, they prune).
    func pruneLog() async throws {
        let limit = pruneLimit
        let settled = estimate.withLock { estimate in
            defer { estimate.addedSinceTick = 0 }
            guard let size = estimate.size, size <= limit else { return false }
            return estimate.exact || estimate.addedSinceTick > 0
        }
        if settled && otherServersSeen.withLock({ $0 == 0 }) { return }
        try await prune()
    }

    /// Keeps the newest `retention` events of the log for resumes, letting it pass that by a
    /// tenth between prunings (every second, and after this server's writes pass it), and
    /// never past what this server delivered. Writers do not prune here as they do on SQLite:
    /// they write side by side, and the size of the log would be a row every one of them
    /// updates. One pruning at a time: events committed while it runs count toward the next.
    private func prune() async throws {
        guard pruning.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        defer { pruning.store(false, ordering: .releasing) }
        let retention = Int64(shared.retention), limit = Int64(pruneLimit)
        let delivered = shared.hub.deliveredThrough
        estimate.withLock { $0.addedDuringCount = [] }
        // A count stops past the limit (a bounded scan of the key); the newest id it saw tells
        // which of this server's events committed meanwhile it left out.
        let counted: (size: Int64, newest: Int64)
        do {
            counted = try await shared.database.write { db in
                let row = try await db.queryOne("""
                    SELECT (SELECT count(*) FROM (SELECT 1 FROM events LIMIT ?) e), (SELECT coalesce(max(id), 0) FROM events)
                    """, [.int(limit + 1)])
                let before = (size: row?.int(0) ?? 0, newest: row?.int(1) ?? 0)
                guard before.size > limit,
                      let boundary = try await db.queryOne("SELECT id FROM events ORDER BY id DESC OFFSET ? LIMIT 1",
                                                           [.int(retention)])?.int(0)
                else { return before }
                // What is left is counted in the delete's snapshot (an event at or below the
                // cut that commits after it is one `exact` leaves in doubt).
                let cut = min(boundary, delivered)
                let left = try await db.queryOne("""
                    WITH gone AS (DELETE FROM events WHERE id <= ?),
                         mark AS (INSERT INTO meta (name, value) VALUES ('pruned_through', ?)
                                  ON CONFLICT (name) DO UPDATE SET value = GREATEST(meta.value, excluded.value))
                    SELECT (SELECT count(*) FROM (SELECT 1 FROM events WHERE id > ? LIMIT ?) e),
                           (SELECT coalesce(max(id), 0) FROM events)
                    """, [.int(cut), .int(cut), .int(cut), .int(limit + 1)])
                return (left?.int(0) ?? limit + 1, left?.int(1) ?? before.newest)
            }
        } catch {
            estimate.withLock { $0.addedDuringCount = nil }
            throw error
        }
        estimate.withLock { estimate in
            let added = estimate.addedDuringCount ?? []
            estimate.addedDuringCount = nil
            estimate.size = Int(counted.size) + added.count(where: { $0 > counted.newest })
            estimate.countedThrough = counted.newest
            estimate.exact = !added.contains(where: { $0 <= counted.newest })
        }
    }

    /// Another server's events for the hub, with the renderer of the request that read them.
    /// The hub must not skip them, so a failure (the database unreachable) is retried until it
    /// passes, each pause longer, up to 2 s. Numbers at or below the retention boundary (read
    /// in the same snapshot) may have lost their events to pruning: the result says so.
    private func committedEvents(in ranges: [ClosedRange<Int64>]) async -> PulledEvents {
        if Self.testReadDelay > 0 { try? await Task.sleep(nanoseconds: Self.testReadDelay) }
        var pause: UInt64 = 50_000_000
        let lowest = ranges.map(\.lowerBound).min() ?? Int64.max
        while true {
            let reader = RequestState(shared: shared, rules: rules, readOnly: true)
            let hub = shared.hub
            if let (events, pruned) = try? await reader.handleReading(mode: .statementByStatement, { s in
                try await s.committedEvents(in: ranges, rendered: { hub.streamsAny(of: $0) })
            }) {
                let renderer = reader.stores.renderer
                return PulledEvents(events: events.map { HeldEvent(event: $0, renderer: renderer) }, pruned: lowest <= pruned)
            }
            try? await Task.sleep(nanoseconds: pause)
            pause = min(pause * 2, 2_000_000_000)
        }
    }

    func write<T>(channel: String?, firstReads: FirstReads, _ body: (RequestState) async throws -> T) async throws -> T {
        if let channel, let batch = await channelWriters.enter(channel, naming: firstReads.users) {
            return try await writeInBatch(batch, channel: channel, firstReads: firstReads, body)
        }
        let lead = channel.map { ChannelBatchLead(channel: $0, writers: channelWriters) }
        let writer = WriterScope(shared: shared, rules: rules, givenFrom: nil, groupChannels: nil)
        // Once handed on, the channel's turn is the batch's last member's to give up.
        func leave(_ failure: (any Error)?) {
            if let batch = lead?.batch { batch.committed.decide(failure) } else if let channel { channelWriters.leave(channel) }
        }
        let result: T
        do {
            result = try await writer.request.handleWriting(batchLead: lead, channelHint: channel, firstReads: firstReads, body)
        } catch {
            writer.failed()
            leave(error)
            throw error
        }
        let (changes, delivery) = writer.committed()
        // The channel's next writer goes on now: what follows waits for nothing of it.
        leave(nil)
        await afterCommit(writer, changes, delivery)
        return result
    }

    /// A writer that joined the open transaction of an earlier writer of its channel. It
    /// answers once that one committed for all; its own failure is its own.
    private func writeInBatch<T>(_ batch: ChannelBatch, channel: String, firstReads: FirstReads,
                                 _ body: (RequestState) async throws -> T) async throws -> T {
        // Numbers read for it by the member before it are below the floor it would have.
        let writer = WriterScope(shared: shared, rules: rules, givenFrom: batch.prefetched?.numbers.first,
                                 groupChannels: batch.channels)
        let outcome: Result<T, any Error>
        var leftBatch = false
        do {
            outcome = .success(try await writer.request.handleWriting(batch: batch, channelHint: channel,
                                                                      firstReads: firstReads, body))
            batch.channels.keep(writer.request.channelsWrittenInGroup)
        } catch {
            outcome = .failure(error)
            leftBatch = error is LeftBatch
        }
        let closed = channelWriters.memberDone(channel, batch)
        let commitFailure = await batch.committed.wait()
        if closed { channelWriters.leave(channel) }
        if leftBatch {
            writer.failed()
            ServerMetrics.shared.writeRetried()
            return try await write(channel: channel, firstReads: firstReads, body)
        }
        guard case .success(let result) = outcome, commitFailure == nil else {
            writer.failed()
            if case .failure(let error) = outcome { throw error }
            if let storage = commitFailure as? StorageError, storage.kind == .unavailable { throw storage }
            throw APIError.internal("storage commit failed: \(commitFailure.map { "\($0)" } ?? "")")
        }
        ServerMetrics.shared.writeBatched()
        writer.request.groupCommitted()
        let (changes, delivery) = writer.committed()
        await afterCommit(writer, changes, delivery)
        return result
    }

    /// After a writer's commit: this server's hub caught up to the bound the writer read with
    /// its numbers, so that its events go out now; the floor published and the other servers
    /// told, when there are any (or the writer read no bound); the log pruned if it grew past
    /// its retention; and a writer faster than the streams held until its events went out.
    ///
    /// A server alone neither publishes its floor nor announces its commits: a server that
    /// joins reads a floor that lags only while this one is busy, and this one, busy, takes
    /// numbers again soon, sees the other in `stream_writers` with them, and goes back to
    /// following its commits up (docs/ARCHITECTURE.md, *Order across servers*).
    private func afterCommit(_ writer: WriterScope, _ changes: CommittedChanges, _ delivery: Delivery) async {
        let own = writer.request.boundAfterNumbers
        if let own {
            shared.hub.advance(committedThrough: own.bound)
            otherServersSeen.withLock { $0 = own.otherServers }
        }
        if own.map({ $0.otherServers > 0 }) ?? true { followUp.ask(announce: !changes.taken.isEmpty) }
        if prunesAfter(changes.events) { try? await prune() }
        await writer.waitIfBacklogged(delivery)
    }
}
