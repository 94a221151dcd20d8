// PostgreSQL: what follows this server's commits in one statement: the server's floor
// published if it moved (StreamPositions.swift), the bound read, which lets the hub deliver,
// and the other servers told that it committed, with what each needs to compute its own bound
// (`Announcement`), so that they deliver without a statement of their own. An announcement of
// a server of an older version names only that server: the listener then reads its bound
// with the same statement.
//
// The announcement goes outside the data commits. A NOTIFY inside a commit takes PostgreSQL's
// cluster-wide notification lock from before that commit until after its WAL flush (postgres
// src/backend/commands/async.c, PreCommit_Notify): every notifying writer of the cluster would
// wait for every other. Here it is in a statement of its own that waits for no flush
// (`parley_follow_up` turns synchronous_commit off for it), so the lock is held for
// microseconds. A lost announcement delays the listeners until their next catch-up
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

    /// The follow-up statement (`parley_follow_up`, prepared: HotStatements.swift): the bound,
    /// and the floor and the announcement when there are some.
    static let statementSQL = "SELECT bound, handed_out FROM parley_follow_up(?, ?, ?, ?)"
    static let statementTexts = [statementSQL]

    private func followUp(announce: Bool, heardAt: ContinuousClock.Instant?) async {
        let floor = positions.order.floorToPublish()
        let binds: [SQLValue] = [.text(positions.node), .int(positions.busyKey), .int(floor ?? -1), .bool(announce)]
        guard let row = try? await database.readStatementByStatement({ db in try await db.queryOne(Self.statementSQL, binds) }) else {
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

extension CommitFollowUp {
    /// Migration 30: the follow-up as one function. It publishes the floor (unless `new_floor`
    /// is negative), then reads the bound as `parley_stream_bound` does, each statement seeing
    /// the commits made before it began. With `announce` its notification carries the
    /// sequence's last value and the floor of every busy server, this one included
    /// (`Announcement`). It waits for no WAL flush: a floor lost in a crash is one the server no
    /// longer needs, and an announcement is not data.
    static let definitions = [
        """
        CREATE OR REPLACE FUNCTION parley_follow_up(me TEXT, key BIGINT, new_floor BIGINT, announce BOOLEAN)
            RETURNS TABLE (bound BIGINT, handed_out BIGINT)
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            last BIGINT;
            result BIGINT;
            busy TEXT := '';
            other RECORD;
        BEGIN
            PERFORM set_config('synchronous_commit', 'off', true);
            IF new_floor >= 0 THEN PERFORM parley_publish_floor(me, key, new_floor); END IF;
            SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END INTO last FROM parley_event_ids s;
            result := last;
            FOR other IN SELECT w.node, w.lock_key, w.floor FROM stream_writers w WHERE w.floor < last LOOP
                IF pg_try_advisory_lock(other.lock_key) THEN
                    PERFORM pg_advisory_unlock(other.lock_key);
                ELSE
                    IF other.node <> me AND other.floor < result THEN result := other.floor; END IF;
                    busy := busy || ' ' || other.node || ':' || other.floor;
                END IF;
            END LOOP;
            IF announce THEN PERFORM pg_notify('\(channel)', me || ' ' || last || busy); END IF;
            RETURN QUERY SELECT result, last;
        END $$
        """,
    ]

    /// What an announcement tells: the server that committed, the sequence's last value and
    /// the floors of the servers busy when it was read. A listening server's bound is that
    /// value lowered to the floors of the busy servers other than itself: what
    /// `parley_stream_bound` would have read for it at that moment, in a statement that
    /// committed before the notification was delivered, so the listener's read of the log
    /// after it sees every commit that bound counts (docs/ARCHITECTURE.md, *Order across
    /// servers*). An announcement of a server of an older version names only the server.
    struct Announcement: Equatable {
        let node: String
        let handedOut: Int64?
        let busyFloors: [String: Int64]

        init(_ payload: String) {
            let words = payload.split(separator: " ")
            node = words.first.map(String.init) ?? ""
            var handedOut = words.count > 1 ? Int64(words[1]) : nil
            var floors: [String: Int64] = [:]
            for word in words.dropFirst(2) {
                guard let colon = word.lastIndex(of: ":"), let floor = Int64(word[word.index(after: colon)...]) else {
                    handedOut = nil
                    break
                }
                floors[String(word[..<colon])] = floor
            }
            self.handedOut = handedOut
            busyFloors = handedOut == nil ? [:] : floors
        }

        /// The bound of server `listener` (nil: the announcement does not tell it).
        func bound(for listener: String) -> Int64? {
            guard let handedOut else { return nil }
            return busyFloors.filter { $0.key != listener }.values.reduce(handedOut, min)
        }
    }
}
