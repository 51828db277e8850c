/*
** x8.c: the cpu library's own weight layout, made at load by the relayout
** hook (rad_kernel.h), for q4_0, q4_1, q5_0, q8_0 and q4_k.
**
** Why.  A 4-bit decode product is bound by arithmetic, not memory, on a
** small machine: in the stored layout every (weight row, block) pair pays
** for unpacking, an int-to-float conversion, a scale and an accumulator of
** its own, and every output ends in a lane reduction.  Interleaving eight
** rows lets one register hold four codes of each of eight rows, one integer
** multiply-add serve all eight, and the eight outputs finish in the lanes of
** one float register: no reduction, one conversion and one scale per block
** for eight rows.  (llama.cpp's CPU backend repacks for the same reason.)
**
** The layout.  Rows are taken eight at a time (the weight's N must be a
** multiple of 8, its rows packed).  Group g (rows 8g .. 8g+7) is stored as
** its blocks in order, each block b as
**
**     the block's 2-byte fields, field by field, the eight rows' values in
**     row order (q4_0: d; q4_1: d, then m)                 16 or 32 bytes
**     the code bytes (16; q8_0: 32; q5_0: its 4 fifth-bit bytes, then the
**     16), in chunks of 32 bytes: chunk j holds
**     bytes 4j .. 4j+3 of row 0, then of row 1, ... of row 7  128 / 256 bytes
**
** so a group block is exactly eight stored blocks long, group g starts
** where row 8g did, and the copy is as big as the weight.  Within a 32-bit
** lane r of chunk j the low nibbles are elements 4j .. 4j+3 of row r and the
** high nibbles elements 4j+16 .. 4j+19, as in the stored block; for q8_0
** lane r of chunk j is elements 4j .. 4j+3 of row r.
**
** Why q8_0 too: it is memory-bound, and eight interleaved rows are one
** sequential stream where the stored layout's tile reads four rows side by
** side; the logits product over a large vocabulary is most of a small
** model's decode.
**
** The tiles (dot_x8_*.c) sum the codes times the activation codes exactly
** in integers per block, then scale once per block; so a result is the same
** bits for any thread count or tile height, though not the bits of the
** stored-layout kernels, whose float order is ggml's.
*/
#include <string.h>

#include "cpu_internal.h"
#include "kquants.h"

CpuEncKernels cpu_enc_x8[RAD_ENC_COUNT];

/* The stored block of an encoding with the x8 layout: bytes and 2-byte fields. */
static int block_fields(int enc, int *block_bytes)
{
    switch (enc) {
    case RAD_ENC_Q4_0: *block_bytes = 18; return 1;
    case RAD_ENC_Q4_1: *block_bytes = 20; return 2;
    case RAD_ENC_Q5_0: *block_bytes = 22; return 1;     /* qh moves with the codes: 32 bytes of lanes */
    case RAD_ENC_Q8_0: *block_bytes = 34; return 1;
    default: return 0;
    }
}

/* The x8 copy's bytes per row (an eighth of a group's), or 0. */
int64_t cpu_x8_row_bytes(int enc, int64_t K)
{
    int block;
    if (enc == RAD_ENC_Q4_K) return K % KQ_N ? 0 : K / KQ_N * (X8_Q4K_GROUP_BYTES / CPU_X8_ROWS);
    if (!block_fields(enc, &block) || K % 32) return 0;
    return K / 32 * block;
}

/* Whether weight w gets the x8 layout from this library as it stands. */
size_t cpu_relayout_bytes(const RadTensor *w)
{
    if (!w || !w->data || w->enc < 0 || w->enc >= RAD_ENC_COUNT || !cpu_enc_x8[w->enc].tile) return 0;
    if (w->rank != 2) return 0;
    int64_t N = w->shape[0], K = w->shape[1];
    if (N < CPU_X8_ROWS || N % CPU_X8_ROWS || K <= 0) return 0;
    int64_t row = cpu_x8_row_bytes(w->enc, K);
    if (!row || w->row_bytes != rad_encoding_row_bytes(w->enc, K)) return 0; /* padded rows keep the stored layout */
    if (N > INT64_MAX / row) return 0;
    return (size_t)(N * row);
}

