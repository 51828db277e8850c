/*
** conversation.h: a conversation with an open model: the messages, the
** reply that extends them, and the engine sequence that holds them.
**
** Every front end (the TUI, line mode, pipe mode, resumed sessions) talks
** to a model through this one module, so the rules live in one place:
**
**   - The transcript is rendered with the model's chat format
**     (engine/text/rad_chat.h) and tokenized whole before each reply.  With
**     no chat format (NULL: raw completion) the transcript is the messages'
**     contents concatenated, as a document the reply continues.
**   - KV reuse: the conversation remembers the token ids its sequence
**     holds.  Before a reply it keeps the longest common prefix of those and
**     the newly rendered prompt (rad_engine_seq_truncate) and evaluates only
**     the rest.  When the engine cannot truncate there (RAD_E_RANGE: a
**     sliding-window layer already dropped what that position needs) the
**     sequence is freed and the prompt evaluated again from the start.
**   - The context policy: when the prompt plus the reply budget outgrows the
**     context, either (RAD_CONTEXT_DROP_OLDEST) the oldest non-system turns
**     are dropped from the transcript, a whole turn at a time, until it fits,
**     and the notice callback says how many; or (RAD_CONTEXT_REFUSE) the
**     reply fails with RAD_E_RANGE, the message saying why.  Nothing is ever
**     dropped silently.  When even the last user turn alone does not fit,
**     the reply fails with RAD_E_RANGE whatever the policy; when it fits but
**     leaves less room than the budget, the notice says so and the reply is
**     cut at the end of the context (RAD_FINISH_LENGTH).
**   - The reply streams through the callbacks one part at a time (content,
**     reasoning, tool call; markup never reaches them), and stops at a stop
**     token, at the budget, at the end of the context, or when *stop becomes
**     non-zero (polled before every token and between prefill chunks: the
**     partial reply is kept and marked interrupted).
**   - KV snapshots: the held token ids plus the engine's snapshot blob are
**     what a session stores; restoring both means the next reply evaluates
**     only the tokens that are new since.
**
** Memory: the conversation owns copies of every string given to it; the
** pointers it hands out stay valid until the message they belong to is
** removed or the conversation is freed.  Not thread-safe: one thread drives
** a conversation (the stop flag is the one thing another context -- a
** signal handler -- may write).
*/
#ifndef RAD_CONVERSATION_H
#define RAD_CONVERSATION_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "../../engine/include/radiance.h"
#include "../../engine/draft.h"
#include "../../engine/sample.h"
#include "../../engine/text/rad_chat.h"

typedef struct RadConv RadConv;

/* ------------------------------------------------------------ settings */

typedef enum RadContextPolicy {
    RAD_CONTEXT_DROP_OLDEST = 0,    /* drop the oldest non-system turns, with a notice (default) */
    RAD_CONTEXT_REFUSE = 1          /* fail the reply with RAD_E_RANGE and a message (exit 5) */
} RadContextPolicy;

typedef struct RadConvSettings {
    RadSamplerParams sampler;
    int n_predict;              /* most tokens per reply; -1 = until a stop token or the context is full */
    int reply_reserve;          /* with n_predict -1: the room the context policy keeps free for
                                ** a reply; 0 = min(512, context / 4) */
    int thinking;               /* 1 on, 0 off (the format's no_think), -1 the model's default */
    int ignore_eos;             /* keep generating past stop tokens (raw benchmarking) */
    RadContextPolicy context_policy;
    int seed_random;            /* draw a fresh seed for every reply (sampler.seed is then ignored) */
    int allow_special;          /* special-token strings in messages become control tokens */
} RadConvSettings;

/* The repetition guard of conversations: a repeat penalty of 1.1 over the
** last 64 tokens unless the user or the model says otherwise (greedy small
** models otherwise loop until the context is full; docs/SAMPLING.md). */
#define RAD_CONV_REPEAT_PENALTY 1.1f

/* Fill s with the defaults: rad_sampler_defaults with repeat_penalty
** RAD_CONV_REPEAT_PENALTY, a random seed per reply, n_predict -1,
** reply_reserve 0, thinking -1, ignore_eos 0, RAD_CONTEXT_DROP_OLDEST,
** special tokens in messages read as text. */
void rad_conv_settings_defaults(RadConvSettings *s);

