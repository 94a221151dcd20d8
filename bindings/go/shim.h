/* Declarations of shim.c: what the Go files call. */
#ifndef PARLEY_GO_SHIM_H
#define PARLEY_GO_SHIM_H
#include <parley.h>
#include <stdint.h>
#include <stdlib.h>

/* Kinds of channel collection reports: the handler field that ran. */
enum { CHANNELS_ADDED = 1, CHANNELS_UPDATED = 2, CHANNELS_DELETED = 3, CHANNELS_DELETED_OBJECTS = 4 };
/* Kinds of search reports. */
enum { SEARCH_ADDED = 1, SEARCH_UPDATED = 2, SEARCH_DELETED = 3 };

int go_wait(int event_fd, int wake_fd);
/* Zeroes memory that held a secret (volatile: the compiler keeps the stores). */
static inline void go_wipe(void *bytes, size_t count) {
    volatile unsigned char *at = (volatile unsigned char *)bytes;
    while (count-- > 0) *at++ = 0;
}
int go_request(parley_client *c, uint64_t *op, const char *method, const char *path, const char *body, uintptr_t h);
int go_connect(parley_client *c, uint64_t *op, const char *user, const char *token, uintptr_t h);
int go_perform(parley_client *c, uint64_t *op, const char *name, const char *params, uintptr_t h);
int go_set_event_handler(parley_client *c, uintptr_t h);
int go_set_connection_handler(parley_client *c, uintptr_t h);
int go_send_user_message(parley_client *c, char **pending, uint64_t *op, const char *url, const char *params, uintptr_t h);
int go_send_file_message(parley_client *c, char **pending, uint64_t *op, const char *url, const char *params, uintptr_t h);
int go_resend_message(parley_client *c, uint64_t *op, const char *req_id, uintptr_t h);
int go_query_load(parley_query *q, uint64_t *op, uintptr_t h);
int go_channel_collection_create(parley_group_channel_collection **out, parley_client *c, const char *query, uintptr_t h);
int go_channel_collection_load_more(parley_group_channel_collection *col, uintptr_t h);
int go_message_collection_create(parley_message_collection **out, parley_client *c, const char *url, int64_t start, const char *params, uintptr_t h);
int go_message_collection_start(parley_message_collection *col, uintptr_t h);
int go_message_collection_load(parley_message_collection *col, int previous, uintptr_t h);
int go_sync_view_create(parley_sync_view **out, parley_client *c, const char *url, int64_t viewpoint, const char *options, uintptr_t h);
int go_sync_view_fetch(parley_sync_view *v, int direction, int all_next, uintptr_t h);
int go_search_create(parley_message_search **out, parley_client *c, const char *params, uintptr_t h);
int go_search_load(parley_message_search *s, int older, uintptr_t h);
int go_is_retryable(int code, int http_status, int server_code);
int go_set_log_callback(parley_client *c, uintptr_t h, int max_level);
int go_post(parley_client *c, uintptr_t h);
int go_add_event_handler(parley_client *c, const char *id, uintptr_t h);
int go_add_connection_handler(parley_client *c, const char *id, uintptr_t h);
int go_send_file_messages(parley_client *c, char **pending, const char *url, const char *params, uintptr_t h);

#endif
