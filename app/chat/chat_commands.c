/*
** chat_commands.c: the slash commands, one table for both front ends, so
** /help in the TUI and in line mode list the same things and behave the
** same.  A command answers through the front end's notice/error and asks
** it to redraw (rebuild) when the conversation changed wholesale.
**
** /retry and /edit never overwrite: the conversation is cut back and the
** new turn is saved beside the old one (a fork in the session's tree).
*/
#include "chat.h"
#include "../app.h"
#include "../cli.h"
#include "../models/model_store.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *const rad_chat_command_names[] = {
    "/help", "/system", "/clear", "/retry", "/edit", "/think", "/set", "/model", "/save", "/sessions",
    "/load", "/copy", "/export", "/stats", "/raw", "/fold", "/quit", "/exit", NULL,
};

static const char help_commands[] =
    "commands:\n"
    "  /help                this list\n"
    "  /system [TEXT | -]   show the system prompt, set it, or remove it (-)\n"
    "  /clear               start a new conversation (the last one stays saved)\n"
    "  /retry               a new reply to your last message (the old one is kept as a fork)\n"
    "  /edit                edit your last message and send it again (kept as a fork)\n"
    "  /think on|off|default  let the model reason before answering, or not\n"
    "  /set [KEY VALUE]     show or change: temp top_p top_k min_p seed (-1: random) n_predict "
    "repeat_penalty repeat_last_n context_policy reply_reserve\n"
    "  /model [MODEL]       show the model, or switch to another (the conversation stays)\n"
    "  /save [TITLE]        store the KV snapshot now (and name the session)\n"
    "  /sessions [N]        the last N saved sessions (default 15)\n"
    "  /load ID             open a saved session (an id prefix is enough)\n"
    "  /copy [N]            copy code block N (default: the last) to the clipboard (OSC 52)\n"
    "  /export [FILE]       write the conversation as markdown (default radiance-SESSION.md)\n"
    "  /stats               numbers of the last reply, the context and the session\n"
    "  /raw                 show replies as markdown source, or rendered again\n"
    "  /fold                fold or show the model's reasoning\n"
    "  /quit                leave (also /exit, Ctrl-D on an empty line)\n";

/* Two columns, the second starting after two spaces: the TUI wraps a long
** description under itself (a hanging indent), so the layout holds at any
** width. */
static const char help_tui_keys[] =
    "keys:\n"
    "  Enter                send\n"
    "  Alt-Enter, Ctrl-J    a new line in the message\n"
    "  Ctrl-C               stop the reply; when idle, clear the input (twice: leave)\n"
    "  Ctrl-D               leave (on an empty input)\n"
    "  PgUp, PgDn           scroll a page (Shift-Up, Shift-Down: a line)\n"
    "  Esc                  back to the bottom\n"
    "  Ctrl-T               fold or show the reasoning\n"
    "  Ctrl-O               markdown source or rendered\n"
    "  Ctrl-L               redraw\n"
    "  Up, Down             history (from the first or last line)\n"
    "  emacs keys           Ctrl-A/E/B/F/K/U/W/Y, Alt-B/F/D\n";

static const char help_line_keys[] =
    "input:\n"
    "  a line ending in \\  continues on the next\n"
    "  \"\"\"                  opens and closes a multi-line message\n"
    "  Ctrl-C               stop a reply; when idle, clear the line (twice: leave)\n"
    "  Ctrl-R               search the history (readline's keys)\n";

const char *rad_chat_help(int tui)
{
    static char buf[sizeof help_commands + sizeof help_tui_keys + sizeof help_line_keys];
    snprintf(buf, sizeof buf, "%s%s", help_commands, tui ? help_tui_keys : help_line_keys);
    return buf;
}

