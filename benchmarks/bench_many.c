/* bench_many: many clients in one process — what each one costs, and what they do together.
 *
 *   bench_many SERVER_BINARY [--quick] [--file N[,N...]] [--memory N]
 *
 * It starts its own parley-server (SERVER_BINARY, on a fresh SQLite file, loopback, any free
 * port), because the reconnect storm kills it and starts it again on the same port and
 * database. Setup, through the admin API, many requests in flight: the users, a session
 * token each, one channel of BIG members (full 1,000; quick 200) and channels of 10 members
 * covering every user; one more user, the sender, is a member of every channel, so that the
 * clients only receive.
 *
 * Then the floor (receive_floor.h): a member's stream captured by a plain libcurl reader
 * while messages are posted into the big channel, replayed from memory through jansson,
 * one SQLite transaction per chunk (message, channel, FTS5 index) and a callback thread;
 * on a file and in memory.
 *
 * Then one run per size, each in a process of its own (this program again, with --run), so
 * that what one run leaves behind (threads, memory, a crash) does not reach the next: N
 * clients with file caches (full: 100, 1,000, 4,000; quick: 100, 300), then with memory
 * caches (full: 10,000; quick: 1,000); --file and --memory choose other sizes (0: none).
 * Each run measures:
 *   - threads and file descriptors of the process (/proc/self), and resident memory, before
 *     the clients, after creating them, and once all are connected, caught up and idle;
 *   - connect all at once: every parley_client_connect called back to back; the time until
 *     each completed and its stream is open (CONNECTED), process CPU per client, failures;
 *   - idle: process CPU over a few seconds with every client connected and nothing sent;
 *   - live messages into the big channel (posted by the sender, raw libcurl): from the POST
 *     to each in-process member's event callback, p50 and p99 over every (message, client);
 *     process CPU per received message per client, beside the floor replayed in this same
 *     process (from the parent's capture, saved to a file) right before and right after them;
 *   - the reconnect storm: messages posted into the big channel and into every small channel
 *     holding clients, the server killed (SIGKILL), started again on the same port and
 *     database, more messages posted at once; the time from the restart until every client
 *     holds every message it should (each counted at its event callback, live or from the
 *     catch-up), how many never came, how many came twice.
 * A failure (a client not created, a connect that failed, a run that crashed) is counted and
 * printed, never fatal to the other runs. RLIMIT_NOFILE is raised to its hard limit first.
 *
 * The goals printed beside the figures: at most 16 threads added by the clients, at most 4
 * descriptors and 0.5 MB resident per client, p50 delivery at most 300 ms into a channel of
 * 1,000 members, CPU per received message at most 2x the floor, the reconnect storm of 4,000
 * clients done within 60 s with nothing lost or duplicated. */
#define _GNU_SOURCE
#include "bench_support.h"
#include "receive_floor.h"
#include <dirent.h>
#include <errno.h>
#include <semaphore.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

enum { max_live = 32, storm_big_messages = 10, small_channel_users = 10 };

/* ---- The process, from /proc/self ----------------------------------------------------- */

typedef struct {
    int threads;
    int fds;
    long rss_kb;
} process_figures;

/* Kept open from the start: once the clients hold every descriptor the limit allows, the
 * figures can still be read. */
static int status_fd = -1;
static DIR *fd_directory;

static void open_process_files(void) {
    status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    fd_directory = opendir("/proc/self/fd");
}

static long status_field(const char *name) {
    char text[8192];
    /* procfs writes the file anew at each read from its start */
    ssize_t length = status_fd >= 0 ? pread(status_fd, text, sizeof text - 1, 0) : -1;
    if (length <= 0) return -1;
    text[length] = '\0';
    char key[64];
    snprintf(key, sizeof key, "\n%s:", name);
    const char *found = strstr(text, key);
    return found ? atol(found + strlen(key)) : -1;
}

static int open_fds(void) {
    if (fd_directory == NULL) return -1;
    rewinddir(fd_directory);
    int count = 0;
    for (struct dirent *entry; (entry = readdir(fd_directory)) != NULL;) {
        if (entry->d_name[0] != '.') count++;
    }
    return count;
}

static process_figures process_now(void) {
    process_figures figures = {(int)status_field("Threads"), open_fds(), status_field("VmRSS")};
    return figures;
}

static double process_cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void raise_fd_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) perror("setrlimit(RLIMIT_NOFILE)");
    }
}

static long fd_limit(void) {
    struct rlimit limit;
    return getrlimit(RLIMIT_NOFILE, &limit) == 0 ? (long)limit.rlim_cur : -1;
}

/* ---- Posting: the sender, raw libcurl, one kept-alive connection ----------------------- */

typedef struct {
    CURL *curl;
    struct curl_slist *headers;
    char server_url[256];
} poster;

static size_t discard_answer(char *data, size_t size, size_t count, void *user_data) {
    (void)data; (void)user_data;
    return size * count;
}

static int poster_init(poster *sender, const char *server_url, const char *api_token) {
    char header[320];
    snprintf(sender->server_url, sizeof sender->server_url, "%s", server_url);
    snprintf(header, sizeof header, "Api-Token: %s", api_token);
    sender->headers = curl_slist_append(curl_slist_append(NULL, header), "Content-Type: application/json");
    sender->curl = curl_easy_init();
    if (sender->curl == NULL) return 0;
    curl_easy_setopt(sender->curl, CURLOPT_HTTPHEADER, sender->headers);
    curl_easy_setopt(sender->curl, CURLOPT_WRITEFUNCTION, discard_answer);
    curl_easy_setopt(sender->curl, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(sender->curl, CURLOPT_TIMEOUT, 30L);
    return 1;
}

static void poster_cleanup(poster *sender) {
    curl_easy_cleanup(sender->curl);
    curl_slist_free_all(sender->headers);
}

/* Posts `text` from `sender_user` into `channel` with `req_id` (a retry after a lost answer
 * is not stored twice); tries `attempts` times, 100 ms apart. 1 when the server took it. */
static int post_message(poster *sender, const char *channel, const char *sender_user, const char *text, const char *req_id,
                        int attempts) {
    char url[512], body[512];
    snprintf(url, sizeof url, "%s/v3/group_channels/%s/messages", sender->server_url, channel);
    snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"%s\", \"message\": \"%s\", \"req_id\": \"%s\"}",
             sender_user, text, req_id);
    curl_easy_setopt(sender->curl, CURLOPT_URL, url);
    curl_easy_setopt(sender->curl, CURLOPT_POSTFIELDS, body);
    for (int attempt = 0; attempt < attempts; attempt++) {
        long status = 0;
        if (attempt > 0) sleep_ms(100);
        if (curl_easy_perform(sender->curl) != CURLE_OK) continue;
        curl_easy_getinfo(sender->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200) return 1;
        if (status < 500) break; /* a refusal: another try gets it again */
    }
    fprintf(stderr, "POST %s (%s) failed\n", channel, text);
    return 0;
}