/* Parse "drop-oldest" / "refuse" (config files and flags); -1 when neither. */
int rad_context_policy_parse(const char *text);
const char *rad_context_policy_name(RadContextPolicy p);

/* ------------------------------------------------------------ messages */

typedef enum RadFinish {
    RAD_FINISH_NONE = 0,        /* not a generated reply (given, loaded) */
    RAD_FINISH_STOP,            /* the model ended it (a stop token or string) */
    RAD_FINISH_LENGTH,          /* n_predict reached, or the context is full */
    RAD_FINISH_INTERRUPTED      /* *stop was set; the partial reply is kept */
} RadFinish;

const char *rad_finish_name(RadFinish f);   /* "stop", "length", "interrupted", "none" */

/* What one reply cost.  Times are wall-clock milliseconds from the start of
** rad_conv_reply. */
typedef struct RadConvStats {
    int prompt_tokens;          /* tokens of the rendered prompt the reply continues */
    int prompt_evaluated;       /* of those, evaluated this turn (the rest were reused from the KV) */
    int completion_tokens;      /* tokens sampled, the final stop token included */
    int dropped_messages;       /* messages the context policy dropped for this reply */
    int cut_by_context;         /* the reply stopped because the context was full */
    uint64_t seed;              /* the seed the reply was sampled with */
    double render_ms;           /* rendering and tokenizing the prompt */
    double prefill_ms;          /* evaluating the prompt_evaluated tokens */
    double ttft_ms;             /* start to the first token sampled */
    double decode_ms;           /* first token sampled to the end */
    double prefill_tps;         /* prompt_evaluated / prefill time; 0 when nothing was evaluated */
    double decode_tps;          /* tokens after the first / decode time; 0 with fewer than 2 */
    int draft_steps;            /* speculation: verify steps, tokens guessed, guesses accepted */
    int draft_proposed, draft_accepted;
} RadConvStats;

typedef struct RadConvMessage {
    char *role;                 /* "system", "user", "assistant", "tool" */
    char *content;              /* never NULL */
    char *reasoning;            /* an assistant turn's thinking, or NULL */
    char **tool_calls;          /* the text inside each tool-call block, as the model wrote it */
    int n_tool_calls;
    int32_t *tokens;            /* a generated reply's token ids (stop token included), or NULL */
    int n_tokens;
    RadFinish finish;           /* how a generated reply ended; RAD_FINISH_NONE otherwise */
    RadConvStats stats;         /* a generated reply's stats; zero otherwise */
} RadConvMessage;

/* A conversation on e (which must outlive it) in chat format f, normally
** rad_engine_chat_format(e).  A chooser (a plugin serving several model
** lines) is resolved against the model's vocabulary and template
** (rad_chat_format_resolve); rad_conv_format gives the result.  f NULL, or
** a chooser none of whose formats fits, means raw completion (the
** transcript is the contents concatenated, BOS added as the tokenizer
** says).  The engine must carry a tokenizer (RAD_E_NOTFOUND with a message
** otherwise).  Takes a sequence of its own. */
int  rad_conv_new(RadEngine *e, const RadChatFormat *f, RadConv **out);
void rad_conv_free(RadConv *c);

/* The most tokens a drafter may guess per step (--draft-max's bound). */
#define RAD_CONV_MAX_DRAFT 16

/* Speculative decoding for every later reply (docs/SPECULATION.md): the
** conversation takes the drafter over; up to k_max guesses a step, and the
** engine must have been opened with max_spec >= k_max.  The replies are the
** same tokens as without it. */
int  rad_conv_set_drafter(RadConv *c, RadDrafter d, int k_max);

const RadChatFormat *rad_conv_format(const RadConv *c);  /* the resolved format; NULL = raw */

/* The system prompt: set (replacing any) as message 0, or remove it with
** NULL or "". */
int rad_conv_set_system(RadConv *c, const char *text);

