/*
** cmd_sessions.c: `radiance sessions list|show|search|rm|export` (the saved
** chats) and `radiance logs list|show|search|rm|export` (the logged `run`
** exchanges, as `llm logs` keeps them), read from the session store
** (session_db.h): one code path, filtered by the session's kind.
**
** Everything printed comes from the database, and so from users and
** models: it goes through cli.h's terminal-safe text (control characters
** shown as escapes), except export to a file or a pipe, which is the
** conversation as it was written.
**
** A session is named by its id or any prefix of it that only one session
** has; list prints the shortest prefixes that are unambiguous (at least 8
** characters).  show and export follow the current branch of a session
** that /retry or /edit forked; export --json carries the other branches too,
** so nothing saved is lost by exporting.
*/
#include "../app.h"
#include "../cli.h"
#include "../models/hub.h"
#include "../sessions/session_db.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

static const char logs_usage[] =
    "usage: radiance logs [list] [--json] [-n N]\n"
    "       radiance logs show [ID]\n"
    "       radiance logs search TEXT... [--json] [-n N]\n"
    "       radiance logs rm ID...\n"
    "       radiance logs export ID (--md | --json) [-o FILE]\n"
    "\n"
    "The exchanges `radiance run` logged in $XDG_DATA_HOME/radiance/radiance.db (radiance run\n"
    "--no-log, or `log = false` in the config, keeps one out; radiance run --continue follows up\n"
    "the last). ID is an id or any prefix of it that names one exchange.\n"
    "\n"
    "  list          exchanges, most recent first: id, time, model, prompt\n"
    "  show [ID]     one exchange, the prompt and the answer (default: the last)\n"
    "  search TEXT   prompts and answers containing every word of TEXT (word* for a prefix)\n"
    "  rm ID...      remove exchanges\n"
    "  export ID     as Markdown (--md) or JSON (--json)\n"
    "\n"
    "  --json        list, search: one JSON array; export: one JSON object\n"
    "  --md          export as Markdown\n"
    "  -n, --limit N list, search: at most N rows\n"
    "  -o, --output FILE  export: write FILE instead of standard output\n"
    "  -h, --help    this help\n";

static const char usage[] =
    "usage: radiance sessions [list] [--json] [-n N]\n"
    "       radiance sessions show ID\n"
    "       radiance sessions search TEXT... [--json] [-n N]\n"
    "       radiance sessions rm ID...\n"
    "       radiance sessions export ID (--md | --json) [-o FILE]\n"
    "\n"
    "The saved chats in $XDG_DATA_HOME/radiance/radiance.db (see radiance-sessions(5)).\n"
    "ID is a session id or any prefix of it that names one session.\n"
    "\n"
    "  list          sessions, most recently used first\n"
    "  show ID       a session's details and its conversation (the current branch)\n"
    "  search TEXT   messages containing every word of TEXT (full-text; word* for a prefix)\n"
    "  rm ID...      remove sessions with their messages and KV snapshots\n"
    "  export ID     the conversation as Markdown (--md) or JSON with every fork (--json)\n"
    "\n"
    "  --json        list, search: one JSON array; export: one JSON object\n"
    "  --md          export as Markdown\n"
    "  -n, --limit N list, search: at most N rows\n"
    "  -o, --output FILE  export: write FILE instead of standard output\n"
    "  -h, --help    this help\n";

/* What the command lists: "chat" (sessions) or "run" (logs). */
static const char *kind = "chat";
static const char *command = "sessions";

/* One line, as every radiance error is; --help has the rest. */
static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "radiance %s: ", command);
    fprintf(stderr, fmt, rad_safe(arg));
    fprintf(stderr, " (radiance %s --help)\n", command);
    return RAD_EXIT_USAGE;
}

static const char *local_time(int64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%d %H:%M", &tm);
    return buf;
}

