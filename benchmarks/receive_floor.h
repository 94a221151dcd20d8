/* The floor under a received message: what any engine that keeps Parley's rules must do
 * with one live message it receives, written in plain C with nothing else, so that
 * bench_many can print the library's CPU per received message beside it.
 *
 * The frames are the real ones: a plain libcurl reader captures a member's event stream
 * (GET /v3/users/{id}/events) while messages are posted into a channel, keeping the bytes
 * as they came, chunk by chunk. The floor then replays them from memory, so that it costs
 * what the rules cost and not the network:
 *   - the SSE lines are split into events, each event's data parsed with jansson;
 *   - each chunk's events are stored in one SQLite transaction: the message (its columns
 *     and its canonical JSON text), the channel it changed (its JSON text, upserted), and the
 *     message's entry in an FTS5 index shaped like the cache's (unicode61, prefixes 1-4);
 *   - each event is then handed, as the JSON text of its data, to a callback thread through
 *     a mutex/condvar queue, and the callback reads it.
 * Its CPU per message is the process's CPU over the replay divided by the messages.
 *
 * What it leaves out, all of which the library does: reading the socket (the frames come
 * from memory), the stream's state machine and resume position, merging the event's
 * changed members into the stored channel, the change feed, the outbox, logging. So it is
 * a lower bound. Its database is a file (WAL, synchronous=NORMAL, as the cache's) or, for
 * clients with memory caches, ":memory:". */
#ifndef PARLEY_BENCH_RECEIVE_FLOOR_H
#define PARLEY_BENCH_RECEIVE_FLOOR_H
#include "bench_support.h"
#include <curl/curl.h>
#include <jansson.h>
#include <stdatomic.h>

/* ---- Capture: a member's stream, chunk by chunk ------------------------------------ */

typedef struct {
    char *bytes;
    size_t length;
} captured_chunk;

typedef struct {
    char url[768];
    char session_header[320];
    pthread_t thread;
    atomic_int stop, open, finished;
    pthread_mutex_t mutex;
    captured_chunk *chunks;
    int chunk_count, chunk_capacity;
    int messages; /* "event: message_received" lines seen so far */
} stream_capture;

static size_t capture_write(char *data, size_t size, size_t count, void *user_data) {
    stream_capture *capture = user_data;
    size_t length = size * count;
    if (atomic_load(&capture->stop)) return 0;
    if (!atomic_load(&capture->open) && strstr(data, "event: connected") != NULL) atomic_store(&capture->open, 1);
    pthread_mutex_lock(&capture->mutex);
    if (capture->chunk_count == capture->chunk_capacity) {
        int capacity = capture->chunk_capacity ? capture->chunk_capacity * 2 : 256;
        captured_chunk *grown = realloc(capture->chunks, (size_t)capacity * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&capture->mutex);
            return 0;
        }
        capture->chunks = grown;
        capture->chunk_capacity = capacity;
    }
    captured_chunk *chunk = &capture->chunks[capture->chunk_count++];
    chunk->bytes = malloc(length + 1);
    if (chunk->bytes != NULL) {
        memcpy(chunk->bytes, data, length);
        chunk->bytes[length] = '\0';
    }
    chunk->length = chunk->bytes ? length : 0;
    /* A line split between chunks is missed by this count; the count only says when to stop. */
    for (const char *at = chunk->bytes; at != NULL && (at = strstr(at, "event: message_received")) != NULL; at++) capture->messages++;
    pthread_mutex_unlock(&capture->mutex);
    return length;
}

static int capture_progress(void *user_data, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
    (void)a; (void)b; (void)c; (void)d;
    return atomic_load(&((stream_capture *)user_data)->stop) ? 1 : 0;
}

static void *capture_run(void *user_data) {
    stream_capture *capture = user_data;
    CURL *curl = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, capture->session_header);
    curl_easy_setopt(curl, CURLOPT_URL, capture->url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, capture_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, capture);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, capture_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, capture);
    curl_easy_perform(curl);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    atomic_store(&capture->finished, 1);
    return NULL;
}

