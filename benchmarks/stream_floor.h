/* The floor under P3 (a live message's delivery): the same event stream read by a plain
 * libcurl reader, and the same messages posted by a plain libcurl sender, so that bench_live
 * can print, in the same run, how much of P3 is the servers' and how much the library's.
 *
 * The reader opens the receiving user's stream (GET /v3/users/{id}/events with the session
 * key, docs/PROTOCOL.md §9) on a thread of its own and notes when each frame whose message
 * text is "live N" arrives (the first time it sees N; the message is the frame's last "live"
 * text). It parses nothing else: no JSON, no
 * cache, no hand-off to another thread. The sender posts with one reused easy handle (so one
 * kept-alive connection), the admin token, on the caller's thread.
 *
 * Between the raw sender and the raw reader stand only the servers (the one that takes the
 * POST, and the one that streams, when they differ) and loopback TCP: the "raw POST to a raw
 * reader" figure is what the servers cost a live message. The library's P3 adds its sending
 * path and its receiving path (engine queue, cache commit, callback thread). */
#ifndef PARLEY_BENCH_STREAM_FLOOR_H
#define PARLEY_BENCH_STREAM_FLOOR_H
#include "bench_support.h"
#include <curl/curl.h>
#include <stdatomic.h>

enum { raw_stream_capacity = 20000, raw_stream_buffer = 65536 };

typedef struct {
    char url[768];
    char session_header[320];
    pthread_t thread;
    atomic_int stop;
    atomic_int open;      /* the `connected` frame came */
    atomic_int finished;  /* the transfer ended (error or stop) */
    atomic_int resyncs;   /* `resync` frames: the server says events were lost to this stream */
    /* when the frame of message N arrived (now_us, whole microseconds), 0 while it has not;
     * written by the reader's thread, read by the caller's (raw_stream_arrival) */
    atomic_llong arrived[raw_stream_capacity];
    /* the reader's thread only: the frame being read, and its event type */
    char pending[raw_stream_buffer];
    size_t pending_length;
    char event[40];
} raw_stream;

/* When the frame of message `index` arrived (now_us), 0 if it has not. */
static inline double raw_stream_arrival(raw_stream *stream, int index) {
    if (index < 0 || index >= raw_stream_capacity) return 0;
    return (double)atomic_load_explicit(&stream->arrived[index], memory_order_relaxed);
}

/* Notes the arrival of every "live N" in the complete lines of `stream->pending`. */
static inline void raw_stream_scan_lines(raw_stream *stream, double now) {
    static const char marker[] = "\"message\":\"live ";
    size_t start = 0;
    for (size_t i = 0; i < stream->pending_length; i++) {
        if (stream->pending[i] != '\n') continue;
        stream->pending[i] = '\0';
        const char *line = stream->pending + start;
        if (line[0] == '\0') stream->event[0] = '\0';  /* the frame ended */
        if (strncmp(line, "event: ", 7) == 0) {
            snprintf(stream->event, sizeof stream->event, "%s", line + 7);
            if (strcmp(stream->event, "connected") == 0) atomic_store(&stream->open, 1);
            if (strcmp(stream->event, "resync") == 0) atomic_fetch_add(&stream->resyncs, 1);
        }
        /* A message_received frame's last "live N": the event's message comes after its
         * channel, whose last message may be a later one (a batch read by another server
         * renders the channel as it is at the read). */
        const char *at = NULL;
        if (strncmp(line, "data:", 5) == 0 && strcmp(stream->event, "message_received") == 0) {
            for (const char *found = strstr(line, marker); found != NULL; found = strstr(found + 1, marker)) at = found;
        }
        if (at != NULL) {
            int index = atoi(at + sizeof marker - 1);
            long long expected = 0;
            if (index >= 0 && index < raw_stream_capacity) {
                atomic_compare_exchange_strong(&stream->arrived[index], &expected, (long long)now);
            }
        }
        start = i + 1;
    }
    memmove(stream->pending, stream->pending + start, stream->pending_length - start);
    stream->pending_length -= start;
}

static inline size_t raw_stream_write(char *data, size_t size, size_t count, void *user_data) {
    raw_stream *stream = user_data;
    double now = now_us();
    size_t length = size * count;
    if (atomic_load(&stream->stop)) return 0;
    size_t offset = 0;
    while (offset < length) {
        size_t room = raw_stream_buffer - 1 - stream->pending_length;
        if (room == 0) stream->pending_length = 0;  /* a line longer than the buffer: dropped */
        room = raw_stream_buffer - 1 - stream->pending_length;
        size_t take = length - offset < room ? length - offset : room;
        memcpy(stream->pending + stream->pending_length, data + offset, take);
        stream->pending_length += take;
        offset += take;
        raw_stream_scan_lines(stream, now);
    }
    return length;
}

