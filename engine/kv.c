/*
** kv.c: the KV cache and the other per-sequence state of a model.
**
** Two kinds of group (docs/KV.md says why each behaves as it does):
**
**   paged (FULL, WINDOW)  attention K and V rows, one per position, in blocks
**       of `block_size` positions.  One pool of blocks per group is shared by
**       every sequence: a sequence takes blocks as it grows (never reserved
**       to the whole context), gives them back when it shrinks or ends, and a
**       WINDOW group gives back blocks no later query can reach, keeping
**       `max_spec` positions of slack so a speculative step can still be
**       rolled back.  A block full of positions is hashed by the tokens of
**       its whole prefix; a new sequence whose prompt starts the same way
**       shares those blocks (reference counts) instead of computing them
**       again, and a sequence that must write into a shared block copies it
**       first.  Freed hashed blocks stay findable until their memory is
**       needed, oldest first: a prefix cache for free.
**   state (LINEAR, CONV)  one fixed-size state per sequence and bound layer,
**       describing the sequence at its current length.  It cannot be cut
**       back, except to 0 (a fresh state) or to the length at which a
**       checkpoint was taken.
**
** Everything is allocated at init; nothing here allocates on the step path.
*/
#include "engine_internal.h"

#include <stdlib.h>
#include <string.h>

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static int is_paged(const RadKvGroupState *g) { return g->d.kind == RAD_KV_FULL || g->d.kind == RAD_KV_WINDOW; }

/* ------------------------------------------------------------- hashing */

/* The hash of a block whose prefix hashed to `parent`: the chain makes a
** block's hash name everything before it too.  Never 0 (0 = no hash). */
static uint64_t block_hash(uint64_t parent, const int32_t *tokens, int n)
{
    uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)tokens[i];
        h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    return h ? h : 1;
}

/* The group's index of hashed blocks: open addressing over 64-bit keys,
** linear probing, backward-shift deletion. */
static int index_find(const RadKvGroupState *g, uint64_t h)
{
    uint32_t mask = (uint32_t)g->index_cap - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        if (g->index_key[i] == 0) return -1;
        if (g->index_key[i] == h) return g->index_block[i];
    }
}

static void index_put(RadKvGroupState *g, uint64_t h, int block)
{
    uint32_t mask = (uint32_t)g->index_cap - 1, i = (uint32_t)h & mask;
    while (g->index_key[i] != 0 && g->index_key[i] != h) i = (i + 1) & mask;
    g->index_key[i] = h;
    g->index_block[i] = block;
}

