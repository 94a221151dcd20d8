/* The C side of the binding: trampolines from the library's callbacks to the Go functions
 * of callbacks.go, and one function per asynchronous call that installs them. */
#include "shim.h"
#include "_cgo_export.h"
#include <errno.h>
#include <poll.h>

static void result_trampoline(void *ud, const parley_error *e, const char *json) {
    parleyGoResult((uintptr_t)ud, (parley_error *)e, (char *)json);
}
static void event_trampoline(void *ud, const char *category, const char *url, const char *payload) {
    parleyGoEvent((uintptr_t)ud, (char *)category, (char *)url, (char *)payload);
}
static void connection_trampoline(void *ud, int event, const parley_error *e) {
    parleyGoConnection((uintptr_t)ud, event, (parley_error *)e);
}
static void channels_added(void *ud, const parley_collection_context *c, const char *j) { parleyGoChannels((uintptr_t)ud, CHANNELS_ADDED, (parley_collection_context *)c, (char *)j); }
static void channels_updated(void *ud, const parley_collection_context *c, const char *j) { parleyGoChannels((uintptr_t)ud, CHANNELS_UPDATED, (parley_collection_context *)c, (char *)j); }
static void channels_deleted(void *ud, const parley_collection_context *c, const char *j) { parleyGoChannels((uintptr_t)ud, CHANNELS_DELETED, (parley_collection_context *)c, (char *)j); }
static void channels_deleted_objects(void *ud, const parley_collection_context *c, const char *j) { parleyGoChannels((uintptr_t)ud, CHANNELS_DELETED_OBJECTS, (parley_collection_context *)c, (char *)j); }
static void view_error_trampoline(void *ud, const parley_error *e) { parleyGoViewError((uintptr_t)ud, (parley_error *)e); }
static void freshness_trampoline(void *ud, int f) { parleyGoFreshness((uintptr_t)ud, f); }
static void message_event_trampoline(void *ud, const parley_message_event *e) { parleyGoMessageEvent((uintptr_t)ud, (parley_message_event *)e); }
static void sync_action_trampoline(void *ud, int a, int l, const char *j) { parleyGoSyncAction((uintptr_t)ud, a, l, (char *)j); }
static void sync_fetch_trampoline(void *ud, const parley_error *e, int more, int offline) { parleyGoSyncFetch((uintptr_t)ud, (parley_error *)e, more, offline); }
static void search_added(void *ud, const char *j) { parleyGoSearchResults((uintptr_t)ud, SEARCH_ADDED, (char *)j); }
static void search_updated(void *ud, const char *j) { parleyGoSearchResults((uintptr_t)ud, SEARCH_UPDATED, (char *)j); }
static void search_deleted(void *ud, const char *j) { parleyGoSearchResults((uintptr_t)ud, SEARCH_DELETED, (char *)j); }

