/*
** dot_x8_avx2.c: q4_0, q4_1, q5_0, q8_0 and q4_k products over the x8 layout
** (x8.c) with AVX2, FMA and F16C (q8_0: block_q8, q4_k: tile_q4k_rc below).
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
/* How far ahead of the loads a tile asks for weight lines (bytes).  The
** hardware prefetchers stop at 4 KiB page edges, and a decode product is one
** long stream per thread; 512 to 1024 measured best on the 7B row of
** docs/BENCHMARKS.md (decode +20%), 2048 and up helped less. */
#ifndef X8_PREFETCH
#define X8_PREFETCH 1024
#endif

enum { X8_Q4_0, X8_Q4_1, X8_Q8_0, X8_Q5_0 };

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
        if (j % 2 == 0) _mm_prefetch((const char *)(codes + 32 * j) + X8_PREFETCH, _MM_HINT_T0);
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

/* The fifth bits of chunk j's low nibbles (elements 4j .. 4j+3 of each row)
** as 0x10 in each code byte: lane r's qh byte j/2 copied to its four bytes,
** then bit 4(j % 2) + i tested in byte i; `high` gives those of the high
** nibbles (elements 16 + 4j ..), two bytes further on. */
ALWAYS_INLINE __m256i fifth_bits_x8(__m256i qh, int j, int high)
{
    const char at = (char)(j / 2 + 2 * high);
    const __m256i spread = _mm256_setr_epi8(at, at, at, at, at + 4, at + 4, at + 4, at + 4, at + 8, at + 8, at + 8,
                                            at + 8, at + 12, at + 12, at + 12, at + 12, at, at, at, at, at + 4, at + 4,
                                            at + 4, at + 4, at + 8, at + 8, at + 8, at + 8, at + 12, at + 12, at + 12,
                                            at + 12);
    const int o = 4 * (j % 2);
    const __m256i bit = _mm256_set1_epi32((int)(1u << o | 1u << (o + 9) | 1u << (o + 18) | 1u << (o + 27)));
    __m256i bytes = _mm256_shuffle_epi8(qh, spread);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

/* q5_0: q4_0's chunks with the fifth bits or-ed in (codes 0..31); a pair of
** products can reach 2 * 31 * 127, so the int16 sums widen every two chunks. */
ALWAYS_INLINE void block_q5(const int R, const unsigned char *qh_lanes, const unsigned char *codes,
                            const unsigned char *const y[TILE_ACT], __m256i isum[TILE_ACT])
{
    const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)qh_lanes);
    __m256i s[TILE_ACT];
    for (int r = 0; r < R; r++) isum[r] = s[r] = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(codes + 32 * j));
        if (j % 2 == 0) _mm_prefetch((const char *)(codes + 32 * j) + X8_PREFETCH, _MM_HINT_T0);
        __m256i lo = _mm256_or_si256(_mm256_and_si256(v, low4), fifth_bits_x8(qh, j, 0));
        __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), fifth_bits_x8(qh, j, 1));
        for (int r = 0; r < R; r++) {
            __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast32(y[r] + 4 * j)),
                                         _mm256_maddubs_epi16(hi, bcast32(y[r] + 16 + 4 * j)));
            s[r] = _mm256_add_epi16(s[r], p);
        }
        if (j % 2 == 1)
            for (int r = 0; r < R; r++) {
                isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(s[r], ones));
                s[r] = _mm256_setzero_si256();
            }
    }
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
        if (j % 2 == 0) _mm_prefetch((const char *)(codes + 32 * j) + X8_PREFETCH, _MM_HINT_T0);
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
    const int head = kind == X8_Q4_1 ? 32 : 16;
    const int group_block = head + (kind == X8_Q8_0 ? 256 : kind == X8_Q5_0 ? 32 + 128 : 128);
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
        else if (kind == X8_Q5_0) block_q5(R, g + head, g + head + 32, y, isum);
        else block_q4(R, g + head, y, isum);
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)g));
        for (int r = 0; r < R; r++) {
            const unsigned char *ar = a + r * as;
            if (kind == X8_Q4_0 || kind == X8_Q5_0) {     /* codes stand for w - 8, w - 16 */
                int32_t sum;
                memcpy(&sum, ar + sums_at + 4 * b, 4);
                isum[r] = _mm256_sub_epi32(isum[r], _mm256_set1_epi32((kind == X8_Q5_0 ? 16 : 8) * sum));
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

/* Eight rows' scales of one sub-block (bytes) as int16 pairs (sc, sc). */
ALWAYS_INLINE __m256i scale_pairs(const unsigned char *scales)
{
    __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)scales));
    return _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
}

