/* bench_search: searching a big cache.
 *
 *   bench_search SERVER_URL API_TOKEN [CACHED_MESSAGES]
 *
 * A user's cache holds CACHED_MESSAGES (default 1,000,000) messages of one channel, written
 * with raw sqlite3 (the cache's own schema, so its triggers index each one): ten words each
 * from a vocabulary of 20,000 made-up words drawn with Zipf's law (as words in real text
 * are), so a query word may be rare or very common. Measured, for words of several
 * frequencies, a two-word query and a prefix, in both orders:
 *   - a search's first page of 20 (parley_message_search_create + load_more to its
 *     completion; the first search of each query, then the median of 5) beside the raw
 *     sqlite3 run of the same statements on another connection (the floor); in relevance
 *     order also the ranking of every match by FTS5's bm25 (what relevance cost when it
 *     ranked them all), beside the window of the newest 5,000 matches the library ranks;
 *   - writing the messages with the index beside the same writes without it (the trigger
 *     removed on a copy), and the cache file with and without the index;
 *   - with PARLEY_BENCH_CACHE_KEY set, the same first pages on a compact plain copy of the
 *     cache and on the same copy encrypted with that key (bench_support.h, `twin_copies`),
 *     a fresh client on each: the first search of each query, then 5 alternated. */
#define _POSIX_C_SOURCE 200809L
#include "bench_support.h"
#include <sqlite3.h>
#include <unistd.h>

#define VOCABULARY 20000
#define WORDS_PER_MESSAGE 10
/* The library's default relevance window. */
#define RELEVANCE_WINDOW 5000
#define QUOTED(x) #x
#define STRINGIFY(x) QUOTED(x)

static char words[VOCABULARY][16];
static double cumulative[VOCABULARY];

/* Word `rank` (0: the most frequent): syllables chosen by its digits, so words differ in
 * length and share prefixes the way real ones do. */
static void make_vocabulary(void) {
    static const char *syllables[] = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da", "fe", "go", "hu", "ji", "po", "qu"};
    double total = 0;
    for (int rank = 0; rank < VOCABULARY; rank++) {
        int value = rank + 16;
        words[rank][0] = '\0';
        while (value > 0) {
            strcat(words[rank], syllables[value % 16]);
            value /= 16;
        }
        total += 1.0 / (rank + 1);
        cumulative[rank] = total;
    }
    for (int rank = 0; rank < VOCABULARY; rank++) cumulative[rank] /= total;
}

static int zipf_rank(void) {
    double u = (double)rand() / ((double)RAND_MAX + 1.0);
    int low = 0, high = VOCABULARY - 1;
    while (low < high) {
        int middle = (low + high) / 2;
        if (cumulative[middle] < u) low = middle + 1; else high = middle;
    }
    return low;
}

/* Writes `count` messages into the channel of the cache at `path`; returns the seconds taken. */
static double write_messages(const char *path, const char *channel, int count, long long first_id) {
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=10000;", NULL, NULL, NULL);
    sqlite3_stmt *insert = NULL;
    sqlite3_prepare_v2(db,
                       "INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,"
                       " parent_message_id, search_text, json) VALUES (?1, ?2, ?3, 0, '', 'MESG', '', 'bob', 0, ?4,"
                       " json_object('channel_url', ?2, 'created_at', ?3, 'custom_type', '', 'message', ?4, 'message_id', ?1,"
                       " 'type', 'MESG', 'updated_at', 0, 'user', json_object('user_id', 'bob')))",
                       -1, &insert, NULL);
    double started = now_us();
    char text[256];
    for (int done = 0; done < count;) {
        int batch = count - done < 20000 ? count - done : 20000;
        sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        for (int i = 0; i < batch; i++, done++) {
            text[0] = '\0';
            for (int w = 0; w < WORDS_PER_MESSAGE; w++) {
                if (w > 0) strcat(text, " ");
                strcat(text, words[zipf_rank()]);
            }
            sqlite3_bind_int64(insert, 1, first_id + done);
            sqlite3_bind_text(insert, 2, channel, -1, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 3, 1600000000000LL + done);
            sqlite3_bind_text(insert, 4, text, -1, SQLITE_TRANSIENT);
            if (sqlite3_step(insert) != SQLITE_DONE) {
                fprintf(stderr, "insert: %s\n", sqlite3_errmsg(db));
                return -1;
            }
            sqlite3_reset(insert);
        }
        if (!index_noted_changes(db)) return -1;
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    }
    double seconds = (now_us() - started) / 1e6;
    sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    sqlite3_finalize(insert);
    sqlite3_close(db);
    return seconds;
}

typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int done, code, count;
} load_slot;

static void on_loaded(void *user_data, const parley_error *error, const char *results_json) {
    load_slot *slot = user_data;
    pthread_mutex_lock(&slot->mutex);
    slot->code = error ? error->code : 0;
    slot->count = 0;
    for (const char *at = results_json; at && (at = strstr(at, "\"origin\":")); at++) slot->count++;
    slot->done = 1;
    pthread_cond_broadcast(&slot->cond);
    pthread_mutex_unlock(&slot->mutex);
}

/* One search's first page through the library: microseconds, and how many results it gave. */
static double library_first_page(parley_client *client, const char *query, const char *order, int *count) {
    char params[256];
    snprintf(params, sizeof params, "{\"query\": \"%s\", \"order\": \"%s\", \"limit\": 20}", query, order);
    load_slot slot = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    double started = now_us();
    parley_message_search *search = NULL;
    if (parley_message_search_create(&search, client, params, NULL) != PARLEY_OK) {
        fprintf(stderr, "search: %s\n", parley_last_error_message());
        return -1;
    }
    parley_message_search_load_more(search, on_loaded, &slot);
    pthread_mutex_lock(&slot.mutex);
    while (!slot.done) pthread_cond_wait(&slot.cond, &slot.mutex);
    pthread_mutex_unlock(&slot.mutex);
    double elapsed = now_us() - started;
    parley_message_search_dispose(search);
    *count = slot.count;
    return slot.code == 0 ? elapsed : -1;
}

/* The library's relevance score (Sources/ParleyCore/Store/ChatCache+Search.swift, SearchRank):
 * per phrase its occurrences n, saturated as n * 2.2 / (n + 1.2), summed. */
static double match_score(const Fts5ExtensionApi *api, Fts5Context *context) {
    double score = 0;
    for (int phrase = 0; phrase < api->xPhraseCount(context); phrase++) {
        Fts5PhraseIter iterator;
        int column = 0, offset = 0;
        double occurrences = 0;
        for (api->xPhraseFirst(context, phrase, &iterator, &column, &offset); column >= 0;
             api->xPhraseNext(context, &iterator, &column, &offset))
            occurrences += 1;
        score += occurrences * 2.2 / (occurrences + 1.2);
    }
    return score;
}

/* parley_search_page(message_search, k, part): part 0 the match's score, part 1 whether it
 * enters the best k so far; both parts of a row score it once. */
typedef struct {
    int size, kept, has_last;
    long long last_rowid;
    double last_score;
    double best[128];
} page_scores;

static void search_page(const Fts5ExtensionApi *api, Fts5Context *context, sqlite3_context *result, int count, sqlite3_value **values) {
    (void)count;
    page_scores *page = api->xGetAuxdata(context, 0);
    if (page == NULL) {
        page = calloc(1, sizeof *page);
        int size = sqlite3_value_int(values[0]);
        page->size = size < 1 ? 1 : size > 128 ? 128 : size;
        api->xSetAuxdata(context, page, free);
    }
    long long rowid = api->xRowid(context);
    if (!page->has_last || page->last_rowid != rowid) {
        page->last_score = match_score(api, context);
        page->last_rowid = rowid;
        page->has_last = 1;
    }
    double score = page->last_score;
    if (sqlite3_value_int(values[1]) != 1) {
        sqlite3_result_double(result, score);
        return;
    }
    if (page->kept == page->size && !(score > page->best[page->size - 1])) {
        sqlite3_result_int(result, 0);
        return;
    }
    int at = page->kept < page->size ? page->kept++ : page->size - 1;
    while (at > 0 && score > page->best[at - 1]) {
        page->best[at] = page->best[at - 1];
        at--;
    }
    page->best[at] = score;
    sqlite3_result_int(result, 1);
}

