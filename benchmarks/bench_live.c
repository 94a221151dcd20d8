/* bench_live: what a live message costs its receiver, in a small and in a big channel.
 *
 *   bench_live SERVER_URL API_TOKEN [MESSAGES] [BIG_MEMBERS]
 *   bench_live SERVER_URL API_TOKEN MESSAGES BIG_MEMBERS RECEIVER_URL LABEL
 *
 * With RECEIVER_URL (another server on the same PostgreSQL database, or the same server) the
 * receiver connects there while the posts go to SERVER_URL, and only the P3 part runs; its
 * rows carry LABEL (docs/BENCHMARKS.md "Several servers on one PostgreSQL").
 *
 * A receiving client is connected; MESSAGES messages (default 500) are posted into a channel
 * of 2 members at 50 and at 200 per second (P3: latency and loss), then at 100 per second
 * into it again and into one of BIG_MEMBERS members (default 500).
 * For each: the latency from the POST (sent by another client of the same process) to the
 * receiver's event callback (p50, p99, max), and the process CPU time per message (the sender's work is the same in both runs,
 * so the difference is what the channel's size costs the receiver). A message should cost
 * its receiver the message, not the channel's size. Then both again with views open, as a
 * chat screen has them: a message collection on the channel (its callbacks hand the channel
 * with its member list on every message) and a channel collection with the default query
 * (members included).
 *
 * Beside P3, in the same run (stream_floor.h): the same stream read by a plain libcurl reader
 * (when each frame arrived), and the floor: the same number of messages posted by a plain
 * libcurl sender to that reader, with no library on either side: the servers' share. */
#define _POSIX_C_SOURCE 200809L
#include "bench_support.h"
#include "stream_floor.h"
#include <stdatomic.h>
#include <unistd.h>

#define MAX_MESSAGES 20000

static double sent_at[MAX_MESSAGES];
static double latency[MAX_MESSAGES];
static atomic_int received = 0;

/* Payload has "message":"live <n>": the index of the send. */
static void on_event(void *user_data, const char *category, const char *channel_url, const char *payload) {
    (void)user_data; (void)channel_url;
    if (strcmp(category, "message_received") != 0) return;
    double now = now_us();
    const char *at = strstr(payload, "\"message\":\"live ");
    if (at == NULL) return;
    int index = atoi(at + strlen("\"message\":\"live "));
    if (index < 0 || index >= MAX_MESSAGES || sent_at[index] == 0) return;
    latency[index] = now - sent_at[index];
    atomic_fetch_add(&received, 1);
}

/* The views' callbacks read what they are handed, as an application would. */
static atomic_long view_bytes = 0;

static void on_view_event(void *user_data, const parley_message_event *event) {
    (void)user_data;
    atomic_fetch_add(&view_bytes, (long)(strlen(event->channel_json) + strlen(event->messages_json)));
}

static void on_channels_event(void *user_data, const parley_collection_context *context, const char *json) {
    (void)user_data; (void)context;
    atomic_fetch_add(&view_bytes, (long)strlen(json));
}

static void on_loaded(void *user_data, const parley_error *error, const char *json) {
    (void)error; (void)json;
    atomic_store((atomic_int *)user_data, 1);
}

static int open_message_view(parley_client *client, const char *channel, parley_message_collection **messages) {
    parley_message_collection_handler handler = PARLEY_MESSAGE_COLLECTION_HANDLER_INIT;
    handler.event = on_view_event;
    atomic_int started = 0;
    if (parley_message_collection_create(messages, client, channel, PARLEY_STARTING_POINT_NEWEST, NULL, &handler) != PARLEY_OK ||
        parley_message_collection_start(*messages, on_loaded, NULL, &started) != PARLEY_OK) {
        return 0;
    }
    while (!atomic_load(&started)) sleep_ms(1);
    return 1;
}

static double process_cpu_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

typedef struct {
    double p50, p99, max, cpu_per_message;
    int lost;
    /* the raw reader's frames of the same messages (stream_floor.h): p50 and p99 from the POST,
     * and how many it did not get */
    double frame_p50, frame_p99;
    int frames_missing;
} live_result;

/* The raw reader on the receiver's stream (NULL when it could not open: no figures). */
static raw_stream *raw_reader = NULL;

/* The raw reader's arrival of message `i`, 0 when it has not arrived since `i` was sent (a
 * frame of an earlier run with the same number does not count). */