/* q4_k: per super-block and sub-block s, lane r gets the exact int16 sums
** of codes x activation codes as for q4_0 (pieces 8c .. 8c + 7 hold the
** sub-block pair 2c, 2c + 1: low nibbles then high, in two passes so four
** activation rows fit the registers), then vpmaddwd with the scale pair
** (sc, sc) folds the sub-block into the int32 sum:
**   isum = sum_s sc[s] * sum(q * a),   msum = sum_s m[s] * sum(a over s)
** (the activation's sums over a sub-block from Q8_K's bsums), and per
** super-block acc += d_w * d_a * isum - dmin_w * d_a * msum. */
ALWAYS_INLINE void tile_q4k_rc(const int R, int64_t K, const unsigned char *w, const unsigned char *a, size_t as,
                               float *out, size_t os)
{
    const int64_t nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256 acc[TILE_ACT];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const unsigned char *g = w + b * X8_Q4K_GROUP_BYTES, *codes = g + X8_Q4K_CODES;
        __m256i isum[TILE_ACT];
        for (int r = 0; r < R; r++) isum[r] = _mm256_setzero_si256();
        if (R <= 2) {
            /* one pass over each piece: both nibbles, sub-blocks 2c and 2c + 1 */
            for (int c = 0; c < 4; c++) {
                __m256i s16[2][2];
                for (int r = 0; r < R; r++) s16[r][0] = s16[r][1] = _mm256_setzero_si256();
#pragma GCC unroll 2
                for (int p = 0; p < 8; p++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(codes + 32 * (8 * c + p)));
                    if (p % 2 == 0) _mm_prefetch((const char *)(codes + 32 * (8 * c + p)) + X8_PREFETCH, _MM_HINT_T0);
                    __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                    for (int r = 0; r < R; r++) {
                        const unsigned char *y = a + r * as + b * 292 + 4 + 64 * c + 4 * p;
                        s16[r][0] = _mm256_add_epi16(s16[r][0], _mm256_maddubs_epi16(lo, bcast32(y)));
                        s16[r][1] = _mm256_add_epi16(s16[r][1], _mm256_maddubs_epi16(hi, bcast32(y + 32)));
                    }
                }
                for (int h = 0; h < 2; h++) {
                    __m256i sc = scale_pairs(g + X8_Q4K_SCALES + 8 * (2 * c + h));
                    for (int r = 0; r < R; r++) isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(s16[r][h], sc));
                }
            }
        } else {
            /* two passes (low nibbles, then high) so four rows' sums fit the registers */
            for (int sub = 0; sub < 8; sub++) {
                const int c = sub / 2, high = sub & 1;
                __m256i s16[TILE_ACT];
                for (int r = 0; r < R; r++) s16[r] = _mm256_setzero_si256();
                for (int p = 0; p < 8; p++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(codes + 32 * (8 * c + p)));
                    if (!high && p % 2 == 0)
                        _mm_prefetch((const char *)(codes + 32 * (8 * c + p)) + X8_PREFETCH, _MM_HINT_T0);
                    __m256i q = _mm256_and_si256(high ? _mm256_srli_epi16(v, 4) : v, low4);
                    for (int r = 0; r < R; r++) {
                        const unsigned char *y = a + r * as + b * 292 + 4 + 32 * sub + 4 * p;
                        s16[r] = _mm256_add_epi16(s16[r], _mm256_maddubs_epi16(q, bcast32(y)));
                    }
                }
                __m256i sc = scale_pairs(g + X8_Q4K_SCALES + 8 * sub);
                for (int r = 0; r < R; r++) isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(s16[r], sc));
            }
        }
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + X8_Q4K_D)));
        __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + X8_Q4K_DMIN)));
        for (int r = 0; r < R; r++) {
            const unsigned char *ab = a + r * as + b * 292;
            /* the activation's sub-block sums, pairs (2t, 2t + 1) as int32 t */
            __m128i bsums_lo = _mm_loadu_si128((const __m128i *)(const void *)(ab + 260));
            __m128i bsums_hi = _mm_loadu_si128((const __m128i *)(const void *)(ab + 276));
            __m128i asum = _mm_hadd_epi16(bsums_lo, bsums_hi);
            __m256i msum = _mm256_setzero_si256();
            for (int t = 0; t < 4; t++) {
                __m256i m = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(g + X8_Q4K_MINS + 16 * t)));
                __m256i pair;
                switch (t) {    /* the lane index must be a constant */
                case 0: pair = _mm256_set1_epi32(_mm_extract_epi32(asum, 0)); break;
                case 1: pair = _mm256_set1_epi32(_mm_extract_epi32(asum, 1)); break;
                case 2: pair = _mm256_set1_epi32(_mm_extract_epi32(asum, 2)); break;
                default: pair = _mm256_set1_epi32(_mm_extract_epi32(asum, 3)); break;
                }
                msum = _mm256_add_epi32(msum, _mm256_madd_epi16(m, pair));
            }
            float da;
            memcpy(&da, ab, 4);
            __m256 vda = _mm256_set1_ps(da);
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, vda), _mm256_cvtepi32_ps(isum[r]), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, vda), _mm256_cvtepi32_ps(msum), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) _mm256_storeu_ps(out + r * os, acc[r]);
}