static void index_remove(RadKvGroupState *g, uint64_t h, int block)
{
    uint32_t mask = (uint32_t)g->index_cap - 1, i = (uint32_t)h & mask;
    while (g->index_key[i] != h) {
        if (g->index_key[i] == 0) return;
        i = (i + 1) & mask;
    }
    if (g->index_block[i] != block) return;     /* another block holds this prefix's entry */
    for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (g->index_key[j] == 0) break;
        uint32_t home = (uint32_t)g->index_key[j] & mask;
        /* move j back into the hole at i unless its home lies in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            g->index_key[i] = g->index_key[j];
            g->index_block[i] = g->index_block[j];
            i = j;
        }
    }
    g->index_key[i] = 0;
}

/* ----------------------------------------------------------- free list */

/* Free blocks in the order they were freed: reuse takes the oldest, so a
** block freed recently, whose hash may still be asked for, lasts longest. */
static void free_push(RadKvGroupState *g, int b)
{
    g->free_prev[b] = g->free_tail;
    g->free_next[b] = -1;
    if (g->free_tail >= 0) g->free_next[g->free_tail] = b;
    else g->free_head = b;
    g->free_tail = b;
    g->n_free++;
}

static void free_unlink(RadKvGroupState *g, int b)
{
    if (g->free_prev[b] >= 0) g->free_next[g->free_prev[b]] = g->free_next[b];
    else g->free_head = g->free_next[b];
    if (g->free_next[b] >= 0) g->free_prev[g->free_next[b]] = g->free_prev[b];
    else g->free_tail = g->free_prev[b];
    g->free_prev[b] = g->free_next[b] = -1;
    g->n_free--;
}

/* A block for new contents: the oldest free one, forgetting its hash. */
static int block_take(RadKvGroupState *g)
{
    int b = g->free_head;
    if (b < 0) return -1;
    free_unlink(g, b);
    if (g->hash[b]) {
        index_remove(g, g->hash[b], b);
        g->hash[b] = 0;
    }
    g->refs[b] = 1;
    return b;
}

static void block_drop(RadKvGroupState *g, int b)
{
    if (--g->refs[b] == 0) free_push(g, b);
}

/* ----------------------------------------------------------------- init */

int rad_kv_pool_init(RadKvPool *p, const RadBuilder *b, const RadKvOptions *o)
{
    memset(p, 0, sizeof *p);
    int bs = b->kv_block_size > 0 ? b->kv_block_size : 16;
    p->block_size = bs;
    p->max_seqs = o->max_seqs;
    p->max_ctx = o->max_ctx;
    p->max_spec = o->max_spec > 0 ? o->max_spec : 0;
    p->max_blocks = ceil_div(o->max_ctx, bs);
    p->n_groups = b->n_kv;
    p->groups = calloc((size_t)(b->n_kv ? b->n_kv : 1), sizeof *p->groups);
    p->n_layers = b->n_layer_kv;
    p->layer_group = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *p->layer_group);
    p->layer_slot = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *p->layer_slot);
    p->seqs = calloc((size_t)o->max_seqs, sizeof *p->seqs);
    if (!p->groups || !p->layer_group || !p->layer_slot || !p->seqs) goto nomem;
    int64_t positions = o->positions > 0 ? o->positions : (int64_t)o->max_seqs * o->max_ctx;

    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        g->d = b->kv[gi].d;
        g->layers = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *g->layers);
        g->k = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *g->k);
        g->v = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *g->v);
        if (!g->layers || !g->k || !g->v) goto nomem;
        if (!is_paged(g)) {
            g->enc = g->d.state_enc;
            g->state_bytes = g->d.state_rows * rad_encoding_row_bytes(g->d.state_enc, g->d.state_cols);
            g->n_slots = 2 * o->max_seqs;       /* each sequence's state, then its checkpoint */
            continue;
        }
        g->block_size = bs;
        g->enc = o->kv_enc;
        g->row_bytes = rad_encoding_row_bytes(o->kv_enc, (int64_t)g->d.n_head_kv * g->d.head_dim);
        int64_t blocks = ceil_div((int)(positions < INT32_MAX ? positions : INT32_MAX), bs);
        if (g->d.kind == RAD_KV_WINDOW) {
            /* what one sequence can hold at once: the window, the rows a
            ** step adds, the speculative slack, and a partial block each side */
            int reach = ceil_div(g->d.window + o->max_tok + p->max_spec, bs) + 1;
            if (reach < p->max_blocks && (int64_t)reach * o->max_seqs < blocks) blocks = (int64_t)reach * o->max_seqs;
        }
        if (blocks < p->max_blocks) blocks = p->max_blocks;     /* one sequence can always fill the context */
        g->n_blocks = (int)blocks;
        g->refs = calloc((size_t)g->n_blocks, sizeof *g->refs);
        g->hash = calloc((size_t)g->n_blocks, sizeof *g->hash);
        g->parent = calloc((size_t)g->n_blocks, sizeof *g->parent);
        g->tokens = calloc((size_t)g->n_blocks * (size_t)bs, sizeof *g->tokens);
        g->free_next = malloc((size_t)g->n_blocks * sizeof *g->free_next);
        g->free_prev = malloc((size_t)g->n_blocks * sizeof *g->free_prev);
        g->index_cap = 16;
        while (g->index_cap < 2 * g->n_blocks) g->index_cap *= 2;
        g->index_key = calloc((size_t)g->index_cap, sizeof *g->index_key);
        g->index_block = calloc((size_t)g->index_cap, sizeof *g->index_block);
        if (!g->refs || !g->hash || !g->parent || !g->tokens || !g->free_next || !g->free_prev || !g->index_key ||
            !g->index_block)
            goto nomem;
        g->free_head = g->free_tail = -1;
        for (int i = 0; i < g->n_blocks; i++) free_push(g, i);
    }
    for (int l = 0; l < p->n_layers; l++) {
        int gi = b->layer_kv[l];
        RadKvGroupState *g = &p->groups[gi];
        p->layer_group[l] = gi;
        p->layer_slot[l] = g->n_layers;
        size_t bytes = is_paged(g) ? (size_t)g->n_blocks * (size_t)bs * (size_t)g->row_bytes
                                   : (size_t)g->n_slots * (size_t)g->state_bytes;
        g->k[g->n_layers] = calloc(1, bytes);
        g->v[g->n_layers] = is_paged(g) ? calloc(1, bytes) : NULL;
        if (!g->k[g->n_layers] || (is_paged(g) && !g->v[g->n_layers])) goto nomem;
        g->layers[g->n_layers++] = l;
        p->bytes += (is_paged(g) ? 2 : 1) * (int64_t)bytes;
    }
    for (int q = 0; q < o->max_seqs; q++) {
        RadKvSeq *s = &p->seqs[q];
        s->table = calloc((size_t)(p->n_groups ? p->n_groups : 1), sizeof *s->table);
        s->tokens = malloc((size_t)o->max_ctx * sizeof *s->tokens);
        s->block_hashes = calloc((size_t)p->max_blocks, sizeof *s->block_hashes);
        if (!s->table || !s->tokens || !s->block_hashes) goto nomem;
        for (int gi = 0; gi < p->n_groups; gi++) {
            if (!is_paged(&p->groups[gi])) continue;
            s->table[gi] = malloc((size_t)p->max_blocks * sizeof(int32_t));
            if (!s->table[gi]) goto nomem;
        }
    }
    return RAD_OK;
