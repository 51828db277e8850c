/*
** dot_q32_simd.h: the block loop of the 32-element encodings, shared by
** dot_q32_avx512.c and dot_q32_neon.c (dot_q32_avx2.c keeps its own, whose
** offset kinds take their correction from the activation's block sums).
**
** Per block, each of the C weight blocks and each of the R activation
** blocks is loaded and unpacked once, every (r, c) pair gives its exact
** integer partial sums, the four weight rows' partial sums of activation
** row r are reduced to one int32 each (lane c from weight row c), and the
** lanes take the canonical step of docs/OPS.md ("Batch and placement
** invariance"):
**   acc = fma(dw * da, float(isum), acc)        (q4_1, q5_1: then fma(mw, sa, acc))
** the same operations, lane for lane, as the portable dot and the x8 tiles.
**
** The ISA file includes this after dot_q32_kinds.h and after defining
**   IVec, LVec, LIVec             a pair's int32 partial sums; four f32 / int32 lanes
**   WBlock load_w(kind, block)    one weight block, unpacked
**   ABlock load_a(kind, block)    one Q8_0 / Q8_1 block, unpacked (with its d and s)
**   IVec pair_int(kind, &w, &a)   the pair's partial sums of (code - offset) * a, exact
**   IVec ivec_zero()
**   LIVec sums4(p0, p1, p2, p3)   lane c = the sum of p_c's lanes
**   LVec scales4(kind, C, p, ws)  lane c = the scale of the weight block at p + c * ws
**   LVec mins4(C, p, ws)          lane c = the f16 min at p + c * ws
**   LVec lanes_zero(), lanes_step(kind, acc, dw, mw, &a, s), lanes_store(v, acc)
** and TILE_ACT, TILE_W (= 4), TILE_ISA; it gets tile_rc and dot_tile.h's
** entry points, compiled with its own ISA flags.
*/
#ifndef CPU_DOT_Q32_SIMD_H
#define CPU_DOT_Q32_SIMD_H

#include "cpu_internal.h"

ALWAYS_INLINE void tile_rc(const int kind, const int R, const int C, int64_t nb, const unsigned char *w,
                           size_t ws, const unsigned char *a, size_t as, float *out, size_t os)
{
    const int wb = block_bytes[kind], ab = has_min(kind) ? CPU_Q8_1_BYTES : CPU_Q8_0_BYTES;
    LVec acc[TILE_ACT];
    for (int r = 0; r < R; r++) acc[r] = lanes_zero();
    for (int64_t b = 0; b < nb; b++) {
        ABlock av[TILE_ACT];
        IVec p[TILE_ACT][4];
        for (int r = 0; r < R; r++) av[r] = load_a(kind, a + r * as + b * ab);
        for (int c = 0; c < 4; c++) {
            if (c >= C) {
                for (int r = 0; r < R; r++) p[r][c] = ivec_zero();
                continue;
            }
            WBlock wv = load_w(kind, w + c * ws + b * wb);
            for (int r = 0; r < R; r++) p[r][c] = pair_int(kind, &wv, &av[r]);
        }
        LVec dw = scales4(kind, C, w + b * wb, ws);
        LVec mw = has_min(kind) ? mins4(C, w + b * wb + 2, ws) : lanes_zero();
        for (int r = 0; r < R; r++)
            acc[r] = lanes_step(kind, acc[r], dw, mw, &av[r], sums4(p[r][0], p[r][1], p[r][2], p[r][3]));
    }
    for (int r = 0; r < R; r++) {
        float v[4];
        lanes_store(v, acc[r]);
        for (int c = 0; c < C; c++) out[r * os + c] = v[c];
    }
}

#include "dot_tile.h"

#endif /* CPU_DOT_Q32_SIMD_H */
