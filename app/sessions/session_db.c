/*
** session_db.c: the session store's connection, schema and sessions.
**
** The contract is in session_db.h and the schema in radiance-sessions(5);
** messages are in session_messages.c, KV snapshots in session_snapshots.c.
** How the file stays whole: WAL with synchronous=NORMAL (a committed write
** survives a killed process; only a power cut may lose the last ones), and
** every write is one BEGIN IMMEDIATE ... COMMIT, so a process killed
** between the two leaves nothing half-done.  BEGIN IMMEDIATE takes the write
** lock up front: a second radiance process waits for it (busy timeout)
** instead of failing part-way when its read turns into a write.
**
** The schema is versioned per component in `schema_versions` (the models
** table of model_store.c shares the file and has its own rules).  Opening
** applies the migrations from the stored version up, inside one
** transaction; a file from a newer build is refused rather than guessed at.
*/
#include "session_db_int.h"

#include "../models/hf_cache.h"
#include "../models/safe_fs.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ================================================================ helpers */

int64_t rad_sdb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int code_for(int sqlite_rc)
{
    switch (sqlite_rc & 0xff) {
    case SQLITE_NOMEM:
        return RAD_E_NOMEM;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return RAD_E_FORMAT;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
        return RAD_E_ARG;
    }
    return RAD_E_IO;
}

/* "PATH: doing: sqlite's message"; returns the RAD_E_* code for it. */
int rad_sdb_fail(RadSessionDb *db, const char *doing)
{
    int src = sqlite3_extended_errcode(db->db);
    return rad_error_set(code_for(src), "%s: %s: %s", db->path, doing, sqlite3_errmsg(db->db));
}

int rad_sdb_prep(RadSessionDb *db, const char *sql, sqlite3_stmt **st, const char *doing)
{
    if (sqlite3_prepare_v2(db->db, sql, -1, st, NULL) != SQLITE_OK) {
        *st = NULL;
        return rad_sdb_fail(db, doing);
    }
    return RAD_OK;
}

/* Run a prepared statement that returns no rows, then finalize it. */
int rad_sdb_run(RadSessionDb *db, sqlite3_stmt *st, const char *doing)
{
    int src = sqlite3_step(st);
    int rc = src == SQLITE_DONE || src == SQLITE_ROW ? RAD_OK : rad_sdb_fail(db, doing);
    sqlite3_finalize(st);
    return rc;
}

int rad_sdb_exec(RadSessionDb *db, const char *sql, const char *doing)
{
    return sqlite3_exec(db->db, sql, NULL, NULL, NULL) == SQLITE_OK ? RAD_OK : rad_sdb_fail(db, doing);
}

int rad_sdb_begin(RadSessionDb *db, const char *doing)
{
    return rad_sdb_exec(db, "BEGIN IMMEDIATE", doing);
}

