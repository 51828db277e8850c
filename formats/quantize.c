/*
** quantize.c: the converter's encoders: f32 <-> f16 <-> bf16, and f32 to
** GGUF's block encodings.
**
** Every conversion goes through f32, which holds f16 and bf16 values
** exactly, so a pair of encodings costs one widening loop and one narrowing
** or quantizing loop, done a chunk at a time through a small stack buffer.
** The rounding of the 16-bit formats is rad_half.h's.
**
** This file holds the dispatch, the checks every block encoding shares (no
** NaN or infinity; scales that fit an f16) and the 32-element quantizers
** with one scale per block: q8_0, q4_0, q4_1, q5_0, q5_1.  Those follow
** ggml's reference quantizers (quantize_row_*_ref, restated by gguf-py's
** gguf.quants) operation for operation, so their bytes are identical:
**
**   symmetric (q8_0, q4_0, q5_0), 2^b levels:
**     q8_0: d = amax / 127, code = round(x / d) (halves away from zero)
**     q4_0, q5_0: "max" is the element of largest magnitude (the first of
**       equals), d = max / -2^(b-1), so max itself gets the code 0 and the
**       other side one level less; code = trunc(x * (1/d) + 2^(b-1) + 0.5),
**       capped at 2^b - 1.  The + 0.5 and trunc round to nearest with halves
**       up, in the code's (unsigned) domain.
**   with offset (q4_1, q5_1): d = (max - min) / (2^b - 1), m = min,
**     code = trunc((x - min) * (1/d) + 0.5), capped at 2^b - 1.
**
** In all of them 1/d is taken in f32 once per block (0 when d is 0), codes
** come from the unrounded f32 d, and d (and m) are stored rounded to f16
** (nearest, ties to even).  Where ggml's cast of a NaN or infinity to an
** integer would be undefined (a block so small that 1/d overflows, which
** stores d = 0), the code is clamped instead.  We also part from ggml where
** it writes a block anyway: a NaN or infinite input, or a scale that
** overflows f16, is refused with a message naming the element.
**
** The k-quants and iq4_nl search for their scales (quantize_kquants.c);
** mxfp4 takes its power-of-two scale from the block's maximum
** (quantize_mxfp4.c).
*/
#include "quantize.h"

#include "quantize_internal.h"
#include "rad_half.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define QK 32 /* elements per block of the 32-element encodings */

/* The number of elements converted per pass through the f32 buffer; a
** multiple of every output block size (1, 32, 256). */
#define CHUNK 256

static const char *enc_name(int enc)
{
    const RadEncodingInfo *e = rad_encoding_info(enc);
    return e ? e->name : "unknown";
}

/* ------------------------------------------------------------- helpers */

