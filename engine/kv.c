/*
** kv.c: the paged KV cache.
**
** Memory is reserved once, at load: for each KV group a pool of blocks of
** `block_size` positions (the size the resolved attention kernel reads), one
** pool per bound layer of K and of V.  Sequences borrow blocks as they grow
** and give them back when freed, or, for sliding-window groups, as soon as no
** future query can see them.  Nothing here allocates on the step path.
*/
#include "engine_internal.h"

#include <stdlib.h>
#include <string.h>

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

int rad_kv_pool_init(RadKvPool *p, const RadBuilder *b, int max_seqs, int max_ctx, int max_tok, int kv_enc)
{
    memset(p, 0, sizeof *p);
    int bs = b->kv_block_size > 0 ? b->kv_block_size : 16;
    p->max_seqs = max_seqs;
    p->max_ctx = max_ctx;
    p->max_blocks = ceil_div(max_ctx, bs);
    p->n_groups = b->n_kv;
    p->groups = calloc((size_t)(b->n_kv ? b->n_kv : 1), sizeof *p->groups);
    p->n_layers = b->n_layer_kv;
    p->layer_group = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *p->layer_group);
    p->layer_slot = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *p->layer_slot);
    p->seqs = calloc((size_t)max_seqs, sizeof *p->seqs);
    if (!p->groups || !p->layer_group || !p->layer_slot || !p->seqs) goto nomem;

    for (int g = 0; g < p->n_groups; g++) {
        RadKvGroupState *s = &p->groups[g];
        s->d = b->kv[g].d;
        s->block_size = bs;
        s->enc = kv_enc;
        s->row_bytes = rad_encoding_row_bytes(kv_enc, (int64_t)s->d.n_head_kv * s->d.head_dim);
        int per_seq = p->max_blocks;
        if (s->d.kind == RAD_KV_WINDOW) {
            int reach = ceil_div(s->d.window + max_tok, bs) + 1;
            if (reach < per_seq) per_seq = reach;
        }
        s->n_blocks = per_seq * max_seqs;
        s->free_blocks = malloc((size_t)s->n_blocks * sizeof *s->free_blocks);
        s->layers = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *s->layers);
        s->k = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *s->k);
        s->v = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *s->v);
        if (!s->free_blocks || !s->layers || !s->k || !s->v) goto nomem;
        /* Hand out low block ids first: pop from the end of the stack. */
        for (int i = 0; i < s->n_blocks; i++) s->free_blocks[i] = s->n_blocks - 1 - i;
        s->n_free = s->n_blocks;
    }
    for (int l = 0; l < p->n_layers; l++) {
        int g = b->layer_kv[l];
        RadKvGroupState *s = &p->groups[g];
        p->layer_group[l] = g;
        p->layer_slot[l] = s->n_layers;
        size_t bytes = (size_t)s->n_blocks * (size_t)bs * (size_t)s->row_bytes;
        s->k[s->n_layers] = calloc(1, bytes);
        s->v[s->n_layers] = calloc(1, bytes);
        if (!s->k[s->n_layers] || !s->v[s->n_layers]) goto nomem;
        s->layers[s->n_layers++] = l;
        p->bytes += 2 * (int64_t)bytes;
    }
    for (int q = 0; q < max_seqs; q++) {
        p->seqs[q].table = calloc((size_t)(p->n_groups ? p->n_groups : 1), sizeof *p->seqs[q].table);
        if (!p->seqs[q].table) goto nomem;
        for (int g = 0; g < p->n_groups; g++) {
            p->seqs[q].table[g] = malloc((size_t)p->max_blocks * sizeof(int32_t));
            if (!p->seqs[q].table[g]) goto nomem;
        }
    }
    return RAD_OK;
nomem:
    rad_kv_pool_free(p);
    return rad_error_set(RAD_E_NOMEM, "out of memory reserving the KV cache (%d sequences of %d positions): lower --ctx",
                         max_seqs, max_ctx);
}

