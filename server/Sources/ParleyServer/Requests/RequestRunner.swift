import Foundation
import Synchronization

/// Runs requests. Read requests take no lock: they run in their own snapshots beside the
/// writers. On SQLite write requests run one at a time under the lock here, in commit groups;
/// on PostgreSQL writers of different channels run side by side (`writeSideBySide`). A writer
/// registers in the write order (Events/WriteOrder.swift) before it takes a number and, once
/// committed, hands its events to the hub, which delivers them in id order.
final class RequestRunner: @unchecked Sendable {
    private let writeLock = AsyncLock()
    let shared: SharedState
    /// Queued deliveries past which a writer waits for its own.
    static let deliveryBacklog = 32

    init(shared: SharedState) {
        self.shared = shared
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

    /// Starts the event hub (at start): on SQLite from the counters it reads, on PostgreSQL,
    /// which numbers from sequences, from the bound once this server is registered.
    func load() async throws {
        guard let positions = shared.positions else {
            let counters = try await Counters.load(shared.database)
            shared.committed = counters
            shared.hub.start(deliveredThrough: counters.seq)
            return
        }
        _ = try await positions.register(shared.database)
        let bound = try await positions.bound(shared.database).bound
        shared.hub.start(deliveredThrough: bound, puller: { @Sendable ranges in await self.committedEvents(in: ranges) })
    }

    /// PostgreSQL: makes the hub deliver what every server committed up to now (before a
    /// stream resumes from an id this server has not delivered yet; after this server's
    /// commits and others' announcements; periodically, in case an announcement was missed).
    func catchUp(heardAt: ContinuousClock.Instant? = nil) async throws {
        guard let positions = shared.positions else { return }
        shared.hub.advance(committedThrough: try await positions.bound(shared.database).bound, heardAt: heardAt)
    }

    /// Asks for a catch-up soon (`heardAt`: after another server's announcement heard then),
    /// in the statement that follows commits (Storage/Postgres/CommitFollowUp.swift).
    func catchUpSoon(heardAt: ContinuousClock.Instant? = nil) {
        followUp?.ask(announce: false, heardAt: heardAt)
    }

    /// PostgreSQL: the floor, the announcement and the bound after commits.
    private lazy var followUp: CommitFollowUp? = shared.positions.map { positions in
        CommitFollowUp(positions: positions, database: shared.database, executor: shared.hub.thread) { [hub = shared.hub] bound, heardAt in
            hub.advance(committedThrough: bound, heardAt: heardAt)
        }
    }

    /// The log's size as this server last counted it, plus the events it wrote since (nil:
    /// not counted yet). Other servers' events are counted by the pruning every second.
    private let estimatedLogSize = Mutex<(size: Int?, added: Int)>((nil, 0))

    /// PostgreSQL: true when this server's own writes may have taken the log past the
    /// retention and its tenth (the writer that passes it prunes before it answers).
    private func prunesAfter(_ added: Int) -> Bool {
        guard added > 0 else { return false }
        let retention = shared.retention
        return estimatedLogSize.withLock { estimate in
            estimate.added += added
            guard let known = estimate.size else { return true }
            estimate.size = known + added
            return known + added > retention + retention / 10
        }
    }

    /// PostgreSQL: keeps the newest `retention` events of the log for resumes, letting it pass
    /// that by a tenth between prunings (every second, PeerFollower.swift, and after this
    /// server's writes pass it), and never past what this server delivered. Writers do not
    /// prune on PostgreSQL as they do on SQLite: they write side by side, and the size of the
    /// log would be a row every one of them updates.
    func pruneLog() async throws {
        guard shared.positions != nil else { return }
        let retention = Int64(shared.retention)
        let delivered = shared.hub.deliveredThrough
        // Events this server adds while the count runs may be missing from it: they are added
        // to the count (some twice, which only prunes a little early).
        let addedBefore = estimatedLogSize.withLock { $0.added }
        let kept: Int64 = try await shared.database.write { db in
            // Counted up to the limit only (a bounded scan of the key).
            let limit = retention + retention / 10
            guard let counted = try await db.queryOne("SELECT count(*) FROM (SELECT 1 FROM events LIMIT ?) e",
                                                      [.int(limit + 1)])?.int(0) else { return 0 }
            guard counted > limit,
                  let boundary = try await db.queryOne("SELECT id FROM events ORDER BY id DESC OFFSET ? LIMIT 1",
                                                       [.int(retention)])?.int(0)
            else { return counted }
            let cut = min(boundary, delivered)
            let dropped = try await db.execute("DELETE FROM events WHERE id <= ?", [.int(cut)])
            try await db.execute("""
                INSERT INTO meta (name, value) VALUES ('pruned_through', ?)
                ON CONFLICT (name) DO UPDATE SET value = GREATEST(meta.value, excluded.value)
                """, [.int(cut)])
            return counted - Int64(dropped)
        }
        estimatedLogSize.withLock { $0.size = Int(kept) + ($0.added - addedBefore) }
    }

    /// Another server's events for the hub, with the renderer of the request that read them.
    /// The hub must not skip them, so a failure (the database unreachable) is retried until it
    /// passes, each pause longer, up to 2 s. Numbers at or below the retention boundary (read
    /// in the same snapshot) may have lost their events to pruning: the result says so.
    private func committedEvents(in ranges: [ClosedRange<Int64>]) async -> PulledEvents {
        if RequestRunner.testReadDelay > 0 { try? await Task.sleep(nanoseconds: RequestRunner.testReadDelay) }
        var pause: UInt64 = 50_000_000
        let lowest = ranges.map(\.lowerBound).min() ?? Int64.max
        while true {
            let reader = RequestState(shared: shared, readOnly: true)
            if let (events, pruned) = try? await reader.handleReading(statementByStatement: true, { s in
                try await s.committedEvents(in: ranges)
            }) {
                let renderer = reader.stores.renderer
                return PulledEvents(events: events.map { HeldEvent(event: $0, renderer: renderer) }, pruned: lowest <= pruned)
            }
            try? await Task.sleep(nanoseconds: pause)
            pause = min(pause * 2, 2_000_000_000)
        }
    }

    /// `readOnly`: the request only reads the database (a GET). One that changes something
    /// all the same (a first login) runs again as a write request. `channel`: the channel the
    /// request names in its path, if any (`RequestState.handleWriting`).
    /// `sendsMessage`: the request most likely stores one new message (`RequestState.handleWriting`).
    /// `readsNow`: the request answers with a changelog's "now" (`RequestTransaction.currentSeq`); on
    /// PostgreSQL the hub first catches up with every commit made so far, so that the token
    /// covers the writes the client made before it asked.
    func run<T>(readOnly: Bool = false, channel: String? = nil, sendsMessage: Bool = false, readsNow: Bool = false,
                _ body: (RequestState) async throws -> T) async throws -> T {
        if readsNow { try await catchUp() }
        if readOnly, let result = try await RequestState(shared: shared, readOnly: true).handleReading(body) {
            return result
        }
        let result = try await write(channel: channel, sendsMessage: sendsMessage, body)
        // Committed: the webhook calls it may have queued can go.
        shared.webhooks.wake()
        return result
    }

    private func write<T>(channel: String?, sendsMessage: Bool, _ body: (RequestState) async throws -> T) async throws -> T {
        if let group = shared.database as? any GroupCommitting { return try await writeInGroup(group, body) }
        // The other backend, PostgreSQL, always has stream positions (SharedState.init).
        return try await writeSideBySide(channel: channel, sendsMessage: sendsMessage, body)
    }

    // MARK: writers side by side (PostgreSQL)

    /// The writers of each channel on this server, one at a time, and their batches.
    private let channelWriters = ChannelWriters()

    /// PostgreSQL: writers run side by side, each in a transaction of its own. Those of one
    /// channel queue here first, then on the channel's lock in the database (writers of other
    /// servers); writers of different channels do not wait for each other. A writer that
    /// finds others of its channel queued behind it lets them continue its transaction, and
    /// commits for all (Requests/ChannelBatch.swift). Each registers in the write order before it
    /// takes a number (Events/WriteOrder.swift);
    /// once committed it hands its events to the hub, which delivers them when the bound says
    /// no lower number can still commit.
    private func writeSideBySide<T>(channel: String?, sendsMessage: Bool,
                                    _ body: (RequestState) async throws -> T) async throws -> T {
        if let channel, let batch = await channelWriters.enter(channel) {
            return try await writeInBatch(batch, channel: channel, sendsMessage: sendsMessage, body)
        }
        let lead = channel.map { ChannelBatchLead(channel: $0, writers: channelWriters) }
        let ticket = shared.order.beginWriter()
        let request = RequestState(shared: shared, readOnly: false)
        // Once handed on, the channel's turn is the batch's last member's to give up.
        func leave(_ failure: (any Error)?) {
            if let batch = lead?.batch { batch.committed.decide(failure) } else if let channel { channelWriters.leave(channel) }
        }
        let result: T
        do {
            result = try await request.handleWriting(batchLead: lead, channelHint: channel, sendsMessage: sendsMessage, body)
        } catch {
            _ = shared.hub.finishWriter(ticket, nil)
            leave(error)
            throw error
        }
        shared.pushHold.hold(request.heldPushes)
        let changes = request.committedChanges
        let delivery = shared.hub.finishWriter(ticket, changes)
        // The channel's next writer goes on now: what follows waits for nothing of it.
        leave(nil)
        await afterCommit(changes, delivery)
        return result
    }

    /// PostgreSQL: a writer that joined the open transaction of an earlier writer of its
    /// channel. It answers once that one committed for all; its own failure is its own.
    private func writeInBatch<T>(_ batch: ChannelBatch, channel: String, sendsMessage: Bool,
                                 _ body: (RequestState) async throws -> T) async throws -> T {
        // Numbers read for it by the member before it are below the floor it would have.
        let ticket = shared.order.beginWriter(atMost: (batch.prefetched?.numbers.first).map { $0 - 1 } ?? .max)
        let request = RequestState(shared: shared, readOnly: false)
        request.groupChannels = batch.channels
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await request.handleWriting(batch: batch, channelHint: channel, sendsMessage: sendsMessage, body))
            batch.channels.keep(request.channelsWrittenInGroup)
        } catch {
            outcome = .failure(error)
        }
        let closed = channelWriters.memberDone(channel, batch)
        let commitFailure = await batch.committed.wait()
        if closed { channelWriters.leave(channel) }
        guard case .success(let result) = outcome, commitFailure == nil else {
            _ = shared.hub.finishWriter(ticket, nil)
            if case .failure(let error) = outcome { throw error }
            if let storage = commitFailure as? StorageError, storage.kind == .unavailable { throw storage }
            throw APIError.internal("storage commit failed: \(commitFailure.map { "\($0)" } ?? "")")
        }
        ServerMetrics.shared.writeBatched()
        request.groupCommitted()
        let changes = request.committedChanges
        shared.pushHold.hold(request.heldPushes)
        let delivery = shared.hub.finishWriter(ticket, changes)
        await afterCommit(changes, delivery)
        return result
    }

    /// PostgreSQL, after a writer's commit: the floor published, this server's hub caught up,
    /// the other servers told, the log pruned if it grew past its retention, and a writer
    /// faster than the streams held until its events went out.
    private func afterCommit(_ changes: CommittedChanges, _ delivery: Delivery) async {
        followUp?.ask(announce: !changes.taken.isEmpty)
        if prunesAfter(changes.events.count) { try? await pruneLog() }
        if shared.hub.backlog > RequestRunner.deliveryBacklog { await delivery.wait() }
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
    /// commit for the group instead of one each. It releases the lock once the COMMIT is in
    /// the WAL and waits for the sync to the disk outside it, so the next group runs during
    /// that sync (WALSyncer.swift). Every member answers, and hands its events to the hub,
    /// only once the commit is durable; if it fails, every member fails, and a failed COMMIT
    /// puts the counters back where the group began.
    private func writeInGroup<T>(_ database: any GroupCommitting, _ body: (RequestState) async throws -> T) async throws -> T {
        await writeLock.lock()
        let group: CommitGroup
        if let open = openGroup {
            group = open
        } else {
            group = CommitGroup(countersBefore: shared.committed)
            openGroup = group
        }
        group.members += 1
        let ticket = shared.order.beginWriter(firstNumber: shared.committed.seq + 1)
        let request = RequestState(shared: shared, readOnly: false)
        request.groupChannels = group.channels
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await request.handleWriting(group: database, body))
            group.succeeded.append(request)
            group.channels.keep(request.channelsWrittenInGroup)
        } catch {
            outcome = .failure(error)
        }
        let commitFailure: (any Error)?
        if writeLock.hasWaiters && group.members < RequestRunner.groupLimit {
            writeLock.unlock()
            commitFailure = await group.committed.wait()
        } else {
            openGroup = nil
            var commit: UInt64? = nil
            var failure: (any Error)? = nil
            do {
                commit = try await database.commitGroup()
            } catch {
                shared.committed = group.countersBefore
                failure = error
            }
            // Committed, not yet durable: the next writers may build on it (they append behind
            // it), so the cache holds it now; nobody answers or reads it before the sync.
            if commit != nil { for member in group.succeeded { member.groupCommitted() } }
            writeLock.unlock()
            if let commit {
                do { try await database.durable(commit) } catch { failure = error }
            }
            commitFailure = failure
            group.committed.decide(commitFailure)
        }
        guard case .success(let result) = outcome, commitFailure == nil else {
            _ = shared.hub.finishWriter(ticket, nil)
            if case .failure(let error) = outcome { throw error }
            throw APIError.internal("storage commit failed: \(commitFailure.map { "\($0)" } ?? "")")
        }
        shared.pushHold.hold(request.heldPushes)
        let delivery = shared.hub.finishWriter(ticket, request.committedChanges)
        if shared.hub.backlog > RequestRunner.deliveryBacklog { await delivery.wait() }
        return result
    }

    /// A read request that must not write (a stream's replay, run on the hub's queue).
    func read<T>(_ body: (RequestState) async throws -> T) async throws -> T {
        guard let result = try await RequestState(shared: shared, readOnly: true).handleReading(body) else {
            throw APIError.internal("a read-only request changed something")
        }
        return result
    }
}

/// Writers sharing one SQLite commit (`RequestRunner.writeInGroup`): the counters as they stood
/// before the first, to go back to if the commit fails, and the members waiting for it.
final class CommitGroup: @unchecked Sendable {
    let countersBefore: Counters
    /// Guarded by the service's write lock.
    var members = 0
    /// The members whose changes the commit keeps (guarded by the write lock).
    var succeeded: [RequestState] = []
    /// The channels they wrote, for the members after them (guarded by the write lock).
    let channels = GroupChannels()
    /// The commit's outcome, for every member.
    let committed = CommitOutcome()

    init(countersBefore: Counters) { self.countersBefore = countersBefore }
}

/// The channels a commit group's members wrote, as they left them (`RequestState.groupChannels`).
/// Read and written only by the member holding the service's write lock.
final class GroupChannels: @unchecked Sendable {
    private var entries: [String: CachedChannel] = [:]

    func entry(_ url: String) -> CachedChannel? { entries[url] }

    func keep(_ written: [(url: String, entry: CachedChannel?)]) {
        for (url, entry) in written { entries[url] = entry }
    }
}
