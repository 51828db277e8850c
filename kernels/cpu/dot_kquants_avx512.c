/*
** dot_kquants_avx512.c: q4_k and q6_k times Q8_K with AVX-512 and VNNI,
** dots and tiles (1..4 activation rows per weight row).
**
** One 512-bit register holds 64 codes, laid out to meet the activation as
** it is stored: q4_k's 32 low nibbles (sub-block 2j) next to the same 32
** bytes' high nibbles (sub-block 2j + 1) are elements 64j .. 64j + 63; q6_k's
** quarters 0 and 1 (2 and 3) of a half are 64 consecutive elements too.  So
** each activation load is one plain 64-byte load.  maddubs makes int16 pair
** sums (at most 2 * 63 * 127, no saturation) and vpdpwssd multiplies them by
** the int16 scales and adds into int32 lanes in one instruction.  A block's
** lanes are exact integers, summed per block and taking the canonical step
** of kquants.h, so results equal the portable and AVX2 files' bit for bit.
**
** Used only when the CPU has AVX512-VNNI (cpu_fill_kquants_avx512 checks);
** the other k-quants keep their AVX2 kernels.  Tiles and dots are one inline
** kernel, so they agree bit for bit.
*/
#if defined(__x86_64__)

#include <immintrin.h>

#include "cpu_internal.h"
#include "kquants.h"
#include "kquants_x86.h"

#define TILE_ACT 4 /* activation rows per weight row in a tile */
#define TILE_W   8

INLINE __m512i load512(const void *p)
{
    return _mm512_loadu_si512(p);
}

/* A 256-bit register in both halves of a 512-bit one. */
INLINE __m512i twice(__m256i x)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(x), x, 1);
}

/* The low half from lo, the high half from hi. */
INLINE __m512i halves(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* A 256-bit register widened with zeros. */
INLINE __m512i widen(__m256i x)
{
    return _mm512_inserti64x4(_mm512_setzero_si512(), x, 0);
}

/* ------------------------------------------------------------------ q4_k */

INLINE void q4k_rows(int64_t K, const uint8_t *w, const uint8_t *act, size_t act_stride, const int NA,
                     float *out, size_t out_stride)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    float acc[TILE_ACT];
    for (int r = 0; r < NA; r++) acc[r] = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q4K_BYTES) {
        const uint8_t *ab = act + b * Q8K_BYTES;
        __m128i sm = k4_scales(w + Q4K_SCALES);   /* bytes sc0..sc7, m0..m7 */
        __m512i sm4 = _mm512_broadcast_i32x4(sm); /* in each 128-bit lane */
        __m256i mins = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(sm), K4_MINS_SPREAD);
        __m512i sumi[TILE_ACT];
        for (int r = 0; r < NA; r++) sumi[r] = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            /* 32 code bytes twice; the upper copy shifted: low nibbles
            ** (elements 64j ..) then high nibbles (64j + 32 ..) */
            __m512i bits = twice(load256(w + Q4K_QS + 32 * j));
            __m512i codes = _mm512_and_si512(_mm512_mask_srli_epi16(bits, 0xffff0000u, bits, 4), m4);
            /* int16 scales: sc(2j) for the low 256 bits, sc(2j + 1) for the high */
            __m512i sc = _mm512_shuffle_epi8(sm4, halves(_mm256_set1_epi16((short)(0x8000 | (2 * j))),
                                                         _mm256_set1_epi16((short)(0x8000 | (2 * j + 1)))));
            for (int r = 0; r < NA; r++) {
                __m512i p = _mm512_maddubs_epi16(codes, load512(ab + r * act_stride + Q8K_QS + 64 * j));
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], p, sc);
            }
        }
        for (int r = 0; r < NA; r++) {
            const uint8_t *a = ab + r * act_stride;
            __m256i msum = _mm256_madd_epi16(load256(a + Q8K_BSUMS), mins);
            float da = kq_f32(a);
            acc[r] = kq_step_min(acc[r], da * half(w + Q4K_D), _mm512_reduce_add_epi32(sumi[r]),
                                 da * half(w + Q4K_DMIN), hsum_i32(msum));
        }
    }
    for (int r = 0; r < NA; r++) out[r * out_stride] = acc[r];
}

/* ------------------------------------------------------------------ q6_k */

