/*
** text_decode.c: ids back to text, whole (rad_text_decode) or one token at
** a time (RadDetok).
**
** Every token, added tokens included, goes through the decoder, as in HF:
**
**   ByteLevel  each token's characters map back to the bytes they stand for;
**              a token with a character outside the byte alphabet (an added
**              token such as "<｜User｜>") gives its own UTF-8 bytes instead.
**              The bytes of all tokens together are then read as UTF-8 with
**              each ill-formed run as one U+FFFD.
**   SPM        "▁" becomes " "; a run of <0xNN> tokens becomes its bytes if
**              they are valid UTF-8, else one U+FFFD per byte of the run; the
**              pieces are joined and up to decode_strip_leading leading
**              spaces removed (Llama 2's Strip).
**
** RAD_DECODE_SKIP_SPECIAL drops special added tokens first.  An id outside
** the vocabulary (or one naming no token) is RAD_E_RANGE.
**
** Streaming holds back the bytes of a character that is not yet complete
** (at most three) and emits them once the next token completes it; flush
** turns what is still held into U+FFFD.  The streamed text equals the whole
** decode for every sequence whose bytes are valid UTF-8.  Where they are not,
** streaming replaces each ill-formed run as it is found, while HF's
** ByteFallback replaces every byte of a <0xNN> run containing an error,
** including complete characters the stream has already emitted.
**
** RadDetok.n_emitted carries the leading-space rule: the number of leading
** spaces stripped so far, or -1 once anything else has been emitted.
*/
#include "text_internal.h"

#include <stdlib.h>
#include <string.h>

/* Where decoded bytes go: a growable buffer, or the caller's fixed one. */
typedef struct Sink {
    TextBuf *grow; /* non-NULL: grow this */
    char *p;       /* else write here, at most cap bytes */
    size_t n, cap;
    int full;         /* a fixed sink ran out of room */
    int *strip_state; /* see n_emitted above */
    int strip_max;
} Sink;

static void sink_raw(Sink *k, const void *src, size_t n)
{
    if (k->grow) {
        if (text_buf_put(k->grow, src, n)) k->full = 1;
        return;
    }
    if (k->n + n > k->cap) {
        k->full = 1;
        return;
    }
    memcpy(k->p + k->n, src, n);
    k->n += n;
}

/* Emit text, applying the leading-space strip. */
static void sink_put(Sink *k, const char *s, size_t n)
{
    while (n > 0 && *k->strip_state >= 0 && *k->strip_state < k->strip_max && s[0] == ' ') {
        (*k->strip_state)++;
        s++;
        n--;
    }
    if (n == 0) return;
    *k->strip_state = -1;
    sink_raw(k, s, n);
}

static void sink_replacement(Sink *k)
{
    sink_put(k, "\xEF\xBF\xBD", 3);
}

/* Emit the complete characters of b[0..n) (ill-formed runs as U+FFFD) and
** return how many bytes were used.  Unless `final`, a valid but unfinished
** character at the end is left over for the next call. */
static size_t drain_utf8(Sink *k, const unsigned char *b, size_t n, int final)
{
    size_t i = 0, run = 0;
    while (i < n) {
        uint32_t cp;
        int len = text_utf8_next(b + i, n - i, &cp);
        if (len) {
            i += (size_t)len;
            run += (size_t)len;
            continue;
        }
        size_t bad = text_utf8_bad_run(b + i, n - i);
        if (!final && i + bad == n && b[i] >= 0xC2 && b[i] <= 0xF4) break; /* may yet complete */
        sink_put(k, (const char *)b + i - run, run);
        run = 0;
        sink_replacement(k);
        i += bad;
    }
    sink_put(k, (const char *)b + i - run, run);
    return i;
}