/* Lets `raw_stream_stop` end a transfer that receives nothing. */
static inline int raw_stream_progress(void *user_data, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
    (void)a; (void)b; (void)c; (void)d;
    return atomic_load(&((raw_stream *)user_data)->stop) ? 1 : 0;
}

static inline void *raw_stream_run(void *user_data) {
    raw_stream *stream = user_data;
    CURL *curl = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, stream->session_header);
    curl_easy_setopt(curl, CURLOPT_URL, stream->url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, raw_stream_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, stream);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, raw_stream_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, stream);
    curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
    CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (!atomic_load(&stream->stop)) fprintf(stderr, "raw stream reader: the stream ended: %s (HTTP %ld)\n", curl_easy_strerror(code), status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    atomic_store(&stream->finished, 1);
    return NULL;
}

/* Opens `user`'s stream on `server_url` with `session_token`; returns once its `connected`
 * frame came (NULL, printed, if it did not within 10 s). */
static inline raw_stream *raw_stream_open(const char *server_url, const char *user, const char *session_token) {
    raw_stream *stream = calloc(1, sizeof *stream);
    if (stream == NULL) return NULL;
    snprintf(stream->url, sizeof stream->url, "%s/v3/users/%s/events", server_url, user);
    snprintf(stream->session_header, sizeof stream->session_header, "Session-Key: %s", session_token);
    if (pthread_create(&stream->thread, NULL, raw_stream_run, stream) != 0) {
        free(stream);
        return NULL;
    }
    for (int waited = 0; waited < 10000 && !atomic_load(&stream->open) && !atomic_load(&stream->finished); waited += 5) {
        sleep_ms(5);
    }
    if (!atomic_load(&stream->open)) {
        fprintf(stderr, "raw stream reader: the stream did not open\n");
        atomic_store(&stream->stop, 1);
        pthread_join(stream->thread, NULL);
        free(stream);
        return NULL;
    }
    return stream;
}

/* Forgets the arrivals noted so far (the next run numbers its messages from 0 again). Call
 * it only when no frame of an earlier run can still come. */
static inline void raw_stream_reset(raw_stream *stream) {
    for (int i = 0; i < raw_stream_capacity; i++) atomic_store_explicit(&stream->arrived[i], 0, memory_order_relaxed);
}

static inline void raw_stream_close(raw_stream *stream) {
    if (stream == NULL) return;
    atomic_store(&stream->stop, 1);
    pthread_join(stream->thread, NULL);
    free(stream);
}

/* A POST with the admin token on one reused connection. */
typedef struct {
    CURL *curl;
    struct curl_slist *headers;
    char url[768];
} raw_sender;

static inline size_t raw_sender_discard(char *data, size_t size, size_t count, void *user_data) {
    (void)data; (void)user_data;
    return size * count;
}

static inline int raw_sender_init(raw_sender *sender, const char *server_url, const char *path, const char *api_token) {
    char header[320];
    snprintf(sender->url, sizeof sender->url, "%s%s", server_url, path);
    snprintf(header, sizeof header, "Api-Token: %s", api_token);
    sender->headers = curl_slist_append(curl_slist_append(NULL, header), "Content-Type: application/json");
    sender->curl = curl_easy_init();
    if (sender->curl == NULL || sender->headers == NULL) {
        curl_easy_cleanup(sender->curl);
        curl_slist_free_all(sender->headers);
        return 0;
    }
    curl_easy_setopt(sender->curl, CURLOPT_URL, sender->url);
    curl_easy_setopt(sender->curl, CURLOPT_HTTPHEADER, sender->headers);
    curl_easy_setopt(sender->curl, CURLOPT_WRITEFUNCTION, raw_sender_discard);
    curl_easy_setopt(sender->curl, CURLOPT_TCP_NODELAY, 1L);
    return 1;
}

/* Posts `body`; 1 when the server answered 200. */
static inline int raw_sender_post(raw_sender *sender, const char *body) {
    curl_easy_setopt(sender->curl, CURLOPT_POSTFIELDS, body);
    long status = 0;
    if (curl_easy_perform(sender->curl) != CURLE_OK) return 0;
    curl_easy_getinfo(sender->curl, CURLINFO_RESPONSE_CODE, &status);
    return status == 200;
}

static inline void raw_sender_cleanup(raw_sender *sender) {
    curl_easy_cleanup(sender->curl);
    curl_slist_free_all(sender->headers);
}

#endif
