/* bench_pg_writer: PostgreSQL's CPU per call of each function a Parley writer calls, beside
 * the floor of a PL/pgSQL function that returns one row and does nothing else.
 *
 *   bench_pg_writer DATABASE_URL [CALLS]
 *
 * DATABASE_URL is a database a Parley server migrated and wrote (scripts/bench.sh passes the
 * fanout's): the busiest channel with a member who holds a session stands for a send. Each
 * function runs CALLS times (default 3000) inside one statement, so that what is timed is the
 * backend's work alone, with no round trip; the figure is the median of three such loops, in
 * µs per call. The functions run as a send runs them, under a row of their own in
 * `stream_writers` (removed at the end); they take real numbers from the sequences, which
 * are left unused, as a failed write leaves them. Run it while no server of the database
 * writes: the writer's locks would make them wait, and their own would skew these times. */
#define _POSIX_C_SOURCE 200809L
#include "bench_support.h"
#include <libpq-fe.h>

#define ROUNDS 3

static PGconn *connection;

static PGresult *query(const char *sql, int count, const char *const *values) {
    PGresult *result = PQexecParams(connection, sql, count, NULL, values, NULL, NULL, 0);
    ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
        fprintf(stderr, "bench_pg_writer: %.80s...: %s", sql, PQerrorMessage(connection));
        PQclear(result);
        return NULL;
    }
    return result;
}

static int run(const char *sql, int count, const char *const *values) {
    PGresult *result = query(sql, count, values);
    PQclear(result);
    return result != NULL;
}

/* The first column of the first row of `sql` into `out`; 0 if there is none. */
static int fetch(const char *sql, int count, const char *const *values, char *out, size_t size) {
    PGresult *result = query(sql, count, values);
    if (result == NULL) return 0;
    int found = PQntuples(result) > 0 && !PQgetisnull(result, 0, 0);
    if (found) snprintf(out, size, "%s", PQgetvalue(result, 0, 0));
    PQclear(result);
    return found;
}

/* µs per call of `call` (a FROM item over `g`, the loop's counter, so that it runs at every
 * row), the median of ROUNDS loops of `calls`; `within_transaction` for functions that keep
 * transaction-local state. The session's locks are given up after each loop. */
