/* Callback delivery through the C ABI in both dispatch modes: ordering, no concurrency,
 * re-entrancy, drain on destroy, exactly-once completion (also when cancelled by
 * destroy), manual mode through the event fd, the log callback, and dispatch groups
 * (one fd for many manual-mode clients) with their bad input. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define POSTS 2000

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int order[POSTS];
    int count;
    atomic_int inside;
    atomic_int overlaps;
    int completions;
    int last_code;
    int cancelled;
    int logs;
    int gate_open;
    parley_client *client;
} recorder;

static recorder rec;

static void sleep_ms(long milliseconds) {
    struct timespec pause = {milliseconds / 1000, (milliseconds % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

static void reset(void) {
    pthread_mutex_lock(&rec.mutex);
    rec.count = 0; rec.completions = 0; rec.last_code = 1; rec.cancelled = 0; rec.logs = 0;
    atomic_store(&rec.overlaps, 0);
    pthread_mutex_unlock(&rec.mutex);
}

static int wait_for(int *counter, int target, int timeout_ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&rec.mutex);
    while (*counter < target) {
        if (pthread_cond_timedwait(&rec.cond, &rec.mutex, &deadline) != 0) break;
    }
    int reached = *counter >= target;
    pthread_mutex_unlock(&rec.mutex);
    return reached;
}

static void on_post(void *user_data) {
    if (atomic_fetch_add(&rec.inside, 1) != 0) atomic_fetch_add(&rec.overlaps, 1);
    pthread_mutex_lock(&rec.mutex);
    if (rec.count < POSTS) rec.order[rec.count] = (int)(intptr_t)user_data;
    rec.count++;
    pthread_cond_broadcast(&rec.cond);
    pthread_mutex_unlock(&rec.mutex);
    atomic_fetch_sub(&rec.inside, 1);
}

static void on_result(void *user_data, const parley_error *error, const char *json) {
    (void)user_data;
    pthread_mutex_lock(&rec.mutex);
    rec.completions++;
    rec.last_code = error ? error->code : PARLEY_OK;
    if (error && error->code == PARLEY_E_CANCELLED) rec.cancelled++;
    if (error) CHECK(error->message != NULL && json == NULL);
    pthread_cond_broadcast(&rec.cond);
    pthread_mutex_unlock(&rec.mutex);
}

static void on_log(void *user_data, int level, const char *message) {
    (void)user_data;
    CHECK(level >= PARLEY_LOG_ERROR && level <= PARLEY_LOG_DEBUG);
    CHECK(message != NULL && message[0] != '\0');
    pthread_mutex_lock(&rec.mutex);
    rec.logs++;
    pthread_cond_broadcast(&rec.cond);
    pthread_mutex_unlock(&rec.mutex);
}

/* From inside a callback: post more work and issue a request (re-entrancy). */
static void reentrant_callback(void *user_data) {
    (void)user_data;
    CHECK_STATUS(PARLEY_OK, parley_client_post(rec.client, on_post, (void *)(intptr_t)7));
    CHECK_STATUS(PARLEY_OK, parley_client_request(rec.client, NULL, "GET", "/v3/users", NULL, on_result, NULL));
    on_post((void *)(intptr_t)6);
}

/* Holds the callback thread until the test has queued everything (slow runs, valgrind). */
static void gate_callback(void *user_data) {
    (void)user_data;
    pthread_mutex_lock(&rec.mutex);
    while (!rec.gate_open) pthread_cond_wait(&rec.cond, &rec.mutex);
    pthread_mutex_unlock(&rec.mutex);
}

static void open_gate(void) {
    pthread_mutex_lock(&rec.mutex);
    rec.gate_open = 1;
    pthread_cond_broadcast(&rec.cond);
    pthread_mutex_unlock(&rec.mutex);
}

/* Destroys its own client from inside a callback. */
static void destroying_callback(void *user_data) {
    (void)user_data;
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(rec.client));
    /* Everything queued after this callback ran before destroy returned. */
    pthread_mutex_lock(&rec.mutex);
    CHECK(rec.count == 3);
    pthread_mutex_unlock(&rec.mutex);
    on_post((void *)(intptr_t)100);
}

/* A listening socket that never accepts: requests to it hang until cancelled. */
static int black_hole(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof address) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&address, &length) != 0) {
        perror("black hole socket");
        exit(2);
    }
    *port = ntohs(address.sin_port);
    return fd;
}

