// PostgreSQL: how writers of every server on one database number their events side by side,
// and how far a reader may deliver (docs/ARCHITECTURE.md, *Order across servers*).
//
// Event ids come from one sequence (`parley_event_ids`), taken by a writer once it holds the
// locks of the channels it changes: a channel's changes therefore take increasing numbers in
// the order they commit. Numbers of different channels commit in any order, so a reader may
// deliver up to a number only once every lower one is committed or will never be (the bound).
// Each server publishes, in `stream_writers`, a floor below every number its unfinished writers
// hold or will take, and each of its writers holds the server's busy lock (shared, to the end of
// its transaction) before it takes a number. The bound is the sequence's last value, lowered to
// the floor of every other server that is busy: a server that is not busy has nothing in flight
// (a lock is released only after its transaction's commit is visible), and a server that died
// lost its locks with its connections. A server frozen in the middle of a transaction holds its
// lock until PostgreSQL ends the session (`PostgresDatabase.idleSessionSeconds`).
import Foundation

final class StreamPositions: Sendable {
    /// This server in `stream_writers`, and the key of its busy lock.
    let node: String
    let busyKey: Int64

    /// This server's writers in flight and the numbers it knows were handed out.
    let order: WriteOrder

    init(node: String, order: WriteOrder) {
        self.node = node
        self.order = order
        // A random positive key, from the node id (itself random).
        var key: Int64 = 0
        for byte in node.utf8 { key = key &* 31 &+ Int64(byte) }
        busyKey = (key & Int64.max) | 1
    }

    /// At start, before any write: the row of this server, at the sequence's last value.
    func register(_ database: any SQLDatabase) async throws -> Int64 {
        let handedOut = try await bound(database).handedOut
        _ = try await database.readStatementByStatement { db in
            try await db.execute("SELECT parley_publish_floor(?, ?, ?)", [.text(node), .int(busyKey), .int(handedOut)])
        }
        order.published(handedOut)
        return handedOut
    }

    /// Every number up to `bound` that another server took is committed or never will be;
    /// `handedOut` is the sequence's last value. One statement, alone (it must see the commits
    /// made while it runs: READ COMMITTED, outside any transaction).
    func bound(_ database: any SQLDatabase) async throws -> (bound: Int64, handedOut: Int64) {
        let row = try await database.readStatementByStatement { db in
            try await db.queryOne("SELECT bound, handed_out FROM parley_stream_bound(?)", [.text(node)])
        }
        guard let row else { throw StorageError("parley_stream_bound returned nothing") }
        let result = (bound: row.int(0), handedOut: row.int(1))
        order.saw(result.handedOut)
        return result
    }

    // MARK: SQL (migration 18)

    /// The namespace of the channels' advisory locks (two-key form, apart from the busy
    /// locks' one-key form): "pc".
    static let channelLockSpace: Int32 = 0x7063
    /// The namespace of the users' advisory locks: "pu".
    static let userLockSpace: Int32 = 0x7075
    /// The namespace of other named locks of writers (`WriterRules.lockForWriters`): "pk".
    static let keyLockSpace: Int32 = 0x706B

