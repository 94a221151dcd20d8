/* The programs docs/C-API.md shows are files of examples/c, and they work against the real
 * server (PARLEY_SERVER_BIN):
 *   - the block that follows the line `<!-- FILE, whole: Tests/C/test_doc_examples.c checks it -->`
 *     in docs/C-API.md is FILE, whole;
 *   - each program, given the server's URL and admin token, prints the users the server
 *     lists and exits 0; given a wrong token, it reports the refusal by name and exits 1.
 *
 *   test_doc_examples SOURCE_ROOT FILE PROGRAM [FILE PROGRAM ...]
 *     FILE is relative to SOURCE_ROOT (examples/c/minimal_thread.c), PROGRAM is it built. */
#define _POSIX_C_SOURCE 200809L
#include "server_support.h"
#include <fcntl.h>

/* A whole file as a malloc'ed string (NULL if it cannot be read). */
static char *read_file(const char *path) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) return NULL;
    char *text = NULL;
    size_t size = 0;
    FILE *copy = open_memstream(&text, &size);
    int byte;
    while ((byte = fgetc(file)) != EOF) fputc(byte, copy);
    fclose(copy);
    fclose(file);
    return text;
}

/* The fenced block after the marker line of `name` in `document` (malloc'ed, its lines each
 * ending in a newline, the fences left out), or NULL when there is none. */
static char *block_after_marker(const char *document, const char *name) {
    char marker[512];
    snprintf(marker, sizeof marker, "\n<!-- %s, whole: Tests/C/test_doc_examples.c checks it -->\n```c\n", name);
    const char *start = strstr(document, marker);
    if (start == NULL) return NULL;
    start += strlen(marker);
    const char *end = strstr(start, "\n```\n");
    if (end == NULL) return NULL;
    return strndup(start, (size_t)(end - start) + 1);
}

/* The first line where `shown` and `file` differ (1-based), 0 when they are equal. */
static int first_difference(const char *shown, const char *file) {
    int line = 1;
    for (; *shown != '\0' && *shown == *file; shown++, file++) {
        if (*shown == '\n') line++;
    }
    return *shown == *file ? 0 : line;
}

static void check_shown_whole(const char *document, const char *root, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, name);
    char *file = read_file(path), *shown = block_after_marker(document, name);
    if (file == NULL || shown == NULL) {
        fprintf(stderr, "%s: %s\n", name, file == NULL ? "cannot read the file" : "docs/C-API.md shows no block marked with it");
        check_failures++;
    } else {
        int line = first_difference(shown, file);
        if (line != 0) fprintf(stderr, "docs/C-API.md's copy of %s differs from the file at its line %d\n", name, line);
        CHECK(line == 0);
    }
    free(file);
    free(shown);
}

/* Removes the Swift runtime's own notes from a program's standard error (with SWIFT_BACKTRACE
 * set, as scripts/test.sh sets it, each process may say it found no backtracer): they are not
 * the program's output. */
static void drop_runtime_notes(char *text) {
    char *read = text, *write = text;
    while (*read) {
        char *end = strchr(read, '\n');
        size_t length = end ? (size_t)(end - read) + 1 : strlen(read);
        if (strncmp(read, "swift runtime: ", 15) != 0) {
            memmove(write, read, length);
            write += length;
        }
        read += length;
    }
    *write = '\0';
}

/* Runs program with the two arguments, its output in directory/out and directory/err (read
 * back into *out and *err, malloc'ed); its exit status, -1 if it did not exit. */
static int run(const char *program, const char *url, const char *token, const char *directory, char **out, char **err) {
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/out", directory);
    snprintf(err_path, sizeof err_path, "%s/err", directory);
    pid_t pid = fork();
    if (pid == 0) {
        int out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600), err_fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out_fd < 0 || err_fd < 0) _exit(126);
        dup2(out_fd, STDOUT_FILENO);
        dup2(err_fd, STDERR_FILENO);
        execl(program, program, url, token, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    *out = read_file(out_path);
    *err = read_file(err_path);
    if (*out == NULL) *out = strdup("");
    if (*err == NULL) *err = strdup("");
    drop_runtime_notes(*err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void check_program(const char *name, const char *program, const test_server *server) {
    char *out = NULL, *err = NULL;
    int status = run(program, server->url, "c-test-token", server->directory, &out, &err);
    if (status != 0 || strstr(out, "\"user_id\":\"doc_reader\"") == NULL) {
        fprintf(stderr, "%s with the admin token: exit status %d\nstdout: %s\nstderr: %s\n", name, status, out, err);
    }
    CHECK(status == 0);
    CHECK(strstr(out, "\"users\":[") != NULL && strstr(out, "\"user_id\":\"doc_reader\"") != NULL);
    CHECK(err[0] == '\0');
    free(out);
    free(err);

    status = run(program, server->url, "not-the-token", server->directory, &out, &err);
    if (status != 1 || strstr(err, "(unauthorized, HTTP 401)") == NULL) {
        fprintf(stderr, "%s with a wrong token: exit status %d\nstdout: %s\nstderr: %s\n", name, status, out, err);
    }
    CHECK(status == 1);
    CHECK(out[0] == '\0');
    CHECK(strncmp(err, "failed: ", 8) == 0 && strstr(err, "(unauthorized, HTTP 401)\n") != NULL);
    free(out);
    free(err);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc % 2 != 0) {
        fprintf(stderr, "usage: %s SOURCE_ROOT FILE PROGRAM [FILE PROGRAM ...]\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/C-API.md", argv[1]);
    char *document = read_file(path);
    if (document == NULL) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    for (int index = 2; index < argc; index += 2) check_shown_whole(document, argv[1], argv[index]);
    free(document);

    test_server server;
    if (test_server_start(&server, "doc-examples") != 0) return 1;
    result_slot slot;
    memset(&slot, 0, sizeof slot);
    char created[64] = "";
    CHECK(admin_call(server.admin, "POST", "/v3/users", "{\"user_id\": \"doc_reader\", \"nickname\": \"Reader\"}", &slot));
    CHECK(json_field_text(slot.json, "user_id", created, sizeof created) && strcmp(created, "doc_reader") == 0);
    for (int index = 2; index < argc; index += 2) check_program(argv[index], argv[index + 1], &server);
    free(slot.json);
    test_server_stop(&server);
    return check_report("test_doc_examples");
}
