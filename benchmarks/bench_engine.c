/* bench_engine: what the engine costs over the floor it sits on, measured in one run.
 *
 *   bench_engine SERVER_URL API_TOKEN [MESSAGES] [READS]
 *
 * 1. Sending: MESSAGES user messages, one after another (each waits for the server's
 *    answer): raw libcurl POSTs over one keep-alive connection (the floor); the same POSTs
 *    under what the rules ask of any engine, in plain C (send_floor.h: two commits and four
 *    hand-offs between threads around each POST; the floor those rules set); the same POST
 *    through parley_client_request (the engine's HTTP and callback threads, no outbox);
 *    and parley_client_send_user_message (pending message stored in SQLite first, then the
 *    POST, then the cache update), timed both to its return and to its completion.
 * 2. Reading the cache: READS pages of the 50 newest messages through
 *    parley_client_cached_messages versus the same SELECT on the same cache file with
 *    raw sqlite3 (a second, read-only connection).
 *
 * Numbers are wall-clock medians per operation and throughput. The server must be running
 * (scripts/bench.sh starts one); users and a channel are created with the admin token. */
#define _POSIX_C_SOURCE 200809L
#include "bench_support.h"
#include "send_floor.h"
#include <curl/curl.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <unistd.h>

/* Prints one measure; returns its median (us). */
static double report(const char *what, double *samples, int count, double total_us) {
    double middle = median(samples, count);
    printf("  %-44s median %8.1f us   %9.0f ops/s\n", what, middle, count / (total_us / 1e6));
    return middle;
}

static atomic_int burst_done = 0, burst_failed = 0;

static void on_burst(void *user_data, const parley_error *error, const char *json) {
    (void)user_data; (void)json;
    if (error) atomic_fetch_add(&burst_failed, 1);
    atomic_fetch_add(&burst_done, 1);
}

