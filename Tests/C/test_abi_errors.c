/* Every C function rejects NULL, destroyed and wrong handles, and bad arguments, with a
 * status code and a message — never a crash. */
#include "check.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

static void ignore_result(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)error; (void)json;
}
static void ignore_callback(void *user_data) { (void)user_data; }
static void ignore_log(void *user_data, int level, const char *message) { (void)user_data; (void)level; (void)message; }
static void ignore_connection(void *user_data, int event, const parley_error *error) {
    (void)user_data; (void)event; (void)error;
}
static void ignore_event(void *user_data, const char *category, const char *channel_url, const char *payload) {
    (void)user_data; (void)category; (void)channel_url; (void)payload;
}
static void ignore_progress(void *user_data, const char *req_id, int64_t sent, int64_t total) {
    (void)user_data; (void)req_id; (void)sent; (void)total;
}
static void ignore_file_sent(void *user_data, int index, const char *req_id, const parley_error *error, const char *json) {
    (void)user_data; (void)index; (void)req_id; (void)error; (void)json;
}

/* parley_error_is_retryable: NULL and refusals are not retryable; the connection's failures
 * and the server's own trouble are, a refused connection among them. */
typedef struct retry_slot {
    int done, code, retryable;
} retry_slot;

static void on_retry_result(void *user_data, const parley_error *error, const char *json) {
    retry_slot *slot = user_data;
    (void)json;
    slot->code = error != NULL ? error->code : PARLEY_OK;
    slot->retryable = parley_error_is_retryable(error);
    slot->done = 1;
}

static int retryable(int code, int http_status) {
    parley_error error = {code, "", http_status, 0};
    return parley_error_is_retryable(&error);
}

static void check_retryable(void) {
    CHECK(parley_error_is_retryable(NULL) == 0);
    CHECK(retryable(PARLEY_E_INVALID_ARGUMENT, 0) == 0);
    CHECK(retryable(PARLEY_E_INVALID_ARGUMENT, 400) == 0);
    CHECK(retryable(PARLEY_E_UNAUTHORIZED, 401) == 0);
    CHECK(retryable(PARLEY_E_NOT_FOUND, 404) == 0);
    CHECK(retryable(PARLEY_E_CANCELLED, 0) == 0);
    CHECK(retryable(PARLEY_E_SERVER, 409) == 0);
    CHECK(retryable(PARLEY_E_SERVER, 0) == 0);
    CHECK(retryable(12345, 503) == 0);
    CHECK(retryable(PARLEY_E_NETWORK, 0) == 1);
    CHECK(retryable(PARLEY_E_TIMEOUT, 0) == 1);
    CHECK(retryable(PARLEY_E_SERVER, 500) == 1);
    CHECK(retryable(PARLEY_E_SERVER, 503) == 1);
    CHECK(retryable(PARLEY_E_SERVER, 408) == 1);
    CHECK(retryable(PARLEY_E_SERVER, 429) == 1);

    /* A port nothing listens on: bound to find a free one, then closed. */
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    CHECK(probe >= 0 && bind(probe, (struct sockaddr *)&address, sizeof address) == 0);
    CHECK(getsockname(probe, (struct sockaddr *)&address, &length) == 0);
    close(probe);
    char config[128];
    snprintf(config, sizeof config, "{\"server_url\": \"http://127.0.0.1:%d\", \"dispatch_mode\": \"manual\"}",
             ntohs(address.sin_port));
    parley_client *client = NULL;
    int fd = -1;
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    CHECK_STATUS(PARLEY_OK, parley_client_event_fd(client, &fd));
    retry_slot slot = {0, 0, -1};
    CHECK_STATUS(PARLEY_OK, parley_client_request(client, NULL, "GET", "/v3/users", NULL, on_retry_result, &slot));
    for (int round = 0; round < 100 && !slot.done; round++) {
        struct pollfd watch = {fd, POLLIN, 0};
        poll(&watch, 1, 100);
        parley_client_dispatch(client, 0, NULL);
    }
    CHECK(slot.done && slot.code == PARLEY_E_NETWORK && slot.retryable == 1);
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
}

/* Every session, engine and cache function refuses `client` (NULL or not live) with
 * PARLEY_E_INVALID_HANDLE and clears its outputs. */
