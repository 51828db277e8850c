/*
** rad_block_moe.h: the routed mixture-of-experts block of a decoder layer,
** in place of the dense MLP (rad_block_mlp.h).
**
** In PyTorch terms (Qwen3-MoE's, Mixtral's and OLMoE's sparse block):
**     logits  = h @ W_router.T                        (n_tok, n_expert)
**     w, ids  = topk(softmax(logits), k)               renormalised when the
**                                                      family says so
**     out[t]  = sum_j w[t, j] * expert[ids[t, j]](h[t])
**     expert(x) = down(silu(gate(x)) * up(x))
** As ops (docs/OPS.md, "Mixture of experts"): gemm_nt for the router,
** router_topk, moe_gemm for gate and up (the k slots of a row share its
** input), silu_mul over the n_tok * k slot rows, moe_gemm for down (one
** input row per slot), moe_combine into the block's output.
**
** Each projection's experts are one stacked weight [n_expert, rows, cols]
** with access CONDITIONAL: slice e is expert e, movement unit group + e.
** The name map stacks the checkpoint's per-expert tensors (experts.N.*)
** into it; a GGUF stores the stacks already (blk.N.ffn_*_exps.weight),
** which are the names declared here.  The router stays f32 whatever the
** plugin's format: it is small, and a quantized router would move choices.
**
** GLM-4.5 routes by sigmoid scores instead (router_topk mode 2): a
** per-expert correction bias (e_score_correction_bias, GGUF's
** blk.N.exp_probs_b.bias) joins the scores for the choice only, the choice
** may be limited to the best topk_group of n_group expert groups, and the
** chosen sigmoids are renormalised and scaled by the routed scaling factor.
**
** A shared expert (Qwen2-MoE, GLM-4.5) runs beside the routed ones on every token:
**     s       = shared_expert(h)                       a SwiGLU MLP of its own size
**     out[t] += sigmoid(h[t] @ W_shared_gate.T) * s[t]  W_shared_gate (1, n_embd)
** As ops: the dense MLP's chain (rad_block_mlp.h, names "ffn_*_shexp" as
** GGUF spells them), gemm_nt for the gate's one logit a row, sigmoid_gate,
** and add into the routed output (GLM-4.5's shared experts have no gate:
** their output is added as it is).  The gate stays f32 like the router: it
** scales a whole row.
*/
#ifndef RAD_BLOCK_MOE_H
#define RAD_BLOCK_MOE_H

#include <stdlib.h>

#include "rad_block_mlp.h"
#include "rad_block_util.h"
#include "../../kernels/ops/rad_op_values.h"

/* The first movement group of layer l's experts: expert e of the layer
** moves as RAD_MOE_GROUP(l, n_expert) + e: from RAD_GROUP_EXPERTS up, above
** every layer's group (the layer index), one run of n_expert groups per
** layer. */
#define RAD_MOE_GROUP(l, n_expert) ((int32_t)RAD_GROUP_EXPERTS + (int32_t)(l) * (int32_t)(n_expert))

typedef struct RadMoeConfig {
    int layer;
    int n_embd;
    int n_ff;                   /* each expert's intermediate size */
    int n_expert, k;            /* experts, and how many each token uses */
    int weight_enc;             /* of the expert stacks (< 0: as stored) */
    int mode;                   /* RAD_ROUTER_* */
    int renorm;                 /* RAD_ROUTER_RENORM_*: norm_topk_prob */
    double scale;               /* routed scaling factor (1 for these families) */
    const char *hf_prefix;      /* "model.layers.3.mlp" */
    const char *hf_gate, *hf_up, *hf_down;  /* an expert's projections: "gate_proj" or Mixtral's "w1" */
    int32_t group;              /* the layer's first movement group: expert e moves as group + e */
    int n_ff_shared;            /* the shared expert's intermediate size; 0: none (< 0: refused) */
    int shared_gated;           /* its output scaled by sigmoid of a (1, n_embd) gate (Qwen2-MoE) */
    const char *hf_shared;      /* its checkpoint name under hf_prefix: "shared_expert" */
    int max_tok;
    int score_bias;             /* a (n_expert) f32 correction bias joins the choice scores (GLM-4.5) */
    int n_group, topk_group;    /* group-limited choice: the best topk_group of n_group groups; 0: none */
} RadMoeConfig;

/* The buffers the block reads and writes, shared by every MoE layer. */
typedef struct RadMoeBuffers {
    rad_buf h;                  /* in [T, n_embd] */
    rad_buf logits;             /* [T, n_expert] router logits */
    rad_buf ids;                /* [T, k] i32 chosen experts */
    rad_buf weights;            /* [T, k] their weights */
    rad_buf gate, up, act;      /* [T * k, n_ff] per slot */
    rad_buf y;                  /* [T * k, n_embd] per slot */
    rad_buf out;                /* out [T, n_embd] */
    RadMlpBuffers shared;       /* the shared expert's: h in, [T, n_ff_shared] scratch, [T, n_embd] out */
    rad_buf shared_g;           /* [T, 1] its gate's logit */
} RadMoeBuffers;

