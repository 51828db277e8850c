/*
** tui_transcript.c: the conversation as it is shown: entries (user turns,
** replies, notices), each laid out into lines for the current width and
** view and cached until it changes, so a redraw while a reply streams only
** re-renders the reply that grew.
**
** The transcript is a view, not the record: the conversation runner owns
** the messages and the session database stores them.  Front ends rebuild it
** from the conversation after /retry, /edit, /load.
*/
#include "tui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ RadBuf */

void rad_buf_add(RadBuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *t = realloc(b->s, cap);
        if (!t) abort();
        b->s = t;
        b->cap = cap;
    }
    if (n) memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void rad_buf_adds(RadBuf *b, const char *s)
{
    rad_buf_add(b, s, strlen(s));
}

void rad_buf_free(RadBuf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------ entries */

RadEntry *rad_tr_add(RadTranscript *t, RadEntryKind kind, const char *text)
{
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 32;
        RadEntry **v = realloc(t->v, (size_t)cap * sizeof *v);
        if (!v) abort();
        t->v = v;
        t->cap = cap;
    }
    RadEntry *e = calloc(1, sizeof *e);
    if (!e) abort();
    e->kind = kind;
    e->dirty = 1;
    if (text) rad_buf_adds(&e->text, text);
    else rad_buf_add(&e->text, "", 0);
    t->v[t->n++] = e;
    return e;
}

static void entry_free(RadEntry *e)
{
    rad_buf_free(&e->text);
    rad_buf_free(&e->reasoning);
    rad_buf_free(&e->tools);
    free(e->footer);
    rad_lines_free(&e->lines);
    free(e);
}

void rad_tr_pop(RadTranscript *t)
{
    if (t->n > 0) entry_free(t->v[--t->n]);
}

void rad_tr_clear(RadTranscript *t)
{
    for (int i = 0; i < t->n; i++) entry_free(t->v[i]);
    t->n = 0;
    t->scroll = 0;
}

void rad_tr_free(RadTranscript *t)
{
    rad_tr_clear(t);
    free(t->v);
    t->v = NULL;
    t->cap = 0;
}

void rad_tr_touch(RadEntry *e)
{
    e->dirty = 1;
}

/* ------------------------------------------------------------ layout */

/* Where a two-column line's second column starts ("  /retry   a new
** reply"): after its first run of two or more spaces that follows text;
** 0 when the line has no such gap. */
static size_t second_column(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] == ' ') i++;
    for (; i + 1 < n; i++)
        if (s[i] == ' ' && s[i + 1] == ' ') {
            while (i < n && s[i] == ' ') i++;
            return i < n ? i : 0;
        }
    return 0;
}

/* Each source line of text wrapped with prefix on the first line of the
** text and cont on the rest.  hang: a line laid out in two columns
** (/help) continues under its second column, so a narrow window keeps the
** table's shape. */
static void wrap_lines(RadLines *out, const char *prefix, const char *cont, RadStyle mark, RadStyle st,
                       const char *text, size_t n, int width, int hang)
{
    RadRich p = {0}, c = {0}, body = {0};
    size_t pos = 0;
    int first = 1;
    do {
        const char *nl = memchr(text + pos, '\n', n - pos);
        size_t len = nl ? (size_t)(nl - (text + pos)) : n - pos;
        rad_rich_clear(&p);
        rad_rich_clear(&c);
        rad_rich_clear(&body);
        rad_rich_adds(&p, mark, first ? prefix : cont);
        rad_rich_adds(&c, mark, cont);
        size_t col = hang ? second_column(text + pos, len) : 0;
        int lead = rad_text_width(cont, strlen(cont));
        if (col && (int)col + lead < width * 2 / 3)
            for (size_t k = 0; k < col; k++) rad_rich_adds(&c, mark, " ");
        rad_rich_add(&body, st, text + pos, len);
        rad_wrap(out, &p, &c, &body, width, RAD_WRAP_WORD);
        pos += len + (nl ? 1 : 0);
        first = 0;
    } while (pos < n);
    rad_rich_free(&p);
    rad_rich_free(&c);
    rad_rich_free(&body);
}

