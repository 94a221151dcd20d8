/*
 * parley/group_channel_collection.h — the live list of the user's group channels.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 *
 * A collection shows the channels of the connected user that match a query, in the
 * query's order, page by page (load_more), and keeps the loaded part exact: a channel
 * that starts to match inside the loaded range is reported added, a shown one that
 * changes (also when it moves) updated, one that stops matching, leaves the range or is
 * gone deleted. Nothing outside the loaded range is reported. The first page is read from
 * the cache at once (also offline); the server's first page follows when the cache does
 * not hold the whole list, and its difference arrives as events with source
 * PARLEY_SOURCE_API_LOAD. After each (re)connection the net change the catch-up made is
 * reported once, with source PARLEY_SOURCE_CHANNEL_CHANGELOG. docs/C-API.md has the rules.
 */
#ifndef PARLEY_GROUP_CHANNEL_COLLECTION_H
#define PARLEY_GROUP_CHANNEL_COLLECTION_H

#include "client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Event sources (why a collection reported a change) ------------------------------- */

/* Real-time categories (docs/PROTOCOL.md §9) from 1, the engine's own sources from 100. Stable. */
/* BEGIN GENERATED from CollectionEventSource.allCases: do not edit (docs/C-API.md, "Event sources") */
#define PARLEY_SOURCE_MESSAGE_RECEIVED             1
#define PARLEY_SOURCE_MESSAGE_UPDATED              2
#define PARLEY_SOURCE_MESSAGE_DELETED              3
#define PARLEY_SOURCE_MENTION                      4
#define PARLEY_SOURCE_REACTION_UPDATED             5
#define PARLEY_SOURCE_THREAD_INFO_UPDATED          6
#define PARLEY_SOURCE_READ_STATUS                  7
#define PARLEY_SOURCE_DELIVERY_STATUS              8
#define PARLEY_SOURCE_TYPING_STATUS                9
#define PARLEY_SOURCE_USER_MUTED                   10
#define PARLEY_SOURCE_USER_UNMUTED                 11
#define PARLEY_SOURCE_USER_BANNED                  12
#define PARLEY_SOURCE_USER_UNBANNED                13
#define PARLEY_SOURCE_CHANNEL_FROZEN               14
#define PARLEY_SOURCE_CHANNEL_UNFROZEN             15
#define PARLEY_SOURCE_CHANNEL_CHANGED              16
#define PARLEY_SOURCE_CHANNEL_DELETED              17
#define PARLEY_SOURCE_CHANNEL_HIDDEN               18
#define PARLEY_SOURCE_METADATA_CREATED             19
#define PARLEY_SOURCE_METADATA_UPDATED             20
#define PARLEY_SOURCE_METADATA_DELETED             21
#define PARLEY_SOURCE_METACOUNTER_CREATED          22
#define PARLEY_SOURCE_METACOUNTER_UPDATED          23
#define PARLEY_SOURCE_METACOUNTER_DELETED          24
#define PARLEY_SOURCE_OPERATOR_UPDATED             25
#define PARLEY_SOURCE_INVITATION_RECEIVED          26
#define PARLEY_SOURCE_INVITATION_DECLINED          27
#define PARLEY_SOURCE_USER_JOINED                  28
#define PARLEY_SOURCE_USER_LEFT                    29
#define PARLEY_SOURCE_PINNED_MESSAGE_UPDATED       30
#define PARLEY_SOURCE_POLL_UPDATED                 31
#define PARLEY_SOURCE_POLL_VOTED                   32
#define PARLEY_SOURCE_POLL_DELETED                 33
#define PARLEY_SOURCE_CHANNEL_CHANGELOG            100
#define PARLEY_SOURCE_MESSAGE_CHANGELOG            101
#define PARLEY_SOURCE_MESSAGE_FILL                 102
#define PARLEY_SOURCE_LOCAL_OPERATION              103
#define PARLEY_SOURCE_LOCAL_SEND                   104
#define PARLEY_SOURCE_LOCAL_CACHE                  105
#define PARLEY_SOURCE_CACHE_LOAD                   106
#define PARLEY_SOURCE_API_LOAD                     107
#define PARLEY_SOURCE_UNKNOWN_EVENT                108
#define PARLEY_SOURCE_MESSAGE_SENT                 109
#define PARLEY_SOURCE_CHANNEL_MEMBER_COUNT_CHANGED 110
#define PARLEY_SOURCE_CHANNEL_REFRESH              111
#define PARLEY_SOURCE_POLL_CHANGELOG               112
/* END GENERATED */

