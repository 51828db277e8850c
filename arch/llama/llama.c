/*
** llama.c: the llama family plugin — Llama 2/3/3.1/3.2, SmolLM2, TinyLlama,
** Mistral, Qwen2 and Qwen3, and their mixture-of-experts lines Mixtral,
** Qwen2-MoE, Qwen3-MoE, OLMoE and GLM-4.5 — one decoder shape with small
** variations:
**
**   x = embed(tokens)
**   for each layer:
**       x = x + attn(rmsnorm(x))      q/k/v biases when the checkpoint has them
**                                      (Qwen2, Qwen2-MoE, GLM-4.5), per-head q/k
**                                      norms (Qwen3, Qwen3-MoE, GLM-4.5 with
**                                      use_qk_norm), q/k norms over the whole
**                                      projection and clip_qkv (OLMoE); RoPE on
**                                      the first half of each head only (GLM-4.5's
**                                      partial_rotary_factor)
**       x = x + mlp(rmsnorm(x))       SwiGLU, or routed experts of SwiGLUs
**                                      (rad_block_moe.h) on the sparse layers,
**                                      plus Qwen2-MoE's sigmoid-gated shared
**                                      expert or GLM-4.5's ungated one; GLM-4.5
**                                      routes by sigmoid scores with a correction
**                                      bias, in groups
**   logits = lm_head(rmsnorm(x))      lm_head tied to the embedding or not
**
** One source builds one plugin per weight format (the build passes RAD_QUANT
** and RAD_QUANT_ENC), so "llama at q8_0" and "llama at bf16" are separate
** .so files chosen by the exact (id, quant) pair.  Which Hugging Face line a
** checkpoint belongs to comes from its architecture name, never from a file
** name; everything else is read from the metadata.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/rad_block_attn.h"
#include "../common/rad_block_decoder.h"
#include "../common/rad_block_head.h"
#include "../common/rad_block_mlp.h"
#include "../common/rad_block_moe.h"
#include "../common/rad_block_residual.h"

#ifndef RAD_QUANT
#error "build with -DRAD_QUANT=\"f32\" -DRAD_QUANT_ENC=RAD_ENC_F32 (or another format)"
#endif

typedef struct Layer {
    RadResidualNorm attn_norm;  /* layer 0: a plain norm of the embedding */
    RadAttn attn;
    RadResidualNorm ffn_norm;
    int sparse;                 /* routed experts instead of the dense MLP */
    RadMlp mlp;
    RadMoe moe;
} Layer;

/* One model, as declared: the instance the core keeps and hands to step. */
typedef struct Model {
    int n_layers;
    RadDecoderBuffers io;
    RadMoeBuffers moe_io;
    RadHead head;
    RadResidualNorm out_norm;
    Layer *layers;              /* (n_layers) */
} Model;

static const char *const hf_names[] = {
    "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
    "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "OlmoeForCausalLM",
    "Glm4MoeForCausalLM", NULL,
};

const char *const *rad_arch_hf_names(void) { return hf_names; }

/* The GGUF architectures this plugin runs.  llama.cpp's converter permutes
** the q and k rows of llama-arch checkpoints so that RoPE rotates adjacent
** pairs; Qwen files keep Hugging Face's halves.  Mixtral files are "llama"
** with an expert count.  GGUF has no key for norm_topk_prob: llama.cpp
** renormalises Qwen3-MoE's chosen weights and not OLMoE's or Qwen2-MoE's,
** so the families say so.  (A Qwen3-MoE checkpoint with norm_topk_prob off
** reaches GGUF renormalised; llama.cpp runs it so too.)  A glm4moe file
** writes its routing in keys of its own (glm4moe.expert_*), read by
** glm_key below. */
static const RadMetaKV adjacent_pairs[] = {
    {.key = "model.rope_mode", .type = RAD_META_INT, .i = 1, .f = 1},     /* rope mode 1: adjacent pairs */
};
static const RadMetaKV qwen3moe_implied[] = {
    {.key = "norm_topk_prob", .type = RAD_META_INT, .i = 1, .f = 1},
};
static const RadMetaKV no_renorm_implied[] = {
    {.key = "norm_topk_prob", .type = RAD_META_INT, .i = 0, .f = 0},
};

