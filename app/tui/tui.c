/*
** tui.c: `radiance chat`'s full-screen front end: ncurses, the event loop,
** and a reply streaming into the transcript while the keyboard stays live.
**
** One thread.  The conversation runner calls back for every piece of the
** reply; the callback appends it, reads whatever keys are waiting (so the
** user can scroll, fold reasoning or type the next message meanwhile) and
** redraws at most ~30 times a second.  Ctrl-C is a signal, not a key
** (the terminal stays in cbreak mode), so it reaches us during prefill too
** (interrupt.h): while a reply runs it sets the runner's stop flag (the
** partial reply is kept and marked interrupted); with nothing running the
** first clears the input and says how to leave, and a second in a row
** leaves with 130, so a Ctrl-C pressed just as a reply ends never ends the
** session.  A second Ctrl-C while the reply is still stopping leaves once
** it has; a third, if the engine does not return, leaves at once with the
** terminal restored.  SIGTERM and SIGHUP stop a reply and leave.
**
** Screen: the transcript on top (scrollback with PgUp/PgDn), the status
** line, then the input area (1 to a third of the rows, scrolling).  A
** resize (KEY_RESIZE) re-wraps everything at the new width.  Colours follow
** rad_use_color (NO_COLOR, --color); without them styles fall back to
** bold/dim/underline.
*/
#define NCURSES_WIDECHAR 1
#include "tui.h"
#include "../app.h"
#include "../chat/chat.h"
#include "../interrupt.h"

#include <langinfo.h>
#include <locale.h>
#include <ncursesw/curses.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <wchar.h>

#define KEY_PASTE_BEGIN_CODE (KEY_MAX + 1)
#define KEY_PASTE_END_CODE (KEY_MAX + 2)
#define DRAW_INTERVAL_MS 33.0
#define HINT_MS 4000.0

typedef struct Tui {
    RadChat *chat;
    RadTranscript tr;
    RadInput in;
    int color;
    int busy;                   /* a reply is running */
    RadEntry *reply;            /* the entry it streams into */
    int last_part;
    int n_parts;
    double reply_start_ms, first_part_ms;
    double last_draw_ms;
    int dirty;
    int last_total;             /* transcript lines at the last draw */
    char hint[160];
    double hint_until_ms;
    int handled_sigint;         /* rad_interrupt_count() at the last look */
    int quit_armed;             /* an idle Ctrl-C came; the next one in a row leaves */
    int quit;
    int exit_code;
} Tui;

static const char terminal_reset[] = "\033[?2004l\033[?1049l\033[0m\033[?25h\r\n";
static struct termios terminal_saved;   /* the modes before ncurses, for the emergency exit */
static int terminal_saved_ok;
static volatile sig_atomic_t screen_on; /* ncurses owns the terminal */

/* Before an exit from the signal handler: leave the terminal usable. */
static void restore_terminal(void)
{
    if (!screen_on) return;
    ssize_t w = write(STDOUT_FILENO, terminal_reset, sizeof terminal_reset - 1);
    (void)w;
    if (terminal_saved_ok) tcsetattr(STDIN_FILENO, TCSANOW, &terminal_saved); /* async-signal-safe */
}

/* A terminating signal (not Ctrl-C) came: leave, with its status. */
static int terminate_signal(void)
{
    int sig = rad_interrupt_last();
    return sig && sig != SIGINT;
}

/* ------------------------------------------------------------ drawing */

static attr_t style_attr(const Tui *u, RadStyle st)
{
    int at = RAD_STYLE_ATTRS(st), role = RAD_STYLE_ROLE(st);
    attr_t a = A_NORMAL;
    if (at & RAD_ST_BOLD) a |= A_BOLD;
    if (at & RAD_ST_DIM) a |= A_DIM;
    if (at & RAD_ST_ITALIC) a |= A_ITALIC;
    if (at & RAD_ST_UNDERLINE) a |= A_UNDERLINE;
    if (at & RAD_ST_REVERSE) a |= A_REVERSE;
    if (at & RAD_ST_STRIKE) a |= A_DIM;         /* curses has no strikethrough */
    if (u->color && role > 0 && role < RAD_ROLE_COUNT) {
        a |= COLOR_PAIR(role);
    } else if (!u->color) {
        /* without colour, the roles that matter keep a shape of their own */
        if (role == RAD_ROLE_MARK || role == RAD_ROLE_REASONING || role == RAD_ROLE_COMMENT) a |= A_DIM;
        if (role == RAD_ROLE_ERROR || role == RAD_ROLE_WARN || role == RAD_ROLE_KEYWORD) a |= A_BOLD;
    }
    return a;
}

