/*
** session_snapshots.c: KV snapshots, stored compressed and found again by
** model identity and token prefix.
**
** A row is (model_id, sha256 of the ids, the ids, the zstd blob).  A
** lookup hashes the conversation's first k ids for each stored length k
** and compares; the longest match of this model is tried first.  Rows carry
** their own checks: the zstd frame checksum and the stored size catch a
** damaged blob, the sha256 catches damaged ids.  A row failing them is
** deleted when found (it can never be used); the engine checks the rest
** when the caller restores (model identity, KV encoding, shapes).  Saving
** prunes the least recently used rows beyond the byte budget.
*/
#include "session_db_int.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* ================================================================ snapshots */

/* The ids as little-endian int32 bytes (the stored and hashed form). */
static uint8_t *tokens_le(const int32_t *tokens, int n)
{
    uint8_t *b = malloc((size_t)n * 4 + 1);
    if (!b) return NULL;
    for (int i = 0; i < n; i++) {
        uint32_t t = (uint32_t)tokens[i];
        b[4 * i] = (uint8_t)t;
        b[4 * i + 1] = (uint8_t)(t >> 8);
        b[4 * i + 2] = (uint8_t)(t >> 16);
        b[4 * i + 3] = (uint8_t)(t >> 24);
    }
    return b;
}

static void sha256_hex(const void *data, size_t n, char hex[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

void rad_snapshot_key(const int32_t *tokens, int n, char hex[65])
{
    uint8_t *b = tokens_le(tokens, n);
    if (!b) {
        hex[0] = 0;
        return;
    }
    sha256_hex(b, (size_t)n * 4, hex);
    free(b);
}

/* Delete the least recently used snapshots (never `keep`) until the rest fit
** the budget.  Inside the caller's transaction. */
static int prune_in_tx(RadSessionDb *db, int64_t budget, int64_t keep, int64_t *freed)
{
    const char *doing = "pruning snapshots";
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(db, "SELECT coalesce(sum(stored_bytes), 0) FROM snapshots", &st, doing);
    if (rc) return rc;
    int64_t total = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    if (total <= budget) return RAD_OK;
    rc = rad_sdb_prep(db, "SELECT id, stored_bytes FROM snapshots WHERE id != ?1 ORDER BY last_used_ms, id",
                      &st, doing);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, keep);
    int64_t *ids = NULL;
    int n = 0, cap = 0;
    while (total > budget && sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *nv = realloc(ids, (size_t)cap * sizeof *nv);
            if (!nv) {
                rc = rad_error_set(RAD_E_NOMEM, "out of memory");
                break;
            }
            ids = nv;
        }
        ids[n++] = sqlite3_column_int64(st, 0);
        int64_t b = sqlite3_column_int64(st, 1);
        total -= b;
        if (freed) *freed += b;
    }
    sqlite3_finalize(st);
    for (int i = 0; !rc && i < n; i++) {
        rc = rad_sdb_prep(db, "DELETE FROM snapshots WHERE id = ?1", &st, doing);
        if (!rc) {
            sqlite3_bind_int64(st, 1, ids[i]);
            rc = rad_sdb_run(db, st, doing);
        }
    }
    free(ids);
    return rc;
}

int rad_snapshot_prune(RadSessionDb *db, int64_t budget, int64_t *freed)
{
    if (freed) *freed = 0;
    int rc = rad_sdb_begin(db, "pruning snapshots");
    if (rc) return rc;
    rc = prune_in_tx(db, budget > 0 ? budget : 0, 0, freed);
    return rad_sdb_end(db, rc, "pruning snapshots");
}