/* int16 lanes: 8 copies each of scales g, g + 1, g + 2, g + 3. */
INLINE __m512i q6k_scale_index(int g)
{
    return halves(
        _mm256_setr_epi16(g, g, g, g, g, g, g, g, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1),
        _mm256_setr_epi16(g + 2, g + 2, g + 2, g + 2, g + 2, g + 2, g + 2, g + 2, g + 3, g + 3, g + 3, g + 3,
                          g + 3, g + 3, g + 3, g + 3));
}

INLINE void q6k_rows(int64_t K, const uint8_t *w, const uint8_t *act, size_t act_stride, const int NA,
                     float *out, size_t out_stride)
{
    const __m512i m15 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3);
    float acc[TILE_ACT];
    for (int r = 0; r < NA; r++) acc[r] = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q6K_BYTES) {
        const uint8_t *ab = act + b * Q8K_BYTES;
        __m256i sc16 = _mm256_cvtepi8_epi16(load128(w + Q6K_SCALES)); /* the 16 group scales */
        __m512i sc = widen(sc16);
        __m512i sumi[TILE_ACT];
        /* codes are fed unsigned (0..63): take back 32 * sum_g scale_g * bsums_g */
        for (int r = 0; r < NA; r++)
            sumi[r] =
                _mm512_sub_epi32(_mm512_setzero_si512(),
                                 widen(_mm256_slli_epi32(
                                     _mm256_madd_epi16(load256(ab + r * act_stride + Q8K_BSUMS), sc16), 5)));
        for (int h = 0; h < 2; h++) {
            /* ql[64h ..]: low nibbles of quarters 0 | 1, high nibbles of 2 | 3;
            ** qh[32h ..] twice, the upper copy shifted by 2: bits of quarter
            ** 0 | 1 at 0..1, of quarter 2 | 3 at 4..5 */
            __m512i l = load512(w + Q6K_QL + 64 * h);
            __m512i hb = twice(load256(w + Q6K_QH + 32 * h));
            hb = _mm512_mask_srli_epi16(hb, 0xffff0000u, hb, 2);
            __m512i q01 =
                _mm512_or_si512(_mm512_and_si512(l, m15), _mm512_slli_epi16(_mm512_and_si512(hb, m3), 4));
            __m512i q23 =
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m15),
                                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 4), m3), 4));
            __m512i s01 = _mm512_permutexvar_epi16(q6k_scale_index(8 * h), sc);
            __m512i s23 = _mm512_permutexvar_epi16(q6k_scale_index(8 * h + 4), sc);
            for (int r = 0; r < NA; r++) {
                const uint8_t *c = ab + r * act_stride + Q8K_QS + 128 * h;
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(q01, load512(c)), s01);
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(q23, load512(c + 64)), s23);
            }
        }
        float dw = half(w + Q6K_D);
        for (int r = 0; r < NA; r++)
            acc[r] = kq_step(acc[r], kq_f32(ab + r * act_stride) * dw, _mm512_reduce_add_epi32(sumi[r]));
    }
    for (int r = 0; r < NA; r++) out[r * out_stride] = acc[r];
}

/* ------------------------------------------------------- entry points */

/* The row kernels here take no `extra`; KQ_ENTRY_POINTS (kquants_x86.h)
** passes one. */
#define Q4K_ROWS(K, w, a, as, NA, o, os, extra) q4k_rows(K, w, a, as, NA, o, os)
#define Q6K_ROWS(K, w, a, as, NA, o, os, extra) q6k_rows(K, w, a, as, NA, o, os)

KQ_ENTRY_POINTS(q4_k, Q4K_ROWS, 0)
KQ_ENTRY_POINTS(q6_k, Q6K_ROWS, 0)

void cpu_fill_kquants_avx512(void)
{
    if (!cpu_has_avx512_vnni) return; /* AVX2's kernels stay */
    cpu_enc[RAD_ENC_Q4_K] = (CpuEncKernels){.act_fmt = CPU_ACT_Q8_K,
                                            .dot = dot_q4_k,
                                            .tile = tile_q4_k,
                                            .tile_act = TILE_ACT,
                                            .tile_w = TILE_W,
                                            .isa = "avx512"};
    cpu_enc[RAD_ENC_Q6_K] = (CpuEncKernels){.act_fmt = CPU_ACT_Q8_K,
                                            .dot = dot_q6_k,
                                            .tile = tile_q6_k,
                                            .tile_act = TILE_ACT,
                                            .tile_w = TILE_W,
                                            .isa = "avx512"};
}

#endif /* __x86_64__ */