static void test_thread_mode(void) {
    reset();
    parley_client *client = NULL;
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, "{\"server_url\": \"http://127.0.0.1:9\", \"connect_timeout_ms\": 2000}"));
    rec.client = client;
    for (int i = 0; i < POSTS; i++) CHECK_STATUS(PARLEY_OK, parley_client_post(client, on_post, (void *)(intptr_t)i));
    CHECK(wait_for(&rec.count, POSTS, 10000));
    for (int i = 0; i < POSTS; i++) {
        if (rec.order[i] != i) { CHECK(rec.order[i] == i); break; }
    }
    CHECK(atomic_load(&rec.overlaps) == 0);

    /* Log callback + a failing request: connection refused gives PARLEY_E_NETWORK. */
    CHECK_STATUS(PARLEY_OK, parley_client_set_log_callback(client, on_log, NULL, PARLEY_LOG_DEBUG));
    uint64_t operation = 0;
    CHECK_STATUS(PARLEY_OK, parley_client_request(client, &operation, "GET", "/v3/users", NULL, on_result, NULL));
    CHECK(operation != 0);
    CHECK(wait_for(&rec.completions, 1, 10000));
    CHECK(rec.last_code == PARLEY_E_NETWORK);
    CHECK(wait_for(&rec.logs, 1, 5000));
    CHECK_STATUS(PARLEY_E_NOT_FOUND, parley_client_cancel(client, operation));

    /* Re-entrancy. */
    reset();
    CHECK_STATUS(PARLEY_OK, parley_client_post(client, reentrant_callback, NULL));
    CHECK(wait_for(&rec.count, 2, 5000));
    CHECK(rec.order[0] == 6 && rec.order[1] == 7);
    CHECK(wait_for(&rec.completions, 1, 10000));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));

    /* Destroy from inside a callback drains the rest first. */
    reset();
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, NULL));
    rec.client = client;
    rec.gate_open = 0;
    CHECK_STATUS(PARLEY_OK, parley_client_post(client, gate_callback, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_post(client, on_post, (void *)(intptr_t)1));
    CHECK_STATUS(PARLEY_OK, parley_client_post(client, destroying_callback, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_post(client, on_post, (void *)(intptr_t)2));
    CHECK_STATUS(PARLEY_OK, parley_client_post(client, on_post, (void *)(intptr_t)3));
    open_gate();
    CHECK(wait_for(&rec.count, 4, 5000));
    CHECK(rec.order[3] == 100);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_post(client, on_post, NULL));
}

static void test_cancel_on_destroy(const char *mode) {
    reset();
    int port = 0;
    int listener = black_hole(&port);
    char config[256];
    snprintf(config, sizeof config, "{\"server_url\": \"http://127.0.0.1:%d\", \"dispatch_mode\": \"%s\"}", port, mode);
    parley_client *client = NULL;
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    for (int i = 0; i < 3; i++) CHECK_STATUS(PARLEY_OK, parley_client_request(client, NULL, "GET", "/v3/users", NULL, on_result, NULL));
    uint64_t cancelled_one = 0;
    CHECK_STATUS(PARLEY_OK, parley_client_request(client, &cancelled_one, "GET", "/v3/users", NULL, on_result, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_cancel(client, cancelled_one));
    CHECK_STATUS(PARLEY_E_NOT_FOUND, parley_client_cancel(client, cancelled_one));
    sleep_ms(100);
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    /* All four completed exactly once, cancelled, before destroy returned. */
    pthread_mutex_lock(&rec.mutex);
    CHECK(rec.completions == 4);
    CHECK(rec.cancelled == 4);
    pthread_mutex_unlock(&rec.mutex);
    sleep_ms(100);
    CHECK(rec.completions == 4);
    close(listener);
}

static int fd_readable(int fd, int timeout_ms) {
    struct pollfd descriptor = {fd, POLLIN, 0};
    return poll(&descriptor, 1, timeout_ms) == 1 && (descriptor.revents & POLLIN);
}

static void test_manual_mode(void) {
    reset();
    parley_client *client = NULL;
    int fd = -1, ran = -1;
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, "{\"server_url\": \"http://127.0.0.1:9\", \"dispatch_mode\": \"manual\"}"));
    rec.client = client;
    CHECK_STATUS(PARLEY_OK, parley_client_event_fd(client, &fd));
    CHECK(!fd_readable(fd, 0));
    for (int i = 0; i < 10; i++) CHECK_STATUS(PARLEY_OK, parley_client_post(client, on_post, (void *)(intptr_t)i));
    CHECK(rec.count == 0); /* nothing runs until we dispatch */
    CHECK(fd_readable(fd, 0));
    CHECK_STATUS(PARLEY_OK, parley_client_dispatch(client, 4, &ran));
    CHECK(ran == 4 && rec.count == 4);
    CHECK(fd_readable(fd, 0));
    CHECK_STATUS(PARLEY_OK, parley_client_dispatch(client, 0, &ran));
    CHECK(ran == 6 && rec.count == 10);
    CHECK(!fd_readable(fd, 0));
    for (int i = 0; i < 10; i++) CHECK(rec.order[i] == i);

    /* A completion from the network thread wakes the fd. */
    CHECK_STATUS(PARLEY_OK, parley_client_request(client, NULL, "GET", "/v3/users", NULL, on_result, NULL));
    CHECK(fd_readable(fd, 10000));
    CHECK_STATUS(PARLEY_OK, parley_client_dispatch(client, 0, &ran));
    CHECK(ran >= 1 && rec.completions == 1 && rec.last_code == PARLEY_E_NETWORK);

    /* Destroy runs what is still queued, on this thread. */
    for (int i = 0; i < 5; i++) CHECK_STATUS(PARLEY_OK, parley_client_post(client, on_post, (void *)(intptr_t)(20 + i)));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    CHECK(rec.count == 15);
    CHECK(rec.order[14] == 24);
}