int rad_snapshot_save(RadSessionDb *db, const char *model_id, const char *session_id, const int32_t *tokens,
                      int n, const void *blob, size_t size)
{
    if (!model_id || !*model_id || n <= 0 || !blob || !size)
        return rad_error_set(RAD_E_ARG, "a snapshot needs a model id, token ids and a blob");
    const char *doing = "saving a KV snapshot";
    uint8_t *ids = tokens_le(tokens, n);
    size_t bound = ZSTD_compressBound(size);
    void *z = malloc(bound);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    int rc = RAD_OK;
    size_t zn = 0;
    if (!ids || !z || !cc) {
        rc = rad_error_set(RAD_E_NOMEM, "out of memory for a %zu-byte KV snapshot", size);
    } else {
        /* The frame checksum is what later tells a damaged blob from a good one. */
        ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 3);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
        zn = ZSTD_compress2(cc, z, bound, blob, size);
        if (ZSTD_isError(zn))
            rc = rad_error_set(RAD_E_IO, "compressing a KV snapshot: %s", ZSTD_getErrorName(zn));
    }
    ZSTD_freeCCtx(cc);
    char key[65];
    if (!rc) sha256_hex(ids, (size_t)n * 4, key);
    if (!rc) rc = rad_sdb_begin(db, doing);
    if (rc) {
        free(ids);
        free(z);
        return rc;
    }
    int64_t t = rad_sdb_now_ms(), id = 0;
    sqlite3_stmt *st;
    rc = rad_sdb_prep(
        db,
        "INSERT INTO snapshots (model_id, prefix_sha256, n_tokens, tokens, data, raw_bytes, stored_bytes,"
        " session_id, created_ms, last_used_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)"
        " ON CONFLICT (model_id, prefix_sha256) DO UPDATE SET n_tokens = excluded.n_tokens,"
        " tokens = excluded.tokens, data = excluded.data, raw_bytes = excluded.raw_bytes,"
        " stored_bytes = excluded.stored_bytes, session_id = coalesce(excluded.session_id, session_id),"
        " created_ms = excluded.created_ms, last_used_ms = excluded.last_used_ms",
        &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, model_id);
        rad_sdb_bind_text(st, 2, key);
        sqlite3_bind_int(st, 3, n);
        sqlite3_bind_blob64(st, 4, ids, (sqlite3_uint64)n * 4, SQLITE_STATIC);
        sqlite3_bind_blob64(st, 5, z, zn, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, (int64_t)size);
        sqlite3_bind_int64(st, 7, (int64_t)zn);
        rad_sdb_bind_text(st, 8, session_id);
        sqlite3_bind_int64(st, 9, t);
        rc = rad_sdb_run(db, st, doing);
    }
    if (!rc)
        rc = rad_sdb_prep(db, "SELECT id FROM snapshots WHERE model_id = ?1 AND prefix_sha256 = ?2", &st,
                          doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, model_id);
        rad_sdb_bind_text(st, 2, key);
        if (sqlite3_step(st) == SQLITE_ROW)
            id = sqlite3_column_int64(st, 0);
        else
            rc = rad_sdb_fail(db, doing);
        sqlite3_finalize(st);
    }
    /* This session's shorter snapshots of the same conversation are superseded. */
    if (!rc && session_id)
        rc = rad_sdb_prep(db,
                          "DELETE FROM snapshots WHERE session_id = ?1 AND model_id = ?2 AND id != ?3"
                          " AND n_tokens < ?4 AND tokens = substr(?5, 1, length(tokens))",
                          &st, doing);
    if (!rc && session_id) {
        rad_sdb_bind_text(st, 1, session_id);
        rad_sdb_bind_text(st, 2, model_id);
        sqlite3_bind_int64(st, 3, id);
        sqlite3_bind_int(st, 4, n);
        sqlite3_bind_blob64(st, 5, ids, (sqlite3_uint64)n * 4, SQLITE_STATIC);
        rc = rad_sdb_run(db, st, doing);
    }
    if (!rc && db->snapshot_budget > 0) rc = prune_in_tx(db, db->snapshot_budget, id, NULL);
    rc = rad_sdb_end(db, rc, doing);
    free(ids);
    free(z);
    return rc;
}

