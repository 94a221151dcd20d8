/* chat: connects to a Parley server as a user, optionally sends a message to a channel,
 * and prints connection changes and real-time events until the time is up.
 *
 *   chat SERVER_URL USER_ID SESSION_TOKEN CHANNEL_URL [MESSAGE] [SECONDS]
 *   chat http://127.0.0.1:8080 alice 3f9c... general "hello from C" 10
 *
 * Callbacks run on the client's callback thread (the default "thread" dispatch mode)
 * while this thread prints too: every line is built first, then written and flushed whole
 * under one lock (say), so that lines never mix. The cache lives in ./chat-cache. JSON is
 * read and written with jansson; events print as one readable line each, e.g.
 *
 *   [event] message received in general: dave: hello carol */
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
static int connected = 0;  /* 1 connected, -1 connect failed */
static int events = 0;

/* "sender: text (id N)" for a message object; the id only once the server gave one. */
static void describe_message(json_t *message, char *out, size_t size) {
    char text[84];
    const char *sender = json_string_value(json_object_get(json_object_get(message, "user"), "user_id"));
    json_int_t id = json_integer_value(json_object_get(message, "message_id"));
    shorten(json_string_value(json_object_get(message, "message")), 80, text);
    if (id > 0) {
        snprintf(out, size, "%s: %s (id %lld)", sender ? sender : "?", text, (long long)id);
    } else {
        snprintf(out, size, "%s: %s", sender ? sender : "?", text);
    }
}

/* ---- callbacks -------------------------------------------------------------------- */

static void on_connection(void *user_data, int event, const parley_error *error) {
    (void)user_data;
    if (error != NULL) {
        say(stdout, "[connection] %s (%s: %s)", parley_connection_event_name(event), parley_error_name(error->code),
            error->message);
    } else {
        say(stdout, "[connection] %s", parley_connection_event_name(event));
    }
}

/* One line per event: what happened, in which channel, and the message it carries
 * ("sender: text") or, for a channel, its unread count and last message. */
static void on_event(void *user_data, const char *category, const char *channel_url, const char *payload_json) {
    (void)user_data;
    char what[64], detail[256] = "";
    snprintf(what, sizeof what, "%s", category);
    for (char *c = what; *c != '\0'; c++) {
        if (*c == '_') *c = ' ';
    }
    json_t *payload = json_loads(payload_json, 0, NULL);
    /* A real-time event carries its message under "message"; a send or a changelog entry
     * is the message itself. */
    json_t *message = json_object_get(payload, "message");
    if (!json_is_object(message) && json_object_get(payload, "message_id") != NULL) message = payload;
    if (json_is_object(message)) {
        describe_message(message, detail, sizeof detail);
    } else if (json_object_get(payload, "unread_message_count") != NULL) {  /* a channel */
        char last[44] = "none yet";
        json_t *newest = json_object_get(payload, "last_message");
        if (json_is_object(newest)) shorten(json_string_value(json_object_get(newest, "message")), 40, last);
        snprintf(detail, sizeof detail, "unread %lld, last message: %s",
                 (long long)json_integer_value(json_object_get(payload, "unread_message_count")), last);
    }
    json_decref(payload);
    say(stdout, "[event] %s in %s%s%s", what, channel_url, detail[0] != '\0' ? ": " : "", detail);
    pthread_mutex_lock(&lock);
    events++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_connected(void *user_data, const parley_error *error, const char *user_json) {
    (void)user_data;
    if (error != NULL) {
        say(stderr, "connect failed: %s (%s)", error->message, parley_error_name(error->code));
    } else {
        json_t *user = json_loads(user_json, 0, NULL);
        say(stdout, "[connect] connected as %s (%s)", json_string_value(json_object_get(user, "user_id")),
            json_string_value(json_object_get(user, "nickname")));
        json_decref(user);
    }
    pthread_mutex_lock(&lock);
    connected = error != NULL ? -1 : 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_sent(void *user_data, const parley_error *error, const char *message_json) {
    (void)user_data;
    if (error != NULL) {
        say(stdout, "[send] failed: %s (%s, HTTP %d, server code %d)", error->message, parley_error_name(error->code),
            error->http_status, error->server_code);
        return;
    }
    char detail[256];
    json_t *message = json_loads(message_json, 0, NULL);
    describe_message(message, detail, sizeof detail);
    json_decref(message);
    say(stdout, "[send] delivered: %s", detail);
}

/* ---- main ----------------------------------------------------------------------- */

/* A JSON value as text (free it), the value released. */
static char *json_text(json_t *value) {
    char *text = json_dumps(value, JSON_COMPACT);
    json_decref(value);
    return text;
}

static int fail(const char *what) {
    say(stderr, "%s: %s", what, parley_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s SERVER_URL USER_ID SESSION_TOKEN CHANNEL_URL [MESSAGE] [SECONDS]\n", argv[0]);
        return 2;
    }
    const char *message = argc > 5 ? argv[5] : NULL;
    int seconds = argc > 6 ? atoi(argv[6]) : 5;

    char *config = json_text(json_pack("{s:s, s:s}", "server_url", argv[1], "cache_dir", "chat-cache"));
    parley_client *client = NULL;
    int created = parley_client_create(&client, config);
    free(config);
    if (created != PARLEY_OK) return fail("parley_client_create");
    parley_client_set_connection_handler(client, on_connection, NULL);
    parley_client_set_event_handler(client, on_event, NULL);
    if (parley_client_connect(client, NULL, argv[2], argv[3], on_connected, NULL) != PARLEY_OK) {
        return fail("parley_client_connect");
    }

    pthread_mutex_lock(&lock);
    while (connected == 0) pthread_cond_wait(&changed, &lock);
    int ok = connected == 1;
    pthread_mutex_unlock(&lock);

    if (ok && message != NULL) {
        char *params = json_text(json_pack("{s:s}", "message", message));
        char *pending = NULL;
        int sent = parley_client_send_user_message(client, &pending, NULL, argv[4], params, on_sent, NULL);
        free(params);
        if (sent == PARLEY_OK) {
            char detail[256];
            json_t *copy = json_loads(pending, 0, NULL);
            describe_message(copy, detail, sizeof detail);
            say(stdout, "[send] pending (shown at once, not yet on the server): %s", detail);
            json_decref(copy);
            parley_free(pending);
        } else {
            fail("parley_client_send_user_message");
        }
    }

    if (ok) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += seconds;
        pthread_mutex_lock(&lock);
        while (pthread_cond_timedwait(&changed, &lock, &deadline) == 0) {
        }
        pthread_mutex_unlock(&lock);

        char *cached = NULL;
        if (parley_client_cached_messages(client, &cached, argv[4], -1, 5) == PARLEY_OK) {
            json_t *messages = json_loads(cached, 0, NULL);
            say(stdout, "[cache] the newest %zu messages of %s in the cache:", json_array_size(messages), argv[4]);
            for (size_t index = 0; index < json_array_size(messages); index++) {
                char detail[256];
                describe_message(json_array_get(messages, index), detail, sizeof detail);
                say(stdout, "[cache]   %s", detail);
            }
            json_decref(messages);
            parley_free(cached);
        }
    }
    /* Destroy runs what is still queued; no callback runs after it returns. */
    parley_client_destroy(client);
    return ok ? 0 : 1;
}
