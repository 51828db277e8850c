/*
** session_driver.c: drives the session store for tests/e2e/test_sessions.sh.
**
**   write DB --seed S [--count N] [--log FILE] [--budget BYTES]
**         [--free-after K --filler FILE | --size-limit BYTES]
**       Write sessions, messages, forks, rewrites, removals and KV snapshots
**       in a loop (N iterations; forever without --count).  After each
**       commit one line goes to the log (unbuffered), so a killed writer's
**       log names only writes that had committed.  A failed write prints
**       its one-line error on stderr and the loop goes on.  --free-after K:
**       after K failed writes in a row, delete FILE (a full disk gets room)
**       or raise the --size-limit quota, then carry on.
**
**   check DB [--log FILE]
**       The database is whole (integrity_check, foreign keys, the full-text
**       index), every message and snapshot reads back and matches the
**       checksum it was written with, and every write the log names is
**       there.  Prints one summary line; exits 1 on the first problem.
**
**   engine-save DB MODEL IDS [--as-model ID]
**   engine-check DB MODEL IDS
**       With a real model: save the KV of evaluating IDS (comma-separated)
**       as a snapshot (keyed by another model's id with --as-model, as a
**       bug or a swapped file would); then look up the longest snapshot of
**       IDS, restore it, evaluate the rest, and compare the last logits with
**       a fresh evaluation.  Prints "restored K of N" and any notice.
**
**   demo DB
**       One known conversation with a /retry fork: system, a question, a
**       first reply and the retried one (current).  Prints the session id.
**
**   json FILE PATH
**       Parse FILE as JSON (the CLI's output) and print the value at PATH:
**       keys and array indices separated by '.', '#' for a length
**       ("messages.#", "0.id").  Exits 1 when FILE does not parse.
**
**   model-id DB MODEL
**       Print the model's identity (rad_engine_model_id).
**
**   damage DB zstd|truncate
**       Damage every snapshot: flip bytes of the compressed blob, or store
**       the engine's blob cut in half (well compressed, refused by the
**       engine).
*/
#include "../../app/sessions/session_db.h"
#include "../../engine/include/radiance.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char MODEL_ID[] = "driver-model-000000000000000000000000000000000000000000000000000";

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint32_t fnv(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* A message body that carries its own checksum: "TEXT #xxxxxxxx". */
static char *make_content(int seed, int iter, const char *what)
{
    static const char *words[] = {"apple",  "river", "engine", "token",  "cache",    "window",
                                  "zürich", "日本",  "prefix", "branch", "snapshot", "quiet"};
    size_t cap = 4096;
    char *s = malloc(cap);
    int n = snprintf(s, cap, "%s s%d i%d", what, seed, iter);
    int nw = 3 + (int)(rnd() % 40);
    for (int i = 0; i < nw; i++) n += snprintf(s + n, cap - (size_t)n, " %s", words[rnd() % 12]);
    snprintf(s + n, cap - (size_t)n, " #%08x", fnv(s, (size_t)n));
    return s;
}

static int content_ok(const char *s)
{
    const char *hash = strrchr(s, '#');
    if (!hash || hash == s || strlen(hash) != 9) return 0;
    char want[9];
    snprintf(want, sizeof want, "%08x", fnv(s, (size_t)(hash - 1 - s)));
    return strcmp(hash + 1, want) == 0;
}

/* A snapshot blob determined by its first id and size: runs and noise, so
** it compresses partly, as a KV cache does. */
static void fill_blob(unsigned char *b, size_t n, int32_t key)
{
    uint64_t s = (uint64_t)(uint32_t)key * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        if (i % 256 == 0) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
        }
        b[i] = (i / 16) % 3 ? (unsigned char)(s >> ((i % 8) * 8)) : (unsigned char)(i >> 4);
    }
}

static FILE *log_file;
static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...)
{
    if (!log_file) return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* One write per line: a kill leaves whole lines, or a torn last one. */
    if (n > 0 && write(fileno(log_file), buf, (size_t)n) < 0) perror("log");
}

static int failures, consecutive;
/* Report a failed write in one line, as the chat does, and count it. */
static int report(int rc)
{
    if (rc) {
        fprintf(stderr, "radiance: %s\n", rad_error_message());
        failures++;
        consecutive++;
    } else {
        consecutive = 0;
    }
    return rc;
}

