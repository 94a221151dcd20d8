// PostgreSQL: who is online when several servers share the database (docs/ARCHITECTURE.md
// "Requests and locks", *What is per user holds across servers*). Each server records, per user, how many event streams
// it has open (table `presence`, migration 6) and that it is running (`server_nodes`, a
// heartbeat). A stream opens only if the user's streams on every running server stay within
// the limit; `is_online` and `last_seen_at` account for the other servers' streams, which
// this server learns from notifications, checked against a full read of the other servers'
// rows every `fullReadEvery` heartbeats and after every reconnection of the listening
// connection (a notification can be missed only while it is away). The heartbeats between
// read which servers are alive, a few rows. A server killed without a word stops counting
// once its heartbeat is older than `aliveWindow`, and its rows go after `forgetAfter`.
import Foundation

final class ClusterPresence: @unchecked Sendable {
    /// Where a server announces a user's first stream on it ("NODE 1 USER") and its last
    /// stream closing ("NODE 0 USER").
    static let channel = "parley_presence"
    static let heartbeatMillis: Int64 = 2_000
    /// A server whose heartbeat is older than this is taken for dead: its streams no longer count.
    static let aliveWindow: Int64 = 10_000
    /// A dead server's rows are removed (and its users' `last_seen_at` set) after this.
    static let forgetAfter: Int64 = 60_000
    /// Heartbeats between full reads of the other servers' rows (30 s).
    static let fullReadEvery = 15
    /// The class of the per-user transaction lock that serializes stream admissions (two-key
    /// advisory locks are a space apart from one-key locks such as a server's busy lock).
    private static let admissionLockClass: Int32 = 0x5052_4553  // "PRES"
    /// The class of the per-server lock: shared by admissions and releases, exclusive for a
    /// rewrite of the server's rows.
    private static let nodeLockClass: Int32 = 0x5052_4E4F  // "PRNO"

    let node: String
    private let database: any SQLDatabase
    private let mutex = NSLock()
    /// This server's streams per user: the truth its `presence` rows should say. Changed
    /// inside the transaction that changes the rows, while that transaction holds this
    /// server's node lock shared, so a rewrite (which holds it exclusively) reads a `local`
    /// that matches every committed row.
    private var local: [String: Int] = [:]
    /// A write of this server's rows failed or its outcome is unknown: the next heartbeat
    /// writes them whole from `local`.
    private var stale = false
    /// The users with streams on other running servers, and on which.
    private var remote: [String: Set<String>] = [:]
    /// Heartbeats since the last full read; at `fullReadEvery` or more the next one reads all.
    private var beatsSinceFullRead = Int.max
    /// Notifications heard while a full read runs, replayed in order onto its result: the
    /// read's snapshot may predate them.
    private var heardDuringFullRead: [String]?
    /// The other servers running at the last heartbeat (nil before the first).
    private var runningServers: Set<String>? = nil

    /// What a heartbeat found: the users of forgotten servers, with when those servers were
    /// last seen, and the other servers that began or stopped running since the last one.
    struct Beat {
        var forgotten: [(userId: String, seenAt: Int64)]
        var serversFound: [String] = []
        var serversLost: [String] = []
    }

    init(node: String, database: any SQLDatabase) {
        self.node = node
        self.database = database
    }

    func isOnlineElsewhere(_ userId: String) -> Bool { mutex.withLock { remote[userId] != nil } }

    /// Takes this server's node lock shared and the user's admission lock, for one admission
    /// or release: admissions of one user queue across servers, and a rewrite of this server's
    /// rows waits for the admissions and releases running here (and they for it).
    private static let lockUserSQL = """
        SELECT pg_advisory_xact_lock_shared(\(nodeLockClass), hashtext(?)), \
        pg_advisory_xact_lock(\(admissionLockClass), hashtext(?))
        """

