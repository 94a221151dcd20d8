/* The message search through the C ABI against the real parley-server (PARLEY_SERVER_BIN):
 * a search pages through the cached matches newest first and equals the server's own
 * listing filtered by the word, a new matching message is added, an edit that stops
 * matching deletes it, relevance order ranks windows of the newest matches one after the
 * other, refused arguments name themselves, and dispose races incoming
 * events (each round's user data is freed right after dispose: a late callback is a use
 * after free that valgrind reports, and is counted here). */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"
#include "collection_support.h"
#include <jansson.h>
#include <stdatomic.h>

/* What the change callbacks reported: a log like "A1,D1," (added / updated / deleted, count). */
typedef struct {
    pthread_mutex_t mutex;
    char log[4096];
} change_record;

static void record_change(change_record *record, char kind, const char *results_json) {
    json_error_t error;
    json_t *array = json_loads(results_json, 0, &error);
    char item[32];
    snprintf(item, sizeof item, "%c%zu,", kind, array ? json_array_size(array) : 0);
    pthread_mutex_lock(&record->mutex);
    if (strlen(record->log) + strlen(item) < sizeof record->log) strcat(record->log, item);
    pthread_mutex_unlock(&record->mutex);
    json_decref(array);
}

static void on_added(void *user_data, const char *json) { record_change(user_data, 'A', json); }
static void on_updated(void *user_data, const char *json) { record_change(user_data, 'U', json); }
static void on_deleted(void *user_data, const char *json) { record_change(user_data, 'D', json); }

static int log_is(change_record *record, const char *expected) {
    for (int waited = 0; waited < 500; waited++) {
        pthread_mutex_lock(&record->mutex);
        int same = strcmp(record->log, expected) == 0;
        pthread_mutex_unlock(&record->mutex);
        if (same) return 1;
        sleep_ms(20);
    }
    pthread_mutex_lock(&record->mutex);
    fprintf(stderr, "changes: %s (expected %s)\n", record->log, expected);
    pthread_mutex_unlock(&record->mutex);
    return 0;
}

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int done, code;
    char *ids;
} load_slot;

static void load_init(load_slot *slot) {
    memset(slot, 0, sizeof *slot);
    pthread_mutex_init(&slot->mutex, NULL);
    pthread_cond_init(&slot->cond, NULL);
    slot->ids = calloc(1, 1);
}

/* The results' message ids, each followed by a comma. */
static void append_result_ids(char **out, const char *results_json) {
    json_error_t error;
    json_t *array = json_loads(results_json ? results_json : "[]", 0, &error);
    size_t index;
    json_t *result;
    json_array_foreach(array, index, result) {
        char item[32];
        snprintf(item, sizeof item, "%lld,",
                 (long long)json_integer_value(json_object_get(json_object_get(result, "message"), "message_id")));
        *out = realloc(*out, strlen(*out) + strlen(item) + 1);
        strcat(*out, item);
    }
    json_decref(array);
}

static void on_loaded(void *user_data, const parley_error *error, const char *results_json) {
    load_slot *slot = user_data;
    pthread_mutex_lock(&slot->mutex);
    slot->code = error ? error->code : 0;
    if (!error) append_result_ids(&slot->ids, results_json);
    slot->done = 1;
    pthread_cond_broadcast(&slot->cond);
    pthread_mutex_unlock(&slot->mutex);
}

static int wait_load(load_slot *slot) {
    struct timespec deadline;
    deadline_in(&deadline, 20000);
    pthread_mutex_lock(&slot->mutex);
    while (!slot->done && pthread_cond_timedwait(&slot->cond, &slot->mutex, &deadline) == 0) {}
    int done = slot->done;
    pthread_mutex_unlock(&slot->mutex);
    return done;
}

/* The server's listing of the room for alice, newest first, keeping messages whose text
 * starts with `prefix` (ids, each followed by a comma; malloc'd). */
