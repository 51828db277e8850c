/*
** rad_block_attn.h: the self-attention block of a decoder layer.
**
** In PyTorch terms this is
**     q, k, v = h @ Wq.T + bq, h @ Wk.T + bk, h @ Wv.T + bv
**     q, k = q_norm(q), k_norm(k)              (per head; Qwen3, Gemma 3; over the
**                                              whole projection: OLMoE)
**     q, k, v = clamp(q, k, v, +-clip_qkv)       (OLMoE's clip_qkv)
**     q, k = rope(q, pos), rope(k, pos)
**     cache.store(k, v)
**     att = softmax(q k.T * scale + causal mask) v   (GQA: heads share kv heads;
**                                              gpt-oss: a learned sink logit per head
**                                              joins each softmax, taking mass only)
**     out = att @ Wo.T + bo
** Every family configures it through RadAttnConfig; the block owns the
** layer's weights and ops, the caller owns the buffers (shared by layers).
*/
#ifndef RAD_BLOCK_ATTN_H
#define RAD_BLOCK_ATTN_H

#include <math.h>

#include "rad_block_util.h"
#include "../../kernels/ops/rad_op_values.h"

typedef struct RadRopeConfig {
    int n_rot;                  /* rotated dims per head */
    int mode;                   /* RAD_ROPE_MODE_*: NEOX halves (HF) or adjacent pairs (GGUF llama) */
    double theta;
    int scaling;                /* RAD_ROPE_SCALING_*: none, linear, llama3, factors, yarn */
    double factor, low_freq_factor, high_freq_factor;
    int orig_ctx;
    double beta_fast, beta_slow;    /* YaRN's ramp bounds; 0 = transformers' 32 and 1 */
    double attn_factor;             /* YaRN's cos/sin factor; 0 = its default from factor */
    int truncate;                   /* YaRN: RAD_ROPE_TRUNCATE_ON unless the config says false */
    int has_freq_factors;       /* scaling FACTORS: the model's factor table ... */
    rad_weight freq_factors;    /* ... this weight (GGUF rope_freqs.weight) */
} RadRopeConfig;

/* YaRN as transformers' _compute_yarn_parameters reads its keys under
** `prefix` (rope_parameters or rope_scaling): every family with YaRN reads
** it here.  Absent betas and attention factor stay 0, which the rope op
** defines as transformers' defaults (docs/OPS.md); an original context that
** is not given is the model's trained one, as transformers fills it in.
** DeepSeek's mscale pair becomes the attention factor it implies, so no
** kernel needs to know about it. */
static inline int rad_rope_yarn_config(RadBuilder *b, const RadModelMeta *meta, const char *prefix, double factor,
                                       RadRopeConfig *r)
{
    char key[96];
#define YARN_KEY(name) (snprintf(key, sizeof key, "%s.%s", prefix, name), key)
    r->scaling = RAD_ROPE_SCALING_YARN;
    r->factor = factor;
    r->orig_ctx = (int)rad_meta_geti(meta, YARN_KEY("original_max_position_embeddings"), meta->n_ctx_train);
    r->beta_fast = rad_meta_getf(meta, YARN_KEY("beta_fast"), 0);
    r->beta_slow = rad_meta_getf(meta, YARN_KEY("beta_slow"), 0);
    r->attn_factor = rad_meta_getf(meta, YARN_KEY("attention_factor"), 0);
    if (!rad_meta_has(meta, YARN_KEY("attention_factor"))) {
        double mscale = rad_meta_getf(meta, YARN_KEY("mscale"), 0);
        double mscale_all = rad_meta_getf(meta, YARN_KEY("mscale_all_dim"), 0);
        if (mscale != 0 && mscale_all != 0 && factor > 1)
            r->attn_factor = (0.1 * mscale * log(factor) + 1.0) / (0.1 * mscale_all * log(factor) + 1.0);
    }
    r->truncate = rad_meta_geti(meta, YARN_KEY("truncate"), 1) ? RAD_ROPE_TRUNCATE_ON : RAD_ROPE_TRUNCATE_OFF;
#undef YARN_KEY
    if (!(factor > 0) || !isfinite(factor))
        return rad_decl_fail(b, "RoPE scaling 'yarn' needs a positive %s.factor (the file has %g)", prefix, factor);
    if (r->orig_ctx <= 0)
        return rad_decl_fail(b, "RoPE scaling 'yarn' needs a positive %s.original_max_position_embeddings", prefix);
    if (!(r->beta_fast >= 0) || !(r->beta_slow >= 0) || !(r->attn_factor >= 0) || !isfinite(r->beta_fast) ||
        !isfinite(r->beta_slow) || !isfinite(r->attn_factor))
        return rad_decl_fail(b, "RoPE scaling 'yarn': beta_fast, beta_slow and attention_factor must be finite and not negative");
    return RAD_OK;
}

