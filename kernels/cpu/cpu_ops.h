/*
** cpu_ops.h: what the non-GEMM ops of the cpu library share.
**
** The launch functions (ops_norm.c, ops_elementwise.c, ops_rope.c,
** ops_copy.c, ops_attention.c) are portable C: they check arguments, split
** the work into tasks and walk rows.  The inner loops they call, the ones
** that touch every element, come from two small dispatch tables:
**
**   CpuVecOps   streaming loops over a row: elementwise arithmetic, the
**               gated activations, sums of squares, the norm's scaling,
**               rope's rotation and its sin/cos, f32 <-> f16
**   CpuAttnOps  attention's tiles: query-key scores, exp-and-sum of a
**               score row, softcap, the probability-weighted sum of values
**
** Each ISA file (ops_elementwise_avx2.c, ops_attention_avx2.c) defines its
** table; the portable ones live beside the launches.  cpu_vec() and
** cpu_attn() pick the table for the level cpu_isa names at the moment of
** the call, so rad_cpu_set_isa() takes effect on the next launch.  A level
** with no table of its own (avx512 today; neon) uses the best one below it
** that its machine can run: AVX-512 machines run the AVX2 table.
**
** Accuracy contract of the tables: add, mul and scale are one IEEE
** operation per element (bit-identical to ref on every ISA); rope's
** rotation is ref's two products and one sum, unfused, so with the same
** sin/cos it is bit-identical too; everything else is f32 arithmetic within
** a few ulp, and never depends on how a launch split its work.
*/
#ifndef CPU_OPS_H
#define CPU_OPS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "../../base/rad_types.h"
#include "../ops/rad_dequant.h"
#include "../ops/rad_op_checks.h"
#include "cpu_internal.h"

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------- dispatch tables */

typedef struct CpuVecOps {
    const char *isa;
    /* out[i] = a[i] + b[i] / a[i] * b[i]; out may equal a or b. */
    void (*add)(const float *a, const float *b, float *out, int64_t n);
    void (*mul)(const float *a, const float *b, float *out, int64_t n);
    /* x[i] = x[i] * s */
    void (*scale)(float *x, float s, int64_t n);
    /* out[i] = silu(g[i]) * u[i], gelu_tanh(g[i]) * u[i]; out may equal g or u. */
    void (*silu_mul)(const float *g, const float *u, float *out, int64_t n);
    void (*gelu_mul)(const float *g, const float *u, float *out, int64_t n);
    /* sum x[i]^2, accumulated in double in an order fixed by n alone. */
    double (*sum_squares)(const float *x, int64_t n);
    /* x[i] += d[i] (one f32 add each), then sum x[i]^2 as sum_squares. */
    double (*add_sum_squares)(float *x, const float *d, int64_t n);
    /* out[i] = (x[i] * r) * (w[i] + w_offset); out may equal x. */
    void (*norm_apply)(const float *x, float r, const float *w, float w_offset, float *out, int64_t n);
    /* c[i], s[i] = cos, sin of angle[i], each the f32 nearest the true value
    ** (evaluated in double, rounded once), as ref's rope does. */
    void (*sincos)(const float *angle, float *c, float *s, int64_t n);
    /* One head's rotation with pair i turning by (c[i], s[i]):
    ** neox pairs (i, i + half), adjacent pairs (2i, 2i + 1). */
    void (*rope_neox)(float *x, const float *c, const float *s, int64_t half);
    void (*rope_adjacent)(float *x, const float *c, const float *s, int64_t half);
    /* f32 -> f16, round to nearest even, exactly rad_f32_to_f16 (NaN -> 0x7e00). */
    void (*to_f16)(const float *x, uint16_t *out, int64_t n);
    /* f16 -> f32 (exact). */
    void (*from_f16)(const uint16_t *x, float *out, int64_t n);
} CpuVecOps;

