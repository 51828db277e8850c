/*
** dot_q32_avx2.c: the 32-element block encodings against Q8_0 / Q8_1
** activation blocks with AVX2, FMA and F16C (formulas: dot_q32_portable.c).
**
** One block of one (activation row, weight row) pair:
**   p16 = vpmaddubsw(u, v)       32 unsigned x signed byte products, summed
**                                in pairs to 16 int16 (never saturating here)
**   p32 = vpmaddwd(p16, 1)       8 int32 partial sums of 4 products each
**   acc = fma(dw * da, float(p32), acc)
** where (u, v) is, by encoding:
**   signed weights (q8_0, iq4_nl, mxfp4): u = |w|, v = sign(a, w)
**   offset weights (q4_0, q5_0: w - 8, w - 16): u = w, v = a, and
**                  p16 -= vpmaddubsw(offset, a), shared by all weight rows
**   q4_1, q5_1: u = w, v = a; mw * sa summed apart (fma) and added last
** The integer part is exact.  The f32 part follows ggml's AVX2 vec_dot
** kernels operation for operation: one 8-lane accumulator per output (two,
** even and odd blocks, for iq4_nl and mxfp4, whose last odd block is a
** scalar fma), the same lane reduction, the q4_1 / q5_1 min sum added
** after it.  So a row's result is the bits llama.cpp's CPU decode gets for
** it (checked against libggml-cpu's ggml_vec_dot_* on random rows: equal
** for all seven encodings), and what remains between the two programs is
** in other ops.
**
** `dot` and `tile` are one inline body instantiated for 1 x 1 and for R x C
** outputs, so every output gets the same operations in the same order
** whichever computed it (the determinism rule).  A tile loads and unpacks
** each weight block once for R activation rows and each activation block
** once for C weight rows; the driver uses 1 x 4 tiles for decode (four
** independent accumulator chains, the activation block prepared once) and
** 4 x 4 for prefill, done here as two 4 x 2 halves so that 8 accumulators
** and the operands fit the 16 ymm registers.
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
    __m256 d;           /* the scale, broadcast */
} WBlock;

typedef struct ABlock {
    __m256i y;          /* the 32 int8 codes */
    __m256i off;        /* offset kinds: offset * (y[2i] + y[2i+1]) as int16 */
    __m256 d;           /* the scale, broadcast */
    __m256 s;           /* Q8_1's s, broadcast */
} ABlock;

ALWAYS_INLINE WBlock load_w(const int kind, const unsigned char *b)
{
    WBlock w;
    w.q = _mm256_setzero_si256();
    switch (kind) {
    case Q8_0:
        w.d = half_bcast(b);
        w.q = _mm256_loadu_si256((const __m256i *)(const void *)(b + 2));
        w.u = _mm256_sign_epi8(w.q, w.q);
        break;
    case Q4_0:
        w.d = half_bcast(b);
        w.u = nibbles(b + 2);
        break;
    case Q5_0:
        w.d = half_bcast(b);
        w.u = _mm256_or_si256(nibbles(b + 6), fifth_bits(b + 2));
        break;
    case IQ4_NL:
        w.d = half_bcast(b);
        w.q = iq4_nl_codes(b + 2);
        w.u = _mm256_sign_epi8(w.q, w.q);
        break;
    case MXFP4:
        w.d = _mm256_set1_ps(e8m0_half(b[0]));
        w.q = mxfp4_codes(b + 1);
        w.u = _mm256_sign_epi8(w.q, w.q);
        break;
    case Q4_1:
        w.d = half_bcast(b);
        w.u = nibbles(b + 4);
        break;
    default: /* Q5_1 */
        w.d = half_bcast(b);
        w.u = _mm256_or_si256(nibbles(b + 8), fifth_bits(b + 4));
        break;
    }
    return w;
}

ALWAYS_INLINE ABlock load_a(const int kind, const unsigned char *b)
{
    ABlock a;
    a.d = half_bcast(b);
    a.off = _mm256_setzero_si256();
    a.s = _mm256_setzero_ps();
    if (has_min(kind)) {
        a.s = half_bcast(b + 2);
        a.y = _mm256_loadu_si256((const __m256i *)(const void *)(b + 4));
    } else {
        a.y = _mm256_loadu_si256((const __m256i *)(const void *)(b + 2));
    }
    if (offset_of(kind)) a.off = _mm256_maddubs_epi16(_mm256_set1_epi8((char)offset_of(kind)), a.y);
    return a;
}

