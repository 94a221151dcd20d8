// PostgreSQL: what follows this server's commits, and other servers' announcements, in one
// statement: the server's floor published if it moved (StreamPositions.swift), the other
// servers told that it committed, and the bound read, which lets the hub deliver.
//
// The announcement goes outside the data commits. A NOTIFY inside a commit takes PostgreSQL's
// cluster-wide notification lock from before that commit until after its WAL flush (postgres
// src/backend/commands/async.c, PreCommit_Notify): every notifying writer of the cluster would
// wait for every other. Here it is in a statement of its own that waits for no flush
// (`parley_publish_floor` turns synchronous_commit off for it), so the lock is held for
// microseconds. An announcement is only a wake-up (its payload names the server): the
// listeners read the bound and the log. A lost one delays them until their next catch-up
// (PeerFollower.swift, every second).
//
// One statement runs at a time, at most one per `spacing`; the asks made meanwhile share the
// next, so under load a server sends far fewer of these than it commits.
import Synchronization

final class CommitFollowUp: Sendable {
    /// Where announcements go.
    static let channel = "parley_events"
    /// The least time between the starts of two statements.
    static let spacing: Duration = .milliseconds(2)

    private struct Asked {
        var any = false
        /// This server committed events since the last announcement.
        var announce = false
        /// When the first unanswered announcement of another server was heard.
        var heardAt: ContinuousClock.Instant? = nil
        var running = false
    }
    private let asked = Mutex(Asked())
    private let positions: StreamPositions
    private let database: any SQLDatabase
    private let executor: ThreadExecutor
    /// Hands the bound read to the hub.
    private let advance: @Sendable (_ bound: Int64, _ heardAt: ContinuousClock.Instant?) -> Void

    init(positions: StreamPositions, database: any SQLDatabase, executor: ThreadExecutor,
         advance: @escaping @Sendable (_ bound: Int64, _ heardAt: ContinuousClock.Instant?) -> Void) {
        self.positions = positions
        self.database = database
        self.executor = executor
        self.advance = advance
    }

    /// After this server's commit (`announce`: it numbered events), or after another server's
    /// announcement heard at `heardAt`.
    func ask(announce: Bool, heardAt: ContinuousClock.Instant? = nil) {
        let starts = asked.withLock { asked -> Bool in
            asked.any = true
            if announce { asked.announce = true }
            if asked.heardAt == nil { asked.heardAt = heardAt }
            guard !asked.running else { return false }
            asked.running = true
            return true
        }
        if starts { Task(executorPreference: executor) { await self.run() } }
    }

    private func run() async {
        var lastStart: ContinuousClock.Instant? = nil
        while true {
            if let lastStart {
                let since = lastStart.duration(to: .now)
                if since < Self.spacing { try? await Task.sleep(for: Self.spacing - since) }
            }
            let job: (announce: Bool, heardAt: ContinuousClock.Instant?)? = asked.withLock { asked in
                guard asked.any else {
                    asked.running = false
                    return nil
                }
                defer { asked = Asked(running: true) }
                return (asked.announce, asked.heardAt)
            }
            guard let job else { return }
            lastStart = .now
            await followUp(announce: job.announce, heardAt: job.heardAt)
        }
    }

    /// The follow-up statement: the bound, and the floor and the announcement when there are
    /// some. Each of the four texts is prepared (HotStatements.swift).
    static func statementSQL(publishesFloor: Bool, announces: Bool) -> String {
        var columns = ["b.bound", "b.handed_out"]
        // Both return void, which the storage layer does not read: as text, empty.
        if publishesFloor { columns.append("parley_publish_floor(?, ?, ?)::text") }
        if announces { columns.append("pg_notify('\(channel)', ?)::text") }
        return "SELECT \(columns.joined(separator: ", ")) FROM parley_stream_bound(?) b"
    }

    static let statementTexts = [false, true].flatMap { floor in
        [false, true].map { announce in statementSQL(publishesFloor: floor, announces: announce) }
    }

    private func followUp(announce: Bool, heardAt: ContinuousClock.Instant?) async {
        let floor = positions.order.floorToPublish()
        var binds: [SQLValue] = []
        if let floor { binds += [.text(positions.node), .int(positions.busyKey), .int(floor)] }
        if announce { binds.append(.text(positions.node)) }
        binds.append(.text(positions.node))
        let sql = Self.statementSQL(publishesFloor: floor != nil, announces: announce)
        guard let row = try? await database.readStatementByStatement({ db in try await db.queryOne(sql, binds) }) else {
            // The periodic catch-up (PeerFollower.swift) reads the bound again; the floor and
            // the announcement go with the next statement that has them.
            if announce { asked.withLock { $0.announce = true } }
            return
        }
        if let floor { positions.order.published(floor) }
        if announce { ServerMetrics.shared.announcementSent() }
        positions.order.saw(row.int(1))
        advance(row.int(0), heardAt)
    }
}
