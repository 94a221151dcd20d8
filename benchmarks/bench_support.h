/* What the benchmark programs share: waiting for a completion, a monotonic clock, sorted
 * statistics, admin calls. Header-only (static functions); C11. */
#ifndef PARLEY_BENCH_SUPPORT_H
#define PARLEY_BENCH_SUPPORT_H
#include <parley.h>
#include <pthread.h>
#include <sqlite3.h>
#include <unistd.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int done;
    int code;
    char text[4096];
} waiter;

#define WAITER_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, ""}

static inline void on_result(void *user_data, const parley_error *error, const char *json) {
    waiter *w = user_data;
    pthread_mutex_lock(&w->mutex);
    w->code = error ? error->code : 0;
    snprintf(w->text, sizeof w->text, "%s", error ? error->message : json);
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
}

static inline void wait_done(waiter *w) {
    pthread_mutex_lock(&w->mutex);
    while (!w->done) pthread_cond_wait(&w->cond, &w->mutex);
    w->done = 0;
    pthread_mutex_unlock(&w->mutex);
}

/* A one-slot hand-off from one thread to another: `handoff_post` wakes the thread waiting in
 * `handoff_take` (the benchmarks' floors count these, as the engine's thread hops). */
typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int posted;
} handoff;

static inline void handoff_init(handoff *box) {
    pthread_mutex_init(&box->mutex, NULL);
    pthread_cond_init(&box->cond, NULL);
    box->posted = 0;
}

static inline void handoff_post(handoff *box) {
    pthread_mutex_lock(&box->mutex);
    box->posted = 1;
    pthread_cond_signal(&box->cond);
    pthread_mutex_unlock(&box->mutex);
}

static inline void handoff_take(handoff *box) {
    pthread_mutex_lock(&box->mutex);
    while (!box->posted) pthread_cond_wait(&box->cond, &box->mutex);
    box->posted = 0;
    pthread_mutex_unlock(&box->mutex);
}

static inline double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static inline void sleep_ms(long ms) {
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

static inline int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of `values` (sorted in place). */
static inline double quantile(double *values, int count, double q) {
    if (count <= 0) return 0;
    qsort(values, (size_t)count, sizeof *values, compare_doubles);
    int index = (int)(q * (count - 1) + 0.5);
    return values[index];
}

static inline double median(double *values, int count) { return quantile(values, count, 0.5); }

/* One row of the summary table scripts/bench.sh prints (tab-separated, read by the script):
 * the measure, Parley's figure, what it is compared with (measured in the same run), the goal. */
static inline void summary_row(const char *measure, const char *parley, const char *comparison, const char *goal) {
    printf("ROW\t%s\t%s\t%s\t%s\n", measure, parley, comparison, goal);
}

/* Runs one admin REST call and waits; prints the failure. */
static inline int admin(parley_client *client, waiter *w, const char *method, const char *path, const char *body) {
    if (parley_client_request(client, NULL, method, path, body, on_result, w) != PARLEY_OK) return 0;
    wait_done(w);
    if (w->code != 0) fprintf(stderr, "%s %s failed: %s\n", method, path, w->text);
    return w->code == 0;
}

/* The session token of `user` (admin call), into `token`. */
static inline int user_token(parley_client *root, waiter *w, const char *user, char *token, size_t size) {
    char path[256], format[32];
    snprintf(path, sizeof path, "/v3/users/%s/token", user);
    if (!admin(root, w, "POST", path, "{}")) return 0;
    const char *found = strstr(w->text, "\"token\":\"");
    if (found == NULL) return 0;
    snprintf(format, sizeof format, "%%%zu[^\"]", size - 1);
    return sscanf(found + 9, format, token) == 1;
}

/* A client with the server's API token and an in-memory cache, for setting the scene. */
static inline parley_client *admin_client(const char *url, const char *api_token) {
    char config[1024];
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"api_token\": \"%s\", \"cache_mode\": \"memory\"}", url, api_token);
    parley_client *root = NULL;
    return parley_client_create(&root, config) == PARLEY_OK ? root : NULL;
}

/* A new user PREFIX-<time>-<pid> alone in a new channel of the same name, and the user's
 * session token. */
