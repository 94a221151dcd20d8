import Foundation

/// PostgreSQL: writers of one channel sharing one transaction (`PostgresWriters.write`).
///
/// Writers of a channel run one at a time, and each would otherwise pay a commit (a WAL
/// flush) while the others wait. The writer that finds others queued behind it for its
/// channel keeps its transaction open, writes without committing and hands its session to
/// them: each runs in a savepoint of its own on that session, so its failure is undone alone
/// and answered alone. The last one (nobody queued behind it, or the `WriterLimits.groupLimit`th)
/// closes the batch: when it writes knowing that, the batch's COMMIT goes out with its last
/// statement; otherwise the first commits for all. Every member answers only once it did.
///
/// A writer that knows another member follows it reads, with its last statement, what that
/// one's first statement would (`Prefetched`): the follower, whose channel the batch holds
/// locked, then needs no statement of its own before it writes.
final class ChannelBatch: @unchecked Sendable {
    let channel: String
    /// The first writer's session, inside its open transaction.
    let session: PostgresSession
    private let writers: ChannelWriters
    /// The channels the members wrote, as they left them, for the members after them.
    let channels = GroupChannels()
    /// Writers in the batch, the first included (changed only by the holder of the channel's
    /// writer lock, as is everything below).
    var members = 1
    /// Read for the next member by the one before it.
    var prefetched: Prefetched? = nil
    /// Succeeded once every member had its turn: the first writer then commits.
    let closed = CommitOutcome()
    /// The commit's outcome, for every member.
    let committed = CommitOutcome()

    init(channel: String, session: PostgresSession, writers: ChannelWriters) {
        self.channel = channel
        self.session = session
        self.writers = writers
    }

    /// The member holding the turn will hand it on to another member (`ChannelWriters.memberDone`).
    var nextMemberCertain: Bool { writers.othersWaiting(channel) && members + 1 < WriterLimits.groupLimit }

    /// The users the writers queued for the channel name in their bodies.
    var usersNamedByWaiting: [String] { writers.usersNamedByWaiting(channel) }

    /// What a writer's first statement reads after it locks its channel
    /// (`ChannelStore.lockChannels`): event numbers, a message id, and the versions of the users
    /// the channel shows. Read with the last statement of the member before, in the same
    /// statement as one another, as the first statement would.
    struct Prefetched {
        var numbers: [Int64]
        var messageId: Int64
        var userVersions: [String: Int64]
        /// The bound read after the numbers were taken (`WriterBound`).
        var bound: WriterBound

        /// The column of the last statement that reads them (`numbers` event numbers, a message
        /// id, the versions of `users`, then the bound of server `node`), as one JSON text
        /// (`parley_take_numbers`, StreamPositions.swift).
        static func expression(node: String, numbers: Int, users: [String]) -> SQLExpression {
            SQLExpression(sql: "parley_take_numbers(?, ?, ?)",
                          binds: [.text(node), .int(Int64(numbers)), .text(JSON.array(users.map { .string($0) }).serialized())])
        }

        init?(_ value: SQLValue?) {
            guard case .text(let text) = value, case .object(let object)? = try? JSONParser.parse(text),
                  case .array(let numbers)? = object["e"], case .int(let messageId)? = object["m"],
                  case .object(let users)? = object["u"], case .int(let bound)? = object["b"],
                  case .int(let handedOut)? = object["h"], case .int(let others)? = object["o"] else { return nil }
            self.numbers = numbers.compactMap { if case .int(let n) = $0 { n } else { nil } }.sorted()
            self.messageId = messageId
            var versions: [String: Int64] = [:]
            for (id, version) in users.entries { if case .int(let v) = version { versions[id] = v } }
            userVersions = versions
            self.bound = WriterBound(bound: bound, handedOut: handedOut, otherServers: Int(others))
        }
    }

    /// Runs one member's `attempt` in a savepoint of the batch's transaction: undone alone if
    /// it throws, and run again (in a new savepoint) when it failed in a way that may pass
    /// next time (a user changed meanwhile, too few event numbers taken).
    ///
    /// A member that waited for a lock in a cycle (PostgreSQL's deadlock or serialization
    /// failure) leaves the batch instead (`LeftBatch`): the batch holds the locks its earlier
    /// members took, in no global order, so the other side of the cycle may be waiting for one
    /// of them and would meet the member again at each try. It runs alone once the batch
    /// committed.
    func run<T>(_ attempt: (any SQLSession) async throws -> T) async throws -> T {
        var retriesLeft = PostgresDatabase.writeRetries
        while true {
            try await session.savepoint()
            do {
                let value = try await attempt(session)
                // Sent now, so that a failure is this member's, not the next one's.
                try await session.sendHeld()
                return value
            } catch {
                try await session.rollbackToSavepoint()
                guard let storage = error as? StorageError, storage.kind == .retryable else { throw error }
                if storage.sqlState != nil { throw LeftBatch(cause: storage) }
                guard retriesLeft > 0 else { throw error }
                retriesLeft -= 1
                ServerMetrics.shared.writeRetried()
            }
        }
    }
}

/// A member of a batch met a lock cycle and left the batch (`ChannelBatch.run`).
struct LeftBatch: Error, CustomStringConvertible {
    let cause: StorageError
    var description: String { "left its batch of writes after: \(cause)" }
}

