/* The floor under P1 (a cached page of 100 through a message collection's load_previous):
 * what any engine that keeps Parley's rules must do for such a page, in plain C with nothing
 * else, so that bench_views can print it beside the raw read and the engine's page.
 *
 * The rules it keeps:
 *   - a page is ordered with the view's events: the call hands the load to the engine's
 *     serial executor and returns; the result reaches the application on the callback thread
 *     (docs/THREADING.md). Two hand-offs between threads;
 *   - every text read is proven to be the one the cache wrote before it reaches the
 *     application (docs/ARCHITECTURE.md, the cache's checks): its stored check value
 *     (Sources/ParleyCore/Store/StoredTextCheck.swift, the same function here) and valid
 *     UTF-8 holding an object;
 *   - the page reaches the application as one JSON array of the stored texts;
 *   - one more row than the page is read, to know whether older messages follow.
 * It reads on one connection that stays open, as the engine's does (so its pages are warm
 * after the first view, as the engine's are).
 *
 * What it leaves out, all of which the engine does: the check that a chunk covers the page
 * (a second query), the view's list and keys, the freshness and state checks, the error
 * paths. Its figure is therefore a lower bound for the engine's. */
#ifndef PARLEY_BENCH_PAGE_FLOOR_H
#define PARLEY_BENCH_PAGE_FLOOR_H
#include "bench_support.h"
#include <stdint.h>

/* StoredTextCheck.value(of:) (Sources/ParleyCore/Store/StoredTextCheck.swift), in C. */
static inline int64_t stored_text_check(const unsigned char *bytes, size_t count) {
    const uint64_t multiplier = 0x9E3779B97F4A7C15ULL;
    uint64_t state = 0x5045524C45590001ULL ^ ((uint64_t)count * multiplier);
    size_t words = count / 8;
    for (size_t index = 0; index < words; index++) {
        uint64_t word;
        memcpy(&word, bytes + index * 8, 8); /* little-endian host, as the stored values assume */
        state = (state ^ word) * multiplier;
        state = (state << 29) | (state >> 35);
    }
    uint64_t tail = 0;
    for (size_t offset = count; offset > words * 8; offset--) tail = (tail << 8) | bytes[offset - 1];
    state = (state ^ tail) * multiplier;
    state = (state << 29) | (state >> 35);
    state = (state ^ (state >> 30)) * 0xBF58476D1CE4E5B9ULL;
    state = (state ^ (state >> 27)) * 0x94D049BB133111EBULL;
    return (int64_t)(state ^ (state >> 31));
}

/* Whether `bytes` are valid UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF). */
static inline int valid_utf8(const unsigned char *bytes, size_t count) {
    size_t index = 0;
    while (index < count) {
        /* Eight ASCII bytes at a time (most of a message's text). */
        uint64_t word;
        if (index + 8 <= count && (memcpy(&word, bytes + index, 8), (word & 0x8080808080808080ULL) == 0)) {
            index += 8;
            continue;
        }
        unsigned char lead = bytes[index];
        if (lead < 0x80) {
            index++;
            continue;
        }
        size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 ? 2 : 0;
        if (length == 0 || lead > 0xF4 || index + length > count) return 0;
        for (size_t k = 1; k < length; k++) {
            if ((bytes[index + k] & 0xC0) != 0x80) return 0;
        }
        unsigned char second = bytes[index + 1];
        if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) || (lead == 0xF0 && second < 0x90) ||
            (lead == 0xF4 && second > 0x8F)) {
            return 0;
        }
        index += length;
    }
    return 1;
}

typedef struct {
    sqlite3 *db;
    sqlite3_stmt *select;
    const char *channel;
    long long below_created, below_id; /* the page is read below this key */
    handoff to_engine, to_callback, delivered;
    int stopping, failed;
    char failure[256];
    char *page;          /* the JSON array handed to the callback */
    size_t page_bytes, page_capacity;
    int rows;
    double called_at, callback_at;
    pthread_t engine, callback;
} page_floor;

static void page_floor_fail(page_floor *floor, const char *what) {
    if (!floor->failed) snprintf(floor->failure, sizeof floor->failure, "%s", what);
    floor->failed = 1;
}

static int page_floor_append(page_floor *floor, const void *bytes, size_t count) {
    if (floor->page_bytes + count + 1 > floor->page_capacity) {
        size_t capacity = (floor->page_bytes + count + 1) * 2;
        char *grown = realloc(floor->page, capacity);
        if (grown == NULL) return 0;
        floor->page = grown;
        floor->page_capacity = capacity;
    }
    memcpy(floor->page + floor->page_bytes, bytes, count);
    floor->page_bytes += count;
    floor->page[floor->page_bytes] = '\0';
    return 1;
}