nomem:
    rad_kv_pool_free(p);
    return rad_error_set(RAD_E_NOMEM, "out of memory reserving the KV cache (%d sequences of %d positions): lower --ctx",
                         o->max_seqs, o->max_ctx);
}

void rad_kv_pool_free(RadKvPool *p)
{
    for (int gi = 0; gi < p->n_groups && p->groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        for (int i = 0; i < g->n_layers; i++) { free(g->k[i]); free(g->v[i]); }
        free(g->k); free(g->v); free(g->layers);
        free(g->refs); free(g->hash); free(g->parent); free(g->tokens);
        free(g->free_next); free(g->free_prev); free(g->index_key); free(g->index_block);
    }
    for (int q = 0; q < p->max_seqs && p->seqs; q++) {
        RadKvSeq *s = &p->seqs[q];
        for (int gi = 0; gi < p->n_groups && s->table; gi++) free(s->table[gi]);
        free(s->table);
        free(s->tokens);
        free(s->block_hashes);
    }
    free(p->groups); free(p->seqs); free(p->layer_group); free(p->layer_slot);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------ sequences */

/* Zero sequence q's live state in every state group (a fresh recurrence). */
static void state_clear(RadKvPool *p, int q)
{
    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        if (is_paged(g)) continue;
        for (int i = 0; i < g->n_layers; i++) memset((uint8_t *)g->k[i] + (size_t)q * g->state_bytes, 0, (size_t)g->state_bytes);
    }
}

int rad_kv_seq_new(RadKvPool *p, int *seq)
{
    for (int q = 0; q < p->max_seqs; q++) {
        RadKvSeq *s = &p->seqs[q];
        if (s->used) continue;
        s->used = 1;
        s->len = 0;
        s->checkpoint_len = -1;
        s->hashable = 1;
        for (int gi = 0; gi < p->n_groups; gi++)
            if (s->table[gi])
                for (int i = 0; i < p->max_blocks; i++) s->table[gi][i] = -1;
        memset(s->block_hashes, 0, (size_t)p->max_blocks * sizeof *s->block_hashes);
        state_clear(p, q);
        *seq = q;
        return RAD_OK;
    }
    return rad_error_set(RAD_E_RANGE, "all %d sequences are in use", p->max_seqs);
}

