/*
** rad_op_checks.h: the argument checks every kernel library makes, and the
** small helpers they need (the rows of a step, a row's address, a KV slot).
**
** docs/OPS.md says what each op refuses and with which code; this header
** says it in C, once, so that a kernel that ref refuses is refused by cpu
** (and any later library) with the same code.  Everything is static inline
** and hidden: compiled into each library, exported by none.  In a correctly
** declared model none of these checks fire; they make every library a safe
** target for a new plugin or a fuzzer.
*/
#ifndef RAD_OP_CHECKS_H
#define RAD_OP_CHECKS_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "../../base/rad_types.h"
#include "../rad_kernel.h"
#include "rad_dequant.h"
#include "rad_ops.h"

#pragma GCC visibility push(hidden)

/* The rows of this step, the op's ranged parameter. */
static inline int64_t rad_op_rows(const RadKernelArgs *a) { return a->param[RAD_P_M].i; }

/* Row r of an f32 activation (rows are row_bytes apart, not packed). */
static inline float *rad_act_row(const RadTensor *t, int64_t r)
{
    return (float *)(void *)((char *)t->data + r * t->row_bytes);
}

/* Check an f32 activation operand that must hold `rows` rows of `cols`
** floats.  0, RAD_E_ARG (no data), RAD_E_UNSUPPORTED (not f32) or
** RAD_E_SHAPE (rows overlap, are misaligned, or the buffer is too short). */
static inline int rad_check_act(const RadTensor *t, int64_t rows, int64_t cols)
{
    if (!t->data) return RAD_E_ARG;
    if (t->enc != RAD_ENC_F32) return RAD_E_UNSUPPORTED;
    if (t->row_bytes % (int64_t)sizeof(float)) return RAD_E_SHAPE;
    /* A single row needs no stride; more rows must not overlap. */
    if (rows > 1 && t->row_bytes < cols * (int64_t)sizeof(float)) return RAD_E_SHAPE;
    /* rank 0 means the core did not state a shape; trust the parameters. */
    if (t->rank >= 1 && t->shape[0] < rows) return RAD_E_SHAPE;
    return RAD_OK;
}

/* Check an int32 index operand holding at least `n` values. */
static inline int rad_check_index(const RadTensor *t, int64_t n)
{
    if (!t->data) return RAD_E_ARG;
    if (t->enc != RAD_ENC_I32) return RAD_E_UNSUPPORTED;
    if (t->rank >= 1 && t->shape[0] < n) return RAD_E_SHAPE;
    return RAD_OK;
}

/* Check a weight of `rows` rows by `cols` columns (a vector is 1 row and may
** be given rank 1): present, of an encoding the library serves (`served`,
** which the caller works out from w->enc), shape as stated, and rows whole
** blocks long. */
static inline int rad_check_weight_served(const RadTensor *w, int served, int64_t rows, int64_t cols)
{
    if (!w->data) return RAD_E_ARG;
    if (!served) return RAD_E_UNSUPPORTED;
    if (w->rank == 1) {
        if (rows != 1 || w->shape[0] != cols) return RAD_E_SHAPE;
    } else if (w->rank == 2) {
        if (w->shape[0] != rows || w->shape[1] != cols) return RAD_E_SHAPE;
    } else {
        return RAD_E_SHAPE;
    }
    int64_t need = rad_encoding_row_bytes(w->enc, cols);
    if (need < 0) return RAD_E_SHAPE;               /* not whole blocks */
    if (rows > 1 && w->row_bytes < need) return RAD_E_SHAPE;
    return RAD_OK;
}

/* The same for an encoding rad_dequant_row serves. */
static inline int rad_check_weight(const RadTensor *w, int64_t rows, int64_t cols)
{
    return rad_check_weight_served(w, rad_dequant_supported(w->enc), rows, cols);
}

/* --------------------------------------------------- per-op checks */

/* Bytes of one KV element (f16 or f32). */
static inline int64_t rad_kv_elem_bytes(const RadKvView *kv)
{
    return kv->enc == RAD_ENC_F16 ? 2 : 4;
}

