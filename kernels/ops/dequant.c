/*
** dequant.c: what the bytes of each weight encoding mean, as f32.
**
** The layouts are GGUF's (docs: shared reference formats.md 1.6), so a row
** imported from a GGUF file decodes here to the values llama.cpp sees.
** Bytes are read one at a time and assembled little-endian, which keeps the
** code free of alignment and host byte-order assumptions.
**
** This file holds the plain encodings and the 32-element block families
** (q4_0 .. q8_0, iq4_nl, mxfp4); the 256-element k-quants live in
** dequant_kquants.c.  Each block decoder writes its block's elements in
** row order, one loop per field, with the layout spelled out above it.
**
** Decoded values are the same f32 that ggml's dequantize_row_* functions
** produce (and gguf-py's numpy dequantizers), bit for bit.  Most are exact
** products (an f16 scale has 11 significant bits, a code at most 8, so
** d * q needs at most 19); where a value is a sum that rounds (q4_1's
** d * q + m, the k-quants' d * q - m) the terms are formed in ggml's order,
** one f32 operation at a time.  -std=c11 keeps gcc from fusing a multiply
** and an add into an fma, which would round differently.
*/
#include "rad_dequant.h"

#include <string.h>

#include "../../base/rad_half.h"
#include "dequant_kquants.h"

#define QK 32 /* elements per block of the 32-element families */

