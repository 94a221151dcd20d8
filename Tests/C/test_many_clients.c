/* 300 clients in one process against the real server (docs/THREADING.md: a process may hold
 * thousands of clients, and what a client costs must not be a thread of its own):
 *   - all connecting at once succeed, each stream open;
 *   - the process's threads stay flat: those added by the 300 clients stay within the
 *     process-wide budget (below);
 *   - a server killed and started again under them loses nothing: every client gets every
 *     message sent just before the kill and right after the start, none twice;
 *   - while clients are created and destroyed (also from inside their own callbacks) and
 *     messages arrive, each client's callbacks run in order and exactly once, and none after
 *     its destroy returned.
 * PARLEY_MANY_CLIENTS changes the number of clients. */
#define _GNU_SOURCE
#include "server_support.h"
#include <stdatomic.h>
#include <sys/resource.h>

/* The clients' threads are the process's: the goal is a small process-wide set (network
 * threads, the shared callback pool), at most 16, whatever the number of clients. The slack
 * is libdispatch's worker pool, which the library shares with everything else in the process
 * and which grows for a while under a burst of work (up to a few per core), then shrinks. */
enum { thread_goal = 16, thread_slack = 8 };
enum { max_clients = 1000, order_messages = 30, restart_messages = 6, jobs_per_post = 5 };

typedef struct {
    int index, user;
    parley_client *client;
    atomic_int connect_completions, connect_code;
    atomic_int open;
    atomic_int destroyed;         /* its destroy returned: no callback may run any more */
    atomic_int destroying_itself; /* destroyed from inside its own event callback */
    atomic_int self_destroy_at;   /* the order message at which it does, -1 for none */
    atomic_int after_destroy;     /* callbacks that ran after destroy returned */
    /* order messages: the last seen, how many, and how many came out of order or twice */
    atomic_int last_order, order_count, order_violations;
    atomic_int restart_count[restart_messages];
    /* parley_client_post jobs: how many were queued, the next one expected, violations */
    atomic_int jobs_posted, next_job, job_violations;
} tracked_client;

static tracked_client tracked[max_clients * 2];
static char users[max_clients][64], tokens[max_clients][256];
static char sender[64], channel[64];

static int process_threads(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    int threads = -1;
    while (status != NULL && fgets(line, sizeof line, status) != NULL) {
        if (strncmp(line, "Threads:", 8) == 0) threads = atoi(line + 8);
    }
    if (status != NULL) fclose(status);
    return threads;
}

