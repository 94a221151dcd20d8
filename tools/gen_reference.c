/* gen_reference: writes docs/C-REFERENCE.md from the library's own tables, as librdkafka
 * writes CONFIGURATION.md: the status codes (the PARLEY_E_* constants of
 * include/parley/common.h, named by parley_error_name, classified by
 * parley_error_is_retryable), the connection events and freshness states (named by
 * parley_connection_event_name and parley_freshness_name), the configuration keys
 * (parley_configuration_keys), the operation catalog (parley_operations), the event
 * categories (parley_event_categories) and the collection event sources
 * (parley_collection_sources).
 *
 *   gen_reference ROOT           rewrites ROOT/docs/C-REFERENCE.md
 *   gen_reference --check ROOT   exits 1 when ROOT/docs/C-REFERENCE.md differs (a ctest test)
 *
 * `cmake --build build/cmake --target c_reference` runs the first form on the source tree. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <jansson.h>
#include <parley.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const reference_path = "docs/C-REFERENCE.md";

static void die(const char *what, const char *detail) {
    fprintf(stderr, "gen_reference: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(2);
}

/* Calls one of the table functions (char **out_json) and parses its answer. */
static json_t *table(int (*function)(char **), const char *name) {
    char *text = NULL;
    if (function(&text) != PARLEY_OK) die(name, parley_last_error_message());
    json_error_t error;
    json_t *value = json_loads(text, 0, &error);
    parley_free(text);
    if (!json_is_array(value)) die(name, "did not return a JSON array");
    return value;
}

static const char *text_of(json_t *object, const char *key) {
    const char *text = json_string_value(json_object_get(object, key));
    return text ? text : "";
}

/* A table cell: '|' would end it. */
static void cell(FILE *out, const char *text) {
    for (; *text; text++) {
        if (*text == '|') fputc('\\', out);
        fputc(*text, out);
    }
}

/* A JSON value as code: `false`, `"public"`. */
static void code_value(FILE *out, json_t *value) {
    char *text = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
    fprintf(out, "`");
    cell(out, text ? text : "?");
    fprintf(out, "`");
    free(text);
}

static int compare_strings(const void *left, const void *right) {
    return strcmp(*(const char *const *)left, *(const char *const *)right);
}

/* The keys of a JSON object, sorted (the array is malloc'ed; the strings are the object's). */
static size_t sorted_keys(json_t *object, const char ***out_keys) {
    size_t count = json_object_size(object), index = 0;
    const char **keys = malloc((count ? count : 1) * sizeof *keys);
    if (keys == NULL) die("out of memory", NULL);
    const char *key;
    json_t *value;
    json_object_foreach(object, key, value) keys[index++] = key;
    qsort(keys, count, sizeof *keys, compare_strings);
    *out_keys = keys;
    return count;
}

/* `name`: `value`, ... for every member of an object, in key order. */
static void members(FILE *out, json_t *object) {
    const char **keys;
    size_t count = sorted_keys(object, &keys);
    for (size_t index = 0; index < count; index++) {
        fprintf(out, "%s`%s`: ", index ? ", " : "", keys[index]);
        code_value(out, json_object_get(object, keys[index]));
    }
    free(keys);
}

/* ---- Status codes -------------------------------------------------------------- */

/* Which http_status values (100..599) make an error of `code` retryable, as ranges
 * ("408, 429, 500–599"); "yes" or "no" when the status does not matter. */
static void retryable(FILE *out, int code) {
    parley_error error = {code, "", 0, 0};
    int without_status = parley_error_is_retryable(&error), differs = 0;
    for (int status = 100; status <= 599 && !differs; status++) {
        error.http_status = status;
        differs = parley_error_is_retryable(&error) != without_status;
    }
    if (!differs) {
        fprintf(out, "%s", without_status ? "yes" : "no");
        return;
    }
    fprintf(out, "with `http_status` ");
    const char *separator = "";
    for (int status = 100; status <= 599; status++) {
        error.http_status = status;
        if (!parley_error_is_retryable(&error)) continue;
        int last = status;
        for (error.http_status = status + 1; error.http_status <= 599 && parley_error_is_retryable(&error); error.http_status++) {
            last = error.http_status;
        }
        if (last == status) fprintf(out, "%s%d", separator, status);
        else fprintf(out, "%s%d–%d", separator, status, last);
        separator = ", ";
        status = last;
    }
    if (without_status) fprintf(out, ", or none");
}

