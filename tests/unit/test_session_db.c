/*
** test_session_db.c: the session store (app/sessions/session_db.c, session_messages.c,
** session_snapshots.c): schema and versions, sessions and id prefixes, the
** message tree (/retry and /edit as forks), full-text search, removal, and
** KV snapshots: the longest-prefix lookup, blobs from another model, damaged
** blobs and ids, supersession, pruning, and a database that is full.
**
** Each test gets a fresh database in a temporary folder.  Damage is done
** through a second, raw SQLite connection, as a disk or a bug would.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../app/sessions/session_db.h"

static char tmpdir[256];
static char dbpath[300];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/radiance-sdb-XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    snprintf(dbpath, sizeof dbpath, "%s/sub/radiance.db", tmpdir); /* the folder is created on open */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static RadSessionDb *open_db(void)
{
    RadSessionDb *db = NULL;
    int rc = rad_sdb_open(dbpath, &db);
    if (rc) fprintf(stderr, "open: %s\n", rad_error_message());
    assert_int_equal(rc, 0);
    return db;
}

/* Run one statement on a raw connection; returns its first integer column (or 0). */
static long long raw_sql(const char *sql)
{
    sqlite3 *h;
    assert_int_equal(sqlite3_open(dbpath, &h), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    long long v = 0;
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    assert_true(src == SQLITE_ROW || src == SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

static int64_t add(RadSessionDb *db, const char *sid, int64_t parent, const char *role, const char *content)
{
    RadMessage m = {.role = role, .content = content};
    int64_t id = 0;
    int rc = rad_session_add_message(db, sid, parent, &m, &id);
    if (rc) fprintf(stderr, "add: %s\n", rad_error_message());
    assert_int_equal(rc, 0);
    assert_true(id > 0);
    return id;
}

/* The contents along the current branch, joined by '|'. */
static void branch_text(RadSessionDb *db, const char *sid, char *out, size_t cap)
{
    RadMessageList l;
    assert_int_equal(rad_session_branch(db, sid, 0, &l), 0);
    out[0] = 0;
    for (int i = 0; i < l.n; i++) {
        strncat(out, l.v[i].content, cap - strlen(out) - 2);
        if (i + 1 < l.n) strncat(out, "|", cap - strlen(out) - 1);
    }
    rad_message_list_free(&l);
}

/* ------------------------------------------------------------ schema */

static void test_open_schema(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    assert_string_equal(rad_sdb_path(db), dbpath);
    assert_int_equal(rad_sdb_check(db), 0);
    rad_sdb_close(db);
    assert_int_equal(raw_sql("SELECT version FROM schema_versions WHERE component = 'sessions'"),
                     RAD_SESSION_SCHEMA_VERSION);
    /* WAL is a property of the file: a fresh raw connection sees it. */
    sqlite3 *h;
    assert_int_equal(sqlite3_open(dbpath, &h), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(h);
    /* Opening again migrates nothing and keeps the data. */
    db = open_db();
    char id[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, id), 0);
    rad_sdb_close(db);
    db = open_db();
    RadSession s;
    assert_int_equal(rad_session_get(db, id, &s), 0);
    rad_session_free(&s);
    rad_sdb_close(db);
    /* A models table beside ours (model_store.c) is left alone. */
    raw_sql("CREATE TABLE IF NOT EXISTS models (name TEXT)");
    db = open_db();
    rad_sdb_close(db);
    assert_int_equal(raw_sql("SELECT count(*) FROM sqlite_master WHERE name = 'models'"), 1);
}

static void test_newer_schema_refused(void **state)
{
    (void)state;
    rad_sdb_close(open_db());
    raw_sql("UPDATE schema_versions SET version = 99 WHERE component = 'sessions'");
    RadSessionDb *db = NULL;
    assert_int_equal(rad_sdb_open(dbpath, &db), RAD_E_UNSUPPORTED);
    assert_null(db);
    assert_non_null(strstr(rad_error_message(), "version 99"));
}

static void test_not_a_database(void **state)
{
    (void)state;
    char dir[320];
    snprintf(dir, sizeof dir, "%s/sub", tmpdir);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && head -c 8192 /dev/urandom > '%s'", dir, dbpath);
    assert_int_equal(system(cmd), 0);
    RadSessionDb *db = NULL;
    int rc = rad_sdb_open(dbpath, &db);
    assert_int_not_equal(rc, 0);
    assert_null(db);
    assert_non_null(strstr(rad_error_message(), dbpath)); /* one line naming the file */
    assert_null(strchr(rad_error_message(), '\n'));
}

/* ------------------------------------------------------------ sessions */

static void test_sessions(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char a[RAD_SESSION_ID_LEN + 1], b[RAD_SESSION_ID_LEN + 1], got[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_latest(db, got), RAD_E_NOTFOUND);
    RadSessionFields f = {.model_id = "m1",
                          .model_name = "tiny",
                          .system_prompt = "be brief",
                          .sampler_json = "{\"temperature\":0.7}"};
    assert_int_equal(rad_session_create(db, &f, a), 0);
    assert_int_equal(strlen(a), RAD_SESSION_ID_LEN);
    assert_int_equal(strspn(a, "0123456789abcdef"), RAD_SESSION_ID_LEN);
    usleep(2000);
    assert_int_equal(rad_session_create(db, NULL, b), 0);
    assert_string_not_equal(a, b);

    RadSession s;
    assert_int_equal(rad_session_get(db, a, &s), 0);
    assert_string_equal(s.model_id, "m1");
    assert_string_equal(s.model_name, "tiny");
    assert_string_equal(s.system_prompt, "be brief");
    assert_string_equal(s.sampler_json, "{\"temperature\":0.7}");
    assert_string_equal(s.title, "");
    assert_int_equal(s.leaf_id, 0);
    assert_true(s.created_ms > 1600000000000LL);
    rad_session_free(&s);
    assert_int_equal(rad_session_get(db, b, &s), 0);
    assert_null(s.system_prompt);
    assert_null(s.sampler_json);
    rad_session_free(&s);

    /* The newest first; an update moves a session up. */
    assert_int_equal(rad_session_latest(db, got), 0);
    assert_string_equal(got, b);
    usleep(2000);
    RadSessionFields u = {.title = "renamed", .system_prompt = ""};
    assert_int_equal(rad_session_update(db, a, &u), 0);
    assert_int_equal(rad_session_latest(db, got), 0);
    assert_string_equal(got, a);
    assert_int_equal(rad_session_get(db, a, &s), 0);
    assert_string_equal(s.title, "renamed");
    assert_null(s.system_prompt);              /* "" removes it */
    assert_string_equal(s.model_name, "tiny"); /* NULL keeps it */
    rad_session_free(&s);
    RadSession *v;
    int n;
    assert_int_equal(rad_session_list(db, 0, &v, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].id, a);
    rad_session_list_free(v, n);
    assert_int_equal(rad_session_list(db, 1, &v, &n), 0);
    assert_int_equal(n, 1);
    rad_session_list_free(v, n);

    assert_int_equal(rad_session_update(db, "0000000000000000", &u), RAD_E_NOTFOUND);
    RadSessionFields bad = {.sampler_json = "[1,2"};
    assert_int_equal(rad_session_create(db, &bad, got), RAD_E_ARG);
    rad_sdb_close(db);
}

static void test_resolve_prefix(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char a[RAD_SESSION_ID_LEN + 1], got[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, a), 0);
    /* Fixed ids sharing a prefix, made through the raw connection. */
    raw_sql("INSERT INTO sessions (id, created_ms, updated_ms) VALUES ('abcd000000000001', 1, 1)");
    raw_sql("INSERT INTO sessions (id, created_ms, updated_ms) VALUES ('abcd000000000002', 1, 1)");
    raw_sql("INSERT INTO sessions (id, created_ms, updated_ms) VALUES ('abce000000000003', 1, 1)");
    assert_int_equal(rad_session_resolve(db, a, got), 0);
    assert_string_equal(got, a);
    assert_int_equal(rad_session_resolve(db, "abce", got), 0);
    assert_string_equal(got, "abce000000000003");
    assert_int_equal(rad_session_resolve(db, "ABCE", got), 0); /* case does not matter */
    assert_int_equal(rad_session_resolve(db, "abcd", got), RAD_E_ARG);
    assert_non_null(strstr(rad_error_message(), "ambiguous"));
    assert_non_null(strstr(rad_error_message(), "abcd000000000001"));
    assert_int_equal(rad_session_resolve(db, "abcd0000000000021", got), RAD_E_NOTFOUND); /* too long */
    assert_int_equal(rad_session_resolve(db, "abcf", got), RAD_E_NOTFOUND);
    assert_int_equal(rad_session_resolve(db, "", got), RAD_E_NOTFOUND);
    assert_int_equal(rad_session_resolve(db, "ab%", got), RAD_E_NOTFOUND); /* no LIKE wildcards */
    assert_int_equal(rad_session_resolve(db, "ab_d", got), RAD_E_NOTFOUND);
    rad_sdb_close(db);
}

/* ------------------------------------------------------------ messages */

static void test_messages_and_forks(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char sid[RAD_SESSION_ID_LEN + 1], other[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, sid), 0);
    assert_int_equal(rad_session_create(db, NULL, other), 0);
    char text[512];

    int64_t sys = add(db, sid, RAD_PARENT_LEAF, "system", "You are terse.");
    int64_t u1 = add(db, sid, RAD_PARENT_LEAF, "user", "  What is   the capital\tof France?\nAnd why?");
    RadMessage reply = {.role = "assistant",
                        .content = "Paris.",
                        .reasoning = "Easy.",
                        .tool_calls_json = "[]",
                        .n_tokens = 3,
                        .prompt_tokens = 20,
                        .prompt_evaluated = 20,
                        .completion_tokens = 3,
                        .prefill_ms = 12.5,
                        .ttft_ms = 13.0,
                        .decode_ms = 4.0,
                        .finish = "stop",
                        .sampler_json = "{\"temperature\":0}",
                        .model_id = "m1",
                        .model_name = "tiny"};
    int64_t r1;
    assert_int_equal(rad_session_add_message(db, sid, RAD_PARENT_LEAF, &reply, &r1), 0);
    branch_text(db, sid, text, sizeof text);
    assert_string_equal(text, "You are terse.|  What is   the capital\tof France?\nAnd why?|Paris.");

    RadSession s;
    assert_int_equal(rad_session_get(db, sid, &s), 0);
    assert_string_equal(s.title, "What is the capital of France?"); /* first line, spaces collapsed */
    assert_int_equal(s.leaf_id, r1);
    assert_int_equal(s.n_messages, 3);
    rad_session_free(&s);

    /* Everything written comes back. */
    RadMessageList l;
    assert_int_equal(rad_session_branch(db, sid, 0, &l), 0);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.v[0].id, sys);
    assert_int_equal(l.v[0].parent_id, 0);
    assert_int_equal(l.v[1].parent_id, sys);
    const RadMessage *m = &l.v[2];
    assert_int_equal(m->parent_id, u1);
    assert_string_equal(m->role, "assistant");
    assert_string_equal(m->reasoning, "Easy.");
    assert_string_equal(m->tool_calls_json, "[]");
    assert_int_equal(m->n_tokens, 3);
    assert_int_equal(m->prompt_tokens, 20);
    assert_int_equal(m->prompt_evaluated, 20);
    assert_int_equal(m->completion_tokens, 3);
    assert_true(m->prefill_ms == 12.5 && m->ttft_ms == 13.0 && m->decode_ms == 4.0);
    assert_string_equal(m->finish, "stop");
    assert_string_equal(m->sampler_json, "{\"temperature\":0}");
    assert_string_equal(m->model_id, "m1");
    assert_string_equal(m->model_name, "tiny");
    assert_null(l.v[1].reasoning);
    assert_null(l.v[1].finish);
    rad_message_list_free(&l);

    /* /retry: a new reply under the same question; the old one stays. */
    int64_t r2 = add(db, sid, u1, "assistant", "It is Paris.");
    branch_text(db, sid, text, sizeof text);
    assert_non_null(strstr(text, "|It is Paris."));
    assert_null(strstr(text, "|Paris."));
    /* /edit: a new question under the edited one's parent. */
    int64_t u2 = add(db, sid, sys, "user", "What is the capital of Spain?");
    int64_t r3 = add(db, sid, RAD_PARENT_LEAF, "assistant", "Madrid.");
    branch_text(db, sid, text, sizeof text);
    assert_string_equal(text, "You are terse.|What is the capital of Spain?|Madrid.");
    assert_int_equal(rad_session_messages(db, sid, &l), 0);
    assert_int_equal(l.n, 6); /* nothing was overwritten */
    rad_message_list_free(&l);

    /* Back to the first question: through u1 the branch follows its newest reply. */
    assert_int_equal(rad_session_set_leaf(db, sid, u1), 0);
    assert_int_equal(rad_session_get(db, sid, &s), 0);
    assert_int_equal(s.leaf_id, r2);
    rad_session_free(&s);
    assert_int_equal(rad_session_set_leaf(db, sid, r1), 0);
    branch_text(db, sid, text, sizeof text);
    assert_string_equal(text, "You are terse.|  What is   the capital\tof France?\nAnd why?|Paris.");
    /* An explicit older leaf's branch reads without switching. */
    assert_int_equal(rad_session_branch(db, sid, r3, &l), 0);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.v[1].id, u2);
    rad_message_list_free(&l);

    /* Refusals change nothing. */
    RadMessage bad = {.role = "wizard", .content = "x"};
    assert_int_equal(rad_session_add_message(db, sid, RAD_PARENT_LEAF, &bad, NULL), RAD_E_ARG);
    bad.role = "assistant";
    bad.tool_calls_json = "{not json";
    assert_int_equal(rad_session_add_message(db, sid, RAD_PARENT_LEAF, &bad, NULL), RAD_E_ARG);
    bad.tool_calls_json = "{\"an\":\"object\"}";
    assert_int_equal(rad_session_add_message(db, sid, RAD_PARENT_LEAF, &bad, NULL), RAD_E_ARG);
    bad.tool_calls_json = NULL;
    assert_int_equal(rad_session_add_message(db, other, u1, &bad, NULL), RAD_E_ARG); /* parent elsewhere */
    assert_int_equal(rad_session_add_message(db, "ffffffffffffffff", 0, &bad, NULL), RAD_E_NOTFOUND);
    assert_int_equal(rad_session_set_leaf(db, other, r1), RAD_E_ARG);
    assert_int_equal(rad_session_branch(db, other, r1, &l), RAD_E_NOTFOUND);
    assert_int_equal(rad_session_messages(db, sid, &l), 0);
    assert_int_equal(l.n, 6);
    rad_message_list_free(&l);
    assert_int_equal(rad_session_messages(db, other, &l), 0);
    assert_int_equal(l.n, 0);
    rad_message_list_free(&l);
    assert_int_equal(rad_sdb_check(db), 0);
    rad_sdb_close(db);
}

