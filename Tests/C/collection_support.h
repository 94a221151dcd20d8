/* Support for the collection tests: a thread that keeps the server posting messages into
 * one channel (so events arrive while views are disposed), and the server's own listing of
 * a channel as the truth to compare with. Header-only (static inline functions), after
 * server_support.h. */
#ifndef PARLEY_TEST_COLLECTION_SUPPORT_H
#define PARLEY_TEST_COLLECTION_SUPPORT_H
#include <jansson.h>
#include <stdatomic.h>

static inline void sleep_ms(long ms) {
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

typedef struct {
    parley_client *admin;
    const char *messages_path; /* e.g. "/v3/group_channels/room/messages" */
    atomic_int stop;
} chatter_args;

static inline void chatter_sent(void *user_data, const parley_error *error, const char *json) {
    (void)error; (void)json;
    atomic_int *in_flight = user_data;
    atomic_fetch_sub(in_flight, 1);
}

/* Posts bob's messages, at most 4 in flight, until args->stop; PARLEY_CHATTER_INTERVAL_MS
 * (default 2) between posts. The valgrind runs post slower: a client under valgrind applies
 * messages slower than the server takes them, and the backlog only makes the run wait. */
static inline void *chatter(void *argument) {
    chatter_args *args = argument;
    static atomic_int in_flight = 0;
    const char *interval_text = getenv("PARLEY_CHATTER_INTERVAL_MS");
    long interval = interval_text ? atol(interval_text) : 2;
    while (!atomic_load(&args->stop)) {
        if (atomic_load(&in_flight) < 4) {
            atomic_fetch_add(&in_flight, 1);
            if (parley_client_request(args->admin, NULL, "POST", args->messages_path,
                                      "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"busy\"}",
                                      chatter_sent, &in_flight) != PARLEY_OK) {
                atomic_fetch_sub(&in_flight, 1);
            }
        }
        sleep_ms(interval > 0 ? interval : 2);
    }
    return NULL;
}

/* Appends the message ids of a JSON array of messages to *out (malloc'd), each followed by a comma. */
static inline void append_message_ids(char **out, const char *json_text) {
    json_error_t error;
    json_t *array = json_loads(json_text ? json_text : "[]", 0, &error);
    size_t index;
    json_t *message;
    json_array_foreach(array, index, message) {
        char item[32];
        snprintf(item, sizeof item, "%lld,", (long long)json_integer_value(json_object_get(message, "message_id")));
        *out = realloc(*out, strlen(*out) + strlen(item) + 1);
        strcat(*out, item);
    }
    json_decref(array);
}

/* The server's listing of the room for alice (with `extra_query`, "" or "&name=value..."),
 * walked whole, as ids (malloc'd). */
static inline char *server_listing(parley_client *admin, result_slot *slot, const char *extra_query) {
    char path[512], *all = calloc(1, 1);
    snprintf(path, sizeof path, "/v3/group_channels/room/messages?message_ts=0&prev_limit=0&next_limit=200&include=true&user_id=alice%s",
             extra_query);
    for (int pages = 0; pages < 100; pages++) {
        if (!admin_call(admin, "GET", path, NULL, slot)) break;
        json_error_t error;
        json_t *answer = json_loads(slot->json, 0, &error);
        json_t *messages = json_object_get(answer, "messages");
        char *text = json_dumps(messages, 0);
        append_message_ids(&all, text);
        json_t *last = json_array_get(messages, json_array_size(messages) - 1);
        int more = json_is_true(json_object_get(answer, "has_next")) && last != NULL;
        if (more) {
            snprintf(path, sizeof path,
                     "/v3/group_channels/room/messages?message_ts=%lld&message_id=%lld&prev_limit=0&next_limit=200&include=false&user_id=alice%s",
                     (long long)json_integer_value(json_object_get(last, "created_at")),
                     (long long)json_integer_value(json_object_get(last, "message_id")), extra_query);
        }
        free(text);
        json_decref(answer);
        if (!more) break;
    }
    return all;
}

#endif
