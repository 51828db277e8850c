/*
** model_store.c: the table of converted models (SQLite, WAL) and
** rad_model_resolve, which walks a spec from a name to a .rad file:
** store, cache, hub, converter, store again.  model_store.h has the schema
** and the contracts.
**
** The database is shared with the session store; this file owns only the
** `models` table and creates it when it is missing.  The .rad files are
** written by the converter beside their final name and renamed into place,
** so a row always names a whole file; a row whose file was deleted by hand
** is treated as absent.
*/
#include "model_store.h"

#include "../../engine/include/radiance.h"
#include "hub.h"
#include "model_open.h"
#include "safe_fs.h"
#include "../cli.h"
#include "../../formats/gguf_container.h"
#include "../sessions/session_db.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ================================================================ store */

struct RadStore {
    sqlite3 *db;
    char *dir; /* $XDG_DATA_HOME/radiance */
    char *db_path;
};

static const char schema[] = "CREATE TABLE IF NOT EXISTS models ("
                             " name TEXT NOT NULL,"
                             " quant TEXT NOT NULL,"
                             " source TEXT NOT NULL,"
                             " revision TEXT NOT NULL,"
                             " commit_sha TEXT NOT NULL,"
                             " file TEXT NOT NULL UNIQUE,"
                             " size INTEGER NOT NULL,"
                             " sha256 TEXT NOT NULL,"
                             " created INTEGER NOT NULL,"
                             " last_used INTEGER,"
                             " PRIMARY KEY (name, quant))";

static int db_error(RadStore *s, const char *doing)
{
    return rad_error_set(RAD_E_IO, "%s: %s: %s", s->db_path, doing, sqlite3_errmsg(s->db));
}