static size_t discard(char *data, size_t size, size_t count, void *user_data) {
    (void)data; (void)user_data;
    return size * count;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SERVER_URL API_TOKEN [MESSAGES] [READS]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1], *api_token = argv[2];
    int messages = argc > 3 ? atoi(argv[3]) : 300;
    int reads = argc > 4 ? atoi(argv[4]) : 2000;
    if (messages < 1 || reads < 1) return 2;
    double *samples = malloc(sizeof(double) * (size_t)(messages > reads ? messages : reads));
    char config[1024], path[512], cache_dir[] = "/tmp/parley-bench-XXXXXX", cache_file_command[1100];
    if (samples == NULL || mkdtemp(cache_dir) == NULL) return 1;
    waiter w = WAITER_INIT;

    /* Setup: two users, a channel, a session for the sender. */
    parley_client *root = admin_client(url, api_token);
    if (root == NULL) return 1;
    char suffix[32];
    snprintf(suffix, sizeof suffix, "%ld", (long)time(NULL));
    char body[512], channel[128], token[256] = "";
    snprintf(channel, sizeof channel, "bench-%s", suffix);
    snprintf(body, sizeof body, "{\"user_id\": \"bench-a-%s\", \"nickname\": \"a\"}", suffix);
    if (!admin(root, &w, "POST", "/v3/users", body)) return 1;
    snprintf(body, sizeof body, "{\"user_id\": \"bench-b-%s\", \"nickname\": \"b\"}", suffix);
    if (!admin(root, &w, "POST", "/v3/users", body)) return 1;
    snprintf(body, sizeof body, "{\"user_ids\": [\"bench-a-%s\", \"bench-b-%s\"], \"channel_url\": \"%s\"}", suffix, suffix, channel);
    if (!admin(root, &w, "POST", "/v3/group_channels", body)) return 1;
    snprintf(path, sizeof path, "/v3/users/bench-a-%s/token", suffix);
    if (!admin(root, &w, "POST", path, "{}")) return 1;
    const char *found = strstr(w.text, "\"token\":\"");
    if (found == NULL) return 1;
    sscanf(found + 9, "%255[^\"]", token);

    parley_client *client = NULL;
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s\"%s}", url, cache_dir, cache_key_member());
    if (parley_client_create(&client, config) != PARLEY_OK) return 1;
    char user[64];
    snprintf(user, sizeof user, "bench-a-%s", suffix);
    if (parley_client_connect(client, NULL, user, token, on_result, &w) != PARLEY_OK) return 1;
    wait_done(&w);
    if (w.code != 0) { fprintf(stderr, "connect failed: %s\n", w.text); return 1; }
    const char *variant = search_index_variant(cache_dir);

    printf("parley %s — %d sends, %d cache reads (server %s)\n\n", parley_version(), messages, reads, url);
    printf("Sending (each waits for the server's answer)\n");

    /* 1a. Raw libcurl POSTs (the floor), each followed by the same POST under what the rules
     * ask of any engine, in plain C (send_floor.h: two commits and four hand-offs between
     * threads around it). Alternating, so that both see the server in the same state. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *curl = curl_easy_init();
    char endpoint[512], header[300];
    snprintf(endpoint, sizeof endpoint, "%s/v3/group_channels/%s/messages", url, channel);
    snprintf(header, sizeof header, "Session-Key: %s", token);
    struct curl_slist *headers = curl_slist_append(NULL, header);
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_URL, endpoint);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    char floor_dir[] = "/tmp/parley-bench-floor-XXXXXX";
    send_floor floor;
    double *floor_returned = malloc(sizeof(double) * (size_t)messages), *floor_completed = malloc(sizeof(double) * (size_t)messages);
    if (floor_returned == NULL || floor_completed == NULL || mkdtemp(floor_dir) == NULL ||
        !send_floor_start(&floor, floor_dir, endpoint, header, messages)) {
        return 1;
    }
    double raw_time = 0, floor_time = 0;
    for (int i = 0; i < messages; i++) {
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"message\": \"raw %d\", \"req_id\": \"raw-%s-%d\"}", i, suffix, i);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        double t0 = now_us();
        CURLcode code = curl_easy_perform(curl);
        samples[i] = now_us() - t0;
        raw_time += samples[i];
        if (code != CURLE_OK) { fprintf(stderr, "curl: %s\n", curl_easy_strerror(code)); return 1; }
        char text[32];
        snprintf(text, sizeof text, "floor %d", i);
        if (!send_floor_send(&floor, text, suffix, &floor_returned[i], &floor_completed[i])) {
            fprintf(stderr, "send floor: %s\n", floor.failure);
            return 1;
        }
        floor_time += floor_completed[i];
    }
    double raw_post = report("raw libcurl POST (floor)", samples, messages, raw_time);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    report("the rules' floor in C, returned", floor_returned, messages, floor_time);
    double floor_send = report("the rules' floor in C, completed", floor_completed, messages, floor_time);
    send_floor_print_steps(&floor, messages);
    send_floor_stop(&floor);
    free(floor_returned);
    free(floor_completed);
    snprintf(cache_file_command, sizeof cache_file_command, "rm -rf '%s'", floor_dir);
    if (system(cache_file_command) != 0) return 1;

    /* 1b. The same POST through the engine's HTTP layer (network thread, callback thread),
     * without the outbox: separates transport overhead from outbox bookkeeping. */
    snprintf(path, sizeof path, "/v3/group_channels/%s/messages", channel);
    double started = now_us();
    for (int i = 0; i < messages; i++) {
        snprintf(body, sizeof body, "{\"message_type\": \"MESG\", \"user_id\": \"%s\", \"message\": \"request %d\"}", user, i);
        double t0 = now_us();
        if (parley_client_request(root, NULL, "POST", path, body, on_result, &w) != PARLEY_OK) return 1;
        wait_done(&w);
        samples[i] = now_us() - t0;
        if (w.code != 0) { fprintf(stderr, "request failed: %s\n", w.text); return 1; }
    }
    report("parley_client_request POST (no outbox)", samples, messages, now_us() - started);

    /* 1c. Through the outbox: the call returns once the pending message is stored; the
     * completion arrives with the server's copy. */
    double *returned = malloc(sizeof(double) * (size_t)messages);
    if (returned == NULL) return 1;
    started = now_us();
    for (int i = 0; i < messages; i++) {
        snprintf(body, sizeof body, "{\"message\": \"engine %d\"}", i);
        double t0 = now_us();
        if (parley_client_send_user_message(client, NULL, NULL, channel, body, on_result, &w) != PARLEY_OK) return 1;
        returned[i] = now_us() - t0;
        wait_done(&w);
        samples[i] = now_us() - t0;
        if (w.code != 0) { fprintf(stderr, "send failed: %s\n", w.text); return 1; }
    }
    double send_total = now_us() - started;
    report("parley_client_send_user_message, returned", returned, messages, send_total);
    double engine_send = report("parley_client_send_user_message, completed", samples, messages, send_total);
    free(returned);

    /* 1d. A burst: every send queued at once; the outbox keeps one request in flight per
     * client (so the server stores them in send order), which makes this its throughput. */
    started = now_us();
    for (int i = 0; i < messages; i++) {
        snprintf(body, sizeof body, "{\"message\": \"burst %d\"}", i);
        if (parley_client_send_user_message(client, NULL, NULL, channel, body, on_burst, NULL) != PARLEY_OK) return 1;
    }
    double queued = now_us() - started;
    while (atomic_load(&burst_done) < messages) sleep_ms(1);
    double burst_total = now_us() - started;
    printf("  %-44s %8.1f ms to queue, all delivered after %.1f ms: %6.0f msg/s%s\n", "burst of sends through the outbox",
           queued / 1e3, burst_total / 1e3, messages / (burst_total / 1e6), atomic_load(&burst_failed) ? " (SOME FAILED)" : "");

    /* 2. Reading the newest page from the cache. */
    printf("\nReading the 50 newest cached messages\n");
    char *page = NULL;
    started = now_us();
    for (int i = 0; i < reads; i++) {
        double t0 = now_us();
        if (parley_client_cached_messages(client, &page, channel, -1, 50) != PARLEY_OK) return 1;
        samples[i] = now_us() - t0;
        parley_free(page);
    }
    double engine_total = now_us() - started;

    char cache_file[1024];
    snprintf(cache_file, sizeof cache_file, "find '%s' -name '*.sqlite' | head -1", cache_dir);
    FILE *finder = popen(cache_file, "r");
    if (finder == NULL || fgets(cache_file, sizeof cache_file, finder) == NULL) return 1;
    pclose(finder);
    cache_file[strcspn(cache_file, "\n")] = '\0';
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(cache_file, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return 1;
    sqlite3_stmt *select = NULL;
    sqlite3_prepare_v2(db, "SELECT json FROM messages WHERE channel_url = ?1 ORDER BY created_at DESC, message_id DESC LIMIT 50", -1, &select, NULL);
    double *raw = malloc(sizeof(double) * (size_t)reads);
    /* An encrypted file has no raw floor to read: its row stands beside the plain run's. */
    int encrypted = *cache_key_member() != '\0';
    started = now_us();
    for (int i = 0; i < (encrypted ? 0 : reads); i++) {
        double t0 = now_us();
        sqlite3_bind_text(select, 1, channel, -1, SQLITE_STATIC);
        size_t bytes = 0;
        while (sqlite3_step(select) == SQLITE_ROW) bytes += (size_t)sqlite3_column_bytes(select, 0);
        sqlite3_reset(select);
        raw[i] = now_us() - t0;
        if (bytes == 0) { fprintf(stderr, "the cache holds no messages\n"); return 1; }
    }
    double raw_select = encrypted ? 0 : report("raw sqlite3 SELECT on the cache file (floor)", raw, reads, now_us() - started);
    double engine_read = report("parley_client_cached_messages", samples, reads, engine_total);
    char figure[64], comparison[96];
    snprintf(figure, sizeof figure, "%.0f us (%.2fx)", engine_send, engine_send / raw_post);
    snprintf(comparison, sizeof comparison, "raw libcurl POST %.0f us", raw_post);
    char measure[128];
    snprintf(measure, sizeof measure, "send: pending stored, POST, cache updated%s", variant);
    summary_row(measure, figure, comparison, "<= 1.2x");
    snprintf(figure, sizeof figure, "%.0f us (%.2fx)", floor_send, floor_send / raw_post);
    snprintf(measure, sizeof measure, "P8 floor: the rules in plain C (2 commits, 4 hand-offs)%s", variant);
    summary_row(measure, figure, comparison, "-");
    if (*variant == '\0') {
        snprintf(figure, sizeof figure, "%.0f msg/s", messages / (burst_total / 1e6));
        snprintf(comparison, sizeof comparison, "raw POSTs one after another %.0f/s", 1e6 / raw_post);
        summary_row("burst of sends, one request in flight", figure, comparison, "(figure for the trade-off)");
        snprintf(figure, sizeof figure, "%.1f us (%.2fx)", engine_read, engine_read / raw_select);
        snprintf(comparison, sizeof comparison, "raw sqlite3 SELECT %.1f us", raw_select);
        summary_row("cached page of 50 (parley_client_cached_messages)", figure, comparison, "(P1 uses a collection)");
    } else if (encrypted) {
        snprintf(figure, sizeof figure, "%.1f us", engine_read);
        snprintf(measure, sizeof measure, "cached page of 50 (parley_client_cached_messages)%s", variant);
        summary_row(measure, figure, "the plain row above", "<= 1.15x");
    }
    sqlite3_finalize(select);
    sqlite3_close(db);

    parley_client_destroy(client);
    parley_client_destroy(root);
    curl_global_cleanup();
    free(raw);
    free(samples);
    snprintf(cache_file, sizeof cache_file, "rm -rf '%s'", cache_dir);
    if (system(cache_file) != 0) return 1;
    return 0;
}
