/*
** dot_float_simd.h: the tile body of f32, f16 and bf16 weights against
** activation rows of their type, shared by dot_float_avx2.c,
** dot_float_avx512.c and dot_float_neon.c.
**
** Each output has one f32 accumulator of the ISA's width: the elements of a
** step go lane by lane into it with a fused multiply-add, the tail past the
** last whole step is summed in order in f32, and the lanes are added by the
** ISA's one fixed reduction, then the tail.  The weight rows of a step are
** loaded (and widened) once for all activation rows, each activation row
** once for all weight rows.
**
** The ISA file includes this after defining the types F32, F16 and BF16
** (an enum; more of its own may follow) and
**   FloatVec                      its accumulator type
**   vec_zero()                    a zero accumulator
**   STEP(type)                    elements per step, a constant expression
**   load_step(type, p, k)         one step's elements from k on
**   step_fma(type, w, a, acc)     acc + w * a, lane by lane, fused
**   hsum(v)                       the fixed lane reduction
** and TILE_ACT, TILE_W, TILE_ISA; it gets tile_rc and dot_tile.h's entry
** points, compiled with its own ISA flags.
*/
#ifndef CPU_DOT_FLOAT_SIMD_H
#define CPU_DOT_FLOAT_SIMD_H

#include <string.h>

#include "../../base/rad_half.h"
#include "cpu_internal.h"

/* Element k of a row, widened to f32 (the tail). */
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
    const int step = STEP(type);
    FloatVec acc[TILE_ACT][TILE_W];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = vec_zero();
    int64_t k = 0;
    for (; k + step <= K; k += step) {
        FloatVec wv[TILE_W];
        for (int c = 0; c < C; c++) wv[c] = load_step(type, w + c * ws, k);
        for (int r = 0; r < R; r++) {
            FloatVec av = load_step(type, a + r * as, k);
            for (int c = 0; c < C; c++) acc[r][c] = step_fma(type, wv[c], av, acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            float tail = 0.0f;
            for (int64_t t = k; t < K; t++) tail += load1(type, w + c * ws, t) * load1(type, a + r * as, t);
            out[r * os + c] = hsum(acc[r][c]) + tail;
        }
}

#include "dot_tile.h"

#endif /* CPU_DOT_FLOAT_SIMD_H */