// Waits until the client's event fd or the wake pipe is readable: bit 1 event fd, bit 2 wake.
int go_wait(int event_fd, int wake_fd) {
    struct pollfd fds[2] = {{event_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int ready;
    do { ready = poll(fds, 2, -1); } while (ready < 0 && errno == EINTR);
    if (ready < 0) return -errno;
    return (fds[0].revents ? 1 : 0) | (fds[1].revents ? 2 : 0);
}

int go_request(parley_client *c, uint64_t *op, const char *method, const char *path, const char *body, uintptr_t h) {
    return parley_client_request(c, op, method, path, body, result_trampoline, (void *)h);
}
int go_connect(parley_client *c, uint64_t *op, const char *user, const char *token, uintptr_t h) {
    return parley_client_connect(c, op, user, token, result_trampoline, (void *)h);
}
int go_perform(parley_client *c, uint64_t *op, const char *name, const char *params, uintptr_t h) {
    return parley_client_perform(c, op, name, params, result_trampoline, (void *)h);
}
int go_set_event_handler(parley_client *c, uintptr_t h) {
    return parley_client_set_event_handler(c, h ? event_trampoline : NULL, (void *)h);
}
int go_set_connection_handler(parley_client *c, uintptr_t h) {
    return parley_client_set_connection_handler(c, h ? connection_trampoline : NULL, (void *)h);
}
int go_send_user_message(parley_client *c, char **pending, uint64_t *op, const char *url, const char *params, uintptr_t h) {
    return parley_client_send_user_message(c, pending, op, url, params, result_trampoline, (void *)h);
}
static void progress_trampoline(void *ud, const char *req_id, int64_t sent, int64_t total) {
    parleyGoProgress((uintptr_t)ud, (char *)req_id, sent, total);
}
int go_send_file_message(parley_client *c, char **pending, uint64_t *op, const char *url, const char *params, uintptr_t h) {
    return parley_client_send_file_message(c, pending, op, url, params, progress_trampoline, result_trampoline, (void *)h);
}
int go_resend_message(parley_client *c, uint64_t *op, const char *req_id, uintptr_t h) {
    return parley_client_resend_message(c, op, req_id, NULL, result_trampoline, (void *)h);
}
int go_query_load(parley_query *q, uint64_t *op, uintptr_t h) {
    return parley_query_load_next_page(q, op, result_trampoline, (void *)h);
}

int go_channel_collection_create(parley_group_channel_collection **out, parley_client *c, const char *query, uintptr_t h) {
    parley_group_channel_collection_handler handler = PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_INIT;
    handler.added = channels_added;
    handler.updated = channels_updated;
    handler.deleted = channels_deleted;
    handler.deleted_channels = channels_deleted_objects;
    handler.error = view_error_trampoline;
    handler.freshness_changed = freshness_trampoline;
    handler.user_data = (void *)h;
    return parley_group_channel_collection_create(out, c, query, &handler);
}
int go_channel_collection_load_more(parley_group_channel_collection *col, uintptr_t h) {
    return parley_group_channel_collection_load_more(col, result_trampoline, (void *)h);
}

int go_message_collection_create(parley_message_collection **out, parley_client *c, const char *url, int64_t start, const char *params, uintptr_t h) {
    parley_message_collection_handler handler = PARLEY_MESSAGE_COLLECTION_HANDLER_INIT;
    handler.event = message_event_trampoline;
    handler.error = view_error_trampoline;
    handler.freshness_changed = freshness_trampoline;
    handler.user_data = (void *)h;
    return parley_message_collection_create(out, c, url, start, params, &handler);
}
// start's two completions share one user_data: the cache's list (0), then the server's (1).
static void start_cache_trampoline(void *ud, const parley_error *e, const char *j) { parleyGoStart((uintptr_t)ud, 0, (parley_error *)e, (char *)j); }
static void start_api_trampoline(void *ud, const parley_error *e, const char *j) { parleyGoStart((uintptr_t)ud, 1, (parley_error *)e, (char *)j); }
int go_message_collection_start(parley_message_collection *col, uintptr_t h) {
    return parley_message_collection_start(col, start_cache_trampoline, start_api_trampoline, (void *)h);
}
int go_message_collection_load(parley_message_collection *col, int previous, uintptr_t h) {
    return previous ? parley_message_collection_load_previous(col, result_trampoline, (void *)h)
                    : parley_message_collection_load_next(col, result_trampoline, (void *)h);
}

int go_sync_view_create(parley_sync_view **out, parley_client *c, const char *url, int64_t viewpoint, const char *options, uintptr_t h) {
    parley_sync_view_handler handler = PARLEY_SYNC_VIEW_HANDLER_INIT;
    handler.action = sync_action_trampoline;
    handler.error = view_error_trampoline;
    handler.freshness_changed = freshness_trampoline;
    handler.user_data = (void *)h;
    return parley_sync_view_create(out, c, url, viewpoint, options, &handler);
}
int go_sync_view_fetch(parley_sync_view *v, int direction, int all_next, uintptr_t h) {
    return all_next ? parley_sync_view_fetch_all_next(v, sync_fetch_trampoline, (void *)h)
                    : parley_sync_view_fetch(v, direction, sync_fetch_trampoline, (void *)h);
}

int go_search_create(parley_message_search **out, parley_client *c, const char *params, uintptr_t h) {
    parley_message_search_handler handler = PARLEY_MESSAGE_SEARCH_HANDLER_INIT;
    handler.added = search_added;
    handler.updated = search_updated;
    handler.deleted = search_deleted;
    handler.error = view_error_trampoline;
    handler.freshness_changed = freshness_trampoline;
    handler.user_data = (void *)h;
    return parley_message_search_create(out, c, params, &handler);
}
int go_search_load(parley_message_search *s, int older, uintptr_t h) {
    return older ? parley_message_search_load_older(s, result_trampoline, (void *)h)
                 : parley_message_search_load_more(s, result_trampoline, (void *)h);
}

int go_is_retryable(int code, int http_status, int server_code) {
    parley_error e = {code, "", http_status, server_code};
    return parley_error_is_retryable(&e);
}

static void log_trampoline(void *ud, int level, const char *message) { parleyGoLog((uintptr_t)ud, level, (char *)message); }
int go_set_log_callback(parley_client *c, uintptr_t h, int max_level) {
    return parley_client_set_log_callback(c, h ? log_trampoline : NULL, (void *)h, max_level);
}

static void posted_trampoline(void *ud) { parleyGoPosted((uintptr_t)ud); }
int go_post(parley_client *c, uintptr_t h) { return parley_client_post(c, posted_trampoline, (void *)h); }

int go_add_event_handler(parley_client *c, const char *id, uintptr_t h) {
    return parley_client_add_event_handler(c, id, event_trampoline, (void *)h);
}
int go_add_connection_handler(parley_client *c, const char *id, uintptr_t h) {
    return parley_client_add_connection_handler(c, id, connection_trampoline, (void *)h);
}

static void file_sent_trampoline(void *ud, int index, const char *req_id, const parley_error *e, const char *json) {
    parleyGoFileSent((uintptr_t)ud, index, (char *)req_id, (parley_error *)e, (char *)json);
}
int go_send_file_messages(parley_client *c, char **pending, const char *url, const char *params, uintptr_t h) {
    return parley_client_send_file_messages(c, pending, url, params, progress_trampoline, file_sent_trampoline, (void *)h);
}