void rad_snapshot_free(RadSnapshot *s)
{
    if (!s) return;
    free(s->data);
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

static void note(char *notice, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(char *notice, size_t cap, const char *fmt, ...)
{
    if (!notice || !cap) return;
    size_t used = strlen(notice);
    if (used + 3 >= cap) return;
    if (used) {
        memcpy(notice + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notice + used, cap - used, fmt, ap);
    va_end(ap);
}

int rad_snapshot_remove(RadSessionDb *db, int64_t id)
{
    const char *doing = "removing a KV snapshot";
    int rc = rad_sdb_begin(db, doing);
    if (rc) return rc;
    sqlite3_stmt *st;
    rc = rad_sdb_prep(db, "DELETE FROM snapshots WHERE id = ?1", &st, doing);
    if (!rc) {
        sqlite3_bind_int64(st, 1, id);
        rc = rad_sdb_run(db, st, doing);
    }
    return rad_sdb_end(db, rc, doing);
}

/* Best-effort: a row that can never be used goes; failing to delete it (a
** full disk) only means it is skipped again next time. */
static void forget(RadSessionDb *db, int64_t id)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->db, "DELETE FROM snapshots WHERE id = ?1", -1, &st, NULL) != SQLITE_OK) return;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_step(st);
    sqlite3_finalize(st);
}

static void touch(RadSessionDb *db, int64_t id)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->db, "UPDATE snapshots SET last_used_ms = ?2 WHERE id = ?1", -1, &st, NULL) !=
        SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, rad_sdb_now_ms());
    sqlite3_step(st);
    sqlite3_finalize(st);
}

/* Load row `id` into out and check it: ids against their hash (and against
** want[0..n) when given), the blob against its size and zstd checksum.
** 1 when usable; 0 with the reason in why when damaged; < 0 on a database
** error. */
static int load_snapshot(RadSessionDb *db, int64_t id, const uint8_t *want, RadSnapshot *out, char *why,
                         size_t whycap)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(
        db,
        "SELECT n_tokens, tokens, data, raw_bytes, prefix_sha256, created_ms FROM snapshots WHERE id = ?1",
        &st, "reading a KV snapshot");
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, id);
    int src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
        rc = src == SQLITE_DONE ? 0 : rad_sdb_fail(db, "reading a KV snapshot");
        sqlite3_finalize(st);
        if (!rc) snprintf(why, whycap, "it was deleted meanwhile");
        return rc;
    }
    int n = sqlite3_column_int(st, 0);
    const uint8_t *ids = sqlite3_column_blob(st, 1);
    size_t ids_len = (size_t)sqlite3_column_bytes(st, 1);
    const void *z = sqlite3_column_blob(st, 2);
    size_t zn = (size_t)sqlite3_column_bytes(st, 2);
    int64_t raw = sqlite3_column_int64(st, 3);
    const char *key = (const char *)sqlite3_column_text(st, 4);
    char hex[65] = "";
    int usable = 0;
    if (n <= 0 || !ids || ids_len != (size_t)n * 4) {
        snprintf(why, whycap, "its token ids are truncated");
    } else if (sha256_hex(ids, ids_len, hex), !key || strcmp(hex, key) != 0) {
        snprintf(why, whycap, "its token ids do not match their hash");
    } else if (want && memcmp(ids, want, ids_len) != 0) {
        snprintf(why, whycap, "its token ids differ from the conversation's");
    } else if (raw <= 0 || !z || ZSTD_getFrameContentSize(z, zn) != (unsigned long long)raw) {
        snprintf(why, whycap, "corrupt (the compressed blob is damaged or truncated)");
    } else if (!(out->data = malloc((size_t)raw)) || !(out->tokens = malloc((size_t)n * sizeof(int32_t)))) {
        rc = rad_error_set(RAD_E_NOMEM, "out of memory for a %lld-byte KV snapshot", (long long)raw);
    } else {
        size_t got = ZSTD_decompress(out->data, (size_t)raw, z, zn);
        if (ZSTD_isError(got))
            snprintf(why, whycap, "corrupt (zstd: %s)", ZSTD_getErrorName(got));
        else if (got != (size_t)raw)
            snprintf(why, whycap, "corrupt (%zu bytes where %lld were stored)", got, (long long)raw);
        else
            usable = 1;
    }
    if (usable) {
        for (int i = 0; i < n; i++)
            out->tokens[i] = (int32_t)((uint32_t)ids[4 * i] | (uint32_t)ids[4 * i + 1] << 8 |
                                       (uint32_t)ids[4 * i + 2] << 16 | (uint32_t)ids[4 * i + 3] << 24);
        out->id = id;
        out->size = (size_t)raw;
        out->n_tokens = n;
        out->created_ms = sqlite3_column_int64(st, 5);
    }
    sqlite3_finalize(st);
    if (!usable) rad_snapshot_free(out);
    return rc ? rc : usable;
}

