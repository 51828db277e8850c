/*
** dot_float_avx512.c: f32, f16 and bf16 weights against f32, f16 and bf16
** activation rows with AVX-512F (and AVX512_BF16's vdpbf16ps where CPUID
** reports it).  Structure: dot_float_avx2.c, on 16-lane registers; the
** loop is dot_float_simd.h's.
**
** Each output has one 16-lane f32 accumulator; f32 and f16 take a step of
** 16 elements with one fused multiply-add (f16 widened exactly), bf16 with
** the BF16 extension a step of 32 with vdpbf16ps (each lane adds the two
** exact products of a pair of elements), otherwise as f16.  The tail past
** the last whole step is summed in order in f32; the lanes are added by
** one fixed reduction, then the tail.  `dot` and `tile` are one inline body
** (determinism rule); a 4 x 4 tile keeps 16 accumulators of the 32 zmm
** registers.
**
** Compiled and tested under the AVX-512 level of tests/ops/test_cpu.c on
** machines that have it.
*/
#if defined(__x86_64__)
#include <immintrin.h>

#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_ACT 4
#define TILE_W 4
#define TILE_ISA "avx512"

enum { F32, F16, BF16, BF16_DP };

typedef __m512 FloatVec;

ALWAYS_INLINE __m512 vec_zero(void) { return _mm512_setzero_ps(); }

ALWAYS_INLINE int step_of(const int type) { return type == BF16_DP ? 32 : 16; }
#define STEP(type) step_of(type)

/* One step's elements from k on: 16 widened to f32, or 32 bf16 as they are. */
ALWAYS_INLINE __m512 load_step(const int type, const unsigned char *p, int64_t k)
{
    switch (type) {
    case F32: return _mm512_loadu_ps((const void *)(p + 4 * k));
    case F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p + 2 * k)));
    case BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p + 2 * k))), 16));
    default: return _mm512_castsi512_ps(_mm512_loadu_si512((const void *)(p + 2 * k)));
    }
}

ALWAYS_INLINE __m512 step_fma(const int type, __m512 w, __m512 a, __m512 acc)
{
    if (type == BF16_DP) return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)a);
    return _mm512_fmadd_ps(w, a, acc);
}

ALWAYS_INLINE float hsum(__m512 v)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#include "dot_float_simd.h"

CPU_DOT_KIND(f32, F32)
CPU_DOT_KIND(f16, F16)
CPU_DOT_KIND(bf16, BF16)
CPU_DOT_KIND(bf16_dp, BF16_DP)

void cpu_fill_float_avx512(void)
{
    tile_set(RAD_ENC_F32, CPU_ACT_F32, dot_f32, tile_f32);
    tile_set(RAD_ENC_F16, CPU_ACT_F16, dot_f16, tile_f16);
    if (cpu_has_avx512_bf16) tile_set(RAD_ENC_BF16, CPU_ACT_BF16, dot_bf16_dp, tile_bf16_dp);
    else tile_set(RAD_ENC_BF16, CPU_ACT_BF16, dot_bf16, tile_bf16);
}
#endif