/* The engine's part of a page: 101 rows below the key, each text checked, 100 of them joined. */
static void page_floor_read(page_floor *floor) {
    sqlite3_bind_text(floor->select, 1, floor->channel, -1, SQLITE_STATIC);
    sqlite3_bind_int64(floor->select, 2, floor->below_created);
    sqlite3_bind_int64(floor->select, 3, floor->below_id);
    floor->page_bytes = 0;
    floor->rows = 0;
    page_floor_append(floor, "[", 1);
    int code;
    while ((code = sqlite3_step(floor->select)) == SQLITE_ROW) {
        if (floor->rows == 100) break; /* the 101st row: older messages follow */
        const unsigned char *text = sqlite3_column_text(floor->select, 0);
        size_t count = (size_t)sqlite3_column_bytes(floor->select, 0);
        int checked = sqlite3_column_type(floor->select, 1) == SQLITE_INTEGER &&
                      stored_text_check(text, count) == sqlite3_column_int64(floor->select, 1);
        if (!checked || count < 2 || text[0] != '{' || text[count - 1] != '}' || !valid_utf8(text, count)) {
            page_floor_fail(floor, "a stored text failed its check (or has no check value)");
            break;
        }
        if ((floor->rows > 0 && !page_floor_append(floor, ",", 1)) || !page_floor_append(floor, text, count)) {
            page_floor_fail(floor, "out of memory");
            break;
        }
        floor->below_created = sqlite3_column_int64(floor->select, 2);
        floor->below_id = sqlite3_column_int64(floor->select, 3);
        floor->rows++;
    }
    if (code != SQLITE_ROW && code != SQLITE_DONE) page_floor_fail(floor, sqlite3_errmsg(floor->db));
    sqlite3_reset(floor->select);
    page_floor_append(floor, "]", 1);
}

static void *page_floor_engine_main(void *argument) {
    page_floor *floor = argument;
    for (;;) {
        handoff_take(&floor->to_engine);
        if (floor->stopping) return NULL;
        page_floor_read(floor);
        handoff_post(&floor->to_callback);
    }
}

static void *page_floor_callback_main(void *argument) {
    page_floor *floor = argument;
    for (;;) {
        handoff_take(&floor->to_callback);
        if (floor->stopping) return NULL;
        floor->callback_at = now_us();
        /* As bench_views' own callback, which measures the page's length. */
        if (strlen(floor->page) != floor->page_bytes) page_floor_fail(floor, "the page's text is cut");
        handoff_post(&floor->delivered);
    }
}

/* Opens `path` (read-only) for pages of `channel`; 0 on failure (message printed). */
static inline int page_floor_start(page_floor *floor, const char *path, const char *channel) {
    memset(floor, 0, sizeof *floor);
    floor->channel = channel;
    if (sqlite3_open_v2(path, &floor->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(floor->db,
                           "SELECT json, json_check, created_at, message_id FROM messages WHERE channel_url = ?1"
                           " AND (created_at, message_id) < (?2, ?3) ORDER BY created_at DESC, message_id DESC LIMIT 101",
                           -1, &floor->select, NULL) != SQLITE_OK) {
        fprintf(stderr, "page floor: %s\n", floor->db ? sqlite3_errmsg(floor->db) : "cannot open the cache");
        return 0;
    }
    handoff_init(&floor->to_engine);
    handoff_init(&floor->to_callback);
    handoff_init(&floor->delivered);
    pthread_create(&floor->engine, NULL, page_floor_engine_main, floor);
    pthread_create(&floor->callback, NULL, page_floor_callback_main, floor);
    return 1;
}

/* Starts again from the newest message (a new view). */
static inline void page_floor_restart(page_floor *floor) {
    floor->below_created = 0x7fffffffffffffffLL;
    floor->below_id = 0x7fffffffffffffffLL;
}

/* Points below every message: the next page reads nothing, and times the two hand-offs
 * (and an index probe) alone. */
static inline void page_floor_at_oldest(page_floor *floor) {
    floor->below_created = -0x7fffffffffffffffLL - 1;
    floor->below_id = -0x7fffffffffffffffLL - 1;
}

/* One page, timed as bench_views times the engine's: from the call to the callback's start
 * (us); -1 if it failed. */
static inline double page_floor_page(page_floor *floor) {
    floor->called_at = now_us();
    handoff_post(&floor->to_engine);
    handoff_take(&floor->delivered);
    return floor->failed ? -1 : floor->callback_at - floor->called_at;
}

static inline void page_floor_stop(page_floor *floor) {
    floor->stopping = 1;
    handoff_post(&floor->to_engine);
    pthread_join(floor->engine, NULL);
    handoff_post(&floor->to_callback);
    pthread_join(floor->callback, NULL);
    sqlite3_finalize(floor->select);
    sqlite3_close(floor->db);
    free(floor->page);
}

#endif
