/*
** rad_ops.h: the op vocabulary as C data, shared by every kernel library.
**
** docs/OPS.md describes each op in prose; kernels/ops/schemas.c states the
** same thing as a table of RadOpSchema, and this header names the positions
** inside it.  Every library that serves these ops (ref, cpu, later cuda)
** compiles schemas.c into itself and exports rad_op_schemas as its schema
** table, so no two libraries can disagree about a parameter's name or an
** operand's place.  The values parameters take (rope's modes and scaling
** kinds) are in rad_op_values.h, which plugins include too.
**
** The enums below are positions in args->param[] and args->operand[], in
** schema order.  They must follow the table in schemas.c exactly; the test
** tests/ops/test_ref.c pins the table by name, and every kernel reads its
** arguments through these names rather than bare numbers.
*/
#ifndef RAD_OPS_H
#define RAD_OPS_H

#include "../rad_kernel.h"
#include "rad_op_values.h"

#define RAD_OP_SCHEMA_COUNT 21

extern const RadOpSchema rad_op_schemas[];
extern const int rad_op_schema_count;          /* == RAD_OP_SCHEMA_COUNT */

/* The ranged parameter, the rows of this step, is first in every op. */
#define RAD_P_M 0

/* embed_lookup(M, N; ids, table, out) */
enum { RAD_EMBED_LOOKUP_N = 1 };
enum { RAD_EMBED_LOOKUP_IDS, RAD_EMBED_LOOKUP_TABLE, RAD_EMBED_LOOKUP_OUT };

/* rmsnorm(M, N, eps, w_offset; x, w, out) */
enum { RAD_RMSNORM_N = 1, RAD_RMSNORM_EPS, RAD_RMSNORM_W_OFFSET };
enum { RAD_RMSNORM_X, RAD_RMSNORM_W, RAD_RMSNORM_OUT };

/* rmsnorm_add(M, N, eps, w_offset; x, d, w, out) */
enum { RAD_RMSNORM_ADD_N = 1, RAD_RMSNORM_ADD_EPS, RAD_RMSNORM_ADD_W_OFFSET };
enum { RAD_RMSNORM_ADD_X, RAD_RMSNORM_ADD_D, RAD_RMSNORM_ADD_W, RAD_RMSNORM_ADD_OUT };

/* add(M, N; a, b, out) and mul(M, N; a, b, out) share one layout. */
enum { RAD_BINARY_N = 1 };
enum { RAD_BINARY_A, RAD_BINARY_B, RAD_BINARY_OUT };

/* scale_rows(M, N, scale; x) */
enum { RAD_SCALE_ROWS_N = 1, RAD_SCALE_ROWS_SCALE };
enum { RAD_SCALE_ROWS_X };

/* silu_mul(M, N; gate, up, out) and gelu_mul(M, N; gate, up, out) */
enum { RAD_GATED_N = 1 };
enum { RAD_GATED_GATE, RAD_GATED_UP, RAD_GATED_OUT };

/* rope(M, n_head, head_dim, n_rot, mode, theta, scaling, factor,
**      low_freq_factor, high_freq_factor, orig_ctx, beta_fast, beta_slow,
**      attn_factor, truncate; x, positions, freq_factors?)
** freq_factors (f32, n_rot/2) serves scaling FACTORS and only it; the last
** four parameters serve scaling YARN and only it (rad_op_values.h). */
enum {
    RAD_ROPE_N_HEAD = 1, RAD_ROPE_HEAD_DIM, RAD_ROPE_N_ROT, RAD_ROPE_MODE,
    RAD_ROPE_THETA, RAD_ROPE_SCALING, RAD_ROPE_FACTOR, RAD_ROPE_LOW_FREQ_FACTOR,
    RAD_ROPE_HIGH_FREQ_FACTOR, RAD_ROPE_ORIG_CTX, RAD_ROPE_BETA_FAST, RAD_ROPE_BETA_SLOW,
    RAD_ROPE_ATTN_FACTOR, RAD_ROPE_TRUNCATE
};
enum { RAD_ROPE_X, RAD_ROPE_POSITIONS, RAD_ROPE_FREQ_FACTORS };

/* qk_norm(M, n_head, head_dim, eps, w_offset; x, w) */
enum { RAD_QK_NORM_N_HEAD = 1, RAD_QK_NORM_HEAD_DIM, RAD_QK_NORM_EPS, RAD_QK_NORM_W_OFFSET };
enum { RAD_QK_NORM_X, RAD_QK_NORM_W };

