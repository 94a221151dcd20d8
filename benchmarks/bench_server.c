/* bench_server: the reference server itself (P7), driven with raw libcurl, raw sqlite3 and
 * PostgreSQL's own psql; no Parley client is involved. Three modes:
 *
 *   bench_server fanout BACKEND SERVER_URL API_TOKEN [MESSAGES] [SECONDS] [OTHER_URL LAYOUT]
 *   bench_server start SERVER_BINARY [SMALL] [LARGE] [POSTGRES_URL]
 *   bench_server inflight BACKEND SERVER_URL API_TOKEN SECONDS [OTHER_URL]
 *
 * fanout: a group channel of 50 members on the running server at SERVER_URL (BACKEND only
 *    names it in the output: "SQLite", "PostgreSQL"), each member with its own event stream
 *    open (Session-Key), all of them past their `connected` event. Up to MESSAGES messages
 *    (default 5000; at most SECONDS, default 8, of sending) are posted as fast as SENDERS
 *    requests in flight allow (Api-Token, each message from the next member in turn); the
 *    same first, for half as long, into a channel of 2 of those members (what the fan-out
 *    costs), and into SPREAD_CHANNELS channels of those 2, message n into channel n mod 4
 *    (writers on different channels: side by side on PostgreSQL, one at a time on SQLite); the
 *    50-member burst once more with SENDERS_MORE requests in flight. Then 2 x SECONDS of
 *    messages at a fixed moderate rate: PACED_RATE per second, or
 *    half the burst's rate when the server cannot take twice PACED_RATE (a rate it cannot
 *    keep up with only measures its queue). Per message: the time from its POST being handed
 *    to curl to the moment the last stream has it (p50, p99, max), and loss (accepted
 *    messages some stream still lacks after a grace period). Throughput = 2xx answers / wall
 *    time of the burst. CPU per accepted message over the five runs, from /proc: of each server
 *    process (found by the port it listens on, when it runs on this machine) and, with
 *    PARLEY_BENCH_POSTGRES_DIR set to a cluster's data directory, of every process of that
 *    cluster (the postmaster and its children); PARLEY_BENCH_CPU_BESIDE, a figure to print
 *    beside it (scripts/bench.sh: the SQLite run's).
 *    With OTHER_URL, a second server on the same PostgreSQL database, LAYOUT says where the
 *    streams and sends go: "streams-there" opens every stream on OTHER_URL and sends to
 *    SERVER_URL (each delivery crosses servers); "both" sends message n to SERVER_URL or
 *    OTHER_URL in turn and opens member i's stream on one or the other in turn (two servers
 *    sharing the load); "by-channel" opens the streams as "both" does and sends each
 *    channel's messages to one server, as a balancer hashing by channel does
 *    (docs/DEPLOYMENT.md): the 50 members' channel and 2 of the 4 channels to SERVER_URL, the
 *    2 members' channel and the other 2 to OTHER_URL. Setup always goes through SERVER_URL.
 * start: the server's start with SMALL (default 10,000) and then LARGE (default 1,000,000)
 *    stored messages, on SQLite and, when POSTGRES_URL (postgres://USER@HOST:PORT of a
 *    cluster, no database) is given, on PostgreSQL. Per backend, a server this program
 *    starts (SERVER_BINARY) on a new database (a file in a temporary directory; a database
 *    made with createdb) stores one real message through REST and is stopped; copies of that
 *    message are written into the server's own `messages` table up to SMALL (raw sqlite3;
 *    one INSERT ... SELECT FROM generate_series through psql, then VACUUM ANALYZE, as a
 *    database in service would have been), the server is started and measured, stopped, the
 *    copies go on up to LARGE, and it is started and measured again. Each start is timed
 *    from exec to the "listening" line and to the first answer of a page of 100 messages,
 *    with VmRSS after start and after that page (the server process only: PostgreSQL's own
 *    processes are not counted), then the median of 3 more pages; the stored messages are
 *    checked through REST (count, newest page, oldest). createdb, psql and dropdb are taken
 *    from $PARLEY_PG_BIN (scripts/pg-test-cluster.sh exports it), else from the PATH; the
 *    database is dropped at exit.
 * inflight: how accepted messages grow with the requests in flight, the scale-out rows
 *    (scripts/bench.sh runs it with PostgreSQL behind a delay proxy, so that a write's wait
 *    on the database is a network hop and not this machine's CPU). 16 channels of 2 members
 *    of their own; for N = 1, 2, 4, 8, 16, N requests in flight for SECONDS, request i always
 *    posting into channel i and sending the next message when its answer came: accepted
 *    msg/s per N, and 8 in flight / 1 in flight. With OTHER_URL (a second server on the same
 *    database), request i goes to SERVER_URL or OTHER_URL by i mod 2. A second of all 16 in
 *    flight comes first, not measured. Then 1 and 8 in flight once more, sent as a client
 *    library sends: with the sender's Session-Key and a req_id in each message. Setup always
 *    goes through SERVER_URL. */
#define _GNU_SOURCE
#include "bench_support.h"
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#define MEMBERS 50
#define SENDERS 4
/* The 50-member burst once more with this many requests in flight: with 4, each request waits
 * for its answer (and so for a commit) before the next goes, so the rate is partly the
 * latency of one request; with more, what the server can take. */
#define SENDERS_MORE 8
#define PACED_RATE 200
#define SPREAD_CHANNELS 4

/* ---- small blocking HTTP helper (setup and checks) ------------------------------------ */

typedef struct {
    char *data;
    size_t length, capacity;
} buffer;

static void buffer_append(buffer *b, const char *bytes, size_t count) {
    if (b->length + count + 1 > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 4096;
        while (capacity < b->length + count + 1) capacity *= 2;
        b->data = realloc(b->data, capacity);
        b->capacity = capacity;
    }
    memcpy(b->data + b->length, bytes, count);
    b->length += count;
    b->data[b->length] = '\0';
}

static size_t collect(char *bytes, size_t size, size_t count, void *user) {
    buffer_append(user, bytes, size * count);
    return size * count;
}

static size_t discard(char *bytes, size_t size, size_t count, void *user) {
    (void)bytes; (void)user;
    return size * count;
}

static CURL *setup_handle;

/* One request on a kept-alive connection; the answer's body in `answer` (reset first).
 * Returns the HTTP status, 0 when the request did not complete. */
static long http(const char *method, const char *url, const char *auth, const char *body, buffer *answer) {
    if (setup_handle == NULL) setup_handle = curl_easy_init();
    CURL *h = setup_handle;
    curl_easy_reset(h);
    struct curl_slist *headers = curl_slist_append(NULL, auth);
    headers = curl_slist_append(headers, "Content-Type: application/json");
    answer->length = 0;
    buffer_append(answer, "", 0);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    return status;
}

/* The same, printing a failure; 1 on a 2xx answer. */
static int call(const char *method, const char *url, const char *auth, const char *body, buffer *answer) {
    long status = http(method, url, auth, body, answer);
    if (status >= 200 && status < 300) return 1;
    fprintf(stderr, "%s %s: %ld %s\n", method, url, status, answer->data ? answer->data : "");
    return 0;
}

/* The string value of "key" in a JSON text, into `out`. */
static int json_string(const char *json, const char *key, char *out, size_t size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *at = strstr(json, pattern);
    if (at == NULL) return 0;
    at += strlen(pattern);
    const char *end = strchr(at, '"');
    if (end == NULL || (size_t)(end - at) >= size) return 0;
    memcpy(out, at, (size_t)(end - at));
    out[end - at] = '\0';
    return 1;
}

static long long wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- part 1: fan-out to 50 streams ------------------------------------------------------ */

/* One run of sends: what was sent when, and when the first and the last stream had it. */
typedef struct {
    char tag;  /* in the message text ("p7 <tag> <n>"), so a late event of another run is not counted */
    int count; /* messages to send; lowered when the run reaches its time limit */
    int capacity;
    int streams; /* how many streams each message goes to */
    long long frame_bytes; /* of the message_received frames counted */
    double *sent_at, *answered_at, *first_at, *last_at;
    unsigned char *got;  /* streams that have message n */
    unsigned char *seen; /* [n * MEMBERS + stream] */
    int accepted, refused, complete, duplicates;
    double started, finished, last_delivery;
} run;

typedef struct {
    int index;
    buffer in;
    size_t scanned; /* bytes of `in` already searched for a frame end */
    int connected;
} stream;

static pthread_mutex_t runs_lock = PTHREAD_MUTEX_INITIALIZER;
static run *current_run; /* guarded by runs_lock, as are the arrays of the run it points to */
static long stray_events;
static atomic_int connected_streams, ended_streams, stop_receiving;

static run *run_new(char tag, int count, int streams) {
    run *r = calloc(1, sizeof *r);
    r->tag = tag;
    r->streams = streams;
    r->count = r->capacity = count;
    r->sent_at = calloc((size_t)count, sizeof(double));
    r->answered_at = calloc((size_t)count, sizeof(double));
    r->first_at = calloc((size_t)count, sizeof(double));
    r->last_at = calloc((size_t)count, sizeof(double));
    r->got = calloc((size_t)count, 1);
    r->seen = calloc((size_t)count * MEMBERS, 1);
    return r;
}

