/*
** tui_text.c: styled text, and word wrap by display width.
**
** Model output is untrusted text: it may hold invalid UTF-8, escape
** sequences, tabs, wide (CJK, emoji) and zero-width (combining) characters.
** rad_wrap turns it into lines that are safe to hand to ncurses and whose
** widths are exact, measured with utf8proc_charwidth (the Unicode East Asian
** Width and emoji tables that wcwidth, and therefore ncurses and the
** terminal, follow).  What may not reach a terminal (C0 and C1 controls,
** DEL, bidirectional overrides, invalid bytes) is decided by the app's one
** rule (term_safe.c) and shown as the same visible escape every command
** prints.  A character of width 0 is kept with the character
** before it, so a cut never separates an accent from its letter.
*/
#include "tui.h"
#include "../cli.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static void *grow(void *p, size_t elem, int *cap, int need)
{
    if (need <= *cap) return p;
    int n = *cap ? *cap : 8;
    while (n < need) n *= 2;
    void *q = realloc(p, (size_t)n * elem);
    if (!q) abort();    /* a UI that cannot hold its own text has nothing sensible to do */
    *cap = n;
    return q;
}

/* ------------------------------------------------------------ RadRich */

void rad_rich_add(RadRich *r, RadStyle st, const char *s, size_t n)
{
    if (n == 0) return;
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 64;
        while (cap < r->len + n + 1) cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t) abort();
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, s, n);
    if (r->n_spans > 0 && r->spans[r->n_spans - 1].style == st) {
        r->spans[r->n_spans - 1].len += (uint32_t)n;
    } else {
        r->spans = grow(r->spans, sizeof *r->spans, &r->cap_spans, r->n_spans + 1);
        r->spans[r->n_spans++] = (RadSpan){st, (uint32_t)r->len, (uint32_t)n};
    }
    r->len += n;
    r->text[r->len] = 0;
}

void rad_rich_adds(RadRich *r, RadStyle st, const char *s)
{
    rad_rich_add(r, st, s, strlen(s));
}

void rad_rich_clear(RadRich *r)
{
    r->len = 0;
    r->n_spans = 0;
    if (r->text) r->text[0] = 0;
}

