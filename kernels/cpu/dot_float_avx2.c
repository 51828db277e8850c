/*
** dot_float_avx2.c: f32, f16 and bf16 weights against f32, f16 and bf16
** activation rows with AVX2, FMA and F16C.
**
** Each output has one 8-lane f32 accumulator: element k of a step of 8
** goes to lane k % 8 with a fused multiply-add, the tail past the last
** multiple of 8 is summed in order in f32, and the lanes are added by one
** fixed reduction, then the tail.  `dot` and `tile` are the same inline
** body instantiated for 1 x 1 and for R x C outputs, so every output sees
** the same operations in the same order whichever computed it (the
** determinism rule of cpu_internal.h).  One accumulator per output is
** latency-bound for a lone dot, so the driver calls the tile even for one
** activation row: C weight rows give C independent chains.
**
** The tile is at most 4 activation rows x 3 weight rows: 12 accumulators
** and 3 weight registers of the 16 ymm registers, the activation loaded
** (and widened) once per step and used for 3 FMAs.
*/
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "../../base/rad_half.h"
#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_ACT 4
#define TILE_W 3

enum { F32, F16, BF16 };

/* Eight elements from k on, widened to f32. */
ALWAYS_INLINE __m256 load8(const int type, const unsigned char *p, int64_t k)
{
    switch (type) {
    case F32: return _mm256_loadu_ps((const float *)(const void *)(p + 4 * k));
    case F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 2 * k)));
    default:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p + 2 * k))), 16));
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

ALWAYS_INLINE float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* out[r * os + c] = dot(activation row r, weight row c) for r < R, c < C. */
ALWAYS_INLINE void tile_rc(const int type, const int R, const int C, int64_t K, const unsigned char *w,
                           size_t ws, const unsigned char *a, size_t as, float *out, size_t os)
{
    __m256 acc[TILE_ACT][TILE_W];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 wv[TILE_W];
        for (int c = 0; c < C; c++) wv[c] = load8(type, w + c * ws, k);
        for (int r = 0; r < R; r++) {
            __m256 av = load8(type, a + r * as, k);
            for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(wv[c], av, acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            float tail = 0.0f;
            for (int64_t t = k; t < K; t++) tail += load1(type, w + c * ws, t) * load1(type, a + r * as, t);
            out[r * os + c] = hsum(acc[r][c]) + tail;
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
    case 021: RC(2, 1); break;
    case 022: RC(2, 2); break;
    case 023: RC(2, 3); break;
    case 031: RC(3, 1); break;
    case 032: RC(3, 2); break;
    case 033: RC(3, 3); break;
    case 041: RC(4, 1); break;
    case 042: RC(4, 2); break;
    case 043: RC(4, 3); break;
    default: break;         /* the driver never asks for more than TILE_ACT x TILE_W */
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
                                   .tile_w = TILE_W, .isa = "avx2"};
}

void cpu_fill_float_avx2(void)
{
    cpu_act_quant[CPU_ACT_F16] = cpu_act_f16_avx2;
    set(RAD_ENC_F32, CPU_ACT_F32, dot_f32, tile_f32);
    set(RAD_ENC_F16, CPU_ACT_F16, dot_f16, tile_f16);
    set(RAD_ENC_BF16, CPU_ACT_BF16, dot_bf16, tile_bf16);
}
#endif
