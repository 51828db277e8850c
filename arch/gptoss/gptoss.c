/*
** gptoss.c: the gpt-oss plugin (GptOssForCausalLM: gpt-oss-20b, -120b).
**
**   x = embed(tokens)
**   for each layer:
**       x = x + attn(rmsnorm(x))      q/k/v/o biases; a learned sink logit per
**                                      head joins the softmax; layers alternate
**                                      between a sliding window and full
**                                      attention (layer_types); YaRN RoPE
**       x = x + moe(rmsnorm(x))       router with a bias, the top k logits
**                                      then a softmax over those k; experts
**                                      with biases and the clamped SwiGLU
**   logits = lm_head(rmsnorm(x))
**
** The checkpoint keeps each layer's experts as two stacked tensors used as
** x @ W: gate_up_proj [E, n_embd, 2 n_ff] with gate and up interleaved
** (gate at the even columns) and down_proj [E, n_ff, n_embd], plus their
** biases [E, 2 n_ff] and [E, n_embd].  The name map reads them transposed
** and de-interleaved into the stacks every MoE block uses
** (RAD_MAP_TRANSPOSED, RAD_MAP_ROWS_EVEN / _ODD), so the kernels see
** ordinary [E, rows, cols] experts; the released checkpoints' MXFP4 form
** (gate_up_proj_blocks + _scales) is read by the converter from the same
** entries.  The expert activation is swiglu_oai (docs/OPS.md).
**
** Built per weight format like every plugin; "mxfp4" is this family's own:
** the experts in mxfp4 and every other matrix in bf16, which is how the
** released checkpoints store them, so converting one loses nothing.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/rad_block_attn.h"
#include "../common/rad_block_decoder.h"
#include "../common/rad_block_head.h"
#include "../common/rad_block_moe.h"
#include "../common/rad_block_residual.h"

#ifndef RAD_QUANT
#error "build with -DRAD_QUANT=\"f32\" -DRAD_QUANT_ENC=RAD_ENC_F32 (or another format)"
#endif

/* The experts' encoding, and the other matrices'. */
#define EXPERT_ENC RAD_QUANT_ENC
#define DENSE_ENC (RAD_QUANT_ENC == RAD_ENC_MXFP4 ? RAD_ENC_BF16 : RAD_QUANT_ENC)

typedef struct Experts {
    int layer, n_embd, n_ff, n_expert, k, max_tok;
    double alpha, limit;
    rad_weight router, router_bias;
    rad_weight w_gate, w_up, w_down, b_gate, b_up, b_down;
    rad_op op_router, op_route, op_gate, op_up, op_act, op_down, op_combine;
} Experts;

typedef struct Layer {
    RadResidualNorm attn_norm;  /* layer 0: a plain norm of the embedding */
    RadAttn attn;
    RadResidualNorm ffn_norm;
    Experts moe;
} Layer;

typedef struct Model {
    int n_layers;
    RadDecoderBuffers io;
    RadMoeBuffers moe_io;
    RadHead head;
    RadResidualNorm out_norm;
    Layer *layers;              /* (n_layers) */
} Model;

static const char *const hf_names[] = {"GptOssForCausalLM", NULL};

const char *const *rad_arch_hf_names(void) { return hf_names; }

/* GGUF files of gpt-oss (llama.cpp's "gpt-oss").  The converter writes the
** experts already split into ffn_gate_exps / ffn_up_exps stacks, under the
** names this plugin declares, so a file binds as it stands.  GGUF has no
** key for the clamped SwiGLU's constants: llama.cpp computes it with alpha
** 1.702 and limit 7.0 whatever the checkpoint said (the released models'
** values), so a file implies them.  Nor for layer_types: llama.cpp slides
** on every other layer from layer 0, as layer_is_sliding does without
** them. */
static const RadMetaKV gguf_implied[] = {
    {.key = "swiglu_alpha", .type = RAD_META_FLOAT, .i = 0, .f = 1.702},
    {.key = "swiglu_limit", .type = RAD_META_FLOAT, .i = 0, .f = 7.0},
};

static const RadGgufFamily gguf_families[] = {
    {RAD_SIZED(RadGgufFamily), "gpt-oss", "GptOssForCausalLM", 2, gguf_implied},
    {0},
};

const RadGgufFamily *rad_arch_gguf_families(void) { return gguf_families; }

int rad_arch_probe(const RadModelMeta *meta, RadArchProbe *out)
{
    (void)meta;
    out->shape_probe_ok = 1;    /* each declare builds an instance of its own */
    out->kv_f32_ok = 1;
    return RAD_OK;
}