static inline int solo_user_and_channel(parley_client *root, waiter *w, const char *prefix, char *user, size_t user_size,
                                        char *channel, size_t channel_size, char *token, size_t token_size) {
    char body[512];
    snprintf(user, user_size, "%s-%ld-%d", prefix, (long)time(NULL), (int)getpid());
    snprintf(channel, channel_size, "%s", user);
    snprintf(body, sizeof body, "{\"user_id\": \"%s\"}", user);
    if (!admin(root, w, "POST", "/v3/users", body)) return 0;
    snprintf(body, sizeof body, "{\"user_ids\": [\"%s\"], \"channel_url\": \"%s\"}", user, channel);
    if (!admin(root, w, "POST", "/v3/group_channels", body)) return 0;
    return user_token(root, w, user, token, token_size);
}

/* With PARLEY_BENCH_CACHE_KEY (64 hexadecimal digits) in the environment, the clients the
 * benchmarks measure encrypt their cache with it (docs/C-API.md "Encryption at rest");
 * scripts/bench.sh runs the sends, the cached reads and the catch-up both ways. bench_views
 * and bench_search fill a plain cache (their raw writes and floors need one) and time their
 * first pages on a plain and an encrypted copy of it (`twin_copies`). The configuration
 * member to add ("" without it). */
static inline const char *cache_key_member(void) {
    static char member[128];
    const char *key = getenv("PARLEY_BENCH_CACHE_KEY");
    if (key == NULL || *key == '\0') return "";
    snprintf(member, sizeof member, ", \"cache_key\": \"%.64s\"", key);
    return member;
}

/* A client with its cache under `cache_dir` (`key_member`: "" or cache_key_member()), the
 * event handler set (when `on_event` is not NULL), connected as `user`, its event stream
 * open. NULL on failure (printed). */
static inline parley_client *connected_client_keyed(const char *url, const char *cache_dir, const char *user, const char *token,
                                                    parley_event_fn on_event, const char *key_member) {
    char config[1024];
    /* A limit above every cache the benchmarks build: a client that keeps a million messages is
     * configured to (with the default 256 MB the connect would start evicting them). */
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s\", \"cache_size_limit_mb\": 8192%s}", url,
             cache_dir, key_member);
    parley_client *client = NULL;
    waiter w = WAITER_INIT;
    if (parley_client_create(&client, config) != PARLEY_OK) return NULL;
    if (on_event) parley_client_set_event_handler(client, on_event, NULL);
    if (parley_client_connect(client, NULL, user, token, on_result, &w) != PARLEY_OK) return NULL;
    wait_done(&w);
    if (w.code != 0) {
        fprintf(stderr, "connect failed: %s\n", w.text);
        parley_client_destroy(client);
        return NULL;
    }
    for (int i = 0; i < 300; i++) {
        int state = 0;
        parley_client_connection_state(client, &state);
        if (state == PARLEY_STATE_OPEN) break;
        sleep_ms(10);
    }
    return client;
}

/* The same, encrypted with PARLEY_BENCH_CACHE_KEY when it is set. */
static inline parley_client *connected_client(const char *url, const char *cache_dir, const char *user, const char *token,
                                              parley_event_fn on_event) {
    return connected_client_keyed(url, cache_dir, user, token, on_event, cache_key_member());
}

/* The path of the cache file under `directory` (static storage), NULL when there is none. */
static inline const char *cache_file_in(const char *directory) {
    char find[512];
    static char path[1024];
    snprintf(find, sizeof find, "find '%s' -name '*.sqlite' | head -1", directory);
    FILE *finder = popen(find, "r");
    if (finder == NULL) return NULL;
    char *line = fgets(path, sizeof path, finder);
    pclose(finder);
    if (line == NULL) return NULL;
    path[strcspn(path, "\n")] = '\0';
    return path;
}

/* With PARLEY_BENCH_WITHOUT_SEARCH_INDEX=1 in the environment, removes the search index
 * (its triggers and table) from the cache file under `directory`, so that the run
 * measures the cache's writes without it; scripts/bench.sh runs the sends and the catch-up
 * both ways. Returns what to add to the rows' names ("" normally; " [cache encrypted]" with
 * PARLEY_BENCH_CACHE_KEY, which this does not combine with). The client keeps its
 * connection: SQLite sees the changed schema at its next statement. */