static void setup_colors(void)
{
    start_color();
    use_default_colors();
    static const short fg[RAD_ROLE_COUNT] = {
        [RAD_ROLE_USER] = COLOR_GREEN,   [RAD_ROLE_REASONING] = -1,     [RAD_ROLE_NOTICE] = COLOR_CYAN,
        [RAD_ROLE_ERROR] = COLOR_RED,    [RAD_ROLE_WARN] = COLOR_YELLOW, [RAD_ROLE_HEADING] = COLOR_MAGENTA,
        [RAD_ROLE_QUOTE] = -1,           [RAD_ROLE_LINK] = COLOR_BLUE,  [RAD_ROLE_CODE] = COLOR_YELLOW,
        [RAD_ROLE_KEYWORD] = COLOR_MAGENTA, [RAD_ROLE_STRING] = COLOR_GREEN, [RAD_ROLE_COMMENT] = -1,
        [RAD_ROLE_NUMBER] = COLOR_CYAN,  [RAD_ROLE_TOOL] = COLOR_MAGENTA, [RAD_ROLE_MARK] = -1,
    };
    for (int r = 1; r < RAD_ROLE_COUNT; r++) init_pair((short)r, fg[r], -1);
}

static void draw_line(const Tui *u, int y, const RadLine *l, int width)
{
    move(y, 0);
    if (l) {
        for (int k = 0; k < l->n_spans; k++) {
            attrset(style_attr(u, l->spans[k].style));
            addnstr(l->text + l->spans[k].off, (int)l->spans[k].len);
        }
        attrset(A_NORMAL);
    }
    int cy, cx;
    getyx(stdscr, cy, cx);
    if (cy == y && cx < width) clrtoeol();
}

static void status_info(Tui *u, RadStatusInfo *s, int lines_below)
{
    RadChat *c = u->chat;
    double now = rad_now_ms();
    memset(s, 0, sizeof *s);
    s->model = rad_chat_model_name(c);
    s->ctx_level = rad_chat_context_level(c, &s->ctx_used, &s->ctx_size);
    s->thinking = c->settings->conv.thinking;
    s->lines_below = lines_below;
    if (u->busy) {
        s->state = c->stop ? "stopping\xe2\x80\xa6" : u->n_parts == 0 ? "reading the prompt\xe2\x80\xa6" : "generating (Ctrl-C stops)";
        if (u->n_parts > 1 && now > u->first_part_ms) {
            s->tps = (u->n_parts - 1) * 1000.0 / (now - u->first_part_ms);
            s->tps_estimate = 1;
        }
        if (u->first_part_ms > 0) s->ttft_ms = u->first_part_ms - u->reply_start_ms;
    } else {
        s->state = "ready";
        if (c->have_last) {
            s->tps = c->last.decode_tps;
            s->ttft_ms = c->last.ttft_ms;
            s->prompt_tokens = c->last.prompt_tokens;
            s->prompt_evaluated = c->last.prompt_evaluated;
        }
    }
    if (u->hint[0] && now < u->hint_until_ms) s->hint = u->hint;
}

