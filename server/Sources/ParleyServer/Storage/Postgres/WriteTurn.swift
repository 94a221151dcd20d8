// PostgreSQL: the functions of the write turn that migrations 4 to 16 made, through which
// every write of every server on one database ran one at a time, numbering from `meta`.
// Migration 18 replaced the turn (StreamPositions.swift) and drops them; they stay here so
// that a database of any earlier version migrates through the same steps as it did.

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
            \(waitForHandover(movingGeneration: true))
            RETURN QUERY SELECT m.name::text, m.value FROM meta m;
        END $$
        """

    /// Waits for the commit of the writer that handed the turn over, by the row it kept
    /// locked. Without the row (removed by hand) nothing would wait, nor could the turn be
    /// handed over: every write fails instead.
    /// `movingGeneration`: a turn held to the end of the transaction has no handover, so it
    /// moves the count of handovers as it takes the turn (with the same row lock), which
    /// tells a server that claims its turn late that somebody wrote (`claimFunctionDefinition`).
    private static func waitForHandover(movingGeneration: Bool) -> String {
        """
        \(movingGeneration ? "UPDATE write_turn SET handovers = handovers + 1 WHERE id = 1" : "PERFORM 1 FROM write_turn WHERE id = 1 FOR UPDATE");
            IF NOT FOUND THEN RAISE EXCEPTION 'parley: the row of write_turn is missing (migration 14 makes it)'; END IF;
        """
    }

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
            \(waitForHandover(movingGeneration: lock == "pg_advisory_xact_lock"))
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
    /// the commit) and, reading that write's result so that it runs after it, the number of
    /// handovers it made (the writer's generation, see `claimFunctionDefinition`) and the
    /// release of the turn. `name`: the name of the WITH part.
    static func handover(as name: String) -> (write: String, generation: String, release: String) {
        ("\(name) AS (UPDATE write_turn SET handovers = handovers + 1 WHERE id = 1 RETURNING handovers)",
         "(SELECT handovers FROM \(name))",
         "(SELECT pg_advisory_unlock(\(lockKey)) FROM \(name))")
    }

    /// The SQLSTATE of a claim that finds the database moved on (`claimFunctionDefinition`).
    static let claimRefusedState = "PRL01"

    /// A turn claimed by the write's own statement, by a server that was the last to write
    /// (migration 16). Every writer moves `write_turn.handovers` as it gives the turn up (the
    /// handover; the transaction forms below move it as they take the turn), so a server that
    /// handed over at number N and finds N there, holding the turn, knows nobody wrote since:
    /// the counters are still the ones it committed and the snapshot of the statement that
    /// claims is current. Such a server runs the request on its own copies of the counters and
    /// of the named channel (`expected_version`, `expected_last_seq`: the cached copy's) and
    /// sends the claim as the first column of its only statement; PostgreSQL evaluates it
    /// before any part of the WITH, so the statement locks no row before it holds the turn
    /// (a row locked while waiting for the turn could deadlock with the writer holding it).
    /// If anything differs the claim fails with `claimRefusedState` and nothing is written:
    /// the server gives the turn up and runs the write again the usual way (`take`).
    ///
    /// `take` 0: only checks, without the turn (a write that wrote nothing): what the
    /// request read was current when the check ran.
    static let claimFunctionDefinition = """
        CREATE OR REPLACE FUNCTION parley_claim_write_turn(expected_handovers BIGINT, wanted_url TEXT,
            expected_version BIGINT, expected_last_seq BIGINT, take BIGINT) RETURNS BIGINT
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            found_handovers BIGINT;
            found_version BIGINT;
            found_last_seq BIGINT;
        BEGIN
            -- One query after the lock: the handover row (locked when taking, so waiting for
            -- the last writer's commit) with the channel, read after that commit.
            IF take = 1 THEN
                PERFORM pg_advisory_lock(\(lockKey));
                SELECT w.handovers, c.version, coalesce(msg.change_seq, -1) INTO found_handovers, found_version, found_last_seq
                FROM write_turn w LEFT JOIN channels c ON c.url = wanted_url LEFT JOIN messages msg ON msg.id = c.last_message_id
                WHERE w.id = 1 FOR UPDATE OF w;
            ELSE
                SELECT w.handovers, c.version, coalesce(msg.change_seq, -1) INTO found_handovers, found_version, found_last_seq
                FROM write_turn w LEFT JOIN channels c ON c.url = wanted_url LEFT JOIN messages msg ON msg.id = c.last_message_id
                WHERE w.id = 1;
            END IF;
            IF NOT FOUND THEN RAISE EXCEPTION 'parley: the row of write_turn is missing (migration 14 makes it)'; END IF;
            IF found_handovers <> expected_handovers THEN
                RAISE EXCEPTION USING ERRCODE = '\(claimRefusedState)', MESSAGE = 'parley: another writer wrote since this server''s last write';
            END IF;
            IF wanted_url IS NOT NULL AND (found_version IS DISTINCT FROM expected_version OR found_last_seq IS DISTINCT FROM expected_last_seq) THEN
                RAISE EXCEPTION USING ERRCODE = '\(claimRefusedState)', MESSAGE = 'parley: the channel changed since its cached copy';
            END IF;
            RETURN 1;
        END $$
        """
}
