/*
** act_q8_avx2.c: the activation converters of act_q8.c with AVX2 and F16C.
**
** Same bytes as the portable versions (act_q8.c states the arithmetic and
** why it is llama.cpp's): the block maximum is exact whatever the order, the
** products x * id are single f32 multiplies, vroundps with an explicit
** round-to-nearest-even mode matches the portable rounding, and the int32
** -> int8 packs saturate as the portable clamp does.  The f16 scales are
** rounded by the same scalar code as the portable path, so only the codes
** are vectorised.
*/
#if defined(__x86_64__)
#include <immintrin.h>

#include "../../base/rad_half.h"
#include "cpu_internal.h"

#define QK 32

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v & 0xff);
    p[1] = (unsigned char)(v >> 8);
}

/* One block: the codes to qs, d (and s) to their places. */
static inline void q8_block(const float *x, unsigned char *d_at, unsigned char *s_at, unsigned char *qs)
{
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
    m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);

    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 mul = _mm256_set1_ps(id);
    const int rne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, mul), rne));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, mul), rne));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, mul), rne));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, mul), rne));

    put_u16(d_at, rad_f32_to_f16(d));
    if (s_at) {
        /* The sum of the saturated codes, as the portable path sums them;
        ** for finite input no code saturates, so this is the sum of i0..i3. */
        __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        put_u16(s_at, rad_f32_to_f16(d * (float)_mm_cvtsi128_si32(s4)));
    }
    /* packs work within 128-bit lanes; the permute puts the dwords back in order. */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)qs, p);
}

void cpu_act_q8_0_avx2(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    for (int64_t b = 0; b < K / QK; b++, x += QK, y += CPU_Q8_0_BYTES) q8_block(x, y, NULL, y + 2);
}

void cpu_act_q8_1_avx2(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    for (int64_t b = 0; b < K / QK; b++, x += QK, y += CPU_Q8_1_BYTES) q8_block(x, y, y + 2, y + 4);
}

void cpu_act_f16_avx2(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + 2 * k),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT));
    for (; k < K; k++) put_u16(y + 2 * k, rad_f32_to_f16(x[k]));
}
#endif
