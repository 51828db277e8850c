/*
** kquants_x86.h: the small AVX2 pieces the x86 k-quant files share
** (dot_kquants_avx2.c, dot_kquants_avx512.c): loads, horizontal sums, the
** unpacking of q4_k / q5_k scales, the f32 block factors and the dot / tile
** entry points around a row kernel.  Included only
** by files compiled with AVX2 enabled.
*/
#ifndef CPU_KQUANTS_X86_H
#define CPU_KQUANTS_X86_H

#if defined(__AVX2__)

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE __m256i load256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}
INLINE __m128i load128(const void *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

/* The sum of 8 lanes in a fixed order (the same for a tile and a dot). */
INLINE float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The sum of 8 int32 lanes (exact, so any order). */
INLINE int32_t hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* An f16 at p as f32 (exact). */
INLINE float half(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* pshufb index bytes: B2(i) copies int16 i of a 128-bit lane; Z2(i) makes
** an int16 of byte i (the index with the top bit set writes a zero byte). */
#define B2(i) (char)(2 * (i)), (char)(2 * (i) + 1)
#define Z2(i) (char)(i), (char)0x80

/* q4_k / q5_k: the 8 scales and 8 offsets of a block, unpacked from the 12
** bytes at s (kquants.h's layout) into bytes [sc0..sc7, m0..m7].  Reads 16
** bytes; the 4 past the scales are the block's own codes. */
INLINE __m128i k4_scales(const uint8_t *s)
{
    const __m128i m6 = _mm_set1_epi8(0x3f), m4 = _mm_set1_epi8(0x0f);
    __m128i x = load128(s);
    __m128i low = _mm_and_si128(x, m6);                        /* bytes 0..3: sc0..3, 4..7: m0..3 */
    __m128i b = _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 2, 2, 2)); /* bytes 8..11 in every dword */
    __m128i nib = _mm_blend_epi32(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4), 0x2);
    __m128i top = _mm_and_si128(_mm_srli_epi16(x, 2), _mm_set1_epi8(0x30)); /* (byte >> 6) << 4 */
    __m128i high = _mm_or_si128(nib, top); /* dword 0: sc4..7, dword 1: m4..7 */
    return _mm_unpacklo_epi32(low, high);
}

/* From k4_scales' bytes broadcast to both halves: the offsets as int16, each
** twice, m0 m0 m1 m1 m2 m2 m3 m3 | m4 m4 .. m7 m7, to madd with the 16 bsums
** (sub-blocks are 32 elements, bsums 16). */
#define K4_MINS_SPREAD                                                                                       \
    _mm256_setr_epi8(Z2(8), Z2(8), Z2(9), Z2(9), Z2(10), Z2(10), Z2(11), Z2(11), Z2(12), Z2(12), Z2(13),     \
                     Z2(13), Z2(14), Z2(14), Z2(15), Z2(15))

/* The dot and tile entry points of a row kernel rows(..., NA, ..., extra):
** the dot is one activation row; a tile is each weight row against groups of
** up to TILE_ACT (the including file's) activation rows, NA a constant in
** each call. */
#define KQ_ENTRY_POINTS(name, rows, extra)                                                                   \
    static void dot_##name(int64_t K, const void *w_row, const void *act_row, float *out)                    \
    {                                                                                                        \
        rows(K, w_row, act_row, 0, 1, out, 0, extra);                                                        \
    }                                                                                                        \
    static void tile_##name(int64_t K, const void *w, size_t w_stride, int n_w, const void *act,             \
                            size_t act_stride, int n_act, float *out, size_t out_stride)                     \
    {                                                                                                        \
        for (int c = 0; c < n_w; c++) {                                                                      \
            const uint8_t *wc = (const uint8_t *)w + c * w_stride;                                           \
            for (int r0 = 0; r0 < n_act; r0 += TILE_ACT) {                                                   \
                const uint8_t *a = (const uint8_t *)act + r0 * act_stride;                                   \
                float *o = out + r0 * out_stride + c;                                                        \
                switch (n_act - r0 < TILE_ACT ? n_act - r0 : TILE_ACT) {                                     \
                case 1:                                                                                      \
                    rows(K, wc, a, act_stride, 1, o, out_stride, extra);                                     \
                    break;                                                                                   \
                case 2:                                                                                      \
                    rows(K, wc, a, act_stride, 2, o, out_stride, extra);                                     \
                    break;                                                                                   \
                case 3:                                                                                      \
                    rows(K, wc, a, act_stride, 3, o, out_stride, extra);                                     \
                    break;                                                                                   \
                default:                                                                                     \
                    rows(K, wc, a, act_stride, 4, o, out_stride, extra);                                     \
                    break;                                                                                   \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }

#endif /* __AVX2__ */
#endif /* CPU_KQUANTS_X86_H */