/* ------------------------------------------------------------ write */

typedef struct Live {
    char id[RAD_SESSION_ID_LEN + 1];
    int64_t last_user;
} Live;

static int cmd_write(const char *path, int argc, char **argv)
{
    int seed = 1, count = -1, free_after = 0;
    int64_t budget = 4 << 20, size_limit = 0;
    const char *filler = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--count") && i + 1 < argc)
            count = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--log") && i + 1 < argc)
            log_file = fopen(argv[++i], "a");
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc)
            budget = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--free-after") && i + 1 < argc)
            free_after = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--filler") && i + 1 < argc)
            filler = argv[++i];
        else if (!strcmp(argv[i], "--size-limit") && i + 1 < argc)
            size_limit = atoll(argv[++i]);
        else
            return fprintf(stderr, "write: unknown argument %s\n", argv[i]), 2;
    }
    rng_state = 0x1234567ull * (uint64_t)(seed + 1);
    RadSessionDb *db;
    if (rad_sdb_open(path, &db)) return fprintf(stderr, "radiance: %s\n", rad_error_message()), 1;
    rad_sdb_set_snapshot_budget(db, budget);
    if (size_limit) rad_sdb_set_size_limit(db, size_limit);
    Live live[4] = {0};
    int n_live = 0, ok_writes = 0, ok_after_free = 0, freed = 0;
    for (int iter = 0; count < 0 || iter < count; iter++) {
        if (free_after && !freed && consecutive >= free_after) {
            if (filler) unlink(filler);
            if (size_limit) rad_sdb_set_size_limit(db, 1LL << 40);
            freed = 1;
            fprintf(stderr, "driver: made room after %d failed writes\n", failures);
        }
        int before = failures;
        unsigned what = (unsigned)(rnd() % 100);
        if (n_live == 0 || what < 8) {
            char id[RAD_SESSION_ID_LEN + 1];
            RadSessionFields f = {.model_id = MODEL_ID,
                                  .model_name = "driver",
                                  .system_prompt = "be brief",
                                  .sampler_json = "{\"temperature\":0.5}"};
            if (!report(rad_session_create(db, &f, id))) {
                log_line("S %s\n", id);
                if (n_live == 4) memmove(live, live + 1, 3 * sizeof *live), n_live = 3;
                snprintf(live[n_live].id, sizeof live[0].id, "%s", id);
                live[n_live++].last_user = 0;
            }
        } else if (what < 11 && n_live > 1) {
            /* Remove the oldest live session; "r" before and "R" after, so
            ** a kill in between leaves the checker knowing either is fine. */
            log_line("r %s\n", live[0].id);
            if (!report(rad_session_remove(db, live[0].id))) {
                log_line("R %s\n", live[0].id);
                memmove(live, live + 1, (size_t)(n_live - 1) * sizeof *live);
                n_live--;
            }
        } else if (what < 75) {
            Live *l = &live[rnd() % (unsigned)n_live];
            char *q = make_content(seed, iter, "user");
            RadMessage m = {.role = "user", .content = q};
            int64_t id;
            if (!report(rad_session_add_message(db, l->id, RAD_PARENT_LEAF, &m, &id))) {
                log_line("M %s %lld\n", l->id, (long long)id);
                l->last_user = id;
                char *a = make_content(seed, iter, "assistant");
                RadMessage r = {.role = "assistant",
                                .content = a,
                                .reasoning = "thinking #00000000",
                                .completion_tokens = 12,
                                .prompt_tokens = 40,
                                .finish = "stop",
                                .tool_calls_json = "[{\"name\":\"f\",\"arguments\":{}}]",
                                .model_id = MODEL_ID};
                if (!report(rad_session_add_message(db, l->id, RAD_PARENT_LEAF, &r, &id)))
                    log_line("M %s %lld\n", l->id, (long long)id);
                free(a);
            }
            free(q);
        } else if (what < 82) {
            /* /retry: another reply under the last question (a fork). */
            Live *l = &live[rnd() % (unsigned)n_live];
            if (l->last_user) {
                char *a = make_content(seed, iter, "retry");
                RadMessage r = {.role = "assistant", .content = a, .finish = "interrupted"};
                int64_t id;
                if (!report(rad_session_add_message(db, l->id, l->last_user, &r, &id))) {
                    log_line("M %s %lld\n", l->id, (long long)id);
                    char *b = make_content(seed, iter, "rewritten");
                    RadMessage u = {.content = b, .finish = "stop", .completion_tokens = 30};
                    if (!report(rad_session_update_message(db, id, &u)))
                        log_line("M %s %lld\n", l->id, (long long)id);
                    free(b);
                }
                free(a);
            }
        } else {
            Live *l = &live[rnd() % (unsigned)n_live];
            int n = 8 + (int)(rnd() % 300);
            int32_t *toks = malloc((size_t)n * sizeof *toks);
            for (int i = 0; i < n; i++) toks[i] = (int32_t)(rnd() % 50000);
            size_t size = 4096 + (size_t)(rnd() % (200 * 1024));
            unsigned char *blob = malloc(size);
            fill_blob(blob, size, toks[0]);
            if (!report(rad_snapshot_save(db, MODEL_ID, l->id, toks, n, blob, size)))
                log_line("K %s %d\n", l->id, n);
            free(blob);
            free(toks);
        }
        if (failures == before) {
            ok_writes++;
            if (freed) ok_after_free++;
        }
    }
    printf("writes: %d ok, %d failed, %d ok after making room\n", ok_writes, failures, ok_after_free);
    rad_sdb_close(db);
    if (log_file) fclose(log_file);
    return 0;
}