static double frame_arrival(int i) {
    if (raw_reader == NULL || sent_at[i] <= 0) return 0;
    double arrival = raw_stream_arrival(raw_reader, i);
    return arrival >= sent_at[i] ? arrival : 0;
}

/* Of the first `messages`, those sent whose frame has not arrived. */
static int frames_missing(int messages) {
    int missing = 0;
    for (int i = 0; i < messages; i++) {
        if (sent_at[i] > 0 && frame_arrival(i) == 0) missing++;
    }
    return missing;
}

/* p50, p99 and max of the raw reader's frames after their POST, over one snapshot. */
static void frame_quantiles(int messages, double *p50, double *p99, double *max) {
    static double frames[MAX_MESSAGES];
    int count = 0;
    for (int i = 0; i < messages; i++) {
        double arrival = frame_arrival(i);
        if (arrival > 0) frames[count++] = arrival - sent_at[i];
    }
    *p50 = count > 0 ? quantile(frames, count, 0.5) : 0;
    *p99 = count > 0 ? quantile(frames, count, 0.99) : 0;
    if (max != NULL) *max = count > 0 ? quantile(frames, count, 1.0) : 0;
}

/* Says which messages the raw reader did not get, and whether its stream still runs. */
static void report_missing_frames(int messages, int rate, const char *what) {
    int missing = raw_reader == NULL ? 0 : frames_missing(messages);
    if (missing == 0) return;
    fprintf(stderr, "raw stream reader (%s, %d/s): %d of %d messages not seen within 5 s:", what, rate, missing, messages);
    for (int i = 0, shown = 0; i < messages && shown < 20; i++) {
        if (sent_at[i] > 0 && frame_arrival(i) == 0) {
            fprintf(stderr, " live %d", i);
            shown++;
        }
    }
    fprintf(stderr, "; resync frames so far %d%s\n", atomic_load(&raw_reader->resyncs),
            atomic_load(&raw_reader->finished) ? "; its stream has ended" : "");
}

/* Waits for post `i`'s turn at `rate` per second (`next`: when it is due; moved on), writes
 * its body ("live i" from `sender`) and notes when it is sent. */
static void next_live_post(double *next, int rate, char *body, size_t size, const char *sender, int i) {
    while (now_us() < *next) sleep_ms(1);
    *next += 1e6 / rate;
    snprintf(body, size, "{\"message_type\": \"MESG\", \"user_id\": \"%s\", \"message\": \"live %d\"}", sender, i);
    sent_at[i] = now_us();
}

static live_result run(parley_client *root, waiter *w, const char *channel, const char *sender, int messages, int rate) {
    char path[256], body[256];
    snprintf(path, sizeof path, "/v3/group_channels/%s/messages", channel);
    memset(sent_at, 0, sizeof sent_at);
    memset(latency, 0, sizeof latency);
    if (raw_reader != NULL) raw_stream_reset(raw_reader);
    atomic_store(&received, 0);
    double cpu = process_cpu_us();
    double next = now_us();
    for (int i = 0; i < messages; i++) {
        next_live_post(&next, rate, body, sizeof body, sender, i);
        if (parley_client_request(root, NULL, "POST", path, body, on_result, w) != PARLEY_OK) break;
        wait_done(w);
    }
    double waited = now_us();
    /* Both receivers done (or 5 s): no frame of this run reaches the raw reader after the next
     * run has reset it. */
    while ((atomic_load(&received) < messages || (raw_reader != NULL && frames_missing(messages) > 0)) &&
           now_us() - waited < 5e6) {
        sleep_ms(5);
    }
    live_result result = {0, 0, 0, (process_cpu_us() - cpu) / messages, messages - atomic_load(&received), 0, 0, 0};
    int count = 0;
    for (int i = 0; i < messages; i++) {
        if (latency[i] > 0) latency[count++] = latency[i];
    }
    result.p50 = quantile(latency, count, 0.5);
    result.p99 = quantile(latency, count, 0.99);
    result.max = quantile(latency, count, 1.0);
    frame_quantiles(messages, &result.frame_p50, &result.frame_p99, NULL);
    result.frames_missing = raw_reader == NULL ? messages : frames_missing(messages);
    report_missing_frames(messages, rate, "P3 run");
    return result;
}

/* The floor: `messages` posts by the raw sender at `rate`, timed to the raw reader's frames.
 * Its `lost`: the posts whose frame did not come within 5 s (a failed POST ends the run). */
