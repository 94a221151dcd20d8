/* The shared operations scenario (Tests/scenarios/operations.json) through the C ABI,
 * against the real parley-server. The Swift and Python suites run the same file; its
 * format is described in the file. JSON handling here uses jansson (the test's own). */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"
#include <ctype.h>
#include <jansson.h>

#define MAX_USERS 16

typedef struct {
    const char *name;
    parley_client *client;
} user_client;

static user_client users[MAX_USERS];
static int user_count = 0;
static json_t *saved; /* name -> value */

/* Runs a client call of the shape (client, out_operation_id, ..., fn, user_data) through
 * `slot`; returns the answer (a new reference) or NULL with slot->code set. */
static json_t *finish(result_slot *slot, int status) {
    if (status != PARLEY_OK) {
        fprintf(stderr, "call refused: %s\n", parley_last_error_message());
        slot->code = status;
        return NULL;
    }
    if (!wait_slot(slot)) {
        fprintf(stderr, "no completion within the timeout\n");
        slot->code = PARLEY_E_TIMEOUT;
        return NULL;
    }
    if (slot->code != 0) return NULL;
    json_error_t error;
    json_t *answer = json_loads(slot->json, JSON_DECODE_ANY, &error);
    if (answer == NULL) fprintf(stderr, "answer is not JSON: %s\n", error.text);
    return answer;
}

/* A copy of `value` with "$name" replaced by saved values (see the scenario file). */
static json_t *substitute(json_t *value) {
    if (json_is_string(value)) {
        const char *text = json_string_value(value);
        if (text[0] == '$') {
            json_t *whole = json_object_get(saved, text + 1);
            if (whole != NULL) return json_incref(whole);
        }
        char result[2048];
        size_t used = 0;
        for (const char *p = text; *p != '\0' && used + 1 < sizeof result;) {
            if (*p == '$') {
                char name[64];
                size_t length = 0;
                const char *q = p + 1;
                while ((isalnum((unsigned char)*q) || *q == '_') && length + 1 < sizeof name) name[length++] = *q++;
                name[length] = '\0';
                json_t *found = json_object_get(saved, name);
                if (found != NULL) {
                    char piece[256];
                    if (json_is_string(found)) snprintf(piece, sizeof piece, "%s", json_string_value(found));
                    else snprintf(piece, sizeof piece, "%" JSON_INTEGER_FORMAT, json_integer_value(found));
                    used += (size_t)snprintf(result + used, sizeof result - used, "%s", piece);
                    if (used >= sizeof result) used = sizeof result - 1;
                    p = q;
                    continue;
                }
            }
            result[used++] = *p++;
        }
        result[used] = '\0';
        return json_string(result);
    }
    if (json_is_array(value)) {
        json_t *copy = json_array();
        size_t index;
        json_t *item;
        json_array_foreach(value, index, item) json_array_append_new(copy, substitute(item));
        return copy;
    }
    if (json_is_object(value)) {
        json_t *copy = json_object();
        const char *key;
        json_t *item;
        json_object_foreach(value, key, item) json_object_set_new(copy, key, substitute(item));
        return copy;
    }
    return json_incref(value);
}

/* The value at a dotted path ("messages.0.message_id"; "" = the value itself); borrowed. */
static json_t *lookup(json_t *value, const char *path) {
    char buffer[256];
    snprintf(buffer, sizeof buffer, "%s", path);
    char *state = NULL;
    for (char *part = strtok_r(buffer, ".", &state); part != NULL && value != NULL; part = strtok_r(NULL, ".", &state)) {
        if (json_is_array(value) && isdigit((unsigned char)part[0])) value = json_array_get(value, (size_t)atol(part));
        else value = json_object_get(value, part);
    }
    return value;
}

static parley_client *client_for(const char *name) {
    for (int i = 0; i < user_count; i++) {
        if (strcmp(users[i].name, name) == 0) return users[i].client;
    }
    return NULL;
}

