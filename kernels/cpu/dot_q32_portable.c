/*
** dot_q32_portable.c: dot products of the 32-element block encodings with
** int8 activation blocks, in plain C.  The fallback for every machine and the
** statement of what the SIMD files compute.
**
**   weight   activation   one block's contribution
**   q8_0     Q8_0         dw * da * sum(qw * qa)
**   q4_0     Q8_0         dw * da * sum((qw - 8) * qa)
**   q5_0     Q8_0         dw * da * sum((qw - 16) * qa)
**   iq4_nl   Q8_0         dw * da * sum(grid[qw] * qa)
**   mxfp4    Q8_0         (2^(e-128) * da) * sum(e2m1x2[qw] * qa)
**   q4_1     Q8_1         dw * da * sum(qw * qa) + mw * sa
**   q5_1     Q8_1         dw * da * sum(qw * qa) + mw * sa
**
** The integer sums are exact; each block then takes the canonical step of
** docs/OPS.md ("Batch and placement invariance"), blocks in order:
**   acc = fma(dw * da, float(isum), acc)        (q4_1, q5_1: then fma(mw, sa, acc))
** which every SIMD file and both weight layouts repeat, so a product has
** the same bits on every path.  These are ggml's vec_dot_*_q8_0 / _q8_1
** formulas; the result differs from llama.cpp's only by the order and
** fusing of the f32 additions.  Weight layouts: kernels/ops/dequant.c.
**
** No tile kernel here: the driver loops over `dot`, which is trivially the
** same per element.
*/
#include <math.h>

#include "../../base/rad_half.h"
#include "cpu_internal.h"

#define QK 32

static inline float half_at(const unsigned char *p) { return rad_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static inline uint32_t u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The weight's 32 codes of one block as ints (nibble order: byte j holds
** element j low, element j + 16 high). */
static inline void nibbles(const unsigned char *qs, int *q)
{
    for (int j = 0; j < QK / 2; j++) {
        q[j] = qs[j] & 0x0f;
        q[j + QK / 2] = qs[j] >> 4;
    }
}

static inline void fifth_bits(const unsigned char *qh, int *q)
{
    uint32_t h = u32_at(qh);
    for (int j = 0; j < QK; j++) q[j] |= (int)((h >> j) & 1u) << 4;
}

static inline int isum(const int *q, int offset, const unsigned char *a)
{
    int s = 0;
    for (int j = 0; j < QK; j++) s += (q[j] - offset) * (int8_t)a[j];
    return s;
}

static void dot_q8_0(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const unsigned char *w = w_row, *a = act_row;
    float sum = 0.0f;
    for (int64_t b = 0; b < K / QK; b++, w += 34, a += CPU_Q8_0_BYTES) {
        int s = 0;
        for (int j = 0; j < QK; j++) s += (int8_t)w[2 + j] * (int8_t)a[2 + j];
        sum = fmaf(half_at(w) * half_at(a), (float)s, sum);
    }
    *out = sum;
}

static void dot_q4_0(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const unsigned char *w = w_row, *a = act_row;
    float sum = 0.0f;
    int q[QK];
    for (int64_t b = 0; b < K / QK; b++, w += 18, a += CPU_Q8_0_BYTES) {
        nibbles(w + 2, q);
        sum = fmaf(half_at(w) * half_at(a), (float)isum(q, 8, a + 2), sum);
    }
    *out = sum;
}

static void dot_q5_0(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const unsigned char *w = w_row, *a = act_row;
    float sum = 0.0f;
    int q[QK];
    for (int64_t b = 0; b < K / QK; b++, w += 22, a += CPU_Q8_0_BYTES) {
        nibbles(w + 6, q);
        fifth_bits(w + 2, q);
        sum = fmaf(half_at(w) * half_at(a), (float)isum(q, 16, a + 2), sum);
    }
    *out = sum;
}

static const int8_t iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void dot_iq4_nl(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const unsigned char *w = w_row, *a = act_row;
    float sum = 0.0f;
    int q[QK];
    for (int64_t b = 0; b < K / QK; b++, w += 18, a += CPU_Q8_0_BYTES) {
        nibbles(w + 2, q);
        for (int j = 0; j < QK; j++) q[j] = iq4_grid[q[j]];
        sum = fmaf(half_at(w) * half_at(a), (float)isum(q, 0, a + 2), sum);
    }
    *out = sum;
}

/* mxfp4's E8M0 scale halved, 2^(e - 128), from its bits (dequant.c says why). */
static inline float e8m0_half(unsigned e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return rad_bits_to_f32(bits);
}

static const int8_t e2m1_doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static void dot_mxfp4(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const unsigned char *w = w_row, *a = act_row;
    float sum = 0.0f;
    int q[QK];
    for (int64_t b = 0; b < K / QK; b++, w += 17, a += CPU_Q8_0_BYTES) {
        nibbles(w + 1, q);
        for (int j = 0; j < QK; j++) q[j] = e2m1_doubled[q[j]];
        sum = fmaf(e8m0_half(w[0]) * half_at(a), (float)isum(q, 0, a + 2), sum);
    }
    *out = sum;
}

static void dot_q4_1(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const unsigned char *w = w_row, *a = act_row;
    float sum = 0.0f;
    int q[QK];
    for (int64_t b = 0; b < K / QK; b++, w += 20, a += CPU_Q8_1_BYTES) {
        nibbles(w + 4, q);
        sum = fmaf(half_at(w) * half_at(a), (float)isum(q, 0, a + 4), sum);
        sum = fmaf(half_at(w + 2), half_at(a + 2), sum);
    }
    *out = sum;
}

static void dot_q5_1(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const unsigned char *w = w_row, *a = act_row;
    float sum = 0.0f;
    int q[QK];
    for (int64_t b = 0; b < K / QK; b++, w += 24, a += CPU_Q8_1_BYTES) {
        nibbles(w + 8, q);
        fifth_bits(w + 4, q);
        sum = fmaf(half_at(w) * half_at(a), (float)isum(q, 0, a + 4), sum);
        sum = fmaf(half_at(w + 2), half_at(a + 2), sum);
    }
    *out = sum;
}

static void set(int enc, int act, CpuDotFn dot)
{
    cpu_enc[enc] = (CpuEncKernels){.act_fmt = act, .dot = dot, .isa = "portable"};
}

void cpu_fill_q32_portable(void)
{
    cpu_act_quant[CPU_ACT_Q8_0] = cpu_act_q8_0_portable;
    cpu_act_quant[CPU_ACT_Q8_1] = cpu_act_q8_1_portable;
    cpu_act_quant[CPU_ACT_Q8_0_SUMS] = cpu_act_q8_0_sums;
    set(RAD_ENC_Q8_0, CPU_ACT_Q8_0, dot_q8_0);
    set(RAD_ENC_Q4_0, CPU_ACT_Q8_0_SUMS, dot_q4_0);
    set(RAD_ENC_Q5_0, CPU_ACT_Q8_0_SUMS, dot_q5_0);
    set(RAD_ENC_IQ4_NL, CPU_ACT_Q8_0, dot_iq4_nl);
    set(RAD_ENC_MXFP4, CPU_ACT_Q8_0, dot_mxfp4);
    set(RAD_ENC_Q4_1, CPU_ACT_Q8_1, dot_q4_1);
    set(RAD_ENC_Q5_1, CPU_ACT_Q8_1, dot_q5_1);
}
