/*
** text_encode.c: rad_text_encode, text to ids, in HF tokenizers' order.
**
**   1. Invalid UTF-8 becomes U+FFFD (text_utf8.c), so what follows sees
**      valid text.
**   2. Added tokens whose `normalized` is false are cut out of the raw text:
**      leftmost-longest matches, where a rejected match (single_word not at
**      a word boundary, or a special token when RAD_ENCODE_PARSE_SPECIAL is
**      off) still consumes its bytes, as HF's non-overlapping search does;
**      lstrip/rstrip widen an accepted match over neighbouring white space.
**   3. Each remaining piece is normalized on its own (so Llama 2's Prepend
**      adds "▁" to every piece between added tokens), then added tokens
**      with `normalized` true are cut out of the normalized piece.
**   4. What is left goes through the pre-tokenizer, and each pre-token
**      through the BPE model (text_bpe.c).  The pre-tokenizer's regexes run
**      under the limits of base/rad_limits.h, including a CPU-time budget
**      for the whole call, started here (text_norm.c checks it).
**   5. With RAD_ENCODE_ADD_SPECIAL the post-processor's BOS/EOS go around it
**      all, also around an empty text.
**
** Without RAD_ENCODE_PARSE_SPECIAL, special-token strings in the text are
** plain text, as HF's encode_special_tokens = True makes them; added tokens
** that are not special are still recognised, as there.
**
** rad_text_encode_spans parses special tokens everywhere but inside the
** spans it is given: a rendered chat prompt whose markup is made of special
** tokens, around the user's words, which must never become control tokens
** (a pasted document that holds "<|im_start|>" stays text).
*/
#include "text_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The working memory of an encode call, kept in RadText.spare between
** calls so the word cache stays warm and nothing is reallocated. */
struct TextScratch {
    TextBpe *bpe;
    TextMatch match;
    TextBuf norm; /* the normalized form of the current piece */
};

/* Everything one encode call works with. */
typedef struct Enc {
    const RadText *t;
    int parse_special;
    const char *base;           /* the text being encoded (the spans' offsets are into it) */
    size_t base_n;
    const RadTextSpan *plain;   /* spans where special tokens are text, sorted; NULL: none */
    int n_plain;
    int piece_plain;            /* the normalized piece being split came from a plain span */
    TextIds out;
    TextBpe *bpe;
    TextMatch *match;
    TextBuf *norm;
} Enc;

void text_scratch_free(TextScratch *s)
{
    if (!s) return;
    text_bpe_free(s->bpe);
    text_match_free(&s->match);
    free(s->norm.p);
    free(s);
}

/* Take the spare scratch, or make one; NULL when out of memory. */
static TextScratch *scratch_take(const RadText *t)
{
    TextScratch *s = atomic_exchange(&((RadText *)t)->spare, NULL);
    if (s) return s;
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->bpe = text_bpe_new();
    if (!s->bpe || text_match_init(&s->match) != RAD_OK) {
        text_scratch_free(s);
        return NULL;
    }
    return s;
}

/* Leave the scratch for the next call, minus any outsized buffers; if
** another call left one meanwhile, one of the two goes. */
static void scratch_give(const RadText *t, TextScratch *s)
{
    text_bpe_trim(s->bpe);
    if (s->norm.cap > 65536) {
        free(s->norm.p);
        s->norm = (TextBuf){0};
    }
    if (s->match.prefixed.cap > 65536) {
        free(s->match.prefixed.p);
        s->match.prefixed = (TextBuf){0};
    }
    text_scratch_free(atomic_exchange(&((RadText *)t)->spare, s));
}

/* The code point of the character that ends at s[end] (exclusive). */
static uint32_t char_before(const char *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    uint32_t cp = 0xFFFD;
    text_utf8_next((const unsigned char *)s + i, end - i, &cp);
    return cp;
}

static size_t char_at(const char *s, size_t n, size_t at, uint32_t *cp)
{
    int k = text_utf8_next((const unsigned char *)s + at, n - at, cp);
    return k ? (size_t)k : 1;
}

/* The longest added token of trie `tr` starting at s[at]; its index into
** RadTokenizer.added, or -1.  *len receives its byte length. */
static int32_t longest_at(const TextTrie *tr, const char *s, size_t n, size_t at, size_t *len)
{
    int32_t node = 0, best = -1;
    for (size_t i = at; i < n; i++) {
        node = text_trie_step(tr, node, (unsigned char)s[i]);
        if (node < 0) break;
        if (tr->term[node] >= 0) {
            best = tr->term[node];
            *len = i + 1 - at;
        }
    }
    return best;
}

