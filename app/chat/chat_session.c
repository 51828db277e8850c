/*
** chat_session.c: the chat's core, shared by the TUI and line mode: the
** model and conversation, and the session that records it as it goes.
**
** Saving: a session row is created with the first message (opening and
** closing a chat leaves nothing behind); each user turn is written when it
** is sent; a reply is written when it ends, and every few seconds while it
** streams, so a crash loses seconds, not the reply.  Each message hangs
** under the one before it in the conversation, so after /retry or /edit the
** new turn is a sibling of the old: the database keeps both branches.  A
** database that cannot be opened or written is reported once; the chat goes
** on.
**
** The conversation's messages and their rows (database id; for a loaded
** reply, how it ended) are kept side by side (rows[i] for message i).  The context policy drops the oldest turns inside
** rad_conv_reply; the count before and after says how many, and they always
** go from the front (after a system prompt).
**
** KV snapshots: stored on exit and /save, keyed by the model identity;
** resuming restores one so the next reply evaluates only what is new
** (the reply's prompt_evaluated shows it).
*/
#include "chat.h"
#include "draft_setup.h"
#include "../app.h"
#include "../models/model_open.h"
#include "../models/model_store.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <time.h>
#include <unistd.h>

/* How often a streaming reply is written, in milliseconds. */
#define REPLY_SAVE_INTERVAL_MS 3000.0

static void notice(RadChat *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(RadChat *c, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->ui && c->ui->notice) c->ui->notice(c, buf);
}

/* A database write failed: say so (with SQLite's words) and go on. */
static void db_failed(RadChat *c, const char *what)
{
    const char *msg = rad_error_message();
    char buf[1024];
    snprintf(buf, sizeof buf, "%s: %s (the chat goes on; this turn may not be saved)", what,
             msg && msg[0] ? msg : "database error");
    if (c->ui && c->ui->error) c->ui->error(c, buf);
}

/* ------------------------------------------------------------ model */

/* The model's chat format: a plugin serving several model lines gives a
** chooser, resolved against this model's vocabulary. */
static const RadChatFormat *chat_format(const RadEngine *e)
{
    return rad_chat_format_resolve(rad_engine_chat_format(e), rad_engine_text(e));
}

int rad_chat_open_model(RadChat *c)
{
    const RadSettings *s = c->settings;
    double t0 = rad_now_ms();
    RadResolveOptions resolve = {.offline = s->offline, .quiet = s->quiet, .plugin_dir = s->plugins};
    char *path = NULL;
    int rc = rad_model_resolve(c->model_spec, &resolve, &path);
    if (rc) return rc;
    RadEngineOptions opt = {
        .model_path = path, .plugin_dir = s->plugins, .kernels = s->kernels, .n_threads = s->threads,
        .max_ctx = s->ctx, .max_tok = s->batch, .kv_type = s->kv_dtype, .mem_budget = s->mem_budget,
        .stream_experts = s->stream_experts, .expert_cache_bytes = s->expert_cache, .expert_io_depth = s->io_depth,
        .max_spec = s->draft ? (s->draft_max > 0 ? s->draft_max : RAD_DRAFT_MAX_DEFAULT) : 0,
    };
    RadEngine *e = NULL, *draft = NULL;
    RadConv *conv = NULL;
    RadDrafter drafter;
    RadModelOpen loading;
    rad_model_open_prepare(&loading, &opt, c->model_spec, s->quiet);
    rc = rad_engine_open(&opt, &e);
    rad_model_open_done(&loading);
    if (rc || (rc = rad_conv_new(e, chat_format(e), &conv)) ||
        (s->draft && ((rc = rad_draft_open(s->draft, e, &opt, s->offline, s->quiet, &drafter, &draft)) ||
                      (rc = rad_conv_set_drafter(conv, drafter, rad_engine_max_spec(e)))))) {
        rad_conv_free(conv);
        rad_engine_close(draft);
        rad_engine_close(e);
        free(path);
        return rc;
    }
    if (s->system && ((rc = rad_chat_check_text("the system prompt (--system)", s->system)) ||
                      (rc = rad_conv_set_system(conv, s->system)))) {
        rad_conv_free(conv);
        rad_engine_close(draft);
        rad_engine_close(e);
        free(path);
        return rc;
    }
    free(c->model_path);
    c->model_path = path;
    c->engine = e;
    c->draft_engine = draft;
    c->conv = conv;
    rad_model_sampling_of(path, e, &c->recommended);
    rad_settings_apply_model(c->settings, &c->recommended);
    c->open_ms = rad_now_ms() - t0;
    /* How the model is held: in the chat once it runs (/model), else on
    ** stderr before the screen is taken. */
    if (c->ui && c->ui->notice && rad_engine_mode(e) && !s->quiet) notice(c, "mode: %s", rad_engine_mode(e));
    else rad_model_say_mode(e, s->quiet);
    return RAD_OK;
}