    static let definitions = [
        """
        CREATE TABLE IF NOT EXISTS stream_writers (
            node TEXT COLLATE "C" PRIMARY KEY, lock_key BIGINT NOT NULL, floor BIGINT NOT NULL, updated_at BIGINT NOT NULL)
        """,
        // A writer's first statement (after BEGIN): the locks of the channels it will change,
        // in the order given (URL order: two writers never wait for each other crosswise),
        // those channels' versions, then the server's busy lock and `numbers` event numbers
        // taken after both (`busy_key` 0: the writer holds it already). A writer's first also
        // takes `message_ids` message ids and reads the versions of `user_ids` (the users its
        // channel's cached copy shows), which spares it those round trips. Rows by kind: 'c'
        // a channel (url, version, its last message's change number), 'e' an event number,
        // 'm' a message id, 'u' a user (id, version).
        """
        CREATE OR REPLACE FUNCTION parley_lock_channels(busy_key BIGINT, urls TEXT, numbers BIGINT,
            message_ids BIGINT, user_ids TEXT)
        RETURNS TABLE (kind TEXT, name TEXT, a BIGINT, b BIGINT)
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            wanted TEXT;
        BEGIN
            FOR wanted IN SELECT value FROM json_array_elements_text(urls::json) LOOP
                PERFORM pg_advisory_lock(\(channelLockSpace), hashtext(wanted));
            END LOOP;
            IF busy_key <> 0 THEN PERFORM pg_advisory_lock_shared(busy_key); END IF;
        \(listLookups)
        END $$
        """,
        // The locks of users a writer changes, in the order given, with their versions as
        // committed once held (the writer compares them with the versions it loaded).
        """
        CREATE OR REPLACE FUNCTION parley_lock_users(ids TEXT) RETURNS TABLE (user_id TEXT, version BIGINT)
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            wanted TEXT;
        BEGIN
            FOR wanted IN SELECT value FROM json_array_elements_text(ids::json) LOOP
                PERFORM pg_advisory_lock(\(userLockSpace), hashtext(wanted));
            END LOOP;
            RETURN QUERY SELECT u.user_id::text, u.version FROM users u
                WHERE u.user_id IN (SELECT value FROM json_array_elements_text(ids::json));
        END $$
        """,
        // A write's last statement, first of its columns: every lock the session took for the
        // write, taken again to the end of the statement's transaction, then the session's given
        // up. A lock is thus held without a gap until the write's commit is visible, and a write
        // of one statement needs no BEGIN or COMMIT.
        """
        CREATE OR REPLACE FUNCTION parley_hold_to_commit(busy_key BIGINT, urls TEXT, ids TEXT, names TEXT) RETURNS BIGINT
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            wanted TEXT;
        BEGIN
            FOR wanted IN SELECT value FROM json_array_elements_text(urls::json) LOOP
                PERFORM pg_advisory_xact_lock(\(channelLockSpace), hashtext(wanted));
            END LOOP;
            FOR wanted IN SELECT value FROM json_array_elements_text(ids::json) LOOP
                PERFORM pg_advisory_xact_lock(\(userLockSpace), hashtext(wanted));
            END LOOP;
            FOR wanted IN SELECT value FROM json_array_elements_text(names::json) LOOP
                PERFORM pg_advisory_xact_lock(\(keyLockSpace), hashtext(wanted));
            END LOOP;
            IF busy_key <> 0 THEN PERFORM pg_advisory_xact_lock_shared(busy_key); END IF;
            PERFORM pg_advisory_unlock_all();
            RETURN 1;
        END $$
        """,
        // The write turn of migrations 4 to 16 (WriteTurn.swift), replaced by the above.
        "DROP FUNCTION IF EXISTS parley_write_turn()",
        "DROP FUNCTION IF EXISTS parley_write_turn_for(TEXT)",
        "DROP FUNCTION IF EXISTS parley_take_write_turn(TEXT)",
        "DROP FUNCTION IF EXISTS parley_take_write_turn_alone(TEXT)",
        "DROP FUNCTION IF EXISTS parley_claim_write_turn(BIGINT, TEXT, BIGINT, BIGINT, BIGINT)",
        "DROP TABLE IF EXISTS write_turn",
        // A server's floor, raised (never lowered), without waiting for a sync of its own: a
        // floor lost in a crash is one the server no longer needs (it restarts registered anew).
        """
        CREATE OR REPLACE FUNCTION parley_publish_floor(writer TEXT, key BIGINT, new_floor BIGINT) RETURNS VOID
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM set_config('synchronous_commit', 'off', true);
            INSERT INTO stream_writers (node, lock_key, floor, updated_at)
                VALUES (writer, key, new_floor, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                ON CONFLICT (node) DO UPDATE SET floor = GREATEST(stream_writers.floor, excluded.floor),
                    lock_key = excluded.lock_key, updated_at = excluded.updated_at;
        END $$
        """,
        // The bound (see the top of StreamPositions.swift). The sequence is read first: a number
        // taken after it is above it; one taken before it by a transaction still running is
        // held by a busy server, whose floor is below it. Each statement of the function sees
        // the commits made before it began.
        """
        CREATE OR REPLACE FUNCTION parley_stream_bound(me TEXT) RETURNS TABLE (bound BIGINT, handed_out BIGINT)
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            last BIGINT;
            result BIGINT;
            other RECORD;
        BEGIN
            SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END INTO last FROM parley_event_ids s;
            result := last;
            FOR other IN SELECT w.lock_key, w.floor FROM stream_writers w WHERE w.node <> me AND w.floor < last LOOP
                IF other.floor < result THEN
                    IF pg_try_advisory_lock(other.lock_key) THEN
                        PERFORM pg_advisory_unlock(other.lock_key);
                    ELSE
                        result := other.floor;
                    END IF;
                END IF;
            END LOOP;
            RETURN QUERY SELECT result, last;
        END $$
        """,
    ]

