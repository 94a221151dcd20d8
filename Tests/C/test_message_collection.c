/* The message collection through the C ABI against the real parley-server
 * (PARLEY_SERVER_BIN): the paged view equals the server's own listing, a live message and
 * a send arrive as events with kind, source and sending status, refused parameters name
 * the field, and dispose races incoming events 1,000 times (each round's user data is
 * freed right after dispose, so a late callback is a use after free that valgrind reports). */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"
#include "collection_support.h"
#include <jansson.h>
#include <stdatomic.h>

/* The message ids of a JSON array of messages, comma-separated (malloc'd). */
static char *message_ids(const char *json_text) {
    char *out = calloc(1, 1);
    append_message_ids(&out, json_text);
    return out;
}

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int received_live;      /* ADDED from message_received */
    int pending_added;      /* ADDED with PENDING */
    int succeeded_updated;  /* UPDATED with SUCCEEDED from local_send */
    int other;
} event_counts;

static void on_event(void *user_data, const parley_message_event *event) {
    event_counts *counts = user_data;
    pthread_mutex_lock(&counts->mutex);
    if (event->kind == PARLEY_MESSAGE_EVENT_ADDED && event->source == PARLEY_SOURCE_MESSAGE_RECEIVED &&
        event->sending_status == PARLEY_SENDING_STATUS_SUCCEEDED && strcmp(event->source_name, "message_received") == 0 &&
        strcmp(event->channel_url, "room") == 0 && strstr(event->channel_json, "\"channel_url\":\"room\"") != NULL) {
        counts->received_live++;
    } else if (event->kind == PARLEY_MESSAGE_EVENT_ADDED && event->sending_status == PARLEY_SENDING_STATUS_PENDING &&
               event->source == PARLEY_SOURCE_LOCAL_SEND && strstr(event->messages_json, "from C") != NULL) {
        counts->pending_added++;
    } else if (event->kind == PARLEY_MESSAGE_EVENT_UPDATED && event->sending_status == PARLEY_SENDING_STATUS_SUCCEEDED &&
               strstr(event->messages_json, "from C") != NULL) {
        counts->succeeded_updated++;
    } else {
        counts->other++;
    }
    pthread_cond_broadcast(&counts->cond);
    pthread_mutex_unlock(&counts->mutex);
}

static int wait_count(event_counts *counts, const int *field) {
    struct timespec deadline;
    deadline_in(&deadline, 20000);
    pthread_mutex_lock(&counts->mutex);
    while (*field == 0 && pthread_cond_timedwait(&counts->cond, &counts->mutex, &deadline) == 0) {}
    int seen = *field;
    pthread_mutex_unlock(&counts->mutex);
    return seen;
}

typedef struct {
    atomic_int disposed;
} round_state;

static atomic_int late_callbacks = 0;

static void on_any(void *user_data, const parley_message_event *event) {
    (void)event;
    round_state *state = user_data;
    if (atomic_load(&state->disposed)) atomic_fetch_add(&late_callbacks, 1);
}

static void on_ignored(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)error; (void)json;
}

