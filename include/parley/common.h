/*
 * parley/common.h — Version, status codes, errors and freeing: what every module uses.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 */
#ifndef PARLEY_COMMON_H
#define PARLEY_COMMON_H

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

#define PARLEY_OK                    0  /* success */
#define PARLEY_E_INVALID_ARGUMENT   -1  /* a parameter is NULL, out of range or malformed */
#define PARLEY_E_INVALID_HANDLE     -2  /* NULL, destroyed or wrong-kind handle */
#define PARLEY_E_INVALID_JSON       -3  /* a JSON argument does not parse (the message gives line and column) */
#define PARLEY_E_NO_MEMORY          -4  /* out of memory */
#define PARLEY_E_INVALID_STATE      -5  /* wrong state for the call (closed, wrong dispatch mode, no server URL) */
#define PARLEY_E_NETWORK            -6  /* connection refused/reset, DNS failure */
#define PARLEY_E_TIMEOUT            -7  /* the request or connection timed out */
#define PARLEY_E_CANCELLED          -8  /* cancelled, or the client was destroyed */
#define PARLEY_E_SERVER             -9  /* the server answered with an error (see http_status, server_code) */
#define PARLEY_E_UNAUTHORIZED      -10  /* HTTP 401: missing, wrong or expired credentials */
#define PARLEY_E_FORBIDDEN         -11  /* HTTP 403: not allowed for this user */
#define PARLEY_E_NOT_FOUND         -12  /* HTTP 404, or an unknown operation id */
#define PARLEY_E_CACHE             -13  /* the local cache (SQLite) failed */
#define PARLEY_E_PROTOCOL          -14  /* the server's answer broke the protocol (malformed JSON, wrong types) */
#define PARLEY_E_TLS               -15  /* TLS handshake or certificate verification failed */
#define PARLEY_E_IO                -16  /* a local file could not be read or written */
#define PARLEY_E_LIMIT_EXCEEDED    -17  /* a size, depth or count limit was exceeded */
#define PARLEY_E_CACHE_KEY         -18  /* the cache file is encrypted and the key given does not open it, or none was given */
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

/**
 * 1 when trying the same call again later may succeed, else 0 (also for NULL): network
 * failures (PARLEY_E_NETWORK), timeouts (PARLEY_E_TIMEOUT) and the server's own trouble
 * (PARLEY_E_SERVER with http_status 5xx, 408 or 429). Every other error is a refusal that
 * the same request gets again. This is the rule the outbox resends by (docs/C-API.md,
 * "Sending and the outbox"); docs/C-REFERENCE.md lists it for every status code.
 */
int parley_error_is_retryable(const parley_error *error);

/** Frees a string or buffer this library returned to you. NULL is ignored. */
void parley_free(void *pointer);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_COMMON_H */
