/*
 * parley/sync_view.h — the SyncManager-style message view, for applications written against
 * the older sync API. Part of the Parley C interface; include <parley.h> for all of it.
 * Conventions: parley.h.
 *
 * A sync view shows one channel's messages around a viewpoint timestamp and reports every
 * change as an action (insert / update / remove / clear) on one of three lists: succeeded
 * (the server's messages), pending (this client's messages on their way) and failed (this
 * client's messages whose send failed). It runs on a message collection
 * (message_collection.h): the same cache, the same exactness rules. In short:
 *   - fetch(PREVIOUS | NEXT) loads `limit` messages that way (the first fetch: `limit` on
 *     each side of the viewpoint); from the cache where it provably holds them, else it
 *     waits for the server instead of giving a short page; offline it gives what the cache
 *     holds and says so (offline = 1);
 *   - fetch_all_next loads every newer message, whatever the limit: call it when a user
 *     who was at the newest end comes back online (the view does not fill what it missed
 *     by itself; has_more toward newer messages turns 1 once the stream is back);
 *   - sending (parley_client_send_user_message into the channel): insert on PENDING; then
 *     remove on PENDING and insert on SUCCEEDED (only the remove when the view is scrolled
 *     away from the newest end: the message comes with a later fetch), or remove on PENDING
 *     and (unless the resend policy is "none") insert on FAILED; a resend: remove on FAILED,
 *     insert on PENDING. The resend policy is the client's ("resend_policy" in client.h);
 *   - real time: a new message is inserted only while the view shows the newest end (else
 *     it comes with a later fetch); updates and removals only for messages it shows;
 *   - reset_viewpoint: a CLEAR on each list, then only messages of the new viewpoint.
 * docs/C-API.md has the rules; docs/THREADING.md when callbacks run.
 */
#ifndef PARLEY_SYNC_VIEW_H
#define PARLEY_SYNC_VIEW_H

#include "message_collection.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The viewpoint that means "the newest end" (the default). */
#define PARLEY_VIEWPOINT_NEWEST INT64_MAX

/* Which way a fetch pages. */
#define PARLEY_SYNC_DIRECTION_PREVIOUS 1 /* older messages */
#define PARLEY_SYNC_DIRECTION_NEXT     2 /* newer messages, toward the newest end */

/* What the application does to a list (parley_sync_action_fn's action). */
#define PARLEY_SYNC_ACTION_INSERT 1 /* add these messages (keep the list sorted) */
#define PARLEY_SYNC_ACTION_UPDATE 2 /* replace these messages (same message_id, or req_id for pending/failed) */
#define PARLEY_SYNC_ACTION_REMOVE 3 /* remove these messages */
#define PARLEY_SYNC_ACTION_CLEAR  4 /* empty the list ("[]") */

/* The lists. */
#define PARLEY_SYNC_LIST_SUCCEEDED 1 /* the server's messages, by (created_at, message_id) */
#define PARLEY_SYNC_LIST_PENDING   2 /* this client's messages being sent, in send order */
#define PARLEY_SYNC_LIST_FAILED    3 /* this client's failed messages (error_code, error_message in each) */

/** One action: messages_json is a JSON array (in the list's order), borrowed for the call. */
typedef void (*parley_sync_action_fn)(void *user_data, int action, int list, const char *messages_json);

/* 2 added freshness_changed. A handler of version 1 (built against an older header, so
 * without that field) is still accepted: the library reads only the fields of its version. */
#define PARLEY_SYNC_VIEW_HANDLER_VERSION 2

/**
 * The callbacks of a sync view. Any may be NULL. Set version to
 * PARLEY_SYNC_VIEW_HANDLER_VERSION (PARLEY_SYNC_VIEW_HANDLER_INIT or
 * parley_sync_view_handler_init do). They run on the client's callback context.
 */
typedef struct parley_sync_view_handler {
    int version;
    parley_sync_action_fn action;
    /** A background step failed (the server's page after an offline first fetch). */
    parley_collection_error_fn error;
    void *user_data;
    /* version 2: the view's freshness changed (PARLEY_FRESHNESS_*, group_channel_collection.h) */
    parley_freshness_fn freshness_changed;
} parley_sync_view_handler;

#define PARLEY_SYNC_VIEW_HANDLER_INIT { PARLEY_SYNC_VIEW_HANDLER_VERSION, NULL, NULL, NULL, NULL }