/* ---- Names shared by the setup and the runs ------------------------------------------- */

static void user_name(char *out, size_t size, const char *run_id, int index) {
    snprintf(out, size, "many-%s-%d", run_id, index);
}

static void sender_name(char *out, size_t size, const char *run_id) {
    snprintf(out, size, "many-%s-sender", run_id);
}

static void big_channel_name(char *out, size_t size, const char *run_id) {
    snprintf(out, size, "many-%s-big", run_id);
}

static void small_channel_name(char *out, size_t size, const char *run_id, int group) {
    snprintf(out, size, "many-%s-small-%d", run_id, group);
}

/* ---- Setup: admin requests with many in flight ---------------------------------------- */

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int in_flight;
    int failures;
} request_window;

typedef struct {
    request_window *window;
    char *token_out; /* where a token request puts the token, else NULL */
} window_request;

static void on_window_result(void *user_data, const parley_error *error, const char *json) {
    window_request *request = user_data;
    request_window *window = request->window;
    int ok = error == NULL;
    if (ok && request->token_out != NULL) {
        const char *found = strstr(json, "\"token\":\"");
        ok = found != NULL && sscanf(found + 9, "%255[^\"]", request->token_out) == 1;
    }
    pthread_mutex_lock(&window->mutex);
    if (!ok) {
        if (window->failures++ < 5) fprintf(stderr, "setup request failed: %s\n", error ? error->message : json);
    }
    window->in_flight--;
    pthread_cond_signal(&window->cond);
    pthread_mutex_unlock(&window->mutex);
    free(request);
}

/* Starts a request once fewer than `limit` are in flight. */
static void window_request_start(parley_client *admin_client, request_window *window, int limit, const char *method,
                                 const char *path, const char *body, char *token_out) {
    pthread_mutex_lock(&window->mutex);
    while (window->in_flight >= limit) pthread_cond_wait(&window->cond, &window->mutex);
    window->in_flight++;
    pthread_mutex_unlock(&window->mutex);
    window_request *request = calloc(1, sizeof *request);
    request->window = window;
    request->token_out = token_out;
    if (parley_client_request(admin_client, NULL, method, path, body, on_window_result, request) != PARLEY_OK) {
        on_window_result(request, &(parley_error){PARLEY_E_INTERNAL, "not started", 0, 0}, NULL);
    }
}

static int window_finish(request_window *window) {
    pthread_mutex_lock(&window->mutex);
    while (window->in_flight > 0) pthread_cond_wait(&window->cond, &window->mutex);
    int failures = window->failures;
    window->failures = 0;
    pthread_mutex_unlock(&window->mutex);
    return failures;
}

typedef char token_text[256];

/* Users 0..users-1 and the sender, a token each (tokens[users] is the sender's), the big
 * channel (users 0..big-2 and the sender) and the channels of 10 (each with the sender). */
static int set_up(parley_client *admin_client, const char *run_id, int users, int big, token_text *tokens) {
    enum { in_flight = 16 };
    request_window window = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    char name[128], path[256], body[512];
    for (int i = 0; i <= users; i++) {
        if (i < users) user_name(name, sizeof name, run_id, i);
        else sender_name(name, sizeof name, run_id);
        snprintf(body, sizeof body, "{\"user_id\": \"%s\", \"nickname\": \"member %d\"}", name, i);
        window_request_start(admin_client, &window, in_flight, "POST", "/v3/users", body, NULL);
    }
    if (window_finish(&window) > 0) return 0;
    for (int i = 0; i <= users; i++) {
        if (i < users) user_name(name, sizeof name, run_id, i);
        else sender_name(name, sizeof name, run_id);
        snprintf(path, sizeof path, "/v3/users/%s/token", name);
        window_request_start(admin_client, &window, in_flight, "POST", path, "{}", tokens[i]);
    }
    if (window_finish(&window) > 0) return 0;
    /* The big channel, in one request. */
    char sender[128], channel[128];
    sender_name(sender, sizeof sender, run_id);
    big_channel_name(channel, sizeof channel, run_id);
    size_t capacity = (size_t)big * 96 + 512, used = 0;
    char *members = malloc(capacity);
    used += (size_t)snprintf(members, capacity, "{\"channel_url\": \"%s\", \"name\": \"big\", \"user_ids\": [\"%s\"", channel, sender);
    for (int i = 0; i < big - 1 && i < users; i++) {
        user_name(name, sizeof name, run_id, i);
        used += (size_t)snprintf(members + used, capacity - used, ", \"%s\"", name);
    }
    snprintf(members + used, capacity - used, "]}");
    window_request_start(admin_client, &window, 1, "POST", "/v3/group_channels", members, NULL);
    free(members);
    if (window_finish(&window) > 0) return 0;
    for (int group = 0; group * small_channel_users < users; group++) {
        small_channel_name(channel, sizeof channel, run_id, group);
        used = (size_t)snprintf(body, sizeof body, "{\"channel_url\": \"%s\", \"name\": \"small\", \"user_ids\": [\"%s\"", channel, sender);
        for (int i = group * small_channel_users; i < (group + 1) * small_channel_users && i < users; i++) {
            user_name(name, sizeof name, run_id, i);
            used += (size_t)snprintf(body + used, sizeof body - used, ", \"%s\"", name);
        }
        snprintf(body + used, sizeof body - used, "]}");
        window_request_start(admin_client, &window, in_flight, "POST", "/v3/group_channels", body, NULL);
    }
    return window_finish(&window) == 0;
}

/* ---- One run: N clients in this process ------------------------------------------------- */

typedef struct {
    int index;
    parley_client *client;
    int connect_code;
    atomic_int connect_done, open;
    atomic_llong live_at[max_live]; /* first arrival, whole µs (now_us) */
    atomic_int live_count[max_live];
    atomic_int storm_big[storm_big_messages];
    atomic_int storm_small[2];
    atomic_int resyncs;
    atomic_int channels_caught_up; /* channel_changelog events: one per channel of the first catch-up */
    atomic_llong reconnected_at;   /* the last reconnect_succeeded (now_us) */
    atomic_int reconnect_failures; /* reconnect_failed events */
    atomic_llong last_storm_at;    /* when the client first held its last storm message (now_us) */
} many_client;

static atomic_int connects_done, streams_open, live_first[max_live], storm_first;
static atomic_llong storm_last_at; /* when a storm message last reached a client for the first time (now_us) */

/* Posted at each connect completion and connection event: a wait on it costs no CPU, as
 * polling would inside a measured connect. */
static sem_t client_news;

static void on_connected(void *user_data, const parley_error *error, const char *json) {
    (void)json;
    many_client *client = user_data;
    client->connect_code = error ? error->code : 0;
    if (error != NULL && client->connect_code != PARLEY_E_CANCELLED) {
        static atomic_int printed = 0;
        if (atomic_fetch_add(&printed, 1) < 5) fprintf(stderr, "connect of client %d failed: %s\n", client->index, error->message);
    }
    atomic_store(&client->connect_done, 1);
    atomic_fetch_add(&connects_done, 1);
    sem_post(&client_news);
}