static void pause_ms(long ms) {
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void on_connected(void *user_data, const parley_error *error, const char *json) {
    (void)json;
    tracked_client *t = user_data;
    if (atomic_load(&t->destroyed)) atomic_fetch_add(&t->after_destroy, 1);
    atomic_store(&t->connect_code, error ? error->code : 0);
    atomic_fetch_add(&t->connect_completions, 1);
}

static void on_connection(void *user_data, int event, const parley_error *error) {
    (void)error;
    tracked_client *t = user_data;
    if (atomic_load(&t->destroyed)) atomic_fetch_add(&t->after_destroy, 1);
    if (event == PARLEY_CONNECTION_CONNECTED) atomic_store(&t->open, 1);
}

/* The payload's message comes after its channel, whose last message may be a later one. */
static const char *last_text(const char *payload, const char *marker) {
    const char *at = NULL;
    for (const char *found = strstr(payload, marker); found != NULL; found = strstr(found + 1, marker)) at = found;
    return at ? at + strlen(marker) : NULL;
}

static void on_event(void *user_data, const char *category, const char *channel_url, const char *payload) {
    (void)channel_url;
    tracked_client *t = user_data;
    if (atomic_load(&t->destroyed)) atomic_fetch_add(&t->after_destroy, 1);
    if (strcmp(category, "message_received") != 0 && strcmp(category, "message_changelog") != 0) return;
    const char *restart = last_text(payload, "\"message\":\"restart ");
    if (restart != NULL) {
        int k = atoi(restart);
        if (k >= 0 && k < restart_messages) atomic_fetch_add(&t->restart_count[k], 1);
        return;
    }
    const char *order = last_text(payload, "\"message\":\"order ");
    if (order == NULL || strcmp(category, "message_received") != 0) return;
    int k = atoi(order);
    if (k <= atomic_load(&t->last_order)) atomic_fetch_add(&t->order_violations, 1);
    atomic_store(&t->last_order, k);
    atomic_fetch_add(&t->order_count, 1);
    if (k == atomic_load(&t->self_destroy_at)) {
        atomic_store(&t->destroying_itself, 1);
        /* The callbacks still queued run here, nested, before it returns. */
        CHECK_STATUS(PARLEY_OK, parley_client_destroy(t->client));
        atomic_store(&t->destroyed, 1);
    }
}

static void on_job(void *user_data) {
    tracked_client *t = user_data;
    if (atomic_load(&t->destroyed)) atomic_fetch_add(&t->after_destroy, 1);
    /* The jobs of one client carry consecutive numbers: the next one is the only one allowed. */
    atomic_fetch_add(&t->next_job, 1);
}

/* Each job is its own user_data slot so that its number is known when it runs. */
typedef struct {
    tracked_client *client;
    int number;
} numbered_job;

static numbered_job jobs[max_clients * 2][jobs_per_post * 4];

static void on_numbered_job(void *user_data) {
    numbered_job *job = user_data;
    tracked_client *t = job->client;
    if (job->number != atomic_load(&t->next_job)) atomic_fetch_add(&t->job_violations, 1);
    on_job(t);
}

static void post_jobs(tracked_client *t) {
    for (int j = 0; j < jobs_per_post; j++) {
        int number = atomic_load(&t->jobs_posted);
        if (number >= jobs_per_post * 4) return;
        numbered_job *job = &jobs[t->index][number];
        job->client = t;
        job->number = number;
        if (parley_client_post(t->client, on_numbered_job, job) != PARLEY_OK) return;
        atomic_fetch_add(&t->jobs_posted, 1);
    }
}

static int make_client(tracked_client *t, int index, int user, const char *url) {
    memset(t, 0, sizeof *t);
    t->index = index;
    t->user = user;
    atomic_store(&t->last_order, -1);
    atomic_store(&t->self_destroy_at, -1);
    char config[512];
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_mode\": \"memory\"}", url);
    if (parley_client_create(&t->client, config) != PARLEY_OK) {
        fprintf(stderr, "client %d not created: %s\n", index, parley_last_error_message());
        return 0;
    }
    parley_client_set_event_handler(t->client, on_event, t);
    parley_client_set_connection_handler(t->client, on_connection, t);
    return parley_client_connect(t->client, NULL, users[user], tokens[user], on_connected, t) == PARLEY_OK;
}

static void destroy_client(tracked_client *t) {
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(t->client));
    atomic_store(&t->destroyed, 1);
}

/* The --database the server at `pid` runs on (its command line): a restart reuses it, on
 * either backend. */
static int database_of(pid_t pid, char *out, size_t size) {
    char path[64], arguments[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *file = fopen(path, "r");
    size_t length = file ? fread(arguments, 1, sizeof arguments - 1, file) : 0;
    if (file) fclose(file);
    arguments[length] = '\0';
    for (size_t at = 0; at < length; at += strlen(arguments + at) + 1) {
        if (strcmp(arguments + at, "--database") == 0 && at + strlen(arguments + at) + 1 < length) {
            snprintf(out, size, "%s", arguments + at + strlen(arguments + at) + 1);
            return 1;
        }
    }
    fprintf(stderr, "the server's --database was not found in %s\n", path);
    return 0;
}

static int post_text(parley_client *admin, const char *text, const char *req_id) {
    char path[128], body[256];
    result_slot slot = {0};
    snprintf(path, sizeof path, "/v3/group_channels/%s/messages", channel);
    snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"%s\", \"message\": \"%s\", \"req_id\": \"%s\"}", sender,
             text, req_id);
    /* Right after a start the admin client's kept connection is the dead one: a retry opens a
     * new one, and the req_id keeps a retried message from being stored twice. */
    int posted = 0;
    for (int attempt = 0; attempt < 50 && !posted; attempt++) {
        posted = admin_call(admin, "POST", path, body, &slot);
        if (!posted) pause_ms(100);
    }
    if (!posted) fprintf(stderr, "POST %s failed: %s\n", text, slot.json ? slot.json : "");
    free(slot.json);
    return posted;
}

