// libpq, the PostgreSQL client library (Storage/Postgres/PQConnection.swift).
#include <postgresql/libpq-fe.h>

// The error fields read from a failed result: their C names are character-literal macros.
static const int parley_pq_diag_sqlstate = PG_DIAG_SQLSTATE;
static const int parley_pq_diag_message = PG_DIAG_MESSAGE_PRIMARY;
static const int parley_pq_diag_detail = PG_DIAG_MESSAGE_DETAIL;
