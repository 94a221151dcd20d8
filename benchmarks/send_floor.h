/* The floor under P8 (a send through the outbox): what any engine that keeps Parley's rules
 * must do for one send, written in plain C with nothing else, so that bench_engine can print
 * it beside the raw POST and the engine's own send.
 *
 * The rules it keeps (shared/SEMANTICS.md "Sending", docs/THREADING.md):
 *   - the call returns once the pending message and its outbox row are committed, before
 *     any network I/O;
 *   - the cache has one writer, a serial executor (the engine queue): the call runs its part
 *     on the caller's thread while it holds the executor (as dispatch_sync does when the
 *     queue is idle), work handed to it later runs on its own thread (as dispatch_async);
 *   - requests go out from the network thread, which drives a libcurl multi handle woken by
 *     curl_multi_wakeup;
 *   - the completion runs on the callback thread, once the cache holds the server's copy
 *     (a second commit: the copy in place of the pending row, the outbox row gone).
 * So a send is: a commit on the caller's thread, then caller -> network (POST) -> engine
 * (commit) -> callback -> caller: four hand-offs between threads and two commits around the
 * raw POST.
 *
 * What it leaves out, all of which the engine does: parsing the answer, the change feed and
 * the views, the outbox journal, the search index, the stream's echo of the message (it is
 * received by the engine client all the same: the POSTs are that client's), logging. Its
 * figure is therefore a lower bound for the engine's.
 *
 * The cache file is a table pair shaped like the engine's (messages keyed by req_id and by
 * channel and time; the outbox by req_id), WAL with synchronous=NORMAL as the engine's. */
#ifndef PARLEY_BENCH_SEND_FLOOR_H
#define PARLEY_BENCH_SEND_FLOOR_H
#include "bench_support.h"
#include <curl/curl.h>
#include <stdatomic.h>

enum { floor_stop = 0, floor_answer = 1 };

typedef struct {
    /* the engine executor: its lock, and its thread for work handed to it */
    sqlite3 *db;
    sqlite3_stmt *insert_message, *insert_outbox, *confirm_message, *delete_outbox;
    pthread_mutex_t executor;
    handoff to_executor;
    int executor_stage;
    /* network thread */
    CURLM *multi;
    CURL *easy;
    struct curl_slist *headers;
    atomic_int request_posted, stopping;
    char answer[16384];
    size_t answer_bytes;
    long answer_status;
    /* callback thread */
    handoff to_callback;
    int callback_stopping;
    /* the caller */
    handoff completed;
    char req_id[96], body[512], pending[768];
    long long sequence;
    /* Each step's end, per send (index sequence - 1): the first commit, the request taken
     * by the network thread, its answer, the second commit, the callback's start. */
    double *step_at[5];
    int capacity;
    double *started_at, *completed_at;
    int failed;
    char failure[256];
    pthread_t executor_thread, network, callback;
} send_floor;

static size_t floor_collect(char *data, size_t size, size_t count, void *user_data) {
    send_floor *floor = user_data;
    size_t bytes = size * count;
    if (floor->answer_bytes + bytes < sizeof floor->answer) {
        memcpy(floor->answer + floor->answer_bytes, data, bytes);
        floor->answer_bytes += bytes;
    }
    return bytes;
}

static void floor_fail(send_floor *floor, const char *what, const char *detail) {
    if (!floor->failed) snprintf(floor->failure, sizeof floor->failure, "%s: %s", what, detail);
    floor->failed = 1;
}

static void floor_mark(send_floor *floor, int step) {
    long long index = floor->sequence - 1;
    if (index >= 0 && index < floor->capacity) floor->step_at[step][index] = now_us();
}

static int floor_step(send_floor *floor, sqlite3_stmt *statement) {
    int code = sqlite3_step(statement);
    sqlite3_reset(statement);
    if (code != SQLITE_DONE) floor_fail(floor, "sqlite", sqlite3_errmsg(floor->db));
    return code == SQLITE_DONE;
}

/* The pending message and its outbox row, in one transaction, then the request to the
 * network thread: run holding the executor. */