/* Open the store; `create`: make the folder, database and table as needed,
** else an absent database is an empty store (db stays NULL) and nothing is
** made.  The database and models/ are never reached through a link. */
static int store_open(RadStore **out, int create)
{
    *out = NULL;
    RadStore *s = calloc(1, sizeof *s);
    if (!s) return rad_error_set(RAD_E_NOMEM, "out of memory");
    char *models = NULL;
    int rc = rad_data_dir("model store", &s->dir);
    if (rc) goto fail;
    if (asprintf(&s->db_path, "%s/radiance.db", s->dir) < 0 || asprintf(&models, "%s/models", s->dir) < 0) {
        s->db_path = NULL;
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        goto fail;
    }
    struct stat st;
    int have_db = lstat(s->db_path, &st) == 0;
    if ((rc = rad_sfs_check_db(s->db_path))) goto fail;
    if (!have_db && !create) {
        free(models);
        *out = s; /* nothing converted yet: an empty store, and nothing made */
        return RAD_OK;
    }
    if (create) {
        int fd = rad_sfs_open_dir(s->dir, models, 1);
        if (fd < 0) {
            rc = fd;
            goto fail;
        }
        close(fd);
    }
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
#ifdef SQLITE_OPEN_NOFOLLOW
    flags |= SQLITE_OPEN_NOFOLLOW;
#endif
    if (sqlite3_open_v2(s->db_path, &s->db, flags, NULL) != SQLITE_OK) {
        rc = rad_error_set(RAD_E_IO, "%s: cannot open the database: %s", s->db_path,
                           s->db ? sqlite3_errmsg(s->db) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(s->db, 5000);
    if (sqlite3_exec(s->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(s->db, schema, NULL, NULL, NULL) != SQLITE_OK) {
        rc = db_error(s, "cannot prepare the models table");
        goto fail;
    }
    free(models);
    *out = s;
    return RAD_OK;
fail:
    free(models);
    rad_store_close(s);
    return rc;
}

int rad_store_open(RadStore **out)
{
    return store_open(out, 1);
}

int rad_store_open_existing(RadStore **out)
{
    return store_open(out, 0);
}

void rad_store_close(RadStore *s)
{
    if (!s) return;
    if (s->db) sqlite3_close(s->db);
    free(s->dir);
    free(s->db_path);
    free(s);
}

const char *rad_store_dir(const RadStore *s)
{
    return s->dir;
}

static char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return strdup(t ? (const char *)t : "");
}

#define ROW_COLUMNS "name, quant, source, revision, commit_sha, file, size, sha256, created, last_used"

static int read_row(RadStore *s, sqlite3_stmt *st, RadStoredModel *m)
{
    memset(m, 0, sizeof *m);
    m->name = col_text(st, 0);
    m->quant = col_text(st, 1);
    m->source = col_text(st, 2);
    m->revision = col_text(st, 3);
    m->commit_sha = col_text(st, 4);
    m->file = col_text(st, 5);
    m->size = sqlite3_column_int64(st, 6);
    const unsigned char *sha = sqlite3_column_text(st, 7);
    snprintf(m->sha256, sizeof m->sha256, "%s", sha ? (const char *)sha : "");
    m->created = sqlite3_column_int64(st, 8);
    m->last_used = sqlite3_column_int64(st, 9);
    const char *cached = m->file ? rad_store_cache_path(m->file) : NULL;
    if (cached)
        m->path = strdup(cached);
    else if (m->file && asprintf(&m->path, "%s/%s", s->dir, m->file) < 0)
        m->path = NULL;
    if (!m->name || !m->quant || !m->source || !m->revision || !m->commit_sha || !m->file || !m->path) {
        rad_stored_model_free(m);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    return RAD_OK;
}

const char *rad_store_cache_path(const char *file)
{
    /* "cache:TAG:/abs/path": TAG keeps two names of one file apart (the
    ** column is UNIQUE) */
    if (strncmp(file, "cache:", 6) != 0) return NULL;
    const char *colon = strchr(file + 6, ':');
    return colon && colon[1] == '/' ? colon + 1 : NULL;
}

int rad_store_find(RadStore *s, const char *name, const char *quant, RadStoredModel *out)
{
    memset(out, 0, sizeof *out);
    if (!s->db)
        return rad_error_set(RAD_E_NOTFOUND, "%s%s%s: not in the model store (radiance list shows what is)", name,
                             quant ? ":" : "", quant ? quant : "");
    /* quants compare without case: q8_0 finds a GGUF's Q8_0 */
    const char *sql = quant ? "SELECT " ROW_COLUMNS " FROM models WHERE name = ?1 AND quant = ?2 COLLATE NOCASE"
                            : "SELECT " ROW_COLUMNS " FROM models WHERE name = ?1 "
                              "ORDER BY coalesce(last_used, 0) DESC, created DESC LIMIT 1";
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return db_error(s, "cannot read");
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    if (quant) sqlite3_bind_text(st, 2, quant, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        rc = read_row(s, st, out);
    else if (rc == SQLITE_DONE)
        rc = rad_error_set(RAD_E_NOTFOUND, "%s%s%s: not in the model store (radiance list shows what is)",
                           name, quant ? ":" : "", quant ? quant : "");
    else
        rc = db_error(s, "cannot read");
    sqlite3_finalize(st);
    return rc;
}

int rad_store_list(RadStore *s, RadStoredModel **rows, int *n_out)
{
    *rows = NULL;
    *n_out = 0;
    if (!s->db) return RAD_OK; /* no database yet: nothing converted */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT " ROW_COLUMNS " FROM models ORDER BY name, quant", -1, &st, NULL) !=
        SQLITE_OK)
        return db_error(s, "cannot read");
    RadStoredModel *list = NULL;
    int n = 0, cap = 0, rc = RAD_OK, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            RadStoredModel *grown = realloc(list, (size_t)cap * sizeof *grown);
            if (!grown) {
                rc = rad_error_set(RAD_E_NOMEM, "out of memory");
                break;
            }
            list = grown;
        }
        if ((rc = read_row(s, st, &list[n]))) break;
        n++;
    }
    if (!rc && step != SQLITE_DONE && step != SQLITE_ROW) rc = db_error(s, "cannot read");
    sqlite3_finalize(st);
    if (rc) {
        rad_stored_models_free(list, n);
        return rc;
    }
    *rows = list;
    *n_out = n;
    return RAD_OK;
}

int rad_store_put(RadStore *s, const RadStoredModel *m)
{
    if (!s->db) return rad_error_set(RAD_E_STATE, "the model store was opened to read");
    sqlite3_stmt *st = NULL;
    /* A row that held the same file under another name gives it up first. */
    const char *sql =
        "INSERT OR REPLACE INTO models (" ROW_COLUMNS ") VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return db_error(s, "cannot write");
    sqlite3_bind_text(st, 1, m->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, m->quant, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, m->source, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, m->revision ? m->revision : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 5, m->commit_sha ? m->commit_sha : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 6, m->file, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 7, m->size);
    sqlite3_bind_text(st, 8, m->sha256, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 9, m->created);
    if (m->last_used)
        sqlite3_bind_int64(st, 10, m->last_used);
    else
        sqlite3_bind_null(st, 10);
    int rc = sqlite3_step(st) == SQLITE_DONE ? RAD_OK : db_error(s, "cannot record the model");
    sqlite3_finalize(st);
    return rc;
}

static int exec_name_quant(RadStore *s, const char *sql, const char *name, const char *quant,
                           const char *doing)
{
    if (!s->db) return RAD_OK; /* no database: no such row */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return db_error(s, doing);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, quant, -1, SQLITE_TRANSIENT);
    if (sqlite3_bind_parameter_count(st) >= 3) sqlite3_bind_int64(st, 3, (sqlite3_int64)time(NULL));
    int rc = sqlite3_step(st) == SQLITE_DONE ? RAD_OK : db_error(s, doing);
    sqlite3_finalize(st);
    return rc;
}