typedef int (*PieceFn)(Enc *e, const char *s, size_t n);

/* Is a special-token match at s[start..stop) plain text: inside one of the
** caller's plain spans (or, in a normalized piece, anywhere in a piece cut
** from one, since normalizing moved its bytes)? */
static int special_is_text(const Enc *e, const char *s, size_t start, size_t stop)
{
    if (!e->plain) return 0;
    uintptr_t p = (uintptr_t)s, lo = (uintptr_t)e->base;
    if (p < lo || p > lo + e->base_n) return e->piece_plain;
    size_t a = (size_t)(p - lo) + start, b = (size_t)(p - lo) + stop;
    for (int i = 0; i < e->n_plain; i++)
        if (a < e->plain[i].off + e->plain[i].len && b > e->plain[i].off) return 1;
    return 0;
}

/* Cut the added tokens of `tr` out of s[0..n): pieces between them go to
** `piece`, the tokens' ids to the output. */
static int split_added(Enc *e, const TextTrie *tr, const char *s, size_t n, PieceFn piece)
{
    const RadTokenizer *d = e->t->d;
    size_t done = 0, at = 0;
    int rc = RAD_OK;
    while (at < n && rc == RAD_OK) {
        size_t len = 0;
        int32_t k = tr->first[(unsigned char)s[at]] ? longest_at(tr, s, n, at, &len) : -1;
        if (k < 0) {
            at++;
            continue;
        }
        const RadTokAdded *a = &d->added[k];
        size_t start = at, stop = at + len;
        uint32_t cp;
        at = stop;
        if (a->special && (!e->parse_special || special_is_text(e, s, start, stop))) continue;
        if (a->single_word) {
            int word_before = start > 0 && text_is_word(char_before(s, start));
            int word_after = stop < n && (char_at(s, n, stop, &cp), text_is_word(cp));
            if (word_before || word_after) continue;
        }
        /* lstrip reaches back over white space, but not into the previous token. */
        while (a->lstrip && start > done && text_is_space(char_before(s, start))) {
            start--;
            while (start > done && ((unsigned char)s[start] & 0xC0) == 0x80) start--;
        }
        if (a->rstrip) {
            while (stop < n) {
                size_t k2 = char_at(s, n, stop, &cp);
                if (!text_is_space(cp)) break;
                stop += k2;
            }
            at = stop;
        }
        if (start > done) rc = piece(e, s + done, start - done);
        if (rc == RAD_OK) rc = text_ids_push(&e->out, a->id);
        done = stop;
    }
    if (rc == RAD_OK && done < n) rc = piece(e, s + done, n - done);
    return rc;
}

/* A pre-token, on its way to the model. */
static int model_piece(void *ctx, const char *s, size_t n)
{
    Enc *e = ctx;
    return text_bpe_word(e->t, e->bpe, s, n, &e->out);
}

/* A piece of normalized text free of added tokens. */
static int pre_tokenize_piece(Enc *e, const char *s, size_t n)
{
    return text_pre_tokenize(e->t, e->match, s, n, model_piece, e);
}

/* A piece of raw text between raw added tokens: normalize it, then cut the
** normalized added tokens out of it. */
static int raw_piece(Enc *e, const char *s, size_t n)
{
    const RadText *t = e->t;
    if (e->plain) e->piece_plain = special_is_text(e, s, 0, n ? n : 1);
    if (t->d->n_norm > 0) {
        int rc = text_normalize(t, s, n, e->norm);
        if (rc) return rc;
        s = e->norm->p;
        n = e->norm->n;
    }
    if (t->norm.n_nodes > 1) return split_added(e, &t->norm, s, n, pre_tokenize_piece);
    return pre_tokenize_piece(e, s, n);
}

