/*
** dot_q32_avx512.c: the 32-element block encodings against Q8_0 / Q8_1
** activation blocks with AVX-512 VNNI (on 256-bit registers, AVX-512VL),
** used only when CPUID reports VNNI; without it the AVX2 kernels stay.
** Formulas: dot_q32_portable.c; structure: dot_q32_avx2.c.
**
** vpdpbusd sums four unsigned x signed byte products into each int32 lane
** of an accumulator it is given, in one instruction where AVX2 needs
** vpmaddubsw + vpmaddwd, and its start value folds in the correction of an
** offset code for free.  One block of one (activation row, weight row):
**   q4_0, q5_0:  p32 = dpbusd(-off * sum4(a), w, a)          (w unsigned)
**                the start value is per activation block, shared by every
**                weight row of a tile
**   q8_0, iq4_nl, mxfp4 (signed weights):
**                p32 = dpbusd(-128 * sum4(w), a + 128, w)    (a made unsigned)
**                the start value is per weight block, shared by every
**                activation row of a tile
**   q4_1, q5_1:  p32 = dpbusd(0, w, a), plus mw * sa into lane 0
** then acc = fma(dw * da, float(p32), acc), one 8-lane accumulator per
** output and one fixed lane reduction at the end.  All integer steps are
** exact, so the result equals the AVX2 kernels' up to the order of f32
** additions, which is the same here in dot and tile (determinism rule).
** The 32 vector registers of AVX-512 hold a 4 x 4 tile's 16 accumulators.
**
** Compiled and tested under the AVX-512 level of tests/ops/test_cpu.c on
** machines that have it.
*/
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define QK 32
#define TILE_ACT 4
#define TILE_W 4

enum { Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4, Q4_1, Q5_1 };

static const int block_bytes[] = {34, 18, 22, 18, 17, 20, 24};

ALWAYS_INLINE int signed_kind(const int kind) { return kind == Q8_0 || kind == IQ4_NL || kind == MXFP4; }
ALWAYS_INLINE int offset_of(const int kind) { return kind == Q4_0 ? 8 : kind == Q5_0 ? 16 : 0; }
ALWAYS_INLINE int has_min(const int kind) { return kind == Q4_1 || kind == Q5_1; }

ALWAYS_INLINE __m256 half_bcast(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

ALWAYS_INLINE __m256i nibbles(const unsigned char *qs)
{
    /* the 16 bytes in both halves, the upper half shifted right by 4 */
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)qs));
    v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

ALWAYS_INLINE __m256i fifth_bits(const unsigned char *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    /* bit j of h selects byte j: a mask register does it in one step */
    return _mm256_maskz_mov_epi8((__mmask32)h, _mm256_set1_epi8(0x10));
}

ALWAYS_INLINE float e8m0_half(unsigned e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

typedef struct WBlock {
    __m256i q;          /* codes: unsigned for offset/min kinds, signed otherwise */
    __m256i start;      /* signed kinds: -128 * (sum of each 4 codes) */
    __m256 d, m;
} WBlock;

typedef struct ABlock {
    __m256i y;          /* the codes; signed kinds: + 128, as unsigned bytes */
    __m256i start;      /* offset kinds: -offset * (sum of each 4 codes) */
    __m256 d, s;
} ABlock;

ALWAYS_INLINE WBlock load_w(const int kind, const unsigned char *b)
{
    WBlock w;
    w.m = _mm256_setzero_ps();
    w.start = _mm256_setzero_si256();
    switch (kind) {
    case Q8_0:
        w.d = half_bcast(b);
        w.q = _mm256_loadu_si256((const __m256i *)(const void *)(b + 2));
        break;
    case Q4_0:
        w.d = half_bcast(b);
        w.q = nibbles(b + 2);
        break;
    case Q5_0:
        w.d = half_bcast(b);
        w.q = _mm256_or_si256(nibbles(b + 6), fifth_bits(b + 2));
        break;
    case IQ4_NL: {
        const __m256i grid = _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
                                              -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
        w.d = half_bcast(b);
        w.q = _mm256_shuffle_epi8(grid, nibbles(b + 2));
        break;
    }
    case MXFP4: {
        const __m256i e2m1 = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
                                              0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
        w.d = _mm256_set1_ps(e8m0_half(b[0]));
        w.q = _mm256_shuffle_epi8(e2m1, nibbles(b + 1));
        break;
    }
    case Q4_1:
        w.d = half_bcast(b);
        w.m = half_bcast(b + 2);
        w.q = nibbles(b + 4);
        break;
    default: /* Q5_1 */
        w.d = half_bcast(b);
        w.m = half_bcast(b + 2);
        w.q = _mm256_or_si256(nibbles(b + 8), fifth_bits(b + 4));
        break;
    }
    if (signed_kind(kind))
        w.start = _mm256_sub_epi32(_mm256_setzero_si256(),
                                   _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), w.q));
    return w;
}

