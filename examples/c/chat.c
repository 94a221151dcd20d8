/* chat: connects to a Parley server as a user, optionally sends a message to a channel,
 * and prints connection changes and real-time events until the time is up.
 *
 *   chat SERVER_URL USER_ID SESSION_TOKEN CHANNEL_URL [MESSAGE] [SECONDS]
 *   chat http://127.0.0.1:8080 alice 3f9c... general "hello from C" 10
 *
 * Callbacks run on the client's callback thread (the default "thread" dispatch mode);
 * this thread only waits. The cache lives in ./chat-cache. JSON is written with jansson. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <parley.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int connected = 0;  /* 1 connected, -1 connect failed */
static int events = 0;

static const char *connection_event_name(int event) {
    switch (event) {
    case PARLEY_CONNECTION_CONNECTING: return "connecting";
    case PARLEY_CONNECTION_CONNECTED: return "connected";
    case PARLEY_CONNECTION_RECONNECT_STARTED: return "reconnect started";
    case PARLEY_CONNECTION_RECONNECT_SUCCEEDED: return "reconnect succeeded";
    case PARLEY_CONNECTION_RECONNECT_FAILED: return "reconnect failed";
    case PARLEY_CONNECTION_DISCONNECTED: return "disconnected";
    case PARLEY_CONNECTION_SESSION_TOKEN_REQUIRED: return "session token required";
    default: return "unknown";
    }
}

static void on_connection(void *user_data, int event, const parley_error *error) {
    (void)user_data;
    printf("[connection] %s", connection_event_name(event));
    if (error != NULL) printf(" (%s: %s)", parley_error_name(error->code), error->message);
    printf("\n");
    fflush(stdout);
}

static void on_event(void *user_data, const char *category, const char *channel_url, const char *payload_json) {
    (void)user_data;
    printf("[event] %s in '%s': %.200s\n", category, channel_url, payload_json);
    fflush(stdout);
    pthread_mutex_lock(&lock);
    events++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_connected(void *user_data, const parley_error *error, const char *user_json) {
    (void)user_data;
    pthread_mutex_lock(&lock);
    if (error != NULL) {
        fprintf(stderr, "connect failed: %s (%s)\n", error->message, parley_error_name(error->code));
        connected = -1;
    } else {
        printf("[connect] as %s\n", user_json);
        connected = 1;
    }
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void on_sent(void *user_data, const parley_error *error, const char *message_json) {
    (void)user_data;
    if (error != NULL) {
        printf("[send] failed: %s (%s, HTTP %d, server code %d)\n", error->message, parley_error_name(error->code),
               error->http_status, error->server_code);
    } else {
        printf("[send] delivered: %.200s\n", message_json);
    }
    fflush(stdout);
}

/* A JSON value as text (free it), the value released. */
static char *json_text(json_t *value) {
    char *text = json_dumps(value, JSON_COMPACT);
    json_decref(value);
    return text;
}

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, parley_last_error_message());
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
            printf("[send] pending: %s\n", pending);
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
            printf("[cache] newest messages of '%s': %.300s\n", argv[4], cached);
            parley_free(cached);
        }
    }
    /* Destroy runs what is still queued; no callback runs after it returns. */
    parley_client_destroy(client);
    return ok ? 0 : 1;
}
