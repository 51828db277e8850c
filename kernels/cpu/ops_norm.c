/*
** ops_norm.c: RMS normalisation in its three shapes, as kernels/ref/ref_norm.c
** defines them.
**
**   rmsnorm      out = x / sqrt(mean(x^2) + eps) * (w + w_offset)
**   rmsnorm_add  x += d, then out = rmsnorm(x)      (the residual stream)
**   qk_norm      rmsnorm of each head's head_dim slice of q or k, in place
**
** Accuracy: the sum of squares is accumulated in double (the AVX2 loop
** widens each lane and uses two double accumulators), so its error is
** negligible; 1 / sqrt(mean + eps) is computed in double and rounded once;
** the scaling is two f32 products, (x * r) * (w + w_offset), within 2 ulp
** of ref.  rmsnorm_add's residual add is one f32 add per element, the bits
** ref stores.
**
** Threading: whole rows per task (a row is never split, so its sum has one
** order whatever the thread count), and only when a task gets at least
** NORM_MIN_WORK elements: decode's single row runs on the calling thread.
*/
#include <math.h>

#include "cpu_ops.h"

#define NORM_MIN_WORK 8192

enum { NORM_PLAIN, NORM_ADD, NORM_QK };

typedef struct NormJob {
    int kind;
    const RadTensor *x, *d, *w, *out;
    int64_t M;
    int64_t n;              /* elements normalised together: N, or head_dim */
    int64_t per_row;        /* slices of n per row: 1, or n_head */
    double eps;
    float w_offset;
    int n_tasks;
    const CpuVecOps *vec;
} NormJob;

/* out[0..n) = x / rms(x) * (w + w_offset), given x's sum of squares. */
static void norm_slice(const NormJob *j, const float *x, float *out, double ss)
{
    float r = (float)(1.0 / sqrt(ss / (double)j->n + j->eps));
    if (j->w->enc == RAD_ENC_F32) {
        j->vec->norm_apply(x, r, j->w->data, j->w_offset, out, j->n);
        return;
    }
    float wbuf[CPU_CHUNK];
    for (int64_t k0 = 0; k0 < j->n; k0 += CPU_CHUNK) {
        int64_t len = j->n - k0 < CPU_CHUNK ? j->n - k0 : CPU_CHUNK;
        const char *src = (const char *)j->w->data + rad_encoding_row_bytes(j->w->enc, k0);
        rad_dequant_row(j->w->enc, src, wbuf, len);
        j->vec->norm_apply(x + k0, r, wbuf, j->w_offset, out + k0, len);
    }
}

static void norm_task(void *ctx, int t)
{
    const NormJob *j = ctx;
    int64_t m0 = cpu_task_start(j->M, j->n_tasks, t), m1 = cpu_task_start(j->M, j->n_tasks, t + 1);
    for (int64_t m = m0; m < m1; m++) {
        float *x = rad_act_row(j->x, m);
        switch (j->kind) {
        case NORM_PLAIN:
            norm_slice(j, x, rad_act_row(j->out, m), j->vec->sum_squares(x, j->n));
            break;
        case NORM_ADD: {
            /* x first (out may alias d, which the add has then read) */
            double ss = j->vec->add_sum_squares(x, rad_act_row(j->d, m), j->n);
            norm_slice(j, x, rad_act_row(j->out, m), ss);
            break;
        }
        case NORM_QK:
            for (int64_t h = 0; h < j->per_row; h++) {
                float *head = x + h * j->n;
                norm_slice(j, head, head, j->vec->sum_squares(head, j->n));
            }
            break;
        }
    }
}

static void norm_run(const RadKernelArgs *a, NormJob *j)
{
    j->vec = cpu_vec();
    j->n_tasks = cpu_task_count(a, j->M, j->n * j->per_row, NORM_MIN_WORK);
    cpu_parallel(a, j->n_tasks, norm_task, j);
}

int cpu_rmsnorm(const RadKernelArgs *a)
{
    NormJob j = {
        .kind = NORM_PLAIN, .M = rad_op_rows(a), .n = a->param[RAD_RMSNORM_N].i, .per_row = 1,
        .eps = a->param[RAD_RMSNORM_EPS].f, .w_offset = (float)a->param[RAD_RMSNORM_W_OFFSET].f,
        .x = &a->operand[RAD_RMSNORM_X], .w = &a->operand[RAD_RMSNORM_W],
        .out = &a->operand[RAD_RMSNORM_OUT],
    };
    int rc;
    if (j.M <= 0 || j.n <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(j.x, j.M, j.n)) || (rc = rad_check_weight(j.w, 1, j.n)) ||
        (rc = rad_check_act(j.out, j.M, j.n)))
        return rc;
    norm_run(a, &j);
    return RAD_OK;
}

int cpu_rmsnorm_add(const RadKernelArgs *a)
{
    NormJob j = {
        .kind = NORM_ADD, .M = rad_op_rows(a), .n = a->param[RAD_RMSNORM_ADD_N].i, .per_row = 1,
        .eps = a->param[RAD_RMSNORM_ADD_EPS].f,
        .w_offset = (float)a->param[RAD_RMSNORM_ADD_W_OFFSET].f,
        .x = &a->operand[RAD_RMSNORM_ADD_X], .d = &a->operand[RAD_RMSNORM_ADD_D],
        .w = &a->operand[RAD_RMSNORM_ADD_W], .out = &a->operand[RAD_RMSNORM_ADD_OUT],
    };
    int rc;
    if (j.M <= 0 || j.n <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(j.x, j.M, j.n)) || (rc = rad_check_act(j.d, j.M, j.n)) ||
        (rc = rad_check_weight(j.w, 1, j.n)) || (rc = rad_check_act(j.out, j.M, j.n)))
        return rc;
    norm_run(a, &j);
    return RAD_OK;
}

int cpu_qk_norm(const RadKernelArgs *a)
{
    NormJob j = {
        .kind = NORM_QK, .M = rad_op_rows(a), .n = a->param[RAD_QK_NORM_HEAD_DIM].i,
        .per_row = a->param[RAD_QK_NORM_N_HEAD].i, .eps = a->param[RAD_QK_NORM_EPS].f,
        .w_offset = (float)a->param[RAD_QK_NORM_W_OFFSET].f,
        .x = &a->operand[RAD_QK_NORM_X], .w = &a->operand[RAD_QK_NORM_W],
    };
    int rc;
    if (j.M <= 0 || j.per_row <= 0 || j.n <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(j.x, j.M, j.per_row * j.n)) || (rc = rad_check_weight(j.w, 1, j.n))) return rc;
    norm_run(a, &j);
    return RAD_OK;
}
