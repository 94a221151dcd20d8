/* bench_pg_floor: PostgreSQL's own part of a live message delivered across servers (P3 with
 * the receiver on another server), with raw libpq and no Parley server: the floor under
 * bench_live's rows "receiver on another server".
 *
 *   bench_pg_floor DATABASE_URL [MESSAGES]
 *
 * What a server does with the database for such a delivery, each step once: the writer
 * commits a row of about the size of a message event together with a NOTIFY in one statement
 * (one round trip, the commit's fsync when the cluster is durable); the other server's
 * listening connection holds the notification; it reads the row by its id (one more round
 * trip). MESSAGES rows (default 500) are written at 50 and then at 200 per second, as P3
 * sends, from this thread; a second thread listens and reads. Per row, from the start of the
 * write: the writer's commit returned, the notification held, the row read (p50, p99). Left
 * out, and part of every delivery: the HTTP request and answer, the servers' own work, the
 * stream and the receiving client (bench_live and bench_engine measure those). A table of its
 * own (bench_floor_<pid>) is created in DATABASE_URL's database and dropped at the end. */
#define _POSIX_C_SOURCE 200809L
#include "bench_support.h"
#include <libpq-fe.h>
#include <stdatomic.h>
#include <sys/select.h>

#define MAX_ROWS 20000
#define ROW_BYTES 600

static double started[MAX_ROWS], committed[MAX_ROWS], held[MAX_ROWS], read_back[MAX_ROWS];
static atomic_int rows_read = 0;
static char table[64];

typedef struct {
    PGconn *connection;
    int expected;
    int failed;
} listener;

static int run_sql(PGconn *connection, const char *sql) {
    PGresult *result = PQexec(connection, sql);
    ExecStatusType status = PQresultStatus(result);
    int ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (!ok) fprintf(stderr, "bench_pg_floor: %s: %s", sql, PQerrorMessage(connection));
    PQclear(result);
    return ok;
}

/* Waits for each notification, notes when it came, reads its row. */
static void *listen_and_read(void *argument) {
    listener *self = argument;
    int descriptor = PQsocket(self->connection);
    while (atomic_load(&rows_read) < self->expected) {
        PGnotify *note = PQnotifies(self->connection);
        if (note == NULL) {
            fd_set readable;
            FD_ZERO(&readable);
            FD_SET(descriptor, &readable);
            struct timeval limit = {10, 0};
            if (select(descriptor + 1, &readable, NULL, NULL, &limit) <= 0 || !PQconsumeInput(self->connection)) {
                fprintf(stderr, "bench_pg_floor: no notification within 10 s: %s", PQerrorMessage(self->connection));
                self->failed = 1;
                return NULL;
            }
            continue;
        }
        double at = now_us();
        int index = atoi(note->extra);
        PQfreemem(note);
        if (index < 0 || index >= self->expected) continue;
        held[index] = at;
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT body FROM %s WHERE id = %d", table, index);
        PGresult *result = PQexec(self->connection, sql);
        if (PQresultStatus(result) != PGRES_TUPLES_OK || PQntuples(result) != 1 ||
            strlen(PQgetvalue(result, 0, 0)) != ROW_BYTES) {
            fprintf(stderr, "bench_pg_floor: reading row %d: %s", index, PQerrorMessage(self->connection));
            self->failed = 1;
        }
        PQclear(result);
        read_back[index] = now_us();
        atomic_fetch_add(&rows_read, 1);
    }
    return NULL;
}

typedef struct {
    double commit_p50, commit_p99, held_p50, held_p99, read_p50, read_p99;
} floor_result;

