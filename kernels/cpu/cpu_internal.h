/*
** cpu_internal.h: what the files of the cpu kernel library share.
**
** The cpu library serves every op of docs/OPS.md with SIMD and threads.  It
** is built from three kinds of file:
**
**   cpu_library.c        the export: rows, init (CPUID), the ISA switch
**   cpu_gemm.c           the matrix-product driver: quantizes each activation
**                        row once into the weight's partner format, then
**                        splits the (activation rows x weight rows) product
**                        into tiles over the thread pool
**   dot_*.c / act_*.c    dot products and activation quantizers, one file
**                        per (encoding family, ISA): *_portable.c is plain C,
**                        *_avx2.c, *_avx512.c, *_neon.c are compiled with
**                        their ISA's flags (Makefile) and only ever called
**                        after CPUID said the machine has it
**   ops_*.c              the other ops (norms, rope, attention, ...)
**
** Dispatch is by table: at init every family's fill function writes its
** kernels for each encoding into cpu_enc[], portable first, then each ISA
** the machine has, so the best available one is left standing.
**
** Two rules every kernel keeps:
**  - Determinism.  An output element's value never depends on the thread
**    count, the task split, or whether it was computed by a tile kernel or
**    the single dot: each output has its own accumulator and the same order
**    of operations whichever path computed it.
**  - No allocation and no thread creation in a launch: scratch comes from
**    the row's scratch_bytes hook, threads from args->parallel_for.
*/
#ifndef CPU_INTERNAL_H
#define CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../rad_kernel.h"
#include "../../base/rad_limits.h"
#include "../ops/rad_ops.h"

#pragma GCC visibility push(hidden)

/* ---------------------------------------------------------------- ISA */

typedef enum CpuIsa {
    CPU_ISA_PORTABLE = 0,
    CPU_ISA_AVX2 = 1,       /* AVX2 + FMA + F16C */
    CPU_ISA_AVX512 = 2,     /* F, BW, VL, DQ; VNNI and BF16 used when cpu_has_* says so */
    CPU_ISA_NEON = 3        /* aarch64 with the dotprod extension */
} CpuIsa;

extern int cpu_isa;                     /* the level in use */
extern int cpu_has_avx512_vnni, cpu_has_avx512_bf16;

/* What the machine supports, from CPUID/XGETBV (x86) or HWCAP (aarch64). */
int cpu_isa_detect(void);
const char *cpu_isa_name(int isa);

/* ------------------------------------------------ activation formats */

/* The format an activation row is converted to before it meets a weight,
** chosen per weight encoding as llama.cpp's CPU backend does ("vec_dot_type"),
** so that our products round as llama.cpp's and agree with it closely.
** Layouts are ggml's, byte for byte:
**   Q8_0  32 per block: f16 d; int8 q[32]                         34 bytes
**   Q8_1  32 per block: f16 d; f16 s = d * sum(q); int8 q[32]     36 bytes
**   Q8_K  256 per block: f32 d; int8 q[256]; int16 bsums[16]     292 bytes
**   F16 / BF16 / F32 rows of K elements. */
typedef enum CpuActFormat {
    CPU_ACT_F32 = 0, CPU_ACT_F16, CPU_ACT_BF16, CPU_ACT_Q8_0, CPU_ACT_Q8_1, CPU_ACT_Q8_K,
    CPU_ACT_Q8_0_SUMS,      /* Q8_0, then each block's int32 sum of codes
                            ** (4-aligned): q4_0's offset for the x8 tiles */
    CPU_ACT_COUNT
} CpuActFormat;

/* Bytes of one converted row of K elements (K a multiple of the block). */
size_t cpu_act_row_bytes(int fmt, int64_t K);

/* Convert one f32 row of K elements.  Every ISA's version writes the same
** bytes as the portable one (tests/ops/test_cpu.c checks). */
typedef void (*CpuActQuantFn)(const float *x, void *dst, int64_t K);
extern CpuActQuantFn cpu_act_quant[CPU_ACT_COUNT];

/* Bytes of one block of the 32-element activation formats. */
#define CPU_Q8_0_BYTES 34
#define CPU_Q8_1_BYTES 36