static int register_search_page(sqlite3 *db) {
    fts5_api *api = NULL;
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &statement, NULL) != SQLITE_OK) return 0;
    sqlite3_bind_pointer(statement, 1, (void *)&api, "fts5_api_ptr", NULL);
    sqlite3_step(statement);
    sqlite3_finalize(statement);
    return api != NULL && api->xCreateFunction(api, "parley_search_page", NULL, search_page, NULL) == SQLITE_OK;
}

/* A match and its score; `ranks_before` orders them as the library does: best first, ties newest first. */
typedef struct {
    long long id;
    double score;
} ranked_match;

static int ranks_before(ranked_match a, ranked_match b) { return a.score != b.score ? a.score > b.score : a.id > b.id; }

/* The same page with raw sqlite3: the library's statements (Sources/ParleyCore/Store/
 * ChatCache+Search.swift) with the expression its plain-text rule makes. Time order: one
 * statement. Relevance order: one newest-first walk of the window and one match more (then
 * older matches exist) that scores each match (the best 21 kept as they come) and makes the
 * snippets of those that enter the best 21, then the best 21's messages. */
static double raw_first_page(sqlite3 *db, const char *expression, const char *order) {
    double started = now_us();
    sqlite3_stmt *statement = NULL;
    if (strcmp(order, "time") == 0) {
        sqlite3_prepare_v2(db,
                           "SELECT m.message_id, m.channel_url, m.created_at, m.json, snippet(message_search, -1, '<b>', '</b>', '…', 16), 0"
                           " FROM message_search JOIN messages AS m ON m.message_id = message_search.rowid"
                           " WHERE message_search MATCH ?1 ORDER BY message_search.rowid DESC LIMIT 21",
                           -1, &statement, NULL);
        sqlite3_bind_text(statement, 1, expression, -1, SQLITE_STATIC);
    } else {
        sqlite3_prepare_v2(db,
                           "SELECT message_search.rowid, parley_search_page(message_search, 21, 0),"
                           " CASE WHEN parley_search_page(message_search, 21, 1) THEN snippet(message_search, -1, '<b>', '</b>', '…', 16) END"
                           " FROM message_search WHERE message_search MATCH ?1 ORDER BY message_search.rowid DESC"
                           " LIMIT " STRINGIFY(RELEVANCE_WINDOW) " + 1",
                           -1, &statement, NULL);
        sqlite3_bind_text(statement, 1, expression, -1, SQLITE_STATIC);
        ranked_match best[21];
        int kept = 0, count = 0;
        size_t snippet_bytes = 0;
        while (sqlite3_step(statement) == SQLITE_ROW && count < RELEVANCE_WINDOW) {
            ranked_match match = {sqlite3_column_int64(statement, 0), sqlite3_column_double(statement, 1)};
            snippet_bytes += (size_t)sqlite3_column_bytes(statement, 2);
            count++;
            if (kept == 21 && !ranks_before(match, best[20])) continue;
            int at = kept < 21 ? kept++ : 20;
            while (at > 0 && ranks_before(match, best[at - 1])) {
                best[at] = best[at - 1];
                at--;
            }
            best[at] = match;
        }
        sqlite3_finalize(statement);
        char ids[21 * 24] = "[";
        for (int i = 0; i < kept; i++) {
            snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%lld", i > 0 ? "," : "", best[i].id);
        }
        strcat(ids, "]");
        if (snippet_bytes == 0) return -1;
        sqlite3_prepare_v2(db,
                           "SELECT message_id, channel_url, created_at, json FROM messages WHERE message_id IN (SELECT value FROM json_each(?1))",
                           -1, &statement, NULL);
        sqlite3_bind_text(statement, 1, ids, -1, SQLITE_TRANSIENT);
    }
    size_t bytes = 0;
    while (sqlite3_step(statement) == SQLITE_ROW) bytes += (size_t)sqlite3_column_bytes(statement, 3);
    sqlite3_finalize(statement);
    double elapsed = now_us() - started;
    return bytes > 0 ? elapsed : -1;
}