/* Give back seq's blocks from block index `from` on, in every paged group. */
static void release_from(RadKvPool *p, RadKvSeq *s, int from)
{
    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        if (!is_paged(g)) continue;
        for (int i = from; i < p->max_blocks; i++) {
            int32_t *slot = &s->table[gi][i];
            if (*slot >= 0) { block_drop(g, *slot); *slot = -1; }
        }
    }
}

void rad_kv_seq_free(RadKvPool *p, int seq)
{
    if (seq < 0 || seq >= p->max_seqs || !p->seqs[seq].used) return;
    RadKvSeq *s = &p->seqs[seq];
    release_from(p, s, 0);
    s->used = 0;
    s->len = 0;
}

/* The first position a group must still hold so that a query at `len`
** sees all it may attend to, less `slack` positions for a rollback. */
static int first_needed(const RadKvGroupState *g, int len, int slack)
{
    if (g->d.kind != RAD_KV_WINDOW) return 0;
    int from = len - slack - g->d.window + 1;
    return from > 0 ? from : 0;
}

/* Copy block `from` of group g (every bound layer's K and V) into `to`. */
static void block_copy(RadKvGroupState *g, int from, int to)
{
    size_t bytes = (size_t)g->block_size * (size_t)g->row_bytes;
    for (int i = 0; i < g->n_layers; i++) {
        memcpy((uint8_t *)g->k[i] + (size_t)to * bytes, (uint8_t *)g->k[i] + (size_t)from * bytes, bytes);
        memcpy((uint8_t *)g->v[i] + (size_t)to * bytes, (uint8_t *)g->v[i] + (size_t)from * bytes, bytes);
    }
}

int rad_kv_reserve(RadKvPool *p, int seq, int new_len)
{
    if (new_len > p->max_ctx)
        return rad_error_set(RAD_E_RANGE, "the sequence would hold %d positions; the context is %d (raise --ctx)",
                             new_len, p->max_ctx);
    RadKvSeq *s = &p->seqs[seq];
    if (new_len <= s->len) return RAD_OK;
    /* Count first, so a refusal changes nothing. */
    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        if (!is_paged(g)) continue;
        int need = 0;
        for (int blk = s->len / g->block_size; blk <= (new_len - 1) / g->block_size; blk++) {
            int32_t b = s->table[gi][blk];
            need += b < 0 || g->refs[b] > 1;     /* new, or shared and about to be written */
        }
        if (need > g->n_free)
            return rad_error_set(RAD_E_RANGE, "the KV cache is full (%d of %d blocks of group %d in use): "
                                 "fewer sequences, a shorter context, or a larger --kv-size", g->n_blocks - g->n_free,
                                 g->n_blocks, gi);
    }
    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        if (!is_paged(g)) continue;
        for (int blk = s->len / g->block_size; blk <= (new_len - 1) / g->block_size; blk++) {
            int32_t *slot = &s->table[gi][blk];
            if (*slot >= 0 && g->refs[*slot] == 1) {
                /* about to be written: no longer the block its hash names */
                if (g->hash[*slot]) { index_remove(g, g->hash[*slot], *slot); g->hash[*slot] = 0; }
                continue;
            }
            int fresh = block_take(g);
            if (*slot >= 0) {               /* copy on divergence */
                block_copy(g, *slot, fresh);
                block_drop(g, *slot);
            }
            *slot = fresh;
        }
    }
    return RAD_OK;
}

