/*
** session_messages.c: a session's messages and the search over them.
**
** Messages form a tree per session: each row names its parent, a retried
** reply or an edited question is a new sibling, and sessions.leaf_id names
** the end of the branch on show.  A parent always exists before its child,
** so ids grow down every branch and walking up from a leaf ends.  The
** full-text index (messages_fts, FTS5 over content) is kept by triggers
** that the schema in session_db.c defines, so it changes in the same
** transaction as the rows.
*/
#include "session_db_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ messages */

static int valid_role(const char *role)
{
    return role && (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant") ||
                    !strcmp(role, "tool"));
}

static int check_message(const RadMessage *m)
{
    if (!valid_role(m->role))
        return rad_error_set(RAD_E_ARG, "unknown message role '%s' (system, user, assistant, tool)",
                             m->role ? m->role : "(null)");
    if (m->tool_calls_json && !rad_sdb_valid_json(m->tool_calls_json, 1))
        return rad_error_set(RAD_E_ARG, "tool calls are not a JSON array: %.60s", m->tool_calls_json);
    if (m->sampler_json && !rad_sdb_valid_json(m->sampler_json, 0))
        return rad_error_set(RAD_E_ARG, "sampler settings are not a JSON object: %.60s", m->sampler_json);
    return RAD_OK;
}

/* A title from a first user message: its first line with runs of spaces
** made one, cut to at most 60 bytes on a character boundary ("..." marks
** the cut).  out holds at least 64 bytes. */
static void title_from(const char *text, char *out, size_t cap)
{
    enum { MAX = 60 };
    char line[MAX + 8];
    size_t n = 0;
    int space = 0, cut = 0;
    for (const char *p = text; *p && *p != '\n'; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\r') {
            space = n > 0;
            continue;
        }
        if (n + space + 1 > MAX) {
            cut = 1;
            break;
        }
        if (space) line[n++] = ' ', space = 0;
        line[n++] = *p;
    }
    if (cut) {
        n = MAX - 3;
        while (n > 0 && ((unsigned char)line[n] & 0xC0) == 0x80) n--; /* not inside a character */
        while (n > 0 && line[n - 1] == ' ') n--;
        memcpy(line + n, "...", 3);
        n += 3;
    }
    line[n] = 0;
    snprintf(out, cap, "%s", line);
}

/* The session a message belongs to, into sid; RAD_E_NOTFOUND when none. */
static int message_session(RadSessionDb *db, int64_t id, char sid[RAD_SESSION_ID_LEN + 1])
{
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(db, "SELECT session_id FROM messages WHERE id = ?1", &st, "reading a message");
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, id);
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW)
        snprintf(sid, RAD_SESSION_ID_LEN + 1, "%s", (const char *)sqlite3_column_text(st, 0));
    else if (src == SQLITE_DONE)
        rc = rad_error_set(RAD_E_NOTFOUND, "no message %lld", (long long)id);
    else
        rc = rad_sdb_fail(db, "reading a message");
    sqlite3_finalize(st);
    return rc;
}

