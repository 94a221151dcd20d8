/*
 * parley.h — the C interface of Parley, an embeddable chat sync engine.
 *
 * Conventions (docs/C-API.md has the long form):
 *  - Synchronous calls return an int status: PARLEY_OK (0) or a negative PARLEY_E_*.
 *    Outputs go through out-parameters, which come first. After a failure,
 *    parley_last_error_message() explains it (per thread).
 *  - Handles are opaque. A NULL, destroyed or wrong-kind handle is reported as
 *    PARLEY_E_INVALID_HANDLE, never a crash.
 *  - Strings passed in are UTF-8 and copied. Strings passed to a callback are borrowed
 *    for the duration of the call. Strings returned to you are yours: parley_free().
 *  - Data (configuration, results, events) is UTF-8 JSON with the wire protocol's
 *    field names (docs/PROTOCOL.md).
 *  - Callbacks of one client never run concurrently and run in order; no internal
 *    lock is held while they run, so a callback may call any function here, including
 *    parley_client_destroy on its own client. See docs/THREADING.md.
 *  - An asynchronous call that returned PARLEY_OK runs its completion callback exactly
 *    once: with the result, with an error, or with PARLEY_E_CANCELLED when cancelled or
 *    when the client is destroyed. A call that returned an error runs no callback.
 */
#ifndef PARLEY_H
#define PARLEY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ------------------------------------------------------------------- */

#define PARLEY_VERSION_MAJOR 0
#define PARLEY_VERSION_MINOR 1
#define PARLEY_VERSION_PATCH 0
#define PARLEY_VERSION_STRING "0.1.0"

/** The library's version as "MAJOR.MINOR.PATCH" (static storage; do not free). */
const char *parley_version(void);

/* ---- Status codes -------------------------------------------------------------- */

#define PARLEY_OK                    0
#define PARLEY_E_INVALID_ARGUMENT   -1  /* a parameter is NULL, out of range or malformed */
#define PARLEY_E_INVALID_HANDLE     -2  /* NULL, destroyed or wrong-kind handle */
#define PARLEY_E_INVALID_JSON       -3  /* a JSON argument does not parse */
#define PARLEY_E_NO_MEMORY          -4
#define PARLEY_E_INVALID_STATE      -5  /* wrong state for the call (closed, wrong dispatch mode) */
#define PARLEY_E_NETWORK            -6  /* connection refused/reset, DNS failure */
#define PARLEY_E_TIMEOUT            -7
#define PARLEY_E_CANCELLED          -8  /* cancelled, or the client was destroyed */
#define PARLEY_E_SERVER             -9  /* the server answered with an error (see http_status) */
#define PARLEY_E_UNAUTHORIZED      -10  /* HTTP 401: missing, wrong or expired credentials */
#define PARLEY_E_FORBIDDEN         -11  /* HTTP 403: not allowed for this user */
#define PARLEY_E_NOT_FOUND         -12  /* HTTP 404 */
#define PARLEY_E_CACHE             -13  /* the local cache (SQLite) failed */
#define PARLEY_E_PROTOCOL          -14  /* the server's answer broke the protocol */
#define PARLEY_E_TLS               -15  /* TLS handshake or certificate verification failed */
#define PARLEY_E_IO                -16  /* a local file could not be read or written */
#define PARLEY_E_LIMIT_EXCEEDED    -17  /* a size, depth or count limit was exceeded */
#define PARLEY_E_INTERNAL          -99  /* a bug: please report it */

/**
 * Explains the last failure of a parley_* call on the calling thread. Valid until the
 * next failing call on this thread; never NULL (empty when nothing failed yet).
 * Successful calls leave it unchanged.
 */
const char *parley_last_error_message(void);

/** The stable name of a status code ("invalid_argument", ...); "unknown" if not one. */
const char *parley_error_name(int code);

/** An error given to a completion callback. Borrowed for the duration of the call. */
typedef struct parley_error {
    int code;            /* PARLEY_E_* */
    const char *message; /* UTF-8, never NULL */
    int http_status;     /* HTTP status of the server's answer, 0 if none */
    int server_code;     /* the server's own error code, 0 if none */
} parley_error;

/** Frees a string or buffer this library returned to you. NULL is ignored. */
void parley_free(void *pointer);

/* ---- Client -------------------------------------------------------------------- */