    /// The SQLSTATE of a writer whose server has no row in `stream_writers`.
    static let missingRowState = "PLW01"

    /// Migration 19: the writer's first statement names its server and checks, once it holds
    /// the busy lock, that the server's row is there. A heartbeat removes the rows of servers
    /// gone for `ClusterPresence.forgetAfter` whose busy lock is free (Storage/Postgres/Presence.swift), so a
    /// server that was frozen that long finds its row gone: its writer fails before taking a
    /// number, and the server publishes its row again before the writer runs again
    /// (`ChannelStore.lockChannels`). Rows are never inserted here: a row inserted in the
    /// statement that takes numbers would be seen by the others only after those numbers.
    static let definitionsWithOwnRow = [
        lockChannelsDefinition(declaring: "", lookups: listLookups),
    ]

    /// What the writer's first statement reads in migrations 18 and 19: the channels, the
    /// event numbers, the message id and the users (replaced in migration 23).
    private static let listLookups = """
            RETURN QUERY SELECT 'c'::text, c.url::text, c.version, coalesce(msg.change_seq, -1)
                FROM channels c LEFT JOIN messages msg ON msg.id = c.last_message_id
                WHERE c.url IN (SELECT value FROM json_array_elements_text(urls::json));
            RETURN QUERY SELECT 'e'::text, NULL::text, nextval('parley_event_ids'), NULL::bigint FROM generate_series(1, numbers);
            RETURN QUERY SELECT 'm'::text, NULL::text, nextval('parley_message_ids'), NULL::bigint FROM generate_series(1, message_ids);
            RETURN QUERY SELECT 'u'::text, u.user_id::text, u.version, NULL::bigint FROM users u
                WHERE u.user_id IN (SELECT value FROM json_array_elements_text(user_ids::json));
        """

    /// Migration 23: the same function, its channels and users looked up by key one by one.
    /// The lookups by `IN (SELECT … json_array_elements_text(…))` were planned as hash joins
    /// over whole tables (every channel with its last message, every user), which took about
    /// a quarter of PostgreSQL's CPU per message in P7 (docs/BENCHMARKS.md); by key they cost
    /// one index probe per name.
    static let definitionsByKey = [lockChannelsDefinition(declaring: "wanted_users TEXT[];", lookups: lookupsByKey)]

    /// The lookups of migration 23, by key.
    private static let lookupsByKey = """
            FOR wanted IN SELECT value FROM json_array_elements_text(urls::json) LOOP
                RETURN QUERY SELECT 'c'::text, c.url::text, c.version, coalesce(msg.change_seq, -1)
                    FROM channels c LEFT JOIN messages msg ON msg.id = c.last_message_id
                    WHERE c.url = wanted;
            END LOOP;
            RETURN QUERY SELECT 'e'::text, NULL::text, nextval('parley_event_ids'), NULL::bigint FROM generate_series(1, numbers);
            RETURN QUERY SELECT 'm'::text, NULL::text, nextval('parley_message_ids'), NULL::bigint FROM generate_series(1, message_ids);
            wanted_users := ARRAY(SELECT json_array_elements_text(user_ids::json));
            RETURN QUERY SELECT 'u'::text, u.user_id::text, u.version, NULL::bigint
                FROM unnest(wanted_users) AS w(id)
                CROSS JOIN LATERAL (SELECT x.user_id, x.version FROM users x WHERE x.user_id = w.id) u;
            """