/* q4_k: per group super-block d[8], dmin[8] (f16), the six-bit scales as
** bytes [sub-block][row], the offsets as byte pairs [pair t][row] =
** (m[2t], m[2t+1]), then the 128 code bytes of each row in 32 pieces of
** four bytes: piece 8c + p holds bytes 32c + 4p .. +3 of rows 0..7 (their
** low nibbles are sub-block 2c, the high nibbles sub-block 2c + 1). */
static void relayout_q4_k(const RadTensor *w, unsigned char *out)
{
    const int64_t N = w->shape[0], nb = w->shape[1] / KQ_N;
    const unsigned char *src = w->data;
    for (int64_t g = 0; g < N / CPU_X8_ROWS; g++) {
        for (int64_t b = 0; b < nb; b++, out += X8_Q4K_GROUP_BYTES) {
            for (int r = 0; r < CPU_X8_ROWS; r++) {
                const unsigned char *blk = src + (g * CPU_X8_ROWS + r) * w->row_bytes + b * Q4K_BYTES;
                uint8_t sc_m[16];
                kq_unpack_k4_scales(blk + Q4K_SCALES, sc_m);
                memcpy(out + X8_Q4K_D + 2 * r, blk + Q4K_D, 2);
                memcpy(out + X8_Q4K_DMIN + 2 * r, blk + Q4K_DMIN, 2);
                for (int s = 0; s < 8; s++) out[X8_Q4K_SCALES + 8 * s + r] = sc_m[s];
                for (int t = 0; t < 4; t++) {
                    out[X8_Q4K_MINS + 16 * t + 2 * r] = sc_m[8 + 2 * t];
                    out[X8_Q4K_MINS + 16 * t + 2 * r + 1] = sc_m[8 + 2 * t + 1];
                }
                for (int piece = 0; piece < 32; piece++)
                    memcpy(out + X8_Q4K_CODES + 32 * piece + 4 * r, blk + Q4K_QS + 4 * piece, 4);
            }
        }
    }
}

int cpu_relayout(const RadTensor *w, void *dst)
{
    int block = 0, fields = block_fields(w->enc, &block);
    size_t bytes = cpu_relayout_bytes(w);
    if (!bytes || !dst) return RAD_E_ARG;
    if (w->enc == RAD_ENC_Q4_K) {
        relayout_q4_k(w, dst);
        return RAD_OK;
    }
    const int64_t N = w->shape[0], nb = w->shape[1] / 32;
    const int head = 2 * fields, codes = block - head;     /* codes: 16, or 32 for q8_0 */
    const unsigned char *src = w->data;
    unsigned char *out = dst;
    for (int64_t g = 0; g < N / CPU_X8_ROWS; g++) {
        for (int64_t b = 0; b < nb; b++) {
            for (int f = 0; f < fields; f++)
                for (int r = 0; r < CPU_X8_ROWS; r++)
                    memcpy(out + f * 16 + r * 2, src + (g * CPU_X8_ROWS + r) * w->row_bytes + b * block + f * 2, 2);
            out += 16 * fields;
            for (int j = 0; j < codes / 4; j++)
                for (int r = 0; r < CPU_X8_ROWS; r++, out += 4)
                    memcpy(out, src + (g * CPU_X8_ROWS + r) * w->row_bytes + b * block + head + 4 * j, 4);
        }
    }
    return RAD_OK;
}

/* CPU_ACT_Q8_0_SUMS: the Q8_0 row as the current level converts it, then
** the blocks' code sums, for q4_0's offset (sum (w - 8) a = sum w a - 8 sum a). */
void cpu_act_q8_0_sums(const float *x, void *dst, int64_t K)
{
    cpu_act_quant[CPU_ACT_Q8_0](x, dst, K);
    const int64_t nb = K / 32;
    const signed char *q = (const signed char *)dst;
    unsigned char *sums = (unsigned char *)dst + cpu_act_sums_offset(K);
    for (int64_t b = 0; b < nb; b++) {
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += q[b * CPU_Q8_0_BYTES + 2 + i];
        memcpy(sums + 4 * b, &s, 4);
    }
}

/* A stacked weight (a MoE layer's experts, [n_expert, N, K], slices
** contiguous): each slice gets the x8 layout on its own, slice e of the
** copy at e * N * cpu_x8_row_bytes (ops_moe.c reads it there).  The
** slices may sit end to end (a GGUF stack) or apart (RadTensor.slices: a
** .rad stores each expert in its own record); the copy is contiguous. */
static int slice_of_stack(const RadTensor *w, int64_t e, RadTensor *t)
{
    memset(t, 0, sizeof *t);
    t->data = w->slices ? (char *)w->slices[e] : (char *)w->data + e * w->slice_bytes;
    t->enc = w->enc;
    t->rank = 2;
    t->shape[0] = w->shape[1];
    t->shape[1] = w->shape[2];
    t->row_bytes = w->row_bytes;
    return 0;
}

size_t cpu_relayout_stack_bytes(const RadTensor *w)
{
    if (!w || !(w->data || w->slices) || w->rank != 3 || w->n_slices != w->shape[0] || w->shape[0] <= 0) return 0;
    if (w->slice_bytes != w->shape[1] * w->row_bytes) return 0;     /* whole slices */
    RadTensor t;
    slice_of_stack(w, 0, &t);
    size_t one = cpu_relayout_bytes(&t);
    if (!one || (size_t)w->shape[0] > SIZE_MAX / one) return 0;
    return one * (size_t)w->shape[0];
}

int cpu_relayout_stack(const RadTensor *w, void *dst)
{
    size_t bytes = cpu_relayout_stack_bytes(w);
    if (!bytes || !dst) return RAD_E_ARG;
    size_t one = bytes / (size_t)w->shape[0];
    for (int64_t e = 0; e < w->shape[0]; e++) {
        RadTensor t;
        slice_of_stack(w, e, &t);
        int rc = cpu_relayout(&t, (char *)dst + (size_t)e * one);
        if (rc) return rc;
    }
    return RAD_OK;
}
