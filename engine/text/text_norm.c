/*
** text_norm.c: the normalizer and the pre-tokenizer, the two stages between
** added-token extraction and the BPE model.
**
** The normalizer rewrites a piece of text (NFC, Prepend, literal Replace, in
** the order tokenizer.json lists them).  The pre-tokenizer then cuts the
** normalized piece into pre-tokens, each of which the model encodes alone.
** A Split step finds its pattern's matches left to right and turns the
** alternation of gaps and matches into pieces according to its behaviour
** (Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous), with
** `invert` swapping which is which; empty pieces vanish.  Steps apply in
** sequence, each to every piece of the one before, which we do depth-first
** so no list of pieces is ever built: a piece goes all the way to the model
** as soon as it is cut.
**
** HF compiles its patterns with Oniguruma; we use PCRE2 with UTF and Unicode
** properties, which agree on every construct the supported patterns use but
** one: PCRE2's \s also matches U+180E, which Unicode (and Oniguruma) stopped
** counting as white space.  We rewrite \s and \S to the White_Space set
** before compiling so the two engines cut identically.
*/
#include "text_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ------------------------------------------------------------ buffers */

int text_buf_reserve(TextBuf *b, size_t extra)
{
    if (b->n + extra <= b->cap) return RAD_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return RAD_E_NOMEM;
    b->p = p;
    b->cap = cap;
    return RAD_OK;
}

int text_buf_put(TextBuf *b, const void *src, size_t n)
{
    if (text_buf_reserve(b, n + 1)) return RAD_E_NOMEM;
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    b->p[b->n] = 0;
    return RAD_OK;
}

/* ------------------------------------------------------------ normalizer */

/* NFC of s[0..n) appended to out.  Text below U+0300 is already NFC (nothing
** there decomposes differently or composes with what follows), which spares
** utf8proc the common case. */
static int nfc_append(const char *s, size_t n, TextBuf *out)
{
    size_t i = 0;
    while (i < n && (unsigned char)s[i] < 0xCC) i++;
    if (i == n) return text_buf_put(out, s, n);
    utf8proc_uint8_t *res = NULL;
    utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &res,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (m < 0) {
        free(res);
        /* Input was sanitized, so only memory can fail here. */
        return m == UTF8PROC_ERROR_NOMEM ? RAD_E_NOMEM
                                         : rad_error_set(RAD_E_FORMAT, "NFC: %s", utf8proc_errmsg(m));
    }
    int rc = text_buf_put(out, res, (size_t)m);
    free(res);
    return rc;
}

/* Every occurrence of `pat` in s[0..n), left to right without overlap,
** replaced by `with`, appended to out. */
static int replace_append(const char *s, size_t n, const char *pat, const char *with, TextBuf *out)
{
    size_t pn = strlen(pat), wn = strlen(with);
    const char *end = s + n;
    while (s < end) {
        const char *hit = memmem(s, (size_t)(end - s), pat, pn);
        if (!hit) break;
        if (text_buf_put(out, s, (size_t)(hit - s)) || text_buf_put(out, with, wn)) return RAD_E_NOMEM;
        s = hit + pn;
    }
    return text_buf_put(out, s, (size_t)(end - s));
}

int text_normalize(const RadText *t, const char *s, size_t n, TextBuf *out)
{
    const RadTokenizer *d = t->d;
    TextBuf tmp = {0};
    int rc = RAD_OK;
    out->n = 0;
    if (text_buf_put(out, s, n)) return RAD_E_NOMEM;
    for (int i = 0; i < d->n_norm && rc == RAD_OK; i++) {
        const RadTokStep *st = &d->norm[i];
        tmp.n = 0;
        switch (st->kind) {
        case RAD_TOK_NORM_NFC:
            rc = nfc_append(out->p, out->n, &tmp);
            break;
        case RAD_TOK_NORM_PREPEND:
            /* HF prepends only to non-empty text. */
            if (out->n == 0) continue;
            rc = text_buf_put(&tmp, st->arg, strlen(st->arg));
            if (!rc) rc = text_buf_put(&tmp, out->p, out->n);
            break;
        case RAD_TOK_NORM_REPLACE:
            rc = replace_append(out->p, out->n, st->pattern, st->arg, &tmp);
            break;
        default:
            continue;
        }
        if (rc == RAD_OK) {
            TextBuf swap = *out;
            *out = tmp;
            tmp = swap;
        }
    }
    free(tmp.p);
    if (out->p == NULL) rc = text_buf_put(out, "", 0);
    return rc;
}

/* ------------------------------------------------------------ regexes */

/* The White_Space set as the inside of a character class. */
static const char space_class[] = "\\t-\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
                                  "\\x{202F}\\x{205F}\\x{3000}";

