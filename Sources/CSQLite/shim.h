#ifndef PARLEY_CSQLITE_SHIM_H
#define PARLEY_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a cast macro that Swift cannot import. */
static inline sqlite3_destructor_type parley_sqlite_transient(void) { return SQLITE_TRANSIENT; }

/* sqlite3_db_config is variadic. Turning the checkpoint-on-close off lets a connection
   that only inspected a suspect file close without rewriting it or deleting its WAL. */
static inline int parley_sqlite_set_checkpoint_on_close(sqlite3 *db, int enabled) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, enabled ? 0 : 1, (int *)0);
}

/* A connection's lookaside: a per-connection arena for small allocations, 120 KiB by
   default; size 0 turns it off. */
static inline int parley_sqlite_set_lookaside(sqlite3 *db, int slot_size, int slot_count) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_LOOKASIDE, (void *)0, slot_size, slot_count);
}

#endif
