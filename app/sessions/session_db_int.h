/*
** session_db_int.h: what the session store's three files share (not part
** of its API): the handle, and the few SQLite helpers every write goes
** through so that each one is a transaction with a one-line error.
**
**   session_db.c         the connection, the schema and its migrations, sessions
**   session_messages.c   messages (the fork tree) and full-text search
**   session_snapshots.c  KV snapshots
*/
#ifndef RAD_SESSION_DB_INT_H
#define RAD_SESSION_DB_INT_H

#include "session_db.h"

#include <sqlite3.h>

struct RadSessionDb {
    sqlite3 *db;
    char *path;
    int64_t snapshot_budget; /* compressed bytes; 0 = no limit */
};

int64_t rad_sdb_now_ms(void);

/* Set the error "PATH: doing: sqlite's message" and return its RAD_E_* code. */
int rad_sdb_fail(RadSessionDb *db, const char *doing);
/* Prepare sql into *st (NULL on failure, with the error set). */
int rad_sdb_prep(RadSessionDb *db, const char *sql, sqlite3_stmt **st, const char *doing);
/* Step a statement that returns no rows (or one to ignore), then finalize it. */
int rad_sdb_run(RadSessionDb *db, sqlite3_stmt *st, const char *doing);
int rad_sdb_exec(RadSessionDb *db, const char *sql, const char *doing);

/* BEGIN IMMEDIATE: the write lock now, waiting out other processes. */
int rad_sdb_begin(RadSessionDb *db, const char *doing);
/* COMMIT when rc is RAD_OK, else ROLLBACK; the first error's message stays.
** Returns the outcome. */
int rad_sdb_end(RadSessionDb *db, int rc, const char *doing);

/* Bind s, or SQL NULL when s is NULL. */
void rad_sdb_bind_text(sqlite3_stmt *st, int i, const char *s);
/* A column as a fresh string; SQL NULL gives NULL when keep_null, else "". */
char *rad_sdb_col_str(sqlite3_stmt *st, int i, int keep_null);
/* 1 when text is NULL or parses as a JSON array (want_array) or object. */
int rad_sdb_valid_json(const char *text, int want_array);

#endif /* RAD_SESSION_DB_INT_H */
