/*
** gemma3.c: the Gemma 3 text model plugin — Hugging Face Gemma3ForCausalLM,
** and the language model of Gemma3ForConditionalGeneration (its vision tower
** is not declared, so the converter leaves it behind):
**
**   x = embed(tokens) * sqrt(n_embd)
**   for each layer:
**       x = x + post_attention_norm(attn(attn_norm(x)))
**                                      per-head q/k norms; most layers attend
**                                      through a sliding window with the local
**                                      RoPE base, every Nth ("global") layer
**                                      attends to everything with the global
**                                      base, linearly scaled when configured
**       x = x + post_ffw_norm(mlp(ffn_norm(x)))      GeGLU (GELU-tanh)
**   logits = softcap(lm_head(output_norm(x)))        lm_head tied by default
**
** Every norm scales by (w + norm_offset): Hugging Face checkpoints store
** w - 1 (Gemma3RMSNorm multiplies by 1 + w), so the offset is 1 unless the
** metadata key model.norm_offset says otherwise; llama.cpp's converter adds
** the 1 into the stored weights, so a GGUF file is read with offset 0.
**
** The residual add after a sublayer cannot be llama's plain fused
** rmsnorm_add, because the sublayer's output is normalised first: each
** sublayer writes `delta`, an rmsnorm normalises it in place, and then the
** usual rmsnorm_add adds it into x and normalises x for the next sublayer.
**
** Weight names are GGUF's (llama.cpp's LLM_ARCH_GEMMA3 table), so a GGUF
** file maps one to one; HF names are mapped onto them here.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/rad_half.h"
#include "../common/rad_block_attn.h"
#include "../common/rad_block_decoder.h"
#include "../common/rad_block_head.h"
#include "../common/rad_block_mlp.h"
#include "../common/rad_block_residual.h"

#ifndef RAD_QUANT
#error "build with -DRAD_QUANT=\"f32\" -DRAD_QUANT_ENC=RAD_ENC_F32 (or another format)"
#endif

typedef struct Layer {
    RadResidualNorm attn_norm;  /* layer 0: a plain norm of the embedding */
    RadAttn attn;
    rad_weight post_attn_w;     /* (n_embd) */
    rad_op post_attn;           /* delta = rmsnorm(delta) */
    RadResidualNorm ffn_norm;
    RadMlp mlp;
    rad_weight post_ffw_w;      /* (n_embd) */
    rad_op post_ffw;
} Layer;

/* One model, as declared: the instance the core keeps and hands to step. */
typedef struct Model {
    int n_layers;
    RadDecoderBuffers io;
    RadHead head;
    rad_op op_embed_scale;      /* x *= sqrt(n_embd) */
    RadResidualNorm out_norm;
    Layer *layers;              /* (n_layers) */
} Model;

