/*
** dot_kquants_portable.c: q2_k .. q6_k weight rows times Q8_K activation
** rows in plain C, the fallback every other ISA's file is checked against.
**
** Per super-block the sum of code * activation * sub-block scale is an
** exact integer (it fits in 32 bits: at most 256 * 127 * 32 * 128 for
** q6_k); the block then adds d_w * d_a times it, less dmin_w * d_a times
** the offsets' share, which the activation's bsums give without touching
** the elements:
**
**   sum_e (d sc_g q_e - dmin m_g) a_e  =  d_w d_a  sum_g sc_g sum_{e in g} q_e c_e
**                                       - dmin_w d_a  sum_g m_g bsums_g
**
** (c_e the int8 activation codes, a_e = d_a c_e).  The row's result is the
** blocks' contributions added in order by the canonical step (kquants.h),
** the same on every path and in every layout.  Element positions are
** kernels/ops/dequant_kquants.c's.
*/
#include "cpu_internal.h"
#include "kquants.h"

static const int8_t *act_codes(const uint8_t *a)
{
    return (const int8_t *)(a + Q8K_QS);
}

/* Each kernel first unpacks a block's codes into q[256] in element order,
** then takes plain int8 dot products per scale group: loops a compiler
** vectorizes, so the fallback is not needlessly slow. */
static int32_t dot_i8(const int8_t *q, const int8_t *c, int n)
{
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += q[i] * c[i];
    return s;
}

/* q2_k: codes 0..3; group g = e / 16 has scale scales[g] & 15 and offset
** scales[g] >> 4.  Element 128h + 32j + l: (qs[32h + l] >> 2j) & 3. */
static void dot_q2_k(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const uint8_t *w = w_row, *a = act_row;
    float acc = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q2K_BYTES, a += Q8K_BYTES) {
        const uint8_t *sc = w + Q2K_SCALES, *qs = w + Q2K_QS;
        int8_t q[KQ_N];
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 32; l++)
                    q[128 * h + 32 * j + l] = (int8_t)((qs[32 * h + l] >> (2 * j)) & 3);
        int32_t isum = 0, msum = 0;
        for (int g = 0; g < 16; g++) {
            isum += (sc[g] & 15) * dot_i8(q + 16 * g, act_codes(a) + 16 * g, 16);
            msum += (sc[g] >> 4) * kq_bsum(a, g);
        }
        float da = kq_f32(a + Q8K_D);
        acc = kq_step_min(acc, da * kq_half(w + Q2K_D), isum, da * kq_half(w + Q2K_DMIN), msum);
    }
    *out = acc;
}

/* q3_k: code = low 2 bits | high bit << 2, minus 4 (-4..3); group scale
** -32..31.  Element 128h + 32j + l: low (qs[32h + l] >> 2j) & 3, high
** (hmask[l] >> (4h + j)) & 1. */
static void dot_q3_k(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const uint8_t *w = w_row, *a = act_row;
    float acc = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q3K_BYTES, a += Q8K_BYTES) {
        const uint8_t *hm = w + Q3K_HMASK, *qs = w + Q3K_QS;
        int8_t sc[16], q[KQ_N];
        kq_unpack_q3_scales(w + Q3K_SCALES, sc);
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 32; l++)
                    q[128 * h + 32 * j + l] =
                        (int8_t)((((qs[32 * h + l] >> (2 * j)) & 3) | ((hm[l] >> (4 * h + j)) & 1) << 2) - 4);
        int32_t isum = 0;
        for (int g = 0; g < 16; g++) isum += sc[g] * dot_i8(q + 16 * g, act_codes(a) + 16 * g, 16);
        float da = kq_f32(a + Q8K_D);
        acc = kq_step(acc, da * kq_half(w + Q3K_D), isum);
    }
    *out = acc;
}

