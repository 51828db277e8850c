/*
** line_mode.c: `radiance chat --plain`: the chat as lines of text, for
** screen readers, dumb terminals, pipes and scripts.  Chosen by --plain
** (config `plain = true`), by TERM=dumb, or when stdin or stdout is not a
** terminal.  Same commands as the TUI (chat_commands.c).
**
** On a terminal the input is readline (its keys, its history search, the
** history file shared with the TUI, Tab completing /commands), driven
** through readline's callback interface so that Ctrl-C is ours
** (interrupt.h): it stops a running reply (the partial text stays, marked
** [interrupted]); with nothing running the first clears the line and says
** how to leave, and a second in a row leaves with 130.  Without a terminal
** the input is read line by line with no prompt and no echo; replies go to
** stdout as plain text, reasoning and numbers are left out, and nothing
** else is written there (notices go to stderr).
**
** Multi-line messages: a line ending in a backslash continues on the next;
** a line of just """ opens a block that the next such line closes.
*/
#include "../app.h"
#include "../cli.h"
#include "../interrupt.h"
#include "chat.h"
#include "../tui/tui.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

typedef struct Line {
    RadChat *chat;
    int tty_in, tty_out;        /* a person is there */
    int color;                  /* ANSI styling on stdout */
    int show_reasoning;
    RadBuf pending;             /* a message being continued over several lines */
    int in_block;               /* inside a """ block */
    int last_part;              /* of the reply being printed */
    RadBuf content, reasoning;  /* the reply so far (saved every few seconds) */
    int at_line_start;
    int quit, exit_code;
} Line;

static Line *the_line;          /* readline's callback has no user pointer */

/* A terminating signal (not Ctrl-C): leave with its status. */
static int terminate_signal(void)
{
    int sig = rad_interrupt_last();
    return sig && sig != SIGINT;
}

#define DIM(l) ((l)->color ? "\033[2m" : "")
#define RESET(l) ((l)->color ? "\033[0m" : "")

/* ------------------------------------------------------------ front end */

static Line *line_of(RadChat *c)
{
    return c->ui_data;
}

/* Notices and errors quote session titles, file names and model text:
** control characters in them are shown as escapes (cli.h). */
static void ui_notice(RadChat *c, const char *text)
{
    Line *l = line_of(c);
    FILE *f = l->tty_out ? stdout : stderr;
    fprintf(f, "%s%s%s\n", DIM(l), rad_safe_multiline(text), RESET(l));
    fflush(f);
}

static void ui_error(RadChat *c, const char *text)
{
    Line *l = line_of(c);
    fprintf(stderr, "%sradiance: %s%s\n", l->color ? "\033[1;31m" : "", rad_safe_multiline(text), RESET(l));
}

/* Model text (a reply, stored messages): never a raw control character,
** on a terminal or in a pipe (cli.h). */
static void put(Line *l, const char *s, size_t n)
{
    if (n == 0) return;
    rad_safe_fwrite(stdout, s, n, RAD_SAFE_TEXT);
    l->at_line_start = s[n - 1] == '\n';
    fflush(stdout);
}

static void on_part(void *user, RadReplyPart part, const char *text, size_t n)
{
    Line *l = user;
    if (part == RAD_REPLY_CONTENT) rad_buf_add(&l->content, text, n);
    if (part == RAD_REPLY_REASONING) rad_buf_add(&l->reasoning, text, n);
    RadConvMessage partial = {0};
    partial.role = "assistant";
    partial.content = l->content.s ? l->content.s : "";
    partial.reasoning = l->reasoning.len ? l->reasoning.s : NULL;
    rad_chat_reply_progress(l->chat, &partial);
    if (part == RAD_REPLY_REASONING && !l->show_reasoning) return;
    if ((int)part != l->last_part) {
        if (l->last_part == RAD_REPLY_REASONING && l->color) fputs("\033[0m", stdout);
        if (l->last_part >= 0 && !l->at_line_start) put(l, "\n", 1);
        if (part == RAD_REPLY_REASONING && l->color) fputs("\033[2;3m", stdout);
        if (part == RAD_REPLY_TOOL_CALL) put(l, "[tool call] ", 12);
        l->last_part = (int)part;
    }
    put(l, text, n);
}

