/*
** quantize.c: the converter's encoders: f32 <-> f16 <-> bf16 and f32 -> q8_0.
**
** Every conversion goes through f32, which holds f16 and bf16 values
** exactly, so a pair of encodings costs one widening loop and one narrowing
** loop, done a block at a time through a small stack buffer.  The rounding
** of the 16-bit formats is rad_half.h's; the q8_0 step is documented in
** quantize.h.
*/
#include "quantize.h"

#include "rad_half.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define Q8_0_BLOCK 32
#define Q8_0_BYTES 34   /* f16 scale + 32 int8 */

/* The number of elements converted per pass through the f32 buffer; a
** multiple of every output block size. */
#define CHUNK 256

/* Widen `n` elements of a float encoding into f32. */
static void widen(int enc, const void *src, float *dst, int64_t n)
{
    if (enc == RAD_ENC_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (enc == RAD_ENC_F16) {
        const uint8_t *p = src;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = rad_f16_to_f32(h);
        }
    } else {   /* RAD_ENC_BF16 */
        const uint8_t *p = src;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = rad_bf16_to_f32(h);
        }
    }
}

/* Narrow `n` f32 values into f32, f16 or bf16 bytes. */
static void narrow(const float *src, int enc, void *dst, int64_t n)
{
    uint8_t *p = dst;
    if (enc == RAD_ENC_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (enc == RAD_ENC_F16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = rad_f32_to_f16(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
    } else {   /* RAD_ENC_BF16 */
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = rad_f32_to_bf16(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
    }
}

/* One q8_0 code: x * (1/d) rounded half away from zero.  |x| <= amax keeps
** the product within 127 in exact arithmetic; the clamp covers the last
** ulp of rounding and a 1/d that overflowed for a subnormal d. */
static int8_t q8_code(float v)
{
    if (v != v) return 0;   /* 0 * inf, from x == 0 with a subnormal d */
    if (v > 127.0f) v = 127.0f;
    if (v < -127.0f) v = -127.0f;
    return (int8_t)roundf(v);
}

/* Quantize n (a multiple of 32) floats; `first` is the index of src[0] in
** the caller's row, for the message about a non-finite value. */
static int quantize_q8_0(const float *src, void *dst, int64_t n, int64_t first)
{
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / Q8_0_BLOCK; b++) {
        const float *x = src + b * Q8_0_BLOCK;
        float amax = 0.0f;
        for (int j = 0; j < Q8_0_BLOCK; j++) {
            if (!isfinite(x[j]))
                return rad_error_set(RAD_E_ARG, "q8_0: element %lld is %s: the weights are "
                                     "damaged", (long long)(first + b * Q8_0_BLOCK + j),
                                     isnan(x[j]) ? "NaN" : "infinite");
            float a = fabsf(x[j]);
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t dh = rad_f32_to_f16(d);
        if ((dh & 0x7fffu) == 0x7c00u)
            return rad_error_set(RAD_E_ARG, "q8_0: the block at element %lld reaches %g, past "
                                 "what an f16 scale can carry (about 8.3e6): keep this tensor "
                                 "in f32 or bf16", (long long)(first + b * Q8_0_BLOCK), (double)amax);
        uint8_t *blk = out + b * Q8_0_BYTES;
        memcpy(blk, &dh, 2);
        for (int j = 0; j < Q8_0_BLOCK; j++) {
            int8_t q = q8_code(x[j] * id);
            memcpy(blk + 2 + j, &q, 1);
        }
    }
    return 0;
}

int rad_quantize_row_q8_0(const float *src, void *dst, int64_t n)
{
    if (n < 0 || n % Q8_0_BLOCK)
        return rad_error_set(RAD_E_ARG, "q8_0: %lld elements are not a whole number of "
                             "32-element blocks", (long long)n);
    if (n > 0 && (!src || !dst)) return rad_error_set(RAD_E_ARG, "q8_0: NULL buffer");
    return quantize_q8_0(src, dst, n, 0);
}

static int is_float_encoding(int enc)
{
    return enc == RAD_ENC_F32 || enc == RAD_ENC_F16 || enc == RAD_ENC_BF16;
}

static const char *enc_name(int enc)
{
    const RadEncodingInfo *e = rad_encoding_info(enc);
    return e ? e->name : "unknown";
}

int rad_convert_row(int enc_in, const void *src, int enc_out, void *dst, int64_t n)
{
    if (!is_float_encoding(enc_in) || !(is_float_encoding(enc_out) || enc_out == RAD_ENC_Q8_0))
        return rad_error_set(RAD_E_UNSUPPORTED, "convert: %s (%d) to %s (%d) is not a conversion "
                             "radiance makes; it converts f32, f16 and bf16 to f32, f16, bf16 "
                             "or q8_0", enc_name(enc_in), enc_in, enc_name(enc_out), enc_out);
    if (rad_encoding_row_bytes(enc_out, n) < 0)
        return rad_error_set(RAD_E_ARG, "convert: %lld elements are not a whole number of %s "
                             "blocks", (long long)n, enc_name(enc_out));
    if (n > 0 && (!src || !dst)) return rad_error_set(RAD_E_ARG, "convert: NULL buffer");
    if (enc_in == enc_out) {
        memcpy(dst, src, (size_t)rad_encoding_row_bytes(enc_in, n));
        return 0;
    }
    if (enc_in == RAD_ENC_F32 && enc_out == RAD_ENC_Q8_0) return rad_quantize_row_q8_0(src, dst, n);

    const int in_bytes = rad_encoding_info(enc_in)->block_bytes;   /* block_elems is 1 */
    float buf[CHUNK];
    for (int64_t at = 0; at < n; at += CHUNK) {
        int64_t len = n - at < CHUNK ? n - at : CHUNK;   /* a multiple of 32 for q8_0 */
        widen(enc_in, (const uint8_t *)src + at * in_bytes, buf, len);
        if (enc_out == RAD_ENC_Q8_0) {
            int rc = quantize_q8_0(buf, (uint8_t *)dst + at / Q8_0_BLOCK * Q8_0_BYTES, len, at);
            if (rc) return rc;
        } else {
            narrow(buf, enc_out, (uint8_t *)dst + at * rad_encoding_info(enc_out)->block_bytes, len);
        }
    }
    return 0;
}