/// An outcome many wait for and one decides, once: nil when it succeeded, else why not.
final class CommitOutcome: @unchecked Sendable {
    private let mutex = NSLock()
    private var decided = false
    private var failure: (any Error)? = nil
    private var waiters: [CheckedContinuation<(any Error)?, Never>] = []

    func wait() async -> (any Error)? {
        await withCheckedContinuation { (waiter: CheckedContinuation<(any Error)?, Never>) in
            let known: (done: Bool, failure: (any Error)?) = mutex.withLock {
                if decided { return (true, failure) }
                waiters.append(waiter)
                return (false, nil)
            }
            if known.done { waiter.resume(returning: known.failure) }
        }
    }

    func decide(_ failure: (any Error)?) {
        let waiting: [CheckedContinuation<(any Error)?, Never>] = mutex.withLock {
            guard !decided else { return [] }
            decided = true
            self.failure = failure
            defer { waiters = [] }
            return waiters
        }
        for waiter in waiting { waiter.resume(returning: failure) }
    }
}

/// PostgreSQL: the writers of each channel on this server, one at a time, and the batch each
/// channel has open (`ChannelBatch`).
final class ChannelWriters: @unchecked Sendable {
    private let locks = KeyedAsyncLocks()
    private let open = NSLock()
    private var batches: [String: ChannelBatch] = [:]

    /// The users the writers waiting for each channel's turn name in their bodies
    /// (`FirstReads.users`), counted per writer.
    private var usersNamedByWaiting: [String: [String: Int]] = [:]

    /// Waits for the channel's turn; returns the batch the writer joins, if one is open.
    /// `naming`: the users its body names, whose versions the member before it may read for it.
    func enter(_ channel: String, naming users: [String]) async -> ChannelBatch? {
        if !users.isEmpty { open.withLock { for id in users { usersNamedByWaiting[channel, default: [:]][id, default: 0] += 1 } } }
        await locks.lock(channel)
        return open.withLock {
            if !users.isEmpty, var named = usersNamedByWaiting[channel] {
                for id in users { named[id] = named[id].flatMap { $0 > 1 ? $0 - 1 : nil } }
                usersNamedByWaiting[channel] = named.isEmpty ? nil : named
            }
            return batches[channel]
        }
    }

    /// The users named by the writers waiting for the channel's turn (at most `limit`), for the
    /// versions a batch's member reads for the next (`ChannelBatch.Prefetched`).
    func usersNamedByWaiting(_ channel: String, limit: Int = 64) -> [String] {
        open.withLock { usersNamedByWaiting[channel].map { Array($0.keys.sorted().prefix(limit)) } ?? [] }
    }

    /// The holder of the channel's turn has writers queued behind it.
    func othersWaiting(_ channel: String) -> Bool { locks.hasWaiters(channel) }

    /// The first writer opens `batch` and gives the turn to the next one.
    func handOn(_ channel: String, _ batch: ChannelBatch) {
        open.withLock { batches[channel] = batch }
        locks.unlock(channel)
    }

    /// A member had its turn: the next one queued takes it, or (none queued, or the batch is
    /// full) the batch closes and the first writer commits. Returns true when this member
    /// closed it: it keeps the turn until the commit (`leave`).
    func memberDone(_ channel: String, _ batch: ChannelBatch) -> Bool {
        batch.members += 1
        if !batch.session.hasEnded, locks.hasWaiters(channel), batch.members < WriterLimits.groupLimit {
            locks.unlock(channel)
            return false
        }
        open.withLock { batches[channel] = nil }
        batch.closed.decide(nil)
        return true
    }

    func leave(_ channel: String) { locks.unlock(channel) }
}

/// The first writer of a channel's turn: it opens a batch if others are queued once it has
/// written (`RequestState.handleWriting`).
final class ChannelBatchLead: @unchecked Sendable {
    let channel: String
    private let writers: ChannelWriters
    /// The batch it opened, if it did.
    private(set) var batch: ChannelBatch? = nil

    init(channel: String, writers: ChannelWriters) {
        self.channel = channel
        self.writers = writers
    }

    func othersWaiting() -> Bool { writers.othersWaiting(channel) }

    /// The users the writers queued for the channel name in their bodies.
    var usersNamedByWaiting: [String] { writers.usersNamedByWaiting(channel) }

    /// Read for the first member by the first writer's last statement.
    var prefetched: ChannelBatch.Prefetched? = nil

    /// Its transaction, handed on, must not run again alone: the others' work went with it.
    func checkNotHandedOn() throws {
        if batch != nil { throw StorageError("the transaction of a batch of writes failed after it was handed on") }
    }

    /// Hands the open transaction on to the writers queued behind it and waits until they had
    /// their turns; the caller then commits for all. Only a PostgreSQL transaction is handed on.
    func handOn(_ session: any SQLSession, channels: [(url: String, entry: CachedChannel?)]) async throws {
        guard othersWaiting(), let session = session as? PostgresSession else { return }
        try await session.beginTransaction()
        let batch = ChannelBatch(channel: channel, session: session, writers: writers)
        batch.channels.keep(channels)
        batch.prefetched = prefetched
        self.batch = batch
        writers.handOn(channel, batch)
        _ = await batch.closed.wait()
    }
}