typedef struct parley_client parley_client;

/* Callback delivery modes (configuration key "dispatch_mode"). */
#define PARLEY_DISPATCH_THREAD 0 /* "thread": a callback thread per client (default) */
#define PARLEY_DISPATCH_MANUAL 1 /* "manual": you run callbacks with parley_client_dispatch */

/**
 * Creates a client from a JSON configuration document (NULL or "" for defaults):
 *
 *   {
 *     "server_url": "http://127.0.0.1:8080",  base URL of the server
 *     "dispatch_mode": "thread" | "manual",    default "thread"
 *     "log_level": "off"|"error"|"warning"|"info"|"debug"|"trace",  default "warning"
 *     "request_timeout_ms": 30000,              per request, 1..3600000
 *     "connect_timeout_ms": 10000,              1..600000
 *     "tls_verify": true,                       verify the server's certificate and name
 *     "ca_file": "/path/ca.pem",                trust these CAs instead of the system's
 *     "api_token": "...",                       admin token for parley_client_request
 *     "user_agent": "...",
 *     "cache_mode": "persistent" | "memory",    default "persistent" (a SQLite file per user)
 *     "cache_dir": "/path",                     default $XDG_CACHE_HOME/parley, else $HOME/.cache/parley;
 *                                               the file is <cache_dir>/<server>/<user_id>.sqlite (mode 0600)
 *     "cache_size_limit_mb": 256,               64..1048576; whole channels are evicted beyond it
 *     "auto_resend": true,                      resend messages that failed for connection reasons
 *     "reconnect_initial_delay_ms": 500,        backoff of the event stream (doubling, with jitter)
 *     "reconnect_max_delay_ms": 30000,
 *     "reconnect_max_attempts": 0,              0 = never give up
 *     "stream_idle_timeout_s": 45               reconnect when nothing (not even a heartbeat) arrives
 *   }
 *
 * Unknown keys and wrong types are refused with PARLEY_E_INVALID_ARGUMENT (malformed
 * JSON: PARLEY_E_INVALID_JSON) and a message naming the key.
 */
int parley_client_create(parley_client **out_client, const char *config_json);

/**
 * Destroys a client: cancels its operations (their callbacks run with
 * PARLEY_E_CANCELLED), stops its threads, and runs every callback still queued. When it
 * returns, no callback of this client runs any more. May be called from one of the
 * client's own callbacks: the queued callbacks then run, nested, before it returns.
 * A second call, or any later use of the handle, gives PARLEY_E_INVALID_HANDLE.
 */
int parley_client_destroy(parley_client *client);

/**
 * Manual dispatch mode: a file descriptor that is readable while callbacks are waiting.
 * Watch it with poll/epoll/your event loop, then call parley_client_dispatch. Owned by
 * the client (do not close or read it). Thread mode: PARLEY_E_INVALID_STATE.
 */
int parley_client_event_fd(parley_client *client, int *out_fd);

/**
 * Manual dispatch mode: runs up to max_callbacks waiting callbacks (0: all waiting now)
 * on the calling thread and stores how many ran (may be NULL). If another thread is
 * dispatching, or this is called from inside a callback, runs none and returns PARLEY_OK.
 * Thread mode: PARLEY_E_INVALID_STATE.
 */
int parley_client_dispatch(parley_client *client, int max_callbacks, int *out_dispatched);

/* ---- Logging ------------------------------------------------------------------- */

#define PARLEY_LOG_OFF     0
#define PARLEY_LOG_ERROR   1
#define PARLEY_LOG_WARNING 2
#define PARLEY_LOG_INFO    3
#define PARLEY_LOG_DEBUG   4
#define PARLEY_LOG_TRACE   5

/** Receives a log record (message borrowed). Runs like any other callback of the client. */
typedef void (*parley_log_fn)(void *user_data, int level, const char *message);

/**
 * Sets the client's log callback and the most verbose level it receives
 * (PARLEY_LOG_ERROR..PARLEY_LOG_TRACE). fn NULL removes it. Replaces the configured level.
 */
int parley_client_set_log_callback(parley_client *client, parley_log_fn fn, void *user_data, int max_level);

/* ---- Generic operations -------------------------------------------------------- */

/** A callback with no result, for parley_client_post. */
typedef void (*parley_callback_fn)(void *user_data);