/** Every source as a JSON array of {"code", "name"} (free with parley_free). */
int parley_collection_sources(char **out_json);

/** Why a change was reported. Borrowed for the duration of the callback. */
typedef struct parley_collection_context {
    int source;              /* PARLEY_SOURCE_* */
    const char *source_name; /* the source's name, e.g. "message_received" */
    const char *detail;      /* the operation's name for PARLEY_SOURCE_LOCAL_OPERATION, the live event's
                                category when one caused the change (also for MESSAGE_SENT, MENTION,
                                CHANNEL_MEMBER_COUNT_CHANGED), else "" */
} parley_collection_context;

/* ---- Freshness (every view: channel and message collections, sync views) ---------------- */

/*
 * Whether what a view shows is live or possibly stale (docs/C-API.md, "Freshness"). The
 * first rule that holds gives the state:
 *   OFFLINE      no event stream (disconnected, the server unreachable, reconnecting);
 *   CATCHING_UP  the stream is open and the catch-up after it (replayed events, changelogs)
 *                runs, or the view's own part of it (a message view's gap check and channel
 *                refresh, the server's page a view could not get while offline);
 *   CACHED       the server has not confirmed what the view shows yet (shown from the cache,
 *                or nothing loaded yet);
 *   LIVE         connected, caught up, and the server confirmed what the view shows.
 * Each view has a getter and reports changes to a freshness_changed callback of its handler.
 */
#define PARLEY_FRESHNESS_LIVE        1 /* connected, caught up, and the server confirmed what the view shows */
#define PARLEY_FRESHNESS_CACHED      2 /* connected and caught up, but the server has not confirmed what the view shows */
#define PARLEY_FRESHNESS_CATCHING_UP 3 /* the stream is open; the catch-up after it, or the view's own part of it, runs */
#define PARLEY_FRESHNESS_OFFLINE     4 /* no event stream: changes may be missed until it is back */

/** The stable name of a freshness state ("catching_up", ...); "unknown" if not one. */
const char *parley_freshness_name(int freshness);

/*
 * Where a load's result came from (the *_last_page_origin getters): SERVER when the server's
 * answer to that load vouched for the whole result (several pages as one result: only when it
 * gave each), CACHE when it was read from the cache (or there was nothing to read: past the
 * end), NONE before the first completion and for a completion with an error.
 */
#define PARLEY_PAGE_ORIGIN_NONE   0
#define PARLEY_PAGE_ORIGIN_CACHE  1
#define PARLEY_PAGE_ORIGIN_SERVER 2

/**
 * A view's freshness changed to `freshness` (PARLEY_FRESHNESS_*). Called only for real
 * changes, in order with the view's other callbacks, on the client's callback context, never
 * after the view's dispose returned.
 */
typedef void (*parley_freshness_fn)(void *user_data, int freshness);

/* ---- The collection --------------------------------------------------------------------- */

typedef struct parley_group_channel_collection parley_group_channel_collection;

/**
 * Receives channels (a JSON array of channel objects, in the query's order where it
 * matters) or, for deleted, a JSON array of channel URLs; for deleted_channels the channel
 * objects that left, as the view last held them. Borrowed for the call.
 */
typedef void (*parley_channels_event_fn)(void *user_data, const parley_collection_context *context, const char *json);
/** A background step failed (the server's page after the cached first page). */
typedef void (*parley_collection_error_fn)(void *user_data, const parley_error *error);

/* 2 added deleted_channels, 3 freshness_changed. A handler of an older version (built against
 * an older header, so without the later fields) is still accepted: the library reads only
 * the fields of its version. */
#define PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_VERSION 3

/**
 * The callbacks of a collection. Any may be NULL. Set version to
 * PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_VERSION (PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_INIT
 * or parley_group_channel_collection_handler_init do), so fields can be added later
 * without breaking you. They run on the client's callback context, like every callback.
 * A deletion is one report: deleted gets its URLs, then deleted_channels (version 2) the
 * same channels as objects, in the same order, as the view last held them (before the
 * change that removed them). Set either or both.
 */
typedef struct parley_group_channel_collection_handler {
    int version;
    parley_channels_event_fn added;
    parley_channels_event_fn updated;
    parley_channels_event_fn deleted;
    parley_collection_error_fn error;
    void *user_data;
    /* version 2 */
    parley_channels_event_fn deleted_channels;
    /* version 3: the collection's freshness changed (PARLEY_FRESHNESS_*) */
    parley_freshness_fn freshness_changed;
} parley_group_channel_collection_handler;

