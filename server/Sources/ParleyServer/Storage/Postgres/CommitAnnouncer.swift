// PostgreSQL: tells the other servers on the database that this one committed events,
// outside the data commits. A NOTIFY inside a commit takes PostgreSQL's cluster-wide
// notification lock from before that commit until after its WAL flush (postgres
// src/backend/commands/async.c, PreCommit_Notify): every notifying writer of the cluster would
// wait for every other. Announced apart, in a statement of its own that waits for no flush,
// the lock is held for microseconds, and the commits made while one announcement is on its
// way share the next.
//
// An announcement is only a wake-up (its payload names the server): the listeners read the
// bound (StreamPositions.swift) and the log. A lost one delays them until their next
// catch-up (PeerFollower.swift, every second).
import Synchronization

final class CommitAnnouncer: Sendable {
    /// Where announcements go.
    static let channel = "parley_events"
    /// The least time between two announcements: under load a server commits far more often
    /// than the others need waking.
    static let spacing: UInt64 = 2_000_000

    private let state = Mutex<(owed: Bool, sending: Bool)>((false, false))
    private let node: String
    private let database: any SQLDatabase

    init(node: String, database: any SQLDatabase) {
        self.node = node
        self.database = database
    }

    /// This server committed events: announced now, or by the announcement that follows the
    /// one on its way.
    func announce() {
        let starts = state.withLock { state -> Bool in
            state.owed = true
            guard !state.sending else { return false }
            state.sending = true
            return true
        }
        if starts { Task { await self.send() } }
    }

    private func send() async {
        while state.withLock({ state -> Bool in
            guard state.owed else {
                state.sending = false
                return false
            }
            state.owed = false
            return true
        }) {
            let sql = "SELECT set_config('synchronous_commit', 'off', true), pg_notify('\(Self.channel)', ?)"
            if (try? await database.readStatementByStatement({ db in try await db.query(sql, [.text(node)]) })) != nil {
                ServerMetrics.shared.announcementSent()
            }
            // Still sending: the commits of the pause share the next announcement.
            try? await Task.sleep(nanoseconds: Self.spacing)
        }
    }
}