float rad_qz_get_half(const uint8_t *p)
{
    return rad_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

int rad_qz_put_half(uint8_t *out, float f, const char *enc, const float *x, int n, int64_t first,
                    double limit)
{
    uint16_t h = rad_f32_to_f16(f);
    if ((h & 0x7fffu) >= 0x7c00u) {
        float amax = 0.0f;
        for (int j = 0; j < n; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        return rad_error_set(RAD_E_ARG,
                             "%s: the block at element %lld reaches %g, past what an "
                             "f16 scale can carry (about %.2g): keep this tensor in f32 or bf16",
                             enc, (long long)first, (double)amax, limit);
    }
    out[0] = (uint8_t)(h & 0xff);
    out[1] = (uint8_t)(h >> 8);
    return 0;
}

/* trunc(v) capped to [0, top], as ggml's MIN(top, (int8_t)v) for the v >= 0
** its quantizers produce; NaN (0 * inf) gives 0. */
static int trunc_code(float v, int top)
{
    if (!(v >= 0.0f)) return 0;
    if (v >= (float)top) return top;
    return (int)v;
}

/* The element of largest magnitude, the first of equals, with its sign. */
static float signed_max(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void min_max(const float *x, int n, float *min, float *max)
{
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

/* ------------------------------------------------- 32-element quantizers */

/* q8_0, 34 bytes: d (f16), then 32 int8 codes.  x = d * q. */
static int block_q8_0(const float *x, uint8_t *out, int64_t first)
{
    float amax = 0.0f;
    for (int j = 0; j < QK; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int rc = rad_qz_put_half(out, d, "q8_0", x, QK, first, 65504.0 * 127);
    if (rc) return rc;
    for (int j = 0; j < QK; j++) {
        /* |x| <= amax keeps the product within 127 in exact arithmetic;
        ** the clamp covers the last ulp and a 1/d that overflowed for a
        ** subnormal d (where x == 0 gives 0 * inf, a NaN: code 0). */
        float v = x[j] * id;
        int8_t c = (int8_t)(v != v ? 0 : rad_qz_round(v, -127, 127));
        memcpy(out + 2 + j, &c, 1);
    }
    return 0;
}

/* q4_0, 18 bytes: d (f16), 16 code bytes (byte j: element j in the low
** nibble, j + 16 in the high).  x = d * (q - 8). */
static int block_q4_0(const float *x, uint8_t *out, int64_t first)
{
    float d = signed_max(x, QK) / -8;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int rc = rad_qz_put_half(out, d, "q4_0", x, QK, first, 65504.0 * 8);
    if (rc) return rc;
    for (int j = 0; j < QK / 2; j++) {
        int q0 = trunc_code(x[j] * id + 8.5f, 15);
        int q1 = trunc_code(x[j + QK / 2] * id + 8.5f, 15);
        out[2 + j] = (uint8_t)(q0 | q1 << 4);
    }
    return 0;
}

/* q4_1, 20 bytes: d (f16), m (f16), 16 code bytes as q4_0.  x = d * q + m. */
static int block_q4_1(const float *x, uint8_t *out, int64_t first)
{
    float min, max;
    min_max(x, QK, &min, &max);
    float d = (max - min) / 15;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int rc = rad_qz_put_half(out, d, "q4_1", x, QK, first, 65504.0);
    if (!rc) rc = rad_qz_put_half(out + 2, min, "q4_1", x, QK, first, 65504.0);
    if (rc) return rc;
    for (int j = 0; j < QK / 2; j++) {
        int q0 = trunc_code((x[j] - min) * id + 0.5f, 15);
        int q1 = trunc_code((x[j + QK / 2] - min) * id + 0.5f, 15);
        out[4 + j] = (uint8_t)(q0 | q1 << 4);
    }
    return 0;
}

/* Store q5's codes: low nibbles as q4_0's, the fifth bits as a
** little-endian u32 at qh whose bit j belongs to element j. */
static void put_q5_codes(const int *q, uint8_t *qh, uint8_t *qs)
{
    uint32_t h = 0;
    for (int j = 0; j < QK; j++) h |= (uint32_t)(q[j] >> 4) << j;
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(h >> (8 * k));
    for (int j = 0; j < QK / 2; j++) qs[j] = (uint8_t)((q[j] & 15) | (q[j + QK / 2] & 15) << 4);
}

/* q5_0, 22 bytes: d (f16), qh (4 bytes), 16 code bytes.  x = d * (q - 16). */
static int block_q5_0(const float *x, uint8_t *out, int64_t first)
{
    float d = signed_max(x, QK) / -16;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[QK];
    int rc = rad_qz_put_half(out, d, "q5_0", x, QK, first, 65504.0 * 16);
    if (rc) return rc;
    for (int j = 0; j < QK; j++) q[j] = trunc_code(x[j] * id + 16.5f, 31);
    put_q5_codes(q, out + 2, out + 6);
    return 0;
}

/* q5_1, 24 bytes: d (f16), m (f16), qh (4 bytes), 16 code bytes.
** x = d * q + m. */
static int block_q5_1(const float *x, uint8_t *out, int64_t first)
{
    float min, max;
    min_max(x, QK, &min, &max);
    float d = (max - min) / 31;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[QK];
    int rc = rad_qz_put_half(out, d, "q5_1", x, QK, first, 65504.0);
    if (!rc) rc = rad_qz_put_half(out + 2, min, "q5_1", x, QK, first, 65504.0);
    if (rc) return rc;
    for (int j = 0; j < QK; j++) q[j] = trunc_code((x[j] - min) * id + 0.5f, 31);
    put_q5_codes(q, out + 4, out + 8);
    return 0;
}

/* -------------------------------------------------------------- dispatch */

/* The block quantizers; block sizes come from base/encoding.c. */
static const struct {
    int enc;
    RadBlockQuantizer fn;
} block_quantizers[] = {
    {RAD_ENC_Q8_0, block_q8_0},        {RAD_ENC_Q4_0, block_q4_0},
    {RAD_ENC_Q4_1, block_q4_1},        {RAD_ENC_Q5_0, block_q5_0},
    {RAD_ENC_Q5_1, block_q5_1},        {RAD_ENC_IQ4_NL, rad_qz_block_iq4_nl},
    {RAD_ENC_Q2_K, rad_qz_block_q2_k}, {RAD_ENC_Q3_K, rad_qz_block_q3_k},
    {RAD_ENC_Q4_K, rad_qz_block_q4_k}, {RAD_ENC_Q5_K, rad_qz_block_q5_k},
    {RAD_ENC_Q6_K, rad_qz_block_q6_k}, {RAD_ENC_MXFP4, rad_qz_block_mxfp4},
};

typedef struct Quantizer {
    int enc;
    int elems, bytes;
    RadBlockQuantizer fn;
} Quantizer;

/* Fill q with the quantizer for enc: 1, or 0 when there is none. */
static int find_quantizer(int enc, Quantizer *q)
{
    for (size_t i = 0; i < sizeof block_quantizers / sizeof block_quantizers[0]; i++)
        if (block_quantizers[i].enc == enc) {
            const RadEncodingInfo *info = rad_encoding_info(enc);
            *q = (Quantizer){enc, info->block_elems, info->block_bytes, block_quantizers[i].fn};
            return 1;
        }
    return 0;
}

/* Quantize n floats (whole blocks of q); `first` is the index of src[0] in
** the caller's row, for the messages. */
static int quantize_blocks(const Quantizer *q, const float *src, uint8_t *dst, int64_t n, int64_t first)
{
    const char *name = enc_name(q->enc);
    for (int64_t b = 0; b < n / q->elems; b++) {
        const float *x = src + b * q->elems;
        for (int j = 0; j < q->elems; j++)
            if (!isfinite(x[j]))
                return rad_error_set(RAD_E_ARG, "%s: element %lld is %s: the weights are damaged", name,
                                     (long long)(first + b * q->elems + j), isnan(x[j]) ? "NaN" : "infinite");
        int rc = q->fn(x, dst + b * q->bytes, first + b * q->elems);
        if (rc) return rc;
    }
    return 0;
}

int rad_quantize_supported(int enc)
{
    Quantizer q;
    return find_quantizer(enc, &q);
}

int rad_quantize_row(int enc, const float *src, void *dst, int64_t n)
{
    Quantizer qz, *q = find_quantizer(enc, &qz) ? &qz : NULL;
    if (!q)
        return rad_error_set(RAD_E_UNSUPPORTED, "quantize: radiance does not write %s (%d)", enc_name(enc),
                             enc);
    if (n < 0 || n % q->elems)
        return rad_error_set(RAD_E_ARG,
                             "%s: %lld elements are not a whole number of "
                             "%d-element blocks",
                             enc_name(enc), (long long)n, q->elems);
    if (n > 0 && (!src || !dst)) return rad_error_set(RAD_E_ARG, "%s: NULL buffer", enc_name(enc));
    return quantize_blocks(q, src, dst, n, 0);
}

int rad_quantize_row_q8_0(const float *src, void *dst, int64_t n)
{
    return rad_quantize_row(RAD_ENC_Q8_0, src, dst, n);
}

/* ------------------------------------------------------ float formats */

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
    } else { /* RAD_ENC_BF16 */
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
    } else { /* RAD_ENC_BF16 */
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = rad_f32_to_bf16(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
    }
}

static int is_float_encoding(int enc)
{
    return enc == RAD_ENC_F32 || enc == RAD_ENC_F16 || enc == RAD_ENC_BF16;
}

int rad_convert_row(int enc_in, const void *src, int enc_out, void *dst, int64_t n)
{
    Quantizer qz, *q = find_quantizer(enc_out, &qz) ? &qz : NULL;
    if (!is_float_encoding(enc_in) || !(is_float_encoding(enc_out) || q))
        return rad_error_set(RAD_E_UNSUPPORTED,
                             "convert: %s (%d) to %s (%d) is not a conversion "
                             "radiance makes; it converts f32, f16 and bf16 to f32, f16, bf16, "
                             "q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, "
                             "q6_k or mxfp4",
                             enc_name(enc_in), enc_in, enc_name(enc_out), enc_out);
    if (rad_encoding_row_bytes(enc_out, n) < 0)
        return rad_error_set(RAD_E_ARG,
                             "convert: %lld elements are not a whole number of %s "
                             "blocks",
                             (long long)n, enc_name(enc_out));
    if (n > 0 && (!src || !dst)) return rad_error_set(RAD_E_ARG, "convert: NULL buffer");
    if (enc_in == enc_out) {
        memcpy(dst, src, (size_t)rad_encoding_row_bytes(enc_in, n));
        return 0;
    }
    if (enc_in == RAD_ENC_F32 && q) return quantize_blocks(q, src, dst, n, 0);

    const int in_bytes = rad_encoding_info(enc_in)->block_bytes; /* block_elems is 1 */
    float buf[CHUNK];
    for (int64_t at = 0; at < n; at += CHUNK) {
        int64_t len = n - at < CHUNK ? n - at : CHUNK; /* whole blocks: CHUNK is a multiple */
        widen(enc_in, (const uint8_t *)src + at * in_bytes, buf, len);
        if (q) {
            int rc = quantize_blocks(q, buf, (uint8_t *)dst + at / q->elems * q->bytes, len, at);
            if (rc) return rc;
        } else {
            narrow(buf, enc_out, (uint8_t *)dst + at * rad_encoding_info(enc_out)->block_bytes, len);
        }
    }
    return 0;
}