/* The slot of position p of batch sequence s, or -1 when no block holds it
** (rad_kernel.h states the arithmetic). */
static inline int64_t rad_kv_slot(const RadKvView *kv, int64_t s, int64_t p)
{
    if (s < 0 || s >= kv->n_seq || p < 0) return -1;
    int64_t b = p / kv->block_size;
    if (b >= kv->max_blocks) return -1;
    int32_t block = kv->block_table[s * kv->max_blocks + b];
    if (block < 0) return -1;
    return (int64_t)block * kv->block_size + p % kv->block_size;
}

/* rope's freq_factors table for scaling FACTORS: n_rot / 2 finite positive
** f32 values (docs/OPS.md, rope). */
static inline int rad_check_freq_factors(const RadTensor *f, int64_t half)
{
    if (!f->data) return RAD_E_ARG;
    if (f->enc != RAD_ENC_F32) return RAD_E_UNSUPPORTED;
    if (f->rank != 1 || f->shape[0] != half) return RAD_E_SHAPE;
    const float *v = f->data;
    for (int64_t i = 0; i < half; i++)
        if (!(v[i] > 0) || v[i] > FLT_MAX) return RAD_E_ARG;   /* zero, negative, NaN or infinite */
    return RAD_OK;
}

/* A layer's KV view that can hold M rows of n_head_kv heads of hd. */
static inline int rad_check_kv(const RadKvView *kv, int64_t M, int64_t n_head_kv, int64_t hd)
{
    if (!kv || !kv->k || !kv->v || !kv->block_table || !kv->token_seq || !kv->positions)
        return RAD_E_ARG;
    if (kv->enc != RAD_ENC_F32 && kv->enc != RAD_ENC_F16) return RAD_E_UNSUPPORTED;
    if (kv->n_head_kv != n_head_kv || kv->head_dim != hd) return RAD_E_SHAPE;
    if (kv->block_size <= 0 || kv->max_blocks <= 0 || M > kv->n_tok) return RAD_E_SHAPE;
    if (kv->kv_row_bytes < n_head_kv * hd * rad_kv_elem_bytes(kv)) return RAD_E_SHAPE;
    return RAD_OK;
}

/* embed_lookup's operands, and every id inside the table (RAD_E_RANGE). */
static inline int rad_check_embed_lookup(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_EMBED_LOOKUP_N].i;
    const RadTensor *ids = &a->operand[RAD_EMBED_LOOKUP_IDS];
    const RadTensor *table = &a->operand[RAD_EMBED_LOOKUP_TABLE];
    int rc;
    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if (table->rank != 2) return table->data ? RAD_E_SHAPE : RAD_E_ARG;
    int64_t vocab = table->shape[0];
    if ((rc = rad_check_index(ids, M)) || (rc = rad_check_weight(table, vocab, N)) ||
        (rc = rad_check_act(&a->operand[RAD_EMBED_LOOKUP_OUT], M, N)))
        return rc;
    const int32_t *id = ids->data;
    for (int64_t m = 0; m < M; m++)
        if (id[m] < 0 || id[m] >= vocab) return RAD_E_RANGE;
    return RAD_OK;
}

/* attn_paged's parameters and operands, for a kernel serving head_dim up to
** max_head_dim.  The positions' blocks are each kernel's to check. */
static inline int rad_check_attn(const RadKernelArgs *a, int64_t max_head_dim)
{
    int64_t M = rad_op_rows(a);
    int64_t n_head = a->param[RAD_ATTN_N_HEAD].i, n_head_kv = a->param[RAD_ATTN_N_HEAD_KV].i;
    int64_t hd = a->param[RAD_ATTN_HEAD_DIM].i;
    const RadTensor *sinks = &a->operand[RAD_ATTN_SINKS];
    int rc;
    if (M <= 0 || n_head <= 0 || n_head_kv <= 0 || hd <= 0) return RAD_E_SHAPE;
    if (n_head % n_head_kv) return RAD_E_SHAPE;
    if (hd > max_head_dim) return RAD_E_UNSUPPORTED;
    if (a->param[RAD_ATTN_WINDOW].i < 0) return RAD_E_ARG;
    if ((rc = rad_check_kv(a->kv, M, n_head_kv, hd)) ||
        (rc = rad_check_act(&a->operand[RAD_ATTN_Q], M, n_head * hd)) ||
        (rc = rad_check_act(&a->operand[RAD_ATTN_OUT], M, n_head * hd)))
        return rc;
    /* Sinks are optional: absent means no sink term at all. */
    if (sinks->data) {
        if (sinks->enc != RAD_ENC_F32) return RAD_E_UNSUPPORTED;
        if (sinks->rank != 1 || sinks->shape[0] != n_head) return RAD_E_SHAPE;
    }
    return RAD_OK;
}