/* ------------------------------------------------------------ declaring */

/* RoPE: gpt-oss ships YaRN (factor 32 over 4096 positions, betas 32 and 1,
** truncate false), in rope_parameters (transformers 5) or rope_scaling
** with a top-level rope_theta (the released config.json).  The keys that
** are absent take transformers' defaults, which the rope op knows as 0. */
static int rope_config(RadBuilder *b, const RadModelMeta *meta, RadRopeConfig *r)
{
    const char *prefix = rad_meta_has(meta, "rope_parameters.rope_type") ? "rope_parameters" : "rope_scaling";
    char key[80];
#define KEY(k) (snprintf(key, sizeof key, "%s.%s", prefix, k), key)
    const char *type = rad_meta_gets(meta, KEY("rope_type"), NULL);
    if (!type) type = rad_meta_gets(meta, KEY("type"), "default");
    memset(r, 0, sizeof *r);
    r->n_rot = meta->head_dim;
    r->mode = RAD_ROPE_MODE_NEOX;
    r->theta = meta->rope_theta;
    r->factor = 1.0;
    if (strcmp(type, "default") == 0) return RAD_OK;
    if (strcmp(type, "yarn") != 0)
        return rad_decl_fail(b, "RoPE scaling '%s' is not served by the gpt-oss plugin (default and yarn are)", type);
    double factor = rad_meta_getf(meta, KEY("factor"), 1.0);
#undef KEY
    return rad_rope_yarn_config(b, meta, prefix, factor, r);
}

/* Layer l slides when layer_types says so; a config without layer_types
** (older exports) alternates from a sliding layer 0, as gpt-oss does. */
static int layer_is_sliding(const RadModelMeta *meta, int l)
{
    char key[48];
    snprintf(key, sizeof key, "layer_types.%d", l);
    const char *type = rad_meta_gets(meta, key, NULL);
    if (type) return strcmp(type, "sliding_attention") == 0;
    return l % 2 == 0;
}

/* One stacked projection of the experts, [n_expert, rows, cols], read from
** the checkpoint's tensor `hf` through `flags`; a stacked bias when cols
** is 0 ([n_expert, rows], f32). */
static rad_weight expert_stack(RadBuilder *b, const Experts *x, const char *name, const char *hf, int flags,
                               int64_t rows, int64_t cols)
{
    RadWeightDecl d = {
        RAD_SIZED(RadWeightDecl), .rank = cols ? 3 : 2, .shape = {x->n_expert, rows, cols},
        .enc = cols ? rad_enc_for_cols(EXPERT_ENC, cols) : RAD_ENC_F32, .access = RAD_ACCESS_CONDITIONAL,
        .shard = RAD_SHARD_NONE, .group = RAD_MOE_GROUP(x->layer, x->n_expert), .n_slices = x->n_expert,
    };
    rad_weight w = rad_decl_weight(b, name, &d);
    if (w >= 0) rad_decl_name_map(b, name, RAD_MAP_COPY | flags, &hf, 1);
    return w;
}

static rad_op expert_gemm(RadBuilder *b, const Experts *x, rad_weight w, rad_weight bias, int64_t n_out,
                          int64_t n_in, int per_slot, rad_buf in, rad_buf ids, rad_buf out)
{
    rad_op op = RAD_OP(b, "moe_gemm",
                       RAD_PARAMS(RAD_RANGE("M", 1, x->max_tok), RAD_INT("k", x->k), RAD_INT("N", n_out),
                                  RAD_INT("K", n_in), RAD_INT("enc", rad_weight_encoding(b, w)),
                                  RAD_INT("x_per_slot", per_slot)),
                       RAD_WEIGHTS(w, bias));
    rad_op_reads(b, op, RAD_BUFS(in, ids));
    rad_op_writes(b, op, RAD_BUFS(out));
    return op;
}