    /// Admits one more stream of the user on this server, or throws 429 when the user's
    /// streams on every running server would pass `limit`. Three round trips with BEGIN and
    /// COMMIT: the lock, then one statement that counts, checks and announces.
    func admit(_ userId: String, limit: Int) async throws {
        let now = nowMillis()
        let node = self.node
        var counted = false
        do {
            try await database.write { db in
                if counted {
                    // An earlier attempt counted, then its transaction rolled back (deadlock).
                    counted = false
                    mutex.withLock {
                        let left = (local[userId] ?? 1) - 1
                        local[userId] = left > 0 ? left : nil
                    }
                }
                try await db.execute(Self.lockUserSQL, [.text(node), .text(userId)])
                // The SELECT sees the snapshot before the INSERT: it adds this server's new
                // count to the other running servers' counts. The announcement goes out only
                // if the transaction commits, so a refused admission announces nothing.
                guard let row = try await db.queryOne("""
                    WITH here AS (
                        INSERT INTO presence (node_id, user_id, streams) VALUES (?, ?, 1)
                        ON CONFLICT (node_id, user_id) DO UPDATE SET streams = presence.streams + 1
                        RETURNING streams),
                    elsewhere AS (
                        SELECT coalesce(sum(p.streams), 0) AS streams FROM presence p
                        JOIN server_nodes n ON n.node_id = p.node_id
                        WHERE p.user_id = ? AND p.node_id <> ? AND n.seen_at > ?)
                    SELECT here.streams + elsewhere.streams,
                           CASE WHEN here.streams = 1 AND here.streams + elsewhere.streams <= ?
                                THEN pg_notify('\(Self.channel)', ?) END IS NULL
                    FROM here, elsewhere
                    """, [.text(node), .text(userId), .text(userId), .text(node), .int(now - Self.aliveWindow),
                          .int(Int64(limit)), .text("\(node) 1 \(userId)")])
                else { throw StorageError("counting a user's event streams returned no row") }
                let open = row.int(0)
                if open > Int64(limit) {
                    throw APIError(status: 429, code: 400120,
                                   message: "\"\(userId)\" already has \(open - 1) open event streams (at most \(limit)).")
                }
                mutex.withLock { local[userId, default: 0] += 1 }
                counted = true
            }
        } catch {
            if counted {
                // Counted here, but the commit failed or its outcome is unknown: the stream
                // does not open, and the rows are written whole at the next heartbeat.
                mutex.withLock {
                    let left = (local[userId] ?? 1) - 1
                    local[userId] = left > 0 ? left : nil
                    stale = true
                }
            }
            throw error
        }
    }

    /// One stream of the user on this server closed (it was admitted).
    func release(_ userId: String) async {
        let node = self.node
        var counted = false
        do {
            try await database.write { db in
                try await db.execute(Self.lockUserSQL, [.text(node), .text(userId)])
                if !counted {
                    counted = true
                    mutex.withLock {
                        let left = (local[userId] ?? 1) - 1
                        local[userId] = left > 0 ? left : nil
                    }
                }
                let left = try await db.queryOne("""
                    UPDATE presence SET streams = streams - 1 WHERE node_id = ? AND user_id = ? RETURNING streams
                    """, [.text(node), .text(userId)])?.int(0)
                if let left, left <= 0 {
                    try await db.execute("DELETE FROM presence WHERE node_id = ? AND user_id = ?", [.text(node), .text(userId)])
                    try await Self.notify("\(node) 0 \(userId)", db)
                }
            }
        } catch {
            // The stream is closed whatever the database says; `local` says so already.
            mutex.withLock {
                if !counted {
                    let left = (local[userId] ?? 1) - 1
                    local[userId] = left > 0 ? left : nil
                }
                stale = true
            }
        }
    }

    /// The listening connection (re)connected: notifications may have been missed meanwhile.
    func requireFullRead() { mutex.withLock { beatsSinceFullRead = Int.max } }

    /// A notification from `channel`.
    func heard(_ payload: String) {
        mutex.withLock {
            heardDuringFullRead?.append(payload)
            apply(payload)
        }
    }