static void on_connection(void *user_data, int event, const parley_error *error) {
    (void)error;
    many_client *client = user_data;
    if (event == PARLEY_CONNECTION_CONNECTED && atomic_exchange(&client->open, 1) == 0) atomic_fetch_add(&streams_open, 1);
    if (event == PARLEY_CONNECTION_RECONNECT_SUCCEEDED) atomic_store(&client->reconnected_at, (long long)now_us());
    if (event == PARLEY_CONNECTION_RECONNECT_FAILED) atomic_fetch_add(&client->reconnect_failures, 1);
    sem_post(&client_news);
}

/* Counts each message the client is told of (live, or by the catch-up after a reconnect);
 * the text is "many live K", "many storm K" or "many small K". The payload's message comes
 * after its channel, whose last message may be a later one: the last occurrence is the
 * message's own. */
static void on_event(void *user_data, const char *category, const char *channel_url, const char *payload) {
    (void)channel_url;
    many_client *client = user_data;
    if (strcmp(category, "resync") == 0) atomic_fetch_add(&client->resyncs, 1);
    if (strcmp(category, "channel_changelog") == 0) atomic_fetch_add(&client->channels_caught_up, 1);
    if (strcmp(category, "message_received") != 0 && strcmp(category, "message_changelog") != 0) return;
    double now = now_us();
    static const char marker[] = "\"message\":\"many ";
    const char *at = NULL;
    for (const char *found = strstr(payload, marker); found != NULL; found = strstr(found + 1, marker)) at = found;
    if (at == NULL) return;
    at += sizeof marker - 1;
    if (strncmp(at, "live ", 5) == 0) {
        int k = atoi(at + 5);
        if (k < 0 || k >= max_live) return;
        if (atomic_fetch_add(&client->live_count[k], 1) == 0) {
            atomic_store(&client->live_at[k], (long long)now);
            atomic_fetch_add(&live_first[k], 1);
        }
    } else if (strncmp(at, "storm ", 6) == 0) {
        int k = atoi(at + 6);
        if (k >= 0 && k < storm_big_messages && atomic_fetch_add(&client->storm_big[k], 1) == 0) {
            atomic_fetch_add(&storm_first, 1);
            atomic_store(&storm_last_at, (long long)now);
            atomic_store(&client->last_storm_at, (long long)now);
        }
    } else if (strncmp(at, "small ", 6) == 0) {
        int k = atoi(at + 6);
        if (k >= 0 && k < 2 && atomic_fetch_add(&client->storm_small[k], 1) == 0) {
            atomic_fetch_add(&storm_first, 1);
            atomic_store(&storm_last_at, (long long)now);
            atomic_store(&client->last_storm_at, (long long)now);
        }
    }
}

typedef struct {
    const char *url, *api_token, *run_id, *tokens_file, *work_dir;
    int clients, memory, big, live_messages, idle_seconds;
    double floor_cpu_us;
    int control_in, control_out; /* the parent's pipes: this run asks it to kill and start the server */
    const char *floor_capture;   /* the floor's frames (capture_save), replayed here around the live messages */
    int floor_passes;
} run_settings;

/* The floor replayed in this process, on a cache of this run's kind: beside the live messages,
 * among the clients, so that the ratio does not span the minutes (and the host's changes of
 * speed) between the parent's floor and this run. 0 if the capture is not there. */
static double floor_here(const run_settings *settings, const stream_capture *capture) {
    if (capture == NULL || settings->floor_passes <= 0) return 0;
    char path[700] = ":memory:";
    if (!settings->memory) snprintf(path, sizeof path, "%s/floor-%d.sqlite", settings->work_dir, settings->clients);
    receive_floor_result result = receive_floor_run(capture, path, settings->floor_passes);
    for (const char *const *suffix = (const char *const[]){"", "-wal", "-shm", NULL}; !settings->memory && *suffix; suffix++) {
        char file[720];
        snprintf(file, sizeof file, "%s%s", path, *suffix);
        unlink(file);
    }
    return result.failed ? 0 : result.cpu_per_message;
}

/* Asks the parent (which owns the server) to `request` ("kill", "start"); its answer's first
 * word into `answer`. */
static int ask_parent(const run_settings *settings, const char *request, char *answer, size_t size) {
    char line[400];
    snprintf(line, sizeof line, "%s\n", request);
    if (write(settings->control_out, line, strlen(line)) != (ssize_t)strlen(line)) return 0;
    size_t used = 0;
    while (used < sizeof line - 1) {
        ssize_t got = read(settings->control_in, line + used, 1);
        if (got <= 0) return 0;
        if (line[used] == '\n') break;
        used++;
    }
    line[used] = '\0';
    snprintf(answer, size, "%s", line);
    return 1;
}

/* The sender's posts are made by the parent: its CPU is not the clients', and it has
 * descriptors to spare when the clients hold every one this process may open. */
static int post_through_parent(const run_settings *settings, const char *channel, const char *text, const char *req_id,
                               int attempts) {
    char request[400], answer[300] = "";
    snprintf(request, sizeof request, "post %d %s %s %s", attempts, channel, req_id, text);
    return ask_parent(settings, request, answer, sizeof answer) && strcmp(answer, "posted") == 0;
}

static void print_figures(const char *when, process_figures figures) {
    printf("  %-34s threads %5d   fds %6d   RSS %8.1f MB\n", when, figures.threads, figures.fds, figures.rss_kb / 1024.0);
}

/* One connect at a time, with no other client in the process, so that its CPU is its own:
 * from parley_client_connect until the connect completed and the stream is open. `samples`
 * users spread over the run's, each on a client created for it in `cache_dir` (a cache left by
 * the run: warm; a new folder: fresh). Between two connects the catch-up of the first ends
 * (a fresh cache's channels reported, or 1 s; a warm cache has nothing to report: 200 ms)
 * and the client is destroyed, neither counted. The process is idle before the first. */