static void check_refuses_handle(parley_client *client) {
    uint64_t operation = 7;
    char *text = (char *)"untouched";
    int state = 9;
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_connect(client, &operation, "u", "t", ignore_result, NULL));
    CHECK(operation == 0);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_disconnect(client));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_current_user_id(client, &text));
    CHECK(text == NULL);
    operation = 7;
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_perform(client, &operation, "get_current_user", NULL, ignore_result, NULL));
    CHECK(operation == 0);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_set_connection_handler(client, ignore_connection, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_set_event_handler(client, ignore_event, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_reconnect(client));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_set_session_token(client, "t"));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_connection_state(client, &state));
    CHECK(state == PARLEY_STATE_CLOSED);
    text = (char *)"untouched";
    operation = 7;
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_send_user_message(client, &text, &operation, "c", "{\"message\":\"x\"}", ignore_result, NULL));
    CHECK(text == NULL && operation == 0);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_send_file_message(client, NULL, NULL, "c", "{\"url\":\"http://x/y\"}", ignore_progress, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_send_file_messages(client, &text, "c", "[{\"url\":\"http://x/y\"}]", NULL, ignore_file_sent, NULL));
    CHECK(text == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_resend_message(client, NULL, "r", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_cancel_message(client, "r"));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_remove_failed_messages(client, NULL, "c"));
    text = (char *)"untouched";
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_cached_channels(client, &text, NULL, 10));
    CHECK(text == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_cached_channel(client, &text, "c"));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_cached_messages(client, &text, "c", -1, 10));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_cached_message_page(client, &text, "c", -1, 10));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_clear_cached_data(client));
    text = (char *)"untouched";
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_metrics(client, &text));
    CHECK(text == NULL);
    /* A NULL out-parameter is named before the handle is looked at. */
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_metrics(client, NULL));
    CHECK_ERROR_MENTIONS("out_json");
}

