/* bench_open: what opening a big cache costs.
 *
 *   bench_open SERVER_URL API_TOKEN [CACHE_MB]
 *
 * A user's cache is filled with copies of a real cached message (raw sqlite3 on the cache
 * file, each copy with its own id and a ~2 KB data field) until the file holds CACHE_MB
 * (default 700) megabytes; then parley_client_connect is timed to its completion (cache
 * opened, session started) with that cache, beside the same with an empty cache (the
 * floor: the server round trip). Median of 5 connects each, a new client every time. */
#define _POSIX_C_SOURCE 200809L
#include "bench_support.h"
#include <stdatomic.h>
#include <unistd.h>

static atomic_int received = 0;

static void on_event(void *user_data, const char *category, const char *channel_url, const char *payload) {
    (void)user_data; (void)channel_url; (void)payload;
    if (strcmp(category, "message_received") == 0) atomic_fetch_add(&received, 1);
}

/* Connects a new client on cache_dir and returns the time to the completion (us). */
static double timed_connect(const char *url, const char *cache_dir, const char *user, const char *token) {
    char config[1024];
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s\"}", url, cache_dir);
    parley_client *client = NULL;
    if (parley_client_create(&client, config) != PARLEY_OK) return -1;
    waiter w = WAITER_INIT;
    double t0 = now_us();
    if (parley_client_connect(client, NULL, user, token, on_result, &w) != PARLEY_OK) return -1;
    wait_done(&w);
    double elapsed = now_us() - t0;
    if (w.code != 0) fprintf(stderr, "connect failed: %s\n", w.text);
    parley_client_destroy(client);
    return w.code == 0 ? elapsed : -1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SERVER_URL API_TOKEN [CACHE_MB]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1], *api_token = argv[2];
    int megabytes = argc > 3 ? atoi(argv[3]) : 700;
    char body[512], token[256], user[64], channel[64], path[256];
    char big_dir[] = "/tmp/parley-bench-open-XXXXXX", empty_dir[] = "/tmp/parley-bench-empty-XXXXXX";
    if (mkdtemp(big_dir) == NULL || mkdtemp(empty_dir) == NULL || megabytes < 1) return 1;
    waiter w = WAITER_INIT;
    parley_client *root = admin_client(url, api_token);
    if (root == NULL) return 1;
    if (!solo_user_and_channel(root, &w, "open", user, sizeof user, channel, sizeof channel, token, sizeof token)) return 1;

    /* A real cached message to copy: received live by a connected client. */
    parley_client *client = connected_client(url, big_dir, user, token, on_event);
    if (client == NULL) return 1;
    snprintf(path, sizeof path, "/v3/group_channels/%s/messages", channel);
    snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"%s\", \"message\": \"template\"}", user);
    if (!admin(root, &w, "POST", path, body)) return 1;
    for (int i = 0; i < 500 && atomic_load(&received) < 1; i++) sleep_ms(10);
    parley_client_destroy(client);
    if (atomic_load(&received) < 1) { fprintf(stderr, "no message arrived\n"); return 1; }

    char find[512], cache_file[1024];
    const char *found = cache_file_in(big_dir);
    if (found == NULL) return 1;
    snprintf(cache_file, sizeof cache_file, "%s", found);
    printf("filling the cache to %d MB...\n", megabytes);
    double filling = now_us();
    if (!add_message_copies(cache_file, 0, 2048, (long long)megabytes << 20)) return 1;
    printf("  %lld MB in %.1f s\n", file_bytes(cache_file) >> 20, (now_us() - filling) / 1e6);

    double big[5], empty[5];
    for (int i = 0; i < 5; i++) {
        big[i] = timed_connect(url, big_dir, user, token);
        char fresh[300];
        snprintf(fresh, sizeof fresh, "%s/%d", empty_dir, i);
        empty[i] = timed_connect(url, fresh, user, token);
        if (big[i] < 0 || empty[i] < 0) return 1;
    }
    double big_median = median(big, 5), empty_median = median(empty, 5);
    printf("\nConnect to completion (median of 5)\n");
    printf("  with a %4lld MB cache      %8.1f ms\n", file_bytes(cache_file) >> 20, big_median / 1e3);
    printf("  with an empty cache (floor) %7.1f ms\n", empty_median / 1e3);
    char measure[96], figure[64], comparison[96];
    snprintf(measure, sizeof measure, "connect with a %lld MB cache (to completion)", file_bytes(cache_file) >> 20);
    snprintf(figure, sizeof figure, "%.1f ms", big_median / 1e3);
    snprintf(comparison, sizeof comparison, "empty cache %.1f ms", empty_median / 1e3);
    summary_row(measure, figure, comparison, "<= 50 ms");
    parley_client_destroy(root);
    snprintf(find, sizeof find, "rm -rf '%s' '%s'", big_dir, empty_dir);
    return system(find) == 0 ? 0 : 1;
}
