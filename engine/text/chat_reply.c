/*
** chat_reply.c: one incremental parser that splits a streamed reply into
** content, reasoning and tool calls.
**
** The reply arrives as decoded text in pieces cut anywhere: inside a marker
** (<thi|nk>), inside a UTF-8 character, one byte at a time.  The parser keeps
** one small buffer of bytes it cannot yet place and, on every feed, emits
** everything before the earliest marker of the current mode, or, when no
** whole marker is there, everything except the longest tail that is still
** the start of one (and except an unfinished UTF-8 character).  So the
** parts do not depend on how the text was cut (tests/text/test_reply_parser.c
** feeds every reply split at every byte and checks exactly that), and no
** marker ever reaches the content.
**
** Modes and what moves between them:
**
**   content    --reasoning_open-->  reasoning  --reasoning_close--> content
**   content    --tool_call_open-->  tool call  --tool_call_close--> content
**   any        --a stop string-->   done (the rest is dropped)
**
** gpt-oss (harmony) has no open/close pairs but headers: every message is
** <|start|>ROLE<|channel|>CHANNEL [to=RECIPIENT] ...<|message|>BODY<|end|>,
** and the generation prompt leaves the parser inside the first header.  The
** header is collected and decides the body's mode: analysis is reasoning, a
** recipient (to=functions.NAME) a tool call, anything else content.
**
** White space the templates drop is dropped here too: at the start of a
** reasoning block, at the end of one, and at the start of the content that
** follows a reasoning block or a tool call (Qwen3 writes "<think>\n...\n
** </think>\n\n"), and at the start of a GLM-4.5 reply ("\n<think>").  Trailing white space inside reasoning waits until
** something other than white space or the close follows it.
**
** Tool calls are collected whole and emitted once each when they close (or
** the reply ends inside one), so one RAD_REPLY_TOOL_CALL emit is one call;
** where the markup keeps the name outside the JSON (harmony's recipient,
** DeepSeek's <｜tool▁sep｜>NAME) the emit is {"name": NAME, "arguments": ARGS}.
*/
#include <stdlib.h>
#include <string.h>

#include "rad_chat.h"

enum Mode { M_CONTENT, M_REASONING, M_TOOL, M_HEADER, M_IDLE, M_DONE, M_COUNT };

enum Act {
    A_REASON_OPEN,
    A_REASON_CLOSE,
    A_TOOL_OPEN,
    A_TOOL_CLOSE,
    A_STOP,
    A_H_START,   /* harmony <|start|>: a header begins */
    A_H_CHANNEL, /* harmony <|channel|> outside a header: a header begins with it */
    A_H_MESSAGE, /* harmony <|message|>: the header ends, the body begins */
    A_H_END,     /* harmony <|end|>: the body ends */
    A_H_CALL     /* harmony <|call|>: a tool call's body ends, and the reply */
};

#define MAX_MARKERS 16

typedef struct Marker {
    const char *text;
    size_t len;
    int act;
} Marker;

typedef struct Buf {
    char *p;
    size_t n, cap;
} Buf;

struct RadReplyParser {
    const RadChatFormat *f;
    int harmony;
    int mode;
    int skip_ws; /* drop white space at the start of what comes next */
    Buf hold;    /* fed bytes not yet placed */
    Buf block;   /* the tool call, or the harmony header, being collected */
    Buf name;    /* the harmony tool call's recipient */
    Marker markers[M_COUNT][MAX_MARKERS];
    int n_markers[M_COUNT];
    RadReplyEmit emit; /* the callback of the feed in progress */
    void *user;
};

/* ------------------------------------------------------------- buffers */