static json_t *iso_time(int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char buf[40];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

static int emit_json(json_t *j, FILE *out)
{
    int rc = j && json_dumpf(j, out, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) == 0 && fputc('\n', out) != EOF
                 ? RAD_OK
                 : RAD_E_IO;
    json_decref(j);
    int checked = rad_out_check(out, out == stdout ? "standard output" : "the output file");
    if (checked) return checked;
    return rc ? rad_error_set(RAD_E_IO, "cannot write the JSON output") : RAD_OK;
}

/* Stored text as a JSON string.  A session written before the chat checked
** its input as UTF-8 may hold ill-formed bytes, which json_string refuses
** (NULL: the key vanished from the export without a word): each maximal
** ill-formed sequence becomes U+FFFD, as the tokenizer read it. */
static json_t *text_json(const char *s)
{
    json_t *j = json_string(s);
    if (j || !s) return j;
    size_t n = strlen(s), at = 0, k = 0;
    char *fixed = malloc(n * 3 + 1);
    if (!fixed) return NULL;
    while (at < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s + at, (utf8proc_ssize_t)(n - at), &cp);
        if (len > 0) {
            memcpy(fixed + k, s + at, (size_t)len);
            k += (size_t)len;
            at += (size_t)len;
        } else {
            memcpy(fixed + k, "\xef\xbf\xbd", 3);
            k += 3;
            at++;
            while (at < n && ((unsigned char)s[at] & 0xC0) == 0x80) at++; /* the rest of a cut sequence */
        }
    }
    fixed[k] = 0;
    j = json_string(fixed);
    free(fixed);
    return j;
}

/* Stored JSON text as a value (null when absent; a string when it does not parse). */
static json_t *stored_json(const char *text)
{
    if (!text) return json_null();
    json_error_t err;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &err);
    return j ? j : text_json(text);
}

/* One line of text: newlines and tabs become spaces. */
static void one_line(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\r' || *s == '\t') *s = ' ';
}

/* ------------------------------------------------------------ list */

/* How many characters tell every id apart (at least 8). */
static int short_len(RadSession *v, int n)
{
    int want = 8;
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++) {
            int c = 0;
            while (c < RAD_SESSION_ID_LEN && v[i].id[c] == v[k].id[c]) c++;
            if (c + 1 > want) want = c + 1 > RAD_SESSION_ID_LEN ? RAD_SESSION_ID_LEN : c + 1;
        }
    return want;
}

static json_t *session_json(const RadSession *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(s->id));
    json_object_set_new(o, "title", text_json(s->title));
    json_object_set_new(o, "created_ms", json_integer(s->created_ms));
    json_object_set_new(o, "updated_ms", json_integer(s->updated_ms));
    json_object_set_new(o, "created", iso_time(s->created_ms));
    json_object_set_new(o, "updated", iso_time(s->updated_ms));
    json_object_set_new(o, "model", json_pack("{s:s,s:s}", "name", s->model_name, "id", s->model_id));
    json_object_set_new(o, "system_prompt", s->system_prompt ? text_json(s->system_prompt) : json_null());
    json_object_set_new(o, "sampler", stored_json(s->sampler_json));
    json_object_set_new(o, "messages", json_integer(s->n_messages));
    json_object_set_new(o, "leaf_id", s->leaf_id ? json_integer(s->leaf_id) : json_null());
    return o;
}

/* At most `width` display columns of s (UTF-8), with "..." when cut. */
static void fit_column(const char *s, int width, char *buf, size_t cap)
{
    size_t n = strlen(s), i = 0;
    int cols = 0;
    while (i < n && cols < width) {
        size_t k = 1;
        while (i + k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80) k++;
        i += k;
        cols++;
    }
    if (i >= n) snprintf(buf, cap, "%s", s);
    else {
        /* cut three characters back for the ellipsis */
        size_t j = i;
        for (int back = 0; back < 3 && j > 0; back++) {
            j--;
            while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
        }
        snprintf(buf, cap, "%.*s...", (int)j, s);
    }
}

