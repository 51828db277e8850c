/*
** act_q8.c: converting an f32 activation row into the format its weight
** pairs with (portable C; act_q8_avx2.c and act_q8_neon.c are the SIMD
** versions, which write the same bytes).
**
**   Q8_0  per block of 32: f16 d, int8 q[32]              (q8_0 q4_0 q5_0 iq4_nl mxfp4)
**   Q8_1  per block of 32: f16 d, f16 s, int8 q[32]       (q4_1 q5_1)
**   F16, BF16, F32: the row rounded to the weight's float type (f16, bf16, f32)
**
** Why mirror llama.cpp byte for byte.  llama.cpp's CPU backend quantizes
** every activation row to its weight's "vec_dot_type" before the product,
** and that rounding (about 0.4% per element for int8) is most of the
** difference between its outputs and an exact f32 product.  If we rounded
** differently, or not at all, our logits would differ from llama.cpp's by
** that much (KL 2-4e-3 on the test models with exact f32 activations); with
** the same bytes what remains is the order of f32 sums, and the two agree
** far more closely.  The bytes matched are those of ggml's x86 AVX2
** quantize_row_q8_0 / q8_1 (the path llama.cpp runs on the machines we
** compare with), which differ from ggml's scalar reference in one place:
**
**   amax = max |x| over the block (exact)
**   d    = amax / 127                          f32 division, stored as f16
**   id   = amax != 0 ? 127 / amax : 0          (not 1 / d: that rounds twice)
**   q    = round-half-to-even(x * id)          the SIMD rounding mode, as an int8
**   s    = d * sum(q)                          Q8_1 only: the f32 d, stored as f16
**
** f16 and bf16 stores round to nearest, ties to even (rad_half.h), as
** F16C's vcvtps2ph and ggml's bf16 conversion do.  These functions are the
** definition; each SIMD version must agree with them on every finite input
** (tests/ops/test_cpu.c checks).  Non-finite inputs give undefined codes
** (ggml's do too); the product is then garbage, as it would be anyway.
*/
#include <math.h>
#include <string.h>

#include "../../base/rad_half.h"
#include "cpu_internal.h"

#define QK 32

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v & 0xff);
    p[1] = (unsigned char)(v >> 8);
}

/* x * id as an int8 code, as the SIMD versions make it: rounded to nearest,
** ties to even (adding and subtracting 1.5 * 2^23 leaves the integer the
** f32 adder rounded to, in the default rounding mode), then saturated as
** the int32 -> int8 packs do.  A NaN (non-finite input only) becomes
** -128, as x86's conversion of NaN to the integer 0x80000000 then packs. */
static int code(float v)
{
    if (v != v) return -128;
    if (v >= 127.0f) return 127;
    if (v <= -128.0f) return -128;
    float r = (v + 12582912.0f) - 12582912.0f;
    return (int)r;
}

/* One block of 32: writes d (and s when `s_at` is not NULL) and the codes. */
static void q8_block(const float *x, unsigned char *d_at, unsigned char *s_at, unsigned char *qs)
{
    float amax = 0.0f;
    for (int j = 0; j < QK; j++) {
        float a = fabsf(x[j]);
        if (a > amax) amax = a;
    }
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK; j++) {
        int q = code(x[j] * id);
        qs[j] = (unsigned char)(int8_t)q;
        sum += q;
    }
    put_u16(d_at, rad_f32_to_f16(d));
    if (s_at) put_u16(s_at, rad_f32_to_f16(d * (float)sum));
}

void cpu_act_q8_0_portable(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    for (int64_t b = 0; b < K / QK; b++, x += QK, y += CPU_Q8_0_BYTES) q8_block(x, y, NULL, y + 2);
}

void cpu_act_q8_1_portable(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    for (int64_t b = 0; b < K / QK; b++, x += QK, y += CPU_Q8_1_BYTES) q8_block(x, y, y + 2, y + 4);
}

void cpu_act_f32_portable(const float *x, void *dst, int64_t K)
{
    memcpy(dst, x, (size_t)K * sizeof(float));
}

void cpu_act_f16_portable(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    for (int64_t k = 0; k < K; k++) put_u16(y + 2 * k, rad_f32_to_f16(x[k]));
}

void cpu_act_bf16_portable(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    for (int64_t k = 0; k < K; k++) put_u16(y + 2 * k, rad_f32_to_bf16(x[k]));
}