/* act_q8*.c: the converters for F32, F16, BF16, Q8_0 and Q8_1 rows, one set
** per ISA; the dot families' fill functions put them into cpu_act_quant. */
void cpu_act_f32_portable(const float *x, void *dst, int64_t K);
void cpu_act_f16_portable(const float *x, void *dst, int64_t K);
void cpu_act_bf16_portable(const float *x, void *dst, int64_t K);
void cpu_act_q8_0_portable(const float *x, void *dst, int64_t K);
void cpu_act_q8_1_portable(const float *x, void *dst, int64_t K);
#if defined(__x86_64__)
void cpu_act_f16_avx2(const float *x, void *dst, int64_t K);
void cpu_act_q8_0_avx2(const float *x, void *dst, int64_t K);
void cpu_act_q8_1_avx2(const float *x, void *dst, int64_t K);
#endif
#if defined(__aarch64__)
void cpu_act_f16_neon(const float *x, void *dst, int64_t K);
void cpu_act_q8_0_neon(const float *x, void *dst, int64_t K);
void cpu_act_q8_1_neon(const float *x, void *dst, int64_t K);
#endif

/* ------------------------------------------------------ dot products */

/* One weight row (K elements, whole blocks) with one converted activation
** row: *out = sum_k w[k] * a[k]. */
typedef void (*CpuDotFn)(int64_t K, const void *w_row, const void *act_row, float *out);

/* A tile: out[r * out_stride + c] = dot(activation row r, weight row c) for
** r < n_act, c < n_w, rows w_stride / act_stride bytes apart.  n_act and
** n_w are at most the entry's tile_act / tile_w.  Must give, element for
** element, exactly what `dot` gives. */
typedef void (*CpuDotTileFn)(int64_t K, const void *w, size_t w_stride, int n_w,
                             const void *act, size_t act_stride, int n_act,
                             float *out, size_t out_stride);

typedef struct CpuEncKernels {
    int act_fmt;            /* CpuActFormat the weight pairs with */
    CpuDotFn dot;           /* NULL: the encoding is not served */
    CpuDotTileFn tile;      /* optional; NULL: the driver loops over dot */
    int tile_act, tile_w;   /* the largest tile `tile` takes */
    const char *isa;        /* which file filled it, for --debug-graph and tests */
} CpuEncKernels;

extern CpuEncKernels cpu_enc[RAD_ENC_COUNT];

/* ---------------------------------------------- the x8 weight layout */

/* x8.c: weights relayouted at load (rad_kernel.h, relayout) into groups of
** eight rows interleaved block by block, so one 32-byte load holds four
** bytes of each of the eight rows and a tile computes eight outputs in the
** lanes of one register (x8.c describes the layout).  An encoding has the
** layout when cpu_enc_x8[enc].tile is set, by the ISA fill functions; its
** tiles take n_w = 8 always (the weight's N is a multiple of 8), K in
** elements, and the activation format cpu_enc_x8[enc].act_fmt. */
#define CPU_X8_ROWS 8
extern CpuEncKernels cpu_enc_x8[RAD_ENC_COUNT];
size_t cpu_relayout_bytes(const RadTensor *weight);
/* The copy's bytes per weight row: its stride when rows are counted in
** groups of 8 (row 8g's address is the group's). */
int64_t cpu_x8_row_bytes(int enc, int64_t K);
/* q4_k's group super-block (x8.c): offsets of its parts, and its size. */
enum {
    X8_Q4K_D = 0, X8_Q4K_DMIN = 16, X8_Q4K_SCALES = 32, X8_Q4K_MINS = 96, X8_Q4K_CODES = 160,
    X8_Q4K_GROUP_BYTES = 160 + 1024
};
/* CPU_ACT_Q8_0_SUMS rows: where the block sums start, and the converter. */
static inline size_t cpu_act_sums_offset(int64_t K) { return ((size_t)(K / 32) * CPU_Q8_0_BYTES + 3) / 4 * 4; }
void cpu_act_q8_0_sums(const float *x, void *dst, int64_t K);
int cpu_relayout(const RadTensor *weight, void *dst);
/* The same for a stacked weight (moe_gemm's experts), slice by slice. */
size_t cpu_relayout_stack_bytes(const RadTensor *weight);
int cpu_relayout_stack(const RadTensor *weight, void *dst);
#if defined(__x86_64__)
void cpu_fill_x8_avx2(void);
#endif

