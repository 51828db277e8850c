/*
** dot_tile.h: what every SIMD dot file shares around its tile body.
**
** A SIMD dot file (dot_float_*.c, dot_q32_*.c) writes one inline body,
**   tile_rc(kind, R, C, n, w, ws, a, as, out, os)
** out[r * os + c] = dot(activation row r, weight row c) for r < R, c < C,
** with R and C compile-time constants.  `dot` is that body at 1 x 1 and
** `tile` the same body at R x C, so every output gets the same operations in
** the same order whichever computed it (the determinism rule of
** cpu_internal.h).  This header turns the body into the two entry points:
**
**   tile_any          the runtime (n_act, n_w) to a constant (R, C): every
**                     R <= TILE_ACT, C <= TILE_W (a file with another split
**                     defines its own and TILE_OWN_ANY)
**   CPU_DOT_KIND(name, kind)   dot_name and tile_name for one encoding
**   tile_set          one cpu_enc[] entry, tagged TILE_ISA
**
** n is K elements, or K / TILE_BLOCK blocks where the file defines
** TILE_BLOCK.  It is included by the ISA file after it has defined
** TILE_ACT, TILE_W, TILE_ISA and tile_rc, so the code it expands to is compiled with that
** file's ISA flags (Makefile) and inlined into its kernels.
*/
#ifndef CPU_DOT_TILE_H
#define CPU_DOT_TILE_H

#include "cpu_internal.h"

#if !defined(TILE_ACT) || !defined(TILE_W) || !defined(TILE_ISA)
#error "dot_tile.h: define TILE_ACT, TILE_W, TILE_ISA and tile_rc first"
#endif

/* What tile_rc counts: elements, or blocks of TILE_BLOCK where defined. */
#ifdef TILE_BLOCK
#define TILE_LEN(K) ((K) / TILE_BLOCK)
#else
#define TILE_LEN(K) (K)
#endif

#ifndef TILE_OWN_ANY
/* The cases of activation row count R, one per weight row count C <= TILE_W. */
#if TILE_W >= 4
#define TILE_ROW(R) case R * 8 + 1: RC(R, 1); break; case R * 8 + 2: RC(R, 2); break; \
                    case R * 8 + 3: RC(R, 3); break; case R * 8 + 4: RC(R, 4); break;
#else
#define TILE_ROW(R) case R * 8 + 1: RC(R, 1); break; case R * 8 + 2: RC(R, 2); break; \
                    case R * 8 + 3: RC(R, 3); break;
#endif

ALWAYS_INLINE void tile_any(const int kind, int64_t K, const unsigned char *w, size_t ws, int n_w,
                            const unsigned char *a, size_t as, int n_act, float *out, size_t os)
{
#ifdef TILE_BLOCK
    const int64_t nb = K / TILE_BLOCK;
#define RC(R, C) tile_rc(kind, R, C, nb, w, ws, a, as, out, os)
#else
#define RC(R, C) tile_rc(kind, R, C, K, w, ws, a, as, out, os)
#endif
    switch (n_act * 8 + n_w) {
    TILE_ROW(1)
    TILE_ROW(2)
    TILE_ROW(3)
    TILE_ROW(4)
    default: break;         /* the driver never asks for more than TILE_ACT x TILE_W */
    }
#undef RC
}
#undef TILE_ROW
#endif

#define CPU_DOT_KIND(name, kind)                                                               \
    static void dot_##name(int64_t K, const void *w, const void *a, float *out)                \
    {                                                                                          \
        tile_rc(kind, 1, 1, TILE_LEN(K), w, 0, a, 0, out, 0);                                  \
    }                                                                                          \
    static void tile_##name(int64_t K, const void *w, size_t ws, int n_w, const void *a, size_t as, \
                            int n_act, float *out, size_t os)                                  \
    {                                                                                          \
        tile_any(kind, K, w, ws, n_w, a, as, n_act, out, os);                                  \
    }

static inline void tile_set(int enc, int act, CpuDotFn dot, CpuDotTileFn tile)
{
    cpu_enc[enc] = (CpuEncKernels){.act_fmt = act, .dot = dot, .tile = tile, .tile_act = TILE_ACT,
                                   .tile_w = TILE_W, .isa = TILE_ISA};
}

#endif /* CPU_DOT_TILE_H */
