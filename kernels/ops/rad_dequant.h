/*
** rad_dequant.h: decoding stored weight rows to f32.
**
** The reference kernels read every weight through this one function, so it
** is the definition of what an encoding's bytes mean: a faster kernel that
** decodes differently is wrong by definition.  It is plain C with no
** dependency on the core, so any kernel library may compile it in.
*/
#ifndef RAD_DEQUANT_H
#define RAD_DEQUANT_H

#include <stdint.h>

#include "../../base/rad_types.h"

/* Decode the first `n` elements of a row that starts at `src` and is encoded
** in `enc`, writing n floats to `dst`.  Serves f32, f16, bf16, q8_0, q4_0,
** q4_1, q5_0, q5_1, iq4_nl, mxfp4 (32-element blocks) and q2_k, q3_k,
** q4_k, q5_k, q6_k (256-element blocks); any other encoding returns
** RAD_E_UNSUPPORTED and writes nothing.  For a block encoding `n` must be a
** whole number of blocks (RAD_E_SHAPE otherwise), and `src` must be the
** start of a block.  `src` needs no alignment.  Each element is the f32
** ggml's dequantize_row_* gives for the same bytes, bit for bit; most are
** exact products, and the few that round (a scaled code plus an offset)
** round as ggml's do. */
int rad_dequant_row(int enc, const void *src, float *dst, int64_t n);

/* Whether rad_dequant_row serves `enc`: 1 or 0. */
int rad_dequant_supported(int enc);

#endif /* RAD_DEQUANT_H */
