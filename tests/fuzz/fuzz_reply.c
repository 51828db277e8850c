/*
** fuzz_reply.c: libFuzzer target for the streaming reply parser
** (engine/text/chat_reply.c), which reads what a model writes.
**
** Input: byte 0 picks one of the chat formats of arch/common/rad_chat_formats.h,
** byte 1 whether the reply starts inside reasoning and how it is cut, the
** rest is the reply, any bytes.  The reply is parsed fed whole and fed in
** pieces cut at positions drawn from byte 1; the parts (content and
** reasoning runs joined, every tool call on its own) and whether it stopped
** must be the same, as the parser promises for any cut.  Every emit is
** non-empty.  Seeds (tests/fuzz/seeds/reply): the replies each model writes,
** as in tests/text/test_reply_parser.c.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../arch/common/rad_chat_formats.h"
#include "text/rad_chat.h"

static const RadChatFormat *const formats[] = {
    &rad_chat_fmt_chatml,   &rad_chat_fmt_smollm2, &rad_chat_fmt_qwen25,         &rad_chat_fmt_qwen3,
    &rad_chat_fmt_llama3,   &rad_chat_fmt_llama31, &rad_chat_fmt_llama32,        &rad_chat_fmt_llama2,
    &rad_chat_fmt_mistral,  &rad_chat_fmt_mistral_tekken, &rad_chat_fmt_gemma,   &rad_chat_fmt_harmony,
    &rad_chat_fmt_deepseek_v3, &rad_chat_fmt_deepseek_r1,
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

/* What the parser gave: a list of (kind, bytes), content and reasoning runs joined. */
typedef struct Parts {
    unsigned char *p; /* kind byte, u32 length, bytes; repeated */
    size_t n, cap;
    size_t last;      /* offset of the last record, or SIZE_MAX */
    int stopped;
} Parts;

static void grow(Parts *ps, size_t more)
{
    if (ps->n + more <= ps->cap) return;
    size_t cap = ps->cap ? ps->cap * 2 : 256;
    while (cap < ps->n + more) cap *= 2;
    ps->p = realloc(ps->p, cap);
    if (!ps->p) abort();
    ps->cap = cap;
}

static void collect(void *user, RadReplyPart kind, const char *text, size_t n)
{
    Parts *ps = user;
    if (n == 0 || (int)kind < 0 || kind > RAD_REPLY_TOOL_CALL) __builtin_trap();
    if (ps->last != SIZE_MAX && ps->p[ps->last] == (unsigned char)kind && kind != RAD_REPLY_TOOL_CALL) {
        uint32_t len;
        memcpy(&len, ps->p + ps->last + 1, 4);
        len += (uint32_t)n;
        memcpy(ps->p + ps->last + 1, &len, 4);
    } else {
        grow(ps, 5);
        ps->last = ps->n;
        ps->p[ps->n] = (unsigned char)kind;
        uint32_t len = (uint32_t)n;
        memcpy(ps->p + ps->n + 1, &len, 4);
        ps->n += 5;
    }
    grow(ps, n);
    memcpy(ps->p + ps->n, text, n);
    ps->n += n;
}

static void parse(const RadChatFormat *f, int in_reasoning, const char *s, size_t n, unsigned seed, Parts *ps)
{
    memset(ps, 0, sizeof *ps);
    ps->last = SIZE_MAX;
    RadReplyParser *p = rad_reply_parser_new(f, in_reasoning);
    if (!p) __builtin_trap();
    size_t at = 0;
    while (at < n) {
        size_t k = n - at;
        if (seed) { /* pieces of 1..8 bytes from an LCG */
            seed = seed * 1103515245u + 12345u;
            k = 1 + (seed >> 16) % 8;
            if (k > n - at) k = n - at;
        }
        int r = rad_reply_parser_feed(p, s + at, k, collect, ps);
        if (ps->stopped && !r) __builtin_trap(); /* once stopped, stopped */
        ps->stopped |= r;
        at += k;
    }
    rad_reply_parser_finish(p, collect, ps);
    rad_reply_parser_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    const RadChatFormat *f = formats[data[0] % N_FORMATS];
    int in_reasoning = data[1] & 1;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    Parts whole, cut;
    parse(f, in_reasoning, s, n, 0, &whole);
    parse(f, in_reasoning, s, n, (unsigned)data[1] | 1u << 8, &cut);
    if (whole.stopped != cut.stopped || whole.n != cut.n || (whole.n && memcmp(whole.p, cut.p, whole.n)))
        __builtin_trap();
    free(whole.p);
    free(cut.p);
    return 0;
}
