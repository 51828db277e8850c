/*
** dot_q32_neon.c: the 32-element block encodings against Q8_0 / Q8_1
** activation blocks with AArch64 NEON and the dot-product extension
** (formulas: dot_q32_portable.c).
**
** One block of one (activation row, weight row) pair: the weight's 32 codes
** are made signed int8 (q4_0: nibble - 8, q5_0: code - 16, iq4_nl / mxfp4:
** a table lookup, q4_1 / q5_1: the unsigned code, which fits), two sdot
** instructions give 4 int32 partial sums, and
**   acc = fma(acc, float(partial), dw * da)        (4 lanes)
** with q4_1 / q5_1's mw * sa added into lane 0.  Per output there is one
** 4-lane accumulator and one fixed lane reduction (faddp) at the end.
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

typedef float32x4_t Q32Acc;

ALWAYS_INLINE Q32Acc acc_zero(void) { return vdupq_n_f32(0.0f); }

typedef struct WBlock {
    int8x16_t lo, hi;       /* the signed codes of elements 0..15, 16..31 */
    float d, m;
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
    w.m = 0.0f;
    switch (kind) {
    case Q8_0:
        w.d = half_at(b);
        w.lo = vld1q_s8((const int8_t *)(b + 2));
        w.hi = vld1q_s8((const int8_t *)(b + 18));
        break;
    case Q4_0:
        w.d = half_at(b);
        nibbles(b + 2, &lo, &hi);
        w.lo = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(8));
        w.hi = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(8));
        break;
    case Q5_0:
        w.d = half_at(b);
        nibbles(b + 6, &lo, &hi);
        fifth_bits(b + 2, &h5, &h5hi);
        w.lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, h5)), vdupq_n_s8(16));
        w.hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(hi, h5hi)), vdupq_n_s8(16));
        break;
    case IQ4_NL:
        w.d = half_at(b);
        nibbles(b + 2, &lo, &hi);
        w.lo = vqtbl1q_s8(vld1q_s8(iq4_grid), lo);
        w.hi = vqtbl1q_s8(vld1q_s8(iq4_grid), hi);
        break;
    case MXFP4:
        w.d = e8m0_half(b[0]);
        nibbles(b + 1, &lo, &hi);
        w.lo = vqtbl1q_s8(vld1q_s8(e2m1_doubled), lo);
        w.hi = vqtbl1q_s8(vld1q_s8(e2m1_doubled), hi);
        break;
    case Q4_1:
        w.d = half_at(b);
        w.m = half_at(b + 2);
        nibbles(b + 4, &lo, &hi);
        w.lo = vreinterpretq_s8_u8(lo);
        w.hi = vreinterpretq_s8_u8(hi);
        break;
    default: /* Q5_1 */
        w.d = half_at(b);
        w.m = half_at(b + 2);
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

ALWAYS_INLINE float32x4_t pair(const int kind, const WBlock *w, const ABlock *a, float32x4_t acc)
{
    int32x4_t p = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w->lo, a->lo), w->hi, a->hi);
    if (has_min(kind)) acc = vsetq_lane_f32(vgetq_lane_f32(acc, 0) + w->m * a->s, acc, 0);
    return vfmaq_n_f32(acc, vcvtq_f32_s32(p), w->d * a->d);
}

ALWAYS_INLINE float hsum(float32x4_t v) { return vaddvq_f32(v); }

#include "dot_q32_simd.h"

Q32_DOT_KINDS()

void cpu_fill_q32_neon(void)
{
    cpu_act_quant[CPU_ACT_Q8_0] = cpu_act_q8_0_neon;
    cpu_act_quant[CPU_ACT_Q8_1] = cpu_act_q8_1_neon;
    Q32_SET_KINDS();
}
#endif