/* Commit when rc is RAD_OK, else roll back; the first error's message stays. */
int rad_sdb_end(RadSessionDb *db, int rc, const char *doing)
{
    if (rc == RAD_OK) {
        if (sqlite3_exec(db->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) return RAD_OK;
        rc = rad_sdb_fail(db, doing);
    }
    if (!sqlite3_get_autocommit(db->db)) sqlite3_exec(db->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

void rad_sdb_bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* A column as a fresh string; NULL for SQL NULL when keep_null, else "". */
char *rad_sdb_col_str(sqlite3_stmt *st, int i, int keep_null)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    if (!t && keep_null) return NULL;
    return strdup(t ? (const char *)t : "");
}

int rad_sdb_valid_json(const char *text, int want_array)
{
    if (!text) return 1;
    json_error_t err;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &err);
    int ok = j && (want_array ? json_is_array(j) : json_is_object(j));
    json_decref(j);
    return ok;
}

/* ================================================================ opening */

int rad_data_dir(const char *what, char **out)
{
    *out = NULL;
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') /* the XDG specification: a relative path is ignored */
        n = asprintf(out, "%s/radiance", xdg);
    else if (home && *home)
        n = asprintf(out, "%s/.local/share/radiance", home);
    else
        return rad_error_set(RAD_E_NOTFOUND, "cannot place the %s: set XDG_DATA_HOME or HOME", what);
    if (n < 0) {
        *out = NULL;
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    return RAD_OK;
}

int rad_sdb_default_path(char **out)
{
    char *dir;
    int rc = rad_data_dir("session database", &dir);
    if (rc) {
        *out = NULL;
        return rc;
    }
    int n = asprintf(out, "%s/radiance.db", dir);
    free(dir);
    if (n < 0) {
        *out = NULL;
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    return RAD_OK;
}

/* Schema steps: migrations[v] takes the sessions component from version v to
** v + 1.  Append only; never edit a step that has shipped. */
static const char *const migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE sessions ("
    " id TEXT PRIMARY KEY,"
    " title TEXT NOT NULL DEFAULT '',"
    " created_ms INTEGER NOT NULL,"
    " updated_ms INTEGER NOT NULL,"
    " model_id TEXT NOT NULL DEFAULT '',"
    " model_name TEXT NOT NULL DEFAULT '',"
    " system_prompt TEXT,"
    " sampler TEXT,"
    " leaf_id INTEGER REFERENCES messages(id) ON DELETE SET NULL);"
    "CREATE INDEX sessions_updated ON sessions(updated_ms);"
    "CREATE INDEX sessions_leaf ON sessions(leaf_id);"
    "CREATE TABLE messages ("
    " id INTEGER PRIMARY KEY,"
    " session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,"
    " parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,"
    " role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),"
    " content TEXT NOT NULL,"
    " reasoning TEXT,"
    " tool_calls TEXT,"
    " n_tokens INTEGER NOT NULL DEFAULT 0,"
    " prompt_tokens INTEGER NOT NULL DEFAULT 0,"
    " prompt_evaluated INTEGER NOT NULL DEFAULT 0,"
    " completion_tokens INTEGER NOT NULL DEFAULT 0,"
    " prefill_ms REAL NOT NULL DEFAULT 0,"
    " ttft_ms REAL NOT NULL DEFAULT 0,"
    " decode_ms REAL NOT NULL DEFAULT 0,"
    " finish TEXT,"
    " sampler TEXT,"
    " model_id TEXT,"
    " model_name TEXT,"
    " created_ms INTEGER NOT NULL);"
    "CREATE INDEX messages_session ON messages(session_id, id);"
    "CREATE INDEX messages_parent ON messages(parent_id);"
    "CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id');"
    "CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN"
    " INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END;"
    "CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN"
    " INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content); END;"
    "CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN"
    " INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);"
    " INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END;"
    "CREATE TABLE snapshots ("
    " id INTEGER PRIMARY KEY,"
    " model_id TEXT NOT NULL,"
    " prefix_sha256 TEXT NOT NULL,"
    " n_tokens INTEGER NOT NULL,"
    " tokens BLOB NOT NULL,"
    " data BLOB NOT NULL,"
    " raw_bytes INTEGER NOT NULL,"
    " stored_bytes INTEGER NOT NULL,"
    " session_id TEXT REFERENCES sessions(id) ON DELETE CASCADE,"
    " created_ms INTEGER NOT NULL,"
    " last_used_ms INTEGER NOT NULL,"
    " UNIQUE (model_id, prefix_sha256));"
    "CREATE INDEX snapshots_lookup ON snapshots(model_id, n_tokens);"
    "CREATE INDEX snapshots_session ON snapshots(session_id);"
    "CREATE INDEX snapshots_lru ON snapshots(last_used_ms);",
    /* 1 -> 2: `run` is logged too; a session says which command made it */
    "ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat' CHECK (kind IN ('chat', 'run'));"
    "CREATE INDEX sessions_kind ON sessions(kind, updated_ms);",
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))
_Static_assert(N_MIGRATIONS == RAD_SESSION_SCHEMA_VERSION, "one migration per schema version");

/* The stored version of the sessions component (0: none yet), or < 0 on error. */
static int stored_version(RadSessionDb *db, int *version)
{
    *version = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->db, "SELECT version FROM schema_versions WHERE component = 'sessions'", -1,
                           &st, NULL) != SQLITE_OK)
        return RAD_OK; /* no table yet */
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW) *version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return src == SQLITE_ROW || src == SQLITE_DONE ? RAD_OK : rad_sdb_fail(db, "reading the schema version");
}