static int encode(const RadText *t, const char *text, size_t len, int flags, const RadTextSpan *plain, int n_plain,
                  int32_t **ids, int *n)
{
    if (!t || !ids || !n || (!text && len))
        return rad_error_set(RAD_E_ARG, "rad_text_encode: missing argument");
    *ids = NULL;
    *n = 0;
    if (len > (size_t)INT_MAX)
        return rad_error_set(RAD_E_RANGE, "rad_text_encode: text of %zu bytes is too long", len);

    int nomem = 0;
    size_t clean_n;
    char *clean = text_utf8_sanitize(text ? text : "", len, &clean_n, &nomem);
    if (nomem) return rad_error_set(RAD_E_NOMEM, "rad_text_encode: out of memory");
    const char *s = clean ? clean : text;

    Enc e = {.t = t, .parse_special = (flags & RAD_ENCODE_PARSE_SPECIAL) != 0, .base = s, .base_n = clean_n,
             .plain = plain, .n_plain = n_plain};
    int rc = RAD_OK;
    TextScratch *sc = scratch_take(t);
    if (sc) {
        e.bpe = sc->bpe;
        e.match = &sc->match;
        e.norm = &sc->norm;
        text_match_start(e.match, clean_n);
    } else {
        rc = RAD_E_NOMEM;
    }
    if (rc == RAD_OK && (flags & RAD_ENCODE_ADD_SPECIAL) && t->d->add_bos)
        rc = text_ids_push(&e.out, t->d->bos_id);
    if (rc == RAD_OK && clean_n > 0) {
        if (t->raw.n_nodes > 1)
            rc = split_added(&e, &t->raw, s, clean_n, raw_piece);
        else
            rc = raw_piece(&e, s, clean_n);
    }
    if (rc == RAD_OK && (flags & RAD_ENCODE_ADD_SPECIAL) && t->d->add_eos)
        rc = text_ids_push(&e.out, t->d->eos_id);
    if (rc == RAD_OK && e.out.n > (size_t)INT_MAX)
        rc = rad_error_set(RAD_E_RANGE, "rad_text_encode: too many tokens");
    /* An empty result is still a pointer the caller can free. */
    if (rc == RAD_OK && !e.out.v && !(e.out.v = malloc(sizeof *e.out.v))) rc = RAD_E_NOMEM;

    if (sc) scratch_give(t, sc);
    free(clean);
    if (rc != RAD_OK) {
        if (rc == RAD_E_NOMEM) rad_error_set(rc, "rad_text_encode: out of memory");
        free(e.out.v);
        return rc;
    }
    *ids = e.out.v;
    *n = (int)e.out.n;
    return RAD_OK;
}

int rad_text_encode(const RadText *t, const char *text, size_t len, int flags, int32_t **ids, int *n)
{
    return encode(t, text, len, flags, NULL, 0, ids, n);
}

int rad_text_encode_spans(const RadText *t, const char *text, size_t len, int flags, const RadTextSpan *plain,
                          int n_plain, int32_t **ids, int *n)
{
    if (!plain || n_plain <= 0) return encode(t, text, len, flags, NULL, 0, ids, n);
    if (!t || !ids || !n || !text) return rad_error_set(RAD_E_ARG, "rad_text_encode_spans: missing argument");
    for (int i = 0; i < n_plain; i++)
        if (plain[i].off > len || plain[i].len > len - plain[i].off)
            return rad_error_set(RAD_E_ARG, "rad_text_encode_spans: span %d is outside the text", i);
    int nomem = 0;
    size_t clean_n;
    char *clean = text_utf8_sanitize(text, len, &clean_n, &nomem);
    if (nomem) return rad_error_set(RAD_E_NOMEM, "rad_text_encode_spans: out of memory");
    if (!clean) return encode(t, text, len, flags, plain, n_plain, ids, n);
    free(clean);
    /* Ill-formed bytes become U+FFFD, which moves every offset after them:
    ** sanitize the text piece by piece between span edges (the edges are
    ** character boundaries of the markup around them, so the pieces give
    ** the same characters as the whole) and place the spans in the result. */
    size_t at = 0, from = 0;
    char *joined = malloc(len * 3 + 1);
    RadTextSpan *moved = malloc((size_t)n_plain * sizeof *moved);
    if (!joined || !moved) {
        free(joined);
        free(moved);
        return rad_error_set(RAD_E_NOMEM, "rad_text_encode_spans: out of memory");
    }
    /* edges[2i] is span i's start, edges[2i+1] its end; the pieces run from edge to edge */
    for (int k = 0; k <= 2 * n_plain && !nomem; k++) {
        size_t to = k == 2 * n_plain ? len : plain[k / 2].off + (k % 2 ? plain[k / 2].len : 0);
        if (to < from) to = from;
        size_t piece_n = to - from;
        char *piece = piece_n ? text_utf8_sanitize(text + from, piece_n, &piece_n, &nomem) : NULL;
        if (nomem) break;
        memcpy(joined + at, piece ? piece : text + from, piece_n);
        free(piece);
        at += piece_n;
        from = to;
        if (k < 2 * n_plain) {
            if (k % 2 == 0) moved[k / 2].off = at;
            else moved[k / 2].len = at - moved[k / 2].off;
        }
    }
    int rc = nomem ? rad_error_set(RAD_E_NOMEM, "rad_text_encode_spans: out of memory")
                   : encode(t, joined, at, flags, moved, n_plain, ids, n);
    free(joined);
    free(moved);
    return rc;
}