int main(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
    const char *wanted = getenv("PARLEY_MANY_CLIENTS");
    int count = wanted ? atoi(wanted) : 300;
    if (count < 20 || count > max_clients) count = 300;
    test_server server;
    if (test_server_start(&server, "many") != 0) return 1;
    char database[512], url[256];
    snprintf(url, sizeof url, "%s", server.url);
    const char *colon = strrchr(url, ':');
    int port = colon ? atoi(colon + 1) : 0;
    if (!database_of(server.pid, database, sizeof database)) return 1;
    parley_client *admin = server.admin;

    /* Users, their tokens, and one channel of all of them with the sender. */
    result_slot slot = {0};
    char path[128], body[256];
    size_t capacity = (size_t)count * 72 + 256, used = 0;
    char *members = malloc(capacity);
    snprintf(sender, sizeof sender, "many-sender-%d", (int)getpid());
    snprintf(channel, sizeof channel, "many-channel-%d", (int)getpid());
    snprintf(body, sizeof body, "{\"user_id\": \"%s\", \"nickname\": \"sender\"}", sender);
    CHECK(admin_call(admin, "POST", "/v3/users", body, &slot));
    used += (size_t)snprintf(members, capacity, "{\"channel_url\": \"%s\", \"user_ids\": [\"%s\"", channel, sender);
    for (int i = 0; i < count; i++) {
        snprintf(users[i], sizeof users[i], "many-%d-%d", (int)getpid(), i);
        snprintf(body, sizeof body, "{\"user_id\": \"%s\", \"nickname\": \"member %d\"}", users[i], i);
        CHECK(admin_call(admin, "POST", "/v3/users", body, &slot));
        snprintf(path, sizeof path, "/v3/users/%s/token", users[i]);
        CHECK(admin_call(admin, "POST", path, "{}", &slot) && json_field_text(slot.json, "token", tokens[i], sizeof tokens[i]));
        used += (size_t)snprintf(members + used, capacity - used, ", \"%s\"", users[i]);
    }
    snprintf(members + used, capacity - used, "]}");
    CHECK(admin_call(admin, "POST", "/v3/group_channels", members, &slot));
    free(members);
    free(slot.json);
    if (check_failures > 0) return check_report("test_many_clients");

    /* The process-wide parts exist before the count starts: one client connected and gone. */
    tracked_client warm;
    CHECK(make_client(&warm, max_clients * 2 - 1, 0, url));
    for (int waited = 0; waited < 20000 && !atomic_load(&warm.open); waited += 5) pause_ms(5);
    destroy_client(&warm);
    pause_ms(1000);
    int threads_before = process_threads();

    /* All connecting at once. */
    double started = seconds_now();
    for (int i = 0; i < count; i++) CHECK(make_client(&tracked[i], i, i, url));
    int connected = 0;
    for (double deadline = started + 45; seconds_now() < deadline; pause_ms(10)) {
        connected = 0;
        for (int i = 0; i < count; i++) {
            connected += atomic_load(&tracked[i].connect_completions) == 1 && atomic_load(&tracked[i].connect_code) == 0 &&
                         atomic_load(&tracked[i].open);
        }
        if (connected == count) break;
    }
    printf("connect all at once: %d of %d connected with their streams open in %.1f s\n", connected, count,
           seconds_now() - started);
    CHECK(connected == count);
    pause_ms(1000);
    int threads_after = process_threads();
    printf("threads: %d before the clients, %d with %d connected: %d added (at most %d + %d)\n", threads_before, threads_after,
           count, threads_after - threads_before, thread_goal, thread_slack);
    CHECK(threads_after - threads_before <= thread_goal + thread_slack);

    /* The server killed and started again under them: messages just before and right after. */
    char text[64], req_id[64];
    for (int k = 0; k < restart_messages / 2; k++) {
        snprintf(text, sizeof text, "restart %d", k);
        snprintf(req_id, sizeof req_id, "restart-%d", k);
        CHECK(post_text(admin, text, req_id));
    }
    kill(server.pid, SIGKILL);
    waitpid(server.pid, NULL, 0);
    pause_ms(1000);
    char restarted_url[256];
    server.pid = start_server_on_port(getenv("PARLEY_SERVER_BIN"), database, port, restarted_url, sizeof restarted_url);
    CHECK(server.pid > 0);
    double restarted = seconds_now();
    for (int k = restart_messages / 2; k < restart_messages; k++) {
        snprintf(text, sizeof text, "restart %d", k);
        snprintf(req_id, sizeof req_id, "restart-%d", k);
        CHECK(post_text(admin, text, req_id));
    }
    int lost = 0, twice = 0;
    for (double deadline = restarted + 40; seconds_now() < deadline; pause_ms(20)) {
        lost = 0;
        for (int i = 0; i < count; i++) {
            for (int k = 0; k < restart_messages; k++) lost += atomic_load(&tracked[i].restart_count[k]) == 0;
        }
        if (lost == 0) break;
    }
    double held = seconds_now() - restarted;
    pause_ms(1500); /* a second report of a message would come about now */
    for (int i = 0; i < count; i++) {
        for (int k = 0; k < restart_messages; k++) twice += atomic_load(&tracked[i].restart_count[k]) > 1;
    }
    printf("server restart: every client held every message %.1f s after the start; %d lost, %d twice (of %d)\n", held, lost,
           twice, count * restart_messages);
    CHECK(lost == 0);
    CHECK(twice == 0);

    /* Churn while the order messages arrive: a third of the clients destroyed from here and
     * replaced by new ones (some destroyed again at once, while connecting), a sixth destroy
     * themselves from inside their event callback, the rest stay and must get every message. */
    int churned = count / 3, self_destroying = count / 6, next = count;
    for (int i = churned; i < churned + self_destroying; i++) atomic_store(&tracked[i].self_destroy_at, i % order_messages);
    for (int i = 0; i < count; i++) post_jobs(&tracked[i]);
    for (int k = 0; k < order_messages; k++) {
        snprintf(text, sizeof text, "order %d", k);
        snprintf(req_id, sizeof req_id, "order-%d", k);
        CHECK(post_text(admin, text, req_id));
        /* The churn of this round: some old clients go, new ones come. */
        for (int i = k * churned / order_messages; i < (k + 1) * churned / order_messages; i++) {
            post_jobs(&tracked[i]);
            destroy_client(&tracked[i]);
            tracked_client *fresh = &tracked[next];
            CHECK(make_client(fresh, next, i, url));
            post_jobs(fresh);
            if (next % 2 == 0) destroy_client(fresh); /* while it connects */
            next++;
        }
        for (int i = churned + self_destroying; i < count; i += 7) post_jobs(&tracked[i]);
    }
    /* The survivors have every order message (each is posted once its POST was answered). */
    for (double deadline = seconds_now() + 30; seconds_now() < deadline; pause_ms(20)) {
        int done = 1;
        for (int i = churned + self_destroying; i < count && done; i++) done = atomic_load(&tracked[i].order_count) >= order_messages;
        for (int i = churned; i < churned + self_destroying && done; i++) done = atomic_load(&tracked[i].destroyed);
        if (done) break;
    }
    for (int i = 0; i < next; i++) {
        if (!atomic_load(&tracked[i].destroyed) && !atomic_load(&tracked[i].destroying_itself)) destroy_client(&tracked[i]);
    }
    pause_ms(200);
    int incomplete = 0, unordered = 0, jobs_wrong = 0, connects_wrong = 0, after_destroy = 0, not_self_destroyed = 0;
    for (int i = 0; i < next; i++) {
        tracked_client *t = &tracked[i];
        unordered += atomic_load(&t->order_violations) > 0;
        jobs_wrong += atomic_load(&t->job_violations) > 0 || atomic_load(&t->next_job) != atomic_load(&t->jobs_posted);
        connects_wrong += atomic_load(&t->connect_completions) != 1;
        after_destroy += atomic_load(&t->after_destroy);
        if (i >= churned + self_destroying && i < count) incomplete += atomic_load(&t->order_count) != order_messages;
        if (i >= churned && i < churned + self_destroying) not_self_destroyed += !atomic_load(&t->destroyed);
    }
    printf("churn: %d clients destroyed from outside and %d new ones (half destroyed while connecting), %d destroyed from"
           " their own callback: out of order or twice %d, jobs not run exactly once in order %d, connect completions not"
           " exactly once %d, callbacks after destroy %d, survivors missing messages %d, self-destroys not done %d\n",
           churned, next - count, self_destroying, unordered, jobs_wrong, connects_wrong, after_destroy, incomplete,
           not_self_destroyed);
    CHECK(unordered == 0);
    CHECK(jobs_wrong == 0);
    CHECK(connects_wrong == 0);
    CHECK(after_destroy == 0);
    CHECK(incomplete == 0);
    CHECK(not_self_destroyed == 0);

    test_server_stop(&server);
    return check_report("test_many_clients");
}