static int migrate(RadSessionDb *db)
{
    int version, rc = stored_version(db, &version);
    if (rc) return rc;
    if (version == RAD_SESSION_SCHEMA_VERSION) return RAD_OK; /* the common case: no write lock taken */
    rc = rad_sdb_begin(db, "upgrading the schema");
    if (rc) return rc;
    rc = rad_sdb_exec(
        db,
        "CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
        "upgrading the schema");
    if (!rc) rc = stored_version(db, &version); /* another process may have migrated meanwhile */
    if (!rc && version > RAD_SESSION_SCHEMA_VERSION)
        rc = rad_error_set(RAD_E_UNSUPPORTED,
                           "%s: the sessions schema is version %d, newer than this radiance knows (%d); "
                           "use a newer radiance",
                           db->path, version, RAD_SESSION_SCHEMA_VERSION);
    for (int v = version; !rc && v < RAD_SESSION_SCHEMA_VERSION; v++) {
        char doing[64];
        snprintf(doing, sizeof doing, "upgrading the schema to version %d", v + 1);
        rc = rad_sdb_exec(db, migrations[v], doing);
    }
    if (!rc && version < RAD_SESSION_SCHEMA_VERSION) {
        sqlite3_stmt *st;
        rc = rad_sdb_prep(
            db, "INSERT OR REPLACE INTO schema_versions (component, version) VALUES ('sessions', ?1)", &st,
            "upgrading the schema");
        if (!rc) {
            sqlite3_bind_int(st, 1, RAD_SESSION_SCHEMA_VERSION);
            rc = rad_sdb_run(db, st, "upgrading the schema");
        }
    }
    return rad_sdb_end(db, rc, "upgrading the schema");
}

/*
** Switching a database to WAL needs the exclusive lock, and SQLite does not
** always call the busy handler for it: two processes creating the same new
** file at once can see SQLITE_BUSY at once (one holds a shared lock and wants
** to upgrade while the other does the same, and waiting could deadlock).  So
** the switch is retried here for as long as the busy timeout would wait.  A
** database already in WAL (the mode is stored in the file) needs no lock.
*/
static int switch_to_wal(RadSessionDb *db)
{
    for (int attempt = 0;; attempt++) {
        sqlite3_stmt *st;
        int rc = rad_sdb_prep(db, "PRAGMA journal_mode=WAL", &st, "switching to WAL");
        if (rc) return rc;
        int src = sqlite3_step(st);
        const unsigned char *mode = src == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
        if (mode && strcmp((const char *)mode, "wal") == 0) {
            sqlite3_finalize(st);
            return RAD_OK;
        }
        if (src == SQLITE_ROW) {
            rc = rad_error_set(RAD_E_IO, "%s: cannot switch to WAL (journal mode stays %s)", db->path,
                               mode ? (const char *)mode : "?");
            sqlite3_finalize(st);
            return rc;
        }
        int busy = (src & 0xff) == SQLITE_BUSY || (src & 0xff) == SQLITE_LOCKED;
        if (!busy || attempt >= 1000) {
            rc = rad_sdb_fail(db, "switching to WAL");
            sqlite3_finalize(st);
            return rc;
        }
        sqlite3_finalize(st);
        sqlite3_sleep(5);
    }
}

