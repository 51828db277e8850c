/*
** ops_attention_neon.c: attention's tile loops (CpuAttnOps) with AArch64
** NEON, the counterpart of ops_attention_avx2.c with 4-lane vectors:
**
**   scores   three queries by four keys (twelve 4-lane accumulators), each
**            dot reduced by vaddvq in one fixed order, the same in every
**            block shape
**   pv       three queries by 16 dims of accumulator held across the keys
**   exp_sum  cpu_exp_neon (cpu_ops.h); softcap through the same
**
** f16 keys and values are widened in the loop (the base ARMv8 conversion),
** so decode reads the cache in place; a head_dim that is not a multiple of
** 4 ends through zero-padded loads.  The blocking is ops_attention_tiles.h's.
*/
#if defined(__aarch64__)

#include "cpu_ops.h"

#include <arm_neon.h>

#define INLINE static inline __attribute__((always_inline))
#define ATTN_LANES 4

INLINE float32x4_t load_kv(const void *row, int64_t d, int f16)
{
    if (f16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)row + d)));
    return vld1q_f32((const float *)row + d);
}

/* The last n (< 4) elements of a row from dim d, the other lanes zero. */
static __attribute__((noinline)) float32x4_t load_kv_tail(const void *row, int64_t d, int64_t n, int f16)
{
    float t[4] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (f16) t[i] = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(((const uint16_t *)row)[d + i]))), 0);
        else t[i] = ((const float *)row)[d + i];
    }
    return vld1q_f32(t);
}

INLINE void score_step(const float *q, int64_t hd, int NQ, const void *const *kr, int NK, int f16, int64_t d,
                       int64_t n, float32x4_t acc[3][4])
{
    float32x4_t x[3];
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++) x[i] = n == 4 ? vld1q_f32(q + i * hd + d) : load_kv_tail(q + i * hd, d, n, 0);
    #pragma GCC unroll 4
    for (int u = 0; u < NK; u++) {
        float32x4_t y = n == 4 ? load_kv(kr[u], d, f16) : load_kv_tail(kr[u], d, n, f16);
        #pragma GCC unroll 4
        for (int i = 0; i < NQ; i++) acc[i][u] = vfmaq_f32(acc[i][u], x[i], y);
    }
}

INLINE void score_block(const float *q, int64_t hd, int NQ, const void *k, size_t k_stride, int j, int NK,
                        int f16, float *s, int s_stride)
{
    float32x4_t acc[3][4];
    const void *kr[4];
    #pragma GCC unroll 4
    for (int u = 0; u < NK; u++) kr[u] = cpu_row_at(k, k_stride, j + u);
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++)
        #pragma GCC unroll 4
        for (int u = 0; u < NK; u++) acc[i][u] = vdupq_n_f32(0.0f);
    int64_t d = 0;
    for (; d + 4 <= hd; d += 4) score_step(q, hd, NQ, kr, NK, f16, d, 4, acc);
    if (d < hd) score_step(q, hd, NQ, kr, NK, f16, d, hd - d, acc);
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++)
        #pragma GCC unroll 4
        for (int u = 0; u < NK; u++) s[i * s_stride + j + u] = vaddvq_f32(acc[i][u]);
}

