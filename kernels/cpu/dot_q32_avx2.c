/*
** dot_q32_avx2.c: the 32-element block encodings against Q8_0 / Q8_1
** activation blocks with AVX2, FMA and F16C, weights in the stored layout
** (formulas: dot_q32_portable.c; the x8 layout: dot_x8_avx2.c).
**
** One block of one (activation row, weight row) pair:
**   p16 = vpmaddubsw(u, v)       32 unsigned x signed byte products, summed
**                                in pairs to 16 int16 (never saturating here)
**   p32 = vpmaddwd(p16, 1)       8 int32 partial sums of 4 products each
** where (u, v) is, by encoding:
**   signed weights (q8_0, iq4_nl, mxfp4): u = |w|, v = sign(a, w)
**   offset weights (q4_0, q5_0): u = w, v = a, and offset * sum(a) (from
**                  the activation row's block sums) taken back after
**   q4_1, q5_1: u = w, v = a
** Four weight rows' p32 are then reduced together (vphaddd) to one exact
** int32 per row, the block sum, lane c from weight row c, and the block
** takes the canonical step of docs/OPS.md ("Batch and placement
** invariance"), lane by lane:
**   acc = fma(dw * da, float(isum), acc)        (q4_1, q5_1: then fma(mw, sa, acc))
** Every lane's operations are those of the portable dot and of the x8
** tiles, so a product has the same bits in the stored layout, in the x8
** layout, in a tile of any shape and at every ISA level.
**
** `dot` and `tile` are one inline body instantiated for 1 x 1 and for R x C
** outputs.  A tile loads and unpacks each weight block once for R activation
** rows and each activation block once for C weight rows; the driver uses
** 1 x 4 tiles for decode and 4 x 4 for prefill, done here as two 4 x 2
** halves so that the partial sums fit the 16 ymm registers.
*/
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_ACT 4
#define TILE_W 4
#define TILE_ISA "avx2"

#include "dot_q32_kinds.h"

/* The 32 fifth bits (bit j of a little-endian u32 belongs to element j) as
** 0x10 in byte j where set. */
ALWAYS_INLINE __m256i fifth_bits(const unsigned char *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                              0x0303030303030303LL);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread); /* byte j = byte j/8 of h */
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

typedef struct WBlock {
    __m256i u;          /* the unsigned operand: codes, or |codes| for signed kinds */
    __m256i q;          /* signed kinds: the codes, whose signs move onto the activation */
} WBlock;

ALWAYS_INLINE WBlock load_w(const int kind, const unsigned char *b)
{
    WBlock w;
    w.q = _mm256_setzero_si256();
    switch (kind) {
    case Q8_0:
        w.q = _mm256_loadu_si256((const __m256i *)(const void *)(b + 2));
        w.u = _mm256_sign_epi8(w.q, w.q);
        break;
    case Q4_0: w.u = nibbles(b + 2); break;
    case Q5_0: w.u = _mm256_or_si256(nibbles(b + 6), fifth_bits(b + 2)); break;
    case IQ4_NL:
        w.q = iq4_nl_codes(b + 2);
        w.u = _mm256_sign_epi8(w.q, w.q);
        break;
    case MXFP4:
        w.q = mxfp4_codes(b + 1);
        w.u = _mm256_sign_epi8(w.q, w.q);
        break;
    case Q4_1: w.u = nibbles(b + 4); break;
    default: /* Q5_1 */ w.u = _mm256_or_si256(nibbles(b + 8), fifth_bits(b + 4)); break;
    }
    return w;
}

/* The activation block's 32 int8 codes. */
ALWAYS_INLINE __m256i load_a(const int kind, const unsigned char *b)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)(b + (has_min(kind) ? 4 : 2)));
}