static int buf_add(Buf *b, const char *s, size_t n)
{
    if (!n) return 0;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

static void buf_drop_front(Buf *b, size_t n)
{
    memmove(b->p, b->p + n, b->n - n);
    b->n -= n;
    if (b->p) b->p[b->n] = 0;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* ------------------------------------------------------------- markers */

static void add_marker(RadReplyParser *p, int mode, const char *text, int act)
{
    if (!text || !*text || p->n_markers[mode] >= MAX_MARKERS) return;
    Marker *m = &p->markers[mode][p->n_markers[mode]++];
    m->text = text;
    m->len = strlen(text);
    m->act = act;
}

static void add_stops(RadReplyParser *p, int mode)
{
    for (const char *const *s = p->f->stop_strings; s && *s; s++) {
        int known = 0;
        for (int i = 0; i < p->n_markers[mode]; i++) known |= !strcmp(p->markers[mode][i].text, *s);
        if (!known) add_marker(p, mode, *s, A_STOP);
    }
}

static void build_markers(RadReplyParser *p)
{
    const RadChatFormat *f = p->f;
    if (p->harmony) {
        static const int bodies[] = {M_CONTENT, M_REASONING, M_TOOL, M_IDLE};
        add_marker(p, M_HEADER, "<|message|>", A_H_MESSAGE);
        add_marker(p, M_HEADER, "<|start|>", A_H_START);
        add_marker(p, M_HEADER, "<|end|>", A_H_END);
        add_marker(p, M_HEADER, "<|call|>", A_H_CALL);
        add_stops(p, M_HEADER);
        for (int i = 0; i < 4; i++) {
            int m = bodies[i];
            add_marker(p, m, "<|start|>", A_H_START);
            add_marker(p, m, "<|channel|>", A_H_CHANNEL);
            add_marker(p, m, "<|end|>", A_H_END);
            add_marker(p, m, "<|call|>", A_H_CALL);
            add_stops(p, m);
        }
        return;
    }
    add_marker(p, M_CONTENT, f->reasoning_open, A_REASON_OPEN);
    add_marker(p, M_CONTENT, f->tool_call_open, A_TOOL_OPEN);
    add_stops(p, M_CONTENT);
    add_marker(p, M_REASONING, f->reasoning_close, A_REASON_CLOSE);
    add_stops(p, M_REASONING);
    add_marker(p, M_TOOL, f->tool_call_close, A_TOOL_CLOSE);
    add_stops(p, M_TOOL);
}

/* The earliest whole marker of the mode in hold (the longest one where two
** start together); *wait set when a longer marker may still complete there. */
static const Marker *find_marker(const RadReplyParser *p, size_t *at, int *wait)
{
    const Marker *best = NULL;
    size_t best_at = 0;
    *wait = 0;
    for (int i = 0; i < p->n_markers[p->mode]; i++) {
        const Marker *m = &p->markers[p->mode][i];
        const char *hit = memmem(p->hold.p, p->hold.n, m->text, m->len);
        if (!hit) continue;
        size_t pos = (size_t)(hit - p->hold.p);
        if (!best || pos < best_at || (pos == best_at && m->len > best->len)) best = m, best_at = pos;
    }
    if (!best) return NULL;
    size_t rest = p->hold.n - best_at;
    for (int i = 0; i < p->n_markers[p->mode]; i++) {
        const Marker *m = &p->markers[p->mode][i];
        if (m->len > best->len && rest < m->len && !memcmp(p->hold.p + best_at, m->text, rest)) *wait = 1;
    }
    *at = best_at;
    return best;
}

/* How many bytes at the end of hold could still begin a marker of the mode. */
static size_t marker_tail(const RadReplyParser *p)
{
    size_t keep = 0;
    for (int i = 0; i < p->n_markers[p->mode]; i++) {
        const Marker *m = &p->markers[p->mode][i];
        size_t k = m->len - 1 < p->hold.n ? m->len - 1 : p->hold.n;
        for (; k > keep; k--)
            if (!memcmp(p->hold.p + p->hold.n - k, m->text, k)) {
                keep = k;
                break;
            }
    }
    return keep;
}

/* e moved back so that hold[0..e) does not end inside a UTF-8 character. */
static size_t utf8_boundary(const char *s, size_t e)
{
    for (size_t back = 1; back <= 3 && back <= e; back++) {
        unsigned char c = (unsigned char)s[e - back];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? e - back : e;
    }
    return e;
}

/* ------------------------------------------------------------ emitting */

static void out(RadReplyParser *p, RadReplyPart part, const char *s, size_t n)
{
    if (p->skip_ws) {
        while (n && is_ws(*s)) s++, n--;
        if (n) p->skip_ws = 0;
    }
    if (n) p->emit(p->user, part, s, n);
}

static void append_json_string(Buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    buf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            buf_add(b, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buf_add(b, e, 6);
        } else {
            buf_add(b, (const char *)&c, 1);
        }
    }
    buf_add(b, "\"", 1);
}

static void trim_span(const char **s, size_t *n)
{
    while (*n && is_ws(**s)) (*s)++, (*n)--;
    while (*n && is_ws((*s)[*n - 1])) (*n)--;
}

/* Emit {"name": NAME, "arguments": ARGS} (ARGS "{}" when empty). */
static void emit_named_call(RadReplyParser *p, const char *name, size_t name_len, const char *args,
                            size_t args_len)
{
    Buf b = {0};
    trim_span(&name, &name_len);
    trim_span(&args, &args_len);
    buf_add(&b, "{\"name\": ", 9);
    append_json_string(&b, name, name_len);
    buf_add(&b, ", \"arguments\": ", 15);
    if (args_len)
        buf_add(&b, args, args_len);
    else
        buf_add(&b, "{}", 2);
    buf_add(&b, "}", 1);
    if (b.p) p->emit(p->user, RAD_REPLY_TOOL_CALL, b.p, b.n);
    free(b.p);
}

/* DeepSeek: <｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>,
** one or more; a call that does not read so is emitted as written. */
static void emit_deepseek_calls(RadReplyParser *p, const char *s, size_t n)
{
    static const char begin[] = "<｜tool▁call▁begin｜>", end[] = "<｜tool▁call▁end｜>",
                      sep[] = "<｜tool▁sep｜>";
    const char *stop = s + n;
    while (s < stop) {
        const char *b = memmem(s, (size_t)(stop - s), begin, sizeof begin - 1);
        if (!b) break;
        const char *body = b + sizeof begin - 1;
        const char *e = memmem(body, (size_t)(stop - body), end, sizeof end - 1);
        const char *body_end = e ? e : stop;
        const char *x = memmem(body, (size_t)(body_end - body), sep, sizeof sep - 1);
        const char *name = x ? x + sizeof sep - 1 : NULL;
        const char *nl = name ? memchr(name, '\n', (size_t)(body_end - name)) : NULL;
        const char *fence = nl ? memmem(nl, (size_t)(body_end - nl), "```", 3) : NULL;
        if (fence) {
            const char *args = fence + 3;
            const char *args_nl = memchr(args, '\n', (size_t)(body_end - args));
            args = args_nl ? args_nl + 1 : args; /* past the fence's language tag */
            const char *close = body_end;
            for (const char *q = args; (q = memmem(q, (size_t)(body_end - q), "```", 3)); q += 3) close = q;
            emit_named_call(p, name, (size_t)(nl - name), args, (size_t)(close - args));
        } else {
            const char *t = body;
            size_t tn = (size_t)(body_end - body);
            trim_span(&t, &tn);
            if (tn) p->emit(p->user, RAD_REPLY_TOOL_CALL, t, tn);
        }
        s = e ? e + sizeof end - 1 : stop;
    }
}

/* The collected tool call is complete: emit it and forget it. */
static void emit_tool(RadReplyParser *p)
{
    const char *s = p->block.p ? p->block.p : "";
    size_t n = p->block.n;
    if (p->harmony) {
        emit_named_call(p, p->name.p ? p->name.p : "", p->name.n, s, n);
    } else if (p->f->style == RAD_CHAT_STYLE_DEEPSEEK &&
               memmem(s, n, "<｜tool▁call▁begin｜>", strlen("<｜tool▁call▁begin｜>"))) {
        emit_deepseek_calls(p, s, n);
    } else {
        trim_span(&s, &n);
        if (n) p->emit(p->user, RAD_REPLY_TOOL_CALL, s, n);
    }
    p->block.n = 0;
    p->name.n = 0;
}

/* Place hold[0..n) in the current mode.  final: this text ends the block
** (a marker or the reply's end follows), so reasoning loses its trailing
** white space. */
static void place(RadReplyParser *p, size_t n, int final)
{
    const char *s = p->hold.p;
    size_t taken = n;
    switch (p->mode) {
    case M_CONTENT:
    case M_IDLE:
        out(p, RAD_REPLY_CONTENT, s, n);
        break;
    case M_REASONING:
        if (final)
            while (n && is_ws(s[n - 1])) n--;
        out(p, RAD_REPLY_REASONING, s, n);
        break;
    case M_TOOL:
    case M_HEADER:
        buf_add(&p->block, s, n);
        break;
    }
    buf_drop_front(&p->hold, taken);
}

/* ------------------------------------------------------------- harmony */

/* The word after `key` in the header ("<|channel|>analysis" -> analysis). */
static size_t header_word(const Buf *h, const char *key, const char **word)
{
    const char *k = h->p ? memmem(h->p, h->n, key, strlen(key)) : NULL;
    if (!k) return 0;
    const char *w = k + strlen(key), *end = h->p + h->n;
    size_t n = 0;
    while (w + n < end && !is_ws(w[n]) && w[n] != '<') n++;
    *word = w;
    return n;
}

/* The header is complete: choose the body's mode. */
static void harmony_body(RadReplyParser *p)
{
    const char *channel = NULL, *to = NULL;
    size_t channel_len = header_word(&p->block, "<|channel|>", &channel);
    size_t to_len = header_word(&p->block, "to=", &to);
    p->name.n = 0;
    if (to_len && !(to_len == 9 && !memcmp(to, "assistant", 9))) {
        if (to_len > 10 && !memcmp(to, "functions.", 10)) to += 10, to_len -= 10;
        buf_add(&p->name, to, to_len);
        p->mode = M_TOOL;
    } else if (channel_len == 8 && !memcmp(channel, "analysis", 8)) {
        p->mode = M_REASONING;
        p->skip_ws = 1;
    } else {
        p->mode = M_CONTENT;
    }
    p->block.n = 0;
}

/* ---------------------------------------------------------------- feed */

/* Leave the current block at a marker: what ends with it. */
static void leave_block(RadReplyParser *p)
{
    if (p->mode == M_TOOL) emit_tool(p);
    p->block.n = 0;
}

static void act(RadReplyParser *p, const Marker *m)
{
    switch (m->act) {
    case A_REASON_OPEN:
        p->mode = M_REASONING;
        p->skip_ws = 1;
        break;
    case A_REASON_CLOSE:
        p->mode = M_CONTENT;
        p->skip_ws = 1;
        break;
    case A_TOOL_OPEN:
        p->mode = M_TOOL;
        p->block.n = 0;
        break;
    case A_TOOL_CLOSE:
        emit_tool(p);
        p->mode = M_CONTENT;
        p->skip_ws = 1;
        break;
    case A_STOP:
    case A_H_CALL:
        leave_block(p);
        p->mode = M_DONE;
        break;
    case A_H_START:
        leave_block(p);
        p->mode = M_HEADER;
        break;
    case A_H_CHANNEL:
        leave_block(p);
        p->mode = M_HEADER;
        buf_add(&p->block, m->text, m->len);
        break;
    case A_H_MESSAGE:
        harmony_body(p);
        break;
    case A_H_END:
        leave_block(p);
        p->mode = M_IDLE;
        break;
    }
    if (p->mode != M_REASONING && p->mode != M_CONTENT) p->skip_ws = 0;
}

/* Place everything in hold that can be placed now. */
static void run(RadReplyParser *p, int at_end)
{
    while (p->mode != M_DONE && p->hold.n) {
        size_t at;
        int wait;
        const Marker *m = find_marker(p, &at, &wait);
        if (m && !(wait && !at_end)) {
            place(p, at, 1);
            buf_drop_front(&p->hold, m->len);
            act(p, m);
            continue;
        }
        if (at_end) {
            place(p, p->hold.n, 1);
            break;
        }
        size_t e = m ? at : p->hold.n - marker_tail(p);
        if (p->mode == M_REASONING)
            while (e && is_ws(p->hold.p[e - 1])) e--;
        if (p->mode == M_CONTENT || p->mode == M_REASONING || p->mode == M_IDLE)
            e = utf8_boundary(p->hold.p, e);
        if (e) place(p, e, 0);
        break;
    }
}

RadReplyParser *rad_reply_parser_new(const RadChatFormat *f, int in_reasoning)
{
    if (!f || f->choices) {
        rad_error_set(RAD_E_ARG, "the reply parser needs a resolved chat format");
        return NULL;
    }
    RadReplyParser *p = calloc(1, sizeof *p);
    if (!p) {
        rad_error_set(RAD_E_NOMEM, "out of memory");
        return NULL;
    }
    p->f = f;
    p->harmony = f->style == RAD_CHAT_STYLE_HARMONY;
    build_markers(p);
    p->mode = in_reasoning && (f->reasoning_open || p->harmony) ? M_REASONING
              : p->harmony                                      ? M_HEADER
                                                                : M_CONTENT;
    /* GLM-4.5's replies open with the "\n" its template writes before
    ** <think>: markup, not content */
    p->skip_ws = p->mode == M_REASONING || f->style == RAD_CHAT_STYLE_GLM;
    return p;
}

void rad_reply_parser_free(RadReplyParser *p)
{
    if (!p) return;
    free(p->hold.p);
    free(p->block.p);
    free(p->name.p);
    free(p);
}

int rad_reply_parser_feed(RadReplyParser *p, const char *text, size_t n, RadReplyEmit emit, void *user)
{
    if (p->mode == M_DONE) return 1;
    p->emit = emit;
    p->user = user;
    if (buf_add(&p->hold, text, n)) {
        /* Out of memory: what we hold goes out as it is rather than vanish. */
        run(p, 1);
        return p->mode == M_DONE;
    }
    run(p, 0);
    return p->mode == M_DONE;
}

void rad_reply_parser_finish(RadReplyParser *p, RadReplyEmit emit, void *user)
{
    p->emit = emit;
    p->user = user;
    if (p->mode != M_DONE) {
        run(p, 1);
        leave_block(p); /* a tool call left open is still a tool call; a header is dropped */
    }
    p->hold.n = 0;
    p->mode = M_DONE;
}