int rad_store_delete(RadStore *s, const char *name, const char *quant)
{
    return exec_name_quant(s, "DELETE FROM models WHERE name = ?1 AND quant = ?2", name, quant,
                           "cannot delete");
}

int rad_store_touch(RadStore *s, const char *name, const char *quant)
{
    return exec_name_quant(s, "UPDATE models SET last_used = ?3 WHERE name = ?1 AND quant = ?2", name, quant,
                           "cannot record the use");
}

void rad_stored_model_free(RadStoredModel *m)
{
    if (!m) return;
    free(m->name);
    free(m->quant);
    free(m->source);
    free(m->revision);
    free(m->commit_sha);
    free(m->file);
    free(m->path);
    memset(m, 0, sizeof *m);
}

void rad_stored_models_free(RadStoredModel *rows, int n)
{
    for (int i = 0; rows && i < n; i++) rad_stored_model_free(&rows[i]);
    free(rows);
}

int rad_file_sha256(const char *path, char hex[65], int64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return rad_error_set(RAD_E_IO, "%s: %s", path, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    char *buf = malloc(1 << 20);
    int rc = RAD_OK;
    int64_t total = 0;
    if (!md || !buf)
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
    else
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    while (!rc) {
        ssize_t r = read(fd, buf, 1 << 20);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) rc = rad_error_set(RAD_E_IO, "%s: %s", path, strerror(errno));
        if (r <= 0) break;
        EVP_DigestUpdate(md, buf, (size_t)r);
        total += r;
    }
    if (!rc) {
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        EVP_DigestFinal_ex(md, d, &n);
        for (unsigned i = 0; i < n && i < 32; i++) sprintf(hex + 2 * i, "%02x", d[i]);
        hex[64] = 0;
        if (size) *size = total;
    }
    EVP_MD_CTX_free(md);
    free(buf);
    close(fd);
    return rc;
}

