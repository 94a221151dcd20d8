/* bench_views: the message collection over a big cache.
 *
 *   bench_views SERVER_URL API_TOKEN [CACHED_MESSAGES] [SMALL_MESSAGES]
 *
 * A user's cache holds CACHED_MESSAGES (default 100,000) messages of one channel: real ones
 * fetched through a collection (so that the cache provably holds them continuously), then
 * copies written with raw sqlite3 below them. Measured:
 *   - a cached page of 100 through parley_message_collection_load_previous (inside the
 *     fetched range, so from the cache), start to completion, against the raw sqlite3 read
 *     of the same 100 rows (P1): 15 pages on each of 8 views, each view's pages once its
 *     start has been confirmed by the server (until then the view's own reload of its start
 *     runs, and a page waits behind it); and the same call on a view with nothing before it: what
 *     the view's order costs without reading anything (the caller's thread to the engine
 *     queue, the engine queue to the callback thread); the raw read also on one connection
 *     kept open (as the engine's), and the floor the rules set, in plain C (page_floor.h);
 *   - opening a collection at the newest end: parley_message_collection_create + start to
 *     its cache result, the first page (P5);
 *   - the resident memory of the process with 10 collections open on that cache, beside the
 *     same with a cache of SMALL_MESSAGES (default 1,000) (P6);
 *   - parley_client_metrics with those 10 collections open: the first call, which counts the
 *     cache's rows; calls in a row (nothing committed since: the figures kept); and calls
 *     right after a commit (the sizes read again, the rows not yet counted again), beside
 *     parley_client_connection_state, a call that only waits for the engine queue;
 *   - process start to the first page: this program run again (`--first-page`), which
 *     creates a client, connects and opens the collection, timed from before its exec to
 *     the line it prints when the first page arrived (P5);
 *   - with PARLEY_BENCH_CACHE_KEY set, P5's first page and P1's pages on a compact plain copy
 *     of the big cache and on the same copy encrypted with that key (bench_support.h,
 *     `twin_copies`): a fresh client on each, alternated, 9 rounds; and the time the first
 *     keyed connect takes to encrypt the copy. */
#define _POSIX_C_SOURCE 200809L
#include "bench_support.h"
#include "page_floor.h"
#include <sqlite3.h>
#include <stdatomic.h>
#include <unistd.h>

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int done, code;
    double at;
    size_t bytes;
} page_slot;

static void page_init(page_slot *slot) {
    memset(slot, 0, sizeof *slot);
    pthread_mutex_init(&slot->mutex, NULL);
    pthread_cond_init(&slot->cond, NULL);
}

static void on_page(void *user_data, const parley_error *error, const char *json) {
    page_slot *slot = user_data;
    double now = now_us();
    pthread_mutex_lock(&slot->mutex);
    slot->code = error ? error->code : 0;
    slot->bytes = json ? strlen(json) : 0;
    slot->at = now;
    slot->done = 1;
    pthread_cond_broadcast(&slot->cond);
    pthread_mutex_unlock(&slot->mutex);
}

static void wait_page(page_slot *slot) {
    pthread_mutex_lock(&slot->mutex);
    while (!slot->done) pthread_cond_wait(&slot->cond, &slot->mutex);
    pthread_mutex_unlock(&slot->mutex);
}

static void on_ignored(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)error; (void)json;
}

/* Up to `count` pages of 100 loaded backwards on `view`, each one's time appended to `times`
 * at `*filled`. Returns 0 when a load could not start. */
static int load_previous_pages(parley_message_collection *view, int count, double *times, int *filled) {
    for (int i = 0; i < count; i++) {
        page_slot page;
        page_init(&page);
        double start = now_us();
        if (parley_message_collection_load_previous(view, on_page, &page) != PARLEY_OK) return 0;
        wait_page(&page);
        if (page.code != 0) break;
        times[(*filled)++] = page.at - start;
    }
    return 1;
}

static long rss_kb(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (status && fgets(line, sizeof line, status)) {
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    }
    if (status) fclose(status);
    return kb;
}

/* P1's pages: 15 on each of this many views. */
enum { page_views = 8, pages_per_view = 15 };
/* parley_client_metrics: calls in a row, and calls each right after a commit. */
enum { metrics_calls = 200, metrics_after_commit = 5 };

