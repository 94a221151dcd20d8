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

/* The umbrella header: every module of the interface. Each can be included alone. */
#include "parley/common.h"
#include "parley/client.h"
#include "parley/runtime.h"
#include "parley/session.h"
#include "parley/operations.h"
#include "parley/query.h"
#include "parley/sending.h"
#include "parley/cache.h"
#include "parley/group_channel_collection.h"
#include "parley/message_collection.h"
#include "parley/sync_view.h"
#include "parley/search.h"

#endif /* PARLEY_H */