static const RadGgufFamily gguf_families[] = {
    {RAD_SIZED(RadGgufFamily), "llama", "LlamaForCausalLM", 1, adjacent_pairs},
    {RAD_SIZED(RadGgufFamily), "mistral", "MistralForCausalLM", 1, adjacent_pairs},
    {RAD_SIZED(RadGgufFamily), "qwen2", "Qwen2ForCausalLM", 0, NULL},
    {RAD_SIZED(RadGgufFamily), "qwen3", "Qwen3ForCausalLM", 0, NULL},
    {RAD_SIZED(RadGgufFamily), "qwen3moe", "Qwen3MoeForCausalLM", 1, qwen3moe_implied},
    {RAD_SIZED(RadGgufFamily), "qwen2moe", "Qwen2MoeForCausalLM", 1, no_renorm_implied},
    {RAD_SIZED(RadGgufFamily), "olmoe", "OlmoeForCausalLM", 1, no_renorm_implied},
    {RAD_SIZED(RadGgufFamily), "glm4moe", "Glm4MoeForCausalLM", 0, NULL},
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

/* RoPE as the checkpoint configures it; transformers 5 writes
** rope_parameters, older versions rope_theta + rope_scaling. */
static int rope_config(RadBuilder *b, const RadModelMeta *meta, RadRopeConfig *r)
{
    const char *prefix = rad_meta_has(meta, "rope_parameters.rope_type") ? "rope_parameters" : "rope_scaling";
    char key[64];
    snprintf(key, sizeof key, "%s.rope_type", prefix);
    const char *type = rad_meta_gets(meta, key, NULL);
    if (!type) {
        snprintf(key, sizeof key, "%s.type", prefix);
        type = rad_meta_gets(meta, key, "default");
    }
    memset(r, 0, sizeof *r);
    r->n_rot = (int)rad_meta_geti(meta, "model.n_rot", meta->head_dim);
    r->mode = (int)rad_meta_geti(meta, "model.rope_mode", 0);
    r->theta = meta->rope_theta;
    r->factor = 1.0;
    snprintf(key, sizeof key, "%s.factor", prefix);
    double factor = rad_meta_getf(meta, key, 1.0);
    if (rad_meta_geti(meta, "rope_freq_factors", 0)) {
        /* a GGUF's rope_freqs.weight: llama3 scaling, precomputed per pair */
        if (strcmp(type, "default") != 0)
            return rad_decl_fail(b, "RoPE scaling '%s' together with a rope_freqs table: the file is ambiguous", type);
        r->scaling = RAD_ROPE_SCALING_FACTORS;
        r->has_freq_factors = 1;
        r->freq_factors = rad_weight_mapped(b, "rope_freqs.weight", NULL, RAD_ENC_F32, 1, r->n_rot / 2, 0,
                                            RAD_ACCESS_PER_TOKEN, -1, 0);
        return RAD_OK;
    }
    if (strcmp(type, "default") == 0) return RAD_OK;
    if (strcmp(type, "linear") == 0) {
        r->scaling = RAD_ROPE_SCALING_LINEAR;
        r->factor = factor;
        return RAD_OK;
    }
    if (strcmp(type, "yarn") == 0) return rad_rope_yarn_config(b, meta, prefix, factor, r);
    if (strcmp(type, "llama3") == 0) {
        r->scaling = RAD_ROPE_SCALING_LLAMA3;
        r->factor = factor;
        snprintf(key, sizeof key, "%s.low_freq_factor", prefix);
        r->low_freq_factor = rad_meta_getf(meta, key, 1.0);
        snprintf(key, sizeof key, "%s.high_freq_factor", prefix);
        r->high_freq_factor = rad_meta_getf(meta, key, 4.0);
        snprintf(key, sizeof key, "%s.original_max_position_embeddings", prefix);
        r->orig_ctx = (int)rad_meta_geti(meta, key, 8192);
        return RAD_OK;
    }
    return rad_decl_fail(b, "RoPE scaling '%s' is not served by the llama plugin (default, linear, llama3, yarn are)",
                         type);
}

/* ---------------------------------------------------------- GLM-4.5 */

static int is_glm(const char *hf) { return strcmp(hf, "Glm4MoeForCausalLM") == 0; }

/* A GLM-4.5 setting, from config.json's key or, in a GGUF, from
** llama.cpp's glm4moe.<gguf_key> (copied verbatim as gguf.glm4moe.*). */
static double glm_key(const RadModelMeta *meta, const char *hf_key, const char *gguf_key, double dflt)
{
    char key[96];
    snprintf(key, sizeof key, "gguf.glm4moe.%s", gguf_key);
    if (rad_meta_has(meta, "arch.gguf")) return rad_meta_getf(meta, key, dflt);
    return rad_meta_getf(meta, hf_key, dflt);
}

/* The decoder layers of the main forward.  GLM-4.5's checkpoints carry
** num_nextn_predict_layers MTP (multi-token prediction) layers after them,
** model.layers.L.* with eh_proj, enorm, hnorm and shared_head: config.json
** does not count them in num_hidden_layers, a GGUF's block_count does
** (llama.cpp's converter adds glm4moe.nextn_predict_layers).  They are not
** declared, so their tensors are left in the file unread (speculative
** decoding with them is issue 16). */
static int main_layers(const RadModelMeta *meta, const char *hf, int *n_mtp)
{
    *n_mtp = 0;
    if (!is_glm(hf)) return meta->n_layers;
    if (rad_meta_has(meta, "arch.gguf")) {
        int64_t n = rad_meta_geti(meta, "gguf.glm4moe.nextn_predict_layers", 0);
        *n_mtp = n > 0 && n < meta->n_layers ? (int)n : 0;
        return meta->n_layers - *n_mtp;
    }
    int64_t n = rad_meta_geti(meta, "num_nextn_predict_layers", 0);
    *n_mtp = n > 0 && n <= INT32_MAX ? (int)n : 0;
    return meta->n_layers;
}

/* Whether layer l attends through a sliding window (given one is set):
** layer_types when the config lists them (transformers 5); else Mistral on
** every layer, and Qwen2/Qwen3 on the layers from max_window_layers on, as
** their transformers configs derive layer_types (Qwen2-MoE too: a config
** without layer_types predates transformers 5, whose 4.x attention slid
** from max_window_layers on). */
static int layer_is_sliding(const RadModelMeta *meta, const char *hf, int l)
{
    char key[48];
    snprintf(key, sizeof key, "layer_types.%d", l);
    const char *type = rad_meta_gets(meta, key, NULL);
    if (type) return strcmp(type, "sliding_attention") == 0;
    if (strcmp(hf, "Qwen2ForCausalLM") == 0 || strcmp(hf, "Qwen3ForCausalLM") == 0 ||
        strcmp(hf, "Qwen2MoeForCausalLM") == 0)
        return l >= rad_meta_geti(meta, "max_window_layers", 0);
    return 1;                   /* Mistral, Mixtral, Qwen3-MoE: every layer */
}

/* The sliding window the configuration asks for, or 0.  Mistral and
** Mixtral slide whenever sliding_window is set; Qwen2, Qwen3, Qwen2-MoE and
** Qwen3-MoE only with use_sliding_window (their configs carry a
** sliding_window that is off by default). */
static int config_window(const RadModelMeta *meta, const char *hf)
{
    if (strcmp(hf, "MistralForCausalLM") == 0 || strcmp(hf, "MixtralForCausalLM") == 0)
        return (int)rad_meta_geti(meta, "sliding_window", 0);
    if ((strcmp(hf, "Qwen2ForCausalLM") == 0 || strcmp(hf, "Qwen3ForCausalLM") == 0 ||
         strcmp(hf, "Qwen2MoeForCausalLM") == 0 || strcmp(hf, "Qwen3MoeForCausalLM") == 0) &&
        rad_meta_geti(meta, "use_sliding_window", 0))
        return (int)rad_meta_geti(meta, "sliding_window", 0);
    return 0;
}

/* Whether layer l routes to experts.  Qwen2-MoE and Qwen3-MoE: every
** decoder_sparse_step-th layer not listed in mlp_only_layers (their
** transformers rule; a GGUF has neither key, so every layer, as llama.cpp
** runs it); the other families: every layer of a model with experts (a
** Mixtral GGUF is "llama" with an expert count). */
static int layer_is_sparse(const RadModelMeta *meta, const char *hf, int l)
{
    if (meta->n_expert <= 0) return 0;
    if (is_glm(hf))             /* GLM-4.5: the first first_k_dense_replace layers are dense */
        return l >= glm_key(meta, "first_k_dense_replace", "leading_dense_block_count", 1);
    if (strcmp(hf, "Qwen3MoeForCausalLM") != 0 && strcmp(hf, "Qwen2MoeForCausalLM") != 0) return 1;
    char key[48];
    for (int i = 0;; i++) {
        snprintf(key, sizeof key, "mlp_only_layers.%d", i);
        if (!rad_meta_has(meta, key)) break;
        if (rad_meta_geti(meta, key, -1) == l) return 0;
    }
    int64_t step = rad_meta_geti(meta, "decoder_sparse_step", 1);
    return step > 0 && (l + 1) % step == 0;
}

/* The routing of a model with experts: softmax over all experts, the top
** num_experts_per_tok, renormalised as norm_topk_prob says (Mixtral
** always).  The expert size is moe_intermediate_size where the family has
** one (Qwen2/3-MoE, whose dense layers use intermediate_size).  Qwen2-MoE
** adds a shared expert of shared_expert_intermediate_size behind a sigmoid
** gate (a GGUF's expert_shared_feed_forward_length reaches us under the same
** key); absent: intermediate_size, as llama.cpp and transformers' default
** have it; 0: none.  GLM-4.5 (glm_moe_config) routes by sigmoid scores. */
static RadMoeConfig glm_moe_config(const RadModelMeta *meta, int l, int enc, int T);

static RadMoeConfig moe_config(const RadModelMeta *meta, const char *hf, int l, int enc, int T)
{
    if (is_glm(hf)) return glm_moe_config(meta, l, enc, T);
    int mixtral = strcmp(hf, "MixtralForCausalLM") == 0 || strcmp(hf, "LlamaForCausalLM") == 0 ||
                  strcmp(hf, "MistralForCausalLM") == 0;
    int renorm = mixtral ? 1 : (int)rad_meta_geti(meta, "norm_topk_prob", 0);
    int qwen2moe = strcmp(hf, "Qwen2MoeForCausalLM") == 0;
    int64_t shared = qwen2moe ? rad_meta_geti(meta, "shared_expert_intermediate_size", meta->n_ff) : 0;
    return (RadMoeConfig){
        .layer = l, .n_embd = meta->n_embd, .n_ff = (int)rad_meta_geti(meta, "model.n_ff_expert", meta->n_ff),
        .n_expert = meta->n_expert, .k = meta->n_expert_used, .weight_enc = enc, .mode = RAD_ROUTER_SOFTMAX_TOPK,
        .renorm = renorm ? RAD_ROUTER_RENORM_ON : RAD_ROUTER_RENORM_OFF, .scale = 1.0,
        .hf_gate = mixtral ? "w1" : "gate_proj", .hf_up = mixtral ? "w3" : "up_proj",
        .hf_down = mixtral ? "w2" : "down_proj", .group = RAD_MOE_GROUP(l, meta->n_expert),
        .n_ff_shared = shared >= 0 && shared <= INT32_MAX ? (int)shared : -1, .shared_gated = 1,
        .hf_shared = "shared_expert", .max_tok = T,
    };
}

/* GLM-4.5's routing, as transformers' Glm4MoeTopkRouter and llama.cpp's
** glm4moe run it: scores sigmoid(logits); the choice by scores plus
** e_score_correction_bias within the best topk_group of n_group groups
** (a group scored by its two best); the chosen scores renormalised
** (norm_topk_prob, default on; a GGUF's expert_weights_norm, absent off as
** llama.cpp reads it) and scaled by routed_scaling_factor
** (expert_weights_scale).  Beside them n_shared_experts ungated shared
** experts, one MLP of n_shared_experts * moe_intermediate_size
** (shared_experts.*; GGUF ffn_*_shexp). */
static RadMoeConfig glm_moe_config(const RadModelMeta *meta, int l, int enc, int T)
{
    const int gguf = rad_meta_has(meta, "arch.gguf");
    const int n_ff = (int)rad_meta_geti(meta, "model.n_ff_expert", meta->n_ff);
    double renorm = glm_key(meta, "norm_topk_prob", "expert_weights_norm", gguf ? 0 : 1);
    double scale = glm_key(meta, "routed_scaling_factor", "expert_weights_scale", 1.0);
    double n_shared = glm_key(meta, "n_shared_experts", "expert_shared_count", gguf ? 0 : 1);
    double n_group = glm_key(meta, "n_group", "expert_group_count", 1);
    double topk_group = glm_key(meta, "topk_group", "expert_group_used_count", 1);
    double shared = n_shared * n_ff;
    if (gguf && scale == 0) scale = 1.0;        /* llama.cpp: 0 is no scaling */
    return (RadMoeConfig){
        .layer = l, .n_embd = meta->n_embd, .n_ff = n_ff, .n_expert = meta->n_expert, .k = meta->n_expert_used,
        .weight_enc = enc, .mode = RAD_ROUTER_SIGMOID, .renorm = renorm != 0 ? RAD_ROUTER_RENORM_ON : RAD_ROUTER_RENORM_OFF,
        .scale = scale > 0 && isfinite(scale) ? scale : -1, .hf_gate = "gate_proj", .hf_up = "up_proj",
        .hf_down = "down_proj", .group = RAD_MOE_GROUP(l, meta->n_expert),
        .n_ff_shared = shared >= 0 && shared <= INT32_MAX ? (int)shared : -1, .shared_gated = 0,
        .hf_shared = "shared_experts", .max_tok = T, .score_bias = 1,
        .n_group = n_group > 1 && n_group <= INT32_MAX ? (int)n_group : 0,
        .topk_group = n_group > 1 && topk_group >= 0 && topk_group <= INT32_MAX ? (int)topk_group : 0,
    };
}

int rad_arch_declare(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx, void **instance)
{
    const char *hf = meta->hf_arch ? meta->hf_arch : "";
    int n_mtp;
    const int E = meta->n_embd, V = meta->n_vocab, L = main_layers(meta, hf, &n_mtp);
    const int D = meta->head_dim, H = meta->n_head, HKV = meta->n_head_kv;
    const int enc = RAD_QUANT_ENC;
    if (H <= 0 || HKV <= 0 || D <= 0 || H % HKV != 0 || meta->n_ff <= 0 || L <= 0)
        return rad_decl_fail(b, "llama: heads %d, kv heads %d, head_dim %d, n_ff %d, layers %d do not make a model",
                             H, HKV, D, meta->n_ff, L);

    Model *m = calloc(1, sizeof *m);
    if (!m) return RAD_E_NOMEM;
    *instance = m;
    m->n_layers = L;
    m->layers = calloc((size_t)L, sizeof *m->layers);
    if (!m->layers) return RAD_E_NOMEM;

    RadRopeConfig rope;
    int failed = rope_config(b, meta, &rope);  /* recorded; declare goes on */
    int qk_norm = strcmp(hf, "Qwen3ForCausalLM") == 0 || strcmp(hf, "Qwen3MoeForCausalLM") == 0;
    const int glm = is_glm(hf), gguf = rad_meta_has(meta, "arch.gguf");
    if (glm) {
        /* per-head q/k norms with use_qk_norm (a GGUF: when it has them);
        ** RoPE over the first head_dim * partial_rotary_factor dims (0.5 when
        ** absent, as transformers' Glm4MoeConfig fills it in; a GGUF says
        ** rope.dimension_count) */
        qk_norm = gguf ? 1 : (int)rad_meta_geti(meta, "use_qk_norm", 0);
        if (!gguf) {
            double f = rad_meta_getf(meta, "rope_parameters.partial_rotary_factor",
                                     rad_meta_getf(meta, "partial_rotary_factor", 0.5));
            double n_rot = floor(D * f);
            if (!(f > 0 && f <= 1) || (int64_t)n_rot % 2)
                failed = rad_decl_fail(b, "partial_rotary_factor = %g: head_dim %d times it must be an even "
                                       "count of dims, 1..head_dim", f, D);
            else rope.n_rot = (int)n_rot;
        }
        int64_t gating = rad_meta_geti(meta, "gguf.glm4moe.expert_gating_func", 2);
        if (gguf && gating != 2)    /* llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID */
            failed = rad_decl_fail(b, "glm4moe.expert_gating_func = %lld: GLM-4.5 routes by sigmoid scores (2); "
                                   "no other gating is served for it", (long long)gating);
        if (n_mtp) rad_note(b, "%d MTP layer%s after the %d decoder layers left unread (issue 16)", n_mtp,
                            n_mtp > 1 ? "s" : "", L);
    }
    int olmoe = strcmp(hf, "OlmoeForCausalLM") == 0;
    double clip_qkv = olmoe ? rad_meta_getf(meta, "clip_qkv", 0) : 0;   /* null in the config: absent */
    if (clip_qkv < 0 || !isfinite(clip_qkv)) {
        failed = rad_decl_fail(b, "clip_qkv = %g: it must be a positive bound or null", clip_qkv);
        clip_qkv = 0;
    }
    int tied = (int)rad_meta_geti(meta, "tie_word_embeddings", 0);
    int window = config_window(meta, hf);
    if (window < 0) window = 0;
    if (window >= ctx->max_ctx) window = 0;     /* never reached: plain causal */

    /* Buffers, shared by every layer; the dense MLP's only when some layer
    ** is dense, the experts' only when some layer routes. */
    const int T = ctx->max_tok, QW = H * D, KW = HKV * D, F = meta->n_ff;
    int n_sparse = 0;
    for (int l = 0; l < L; l++) n_sparse += layer_is_sparse(meta, hf, l);
    rad_decoder_buffers_declare(b, &m->io, T, ctx->max_out_rows, E, QW, KW, n_sparse < L ? F : 1, V);
    if (n_sparse) {
        RadMoeConfig mc = moe_config(meta, hf, 0, enc, T);
        rad_moe_buffers_declare(b, &m->moe_io, T, E, mc.n_ff, mc.n_expert, mc.k, m->io.h, m->io.delta);
        rad_note(b, "%d of %d layers route to %d experts, %d per token", n_sparse, L, mc.n_expert, mc.k);
        if (mc.n_ff_shared > 0) {
            rad_moe_shared_buffers_declare(b, &m->moe_io, T, E, mc.n_ff_shared, mc.shared_gated);
            rad_note(b, "and a shared expert of %d, %s", mc.n_ff_shared, mc.shared_gated ? "gated" : "ungated");
        }
        if (glm && !(mc.scale > 0))
            failed = rad_decl_fail(b, "routed_scaling_factor: it must be a positive finite number");
        if (glm && mc.n_group > 1 &&
            (mc.n_expert % mc.n_group || mc.n_expert / mc.n_group < 2 || mc.topk_group < 1 ||
             mc.topk_group > mc.n_group || (int64_t)mc.topk_group * (mc.n_expert / mc.n_group) < mc.k))
            failed = rad_decl_fail(b, "n_group = %d, topk_group = %d with %d experts, %d per token: the groups must "
                                   "split the experts into groups of two or more and leave at least %d to choose from",
                                   mc.n_group, mc.topk_group, mc.n_expert, mc.k, mc.k);
        if (glm && mc.n_group > 1) rad_note(b, "chosen within the best %d of %d expert groups", mc.topk_group, mc.n_group);
    }
    const RadNormConfig nc = {.n_embd = E, .max_tok = T, .eps = meta->rms_eps, .w_offset = 0.0};

    RadKvGroupDecl full_decl = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_FULL, .n_head_kv = HKV, .head_dim = D};
    RadKvGroupDecl window_decl = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_WINDOW, .n_head_kv = HKV, .head_dim = D,
                                  .window = window};
    rad_kv kv_full = -1, kv_window = -1;

    /* The embedding, then the layers, then the head: declaration order is
    ** issue order. */
    rad_head_declare_embedding(b, &m->head, &m->io, enc, V, E, T);

    char name[RAD_NAME_MAX], hf_name[RAD_NAME_MAX], prefix[RAD_NAME_MAX];
    for (int l = 0; l < L; l++) {
        Layer *layer = &m->layers[l];
        rad_weight attn_norm = rad_weight_mapped(b, rad_fmt(name, "blk.%d.attn_norm.weight", l),
                                                 rad_fmt(hf_name, "model.layers.%d.input_layernorm.weight", l),
                                                 RAD_ENC_F32, 1, E, 0, RAD_ACCESS_PER_TOKEN, l, 0);
        /* GLM-4.5's post-attention norm keeps llama.cpp's glm4moe name */
        rad_weight ffn_norm = rad_weight_mapped(b, rad_fmt(name, glm ? "blk.%d.post_attention_norm.weight"
                                                                 : "blk.%d.ffn_norm.weight", l),
                                                rad_fmt(hf_name, "model.layers.%d.post_attention_layernorm.weight", l),
                                                RAD_ENC_F32, 1, E, 0, RAD_ACCESS_PER_TOKEN, l, 0);
        rad_residual_norm_declare(b, &layer->attn_norm, &nc, &m->io, attn_norm, l == 0);

        int layer_window = window > 0 && layer_is_sliding(meta, hf, l) ? window : 0;
        rad_kv kv = layer_window ? kv_window : kv_full;
        if (kv < 0) {
            kv = layer_window ? rad_decl_kv_group(b, "kv_window", &window_decl)
                              : rad_decl_kv_group(b, "kv", &full_decl);
            if (layer_window) kv_window = kv; else kv_full = kv;
            if (layer_window) rad_note(b, "sliding window of %d positions", window);
        }
        RadAttnConfig ac = {
            .layer = l, .n_embd = E, .n_head = H, .n_head_kv = HKV, .head_dim = D, .weight_enc = enc,
            .qk_norm = qk_norm || olmoe, .qk_norm_whole = olmoe, .clip_qkv = clip_qkv, .norm_eps = meta->rms_eps, .norm_offset = 0.0, .scale = 1.0 / sqrt((double)D),
            .softcap = 0.0, .window = layer_window, .rope = rope,
            .hf_prefix = rad_fmt(prefix, "model.layers.%d.self_attn", l), .max_tok = T,
            .qk_norm_optional = glm && gguf,
        };
        rad_attn_declare(&layer->attn, b, &ac, &m->io.attn);
        rad_bind_layer_kv(b, l, kv);

        rad_residual_norm_declare(b, &layer->ffn_norm, &nc, &m->io, ffn_norm, 0);
        layer->sparse = layer_is_sparse(meta, hf, l);
        if (layer->sparse) {
            RadMoeConfig moe = moe_config(meta, hf, l, enc, T);
            moe.hf_prefix = strcmp(hf, "MixtralForCausalLM") == 0
                                ? rad_fmt(prefix, "model.layers.%d.block_sparse_moe", l)
                                : rad_fmt(prefix, "model.layers.%d.mlp", l);
            rad_moe_declare(&layer->moe, b, &moe, &m->moe_io);
        } else {
            RadMlpConfig mc = {.layer = l, .n_embd = E, .n_ff = F, .weight_enc = enc, .gelu = 0,
                               .hf_prefix = rad_fmt(prefix, "model.layers.%d.mlp", l), .max_tok = T};
            rad_mlp_declare(&layer->mlp, b, &mc, &m->io.mlp);
        }
    }

    rad_weight out_norm = rad_weight_mapped(b, "output_norm.weight", "model.norm.weight", RAD_ENC_F32, 1, E, 0,
                                            RAD_ACCESS_PER_TOKEN, -1, 0);
    rad_residual_norm_declare(b, &m->out_norm, &nc, &m->io, out_norm, 0);
    rad_head_declare_output(b, &m->head, &m->io, enc, V, E, tied, 0.0, ctx->max_out_rows);
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
    for (int l = 0; l < m->n_layers; l++) {
        const Layer *layer = &m->layers[l];
        rad_residual_norm_step(c, &layer->attn_norm, n, &m->io);
        rad_attn_step(&layer->attn, c, batch, &m->io.attn);
        rad_residual_norm_step(c, &layer->ffn_norm, n, &m->io);
        if (layer->sparse) rad_moe_step(&layer->moe, c, batch, &m->moe_io);
        else rad_mlp_step(&layer->mlp, c, batch, &m->io.mlp);
    }
    rad_residual_norm_step(c, &m->out_norm, n, &m->io);
    rad_head_step_output(c, &m->head, batch, &m->io);
}

RAD_ARCH_PLUGIN(llama, "llama", RAD_QUANT, "1.0",
                "Llama 2/3, SmolLM2, TinyLlama, Mistral, Qwen2, Qwen3, Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE")

/* ---------------------------------------------------------- chat format */

/* This plugin runs several model lines with different chat formats, and
** only the model's vocabulary and chat template tell them apart; a plugin
** sees neither, so it returns the rules and the engine applies them
** (rad_chat_format_resolve).  The include sits here to keep the chat data
** apart from the network above. */
#include "../common/rad_chat_formats.h"

const RadChatFormat *rad_arch_chat_format(const RadModelMeta *meta)
{
    (void)meta;
    return rad_chat_choose_llama();
}
