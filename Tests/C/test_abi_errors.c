/* Every C function rejects NULL, destroyed and wrong handles, and bad arguments, with a
 * status code and a message — never a crash. */
#include "check.h"

static void ignore_result(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)error; (void)json;
}
static void ignore_callback(void *user_data) { (void)user_data; }
static void ignore_log(void *user_data, int level, const char *message) { (void)user_data; (void)level; (void)message; }

int main(void) {
    parley_client *client = NULL;
    int fd = -1, ran = -1;
    uint64_t operation = 99;

    /* Version and names. */
    CHECK(strcmp(parley_version(), PARLEY_VERSION_STRING) == 0);
    CHECK(strcmp(parley_error_name(PARLEY_OK), "ok") == 0);
    CHECK(strcmp(parley_error_name(PARLEY_E_CANCELLED), "cancelled") == 0);
    CHECK(strcmp(parley_error_name(12345), "unknown") == 0);
    CHECK(parley_last_error_message() != NULL);
    parley_free(NULL);

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

    return check_report("test_abi_errors");
}
