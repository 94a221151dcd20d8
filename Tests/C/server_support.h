/* Support for the C tests that run against the real parley-server: starting it, and
 * waiting for completions. Header-only (static functions), included by one test each. */
#ifndef PARLEY_TEST_SERVER_SUPPORT_H
#define PARLEY_TEST_SERVER_SUPPORT_H
#include "check.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int done;
    int code;
    int http_status;
    int server_code;
    char *json; /* malloc'd copy of the result ("" on error), freed by slot_init */
} result_slot;

static void slot_init(result_slot *slot) {
    free(slot->json);
    memset(slot, 0, sizeof *slot);
    pthread_mutex_init(&slot->mutex, NULL);
    pthread_cond_init(&slot->cond, NULL);
}

static void on_result(void *user_data, const parley_error *error, const char *json) {
    result_slot *slot = user_data;
    pthread_mutex_lock(&slot->mutex);
    slot->code = error ? error->code : 0;
    slot->http_status = error ? error->http_status : 0;
    slot->server_code = error ? error->server_code : 0;
    free(slot->json);
    slot->json = strdup(json ? json : "");
    slot->done = 1;
    pthread_cond_broadcast(&slot->cond);
    pthread_mutex_unlock(&slot->mutex);
}

static int deadline_in(struct timespec *deadline, int ms) {
    clock_gettime(CLOCK_REALTIME, deadline);
    deadline->tv_sec += ms / 1000;
    deadline->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline->tv_nsec >= 1000000000L) { deadline->tv_sec++; deadline->tv_nsec -= 1000000000L; }
    return 0;
}

static int wait_slot(result_slot *slot) {
    struct timespec deadline;
    deadline_in(&deadline, 20000);
    pthread_mutex_lock(&slot->mutex);
    while (!slot->done && pthread_cond_timedwait(&slot->cond, &slot->mutex, &deadline) == 0) {}
    int done = slot->done;
    pthread_mutex_unlock(&slot->mutex);
    return done;
}

/* Starts parley-server on `port` (0: an ephemeral one); fills in its URL. A restart after a
 * kill passes the port and database the server had. */
static pid_t start_server_on_port(const char *binary, const char *database, int port, char *url, size_t url_size) {
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipe_fds[1], STDOUT_FILENO);
        close(pipe_fds[0]);
        /* No balancer watches a test's server: its stop closes the port at once. */
        execl(binary, binary, "--port", port_text, "--database", database, "--api-token", "c-test-token",
              "--shutdown-drain-seconds", "0", (char *)NULL);
        _exit(127);
    }
    close(pipe_fds[1]);
    FILE *out = fdopen(pipe_fds[0], "r");
    char line[200] = "";
    const char *prefix = "parley-server listening on ";
    if (out == NULL || fgets(line, sizeof line, out) == NULL || strncmp(line, prefix, strlen(prefix)) != 0) {
        fprintf(stderr, "parley-server did not start (%s)\n", line);
        kill(pid, SIGKILL);
        return -1;
    }
    line[strcspn(line, "\n")] = '\0';
    snprintf(url, url_size, "%s", line + strlen(prefix));
    return pid;
}

static pid_t start_server(const char *binary, const char *database, char *url, size_t url_size) {
    return start_server_on_port(binary, database, 0, url, url_size);
}

/* The server's database: a SQLite file in `directory`, or with PARLEY_TEST_BACKEND=postgres
 * a new database in the cluster of scripts/pg-test-cluster.sh (PARLEY_TEST_PG, PARLEY_PG_BIN,
 * PARLEY_PG_PORT). 0 on success. */
static int test_database(const char *directory, char *out, size_t size) {
    const char *backend = getenv("PARLEY_TEST_BACKEND");
    if (backend == NULL || strcmp(backend, "postgres") != 0) {
        snprintf(out, size, "%s/server.sqlite", directory);
        return 0;
    }
    const char *base = getenv("PARLEY_TEST_PG"), *bin = getenv("PARLEY_PG_BIN"), *port = getenv("PARLEY_PG_PORT");
    if (base == NULL || bin == NULL || port == NULL) {
        fprintf(stderr, "PARLEY_TEST_BACKEND=postgres needs PARLEY_TEST_PG, PARLEY_PG_BIN and PARLEY_PG_PORT "
                        "(source scripts/pg-test-cluster.sh start)\n");
        return -1;
    }
    static int counter = 0;
    char name[64], command[512];
    snprintf(name, sizeof name, "parley_c_%d_%d_%ld", (int)getpid(), ++counter, (long)time(NULL));
    snprintf(command, sizeof command, "'%s/createdb' -h 127.0.0.1 -p '%s' -U parley %s", bin, port, name);
    if (system(command) != 0) {
        fprintf(stderr, "createdb failed: %s\n", command);
        return -1;
    }
    snprintf(out, size, "%s/%s", base, name);
    return 0;
}