static void run_free(run *r) {
    free(r->sent_at); free(r->answered_at); free(r->first_at); free(r->last_at);
    free(r->got); free(r->seen); free(r);
}

static int line_is(const char *line, const char *end, const char *prefix, const char **rest) {
    size_t n = strlen(prefix);
    if ((size_t)(end - line) < n || memcmp(line, prefix, n) != 0) return 0;
    *rest = line + n;
    return 1;
}

/* One complete SSE frame of a stream. Only `connected` and `message_received` matter here. */
static void on_frame(stream *s, const char *frame, size_t length, double now) {
    const char *end = frame + length, *name = NULL, *name_end = NULL, *data = NULL, *data_end = NULL;
    for (const char *line = frame; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL) eol = end;
        const char *rest;
        if (line_is(line, eol, "event: ", &rest)) name = rest, name_end = eol;
        else if (line_is(line, eol, "data: ", &rest)) data = rest, data_end = eol;
        line = eol + 1;
    }
    if (name == NULL) return;
    size_t name_length = (size_t)(name_end - name);
    if (name_length == 9 && memcmp(name, "connected", 9) == 0) {
        if (!s->connected) atomic_fetch_add(&connected_streams, 1);
        s->connected = 1;
        return;
    }
    if (name_length != 16 || memcmp(name, "message_received", 16) != 0 || data == NULL) return;
    /* The event's own message object; the channel's last_message sits under another key. */
    const char *message = memmem(data, (size_t)(data_end - data), "\"message\":{", 11);
    if (message == NULL) return;
    static const char marker[] = "\"message\":\"p7 ";
    const char *text = memmem(message, (size_t)(data_end - message), marker, sizeof marker - 1);
    if (text == NULL) return;
    text += sizeof marker - 1;
    char tag = text[0];
    int n = (int)strtol(text + 2, NULL, 10);
    pthread_mutex_lock(&runs_lock);
    run *r = current_run;
    if (r == NULL || r->tag != tag || n < 0 || n >= r->capacity) {
        stray_events++;
    } else if (r->seen[(size_t)n * MEMBERS + (size_t)s->index]) {
        r->duplicates++;
    } else {
        r->seen[(size_t)n * MEMBERS + (size_t)s->index] = 1;
        if (r->got[n]++ == 0) r->first_at[n] = now;
        r->frame_bytes += (long long)length;
        if (r->got[n] == r->streams) {
            r->last_at[n] = now;
            r->complete++;
        }
        r->last_delivery = now;
    }
    pthread_mutex_unlock(&runs_lock);
}

/* Bytes of a stream: complete frames (ended by a blank line) are handled, the rest kept. */
static size_t on_stream_bytes(char *bytes, size_t size, size_t count, void *user) {
    stream *s = user;
    double now = now_us();
    buffer_append(&s->in, bytes, size * count);
    size_t start = 0;
    for (;;) {
        size_t from = s->scanned > start + 1 ? s->scanned - 1 : start;
        char *end = memmem(s->in.data + from, s->in.length - from, "\n\n", 2);
        if (end == NULL) break;
        on_frame(s, s->in.data + start, (size_t)(end - (s->in.data + start)), now);
        start = (size_t)(end - s->in.data) + 2;
        s->scanned = start;
    }
    /* One move per chunk, not per frame: a chunk may hold many frames of ~25 KB. */
    if (start > 0) {
        memmove(s->in.data, s->in.data + start, s->in.length - start);
        s->in.length -= start;
    }
    s->scanned = s->in.length;
    return size * count;
}

static void *receive(void *arg) {
    CURLM *multi = arg;
    while (!atomic_load(&stop_receiving)) {
        int running = 0, left = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *message;
        while ((message = curl_multi_info_read(multi, &left)) != NULL) {
            if (message->msg != CURLMSG_DONE) continue;
            atomic_fetch_add(&ended_streams, 1);
            long status = 0;
            curl_easy_getinfo(message->easy_handle, CURLINFO_RESPONSE_CODE, &status);
            fprintf(stderr, "an event stream ended: HTTP %ld, %s\n", status, curl_easy_strerror(message->data.result));
        }
        curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    return NULL;
}

typedef struct {
    CURL *easy;
    int n; /* the message in flight, -1 when free */
    char body[256];
    /* inflight mode: this slot's own channel (its messages URL) and its 2 members, who send in
     * turn; NULL: message n goes to urls[n mod url_count] from members[n mod senders_count]. */
    const char *url;
    const char *pair[2];
    /* inflight mode, sending as a client library does: the slot's first member's Session-Key
     * header (the member sends every message) and a req_id in each body; NULL: Api-Token. */
    struct curl_slist *session_headers;
} sender;

/* Sends r->count messages to `url` through `in_flight` requests at once, at `rate` per second
 * (0: as fast as they are answered), each from the next of `senders_count` members in turn
 * (or into each slot's own channel, see `sender`); sending stops after `seconds`. */
static void send_run(CURLM *multi, sender *senders, int in_flight, run *r, const char *const *urls, int url_count,
                     char members[][64], int senders_count, int rate, double seconds) {
    pthread_mutex_lock(&runs_lock);
    current_run = r;
    pthread_mutex_unlock(&runs_lock);
    int next = 0, done = 0, busy = 0;
    r->started = now_us();
    while (done < next || next < r->count) {
        double now = now_us();
        if (now - r->started > seconds * 1e6 && next < r->count) r->count = next;
        for (int i = 0; i < in_flight && next < r->count; i++) {
            if (senders[i].n >= 0) continue;
            if (rate > 0 && now < r->started + next * 1e6 / rate) break;
            sender *s = &senders[i];
            s->n = next;
            if (s->session_headers) {
                /* Unique across runs: a repeated req_id would be answered with the first message. */
                static long requests_made;
                snprintf(s->body, sizeof s->body, "{\"message_type\":\"MESG\",\"req_id\":\"bench-%d-%ld\",\"message\":\"p7 %c %d\"}",
                         (int)getpid(), ++requests_made, r->tag, next);
            } else {
                const char *user = s->url ? s->pair[next % 2] : members[next % senders_count];
                snprintf(s->body, sizeof s->body, "{\"message_type\":\"MESG\",\"user_id\":\"%s\",\"message\":\"p7 %c %d\"}",
                         user, r->tag, next);
            }
            /* Message n into channel n mod count, unless the slot has a channel of its own. */
            curl_easy_setopt(s->easy, CURLOPT_URL, s->url ? s->url : urls[next % url_count]);
            if (s->session_headers) curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->session_headers);
            curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body);
            curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
            r->sent_at[next] = now_us();
            curl_multi_add_handle(multi, s->easy);
            next++;
            busy++;
        }
        int running = 0, left = 0, freed = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *message;
        while ((message = curl_multi_info_read(multi, &left)) != NULL) {
            if (message->msg != CURLMSG_DONE) continue;
            sender *s = NULL;
            long status = 0;
            curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            curl_easy_getinfo(message->easy_handle, CURLINFO_RESPONSE_CODE, &status);
            r->answered_at[s->n] = now_us();
            if (message->data.result == CURLE_OK && status >= 200 && status < 300) {
                r->accepted++;
            } else {
                if (r->refused++ == 0) fprintf(stderr, "POST refused: HTTP %ld, %s\n", status, curl_easy_strerror(message->data.result));
                r->sent_at[s->n] = 0; /* not expected on the streams */
            }
            curl_multi_remove_handle(multi, s->easy);
            s->n = -1;
            busy--;
            done++;
            freed++;
        }
        /* A request just answered frees its slot: the next message goes out now, not after the
         * next answer of another request (waiting in curl_multi_poll first would leave fewer
         * requests in flight than asked for). */
        /* How long until the next message is due (0 or less: now; always 0 unpaced). */
        double due = rate > 0 && next < r->count ? r->started + next * 1e6 / rate - now_us() : 0;
        if (freed > 0 && next < r->count && due <= 0) continue;
        int wait_ms = 100;
        if (rate > 0 && next < r->count) {
            wait_ms = due <= 0 ? 0 : (int)(due / 1e3) + 1;
            if (wait_ms > 100) wait_ms = 100;
        }
        /* Every slot busy: nothing can go before an answer, which ends the poll (an overdue
         * message would otherwise make it return at once, spinning while the server stalls). */
        if (busy >= in_flight) wait_ms = 100;
        if (busy > 0 || wait_ms > 0) curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
    }
    r->finished = now_us();
}

/* Waits until every stream has every accepted message, or `grace_s` pass without a new
 * delivery (frames already queued on the server keep arriving a while after the last answer). */
static void wait_deliveries(run *r, double grace_s) {
    for (;;) {
        pthread_mutex_lock(&runs_lock);
        int complete = r->complete, accepted = r->accepted;
        double last = r->last_delivery > r->finished ? r->last_delivery : r->finished;
        pthread_mutex_unlock(&runs_lock);
        if (complete >= accepted || now_us() - last > grace_s * 1e6) return;
        sleep_ms(20);
    }
}

