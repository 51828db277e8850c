/*
** dot_float_neon.c: f32, f16 and bf16 weights against f32, f16 and bf16
** activation rows with AArch64 NEON.
**
** Each output has one 4-lane f32 accumulator: element k of a step of 4 goes
** to lane k % 4 with a fused multiply-add (f16 and bf16 widened to f32
** first, exactly), the tail past the last multiple of 4 is summed in order,
** and the lanes are added by faddp, then the tail.  `dot` and `tile` are
** one inline body instantiated for 1 x 1 and R x C outputs (determinism
** rule; the loop is dot_float_simd.h's); a 4 x 4 tile keeps 16
** accumulators in the 32 vector registers.
*/
#if defined(__aarch64__)
#include <arm_neon.h>

#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_ACT 4
#define TILE_W 4
#define TILE_ISA "neon"

enum { F32, F16, BF16 };

typedef float32x4_t FloatVec;

ALWAYS_INLINE float32x4_t vec_zero(void) { return vdupq_n_f32(0.0f); }
#define STEP(type) 4

ALWAYS_INLINE float32x4_t load_step(const int type, const unsigned char *p, int64_t k)
{
    switch (type) {
    case F32: return vld1q_f32((const float *)(const void *)(p + 4 * k));
    case F16: return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)(p + 2 * k))));
    default: return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)(const void *)(p + 2 * k)), 16));
    }
}

/* acc + w * a, fused.  A macro: as an inline function GCC picks other
** registers for the same instructions of the 4 x 4 loop. */
#define step_fma(type, w, a, acc) vfmaq_f32(acc, w, a)

ALWAYS_INLINE float hsum(float32x4_t v) { return vaddvq_f32(v); }

#include "dot_float_simd.h"

CPU_DOT_KIND(f32, F32)
CPU_DOT_KIND(f16, F16)
CPU_DOT_KIND(bf16, BF16)

void cpu_fill_float_neon(void)
{
    cpu_act_quant[CPU_ACT_F16] = cpu_act_f16_neon;
    tile_set(RAD_ENC_F32, CPU_ACT_F32, dot_f32, tile_f32);
    tile_set(RAD_ENC_F16, CPU_ACT_F16, dot_f16, tile_f16);
    tile_set(RAD_ENC_BF16, CPU_ACT_BF16, dot_bf16, tile_bf16);
}
#endif