static void connect_one_at_a_time(const run_settings *settings, many_client *clients, token_text *tokens, const char *cache_dir,
                                  const char *which, const char *goal) {
    enum { samples = 40 };
    double costs[samples];
    int measured = 0, failed = 0;
    /* What the clients destroyed before left to do (their files closed, memory given back)
     * ends first: at most 30 s, until 100 ms pass with under 1 ms of the process's CPU. */
    for (int waited = 0; waited < 300; waited++) {
        double before = process_cpu_us();
        sleep_ms(100);
        if (process_cpu_us() - before < 1000) break;
    }
    for (int k = 0; k < samples && settings->clients > 0; k++) {
        int i = (int)((long)k * settings->clients / samples);
        many_client *client = &clients[i];
        memset(client, 0, sizeof *client);
        client->index = i;
        char config[1024], user[128];
        snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s\"}", settings->url, cache_dir);
        user_name(user, sizeof user, settings->run_id, i);
        if (parley_client_create(&client->client, config) != PARLEY_OK) {
            failed++;
            continue;
        }
        parley_client_set_event_handler(client->client, on_event, client);
        parley_client_set_connection_handler(client->client, on_connection, client);
        while (sem_trywait(&client_news) == 0) {
        }
        double cpu = process_cpu_us(), wall = now_us();
        int ok = parley_client_connect(client->client, NULL, user, tokens[i], on_connected, client) == PARLEY_OK;
        struct timespec give_up;
        clock_gettime(CLOCK_REALTIME, &give_up);
        give_up.tv_sec += 10;
        while (ok && !(atomic_load(&client->connect_done) && atomic_load(&client->open))) {
            if (sem_timedwait(&client_news, &give_up) != 0 && errno == ETIMEDOUT) break;
        }
        double cost = process_cpu_us() - cpu;
        if (ok && atomic_load(&client->connect_done) && client->connect_code == 0 && atomic_load(&client->open)) {
            costs[measured++] = cost / 1e3;
        } else {
            failed++;
        }
        int channels = i < settings->big - 1 ? 2 : 1;
        wall = now_us();
        double settle = strcmp(which, "warm") == 0 ? 0.2e6 : 1e6;
        while (atomic_load(&client->channels_caught_up) < channels && now_us() - wall < settle) sleep_ms(2);
        parley_client_destroy(client->client);
        client->client = NULL;
    }
    double p50 = quantile(costs, measured, 0.5), p90 = quantile(costs, measured, 0.9);
    printf("  connect one at a time, %s cache: %.2f ms CPU p50, %.2f p90 (%d connects, %d failed)\n", which, p50, p90, measured,
           failed);
    char measure[160], figure[160], comparison[160];
    snprintf(measure, sizeof measure, "  connect one at a time, %s cache (CPU until open)", which);
    snprintf(figure, sizeof figure, "p50 %.2f ms, p90 %.2f ms", p50, p90);
    snprintf(comparison, sizeof comparison, "%d connects, %d failed", measured, failed);
    summary_row(measure, figure, comparison, goal);
}

