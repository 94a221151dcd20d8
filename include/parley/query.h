/*
 * parley/query.h — Stateful list queries: a channel's previous messages, channel, member, operator, ban and mute lists.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 */
#ifndef PARLEY_QUERY_H
#define PARLEY_QUERY_H

#include "client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Queries ------------------------------------------------------------------- */

/** A stateful list query: each load gives the page after the last one. */
typedef struct parley_query parley_query;

/* Query kinds (parley_query_create's `kind`); the options of each: docs/C-API.md "Queries". */
#define PARLEY_QUERY_PREVIOUS_MESSAGES 1     /* a channel's messages, older on each page */
#define PARLEY_QUERY_GROUP_CHANNELS 2        /* the user's channels, with a channel collection's query options */
#define PARLEY_QUERY_PUBLIC_GROUP_CHANNELS 3 /* public channels */
#define PARLEY_QUERY_MEMBERS 4               /* a channel's members */
#define PARLEY_QUERY_OPERATORS 5             /* a channel's operators */
#define PARLEY_QUERY_BANNED_USERS 6          /* a channel's bans (operators only) */
#define PARLEY_QUERY_MUTED_USERS 7           /* a channel's mutes (operators only) */

/**
 * Creates a query of `kind` (PARLEY_QUERY_*) on the client. options_json is a JSON object
 * (NULL or "" for {}) with the kind's options (docs/C-API.md "Queries"); unknown options,
 * wrong types and values out of range are refused with PARLEY_E_INVALID_ARGUMENT naming
 * the option, an unknown kind too. Nothing is sent until parley_query_load_next_page.
 * Release with parley_query_dispose (destroying the client does not free queries).
 */
int parley_query_create(parley_query **out_query, parley_client *client, int kind, const char *options_json);

/**
 * Loads the next page: completes once, on the client's callback context, with a JSON array
 * of the page's items as the server gives them (messages, channels, members, or users /
 * {"user", "start_at", "end_at", "description"} for bans and mutes), or with the error.
 * Past the end (parley_query_has_next 0) it completes with []. The query keeps where the
 * page ended (the server's next token; for previous messages the oldest message's
 * (created_at, message_id), so messages sharing a millisecond are neither skipped nor
 * repeated); that state and has_next change right before the completion runs. A failed or
 * cancelled load (parley_client_cancel with *out_operation_id) changes nothing: ask again.
 * Needs a connected session, as the operations do; the pages are not stored in the cache.
 * While a load runs (until its completion has run) another is refused with
 * PARLEY_E_INVALID_STATE ("query in progress"), and no callback runs for it.
 */
int parley_query_load_next_page(parley_query *query, uint64_t *out_operation_id, parley_result_fn fn, void *user_data);

/** 1 while another page may follow (until a page's answer said it was the last), else 0. */
int parley_query_has_next(parley_query *query, int *out_has_next);

/** 1 while a load runs (its completion has not run yet), else 0. */
int parley_query_is_loading(parley_query *query, int *out_is_loading);

/**
 * Releases the query. A load in flight completes with PARLEY_E_CANCELLED (possibly after
 * this returns). The handle is invalid afterwards (PARLEY_E_INVALID_HANDLE, also for a
 * second dispose).
 */
int parley_query_dispose(parley_query *query);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_QUERY_H */
