/*
** tokenizer_store.c: the compact binary form of a RadTokenizer, the blob
** "tokenizer.bin" inside a .rad container.
**
** tokenizer.json takes a second to parse for a 262k vocabulary; this form
** takes milliseconds, because it is laid out the way the runtime wants it:
** one pool of NUL-terminated strings copied with a single memcpy, fixed-size
** records pointing into it, and the merges already resolved to token ids.
** Loading makes one allocation for the pool and a few for the arrays; it
** never parses, hashes or searches.
**
** The blob comes from a file, so load treats it as hostile: every count is
** bounded, every section must lie inside the buffer (sizes computed in 64
** bits), every string must end with its NUL inside the pool, every id must
** name a token, the sections must tile the blob exactly, and the strings
** used as text (patterns, arguments, added tokens, the chat template) must
** be UTF-8, and the chat template within RAD_LIMIT_CHAT_TEMPLATE_BYTES.  A blob that fails any check is refused with a one-line message
** naming the field; none is read past.
**
** Layout (all integers little-endian; docs/TOKENIZER.md has the table):
**
**   header   96 bytes: magic "RADTOKB1", version, counts, ids, flags,
**            the chat template's string, the pool size
**   tokens   n_vocab x {u32 offset, u32 length}   (length ~0 = no token)
**   merges   n_merges x {i32 left, i32 right, i32 merged}   token ids
**   scores   n_vocab x f32                        (only when flag SCORES)
**   added    n_added x {i32 id, u32 flags, u32 offset, u32 length}
**   steps    (n_norm + n_pre) x {i32 kind, i32 behavior, u32 flags,
**            u32 pattern offset, u32 pattern length, u32 arg offset, u32 arg length}
**   pool     pool_bytes of strings, each followed by a NUL
*/
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STORE_MAGIC   "RADTOKB1"
#define STORE_VERSION 1u
#define HEADER_BYTES  96u
#define TOKEN_BYTES   8u
#define MERGE_BYTES   12u
#define ADDED_BYTES   16u
#define STEP_BYTES    28u
#define NO_STRING     0xFFFFFFFFu

/* Bounds on counts: generous for any real tokenizer, small enough that no
** product of them overflows 64 bits or asks for an absurd allocation. */
#define MAX_VOCAB  (1 << 24)
#define MAX_MERGES (1 << 26)
#define MAX_ADDED  (1 << 20)
#define MAX_STEPS  64

enum {
    F_BYTE_FALLBACK = 1,
    F_FUSE_UNK = 2,
    F_IGNORE_MERGES = 4,
    F_ADD_BOS = 8,
    F_ADD_EOS = 16,
    F_SCORES = 32,
};
enum { A_SPECIAL = 1, A_LSTRIP = 2, A_RSTRIP = 4, A_SINGLE_WORD = 8, A_NORMALIZED = 16 };
enum { S_INVERT = 1, S_PREFIX_SPACE = 2, S_USE_REGEX = 4 };

/* Header field offsets. */
enum {
    H_MAGIC = 0,
    H_VERSION = 8,
    H_MODEL = 12,
    H_DECODER = 16,
    H_N_VOCAB = 20,
    H_N_MERGES = 24,
    H_N_ADDED = 28,
    H_N_NORM = 32,
    H_N_PRE = 36,
    H_UNK = 40,
    H_BOS = 44,
    H_EOS = 48,
    H_PAD = 52,
    H_FLAGS = 56,
    H_STRIP = 60,
    H_TEMPLATE_OFF = 64,
    H_TEMPLATE_LEN = 68,
    H_POOL_BYTES = 72, /* 76..95 reserved, zero */
};