/* Fill functions, one per (family, ISA) file.  Each writes only the entries
** of the encodings (and activation formats) it accelerates. */
void cpu_fill_float_portable(void);     /* f32, f16, bf16 weights; F32/F16/BF16 rows */
void cpu_fill_q32_portable(void);       /* q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl mxfp4; Q8_0/Q8_1 */
void cpu_fill_kquants_portable(void);   /* q2_k..q6_k; Q8_K */
#if defined(__x86_64__)
void cpu_fill_float_avx2(void);
void cpu_fill_q32_avx2(void);
void cpu_fill_kquants_avx2(void);
void cpu_fill_float_avx512(void);
void cpu_fill_q32_avx512(void);
void cpu_fill_kquants_avx512(void);
#endif
#if defined(__aarch64__)
void cpu_fill_float_neon(void);
void cpu_fill_q32_neon(void);
void cpu_fill_kquants_neon(void);
#endif

/* ------------------------------------------------------------ launch */

/* Run fn over n_tasks on the pool the core passed in the args (serially when
** it passed none). */
static inline void cpu_parallel(const RadKernelArgs *a, int n_tasks, void (*fn)(void *, int), void *ctx)
{
    if (a->parallel_for && n_tasks > 1) a->parallel_for(a->pool, n_tasks, fn, ctx);
    else for (int t = 0; t < n_tasks; t++) fn(ctx, t);
}

/* Launch functions, one per op, each in the file named for its family. */
/* The GEMMs have a row for the decode band (M = 1: split the weight rows over
** the threads, stream each weight once) and one for the prefill band (M >= 2:
** tiles of activation rows x weight rows, so a weight block is read from
** cache for many activation rows). */
int cpu_gemm_nt_decode(const RadKernelArgs *a);
int cpu_gemm_nt_prefill(const RadKernelArgs *a);
int cpu_logits_gemm_decode(const RadKernelArgs *a);
int cpu_logits_gemm_prefill(const RadKernelArgs *a);
size_t cpu_gemm_nt_scratch(const RadKernelArgs *a);
size_t cpu_logits_gemm_scratch(const RadKernelArgs *a);
int cpu_embed_lookup(const RadKernelArgs *a);
int cpu_gather_rows(const RadKernelArgs *a);
int cpu_rmsnorm(const RadKernelArgs *a);
int cpu_rmsnorm_add(const RadKernelArgs *a);
int cpu_qk_norm(const RadKernelArgs *a);
int cpu_add(const RadKernelArgs *a);
int cpu_mul(const RadKernelArgs *a);
int cpu_scale_rows(const RadKernelArgs *a);
int cpu_silu_mul(const RadKernelArgs *a);
int cpu_gelu_mul(const RadKernelArgs *a);
int cpu_rope(const RadKernelArgs *a);
int cpu_kv_store(const RadKernelArgs *a);
int cpu_attn_paged(const RadKernelArgs *a);
size_t cpu_attn_paged_scratch(const RadKernelArgs *a);
int cpu_clamp(const RadKernelArgs *a);
int cpu_sigmoid_gate(const RadKernelArgs *a);
/* Mixture of experts: the expert products (ops_moe.c; one launch for both
** bands: decode and prefill differ only in the split), routing and the
** weighted combine (ops_route.c). */
int cpu_moe_gemm(const RadKernelArgs *a);
size_t cpu_moe_gemm_scratch(const RadKernelArgs *a);
int cpu_router_topk(const RadKernelArgs *a);
#define CPU_MAX_EXPERTS RAD_LIMIT_ROUTED_EXPERTS /* router_topk's row serves up to this many (ref's limit too) */
int cpu_moe_combine(const RadKernelArgs *a);

/* cpu_library.c: force an ISA level (tests); 0, or -1 when the machine lacks it. */
int cpu_set_isa(int isa);

#pragma GCC visibility pop

#endif /* CPU_INTERNAL_H */
