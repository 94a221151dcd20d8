/*
 * parley/session.h — The session: connecting as a user, the connection handler and real-time events.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 */
#ifndef PARLEY_SESSION_H
#define PARLEY_SESSION_H

#include "client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Session ------------------------------------------------------------------- */

/**
 * Connects as user_id with a session token issued by the server
 * (POST /v3/users/{user_id}/token): opens the user's cache, fetches the user, starts the
 * real-time event stream (resuming after the last event the cache saw), catches the
 * cache up with changelogs and resends the outbox. Completes with the user object
 * (JSON). When the server is unreachable but the cache knows this user, it completes
 * with the cached user and keeps reconnecting in the background. A cache that cannot be
 * opened, or is corrupt, is logged and replaced (never an error). Operations need a
 * connected session. Connecting as another user while connected fails with
 * PARLEY_E_INVALID_STATE: disconnect first.
 */
int parley_client_connect(parley_client *client, uint64_t *out_operation_id, const char *user_id,
                          const char *session_token, parley_result_fn fn, void *user_data);

/**
 * Ends the session and stops the event stream (operations then fail with
 * PARLEY_E_INVALID_STATE; the connection handler gets DISCONNECTED). The cache stays
 * open for cached reads. Idempotent.
 */
int parley_client_disconnect(parley_client *client);

/** The connected user's id (free with parley_free); PARLEY_E_INVALID_STATE if none. */
int parley_client_current_user_id(parley_client *client, char **out_user_id);

/* ---- Connection and real-time events ------------------------------------------- */

/* Connection events (parley_connection_fn's `event`). */
#define PARLEY_CONNECTION_CONNECTING 1             /* a session started; the stream is connecting */
#define PARLEY_CONNECTION_CONNECTED 2              /* the event stream is open (first time in the session) */
#define PARLEY_CONNECTION_RECONNECT_STARTED 3      /* the stream dropped; reconnecting with backoff */
#define PARLEY_CONNECTION_RECONNECT_SUCCEEDED 4    /* back, and the cache caught up (changelogs) */
#define PARLEY_CONNECTION_RECONNECT_FAILED 5       /* an attempt failed; another follows after a delay */
#define PARLEY_CONNECTION_DISCONNECTED 6           /* parley_client_disconnect, or the stream stopped for good (error set) */
#define PARLEY_CONNECTION_SESSION_TOKEN_REQUIRED 7 /* the token expired: call parley_client_set_session_token */

/** The stable name of a connection event ("reconnect_started", ...); "unknown" if not one. */
const char *parley_connection_event_name(int event);

/* Stream states (parley_client_connection_state). */
#define PARLEY_STATE_CLOSED 0
#define PARLEY_STATE_CONNECTING 1
#define PARLEY_STATE_OPEN 2
#define PARLEY_STATE_RECONNECTING 3

/**
 * Told about connection changes. `error` (borrowed, may be NULL) says why for
 * RECONNECT_STARTED, RECONNECT_FAILED and DISCONNECTED.
 */
typedef void (*parley_connection_fn)(void *user_data, int event, const parley_error *error);

/**
 * Sets (fn NULL: removes) the connection handler. Runs on the callback context. It is the
 * connection handler with the reserved id "" beside those of
 * parley_client_add_connection_handler: it gets every change too, in its place in their order.
 */
int parley_client_set_connection_handler(parley_client *client, parley_connection_fn fn, void *user_data);

/**
 * Adds a connection handler under `id` (non-empty UTF-8, copied), beside the others. Every
 * handler gets every connection change, on the callback context, in the order their ids were
 * first added; an id already present replaces its handler in place (the new one hears the
 * changes delivered after this call). fn NULL, id NULL or "" (reserved for
 * parley_client_set_connection_handler): PARLEY_E_INVALID_ARGUMENT.
 */
int parley_client_add_connection_handler(parley_client *client, const char *id, parley_connection_fn fn, void *user_data);

/**
 * Removes the connection handler under `id` (PARLEY_OK also when there is none). Safe from
 * inside any handler, of itself or of another: once it returns, the removed handler is not
 * called again — not even for the change being delivered — except for a call already running
 * on another thread. To free its user_data after removing it from another thread, free it in
 * a job given to parley_client_post afterwards (callbacks never run concurrently).
 */
int parley_client_remove_connection_handler(parley_client *client, const char *id);

