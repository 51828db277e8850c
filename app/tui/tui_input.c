/*
** tui_input.c: the TUI's input area, a small multi-line editor.
**
** Why not readline here: readline owns a line of the terminal and redraws it
** itself, while the TUI must keep drawing the transcript, the status line and
** a growing multi-line input together.  So the TUI has this editor with
** readline's key bindings (the emacs ones users already know) and readline's
** history list (chat_history.c), and line mode uses readline itself.
**
** Keys: Enter sends; Alt-Enter or Ctrl-J inserts a newline; a bracketed paste
** is inserted as it is (its newlines included), never sent half-way.
** Ctrl-A/E line start/end, Ctrl-B/F and arrows move, Alt-B/F by word,
** Alt-</Alt-> whole input, Ctrl-D/Delete delete forward (Ctrl-D on an
** empty input ends the chat), Backspace back, Ctrl-K/Ctrl-U kill to line
** end/start, Ctrl-W/Alt-Backspace kill a word back, Alt-D a word forward,
** Ctrl-Y yanks, Up/Down (Ctrl-P/Ctrl-N) move between lines and, from the
** first/last line, through the history.
*/
#define NCURSES_WIDECHAR 1
#include "tui.h"

#include <ncursesw/curses.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

void rad_input_init(RadInput *in)
{
    memset(in, 0, sizeof *in);
    in->history_pos = -1;
    rad_input_set(in, "");
}

void rad_input_free(RadInput *in)
{
    free(in->text);
    free(in->kill);
    free(in->draft);
    memset(in, 0, sizeof *in);
}

static void reserve(RadInput *in, size_t need)
{
    if (need + 1 <= in->cap) return;
    size_t cap = in->cap ? in->cap : 128;
    while (cap < need + 1) cap *= 2;
    char *t = realloc(in->text, cap);
    if (!t) abort();
    in->text = t;
    in->cap = cap;
}

void rad_input_set(RadInput *in, const char *text)
{
    size_t n = strlen(text);
    reserve(in, n);
    memcpy(in->text, text, n + 1);
    in->len = n;
    in->cursor = n;
}

/* An edit makes the text a fresh draft: Up goes back to the newest entry,
** and Down returns to this text. */
static void edited(RadInput *in)
{
    in->history_pos = -1;
    free(in->draft);
    in->draft = NULL;
}

void rad_input_insert(RadInput *in, const char *s, size_t n)
{
    edited(in);
    reserve(in, in->len + n);
    memmove(in->text + in->cursor + n, in->text + in->cursor, in->len - in->cursor + 1);
    memcpy(in->text + in->cursor, s, n);
    in->len += n;
    in->cursor += n;
}

/* Remove [from, to); the removed text becomes the kill buffer when kill. */
static void cut(RadInput *in, size_t from, size_t to, int kill)
{
    if (to <= from) return;
    edited(in);
    if (kill) {
        free(in->kill);
        in->kill = strndup(in->text + from, to - from);
    }
    memmove(in->text + from, in->text + to, in->len - to + 1);
    in->len -= to - from;
    in->cursor = from;
}

static size_t prev_char(const char *s, size_t i)
{
    if (i == 0) return 0;
    i--;
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) i--;
    return i;
}

static size_t next_char(const char *s, size_t len, size_t i)
{
    if (i >= len) return len;
    i++;
    while (i < len && ((unsigned char)s[i] & 0xc0) == 0x80) i++;
    return i;
}

static size_t line_start(const RadInput *in, size_t i)
{
    while (i > 0 && in->text[i - 1] != '\n') i--;
    return i;
}

static size_t line_end(const RadInput *in, size_t i)
{
    while (i < in->len && in->text[i] != '\n') i++;
    return i;
}

static int word_byte(char c)
{
    unsigned char u = (unsigned char)c;
    return u >= 0x80 || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_';
}

static size_t word_left(const RadInput *in, size_t i)
{
    while (i > 0 && !word_byte(in->text[i - 1])) i--;
    while (i > 0 && word_byte(in->text[i - 1])) i--;
    return i;
}

static size_t word_right(const RadInput *in, size_t i)
{
    while (i < in->len && !word_byte(in->text[i])) i++;
    while (i < in->len && word_byte(in->text[i])) i++;
    return i;
}