static void on_notice(void *user, const char *message)
{
    Line *l = user;
    ui_notice(l->chat, message);
}

static void ui_edit(RadChat *c, const char *text);

static int ui_reply(RadChat *c)
{
    Line *l = line_of(c);
    l->last_part = -1;
    l->at_line_start = 1;
    l->content.len = 0;
    l->reasoning.len = 0;
    c->stop = 0;
    int signals_before = rad_interrupt_count();
    rad_interrupt_arm(&c->stop, 3);     /* stop; a second: leave when stopped; a third: leave now */
    RadConvCallbacks cb = {.on_part = on_part, .on_notice = on_notice, .user = l, .stop = &c->stop};
    int rc = rad_chat_reply(c, &cb);
    if (l->tty_in) rad_interrupt_arm(NULL, 0);
    else rad_interrupt_disarm();
    int signals = rad_interrupt_count() - signals_before;
    if (l->color && l->last_part == RAD_REPLY_REASONING) fputs("\033[0m", stdout);
    if (!l->at_line_start) put(l, "\n", 1);
    if (rc == RAD_OK) {
        const RadConvMessage *m = rad_conv_message(c->conv, rad_conv_count(c->conv) - 1);
        if (m->finish == RAD_FINISH_INTERRUPTED) {
            if (l->tty_out) printf("%s[interrupted]%s\n", l->color ? "\033[1;33m" : "", RESET(l));
            else fprintf(stderr, "radiance: [interrupted]\n");
        }
        if (l->tty_out) {
            char sum[256];
            rad_chat_reply_summary(&m->stats, m->finish, sum, sizeof sum);
            printf("%s%s%s\n\n", DIM(l), sum, RESET(l));
        }
    } else if (rc == RAD_E_INTERRUPT) {
        ui_notice(c, "interrupted before the reply began; /retry asks again");
    } else {
        ui_error(c, rad_error_message()[0] ? rad_error_message() : rad_strerror(rc));
        if (c->refused_text) {
            /* the message was taken back: on a terminal it returns to the input */
            if (l->tty_in) {
                ui_notice(c, "your message was not sent; it is back in the input to shorten");
                ui_edit(c, c->refused_text);
            } else {
                ui_notice(c, "that message was not sent; the conversation is as it was before it");
            }
            free(c->refused_text);
            c->refused_text = NULL;
        }
    }
    fflush(stdout);
    if (signals >= 2 || terminate_signal()) {
        l->quit = 1;
        l->exit_code = rad_interrupt_status();
    }
    return rc;
}

static void print_tail(Line *l, int n_last);

static void ui_rebuild(RadChat *c)
{
    /* Lines already printed stay printed and notices say what changed; a
    ** resumed or loaded session shows its last exchange. */
    if (c->just_loaded) print_tail(line_of(c), 2);
    c->just_loaded = 0;
}

/* The last n messages of a resumed conversation, to show where it stands. */
static void print_tail(Line *l, int n_last)
{
    RadChat *c = l->chat;
    if (!l->tty_out) return;
    int n = rad_conv_count(c->conv);
    for (int i = n - n_last < 0 ? 0 : n - n_last; i < n; i++) {
        const RadConvMessage *m = rad_conv_message(c->conv, i);
        const char *text = rad_safe_multiline(m->content);
        if (!strcmp(m->role, "user")) printf("%s\xe2\x80\xba %s%s\n", l->color ? "\033[1;32m" : "", text, RESET(l));
        else if (!strcmp(m->role, "system")) printf("%ssystem: %s%s\n", DIM(l), text, RESET(l));
        else printf("%s\n%s", text, rad_chat_row(c, i)->finish == RAD_FINISH_INTERRUPTED ? "[interrupted]\n" : "");
        if (!strcmp(m->role, "assistant")) putchar('\n');
    }
    fflush(stdout);
}

static char *edit_text;         /* what the next prompt starts with (/edit) */

static int insert_edit_text(void)
{
    if (edit_text) {
        rl_insert_text(edit_text);
        free(edit_text);
        edit_text = NULL;
    }
    return 0;
}