/* A live client that is not connected: bad arguments first, then the state errors. */
static void check_engine_arguments(parley_client *client) {
    uint64_t operation = 7;
    char *text = NULL;
    int state = 9;
    /* NULL and invalid arguments. */
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_connect(client, &operation, NULL, "t", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_connect(client, &operation, "u", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_connect(client, &operation, "u", "t", NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_connect(client, &operation, "", "t", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_connect(client, &operation, "u", "bad\ntoken", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_connect(client, &operation, "\xff", "t", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_current_user_id(client, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_perform(client, &operation, NULL, NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_perform(client, &operation, "no_such_operation", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_client_perform(client, &operation, "get_group_channel", "{oops", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_perform(client, &operation, "get_group_channel", "[]", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_perform(client, &operation, "get_group_channel", NULL, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_set_session_token(client, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_set_session_token(client, ""));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_connection_state(client, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_user_message(client, &text, &operation, NULL, "{\"message\":\"x\"}", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_user_message(client, &text, &operation, "c", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_client_send_user_message(client, &text, &operation, "c", "{\"message\":", ignore_result, NULL));
    CHECK_ERROR_MENTIONS("params_json");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_user_message(client, &text, &operation, "c", "{\"message\":\"x\"}", NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_user_message(client, &text, &operation, "c", "{\"message\":\"\"}", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_user_message(client, &text, &operation, "c", "{\"message\":\"x\",\"colour\":1}", ignore_result, NULL));
    CHECK_ERROR_MENTIONS("colour");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_user_message(client, &text, &operation, "c", "{\"message\":7}", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_file_message(client, &text, &operation, "c", "{}", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_file_message(client, &text, &operation, "c", "{\"url\":\"ftp://x\"}", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_IO, parley_client_send_file_message(client, &text, &operation, "c", "{\"file_path\":\"/nonexistent/parley\"}", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_file_message(client, &text, &operation, "c", "{\"file_path\":\"/\"}", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_file_messages(client, &text, "c", "{\"url\":\"http://x/y\"}", NULL, ignore_file_sent, NULL));
    CHECK_ERROR_MENTIONS("array");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_file_messages(client, &text, "c", "[]", NULL, ignore_file_sent, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_file_messages(client, &text, "c", "[{\"url\":\"http://x/y\"}]", NULL, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_file_messages(client, &text, NULL, "[{\"url\":\"http://x/y\"}]", NULL, ignore_file_sent, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_send_file_messages(client, &text, "c", NULL, NULL, ignore_file_sent, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_client_send_file_messages(client, &text, "c", "[{", NULL, ignore_file_sent, NULL));
    CHECK_STATUS(PARLEY_E_IO, parley_client_send_file_messages(client, &text, "c", "[{\"url\":\"http://x/y\"},{\"file_path\":\"/nonexistent/parley\"}]", NULL, ignore_file_sent, NULL));
    CHECK_ERROR_MENTIONS("files[1]");
    CHECK(text == NULL);
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_resend_message(client, &operation, NULL, NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_resend_message(client, &operation, "r", NULL, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cancel_message(client, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_remove_failed_messages(client, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_channels(client, NULL, NULL, 10));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_channels(client, &text, "sideways", 10));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_channels(client, &text, NULL, 0));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_channel(client, NULL, "c"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_channel(client, &text, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_messages(client, NULL, "c", -1, 10));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_messages(client, &text, NULL, -1, 10));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_messages(client, &text, "c", -7, 10));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_messages(client, &text, "c", -1, 100000));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_message_page(client, NULL, "c", -1, 10));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_message_page(client, &text, NULL, -1, 10));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_message_page(client, &text, "c", -7, 10));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_cached_message_page(client, &text, "c", -1, 0));
    CHECK(text == NULL);
    /* Well-formed, but there is no session or cache yet. */
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_current_user_id(client, &text));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_reconnect(client));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_set_session_token(client, "t"));
    CHECK_STATUS(PARLEY_OK, parley_client_connection_state(client, &state));
    CHECK(state == PARLEY_STATE_CLOSED);
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_send_user_message(client, &text, &operation, "c", "{\"message\":\"x\"}", ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_resend_message(client, &operation, "r", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_cancel_message(client, "r"));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_remove_failed_messages(client, NULL, "c"));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_cached_channels(client, &text, NULL, 10));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_cached_messages(client, &text, "c", -1, 10));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_cached_message_page(client, &text, "c", -1, 10));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_clear_cached_data(client));
    CHECK(text == NULL);
    /* The metrics need no session: zero counts and a closed stream. */
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_metrics(client, NULL));
    CHECK_ERROR_MENTIONS("out_json");
    CHECK_STATUS(PARLEY_OK, parley_client_metrics(client, &text));
    CHECK(text != NULL && strstr(text, "\"connection_state\":\"closed\"") != NULL);
    CHECK(text != NULL && strstr(text, "\"sends_total\":0") != NULL);
    parley_free(text);
    text = NULL;
    CHECK_STATUS(PARLEY_OK, parley_client_disconnect(client)); /* idempotent */
    CHECK_STATUS(PARLEY_OK, parley_client_set_connection_handler(client, ignore_connection, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_set_connection_handler(client, NULL, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_set_event_handler(client, ignore_event, NULL));
    CHECK_STATUS(PARLEY_OK, parley_client_set_event_handler(client, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_operations(NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_event_categories(NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_configuration_keys(NULL));
    CHECK_STATUS(PARLEY_OK, parley_operations(&text));
    CHECK(text != NULL && strstr(text, "create_group_channel") != NULL);
    CHECK(text != NULL && strstr(text, "\"fixed\":{\"freeze\":true}") != NULL);
    parley_free(text);
    text = NULL;
    CHECK_STATUS(PARLEY_OK, parley_configuration_keys(&text));
    CHECK(text != NULL && strstr(text, "\"name\":\"request_timeout_ms\"") != NULL);
    parley_free(text);
    text = NULL;
    CHECK_STATUS(PARLEY_OK, parley_event_categories(&text));
    CHECK(text != NULL && strstr(text, "\"channel_changelog_deleted\"") != NULL);
    parley_free(text);
}

/* Every connection event and freshness state has the name of its constant, lower-cased
 * after the prefix; other values are "unknown", as for status codes. */
static void check_names(void) {
    static const struct { int value; const char *name; } events[] = {
        {PARLEY_CONNECTION_CONNECTING, "connecting"},
        {PARLEY_CONNECTION_CONNECTED, "connected"},
        {PARLEY_CONNECTION_RECONNECT_STARTED, "reconnect_started"},
        {PARLEY_CONNECTION_RECONNECT_SUCCEEDED, "reconnect_succeeded"},
        {PARLEY_CONNECTION_RECONNECT_FAILED, "reconnect_failed"},
        {PARLEY_CONNECTION_DISCONNECTED, "disconnected"},
        {PARLEY_CONNECTION_SESSION_TOKEN_REQUIRED, "session_token_required"},
    };
    static const struct { int value; const char *name; } states[] = {
        {PARLEY_FRESHNESS_LIVE, "live"},
        {PARLEY_FRESHNESS_CACHED, "cached"},
        {PARLEY_FRESHNESS_CATCHING_UP, "catching_up"},
        {PARLEY_FRESHNESS_OFFLINE, "offline"},
    };
    for (size_t index = 0; index < sizeof events / sizeof events[0]; index++) {
        const char *name = parley_connection_event_name(events[index].value);
        if (name == NULL || strcmp(name, events[index].name) != 0) {
            fprintf(stderr, "parley_connection_event_name(%d) is \"%s\", expected \"%s\"\n", events[index].value,
                    name ? name : "(null)", events[index].name);
            check_failures++;
        }
        /* A static string: the same pointer every time, never to be freed. */
        CHECK(parley_connection_event_name(events[index].value) == name);
    }
    for (size_t index = 0; index < sizeof states / sizeof states[0]; index++) {
        const char *name = parley_freshness_name(states[index].value);
        if (name == NULL || strcmp(name, states[index].name) != 0) {
            fprintf(stderr, "parley_freshness_name(%d) is \"%s\", expected \"%s\"\n", states[index].value,
                    name ? name : "(null)", states[index].name);
            check_failures++;
        }
        CHECK(parley_freshness_name(states[index].value) == name);
    }
    int unknown_events[] = {0, 8, -1, 12345}, unknown_states[] = {0, 5, -1, 12345};
    for (size_t index = 0; index < 4; index++) {
        CHECK(strcmp(parley_connection_event_name(unknown_events[index]), "unknown") == 0);
        CHECK(strcmp(parley_freshness_name(unknown_states[index]), "unknown") == 0);
    }
}

/* The process-wide runtime: its settings are checked, and fixed once a client started it. */
static void check_runtime_before_clients(void) {
    char *info = NULL;
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_runtime_configure(NULL));
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_runtime_configure("{"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_runtime_configure("{\"network_threads\": 0}"));
    CHECK_ERROR_MENTIONS("network_threads");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_runtime_configure("{\"network_threads\": 65}"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_runtime_configure("{\"network_threads\": \"2\"}"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_runtime_configure("{\"network_thread\": 2}"));
    CHECK_ERROR_MENTIONS("network_thread");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_runtime_configure("{\"callback_threads\": 0}"));
    CHECK_ERROR_MENTIONS("callback_threads");
    CHECK_STATUS(PARLEY_OK, parley_runtime_configure("{}"));
    CHECK_STATUS(PARLEY_OK, parley_runtime_configure("{\"network_threads\": 3, \"callback_threads\": 3}"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_runtime_info(NULL));
    CHECK_STATUS(PARLEY_OK, parley_runtime_info(&info));
    CHECK(info != NULL && strstr(info, "\"network_threads\":0") != NULL);
    parley_free(info);
}

static void check_runtime_with_a_client(void) {
    char *info = NULL;
    CHECK_STATUS(PARLEY_OK, parley_runtime_info(&info));
    CHECK(info != NULL && strstr(info, "\"network_threads\":3") != NULL);
    parley_free(info);
    CHECK_STATUS(PARLEY_OK, parley_runtime_configure("{\"network_threads\": 3}"));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_runtime_configure("{\"network_threads\": 2}"));
    CHECK_ERROR_MENTIONS("before the first client");
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_runtime_configure("{\"callback_threads\": 3, \"network_threads\": 2}"));
    CHECK_STATUS(PARLEY_OK, parley_runtime_info(&info));
    CHECK(info != NULL && strstr(info, "\"network_threads\":3") != NULL && strstr(info, "\"callback_threads\":3") != NULL);
    parley_free(info);
}

int main(void) {
    parley_client *client = NULL;
    int fd = -1, ran = -1;
    uint64_t operation = 99;

    /* First, while no client has started the runtime. */
    check_runtime_before_clients();

    /* Version and names. */
    CHECK(strcmp(parley_version(), PARLEY_VERSION_STRING) == 0);
    CHECK(strcmp(parley_error_name(PARLEY_OK), "ok") == 0);
    CHECK(strcmp(parley_error_name(PARLEY_E_CANCELLED), "cancelled") == 0);
    CHECK(strcmp(parley_error_name(12345), "unknown") == 0);
    check_names();
    CHECK(parley_last_error_message() != NULL);
    parley_free(NULL);
    check_retryable();

    /* NULL handles. */
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_destroy(NULL));
    CHECK_ERROR_MENTIONS("NULL");
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_event_fd(NULL, &fd));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_dispatch(NULL, 0, &ran));
    CHECK(ran == 0);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_set_log_callback(NULL, ignore_log, NULL, PARLEY_LOG_INFO));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_post(NULL, ignore_callback, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_request(NULL, &operation, "GET", "/v3/users", NULL, ignore_result, NULL));
    CHECK(operation == 0);
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_cancel(NULL, 1));
    check_refuses_handle(NULL);

    /* A pointer that was never a handle. */
    int not_a_client = 0;
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_destroy((parley_client *)&not_a_client));
    CHECK_ERROR_MENTIONS("not a live client handle");

    /* Configuration errors. */
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_create(NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_client_create(&client, "{\"server_url\": "));
    CHECK(client == NULL);
    CHECK_ERROR_MENTIONS("config_json");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_create(&client, "{\"sever_url\": \"http://x\"}"));
    CHECK_ERROR_MENTIONS("sever_url");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_create(&client, "{\"dispatch_mode\": 1}"));
    CHECK_ERROR_MENTIONS("dispatch_mode");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_create(&client, "{\"dispatch_mode\": \"sometimes\"}"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_create(&client, "{\"server_url\": \"ftp://x\"}"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_create(&client, "{\"request_timeout_ms\": -5}"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_create(&client, "[1,2]"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_create(&client, "{\"log_level\": \"\xff\"}"));
    CHECK(client == NULL);

    /* A live client in thread mode: wrong-mode calls and bad arguments. */
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, NULL));
    CHECK(client != NULL);
    check_runtime_with_a_client();
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_event_fd(client, &fd));
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_dispatch(client, 0, &ran));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_event_fd(client, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_post(client, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_set_log_callback(client, ignore_log, NULL, 9));
    CHECK_STATUS(PARLEY_OK, parley_client_set_log_callback(client, NULL, NULL, PARLEY_LOG_OFF));
    /* No server_url configured. */
    CHECK_STATUS(PARLEY_E_INVALID_STATE, parley_client_request(client, &operation, "GET", "/v3/users", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_NOT_FOUND, parley_client_cancel(client, 1));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));

    /* Argument checks on a client with a server URL (nothing listens on port 9). */
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, "{\"server_url\": \"http://127.0.0.1:9\", \"dispatch_mode\": \"manual\"}"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_request(client, NULL, NULL, "/v3/users", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_request(client, NULL, "GET", NULL, NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_request(client, NULL, "BREW", "/v3/users", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_request(client, NULL, "GET", "v3/users", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_request(client, NULL, "GET", "/v3/a b", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_JSON, parley_client_request(client, NULL, "POST", "/v3/users", "{nope", ignore_result, NULL));
    CHECK_ERROR_MENTIONS("body_json");
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_request(client, NULL, "GET", "/v3/users", NULL, NULL, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_dispatch(client, -1, &ran));
    CHECK_STATUS(PARLEY_E_NOT_FOUND, parley_client_cancel(client, 424242));
    CHECK_STATUS(PARLEY_OK, parley_client_event_fd(client, &fd));
    CHECK(fd >= 0);
    check_engine_arguments(client);
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));

    /* Use after destroy: every call refuses the handle. */
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_destroy(client));
    CHECK_ERROR_MENTIONS("not a live client handle");
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_event_fd(client, &fd));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_dispatch(client, 0, &ran));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_set_log_callback(client, ignore_log, NULL, PARLEY_LOG_INFO));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_post(client, ignore_callback, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_request(client, NULL, "GET", "/v3/users", NULL, ignore_result, NULL));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_cancel(client, 1));
    check_refuses_handle(client);
    check_refuses_handle((parley_client *)&not_a_client);

    return check_report("test_abi_errors");
}