void rad_chat_open_db(RadChat *c)
{
    if (c->db) return;
    if (rad_sdb_open(NULL, &c->db) != RAD_OK) {
        c->db = NULL;
        db_failed(c, "sessions are not saved");
    }
}

void rad_chat_close(RadChat *c)
{
    rad_conv_free(c->conv);
    rad_engine_close(c->draft_engine);      /* after the conversation's drafter */
    c->draft_engine = NULL;
    rad_engine_close(c->engine);
    rad_sdb_close(c->db);
    free(c->rows);
    free(c->model_path);
    free(c->refused_text);
    c->refused_text = NULL;
    c->conv = NULL;
    c->engine = NULL;
    c->db = NULL;
    c->rows = NULL;
    c->model_path = NULL;
}

/* ------------------------------------------------------------ rows */

static void rows_fit(RadChat *c, int n)
{
    if (n <= c->rows_cap) return;
    int cap = c->rows_cap ? c->rows_cap : 16;
    while (cap < n) cap *= 2;
    RadChatRow *v = realloc(c->rows, (size_t)cap * sizeof *v);
    if (!v) abort();
    memset(v + c->rows_cap, 0, (size_t)(cap - c->rows_cap) * sizeof *v);
    c->rows = v;
    c->rows_cap = cap;
}

const RadChatRow *rad_chat_row(RadChat *c, int i)
{
    rows_fit(c, i + 1);
    return &c->rows[i];
}

void rad_chat_rows_system_changed(RadChat *c, int before, int after)
{
    rows_fit(c, before + 1);
    if (after > before) {
        memmove(c->rows + 1, c->rows, (size_t)before * sizeof *c->rows);
        memset(&c->rows[0], 0, sizeof c->rows[0]);
    } else if (after < before) {
        memmove(c->rows, c->rows + 1, (size_t)after * sizeof *c->rows);
    }
}

const char *rad_chat_model_name(const RadChat *c)
{
    const char *s = c->model_spec ? c->model_spec : "";
    const char *slash = strrchr(s, '/');
    if (slash && slash[1] && !strncmp(s, "hf:", 3)) return s;    /* hf:org/repo names itself */
    return slash && slash[1] ? slash + 1 : s;
}

static int has_system(const RadChat *c)
{
    const RadConvMessage *m = rad_conv_message(c->conv, 0);
    return m && !strcmp(m->role, "system");
}

/* ------------------------------------------------------------ saving */

static int ensure_session(RadChat *c)
{
    if (!c->db) return -1;
    if (c->session_id[0]) return 0;
    char *sampler = rad_session_sampler_json(&c->settings->conv.sampler);
    const RadConvMessage *sys = has_system(c) ? rad_conv_message(c->conv, 0) : NULL;
    RadSessionFields f = {
        .title = "", .model_id = rad_engine_model_id(c->engine), .model_name = c->model_spec,
        .system_prompt = sys ? sys->content : NULL, .sampler_json = sampler,
    };
    int rc = rad_session_create(c->db, &f, c->session_id);
    free(sampler);
    if (rc) {
        c->session_id[0] = 0;
        db_failed(c, "creating the session");
        return -1;
    }
    return 0;
}

/* The parent in the database of message i: the stored message before it. */
static int64_t parent_of(const RadChat *c, int i)
{
    int first = has_system(c) ? 1 : 0;
    if (i <= first) return 0;
    return c->rows[i - 1].id > 0 ? c->rows[i - 1].id : RAD_PARENT_LEAF;
}