static void ui_edit(RadChat *c, const char *text)
{
    Line *l = line_of(c);
    if (!l->tty_in) {
        ui_notice(c, "your last message was taken back; send the new one");
        return;
    }
    /* readline starts every line afresh, so the text goes in from its
    ** startup hook, when the next prompt is set up */
    free(edit_text);
    edit_text = strdup(text);
    for (char *p = edit_text; p && *p; p++)
        if (*p == '\n') *p = ' ';
}

static char *ui_code_block(RadChat *c, int k, char **lang)
{
    /* numbered over the conversation's replies */
    for (int i = 0; i < rad_conv_count(c->conv) && k >= 1; i++) {
        const RadConvMessage *m = rad_conv_message(c->conv, i);
        if (strcmp(m->role, "assistant")) continue;
        char *code = NULL;
        int j = 0;
        while (rad_md_code_block(m->content, strlen(m->content), j, &code, j + 1 == k ? lang : NULL) == 0) {
            if (++j == k) return code;
            free(code);
        }
        k -= j;
    }
    return NULL;
}

static int ui_view(RadChat *c, const char *which)
{
    Line *l = line_of(c);
    if (strcmp(which, "fold")) return -1;
    l->show_reasoning = !l->show_reasoning;
    return !l->show_reasoning;
}

static const RadChatUi line_ops = {
    .full_screen = 0, .notice = ui_notice, .error = ui_error, .reply = ui_reply, .rebuild = ui_rebuild,
    .edit = ui_edit, .code_block = ui_code_block, .view = ui_view,
};

/* ------------------------------------------------------------ input */

/* One line of input: join continued lines, then run it. */
static void take_line(Line *l, const char *text)
{
    size_t n = strlen(text);
    if (l->in_block) {
        if (!strcmp(text, "\"\"\"")) {
            l->in_block = 0;
        } else {
            rad_buf_add(&l->pending, text, n);
            rad_buf_add(&l->pending, "\n", 1);
            return;
        }
    } else if (!strcmp(text, "\"\"\"") && l->pending.len == 0) {
        l->in_block = 1;
        return;
    } else if (n > 0 && text[n - 1] == '\\') {
        rad_buf_add(&l->pending, text, n - 1);
        rad_buf_add(&l->pending, "\n", 1);
        return;
    } else {
        rad_buf_add(&l->pending, text, n);
    }
    char *msg = strdup(l->pending.s ? l->pending.s : "");
    l->pending.len = 0;
    if (l->pending.s) l->pending.s[0] = 0;
    if (!msg) return;
    size_t m = strlen(msg);
    while (m > 0 && (msg[m - 1] == '\n' || msg[m - 1] == ' ')) msg[--m] = 0;
    if (m > 0) {
        if (l->tty_in) rad_history_add(msg);
        RadChat *c = l->chat;
        if (rad_chat_command(c, msg)) {
            if (c->quit) {
                l->quit = 1;
                l->exit_code = c->exit_code;
            }
        } else if (rad_chat_user(c, msg[0] == '/' && msg[1] == '/' ? msg + 1 : msg)) {
            ui_error(c, rad_error_message());
        } else {
            ui_reply(c);
        }
    }
    free(msg);
}

static const char *prompt_for(const Line *l)
{
    if (l->in_block) return "\"\"\" ";
    if (l->pending.len) return "\xe2\x80\xa6 ";
    return "\xe2\x80\xba ";
}

static void on_readline(char *text)
{
    Line *l = the_line;
    if (!text) {
        l->quit = 1;
        l->exit_code = RAD_EXIT_OK;
        if (l->tty_out) putchar('\n');
        return;
    }
    take_line(l, text);
    free(text);
    if (!l->quit) rl_set_prompt(prompt_for(l));
}

static char *complete_command(const char *text, int state)
{
    static int i;
    static size_t len;
    if (!state) {
        i = 0;
        len = strlen(text);
    }
    for (const char *name; (name = rad_chat_command_names[i]); ) {
        i++;
        if (!strncmp(name, text, len)) return strdup(name);
    }
    return NULL;
}

