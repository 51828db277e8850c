/*
** text_bpe.c: the BPE model, one pre-token at a time.
**
** A pre-token becomes a row of symbols, one per character (per byte for
** byte-level vocabularies, whose alphabet has a character for every byte).
** A character the vocabulary lacks becomes its <0xNN> byte tokens when the
** model has byte_fallback and all of them exist, else the unknown token (runs
** of unknowns fused into one when fuse_unk), else nothing, exactly as HF.
** Then merges apply by rank: always the lowest-ranked adjacent pair, the
** leftmost one among equals.  A min-heap keyed by (rank, position) finds it,
** so a word of n symbols costs O(n log n), however long; an entry is checked
** against the merge table when popped and dropped if its pair has since
** changed.  With ignore_merges a pre-token that is itself a token is taken
** whole before any of this.
**
** Text repeats words, so a cache maps the bytes of a pre-token (up to 255 of
** them, as HF's) to its ids.  It lives in the TextBpe, which text_encode.c
** hands from call to call, so it warms up over many short texts too.  It is
** bounded: when full it is emptied and fills again with what the text now
** uses.
*/
#include "text_internal.h"

#include <stdlib.h>
#include <string.h>

/* Words longer than this are not cached (HF's limit too). */
#define CACHE_WORD_MAX 255
/* The cache's bounds: entries, and bytes of keys and of ids (a few MB). */
#define CACHE_MAX_ENTRIES (1u << 16)
#define CACHE_MAX_BYTES   (4u << 20)

typedef struct Symbol {
    int32_t id;         /* token id, -1 once merged into its left neighbour */
    int32_t prev, next; /* neighbours in the row, -1 at the ends */
} Symbol;

typedef struct CacheEntry {
    uint32_t hash;
    uint32_t key_off, key_len; /* in key_bytes */
    uint32_t ids_off, n_ids;   /* in cached_ids */
} CacheEntry;

struct TextBpe {
    Symbol *sym;
    size_t sym_cap;
    uint64_t *heap; /* (rank << 32) | position, smallest first */
    size_t heap_n, heap_cap;
    TextBuf mapped;    /* a pre-token in the byte-level alphabet */
    CacheEntry *cache; /* open addressing, n_cache < half of cache_mask + 1 */
    uint32_t cache_mask, n_cache;
    TextBuf key_bytes;
    TextIds cached_ids;
};

int text_ids_push(TextIds *ids, int32_t id)
{
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = realloc(ids->v, cap * sizeof *v);
        if (!v) return RAD_E_NOMEM;
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return RAD_OK;
}

TextBpe *text_bpe_new(void)
{
    return calloc(1, sizeof(TextBpe));
}

void text_bpe_free(TextBpe *b)
{
    if (!b) return;
    free(b->sym);
    free(b->heap);
    free(b->mapped.p);
    free(b->cache);
    free(b->key_bytes.p);
    free(b->cached_ids.v);
    free(b);
}

void text_bpe_trim(TextBpe *b)
{
    /* Words of a few thousand symbols are common; only outliers are freed. */
    if (b->sym_cap > 65536) {
        free(b->sym);
        b->sym = NULL;
        b->sym_cap = 0;
    }
    if (b->heap_cap > 65536) {
        free(b->heap);
        b->heap = NULL;
        b->heap_cap = b->heap_n = 0;
    }
    if (b->mapped.cap > 65536) {
        free(b->mapped.p);
        b->mapped = (TextBuf){0};
    }
}

/* ---------------------------------------------------------------- heap */

static int heap_push(TextBpe *b, uint64_t v)
{
    if (b->heap_n == b->heap_cap) {
        size_t cap = b->heap_cap ? b->heap_cap * 2 : 256;
        uint64_t *h = realloc(b->heap, cap * sizeof *h);
        if (!h) return RAD_E_NOMEM;
        b->heap = h;
        b->heap_cap = cap;
    }
    size_t i = b->heap_n++;
    while (i > 0 && b->heap[(i - 1) / 2] > v) {
        b->heap[i] = b->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    b->heap[i] = v;
    return RAD_OK;
}

static uint64_t heap_pop(TextBpe *b)
{
    uint64_t top = b->heap[0], last = b->heap[--b->heap_n];
    size_t i = 0, n = b->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && b->heap[c + 1] < b->heap[c]) c++;
        if (b->heap[c] >= last) break;
        b->heap[i] = b->heap[c];
        i = c;
    }
    if (n) b->heap[i] = last;
    return top;
}

/* Queue the pair starting at symbol `pos` if it is a merge. */
static int queue_pair(const RadText *t, TextBpe *b, int32_t pos)
{
    const Symbol *s = &b->sym[pos];
    if (s->next < 0) return RAD_OK;
    int32_t rank = text_pair_rank(t, s->id, b->sym[s->next].id);
    return rank < 0 ? RAD_OK : heap_push(b, ((uint64_t)(uint32_t)rank << 32) | (uint32_t)pos);
}