/* Opens `user`'s stream and starts keeping its bytes; NULL (printed) if it did not open in 10 s. */
static stream_capture *capture_start(const char *server_url, const char *user, const char *session_token) {
    stream_capture *capture = calloc(1, sizeof *capture);
    if (capture == NULL) return NULL;
    pthread_mutex_init(&capture->mutex, NULL);
    snprintf(capture->url, sizeof capture->url, "%s/v3/users/%s/events", server_url, user);
    snprintf(capture->session_header, sizeof capture->session_header, "Session-Key: %s", session_token);
    if (pthread_create(&capture->thread, NULL, capture_run, capture) != 0) {
        free(capture);
        return NULL;
    }
    for (int waited = 0; waited < 10000 && !atomic_load(&capture->open) && !atomic_load(&capture->finished); waited += 5) sleep_ms(5);
    if (!atomic_load(&capture->open)) {
        fprintf(stderr, "receive floor: the captured stream did not open\n");
        atomic_store(&capture->stop, 1);
        pthread_join(capture->thread, NULL);
        free(capture);
        return NULL;
    }
    return capture;
}

static int capture_messages(stream_capture *capture) {
    pthread_mutex_lock(&capture->mutex);
    int messages = capture->messages;
    pthread_mutex_unlock(&capture->mutex);
    return messages;
}

/* Stops reading; the chunks stay for the replay. */
static void capture_stop(stream_capture *capture) {
    atomic_store(&capture->stop, 1);
    pthread_join(capture->thread, NULL);
}

static void capture_free(stream_capture *capture) {
    if (capture == NULL) return;
    for (int i = 0; i < capture->chunk_count; i++) free(capture->chunks[i].bytes);
    free(capture->chunks);
    free(capture);
}

/* Writes a stopped capture to `path` (the message count, then each chunk's length and bytes),
 * so that another process can replay it; 1 on success. */
static int capture_save(const stream_capture *capture, const char *path) {
    FILE *out = fopen(path, "wb");
    if (out == NULL) return 0;
    long long header[2] = {capture->messages, capture->chunk_count};
    int ok = fwrite(header, sizeof header, 1, out) == 1;
    for (int i = 0; ok && i < capture->chunk_count; i++) {
        unsigned long long length = capture->chunks[i].length;
        ok = fwrite(&length, sizeof length, 1, out) == 1 && fwrite(capture->chunks[i].bytes, 1, length, out) == length;
    }
    return fclose(out) == 0 && ok;
}

/* A capture written by capture_save, for replay only; NULL if the file is missing or short. */
static stream_capture *capture_load(const char *path) {
    FILE *in = fopen(path, "rb");
    if (in == NULL) return NULL;
    stream_capture *capture = calloc(1, sizeof *capture);
    long long header[2];
    int ok = capture != NULL && fread(header, sizeof header, 1, in) == 1 && header[1] >= 0 && header[1] < 1000000;
    if (ok) {
        capture->messages = (int)header[0];
        capture->chunks = calloc((size_t)header[1] + 1, sizeof *capture->chunks);
        ok = capture->chunks != NULL;
    }
    for (long long i = 0; ok && i < header[1]; i++) {
        unsigned long long length = 0;
        ok = fread(&length, sizeof length, 1, in) == 1 && length < (1ULL << 30);
        char *bytes = ok ? malloc(length + 1) : NULL;
        ok = ok && bytes != NULL && fread(bytes, 1, length, in) == length;
        if (bytes != NULL) capture->chunks[capture->chunk_count++] = (captured_chunk){bytes, length};
    }
    fclose(in);
    if (!ok) {
        capture_free(capture);
        return NULL;
    }
    return capture;
}

/* ---- The callback thread and its queue -------------------------------------------- */

typedef struct floor_event {
    struct floor_event *next;
    char *channel_url;
    char *payload;
    char category[40];
} floor_event;

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    floor_event *head, *tail;
    int stopping;
    long delivered;
    long payload_bytes; /* read by the callback, as an application reads what it is handed */
    pthread_t thread;
} floor_callbacks;

