/*
** act_q8k_avx2.c: act_q8k.c's Q8_K quantizer with AVX2, byte for byte the
** same.
**
** Each step is the portable one's IEEE operation on eight lanes: the same
** multiply, the same add of 1.5 * 2^23 and the same reading of the mantissa
** bits (not cvtps, whose answer for NaN and infinities differs), the same
** clamp, and the low byte of each int32 kept as the portable cast keeps it.
** The block maximum skips NaNs as the portable "ax > amax" scan does, and its
** sign comes from the first element that reaches it.
*/
#if defined(__x86_64__)

#include <immintrin.h>

#include "cpu_internal.h"
#include "kquants.h"

/* The low byte of each int32 of a, b, c, d, in order: 32 bytes. */
static __m256i low_bytes(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i m = _mm256_set1_epi32(0xff);
    __m256i ab = _mm256_packus_epi32(_mm256_and_si256(a, m), _mm256_and_si256(b, m));
    __m256i cd = _mm256_packus_epi32(_mm256_and_si256(c, m), _mm256_and_si256(d, m));
    __m256i r = _mm256_packus_epi16(ab, cd);
    /* the packs interleave the 128-bit halves: dwords 0 4 1 5 2 6 3 7 */
    return _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static __m256i quantize8(__m256 x, __m256 iscale)
{
    __m256 t = _mm256_add_ps(_mm256_mul_ps(iscale, x), _mm256_set1_ps(12582912.0f));
    __m256i i = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(t), _mm256_set1_epi32(0x007fffff)),
                                 _mm256_set1_epi32(0x00400000));
    return _mm256_min_epi32(i, _mm256_set1_epi32(127));
}

void cpu_quantize_row_q8k_avx2(const float *x, void *dst, int64_t K)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    uint8_t *out = dst;
    for (int64_t b = 0; b < K / KQ_N; b++, x += KQ_N, out += Q8K_BYTES) {
        /* max_ps returns its second operand when either is NaN: a NaN
        ** element leaves the running maximum as it was */
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < KQ_N; j += 8)
            m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);

        int8_t q[KQ_N];
        float d = 0.0f;
        if (amax == 0.0f) {
            memset(q, 0, sizeof q);
        } else {
            __m256 va = _mm256_set1_ps(amax);
            float max = 0.0f;
            for (int j = 0; j < KQ_N; j += 8) {
                int hit = _mm256_movemask_ps(
                    _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), va, _CMP_EQ_OQ));
                if (hit) {
                    max = x[j + __builtin_ctz((unsigned)hit)];
                    break;
                }
            }
            float iscale = -127.0f / max;
            __m256 vs = _mm256_set1_ps(iscale);
            for (int j = 0; j < KQ_N; j += 32) {
                __m256i r = low_bytes(
                    quantize8(_mm256_loadu_ps(x + j), vs), quantize8(_mm256_loadu_ps(x + j + 8), vs),
                    quantize8(_mm256_loadu_ps(x + j + 16), vs), quantize8(_mm256_loadu_ps(x + j + 24), vs));
                _mm256_storeu_si256((__m256i *)(q + j), r);
            }
            d = 1.0f / iscale;
        }
        /* bsums: sad of (q ^ 0x80) against zero sums eight (q + 128) per
        ** 64-bit lane; a group of 16 is two lanes, less 2 * 8 * 128 */
        int16_t bsums[16];
        for (int j = 0; j < KQ_N; j += 32) {
            __m256i v =
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + j)), _mm256_set1_epi8((char)0x80));
            __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256());
            int64_t l[4];
            _mm256_storeu_si256((__m256i *)l, s);
            bsums[j / 16] = (int16_t)(l[0] + l[1] - 2048);
            bsums[j / 16 + 1] = (int16_t)(l[2] + l[3] - 2048);
        }
        memcpy(out + Q8K_D, &d, 4);
        memcpy(out + Q8K_QS, q, KQ_N);
        memcpy(out + Q8K_BSUMS, bsums, sizeof bsums);
    }
}

#endif /* __x86_64__ */