static int run_clients(const run_settings *settings) {
    const int count = settings->clients;
    const char *kind = settings->memory ? "memory" : "file";
    char sender[128], big_channel[128], label[96];
    sender_name(sender, sizeof sender, settings->run_id);
    big_channel_name(big_channel, sizeof big_channel, settings->run_id);
    snprintf(label, sizeof label, "%d clients, %s caches", count, kind);
    /* Everything the run keeps is allocated and touched before the first figures. */
    many_client *clients = calloc((size_t)count, sizeof *clients);
    token_text *tokens = calloc((size_t)count, sizeof *tokens);
    FILE *tokens_in = fopen(settings->tokens_file, "r");
    if (clients == NULL || tokens == NULL || tokens_in == NULL) return 1;
    for (int i = 0; i < count; i++) {
        if (fscanf(tokens_in, "%255s", tokens[i]) != 1) {
            fprintf(stderr, "%s: the tokens file has fewer than %d tokens\n", label, count);
            return 1;
        }
        clients[i].index = i;
    }
    fclose(tokens_in);
    static double latencies[max_live * 10000];
    memset(latencies, 0, sizeof latencies);
    char cache_dir[600];
    snprintf(cache_dir, sizeof cache_dir, "%s/caches-%d-%s", settings->work_dir, count, kind);
    mkdir(cache_dir, 0700);
    /* One client's work before the figures: the library's process-wide parts (its runtime,
     * libcurl's and SQLite's set-up) are not any client's. */
    parley_client *warm = admin_client(settings->url, settings->api_token);
    waiter w = WAITER_INIT;
    if (warm == NULL || !admin(warm, &w, "GET", "/v3/users?limit=1", NULL)) return 1;
    parley_client_destroy(warm);
    sleep_ms(500);

    printf("%s (fd limit %ld)\n", label, fd_limit());
    process_figures before = process_now();
    print_figures("before the clients", before);
    int create_failures = 0;
    char config[1024];
    for (int i = 0; i < count; i++) {
        if (settings->memory) {
            snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_mode\": \"memory\"}", settings->url);
        } else {
            snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s\"}", settings->url, cache_dir);
        }
        if (parley_client_create(&clients[i].client, config) != PARLEY_OK) {
            if (create_failures++ < 5) fprintf(stderr, "%s: client %d not created: %s\n", label, i, parley_last_error_message());
            clients[i].client = NULL;
            continue;
        }
        parley_client_set_event_handler(clients[i].client, on_event, &clients[i]);
        parley_client_set_connection_handler(clients[i].client, on_connection, &clients[i]);
    }
    process_figures created = process_now();
    print_figures("created, not connected", created);

    /* Connect all at once. */
    int started = 0, start_failures = 0;
    double cpu = process_cpu_us(), wall = now_us();
    for (int i = 0; i < count; i++) {
        if (clients[i].client == NULL) continue;
        char user[128];
        user_name(user, sizeof user, settings->run_id, i);
        if (parley_client_connect(clients[i].client, NULL, user, tokens[i], on_connected, &clients[i]) == PARLEY_OK) {
            started++;
        } else {
            if (start_failures++ < 5) fprintf(stderr, "%s: connect %d not started: %s\n", label, i, parley_last_error_message());
        }
    }
    double deadline = wall + (count * 20e3 > 60e6 ? count * 20e3 : 60e6);
    while ((atomic_load(&connects_done) < started || atomic_load(&streams_open) < started) && now_us() < deadline) sleep_ms(5);
    double connect_wall = now_us() - wall, connect_cpu = process_cpu_us() - cpu;
    int connected = 0;
    for (int i = 0; i < count; i++) {
        if (clients[i].client != NULL && atomic_load(&clients[i].connect_done) && clients[i].connect_code == 0 &&
            atomic_load(&clients[i].open)) {
            connected++;
        }
    }
    int connect_failures = count - connected;
    /* The figures are the clients' steady state: every connect's catch-up has stored the
     * client's channels (the big one carries 1,000 members), the cache connections that the
     * catch-ups opened for reading have closed (after 5 s idle) and the caches have given
     * their page cache back (after 10 s without writes). */
    double settle_started = now_us();
    int caught_up = 0;
    while (now_us() - settle_started < 300e6) {
        caught_up = 0;
        for (int i = 0; i < count; i++) {
            if (clients[i].client == NULL || clients[i].connect_code != 0) continue;
            int channels = i < settings->big - 1 ? 2 : 1;
            if (atomic_load(&clients[i].channels_caught_up) >= channels) caught_up++;
        }
        if (caught_up >= connected) break;
        sleep_ms(20);
    }
    double settle_wall = now_us() - settle_started, catch_up_cpu = process_cpu_us() - cpu;
    printf("  catch-ups done %.2f s after the last connect (%d of %d clients); connect and catch-up %.2f ms CPU per client\n",
           settle_wall / 1e6, caught_up, connected, started > 0 ? catch_up_cpu / 1e3 / started : 0);
    sleep_ms(11000);
    process_figures all_open = process_now();
    print_figures("connected and caught up, idle", all_open);
    double added_threads = all_open.threads - before.threads;
    /* Per client held: when some failed to connect, what the process holds is still theirs too. */
    int held = count - create_failures;
    double fds_per_client = held > 0 ? (double)(all_open.fds - before.fds) / held : 0;
    double rss_per_client_mb = held > 0 ? (all_open.rss_kb - before.rss_kb) / 1024.0 / held : 0;
    printf("  connect all at once: %.2f s, %.2f ms CPU per client; %d of %d connected (%d not created, %d not started)\n",
           connect_wall / 1e6, started > 0 ? connect_cpu / 1e3 / started : 0, connected, count, create_failures, start_failures);
    printf("  per client held: %.2f threads, %.2f fds, %.3f MB resident\n", held > 0 ? added_threads / held : 0, fds_per_client,
           rss_per_client_mb);
    /* Each row as soon as measured: a run that dies later keeps them. */
    char measure[160], figure[160], comparison[160];
    snprintf(measure, sizeof measure, "many: %s, threads added by the clients", label);
    snprintf(figure, sizeof figure, "%.0f (%.2f per client)", added_threads, held > 0 ? added_threads / held : 0);
    snprintf(comparison, sizeof comparison, "%d before them", before.threads);
    summary_row(measure, figure, comparison, "<= 16");
    snprintf(figure, sizeof figure, "%.2f fds, %.3f MB RSS", fds_per_client, rss_per_client_mb);
    snprintf(comparison, sizeof comparison, "%d fds, %.0f MB before; %d of %d held", before.fds, before.rss_kb / 1024.0, held, count);
    summary_row("  per client", figure, comparison, "<= 4 fds, <= 0.5 MB");
    snprintf(figure, sizeof figure, "%.2f s, %.2f ms CPU/client", connect_wall / 1e6, started > 0 ? connect_cpu / 1e3 / started : 0);
    snprintf(comparison, sizeof comparison, "%d of %d failed; with the first catch-up %.2f ms CPU/client", connect_failures, count,
             started > 0 ? catch_up_cpu / 1e3 / started : 0);
    summary_row("  connect all at once", figure, comparison, "0 failed");

    /* Idle: every client connected and caught up, nothing sent. */
    cpu = process_cpu_us();
    wall = now_us();
    sleep_ms(settings->idle_seconds * 1000L);
    double idle_cpu_per_second = (process_cpu_us() - cpu) / ((now_us() - wall) / 1e6);
    printf("  idle over %d s: %.1f%% of a core, %.2f us per client per second\n", settings->idle_seconds,
           idle_cpu_per_second / 1e4, connected > 0 ? idle_cpu_per_second / connected : 0);
    snprintf(figure, sizeof figure, "%.1f%% of a core", idle_cpu_per_second / 1e4);
    snprintf(comparison, sizeof comparison, "%.2f us/s per client", connected > 0 ? idle_cpu_per_second / connected : 0);
    summary_row("  idle, all connected", figure, comparison, "-");

    /* Live messages into the big channel: every connected client among its members receives. */
    int receivers = 0;
    for (int i = 0; i < count && i < settings->big - 1; i++) {
        if (clients[i].client != NULL && clients[i].connect_code == 0 && atomic_load(&clients[i].open)) receivers++;
    }
    double sent_at[max_live] = {0};
    int live = settings->live_messages < max_live ? settings->live_messages : max_live;
    stream_capture *floor_frames = settings->floor_passes > 0 ? capture_load(settings->floor_capture) : NULL;
    double floor_before = floor_here(settings, floor_frames);
    cpu = process_cpu_us();
    wall = now_us();
    for (int k = 0; k < live; k++) {
        char text[64], req_id[96];
        snprintf(text, sizeof text, "many live %d", k);
        snprintf(req_id, sizeof req_id, "live-%d-%s-%d", count, kind, k);
        sent_at[k] = now_us();
        if (!post_through_parent(settings, big_channel, text, req_id, 1)) continue;
        double waited = now_us();
        while (atomic_load(&live_first[k]) < receivers && now_us() - waited < 30e6) sleep_ms(2);
        sleep_ms(300);
    }
    double live_wall = (now_us() - wall) / 1e6, live_cpu = process_cpu_us() - cpu;
    double floor_after = floor_here(settings, floor_frames);
    capture_free(floor_frames);
    double floor = floor_before > 0 && floor_after > 0 ? (floor_before + floor_after) / 2 : settings->floor_cpu_us;
    int samples = 0, live_missing = 0, live_duplicated = 0;
    long delivered = 0;
    for (int i = 0; i < count && i < settings->big - 1; i++) {
        for (int k = 0; k < live; k++) {
            int got = atomic_load(&clients[i].live_count[k]);
            delivered += got > 0;
            if (got > 1) live_duplicated += got - 1;
            if (clients[i].client == NULL || clients[i].connect_code != 0 || !atomic_load(&clients[i].open)) continue;
            if (got == 0) live_missing++;
            else if (samples < (int)(sizeof latencies / sizeof *latencies)) {
                latencies[samples++] = (double)atomic_load(&clients[i].live_at[k]) - sent_at[k];
            }
        }
    }
    double p50 = quantile(latencies, samples, 0.5), p99 = quantile(latencies, samples, 0.99);
    double cpu_per_received = delivered > 0 ? live_cpu / delivered : 0;
    double above_idle = delivered > 0 ? (live_cpu - idle_cpu_per_second * live_wall) / delivered : 0;
    printf("  %d live messages into the channel of %d members, %d of them in this process: delivery p50 %.1f ms, p99 %.1f ms;"
           " not delivered %d, twice %d\n",
           live, settings->big, receivers, p50 / 1e3, p99 / 1e3, live_missing, live_duplicated);
    printf("  CPU per received message per client: %.1f us (%.1f us above idle); the floor %.1f us (%s, in this process: %.1f"
           " before the messages, %.1f after; %.1f at the benchmark's start)\n",
           cpu_per_received, above_idle, floor, kind, floor_before, floor_after, settings->floor_cpu_us);
    snprintf(measure, sizeof measure, "  live message to %d members in the process (channel of %d)", receivers, settings->big);
    snprintf(figure, sizeof figure, "p50 %.1f p99 %.1f ms", p50 / 1e3, p99 / 1e3);
    snprintf(comparison, sizeof comparison, "not delivered %d, twice %d", live_missing, live_duplicated);
    summary_row(measure, figure, comparison, "p50 <= 300 ms at 1,000 members");
    snprintf(figure, sizeof figure, "%.1f us = %.2fx floor", cpu_per_received, floor > 0 ? cpu_per_received / floor : 0);
    snprintf(comparison, sizeof comparison, "floor (%s, beside it) %.1f us; above idle %.1f us", kind, floor, above_idle);
    summary_row("  CPU per received message per client", figure, comparison, "<= 2x floor");

    /* The reconnect storm. Every client expects the big channel's messages (if a member) and
     * its small channel's two; half are posted before the kill, half right after the start. */
    long expected = 0;
    int groups = (count + small_channel_users - 1) / small_channel_users;
    for (int i = 0; i < count; i++) {
        if (clients[i].client == NULL || clients[i].connect_code != 0 || !atomic_load(&clients[i].open)) continue;
        expected += 2 + (i < settings->big - 1 ? storm_big_messages : 0);
    }
    char answer[300] = "";
    int storm_posted = 1;
    for (int half = 0; half < 2; half++) {
        if (half == 1) {
            if (!ask_parent(settings, "kill", answer, sizeof answer) || strcmp(answer, "killed") != 0) {
                fprintf(stderr, "%s: the server could not be killed (%s)\n", label, answer);
                storm_posted = 0;
                break;
            }
            sleep_ms(2000);
            if (!ask_parent(settings, "start", answer, sizeof answer) || strcmp(answer, "started") != 0) {
                fprintf(stderr, "%s: the server did not start again (%s)\n", label, answer);
                storm_posted = 0;
                break;
            }
            wall = now_us();
        }
        char channel[128], text[64], req_id[96];
        for (int k = half * storm_big_messages / 2; k < (half + 1) * storm_big_messages / 2; k++) {
            snprintf(text, sizeof text, "many storm %d", k);
            snprintf(req_id, sizeof req_id, "storm-%d-%s-%d", count, kind, k);
            storm_posted &= post_through_parent(settings, big_channel, text, req_id, 50);
        }
        for (int group = 0; group < groups; group++) {
            small_channel_name(channel, sizeof channel, settings->run_id, group);
            snprintf(text, sizeof text, "many small %d", half);
            snprintf(req_id, sizeof req_id, "small-%d-%s-%d", count, kind, half);
            storm_posted &= post_through_parent(settings, channel, text, req_id, 50);
        }
    }
    double storm_seconds = -1;
    long held_at_deadline = 0;
    if (storm_posted) {
        while (atomic_load(&storm_first) < expected && now_us() - wall < 120e6) sleep_ms(10);
        held_at_deadline = atomic_load(&storm_first);
        sleep_ms(2000); /* a second report of a message would come about now */
    }
    long storm_lost = 0, storm_duplicated = 0;
    int resyncs = 0;
    for (int i = 0; i < count; i++) {
        many_client *client = &clients[i];
        if (client->client == NULL || client->connect_code != 0 || !atomic_load(&client->open)) continue;
        resyncs += atomic_load(&client->resyncs);
        for (int k = 0; k < storm_big_messages && i < settings->big - 1; k++) {
            int got = atomic_load(&client->storm_big[k]);
            storm_lost += got == 0;
            storm_duplicated += got > 1 ? got - 1 : 0;
        }
        for (int k = 0; k < 2; k++) {
            int got = atomic_load(&client->storm_small[k]);
            storm_lost += got == 0;
            storm_duplicated += got > 1 ? got - 1 : 0;
        }
        for (int k = 0; k < live && i < settings->big - 1; k++) {
            int got = atomic_load(&client->live_count[k]);
            storm_duplicated += got > 1 ? got - 1 : 0;
        }
    }
    /* Complete when nothing is lost: the time of the last first arrival, even one that came
     * after the 120 s waited (during the 2 s after). */
    if (storm_posted && storm_lost == 0) storm_seconds = ((double)atomic_load(&storm_last_at) - wall) / 1e6;
    char storm_time[96];
    if (storm_seconds >= 0) snprintf(storm_time, sizeof storm_time, "%.1f s", storm_seconds);
    else if (storm_posted && expected == 0) snprintf(storm_time, sizeof storm_time, "nothing to deliver: no client connected");
    else if (storm_posted) snprintf(storm_time, sizeof storm_time, "not all (%ld of %ld within 120 s)", held_at_deadline, expected);
    else snprintf(storm_time, sizeof storm_time, "not run");
    printf("  reconnect storm (server killed, 2 s down, started again): every client held every message after %s;"
           " lost %ld, duplicated %ld of %ld; resync events %d\n",
           storm_time, storm_lost, storm_duplicated, expected, resyncs);
    /* Where the time went: each client's reconnect (stream back and caught up) and its last
     * storm message, in seconds after the restart, and the attempts that failed on the way. */
    double *reconnected = malloc(sizeof(double) * (size_t)(count > 0 ? count : 1));
    double *all_held = malloc(sizeof(double) * (size_t)(count > 0 ? count : 1));
    int reconnected_count = 0, held_count = 0, not_reported = 0;
    long failed_attempts = 0;
    for (int i = 0; i < count && reconnected != NULL && all_held != NULL; i++) {
        many_client *client = &clients[i];
        if (client->client == NULL || client->connect_code != 0 || !atomic_load(&client->open)) continue;
        failed_attempts += atomic_load(&client->reconnect_failures);
        long long back = atomic_load(&client->reconnected_at), held = atomic_load(&client->last_storm_at);
        /* A client may hold every message (from the live stream) before its catch-up ends and
         * reports the reconnect: those are counted apart, not in the percentiles. */
        if (back > wall) reconnected[reconnected_count++] = (back - wall) / 1e6;
        else not_reported++;
        if (held > wall) all_held[held_count++] = (held - wall) / 1e6;
    }
    if (reconnected != NULL && all_held != NULL) {
        printf("  storm, seconds after the restart: reconnected and caught up p50 %.1f p90 %.1f max %.1f (%d clients;"
               " %d still catching up when read); last message held p50 %.1f p90 %.1f max %.1f; failed reconnect attempts %ld\n",
               quantile(reconnected, reconnected_count, 0.5), quantile(reconnected, reconnected_count, 0.9),
               quantile(reconnected, reconnected_count, 1), reconnected_count, not_reported, quantile(all_held, held_count, 0.5),
               quantile(all_held, held_count, 0.9), quantile(all_held, held_count, 1), failed_attempts);
    }
    free(reconnected);
    free(all_held);
    snprintf(figure, sizeof figure, "%s, lost %ld, twice %ld", storm_time, storm_lost, storm_duplicated);
    snprintf(comparison, sizeof comparison, "%ld deliveries expected; 2 s down", expected);
    summary_row("  reconnect storm, restart to all held", figure, comparison, "<= 60 s at 4,000; 0 lost, 0 twice");

    cpu = process_cpu_us();
    wall = now_us();
    for (int i = 0; i < count; i++) {
        if (clients[i].client != NULL) parley_client_destroy(clients[i].client);
    }
    printf("  destroying them all: %.2f s, %.2f ms CPU per client\n", (now_us() - wall) / 1e6,
           count > 0 ? (process_cpu_us() - cpu) / 1e3 / count : 0);
    if (!settings->memory) {
        connect_one_at_a_time(settings, clients, tokens, cache_dir, "warm", "<= 3 ms");
        char fresh_dir[700];
        snprintf(fresh_dir, sizeof fresh_dir, "%s-fresh", cache_dir);
        mkdir(fresh_dir, 0700);
        connect_one_at_a_time(settings, clients, tokens, fresh_dir, "fresh", "<= 5 ms");
    }
    printf("\n");

    free(clients);
    free(tokens);
    return 0;
}

