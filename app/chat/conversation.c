/*
** conversation.c: a transcript bound to a model sequence, and the loop that
** generates the next reply (contract and policies in conversation.h).
**
** The file has four stages: messages (owned copies, truncation), rendering
** (chat format or raw concatenation, then the tokenizer), the context policy
** and KV reuse (what to drop, what the sequence can keep), and the reply
** loop (sample, decode, parse, stream, evaluate).  Snapshots sit at the end.
*/
#include "conversation.h"
#include "../../engine/speculate.h"

#include "../cli.h"
#include "../../engine/text/rad_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MAX_STOP_IDS 32
/* Prefill is evaluated in chunks of this many tokens so that the stop flag
** is seen within a chunk's time even for a long prompt. */
#define PREFILL_CHUNK 512

struct RadConv {
    RadEngine *engine;
    const RadChatFormat *format;    /* NULL: raw completion */
    const RadText *text;
    int seq;                        /* the engine sequence; -1 when none is held */
    int vocab, ctx;

    RadConvMessage *messages;
    int n_messages, cap_messages;

    int32_t *held;                  /* token ids the sequence holds, in order */
    int n_held, cap_held;

    float *logits;                  /* one row */
    RadSampler *sampler;
    RadSamplerParams sampler_params; /* what sampler was made with */
    int stop_ids[MAX_STOP_IDS];
    int n_stop_ids;
    RadSpec *spec;                  /* speculative decoding, or NULL (rad_conv_set_drafter) */
};

static char *copy_string(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s);
    char *out = malloc(n + 1);
    if (out) memcpy(out, s, n + 1);
    return out;
}

/* ------------------------------------------------------------ settings */

void rad_conv_settings_defaults(RadConvSettings *s)
{
    memset(s, 0, sizeof *s);
    rad_sampler_defaults(&s->sampler);
    s->sampler.repeat_penalty = RAD_CONV_REPEAT_PENALTY;
    s->seed_random = 1;
    s->n_predict = -1;
    s->reply_reserve = 0;
    s->thinking = -1;
    s->ignore_eos = 0;
    s->context_policy = RAD_CONTEXT_DROP_OLDEST;
}

int rad_context_policy_parse(const char *text)
{
    if (!strcmp(text, "drop-oldest")) return RAD_CONTEXT_DROP_OLDEST;
    if (!strcmp(text, "refuse")) return RAD_CONTEXT_REFUSE;
    return -1;
}

const char *rad_context_policy_name(RadContextPolicy p)
{
    return p == RAD_CONTEXT_REFUSE ? "refuse" : "drop-oldest";
}

const char *rad_finish_name(RadFinish f)
{
    switch (f) {
    case RAD_FINISH_STOP: return "stop";
    case RAD_FINISH_LENGTH: return "length";
    case RAD_FINISH_INTERRUPTED: return "interrupted";
    case RAD_FINISH_NONE: break;
    }
    return "none";
}

/* ------------------------------------------------------------ messages */

static void message_free(RadConvMessage *m)
{
    free(m->role);
    free(m->content);
    free(m->reasoning);
    for (int i = 0; i < m->n_tool_calls; i++) free(m->tool_calls[i]);
    free(m->tool_calls);
    free(m->tokens);
    memset(m, 0, sizeof *m);
}

static int valid_role(const char *role)
{
    return role && (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant") ||
                    !strcmp(role, "tool"));
}

/* Insert a message at index `at` (owned strings already made); RAD_E_NOMEM. */
static int insert_message(RadConv *c, int at, const RadConvMessage *m)
{
    if (c->n_messages == c->cap_messages) {
        int cap = c->cap_messages ? c->cap_messages * 2 : 16;
        RadConvMessage *grown = realloc(c->messages, (size_t)cap * sizeof *grown);
        if (!grown) return rad_error_set(RAD_E_NOMEM, "out of memory");
        c->messages = grown;
        c->cap_messages = cap;
    }
    memmove(c->messages + at + 1, c->messages + at, (size_t)(c->n_messages - at) * sizeof *c->messages);
    c->messages[at] = *m;
    c->n_messages++;
    return RAD_OK;
}

static void remove_messages(RadConv *c, int from, int count)
{
    for (int i = from; i < from + count; i++) message_free(&c->messages[i]);
    memmove(c->messages + from, c->messages + from + count,
            (size_t)(c->n_messages - from - count) * sizeof *c->messages);
    c->n_messages -= count;
}