/* db NULL: no database yet, listed as an empty one. */
static int cmd_list(RadSessionDb *db, int json, int limit)
{
    RadSession *v = NULL;
    int n = 0;
    int rc = db ? rad_session_list_kind(db, kind, limit, &v, &n) : RAD_OK;
    if (rc) return rc;
    if (json) {
        json_t *a = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(a, session_json(&v[i]));
        rc = emit_json(a, stdout);
    } else if (n == 0) {
        fputs(!strcmp(kind, "run") ? "radiance: nothing logged yet; radiance run logs each exchange\n"
                                   : "radiance: no saved sessions yet; radiance chat saves one\n",
              stderr);
    } else {
        /* The model as the user named it, a path by its file name: the
        ** cache folders every path shares tell the rows apart not at all. */
        int w = short_len(v, n), mw = 5;
        char (*models)[64] = calloc((size_t)n, sizeof *models);
        if (!models) {
            rad_session_list_free(v, n);
            return rad_error_set(RAD_E_NOMEM, "out of memory");
        }
        for (int i = 0; i < n; i++) {
            char name[512];
            rad_model_display_name(v[i].model_name[0] ? v[i].model_name : "-", name, sizeof name);
            fit_column(rad_safe(name), 32, models[i], sizeof models[i]);
            int cols = rad_text_columns(models[i]);
            if (cols > mw) mw = cols;
        }
        int run = !strcmp(kind, "run");
        printf("%-*s  %-16s  %5s  %-*s  %s\n", w, "ID", run ? "WHEN" : "UPDATED", "MSGS", mw, "MODEL",
               run ? "PROMPT" : "TITLE");
        for (int i = 0; i < n; i++) {
            char when[32];
            one_line(v[i].title);
            printf("%-*.*s  %-16s  %5d  %s%*s  %s\n", w, w, v[i].id, local_time(v[i].updated_ms, when, sizeof when),
                   v[i].n_messages, models[i], mw - rad_text_columns(models[i]), "",
                   v[i].title[0] ? rad_safe(v[i].title) : "(untitled)");
        }
        free(models);
    }
    rad_session_list_free(v, n);
    return rc;
}

/* ------------------------------------------------------------ show */

/* Siblings: how many messages share m's parent, and m's place among them. */
static void fork_place(const RadMessageList *all, const RadMessage *m, int *k, int *of)
{
    *k = *of = 0;
    for (int i = 0; i < all->n; i++)
        if (all->v[i].parent_id == m->parent_id) {
            (*of)++;
            if (all->v[i].id == m->id) *k = *of;
        }
}

/* Stored text, line by line under a prefix, with control characters shown
** as escapes (cli.h). */
static void print_indented(const char *raw, const char *prefix)
{
    const char *text = rad_safe_multiline(raw);
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        printf("%s%.*s\n", prefix, (int)len, p);
        if (!nl) break;
        p = nl + 1;
    }
}

static int cmd_show(RadSessionDb *db, const char *id)
{
    RadSession s;
    RadMessageList branch = {0}, all = {0};
    int rc = rad_session_get(db, id, &s);
    if (rc) return rc;
    rc = rad_session_branch(db, id, 0, &branch);
    if (!rc) rc = rad_session_messages(db, id, &all);
    int snaps = 0;
    int64_t stored = 0;
    if (!rc) rc = rad_snapshot_usage(db, id, &snaps, &stored, NULL);
    if (!rc) {
        char c[32], u[32], b[32];
        printf("session   %s%s\n", s.id, !strcmp(s.kind, "run") ? " (a logged run)" : "");
        printf("title     %s\n", s.title[0] ? rad_safe(s.title) : "(untitled)");
        if (s.model_name[0] || s.model_id[0])
            printf("model     %s%s%.12s%s\n", rad_safe(s.model_name), s.model_id[0] ? " (id " : "", rad_safe(s.model_id),
                   s.model_id[0] ? ")" : "");
        printf("created   %s\nupdated   %s\n", local_time(s.created_ms, c, sizeof c),
               local_time(s.updated_ms, u, sizeof u));
        printf("messages  %d", all.n);
        if (all.n != branch.n) printf(" (%d on the current branch; the rest are forks)", branch.n);
        printf("\n");
        if (s.sampler_json) printf("sampler   %s\n", rad_safe(s.sampler_json));
        if (snaps) printf("snapshots %d (%s)\n", snaps, rad_hub_format_bytes(stored, b, sizeof b));
        if (s.system_prompt) {
            printf("system    ");
            print_indented(s.system_prompt, "");
        }
        for (int i = 0; i < branch.n; i++) {
            const RadMessage *m = &branch.v[i];
            int k, of;
            fork_place(&all, m, &k, &of);
            printf("\n[%s]", rad_safe(m->role));
            if (of > 1) printf(" (version %d of %d)", k, of);
            if (m->completion_tokens)
                printf(" %d tokens%s%s", m->completion_tokens, m->finish ? ", " : "",
                       m->finish ? rad_safe(m->finish) : "");
            printf("\n");
            if (m->reasoning && *m->reasoning) {
                printf("  (thinking)\n");
                print_indented(m->reasoning, "  | ");
            }
            if (m->tool_calls_json && strcmp(m->tool_calls_json, "[]") != 0)
                printf("  (tool calls) %s\n", rad_safe(m->tool_calls_json));
            print_indented(m->content, "  ");
        }
    }
    rad_message_list_free(&branch);
    rad_message_list_free(&all);
    rad_session_free(&s);
    return rc;
}