/* ---------------------------------------------------------------- bytes */

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static int host_is_le(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* ---------------------------------------------------------------- serialize */

/* A string pool under construction. */
typedef struct Pool {
    unsigned char *p;
    size_t n, cap;
} Pool;

/* Append s (NUL-terminated) and return its offset; NO_STRING for NULL, and
** *fail set when memory or the 4 GiB limit runs out. */
static uint32_t pool_add(Pool *pl, const char *s, uint32_t *len, int *fail)
{
    if (!s) {
        *len = NO_STRING;
        return NO_STRING;
    }
    size_t n = strlen(s);
    if (pl->n + n + 1 >= NO_STRING) {
        *fail = 1;
        return NO_STRING;
    }
    if (pl->n + n + 1 > pl->cap) {
        size_t cap = pl->cap ? pl->cap : 1 << 16;
        while (cap < pl->n + n + 1) cap *= 2;
        unsigned char *q = realloc(pl->p, cap);
        if (!q) {
            *fail = 1;
            return NO_STRING;
        }
        pl->p = q;
        pl->cap = cap;
    }
    uint32_t off = (uint32_t)pl->n;
    memcpy(pl->p + pl->n, s, n + 1);
    pl->n += n + 1;
    *len = (uint32_t)n;
    return off;
}

/* Token text -> id, for data whose merges come without ids. */
typedef struct Index {
    uint32_t mask;
    int32_t *id;
} Index;

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int index_build(Index *ix, const RadTokenizer *t)
{
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)t->n_vocab) slots *= 2;
    ix->mask = slots - 1;
    ix->id = malloc(slots * sizeof *ix->id);
    if (!ix->id) return RAD_E_NOMEM;
    memset(ix->id, 0xFF, slots * sizeof *ix->id);
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (!t->token[i]) continue;
        uint32_t j = hash_str(t->token[i]) & ix->mask;
        while (ix->id[j] >= 0 && strcmp(t->token[ix->id[j]], t->token[i]) != 0) j = (j + 1) & ix->mask;
        if (ix->id[j] < 0) ix->id[j] = i;
    }
    return RAD_OK;
}

static int32_t index_find(const Index *ix, const RadTokenizer *t, const char *s)
{
    for (uint32_t j = hash_str(s) & ix->mask; ix->id[j] >= 0; j = (j + 1) & ix->mask)
        if (strcmp(t->token[ix->id[j]], s) == 0) return ix->id[j];
    return -1;
}

/* The ids of merge r: from merge_ids when the producer gave them (checked
** against the strings), else looked up. */
static int merge_triple(const RadTokenizer *t, const Index *ix, int r, int32_t out[3], char *joined,
                        size_t cap)
{
    const char *l = t->merge_left[r], *rt = t->merge_right[r];
    if (!l || !rt || strlen(l) + strlen(rt) >= cap)
        return rad_error_set(RAD_E_FORMAT, "tokenizer: merge %d is missing or too long to store", r);
    memcpy(joined, l, strlen(l));
    memcpy(joined + strlen(l), rt, strlen(rt) + 1);
    const char *want[3] = {l, rt, joined};
    for (int k = 0; k < 3; k++) {
        int32_t id = t->merge_ids ? t->merge_ids[3 * (size_t)r + (size_t)k] : index_find(ix, t, want[k]);
        if (id < 0 || id >= t->n_vocab || !t->token[id] || strcmp(t->token[id], want[k]) != 0)
            return rad_error_set(RAD_E_FORMAT, "tokenizer: merge %d does not name tokens of the vocabulary",
                                 r);
        out[k] = id;
    }
    return RAD_OK;
}