static const char *const hf_names[] = {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", NULL};

const char *const *rad_arch_hf_names(void) { return hf_names; }

/* GGUF files of Gemma 3: llama.cpp's converter adds Gemma's 1 to every norm
** weight (Gemma3RMSNorm multiplies by 1 + w), so they are read with offset
** 0.  The conventions that depend on the file's own keys are in
** gguf_conventions below. */
static const RadMetaKV gguf_implied[] = {
    {.key = "model.norm_offset", .type = RAD_META_FLOAT, .i = 0, .f = 0.0},
};

static const RadGgufFamily gguf_families[] = {
    {RAD_SIZED(RadGgufFamily), "gemma3", "Gemma3ForCausalLM", 1, gguf_implied},
    {0},
};

const RadGgufFamily *rad_arch_gguf_families(void) { return gguf_families; }

/* Gemma3ForConditionalGeneration keeps the language model under
** model.language_model. (transformers >= 4.52) or language_model.model. (the
** first exports, still on the Hub); the text-only names come first. */
static void declare_aliases(RadBuilder *b)
{
    rad_decl_name_alias(b, "model.", "model.language_model.");
    rad_decl_name_alias(b, "model.", "language_model.model.");
    rad_decl_name_alias(b, "lm_head.", "language_model.lm_head.");
}

int rad_arch_probe(const RadModelMeta *meta, RadArchProbe *out)
{
    (void)meta;
    out->shape_probe_ok = 1;    /* each declare builds an instance of its own */
    out->kv_f32_ok = 1;
    return RAD_OK;
}

/* ------------------------------------------------------------ metadata */

/* A config key, at the top level (Gemma3ForCausalLM) or under text_config
** (Gemma3ForConditionalGeneration). */
static const char *cfg_key(const RadModelMeta *m, const char *key, char *buf, size_t len)
{
    if (rad_meta_has(m, key)) return key;
    snprintf(buf, len, "text_config.%s", key);
    return buf;
}

static int cfg_has(const RadModelMeta *m, const char *key)
{
    char buf[128];
    return rad_meta_has(m, cfg_key(m, key, buf, sizeof buf));
}

static int64_t cfg_i(const RadModelMeta *m, const char *key, int64_t dflt)
{
    char buf[128];
    return rad_meta_geti(m, cfg_key(m, key, buf, sizeof buf), dflt);
}

static double cfg_f(const RadModelMeta *m, const char *key, double dflt)
{
    char buf[128];
    return rad_meta_getf(m, cfg_key(m, key, buf, sizeof buf), dflt);
}

static const char *cfg_s(const RadModelMeta *m, const char *key, const char *dflt)
{
    char buf[128];
    return rad_meta_gets(m, cfg_key(m, key, buf, sizeof buf), dflt);
}

/* RoPE of the sliding or the global layers.  transformers 5 writes
** rope_parameters.{sliding_attention,full_attention}.{rope_type, rope_theta,
** factor}; older configs (and the GGUF import) write rope_theta for the
** global layers (the canonical model.rope_theta), rope_local_base_freq for the
** local ones, and rope_scaling, which applies to the global layers only. */
static int rope_for(RadBuilder *b, const RadModelMeta *meta, int sliding, RadRopeConfig *r)
{
    char prefix[64], key[96];
    snprintf(prefix, sizeof prefix, "rope_parameters.%s", sliding ? "sliding_attention" : "full_attention");
    memset(r, 0, sizeof *r);
    r->n_rot = (int)rad_meta_geti(meta, "model.n_rot", meta->head_dim);
    r->mode = (int)rad_meta_geti(meta, "model.rope_mode", 0);
    r->factor = 1.0;

    const double local_theta = rad_meta_has(meta, "arch.gguf")
                             ? rad_meta_getf(meta, "gguf.gemma3.rope.freq_base_swa", 10000.0)
                             : cfg_f(meta, "rope_local_base_freq", 10000.0);
    const double legacy_theta = sliding ? local_theta : meta->rope_theta;
    const char *type = "default";
    double factor = 1.0;
    char theta_key[96];
    snprintf(theta_key, sizeof theta_key, "%s.rope_theta", prefix);
    snprintf(key, sizeof key, "%s.rope_type", prefix);
    if (cfg_has(meta, theta_key) || cfg_has(meta, key)) {
        r->theta = cfg_f(meta, theta_key, legacy_theta);
        type = cfg_s(meta, key, "default");
        snprintf(key, sizeof key, "%s.factor", prefix);
        factor = cfg_f(meta, key, 1.0);
    } else {
        r->theta = legacy_theta;
        if (!sliding) {
            type = cfg_s(meta, "rope_scaling.rope_type", cfg_s(meta, "rope_scaling.type", "default"));
            factor = cfg_f(meta, "rope_scaling.factor", 1.0);
        }
    }
    if (strcmp(type, "default") == 0) return RAD_OK;
    if (strcmp(type, "linear") == 0) {
        r->scaling = RAD_ROPE_SCALING_LINEAR;
        r->factor = factor;
        return RAD_OK;
    }
    return rad_decl_fail(b, "RoPE scaling '%s' on the %s layers is not served by the gemma3 plugin (default and linear are)",
                         type, sliding ? "sliding" : "global");
}

/* Whether layer l is a local (sliding-window) layer: layer_types when the
** config lists them (transformers 5), else every sliding_window_pattern-th
** layer is global (pattern 6 when absent, as transformers assumes). */
static int layer_is_sliding(const RadModelMeta *meta, int l)
{
    char key[48];
    snprintf(key, sizeof key, "layer_types.%d", l);
    const char *type = cfg_s(meta, key, NULL);
    if (type) return strcmp(type, "sliding_attention") == 0;
    int64_t pattern = cfg_i(meta, "sliding_window_pattern", cfg_i(meta, "_sliding_window_pattern", 6));
    return pattern > 1 && (l + 1) % pattern != 0;
}

/* sqrt(n_embd) in the embedding's encoding, as transformers multiplies by a
** tensor of the model's dtype (sqrt(3072) is 55.5 in bf16). */
static double embed_scale(int n_embd, int enc)
{
    float s = (float)sqrt((double)n_embd);
    if (enc == RAD_ENC_BF16) s = rad_bf16_to_f32(rad_f32_to_bf16(s));
    if (enc == RAD_ENC_F16) s = rad_f16_to_f32(rad_f32_to_f16(s));
    return s;
}

/* ------------------------------------------------------------ declaring */

static rad_weight norm_weight(RadBuilder *b, const char *name, const char *hf, int64_t n, int32_t group)
{
    return rad_weight_mapped(b, name, hf, RAD_ENC_F32, 1, n, 0, RAD_ACCESS_PER_TOKEN, group, 0);
}

int rad_arch_declare(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx, void **instance)
{
    const int E = meta->n_embd, V = meta->n_vocab, L = meta->n_layers;
    const int D = meta->head_dim, H = meta->n_head, HKV = meta->n_head_kv;
    const int enc = RAD_QUANT_ENC;
    if (H <= 0 || HKV <= 0 || D <= 0 || H % HKV != 0 || meta->n_ff <= 0 || L <= 0 || E <= 0)
        return rad_decl_fail(b, "gemma3: heads %d, kv heads %d, head_dim %d, n_ff %d, layers %d do not make a model",
                             H, HKV, D, meta->n_ff, L);

    Model *m = calloc(1, sizeof *m);
    if (!m) return RAD_E_NOMEM;
    *instance = m;
    m->n_layers = L;
    m->layers = calloc((size_t)L, sizeof *m->layers);
    if (!m->layers) return RAD_E_NOMEM;
    const double norm_offset = rad_meta_getf(meta, "model.norm_offset", 1.0);
    declare_aliases(b);

    /* What the configuration asks for; problems are recorded and declare
    ** goes on, so every one is reported at once. */
    int failed = RAD_OK;
    const char *act = cfg_s(meta, "hidden_activation", cfg_s(meta, "hidden_act", "gelu_pytorch_tanh"));
    if (strcmp(act, "gelu_pytorch_tanh") != 0 && strcmp(act, "gelu_new") != 0)
        failed = rad_decl_fail(b, "gemma3: activation '%s' is not served (GELU with the tanh approximation is)", act);
    if (cfg_i(meta, "use_bidirectional_attention", 0))
        failed = rad_decl_fail(b, "gemma3: use_bidirectional_attention (EmbeddingGemma) is not served: attention is causal");
    const int tied = (int)cfg_i(meta, "tie_word_embeddings", 1);
    /* A GGUF file says less than a config: llama.cpp scales scores by
    ** 1/sqrt(head_dim), except for the 27B geometry (62 layers), which
    ** gemma_pytorch scales by 1/sqrt(n_embd / n_head); it has a window only
    ** when the file names one. */
    const int gguf = rad_meta_has(meta, "arch.gguf");
    const double pre_attn = gguf ? (L == 62 ? (double)E / H : (double)D) : cfg_f(meta, "query_pre_attn_scalar", 256.0);
    const double scale = pow(pre_attn, -0.5);
    const double final_softcap = gguf ? rad_meta_getf(meta, "gguf.gemma3.final_logit_softcapping", 0.0)
                                      : cfg_f(meta, "final_logit_softcapping", 0.0);
    /* transformers' Gemma3Attention keeps attn_logit_softcapping but never
    ** passes it to the attention (Gemma 3 replaced Gemma 2's soft-cap with
    ** q/k norms), and llama.cpp's converter requires it to be null. */
    if (cfg_f(meta, "attn_logit_softcapping", 0.0) > 0)
        rad_note(b, "attn_logit_softcapping %g is ignored, as transformers' Gemma 3 ignores it",
                 cfg_f(meta, "attn_logit_softcapping", 0.0));
    int window = (int)cfg_i(meta, "sliding_window", gguf ? 0 : 4096);
    if (window < 0) window = 0;
    if (window >= ctx->max_ctx) {
        if (window > 0) rad_note(b, "sliding window of %d positions is never reached in %d: plain causal", window, ctx->max_ctx);
        window = 0;
    }
    RadRopeConfig rope_local, rope_global;
    int rc = rope_for(b, meta, 1, &rope_local);
    if (rc) failed = rc;
    rc = rope_for(b, meta, 0, &rope_global);
    if (rc) failed = rc;

    /* Buffers, shared by every layer. */
    const int T = ctx->max_tok, QW = H * D, KW = HKV * D, F = meta->n_ff;
    rad_decoder_buffers_declare(b, &m->io, T, ctx->max_out_rows, E, QW, KW, F, V);
    const RadNormConfig nc = {.n_embd = E, .max_tok = T, .eps = meta->rms_eps, .w_offset = norm_offset};

    RadKvGroupDecl full_decl = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_FULL, .n_head_kv = HKV, .head_dim = D};
    RadKvGroupDecl window_decl = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_WINDOW, .n_head_kv = HKV, .head_dim = D,
                                  .window = window};
    rad_kv kv_full = -1, kv_window = -1;

    /* The embedding, then the layers, then the head: declaration order is
    ** issue order. */
    rad_head_declare_embedding(b, &m->head, &m->io, enc, V, E, T);
    const double emb_scale = embed_scale(E, rad_weight_encoding(b, m->head.tok_embd));
    m->op_embed_scale = RAD_OP(b, "scale_rows",
                               RAD_PARAMS(RAD_RANGE("M", 1, T), RAD_INT("N", E), RAD_FLOAT("scale", emb_scale)),
                               RAD_NO_WEIGHTS);
    rad_op_reads(b, m->op_embed_scale, RAD_BUFS(m->io.x));
    rad_op_writes(b, m->op_embed_scale, RAD_BUFS(m->io.x));
    rad_note(b, "embeddings scaled by %.9g; norms scale by (w + %g)", emb_scale, norm_offset);

    char name[RAD_NAME_MAX], hf_name[RAD_NAME_MAX], prefix[RAD_NAME_MAX];
    for (int l = 0; l < L; l++) {
        Layer *layer = &m->layers[l];
        rad_weight attn_norm = norm_weight(b, rad_fmt(name, "blk.%d.attn_norm.weight", l),
                                           rad_fmt(hf_name, "model.layers.%d.input_layernorm.weight", l), E, l);
        layer->post_attn_w = norm_weight(b, rad_fmt(name, "blk.%d.post_attention_norm.weight", l),
                                         rad_fmt(hf_name, "model.layers.%d.post_attention_layernorm.weight", l), E, l);
        rad_weight ffn_norm = norm_weight(b, rad_fmt(name, "blk.%d.ffn_norm.weight", l),
                                          rad_fmt(hf_name, "model.layers.%d.pre_feedforward_layernorm.weight", l), E, l);
        layer->post_ffw_w = norm_weight(b, rad_fmt(name, "blk.%d.post_ffw_norm.weight", l),
                                        rad_fmt(hf_name, "model.layers.%d.post_feedforward_layernorm.weight", l), E, l);
        rad_residual_norm_declare(b, &layer->attn_norm, &nc, &m->io, attn_norm, l == 0);

        int sliding = window > 0 && layer_is_sliding(meta, l);
        rad_kv kv = sliding ? kv_window : kv_full;
        if (kv < 0) {
            kv = sliding ? rad_decl_kv_group(b, "kv_window", &window_decl) : rad_decl_kv_group(b, "kv", &full_decl);
            if (sliding) kv_window = kv; else kv_full = kv;
            if (sliding) rad_note(b, "sliding window of %d positions on the local layers", window);
        }
        RadAttnConfig ac = {
            .layer = l, .n_embd = E, .n_head = H, .n_head_kv = HKV, .head_dim = D, .weight_enc = enc,
            .qk_norm = 1, .norm_eps = meta->rms_eps, .norm_offset = norm_offset, .scale = scale,
            .softcap = 0.0, .window = sliding ? window : 0,
            /* a layer is local by its type; with no window to slide it still
            ** keeps the local RoPE base, as transformers does */
            .rope = layer_is_sliding(meta, l) ? rope_local : rope_global,
            .hf_prefix = rad_fmt(prefix, "model.layers.%d.self_attn", l), .max_tok = T,
        };
        rad_attn_declare(&layer->attn, b, &ac, &m->io.attn);
        rad_bind_layer_kv(b, l, kv);
        layer->post_attn = rad_norm_declare(b, &nc, layer->post_attn_w, m->io.delta, m->io.delta);

        rad_residual_norm_declare(b, &layer->ffn_norm, &nc, &m->io, ffn_norm, 0);
        RadMlpConfig mc = {.layer = l, .n_embd = E, .n_ff = F, .weight_enc = enc, .gelu = 1,
                           .hf_prefix = rad_fmt(prefix, "model.layers.%d.mlp", l), .max_tok = T};
        rad_mlp_declare(&layer->mlp, b, &mc, &m->io.mlp);
        layer->post_ffw = rad_norm_declare(b, &nc, layer->post_ffw_w, m->io.delta, m->io.delta);
    }

    rad_weight out_norm = norm_weight(b, "output_norm.weight", "model.norm.weight", E, -1);
    rad_residual_norm_declare(b, &m->out_norm, &nc, &m->io, out_norm, 0);

    rad_head_declare_output(b, &m->head, &m->io, enc, V, E, tied, final_softcap, ctx->max_out_rows);
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

