/* Stateful queries (parley/query.h) and keyed handlers (parley/session.h) against the real
 * parley-server: walks compared id by id with the server's own listings, handlers in order,
 * removal inside a callback, and misuse of the handles. */
#include "server_support.h"
#include <jansson.h>

/* Appends the ids (`key` of each item, or of item.user with a "user." prefix) of a JSON array. */
static void append_ids(const char *array_json, const char *key, char *out, size_t size) {
    json_t *array = json_loads(array_json, 0, NULL);
    CHECK(json_is_array(array));
    size_t index;
    json_t *item;
    json_array_foreach(array, index, item) {
        json_t *value = strncmp(key, "user.", 5) == 0 ? json_object_get(json_object_get(item, "user"), key + 5)
                                                      : json_object_get(item, key);
        char text[128];
        if (json_is_integer(value)) snprintf(text, sizeof text, "%lld,", (long long)json_integer_value(value));
        else snprintf(text, sizeof text, "%s,", json_is_string(value) ? json_string_value(value) : "?");
        strncat(out, text, size - strlen(out) - 1);
    }
    json_decref(array);
}

/* The ids of `member` (an array) of an operation's answer. */
static void answer_ids(parley_client *client, const char *operation, const char *params, const char *member, const char *key,
                       char *out, size_t size) {
    result_slot slot = {0};
    slot_init(&slot);
    out[0] = '\0';
    CHECK_STATUS(PARLEY_OK, parley_client_perform(client, NULL, operation, params, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0);
    json_t *answer = json_loads(slot.json, 0, NULL);
    char *array = json_dumps(json_object_get(answer, member), JSON_COMPACT);
    if (array != NULL) append_ids(array, key, out, size);
    free(array);
    json_decref(answer);
    slot_init(&slot);
    free(slot.json);
}

/* Walks a query to its end; the ids of every page in order, and the number of pages. */
static int walk(parley_query *query, const char *key, char *out, size_t size) {
    out[0] = '\0';
    int pages = 0, has_next = 1;
    result_slot slot = {0};
    while (has_next && pages < 100) {
        slot_init(&slot);
        CHECK_STATUS(PARLEY_OK, parley_query_load_next_page(query, NULL, on_result, &slot));
        CHECK(wait_slot(&slot) && slot.code == 0);
        append_ids(slot.json, key, out, size);
        pages++;
        CHECK_STATUS(PARLEY_OK, parley_query_has_next(query, &has_next));
    }
    slot_init(&slot);
    free(slot.json);
    return pages;
}

/* Reverses a comma-terminated id list ("1,2,3," -> "3,2,1,"). */
static void reverse_ids(const char *in, char *out, size_t size) {
    size_t used = 0;
    const char *end = in + strlen(in);
    while (end > in) {
        const char *start = end - 1;
        while (start > in && start[-1] != ',') start--;
        size_t length = (size_t)(end - start);
        if (used + length >= size) break;
        memcpy(out + used, start, length);
        used += length;
        end = start;
    }
    out[used] = '\0';
}

/* ---- keyed handlers ---- */

static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;
static char heard[2048];
static parley_client *handler_client;

static void note(const char *name, const char *payload) {
    const char *message = strstr(payload, "\"message\":\"");
    char text[32] = "?";
    if (message != NULL) sscanf(message + 11, "%31[^\"]", text);
    pthread_mutex_lock(&log_mutex);
    strncat(heard, name, sizeof heard - strlen(heard) - 1);
    strncat(heard, ":", sizeof heard - strlen(heard) - 1);
    strncat(heard, text, sizeof heard - strlen(heard) - 1);
    strncat(heard, " ", sizeof heard - strlen(heard) - 1);
    pthread_mutex_unlock(&log_mutex);
}

static void on_event_named(void *user_data, const char *category, const char *channel_url, const char *payload) {
    (void)channel_url;
    if (strcmp(category, "message_received") != 0) return;
    const char *name = user_data;
    note(name, payload);
    /* "a" removes "b" (after it in the order) at m2; "c" removes itself at m3. */
    if (strcmp(name, "a") == 0 && strstr(payload, "\"message\":\"m2\"") != NULL)
        CHECK_STATUS(PARLEY_OK, parley_client_remove_event_handler(handler_client, "b"));
    if (strcmp(name, "c") == 0 && strstr(payload, "\"message\":\"m3\"") != NULL)
        CHECK_STATUS(PARLEY_OK, parley_client_remove_event_handler(handler_client, "c"));
}

static int connection_log[16];
static int connection_count = 0;

static void on_connection_named(void *user_data, int event, const parley_error *error) {
    (void)error;
    pthread_mutex_lock(&log_mutex);
    if (connection_count < 16) connection_log[connection_count++] = event * 10 + (int)(intptr_t)user_data;
    pthread_mutex_unlock(&log_mutex);
}

static void hold_callbacks(void *user_data) {
    (void)user_data;
    struct timespec pause = {0, 300 * 1000000L};
    nanosleep(&pause, NULL);
}

static int64_t now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

int main(void) {
    test_server server;
    if (test_server_start(&server, "query") != 0) return 1;
    result_slot slot = {0};
    char token[256], body[512];
    const char *users[] = {"alice", "bob", "carol", "dave", "erin", "frank"};
    for (size_t index = 0; index < sizeof users / sizeof users[0]; index++) {
        snprintf(body, sizeof body, "{\"user_id\": \"%s\", \"nickname\": \"%s\"}", users[index], users[index]);
        CHECK(admin_call(server.admin, "POST", "/v3/users", body, &slot));
    }
    CHECK(admin_call(server.admin, "POST", "/v3/users/alice/token", "{}", &slot));
    CHECK(json_field_text(slot.json, "token", token, sizeof token));
    CHECK(admin_call(server.admin, "POST", "/v3/group_channels",
                     "{\"user_ids\": [\"alice\", \"bob\", \"carol\", \"dave\", \"erin\", \"frank\"], \"channel_url\": \"q-room\", "
                     "\"operator_ids\": [\"alice\"]}", &slot));
    /* 17 messages in groups sharing a millisecond, so pages of 3 end inside groups. */
    int64_t base = now_ms() - 60000;
    int sizes[] = {4, 1, 3, 5, 2, 2}, count = 0;
    for (int group = 0; group < 6; group++) {
        for (int index = 0; index < sizes[group]; index++) {
            snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"old%d\", \"created_at\": %lld}",
                     count++, (long long)(base + group));
            CHECK(admin_call(server.admin, "POST", "/v3/group_channels/q-room/messages", body, &slot));
        }
    }

    parley_client *client = NULL;
    char config[512];
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_mode\": \"memory\"}", server.url);
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    handler_client = client;

    /* Keyed handlers: added before connecting; the set_ handler is the one with id "". */
    CHECK_STATUS(PARLEY_OK, parley_client_add_event_handler(client, "a", on_event_named, "a"));
    CHECK_STATUS(PARLEY_OK, parley_client_add_event_handler(client, "b", on_event_named, "b"));
    CHECK_STATUS(PARLEY_OK, parley_client_set_event_handler(client, on_event_named, "set"));
    CHECK_STATUS(PARLEY_OK, parley_client_add_event_handler(client, "c", on_event_named, "c"));
    CHECK_STATUS(PARLEY_OK, parley_client_add_connection_handler(client, "x", on_connection_named, (void *)(intptr_t)1));
    CHECK_STATUS(PARLEY_OK, parley_client_add_connection_handler(client, "y", on_connection_named, (void *)(intptr_t)2));
    /* Replacing keeps the place: x (now 3) still comes before y. */
    CHECK_STATUS(PARLEY_OK, parley_client_add_connection_handler(client, "x", on_connection_named, (void *)(intptr_t)3));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_add_event_handler(client, "", on_event_named, NULL));
    CHECK_ERROR_MENTIONS("non-empty");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_add_event_handler(client, NULL, on_event_named, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_add_event_handler(client, "d", NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_add_connection_handler(client, "z", NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_remove_connection_handler(client, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_add_event_handler(NULL, "a", on_event_named, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_remove_event_handler(NULL, "a"));
    CHECK_STATUS(PARLEY_OK, parley_client_remove_event_handler(client, "never-added"));

    /* A query before connecting: created, but its load completes with invalid state. */
    parley_query *query = NULL;
    CHECK_STATUS(PARLEY_OK, parley_query_create(&query, client, PARLEY_QUERY_OPERATORS, "{\"channel_url\": \"q-room\"}"));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_query_load_next_page(query, NULL, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == PARLEY_E_INVALID_STATE);
    CHECK_STATUS(PARLEY_OK, parley_query_dispose(query));

    uint64_t operation = 0;
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_connect(client, &operation, "alice", token, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0);
    CHECK(wait_stream_open(client));
    for (int index = 1; index <= 4; index++) {
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"m%d\"}", index);
        CHECK(admin_call(server.admin, "POST", "/v3/group_channels/q-room/messages", body, &slot));
    }
    for (int waited = 0; waited < 20000 && strstr(heard, "set:m4") == NULL; waited += 10) {
        struct timespec pause = {0, 10 * 1000000L};
        nanosleep(&pause, NULL);
    }
    hold_callbacks(NULL);
    pthread_mutex_lock(&log_mutex);
    CHECK(strcmp(heard, "a:m1 b:m1 set:m1 c:m1 a:m2 set:m2 c:m2 a:m3 set:m3 c:m3 a:m4 set:m4 ") == 0);
    if (strcmp(heard, "a:m1 b:m1 set:m1 c:m1 a:m2 set:m2 c:m2 a:m3 set:m3 c:m3 a:m4 set:m4 ") != 0) fprintf(stderr, "heard: %s\n", heard);
    CHECK(connection_count >= 4);
    CHECK(connection_log[0] == PARLEY_CONNECTION_CONNECTING * 10 + 3 && connection_log[1] == PARLEY_CONNECTION_CONNECTING * 10 + 2);
    CHECK(connection_log[2] == PARLEY_CONNECTION_CONNECTED * 10 + 3 && connection_log[3] == PARLEY_CONNECTION_CONNECTED * 10 + 2);
    pthread_mutex_unlock(&log_mutex);

    /* Previous messages, pages of 3 from the newest: together exactly the server's listing. */
    char truth[4096], walked[4096], reversed[4096];
    answer_ids(client, "list_messages", "{\"channel_url\": \"q-room\", \"prev_limit\": 200, \"include\": true}", "messages",
               "message_id", truth, sizeof truth);
    CHECK_STATUS(PARLEY_OK, parley_query_create(&query, client, PARLEY_QUERY_PREVIOUS_MESSAGES,
                                                "{\"channel_url\": \"q-room\", \"limit\": 3, \"reverse\": true}"));
    int has_next = 0;
    CHECK_STATUS(PARLEY_OK, parley_query_has_next(query, &has_next));
    CHECK(has_next == 1);
    CHECK(walk(query, "message_id", walked, sizeof walked) == 7);  /* 21 messages */
    reverse_ids(truth, reversed, sizeof reversed);
    CHECK(strcmp(walked, reversed) == 0);
    if (strcmp(walked, reversed) != 0) fprintf(stderr, "walked %s\nlisting %s\n", walked, reversed);
    /* Past the end: an empty page. */
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_query_load_next_page(query, NULL, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0 && strcmp(slot.json, "[]") == 0);
    CHECK_STATUS(PARLEY_OK, parley_query_dispose(query));

    /* Members, pages of 2: the server's full listing. */
    answer_ids(client, "list_members", "{\"channel_url\": \"q-room\", \"limit\": 100}", "members", "user_id", truth, sizeof truth);
    CHECK_STATUS(PARLEY_OK, parley_query_create(&query, client, PARLEY_QUERY_MEMBERS, "{\"channel_url\": \"q-room\", \"limit\": 2}"));
    CHECK(walk(query, "user_id", walked, sizeof walked) == 3);
    CHECK(strcmp(walked, truth) == 0 && strlen(truth) > 0);

    /* One load at a time: hold the callback context so the first cannot complete yet. */
    parley_query *again = NULL;
    CHECK_STATUS(PARLEY_OK, parley_query_create(&again, client, PARLEY_QUERY_MEMBERS, "{\"channel_url\": \"q-room\", \"limit\": 2}"));
    CHECK_STATUS(PARLEY_OK, parley_client_post(client, hold_callbacks, NULL));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_query_load_next_page(again, NULL, on_result, &slot));
    int loading = 0;
    CHECK_STATUS(PARLEY_OK, parley_query_is_loading(again, &loading));
    CHECK(loading == 1);
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_query_load_next_page(again, NULL, on_result, NULL));
    CHECK_ERROR_MENTIONS("query in progress");
    CHECK(wait_slot(&slot) && slot.code == 0);
    CHECK_STATUS(PARLEY_OK, parley_query_is_loading(again, &loading));
    CHECK(loading == 0);
    /* Dispose with a load in flight: it completes once, cancelled. */
    CHECK_STATUS(PARLEY_OK, parley_client_post(client, hold_callbacks, NULL));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_query_load_next_page(again, NULL, on_result, &slot));
    CHECK_STATUS(PARLEY_OK, parley_query_dispose(again));
    CHECK(wait_slot(&slot) && slot.code == PARLEY_E_CANCELLED);

    /* Misuse: NULL, wrong kind of handle, use after dispose, bad kind and options. */
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_query_has_next(NULL, &has_next));
    CHECK_ERROR_MENTIONS("query handle is NULL");
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_query_has_next((parley_query *)client, &has_next));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_query_load_next_page((parley_query *)client, NULL, on_result, &slot));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_add_event_handler((parley_client *)query, "a", on_event_named, NULL));
    CHECK_STATUS(PARLEY_OK, parley_query_dispose(query));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_query_load_next_page(query, NULL, on_result, &slot));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_query_is_loading(query, &loading));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_query_dispose(query));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_query_dispose(NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_query_create(NULL, client, PARLEY_QUERY_MEMBERS, "{\"channel_url\": \"q\"}"));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_query_create(&query, NULL, PARLEY_QUERY_MEMBERS, "{\"channel_url\": \"q\"}"));
    CHECK(query == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_query_create(&query, client, 99, NULL));
    CHECK_ERROR_MENTIONS("kind 99");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_query_create(&query, client, PARLEY_QUERY_MEMBERS, NULL));
    CHECK_ERROR_MENTIONS("channel_url");
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_query_create(&query, client, PARLEY_QUERY_MEMBERS, "{"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT,
                 parley_query_create(&query, client, PARLEY_QUERY_PREVIOUS_MESSAGES, "{\"channel_url\": \"q\", \"limit\": 0}"));
    CHECK_ERROR_MENTIONS("options.limit");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT,
                 parley_query_create(&query, client, PARLEY_QUERY_GROUP_CHANNELS, "{\"colour\": \"red\"}"));
    CHECK_ERROR_MENTIONS("colour");
    CHECK_STATUS(PARLEY_OK, parley_query_create(&query, client, PARLEY_QUERY_GROUP_CHANNELS, ""));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_query_load_next_page(query, NULL, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_query_has_next(query, NULL));

    /* A query outlives its client's destroy: loads are refused, dispose still releases it. */
    parley_client_destroy(client);
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_query_load_next_page(query, NULL, on_result, &slot));
    CHECK_STATUS(PARLEY_OK, parley_query_dispose(query));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_add_event_handler(client, "a", on_event_named, NULL));

    slot_init(&slot);
    free(slot.json);
    test_server_stop(&server);
    return check_report("test_query");
}
