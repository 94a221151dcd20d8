/* minimal_manual: one REST request, its answer run on this thread (manual dispatch).
 *
 *   minimal_manual SERVER_URL API_TOKEN
 *   minimal_manual http://127.0.0.1:8080 "$PARLEY_API_TOKEN"
 *
 * docs/C-API.md shows this file whole. */
#include <parley.h>
#include <poll.h>
#include <stdio.h>

static int done = 0, failed = 0;

/* Runs inside parley_client_dispatch, on the thread that calls it. */
static void on_answer(void *user_data, const parley_error *error, const char *json) {
    (void)user_data;
    if (error) fprintf(stderr, "failed: %s (%s, HTTP %d)\n", error->message, parley_error_name(error->code), error->http_status);
    else printf("%s\n", json);
    failed = error != NULL;
    done = 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SERVER_URL API_TOKEN\n", argv[0]);
        return 2;
    }
    char config[1024];  /* the arguments go into JSON as they are: no quotes or backslashes in them */
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"api_token\": \"%s\", \"dispatch_mode\": \"manual\"}",
             argv[1], argv[2]);
    parley_client *client;
    if (parley_client_create(&client, config) != PARLEY_OK) {
        fprintf(stderr, "%s\n", parley_last_error_message());
        return 1;
    }
    if (parley_client_request(client, NULL, "GET", "/v3/users", NULL, on_answer, NULL) != PARLEY_OK) {
        fprintf(stderr, "%s\n", parley_last_error_message());
        failed = 1;
    } else {
        int fd;
        parley_client_event_fd(client, &fd);  /* readable while callbacks wait to run */
        while (!done) {
            struct pollfd p = {fd, POLLIN, 0};
            poll(&p, 1, -1);  /* an event loop watches fd beside its other sources */
            parley_client_dispatch(client, 0, NULL);
        }
    }
    parley_client_destroy(client);
    return failed;
}
