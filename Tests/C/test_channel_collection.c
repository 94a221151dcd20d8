/* The group channel collection through the C ABI against the real parley-server
 * (PARLEY_SERVER_BIN): the paged list equals the server's own listing, a live message is
 * reported with its source, handler versions are checked, and dispose races incoming
 * events 1,000 times (each round's user data is freed right after dispose, so a late
 * callback is a use after free that valgrind reports). */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"
#include "collection_support.h"
#include <jansson.h>
#include <stdatomic.h>

static char *channel_urls(const char *json_text) {
    json_error_t error;
    json_t *array = json_loads(json_text, 0, &error);
    CHECK(array != NULL && json_is_array(array));
    size_t size = 1;
    char *joined = calloc(1, 1);
    size_t index;
    json_t *item;
    json_array_foreach(array, index, item) {
        const char *url = json_string_value(json_object_get(item, "channel_url"));
        CHECK(url != NULL);
        size += strlen(url) + 1;
        joined = realloc(joined, size);
        strcat(joined, url);
        strcat(joined, ",");
    }
    json_decref(array);
    return joined;
}

static pthread_mutex_t seen_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_cond = PTHREAD_COND_INITIALIZER;
static int updates_from_messages = 0;

static void on_updated(void *user_data, const parley_collection_context *context, const char *json) {
    (void)user_data;
    CHECK(context != NULL && context->source_name != NULL && context->detail != NULL && json != NULL && json[0] == '[');
    pthread_mutex_lock(&seen_mutex);
    if (context->source == PARLEY_SOURCE_MESSAGE_RECEIVED && strcmp(context->source_name, "message_received") == 0) {
        updates_from_messages++;
    }
    pthread_cond_broadcast(&seen_cond);
    pthread_mutex_unlock(&seen_mutex);
}

typedef struct {
    atomic_int disposed;
    atomic_int late;
} round_state;

static atomic_int late_callbacks = 0;

static void on_any(void *user_data, const parley_collection_context *context, const char *json) {
    (void)context; (void)json;
    round_state *state = user_data;
    if (atomic_load(&state->disposed)) atomic_fetch_add(&late_callbacks, 1);
}

static void on_page_ignored(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)error; (void)json;
}

