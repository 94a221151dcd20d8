/* The SyncManager-style view through the C ABI against the real parley-server
 * (PARLEY_SERVER_BIN): fetching both ways from a viewpoint in the middle equals the
 * server's own listing with every message inserted once, a send gives the documented
 * actions on the pending and succeeded lists, reset_viewpoint clears each list, refused
 * arguments name themselves, and dispose races incoming events (each round's user data is
 * freed right after dispose, so a late callback is a use after free that valgrind reports). */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"
#include "collection_support.h"
#include <jansson.h>
#include <stdatomic.h>

/* What the actions did: a log like "I1:3,R2:1," (action, list, how many messages), and
 * every id inserted on the succeeded list. */
typedef struct {
    pthread_mutex_t mutex;
    char log[8192];
    char *inserted;
    int inserted_count;
    int clears;
} action_record;

static void on_action(void *user_data, int action, int list, const char *messages_json) {
    action_record *record = user_data;
    json_error_t error;
    json_t *array = json_loads(messages_json, 0, &error);
    pthread_mutex_lock(&record->mutex);
    char item[32];
    snprintf(item, sizeof item, "%c%d:%zu,", "?IURC"[action >= 1 && action <= 4 ? action : 0], list,
             array ? json_array_size(array) : 0);
    if (strlen(record->log) + strlen(item) < sizeof record->log) strcat(record->log, item);
    if (action == PARLEY_SYNC_ACTION_INSERT && list == PARLEY_SYNC_LIST_SUCCEEDED) {
        append_message_ids(&record->inserted, messages_json);
        record->inserted_count += (int)json_array_size(array);
    }
    if (action == PARLEY_SYNC_ACTION_CLEAR) record->clears++;
    pthread_mutex_unlock(&record->mutex);
    json_decref(array);
}

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int done, code, has_more, offline;
} fetch_slot;

static void fetch_init(fetch_slot *slot) {
    memset(slot, 0, sizeof *slot);
    pthread_mutex_init(&slot->mutex, NULL);
    pthread_cond_init(&slot->cond, NULL);
}

static void on_fetched(void *user_data, const parley_error *error, int has_more, int offline) {
    fetch_slot *slot = user_data;
    pthread_mutex_lock(&slot->mutex);
    slot->code = error ? error->code : 0;
    slot->has_more = has_more;
    slot->offline = offline;
    slot->done = 1;
    pthread_cond_broadcast(&slot->cond);
    pthread_mutex_unlock(&slot->mutex);
}

static int wait_fetch(fetch_slot *slot) {
    struct timespec deadline;
    deadline_in(&deadline, 20000);
    pthread_mutex_lock(&slot->mutex);
    while (!slot->done && pthread_cond_timedwait(&slot->cond, &slot->mutex, &deadline) == 0) {}
    int done = slot->done;
    pthread_mutex_unlock(&slot->mutex);
    return done;
}

/* Fetches one way until nothing is left; returns the number of fetches, -1 on failure. */
static int fetch_to_the_end(parley_sync_view *view, int direction) {
    for (int fetches = 1; fetches < 200; fetches++) {
        fetch_slot slot;
        fetch_init(&slot);
        if (parley_sync_view_fetch(view, direction, on_fetched, &slot) != PARLEY_OK) return -1;
        if (!wait_fetch(&slot) || slot.code != 0 || slot.offline) return -1;
        if (!slot.has_more) return fetches;
    }
    return -1;
}

typedef struct {
    atomic_int disposed;
} round_state;

static atomic_int late_callbacks = 0;

static void on_any(void *user_data, int action, int list, const char *messages_json) {
    (void)action; (void)list; (void)messages_json;
    round_state *state = user_data;
    if (atomic_load(&state->disposed)) atomic_fetch_add(&late_callbacks, 1);
}

static void on_fetch_ignored(void *user_data, const parley_error *error, int has_more, int offline) {
    (void)user_data; (void)error; (void)has_more; (void)offline;
}