int main(void) {
    const char *binary = getenv("PARLEY_SERVER_BIN");
    const char *scenario_path = getenv("PARLEY_SCENARIO");
    if (binary == NULL || scenario_path == NULL) {
        fprintf(stderr, "test_scenario: set PARLEY_SERVER_BIN and PARLEY_SCENARIO\n");
        return 1;
    }
    json_error_t json_error;
    json_t *scenario = json_load_file(scenario_path, 0, &json_error);
    if (scenario == NULL) {
        fprintf(stderr, "%s:%d: %s\n", scenario_path, json_error.line, json_error.text);
        return 1;
    }
    test_server server;
    if (test_server_start(&server, "scenario") != 0) return 1;
    parley_client *admin = server.admin;
    const char *url = server.url;
    char config[1024], path[512];
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    saved = json_object();

    size_t index;
    json_t *item;
    json_array_foreach(json_object_get(scenario, "users"), index, item) {
        const char *name = json_string_value(item);
        char body[256], token[256] = "";
        snprintf(body, sizeof body, "{\"user_id\": \"%s\", \"nickname\": \"%s\"}", name, name);
        CHECK(admin_call(admin, "POST", "/v3/users", body, &slot));
        snprintf(path, sizeof path, "/v3/users/%s/token", name);
        CHECK(admin_call(admin, "POST", path, "{}", &slot));
        CHECK(json_field_text(slot.json, "token", token, sizeof token));
        snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_mode\": \"memory\"}", url);
        users[user_count].name = name;
        CHECK_STATUS(PARLEY_OK, parley_client_create(&users[user_count].client, config));
        slot_init(&slot);
        json_t *me = finish(&slot, parley_client_connect(users[user_count].client, NULL, name, token, on_result, &slot));
        CHECK(me != NULL);
        json_decref(me);
        user_count++;
    }

    json_t *exercised = json_object();
    json_t *steps = json_object_get(scenario, "steps");
    json_array_foreach(steps, index, item) {
        json_t *step = item;
        char *step_text = json_dumps(step, JSON_COMPACT);
        int failures_before = check_failures;
        json_t *answer = NULL;
        slot_init(&slot);
        if (json_object_get(step, "admin") != NULL) {
            json_t *target = substitute(json_object_get(step, "path"));
            json_t *body = json_object_get(step, "body") ? substitute(json_object_get(step, "body")) : NULL;
            char *body_text = body ? json_dumps(body, JSON_COMPACT) : NULL;
            answer = finish(&slot, parley_client_request(admin, NULL, json_string_value(json_object_get(step, "admin")),
                                                         json_string_value(target), body_text, on_result, &slot));
            CHECK(answer != NULL);
            free(body_text);
            json_decref(body);
            json_decref(target);
        } else {
            const char *operation = json_string_value(json_object_get(step, "op"));
            json_object_set_new(exercised, operation, json_true());
            parley_client *client = client_for(json_string_value(json_object_get(step, "as")));
            json_t *params = json_object_get(step, "params") ? substitute(json_object_get(step, "params")) : json_object();
            char *params_text = json_dumps(params, JSON_COMPACT);
            answer = finish(&slot, parley_client_perform(client, NULL, operation, params_text, on_result, &slot));
            free(params_text);
            json_decref(params);
            json_t *expected_error = json_object_get(step, "error");
            if (expected_error != NULL) {
                CHECK(answer == NULL && strcmp(parley_error_name(slot.code), json_string_value(expected_error)) == 0);
                json_t *server_code = json_object_get(step, "server_code");
                if (server_code != NULL) CHECK(slot.server_code == json_integer_value(server_code));
                json_decref(answer);
                answer = NULL;
                goto next_step;
            }
            CHECK(answer != NULL);
        }
        if (answer != NULL) {
            const char *key;
            json_t *value;
            json_object_foreach(json_object_get(step, "save"), key, value) {
                json_t *found = lookup(answer, json_string_value(value));
                if (found != NULL) json_object_set(saved, key, found);
            }
            json_object_foreach(json_object_get(step, "expect"), key, value) {
                json_t *wanted = substitute(value);
                CHECK(json_equal(lookup(answer, key), wanted));
                json_decref(wanted);
            }
            json_object_foreach(json_object_get(step, "expect_count"), key, value) {
                json_t *found = lookup(answer, key);
                size_t length = json_is_array(found) ? json_array_size(found) : json_object_size(found);
                CHECK((json_int_t)length == json_integer_value(value));
            }
        }
    next_step:
        if (check_failures != failures_before) fprintf(stderr, "  at step %zu: %s\n  answer: %s\n", index, step_text, slot.json ? slot.json : "");
        free(step_text);
        json_decref(answer);
    }

    /* Every catalog operation is in the scenario. */
    char *catalog_text = NULL;
    CHECK_STATUS(PARLEY_OK, parley_operations(&catalog_text));
    json_t *catalog = json_loads(catalog_text, 0, &json_error);
    parley_free(catalog_text);
    json_array_foreach(catalog, index, item) {
        const char *name = json_string_value(json_object_get(item, "name"));
        if (json_object_get(exercised, name) == NULL) {
            fprintf(stderr, "operation not covered by the scenario: %s\n", name);
            check_failures++;
        }
    }
    json_decref(catalog);

    for (int i = 0; i < user_count; i++) CHECK_STATUS(PARLEY_OK, parley_client_destroy(users[i].client));
    CHECK_STATUS(PARLEY_OK, parley_client_destroy(admin));
    free(slot.json);
    json_decref(exercised);
    json_decref(saved);
    json_decref(scenario);
    server.admin = NULL;  /* destroyed above */
    test_server_stop(&server);
    return check_report("test_scenario");
}
