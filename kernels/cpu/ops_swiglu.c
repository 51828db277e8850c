/*
** ops_swiglu.c: swiglu_oai, gpt-oss's clamped SwiGLU (docs/OPS.md):
**
**   g = min(gate, limit), u = clamp(up, -limit, limit)
**   out = g / (1 + e^(-alpha g)) * (u + 1)
**
** One scalar loop per element in f32 with libm's expf, the compiler free to
** vectorise the clamps and products; the exponential is what it costs, and
** the op runs over the M * k slot rows of an expert layer, a small part of
** the layer next to its expert products.  Rows are cut into tasks over the
** pool as ops_elementwise.c does (whole rows, so an element's arithmetic
** never depends on the split).  The clamps are comparisons, so a NaN passes
** through, as in ref and torch.clamp.
*/
#include <math.h>

#include "cpu_ops.h"

#define SWIGLU_MIN_WORK 8192    /* elements a task should carry */

typedef struct SwigluJob {
    const RadTensor *gate, *up, *out;
    int64_t M, N;
    float alpha, limit;
    int n_tasks;
} SwigluJob;

static void swiglu_task(void *ctx, int t)
{
    const SwigluJob *j = ctx;
    const int64_t r0 = cpu_task_start(j->M, j->n_tasks, t), r1 = cpu_task_start(j->M, j->n_tasks, t + 1);
    const float alpha = j->alpha, limit = j->limit;
    for (int64_t m = r0; m < r1; m++) {
        const float *gr = rad_act_row(j->gate, m), *ur = rad_act_row(j->up, m);
        float *o = rad_act_row(j->out, m);
        for (int64_t i = 0; i < j->N; i++) {
            float g = gr[i] > limit ? limit : gr[i];
            float u = ur[i] < -limit ? -limit : ur[i] > limit ? limit : ur[i];
            o[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
        }
    }
}

int cpu_swiglu_oai(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    const int64_t M = rad_op_rows(a), N = a->param[RAD_SWIGLU_OAI_N].i;
    const double alpha = a->param[RAD_SWIGLU_OAI_ALPHA].f, limit = (float)a->param[RAD_SWIGLU_OAI_LIMIT].f;
    int rc;
    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if (!(limit > 0) || !isfinite(limit) || !isfinite(alpha)) return RAD_E_ARG;
    if ((rc = rad_check_act(&o[RAD_GATED_GATE], M, N)) || (rc = rad_check_act(&o[RAD_GATED_UP], M, N)) ||
        (rc = rad_check_act(&o[RAD_GATED_OUT], M, N)))
        return rc;
    SwigluJob j = {.gate = &o[RAD_GATED_GATE], .up = &o[RAD_GATED_UP], .out = &o[RAD_GATED_OUT], .M = M, .N = N,
                   .alpha = (float)alpha, .limit = (float)limit};
    j.n_tasks = cpu_task_count(a, M, N * 4, SWIGLU_MIN_WORK);
    cpu_parallel(a, j.n_tasks, swiglu_task, &j);
    return RAD_OK;
}
