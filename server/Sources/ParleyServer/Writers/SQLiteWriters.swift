/// SQLite's writers: one at a time under the write lock here, in commit groups. A writer that
/// finds others waiting does not commit: it hands the lock to the next one, whose changes go
/// into the same transaction (in a savepoint of their own), and waits. The last writer of the
/// group — the one nobody waits behind, or the `groupLimit`th — commits for all of them: one
/// commit for the group instead of one each. It releases the lock once the COMMIT is in the
/// WAL and waits for the sync to the disk outside it, so the next group runs during that sync
/// (Storage/SQLite/WALSyncer.swift). Every member answers, and hands its events to the hub,
/// only once the commit is durable; if it fails, every member fails, and a failed COMMIT puts
/// the counters back where the group began. One server per file: every number is this server's.
final class SQLiteWriters: Writers, @unchecked Sendable {
    private let shared: SharedState
    private let database: any GroupCommitting
    let rules: any WriterRules = SQLiteWriterRules()
    private let writeLock = AsyncLock()
    /// The commit group writers are joining (guarded by `writeLock`).
    private var openGroup: CommitGroup? = nil

    init(shared: SharedState, database: any GroupCommitting) {
        self.shared = shared
        self.database = database
    }

    /// Reads the counters, from which the hub starts.
    func start() async throws {
        let counters = try await Counters.load(shared.database)
        shared.committed = counters
        shared.hub.start(deliveredThrough: counters.seq)
    }

    func catchUp(heardAt: ContinuousClock.Instant?) async throws {}
    func catchUpSoon(heardAt: ContinuousClock.Instant?) {}
    /// Writers prune the log in their own transactions (`EventStore.pruneEvents`).
    func pruneLog() async throws {}

    func write<T>(channel: String?, firstReads: FirstReads, _ body: (RequestState) async throws -> T) async throws -> T {
        await writeLock.lock()
        let group: CommitGroup
        if let open = openGroup {
            group = open
        } else {
            group = CommitGroup(countersBefore: shared.committed)
            openGroup = group
        }
        group.members += 1
        let writer = WriterScope(shared: shared, rules: rules, firstNumber: shared.committed.seq + 1,
                                 groupChannels: group.channels)
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await writer.request.handleWriting(group: database, body))
            // The next writer starts from this one's counters (put back if the group's commit fails).
            shared.committed = writer.request.counters
            group.succeeded.append(writer.request)
            group.channels.keep(writer.request.channelsWrittenInGroup)
        } catch {
            outcome = .failure(error)
        }
        let commitFailure: (any Error)?
        if writeLock.hasWaiters && group.members < WriterLimits.groupLimit {
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
            writer.failed()
            if case .failure(let error) = outcome { throw error }
            throw APIError.internal("storage commit failed: \(commitFailure.map { "\($0)" } ?? "")")
        }
        await writer.waitIfBacklogged(writer.committed().delivery)
        return result
    }
}

/// Writers sharing one SQLite commit: the counters as they stood before the first, to go back
/// to if the commit fails, and the members waiting for it.
final class CommitGroup: @unchecked Sendable {
    let countersBefore: Counters
    /// Guarded by the write lock.
    var members = 0
    /// The members whose changes the commit keeps (guarded by the write lock).
    var succeeded: [RequestState] = []
    /// The channels they wrote, for the members after them (guarded by the write lock).
    let channels = GroupChannels()
    /// The commit's outcome, for every member.
    let committed = CommitOutcome()

    init(countersBefore: Counters) { self.countersBefore = countersBefore }
}