/* One line of a header: `#define PARLEY_E_NAME  -1  / * meaning * /`. */
typedef struct named_constant {
    char constant[80];
    int value;
    char meaning[256];
} named_constant;

/* The constants of include/parley/<header> named PARLEY_<prefix>... (and PARLEY_<exact>, when
 * given), checked against the library's name function: each constant's value has the name of
 * the constant's rest after the prefix (after "PARLEY_" for the exact one), lower-cased, and
 * every value the function names (other than "unknown") is one of the constants. */
static size_t named_constants(const char *root, const char *header_name, const char *prefix, const char *exact,
                              const char *(*name_of)(int), const char *function, named_constant *codes, size_t capacity) {
    char path[4096], line[512];
    snprintf(path, sizeof path, "%s/include/parley/%s", root, header_name);
    FILE *header = fopen(path, "r");
    if (header == NULL) die("cannot open", path);
    size_t count = 0;
    while (fgets(line, sizeof line, header) != NULL && count < capacity) {
        named_constant *code = &codes[count];
        char suffix[64];
        if (sscanf(line, "#define PARLEY_%63s %d", suffix, &code->value) != 2) continue;
        int is_exact = exact != NULL && strcmp(suffix, exact) == 0;
        if (!is_exact && strncmp(suffix, prefix, strlen(prefix)) != 0) continue;
        snprintf(code->constant, sizeof code->constant, "PARLEY_%s", suffix);
        const char *open = strstr(line, "/*"), *close = open ? strstr(open, "*/") : NULL;
        if (open == NULL || close == NULL) die("a constant without a comment saying what it means", code->constant);
        for (open += 2; *open == ' '; open++) {}
        while (close > open && close[-1] == ' ') close--;
        snprintf(code->meaning, sizeof code->meaning, "%.*s", (int)(close - open), open);
        char name[64];
        const char *from = is_exact ? suffix : suffix + strlen(prefix);
        size_t length = 0;
        for (; from[length] && length + 1 < sizeof name; length++) name[length] = (char)tolower((unsigned char)from[length]);
        name[length] = 0;
        if (strcmp(name_of(code->value), name) != 0) {
            fprintf(stderr, "gen_reference: %s disagrees with %s about %s\n", function, header_name, code->constant);
            exit(2);
        }
        count++;
    }
    fclose(header);
    for (int value = -1000; value <= 1000; value++) {
        if (strcmp(name_of(value), "unknown") == 0) continue;
        size_t index = 0;
        while (index < count && codes[index].value != value) index++;
        if (index == count) {
            fprintf(stderr, "gen_reference: %s names %d (\"%s\"), which %s does not define\n", function, value,
                    name_of(value), header_name);
            exit(2);
        }
    }
    return count;
}

static void write_status_codes(FILE *out, const char *root) {
    named_constant codes[64];
    size_t count = named_constants(root, "common.h", "E_", "OK", parley_error_name, "parley_error_name", codes, 64);
    fprintf(out, "## Status codes\n\n"
                 "Synchronous calls return one of these; a completion callback gets it as `parley_error.code`\n"
                 "(`include/parley/common.h`). The name is `parley_error_name(code)`. Retryable is\n"
                 "`parley_error_is_retryable` for an error of that code: trying the same call again later may\n"
                 "succeed.\n\n"
                 "| code | constant | name | retryable | meaning |\n"
                 "|---:|---|---|---|---|\n");
    for (size_t index = 0; index < count; index++) {
        fprintf(out, "| %d | `%s` | `%s` | ", codes[index].value, codes[index].constant, parley_error_name(codes[index].value));
        if (codes[index].value == PARLEY_OK) fprintf(out, "—");
        else retryable(out, codes[index].value);
        fprintf(out, " | ");
        cell(out, codes[index].meaning);
        fprintf(out, " |\n");
    }
    fprintf(out, "\n");
}

/* ---- Connection events and freshness states ------------------------------------ */

