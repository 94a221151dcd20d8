// PostgreSQL: how writers on every server of one database take their numbers in order
// (docs/ARCHITECTURE.md "Several servers on one PostgreSQL"). A writer first takes the turn,
// a transaction lock held to its commit, and reads the counters as the last writer committed
// them; it numbers from there, writes the counters back with its changes, and announces what
// it committed to the other servers (LISTEN/NOTIFY). Numbers therefore commit in the order
// they are taken: once a number is visible, every lower one is visible too (or was never
// committed, and is taken again by the next writer).

enum WriteTurn {
    /// The key of the turn's lock ("parleyWT" in ASCII); the migrations' lock is another key.
    static let lockKey: Int64 = 0x7061_726C_6579_5754
    /// Where committed numbers are announced: the payload is "NODE SEQ", the server that
    /// committed and the highest number it committed (a hint: readers go by the counters).
    static let channel = "parley_events"

    /// Takes the lock, then reads the counters in a snapshot taken after it was granted (a
    /// PL/pgSQL statement in READ COMMITTED takes a new snapshot per statement): one round
    /// trip for both.
    static let functionDefinition = """
        CREATE OR REPLACE FUNCTION parley_write_turn() RETURNS TABLE (counter TEXT, amount BIGINT)
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(\(lockKey));
            RETURN QUERY SELECT m.name::text, m.value FROM meta m;
        END $$
        """

    /// The counters as committed, read under the turn (held until the transaction ends).
    static func take(_ db: any SQLSession) async throws -> [String: Int64] {
        var counters: [String: Int64] = [:]
        for row in try await db.query("SELECT counter, amount FROM parley_write_turn()", []) {
            counters[row.text(0)] = row.int(1)
        }
        return counters
    }

    /// A notification's payload: this server and the number it committed through (`parse`).
    static func announcement(node: String, through seq: Int64) -> String { "\(node) \(seq)" }

    /// In the writer's transaction, after its changes: a notification that other servers
    /// receive once (and only if) the transaction commits. Usually the write's last
    /// statement carries it instead (RecordTables.write).
    static func announce(_ announcement: String, _ db: any SQLSession) async throws {
        try await db.execute("SELECT pg_notify('\(channel)', ?)", [.text(announcement)])
    }

    /// The highest number committed, as a read transaction sees it.
    static func committedSeq(_ db: any SQLSession) async throws -> Int64 {
        try await db.queryOne("SELECT value FROM meta WHERE name = 'seq'")?.int(0) ?? 0
    }

    /// A notification's payload: the server that sent it and the number it committed through.
    static func parse(_ payload: String) -> (node: Substring, seq: Int64)? {
        let parts = payload.split(separator: " ")
        guard parts.count == 2, let seq = Int64(parts[1]) else { return nil }
        return (parts[0], seq)
    }
}
