/* The shared message collection scenario (Tests/scenarios/message_collection.json) through
 * the C ABI, against the real parley-server. The Swift and Python suites run the same file;
 * its format is described in the file. JSON handling here uses jansson (the test's own). */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"
#include <jansson.h>

/* The outcomes of one parley_client_send_file_messages call. */
typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int done;
    int failed;
} files_sent;

static void on_file_sent(void *user_data, int index, const char *req_id, const parley_error *error, const char *json) {
    (void)index; (void)req_id; (void)json;
    files_sent *sent = user_data;
    pthread_mutex_lock(&sent->mutex);
    sent->done++;
    if (error != NULL) sent->failed++;
    pthread_cond_broadcast(&sent->cond);
    pthread_mutex_unlock(&sent->mutex);
}

static int wait_files_sent(files_sent *sent, int count) {
    struct timespec deadline;
    deadline_in(&deadline, 20000);
    pthread_mutex_lock(&sent->mutex);
    while (sent->done < count && pthread_cond_timedwait(&sent->cond, &sent->mutex, &deadline) == 0) {}
    int all = sent->done == count;
    pthread_mutex_unlock(&sent->mutex);
    return all;
}

#define MAX_VIEWS 16

static pthread_mutex_t seen_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_cond = PTHREAD_COND_INITIALIZER;
static json_t *seen;  /* [{view, kind, message, source, status}] */
static json_t *ids;   /* message text -> id, from the admin's message POSTs */

static const char *kind_name(int kind) {
    switch (kind) {
    case PARLEY_MESSAGE_EVENT_ADDED: return "added";
    case PARLEY_MESSAGE_EVENT_UPDATED: return "updated";
    case PARLEY_MESSAGE_EVENT_DELETED: return "deleted";
    case PARLEY_MESSAGE_EVENT_CHANNEL_UPDATED: return "channel_updated";
    case PARLEY_MESSAGE_EVENT_CHANNEL_DELETED: return "channel_deleted";
    default: return "huge_gap_detected";
    }
}

static const char *status_name(int status) {
    switch (status) {
    case PARLEY_SENDING_STATUS_PENDING: return "pending";
    case PARLEY_SENDING_STATUS_FAILED: return "failed";
    case PARLEY_SENDING_STATUS_CANCELED: return "canceled";
    case PARLEY_SENDING_STATUS_SUCCEEDED: return "succeeded";
    default: return "none";
    }
}

static void on_event(void *view, const parley_message_event *event) {
    json_error_t error;
    json_t *messages = json_loads(event->messages_json, 0, &error);
    CHECK(messages != NULL && json_is_array(messages));
    pthread_mutex_lock(&seen_mutex);
    size_t count = json_array_size(messages);
    for (size_t index = 0; index < (count ? count : 1); index++) {
        const char *text = count ? json_string_value(json_object_get(json_array_get(messages, index), "message")) : "";
        json_array_append_new(seen, json_pack("{s:s, s:s, s:s, s:s, s:s}", "view", (const char *)view, "kind", kind_name(event->kind),
                                              "message", text ? text : "", "source", event->source_name,
                                              "status", status_name(event->sending_status)));
    }
    pthread_cond_broadcast(&seen_cond);
    pthread_mutex_unlock(&seen_mutex);
    json_decref(messages);
}

static int field_is(json_t *entry, const char *key, const char *wanted) {
    return wanted == NULL || strcmp(json_string_value(json_object_get(entry, key)), wanted) == 0;
}

/* Waits for one expected report and removes it from what was seen. */
static int take(json_t *expected) {
    const char *view = json_string_value(json_object_get(expected, "view"));
    const char *kind = json_string_value(json_object_get(expected, "kind"));
    const char *message = json_string_value(json_object_get(expected, "message"));
    const char *source = json_string_value(json_object_get(expected, "source"));
    const char *status = json_string_value(json_object_get(expected, "status"));
    struct timespec deadline;
    deadline_in(&deadline, 20000);
    pthread_mutex_lock(&seen_mutex);
    int found = 0;
    while (!found) {
        size_t index;
        json_t *entry;
        json_array_foreach(seen, index, entry) {
            if (field_is(entry, "view", view) && field_is(entry, "kind", kind) && field_is(entry, "message", message ? message : "") &&
                field_is(entry, "source", source) && field_is(entry, "status", status)) {
                json_array_remove(seen, index);
                found = 1;
                break;
            }
        }
        if (!found && pthread_cond_timedwait(&seen_cond, &seen_mutex, &deadline) != 0) break;
    }
    if (!found) {
        char *dump = json_dumps(seen, 0);
        fprintf(stderr, "no %s of '%s' in %s (%s); seen %s\n", kind, message ? message : "", view, source ? source : "any source", dump);
        free(dump);
    }
    pthread_mutex_unlock(&seen_mutex);
    return found;
}