/* Relevance by ranking every match with FTS5's bm25: the ids and scores of the best 21. */
static double raw_rank_every_match(sqlite3 *db, const char *expression) {
    double started = now_us();
    sqlite3_stmt *statement = NULL;
    sqlite3_prepare_v2(db,
                       "SELECT message_search.rowid, bm25(message_search) FROM message_search WHERE message_search MATCH ?1"
                       " ORDER BY bm25(message_search) ASC, message_search.rowid DESC LIMIT 21",
                       -1, &statement, NULL);
    sqlite3_bind_text(statement, 1, expression, -1, SQLITE_STATIC);
    int rows = 0;
    while (sqlite3_step(statement) == SQLITE_ROW) rows++;
    sqlite3_finalize(statement);
    double elapsed = now_us() - started;
    return rows > 0 ? elapsed : -1;
}

static long long count_matches(sqlite3 *db, const char *expression) {
    sqlite3_stmt *statement = NULL;
    sqlite3_prepare_v2(db, "SELECT count(*) FROM message_search WHERE message_search MATCH ?1", -1, &statement, NULL);
    sqlite3_bind_text(statement, 1, expression, -1, SQLITE_STATIC);
    long long count = sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : -1;
    sqlite3_finalize(statement);
    return count;
}

typedef struct {
    const char *label;
    char query[64];
    char expression[96];
} query_case;

enum { query_cases = 5 };

/* The first pages of every query in both orders on a plain and an encrypted copy of the
 * cache at `path` (under the cache directory `directory`), printed with the ratios and as summary rows; beside them `raw_ms`, the
 * raw sqlite3 runs on the plain file measured earlier in the run (an encrypted file has no
 * raw floor). */
