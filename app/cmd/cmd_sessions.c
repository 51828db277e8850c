/*
** cmd_sessions.c: `radiance sessions list|show|search|rm|export`: the saved
** chats, read from the session store (session_db.h).
**
** A session is named by its id or any prefix of it that only one session
** has; list prints the shortest prefixes that are unambiguous (at least 8
** characters).  show and export follow the current branch of a session
** that /retry or /edit forked; export --json carries the other branches too,
** so nothing saved is lost by exporting.
*/
#include "../app.h"
#include "../models/hub.h"
#include "../sessions/session_db.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* One line, as every radiance error is; --help has the rest. */
static int usage_error(const char *fmt, const char *arg)
{
    fputs("radiance sessions: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (radiance sessions --help)\n", stderr);
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
    int rc = j && json_dumpf(j, out, JSON_INDENT(2)) == 0 && fputc('\n', out) != EOF
                 ? RAD_OK
                 : rad_error_set(RAD_E_IO, "cannot write the JSON output");
    json_decref(j);
    return rc;
}

/* Stored JSON text as a value (null when absent; a string when it does not parse). */
static json_t *stored_json(const char *text)
{
    if (!text) return json_null();
    json_error_t err;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &err);
    return j ? j : json_string(text);
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
    json_object_set_new(o, "title", json_string(s->title));
    json_object_set_new(o, "created_ms", json_integer(s->created_ms));
    json_object_set_new(o, "updated_ms", json_integer(s->updated_ms));
    json_object_set_new(o, "created", iso_time(s->created_ms));
    json_object_set_new(o, "updated", iso_time(s->updated_ms));
    json_object_set_new(o, "model", json_pack("{s:s,s:s}", "name", s->model_name, "id", s->model_id));
    json_object_set_new(o, "system_prompt", s->system_prompt ? json_string(s->system_prompt) : json_null());
    json_object_set_new(o, "sampler", stored_json(s->sampler_json));
    json_object_set_new(o, "messages", json_integer(s->n_messages));
    json_object_set_new(o, "leaf_id", s->leaf_id ? json_integer(s->leaf_id) : json_null());
    return o;
}