static void floor_callback(floor_callbacks *callbacks, const floor_event *event) {
    if (strcmp(event->category, "message_received") == 0) callbacks->delivered++;
    callbacks->payload_bytes += (long)(strlen(event->payload) + strlen(event->channel_url));
}

static void *floor_callback_run(void *user_data) {
    floor_callbacks *callbacks = user_data;
    pthread_mutex_lock(&callbacks->mutex);
    for (;;) {
        while (callbacks->head == NULL && !callbacks->stopping) pthread_cond_wait(&callbacks->cond, &callbacks->mutex);
        floor_event *event = callbacks->head;
        if (event == NULL) break;
        callbacks->head = event->next;
        if (callbacks->head == NULL) callbacks->tail = NULL;
        /* No lock held while the callback runs. */
        pthread_mutex_unlock(&callbacks->mutex);
        floor_callback(callbacks, event);
        free(event->channel_url);
        free(event->payload);
        free(event);
        pthread_mutex_lock(&callbacks->mutex);
    }
    pthread_mutex_unlock(&callbacks->mutex);
    return NULL;
}

static void floor_callbacks_queue(floor_callbacks *callbacks, floor_event *event) {
    pthread_mutex_lock(&callbacks->mutex);
    if (callbacks->tail) callbacks->tail->next = event;
    else callbacks->head = event;
    callbacks->tail = event;
    pthread_cond_signal(&callbacks->cond);
    pthread_mutex_unlock(&callbacks->mutex);
}

/* ---- The replay -------------------------------------------------------------------- */

typedef struct {
    sqlite3 *db;
    sqlite3_stmt *insert_message, *upsert_channel, *index_message;
    floor_callbacks callbacks;
    long long id_offset; /* each pass stores new rows, as new messages would be */
    int stored, failed;
    /* the SSE parser's state: the event's type and data lines so far */
    char event_type[40];
    char *data;
    size_t data_length, data_capacity;
    char *line;
    size_t line_length, line_capacity;
    floor_event *batch_head, *batch_tail;
} receive_floor;

static int floor_exec(sqlite3 *db, const char *sql) {
    char *error = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "receive floor: %s: %s\n", sql, error ? error : "?");
        sqlite3_free(error);
        return 0;
    }
    return 1;
}

static int floor_append(char **buffer, size_t *length, size_t *capacity, const char *bytes, size_t count) {
    if (*length + count + 1 > *capacity) {
        size_t grown = (*length + count + 1) * 2;
        char *resized = realloc(*buffer, grown);
        if (resized == NULL) return 0;
        *buffer = resized;
        *capacity = grown;
    }
    memcpy(*buffer + *length, bytes, count);
    *length += count;
    (*buffer)[*length] = '\0';
    return 1;
}

/* One complete event: parsed, its message and channel stored (inside the chunk's
 * transaction), and queued for the callback once the transaction commits. */
