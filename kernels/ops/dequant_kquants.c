/*
** dequant_kquants.c: the k-quants, GGUF's 256-element super-blocks.
**
** A super-block carries one or two f16 factors (d, and dmin where there are
** offsets) and, per sub-block of 16 or 32 elements, a small integer scale
** (and offset) that multiplies them: two levels of scale, so each sub-block
** gets its own range for a few bits.  The codes are packed so that SIMD code
** can unpack 32 elements with one shift, which scatters one element's bits
** across the block; each decoder below therefore loops over the elements in
** row order and computes, for element e, which bytes and bits hold it.
** The facts are shared reference formats.md 1.6 ("K-quant element order").
**
** Arithmetic follows ggml's dequantize_row_q*_K operation for operation
** (see dequant.c): products of a scale and a code are exact; the final
** "- dmin * m" of q2_k, q4_k and q5_k, and q6_k's (d * sc) * q, may round,
** and round the same way there.
*/
#include "dequant_kquants.h"

#include <stdint.h>

/* q2_k, 84 bytes:
**   scales[16]  one byte per 16-element group g: low nibble = scale,
**               high nibble = offset (both 0..15)
**   qs[64]      2-bit codes, four per byte
**   d, dmin     f16 at bytes 80 and 82
** Element e = 128h + 32j + l (h 0..1, j 0..3, l 0..31) has the code
** (qs[32h + l] >> 2j) & 3 and group g = e / 16.
** x = (d * scale) * q - dmin * offset. */
void rad_dq_block_q2_k(const unsigned char *b, float *y)
{
    const unsigned char *scales = b, *qs = b + 16;
    float d = rad_dq_half(b + 80), dmin = rad_dq_half(b + 82);
    for (int e = 0; e < RAD_QK_K; e++) {
        int h = e / 128, j = e % 128 / 32, l = e % 32, g = e / 16;
        int q = (qs[32 * h + l] >> (2 * j)) & 3;
        float dl = d * (float)(scales[g] & 0x0f);
        float ml = dmin * (float)(scales[g] >> 4);
        float t = dl * (float)q;
        y[e] = t - ml;
    }
}

/* The 6-bit scale of q3_k's group g (0..15), unsigned 0..63, from 12 bytes:
** its low 4 bits are the low nibble of byte g (g < 8) or the high nibble of
** byte g - 8 (g >= 8); its high 2 bits are bits 2(g/4), 2(g/4)+1 of byte
** 8 + g % 4. */
static int q3_k_scale(const unsigned char *s, int g)
{
    int lo = g < 8 ? s[g] & 0x0f : s[g - 8] >> 4;
    int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
    return lo | hi << 4;
}

/* q3_k, 110 bytes:
**   hmask[32]   the third (high) bit of each code
**   qs[64]      the low 2 bits of each code, four per byte
**   scales[12]  16 six-bit scales (q3_k_scale), stored as scale + 32
**   d           f16 at byte 108
** Element e = 128h + 32j + l: low bits (qs[32h + l] >> 2j) & 3, high bit
** (hmask[l] >> (4h + j)) & 1; the code is low - 4 when the high bit is
** clear, low when it is set (so -4..3).  Group g = e / 16.
** x = (d * (scale - 32)) * code. */
void rad_dq_block_q3_k(const unsigned char *b, float *y)
{
    const unsigned char *hmask = b, *qs = b + 32, *scales = b + 96;
    float d = rad_dq_half(b + 108);
    for (int e = 0; e < RAD_QK_K; e++) {
        int h = e / 128, j = e % 128 / 32, l = e % 32, g = e / 16;
        int low = (qs[32 * h + l] >> (2 * j)) & 3;
        int high = (hmask[l] >> (4 * h + j)) & 1;
        int q = low - (high ? 0 : 4);
        float dl = d * (float)(q3_k_scale(scales, g) - 32);
        y[e] = dl * (float)q;
    }
}