static void test_update_message(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char sid[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, sid), 0);
    add(db, sid, RAD_PARENT_LEAF, "user", "tell me a story");
    int64_t r = add(db, sid, RAD_PARENT_LEAF, "assistant", "Once");
    RadMessage m = {.content = "Once upon a time", .completion_tokens = 4, .finish = "interrupted"};
    assert_int_equal(rad_session_update_message(db, r, &m), 0);
    RadMessageList l;
    assert_int_equal(rad_session_branch(db, sid, 0, &l), 0);
    assert_string_equal(l.v[1].content, "Once upon a time");
    assert_string_equal(l.v[1].role, "assistant"); /* kept */
    assert_string_equal(l.v[1].finish, "interrupted");
    assert_int_equal(l.v[1].completion_tokens, 4);
    rad_message_list_free(&l);
    assert_int_equal(rad_session_update_message(db, 999999, &m), RAD_E_NOTFOUND);
    /* The index follows the rewrite. */
    RadSearchHit *h;
    int n;
    assert_int_equal(rad_session_search(db, "upon", "[", "]", 0, &h, &n), 0);
    assert_int_equal(n, 1);
    rad_search_hits_free(h, n);
    assert_int_equal(rad_sdb_check(db), 0);
    rad_sdb_close(db);
}

