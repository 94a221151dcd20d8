/*
 * parley/message_collection.h — the live chat view of one group channel.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 *
 * A message collection shows the messages of one channel around a starting point, in the
 * server's order (created_at, then message_id), and keeps what it shows exact:
 *   - start: the cache's messages around the starting point at once (possibly empty or
 *     stale, also offline), then the server's page, which replaces them;
 *   - load_previous / load_next page both ways: from the cache only where it provably
 *     holds the messages continuously, else from the server; has_previous / has_next are
 *     the server's word (or the cache's proof), never "the page was full";
 *   - live: a new message is added only while the view shows the newest end (has_next 0);
 *     edits, deletions, reactions, thread info and pins of shown messages arrive as
 *     updated / deleted; the filters are checked again for every change;
 *   - sending: a message sent into the channel appears at once (added, PENDING), then
 *     updated to SUCCEEDED (the server's copy, never a second one; source MESSAGE_SENT
 *     whatever brought it) or FAILED; pending and failed messages are listed after the
 *     server's messages, in send order; a canceled or removed one is reported once, as
 *     UPDATED with status CANCELED (no DELETED), already gone from the view's messages;
 *   - reconnection: changed and deleted messages (source MESSAGE_CHANGELOG), then, for a
 *     view at the newest end, the messages missed meanwhile (added, source MESSAGE_FILL),
 *     or PARLEY_MESSAGE_EVENT_HUGE_GAP_DETECTED when more than the threshold are missing
 *     (dispose the view and create a new one); the channel is refreshed from the server at
 *     start and after each catch-up (CHANNEL_UPDATED, source CHANNEL_REFRESH, if it changed).
 * docs/C-API.md has the rules; docs/THREADING.md when callbacks run.
 */
#ifndef PARLEY_MESSAGE_COLLECTION_H
#define PARLEY_MESSAGE_COLLECTION_H

#include "group_channel_collection.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The starting point that means "the newest end" (the default). */
#define PARLEY_STARTING_POINT_NEWEST INT64_MAX

/* What an event reports (parley_message_event.kind). */
#define PARLEY_MESSAGE_EVENT_ADDED             1 /* messages_json: messages now shown */
#define PARLEY_MESSAGE_EVENT_UPDATED           2 /* messages_json: shown messages, as they are now */
#define PARLEY_MESSAGE_EVENT_DELETED           3 /* messages_json: messages no longer shown, as last shown */
#define PARLEY_MESSAGE_EVENT_CHANNEL_UPDATED   4 /* channel_json: the channel with the change applied */
#define PARLEY_MESSAGE_EVENT_CHANNEL_DELETED   5 /* the channel is gone (deleted, left, banned) */
#define PARLEY_MESSAGE_EVENT_HUGE_GAP_DETECTED 6 /* too many messages were missed: recreate the view */

/* The sending state of the messages an event carries (parley_message_event.sending_status). */
#define PARLEY_SENDING_STATUS_NONE      0 /* channel events, huge gap */
#define PARLEY_SENDING_STATUS_PENDING   1 /* this client's message, not yet accepted */
#define PARLEY_SENDING_STATUS_FAILED    2 /* this client's message; error_code / error_message in it */
#define PARLEY_SENDING_STATUS_CANCELED  3 /* this client's message, canceled or removed (UPDATED) */
#define PARLEY_SENDING_STATUS_SUCCEEDED 4 /* a server message */

/** One report of a message collection. Every pointer is borrowed for the call. */
typedef struct parley_message_event {
    int kind;                  /* PARLEY_MESSAGE_EVENT_* */
    int source;                /* PARLEY_SOURCE_* */
    const char *source_name;   /* e.g. "message_received", "message_fill" */
    const char *detail;        /* the real-time category or the operation's name, else "" */
    int sending_status;        /* PARLEY_SENDING_STATUS_* */
    const char *channel_url;
    const char *channel_json;  /* the channel as cached ("null" when not cached) */
    const char *messages_json; /* JSON array in the view's order ("[]" for channel events) */
} parley_message_event;

typedef void (*parley_message_event_fn)(void *user_data, const parley_message_event *event);

/* 2 added freshness_changed. A handler of version 1 (built against an older header, so
 * without that field) is still accepted: the library reads only the fields of its version. */
#define PARLEY_MESSAGE_COLLECTION_HANDLER_VERSION 2

/**
 * The callbacks of a message collection. Any may be NULL. Set version to
 * PARLEY_MESSAGE_COLLECTION_HANDLER_VERSION (PARLEY_MESSAGE_COLLECTION_HANDLER_INIT or
 * parley_message_collection_handler_init do). They run on the client's callback context.
 */
typedef struct parley_message_collection_handler {
    int version;
    parley_message_event_fn event;
    /** A background step failed (a gap check, the server's page after an offline start). */
    parley_collection_error_fn error;
    void *user_data;
    /* version 2: the view's freshness changed (PARLEY_FRESHNESS_*, group_channel_collection.h) */
    parley_freshness_fn freshness_changed;
} parley_message_collection_handler;

