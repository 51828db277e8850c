/*
** rad_op_values.h: the values op parameters take, by name.
**
** An architecture plugin fills an op's parameters with numbers that mean
** something to the kernels: rope's pair layout, its scaling kind.  These are
** those numbers, written once, so a plugin says RAD_ROPE_SCALING_YARN
** instead of 4 and no library can disagree about what 4 is.  docs/OPS.md
** defines each value.  Pure enums: a plugin may include this header (and
** nothing else from kernels/) without seeing a kernel's internals.
**
** Values are only appended; changing one is a kernel ABI change.
*/
#ifndef RAD_OP_VALUES_H
#define RAD_OP_VALUES_H

/* rope `mode`: which dims of a head form the rotated pairs. */
enum {
    RAD_ROPE_MODE_NEOX = 0,         /* pair i = (i, i + n_rot/2): HF's rotate_half */
    RAD_ROPE_MODE_ADJACENT = 1      /* pair i = (2i, 2i + 1): GGUF llama q/k rows */
};

/* rope `scaling`: how each pair's inverse frequency is changed. */
enum {
    RAD_ROPE_SCALING_NONE = 0,
    RAD_ROPE_SCALING_LINEAR = 1,    /* inv_freq / factor */
    RAD_ROPE_SCALING_LLAMA3 = 2,    /* Llama 3.1's blend (factor, low/high_freq_factor, orig_ctx) */
    RAD_ROPE_SCALING_FACTORS = 3,   /* inv_freq_i / freq_factors[i]: GGUF's rope_freqs.weight */
    RAD_ROPE_SCALING_YARN = 4       /* YaRN (factor, orig_ctx, beta_fast, beta_slow,
                                    ** attn_factor, truncate): Qwen3 long context,
                                    ** gpt-oss, DeepSeek */
};

/* rope `truncate` (YaRN only): whether the correction range is rounded to
** whole dims, as transformers' default (truncate = True) does. */
enum { RAD_ROPE_TRUNCATE_OFF = 0, RAD_ROPE_TRUNCATE_ON = 1 };

/* router_topk `mode`: how a row's expert logits become choices and weights
** (docs/OPS.md, router_topk). */
enum {
    RAD_ROUTER_SOFTMAX_TOPK = 0,    /* weights = softmax over all experts, then the top k:
                                    ** Qwen2/3-MoE, Mixtral, OLMoE */
    RAD_ROUTER_TOPK_SOFTMAX = 1,    /* the top k logits, then softmax over those k: gpt-oss */
    RAD_ROUTER_SIGMOID = 2          /* weights = sigmoid(logit); chosen by sigmoid + bias,
                                    ** optionally group-limited: DeepSeek-V3, GLM-4.5 */
};

/* router_topk `renorm`: whether the k chosen weights are divided by their sum
** (Hugging Face's norm_topk_prob). */
enum { RAD_ROUTER_RENORM_OFF = 0, RAD_ROUTER_RENORM_ON = 1 };

/* moe_gemm `x_per_slot`: whether every (row, slot) has an input row of its
** own ([M * k, K], the down projection after the expert activation) or the
** k slots of a row share the row's input ([M, K], the gate and up
** projections). */
enum { RAD_MOE_X_PER_ROW = 0, RAD_MOE_X_PER_SLOT = 1 };

#endif /* RAD_OP_VALUES_H */
