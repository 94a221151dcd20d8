/* The cache encrypted at rest through the C ABI against the real parley-server: a client
 * configured with cache_key writes no message text into its cache files, a wrong key or
 * none fails connect with PARLEY_E_CACHE_KEY, parley_client_rekey_cache changes the key
 * (and refuses bad key documents), and the new key opens the file afterwards. */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"

static const char *const key_a = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";
static const char *const key_b = "a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5";

/* A client on `directory`/cache with `key` (NULL: none), its connect's status code. */
static int connect_with_key(const char *url, const char *directory, const char *token, const char *key,
                            parley_client **out) {
    char config[1024];
    if (key != NULL) {
        snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\", \"cache_key\": \"%s\"}", url,
                 directory, key);
    } else {
        snprintf(config, sizeof config, "{\"server_url\": \"%s\", \"cache_dir\": \"%s/cache\"}", url, directory);
    }
    CHECK_STATUS(PARLEY_OK, parley_client_create(out, config));
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    slot_init(&slot);
    CHECK_STATUS(PARLEY_OK, parley_client_connect(*out, NULL, "alice", token, on_result, &slot));
    CHECK(wait_slot(&slot));
    free(slot.json);
    return slot.code;
}

/* Whether any file under `directory` holds `text`. */
static int text_in_files(const char *directory, const char *text) {
    char command[1024];
    snprintf(command, sizeof command, "grep -rqa '%s' '%s'", text, directory);
    return system(command) == 0;
}

int main(void) {
    test_server server;
    if (test_server_start(&server, "cache_key") != 0) return 1;
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    char token[256] = "", cache[600];
    CHECK(admin_call(server.admin, "POST", "/v3/users", "{\"user_id\": \"alice\", \"nickname\": \"Alice\"}", &slot));
    CHECK(admin_call(server.admin, "POST", "/v3/users/alice/token", "{}", &slot));
    CHECK(json_field_text(slot.json, "token", token, sizeof token));
    CHECK(admin_call(server.admin, "POST", "/v3/group_channels", "{\"user_ids\": [\"alice\"], \"channel_url\": \"sealed-room\"}", &slot));
    free(slot.json);
    snprintf(cache, sizeof cache, "%s/cache", server.directory);

    parley_client *client = NULL;
    CHECK(connect_with_key(server.url, server.directory, token, key_a, &client) == 0);
    result_slot sent;
    memset(&sent, 0, sizeof sent);
    slot_init(&sent);
    CHECK_STATUS(PARLEY_OK, parley_client_send_user_message(client, NULL, NULL, "sealed-room", "{\"message\": \"SEALEDMARKER\"}",
                                                            on_result, &sent));
    CHECK(wait_slot(&sent) && sent.code == 0);
    free(sent.json);
    CHECK(!text_in_files(cache, "SEALEDMARKER"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_rekey_cache(client, "{\"cache_key\": \"abc\"}"));
    CHECK_STATUS(PARLEY_E_INVALID_ARGUMENT, parley_client_rekey_cache(client, "{\"cache_kee\": \"abc\"}"));
    CHECK_STATUS(PARLEY_E_INVALID_HANDLE, parley_client_rekey_cache(NULL, NULL));
    char rekey[128];
    snprintf(rekey, sizeof rekey, "{\"cache_key\": \"%s\"}", key_b);
    CHECK_STATUS(PARLEY_OK, parley_client_rekey_cache(client, rekey));
    char *text = NULL;
    CHECK_STATUS(PARLEY_OK, parley_client_cached_messages(client, &text, "sealed-room", -1, 10));
    CHECK(text != NULL && strstr(text, "SEALEDMARKER") != NULL);
    parley_free(text);
    CHECK(!text_in_files(cache, "SEALEDMARKER"));
    parley_client_destroy(client);

    CHECK(connect_with_key(server.url, server.directory, token, key_a, &client) == PARLEY_E_CACHE_KEY);
    CHECK(strcmp(parley_error_name(PARLEY_E_CACHE_KEY), "cache_key") == 0);
    parley_client_destroy(client);
    CHECK(connect_with_key(server.url, server.directory, token, NULL, &client) == PARLEY_E_CACHE_KEY);
    parley_client_destroy(client);
    CHECK(connect_with_key(server.url, server.directory, token, key_b, &client) == 0);
    CHECK_STATUS(PARLEY_OK, parley_client_cached_messages(client, &text, "sealed-room", -1, 10));
    CHECK(text != NULL && strstr(text, "SEALEDMARKER") != NULL);
    parley_free(text);
    /* Removing the key leaves a plain file that a client without a key opens. */
    CHECK_STATUS(PARLEY_OK, parley_client_rekey_cache(client, NULL));
    parley_client_destroy(client);
    CHECK(connect_with_key(server.url, server.directory, token, NULL, &client) == 0);
    parley_client_destroy(client);
    test_server_stop(&server);
    return check_report("test_cache_key");
}