static void test_title(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char sid[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, sid), 0);
    add(db, sid, RAD_PARENT_LEAF, "assistant", "Hello! How can I help?"); /* not a user message: no title */
    /* 25 three-byte characters: 75 bytes, cut on a character boundary. */
    char text[200] = "";
    for (int i = 0; i < 25; i++) strcat(text, "\xe6\x97\xa5");
    add(db, sid, RAD_PARENT_LEAF, "user", text);
    add(db, sid, RAD_PARENT_LEAF, "user", "a later question does not rename");
    RadSession s;
    assert_int_equal(rad_session_get(db, sid, &s), 0);
    size_t len = strlen(s.title);
    assert_true(len <= 60);
    assert_string_equal(s.title + len - 3, "...");
    assert_int_equal((len - 3) % 3, 0); /* whole characters */
    assert_memory_equal(s.title, text, len - 3);
    rad_session_free(&s);
    rad_sdb_close(db);
}

/* ------------------------------------------------------------ search and removal */

static void test_search(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char a[RAD_SESSION_ID_LEN + 1], b[RAD_SESSION_ID_LEN + 1];
    RadSessionFields fa = {.title = "cooking"}, fb = {.title = "travel"};
    assert_int_equal(rad_session_create(db, &fa, a), 0);
    assert_int_equal(rad_session_create(db, &fb, b), 0);
    add(db, a, RAD_PARENT_LEAF, "user", "How long do I boil an egg?");
    add(db, a, RAD_PARENT_LEAF, "assistant", "Boil the egg for nine minutes.");
    add(db, b, RAD_PARENT_LEAF, "user", "Which train goes from Zürich to Milano?");
    add(db, b, RAD_PARENT_LEAF, "assistant", "The EuroCity, about 3h20.");

    RadSearchHit *h;
    int n;
    assert_int_equal(rad_session_search(db, "egg", "[", "]", 0, &h, &n), 0);
    assert_int_equal(n, 2);
    for (int i = 0; i < n; i++) {
        assert_string_equal(h[i].session_id, a);
        assert_string_equal(h[i].title, "cooking");
        assert_non_null(strstr(h[i].snippet, "[egg]"));
    }
    rad_search_hits_free(h, n);
    assert_int_equal(rad_session_search(db, "boil nine", "", "", 0, &h, &n), 0); /* every word */
    assert_int_equal(n, 1);
    assert_string_equal(h[0].role, "assistant");
    rad_search_hits_free(h, n);
    assert_int_equal(rad_session_search(db, "zürich", "<", ">", 0, &h, &n), 0); /* case folded, UTF-8 */
    assert_int_equal(n, 1);
    assert_string_equal(h[0].session_id, b);
    assert_non_null(strstr(h[0].snippet, "<Zürich>"));
    rad_search_hits_free(h, n);
    assert_int_equal(rad_session_search(db, "Euro*", "", "", 0, &h, &n), 0); /* prefix */
    assert_int_equal(n, 1);
    rad_search_hits_free(h, n);
    assert_int_equal(rad_session_search(db, "egg", "", "", 1, &h, &n), 0); /* limit */
    assert_int_equal(n, 1);
    rad_search_hits_free(h, n);
    /* FTS5 syntax in the text is taken literally, never an error. */
    const char *odd[] = {"AND", "\"egg", "egg OR train", "-egg", "col:egg", "NEAR(egg train)", "*",
                         "(",   "?",     "egg\"\"",      "^egg"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        int rc = rad_session_search(db, odd[i], "", "", 0, &h, &n);
        if (rc) fprintf(stderr, "search '%s': %s\n", odd[i], rad_error_message());
        assert_int_equal(rc, 0);
        rad_search_hits_free(h, n);
    }
    assert_int_equal(rad_session_search(db, "egg OR train", "", "", 0, &h, &n), 0);
    assert_int_equal(n, 0); /* OR is a word here, and no message has all three */
    rad_search_hits_free(h, n);
    assert_int_equal(rad_session_search(db, "   ", "", "", 0, &h, &n), RAD_E_ARG);
    assert_int_equal(rad_session_search(db, "nothingmatchesthis", "", "", 0, &h, &n), 0);
    assert_int_equal(n, 0);
    rad_search_hits_free(h, n);

    /* Removal takes the messages out of the index too. */
    assert_int_equal(rad_session_remove(db, a), 0);
    assert_int_equal(rad_session_search(db, "egg", "", "", 0, &h, &n), 0);
    assert_int_equal(n, 0);
    rad_search_hits_free(h, n);
    assert_int_equal(rad_sdb_check(db), 0);
    rad_sdb_close(db);
}