static void tile_q4_k_x8(int64_t K, const void *w, size_t ws, int n_w, const void *act, size_t as, int n_act,
                         float *out, size_t os)
{
    (void)ws, (void)n_w;
    switch (n_act) {
    case 1: tile_q4k_rc(1, K, w, act, as, out, os); break;
    case 2: tile_q4k_rc(2, K, w, act, as, out, os); break;
    case 3: tile_q4k_rc(3, K, w, act, as, out, os); break;
    case 4: tile_q4k_rc(4, K, w, act, as, out, os); break;
    default: break;
    }
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

/* The entry point of one 32-element kind (the driver always passes 8 rows). */
#define X8_TILE(name, kind)                                                                             \
    static void tile_##name##_x8(int64_t K, const void *w, size_t ws, int n_w, const void *act, size_t as, \
                                 int n_act, float *out, size_t os)                                     \
    {                                                                                                  \
        (void)ws, (void)n_w;                                                                           \
        tile_any(kind, K, w, act, as, n_act, out, os);                                                 \
    }
X8_TILE(q4_0, X8_Q4_0)
X8_TILE(q4_1, X8_Q4_1)
X8_TILE(q5_0, X8_Q5_0)
X8_TILE(q8_0, X8_Q8_0)

/* q8_0 as stored, with the x8 tile's arithmetic.  The x8 copy of q8_0 buys
** nothing a stored-layout tile cannot have: eight consecutive stored rows
** are one contiguous stream already, and the integer block sums are exact
** in any order.  So each of eight rows' blocks meets the activation block
** directly (vpmaddubsw, vpmaddwd: eight int32 partial sums per row), the
** partials of the eight rows fold into one register with lane r = row r's
** exact block sum (three levels of vphaddd and a lane swap), and from there
** the float steps are the x8 tile's, operation for operation:
**
**   acc = fma(d_w * d_a, float(isum), acc)
**
** so every output is the same bits as the x8 tile gives, for any R, any
** thread count and any tile height, and no copy of the weight is made (a
** large vocabulary's q8_0 head is most of a small model: copying it was
** most of the time a model took to open).  A tile at the weight's last rows
** (n_w < 8) reads its last row again in the missing lanes and stores only
** n_w outputs. */
/* Row r's eight int32 partial sums of one block against the activation
** block y (signed codes: |w| times y with w's sign, as block_q8 does). */
ALWAYS_INLINE __m256i partials_q8(const unsigned char *blk, __m256i y)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(y, v));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* The eight rows' exact block sums, lane r = row r: the partials fold pair
** by pair as they come, so few registers are live (8 rows x 4 activation
** rows of partials would not fit in sixteen). */
ALWAYS_INLINE __m256i block_sums_q8(const unsigned char *const row[CPU_X8_ROWS], int64_t at, __m256i y)
{
    __m256i t01 = _mm256_hadd_epi32(partials_q8(row[0] + at, y), partials_q8(row[1] + at, y));
    __m256i t23 = _mm256_hadd_epi32(partials_q8(row[2] + at, y), partials_q8(row[3] + at, y));
    __m256i u0 = _mm256_hadd_epi32(t01, t23);
    __m256i t45 = _mm256_hadd_epi32(partials_q8(row[4] + at, y), partials_q8(row[5] + at, y));
    __m256i t67 = _mm256_hadd_epi32(partials_q8(row[6] + at, y), partials_q8(row[7] + at, y));
    __m256i u1 = _mm256_hadd_epi32(t45, t67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

#ifndef ROWS8_AHEAD
#define ROWS8_AHEAD 2
#endif
ALWAYS_INLINE void tile_q8_0_rows8_rc(const int R, int64_t K, const unsigned char *w, size_t ws, int n_w,
                                      const unsigned char *a, size_t as, float *out, size_t os)
{
    const int64_t nb = K / 32;
    const unsigned char *row[CPU_X8_ROWS];
    for (int r = 0; r < CPU_X8_ROWS; r++) row[r] = w + (size_t)(r < n_w ? r : n_w - 1) * ws;
    const size_t group = CPU_X8_ROWS * ws;
    const unsigned char *ahead = w + ROWS8_AHEAD * group;
    __m256 acc[TILE_ACT];
    for (int i = 0; i < R; i++) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const int64_t at = b * 34;
        /* Eight rows of a group are eight short streams, too short for the
        ** hardware prefetchers to lock onto: ask for the group AHEAD groups
        ** on, its share of lines per block, as one sequential sweep. */
        for (size_t line = (size_t)b * group / (size_t)nb; line < (size_t)(b + 1) * group / (size_t)nb; line += 64)
            _mm_prefetch((const char *)ahead + line, _MM_HINT_T0);
        /* the eight scales into one register, straight from memory */
        __m128i h = _mm_setzero_si128();
        h = _mm_insert_epi16(h, *(const uint16_t *)(const void *)(row[0] + at), 0);
        h = _mm_insert_epi16(h, *(const uint16_t *)(const void *)(row[1] + at), 1);
        h = _mm_insert_epi16(h, *(const uint16_t *)(const void *)(row[2] + at), 2);
        h = _mm_insert_epi16(h, *(const uint16_t *)(const void *)(row[3] + at), 3);
        h = _mm_insert_epi16(h, *(const uint16_t *)(const void *)(row[4] + at), 4);
        h = _mm_insert_epi16(h, *(const uint16_t *)(const void *)(row[5] + at), 5);
        h = _mm_insert_epi16(h, *(const uint16_t *)(const void *)(row[6] + at), 6);
        h = _mm_insert_epi16(h, *(const uint16_t *)(const void *)(row[7] + at), 7);
        __m256 dw = _mm256_cvtph_ps(h);
        for (int i = 0; i < R; i++) {
            const unsigned char *ab = a + i * as + b * CPU_Q8_0_BYTES;
            __m256i isum = block_sums_q8(row, at, _mm256_loadu_si256((const __m256i *)(const void *)(ab + 2)));
            __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(half_at(ab)));
            acc[i] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[i]);
        }
    }
    for (int i = 0; i < R; i++) {
        if (n_w == CPU_X8_ROWS) {
            _mm256_storeu_ps(out + i * os, acc[i]);
        } else {
            float lanes[CPU_X8_ROWS];
            _mm256_storeu_ps(lanes, acc[i]);
            memcpy(out + i * os, lanes, (size_t)n_w * sizeof *lanes);
        }
    }
}