/* ---------------------------------------------------------------- symbols */

/* The row being built, with the pending unknown token HF holds back so that
** consecutive unknowns can fuse. */
typedef struct Row {
    int32_t n;
    int unk_pending;
} Row;

static void row_add(TextBpe *b, Row *r, int32_t id)
{
    Symbol *s = &b->sym[r->n];
    s->id = id;
    s->prev = r->n - 1;
    s->next = -1;
    if (r->n > 0) b->sym[r->n - 1].next = r->n;
    r->n++;
}

static void row_known(TextBpe *b, Row *r, int32_t id, int32_t unk)
{
    if (r->unk_pending) row_add(b, r, unk);
    r->unk_pending = 0;
    row_add(b, r, id);
}

/* A character the vocabulary lacks: byte fallback, else unk, else dropped. */
static void row_unknown(const RadText *t, TextBpe *b, Row *r, const unsigned char *c, int k)
{
    const RadTokenizer *d = t->d;
    if (d->byte_fallback) {
        int all = 1;
        for (int i = 0; i < k; i++) all &= t->fallback_sym[c[i]] >= 0;
        if (all) {
            for (int i = 0; i < k; i++) row_known(b, r, t->fallback_sym[c[i]], d->unk_id);
            return;
        }
    }
    if (d->unk_id < 0) return;
    if (r->unk_pending && !d->fuse_unk) row_add(b, r, d->unk_id);
    r->unk_pending = 1;
}

/* Fill the row for s[0..n); returns the symbol count. */
static int32_t build_row(const RadText *t, TextBpe *b, const unsigned char *s, size_t n)
{
    Row r = {0, 0};
    if (t->d->model == RAD_TOK_BPE_BYTELEVEL) {
        for (size_t i = 0; i < n; i++) {
            int32_t id = t->byte_sym[s[i]];
            if (id >= 0) {
                row_known(b, &r, id, t->d->unk_id);
            } else {
                char c[4];
                int k = text_utf8_put(c, t->byte_char[s[i]]);
                row_unknown(t, b, &r, (const unsigned char *)c, k);
            }
        }
    } else {
        size_t i = 0;
        while (i < n) {
            uint32_t cp;
            int k = s[i] < 0x80 ? 1 : text_utf8_next(s + i, n - i, &cp);
            if (k == 0) k = 1; /* cannot happen: input is sanitized */
            int32_t id = k == 1 && s[i] < 0x80 ? t->ascii_sym[s[i]]
                                               : text_model_find(t, (const char *)s + i, (size_t)k);
            if (id >= 0)
                row_known(b, &r, id, t->d->unk_id);
            else
                row_unknown(t, b, &r, s + i, k);
            i += (size_t)k;
        }
    }
    if (r.unk_pending) row_add(b, &r, t->d->unk_id);
    return r.n;
}

/* ---------------------------------------------------------------- merging */

/* Merge the row of n symbols by rank and append the surviving ids. */
static int merge_row(const RadText *t, TextBpe *b, int32_t n, TextIds *out)
{
    int rc = RAD_OK;
    b->heap_n = 0;
    for (int32_t i = 0; i + 1 < n && rc == RAD_OK; i++) rc = queue_pair(t, b, i);
    while (b->heap_n > 0 && rc == RAD_OK) {
        uint64_t e = heap_pop(b);
        int32_t rank = (int32_t)(e >> 32), pos = (int32_t)(uint32_t)e;
        Symbol *s = &b->sym[pos];
        if (s->id < 0 || s->next < 0) continue;
        Symbol *nx = &b->sym[s->next];
        const TextMerge *m = &t->merge[rank];
        if (s->id != m->left || nx->id != m->right) continue; /* stale: the pair has changed */
        s->id = m->result;
        nx->id = -1;
        s->next = nx->next;
        if (s->next >= 0) b->sym[s->next].prev = pos;
        if (s->prev >= 0) rc = queue_pair(t, b, s->prev);
        if (rc == RAD_OK) rc = queue_pair(t, b, pos);
    }
    /* Symbol 0 is never merged away (merges keep the left symbol). */
    for (int32_t i = n > 0 ? 0 : -1; i >= 0 && rc == RAD_OK; i = b->sym[i].next)
        rc = text_ids_push(out, b->sym[i].id);
    return rc;
}

/* ---------------------------------------------------------------- cache */

static CacheEntry *cache_slot(TextBpe *b, const char *s, size_t n, uint32_t h)
{
    for (uint32_t i = h & b->cache_mask;; i = (i + 1) & b->cache_mask) {
        CacheEntry *e = &b->cache[i];
        if (e->key_len == 0) return e;
        if (e->hash == h && e->key_len == n && memcmp(b->key_bytes.p + e->key_off, s, n) == 0) return e;
    }
}

