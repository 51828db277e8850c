/*
** dot_kquants_avx2.c: q2_k .. q6_k times Q8_K with AVX2, and tiles of up to
** 4 activation rows per weight row for q4_k, q5_k and q6_k (prefill).
**
** The integer core is the one llama.cpp's x86 kernels use: maddubs
** multiplies 32 unsigned codes by 32 int8 activations into 16 pair sums
** (int16, never saturating: at most 2 * 63 * 127), madd multiplies those by
** the group scales into int32 lanes, and a block's lanes are exact integers.
** Signed codes (q3_k's -4..3, q6_k's -32..31) are fed as their unsigned
** form and the bias taken back once per block from the bsums.  q4_k and
** q5_k first add the pair sums of each 32-element sub-block together in
** int16 (fold2, fold4), so a block needs 2 madds instead of 8: these
** kernels are bound by instruction throughput, not by memory, on a Zen 2.
** Each block's lanes then sum to the block's exact integers (isum, and the
** offsets' msum for q2_k, q4_k, q5_k), which take the canonical step of
** kquants.h: the portable file's operations, so both give the same bits.
**
** Determinism: a tile computes each (activation row, weight row) pair with
** the same instructions in the same order as the single dot (both are the
** one inline kernel, for 1..4 activation rows), so the two agree bit for
** bit, and both agree with the portable file and the x8 tiles.
*/
#if defined(__x86_64__)

#include <immintrin.h>

#include "cpu_internal.h"
#include "kquants.h"
#include "kquants_x86.h"

/* Ask for the lines `KQ_PREFETCH` bytes past a block as it is read: a decode
** product streams row after row, and the hardware prefetchers stop at every
** 4 KiB page edge (the same measure as dot_x8_avx2.c's). */
#define KQ_PREFETCH 1024
static inline __attribute__((always_inline)) void prefetch_ahead(const uint8_t *block, int bytes)
{
    for (int at = 0; at < bytes; at += 64) _mm_prefetch((const char *)block + KQ_PREFETCH + at, _MM_HINT_T0);
}

#define TILE_ACT 4 /* activation rows per weight row in a tile */
#define TILE_W   8

/* Byte shuffles that broadcast one int16 of a register to 8 lanes: PAIR(i, j)
** fills the low 128 bits with int16 i and the high 128 bits with int16 j
** (of the same 128-bit half's eight). */
#define B16(i)     B2(i), B2(i), B2(i), B2(i), B2(i), B2(i), B2(i), B2(i)
#define PAIR(i, j) _mm256_setr_epi8(B16(i), B16(j))

/* 8 sums of an int16 product with 16 lanes of scales, plus acc. */
INLINE __m256i scaled(__m256i acc, __m256i scale16, __m256i codes_u8, __m256i act_i8)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(scale16, _mm256_maddubs_epi16(codes_u8, act_i8)));
}

/* Folding before the scale multiply.  A maddubs register holds 16 int16
** partial sums, and multiplying each by its scale (madd) is the costly
** step, so partial sums of the same scale group are first added in int16
** (free of overflow: see each caller), leaving fewer registers to madd.
**
** fold2(a, b): a's and b's lanes each of one group per 128-bit half;
** returns, per half, a's group in int16 lanes 0..3 and b's in 4..7. */
INLINE __m256i fold2(__m256i a, __m256i b)
{
    return _mm256_add_epi16(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

/* fold4(a, b): a = fold2 of groups (0, 1), b of (2, 3); returns, per
** 128-bit half, groups 0, 1, 2, 3 in int16 lane pairs (0,1), (2,3), (4,5), (6,7). */
INLINE __m256i fold4(__m256i a, __m256i b)
{
    __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);
    __m256i even = _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0)));
    __m256i odd = _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_add_epi16(even, odd);
}

/* int16 scales spread over fold4's lanes: int16 a, a, b, b, c, c, d, d in
** both halves, from the bytes a, b, c, d of a register. */
#define SPREAD4B(a, b, c, d)                                                                                 \
    _mm256_setr_epi8(Z2(a), Z2(a), Z2(b), Z2(b), Z2(c), Z2(c), Z2(d), Z2(d), Z2(a), Z2(a), Z2(b), Z2(b),     \
                     Z2(c), Z2(c), Z2(d), Z2(d))

/* ------------------------------------------------------------------ q4_k */

