/* Freshness and page origin through the C ABI against the real parley-server
 * (PARLEY_SERVER_BIN): every view's getter and freshness_changed callback (new handler
 * versions, older versions still accepted), the origin of each load's result read inside its
 * completion, the states through a disconnect and a new connect (OFFLINE, CATCHING_UP, LIVE),
 * and misuse: NULL and wrong-kind handles, NULL out-parameters, disposed handles, unknown
 * handler versions. */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"
#include "collection_support.h"
#include <stdatomic.h>

enum { VIEW_CHANNELS, VIEW_MESSAGES, VIEW_SYNC };

/* What one view's freshness_changed got, and whether its getter agreed inside each call. */
typedef struct {
    pthread_mutex_t mutex;
    int kind;
    void *view; /* set once created: the getter is read inside the callback */
    int states[64];
    int count;
    int disagreements;
} freshness_record;

static int read_freshness(int kind, void *view, int *out) {
    switch (kind) {
    case VIEW_CHANNELS: return parley_group_channel_collection_freshness(view, out);
    case VIEW_MESSAGES: return parley_message_collection_freshness(view, out);
    default: return parley_sync_view_freshness(view, out);
    }
}

static void on_freshness(void *user_data, int freshness) {
    freshness_record *record = user_data;
    pthread_mutex_lock(&record->mutex);
    int got = 0;
    if (record->view != NULL && (read_freshness(record->kind, record->view, &got) != PARLEY_OK || got != freshness)) {
        record->disagreements++;
    }
    if (record->count < 64) record->states[record->count++] = freshness;
    pthread_mutex_unlock(&record->mutex);
}

static void record_init(freshness_record *record, int kind) {
    memset(record, 0, sizeof *record);
    pthread_mutex_init(&record->mutex, NULL);
    record->kind = kind;
}

/* Waits until the view's last reported change is `state` (the getter changes just before the
 * callback runs, so waiting on it could look at the record too early). */
static int wait_freshness(freshness_record *record, int state) {
    for (int waited = 0; waited < 20000; waited += 10) {
        pthread_mutex_lock(&record->mutex);
        int last = record->count > 0 ? record->states[record->count - 1] : 0;
        pthread_mutex_unlock(&record->mutex);
        int got = 0;
        if (last == state && read_freshness(record->kind, record->view, &got) == PARLEY_OK && got == state) return 1;
        sleep_ms(10);
    }
    fprintf(stderr, "view %d: freshness %d not reached\n", record->kind, state);
    return 0;
}

/* The last n recorded states equal `expected`. */
static int ends_with(freshness_record *record, const int *expected, int n) {
    pthread_mutex_lock(&record->mutex);
    int ok = record->count >= n && memcmp(record->states + record->count - n, expected, sizeof(int) * (size_t)n) == 0;
    if (!ok) {
        fprintf(stderr, "view %d states:", record->kind);
        for (int i = 0; i < record->count; i++) fprintf(stderr, " %d", record->states[i]);
        fprintf(stderr, "\n");
    }
    pthread_mutex_unlock(&record->mutex);
    return ok;
}

/* A load's completion that reads its result's origin (and the view's freshness) inside. */
typedef struct {
    result_slot slot;
    int kind;
    void *view;
    int origin;
    int freshness;
} load_slot;

static void read_inside(load_slot *load) {
    switch (load->kind) {
    case VIEW_CHANNELS: parley_group_channel_collection_last_page_origin(load->view, &load->origin); break;
    case VIEW_MESSAGES: parley_message_collection_last_page_origin(load->view, &load->origin); break;
    default: parley_sync_view_last_fetch_origin(load->view, &load->origin); break;
    }
    read_freshness(load->kind, load->view, &load->freshness);
}

static void on_load(void *user_data, const parley_error *error, const char *json) {
    load_slot *load = user_data;
    read_inside(load);
    on_result(&load->slot, error, json);
}

/* start's two completions: the first (cache) and the second (server) each get their own slot. */
static load_slot start_slots[2];
static atomic_int start_calls = 0;
static void on_start(void *user_data, const parley_error *error, const char *json) {
    (void)user_data;
    int index = atomic_fetch_add(&start_calls, 1);
    if (index < 2) on_load(&start_slots[index], error, json);
}

static void on_fetch(void *user_data, const parley_error *error, int has_more, int offline) {
    (void)has_more; (void)offline;
    on_load(user_data, error, "");
}

static void load_init(load_slot *load, int kind, void *view) {
    memset(load, 0, sizeof *load);
    slot_init(&load->slot);
    load->kind = kind;
    load->view = view;
    load->origin = -1;
}

