/*
** chat.h: what `radiance chat`'s two front ends (the full-screen TUI and the
** readline line mode) share: the open model and conversation, the session
** that saves it as it goes, the slash commands, and the interrupt flag.
**
**   chat_session.c   open the model, send a turn, run a reply and save it,
**                    resume a session from the database and its KV snapshot
**   chat_commands.c  /help /system /clear /retry /edit /think /set /model
**                    /save /sessions /load /copy /export /stats /quit ...
**   tui*.c           the full-screen front end
**   line_mode.c      the line front end (--plain, TERM=dumb, no terminal)
**
** A front end fills a RadChatUi with what only it knows how to do (show a
** notice, show a reply streaming, redraw after the conversation changed
** wholesale); the rest is here, so both behave the same.
*/
#ifndef RAD_CHAT_H
#define RAD_CHAT_H

#include <signal.h>
#include <stdint.h>

#include "../cli.h"
#include "../config.h"
#include "conversation.h"
#include "model_sampling.h"
#include "../sessions/session_db.h"

typedef struct RadChat RadChat;

/* What the chat knows about conversation message i beyond rad_conv's copy:
** its database row, and for a reply loaded from a session how it ended and
** what it cost (the conversation keeps those only for replies it made). */
typedef struct RadChatRow {
    int64_t id;                 /* 0: not stored */
    RadFinish finish;
    RadConvStats stats;
} RadChatRow;

typedef struct RadChatUi {
    int full_screen;            /* the TUI (its /help lists keys) */
    /* A line (or lines) from the app: an answer to a command, a notice from
    ** the conversation runner, a warning. */
    void (*notice)(RadChat *c, const char *text);
    void (*error)(RadChat *c, const char *text);
    /* Run the next reply (rad_chat_reply) while showing it stream. */
    int (*reply)(RadChat *c);
    /* The conversation changed wholesale (/retry, /edit, /load, /clear,
    ** /model, a resume): show it again from rad_conv's messages. */
    void (*rebuild)(RadChat *c);
    /* Put text into the input for editing (/edit). */
    void (*edit)(RadChat *c, const char *text);
    /* Code block k (1-based, as the front end numbered them), malloc'd, or
    ** NULL. */
    char *(*code_block)(RadChat *c, int k, char **lang);
    /* Switch a view: "raw" (markdown source) or "fold" (reasoning folded);
    ** returns the new state (1 on), or -1 when the front end has no such view. */
    int (*view)(RadChat *c, const char *which);
} RadChatUi;

struct RadChat {
    RadSettings *settings;      /* flags over config over defaults; /set edits it */
    const RadChatUi *ui;
    void *ui_data;

    char *model_spec;           /* as the user named it */
    char *model_path;           /* the resolved .rad / .gguf */
    RadEngine *engine;
    RadEngine *draft_engine;            /* --draft MODEL's, or NULL */
    RadConv *conv;
    RadModelSampling recommended;   /* the model's own sampling advice (model_sampling.h) */
    RadChatRow *rows;           /* one per conversation message */
    int rows_cap;

    RadSessionDb *db;           /* NULL when the database cannot be opened: the chat goes on unsaved */
    char session_id[RAD_SESSION_ID_LEN + 1];    /* "" until the first message is saved */
    char resume_id[RAD_SESSION_ID_LEN + 1];     /* --continue / --resume: the session to load at start */
    int64_t reply_row;          /* the row of the reply being saved while it streams, 0 none */
    int64_t reply_parent;       /* the row it hangs under */
    double reply_saved_ms;      /* when it was last written */

    volatile sig_atomic_t stop; /* set by SIGINT: the reply stops, keeping what it wrote */
    RadConvStats last;          /* the last reply's numbers */
    int have_last;
    RadFinish last_finish;
    int64_t total_prompt, total_evaluated, total_completion;
    int restored_tokens;        /* positions the last resume took from a KV snapshot */
    int just_loaded;            /* a session was loaded since the last rebuild (front ends may show it) */

    double t_start_ms;          /* when the command began */
    double open_ms;             /* resolving and opening the model */
    double ui_ms;               /* start to the first full screen (or prompt) */

