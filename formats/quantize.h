/*
** quantize.h: turning rows of floats into the encodings the converter
** writes.
**
** The converter reads f32, f16 or bf16 from a checkpoint and writes f32,
** f16, bf16 or q8_0 into a .rad file.  Decoding the other way is the
** reference kernels' business (kernels/ref), not this file's.
*/
#ifndef RAD_QUANTIZE_H
#define RAD_QUANTIZE_H

#include "rad_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Convert `n` elements from `src` (encoding `enc_in`: f32, f16 or bf16) to
** `dst` (encoding `enc_out`: f32, f16, bf16 or q8_0).  `n` must be a whole
** number of enc_out blocks (32 for q8_0); `dst` must hold
** rad_encoding_row_bytes(enc_out, n) bytes.  src and dst must not overlap.
** Narrowing to f16 and bf16 rounds to nearest, ties to even; the same
** encoding in and out copies the bytes unchanged.
** Returns 0, RAD_E_UNSUPPORTED (a pair not listed above) or RAD_E_ARG
** (n < 0, n not a whole number of blocks, NULL pointers with n > 0, or
** for q8_0 a value rad_quantize_row_q8_0 refuses). */
int rad_convert_row(int enc_in, const void *src, int enc_out, void *dst, int64_t n);

/* Quantize `n` floats (a multiple of 32) to q8_0, GGUF's layout: each block
** of 32 is an f16 scale d followed by 32 int8 q, and decodes as x = d * q.
**   amax = max |x| over the block;  d = amax / 127  (in f32);
**   q = round_half_away_from_zero(x * (1 / d)), 0 when d is 0;
**   the block stores d rounded to f16 (nearest, ties to even).
** This is ggml's reference quantizer step for step, so a row quantized here
** is byte-identical to the same f32 row quantized by llama.cpp.
** Returns 0 or RAD_E_ARG (n < 0, n % 32 != 0, NULL pointers with n > 0,
** a NaN or infinite input value, or a block whose scale overflows f16,
** i.e. max |x| beyond about 65504 * 127: the message gives the index).
** Those last two are where we part from ggml, which writes the block anyway
** with an inf or NaN scale. */
int rad_quantize_row_q8_0(const float *src, void *dst, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* RAD_QUANTIZE_H */
