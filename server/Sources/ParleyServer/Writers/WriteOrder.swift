import Synchronization

/// The one record of this server's writers in flight and of the event numbers it knows were
/// handed out. Both bounds that order delivery come from it: how far this server's streams
/// may go past its own writers (EventHub's `finishWriter` and `advance`), and, on PostgreSQL,
/// the floor the server publishes for the other servers (StreamPositions.swift,
/// Writers/CommitFollowUp.swift). A writer registers before it takes any number and
/// is removed by the hub once it finished (committed or failed).
final class WriteOrder: Sendable {
    private struct State {
        /// The highest number known handed out (taken by this server, or read as the
        /// sequence's last value on PostgreSQL): every number taken from now on is higher.
        var handedOut: Int64 = 0
        /// Unfinished writers, each with the lowest number it may take.
        var writers: [Int: Int64] = [:]
        var nextWriter = 1
        /// PostgreSQL: the floor committed in `stream_writers`.
        var published: Int64 = -1
        /// `waitForWritersInFlight` callers, each with the last ticket it waits for.
        var waiters: [(through: Int, done: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    /// Registers a writer whose numbers start at `firstNumber` at the lowest (SQLite: the
    /// next number of the counters, read under the write lock).
    func beginWriter(firstNumber: Int64) -> Int {
        state.withLock { s in
            let ticket = s.nextWriter
            s.nextWriter += 1
            s.writers[ticket] = firstNumber
            return ticket
        }
    }

    /// PostgreSQL: registers a writer that takes its numbers from the sequence, so above every
    /// number known handed out; `atMost`: lower, for a writer given numbers taken before it
    /// began (Writers/ChannelBatch.swift): every number it holds is above it.
    func beginWriter(atMost: Int64 = .max) -> Int {
        state.withLock { s in
            let ticket = s.nextWriter
            s.nextWriter += 1
            s.writers[ticket] = min(s.handedOut, atMost) + 1
            return ticket
        }
    }

    /// Called by the hub as the writer finishes, under the hub's lock. A `waitForWritersInFlight`
    /// caller resumed here takes the hub's lock next, so the hub has queued the writer's events by then.
    func endWriter(_ ticket: Int) {
        let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.writers.removeValue(forKey: ticket)
            guard !s.waiters.isEmpty else { return [] }
            let lowest = s.writers.keys.min() ?? .max
            let ready = s.waiters.filter { $0.through < lowest }.map(\.done)
            s.waiters.removeAll { $0.through < lowest }
            return ready
        }
        for done in ready { done.resume() }
    }

    /// Returns once every writer registered before the call has finished (committed or
    /// failed), so that what they held back is handed to the hub.
    func waitForWritersInFlight() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let finished = state.withLock { s -> Bool in
                let last = s.nextWriter - 1
                guard !s.writers.isEmpty else { return true }
                s.waiters.append((last, done))
                return false
            }
            if finished { done.resume() }
        }
    }

    /// Unfinished writers.
    var writersInFlight: Int { state.withLock { $0.writers.count } }

    /// The lowest number an unfinished writer may still commit (nil: none is in flight).
    var lowestInFlight: Int64? { state.withLock { $0.writers.values.min() } }

    /// Numbers seen handed out (taken by this server, or read as the sequence's last value).
    func saw(_ number: Int64) {
        state.withLock { $0.handedOut = max($0.handedOut, number) }
    }

    /// PostgreSQL: the floor to publish, if it moved since the last publication: below every
    /// number an unfinished writer holds or will take. Readers cap what they deliver at it
    /// only while this server is busy, so a floor that lags only delays them.
    func floorToPublish() -> Int64? {
        state.withLock { s in
            let floor = min(s.handedOut, (s.writers.values.min() ?? .max) - 1)
            return floor > s.published ? floor : nil
        }
    }

    /// `floor` is committed in `stream_writers`.
    func published(_ floor: Int64) {
        state.withLock { $0.published = max($0.published, floor) }
    }
}