static void experts_declare(Experts *x, RadBuilder *b, const RadMoeBuffers *io)
{
    char name[RAD_NAME_MAX], hf[RAD_NAME_MAX];
    const int l = x->layer, E = x->n_embd, F = x->n_ff;
    x->router = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_gate_inp.weight", l),
                                  rad_fmt(hf, "model.layers.%d.mlp.router.weight", l), RAD_ENC_F32, 2, x->n_expert,
                                  E, RAD_ACCESS_PER_TOKEN, l, 0);
    x->router_bias = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_gate_inp.bias", l),
                                       rad_fmt(hf, "model.layers.%d.mlp.router.bias", l), RAD_ENC_F32, 1,
                                       x->n_expert, 0, RAD_ACCESS_PER_TOKEN, l, 0);
    rad_fmt(hf, "model.layers.%d.mlp.experts.gate_up_proj", l);
    x->w_gate = expert_stack(b, x, rad_fmt(name, "blk.%d.ffn_gate_exps.weight", l), hf,
                             RAD_MAP_TRANSPOSED | RAD_MAP_ROWS_EVEN, F, E);
    x->w_up = expert_stack(b, x, rad_fmt(name, "blk.%d.ffn_up_exps.weight", l), hf,
                           RAD_MAP_TRANSPOSED | RAD_MAP_ROWS_ODD, F, E);
    rad_fmt(hf, "model.layers.%d.mlp.experts.down_proj", l);
    x->w_down = expert_stack(b, x, rad_fmt(name, "blk.%d.ffn_down_exps.weight", l), hf, RAD_MAP_TRANSPOSED, E, F);
    rad_fmt(hf, "model.layers.%d.mlp.experts.gate_up_proj_bias", l);
    x->b_gate = expert_stack(b, x, rad_fmt(name, "blk.%d.ffn_gate_exps.bias", l), hf, RAD_MAP_ROWS_EVEN, F, 0);
    x->b_up = expert_stack(b, x, rad_fmt(name, "blk.%d.ffn_up_exps.bias", l), hf, RAD_MAP_ROWS_ODD, F, 0);
    rad_fmt(hf, "model.layers.%d.mlp.experts.down_proj_bias", l);
    x->b_down = expert_stack(b, x, rad_fmt(name, "blk.%d.ffn_down_exps.bias", l), hf, 0, E, 0);

    x->op_router = RAD_OP(b, "gemm_nt",
                          RAD_PARAMS(RAD_RANGE("M", 1, x->max_tok), RAD_INT("N", x->n_expert), RAD_INT("K", E),
                                     RAD_INT("enc", rad_weight_encoding(b, x->router))),
                          RAD_WEIGHTS(x->router, x->router_bias));
    rad_op_reads(b, x->op_router, RAD_BUFS(io->h));
    rad_op_writes(b, x->op_router, RAD_BUFS(io->logits));
    /* the router's bias is part of its logits (a Linear's), not a choice-only bias */
    x->op_route = RAD_OP(b, "router_topk",
                         RAD_PARAMS(RAD_RANGE("M", 1, x->max_tok), RAD_INT("n_expert", x->n_expert), RAD_INT("k", x->k),
                                    RAD_INT("mode", RAD_ROUTER_TOPK_SOFTMAX), RAD_INT("renorm", RAD_ROUTER_RENORM_OFF),
                                    RAD_FLOAT("scale", 1.0), RAD_INT("n_group", 0), RAD_INT("topk_group", 0)),
                         RAD_NO_WEIGHTS);
    rad_op_reads(b, x->op_route, RAD_BUFS(io->logits));
    rad_op_writes(b, x->op_route, RAD_BUFS(io->ids, io->weights));
    x->op_gate = expert_gemm(b, x, x->w_gate, x->b_gate, F, E, RAD_MOE_X_PER_ROW, io->h, io->ids, io->gate);
    x->op_up = expert_gemm(b, x, x->w_up, x->b_up, F, E, RAD_MOE_X_PER_ROW, io->h, io->ids, io->up);
    x->op_act = RAD_OP(b, "swiglu_oai",
                       RAD_PARAMS(RAD_RANGE("M", 1, (int64_t)x->max_tok * x->k), RAD_INT("N", F),
                                  RAD_FLOAT("alpha", x->alpha), RAD_FLOAT("limit", x->limit)),
                       RAD_NO_WEIGHTS);
    rad_op_reads(b, x->op_act, RAD_BUFS(io->gate, io->up));
    rad_op_writes(b, x->op_act, RAD_BUFS(io->act));
    x->op_down = expert_gemm(b, x, x->w_down, x->b_down, E, F, RAD_MOE_X_PER_SLOT, io->act, io->ids, io->y);
    x->op_combine = RAD_OP(b, "moe_combine",
                           RAD_PARAMS(RAD_RANGE("M", 1, x->max_tok), RAD_INT("k", x->k), RAD_INT("N", E)),
                           RAD_NO_WEIGHTS);
    rad_op_reads(b, x->op_combine, RAD_BUFS(io->y, io->weights));
    rad_op_writes(b, x->op_combine, RAD_BUFS(io->out));
}