/* A table of named constants: code, constant, name, meaning. */
static void write_named_table(FILE *out, const named_constant *codes, size_t count, const char *(*name_of)(int)) {
    fprintf(out, "| code | constant | name | meaning |\n"
                 "|---:|---|---|---|\n");
    for (size_t index = 0; index < count; index++) {
        fprintf(out, "| %d | `%s` | `%s` | ", codes[index].value, codes[index].constant, name_of(codes[index].value));
        cell(out, codes[index].meaning);
        fprintf(out, " |\n");
    }
    fprintf(out, "\n");
}

static void write_connection_events(FILE *out, const char *root) {
    named_constant codes[64];
    size_t count = named_constants(root, "session.h", "CONNECTION_", NULL, parley_connection_event_name,
                                   "parley_connection_event_name", codes, 64);
    fprintf(out, "## Connection events\n\n"
                 "The `event` a connection handler receives (`parley_client_set_connection_handler`,\n"
                 "`include/parley/session.h`). The name is `parley_connection_event_name(event)`; any other\n"
                 "value is named `unknown`. docs/C-API.md, \"Connecting and the event stream\", says when each\n"
                 "one comes.\n\n");
    write_named_table(out, codes, count, parley_connection_event_name);
}

static void write_freshness_states(FILE *out, const char *root) {
    named_constant codes[64];
    size_t count = named_constants(root, "group_channel_collection.h", "FRESHNESS_", NULL, parley_freshness_name,
                                   "parley_freshness_name", codes, 64);
    fprintf(out, "## Freshness states\n\n"
                 "Whether what a view shows is live or possibly stale: its `*_freshness` getter and its\n"
                 "handler's `freshness_changed` (`include/parley/group_channel_collection.h`). The name is\n"
                 "`parley_freshness_name(freshness)`; any other value is named `unknown`. docs/C-API.md,\n"
                 "\"Freshness and page origin\", gives the rules.\n\n");
    write_named_table(out, codes, count, parley_freshness_name);
}

/* ---- Configuration ------------------------------------------------------------- */

static void write_configuration(FILE *out) {
    json_t *keys = table(parley_configuration_keys, "parley_configuration_keys");
    fprintf(out, "## Configuration keys\n\n"
                 "The JSON document given to `parley_client_create` (`parley_configuration_keys`). Every key\n"
                 "is optional; unknown keys and values of the wrong type or outside the range are refused\n"
                 "with `PARLEY_E_INVALID_ARGUMENT`, naming the key.\n\n"
                 "| key | type | default | values | meaning |\n"
                 "|---|---|---|---|---|\n");
    size_t index;
    json_t *key;
    json_array_foreach(keys, index, key) {
        fprintf(out, "| `%s` | %s | ", text_of(key, "name"), text_of(key, "type"));
        json_t *default_value = json_object_get(key, "default");
        if (default_value == NULL || json_is_null(default_value)) fprintf(out, "none");
        else code_value(out, default_value);
        fprintf(out, " | ");
        cell(out, text_of(key, "values"));
        fprintf(out, " | ");
        cell(out, text_of(key, "summary"));
        fprintf(out, " |\n");
    }
    fprintf(out, "\n");
    json_decref(keys);
}

/* ---- Operations ---------------------------------------------------------------- */

