/*
** dot_q32_simd.h: the block loop of the 32-element encodings, shared by
** dot_q32_avx512.c and dot_q32_neon.c (dot_q32_avx2.c keeps its own: ggml's
** AVX2 order needs two accumulators and a separate min sum).
**
** Per block, each of the C weight blocks and each of the R activation
** blocks is loaded and unpacked once, then every (r, c) pair folds into
** its own accumulator; one fixed lane reduction per output at the end.
**
** The ISA file includes this after dot_q32_kinds.h and after defining
**   Q32Acc                        its accumulator type
**   acc_zero()                    a zero accumulator
**   WBlock load_w(kind, block)    one weight block, unpacked
**   ABlock load_a(kind, block)    one Q8_0 / Q8_1 block, unpacked
**   pair(kind, &w, &a, acc)       acc with the pair's contribution
**   hsum(acc)                     the fixed lane reduction
** and TILE_ACT, TILE_W, TILE_ISA; it gets tile_rc and dot_tile.h's entry
** points, compiled with its own ISA flags.
*/
#ifndef CPU_DOT_Q32_SIMD_H
#define CPU_DOT_Q32_SIMD_H

#include "cpu_internal.h"

ALWAYS_INLINE void tile_rc(const int kind, const int R, const int C, int64_t nb, const unsigned char *w,
                           size_t ws, const unsigned char *a, size_t as, float *out, size_t os)
{
    const int wb = block_bytes[kind], ab = has_min(kind) ? CPU_Q8_1_BYTES : CPU_Q8_0_BYTES;
    Q32Acc acc[TILE_ACT][TILE_W];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = acc_zero();
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

#include "dot_tile.h"

#endif /* CPU_DOT_Q32_SIMD_H */