/* The byte a "<0xNN>" token stands for, or -1.  HF parses the two characters
** with Rust's from_str_radix, which also takes a leading '+'. */
static int byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        if (i == 3 && c == '+') continue;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A byte-level token as bytes, appended to b. */
static int bytelevel_bytes(const RadText *t, int32_t id, TextBuf *b)
{
    size_t n, i = 0, start = b->n;
    const unsigned char *s = (const unsigned char *)text_token_text(t, id, &n);
    if (text_buf_reserve(b, n + 1)) return RAD_E_NOMEM;
    while (i < n) {
        uint32_t cp = 0;
        int k = text_utf8_next(s + i, n - i, &cp);
        if (!k || cp >= 512 || t->char_byte[cp] < 0) {
            /* Outside the alphabet: the token's own bytes, all of them. */
            b->n = start;
            return text_buf_put(b, s, n);
        }
        b->p[b->n++] = (char)t->char_byte[cp];
        i += (size_t)k;
    }
    return RAD_OK;
}

/* An SPM token's text with "▁" as " ". */
static void spm_text(Sink *k, const char *s, size_t n)
{
    const char *end = s + n;
    while (s < end) {
        const char *hit = memmem(s, (size_t)(end - s), "\xE2\x96\x81", 3);
        if (!hit) break;
        sink_put(k, s, (size_t)(hit - s));
        sink_put(k, " ", 1);
        s = hit + 3;
    }
    sink_put(k, s, (size_t)(end - s));
}

/* A run of byte tokens ends: its bytes if all valid UTF-8, else one U+FFFD
** per byte (HF's ByteFallback). */
static void flush_byte_run(Sink *k, TextBuf *bytes)
{
    size_t at = 0;
    uint32_t cp;
    int len;
    while (at < bytes->n && (len = text_utf8_next((unsigned char *)bytes->p + at, bytes->n - at, &cp)))
        at += (size_t)len;
    if (at == bytes->n)
        sink_put(k, bytes->p, bytes->n);
    else
        for (size_t j = 0; j < bytes->n; j++) sink_replacement(k);
    bytes->n = 0;
}

static int check_id(const RadText *t, int32_t id)
{
    if (id < 0 || id >= t->d->n_vocab || !t->d->token[id])
        return rad_error_set(RAD_E_RANGE, "token id %d is outside the vocabulary (%d tokens)", (int)id,
                             t->d->n_vocab);
    return RAD_OK;
}

/* ---------------------------------------------------------------- whole */

int rad_text_decode(const RadText *t, const int32_t *ids, int n, int flags, char **out, size_t *len)
{
    if (!t || !out || (!ids && n > 0) || n < 0)
        return rad_error_set(RAD_E_ARG, "rad_text_decode: bad argument");
    *out = NULL;
    if (len) *len = 0;
    for (int i = 0; i < n; i++)
        if (check_id(t, ids[i])) return RAD_E_RANGE;

    TextBuf result = {0}, bytes = {0};
    int strip = 0, rc = RAD_OK;
    Sink k = {.grow = &result, .strip_state = &strip, .strip_max = t->d->decode_strip_leading};
    int skip = (flags & RAD_DECODE_SKIP_SPECIAL) != 0;
    for (int i = 0; i < n && rc == RAD_OK; i++) {
        int32_t id = ids[i];
        if (skip && t->is_special[id]) continue;
        if (t->d->decoder == RAD_TOK_DECODE_BYTELEVEL) {
            rc = bytelevel_bytes(t, id, &bytes);
            continue;
        }
        size_t tn;
        const char *tx = text_token_text(t, id, &tn);
        int b = byte_token(tx, tn);
        if (b >= 0) {
            char c = (char)b;
            rc = text_buf_put(&bytes, &c, 1);
            continue;
        }
        if (bytes.n) flush_byte_run(&k, &bytes);
        spm_text(&k, tx, tn);
    }
    if (rc == RAD_OK && bytes.n) {
        if (t->d->decoder == RAD_TOK_DECODE_BYTELEVEL)
            drain_utf8(&k, (unsigned char *)bytes.p, bytes.n, 1);
        else
            flush_byte_run(&k, &bytes);
    }
    if (rc == RAD_OK && k.full) rc = RAD_E_NOMEM;
    if (rc == RAD_OK && !result.p) rc = text_buf_put(&result, "", 0);
    free(bytes.p);
    if (rc != RAD_OK) {
        free(result.p);
        return rad_error_set(rc, "rad_text_decode: out of memory");
    }
    *out = result.p;
    if (len) *len = result.n;
    return RAD_OK;
}