int rad_arch_declare(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx, void **instance)
{
    const int E = meta->n_embd, V = meta->n_vocab, L = meta->n_layers;
    const int D = meta->head_dim, H = meta->n_head, HKV = meta->n_head_kv;
    const int n_expert = meta->n_expert, k = meta->n_expert_used;
    const int F = (int)rad_meta_geti(meta, "model.n_ff_expert", meta->n_ff);
    if (H <= 0 || HKV <= 0 || D <= 0 || H % HKV != 0 || L <= 0)
        return rad_decl_fail(b, "gpt-oss: heads %d, kv heads %d, head_dim %d, layers %d do not make a model", H,
                             HKV, D, L);
    if (n_expert <= 0 || k <= 0 || k > n_expert || F <= 0)
        return rad_decl_fail(b, "gpt-oss: num_experts_per_tok = %d with %d experts (num_local_experts) of size %d: "
                             "it must be 1..%d", k, n_expert, F, n_expert);
    const double alpha = rad_meta_getf(meta, "swiglu_alpha", 1.702), limit = rad_meta_getf(meta, "swiglu_limit", 7.0);
    if (!(limit > 0) || !isfinite(limit) || !isfinite(alpha))
        return rad_decl_fail(b, "gpt-oss: swiglu_limit = %g and swiglu_alpha = %g: the limit must be positive and "
                             "both finite", limit, alpha);

    Model *m = calloc(1, sizeof *m);
    if (!m) return RAD_E_NOMEM;
    *instance = m;
    m->n_layers = L;
    m->layers = calloc((size_t)L, sizeof *m->layers);
    if (!m->layers) return RAD_E_NOMEM;

    RadRopeConfig rope;
    int failed = rope_config(b, meta, &rope);  /* recorded; declare goes on */
    int window = (int)rad_meta_geti(meta, "sliding_window", 0);
    if (window < 0 || window >= ctx->max_ctx) window = 0;   /* never reached: plain causal */

    const int T = ctx->max_tok, QW = H * D, KW = HKV * D;
    rad_decoder_buffers_declare(b, &m->io, T, ctx->max_out_rows, E, QW, KW, 1, V);
    rad_moe_buffers_declare(b, &m->moe_io, T, E, F, n_expert, k, m->io.h, m->io.delta);
    rad_note(b, "%d layers route to %d experts, %d per token", L, n_expert, k);
    const RadNormConfig nc = {.n_embd = E, .max_tok = T, .eps = meta->rms_eps, .w_offset = 0.0};

    RadKvGroupDecl full_decl = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_FULL, .n_head_kv = HKV, .head_dim = D};
    RadKvGroupDecl window_decl = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_WINDOW, .n_head_kv = HKV, .head_dim = D,
                                  .window = window};
    rad_kv kv_full = -1, kv_window = -1;

    rad_head_declare_embedding(b, &m->head, &m->io, DENSE_ENC, V, E, T);

    char name[RAD_NAME_MAX], hf_name[RAD_NAME_MAX], prefix[RAD_NAME_MAX];
    for (int l = 0; l < L; l++) {
        Layer *layer = &m->layers[l];
        rad_weight attn_norm = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_norm.weight", l),
                                                 rad_fmt(hf_name, "model.layers.%d.input_layernorm.weight", l),
                                                 RAD_ENC_F32, 1, E, 0, RAD_ACCESS_PER_TOKEN, l, 0);
        rad_weight ffn_norm = rad_weight_mapped(b, rad_fmt(name, "blk.%d.post_attention_norm.weight", l),
                                                rad_fmt(hf_name, "model.layers.%d.post_attention_layernorm.weight", l),
                                                RAD_ENC_F32, 1, E, 0, RAD_ACCESS_PER_TOKEN, l, 0);
        rad_residual_norm_declare(b, &layer->attn_norm, &nc, &m->io, attn_norm, l == 0);

        int layer_window = window > 0 && layer_is_sliding(meta, l) ? window : 0;
        rad_kv kv = layer_window ? kv_window : kv_full;
        if (kv < 0) {
            kv = layer_window ? rad_decl_kv_group(b, "kv_window", &window_decl) : rad_decl_kv_group(b, "kv", &full_decl);
            if (layer_window) kv_window = kv; else kv_full = kv;
            if (layer_window) rad_note(b, "sliding window of %d positions on alternate layers", window);
        }
        RadAttnConfig ac = {
            .layer = l, .n_embd = E, .n_head = H, .n_head_kv = HKV, .head_dim = D, .weight_enc = DENSE_ENC,
            .norm_eps = meta->rms_eps, .scale = 1.0 / sqrt((double)D), .window = layer_window, .rope = rope,
            .hf_prefix = rad_fmt(prefix, "model.layers.%d.self_attn", l), .max_tok = T, .sinks = 1,
        };
        rad_attn_declare(&layer->attn, b, &ac, &m->io.attn);
        rad_bind_layer_kv(b, l, kv);

        rad_residual_norm_declare(b, &layer->ffn_norm, &nc, &m->io, ffn_norm, 0);
        layer->moe = (Experts){.layer = l, .n_embd = E, .n_ff = F, .n_expert = n_expert, .k = k, .max_tok = T,
                               .alpha = alpha, .limit = limit};
        experts_declare(&layer->moe, b, &m->moe_io);
    }

    rad_weight out_norm = rad_weight_mapped(b, "output_norm.weight", "model.norm.weight", RAD_ENC_F32, 1, E, 0,
                                            RAD_ACCESS_PER_TOKEN, -1, 0);
    rad_residual_norm_declare(b, &m->out_norm, &nc, &m->io, out_norm, 0);
    rad_head_declare_output(b, &m->head, &m->io, DENSE_ENC, V, E, (int)rad_meta_geti(meta, "tie_word_embeddings", 0),
                            0.0, ctx->max_out_rows);
    return failed;
}