/* Append a message (a user turn, or a loaded session's turns).  reasoning
** may be NULL.  RAD_E_ARG for an unknown role. */
int rad_conv_add(RadConv *c, const char *role, const char *content, const char *reasoning);
/* Append a tool-call block's text to the last message (loading sessions). */
int rad_conv_add_tool_call(RadConv *c, const char *text);

int rad_conv_count(const RadConv *c);
const RadConvMessage *rad_conv_message(const RadConv *c, int i);    /* NULL when out of range */

/* Keep messages [0, n): /retry drops the last reply, /edit the last user
** turn and its reply.  The KV is kept; the next reply reuses the common
** prefix. */
void rad_conv_truncate(RadConv *c, int n);
/* Remove every message but the system prompt (keep_system) or all. */
void rad_conv_clear(RadConv *c, int keep_system);

/* ------------------------------------------------------------ replies */

typedef struct RadConvCallbacks {
    /* A piece of the reply, as soon as it is known to be that part (any
    ** split; UTF-8 characters are never cut).  A RAD_REPLY_TOOL_CALL piece
    ** is always one whole tool call.  May be NULL. */
    void (*on_part)(void *user, RadReplyPart part, const char *text, size_t n);
    /* A one-line notice for the user, e.g. that the context policy dropped
    ** turns ("context full: dropped the 2 oldest messages").  May be NULL. */
    void (*on_notice)(void *user, const char *message);
    void *user;
    /* Polled before every token and between prefill chunks; non-zero stops
    ** the reply.  May be NULL.  Not reset by the conversation. */
    const volatile sig_atomic_t *stop;
} RadConvCallbacks;

/* Render the transcript (with the generation prompt), apply the context
** policy, evaluate what the sequence does not already hold, and generate the
** next assistant message, streaming it through cb.  The reply is appended
** to the transcript whenever generation began, also when it was interrupted
** or cut at the budget (its finish says which); *stats (may be NULL) gets
** its numbers.  The last message must be a user or tool turn (RAD_E_ARG
** otherwise).  Errors: RAD_E_RANGE with a message when the prompt does not
** fit the context (or the policy refuses), RAD_E_INTERRUPT when *stop was
** set before the first token (during prefill: the sequence keeps what was
** evaluated), engine errors as they come; then no reply is appended and the
** transcript is as it was, less any messages the policy dropped. */
int rad_conv_reply(RadConv *c, const RadConvSettings *s, const RadConvCallbacks *cb, RadConvStats *stats);

/* The context: positions the sequence holds now, and its size. */
int rad_conv_context_used(const RadConv *c);
int rad_conv_context_size(const RadConv *c);

/* ------------------------------------------------------------ KV snapshots */

/* The token ids the sequence holds now (valid until the next call that
** changes the conversation's KV). */
const int32_t *rad_conv_held_tokens(const RadConv *c, int *n);

/* The engine's snapshot of the sequence (rad_engine_seq_snapshot: malloc'd,
** the caller frees); store it beside rad_conv_held_tokens. */
int rad_conv_snapshot(const RadConv *c, void **blob, size_t *size);

/* Load a snapshot and the n token ids it holds into the conversation's
** sequence, replacing what it held.  On any failure (RAD_E_FORMAT from
** another model, build, KV encoding or a corrupt blob; RAD_E_ARG when n does
** not match the blob's positions) the message is set, the sequence is left
** empty and the next reply evaluates the whole prompt: callers show the
** message as a notice and carry on. */
int rad_conv_restore(RadConv *c, const void *blob, size_t size, const int32_t *tokens, int n);

/* A fresh random seed (32 bits, so it reads and types back easily). */
uint64_t rad_conv_random_seed(void);

/* A growing NUL-terminated string: the reply's parts here, run's prompt. */
typedef struct RadConvBuf {
    char *data; /* NULL until the first append */
    size_t len, cap;
} RadConvBuf;

/* Append n bytes of s, keeping a NUL after them.  RAD_E_NOMEM, with no
** message set (the caller says what it was reading), when memory runs out. */
int rad_conv_buf_add(RadConvBuf *b, const char *s, size_t n);

#endif /* RAD_CONVERSATION_H */
