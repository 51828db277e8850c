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
**      through the BPE model (text_bpe.c).
**   5. With RAD_ENCODE_ADD_SPECIAL the post-processor's BOS/EOS go around it
**      all, also around an empty text.
**
** Without RAD_ENCODE_PARSE_SPECIAL, special-token strings in the text are
** plain text, as HF's encode_special_tokens = True makes them; added tokens
** that are not special are still recognised, as there.
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
    TextIds out;
    TextBpe *bpe;
    TextMatch *match;
    TextBuf *norm;
} Enc;

void text_scratch_free(TextScratch *s)
{
    if (!s) return;
    text_bpe_free(s->bpe);
    pcre2_match_data_free(s->match.md);
    free(s->match.prefixed.p);
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
    s->match.md = pcre2_match_data_create(1, NULL);
    if (!s->bpe || !s->match.md) {
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
        if (a->special && !e->parse_special) continue;
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
    if (t->d->n_norm > 0) {
        int rc = text_normalize(t, s, n, e->norm);
        if (rc) return rc;
        s = e->norm->p;
        n = e->norm->n;
    }
    if (t->norm.n_nodes > 1) return split_added(e, &t->norm, s, n, pre_tokenize_piece);
    return pre_tokenize_piece(e, s, n);
}

int rad_text_encode(const RadText *t, const char *text, size_t len, int flags, int32_t **ids, int *n)
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

    Enc e = {.t = t, .parse_special = (flags & RAD_ENCODE_PARSE_SPECIAL) != 0};
    int rc = RAD_OK;
    TextScratch *sc = scratch_take(t);
    if (sc) {
        e.bpe = sc->bpe;
        e.match = &sc->match;
        e.norm = &sc->norm;
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