/* A malloc'd copy of `pattern` with \s and \S spelled as the White_Space set
** (see the file comment).  \S inside a character class is left alone: it
** cannot be spelled as a subset there, and no supported pattern uses it. */
static char *rewrite_spaces(const char *pattern)
{
    size_t n = strlen(pattern), cap = n * 12 + sizeof space_class * 4 + 16;
    char *out = malloc(cap), *p = out;
    int in_class = 0;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = pattern[i];
        if (c == '\\' && i + 1 < n) {
            char e = pattern[i + 1];
            size_t room = cap - (size_t)(p - out);
            if (e == 's' && in_class)
                p += snprintf(p, room, "%s", space_class);
            else if (e == 's')
                p += snprintf(p, room, "[%s]", space_class);
            else if (e == 'S' && !in_class)
                p += snprintf(p, room, "[^%s]", space_class);
            else {
                *p++ = c;
                *p++ = e;
            }
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            *p++ = c;
            /* A ']' or '^]' right after the opening bracket is literal. */
            if (i + 1 < n && pattern[i + 1] == '^') *p++ = pattern[++i];
            if (i + 1 < n && pattern[i + 1] == ']') *p++ = pattern[++i];
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        *p++ = c;
    }
    *p = 0;
    return out;
}

pcre2_code *text_regex_compile(const char *pattern, const char *what, int *jit)
{
    char *rewritten = rewrite_spaces(pattern);
    if (!rewritten) {
        rad_error_set(RAD_E_NOMEM, "out of memory compiling %s", what);
        return NULL;
    }
    int err;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)rewritten, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &at, NULL);
    free(rewritten);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        rad_error_set(RAD_E_UNSUPPORTED, "%s: regex does not compile: %s", what, (const char *)msg);
        return NULL;
    }
    /* JIT is a speed-up only; without it pcre2_match interprets. */
    *jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    return re;
}

/* ------------------------------------------------------------ splitting */

/* The stream of pieces one Split step produces, combined per behaviour.
** `pend` is a piece held back because the next segment may join it. */
typedef struct Splitter {
    const RadText *t;
    TextMatch *m;
    int next_step;
    TextPieceFn fn;
    void *ctx;
    int behavior;
    const char *pend;
    size_t pend_n;
    int prev_match; /* the last segment was a match */
} Splitter;

static int pre_tokenize_from(const RadText *t, TextMatch *m, int step, const char *s, size_t n,
                             TextPieceFn fn, void *ctx);

/* Pass a finished piece on to the next step; empty pieces vanish. */
static int emit(Splitter *sp, const char *s, size_t n)
{
    if (n == 0) return RAD_OK;
    return pre_tokenize_from(sp->t, sp->m, sp->next_step, s, n, sp->fn, sp->ctx);
}

static int flush_pending(Splitter *sp)
{
    int rc = sp->pend ? emit(sp, sp->pend, sp->pend_n) : RAD_OK;
    sp->pend = NULL;
    return rc;
}

/* One segment of the input, a match of the pattern or a gap between two. */
static int segment(Splitter *sp, const char *s, size_t n, int is_match)
{
    int rc = RAD_OK;
    switch (sp->behavior) {
    case RAD_SPLIT_ISOLATED:
        rc = emit(sp, s, n);
        break;
    case RAD_SPLIT_REMOVED:
        if (!is_match) rc = emit(sp, s, n);
        break;
    case RAD_SPLIT_MERGED_WITH_PREVIOUS:
        /* A match joins the gap before it. */
        if (is_match && !sp->prev_match && sp->pend) {
            sp->pend_n = (size_t)(s + n - sp->pend);
        } else {
            rc = flush_pending(sp);
            sp->pend = s;
            sp->pend_n = n;
        }
        break;
    case RAD_SPLIT_MERGED_WITH_NEXT:
        /* A match waits for the gap after it; two matches in a row part. */
        if (is_match) {
            rc = flush_pending(sp);
            sp->pend = s;
            sp->pend_n = n;
        } else if (sp->pend) {
            rc = emit(sp, sp->pend, (size_t)(s + n - sp->pend));
            sp->pend = NULL;
        } else {
            rc = emit(sp, s, n);
        }
        break;
    case RAD_SPLIT_CONTIGUOUS:
        /* Runs of matches, and runs of gaps, become one piece each. */
        if (is_match == sp->prev_match && sp->pend) {
            sp->pend_n = (size_t)(s + n - sp->pend);
        } else {
            rc = flush_pending(sp);
            sp->pend = s;
            sp->pend_n = n;
        }
        break;
    }
    sp->prev_match = is_match;
    return rc;
}