/* ---- Dispatch groups ------------------------------------------------------------ */

#define GROUP_CLIENTS 3
#define GROUP_RUNS 256

static struct {
    int runs[GROUP_RUNS]; /* client * 1000 + sequence, in the order they ran */
    int count;
    parley_client *clients[GROUP_CLIENTS];
    int destroy_status;
    int count_when_destroy_returned;
} grp;

static void on_group_post(void *user_data) {
    if (grp.count < GROUP_RUNS) grp.runs[grp.count] = (int)(intptr_t)user_data;
    grp.count++;
}

/* Destroys client 0 from inside its own callback, during a group dispatch. */
static void destroy_client_zero(void *user_data) {
    (void)user_data;
    on_group_post((void *)(intptr_t)999);
    grp.destroy_status = parley_client_destroy(grp.clients[0]);
    grp.count_when_destroy_returned = grp.count;
}

/* The callbacks of `client` that ran, in order, as their sequence numbers. */
static int runs_of(int client, int *out, int capacity) {
    int found = 0;
    for (int i = 0; i < grp.count && i < GROUP_RUNS; i++) {
        if (grp.runs[i] / 1000 == client && found < capacity) out[found++] = grp.runs[i] % 1000;
    }
    return found;
}

static void test_dispatch_group_bad_input(void) {
    parley_dispatch_group *group = NULL;
    int fd = -1, ran = -1;
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_dispatch_group_create(NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_dispatch_group_event_fd(NULL, &fd));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_dispatch_group_dispatch(NULL, 0, &ran));
    CHECK(ran == 0);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_dispatch_group_destroy(NULL));
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_create(&group));
    CHECK(group != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_dispatch_group_event_fd(group, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_dispatch_group_dispatch(group, -1, &ran));
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_dispatch(group, 0, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_set_dispatch_group(NULL, group));

    /* A thread-mode client joins no group. */
    parley_client *threaded = NULL;
    CHECK_STATUS(PARLEY_OK, parley_client_create(&threaded, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_set_dispatch_group(threaded, group));
    CHECK_ERROR_MENTIONS("thread dispatch mode");
    /* A client handle is not a group handle. */
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_dispatch_group_dispatch((parley_dispatch_group *)threaded, 0, &ran));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(threaded));

    /* One group at a time; destroyed handles are refused. */
    parley_dispatch_group *other = NULL;
    parley_client *client = NULL;
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_create(&other));
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, "{\"dispatch_mode\": \"manual\"}"));
    CHECK_STATUS(PARLEY_OK, parley_client_set_dispatch_group(client, group));
    CHECK_STATUS(PARLEY_OK, parley_client_set_dispatch_group(client, group));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_set_dispatch_group(client, other));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_dispatch_group_destroy(group));
    CHECK_ERROR_MENTIONS("still attached");
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_event_fd(group, &fd)); /* still valid */
    CHECK_STATUS(PARLEY_OK, parley_client_set_dispatch_group(client, NULL));
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_destroy(group));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_dispatch_group_destroy(group));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_dispatch_group_dispatch(group, 0, &ran));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_set_dispatch_group(client, group));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_set_dispatch_group(client, other));
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_destroy(other));
}