typedef struct RadMoe {
    RadMoeConfig cfg;
    rad_weight router;          /* (n_expert, n_embd) f32 */
    rad_weight w_gate, w_up;    /* (n_expert, n_ff, n_embd) stacked */
    rad_weight w_down;          /* (n_expert, n_embd, n_ff) stacked */
    rad_op op_router, op_route, op_gate, op_up, op_act, op_down, op_combine;
    int has_shared;
    RadMlp shared;              /* (n_ff_shared, n_embd) gate/up, (n_embd, n_ff_shared) down */
    rad_weight w_shared_gate;   /* (1, n_embd) f32, or -1 when ungated */
    rad_op op_shared_logit, op_shared_scale, op_shared_add;
    rad_weight score_bias;      /* (n_expert) f32 correction bias, or -1 */
} RadMoe;

/* Declare the MoE buffers for max_tok rows (T), given the h and out the
** decoder already has. */
static inline void rad_moe_buffers_declare(RadBuilder *b, RadMoeBuffers *io, int T, int n_embd, int n_ff,
                                           int n_expert, int k, rad_buf h, rad_buf out)
{
    RadBufferDecl ids = {RAD_SIZED(RadBufferDecl), .kind = RAD_BUF_TRANSIENT, .enc = RAD_ENC_I32, .rows = T,
                         .cols = k};
    io->h = h;
    io->out = out;
    io->logits = rad_activation(b, "moe_logits", T, n_expert);
    io->ids = rad_decl_buffer(b, "moe_ids", &ids);
    io->weights = rad_activation(b, "moe_weights", T, k);
    io->gate = rad_activation(b, "moe_gate", (int64_t)T * k, n_ff);
    io->up = rad_activation(b, "moe_up", (int64_t)T * k, n_ff);
    io->act = rad_activation(b, "moe_act", (int64_t)T * k, n_ff);
    io->y = rad_activation(b, "moe_y", (int64_t)T * k, n_embd);
}

/* Declare the shared expert's buffers (after rad_moe_buffers_declare), for
** a shared expert of n_ff_shared; gated: with the [T, 1] gate logits. */
static inline void rad_moe_shared_buffers_declare(RadBuilder *b, RadMoeBuffers *io, int T, int n_embd,
                                                  int n_ff_shared, int gated)
{
    io->shared = (RadMlpBuffers){
        .h = io->h, .gate = rad_activation(b, "moe_shared_gate", T, n_ff_shared),
        .up = rad_activation(b, "moe_shared_up", T, n_ff_shared),
        .act = rad_activation(b, "moe_shared_act", T, n_ff_shared),
        .out = rad_activation(b, "moe_shared_out", T, n_embd),
    };
    io->shared_g = gated ? rad_activation(b, "moe_shared_g", T, 1) : -1;
}

/* One projection's stack, mapped from the checkpoint's per-expert tensors
** "<prefix>.experts.<e>.<proj>.weight". */
static inline rad_weight rad_moe_stack(RadBuilder *b, const RadMoeConfig *c, const char *name, const char *proj,
                                       int64_t rows, int64_t cols)
{
    RadWeightDecl d = {
        RAD_SIZED(RadWeightDecl), .enc = rad_enc_for_cols(c->weight_enc, cols), .rank = 3,
        .shape = {c->n_expert, rows, cols}, .access = RAD_ACCESS_CONDITIONAL, .shard = RAD_SHARD_NONE,
        .group = c->group, .n_slices = c->n_expert,
    };
    rad_weight w = rad_decl_weight(b, name, &d);
    if (w < 0) return w;
    char *names = malloc((size_t)c->n_expert * RAD_NAME_MAX);
    const char **sources = malloc((size_t)c->n_expert * sizeof *sources);
    if (names && sources) {
        for (int e = 0; e < c->n_expert; e++)
            sources[e] = rad_fmt(names + (size_t)e * RAD_NAME_MAX, "%s.experts.%d.%s.weight", c->hf_prefix, e, proj);
        rad_decl_name_map(b, name, RAD_MAP_CONCAT, sources, c->n_expert);
    } else {
        rad_decl_fail(b, "out of memory naming the experts of '%s'", name);
    }
    free(names);
    free(sources);
    return w;
}