/* Candidates (id, n_tokens) in the order to try them. */
typedef struct Candidate {
    int64_t id;
    int n_tokens;
    int mine;          /* of the model asked about */
    char model_id[72]; /* for the notice (ids are 64 characters) */
} Candidate;

/* Read the rows of st (id, n_tokens, model_id, mine[, prefix_sha256]) and
** finalize it.  With ids, a row is kept only when its prefix hash is the
** hash of its first n_tokens ids. */
static int candidates(RadSessionDb *db, sqlite3_stmt *st, const uint8_t *ids, Candidate **out, int *n)
{
    *out = NULL;
    *n = 0;
    int cap = 0, src, rc = RAD_OK;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        int k = sqlite3_column_int(st, 1);
        if (ids) {
            char hex[65];
            const unsigned char *key = sqlite3_column_text(st, 4);
            if (k <= 0 || !key) continue;
            sha256_hex(ids, (size_t)k * 4, hex);
            if (strcmp(hex, (const char *)key) != 0) continue;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            Candidate *nv = realloc(*out, (size_t)cap * sizeof *nv);
            if (!nv) {
                rc = rad_error_set(RAD_E_NOMEM, "out of memory");
                break;
            }
            *out = nv;
        }
        Candidate *c = &(*out)[(*n)++];
        c->id = sqlite3_column_int64(st, 0);
        c->n_tokens = k;
        const unsigned char *m = sqlite3_column_text(st, 2);
        snprintf(c->model_id, sizeof c->model_id, "%s", m ? (const char *)m : "");
        c->mine = sqlite3_column_int(st, 3);
    }
    if (!rc && src != SQLITE_DONE) rc = rad_sdb_fail(db, "looking up KV snapshots");
    sqlite3_finalize(st);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* Try candidates in order; the first usable one goes to out.  Damaged ones
** are noted and deleted. */
static int try_candidates(RadSessionDb *db, const Candidate *c, int nc, const uint8_t *want, RadSnapshot *out,
                          RadSnapshotStatus *status, char *notice, size_t cap)
{
    for (int i = 0; i < nc; i++) {
        char why[160] = "";
        int got = load_snapshot(db, c[i].id, want, out, why, sizeof why);
        if (got < 0) return got;
        if (got == 1) {
            touch(db, c[i].id);
            *status = RAD_SNAPSHOT_FOUND;
            return RAD_OK;
        }
        note(notice, cap, "KV snapshot of %d tokens ignored: %s", c[i].n_tokens, why);
        forget(db, c[i].id);
        *status = RAD_SNAPSHOT_IGNORED;
    }
    return RAD_OK;
}

/* Try this model's candidates (they come first: the ORDER BY); the others
** only name the model a snapshot was made by, in a notice that starts with
** whose ("the session's KV snapshot"); none is the notice when there is no
** candidate at all. */
static int pick_candidate(RadSessionDb *db, const Candidate *c, int nc, const uint8_t *want,
                          const char *model_id, const char *whose, const char *none, RadSnapshot *out,
                          RadSnapshotStatus *status, char *notice, size_t cap)
{
    int nm = 0;
    while (nm < nc && c[nm].mine) nm++;
    int rc = try_candidates(db, c, nm, want, out, status, notice, cap);
    if (!rc && *status != RAD_SNAPSHOT_FOUND) {
        if (nm < nc) {
            note(notice, cap, "%s was made by another model or build (model id %.12s, this one %.12s)", whose,
                 c[nm].model_id, model_id);
            *status = RAD_SNAPSHOT_IGNORED;
        } else if (*status == RAD_SNAPSHOT_NONE) {
            note(notice, cap, "%s", none);
        }
        if (*status == RAD_SNAPSHOT_IGNORED) note(notice, cap, "the prompt is evaluated again");
    }
    return rc;
}