/* ------------------------------------------------------------ check */

static int fail(const char *fmt, const char *a, long long b)
{
    printf("check: FAIL: ");
    printf(fmt, a, b);
    printf("\n");
    return 1;
}

static int cmd_check(const char *path, int argc, char **argv)
{
    const char *logpath = NULL;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--log") && i + 1 < argc) logpath = argv[++i];
    RadSessionDb *db;
    if (rad_sdb_open(path, &db)) return printf("check: FAIL: open: %s\n", rad_error_message()), 1;
    if (rad_sdb_check(db)) return printf("check: FAIL: %s\n", rad_error_message()), 1;
    RadSession *v;
    int n, msgs = 0, snaps = 0;
    if (rad_session_list(db, 0, &v, &n)) return printf("check: FAIL: list: %s\n", rad_error_message()), 1;
    for (int i = 0; i < n; i++) {
        RadMessageList all, branch;
        if (rad_session_messages(db, v[i].id, &all) || rad_session_branch(db, v[i].id, 0, &branch))
            return printf("check: FAIL: read %s: %s\n", v[i].id, rad_error_message()), 1;
        if (all.n != v[i].n_messages) return fail("session %s: count differs (%lld)", v[i].id, all.n);
        /* The driver's own sessions carry checksums; others (demo) do not. */
        for (int k = 0; k < all.n && !strcmp(v[i].model_name, "driver"); k++)
            if (!content_ok(all.v[k].content))
                return fail("session %s: message %lld is damaged", v[i].id, all.v[k].id);
        if (all.n && branch.n == 0) return fail("session %s: no branch (%lld messages)", v[i].id, all.n);
        if (branch.n && branch.v[branch.n - 1].id != v[i].leaf_id)
            return fail("session %s: leaf %lld", v[i].id, 0);
        msgs += all.n;
        rad_message_list_free(&all);
        rad_message_list_free(&branch);
        RadSnapshot s;
        RadSnapshotStatus st;
        char notice[512];
        if (rad_snapshot_find_session(db, v[i].id, MODEL_ID, &s, &st, notice, sizeof notice))
            return printf("check: FAIL: snapshot of %s: %s\n", v[i].id, rad_error_message()), 1;
        if (st == RAD_SNAPSHOT_IGNORED) return fail("session %s: snapshot ignored (%lld)", v[i].id, 0);
        if (st == RAD_SNAPSHOT_FOUND) {
            unsigned char *want = malloc(s.size);
            fill_blob(want, s.size, s.tokens[0]);
            if (memcmp(want, s.data, s.size) != 0)
                return fail("session %s: snapshot differs (%lld)", v[i].id, 0);
            free(want);
            snaps++;
        }
        rad_snapshot_free(&s);
    }
    /* Every write the log says committed is there. */
    int logged = 0;
    if (logpath) {
        FILE *f = fopen(logpath, "r");
        sqlite3 *raw;
        sqlite3_stmt *has;
        if (sqlite3_open_v2(path, &raw, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(raw, "SELECT 1 FROM messages WHERE id = ?1 AND session_id = ?2", -1, &has,
                               NULL) != SQLITE_OK)
            return fail("%s: cannot read the messages (%lld)", path, 0);
        char line[256], kind, sid[64];
        long long id;
        /* "r"/"R" lines first: sessions that may legitimately be gone. */
        char(*gone)[RAD_SESSION_ID_LEN + 1] = NULL;
        int ngone = 0;
        while (f && fgets(line, sizeof line, f))
            if (strchr(line, '\n') && sscanf(line, "%c %63s", &kind, sid) == 2 &&
                (kind == 'r' || kind == 'R')) {
                gone = realloc(gone, (size_t)(ngone + 1) * sizeof *gone);
                snprintf(gone[ngone++], sizeof gone[0], "%.16s", sid);
            }
        if (f) rewind(f);
        while (f && fgets(line, sizeof line, f)) {
            if (!strchr(line, '\n')) continue; /* torn by the kill */
            int k = sscanf(line, "%c %63s %lld", &kind, sid, &id);
            int is_gone = 0;
            for (int g = 0; g < ngone; g++) is_gone |= !strcmp(gone[g], sid);
            if (is_gone || k < 2) continue;
            RadSession s;
            if (rad_session_get(db, sid, &s)) return fail("logged session %s is missing (%lld)", sid, 0);
            rad_session_free(&s);
            if (kind == 'M' && k == 3) {
                sqlite3_reset(has);
                sqlite3_bind_int64(has, 1, id);
                sqlite3_bind_text(has, 2, sid, -1, SQLITE_TRANSIENT);
                if (sqlite3_step(has) != SQLITE_ROW)
                    return fail("session %s: logged message %lld is missing", sid, id);
            }
            logged++;
        }
        free(gone);
        if (f) fclose(f);
        sqlite3_finalize(has);
        sqlite3_close(raw);
    }
    printf("check: ok: %d sessions, %d messages, %d snapshots, %d logged writes found\n", n, msgs, snaps,
           logged);
    rad_session_list_free(v, n);
    rad_sdb_close(db);
    return 0;
}

/* ------------------------------------------------------------ the engine */

static int parse_ids(const char *text, int32_t **out)
{
    int n = 1;
    for (const char *p = text; *p; p++) n += *p == ',';
    *out = malloc((size_t)n * sizeof **out);
    char *end;
    n = 0;
    for (const char *p = text; *p;) {
        (*out)[n++] = (int32_t)strtol(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p) break;
    }
    return n;
}

static RadEngine *open_engine(const char *model)
{
    /* One thread: this checks snapshots, not the pool, and stays exact. */
    RadEngineOptions opt = {.model_path = model, .kv_type = "f32", .max_ctx = 256, .n_threads = 1};
    RadEngine *e = NULL;
    if (rad_engine_open(&opt, &e)) {
        fprintf(stderr, "engine: %s\n", rad_error_message());
        exit(1);
    }
    return e;
}

static int cmd_engine_save(const char *path, int argc, char **argv)
{
    if (argc < 2) return 2;
    const char *as = argc >= 4 && !strcmp(argv[2], "--as-model") ? argv[3] : NULL;
    int32_t *ids;
    int n = parse_ids(argv[1], &ids);
    RadEngine *e = open_engine(argv[0]);
    int seq;
    void *blob;
    size_t size;
    RadSessionDb *db;
    if (rad_engine_seq_new(e, &seq) || rad_engine_eval(e, seq, ids, n, NULL) ||
        rad_engine_seq_snapshot(e, seq, &blob, &size) || rad_sdb_open(path, &db) ||
        rad_snapshot_save(db, as ? as : rad_engine_model_id(e), NULL, ids, n, blob, size))
        return fprintf(stderr, "engine-save: %s\n", rad_error_message()), 1;
    int64_t stored;
    rad_snapshot_usage(db, NULL, NULL, &stored, NULL);
    printf("saved %d positions: %zu bytes, %lld stored in all\n", n, size, (long long)stored);
    free(blob);
    rad_sdb_close(db);
    rad_engine_close(e);
    free(ids);
    return 0;
}

static int cmd_engine_check(const char *path, int argc, char **argv)
{
    if (argc < 2) return 2;
    int32_t *ids;
    int n = parse_ids(argv[1], &ids);
    RadEngine *e = open_engine(argv[0]);
    int nv = rad_engine_n_vocab(e);
    float *fresh = malloc((size_t)nv * sizeof *fresh), *resumed = malloc((size_t)nv * sizeof *resumed);
    int a, b;
    if (rad_engine_seq_new(e, &a) || rad_engine_eval(e, a, ids, n, fresh))
        return fprintf(stderr, "engine-check: %s\n", rad_error_message()), 1;
    rad_engine_seq_free(e, a);
    RadSessionDb *db;
    RadSnapshot s;
    RadSnapshotStatus st;
    char notice[512];
    if (rad_sdb_open(path, &db) || rad_engine_seq_new(e, &b) ||
        rad_snapshot_find(db, rad_engine_model_id(e), ids, n, &s, &st, notice, sizeof notice))
        return fprintf(stderr, "engine-check: %s\n", rad_error_message()), 1;
    int restored = 0;
    if (st == RAD_SNAPSHOT_FOUND) {
        if (rad_engine_seq_restore(e, b, s.data, s.size) != RAD_OK) {
            /* The engine refused it: the same notice, then evaluate it all. */
            printf("notice: KV snapshot ignored (%s); the prompt is evaluated again\n", rad_error_message());
        } else {
            restored = s.n_tokens;
            if (restored == n) rad_engine_seq_truncate(e, b, --restored); /* the last id yields the logits */
        }
    }
    if (notice[0] && st != RAD_SNAPSHOT_FOUND)
        printf("notice: %s\n", notice);
    else if (notice[0])
        printf("notice: %s\n", notice);
    rad_snapshot_free(&s);
    if (rad_engine_eval(e, b, ids + restored, n - restored, resumed))
        return fprintf(stderr, "engine-check: %s\n", rad_error_message()), 1;
    double diff = 0;
    for (int i = 0; i < nv; i++) diff = fmax(diff, fabs((double)fresh[i] - (double)resumed[i]));
    printf("restored %d of %d; evaluated %d; max|logit diff| %.3g\n", restored, n, n - restored, diff);
    rad_sdb_close(db);
    rad_engine_close(e);
    free(fresh);
    free(resumed);
    free(ids);
    return diff < 1e-4 ? 0 : 1;
}

static int cmd_damage(const char *path, const char *how)
{
    sqlite3 *h;
    if (sqlite3_open(path, &h) != SQLITE_OK) return 1;
    if (!strcmp(how, "zstd")) {
        /* Bytes in the middle of the frame: its checksum no longer holds. */
        const char *sql =
            "UPDATE snapshots SET data = CAST(substr(data, 1, length(data) / 2) || x'a5a5a5a5a5a5a5a5'"
            " || substr(data, length(data) / 2 + 9) AS BLOB)";
        int rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
        printf("damaged %d snapshots\n", sqlite3_changes(h));
        sqlite3_close(h);
        return rc != SQLITE_OK;
    }
    sqlite3_close(h);
    if (strcmp(how, "truncate") != 0) return 2;
    /* The engine's blob cut in half, compressed and hashed as a good one. */
    RadSessionDb *db;
    if (rad_sdb_open(path, &db)) return 1;
    sqlite3_stmt *st;
    sqlite3 *raw;
    sqlite3_open(path, &raw);
    sqlite3_prepare_v2(raw, "SELECT model_id, tokens FROM snapshots", -1, &st, NULL);
    int done = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *model = (const char *)sqlite3_column_text(st, 0);
        int n = sqlite3_column_bytes(st, 1) / 4;
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        memcpy(ids, sqlite3_column_blob(st, 1), (size_t)n * 4); /* little-endian hosts only, like the tests */
        RadSnapshot s;
        RadSnapshotStatus stt;
        if (!rad_snapshot_find(db, model, ids, n, &s, &stt, NULL, 0) && stt == RAD_SNAPSHOT_FOUND) {
            if (!rad_snapshot_save(db, model, NULL, ids, n, s.data, s.size / 2)) done++;
        }
        rad_snapshot_free(&s);
        free(ids);
    }
    sqlite3_finalize(st);
    sqlite3_close(raw);
    rad_sdb_close(db);
    printf("truncated %d snapshots\n", done);
    return done ? 0 : 1;
}