typedef struct {
    double rate, p50, p99, max, first_p50, answer_p50, answer_p99, frame_kb;
    int sent, accepted, refused, lost, partial;
    char missing[200]; /* the first lost message and the streams of the run that lack it */
} run_result;

/* "message N: K of S streams; lacking i j ...": the streams of the run (those that received any
 * of its messages) that lack message n, by index (in the layouts both and by-channel stream i
 * is on OTHER_URL when i is odd). Under runs_lock. */
static void describe_missing(const run *r, int n, char *out, size_t size) {
    int written = snprintf(out, size, "message %d: %d of %d streams; lacking", n, r->got[n], r->streams);
    for (int s = 0; s < MEMBERS && written > 0 && (size_t)written < size; s++) {
        if (r->seen[(size_t)n * MEMBERS + (size_t)s]) continue;
        int receives = 0;
        for (int m = 0; m < r->count && !receives; m++) receives = r->seen[(size_t)m * MEMBERS + (size_t)s];
        if (receives) written += snprintf(out + written, size - (size_t)written, " %d", s);
    }
}

static run_result summarize(run *r) {
    run_result out = {0};
    pthread_mutex_lock(&runs_lock);
    current_run = NULL;
    pthread_mutex_unlock(&runs_lock);
    double *last = calloc((size_t)r->count + 1, sizeof(double));
    double *first = calloc((size_t)r->count + 1, sizeof(double));
    double *answer = calloc((size_t)r->count + 1, sizeof(double));
    int n_last = 0, n_first = 0, n_answer = 0;
    for (int i = 0; i < r->count; i++) {
        if (r->sent_at[i] == 0) continue; /* refused */
        answer[n_answer++] = r->answered_at[i] - r->sent_at[i];
        if (r->got[i] > 0) first[n_first++] = r->first_at[i] - r->sent_at[i];
        if (r->got[i] == r->streams) last[n_last++] = r->last_at[i] - r->sent_at[i];
        else {
            if (out.lost++ == 0) describe_missing(r, i, out.missing, sizeof out.missing);
            if (r->got[i] > 0) out.partial++;
        }
    }
    out.sent = r->count;
    out.accepted = r->accepted;
    int frames = 0;
    for (int i = 0; i < r->count; i++) frames += r->got[i];
    out.frame_kb = frames ? r->frame_bytes / 1024.0 / frames : 0;
    out.refused = r->refused;
    out.rate = r->accepted / ((r->finished - r->started) / 1e6);
    out.p50 = quantile(last, n_last, 0.5) / 1e3;
    out.p99 = quantile(last, n_last, 0.99) / 1e3;
    out.max = quantile(last, n_last, 1.0) / 1e3;
    out.first_p50 = quantile(first, n_first, 0.5) / 1e3;
    out.answer_p50 = quantile(answer, n_answer, 0.5) / 1e3;
    out.answer_p99 = quantile(answer, n_answer, 0.99) / 1e3;
    free(last); free(first); free(answer);
    return out;
}

static void print_run(const char *title, const run_result *r, int streams) {
    printf("  %-26s %5d sent, %5d accepted: %6.1f msg/s; %.1f KB per event frame\n", title, r->sent, r->accepted, r->rate,
           r->frame_kb);
    printf("  %-26s POST answered p50 %.1f ms; first stream p50 %.1f ms; last of %d streams p50 %.1f  p99 %.1f  max %.1f ms; "
           "lost %d (%d partly delivered)\n",
           "", r->answer_p50, r->first_p50, streams, r->p50, r->p99, r->max, r->lost, r->partial);
    if (r->lost > 0)
        printf("  %-26s first lost: %s (stream i: member i's; in the layouts both and by-channel the odd ones are on OTHER_URL); %ld events of no run, "
               "%d streams ended\n", "", r->missing, stray_events, atomic_load(&ended_streams));
}

/* ---- CPU of the server's processes and of PostgreSQL's, from /proc ----------------------- */

/* Seconds of CPU a process used (utime + stime of /proc/PID/stat, every thread included), with
 * `reaped` also those of its children it waited for (cutime + cstime); its parent's pid in
 * `parent` when given. -1 when the process is gone or not readable. */
static double process_cpu_s(pid_t pid, int reaped, pid_t *parent) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: fields count from its end. */
    char *rest = strrchr(text, ')');
    if (rest == NULL) return -1;
    int ppid = 0;
    unsigned long long utime = 0, stime = 0;
    long long cutime = 0, cstime = 0;
    if (sscanf(rest + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &ppid, &utime, &stime, &cutime,
               &cstime) != 5)
        return -1;
    if (parent) *parent = ppid;
    double ticks = (double)(utime + stime) + (reaped ? (double)(cutime + cstime) : 0);
    return ticks / (double)sysconf(_SC_CLK_TCK);
}

/* The socket inode listening on loopback or any address at `port`, from /proc/net/tcp and
 * tcp6; 0 if none. */
static unsigned long listening_inode(int port) {
    const char *tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    for (int t = 0; t < 2; t++) {
        FILE *f = fopen(tables[t], "r");
        if (f == NULL) continue;
        char line[512];
        unsigned long found = 0;
        while (found == 0 && fgets(line, sizeof line, f)) {
            char local[64];
            unsigned state;
            unsigned long inode;
            if (sscanf(line, " %*d: %63s %*s %x %*s %*s %*s %*d %*d %lu", local, &state, &inode) != 3) continue;
            char *colon = strrchr(local, ':');
            if (colon && state == 0x0A && (int)strtol(colon + 1, NULL, 16) == port) found = inode;
        }
        fclose(f);
        if (found) return found;
    }
    return 0;
}

/* The process holding the socket that listens on `port` of this machine (the server at a
 * URL "http://127.0.0.1:PORT"), or 0. */
static pid_t listening_pid(const char *url) {
    const char *host = strstr(url, "://");
    const char *colon = host ? strrchr(host + 3, ':') : NULL;
    if (colon == NULL) return 0;
    unsigned long inode = listening_inode(atoi(colon + 1));
    if (inode == 0) return 0;
    char wanted[64];
    snprintf(wanted, sizeof wanted, "socket:[%lu]", inode);
    DIR *proc = opendir("/proc");
    if (proc == NULL) return 0;
    pid_t found = 0;
    struct dirent *entry;
    while (found == 0 && (entry = readdir(proc)) != NULL) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
        char fds[300];
        snprintf(fds, sizeof fds, "/proc/%s/fd", entry->d_name);
        DIR *dir = opendir(fds);
        if (dir == NULL) continue;
        struct dirent *fd;
        while ((fd = readdir(dir)) != NULL) {
            char link[600], target[64];
            snprintf(link, sizeof link, "%s/%s", fds, fd->d_name);
            ssize_t length = readlink(link, target, sizeof target - 1);
            if (length <= 0) continue;
            target[length] = '\0';
            if (strcmp(target, wanted) == 0) {
                found = (pid_t)atoi(entry->d_name);
                break;
            }
        }
        closedir(dir);
    }
    closedir(proc);
    return found;
}

/* The postmaster of the PostgreSQL cluster whose data directory is `data_dir` (the first line
 * of its postmaster.pid), or 0. */
static pid_t postmaster_pid(const char *data_dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/postmaster.pid", data_dir);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    int pid = 0;
    if (fscanf(f, "%d", &pid) != 1) pid = 0;
    fclose(f);
    return (pid_t)pid;
}

/* Seconds of CPU the cluster used: the postmaster with the children it reaped (backends of
 * connections closed), plus its children still running (backends, WAL writer, checkpointer,
 * ...). A child that ends between two readings moves its whole CPU time, also the time before
 * the first reading, into the postmaster's: rare here, the servers keep their connections. */
static double cluster_cpu_s(pid_t postmaster) {
    double total = process_cpu_s(postmaster, 1, NULL);
    if (total < 0) return -1;
    DIR *proc = opendir("/proc");
    if (proc == NULL) return -1;
    struct dirent *entry;
    while ((entry = readdir(proc)) != NULL) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
        pid_t parent = 0;
        double used = process_cpu_s((pid_t)atoi(entry->d_name), 0, &parent);
        if (used > 0 && parent == postmaster) total += used;
    }
    closedir(proc);
    return total;
}

/* The processes whose CPU a fanout run measures: each server (found by its port) and, with
 * PARLEY_BENCH_POSTGRES_DIR set, the cluster in that data directory. */
typedef struct {
    int servers;
    pid_t server_pids[2];
    const char *server_urls[2];
    pid_t postmaster;
    double server_s[2], cluster_s;
} cpu_reading;

static cpu_reading cpu_processes(const char *const *urls, int url_count) {
    cpu_reading r = {0};
    for (int i = 0; i < url_count && r.servers < 2; i++) {
        pid_t pid = listening_pid(urls[i]);
        if (pid == 0) continue;
        r.server_pids[r.servers] = pid;
        r.server_urls[r.servers++] = urls[i];
    }
    const char *data_dir = getenv("PARLEY_BENCH_POSTGRES_DIR");
    if (data_dir && *data_dir) {
        r.postmaster = postmaster_pid(data_dir);
        if (r.postmaster == 0) printf("  PostgreSQL's CPU not measured: no postmaster.pid in %s\n", data_dir);
    }
    return r;
}