typedef struct {
    double page_us[page_views * pages_per_view], hop_us[pages_per_view], first_page_us;
    double metrics_us[metrics_calls], state_us[metrics_calls], metrics_after_commit_us[metrics_after_commit];
    int pages, hops;
    long rss_kb;
} view_figures;

/* One parley_client_metrics call, timed; -1 when it fails or does not count `views` open views. */
static double time_metrics(parley_client *client, int views) {
    char *json = NULL, expected[64];
    double start = now_us();
    if (parley_client_metrics(client, &json) != PARLEY_OK) return -1;
    double took = now_us() - start;
    snprintf(expected, sizeof expected, "\"open_views\":%d", views);
    int counted = strstr(json, expected) != NULL;
    parley_free(json);
    return counted ? took : -1;
}

/* The metrics with `views` views open: in a row, beside connection_state, then each right after
 * a message was posted and applied (the cache committed, so its figures are counted again). */
static int measure_metrics(parley_client *client, parley_client *root, waiter *w, const char *user, const char *channel, int views,
                           view_figures *out) {
    for (int i = 0; i < metrics_calls; i++) {
        out->metrics_us[i] = time_metrics(client, views);
        if (out->metrics_us[i] < 0) return 0;
        int state = 0;
        double start = now_us();
        if (parley_client_connection_state(client, &state) != PARLEY_OK) return 0;
        out->state_us[i] = now_us() - start;
    }
    char path[256], body[256];
    snprintf(path, sizeof path, "/v3/group_channels/%s/messages", channel);
    for (int i = 0; i < metrics_after_commit; i++) {
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"%s\", \"message\": \"counted %d\"}", user, i);
        if (!admin(root, w, "POST", path, body)) return 0;
        sleep_ms(300);  /* the event arrives and is applied */
        out->metrics_after_commit_us[i] = time_metrics(client, views);
        if (out->metrics_after_commit_us[i] < 0) return 0;
    }
    return 1;
}

/* Connects on cache_dir, measures, disconnects. */
static int measure(parley_client *root, waiter *w, const char *url, const char *cache_dir, const char *user, const char *token,
                   const char *channel, int pages, view_figures *out) {
    parley_client *client = connected_client_keyed(url, cache_dir, user, token, NULL, "");
    if (client == NULL) return 0;
    /* The view's own cost: opened once the connection's catch-up has run (right after
     * connect the first page would also wait for that catch-up's writes). */
    sleep_ms(500);
    /* The first page of a new view at the newest end. */
    parley_message_collection *views[10] = {0};
    page_slot first;
    page_init(&first);
    double t0 = now_us();
    if (parley_message_collection_create(&views[0], client, channel, PARLEY_STARTING_POINT_NEWEST, "{\"previous_result_size\": 100}", NULL) !=
            PARLEY_OK ||
        parley_message_collection_start(views[0], on_page, on_ignored, &first) != PARLEY_OK) {
        return 0;
    }
    wait_page(&first);
    out->first_page_us = first.at - t0;
    /* Pages of 100 inside the fetched range: from the cache, on views whose start the
     * server has confirmed (live freshness). */
    out->pages = 0;
    for (int round = 0; pages > 0 && round < page_views; round++) {
        parley_message_collection *view = views[0];
        if (round > 0) {
            page_init(&first);
            if (parley_message_collection_create(&view, client, channel, PARLEY_STARTING_POINT_NEWEST, "{\"previous_result_size\": 100}",
                                                 NULL) != PARLEY_OK ||
                parley_message_collection_start(view, on_page, on_ignored, &first) != PARLEY_OK) {
                return 0;
            }
            wait_page(&first);
        }
        int freshness = 0;
        for (int waited = 0; waited < 2000 && (parley_message_collection_freshness(view, &freshness) != PARLEY_OK ||
                                                freshness != PARLEY_FRESHNESS_LIVE);
             waited++) {
            sleep_ms(1);
        }
        if (!load_previous_pages(view, pages < pages_per_view ? pages : pages_per_view, out->page_us, &out->pages)) return 0;
        if (round > 0) parley_message_collection_dispose(view);
    }
    /* The same call where nothing precedes the view (started at the oldest end): no read,
     * only the two thread hops that keep a page in order with the view's events. */
    parley_message_collection *oldest = NULL;
    page_init(&first);
    if (out->pages > 0) {
        if (parley_message_collection_create(&oldest, client, channel, 0, "{\"previous_result_size\": 100}", NULL) != PARLEY_OK ||
            parley_message_collection_start(oldest, on_page, on_ignored, &first) != PARLEY_OK) {
            return 0;
        }
        wait_page(&first);
    }
    out->hops = out->pages < pages_per_view ? out->pages : pages_per_view;
    for (int i = 0; i < out->hops; i++) {
        page_slot page;
        page_init(&page);
        double start = now_us();
        if (parley_message_collection_load_previous(oldest, on_page, &page) != PARLEY_OK) return 0;
        wait_page(&page);
        out->hop_us[i] = page.at - start;
    }
    if (oldest != NULL) parley_message_collection_dispose(oldest);
    for (int i = 1; i < 10; i++) {
        if (parley_message_collection_create(&views[i], client, channel, PARLEY_STARTING_POINT_NEWEST, NULL, NULL) != PARLEY_OK) return 0;
        page_init(&first);
        parley_message_collection_start(views[i], on_page, on_ignored, &first);
        wait_page(&first);
    }
    sleep_ms(300);
    out->rss_kb = rss_kb();
    if (!measure_metrics(client, root, w, user, channel, 10, out)) return 0;
    for (int i = 0; i < 10; i++) parley_message_collection_dispose(views[i]);
    parley_client_destroy(client);
    return 1;
}