static void floor_apply_event(receive_floor *floor) {
    if (floor->data_length == 0) return;
    json_error_t error;
    json_t *data = json_loadb(floor->data, floor->data_length, 0, &error);
    if (data == NULL) {
        floor->failed++;
        return;
    }
    const char *channel_url = json_string_value(json_object_get(data, "channel_url"));
    json_t *message = json_object_get(data, "message");
    json_t *channel = json_object_get(data, "channel");
    if (strcmp(floor->event_type, "message_received") == 0 && json_is_object(message) && channel_url != NULL) {
        long long id = (long long)json_integer_value(json_object_get(message, "message_id")) + floor->id_offset;
        const char *text = json_string_value(json_object_get(message, "message"));
        char *message_text = json_dumps(message, JSON_COMPACT);
        sqlite3_bind_int64(floor->insert_message, 1, id);
        sqlite3_bind_text(floor->insert_message, 2, channel_url, -1, SQLITE_STATIC);
        sqlite3_bind_int64(floor->insert_message, 3, (long long)json_integer_value(json_object_get(message, "created_at")));
        sqlite3_bind_int64(floor->insert_message, 4, (long long)json_integer_value(json_object_get(message, "updated_at")));
        sqlite3_bind_text(floor->insert_message, 5, message_text, -1, SQLITE_STATIC);
        sqlite3_bind_text(floor->insert_message, 6, text ? text : "", -1, SQLITE_STATIC);
        int ok = sqlite3_step(floor->insert_message) == SQLITE_DONE;
        sqlite3_reset(floor->insert_message);
        sqlite3_bind_int64(floor->index_message, 1, id);
        sqlite3_bind_text(floor->index_message, 2, text ? text : "", -1, SQLITE_STATIC);
        ok = ok && sqlite3_step(floor->index_message) == SQLITE_DONE;
        sqlite3_reset(floor->index_message);
        if (json_is_object(channel)) {
            char *channel_text = json_dumps(channel, JSON_COMPACT);
            sqlite3_bind_text(floor->upsert_channel, 1, channel_url, -1, SQLITE_STATIC);
            sqlite3_bind_text(floor->upsert_channel, 2, channel_text, -1, SQLITE_STATIC);
            sqlite3_bind_int64(floor->upsert_channel, 3, (long long)json_integer_value(json_object_get(message, "created_at")));
            ok = ok && sqlite3_step(floor->upsert_channel) == SQLITE_DONE;
            sqlite3_reset(floor->upsert_channel);
            free(channel_text);
        }
        free(message_text);
        if (ok) floor->stored++;
        else floor->failed++;
    }
    floor_event *event = calloc(1, sizeof *event);
    if (event != NULL) {
        snprintf(event->category, sizeof event->category, "%s", floor->event_type);
        event->channel_url = strdup(channel_url ? channel_url : "");
        event->payload = json_dumps(data, JSON_COMPACT);
        if (floor->batch_tail) floor->batch_tail->next = event;
        else floor->batch_head = event;
        floor->batch_tail = event;
    }
    json_decref(data);
}

/* One line of the stream (without its newline). */
static void floor_line(receive_floor *floor, const char *line, size_t length) {
    if (length == 0) { /* the event ends */
        floor_apply_event(floor);
        floor->data_length = 0;
        floor->event_type[0] = '\0';
    } else if (length > 7 && strncmp(line, "event: ", 7) == 0) {
        size_t take = length - 7 < sizeof floor->event_type - 1 ? length - 7 : sizeof floor->event_type - 1;
        memcpy(floor->event_type, line + 7, take);
        floor->event_type[take] = '\0';
    } else if (length >= 5 && strncmp(line, "data:", 5) == 0) {
        size_t skip = length > 5 && line[5] == ' ' ? 6 : 5;
        if (floor->data_length > 0) floor_append(&floor->data, &floor->data_length, &floor->data_capacity, "\n", 1);
        floor_append(&floor->data, &floor->data_length, &floor->data_capacity, line + skip, length - skip);
    }
}

/* One chunk as it came from the socket: its events in one transaction, then to the callback. */
static void floor_chunk(receive_floor *floor, const captured_chunk *chunk) {
    floor_exec(floor->db, "BEGIN");
    for (size_t i = 0; i < chunk->length; i++) {
        char c = chunk->bytes[i];
        if (c == '\n') {
            floor_line(floor, floor->line ? floor->line : "", floor->line_length);
            floor->line_length = 0;
        } else if (c != '\r') {
            floor_append(&floor->line, &floor->line_length, &floor->line_capacity, &c, 1);
        }
    }
    floor_exec(floor->db, "COMMIT");
    /* Only what is committed reaches the application. */
    while (floor->batch_head != NULL) {
        floor_event *event = floor->batch_head;
        floor->batch_head = event->next;
        event->next = NULL;
        floor_callbacks_queue(&floor->callbacks, event);
    }
    floor->batch_tail = NULL;
}

static double floor_process_cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

