/* minimal_thread: one REST request, its answer run on a worker of the library's callback
 * pool (the default "thread" dispatch mode) while this thread waits for it.
 *
 *   minimal_thread SERVER_URL API_TOKEN
 *   minimal_thread http://127.0.0.1:8080 "$PARLEY_API_TOKEN"
 *
 * docs/C-API.md shows this file whole. */
#include <parley.h>
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t answered = PTHREAD_COND_INITIALIZER;
static int done = 0, failed = 0;

/* Runs on a callback pool worker: what main reads is handed over under the lock. */
static void on_answer(void *user_data, const parley_error *error, const char *json) {
    (void)user_data;
    if (error) fprintf(stderr, "failed: %s (%s, HTTP %d)\n", error->message, parley_error_name(error->code), error->http_status);
    else printf("%s\n", json);
    pthread_mutex_lock(&lock);
    failed = error != NULL;
    done = 1;
    pthread_cond_signal(&answered);
    pthread_mutex_unlock(&lock);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SERVER_URL API_TOKEN\n", argv[0]);
        return 2;
    }
    char config[1024];  /* the arguments go into JSON as they are: no quotes or backslashes in them */
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"api_token\": \"%s\"}", argv[1], argv[2]);
    parley_client *client;
    if (parley_client_create(&client, config) != PARLEY_OK) {
        fprintf(stderr, "%s\n", parley_last_error_message());
        return 1;
    }
    if (parley_client_request(client, NULL, "GET", "/v3/users", NULL, on_answer, NULL) != PARLEY_OK) {
        fprintf(stderr, "%s\n", parley_last_error_message());
        failed = 1;
    } else {
        pthread_mutex_lock(&lock);
        while (!done) pthread_cond_wait(&answered, &lock);
        pthread_mutex_unlock(&lock);
    }
    /* Destroy waits for a callback that is running; none runs after it returns. */
    parley_client_destroy(client);
    return failed;
}