/* ------------------------------------------------------------ search */

/* A search snippet: its "\x1e[" ... "]\x1e" marks as bold (or brackets), the
** rest made safe.  The marks travel as record separators, which the safe
** text shows escaped, so they are found before it is made safe. */
static void print_snippet(const char *snippet, int color)
{
    const char *p = snippet;
    for (;;) {
        const char *open = strstr(p, "\x1e["), *close = open ? strstr(open + 2, "]\x1e") : NULL;
        size_t plain = open && close ? (size_t)(open - p) : strlen(p);
        rad_safe_fwrite(stdout, p, plain, RAD_SAFE_LINE);
        if (!open || !close) break;
        fputs(color ? "\033[1m" : "[", stdout);
        rad_safe_fwrite(stdout, open + 2, (size_t)(close - open - 2), RAD_SAFE_LINE);
        fputs(color ? "\033[0m" : "]", stdout);
        p = close + 2;
    }
    fputc('\n', stdout);
}

/* A JSON snippet keeps the brackets of the plain output. */
static void plain_marks(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++)
        if (*r != '\x1e') *w++ = *r;
    *w = 0;
}

static int cmd_search(RadSessionDb *db, const char *text, int json, int limit)
{
    int color = !json && getenv("NO_COLOR") == NULL && isatty(STDOUT_FILENO);
    RadSearchHit *h = NULL;
    int n = 0;
    /* The marks are plain brackets in the database's text; bold is added
    ** after the snippet has been made safe, so no stored byte reaches the
    ** terminal raw.  db NULL: no database yet, searched as an empty one. */
    int rc = db ? rad_session_search_kind(db, kind, text, "\x1e[", "]\x1e", limit, &h, &n) : RAD_OK;
    if (rc) return rc;
    if (json) {
        json_t *a = json_array();
        for (int i = 0; i < n; i++) {
            plain_marks(h[i].snippet);
            json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:I}", "session", h[i].session_id, "title",
                                  h[i].title, "message_id", (json_int_t)h[i].message_id, "role", h[i].role,
                                  "snippet", h[i].snippet, "created_ms", (json_int_t)h[i].created_ms);
            json_array_append_new(a, o);
        }
        rc = emit_json(a, stdout);
    } else if (n == 0) {
        fprintf(stderr, "radiance: no message contains \"%s\"\n", rad_safe(text));
    } else {
        for (int i = 0; i < n; i++) {
            char when[32], title[128];
            one_line(h[i].snippet);
            one_line(h[i].title);
            fit_column(h[i].title[0] ? rad_safe(h[i].title) : "(untitled)", 24, title, sizeof title);
            printf("%.8s  %s  %-9s  %s%*s  ", h[i].session_id, local_time(h[i].created_ms, when, sizeof when),
                   rad_safe(h[i].role), title, 24 - rad_text_columns(title), "");
            print_snippet(h[i].snippet, color);
        }
    }
    rad_search_hits_free(h, n);
    return rc;
}

/* ------------------------------------------------------------ export */