static void cpu_read(cpu_reading *r) {
    for (int i = 0; i < r->servers; i++) r->server_s[i] = process_cpu_s(r->server_pids[i], 0, NULL);
    r->cluster_s = r->postmaster ? cluster_cpu_s(r->postmaster) : 0;
}

/* ---- start: servers of our own, started on prepared databases --------------------------- */

typedef struct {
    pid_t pid;
    int out; /* its stdout */
    char url[128];
} server_process;

static server_process child = {0, -1, ""};
static char temp_dir[] = "/tmp/parley-bench-p7-XXXXXX";
static int temp_made;
static char pg_bin[512];       /* "DIR/" holding PostgreSQL's client programs, or "" (the PATH) */
static char pg_cluster[256];   /* postgres://USER@HOST:PORT, when PostgreSQL is measured */
static char pg_database[64];   /* the database this program made there, dropped at exit */

static void stop_server(server_process *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        int status, gone = 0;
        for (int i = 0; i < 500 && !gone; i++) {
            gone = waitpid(s->pid, &status, WNOHANG) != 0;
            if (!gone) sleep_ms(20);
        }
        if (!gone) { /* 10 s without stopping: no more waiting */
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &status, 0);
        }
    }
    if (s->out >= 0) close(s->out);
    s->pid = 0;
    s->out = -1;
}

/* Runs one of PostgreSQL's client programs on the cluster's maintenance database. */
static int pg_admin(const char *program, const char *arguments) {
    char command[1024];
    snprintf(command, sizeof command, "'%s%s' --maintenance-db='%s/postgres' %s", pg_bin, program, pg_cluster, arguments);
    return system(command) == 0;
}

static void cleanup(void) {
    stop_server(&child);
    if (pg_database[0]) {
        char arguments[128];
        snprintf(arguments, sizeof arguments, "--if-exists %s", pg_database);
        if (!pg_admin("dropdb", arguments)) fprintf(stderr, "could not drop the database %s\n", pg_database);
        pg_database[0] = '\0';
    }
    if (temp_made) {
        char command[256];
        snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
        if (system(command) != 0) fprintf(stderr, "could not remove %s\n", temp_dir);
        temp_made = 0;
    }
}

static void on_signal(int number) {
    (void)number;
    exit(1); /* runs cleanup (atexit): the server we started goes too */
}

/* Starts the server on `database`; returns the time from exec to its listening line (us), or
 * a negative value. The process is left running in `child`. */
static double start_server(const char *binary, const char *database, const char *token) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return -1;
    double started = now_us();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(pipe_fds[1], STDOUT_FILENO);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDERR_FILENO);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        execl(binary, binary, "--port", "0", "--database", database, "--api-token", token, (char *)NULL);
        _exit(127);
    }
    close(pipe_fds[1]);
    child.pid = pid;
    child.out = pipe_fds[0];
    char line[512];
    size_t used = 0;
    while (used < sizeof line - 1) {
        struct pollfd p = {child.out, POLLIN, 0};
        if (poll(&p, 1, 300000) <= 0) break;
        ssize_t got = read(child.out, line + used, sizeof line - 1 - used);
        if (got <= 0) break;
        used += (size_t)got;
        line[used] = '\0';
        char *eol = strchr(line, '\n');
        if (eol == NULL) continue;
        double ready = now_us();
        *eol = '\0';
        const char *prefix = "parley-server listening on ";
        if (strncmp(line, prefix, strlen(prefix)) != 0) break;
        snprintf(child.url, sizeof child.url, "%.127s", line + strlen(prefix));
        return ready - started;
    }
    fprintf(stderr, "%s did not start on %s\n", binary, database);
    stop_server(&child);
    return -1;
}

static long proc_status_kb(pid_t pid, const char *field) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    long value = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            value = atol(line + n + 1);
            break;
        }
    }
    fclose(f);
    return value;
}

typedef struct {
    double listening_ms, first_page_ms, page_ms, fill_s;
    long rss_start_kb, rss_page_kb, peak_kb;
} start_result;

/* Starts the server on `database` and reads it: exec to listening, exec to the first page of
 * 100 messages of `channel` (left in `page`), VmRSS at both points, then the median of 3 more
 * pages. The server stays up (in `child`) for checks. */
static int measure_start(const char *binary, const char *database, const char *token, const char *channel,
                         start_result *out, buffer *page) {
    char auth[128], url[512];
    snprintf(auth, sizeof auth, "Api-Token: %s", token);
    double exec_at = now_us();
    double listening = start_server(binary, database, token);
    if (listening < 0) return 0;
    out->listening_ms = listening / 1e3;
    out->rss_start_kb = proc_status_kb(child.pid, "VmRSS");
    snprintf(url, sizeof url, "%s/v3/group_channels/%s/messages?prev_limit=100", child.url, channel);
    long status = 0;
    for (int i = 0; i < 200 && (status = http("GET", url, auth, NULL, page)) != 200; i++) sleep_ms(10);
    if (status != 200) {
        fprintf(stderr, "no page from the server on %s: %ld %s\n", database, status, page->data);
        return 0;
    }
    out->first_page_ms = (now_us() - exec_at) / 1e3;
    out->rss_page_kb = proc_status_kb(child.pid, "VmRSS");
    double times[3];
    buffer scratch = {0};
    for (int i = 0; i < 3; i++) {
        double t0 = now_us();
        if (http("GET", url, auth, NULL, &scratch) != 200) return 0;
        times[i] = now_us() - t0;
    }
    free(scratch.data);
    out->page_ms = median(times, 3) / 1e3;
    out->peak_kb = proc_status_kb(child.pid, "VmHWM");
    return 1;
}

/* One SQL script through psql on `url` (stops at the first error, which psql prints). */
static int psql_script(const char *url, const char *sql) {
    char command[1024];
    snprintf(command, sizeof command, "'%spsql' -X -q -v ON_ERROR_STOP=1 -d '%s' > /dev/null", pg_bin, url);
    FILE *p = popen(command, "w");
    if (p == NULL) return 0;
    fputs(sql, p);
    return pclose(p) == 0;
}

/* The integer a one-value query answers through psql, or -1. */
static long long psql_number(const char *url, const char *sql) {
    char command[1024], line[64] = "";
    snprintf(command, sizeof command, "'%spsql' -X -q -A -t -v ON_ERROR_STOP=1 -d '%s' -c \"%s\"", pg_bin, url, sql);
    FILE *p = popen(command, "r");
    if (p == NULL) return -1;
    int got = fgets(line, sizeof line, p) != NULL;
    if (pclose(p) != 0 || !got) return -1;
    return atoll(line);
}

/* One database of the measure: a SQLite file or a PostgreSQL database. */
typedef struct {
    const char *name; /* "SQLite", "PostgreSQL" */
    int postgres;
    char database[512]; /* the path, or the postgres:// URL */
    start_result small, large;
    long long bytes; /* the database's size with LARGE messages */
    int verified;
} backend;

/* Adds copies of message 1 as messages `from` + 1 ... `to` (ids and times one millisecond
 * apart after `first_ts`, texts "stored <id - 1>"), as the server would have stored them:
 * same table, the server's own row with id, time and text changed; then points the
 * channel's last message, the sender's read position and the counters at the newest. */