static int measure(PGconn *writer, PGconn *reader, int rows, int rate, floor_result *out) {
    char sql[256];
    snprintf(sql, sizeof sql, "TRUNCATE %s", table);
    if (!run_sql(writer, sql)) return 0;
    atomic_store(&rows_read, 0);
    memset(held, 0, sizeof held);
    memset(read_back, 0, sizeof read_back);
    listener self = {reader, rows, 0};
    pthread_t thread;
    if (pthread_create(&thread, NULL, listen_and_read, &self) != 0) return 0;
    double interval = 1e6 / rate, next = now_us();
    int ok = 1;
    for (int i = 0; i < rows && ok; i++) {
        while (now_us() < next) sleep_ms(1);
        next += interval;
        snprintf(sql, sizeof sql,
                 "WITH e AS (INSERT INTO %s (id, body) VALUES (%d, repeat('x', %d)) RETURNING id) "
                 "SELECT pg_notify('%s', id::text) FROM e",
                 table, i, ROW_BYTES, table);
        started[i] = now_us();
        ok = run_sql(writer, sql);
        committed[i] = now_us();
    }
    pthread_join(thread, NULL);
    if (!ok || self.failed) return 0;
    double *commit = malloc(sizeof(double) * (size_t)rows), *hop = malloc(sizeof(double) * (size_t)rows),
           *read = malloc(sizeof(double) * (size_t)rows);
    if (commit == NULL || hop == NULL || read == NULL) return 0;
    for (int i = 0; i < rows; i++) {
        commit[i] = committed[i] - started[i];
        hop[i] = held[i] - started[i];
        read[i] = read_back[i] - started[i];
    }
    *out = (floor_result){quantile(commit, rows, 0.5), quantile(commit, rows, 0.99), quantile(hop, rows, 0.5),
                          quantile(hop, rows, 0.99), quantile(read, rows, 0.5), quantile(read, rows, 0.99)};
    free(commit);
    free(hop);
    free(read);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATABASE_URL [MESSAGES]\n", argv[0]);
        return 2;
    }
    int rows = argc > 2 ? atoi(argv[2]) : 500;
    if (rows < 1 || rows > MAX_ROWS) return 2;
    PGconn *writer = PQconnectdb(argv[1]), *reader = PQconnectdb(argv[1]);
    if (PQstatus(writer) != CONNECTION_OK || PQstatus(reader) != CONNECTION_OK) {
        fprintf(stderr, "bench_pg_floor: connecting: %s%s", PQerrorMessage(writer), PQerrorMessage(reader));
        return 1;
    }
    snprintf(table, sizeof table, "bench_floor_%ld", (long)getpid());
    char sql[256];
    snprintf(sql, sizeof sql, "CREATE TABLE %s (id integer PRIMARY KEY, body text NOT NULL)", table);
    if (!run_sql(writer, sql)) return 1;
    snprintf(sql, sizeof sql, "LISTEN %s", table);
    int ok = run_sql(reader, sql);
    floor_result slow = {0}, fast = {0};
    ok = ok && measure(writer, reader, rows, 50, &slow) && measure(writer, reader, rows, 200, &fast);
    snprintf(sql, sizeof sql, "DROP TABLE %s", table);
    run_sql(writer, sql);
    PQfinish(writer);
    PQfinish(reader);
    if (!ok) return 1;

    printf("PostgreSQL alone under a delivery across servers (raw libpq, %d rows of %d bytes each)\n", rows, ROW_BYTES);
    int rates[2] = {50, 200};
    floor_result *results[2] = {&slow, &fast};
    for (int i = 0; i < 2; i++) {
        floor_result *r = results[i];
        printf("  %3d/s   commit with NOTIFY p50 %5.2f p99 %5.2f ms   notification held p50 %5.2f p99 %5.2f ms"
               "   row read p50 %5.2f p99 %5.2f ms\n",
               rates[i], r->commit_p50 / 1e3, r->commit_p99 / 1e3, r->held_p50 / 1e3, r->held_p99 / 1e3,
               r->read_p50 / 1e3, r->read_p99 / 1e3);
    }
    printf("\n");
    for (int i = 0; i < 2; i++) {
        char measure_name[128], figure[64], comparison[96];
        snprintf(measure_name, sizeof measure_name, "  floor: PostgreSQL's commit, NOTIFY and read, %d msg/s", rates[i]);
        snprintf(figure, sizeof figure, "p50 %.2f p99 %.2f ms", results[i]->read_p50 / 1e3, results[i]->read_p99 / 1e3);
        snprintf(comparison, sizeof comparison, "the commit alone p50 %.2f ms (raw libpq)", results[i]->commit_p50 / 1e3);
        summary_row(measure_name, figure, comparison, "(under the P3 rows above)");
    }
    return 0;
}