static char *listed_matches(parley_client *admin, result_slot *slot, const char *prefix) {
    char *all = calloc(1, 1);
    if (!admin_call(admin, "GET", "/v3/group_channels/room/messages?message_ts=9999999999999&prev_limit=200&next_limit=0&user_id=alice",
                    NULL, slot)) {
        return all;
    }
    json_error_t error;
    json_t *answer = json_loads(slot->json, 0, &error);
    json_t *messages = json_object_get(answer, "messages");
    for (size_t index = json_array_size(messages); index-- > 0;) {
        json_t *message = json_array_get(messages, index);
        const char *text = json_string_value(json_object_get(message, "message"));
        if (text == NULL || strncmp(text, prefix, strlen(prefix)) != 0) continue;
        char item[32];
        snprintf(item, sizeof item, "%lld,", (long long)json_integer_value(json_object_get(message, "message_id")));
        all = realloc(all, strlen(all) + strlen(item) + 1);
        strcat(all, item);
    }
    json_decref(answer);
    return all;
}

typedef struct {
    atomic_int disposed;
} round_state;

static atomic_int late_callbacks = 0;

static void on_any(void *user_data, const char *json) {
    (void)json;
    round_state *state = user_data;
    if (atomic_load(&state->disposed)) atomic_fetch_add(&late_callbacks, 1);
}

static void on_load_ignored(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)error; (void)json;
}