int main(void) {
    test_server server;
    if (test_server_start(&server, "freshness") != 0) return 1;
    parley_client *admin = server.admin;
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    char token[256] = "";
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"alice\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"bob\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users/alice/token", "{}", &slot));
    CHECK(json_field_text(slot.json, "token", token, sizeof token));
    CHECK(admin_call(admin, "POST", "/v3/group_channels", "{\"user_ids\": [\"alice\", \"bob\"], \"channel_url\": \"room\"}", &slot));
    for (int index = 0; index < 12; index++) {
        char body[128];
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"m%d\"}", index);
        CHECK(admin_call(admin, "POST", "/v3/group_channels/room/messages", body, &slot));
    }

    parley_client *client = NULL;
    char config[512];
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\", \"reconnect_initial_delay_ms\": 50}",
             server.url, server.directory);
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_connect(client, NULL, "alice", token, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0);
    CHECK(wait_stream_open(client));

    /* Handler versions: the new field, and the older versions still accepted. */
    parley_group_channel_collection_handler channel_handler;
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_handler_init(&channel_handler, 3));
    CHECK(channel_handler.version == PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_VERSION && channel_handler.freshness_changed == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_group_channel_collection_handler_init(&channel_handler, 4));
    parley_message_collection_handler message_handler = PARLEY_MESSAGE_COLLECTION_HANDLER_INIT;
    CHECK(message_handler.version == 2);
    /* Version 1 writes only the older struct's bytes: the field after it stays as it was. */
    message_handler.freshness_changed = on_freshness;
    CHECK_STATUS(PARLEY_OK, parley_message_collection_handler_init(&message_handler, 1));
    CHECK(message_handler.version == 1 && message_handler.freshness_changed == on_freshness);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_collection_handler_init(&message_handler, 3));
    parley_sync_view_handler sync_handler = PARLEY_SYNC_VIEW_HANDLER_INIT;
    CHECK(sync_handler.version == 2);
    sync_handler.freshness_changed = on_freshness;
    CHECK_STATUS(PARLEY_OK, parley_sync_view_handler_init(&sync_handler, 1));
    CHECK(sync_handler.version == 1 && sync_handler.freshness_changed == on_freshness);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_handler_init(&sync_handler, 0));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_handler_init(NULL, 2));

    /* An old (version 1) message handler is accepted; its freshness field is not read. */
    parley_message_collection *old_view = NULL;
    CHECK_STATUS(PARLEY_OK, parley_message_collection_create(&old_view, client, "room", PARLEY_STARTING_POINT_NEWEST, NULL,
                                                             &message_handler));
    message_handler.version = 9;
    parley_message_collection *refused = NULL;
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_collection_create(&refused, client, "room", PARLEY_STARTING_POINT_NEWEST,
                                                                             NULL, &message_handler));
    CHECK(refused == NULL);
    CHECK_STATUS(PARLEY_OK, parley_message_collection_dispose(old_view));

    /* The three views with freshness callbacks. */
    freshness_record records[3];
    record_init(&records[VIEW_CHANNELS], VIEW_CHANNELS);
    record_init(&records[VIEW_MESSAGES], VIEW_MESSAGES);
    record_init(&records[VIEW_SYNC], VIEW_SYNC);
    parley_group_channel_collection_handler channels_fns = PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_INIT;
    channels_fns.freshness_changed = on_freshness;
    channels_fns.user_data = &records[VIEW_CHANNELS];
    parley_message_collection_handler messages_fns = PARLEY_MESSAGE_COLLECTION_HANDLER_INIT;
    messages_fns.freshness_changed = on_freshness;
    messages_fns.user_data = &records[VIEW_MESSAGES];
    parley_sync_view_handler sync_fns = PARLEY_SYNC_VIEW_HANDLER_INIT;
    sync_fns.freshness_changed = on_freshness;
    sync_fns.user_data = &records[VIEW_SYNC];
    parley_group_channel_collection *channels = NULL;
    parley_message_collection *messages = NULL;
    parley_sync_view *sync = NULL;
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_create(&channels, client, "{\"limit\": 5}", &channels_fns));
    CHECK_STATUS(PARLEY_OK, parley_message_collection_create(&messages, client, "room", PARLEY_STARTING_POINT_NEWEST,
                                                             "{\"previous_result_size\": 5}", &messages_fns));
    CHECK_STATUS(PARLEY_OK, parley_sync_view_create(&sync, client, "room", PARLEY_VIEWPOINT_NEWEST, "{\"limit\": 5}", &sync_fns));
    records[VIEW_CHANNELS].view = channels;
    records[VIEW_MESSAGES].view = messages;
    records[VIEW_SYNC].view = sync;

    /* Misuse of the getters. */
    int value = -1;
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_group_channel_collection_freshness(NULL, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_collection_freshness(NULL, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_sync_view_freshness(NULL, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_group_channel_collection_last_page_origin(NULL, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_collection_last_page_origin(NULL, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_sync_view_last_fetch_origin(NULL, &value));
    /* Another kind's handle is not one of these. */
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_group_channel_collection_freshness((parley_group_channel_collection *)messages, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_collection_freshness((parley_message_collection *)sync, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_sync_view_last_fetch_origin((parley_sync_view *)channels, &value));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_group_channel_collection_freshness(channels, NULL));
    CHECK_ERROR_MENTIONS("out_freshness");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_message_collection_last_page_origin(messages, NULL));
    CHECK_ERROR_MENTIONS("out_origin");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_sync_view_freshness(sync, NULL));
    /* Before any load: no origin. */
    CHECK_STATUS(PARLEY_OK, parley_message_collection_last_page_origin(messages, &value));
    CHECK(value == PARLEY_PAGE_ORIGIN_NONE);
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_last_page_origin(channels, &value));
    CHECK(value == PARLEY_PAGE_ORIGIN_NONE);

    /* Loads: their origin read inside their completions. */
    load_slot load;
    load_init(&load, VIEW_CHANNELS, channels);
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_load_more(channels, on_load, &load));
    CHECK(wait_slot(&load.slot) && load.slot.code == 0);
    CHECK(load.origin == PARLEY_PAGE_ORIGIN_CACHE || load.origin == PARLEY_PAGE_ORIGIN_SERVER);
    CHECK(wait_freshness(&records[VIEW_CHANNELS], PARLEY_FRESHNESS_LIVE));
    free(load.slot.json);

    load_init(&start_slots[0], VIEW_MESSAGES, messages);
    load_init(&start_slots[1], VIEW_MESSAGES, messages);
    CHECK_STATUS(PARLEY_OK, parley_message_collection_start(messages, on_start, on_start, NULL));
    CHECK(wait_slot(&start_slots[0].slot) && wait_slot(&start_slots[1].slot));
    CHECK(start_slots[0].slot.code == 0 && start_slots[0].origin == PARLEY_PAGE_ORIGIN_CACHE);
    CHECK(start_slots[1].slot.code == 0 && start_slots[1].origin == PARLEY_PAGE_ORIGIN_SERVER);
    /* Reported before api_fn ran: inside it the view was already live. */
    CHECK(start_slots[1].freshness == PARLEY_FRESHNESS_LIVE);
    free(start_slots[0].slot.json);
    free(start_slots[1].slot.json);

    load_init(&load, VIEW_SYNC, sync);
    CHECK_STATUS(PARLEY_OK, parley_sync_view_fetch(sync, PARLEY_SYNC_DIRECTION_PREVIOUS, on_fetch, &load));
    CHECK(wait_slot(&load.slot) && load.slot.code == 0);
    CHECK(load.origin == PARLEY_PAGE_ORIGIN_SERVER);
    CHECK(wait_freshness(&records[VIEW_SYNC], PARLEY_FRESHNESS_LIVE));
    free(load.slot.json);

    /* An error result has no origin. */
    load_init(&load, VIEW_MESSAGES, messages);
    CHECK_STATUS(PARLEY_OK, parley_message_collection_start(messages, on_load, NULL, &load));
    CHECK(wait_slot(&load.slot) && load.slot.code == PARLEY_E_INVALID_STATE && load.origin == PARLEY_PAGE_ORIGIN_NONE);
    free(load.slot.json);

    /* Disconnect: offline. Connect again: catching up, then live. */
    CHECK_STATUS(PARLEY_OK, parley_client_disconnect(client));
    for (int kind = 0; kind < 3; kind++) CHECK(wait_freshness(&records[kind], PARLEY_FRESHNESS_OFFLINE));
    CHECK(admin_call(admin, "POST", "/v3/group_channels/room/messages",
                     "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"while away\"}", &slot));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_connect(client, NULL, "alice", token, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0);
    static const int back[] = {PARLEY_FRESHNESS_LIVE, PARLEY_FRESHNESS_OFFLINE, PARLEY_FRESHNESS_CATCHING_UP, PARLEY_FRESHNESS_LIVE};
    for (int kind = 0; kind < 3; kind++) {
        CHECK(wait_freshness(&records[kind], PARLEY_FRESHNESS_LIVE));
        CHECK(ends_with(&records[kind], back, 4));
        CHECK(records[kind].disagreements == 0);
    }
    char *shown = NULL;
    CHECK_STATUS(PARLEY_OK, parley_message_collection_messages(messages, &shown));
    CHECK(shown != NULL && strstr(shown, "while away") != NULL);
    parley_free(shown);

    /* Disposed handles are gone. */
    CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_dispose(channels));
    CHECK_STATUS(PARLEY_OK, parley_message_collection_dispose(messages));
    CHECK_STATUS(PARLEY_OK, parley_sync_view_dispose(sync));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_group_channel_collection_freshness(channels, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_message_collection_last_page_origin(messages, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_sync_view_freshness(sync, &value));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_sync_view_last_fetch_origin(sync, &value));

    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    free(slot.json);
    test_server_stop(&server);
    return check_report("test_freshness");
}