ALWAYS_INLINE ABlock load_a(const int kind, const unsigned char *b)
{
    ABlock a;
    a.d = half_bcast(b);
    a.s = _mm256_setzero_ps();
    a.start = _mm256_setzero_si256();
    if (has_min(kind)) {
        uint16_t s;
        memcpy(&s, b + 2, 2);
        a.s = _mm256_cvtph_ps(_mm_cvtsi32_si128(s));
        a.y = _mm256_loadu_si256((const __m256i *)(const void *)(b + 4));
    } else {
        a.y = _mm256_loadu_si256((const __m256i *)(const void *)(b + 2));
    }
    if (offset_of(kind))
        a.start = _mm256_sub_epi32(_mm256_setzero_si256(),
                                   _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                                       _mm256_set1_epi8((char)offset_of(kind)), a.y));
    if (signed_kind(kind)) a.y = _mm256_xor_si256(a.y, _mm256_set1_epi8((char)0x80));
    return a;
}

ALWAYS_INLINE __m256 pair(const int kind, const WBlock *w, const ABlock *a, __m256 acc)
{
    __m256i p32;
    if (signed_kind(kind)) p32 = _mm256_dpbusd_epi32(w->start, a->y, w->q);
    else p32 = _mm256_dpbusd_epi32(a->start, w->q, a->y);
    if (has_min(kind)) acc = _mm256_fmadd_ps(w->m, a->s, acc);
    return _mm256_fmadd_ps(_mm256_mul_ps(w->d, a->d), _mm256_cvtepi32_ps(p32), acc);
}

ALWAYS_INLINE float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

ALWAYS_INLINE void tile_rc(const int kind, const int R, const int C, int64_t nb, const unsigned char *w,
                           size_t ws, const unsigned char *a, size_t as, float *out, size_t os)
{
    const int wb = block_bytes[kind], ab = has_min(kind) ? CPU_Q8_1_BYTES : CPU_Q8_0_BYTES;
    __m256 acc[TILE_ACT][TILE_W];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        WBlock wv[TILE_W];
        ABlock av[TILE_ACT];
        for (int c = 0; c < C; c++) wv[c] = load_w(kind, w + c * ws + b * wb);
        for (int r = 0; r < R; r++) av[r] = load_a(kind, a + r * as + b * ab);
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) acc[r][c] = pair(kind, &wv[c], &av[r], acc[r][c]);
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) out[r * os + c] = hsum(acc[r][c]);
}

ALWAYS_INLINE void tile_any(const int kind, int64_t K, const unsigned char *w, size_t ws, int n_w,
                            const unsigned char *a, size_t as, int n_act, float *out, size_t os)
{
    const int64_t nb = K / QK;
#define RC(R, C) tile_rc(kind, R, C, nb, w, ws, a, as, out, os)
    switch (n_act * 8 + n_w) {
    case 011: RC(1, 1); break;
    case 012: RC(1, 2); break;
    case 013: RC(1, 3); break;
    case 014: RC(1, 4); break;
    case 021: RC(2, 1); break;
    case 022: RC(2, 2); break;
    case 023: RC(2, 3); break;
    case 024: RC(2, 4); break;
    case 031: RC(3, 1); break;
    case 032: RC(3, 2); break;
    case 033: RC(3, 3); break;
    case 034: RC(3, 4); break;
    case 041: RC(4, 1); break;
    case 042: RC(4, 2); break;
    case 043: RC(4, 3); break;
    case 044: RC(4, 4); break;
    default: break;
    }
#undef RC
}

#define KIND(name, kind)                                                                       \
    static void dot_##name(int64_t K, const void *w, const void *a, float *out)                \
    {                                                                                          \
        tile_rc(kind, 1, 1, K / QK, w, 0, a, 0, out, 0);                                       \
    }                                                                                          \
    static void tile_##name(int64_t K, const void *w, size_t ws, int n_w, const void *a, size_t as, \
                            int n_act, float *out, size_t os)                                  \
    {                                                                                          \
        tile_any(kind, K, w, ws, n_w, a, as, n_act, out, os);                                  \
    }

KIND(q8_0, Q8_0)
KIND(q4_0, Q4_0)
KIND(q5_0, Q5_0)
KIND(iq4_nl, IQ4_NL)
KIND(mxfp4, MXFP4)
KIND(q4_1, Q4_1)
KIND(q5_1, Q5_1)

static void set(int enc, int act, CpuDotFn dot, CpuDotTileFn tile)
{
    cpu_enc[enc] = (CpuEncKernels){.act_fmt = act, .dot = dot, .tile = tile, .tile_act = TILE_ACT,
                                   .tile_w = TILE_W, .isa = "avx512"};
}

void cpu_fill_q32_avx512(void)
{
    if (!cpu_has_avx512_vnni) return;   /* without VNNI the AVX2 kernels are as good */
    set(RAD_ENC_Q8_0, CPU_ACT_Q8_0, dot_q8_0, tile_q8_0);
    set(RAD_ENC_Q4_0, CPU_ACT_Q8_0, dot_q4_0, tile_q4_0);
    set(RAD_ENC_Q5_0, CPU_ACT_Q8_0, dot_q5_0, tile_q5_0);
    set(RAD_ENC_IQ4_NL, CPU_ACT_Q8_0, dot_iq4_nl, tile_iq4_nl);
    set(RAD_ENC_MXFP4, CPU_ACT_Q8_0, dot_mxfp4, tile_mxfp4);
    set(RAD_ENC_Q4_1, CPU_ACT_Q8_1, dot_q4_1, tile_q4_1);
    set(RAD_ENC_Q5_1, CPU_ACT_Q8_1, dot_q5_1, tile_q5_1);
}
#endif
