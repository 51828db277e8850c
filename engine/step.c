/*
** step.c: running tokens through the model.
**
** rad_engine_decode takes the work of several sequences; the scheduler
** (scheduler.c) cuts it into steps, and each step here becomes one RadBatch:
** the rows' tokens and positions, which rows want logits, every layer's KV
** view over the step's sequences.  The plugin's step issues the declared
** ops; then each sequence commits what it gained and the wanted logits rows
** are copied out.  Nothing here allocates: every array was sized at open
** for max_tok rows and max_seqs sequences.
*/
#include "engine_internal.h"
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

static void fill_derived(RadEngine *e, const RadBatch *batch)
{
    for (int i = 0; i < e->b.n_buffers; i++) {
        RadBufferEntry *buf = &e->b.buffers[i];
        if (buf->d.kind != RAD_BUF_DERIVED) continue;
        const int32_t *src = NULL;
        int n = 0;
        if (strcmp(buf->derive, "token_ids") == 0) { src = batch->token_ids; n = batch->n_tok; }
        else if (strcmp(buf->derive, "positions") == 0) { src = batch->positions; n = batch->n_tok; }
        else { src = batch->out_ids; n = batch->n_out; }
        if (n > buf->d.rows) n = (int)buf->d.rows;
        if (n > 0) memcpy(buf->data, src, (size_t)n * sizeof(int32_t));
    }
}

/* Run one step: items[i] is batch sequence i. */
static int run_step(RadEngine *e, RadSeqWork *work, RadSchedWork *sw, int *out_at, const RadSchedItem *items,
                    int n_items)
{
    RadBatch batch;
    memset(&batch, 0, sizeof batch);
    batch.struct_size = sizeof batch;
    int rows = 0, n_out = 0, n_decode = 0;
    for (int i = 0; i < n_items; i++) {
        const RadSchedItem *it = &items[i];
        const RadSeqWork *w = &work[it->work];
        const int base = e->kv.seqs[w->seq].len;
        e->cu_seqlens[i] = rows;
        e->seq_ids[i] = w->seq;
        e->state_slots[i] = w->seq;
        n_decode += sw[it->work].decode;
        for (int r = 0; r < it->n; r++, rows++) {
            e->step_tokens[rows] = w->tokens[it->start + r];
            e->positions[rows] = base + r;
            e->token_seq[rows] = i;
            if (rad_sched_wants(&sw[it->work], it->start + r)) e->out_ids[n_out++] = rows;
        }
        int rc = rad_kv_reserve(&e->kv, w->seq, base + it->n);
        if (rc) return rc;
    }
    e->cu_seqlens[n_items] = rows;
    batch.phase = n_decode == n_items ? RAD_PHASE_DECODE : n_decode == 0 ? RAD_PHASE_PREFILL : RAD_PHASE_MIXED;
    batch.n_tok = rows;
    batch.n_seq = n_items;
    batch.n_seq_decode = n_decode;
    batch.token_ids = e->step_tokens;
    batch.positions = e->positions;
    batch.cu_seqlens = e->cu_seqlens;
    batch.seq_ids = e->seq_ids;
    batch.token_seq = e->token_seq;
    batch.n_out = n_out;
    batch.out_ids = e->out_ids;

    fill_derived(e, &batch);
    const size_t table_len = (size_t)e->kv.max_blocks * (size_t)e->kv.max_seqs;
    for (int g = 0; g < e->kv.n_groups; g++)
        rad_kv_fill_table(&e->kv, g, e->seq_ids, n_items, e->kv_tables + (size_t)g * table_len);
    for (int l = 0; l < e->kv.n_layers; l++) {
        int g = e->kv.layer_group[l];
        rad_kv_view(&e->kv, l, e->kv_tables + (size_t)g * table_len, e->state_slots, n_items, &batch, &e->views[l]);
    }
    RadCtx c = {.e = e, .batch = &batch, .status = 0, .last_op = 0};
    e->plugin->step(e->instance, &c, &batch);
    if (c.status) return rad_error_prefix(c.status, "%s: step failed: ", e->opt.model_path);

    const int64_t vocab = e->meta.n_vocab;
    const float *logits = (const float *)e->b.buffers[e->b.logits].data;
    int row_out = 0;
    for (int i = 0; i < n_items; i++) {
        const RadSchedItem *it = &items[i];
        RadSeqWork *w = &work[it->work];
        rad_kv_commit(&e->kv, w->seq, w->tokens + it->start, it->n);
        sw[it->work].done += it->n;
        if (it->out > 0 && w->out)
            memcpy(w->out + (size_t)out_at[it->work] * vocab, logits + (size_t)row_out * vocab,
                   (size_t)it->out * vocab * sizeof(float));
        out_at[it->work] += it->out;
        row_out += it->out;
    }
    e->stats.steps++;
    e->stats.rows += rows;
    return RAD_OK;
}

