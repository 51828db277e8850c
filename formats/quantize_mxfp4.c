/*
** quantize_mxfp4.c: f32 to mxfp4, GGUF's layout (docs/ENCODINGS.md).
**
** A block of 32 is one E8M0 scale byte e and 16 bytes of 4-bit E2M1 codes
** (byte j: element j low, element j + 16 high); it decodes as
** K[code] * 2^(e - 128) with K the doubled E2M1 values 0 1 2 3 4 6 8 12
** and their negatives.  The scale follows ggml's quantize_row_mxfp4_ref:
**   e = floor(log2(amax)) - 2 + 127 (0 for an all-zero block),
** which puts amax in [4, 8) * 2^(e - 127) / 2: K's top value 12 covers it
** at the scale d = 2^(e - 128); then each element takes the code whose
** value K[code] * d is nearest, the lower code on a tie (so +0, never -0,
** for a zero).  Same arithmetic as ggml, so the bytes are llama.cpp's for
** every block whose e lies in 1..254; ggml casts a negative or too large e
** to a byte, which C leaves undefined, where we clamp it (a block of
** magnitudes under 2^-125 or over 2^127).
*/
#include "quantize_internal.h"

#include <math.h>

static const float mxfp4_k[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e - 128) for e in 0..255, as dequant.c defines it (two subnormals). */
static float half_scale(int e)
{
    return ldexpf(1.0f, e - 128);
}

static int nearest_code(float x, float d)
{
    int best = 0;
    float best_err = fabsf(mxfp4_k[0] * d - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(mxfp4_k[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

int rad_qz_block_mxfp4(const float *x, uint8_t *out, int64_t first)
{
    (void)first;                    /* every finite block is representable */
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    int e = 0;
    if (amax > 0.0f) {
        float l = floorf(log2f(amax)) - 2 + 127;
        e = l < 0 ? 0 : l > 254 ? 254 : (int)l;
    }
    const float d = half_scale(e);
    out[0] = (uint8_t)e;
    for (int j = 0; j < 16; j++)
        out[1 + j] = (uint8_t)(nearest_code(x[j], d) | nearest_code(x[j + 16], d) << 4);
    return 0;
}
