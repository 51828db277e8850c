/*
** tui.h: what the pieces of the full-screen chat share.
**
** The TUI is split by responsibility:
**   tui_text.c        styled text and word wrap by display width (CJK, emoji)
**   tui_markdown.c    a reply's markdown into styled lines, one source line at
**                     a time, so lines already shown never re-flow
**   tui_transcript.c  the entries on screen, their cached lines, scrollback
**   tui_input.c       the multi-line input editor (emacs keys, history)
**   tui_status.c      the status line (model, context meter, speed)
**   tui.c             ncurses, the event loop, streaming, key bindings
** Everything here draws into plain data (RadLines); only tui.c and
** tui_status.c talk to ncurses, so the layout code is testable without a
** terminal.
*/
#ifndef RAD_TUI_H
#define RAD_TUI_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ styles */

/* A style: attribute bits in the low byte, a colour role in the high byte.
** tui.c maps roles to colour pairs (none under NO_COLOR). */
typedef uint16_t RadStyle;

#define RAD_ST_BOLD 0x01
#define RAD_ST_DIM 0x02
#define RAD_ST_ITALIC 0x04
#define RAD_ST_UNDERLINE 0x08
#define RAD_ST_REVERSE 0x10
#define RAD_ST_STRIKE 0x20

enum RadRole {
    RAD_ROLE_NONE = 0,
    RAD_ROLE_USER,          /* the user's turns */
    RAD_ROLE_REASONING,     /* a reply's thinking */
    RAD_ROLE_NOTICE,        /* the app speaking: notices, help */
    RAD_ROLE_ERROR,
    RAD_ROLE_WARN,          /* the context meter near the end */
    RAD_ROLE_HEADING,
    RAD_ROLE_QUOTE,
    RAD_ROLE_LINK,
    RAD_ROLE_CODE,          /* code spans and blocks */
    RAD_ROLE_KEYWORD,       /* highlighted code */
    RAD_ROLE_STRING,
    RAD_ROLE_COMMENT,
    RAD_ROLE_NUMBER,
    RAD_ROLE_TOOL,          /* tool calls */
    RAD_ROLE_MARK,          /* bullets, fences, rules */
    RAD_ROLE_COUNT
};

#define RAD_STYLE(role, attrs) ((RadStyle)(((role) << 8) | (attrs)))
#define RAD_STYLE_ROLE(st) ((st) >> 8)
#define RAD_STYLE_ATTRS(st) ((st) & 0xff)

/* ------------------------------------------------------------ styled text */

typedef struct RadSpan {
    RadStyle style;
    uint32_t off, len;          /* bytes of the owner's text */
} RadSpan;

/* Styled text being built: bytes and the runs of style over them.  Adjacent
** runs of one style are merged. */
typedef struct RadRich {
    char *text;
    size_t len, cap;
    RadSpan *spans;
    int n_spans, cap_spans;
} RadRich;

void rad_rich_add(RadRich *r, RadStyle st, const char *s, size_t n);
void rad_rich_adds(RadRich *r, RadStyle st, const char *s);
void rad_rich_clear(RadRich *r);
void rad_rich_free(RadRich *r);
/* Display columns of valid, sanitized text (what rad_wrap measures). */
int rad_text_width(const char *s, size_t n);

/* One line as drawn: clean UTF-8 (no control characters), its runs of
** style, and its width in terminal columns. */
typedef struct RadLine {
    char *text;
    RadSpan *spans;
    int n_spans;
    int width;
} RadLine;

typedef struct RadLines {
    RadLine *v;
    int n, cap;
} RadLines;

void rad_lines_clear(RadLines *l);
void rad_lines_free(RadLines *l);

typedef enum RadWrapMode {
    RAD_WRAP_WORD = 0,          /* break at spaces and around wide characters */
    RAD_WRAP_CHAR = 1           /* break anywhere, keep every space (code) */
} RadWrapMode;

/* Lay body (one logical line: a '\n' in it is shown as a space) into lines
** of at most width columns, appended to out.  The first line starts with
** prefix, the others with cont (either may be NULL).  Invalid UTF-8 and
** control characters are shown as U+FFFD, tabs as spaces to the next
** multiple of 4; a zero-width character rides on the one before it.  Widths
** are utf8proc_charwidth's, the same table the terminal's wcwidth follows. */
void rad_wrap(RadLines *out, const RadRich *prefix, const RadRich *cont, const RadRich *body, int width,
              RadWrapMode mode);

/* ------------------------------------------------------------ markdown */

typedef struct RadMdOptions {
    int width;                  /* columns available */
    int raw;                    /* show the source as written, wrapped, no styling */
    int final;                  /* the text is complete: its last line counts as ended */
    int code_base;              /* the number shown for the first code block (for /copy N) */
    RadStyle base;              /* the style of plain text */
    const char *indent;         /* written before every line (e.g. "  ") */
} RadMdOptions;

/* Render markdown text into lines appended to out; returns how many fenced
** code blocks it holds.  A source line renders the same whatever follows it
** (block structure is decided at the line's start, inline markup by md4c on
** the line alone), so a streaming reply only ever grows at the bottom; the
** one change to a shown line is colour: a code block's lines are
** highlighted when its closing fence arrives. */
int rad_md_render(RadLines *out, const char *text, size_t n, const RadMdOptions *o);

/* The contents of fenced code block k (0-based) of text, malloc'd in *out
** (with its language in *lang when lang is non-NULL, "" when none).  Returns
** 0, or -1 when text has no block k. */
int rad_md_code_block(const char *text, size_t n, int k, char **out, char **lang);

/* ------------------------------------------------------------ transcript */