int rad_conv_new(RadEngine *e, const RadChatFormat *f, RadConv **out)
{
    *out = NULL;
    const RadText *text = rad_engine_text(e);
    if (!text) return rad_error_set(RAD_E_NOTFOUND, "the model has no tokenizer, so it cannot hold a conversation");
    RadConv *c = calloc(1, sizeof *c);
    if (!c) return rad_error_set(RAD_E_NOMEM, "out of memory");
    c->engine = e;
    /* A plugin serving several model lines gives a chooser: pick the format
    ** this model's vocabulary and template agree with (NULL: none, raw). */
    c->format = f = rad_chat_format_resolve(f, text);
    c->text = text;
    c->vocab = rad_engine_n_vocab(e);
    c->ctx = rad_engine_max_ctx(e);
    c->seq = -1;
    c->logits = malloc((size_t)c->vocab * sizeof *c->logits);
    if (!c->logits) {
        free(c);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    int rc = rad_engine_seq_new(e, &c->seq);
    if (rc) {
        rad_conv_free(c);
        return rc;
    }
    /* Stop ids: the format's single-token stop strings and EOS, plus the
    ** ids config.json names as end-of-sequence (instruct models often list
    ** the end-of-turn token there too). */
    if (f) c->n_stop_ids = rad_chat_stop_ids(f, text, c->stop_ids, MAX_STOP_IDS);
    const RadModelMeta *m = rad_engine_meta(e);
    int candidates[MAX_STOP_IDS], n_candidates = 0;
    candidates[n_candidates++] = rad_text_data(text)->eos_id;
    candidates[n_candidates++] = (int)rad_meta_geti(m, "eos_token_id", -1);
    int64_t n_list = rad_meta_geti(m, "eos_token_id.length", 0);
    for (int64_t i = 0; i < n_list && n_candidates < MAX_STOP_IDS; i++) {
        char key[48];
        snprintf(key, sizeof key, "eos_token_id.%lld", (long long)i);
        candidates[n_candidates++] = (int)rad_meta_geti(m, key, -1);
    }
    for (int i = 0; i < n_candidates; i++) {
        int id = candidates[i], seen = id < 0 || id >= c->vocab;
        for (int j = 0; j < c->n_stop_ids && !seen; j++) seen = c->stop_ids[j] == id;
        if (!seen && c->n_stop_ids < MAX_STOP_IDS) c->stop_ids[c->n_stop_ids++] = id;
    }
    *out = c;
    return RAD_OK;
}

void rad_conv_free(RadConv *c)
{
    if (!c) return;
    for (int i = 0; i < c->n_messages; i++) message_free(&c->messages[i]);
    free(c->messages);
    free(c->held);
    free(c->logits);
    rad_sampler_free(c->sampler);
    if (c->spec) rad_spec_free(c->spec);
    free(c->spec);
    if (c->seq >= 0) rad_engine_seq_free(c->engine, c->seq);
    free(c);
}

int rad_conv_set_drafter(RadConv *c, RadDrafter d, int k_max)
{
    if (c->spec) {
        rad_spec_free(c->spec);
        free(c->spec);
        c->spec = NULL;
    }
    RadSpec *spec = calloc(1, sizeof *spec);
    if (!spec) {
        if (d.free) d.free(d.self);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    int rc = rad_spec_init(spec, d, c->engine, k_max);
    if (rc) { free(spec); return rc; }
    c->spec = spec;
    return RAD_OK;
}

/* The sampler as speculation calls it: the reply's tokens so far (the
** repeat penalty's history) and the guesses accepted in this step. */
typedef struct SpecPick {
    RadConv *c;
    const int32_t *reply;
    int n_reply;
    int32_t *scratch;
} SpecPick;

static int spec_pick(void *ctx, const float *logits, const int32_t *guessed, int n_guessed, int64_t position)
{
    SpecPick *p = ctx;
    memcpy(p->scratch + p->n_reply, guessed, (size_t)n_guessed * sizeof *guessed);
    return rad_sampler_pick(p->c->sampler, logits, p->scratch, p->n_reply + n_guessed, position);
}

const RadChatFormat *rad_conv_format(const RadConv *c) { return c->format; }
int rad_conv_set_system(RadConv *c, const char *text)
{
    int has = c->n_messages > 0 && !strcmp(c->messages[0].role, "system");
    if (!text || !text[0]) {
        if (has) remove_messages(c, 0, 1);
        return RAD_OK;
    }
    char *copy = copy_string(text);
    if (!copy) return rad_error_set(RAD_E_NOMEM, "out of memory");
    if (has) {
        free(c->messages[0].content);
        c->messages[0].content = copy;
        return RAD_OK;
    }
    RadConvMessage m = {0};
    m.role = copy_string("system");
    m.content = copy;
    if (!m.role || insert_message(c, 0, &m)) {
        message_free(&m);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    return RAD_OK;
}

int rad_conv_add(RadConv *c, const char *role, const char *content, const char *reasoning)
{
    if (!valid_role(role))
        return rad_error_set(RAD_E_ARG, "'%s' is not a message role (system, user, assistant, tool)",
                             role ? role : "(null)");
    RadConvMessage m = {0};
    m.role = copy_string(role);
    m.content = copy_string(content ? content : "");
    m.reasoning = reasoning ? copy_string(reasoning) : NULL;
    if (!m.role || !m.content || (reasoning && !m.reasoning) || insert_message(c, c->n_messages, &m)) {
        message_free(&m);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    return RAD_OK;
}

static int push_tool_call(RadConvMessage *m, const char *text, size_t n)
{
    char **grown = realloc(m->tool_calls, (size_t)(m->n_tool_calls + 1) * sizeof *grown);
    if (!grown) return rad_error_set(RAD_E_NOMEM, "out of memory");
    m->tool_calls = grown;
    char *copy = malloc(n + 1);
    if (!copy) return rad_error_set(RAD_E_NOMEM, "out of memory");
    memcpy(copy, text, n);
    copy[n] = 0;
    m->tool_calls[m->n_tool_calls++] = copy;
    return RAD_OK;
}

int rad_conv_add_tool_call(RadConv *c, const char *text)
{
    if (c->n_messages == 0) return rad_error_set(RAD_E_STATE, "a tool call needs a message to belong to");
    return push_tool_call(&c->messages[c->n_messages - 1], text, strlen(text));
}

int rad_conv_count(const RadConv *c) { return c->n_messages; }

const RadConvMessage *rad_conv_message(const RadConv *c, int i)
{
    return i >= 0 && i < c->n_messages ? &c->messages[i] : NULL;
}

void rad_conv_truncate(RadConv *c, int n)
{
    if (n < 0) n = 0;
    if (n < c->n_messages) remove_messages(c, n, c->n_messages - n);
}

static int reset_sequence(RadConv *c);

void rad_conv_clear(RadConv *c, int keep_system)
{
    int keep = keep_system && c->n_messages > 0 && !strcmp(c->messages[0].role, "system");
    rad_conv_truncate(c, keep);
    /* A new conversation holds nothing: the context meter starts at 0 and
    ** the next reply evaluates its prompt afresh. */
    reset_sequence(c);
}

/* ------------------------------------------------------------ rendering */

/* The transcript as the model reads it, then tokenized: every message but
** the `skip` messages from `skip_from` (what the context policy would
** drop).  Chat formats write their own BOS text, so only raw completion
** asks the tokenizer to add specials.  The template's markup is parsed
** into control tokens; the messages' own text never is, unless
** allow_special (so a pasted document cannot forge turns).
** *in_reasoning: the generation prompt left a reasoning block open (the
** reply starts inside it). */
static int render_without(RadConv *c, const RadConvSettings *s, int skip_from, int skip, int32_t **ids, int *n,
                          int *in_reasoning)
{
    char *text = NULL;
    RadTextSpan *spans = NULL;
    int rc, n_spans = 0, flags = s->allow_special ? RAD_ENCODE_PARSE_SPECIAL : 0;
    *in_reasoning = 0;
    RadChatMessage *list = malloc((size_t)(c->n_messages ? c->n_messages : 1) * sizeof *list);
    if (!list) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int k = 0;
    for (int i = 0; i < c->n_messages; i++) {
        if (i >= skip_from && i < skip_from + skip) continue;
        list[k].role = c->messages[i].role;
        list[k].content = c->messages[i].content;
        list[k].reasoning = c->messages[i].reasoning;
        k++;
    }
    if (c->format) {
        RadChatRender opt = {.add_generation_prompt = 1, .thinking = s->thinking};
        rc = rad_chat_render_spans(c->format, list, k, &opt, &text, s->allow_special ? NULL : &spans,
                                   s->allow_special ? NULL : &n_spans);
        free(list);
        if (rc) return rc;
        *in_reasoning = rad_chat_prompt_in_reasoning(c->format, text);
        flags |= RAD_ENCODE_PARSE_SPECIAL;  /* the markup; the spans stay text */
    } else {
        size_t total = 1;
        for (int i = 0; i < k; i++) total += strlen(list[i].content);
        if (!(text = malloc(total))) {
            free(list);
            return rad_error_set(RAD_E_NOMEM, "out of memory");
        }
        size_t at = 0;
        for (int i = 0; i < k; i++) {
            size_t len = strlen(list[i].content);
            memcpy(text + at, list[i].content, len);
            at += len;
        }
        text[at] = 0;
        free(list);
        flags |= RAD_ENCODE_ADD_SPECIAL;
    }
    rc = rad_text_encode_spans(c->text, text, strlen(text), flags, spans, n_spans, ids, n);
    free(text);
    free(spans);
    if (rc == RAD_OK && *n == 0) {
        free(*ids);
        *ids = NULL;
        rc = rad_error_set(RAD_E_ARG, "the prompt is empty");
    }
    return rc;
}

static int render_prompt(RadConv *c, const RadConvSettings *s, int32_t **ids, int *n, int *in_reasoning)
{
    return render_without(c, s, 0, 0, ids, n, in_reasoning);
}

/* ------------------------------------------------ context policy, KV reuse */

static int reply_budget(const RadConv *c, const RadConvSettings *s)
{
    if (s->n_predict >= 0) return s->n_predict;
    if (s->reply_reserve > 0) return s->reply_reserve;
    int quarter = c->ctx / 4;
    return quarter < 512 ? quarter : 512;
}

/* Where the policy may drop from: the oldest non-system message, never
** the turn being answered (the last).  Dropping takes whole turns: from
** there up to a user message.  *count: how many messages the first `turns`
** turns hold; returns the first index, or -1 when fewer turns than that
** can go. */
static int droppable_turns(const RadConv *c, int turns, int *count)
{
    int first = c->n_messages > 0 && !strcmp(c->messages[0].role, "system");
    int next = first;
    for (int t = 0; t < turns; t++) {
        if (next >= c->n_messages - 1) return -1;
        next++;
        while (next < c->n_messages - 1 && strcmp(c->messages[next].role, "user")) next++;
    }
    *count = next - first;
    return first;
}

/* Render, then make the prompt fit the context with the reply budget as the
** policy says, telling the user what happened.  Turns are dropped only when
** that makes the prompt fit: a message too large for the context alone is
** refused with the conversation untouched. */
static int fit_prompt(RadConv *c, const RadConvSettings *s, const RadConvCallbacks *cb, int32_t **ids, int *n,
                      int *in_reasoning, int *dropped)
{
    int budget = reply_budget(c, s), rc;
    *dropped = 0;
    if ((rc = render_prompt(c, s, ids, n, in_reasoning))) return rc;
    if (*n + budget <= c->ctx) return RAD_OK;
    if (s->context_policy == RAD_CONTEXT_REFUSE) {
        int have = *n;
        free(*ids);
        *ids = NULL;
        return rad_error_set(RAD_E_RANGE,
                             "context: the conversation (%d tokens) and the reply budget (%d) do not fit the "
                             "context (%d); context_policy is refuse",
                             have, budget, c->ctx);
    }
    /* The prompt with every droppable turn gone: if even that does not
    ** fit, nothing is dropped. */
    int all = 0, count = 0, first = -1;
    while (droppable_turns(c, all + 1, &count) >= 0) all++;
    int32_t *trial = NULL;
    int trial_n = *n, trial_reason = *in_reasoning;
    if (all > 0) {
        first = droppable_turns(c, all, &count);
        if ((rc = render_without(c, s, first, count, &trial, &trial_n, &trial_reason))) {
            free(*ids);
            *ids = NULL;
            return rc;
        }
    }
    if (trial_n >= c->ctx) {
        free(trial);
        int have = *n;
        free(*ids);
        *ids = NULL;
        return rad_error_set(RAD_E_RANGE,
                             "context: the message is too long: the prompt is %d tokens%s and the context holds "
                             "%d (--ctx); nothing was dropped",
                             all ? trial_n : have, all ? " even without the earlier turns" : "", c->ctx);
    }
    /* Fewest turns that make it fit with the budget, else all of them. */
    int turns = 1, first_n = *n;
    for (; turns < all; turns++) {
        free(trial);
        trial = NULL;
        first = droppable_turns(c, turns, &count);
        if ((rc = render_without(c, s, first, count, &trial, &trial_n, &trial_reason))) {
            free(*ids);
            *ids = NULL;
            return rc;
        }
        if (trial_n + budget <= c->ctx) break;
    }
    if (turns >= all && all > 0) {
        free(trial);
        trial = NULL;
        first = droppable_turns(c, all, &count);
        if ((rc = render_without(c, s, first, count, &trial, &trial_n, &trial_reason))) {
            free(*ids);
            *ids = NULL;
            return rc;
        }
    }
    char note[320];
    if (all > 0) {
        remove_messages(c, first, count);
        *dropped = count;
        free(*ids);
        *ids = trial;
        *n = trial_n;
        *in_reasoning = trial_reason;
        snprintf(note, sizeof note,
                 "context: the conversation (%d tokens) and the reply budget (%d) outgrew the context (%d): "
                 "dropped the %d oldest message%s (%d tokens now)",
                 first_n, budget, c->ctx, *dropped, *dropped == 1 ? "" : "s", *n);
        if (cb && cb->on_notice) cb->on_notice(cb->user, note);
    }
    if (*n + budget > c->ctx) {
        snprintf(note, sizeof note, "context: the prompt (%d tokens) leaves room for %d of the %d reply tokens",
                 *n, c->ctx - *n, budget);
        if (cb && cb->on_notice) cb->on_notice(cb->user, note);
    }
    return RAD_OK;
}

static int reserve_held(RadConv *c, int n)
{
    if (n <= c->cap_held) return RAD_OK;
    int cap = c->cap_held ? c->cap_held : 256;
    while (cap < n) cap *= 2;
    int32_t *grown = realloc(c->held, (size_t)cap * sizeof *grown);
    if (!grown) return rad_error_set(RAD_E_NOMEM, "out of memory");
    c->held = grown;
    c->cap_held = cap;
    return RAD_OK;
}

/* Start the sequence over (empty): used when it cannot be truncated, and
** after an evaluation failed half-way. */
static int reset_sequence(RadConv *c)
{
    if (c->seq >= 0) rad_engine_seq_free(c->engine, c->seq);
    c->seq = -1;
    c->n_held = 0;
    return rad_engine_seq_new(c->engine, &c->seq);
}

/* Keep the longest common prefix of what the sequence holds and the prompt,
** always leaving at least one prompt token to evaluate (its logits start
** the reply). */
static int reuse_prefix(RadConv *c, const int32_t *ids, int n)
{
    int common = 0;
    while (common < c->n_held && common < n && c->held[common] == ids[common]) common++;
    if (common == n) common = n - 1;
    if (common == c->n_held) return RAD_OK;
    int rc = rad_engine_seq_truncate(c->engine, c->seq, common);
    if (rc == RAD_E_RANGE) {
        rad_error_clear();
        return reset_sequence(c);
    }
    if (rc) return rc;
    c->n_held = common;
    return RAD_OK;
}

static int stopped(const RadConvCallbacks *cb)
{
    return cb && cb->stop && *cb->stop;
}

/* ------------------------------------------------------------ the reply */

uint64_t rad_conv_random_seed(void)
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (uint32_t)(ts.tv_nsec ^ ((uint64_t)ts.tv_sec * 2654435761u) ^ (uint32_t)getpid());
    }
    return v;
}

int rad_conv_buf_add(RadConvBuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) return RAD_E_NOMEM;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return RAD_OK;
}

/* What the parser's emit callback fills: the reply's parts as they come,
** each forwarded to the caller.  The parser emits each tool call whole,
** once, so every tool-call emit is one call. */
typedef struct ReplySink {
    const RadConvCallbacks *cb;
    RadConvBuf content, reasoning;
    RadConvMessage *tool_owner;     /* collects the tool calls */
    int failed;                     /* an allocation failed */
} ReplySink;

static void sink_emit(void *user, RadReplyPart part, const char *text, size_t n)
{
    ReplySink *k = user;
    if (part == RAD_REPLY_TOOL_CALL) {
        if (push_tool_call(k->tool_owner, text, n)) k->failed = 1;
    } else if (n == 0) {
        return;
    } else if (rad_conv_buf_add(part == RAD_REPLY_REASONING ? &k->reasoning : &k->content, text, n)) {
        k->failed = 1;
    }
    if (k->cb && k->cb->on_part) k->cb->on_part(k->cb->user, part, text, n);
}

static int is_stop_id(const RadConv *c, int token)
{
    for (int i = 0; i < c->n_stop_ids; i++)
        if (c->stop_ids[i] == token) return 1;
    return 0;
}

static int ensure_sampler(RadConv *c, const RadSamplerParams *p)
{
    if (c->sampler && !memcmp(&c->sampler_params, p, sizeof *p)) return RAD_OK;
    RadSampler *fresh = NULL;
    int rc = rad_sampler_create(p, c->vocab, &fresh);
    if (rc) return rc;
    rad_sampler_free(c->sampler);
    c->sampler = fresh;
    c->sampler_params = *p;
    return RAD_OK;
}

/* Evaluate ids[c->n_held .. n) in chunks, polling the stop flag between
** them; the last chunk leaves its logits in c->logits. */
static int prefill(RadConv *c, const int32_t *ids, int n, const RadConvCallbacks *cb)
{
    while (c->n_held < n) {
        if (stopped(cb)) return RAD_E_INTERRUPT;
        int chunk = n - c->n_held < PREFILL_CHUNK ? n - c->n_held : PREFILL_CHUNK;
        int last = c->n_held + chunk == n;
        int rc = rad_engine_eval(c->engine, c->seq, ids + c->n_held, chunk, last ? c->logits : NULL);
        if (rc) return rc;
        memcpy(c->held + c->n_held, ids + c->n_held, (size_t)chunk * sizeof *ids);
        c->n_held += chunk;
    }
    return RAD_OK;
}

int rad_conv_reply(RadConv *c, const RadConvSettings *s, const RadConvCallbacks *cb, RadConvStats *stats_out)
{
    RadConvStats st = {0};
    double t0 = rad_now_ms();
    if (c->n_messages == 0 || (strcmp(c->messages[c->n_messages - 1].role, "user") &&
                               strcmp(c->messages[c->n_messages - 1].role, "tool")))
        return rad_error_set(RAD_E_ARG, "a reply needs a user turn to answer");
    RadSamplerParams params = s->sampler;
    if (s->seed_random) params.seed = rad_conv_random_seed();
    st.seed = params.seed;
    int rc = ensure_sampler(c, &params);
    if (rc) return rc;

    int32_t *ids = NULL;
    int n = 0, in_reasoning = 0;
    if ((rc = fit_prompt(c, s, cb, &ids, &n, &in_reasoning, &st.dropped_messages))) return rc;
    st.prompt_tokens = n;
    st.render_ms = rad_now_ms() - t0;

    /* Room for the prompt, and for every reply token fed back after it. */
    int budget = s->n_predict >= 0 ? s->n_predict : c->ctx;
    if ((rc = reserve_held(c, n + (budget < c->ctx ? budget : c->ctx) + 1))) goto fail;
    if ((rc = reuse_prefix(c, ids, n))) goto fail;
    int evaluated_from = c->n_held;
    double t_prefill = rad_now_ms();
    rc = prefill(c, ids, n, cb);
    st.prompt_evaluated = c->n_held - evaluated_from;
    st.prefill_ms = rad_now_ms() - t_prefill;
    if (rc) {
        /* A failed evaluation may leave the sequence between states; an
        ** interrupted one holds exactly what it evaluated. */
        if (rc != RAD_E_INTERRUPT) reset_sequence(c);
        else rad_error_set(RAD_E_INTERRUPT, "interrupted before the reply began");
        goto fail;
    }
    if (st.prefill_ms > 0 && st.prompt_evaluated > 0) st.prefill_tps = st.prompt_evaluated * 1e3 / st.prefill_ms;

    /* Generate. */
    RadConvMessage reply = {0};
    ReplySink sink = {.cb = cb, .tool_owner = &reply};
    RadReplyParser *parser = NULL;
    RadDetok detok;
    size_t piece_cap = rad_detok_max_bytes(c->text) + 16;
    char *piece = malloc(piece_cap);
    int token_cap = 64;
    reply.tokens = malloc((size_t)token_cap * sizeof *reply.tokens);
    if (c->format) parser = rad_reply_parser_new(c->format, in_reasoning);
    if (!piece || !reply.tokens || (c->format && !parser)) {
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        goto reply_fail;
    }
    /* Chat replies keep special tokens in the text so the parser sees the
    ** markup; raw completion drops them as plain decoding does. */
    rad_detok_init(&detok, c->text, c->format ? 0 : RAD_DECODE_SKIP_SPECIAL);
    RadFinish finish = RAD_FINISH_LENGTH;
    double t_first = 0;
    /* With speculation, a verify step hands back several picks at once:
    ** all but the last are already in the sequence, the last is run by the
    ** next step (docs/SPECULATION.md).  They are taken from `queued` one at a
    ** time, through the same checks as a token picked here. */
    int32_t queued[RAD_CONV_MAX_DRAFT + 1];
    int n_queued = 0, at_queued = 0;
    RadSpecStats spec_before = c->spec ? c->spec->stats : (RadSpecStats){0};
    for (;;) {
        if (stopped(cb)) { finish = RAD_FINISH_INTERRUPTED; break; }
        if (s->n_predict >= 0 && reply.n_tokens >= s->n_predict) { finish = RAD_FINISH_LENGTH; break; }
        /* The repeat penalty sees the reply only, never the prompt: a reply
        ** that repeats itself is pushed on, one that quotes the question is
        ** not pushed away from its words (docs/SAMPLING.md). */
        int token = at_queued < n_queued ? queued[at_queued++]
                                         : rad_sampler_pick(c->sampler, c->logits, reply.tokens, reply.n_tokens, c->n_held);
        const int in_sequence = at_queued < n_queued;     /* an accepted guess the sequence holds */
        if (reply.n_tokens == 0) {
            t_first = rad_now_ms();
            st.ttft_ms = t_first - t0;
        }
        if (reply.n_tokens == token_cap) {
            int32_t *grown = realloc(reply.tokens, (size_t)(token_cap *= 2) * sizeof *grown);
            if (!grown) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); goto reply_fail; }
            reply.tokens = grown;
        }
        reply.tokens[reply.n_tokens++] = token;
        if (!s->ignore_eos && is_stop_id(c, token)) { finish = RAD_FINISH_STOP; break; }
        size_t wrote = 0;
        if ((rc = rad_detok_push(&detok, token, piece, piece_cap, &wrote))) goto reply_fail;
        int stop_string = 0;
        if (parser) stop_string = rad_reply_parser_feed(parser, piece, wrote, sink_emit, &sink);
        else sink_emit(&sink, RAD_REPLY_CONTENT, piece, wrote);
        if (sink.failed) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); goto reply_fail; }
        if (stop_string && !s->ignore_eos) { finish = RAD_FINISH_STOP; break; }
        if (s->n_predict >= 0 && reply.n_tokens >= s->n_predict) { finish = RAD_FINISH_LENGTH; break; }
        if (c->n_held >= c->ctx) {
            finish = RAD_FINISH_LENGTH;
            st.cut_by_context = 1;
            break;
        }
        if ((rc = reserve_held(c, c->n_held + 1 + RAD_CONV_MAX_DRAFT))) goto reply_fail;
        if (in_sequence) {
            c->held[c->n_held++] = token;
            continue;
        }
        if (c->spec) {
            c->held[c->n_held] = token;
            SpecPick sp = {.c = c, .reply = reply.tokens, .n_reply = reply.n_tokens, .scratch = NULL};
            int32_t *scratch = malloc((size_t)(reply.n_tokens + RAD_CONV_MAX_DRAFT + 1) * sizeof *scratch);
            if (!scratch) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); goto reply_fail; }
            memcpy(scratch, reply.tokens, (size_t)reply.n_tokens * sizeof *scratch);
            sp.scratch = scratch;
            int got = rad_spec_step(c->spec, c->engine, c->seq, c->held, c->n_held + 1, spec_pick, &sp, queued, NULL);
            free(scratch);
            if (got < 0) {
                rc = got;
                reset_sequence(c);
                goto reply_fail;
            }
            c->n_held++;
            n_queued = got;
            at_queued = 0;
            continue;
        }
        if ((rc = rad_engine_eval(c->engine, c->seq, &token, 1, c->logits))) {
            reset_sequence(c);
            goto reply_fail;
        }
        c->held[c->n_held++] = token;
    }
    /* A reply that ended on a queued pick leaves accepted guesses after it in
    ** the sequence: plain decoding never ran them, so neither does this. */
    if (at_queued < n_queued && n_queued > 1 && rad_engine_seq_len(c->engine, c->seq) > c->n_held &&
        rad_engine_seq_truncate(c->engine, c->seq, c->n_held) != RAD_OK)
        reset_sequence(c);
    if (c->spec) {
        st.draft_steps = (int)(c->spec->stats.steps - spec_before.steps);
        st.draft_proposed = (int)(c->spec->stats.drafted - spec_before.drafted);
        st.draft_accepted = (int)(c->spec->stats.accepted - spec_before.accepted);
    }
    if (st.cut_by_context && cb && cb->on_notice) {
        char note[200];
        snprintf(note, sizeof note,
                 "context: the reply was cut at the end of the context (%d tokens, --ctx) after %d tokens",
                 c->ctx, reply.n_tokens);
        cb->on_notice(cb->user, note);
    }
    /* Whatever the decoder and the parser still hold belongs to the reply;
    ** but a reply cut short (by -n, the context or Ctrl-C) may end inside a
    ** character whose last bytes never came: those bytes are dropped, not
    ** shown as U+FFFD. */
    size_t wrote = 0;
    if (finish != RAD_FINISH_STOP) detok.n_pending = 0;
    if (rad_detok_flush(&detok, piece, piece_cap, &wrote) == RAD_OK && wrote) {
        if (parser) rad_reply_parser_feed(parser, piece, wrote, sink_emit, &sink);
        else sink_emit(&sink, RAD_REPLY_CONTENT, piece, wrote);
    }
    if (parser) rad_reply_parser_finish(parser, sink_emit, &sink);
    if (sink.failed) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); goto reply_fail; }

    double t_end = rad_now_ms();
    st.completion_tokens = reply.n_tokens;
    if (reply.n_tokens > 0) st.decode_ms = t_end - t_first;
    if (reply.n_tokens > 1 && st.decode_ms > 0) st.decode_tps = (reply.n_tokens - 1) * 1e3 / st.decode_ms;
    reply.role = copy_string("assistant");
    reply.content = sink.content.data ? sink.content.data : copy_string("");
    sink.content.data = NULL;
    reply.reasoning = sink.reasoning.data;     /* NULL when the reply had none */
    sink.reasoning.data = NULL;
    reply.finish = finish;
    reply.stats = st;
    if (!reply.role || !reply.content || insert_message(c, c->n_messages, &reply)) {
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        goto reply_fail;
    }
    rad_reply_parser_free(parser);
    free(piece);
    free(ids);
    if (stats_out) *stats_out = st;
    return RAD_OK;

