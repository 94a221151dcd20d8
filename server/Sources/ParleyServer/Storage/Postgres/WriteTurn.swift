// PostgreSQL: how writers on every server of one database take their numbers in order
// (docs/ARCHITECTURE.md "Several servers on one PostgreSQL"). A writer first takes the turn,
// a lock its connection holds until the writer's last statement hands it over, and reads the
// counters as the last writer committed them; it numbers from there, writes the counters back
// with its changes, and announces what it committed to the other servers (LISTEN/NOTIFY).
// Numbers therefore commit in the order they are taken: once a number is visible, every lower
// one is visible too (or was never committed, and is taken again by the next writer).

enum WriteTurn {
    /// The key of the turn's lock ("parleyWT" in ASCII); the migrations' lock is another key.
    static let lockKey: Int64 = 0x7061_726C_6579_5754
    /// Where committed numbers are announced: the payload is "NODE SEQ", the server that
    /// committed and the highest number it committed (a hint: readers go by the counters).
    static let channel = "parley_events"

    /// Takes the lock, waits for the writer that handed the turn over to end (`handover`),
    /// then reads the counters in a snapshot taken after both (a PL/pgSQL statement in READ
    /// COMMITTED takes a new snapshot per statement): one round trip for all. This form
    /// (migration 4) holds the turn to the end of the transaction; the server now takes
    /// `heldFunctionDefinition`'s, held by the connection. Both transaction forms stay for
    /// servers of earlier migrations during an upgrade.
    static let functionDefinition = """
        CREATE OR REPLACE FUNCTION parley_write_turn() RETURNS TABLE (counter TEXT, amount BIGINT)
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(\(lockKey));
            \(waitForHandover)
            RETURN QUERY SELECT m.name::text, m.value FROM meta m;
        END $$
        """

    /// Waits for the commit of the writer that handed the turn over, by the row it kept
    /// locked. Without the row (removed by hand) nothing would wait, nor could the turn be
    /// handed over: every write fails instead.
    private static let waitForHandover = """
        PERFORM 1 FROM write_turn WHERE id = 1 FOR UPDATE;
            IF NOT FOUND THEN RAISE EXCEPTION 'parley: the row of write_turn is missing (migration 14 makes it)'; END IF;
        """

    /// The rows of the turn for a channel: the counters, and the version of one channel and
    /// the change number of its last message (what `ChannelQueries.versions` reads), as
    /// committed when the turn was granted: the channel a request names in its path, which
    /// it will most likely load. Rows with a NULL third column are counters; the others name
    /// the channel.
    private static let rowsForChannel = """
        RETURN QUERY SELECT m.name::text, m.value, NULL::bigint FROM meta m
            UNION ALL
            SELECT c.url::text, c.version, coalesce(msg.change_seq, -1)
            FROM channels c LEFT JOIN messages msg ON msg.id = c.last_message_id WHERE c.url = wanted_url;
        """

    /// A function that takes the turn with `lock` (a transaction or a session lock on the
    /// turn's key), waits for the handover, and returns the rows for a channel. `alone`: for
    /// a statement that is a transaction of its own (see `heldAloneFunctionDefinition`).
    private static func turnForChannel(_ name: String, lock: String, alone: Bool = false) -> String {
        """
        CREATE OR REPLACE FUNCTION \(name)(wanted_url TEXT)
        RETURNS TABLE (counter TEXT, amount BIGINT, last_message_seq BIGINT)
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            \(alone ? "PERFORM set_config('synchronous_commit', 'off', true);" : "")
            PERFORM \(lock)(\(lockKey));
            \(waitForHandover)
            \(rowsForChannel)
        END $$
        """
    }

    /// The turn to the end of the transaction, with the rows for a channel (migration 12).
    static let functionForChannelDefinition = turnForChannel("parley_write_turn_for", lock: "pg_advisory_xact_lock")

    /// The turn held by the connection (a session lock), outside any transaction, with the
    /// rows for a channel. The writer that holds it gives it up in its last statement
    /// (`handover`); that statement also updates the row of `write_turn`, whose lock it keeps
    /// to its commit, so the next writer, granted the turn at once, waits here for that
    /// commit before it reads. The turn thus changes hands without a round trip of its own
    /// after the commit, and a write that fits one statement needs no BEGIN or COMMIT.
    static let heldFunctionDefinition = turnForChannel("parley_take_write_turn", lock: "pg_advisory_lock")

    /// The held turn taken by a statement that is a transaction of its own, as the server's
    /// writes take it (migration 15). Waiting for the handover locks the handover row, which
    /// gives that transaction an id, so its commit waited for a flush of the WAL to the disk
    /// (with `synchronous_commit` on), inside the turn: every write paid a second sync, the
    /// next writer waiting behind it. The transaction changes no data, so its commit need not
    /// be durable: after a crash it is simply not there, and the write that follows (a
    /// transaction of its own, synchronous) flushes the WAL up to its own commit, this one's
    /// included. It must never run inside a larger transaction, whose commit would then not
    /// wait for the disk either: `PostgresSession.turnStatementIsItsOwnTransaction` decides.
    static let heldAloneFunctionDefinition = turnForChannel("parley_take_write_turn_alone", lock: "pg_advisory_lock", alone: true)

    /// What a held turn's last statement adds: a write of the handover row (its lock held to
    /// the commit) and, reading that write's result so that it runs after it, the release
    /// of the turn. `name`: the name of the WITH part.
    static func handover(as name: String) -> (write: String, column: String) {
        ("\(name) AS (UPDATE write_turn SET handovers = handovers + 1 WHERE id = 1 RETURNING 0)",
         "(SELECT pg_advisory_unlock(\(lockKey)) FROM \(name))")
    }

    /// Gives up a turn held by the connection, whatever the state of its transaction (a
    /// write that failed, or wrote nothing).
    static let releaseSQL = "SELECT pg_advisory_unlock_all()"

    /// What a writer learns as its turn begins.
    struct Taken {
        var counters: [String: Int64] = [:]
        /// The channel named in `take`, if it exists: its version and its last message's
        /// change number. Current for the whole transaction: no other writer runs until it ends.
        var channel: (url: String, version: Int64, lastMessageSeq: Int64)? = nil
    }

    /// The counters as committed, read under the turn (held until the transaction ends), and
    /// the versions of `channel`.
    static func take(_ db: any SQLSession, channel: String?) async throws -> Taken {
        var taken = Taken()
        let session = db as? PostgresSession
        let function = switch (session?.holdTurn() == true, session?.turnStatementIsItsOwnTransaction == true) {
        case (true, true): "parley_take_write_turn_alone"
        case (true, false): "parley_take_write_turn"
        case (false, _): "parley_write_turn_for"
        }
        let sql = "SELECT counter, amount, last_message_seq FROM \(function)(?)"
        _ = HotStatements.learn(sql)
        for row in try await db.query(sql, [.optional(channel)]) {
            if let lastMessageSeq = row.optionalInt(2) {
                taken.channel = (row.text(0), row.int(1), lastMessageSeq)
            } else {
                taken.counters[row.text(0)] = row.int(1)
            }
        }
        return taken
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
