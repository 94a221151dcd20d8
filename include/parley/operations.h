/*
 * parley/operations.h — Group channel and message operations by name, the operation catalog, event categories.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 */
#ifndef PARLEY_OPERATIONS_H
#define PARLEY_OPERATIONS_H

#include "client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Operations ---------------------------------------------------------------- */

/**
 * Performs a group-channel or message operation as the connected user and applies its
 * result to the local cache. `operation` is a name from the catalog (docs/C-REFERENCE.md
 * lists them, parley_operations() returns them as JSON); params_json is a JSON object (NULL
 * for {}) whose keys are the wire parameter names, including the path parameters
 * (channel_url, message_id, ...). Completes with the server's answer (JSON).
 * Unknown operations, missing required parameters and non-object params are refused
 * synchronously with PARLEY_E_INVALID_ARGUMENT; server-side validation errors arrive
 * as PARLEY_E_INVALID_ARGUMENT with http_status 400.
 */
int parley_client_perform(parley_client *client, uint64_t *out_operation_id, const char *operation,
                          const char *params_json, parley_result_fn fn, void *user_data);

/**
 * The operation catalog as a JSON array of {"name", "method", "path", "summary", "parameters",
 * "required", "defaults", "fixed", "value_names"} (free with parley_free). "summary" is one
 * line on what the operation does and answers (Markdown). "parameters" lists every parameter
 * the caller may give, the required ones first, each as {"name", "type", "required"} plus
 * "default" when the operation sends a value for it if left out; "type" is the JSON type on
 * the wire: "string", "integer", "boolean", "string[]", "object" (string values, e.g.
 * metadata), "object<integer>" (integer values: metacounter), "object[]" (an array of
 * objects: sorted_metaarray) or "any". Path placeholders are required but {user_id} (the
 * connected user unless given). "required" names the parameters besides the path's
 * placeholders that must be given; "defaults" holds the values an operation sends for
 * parameters the caller leaves out where they differ from the server's (e.g.
 * list_messages "include": false); "fixed" the values it always sends, whatever the caller
 * gives (e.g. freeze_channel "freeze": true); "value_names" the names a parameter also
 * takes, with the value each stands for (null: the parameter is left out), e.g.
 * list_messages "message_type": {"user": "MESG", ...}. docs/C-REFERENCE.md lists it.
 */
int parley_operations(char **out_json);

/**
 * Every event category the event handler can receive, as a JSON array of
 * {"name", "source"} with source "server" (the real-time stream), "sync" (the changelog
 * catch-up) or "local" (sending). Free with parley_free. docs/C-REFERENCE.md lists them.
 */
int parley_event_categories(char **out_json);

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_OPERATIONS_H */