/* Remember ids[0..k) for s[0..n); failures only mean no caching. */
static void cache_put(TextBpe *b, const char *s, size_t n, uint32_t h, const int32_t *ids, size_t k)
{
    if (b->n_cache >= CACHE_MAX_ENTRIES || b->key_bytes.n + n > CACHE_MAX_BYTES ||
        (b->cached_ids.n + k) * sizeof(int32_t) > CACHE_MAX_BYTES) {
        /* Full: start again rather than keep only what came first. */
        memset(b->cache, 0, ((size_t)b->cache_mask + 1) * sizeof *b->cache);
        b->n_cache = 0;
        b->key_bytes.n = 0;
        b->cached_ids.n = 0;
    }
    if (!b->cache || 2 * (b->n_cache + 1) > b->cache_mask + 1) {
        uint32_t slots = b->cache ? 2 * (b->cache_mask + 1) : 4096;
        CacheEntry *old = b->cache, *grown = calloc(slots, sizeof *grown);
        uint32_t old_slots = old ? b->cache_mask + 1 : 0;
        if (!grown) return;
        b->cache = grown;
        b->cache_mask = slots - 1;
        for (uint32_t i = 0; i < old_slots; i++)
            if (old[i].key_len) {
                uint32_t j = old[i].hash & b->cache_mask;
                while (grown[j].key_len) j = (j + 1) & b->cache_mask;
                grown[j] = old[i];
            }
        free(old);
    }
    CacheEntry *e = cache_slot(b, s, n, h);
    if (e->key_len) return;
    size_t key_off = b->key_bytes.n, ids_off = b->cached_ids.n;
    if (text_buf_put(&b->key_bytes, s, n)) return;
    for (size_t i = 0; i < k; i++)
        if (text_ids_push(&b->cached_ids, ids[i])) {
            b->key_bytes.n = key_off;
            b->cached_ids.n = ids_off;
            return;
        }
    *e = (CacheEntry){.hash = h,
                      .key_off = (uint32_t)key_off,
                      .key_len = (uint32_t)n,
                      .ids_off = (uint32_t)ids_off,
                      .n_ids = (uint32_t)k};
    b->n_cache++;
}

/* ---------------------------------------------------------------- a word */

/* With ignore_merges: the id of the whole pre-token as one token, or -1. */
static int32_t whole_word(const RadText *t, TextBpe *b, const unsigned char *s, size_t n)
{
    if (t->d->model != RAD_TOK_BPE_BYTELEVEL) return text_model_find(t, (const char *)s, n);
    b->mapped.n = 0;
    if (text_buf_reserve(&b->mapped, 2 * n + 1)) return -1;
    char *p = b->mapped.p;
    for (size_t i = 0; i < n; i++) p += text_utf8_put(p, t->byte_char[s[i]]);
    return text_model_find(t, b->mapped.p, (size_t)(p - b->mapped.p));
}

int text_bpe_word(const RadText *t, TextBpe *b, const char *s, size_t n, TextIds *out)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return RAD_OK;
    /* The cache holds whatever a word came to, by either path below. */
    uint32_t h = 0;
    if (n <= CACHE_WORD_MAX) {
        h = text_hash(s, n);
        if (b->cache) {
            const CacheEntry *e = cache_slot(b, s, n, h);
            if (e->key_len) {
                for (uint32_t i = 0; i < e->n_ids; i++)
                    if (text_ids_push(out, b->cached_ids.v[e->ids_off + i])) return RAD_E_NOMEM;
                return RAD_OK;
            }
        }
    }
    if (t->d->ignore_merges) {
        int32_t id = whole_word(t, b, u, n);
        if (id >= 0) {
            if (n <= CACHE_WORD_MAX) cache_put(b, s, n, h, &id, 1);
            return text_ids_push(out, id);
        }
    }
    /* At most one symbol per byte, plus the byte-fallback expansion (a
    ** character of k bytes gives at most k symbols). */
    if (n + 1 > b->sym_cap) {
        Symbol *sym = realloc(b->sym, (n + 1) * sizeof *sym);
        if (!sym) return RAD_E_NOMEM;
        b->sym = sym;
        b->sym_cap = n + 1;
    }
    int32_t count = build_row(t, b, u, n);
    size_t before = out->n;
    int rc = merge_row(t, b, count, out);
    /* A word can give no ids at all (unknown bytes, no unk token, no byte
    ** fallback); out->v may then still be NULL, and NULL + 0 is undefined. */
    if (rc == RAD_OK && n <= CACHE_WORD_MAX)
        cache_put(b, s, n, h, out->n > before ? out->v + before : NULL, out->n - before);
    return rc;
}
