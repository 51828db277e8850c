/*
** quantize.h: turning rows of floats into the encodings the converter
** writes.
**
** The converter reads f32, f16 or bf16 from a checkpoint and writes f32,
** f16, bf16 or one of GGUF's block encodings into a .rad file: q8_0, q4_0,
** q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k.  The bytes are
** GGUF's, so a tensor written here means the same to llama.cpp.  Decoding
** the other way is the reference kernels' business (kernels/ref), not this
** file's.  How each quantizer rounds: quantize.c (q8_0 .. q5_1, byte-
** identical to ggml's and gguf-py's reference quantizers) and
** quantize_kquants.c (the k-quants and iq4_nl: our own scale search, valid
** blocks, not llama.cpp's bytes); docs/ENCODINGS.md sums them up.
*/
#ifndef RAD_QUANTIZE_H
#define RAD_QUANTIZE_H

#include "rad_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Convert `n` elements from `src` (encoding `enc_in`: f32, f16 or bf16) to
** `dst` (encoding `enc_out`: f32, f16, bf16 or any encoding
** rad_quantize_supported accepts).  `n` must be a whole number of enc_out
** blocks (32, or 256 for the k-quants); `dst` must hold
** rad_encoding_row_bytes(enc_out, n) bytes.  src and dst must not overlap.
** Narrowing to f16 and bf16 rounds to nearest, ties to even; the same
** encoding in and out copies the bytes unchanged; a quantized output is
** rad_quantize_row of the f32 values.
** Returns 0, RAD_E_UNSUPPORTED (a pair not listed above) or RAD_E_ARG
** (n < 0, n not a whole number of blocks, NULL pointers with n > 0, or
** for a block encoding a value rad_quantize_row refuses). */
int rad_convert_row(int enc_in, const void *src, int enc_out, void *dst, int64_t n);

/* Whether rad_quantize_row writes `enc`: 1 for q8_0, q4_0, q4_1, q5_0,
** q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k and mxfp4, else 0. */
int rad_quantize_supported(int enc);

/* Quantize `n` floats (a whole number of the encoding's blocks) to `enc`
** in GGUF's layout, writing rad_encoding_row_bytes(enc, n) bytes.
** Returns 0, RAD_E_UNSUPPORTED (rad_quantize_supported says no) or
** RAD_E_ARG (n < 0 or not whole blocks, NULL pointers with n > 0, a NaN or
** infinite input value, or a block whose scale, or offset, overflows f16:
** the message names the element).  Those last two are where we part from
** ggml, which writes the block anyway with an inf or NaN scale. */
int rad_quantize_row(int enc, const float *src, void *dst, int64_t n);

/* Quantize `n` floats (a multiple of 32) to q8_0, GGUF's layout: each block
** of 32 is an f16 scale d followed by 32 int8 q, and decodes as x = d * q.
**   amax = max |x| over the block;  d = amax / 127  (in f32);
**   q = round_half_away_from_zero(x * (1 / d)), 0 when d is 0;
**   the block stores d rounded to f16 (nearest, ties to even).
** This is ggml's reference quantizer step for step, so a row quantized here
** is byte-identical to the same f32 row quantized by llama.cpp.
** The same as rad_quantize_row(RAD_ENC_Q8_0, ...): a block whose scale
** overflows f16 is one with max |x| beyond about 65504 * 127. */
int rad_quantize_row_q8_0(const float *src, void *dst, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* RAD_QUANTIZE_H */