    char *refused_text;         /* a message the model could not take, taken back (malloc'd; the
                                ** front end puts it back into the input) */
    int quit;                   /* a command asked to leave */
    int exit_code;
};


/* Open the model and a conversation (settings, model_spec set).  Messages
** go to stderr.  Returns RAD_OK or an engine code with the message set. */
int rad_chat_open_model(RadChat *c);
/* Open the session database; a failure is shown once and the chat goes on
** without saving. */
void rad_chat_open_db(RadChat *c);
void rad_chat_close(RadChat *c);

/* Row i (always valid for i < rad_conv_count). */
const RadChatRow *rad_chat_row(RadChat *c, int i);
/* A display name for the model: a path's file name, else the spec. */
const char *rad_chat_model_name(const RadChat *c);
/* Keep rows in step when message 0 (a system prompt) came or went. */
void rad_chat_rows_system_changed(RadChat *c, int before, int after);

/* Once the front end can show notices: load the session named by
** resume_id, if any, show it (ui->rebuild) and what happened (errors are
** shown; the chat goes on afresh). */
void rad_chat_start(RadChat *c);
/* Load session id (NULL: the latest) into the conversation and restore its
** KV snapshot when one of this model is stored; note (cap bytes) gets what
** happened, for the caller to show once it has redrawn.  RAD_E_NOTFOUND
** when there is no such session. */
int rad_chat_resume(RadChat *c, const char *id, char *note, size_t cap);
/* Start afresh: a new (not yet stored) session, the system prompt kept. */
void rad_chat_new_session(RadChat *c);

/* Append the user's turn to the conversation and the session.  Text that is
** not valid UTF-8 is refused (rad_chat_check_text), not sent or stored. */
int rad_chat_user(RadChat *c, const char *text);

/* RAD_OK when `text` is valid UTF-8, else RAD_E_ARG with a one-line
** message naming `what` ("the message", "the system prompt"), the first bad
** byte and its offset.  What the user types or pipes in is checked here,
** before the template, the session store and an export see it: the model's
** tokenizer would read a stray byte as U+FFFD, but the session would keep
** the raw bytes, and sessions export --json used to drop such a message's
** content without a word. */
int rad_chat_check_text(const char *what, const char *text);
/* The reply to the conversation as it stands, streaming through cb (whose
** stop the caller points at c->stop), saved as it goes.  Returns what
** rad_conv_reply does; RAD_E_INTERRUPT when stopped before it began.  When
** the model cannot take the last message (too long for the context, or a
** turn the template refuses), that message is taken back from the
** conversation and the session, its text left in c->refused_text, and the
** earlier turns stay as they were. */
int rad_chat_reply(RadChat *c, RadConvCallbacks *cb);
/* Call from the front end's on_part: saves a long reply every few seconds,
** so a crash mid-reply loses little. */
void rad_chat_reply_progress(RadChat *c, const RadConvMessage *partial);
/* Store the conversation's KV snapshot (on exit, /save).  Quiet unless
** verbose or it fails. */
int rad_chat_save_snapshot(RadChat *c, int verbose);

/* One line of a reply's numbers for under it ("42 tokens, 31.0 tok/s, ..."). */
void rad_chat_reply_summary(const RadConvStats *s, RadFinish finish, char *buf, size_t cap);
/* Context meter: used and size, and 0 (fine), 1 (getting full), 2 (about to drop turns). */
int rad_chat_context_level(const RadChat *c, int *used, int *size);

/* Run a slash command line ("/set temp 0.2"); returns 1 when line was a
** command (handled, well or not), 0 when it is a message to send. */
int rad_chat_command(RadChat *c, const char *line);
/* The help text (commands and, for the TUI, keys). */
const char *rad_chat_help(int tui);
/* Names for completion in line mode, NULL-terminated. */
extern const char *const rad_chat_command_names[];

/* The two front ends: each returns the exit status. */
int rad_tui_run(RadChat *c);
int rad_line_mode_run(RadChat *c);

/* Write OSC 52 (set the clipboard) for text to the terminal on fd. */
int rad_osc52_copy(int fd, const char *text);

#endif /* RAD_CHAT_H */
