/*
** dequant.c: what the bytes of each weight encoding mean, as f32.
**
** The layouts are GGUF's (docs: shared reference formats.md 1.6), so a row
** imported from a GGUF file decodes here to the values llama.cpp sees.
** Bytes are read one at a time and assembled little-endian, which keeps the
** code free of alignment and host byte-order assumptions.
**
** Every decoding is exact.  f16 and bf16 widen to f32 without rounding; a
** q8_0 element is d * q with d an f16 (11 significant bits) and q an int8
** (8 bits), whose product needs at most 19 bits and so is exact in f32.
** That is why tests may compare decoded weights with ==.
*/
#include "rad_dequant.h"

#include <string.h>

#include "../../base/rad_half.h"

#define Q8_0_BLOCK 32           /* elements per q8_0 block */
#define Q8_0_BYTES 34           /* d:f16, then 32 int8 quants */

static uint16_t read_u16le(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

int rad_dequant_supported(int enc)
{
    return enc == RAD_ENC_F32 || enc == RAD_ENC_F16 || enc == RAD_ENC_BF16 ||
           enc == RAD_ENC_Q8_0;
}

int rad_dequant_row(int enc, const void *src, float *dst, int64_t n)
{
    const unsigned char *p = src;

    if (n < 0) return RAD_E_ARG;
    switch (enc) {
    case RAD_ENC_F32:
        /* memcpy rather than a cast: the row may be unaligned in a file. */
        memcpy(dst, p, (size_t)n * sizeof(float));
        return RAD_OK;

    case RAD_ENC_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = rad_f16_to_f32(read_u16le(p + 2 * i));
        return RAD_OK;

    case RAD_ENC_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = rad_bf16_to_f32(read_u16le(p + 2 * i));
        return RAD_OK;

    case RAD_ENC_Q8_0:
        if (n % Q8_0_BLOCK) return RAD_E_SHAPE;
        for (int64_t b = 0; b < n / Q8_0_BLOCK; b++) {
            const unsigned char *blk = p + b * Q8_0_BYTES;
            float d = rad_f16_to_f32(read_u16le(blk));
            for (int j = 0; j < Q8_0_BLOCK; j++) {
                int8_t q;
                memcpy(&q, blk + 2 + j, 1);
                dst[b * Q8_0_BLOCK + j] = d * (float)q;
            }
        }
        return RAD_OK;
    }
    return RAD_E_UNSUPPORTED;
}