/* ---- The parent: the server, the setup, the floor, and the runs ------------------------- */

typedef struct {
    const char *binary, *api_token, *work_dir;
    char database[600];
    char url[256];
    int port;
    pid_t pid;
    int starts;
} owned_server;

/* Starts the server (port 0 the first time, then the same port); 1 once it listens. */
static int server_start(owned_server *server) {
    char out_path[700], log_path[700], port[16];
    snprintf(out_path, sizeof out_path, "%s/server-%d.out", server->work_dir, server->starts++);
    snprintf(log_path, sizeof log_path, "%s/server.log", server->work_dir);
    snprintf(port, sizeof port, "%d", server->port);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the benchmark */
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), log = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(out, STDOUT_FILENO);
        dup2(log, STDERR_FILENO);
        /* Events kept for a resume: every event of the run, so that a reconnect resumes. */
        execl(server->binary, server->binary, "--port", port, "--database", server->database, "--api-token", server->api_token,
              "--event-retention", "2000000", "--shutdown-drain-seconds", "0", (char *)NULL);
        _exit(127);
    }
    if (pid < 0) return 0;
    server->pid = pid;
    static const char prefix[] = "parley-server listening on ";
    for (int waited = 0; waited < 30000; waited += 20) {
        FILE *out = fopen(out_path, "r");
        char line[240] = "";
        if (out != NULL) {
            char *read = fgets(line, sizeof line, out);
            fclose(out);
            if (read != NULL && strncmp(line, prefix, sizeof prefix - 1) == 0 && strchr(line, '\n') != NULL) {
                line[strcspn(line, "\n")] = '\0';
                snprintf(server->url, sizeof server->url, "%s", line + sizeof prefix - 1);
                const char *colon = strrchr(server->url, ':');
                server->port = colon ? atoi(colon + 1) : 0;
                return 1;
            }
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) break;
        sleep_ms(20);
    }
    fprintf(stderr, "parley-server did not start (see %s)\n", log_path);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    server->pid = 0;
    return 0;
}