reply_fail:
    free(sink.content.data);
    free(sink.reasoning.data);
    message_free(&reply);
    rad_reply_parser_free(parser);
    free(piece);
fail:
    free(ids);
    if (stats_out) *stats_out = st;
    return rc;
}

/* ------------------------------------------------------------ snapshots */

int rad_conv_context_used(const RadConv *c) { return c->n_held; }
int rad_conv_context_size(const RadConv *c) { return c->ctx; }

const int32_t *rad_conv_held_tokens(const RadConv *c, int *n)
{
    *n = c->n_held;
    return c->held;
}

int rad_conv_snapshot(const RadConv *c, void **blob, size_t *size)
{
    return rad_engine_seq_snapshot(c->engine, c->seq, blob, size);
}

int rad_conv_restore(RadConv *c, const void *blob, size_t size, const int32_t *tokens, int n)
{
    int rc = reset_sequence(c);
    if (rc) return rc;
    if (n < 0 || n > c->ctx)
        return rad_error_set(RAD_E_ARG, "snapshot: %d tokens do not fit the context (%d)", n, c->ctx);
    if ((rc = reserve_held(c, n))) return rc;
    if ((rc = rad_engine_seq_restore(c->engine, c->seq, blob, size))) {
        reset_sequence(c);
        return rc;
    }
    if (rad_engine_seq_len(c->engine, c->seq) != n) {
        int held = rad_engine_seq_len(c->engine, c->seq);
        reset_sequence(c);
        return rad_error_set(RAD_E_ARG, "snapshot: the blob holds %d positions but %d token ids came with it",
                             held, n);
    }
    memcpy(c->held, tokens, (size_t)n * sizeof *tokens);
    c->n_held = n;
    return RAD_OK;
}
