/*
** dot_float_avx512.c: f32, f16 and bf16 weights against f32, f16 and bf16
** activation rows with AVX-512F (and AVX512_BF16's vdpbf16ps where CPUID
** reports it).  Structure: dot_float_avx2.c, on 16-lane registers.
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
#include <string.h>

#include "../../base/rad_half.h"
#include "cpu_internal.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TILE_ACT 4
#define TILE_W 4

enum { F32, F16, BF16, BF16_DP };

ALWAYS_INLINE int step_of(const int type) { return type == BF16_DP ? 32 : 16; }

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

ALWAYS_INLINE float hsum(__m512 v)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

ALWAYS_INLINE void tile_rc(const int type, const int R, const int C, int64_t K, const unsigned char *w,
                           size_t ws, const unsigned char *a, size_t as, float *out, size_t os)
{
    const int step = step_of(type);
    __m512 acc[TILE_ACT][TILE_W];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + step <= K; k += step) {
        __m512 wv[TILE_W];
        for (int c = 0; c < C; c++) wv[c] = load_step(type, w + c * ws, k);
        for (int r = 0; r < R; r++) {
            __m512 av = load_step(type, a + r * as, k);
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
FAMILY(bf16_dp, BF16_DP)

static void set(int enc, int act, CpuDotFn dot, CpuDotTileFn tile)
{
    cpu_enc[enc] = (CpuEncKernels){.act_fmt = act, .dot = dot, .tile = tile, .tile_act = TILE_ACT,
                                   .tile_w = TILE_W, .isa = "avx512"};
}

void cpu_fill_float_avx512(void)
{
    set(RAD_ENC_F32, CPU_ACT_F32, dot_f32, tile_f32);
    set(RAD_ENC_F16, CPU_ACT_F16, dot_f16, tile_f16);
    if (cpu_has_avx512_bf16) set(RAD_ENC_BF16, CPU_ACT_BF16, dot_bf16_dp, tile_bf16_dp);
    else set(RAD_ENC_BF16, CPU_ACT_BF16, dot_bf16, tile_bf16);
}
#endif
