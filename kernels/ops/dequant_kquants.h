/*
** dequant_kquants.h: the block decoders of the 256-element k-quants
** (dequant_kquants.c), for dequant.c's table.  Internal to the decoders:
** hidden from a kernel library's dynamic symbol table.
*/
#ifndef RAD_DEQUANT_KQUANTS_H
#define RAD_DEQUANT_KQUANTS_H

#pragma GCC visibility push(hidden)

#define RAD_QK_K 256 /* elements per k-quant super-block */

/* An f16 stored little-endian at p, as f32 (exact). */
float rad_dq_half(const unsigned char *p);

/* Decode one super-block at `b` into y[0..255], in row order. */
void rad_dq_block_q2_k(const unsigned char *b, float *y);
void rad_dq_block_q3_k(const unsigned char *b, float *y);
void rad_dq_block_q4_k(const unsigned char *b, float *y);
void rad_dq_block_q5_k(const unsigned char *b, float *y);
void rad_dq_block_q6_k(const unsigned char *b, float *y);

#pragma GCC visibility pop

#endif /* RAD_DEQUANT_KQUANTS_H */