int rad_tokenizer_serialize(const RadTokenizer *t, void **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    if (!t || t->n_vocab <= 0 || t->n_vocab > MAX_VOCAB || t->n_merges < 0 || t->n_merges > MAX_MERGES ||
        t->n_added < 0 || t->n_added > MAX_ADDED || t->n_norm < 0 || t->n_pre < 0 ||
        t->n_norm + t->n_pre > MAX_STEPS)
        return rad_error_set(RAD_E_ARG, "rad_tokenizer_serialize: counts out of range");
    int n_steps = t->n_norm + t->n_pre, fail = 0, rc = RAD_OK;
    uint64_t fixed = HEADER_BYTES + (uint64_t)t->n_vocab * TOKEN_BYTES + (uint64_t)t->n_merges * MERGE_BYTES +
                     (t->score ? (uint64_t)t->n_vocab * 4 : 0) + (uint64_t)t->n_added * ADDED_BYTES +
                     (uint64_t)n_steps * STEP_BYTES;
    unsigned char *fx = calloc(1, fixed), *p;
    Pool pl = {0};
    Index ix = {0, NULL};
    char joined[2048];
    uint32_t sl, so;
    if (!fx) return rad_error_set(RAD_E_NOMEM, "rad_tokenizer_serialize: out of memory");
    if (!t->merge_ids && t->n_merges > 0 && (rc = index_build(&ix, t))) goto done;

    p = fx + HEADER_BYTES;
    for (int i = 0; i < t->n_vocab; i++, p += TOKEN_BYTES) {
        so = pool_add(&pl, t->token[i], &sl, &fail);
        wr32(p, so);
        wr32(p + 4, sl);
    }
    for (int r = 0; r < t->n_merges && rc == RAD_OK; r++, p += MERGE_BYTES) {
        int32_t ids[3];
        if ((rc = merge_triple(t, &ix, r, ids, joined, sizeof joined))) break;
        for (int k = 0; k < 3; k++) wr32(p + 4 * k, (uint32_t)ids[k]);
    }
    if (rc) goto done;
    if (t->score)
        for (int i = 0; i < t->n_vocab; i++, p += 4) {
            uint32_t bits;
            memcpy(&bits, &t->score[i], 4);
            wr32(p, bits);
        }
    for (int i = 0; i < t->n_added; i++, p += ADDED_BYTES) {
        const RadTokAdded *a = &t->added[i];
        uint32_t f = (a->special ? A_SPECIAL : 0) | (a->lstrip ? A_LSTRIP : 0) | (a->rstrip ? A_RSTRIP : 0) |
                     (a->single_word ? A_SINGLE_WORD : 0) | (a->normalized ? A_NORMALIZED : 0);
        wr32(p, (uint32_t)a->id);
        wr32(p + 4, f);
        so = pool_add(&pl, a->content, &sl, &fail);
        wr32(p + 8, so);
        wr32(p + 12, sl);
    }
    for (int i = 0; i < n_steps; i++, p += STEP_BYTES) {
        const RadTokStep *st = i < t->n_norm ? &t->norm[i] : &t->pre[i - t->n_norm];
        wr32(p, (uint32_t)st->kind);
        wr32(p + 4, (uint32_t)st->behavior);
        wr32(p + 8, (st->invert ? S_INVERT : 0) | (st->add_prefix_space ? S_PREFIX_SPACE : 0) |
                        (st->use_regex ? S_USE_REGEX : 0));
        so = pool_add(&pl, st->pattern, &sl, &fail);
        wr32(p + 12, so);
        wr32(p + 16, sl);
        so = pool_add(&pl, st->arg, &sl, &fail);
        wr32(p + 20, so);
        wr32(p + 24, sl);
    }

    memcpy(fx + H_MAGIC, STORE_MAGIC, 8);
    wr32(fx + H_VERSION, STORE_VERSION);
    wr32(fx + H_MODEL, (uint32_t)t->model);
    wr32(fx + H_DECODER, (uint32_t)t->decoder);
    wr32(fx + H_N_VOCAB, (uint32_t)t->n_vocab);
    wr32(fx + H_N_MERGES, (uint32_t)t->n_merges);
    wr32(fx + H_N_ADDED, (uint32_t)t->n_added);
    wr32(fx + H_N_NORM, (uint32_t)t->n_norm);
    wr32(fx + H_N_PRE, (uint32_t)t->n_pre);
    wr32(fx + H_UNK, (uint32_t)t->unk_id);
    wr32(fx + H_BOS, (uint32_t)t->bos_id);
    wr32(fx + H_EOS, (uint32_t)t->eos_id);
    wr32(fx + H_PAD, (uint32_t)t->pad_id);
    wr32(fx + H_FLAGS, (t->byte_fallback ? F_BYTE_FALLBACK : 0) | (t->fuse_unk ? F_FUSE_UNK : 0) |
                           (t->ignore_merges ? F_IGNORE_MERGES : 0) | (t->add_bos ? F_ADD_BOS : 0) |
                           (t->add_eos ? F_ADD_EOS : 0) | (t->score ? F_SCORES : 0));
    wr32(fx + H_STRIP, (uint32_t)t->decode_strip_leading);
    so = pool_add(&pl, t->chat_template, &sl, &fail);
    wr32(fx + H_TEMPLATE_OFF, so);
    wr32(fx + H_TEMPLATE_LEN, sl);
    if (fail) {
        rc = rad_error_set(RAD_E_NOMEM, "rad_tokenizer_serialize: out of memory (or strings past 4 GiB)");
        goto done;
    }
    wr32(fx + H_POOL_BYTES, (uint32_t)pl.n);

    unsigned char *blob = malloc(fixed + pl.n);
    if (!blob) {
        rc = rad_error_set(RAD_E_NOMEM, "rad_tokenizer_serialize: out of memory");
        goto done;
    }
    memcpy(blob, fx, fixed);
    if (pl.n) memcpy(blob + fixed, pl.p, pl.n);
    *data = blob;
    *len = fixed + pl.n;
done:
    free(fx);
    free(pl.p);
    free(ix.id);
    return rc;
}