static int cmd_list(RadSessionDb *db, int json, int limit)
{
    RadSession *v;
    int n;
    int rc = rad_session_list(db, limit, &v, &n);
    if (rc) return rc;
    if (json) {
        json_t *a = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(a, session_json(&v[i]));
        rc = emit_json(a, stdout);
    } else if (n == 0) {
        fputs("radiance: no saved sessions yet; radiance chat saves one\n", stderr);
    } else {
        int w = short_len(v, n);
        printf("%-*s  %-16s  %5s  %-20s  %s\n", w, "ID", "UPDATED", "MSGS", "MODEL", "TITLE");
        for (int i = 0; i < n; i++) {
            char when[32];
            one_line(v[i].title);
            printf("%-*.*s  %-16s  %5d  %-20.20s  %s\n", w, w, v[i].id,
                   local_time(v[i].updated_ms, when, sizeof when), v[i].n_messages,
                   v[i].model_name[0] ? v[i].model_name : "-", v[i].title[0] ? v[i].title : "(untitled)");
        }
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

static void print_indented(const char *text, const char *prefix)
{
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
        printf("session   %s\n", s.id);
        printf("title     %s\n", s.title[0] ? s.title : "(untitled)");
        if (s.model_name[0] || s.model_id[0])
            printf("model     %s%s%.12s%s\n", s.model_name, s.model_id[0] ? " (id " : "", s.model_id,
                   s.model_id[0] ? ")" : "");
        printf("created   %s\nupdated   %s\n", local_time(s.created_ms, c, sizeof c),
               local_time(s.updated_ms, u, sizeof u));
        printf("messages  %d", all.n);
        if (all.n != branch.n) printf(" (%d on the current branch; the rest are forks)", branch.n);
        printf("\n");
        if (s.sampler_json) printf("sampler   %s\n", s.sampler_json);
        if (snaps) printf("snapshots %d (%s)\n", snaps, rad_hub_format_bytes(stored, b, sizeof b));
        if (s.system_prompt) {
            printf("system    ");
            print_indented(s.system_prompt, "");
        }
        for (int i = 0; i < branch.n; i++) {
            const RadMessage *m = &branch.v[i];
            int k, of;
            fork_place(&all, m, &k, &of);
            printf("\n[%s]", m->role);
            if (of > 1) printf(" (version %d of %d)", k, of);
            if (m->completion_tokens)
                printf(" %d tokens%s%s", m->completion_tokens, m->finish ? ", " : "",
                       m->finish ? m->finish : "");
            printf("\n");
            if (m->reasoning && *m->reasoning) {
                printf("  (thinking)\n");
                print_indented(m->reasoning, "  | ");
            }
            if (m->tool_calls_json && strcmp(m->tool_calls_json, "[]") != 0)
                printf("  (tool calls) %s\n", m->tool_calls_json);
            print_indented(m->content, "  ");
        }
    }
    rad_message_list_free(&branch);
    rad_message_list_free(&all);
    rad_session_free(&s);
    return rc;
}

/* ------------------------------------------------------------ search */

static int cmd_search(RadSessionDb *db, const char *text, int json, int limit)
{
    int color = !json && getenv("NO_COLOR") == NULL && isatty(STDOUT_FILENO);
    RadSearchHit *h;
    int n;
    int rc = rad_session_search(db, text, color ? "\033[1m" : "[", color ? "\033[0m" : "]", limit, &h, &n);
    if (rc) return rc;
    if (json) {
        json_t *a = json_array();
        for (int i = 0; i < n; i++) {
            json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:I}", "session", h[i].session_id, "title",
                                  h[i].title, "message_id", (json_int_t)h[i].message_id, "role", h[i].role,
                                  "snippet", h[i].snippet, "created_ms", (json_int_t)h[i].created_ms);
            json_array_append_new(a, o);
        }
        rc = emit_json(a, stdout);
    } else if (n == 0) {
        fprintf(stderr, "radiance: no message contains \"%s\"\n", text);
    } else {
        for (int i = 0; i < n; i++) {
            char when[32];
            one_line(h[i].snippet);
            one_line(h[i].title);
            printf("%.8s  %s  %-9s  %-24.24s  %s\n", h[i].session_id,
                   local_time(h[i].created_ms, when, sizeof when), h[i].role,
                   h[i].title[0] ? h[i].title : "(untitled)", h[i].snippet);
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
    json_object_set_new(o, "content", json_string(m->content));
    json_object_set_new(o, "reasoning", m->reasoning ? json_string(m->reasoning) : json_null());
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
    json_object_set_new(o, "model_name", m->model_name ? json_string(m->model_name) : json_null());
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
    FILE *out = stdout;
    if (!rc && path && !(out = fopen(path, "w"))) {
        out = stdout;
        rc = rad_error_set(RAD_E_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    if (!rc) rc = json ? export_json(&s, &branch, &all, out) : export_md(&s, &branch, all.n, out);
    if (out != stdout && fclose(out) != 0 && !rc) rc = rad_error_set(RAD_E_IO, "%s: cannot write", path);
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
            printf("removed %s  %s\n", full[i], s.title[0] ? s.title : "(untitled)");
        }
        rad_session_free(&s);
    }
    free(full);
    return rc;
}

/* ------------------------------------------------------------ dispatch */

int rad_cmd_sessions(int argc, char **argv)
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
            fputs(usage, stdout);
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
        else if (!(rc = rad_sdb_open(NULL, &db)))
            rc = cmd_list(db, json, limit);
    } else if (!strcmp(sub, "show")) {
        if (nops != 2)
            status = usage_error("%s", "show wants one session ID");
        else if (!(rc = rad_sdb_open(NULL, &db)) && !(rc = rad_session_resolve(db, ops[1], id)))
            rc = cmd_show(db, id);
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
            if (!rc && !(rc = rad_sdb_open(NULL, &db))) rc = cmd_search(db, text, json, limit);
            free(text);
        }
    } else if (!strcmp(sub, "rm")) {
        if (nops < 2)
            status = usage_error("%s", "rm wants one or more session IDs");
        else if (!(rc = rad_sdb_open(NULL, &db)))
            rc = cmd_rm(db, ops + 1, nops - 1);
    } else if (!strcmp(sub, "export")) {
        if (nops != 2)
            status = usage_error("%s", "export wants one session ID");
        else if (json == md)
            status = usage_error("%s", "export wants --md or --json");
        else if (!(rc = rad_sdb_open(NULL, &db)) && !(rc = rad_session_resolve(db, ops[1], id)))
            rc = cmd_export(db, id, json, output);
    } else {
        status = usage_error("unknown subcommand '%s'", sub);
    }
    rad_sdb_close(db);
    if (rc) return rad_app_fail(rc);
    return status;
}
