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
**   q4_1, q5_1:  p32 = dpbusd(0, w, a)
** then the four weight rows' p32 reduce to one exact block sum each and
** take the canonical step (dot_q32_simd.h), so the result is the AVX2
** kernels' and the portable one's, bit for bit.  The 32 vector registers
** of AVX-512 hold a 4 x 4 tile's 16 partial sums.
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

typedef __m256i IVec;
typedef __m128 LVec;
typedef __m128i LIVec;

typedef struct WBlock {
    __m256i q;          /* codes: unsigned for offset/min kinds, signed otherwise */
    __m256i start;      /* signed kinds: -128 * (sum of each 4 codes) */
} WBlock;

typedef struct ABlock {
    __m256i y;          /* the codes; signed kinds: + 128, as unsigned bytes */
    __m256i start;      /* offset kinds: -offset * (sum of each 4 codes) */
    float d, s;
} ABlock;

ALWAYS_INLINE float half_at(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

ALWAYS_INLINE WBlock load_w(const int kind, const unsigned char *b)
{
    WBlock w;
    w.start = _mm256_setzero_si256();
    switch (kind) {
    case Q8_0: w.q = _mm256_loadu_si256((const __m256i *)(const void *)(b + 2)); break;
    case Q4_0: w.q = nibbles(b + 2); break;
    case Q5_0: w.q = _mm256_or_si256(nibbles(b + 6), fifth_bits(b + 2)); break;
    case IQ4_NL: w.q = iq4_nl_codes(b + 2); break;
    case MXFP4: w.q = mxfp4_codes(b + 1); break;
    case Q4_1: w.q = nibbles(b + 4); break;
    default: /* Q5_1 */ w.q = _mm256_or_si256(nibbles(b + 8), fifth_bits(b + 4)); break;
    }
    if (signed_kind(kind))
        w.start = _mm256_sub_epi32(_mm256_setzero_si256(),
                                   _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), w.q));
    return w;
}

ALWAYS_INLINE ABlock load_a(const int kind, const unsigned char *b)
{
    ABlock a;
    a.d = half_at(b);
    a.s = has_min(kind) ? half_at(b + 2) : 0.0f;
    a.start = _mm256_setzero_si256();
    a.y = _mm256_loadu_si256((const __m256i *)(const void *)(b + (has_min(kind) ? 4 : 2)));
    if (offset_of(kind))
        a.start = _mm256_sub_epi32(_mm256_setzero_si256(),
                                   _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                                       _mm256_set1_epi8((char)offset_of(kind)), a.y));
    if (signed_kind(kind)) a.y = _mm256_xor_si256(a.y, _mm256_set1_epi8((char)0x80));
    return a;
}

ALWAYS_INLINE IVec pair_int(const int kind, const WBlock *w, const ABlock *a)
{
    if (signed_kind(kind)) return _mm256_dpbusd_epi32(w->start, a->y, w->q);
    return _mm256_dpbusd_epi32(a->start, w->q, a->y);
}

ALWAYS_INLINE IVec ivec_zero(void) { return _mm256_setzero_si256(); }

ALWAYS_INLINE LIVec sums4(IVec p0, IVec p1, IVec p2, IVec p3) { return q32_sums4(p0, p1, p2, p3); }

ALWAYS_INLINE LVec mins4(const int C, const unsigned char *p, size_t ws) { return q32_halves4(C, p, ws); }

ALWAYS_INLINE LVec scales4(const int kind, const int C, const unsigned char *p, size_t ws)
{
    return q32_scales4(kind, C, p, ws);
}

ALWAYS_INLINE LVec lanes_zero(void) { return _mm_setzero_ps(); }

ALWAYS_INLINE LVec lanes_step(const int kind, LVec acc, LVec dw, LVec mw, const ABlock *a, LIVec s)
{
    acc = _mm_fmadd_ps(_mm_mul_ps(dw, _mm_set1_ps(a->d)), _mm_cvtepi32_ps(s), acc);
    if (has_min(kind)) acc = _mm_fmadd_ps(mw, _mm_set1_ps(a->s), acc);
    return acc;
}

ALWAYS_INLINE void lanes_store(float *v, LVec acc) { _mm_storeu_ps(v, acc); }

#include "dot_q32_simd.h"

Q32_DOT_KINDS()

void cpu_fill_q32_avx512(void)
{
    if (!cpu_has_avx512_vnni) return;   /* without VNNI the AVX2 kernels are as good */
    Q32_SET_KINDS();
}
#endif