typedef struct CpuAttnOps {
    const char *isa;
    /* s[i * s_stride + j] = dot(q + i * hd, row j of k) for i < nq, j < nk;
    ** k's rows are k_stride bytes apart. */
    void (*scores)(const float *q, int nq, int64_t hd, const float *k, size_t k_stride, int nk,
                   float *s, int s_stride);
    /* The same, with keys stored as f16 (rows k_stride bytes apart).
    ** Optional: NULL means the driver converts a chunk first. */
    void (*scores_f16)(const float *q, int nq, int64_t hd, const void *k, size_t k_stride, int nk,
                       float *s, int s_stride);
    /* x[j] = cap * tanh(x[j] / cap) */
    void (*softcap)(float *x, int n, float cap);
    /* x[j] = exp(x[j] - m) (0 for -inf), returning their sum in a fixed order. */
    float (*exp_sum)(float *x, int n, float m);
    /* acc[i * hd ..] += sum_j p[i * p_stride + j] * (row j of v) for i < nq,
    ** j < nk; v's rows are v_stride bytes apart. */
    void (*pv)(const float *p, int p_stride, int nq, const float *v, size_t v_stride, int nk,
               int64_t hd, float *acc);
    /* The same with values stored as f16; optional as scores_f16. */
    void (*pv_f16)(const float *p, int p_stride, int nq, const void *v, size_t v_stride, int nk,
                   int64_t hd, float *acc);
    /* n rows of hd f16 values, src rows stride bytes apart, into dst[n][hd]. */
    void (*rows_from_f16)(const void *src, size_t stride, int n, int64_t hd, float *dst);
    /* acc[d] = fma(part[d], b, acc[d] * a): one part folded into the others. */
    void (*fold)(float *acc, const float *part, float a, float b, int64_t n);
} CpuAttnOps;

extern const CpuVecOps cpu_vec_portable;
extern const CpuAttnOps cpu_attn_portable;
#if defined(__x86_64__)
extern const CpuVecOps cpu_vec_avx2;
extern const CpuAttnOps cpu_attn_avx2;
#endif
#if defined(__aarch64__)
extern const CpuVecOps cpu_vec_neon;
extern const CpuAttnOps cpu_attn_neon;
#endif

/* Portable loops an ISA table may reuse (ops_elementwise.c). */
void cpu_sincos_portable(const float *angle, float *c, float *s, int64_t n);
void cpu_rope_neox_portable(float *x, const float *c, const float *s, int64_t half);
void cpu_rope_adjacent_portable(float *x, const float *c, const float *s, int64_t half);

static inline const CpuVecOps *cpu_vec(void)
{
#if defined(__x86_64__)
    if (cpu_isa == CPU_ISA_AVX2 || cpu_isa == CPU_ISA_AVX512) return &cpu_vec_avx2;
#elif defined(__aarch64__)
    if (cpu_isa == CPU_ISA_NEON) return &cpu_vec_neon;
#endif
    return &cpu_vec_portable;
}

static inline const CpuAttnOps *cpu_attn(void)
{
#if defined(__x86_64__)
    if (cpu_isa == CPU_ISA_AVX2 || cpu_isa == CPU_ISA_AVX512) return &cpu_attn_avx2;
#elif defined(__aarch64__)
    if (cpu_isa == CPU_ISA_NEON) return &cpu_attn_neon;
#endif
    return &cpu_attn_portable;
}

/* ------------------------------------------------------------ arguments */

/* rad_op_rows, rad_act_row and the argument checks are every library's
** (kernels/ops/rad_op_checks.h), so that a kernel ref refuses is refused
** here with the same code. */

/* Row j of a key or value chunk whose rows are stride bytes apart. */
static inline __attribute__((always_inline)) const void *cpu_row_at(const void *base, size_t stride, int j)
{
    return (const char *)base + (size_t)j * stride;
}

/* Weights are decoded this many elements at a time into a stack buffer when
** they are not f32 (a multiple of every block size: 1, 32, 256). */
#define CPU_CHUNK 256

/* ---------------------------------------------------------------- tasks */

/* How many tasks to cut `items` independent items into, when each costs
** about `item_work` units and a task should carry at least `min_work` (so
** that the pool's dispatch, a few microseconds, never costs more than the
** work it spreads): at most one per thread, at least one.  Only ops whose
** every output is computed the same way whatever the split may use this
** freely; it depends on the thread count. */
static inline int cpu_task_count(const RadKernelArgs *a, int64_t items, int64_t item_work, int64_t min_work)
{
    if (!a->parallel_for || a->n_threads <= 1 || items <= 1) return 1;
    int64_t by_work = items * item_work / (min_work > 0 ? min_work : 1);
    int64_t n = a->n_threads;
    if (n > by_work) n = by_work;
    if (n > items) n = items;
    return n < 1 ? 1 : (int)n;
}

/* The first item of task t when `items` are cut into n near-equal runs. */
static inline int64_t cpu_task_start(int64_t items, int n, int t)
{
    return items * t / n;
}

/* ----------------------------------------------------------------- math */

/* pi/2 in three parts for Cody-Waite reduction: the first two have 32
** significant bits, so k * part is exact for |k| < 2^21, and the angles rope
** makes (|x| <= 2^19, checked) need no more. */
#define CPU_PIO2_1 0x1.921fb544p+0
#define CPU_PIO2_2 0x1.0b4611a6p-34
#define CPU_PIO2_3 0x1.3198a2e037073p-69
#define CPU_2_OVER_PI 0x1.45f306dc9c883p-1
#define CPU_SINCOS_MAX 0x1p19