/* kv_store(M, n_head_kv, head_dim; k, v, kv) */
enum { RAD_KV_STORE_N_HEAD_KV = 1, RAD_KV_STORE_HEAD_DIM };
enum { RAD_KV_STORE_K, RAD_KV_STORE_V, RAD_KV_STORE_KV };

/* attn_paged(M, n_head, n_head_kv, head_dim, scale, window, softcap;
**            q, kv, out, sinks?) */
enum {
    RAD_ATTN_N_HEAD = 1, RAD_ATTN_N_HEAD_KV, RAD_ATTN_HEAD_DIM, RAD_ATTN_SCALE,
    RAD_ATTN_WINDOW, RAD_ATTN_SOFTCAP
};
enum { RAD_ATTN_Q, RAD_ATTN_KV, RAD_ATTN_OUT, RAD_ATTN_SINKS };

/* gemm_nt(M, N, K, enc; x, w, bias?, out) */
enum { RAD_GEMM_NT_N = 1, RAD_GEMM_NT_K, RAD_GEMM_NT_ENC };
enum { RAD_GEMM_NT_X, RAD_GEMM_NT_W, RAD_GEMM_NT_BIAS, RAD_GEMM_NT_OUT };

/* gather_rows(M, N; x, idx, out) */
enum { RAD_GATHER_ROWS_N = 1 };
enum { RAD_GATHER_ROWS_X, RAD_GATHER_ROWS_IDX, RAD_GATHER_ROWS_OUT };

/* logits_gemm(M, N, K, enc, softcap; x, w, out) */
enum { RAD_LOGITS_GEMM_N = 1, RAD_LOGITS_GEMM_K, RAD_LOGITS_GEMM_ENC, RAD_LOGITS_GEMM_SOFTCAP };
enum { RAD_LOGITS_GEMM_X, RAD_LOGITS_GEMM_W, RAD_LOGITS_GEMM_OUT };

/* router_topk(M, n_expert, k, mode, renorm, scale, n_group, topk_group;
**             logits, bias?, ids, weights)
** mode and renorm take the RAD_ROUTER_* values of rad_op_values.h; ids is
** an i32 [M, k] output, weights f32 [M, k]. */
enum {
    RAD_ROUTER_N_EXPERT = 1, RAD_ROUTER_K, RAD_ROUTER_MODE, RAD_ROUTER_RENORM, RAD_ROUTER_SCALE,
    RAD_ROUTER_N_GROUP, RAD_ROUTER_TOPK_GROUP
};
enum { RAD_ROUTER_LOGITS, RAD_ROUTER_BIAS, RAD_ROUTER_IDS, RAD_ROUTER_WEIGHTS };

/* moe_gemm(M, k, N, K, enc, x_per_slot; x, ids, w, bias?, out)
** w is a stacked weight [n_expert, N, K] (RadTensor's slices), bias a
** stacked f32 [n_expert, N]; out has M * k rows. */
enum { RAD_MOE_GEMM_K_USED = 1, RAD_MOE_GEMM_N, RAD_MOE_GEMM_K, RAD_MOE_GEMM_ENC, RAD_MOE_GEMM_X_PER_SLOT };
enum { RAD_MOE_GEMM_X, RAD_MOE_GEMM_IDS, RAD_MOE_GEMM_W, RAD_MOE_GEMM_BIAS, RAD_MOE_GEMM_OUT };

/* moe_combine(M, k, N; y, weights, out): y has M * k rows. */
enum { RAD_MOE_COMBINE_K = 1, RAD_MOE_COMBINE_N };
enum { RAD_MOE_COMBINE_Y, RAD_MOE_COMBINE_WEIGHTS, RAD_MOE_COMBINE_OUT };

/* clamp(M, N, lo, hi; x) */
enum { RAD_CLAMP_N = 1, RAD_CLAMP_LO, RAD_CLAMP_HI };
enum { RAD_CLAMP_X };

/* swiglu_oai(M, N, alpha, limit; gate, up, out): the operands as silu_mul's
** (RAD_GATED_GATE, RAD_GATED_UP, RAD_GATED_OUT). */
enum { RAD_SWIGLU_OAI_N = 1, RAD_SWIGLU_OAI_ALPHA, RAD_SWIGLU_OAI_LIMIT };

/* sigmoid_gate(M, N; x, g, out): g has one column, a gate per row. */
enum { RAD_SIGMOID_GATE_N = 1 };
enum { RAD_SIGMOID_GATE_X, RAD_SIGMOID_GATE_G, RAD_SIGMOID_GATE_OUT };

#endif /* RAD_OPS_H */