/* ------------------------------------------------------------ demo and json */

static int cmd_demo(const char *path)
{
    RadSessionDb *db;
    char id[RAD_SESSION_ID_LEN + 1];
    RadSessionFields f = {.model_name = "tiny", .model_id = MODEL_ID, .system_prompt = "You are terse."};
    RadMessage sys = {.role = "system", .content = "You are terse."};
    RadMessage q = {.role = "user", .content = "What is the capital of France?"};
    RadMessage a1 = {.role = "assistant", .content = "Paris, probably.", .finish = "stop"};
    RadMessage a2 = {.role = "assistant",
                     .content = "It is **Paris**.",
                     .reasoning = "The capital is well known.",
                     .completion_tokens = 6,
                     .prompt_tokens = 21,
                     .prompt_evaluated = 21,
                     .ttft_ms = 12.5,
                     .decode_ms = 40,
                     .finish = "stop",
                     .sampler_json = "{\"temperature\":0}"};
    int64_t qid;
    if (rad_sdb_open(path, &db) || rad_session_create(db, &f, id) ||
        rad_session_add_message(db, id, RAD_PARENT_LEAF, &sys, NULL) ||
        rad_session_add_message(db, id, RAD_PARENT_LEAF, &q, &qid) ||
        rad_session_add_message(db, id, RAD_PARENT_LEAF, &a1, NULL) ||
        rad_session_add_message(db, id, qid, &a2, NULL))
        return fprintf(stderr, "demo: %s\n", rad_error_message()), 1;
    printf("%s\n", id);
    rad_sdb_close(db);
    return 0;
}