/* sin and cos of r in [-pi/4, pi/4] by their Taylor series in double, to
** r^17 and r^16: the first omitted terms are below 1e-19 there.  Plain
** multiplies and adds (no fma), so the AVX2 version, written with the same
** operations in the same order, gives the same bits. */
#define CPU_SIN_POLY(r, r2) \
    ((r) + (r) * (r2) * (-1.0 / 6 + (r2) * (1.0 / 120 + (r2) * (-1.0 / 5040 + (r2) * (1.0 / 362880 + \
    (r2) * (-1.0 / 39916800 + (r2) * (1.0 / 6227020800.0 + (r2) * (-1.0 / 1307674368000.0 + \
    (r2) * (1.0 / 355687428096000.0)))))))))
#define CPU_COS_POLY(r2) \
    (1.0 + (r2) * (-0.5 + (r2) * (1.0 / 24 + (r2) * (-1.0 / 720 + (r2) * (1.0 / 40320 + \
    (r2) * (-1.0 / 3628800 + (r2) * (1.0 / 479001600.0 + (r2) * (-1.0 / 87178291200.0 + \
    (r2) * (1.0 / 20922789888000.0)))))))))

/* cos and sin of an f32 angle, evaluated in double and rounded once: the
** correctly rounded f32 except, at worst, in ties closer than a double's
** error, as ref's (float)cos((double)angle).  Beyond CPU_SINCOS_MAX, libm. */
static inline void cpu_sincos1(float angle, float *c, float *s)
{
    double x = (double)angle;
    if (!(x >= -CPU_SINCOS_MAX && x <= CPU_SINCOS_MAX)) {
        *c = (float)cos(x);
        *s = (float)sin(x);
        return;
    }
    double k = nearbyint(x * CPU_2_OVER_PI);
    double r = x - k * CPU_PIO2_1;
    r = r - k * CPU_PIO2_2;
    r = r - k * CPU_PIO2_3;
    double r2 = r * r;
    double sr = CPU_SIN_POLY(r, r2), cr = CPU_COS_POLY(r2);
    int q = (int)(int64_t)k & 3;
    double sx = q & 1 ? cr : sr, cx = q & 1 ? sr : cr;
    if (q & 2) sx = -sx;
    if ((q + 1) & 2) cx = -cx;
    *c = (float)cx;
    *s = (float)sx;
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* e^x for 8 floats within 2 ulp: x = n ln2 + r with |r| <= ln2/2 (ln2 in two
** parts, Cody-Waite), e^r by its Taylor series to r^7 (truncation below
** 6e-9), times 2^n built in the exponent field.  Underflow (x < ln 2^-126)
** gives 0, so exp(-inf) is exactly 0; overflow gives inf; NaN stays NaN. */
static inline __m256 cpu_exp256(__m256 x)
{
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693359375f);
    const __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
    r = _mm256_fnmadd_ps(n, ln2_lo, r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n as 2^(n-1) * 2, so that n = 128 (x just below the overflow edge)
    ** still has an exponent field. */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23);
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(2.0f));
    y = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ), y);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(88.72283f), _CMP_GT_OQ));
    return y;
}

/* The sum of the 8 lanes, pairwise as ((0+1)+(2+3)) + ((4+5)+(6+7)): the
** order cpu_hsum4 uses for each of its four inputs. */
static inline float cpu_hsum256(__m256 a)
{
    __m256 h = _mm256_hadd_ps(a, a);
    h = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* The lane sums of four vectors as [sum a, sum b, sum c, sum d]. */
static inline __m128 cpu_hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    __m256 abcd = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* The first n (< 8) lanes selected, for masked loads and stores. */
static inline __m256i cpu_tail_mask(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

/* cpu_exp256 for 4 lanes: the same reduction, series and edges. */
static inline float32x4_t cpu_exp_neon(float32x4_t x)
{
    float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(126)), 23);
    float32x4_t y = vmulq_n_f32(vmulq_f32(p, vreinterpretq_f32_s32(e)), 2.0f);
    y = vbslq_f32(vcltq_f32(x, vdupq_n_f32(-87.33654f)), vdupq_n_f32(0.0f), y);
    y = vbslq_f32(vcgtq_f32(x, vdupq_n_f32(88.72283f)), vdupq_n_f32(INFINITY), y);
    return y;
}
#endif

#pragma GCC visibility pop

#endif /* CPU_OPS_H */
