// PostgreSQL: the functions migrations 4 to 16 create, a lock every writer of every server
// took in turn, numbering from `meta`. Migration 18 drops them (Writers/StreamPositions.swift); they
// stay here so that a database of any earlier version migrates through the same steps.

enum WriteTurn {
    /// The key of the turn's lock ("parleyWT" in ASCII); the migrations' lock is another key.
    static let lockKey: Int64 = 0x7061_726C_6579_5754

    /// Takes the lock to the end of the transaction, waits for the writer that handed the
    /// turn over to end, then reads the counters in a snapshot taken after both (migration 4).
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

    /// The turn held by the connection (a session lock), with the rows for a channel; it
    /// waits for the commit of the writer that updated the row of `write_turn` last
    /// (migration 14).
    static let heldFunctionDefinition = turnForChannel("parley_take_write_turn", lock: "pg_advisory_lock")

    /// The held turn for a statement that is a transaction of its own, whose commit changes no
    /// data and so waits for no sync of the WAL (migration 15).
    static let heldAloneFunctionDefinition = turnForChannel("parley_take_write_turn_alone", lock: "pg_advisory_lock", alone: true)

    /// The SQLSTATE of a claim that finds the database moved on (`claimFunctionDefinition`).
    private static let claimRefusedState = "PRL01"

    /// A turn claimed in the write's own statement by the server that wrote last: it fails
    /// with `claimRefusedState` when `write_turn.handovers` or the named channel moved since
    /// (migration 16). `take` 0 only checks, without the turn.
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