void rad_kv_commit(RadKvPool *p, int seq, const int32_t *tokens, int n)
{
    RadKvSeq *s = &p->seqs[seq];
    const int bs = p->block_size;
    memcpy(s->tokens + s->len, tokens, (size_t)n * sizeof *tokens);
    int old = s->len;
    s->len += n;
    /* Blocks that became full get their prefix hash, and become findable
    ** (not in a restored sequence: its earlier tokens are not known here). */
    for (int blk = old / bs; s->hashable && (blk + 1) * bs <= s->len; blk++) {
        uint64_t parent = blk ? s->block_hashes[blk - 1] : 0;
        s->block_hashes[blk] = block_hash(parent, s->tokens + (size_t)blk * bs, bs);
        for (int gi = 0; gi < p->n_groups; gi++) {
            RadKvGroupState *g = &p->groups[gi];
            if (!is_paged(g)) continue;
            int32_t b = s->table[gi][blk];
            if (b < 0 || g->hash[b]) continue;
            g->hash[b] = s->block_hashes[blk];
            g->parent[b] = parent;
            memcpy(g->tokens + (size_t)b * bs, s->tokens + (size_t)blk * bs, (size_t)bs * sizeof *g->tokens);
            if (index_find(g, g->hash[b]) < 0) index_put(g, g->hash[b], b);
        }
    }
    /* WINDOW groups let go of what the next query cannot reach even after a
    ** rollback of max_spec positions. */
    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        if (g->d.kind != RAD_KV_WINDOW) continue;
        int reach_from = first_needed(g, s->len, p->max_spec);
        for (int blk = 0; (blk + 1) * bs <= reach_from && blk < p->max_blocks; blk++) {
            int32_t *slot = &s->table[gi][blk];
            if (*slot >= 0) { block_drop(g, *slot); *slot = -1; }
        }
    }
}

int rad_kv_truncate(RadKvPool *p, int seq, int new_len)
{
    RadKvSeq *s = &p->seqs[seq];
    if (new_len < 0 || new_len > s->len) return RAD_E_ARG;
    if (new_len == s->len) return RAD_OK;
    int restore = 0;
    for (int gi = 0; gi < p->n_groups; gi++) {
        const RadKvGroupState *g = &p->groups[gi];
        if (!is_paged(g)) {
            if (new_len != 0 && new_len != s->checkpoint_len) return RAD_E_RANGE;
            restore = new_len != 0;
            continue;
        }
        for (int pos = first_needed(g, new_len, 0); pos < new_len; pos += g->block_size)
            if (s->table[gi][pos / g->block_size] < 0) return RAD_E_RANGE;     /* a window let it go */
    }
    release_from(p, s, ceil_div(new_len, p->block_size));
    for (int blk = new_len / p->block_size; blk < p->max_blocks; blk++) s->block_hashes[blk] = 0;
    if (new_len == 0) {
        state_clear(p, seq);
        s->hashable = 1;
    }
    if (restore)
        for (int gi = 0; gi < p->n_groups; gi++) {
            RadKvGroupState *g = &p->groups[gi];
            if (is_paged(g)) continue;
            for (int i = 0; i < g->n_layers; i++) {
                uint8_t *base = g->k[i];
                memcpy(base + (size_t)seq * g->state_bytes, base + (size_t)(p->max_seqs + seq) * g->state_bytes,
                       (size_t)g->state_bytes);
            }
        }
    s->len = new_len;
    return RAD_OK;
}

int rad_kv_checkpoint(RadKvPool *p, int seq)
{
    RadKvSeq *s = &p->seqs[seq];
    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        if (is_paged(g)) continue;
        for (int i = 0; i < g->n_layers; i++) {
            uint8_t *base = g->k[i];
            memcpy(base + (size_t)(p->max_seqs + seq) * g->state_bytes, base + (size_t)seq * g->state_bytes,
                   (size_t)g->state_bytes);
        }
    }
    s->checkpoint_len = s->len;
    return RAD_OK;
}

int rad_kv_has_state(const RadKvPool *p)
{
    for (int gi = 0; gi < p->n_groups; gi++)
        if (!is_paged(&p->groups[gi])) return 1;
    return 0;
}

/* --------------------------------------------------------- prefix sharing */

/* Whether every block a sequence of `len` positions needs in group gi is
** findable, block `blk`'s under hashes[blk]. */
static int prefix_findable(const RadKvPool *p, int gi, const uint64_t *hashes, const int32_t *tokens, int len)
{
    const RadKvGroupState *g = &p->groups[gi];
    const int bs = p->block_size;
    for (int blk = first_needed(g, len, p->max_spec) / bs; blk < len / bs; blk++) {
        int b = index_find(g, hashes[blk]);
        if (b < 0 || g->parent[b] != (blk ? hashes[blk - 1] : 0) ||
            memcmp(g->tokens + (size_t)b * bs, tokens + (size_t)blk * bs, (size_t)bs * sizeof *tokens) != 0)
            return 0;
    }
    return 1;
}