/* The comparison with encryption on: per round, a fresh client on each copy. */
enum { twin_rounds = 9 };

typedef struct {
    double first_page_us[twin_rounds], page_us[twin_rounds * pages_per_view];
    int pages;
} twin_figures;

/* One round on one copy, timed as `measure` times P5 and P1: connect, then a new view's first
 * page, then pages of 100 once the server has confirmed the view's start. */
static int twin_round(const char *url, const char *dir, const char *key_member, const char *user, const char *token,
                      const char *channel, int round, twin_figures *out) {
    parley_client *client = connected_client_keyed(url, dir, user, token, NULL, key_member);
    if (client == NULL) return 0;
    sleep_ms(500);
    parley_message_collection *view = NULL;
    page_slot first;
    page_init(&first);
    double t0 = now_us();
    if (parley_message_collection_create(&view, client, channel, PARLEY_STARTING_POINT_NEWEST, "{\"previous_result_size\": 100}", NULL) !=
            PARLEY_OK ||
        parley_message_collection_start(view, on_page, on_ignored, &first) != PARLEY_OK) {
        return 0;
    }
    wait_page(&first);
    if (first.code != 0) return 0;
    out->first_page_us[round] = first.at - t0;
    int freshness = 0;
    for (int waited = 0; waited < 2000 && (parley_message_collection_freshness(view, &freshness) != PARLEY_OK ||
                                            freshness != PARLEY_FRESHNESS_LIVE);
         waited++) {
        sleep_ms(1);
    }
    if (!load_previous_pages(view, pages_per_view, out->page_us, &out->pages)) return 0;
    parley_message_collection_dispose(view);
    parley_client_destroy(client);
    return 1;
}

/* P5 and P1 on a plain and an encrypted copy of `big_file`, the cache under `big_dir`
 * (bench_support.h, `twin_copies`), printed with the ratios and as summary rows; beside them
 * `raw_median`, P1's raw read of the plain file earlier in the run (an encrypted file has no
 * raw floor). */