static void test_dispatch_group(void) {
    memset(&grp, 0, sizeof grp);
    parley_dispatch_group *group = NULL;
    int group_fd = -1, client_fd = -1, ran = -1;
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_create(&group));
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_event_fd(group, &group_fd));
    for (int c = 0; c < GROUP_CLIENTS; c++) {
        CHECK_STATUS(PARLEY_OK, parley_client_create(&grp.clients[c], "{\"server_url\": \"http://127.0.0.1:9\", \"dispatch_mode\": \"manual\"}"));
        CHECK_STATUS(PARLEY_OK, parley_client_set_dispatch_group(grp.clients[c], group));
    }
    CHECK(!fd_readable(group_fd, 0));
    for (int i = 0; i < 20; i++) {
        for (int c = 0; c < GROUP_CLIENTS; c++) {
            CHECK_STATUS(PARLEY_OK, parley_client_post(grp.clients[c], on_group_post, (void *)(intptr_t)(c * 1000 + i)));
        }
    }
    CHECK(grp.count == 0);
    CHECK(fd_readable(group_fd, 0));
    /* The client's own fd still tells its own queue. */
    CHECK_STATUS(PARLEY_OK, parley_client_event_fd(grp.clients[1], &client_fd));
    CHECK(fd_readable(client_fd, 0));

    /* A limited dispatch takes the clients in turn, 16 callbacks each at most. */
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_dispatch(group, 45, &ran));
    CHECK(ran == 45 && grp.count == 45);
    int seen[GROUP_RUNS];
    CHECK(runs_of(0, seen, GROUP_RUNS) == 16 && runs_of(1, seen, GROUP_RUNS) == 16 && runs_of(2, seen, GROUP_RUNS) == 13);
    CHECK(fd_readable(group_fd, 0));
    /* The client's own dispatch runs its own callbacks only. */
    int before = runs_of(1, seen, GROUP_RUNS);
    CHECK_STATUS(PARLEY_OK, parley_client_dispatch(grp.clients[1], 0, &ran));
    CHECK(ran == 20 - before && runs_of(1, seen, GROUP_RUNS) == 20);
    CHECK(!fd_readable(client_fd, 0));
    /* Without out_dispatched the dispatch runs all the same. */
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_dispatch(group, 0, NULL));
    CHECK(grp.count == 60);
    CHECK(!fd_readable(group_fd, 0));
    for (int c = 0; c < GROUP_CLIENTS; c++) {
        int found = runs_of(c, seen, GROUP_RUNS);
        CHECK(found == 20);
        for (int i = 0; i < found; i++) {
            if (seen[i] != i) { CHECK(seen[i] == i); break; }
        }
    }

    /* A completion from the network thread wakes the group's fd. */
    reset();
    CHECK_STATUS(PARLEY_OK, parley_client_request(grp.clients[2], NULL, "GET", "/v3/users", NULL, on_result, NULL));
    CHECK(fd_readable(group_fd, 10000));
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_dispatch(group, 0, &ran));
    CHECK(ran >= 1 && rec.completions == 1 && rec.last_code == PARLEY_E_NETWORK);

    /* Destroy a client from inside its own callback during a group dispatch: its later
     * callbacks run nested before destroy returns, and the group goes on with the others. */
    grp.count = 0;
    CHECK_STATUS(PARLEY_OK, parley_client_post(grp.clients[0], destroy_client_zero, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_post(grp.clients[0], on_group_post, (void *)(intptr_t)1));
    CHECK_STATUS(PARLEY_OK, parley_client_post(grp.clients[0], on_group_post, (void *)(intptr_t)2));
    CHECK_STATUS(PARLEY_OK, parley_client_post(grp.clients[1], on_group_post, (void *)(intptr_t)1001));
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_dispatch(group, 0, &ran));
    CHECK(grp.destroy_status == PARLEY_OK);
    CHECK(grp.count_when_destroy_returned == 3);
    CHECK(grp.count == 4 && grp.runs[3] == 1001);
    CHECK(!fd_readable(group_fd, 0));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_post(grp.clients[0], on_group_post, NULL));

    /* The group is refused destruction while clients remain, then destroyed. */
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_dispatch_group_destroy(group));
    /* Destroying an attached client drains it on the calling thread. */
    CHECK_STATUS(PARLEY_OK, parley_client_post(grp.clients[1], on_group_post, (void *)(intptr_t)1002));
    CHECK(fd_readable(group_fd, 0));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(grp.clients[1]));
    CHECK(grp.count == 5 && grp.runs[4] == 1002);
    CHECK(!fd_readable(group_fd, 0));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(grp.clients[2]));
    CHECK_STATUS(PARLEY_OK, parley_dispatch_group_destroy(group));
}

int main(void) {
    pthread_mutex_init(&rec.mutex, NULL);
    pthread_cond_init(&rec.cond, NULL);
    test_thread_mode();
    test_cancel_on_destroy("thread");
    test_cancel_on_destroy("manual");
    test_manual_mode();
    test_dispatch_group_bad_input();
    test_dispatch_group();
    pthread_cond_destroy(&rec.cond);
    pthread_mutex_destroy(&rec.mutex);
    return check_report("test_dispatch");
}
