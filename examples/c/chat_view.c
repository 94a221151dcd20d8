/* chat_view: opens a message collection on a channel and prints what it shows and every
 * event it reports (kind, source, sending status, messages) until the time is up.
 *
 *   chat_view SERVER_URL USER_ID SESSION_TOKEN CHANNEL_URL [SECONDS] [MESSAGE]
 *   chat_view http://127.0.0.1:8080 alice 3f9c... general 5 "hello from the view"
 *
 * With MESSAGE, the view sends it and prints it going from pending to succeeded. Callbacks
 * run on the client's callback thread while this thread prints too: every line is built
 * first, then written and flushed whole under one lock (say), so that lines never mix. The
 * cache lives in ./chat-view-cache. JSON is read and written with jansson; each event
 * prints as one readable line, e.g.
 *
 *   [view] added 1 (message_received, succeeded): dave: seen by the view */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <parley.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example_output.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int done = 0;  /* results received */
static int failed = 0;

/* Appends "sender: text" of up to three messages of a JSON array (from index first on)
 * to out (size bytes, holding a string), "; " between them, then how many more. */
static void describe_messages(json_t *messages, size_t first, char *out, size_t size) {
    size_t count = json_array_size(messages);
    for (size_t index = first; index < count && index < first + 3; index++) {
        json_t *message = json_array_get(messages, index);
        const char *sender = json_string_value(json_object_get(json_object_get(message, "user"), "user_id"));
        char text[44];
        shorten(json_string_value(json_object_get(message, "message")), 40, text);
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%s: %s", index > first ? "; " : "", sender ? sender : "?", text);
    }
    if (count > first + 3) {
        size_t used = strlen(out);
        snprintf(out + used, size - used, " (+%zu more)", count - first - 3);
    }
}

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

/* A JSON value as text (free it), the value released. */
static char *json_text(json_t *value) {
    char *text = json_dumps(value, JSON_COMPACT);
    json_decref(value);
    return text;
}

/* One line per event: its kind and how many messages, why (source) and their sending
 * state, then the messages ("sender: text"). */
static void on_event(void *user_data, const parley_message_event *event) {
    (void)user_data;
    char detail[512] = "";
    json_t *messages = json_loads(event->messages_json, 0, NULL);
    size_t count = json_array_size(messages);
    describe_messages(messages, 0, detail, sizeof detail);
    json_decref(messages);
    if (count > 0) {
        say(stdout, "[view] %s %zu (%s, %s): %s", kind_name(event->kind), count, event->source_name,
            status_name(event->sending_status), detail);
    } else {
        say(stdout, "[view] %s (%s)", kind_name(event->kind), event->source_name);
    }
}

static void on_loaded(void *user_data, const parley_error *error, const char *messages_json) {
    const char *what = user_data;
    if (error != NULL) {
        say(stdout, "[view] %s: %s: %s", what, parley_error_name(error->code), error->message);
    } else {
        char newest[512] = "";
        json_t *messages = json_loads(messages_json, 0, NULL);
        size_t count = json_array_size(messages);
        if (count > 0) describe_messages(messages, count - 1, newest, sizeof newest);
        json_decref(messages);
        say(stdout, "[view] %s: %zu messages%s%s", what, count, count > 0 ? ", the newest: " : "", newest);
    }
    pthread_mutex_lock(&lock);
    if (error != NULL) failed = 1;
    done++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_connected(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)json;
    if (error != NULL) {
        say(stdout, "[view] connect: %s", error->message);
    } else {
        say(stdout, "[view] connected");
    }
    pthread_mutex_lock(&lock);
    if (error != NULL) failed = 1;
    done++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_sent(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)json;
    if (error != NULL) say(stdout, "[send] failed: %s", error->message);
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
    char *config = json_text(json_pack("{s:s, s:s}", "server_url", argv[1], "cache_dir", "chat-view-cache"));
    parley_client *client = NULL;
    int created = parley_client_create(&client, config);
    free(config);
    if (created != PARLEY_OK) {
        say(stderr, "create: %s", parley_last_error_message());
        return 1;
    }
    parley_client_connect(client, NULL, argv[2], argv[3], on_connected, "connect");
    wait_results(1);

    parley_message_collection_handler handler = PARLEY_MESSAGE_COLLECTION_HANDLER_INIT;
    handler.event = on_event;
    parley_message_collection *view = NULL;
    if (failed || parley_message_collection_create(&view, client, argv[4], PARLEY_STARTING_POINT_NEWEST,
                                                   "{\"previous_result_size\": 30}", &handler) != PARLEY_OK) {
        say(stderr, "collection: %s", parley_last_error_message());
        parley_client_destroy(client);
        return 1;
    }
    parley_message_collection_start(view, on_loaded, on_loaded, "start (cache, then server)");
    wait_results(3);  /* connect, cache result, server result */
    if (argc > 6) {
        char *params = json_text(json_pack("{s:s}", "message", argv[6]));
        parley_client_send_user_message(client, NULL, NULL, argv[4], params, on_sent, NULL);
        free(params);
    }
    struct timespec pause = {seconds, 0};
    nanosleep(&pause, NULL);
    int has_previous = 0;
    parley_message_collection_has_previous(view, &has_previous);
    say(stdout, "[view] %s; disposing the view", has_previous ? "older messages to load" : "no older messages");
    parley_message_collection_dispose(view);
    parley_client_destroy(client);
    return failed;
}