/* ---------------------------------------------------------------- streaming */

void rad_detok_init(RadDetok *d, const RadText *t, int flags)
{
    memset(d, 0, sizeof *d);
    d->t = t;
    d->flags = flags;
}

size_t rad_detok_max_bytes(const RadText *t)
{
    /* Every byte of the token and of what was pending could turn into a
    ** three-byte U+FFFD. */
    return 3 * (t->max_token_bytes + sizeof((RadDetok *)0)->pending) + 1;
}

int rad_detok_push(RadDetok *d, int32_t id, char *out, size_t cap, size_t *written)
{
    const RadText *t = d->t;
    *written = 0;
    if (check_id(t, id)) return RAD_E_RANGE;
    if ((d->flags & RAD_DECODE_SKIP_SPECIAL) && t->is_special[id]) return RAD_OK;

    RadDetok saved = *d;
    Sink k = {.p = out, .cap = cap, .strip_state = &d->n_emitted, .strip_max = t->d->decode_strip_leading};
    TextBuf bytes = {0};
    int rc = RAD_OK, b = -1;

    size_t tn;
    const char *tx = text_token_text(t, id, &tn);
    if (t->d->decoder == RAD_TOK_DECODE_SPM) b = byte_token(tx, tn);
    if (t->d->decoder == RAD_TOK_DECODE_BYTELEVEL || b >= 0) {
        /* Bytes join what is pending; complete characters go out. */
        rc = text_buf_put(&bytes, d->pending, (size_t)d->n_pending);
        if (rc == RAD_OK) {
            if (b >= 0) {
                char c = (char)b;
                rc = text_buf_put(&bytes, &c, 1);
            } else {
                rc = bytelevel_bytes(t, id, &bytes);
            }
        }
        if (rc == RAD_OK) {
            size_t used = drain_utf8(&k, (unsigned char *)bytes.p, bytes.n, 0);
            d->n_pending = (int)(bytes.n - used);
            memcpy(d->pending, bytes.p + used, (size_t)d->n_pending);
        }
    } else {
        /* A text token ends any byte run: what is pending cannot complete. */
        for (int i = 0; i < d->n_pending; i++) sink_replacement(&k);
        d->n_pending = 0;
        spm_text(&k, tx, tn);
    }
    free(bytes.p);
    if (rc == RAD_OK && k.full) {
        *d = saved;
        return rad_error_set(
            RAD_E_ARG, "rad_detok_push: output buffer of %zu bytes is too small (rad_detok_max_bytes)", cap);
    }
    if (rc != RAD_OK) {
        *d = saved;
        return rad_error_set(rc, "rad_detok_push: out of memory");
    }
    *written = k.n;
    return RAD_OK;
}

int rad_detok_flush(RadDetok *d, char *out, size_t cap, size_t *written)
{
    RadDetok saved = *d;
    Sink k = {.p = out, .cap = cap, .strip_state = &d->n_emitted, .strip_max = d->t->d->decode_strip_leading};
    *written = 0;
    if (d->t->d->decoder == RAD_TOK_DECODE_BYTELEVEL)
        drain_utf8(&k, d->pending, (size_t)d->n_pending, 1);
    else
        for (int i = 0; i < d->n_pending; i++) sink_replacement(&k);
    d->n_pending = 0;
    if (k.full) {
        *d = saved;
        return rad_error_set(RAD_E_ARG, "rad_detok_flush: output buffer of %zu bytes is too small", cap);
    }
    *written = k.n;
    return RAD_OK;
}