int rad_session_add_message(RadSessionDb *db, const char *session_id, int64_t parent, const RadMessage *m,
                            int64_t *id_out)
{
    if (id_out) *id_out = 0;
    int rc = check_message(m);
    if (rc) return rc;
    const char *doing = "saving a message";
    rc = rad_sdb_begin(db, doing);
    if (rc) return rc;
    sqlite3_stmt *st;
    char title[80] = "";
    int untitled = 0;
    rc = rad_sdb_prep(db, "SELECT coalesce(leaf_id, 0), title = '' FROM sessions WHERE id = ?1", &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, session_id);
        int src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            if (parent == RAD_PARENT_LEAF) parent = sqlite3_column_int64(st, 0);
            untitled = sqlite3_column_int(st, 1);
        } else {
            rc = src == SQLITE_DONE ? rad_error_set(RAD_E_NOTFOUND, "no session %s", session_id)
                                    : rad_sdb_fail(db, doing);
        }
        sqlite3_finalize(st);
    }
    if (!rc && parent < 0) rc = rad_error_set(RAD_E_ARG, "bad parent message %lld", (long long)parent);
    if (!rc && parent > 0) {
        char owner[RAD_SESSION_ID_LEN + 1];
        rc = message_session(db, parent, owner);
        if (!rc && strcmp(owner, session_id) != 0)
            rc = rad_error_set(RAD_E_ARG, "message %lld belongs to session %s, not %s", (long long)parent,
                               owner, session_id);
    }
    if (!rc)
        rc = rad_sdb_prep(
            db,
            "INSERT INTO messages (session_id, parent_id, role, content, reasoning, tool_calls, n_tokens,"
            " prompt_tokens, prompt_evaluated, completion_tokens, prefill_ms, ttft_ms, decode_ms, finish,"
            " sampler, model_id, model_name, created_ms)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
            &st, doing);
    int64_t t = rad_sdb_now_ms(), id = 0;
    if (!rc) {
        rad_sdb_bind_text(st, 1, session_id);
        if (parent > 0)
            sqlite3_bind_int64(st, 2, parent);
        else
            sqlite3_bind_null(st, 2);
        rad_sdb_bind_text(st, 3, m->role);
        rad_sdb_bind_text(st, 4, m->content ? m->content : "");
        rad_sdb_bind_text(st, 5, m->reasoning);
        rad_sdb_bind_text(st, 6, m->tool_calls_json);
        sqlite3_bind_int(st, 7, m->n_tokens);
        sqlite3_bind_int(st, 8, m->prompt_tokens);
        sqlite3_bind_int(st, 9, m->prompt_evaluated);
        sqlite3_bind_int(st, 10, m->completion_tokens);
        sqlite3_bind_double(st, 11, m->prefill_ms);
        sqlite3_bind_double(st, 12, m->ttft_ms);
        sqlite3_bind_double(st, 13, m->decode_ms);
        rad_sdb_bind_text(st, 14, m->finish);
        rad_sdb_bind_text(st, 15, m->sampler_json);
        rad_sdb_bind_text(st, 16, m->model_id);
        rad_sdb_bind_text(st, 17, m->model_name);
        sqlite3_bind_int64(st, 18, t);
        rc = rad_sdb_run(db, st, doing);
        id = sqlite3_last_insert_rowid(db->db);
    }
    if (!rc && untitled && !strcmp(m->role, "user") && m->content)
        title_from(m->content, title, sizeof title);
    if (!rc)
        rc = rad_sdb_prep(db,
                          "UPDATE sessions SET leaf_id = ?2, updated_ms = ?3,"
                          " title = CASE WHEN title = '' THEN ?4 ELSE title END WHERE id = ?1",
                          &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, session_id);
        sqlite3_bind_int64(st, 2, id);
        sqlite3_bind_int64(st, 3, t);
        rad_sdb_bind_text(st, 4, title);
        rc = rad_sdb_run(db, st, doing);
    }
    rc = rad_sdb_end(db, rc, doing);
    if (!rc && id_out) *id_out = id;
    return rc;
}

