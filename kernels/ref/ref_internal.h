/*
** ref_internal.h: what the reference kernel files share among themselves.
**
** Weight decoding into stack chunks and the launch functions, written once
** so each kernel file can read as the formula it implements.  The argument
** checks every library shares, the op vocabulary and the decoders are in
** kernels/ops/.  Nothing here is part of the library's interface: the only
** exported symbol of the .so is rad_kernel_library (plus the shared schema
** table and rad_dequant_row), so these names are hidden from the dynamic
** symbol table.
*/
#ifndef REF_INTERNAL_H
#define REF_INTERNAL_H

#include <stdint.h>

#include "../../base/rad_limits.h"
#include "../../base/rad_types.h"
#include "../rad_kernel.h"
#include "../ops/rad_dequant.h"
#include "../ops/rad_op_checks.h"
#include "../ops/rad_ops.h"

#pragma GCC visibility push(hidden)

/* Weights are decoded this many elements at a time into a stack buffer, so
** no kernel allocates.  A multiple of every block size we decode (1, 32,
** 256). */
#define REF_CHUNK 256

/* The largest head_dim attention serves: it keeps one head's accumulator on
** the stack (8 KiB of doubles).  Larger heads get RAD_E_UNSUPPORTED. */
#define REF_MAX_HEAD_DIM 1024

/* The most experts router_topk scores in one row: its per-row state is on
** the stack.  More is RAD_E_UNSUPPORTED (and refused at open, by name). */
#define REF_MAX_EXPERTS RAD_LIMIT_ROUTED_EXPERTS

/* Decode columns [k0, k0 + n) of weight row `row` into dst.  k0 must be a
** multiple of the encoding's block (any multiple of REF_CHUNK is). */
void ref_weight_decode(const RadTensor *w, int64_t row, int64_t k0, int64_t n, float *dst);

/* The dot product of weight row `row` with x[0..K), accumulated in double. */
double ref_weight_dot(const RadTensor *w, int64_t row, const float *x, int64_t K);

/* The launch functions, one per op, each in the file named for its family. */
int ref_embed_lookup(const RadKernelArgs *a);
int ref_gather_rows(const RadKernelArgs *a);
int ref_rmsnorm(const RadKernelArgs *a);
int ref_rmsnorm_add(const RadKernelArgs *a);
int ref_qk_norm(const RadKernelArgs *a);
int ref_add(const RadKernelArgs *a);
int ref_mul(const RadKernelArgs *a);
int ref_scale_rows(const RadKernelArgs *a);
int ref_silu_mul(const RadKernelArgs *a);
int ref_gelu_mul(const RadKernelArgs *a);
int ref_rope(const RadKernelArgs *a);
int ref_kv_store(const RadKernelArgs *a);
int ref_attn_paged(const RadKernelArgs *a);
int ref_gemm_nt(const RadKernelArgs *a);
int ref_logits_gemm(const RadKernelArgs *a);
int ref_clamp(const RadKernelArgs *a);
int ref_swiglu_oai(const RadKernelArgs *a);
int ref_sigmoid_gate(const RadKernelArgs *a);
int ref_router_topk(const RadKernelArgs *a);
int ref_moe_gemm(const RadKernelArgs *a);
int ref_moe_combine(const RadKernelArgs *a);

#pragma GCC visibility pop

#endif /* REF_INTERNAL_H */
