/* bench_catchup: catching up after being offline, and reading the cache meanwhile.
 *
 *   bench_catchup SERVER_URL API_TOKEN [MESSAGES] [CHANNELS]
 *
 * A user connects (its stream opens, no event arrives), disconnects keeping its cache;
 * MESSAGES messages (default 10,000) are posted into CHANNELS channels (default 10) it is
 * a member of; it connects again. Measured from the connect call: until every missed
 * message is in its cache (the event handler counted MESSAGES message_received events, and
 * each channel's cached messages are checked after), and meanwhile the latency of cached
 * pages (parley_client_cached_messages, 50 newest of a channel) read in a loop on another
 * thread, beside the same reads on an idle client. The server must keep at least MESSAGES
 * events for resume (scripts/bench.sh starts it with --event-retention). */
#define _POSIX_C_SOURCE 200809L
#include "bench_support.h"
#include <stdatomic.h>
#include <unistd.h>

static atomic_int received = 0;
static _Atomic double first_event_at = 0;
/* Names are unique per run (several runs may share one server). */
static char run[32];
static atomic_int catching_up = 0;

static void on_event(void *user_data, const char *category, const char *channel_url, const char *payload) {
    (void)user_data; (void)channel_url; (void)payload;
    if (strcmp(category, "message_received") == 0 && atomic_fetch_add(&received, 1) == 0) atomic_store(&first_event_at, now_us());
}

typedef struct {
    parley_client *client;
    int channels;
    double *samples;
    int capacity;
    int count;
} reader_state;

/* Reads the newest page of each channel in turn until catching_up is 0. */
static void *reader(void *argument) {
    reader_state *state = argument;
    char channel[64], *page = NULL;
    for (int i = 0; atomic_load(&catching_up) && state->count < state->capacity; i++) {
        snprintf(channel, sizeof channel, "catchup-%s-%d", run, i % state->channels);
        double t0 = now_us();
        if (parley_client_cached_messages(state->client, &page, channel, -1, 50) == PARLEY_OK) {
            state->samples[state->count++] = now_us() - t0;
            parley_free(page);
        }
        sleep_ms(2);
    }
    return NULL;
}