int rad_session_update_message(RadSessionDb *db, int64_t id, const RadMessage *m)
{
    RadMessage check = *m;
    check.role = "user"; /* the role is not rewritten */
    int rc = check_message(&check);
    if (rc) return rc;
    const char *doing = "saving a message";
    rc = rad_sdb_begin(db, doing);
    if (rc) return rc;
    sqlite3_stmt *st;
    rc = rad_sdb_prep(db,
                      "UPDATE messages SET content = ?2, reasoning = ?3, tool_calls = ?4, n_tokens = ?5,"
                      " prompt_tokens = ?6, prompt_evaluated = ?7, completion_tokens = ?8, prefill_ms = ?9,"
                      " ttft_ms = ?10, decode_ms = ?11, finish = ?12,"
                      " sampler = coalesce(?13, sampler), model_id = coalesce(?14, model_id),"
                      " model_name = coalesce(?15, model_name) WHERE id = ?1",
                      &st, doing);
    if (!rc) {
        sqlite3_bind_int64(st, 1, id);
        rad_sdb_bind_text(st, 2, m->content ? m->content : "");
        rad_sdb_bind_text(st, 3, m->reasoning);
        rad_sdb_bind_text(st, 4, m->tool_calls_json);
        sqlite3_bind_int(st, 5, m->n_tokens);
        sqlite3_bind_int(st, 6, m->prompt_tokens);
        sqlite3_bind_int(st, 7, m->prompt_evaluated);
        sqlite3_bind_int(st, 8, m->completion_tokens);
        sqlite3_bind_double(st, 9, m->prefill_ms);
        sqlite3_bind_double(st, 10, m->ttft_ms);
        sqlite3_bind_double(st, 11, m->decode_ms);
        rad_sdb_bind_text(st, 12, m->finish);
        rad_sdb_bind_text(st, 13, m->sampler_json);
        rad_sdb_bind_text(st, 14, m->model_id);
        rad_sdb_bind_text(st, 15, m->model_name);
        rc = rad_sdb_run(db, st, doing);
    }
    if (!rc && sqlite3_changes(db->db) == 0)
        rc = rad_error_set(RAD_E_NOTFOUND, "no message %lld", (long long)id);
    if (!rc)
        rc = rad_sdb_prep(db,
                          "UPDATE sessions SET updated_ms = ?2 WHERE id = (SELECT session_id FROM messages"
                          " WHERE id = ?1)",
                          &st, doing);
    if (!rc) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, rad_sdb_now_ms());
        rc = rad_sdb_run(db, st, doing);
    }
    return rad_sdb_end(db, rc, doing);
}

int rad_session_delete_message(RadSessionDb *db, const char *session_id, int64_t id)
{
    const char *doing = "taking back a message";
    int rc = rad_sdb_begin(db, doing);
    if (rc) return rc;
    sqlite3_stmt *st;
    int64_t parent = 0;
    rc = rad_sdb_prep(db,
                      "SELECT coalesce(parent_id, 0), (SELECT count(*) FROM messages c WHERE c.parent_id = m.id)"
                      " FROM messages m WHERE m.id = ?1 AND m.session_id = ?2",
                      &st, doing);
    if (!rc) {
        sqlite3_bind_int64(st, 1, id);
        rad_sdb_bind_text(st, 2, session_id);
        int src = sqlite3_step(st);
        if (src == SQLITE_ROW) {
            parent = sqlite3_column_int64(st, 0);
            if (sqlite3_column_int(st, 1) > 0)
                rc = rad_error_set(RAD_E_ARG, "message %lld has replies; it cannot be taken back", (long long)id);
        } else {
            rc = src == SQLITE_DONE ? rad_error_set(RAD_E_NOTFOUND, "no message %lld in session %s", (long long)id,
                                                    session_id)
                                    : rad_sdb_fail(db, doing);
        }
        sqlite3_finalize(st);
    }
    if (!rc) rc = rad_sdb_prep(db, "UPDATE sessions SET leaf_id = nullif(?2, 0) WHERE id = ?1", &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, session_id);
        sqlite3_bind_int64(st, 2, parent);
        rc = rad_sdb_run(db, st, doing);
    }
    if (!rc) rc = rad_sdb_prep(db, "DELETE FROM messages WHERE id = ?1", &st, doing);
    if (!rc) {
        sqlite3_bind_int64(st, 1, id);
        rc = rad_sdb_run(db, st, doing);
    }
    return rad_sdb_end(db, rc, doing);
}

