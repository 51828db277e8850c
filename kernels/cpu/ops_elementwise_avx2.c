/*
** ops_elementwise_avx2.c: the streaming loops of CpuVecOps with AVX2, FMA
** and F16C (built with those flags; only called when CPUID has them).
**
** Same results as the portable loops where the op is exact (add, mul,
** scale, the norm's residual add, rope's rotation, f16 stores: one IEEE
** operation per element, no fused multiply-add where ref rounds twice).
** Elsewhere (the gated activations, sums of squares) the vector code is
** used for every element, a ragged end through masked loads and stores, so
** an element's value does not depend on where a task's range began.
*/
#if defined(__x86_64__)

#include "cpu_ops.h"

#include <immintrin.h>

#include "../../base/rad_half.h"

static void add_avx2(const float *a, const float *b, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++) out[i] = a[i] + b[i];
}

static void mul_avx2(const float *a, const float *b, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++) out[i] = a[i] * b[i];
}

static void scale_avx2(float *x, float s, int64_t n)
{
    __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; i++) x[i] = x[i] * s;
}

/* x * sigmoid(z) * u for 8 lanes: x / (1 + e^-z) * u. */
static inline __m256 gated(__m256 x, __m256 z, __m256 u)
{
    __m256 e = cpu_exp256(_mm256_sub_ps(_mm256_setzero_ps(), z));
    return _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

#define GELU_K1 1.5957691216057308f     /* 2 sqrt(2 / pi) */
#define GELU_K3 0.07135481627159119f    /* 2 sqrt(2 / pi) * 0.044715 */

static inline __m256 gelu_z(__m256 x)
{
    __m256 x2 = _mm256_mul_ps(x, x);
    return _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_set1_ps(GELU_K3), x2, _mm256_set1_ps(GELU_K1)));
}

static void silu_mul_avx2(const float *g, const float *u, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        _mm256_storeu_ps(out + i, gated(x, x, _mm256_loadu_ps(u + i)));
    }
    if (i < n) {
        __m256i m = cpu_tail_mask(n - i);
        __m256 x = _mm256_maskload_ps(g + i, m);
        _mm256_maskstore_ps(out + i, m, gated(x, x, _mm256_maskload_ps(u + i, m)));
    }
}

static void gelu_mul_avx2(const float *g, const float *u, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        _mm256_storeu_ps(out + i, gated(x, gelu_z(x), _mm256_loadu_ps(u + i)));
    }
    if (i < n) {
        __m256i m = cpu_tail_mask(n - i);
        __m256 x = _mm256_maskload_ps(g + i, m);
        _mm256_maskstore_ps(out + i, m, gated(x, gelu_z(x), _mm256_maskload_ps(u + i, m)));
    }
}

/* Squares of 8 floats added into two double accumulators. */
static inline void square_into(__m256 x, __m256d *lo, __m256d *hi)
{
    __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
    __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    *lo = _mm256_fmadd_pd(a, a, *lo);
    *hi = _mm256_fmadd_pd(b, b, *hi);
}

static double finish_squares(__m256d a, __m256d b)
{
    __m256d s = _mm256_add_pd(a, b);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

static double sum_squares_avx2(const float *x, int64_t n)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) square_into(_mm256_loadu_ps(x + i), &lo, &hi);
    if (i < n) square_into(_mm256_maskload_ps(x + i, cpu_tail_mask(n - i)), &lo, &hi);
    return finish_squares(lo, hi);
}

static double add_sum_squares_avx2(float *x, const float *d, int64_t n)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(d + i));
        _mm256_storeu_ps(x + i, v);
        square_into(v, &lo, &hi);
    }
    if (i < n) {
        __m256i m = cpu_tail_mask(n - i);
        __m256 v = _mm256_add_ps(_mm256_maskload_ps(x + i, m), _mm256_maskload_ps(d + i, m));
        _mm256_maskstore_ps(x + i, m, v);
        square_into(v, &lo, &hi);
    }
    return finish_squares(lo, hi);
}

static void norm_apply_avx2(const float *x, float r, const float *w, float w_offset, float *out, int64_t n)
{
    __m256 vr = _mm256_set1_ps(r), vo = _mm256_set1_ps(w_offset);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vr);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(v, _mm256_add_ps(_mm256_loadu_ps(w + i), vo)));
    }
    for (; i < n; i++) out[i] = (x[i] * r) * (w[i] + w_offset);
}

/* cpu_sincos1 for four angles at once, the same double operations in the
** same order (no fma), so the same bits. */
static void sincos_avx2(const float *angle, float *c, float *s, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(angle + i));
        __m256d ax = _mm256_andnot_pd(_mm256_set1_pd(-0.0), x);
        if (_mm256_movemask_pd(_mm256_cmp_pd(ax, _mm256_set1_pd(CPU_SINCOS_MAX), _CMP_NLE_UQ))) {
            for (int64_t k = i; k < i + 4; k++) cpu_sincos1(angle[k], &c[k], &s[k]);
            continue;
        }
        __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(CPU_2_OVER_PI)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256d r = _mm256_sub_pd(x, _mm256_mul_pd(k, _mm256_set1_pd(CPU_PIO2_1)));
        r = _mm256_sub_pd(r, _mm256_mul_pd(k, _mm256_set1_pd(CPU_PIO2_2)));
        r = _mm256_sub_pd(r, _mm256_mul_pd(k, _mm256_set1_pd(CPU_PIO2_3)));
        __m256d r2 = _mm256_mul_pd(r, r);