typedef struct RadAttnConfig {
    int layer;
    int n_embd, n_head, n_head_kv, head_dim;
    int weight_enc;             /* encoding of the projections */
    int qk_norm;                /* per-head RMSNorm of q and k */
    int qk_norm_whole;          /* ... over the whole projection instead (OLMoE: weights
                                ** of n_head * head_dim and n_head_kv * head_dim) */
    double clip_qkv;            /* > 0: q, k, v clamped to [-clip_qkv, clip_qkv] after the norms */
    double norm_eps, norm_offset;
    double scale;               /* score scale, usually 1/sqrt(head_dim) */
    double softcap;             /* 0 = none */
    int window;                 /* sliding window in positions; 0 = full causal */
    RadRopeConfig rope;
    const char *hf_prefix;      /* "model.layers.3.self_attn" */
    int max_tok;
    int sinks;                  /* gpt-oss: per-head sink logits (<prefix>.sinks, f32 [n_head]) */
    int qk_norm_optional;       /* with qk_norm: the norms run when the file has them (a GLM-4.5
                                ** GGUF says so only by its tensors, as llama.cpp reads it) */
} RadAttnConfig;

/* The buffers the block reads and writes; declared once by the plugin. */
typedef struct RadAttnBuffers {
    rad_buf h;                  /* in: normed hidden [T, n_embd] */
    rad_buf q, k, v;            /* scratch */
    rad_buf att;                /* scratch [T, n_head * head_dim] */
    rad_buf out;                /* out: [T, n_embd] */
    rad_buf positions;          /* DERIVED positions */
} RadAttnBuffers;

typedef struct RadAttn {
    RadAttnConfig cfg;
    rad_weight wq, wk, wv, wo, bq, bk, bv, bo, q_norm, k_norm;
    rad_op op_q, op_k, op_v, op_q_norm, op_k_norm, op_rope_q, op_rope_k, op_store, op_attn, op_o;
    rad_op op_clip_q, op_clip_k, op_clip_v;
    rad_weight sinks;           /* -1 without sinks */
} RadAttn;

static inline rad_op rad_attn_gemm(RadBuilder *b, const RadAttnConfig *c, rad_weight w, rad_weight bias,
                                   int64_t n_out, int64_t n_in, rad_buf in, rad_buf out)
{
    rad_op op = RAD_OP(b, "gemm_nt",
                       RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", n_out), RAD_INT("K", n_in),
                                  RAD_INT("enc", rad_weight_encoding(b, w))),
                       RAD_WEIGHTS(w, bias));
    rad_op_reads(b, op, RAD_BUFS(in));
    rad_op_writes(b, op, RAD_BUFS(out));
    return op;
}

static inline rad_op rad_attn_rope(RadBuilder *b, const RadAttnConfig *c, int n_head, rad_buf x, rad_buf pos)
{
    const RadRopeConfig *r = &c->rope;
    const rad_weight factors[1] = {r->freq_factors};
    rad_op op = rad_decl_op(b, "rope",
                            RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("n_head", n_head),
                                       RAD_INT("head_dim", c->head_dim), RAD_INT("n_rot", r->n_rot),
                                       RAD_INT("mode", r->mode), RAD_FLOAT("theta", r->theta),
                                       RAD_INT("scaling", r->scaling), RAD_FLOAT("factor", r->factor),
                                       RAD_FLOAT("low_freq_factor", r->low_freq_factor),
                                       RAD_FLOAT("high_freq_factor", r->high_freq_factor),
                                       RAD_INT("orig_ctx", r->orig_ctx), RAD_FLOAT("beta_fast", r->beta_fast),
                                       RAD_FLOAT("beta_slow", r->beta_slow), RAD_FLOAT("attn_factor", r->attn_factor),
                                       RAD_INT("truncate", r->scaling == RAD_ROPE_SCALING_YARN ? r->truncate
                                                                                           : RAD_ROPE_TRUNCATE_ON)),
                            factors, r->has_freq_factors ? 1 : 0);
    rad_op_reads(b, op, RAD_BUFS(x, pos));
    rad_op_writes(b, op, RAD_BUFS(x));
    return op;
}