static void test_remove(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char a[RAD_SESSION_ID_LEN + 1], b[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, a), 0);
    assert_int_equal(rad_session_create(db, NULL, b), 0);
    int64_t u = add(db, a, RAD_PARENT_LEAF, "user", "q");
    add(db, a, RAD_PARENT_LEAF, "assistant", "r1");
    add(db, a, u, "assistant", "r2"); /* a fork */
    add(db, b, RAD_PARENT_LEAF, "user", "kept");
    int32_t toks[4] = {1, 2, 3, 4};
    char blob[100];
    memset(blob, 7, sizeof blob);
    assert_int_equal(rad_snapshot_save(db, "model-a", a, toks, 4, blob, sizeof blob), 0);
    assert_int_equal(rad_snapshot_save(db, "model-a", b, toks, 2, blob, sizeof blob), 0);
    assert_int_equal(rad_session_remove(db, a), 0);
    RadSession s;
    assert_int_equal(rad_session_get(db, a, &s), RAD_E_NOTFOUND);
    assert_int_equal(rad_session_remove(db, a), RAD_E_NOTFOUND);
    assert_int_equal(raw_sql("SELECT count(*) FROM messages"), 1);
    int count;
    assert_int_equal(rad_snapshot_usage(db, NULL, &count, NULL, NULL), 0);
    assert_int_equal(count, 1); /* the removed session's snapshot went with it */
    assert_int_equal(rad_session_get(db, b, &s), 0);
    assert_int_equal(s.n_messages, 1);
    rad_session_free(&s);
    assert_int_equal(rad_sdb_check(db), 0);
    rad_sdb_close(db);
}