/* acc[qi][d0 .. d0 + 4 W) += sum_j p[qi][j] v_j[..]; n < 4: the last n dims. */
INLINE void pv_block(const float *p, int p_stride, int NQ, const void *v, size_t v_stride, int nk, int64_t hd,
                     int f16, float *acc, int64_t d0, int W, int64_t n)
{
    float32x4_t a[3][4];
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++)
        #pragma GCC unroll 4
        for (int u = 0; u < W; u++)
            a[i][u] = n == 4 ? vld1q_f32(acc + i * hd + d0 + 4 * u) : load_kv_tail(acc + i * hd, d0, n, 0);
    for (int j = 0; j < nk; j++) {
        const void *vj = cpu_row_at(v, v_stride, j);
        float w[3];
        #pragma GCC unroll 4
        for (int i = 0; i < NQ; i++) w[i] = p[i * p_stride + j];
        #pragma GCC unroll 4
        for (int u = 0; u < W; u++) {
            float32x4_t y = n == 4 ? load_kv(vj, d0 + 4 * u, f16) : load_kv_tail(vj, d0, n, f16);
            #pragma GCC unroll 4
            for (int i = 0; i < NQ; i++) a[i][u] = vfmaq_n_f32(a[i][u], y, w[i]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++)
        #pragma GCC unroll 4
        for (int u = 0; u < W; u++) {
            float *c = acc + i * hd + d0 + 4 * u;
            if (n == 4) {
                vst1q_f32(c, a[i][u]);
            } else {
                float t[4];
                vst1q_f32(t, a[i][u]);
                for (int64_t e = 0; e < n; e++) c[e] = t[e];
            }
        }
}

#include "ops_attention_tiles.h"

static void softcap_neon(float *x, int n, float cap)
{
    for (int j = 0; j < n; j += 4) {
        int m = n - j < 4 ? n - j : 4;
        float t[4] = {0};
        for (int e = 0; e < m; e++) t[e] = x[j + e];
        float32x4_t y = vmulq_n_f32(vld1q_f32(t), 1.0f / cap);
        /* tanh|y| = 1 - 2 / (e^(2|y|) + 1), the sign put back */
        float32x4_t e2 = cpu_exp_neon(vmulq_n_f32(vabsq_f32(y), 2.0f));
        float32x4_t th = vsubq_f32(vdupq_n_f32(1.0f), vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e2, vdupq_n_f32(1.0f))));
        uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(y), vdupq_n_u32(0x80000000u));
        th = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(th), sign));
        vst1q_f32(t, vmulq_n_f32(th, cap));
        for (int e = 0; e < m; e++) x[j + e] = t[e];
    }
}

static float exp_sum_neon(float *x, int n, float mx)
{
    float32x4_t sum = vdupq_n_f32(0.0f), vm = vdupq_n_f32(mx);
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        float32x4_t e = cpu_exp_neon(vsubq_f32(vld1q_f32(x + j), vm));
        vst1q_f32(x + j, e);
        sum = vaddq_f32(sum, e);
    }
    if (j < n) {
        float t[4] = {0};
        for (int e = 0; e < n - j; e++) t[e] = x[j + e];
        float32x4_t e = cpu_exp_neon(vsubq_f32(vld1q_f32(t), vm));
        vst1q_f32(t, e);
        for (int k = n - j; k < 4; k++) t[k] = 0.0f;
        for (int k = 0; k < n - j; k++) x[j + k] = t[k];
        sum = vaddq_f32(sum, vld1q_f32(t));
    }
    return vaddvq_f32(sum);
}

static void rows_from_f16_neon(const void *src, size_t stride, int n, int64_t hd, float *dst)
{
    for (int j = 0; j < n; j++) {
        const uint16_t *row = (const uint16_t *)cpu_row_at(src, stride, j);
        float *out = dst + j * hd;
        int64_t d = 0;
        for (; d + 4 <= hd; d += 4) vst1q_f32(out + d, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(row + d))));
        for (; d < hd; d++)
            out[d] = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(row[d]))), 0);
    }
}

static void fold_neon(float *acc, const float *part, float a, float b, int64_t n)
{
    int64_t d = 0;
    for (; d + 4 <= n; d += 4)
        vst1q_f32(acc + d, vfmaq_n_f32(vmulq_n_f32(vld1q_f32(acc + d), a), vld1q_f32(part + d), b));
    for (; d < n; d++) acc[d] = fmaf(part[d], b, acc[d] * a);
}

const CpuAttnOps cpu_attn_neon = {
    .isa = "neon",
    .scores = scores_f32,
    .scores_f16 = scores_f16,
    .softcap = softcap_neon,
    .exp_sum = exp_sum_neon,
    .pv = pv_f32,
    .pv_f16 = pv_f16,
    .rows_from_f16 = rows_from_f16_neon,
    .fold = fold_neon,
};

#endif /* __aarch64__ */