int main(void) {
    test_server server;
    if (test_server_start(&server, "collection") != 0) return 1;
    parley_client *admin = server.admin;
    const char *url = server.url, *directory = server.directory;
    char config[1024], path[256];
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    char token[256] = "";
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"alice\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"bob\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users/alice/token", "{}", &slot));
    CHECK(json_field_text(slot.json, "token", token, sizeof token));
    const char *names[] = {"pear", "apple", "fig", "apple", "kiwi", "Banana", "fig"};
    for (int index = 0; index < 7; index++) {
        char body[256];
        snprintf(body, sizeof body, "{\"user_ids\": [\"alice\", \"bob\"], \"channel_url\": \"c-%d\", \"name\": \"%s\"}", index, names[index]);
        CHECK(admin_call(admin, "POST", "/v3/group_channels", body, &slot));
    }
    CHECK(admin_call(admin, "POST", "/v3/group_channels", "{\"user_ids\": [\"alice\", \"bob\"], \"channel_url\": \"c-busy\", \"name\": \"busy\"}", &slot));

    parley_client *client = NULL;
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\"}", url, directory);
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_connect(client, NULL, "alice", token, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0);

    /* The header's source codes are the library's. */
    char *sources = NULL;
    CHECK_STATUS(PARLEY_OK, parley_collection_sources(&sources));
    CHECK(sources != NULL && strstr(sources, "{\"code\":1,\"name\":\"message_received\"}") != NULL);
    CHECK(PARLEY_SOURCE_MESSAGE_RECEIVED == 1 && PARLEY_SOURCE_PINNED_MESSAGE_UPDATED == 30);
    char expected_entry[96];
    snprintf(expected_entry, sizeof expected_entry, "{\"code\":%d,\"name\":\"channel_changelog\"}", PARLEY_SOURCE_CHANNEL_CHANGELOG);
    CHECK(sources != NULL && strstr(sources, expected_entry) != NULL);
    snprintf(expected_entry, sizeof expected_entry, "{\"code\":%d,\"name\":\"unknown_event\"}", PARLEY_SOURCE_UNKNOWN_EVENT);
    CHECK(sources != NULL && strstr(sources, expected_entry) != NULL);
    snprintf(expected_entry, sizeof expected_entry, "{\"code\":%d,\"name\":\"message_sent\"}", PARLEY_SOURCE_MESSAGE_SENT);
    CHECK(sources != NULL && strstr(sources, expected_entry) != NULL);
    snprintf(expected_entry, sizeof expected_entry, "{\"code\":%d,\"name\":\"channel_refresh\"}", PARLEY_SOURCE_CHANNEL_REFRESH);
    CHECK(sources != NULL && strstr(sources, expected_entry) != NULL);
    parley_free(sources);

    /* Handler versions: INIT and _init agree; an unknown version is refused. */
    parley_group_channel_collection_handler handler = PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_INIT;
    parley_group_channel_collection_handler initialized;
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_handler_init(&initialized, PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_VERSION));
    CHECK(initialized.version == handler.version && initialized.added == NULL && initialized.user_data == NULL);
    CHECK(initialized.deleted_channels == NULL && handler.deleted_channels == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_group_channel_collection_handler_init(&initialized, 99));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_group_channel_collection_handler_init(&initialized, 0));
    /* A handler of version 1 (an application built against the older header: the struct ends
     * before deleted_channels) is still filled and accepted, and nothing past it is touched. */
    struct {
        int version;
        parley_channels_event_fn added, updated, deleted;
        parley_collection_error_fn error;
        void *user_data;
        unsigned char after[sizeof(void *)];
    } version1;
    memset(&version1, 0xAB, sizeof version1);
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_handler_init((parley_group_channel_collection_handler *)&version1, 1));
    CHECK(version1.version == 1 && version1.deleted == NULL && version1.user_data == NULL);
    CHECK(version1.after[0] == 0xAB && version1.after[sizeof(void *) - 1] == 0xAB);
    parley_group_channel_collection *collection = NULL;
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_create(&collection, client, NULL,
                                                                    (parley_group_channel_collection_handler *)&version1));
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_dispose(collection));
    collection = NULL;
    initialized.version = 99;
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_group_channel_collection_create(&collection, client, NULL, &initialized));
    CHECK(collection == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_group_channel_collection_create(&collection, client, "{\"limit\": 0}", NULL));
    CHECK(strstr(parley_last_error_message(), "limit") != NULL);
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_group_channel_collection_create(&collection, client, "{", NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_group_channel_collection_create(&collection, NULL, NULL, NULL));

    /* The paged list equals the server's listing for alice. */
    handler.updated = on_updated;
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_create(
                                &collection, client, "{\"order\": \"channel_name_alphabetical\", \"limit\": 3, \"include_empty\": true}",
                                &handler));
    int has_more = 1;
    for (int pages = 0; has_more && pages < 10; pages++) {
        slot_init(&slot);
        CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_load_more(collection, on_result, &slot));
        CHECK(wait_slot(&slot) && slot.code == 0);
        CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_has_more(collection, &has_more));
    }
    for (int waited = 0; has_more && waited < 200; waited++) {
        sleep_ms(10);
        CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_has_more(collection, &has_more));
    }
    CHECK(!has_more);
    char *listed = NULL;
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_channels(collection, &listed));
    snprintf(path, sizeof path, "/v3/users/alice/my_group_channels?order=channel_name_alphabetical&show_empty=true&limit=100");
    CHECK(admin_call(admin, "GET", path, NULL, &slot));
    json_error_t error;
    json_t *answer = json_loads(slot.json, 0, &error);
    CHECK(answer != NULL);
    char *truth_text = json_dumps(json_object_get(answer, "channels"), 0);
    char *truth = channel_urls(truth_text);
    char *mine = channel_urls(listed);
    if (strcmp(truth, mine) != 0) fprintf(stderr, "listed %s\nserver %s\n", mine, truth);
    CHECK(strcmp(truth, mine) == 0);
    /* Names order case-insensitively: "Banana" between "apple" and "busy". */
    CHECK(strcmp(truth, "c-1,c-3,c-5,c-busy,c-2,c-6,c-4,c-0,") == 0);
    free(truth); free(mine); free(truth_text); json_decref(answer); parley_free(listed);

    /* A live message: updated, with its source. Sent once the view is live: during the
     * catch-up after the stream opens the view reports only the net change, as a changelog. */
    CHECK(wait_view_live(collection, NULL));
    CHECK(admin_call(admin, "POST", "/v3/group_channels/c-2/messages",
                     "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"hi\"}", &slot));
    struct timespec deadline;
    deadline_in(&deadline, 20000);
    pthread_mutex_lock(&seen_mutex);
    while (updates_from_messages == 0 && pthread_cond_timedwait(&seen_cond, &seen_mutex, &deadline) == 0) {}
    CHECK(updates_from_messages >= 1);
    pthread_mutex_unlock(&seen_mutex);
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_dispose(collection));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_group_channel_collection_dispose(collection));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_group_channel_collection_has_more(collection, &has_more));

    /* Dispose racing events: no callback after dispose returns. */
    const char *rounds_text = getenv("PARLEY_DISPOSE_ROUNDS");
    int rounds = rounds_text ? atoi(rounds_text) : 1000;
    chatter_args args = {admin, "/v3/group_channels/c-busy/messages", 0};
    pthread_t thread;
    pthread_create(&thread, NULL, chatter, &args);
    for (int round = 0; round < rounds; round++) {
        round_state *state = calloc(1, sizeof *state);
        parley_group_channel_collection_handler racing = PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_INIT;
        racing.added = on_any;
        racing.updated = on_any;
        racing.deleted = on_any;
        racing.user_data = state;
        parley_group_channel_collection *racer = NULL;
        CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_create(&racer, client, "{\"order\": \"latest_last_message\"}", &racing));
        CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_load_more(racer, on_page_ignored, NULL));
        if (round % 3 == 0) sleep_ms(1);
        CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_dispose(racer));
        atomic_store(&state->disposed, 1);
        free(state);
    }
    atomic_store(&args.stop, 1);
    pthread_join(thread, NULL);
    CHECK(atomic_load(&late_callbacks) == 0);

    /* Destroying the client stops a collection; its handle still needs dispose. */
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_create(&collection, client, NULL, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_group_channel_collection_load_more(collection, on_page_ignored, NULL));
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_dispose(collection));
    free(slot.json);
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(admin));
    server.admin = NULL;  /* destroyed above */
    test_server_stop(&server);
    printf("test_channel_collection: %d dispose rounds\n", rounds);
    return check_report("test_channel_collection");
}