static inline rad_op rad_attn_qk_norm(RadBuilder *b, const RadAttnConfig *c, int n_head, rad_weight w, rad_buf x)
{
    /* over the whole projection: one "head" of all of it */
    const int heads = c->qk_norm_whole ? 1 : n_head, dim = c->qk_norm_whole ? n_head * c->head_dim : c->head_dim;
    rad_op op = RAD_OP(b, "qk_norm",
                       RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("n_head", heads),
                                  RAD_INT("head_dim", dim), RAD_FLOAT("eps", c->norm_eps),
                                  RAD_FLOAT("w_offset", c->norm_offset)),
                       RAD_WEIGHTS(w));
    rad_op_reads(b, op, RAD_BUFS(x));
    rad_op_writes(b, op, RAD_BUFS(x));
    return op;
}

static inline rad_op rad_attn_clamp(RadBuilder *b, const RadAttnConfig *c, int width, rad_buf x)
{
    rad_op op = RAD_OP(b, "clamp",
                       RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", width), RAD_FLOAT("lo", -c->clip_qkv),
                                  RAD_FLOAT("hi", c->clip_qkv)),
                       RAD_NO_WEIGHTS);
    rad_op_reads(b, op, RAD_BUFS(x));
    rad_op_writes(b, op, RAD_BUFS(x));
    return op;
}

/* Declare the layer's weights (with their checkpoint names) and ops. */
static inline void rad_attn_declare(RadAttn *a, RadBuilder *b, const RadAttnConfig *c, const RadAttnBuffers *io)
{
    char name[RAD_NAME_MAX], hf[RAD_NAME_MAX];
    const int l = c->layer, q_width = c->n_head * c->head_dim, kv_width = c->n_head_kv * c->head_dim;
    const int enc = c->weight_enc, acc = RAD_ACCESS_PER_TOKEN;
    a->cfg = *c;

    a->wq = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_q.weight", l),
                              rad_fmt(hf, "%s.q_proj.weight", c->hf_prefix), enc, 2, q_width, c->n_embd, acc, l, 0);
    a->wk = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_k.weight", l),
                              rad_fmt(hf, "%s.k_proj.weight", c->hf_prefix), enc, 2, kv_width, c->n_embd, acc, l, 0);
    a->wv = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_v.weight", l),
                              rad_fmt(hf, "%s.v_proj.weight", c->hf_prefix), enc, 2, kv_width, c->n_embd, acc, l, 0);
    a->wo = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_output.weight", l),
                              rad_fmt(hf, "%s.o_proj.weight", c->hf_prefix), enc, 2, c->n_embd, q_width, acc, l, 0);
    /* Biases are optional: Qwen2 has q/k/v biases, Llama only with
    ** attention_bias; a checkpoint that has them gets them used. */
    a->bq = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_q.bias", l),
                              rad_fmt(hf, "%s.q_proj.bias", c->hf_prefix), RAD_ENC_F32, 1, q_width, 0, acc, l, 1);
    a->bk = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_k.bias", l),
                              rad_fmt(hf, "%s.k_proj.bias", c->hf_prefix), RAD_ENC_F32, 1, kv_width, 0, acc, l, 1);
    a->bv = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_v.bias", l),
                              rad_fmt(hf, "%s.v_proj.bias", c->hf_prefix), RAD_ENC_F32, 1, kv_width, 0, acc, l, 1);
    a->bo = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_output.bias", l),
                              rad_fmt(hf, "%s.o_proj.bias", c->hf_prefix), RAD_ENC_F32, 1, c->n_embd, 0, acc, l, 1);
    a->q_norm = a->k_norm = -1;
    if (c->qk_norm) {
        a->q_norm = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_q_norm.weight", l),
                                      rad_fmt(hf, "%s.q_norm.weight", c->hf_prefix), RAD_ENC_F32, 1,
                                      c->qk_norm_whole ? q_width : c->head_dim, 0, acc, l, c->qk_norm_optional);
        a->k_norm = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_k_norm.weight", l),
                                      rad_fmt(hf, "%s.k_norm.weight", c->hf_prefix), RAD_ENC_F32, 1,
                                      c->qk_norm_whole ? kv_width : c->head_dim, 0, acc, l, c->qk_norm_optional);
        if (c->qk_norm_optional && !(rad_weight_present(b, a->q_norm) && rad_weight_present(b, a->k_norm)))
            a->cfg.qk_norm = 0;     /* the file has none: step issues no norm */
    }

    a->op_q = rad_attn_gemm(b, c, a->wq, a->bq, q_width, c->n_embd, io->h, io->q);
    a->op_k = rad_attn_gemm(b, c, a->wk, a->bk, kv_width, c->n_embd, io->h, io->k);
    a->op_v = rad_attn_gemm(b, c, a->wv, a->bv, kv_width, c->n_embd, io->h, io->v);
    a->op_q_norm = a->op_k_norm = -1;
    if (a->cfg.qk_norm) {
        a->op_q_norm = rad_attn_qk_norm(b, c, c->n_head, a->q_norm, io->q);
        a->op_k_norm = rad_attn_qk_norm(b, c, c->n_head_kv, a->k_norm, io->k);
    }
    a->op_clip_q = a->op_clip_k = a->op_clip_v = -1;
    if (c->clip_qkv > 0) {
        a->op_clip_q = rad_attn_clamp(b, c, q_width, io->q);
        a->op_clip_k = rad_attn_clamp(b, c, kv_width, io->k);
        a->op_clip_v = rad_attn_clamp(b, c, kv_width, io->v);
    }
    a->op_rope_q = rad_attn_rope(b, c, c->n_head, io->q, io->positions);
    a->op_rope_k = rad_attn_rope(b, c, c->n_head_kv, io->k, io->positions);

    a->op_store = RAD_OP(b, "kv_store",
                         RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("n_head_kv", c->n_head_kv),
                                    RAD_INT("head_dim", c->head_dim)),
                         RAD_NO_WEIGHTS);
    rad_op_reads(b, a->op_store, RAD_BUFS(io->k, io->v));

    a->sinks = -1;
    if (c->sinks)
        a->sinks = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_sinks.weight", l),
                                     rad_fmt(hf, "%s.sinks", c->hf_prefix), RAD_ENC_F32, 1, c->n_head, 0, acc, l, 0);
    const rad_weight sinks[1] = {a->sinks};
    a->op_attn = rad_decl_op(b, "attn_paged",
                             RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("n_head", c->n_head),
                                        RAD_INT("n_head_kv", c->n_head_kv), RAD_INT("head_dim", c->head_dim),
                                        RAD_FLOAT("scale", c->scale), RAD_INT("window", c->window),
                                        RAD_FLOAT("softcap", c->softcap)),
                             sinks, c->sinks ? 1 : 0);
    rad_op_reads(b, a->op_attn, RAD_BUFS(io->q));
    rad_op_writes(b, a->op_attn, RAD_BUFS(io->att));

    a->op_o = rad_attn_gemm(b, c, a->wo, a->bo, c->n_embd, q_width, io->att, io->out);
}

