/*
** step.c: running tokens through the model.
**
** rad_engine_eval cuts the tokens into chunks of at most max_tok rows, fills
** one RadBatch per chunk (positions, the rows whose logits are wanted, the
** layers' KV views) and the plugin's step issues the declared ops.
*/
#include "engine_internal.h"

#include <string.h>

/* ----------------------------------------------------------------- steps */

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

static int run_chunk(RadEngine *e, int seq, const int32_t *tokens, int start_pos, int m, int want_all,
                     int want_last)
{
    RadBatch batch;
    memset(&batch, 0, sizeof batch);
    batch.struct_size = sizeof batch;
    batch.phase = m == 1 && start_pos > 0 ? RAD_PHASE_DECODE : RAD_PHASE_PREFILL;
    batch.n_tok = m;
    batch.n_seq = 1;
    batch.n_seq_decode = batch.phase == RAD_PHASE_DECODE;
    for (int i = 0; i < m; i++) {
        e->positions[i] = start_pos + i;
        e->token_seq[i] = 0;
    }
    e->cu_seqlens[0] = 0;
    e->cu_seqlens[1] = m;
    e->seq_ids[0] = seq;
    batch.token_ids = tokens;
    batch.positions = e->positions;
    batch.cu_seqlens = e->cu_seqlens;
    batch.seq_ids = e->seq_ids;
    batch.token_seq = e->token_seq;
    if (want_all) {
        batch.n_out = m;
        for (int i = 0; i < m; i++) e->out_ids[i] = i;
    } else if (want_last) {
        batch.n_out = 1;
        e->out_ids[0] = m - 1;
    }
    batch.out_ids = e->out_ids;

    int rc = rad_kv_reserve(&e->kv, seq, start_pos + m);
    if (rc) return rc;
    fill_derived(e, &batch);
    for (int g = 0; g < e->kv.n_groups; g++)
        rad_kv_fill_table(&e->kv, g, &seq, 1, e->kv_tables + (size_t)g * e->kv.max_blocks * e->kv.max_seqs);
    for (int l = 0; l < e->kv.n_layers; l++) {
        int g = e->kv.layer_group[l];
        rad_kv_view(&e->kv, l, e->kv_tables + (size_t)g * e->kv.max_blocks * e->kv.max_seqs, 1, &batch,
                    &e->views[l]);
    }
    RadCtx c = {.e = e, .batch = &batch, .status = 0, .last_op = 0};
    e->plugin->step(&c, &batch);
    if (c.status) return rad_error_prefix(c.status, "%s: step failed: ", e->opt.model_path);
    rad_kv_commit(&e->kv, seq, start_pos + m);
    return RAD_OK;
}

int rad_engine_eval(RadEngine *e, int seq, const int32_t *tokens, int n, float *logits)
{
    if (n <= 0) return rad_error_set(RAD_E_ARG, "nothing to evaluate");
    int len = rad_engine_seq_len(e, seq);
    if (len < 0) return rad_error_set(RAD_E_ARG, "sequence %d is not open", seq);
    if ((int64_t)len + n > e->ctx.max_ctx)
        return rad_error_set(RAD_E_RANGE, "%d tokens after %d already held exceed the context of %d: raise --ctx",
                             n, len, e->ctx.max_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= e->meta.n_vocab)
            return rad_error_set(RAD_E_RANGE, "token id %d at index %d is outside the vocabulary (0..%d)",
                                 tokens[i], i, e->meta.n_vocab - 1);
    const int64_t vocab = e->meta.n_vocab;
    const float *out = (const float *)e->b.buffers[e->b.logits].data;
    for (int start = 0; start < n; start += e->ctx.max_tok) {
        int m = n - start < e->ctx.max_tok ? n - start : e->ctx.max_tok;
        int last = start + m == n;
        int rc = run_chunk(e, seq, tokens + start, len + start, m, e->opt.logits_all && logits != NULL,
                           last && logits != NULL);
        if (rc) return rc;
        if (!logits) continue;
        if (e->opt.logits_all) memcpy(logits + (size_t)start * vocab, out, (size_t)m * vocab * sizeof(float));
        else if (last) memcpy(logits, out, (size_t)vocab * sizeof(float));
    }
    return RAD_OK;
}
