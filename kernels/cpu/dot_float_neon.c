/*
** dot_float_neon.c: f32, f16 and bf16 weights against f32, f16 and bf16
** activation rows with AArch64 NEON.
**
** Each output has one 4-lane f32 accumulator: element k of a step of 4 goes
** to lane k % 4 with a fused multiply-add (f16 and bf16 widened to f32
** first, exactly), the tail past the last multiple of 4 is summed in order,
** and the lanes are added by faddp, then the tail.  `dot` and `tile` are
** one inline body instantiated for 1 x 1 and R x C outputs (determinism
** rule); a 4 x 4 tile keeps 16 accumulators in the 32 vector registers.
*/
#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

#include "../../base/rad_half.h"
#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_ACT 4
#define TILE_W 4

enum { F32, F16, BF16 };

ALWAYS_INLINE float32x4_t load4(const int type, const unsigned char *p, int64_t k)
{
    switch (type) {
    case F32: return vld1q_f32((const float *)(const void *)(p + 4 * k));
    case F16: return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)(p + 2 * k))));
    default: return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)(const void *)(p + 2 * k)), 16));
    }
}

ALWAYS_INLINE float load1(const int type, const unsigned char *p, int64_t k)
{
    uint16_t h;
    float f;
    switch (type) {
    case F32: memcpy(&f, p + 4 * k, 4); return f;
    case F16: memcpy(&h, p + 2 * k, 2); return rad_f16_to_f32(h);
    default: memcpy(&h, p + 2 * k, 2); return rad_bf16_to_f32(h);
    }
}

ALWAYS_INLINE void tile_rc(const int type, const int R, const int C, int64_t K, const unsigned char *w,
                           size_t ws, const unsigned char *a, size_t as, float *out, size_t os)
{
    float32x4_t acc[TILE_ACT][TILE_W];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = vdupq_n_f32(0.0f);
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        float32x4_t wv[TILE_W];
        for (int c = 0; c < C; c++) wv[c] = load4(type, w + c * ws, k);
        for (int r = 0; r < R; r++) {
            float32x4_t av = load4(type, a + r * as, k);
            for (int c = 0; c < C; c++) acc[r][c] = vfmaq_f32(acc[r][c], wv[c], av);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            float tail = 0.0f;
            for (int64_t t = k; t < K; t++) tail += load1(type, w + c * ws, t) * load1(type, a + r * as, t);
            out[r * os + c] = vaddvq_f32(acc[r][c]) + tail;
        }
}

ALWAYS_INLINE void tile_any(const int type, int64_t K, const void *w, size_t ws, int n_w, const void *a,
                            size_t as, int n_act, float *out, size_t os)
{
#define RC(R, C) tile_rc(type, R, C, K, w, ws, a, as, out, os)
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

#define FAMILY(name, type)                                                                     \
    static void dot_##name(int64_t K, const void *w, const void *a, float *out)                \
    {                                                                                          \
        tile_rc(type, 1, 1, K, w, 0, a, 0, out, 0);                                            \
    }                                                                                          \
    static void tile_##name(int64_t K, const void *w, size_t ws, int n_w, const void *a, size_t as, \
                            int n_act, float *out, size_t os)                                  \
    {                                                                                          \
        tile_any(type, K, w, ws, n_w, a, as, n_act, out, os);                                  \
    }

FAMILY(f32, F32)
FAMILY(f16, F16)
FAMILY(bf16, BF16)

static void set(int enc, int act, CpuDotFn dot, CpuDotTileFn tile)
{
    cpu_enc[enc] = (CpuEncKernels){.act_fmt = act, .dot = dot, .tile = tile, .tile_act = TILE_ACT,
                                   .tile_w = TILE_W, .isa = "neon"};
}

void cpu_fill_float_neon(void)
{
    cpu_act_quant[CPU_ACT_F16] = cpu_act_f16_neon;
    set(RAD_ENC_F32, CPU_ACT_F32, dot_f32, tile_f32);
    set(RAD_ENC_F16, CPU_ACT_F16, dot_f16, tile_f16);
    set(RAD_ENC_BF16, CPU_ACT_BF16, dot_bf16, tile_bf16);
}
#endif
