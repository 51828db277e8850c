/*
** act_q8k.c: activation rows to Q8_K, the partner format of the k-quants.
**
** This is llama.cpp's quantize_row_q8_K as its x86 and ARM CPU builds run it
** (both call ggml's reference version), step for step, so that our k-quant
** products see the very int8 activations llama.cpp's do:
**
**   per block of 256:  max = the element of largest |x| (the first one when
**                      several tie), with its sign;
**                      iscale = -127 / max;
**                      q = min(127, round_half_even(iscale * x)), by adding
**                      1.5 * 2^23 and reading the low mantissa bits;
**                      bsums[g] = sum of q over elements 16g .. 16g + 15;
**                      d = 1 / iscale  (so x ~ d * q).
**
** An all-zero block gets d = 0 and q = 0; ggml leaves its bsums unwritten,
** we write zeros.  The negative iscale maps the extreme element to -127
** exactly, whatever its sign.  -std=c11 keeps the multiply and the add
** apart (no fma), as ggml's build does.  (llama.cpp's AVX2 build also has a
** 4-row quantizer for the q4_k weights it repacks; it writes these bytes
** too, except that when +max and -max tie it takes the positive one.)
*/
#include <math.h>

#include "cpu_internal.h"
#include "kquants.h"

/* ggml's rounding: the f32 sum v + 1.5 * 2^23 rounds v to an integer (ties
** to even) and holds it in its low mantissa bits, for |v| < 2^22. */
static int nearest_int(float v)
{
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

void cpu_quantize_row_q8k(const float *x, void *dst, int64_t K)
{
    uint8_t *out = dst;
    for (int64_t b = 0; b < K / KQ_N; b++, x += KQ_N, out += Q8K_BYTES) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < KQ_N; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        int8_t q[KQ_N];
        int16_t bsums[16];
        float d = 0.0f;
        if (amax == 0.0f) {
            memset(q, 0, sizeof q);
        } else {
            float iscale = -127.0f / max;
            for (int j = 0; j < KQ_N; j++) {
                int v = nearest_int(iscale * x[j]);
                q[j] = (int8_t)(v < 127 ? v : 127);
            }
            d = 1.0f / iscale;
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += q[16 * g + j];
            bsums[g] = (int16_t)s;
        }
        memcpy(out + Q8K_D, &d, 4);
        memcpy(out + Q8K_QS, q, KQ_N);
        memcpy(out + Q8K_BSUMS, bsums, sizeof bsums);
    }
}