/* ---------------------------------------------------------------- load */

/* What load checks strings against. */
typedef struct Blob {
    const char *name;
    const unsigned char *pool;
    uint32_t pool_bytes;
} Blob;

static int bad(const Blob *b, const char *what)
{
    return rad_error_set(RAD_E_FORMAT, "%s: tokenizer.bin: %s", b->name, what);
}

/* The string at (off, len) of the pool, checked to end with its NUL inside
** the pool; NULL for the absent string; *ok cleared when it is malformed. */
static const char *pool_str(const Blob *b, uint32_t off, uint32_t len, int *ok)
{
    if (off == NO_STRING && len == NO_STRING) return NULL;
    if ((uint64_t)off + len >= b->pool_bytes || b->pool[(uint64_t)off + len] != 0) {
        *ok = 0;
        return NULL;
    }
    return (const char *)b->pool + off;
}

/* A malloc'd copy of a pool string (NULL for the absent one). */
static int pool_dup(const Blob *b, const unsigned char *rec, char **out)
{
    int ok = 1;
    const char *s = pool_str(b, rd32(rec), rd32(rec + 4), &ok);
    if (!ok) return bad(b, "a string lies outside the pool");
    *out = NULL;
    if (s && !(*out = strdup(s))) return RAD_E_NOMEM;
    return RAD_OK;
}

