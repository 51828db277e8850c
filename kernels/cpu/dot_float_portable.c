/*
** dot_float_portable.c: dot products of f32, f16 and bf16 weight rows with
** activation rows of the same type, in plain C.
**
** As in llama.cpp, an f16 weight meets an f16 activation row and a bf16
** weight a bf16 row (act_q8.c rounds the activations), and an f32 weight
** the f32 activations themselves.  The products of two f16 or two bf16
** values are exact in f32; the sums are f32, in eight interleaved partial
** sums (element k goes to sum k % 8) added pairwise at the end, then the
** tail past the last multiple of 8 in order.  Eight partial sums let the
** compiler vectorise the loop without changing a single rounding.
*/
#include <string.h>

#include "../../base/rad_half.h"
#include "cpu_internal.h"

static inline float f16_at(const unsigned char *p, int64_t k)
{
    return rad_f16_to_f32((uint16_t)(p[2 * k] | p[2 * k + 1] << 8));
}

static inline float bf16_at(const unsigned char *p, int64_t k)
{
    return rad_bf16_to_f32((uint16_t)(p[2 * k] | p[2 * k + 1] << 8));
}

static inline float f32_at(const unsigned char *p, int64_t k)
{
    float v;
    memcpy(&v, p + 4 * k, 4);
    return v;
}

#define DOT_FLOAT(name, load)                                                              \
    static void name(int64_t K, const void *w_row, const void *act_row, float *out)       \
    {                                                                                      \
        const unsigned char *w = w_row, *a = act_row;                                      \
        float acc[8] = {0};                                                                \
        int64_t k = 0;                                                                     \
        for (; k + 8 <= K; k += 8)                                                         \
            for (int j = 0; j < 8; j++) acc[j] += load(w, k + j) * load(a, k + j);         \
        float tail = 0.0f;                                                                 \
        for (; k < K; k++) tail += load(w, k) * load(a, k);                                \
        *out = (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) + tail; \
    }

DOT_FLOAT(dot_f32, f32_at)
DOT_FLOAT(dot_f16, f16_at)
DOT_FLOAT(dot_bf16, bf16_at)

static void set(int enc, int act, CpuDotFn dot)
{
    cpu_enc[enc] = (CpuEncKernels){.act_fmt = act, .dot = dot, .isa = "portable"};
}

void cpu_fill_float_portable(void)
{
    cpu_act_quant[CPU_ACT_F32] = cpu_act_f32_portable;
    cpu_act_quant[CPU_ACT_F16] = cpu_act_f16_portable;
    cpu_act_quant[CPU_ACT_BF16] = cpu_act_bf16_portable;
    set(RAD_ENC_F32, CPU_ACT_F32, dot_f32);
    set(RAD_ENC_F16, CPU_ACT_F16, dot_f16);
    set(RAD_ENC_BF16, CPU_ACT_BF16, dot_bf16);
}
