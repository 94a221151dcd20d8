/*
 * parley/runtime.h — The runtime all clients of a process share: its network and callback threads.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 */
#ifndef PARLEY_RUNTIME_H
#define PARLEY_RUNTIME_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Sets process-wide settings from a JSON document, before the first client is created:
 *
 *   {
 *     "network_threads": 2     threads that run the HTTP requests and event streams of all
 *                              clients, 1..64; default: one per core, at most 4
 *     "callback_threads": 2    the callback pool's core threads (clients in thread dispatch
 *                              mode), 1..64; default: one per core, at least 2, at most 8
 *   }
 *
 * Every client of the process is bound to one network thread (the one with the fewest
 * clients when it is created); the callback pool adds threads past a callback that blocks
 * (docs/THREADING.md). Once the first client started the threads, a different number is
 * refused with PARLEY_E_INVALID_STATE and nothing changes (the same number is accepted).
 * Unknown keys and wrong types: PARLEY_E_INVALID_ARGUMENT; malformed JSON:
 * PARLEY_E_INVALID_JSON.
 */
int parley_runtime_configure(const char *config_json);

/**
 * The runtime's state as JSON (free with parley_free): "network_threads" and "callback_threads"
 * (the numbers in force; 0 before the first client), "callback_extra_threads" (running past
 * blocked callbacks now), "default_network_threads", "default_callback_threads".
 */
int parley_runtime_info(char **out_json);

#ifdef __cplusplus
}
#endif

#endif