char *rad_store_file_for(const char *name, const char *quant)
{
    char safe[96];
    size_t n = strlen(name), start = n > sizeof safe - 1 ? n - (sizeof safe - 1) : 0, k = 0;
    int changed = start > 0;
    for (size_t i = start; i < n; i++) {
        char ch = name[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        if (!ok) changed = 1;
        if (k == 0 && (ch == '.' || !ok)) continue; /* no hidden files, no leading '-' */
        safe[k++] = ok ? ch : '-';
    }
    safe[k] = 0;
    char tag[10] = "";
    if (changed || k == 0) {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned int dn = 0;
        if (!md) return NULL;
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);
        EVP_DigestUpdate(md, name, n);
        EVP_DigestFinal_ex(md, d, &dn);
        EVP_MD_CTX_free(md);
        snprintf(tag, sizeof tag, "-%02x%02x%02x%02x", d[0], d[1], d[2], d[3]);
    }
    char *out = NULL;
    if (asprintf(&out, "models/%s%s.%s.rad", safe, tag, quant) < 0) return NULL;
    return out;
}

/* ============================================================ resolving */

static void note(const RadResolveOptions *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The notes name files a hub chose: printed terminal-safe (rad_safe). */
static void note(const RadResolveOptions *o, const char *fmt, ...)
{
    if (o->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    if (vasprintf(&line, fmt, ap) < 0) line = NULL;
    va_end(ap);
    fprintf(o->log, "radiance: %s\n", line ? rad_safe(line) : "(out of memory)");
    free(line);
}

/* The newest modification time among a folder's files (links followed). */
static int64_t newest_mtime(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int64_t newest = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *p = NULL;
        struct stat st;
        if (e->d_name[0] == '.' || asprintf(&p, "%s/%s", dir, e->d_name) < 0) continue;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_mtime > newest) newest = st.st_mtime;
        free(p);
    }
    closedir(d);
    return newest;
}

/* The quant a safetensors model converts to, canonical; refused with the
** list of what there is. */
static int conversion_quant(const char *name, const char *quant, const char **out)
{
    *out = rad_convert_quant_canonical(quant);
    if (*out) return RAD_OK;
    return rad_error_set(RAD_E_ARG, "%s: --quant %s: a safetensors model converts to %s", name, quant,
                         rad_convert_quant_list());
}

