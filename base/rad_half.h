/*
** rad_half.h: conversions between f32 and the two 16-bit floats we store,
** IEEE half (f16) and bfloat16 (bf16).
**
** Header-only so that kernel libraries, which are separate .so files, get the
** same conversions as the core without linking against it.  Rounding is
** round-to-nearest-even in both directions that round (f32 -> f16, f32 ->
** bf16), as ggml and PyTorch do; NaN stays NaN (quiet), infinities stay
** infinite, and f16 subnormals are produced and read exactly.
*/
#ifndef RAD_HALF_H
#define RAD_HALF_H

#include <stdint.h>
#include <string.h>

static inline float rad_bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t rad_f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* bf16 is the top half of an f32: widening is a shift. */
static inline float rad_bf16_to_f32(uint16_t h) { return rad_bits_to_f32((uint32_t)h << 16); }

static inline uint16_t rad_f32_to_bf16(float f)
{
    uint32_t u = rad_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)          /* NaN: keep it a quiet NaN */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);               /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static inline float rad_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f)                                /* inf or NaN */
        return rad_bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return rad_bits_to_f32(sign);
        /* subnormal: value is man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return rad_bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t rad_f32_to_f16(float f)
{
    uint32_t u = rad_f32_to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;     /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u;    /* rounds past 65504: inf */
    if (a < 0x38800000u) {                          /* below the smallest normal */
        if (a < 0x33000000u) return sign;           /* under half the smallest subnormal */
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;                   /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    a += 0xfffu + ((a >> 13) & 1u);                 /* round mantissa to 10 bits */
    return sign | (uint16_t)((a - 0x38000000u) >> 13);
}

#endif /* RAD_HALF_H */
