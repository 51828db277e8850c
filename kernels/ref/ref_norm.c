/*
** ref_norm.c: RMS normalisation, in its three shapes.
**
**   rmsnorm      out = x / sqrt(mean(x^2) + eps) * (w + w_offset)
**   rmsnorm_add  x += d, then out = rmsnorm(x)      (the residual stream)
**   qk_norm      rmsnorm of each head's head_dim slice of q or k, in place
**
** w_offset exists for Gemma, whose checkpoints store w - 1 and normalise
** with (1 + w); Llama-style models pass 0.
**
** The sum of squares and the scaling are done in double and rounded to f32
** once, at the store: the reference's own rounding then sits far below the
** 1e-6 NMSE a faster f32 kernel is held to, so what a comparison measures is
** the fast kernel's error, not ours.
*/
#include <math.h>

#include "ref_internal.h"

/* Normalise one row of n floats.  `out` may equal `x`: every x[i] is read
** before out[i] is written, and the sum is complete before any write. */
static void norm_row(const float *x, float *out, int64_t n, const RadTensor *w,
                     double eps, double w_offset)
{
    float wbuf[REF_CHUNK];
    double ss = 0.0;

    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    double inv_rms = 1.0 / sqrt(ss / (double)n + eps);

    for (int64_t k0 = 0; k0 < n; k0 += REF_CHUNK) {
        int64_t len = n - k0 < REF_CHUNK ? n - k0 : REF_CHUNK;
        ref_weight_decode(w, 0, k0, len, wbuf);
        for (int64_t k = 0; k < len; k++)
            out[k0 + k] = (float)((double)x[k0 + k] * inv_rms * ((double)wbuf[k] + w_offset));
    }
}

int ref_rmsnorm(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_RMSNORM_N].i;
    double eps = a->param[RAD_RMSNORM_EPS].f, w_offset = a->param[RAD_RMSNORM_W_OFFSET].f;
    const RadTensor *x = &a->operand[RAD_RMSNORM_X];
    const RadTensor *w = &a->operand[RAD_RMSNORM_W];
    const RadTensor *out = &a->operand[RAD_RMSNORM_OUT];
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, N)) || (rc = rad_check_weight(w, 1, N)) ||
        (rc = rad_check_act(out, M, N)))
        return rc;

    for (int64_t m = 0; m < M; m++) norm_row(rad_act_row(x, m), rad_act_row(out, m), N, w, eps, w_offset);
    return RAD_OK;
}

int ref_rmsnorm_add(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_RMSNORM_ADD_N].i;
    double eps = a->param[RAD_RMSNORM_ADD_EPS].f;
    double w_offset = a->param[RAD_RMSNORM_ADD_W_OFFSET].f;
    const RadTensor *x = &a->operand[RAD_RMSNORM_ADD_X];
    const RadTensor *d = &a->operand[RAD_RMSNORM_ADD_D];
    const RadTensor *w = &a->operand[RAD_RMSNORM_ADD_W];
    const RadTensor *out = &a->operand[RAD_RMSNORM_ADD_OUT];
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, N)) || (rc = rad_check_act(d, M, N)) ||
        (rc = rad_check_weight(w, 1, N)) || (rc = rad_check_act(out, M, N)))
        return rc;

    for (int64_t m = 0; m < M; m++) {
        float *xr = rad_act_row(x, m);
        const float *dr = rad_act_row(d, m);
        /* The residual stays f32: this add rounds exactly as `add` does. */
        for (int64_t i = 0; i < N; i++) xr[i] = xr[i] + dr[i];
        norm_row(xr, rad_act_row(out, m), N, w, eps, w_offset);
    }
    return RAD_OK;
}

int ref_qk_norm(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a);
    int64_t n_head = a->param[RAD_QK_NORM_N_HEAD].i, hd = a->param[RAD_QK_NORM_HEAD_DIM].i;
    double eps = a->param[RAD_QK_NORM_EPS].f, w_offset = a->param[RAD_QK_NORM_W_OFFSET].f;
    const RadTensor *x = &a->operand[RAD_QK_NORM_X];
    const RadTensor *w = &a->operand[RAD_QK_NORM_W];
    int rc;

    if (M <= 0 || n_head <= 0 || hd <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, n_head * hd)) || (rc = rad_check_weight(w, 1, hd))) return rc;

    for (int64_t m = 0; m < M; m++)
        for (int64_t h = 0; h < n_head; h++) {
            float *head = rad_act_row(x, m) + h * hd;
            norm_row(head, head, hd, w, eps, w_offset);
        }
    return RAD_OK;
}