/* The 6-bit scale and offset of q4_k / q5_k sub-block s (0..7) from 12
** bytes.  For s < 4 they are the low 6 bits of bytes s and s + 4.  For
** s >= 4 the low 4 bits come from byte s + 4 (scale: low nibble, offset:
** high nibble) and the high 2 bits from the top two bits of bytes s - 4
** (scale) and s (offset). */
static void k4_scale_min(const unsigned char *s, int sb, int *sc, int *m)
{
    if (sb < 4) {
        *sc = s[sb] & 63;
        *m = s[sb + 4] & 63;
    } else {
        *sc = (s[sb + 4] & 0x0f) | (s[sb - 4] >> 6) << 4;
        *m = (s[sb + 4] >> 4) | (s[sb] >> 6) << 4;
    }
}

/* q4_k, 144 bytes:
**   d, dmin     f16 at bytes 0 and 2
**   scales[12]  8 six-bit scales and 8 six-bit offsets (k4_scale_min)
**   qs[128]     4-bit codes
** Element e = 64c + 32t + l (chunk c 0..3, t 0..1, l 0..31) is in
** sub-block s = 2c + t = e / 32; its code is the low (t = 0) or high
** (t = 1) nibble of qs[32c + l].
** x = (d * scale) * q - dmin * offset. */
void rad_dq_block_q4_k(const unsigned char *b, float *y)
{
    const unsigned char *scales = b + 4, *qs = b + 16;
    float d = rad_dq_half(b), dmin = rad_dq_half(b + 2);
    for (int e = 0; e < RAD_QK_K; e++) {
        int c = e / 64, t = e % 64 / 32, l = e % 32, sc, m;
        k4_scale_min(scales, e / 32, &sc, &m);
        int q = (qs[32 * c + l] >> (4 * t)) & 0x0f;
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        float v = d1 * (float)q;
        y[e] = v - m1;
    }
}

/* q5_k, 176 bytes: as q4_k with a fifth code bit.
**   d, dmin     f16 at bytes 0 and 2
**   scales[12]  as q4_k
**   qh[32]      fifth bits: bit s of qh[l] belongs to sub-block s
**   qs[128]     low 4 bits, as q4_k
** Element e = 64c + 32t + l: q = nibble | ((qh[l] >> (2c + t)) & 1) << 4,
** 0..31.  x = (d * scale) * q - dmin * offset. */
void rad_dq_block_q5_k(const unsigned char *b, float *y)
{
    const unsigned char *scales = b + 4, *qh = b + 16, *qs = b + 48;
    float d = rad_dq_half(b), dmin = rad_dq_half(b + 2);
    for (int e = 0; e < RAD_QK_K; e++) {
        int c = e / 64, t = e % 64 / 32, l = e % 32, sc, m;
        k4_scale_min(scales, e / 32, &sc, &m);
        int q = ((qs[32 * c + l] >> (4 * t)) & 0x0f) | ((qh[l] >> (2 * c + t)) & 1) << 4;
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        float v = d1 * (float)q;
        y[e] = v - m1;
    }
}

/* q6_k, 210 bytes:
**   ql[128]     low 4 bits of the codes
**   qh[64]      high 2 bits, four codes per byte
**   scales[16]  int8, one per 16-element group
**   d           f16 at byte 208
** Each half h (elements 128h ..) uses ql from 64h, qh from 32h.  Within a
** half, element 32k + l (quarter k 0..3, l 0..31) takes its low bits from
** the low (k < 2) or high (k >= 2) nibble of ql[64h + l + 32 (k & 1)] and
** its high bits from (qh[32h + l] >> 2k) & 3.  Group g = e / 16.
** x = (d * scale) * (q - 32), code -32..31. */
void rad_dq_block_q6_k(const unsigned char *b, float *y)
{
    const unsigned char *ql = b, *qh = b + 128, *scales = b + 192;
    float d = rad_dq_half(b + 208);
    for (int e = 0; e < RAD_QK_K; e++) {
        int h = e / 128, k = e % 128 / 32, l = e % 32, g = e / 16;
        int low = (ql[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0x0f;
        int high = (qh[32 * h + l] >> (2 * k)) & 3;
        int q = (low | high << 4) - 32;
        int sc = scales[g] < 128 ? scales[g] : scales[g] - 256; /* int8 */
        float dl = d * (float)sc;
        y[e] = dl * (float)q;
    }
}
