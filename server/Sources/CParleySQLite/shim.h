#ifndef PARLEY_SERVER_SQLITE_SHIM_H
#define PARLEY_SERVER_SQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a pointer-cast macro that Swift cannot import. */
static inline sqlite3_destructor_type parley_server_sqlite_transient(void) { return SQLITE_TRANSIENT; }

#endif