int main(void) {
    test_server server;
    if (test_server_start(&server, "message-collection") != 0) return 1;
    parley_client *admin = server.admin;
    char config[1024];
    result_slot slot, api_slot;
    memset(&slot, 0, sizeof slot);
    memset(&api_slot, 0, sizeof api_slot);
    char token[256] = "";
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"alice\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"bob\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users/alice/token", "{}", &slot));
    CHECK(json_field_text(slot.json, "token", token, sizeof token));
    CHECK(admin_call(admin, "POST", "/v3/group_channels", "{\"user_ids\": [\"alice\", \"bob\"], \"channel_url\": \"room\"}", &slot));
    for (int index = 0; index < 70; index++) {
        char body[256];
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"m%d\"}", index);
        CHECK(admin_call(admin, "POST", "/v3/group_channels/room/messages", body, &slot));
    }

    parley_client *client = NULL;
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\"}", server.url, server.directory);
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_connect(client, NULL, "alice", token, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0);

    /* Handler versions and refused parameters. */
    parley_message_collection_handler handler = PARLEY_MESSAGE_COLLECTION_HANDLER_INIT;
    parley_message_collection_handler initialized;
    CHECK_STATUS(PARLEY_OK, parley_message_collection_handler_init(&initialized, PARLEY_MESSAGE_COLLECTION_HANDLER_VERSION));
    CHECK(initialized.version == handler.version && initialized.event == NULL && initialized.user_data == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_collection_handler_init(&initialized, 99));
    parley_message_collection *collection = NULL;
    initialized.version = 99;
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT,
                 parley_message_collection_create(&collection, client, "room", PARLEY_STARTING_POINT_NEWEST, NULL, &initialized));
    CHECK(collection == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_collection_create(
                                                &collection, client, "room", PARLEY_STARTING_POINT_NEWEST, "{\"previous_result_size\": 0}", NULL));
    CHECK(strstr(parley_last_error_message(), "previous_result_size") != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_collection_create(
                                                &collection, client, "room", PARLEY_STARTING_POINT_NEWEST, "{\"reply_type\": \"some\"}", NULL));
    CHECK(strstr(parley_last_error_message(), "reply_type") != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_collection_create(&collection, client, NULL, 0, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_collection_create(&collection, client, "room", -1, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_message_collection_create(&collection, client, "room", 0, "{", NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_collection_create(&collection, NULL, "room", 0, NULL, NULL));

    /* Start at the newest end, page back to the oldest: the view equals the server's listing. */
    event_counts counts;
    memset(&counts, 0, sizeof counts);
    pthread_mutex_init(&counts.mutex, NULL);
    pthread_cond_init(&counts.cond, NULL);
    handler.event = on_event;
    handler.user_data = &counts;
    CHECK_STATUS(PARLEY_OK, parley_message_collection_create(&collection, client, "room", PARLEY_STARTING_POINT_NEWEST,
                                                             "{\"previous_result_size\": 25}", &handler));
    int flag = 1;
    slot_init(&slot);
    slot_init(&api_slot);
    CHECK_STATUS(PARLEY_OK, parley_message_collection_load_previous(collection, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == PARLEY_E_INVALID_STATE);  /* not started yet */
    CHECK_STATUS(PARLEY_OK, parley_message_collection_start(collection, NULL, on_result, &api_slot));
    CHECK(wait_slot(&api_slot) && api_slot.code == 0);
    char *first_page = message_ids(api_slot.json);
    CHECK_STATUS(PARLEY_OK, parley_message_collection_has_next(collection, &flag));
    CHECK(flag == 0);
    for (int pages = 0; pages < 20; pages++) {
        CHECK_STATUS(PARLEY_OK, parley_message_collection_has_previous(collection, &flag));
        if (!flag) break;
        slot_init(&slot);
        CHECK_STATUS(PARLEY_OK, parley_message_collection_load_previous(collection, on_result, &slot));
        CHECK(wait_slot(&slot) && slot.code == 0);
    }
    CHECK(!flag);
    char *shown_json = NULL;
    CHECK_STATUS(PARLEY_OK, parley_message_collection_messages(collection, &shown_json));
    char *shown = message_ids(shown_json);
    char *truth = server_listing(admin, &slot, "");
    if (strcmp(truth, shown) != 0) fprintf(stderr, "shown  %s\nserver %s\n", shown, truth);
    CHECK(strcmp(truth, shown) == 0 && strlen(truth) > 0);
    CHECK(strlen(first_page) > 0 && strstr(truth, first_page) != NULL);  /* the first page is the newest 25 */
    free(first_page); free(shown); free(truth); parley_free(shown_json);

    /* A live message from bob: ADDED / MESSAGE_RECEIVED / SUCCEEDED. Sent once the view is
     * live (its stream open, the catch-up after it done): sent earlier, it could come by that
     * catch-up, as a message changelog. */
    CHECK(wait_view_live(NULL, collection));
    CHECK(admin_call(admin, "POST", "/v3/group_channels/room/messages",
                     "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"live\"}", &slot));
    CHECK(wait_count(&counts, &counts.received_live));

    /* A send through the client: ADDED (pending), then UPDATED (succeeded). */
    char *pending = NULL;
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_send_user_message(client, &pending, NULL, "room", "{\"message\": \"from C\"}", on_result, &slot));
    CHECK(pending != NULL && strstr(pending, "\"sending_status\":\"pending\"") != NULL);
    parley_free(pending);
    CHECK(wait_slot(&slot) && slot.code == 0);
    CHECK(wait_count(&counts, &counts.pending_added));
    CHECK(wait_count(&counts, &counts.succeeded_updated));
    CHECK_STATUS(PARLEY_OK, parley_message_collection_messages(collection, &shown_json));
    CHECK(shown_json != NULL && strstr(shown_json, "from C") != NULL && strstr(shown_json, "sending_status") == NULL);
    parley_free(shown_json);

    CHECK_STATUS(PARLEY_OK, parley_message_collection_dispose(collection));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_collection_dispose(collection));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_collection_has_next(collection, &flag));

    /* Dispose racing events: no callback after dispose returns. */
    const char *rounds_text = getenv("PARLEY_DISPOSE_ROUNDS");
    int rounds = rounds_text ? atoi(rounds_text) : 1000;
    chatter_args args = {admin, "/v3/group_channels/room/messages", 0};
    pthread_t thread;
    pthread_create(&thread, NULL, chatter, &args);
    for (int round = 0; round < rounds; round++) {
        round_state *state = calloc(1, sizeof *state);
        parley_message_collection_handler racing = PARLEY_MESSAGE_COLLECTION_HANDLER_INIT;
        racing.event = on_any;
        racing.user_data = state;
        parley_message_collection *racer = NULL;
        CHECK_STATUS(PARLEY_OK, parley_message_collection_create(&racer, client, "room", PARLEY_STARTING_POINT_NEWEST, NULL, &racing));
        CHECK_STATUS(PARLEY_OK, parley_message_collection_start(racer, on_ignored, on_ignored, NULL));
        if (round % 2 == 0) CHECK_STATUS(PARLEY_OK, parley_message_collection_load_previous(racer, on_ignored, NULL));
        if (round % 3 == 0) sleep_ms(1);
        CHECK_STATUS(PARLEY_OK, parley_message_collection_dispose(racer));
        atomic_store(&state->disposed, 1);
        free(state);
    }
    atomic_store(&args.stop, 1);
    pthread_join(thread, NULL);
    CHECK(atomic_load(&late_callbacks) == 0);

    /* Destroying the client stops a collection; its handle still needs dispose. */
    CHECK_STATUS(PARLEY_OK, parley_message_collection_create(&collection, client, "room", 0, NULL, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_message_collection_load_next(collection, on_ignored, NULL));
    CHECK_STATUS(PARLEY_OK, parley_message_collection_dispose(collection));
    free(slot.json);
    free(api_slot.json);
    test_server_stop(&server);
    printf("test_message_collection: %d dispose rounds\n", rounds);
    return check_report("test_message_collection");
}
