/* The shared channel collection scenario (Tests/scenarios/channel_collection.json) through
 * the C ABI, against the real parley-server. The Swift and Python suites run the same file;
 * its format is described in the file. JSON handling here uses jansson (the test's own). */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"
#include <jansson.h>

#define MAX_VIEWS 16

static pthread_mutex_t seen_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_cond = PTHREAD_COND_INITIALIZER;
static json_t *seen; /* [{view, kind, channel, source, object}] */
/* The URL list of the last deletion, per view (deleted runs just before deleted_channels). */
static json_t *last_deleted; /* {view: [url]} */

static void record(const char *view, const char *kind, const parley_collection_context *context, const char *json_text) {
    json_error_t error;
    json_t *items = json_loads(json_text, 0, &error);
    CHECK(items != NULL && json_is_array(items));
    pthread_mutex_lock(&seen_mutex);
    size_t index;
    json_t *item;
    json_array_foreach(items, index, item) {
        const char *channel = json_string_value(json_object_get(item, "channel_url"));
        json_array_append_new(seen, json_pack("{s:s, s:s, s:s, s:s, s:O}", "view", view, "kind", kind, "channel", channel ? channel : "",
                                              "source", context->source_name, "object", item));
    }
    pthread_cond_broadcast(&seen_cond);
    pthread_mutex_unlock(&seen_mutex);
    json_decref(items);
}

static void on_added(void *view, const parley_collection_context *context, const char *json) { record(view, "added", context, json); }
static void on_updated(void *view, const parley_collection_context *context, const char *json) { record(view, "updated", context, json); }
static void on_deleted(void *view, const parley_collection_context *context, const char *json) {
    (void)context;
    json_error_t error;
    json_t *urls = json_loads(json, 0, &error);
    CHECK(urls != NULL && json_is_array(urls));
    pthread_mutex_lock(&seen_mutex);
    json_object_set_new(last_deleted, view, urls);
    pthread_mutex_unlock(&seen_mutex);
}

/* A deletion is recorded from its channel objects; its URL list must name the same channels. */
static void on_deleted_channels(void *view, const parley_collection_context *context, const char *json) {
    json_error_t error;
    json_t *channels = json_loads(json, 0, &error);
    CHECK(channels != NULL && json_is_array(channels));
    json_t *urls = json_array();
    size_t index;
    json_t *channel;
    json_array_foreach(channels, index, channel) json_array_append(urls, json_object_get(channel, "channel_url"));
    pthread_mutex_lock(&seen_mutex);
    CHECK(json_equal(urls, json_object_get(last_deleted, view)));
    pthread_mutex_unlock(&seen_mutex);
    json_decref(urls);
    json_decref(channels);
    record(view, "deleted", context, json);
}

/* Every member of `fields` is in the object with an equal value. */
static int has_fields(json_t *object, json_t *fields) {
    const char *key;
    json_t *value;
    json_object_foreach(fields, key, value) {
        if (!json_equal(json_object_get(object, key), value)) return 0;
    }
    return 1;
}

/* Waits for one expected change and removes it from what was seen. */
static int take(json_t *expected) {
    const char *view = json_string_value(json_object_get(expected, "view"));
    const char *kind = json_string_value(json_object_get(expected, "kind"));
    const char *channel = json_string_value(json_object_get(expected, "channel"));
    const char *source = json_string_value(json_object_get(expected, "source"));
    json_t *fields = json_object_get(expected, "fields");
    struct timespec deadline;
    deadline_in(&deadline, 20000);
    pthread_mutex_lock(&seen_mutex);
    int found = 0;
    while (!found) {
        size_t index;
        json_t *entry;
        json_array_foreach(seen, index, entry) {
            if (strcmp(json_string_value(json_object_get(entry, "view")), view) == 0 &&
                strcmp(json_string_value(json_object_get(entry, "kind")), kind) == 0 &&
                strcmp(json_string_value(json_object_get(entry, "channel")), channel) == 0 &&
                (source == NULL || strcmp(json_string_value(json_object_get(entry, "source")), source) == 0) &&
                (fields == NULL || has_fields(json_object_get(entry, "object"), fields))) {
                json_array_remove(seen, index);
                found = 1;
                break;
            }
        }
        if (!found && pthread_cond_timedwait(&seen_cond, &seen_mutex, &deadline) != 0) break;
    }
    if (!found) {
        char *dump = json_dumps(seen, 0);
        fprintf(stderr, "no %s of %s in %s (%s); seen %s\n", kind, channel, view, source ? source : "any source", dump);
        free(dump);
    }
    pthread_mutex_unlock(&seen_mutex);
    return found;
}

/* "url,url," of a JSON array of channels. */
static void urls_of(json_t *channels, char *out, size_t size) {
    out[0] = '\0';
    size_t index;
    json_t *channel;
    json_array_foreach(channels, index, channel) {
        const char *url = json_string_value(json_object_get(channel, "channel_url"));
        if (url != NULL && strlen(out) + strlen(url) + 2 < size) {
            strcat(out, url);
            strcat(out, ",");
        }
    }
}

typedef struct {
    const char *name;
    const char *listing;
    parley_group_channel_collection *collection;
} view_state;

/* Every view lists what the server lists for the viewer (waiting for the views to catch up). */
/* Waits until every view lists what the server lists; with `load`, pages views that have more
 * meanwhile (after a clear, views reload their first page and are walked again). */