    /// Migration 24: a variant with four more arguments, read after the lookups of migration 23
    /// for the handler of a write (`FirstReads`), each a round trip spared. With `session_key`
    /// (not ''): the session, as 's' (its user, expiry, creation), and its user's version as a
    /// 'u' row; none when no session has that key. With `send_req_id` (not ''): one 'r' row,
    /// the earlier send of `MessageQueries.earlierSendSQL` (a stored message's id, else a deleted
    /// one's). Read under the channel's lock, they see every commit of the channel's writers
    /// before it, as the handler's statements would. Servers of migrations 19 to 23 keep
    /// calling the function of six arguments, which stays.
    static let definitionsWithFirstReads = [
        lockChannelsDefinition(declaring: "wanted_users TEXT[];", lookups: lookupsByKey + "\n" + firstReadLookups,
                               moreArguments: firstReadArguments),
    ]

    /// The arguments and the lookups migration 24 adds (`definitionsWithFirstReads`).
    private static let firstReadArguments = ", session_key TEXT, send_channel TEXT, send_sender TEXT, send_req_id TEXT"
    private static let firstReadLookups = """
            IF session_key <> '' THEN
                RETURN QUERY SELECT 's'::text, s.user_id::text, s.expires_at, s.created_at
                    FROM sessions s WHERE s.token = session_key;
                RETURN QUERY SELECT 'u'::text, u.user_id::text, u.version, NULL::bigint
                    FROM sessions s JOIN users u ON u.user_id = s.user_id WHERE s.token = session_key;
            END IF;
            IF send_req_id <> '' THEN
                RETURN QUERY SELECT 'r'::text, NULL::text,
                    (SELECT x.id FROM messages x WHERE x.channel_url = send_channel
                        AND coalesce(x.sender_id, '') = send_sender AND x.req_id = send_req_id AND x.req_id <> '' LIMIT 1),
                    (SELECT t.message_id FROM message_tombstones t WHERE t.channel_url = send_channel
                        AND t.sender_id = send_sender AND t.req_id = send_req_id AND t.req_id <> '' LIMIT 1);
            END IF;
            """

    /// Migration 25: the writer's own bound, read in the statements that take its numbers,
    /// after them, so that its events go out as soon as it commits, with no read of its own
    /// (docs/ARCHITECTURE.md, *Order across servers*, "A writer's own bound"). The lock
    /// statement gains an eleventh argument, `reads_bound` (servers of migration 24 keep calling
    /// the function of ten, which stays), and returns one more row: 'b', the bound (a) and the
    /// sequence's last value (b) as `parley_stream_bound` reads them, with the number of other
    /// servers in `stream_writers` as its name. `parley_take_numbers` is what a channel batch's
    /// member reads for the next one with its last statement (ChannelBatch.swift): `numbers`
    /// event numbers, a message id, the versions of `user_ids`, then the bound, as one JSON text.
    static let definitionsWithBound = [
        lockChannelsDefinition(declaring: "wanted_users TEXT[];", lookups: lookupsByKey + "\n" + firstReadLookups + "\n" + """
            IF reads_bound AND numbers > 0 THEN
                RETURN QUERY SELECT 'b'::text, (SELECT count(*) FROM stream_writers w WHERE w.node <> me)::text,
                    sb.bound, sb.handed_out FROM parley_stream_bound(me) sb;
            END IF;
            """, moreArguments: firstReadArguments + ", reads_bound BOOLEAN"),
        """
        CREATE OR REPLACE FUNCTION parley_take_numbers(me TEXT, numbers BIGINT, user_ids TEXT) RETURNS TEXT
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            taken JSON;
            next_message_id BIGINT;
            user_versions JSON;
            bound_row RECORD;
            other_servers BIGINT;
        BEGIN
            SELECT json_agg(nextval('parley_event_ids')) INTO taken FROM generate_series(1, numbers);
            next_message_id := nextval('parley_message_ids');
            SELECT coalesce(json_object_agg(u.user_id, u.version), '{}') INTO user_versions
                FROM unnest(ARRAY(SELECT json_array_elements_text(user_ids::json))) AS w(id)
                CROSS JOIN LATERAL (SELECT x.user_id, x.version FROM users x WHERE x.user_id = w.id) u;
            SELECT sb.bound, sb.handed_out INTO bound_row FROM parley_stream_bound(me) sb;
            SELECT count(*) INTO other_servers FROM stream_writers w WHERE w.node <> me;
            RETURN json_build_object('e', taken, 'm', next_message_id, 'u', user_versions,
                'b', bound_row.bound, 'h', bound_row.handed_out, 'o', other_servers)::text;
        END $$
        """,
    ]