/* Find the next match of step `st` in s[from..n): *ms, *me; 0 when none. */
static int next_match(const RadText *t, TextMatch *m, const pcre2_code *re, const RadTokStep *st,
                      const char *s, size_t n, size_t from, size_t *ms, size_t *me, int *rc)
{
    *rc = RAD_OK;
    if (!re) {
        size_t pn = strlen(st->pattern);
        const char *hit = pn ? memmem(s + from, n - from, st->pattern, pn) : NULL;
        if (!hit) return 0;
        *ms = (size_t)(hit - s);
        *me = *ms + pn;
        return 1;
    }
    for (;;) {
        int r = t->jit ? pcre2_jit_match(re, (PCRE2_SPTR)s, n, from, 0, m->md, NULL)
                       : pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, m->md, NULL);
        if (r == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter keeps its stack on the heap */
            r = pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, m->md, NULL);
        if (r == PCRE2_ERROR_NOMATCH) return 0;
        if (r < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(r, msg, sizeof msg);
            *rc = rad_error_set(RAD_E_RANGE, "pre-tokenizer regex failed: %s", (const char *)msg);
            return 0;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
        if (ov[1] > ov[0]) {
            *ms = ov[0];
            *me = ov[1];
            return 1;
        }
        /* An empty match cuts nothing; look again one character on. */
        if (ov[0] >= n) return 0;
        from = ov[0] + 1;
        while (from < n && ((unsigned char)s[from] & 0xC0) == 0x80) from++;
    }
}

/* Apply one Split step to s[0..n). */
static int split_step(const RadText *t, TextMatch *m, int step, const char *s, size_t n, TextPieceFn fn,
                      void *ctx)
{
    const RadTokStep *st = &t->d->pre[step];
    Splitter sp = {.t = t, .m = m, .next_step = step + 1, .fn = fn, .ctx = ctx, .behavior = st->behavior};
    size_t at = 0, ms, me;
    int rc = RAD_OK, inv = st->invert != 0;
    while (rc == RAD_OK && next_match(t, m, t->re[step], st, s, n, at, &ms, &me, &rc)) {
        if (ms > at) rc = segment(&sp, s + at, ms - at, inv);
        if (rc == RAD_OK) rc = segment(&sp, s + ms, me - ms, !inv);
        at = me;
    }
    if (rc == RAD_OK && at < n) rc = segment(&sp, s + at, n - at, inv);
    if (rc == RAD_OK) rc = flush_pending(&sp);
    return rc;
}

/* ByteLevel as a pre-tokenizer: the optional leading space, then the GPT-2
** split when use_regex.  The byte mapping itself happens in the model.
** ByteLevel is the last step, so its pieces go straight to the model, which
** never touches m->prefixed: the copy stays put while they are in use. */
static int bytelevel_step(const RadText *t, TextMatch *m, int step, const char *s, size_t n, TextPieceFn fn,
                          void *ctx)
{
    const RadTokStep *st = &t->d->pre[step];
    if (st->add_prefix_space && s[0] != ' ') {
        m->prefixed.n = 0;
        if (text_buf_put(&m->prefixed, " ", 1) || text_buf_put(&m->prefixed, s, n)) return RAD_E_NOMEM;
        s = m->prefixed.p;
        n++;
    }
    if (!st->use_regex) return fn(ctx, s, n);
    size_t at = 0, ms, me;
    int rc = RAD_OK;
    while (rc == RAD_OK && next_match(t, m, t->gpt2, st, s, n, at, &ms, &me, &rc)) {
        if (ms > at) rc = fn(ctx, s + at, ms - at);
        if (rc == RAD_OK) rc = fn(ctx, s + ms, me - ms);
        at = me;
    }
    if (rc == RAD_OK && at < n) rc = fn(ctx, s + at, n - at);
    return rc;
}

static int pre_tokenize_from(const RadText *t, TextMatch *m, int step, const char *s, size_t n,
                             TextPieceFn fn, void *ctx)
{
    if (step >= t->d->n_pre) return fn(ctx, s, n);
    switch (t->d->pre[step].kind) {
    case RAD_TOK_PRE_SPLIT_REGEX:
    case RAD_TOK_PRE_SPLIT_STRING:
        return split_step(t, m, step, s, n, fn, ctx);
    case RAD_TOK_PRE_BYTELEVEL:
        return bytelevel_step(t, m, step, s, n, fn, ctx);
    default:
        return pre_tokenize_from(t, m, step + 1, s, n, fn, ctx);
    }
}

int text_pre_tokenize(const RadText *t, TextMatch *m, const char *s, size_t n, TextPieceFn fn, void *ctx)
{
    if (n == 0) return RAD_OK;
    return pre_tokenize_from(t, m, 0, s, n, fn, ctx);
}
