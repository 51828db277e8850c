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
** The loop is dot_float_simd.h's; this file gives it 8-lane steps.  The
** tile is at most 4 activation rows x 3 weight rows: 12 accumulators
** and 3 weight registers of the 16 ymm registers, the activation loaded
** (and widened) once per step and used for 3 FMAs.
*/
#if defined(__x86_64__)
#include <immintrin.h>

#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_ACT 4
#define TILE_W 3
#define TILE_ISA "avx2"

enum { F32, F16, BF16 };

typedef __m256 FloatVec;

ALWAYS_INLINE __m256 vec_zero(void) { return _mm256_setzero_ps(); }
#define STEP(type) 8

/* Eight elements from k on, widened to f32. */
ALWAYS_INLINE __m256 load_step(const int type, const unsigned char *p, int64_t k)
{
    switch (type) {
    case F32: return _mm256_loadu_ps((const float *)(const void *)(p + 4 * k));
    case F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 2 * k)));
    default:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p + 2 * k))), 16));
    }
}

ALWAYS_INLINE __m256 step_fma(const int type, __m256 w, __m256 a, __m256 acc)
{
    (void)type;
    return _mm256_fmadd_ps(w, a, acc);
}

ALWAYS_INLINE float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#include "dot_float_simd.h"

CPU_DOT_KIND(f32, F32)
CPU_DOT_KIND(f16, F16)
CPU_DOT_KIND(bf16, BF16)

void cpu_fill_float_avx2(void)
{
    cpu_act_quant[CPU_ACT_F16] = cpu_act_f16_avx2;
    tile_set(RAD_ENC_F32, CPU_ACT_F32, dot_f32, tile_f32);
    tile_set(RAD_ENC_F16, CPU_ACT_F16, dot_f16, tile_f16);
    tile_set(RAD_ENC_BF16, CPU_ACT_BF16, dot_bf16, tile_bf16);
}
#endif
