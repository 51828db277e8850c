/*
** ops_attention_avx2.c: attention's tile loops (CpuAttnOps) with AVX2, FMA
** and F16C.
**
**   scores   a [queries x keys] tile of dot products, register-blocked
**            three queries by four keys (twelve accumulators: seven loads
**            feed twelve FMAs), each dot summed in 8 lanes and reduced in
**            one fixed pairwise order, so a dot has the same bits in every
**            block shape
**   pv       the probability-weighted sum of values, three queries by 32
**            dims of accumulator held in registers across the chunk's keys
**   exp_sum  cpu_exp256 (cpu_ops.h) over a score row, masked at the end
**   softcap  cap * tanh(x / cap) through the same exponential
**
** scores and pv come in two flavours, keys and values read as f32 or read
** as f16 and widened in the loop (F16C), so a decode step, which has few
** queries per key, need not first convert a chunk into a buffer.  Both are
** written once (always-inlined block kernels, specialised by the compiler
** for each block shape and key type; `#pragma GCC unroll` keeps the
** accumulator arrays in registers at -O2 as at -O3).  A head_dim that is
** not a multiple of 8 is finished with masked (or zero-padded) loads, so no
** scalar path changes a result.  How a tile is cut into blocks is
** ops_attention_tiles.h's, shared with ops_attention_neon.c.
*/
#if defined(__x86_64__)

#include "cpu_ops.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define ATTN_LANES 8

/* 8 elements of a key or value row from dim d, widened from f16 or not. */
INLINE __m256 load_kv(const void *row, int64_t d, int f16)
{
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)row + d)));
    return _mm256_loadu_ps((const float *)row + d);
}

/* The last n (< 8) elements of a row from dim d, the other lanes zero. */
static __attribute__((noinline)) __m256 load_kv_tail(const void *row, int64_t d, int64_t n, int f16)
{
    float tmp[8] = {0};
    for (int64_t i = 0; i < n; i++)
        tmp[i] = f16 ? _cvtsh_ss(((const uint16_t *)row)[d + i]) : ((const float *)row)[d + i];
    return _mm256_loadu_ps(tmp);
}

/* The 8-lane products of NQ (1..3) queries and NK (1 or 4) keys at dims
** [d, d + 8), added into acc; `n` < 8 when these are the row's last dims. */
INLINE void score_step(const float *q, int64_t hd, int NQ, const void *const *kr, int NK, int f16, int64_t d,
                       int64_t n, __m256 acc[3][4])
{
    __m256 x[3];
    __m256i m = cpu_tail_mask(n);
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++) x[i] = n == 8 ? _mm256_loadu_ps(q + i * hd + d) : _mm256_maskload_ps(q + i * hd + d, m);
    #pragma GCC unroll 4
    for (int u = 0; u < NK; u++) {
        __m256 y = n == 8 ? load_kv(kr[u], d, f16) : load_kv_tail(kr[u], d, n, f16);
        #pragma GCC unroll 4
        for (int i = 0; i < NQ; i++) acc[i][u] = _mm256_fmadd_ps(x[i], y, acc[i][u]);
    }
}

/* s[qi][j + u] = dot(query qi, key j + u): one 8-lane accumulator per dot. */
INLINE void score_block(const float *q, int64_t hd, int NQ, const void *k, size_t k_stride, int j, int NK,
                        int f16, float *s, int s_stride)
{
    __m256 acc[3][4];
    const void *kr[4];
    #pragma GCC unroll 4
    for (int u = 0; u < NK; u++) kr[u] = cpu_row_at(k, k_stride, j + u);
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++)
        #pragma GCC unroll 4
        for (int u = 0; u < NK; u++) acc[i][u] = _mm256_setzero_ps();
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8) score_step(q, hd, NQ, kr, NK, f16, d, 8, acc);
    if (d < hd) score_step(q, hd, NQ, kr, NK, f16, d, hd - d, acc);
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++) {
        if (NK == 4) _mm_storeu_ps(s + i * s_stride + j, cpu_hsum4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
        else s[i * s_stride + j] = cpu_hsum256(acc[i][0]);
    }
}

