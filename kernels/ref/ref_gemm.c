/*
** ref_gemm.c: matrix products against a stored weight.
**
**   gemm_nt      out[m][n] = sum_k x[m][k] * W[n][k] + bias[n]
**   logits_gemm  the same without bias, then softcap * tanh(out / softcap)
**                when softcap > 0 (Gemma 2's final logit soft-cap)
**
** "nt": the weight is stored as PyTorch's nn.Linear keeps it, one row per
** output feature, so each output is the dot of an activation row with a
** weight row.  The weight row is decoded to f32 by rad_dequant_row, a chunk
** at a time, and the dot accumulates in double.
**
** For q8_0 weights the reference does not quantize the activations: it is
** the exact product of the f32 activations with the decoded weight.  A fast
** kernel that quantizes activations to q8_0 (as llama.cpp's CPU path does)
** carries that extra error and must still meet 5e-4 NMSE against this.
**
** out must not overlap x: row m of out is written while row m of x is
** still being read.
*/
#include <math.h>

#include "ref_internal.h"

/* The part both ops share: check, then out = x W^T (+ bias). */
static int gemm(const RadKernelArgs *a, int64_t N, int64_t K, int64_t enc, const RadTensor *x,
                const RadTensor *w, const RadTensor *bias, const RadTensor *out, double softcap)
{
    int64_t M = rad_op_rows(a);
    int rc;

    if (M <= 0 || N <= 0 || K <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, K)) || (rc = rad_check_weight(w, N, K)) ||
        (rc = rad_check_act(out, M, N)))
        return rc;
    /* The enc parameter chose this kernel; the weight must be what it said. */
    if (w->enc != enc) return RAD_E_ARG;
    if (bias && bias->data) {
        if (bias->enc != RAD_ENC_F32) return RAD_E_UNSUPPORTED;
        if (bias->rank != 1 || bias->shape[0] != N) return RAD_E_SHAPE;
    }
    const float *b = bias ? bias->data : NULL;

    for (int64_t m = 0; m < M; m++) {
        const float *xr = rad_act_row(x, m);
        float *o = rad_act_row(out, m);
        for (int64_t n = 0; n < N; n++) {
            double acc = ref_weight_dot(w, n, xr, K);
            if (b) acc += (double)b[n];
            if (softcap > 0) acc = softcap * tanh(acc / softcap);
            o[n] = (float)acc;
        }
    }
    return RAD_OK;
}

int ref_gemm_nt(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return gemm(a, a->param[RAD_GEMM_NT_N].i, a->param[RAD_GEMM_NT_K].i,
                a->param[RAD_GEMM_NT_ENC].i, &o[RAD_GEMM_NT_X], &o[RAD_GEMM_NT_W],
                &o[RAD_GEMM_NT_BIAS], &o[RAD_GEMM_NT_OUT], 0.0);
}

int ref_logits_gemm(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return gemm(a, a->param[RAD_LOGITS_GEMM_N].i, a->param[RAD_LOGITS_GEMM_K].i,
                a->param[RAD_LOGITS_GEMM_ENC].i, &o[RAD_LOGITS_GEMM_X], &o[RAD_LOGITS_GEMM_W],
                NULL, &o[RAD_LOGITS_GEMM_OUT], a->param[RAD_LOGITS_GEMM_SOFTCAP].f);
}