/* Replaces "\"{msg:TEXT}\"" (a JSON string) and "{msg:TEXT}" by the message's id (malloc'd). */
static char *substitute(const char *text) {
    char *out = malloc(strlen(text) * 2 + 64);
    size_t length = 0;
    for (const char *cursor = text; *cursor != '\0';) {
        int quoted = strncmp(cursor, "\"{msg:", 6) == 0;
        if (quoted || strncmp(cursor, "{msg:", 5) == 0) {
            const char *name = cursor + (quoted ? 6 : 5);
            const char *end = strchr(name, '}');
            if (end != NULL) {
                char key[256];
                snprintf(key, sizeof key, "%.*s", (int)(end - name), name);
                length += (size_t)sprintf(out + length, "%lld", (long long)json_integer_value(json_object_get(ids, key)));
                cursor = end + 1 + (quoted && end[1] == '"' ? 1 : 0);
                continue;
            }
        }
        out[length++] = *cursor++;
    }
    out[length] = '\0';
    return out;
}

static void admin_step(parley_client *admin, json_t *step, result_slot *slot) {
    const char *method = json_string_value(json_object_get(step, "admin"));
    const char *raw_path = json_string_value(json_object_get(step, "path"));
    json_t *body_value = json_object_get(step, "body");
    char *raw_body = body_value ? json_dumps(body_value, 0) : NULL;
    char *body = raw_body ? substitute(raw_body) : NULL;
    char *path = substitute(raw_path);
    CHECK(admin_call(admin, method, path, body, slot));
    size_t path_length = strlen(raw_path);
    if (strcmp(method, "POST") == 0 && path_length > 9 && strcmp(raw_path + path_length - 9, "/messages") == 0) {
        json_error_t error;
        json_t *answer = json_loads(slot->json ? slot->json : "", 0, &error);
        json_t *text = json_object_get(answer, "message"), *id = json_object_get(answer, "message_id");
        if (json_is_string(text) && json_is_integer(id)) json_object_set(ids, json_string_value(text), id);
        json_decref(answer);
    }
    free(raw_body); free(body); free(path);
}

typedef struct {
    const char *name;
    const char *listing;
    int reverse;
    parley_message_collection *collection;
} view_state;

/* "id,id," of a JSON array of messages (pending and failed ones left out), oldest first. */
static void ids_of(json_t *messages, int reverse, char *out, size_t size) {
    out[0] = '\0';
    size_t count = json_array_size(messages);
    for (size_t step = 0; step < count; step++) {
        json_t *message = json_array_get(messages, reverse ? count - 1 - step : step);
        if (json_object_get(message, "sending_status") != NULL) continue;
        char item[32];
        snprintf(item, sizeof item, "%lld,", (long long)json_integer_value(json_object_get(message, "message_id")));
        if (strlen(out) + strlen(item) + 1 < size) strcat(out, item);
    }
}

/* Every view shows what the server lists for the viewer (waiting for the views to catch up). */
static void load_all(parley_message_collection *collection, result_slot *slot);

/* Waits until every view shows what the server lists; with `load`, pages views both ways
 * meanwhile (after a clear, views reload around their starting point and are walked again). */
