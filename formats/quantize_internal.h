/*
** quantize_internal.h: what quantize.c and quantize_kquants.c share.
**
** A block quantizer turns one block of finite floats (the caller has
** checked) into the encoding's bytes.  `first` is the index of x[0] in the
** caller's row, for the message when the block cannot be encoded.
** Returns 0 or RAD_E_ARG with the message set.
*/
#ifndef RAD_QUANTIZE_INTERNAL_H
#define RAD_QUANTIZE_INTERNAL_H

#include <stdint.h>

typedef int (*RadBlockQuantizer)(const float *x, uint8_t *out, int64_t first);

/* The k-quants and iq4_nl (quantize_kquants.c). */
int rad_qz_block_q2_k(const float *x, uint8_t *out, int64_t first);
int rad_qz_block_q3_k(const float *x, uint8_t *out, int64_t first);
int rad_qz_block_q4_k(const float *x, uint8_t *out, int64_t first);
int rad_qz_block_q5_k(const float *x, uint8_t *out, int64_t first);
int rad_qz_block_q6_k(const float *x, uint8_t *out, int64_t first);
int rad_qz_block_iq4_nl(const float *x, uint8_t *out, int64_t first);

/* mxfp4 (quantize_mxfp4.c). */
int rad_qz_block_mxfp4(const float *x, uint8_t *out, int64_t first);

/* Store f as an f16 at out (little-endian); 0, or RAD_E_ARG with the
** message when f rounds to an infinite f16: the block of `n` floats at x
** (row index `first`) reaches past what the encoding `enc` can carry,
** about `limit` in magnitude. */
int rad_qz_put_half(uint8_t *out, float f, const char *enc, const float *x, int n, int64_t first,
                    double limit);

/* The f32 value of the f16 at p (little-endian). */
float rad_qz_get_half(const uint8_t *p);

/* v rounded to the nearest integer (halves away from zero, as roundf),
** clamped to [lo, hi]; NaN gives lo.  Inline: the scale searches call it
** for every element of every candidate. */
static inline int rad_qz_round(float v, int lo, int hi)
{
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    int i = (int)v;                        /* toward zero; |v| <= max(|lo|, hi) here */
    float f = v - (float)i;                /* exact: i and v share their leading bits */
    return i + (f >= 0.5f) - (f <= -0.5f); /* no branch to mispredict */
}

#endif /* RAD_QUANTIZE_INTERNAL_H */