/**
 * Fills handler with the defaults of `version` (1 or 2; callbacks NULL). With 1 only the
 * fields of version 1 are written (handler may point to the smaller, older struct).
 */
int parley_sync_view_handler_init(parley_sync_view_handler *handler, int version);

typedef struct parley_sync_view parley_sync_view;

/**
 * Creates the view of channel_url from viewpoint (ms since the epoch, or
 * PARLEY_VIEWPOINT_NEWEST). The client must have connected (it may be offline since).
 * options_json (NULL or "" for the defaults) is an object with any of:
 *   "limit": 1..200 (30), messages per fetch; "message_type_filter": "all" | "user" | "file"
 *   | "admin"; "custom_types": [..]; "sender_user_ids": [..]; "reply_type": "all" (default:
 *   replies are shown) | "none" | "only_reply_to_channel"; "include_thread_info",
 *   "include_parent_message_info", "include_reactions", "include_meta_array" (false).
 * Unknown fields and wrong types give PARLEY_E_INVALID_ARGUMENT naming the field. Nothing
 * loads until the first fetch. Free the handle with parley_sync_view_dispose.
 */
int parley_sync_view_create(parley_sync_view **out_view, parley_client *client, const char *channel_url,
                            int64_t viewpoint, const char *options_json, const parley_sync_view_handler *handler);

/**
 * Completion of a fetch: error NULL with has_more (more messages exist that way) and
 * offline (the server could not be reached, or the client is disconnected; the fetch gave
 * what the cache holds), or the error (then has_more and offline are 0). The fetched
 * messages arrive as INSERT actions before it. Runs exactly once (PARLEY_E_CANCELLED when
 * the view is disposed or its viewpoint reset meanwhile).
 */
typedef void (*parley_sync_fetch_fn)(void *user_data, const parley_error *error, int has_more, int offline);

/** Fetches `limit` messages in direction (PARLEY_SYNC_DIRECTION_*). Fetches run in order; fn may be NULL. */
int parley_sync_view_fetch(parley_sync_view *view, int direction, parley_sync_fetch_fn fn, void *user_data);

/** Fetches every newer message, page after page, whatever the limit; fn may be NULL. */
int parley_sync_view_fetch_all_next(parley_sync_view *view, parley_sync_fetch_fn fn, void *user_data);

/**
 * Starts over from viewpoint (ms, or PARLEY_VIEWPOINT_NEWEST): a CLEAR action on each list,
 * then the next fetch loads around the new viewpoint. Fetches in flight complete with
 * PARLEY_E_CANCELLED and change nothing. Safe inside a callback.
 */
int parley_sync_view_reset_viewpoint(parley_sync_view *view, int64_t viewpoint);

/** The viewpoint the view shows now. */
int parley_sync_view_viewpoint(parley_sync_view *view, int64_t *out_viewpoint);

/**
 * The messages of one list (PARLEY_SYNC_LIST_*), a JSON array (free with parley_free). The
 * lists change just before the actions of a batch are handed to the handler: every action of
 * the batch reads the batch's final state, and another thread may see a change while the
 * action that reports it has not run yet (docs/THREADING.md rule 7).
 */
int parley_sync_view_messages(parley_sync_view *view, int list, char **out_json);

/**
 * The view's freshness (PARLEY_FRESHNESS_*): the message collection's underneath, as of the
 * callbacks delivered so far. A view that does not fill what it missed by itself is LIVE once
 * caught up, with has_more toward newer messages 1 until fetch_all_next.
 */
int parley_sync_view_freshness(parley_sync_view *view, int *out_freshness);

/**
 * Where the messages the last fetch completion got came from (PARLEY_PAGE_ORIGIN_*): read
 * inside the completion, that fetch's. An offline fetch (offline = 1) is CACHE; fetch_all_next
 * is SERVER only when the server gave each of its pages.
 */
int parley_sync_view_last_fetch_origin(parley_sync_view *view, int *out_origin);

/**
 * Stops the view and frees the handle (the older API's "remove"). After it returns no
 * callback of it runs (one running on another thread is waited for; from inside a callback
 * it is safe). Fetches in flight complete with PARLEY_E_CANCELLED. Destroying the client
 * stops its views too (their handles still need this call). A second call gives
 * PARLEY_E_INVALID_HANDLE.
 */
int parley_sync_view_dispose(parley_sync_view *view);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_SYNC_VIEW_H */