static live_result run_floor(raw_sender *sender, const char *user, int messages, int rate) {
    char body[256];
    live_result result = {0, 0, 0, 0, messages, 0, 0, messages};
    if (raw_reader == NULL || sender == NULL) return result;
    memset(sent_at, 0, sizeof sent_at);
    raw_stream_reset(raw_reader);
    double next = now_us();
    for (int i = 0; i < messages; i++) {
        next_live_post(&next, rate, body, sizeof body, user, i);
        if (!raw_sender_post(sender, body)) {
            fprintf(stderr, "raw sender: POST %d failed\n", i);
            sent_at[i] = 0;
            break;
        }
    }
    double waited = now_us();
    while (frames_missing(messages) > 0 && now_us() - waited < 5e6) sleep_ms(5);
    frame_quantiles(messages, &result.p50, &result.p99, &result.max);
    result.lost = frames_missing(messages);
    result.frames_missing = result.lost;
    report_missing_frames(messages, rate, "floor");
    return result;
}

/* The summary row under a P3 row: its floor, with the raw reader's frame in the P3 run. */
static void floor_row(int measured, const live_result *p3, const live_result *floor) {
    char figure[64] = "not measured", comparison[96] = "the raw reader or sender could not be set up";
    if (measured) {
        snprintf(figure, sizeof figure, "p50 %.2f p99 %.2f ms", floor->p50 / 1e3, floor->p99 / 1e3);
        snprintf(comparison, sizeof comparison, "raw reader in the P3 run: p50 %.2f ms; not seen %d / %d", p3->frame_p50 / 1e3,
                 p3->frames_missing, floor->lost);
    }
    summary_row("  its floor: raw POST to a raw stream reader", figure, comparison, "(the servers' share)");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SERVER_URL API_TOKEN [MESSAGES] [BIG_MEMBERS [RECEIVER_URL LABEL]]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1], *api_token = argv[2];
    const char *receiver_url = argc > 6 ? argv[5] : url;
    const char *label = argc > 6 ? argv[6] : NULL;
    int messages = argc > 3 ? atoi(argv[3]) : 500;
    int big = argc > 4 ? atoi(argv[4]) : 500;
    if (messages < 1 || messages > MAX_MESSAGES || big < 3) return 2;
    char config[1024], run_id[48], me[64], bob[64], small_channel[96], big_channel[96], token[256];
    char cache_dir[] = "/tmp/parley-bench-live-XXXXXX";
    if (mkdtemp(cache_dir) == NULL) return 1;
    waiter w = WAITER_INIT;
    snprintf(run_id, sizeof run_id, "%ld-%d", (long)time(NULL), (int)getpid());
    snprintf(me, sizeof me, "live-me-%s", run_id);
    snprintf(bob, sizeof bob, "live-bob-%s", run_id);
    snprintf(small_channel, sizeof small_channel, "live-small-%s", run_id);
    snprintf(big_channel, sizeof big_channel, "live-big-%s", run_id);

    parley_client *root = admin_client(url, api_token);
    if (root == NULL) return 1;
    char *body = malloc((size_t)big * 64 + 256);
    size_t used = 0;
    used += (size_t)sprintf(body, "{\"channel_url\": \"%s\", \"user_ids\": [\"%s\", \"%s\"", big_channel, me, bob);
    for (int i = 0; i < big - 2; i++) {
        char user[96], create[160];
        snprintf(user, sizeof user, "live-member-%s-%d", run_id, i);
        snprintf(create, sizeof create, "{\"user_id\": \"%s\", \"nickname\": \"member %d\"}", user, i);
        if (!admin(root, &w, "POST", "/v3/users", create)) return 1;
        used += (size_t)sprintf(body + used, ", \"%s\"", user);
    }
    sprintf(body + used, "]}");
    char create[512];
    snprintf(create, sizeof create, "{\"user_id\": \"%s\"}", me);
    if (!admin(root, &w, "POST", "/v3/users", create)) return 1;
    snprintf(create, sizeof create, "{\"user_id\": \"%s\"}", bob);
    if (!admin(root, &w, "POST", "/v3/users", create)) return 1;
    if (!admin(root, &w, "POST", "/v3/group_channels", body)) return 1;
    snprintf(create, sizeof create, "{\"channel_url\": \"%s\", \"user_ids\": [\"%s\", \"%s\"]}", small_channel, me, bob);
    if (!admin(root, &w, "POST", "/v3/group_channels", create)) return 1;
    free(body);
    if (!user_token(root, &w, me, token, sizeof token)) return 1;

    parley_client *client = connected_client(receiver_url, cache_dir, me, token, on_event);
    if (client == NULL) return 1;
    /* The raw reader and sender of P3's floor (stream_floor.h); without them P3 runs alone. */
    raw_reader = raw_stream_open(receiver_url, me, token);
    raw_sender sender_storage;
    char post_path[256];
    snprintf(post_path, sizeof post_path, "/v3/group_channels/%s/messages", small_channel);
    raw_sender *sender = raw_sender_init(&sender_storage, url, post_path, api_token) ? &sender_storage : NULL;
    if (sender == NULL) fprintf(stderr, "raw sender: could not be set up\n");
    int floor_measured = raw_reader != NULL && sender != NULL;
    /* P3: delivery at 50 and 200 messages per second in a small channel, each followed by its
     * floor (interleaved, so that both see about the same database and host). */
    live_result slow = run(root, &w, small_channel, bob, messages, 50);
    live_result slow_floor = run_floor(sender, bob, messages, 50);
    live_result fast = run(root, &w, small_channel, bob, messages, 200);
    live_result fast_floor = run_floor(sender, bob, messages, 200);
    if (sender != NULL) raw_sender_cleanup(sender);
    printf("Live messages in a 2-member channel, POST sent -> receiver's callback (%d each)%s%s\n", messages,
           label ? ": " : "", label ? label : "");
    int rates[2] = {50, 200};
    live_result *results[2] = {&slow, &fast};
    live_result *floors[2] = {&slow_floor, &fast_floor};
    for (int i = 0; i < 2; i++) {
        char frames[128] = "";
        if (raw_reader != NULL) {
            snprintf(frames, sizeof frames, "   (a raw reader's frame: p50 %.2f p99 %.2f ms, not seen %d)", results[i]->frame_p50 / 1e3,
                     results[i]->frame_p99 / 1e3, results[i]->frames_missing);
        }
        printf("  %3d/s   p50 %6.2f ms   p99 %6.2f ms   max %6.2f ms   lost %d%s\n", rates[i], results[i]->p50 / 1e3,
               results[i]->p99 / 1e3, results[i]->max / 1e3, results[i]->lost, frames);
    }
    printf("The floor: raw POST (libcurl) -> raw stream reader (libcurl), the servers' share%s\n",
           floor_measured ? "" : ": not measured (the raw reader or sender could not be set up)");
    for (int i = 0; floor_measured && i < 2; i++) {
        printf("  %3d/s   p50 %6.2f ms   p99 %6.2f ms   max %6.2f ms   not seen %d\n", rates[i], floors[i]->p50 / 1e3,
               floors[i]->p99 / 1e3, floors[i]->max / 1e3, floors[i]->lost);
    }
    printf("\n");
    raw_stream_close(raw_reader);
    raw_reader = NULL;
    if (label != NULL) {
        for (int i = 0; i < 2; i++) {
            char measure[160], figure[64], comparison[96];
            snprintf(measure, sizeof measure, "P3 %s, %d msg/s", label, rates[i]);
            snprintf(figure, sizeof figure, "p50 %.2f p99 %.2f ms", results[i]->p50 / 1e3, results[i]->p99 / 1e3);
            snprintf(comparison, sizeof comparison, "max %.2f ms, lost %d of %d", results[i]->max / 1e3, results[i]->lost, messages);
            summary_row(measure, figure, comparison, "p50 <= 3, p99 <= 15 ms");
            floor_row(floor_measured, results[i], floors[i]);
        }
        parley_client_destroy(client);
        parley_client_destroy(root);
        snprintf(config, sizeof config, "rm -rf '%s'", cache_dir);
        return system(config) == 0 && slow.lost == 0 && fast.lost == 0 ? 0 : 1;
    }
    live_result small = run(root, &w, small_channel, bob, messages, 100);
    live_result large = run(root, &w, big_channel, bob, messages, 100);
    printf("Live messages, 100/s, POST sent -> receiver's callback (%d each)\n", messages);
    printf("  %4d members   p50 %6.2f ms   p99 %6.2f ms   max %6.2f ms   lost %d   process CPU %6.0f us/message\n", 2,
           small.p50 / 1e3, small.p99 / 1e3, small.max / 1e3, small.lost, small.cpu_per_message);
    printf("  %4d members   p50 %6.2f ms   p99 %6.2f ms   max %6.2f ms   lost %d   process CPU %6.0f us/message\n", big,
           large.p50 / 1e3, large.p99 / 1e3, large.max / 1e3, large.lost, large.cpu_per_message);
    /* Views open: a channel collection over both channels, a message collection on each. */
    parley_group_channel_collection_handler channels_handler = PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_INIT;
    channels_handler.added = on_channels_event;
    channels_handler.updated = on_channels_event;
    parley_group_channel_collection *channels = NULL;
    atomic_int listed = 0;
    if (parley_group_channel_collection_create(&channels, client, NULL, &channels_handler) != PARLEY_OK ||
        parley_group_channel_collection_load_more(channels, on_loaded, &listed) != PARLEY_OK) {
        return 1;
    }
    while (!atomic_load(&listed)) sleep_ms(1);
    parley_message_collection *small_view = NULL, *big_view = NULL;
    if (!open_message_view(client, small_channel, &small_view) || !open_message_view(client, big_channel, &big_view)) return 1;
    live_result small_viewed = run(root, &w, small_channel, bob, messages, 100);
    live_result large_viewed = run(root, &w, big_channel, bob, messages, 100);
    printf("The same with a channel collection and a message collection open (%ld bytes handed to their callbacks)\n",
           atomic_load(&view_bytes));
    printf("  %4d members   p50 %6.2f ms   p99 %6.2f ms   max %6.2f ms   lost %d   process CPU %6.0f us/message\n", 2,
           small_viewed.p50 / 1e3, small_viewed.p99 / 1e3, small_viewed.max / 1e3, small_viewed.lost, small_viewed.cpu_per_message);
    printf("  %4d members   p50 %6.2f ms   p99 %6.2f ms   max %6.2f ms   lost %d   process CPU %6.0f us/message\n", big,
           large_viewed.p50 / 1e3, large_viewed.p99 / 1e3, large_viewed.max / 1e3, large_viewed.lost, large_viewed.cpu_per_message);
    parley_message_collection_dispose(small_view);
    parley_message_collection_dispose(big_view);
    parley_group_channel_collection_dispose(channels);

    char measure[96], figure[64], comparison[96];
    for (int i = 0; i < 2; i++) {
        snprintf(measure, sizeof measure, "P3 live delivery at %d msg/s, POST sent to callback", rates[i]);
        snprintf(figure, sizeof figure, "p50 %.2f p99 %.2f ms", results[i]->p50 / 1e3, results[i]->p99 / 1e3);
        snprintf(comparison, sizeof comparison, "max %.2f ms, lost %d of %d", results[i]->max / 1e3, results[i]->lost, messages);
        summary_row(measure, figure, comparison, "p50 <= 3, p99 <= 15 ms");
        floor_row(floor_measured, results[i], floors[i]);
    }
    snprintf(measure, sizeof measure, "live message in a %d-member channel: process CPU", big);
    snprintf(figure, sizeof figure, "%.0f us/message", large.cpu_per_message);
    snprintf(comparison, sizeof comparison, "2 members: %.0f us/message", small.cpu_per_message);
    summary_row(measure, figure, comparison, "flat in channel size");
    snprintf(figure, sizeof figure, "p50 %.2f p99 %.2f ms", large.p50 / 1e3, large.p99 / 1e3);
    snprintf(comparison, sizeof comparison, "2 members: p50 %.2f p99 %.2f ms", small.p50 / 1e3, small.p99 / 1e3);
    summary_row("  its delivery, POST sent to the receiver's callback", figure, comparison, "p50 <= 3, p99 <= 15 ms");
    snprintf(figure, sizeof figure, "%.0f us/message", large_viewed.cpu_per_message);
    snprintf(comparison, sizeof comparison, "2 members: %.0f us/message", small_viewed.cpu_per_message);
    summary_row("  the same with a channel and a message collection open", figure, comparison, "flat in channel size");
    parley_client_destroy(client);
    parley_client_destroy(root);
    snprintf(config, sizeof config, "rm -rf '%s'", cache_dir);
    return system(config) == 0 && small.lost == 0 && large.lost == 0 && slow.lost == 0 && fast.lost == 0 &&
                   small_viewed.lost == 0 && large_viewed.lost == 0
               ? 0
               : 1;
}