static int compare_encrypted(const char *url, const char *directory, const char *path, const char *user, const char *token,
                             int cached, const query_case *cases, double raw_ms[query_cases][2]) {
    char plain_dir[] = "/tmp/parley-bench-search-plain-XXXXXX", keyed_dir[] = "/tmp/parley-bench-search-keyed-XXXXXX";
    char plain_file[1100], keyed_file[1100], command[2300];
    printf("\ncopying the cache for the comparison with encryption on...\n");
    fflush(stdout);
    if (!twin_copies(directory, path, plain_dir, keyed_dir, plain_file, keyed_file, sizeof plain_file)) return 0;
    parley_client *plain = connected_client_keyed(url, plain_dir, user, token, NULL, "");
    double started = now_us();
    parley_client *keyed = connected_client_keyed(url, keyed_dir, user, token, NULL, cache_key_member());
    double encrypt_seconds = (now_us() - started) / 1e6;
    if (plain == NULL || keyed == NULL) return 0;
    /* Each client's first connect starts a full check of its file: not beside the searches. */
    if (!file_is_sealed(keyed_file)) {
        fprintf(stderr, "the keyed connect left %s plain\n", keyed_file);
        return 0;
    }
    if (wait_checked(plain_file, 300) < 0 || wait_checked(keyed_file, 300) < 0) return 0;
    printf("Encryption at rest, search over a cache of %d (compact copies, a client on each; the first search of each\n"
           "query, then the median of 5, alternated)\n",
           cached);
    printf("  encrypting the copy at its first connect %6.1f s   (%.0f MB)\n", encrypt_seconds, file_bytes(keyed_file) / 1048576.0);
    /* Per order: the slowest query encrypted, the range of the ratios, and the first searches
     * (single samples, so summed over the queries). */
    double worst[2] = {0, 0}, worst_plain[2] = {0, 0}, worst_raw[2] = {0, 0}, low[2] = {1e9, 1e9}, high[2] = {0, 0};
    double plain_firsts[2] = {0, 0}, keyed_firsts[2] = {0, 0};
    const char *worst_label[2] = {"", ""};
    for (int c = 0; c < query_cases; c++) {
        for (int o = 0; o < 2; o++) {
            const char *order = o == 0 ? "time" : "relevance";
            double plain_samples[5], keyed_samples[5];
            int plain_count = 0, keyed_count = 0;
            double plain_first = library_first_page(plain, cases[c].query, order, &plain_count);
            double keyed_first = library_first_page(keyed, cases[c].query, order, &keyed_count);
            for (int i = 0; i < 5; i++) {
                int keyed_first_turn = i % 2;
                for (int turn = 0; turn < 2; turn++) {
                    if ((turn == 0) == keyed_first_turn)
                        keyed_samples[i] = library_first_page(keyed, cases[c].query, order, &keyed_count);
                    else
                        plain_samples[i] = library_first_page(plain, cases[c].query, order, &plain_count);
                }
            }
            double plain_median = median(plain_samples, 5), keyed_median = median(keyed_samples, 5);
            if (plain_first < 0 || keyed_first < 0 || plain_median < 0 || keyed_median < 0 || plain_count != keyed_count) {
                fprintf(stderr, "search %s (%s): failed, or the copies gave different pages\n", cases[c].label, order);
                return 0;
            }
            double ratio = keyed_median / plain_median;
            printf("  %-12s %-9s  plain first %6.2f median %6.2f ms   encrypted first %6.2f median %6.2f ms   %.2fx"
                   "   (raw sqlite3 %6.2f ms)\n",
                   cases[c].label, order, plain_first / 1e3, plain_median / 1e3, keyed_first / 1e3, keyed_median / 1e3, ratio,
                   raw_ms[c][o]);
            plain_firsts[o] += plain_first;
            keyed_firsts[o] += keyed_first;
            if (ratio < low[o]) low[o] = ratio;
            if (ratio > high[o]) high[o] = ratio;
            if (keyed_median > worst[o]) {
                worst[o] = keyed_median;
                worst_plain[o] = plain_median;
                worst_raw[o] = raw_ms[c][o];
                worst_label[o] = cases[c].label;
            }
        }
    }
    for (int o = 0; o < 2; o++) {
        printf("  first searches, %-9s order, the %d queries: plain %.2f ms, encrypted %.2f ms (%.2fx)\n", o == 0 ? "time" : "relevance",
               query_cases, plain_firsts[o] / 1e3, keyed_firsts[o] / 1e3, keyed_firsts[o] / plain_firsts[o]);
    }
    for (int o = 0; o < 2; o++) {
        char measure[192], figure[128], comparison[192];
        snprintf(measure, sizeof measure, "search first page, %d cached, slowest query in %s order (%s) [cache encrypted]", cached,
                 o == 0 ? "time" : "relevance", worst_label[o]);
        snprintf(figure, sizeof figure, "%.2f ms (%.2fx; every query %.2f-%.2fx)", worst[o] / 1e3, worst[o] / worst_plain[o], low[o],
                 high[o]);
        snprintf(comparison, sizeof comparison, "plain copy %.2f ms; raw sqlite3 %.2f ms; first searches %.2fx", worst_plain[o] / 1e3,
                 worst_raw[o], keyed_firsts[o] / plain_firsts[o]);
        summary_row(measure, figure, comparison, "<= 1.15x plain");
    }
    parley_client_destroy(plain);
    parley_client_destroy(keyed);
    snprintf(command, sizeof command, "rm -rf '%s' '%s'", plain_dir, keyed_dir);
    return system(command) == 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SERVER_URL API_TOKEN [CACHED_MESSAGES]\n", argv[0]);
        return 2;
    }
    const char *url = argv[1], *api_token = argv[2];
    int cached = argc > 3 ? atoi(argv[3]) : 1000000;
    if (cached < 1000) return 2;
    srand(7);
    make_vocabulary();
    char cache_dir[] = "/tmp/parley-bench-search-XXXXXX", command[1200];
    if (mkdtemp(cache_dir) == NULL) return 1;
    waiter w = WAITER_INIT;
    parley_client *root = admin_client(url, api_token);
    if (root == NULL) return 1;
    char user[128], channel[128], token[256];
    if (!solo_user_and_channel(root, &w, "search", user, sizeof user, channel, sizeof channel, token, sizeof token)) return 1;
    /* Plain whatever PARLEY_BENCH_CACHE_KEY says: the messages are written raw. */
    parley_client *client = connected_client_keyed(url, cache_dir, user, token, NULL, "");
    if (client == NULL) return 1;
    const char *found = cache_file_in(cache_dir);
    if (found == NULL) return 1;
    char path[1024];
    snprintf(path, sizeof path, "%s", found);

    /* The writes without the index, measured on a copy of the (still empty) cache. */
    char bare[1100];
    snprintf(bare, sizeof bare, "%s.bare", path);
    sqlite3 *bare_db = NULL;
    sqlite3_open_v2(path, &bare_db, SQLITE_OPEN_READONLY, NULL);
    char copy_sql[1200];
    snprintf(copy_sql, sizeof copy_sql, "VACUUM INTO '%s'", bare);
    if (sqlite3_exec(bare_db, copy_sql, NULL, NULL, NULL) != SQLITE_OK) return 1;
    sqlite3_close(bare_db);
    sqlite3_open(bare, &bare_db);
    sqlite3_exec(bare_db,
                 "DROP TRIGGER message_search_after_insert; DROP TRIGGER message_search_after_delete;"
                 " DROP TRIGGER message_search_after_update; DROP TABLE message_search;",
                 NULL, NULL, NULL);
    sqlite3_close(bare_db);
    printf("writing %d messages of %d words (Zipf over %d words)...\n", cached, WORDS_PER_MESSAGE, VOCABULARY);
    srand(11);
    double bare_seconds = write_messages(bare, channel, cached, 1000000000LL);
    srand(11);
    double indexed_seconds = write_messages(path, channel, cached, 1000000000LL);
    if (bare_seconds < 0 || indexed_seconds < 0) return 1;
    /* Both files as compact as a fresh write leaves them. */
    sqlite3_open(bare, &bare_db);
    sqlite3_exec(bare_db, "VACUUM", NULL, NULL, NULL);
    sqlite3_close(bare_db);
    long long bare_bytes = file_bytes(bare);
    long long indexed_bytes = file_bytes(path);

    sqlite3 *db = NULL;
    sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    if (!register_search_page(db)) {
        fprintf(stderr, "registering parley_search_page: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    query_case cases[query_cases];
    int ranks[] = {2, 300, 15000};
    const char *labels[] = {"common word", "medium word", "rare word"};
    for (int i = 0; i < 3; i++) {
        cases[i].label = labels[i];
        snprintf(cases[i].query, sizeof cases[i].query, "%s", words[ranks[i]]);
        snprintf(cases[i].expression, sizeof cases[i].expression, "\"%s\" *", words[ranks[i]]);
    }
    cases[3].label = "two words";
    snprintf(cases[3].query, sizeof cases[3].query, "%s %s", words[40], words[90]);
    snprintf(cases[3].expression, sizeof cases[3].expression, "\"%s\" AND \"%s\" *", words[40], words[90]);
    cases[4].label = "prefix";
    snprintf(cases[4].query, sizeof cases[4].query, "%.5s", words[700]);
    snprintf(cases[4].expression, sizeof cases[4].expression, "\"%.5s\" *", words[700]);

    printf("\nSearch over a cache of %d messages: first page of 20 (search create + load_more to completion);\n"
           "relevance ranks the newest %d matches\n",
           cached, RELEVANCE_WINDOW);
    /* The slowest query of each order: [0] time, [1] relevance. */
    double worst[2] = {0, 0}, worst_raw[2] = {0, 0}, worst_first[2] = {0, 0}, worst_every[2] = {0, 0};
    const char *worst_label[2] = {"", ""};
    double raw_ms[query_cases][2];
    for (int c = 0; c < query_cases; c++) {
        long long matches = count_matches(db, cases[c].expression);
        for (int o = 0; o < 2; o++) {
            const char *order = o == 0 ? "time" : "relevance";
            double samples[5], raw[5], every[5];
            int count = 0;
            double first = library_first_page(client, cases[c].query, order, &count);
            for (int i = 0; i < 5; i++) {
                samples[i] = library_first_page(client, cases[c].query, order, &count);
                raw[i] = raw_first_page(db, cases[c].expression, order);
                every[i] = o == 0 ? 0 : raw_rank_every_match(db, cases[c].expression);
            }
            double library_median = median(samples, 5), raw_median = median(raw, 5), every_median = median(every, 5);
            raw_ms[c][o] = raw_median / 1e3;
            printf("  %-12s %-9s %8lld matches  first %8.2f ms  median %8.2f ms  raw sqlite3 %8.2f ms  (%d results)",
                   cases[c].label, order, matches, first / 1e3, library_median / 1e3, raw_median / 1e3, count);
            if (o == 1) printf("  every match ranked by bm25 %8.2f ms", every_median / 1e3);
            printf("\n");
            if (library_median > worst[o]) {
                worst[o] = library_median;
                worst_raw[o] = raw_median;
                worst_first[o] = first;
                worst_every[o] = every_median;
                worst_label[o] = cases[c].label;
            }
        }
    }
    printf("\nWriting %d messages (raw sqlite3, batches of 20,000)\n", cached);
    printf("  with the search index    %8.1f s   (%.1f us per message)\n", indexed_seconds, indexed_seconds * 1e6 / cached);
    printf("  without it               %8.1f s   (%.1f us per message)\n", bare_seconds, bare_seconds * 1e6 / cached);
    printf("Cache file: %.1f MB with the index, %.1f MB without (+%.0f%%)\n", indexed_bytes / 1048576.0, bare_bytes / 1048576.0,
           100.0 * (indexed_bytes - bare_bytes) / (double)bare_bytes);

    char measure[160], figure[96], comparison[128];
    for (int o = 0; o < 2; o++) {
        snprintf(measure, sizeof measure, "search first page, %d cached, slowest query in %s order (%s)", cached,
                 o == 0 ? "time" : "relevance", worst_label[o]);
        snprintf(figure, sizeof figure, "%.2f ms (first search %.2f ms)", worst[o] / 1e3, worst_first[o] / 1e3);
        if (o == 0) snprintf(comparison, sizeof comparison, "raw sqlite3 %.2f ms", worst_raw[o] / 1e3);
        else snprintf(comparison, sizeof comparison, "raw sqlite3 %.2f ms; every match ranked by bm25 %.2f ms", worst_raw[o] / 1e3, worst_every[o] / 1e3);
        summary_row(measure, figure, comparison, "<= 5 ms");
    }
    snprintf(figure, sizeof figure, "%.1f us/message", indexed_seconds * 1e6 / cached);
    snprintf(comparison, sizeof comparison, "without the index %.1f us/message", bare_seconds * 1e6 / cached);
    summary_row("cache write of a message, with the search index", figure, comparison, "(cost of the index)");
    snprintf(figure, sizeof figure, "%.0f MB (+%.0f%%)", indexed_bytes / 1048576.0, 100.0 * (indexed_bytes - bare_bytes) / (double)bare_bytes);
    snprintf(comparison, sizeof comparison, "without the index %.0f MB", bare_bytes / 1048576.0);
    summary_row("cache size with the search index", figure, comparison, "(reported)");
    sqlite3_close(db);
    parley_client_destroy(client);
    fflush(stdout);
    if (*cache_key_member() != '\0' && !compare_encrypted(url, cache_dir, path, user, token, cached, cases, raw_ms)) return 1;
    parley_client_destroy(root);
    snprintf(command, sizeof command, "rm -rf '%s'", cache_dir);
    return system(command) == 0 ? 0 : 1;
}