static int add_stored_copies(const backend *b, const char *channel, const char *sender, int from, int to,
                             long long first_ts) {
    long long last_ts = first_ts + to - 1;
    static const char columns[] =
        "channel_url, type, 'stored ' || (i - 1), sender_id, '', custom_type, data,"
        " %lld + i - 1, updated_at, mention_type, is_op_msg, silent, parent_id, is_reply_to_channel, file,"
        " thumbnails, sorted_metaarray, reactions, reply_count, last_replied_at, thread_updated_at,"
        " recent_replier_ids, change_seq, changed_at, poll_id, translations";
    long long rows = -1;
    int ok;
    if (!b->postgres) {
        sqlite3 *db = NULL;
        if (sqlite3_open(b->database, &db) != SQLITE_OK) return 0;
        char *copies = sqlite3_mprintf(columns, first_ts);
        char *sql = sqlite3_mprintf(
            /* No journal while filling (the server is stopped): the rows go to the file once. */
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
            "BEGIN;"
            "CREATE TEMP TABLE template AS SELECT * FROM messages WHERE id = 1;"
            "WITH RECURSIVE n(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
            " INSERT INTO messages SELECT i, %s FROM n, template;"
            "UPDATE channels SET last_message_id = %d, updated_at = %lld WHERE url = %Q;"
            "UPDATE members SET read_ts = %lld WHERE channel_url = %Q AND user_id = %Q;"
            "INSERT OR REPLACE INTO meta (name, value) VALUES ('next_message_id', %d), ('last_message_ts', %lld);"
            /* What the server's writer does before each COMMIT (SearchQueries.indexNotedChanges in
             * server/Sources/ParleyServer/Storage/SearchQueries.swift): the noted copies go into
             * the search index. */
            "INSERT INTO message_search (rowid, message, file_name)"
            " SELECT m.id, m.message, coalesce(json_extract(m.file, '$.name'), '')"
            " FROM message_search_changes c CROSS JOIN messages m ON m.id = c.id ORDER BY c.id;"
            "DELETE FROM message_search_changes;"
            "COMMIT; PRAGMA journal_mode=WAL;",
            from + 1, to, copies, to, last_ts, channel, last_ts, channel, sender, to + 1, last_ts);
        char *error = NULL;
        ok = sqlite3_exec(db, sql, NULL, NULL, &error) == SQLITE_OK;
        if (!ok) fprintf(stderr, "stored copies: %s\n", error);
        sqlite3_free(error);
        sqlite3_free(sql);
        sqlite3_free(copies);
        sqlite3_stmt *check = NULL;
        if (ok && sqlite3_prepare_v2(db, "SELECT count(*) FROM messages", -1, &check, NULL) == SQLITE_OK &&
            sqlite3_step(check) == SQLITE_ROW) {
            rows = sqlite3_column_int64(check, 0);
        }
        sqlite3_finalize(check);
        sqlite3_close(db);
    } else {
        /* sqlite3_mprintf only formats here (%Q quotes as SQL wants on both engines). */
        char *copies = sqlite3_mprintf(columns, first_ts);
        char *sql = sqlite3_mprintf(
            "BEGIN;"
            "INSERT INTO messages SELECT i, %s FROM generate_series(%d, %d) AS i,"
            " (SELECT * FROM messages WHERE id = 1) AS template;"
            "UPDATE channels SET last_message_id = %d, updated_at = %lld WHERE url = %Q;"
            "UPDATE members SET read_ts = %lld WHERE channel_url = %Q AND user_id = %Q;"
            "INSERT INTO meta (name, value) VALUES ('next_message_id', %d), ('last_message_ts', %lld)"
            " ON CONFLICT (name) DO UPDATE SET value = excluded.value;"
            "COMMIT;"
            /* What autovacuum would have done to a table that grew this way. */
            "VACUUM ANALYZE messages;",
            copies, from + 1, to, to, last_ts, channel, last_ts, channel, sender, to + 1, last_ts);
        ok = psql_script(b->database, sql);
        if (!ok) fprintf(stderr, "stored copies: psql failed\n");
        sqlite3_free(sql);
        sqlite3_free(copies);
        if (ok) rows = psql_number(b->database, "SELECT count(*) FROM messages");
    }
    if (ok && rows != to) fprintf(stderr, "stored copies: %lld rows, expected %d\n", rows, to);
    return ok && rows == to;
}

/* The text of the last "message" string in a page (its newest message; ascending order). */
static int last_text(const char *page, char *out, size_t size) {
    const char *at = NULL;
    for (const char *p = page; (p = strstr(p, "\"message\":\"")) != NULL; p++) at = p;
    return at != NULL && json_string(at, "message", out, size);
}

static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* The running server really serves `count` messages: the newest page (in `page`), the
 * total count, the oldest message. */
static int check_stored(const char *auth, const char *channel, int count, const buffer *page, buffer *answer) {
    char path[512], expected[64], text[128];
    int ok = 1;
    snprintf(expected, sizeof expected, "stored %d", count - 1);
    int page_size = count < 100 ? count : 100;
    if (count_of(page->data, "\"message_id\":") != page_size || !last_text(page->data, text, sizeof text) ||
        strcmp(text, expected) != 0) {
        fprintf(stderr, "newest page: expected %d messages ending with \"%s\"\n", page_size, expected);
        ok = 0;
    }
    snprintf(path, sizeof path, "%s/v3/group_channels/%s/messages/total_count", child.url, channel);
    snprintf(expected, sizeof expected, "\"total\":%d", count);
    if (!call("GET", path, auth, NULL, answer) || strstr(answer->data, expected) == NULL) {
        fprintf(stderr, "total count: %s, expected %s\n", answer->data, expected);
        ok = 0;
    }
    snprintf(path, sizeof path, "%s/v3/group_channels/%s/messages?message_ts=0&prev_limit=0&next_limit=1", child.url, channel);
    if (!call("GET", path, auth, NULL, answer) || !last_text(answer->data, text, sizeof text) || strcmp(text, "stored 0") != 0 ||
        strstr(answer->data, "\"message_id\":1,") == NULL) {
        fprintf(stderr, "oldest message: %s\n", answer->data);
        ok = 0;
    }
    return ok;
}

/* One backend: one real message through the API (dated back far enough for the copies after
 * it to stay in the past), then the start with `small` and with `large` stored. */
static int measure_backend(const char *binary, backend *b, int small, int large, const char *run_id) {
    char token[64], auth[128], path[512], body[512];
    const char channel[] = "p7-stored", sender[] = "p7sender";
    buffer answer = {0}, page = {0};
    snprintf(token, sizeof token, "p7-%s", run_id);
    snprintf(auth, sizeof auth, "Api-Token: %s", token);
    if (start_server(binary, b->database, token) < 0) return 0;
    long long first_ts = wall_ms() - large - 60000;
    snprintf(path, sizeof path, "%s/v3/users", child.url);
    snprintf(body, sizeof body, "{\"user_id\":\"%s\",\"nickname\":\"sender\"}", sender);
    if (!call("POST", path, auth, body, &answer)) return 0;
    snprintf(path, sizeof path, "%s/v3/group_channels", child.url);
    snprintf(body, sizeof body, "{\"channel_url\":\"%s\",\"user_ids\":[\"%s\"]}", channel, sender);
    if (!call("POST", path, auth, body, &answer)) return 0;
    snprintf(path, sizeof path, "%s/v3/group_channels/%s/messages", child.url, channel);
    snprintf(body, sizeof body, "{\"message_type\":\"MESG\",\"user_id\":\"%s\",\"message\":\"stored 0\",\"created_at\":%lld}",
             sender, first_ts);
    if (!call("POST", path, auth, body, &answer)) return 0;
    if (strstr(answer.data, "\"message_id\":1,") == NULL) {
        fprintf(stderr, "the first message is not message 1: %s\n", answer.data);
        return 0;
    }
    stop_server(&child);

    b->verified = 1;
    int sizes[2] = {small, large}, stored = 1;
    start_result *results[2] = {&b->small, &b->large};
    for (int i = 0; i < 2; i++) {
        double filling = now_us();
        if (!add_stored_copies(b, channel, sender, stored, sizes[i], first_ts)) return 0;
        stored = sizes[i];
        results[i]->fill_s = (now_us() - filling) / 1e6;
        if (!measure_start(binary, b->database, token, channel, results[i], &page)) return 0;
        if (!check_stored(auth, channel, stored, &page, &answer)) b->verified = 0;
        stop_server(&child);
    }
    if (b->postgres) {
        b->bytes = psql_number(b->database, "SELECT pg_database_size(current_database())");
    } else {
        struct stat info;
        b->bytes = stat(b->database, &info) == 0 ? (long long)info.st_size : 0;
    }
    free(answer.data);
    free(page.data);
    return 1;
}

static void print_backend(const backend *b, int small, int large) {
    printf("Server start on %s (%s), servers this program starts, same binary\n", b->name,
           b->postgres ? "a database made with createdb, copies written through psql" : "a file, copies written with raw sqlite3");
    int sizes[2] = {small, large};
    const start_result *results[2] = {&b->small, &b->large};
    for (int i = 0; i < 2; i++) {
        const start_result *r = results[i];
        printf("  %7d stored (copies written in %5.1f s): exec -> listening %7.1f ms, -> first page of 100 %7.1f ms; "
               "VmRSS %6.1f MB started, %6.1f MB after the page (peak %.1f MB); a page then %.2f ms\n",
               sizes[i], r->fill_s, r->listening_ms, r->first_page_ms, r->rss_start_kb / 1024.0, r->rss_page_kb / 1024.0,
               r->peak_kb / 1024.0, r->page_ms);
    }
    printf("  database %.0f MB with %d messages; through REST at both sizes: total, newest page and oldest %s\n",
           b->bytes / 1e6, large, b->verified ? "match" : "WRONG");
}

static void backend_rows(const backend *b, int small, int large) {
    char measure[128], figure[96], comparison[128];
    int sqlite = !b->postgres;
    snprintf(measure, sizeof measure, "P7 %s start, %d stored, exec to first page", b->name, large);
    snprintf(figure, sizeof figure, "%.0f ms (%.2fx)", b->large.first_page_ms, b->large.first_page_ms / b->small.first_page_ms);
    snprintf(comparison, sizeof comparison, "%d stored: %.0f ms; listening %.0f / %.0f ms", small, b->small.first_page_ms,
             b->large.listening_ms, b->small.listening_ms);
    summary_row(measure, figure, comparison, sqlite ? "<= 1000 ms, <= 1.5x" : "- (SQLite's goal beside)");
    snprintf(measure, sizeof measure, "P7 %s RSS, %d stored, after a page", b->name, large);
    snprintf(figure, sizeof figure, "%.1f MB (%.2fx)", b->large.rss_page_kb / 1024.0,
             (double)b->large.rss_page_kb / (double)b->small.rss_page_kb);
    snprintf(comparison, sizeof comparison, "%d stored: %.1f MB", small, b->small.rss_page_kb / 1024.0);
    summary_row(measure, figure, comparison, sqlite ? "<= 100 MB, <= 1.5x" : "- (SQLite's goal beside)");
    snprintf(measure, sizeof measure, "  %s page of 100 at %d, once started (median of 3)", b->name, large);
    snprintf(figure, sizeof figure, "%.2f ms", b->large.page_ms);
    snprintf(comparison, sizeof comparison, "%d stored: %.2f ms", small, b->small.page_ms);
    summary_row(measure, figure, comparison, "<= 5 ms");
}