static char **complete(const char *text, int start, int end)
{
    (void)end;
    rl_attempted_completion_over = 1;
    if (start == 0 && text[0] == '/') return rl_completion_matches(text, complete_command);
    return NULL;
}

static void run_readline(Line *l)
{
    rl_catch_signals = 0;
    if (!l->tty_out) rl_outstream = stderr;    /* the prompt and echo stay out of redirected replies */
    rl_readline_name = "radiance";
    rl_attempted_completion_function = complete;
    rl_startup_hook = insert_edit_text;
    rl_callback_handler_install(prompt_for(l), on_readline);
    int handled = rad_interrupt_count(), quit_armed = 0;
    while (!l->quit) {
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(STDIN_FILENO, &fds);
        int r = select(STDIN_FILENO + 1, &fds, NULL, NULL, NULL);
        if (rad_interrupt_count() != handled) {
            handled = rad_interrupt_count();
            if (terminate_signal() || quit_armed) {
                fputs("^C\n", stdout);
                l->quit = 1;
                l->exit_code = rad_interrupt_status();
                continue;
            }
            /* The first Ctrl-C never leaves: it drops a half-typed message
            ** and says how to; a second in a row does. */
            quit_armed = 1;
            rl_replace_line("", 0);
            l->pending.len = 0;
            l->in_block = 0;
            fprintf(stdout, "^C %s(Ctrl-C again, Ctrl-D or /quit leaves)%s\n", DIM(l), RESET(l));
            rl_set_prompt(prompt_for(l));
            rl_on_new_line();
            rl_redisplay();
            continue;
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        rl_callback_read_char();
        quit_armed = 0;
        handled = rad_interrupt_count();     /* signals that stopped a reply are spent */
    }
    rl_callback_handler_remove();
}

static void run_plain(Line *l)
{
    char *text = NULL;
    size_t cap = 0;
    while (!l->quit) {
        errno = 0;
        ssize_t n = getline(&text, &cap, stdin);
        if (n < 0) {
            if (errno == EINTR && rad_interrupt_count()) {
                l->exit_code = rad_interrupt_status();
            } else if (l->pending.len || l->in_block) {
                /* the input ended inside a continued message: send what there is */
                l->in_block = 0;
                take_line(l, "");
            }
            break;
        }
        while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r')) text[--n] = 0;
        take_line(l, text);
    }
    free(text);
}

int rad_line_mode_run(RadChat *c)
{
    Line l;
    memset(&l, 0, sizeof l);
    l.chat = c;
    l.tty_in = isatty(STDIN_FILENO);
    l.tty_out = isatty(STDOUT_FILENO);
    l.color = rad_use_color(c->settings->color, STDOUT_FILENO);
    l.show_reasoning = l.tty_out;
    l.exit_code = RAD_EXIT_OK;
    the_line = &l;
    c->ui = &line_ops;
    c->ui_data = &l;

    /* A terminal: the loop decides what an idle Ctrl-C means.  No terminal:
    ** nobody is typing, so an idle signal leaves at once (but never during
    ** a reply, which keeps what it wrote). */
    if (l.tty_in) rad_interrupt_arm(NULL, 0);
    else rad_interrupt_disarm();

    rad_chat_open_db(c);
    if (l.tty_in) rad_history_open();
    rad_chat_start(c);
    c->ui_ms = rad_now_ms() - c->t_start_ms;
    if (l.tty_in && l.tty_out)
        printf("%sradiance chat with %s. /help lists commands; Ctrl-D or /quit leaves.%s\n", DIM(&l), rad_chat_model_name(c),
               RESET(&l));
    if (l.tty_in) run_readline(&l);
    else run_plain(&l);

    if (c->conv && rad_conv_count(c->conv) > 0 && c->db) rad_chat_save_snapshot(c, 0);
    if (l.tty_in) rad_history_close();
    if (c->session_id[0] && l.tty_out)
        fprintf(stderr, "session %s saved (radiance chat --resume %.8s)\n", c->session_id, c->session_id);
    rad_buf_free(&l.pending);
    rad_buf_free(&l.content);
    rad_buf_free(&l.reasoning);
    c->ui = NULL;
    c->ui_data = NULL;
    the_line = NULL;
    return l.exit_code;
}