int rad_sdb_open(const char *path, RadSessionDb **out)
{
    *out = NULL;
    RadSessionDb *db = calloc(1, sizeof *db);
    if (!db) return rad_error_set(RAD_E_NOMEM, "out of memory");
    db->snapshot_budget = RAD_SNAPSHOT_BUDGET_DEFAULT;
    int rc = path ? ((db->path = strdup(path)) ? RAD_OK : rad_error_set(RAD_E_NOMEM, "out of memory"))
                  : rad_sdb_default_path(&db->path);
    if (rc) goto fail;
    char *slash = strrchr(db->path, '/');
    if (slash && slash != db->path) {
        *slash = 0;
        rc = rad_hf_mkdirs(db->path);
        *slash = '/';
        if (rc) goto fail;
    }
    if ((rc = rad_sfs_check_db(db->path))) goto fail;
    if (sqlite3_open_v2(db->path, &db->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        rc = rad_error_set(RAD_E_IO, "%s: cannot open the database: %s", db->path,
                           db->db ? sqlite3_errmsg(db->db) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(db->db, 5000);
    rc = switch_to_wal(db);
    if (rc) goto fail;
    rc = rad_sdb_exec(db, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", "setting up the connection");
    if (!rc) rc = migrate(db);
    if (rc) goto fail;
    *out = db;
    return RAD_OK;
fail:
    rad_sdb_close(db);
    return rc;
}

void rad_sdb_close(RadSessionDb *db)
{
    if (!db) return;
    if (db->db) sqlite3_close(db->db);
    free(db->path);
    free(db);
}

const char *rad_sdb_path(const RadSessionDb *db)
{
    return db->path;
}

void rad_sdb_set_snapshot_budget(RadSessionDb *db, int64_t bytes)
{
    db->snapshot_budget = bytes > 0 ? bytes : 0;
}

int rad_sdb_set_size_limit(RadSessionDb *db, int64_t bytes)
{
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(db, "PRAGMA page_size", &st, "reading the page size");
    if (rc) return rc;
    int64_t page = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 4096;
    sqlite3_finalize(st);
    char sql[80];
    snprintf(sql, sizeof sql, "PRAGMA max_page_count=%lld", (long long)(bytes / (page > 0 ? page : 4096)));
    return rad_sdb_exec(db, sql, "limiting the database size");
}

int rad_sdb_check(RadSessionDb *db)
{
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(db, "PRAGMA integrity_check", &st, "checking the database");
    if (rc) return rc;
    int src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
        rc = rad_sdb_fail(db, "checking the database");
    } else if (strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: integrity_check: %s", db->path, sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    if (rc) return rc;
    rc = rad_sdb_prep(db, "PRAGMA foreign_key_check", &st, "checking foreign keys");
    if (rc) return rc;
    src = sqlite3_step(st);
    if (src == SQLITE_ROW)
        rc = rad_error_set(RAD_E_FORMAT, "%s: foreign_key_check: a row of %s names a missing %s", db->path,
                           sqlite3_column_text(st, 0), sqlite3_column_text(st, 2));
    else if (src != SQLITE_DONE)
        rc = rad_sdb_fail(db, "checking foreign keys");
    sqlite3_finalize(st);
    if (rc) return rc;
    if (sqlite3_exec(db->db, "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)",
                     NULL, NULL, NULL) != SQLITE_OK)
        return rad_sdb_fail(db, "checking the full-text index");
    return RAD_OK;
}

/* ================================================================ sessions */

static int new_id(char id[RAD_SESSION_ID_LEN + 1])
{
    unsigned char r[RAD_SESSION_ID_LEN / 2];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t k = getrandom(r + got, sizeof r - got, 0);
        if (k < 0 && errno != EINTR) return rad_error_set(RAD_E_IO, "getrandom: %s", strerror(errno));
        if (k > 0) got += (size_t)k;
    }
    for (size_t i = 0; i < sizeof r; i++) snprintf(id + 2 * i, 3, "%02x", r[i]);
    return RAD_OK;
}

static int check_fields(const RadSessionFields *f)
{
    if (f && f->kind && strcmp(f->kind, "chat") && strcmp(f->kind, "run"))
        return rad_error_set(RAD_E_ARG, "a session's kind is chat or run, not '%s'", f->kind);
    if (f && f->sampler_json && *f->sampler_json && !rad_sdb_valid_json(f->sampler_json, 0))
        return rad_error_set(RAD_E_ARG, "sampler settings are not a JSON object: %.60s", f->sampler_json);
    return RAD_OK;
}

/* "" stands for "none" in the nullable columns. */
static const char *or_null(const char *s)
{
    return s && *s ? s : NULL;
}

int rad_session_create(RadSessionDb *db, const RadSessionFields *f, char id[RAD_SESSION_ID_LEN + 1])
{
    static const RadSessionFields none = {0};
    if (!f) f = &none;
    int rc = check_fields(f);
    if (!rc) rc = new_id(id);
    if (rc) return rc;
    const char *doing = "creating a session";
    rc = rad_sdb_begin(db, doing);
    if (rc) return rc;
    sqlite3_stmt *st;
    rc = rad_sdb_prep(
        db,
        "INSERT INTO sessions (id, title, created_ms, updated_ms, model_id, model_name, system_prompt, "
        "sampler, kind) VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6, ?7, ?8)",
        &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, id);
        rad_sdb_bind_text(st, 2, f->title ? f->title : "");
        sqlite3_bind_int64(st, 3, rad_sdb_now_ms());
        rad_sdb_bind_text(st, 4, f->model_id ? f->model_id : "");
        rad_sdb_bind_text(st, 5, f->model_name ? f->model_name : "");
        rad_sdb_bind_text(st, 6, or_null(f->system_prompt));
        rad_sdb_bind_text(st, 7, or_null(f->sampler_json));
        rad_sdb_bind_text(st, 8, f->kind ? f->kind : "chat");
        rc = rad_sdb_run(db, st, doing);
    }
    return rad_sdb_end(db, rc, doing);
}

int rad_session_update(RadSessionDb *db, const char *id, const RadSessionFields *f)
{
    int rc = check_fields(f);
    if (rc) return rc;
    const char *doing = "updating a session";
    rc = rad_sdb_begin(db, doing);
    if (rc) return rc;
    sqlite3_stmt *st;
    /* ?n IS NULL: the field was not given.  An empty prompt or sampler is stored as NULL. */
    rc = rad_sdb_prep(db,
                      "UPDATE sessions SET updated_ms = ?2,"
                      " title = coalesce(?3, title), model_id = coalesce(?4, model_id),"
                      " model_name = coalesce(?5, model_name),"
                      " system_prompt = CASE WHEN ?6 IS NULL THEN system_prompt ELSE nullif(?6, '') END,"
                      " sampler = CASE WHEN ?7 IS NULL THEN sampler ELSE nullif(?7, '') END"
                      " WHERE id = ?1",
                      &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, id);
        sqlite3_bind_int64(st, 2, rad_sdb_now_ms());
        rad_sdb_bind_text(st, 3, f->title);
        rad_sdb_bind_text(st, 4, f->model_id);
        rad_sdb_bind_text(st, 5, f->model_name);
        rad_sdb_bind_text(st, 6, f->system_prompt);
        rad_sdb_bind_text(st, 7, f->sampler_json);
        rc = rad_sdb_run(db, st, doing);
    }
    if (!rc && sqlite3_changes(db->db) == 0) rc = rad_error_set(RAD_E_NOTFOUND, "no session %s", id);
    return rad_sdb_end(db, rc, doing);
}

int rad_session_resolve(RadSessionDb *db, const char *prefix, char id[RAD_SESSION_ID_LEN + 1])
{
    id[0] = 0;
    size_t n = strlen(prefix);
    if (n == 0 || n > RAD_SESSION_ID_LEN || strspn(prefix, "0123456789abcdefABCDEF") != n)
        return rad_error_set(RAD_E_NOTFOUND, "no session '%s' (ids are hexadecimal: radiance sessions list)",
                             prefix);
    char lower[RAD_SESSION_ID_LEN + 2];
    for (size_t i = 0; i <= n; i++)
        lower[i] = (char)(prefix[i] >= 'A' && prefix[i] <= 'F' ? prefix[i] - 'A' + 'a' : prefix[i]);
    lower[n] = '%';
    lower[n + 1] = 0;
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(db, "SELECT id FROM sessions WHERE id LIKE ?1 ORDER BY id LIMIT 4", &st,
                          "finding a session");
    if (rc) return rc;
    rad_sdb_bind_text(st, 1, lower);
    char found[4][RAD_SESSION_ID_LEN + 1];
    int k = 0, src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW && k < 4)
        snprintf(found[k++], sizeof found[0], "%s", (const char *)sqlite3_column_text(st, 0));
    if (src != SQLITE_ROW && src != SQLITE_DONE) rc = rad_sdb_fail(db, "finding a session");
    sqlite3_finalize(st);
    if (rc) return rc;
    if (k == 0)
        return rad_error_set(RAD_E_NOTFOUND, "no session '%s' (radiance sessions list shows them)", prefix);
    if (k > 1)
        return rad_error_set(RAD_E_ARG, "session id '%s' is ambiguous: %s, %s%s%s%s; give more characters",
                             prefix, found[0], found[1], k > 2 ? ", " : "", k > 2 ? found[2] : "",
                             k > 3 ? ", ..." : "");
    memcpy(id, found[0], RAD_SESSION_ID_LEN + 1);
    return RAD_OK;
}