static int start_main(int argc, char **argv) {
    const char *binary = argv[2];
    int small = argc > 3 ? atoi(argv[3]) : 10000;
    int large = argc > 4 ? atoi(argv[4]) : 1000000;
    if (small < 2 || large <= small) return 2;
    char run_id[48];
    snprintf(run_id, sizeof run_id, "%ld-%d", (long)time(NULL), (int)getpid());
    if (mkdtemp(temp_dir) == NULL) return 1;
    temp_made = 1;
    backend backends[2] = {{.name = "SQLite"}, {.name = "PostgreSQL", .postgres = 1}};
    snprintf(backends[0].database, sizeof backends[0].database, "%s/server.sqlite", temp_dir);
    int count = 1;
    if (argc > 5) {
        const char *bin = getenv("PARLEY_PG_BIN");
        if (bin && *bin) snprintf(pg_bin, sizeof pg_bin, "%s/", bin);
        snprintf(pg_cluster, sizeof pg_cluster, "%s", argv[5]);
        char name[64];
        snprintf(name, sizeof name, "parley_bench_start_%d", (int)getpid());
        if (!pg_admin("createdb", name)) {
            fprintf(stderr, "createdb %s failed on %s\n", name, pg_cluster);
            return 1;
        }
        snprintf(pg_database, sizeof pg_database, "%s", name);
        snprintf(backends[1].database, sizeof backends[1].database, "%s/%s", pg_cluster, name);
        count = 2;
    }
    int verified = 1;
    for (int i = 0; i < count; i++) {
        if (!measure_backend(binary, &backends[i], small, large, run_id)) {
            fprintf(stderr, "the start on %s could not be measured\n", backends[i].name);
            return 1;
        }
        print_backend(&backends[i], small, large);
        verified = verified && backends[i].verified;
    }
    for (int i = 0; i < count; i++) backend_rows(&backends[i], small, large);
    if (setup_handle) curl_easy_cleanup(setup_handle);
    return verified ? 0 : 1;
}

/* The CPU per accepted message over the five runs: each server's, PostgreSQL's (all of the
 * cluster's processes) and their sum, as a line and a summary row. PARLEY_BENCH_CPU_BESIDE
 * (set by scripts/bench.sh to the SQLite run's figure) is printed beside it. */
static void print_cpu(const char *backend_name, const cpu_reading *before, const cpu_reading *after, int accepted) {
    if (before->servers == 0 || accepted == 0) {
        printf("  CPU per accepted message: not measured (no server process listening on this machine at the URL)\n");
        return;
    }
    char parts[256] = "";
    size_t used = 0;
    double total = 0;
    int complete = 1;
    for (int i = 0; i < before->servers; i++) {
        double spent = after->server_s[i] - before->server_s[i];
        if (before->server_s[i] < 0 || after->server_s[i] < 0) complete = 0;
        total += spent;
        const char *port = strrchr(before->server_urls[i], ':');
        used += (size_t)snprintf(parts + used, sizeof parts - used, "%sserver%s%s %.0f", i ? ", " : "",
                                 before->servers > 1 ? " " : "", before->servers > 1 && port ? port : "", spent * 1e6 / accepted);
    }
    if (before->postmaster) {
        double spent = after->cluster_s - before->cluster_s;
        if (before->cluster_s < 0 || after->cluster_s < 0) complete = 0;
        total += spent;
        snprintf(parts + used, sizeof parts - used, ", PostgreSQL %.0f", spent * 1e6 / accepted);
    }
    printf("  CPU per accepted message (%d accepted over the five runs): %s us; in all %.0f us%s\n", accepted, parts,
           total * 1e6 / accepted, complete ? "" : " (a process ended meanwhile: incomplete)");
    char measure[128], figure[64], comparison[256];
    const char *beside = getenv("PARLEY_BENCH_CPU_BESIDE");
    snprintf(measure, sizeof measure, "  %s: CPU per accepted message", backend_name);
    snprintf(figure, sizeof figure, "%.0f us", total * 1e6 / accepted);
    snprintf(comparison, sizeof comparison, "%s us%s%s", parts, beside && *beside ? "; " : "", beside ? beside : "");
    summary_row(measure, figure, comparison, "-");
}

/* ---- fanout ---------------------------------------------------------------------------- */