static void draw(Tui *u)
{
    int rows = LINES, cols = COLS;
    u->last_draw_ms = rad_now_ms();
    u->dirty = 0;
    if (rows < 4 || cols < 12) {
        erase();
        mvaddnstr(0, 0, "radiance: window too small", cols);
        refresh();
        return;
    }
    RadLines in_rows = {0};
    int cur_row = 0, cur_col = 0;
    rad_input_layout(&u->in, cols, 2, &in_rows, &cur_row, &cur_col);
    int max_in = rows / 3 > 1 ? rows / 3 : 1;
    int in_h = in_rows.n < max_in ? in_rows.n : max_in;
    if (cur_row < u->in.scroll) u->in.scroll = cur_row;
    if (cur_row >= u->in.scroll + in_h) u->in.scroll = cur_row - in_h + 1;
    if (u->in.scroll > in_rows.n - in_h) u->in.scroll = in_rows.n - in_h;
    if (u->in.scroll < 0) u->in.scroll = 0;
    int status_y = rows - in_h - 1, view_h = status_y;

    int total = rad_tr_layout(&u->tr, cols);
    /* scrolled up, the view stays on what the user reads while text arrives below */
    if (u->tr.scroll > 0 && total > u->last_total && u->last_total > 0) u->tr.scroll += total - u->last_total;
    u->last_total = total;
    int max_scroll = total > view_h ? total - view_h : 0;
    if (u->tr.scroll > max_scroll) u->tr.scroll = max_scroll;
    if (u->tr.scroll < 0) u->tr.scroll = 0;
    int first = total > view_h ? total - view_h - u->tr.scroll : 0;
    for (int y = 0; y < view_h; y++) draw_line(u, y, first + y < total ? rad_tr_line(&u->tr, first + y) : NULL, cols);

    RadStatusInfo si;
    status_info(u, &si, u->tr.scroll);
    RadRich status = {0};
    RadLines status_lines = {0};
    rad_status_line(&status, &si, cols);
    rad_wrap(&status_lines, NULL, NULL, &status, cols, RAD_WRAP_CHAR);
    draw_line(u, status_y, status_lines.n ? &status_lines.v[0] : NULL, cols);
    rad_rich_free(&status);
    rad_lines_free(&status_lines);

    for (int i = 0; i < in_h; i++) {
        int r = u->in.scroll + i;
        draw_line(u, status_y + 1 + i, r < in_rows.n ? &in_rows.v[r] : NULL, cols);
        if (r == 0) {
            attrset(style_attr(u, RAD_STYLE(RAD_ROLE_USER, u->busy ? RAD_ST_DIM : RAD_ST_BOLD)));
            mvaddstr(status_y + 1 + i, 0, "\xe2\x80\xba");
            attrset(A_NORMAL);
        }
    }
    rad_lines_free(&in_rows);
    move(status_y + 1 + cur_row - u->in.scroll, cur_col < cols ? cur_col : cols - 1);
    refresh();
}

/* Redraw if something changed; while a reply streams, at most every
** DRAW_INTERVAL_MS. */
static void maybe_draw(Tui *u)
{
    if (!u->dirty) return;
    if (u->busy && rad_now_ms() - u->last_draw_ms < DRAW_INTERVAL_MS) return;
    draw(u);
}

static void hint(Tui *u, const char *text)
{
    snprintf(u->hint, sizeof u->hint, "%s", text);
    u->hint_until_ms = rad_now_ms() + HINT_MS;
    u->dirty = 1;
}

/* ------------------------------------------------------------ front end */

static Tui *tui_of(RadChat *c)
{
    return c->ui_data;
}

static void ui_notice(RadChat *c, const char *text)
{
    Tui *u = tui_of(c);
    rad_tr_add(&u->tr, RAD_ENTRY_NOTICE, text);
    /* a notice while a reply has not begun goes above it */
    if (u->reply && u->tr.n >= 2 && u->tr.v[u->tr.n - 2] == u->reply && u->reply->text.len == 0 &&
        u->reply->reasoning.len == 0) {
        RadEntry *notice = u->tr.v[u->tr.n - 1];
        u->tr.v[u->tr.n - 1] = u->reply;
        u->tr.v[u->tr.n - 2] = notice;
        rad_tr_touch(u->reply);
    }
    u->tr.scroll = 0;
    u->dirty = 1;
    maybe_draw(u);
}

static void ui_error(RadChat *c, const char *text)
{
    Tui *u = tui_of(c);
    rad_tr_add(&u->tr, RAD_ENTRY_ERROR, text);
    u->tr.scroll = 0;
    u->dirty = 1;
}

