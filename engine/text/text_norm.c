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
**
** Patterns come from files, so they are not trusted.  Compiling checks they
** are UTF-8 and refuses \C, which could end a match inside a character.
** Subjects are not checked at each match (PCRE2 would scan the whole
** subject every call): they are valid by construction, since encode
** replaces ill-formed input with U+FFFD and every string the pipeline
** inserts (normalizer arguments, added tokens, Split strings) was checked
** as UTF-8 when the tokenizer was loaded, and matches end on character
** boundaries.  Matching is bounded (base/rad_limits.h, docs/LIMITS.md):
** PCRE2's match, depth and heap limits bound the work at one start
** position; an offset limit keeps each PCRE2 call to a window of start
** positions, and between calls the encode's CPU-time budget is checked,
** which bounds a pattern that is slow at every position of a long text.
*/
#include "text_internal.h"

#include "rad_limits.h"

#include <stdio.h>
#include <time.h>
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
    size_t len = strlen(pattern);
    if (len > RAD_LIMIT_REGEX_PATTERN_BYTES) {
        rad_error_set(RAD_E_UNSUPPORTED,
                      "%s: the regex is %zu bytes, past RAD_LIMIT_REGEX_PATTERN_BYTES (%d): the file is "
                      "damaged or hostile (docs/LIMITS.md)",
                      what, len, RAD_LIMIT_REGEX_PATTERN_BYTES);
        return NULL;
    }
    char *rewritten = rewrite_spaces(pattern);
    if (!rewritten) {
        rad_error_set(RAD_E_NOMEM, "out of memory compiling %s", what);
        return NULL;
    }
    int err;
    PCRE2_SIZE at;
    /* No PCRE2_NO_UTF_CHECK: the pattern is a file's (see the file comment).
    ** PCRE2_USE_OFFSET_LIMIT: the search runs in windows (regex_find). */
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)rewritten, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C | PCRE2_USE_OFFSET_LIMIT,
                                   &err, &at, NULL);
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

/* ------------------------------------------------------------ bounds */

/* Monotonic and this thread's CPU clocks, in nanoseconds (0 when the clock
** cannot be read: the budget is then not enforced rather than always met). */
static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The clocks are looked at every this many PCRE2 calls (a call of a real
** pattern takes tens of nanoseconds; reading the monotonic clock, about
** twenty), and after every call that searched a whole window. */
#define CLOCK_EVERY 16
/* The first window of a search, in start positions; each window that finds
** nothing doubles the next, up to RAD_LIMIT_REGEX_WINDOW.  Small first, so
** a pattern that is slow at every position is caught early; growing, so a
** pattern whose next match is far away is not searched for again and again
** (PCRE2's start-of-match scan runs past the window to the next candidate). */
#define WINDOW_FIRST 64

/* RAD_E_UNSUPPORTED once this encode has spent its CPU-time budget.  The
** budget is CPU time, so a loaded machine or a stopped process does not
** refuse a text; but reading that clock is a system call, so the cheap
** monotonic clock is read first: CPU time cannot pass the deadline before
** as much wall time has passed. */
static int check_budget(TextMatch *m)
{
    if (++m->tried < CLOCK_EVERY || !m->cpu_deadline) return RAD_OK;
    m->tried = 0;
    uint64_t wall = clock_ns(CLOCK_MONOTONIC);
    if (wall < m->wall_next) return RAD_OK;
    uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (cpu > m->cpu_deadline) return RAD_E_UNSUPPORTED;
    m->wall_next = wall + (m->cpu_deadline - cpu);
    return RAD_OK;
}

int text_match_init(TextMatch *m)
{
    m->md = pcre2_match_data_create(1, NULL);
    m->mc = pcre2_match_context_create(NULL);
    if (!m->md || !m->mc) return RAD_E_NOMEM;
    pcre2_set_match_limit(m->mc, RAD_LIMIT_REGEX_MATCH);
    pcre2_set_depth_limit(m->mc, RAD_LIMIT_REGEX_DEPTH);
    pcre2_set_heap_limit(m->mc, RAD_LIMIT_REGEX_HEAP_KIB);
    return RAD_OK;
}

void text_match_free(TextMatch *m)
{
    pcre2_match_data_free(m->md);
    pcre2_match_context_free(m->mc);
    free(m->prefixed.p);
}

void text_match_start(TextMatch *m, size_t bytes)
{
    uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    m->budget_ns = (uint64_t)RAD_LIMIT_ENCODE_BASE_MS * 1000000u + (uint64_t)bytes * RAD_LIMIT_ENCODE_NS_PER_BYTE;
    m->cpu_deadline = cpu ? cpu + m->budget_ns : 0;
    m->wall_next = clock_ns(CLOCK_MONOTONIC) + m->budget_ns;
    m->text_bytes = bytes;
    m->tried = 0;
}

static const char *source_of(const RadText *t)
{
    return t->d->source ? t->d->source : "tokenizer";
}

static int over_budget(const RadText *t, const TextMatch *m)
{
    return rad_error_set(RAD_E_UNSUPPORTED,
                         "%s: encoding %zu bytes of text went past RAD_LIMIT_ENCODE_BASE_MS + "
                         "RAD_LIMIT_ENCODE_NS_PER_BYTE (%u ms + %u ns a byte = %.1f s of CPU time): the "
                         "tokenizer's pre_tokenizer regex is too slow for this text (docs/LIMITS.md)",
                         source_of(t), m->text_bytes, RAD_LIMIT_ENCODE_BASE_MS, RAD_LIMIT_ENCODE_NS_PER_BYTE,
                         (double)m->budget_ns / 1e9);
}