static int listings_match(parley_client *admin, const char *viewer, view_state *views, int count, const char *place, int load) {
    int all = 1;
    for (int v = 0; v < count; v++) {
        char path[1024], truth[4096] = "", mine[4096] = "";
        snprintf(path, sizeof path, "/v3/users/%s/my_group_channels?%s&limit=100", viewer, views[v].listing);
        result_slot slot;
        memset(&slot, 0, sizeof slot);
        CHECK(admin_call(admin, "GET", path, NULL, &slot));
        json_error_t error;
        json_t *answer = json_loads(slot.json ? slot.json : "", 0, &error);
        CHECK(answer != NULL && strcmp(json_string_value(json_object_get(answer, "next")), "") == 0);
        urls_of(json_object_get(answer, "channels"), truth, sizeof truth);
        json_decref(answer);
        free(slot.json);
        for (int waited = 0; waited < 2000; waited++) {
            char *text = NULL;
            CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_channels(views[v].collection, &text));
            json_t *listed = json_loads(text ? text : "[]", 0, &error);
            urls_of(listed, mine, sizeof mine);
            json_decref(listed);
            parley_free(text);
            if (strcmp(mine, truth) == 0) break;
            int has_more = 0;
            if (load) CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_has_more(views[v].collection, &has_more));
            if (has_more) {
                result_slot page;
                memset(&page, 0, sizeof page);  /* slot_init frees the previous result */
                slot_init(&page);
                CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_load_more(views[v].collection, on_result, &page));
                CHECK(wait_slot(&page) && page.code == 0);
                free(page.json);
                continue;
            }
            struct timespec pause = {0, 10000000L};
            nanosleep(&pause, NULL);
        }
        if (strcmp(mine, truth) != 0) {
            fprintf(stderr, "%s: view %s lists %s, the server %s\n", place, views[v].name, mine, truth);
            all = 0;
        }
    }
    return all;
}

int main(void) {
    const char *binary = getenv("PARLEY_SERVER_BIN");
    const char *scenario_path = getenv("PARLEY_SCENARIO");
    if (binary == NULL || access(binary, X_OK) != 0 || scenario_path == NULL) {
        fprintf(stderr, "test_channel_scenario: set PARLEY_SERVER_BIN and PARLEY_SCENARIO\n");
        return 1;
    }
    json_error_t json_error;
    json_t *scenario = json_load_file(scenario_path, 0, &json_error);
    if (scenario == NULL) {
        fprintf(stderr, "%s: %s\n", scenario_path, json_error.text);
        return 1;
    }
    seen = json_array();
    last_deleted = json_object();
    test_server server;
    if (test_server_start(&server, "channel-scenario") != 0) return 1;
    parley_client *admin = server.admin;
    const char *url = server.url, *directory = server.directory;
    char config[1024], path[256];
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    const char *viewer = json_string_value(json_object_get(scenario, "viewer"));
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
    json_array_foreach(json_object_get(scenario, "setup"), index, item) {
        char *step_body = json_dumps(json_object_get(item, "body"), 0);
        CHECK(admin_call(admin, json_string_value(json_object_get(item, "admin")), json_string_value(json_object_get(item, "path")),
                         step_body, &slot));
        free(step_body);
    }

    parley_client *client = NULL;
    snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\", \"reconnect_initial_delay_ms\": 50}", url,
             directory);
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
        parley_group_channel_collection_handler handler = PARLEY_GROUP_CHANNEL_COLLECTION_HANDLER_INIT;
        handler.added = on_added;
        handler.updated = on_updated;
        handler.deleted = on_deleted;
        handler.deleted_channels = on_deleted_channels;
        handler.user_data = (void *)name; /* the scenario outlives the collections */
        char *query = json_dumps(json_object_get(view, "query"), 0);
        views[view_count].name = name;
        views[view_count].listing = json_string_value(json_object_get(view, "listing"));
        CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_create(&views[view_count].collection, client, query, &handler));
        free(query);
        int has_more = 1;
        for (int pages = 0; has_more && pages < 100; pages++) {
            slot_init(&slot);
            CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_load_more(views[view_count].collection, on_result, &slot));
            CHECK(wait_slot(&slot) && slot.code == 0);
            CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_has_more(views[view_count].collection, &has_more));
        }
        view_count++;
    }
    CHECK(listings_match(admin, viewer, views, view_count, "after loading", 0));

    int online = 1;
    json_array_foreach(json_object_get(scenario, "steps"), index, item) {
        char place[32];
        snprintf(place, sizeof place, "step %zu", index);
        json_t *admin_method = json_object_get(item, "admin");
        json_t *operation = json_object_get(item, "op");
        if (admin_method != NULL) {
            json_t *step_body_value = json_object_get(item, "body");
            char *step_body = step_body_value ? json_dumps(step_body_value, 0) : NULL;
            CHECK(admin_call(admin, json_string_value(admin_method), json_string_value(json_object_get(item, "path")), step_body, &slot));
            free(step_body);
        } else if (operation != NULL) {
            char *params = json_dumps(json_object_get(item, "params"), 0);
            slot_init(&slot);
            CHECK_STATUS(PARLEY_OK, parley_client_perform(client, NULL, json_string_value(operation), params, on_result, &slot));
            CHECK(wait_slot(&slot) && slot.code == 0);
            free(params);
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
        if (online) CHECK(listings_match(admin, viewer, views, view_count, place, json_is_true(json_object_get(item, "clear"))));
    }
    for (int v = 0; v < view_count; v++) CHECK_STATUS(PARLEY_OK, parley_group_channel_collection_dispose(views[v].collection));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(client));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(admin));
    free(slot.json);
    json_decref(seen);
    json_decref(last_deleted);
    json_decref(scenario);
    server.admin = NULL;  /* destroyed above */
    test_server_stop(&server);
    return check_report("test_channel_scenario");
}