static void entry_from_message(RadEntry *e, const RadConvMessage *m, const RadChatRow *row)
{
    /* a reply made in this run carries its own numbers; a loaded one, the row's */
    RadFinish finish = m->finish != RAD_FINISH_NONE ? m->finish : row ? row->finish : RAD_FINISH_NONE;
    const RadConvStats *stats = m->stats.completion_tokens > 0 || !row ? &m->stats : &row->stats;
    e->text.len = 0;
    rad_buf_add(&e->text, m->content, strlen(m->content));
    e->reasoning.len = 0;
    if (m->reasoning) rad_buf_add(&e->reasoning, m->reasoning, strlen(m->reasoning));
    e->tools.len = 0;
    e->n_tools = 0;
    for (int k = 0; k < m->n_tool_calls; k++) {
        if (k) rad_buf_add(&e->tools, "\x1e", 1);
        rad_buf_adds(&e->tools, m->tool_calls[k]);
        e->n_tools++;
    }
    e->interrupted = finish == RAD_FINISH_INTERRUPTED;
    free(e->footer);
    e->footer = NULL;
    if (stats->completion_tokens > 0) {
        char sum[256];
        rad_chat_reply_summary(stats, finish, sum, sizeof sum);
        e->footer = strdup(sum);
    }
    rad_tr_touch(e);
}

static void ui_rebuild(RadChat *c)
{
    Tui *u = tui_of(c);
    rad_tr_clear(&u->tr);
    for (int i = 0; i < rad_conv_count(c->conv); i++) {
        const RadConvMessage *m = rad_conv_message(c->conv, i);
        if (!strcmp(m->role, "system")) rad_tr_add(&u->tr, RAD_ENTRY_SYSTEM, m->content);
        else if (!strcmp(m->role, "user")) rad_tr_add(&u->tr, RAD_ENTRY_USER, m->content);
        else if (!strcmp(m->role, "assistant")) entry_from_message(rad_tr_add(&u->tr, RAD_ENTRY_ASSISTANT, NULL), m, rad_chat_row(c, i));
        else {
            RadBuf b = {0};
            rad_buf_adds(&b, "tool result: ");
            rad_buf_adds(&b, m->content);
            rad_tr_add(&u->tr, RAD_ENTRY_NOTICE, b.s);
            rad_buf_free(&b);
        }
    }
    u->dirty = 1;
}

static void ui_edit(RadChat *c, const char *text)
{
    Tui *u = tui_of(c);
    rad_input_set(&u->in, text);
    u->dirty = 1;
}

static char *ui_code_block(RadChat *c, int k, char **lang)
{
    Tui *u = tui_of(c);
    rad_tr_layout(&u->tr, COLS > 12 ? COLS : 80);
    return rad_tr_code_block(&u->tr, k, lang);
}

static int ui_view(RadChat *c, const char *which)
{
    Tui *u = tui_of(c);
    if (!strcmp(which, "raw")) {
        u->tr.view ^= RAD_VIEW_RAW;
        u->dirty = 1;
        return (u->tr.view & RAD_VIEW_RAW) != 0;
    }
    if (!strcmp(which, "fold")) {
        u->tr.view ^= RAD_VIEW_THINKING;
        u->dirty = 1;
        return (u->tr.view & RAD_VIEW_THINKING) == 0;
    }
    return -1;
}

/* ------------------------------------------------------------ keys */

static void submit(Tui *u);

static void scroll_by(Tui *u, int lines)
{
    u->tr.scroll += lines;
    if (u->tr.scroll < 0) u->tr.scroll = 0;
    u->dirty = 1;       /* draw clamps it to the top */
}