    /// Migration 26: the functions that take numbers keep one plan per statement and session.
    /// A statement over `generate_series(1, numbers)` is estimated at 1,000 rows with a generic
    /// plan and a handful with one made for the value, so PL/pgSQL's plan cache, left to
    /// choose, judges the generic plan dearer and plans the statement again at every call:
    /// twice per send, about 0.045 ms of PostgreSQL's CPU. Every other statement of the two
    /// functions is a lookup by key, whose generic plan is the one the cache settles on anyway.
    static let definitionsPlannedOnce = [
        """
        ALTER FUNCTION parley_lock_channels(BIGINT, TEXT, TEXT, BIGINT, BIGINT, TEXT, TEXT, TEXT, TEXT, TEXT, BOOLEAN)
            SET plan_cache_mode = force_generic_plan
        """,
        "ALTER FUNCTION parley_take_numbers(TEXT, BIGINT, TEXT) SET plan_cache_mode = force_generic_plan",
    ]

    /// Migration 28: the functions a writer calls on every write, in fewer statements. Each
    /// statement a PL/pgSQL function runs costs an executor start and end (about 5 to 10 µs of
    /// PostgreSQL's CPU each, more than most of their lookups); the lock calls become plain
    /// assignments, which PL/pgSQL evaluates without one. The order is that of migrations 19 to
    /// 26: the channels' locks, the busy lock, the check of the server's row, the channels,
    /// the numbers, then the users, the session and the earlier send, then the bound, each
    /// statement after the one before (so each sees the commits made before it began).
    static let definitionsInFewerStatements = [
        """
        CREATE OR REPLACE FUNCTION parley_lock_channels(busy_key BIGINT, me TEXT, urls TEXT, numbers BIGINT,
            message_ids BIGINT, user_ids TEXT\(firstReadArguments), reads_bound BOOLEAN)
        RETURNS TABLE (kind TEXT, name TEXT, a BIGINT, b BIGINT)
        LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
        DECLARE
            wanted_urls TEXT[] := ARRAY(SELECT json_array_elements_text(urls::json));
            wanted TEXT;
            ignored BOOLEAN;
        BEGIN
            FOREACH wanted IN ARRAY wanted_urls LOOP
                ignored := pg_advisory_lock(\(channelLockSpace), hashtext(wanted)) IS NULL;
            END LOOP;
            IF busy_key <> 0 THEN
                ignored := pg_advisory_lock_shared(busy_key) IS NULL;
                PERFORM 1 FROM stream_writers w WHERE w.node = me;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'parley: this server (%) has no row in stream_writers', me
                        USING ERRCODE = '\(missingRowState)';
                END IF;
            END IF;
            -- One statement per channel: joined to a list of names, the lookup is planned with
            -- a memo table whose setup costs more than the lookups.
            FOREACH wanted IN ARRAY wanted_urls LOOP
                RETURN QUERY SELECT 'c'::text, c.url::text, c.version, coalesce(msg.change_seq, -1)
                    FROM channels c LEFT JOIN messages msg ON msg.id = c.last_message_id
                    WHERE c.url = wanted;
            END LOOP;
            RETURN QUERY SELECT 'e'::text, NULL::text, nextval('parley_event_ids'), NULL::bigint
                    FROM generate_series(1, numbers)
                UNION ALL SELECT 'm'::text, NULL::text, nextval('parley_message_ids'), NULL::bigint
                    FROM generate_series(1, message_ids);
            -- OFFSET 0 keeps each user a probe of its key (joined, the lookup may be planned
            -- over the whole table).
            RETURN QUERY SELECT 'u'::text, u.user_id::text, u.version, NULL::bigint
                    FROM json_array_elements_text(user_ids::json) AS w(id)
                    CROSS JOIN LATERAL (SELECT x.user_id, x.version FROM users x WHERE x.user_id = w.id OFFSET 0) u
                UNION ALL SELECT 's'::text, s.user_id::text, s.expires_at, s.created_at
                    FROM sessions s WHERE session_key <> '' AND s.token = session_key
                UNION ALL SELECT 'u'::text, u.user_id::text, u.version, NULL::bigint
                    FROM sessions s JOIN users u ON u.user_id = s.user_id
                    WHERE session_key <> '' AND s.token = session_key
                UNION ALL SELECT 'r'::text, NULL::text,
                    (SELECT x.id FROM messages x WHERE x.channel_url = send_channel
                        AND coalesce(x.sender_id, '') = send_sender AND x.req_id = send_req_id AND x.req_id <> '' LIMIT 1),
                    (SELECT t.message_id FROM message_tombstones t WHERE t.channel_url = send_channel
                        AND t.sender_id = send_sender AND t.req_id = send_req_id AND t.req_id <> '' LIMIT 1)
                    WHERE send_req_id <> '';
            IF reads_bound AND numbers > 0 THEN
                RETURN QUERY SELECT 'b'::text, (SELECT count(*) FROM stream_writers w WHERE w.node <> me)::text,
                    sb.bound, sb.handed_out FROM parley_stream_bound(me) sb;
            END IF;
        END $$
        """,
        """
        CREATE OR REPLACE FUNCTION parley_hold_to_commit(busy_key BIGINT, urls TEXT, ids TEXT, names TEXT) RETURNS BIGINT
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            ignored BOOLEAN;
        BEGIN
            PERFORM pg_advisory_xact_lock(l.space, hashtext(l.name))
                FROM (SELECT \(channelLockSpace) AS space, value AS name FROM json_array_elements_text(urls::json)
                      UNION ALL SELECT \(userLockSpace), value FROM json_array_elements_text(ids::json)
                      UNION ALL SELECT \(keyLockSpace), value FROM json_array_elements_text(names::json)) l;
            IF busy_key <> 0 THEN ignored := pg_advisory_xact_lock_shared(busy_key) IS NULL; END IF;
            ignored := pg_advisory_unlock_all() IS NULL;
            RETURN 1;
        END $$
        """,
        """
        CREATE OR REPLACE FUNCTION parley_take_numbers(me TEXT, numbers BIGINT, user_ids TEXT) RETURNS TEXT
        LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
        DECLARE
            taken JSON;
            next_message_id BIGINT;
            user_versions JSON;
            bound_row RECORD;
        BEGIN
            SELECT json_agg(nextval('parley_event_ids')) INTO taken FROM generate_series(1, numbers);
            next_message_id := nextval('parley_message_ids');
            SELECT coalesce(json_object_agg(u.user_id, u.version), '{}') INTO user_versions
                FROM json_array_elements_text(user_ids::json) AS w(id)
                CROSS JOIN LATERAL (SELECT x.user_id, x.version FROM users x WHERE x.user_id = w.id OFFSET 0) u;
            SELECT sb.bound, sb.handed_out, (SELECT count(*) FROM stream_writers w WHERE w.node <> me) AS others
                INTO bound_row FROM parley_stream_bound(me) sb;
            RETURN json_build_object('e', taken, 'm', next_message_id, 'u', user_versions,
                'b', bound_row.bound, 'h', bound_row.handed_out, 'o', bound_row.others)::text;
        END $$
        """,
    ]

