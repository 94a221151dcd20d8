#ifndef PARLEY_CJANSSON_SHIM_H
#define PARLEY_CJANSSON_SHIM_H
#include <jansson.h>

/* jansson's type macros are not importable into Swift. */
static inline json_type parley_json_typeof(const json_t *v) { return v->type; }

#endif
