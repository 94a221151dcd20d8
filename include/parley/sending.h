/*
 * parley/sending.h — Sending through the outbox: pending messages, resend, cancel, failed messages.
 * Part of the Parley C interface; include <parley.h> for all of it. Conventions: parley.h.
 */
#ifndef PARLEY_SENDING_H
#define PARLEY_SENDING_H

#include "client.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * the server's message (sending_status "succeeded") or the error. What a failed message
 * becomes is the client's resend policy (config "resend_policy", client.h): with the
 * default ("automatic") a message that failed for connection reasons is resent by itself
 * on reconnect and after a restart, with the same req_id: the server stores it at most once.
 */
int parley_client_send_user_message(parley_client *client, char **out_pending_json, uint64_t *out_operation_id,
                                    const char *channel_url, const char *params_json, parley_result_fn fn,
                                    void *user_data);

/**
 * Sends a file message: params_json has either "url" (a hosted file; "file_name",
 * "file_size", "file_type" optional) or "file_path" (a local file uploaded with the
 * message; "file_name", "file_type" optional; "mime_type" is accepted for "file_type"),
 * plus "thumbnails", "thumbnail_sizes" (up to 3 boxes {"max_width", "max_height"}, each
 * side 1 to 4096: the server makes a thumbnail of an uploaded image per box, and they come
 * in the message's "thumbnails") and the keys of parley_client_send_user_message except
 * "message". progress (may be NULL) reports the upload, with the same user_data as fn.
 */
int parley_client_send_file_message(parley_client *client, char **out_pending_json, uint64_t *out_operation_id,
                                    const char *channel_url, const char *params_json, parley_progress_fn progress,
                                    parley_result_fn fn, void *user_data);

/**
 * The outcome of one file of parley_client_send_file_messages: its position in the call's
 * array (`index`, from 0), its req_id, and either the server's message (`message_json`,
 * error NULL) or the failure (`error`, message_json NULL). Runs once per file, on the
 * callback context; the strings are borrowed for the call.
 */
typedef void (*parley_file_sent_fn)(void *user_data, int index, const char *req_id, const parley_error *error,
                                    const char *message_json);

/** The most files one parley_client_send_file_messages call takes. */
#define PARLEY_MAX_FILES_PER_SEND 20

/**
 * Sends 1 to PARLEY_MAX_FILES_PER_SEND file messages to channel_url in one call, each its
 * own message. params_json is a JSON array whose items are parley_client_send_file_message's
 * params (a req_id each is made up where none is given; two alike are refused). Every item is
 * checked before any is stored: one bad item (PARLEY_E_INVALID_ARGUMENT, or PARLEY_E_IO for
 * an unreadable file, its message naming "files[i]") stores none. Then each becomes a
 * pending message in the array's order and the outbox delivers them in that order (a send
 * made meanwhile on another thread may come between them). *out_pending_json (may be NULL;
 * free with parley_free) receives the pending messages as a JSON array in the same order.
 * progress (may be NULL) reports each upload under its req_id; fn runs once per file. A file
 * that fails stays a failed message of its own: parley_client_resend_message resends it
 * alone, parley_client_cancel_message removes it. Should storing one fail (a cache error),
 * those stored before it are cancelled (fn runs for them with PARLEY_E_CANCELLED) and the
 * call returns the error.
 */
int parley_client_send_file_messages(parley_client *client, char **out_pending_json, const char *channel_url,
                                     const char *params_json, parley_progress_fn progress, parley_file_sent_fn fn,
                                     void *user_data);

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

#ifdef __cplusplus
}
#endif

#endif /* PARLEY_SENDING_H */