/**
 * Queues fn to run on the client's callback context after every callback queued before
 * it (like an async wake-up). Runs exactly once, also when the client is destroyed.
 */
int parley_client_post(parley_client *client, parley_callback_fn fn, void *user_data);

/**
 * Completion of a request: error is NULL on success and result_json holds the answer;
 * on failure error is set and result_json is NULL. Both borrowed.
 */
typedef void (*parley_result_fn)(void *user_data, const parley_error *error, const char *result_json);

/**
 * Sends a raw REST request (method "GET"/"POST"/"PUT"/"PATCH"/"DELETE", path starting
 * with "/", body_json NULL or a JSON document) to the configured server, and completes
 * with the answer's JSON. HTTP errors arrive as PARLEY_E_UNAUTHORIZED/FORBIDDEN/NOT_FOUND/
 * SERVER with http_status and server_code. out_operation_id (may be NULL) receives an id
 * for parley_client_cancel.
 */
int parley_client_request(parley_client *client, uint64_t *out_operation_id, const char *method,
                          const char *path, const char *body_json, parley_result_fn fn, void *user_data);

/**
 * Cancels an operation in flight: its completion runs with PARLEY_E_CANCELLED. Returns
 * PARLEY_E_NOT_FOUND if it already completed or never existed.
 */
int parley_client_cancel(parley_client *client, uint64_t operation_id);


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

/* ---- Operations ---------------------------------------------------------------- */

/**
 * Performs a group-channel or message operation as the connected user and applies its
 * result to the local cache. `operation` is a name from the catalog (docs/C-API.md lists
 * them, parley_operations() returns them as JSON); params_json is a JSON object (NULL
 * for {}) whose keys are the wire parameter names, including the path parameters
 * (channel_url, message_id, ...). Completes with the server's answer (JSON).
 * Unknown operations, missing required parameters and non-object params are refused
 * synchronously with PARLEY_E_INVALID_ARGUMENT; server-side validation errors arrive
 * as PARLEY_E_INVALID_ARGUMENT with http_status 400.
 */
int parley_client_perform(parley_client *client, uint64_t *out_operation_id, const char *operation,
                          const char *params_json, parley_result_fn fn, void *user_data);

/**
 * The operation catalog as a JSON array of {"name", "method", "path", "required"}
 * (free with parley_free).
 */
int parley_operations(char **out_json);

/**
 * Every event category the event handler can receive, as a JSON array of
 * {"name", "source"} with source "server" (the real-time stream), "sync" (the changelog
 * catch-up) or "local" (sending). Free with parley_free.
 */
int parley_event_categories(char **out_json);

/* ---- Connection and real-time events ------------------------------------------- */

/* Connection events (parley_connection_fn's `event`). */
#define PARLEY_CONNECTION_CONNECTING 1             /* a session started; the stream is connecting */
#define PARLEY_CONNECTION_CONNECTED 2              /* the event stream is open (first time in the session) */
#define PARLEY_CONNECTION_RECONNECT_STARTED 3      /* the stream dropped; reconnecting with backoff */
#define PARLEY_CONNECTION_RECONNECT_SUCCEEDED 4    /* back, and the cache caught up (changelogs) */
#define PARLEY_CONNECTION_RECONNECT_FAILED 5       /* an attempt failed; another follows after a delay */
#define PARLEY_CONNECTION_DISCONNECTED 6           /* parley_client_disconnect, or the stream stopped for good (error set) */
#define PARLEY_CONNECTION_SESSION_TOKEN_REQUIRED 7 /* the token expired: call parley_client_set_session_token */

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

/** Sets (fn NULL: removes) the connection handler. Runs on the callback context. */
int parley_client_set_connection_handler(parley_client *client, parley_connection_fn fn, void *user_data);

/**
 * A real-time event, after it was applied to the cache. `category` is a server event
 * category of docs/PROTOCOL.md section 9 (message_received, channel_changed, ...), a sync
 * category (channel_changelog, message_changelog: an object the catch-up changed;
 * channel_changelog_deleted {"channel_url"}, message_changelog_deleted {"channel_url",
 * "message_id"}: a cached object the catch-up found gone), or a local sending category
 * (message_pending, message_sent, message_failed, message_canceled, message_resend_started;
 * see parley_event_categories). `channel_url` may be "". `payload_json` is the event's data
 * object (server events) or the message / channel (sync and local events; message_failed
 * adds error_code and error_message). All borrowed. A message this
 * client sent is reported once, as message_sent, never also as message_received (the
 * server's echo of it only updates the cache).
 */