static void write_operation(FILE *out, json_t *operation) {
    const char *name = text_of(operation, "name");
    fprintf(out, "### `%s`\n\n`%s %s`: ", name, text_of(operation, "method"), text_of(operation, "path"));
    fprintf(out, "%s\n\n", text_of(operation, "summary"));
    json_t *parameters = json_object_get(operation, "parameters");
    if (json_array_size(parameters) == 0) {
        fprintf(out, "No parameters.\n\n");
    } else {
        fprintf(out, "| parameter | type | required | default |\n"
                     "|---|---|---|---|\n");
        size_t index;
        json_t *parameter;
        json_array_foreach(parameters, index, parameter) {
            const char *parameter_name = text_of(parameter, "name");
            fprintf(out, "| `%s` | %s | %s | ", parameter_name, text_of(parameter, "type"),
                    json_is_true(json_object_get(parameter, "required")) ? "yes" : "no");
            json_t *default_value = json_object_get(parameter, "default");
            if (default_value != NULL) code_value(out, default_value);
            else if (strcmp(parameter_name, "user_id") == 0 && strstr(text_of(operation, "path"), "{user_id}") != NULL)
                fprintf(out, "the connected user");
            fprintf(out, " |\n");
        }
        fprintf(out, "\n");
    }
    json_t *fixed = json_object_get(operation, "fixed");
    if (json_object_size(fixed) > 0) {
        fprintf(out, "Always sent: ");
        members(out, fixed);
        fprintf(out, ".\n\n");
    }
    json_t *names = json_object_get(operation, "value_names");
    const char **named;
    size_t count = sorted_keys(names, &named);
    for (size_t at = 0; at < count; at++) {
        json_t *choices = json_object_get(names, named[at]);
        fprintf(out, "`%s` also takes: ", named[at]);
        const char **given;
        size_t choice_count = sorted_keys(choices, &given);
        for (size_t choice = 0; choice < choice_count; choice++) {
            json_t *value = json_object_get(choices, given[choice]);
            fprintf(out, "%s`%s` ", choice ? ", " : "", given[choice]);
            if (json_is_null(value)) fprintf(out, "(left out)");
            else code_value(out, value);
        }
        fprintf(out, ".\n\n");
        free(given);
    }
    free(named);
}

static void write_operations(FILE *out) {
    json_t *catalog = table(parley_operations, "parley_operations");
    fprintf(out, "## Operations\n\n"
                 "`parley_client_perform(client, &id, name, params_json, fn, user_data)` runs one of these as\n"
                 "the connected user and applies its answer to the cache (`parley_operations` is the catalog).\n"
                 "`params_json` holds the wire parameters, each listed below with its JSON type (`string`,\n"
                 "`integer`, `boolean`, `string[]`; `object`: string values, `object<integer>`: integer\n"
                 "values, `object[]`: an array of objects; docs/PROTOCOL.md gives their meanings): the path's\n"
                 "placeholders are taken out of it (a non-empty string or a non-negative integer; `{user_id}`\n"
                 "is the connected user unless given), the rest goes to the query string (GET, DELETE) or the\n"
                 "JSON body (POST, PUT). Required parameters are checked before any request; an optional one\n"
                 "left out is not sent (the server's default applies) unless it has a default here: the\n"
                 "reference SDK's defaults where they differ from the server's. Always sent: the\n"
                 "values that make the operation what it is, whatever the caller gives. A parameter that\n"
                 "\"also takes\" names accepts each of them for the value after it.\n\n"
                 "| operation | request |\n"
                 "|---|---|\n");
    size_t index;
    json_t *operation;
    json_array_foreach(catalog, index, operation) {
        fprintf(out, "| [`%s`](#%s) | `%s %s` |\n", text_of(operation, "name"), text_of(operation, "name"),
                text_of(operation, "method"), text_of(operation, "path"));
    }
    fprintf(out, "\n");
    json_array_foreach(catalog, index, operation) write_operation(out, operation);
    json_decref(catalog);
}

/* ---- Events -------------------------------------------------------------------- */

static void source_constant(char *buffer, size_t size, const char *name) {
    size_t length = (size_t)snprintf(buffer, size, "PARLEY_SOURCE_");
    for (; *name && length + 1 < size; name++) buffer[length++] = (char)toupper((unsigned char)*name);
    buffer[length] = 0;
}