int rad_tokenizer_load(const void *data, size_t len, const char *name, RadTokenizer **out)
{
    const unsigned char *h = data;
    Blob b = {.name = name ? name : "tokenizer"};
    *out = NULL;
    if (!data || len < HEADER_BYTES) return bad(&b, "truncated header");
    if (memcmp(h + H_MAGIC, STORE_MAGIC, 8) != 0) return bad(&b, "not a tokenizer blob (bad magic)");
    if (rd32(h + H_VERSION) != STORE_VERSION)
        return rad_error_set(RAD_E_UNSUPPORTED, "%s: tokenizer.bin version %u is not supported (%u is)",
                             b.name, rd32(h + H_VERSION), STORE_VERSION);

    uint32_t n_vocab = rd32(h + H_N_VOCAB), n_merges = rd32(h + H_N_MERGES), n_added = rd32(h + H_N_ADDED);
    uint32_t n_norm = rd32(h + H_N_NORM), n_pre = rd32(h + H_N_PRE), flags = rd32(h + H_FLAGS);
    if (n_vocab == 0 || n_vocab > MAX_VOCAB || n_merges > MAX_MERGES || n_added > MAX_ADDED ||
        n_norm > MAX_STEPS || n_pre > MAX_STEPS || n_norm + n_pre > MAX_STEPS)
        return bad(&b, "a count is out of range");
    uint64_t fixed = HEADER_BYTES + (uint64_t)n_vocab * TOKEN_BYTES + (uint64_t)n_merges * MERGE_BYTES +
                     (flags & F_SCORES ? (uint64_t)n_vocab * 4 : 0) + (uint64_t)n_added * ADDED_BYTES +
                     (uint64_t)(n_norm + n_pre) * STEP_BYTES;
    b.pool_bytes = rd32(h + H_POOL_BYTES);
    if (fixed + b.pool_bytes != len) return bad(&b, "the sections do not add up to the blob's size");
    b.pool = h + fixed;
    if (b.pool_bytes > 0 && b.pool[b.pool_bytes - 1] != 0)
        return bad(&b, "the string pool does not end with a NUL");

    RadTokenizer *t = calloc(1, sizeof *t);
    if (!t) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", b.name);
    int rc = RAD_OK, ok = 1;
    const unsigned char *p = h + HEADER_BYTES;
    t->model = (int)rd32(h + H_MODEL);
    t->decoder = (int)rd32(h + H_DECODER);
    t->unk_id = (int32_t)rd32(h + H_UNK);
    t->bos_id = (int32_t)rd32(h + H_BOS);
    t->eos_id = (int32_t)rd32(h + H_EOS);
    t->pad_id = (int32_t)rd32(h + H_PAD);
    t->byte_fallback = !!(flags & F_BYTE_FALLBACK);
    t->fuse_unk = !!(flags & F_FUSE_UNK);
    t->ignore_merges = !!(flags & F_IGNORE_MERGES);
    t->add_bos = !!(flags & F_ADD_BOS);
    t->add_eos = !!(flags & F_ADD_EOS);
    t->decode_strip_leading = (int)rd32(h + H_STRIP);
    if (t->decode_strip_leading < 0 || t->decode_strip_leading > 64) {
        rc = bad(&b, "decode strip count out of range");
        goto fail;
    }

    /* The pool: one copy; token and merge strings point into it. */
    t->pool = malloc(b.pool_bytes ? b.pool_bytes : 1);
    t->token = malloc(n_vocab * sizeof *t->token);
    t->merge_ids = malloc((n_merges ? n_merges : 1) * 3 * sizeof *t->merge_ids);
    t->merge_left = malloc((n_merges ? n_merges : 1) * sizeof *t->merge_left);
    t->merge_right = malloc((n_merges ? n_merges : 1) * sizeof *t->merge_right);
    if (!t->pool || !t->token || !t->merge_ids || !t->merge_left || !t->merge_right) goto nomem;
    memcpy(t->pool, b.pool, b.pool_bytes);
    t->n_vocab = (int)n_vocab;
    const char *base = t->pool;
    for (uint32_t i = 0; i < n_vocab; i++, p += TOKEN_BYTES) {
        const char *s = pool_str(&b, rd32(p), rd32(p + 4), &ok);
        t->token[i] = s ? (char *)base + (s - (const char *)b.pool) : NULL;
    }
    if (!ok) {
        rc = bad(&b, "a token's string lies outside the pool");
        goto fail;
    }

    t->n_merges = (int)n_merges;
    if (host_is_le())
        memcpy(t->merge_ids, p, (size_t)n_merges * MERGE_BYTES);
    else
        for (size_t i = 0; i < 3 * (size_t)n_merges; i++) t->merge_ids[i] = (int32_t)rd32(p + 4 * i);
    p += (size_t)n_merges * MERGE_BYTES;
    for (uint32_t r = 0; r < n_merges; r++) {
        const int32_t *m = &t->merge_ids[3 * (size_t)r];
        for (int k = 0; k < 3; k++)
            if (m[k] < 0 || (uint32_t)m[k] >= n_vocab || !t->token[m[k]]) ok = 0;
        if (!ok) {
            t->merge_left[r] = t->merge_right[r] = NULL;
            continue;
        }
        t->merge_left[r] = t->token[m[0]];
        t->merge_right[r] = t->token[m[1]];
    }
    if (!ok) {
        rc = bad(&b, "a merge names an id that is not a token");
        goto fail;
    }

    if (flags & F_SCORES) {
        if (!(t->score = malloc(n_vocab * sizeof *t->score))) goto nomem;
        for (uint32_t i = 0; i < n_vocab; i++, p += 4) {
            uint32_t bits = rd32(p);
            memcpy(&t->score[i], &bits, 4);
        }
    }

    if (!(t->added = calloc(n_added + 1, sizeof *t->added))) goto nomem;
    for (uint32_t i = 0; i < n_added; i++, p += ADDED_BYTES) {
        RadTokAdded *a = &t->added[i];
        uint32_t f = rd32(p + 4);
        a->id = (int32_t)rd32(p);
        a->special = !!(f & A_SPECIAL);
        a->lstrip = !!(f & A_LSTRIP);
        a->rstrip = !!(f & A_RSTRIP);
        a->single_word = !!(f & A_SINGLE_WORD);
        a->normalized = !!(f & A_NORMALIZED);
        t->n_added = (int)i + 1;
        if ((rc = pool_dup(&b, p + 8, &a->content))) goto fail;
        if (a->id < 0 || (uint32_t)a->id >= n_vocab || !a->content) {
            rc = bad(&b, "an added token has no text or an id outside the vocabulary");
            goto fail;
        }
    }

    if (!(t->norm = calloc(n_norm + 1, sizeof *t->norm)) || !(t->pre = calloc(n_pre + 1, sizeof *t->pre)))
        goto nomem;
    for (uint32_t i = 0; i < n_norm + n_pre; i++, p += STEP_BYTES) {
        RadTokStep *st = i < n_norm ? &t->norm[i] : &t->pre[i - n_norm];
        uint32_t f = rd32(p + 8);
        if (i < n_norm)
            t->n_norm = (int)i + 1;
        else
            t->n_pre = (int)(i - n_norm) + 1;
        st->kind = (int)rd32(p);
        st->behavior = (int)rd32(p + 4);
        st->invert = !!(f & S_INVERT);
        st->add_prefix_space = !!(f & S_PREFIX_SPACE);
        st->use_regex = !!(f & S_USE_REGEX);
        if ((rc = pool_dup(&b, p + 12, &st->pattern)) || (rc = pool_dup(&b, p + 20, &st->arg))) goto fail;
    }

    /* The template's size is checked before it is copied (the limit's
    ** reason: a template is parsed and rendered at every turn). */
    char field_name[512];
    snprintf(field_name, sizeof field_name, "%.400s: tokenizer.bin", b.name);
    unsigned char tpl[8];
    memcpy(tpl, h + H_TEMPLATE_OFF, 8);
    if (!(rd32(tpl) == NO_STRING && rd32(tpl + 4) == NO_STRING) &&
        (rc = rad_tokenizer_check_template_size(rd32(tpl + 4), field_name)))
        goto fail;
    if ((rc = pool_dup(&b, tpl, &t->chat_template))) goto fail;

    int32_t ids[4] = {t->unk_id, t->bos_id, t->eos_id, t->pad_id};
    for (int i = 0; i < 4; i++)
        if (ids[i] < -1 || ids[i] >= (int32_t)n_vocab) {
            rc = bad(&b, "a special id lies outside the vocabulary");
            goto fail;
        }
    /* The strings the pipeline uses as text must be UTF-8 (tokenizer.h). */
    if ((rc = rad_tokenizer_check_text(t, field_name))) goto fail;
    if (!(t->source = strdup(b.name))) goto nomem;
    *out = t;
    return RAD_OK;

nomem:
    rc = rad_error_set(RAD_E_NOMEM, "%s: out of memory loading the tokenizer", b.name);
fail:
    /* Arrays not yet filled must not be walked by free. */
    if (!t->token) t->n_vocab = 0;
    rad_tokenizer_free(t);
    return rc;
}