/* How many leading rows of w need not be run: a prefix other sequences
** computed, short of the first row whose logits are wanted. */
static int shareable_rows(const RadSchedWork *sw)
{
    int n = 0;
    while (n < sw->n && !rad_sched_wants(sw, n)) n++;
    return n;
}

int rad_engine_decode(RadEngine *e, RadSeqWork *work, int n_work)
{
    if (n_work <= 0) return rad_error_set(RAD_E_ARG, "nothing to evaluate");
    if (n_work > e->ctx.max_seqs)
        return rad_error_set(RAD_E_ARG, "%d sequences in one call; the engine was opened for %d (max_seqs)", n_work,
                             e->ctx.max_seqs);
    RadSchedWork sw[n_work];
    int out_at[n_work];
    for (int i = 0; i < n_work; i++) {
        const RadSeqWork *w = &work[i];
        int len = rad_engine_seq_len(e, w->seq);
        if (len < 0) return rad_error_set(RAD_E_ARG, "sequence %d is not open", w->seq);
        if (w->n <= 0 || !w->tokens) return rad_error_set(RAD_E_ARG, "sequence %d: nothing to evaluate", w->seq);
        for (int j = 0; j < i; j++)
            if (work[j].seq == w->seq) return rad_error_set(RAD_E_ARG, "sequence %d is given twice", w->seq);
        if ((int64_t)len + w->n > e->ctx.max_ctx)
            return rad_error_set(RAD_E_RANGE, "%d tokens after %d already held exceed the context of %d: raise --ctx",
                                 w->n, len, e->ctx.max_ctx);
        for (int t = 0; t < w->n; t++)
            if (w->tokens[t] < 0 || w->tokens[t] >= e->meta.n_vocab)
                return rad_error_set(RAD_E_RANGE, "token id %d at index %d is outside the vocabulary (0..%d)",
                                     w->tokens[t], t, e->meta.n_vocab - 1);
        if (w->logits < RAD_LOGITS_NONE || w->logits > RAD_LOGITS_MASK || (w->logits == RAD_LOGITS_MASK && !w->mask))
            return rad_error_set(RAD_E_ARG, "sequence %d: logits request %d is not valid", w->seq, w->logits);
        sw[i] = (RadSchedWork){.n = w->n, .done = 0, .decode = w->n == 1 && len > 0, .logits = w->logits,
                               .mask = w->mask};
        out_at[i] = 0;
    }
    if (!e->opt.no_prefix_cache)
        for (int i = 0; i < n_work; i++) {
            if (rad_engine_seq_len(e, work[i].seq) != 0) continue;
            int attached = rad_kv_attach_prefix(&e->kv, work[i].seq, work[i].tokens, shareable_rows(&sw[i]));
            sw[i].done = attached;
            e->stats.prefix_rows += attached;
        }
    const RadSchedLimits lim = {.max_tok = e->ctx.max_tok, .max_mixed_tok = e->ctx.max_mixed_tok,
                                .max_out = e->ctx.max_out_rows, .max_seqs = e->ctx.max_seqs};
    for (;;) {
        int n = rad_sched_next(sw, n_work, &lim, e->step_items);
        if (n < 0) return rad_error_set(RAD_E_RANGE, "a row wants logits but the engine returns none per step");
        if (n == 0) return RAD_OK;
        int rc = run_step(e, work, sw, out_at, e->step_items, n);
        if (rc) return rc;
    }
}

int rad_engine_eval(RadEngine *e, int seq, const int32_t *tokens, int n, float *logits)
{
    RadSeqWork w = {.seq = seq, .tokens = tokens, .n = n, .out = logits,
                    .logits = !logits ? RAD_LOGITS_NONE : e->opt.logits_all ? RAD_LOGITS_ALL : RAD_LOGITS_LAST};
    return rad_engine_decode(e, &w, 1);
}

void rad_engine_stats(const RadEngine *e, RadEngineStats *out)
{
    *out = e->stats;
    rad_experts_stats(e->experts, out);
}