int rad_kv_attach_prefix(RadKvPool *p, int seq, const int32_t *tokens, int n)
{
    RadKvSeq *s = &p->seqs[seq];
    const int bs = p->block_size;
    if (s->len != 0 || n < bs || rad_kv_has_state(p) || p->n_groups == 0) return 0;
    int blocks = n / bs;
    if (blocks > p->max_blocks) blocks = p->max_blocks;
    uint64_t *hashes = s->block_hashes;     /* filled now; kept when attached */
    int found = 0;
    for (; found < blocks; found++) {
        hashes[found] = block_hash(found ? hashes[found - 1] : 0, tokens + (size_t)found * bs, bs);
        int ok = 1;
        for (int gi = 0; gi < p->n_groups && ok; gi++)
            if (p->groups[gi].d.kind == RAD_KV_FULL) ok = index_find(&p->groups[gi], hashes[found]) >= 0;
        if (!ok) break;
    }
    /* The longest prefix every group can serve (a window may have let go of
    ** a middle block that a shorter prefix still needs). */
    for (; found > 0; found--) {
        int ok = 1;
        for (int gi = 0; gi < p->n_groups && ok; gi++) ok = prefix_findable(p, gi, hashes, tokens, found * bs);
        if (ok) break;
    }
    for (int blk = found; blk < p->max_blocks; blk++) hashes[blk] = 0;
    if (found == 0) return 0;
    const int len = found * bs;
    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        for (int blk = first_needed(g, len, p->max_spec) / bs; blk < found; blk++) {
            int b = index_find(g, hashes[blk]);
            if (g->refs[b]++ == 0) free_unlink(g, b);
            s->table[gi][blk] = b;
        }
    }
    memcpy(s->tokens, tokens, (size_t)len * sizeof *tokens);
    s->len = len;
    p->attached += len;
    return len;
}

int rad_kv_blocks_in_use(const RadKvPool *p, int gi)
{
    const RadKvGroupState *g = &p->groups[gi];
    return is_paged(g) ? g->n_blocks - g->n_free : 0;
}

/* ---------------------------------------------------------------- views */

void rad_kv_fill_table(const RadKvPool *p, int gi, const int *seqs, int n_seq, int32_t *table)
{
    if (!is_paged(&p->groups[gi])) return;
    for (int i = 0; i < n_seq; i++)
        memcpy(table + (size_t)i * p->max_blocks, p->seqs[seqs[i]].table[gi], (size_t)p->max_blocks * sizeof(int32_t));
}

void rad_kv_view(const RadKvPool *p, int layer, const int32_t *table, const int32_t *state_slots, int n_seq,
                 const RadBatch *batch, RadKvView *out)
{
    int gi = p->layer_group[layer], slot = p->layer_slot[layer];
    const RadKvGroupState *g = &p->groups[gi];
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->kind = g->d.kind;
    out->enc = g->enc;
    out->n_seq = n_seq;
    out->n_tok = batch->n_tok;
    out->token_seq = batch->token_seq;
    out->positions = batch->positions;
    if (!is_paged(g)) {
        out->state = g->k[slot];
        out->state_bytes = g->state_bytes;
        out->state_slot = state_slots;
        out->state_enc = g->d.state_enc;
        out->state_rows = g->d.state_rows;
        out->state_cols = g->d.state_cols;
        return;
    }
    out->k = g->k[slot];
    out->v = g->v[slot];
    out->block_size = g->block_size;
    out->n_head_kv = g->d.n_head_kv;
    out->head_dim = g->d.head_dim;
    out->kv_row_bytes = g->row_bytes;
    out->window = g->d.kind == RAD_KV_WINDOW ? g->d.window : 0;
    out->max_blocks = p->max_blocks;
    out->block_table = table;
}

/* ------------------------------------------------------------- snapshots */