static int fanout_main(int argc, char **argv) {
    const char *backend_name = argv[2], *url = argv[3], *api_token = argv[4];
    int messages = argc > 5 ? atoi(argv[5]) : 5000;
    double seconds = argc > 6 ? atof(argv[6]) : 8;
    const char *other = argc > 8 ? argv[7] : NULL, *layout = argc > 8 ? argv[8] : "";
    int streams_there = other && strcmp(layout, "streams-there") == 0, both = other && strcmp(layout, "both") == 0;
    int by_channel = other && strcmp(layout, "by-channel") == 0;
    if (messages < 1 || seconds <= 0 || (other && !streams_there && !both && !by_channel)) return 2;
    /* Where member i's stream opens, and where message n is sent (n mod node_count); by
     * channel, one node per channel. */
    const char *nodes[2] = {url, other ? other : url};
    int node_count = both ? 2 : 1;

    char auth[128], path[512], body[4096], run_id[48], channel[96], pair[96], members[MEMBERS][64], tokens[MEMBERS][128];
    snprintf(auth, sizeof auth, "Api-Token: %s", api_token);
    snprintf(run_id, sizeof run_id, "%ld-%d", (long)time(NULL), (int)getpid());
    snprintf(channel, sizeof channel, "p7-%s", run_id);
    snprintf(pair, sizeof pair, "p7-pair-%s", run_id);
    buffer answer = {0};
    printf("P7: the server on %s with %d members, %d event streams (%ld cores, shared by the server and this benchmark)\n",
           backend_name, MEMBERS, MEMBERS, sysconf(_SC_NPROCESSORS_ONLN));
    /* Members, their channel, their session keys. */
    size_t used = (size_t)snprintf(body, sizeof body, "{\"channel_url\":\"%s\",\"user_ids\":[", channel);
    for (int i = 0; i < MEMBERS; i++) {
        char create[256];
        snprintf(members[i], sizeof members[i], "p7-%s-%d", run_id, i);
        snprintf(create, sizeof create, "{\"user_id\":\"%.63s\",\"nickname\":\"member %d\"}", members[i], i);
        snprintf(path, sizeof path, "%s/v3/users", url);
        if (!call("POST", path, auth, create, &answer)) return 1;
        used += (size_t)snprintf(body + used, sizeof body - used, "%s\"%s\"", i ? "," : "", members[i]);
    }
    snprintf(body + used, sizeof body - used, "]}");
    snprintf(path, sizeof path, "%s/v3/group_channels", url);
    if (!call("POST", path, auth, body, &answer)) return 1;
    snprintf(body, sizeof body, "{\"channel_url\":\"%s\",\"user_ids\":[\"%s\",\"%s\"]}", pair, members[0], members[1]);
    if (!call("POST", path, auth, body, &answer)) return 1;
    char spread[SPREAD_CHANNELS][96];
    for (int i = 0; i < SPREAD_CHANNELS; i++) {
        snprintf(spread[i], sizeof spread[i], "p7-spread-%d-%s", i, run_id);
        snprintf(body, sizeof body, "{\"channel_url\":\"%s\",\"user_ids\":[\"%s\",\"%s\"]}", spread[i], members[0], members[1]);
        if (!call("POST", path, auth, body, &answer)) return 1;
    }
    for (int i = 0; i < MEMBERS; i++) {
        snprintf(path, sizeof path, "%s/v3/users/%.63s/token", url, members[i]);
        if (!call("POST", path, auth, "{}", &answer) || !json_string(answer.data, "token", tokens[i], sizeof tokens[i])) return 1;
    }

    /* Every member's stream, read on a thread of its own. */
    CURLM *streams_multi = curl_multi_init();
    stream streams[MEMBERS];
    CURL *stream_handles[MEMBERS];
    struct curl_slist *stream_headers[MEMBERS];
    for (int i = 0; i < MEMBERS; i++) {
        char key[192];
        streams[i] = (stream){i, {0}, 0, 0};
        snprintf(key, sizeof key, "Session-Key: %s", tokens[i]);
        stream_headers[i] = curl_slist_append(curl_slist_append(NULL, key), "Accept: text/event-stream");
        const char *stream_base = streams_there ? other : both || by_channel ? nodes[i % 2] : url;
        snprintf(path, sizeof path, "%s/v3/users/%s/events", stream_base, members[i]);
        CURL *h = stream_handles[i] = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_URL, path);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, stream_headers[i]);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream_bytes);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &streams[i]);
        curl_multi_add_handle(streams_multi, h);
    }
    pthread_t receiver;
    pthread_create(&receiver, NULL, receive, streams_multi);
    double opening = now_us();
    while (atomic_load(&connected_streams) < MEMBERS && atomic_load(&ended_streams) == 0 && now_us() - opening < 30e6) sleep_ms(5);
    if (atomic_load(&connected_streams) < MEMBERS) {
        fprintf(stderr, "only %d of %d streams connected\n", atomic_load(&connected_streams), MEMBERS);
        return 1;
    }
    printf("  %d streams connected in %.0f ms\n", MEMBERS, (now_us() - opening) / 1e3);

    CURLM *send_multi = curl_multi_init();
    sender senders[SENDERS_MORE];
    struct curl_slist *send_headers = curl_slist_append(curl_slist_append(NULL, auth), "Content-Type: application/json");
    for (int i = 0; i < SENDERS_MORE; i++) {
        senders[i] = (sender){.n = -1};
        CURL *h = senders[i].easy = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, send_headers);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    }
    /* Message n goes to entry n mod count: with two servers, to each in turn. */
    char big_url[2][512], pair_url[2][512], spread_urls[2 * SPREAD_CHANNELS][512];
    const char *big_urls[2], *pair_urls[2], *spread_list[2 * SPREAD_CHANNELS];
    for (int k = 0; k < node_count; k++) {
        snprintf(big_url[k], sizeof big_url[k], "%s/v3/group_channels/%s/messages", nodes[k], channel);
        snprintf(pair_url[k], sizeof pair_url[k], "%s/v3/group_channels/%s/messages", nodes[by_channel ? 1 : k], pair);
        big_urls[k] = big_url[k];
        pair_urls[k] = pair_url[k];
    }
    /* With two servers, 8 entries: entry k is channel k mod 4 on server k / 4 (by channel,
     * on server (k mod 4) mod 2). */
    int spread_count = SPREAD_CHANNELS * (other && !streams_there ? 2 : 1);
    for (int k = 0; k < spread_count; k++) {
        int node = by_channel ? (k % SPREAD_CHANNELS) % 2 : k / SPREAD_CHANNELS;
        snprintf(spread_urls[k], sizeof spread_urls[k], "%s/v3/group_channels/%s/messages", nodes[node],
                 spread[k % SPREAD_CHANNELS]);
        spread_list[k] = spread_urls[k];
    }

    /* CPU from here to the end of the last run, of each server and of PostgreSQL. */
    cpu_reading cpu_before = cpu_processes(nodes, other ? 2 : 1);
    cpu_read(&cpu_before);
    /* The same burst into 2 of the members first: what the server does without the fan-out. */
    run *small = run_new('s', messages, 2);
    send_run(send_multi, senders, SENDERS, small, pair_urls, node_count, members, 2, 0, seconds / 2);
    wait_deliveries(small, 5);
    run_result small_result = summarize(small);
    /* And spread over channels of the same 2 members: writers on different channels (side by
     * side on PostgreSQL, one at a time on SQLite). */
    run *spread_run = run_new('c', messages, 2);
    send_run(send_multi, senders, SENDERS, spread_run, spread_list, spread_count, members, 2, 0, seconds / 2);
    wait_deliveries(spread_run, 5);
    run_result spread_result = summarize(spread_run);
    run *burst = run_new('b', messages, MEMBERS);
    send_run(send_multi, senders, SENDERS, burst, big_urls, node_count, members, MEMBERS, 0, seconds);
    wait_deliveries(burst, 5);
    run_result burst_result = summarize(burst);
    run *wide = run_new('w', messages, MEMBERS);
    send_run(send_multi, senders, SENDERS_MORE, wide, big_urls, node_count, members, MEMBERS, 0, seconds);
    wait_deliveries(wide, 5);
    run_result wide_result = summarize(wide);
    /* A rate the server can take, so that the latency is not the length of its queue. */
    int rate = burst_result.rate >= 2 * PACED_RATE ? PACED_RATE : (int)(burst_result.rate / 2);
    if (rate < 1) rate = 1;
    int paced_count = (int)(rate * seconds * 2); /* twice as long: a low rate gives few samples */
    if (paced_count < 10) paced_count = 10;
    run *slow = run_new('r', paced_count, MEMBERS);
    send_run(send_multi, senders, SENDERS, slow, big_urls, node_count, members, MEMBERS, rate, seconds * 2 + 5);
    wait_deliveries(slow, 5);
    run_result paced_result = summarize(slow);
    cpu_reading cpu_after = cpu_before;
    cpu_read(&cpu_after);

    printf("Messages posted (Api-Token, %d in flight, sender = the next member in turn) -> every member's stream\n", SENDERS);
    print_run("2 members, burst:", &small_result, 2);
    char spread_title[64];
    snprintf(spread_title, sizeof spread_title, "2 members, %d channels, burst:", SPREAD_CHANNELS);
    print_run(spread_title, &spread_result, 2);
    print_run("50 members, burst:", &burst_result, MEMBERS);
    char wide_title[64];
    snprintf(wide_title, sizeof wide_title, "  the same, %d in flight:", SENDERS_MORE);
    print_run(wide_title, &wide_result, MEMBERS);
    char title[64];
    snprintf(title, sizeof title, "50 members, %d msg/s:", rate);
    print_run(title, &paced_result, MEMBERS);
    if (rate != PACED_RATE)
        printf("  (paced at half the burst's rate: the server does not take twice %d msg/s, the rate asked for)\n", PACED_RATE);
    int duplicates = small->duplicates + spread_run->duplicates + slow->duplicates + burst->duplicates + wide->duplicates;
    if (stray_events > 0 || duplicates > 0) printf("  events outside a run: %ld; duplicates: %d\n", stray_events, duplicates);
    int streams_ended = atomic_load(&ended_streams);
    if (streams_ended > 0) printf("  %d event streams ended during the runs\n", streams_ended);

    atomic_store(&stop_receiving, 1);
    curl_multi_wakeup(streams_multi);
    pthread_join(receiver, NULL);
    for (int i = 0; i < MEMBERS; i++) {
        curl_multi_remove_handle(streams_multi, stream_handles[i]);
        curl_easy_cleanup(stream_handles[i]);
        curl_slist_free_all(stream_headers[i]);
        free(streams[i].in.data);
    }
    curl_multi_cleanup(streams_multi);
    for (int i = 0; i < SENDERS_MORE; i++) curl_easy_cleanup(senders[i].easy);
    curl_slist_free_all(send_headers);
    curl_multi_cleanup(send_multi);

    char measure[128], figure[96], comparison[128];
    snprintf(measure, sizeof measure, "P7 %s: accepted messages, %d members, %d streams", backend_name, MEMBERS, MEMBERS);
    snprintf(figure, sizeof figure, "%.0f msg/s", burst_result.rate);
    snprintf(comparison, sizeof comparison, "2 members: %.0f msg/s, over %d channels %.0f; %d in flight, %d cores",
             small_result.rate, SPREAD_CHANNELS, spread_result.rate, SENDERS, (int)sysconf(_SC_NPROCESSORS_ONLN));
    summary_row(measure, figure, comparison, ">= 1000 msg/s");
    snprintf(measure, sizeof measure, "  %s: the same with %d in flight", backend_name, SENDERS_MORE);
    snprintf(figure, sizeof figure, "%.0f msg/s", wide_result.rate);
    snprintf(comparison, sizeof comparison, "delivery p50 %.0f p99 %.0f ms, lost %d of %d", wide_result.p50, wide_result.p99,
             wide_result.lost, wide_result.accepted);
    summary_row(measure, figure, comparison, ">= 1000 msg/s");
    snprintf(measure, sizeof measure, "  %s: delivery to all %d at %d msg/s, POST to last", backend_name, MEMBERS, rate);
    snprintf(figure, sizeof figure, "p50 %.1f p99 %.1f ms", paced_result.p50, paced_result.p99);
    snprintf(comparison, sizeof comparison, "max %.1f ms, lost %d of %d", paced_result.max, paced_result.lost, paced_result.accepted);
    summary_row(measure, figure, comparison, "p99 <= 50 ms");
    snprintf(measure, sizeof measure, "  %s: delivery to all %d at %.0f msg/s (burst)", backend_name, MEMBERS, burst_result.rate);
    snprintf(figure, sizeof figure, "p50 %.0f p99 %.0f ms", burst_result.p50, burst_result.p99);
    snprintf(comparison, sizeof comparison, "max %.0f ms, lost %d of %d", burst_result.max, burst_result.lost, burst_result.accepted);
    summary_row(measure, figure, comparison, "p99 <= 50 ms");

    int accepted = small_result.accepted + spread_result.accepted + burst_result.accepted + wide_result.accepted +
                   paced_result.accepted;
    print_cpu(backend_name, &cpu_before, &cpu_after, accepted);

    run_free(small);
    run_free(spread_run);
    run_free(burst);
    run_free(wide);
    run_free(slow);
    free(answer.data);
    if (setup_handle) curl_easy_cleanup(setup_handle);
    return 0; /* loss is a figure, not a failure of the program */
}