static inline rad_op rad_moe_gemm_op(RadBuilder *b, const RadMoeConfig *c, rad_weight w, int64_t n_out, int64_t n_in,
                                     int per_slot, rad_buf in, rad_buf ids, rad_buf out)
{
    rad_op op = RAD_OP(b, "moe_gemm",
                       RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("k", c->k), RAD_INT("N", n_out),
                                  RAD_INT("K", n_in), RAD_INT("enc", rad_weight_encoding(b, w)),
                                  RAD_INT("x_per_slot", per_slot)),
                       RAD_WEIGHTS(w));
    rad_op_reads(b, op, RAD_BUFS(in, ids));
    rad_op_writes(b, op, RAD_BUFS(out));
    return op;
}

static inline void rad_moe_declare(RadMoe *m, RadBuilder *b, const RadMoeConfig *c, const RadMoeBuffers *io)
{
    char name[RAD_NAME_MAX], hf[RAD_NAME_MAX];
    const int l = c->layer;
    m->cfg = *c;
    if (c->n_expert <= 0 || c->k <= 0 || c->k > c->n_expert || c->n_ff <= 0) {
        /* one message for every layer (the builder counts repeats) */
        rad_decl_fail(b, "num_experts_per_tok = %d with %d experts of size %d: it must be 1..%d", c->k, c->n_expert,
                      c->n_ff, c->n_expert);
        m->router = m->w_gate = m->w_up = m->w_down = m->w_shared_gate = m->score_bias = -1;
        m->has_shared = 0;
        return;
    }
    m->router = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_gate_inp.weight", l),
                                  rad_fmt(hf, "%s.gate.weight", c->hf_prefix),
                                  c->weight_enc < 0 ? c->weight_enc : RAD_ENC_F32, 2, c->n_expert, c->n_embd,
                                  RAD_ACCESS_PER_TOKEN, l, 0);
    m->w_gate = rad_moe_stack(b, c, rad_fmt(name, "blk.%d.ffn_gate_exps.weight", l), c->hf_gate, c->n_ff, c->n_embd);
    m->w_up = rad_moe_stack(b, c, rad_fmt(name, "blk.%d.ffn_up_exps.weight", l), c->hf_up, c->n_ff, c->n_embd);
    m->w_down = rad_moe_stack(b, c, rad_fmt(name, "blk.%d.ffn_down_exps.weight", l), c->hf_down, c->n_embd, c->n_ff);

    m->op_router = RAD_OP(b, "gemm_nt",
                          RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", c->n_expert), RAD_INT("K", c->n_embd),
                                     RAD_INT("enc", rad_weight_encoding(b, m->router))),
                          RAD_WEIGHTS(m->router));
    rad_op_reads(b, m->op_router, RAD_BUFS(io->h));
    rad_op_writes(b, m->op_router, RAD_BUFS(io->logits));
    m->score_bias = -1;
    if (c->score_bias)
        m->score_bias = rad_weight_mapped(b, rad_fmt(name, "blk.%d.exp_probs_b.bias", l),
                                          rad_fmt(hf, "%s.gate.e_score_correction_bias", c->hf_prefix),
                                          c->weight_enc < 0 ? c->weight_enc : RAD_ENC_F32, 1, c->n_expert, 0,
                                          RAD_ACCESS_PER_TOKEN, l, 0);
    const rad_weight route_bias[1] = {m->score_bias};
    m->op_route = rad_decl_op(b, "router_topk",
                              RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("n_expert", c->n_expert),
                                         RAD_INT("k", c->k), RAD_INT("mode", c->mode), RAD_INT("renorm", c->renorm),
                                         RAD_FLOAT("scale", c->scale > 0 ? c->scale : 1.0),
                                         RAD_INT("n_group", c->n_group), RAD_INT("topk_group", c->topk_group)),
                              route_bias, c->score_bias ? 1 : 0);
    rad_op_reads(b, m->op_route, RAD_BUFS(io->logits));
    rad_op_writes(b, m->op_route, RAD_BUFS(io->ids, io->weights));
    m->op_gate = rad_moe_gemm_op(b, c, m->w_gate, c->n_ff, c->n_embd, RAD_MOE_X_PER_ROW, io->h, io->ids, io->gate);
    m->op_up = rad_moe_gemm_op(b, c, m->w_up, c->n_ff, c->n_embd, RAD_MOE_X_PER_ROW, io->h, io->ids, io->up);
    m->op_act = RAD_OP(b, "silu_mul", RAD_PARAMS(RAD_RANGE("M", 1, (int64_t)c->max_tok * c->k), RAD_INT("N", c->n_ff)),
                       RAD_NO_WEIGHTS);
    rad_op_reads(b, m->op_act, RAD_BUFS(io->gate, io->up));
    rad_op_writes(b, m->op_act, RAD_BUFS(io->act));
    m->op_down = rad_moe_gemm_op(b, c, m->w_down, c->n_embd, c->n_ff, RAD_MOE_X_PER_SLOT, io->act, io->ids, io->y);
    m->op_combine = RAD_OP(b, "moe_combine",
                           RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("k", c->k), RAD_INT("N", c->n_embd)),
                           RAD_NO_WEIGHTS);
    rad_op_reads(b, m->op_combine, RAD_BUFS(io->y, io->weights));
    rad_op_writes(b, m->op_combine, RAD_BUFS(io->out));

    m->has_shared = c->n_ff_shared > 0;
    m->w_shared_gate = -1;
    m->op_shared_logit = m->op_shared_scale = m->op_shared_add = -1;
    if (c->n_ff_shared < 0)
        rad_decl_fail(b, "shared_expert_intermediate_size: it must be a positive size, or 0 for no shared expert");
    if (!m->has_shared) return;
    char prefix[RAD_NAME_MAX];
    RadMlpConfig sc = {.layer = l, .n_embd = c->n_embd, .n_ff = c->n_ff_shared, .weight_enc = c->weight_enc,
                       .gelu = 0, .hf_prefix = rad_fmt(prefix, "%s.%s", c->hf_prefix, c->hf_shared),
                       .suffix = "_shexp", .max_tok = c->max_tok};
    rad_mlp_declare(&m->shared, b, &sc, &io->shared);
    if (c->shared_gated) {
        m->w_shared_gate = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_gate_inp_shexp.weight", l),
                                             rad_fmt(hf, "%s.%s_gate.weight", c->hf_prefix, c->hf_shared),
                                             c->weight_enc < 0 ? c->weight_enc : RAD_ENC_F32, 2, 1, c->n_embd,
                                             RAD_ACCESS_PER_TOKEN, l, 0);
        m->op_shared_logit = RAD_OP(b, "gemm_nt",
                                    RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", 1),
                                               RAD_INT("K", c->n_embd),
                                               RAD_INT("enc", rad_weight_encoding(b, m->w_shared_gate))),
                                    RAD_WEIGHTS(m->w_shared_gate));
        rad_op_reads(b, m->op_shared_logit, RAD_BUFS(io->h));
        rad_op_writes(b, m->op_shared_logit, RAD_BUFS(io->shared_g));
        m->op_shared_scale = RAD_OP(b, "sigmoid_gate",
                                    RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", c->n_embd)),
                                    RAD_NO_WEIGHTS);
        rad_op_reads(b, m->op_shared_scale, RAD_BUFS(io->shared.out, io->shared_g));
        rad_op_writes(b, m->op_shared_scale, RAD_BUFS(io->shared.out));
    }
    m->op_shared_add = RAD_OP(b, "add", RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", c->n_embd)),
                              RAD_NO_WEIGHTS);
    rad_op_reads(b, m->op_shared_add, RAD_BUFS(io->out, io->shared.out));
    rad_op_writes(b, m->op_shared_add, RAD_BUFS(io->out));
}

