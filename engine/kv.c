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