int main(void) {
    test_server server;
    if (test_server_start(&server, "search") != 0) return 1;
    parley_client *admin = server.admin;
    char config[1024];
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    char token[256] = "";
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"alice\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"bob\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users/alice/token", "{}", &slot));
    CHECK(json_field_text(slot.json, "token", token, sizeof token));
    CHECK(admin_call(admin, "POST", "/v3/group_channels", "{\"user_ids\": [\"alice\", \"bob\"], \"channel_url\": \"room\"}", &slot));

    parley_client *client = NULL;
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\"}", server.url, server.directory);
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    parley_message_search *search = NULL;
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_message_search_create(&search, client, "{\"query\": \"x\"}", NULL));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_connect(client, NULL, "alice", token, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0);
    CHECK(wait_stream_open(client));

    /* Handler versions and refused arguments. */
    parley_message_search_handler handler = PARLEY_MESSAGE_SEARCH_HANDLER_INIT;
    parley_message_search_handler initialized;
    CHECK_STATUS(PARLEY_OK, parley_message_search_handler_init(&initialized, PARLEY_MESSAGE_SEARCH_HANDLER_VERSION));
    CHECK(initialized.version == handler.version && initialized.added == NULL && initialized.user_data == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_handler_init(&initialized, 7));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_handler_init(NULL, PARLEY_MESSAGE_SEARCH_HANDLER_VERSION));
    initialized.version = 7;
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_create(&search, client, "{\"query\": \"x\"}", &initialized));
    CHECK(search == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_create(&search, client, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_create(NULL, client, "{\"query\": \"x\"}", NULL));
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_message_search_create(&search, client, "{", NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_search_create(&search, NULL, "{\"query\": \"x\"}", NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_create(&search, client, "{}", NULL));
    CHECK(strstr(parley_last_error_message(), "query") != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_create(&search, client, "{\"query\": \"x\", \"limit\": 0}", NULL));
    CHECK(strstr(parley_last_error_message(), "limit") != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_create(&search, client, "{\"query\": \"x\", \"colour\": 1}", NULL));
    CHECK(strstr(parley_last_error_message(), "colour") != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT,
                 parley_message_search_create(&search, client, "{\"query\": \"x AND (\", \"advanced_query\": true}", NULL));
    CHECK(strstr(parley_last_error_message(), "search query") != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_search_load_more(NULL, NULL, NULL));
    int has_more = 0;
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_search_has_more(NULL, &has_more));

    /* Messages arrive while alice is connected: the cache holds them. */
    for (int index = 0; index < 40; index++) {
        char body[256];
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"%s %d\"}",
                 index % 3 == 0 ? "needle" : "hay", index);
        CHECK(admin_call(admin, "POST", "/v3/group_channels/room/messages", body, &slot));
    }
    char *truth = listed_matches(admin, &slot, "needle");
    change_record record;
    memset(&record, 0, sizeof record);
    pthread_mutex_init(&record.mutex, NULL);
    handler.added = on_added;
    handler.updated = on_updated;
    handler.deleted = on_deleted;
    handler.user_data = &record;
    CHECK_STATUS(PARLEY_OK, parley_message_search_create(&search, client, "{\"query\": \"NEEDL\", \"limit\": 4}", &handler));
    /* Page through everything: the pages in order equal the server's listing of the matches. */
    char *paged = calloc(1, 1);
    char *results_json = NULL;
    for (int waited = 0; waited < 500; waited++) {
        /* The last of the 40 messages may still be on its way into the cache. */
        load_slot probe;
        parley_message_search *counter = NULL;
        CHECK_STATUS(PARLEY_OK, parley_message_search_create(&counter, client, "{\"query\": \"needle\", \"limit\": 100}", NULL));
        load_init(&probe);
        CHECK_STATUS(PARLEY_OK, parley_message_search_load_more(counter, on_loaded, &probe));
        CHECK(wait_load(&probe));
        int complete = strcmp(probe.ids, truth) == 0;
        free(probe.ids);
        CHECK_STATUS(PARLEY_OK, parley_message_search_dispose(counter));
        if (complete) break;
        sleep_ms(20);
    }
    int pages = 0;
    do {
        load_slot loaded;
        load_init(&loaded);
        CHECK_STATUS(PARLEY_OK, parley_message_search_load_more(search, on_loaded, &loaded));
        CHECK(wait_load(&loaded) && loaded.code == 0);
        paged = realloc(paged, strlen(paged) + strlen(loaded.ids) + 1);
        strcat(paged, loaded.ids);
        free(loaded.ids);
        CHECK_STATUS(PARLEY_OK, parley_message_search_has_more(search, &has_more));
        pages++;
    } while (has_more && pages < 20);
    if (strcmp(paged, truth) != 0) fprintf(stderr, "paged  %s\nserver %s\n", paged, truth);
    CHECK(strcmp(paged, truth) == 0 && pages == 4);
    CHECK_STATUS(PARLEY_OK, parley_message_search_results(search, &results_json));
    char *shown = calloc(1, 1);
    append_result_ids(&shown, results_json);
    CHECK(strcmp(shown, truth) == 0);
    CHECK(strstr(results_json, "\"snippet\":\"<b>needle</b> 39\"") != NULL && strstr(results_json, "\"origin\":\"cache\"") != NULL);
    parley_free(results_json);
    int64_t ranked_matches = -1;
    int older = -1;
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_message_search_load_older(search, on_load_ignored, NULL));
    CHECK_STATUS(PARLEY_OK, parley_message_search_relevance_window(search, &ranked_matches, &older));
    CHECK(ranked_matches == 0 && older == 0);

    /* Relevance order ranks windows of the newest matches: 14 needles (one each, so ties,
     * newest first) in windows of 5, 5 and 4; the pages in order are the listing again. */
    parley_message_search *ranked = NULL;
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_create(
                     &ranked, client, "{\"query\": \"needle\", \"order\": \"relevance\", \"relevance_window\": 0}", NULL));
    CHECK(strstr(parley_last_error_message(), "relevance_window") != NULL);
    CHECK_STATUS(PARLEY_OK, parley_message_search_create(
                     &ranked, client, "{\"query\": \"needle\", \"order\": \"relevance\", \"limit\": 10, \"relevance_window\": 5}", NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_search_relevance_window(ranked, NULL, &older));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_search_relevance_window(NULL, &ranked_matches, &older));
    char *windows = calloc(1, 1);
    const int64_t window_sizes[] = {5, 5, 4, 4};
    for (int window = 0; window < 4; window++) {
        load_slot loaded;
        load_init(&loaded);
        if (window == 0) CHECK_STATUS(PARLEY_OK, parley_message_search_load_more(ranked, on_loaded, &loaded));
        else CHECK_STATUS(PARLEY_OK, parley_message_search_load_older(ranked, on_loaded, &loaded));
        CHECK(wait_load(&loaded) && loaded.code == 0);
        windows = realloc(windows, strlen(windows) + strlen(loaded.ids) + 1);
        strcat(windows, loaded.ids);
        free(loaded.ids);
        CHECK_STATUS(PARLEY_OK, parley_message_search_relevance_window(ranked, &ranked_matches, &older));
        CHECK(ranked_matches == window_sizes[window] && older == (window < 2));
        CHECK_STATUS(PARLEY_OK, parley_message_search_has_more(ranked, &has_more));
        CHECK(has_more == 0);
    }
    if (strcmp(windows, truth) != 0) fprintf(stderr, "windows %s\nserver  %s\n", windows, truth);
    CHECK(strcmp(windows, truth) == 0);
    free(windows);
    CHECK_STATUS(PARLEY_OK, parley_message_search_dispose(ranked));
    free(shown); free(paged); free(truth);
    CHECK(log_is(&record, ""));

    /* Live: a new match is added; an edit that no longer matches deletes it. */
    CHECK(admin_call(admin, "POST", "/v3/group_channels/room/messages",
                     "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"needles everywhere\"}", &slot));
    char message_id[32] = "";
    json_error_t error;
    json_t *sent = json_loads(slot.json, 0, &error);
    snprintf(message_id, sizeof message_id, "%lld", (long long)json_integer_value(json_object_get(sent, "message_id")));
    json_decref(sent);
    CHECK(log_is(&record, "A1,"));
    char path[256];
    snprintf(path, sizeof path, "/v3/group_channels/room/messages/%s", message_id);
    CHECK(admin_call(admin, "PUT", path, "{\"message_type\": \"MESG\", \"message\": \"needle, edited\"}", &slot));
    CHECK(log_is(&record, "A1,U1,"));
    CHECK(admin_call(admin, "PUT", path, "{\"message_type\": \"MESG\", \"message\": \"just hay\"}", &slot));
    CHECK(log_is(&record, "A1,U1,D1,"));

    CHECK_STATUS(PARLEY_OK, parley_message_search_dispose(search));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_search_dispose(search));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_search_load_more(search, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_search_results(search, &results_json));

    /* Dispose racing events and loads: no callback after dispose returns. */
    const char *rounds_text = getenv("PARLEY_DISPOSE_ROUNDS");
    int rounds = rounds_text ? atoi(rounds_text) : 300;
    chatter_args args = {admin, "/v3/group_channels/room/messages", 0};
    pthread_t thread;
    pthread_create(&thread, NULL, chatter, &args);
    for (int round = 0; round < rounds; round++) {
        round_state *state = calloc(1, sizeof *state);
        parley_message_search_handler racing = PARLEY_MESSAGE_SEARCH_HANDLER_INIT;
        racing.added = on_any;
        racing.updated = on_any;
        racing.deleted = on_any;
        racing.user_data = state;
        parley_message_search *racer = NULL;
        CHECK_STATUS(PARLEY_OK, parley_message_search_create(&racer, client, "{\"query\": \"busy\", \"limit\": 5}", &racing));
        CHECK_STATUS(PARLEY_OK, parley_message_search_load_more(racer, on_load_ignored, NULL));
        if (round % 2 == 0) CHECK_STATUS(PARLEY_OK, parley_message_search_load_more(racer, on_load_ignored, NULL));
        if (round % 3 == 0) sleep_ms(2);
        CHECK_STATUS(PARLEY_OK, parley_message_search_dispose(racer));
        atomic_store(&state->disposed, 1);
        free(state);
    }
    atomic_store(&args.stop, 1);
    pthread_join(thread, NULL);
    CHECK(atomic_load(&late_callbacks) == 0);

    /* Destroying the client stops a search; its handle still needs dispose. */
    CHECK_STATUS(PARLEY_OK, parley_message_search_create(&search, client, "{\"query\": \"needle\"}", NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_message_search_load_more(search, on_load_ignored, NULL));
    CHECK_STATUS(PARLEY_OK, parley_message_search_dispose(search));
    free(slot.json);
    test_server_stop(&server);
    printf("test_search: %d dispose rounds\n", rounds);
    return check_report("test_search");
}