/**
 * A real-time event, after it was applied to the cache. `category` is a server event
 * category of docs/PROTOCOL.md section 9 (message_received, channel_changed, ...), a sync
 * category (channel_changelog, message_changelog: an object the catch-up changed;
 * channel_changelog_deleted {"channel_url"}, message_changelog_deleted {"channel_url",
 * "message_id"}: a cached object the catch-up found gone), or a local sending category
 * (message_pending, message_sent, message_failed, message_canceled, message_resend_started;
 * see parley_event_categories), or cache_unavailable {"reason"} (the cache file could not be
 * opened: the client works on an in-memory cache, so nothing, pending messages included,
 * survives the process), or cache_recovered {"reason", "moved_to", "restored_req_ids",
 * "restored_from_journal", "lost": [{"req_id", "channel_url"}], "unreadable"?,
 * "journal_unreadable"?, "lost_unknown"} (the cache file was damaged and replaced; the
 * unsent messages that read back whole were carried over and are sent as usual, and so
 * were those only the outbox journal beside the file (<file>.outbox) still held —
 * "restored_from_journal", also in "restored_req_ids"; each lost one is also reported as
 * message_failed; lost_unknown true: neither the file — e.g. the header destroyed or the
 * file truncated, "unreadable" — nor the journal — missing or damaged,
 * "journal_unreadable" — could list the unsent messages, so more may be lost than "lost"
 * names, their number unknown), or resync
 * {"reason", "channel_urls"} (a sync category: the stream resumed past the server's
 * retention, events were lost; reported once the channel changelogs ran, naming the
 * channels they found changed or removed meanwhile — messages of theirs may never have
 * been reported; reload them, see parley_client_cached_message_page). `channel_url` may be "". `payload_json` is the event's data
 * object as the server wrote it (server events) or the message / channel (sync and local events; message_failed
 * adds error_code and error_message). All borrowed. A message this
 * client sent is reported once, as message_sent, never also as message_received (the
 * server's echo of it only updates the cache).
 */
typedef void (*parley_event_fn)(void *user_data, const char *category, const char *channel_url, const char *payload_json);

/**
 * Sets (fn NULL: removes) the event handler. Runs on the callback context. It is the event
 * handler with the reserved id "" beside those of parley_client_add_event_handler: it gets
 * every event too, in its place in their order.
 */
int parley_client_set_event_handler(parley_client *client, parley_event_fn fn, void *user_data);

/**
 * Adds an event handler under `id` (non-empty UTF-8, copied), beside the others. Every
 * handler gets every event, on the callback context, in the order their ids were first
 * added; an id already present replaces its handler in place (the new one hears the events
 * delivered after this call). fn NULL, id NULL or "" (reserved for
 * parley_client_set_event_handler): PARLEY_E_INVALID_ARGUMENT.
 */
int parley_client_add_event_handler(parley_client *client, const char *id, parley_event_fn fn, void *user_data);

/**
 * Removes the event handler under `id` (PARLEY_OK also when there is none). Safe from inside
 * any handler, of itself or of another: once it returns, the removed handler is not called
 * again — not even for the event being delivered — except for a call already running on
 * another thread. To free its user_data after removing it from another thread, free it in a
 * job given to parley_client_post afterwards (callbacks never run concurrently).
 */
int parley_client_remove_event_handler(parley_client *client, const char *id);

/**
 * Reconnects the event stream now. While waiting to reconnect it skips the backoff delay;
 * while open it drops the connection (which may be silently dead after a network change)
 * and opens a new one that resumes where the old one stopped: the connection handler sees
 * RECONNECT_STARTED, then RECONNECT_SUCCEEDED after the changelog catch-up.
 * PARLEY_E_INVALID_STATE if not connected.
 */
int parley_client_reconnect(parley_client *client);

/**
 * Replaces the session token: REST calls use it at once, and a stream waiting after
 * PARLEY_CONNECTION_SESSION_TOKEN_REQUIRED reconnects with it.
 */
int parley_client_set_session_token(parley_client *client, const char *session_token);

/**
 * The event stream's state (PARLEY_STATE_*), as the engine has applied it: OPEN once the
 * server's `connected` event was taken. The session's PARLEY_CONNECTION_CONNECTED is queued
 * in the same step, so a caller that read OPEN receives it before any DISCONNECTED that
 * follows; before that step an attempt reads CONNECTING.
 */
int parley_client_connection_state(parley_client *client, int *out_state);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_SESSION_H */