typedef void (*parley_event_fn)(void *user_data, const char *category, const char *channel_url, const char *payload_json);

/** Sets (fn NULL: removes) the event handler. Runs on the callback context. */
int parley_client_set_event_handler(parley_client *client, parley_event_fn fn, void *user_data);

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

/** The event stream's state (PARLEY_STATE_*). */
int parley_client_connection_state(parley_client *client, int *out_state);

/* ---- Sending (the outbox) -------------------------------------------------------- */

/** Upload progress of a file message: bytes sent of total. Runs on the callback context. */
typedef void (*parley_progress_fn)(void *user_data, const char *req_id, int64_t sent_bytes, int64_t total_bytes);

/**
 * Sends a user message to channel_url. params_json: {"message": "...", and optionally
 * "req_id", "custom_type", "data", "mention_type", "mentioned_user_ids",
 * "sorted_metaarray", "parent_message_id", "is_reply_to_channel", "is_silent",
 * "mark_as_read"}; unknown keys are refused. Before returning, the pending message
 * (message_id 0, sending_status "pending", its req_id) is stored with its outbox entry;
 * *out_pending_json (may be NULL; free with parley_free) receives it. fn runs once with
 * the server's message (sending_status "succeeded") or the error. A message that failed
 * for connection reasons is resent automatically on reconnect (config auto_resend) and
 * after a restart, with the same req_id: the server stores it exactly once.
 */
int parley_client_send_user_message(parley_client *client, char **out_pending_json, uint64_t *out_operation_id,
                                    const char *channel_url, const char *params_json, parley_result_fn fn,
                                    void *user_data);

/**
 * Sends a file message: params_json has either "url" (a hosted file; "file_name",
 * "file_size", "file_type" optional) or "file_path" (a local file uploaded with the
 * message; "file_name", "file_type" optional), plus "thumbnails" and the keys of
 * parley_client_send_user_message except "message". progress (may be NULL) reports the
 * upload, with the same user_data as fn.
 */
int parley_client_send_file_message(parley_client *client, char **out_pending_json, uint64_t *out_operation_id,
                                    const char *channel_url, const char *params_json, parley_progress_fn progress,
                                    parley_result_fn fn, void *user_data);

/** Resends a failed message (same req_id). PARLEY_E_NOT_FOUND / PARLEY_E_INVALID_STATE if there is none / it is pending. */
int parley_client_resend_message(parley_client *client, uint64_t *out_operation_id, const char *req_id,
                                 parley_progress_fn progress, parley_result_fn fn, void *user_data);

/**
 * Cancels a pending message not yet sent, an upload in progress, or a failed message:
 * it is removed (event message_canceled) and its completion gets PARLEY_E_CANCELLED.
 * A user message already on its way returns PARLEY_E_INVALID_STATE.
 */
int parley_client_cancel_message(parley_client *client, const char *req_id);

/** Removes the channel's failed messages; *out_req_ids_json (may be NULL) lists their req_ids. */
int parley_client_remove_failed_messages(parley_client *client, char **out_req_ids_json, const char *channel_url);

/* ---- The cache ------------------------------------------------------------------- */

/**
 * Up to `limit` (1..1000) cached channels as a JSON array, in `order`
 * ("latest_last_message" if NULL, "chronological", "channel_name_alphabetical").
 * Works without the network and after disconnect (the last user's cache stays open).
 */
int parley_client_cached_channels(parley_client *client, char **out_json, const char *order, int limit);

/** One cached channel as JSON; PARLEY_E_NOT_FOUND when not cached. */
int parley_client_cached_channel(parley_client *client, char **out_json, const char *channel_url);

/**
 * The newest `limit` (1..1000) cached messages of the channel created before before_ts
 * (ms; -1 = the newest), oldest first, as a JSON array; with -1 the channel's pending
 * and failed messages follow.
 */
int parley_client_cached_messages(parley_client *client, char **out_json, const char *channel_url, int64_t before_ts,
                                  int limit);

/** Removes everything cached for the current user (pending and failed messages too). */
int parley_client_clear_cached_data(parley_client *client);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_H */