/* Convert folder `dir` into the store as (name, quant) and record it. */
static int convert_into_store(RadStore *store, const RadResolveOptions *o, const char *dir, const char *name,
                              const char *quant, const char *source, const char *revision, const char *commit,
                              int64_t last_used, RadResolved *out)
{
    RadStoredModel m = {0};
    m.file = rad_store_file_for(name, quant);
    if (!m.file || asprintf(&m.path, "%s/%s", rad_store_dir(store), m.file) < 0) {
        free(m.file);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    /* The converter replaces the file by renaming its temporary one over
    ** it; a link or a folder standing there is refused, not replaced. */
    struct stat st;
    int rc = rad_sfs_lstat(rad_store_dir(store), m.path, &st);
    if (rc == RAD_E_NOTFOUND) rc = RAD_OK;
    else if (!rc && S_ISLNK(st.st_mode)) rc = rad_sfs_refuse_link(m.path, "a converted model");
    else if (!rc && !S_ISREG(st.st_mode)) rc = rad_error_set(RAD_E_IO, "%s: not a regular file: remove it", m.path);
    if (rc) {
        free(m.path);
        free(m.file);
        return rc;
    }
    rad_error_clear();
    note(o, "converting %s to %s", name, quant);
    rc = rad_convert_hf_named(dir, m.path, quant, o->plugin_dir, name, o->quiet ? NULL : o->log);
    if (!rc) rc = rad_file_sha256(m.path, m.sha256, &m.size);
    if (!rc) {
        m.name = (char *)name;
        m.quant = (char *)quant;
        m.source = (char *)source;
        m.revision = (char *)revision;
        m.commit_sha = (char *)commit;
        m.created = (int64_t)time(NULL);
        m.last_used = last_used;
        rc = rad_store_put(store, &m);
    }
    if (!rc) {
        out->path = m.path;
        out->converted = 1;
        char b[32];
        note(o, "%s (%s) is ready: %s, %s", name, quant, m.path, rad_hub_format_bytes(m.size, b, sizeof b));
    } else {
        free(m.path);
    }
    free(m.file);
    return rc;
}

/* A GGUF a row names in the Hugging Face cache is still there, and still
** reached only through the cache's own links (every part of a split one). */
static int cached_gguf_present(const RadStoredModel *row)
{
    RadHfCache cache;
    if (rad_hf_cache_init(&cache) != RAD_OK) return 0;
    char *snap = rad_hf_snapshot_dir(&cache, row->source, row->commit_sha);
    size_t n = snap ? strlen(snap) : 0;
    int rc = 0;
    if (snap && rad_hf_repo_id_ok(row->source) && rad_hf_is_commit(row->commit_sha) &&
        strncmp(row->path, snap, n) == 0 && row->path[n] == '/') {
        RadHfFile f = {.path = row->path + n + 1, .size = -1};
        rc = rad_hf_snapshot_has(&cache, row->source, row->commit_sha, &f);
        /* "X-00001-of-0000N.gguf": the other parts too */
        size_t len = strlen(f.path);
        int count = 0;
        if (rc == 1 && len > 20 && sscanf(f.path + len - 20, "-00001-of-%5d.gguf", &count) == 1 && count <= 99999) {
            char *part = strdup(f.path);
            for (int i = 2; part && rc == 1 && i <= count; i++) {
                snprintf(part + len - 20, 21, "-%05d-of-%05d.gguf", i % 100000, count % 100000);
                RadHfFile pf = {.path = part, .size = -1};
                rc = rad_hf_snapshot_has(&cache, row->source, row->commit_sha, &pf);
            }
            free(part);
        }
    }
    free(snap);
    rad_hf_cache_free(&cache);
    return rc;
}

/* The stored row for (name, quant or any) whose file is still there:
** RAD_E_NOTFOUND when it is gone, a refusal when a link stands in for it. */
static int find_usable(RadStore *store, const char *name, const char *quant, RadStoredModel *row)
{
    int rc = rad_store_find(store, name, quant, row);
    if (rc) return rc;
    int have;
    if (rad_store_cache_path(row->file)) {
        have = cached_gguf_present(row);
    } else {
        struct stat st;
        int st_rc = rad_sfs_lstat(rad_store_dir(store), row->path, &st);
        have = st_rc == RAD_E_NOTFOUND ? 0
             : st_rc                   ? st_rc
             : S_ISLNK(st.st_mode)     ? rad_sfs_refuse_link(row->path, "a converted model")
                                       : S_ISREG(st.st_mode);
    }
    if (have == 1) return RAD_OK;
    rad_stored_model_free(row);
    if (have < 0) return have;
    return rad_error_set(RAD_E_NOTFOUND, "%s: the model's file is gone", name);
}

static int resolve_folder(RadStore *store, const RadModelSpec *spec, const RadResolveOptions *o,
                          RadResolved *out)
{
    const char *quant;
    int rc = conversion_quant(spec->name, o->quant ? o->quant : RAD_DEFAULT_QUANT, &quant);
    if (rc) return rc;
    snprintf(out->quant, sizeof out->quant, "%s", quant);
    RadStoredModel row;
    if ((rc = find_usable(store, spec->name, quant, &row)) == RAD_OK) {
        int fresh = row.created >= newest_mtime(spec->path);
        if (fresh && !o->pull) rad_store_touch(store, row.name, row.quant);
        if (fresh) {
            out->path = row.path;
            row.path = NULL;
        }
        rad_stored_model_free(&row);
        if (fresh) return RAD_OK;
    } else if (rc != RAD_E_NOTFOUND) {
        return rc;
    }
    rad_error_clear();
    /* Say a folder is no model before saying "converting" it. */
    char config[RAD_SPEC_PATH_MAX + 16];
    snprintf(config, sizeof config, "%s/config.json", spec->path);
    if (access(config, F_OK) != 0)
        return rad_error_set(RAD_E_NOTFOUND,
                             "%s is not a model: a folder must be a Hugging Face model (config.json and "
                             "*.safetensors); radiance also runs .gguf and .rad files",
                             spec->path);
    return convert_into_store(store, o, spec->path, spec->name, quant, spec->path, "", "",
                              o->pull ? 0 : (int64_t)time(NULL), out);
}

/* A GGUF repository: the file is run where the cache holds it.  Opening it
** once here checks it is a model radiance reads (and prepares its
** tokenizer in the cache, so the first run opens fast); the row records
** it so a run finds it with no request. */
static int record_gguf(RadStore *store, const RadModelSpec *spec, const RadResolveOptions *o, const RadHubFetch *got,
                       int64_t last_used, RadResolved *out)
{
    char *cache = rad_tokenizer_cache_dir();
    RadContainer *c = NULL;
    int rc = rad_container_open_model(got->gguf_path, cache, &c);
    rad_container_close(c);
    free(cache);
    if (rc) return rc;
    RadStoredModel m = {0};
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dn = 0;
    char tagged[64];
    /* TAG: the name and quant, so two names of one file keep two rows */
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md) return rad_error_set(RAD_E_NOMEM, "out of memory");
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    EVP_DigestUpdate(md, spec->name, strlen(spec->name) + 1);
    EVP_DigestUpdate(md, got->quant, strlen(got->quant));
    EVP_DigestFinal_ex(md, d, &dn);
    EVP_MD_CTX_free(md);
    snprintf(tagged, sizeof tagged, "cache:%02x%02x%02x%02x:", d[0], d[1], d[2], d[3]);
    if (asprintf(&m.file, "%s%s", tagged, got->gguf_path) < 0) return rad_error_set(RAD_E_NOMEM, "out of memory");
    m.name = (char *)spec->name;
    m.quant = (char *)got->quant;
    m.source = (char *)spec->repo;
    m.revision = (char *)spec->revision;
    m.commit_sha = (char *)got->commit;
    m.size = got->bytes;
    snprintf(m.sha256, sizeof m.sha256, "%s", got->sha256);
    m.created = (int64_t)time(NULL);
    m.last_used = last_used;
    rc = rad_store_put(store, &m);
    free(m.file);
    if (rc) return rc;
    if (!(out->path = strdup(got->gguf_path))) return rad_error_set(RAD_E_NOMEM, "out of memory");
    char b[32];
    note(o, "%s (%s) is ready, run in place from the cache: %s, %s", spec->name, got->quant, got->gguf_path,
         rad_hub_format_bytes(got->bytes, b, sizeof b));
    return RAD_OK;
}