/* The 8 int32 partial sums of one block pair, sum(code * a) (exact; for the
** offset kinds the codes as stored, the offset is taken back later). */
ALWAYS_INLINE __m256i pair_int(const int kind, const WBlock *w, __m256i y)
{
    __m256i p16;
    if (signed_kind(kind)) p16 = _mm256_maddubs_epi16(w->u, _mm256_sign_epi8(y, w->q));
    else p16 = _mm256_maddubs_epi16(w->u, y);
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Block b of the tile: lane c of acc[r] takes weight row c's block against
** activation row r's, in the canonical step (module comment). */
ALWAYS_INLINE void tile_block(const int kind, const int R, const int C, int64_t b, const unsigned char *w,
                              size_t ws, const unsigned char *a, size_t as, size_t sums_at, __m128 acc[TILE_ACT])
{
    const int wb = block_bytes[kind], ab = has_min(kind) ? CPU_Q8_1_BYTES : CPU_Q8_0_BYTES;
    __m256i y[TILE_ACT], p[TILE_ACT][TILE_W];
    for (int r = 0; r < R; r++) y[r] = load_a(kind, a + r * as + b * ab);
    for (int c = 0; c < TILE_W; c++) {
        if (c >= C) {
            for (int r = 0; r < R; r++) p[r][c] = _mm256_setzero_si256();
            continue;
        }
        /* a line ahead of every row's stream: the hardware prefetchers stop
        ** at 4 KiB page edges (dot_x8_avx2.c measures the distance) */
        if ((b & 1) == 0) _mm_prefetch((const char *)(w + c * ws + b * wb) + 1024, _MM_HINT_T0);
        WBlock wv = load_w(kind, w + c * ws + b * wb);
        for (int r = 0; r < R; r++) p[r][c] = pair_int(kind, &wv, y[r]);
    }
    __m128 dw = q32_scales4(kind, C, w + b * wb, ws);
    __m128 mw = has_min(kind) ? q32_halves4(C, w + b * wb + 2, ws) : _mm_setzero_ps();
    for (int r = 0; r < R; r++) {
        const unsigned char *ar = a + r * as + b * ab;
        __m128i s = q32_sums4(p[r][0], p[r][1], p[r][2], p[r][3]);
        if (offset_of(kind)) {          /* the codes stand for w - 8 (q4_0), w - 16 (q5_0) */
            int32_t sum;
            memcpy(&sum, a + r * as + sums_at + 4 * b, 4);
            s = _mm_sub_epi32(s, _mm_set1_epi32(offset_of(kind) * sum));
        }
        __m128 d = _mm_mul_ps(dw, _mm_cvtph_ps(_mm_set1_epi16((short)(ar[0] | ar[1] << 8))));
        acc[r] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(s), acc[r]);
        if (has_min(kind))
            acc[r] = _mm_fmadd_ps(mw, _mm_cvtph_ps(_mm_set1_epi16((short)(ar[2] | ar[3] << 8))), acc[r]);
    }
}

/* out[r * os + c] = dot(activation row r, weight row c) for r < R, c < C. */
ALWAYS_INLINE void tile_rc(const int kind, const int R, const int C, int64_t nb, const unsigned char *w,
                           size_t ws, const unsigned char *a, size_t as, float *out, size_t os)
{
    const size_t sums_at = cpu_act_sums_offset(nb * QK);
    __m128 acc[TILE_ACT];
    for (int r = 0; r < R; r++) acc[r] = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; b++) tile_block(kind, R, C, b, w, ws, a, as, sums_at, acc);
    for (int r = 0; r < R; r++) {
        float v[4];
        _mm_storeu_ps(v, acc[r]);
        for (int c = 0; c < C; c++) out[r * os + c] = v[c];
    }
}

/* Any tile up to TILE_ACT x TILE_W: one activation row takes up to 4
** weight rows at once, more rows go 2 weight rows at a time. */
ALWAYS_INLINE void tile_any(const int kind, int64_t K, const unsigned char *w, size_t ws, int n_w,
                            const unsigned char *a, size_t as, int n_act, float *out, size_t os)
{
    const int64_t nb = K / QK;
#define RC(R, C) tile_rc(kind, R, C, nb, w, ws, a, as, out, os)
    if (n_act == 1) {
        switch (n_w) {
        case 1: RC(1, 1); break;
        case 2: RC(1, 2); break;
        case 3: RC(1, 3); break;
        case 4: RC(1, 4); break;
        default: break;
        }
        return;
    }
    for (int c0 = 0; c0 < n_w; c0 += 2, w += 2 * ws, out += 2) {
        int two = n_w - c0 >= 2;
        switch (n_act * 2 + two) {
        case 4: RC(2, 1); break;
        case 5: RC(2, 2); break;
        case 6: RC(3, 1); break;
        case 7: RC(3, 2); break;
        case 8: RC(4, 1); break;
        case 9: RC(4, 2); break;
        default: break;
        }
    }
#undef RC
}

#define TILE_OWN_ANY
#include "dot_tile.h"

Q32_DOT_KINDS()

void cpu_fill_q32_avx2(void)
{
    cpu_act_quant[CPU_ACT_Q8_0] = cpu_act_q8_0_avx2;
    cpu_act_quant[CPU_ACT_Q8_1] = cpu_act_q8_1_avx2;
    Q32_SET_KINDS();
}
#endif