static int compare_encrypted(const char *url, const char *big_dir, const char *big_file, const char *user, const char *token,
                             const char *channel, int cached, double raw_median) {
    char plain_dir[] = "/tmp/parley-bench-views-plain-XXXXXX", keyed_dir[] = "/tmp/parley-bench-views-keyed-XXXXXX";
    char plain_file[1100], keyed_file[1100], command[2300];
    printf("\ncopying the cache for the comparison with encryption on...\n");
    fflush(stdout);
    if (!twin_copies(big_dir, big_file, plain_dir, keyed_dir, plain_file, keyed_file, sizeof plain_file)) return 0;
    /* The first connects: the keyed one encrypts its copy; each starts its file's full check. */
    parley_client *client = connected_client_keyed(url, plain_dir, user, token, NULL, "");
    if (client == NULL) return 0;
    parley_client_destroy(client);
    double started = now_us();
    client = connected_client_keyed(url, keyed_dir, user, token, NULL, cache_key_member());
    if (client == NULL) return 0;
    double encrypt_seconds = (now_us() - started) / 1e6;
    parley_client_destroy(client);
    if (!file_is_sealed(keyed_file)) {
        fprintf(stderr, "the keyed connect left %s plain\n", keyed_file);
        return 0;
    }
    if (wait_checked(plain_file, 300) < 0 || wait_checked(keyed_file, 300) < 0) return 0;
    twin_figures plain = {0}, keyed = {0};
    for (int round = 0; round < twin_rounds; round++) {
        /* Alternated, so that a slower minute of the host weighs on both. */
        int keyed_goes_first = round % 2;
        for (int turn = 0; turn < 2; turn++) {
            int is_keyed = turn == 0 ? keyed_goes_first : !keyed_goes_first;
            if (!twin_round(url, is_keyed ? keyed_dir : plain_dir, is_keyed ? cache_key_member() : "", user, token, channel, round,
                            is_keyed ? &keyed : &plain)) {
                return 0;
            }
        }
    }
    double plain_first = median(plain.first_page_us, twin_rounds), keyed_first = median(keyed.first_page_us, twin_rounds);
    double plain_page = median(plain.page_us, plain.pages), keyed_page = median(keyed.page_us, keyed.pages);
    printf("Encryption at rest, a cache of %d (compact copies; a fresh client on each, alternated, medians of %d)\n", cached,
           twin_rounds);
    printf("  encrypting the copy at its first connect %6.1f s   (%.0f MB)\n", encrypt_seconds, file_bytes(keyed_file) / 1048576.0);
    printf("  P5 create + start to the first page      plain %6.2f ms   encrypted %6.2f ms   %.2fx\n", plain_first / 1e3,
           keyed_first / 1e3, keyed_first / plain_first);
    printf("  P1 page of 100 on a new client           plain %6.1f us   encrypted %6.1f us   %.2fx   (%d / %d pages; raw sqlite3 on the "
           "plain file %.1f us)\n",
           plain_page, keyed_page, keyed_page / plain_page, plain.pages, keyed.pages, raw_median);
    char measure_text[128], figure[64], comparison[96];
    snprintf(measure_text, sizeof measure_text, "P5 open a collection on %d cached: first page [cache encrypted]", cached);
    snprintf(figure, sizeof figure, "%.2f ms (%.2fx)", keyed_first / 1e3, keyed_first / plain_first);
    snprintf(comparison, sizeof comparison, "plain copy %.2f ms (medians of %d, alternated)", plain_first / 1e3, twin_rounds);
    summary_row(measure_text, figure, comparison, "<= 1.15x plain");
    snprintf(measure_text, sizeof measure_text, "P1 page of 100 on a new client, %d cached [cache encrypted]", cached);
    snprintf(figure, sizeof figure, "%.0f us (%.2fx)", keyed_page, keyed_page / plain_page);
    snprintf(comparison, sizeof comparison, "plain copy %.0f us; raw sqlite3 read %.0f us", plain_page, raw_median);
    summary_row(measure_text, figure, comparison, "<= 1.15x plain");
    snprintf(command, sizeof command, "rm -rf '%s' '%s'", plain_dir, keyed_dir);
    return system(command) == 0;
}

/* The raw sqlite3 read of pages of 100 on `db`, walking down from the newest. */
static void raw_pages_on(sqlite3 *db, const char *channel, int pages, double *samples) {
    sqlite3_stmt *select = NULL;
    sqlite3_prepare_v2(db,
                       "SELECT json, created_at, message_id FROM messages WHERE channel_url = ?1 AND (created_at, message_id) < (?2, ?3)"
                       " ORDER BY created_at DESC, message_id DESC LIMIT 100",
                       -1, &select, NULL);
    long long created = 0x7fffffffffffffffLL, id = 0x7fffffffffffffffLL;
    for (int i = 0; i < pages; i++) {
        double t0 = now_us();
        sqlite3_bind_text(select, 1, channel, -1, SQLITE_STATIC);
        sqlite3_bind_int64(select, 2, created);
        sqlite3_bind_int64(select, 3, id);
        size_t bytes = 0;
        while (sqlite3_step(select) == SQLITE_ROW) {
            bytes += (size_t)sqlite3_column_bytes(select, 0);
            created = sqlite3_column_int64(select, 1);
            id = sqlite3_column_int64(select, 2);
        }
        sqlite3_reset(select);
        samples[i] = now_us() - t0;
    }
    sqlite3_finalize(select);
}