/* Display width of one character at s (as the layout counts it). */
static int char_width(const char *s, size_t n, int col)
{
    utf8proc_int32_t cp;
    utf8proc_ssize_t got = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &cp);
    if (got <= 0) return 1;
    if (cp == '\t') return 4 - col % 4;
    if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return 1;
    int w = utf8proc_charwidth(cp);
    return w < 0 ? 1 : w > 2 ? 2 : w;
}

/* Columns from the start of i's line to i. */
static int column_of(const RadInput *in, size_t i)
{
    int col = 0;
    for (size_t k = line_start(in, i); k < i; k = next_char(in->text, in->len, k))
        col += char_width(in->text + k, in->len - k, col);
    return col;
}

/* The offset in the line starting at start closest to column col. */
static size_t offset_at_column(const RadInput *in, size_t start, int col)
{
    int c = 0;
    size_t k = start;
    while (k < in->len && in->text[k] != '\n') {
        int w = char_width(in->text + k, in->len - k, c);
        if (c + w > col) break;
        c += w;
        k = next_char(in->text, in->len, k);
    }
    return k;
}

static void history_show(RadInput *in, int pos)
{
    char *entry = rad_history_get(pos);
    if (!entry) return;
    rad_input_set(in, entry);
    free(entry);
    in->history_pos = pos;
}

static void history_up(RadInput *in)
{
    int count = rad_history_count();
    if (count == 0) return;
    if (in->history_pos < 0) {
        free(in->draft);
        in->draft = strdup(in->text);
        history_show(in, count - 1);
    } else if (in->history_pos > 0) {
        history_show(in, in->history_pos - 1);
    }
}

static void history_down(RadInput *in)
{
    if (in->history_pos < 0) return;
    if (in->history_pos + 1 < rad_history_count()) {
        history_show(in, in->history_pos + 1);
        return;
    }
    rad_input_set(in, in->draft ? in->draft : "");
    free(in->draft);
    in->draft = NULL;
    in->history_pos = -1;
}

static void line_up(RadInput *in)
{
    size_t start = line_start(in, in->cursor);
    if (start == 0) {
        history_up(in);
        return;
    }
    int col = column_of(in, in->cursor);
    in->cursor = offset_at_column(in, line_start(in, start - 1), col);
}

static void line_down(RadInput *in)
{
    size_t end = line_end(in, in->cursor);
    if (end >= in->len) {
        history_down(in);
        return;
    }
    int col = column_of(in, in->cursor);
    in->cursor = offset_at_column(in, end + 1, col);
}

