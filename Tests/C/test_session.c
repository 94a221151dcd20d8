/* The engine through the C ABI against the real parley-server (PARLEY_SERVER_BIN):
 * connect, connection events, sending with the pending message, events into the cache,
 * cached reads, reconnect on demand while open, permission errors with server codes,
 * destroy while connected. */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"

static pthread_mutex_t events_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t events_cond = PTHREAD_COND_INITIALIZER;
static int connected_events = 0;
static int received_events = 0;
static int sent_events = 0;
static int disconnected_events = 0;
static int reconnect_started_events = 0;
static int reconnect_succeeded_events = 0;

static int wait_count(int *counter, int target) {
    struct timespec deadline;
    deadline_in(&deadline, 20000);
    pthread_mutex_lock(&events_mutex);
    while (*counter < target && pthread_cond_timedwait(&events_cond, &events_mutex, &deadline) == 0) {}
    int reached = *counter >= target;
    pthread_mutex_unlock(&events_mutex);
    return reached;
}

static void on_log(void *user_data, int level, const char *message) {
    (void)user_data;
    if (getenv("PARLEY_TEST_VERBOSE") != NULL) fprintf(stderr, "log %d: %s\n", level, message);
}

static void on_connection(void *user_data, int event, const parley_error *error) {
    (void)user_data; (void)error;
    if (getenv("PARLEY_TEST_VERBOSE") != NULL) fprintf(stderr, "connection %d\n", event);
    pthread_mutex_lock(&events_mutex);
    if (event == PARLEY_CONNECTION_CONNECTED) connected_events++;
    if (event == PARLEY_CONNECTION_DISCONNECTED) disconnected_events++;
    if (event == PARLEY_CONNECTION_RECONNECT_STARTED) reconnect_started_events++;
    if (event == PARLEY_CONNECTION_RECONNECT_SUCCEEDED) reconnect_succeeded_events++;
    pthread_cond_broadcast(&events_cond);
    pthread_mutex_unlock(&events_mutex);
}

static void on_event(void *user_data, const char *category, const char *channel_url, const char *payload) {
    (void)user_data;
    CHECK(category != NULL && channel_url != NULL && payload != NULL && payload[0] == '{');
    if (getenv("PARLEY_TEST_VERBOSE") != NULL) fprintf(stderr, "event %s\n", category);
    pthread_mutex_lock(&events_mutex);
    if (strcmp(category, "message_received") == 0 && strstr(payload, "from admin") != NULL) received_events++;
    if (strcmp(category, "message_sent") == 0) sent_events++;
    pthread_cond_broadcast(&events_cond);
    pthread_mutex_unlock(&events_mutex);
}

