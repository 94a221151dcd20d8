/*
 * parley/search.h — searching messages: a live view of the cached messages matching a query,
 * optionally continued on the server. Part of the Parley C interface; include <parley.h> for
 * all of it. Conventions: parley.h.
 *
 * A search works offline: the cache keeps a full-text index of every message it holds
 * (text and file name; pending and failed messages are not searched), updated in the same
 * transaction as each change. The view shows a window of the results and keeps it equal to
 * a fresh search of the cache after every change, reporting the difference as added /
 * updated / deleted. In short:
 *   - "query" is plain text: every word must occur (case and the accents of Latin letters
 *     do not matter), the last one as a prefix, so "hel wor" finds "Hello world"; its words
 *     are split by the index's own tokenizer, as the messages were; punctuation and symbols
 *     only separate words, so any text is a valid query (a text without words finds
 *     nothing); "advanced_query": true reads it as an SQLite FTS5 expression instead
 *     (docs/C-API.md has the word rule);
 *   - order "time" (newest first; the window is every result down to the oldest loaded,
 *     so a new matching message is added at the top) or "relevance" (the first N results,
 *     N = "limit" times the loads so far: a better new result pushes the last one out, and
 *     results that go let the next ones in), which ranks the newest "relevance_window"
 *     matches (5,000) and every newer one that arrives; parley_message_search_load_older
 *     moves to the next window of older matches;
 *   - "search_server": true makes each load ask the server for its next page too; the view
 *     shows both, each message once (the cache's copy where the cache holds it), merged by
 *     time, or in relevance order the server's results first, then the cache's others.
 * docs/C-API.md "Searching messages" has the rules; docs/THREADING.md when callbacks run.
 */
#ifndef PARLEY_SEARCH_H
#define PARLEY_SEARCH_H

#include "group_channel_collection.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Results changed: results_json is a JSON array (borrowed for the call), in the view's
 * order, of {"message": {...}, "snippet": "... <b>word</b> ...", "score": number (bigger is
 * more relevant; the cache's and the server's are not comparable; 0 for the cache's results
 * in time order, which does not rank), "origin": "cache" | "server"}.
 */
typedef void (*parley_search_results_fn)(void *user_data, const char *results_json);

#define PARLEY_MESSAGE_SEARCH_HANDLER_VERSION 1

/**
 * The callbacks of a search. Any may be NULL. Set version to
 * PARLEY_MESSAGE_SEARCH_HANDLER_VERSION (PARLEY_MESSAGE_SEARCH_HANDLER_INIT or
 * parley_message_search_handler_init do). They run on the client's callback context.
 */
typedef struct parley_message_search_handler {
    int version;
    parley_search_results_fn added;   /* results that entered the window (not those of a load: its completion has them) */
    parley_search_results_fn updated; /* results whose message, snippet, score or origin changed */
    parley_search_results_fn deleted; /* results that left (as last reported) */
    /** A background step failed (the server's page of a load that still gave the cache's). */
    parley_collection_error_fn error;
    void *user_data;
    /** The search's freshness changed (PARLEY_FRESHNESS_*, group_channel_collection.h). */
    parley_freshness_fn freshness_changed;
} parley_message_search_handler;

#define PARLEY_MESSAGE_SEARCH_HANDLER_INIT { PARLEY_MESSAGE_SEARCH_HANDLER_VERSION, NULL, NULL, NULL, NULL, NULL, NULL }

/** Fills handler with the defaults of `version` (callbacks NULL). */
int parley_message_search_handler_init(parley_message_search_handler *handler, int version);

typedef struct parley_message_search parley_message_search;