/* q4_k and q5_k: sub-block s = e / 32 has a 6-bit scale and offset;
** element 64c + 32t + l has the low (t = 0) or high (t = 1) nibble of
** qs[32c + l], and for q5_k a fifth bit (qh[l] >> (2c + t)) & 1. */
static void dot_k4(int64_t K, const uint8_t *w, const uint8_t *a, float *out, int five)
{
    int bytes = five ? Q5K_BYTES : Q4K_BYTES, qs_at = five ? Q5K_QS : Q4K_QS;
    float acc = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += bytes, a += Q8K_BYTES) {
        const uint8_t *qs = w + qs_at, *qh = w + Q5K_QH;
        uint8_t sc_m[16];
        int8_t q[KQ_N];
        kq_unpack_k4_scales(w + Q4K_SCALES, sc_m);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] = (int8_t)(qs[32 * c + l] & 0x0f);
                q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
            }
        if (five)
            for (int sb = 0; sb < 8; sb++)
                for (int l = 0; l < 32; l++) q[32 * sb + l] |= (int8_t)(((qh[l] >> sb) & 1) << 4);
        int32_t isum = 0, msum = 0;
        for (int sb = 0; sb < 8; sb++) {
            isum += sc_m[sb] * dot_i8(q + 32 * sb, act_codes(a) + 32 * sb, 32);
            msum += sc_m[8 + sb] * (kq_bsum(a, 2 * sb) + kq_bsum(a, 2 * sb + 1));
        }
        float da = kq_f32(a + Q8K_D);
        acc = kq_step_min(acc, da * kq_half(w + Q4K_D), isum, da * kq_half(w + Q4K_DMIN), msum);
    }
    *out = acc;
}

static void dot_q4_k(int64_t K, const void *w_row, const void *act_row, float *out)
{
    dot_k4(K, w_row, act_row, out, 0);
}

static void dot_q5_k(int64_t K, const void *w_row, const void *act_row, float *out)
{
    dot_k4(K, w_row, act_row, out, 1);
}

/* q6_k: code = low 4 | high 2 << 4, minus 32 (-32..31); int8 scale per
** group of 16.  Half h, quarter k, l: low from the low (k < 2) or high
** nibble of ql[64h + l + 32 (k & 1)], high (qh[32h + l] >> 2k) & 3. */
static void dot_q6_k(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const uint8_t *w = w_row, *a = act_row;
    float acc = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q6K_BYTES, a += Q8K_BYTES) {
        const uint8_t *ql = w + Q6K_QL, *qh = w + Q6K_QH;
        const int8_t *sc = (const int8_t *)(w + Q6K_SCALES);
        int8_t q[KQ_N];
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *lo = ql + 64 * h, hi = qh[32 * h + l];
                int8_t *qq = q + 128 * h;
                qq[l] = (int8_t)(((lo[l] & 0x0f) | (hi & 3) << 4) - 32);
                qq[32 + l] = (int8_t)(((lo[32 + l] & 0x0f) | ((hi >> 2) & 3) << 4) - 32);
                qq[64 + l] = (int8_t)(((lo[l] >> 4) | ((hi >> 4) & 3) << 4) - 32);
                qq[96 + l] = (int8_t)(((lo[32 + l] >> 4) | (hi >> 6) << 4) - 32);
            }
        int32_t isum = 0;
        for (int g = 0; g < 16; g++) isum += sc[g] * dot_i8(q + 16 * g, act_codes(a) + 16 * g, 16);
        float da = kq_f32(a + Q8K_D);
        acc = kq_step(acc, da * kq_half(w + Q6K_D), isum);
    }
    *out = acc;
}

static void set(int enc, CpuDotFn dot)
{
    cpu_enc[enc] = (CpuEncKernels){.act_fmt = CPU_ACT_Q8_K, .dot = dot, .isa = "portable"};
}

void cpu_fill_kquants_portable(void)
{
    set(RAD_ENC_Q2_K, dot_q2_k);
    set(RAD_ENC_Q3_K, dot_q3_k);
    set(RAD_ENC_Q4_K, dot_q4_k);
    set(RAD_ENC_Q5_K, dot_q5_k);
    set(RAD_ENC_Q6_K, dot_q6_k);
    cpu_act_quant[CPU_ACT_Q8_K] = cpu_quantize_row_q8k;
}