#define PARLEY_MESSAGE_COLLECTION_HANDLER_INIT { PARLEY_MESSAGE_COLLECTION_HANDLER_VERSION, NULL, NULL, NULL, NULL }

/**
 * Fills handler with the defaults of `version` (1 or 2; callbacks NULL). With 1 only the
 * fields of version 1 are written (handler may point to the smaller, older struct).
 */
int parley_message_collection_handler_init(parley_message_collection_handler *handler, int version);

typedef struct parley_message_collection parley_message_collection;

/**
 * Creates the view of channel_url from starting_point (ms since the epoch, or
 * PARLEY_STARTING_POINT_NEWEST). The client must have connected (it may be offline since).
 * params_json (NULL or "" for the defaults) is an object with any of:
 *   "previous_result_size": 1..200 (20), "next_result_size": 0..200 (0; load_next then
 *   loads previous_result_size), "is_inclusive": messages created exactly at the starting
 *   point are on the older side of the first page (false: on its newer side), "reverse":
 *   newest first (false), "message_type_filter": "all" | "user" | "file" | "admin",
 *   "custom_types": [..], "sender_user_ids": [..], "reply_type": "none" (default) | "all" |
 *   "only_reply_to_channel", "include_thread_info", "include_parent_message_info",
 *   "include_reactions", "include_meta_array" (false), "huge_gap_threshold": 1.. (300).
 * Unknown fields and wrong types give PARLEY_E_INVALID_ARGUMENT naming the field. The cache
 * keeps the channel's messages while the view is open. Nothing loads until start.
 * Free the handle with parley_message_collection_dispose.
 */
int parley_message_collection_create(parley_message_collection **out_collection, parley_client *client,
                                     const char *channel_url, int64_t starting_point, const char *params_json,
                                     const parley_message_collection_handler *handler);

/**
 * Completion of a load: error NULL and messages_json a JSON array (in the view's order), or
 * the error. Runs exactly once (PARLEY_E_CANCELLED when the view is disposed meanwhile).
 */
typedef void (*parley_messages_result_fn)(void *user_data, const parley_error *error, const char *messages_json);

/**
 * Starts the view: cache_fn gets the whole list as the cache holds it, then api_fn the whole
 * list after the server's page replaced it. Offline, api_fn gets PARLEY_E_NETWORK and the
 * view keeps the cached list; the server's page follows after the next connection, its
 * difference reported as events (source PARLEY_SOURCE_API_LOAD). Either fn may be NULL.
 */
int parley_message_collection_start(parley_message_collection *collection, parley_messages_result_fn cache_fn,
                                    parley_messages_result_fn api_fn, void *user_data);

/** Loads older messages; fn gets those it added ("[]" when has_previous is 0). Loads run in order. */
int parley_message_collection_load_previous(parley_message_collection *collection, parley_messages_result_fn fn,
                                            void *user_data);

/** Loads newer messages; fn gets those it added ("[]" at the newest end). */
int parley_message_collection_load_next(parley_message_collection *collection, parley_messages_result_fn fn,
                                        void *user_data);

/** 1 while older messages exist beyond the shown ones. Reflects the callbacks delivered so far. */
int parley_message_collection_has_previous(parley_message_collection *collection, int *out_has_previous);

/** 1 while newer messages exist beyond the shown ones (0 at the newest end). */
int parley_message_collection_has_next(parley_message_collection *collection, int *out_has_next);

/**
 * The shown messages as a JSON array (free with parley_free): the server's messages in
 * order, then this client's pending and failed ones (with "sending_status") in send order;
 * the whole list reversed with "reverse". Reflects the callbacks delivered so far.
 */
int parley_message_collection_messages(parley_message_collection *collection, char **out_json);

/**
 * The view's freshness (PARLEY_FRESHNESS_*), as of the callbacks delivered so far: inside a
 * freshness_changed callback, the value it got; inside a load's completion, already what the
 * load made it (api_fn of a start that reached the server: LIVE, unless a gap check follows).
 */
int parley_message_collection_freshness(parley_message_collection *collection, int *out_freshness);

/**
 * Where the result the last load completion got came from (PARLEY_PAGE_ORIGIN_*): read inside
 * the completion, that result's. start's cache_fn: CACHE; its api_fn: SERVER; load_previous /
 * load_next: CACHE when a stored continuous range covered the page, SERVER when the server
 * gave it. This client's pending and failed messages in a list do not change it.
 */
int parley_message_collection_last_page_origin(parley_message_collection *collection, int *out_origin);

/**
 * Stops the view and frees the handle. After it returns no event callback of it runs (one
 * running on another thread is waited for; from inside a callback it is safe). Loads in
 * flight or waiting complete with PARLEY_E_CANCELLED. Destroying the client stops its
 * collections too (their handles still need this call). A second call gives
 * PARLEY_E_INVALID_HANDLE.
 */
int parley_message_collection_dispose(parley_message_collection *collection);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_MESSAGE_COLLECTION_H */
