/* raw_request: sends one REST request to a Parley server and prints the JSON answer.
 *
 *   raw_request URL API_TOKEN METHOD PATH [BODY_JSON]
 *   raw_request http://127.0.0.1:8080 secret GET /v3/users
 *
 * Shows manual dispatch: the client's event fd is watched with poll(2) and callbacks
 * run on this thread with parley_client_dispatch. The configuration is built with jansson. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <parley.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

static int finished = 0;
static int exit_code = 0;

static void on_answer(void *user_data, const parley_error *error, const char *result_json) {
    (void)user_data;
    if (error != NULL) {
        fprintf(stderr, "request failed: %s [%s", error->message, parley_error_name(error->code));
        if (error->http_status != 0) fprintf(stderr, ", HTTP %d, server code %d", error->http_status, error->server_code);
        fprintf(stderr, "]\n");
        exit_code = 1;
    } else {
        printf("%s\n", result_json);
    }
    finished = 1;
}

static void on_log(void *user_data, int level, const char *message) {
    (void)user_data;
    fprintf(stderr, "[parley %d] %s\n", level, message);
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: %s URL API_TOKEN METHOD PATH [BODY_JSON]\n", argv[0]);
        return 2;
    }
    json_t *settings = json_pack("{s:s, s:s, s:s}", "server_url", argv[1], "api_token", argv[2], "dispatch_mode", "manual");
    char *config = json_dumps(settings, JSON_COMPACT);
    json_decref(settings);

    parley_client *client = NULL;
    int created = parley_client_create(&client, config);
    free(config);
    if (created != PARLEY_OK) {
        fprintf(stderr, "cannot create client: %s\n", parley_last_error_message());
        return 1;
    }
    parley_client_set_log_callback(client, on_log, NULL, PARLEY_LOG_WARNING);
    int fd = -1;
    parley_client_event_fd(client, &fd);
    if (parley_client_request(client, NULL, argv[3], argv[4], argc == 6 ? argv[5] : NULL, on_answer, NULL) != PARLEY_OK) {
        fprintf(stderr, "cannot send: %s\n", parley_last_error_message());
        parley_client_destroy(client);
        return 1;
    }
    while (!finished) {
        struct pollfd watch = {fd, POLLIN, 0};
        if (poll(&watch, 1, -1) < 0) break;
        parley_client_dispatch(client, 0, NULL);
    }
    parley_client_destroy(client);
    return exit_code;
}