static uint16_t read_u16le(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t read_u32le(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

float rad_dq_half(const unsigned char *p)
{
    return rad_f16_to_f32(read_u16le(p));
}

/* The 4-bit codes of a 32-element block, "nibble order": byte j of the 16
** code bytes holds element j in its low nibble and element j + 16 in its
** high nibble. */
static void nibbles(const unsigned char *qs, int *q)
{
    for (int j = 0; j < QK / 2; j++) {
        q[j] = qs[j] & 0x0f;
        q[j + QK / 2] = qs[j] >> 4;
    }
}

/* q4_0, 18 bytes: d (f16), then 16 code bytes in nibble order.
** x = d * (q - 8), q in 0..15. */
static void block_q4_0(const unsigned char *b, float *y)
{
    float d = rad_dq_half(b);
    int q[QK];
    nibbles(b + 2, q);
    for (int j = 0; j < QK; j++) y[j] = d * (float)(q[j] - 8);
}

/* q4_1, 20 bytes: d (f16), m (f16), then 16 code bytes in nibble order.
** x = d * q + m, q in 0..15 (the product first, then the add). */
static void block_q4_1(const unsigned char *b, float *y)
{
    float d = rad_dq_half(b), m = rad_dq_half(b + 2);
    int q[QK];
    nibbles(b + 4, q);
    for (int j = 0; j < QK; j++) {
        float t = d * (float)q[j];
        y[j] = t + m;
    }
}

/* The fifth bits of q5_0 / q5_1: a little-endian u32 whose bit j is the
** high bit of element j (so bits 16..31 belong to the high nibbles). */
static void fifth_bits(const unsigned char *qh, int *q)
{
    uint32_t h = read_u32le(qh);
    for (int j = 0; j < QK; j++) q[j] |= (int)((h >> j) & 1u) << 4;
}

/* q5_0, 22 bytes: d (f16), qh (4 bytes, the fifth bits), then 16 code
** bytes in nibble order.  x = d * (q - 16), q in 0..31. */
static void block_q5_0(const unsigned char *b, float *y)
{
    float d = rad_dq_half(b);
    int q[QK];
    nibbles(b + 6, q);
    fifth_bits(b + 2, q);
    for (int j = 0; j < QK; j++) y[j] = d * (float)(q[j] - 16);
}

/* q5_1, 24 bytes: d (f16), m (f16), qh (4 bytes), then 16 code bytes in
** nibble order.  x = d * q + m, q in 0..31. */
static void block_q5_1(const unsigned char *b, float *y)
{
    float d = rad_dq_half(b), m = rad_dq_half(b + 2);
    int q[QK];
    nibbles(b + 8, q);
    fifth_bits(b + 4, q);
    for (int j = 0; j < QK; j++) {
        float t = d * (float)q[j];
        y[j] = t + m;
    }
}

/* q8_0, 34 bytes: d (f16), then 32 int8 codes in element order.  x = d * q. */
static void block_q8_0(const unsigned char *b, float *y)
{
    float d = rad_dq_half(b);
    for (int j = 0; j < QK; j++) {
        int8_t q;
        memcpy(&q, b + 2 + j, 1);
        y[j] = d * (float)q;
    }
}

/* iq4_nl, 18 bytes: d (f16), then 16 code bytes in nibble order.  A code
** indexes a fixed non-uniform grid, denser near zero: x = d * grid[q]. */
static const int8_t iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void block_iq4_nl(const unsigned char *b, float *y)
{
    float d = rad_dq_half(b);
    int q[QK];
    nibbles(b + 2, q);
    for (int j = 0; j < QK; j++) y[j] = d * (float)iq4_grid[q[j]];
}

/* mxfp4, 17 bytes: e (u8, an E8M0 power of two), then 16 code bytes in
** nibble order.  A code is an E2M1 float (sign bit, 2 exponent bits, 1
** mantissa bit); ggml stores it doubled as a small integer, so
** x = twice_e2m1[q] * 2^(e - 128)  (= e2m1 * 2^(e - 127), the OCP scale).
** 2^(e - 128) is built from its bits: for e >= 2 it is the normal f32 with
** exponent field e - 1; e = 1 and e = 0 give 2^-127 and 2^-128, which are
** f32 subnormals (one mantissa bit, 22 and 21).  e = 255 is 2^127, not
** the NaN the OCP format reserves; as in ggml, a code of magnitude >= 2
** then overflows to infinity. */
static const int8_t e2m1_doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static float e8m0_half(unsigned e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return rad_bits_to_f32(bits);
}

static void block_mxfp4(const unsigned char *b, float *y)
{
    float d = e8m0_half(b[0]);
    int q[QK];
    nibbles(b + 1, q);
    for (int j = 0; j < QK; j++) y[j] = (float)e2m1_doubled[q[j]] * d;
}

/* Every block encoding: its geometry (equal to base/encoding.c's, which a
** test checks) and its block decoder. */
typedef struct BlockCodec {
    int enc;
    int elems, bytes;
    void (*decode)(const unsigned char *block, float *y);
} BlockCodec;

static const BlockCodec codecs[] = {
    {RAD_ENC_Q4_0, QK, 18, block_q4_0},
    {RAD_ENC_Q4_1, QK, 20, block_q4_1},
    {RAD_ENC_Q5_0, QK, 22, block_q5_0},
    {RAD_ENC_Q5_1, QK, 24, block_q5_1},
    {RAD_ENC_Q8_0, QK, 34, block_q8_0},
    {RAD_ENC_IQ4_NL, QK, 18, block_iq4_nl},
    {RAD_ENC_MXFP4, QK, 17, block_mxfp4},
    {RAD_ENC_Q2_K, RAD_QK_K, 84, rad_dq_block_q2_k},
    {RAD_ENC_Q3_K, RAD_QK_K, 110, rad_dq_block_q3_k},
    {RAD_ENC_Q4_K, RAD_QK_K, 144, rad_dq_block_q4_k},
    {RAD_ENC_Q5_K, RAD_QK_K, 176, rad_dq_block_q5_k},
    {RAD_ENC_Q6_K, RAD_QK_K, 210, rad_dq_block_q6_k},
};

static const BlockCodec *find_codec(int enc)
{
    for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++)
        if (codecs[i].enc == enc) return &codecs[i];
    return NULL;
}

int rad_dequant_supported(int enc)
{
    return enc == RAD_ENC_F32 || enc == RAD_ENC_F16 || enc == RAD_ENC_BF16 || find_codec(enc) != NULL;
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
    }

    const BlockCodec *c = find_codec(enc);
    if (!c) return RAD_E_UNSUPPORTED;
    if (n % c->elems) return RAD_E_SHAPE;
    for (int64_t b = 0; b < n / c->elems; b++) c->decode(p + b * c->bytes, dst + b * c->elems);
    return RAD_OK;
}