/* Snapshot layout (little-endian, as the machine: a snapshot is restored on
** the machine that made it or one like it):
**   "RADKVSN2"  u32 n_groups  u32 n_layers  u32 len
**   per group:  u32 kind  u32 enc  u64 row_bytes (paged) or state_bytes
**   per layer:  u32 group  u32 first (paged: the first position stored)
**               paged: K rows [first, len) then V rows [first, len)
**               state: the state's bytes
** The caller adds the model identity and the tokens around it. */
#define SNAP_MAGIC "RADKVSN2"
#define SNAP_HEAD 20

static size_t put_u32(uint8_t *at, uint32_t v) { memcpy(at, &v, 4); return 4; }
static size_t put_u64(uint8_t *at, uint64_t v) { memcpy(at, &v, 8); return 8; }
static uint32_t get_u32(const uint8_t *at) { uint32_t v; memcpy(&v, at, 4); return v; }
static uint64_t get_u64(const uint8_t *at) { uint64_t v; memcpy(&v, at, 8); return v; }

static uint8_t *slot_row(const RadKvGroupState *g, uint8_t *base, const int32_t *table, int pos)
{
    int64_t slot = (int64_t)table[pos / g->block_size] * g->block_size + pos % g->block_size;
    return base + slot * g->row_bytes;
}

static int64_t group_unit(const RadKvGroupState *g) { return is_paged(g) ? g->row_bytes : g->state_bytes; }

int64_t rad_kv_snapshot_bytes(const RadKvPool *p, int seq)
{
    const RadKvSeq *s = &p->seqs[seq];
    int64_t bytes = SNAP_HEAD + 16 * (int64_t)p->n_groups;
    for (int l = 0; l < p->n_layers; l++) {
        const RadKvGroupState *g = &p->groups[p->layer_group[l]];
        bytes += 8 + (is_paged(g) ? 2 * (int64_t)(s->len - first_needed(g, s->len, 0)) * g->row_bytes : g->state_bytes);
    }
    return bytes;
}

int rad_kv_snapshot(const RadKvPool *p, int seq, void *out, int64_t size)
{
    const RadKvSeq *s = &p->seqs[seq];
    if (size < rad_kv_snapshot_bytes(p, seq)) return RAD_E_ARG;
    uint8_t *at = out;
    memcpy(at, SNAP_MAGIC, 8);
    at += 8;
    at += put_u32(at, (uint32_t)p->n_groups);
    at += put_u32(at, (uint32_t)p->n_layers);
    at += put_u32(at, (uint32_t)s->len);
    for (int gi = 0; gi < p->n_groups; gi++) {
        at += put_u32(at, (uint32_t)p->groups[gi].d.kind);
        at += put_u32(at, (uint32_t)p->groups[gi].enc);
        at += put_u64(at, (uint64_t)group_unit(&p->groups[gi]));
    }
    for (int l = 0; l < p->n_layers; l++) {
        int gi = p->layer_group[l], slot = p->layer_slot[l];
        const RadKvGroupState *g = &p->groups[gi];
        int first = first_needed(g, s->len, 0);
        at += put_u32(at, (uint32_t)gi);
        at += put_u32(at, (uint32_t)first);
        if (!is_paged(g)) {
            memcpy(at, (uint8_t *)g->k[slot] + (size_t)seq * g->state_bytes, (size_t)g->state_bytes);
            at += g->state_bytes;
            continue;
        }
        for (int half = 0; half < 2; half++) {
            uint8_t *base = half ? g->v[slot] : g->k[slot];
            for (int pos = first; pos < s->len; pos++) {
                memcpy(at, slot_row(g, base, s->table[gi], pos), (size_t)g->row_bytes);
                at += g->row_bytes;
            }
        }
    }
    return RAD_OK;
}

