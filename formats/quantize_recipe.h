/*
** quantize_recipe.h: llama.cpp's mixed quantizations (Q4_K_M and friends)
** as rules the converter applies tensor by tensor.
**
** A recipe names a default block encoding and the tensors that get more
** bits: in Q4_K_M, q4_k everywhere but the output head (q6_k) and, in the
** layers llama.cpp's use_more_bits picks (the first and last eighth, and
** every third in between), attn_v and ffn_down (q6_k).  The rules are the
** facts of llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) for
** dense models without an importance matrix, restated here; a row length
** the chosen block does not divide falls back as llama.cpp falls back
** (q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, then f16).  docs/HUB.md lists
** what each recipe gives.
**
** Tensor names are GGUF's (blk.N.attn_v.weight, output.weight, ...), which
** are the names our plugins declare.
*/
#ifndef RAD_QUANTIZE_RECIPE_H
#define RAD_QUANTIZE_RECIPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The recipe's canonical (lower-case) name when `name` is one, any case:
** "q4_k_m", "q4_k_s", "q5_k_m", "q5_k_s", "q6_k"; else NULL. */
const char *rad_quant_recipe_name(const char *name);

/* What a recipe needs to know of one tensor. */
typedef struct RadRecipeTensor {
    const char *name;     /* "blk.3.attn_v.weight", "output.weight", "token_embd.weight" */
    int rank;             /* 1 for norms and biases, 2 for matrices, 3 for stacked experts */
    int64_t cols;         /* the row length (innermost dimension) */
    int n_layers;         /* of the model */
    int n_expert;         /* routed experts, 0 for a dense model */
    int head_tied;        /* 1: the output head is token_embd itself */
} RadRecipeTensor;

/* The encoding recipe `name` (canonical, see above) gives tensor t: a
** RadEncoding.  Tensors that stay in full precision (rank 1, the MoE
** router) get RAD_ENC_F32. */
int rad_quant_recipe_enc(const char *name, const RadRecipeTensor *t);

#ifdef __cplusplus
}
#endif
#endif /* RAD_QUANTIZE_RECIPE_H */