/* ------------------------------------------------------------ KV snapshots */

/* A blob that looks like an engine's: compressible, distinct per seed. */
static void fake_blob(char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++) buf[i] = (char)((i / 64 + (size_t)seed) & 0xff);
}

static void test_snapshot_longest_prefix(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    int32_t toks[64];
    for (int i = 0; i < 64; i++) toks[i] = 1000 + i * 7;
    static char b10[4096], b20[8192], b30[16384];
    fake_blob(b10, sizeof b10, 10);
    fake_blob(b20, sizeof b20, 20);
    fake_blob(b30, sizeof b30, 30);
    assert_int_equal(rad_snapshot_save(db, "model-a", NULL, toks, 10, b10, sizeof b10), 0);
    assert_int_equal(rad_snapshot_save(db, "model-a", NULL, toks, 20, b20, sizeof b20), 0);
    assert_int_equal(rad_snapshot_save(db, "model-a", NULL, toks, 30, b30, sizeof b30), 0);
    int count;
    int64_t stored, raw;
    assert_int_equal(rad_snapshot_usage(db, NULL, &count, &stored, &raw), 0);
    assert_int_equal(count, 3);
    assert_int_equal(raw, sizeof b10 + sizeof b20 + sizeof b30);
    assert_true(stored < raw / 4); /* compressed */

    RadSnapshot snap;
    RadSnapshotStatus st;
    char notice[512];
    /* 25 ids: the 20-prefix is the longest stored. */
    assert_int_equal(rad_snapshot_find(db, "model-a", toks, 25, &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(st, RAD_SNAPSHOT_FOUND);
    assert_int_equal(snap.n_tokens, 20);
    assert_int_equal(snap.size, sizeof b20);
    assert_memory_equal(snap.data, b20, sizeof b20);
    assert_memory_equal(snap.tokens, toks, 20 * sizeof(int32_t));
    rad_snapshot_free(&snap);
    /* Exactly 30, and more than 30. */
    assert_int_equal(rad_snapshot_find(db, "model-a", toks, 30, &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(snap.n_tokens, 30);
    rad_snapshot_free(&snap);
    assert_int_equal(rad_snapshot_find(db, "model-a", toks, 64, &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(snap.n_tokens, 30);
    assert_memory_equal(snap.data, b30, sizeof b30);
    rad_snapshot_free(&snap);
    /* Fewer than any stored, and a conversation that diverges at id 15. */
    assert_int_equal(rad_snapshot_find(db, "model-a", toks, 9, &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(st, RAD_SNAPSHOT_NONE);
    assert_null(snap.data);
    assert_non_null(strstr(notice, "no KV snapshot"));
    int32_t fork[64];
    memcpy(fork, toks, sizeof fork);
    fork[15] = 5;
    assert_int_equal(rad_snapshot_find(db, "model-a", fork, 64, &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(st, RAD_SNAPSHOT_FOUND);
    assert_int_equal(snap.n_tokens, 10);
    rad_snapshot_free(&snap);
    /* Saving the same (model, ids) again replaces it. */
    fake_blob(b20, sizeof b20, 99);
    assert_int_equal(rad_snapshot_save(db, "model-a", NULL, toks, 20, b20, sizeof b20), 0);
    assert_int_equal(rad_snapshot_usage(db, NULL, &count, NULL, NULL), 0);
    assert_int_equal(count, 3);
    assert_int_equal(rad_snapshot_find(db, "model-a", toks, 25, &snap, &st, notice, sizeof notice), 0);
    assert_memory_equal(snap.data, b20, sizeof b20);
    rad_snapshot_free(&snap);
    /* Negative ids and the key's byte order are the documented ones. */
    char key[65];
    int32_t one = -2;
    rad_snapshot_key(&one, 1, key);
    assert_string_equal(key,
                        "b4248c210a2905b94345e1a8414d0e12efcfb2f4f0f2397159a71283397a0ccd"); /* fe ff ff ff */
    int32_t three[3] = {1, 2, 3};
    rad_snapshot_key(three, 3, key);
    assert_string_equal(key, "4636993d3e1da4e9d6b8f87b79e8f7c6d018580d52661950eabc3845c5897a4d");
    assert_int_equal(rad_snapshot_save(db, "model-a", NULL, toks, 0, b10, 10), RAD_E_ARG);
    rad_sdb_close(db);
}

static void test_snapshot_other_model(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char sid[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, sid), 0);
    int32_t toks[8] = {5, 6, 7, 8, 9, 10, 11, 12};
    char blob[2048];
    fake_blob(blob, sizeof blob, 1);
    assert_int_equal(rad_snapshot_save(db, "aaaaaaaaaaaaaaaaaaaa", sid, toks, 8, blob, sizeof blob), 0);
    RadSnapshot snap;
    RadSnapshotStatus st;
    char notice[512];
    assert_int_equal(
        rad_snapshot_find(db, "bbbbbbbbbbbbbbbbbbbb", toks, 8, &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(st, RAD_SNAPSHOT_IGNORED);
    assert_null(snap.data);
    assert_non_null(strstr(notice, "another model"));
    assert_non_null(strstr(notice, "aaaaaaaaaaaa"));
    assert_non_null(strstr(notice, "evaluated again"));
    assert_int_equal(
        rad_snapshot_find_session(db, sid, "bbbbbbbbbbbbbbbbbbbb", &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(st, RAD_SNAPSHOT_IGNORED);
    assert_non_null(strstr(notice, "another model"));
    /* The other model's snapshot is kept: that model can still use it. */
    assert_int_equal(
        rad_snapshot_find_session(db, sid, "aaaaaaaaaaaaaaaaaaaa", &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(st, RAD_SNAPSHOT_FOUND);
    assert_int_equal(snap.n_tokens, 8);
    assert_memory_equal(snap.tokens, toks, sizeof toks);
    rad_snapshot_free(&snap);
    /* The caller drops one the engine refused. */
    assert_int_equal(
        rad_snapshot_find_session(db, sid, "aaaaaaaaaaaaaaaaaaaa", &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(rad_snapshot_remove(db, snap.id), 0);
    rad_snapshot_free(&snap);
    assert_int_equal(
        rad_snapshot_find_session(db, sid, "aaaaaaaaaaaaaaaaaaaa", &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(st, RAD_SNAPSHOT_NONE);
    /* No snapshot at all for a session. */
    char empty[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, empty), 0);
    assert_int_equal(
        rad_snapshot_find_session(db, empty, "aaaaaaaaaaaaaaaaaaaa", &snap, &st, notice, sizeof notice), 0);
    assert_int_equal(st, RAD_SNAPSHOT_NONE);
    rad_sdb_close(db);
}

/* Damage one row through the raw connection, then look it up. */
static void expect_damage_ignored(const char *damage, const char *why)
{
    RadSessionDb *db = open_db();
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = i * 3 + 1;
    static char small[3000], big[9000];
    fake_blob(small, sizeof small, 3);
    fake_blob(big, sizeof big, 4);
    assert_int_equal(rad_snapshot_save(db, "model-a", NULL, toks, 12, small, sizeof small), 0);
    assert_int_equal(rad_snapshot_save(db, "model-a", NULL, toks, 30, big, sizeof big), 0);
    raw_sql(damage);
    RadSnapshot snap;
    RadSnapshotStatus st;
    char notice[512];
    assert_int_equal(rad_snapshot_find(db, "model-a", toks, 40, &snap, &st, notice, sizeof notice), 0);
    /* The damaged 30-prefix is skipped with a notice; the 12-prefix serves. */
    assert_int_equal(st, RAD_SNAPSHOT_FOUND);
    assert_int_equal(snap.n_tokens, 12);
    assert_memory_equal(snap.data, small, sizeof small);
    rad_snapshot_free(&snap);
    if (!strstr(notice, why)) fprintf(stderr, "notice: %s\n", notice);
    assert_non_null(strstr(notice, "KV snapshot of 30 tokens ignored"));
    assert_non_null(strstr(notice, why));
    /* and it is gone, so it is not tried again. */
    int count;
    assert_int_equal(rad_snapshot_usage(db, NULL, &count, NULL, NULL), 0);
    assert_int_equal(count, 1);
    rad_sdb_close(db);
}

static void test_snapshot_damage(void **state)
{
    (void)state;
    /* A flipped byte inside the compressed blob: the frame checksum. */
    expect_damage_ignored(
        "UPDATE snapshots SET data = CAST(substr(data, 1, 20) || x'5a5a5a5a' || substr(data, 25) AS BLOB)"
        " WHERE n_tokens = 30",
        "corrupt");
    teardown(NULL);
    setup(NULL);
    /* A truncated blob. */
    expect_damage_ignored("UPDATE snapshots SET data = substr(data, 1, length(data) / 2) WHERE n_tokens = 30",
                          "corrupt");
    teardown(NULL);
    setup(NULL);
    /* Not zstd at all. */
    expect_damage_ignored("UPDATE snapshots SET data = x'00112233445566778899' WHERE n_tokens = 30",
                          "corrupt");
    teardown(NULL);
    setup(NULL);
    /* Damaged ids no longer match their hash. */
    expect_damage_ignored(
        "UPDATE snapshots SET tokens = CAST(x'02000000' || substr(tokens, 5) AS BLOB) WHERE n_tokens = 30",
        "do not match their hash");
    teardown(NULL);
    setup(NULL);
    /* A stored size that disagrees with the frame. */
    expect_damage_ignored("UPDATE snapshots SET raw_bytes = raw_bytes + 1 WHERE n_tokens = 30", "corrupt");
}

static void test_snapshot_supersede_and_prune(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char sid[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, sid), 0);
    int32_t toks[100];
    for (int i = 0; i < 100; i++) toks[i] = 50000 + i;
    static char blob[32768];
    fake_blob(blob, sizeof blob, 5);
    /* A session saving on each exit keeps only its longest snapshot. */
    assert_int_equal(rad_snapshot_save(db, "m", sid, toks, 10, blob, 1000), 0);
    assert_int_equal(rad_snapshot_save(db, "m", sid, toks, 20, blob, 2000), 0);
    assert_int_equal(rad_snapshot_save(db, "m", NULL, toks, 15, blob, 1500), 0); /* no session: kept */
    assert_int_equal(rad_snapshot_save(db, "m", sid, toks, 40, blob, 4000), 0);
    int count;
    assert_int_equal(rad_snapshot_usage(db, sid, &count, NULL, NULL), 0);
    assert_int_equal(count, 1);
    assert_int_equal(rad_snapshot_usage(db, NULL, &count, NULL, NULL), 0);
    assert_int_equal(count, 2);
    RadSnapshot snap;
    RadSnapshotStatus st;
    assert_int_equal(rad_snapshot_find_session(db, sid, "m", &snap, &st, NULL, 0), 0);
    assert_int_equal(snap.n_tokens, 40);
    rad_snapshot_free(&snap);
    /* A diverging conversation of the same session is not a prefix: kept. */
    int32_t fork[100];
    memcpy(fork, toks, sizeof fork);
    fork[30] = 1;
    assert_int_equal(rad_snapshot_save(db, "m", sid, fork, 50, blob, 5000), 0);
    assert_int_equal(rad_snapshot_usage(db, sid, &count, NULL, NULL), 0);
    assert_int_equal(count, 2);

    /* Pruning: least recently used first, the one being saved never. */
    assert_int_equal(rad_snapshot_prune(db, 0, NULL), 0);
    assert_int_equal(rad_snapshot_usage(db, NULL, &count, NULL, NULL), 0);
    assert_int_equal(count, 0);
    int64_t one;
    for (int k = 1; k <= 6; k++) {
        fake_blob(blob, sizeof blob, k * 31);
        for (size_t i = 0; i < sizeof blob; i += 7) blob[i] = (char)(rand() & 0xff); /* less compressible */
        assert_int_equal(rad_snapshot_save(db, "m", NULL, toks, k * 10, blob, sizeof blob), 0);
        usleep(2000);
    }
    int64_t stored;
    assert_int_equal(rad_snapshot_usage(db, NULL, &count, &stored, NULL), 0);
    assert_int_equal(count, 6);
    one = stored / 6;
    /* Use the oldest (10 ids) so that the 20-prefix becomes the least recent. */
    assert_int_equal(rad_snapshot_find(db, "m", toks, 15, &snap, &st, NULL, 0), 0);
    assert_int_equal(snap.n_tokens, 10);
    rad_snapshot_free(&snap);
    int64_t freed = 0;
    assert_int_equal(rad_snapshot_prune(db, stored - one - one / 2, &freed), 0); /* two must go */
    assert_true(freed > one);
    assert_int_equal(rad_snapshot_usage(db, NULL, &count, NULL, NULL), 0);
    assert_int_equal(count, 4);
    assert_int_equal(rad_snapshot_find(db, "m", toks, 25, &snap, &st, NULL, 0), 0);
    assert_int_equal(snap.n_tokens, 10); /* 20 was pruned, 10 was used recently */
    rad_snapshot_free(&snap);
    assert_int_equal(rad_snapshot_find(db, "m", toks, 35, &snap, &st, NULL, 0), 0);
    assert_int_equal(snap.n_tokens, 10); /* 30 went too */
    rad_snapshot_free(&snap);
    /* The budget applies on save. */
    rad_sdb_set_snapshot_budget(db, one * 2 + one / 2);
    assert_int_equal(rad_snapshot_save(db, "m", NULL, toks, 70, blob, sizeof blob), 0);
    assert_int_equal(rad_snapshot_usage(db, NULL, &count, NULL, NULL), 0);
    assert_int_equal(count, 2);
    assert_int_equal(rad_snapshot_find(db, "m", toks, 100, &snap, &st, NULL, 0), 0);
    assert_int_equal(snap.n_tokens, 70); /* the new one survived */
    rad_snapshot_free(&snap);
    assert_int_equal(rad_sdb_check(db), 0);
    rad_sdb_close(db);
}

/* ------------------------------------------------------------ a full database */

static void test_full(void **state)
{
    (void)state;
    RadSessionDb *db = open_db();
    char sid[RAD_SESSION_ID_LEN + 1];
    assert_int_equal(rad_session_create(db, NULL, sid), 0);
    add(db, sid, RAD_PARENT_LEAF, "user", "before the disk filled");
    assert_int_equal(rad_sdb_set_size_limit(db, 256 * 1024), 0);
    static char big[100000];
    memset(big, 'x', sizeof big - 1);
    int fails = 0, rc = 0;
    for (int i = 0; i < 20 && !fails; i++) {
        RadMessage m = {.role = "user", .content = big};
        rc = rad_session_add_message(db, sid, RAD_PARENT_LEAF, &m, NULL);
        if (rc) fails++;
    }
    assert_int_equal(fails, 1);
    assert_int_equal(rc, RAD_E_IO);
    const char *msg = rad_error_message();
    assert_non_null(strstr(msg, "saving a message"));
    assert_non_null(strstr(msg, "full"));
    assert_null(strchr(msg, '\n'));
    /* A snapshot too. */
    int32_t toks[3] = {1, 2, 3};
    static char noise[400000];
    for (size_t i = 0; i < sizeof noise; i++) noise[i] = (char)(rand() & 0xff);
    assert_int_equal(rad_snapshot_save(db, "m", sid, toks, 3, noise, sizeof noise), RAD_E_IO);
    assert_non_null(strstr(rad_error_message(), "full"));
    /* The handle keeps working: reads, and writes once there is room again. */
    RadMessageList l;
    assert_int_equal(rad_session_branch(db, sid, 0, &l), 0);
    assert_true(l.n >= 1);
    assert_string_equal(l.v[0].content, "before the disk filled");
    int before = l.n;
    rad_message_list_free(&l);
    assert_int_equal(rad_sdb_set_size_limit(db, 64 << 20), 0);
    add(db, sid, RAD_PARENT_LEAF, "user", "after");
    assert_int_equal(rad_session_branch(db, sid, 0, &l), 0);
    assert_int_equal(l.n, before + 1);
    rad_message_list_free(&l);
    assert_int_equal(rad_sdb_check(db), 0);
    rad_sdb_close(db);
}

static void test_sampler_json(void **state)
{
    (void)state;
    RadSamplerParams p;
    rad_sampler_defaults(&p);
    p.seed = 123456789;
    char *s = rad_session_sampler_json(&p);
    assert_non_null(s);
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    assert_non_null(j);
    assert_true(json_is_object(j));
    assert_true(json_real_value(json_object_get(j, "temperature")) > 0.79);
    assert_int_equal(json_integer_value(json_object_get(j, "top_k")), 40);
    assert_int_equal(json_integer_value(json_object_get(j, "seed")), 123456789);
    json_decref(j);
    free(s);
    /* A seed past int64 (which JSON readers such as jansson refuse) is a string. */
    p.seed = 18446744073709551615ULL;
    s = rad_session_sampler_json(&p);
    j = json_loads(s, 0, &err);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "seed")), "18446744073709551615");
    json_decref(j);
    free(s);
}

static void test_default_path(void **state)
{
    (void)state;
    char *p;
    setenv("XDG_DATA_HOME", "/x/data", 1);
    assert_int_equal(rad_sdb_default_path(&p), 0);
    assert_string_equal(p, "/x/data/radiance/radiance.db");
    free(p);
    unsetenv("XDG_DATA_HOME");
    setenv("HOME", "/home/u", 1);
    assert_int_equal(rad_sdb_default_path(&p), 0);
    assert_string_equal(p, "/home/u/.local/share/radiance/radiance.db");
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sessions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolve_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_messages_and_forks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_title, setup, teardown),
        cmocka_unit_test_setup_teardown(test_search, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_longest_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_other_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_damage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_supersede_and_prune, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full, setup, teardown),
        cmocka_unit_test(test_sampler_json),
        cmocka_unit_test(test_default_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
