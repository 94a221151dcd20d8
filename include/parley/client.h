/*
 * parley/client.h — The client: creating and destroying it, callback dispatch, logging, raw requests.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 */
#ifndef PARLEY_CLIENT_H
#define PARLEY_CLIENT_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Client -------------------------------------------------------------------- */

typedef struct parley_client parley_client;

/* Callback delivery modes (configuration key "dispatch_mode"). */
#define PARLEY_DISPATCH_THREAD 0 /* "thread": the process-wide callback pool runs them (default) */
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
 *     "resend_policy": "automatic",             what a failed send becomes: "none" (dropped at once,
 *                                               local copy and outbox), "manual" (kept as failed until
 *                                               resent or removed), "automatic" (a connection failure is
 *                                               resent by itself on reconnect and whenever a send starts
 *                                               the outbox, up to resend_retry_count times, then kept; a
 *                                               refusal is kept as failed at once)
 *     "auto_resend": true,                      the older switch: true = "automatic", false = "manual"
 *                                               (giving both: true exactly when the policy is "automatic")
 *     "resend_retry_count": -1,                 automatic resends per message; -1 = no limit
 *     "max_failed_messages_per_channel": -1,    failed messages kept per channel; beyond it the oldest
 *                                               are removed (message_canceled); -1 = no limit
 *     "reconnect_initial_delay_ms": 500,        backoff of the event stream (doubling, with jitter)
 *     "reconnect_max_delay_ms": 30000,
 *     "reconnect_max_attempts": 0,              0 = never give up
 *     "stream_idle_timeout_s": 45               reconnect when nothing (not even a heartbeat) arrives
 *   }
 *
 * Unknown keys and wrong types are refused with PARLEY_E_INVALID_ARGUMENT (malformed
 * JSON: PARLEY_E_INVALID_JSON) and a message naming the key. parley_configuration_keys
 * returns this table (docs/C-REFERENCE.md lists it).
 */
int parley_client_create(parley_client **out_client, const char *config_json);

/**
 * Every key of the configuration document as a JSON array of {"name", "type", "default",
 * "values", "summary"} (free with parley_free): type "string", "integer" or "boolean";
 * default null where there is none (summary says what happens then); values the accepted
 * range or choices in words, "" for any value of the type. docs/C-REFERENCE.md lists it.
 */
int parley_configuration_keys(char **out_json);

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
 * A client attached to a dispatch group keeps it: readable while this client's callbacks
 * wait (watch the group's fd instead).
 */
int parley_client_event_fd(parley_client *client, int *out_fd);

/**
 * Manual dispatch mode: runs up to max_callbacks waiting callbacks (0: all waiting now)
 * on the calling thread and stores how many ran (may be NULL). If another thread is
 * dispatching, or this is called from inside a callback, runs none and returns PARLEY_OK.
 * Thread mode: PARLEY_E_INVALID_STATE. For a client attached to a dispatch group it runs
 * this client's callbacks only (those the group would run; the group's fd follows).
 */
int parley_client_dispatch(parley_client *client, int max_callbacks, int *out_dispatched);

/* ---- Dispatch groups: one fd for many manual-mode clients ---------------------- */

/**
 * A set of manual-mode clients dispatched together: one file descriptor, readable exactly
 * while any attached client has callbacks waiting, and one dispatch call that runs them
 * (each client's callbacks still one at a time and in order; clients in turn). An event
 * loop serving thousands of clients watches one fd.
 */
typedef struct parley_dispatch_group parley_dispatch_group;

/** Creates an empty dispatch group. Destroy it with parley_dispatch_group_destroy. */
int parley_dispatch_group_create(parley_dispatch_group **out_group);

/** The group's file descriptor (an eventfd), owned by the group: do not close or read it. */
int parley_dispatch_group_event_fd(parley_dispatch_group *group, int *out_fd);

/**
 * Runs waiting callbacks of the attached clients on the calling thread and stores how many
 * ran (out_dispatched may be NULL). max_callbacks 0: every client waiting when the call
 * began runs the callbacks it has waiting at its turn; otherwise at most max_callbacks in
 * all, taking clients in turn (round robin, a few callbacks each). If another thread is
 * dispatching the group, or this is called from inside a callback it runs, runs none and
 * returns PARLEY_OK.
 */
int parley_dispatch_group_dispatch(parley_dispatch_group *group, int max_callbacks, int *out_dispatched);

/**
 * Destroys an empty group. While clients are attached it is refused with
 * PARLEY_E_INVALID_STATE (destroy or detach them first; the group stays valid).
 * A second call, or any later use of the handle, gives PARLEY_E_INVALID_HANDLE.
 */
int parley_dispatch_group_destroy(parley_dispatch_group *group);

/**
 * Attaches a manual-mode client to a group (group NULL: detaches it). Callbacks already
 * waiting count at once. Any time after creation; a client is in at most one group
 * (attaching it to another gives PARLEY_E_INVALID_STATE: detach it first; attaching it to
 * its own group again changes nothing). Thread mode: PARLEY_E_INVALID_STATE. Destroying
 * the client detaches it (also from inside its own callback during a group dispatch).
 */
int parley_client_set_dispatch_group(parley_client *client, parley_dispatch_group *group);

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

/* ---- Metrics ------------------------------------------------------------------- */

/**
 * The client's counters and gauges as one JSON object (free with parley_free): the event
 * stream's state and reconnections, events, catch-ups, resyncs, sends and the outbox, the
 * cache's size and rows, evictions, the search index, open views and the callback queue.
 * Names and units follow Prometheus (counters end in "_total", "_seconds", "_bytes");
 * docs/C-API.md "Metrics" lists each. Cheap enough to call every second; works before
 * connect and after disconnect. A NULL out_json gives PARLEY_E_INVALID_ARGUMENT.
 */
int parley_client_metrics(parley_client *client, char **out_json);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_CLIENT_H */
