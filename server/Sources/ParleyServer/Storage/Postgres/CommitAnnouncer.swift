// PostgreSQL: tells the other servers on the database what this one committed, outside the
// data commits. A NOTIFY inside a commit takes PostgreSQL's cluster-wide notification lock
// from before that commit until after its WAL flush (postgres src/backend/commands/async.c,
// PreCommit_Notify), so every committing writer of the cluster that notifies waits for every
// other. Announced apart, in a statement of its own that waits for no flush, the lock is held
// for microseconds, and commits made while an announcement is on its way share the next one.
//
// An announcement is a hint ("NODE SEQ": committed through SEQ, WriteTurn.swift): the other
// servers read what they deliver from the log. A lost one only delays them until their next
// catch-up (PeerFollower.swift, every second).
import Logging
import Synchronization

final class CommitAnnouncer: Sendable {
    private struct State {
        /// The highest number committed, and the highest announced.
        var committed: Int64 = 0
        var announced: Int64 = 0
        /// An announcement is on its way (one at a time).
        var sending = false
    }

    private let state = Mutex(State())
    private let node: String
    private let send: @Sendable (String) async throws -> Void
    private let logger: Logger

    /// `send` delivers one payload to the listening servers.
    init(node: String, logger: Logger, send: @escaping @Sendable (String) async throws -> Void) {
        self.node = node
        self.logger = logger
        self.send = send
    }

    /// This server committed every number through `seq`: announced now, or by the
    /// announcement that follows the one on its way.
    func committed(through seq: Int64) {
        let starts = state.withLock { state -> Bool in
            state.committed = max(state.committed, seq)
            guard !state.sending else { return false }
            state.sending = true
            return true
        }
        if starts { Task { await self.announceWhatIsNew() } }
    }

    private func announceWhatIsNew() async {
        while let seq = nextToAnnounce() {
            do {
                try await send(WriteTurn.announcement(node: node, through: seq))
                ServerMetrics.shared.announcementSent()
            } catch {
                logger.warning("announcing commits through \(seq) failed (the other servers catch up within a second): \(error)")
            }
        }
    }

    /// The number to announce next, nil (and no longer sending) when all are announced.
    private func nextToAnnounce() -> Int64? {
        state.withLock { state in
            guard state.committed > state.announced else {
                state.sending = false
                return nil
            }
            state.announced = state.committed
            return state.committed
        }
    }
}
