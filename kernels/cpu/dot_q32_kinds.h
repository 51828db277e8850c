/*
** dot_q32_kinds.h: the seven 32-element block encodings as the SIMD dot
** files (dot_q32_avx2.c, dot_q32_avx512.c, dot_q32_neon.c) tell them apart.
**
** Each file's inline bodies take a compile-time `kind` and branch on these
** predicates, which fold away once the body is instantiated for one kind.
** Also here: the unpacking the two x86 files share, and the macros that
** stamp out and register the seven kinds' kernels.  Weight layouts:
** kernels/ops/dequant.c; formulas: dot_q32_portable.c.
*/
#ifndef CPU_DOT_Q32_KINDS_H
#define CPU_DOT_Q32_KINDS_H

#include <stdint.h>
#include <string.h>

#define QK 32
#define TILE_BLOCK QK                /* tile_rc counts blocks (dot_tile.h) */

enum { Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4, Q4_1, Q5_1 };

/* Bytes of one weight block, by kind. */
static const int block_bytes[] = {34, 18, 22, 18, 17, 20, 24};

/* Kinds with signed codes (q8_0, and the tables of iq4_nl and mxfp4). */
ALWAYS_INLINE int signed_kind(const int kind) { return kind == Q8_0 || kind == IQ4_NL || kind == MXFP4; }
/* The offset unsigned codes stand for (q4_0: w - 8, q5_0: w - 16), else 0. */
ALWAYS_INLINE int offset_of(const int kind) { return kind == Q4_0 ? 8 : kind == Q5_0 ? 16 : 0; }
/* Kinds with a min (q4_1, q5_1), whose partner is the Q8_1 block. */
ALWAYS_INLINE int has_min(const int kind) { return kind == Q4_1 || kind == Q5_1; }

/* mxfp4's 2^(e - 128) (dequant.c). */
ALWAYS_INLINE float e8m0_half(unsigned e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

#if defined(__AVX2__)
/* The x86 files' unpacking (both are compiled with AVX2 at least). */
#include <immintrin.h>

/* An f16 at p, broadcast to 8 f32 lanes. */
ALWAYS_INLINE __m256 half_bcast(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

/* 16 code bytes in nibble order to 32 bytes in element order: low nibbles
** are elements 0..15, high nibbles 16..31. */
ALWAYS_INLINE __m256i nibbles(const unsigned char *qs)
{
    /* the 16 bytes in both halves, the upper half shifted right by 4 */
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)qs));
    v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* iq4_nl's 32 signed codes from the 16 code bytes at qs: its grid looked up. */
ALWAYS_INLINE __m256i iq4_nl_codes(const unsigned char *qs)
{
    const __m256i grid = _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
                                          -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    return _mm256_shuffle_epi8(grid, nibbles(qs));
}

/* mxfp4's 32 codes, e2m1 values doubled (integers), from the bytes at qs. */
ALWAYS_INLINE __m256i mxfp4_codes(const unsigned char *qs)
{
    const __m256i e2m1 = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
                                          0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    return _mm256_shuffle_epi8(e2m1, nibbles(qs));
}

/* Four int32x8 vectors to their four sums, lane c from p_c (exact): the
** block sums of four weight rows, lane by lane (the canonical step's isum). */
ALWAYS_INLINE __m128i q32_sums4(__m256i p0, __m256i p1, __m256i p2, __m256i p3)
{
    __m256i c = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    return _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
}

/* The f16 at p + c * ws for c < C (weight rows ws apart), lane c; 0 past C. */
ALWAYS_INLINE __m128 q32_halves4(const int C, const unsigned char *p, size_t ws)
{
    uint16_t h[4] = {0, 0, 0, 0};
    for (int c = 0; c < C; c++) memcpy(&h[c], p + c * ws, 2);
    return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

/* C weight blocks' scales, lane c from row c (mxfp4: 2^(e - 128)). */
ALWAYS_INLINE __m128 q32_scales4(const int kind, const int C, const unsigned char *p, size_t ws)
{
    if (kind != MXFP4) return q32_halves4(C, p, ws);
    float d[4] = {0, 0, 0, 0};
    for (int c = 0; c < C; c++) d[c] = e8m0_half(p[c * ws]);
    return _mm_loadu_ps(d);
}

#endif

/* After dot_tile.h: dot_name and tile_name for every kind, and their
** cpu_enc[] entries. */
#define Q32_DOT_KINDS()                                                                        \
    CPU_DOT_KIND(q8_0, Q8_0)                                                                   \
    CPU_DOT_KIND(q4_0, Q4_0)                                                                   \
    CPU_DOT_KIND(q5_0, Q5_0)                                                                   \
    CPU_DOT_KIND(iq4_nl, IQ4_NL)                                                               \
    CPU_DOT_KIND(mxfp4, MXFP4)                                                                 \
    CPU_DOT_KIND(q4_1, Q4_1)                                                                   \
    CPU_DOT_KIND(q5_1, Q5_1)

#define Q32_SET_KINDS()                                                                        \
    do {                                                                                       \
        tile_set(RAD_ENC_Q8_0, CPU_ACT_Q8_0, dot_q8_0, tile_q8_0);                             \
        tile_set(RAD_ENC_Q4_0, CPU_ACT_Q8_0_SUMS, dot_q4_0, tile_q4_0);                        \
        tile_set(RAD_ENC_Q5_0, CPU_ACT_Q8_0_SUMS, dot_q5_0, tile_q5_0);                        \
        tile_set(RAD_ENC_IQ4_NL, CPU_ACT_Q8_0, dot_iq4_nl, tile_iq4_nl);                       \
        tile_set(RAD_ENC_MXFP4, CPU_ACT_Q8_0, dot_mxfp4, tile_mxfp4);                          \
        tile_set(RAD_ENC_Q4_1, CPU_ACT_Q8_1, dot_q4_1, tile_q4_1);                             \
        tile_set(RAD_ENC_Q5_1, CPU_ACT_Q8_1, dot_q5_1, tile_q5_1);                             \
    } while (0)

#endif /* CPU_DOT_Q32_KINDS_H */