static void handle_key(Tui *u, int kind, wint_t wc)
{
    int page = LINES > 8 ? LINES - 6 : 2;
    RadInputResult r = RAD_INPUT_NONE;
    u->dirty = 1;
    if (kind == KEY_CODE_YES) {
        switch (wc) {
        case KEY_RESIZE: return;
        case KEY_PPAGE: scroll_by(u, page); return;
        case KEY_NPAGE: scroll_by(u, -page); return;
        case KEY_SR: scroll_by(u, 1); return;
        case KEY_SF: scroll_by(u, -1); return;
        case KEY_PASTE_BEGIN_CODE: rad_input_key(&u->in, RAD_KEY_PASTE_BEGIN); return;
        case KEY_PASTE_END_CODE: rad_input_key(&u->in, RAD_KEY_PASTE_END); return;
        case KEY_MOUSE: return;
        default: r = rad_input_key(&u->in, (int)wc); break;
        }
    } else if (u->in.in_paste) {
        if (wc >= 0x20 && wc != 0x7f) {
            char mb[8];
            mbstate_t ps;
            memset(&ps, 0, sizeof ps);
            size_t n = wcrtomb(mb, (wchar_t)wc, &ps);
            if (n != (size_t)-1) rad_input_insert(&u->in, mb, n);
        } else {
            rad_input_key(&u->in, (int)wc);
        }
        return;
    } else if (wc == 27) {
        /* Esc then a key within the escape delay is Alt-key */
        wint_t next;
        timeout(0);
        int k2 = wget_wch(stdscr, &next);
        if (k2 == ERR) {
            u->tr.scroll = 0;   /* a lone Esc: back to the bottom */
            return;
        }
        if (k2 == KEY_CODE_YES && next == KEY_ENTER) r = rad_input_key(&u->in, RAD_KEY_ALT | KEY_ENTER);
        else if (k2 == KEY_CODE_YES && next == KEY_BACKSPACE) r = rad_input_key(&u->in, RAD_KEY_ALT | KEY_BACKSPACE);
        else if (k2 == OK && next < 0x80) r = rad_input_key(&u->in, RAD_KEY_ALT | (int)next);
    } else if (wc == 20) {                      /* Ctrl-T */
        ui_view(u->chat, "fold");
        return;
    } else if (wc == 15) {                      /* Ctrl-O */
        ui_view(u->chat, "raw");
        return;
    } else if (wc == 12) {                      /* Ctrl-L */
        clearok(curscr, TRUE);
        return;
    } else if (wc < 0x20 || wc == 0x7f) {
        r = rad_input_key(&u->in, (int)wc);
    } else {
        char mb[8];
        mbstate_t ps;
        memset(&ps, 0, sizeof ps);
        size_t n = wcrtomb(mb, (wchar_t)wc, &ps);
        if (n != (size_t)-1) rad_input_insert(&u->in, mb, n);
    }
    if (u->quit_armed) {
        /* a key between two Ctrl-Cs: they are not "in a row", and the hint
        ** that says the next one leaves is no longer true */
        u->quit_armed = 0;
        u->hint[0] = 0;
        u->dirty = 1;
    }
    if (r == RAD_INPUT_SUBMIT) {
        if (u->busy) hint(u, "a reply is running: wait, or Ctrl-C to stop it");
        else submit(u);
    } else if (r == RAD_INPUT_EOF && !u->busy) {
        u->quit = 1;
        u->exit_code = RAD_EXIT_OK;
    }
}

/* Read the keys that are waiting (up to wait_ms for the first), then draw. */
static void pump(Tui *u, int wait_ms)
{
    timeout(wait_ms);
    wint_t wc;
    int kind;
    while ((kind = wget_wch(stdscr, &wc)) != ERR) {
        handle_key(u, kind, wc);
        timeout(0);
    }
    maybe_draw(u);
}

/* ------------------------------------------------------------ replies */

static void on_part(void *user, RadReplyPart part, const char *text, size_t n)
{
    Tui *u = user;
    RadEntry *e = u->reply;
    if (!e) return;
    if (part == RAD_REPLY_CONTENT) rad_buf_add(&e->text, text, n);
    else if (part == RAD_REPLY_REASONING) rad_buf_add(&e->reasoning, text, n);
    else {
        if (u->last_part != RAD_REPLY_TOOL_CALL) {
            if (e->n_tools) rad_buf_add(&e->tools, "\x1e", 1);
            e->n_tools++;
        }
        rad_buf_add(&e->tools, text, n);
    }
    u->last_part = (int)part;
    u->n_parts++;
    if (u->first_part_ms == 0) u->first_part_ms = rad_now_ms();
    rad_tr_touch(e);
    u->dirty = 1;
    RadConvMessage partial = {0};
    partial.role = "assistant";
    partial.content = e->text.s ? e->text.s : "";
    partial.reasoning = e->reasoning.len ? e->reasoning.s : NULL;
    rad_chat_reply_progress(u->chat, &partial);
    pump(u, 0);
}

static void on_notice(void *user, const char *message)
{
    Tui *u = user;
    ui_notice(u->chat, message);
}