int rad_session_set_leaf(RadSessionDb *db, const char *session_id, int64_t leaf)
{
    const char *doing = "switching branches";
    int rc = rad_sdb_begin(db, doing);
    if (rc) return rc;
    char owner[RAD_SESSION_ID_LEN + 1];
    rc = message_session(db, leaf, owner);
    if (!rc && strcmp(owner, session_id) != 0)
        rc = rad_error_set(RAD_E_ARG, "message %lld belongs to session %s, not %s", (long long)leaf, owner,
                           session_id);
    sqlite3_stmt *st;
    /* Down the newest child until a message has none. */
    while (!rc) {
        rc = rad_sdb_prep(db, "SELECT max(id) FROM messages WHERE parent_id = ?1", &st, doing);
        if (rc) break;
        sqlite3_bind_int64(st, 1, leaf);
        int src = sqlite3_step(st);
        int64_t child = src == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
        if (src != SQLITE_ROW) rc = rad_sdb_fail(db, doing);
        sqlite3_finalize(st);
        if (rc || child == 0) break;
        leaf = child;
    }
    if (!rc)
        rc = rad_sdb_prep(db, "UPDATE sessions SET leaf_id = ?2, updated_ms = ?3 WHERE id = ?1", &st, doing);
    if (!rc) {
        rad_sdb_bind_text(st, 1, session_id);
        sqlite3_bind_int64(st, 2, leaf);
        sqlite3_bind_int64(st, 3, rad_sdb_now_ms());
        rc = rad_sdb_run(db, st, doing);
    }
    return rad_sdb_end(db, rc, doing);
}

#define MESSAGE_COLUMNS                                                                                      \
    "m.id, coalesce(m.parent_id, 0), m.role, m.content, m.reasoning, m.tool_calls, m.n_tokens,"              \
    " m.prompt_tokens, m.prompt_evaluated, m.completion_tokens, m.prefill_ms, m.ttft_ms, m.decode_ms,"       \
    " m.finish, m.sampler, m.model_id, m.model_name, m.created_ms"

static void message_free(RadMessage *m)
{
    free((char *)m->role);
    free((char *)m->content);
    free((char *)m->reasoning);
    free((char *)m->tool_calls_json);
    free((char *)m->finish);
    free((char *)m->sampler_json);
    free((char *)m->model_id);
    free((char *)m->model_name);
}

static int read_message(sqlite3_stmt *st, RadMessage *m)
{
    memset(m, 0, sizeof *m);
    m->id = sqlite3_column_int64(st, 0);
    m->parent_id = sqlite3_column_int64(st, 1);
    m->role = rad_sdb_col_str(st, 2, 0);
    m->content = rad_sdb_col_str(st, 3, 0);
    m->reasoning = rad_sdb_col_str(st, 4, 1);
    m->tool_calls_json = rad_sdb_col_str(st, 5, 1);
    m->n_tokens = sqlite3_column_int(st, 6);
    m->prompt_tokens = sqlite3_column_int(st, 7);
    m->prompt_evaluated = sqlite3_column_int(st, 8);
    m->completion_tokens = sqlite3_column_int(st, 9);
    m->prefill_ms = sqlite3_column_double(st, 10);
    m->ttft_ms = sqlite3_column_double(st, 11);
    m->decode_ms = sqlite3_column_double(st, 12);
    m->finish = rad_sdb_col_str(st, 13, 1);
    m->sampler_json = rad_sdb_col_str(st, 14, 1);
    m->model_id = rad_sdb_col_str(st, 15, 1);
    m->model_name = rad_sdb_col_str(st, 16, 1);
    m->created_ms = sqlite3_column_int64(st, 17);
    int lost = !m->role || !m->content;
    for (int i = 4; i <= 16; i++) {
        if (i >= 6 && i <= 12) continue;
        if (sqlite3_column_type(st, i) != SQLITE_NULL) {
            const void *p = i == 4    ? m->reasoning
                            : i == 5  ? m->tool_calls_json
                            : i == 13 ? m->finish
                            : i == 14 ? m->sampler_json
                            : i == 15 ? m->model_id
                                      : m->model_name;
            lost |= p == NULL;
        }
    }
    if (lost) {
        message_free(m);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    return RAD_OK;
}

static int read_messages(RadSessionDb *db, sqlite3_stmt *st, RadMessageList *out, const char *doing)
{
    int rc = RAD_OK, src, cap = 0;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if (out->n == cap) {
            int ncap = cap ? 2 * cap : 16;
            RadMessage *nv = realloc(out->v, (size_t)ncap * sizeof *nv);
            if (!nv) {
                rc = rad_error_set(RAD_E_NOMEM, "out of memory");
                break;
            }
            out->v = nv;
            cap = ncap;
        }
        rc = read_message(st, &out->v[out->n]);
        if (rc) break;
        out->n++;
    }
    if (!rc && src != SQLITE_DONE) rc = rad_sdb_fail(db, doing);
    sqlite3_finalize(st);
    if (rc) rad_message_list_free(out);
    return rc;
}