    /// Under `mutex`.
    private func apply(_ payload: String) {
        let parts = payload.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] != node[...] else { return }
        let sender = String(parts[0]), userId = String(parts[2])
        if parts[1] == "1" {
            remote[userId, default: []].insert(sender)
        } else {
            remote[userId]?.remove(sender)
            if remote[userId]?.isEmpty == true { remote[userId] = nil }
        }
    }

    /// Says this server runs (and writes its rows whole if a write failed), forgets the
    /// servers dead for `forgetAfter`, reads which other servers are running, dropping the
    /// users of the others, and reads who has streams on them (every `fullReadEvery` beats,
    /// and after `requireFullRead`).
    func heartbeat() async throws -> Beat {
        let now = nowMillis()
        let node = self.node
        var beat = Beat(forgotten: try await writeOwnRows(now: now))
        let alive = try await database.read { db in
            try await db.query("SELECT node_id FROM server_nodes WHERE node_id <> ? AND seen_at > ?",
                               [.text(node), .int(now - Self.aliveWindow)])
        }
        let running = Set(alive.map { $0.text(0) })
        mutex.withLock {
            for (userId, servers) in remote where !servers.isSubset(of: running) {
                let left = servers.intersection(running)
                remote[userId] = left.isEmpty ? nil : left
            }
            let before = runningServers ?? []
            beat.serversFound = running.subtracting(before).sorted()
            beat.serversLost = before.subtracting(running).sorted()
            runningServers = running
        }
        let readsAll: Bool = mutex.withLock {
            guard beatsSinceFullRead >= Self.fullReadEvery else {
                beatsSinceFullRead += 1
                return false
            }
            beatsSinceFullRead = 0
            heardDuringFullRead = []
            return true
        }
        if readsAll {
            do {
                let rows = try await database.read { db in
                    try await db.query("""
                        SELECT p.node_id, p.user_id FROM presence p JOIN server_nodes n ON n.node_id = p.node_id
                        WHERE p.node_id <> ? AND n.seen_at > ? AND p.streams > 0
                        """, [.text(node), .int(now - Self.aliveWindow)])
                }
                var others: [String: Set<String>] = [:]
                for row in rows { others[row.text(1), default: []].insert(row.text(0)) }
                mutex.withLock {
                    remote = others
                    for payload in heardDuringFullRead ?? [] { apply(payload) }
                    heardDuringFullRead = nil
                }
            } catch {
                mutex.withLock {
                    heardDuringFullRead = nil
                    beatsSinceFullRead = Int.max
                }
                throw error
            }
        }
        return beat
    }

    /// The heartbeat's write: see `heartbeat`.
    private func writeOwnRows(now: Int64) async throws -> [(userId: String, seenAt: Int64)] {
        let node = self.node
        let mustRewrite = mutex.withLock { stale }
        var rewritten = false
        let forgotten: [(userId: String, seenAt: Int64)]
        do {
            forgotten = try await database.write { db -> [(userId: String, seenAt: Int64)] in
            try await db.execute("""
                INSERT INTO server_nodes (node_id, started_at, seen_at) VALUES (?, ?, ?)
                ON CONFLICT (node_id) DO UPDATE SET seen_at = excluded.seen_at
                """, [.text(node), .int(now), .int(now)])
            if mustRewrite {
                // Exclusive: no admission or release of this server is between its count
                // and its commit, so `local` is what the rows must say.
                try await db.execute("SELECT pg_advisory_xact_lock(\(Self.nodeLockClass), hashtext(?))", [.text(node)])
                // `stale` is cleared with the snapshot: a write failing after it sets it again.
                let rewrite: [String: Int] = mutex.withLock {
                    stale = false
                    return local
                }
                rewritten = true
                try await db.execute("DELETE FROM presence WHERE node_id = ?", [.text(node)])
                for (userId, streams) in rewrite {
                    try await db.execute("INSERT INTO presence (node_id, user_id, streams) VALUES (?, ?, ?)",
                                         [.text(node), .text(userId), .int(Int64(streams))])
                }
            }
            let rows = try await db.query("""
                WITH gone AS (DELETE FROM server_nodes WHERE seen_at < ? RETURNING node_id, seen_at),
                     streams AS (DELETE FROM presence p USING gone WHERE p.node_id = gone.node_id
                                 RETURNING p.user_id, gone.seen_at)
                SELECT user_id, max(seen_at) FROM streams GROUP BY user_id
                """, [.int(now - Self.forgetAfter)])
            try await db.execute(StreamPositions.forgetGoneSQL, [.text(node), .int(now - Self.forgetAfter)])
            return rows.map { (userId: $0.text(0), seenAt: $0.int(1)) }
            }
        } catch {
            if rewritten { mutex.withLock { stale = true } }
            throw error
        }
        return forgotten
    }

    /// This server stops (gracefully): its rows go, and the others learn it at once.
    func leave() async {
        let node = self.node
        let users: [String] = mutex.withLock { Array(local.keys) }
        try? await database.write { db in
            try await db.execute("DELETE FROM presence WHERE node_id = ?", [.text(node)])
            try await db.execute("DELETE FROM server_nodes WHERE node_id = ?", [.text(node)])
            for userId in users { try await Self.notify("\(node) 0 \(userId)", db) }
        }
    }

    private static func notify(_ payload: String, _ db: any SQLSession) async throws {
        try await db.execute("SELECT pg_notify('\(channel)', ?)", [.text(payload)])
    }
}