static void write_events(FILE *out) {
    json_t *categories = table(parley_event_categories, "parley_event_categories");
    json_t *sources = table(parley_collection_sources, "parley_collection_sources");
    char constant[128];
    size_t index, other;
    json_t *entry, *source;

    fprintf(out, "## Event categories\n\n"
                 "The `category` the event handler (`parley_client_set_event_handler`) receives\n"
                 "(`parley_event_categories`): from the server's real-time stream, the changelog catch-up\n"
                 "(sync) or this client (local). Payloads: docs/C-API.md, \"Connecting and the event\n"
                 "stream\". A collection reports the changes of a real-time (server) category with the source\n"
                 "of the same name, unless docs/C-API.md, \"Event sources\", names another one for them.\n\n"
                 "| category | from | collection source |\n"
                 "|---|---|---|\n");
    json_array_foreach(categories, index, entry) {
        const char *name = text_of(entry, "name");
        const char *from = text_of(entry, "source");
        fprintf(out, "| `%s` | %s | ", name, from);
        json_array_foreach(sources, other, source) {
            if (strcmp(from, "server") != 0 || strcmp(text_of(source, "name"), name) != 0) continue;
            source_constant(constant, sizeof constant, name);
            fprintf(out, "`%s`", constant);
        }
        fprintf(out, " |\n");
    }

    fprintf(out, "\n## Collection event sources\n\n"
                 "Why a collection event happened: `source` and `source_name` of its context\n"
                 "(`parley_collection_sources`; the constants are in `include/parley/group_channel_collection.h`).\n"
                 "Codes are stable: new sources are only appended. What each one reports: docs/C-API.md,\n"
                 "\"Event sources\".\n\n"
                 "| code | constant | name |\n"
                 "|---:|---|---|\n");
    json_array_foreach(sources, index, source) {
        source_constant(constant, sizeof constant, text_of(source, "name"));
        fprintf(out, "| %lld | `%s` | `%s` |\n", (long long)json_integer_value(json_object_get(source, "code")), constant,
                text_of(source, "name"));
    }
    json_decref(categories);
    json_decref(sources);
}

/* ---- The document -------------------------------------------------------------- */

static char *generate(const char *root, size_t *out_size) {
    char *document = NULL;
    FILE *out = open_memstream(&document, out_size);
    if (out == NULL) die("out of memory", NULL);
    fprintf(out, "# The C reference\n\n"
                 "<!-- Generated by tools/gen_reference.c from the library's own tables: do not edit.\n"
                 "     Regenerate: cmake --build build/cmake --target c_reference (configured with\n"
                 "     -DPARLEY_BUILD_TESTS=ON); the ctest test c_reference_current fails while it differs. -->\n\n"
                 "The tables of the C interface (version %s), as the library itself lists them. docs/C-API.md\n"
                 "explains the conventions and the behaviour; the headers under `include/parley/` document every function.\n\n"
                 "- [Status codes](#status-codes)\n"
                 "- [Connection events](#connection-events)\n"
                 "- [Freshness states](#freshness-states)\n"
                 "- [Configuration keys](#configuration-keys)\n"
                 "- [Operations](#operations)\n"
                 "- [Event categories](#event-categories)\n"
                 "- [Collection event sources](#collection-event-sources)\n\n",
            parley_version());
    write_status_codes(out, root);
    write_connection_events(out, root);
    write_freshness_states(out, root);
    write_configuration(out);
    write_operations(out);
    write_events(out);
    fclose(out);
    return document;
}

/* Reports the first line where the file and the generated text part. */
static int check(const char *path, const char *expected, size_t size) {
    FILE *file = fopen(path, "r");
    char *actual = NULL;
    size_t actual_size = 0;
    if (file != NULL) {
        FILE *copy = open_memstream(&actual, &actual_size);
        int byte;
        while ((byte = fgetc(file)) != EOF) fputc(byte, copy);
        fclose(copy);
        fclose(file);
    }
    if (actual != NULL && actual_size == size && memcmp(actual, expected, size) == 0) {
        free(actual);
        printf("%s is current\n", path);
        return 0;
    }
    size_t line = 1, at = 0;
    while (actual != NULL && at < size && at < actual_size && actual[at] == expected[at]) {
        if (expected[at] == '\n') line++;
        at++;
    }
    fprintf(stderr, "%s differs from the library's tables (first at line %zu); regenerate it:\n"
                    "  cmake --build build/cmake --target c_reference\n", path, line);
    free(actual);
    return 1;
}

int main(int argc, char **argv) {
    int checking = argc == 3 && strcmp(argv[1], "--check") == 0;
    if (argc != 2 + checking) {
        fprintf(stderr, "usage: %s [--check] SOURCE_ROOT\n", argv[0]);
        return 2;
    }
    const char *root = argv[1 + checking];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, reference_path);
    size_t size = 0;
    char *document = generate(root, &size);
    int status = 0;
    if (checking) {
        status = check(path, document, size);
    } else {
        FILE *file = fopen(path, "w");
        if (file == NULL || fwrite(document, 1, size, file) != size || fclose(file) != 0) die("cannot write", path);
        printf("wrote %s\n", path);
    }
    free(document);
    return status;
}