#define C(v) _mm256_set1_pd(v)
#define MUL _mm256_mul_pd
#define ADD _mm256_add_pd
        __m256d ps = ADD(C(-1.0 / 1307674368000.0),
                         MUL(r2, C(1.0 / 355687428096000.0)));
        ps = ADD(C(1.0 / 6227020800.0), MUL(r2, ps));
        ps = ADD(C(-1.0 / 39916800), MUL(r2, ps));
        ps = ADD(C(1.0 / 362880), MUL(r2, ps));
        ps = ADD(C(-1.0 / 5040), MUL(r2, ps));
        ps = ADD(C(1.0 / 120), MUL(r2, ps));
        ps = ADD(C(-1.0 / 6), MUL(r2, ps));
        __m256d sr = ADD(r, MUL(MUL(r, r2), ps));
        __m256d pc = ADD(C(-1.0 / 87178291200.0), MUL(r2, C(1.0 / 20922789888000.0)));
        pc = ADD(C(1.0 / 479001600.0), MUL(r2, pc));
        pc = ADD(C(-1.0 / 3628800), MUL(r2, pc));
        pc = ADD(C(1.0 / 40320), MUL(r2, pc));
        pc = ADD(C(-1.0 / 720), MUL(r2, pc));
        pc = ADD(C(1.0 / 24), MUL(r2, pc));
        pc = ADD(C(-0.5), MUL(r2, pc));
        __m256d cr = ADD(C(1.0), MUL(r2, pc));
#undef C
#undef MUL
#undef ADD
        /* quadrant q = k mod 4: odd swaps sin and cos; q in {2,3} negates
        ** sin, q in {1,2} negates cos */
        __m128i q = _mm256_cvtpd_epi32(k);
        __m256i q64 = _mm256_cvtepi32_epi64(q);
        __m256i one = _mm256_set1_epi64x(1), two = _mm256_set1_epi64x(2);
        __m256d swap = _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(q64, one), one));
        __m256d sneg = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_and_si256(q64, two), 62));
        __m256d cneg = _mm256_castsi256_pd(
            _mm256_slli_epi64(_mm256_and_si256(_mm256_add_epi64(q64, one), two), 62));
        __m256d sx = _mm256_xor_pd(_mm256_blendv_pd(sr, cr, swap), sneg);
        __m256d cx = _mm256_xor_pd(_mm256_blendv_pd(cr, sr, swap), cneg);
        _mm_storeu_ps(s + i, _mm256_cvtpd_ps(sx));
        _mm_storeu_ps(c + i, _mm256_cvtpd_ps(cx));
    }
    for (; i < n; i++) cpu_sincos1(angle[i], &c[i], &s[i]);
}

static void rope_neox_avx2(float *x, const float *c, const float *s, int64_t half)
{
    float *b = x + half;
    int64_t i = 0;
    for (; i + 8 <= half; i += 8) {
        __m256 xa = _mm256_loadu_ps(x + i), xb = _mm256_loadu_ps(b + i);
        __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
        _mm256_storeu_ps(x + i, _mm256_sub_ps(_mm256_mul_ps(xa, vc), _mm256_mul_ps(xb, vs)));
        _mm256_storeu_ps(b + i, _mm256_add_ps(_mm256_mul_ps(xb, vc), _mm256_mul_ps(xa, vs)));
    }
    for (; i < half; i++) {
        float xa = x[i], xb = b[i];
        x[i] = xa * c[i] - xb * s[i];
        b[i] = xb * c[i] + xa * s[i];
    }
}

static void rope_adjacent_avx2(float *x, const float *c, const float *s, int64_t half)
{
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    int64_t i = 0;
    /* 8 floats are 4 pairs (a0 b0 a1 b1 ..): even lanes take a c - b s,
    ** odd lanes b c + a s, which is addsub of (x * c) and (swapped x * s). */
    for (; i + 4 <= half; i += 4) {
        __m256 v = _mm256_loadu_ps(x + 2 * i);
        __m256 vc = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(c + i)), dup);
        __m256 vs = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + i)), dup);
        __m256 sw = _mm256_permute_ps(v, 0xb1);
        _mm256_storeu_ps(x + 2 * i, _mm256_addsub_ps(_mm256_mul_ps(v, vc), _mm256_mul_ps(sw, vs)));
    }
    for (; i < half; i++) {
        float xa = x[2 * i], xb = x[2 * i + 1];
        x[2 * i] = xa * c[i] - xb * s[i];
        x[2 * i + 1] = xb * c[i] + xa * s[i];
    }
}

/* F16C rounds to nearest even, overflows to inf and makes subnormals as
** rad_f32_to_f16 does; only a NaN differs (F16C keeps the payload), so a
** group holding one is redone the reference way. */
static void to_f16_avx2(const float *x, uint16_t *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm_storeu_si128((__m128i *)(void *)(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            for (int64_t k = i; k < i + 8; k++) out[k] = rad_f32_to_f16(x[k]);
    }
    for (; i < n; i++) out[i] = rad_f32_to_f16(x[i]);
}

static void from_f16_avx2(const uint16_t *x, float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i))));
    for (; i < n; i++) out[i] = rad_f16_to_f32(x[i]);
}

const CpuVecOps cpu_vec_avx2 = {
    .isa = "avx2",
    .add = add_avx2,
    .mul = mul_avx2,
    .scale = scale_avx2,
    .silu_mul = silu_mul_avx2,
    .gelu_mul = gelu_mul_avx2,
    .sum_squares = sum_squares_avx2,
    .add_sum_squares = add_sum_squares_avx2,
    .norm_apply = norm_apply_avx2,
    .sincos = sincos_avx2,
    .rope_neox = rope_neox_avx2,
    .rope_adjacent = rope_adjacent_avx2,
    .to_f16 = to_f16_avx2,
    .from_f16 = from_f16_avx2,
};

#endif /* __x86_64__ */