void rad_kv_pool_free(RadKvPool *p)
{
    for (int g = 0; g < p->n_groups && p->groups; g++) {
        RadKvGroupState *s = &p->groups[g];
        for (int i = 0; i < s->n_layers; i++) { free(s->k[i]); free(s->v[i]); }
        free(s->k); free(s->v); free(s->layers); free(s->free_blocks);
    }
    for (int q = 0; q < p->max_seqs && p->seqs; q++) {
        for (int g = 0; g < p->n_groups && p->seqs[q].table; g++) free(p->seqs[q].table[g]);
        free(p->seqs[q].table);
    }
    free(p->groups); free(p->seqs); free(p->layer_group); free(p->layer_slot);
    memset(p, 0, sizeof *p);
}

int rad_kv_seq_new(RadKvPool *p, int *seq)
{
    for (int q = 0; q < p->max_seqs; q++)
        if (!p->seqs[q].used) {
            p->seqs[q].used = 1;
            p->seqs[q].len = 0;
            for (int g = 0; g < p->n_groups; g++)
                for (int i = 0; i < p->max_blocks; i++) p->seqs[q].table[g][i] = -1;
            *seq = q;
            return RAD_OK;
        }
    return rad_error_set(RAD_E_RANGE, "all %d sequences are in use", p->max_seqs);
}

void rad_kv_seq_free(RadKvPool *p, int seq)
{
    if (seq < 0 || seq >= p->max_seqs || !p->seqs[seq].used) return;
    for (int g = 0; g < p->n_groups; g++) {
        RadKvGroupState *s = &p->groups[g];
        for (int i = 0; i < p->max_blocks; i++) {
            int32_t *slot = &p->seqs[seq].table[g][i];
            if (*slot >= 0) { s->free_blocks[s->n_free++] = *slot; *slot = -1; }
        }
    }
    p->seqs[seq].used = 0;
    p->seqs[seq].len = 0;
}

int rad_kv_reserve(RadKvPool *p, int seq, int new_len)
{
    if (new_len > p->max_ctx)
        return rad_error_set(RAD_E_RANGE, "the sequence would hold %d positions; the context is %d (raise --ctx)",
                             new_len, p->max_ctx);
    RadKvSeq *s = &p->seqs[seq];
    for (int g = 0; g < p->n_groups; g++) {
        RadKvGroupState *grp = &p->groups[g];
        int first = s->len / grp->block_size, last = (new_len - 1) / grp->block_size;
        for (int blk = first; blk <= last && new_len > 0; blk++) {
            if (s->table[g][blk] >= 0) continue;
            if (grp->n_free == 0)
                return rad_error_set(RAD_E_RANGE, "the KV cache is out of blocks (%d in group %d)",
                                     grp->n_blocks, g);
            s->table[g][blk] = grp->free_blocks[--grp->n_free];
        }
    }
    return RAD_OK;
}

void rad_kv_commit(RadKvPool *p, int seq, int new_len)
{
    RadKvSeq *s = &p->seqs[seq];
    s->len = new_len;
    for (int g = 0; g < p->n_groups; g++) {
        RadKvGroupState *grp = &p->groups[g];
        if (grp->d.kind != RAD_KV_WINDOW) continue;
        /* The next query sits at new_len and sees positions > new_len - window:
        ** a block whose last position is <= new_len - window is out of reach. */
        int reach_from = new_len - grp->d.window + 1;
        for (int blk = 0; (blk + 1) * grp->block_size <= reach_from && blk < p->max_blocks; blk++) {
            int32_t *slot = &s->table[g][blk];
            if (*slot >= 0) { grp->free_blocks[grp->n_free++] = *slot; *slot = -1; }
        }
    }
}