typedef enum RadEntryKind {
    RAD_ENTRY_USER,
    RAD_ENTRY_ASSISTANT,
    RAD_ENTRY_NOTICE,           /* one line from the app (or several, preformatted) */
    RAD_ENTRY_ERROR,
    RAD_ENTRY_SYSTEM            /* the system prompt */
} RadEntryKind;

typedef struct RadBuf {
    char *s;
    size_t len, cap;
} RadBuf;

void rad_buf_add(RadBuf *b, const char *s, size_t n);
void rad_buf_adds(RadBuf *b, const char *s);
void rad_buf_free(RadBuf *b);

typedef struct RadEntry {
    RadEntryKind kind;
    RadBuf text;                /* content (user, assistant, notice) */
    RadBuf reasoning;           /* an assistant turn's thinking */
    RadBuf tools;               /* tool calls, separated by '\x1e' */
    int n_tools;
    int streaming;              /* a reply still arriving */
    int interrupted;            /* stopped by Ctrl-C: the partial reply is kept */
    char *footer;               /* a reply's numbers, shown dimmed under it, or NULL */
    int n_code;                 /* fenced code blocks in text (set when rendered) */
    /* cache: the lines for (width, view) */
    RadLines lines;
    int cache_width, cache_view, cache_code_base, dirty;
} RadEntry;

/* View switches that change how entries render. */
#define RAD_VIEW_RAW 1          /* replies as markdown source */
#define RAD_VIEW_THINKING 2     /* reasoning expanded */

typedef struct RadTranscript {
    RadEntry **v;
    int n, cap;
    int view;                   /* RAD_VIEW_* bits */
    int scroll;                 /* lines scrolled up from the bottom; 0 follows new text */
} RadTranscript;

RadEntry *rad_tr_add(RadTranscript *t, RadEntryKind kind, const char *text);
void rad_tr_clear(RadTranscript *t);
void rad_tr_free(RadTranscript *t);
/* Mark an entry changed (its lines are rebuilt at the next layout). */
void rad_tr_touch(RadEntry *e);
/* Bring every entry's lines up to date for width; returns the total count. */
int rad_tr_layout(RadTranscript *t, int width);
/* Line i (0-based, over all entries) after rad_tr_layout. */
const RadLine *rad_tr_line(const RadTranscript *t, int i);
/* The code of block k (1-based, numbered over the whole transcript), malloc'd. */
char *rad_tr_code_block(const RadTranscript *t, int k, char **lang);
int rad_tr_code_count(const RadTranscript *t);

/* Remove the last entry (a reply that never began). */
void rad_tr_pop(RadTranscript *t);

/* ------------------------------------------------------------ status line */

typedef struct RadStatusInfo {
    const char *model;
    int ctx_used, ctx_size;
    int ctx_level;              /* 0 fine, 1 getting full, 2 the next reply drops turns */
    const char *state;          /* "ready", "generating", ... */
    double tps;                 /* tokens per second (0: none yet) */
    int tps_estimate;           /* tps is a live estimate */
    double ttft_ms;             /* time to first token (0: none yet) */
    int prompt_tokens, prompt_evaluated;    /* the last reply's; prompt_tokens 0: none */
    int thinking;               /* -1 model default, 0 off, 1 on */
    int lines_below;            /* scrolled up: lines under the view */
    const char *hint;           /* a transient message, or NULL */
} RadStatusInfo;

/* The status line's text, exactly width columns, least important parts
** dropped first when it does not fit. */
void rad_status_line(RadRich *r, const RadStatusInfo *s, int width);

/* ------------------------------------------------------------ input editor */

typedef struct RadInput {
    char *text;                 /* UTF-8, NUL-terminated */
    size_t len, cap;
    size_t cursor;              /* byte offset, on a character boundary */
    char *kill;                 /* the last killed text, for Ctrl-Y */
    int history_pos;            /* -1 when editing a fresh line; else the entry shown */
    char *draft;                /* the fresh line, kept while browsing history */
    int in_paste;               /* between the bracketed-paste markers */
    int scroll;                 /* first shown row of the input area */
} RadInput;

typedef enum RadInputResult {
    RAD_INPUT_NONE = 0,         /* key handled (or ignored) */
    RAD_INPUT_SUBMIT,           /* Enter: the text is ready */
    RAD_INPUT_EOF               /* Ctrl-D on an empty line */
} RadInputResult;

/* Key codes tui.c gives the editor beyond ncurses's KEY_*: Alt-x arrives as
** RAD_KEY_ALT | x; bracketed paste as the two markers. */
#define RAD_KEY_ALT 0x40000000
#define RAD_KEY_PASTE_BEGIN 0x20000001
#define RAD_KEY_PASTE_END 0x20000002

void rad_input_init(RadInput *in);
void rad_input_free(RadInput *in);
void rad_input_set(RadInput *in, const char *text);
void rad_input_insert(RadInput *in, const char *s, size_t n);
/* Handle one key (ncurses code, a byte of UTF-8 text, or RAD_KEY_*). */
RadInputResult rad_input_key(RadInput *in, int key);
/* The rows of the input laid out at width (each row a line of text), and
** where the cursor is. The first row starts after prompt_width columns. */
void rad_input_layout(const RadInput *in, int width, int prompt_width, RadLines *rows, int *cur_row, int *cur_col);

/* History shared with line mode (readline's history list and file). */
void rad_history_open(void);
void rad_history_add(const char *line);
int rad_history_count(void);
/* Entry i (0 oldest), with its newlines, malloc'd; NULL out of range. */
char *rad_history_get(int i);
void rad_history_close(void);
const char *rad_history_path(void);

#endif /* RAD_TUI_H */