static int count_messages(const char *json) {
    int count = 0;
    for (const char *at = json; (at = strstr(at, "\"message_id\":")) != NULL; at++) count++;
    return count;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SERVER_URL API_TOKEN [MESSAGES] [CHANNELS]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1], *api_token = argv[2];
    int messages = argc > 3 ? atoi(argv[3]) : 10000;
    int channels = argc > 4 ? atoi(argv[4]) : 10;
    if (messages < channels || channels < 1 || channels > 100) return 2;
    char config[1024], body[512], path[256], token[256], cache_dir[] = "/tmp/parley-bench-catchup-XXXXXX";
    if (mkdtemp(cache_dir) == NULL) return 1;
    waiter w = WAITER_INIT;
    snprintf(run, sizeof run, "%ld-%d", (long)time(NULL), (int)getpid());
    char me[64], bob[64];
    snprintf(me, sizeof me, "catchup-me-%s", run);
    snprintf(bob, sizeof bob, "catchup-bob-%s", run);

    parley_client *root = admin_client(url, api_token);
    if (root == NULL) return 1;
    snprintf(body, sizeof body, "{\"user_id\": \"%s\"}", me);
    if (!admin(root, &w, "POST", "/v3/users", body)) return 1;
    snprintf(body, sizeof body, "{\"user_id\": \"%s\"}", bob);
    if (!admin(root, &w, "POST", "/v3/users", body)) return 1;
    for (int c = 0; c < channels; c++) {
        snprintf(body, sizeof body, "{\"user_ids\": [\"%s\", \"%s\"], \"channel_url\": \"catchup-%s-%d\"}", me, bob, run, c);
        if (!admin(root, &w, "POST", "/v3/group_channels", body)) return 1;
    }
    if (!user_token(root, &w, me, token, sizeof token)) return 1;

    parley_client *client = connected_client(url, cache_dir, me, token, on_event);
    if (client == NULL) return 1;
    const char *variant = search_index_variant(cache_dir);
    /* Idle reads: the same pages with nothing else running. */
    reader_state idle = {client, channels, malloc(sizeof(double) * 500), 500, 0};
    atomic_store(&catching_up, 1);
    reader(&idle);
    parley_client_disconnect(client);

    printf("posting %d messages into %d channels while the user is offline...\n", messages, channels);
    double posted_at = now_us();
    for (int i = 0; i < messages; i++) {
        snprintf(path, sizeof path, "/v3/group_channels/catchup-%s-%d/messages", run, i % channels);
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"%s\", \"message\": \"missed %d\"}", bob, i);
        if (!admin(root, &w, "POST", path, body)) return 1;
    }
    printf("  posted in %.1f s\n", (now_us() - posted_at) / 1e6);

    reader_state busy = {client, channels, malloc(sizeof(double) * 100000), 100000, 0};
    atomic_store(&received, 0);
    atomic_store(&catching_up, 1);
    double started = now_us();
    if (parley_client_connect(client, NULL, me, token, on_result, &w) != PARLEY_OK) return 1;
    pthread_t thread;
    pthread_create(&thread, NULL, reader, &busy);
    wait_done(&w);
    double connected = now_us() - started;
    while (atomic_load(&received) < messages && now_us() - started < 300e6) sleep_ms(1);
    double converged = now_us() - started;
    atomic_store(&catching_up, 0);
    pthread_join(thread, NULL);
    int complete = atomic_load(&received) >= messages;
    for (int c = 0; c < channels && complete; c++) {
        char channel[64], *page = NULL;
        snprintf(channel, sizeof channel, "catchup-%s-%d", run, c);
        if (parley_client_cached_messages(client, &page, channel, -1, 1000) != PARLEY_OK) return 1;
        int expected = messages / channels + (c < messages % channels ? 1 : 0);
        if (count_messages(page) < (expected < 1000 ? expected : 1000)) complete = 0;
        parley_free(page);
    }
    printf("\nCatch-up of %d messages in %d channels (from the connect call)\n", messages, channels);
    printf("  connect returned after            %8.1f ms\n", connected / 1e3);
    printf("  first missed message applied after %7.1f ms\n", (atomic_load(&first_event_at) - started) / 1e3);
    printf("  every message cached after        %8.1f ms   %s\n", converged / 1e3, complete ? "(all there)" : "(INCOMPLETE)");
    printf("  events applied                    %8.0f /s\n", atomic_load(&received) / (converged / 1e6));
    printf("\nCached page (50 newest) while catching up, %d reads\n", busy.count);
    printf("  during catch-up   p50 %8.2f ms   p99 %8.2f ms   max %8.2f ms\n", quantile(busy.samples, busy.count, 0.5) / 1e3,
           quantile(busy.samples, busy.count, 0.99) / 1e3, quantile(busy.samples, busy.count, 1.0) / 1e3);
    printf("  idle client       p50 %8.2f ms   p99 %8.2f ms   max %8.2f ms\n", quantile(idle.samples, idle.count, 0.5) / 1e3,
           quantile(idle.samples, idle.count, 0.99) / 1e3, quantile(idle.samples, idle.count, 1.0) / 1e3);
    char figure[64], comparison[96], measure[96];
    snprintf(measure, sizeof measure, "catch-up: %d messages in %d channels, connect to all cached%s", messages, channels, variant);
    snprintf(figure, sizeof figure, "%.0f ms%s", converged / 1e3, complete ? "" : " (INCOMPLETE)");
    snprintf(comparison, sizeof comparison, "server's replay alone: first event after %.0f ms", (atomic_load(&first_event_at) - started) / 1e3);
    summary_row(measure, figure, comparison, "<= 2000 ms");
    snprintf(figure, sizeof figure, "p99 %.2f ms", quantile(busy.samples, busy.count, 0.99) / 1e3);
    snprintf(comparison, sizeof comparison, "idle client p99 %.2f ms", quantile(idle.samples, idle.count, 0.99) / 1e3);
    if (strcmp(variant, " [no search index]") != 0) {
        snprintf(measure, sizeof measure, "cached page (50) during that catch-up%s", variant);
        summary_row(measure, figure, comparison, "p99 <= 10 ms");
    }
    parley_client_destroy(client);
    parley_client_destroy(root);
    free(idle.samples);
    free(busy.samples);
    snprintf(config, sizeof config, "rm -rf '%s'", cache_dir);
    return system(config) == 0 && complete ? 0 : 1;
}