int rad_session_latest(RadSessionDb *db, char id[RAD_SESSION_ID_LEN + 1])
{
    return rad_session_latest_kind(db, NULL, id);
}

int rad_session_latest_kind(RadSessionDb *db, const char *kind, char id[RAD_SESSION_ID_LEN + 1])
{
    id[0] = 0;
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(db,
                          "SELECT id FROM sessions WHERE ?1 IS NULL OR kind = ?1"
                          " ORDER BY updated_ms DESC, rowid DESC LIMIT 1",
                          &st, "finding the latest session");
    if (rc) return rc;
    rad_sdb_bind_text(st, 1, kind);
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW)
        snprintf(id, RAD_SESSION_ID_LEN + 1, "%s", (const char *)sqlite3_column_text(st, 0));
    else if (src == SQLITE_DONE)
        rc = rad_error_set(RAD_E_NOTFOUND, "no saved sessions yet");
    else
        rc = rad_sdb_fail(db, "finding the latest session");
    sqlite3_finalize(st);
    return rc;
}

#define SESSION_COLUMNS                                                                                      \
    "s.id, s.title, s.created_ms, s.updated_ms, s.model_id, s.model_name, s.system_prompt, s.sampler, "      \
    "coalesce(s.leaf_id, 0), (SELECT count(*) FROM messages m WHERE m.session_id = s.id), s.kind"

