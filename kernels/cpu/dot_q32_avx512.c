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
#define TILE_ACT 4
#define TILE_W 4
#define TILE_ISA "avx512"

#include "dot_q32_kinds.h"

ALWAYS_INLINE __m256i fifth_bits(const unsigned char *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    /* bit j of h selects byte j: a mask register does it in one step */
    return _mm256_maskz_mov_epi8((__mmask32)h, _mm256_set1_epi8(0x10));
}

typedef __m256 Q32Acc;

ALWAYS_INLINE Q32Acc acc_zero(void) { return _mm256_setzero_ps(); }

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
    case IQ4_NL:
        w.d = half_bcast(b);
        w.q = iq4_nl_codes(b + 2);
        break;
    case MXFP4:
        w.d = _mm256_set1_ps(e8m0_half(b[0]));
        w.q = mxfp4_codes(b + 1);
        break;
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

#include "dot_q32_simd.h"

Q32_DOT_KINDS()

void cpu_fill_q32_avx512(void)
{
    if (!cpu_has_avx512_vnni) return;   /* without VNNI the AVX2 kernels are as good */
    Q32_SET_KINDS();
}
#endif
