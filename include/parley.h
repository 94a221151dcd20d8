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
 *     "user_agent": "..."
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
 * (POST /v3/users/{user_id}/token). Completes with the user object (JSON). Operations
 * (parley_client_perform) need a connected session. Connecting as another user while
 * connected fails with PARLEY_E_INVALID_STATE: disconnect first.
 */
int parley_client_connect(parley_client *client, uint64_t *out_operation_id, const char *user_id,
                          const char *session_token, parley_result_fn fn, void *user_data);

/** Ends the session (operations then fail with PARLEY_E_INVALID_STATE). Idempotent. */
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

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_H */