static void server_kill(owned_server *server, int signal_number) {
    if (server->pid <= 0) return;
    kill(server->pid, signal_number);
    waitpid(server->pid, NULL, 0);
    server->pid = 0;
}

/* Runs one size in a process of its own, serving its requests to kill and start the server. */
static void run_child(owned_server *server, const char *self, const char *run_id, const char *tokens_file, int clients,
                      int memory, int big, int live, int idle, double floor_cpu, const char *floor_capture, int floor_passes) {
    /* Close-on-exec: the servers started meanwhile must not hold them (the run's own ends are
     * kept across its exec below). */
    int to_parent[2], to_child[2];
    if (pipe2(to_parent, O_CLOEXEC) != 0 || pipe2(to_child, O_CLOEXEC) != 0) return;
    char arguments[12][64];
    snprintf(arguments[0], 64, "%d", clients);
    snprintf(arguments[1], 64, "%s", memory ? "memory" : "file");
    snprintf(arguments[2], 64, "%d", big);
    snprintf(arguments[3], 64, "%d", live);
    snprintf(arguments[4], 64, "%d", idle);
    snprintf(arguments[5], 64, "%.3f", floor_cpu);
    snprintf(arguments[6], 64, "%d", to_child[0]);
    snprintf(arguments[7], 64, "%d", to_parent[1]);
    snprintf(arguments[8], 64, "%d", floor_passes);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a run ends with the benchmark */
        fcntl(to_child[0], F_SETFD, 0);
        fcntl(to_parent[1], F_SETFD, 0);
        execl(self, self, "--run", server->url, server->api_token, run_id, tokens_file, server->work_dir, arguments[0],
              arguments[1], arguments[2], arguments[3], arguments[4], arguments[5], arguments[6], arguments[7], floor_capture,
              arguments[8], (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(to_parent[1]);
    FILE *requests = fdopen(to_parent[0], "r");
    char line[400], sender[128];
    sender_name(sender, sizeof sender, run_id);
    poster sender_storage, *sender_connection = &sender_storage;
    poster_init(sender_connection, server->url, server->api_token);
    while (requests != NULL && fgets(line, sizeof line, requests) != NULL) {
        const char *answer = "unknown\n";
        if (strcmp(line, "kill\n") == 0) {
            server_kill(server, SIGKILL);
            answer = "killed\n";
        } else if (strcmp(line, "start\n") == 0) {
            answer = server_start(server) ? "started\n" : "failed\n";
            /* the kept connection was to the server killed */
            poster_cleanup(sender_connection);
            poster_init(sender_connection, server->url, server->api_token);
        } else if (strncmp(line, "post ", 5) == 0) {
            int attempts = 0, consumed = 0;
            char channel[128], req_id[96];
            line[strcspn(line, "\n")] = '\0';
            if (sscanf(line + 5, "%d %127s %95s %n", &attempts, channel, req_id, &consumed) == 3 && consumed > 0) {
                answer = post_message(sender_connection, channel, sender, line + 5 + consumed, req_id, attempts) ? "posted\n"
                                                                                                                  : "failed\n";
            }
        }
        if (write(to_child[1], answer, strlen(answer)) < 0) break;
    }
    if (requests != NULL) fclose(requests);
    close(to_child[1]);
    poster_cleanup(sender_connection);
    int status = 0;
    waitpid(pid, &status, 0);
    if (server->pid == 0) server_start(server); /* a run that died between kill and start */
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char measure[128], figure[96];
        snprintf(measure, sizeof measure, "many: %d clients, %s caches", clients, memory ? "memory" : "file");
        if (WIFSIGNALED(status)) snprintf(figure, sizeof figure, "the run died: signal %d", WTERMSIG(status));
        else snprintf(figure, sizeof figure, "the run failed: exit %d", WEXITSTATUS(status));
        printf("%s: %s\n\n", measure, figure);
        summary_row(measure, figure, "-", "-");
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    raise_fd_limit();
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 17 && strcmp(argv[1], "--run") == 0) {
        run_settings settings = {argv[2], argv[3], argv[4], argv[5], argv[6], atoi(argv[7]), strcmp(argv[8], "memory") == 0,
                                 atoi(argv[9]), atoi(argv[10]), atoi(argv[11]), atof(argv[12]), atoi(argv[13]), atoi(argv[14]),
                                 argv[15], atoi(argv[16])};
        open_process_files();
        sem_init(&client_news, 0, 0);
        return run_clients(&settings);
    }
    int quick = 0, file_runs[8] = {100, 1000, 4000}, file_run_count = 3, memory_clients = 10000;
    int chosen_file = 0, chosen_memory = 0, usage = argc < 2;
    for (int i = 2; i < argc && !usage; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc) {
            /* N[,N...]: these file-cache runs only (0: none) */
            file_run_count = 0;
            for (char *item = strtok(argv[++i], ","); item != NULL && file_run_count < 8; item = strtok(NULL, ",")) {
                if (atoi(item) > 0) file_runs[file_run_count++] = atoi(item);
            }
            chosen_file = 1;
        } else if (strcmp(argv[i], "--memory") == 0 && i + 1 < argc) {
            memory_clients = atoi(argv[++i]); /* 0: no memory-cache run */
            chosen_memory = 1;
        } else {
            usage = 1;
        }
    }
    if (usage) {
        fprintf(stderr, "usage: %s SERVER_BINARY [--quick] [--file N[,N...]] [--memory N]\n", argv[0]);
        return 2;
    }
    if (quick && !chosen_file) {
        file_runs[0] = 100;
        file_runs[1] = 300;
        file_run_count = 2;
    }
    if (quick && !chosen_memory) memory_clients = 1000;
    int big = quick ? 200 : 1000;
    int live = quick ? 5 : 10, idle = quick ? 3 : 5;
    int users = memory_clients;
    for (int i = 0; i < file_run_count; i++) users = file_runs[i] > users ? file_runs[i] : users;
    if (big - 1 > users) users = big - 1;

    char work_dir[] = "/tmp/parley-bench-many-XXXXXX", self[1024], run_id[48], api_token[40];
    if (mkdtemp(work_dir) == NULL) return 1;
    ssize_t self_length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (self_length <= 0) return 1;
    self[self_length] = '\0';
    snprintf(run_id, sizeof run_id, "%ld-%d", (long)time(NULL), (int)getpid());
    snprintf(api_token, sizeof api_token, "many-%ld-%d", (long)time(NULL), (int)getpid());
    owned_server server = {argv[1], api_token, work_dir, "", "", 0, 0, 0};
    snprintf(server.database, sizeof server.database, "%s/server.sqlite", work_dir);
    if (!server_start(&server)) return 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);

    printf("Many clients in one process (%s run; the server of its own at %s, SQLite; fd limit %ld)\n", quick ? "quick" : "full",
           server.url, fd_limit());
    double wall = now_us();
    token_text *tokens = calloc((size_t)users + 1, sizeof *tokens);
    parley_client *admin_connection = admin_client(server.url, api_token);
    if (admin_connection == NULL || !set_up(admin_connection, run_id, users, big, tokens)) {
        fprintf(stderr, "setup failed\n");
        server_kill(&server, SIGTERM);
        return 1;
    }
    parley_client_destroy(admin_connection);
    char tokens_file[700];
    snprintf(tokens_file, sizeof tokens_file, "%s/tokens", work_dir);
    FILE *tokens_out = fopen(tokens_file, "w");
    for (int i = 0; i < users; i++) fprintf(tokens_out, "%s\n", tokens[i]);
    fclose(tokens_out);
    printf("setup: %d users with a session token each, a channel of %d members, %d channels of %d: %.1f s\n\n", users + 1, big,
           (users + small_channel_users - 1) / small_channel_users, small_channel_users + 1, (now_us() - wall) / 1e6);

    /* The floor: user 0's stream while the sender posts into the big channel. */
    enum { floor_messages = 60, floor_total = 3000 };
    double floor_file = 0, floor_memory = 0;
    int floor_passes = 0;
    char floor_capture[700] = "";
    char user0[128], sender[128], big_channel[128];
    user_name(user0, sizeof user0, run_id, 0);
    sender_name(sender, sizeof sender, run_id);
    big_channel_name(big_channel, sizeof big_channel, run_id);
    stream_capture *capture = capture_start(server.url, user0, tokens[0]);
    poster sender_connection;
    if (capture != NULL && poster_init(&sender_connection, server.url, api_token)) {
        for (int k = 0; k < floor_messages; k++) {
            char text[64], req_id[64];
            snprintf(text, sizeof text, "floor message %d", k);
            snprintf(req_id, sizeof req_id, "floor-%d", k);
            post_message(&sender_connection, big_channel, sender, text, req_id, 1);
            sleep_ms(30);
        }
        poster_cleanup(&sender_connection);
        for (int waited = 0; waited < 5000 && capture_messages(capture) < floor_messages; waited += 10) sleep_ms(10);
        capture_stop(capture);
        char floor_path[700];
        snprintf(floor_path, sizeof floor_path, "%s/floor.sqlite", work_dir);
        int passes = floor_total / (capture_messages(capture) > 0 ? capture_messages(capture) : 1);
        snprintf(floor_capture, sizeof floor_capture, "%s/floor.capture", work_dir);
        if (capture_save(capture, floor_capture)) floor_passes = passes;
        receive_floor_result on_file = receive_floor_run(capture, floor_path, passes);
        receive_floor_result in_memory = receive_floor_run(capture, ":memory:", passes);
        floor_file = on_file.cpu_per_message;
        floor_memory = in_memory.cpu_per_message;
        printf("The floor for a received message (a member's captured frames of a %d-member channel, %d chunks, replayed %d times:"
               " jansson, one SQLite transaction per chunk with the message, the channel and FTS5, a callback thread)\n",
               big, capture->chunk_count, passes);
        printf("  on a file:  %.1f us CPU per message (%d messages%s)\n", on_file.cpu_per_message, on_file.messages,
               on_file.failed ? ", some failed" : "");
        printf("  in memory:  %.1f us CPU per message (%d messages%s)\n\n", in_memory.cpu_per_message, in_memory.messages,
               in_memory.failed ? ", some failed" : "");
        char figure[64];
        snprintf(figure, sizeof figure, "%.1f us file, %.1f us memory", floor_file, floor_memory);
        summary_row("many: the floor, CPU per received message (plain C)", figure, "-", "(the floor)");
    } else {
        printf("The floor for a received message: not measured (the stream could not be captured)\n\n");
    }
    capture_free(capture);

    for (int i = 0; i < file_run_count; i++) {
        run_child(&server, self, run_id, tokens_file, file_runs[i], 0, big, live, idle, floor_file, floor_capture, floor_passes);
    }
    if (memory_clients > 0) run_child(&server, self, run_id, tokens_file, memory_clients, 1, big, live, idle, floor_memory, floor_capture,
                                     floor_passes);
    server_kill(&server, SIGTERM);
    char command[700];
    snprintf(command, sizeof command, "rm -rf '%s'", work_dir);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", work_dir);
    free(tokens);
    return 0;
}