    /// The writer's first statement from migration 19 on: the channels' locks in the order
    /// given, the busy lock and the check of the server's row, then `lookups` (the rows the
    /// writer reads).
    private static func lockChannelsDefinition(declaring declarations: String, lookups: String,
                                               moreArguments: String = "") -> String {
        """
        CREATE OR REPLACE FUNCTION parley_lock_channels(busy_key BIGINT, me TEXT, urls TEXT, numbers BIGINT,
            message_ids BIGINT, user_ids TEXT\(moreArguments))
        RETURNS TABLE (kind TEXT, name TEXT, a BIGINT, b BIGINT)
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            wanted TEXT;
            \(declarations)
        BEGIN
            FOR wanted IN SELECT value FROM json_array_elements_text(urls::json) LOOP
                PERFORM pg_advisory_lock(\(channelLockSpace), hashtext(wanted));
            END LOOP;
            IF busy_key <> 0 THEN
                PERFORM pg_advisory_lock_shared(busy_key);
                PERFORM 1 FROM stream_writers w WHERE w.node = me;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'parley: this server (%) has no row in stream_writers', me
                        USING ERRCODE = '\(missingRowState)';
                END IF;
            END IF;
        \(lookups)
        END $$
        """
    }

    /// The heartbeat's removal of the rows of servers gone (Storage/Postgres/Presence.swift): not heard from
    /// for `forgetAfter` (no `server_nodes` row, no floor published since) and not busy. The
    /// probe of the busy lock comes last (CASE keeps the order), so a live server's lock is
    /// never taken; it is held to the heartbeat's commit, so no writer of that server can
    /// pass its check of the row meanwhile.
    static let forgetGoneSQL = """
        DELETE FROM stream_writers w WHERE CASE
            WHEN w.node <> ? AND w.updated_at < ? AND NOT EXISTS (SELECT 1 FROM server_nodes n WHERE n.node_id = w.node)
            THEN pg_try_advisory_xact_lock(w.lock_key) ELSE false END
        """