/* Issue the layer's attention over the batch's rows. */
static inline void rad_attn_step(const RadAttn *a, RadCtx *c, const RadBatch *batch, const RadAttnBuffers *io)
{
    const int64_t n = batch->n_tok;
    const int layer = a->cfg.layer;
    RAD_ISSUE(c, a->op_q, n, RAD_B(io->h), RAD_W(a->wq), RAD_W(a->bq), RAD_B(io->q));
    RAD_ISSUE(c, a->op_k, n, RAD_B(io->h), RAD_W(a->wk), RAD_W(a->bk), RAD_B(io->k));
    RAD_ISSUE(c, a->op_v, n, RAD_B(io->h), RAD_W(a->wv), RAD_W(a->bv), RAD_B(io->v));
    if (a->cfg.qk_norm) {
        RAD_ISSUE(c, a->op_q_norm, n, RAD_B(io->q), RAD_W(a->q_norm));
        RAD_ISSUE(c, a->op_k_norm, n, RAD_B(io->k), RAD_W(a->k_norm));
    }
    if (a->cfg.clip_qkv > 0) {
        RAD_ISSUE(c, a->op_clip_q, n, RAD_B(io->q));
        RAD_ISSUE(c, a->op_clip_k, n, RAD_B(io->k));
        RAD_ISSUE(c, a->op_clip_v, n, RAD_B(io->v));
    }
    const RadRopeConfig *r = &a->cfg.rope;
    const RadOperand factors = r->has_freq_factors ? RAD_W(r->freq_factors) : RAD_NONE;
    RAD_ISSUE(c, a->op_rope_q, n, RAD_B(io->q), RAD_B(io->positions), factors);
    RAD_ISSUE(c, a->op_rope_k, n, RAD_B(io->k), RAD_B(io->positions), factors);
    RAD_ISSUE(c, a->op_store, n, RAD_B(io->k), RAD_B(io->v), RAD_KVL(layer));
    RAD_ISSUE(c, a->op_attn, n, RAD_B(io->q), RAD_KVL(layer), RAD_B(io->att),
              a->cfg.sinks ? RAD_W(a->sinks) : RAD_NONE);
    RAD_ISSUE(c, a->op_o, n, RAD_B(io->att), RAD_W(a->wo), RAD_W(a->bo), RAD_B(io->out));
}

#endif /* RAD_BLOCK_ATTN_H */