static double per_call(const char *call, int calls, int within_transaction, const char *const *values, int count) {
    double times[ROUNDS];
    char sql[4096];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM generate_series(1, %d) g, LATERAL %s f", calls, call);
    for (int round = 0; round < ROUNDS; round++) {
        if (within_transaction && !run("BEGIN", 0, NULL)) return -1;
        double start = now_us();
        int ok = run(sql, count, values);
        times[round] = (now_us() - start) / calls;
        if (within_transaction) ok = run(ok ? "COMMIT" : "ROLLBACK", 0, NULL) && ok;
        if (!run("SELECT pg_advisory_unlock_all()", 0, NULL) || !ok) return -1;
    }
    return median(times, ROUNDS);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATABASE_URL [CALLS]\n", argv[0]);
        return 2;
    }
    int calls = argc > 2 ? atoi(argv[2]) : 3000;
    if (calls < 10 || calls > 1000000) return 2;
    connection = PQconnectdb(argv[1]);
    if (PQstatus(connection) != CONNECTION_OK) {
        fprintf(stderr, "bench_pg_writer: connecting: %s", PQerrorMessage(connection));
        return 1;
    }
    char channel[512], sender[512], other[512], token[512], members[4096], node[64], key[32];
    if (!fetch("SELECT m.channel_url FROM members m JOIN sessions s ON s.user_id = m.user_id "
               "GROUP BY m.channel_url ORDER BY count(DISTINCT m.user_id) DESC, m.channel_url LIMIT 1",
               0, NULL, channel, sizeof channel)) {
        fprintf(stderr, "bench_pg_writer: no channel with a member who holds a session in this database\n");
        return 1;
    }
    const char *in_channel[] = {channel};
    if (!fetch("SELECT m.user_id FROM members m JOIN sessions s ON s.user_id = m.user_id WHERE m.channel_url = $1 "
               "ORDER BY m.user_id LIMIT 1", 1, in_channel, sender, sizeof sender) ||
        !fetch("SELECT s.token FROM sessions s JOIN members m ON m.user_id = s.user_id WHERE m.channel_url = $1 "
               "ORDER BY m.user_id, s.token LIMIT 1", 1, in_channel, token, sizeof token)) return 1;
    const char *sender_in[] = {channel, sender};
    if (!fetch("SELECT coalesce(min(user_id), $2) FROM members WHERE channel_url = $1 AND user_id <> $2", 2, sender_in,
               other, sizeof other) ||
        !fetch("SELECT count(*) FROM members WHERE channel_url = $1", 1, in_channel, members, sizeof members)) return 1;
    snprintf(node, sizeof node, "bench-writer-%ld", (long)getpid());
    snprintf(key, sizeof key, "%ld", 0x62770000L + (long)getpid());
    const char *writer[] = {node, key};
    if (!run("SELECT parley_publish_floor($1, $2, (SELECT last_value FROM parley_event_ids))", 2, writer)) return 1;

    /* The arguments of a send by `sender` with a req_id, as a server passes them
     * (Writers/StreamPositions.swift): the channel, two event numbers and a message id, the
     * versions of the sender and one other member, the session, the earlier send. */
    char urls[600], users[1100];
    snprintf(urls, sizeof urls, "[\"%s\"]", channel);
    snprintf(users, sizeof users, "[\"%s\", \"%s\"]", sender, other);
    const char *send[] = {key, node, urls, users, token, channel, sender};
    const char *lock_call = "parley_lock_channels($1::bigint, $2, $3, 2 + 0 * g, 1, $4, $5, $6, $7, 'bench-request', true)";
    /* What the flight's check expects is what the lock statement reads (OneFlightSend.checkedText). */
    char expected[8192];
    char lock_once[1024];
    snprintf(lock_once, sizeof lock_once, "SELECT coalesce(string_agg(concat_ws('|', kind, octet_length(coalesce(name, '')) || ':' "
             "|| coalesce(name, ''), coalesce(a::text, ''), coalesce(b::text, '')), ';' ORDER BY kind COLLATE \"C\", "
             "coalesce(name, '') COLLATE \"C\", coalesce(a::text, '') COLLATE \"C\", coalesce(b::text, '') COLLATE \"C\"), '') "
             "FROM %s WHERE kind IN ('c', 'u', 's', 'r')", "parley_lock_channels($1::bigint, $2, $3, 2, 1, $4, $5, $6, $7, 'bench-request', true)");
    int ok = fetch(lock_once, 7, send, expected, sizeof expected) && run("SELECT pg_advisory_unlock_all()", 0, NULL);
    const char *flight[] = {key, node, urls, users, token, channel, sender, expected};
    const char *expecting_call = "parley_lock_expecting($8, '4242', $1::bigint, $2, $3, 2 + 0 * g, 1, $4, $5, $6, $7, 'bench-request')";
    const char *hold[] = {key, urls, users};
    const char *hold_call = "parley_hold_to_commit($1::bigint + 0 * g, $2, $3, '[]')";
    const char *numbers[] = {node, users};
    const char *numbers_call = "parley_take_numbers($1, 2 + 0 * g, $2)";
    ok = ok && run("CREATE FUNCTION pg_temp.bench_one_row(n BIGINT) RETURNS TABLE (kind TEXT) LANGUAGE plpgsql VOLATILE "
                   "AS $$ BEGIN RETURN QUERY SELECT 'x'::text; END $$", 0, NULL);
    double floor = ok ? per_call("pg_temp.bench_one_row(g)", calls, 0, NULL, 0) : -1;
    double lock = ok ? per_call(lock_call, calls, 0, send, 7) : -1;
    double expecting = ok ? per_call(expecting_call, calls, 1, flight, 8) : -1;
    double hold_time = ok ? per_call(hold_call, calls, 1, hold, 3) : -1;
    double numbers_time = ok ? per_call(numbers_call, calls, 0, numbers, 2) : -1;
    run("DELETE FROM stream_writers WHERE node = $1", 1, writer);
    PQfinish(connection);
    if (!ok || floor < 0 || lock < 0 || expecting < 0 || hold_time < 0 || numbers_time < 0) return 1;

    printf("PostgreSQL's CPU per call of a writer's functions (one statement looping %d calls, median of %d; "
           "a channel of %s members)\n", calls, ROUNDS, members);
    struct { const char *name; const char *what; double time; } rows[] = {
        {"parley_lock_channels", "a send's first statement (locks, numbers, reads)", lock},
        {"parley_lock_expecting", "the same, checked, for a send in one round trip", expecting},
        {"parley_hold_to_commit", "a write's last statement's first column", hold_time},
        {"parley_take_numbers", "a channel batch's read for its next member", numbers_time},
    };
    char measure[256], figure[64], comparison[128];
    snprintf(comparison, sizeof comparison, "floor: a PL/pgSQL function returning one row, %.1f us", floor);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        printf("  %-24s %7.1f us per call   %s\n", rows[i].name, rows[i].time, rows[i].what);
        snprintf(measure, sizeof measure, "  PostgreSQL, per call: %s (%s)", rows[i].name, rows[i].what);
        snprintf(figure, sizeof figure, "%.0f us", rows[i].time);
        summary_row(measure, figure, comparison, "-");
    }
    return 0;
}