RadInputResult rad_input_key(RadInput *in, int key)
{
    if (key == RAD_KEY_PASTE_BEGIN) {
        in->in_paste = 1;
        return RAD_INPUT_NONE;
    }
    if (key == RAD_KEY_PASTE_END) {
        in->in_paste = 0;
        return RAD_INPUT_NONE;
    }
    if (in->in_paste) {
        /* a paste is text, whatever keys it looks like */
        char c = key == '\r' || key == KEY_ENTER ? '\n' : (char)key;
        if (key == '\t' || key == '\r' || key == '\n' || key == KEY_ENTER || (key >= 0x20 && key < 0x7f))
            rad_input_insert(in, &c, 1);
        return RAD_INPUT_NONE;
    }
    switch (key) {
    case '\r':
    case KEY_ENTER: return RAD_INPUT_SUBMIT;
    case '\n':                                  /* Ctrl-J */
    case RAD_KEY_ALT | '\r':
    case RAD_KEY_ALT | '\n':
    case RAD_KEY_ALT | KEY_ENTER: rad_input_insert(in, "\n", 1); break;
    case '\t': rad_input_insert(in, "    ", 4); break;
    case 1:                                     /* Ctrl-A */
    case KEY_HOME: in->cursor = line_start(in, in->cursor); break;
    case 5:                                     /* Ctrl-E */
    case KEY_END: in->cursor = line_end(in, in->cursor); break;
    case 2:                                     /* Ctrl-B */
    case KEY_LEFT: in->cursor = prev_char(in->text, in->cursor); break;
    case 6:                                     /* Ctrl-F */
    case KEY_RIGHT: in->cursor = next_char(in->text, in->len, in->cursor); break;
    case RAD_KEY_ALT | 'b': in->cursor = word_left(in, in->cursor); break;
    case RAD_KEY_ALT | 'f': in->cursor = word_right(in, in->cursor); break;
    case RAD_KEY_ALT | '<': in->cursor = 0; break;
    case RAD_KEY_ALT | '>': in->cursor = in->len; break;
    case 16:                                    /* Ctrl-P */
    case KEY_UP: line_up(in); break;
    case 14:                                    /* Ctrl-N */
    case KEY_DOWN: line_down(in); break;
    case 4:                                     /* Ctrl-D */
        if (in->len == 0) return RAD_INPUT_EOF;
        /* fall through */
    case KEY_DC: cut(in, in->cursor, next_char(in->text, in->len, in->cursor), 0); break;
    case 8:
    case 127:
    case KEY_BACKSPACE: cut(in, prev_char(in->text, in->cursor), in->cursor, 0); break;
    case 11: {                                  /* Ctrl-K */
        size_t end = line_end(in, in->cursor);
        if (end == in->cursor && end < in->len) end++;     /* at the end: join the next line */
        size_t at = in->cursor;
        cut(in, at, end, 1);
        break;
    }
    case 21: cut(in, line_start(in, in->cursor), in->cursor, 1); break;        /* Ctrl-U */
    case 23:                                    /* Ctrl-W */
    case RAD_KEY_ALT | 127:
    case RAD_KEY_ALT | 8:
    case RAD_KEY_ALT | KEY_BACKSPACE: cut(in, word_left(in, in->cursor), in->cursor, 1); break;
    case RAD_KEY_ALT | 'd': {
        size_t at = in->cursor;
        cut(in, at, word_right(in, at), 1);
        break;
    }
    case 25:                                    /* Ctrl-Y */
        if (in->kill) rad_input_insert(in, in->kill, strlen(in->kill));
        break;
    default:
        if (key >= 0x20 && key < 0x7f) {
            char c = (char)key;
            rad_input_insert(in, &c, 1);
        }
        break;
    }
    return RAD_INPUT_NONE;
}

static void push_row(RadLines *rows, const RadInput *in, size_t from, size_t to, const RadRich *lead)
{
    RadRich body = {0};
    rad_rich_add(&body, RAD_STYLE(RAD_ROLE_NONE, 0), in->text + from, to - from);
    rad_wrap(rows, lead, NULL, &body, 1 << 20, RAD_WRAP_CHAR);
    rad_rich_free(&body);
}

void rad_input_layout(const RadInput *in, int width, int prompt_width, RadLines *rows, int *cur_row, int *cur_col)
{
    RadRich lead = {0};
    for (int i = 0; i < prompt_width; i++) rad_rich_adds(&lead, RAD_STYLE(RAD_ROLE_NONE, 0), " ");
    int avail = width - prompt_width;
    if (avail < 2) avail = 2;
    size_t row_start = 0, k = 0;
    int col = 0;
    *cur_row = -1;
    for (;;) {
        int at_break = k < in->len && in->text[k] == '\n';
        if (k == in->cursor && *cur_row < 0 && (col < avail || at_break)) {
            *cur_row = rows->n;
            *cur_col = prompt_width + (col < avail ? col : avail - 1);
        }
        if (k >= in->len) {
            push_row(rows, in, row_start, k, &lead);
            if (*cur_row < 0) {                 /* the cursor sits past a full last row */
                *cur_row = rows->n;
                *cur_col = prompt_width;
                push_row(rows, in, k, k, &lead);
            }
            break;
        }
        if (in->text[k] == '\n') {
            push_row(rows, in, row_start, k, &lead);
            k++;
            row_start = k;
            col = 0;
            continue;
        }
        int w = char_width(in->text + k, in->len - k, col);
        if (col + w > avail) {
            push_row(rows, in, row_start, k, &lead);
            row_start = k;
            col = 0;
            continue;
        }
        col += w;
        k = next_char(in->text, in->len, k);
    }
    rad_rich_free(&lead);
}