void rad_arch_release(void *instance)
{
    Model *m = instance;
    if (!m) return;
    free(m->layers);
    free(m);
}

/* ------------------------------------------------------------- stepping */

static void experts_step(const Experts *x, RadCtx *c, const RadBatch *batch, const RadMoeBuffers *io)
{
    const int64_t n = batch->n_tok;
    RAD_ISSUE(c, x->op_router, n, RAD_B(io->h), RAD_W(x->router), RAD_W(x->router_bias), RAD_B(io->logits));
    RAD_ISSUE(c, x->op_route, n, RAD_B(io->logits), RAD_NONE, RAD_B(io->ids), RAD_B(io->weights));
    RAD_ISSUE(c, x->op_gate, n, RAD_B(io->h), RAD_B(io->ids), RAD_W(x->w_gate), RAD_W(x->b_gate), RAD_B(io->gate));
    RAD_ISSUE(c, x->op_up, n, RAD_B(io->h), RAD_B(io->ids), RAD_W(x->w_up), RAD_W(x->b_up), RAD_B(io->up));
    RAD_ISSUE(c, x->op_act, n * x->k, RAD_B(io->gate), RAD_B(io->up), RAD_B(io->act));
    RAD_ISSUE(c, x->op_down, n, RAD_B(io->act), RAD_B(io->ids), RAD_W(x->w_down), RAD_W(x->b_down), RAD_B(io->y));
    RAD_ISSUE(c, x->op_combine, n, RAD_B(io->y), RAD_B(io->weights), RAD_B(io->out));
}

void rad_arch_step(void *instance, RadCtx *c, const RadBatch *batch)
{
    const Model *m = instance;
    const int64_t n = batch->n_tok;
    rad_head_step_embedding(c, &m->head, batch, &m->io);
    for (int l = 0; l < m->n_layers; l++) {
        const Layer *layer = &m->layers[l];
        rad_residual_norm_step(c, &layer->attn_norm, n, &m->io);
        rad_attn_step(&layer->attn, c, batch, &m->io.attn);
        rad_residual_norm_step(c, &layer->ffn_norm, n, &m->io);
        experts_step(&layer->moe, c, batch, &m->moe_io);
    }
    rad_residual_norm_step(c, &m->out_norm, n, &m->io);
    rad_head_step_output(c, &m->head, batch, &m->io);
}

RAD_ARCH_PLUGIN(gptoss, "gptoss", RAD_QUANT, "1.0", "gpt-oss (GptOssForCausalLM)")

/* ---------------------------------------------------------- chat format */

/* The harmony format: system and developer messages, the analysis channel
** as reasoning, the final channel as the reply, tool calls on commentary
** (arch/common/rad_chat_formats.h). */
#include "../common/rad_chat_formats.h"

const RadChatFormat *rad_arch_chat_format(const RadModelMeta *meta)
{
    (void)meta;
    return &rad_chat_fmt_harmony;
}
