/* Minimal assertion helpers for the C tests: print where and why, count failures. */
#ifndef PARLEY_TEST_CHECK_H
#define PARLEY_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parley.h"

static int check_failures = 0;

#define CHECK(condition) do { \
    if (!(condition)) { \
        fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
        check_failures++; \
    } } while (0)

#define CHECK_STATUS(expected, call) do { \
    int check_status_ = (call); \
    if (check_status_ != (expected)) { \
        fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s); last error: %s\n", __FILE__, __LINE__, #call, \
                check_status_, parley_error_name(check_status_), (expected), parley_error_name(expected), \
                parley_last_error_message()); \
        check_failures++; \
    } } while (0)

#define CHECK_ERROR_MENTIONS(text) do { \
    if (strstr(parley_last_error_message(), (text)) == NULL) { \
        fprintf(stderr, "%s:%d: last error \"%s\" does not mention \"%s\"\n", __FILE__, __LINE__, \
                parley_last_error_message(), (text)); \
        check_failures++; \
    } } while (0)

static int check_report(const char *name) {
    if (check_failures == 0) {
        printf("%s: all checks passed\n", name);
        return 0;
    }
    printf("%s: %d check(s) failed\n", name, check_failures);
    return 1;
}

#endif