static int read_session(sqlite3_stmt *st, RadSession *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", (const char *)sqlite3_column_text(st, 0));
    s->title = rad_sdb_col_str(st, 1, 0);
    s->created_ms = sqlite3_column_int64(st, 2);
    s->updated_ms = sqlite3_column_int64(st, 3);
    s->model_id = rad_sdb_col_str(st, 4, 0);
    s->model_name = rad_sdb_col_str(st, 5, 0);
    s->system_prompt = rad_sdb_col_str(st, 6, 1);
    s->sampler_json = rad_sdb_col_str(st, 7, 1);
    s->leaf_id = sqlite3_column_int64(st, 8);
    s->n_messages = sqlite3_column_int(st, 9);
    snprintf(s->kind, sizeof s->kind, "%s", sqlite3_column_text(st, 10) ? (const char *)sqlite3_column_text(st, 10) : "chat");
    if (!s->title || !s->model_id || !s->model_name ||
        (sqlite3_column_type(st, 6) != SQLITE_NULL && !s->system_prompt) ||
        (sqlite3_column_type(st, 7) != SQLITE_NULL && !s->sampler_json)) {
        rad_session_free(s);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    return RAD_OK;
}

void rad_session_free(RadSession *s)
{
    if (!s) return;
    free(s->title);
    free(s->model_id);
    free(s->model_name);
    free(s->system_prompt);
    free(s->sampler_json);
    memset(s, 0, sizeof *s);
}

int rad_session_get(RadSessionDb *db, const char *id, RadSession *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(db, "SELECT " SESSION_COLUMNS " FROM sessions s WHERE s.id = ?1", &st,
                          "reading a session");
    if (rc) return rc;
    rad_sdb_bind_text(st, 1, id);
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW)
        rc = read_session(st, out);
    else if (src == SQLITE_DONE)
        rc = rad_error_set(RAD_E_NOTFOUND, "no session %s", id);
    else
        rc = rad_sdb_fail(db, "reading a session");
    sqlite3_finalize(st);
    return rc;
}