static inline void rad_moe_step(const RadMoe *m, RadCtx *c, const RadBatch *batch, const RadMoeBuffers *io)
{
    const int64_t n = batch->n_tok;
    RAD_ISSUE(c, m->op_router, n, RAD_B(io->h), RAD_W(m->router), RAD_NONE, RAD_B(io->logits));
    RAD_ISSUE(c, m->op_route, n, RAD_B(io->logits), m->score_bias >= 0 ? RAD_W(m->score_bias) : RAD_NONE,
              RAD_B(io->ids), RAD_B(io->weights));
    RAD_ISSUE(c, m->op_gate, n, RAD_B(io->h), RAD_B(io->ids), RAD_W(m->w_gate), RAD_NONE, RAD_B(io->gate));
    RAD_ISSUE(c, m->op_up, n, RAD_B(io->h), RAD_B(io->ids), RAD_W(m->w_up), RAD_NONE, RAD_B(io->up));
    RAD_ISSUE(c, m->op_act, n * m->cfg.k, RAD_B(io->gate), RAD_B(io->up), RAD_B(io->act));
    RAD_ISSUE(c, m->op_down, n, RAD_B(io->act), RAD_B(io->ids), RAD_W(m->w_down), RAD_NONE, RAD_B(io->y));
    RAD_ISSUE(c, m->op_combine, n, RAD_B(io->y), RAD_B(io->weights), RAD_B(io->out));
    if (!m->has_shared) return;
    rad_mlp_step(&m->shared, c, batch, &io->shared);
    if (m->w_shared_gate >= 0) {
        RAD_ISSUE(c, m->op_shared_logit, n, RAD_B(io->h), RAD_W(m->w_shared_gate), RAD_NONE, RAD_B(io->shared_g));
        RAD_ISSUE(c, m->op_shared_scale, n, RAD_B(io->shared.out), RAD_B(io->shared_g), RAD_B(io->shared.out));
    }
    RAD_ISSUE(c, m->op_shared_add, n, RAD_B(io->out), RAD_B(io->shared.out), RAD_B(io->out));
}

#endif /* RAD_BLOCK_MOE_H */