static int resolve_hub(RadStore *store, const RadModelSpec *spec, const RadResolveOptions *o,
                       RadResolved *out)
{
    const char *asked = o->quant ? o->quant : spec->quant_from_spec && spec->quant[0] ? spec->quant : NULL;
    const char *file = o->quant ? NULL : spec->file[0] ? spec->file : NULL;
    if (asked && !rad_model_quant_ok(asked))
        return rad_error_set(RAD_E_ARG, "--quant '%s' is not a quantization", asked);
    /* a GGUF file named by the spec is stored under the quant its name holds */
    char file_quant[32] = "";
    if (file) rad_model_gguf_tag(file, file_quant, sizeof file_quant);
    const char *lookup = asked ? asked : file_quant[0] ? file_quant : NULL;
    RadStoredModel row;
    int rc;

    /* run: what is converted (or recorded) is used, with no request. */
    if (!o->pull) {
        rc = find_usable(store, spec->name, lookup, &row);
        if (rc == RAD_OK) {
            rad_store_touch(store, row.name, row.quant);
            out->path = row.path;
            row.path = NULL;
            snprintf(out->quant, sizeof out->quant, "%s", row.quant);
            snprintf(out->commit, sizeof out->commit, "%s", row.commit_sha);
            rad_stored_model_free(&row);
            return RAD_OK;
        }
        if (rc != RAD_E_NOTFOUND) return rc;
    }
    rad_error_clear();

    RadHubOptions ho = {.offline = o->offline, .quiet = o->quiet, .log = o->log};
    RadHub *hub = NULL;
    RadHubFetch got;
    if ((rc = rad_hub_open(&ho, &hub))) return rc;
    const char *pick = asked ? asked : spec->quant[0] ? spec->quant : NULL;
    rc = rad_hub_fetch(hub, spec->repo, spec->revision, pick, file, &got);
    rad_hub_close(hub);
    if (rc) return rc;
    snprintf(out->commit, sizeof out->commit, "%s", got.commit);
    out->downloaded = got.n_downloaded;
    int64_t last_used = o->pull ? 0 : (int64_t)time(NULL);

    const char *quant;
    if (got.kind == RAD_REPO_GGUF)
        quant = got.quant;
    else if ((rc = conversion_quant(spec->name, asked ? asked : spec->quant[0] ? spec->quant : RAD_DEFAULT_QUANT,
                                    &quant))) {
        rad_hub_fetch_free(&got);
        return rc;
    }
    snprintf(out->quant, sizeof out->quant, "%s", quant);

    /* Converted (or recorded) from this very commit already: nothing to do. */
    if ((rc = find_usable(store, spec->name, quant, &row)) == RAD_OK) {
        int same = strcmp(row.commit_sha, got.commit) == 0;
        if (same) {
            if (!o->pull) rad_store_touch(store, row.name, row.quant);
            out->path = row.path;
            row.path = NULL;
            note(o, "%s (%s) is up to date: %s", spec->name, quant, out->path);
        }
        if (!last_used) last_used = row.last_used;
        rad_stored_model_free(&row);
        if (same) {
            rad_hub_fetch_free(&got);
            return RAD_OK;
        }
    } else if (rc != RAD_E_NOTFOUND) {
        rad_hub_fetch_free(&got);
        return rc;
    }
    rad_error_clear();
    if (got.kind == RAD_REPO_GGUF)
        rc = record_gguf(store, spec, o, &got, last_used, out);
    else
        rc = convert_into_store(store, o, got.snapshot, spec->name, quant, spec->repo, spec->revision, got.commit,
                                last_used, out);
    rad_hub_fetch_free(&got);
    return rc;
}

