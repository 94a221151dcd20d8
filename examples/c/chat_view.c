/* chat_view: opens a message collection on a channel and prints what it shows and every
 * event it reports (kind, source, sending status, messages) until the time is up.
 *
 *   chat_view SERVER_URL USER_ID SESSION_TOKEN CHANNEL_URL [SECONDS] [MESSAGE]
 *   chat_view http://127.0.0.1:8080 alice 3f9c... general 5 "hello from the view"
 *
 * With MESSAGE, the view sends it and prints it going from pending to succeeded. Callbacks
 * run on the client's callback thread; this thread only waits. The cache lives in
 * ./chat-view-cache. */
#define _POSIX_C_SOURCE 200809L
#include <parley.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int done = 0;  /* results received */
static int failed = 0;

static const char *kind_name(int kind) {
    switch (kind) {
    case PARLEY_MESSAGE_EVENT_ADDED: return "added";
    case PARLEY_MESSAGE_EVENT_UPDATED: return "updated";
    case PARLEY_MESSAGE_EVENT_DELETED: return "deleted";
    case PARLEY_MESSAGE_EVENT_CHANNEL_UPDATED: return "channel updated";
    case PARLEY_MESSAGE_EVENT_CHANNEL_DELETED: return "channel deleted";
    case PARLEY_MESSAGE_EVENT_HUGE_GAP_DETECTED: return "huge gap detected";
    default: return "?";
    }
}

static const char *status_name(int status) {
    switch (status) {
    case PARLEY_SENDING_STATUS_PENDING: return "pending";
    case PARLEY_SENDING_STATUS_FAILED: return "failed";
    case PARLEY_SENDING_STATUS_CANCELED: return "canceled";
    case PARLEY_SENDING_STATUS_SUCCEEDED: return "succeeded";
    default: return "-";
    }
}

/* Prints the "message" texts of a JSON array (a tiny scan: examples stay dependency-free). */
static void print_texts(const char *json) {
    const char *cursor = json;
    int count = 0;
    while ((cursor = strstr(cursor, "\"message\":\"")) != NULL && count < 6) {
        cursor += strlen("\"message\":\"");
        const char *end = strchr(cursor, '"');
        if (end == NULL) break;
        printf(" \"%.*s\"", (int)(end - cursor), cursor);
        cursor = end;
        count++;
    }
}

static void on_event(void *user_data, const parley_message_event *event) {
    (void)user_data;
    printf("[view] %-17s source=%-16s status=%-9s", kind_name(event->kind), event->source_name,
           status_name(event->sending_status));
    print_texts(event->messages_json);
    printf("\n");
    fflush(stdout);
}

static void on_loaded(void *user_data, const parley_error *error, const char *messages_json) {
    const char *what = user_data;
    pthread_mutex_lock(&lock);
    if (error != NULL) {
        printf("[view] %s: %s: %s\n", what, parley_error_name(error->code), error->message);
        failed = 1;
    } else {
        int count = 0;
        for (const char *cursor = messages_json; (cursor = strstr(cursor, "\"message_id\":")) != NULL; cursor++) count++;
        printf("[view] %s: %d messages, newest:", what, count);
        const char *last = messages_json, *next;
        while ((next = strstr(last + 1, "\"message\":\"")) != NULL) last = next;
        if (last != messages_json) print_texts(last);
        printf("\n");
    }
    fflush(stdout);
    done++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_connected(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)json;
    pthread_mutex_lock(&lock);
    if (error != NULL) {
        printf("[view] connect: %s\n", error->message);
        failed = 1;
    } else {
        printf("[view] connected\n");
    }
    fflush(stdout);
    done++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_sent(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)json;
    if (error != NULL) printf("[send] failed: %s\n", error->message);
}

static void wait_results(int count) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 20;
    pthread_mutex_lock(&lock);
    while (done < count && !failed && pthread_cond_timedwait(&changed, &lock, &deadline) == 0) {}
    pthread_mutex_unlock(&lock);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s SERVER_URL USER_ID SESSION_TOKEN CHANNEL_URL [SECONDS] [MESSAGE]\n", argv[0]);
        return 2;
    }
    int seconds = argc > 5 ? atoi(argv[5]) : 5;
    char config[512];
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"chat-view-cache\"}", argv[1]);
    parley_client *client = NULL;
    if (parley_client_create(&client, config) != PARLEY_OK) {
        fprintf(stderr, "create: %s\n", parley_last_error_message());
        return 1;
    }
    parley_client_connect(client, NULL, argv[2], argv[3], on_connected, "connect");
    wait_results(1);

    parley_message_collection_handler handler = PARLEY_MESSAGE_COLLECTION_HANDLER_INIT;
    handler.event = on_event;
    parley_message_collection *view = NULL;
    if (failed || parley_message_collection_create(&view, client, argv[4], PARLEY_STARTING_POINT_NEWEST,
                                                   "{\"previous_result_size\": 30}", &handler) != PARLEY_OK) {
        fprintf(stderr, "collection: %s\n", parley_last_error_message());
        parley_client_destroy(client);
        return 1;
    }
    parley_message_collection_start(view, on_loaded, on_loaded, "start (cache, then server)");
    wait_results(3);  /* connect, cache result, server result */
    if (argc > 6) {
        char params[512];
        snprintf(params, sizeof params, "{\"message\": \"%s\"}", argv[6]);
        parley_client_send_user_message(client, NULL, NULL, argv[4], params, on_sent, NULL);
    }
    struct timespec pause = {seconds, 0};
    nanosleep(&pause, NULL);
    int has_previous = 0;
    parley_message_collection_has_previous(view, &has_previous);
    printf("[view] has_previous=%d; disposing\n", has_previous);
    parley_message_collection_dispose(view);
    parley_client_destroy(client);
    return failed;
}