/* rope's parameters (docs/OPS.md, rope), shapes first, then the mode,
** theta and the scaling kind with its own parameters, then the operands;
** RAD_E_SHAPE, RAD_E_UNSUPPORTED or RAD_E_ARG as the page says. */
static inline int rad_check_rope(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a);
    int64_t n_head = a->param[RAD_ROPE_N_HEAD].i, hd = a->param[RAD_ROPE_HEAD_DIM].i;
    int64_t n_rot = a->param[RAD_ROPE_N_ROT].i, mode = a->param[RAD_ROPE_MODE].i;
    float theta = (float)a->param[RAD_ROPE_THETA].f, factor = (float)a->param[RAD_ROPE_FACTOR].f;
    float low_ff = (float)a->param[RAD_ROPE_LOW_FREQ_FACTOR].f;
    float high_ff = (float)a->param[RAD_ROPE_HIGH_FREQ_FACTOR].f;
    int64_t orig_ctx = a->param[RAD_ROPE_ORIG_CTX].i;
    int rc;

    if (M <= 0 || n_head <= 0 || hd <= 0) return RAD_E_SHAPE;
    if (n_rot <= 0 || n_rot % 2 || n_rot > hd) return RAD_E_SHAPE;
    if (mode != RAD_ROPE_MODE_NEOX && mode != RAD_ROPE_MODE_ADJACENT) return RAD_E_UNSUPPORTED;
    if (!(theta > 0) || !(theta <= FLT_MAX)) return RAD_E_ARG;
    switch (a->param[RAD_ROPE_SCALING].i) {
    case RAD_ROPE_SCALING_NONE:
        break;
    case RAD_ROPE_SCALING_LINEAR:
        if (!(factor > 0)) return RAD_E_ARG;
        break;
    case RAD_ROPE_SCALING_LLAMA3:
        if (!(factor > 0) || !(low_ff > 0) || !(high_ff > low_ff) || orig_ctx <= 0) return RAD_E_ARG;
        break;
    case RAD_ROPE_SCALING_FACTORS:
        if ((rc = rad_check_freq_factors(&a->operand[RAD_ROPE_FREQ_FACTORS], n_rot / 2))) return rc;
        break;
    case RAD_ROPE_SCALING_YARN: {
        /* 0 asks for transformers' default (beta_fast 32, beta_slow 1, the
        ** attention factor from `factor`); a given value must be usable */
        double bf = a->param[RAD_ROPE_BETA_FAST].f, bs = a->param[RAD_ROPE_BETA_SLOW].f;
        double af = a->param[RAD_ROPE_ATTN_FACTOR].f;
        int64_t truncate = a->param[RAD_ROPE_TRUNCATE].i;
        if (!(factor > 0) || !(factor <= FLT_MAX) || orig_ctx <= 0) return RAD_E_ARG;
        if (!(bf >= 0) || !(bs >= 0) || !(af >= 0) || !isfinite(bf) || !isfinite(bs) || !isfinite(af))
            return RAD_E_ARG;
        if (truncate != RAD_ROPE_TRUNCATE_OFF && truncate != RAD_ROPE_TRUNCATE_ON) return RAD_E_ARG;
        break;
    }
    default:
        return RAD_E_UNSUPPORTED;
    }
    if ((rc = rad_check_act(&a->operand[RAD_ROPE_X], M, n_head * hd)) ||
        (rc = rad_check_index(&a->operand[RAD_ROPE_POSITIONS], M)))
        return rc;
    return RAD_OK;
}

/* ------------------------------------------- mixture of experts */