/* The same on a new connection (its pages not yet in SQLite's cache). */
static void raw_pages(const char *path, const char *channel, int pages, double *samples) {
    sqlite3 *db = NULL;
    sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    raw_pages_on(db, channel, pages, samples);
    sqlite3_close(db);
}

static int setup_cache(parley_client *root, waiter *w, const char *url, const char *dir, const char *user, const char *token,
                       const char *channel, int fetched) {
    (void)root;
    (void)w;
    parley_client *client = connected_client_keyed(url, dir, user, token, NULL, "");
    if (client == NULL) return 0;
    parley_message_collection *view = NULL;
    if (parley_message_collection_create(&view, client, channel, PARLEY_STARTING_POINT_NEWEST, "{\"previous_result_size\": 200}", NULL) !=
        PARLEY_OK)
        return 0;
    page_slot page;
    page_init(&page);
    parley_message_collection_start(view, on_ignored, on_page, &page);
    wait_page(&page);
    for (int loaded = 200; loaded < fetched; loaded += 200) {
        page_init(&page);
        parley_message_collection_load_previous(view, on_page, &page);
        wait_page(&page);
    }
    parley_message_collection_dispose(view);
    parley_client_destroy(client);
    return 1;
}

/* The `--first-page` mode: a fresh process shows the channel's first page, then says so. */
static int first_page_only(const char *url, const char *cache_dir, const char *user, const char *token, const char *channel) {
    parley_client *client = connected_client_keyed(url, cache_dir, user, token, NULL, "");
    if (client == NULL) return 1;
    parley_message_collection *view = NULL;
    page_slot first;
    page_init(&first);
    if (parley_message_collection_create(&view, client, channel, PARLEY_STARTING_POINT_NEWEST, "{\"previous_result_size\": 100}", NULL) !=
            PARLEY_OK ||
        parley_message_collection_start(view, on_page, on_ignored, &first) != PARLEY_OK) {
        return 1;
    }
    wait_page(&first);
    printf("first page %zu bytes\n", first.bytes);
    fflush(stdout);
    parley_message_collection_dispose(view);
    parley_client_destroy(client);
    return first.code == 0 ? 0 : 1;
}

/* Runs this program in `--first-page` mode; the time from before the exec to its line (us). */
static double process_start_to_first_page(const char *self, const char *url, const char *dir, const char *user, const char *token,
                                          const char *channel) {
    char command[2048], line[256];
    snprintf(command, sizeof command, "'%s' --first-page '%s' '%s' '%s' '%s' '%s'", self, url, dir, user, token, channel);
    double started = now_us();
    FILE *child = popen(command, "r");
    if (child == NULL || fgets(line, sizeof line, child) == NULL) return -1;
    double elapsed = now_us() - started;
    return pclose(child) == 0 && strncmp(line, "first page", 10) == 0 ? elapsed : -1;
}