int rad_session_list(RadSessionDb *db, int limit, RadSession **out, int *n)
{
    return rad_session_list_kind(db, NULL, limit, out, n);
}

int rad_session_list_kind(RadSessionDb *db, const char *kind, int limit, RadSession **out, int *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(db,
                          "SELECT " SESSION_COLUMNS " FROM sessions s WHERE ?2 IS NULL OR s.kind = ?2"
                          " ORDER BY s.updated_ms DESC, s.rowid DESC LIMIT ?1",
                          &st, "listing sessions");
    if (rc) return rc;
    sqlite3_bind_int(st, 1, limit > 0 ? limit : -1);
    rad_sdb_bind_text(st, 2, kind);
    RadSession *v = NULL;
    int count = 0, cap = 0, src;
    while (!rc && (src = sqlite3_step(st)) == SQLITE_ROW) {
        if (count == cap) {
            int ncap = cap ? 2 * cap : 16;
            RadSession *nv = realloc(v, (size_t)ncap * sizeof *nv);
            if (!nv) {
                rc = rad_error_set(RAD_E_NOMEM, "out of memory");
                break;
            }
            v = nv;
            cap = ncap;
        }
        rc = read_session(st, &v[count]);
        if (!rc) count++;
    }
    if (!rc && src != SQLITE_DONE) rc = rad_sdb_fail(db, "listing sessions");
    sqlite3_finalize(st);
    if (rc) {
        rad_session_list_free(v, count);
        return rc;
    }
    *out = v;
    *n = count;
    return RAD_OK;
}

void rad_session_list_free(RadSession *v, int n)
{
    for (int i = 0; i < n; i++) rad_session_free(&v[i]);
    free(v);
}

int rad_session_remove(RadSessionDb *db, const char *id)
{
    const char *doing = "removing a session";
    int rc = rad_sdb_begin(db, doing);
    if (rc) return rc;
    sqlite3_stmt *st;
    /* Messages first, in one statement: the foreign keys between a session
    ** and its leaf, and between messages, then have nothing left to chase. */
    rc = rad_sdb_prep(db, "UPDATE sessions SET leaf_id = NULL WHERE id = ?1", &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, id);
        rc = rad_sdb_run(db, st, doing);
    }
    if (!rc && sqlite3_changes(db->db) == 0) rc = rad_error_set(RAD_E_NOTFOUND, "no session %s", id);
    if (!rc) rc = rad_sdb_prep(db, "DELETE FROM messages WHERE session_id = ?1", &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, id);
        rc = rad_sdb_run(db, st, doing);
    }
    if (!rc) rc = rad_sdb_prep(db, "DELETE FROM sessions WHERE id = ?1", &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, id);
        rc = rad_sdb_run(db, st, doing); /* its snapshots go by ON DELETE CASCADE */
    }
    return rad_sdb_end(db, rc, doing);
}