    /// The sequences that replace the counters of `meta`, each started after the counter's
    /// value (`offset`: the counter names the next number rather than the last).
    static let sequences: [(name: String, counter: String, offset: Int64)] = [
        ("parley_event_ids", "seq", 0), ("parley_message_ids", "next_message_id", 1),
        ("parley_report_ids", "next_report_id", 1), ("parley_poll_ids", "next_poll_id", 1),
        ("parley_channel_numbers", "channel_counter", 0),
    ]

    /// The locks a write holds at session level (PostgresSession.holdLocks).
    struct Locks: Sendable {
        var busyKey: Int64 = 0
        var channels: Set<String> = []
        var users: Set<String> = []
        var names: Set<String> = []

        var isEmpty: Bool { busyKey == 0 && channels.isEmpty && users.isEmpty && names.isEmpty }

        mutating func formUnion(_ other: Locks) {
            if other.busyKey != 0 { busyKey = other.busyKey }
            channels.formUnion(other.channels)
            users.formUnion(other.users)
            names.formUnion(other.names)
        }
    }

    /// Notes locks a write in `session` took at session level (their statement was sent), so
    /// that its last statement keeps them to its commit. Only PostgreSQL's sessions hold them.
    static func noteSessionLocks(_ locks: Locks, in session: any SQLSession) {
        (session as? PostgresSession)?.holdLocks(locks)
    }

    /// The last statement's column that keeps `locks` to its commit (`parley_hold_to_commit`).
    static func holdToCommitCall(_ locks: Locks) -> SQLExpression {
        func list(_ items: Set<String>) -> SQLValue { .text(JSON.array(items.sorted().map { .string($0) }).serialized()) }
        return SQLExpression(sql: "parley_hold_to_commit(?, ?, ?, ?)",
                             binds: [.int(locks.busyKey), list(locks.channels), list(locks.users), list(locks.names)])
    }

    /// Gives up every lock the session holds at session level (a write that failed, or wrote
    /// nothing).
    static let releaseSQL = "SELECT pg_advisory_unlock_all()"

    static func migrate(_ db: any SQLSession) async throws {
        for sequence in sequences {
            try await db.execute("CREATE SEQUENCE IF NOT EXISTS \(sequence.name) AS BIGINT MINVALUE 0 START 1", [])
            let counted = (try await db.queryOne("SELECT value FROM meta WHERE name = ?", [.text(sequence.counter)])?.int(0)
                ?? sequence.offset) - sequence.offset
            // Never lowered: a database whose history was rewound runs this again.
            let taken = try await db.queryOne("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM \(sequence.name)")?.int(0) ?? 0
            if counted > taken { try await db.execute("SELECT setval('\(sequence.name)', ?, true)", [.int(counted)]) }
        }
        for definition in definitions { try await db.execute(definition, []) }
    }

    /// The next number of one of `sequences` (ids of reports, polls, channel names).
    static func next(_ sequence: String, _ db: any SQLSession) async throws -> Int64 {
        guard let value = try await db.queryOne("SELECT nextval('\(sequence)')", [])?.int(0) else {
            throw StorageError("nextval('\(sequence)') returned nothing")
        }
        return value
    }
}
