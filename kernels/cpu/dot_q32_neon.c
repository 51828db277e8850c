/*
** dot_q32_neon.c: the 32-element block encodings against Q8_0 / Q8_1
** activation blocks with AArch64 NEON and the dot-product extension
** (formulas: dot_q32_portable.c).
**
** One block of one (activation row, weight row) pair: the weight's 32 codes
** are made signed int8 (q4_0: nibble - 8, q5_0: code - 16, iq4_nl / mxfp4:
** a table lookup, q4_1 / q5_1: the unsigned code, which fits), two sdot
** instructions give 4 int32 partial sums, four weight rows' partial sums
** reduce (addp) to one exact block sum each, and the lanes take the
** canonical step (dot_q32_simd.h), bit for bit what the portable and x86
** kernels compute.
**
** `dot` and `tile` are one inline body instantiated for 1 x 1 and for R x C
** outputs (determinism rule).  With 32 vector registers a 4 x 4 tile keeps
** its 16 accumulators in registers.
*/
#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_ACT 4
#define TILE_W 4
#define TILE_ISA "neon"

#include "dot_q32_kinds.h"

ALWAYS_INLINE float half_at(const unsigned char *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* 16 code bytes in nibble order: low nibbles (elements 0..15) and high
** nibbles (16..31). */
ALWAYS_INLINE void nibbles(const unsigned char *qs, uint8x16_t *lo, uint8x16_t *hi)
{
    uint8x16_t v = vld1q_u8(qs);
    *lo = vandq_u8(v, vdupq_n_u8(0x0f));
    *hi = vshrq_n_u8(v, 4);
}

/* The fifth bits as 0x10 in each element's byte: bit j of the u32 at qh. */
ALWAYS_INLINE void fifth_bits(const unsigned char *qh, uint8x16_t *lo, uint8x16_t *hi)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    static const uint8_t pick_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t pick_hi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t hb = vreinterpretq_u8_u32(vdupq_n_u32(h));
    uint8x16_t b = vld1q_u8(bit), ten = vdupq_n_u8(0x10);
    *lo = vandq_u8(vtstq_u8(vqtbl1q_u8(hb, vld1q_u8(pick_lo)), b), ten);
    *hi = vandq_u8(vtstq_u8(vqtbl1q_u8(hb, vld1q_u8(pick_hi)), b), ten);
}

typedef int32x4_t IVec;
typedef float32x4_t LVec;
typedef int32x4_t LIVec;

typedef struct WBlock {
    int8x16_t lo, hi;       /* the signed codes of elements 0..15, 16..31 */
} WBlock;

typedef struct ABlock {
    int8x16_t lo, hi;
    float d, s;
} ABlock;

ALWAYS_INLINE WBlock load_w(const int kind, const unsigned char *b)
{
    static const int8_t iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    static const int8_t e2m1_doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    WBlock w;
    uint8x16_t lo, hi, h5, h5hi;
    switch (kind) {
    case Q8_0:
        w.lo = vld1q_s8((const int8_t *)(b + 2));
        w.hi = vld1q_s8((const int8_t *)(b + 18));
        break;
    case Q4_0:
        nibbles(b + 2, &lo, &hi);
        w.lo = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(8));
        w.hi = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(8));
        break;
    case Q5_0:
        nibbles(b + 6, &lo, &hi);
        fifth_bits(b + 2, &h5, &h5hi);
        w.lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, h5)), vdupq_n_s8(16));
        w.hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(hi, h5hi)), vdupq_n_s8(16));
        break;
    case IQ4_NL:
        nibbles(b + 2, &lo, &hi);
        w.lo = vqtbl1q_s8(vld1q_s8(iq4_grid), lo);
        w.hi = vqtbl1q_s8(vld1q_s8(iq4_grid), hi);
        break;
    case MXFP4:
        nibbles(b + 1, &lo, &hi);
        w.lo = vqtbl1q_s8(vld1q_s8(e2m1_doubled), lo);
        w.hi = vqtbl1q_s8(vld1q_s8(e2m1_doubled), hi);
        break;
    case Q4_1:
        nibbles(b + 4, &lo, &hi);
        w.lo = vreinterpretq_s8_u8(lo);
        w.hi = vreinterpretq_s8_u8(hi);
        break;
    default: /* Q5_1 */
        nibbles(b + 8, &lo, &hi);
        fifth_bits(b + 4, &h5, &h5hi);
        w.lo = vreinterpretq_s8_u8(vorrq_u8(lo, h5));
        w.hi = vreinterpretq_s8_u8(vorrq_u8(hi, h5hi));
        break;
    }
    return w;
}

ALWAYS_INLINE ABlock load_a(const int kind, const unsigned char *b)
{
    ABlock a;
    a.d = half_at(b);
    a.s = has_min(kind) ? half_at(b + 2) : 0.0f;
    const unsigned char *q = b + (has_min(kind) ? 4 : 2);
    a.lo = vld1q_s8((const int8_t *)q);
    a.hi = vld1q_s8((const int8_t *)(q + 16));
    return a;
}

ALWAYS_INLINE IVec pair_int(const int kind, const WBlock *w, const ABlock *a)
{
    (void)kind;
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w->lo, a->lo), w->hi, a->hi);
}

ALWAYS_INLINE IVec ivec_zero(void) { return vdupq_n_s32(0); }

ALWAYS_INLINE LIVec sums4(IVec p0, IVec p1, IVec p2, IVec p3)
{
    return vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
}

ALWAYS_INLINE LVec mins4(const int C, const unsigned char *p, size_t ws)
{
    float m[4] = {0, 0, 0, 0};
    for (int c = 0; c < C; c++) m[c] = half_at(p + c * ws);
    return vld1q_f32(m);
}

ALWAYS_INLINE LVec scales4(const int kind, const int C, const unsigned char *p, size_t ws)
{
    if (kind != MXFP4) return mins4(C, p, ws);
    float d[4] = {0, 0, 0, 0};
    for (int c = 0; c < C; c++) d[c] = e8m0_half(p[c * ws]);
    return vld1q_f32(d);
}

ALWAYS_INLINE LVec lanes_zero(void) { return vdupq_n_f32(0.0f); }

ALWAYS_INLINE LVec lanes_step(const int kind, LVec acc, LVec dw, LVec mw, const ABlock *a, LIVec s)
{
    acc = vfmaq_f32(acc, vmulq_n_f32(dw, a->d), vcvtq_f32_s32(s));
    if (has_min(kind)) acc = vfmaq_n_f32(acc, mw, a->s);
    return acc;
}

ALWAYS_INLINE void lanes_store(float *v, LVec acc) { vst1q_f32(v, acc); }

#include "dot_q32_simd.h"

Q32_DOT_KINDS()

void cpu_fill_q32_neon(void)
{
    cpu_act_quant[CPU_ACT_Q8_0] = cpu_act_q8_0_neon;
    cpu_act_quant[CPU_ACT_Q8_1] = cpu_act_q8_1_neon;
    Q32_SET_KINDS();
}
#endif