void rad_kv_fill_table(const RadKvPool *p, int g, const int *seqs, int n_seq, int32_t *table)
{
    for (int i = 0; i < n_seq; i++)
        memcpy(table + (size_t)i * p->max_blocks, p->seqs[seqs[i]].table[g],
               (size_t)p->max_blocks * sizeof(int32_t));
}

void rad_kv_view(const RadKvPool *p, int layer, const int32_t *table, int n_seq,
                 const RadBatch *batch, RadKvView *out)
{
    int g = p->layer_group[layer], slot = p->layer_slot[layer];
    const RadKvGroupState *s = &p->groups[g];
    memset(out, 0, sizeof *out);
    out->k = s->k[slot];
    out->v = s->v[slot];
    out->enc = s->enc;
    out->block_size = s->block_size;
    out->n_head_kv = s->d.n_head_kv;
    out->head_dim = s->d.head_dim;
    out->kv_row_bytes = s->row_bytes;
    out->window = s->d.kind == RAD_KV_WINDOW ? s->d.window : 0;
    out->n_seq = n_seq;
    out->max_blocks = p->max_blocks;
    out->block_table = table;
    out->n_tok = batch->n_tok;
    out->token_seq = batch->token_seq;
    out->positions = batch->positions;
}

/* ------------------------------------------------ truncate and snapshot */

/* The first position a WINDOW group must still hold so that a query at
** position len sees everything it may attend to; 0 for a FULL group. */
static int first_needed(const RadKvGroupState *grp, int len)
{
    if (grp->d.kind != RAD_KV_WINDOW) return 0;
    int from = len - grp->d.window + 1;
    return from > 0 ? from : 0;
}

int rad_kv_truncate(RadKvPool *p, int seq, int new_len)
{
    RadKvSeq *s = &p->seqs[seq];
    if (new_len < 0 || new_len > s->len) return RAD_E_ARG;
    for (int g = 0; g < p->n_groups; g++) {
        const RadKvGroupState *grp = &p->groups[g];
        for (int pos = first_needed(grp, new_len); pos < new_len; pos += grp->block_size)
            if (s->table[g][pos / grp->block_size] < 0)
                return RAD_E_RANGE;     /* a window already let go of what is needed */
    }
    for (int g = 0; g < p->n_groups; g++) {
        RadKvGroupState *grp = &p->groups[g];
        int keep = (new_len + grp->block_size - 1) / grp->block_size;
        for (int blk = keep; blk < p->max_blocks; blk++) {
            int32_t *slot = &s->table[g][blk];
            if (*slot >= 0) { grp->free_blocks[grp->n_free++] = *slot; *slot = -1; }
        }
    }
    s->len = new_len;
    return RAD_OK;
}

/* Snapshot layout (little-endian, as the machine; a snapshot is restored on
** the machine that made it or one like it):
**   "RADKVSN1"  u32 enc  u32 n_layers  u32 len
**   per layer:  u32 first (the first position stored)  u32 row_bytes
**               K rows [first, len) then V rows [first, len)
** The caller adds the model identity and the tokens around it. */
#define SNAP_MAGIC "RADKVSN1"

static size_t put_u32(uint8_t *at, uint32_t v) { memcpy(at, &v, 4); return 4; }
static uint32_t get_u32(const uint8_t *at) { uint32_t v; memcpy(&v, at, 4); return v; }

static uint8_t *slot_row(const RadKvGroupState *grp, uint8_t *base, const int32_t *table, int pos)
{
    int64_t slot = (int64_t)table[pos / grp->block_size] * grp->block_size + pos % grp->block_size;
    return base + slot * grp->row_bytes;
}