/* Check an int32 operand of `rows` rows holding `cols` values each, rows
** row_bytes apart (router_topk's ids out, moe_gemm's ids in). */
static inline int rad_check_i32_rows(const RadTensor *t, int64_t rows, int64_t cols)
{
    if (!t->data) return RAD_E_ARG;
    if (t->enc != RAD_ENC_I32) return RAD_E_UNSUPPORTED;
    if (t->row_bytes % (int64_t)sizeof(int32_t)) return RAD_E_SHAPE;
    if (rows > 1 && t->row_bytes < cols * (int64_t)sizeof(int32_t)) return RAD_E_SHAPE;
    if (t->rank >= 1 && t->shape[0] < rows) return RAD_E_SHAPE;
    if (t->rank >= 2 && t->shape[1] < cols) return RAD_E_SHAPE;
    return RAD_OK;
}

static inline int32_t *rad_i32_row(const RadTensor *t, int64_t r)
{
    return (int32_t *)(void *)((char *)t->data + r * t->row_bytes);
}

/* Where slice e of a stacked weight lives (rad_kernel.h, RadTensor): its
** own address when the core gives one per slice, else e slices into data. */
static inline const void *rad_slice_data(const RadTensor *w, int64_t e)
{
    if (w->slices) return w->slices[e];
    return (const char *)w->data + e * w->slice_bytes;
}

/* Check a stacked weight of n_expert slices, each `rows` x `cols` of an
** encoding the library serves (`served`); rows == 0 asks for slices that
** are vectors of cols (a stacked bias, [n_expert, cols]).  The stack must
** state its slices (n_slices == shape[0]) and, when they are contiguous,
** a slice stride that holds a whole slice. */
static inline int rad_check_stacked_served(const RadTensor *w, int served, int64_t n_expert, int64_t rows,
                                           int64_t cols)
{
    if (!w->data && !w->slices) return RAD_E_ARG;
    if (!served) return RAD_E_UNSUPPORTED;
    int rank = rows ? 3 : 2;
    if (w->rank != rank || w->shape[0] != n_expert || w->shape[rank - 1] != cols) return RAD_E_SHAPE;
    if (rows && w->shape[1] != rows) return RAD_E_SHAPE;
    if (w->n_slices != n_expert) return RAD_E_SHAPE;
    int64_t need = rad_encoding_row_bytes(w->enc, cols);
    if (need < 0) return RAD_E_SHAPE;               /* not whole blocks */
    if (rows > 1 && w->row_bytes < need) return RAD_E_SHAPE;
    int64_t slice = rows ? (rows - 1) * w->row_bytes + need : need;
    if (!w->slices && w->slice_bytes < slice) return RAD_E_SHAPE;
    return RAD_OK;
}

static inline int rad_check_stacked(const RadTensor *w, int64_t n_expert, int64_t rows, int64_t cols)
{
    return rad_check_stacked_served(w, rad_dequant_supported(w->enc), n_expert, rows, cols);
}

/* router_topk's parameters and operands (docs/OPS.md, router_topk). */
static inline int rad_check_router(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), E = a->param[RAD_ROUTER_N_EXPERT].i, k = a->param[RAD_ROUTER_K].i;
    int64_t mode = a->param[RAD_ROUTER_MODE].i, renorm = a->param[RAD_ROUTER_RENORM].i;
    int64_t n_group = a->param[RAD_ROUTER_N_GROUP].i, topk_group = a->param[RAD_ROUTER_TOPK_GROUP].i;
    double scale = a->param[RAD_ROUTER_SCALE].f;
    const RadTensor *bias = &a->operand[RAD_ROUTER_BIAS];
    int rc;
    if (M <= 0 || E <= 0 || k <= 0 || k > E) return RAD_E_SHAPE;
    if (mode != RAD_ROUTER_SOFTMAX_TOPK && mode != RAD_ROUTER_TOPK_SOFTMAX && mode != RAD_ROUTER_SIGMOID)
        return RAD_E_UNSUPPORTED;
    if (renorm != RAD_ROUTER_RENORM_OFF && renorm != RAD_ROUTER_RENORM_ON) return RAD_E_ARG;
    if (!(scale > 0) || !isfinite(scale)) return RAD_E_ARG;
    if (n_group < 0 || n_group > E) return RAD_E_ARG;
    if (n_group > 1) {
        /* groups of at least two (a group scores by its best two) */
        if (E % n_group || E / n_group < 2) return RAD_E_SHAPE;
        if (topk_group < 1 || topk_group > n_group) return RAD_E_ARG;
        if (k > topk_group * (E / n_group)) return RAD_E_SHAPE;
    }
    if ((rc = rad_check_act(&a->operand[RAD_ROUTER_LOGITS], M, E)) ||
        (rc = rad_check_i32_rows(&a->operand[RAD_ROUTER_IDS], M, k)) ||
        (rc = rad_check_act(&a->operand[RAD_ROUTER_WEIGHTS], M, k)))
        return rc;
    if (bias->data) {
        if (bias->enc != RAD_ENC_F32) return RAD_E_UNSUPPORTED;
        if (bias->rank != 1 || bias->shape[0] != E) return RAD_E_SHAPE;
    }
    return RAD_OK;
}

