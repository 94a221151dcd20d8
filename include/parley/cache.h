/*
 * parley/cache.h — Reading the local cache directly.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 */
#ifndef PARLEY_CACHE_H
#define PARLEY_CACHE_H

#include "client.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * and failed messages follow. It shows what is cached, holes included:
 * parley_client_cached_message_page says whether the page is known to be continuous.
 */
int parley_client_cached_messages(parley_client *client, char **out_json, const char *channel_url, int64_t before_ts,
                                  int limit);

/**
 * The page parley_client_cached_messages gives, marked: a JSON object
 * {"messages": [...], "continuous": bool}. "continuous" is true only when the cache knows
 * that no message of the channel is missing between the page's first and last message
 * (and, with before_ts, up to just before before_ts, so that the page joins the one after
 * it). It is known for ranges loaded from the server — by a message collection without
 * filters, or by list_messages with include_reply_type "ALL" and no filters — and extended
 * by the real-time stream while it stays up. False: the page may span a hole (e.g. after
 * a `resync` event, or for messages only ever received live); load the range from the
 * server to close it.
 */
int parley_client_cached_message_page(parley_client *client, char **out_json, const char *channel_url, int64_t before_ts,
                                      int limit);

/** Removes everything cached for the current user (pending and failed messages too). Open
 * collections report what they showed as deleted, then reload themselves from the server
 * (now, or after the next catch-up when offline): docs/C-API.md "Clearing the cache with
 * views open". */
int parley_client_clear_cached_data(parley_client *client);

/** Encrypts the current user's cache file with another key, or removes its encryption.
 * key_json is {"cache_key": "<64 hex digits>"} or {"cache_passphrase": "...", with optional
 * "cache_passphrase_iterations" and "cache_passphrase_memory_mb"}; {} or NULL removes the
 * encryption. The file is rewritten beside itself under the new key, synced and renamed
 * over the old one (a crash leaves it whole under one key or the other), then opened again;
 * the client uses the new key from then on. Blocks while the file is rewritten (about as
 * long as VACUUM takes). PARLEY_E_INVALID_STATE when no cache file is open (connect
 * first), PARLEY_E_CACHE_KEY when the client's current key does not open the file.
 * docs/C-API.md "Encryption at rest". */
int parley_client_rekey_cache(parley_client *client, const char *key_json);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_CACHE_H */