int rad_model_resolve_ex(const char *text, const RadResolveOptions *opt, RadResolved *out)
{
    memset(out, 0, sizeof *out);
    RadResolveOptions o = {0};
    if (opt) o = *opt;
    if (!o.log) o.log = stderr;
    RadModelSpec *spec = malloc(sizeof *spec);
    if (!spec) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int rc = rad_model_spec_parse(text, spec);
    RadStore *store = NULL;
    if (rc) goto done;
    snprintf(out->name, sizeof out->name, "%s", spec->name);
    switch (spec->kind) {
    case RAD_SPEC_RAD:
    case RAD_SPEC_GGUF:     /* the engine maps a GGUF directly */
        out->name[0] = 0;
        if (!(out->path = strdup(spec->path))) rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = rad_store_open(&store))) goto done;
    rc = spec->kind == RAD_SPEC_HF_DIR ? resolve_folder(store, spec, &o, out)
                                       : resolve_hub(store, spec, &o, out);
done:
    rad_store_close(store);
    free(spec);
    if (rc) {
        free(out->path);
        out->path = NULL;
    }
    return rc;
}

int rad_model_resolve(const char *spec, const RadResolveOptions *o, char **rad_path)
{
    RadResolved r;
    *rad_path = NULL;
    int rc = rad_model_resolve_ex(spec, o, &r);
    if (!rc) *rad_path = r.path;
    return rc;
}