/* acc[qi][d0 .. d0 + 8 W) += sum_j p[qi][j] v_j[..] for NQ (1..3) queries
** and W (1 or 4) vectors of dims, or, with n < 8, the row's last n dims:
** the same FMA per element in every shape. */
INLINE void pv_block(const float *p, int p_stride, int NQ, const void *v, size_t v_stride, int nk, int64_t hd,
                     int f16, float *acc, int64_t d0, int W, int64_t n)
{
    __m256 a[3][4];
    __m256i m = cpu_tail_mask(n);
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++)
        #pragma GCC unroll 4
        for (int u = 0; u < W; u++) {
            float *c = acc + i * hd + d0 + 8 * u;
            a[i][u] = n == 8 ? _mm256_loadu_ps(c) : _mm256_maskload_ps(c, m);
        }
    for (int j = 0; j < nk; j++) {
        const void *vj = cpu_row_at(v, v_stride, j);
        __m256 w[3];
        #pragma GCC unroll 4
        for (int i = 0; i < NQ; i++) w[i] = _mm256_broadcast_ss(p + i * p_stride + j);
        #pragma GCC unroll 4
        for (int u = 0; u < W; u++) {
            __m256 y = n == 8 ? load_kv(vj, d0 + 8 * u, f16) : load_kv_tail(vj, d0, n, f16);
            #pragma GCC unroll 4
            for (int i = 0; i < NQ; i++) a[i][u] = _mm256_fmadd_ps(w[i], y, a[i][u]);
        }
    }
    #pragma GCC unroll 4
    for (int i = 0; i < NQ; i++)
        #pragma GCC unroll 4
        for (int u = 0; u < W; u++) {
            float *c = acc + i * hd + d0 + 8 * u;
            if (n == 8) _mm256_storeu_ps(c, a[i][u]);
            else _mm256_maskstore_ps(c, m, a[i][u]);
        }
}

#include "ops_attention_tiles.h"

static void softcap_avx2(float *x, int n, float cap)
{
    const __m256 vcap = _mm256_set1_ps(cap), inv = _mm256_set1_ps(1.0f / cap);
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
    for (int j = 0; j < n; j += 8) {
        __m256i m = cpu_tail_mask(n - j < 8 ? n - j : 8);
        __m256 y = _mm256_mul_ps(_mm256_maskload_ps(x + j, m), inv);
        __m256 ay = _mm256_andnot_ps(sign, y);
        /* tanh|y| = 1 - 2 / (e^(2|y|) + 1); e^.. = inf gives exactly 1 */
        __m256 e = cpu_exp256(_mm256_mul_ps(two, ay));
        __m256 t = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(e, one)));
        t = _mm256_or_ps(t, _mm256_and_ps(sign, y));
        _mm256_maskstore_ps(x + j, m, _mm256_mul_ps(vcap, t));
    }
}

static float exp_sum_avx2(float *x, int n, float mx)
{
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 sum = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = cpu_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        _mm256_storeu_ps(x + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (j < n) {
        __m256i m = cpu_tail_mask(n - j);
        __m256 e = cpu_exp256(_mm256_sub_ps(_mm256_maskload_ps(x + j, m), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        _mm256_maskstore_ps(x + j, m, e);
        sum = _mm256_add_ps(sum, e);
    }
    return cpu_hsum256(sum);
}

static void rows_from_f16_avx2(const void *src, size_t stride, int n, int64_t hd, float *dst)
{
    for (int j = 0; j < n; j++) {
        const uint16_t *row = (const uint16_t *)cpu_row_at(src, stride, j);
        float *out = dst + j * hd;
        int64_t d = 0;
        for (; d + 8 <= hd; d += 8)
            _mm256_storeu_ps(out + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + d))));
        for (; d < hd; d++) out[d] = _cvtsh_ss(row[d]);
    }
}

static void fold_avx2(float *acc, const float *part, float a, float b, int64_t n)
{
    const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int64_t d = 0;
    for (; d + 8 <= n; d += 8)
        _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(_mm256_loadu_ps(part + d), vb, _mm256_mul_ps(_mm256_loadu_ps(acc + d), va)));
    for (; d < n; d++) acc[d] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(part[d]), _mm_set_ss(b), _mm_set_ss(acc[d] * a)));
}

const CpuAttnOps cpu_attn_avx2 = {
    .isa = "avx2",
    .scores = scores_f32,
    .scores_f16 = scores_f16,
    .softcap = softcap_avx2,
    .exp_sum = exp_sum_avx2,
    .pv = pv_f32,
    .pv_f16 = pv_f16,
    .rows_from_f16 = rows_from_f16_avx2,
    .fold = fold_avx2,
};

#endif /* __x86_64__ */