static int listings_match(parley_client *admin, const char *viewer, const char *channel, view_state *views, int count, const char *place,
                          int load) {
    int all = 1;
    for (int v = 0; v < count; v++) {
        char path[1024], truth[8192] = "", mine[8192] = "", position[128] = "message_ts=0&include=true";
        for (int pages = 0; pages < 50; pages++) {
            snprintf(path, sizeof path, "/v3/group_channels/%s/messages?%s&prev_limit=0&next_limit=200&user_id=%s&%s", channel,
                     views[v].listing, viewer, position);
            result_slot slot;
            memset(&slot, 0, sizeof slot);
            CHECK(admin_call(admin, "GET", path, NULL, &slot));
            json_error_t error;
            json_t *answer = json_loads(slot.json ? slot.json : "", 0, &error);
            json_t *messages = json_object_get(answer, "messages");
            char page[8192];
            ids_of(messages, 0, page, sizeof page);
            if (strlen(truth) + strlen(page) + 1 < sizeof truth) strcat(truth, page);
            json_t *last = json_array_get(messages, json_array_size(messages) - 1);
            int more = json_is_true(json_object_get(answer, "has_next")) && last != NULL;
            if (more) {
                snprintf(position, sizeof position, "message_ts=%lld&message_id=%lld&include=false",
                         (long long)json_integer_value(json_object_get(last, "created_at")),
                         (long long)json_integer_value(json_object_get(last, "message_id")));
            }
            json_decref(answer);
            free(slot.json);
            if (!more) break;
        }
        for (int waited = 0; waited < 2000; waited++) {
            if (load) {
                result_slot page;
                memset(&page, 0, sizeof page);  /* slot_init frees the previous result */
                slot_init(&page);
                load_all(views[v].collection, &page);
                free(page.json);
            }
            char *text = NULL;
            CHECK_STATUS(PARLEY_OK, parley_message_collection_messages(views[v].collection, &text));
            json_error_t error;
            json_t *shown = json_loads(text ? text : "[]", 0, &error);
            ids_of(shown, views[v].reverse, mine, sizeof mine);
            json_decref(shown);
            parley_free(text);
            if (strcmp(mine, truth) == 0) break;
            struct timespec pause = {0, 10000000L};
            nanosleep(&pause, NULL);
        }
        if (strcmp(mine, truth) != 0) {
            fprintf(stderr, "%s: view %s shows %s, the server %s\n", place, views[v].name, mine, truth);
            all = 0;
        }
    }
    return all;
}

static void load_all(parley_message_collection *collection, result_slot *slot) {
    int more = 1;
    for (int pages = 0; more && pages < 100; pages++) {
        CHECK_STATUS(PARLEY_OK, parley_message_collection_has_previous(collection, &more));
        if (!more) break;
        slot_init(slot);
        CHECK_STATUS(PARLEY_OK, parley_message_collection_load_previous(collection, on_result, slot));
        CHECK(wait_slot(slot) && slot->code == 0);
    }
    more = 1;
    for (int pages = 0; more && pages < 100; pages++) {
        CHECK_STATUS(PARLEY_OK, parley_message_collection_has_next(collection, &more));
        if (!more) break;
        slot_init(slot);
        CHECK_STATUS(PARLEY_OK, parley_message_collection_load_next(collection, on_result, slot));
        CHECK(wait_slot(slot) && slot->code == 0);
    }
}