int rad_session_branch(RadSessionDb *db, const char *session_id, int64_t leaf, RadMessageList *out)
{
    memset(out, 0, sizeof *out);
    const char *doing = "reading a conversation";
    sqlite3_stmt *st;
    int rc;
    if (leaf == 0) {
        RadSession s;
        rc = rad_session_get(db, session_id, &s);
        if (rc) return rc;
        leaf = s.leaf_id;
        rad_session_free(&s);
        if (leaf == 0) return RAD_OK;
    }
    /* Parents always precede their children (a child names a row that
    ** existed), so the walk up ends; depth orders it root first. */
    rc = rad_sdb_prep(db,
                      "WITH RECURSIVE up(id, depth) AS (SELECT ?2, 0"
                      " UNION ALL SELECT p.parent_id, up.depth + 1 FROM messages p JOIN up ON p.id = up.id"
                      " WHERE p.parent_id IS NOT NULL)"
                      " SELECT " MESSAGE_COLUMNS " FROM up JOIN messages m ON m.id = up.id"
                      " WHERE m.session_id = ?1 ORDER BY up.depth DESC",
                      &st, doing);
    if (rc) return rc;
    rad_sdb_bind_text(st, 1, session_id);
    sqlite3_bind_int64(st, 2, leaf);
    rc = read_messages(db, st, out, doing);
    if (!rc && out->n == 0)
        rc = rad_error_set(RAD_E_NOTFOUND, "no message %lld in session %s", (long long)leaf, session_id);
    return rc;
}

int rad_session_messages(RadSessionDb *db, const char *session_id, RadMessageList *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st;
    int rc =
        rad_sdb_prep(db, "SELECT " MESSAGE_COLUMNS " FROM messages m WHERE m.session_id = ?1 ORDER BY m.id",
                     &st, "reading a session's messages");
    if (rc) return rc;
    rad_sdb_bind_text(st, 1, session_id);
    return read_messages(db, st, out, "reading a session's messages");
}

void rad_message_list_free(RadMessageList *l)
{
    for (int i = 0; i < l->n; i++) message_free(&l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

char *rad_session_sampler_json(const RadSamplerParams *p)
{
    /* Past int64 the seed is a string: JSON readers refuse such integers. */
    char seed[32];
    if (p->seed > (uint64_t)INT64_MAX)
        snprintf(seed, sizeof seed, "\"%llu\"", (unsigned long long)p->seed);
    else
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)p->seed);
    char *s = NULL;
    if (asprintf(&s,
                 "{\"temperature\":%.6g,\"top_k\":%d,\"top_p\":%.6g,\"min_p\":%.6g,\"repeat_penalty\":%.6g,"
                 "\"repeat_last_n\":%d,\"seed\":%s}",
                 (double)p->temperature, p->top_k, (double)p->top_p, (double)p->min_p,
                 (double)p->repeat_penalty, p->repeat_last_n, seed) < 0)
        return NULL;
    return s;
}

/* ================================================================ search */

