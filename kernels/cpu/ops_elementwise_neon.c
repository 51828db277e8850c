/*
** ops_elementwise_neon.c: the streaming loops of CpuVecOps with AArch64
** NEON (built with the Makefile's -march for _neon.c files; only called
** when cpu_isa is CPU_ISA_NEON).
**
** The same contract as ops_elementwise_avx2.c: the exact ops (add, mul,
** scale, the residual add, rope's rotation, f16 stores) give ref's bits, as
** one IEEE operation per element with no fused multiply-add; the gated
** activations use the vectorised exponential below (within 2 ulp) for every
** element, the ragged end through a zero-padded copy, so a value never
** depends on where a task's range began.  Rope's rotation and sin/cos are
** the portable loops, which the compiler vectorises for NEON on its own
** (and rounds exactly as written: C11 mode does not contract).
*/
#if defined(__aarch64__)

#include "cpu_ops.h"

#include <arm_neon.h>

#include "../../base/rad_half.h"

static void add_neon(const float *a, const float *b, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
    for (; i < n; i++) out[i] = a[i] + b[i];
}

static void mul_neon(const float *a, const float *b, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
    for (; i < n; i++) out[i] = a[i] * b[i];
}

static void scale_neon(float *x, float s, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), s));
    for (; i < n; i++) x[i] = x[i] * s;
}

/* x * sigmoid(z) * u for 4 lanes: x / (1 + e^-z) * u. */
static inline float32x4_t gated(float32x4_t x, float32x4_t z, float32x4_t u)
{
    float32x4_t e = cpu_exp_neon(vnegq_f32(z));
    return vmulq_f32(vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), e)), u);
}

#define GELU_K1 1.5957691216057308f     /* 2 sqrt(2 / pi) */
#define GELU_K3 0.07135481627159119f    /* 2 sqrt(2 / pi) * 0.044715 */

static inline float32x4_t gelu_z(float32x4_t x)
{
    return vmulq_f32(x, vfmaq_f32(vdupq_n_f32(GELU_K1), vdupq_n_f32(GELU_K3), vmulq_f32(x, x)));
}

/* The last n (< 4) elements through zero-padded registers. */
static inline float32x4_t load_part(const float *p, int64_t n)
{
    float t[4] = {0};
    for (int64_t i = 0; i < n; i++) t[i] = p[i];
    return vld1q_f32(t);
}

static inline void store_part(float *p, float32x4_t v, int64_t n)
{
    float t[4];
    vst1q_f32(t, v);
    for (int64_t i = 0; i < n; i++) p[i] = t[i];
}

static void silu_mul_neon(const float *g, const float *u, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t x = vld1q_f32(g + i);
        vst1q_f32(out + i, gated(x, x, vld1q_f32(u + i)));
    }
    if (i < n) {
        float32x4_t x = load_part(g + i, n - i);
        store_part(out + i, gated(x, x, load_part(u + i, n - i)), n - i);
    }
}

static void gelu_mul_neon(const float *g, const float *u, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t x = vld1q_f32(g + i);
        vst1q_f32(out + i, gated(x, gelu_z(x), vld1q_f32(u + i)));
    }
    if (i < n) {
        float32x4_t x = load_part(g + i, n - i);
        store_part(out + i, gated(x, gelu_z(x), load_part(u + i, n - i)), n - i);
    }
}

/* Squares of 4 floats into two double accumulators. */
static inline void square_into(float32x4_t x, float64x2_t *lo, float64x2_t *hi)
{
    float64x2_t a = vcvt_f64_f32(vget_low_f32(x)), b = vcvt_high_f64_f32(x);
    *lo = vfmaq_f64(*lo, a, a);
    *hi = vfmaq_f64(*hi, b, b);
}

static double sum_squares_neon(const float *x, int64_t n)
{
    float64x2_t lo = vdupq_n_f64(0), hi = vdupq_n_f64(0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) square_into(vld1q_f32(x + i), &lo, &hi);
    if (i < n) square_into(load_part(x + i, n - i), &lo, &hi);
    return vaddvq_f64(vaddq_f64(lo, hi));
}

static double add_sum_squares_neon(float *x, const float *d, int64_t n)
{
    float64x2_t lo = vdupq_n_f64(0), hi = vdupq_n_f64(0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vaddq_f32(vld1q_f32(x + i), vld1q_f32(d + i));
        vst1q_f32(x + i, v);
        square_into(v, &lo, &hi);
    }
    if (i < n) {
        float32x4_t v = vaddq_f32(load_part(x + i, n - i), load_part(d + i, n - i));
        store_part(x + i, v, n - i);
        square_into(v, &lo, &hi);
    }
    return vaddvq_f64(vaddq_f64(lo, hi));
}

static void norm_apply_neon(const float *x, float r, const float *w, float w_offset, float *out, int64_t n)
{
    float32x4_t vo = vdupq_n_f32(w_offset);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), r), vaddq_f32(vld1q_f32(w + i), vo)));
    for (; i < n; i++) out[i] = (x[i] * r) * (w[i] + w_offset);
}

/* The conversion rounds to nearest even (FPCR's default mode) and makes
** infinities and subnormals as rad_f32_to_f16 does; a NaN keeps its payload,
** so a group holding one is redone the reference way. */
static void to_f16_neon(const float *x, uint16_t *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(v)));
        if (vminvq_u32(vceqq_f32(v, v)) == 0)
            for (int64_t k = i; k < i + 4; k++) out[k] = rad_f32_to_f16(x[k]);
    }
    for (; i < n; i++) out[i] = rad_f32_to_f16(x[i]);
}

static void from_f16_neon(const uint16_t *x, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    for (; i < n; i++) out[i] = rad_f16_to_f32(x[i]);
}

const CpuVecOps cpu_vec_neon = {
    .isa = "neon",
    .add = add_neon,
    .mul = mul_neon,
    .scale = scale_neon,
    .silu_mul = silu_mul_neon,
    .gelu_mul = gelu_mul_neon,
    .sum_squares = sum_squares_neon,
    .add_sum_squares = add_sum_squares_neon,
    .norm_apply = norm_apply_neon,
    .sincos = cpu_sincos_portable,
    .rope_neox = cpu_rope_neox_portable,
    .rope_adjacent = cpu_rope_adjacent_portable,
    .to_f16 = to_f16_neon,
    .from_f16 = from_f16_neon,
};

#endif /* __aarch64__ */
