/*
 * parley/runtime.h — The runtime all clients of a process share: its network threads.
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
 *   }
 *
 * Every client of the process is bound to one network thread (the one with the fewest
 * clients when it is created). Once the first client started the threads, a different
 * number is refused with PARLEY_E_INVALID_STATE (the same number is accepted). Unknown keys
 * and wrong types: PARLEY_E_INVALID_ARGUMENT; malformed JSON: PARLEY_E_INVALID_JSON.
 */
int parley_runtime_configure(const char *config_json);

/**
 * The runtime's state as JSON (free with parley_free):
 * {"network_threads": threads running (0 before the first client), "default_network_threads": N}.
 */
int parley_runtime_info(char **out_json);

#ifdef __cplusplus
}
#endif

#endif