void rad_arch_step(void *instance, RadCtx *c, const RadBatch *batch)
{
    const Model *m = instance;
    const int64_t n = batch->n_tok;
    rad_head_step_embedding(c, &m->head, batch, &m->io);
    RAD_ISSUE(c, m->op_embed_scale, n, RAD_B(m->io.x));
    for (int l = 0; l < m->n_layers; l++) {
        const Layer *layer = &m->layers[l];
        rad_residual_norm_step(c, &layer->attn_norm, n, &m->io);
        rad_attn_step(&layer->attn, c, batch, &m->io.attn);
        RAD_ISSUE(c, layer->post_attn, n, RAD_B(m->io.delta), RAD_W(layer->post_attn_w), RAD_B(m->io.delta));
        rad_residual_norm_step(c, &layer->ffn_norm, n, &m->io);
        rad_mlp_step(&layer->mlp, c, batch, &m->io.mlp);
        RAD_ISSUE(c, layer->post_ffw, n, RAD_B(m->io.delta), RAD_W(layer->post_ffw_w), RAD_B(m->io.delta));
    }
    rad_residual_norm_step(c, &m->out_norm, n, &m->io);
    rad_head_step_output(c, &m->head, batch, &m->io);
}

RAD_ARCH_PLUGIN(gemma3, "gemma3", RAD_QUANT, "1.0", "Gemma 3 (text)")

/* ---------------------------------------------------------- chat format */

/* Gemma 3 has one chat format (the include sits here to keep the chat data
** apart from the network above). */
#include "../common/rad_chat_formats.h"

const RadChatFormat *rad_arch_chat_format(const RadModelMeta *meta)
{
    (void)meta;
    return &rad_chat_fmt_gemma;
}