static json_t *message_json(const RadMessage *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(m->id));
    json_object_set_new(o, "parent_id", m->parent_id ? json_integer(m->parent_id) : json_null());
    json_object_set_new(o, "role", json_string(m->role));
    json_object_set_new(o, "content", text_json(m->content));
    json_object_set_new(o, "reasoning", m->reasoning ? text_json(m->reasoning) : json_null());
    json_object_set_new(o, "tool_calls", stored_json(m->tool_calls_json));
    json_object_set_new(o, "n_tokens", json_integer(m->n_tokens));
    json_object_set_new(o, "usage",
                        json_pack("{s:i,s:i,s:i}", "prompt_tokens", m->prompt_tokens, "prompt_evaluated",
                                  m->prompt_evaluated, "completion_tokens", m->completion_tokens));
    json_object_set_new(o, "timings",
                        json_pack("{s:f,s:f,s:f}", "prefill_ms", m->prefill_ms, "ttft_ms", m->ttft_ms,
                                  "decode_ms", m->decode_ms));
    json_object_set_new(o, "finish", m->finish ? json_string(m->finish) : json_null());
    json_object_set_new(o, "sampler", stored_json(m->sampler_json));
    json_object_set_new(o, "model_id", m->model_id ? json_string(m->model_id) : json_null());
    json_object_set_new(o, "model_name", m->model_name ? text_json(m->model_name) : json_null());
    json_object_set_new(o, "created_ms", json_integer(m->created_ms));
    json_object_set_new(o, "created", iso_time(m->created_ms));
    return o;
}

static int on_branch(const RadMessageList *branch, int64_t id)
{
    for (int i = 0; i < branch->n; i++)
        if (branch->v[i].id == id) return 1;
    return 0;
}

static int export_json(const RadSession *s, const RadMessageList *branch, const RadMessageList *all,
                       FILE *out)
{
    json_t *o = session_json(s);
    json_object_set_new(o, "format", json_string("radiance-session"));
    json_object_set_new(o, "schema_version", json_integer(RAD_SESSION_SCHEMA_VERSION));
    json_t *msgs = json_array(), *forks = json_array();
    for (int i = 0; i < branch->n; i++) json_array_append_new(msgs, message_json(&branch->v[i]));
    for (int i = 0; i < all->n; i++)
        if (!on_branch(branch, all->v[i].id)) json_array_append_new(forks, message_json(&all->v[i]));
    json_object_set_new(o, "messages", msgs);
    json_object_set_new(o, "forks", forks);
    return emit_json(o, out);
}

static void md_heading(FILE *out, const char *role)
{
    fprintf(out, "## %c%s\n\n", role[0] >= 'a' && role[0] <= 'z' ? role[0] - 'a' + 'A' : role[0], role + 1);
}