int64_t rad_kv_snapshot_bytes(const RadKvPool *p, int seq)
{
    const RadKvSeq *s = &p->seqs[seq];
    int64_t bytes = 8 + 12;
    for (int l = 0; l < p->n_layers; l++) {
        const RadKvGroupState *grp = &p->groups[p->layer_group[l]];
        bytes += 8 + 2 * (int64_t)(s->len - first_needed(grp, s->len)) * grp->row_bytes;
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
    at += put_u32(at, (uint32_t)(p->n_groups ? p->groups[0].enc : 0));
    at += put_u32(at, (uint32_t)p->n_layers);
    at += put_u32(at, (uint32_t)s->len);
    for (int l = 0; l < p->n_layers; l++) {
        int g = p->layer_group[l], slot = p->layer_slot[l];
        const RadKvGroupState *grp = &p->groups[g];
        int first = first_needed(grp, s->len);
        at += put_u32(at, (uint32_t)first);
        at += put_u32(at, (uint32_t)grp->row_bytes);
        for (int half = 0; half < 2; half++) {
            uint8_t *base = half ? grp->v[slot] : grp->k[slot];
            for (int pos = first; pos < s->len; pos++) {
                memcpy(at, slot_row(grp, base, s->table[g], pos), (size_t)grp->row_bytes);
                at += grp->row_bytes;
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
    if (size < 20 || memcmp(at, SNAP_MAGIC, 8) != 0)
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: not a snapshot (bad magic)");
    uint32_t enc = get_u32(at + 8), n_layers = get_u32(at + 12), len = get_u32(at + 16);
    at += 20;
    if (p->n_groups && enc != (uint32_t)p->groups[0].enc)
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: made with another KV encoding");
    if (n_layers != (uint32_t)p->n_layers || len > (uint32_t)p->max_ctx)
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: %u layers and %u positions do not fit this model (%d, %d)",
                             n_layers, len, p->n_layers, p->max_ctx);
    /* Check every layer's header and that the data is all there before
    ** touching the cache. */
    const uint8_t *scan = at;
    for (int l = 0; l < p->n_layers; l++) {
        const RadKvGroupState *grp = &p->groups[p->layer_group[l]];
        if (end - scan < 8) return rad_error_set(RAD_E_FORMAT, "KV snapshot: truncated");
        uint32_t first = get_u32(scan), row_bytes = get_u32(scan + 4);
        if (first != (uint32_t)first_needed(grp, (int)len) || row_bytes != (uint32_t)grp->row_bytes)
            return rad_error_set(RAD_E_FORMAT, "KV snapshot: layer %d does not match this model", l);
        int64_t need = 2 * (int64_t)(len - first) * row_bytes;
        if (end - scan - 8 < need) return rad_error_set(RAD_E_FORMAT, "KV snapshot: truncated");
        scan += 8 + need;
    }
    if (scan != end) return rad_error_set(RAD_E_FORMAT, "KV snapshot: %lld trailing bytes", (long long)(end - scan));
    /* Blocks: only those holding positions a later query can see. */
    for (int g = 0; g < p->n_groups; g++) {
        RadKvGroupState *grp = &p->groups[g];
        for (int pos = first_needed(grp, (int)len); pos < (int)len; pos++) {
            int blk = pos / grp->block_size;
            if (s->table[g][blk] >= 0) continue;
            if (grp->n_free == 0) {
                rad_kv_truncate(p, seq, 0);
                return rad_error_set(RAD_E_RANGE, "KV snapshot: the cache is out of blocks");
            }
            s->table[g][blk] = grp->free_blocks[--grp->n_free];
        }
    }
    for (int l = 0; l < p->n_layers; l++) {
        int g = p->layer_group[l], slot = p->layer_slot[l];
        const RadKvGroupState *grp = &p->groups[g];
        int first = (int)get_u32(at);
        at += 8;
        for (int half = 0; half < 2; half++) {
            uint8_t *base = half ? grp->v[slot] : grp->k[slot];
            for (int pos = first; pos < (int)len; pos++) {
                memcpy(slot_row(grp, base, s->table[g], pos), at, (size_t)grp->row_bytes);
                at += grp->row_bytes;
            }
        }
    }
    s->len = (int)len;
    return RAD_OK;
}
