/*
** dot_kquants_neon.c: q4_k and q6_k times Q8_K on aarch64 with the dotprod
** extension (sdot: four int8 products summed into each int32 lane).
**
** Signed codes go straight into sdot (q4_k's 0..15, q6_k's code - 32 in
** -32..31), each scale group's lanes are multiplied by its scale in int32,
** and the block's integer is the exact sum the portable file computes; the
** block then takes the canonical step (kquants.h), blocks in order.  So this file's results equal the portable
** ones bit for bit, which tests check under qemu.  q2_k, q3_k and q5_k stay
** on the portable kernels (which the compiler vectorizes with NEON).
*/
#if defined(__aarch64__)

#include <arm_neon.h>

#include "cpu_internal.h"
#include "kquants.h"

static void dot_q4_k(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const uint8_t *w = w_row, *a = act_row;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float acc = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q4K_BYTES, a += Q8K_BYTES) {
        uint8_t sc_m[16];
        kq_unpack_k4_scales(w + Q4K_SCALES, sc_m);
        const uint8_t *qs = w + Q4K_QS;
        const int8_t *c = (const int8_t *)(a + Q8K_QS);
        /* offsets: sum_s m_s * (bsums 2s + bsums 2s+1) */
        int16x8_t bs = vpaddq_s16(vld1q_s16((const int16_t *)(a + Q8K_BSUMS)),
                                  vld1q_s16((const int16_t *)(a + Q8K_BSUMS) + 8));
        int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(sc_m + 8)));
        int32x4_t mp = vmull_s16(vget_low_s16(bs), vget_low_s16(mins));
        mp = vmlal_high_s16(mp, bs, mins);
        int32x4_t sum = vdupq_n_s32(0);
        for (int j = 0; j < 4; j++) {
            uint8x16_t b0 = vld1q_u8(qs + 32 * j), b1 = vld1q_u8(qs + 32 * j + 16);
            int32x4_t lo =
                vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(b0, m4)), vld1q_s8(c + 64 * j));
            lo = vdotq_s32(lo, vreinterpretq_s8_u8(vandq_u8(b1, m4)), vld1q_s8(c + 64 * j + 16));
            int32x4_t hi =
                vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), vld1q_s8(c + 64 * j + 32));
            hi = vdotq_s32(hi, vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), vld1q_s8(c + 64 * j + 48));
            sum = vmlaq_n_s32(sum, lo, sc_m[2 * j]);
            sum = vmlaq_n_s32(sum, hi, sc_m[2 * j + 1]);
        }
        float da = kq_f32(a + Q8K_D);
        acc = kq_step_min(acc, da * kq_half(w + Q4K_D), vaddvq_s32(sum), da * kq_half(w + Q4K_DMIN),
                          vaddvq_s32(mp));
    }
    *out = acc;
}

static void dot_q6_k(int64_t K, const void *w_row, const void *act_row, float *out)
{
    const uint8_t *w = w_row, *a = act_row;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(3);
    const int8x16_t bias = vdupq_n_s8(32);
    float acc = 0.0f;
    for (int64_t b = 0; b < K / KQ_N; b++, w += Q6K_BYTES, a += Q8K_BYTES) {
        const int8_t *sc = (const int8_t *)(w + Q6K_SCALES), *c = (const int8_t *)(a + Q8K_QS);
        int32x4_t sum = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w + Q6K_QL + 64 * h, *qh = w + Q6K_QH + 32 * h;
            for (int t = 0; t < 2; t++) { /* l in 16t .. 16t + 15 */
                uint8x16_t l0 = vld1q_u8(ql + 16 * t), l1 = vld1q_u8(ql + 32 + 16 * t);
                uint8x16_t hb = vld1q_u8(qh + 16 * t);
                uint8x16_t q[4];
                q[0] = vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4));
                q[1] = vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4));
                q[2] = vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4));
                q[3] = vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4));
                for (int k = 0; k < 4; k++) {
                    /* elements 128h + 32k + 16t .., group 8h + 2k + t */
                    int8x16_t code = vsubq_s8(vreinterpretq_s8_u8(q[k]), bias);
                    int32x4_t p = vdotq_s32(vdupq_n_s32(0), code, vld1q_s8(c + 128 * h + 32 * k + 16 * t));
                    sum = vmlaq_n_s32(sum, p, sc[8 * h + 2 * k + t]);
                }
            }
        }
        float da = kq_f32(a + Q8K_D);
        acc = kq_step(acc, da * kq_half(w + Q6K_D), vaddvq_s32(sum));
    }
    *out = acc;
}

void cpu_fill_kquants_neon(void)
{
    cpu_enc[RAD_ENC_Q4_K] = (CpuEncKernels){.act_fmt = CPU_ACT_Q8_K, .dot = dot_q4_k, .isa = "neon"};
    cpu_enc[RAD_ENC_Q6_K] = (CpuEncKernels){.act_fmt = CPU_ACT_Q8_K, .dot = dot_q6_k, .isa = "neon"};
}

#endif /* __aarch64__ */