int main(void) {
    const char *binary = getenv("PARLEY_SERVER_BIN");
    const char *scenario_path = getenv("PARLEY_SCENARIO");
    if (binary == NULL || access(binary, X_OK) != 0 || scenario_path == NULL) {
        fprintf(stderr, "test_message_scenario: set PARLEY_SERVER_BIN and PARLEY_SCENARIO\n");
        return 1;
    }
    json_error_t json_error;
    json_t *scenario = json_load_file(scenario_path, 0, &json_error);
    if (scenario == NULL) {
        fprintf(stderr, "%s: %s\n", scenario_path, json_error.text);
        return 1;
    }
    seen = json_array();
    ids = json_object();
    test_server server;
    if (test_server_start(&server, "message-scenario") != 0) return 1;
    parley_client *admin = server.admin;
    char config[1024], path[256];
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    const char *viewer = json_string_value(json_object_get(scenario, "viewer"));
    const char *channel = json_string_value(json_object_get(scenario, "channel"));
    char token[256] = "", body[256];
    snprintf(body, sizeof body, "{\"user_id\": \"%s\"}", viewer);
    CHECK(admin_call(admin, "POST", "/v3/users", body, &slot));
    size_t index;
    json_t *item;
    json_array_foreach(json_object_get(scenario, "others"), index, item) {
        snprintf(body, sizeof body, "{\"user_id\": \"%s\"}", json_string_value(item));
        CHECK(admin_call(admin, "POST", "/v3/users", body, &slot));
    }
    snprintf(path, sizeof path, "/v3/users/%s/token", viewer);
    CHECK(admin_call(admin, "POST", path, "{}", &slot));
    CHECK(json_field_text(slot.json, "token", token, sizeof token));
    json_array_foreach(json_object_get(scenario, "setup"), index, item) admin_step(admin, item, &slot);

    parley_client *client = NULL;
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\", \"reconnect_initial_delay_ms\": 50}",
             server.url, server.directory);
    CHECK_STATUS(PARLEY_OK, parley_client_create(&client, config));
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_connect(client, NULL, viewer, token, on_result, &slot));
    CHECK(wait_slot(&slot) && slot.code == 0);
    CHECK(wait_stream_open(client));

    view_state views[MAX_VIEWS];
    int view_count = 0;
    const char *name;
    json_t *view;
    json_object_foreach(json_object_get(scenario, "views"), name, view) {
        if (view_count == MAX_VIEWS) break;
        parley_message_collection_handler handler = PARLEY_MESSAGE_COLLECTION_HANDLER_INIT;
        handler.event = on_event;
        handler.user_data = (void *)name;  /* the scenario outlives the collections */
        json_t *params_value = json_object_get(view, "params");
        char *params = json_dumps(params_value, 0);
        views[view_count].name = name;
        views[view_count].listing = json_string_value(json_object_get(view, "listing"));
        views[view_count].reverse = json_is_true(json_object_get(params_value, "reverse"));
        int64_t point = strcmp(json_string_value(json_object_get(view, "starting_point")), "oldest") == 0 ? 0 : PARLEY_STARTING_POINT_NEWEST;
        CHECK_STATUS(PARLEY_OK, parley_message_collection_create(&views[view_count].collection, client, channel, point, params, &handler));
        free(params);
        slot_init(&slot);
        CHECK_STATUS(PARLEY_OK, parley_message_collection_start(views[view_count].collection, NULL, on_result, &slot));
        CHECK(wait_slot(&slot) && slot.code == 0);
        load_all(views[view_count].collection, &slot);
        view_count++;
    }
    CHECK(listings_match(admin, viewer, channel, views, view_count, "after loading", 0));

    int online = 1;
    json_array_foreach(json_object_get(scenario, "steps"), index, item) {
        char place[32];
        snprintf(place, sizeof place, "step %zu", index);
        json_t *send = json_object_get(item, "send");
        if (json_object_get(item, "admin") != NULL) {
            admin_step(admin, item, &slot);
        } else if (send != NULL) {
            char params[512];
            snprintf(params, sizeof params, "{\"message\": \"%s\"}", json_string_value(send));
            slot_init(&slot);
            CHECK_STATUS(PARLEY_OK, parley_client_send_user_message(client, NULL, NULL, channel, params, on_result, &slot));
            CHECK(wait_slot(&slot) && slot.code == 0);
        } else if (json_object_get(item, "send_files") != NULL) {
            json_t *files = json_array();
            size_t file_index;
            json_t *url;
            json_array_foreach(json_object_get(item, "send_files"), file_index, url) {
                const char *slash = strrchr(json_string_value(url), '/');
                json_array_append_new(files, json_pack("{s:O, s:s}", "url", url, "file_name", slash ? slash + 1 : "file"));
            }
            char *params = json_dumps(files, JSON_COMPACT);
            files_sent sent = {.mutex = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
            CHECK_STATUS(PARLEY_OK, parley_client_send_file_messages(client, NULL, channel, params, NULL, on_file_sent, &sent));
            CHECK(wait_files_sent(&sent, (int)json_array_size(files)));
            CHECK(sent.failed == 0);
            free(params);
            json_decref(files);
        } else if (json_is_true(json_object_get(item, "disconnect"))) {
            CHECK_STATUS(PARLEY_OK, parley_client_disconnect(client));
            online = 0;
        } else if (json_is_true(json_object_get(item, "connect"))) {
            slot_init(&slot);
            CHECK_STATUS(PARLEY_OK, parley_client_connect(client, NULL, viewer, token, on_result, &slot));
            CHECK(wait_slot(&slot) && slot.code == 0);
            CHECK(wait_stream_open(client));
            online = 1;
        } else if (json_is_true(json_object_get(item, "clear"))) {
            CHECK_STATUS(PARLEY_OK, parley_client_clear_cached_data(client));
        }
        size_t expected_index;
        json_t *expected;
        json_array_foreach(json_object_get(item, "expect"), expected_index, expected) {
            if (!take(expected)) {
                fprintf(stderr, "%s\n", place);
                check_failures++;
            }
        }
        if (online) CHECK(listings_match(admin, viewer, channel, views, view_count, place, json_is_true(json_object_get(item, "clear"))));
    }
    for (int v = 0; v < view_count; v++) CHECK_STATUS(PARLEY_OK, parley_message_collection_dispose(views[v].collection));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(admin));
    free(slot.json);
    json_decref(seen);
    json_decref(ids);
    json_decref(scenario);
    server.admin = NULL;  /* destroyed above */
    test_server_stop(&server);
    return check_report("test_message_scenario");
}