/* NA activation rows (1..4, a constant after inlining) times one q4_k
** (five = 0) or q5_k (five = 1) weight row: out[r * out_stride]. */
INLINE void k4_rows(int64_t K, const uint8_t *w, const uint8_t *act, size_t act_stride, const int NA,
                    float *out, size_t out_stride, const int five)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m16 = _mm256_set1_epi8(0x10);
    const size_t bytes = five ? Q5K_BYTES : Q4K_BYTES, qs_at = five ? Q5K_QS : Q4K_QS;
    float acc[TILE_ACT];
    for (int r = 0; r < NA; r++) acc[r] = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += bytes) {
        prefetch_ahead(w, bytes);
        const uint8_t *ab = act + b * Q8K_BYTES;
        __m256i sm = _mm256_broadcastsi128_si256(k4_scales(w + Q4K_SCALES));
        __m256i mins = _mm256_shuffle_epi8(sm, K4_MINS_SPREAD);
        __m256i hbits = five ? load256(w + Q5K_QH) : _mm256_setzero_si256();
        /* sub-block s's maddubs lanes are at most 2 * 15 * 127 (q5_k:
        ** 2 * 31 * 127); folded four times, 15240 (31496): int16 holds them */
        __m256i pair[TILE_ACT][2];
        for (int j = 0; j < 4; j++) {
            __m256i bits = load256(w + qs_at + 32 * j);
            __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            if (five) { /* fifth bits of sub-blocks 2j and 2j + 1 to bit 4 */
                lo = _mm256_or_si256(
                    lo, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hbits, 2 * j), 4), m16));
                hi = _mm256_or_si256(
                    hi, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hbits, 2 * j + 1), 4), m16));
            }
            for (int r = 0; r < NA; r++) {
                const uint8_t *q8 = ab + r * act_stride + Q8K_QS + 64 * j;
                __m256i f =
                    fold2(_mm256_maddubs_epi16(lo, load256(q8)), _mm256_maddubs_epi16(hi, load256(q8 + 32)));
                if (j % 2 == 0)
                    pair[r][j / 2] = f;
                else
                    pair[r][j / 2] = fold4(pair[r][j / 2], f);
            }
        }
        __m256i sc0 = _mm256_shuffle_epi8(sm, SPREAD4B(0, 1, 2, 3));
        __m256i sc1 = _mm256_shuffle_epi8(sm, SPREAD4B(4, 5, 6, 7));
        for (int r = 0; r < NA; r++) {
            const uint8_t *a = ab + r * act_stride;
            __m256i sumi =
                _mm256_add_epi32(_mm256_madd_epi16(pair[r][0], sc0), _mm256_madd_epi16(pair[r][1], sc1));
            __m256i msum = _mm256_madd_epi16(load256(a + Q8K_BSUMS), mins);
            float da = kq_f32(a);
            acc[r] = kq_step_min(acc[r], da * half(w + Q4K_D), hsum_i32(sumi), da * half(w + Q4K_DMIN),
                                 hsum_i32(msum));
        }
    }
    for (int r = 0; r < NA; r++) out[r * out_stride] = acc[r];
}

KQ_ENTRY_POINTS(q4_k, k4_rows, 0)
KQ_ENTRY_POINTS(q5_k, k4_rows, 1)

/* ------------------------------------------------------------------ q6_k */

/* The unsigned codes (0..63) of one half h of a q6_k block: quarter k's
** 32 codes in q[k]. */
INLINE void q6k_codes(const uint8_t *w, int h, __m256i q[4])
{
    const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    __m256i l1 = load256(w + Q6K_QL + 64 * h), l2 = load256(w + Q6K_QL + 64 * h + 32);
    __m256i hb = load256(w + Q6K_QH + 32 * h);
    q[0] = _mm256_or_si256(_mm256_and_si256(l1, m15), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l2, m15),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
                           _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l2, 4), m15),
                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), _mm256_set1_epi8(0x30)));
}

INLINE void q6k_rows(int64_t K, const uint8_t *w, const uint8_t *act, size_t act_stride, const int NA,
                     float *out, size_t out_stride, const int unused)
{
    (void)unused;
    float acc[TILE_ACT];
    for (int r = 0; r < NA; r++) acc[r] = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q6K_BYTES) {
        prefetch_ahead(w, Q6K_BYTES);
        const uint8_t *ab = act + b * Q8K_BYTES;
        __m256i sc16 = _mm256_cvtepi8_epi16(load128(w + Q6K_SCALES)); /* groups 0..7 | 8..15 */
        __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                              _mm256_permute2x128_si256(sc16, sc16, 0x11)};
        __m256i sumi[TILE_ACT];
        /* the codes' bias of 32: 32 * sum_g scale_g * bsums_g, taken back at the end */
        for (int r = 0; r < NA; r++)
            sumi[r] = _mm256_sub_epi32(
                _mm256_setzero_si256(),
                _mm256_slli_epi32(_mm256_madd_epi16(load256(ab + r * act_stride + Q8K_BSUMS), sc16), 5));
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_codes(w, h, q);
            for (int k = 0; k < 4; k++) {
                /* quarter k of half h: groups 8h + 2k and 8h + 2k + 1 */
                __m256i s = _mm256_shuffle_epi8(sc_half[h], PAIR(2 * k, 2 * k + 1));
                for (int r = 0; r < NA; r++)
                    sumi[r] =
                        scaled(sumi[r], s, q[k], load256(ab + r * act_stride + Q8K_QS + 128 * h + 32 * k));
            }
        }
        float dw = half(w + Q6K_D);
        for (int r = 0; r < NA; r++) acc[r] = kq_step(acc[r], kq_f32(ab + r * act_stride) * dw, hsum_i32(sumi[r]));
    }
    for (int r = 0; r < NA; r++) out[r * out_stride] = acc[r];
}