/**
 * Creates a search. The client must have connected (it may be offline since). params_json
 * is an object with "query" (required, 1..1000 characters, not only spaces) and any of:
 *   "advanced_query": false; "channel_urls", "custom_types", "sender_ids": [..] (items
 *   non-empty, without commas); "message_ts_from", "message_ts_to": ms, inclusive;
 *   "order": "time" | "relevance"; "limit": 1..100 (20) results per load;
 *   "relevance_window": 1..1000000 (5000) matches ranked at a time in relevance order;
 *   "highlight_start", "highlight_end": ("<b>", "</b>", at most 16 bytes each);
 *   "search_server": false (not with advanced_query).
 * Unknown fields, wrong types and an invalid FTS5 expression give PARLEY_E_INVALID_ARGUMENT
 * naming the problem. Nothing loads until the first parley_message_search_load_more. Free
 * the handle with parley_message_search_dispose.
 */
int parley_message_search_create(parley_message_search **out_search, parley_client *client, const char *params_json,
                                 const parley_message_search_handler *handler);

/**
 * Completion of a load: error NULL and results_json (borrowed) the results it added, in the
 * view's order, or the error (results_json NULL). Runs exactly once (PARLEY_E_CANCELLED when
 * the search is disposed meanwhile).
 */
typedef void (*parley_search_load_fn)(void *user_data, const parley_error *error, const char *results_json);

/**
 * Loads the next `limit` results (the first call: the first ones). Loads run in order; fn
 * may be NULL. With search_server, a server that cannot be reached leaves the cache's
 * results: its error goes to the handler's error callback (the load fails only when the
 * cache gave nothing either) and the next load asks the server again.
 */
int parley_message_search_load_more(parley_message_search *search, parley_search_load_fn fn, void *user_data);

/**
 * Relevance order: moves to the next window of older matches (up to "relevance_window" of
 * the matches older than the current window) and loads its first `limit` results, given to
 * fn as a load's; the results shown before are reported deleted. With no older match it
 * changes nothing and fn gets an empty array; before the first load it is that load. Loads
 * run in order with parley_message_search_load_more's; fn may be NULL. In time order it is
 * PARLEY_E_INVALID_STATE (load_more goes on there).
 */
int parley_message_search_load_older(parley_message_search *search, parley_search_load_fn fn, void *user_data);

/**
 * 1 while more results exist beyond those shown (in the cache, or on the server), else 0;
 * in relevance order, within the current window. It follows the changes of the cache as the
 * results do (docs/C-API.md "Searching messages").
 */
int parley_message_search_has_more(parley_message_search *search, int *out_has_more);

/**
 * Relevance order: how many matches the current window ranks, and 1 when older matches lie
 * below it (parley_message_search_load_older goes there), else 0. Both follow the changes of
 * the cache as the results do; 0 and 0 in time order and before the first load.
 */
int parley_message_search_relevance_window(parley_message_search *search, int64_t *out_ranked_matches,
                                           int *out_older_matches_exist);

/**
 * The search's freshness (PARLEY_FRESHNESS_*, docs/C-API.md "Freshness and page origin"): a
 * search of the cache alone is confirmed once it has loaded (it shows the cache, which the
 * session keeps current: live while the stream is open and caught up); one with
 * search_server once the server answered a load.
 */
int parley_message_search_freshness(parley_message_search *search, int *out_freshness);

/**
 * Where the last load's results came from: PARLEY_PAGE_ORIGIN_SERVER when the server answered
 * it (search_server), else PARLEY_PAGE_ORIGIN_CACHE; PARLEY_PAGE_ORIGIN_NONE before the first
 * completion and after a failed load. Inside a load's completion it is that load's. Each
 * result also says where its copy comes from ("origin").
 */
int parley_message_search_last_page_origin(parley_message_search *search, int *out_origin);

/** The results shown, in the view's order, as the callbacks so far left them (free with parley_free). */
int parley_message_search_results(parley_message_search *search, char **out_json);

/**
 * Stops the search and frees the handle. After it returns no callback of it runs (one
 * running on another thread is waited for; from inside a callback it is safe). Loads in
 * flight complete with PARLEY_E_CANCELLED. Destroying the client stops its searches too
 * (their handles still need this call). A second call gives PARLEY_E_INVALID_HANDLE.
 */
int parley_message_search_dispose(parley_message_search *search);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_SEARCH_H */