void rad_rich_free(RadRich *r)
{
    free(r->text);
    free(r->spans);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ RadLines */

static void line_free(RadLine *l)
{
    free(l->text);
    free(l->spans);
}

void rad_lines_clear(RadLines *l)
{
    for (int i = 0; i < l->n; i++) line_free(&l->v[i]);
    l->n = 0;
}

void rad_lines_free(RadLines *l)
{
    rad_lines_clear(l);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static RadLine *lines_push(RadLines *l)
{
    l->v = grow(l->v, sizeof *l->v, &l->cap, l->n + 1);
    RadLine *line = &l->v[l->n++];
    memset(line, 0, sizeof *line);
    return line;
}

/* ------------------------------------------------------------ cells */

/* One character as shown: its clean bytes (in the cell buffer), its width,
** its style. */
typedef struct Cell {
    uint32_t off;
    uint16_t len;
    uint8_t width;
    uint8_t space;              /* a plain space: a place to break */
    RadStyle style;
} Cell;

typedef struct Cells {
    Cell *v;
    int n, cap;
    char *bytes;
    size_t len, cap_bytes;
    int col;                    /* columns so far, for tab stops */
} Cells;

static void bytes_add(Cells *c, const char *s, size_t n)
{
    if (c->len + n > c->cap_bytes) {
        size_t cap = c->cap_bytes ? c->cap_bytes : 256;
        while (cap < c->len + n) cap *= 2;
        char *b = realloc(c->bytes, cap);
        if (!b) abort();
        c->bytes = b;
        c->cap_bytes = cap;
    }
    memcpy(c->bytes + c->len, s, n);
    c->len += n;
}

static void cell_push(Cells *c, RadStyle st, const char *s, size_t n, int width, int space)
{
    c->v = grow(c->v, sizeof *c->v, &c->cap, c->n + 1);
    c->v[c->n++] = (Cell){(uint32_t)c->len, (uint16_t)n, (uint8_t)width, (uint8_t)space, st};
    bytes_add(c, s, n);
    c->col += width;
}

static const char replacement[] = "\xef\xbf\xbd";   /* U+FFFD */

/* Decode n bytes of s in style st into cells.  What may not reach the
** terminal is decided by the app's one rule (rad_safe_escape): each such
** character becomes the cells of its visible escape (\x1b, \u009b, \xff),
** as `run` and `chat --plain` print it; a carriage return before a newline
** is dropped (CRLF text). */
static void cells_add(Cells *c, RadStyle st, const char *s, size_t n)
{
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        char esc[RAD_SAFE_ESC_MAX];
        size_t used;
        int elen = rad_safe_escape(s + i, n - i, RAD_SAFE_TEXT, &used, esc);
        if (elen > 0) {
            if (!(s[i] == '\r' && i + 1 < n && s[i + 1] == '\n'))
                for (int k = 0; k < elen; k++) cell_push(c, st, esc + k, 1, 1, 0);
            i += used;
            continue;
        }
        utf8proc_int32_t cp;
        utf8proc_ssize_t got = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
        const char *bytes = s + i;
        i += (size_t)got;
        if (cp == '\t') {
            int to = 4 - c->col % 4;
            for (int k = 0; k < to; k++) cell_push(c, st, " ", 1, 1, 1);
            continue;
        }
        if (cp == '\n' || cp == ' ') { cell_push(c, st, " ", 1, 1, 1); continue; }
        utf8proc_category_t cat = utf8proc_category(cp);
        if (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_CS ||
            cat == UTF8PROC_CATEGORY_CO) {
            cell_push(c, st, replacement, 3, 1, 0);
            continue;
        }
        int w = utf8proc_charwidth(cp);
        if (w <= 0 && c->n > 0 && !c->v[c->n - 1].space) {
            /* combining mark, ZWJ, variation selector: part of the last cell */
            Cell *last = &c->v[c->n - 1];
            if (last->off + last->len == c->len) {
                bytes_add(c, bytes, (size_t)got);
                last->len += (uint16_t)got;
                continue;
            }
        }
        if (w <= 0) continue;           /* nothing to sit on: drop it */
        cell_push(c, st, bytes, (size_t)got, w > 2 ? 2 : w, 0);
    }
}

static void cells_from_rich(Cells *c, const RadRich *r)
{
    c->n = 0;
    c->len = 0;
    c->col = 0;
    if (!r) return;
    for (int k = 0; k < r->n_spans; k++)
        cells_add(c, r->spans[k].style, r->text + r->spans[k].off, r->spans[k].len);
}

static void cells_free(Cells *c)
{
    free(c->v);
    free(c->bytes);
}

int rad_text_width(const char *s, size_t n)
{
    Cells c = {0};
    cells_add(&c, 0, s, n);
    int w = c.col;
    cells_free(&c);
    return w;
}

/* Append cells [from, to) of c to line l (bytes and merged style runs). */
static void line_add_cells(RadLine *l, size_t *len, size_t *cap, int *cap_spans, const Cells *c, int from, int to)
{
    for (int i = from; i < to; i++) {
        const Cell *cell = &c->v[i];
        if (*len + cell->len + 1 > *cap) {
            size_t n = *cap ? *cap : 64;
            while (n < *len + cell->len + 1) n *= 2;
            char *t = realloc(l->text, n);
            if (!t) abort();
            l->text = t;
            *cap = n;
        }
        memcpy(l->text + *len, c->bytes + cell->off, cell->len);
        if (l->n_spans > 0 && l->spans[l->n_spans - 1].style == cell->style) {
            l->spans[l->n_spans - 1].len += cell->len;
        } else {
            l->spans = grow(l->spans, sizeof *l->spans, cap_spans, l->n_spans + 1);
            l->spans[l->n_spans++] = (RadSpan){cell->style, (uint32_t)*len, cell->len};
        }
        *len += cell->len;
        l->text[*len] = 0;
        l->width += cell->width;
    }
}

static void emit_line(RadLines *out, const Cells *prefix, const Cells *body, int from, int to)
{
    RadLine *l = lines_push(out);
    size_t len = 0, cap = 0;
    int cap_spans = 0;
    if (prefix) line_add_cells(l, &len, &cap, &cap_spans, prefix, 0, prefix->n);
    line_add_cells(l, &len, &cap, &cap_spans, body, from, to);
    if (!l->text) {
        l->text = malloc(1);
        if (!l->text) abort();
        l->text[0] = 0;
    }
}

/* A break is allowed before cell i when it follows a space, or when either
** side is a wide character (CJK text has no spaces). */
static int can_break_before(const Cells *c, int i)
{
    if (i <= 0 || i >= c->n) return 0;
    return c->v[i - 1].space || c->v[i].width == 2 || c->v[i - 1].width == 2;
}

void rad_wrap(RadLines *out, const RadRich *prefix, const RadRich *cont, const RadRich *body, int width,
              RadWrapMode mode)
{
    Cells pre = {0}, con = {0}, text = {0};
    cells_from_rich(&pre, prefix);
    cells_from_rich(&con, cont);
    cells_from_rich(&text, body);
    if (width < 1) width = 1;
    int first = 1, start = 0;
    for (;;) {
        Cells *lead = first ? &pre : &con;
        int avail = width - lead->col;
        if (avail < 1) {            /* a terminal narrower than the indent: drop the indent */
            lead = NULL;
            avail = width;
        }
        int col = 0, i = start, brk = -1;
        while (i < text.n && col + text.v[i].width <= avail) {
            col += text.v[i].width;
            i++;
            if (mode == RAD_WRAP_WORD && can_break_before(&text, i)) brk = i;
        }
        if (i >= text.n) {
            emit_line(out, lead, &text, start, text.n);
            break;
        }
        int end, next;
        if (mode == RAD_WRAP_WORD && text.v[i].space) {
            end = i;
            next = i;
        } else if (mode == RAD_WRAP_WORD && brk > start) {
            end = brk;
            next = brk;
        } else {
            end = i > start ? i : start + 1;    /* one character wider than the room: show it anyway */
            next = end;
        }
        if (mode == RAD_WRAP_WORD) {
            while (end > start && text.v[end - 1].space) end--;
            while (next < text.n && text.v[next].space) next++;
        }
        emit_line(out, lead, &text, start, end);
        if (next >= text.n) break;
        start = next;
        first = 0;
    }
    cells_free(&pre);
    cells_free(&con);
    cells_free(&text);
}