int main(void) {
    test_server server;
    if (test_server_start(&server, "session") != 0) return 1;
    parley_client *admin = server.admin;
    const char *url = server.url, *directory = server.directory;
    char config[1024];
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    char token[256] = "";
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"alice\", \"nickname\": \"Alice\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users", "{\"user_id\": \"bob\", \"nickname\": \"Bob\"}", &slot));
    CHECK(admin_call(admin, "POST", "/v3/users/alice/token", "{}", &slot));
    CHECK(json_field_text(slot.json, "token", token, sizeof token));
    CHECK(admin_call(admin, "POST", "/v3/group_channels", "{\"user_ids\": [\"alice\", \"bob\"], \"channel_url\": \"c-room\"}", &slot));

    parley_client *client = NULL;
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\"}", url, directory);
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    CHECK_STATUS(PARLEY_OK, parley_client_set_connection_handler(client, on_connection, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_set_event_handler(client, on_event, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_set_log_callback(client, on_log, NULL, PARLEY_LOG_TRACE));
    slot_init(&slot);
    uint64_t operation = 0;
    CHECK_STATUS(PARLEY_OK, parley_client_connect(client, &operation, "alice", token, on_result, &slot));
    CHECK(operation != 0);
    CHECK(wait_slot(&slot) && slot.code == 0 && strstr(slot.json, "\"user_id\":\"alice\"") != NULL);
    CHECK(wait_count(&connected_events, 1));
    int state = -1;
    CHECK_STATUS(PARLEY_OK, parley_client_connection_state(client, &state));
    CHECK(state == PARLEY_STATE_OPEN);
    char *text = NULL;
    CHECK_STATUS(PARLEY_OK, parley_client_current_user_id(client, &text));
    CHECK(text != NULL && strcmp(text, "alice") == 0);
    parley_free(text);

    /* Send: the pending message comes back at once, the completion with the real one. */
    result_slot sent;
    memset(&sent, 0, sizeof sent);
    slot_init(&sent);
    char *pending = NULL;
    CHECK_STATUS(PARLEY_OK, parley_client_send_user_message(client, &pending, &operation, "c-room",
                                                            "{\"message\": \"from C\", \"custom_type\": \"c\"}", on_result, &sent));
    CHECK(pending != NULL && strstr(pending, "\"sending_status\":\"pending\"") != NULL);
    CHECK(pending != NULL && strstr(pending, "\"message_id\":0") != NULL);
    parley_free(pending);
    CHECK(wait_slot(&sent) && sent.code == 0 && strstr(sent.json, "\"sending_status\":\"succeeded\"") != NULL);
    CHECK(wait_count(&sent_events, 1));

    /* Someone else's message arrives as an event and is cached. */
    CHECK(admin_call(admin, "POST", "/v3/group_channels/c-room/messages",
                     "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"from admin\"}", &slot));
    CHECK(wait_count(&received_events, 1));
    CHECK_STATUS(PARLEY_OK, parley_client_cached_messages(client, &text, "c-room", -1, 10));
    CHECK(text != NULL && strstr(text, "from C") != NULL && strstr(text, "from admin") != NULL);
    parley_free(text);
    CHECK_STATUS(PARLEY_OK, parley_client_cached_channel(client, &text, "c-room"));
    parley_free(text);
    CHECK_STATUS(PARLEY_E_NOT_FOUND, parley_client_cached_channel(client, &text, "no-such-room"));

    /* Reconnect on demand while open: a new connection that resumes where the old one
     * stopped, so a message sent meanwhile arrives exactly once. */
    CHECK_STATUS(PARLEY_OK, parley_client_reconnect(client));
    CHECK(admin_call(admin, "POST", "/v3/group_channels/c-room/messages",
                     "{\"message_type\": \"MESG\", \"user_id\": \"bob\", \"message\": \"from admin again\"}", &slot));
    CHECK(wait_count(&reconnect_succeeded_events, 1));
    CHECK(wait_count(&received_events, 2));
    CHECK_STATUS(PARLEY_OK, parley_client_connection_state(client, &state));
    CHECK(state == PARLEY_STATE_OPEN);
    pthread_mutex_lock(&events_mutex);
    CHECK(reconnect_started_events == 1 && disconnected_events == 0);
    pthread_mutex_unlock(&events_mutex);

    /* A permission error carries the HTTP status and the server's code. */
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_perform(client, NULL, "delete_group_channel", "{\"channel_url\": \"c-room\"}", on_result, &slot));
    CHECK(wait_slot(&slot));
    CHECK(slot.done && slot.code == PARLEY_E_FORBIDDEN && slot.http_status == 403 && slot.server_code != 0);

    /* No message arrived twice across the reconnect. */
    pthread_mutex_lock(&events_mutex);
    CHECK(received_events == 2);
    pthread_mutex_unlock(&events_mutex);

    /* Destroy while connected: no callback afterwards, nothing leaks into the next client. */
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(admin));

    free(slot.json);
    free(sent.json);
    server.admin = NULL;  /* destroyed above */
    test_server_stop(&server);
    return check_report("test_session");
}