static void say(RadChat *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(RadChat *c, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    c->ui->notice(c, buf);
}

static void fail(RadChat *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(RadChat *c, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    c->ui->error(c, buf);
}

static int last_user(const RadChat *c)
{
    for (int i = rad_conv_count(c->conv) - 1; i >= 0; i--)
        if (!strcmp(rad_conv_message(c->conv, i)->role, "user")) return i;
    return -1;
}

/* ------------------------------------------------------------ commands */

static void cmd_system(RadChat *c, const char *arg)
{
    const RadConvMessage *m = rad_conv_message(c->conv, 0);
    int has = m && !strcmp(m->role, "system");
    if (!arg[0]) {
        if (has) say(c, "system prompt: %s", m->content);
        else say(c, "no system prompt (/system TEXT sets one)");
        return;
    }
    int remove = !strcmp(arg, "-");
    int before = rad_conv_count(c->conv);
    if ((!remove && rad_chat_check_text("the system prompt", arg)) || rad_conv_set_system(c->conv, remove ? NULL : arg)) {
        fail(c, "%s", rad_error_message());
        return;
    }
    int after = rad_conv_count(c->conv);
    rad_chat_rows_system_changed(c, before, after);
    if (c->db && c->session_id[0]) {
        RadSessionFields f = {.system_prompt = remove ? "" : arg};
        if (rad_session_update(c->db, c->session_id, &f)) fail(c, "saving the system prompt: %s", rad_error_message());
    }
    c->ui->rebuild(c);
    say(c, remove ? "system prompt removed" : "system prompt set");
}

static void cmd_retry(RadChat *c)
{
    int u = last_user(c);
    if (u < 0) {
        fail(c, "nothing to retry: no message of yours yet");
        return;
    }
    rad_conv_truncate(c->conv, u + 1);
    c->ui->rebuild(c);
    c->ui->reply(c);
}

static void cmd_edit(RadChat *c)
{
    int u = last_user(c);
    if (u < 0) {
        fail(c, "nothing to edit: no message of yours yet");
        return;
    }
    char *text = strdup(rad_conv_message(c->conv, u)->content);
    rad_conv_truncate(c->conv, u);
    c->ui->rebuild(c);
    if (text) c->ui->edit(c, text);
    free(text);
}

static void cmd_think(RadChat *c, const char *arg)
{
    int v;
    if (!arg[0]) {
        int t = c->settings->conv.thinking;
        say(c, "thinking: %s", t < 0 ? "the model's default" : t ? "on" : "off");
        return;
    }
    if (rad_parse_think("/think", arg, &v)) {
        fail(c, "/think on, off or default");
        return;
    }
    c->settings->conv.thinking = v;
    const RadChatFormat *f = rad_conv_format(c->conv);
    if (f && !f->reasoning_open && v >= 0)
        say(c, "thinking %s (this model's chat format has no reasoning markup, so it changes nothing)", v ? "on" : "off");
    else say(c, "thinking %s", v < 0 ? "back to the model's default" : v ? "on" : "off");
}

static void show_settings(RadChat *c)
{
    const RadConvSettings *s = &c->settings->conv;
    const RadSamplerParams *p = &s->sampler;
    char seed[32];
    if (s->seed_random) snprintf(seed, sizeof seed, "-1 (random per reply)");
    else snprintf(seed, sizeof seed, "%llu", (unsigned long long)p->seed);
    say(c,
        "temp %g  top_p %g  top_k %d  min_p %g  repeat_penalty %g  repeat_last_n %d  seed %s\n"
        "n_predict %d  reply_reserve %d  context_policy %s  think %s",
        p->temperature, p->top_p, p->top_k, p->min_p, p->repeat_penalty, p->repeat_last_n, seed, s->n_predict,
        s->reply_reserve, rad_context_policy_name(s->context_policy),
        s->thinking < 0 ? "default" : s->thinking ? "on" : "off");
}

static void cmd_set(RadChat *c, const char *arg)
{
    static const char *const allowed[] = {"temp", "top_p", "top_k", "min_p", "seed", "n_predict",
        "repeat_penalty", "repeat_last_n", "context_policy", "reply_reserve", "think", NULL};
    char key[64];
    size_t k = 0;
    while (arg[k] && !isspace((unsigned char)arg[k]) && k + 1 < sizeof key) {
        key[k] = arg[k] == '-' ? '_' : arg[k];
        k++;
    }
    key[k] = 0;
    const char *value = arg + k;
    while (isspace((unsigned char)*value)) value++;
    if (!key[0]) {
        show_settings(c);
        return;
    }
    if (!strcmp(key, "temperature")) strcpy(key, "temp");
    int known = 0;
    for (int i = 0; allowed[i]; i++) known |= !strcmp(allowed[i], key);
    if (!known) {
        fail(c, "/set: unknown setting '%s'; one of temp top_p top_k min_p seed n_predict repeat_penalty "
                "repeat_last_n context_policy reply_reserve", key);
        return;
    }
    if (!value[0]) {
        fail(c, "/set %s: a value is needed", key);
        return;
    }
    RadSettings trial = *c->settings;
    char where[80];
    snprintf(where, sizeof where, "/set %s", key);
    if (rad_settings_set(&trial, key, value, where) || rad_sampler_check(&trial.conv.sampler)) {
        fail(c, "%s", rad_error_message());
        return;
    }
    *c->settings = trial;
    say(c, "%s = %s", key, value);
}

static void cmd_model(RadChat *c, const char *arg)
{
    int used, size;
    rad_chat_context_level(c, &used, &size);
    if (!arg[0]) {
        const RadChatFormat *f = rad_conv_format(c->conv);
        say(c, "model %s\n  file %s\n  chat format %s \xc2\xb7 context %d of %d \xc2\xb7 %d threads \xc2\xb7 id %.16s",
            c->model_spec, c->model_path, f ? f->name : "none (raw completion)", used, size,
            rad_engine_threads(c->engine), rad_engine_model_id(c->engine));
        return;
    }
    rad_chat_save_snapshot(c, 0);
    /* Keep the conversation as text, then let go of the old model before
    ** opening the new one (two at once may not fit in memory); if the new one
    ** fails, the old one comes back. */
    int n = rad_conv_count(c->conv);
    RadConvMessage *keep = calloc((size_t)(n ? n : 1), sizeof *keep);
    if (!keep) return;
    for (int i = 0; i < n; i++) {
        const RadConvMessage *m = rad_conv_message(c->conv, i);
        keep[i].role = strdup(m->role);
        keep[i].content = strdup(m->content);
        keep[i].reasoning = m->reasoning ? strdup(m->reasoning) : NULL;
        keep[i].n_tool_calls = m->n_tool_calls;
        keep[i].tool_calls = m->n_tool_calls ? calloc((size_t)m->n_tool_calls, sizeof(char *)) : NULL;
        for (int k = 0; keep[i].tool_calls && k < m->n_tool_calls; k++) keep[i].tool_calls[k] = strdup(m->tool_calls[k]);
    }
    char *old_spec = c->model_spec;
    int old_quiet = c->settings->quiet;
    rad_conv_free(c->conv);
    rad_engine_close(c->engine);
    c->conv = NULL;
    c->engine = NULL;
    c->settings->quiet = 1;
    say(c, "loading %s ...", arg);
    c->model_spec = strdup(arg);
    int rc = c->model_spec ? rad_chat_open_model(c) : RAD_E_NOMEM;
    if (rc) {
        fail(c, "%s: %s", arg, rad_error_message()[0] ? rad_error_message() : rad_strerror(rc));
        free(c->model_spec);
        c->model_spec = old_spec;
        old_spec = NULL;
        if ((rc = rad_chat_open_model(c))) {
            fail(c, "reopening %s failed too: %s; /quit and start again", c->model_spec, rad_error_message());
            c->quit = 1;
            c->exit_code = rad_app_exit_code(rc);
        }
    }
    c->settings->quiet = old_quiet;
    /* the same conversation on whichever model is open (evaluated at the next reply) */
    if (c->conv) {
        rad_conv_clear(c->conv, 0);
        for (int i = 0; i < n; i++) {
            if (!strcmp(keep[i].role, "system")) rad_conv_set_system(c->conv, keep[i].content);
            else rad_conv_add(c->conv, keep[i].role, keep[i].content, keep[i].reasoning);
            for (int k = 0; k < keep[i].n_tool_calls; k++) rad_conv_add_tool_call(c->conv, keep[i].tool_calls[k]);
        }
    }
    for (int i = 0; i < n; i++) {
        free(keep[i].role);
        free(keep[i].content);
        free(keep[i].reasoning);
        for (int k = 0; k < keep[i].n_tool_calls; k++) free(keep[i].tool_calls[k]);
        free(keep[i].tool_calls);
    }
    free(keep);
    if (!old_spec || !c->conv) {
        c->ui->rebuild(c);
        return;
    }
    free(old_spec);
    if (c->db && c->session_id[0]) {
        RadSessionFields f = {.model_id = rad_engine_model_id(c->engine), .model_name = c->model_spec};
        rad_session_update(c->db, c->session_id, &f);
    }
    c->have_last = 0;
    c->ui->rebuild(c);
    say(c, "now talking to %s (loaded in %.0f ms); the conversation is evaluated again at the next reply",
        c->model_spec, c->open_ms);
}

static void cmd_save(RadChat *c, const char *arg)
{
    if (!c->db) {
        fail(c, "no session database: nothing can be saved");
        return;
    }
    if (rad_chat_save_snapshot(c, 1)) return;
    if (arg[0] && c->session_id[0]) {
        RadSessionFields f = {.title = arg};
        if (rad_session_update(c->db, c->session_id, &f)) fail(c, "naming the session: %s", rad_error_message());
        else say(c, "session %s is now called \"%s\"", c->session_id, arg);
    }
}

static void format_time(int64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%d %H:%M", &tm);
}

static void cmd_sessions(RadChat *c, const char *arg)
{
    if (!c->db) {
        fail(c, "no session database");
        return;
    }
    int limit = arg[0] ? atoi(arg) : 15;
    RadSession *v = NULL;
    int n = 0;
    if (rad_session_list(c->db, limit > 0 ? limit : 15, &v, &n)) {
        fail(c, "%s", rad_error_message());
        return;
    }
    if (n == 0) {
        say(c, "no saved sessions yet");
        return;
    }
    size_t cap = 256 + (size_t)n * 160, len = 0;
    char *out = malloc(cap);
    if (!out) return;
    len += (size_t)snprintf(out, cap, "saved sessions (newest first; /load ID opens one):");
    for (int i = 0; i < n && len < cap; i++) {
        char when[32];
        format_time(v[i].updated_ms, when, sizeof when);
        const char *mark = !strcmp(v[i].id, c->session_id) ? "*" : " ";
        len += (size_t)snprintf(out + len, cap - len, "\n%s%.8s  %s  %3d msgs  %.60s", mark, v[i].id, when,
                                v[i].n_messages, v[i].title[0] ? v[i].title : "(untitled)");
    }
    c->ui->notice(c, out);
    free(out);
    rad_session_list_free(v, n);
}

static void cmd_load(RadChat *c, const char *arg)
{
    if (!arg[0]) {
        fail(c, "/load ID (see /sessions)");
        return;
    }
    if (rad_conv_count(c->conv) > 0) rad_chat_save_snapshot(c, 0);
    char note[1024];
    if (rad_chat_resume(c, arg, note, sizeof note)) {
        fail(c, "/load %s: %s", arg, rad_error_message());
        return;
    }
    c->have_last = 0;
    c->ui->rebuild(c);
    if (note[0]) c->ui->notice(c, note);
}

static void cmd_copy(RadChat *c, const char *arg)
{
    int k = arg[0] ? atoi(arg) : 0;
    if (arg[0] && k <= 0) {
        fail(c, "/copy N: N is a code block's number, as shown beside it ([1], [2], ...)");
        return;
    }
    if (k == 0) {       /* the last block */
        char *probe;
        for (int i = 1; (probe = c->ui->code_block(c, i, NULL)); i++) {
            free(probe);
            k = i;
        }
        if (k == 0) {
            fail(c, "no code block to copy yet");
            return;
        }
    }
    char *lang = NULL, *code = c->ui->code_block(c, k, &lang);
    if (!code) {
        fail(c, "there is no code block %d", k);
        return;
    }
    int fd = isatty(STDOUT_FILENO) ? STDOUT_FILENO : open("/dev/tty", O_WRONLY | O_CLOEXEC);
    int lines = 0;
    for (const char *p = code; *p; p++) lines += *p == '\n';
    if (fd < 0 || rad_osc52_copy(fd, code)) {
        fail(c, "cannot reach the terminal to set the clipboard");
    } else {
        say(c, "copied code block %d (%s%s%d lines) to the clipboard with OSC 52 (the terminal must allow it)", k,
            lang && lang[0] ? lang : "", lang && lang[0] ? ", " : "", lines);
    }
    if (fd >= 0 && fd != STDOUT_FILENO) close(fd);
    free(code);
    free(lang);
}

static void cmd_export(RadChat *c, const char *arg)
{
    char path[1024];
    if (arg[0]) snprintf(path, sizeof path, "%s", arg);
    else snprintf(path, sizeof path, "radiance-%s.md", c->session_id[0] ? c->session_id : "chat");
    /* Through a temporary renamed into place (rad_outfile): a full disk
    ** leaves no half-written file, only the reason. */
    RadOutFile out;
    if (rad_outfile_open(&out, path)) {
        fail(c, "/export: %s", rad_error_message());
        return;
    }
    FILE *f = out.f;
    fprintf(f, "# radiance chat with %s\n", c->model_spec);
    if (c->session_id[0]) fprintf(f, "\nsession %s\n", c->session_id);
    for (int i = 0; i < rad_conv_count(c->conv); i++) {
        const RadConvMessage *m = rad_conv_message(c->conv, i);
        fprintf(f, "\n## %s\n\n", m->role);
        if (m->reasoning && m->reasoning[0]) {
            fputs("<details><summary>reasoning</summary>\n\n", f);
            fputs(m->reasoning, f);
            fputs("\n\n</details>\n\n", f);
        }
        fputs(m->content, f);
        fputc('\n', f);
        for (int k = 0; k < m->n_tool_calls; k++) fprintf(f, "\n```json\n%s\n```\n", m->tool_calls[k]);
        if (m->finish == RAD_FINISH_INTERRUPTED) fputs("\n*(interrupted)*\n", f);
    }
    if (rad_outfile_commit(&out)) fail(c, "/export: %s", rad_error_message());
    else say(c, "wrote %s (%d messages)", path, rad_conv_count(c->conv));
}

static void cmd_stats(RadChat *c)
{
    int used, size;
    int level = rad_chat_context_level(c, &used, &size);
    char out[2048];
    int n = snprintf(out, sizeof out, "model %s \xc2\xb7 context %d of %d tokens used%s", c->model_spec, used, size,
                     level == 2 ? " (full: the next reply drops the oldest turns)" : level == 1 ? " (getting full)" : "");
    if (c->have_last) {
        const RadConvStats *s = &c->last;
        n += snprintf(out + n, sizeof out - (size_t)n,
                      "\nlast reply: %d tokens, %.1f tok/s, first token after %.0f ms (%s)"
                      "\n  prompt: %d tokens, %d evaluated, %d reused from the KV cache; prefill %.0f ms (%.0f tok/s)",
                      s->completion_tokens, s->decode_tps, s->ttft_ms, rad_finish_name(c->last_finish),
                      s->prompt_tokens, s->prompt_evaluated, s->prompt_tokens - s->prompt_evaluated, s->prefill_ms,
                      s->prefill_tps);
        if (s->dropped_messages)
            n += snprintf(out + n, sizeof out - (size_t)n, "\n  the context policy dropped %d messages for it",
                          s->dropped_messages);
        if (s->draft_steps)
            n += snprintf(out + n, sizeof out - (size_t)n,
                          "\n  speculation: %d steps, %d of %d guesses accepted (%.0f%%), %.2f tokens a step",
                          s->draft_steps, s->draft_accepted, s->draft_proposed,
                          s->draft_proposed ? 100.0 * s->draft_accepted / s->draft_proposed : 0.0,
                          (double)s->completion_tokens / s->draft_steps);
    } else {
        n += snprintf(out + n, sizeof out - (size_t)n, "\nno reply yet in this conversation");
    }
    if (c->restored_tokens)
        n += snprintf(out + n, sizeof out - (size_t)n, "\nresumed from a KV snapshot of %d tokens", c->restored_tokens);
    /* What the next reply samples with, and the seed the last one drew. */
    char sampling[400];
    rad_sampling_describe(c->settings, &c->recommended, (unsigned long long)(c->have_last ? c->last.seed : 0),
                          sampling, sizeof sampling);
    if (n >= 0 && (size_t)n < sizeof out)
        n += snprintf(out + n, sizeof out - (size_t)n, "\nsampling: %s%s", sampling,
                      c->have_last ? "" : " (no reply yet)");
    n += snprintf(out + n, sizeof out - (size_t)n, "\nsession %s \xc2\xb7 %d messages \xc2\xb7 totals: prompt %lld (%lld evaluated), generated %lld",
                  c->session_id[0] ? c->session_id : "(not saved yet)", rad_conv_count(c->conv),
                  (long long)c->total_prompt, (long long)c->total_evaluated, (long long)c->total_completion);
    n += snprintf(out + n, sizeof out - (size_t)n, "\nstart-up: model opened in %.0f ms, ready after %.0f ms",
                  c->open_ms, c->ui_ms);
    /* Streamed experts: what reading them has cost since the model opened. */
    RadEngineStats es;
    rad_engine_stats(c->engine, &es);
    if (es.expert_slots > 0 && n >= 0 && (size_t)n < sizeof out) {
        const int64_t chosen = es.expert_loads + es.expert_hits;
        snprintf(out + n, sizeof out - (size_t)n,
                 "\nexperts streamed: a cache of %lld; so far %lld read (%.1f MB, %lld ahead of need), %.0f%% found "
                 "resident, %.0f ms waiting for reads",
                 (long long)es.expert_slots, (long long)es.expert_loads, es.expert_bytes_read / 1e6,
                 (long long)es.expert_prefetches, chosen ? 100.0 * es.expert_hits / chosen : 0.0,
                 es.expert_wait_ns / 1e6);
    }
    c->ui->notice(c, out);
}

static void cmd_view(RadChat *c, const char *which)
{
    int on = c->ui->view(c, which);
    if (on < 0) fail(c, "/%s: not in this mode", which);
    else if (!strcmp(which, "raw")) say(c, on ? "replies shown as markdown source" : "replies rendered");
    else say(c, on ? "reasoning folded" : "reasoning shown");
}

int rad_chat_command(RadChat *c, const char *line)
{
    while (*line == ' ' || *line == '\t') line++;
    if (line[0] != '/' || line[1] == '/' || line[1] == ' ' || line[1] == 0) return 0; /* "//x" sends "/x" */
    char name[32];
    size_t k = 0;
    const char *p = line + 1;
    while (*p && !isspace((unsigned char)*p) && k + 1 < sizeof name) name[k++] = (char)tolower((unsigned char)*p++);
    name[k] = 0;
    while (isspace((unsigned char)*p)) p++;
    char *arg = strdup(p);
    if (!arg) return 1;
    size_t alen = strlen(arg);
    while (alen > 0 && isspace((unsigned char)arg[alen - 1])) arg[--alen] = 0;

    if (!strcmp(name, "help") || !strcmp(name, "?")) c->ui->notice(c, rad_chat_help(c->ui->full_screen));
    else if (!strcmp(name, "system")) cmd_system(c, arg);
    else if (!strcmp(name, "clear") || !strcmp(name, "new")) {
        const char *old = c->session_id[0] ? c->session_id : NULL;
        char saved[RAD_SESSION_ID_LEN + 1] = "";
        if (old) {
            rad_chat_save_snapshot(c, 0);
            memcpy(saved, old, sizeof saved);
        }
        rad_chat_new_session(c);
        c->have_last = 0;
        c->ui->rebuild(c);
        if (saved[0]) say(c, "new conversation; the last one is saved as session %.8s (/load %.8s)", saved, saved);
        else say(c, "new conversation");
    } else if (!strcmp(name, "retry")) cmd_retry(c);
    else if (!strcmp(name, "edit")) cmd_edit(c);
    else if (!strcmp(name, "think")) cmd_think(c, arg);
    else if (!strcmp(name, "set")) cmd_set(c, arg);
    else if (!strcmp(name, "model")) cmd_model(c, arg);
    else if (!strcmp(name, "save")) cmd_save(c, arg);
    else if (!strcmp(name, "sessions")) cmd_sessions(c, arg);
    else if (!strcmp(name, "load") || !strcmp(name, "resume")) cmd_load(c, arg);
    else if (!strcmp(name, "copy")) cmd_copy(c, arg);
    else if (!strcmp(name, "export")) cmd_export(c, arg);
    else if (!strcmp(name, "stats")) cmd_stats(c);
    else if (!strcmp(name, "raw") || !strcmp(name, "fold")) cmd_view(c, name);
    else if (!strcmp(name, "quit") || !strcmp(name, "exit") || !strcmp(name, "bye") || !strcmp(name, "q")) {
        c->quit = 1;
        c->exit_code = RAD_EXIT_OK;
    } else fail(c, "unknown command /%s (/help lists them; start a message with // to send a leading /)", name);
    free(arg);
    return 1;
}
