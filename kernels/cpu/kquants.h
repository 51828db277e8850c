/*
** kquants.h: what the k-quant dot products share: the byte layouts of the
** five weight super-blocks and of their activation partner Q8_K, and the
** unpacking of the packed sub-block scales.
**
** Every k-quant weight is multiplied by an activation row quantized to Q8_K
** (act_q8k.c), as llama.cpp's CPU backend does: 256 int8 values with one
** f32 scale and the sums of each 16 values (bsums), which let a kernel fold
** a weight block's offsets (dmin * m) or code bias (q6_k's -32, q3_k's -4)
** into one small product instead of a term per element.  Within a block the
** products are exact integers; only the final scaling by d_w * d_a rounds.
**
** The meaning of the weight bytes is kernels/ops/dequant_kquants.c's; the
** comments there give each element's position.  Internal to the cpu library.
*/
#ifndef CPU_KQUANTS_H
#define CPU_KQUANTS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../base/rad_half.h"

#define KQ_N 256 /* elements per super-block */

/* Block sizes and field offsets, in bytes (shared reference formats.md 1.6). */
/* clang-format off */
enum {
    Q2K_BYTES = 84, Q2K_SCALES = 0, Q2K_QS = 16, Q2K_D = 80, Q2K_DMIN = 82,
    Q3K_BYTES = 110, Q3K_HMASK = 0, Q3K_QS = 32, Q3K_SCALES = 96, Q3K_D = 108,
    Q4K_BYTES = 144, Q4K_D = 0, Q4K_DMIN = 2, Q4K_SCALES = 4, Q4K_QS = 16,
    Q5K_BYTES = 176, Q5K_D = 0, Q5K_DMIN = 2, Q5K_SCALES = 4, Q5K_QH = 16, Q5K_QS = 48,
    Q6K_BYTES = 210, Q6K_QL = 0, Q6K_QH = 128, Q6K_SCALES = 192, Q6K_D = 208,
    /* Q8_K: f32 d; int8 qs[256]; int16 bsums[16] (bsums[g] = sum of qs[16g .. 16g+15]) */
    Q8K_BYTES = 292, Q8K_D = 0, Q8K_QS = 4, Q8K_BSUMS = 260
};
/* clang-format on */

#pragma GCC visibility push(hidden)

/* The activation quantizers (act_q8k.c, act_q8k_avx2.c): one f32 row of K
** (a multiple of 256) to K / 256 Q8_K blocks.  Both write the same bytes. */
void cpu_quantize_row_q8k(const float *x, void *dst, int64_t K);
#if defined(__x86_64__)
void cpu_quantize_row_q8k_avx2(const float *x, void *dst, int64_t K);
#endif

#pragma GCC visibility pop

/* The canonical step every k-quant product takes per super-block, on every
** path (portable, AVX2, AVX-512, NEON; stored and x8 layouts): with d =
** d_w * d_a and dmin = dmin_w * d_a, both f32 products,
**   acc = fma(d, float(isum), acc);  acc = fma(-dmin, float(msum), acc)
** the second only for the encodings with offsets (q2_k, q4_k, q5_k).
** docs/OPS.md ("Batch and placement invariance") says why one order. */
static inline float kq_step(float acc, float d, int32_t isum)
{
    return fmaf(d, (float)isum, acc);
}

static inline float kq_step_min(float acc, float d, int32_t isum, float dmin, int32_t msum)
{
    return fmaf(-dmin, (float)msum, fmaf(d, (float)isum, acc));
}

static inline float kq_half(const uint8_t *p)
{
    return rad_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static inline float kq_f32(const uint8_t *p)
{
    float f;
    memcpy(&f, p, 4);
    return f;
}

static inline int kq_bsum(const uint8_t *act_block, int g)
{
    int16_t s;
    memcpy(&s, act_block + Q8K_BSUMS + 2 * g, 2);
    return s;
}

/* q4_k / q5_k: the 8 six-bit scales and 8 six-bit offsets packed in 12
** bytes, unpacked to sc_m[0..7] = scales and sc_m[8..15] = offsets, so a
** SIMD kernel can widen all sixteen with one instruction.  For sub-block
** s < 4 both are the low 6 bits of bytes s and s + 4; for s >= 4 the low 4
** bits come from byte s + 4 (scale: low nibble, offset: high nibble) and
** the high 2 bits from the top of bytes s - 4 (scale) and s (offset).
** Done four bytes at a time in 32-bit words (little-endian hosts). */
static inline void kq_unpack_k4_scales(const uint8_t *s, uint8_t sc_m[16])
{
    uint32_t w[3], r[4];
    memcpy(w, s, 12);
    r[0] = w[0] & 0x3f3f3f3fu;                                             /* scales 0..3 */
    r[1] = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 6) & 0x03030303u) << 4;        /* scales 4..7 */
    r[2] = w[1] & 0x3f3f3f3fu;                                             /* offsets 0..3 */
    r[3] = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 6) & 0x03030303u) << 4; /* offsets 4..7 */
    memcpy(sc_m, r, 16);
}

/* q3_k: the 16 six-bit scales packed in 12 bytes, unpacked and unbiased
** (stored as scale + 32) to sc[0..15] in -32..31.  Group g's low 4 bits are
** the low nibble of byte g (g < 8) or the high nibble of byte g - 8; its
** high 2 bits are bits 2(g/4), 2(g/4)+1 of byte 8 + g % 4. */
static inline void kq_unpack_q3_scales(const uint8_t *s, int8_t sc[16])
{
    for (int g = 0; g < 16; g++) {
        int lo = g < 8 ? s[g] & 0x0f : s[g - 8] >> 4;
        int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
        sc[g] = (int8_t)((lo | hi << 4) - 32);
    }
}

#endif /* CPU_KQUANTS_H */