typedef struct {
    int messages;          /* message_received events stored and called back */
    double cpu_per_message; /* µs of process CPU */
    double wall_per_message;
    int failed;
} receive_floor_result;

/* Replays the captured chunks `passes` times into a new database at `path` (":memory:"
 * for none). The caller's process should be otherwise idle: the figure is process CPU. */
static receive_floor_result receive_floor_run(const stream_capture *capture, const char *path, int passes) {
    receive_floor_result result = {0, 0, 0, 1};
    receive_floor floor;
    memset(&floor, 0, sizeof floor);
    if (sqlite3_open(path, &floor.db) != SQLITE_OK) return result;
    int ok = floor_exec(floor.db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;") &&
             floor_exec(floor.db,
                        "CREATE TABLE channels (channel_url TEXT PRIMARY KEY NOT NULL, json TEXT NOT NULL,"
                        " last_message_at INTEGER NOT NULL);"
                        "CREATE TABLE messages (message_id INTEGER PRIMARY KEY NOT NULL, channel_url TEXT NOT NULL,"
                        " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, json TEXT NOT NULL,"
                        " search_text TEXT NOT NULL);"
                        "CREATE INDEX messages_by_time ON messages (channel_url, created_at, message_id);"
                        "CREATE VIRTUAL TABLE message_search USING fts5(search_text, content = 'messages',"
                        " content_rowid = 'message_id', tokenize = 'unicode61 remove_diacritics 2', prefix = '1 2 3 4');");
    ok = ok &&
         sqlite3_prepare_v2(floor.db,
                            "INSERT INTO messages (message_id, channel_url, created_at, updated_at, json, search_text)"
                            " VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (message_id) DO UPDATE SET json = excluded.json,"
                            " updated_at = excluded.updated_at",
                            -1, &floor.insert_message, NULL) == SQLITE_OK &&
         sqlite3_prepare_v2(floor.db,
                            "INSERT INTO channels (channel_url, json, last_message_at) VALUES (?1, ?2, ?3)"
                            " ON CONFLICT (channel_url) DO UPDATE SET json = excluded.json,"
                            " last_message_at = max(last_message_at, excluded.last_message_at)",
                            -1, &floor.upsert_channel, NULL) == SQLITE_OK &&
         sqlite3_prepare_v2(floor.db, "INSERT INTO message_search (rowid, search_text) VALUES (?1, ?2)", -1,
                            &floor.index_message, NULL) == SQLITE_OK;
    if (!ok) {
        sqlite3_close(floor.db);
        return result;
    }
    pthread_mutex_init(&floor.callbacks.mutex, NULL);
    pthread_cond_init(&floor.callbacks.cond, NULL);
    pthread_create(&floor.callbacks.thread, NULL, floor_callback_run, &floor.callbacks);
    double cpu = floor_process_cpu_us(), wall = now_us();
    for (int pass = 0; pass < passes; pass++) {
        floor.id_offset = (long long)pass * 1000000000LL;
        for (int i = 0; i < capture->chunk_count; i++) floor_chunk(&floor, &capture->chunks[i]);
    }
    pthread_mutex_lock(&floor.callbacks.mutex);
    floor.callbacks.stopping = 1;
    pthread_cond_signal(&floor.callbacks.cond);
    pthread_mutex_unlock(&floor.callbacks.mutex);
    pthread_join(floor.callbacks.thread, NULL);
    double spent = floor_process_cpu_us() - cpu, elapsed = now_us() - wall;
    result.messages = (int)floor.callbacks.delivered;
    result.failed = floor.failed + (floor.stored != result.messages);
    if (result.messages > 0) {
        result.cpu_per_message = spent / result.messages;
        result.wall_per_message = elapsed / result.messages;
    }
    sqlite3_finalize(floor.insert_message);
    sqlite3_finalize(floor.upsert_channel);
    sqlite3_finalize(floor.index_message);
    sqlite3_close(floor.db);
    free(floor.data);
    free(floor.line);
    return result;
}

#endif