/* The user's words as an FTS5 query: each one a quoted string (so '-', ':',
** AND and quotes mean nothing), a trailing '*' kept as a prefix search. */
static char *fts_query(const char *text)
{
    size_t cap = 3 * strlen(text) + 8, n = 0;
    char *q = malloc(cap);
    if (!q) return NULL;
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        const char *w = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') p++;
        size_t len = (size_t)(p - w);
        int prefix = len > 1 && w[len - 1] == '*';
        if (prefix) len--;
        if (n) q[n++] = ' ';
        q[n++] = '"';
        for (size_t i = 0; i < len; i++) {
            if (w[i] == '"') q[n++] = '"';
            q[n++] = w[i];
        }
        q[n++] = '"';
        if (prefix) q[n++] = '*';
    }
    q[n] = 0;
    return q;
}

int rad_session_search(RadSessionDb *db, const char *text, const char *mark_open, const char *mark_close,
                       int limit, RadSearchHit **out, int *n)
{
    return rad_session_search_kind(db, NULL, text, mark_open, mark_close, limit, out, n);
}

int rad_session_search_kind(RadSessionDb *db, const char *kind, const char *text, const char *mark_open,
                            const char *mark_close, int limit, RadSearchHit **out, int *n)
{
    *out = NULL;
    *n = 0;
    char *q = fts_query(text);
    if (!q) return rad_error_set(RAD_E_NOMEM, "out of memory");
    if (!*q) {
        free(q);
        return rad_error_set(RAD_E_ARG, "nothing to search for");
    }
    const char *doing = "searching messages";
    sqlite3_stmt *st;
    int rc = rad_sdb_prep(db,
                          "SELECT m.session_id, s.title, m.id, m.role,"
                          " snippet(messages_fts, 0, ?2, ?3, '...', 16), m.created_ms"
                          " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
                          " JOIN sessions s ON s.id = m.session_id"
                          " WHERE messages_fts MATCH ?1 AND (?5 IS NULL OR s.kind = ?5)"
                          " ORDER BY rank, m.id LIMIT ?4",
                          &st, doing);
    if (rc) {
        free(q);
        return rc;
    }
    rad_sdb_bind_text(st, 1, q);
    rad_sdb_bind_text(st, 2, mark_open ? mark_open : "");
    rad_sdb_bind_text(st, 3, mark_close ? mark_close : "");
    sqlite3_bind_int(st, 4, limit > 0 ? limit : -1);
    rad_sdb_bind_text(st, 5, kind);
    RadSearchHit *v = NULL;
    int count = 0, cap = 0, src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if (count == cap) {
            int ncap = cap ? 2 * cap : 16;
            RadSearchHit *nv = realloc(v, (size_t)ncap * sizeof *nv);
            if (!nv) {
                rc = rad_error_set(RAD_E_NOMEM, "out of memory");
                break;
            }
            v = nv;
            cap = ncap;
        }
        RadSearchHit *h = &v[count];
        memset(h, 0, sizeof *h);
        snprintf(h->session_id, sizeof h->session_id, "%s", (const char *)sqlite3_column_text(st, 0));
        h->title = rad_sdb_col_str(st, 1, 0);
        h->message_id = sqlite3_column_int64(st, 2);
        h->role = rad_sdb_col_str(st, 3, 0);
        h->snippet = rad_sdb_col_str(st, 4, 0);
        h->created_ms = sqlite3_column_int64(st, 5);
        count++;
        if (!h->title || !h->role || !h->snippet) {
            rc = rad_error_set(RAD_E_NOMEM, "out of memory");
            break;
        }
    }
    if (!rc && src != SQLITE_DONE) rc = rad_sdb_fail(db, doing);
    sqlite3_finalize(st);
    free(q);
    if (rc) {
        rad_search_hits_free(v, count);
        return rc;
    }
    *out = v;
    *n = count;
    return RAD_OK;
}

void rad_search_hits_free(RadSearchHit *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].title);
        free(v[i].role);
        free(v[i].snippet);
    }
    free(v);
}