static void floor_accept_send(send_floor *floor) {
    sqlite3_exec(floor->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    sqlite3_bind_text(floor->insert_message, 1, floor->req_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(floor->insert_message, 2, floor->sequence);
    sqlite3_bind_text(floor->insert_message, 3, floor->pending, -1, SQLITE_STATIC);
    floor_step(floor, floor->insert_message);
    sqlite3_bind_text(floor->insert_outbox, 1, floor->req_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(floor->insert_outbox, 2, floor->body, -1, SQLITE_STATIC);
    floor_step(floor, floor->insert_outbox);
    if (sqlite3_exec(floor->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) floor_fail(floor, "commit", sqlite3_errmsg(floor->db));
    floor_mark(floor, 0);
    atomic_store(&floor->request_posted, 1);
    curl_multi_wakeup(floor->multi);
}

/* The executor's thread: the server's copy in place of the pending row, the outbox row gone,
 * then the completion to the callback thread. */
static void *floor_executor_main(void *argument) {
    send_floor *floor = argument;
    for (;;) {
        handoff_take(&floor->to_executor);
        if (floor->executor_stage == floor_stop) return NULL;
        pthread_mutex_lock(&floor->executor);
        sqlite3_exec(floor->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        sqlite3_bind_text(floor->confirm_message, 1, floor->answer, (int)floor->answer_bytes, SQLITE_STATIC);
        sqlite3_bind_text(floor->confirm_message, 2, floor->req_id, -1, SQLITE_STATIC);
        floor_step(floor, floor->confirm_message);
        sqlite3_bind_text(floor->delete_outbox, 1, floor->req_id, -1, SQLITE_STATIC);
        floor_step(floor, floor->delete_outbox);
        if (sqlite3_exec(floor->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) floor_fail(floor, "commit", sqlite3_errmsg(floor->db));
        floor_mark(floor, 3);
        pthread_mutex_unlock(&floor->executor);
        handoff_post(&floor->to_callback);
    }
}

static void *floor_network_main(void *argument) {
    send_floor *floor = argument;
    while (!atomic_load(&floor->stopping)) {
        if (atomic_exchange(&floor->request_posted, 0)) {
            floor->answer_bytes = 0;
            floor_mark(floor, 1);
            curl_easy_setopt(floor->easy, CURLOPT_POSTFIELDS, floor->body);
            curl_multi_add_handle(floor->multi, floor->easy);
        }
        int running = 0;
        curl_multi_perform(floor->multi, &running);
        CURLMsg *message;
        int left = 0;
        while ((message = curl_multi_info_read(floor->multi, &left)) != NULL) {
            if (message->msg != CURLMSG_DONE) continue;
            CURLcode code = message->data.result;
            floor_mark(floor, 2);
            curl_easy_getinfo(floor->easy, CURLINFO_RESPONSE_CODE, &floor->answer_status);
            curl_multi_remove_handle(floor->multi, floor->easy);
            if (code != CURLE_OK) floor_fail(floor, "curl", curl_easy_strerror(code));
            if (floor->answer_status != 200) floor_fail(floor, "POST", "the server did not answer 200");
            floor->answer[floor->answer_bytes] = '\0';
            floor->executor_stage = floor_answer;
            handoff_post(&floor->to_executor);
        }
        curl_multi_poll(floor->multi, NULL, 0, 1000, NULL);
    }
    return NULL;
}

static void *floor_callback_main(void *argument) {
    send_floor *floor = argument;
    for (;;) {
        handoff_take(&floor->to_callback);
        if (floor->callback_stopping) return NULL;
        floor_mark(floor, 4);
        handoff_post(&floor->completed);
    }
}

/* Opens the floor's cache in `directory` and its threads; 0 on failure (message printed). */
static inline int send_floor_start(send_floor *floor, const char *directory, const char *endpoint, const char *session_header,
                                   int sends) {
    memset(floor, 0, sizeof *floor);
    floor->capacity = sends;
    for (int step = 0; step < 5; step++) {
        floor->step_at[step] = calloc((size_t)sends, sizeof(double));
        if (floor->step_at[step] == NULL) return 0;
    }
    floor->started_at = calloc((size_t)sends, sizeof(double));
    floor->completed_at = calloc((size_t)sends, sizeof(double));
    if (floor->started_at == NULL || floor->completed_at == NULL) return 0;
    char path[1024];
    snprintf(path, sizeof path, "%s/send-floor.sqlite", directory);
    if (sqlite3_open(path, &floor->db) != SQLITE_OK ||
        sqlite3_exec(floor->db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                     "CREATE TABLE messages (row INTEGER PRIMARY KEY, message_id INTEGER NOT NULL DEFAULT 0,"
                     " channel_url TEXT NOT NULL, created_at INTEGER NOT NULL, req_id TEXT NOT NULL, json TEXT NOT NULL);"
                     "CREATE INDEX messages_by_time ON messages (channel_url, created_at, message_id);"
                     "CREATE UNIQUE INDEX messages_by_req_id ON messages (req_id);"
                     "CREATE TABLE outbox (req_id TEXT PRIMARY KEY, request TEXT NOT NULL) WITHOUT ROWID;",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(floor->db, "INSERT INTO messages (channel_url, created_at, req_id, json) VALUES ('floor', ?2, ?1, ?3)", -1,
                           &floor->insert_message, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(floor->db, "INSERT INTO outbox (req_id, request) VALUES (?1, ?2)", -1, &floor->insert_outbox, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(floor->db, "UPDATE messages SET json = ?1, message_id = row WHERE req_id = ?2", -1, &floor->confirm_message,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(floor->db, "DELETE FROM outbox WHERE req_id = ?1", -1, &floor->delete_outbox, NULL) != SQLITE_OK) {
        fprintf(stderr, "send floor: %s\n", floor->db ? sqlite3_errmsg(floor->db) : "cannot open its cache");
        return 0;
    }
    floor->multi = curl_multi_init();
    floor->easy = curl_easy_init();
    floor->headers = curl_slist_append(NULL, session_header);
    floor->headers = curl_slist_append(floor->headers, "Content-Type: application/json");
    curl_easy_setopt(floor->easy, CURLOPT_URL, endpoint);
    curl_easy_setopt(floor->easy, CURLOPT_HTTPHEADER, floor->headers);
    curl_easy_setopt(floor->easy, CURLOPT_WRITEFUNCTION, floor_collect);
    curl_easy_setopt(floor->easy, CURLOPT_WRITEDATA, floor);
    curl_easy_setopt(floor->easy, CURLOPT_TIMEOUT_MS, 30000L);  /* a failure, not a hang */
    handoff_init(&floor->to_executor);
    handoff_init(&floor->to_callback);
    pthread_mutex_init(&floor->executor, NULL);
    handoff_init(&floor->completed);
    pthread_create(&floor->executor_thread, NULL, floor_executor_main, floor);
    pthread_create(&floor->network, NULL, floor_network_main, floor);
    pthread_create(&floor->callback, NULL, floor_callback_main, floor);
    return 1;
}

/* One send, as the engine's is timed: from the call to the completion's wake-up of the
 * caller. `returned_us` gets the time to the call's return. 0 if it failed. */
static inline int send_floor_send(send_floor *floor, const char *text, const char *suffix, double *returned_us, double *completed_us) {
    floor->sequence++;
    snprintf(floor->req_id, sizeof floor->req_id, "floor-%s-%lld", suffix, floor->sequence);
    snprintf(floor->body, sizeof floor->body, "{\"message_type\": \"MESG\", \"message\": \"%s\", \"req_id\": \"%s\"}", text, floor->req_id);
    double t0 = now_us();
    if (floor->sequence - 1 < floor->capacity) floor->started_at[floor->sequence - 1] = t0;
    /* The pending message as a client would store it (the body's fields and its state). */
    snprintf(floor->pending, sizeof floor->pending,
             "{\"channel_url\":\"floor\",\"created_at\":%lld,\"message\":\"%s\",\"message_id\":0,\"req_id\":\"%s\","
             "\"sending_status\":\"pending\",\"type\":\"MESG\"}",
             (long long)(t0 / 1000), text, floor->req_id);
    pthread_mutex_lock(&floor->executor);
    floor_accept_send(floor);
    pthread_mutex_unlock(&floor->executor);
    *returned_us = now_us() - t0;
    handoff_take(&floor->completed);
    double done = now_us();
    if (floor->sequence - 1 < floor->capacity) floor->completed_at[floor->sequence - 1] = done;
    *completed_us = done - t0;
    return !floor->failed;
}

/* Prints the median of each step of the first `sends` sends. */
static inline void send_floor_print_steps(send_floor *floor, int sends) {
    static const char *names[6] = {"the first commit (caller's thread)", "to the network thread", "the POST on the wire",
                                   "to the executor's thread + second commit", "to the callback thread", "to the caller"};
    double *spans = malloc(sizeof(double) * (size_t)sends);
    if (spans == NULL) return;
    printf("    its steps (medians):");
    for (int step = 0; step < 6; step++) {
        for (int i = 0; i < sends; i++) {
            double begin = step == 0 ? floor->started_at[i] : floor->step_at[step - 1][i];
            double end = step == 5 ? floor->completed_at[i] : floor->step_at[step][i];
            spans[i] = end - begin;
        }
        printf("%s %s %.0f us", step == 0 ? "" : ",", names[step], median(spans, sends));
    }
    printf("\n");
    free(spans);
}

static inline void send_floor_stop(send_floor *floor) {
    floor->executor_stage = floor_stop;
    handoff_post(&floor->to_executor);
    pthread_join(floor->executor_thread, NULL);
    atomic_store(&floor->stopping, 1);
    curl_multi_wakeup(floor->multi);
    pthread_join(floor->network, NULL);
    floor->callback_stopping = 1;
    handoff_post(&floor->to_callback);
    pthread_join(floor->callback, NULL);
    sqlite3_finalize(floor->insert_message);
    sqlite3_finalize(floor->insert_outbox);
    sqlite3_finalize(floor->confirm_message);
    sqlite3_finalize(floor->delete_outbox);
    sqlite3_close(floor->db);
    curl_multi_cleanup(floor->multi);
    curl_easy_cleanup(floor->easy);
    curl_slist_free_all(floor->headers);
    for (int step = 0; step < 5; step++) free(floor->step_at[step]);
    free(floor->started_at);
    free(floor->completed_at);
}

#endif