static char *tool_calls_json(const RadConvMessage *m)
{
    if (m->n_tool_calls == 0) return NULL;
    json_t *a = json_array();
    for (int k = 0; a && k < m->n_tool_calls; k++) json_array_append_new(a, json_string(m->tool_calls[k]));
    char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return s;
}

static void fill_reply_row(RadChat *c, const RadConvMessage *m, RadMessage *row, char **tools, char **sampler)
{
    *tools = tool_calls_json(m);
    *sampler = rad_session_sampler_json(&c->settings->conv.sampler);
    memset(row, 0, sizeof *row);
    row->role = m->role;
    row->content = m->content;
    row->reasoning = m->reasoning;
    row->tool_calls_json = *tools;
    row->n_tokens = m->n_tokens;
    row->prompt_tokens = m->stats.prompt_tokens;
    row->prompt_evaluated = m->stats.prompt_evaluated;
    row->completion_tokens = m->stats.completion_tokens;
    row->prefill_ms = m->stats.prefill_ms;
    row->ttft_ms = m->stats.ttft_ms;
    row->decode_ms = m->stats.decode_ms;
    row->finish = m->finish != RAD_FINISH_NONE ? rad_finish_name(m->finish) : NULL;
    row->sampler_json = *sampler;
    row->model_id = rad_engine_model_id(c->engine);
    row->model_name = c->model_spec;
}

/* Write message i (new, or its streaming row). */
static void save_message(RadChat *c, int i, int64_t existing_row)
{
    const RadConvMessage *m = rad_conv_message(c->conv, i);
    if (!m || !strcmp(m->role, "system") || ensure_session(c)) return;
    RadMessage row;
    char *tools = NULL, *sampler = NULL;
    int rc;
    if (!strcmp(m->role, "assistant")) {
        fill_reply_row(c, m, &row, &tools, &sampler);
    } else {
        memset(&row, 0, sizeof row);
        row.role = m->role;
        row.content = m->content;
    }
    if (existing_row > 0) {
        rc = rad_session_update_message(c->db, existing_row, &row);
        if (rc == RAD_OK) c->rows[i].id = existing_row;
    } else {
        rc = rad_session_add_message(c->db, c->session_id, parent_of(c, i), &row, &c->rows[i].id);
    }
    free(tools);
    free(sampler);
    if (rc) {
        c->rows[i].id = 0;
        db_failed(c, "saving a message");
    }
}

int rad_chat_check_text(const char *what, const char *text)
{
    const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)text;
    size_t n = strlen(text), at = 0;
    while (at < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(s + at, (utf8proc_ssize_t)(n - at), &cp);
        if (k <= 0)
            return rad_error_set(RAD_E_ARG, "%s is not valid UTF-8 (byte 0x%02X at offset %zu): not sent; "
                                 "type or pipe UTF-8 text (check the terminal's or the file's encoding)",
                                 what, s[at], at);
        at += (size_t)k;
    }
    return RAD_OK;
}

int rad_chat_user(RadChat *c, const char *text)
{
    int rc = rad_chat_check_text("the message", text);
    if (rc) return rc;
    rc = rad_conv_add(c->conv, "user", text, NULL);
    if (rc) return rc;
    int i = rad_conv_count(c->conv) - 1;
    rows_fit(c, i + 1);
    memset(&c->rows[i], 0, sizeof c->rows[i]);
    save_message(c, i, 0);
    return RAD_OK;
}

void rad_chat_reply_progress(RadChat *c, const RadConvMessage *partial)
{
    if (!c->db || !partial) return;
    double now = rad_now_ms();
    if (c->reply_saved_ms == 0) c->reply_saved_ms = now;
    if (now - c->reply_saved_ms < REPLY_SAVE_INTERVAL_MS) return;
    c->reply_saved_ms = now;
    if (ensure_session(c)) return;
    RadMessage row;
    char *tools = NULL, *sampler = NULL;
    fill_reply_row(c, partial, &row, &tools, &sampler);
    int rc = c->reply_row ? rad_session_update_message(c->db, c->reply_row, &row)
                          : rad_session_add_message(c->db, c->session_id, c->reply_parent, &row, &c->reply_row);
    free(tools);
    free(sampler);
    if (rc) {
        c->reply_row = 0;
        db_failed(c, "saving the reply");
    }
}