/* moe_gemm's parameters and operands, for a library serving the weight's
** encoding when `served`; then every id inside the stack (RAD_E_RANGE). */
static inline int rad_check_moe_gemm_served(const RadKernelArgs *a, int served)
{
    int64_t M = rad_op_rows(a), k = a->param[RAD_MOE_GEMM_K_USED].i;
    int64_t N = a->param[RAD_MOE_GEMM_N].i, K = a->param[RAD_MOE_GEMM_K].i;
    int64_t per_slot = a->param[RAD_MOE_GEMM_X_PER_SLOT].i;
    const RadTensor *w = &a->operand[RAD_MOE_GEMM_W], *bias = &a->operand[RAD_MOE_GEMM_BIAS];
    const RadTensor *ids = &a->operand[RAD_MOE_GEMM_IDS];
    int rc;
    if (M <= 0 || k <= 0 || N <= 0 || K <= 0) return RAD_E_SHAPE;
    if (per_slot != RAD_MOE_X_PER_ROW && per_slot != RAD_MOE_X_PER_SLOT) return RAD_E_ARG;
    if (w->rank != 3) return w->data || w->slices ? RAD_E_SHAPE : RAD_E_ARG;
    int64_t E = w->shape[0];
    if ((rc = rad_check_act(&a->operand[RAD_MOE_GEMM_X], per_slot ? M * k : M, K)) ||
        (rc = rad_check_i32_rows(ids, M, k)) || (rc = rad_check_stacked_served(w, served, E, N, K)) ||
        (rc = rad_check_act(&a->operand[RAD_MOE_GEMM_OUT], M * k, N)))
        return rc;
    if (w->enc != a->param[RAD_MOE_GEMM_ENC].i) return RAD_E_ARG;
    if (bias->data || bias->slices) {
        if (bias->enc != RAD_ENC_F32) return RAD_E_UNSUPPORTED;
        if ((rc = rad_check_stacked_served(bias, 1, E, 0, N))) return rc;
    }
    for (int64_t m = 0; m < M; m++) {
        const int32_t *id = rad_i32_row(ids, m);
        for (int64_t j = 0; j < k; j++)
            if (id[j] < 0 || id[j] >= E) return RAD_E_RANGE;
    }
    return RAD_OK;
}

static inline int rad_check_moe_gemm(const RadKernelArgs *a)
{
    return rad_check_moe_gemm_served(a, rad_dequant_supported(a->operand[RAD_MOE_GEMM_W].enc));
}

/* moe_combine's parameters and operands. */
static inline int rad_check_moe_combine(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), k = a->param[RAD_MOE_COMBINE_K].i, N = a->param[RAD_MOE_COMBINE_N].i;
    int rc;
    if (M <= 0 || k <= 0 || N <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(&a->operand[RAD_MOE_COMBINE_Y], M * k, N)) ||
        (rc = rad_check_act(&a->operand[RAD_MOE_COMBINE_WEIGHTS], M, k)) ||
        (rc = rad_check_act(&a->operand[RAD_MOE_COMBINE_OUT], M, N)))
        return rc;
    return RAD_OK;
}

#pragma GCC visibility pop

#endif /* RAD_OP_CHECKS_H */