static void tile_q8_0_rows8(int64_t K, const void *w, size_t ws, int n_w, const void *act, size_t as, int n_act,
                            float *out, size_t os)
{
    switch (n_act) {
    case 1: tile_q8_0_rows8_rc(1, K, w, ws, n_w, act, as, out, os); break;
    case 2: tile_q8_0_rows8_rc(2, K, w, ws, n_w, act, as, out, os); break;
    case 3: tile_q8_0_rows8_rc(3, K, w, ws, n_w, act, as, out, os); break;
    case 4: tile_q8_0_rows8_rc(4, K, w, ws, n_w, act, as, out, os); break;
    default: break;
    }
}

/* After every other fill (the AVX-512 files set q8_0's stored kernels too):
** stored q8_0 takes the tile above.  The x8 copy stays the faster of the two
** in decode (one stream, no folding); this tile is what serves the weight
** until its copy is made, and wherever no copy is. */
void cpu_fill_q8_0_rows8_avx2(void)
{
    cpu_enc[RAD_ENC_Q8_0].tile = tile_q8_0_rows8;
    cpu_enc[RAD_ENC_Q8_0].tile_act = TILE_ACT;
    cpu_enc[RAD_ENC_Q8_0].tile_w = CPU_X8_ROWS;
}

static void set_x8(int enc, int act_fmt, CpuDotTileFn tile)
{
    cpu_enc_x8[enc] = (CpuEncKernels){.act_fmt = act_fmt, .tile = tile, .tile_act = TILE_ACT,
                                      .tile_w = CPU_X8_ROWS, .isa = "avx2"};
}

void cpu_fill_x8_avx2(void)
{
    set_x8(RAD_ENC_Q4_0, CPU_ACT_Q8_0_SUMS, tile_q4_0_x8);
    set_x8(RAD_ENC_Q4_1, CPU_ACT_Q8_1, tile_q4_1_x8);
    set_x8(RAD_ENC_Q5_0, CPU_ACT_Q8_0_SUMS, tile_q5_0_x8);
    set_x8(RAD_ENC_Q8_0, CPU_ACT_Q8_0, tile_q8_0_x8);
    set_x8(RAD_ENC_Q4_K, CPU_ACT_Q8_K, tile_q4_k_x8);
}
#endif
