/*
** act_q8_neon.c: the activation converters of act_q8.c with AArch64 NEON.
**
** Same bytes as the portable versions, which are the bytes of llama.cpp's
** x86 quantizer (act_q8.c).  Note that ggml's own ARM quantizer is not
** followed here: it takes id = 1 / d where x86 takes 127 / amax, so a few
** codes differ between llama.cpp on ARM and on x86; we keep one definition
** on every machine.  fcvtns (vcvtnq_s32_f32) rounds to nearest, ties to
** even, as x86's vroundps does, and the saturating narrows saturate as
** x86's packs do.
*/
#if defined(__aarch64__)
#include <arm_neon.h>

#include "../../base/rad_half.h"
#include "cpu_internal.h"

#define QK 32

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v & 0xff);
    p[1] = (unsigned char)(v >> 8);
}

static inline void q8_block(const float *x, unsigned char *d_at, unsigned char *s_at, unsigned char *qs)
{
    float32x4_t v[8];
    for (int j = 0; j < 8; j++) v[j] = vld1q_f32(x + 4 * j);
    float32x4_t m = vabsq_f32(v[0]);
    for (int j = 1; j < 8; j++) m = vmaxq_f32(m, vabsq_f32(v[j]));
    const float amax = vmaxvq_f32(m);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32x4_t q[8], sum = vdupq_n_s32(0);
    for (int j = 0; j < 8; j++) {
        q[j] = vcvtnq_s32_f32(vmulq_n_f32(v[j], id));
        sum = vaddq_s32(sum, q[j]);
    }
    for (int j = 0; j < 4; j++) {
        int16x8_t h = vcombine_s16(vqmovn_s32(q[2 * j]), vqmovn_s32(q[2 * j + 1]));
        vst1_s8((int8_t *)(void *)(qs + 8 * j), vqmovn_s16(h));
    }
    put_u16(d_at, rad_f32_to_f16(d));
    if (s_at) put_u16(s_at, rad_f32_to_f16(d * (float)vaddvq_s32(sum)));
}

void cpu_act_q8_0_neon(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    for (int64_t b = 0; b < K / QK; b++, x += QK, y += CPU_Q8_0_BYTES) q8_block(x, y, NULL, y + 2);
}

void cpu_act_q8_1_neon(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    for (int64_t b = 0; b < K / QK; b++, x += QK, y += CPU_Q8_1_BYTES) q8_block(x, y, y + 2, y + 4);
}

void cpu_act_f16_neon(const float *x, void *dst, int64_t K)
{
    unsigned char *y = dst;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4)
        vst1_u16((uint16_t *)(void *)(y + 2 * k), vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + k))));
    for (; k < K; k++) put_u16(y + 2 * k, rad_f32_to_f16(x[k]));
}
#endif