#define PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_INIT { PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL }

/**
 * Fills handler with the defaults of `version` (1 to 3; all callbacks NULL). With an older
 * version only its fields are written (handler may point to the smaller, older struct).
 */
int parley_group_channel_collection_handler_init(parley_group_channel_collection_handler *handler, int version);

/**
 * Creates a collection of the connected user's channels (the client may be offline, but
 * must have connected: the cache is per user). query_json (NULL or "" for the defaults) is
 * an object with any of:
 *   "order": "latest_last_message" (default) | "chronological" | "channel_name_alphabetical"
 *            | "metadata_value_alphabetical" (needs "metadata_order_key"),
 *   "include_empty" (false: channels without a message are left out, as in the reference),
 *   "include_frozen", "include_member_list", "include_metadata" (true),
 *   "member_state_filter": "all" | "joined_only" | "invited_only" | "invited_by_friend"
 *            | "invited_by_non_friend",
 *   "hidden_state_filter": "unhidden_only" (default) | "hidden_only" | "hidden_allow_auto_unhide"
 *            | "hidden_prevent_auto_unhide" | "all",
 *   "custom_types": [..], "custom_type_starts_with", "channel_name_contains" (case-insensitive),
 *   "channel_urls": [..], "user_ids_exact_filter": [..], "user_ids_include_filter": [..] with
 *   "user_ids_include_query_type": "and" (default) | "or",
 *   "super_channel_filter": "all" | "super" | "nonsuper", "public_channel_filter": "all" |
 *   "public" | "private", "unread_channel_filter": "all" | "unread_message", "limit": 1..100 (20).
 * Unknown fields, wrong types and invalid combinations give PARLEY_E_INVALID_ARGUMENT with a
 * message naming the field. handler is copied (NULL: no callbacks). Nothing loads until the
 * first load_more. Free the handle with parley_group_channel_collection_dispose.
 */
int parley_group_channel_collection_create(parley_group_channel_collection **out_collection, parley_client *client,
                                           const char *query_json,
                                           const parley_group_channel_collection_handler *handler);

/**
 * Completion of load_more: error NULL and channels_json the JSON array of the channels the
 * page added (in order; "[]" when there is no more), or the error: PARLEY_E_INVALID_STATE
 * (a page is loading, disposed), PARLEY_E_NETWORK (offline and the cache does not hold the whole list),
 * PARLEY_E_CANCELLED (disposed meanwhile), server errors. Runs exactly once.
 */
typedef void (*parley_channels_result_fn)(void *user_data, const parley_error *error, const char *channels_json);

/** Loads the next page (the first call: the first page). */
int parley_group_channel_collection_load_more(parley_group_channel_collection *collection, parley_channels_result_fn fn,
                                              void *user_data);

/**
 * 1 while more channels follow the loaded ones, else 0. Like parley_group_channel_collection_channels
 * it reflects the callbacks delivered so far.
 */
int parley_group_channel_collection_has_more(parley_group_channel_collection *collection, int *out_has_more);

/** The loaded channels in order as a JSON array (free with parley_free). */
int parley_group_channel_collection_channels(parley_group_channel_collection *collection, char **out_json);

/**
 * The collection's freshness (PARLEY_FRESHNESS_*), as of the callbacks delivered so far: inside
 * a freshness_changed callback, the value it got; inside a load_more completion, already what
 * the page made it.
 */
int parley_group_channel_collection_freshness(parley_group_channel_collection *collection, int *out_freshness);

/**
 * Where the page the last load_more completion got came from (PARLEY_PAGE_ORIGIN_*): read
 * inside the completion, that page's. A page is SERVER when the server listed it in this load,
 * CACHE when the cache gave it (the first page at once, or a list the cache holds whole).
 */
int parley_group_channel_collection_last_page_origin(parley_group_channel_collection *collection, int *out_origin);

/**
 * Stops the collection and frees the handle. After it returns no event callback of it runs
 * (one running on another thread is waited for; from inside a callback it is safe). A
 * load_more in flight completes with PARLEY_E_CANCELLED. Destroying the client stops its
 * collections too (their handles then still need this call). A second call gives
 * PARLEY_E_INVALID_HANDLE.
 */
int parley_group_channel_collection_dispose(parley_group_channel_collection *collection);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_GROUP_CHANNEL_COLLECTION_H */