static int cmd_json(const char *file, const char *path)
{
    json_error_t err;
    json_t *j = json_load_file(file, JSON_DECODE_ANY, &err);
    if (!j) return printf("json: %s: line %d: %s\n", file, err.line, err.text), 1;
    json_t *v = j;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *part = strtok(buf, "."); part && v; part = strtok(NULL, ".")) {
        if (!strcmp(part, "#")) {
            printf("%zu\n", json_is_array(v) ? json_array_size(v) : json_object_size(v));
            json_decref(j);
            return 0;
        }
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(part)) : json_object_get(v, part);
    }
    if (!v)
        printf("(missing)\n");
    else if (json_is_string(v))
        printf("%s\n", json_string_value(v));
    else {
        char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        printf("%s\n", t);
        free(t);
    }
    json_decref(j);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fputs("usage: session_driver write|check|engine-save|engine-check|damage DB ...\n", stderr);
        return 2;
    }
    const char *cmd = argv[1], *db = argv[2];
    if (!strcmp(cmd, "write")) return cmd_write(db, argc - 3, argv + 3);
    if (!strcmp(cmd, "check")) return cmd_check(db, argc - 3, argv + 3);
    if (!strcmp(cmd, "engine-save")) return cmd_engine_save(db, argc - 3, argv + 3);
    if (!strcmp(cmd, "engine-check")) return cmd_engine_check(db, argc - 3, argv + 3);
    if (!strcmp(cmd, "demo")) return cmd_demo(db);
    if (!strcmp(cmd, "model-id") && argc > 3) {
        RadEngine *e = open_engine(argv[3]);
        printf("%s\n", rad_engine_model_id(e));
        rad_engine_close(e);
        return 0;
    }
    if (!strcmp(cmd, "json") && argc > 3) return cmd_json(db, argv[3]);
    if (!strcmp(cmd, "damage") && argc > 3) return cmd_damage(db, argv[3]);
    fprintf(stderr, "session_driver: unknown command %s\n", cmd);
    return 2;
}