int rad_kv_restore(RadKvPool *p, int seq, const void *data, int64_t size)
{
    RadKvSeq *s = &p->seqs[seq];
    const uint8_t *at = data, *end = at + size;
    if (s->len != 0) return rad_error_set(RAD_E_STATE, "KV snapshot: the sequence is not empty");
    if (size < SNAP_HEAD || memcmp(at, SNAP_MAGIC, 8) != 0) {
        if (size >= 8 && memcmp(at, "RADKVSN", 7) == 0 && at[7] >= '0' && at[7] <= '9')
            return rad_error_set(RAD_E_FORMAT, "KV snapshot: format %c, this radiance reads format 2", at[7]);
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: not a snapshot (bad magic)");
    }
    uint32_t n_groups = get_u32(at + 8), n_layers = get_u32(at + 12), len = get_u32(at + 16);
    at += SNAP_HEAD;
    if (n_groups != (uint32_t)p->n_groups || n_layers != (uint32_t)p->n_layers || len > (uint32_t)p->max_ctx)
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: %u groups, %u layers and %u positions do not fit this model "
                             "(%d, %d, %d)", n_groups, n_layers, len, p->n_groups, p->n_layers, p->max_ctx);
    if (end - at < 16 * (int64_t)n_groups) return rad_error_set(RAD_E_FORMAT, "KV snapshot: truncated");
    for (int gi = 0; gi < p->n_groups; gi++, at += 16) {
        const RadKvGroupState *g = &p->groups[gi];
        if (get_u32(at) != (uint32_t)g->d.kind || get_u32(at + 4) != (uint32_t)g->enc ||
            get_u64(at + 8) != (uint64_t)group_unit(g))
            return rad_error_set(RAD_E_FORMAT, "KV snapshot: group %d (kind %u, encoding %u) does not match this "
                                 "model's (kind %d, encoding %d): another KV encoding or another model", gi,
                                 get_u32(at), get_u32(at + 4), g->d.kind, g->enc);
    }
    /* Check every layer's header and that the data is all there before
    ** touching the cache. */
    const uint8_t *scan = at;
    for (int l = 0; l < p->n_layers; l++) {
        const RadKvGroupState *g = &p->groups[p->layer_group[l]];
        if (end - scan < 8) return rad_error_set(RAD_E_FORMAT, "KV snapshot: truncated");
        uint32_t group = get_u32(scan), first = get_u32(scan + 4);
        int64_t need = is_paged(g) ? 2 * (int64_t)(len - first) * g->row_bytes : g->state_bytes;
        if (group != (uint32_t)p->layer_group[l] || first != (uint32_t)first_needed(g, (int)len, 0))
            return rad_error_set(RAD_E_FORMAT, "KV snapshot: layer %d does not match this model", l);
        if (end - scan - 8 < need) return rad_error_set(RAD_E_FORMAT, "KV snapshot: truncated");
        scan += 8 + need;
    }
    if (scan != end) return rad_error_set(RAD_E_FORMAT, "KV snapshot: %lld trailing bytes", (long long)(end - scan));
    /* Blocks: only those holding positions a later query can see. */
    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        if (!is_paged(g)) continue;
        int need = 0;
        for (int blk = first_needed(g, (int)len, 0) / g->block_size; blk < ceil_div((int)len, g->block_size); blk++)
            need++;
        if (need > g->n_free) return rad_error_set(RAD_E_RANGE, "KV snapshot: the cache is out of blocks");
    }
    for (int gi = 0; gi < p->n_groups; gi++) {
        RadKvGroupState *g = &p->groups[gi];
        if (!is_paged(g)) continue;
        for (int blk = first_needed(g, (int)len, 0) / g->block_size; blk < ceil_div((int)len, g->block_size); blk++)
            s->table[gi][blk] = block_take(g);
    }
    for (int l = 0; l < p->n_layers; l++) {
        int gi = p->layer_group[l], slot = p->layer_slot[l];
        const RadKvGroupState *g = &p->groups[gi];
        int first = (int)get_u32(at + 4);
        at += 8;
        if (!is_paged(g)) {
            memcpy((uint8_t *)g->k[slot] + (size_t)seq * g->state_bytes, at, (size_t)g->state_bytes);
            at += g->state_bytes;
            continue;
        }
        for (int half = 0; half < 2; half++) {
            uint8_t *base = half ? g->v[slot] : g->k[slot];
            for (int pos = first; pos < (int)len; pos++) {
                memcpy(slot_row(g, base, s->table[gi], pos), at, (size_t)g->row_bytes);
                at += g->row_bytes;
            }
        }
    }
    s->len = (int)len;
    s->hashable = 0;
    return RAD_OK;
}