static inline const char *search_index_variant(const char *directory) {
    if (*cache_key_member() != '\0') return " [cache encrypted]";
    const char *flag = getenv("PARLEY_BENCH_WITHOUT_SEARCH_INDEX");
    if (flag == NULL || strcmp(flag, "1") != 0) return "";
    const char *path = cache_file_in(directory);
    sqlite3 *db = NULL;
    if (path == NULL || sqlite3_open(path, &db) != SQLITE_OK) {
        fprintf(stderr, "no cache file under %s\n", directory);
        exit(1);
    }
    sqlite3_busy_timeout(db, 10000);
    char *error = NULL;
    /* The (now always empty) table of noted changes stays: the library looks into it at
     * commits and before searches. */
    if (sqlite3_exec(db,
                     "DROP TRIGGER message_search_after_insert; DROP TRIGGER message_search_after_delete;"
                     " DROP TRIGGER message_search_after_update; DROP TABLE message_search;",
                     NULL, NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "removing the search index: %s\n", error);
        exit(1);
    }
    sqlite3_close(db);
    return " [no search index]";
}

static inline long long file_bytes(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 ? (long long)info.st_size : 0;
}

/* What the library does at commits and before searches (ChatCache.indexChangedMessages in
 * Sources/ParleyCore/Store/ChatCache+Search.swift): the messages the triggers noted as
 * changed go into the search index. Raw writers of the cache file run it before COMMIT. */
static inline int index_noted_changes(sqlite3 *db) {
    char *error = NULL;
    sqlite3_stmt *noted = NULL;
    int any = 0;
    if (sqlite3_prepare_v2(db, "SELECT EXISTS (SELECT 1 FROM message_search_changes)", -1, &noted, NULL) == SQLITE_OK &&
        sqlite3_step(noted) == SQLITE_ROW) {
        any = sqlite3_column_int(noted, 0);
    }
    sqlite3_finalize(noted);
    if (!any) return 1; /* nothing noted (or no index: PARLEY_BENCH_WITHOUT_SEARCH_INDEX) */
    int code = sqlite3_exec(db,
                            "INSERT INTO message_search (message_search, rowid, search_text, search_file_name)"
                            " SELECT 'delete', c.message_id, c.old_text, c.old_file_name FROM message_search_changes c"
                            " WHERE c.indexed AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.message_id = c.message_id"
                            " AND m.search_text = c.old_text AND m.search_file_name = c.old_file_name) ORDER BY c.message_id;"
                            "INSERT INTO message_search (rowid, search_text, search_file_name)"
                            " SELECT m.message_id, m.search_text, m.search_file_name"
                            " FROM message_search_changes c CROSS JOIN messages m ON m.message_id = c.message_id"
                            " WHERE NOT (c.indexed AND m.search_text = c.old_text AND m.search_file_name = c.old_file_name)"
                            " ORDER BY c.message_id;"
                            "DELETE FROM message_search_changes;",
                            NULL, NULL, &error);
    if (code != SQLITE_OK) {
        fprintf(stderr, "indexing the noted changes: %s\n", error ? error : "?");
    }
    sqlite3_free(error);
    return code == SQLITE_OK;
}

/* Adds copies of the oldest cached message of the cache file at `path` below it (older
 * times, ids from 1,000,000,000 up, each copy its own key), `pad_bytes` of random data in
 * each (0: none): `count` of them, or with `until_bytes` > 0, batches of 20,000 until the
 * file holds that many bytes. Written with raw sqlite3 (the cache's own schema). */
static inline int add_message_copies(const char *path, int count, int pad_bytes, long long until_bytes) {
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) return 0;
    char padding[96] = "", setup[512], *error = NULL;
    if (pad_bytes > 0) snprintf(padding, sizeof padding, ", json = json_set(json, '$.data', hex(randomblob(%d)))", pad_bytes / 2);
    snprintf(setup, sizeof setup,
             "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;"
             "CREATE TEMP TABLE template AS SELECT * FROM messages ORDER BY created_at, message_id LIMIT 1;"
             "UPDATE template SET message_id = 1000000000%s;",
             padding);
    if (sqlite3_exec(db, setup, NULL, NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "copies: %s\n", error);
        sqlite3_close(db);
        return 0;
    }
    sqlite3_stmt *bump = NULL, *copy = NULL;
    sqlite3_prepare_v2(db, "UPDATE template SET message_id = message_id + 1, created_at = created_at - 1", -1, &bump, NULL);
    sqlite3_prepare_v2(db, "INSERT INTO messages SELECT * FROM template", -1, &copy, NULL);
    int ok = 1;
    for (int done = 0; ok && (until_bytes > 0 ? file_bytes(path) < until_bytes : done < count);) {
        int batch = until_bytes > 0 ? 20000 : (count - done < 20000 ? count - done : 20000);
        sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        for (int i = 0; i < batch; i++) {
            sqlite3_step(bump);
            sqlite3_reset(bump);
            if (sqlite3_step(copy) != SQLITE_DONE) {
                fprintf(stderr, "copies: %s\n", sqlite3_errmsg(db));
                ok = 0;
                break;
            }
            sqlite3_reset(copy);
        }
        index_noted_changes(db);
        sqlite3_exec(db, "COMMIT; PRAGMA wal_checkpoint(TRUNCATE);", NULL, NULL, NULL);
        done += batch;
    }
    sqlite3_finalize(bump);
    sqlite3_finalize(copy);
    sqlite3_close(db);
    return ok;
}