static int ui_reply(RadChat *c)
{
    Tui *u = tui_of(c);
    RadEntry *e = rad_tr_add(&u->tr, RAD_ENTRY_ASSISTANT, NULL);
    e->streaming = 1;
    u->reply = e;
    u->busy = 1;
    u->last_part = -1;
    u->n_parts = 0;
    u->first_part_ms = 0;
    u->reply_start_ms = rad_now_ms();
    u->tr.scroll = 0;
    c->stop = 0;
    int signals_before = rad_interrupt_count();
    rad_interrupt_arm(&c->stop, 3);     /* stop; a second: leave when stopped; a third: leave now */
    draw(u);

    RadConvCallbacks cb = {.on_part = on_part, .on_notice = on_notice, .user = u, .stop = &c->stop};
    int rc = rad_chat_reply(c, &cb);

    rad_interrupt_arm(NULL, 0);         /* idle: the loop decides */
    int signals = rad_interrupt_count() - signals_before;
    u->busy = 0;
    u->reply = NULL;
    e->streaming = 0;
    if (rc == RAD_OK) {
        entry_from_message(e, rad_conv_message(c->conv, rad_conv_count(c->conv) - 1), NULL);
    } else {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rad_error_message()[0] ? rad_error_message() : rad_strerror(rc));
        if (u->tr.n > 0 && u->tr.v[u->tr.n - 1] == e) rad_tr_pop(&u->tr);
        if (rc == RAD_E_INTERRUPT) ui_notice(c, "interrupted before the reply began; /retry asks again");
        else {
            ui_error(c, msg);
            /* a message the model could not take (too long for the context)
            ** goes back into the input, to shorten and send again */
            if (c->refused_text) {
                rad_input_set(&u->in, c->refused_text);
                free(c->refused_text);
                c->refused_text = NULL;
            }
        }
    }
    u->handled_sigint = rad_interrupt_count();     /* those signals stopped this reply */
    u->quit_armed = 0;
    if (signals >= 2 || terminate_signal()) {
        u->quit = 1;
        u->exit_code = rad_interrupt_status();
    }
    u->dirty = 1;
    draw(u);
    return rc;
}

static void send_message(Tui *u, const char *text)
{
    RadChat *c = u->chat;
    if (rad_chat_check_text("the message", text)) { /* not shown as sent */
        ui_error(c, rad_error_message());
        return;
    }
    rad_tr_add(&u->tr, RAD_ENTRY_USER, text);
    u->tr.scroll = 0;
    if (rad_chat_user(c, text)) {
        ui_error(c, rad_error_message());
        return;
    }
    ui_reply(c);
}

static void submit(Tui *u)
{
    size_t n = u->in.len;
    while (n > 0 && (u->in.text[n - 1] == '\n' || u->in.text[n - 1] == ' ' || u->in.text[n - 1] == '\t')) n--;
    size_t start = 0;
    while (start < n && (u->in.text[start] == '\n' || u->in.text[start] == ' ')) start++;
    if (start >= n) return;
    char *text = strndup(u->in.text + start, n - start);
    if (!text) return;
    rad_history_add(text);
    rad_input_set(&u->in, "");
    u->in.history_pos = -1;
    free(u->in.draft);
    u->in.draft = NULL;
    u->dirty = 1;
    if (rad_chat_command(u->chat, text)) {
        if (u->chat->quit) {
            u->quit = 1;
            u->exit_code = u->chat->exit_code;
        }
    } else {
        send_message(u, text[0] == '/' && text[1] == '/' ? text + 1 : text);
    }
    free(text);
}

/* ------------------------------------------------------------ the loop */

static const RadChatUi tui_ops = {
    .full_screen = 1, .notice = ui_notice, .error = ui_error, .reply = ui_reply, .rebuild = ui_rebuild,
    .edit = ui_edit, .code_block = ui_code_block, .view = ui_view,
};