KQ_ENTRY_POINTS(q6_k, q6k_rows, 0)

/* ------------------------------------------------------------ q2_k, q3_k */

static void dot_q2_k(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const uint8_t *w = w_row, *a = act_row;
    const __m128i m15 = _mm_set1_epi8(15);
    const __m256i m3 = _mm256_set1_epi8(3);
    float acc = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q2K_BYTES, a += Q8K_BYTES) {
        __m128i sc = load128(w + Q2K_SCALES);
        __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m15));
        __m256i m = _mm256_madd_epi16(mins, load256(a + Q8K_BSUMS));
        __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, m15));
        __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                              _mm256_permute2x128_si256(sc16, sc16, 0x11)};
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i bits = load256(w + Q2K_QS + 32 * h);
            for (int j = 0; j < 4; j++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
                __m256i s = _mm256_shuffle_epi8(sc_half[h], PAIR(2 * j, 2 * j + 1));
                sumi = scaled(sumi, s, q, load256(a + Q8K_QS + 128 * h + 32 * j));
            }
        }
        float da = kq_f32(a);
        acc = kq_step_min(acc, da * half(w + Q2K_D), hsum_i32(sumi), da * half(w + Q2K_DMIN), hsum_i32(m));
    }
    *out = acc;
}

static void dot_q3_k(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const uint8_t *w = w_row, *a = act_row;
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
    float acc = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q3K_BYTES, a += Q8K_BYTES) {
        int8_t sc8[16];
        kq_unpack_q3_scales(w + Q3K_SCALES, sc8);
        __m256i sc16 = _mm256_cvtepi8_epi16(load128(sc8));
        __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                              _mm256_permute2x128_si256(sc16, sc16, 0x11)};
        /* codes are fed as low | high << 2 (0..7): take back 4 * sum_g scale_g * bsums_g */
        __m256i sumi = _mm256_sub_epi32(
            _mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(load256(a + Q8K_BSUMS), sc16), 2));
        __m256i hbits = load256(w + Q3K_HMASK);
        for (int h = 0; h < 2; h++) {
            __m256i bits = load256(w + Q3K_QS + 32 * h);
            for (int j = 0; j < 4; j++) {
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
                __m256i hi = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hbits, 4 * h + j), 2), m4);
                __m256i s = _mm256_shuffle_epi8(sc_half[h], PAIR(2 * j, 2 * j + 1));
                sumi = scaled(sumi, s, _mm256_or_si256(lo, hi), load256(a + Q8K_QS + 128 * h + 32 * j));
            }
        }
        acc = kq_step(acc, kq_f32(a) * half(w + Q3K_D), hsum_i32(sumi));
    }
    *out = acc;
}

/* ------------------------------------------------------------------ fill */

void cpu_fill_kquants_avx2(void)
{
    static const struct {
        int enc;
        CpuDotFn dot;
        CpuDotTileFn tile;
    } k[] = {
        {RAD_ENC_Q2_K, dot_q2_k, NULL},      {RAD_ENC_Q3_K, dot_q3_k, NULL},
        {RAD_ENC_Q4_K, dot_q4_k, tile_q4_k}, {RAD_ENC_Q5_K, dot_q5_k, tile_q5_k},
        {RAD_ENC_Q6_K, dot_q6_k, tile_q6_k},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        cpu_enc[k[i].enc] = (CpuEncKernels){.act_fmt = CPU_ACT_Q8_K,
                                            .dot = k[i].dot,
                                            .tile = k[i].tile,
                                            .tile_act = k[i].tile ? TILE_ACT : 0,
                                            .tile_w = k[i].tile ? TILE_W : 0,
                                            .isa = "avx2"};
    cpu_act_quant[CPU_ACT_Q8_K] = cpu_quantize_row_q8k_avx2;
}

#endif /* __x86_64__ */