/* The 8 int32 partial sums of one block pair (exact). */
ALWAYS_INLINE __m256i pair_int(const int kind, const WBlock *w, const ABlock *a)
{
    __m256i p16;
    if (signed_kind(kind)) p16 = _mm256_maddubs_epi16(w->u, _mm256_sign_epi8(a->y, w->q));
    else p16 = _mm256_maddubs_epi16(w->u, a->y);
    if (offset_of(kind)) p16 = _mm256_sub_epi16(p16, a->off);
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

ALWAYS_INLINE __m256 pair(const int kind, const WBlock *w, const ABlock *a, __m256 acc)
{
    __m256 p = _mm256_cvtepi32_ps(pair_int(kind, w, a));
    return _mm256_fmadd_ps(_mm256_mul_ps(w->d, a->d), p, acc);
}

ALWAYS_INLINE float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The mins of C weight blocks (q4_1, q5_1), lane c from weight row c. */
ALWAYS_INLINE __m128 mins_of(const int C, const unsigned char *m, size_t ws)
{
    uint16_t h[4] = {0, 0, 0, 0};
    for (int c = 0; c < C; c++) memcpy(&h[c], m + c * ws, 2);
    return _mm_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], 0, 0, 0, 0));
}

/* iq4_nl and mxfp4: ggml alternates two accumulators (even and odd blocks)
** and does a last odd block in scalar code; mirrored so the result is its
** result bit for bit. */
ALWAYS_INLINE int two_acc(const int kind) { return kind == IQ4_NL || kind == MXFP4; }

/* Block b of the tile into acc. */
ALWAYS_INLINE void tile_block(const int kind, const int R, const int C, int64_t b, const unsigned char *w,
                              size_t ws, const unsigned char *a, size_t as, __m256 acc[TILE_ACT][TILE_W],
                              __m128 mins[TILE_ACT])
{
    const int wb = block_bytes[kind], ab = has_min(kind) ? CPU_Q8_1_BYTES : CPU_Q8_0_BYTES;
    /* one weight block live at a time keeps the 1 x 4 decode tile in registers */
    ABlock av[TILE_ACT];
    for (int r = 0; r < R; r++) av[r] = load_a(kind, a + r * as + b * ab);
    if (has_min(kind)) {
        __m128 m = mins_of(C, w + b * wb + 2, ws);
        for (int r = 0; r < R; r++) mins[r] = _mm_fmadd_ps(m, _mm256_castps256_ps128(av[r].s), mins[r]);
    }
    for (int c = 0; c < C; c++) {
        /* a line ahead of every row's stream: the hardware prefetchers stop
        ** at 4 KiB page edges (dot_x8_avx2.c measures the distance) */
        if ((b & 1) == 0) _mm_prefetch((const char *)(w + c * ws + b * wb) + 1024, _MM_HINT_T0);
        WBlock wv = load_w(kind, w + c * ws + b * wb);
        for (int r = 0; r < R; r++) acc[r][c] = pair(kind, &wv, &av[r], acc[r][c]);
    }
}

/* out[r * os + c] = dot(activation row r, weight row c) for r < R, c < C.
** q4_1 / q5_1 keep the sum of mw * sa apart, one fused multiply-add per
** block in lane c of mins[r], and add it after the lane reduction: the
** order of ggml's AVX2 kernel, so the result is its result bit for bit. */
ALWAYS_INLINE void tile_rc(const int kind, const int R, const int C, int64_t nb, const unsigned char *w,
                           size_t ws, const unsigned char *a, size_t as, float *out, size_t os)
{
    __m256 acc[TILE_ACT][TILE_W], odd[TILE_ACT][TILE_W];
    __m128 mins[TILE_ACT];
    for (int r = 0; r < R; r++) {
        mins[r] = _mm_setzero_ps();
        for (int c = 0; c < C; c++) acc[r][c] = odd[r][c] = _mm256_setzero_ps();
    }
    if (two_acc(kind)) {
        for (int64_t b = 0; b + 1 < nb; b += 2) {
            tile_block(kind, R, C, b, w, ws, a, as, acc, mins);
            tile_block(kind, R, C, b + 1, w, ws, a, as, odd, mins);
        }
    } else {
        for (int64_t b = 0; b < nb; b++) tile_block(kind, R, C, b, w, ws, a, as, acc, mins);
    }
    for (int r = 0; r < R; r++) {
        float m[4];
        _mm_storeu_ps(m, mins[r]);
        for (int c = 0; c < C; c++) {
            float v = two_acc(kind) ? hsum(_mm256_add_ps(acc[r][c], odd[r][c])) : hsum(acc[r][c]);
            if (has_min(kind)) v += m[c];
            if (two_acc(kind) && (nb & 1)) {
                /* the last block of an odd count, as ggml's scalar tail */
                const int64_t b = nb - 1;
                WBlock wv = load_w(kind, w + c * ws + b * block_bytes[kind]);
                ABlock av = load_a(kind, a + r * as + b * CPU_Q8_0_BYTES);
                __m256i p = pair_int(kind, &wv, &av);
                __m128i p4 = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
                p4 = _mm_add_epi32(p4, _mm_shuffle_epi32(p4, _MM_SHUFFLE(1, 0, 3, 2)));
                p4 = _mm_add_epi32(p4, _mm_shuffle_epi32(p4, _MM_SHUFFLE(2, 3, 0, 1)));
                float d = _mm_cvtss_f32(_mm256_castps256_ps128(av.d)) * _mm_cvtss_f32(_mm256_castps256_ps128(wv.d));
                v = fmaf(d, (float)_mm_cvtsi128_si32(p4), v);
            }
            out[r * os + c] = v;
        }
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
