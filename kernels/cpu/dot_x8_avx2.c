/*
** dot_x8_avx2.c: q4_0, q4_1 and q8_0 products over the x8 layout (x8.c)
** with AVX2, FMA and F16C (q8_0: block_q8 below).
**
** A tile is R activation rows (1 to 4) by one group of eight weight rows.
** Per block, chunk j of the group gives lane r the four code bytes 4j..4j+3
** of weight row r; their low nibbles meet activation codes 4j..4j+3 and the
** high nibbles codes 4j+16..4j+19, each broadcast to all lanes:
**
**   s16 += vpmaddubsw(low, bcast(a[4j..]))  + vpmaddubsw(high, bcast(a[4j+16..]))
**
** Eight chunks' worth of pairs sum to at most 16 * 15 * 128 < 2^15, so the
** int16 lanes never overflow (the activation codes are within +-127, and
** the codes are unsigned nibbles).  Then, per block, lane r holds the exact
** sum over the block for weight row r:
**
**   isum = vpmaddwd(s16, 1)                     (q4_0: - 8 * sum(a), exact)
**   acc  = fma(d_w * d_a, float(isum), acc)     (q4_1: + fma(m_w, s_a, ...))
**
** and the eight outputs are acc's lanes.  The same body serves every R, and
** lane r's operations do not depend on R or on the other lanes, so a decode
** row and the same row inside a prefill tile are the same bits.
*/
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_ACT 4

enum { X8_Q4_0, X8_Q4_1, X8_Q8_0 };

ALWAYS_INLINE __m256i bcast32(const unsigned char *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

ALWAYS_INLINE float half_at(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* The 4-bit kinds: eight chunk pairs' products summed in int16 (above). */
ALWAYS_INLINE void block_q4(const int R, const unsigned char *codes, const unsigned char *const y[TILE_ACT],
                            __m256i isum[TILE_ACT])
{
    const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256i s[TILE_ACT];
    for (int r = 0; r < R; r++) s[r] = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(codes + 32 * j));
        __m256i lo = _mm256_and_si256(v, low4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        for (int r = 0; r < R; r++) {
            __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast32(y[r] + 4 * j)),
                                         _mm256_maddubs_epi16(hi, bcast32(y[r] + 16 + 4 * j)));
            s[r] = _mm256_add_epi16(s[r], p);
        }
    }
    for (int r = 0; r < R; r++) isum[r] = _mm256_madd_epi16(s[r], ones);
}

/* q8_0: signed codes, so |w| against the activation with w's sign; a pair
** of products can reach 2 * 128 * 127, so each chunk widens to int32. */
ALWAYS_INLINE void block_q8(const int R, const unsigned char *codes, const unsigned char *const y[TILE_ACT],
                            __m256i isum[TILE_ACT])
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < R; r++) isum[r] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(codes + 32 * j));
        __m256i u = _mm256_sign_epi8(v, v);
        for (int r = 0; r < R; r++) {
            __m256i p = _mm256_maddubs_epi16(u, _mm256_sign_epi8(bcast32(y[r] + 4 * j), v));
            isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, ones));
        }
    }
}

ALWAYS_INLINE void tile_rc(const int kind, const int R, int64_t K, const unsigned char *w, const unsigned char *a,
                           size_t as, float *out, size_t os)
{
    const int64_t nb = K / 32;
    const int head = kind == X8_Q4_1 ? 32 : 16, group_block = head + (kind == X8_Q8_0 ? 256 : 128);
    const int ab = kind == X8_Q4_1 ? CPU_Q8_1_BYTES : CPU_Q8_0_BYTES, codes_at = kind == X8_Q4_1 ? 4 : 2;
    const size_t sums_at = cpu_act_sums_offset(K);
    __m256 acc[TILE_ACT];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const unsigned char *g = w + b * group_block;
        const unsigned char *y[TILE_ACT];
        __m256i isum[TILE_ACT];
        for (int r = 0; r < R; r++) y[r] = a + r * as + b * ab + codes_at;
        if (kind == X8_Q8_0) block_q8(R, g + head, y, isum);
        else block_q4(R, g + head, y, isum);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)g));
        for (int r = 0; r < R; r++) {
            const unsigned char *ar = a + r * as;
            if (kind == X8_Q4_0) {
                int32_t sum;
                memcpy(&sum, ar + sums_at + 4 * b, 4);
                isum[r] = _mm256_sub_epi32(isum[r], _mm256_set1_epi32(8 * sum));
            }
            __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(half_at(ar + b * ab)));
            acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[r]), acc[r]);
            if (kind == X8_Q4_1) {
                __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + 16)));
                acc[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(half_at(ar + b * ab + 2)), acc[r]);
            }
        }
    }
    for (int r = 0; r < R; r++) _mm256_storeu_ps(out + r * os, acc[r]);
}

ALWAYS_INLINE void tile_any(const int kind, int64_t K, const void *w, const void *act, size_t as, int n_act,
                            float *out, size_t os)
{
    switch (n_act) {
    case 1: tile_rc(kind, 1, K, w, act, as, out, os); break;
    case 2: tile_rc(kind, 2, K, w, act, as, out, os); break;
    case 3: tile_rc(kind, 3, K, w, act, as, out, os); break;
    case 4: tile_rc(kind, 4, K, w, act, as, out, os); break;
    default: break;         /* the driver never asks for more than TILE_ACT */
    }
}

static void tile_q4_0_x8(int64_t K, const void *w, size_t ws, int n_w, const void *act, size_t as, int n_act,
                         float *out, size_t os)
{
    (void)ws, (void)n_w;
    tile_any(X8_Q4_0, K, w, act, as, n_act, out, os);
}

static void tile_q4_1_x8(int64_t K, const void *w, size_t ws, int n_w, const void *act, size_t as, int n_act,
                         float *out, size_t os)
{
    (void)ws, (void)n_w;
    tile_any(X8_Q4_1, K, w, act, as, n_act, out, os);
}

static void tile_q8_0_x8(int64_t K, const void *w, size_t ws, int n_w, const void *act, size_t as, int n_act,
                         float *out, size_t os)
{
    (void)ws, (void)n_w;
    tile_any(X8_Q8_0, K, w, act, as, n_act, out, os);
}

void cpu_fill_x8_avx2(void)
{
    cpu_act_quant[CPU_ACT_Q8_0_SUMS] = cpu_act_q8_0_sums;
    cpu_enc_x8[RAD_ENC_Q4_0] = (CpuEncKernels){.act_fmt = CPU_ACT_Q8_0_SUMS, .tile = tile_q4_0_x8,
                                               .tile_act = TILE_ACT, .tile_w = CPU_X8_ROWS, .isa = "avx2"};
    cpu_enc_x8[RAD_ENC_Q4_1] = (CpuEncKernels){.act_fmt = CPU_ACT_Q8_1, .tile = tile_q4_1_x8,
                                               .tile_act = TILE_ACT, .tile_w = CPU_X8_ROWS, .isa = "avx2"};
    cpu_enc_x8[RAD_ENC_Q8_0] = (CpuEncKernels){.act_fmt = CPU_ACT_Q8_0, .tile = tile_q8_0_x8,
                                               .tile_act = TILE_ACT, .tile_w = CPU_X8_ROWS, .isa = "avx2"};
}
#endif