static void wrap_text(RadLines *out, const char *prefix, const char *cont, RadStyle mark, RadStyle st,
                      const char *text, size_t n, int width)
{
    wrap_lines(out, prefix, cont, mark, st, text, n, width, 0);
}

static void blank_line(RadLines *out, int width)
{
    RadRich empty = {0};
    rad_wrap(out, NULL, NULL, &empty, width, RAD_WRAP_CHAR);
}

static int count_words(const char *s, size_t n)
{
    int words = 0, in = 0;
    for (size_t i = 0; i < n; i++) {
        int sp = s[i] == ' ' || s[i] == '\n' || s[i] == '\t';
        if (!sp && !in) words++;
        in = !sp;
    }
    return words;
}

static void render_assistant(RadEntry *e, int width, int view, int code_base)
{
    RadLines *out = &e->lines;
    const RadStyle dim = RAD_STYLE(RAD_ROLE_REASONING, RAD_ST_DIM);
    const RadStyle mark = RAD_STYLE(RAD_ROLE_MARK, 0);
    if (e->reasoning.len > 0) {
        char head[96];
        int thinking_now = e->streaming && e->text.len == 0 && e->n_tools == 0;
        int words = count_words(e->reasoning.s, e->reasoning.len);
        if (view & RAD_VIEW_THINKING) {
            snprintf(head, sizeof head, "\xe2\x96\xbe %s (%d words; Ctrl-T folds)", thinking_now ? "thinking" : "thought",
                     words);
            wrap_text(out, "  ", "  ", dim, dim, head, strlen(head), width);
            size_t start = 0;
            while (start < e->reasoning.len && e->reasoning.s[start] == '\n') start++;
            wrap_text(out, "  \xe2\x94\x8a ", "  \xe2\x94\x8a ", dim, RAD_STYLE(RAD_ROLE_REASONING, RAD_ST_DIM | RAD_ST_ITALIC),
                      e->reasoning.s + start, e->reasoning.len - start, width);
        } else {
            snprintf(head, sizeof head, "\xe2\x96\xb8 %s (%d words; Ctrl-T shows)", thinking_now ? "thinking\xe2\x80\xa6" : "thought",
                     words);
            wrap_text(out, "  ", "  ", dim, dim, head, strlen(head), width);
        }
    }
    RadMdOptions o = {0};
    o.width = width;
    o.raw = (view & RAD_VIEW_RAW) != 0;
    o.final = !e->streaming;
    o.code_base = code_base;
    o.base = RAD_STYLE(RAD_ROLE_NONE, 0);
    o.indent = "  ";
    /* a model's reply usually opens with a newline or two */
    size_t skip = 0;
    while (skip < e->text.len && (e->text.s[skip] == '\n' || e->text.s[skip] == '\r')) skip++;
    e->n_code = rad_md_render(out, e->text.s + skip, e->text.len - skip, &o);
    if (e->n_tools > 0) {
        const RadStyle tool = RAD_STYLE(RAD_ROLE_TOOL, 0);
        size_t pos = 0;
        for (int k = 0; k < e->n_tools && pos < e->tools.len; k++) {
            const char *end = memchr(e->tools.s + pos, '\x1e', e->tools.len - pos);
            size_t len = end ? (size_t)(end - (e->tools.s + pos)) : e->tools.len - pos;
            wrap_text(out, "  ", "  ", RAD_STYLE(RAD_ROLE_TOOL, RAD_ST_BOLD), RAD_STYLE(RAD_ROLE_TOOL, RAD_ST_BOLD),
                      "\xe2\x9a\x99 tool call", strlen("\xe2\x9a\x99 tool call"), width);
            wrap_text(out, "  \xe2\x94\x82 ", "  \xe2\x94\x82 ", mark, tool, e->tools.s + pos, len, width);
            pos += len + (end ? 1 : 0);
        }
    }
    if (e->interrupted) {
        const char *msg = "\xe2\x96\xa0 interrupted (Ctrl-C); the partial reply is kept";
        wrap_text(out, "  ", "  ", RAD_STYLE(RAD_ROLE_WARN, RAD_ST_BOLD), RAD_STYLE(RAD_ROLE_WARN, RAD_ST_BOLD), msg,
                  strlen(msg), width);
    }
    if (e->footer) {
        RadStyle st = RAD_STYLE(RAD_ROLE_NONE, RAD_ST_DIM);
        wrap_text(out, "  ", "  ", st, st, e->footer, strlen(e->footer), width);
    }
}