int rad_snapshot_find(RadSessionDb *db, const char *model_id, const int32_t *tokens, int n, RadSnapshot *out,
                      RadSnapshotStatus *status, char *notice, size_t cap)
{
    memset(out, 0, sizeof *out);
    *status = RAD_SNAPSHOT_NONE;
    if (notice && cap) notice[0] = 0;
    if (n <= 0) {
        note(notice, cap, "no KV snapshot: the conversation is empty");
        return RAD_OK;
    }
    uint8_t *ids = tokens_le(tokens, n);
    if (!ids) return rad_error_set(RAD_E_NOMEM, "out of memory");
    /* Every stored prefix no longer than the ids, longest first; a
    ** candidate matches when its hash is the hash of that many ids. */
    sqlite3_stmt *st;
    Candidate *c = NULL;
    int nc = 0,
        rc = rad_sdb_prep(db,
                          "SELECT id, n_tokens, model_id, model_id = ?2 AS mine, prefix_sha256 FROM snapshots"
                          " WHERE n_tokens <= ?1 ORDER BY mine DESC, n_tokens DESC, id DESC",
                          &st, "looking up KV snapshots");
    if (!rc) {
        sqlite3_bind_int(st, 1, n);
        rad_sdb_bind_text(st, 2, model_id);
        rc = candidates(db, st, ids, &c, &nc);
    }
    if (!rc)
        rc = pick_candidate(db, c, nc, ids, model_id, "the KV snapshot of this conversation",
                            "no KV snapshot of this conversation for this model", out, status, notice, cap);
    free(c);
    free(ids);
    return rc;
}

int rad_snapshot_find_session(RadSessionDb *db, const char *session_id, const char *model_id,
                              RadSnapshot *out, RadSnapshotStatus *status, char *notice, size_t cap)
{
    memset(out, 0, sizeof *out);
    *status = RAD_SNAPSHOT_NONE;
    if (notice && cap) notice[0] = 0;
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(
        db,
        "SELECT id, n_tokens, model_id, model_id = ?2 AS mine FROM snapshots WHERE session_id = ?1"
        " ORDER BY mine DESC, created_ms DESC, id DESC",
        &st, "looking up KV snapshots");
    if (rc) return rc;
    rad_sdb_bind_text(st, 1, session_id);
    rad_sdb_bind_text(st, 2, model_id);
    Candidate *c;
    int nc;
    rc = candidates(db, st, NULL, &c, &nc);
    if (rc) return rc;
    rc = pick_candidate(db, c, nc, NULL, model_id, "the session's KV snapshot",
                        "no KV snapshot saved for this session and model", out, status, notice, cap);
    free(c);
    return rc;
}

int rad_snapshot_usage(RadSessionDb *db, const char *session_id, int *count, int64_t *stored_bytes,
                       int64_t *raw_bytes)
{
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(
        db,
        "SELECT count(*), coalesce(sum(stored_bytes), 0), coalesce(sum(raw_bytes), 0) FROM snapshots"
        " WHERE ?1 IS NULL OR session_id = ?1",
        &st, "measuring KV snapshots");
    if (rc) return rc;
    rad_sdb_bind_text(st, 1, session_id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        if (count) *count = sqlite3_column_int(st, 0);
        if (stored_bytes) *stored_bytes = sqlite3_column_int64(st, 1);
        if (raw_bytes) *raw_bytes = sqlite3_column_int64(st, 2);
    } else {
        rc = rad_sdb_fail(db, "measuring KV snapshots");
    }
    sqlite3_finalize(st);
    return rc;
}