/* A fence longer than any run of backticks in text, so it cannot close early. */
static void md_fenced(FILE *out, const char *info, const char *text)
{
    int run = 0, longest = 0;
    for (const char *p = text; *p; p++) {
        run = *p == '`' ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    int n = longest >= 3 ? longest + 1 : 3;
    fprintf(out, "%.*s%s\n%s\n%.*s\n\n", n, "``````````````````````````````", info, text, n,
            "``````````````````````````````");
}

static int export_md(const RadSession *s, const RadMessageList *branch, int n_all, FILE *out)
{
    char c[32], u[32];
    fprintf(out, "# %s\n\n", s->title[0] ? s->title : "Untitled session");
    fprintf(out, "- Session: `%s`\n", s->id);
    if (s->model_name[0] || s->model_id[0])
        fprintf(out, "- Model: %s%s%.12s%s\n", s->model_name[0] ? s->model_name : "(unnamed)",
                s->model_id[0] ? " (`" : "", s->model_id, s->model_id[0] ? "`)" : "");
    fprintf(out, "- Created: %s\n- Updated: %s\n", local_time(s->created_ms, c, sizeof c),
            local_time(s->updated_ms, u, sizeof u));
    if (n_all != branch->n)
        fprintf(out, "- Messages: %d on this branch, %d in forks (export --json has them)\n", branch->n,
                n_all - branch->n);
    fputc('\n', out);
    int system_shown = 0;
    for (int i = 0; i < branch->n; i++) system_shown |= !strcmp(branch->v[i].role, "system");
    if (s->system_prompt && !system_shown) {
        md_heading(out, "system");
        fprintf(out, "%s\n\n", s->system_prompt);
    }
    for (int i = 0; i < branch->n; i++) {
        const RadMessage *m = &branch->v[i];
        md_heading(out, m->role);
        if (m->reasoning && *m->reasoning)
            fprintf(out, "<details><summary>Reasoning</summary>\n\n%s\n\n</details>\n\n", m->reasoning);
        if (m->tool_calls_json && strcmp(m->tool_calls_json, "[]") != 0)
            md_fenced(out, "json", m->tool_calls_json);
        if (!strcmp(m->role, "tool"))
            md_fenced(out, "", m->content);
        else if (*m->content)
            fprintf(out, "%s\n\n", m->content);
        if (m->finish && !strcmp(m->finish, "interrupted")) fputs("*(interrupted)*\n\n", out);
        if (m->finish && !strcmp(m->finish, "length")) fputs("*(cut at the length limit)*\n\n", out);
    }
    return ferror(out) ? rad_error_set(RAD_E_IO, "cannot write the Markdown output") : RAD_OK;
}

static int cmd_export(RadSessionDb *db, const char *id, int json, const char *path)
{
    RadSession s;
    RadMessageList branch = {0}, all = {0};
    int rc = rad_session_get(db, id, &s);
    if (rc) return rc;
    rc = rad_session_branch(db, id, 0, &branch);
    if (!rc) rc = rad_session_messages(db, id, &all);
    /* A file is written whole or not at all (cli.h): a full disk leaves no
    ** empty file behind, and the message says why. */
    RadOutFile file = {.slot = -1};
    FILE *out = stdout;
    if (!rc && path) {
        rc = rad_outfile_open(&file, path);
        if (!rc) out = file.f;
    }
    /* Markdown to a terminal is shown safely; to a file or a pipe it is the
    ** conversation as written. */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = NULL;
    if (!rc && !json && out == stdout && isatty(STDOUT_FILENO)) {
        if (!(mem = open_memstream(&buf, &len))) rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        else out = mem;
    }
    if (!rc) rc = json ? export_json(&s, &branch, &all, out) : export_md(&s, &branch, all.n, out);
    if (mem) {
        fclose(mem);
        if (!rc) {
            rad_safe_fwrite(stdout, buf, len, RAD_SAFE_TEXT);
            rc = rad_out_check(stdout, "standard output");
        }
        free(buf);
    }
    if (path) {
        if (!rc && file.f) rc = rad_outfile_commit(&file);
        else rad_outfile_abort(&file);
    } else if (!rc) {
        rc = rad_out_check(stdout, "standard output");
    }
    rad_message_list_free(&branch);
    rad_message_list_free(&all);
    rad_session_free(&s);
    return rc;
}

/* ------------------------------------------------------------ rm */

static int cmd_rm(RadSessionDb *db, char **ids, int n)
{
    /* Resolve every id first: a typo removes nothing. */
    char(*full)[RAD_SESSION_ID_LEN + 1] = calloc((size_t)n, sizeof *full);
    if (!full) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int rc = RAD_OK;
    for (int i = 0; i < n && !rc; i++) rc = rad_session_resolve(db, ids[i], full[i]);
    for (int i = 0; i < n && !rc; i++) {
        RadSession s;
        rc = rad_session_get(db, full[i], &s);
        if (rc == RAD_E_NOTFOUND) { /* named twice */
            rc = RAD_OK;
            continue;
        }
        if (!rc) rc = rad_session_remove(db, full[i]);
        if (!rc) {
            one_line(s.title);
            printf("removed %s  %s\n", full[i], s.title[0] ? rad_safe(s.title) : "(untitled)");
        }
        rad_session_free(&s);
    }
    free(full);
    return rc;
}

/* ------------------------------------------------------------ dispatch */

/* The commands that only read (list, show, search, export, and rm, which
** has nothing to remove then) open the database only when its file exists:
** a command that only reads creates no folder (not the data folder, not
** HOME; issue 12 item 10), and an absent database reads as an empty one.
** 1 when the default database file does not exist; 0 when it does, or when
** its place cannot be worked out (rad_sdb_open then says why). */
static int no_database(void)
{
    char *path = NULL;
    if (rad_sdb_default_path(&path) != RAD_OK) {
        rad_error_clear();
        return 0;
    }
    struct stat st;
    int absent = lstat(path, &st) != 0 && errno == ENOENT;
    free(path);
    return absent;
}

/* Open the database for a command that only reads: *db stays NULL (and 0
** is returned) when there is none yet. */
static int open_to_read(RadSessionDb **db)
{
    *db = NULL;
    return no_database() ? RAD_OK : rad_sdb_open(NULL, db);
}

/* What show, export and rm say when there is no database yet. */
static int nothing_saved(void)
{
    return rad_error_set(RAD_E_NOTFOUND, "%s", !strcmp(kind, "run") ? "nothing logged yet; radiance run logs each exchange"
                                                                    : "no saved sessions yet; radiance chat saves one");
}

static int sessions_main(int argc, char **argv)
{
    enum { JSON = 256, MD };
    static const struct option options[] = {
        {"json", no_argument, 0, JSON},       {"md", no_argument, 0, MD},
        {"limit", required_argument, 0, 'n'}, {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
    };
    int c, json = 0, md = 0, limit = 0;
    const char *output = NULL;
    optind = 1;
    opterr = 0;
    /* GNU getopt moves the operands (subcommand, IDs, words) after the
    ** options, so flags may come anywhere; "--" ends them. */
    while ((c = getopt_long(argc, argv, "hn:o:", options, NULL)) != -1) {
        switch (c) {
        case JSON:
            json = 1;
            break;
        case MD:
            md = 1;
            break;
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v <= 0 || v > 1000000)
                return usage_error("-n wants a positive count, not '%s'", optarg);
            limit = (int)v;
            break;
        }
        case 'o':
            output = optarg;
            break;
        case 'h':
            fputs(!strcmp(kind, "run") ? logs_usage : usage, stdout);
            return RAD_EXIT_OK;
        default:
            return usage_error("unknown option, or one missing its value: '%s'", argv[optind - 1]);
        }
    }
    char **ops = argv + optind;
    int nops = argc - optind;
    const char *sub = nops ? ops[0] : "list";
    int rc = RAD_OK, status = RAD_EXIT_OK;
    RadSessionDb *db = NULL;
    char id[RAD_SESSION_ID_LEN + 1];
    if (!strcmp(sub, "list")) {
        if (nops > 1)
            status = usage_error("list takes no operand ('%s')", ops[1]);
        else if (!(rc = open_to_read(&db)))
            rc = cmd_list(db, json, limit);
    } else if (!strcmp(sub, "show")) {
        int latest = nops == 1 && !strcmp(kind, "run");
        if (nops != 2 && !latest)
            status = usage_error("%s", "show wants one session ID");
        else if (!(rc = open_to_read(&db)) && !db)
            rc = nothing_saved();
        else if (!rc && !(rc = latest ? rad_session_latest_kind(db, kind, id) : rad_session_resolve(db, ops[1], id)))
            rc = cmd_show(db, id);
        if (rc == RAD_E_NOTFOUND && latest)
            rc = rad_error_set(RAD_E_NOTFOUND, "nothing logged yet; radiance run logs each exchange");
    } else if (!strcmp(sub, "search")) {
        if (nops < 2) {
            status = usage_error("%s", "search wants the words to look for");
        } else {
            size_t len = 0;
            for (int i = 1; i < nops; i++) len += strlen(ops[i]) + 1;
            char *text = calloc(1, len + 1);
            if (!text) rc = rad_error_set(RAD_E_NOMEM, "out of memory");
            for (int i = 1; text && i < nops; i++) {
                if (i > 1) strcat(text, " ");
                strcat(text, ops[i]);
            }
            if (!rc && !(rc = open_to_read(&db))) rc = cmd_search(db, text, json, limit);
            free(text);
        }
    } else if (!strcmp(sub, "rm")) {
        if (nops < 2)
            status = usage_error("%s", "rm wants one or more session IDs");
        else if (!(rc = open_to_read(&db)))
            rc = db ? cmd_rm(db, ops + 1, nops - 1) : nothing_saved();
    } else if (!strcmp(sub, "export")) {
        if (nops != 2)
            status = usage_error("%s", "export wants one session ID");
        else if (json == md)
            status = usage_error("%s", "export wants --md or --json");
        else if (!(rc = open_to_read(&db)) && !db)
            rc = nothing_saved();
        else if (!rc && !(rc = rad_session_resolve(db, ops[1], id)))
            rc = cmd_export(db, id, json, output);
    } else {
        status = usage_error("unknown subcommand '%s'", sub);
    }
    rad_sdb_close(db);
    if (rc) return rad_app_fail(rc);
    return status;
}

int rad_cmd_sessions(int argc, char **argv)
{
    kind = "chat";
    command = "sessions";
    return sessions_main(argc, argv);
}

int rad_cmd_logs(int argc, char **argv)
{
    kind = "run";
    command = "logs";
    return sessions_main(argc, argv);
}