/* A running parley-server in a temporary directory, with an admin client (memory cache). */
typedef struct {
    char directory[64];
    char url[256];
    pid_t pid;
    parley_client *admin;
} test_server;

/* Starts the server named by PARLEY_SERVER_BIN; 0 on success (a message on failure). */
static int test_server_start(test_server *server, const char *test_name) {
    memset(server, 0, sizeof *server);
    const char *binary = getenv("PARLEY_SERVER_BIN");
    if (binary == NULL || access(binary, X_OK) != 0) {
        fprintf(stderr, "%s: set PARLEY_SERVER_BIN to the parley-server binary\n", test_name);
        return -1;
    }
    snprintf(server->directory, sizeof server->directory, "/tmp/parley-c-%s-XXXXXX", test_name);
    if (mkdtemp(server->directory) == NULL) return -1;
    char database[512], config[512];
    if (test_database(server->directory, database, sizeof database) != 0) return -1;
    server->pid = start_server(binary, database, server->url, sizeof server->url);
    if (server->pid < 0) return -1;
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"api_token\": \"c-test-token\", \"cache_mode\": \"memory\"}",
             server->url);
    if (parley_client_create(&server->admin, config) != PARLEY_OK) {
        fprintf(stderr, "%s: admin client: %s\n", test_name, parley_last_error_message());
        return -1;
    }
    return 0;
}

/* Destroys the admin client, stops the server and removes its directory. */
static void test_server_stop(test_server *server) {
    if (server->admin != NULL) parley_client_destroy(server->admin);
    server->admin = NULL;
    kill(server->pid, SIGTERM);
    waitpid(server->pid, NULL, 0);
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", server->directory);
    if (system(command) != 0) fprintf(stderr, "could not remove %s\n", server->directory);
}

/* Runs one admin REST call and waits for it. */
static int admin_call(parley_client *admin, const char *method, const char *path, const char *body, result_slot *slot) {
    slot_init(slot);
    if (parley_client_request(admin, NULL, method, path, body, on_result, slot) != PARLEY_OK) return 0;
    return wait_slot(slot) && slot->code == 0;
}

/* Copies the string value of "key" out of a flat JSON text (enough for tokens here). */
/* Waits until the client's event stream is open: the server registers a stream before it
 * answers, so a message posted afterwards arrives live (one posted before would come from
 * the catch-up instead). */
static inline int wait_stream_open(parley_client *client) {
    for (int waited = 0; waited < 20000; waited += 5) {
        int state = PARLEY_STATE_CLOSED;
        if (parley_client_connection_state(client, &state) == PARLEY_OK && state == PARLEY_STATE_OPEN) return 1;
        struct timespec pause = {0, 5 * 1000000L};
        nanosleep(&pause, NULL);
    }
    fprintf(stderr, "the event stream did not open within 20 s\n");
    return 0;
}

/* Waits (up to 20 s) until the view is live: its stream open and the catch-up after it done.
 * A change made afterwards reaches the view with its live source; one made before could come
 * by that catch-up, as a changelog. Pass the view in the argument of its kind, NULL in the
 * other. */
static inline int wait_view_live(parley_group_channel_collection *channels, parley_message_collection *messages) {
    for (int waited = 0; waited < 20000; waited += 5) {
        int freshness = 0;
        int status = channels != NULL ? parley_group_channel_collection_freshness(channels, &freshness)
                                      : parley_message_collection_freshness(messages, &freshness);
        if (status != PARLEY_OK) {
            fprintf(stderr, "reading the view's freshness failed: %d\n", status);
            return 0;
        }
        if (freshness == PARLEY_FRESHNESS_LIVE) return 1;
        struct timespec pause = {0, 5 * 1000000L};
        nanosleep(&pause, NULL);
    }
    fprintf(stderr, "the view did not become live within 20 s\n");
    return 0;
}

static int json_field_text(const char *json, const char *key, char *out, size_t size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *start = strstr(json, pattern);
    if (start == NULL) return 0;
    start += strlen(pattern);
    const char *end = strchr(start, '"');
    if (end == NULL || (size_t)(end - start) >= size) return 0;
    memcpy(out, start, (size_t)(end - start));
    out[end - start] = '\0';
    return 1;
}

#endif