static void render_entry(RadEntry *e, const RadEntry *prev, int width, int view, int code_base)
{
    RadLines *out = &e->lines;
    rad_lines_clear(out);
    int notice = e->kind == RAD_ENTRY_NOTICE || e->kind == RAD_ENTRY_ERROR;
    int prev_notice = prev && (prev->kind == RAD_ENTRY_NOTICE || prev->kind == RAD_ENTRY_ERROR);
    if (prev && !(notice && prev_notice)) blank_line(out, width);
    switch (e->kind) {
    case RAD_ENTRY_USER:
        wrap_text(out, "\xe2\x80\xba ", "  ", RAD_STYLE(RAD_ROLE_USER, RAD_ST_BOLD), RAD_STYLE(RAD_ROLE_USER, RAD_ST_BOLD),
                  e->text.s, e->text.len, width);
        break;
    case RAD_ENTRY_SYSTEM:
        wrap_text(out, "system: ", "        ", RAD_STYLE(RAD_ROLE_NOTICE, RAD_ST_BOLD),
                  RAD_STYLE(RAD_ROLE_NOTICE, RAD_ST_ITALIC), e->text.s, e->text.len, width);
        break;
    case RAD_ENTRY_NOTICE:
        wrap_lines(out, "\xc2\xb7 ", "  ", RAD_STYLE(RAD_ROLE_NOTICE, 0), RAD_STYLE(RAD_ROLE_NOTICE, 0), e->text.s,
                   e->text.len, width, 1);
        break;
    case RAD_ENTRY_ERROR:
        wrap_text(out, "! ", "  ", RAD_STYLE(RAD_ROLE_ERROR, RAD_ST_BOLD), RAD_STYLE(RAD_ROLE_ERROR, 0), e->text.s,
                  e->text.len, width);
        break;
    case RAD_ENTRY_ASSISTANT:
        render_assistant(e, width, view, code_base);
        break;
    }
    e->cache_width = width;
    e->cache_view = view;
    e->cache_code_base = code_base;
    e->dirty = 0;
}

int rad_tr_layout(RadTranscript *t, int width)
{
    int total = 0, code_base = 1;
    for (int i = 0; i < t->n; i++) {
        RadEntry *e = t->v[i];
        if (e->dirty || e->cache_width != width || e->cache_view != t->view || e->cache_code_base != code_base)
            render_entry(e, i ? t->v[i - 1] : NULL, width, t->view, code_base);
        if (e->kind == RAD_ENTRY_ASSISTANT) code_base += e->n_code;
        total += e->lines.n;
    }
    return total;
}

const RadLine *rad_tr_line(const RadTranscript *t, int i)
{
    for (int k = 0; k < t->n; k++) {
        if (i < t->v[k]->lines.n) return &t->v[k]->lines.v[i];
        i -= t->v[k]->lines.n;
    }
    return NULL;
}

int rad_tr_code_count(const RadTranscript *t)
{
    int n = 0;
    for (int i = 0; i < t->n; i++)
        if (t->v[i]->kind == RAD_ENTRY_ASSISTANT) n += t->v[i]->n_code;
    return n;
}

char *rad_tr_code_block(const RadTranscript *t, int k, char **lang)
{
    for (int i = 0; i < t->n && k >= 1; i++) {
        const RadEntry *e = t->v[i];
        if (e->kind != RAD_ENTRY_ASSISTANT) continue;
        if (k <= e->n_code) {
            char *code = NULL;
            size_t skip = 0;
            while (skip < e->text.len && (e->text.s[skip] == '\n' || e->text.s[skip] == '\r')) skip++;
            if (rad_md_code_block(e->text.s + skip, e->text.len - skip, k - 1, &code, lang) == 0) return code;
            return NULL;
        }
        k -= e->n_code;
    }
    return NULL;
}