/* The model refused the last message: out of the conversation and the
** session it goes, so the next message does not follow an unanswered one
** (a template such as Gemma's that needs turns to alternate would refuse
** every later message). */
static void take_back_last_user(RadChat *c)
{
    int n = rad_conv_count(c->conv);
    const RadConvMessage *m = rad_conv_message(c->conv, n - 1);
    if (!m || strcmp(m->role, "user")) return;
    free(c->refused_text);
    c->refused_text = strdup(m->content);
    int64_t row = c->rows[n - 1].id;
    char msg[RAD_SESSION_ID_LEN + 1];
    memcpy(msg, c->session_id, sizeof msg);
    rad_conv_truncate(c->conv, n - 1);
    c->rows[n - 1].id = 0;
    if (!c->db || row <= 0 || !msg[0]) return;
    const char *keep = rad_error_message()[0] ? strdup(rad_error_message()) : NULL;
    if (rad_session_delete_message(c->db, msg, row)) db_failed(c, "taking back the refused message");
    RadSession s;
    if (rad_session_get(c->db, msg, &s) == RAD_OK) {
        if (s.n_messages == 0 && rad_session_remove(c->db, msg) == RAD_OK) c->session_id[0] = 0;
        rad_session_free(&s);
    }
    if (keep) {
        rad_error_set(RAD_E_RANGE, "%s", keep);
        free((char *)keep);
    }
}

int rad_chat_reply(RadChat *c, RadConvCallbacks *cb)
{
    int before = rad_conv_count(c->conv), first = has_system(c) ? 1 : 0;
    c->reply_row = 0;
    c->reply_saved_ms = 0;
    /* the user turn the reply answers; the policy never drops that one */
    rows_fit(c, before + 1);
    c->reply_parent = parent_of(c, before);
    RadConvStats st;
    memset(&st, 0, sizeof st);
    int rc = rad_conv_reply(c->conv, &c->settings->conv, cb, &st);
    int after = rad_conv_count(c->conv);
    int dropped = before + (rc == RAD_OK ? 1 : 0) - after;
    if (dropped > 0 && before - first >= dropped) {
        /* the policy dropped the oldest turns: their rows go too */
        memmove(c->rows + first, c->rows + first + dropped, (size_t)(before - first - dropped) * sizeof *c->rows);
    }
    if (rc == RAD_OK) {
        int i = after - 1;
        rows_fit(c, after);
        const RadConvMessage *m = rad_conv_message(c->conv, i);
        c->last = m->stats;
        c->last_finish = m->finish;
        c->have_last = 1;
        c->total_prompt += m->stats.prompt_tokens;
        c->total_evaluated += m->stats.prompt_evaluated;
        c->total_completion += m->stats.completion_tokens;
        memset(&c->rows[i], 0, sizeof c->rows[i]);
        c->rows[i].finish = m->finish;
        c->rows[i].stats = m->stats;
        save_message(c, i, c->reply_row);
    } else if (c->reply_row && c->db) {
        /* a partial row for a reply that in the end was not kept */
        c->reply_row = 0;
    }
    if (rc != RAD_OK && rc != RAD_E_INTERRUPT) take_back_last_user(c);
    c->reply_row = 0;
    return rc;
}

/* ------------------------------------------------------------ snapshots */

int rad_chat_save_snapshot(RadChat *c, int verbose)
{
    int n = 0;
    if (!c->conv) return RAD_OK;
    const int32_t *tokens = rad_conv_held_tokens(c->conv, &n);
    if (!c->db || n == 0) {
        if (verbose) notice(c, c->db ? "nothing to snapshot yet" : "no database: nothing is saved");
        return RAD_OK;
    }
    if (ensure_session(c)) return RAD_E_IO;
    double t0 = rad_now_ms();
    void *blob = NULL;
    size_t size = 0;
    int rc = rad_conv_snapshot(c->conv, &blob, &size);
    if (rc == RAD_OK)
        rc = rad_snapshot_save(c->db, rad_engine_model_id(c->engine), c->session_id, tokens, n, blob, size);
    free(blob);
    if (rc) {
        db_failed(c, "saving the KV snapshot");
        return rc;
    }
    if (verbose)
        notice(c, "session %s saved; KV snapshot of %d tokens (%.1f MiB before compression) in %.0f ms",
               c->session_id, n, size / 1048576.0, rad_now_ms() - t0);
    return RAD_OK;
}