static void ensure_utf8_locale(void)
{
    setlocale(LC_ALL, "");
    const char *cs = nl_langinfo(CODESET);
    if (cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"))) return;
    /* the transcript is UTF-8 whatever the environment says */
    if (!setlocale(LC_CTYPE, "C.UTF-8")) setlocale(LC_CTYPE, "en_US.UTF-8");
}

static int screen_start(Tui *u)
{
    ensure_utf8_locale();
    terminal_saved_ok = tcgetattr(STDIN_FILENO, &terminal_saved) == 0;
    if (!initscr()) return -1;
    cbreak();       /* not raw(): Ctrl-C stays a signal, so it also works while the engine runs */
    noecho();
    nonl();         /* Enter is '\r', Ctrl-J '\n': two keys, send and new line */
    keypad(stdscr, TRUE);
    intrflush(stdscr, FALSE);
    set_escdelay(25);
    struct termios t;
    if (tcgetattr(STDIN_FILENO, &t) == 0) {
        t.c_iflag &= ~(tcflag_t)IXON;   /* Ctrl-S / Ctrl-Q are keys, not flow control */
        tcsetattr(STDIN_FILENO, TCSANOW, &t);
        def_prog_mode();
    }
    define_key("\033[200~", KEY_PASTE_BEGIN_CODE);
    define_key("\033[201~", KEY_PASTE_END_CODE);
    screen_on = 1;
    u->color = rad_use_color(u->chat->settings->color, STDOUT_FILENO) && has_colors();
    if (u->color) setup_colors();
    fputs("\033[?2004h", stdout);       /* bracketed paste */
    fflush(stdout);
    return 0;
}

static void screen_end(void)
{
    fputs("\033[?2004l", stdout);
    fflush(stdout);
    endwin();
    screen_on = 0;
}

int rad_tui_run(RadChat *c)
{
    Tui u;
    memset(&u, 0, sizeof u);
    u.chat = c;
    u.tr.view = 0;
    rad_input_init(&u.in);
    c->ui = &tui_ops;
    c->ui_data = &u;

    rad_interrupt_arm(NULL, 0);         /* the loop below decides what a signal means */
    rad_interrupt_on_exit(restore_terminal);

    if (screen_start(&u)) {
        fprintf(stderr, "radiance chat: cannot start the terminal UI (TERM=%s); try --plain\n",
                getenv("TERM") ? getenv("TERM") : "");
        return RAD_EXIT_FAILURE;
    }
    rad_history_open();
    rad_chat_open_db(c);
    ui_rebuild(c);      /* the system prompt */
    rad_chat_start(c);  /* a resumed session, then what became of its KV snapshot */
    int users = 0;
    for (int i = 0; i < rad_conv_count(c->conv); i++) users += !strcmp(rad_conv_message(c->conv, i)->role, "user");
    if (users == 0) {
        char welcome[256];
        snprintf(welcome, sizeof welcome, "radiance chat with %s. Enter sends, Alt-Enter or Ctrl-J adds a line, "
                 "/help lists commands, Ctrl-C stops a reply, Ctrl-D quits.", rad_chat_model_name(c));
        ui_notice(c, welcome);
    }
    draw(&u);
    c->ui_ms = rad_now_ms() - c->t_start_ms;
    u.handled_sigint = rad_interrupt_count();

    while (!u.quit) {
        if (rad_interrupt_count() != u.handled_sigint) {
            u.handled_sigint = rad_interrupt_count();
            if (terminate_signal() || u.quit_armed) {
                u.quit = 1;
                u.exit_code = rad_interrupt_status();
                break;
            }
            /* The first Ctrl-C while idle never leaves: it clears the input
            ** and says how to. */
            u.quit_armed = 1;
            int had_text = u.in.len > 0;
            rad_input_set(&u.in, "");
            hint(&u, had_text ? "input cleared; Ctrl-C again leaves (or Ctrl-D, /quit)"
                              : "Ctrl-C again leaves (or Ctrl-D, /quit)");
        }
        if (u.hint[0] && rad_now_ms() >= u.hint_until_ms) {
            u.hint[0] = 0;
            u.dirty = 1;
        }
        pump(&u, 200);
    }
    if (c->conv && rad_conv_count(c->conv) > 0 && c->db) {
        hint(&u, "saving the session\xe2\x80\xa6");
        draw(&u);
        rad_chat_save_snapshot(c, 0);
    }
    screen_end();
    rad_history_close();
    if (c->session_id[0]) fprintf(stderr, "session %s saved (radiance chat --resume %.8s)\n", c->session_id, c->session_id);
    rad_tr_free(&u.tr);
    rad_input_free(&u.in);
    c->ui = NULL;
    c->ui_data = NULL;
    return u.exit_code;
}