/* The message for a failed match of pre_tokenizer step `step`. */
static int match_failed(const RadText *t, int step, int r)
{
    const char *src = source_of(t), *name = NULL, *unit = "";
    unsigned long value = 0;
    switch (r) {
    case PCRE2_ERROR_MATCHLIMIT:
        name = "RAD_LIMIT_REGEX_MATCH", value = RAD_LIMIT_REGEX_MATCH, unit = " steps at one position";
        break;
    case PCRE2_ERROR_DEPTHLIMIT:
        name = "RAD_LIMIT_REGEX_DEPTH", value = RAD_LIMIT_REGEX_DEPTH, unit = " nested backtracking points";
        break;
    case PCRE2_ERROR_HEAPLIMIT:
        name = "RAD_LIMIT_REGEX_HEAP_KIB", value = RAD_LIMIT_REGEX_HEAP_KIB, unit = " KiB";
        break;
    case PCRE2_ERROR_NOMEMORY:
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory matching the pre_tokenizer regex of step %d", src,
                             step);
    }
    if (name)
        return rad_error_set(RAD_E_UNSUPPORTED,
                             "%s: the pre_tokenizer regex of step %d went past %s (%lu%s) on this text: the "
                             "pattern backtracks without bound, so the tokenizer cannot encode it "
                             "(docs/LIMITS.md)",
                             src, step, name, value, unit);
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(r, msg, sizeof msg);
    return rad_error_set(RAD_E_UNSUPPORTED, "%s: the pre_tokenizer regex of step %d failed: %s", src, step,
                         (const char *)msg);
}

/* The next character boundary at or after `at`. */
static size_t char_start(const char *s, size_t n, size_t at)
{
    while (at < n && ((unsigned char)s[at] & 0xC0) == 0x80) at++;
    return at;
}

/* The leftmost non-empty match of `re` starting in s[from..n): 1 and *ms,
** *me; 0 when none; -1 with *rc set when a limit was met.  The search runs
** one window of start positions per PCRE2 call (the offset limit), which
** is the same search, since each window begins where the last found
** nothing, but gives the budget a look between windows. */
static int regex_find(const RadText *t, TextMatch *m, const pcre2_code *re, int step, const char *s, size_t n,
                      size_t from, size_t *ms, size_t *me, int *rc)
{
    size_t window = WINDOW_FIRST;
    while (from < n) {
        if (check_budget(m)) {
            *rc = over_budget(t, m);
            return -1;
        }
        size_t last = from + window; /* the last start position this call may try */
        pcre2_set_offset_limit(m->mc, last);
        int r = t->jit ? pcre2_jit_match(re, (PCRE2_SPTR)s, n, from, 0, m->md, m->mc)
                       : pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, m->md, m->mc);
        /* Out of JIT stack: the interpreter keeps its frames on the heap
        ** (under the heap limit).  PCRE2_NO_JIT, or pcre2_match would run
        ** the JIT code again. */
        if (r == PCRE2_ERROR_JIT_STACKLIMIT)
            r = pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, m->md, m->mc);
        if (r == PCRE2_ERROR_NOMATCH) {
            if (last >= n) return 0;
            from = char_start(s, n, last + 1);
            if (window < RAD_LIMIT_REGEX_WINDOW) window *= 2;
            m->tried = CLOCK_EVERY; /* a whole window: look at the clock before the next */
            continue;
        }
        if (r < 0) {
            *rc = match_failed(t, step, r);
            return -1;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
        if (ov[0] < from || ov[1] < ov[0] || ov[1] > n) {
            *rc = rad_error_set(RAD_E_UNSUPPORTED,
                                "%s: the pre_tokenizer regex of step %d reports a match outside its text",
                                source_of(t), step);
            return -1;
        }
        if (ov[1] > ov[0]) {
            *ms = ov[0];
            *me = ov[1];
            return 1;
        }
        /* An empty match cuts nothing; look again one character on. */
        from = char_start(s, n, ov[0] + 1);
    }
    return 0;
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

/* Find the next match of step `step` in s[from..n): *ms, *me; 0 when none
** (and when a limit was met, with *rc set). */
static int next_match(const RadText *t, TextMatch *m, const pcre2_code *re, int step, const char *s, size_t n,
                      size_t from, size_t *ms, size_t *me, int *rc)
{
    *rc = RAD_OK;
    if (!re) {
        const RadTokStep *st = &t->d->pre[step];
        size_t pn = strlen(st->pattern);
        const char *hit = pn && from < n ? memmem(s + from, n - from, st->pattern, pn) : NULL;
        if (!hit) return 0;
        *ms = (size_t)(hit - s);
        *me = *ms + pn;
        return 1;
    }
    return regex_find(t, m, re, step, s, n, from, ms, me, rc) == 1;
}

/* Apply one Split step to s[0..n). */
static int split_step(const RadText *t, TextMatch *m, int step, const char *s, size_t n, TextPieceFn fn,
                      void *ctx)
{
    const RadTokStep *st = &t->d->pre[step];
    Splitter sp = {.t = t, .m = m, .next_step = step + 1, .fn = fn, .ctx = ctx, .behavior = st->behavior};
    size_t at = 0, ms, me;
    int rc = RAD_OK, inv = st->invert != 0;
    while (rc == RAD_OK && next_match(t, m, t->re[step], step, s, n, at, &ms, &me, &rc)) {
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
    while (rc == RAD_OK && next_match(t, m, t->gpt2, step, s, n, at, &ms, &me, &rc)) {
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