/* ------------------------------------------------------------ sessions */

void rad_chat_new_session(RadChat *c)
{
    rad_conv_clear(c->conv, 1);
    c->session_id[0] = 0;
    c->restored_tokens = 0;
    rows_fit(c, 1);
    memset(&c->rows[0], 0, sizeof c->rows[0]);
}

static void add_tool_calls(RadChat *c, const char *json)
{
    json_error_t err;
    json_t *a = json ? json_loads(json, 0, &err) : NULL;
    for (size_t k = 0; a && k < json_array_size(a); k++) {
        json_t *v = json_array_get(a, k);
        if (json_is_string(v)) rad_conv_add_tool_call(c->conv, json_string_value(v));
        else {
            char *s = json_dumps(v, JSON_COMPACT);
            if (s) rad_conv_add_tool_call(c->conv, s);
            free(s);
        }
    }
    json_decref(a);
}

/* Append a formatted line to note (cap bytes). */
static void note_add(char *note, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note_add(char *note, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(note);
    if (len + 2 >= cap) return;
    if (len) note[len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + len, cap - len, fmt, ap);
    va_end(ap);
}

int rad_chat_resume(RadChat *c, const char *id, char *note, size_t cap)
{
    note[0] = 0;
    if (!c->db) return rad_error_set(RAD_E_NOTFOUND, "no session database: nothing to resume");
    char full[RAD_SESSION_ID_LEN + 1];
    int rc = id ? rad_session_resolve(c->db, id, full) : rad_session_latest(c->db, full);
    if (rc) {
        if (!id && rc == RAD_E_NOTFOUND) rad_error_set(RAD_E_NOTFOUND, "no saved session to continue");
        return rc;
    }
    RadSession s;
    RadMessageList list = {0};
    if ((rc = rad_session_get(c->db, full, &s))) return rc;
    if ((rc = rad_session_branch(c->db, full, 0, &list))) {
        rad_session_free(&s);
        return rc;
    }
    rad_conv_clear(c->conv, 0);
    rc = rad_conv_set_system(c->conv, s.system_prompt);
    int n = 0;
    rows_fit(c, list.n + 1);
    memset(c->rows, 0, (size_t)(list.n + 1) * sizeof *c->rows);
    if (rc == RAD_OK && has_system(c)) n++;
    for (int i = 0; rc == RAD_OK && i < list.n; i++) {
        const RadMessage *m = &list.v[i];
        if (!strcmp(m->role, "system")) {
            int had = rad_conv_count(c->conv);
            rc = rad_conv_set_system(c->conv, m->content);
            rad_chat_rows_system_changed(c, had, rad_conv_count(c->conv));
            n += rad_conv_count(c->conv) - had;
            continue;
        }
        rc = rad_conv_add(c->conv, m->role, m->content, m->reasoning);
        if (rc == RAD_OK) {
            add_tool_calls(c, m->tool_calls_json);
            RadChatRow *r = &c->rows[n++];
            r->id = m->id;
            if (m->finish) {
                r->finish = !strcmp(m->finish, "interrupted") ? RAD_FINISH_INTERRUPTED
                            : !strcmp(m->finish, "length") ? RAD_FINISH_LENGTH : RAD_FINISH_STOP;
                r->stats.prompt_tokens = m->prompt_tokens;
                r->stats.prompt_evaluated = m->prompt_evaluated;
                r->stats.completion_tokens = m->completion_tokens;
                r->stats.prefill_ms = m->prefill_ms;
                r->stats.ttft_ms = m->ttft_ms;
                r->stats.decode_ms = m->decode_ms;
                if (m->decode_ms > 0 && m->completion_tokens > 1)
                    r->stats.decode_tps = (m->completion_tokens - 1) * 1000.0 / m->decode_ms;
            }
        }
    }
    memcpy(c->session_id, full, sizeof full);
    c->restored_tokens = 0;
    c->just_loaded = 1;
    const char *our_model = rad_engine_model_id(c->engine);
    if (rc == RAD_OK && s.model_id[0] && strcmp(s.model_id, our_model))
        note_add(note, cap, "session %s was made with %s; continuing it with %s", full, s.model_name[0] ? s.model_name : "another model",
               c->model_spec);
    if (rc == RAD_OK) {
        RadSnapshot snap;
        RadSnapshotStatus status = RAD_SNAPSHOT_NONE;
        char why[512] = "";
        memset(&snap, 0, sizeof snap);
        double t0 = rad_now_ms();
        int frc = rad_snapshot_find_session(c->db, full, our_model, &snap, &status, why, sizeof why);
        if (frc) {
            db_failed(c, "reading the KV snapshot");
        } else if (status == RAD_SNAPSHOT_FOUND) {
            if (rad_conv_restore(c->conv, snap.data, snap.size, snap.tokens, snap.n_tokens) == RAD_OK) {
                c->restored_tokens = snap.n_tokens;
                note_add(note, cap, "resumed session %s: %d messages; KV snapshot restored (%d tokens, %.0f ms), no prefill needed",
                       full, list.n, snap.n_tokens, rad_now_ms() - t0);
            } else {
                note_add(note, cap, "resumed session %s: %d messages; KV snapshot ignored (%s); the prompt is evaluated again",
                       full, list.n, rad_error_message());
            }
        } else {
            note_add(note, cap, "resumed session %s: %d messages%s%s", full, list.n, why[0] ? "; " : "", why);
        }
        rad_snapshot_free(&snap);
    }
    rad_message_list_free(&list);
    rad_session_free(&s);
    return rc;
}

void rad_chat_start(RadChat *c)
{
    if (!c->resume_id[0]) return;
    char note[1024];
    if (rad_chat_resume(c, c->resume_id, note, sizeof note)) {
        char buf[600];
        snprintf(buf, sizeof buf, "resuming %s: %s", c->resume_id, rad_error_message());
        c->ui->error(c, buf);
        return;
    }
    c->ui->rebuild(c);
    if (note[0]) c->ui->notice(c, note);
}

/* ------------------------------------------------------------ numbers */

void rad_chat_reply_summary(const RadConvStats *s, RadFinish finish, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%d tokens", s->completion_tokens);
    if (s->decode_tps > 0 && n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, " \xc2\xb7 %.1f tok/s", s->decode_tps);
    if (n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " \xc2\xb7 first token %.0f ms \xc2\xb7 prompt %d tokens, %d evaluated",
                      s->ttft_ms, s->prompt_tokens, s->prompt_evaluated);
    if (finish == RAD_FINISH_LENGTH && n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " \xc2\xb7 cut at the length limit");
}

int rad_chat_context_level(const RadChat *c, int *used, int *size)
{
    *used = *size = 0;
    if (!c->conv) return 0;     /* between models (/model) */
    *used = rad_conv_context_used(c->conv);
    *size = rad_conv_context_size(c->conv);
    const RadConvSettings *s = &c->settings->conv;
    int reserve = s->n_predict >= 0 ? s->n_predict : s->reply_reserve > 0 ? s->reply_reserve : *size / 4 < 512 ? *size / 4 : 512;
    if (*size <= 0) return 0;
    if (*used + reserve >= *size) return 2;
    if (*used + reserve >= *size * 3 / 4) return 1;
    return 0;
}

/* ------------------------------------------------------------ clipboard */

int rad_osc52_copy(int fd, const char *text)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(text), out_len = 4 * ((n + 2) / 3);
    char *out = malloc(out_len + 16);
    if (!out) return -1;
    size_t o = 0;
    memcpy(out, "\033]52;c;", 7);
    o = 7;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)text[i] << 16;
        if (i + 1 < n) v |= (unsigned char)text[i + 1] << 8;
        if (i + 2 < n) v |= (unsigned char)text[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    out[o++] = '\a';
    ssize_t w = write(fd, out, o);
    free(out);
    return w == (ssize_t)o ? 0 : -1;
}