/* For the comparisons with encryption on (bench_views, bench_search): two compact copies of
 * the plain cache file `path` (under the cache directory `directory`) at the same place under
 * new cache directories (mkdtemp templates): a plain one (VACUUM INTO) and a byte copy of it
 * that its first keyed connect encrypts, which writes it again with VACUUM INTO
 * (docs/C-API.md, "A plain cache opened with a key"): the two are laid out alike, unlike the
 * file the raw writes left. The plain copy's path into `plain_file`, the other's into
 * `keyed_file`. */
static inline int twin_copies(const char *directory, const char *path, char *plain_dir, char *keyed_dir, char *plain_file,
                              char *keyed_file, size_t size) {
    size_t prefix = strlen(directory);
    const char *name = strrchr(path, '/');
    if (strncmp(path, directory, prefix) != 0 || name == NULL || mkdtemp(plain_dir) == NULL || mkdtemp(keyed_dir) == NULL) return 0;
    snprintf(plain_file, size, "%s%s", plain_dir, path + prefix);
    snprintf(keyed_file, size, "%s%s", keyed_dir, path + prefix);
    char command[2300];
    /* The file's folder (the server's) under each new directory. */
    snprintf(command, sizeof command, "mkdir -p '%.*s' '%.*s'", (int)(strlen(plain_file) - strlen(name)), plain_file,
             (int)(strlen(keyed_file) - strlen(name)), keyed_file);
    if (system(command) != 0) return 0;
    sqlite3 *db = NULL;
    sqlite3_stmt *copy = NULL;
    int ok = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
             sqlite3_prepare_v2(db, "VACUUM INTO ?1", -1, &copy, NULL) == SQLITE_OK &&
             sqlite3_bind_text(copy, 1, plain_file, -1, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(copy) == SQLITE_DONE;
    if (!ok) fprintf(stderr, "copying %s: %s\n", path, sqlite3_errmsg(db));
    sqlite3_finalize(copy);
    sqlite3_close(db);
    snprintf(command, sizeof command, "cp '%s' '%s'", plain_file, keyed_file);
    return ok && system(command) == 0;
}

/* Whether the file at `path` is an encrypted cache (does not begin with SQLite's header). */
static inline int file_is_sealed(const char *path) {
    char start[16] = {0};
    FILE *file = fopen(path, "rb");
    size_t got = file ? fread(start, 1, sizeof start, file) : 0;
    if (file) fclose(file);
    return got == sizeof start && memcmp(start, "SQLite format 3", 16) != 0;
}

/* Waits up to `seconds` for the full check the library runs once beside a large file's first
 * connects (it writes `<file>.checked` when done, `<file>.damaged` when it found damage), so
 * that it does not share the cores with the timed reads. 1 when it finished, 0 when it did
 * not in time, -1 when it found damage (printed). */
static inline int wait_checked(const char *file, int seconds) {
    /* Up to 64 MiB the check runs inside the connect (SQLiteDatabase.fullCheckLimitBytes). */
    if (file_bytes(file) <= (64LL << 20)) return 1;
    char checked[1100], damaged[1100], detail[512] = "";
    snprintf(checked, sizeof checked, "%s.checked", file);
    snprintf(damaged, sizeof damaged, "%s.damaged", file);
    for (int i = 0; i < seconds * 10; i++) {
        if (access(checked, F_OK) == 0) return 1;
        FILE *marker = fopen(damaged, "r");
        if (marker != NULL) {
            size_t got = fread(detail, 1, sizeof detail - 1, marker);
            detail[got] = '\0';
            fclose(marker);
            fprintf(stderr, "the full check of %s found damage: %s\n", file, detail);
            return -1;
        }
        sleep_ms(100);
    }
    fprintf(stderr, "the full check of %s did not finish in %d s: the timed reads run beside it\n", file, seconds);
    return 0;
}

#endif