int main(void) {
    test_server server;
    if (test_server_start(&server, "sync-view") != 0) return 1;
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
    long long viewpoint = 0;
    for (int index = 0; index < 150; index++) {
        char body[256];
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"m%d\"}", index);
        CHECK(admin_call(admin, "POST", "/v3/group_channels/room/messages", body, &slot));
        if (index == 75) {
            json_error_t error;
            json_t *message = json_loads(slot.json, 0, &error);
            viewpoint = json_integer_value(json_object_get(message, "created_at"));
            json_decref(message);
        }
    }
    CHECK(viewpoint > 0);

    parley_client *client = NULL;
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\", \"resend_policy\": \"manual\"}",
             server.url, server.directory);
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    parley_sync_view *view = NULL;
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_sync_view_create(&view, client, "room", PARLEY_VIEWPOINT_NEWEST, NULL, NULL));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_connect(client, NULL, "alice", token, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0);

    /* Handler versions and refused arguments. */
    parley_sync_view_handler handler = PARLEY_SYNC_VIEW_HANDLER_INIT;
    parley_sync_view_handler initialized;
    CHECK_STATUS(PARLEY_OK, parley_sync_view_handler_init(&initialized, PARLEY_SYNC_VIEW_HANDLER_VERSION));
    CHECK(initialized.version == handler.version && initialized.action == NULL && initialized.user_data == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_handler_init(&initialized, 7));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_handler_init(NULL, PARLEY_SYNC_VIEW_HANDLER_VERSION));
    initialized.version = 7;
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_create(&view, client, "room", 0, NULL, &initialized));
    CHECK(view == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_create(&view, client, "room", 0, "{\"limit\": 0}", NULL));
    CHECK(strstr(parley_last_error_message(), "limit") != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_create(&view, client, "room", 0, "{\"previous_result_size\": 5}", NULL));
    CHECK(strstr(parley_last_error_message(), "previous_result_size") != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_create(&view, client, NULL, 0, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_create(&view, client, "room", -1, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_create(NULL, client, "room", 0, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_sync_view_create(&view, client, "room", 0, "{", NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_sync_view_create(&view, NULL, "room", 0, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_sync_view_fetch(NULL, PARLEY_SYNC_DIRECTION_NEXT, NULL, NULL));

    /* From the middle, both ways to the ends: the view equals the server's listing, each
     * message inserted once. */
    action_record record;
    memset(&record, 0, sizeof record);
    pthread_mutex_init(&record.mutex, NULL);
    record.inserted = calloc(1, 1);
    handler.action = on_action;
    handler.user_data = &record;
    CHECK_STATUS(PARLEY_OK, parley_sync_view_create(&view, client, "room", viewpoint, "{\"limit\": 17}", &handler));
    int64_t shown_viewpoint = 0;
    CHECK_STATUS(PARLEY_OK, parley_sync_view_viewpoint(view, &shown_viewpoint));
    CHECK(shown_viewpoint == viewpoint);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_fetch(view, 3, NULL, NULL));
    CHECK(strstr(parley_last_error_message(), "direction") != NULL);
    CHECK(fetch_to_the_end(view, PARLEY_SYNC_DIRECTION_PREVIOUS) > 1);
    CHECK(fetch_to_the_end(view, PARLEY_SYNC_DIRECTION_NEXT) > 1);
    char *succeeded_json = NULL;
    CHECK_STATUS(PARLEY_OK, parley_sync_view_messages(view, PARLEY_SYNC_LIST_SUCCEEDED, &succeeded_json));
    char *shown = calloc(1, 1);
    append_message_ids(&shown, succeeded_json);
    parley_free(succeeded_json);
    char *truth = server_listing(admin, &slot, "&include_reply_type=ALL");
    if (strcmp(truth, shown) != 0) fprintf(stderr, "shown  %s\nserver %s\n", shown, truth);
    CHECK(strcmp(truth, shown) == 0 && strlen(truth) > 0);
    pthread_mutex_lock(&record.mutex);
    CHECK(record.inserted_count == 150);
    pthread_mutex_unlock(&record.mutex);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_messages(view, 9, &succeeded_json));
    free(shown); free(truth);

    /* A send: insert on pending, then remove on pending and insert on succeeded. */
    pthread_mutex_lock(&record.mutex);
    record.log[0] = '\0';
    pthread_mutex_unlock(&record.mutex);
    char *pending = NULL;
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_send_user_message(client, &pending, NULL, "room", "{\"message\": \"from C\"}", on_result, &slot));
    parley_free(pending);
    CHECK(wait_slot(&slot) && slot.code == 0);
    for (int waited = 0; waited < 200; waited++) {
        pthread_mutex_lock(&record.mutex);
        int complete = strlen(record.log) >= strlen("I2:1,R2:1,I1:1,");
        pthread_mutex_unlock(&record.mutex);
        if (complete) break;
        sleep_ms(20);
    }
    pthread_mutex_lock(&record.mutex);
    if (strcmp(record.log, "I2:1,R2:1,I1:1,") != 0) fprintf(stderr, "send actions: %s\n", record.log);
    CHECK(strcmp(record.log, "I2:1,R2:1,I1:1,") == 0);
    pthread_mutex_unlock(&record.mutex);

    /* A new viewpoint: a clear on each list, then the old lists are gone. */
    CHECK_STATUS(PARLEY_OK, parley_sync_view_reset_viewpoint(view, PARLEY_VIEWPOINT_NEWEST));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_reset_viewpoint(view, -3));
    for (int waited = 0; waited < 200; waited++) {
        pthread_mutex_lock(&record.mutex);
        int clears = record.clears;
        pthread_mutex_unlock(&record.mutex);
        if (clears == 3) break;
        sleep_ms(20);
    }
    pthread_mutex_lock(&record.mutex);
    CHECK(record.clears == 3 && strstr(record.log, "C1:0,C2:0,C3:0,") != NULL);
    pthread_mutex_unlock(&record.mutex);
    CHECK_STATUS(PARLEY_OK, parley_sync_view_messages(view, PARLEY_SYNC_LIST_SUCCEEDED, &succeeded_json));
    CHECK(strcmp(succeeded_json, "[]") == 0);
    parley_free(succeeded_json);
    fetch_slot fetched;
    fetch_init(&fetched);
    CHECK_STATUS(PARLEY_OK, parley_sync_view_fetch(view, PARLEY_SYNC_DIRECTION_PREVIOUS, on_fetched, &fetched));
    CHECK(wait_fetch(&fetched) && fetched.code == 0 && fetched.has_more && !fetched.offline);
    CHECK_STATUS(PARLEY_OK, parley_sync_view_messages(view, PARLEY_SYNC_LIST_SUCCEEDED, &succeeded_json));
    CHECK(strstr(succeeded_json, "from C") != NULL);
    parley_free(succeeded_json);

    CHECK_STATUS(PARLEY_OK, parley_sync_view_dispose(view));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_sync_view_dispose(view));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_sync_view_fetch(view, PARLEY_SYNC_DIRECTION_NEXT, NULL, NULL));

    /* Dispose racing events and fetches: no callback after dispose returns. */
    const char *rounds_text = getenv("PARLEY_DISPOSE_ROUNDS");
    int rounds = rounds_text ? atoi(rounds_text) : 500;
    chatter_args args = {admin, "/v3/group_channels/room/messages", 0};
    pthread_t thread;
    pthread_create(&thread, NULL, chatter, &args);
    for (int round = 0; round < rounds; round++) {
        round_state *state = calloc(1, sizeof *state);
        parley_sync_view_handler racing = PARLEY_SYNC_VIEW_HANDLER_INIT;
        racing.action = on_any;
        racing.user_data = state;
        parley_sync_view *racer = NULL;
        CHECK_STATUS(PARLEY_OK, parley_sync_view_create(&racer, client, "room", PARLEY_VIEWPOINT_NEWEST, NULL, &racing));
        CHECK_STATUS(PARLEY_OK, parley_sync_view_fetch(racer, PARLEY_SYNC_DIRECTION_PREVIOUS, on_fetch_ignored, NULL));
        if (round % 2 == 0) CHECK_STATUS(PARLEY_OK, parley_sync_view_fetch_all_next(racer, on_fetch_ignored, NULL));
        if (round % 5 == 0) CHECK_STATUS(PARLEY_OK, parley_sync_view_reset_viewpoint(racer, viewpoint));
        if (round % 3 == 0) sleep_ms(1);
        CHECK_STATUS(PARLEY_OK, parley_sync_view_dispose(racer));
        atomic_store(&state->disposed, 1);
        free(state);
    }
    atomic_store(&args.stop, 1);
    pthread_join(thread, NULL);
    CHECK(atomic_load(&late_callbacks) == 0);

    /* Destroying the client stops a view; its handle still needs dispose. */
    CHECK_STATUS(PARLEY_OK, parley_sync_view_create(&view, client, "room", 0, NULL, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_sync_view_fetch(view, PARLEY_SYNC_DIRECTION_NEXT, on_fetch_ignored, NULL));
    CHECK_STATUS(PARLEY_OK, parley_sync_view_dispose(view));
    free(record.inserted);
    free(slot.json);
    test_server_stop(&server);
    printf("test_sync_view: %d dispose rounds\n", rounds);
    return check_report("test_sync_view");
}