/* ---- inflight: accepted messages by requests in flight --------------------------------- */

static const int inflight_counts[] = {1, 2, 4, 8, 16};
#define INFLIGHT_MAX 16
/* Messages one measure may send (the arrays of a run are sized by it): a run that reaches it
 * ends before its SECONDS, its rate still counted over its own time. */
#define INFLIGHT_MESSAGES 1000000

/* One row of the inflight table: `in_flight` requests at once for `seconds`, each slot
 * posting into its own channel; prints the row, adds the refused requests to `refused` and
 * returns the accepted msg/s. */
static double inflight_row(CURLM *multi, sender *senders, int in_flight, double seconds, int *refused) {
    /* Each slot has a channel of its own (`sender.url`): the shared list is never read. */
    const char *unused_urls[1] = {senders[0].url};
    char unused_members[1][64] = {""};
    run *r = run_new('i', INFLIGHT_MESSAGES, 2);
    send_run(multi, senders, in_flight, r, unused_urls, 1, unused_members, 1, 0, seconds);
    run_result result = summarize(r);
    *refused += result.refused;
    printf("  %2d in flight: %7.1f msg/s accepted (%d in %.1f s); POST answered p50 %.1f ms, p99 %.1f ms%s\n", in_flight,
           result.rate, result.accepted, (r->finished - r->started) / 1e6, result.answer_p50, result.answer_p99,
           result.refused ? "; some refused" : "");
    run_free(r);
    return result.rate;
}

static int inflight_main(int argc, char **argv) {
    const char *backend_name = argv[2], *url = argv[3], *api_token = argv[4], *other = argc > 6 ? argv[6] : NULL;
    char *end;
    double seconds = strtod(argv[5], &end);
    if (end == argv[5] || *end != '\0' || !(seconds >= 0.5 && seconds <= 600)) {
        fprintf(stderr, "bench_server inflight: SECONDS must be a number from 0.5 to 600 (was '%s')\n", argv[5]);
        return 2;
    }
    const char *nodes[2] = {url, other ? other : url};
    int node_count = other ? 2 : 1;
    const char *layout = other ? "2 servers" : "one server";

    char auth[128], path[512], body[512], run_id[48], users[2 * INFLIGHT_MAX][64], channels[INFLIGHT_MAX][96];
    snprintf(auth, sizeof auth, "Api-Token: %s", api_token);
    snprintf(run_id, sizeof run_id, "%ld-%d", (long)time(NULL), (int)getpid());
    buffer answer = {0};
    /* Each channel its own 2 members: the requests in flight share no channel and no user. */
    snprintf(path, sizeof path, "%s/v3/users", url);
    for (int i = 0; i < 2 * INFLIGHT_MAX; i++) {
        snprintf(users[i], sizeof users[i], "inflight-%s-%d", run_id, i);
        snprintf(body, sizeof body, "{\"user_id\":\"%.63s\",\"nickname\":\"member %d\"}", users[i], i);
        if (!call("POST", path, auth, body, &answer)) return 1;
    }
    snprintf(path, sizeof path, "%s/v3/group_channels", url);
    for (int i = 0; i < INFLIGHT_MAX; i++) {
        snprintf(channels[i], sizeof channels[i], "inflight-%d-%s", i, run_id);
        snprintf(body, sizeof body, "{\"channel_url\":\"%.95s\",\"user_ids\":[\"%.63s\",\"%.63s\"]}", channels[i], users[2 * i],
                 users[2 * i + 1]);
        if (!call("POST", path, auth, body, &answer)) return 1;
    }

    /* Slot i: channel i, on server i mod 2 when there are two. */
    CURLM *multi = curl_multi_init();
    sender senders[INFLIGHT_MAX];
    char slot_urls[INFLIGHT_MAX][512];
    struct curl_slist *headers = curl_slist_append(curl_slist_append(NULL, auth), "Content-Type: application/json");
    for (int i = 0; i < INFLIGHT_MAX; i++) {
        snprintf(slot_urls[i], sizeof slot_urls[i], "%.300s/v3/group_channels/%.95s/messages", nodes[i % node_count],
                 channels[i]);
        senders[i] = (sender){.n = -1, .url = slot_urls[i], .pair = {users[2 * i], users[2 * i + 1]}};
        CURL *h = senders[i].easy = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    }
    const char *unused_urls[1] = {slot_urls[0]};
    char unused_members[1][64] = {""};
    /* Not measured: every slot's connection to its server, the servers' database connections
     * and their caches of these channels, made before the first measure. */
    run *warm = run_new('w', INFLIGHT_MESSAGES, 2);
    send_run(multi, senders, INFLIGHT_MAX, warm, unused_urls, 1, unused_members, 1, 0, 1.0);
    (void)summarize(warm); /* which also ends it as the current run */
    run_free(warm);

    printf("Scale-out on %s, %s: accepted messages by requests in flight (%ld cores, shared by the server%s, the "
           "database and this benchmark)\n",
           backend_name, layout, sysconf(_SC_NPROCESSORS_ONLN), other ? "s" : "");
    printf("  N requests in flight, each always into its own channel of 2 members%s, the next one sent when its answer "
           "came; %g s each\n",
           other ? ", on the 2 servers in turn" : "", seconds);
    int count = (int)(sizeof inflight_counts / sizeof inflight_counts[0]);
    double rates[sizeof inflight_counts / sizeof inflight_counts[0]];
    int refused = 0;
    for (int k = 0; k < count; k++) rates[k] = inflight_row(multi, senders, inflight_counts[k], seconds, &refused);
    double ratio = rates[0] > 0 ? rates[3] / rates[0] : 0;
    printf("  8 in flight / 1 in flight: %.2fx\n", ratio);

    /* As a client library sends: its user's session key, and a req_id with every message (so
     * that a resend is answered with the first copy). Each slot's first member sends. */
    struct curl_slist *session_headers[INFLIGHT_MAX] = {0};
    for (int i = 0; i < INFLIGHT_MAX; i++) {
        char token[128], key[192];
        snprintf(path, sizeof path, "%s/v3/users/%.63s/token", url, users[2 * i]);
        if (!call("POST", path, auth, "{}", &answer) || !json_string(answer.data, "token", token, sizeof token)) return 1;
        snprintf(key, sizeof key, "Session-Key: %s", token);
        senders[i].session_headers = session_headers[i] = curl_slist_append(curl_slist_append(NULL, key), "Content-Type: application/json");
    }
    static const int session_counts[] = {1, 8};
    double session_rates[2];
    printf("  Sent as a client library sends (Session-Key, a req_id in each message):\n");
    for (int k = 0; k < 2; k++) session_rates[k] = inflight_row(multi, senders, session_counts[k], seconds, &refused);
    if (refused > 0) printf("  %d requests refused (not counted as accepted)\n", refused);

    for (int i = 0; i < INFLIGHT_MAX; i++) {
        curl_easy_cleanup(senders[i].easy);
        curl_slist_free_all(session_headers[i]);
    }
    curl_slist_free_all(headers);
    curl_multi_cleanup(multi);
    free(answer.data);
    if (setup_handle) curl_easy_cleanup(setup_handle);

    char measure[160], figure[96], comparison[160];
    snprintf(measure, sizeof measure, "Scale-out, %s, %s: 8 in flight, 8 channels", backend_name, layout);
    snprintf(figure, sizeof figure, "%.0f msg/s (%.2fx)", rates[3], ratio);
    snprintf(comparison, sizeof comparison, "msg/s at 1: %.0f, 2: %.0f, 4: %.0f, 16: %.0f in flight", rates[0], rates[1],
             rates[2], rates[4]);
    summary_row(measure, figure, comparison, "8 in flight \u2265 4\u00d7 1 in flight");
    snprintf(measure, sizeof measure, "Scale-out, %s, %s: 1 in flight, Session-Key and req_id", backend_name, layout);
    snprintf(figure, sizeof figure, "%.0f msg/s", session_rates[0]);
    snprintf(comparison, sizeof comparison, "Api-Token, no req_id: %.0f msg/s; 8 in flight: %.0f msg/s", rates[0], session_rates[1]);
    summary_row(measure, figure, comparison, "");
    return 0;
}

/* ---- main ------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    int fanout = argc >= 5 && strcmp(argv[1], "fanout") == 0, start = argc >= 3 && strcmp(argv[1], "start") == 0;
    int inflight = argc >= 6 && argc <= 7 && strcmp(argv[1], "inflight") == 0;
    if (!fanout && !start && !inflight) {
        fprintf(stderr,
                "usage: %s fanout BACKEND SERVER_URL API_TOKEN [MESSAGES] [SECONDS] [OTHER_URL streams-there|both|by-channel]\n"
                "       %s start SERVER_BINARY [SMALL] [LARGE] [POSTGRES_URL]\n"
                "       %s inflight BACKEND SERVER_URL API_TOKEN SECONDS [OTHER_URL]\n",
                argv[0], argv[0], argv[0]);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_ALL);
    atexit(cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    return fanout ? fanout_main(argc, argv) : inflight ? inflight_main(argc, argv) : start_main(argc, argv);
}