int main(int argc, char **argv) {
    if (argc == 7 && strcmp(argv[1], "--first-page") == 0) return first_page_only(argv[2], argv[3], argv[4], argv[5], argv[6]);
    if (argc < 3) {
        fprintf(stderr, "usage: %s SERVER_URL API_TOKEN [CACHED_MESSAGES] [SMALL_MESSAGES]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1], *api_token = argv[2];
    int cached = argc > 3 ? atoi(argv[3]) : 100000;
    int small = argc > 4 ? atoi(argv[4]) : 1000;
    int fetched = 2000;
    if (cached < fetched + 1 || small < 101 || small > fetched) return 2;
    char config[1024], body[512], token[256], user[64], channel[64], path[256];
    char big_dir[] = "/tmp/parley-bench-views-XXXXXX", small_dir[] = "/tmp/parley-bench-views-small-XXXXXX";
    if (mkdtemp(big_dir) == NULL || mkdtemp(small_dir) == NULL) return 1;
    waiter w = WAITER_INIT;
    parley_client *root = admin_client(url, api_token);
    if (root == NULL) return 1;
    if (!solo_user_and_channel(root, &w, "views", user, sizeof user, channel, sizeof channel, token, sizeof token)) return 1;
    snprintf(path, sizeof path, "/v3/group_channels/%s/messages", channel);
    printf("posting %d messages...\n", fetched);
    for (int i = 0; i < fetched; i++) {
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"%s\", \"message\": \"view %d\"}", user, i);
        if (!admin(root, &w, "POST", path, body)) return 1;
    }
    /* Both caches hold real messages fetched through a collection; the big one gets copies below. */
    if (!setup_cache(root, &w, url, big_dir, user, token, channel, fetched)) return 1;
    if (!setup_cache(root, &w, url, small_dir, user, token, channel, small)) return 1;
    char big_file[1024];
    const char *found = cache_file_in(big_dir);
    if (found == NULL) return 1;
    snprintf(big_file, sizeof big_file, "%s", found);
    printf("adding %d cached copies below them...\n", cached - fetched);
    if (!add_message_copies(big_file, cached - fetched, 0, 0)) return 1;

    view_figures big_figures, small_figures;
    int pages = pages_per_view;  /* 1,500 of the 2,000 fetched: inside the range the cache holds continuously */
    if (!measure(root, &w, url, big_dir, user, token, channel, pages, &big_figures)) return 1;
    if (!measure(root, &w, url, small_dir, user, token, channel, 0, &small_figures)) return 1;
    double starts[5];
    for (int i = 0; i < 5; i++) {
        starts[i] = process_start_to_first_page(argv[0], url, big_dir, user, token, channel);
        if (starts[i] < 0) return 1;
    }
    double start_median = median(starts, 5);
    /* The raw read the same way: 15 pages from the newest on a new connection, 8 times. */
    double raw[page_views * pages_per_view];
    for (int round = 0; round < page_views; round++) raw_pages(big_file, channel, pages_per_view, raw + round * pages_per_view);
    double page_median = median(big_figures.page_us, big_figures.pages), raw_median = median(raw, page_views * pages_per_view);
    /* And on one connection that stays open, as the engine's does: the same pages, warm from
     * the second view on. */
    double warm[page_views * pages_per_view];
    sqlite3 *warm_db = NULL;
    if (sqlite3_open_v2(big_file, &warm_db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return 1;
    for (int round = 0; round < page_views; round++) raw_pages_on(warm_db, channel, pages_per_view, warm + round * pages_per_view);
    sqlite3_close(warm_db);
    double warm_median = median(warm, page_views * pages_per_view);
    /* The floor the rules set (page_floor.h), read the same way on a connection that stays open. */
    double floor_samples[page_views * pages_per_view], floor_empty[pages_per_view];
    page_floor floor;
    if (!page_floor_start(&floor, big_file, channel)) return 1;
    for (int round = 0; round < page_views; round++) {
        page_floor_restart(&floor);
        for (int i = 0; i < pages_per_view; i++) {
            double sample = page_floor_page(&floor);
            if (sample < 0 || floor.rows != 100) {
                fprintf(stderr, "page floor: %s\n", floor.failed ? floor.failure : "a page of fewer than 100 rows");
                return 1;
            }
            floor_samples[round * pages_per_view + i] = sample;
        }
    }
    for (int i = 0; i < pages_per_view; i++) {
        page_floor_at_oldest(&floor);
        floor_empty[i] = page_floor_page(&floor);
        if (floor_empty[i] < 0 || floor.rows != 0) {
            fprintf(stderr, "page floor: %s\n", floor.failed ? floor.failure : "rows below the oldest message");
            return 1;
        }
    }
    page_floor_stop(&floor);
    double floor_median = median(floor_samples, page_views * pages_per_view), floor_hops = median(floor_empty, pages_per_view);
    printf("\nMessage collection over a cache of %d messages in one channel\n", cached);
    printf("  cached page of 100 (load_previous)   median %8.1f us   p99 %8.1f us   (%d pages)\n", page_median,
           quantile(big_figures.page_us, big_figures.pages, 0.99), big_figures.pages);
    printf("  raw sqlite3 read of 100 rows (floor) median %8.1f us   (a new connection per view)\n", raw_median);
    printf("  the same, one connection kept open   median %8.1f us   (as the engine's: the pages warm after the first view)\n",
           warm_median);
    printf("  the rules' floor in C, kept open     median %8.1f us   (two hand-offs, every text checked, one JSON array)\n",
           floor_median);
    double hop_median = median(big_figures.hop_us, big_figures.hops);
    printf("  load_previous with nothing to read   median %8.1f us   (the two thread hops alone; raw read + hops: %.2fx raw)\n",
           hop_median, (raw_median + hop_median) / raw_median);
    /* The floor's hand-offs (pthread condition variables) may cost more than the engine's
     * (libdispatch): the lower bound counts the cheaper of the two. */
    double floor_bound = floor_median - floor_hops + (hop_median < floor_hops ? hop_median : floor_hops);
    printf("  the floor with nothing to read       median %8.1f us   (its two hand-offs; with the cheaper hops: %.1f us)\n",
           floor_hops, floor_bound);
    printf("  create + start to the first page     %8.2f ms (cache of %d)   %8.2f ms (cache of %d)\n",
           big_figures.first_page_us / 1e3, cached, small_figures.first_page_us / 1e3, small);
    printf("  process start to the first page      %8.2f ms (new process: load, create, connect, open; median of 5)\n",
           start_median / 1e3);
    printf("  RSS with 10 collections open         %8.1f MB (cache of %d)   %8.1f MB (cache of %d)\n", big_figures.rss_kb / 1024.0,
           cached, small_figures.rss_kb / 1024.0, small);
    /* The first call counted the rows; the rest of the row kept them. */
    double metrics_median = median(big_figures.metrics_us + 1, metrics_calls - 1), state_median = median(big_figures.state_us, metrics_calls);
    double committed_median = median(big_figures.metrics_after_commit_us, metrics_after_commit);
    printf("  metrics, 10 collections open         median %8.1f us   p99 %8.1f us   (%d calls in a row; connection_state %.1f us)\n",
           metrics_median, quantile(big_figures.metrics_us + 1, metrics_calls - 1, 0.99), metrics_calls - 1, state_median);
    printf("  metrics right after a commit         median %8.1f us   (the sizes read again; cache of %d: %.1f us)\n",
           committed_median, small, median(small_figures.metrics_after_commit_us, metrics_after_commit));
    printf("  metrics counting the rows            %8.1f ms          (the first call; again at most every 100x that; cache of %d: %.2f ms)\n",
           big_figures.metrics_us[0] / 1e3, small, small_figures.metrics_us[0] / 1e3);
    char measure_text[96], figure[64], comparison[96];
    snprintf(figure, sizeof figure, "%.0f us (%.2fx)", page_median, page_median / raw_median);
    snprintf(comparison, sizeof comparison, "raw sqlite3 read of the rows %.0f us", raw_median);
    summary_row("P1 cached page of 100, load_previous (C)", figure, comparison, "<= 1.5x");
    snprintf(figure, sizeof figure, "%.0f us (%.2fx)", floor_bound, floor_bound / raw_median);
    snprintf(comparison, sizeof comparison, "raw read kept open %.0f us: floor %.2fx, page %.2fx", warm_median,
             floor_bound / warm_median, page_median / warm_median);
    summary_row("P1 floor: the rules in plain C (2 hand-offs, texts checked)", figure, comparison, "-");
    snprintf(measure_text, sizeof measure_text, "P5 open a collection on %d cached: first page", cached);
    snprintf(figure, sizeof figure, "%.2f ms", big_figures.first_page_us / 1e3);
    snprintf(comparison, sizeof comparison, "cache of %d: %.2f ms", small, small_figures.first_page_us / 1e3);
    summary_row(measure_text, figure, comparison, "<= 2 ms");
    snprintf(figure, sizeof figure, "%.1f ms", start_median / 1e3);
    summary_row("P5 process start to the first page (connect included)", figure, "-", "-");
    snprintf(measure_text, sizeof measure_text, "P6 RSS, 10 collections, %d cached messages", cached);
    snprintf(figure, sizeof figure, "%.1f MB", big_figures.rss_kb / 1024.0);
    snprintf(comparison, sizeof comparison, "cache of %d: %.1f MB", small, small_figures.rss_kb / 1024.0);
    summary_row(measure_text, figure, comparison, "<= 64 MB, flat");
    snprintf(measure_text, sizeof measure_text, "parley_client_metrics, 10 collections, %d cached", cached);
    snprintf(figure, sizeof figure, "%.0f us; after a commit %.0f us", metrics_median, committed_median);
    snprintf(comparison, sizeof comparison, "connection_state %.0f us; counting the rows %.1f ms", state_median,
             big_figures.metrics_us[0] / 1e3);
    summary_row(measure_text, figure, comparison, "-");
    fflush(stdout);
    if (*cache_key_member() != '\0' && !compare_encrypted(url, big_dir, big_file, user, token, channel, cached, raw_median)) return 1;
    parley_client_destroy(root);
    snprintf(config, sizeof config, "rm -rf '%s' '%s'", big_dir, small_dir);
    return system(config) == 0 ? 0 : 1;
}
