/*
** ops_route.c: the two per-row ops around the expert products of a
** mixture-of-experts layer (docs/OPS.md):
**
**   router_topk  per row: a choice score per expert (logit, or sigmoid,
**                plus the correction bias), the group limit, the k best
**                (ties to the lower index), their weights from the logits
**   moe_combine  out[m] = sum_j weights[m][j] * y[m * k + j]
**
** Both are cheap next to the products (a router row is n_expert
** exponentials; a combine row k * N multiply-adds), so they are plain C,
** split over rows only when a step has enough of them to repay the pool.
** The arithmetic is the one docs/OPS.md states, in double as ref computes
** it, so the results are ref's bit for bit on every ISA: the combine's
** products of two floats are exact in double, so whether the compiler
** fuses them into multiply-adds changes nothing, and the sum runs over the
** slots in order j = 0..k-1 for every element.  A row's result depends on
** that row alone.
*/
#include <math.h>
#include <string.h>

#include "../ops/rad_op_values.h"
#include "cpu_ops.h"

#define ROUTE_MIN_WORK 16384            /* elements of work a task should carry */
#define COMBINE_CHUNK 256               /* columns summed together in double */

/* ----------------------------------------------------------- router_topk */

typedef struct RouteJob {
    const RadKernelArgs *a;
    int64_t M, E, k, mode, renorm, n_group, topk_group;
    double scale;
    const float *bias;
    int n_tasks;
} RouteJob;

/* Insert expert e with score s into the list of the best n so far (scores
** descending); a tie keeps the one already listed, which has the lower
** index since experts arrive in index order. */
static int keep_best(double *best_s, int32_t *best_e, int n, int cap, double s, int32_t e)
{
    if (n == cap && !(s > best_s[n - 1])) return n;
    int at = n < cap ? n : cap - 1;
    while (at > 0 && s > best_s[at - 1]) {
        best_s[at] = best_s[at - 1];
        best_e[at] = best_e[at - 1];
        at--;
    }
    best_s[at] = s;
    best_e[at] = e;
    return n < cap ? n + 1 : n;
}

static void route_row(const RouteJob *j, int64_t m, double *choice, unsigned char *allowed)
{
    const float *l = rad_act_row(&j->a->operand[RAD_ROUTER_LOGITS], m);
    const int64_t E = j->E, k = j->k;
    if (E <= 0 || E > CPU_MAX_EXPERTS) return;     /* checked by the launch; tells the compiler too */
    for (int64_t e = 0; e < E; e++) {
        double s = j->mode == RAD_ROUTER_SIGMOID ? 1.0 / (1.0 + exp(-(double)l[e])) : (double)l[e];
        choice[e] = s + (j->bias ? (double)j->bias[e] : 0.0);
    }
    memset(allowed, 1, (size_t)E);
    if (j->n_group > 1) {
        /* a group scores by the sum of its best two; the topk_group best groups stay */
        const int64_t gs = E / j->n_group;
        double g_s[CPU_MAX_EXPERTS], two_s[2];
        int32_t g_id[CPU_MAX_EXPERTS], two_e[2];
        int n_kept = 0;
        for (int64_t g = 0; g < j->n_group; g++) {
            int n = 0;
            for (int64_t e = 0; e < gs; e++) n = keep_best(two_s, two_e, n, 2, choice[g * gs + e], (int32_t)e);
            n_kept = keep_best(g_s, g_id, n_kept, (int)j->topk_group, two_s[0] + two_s[1], (int32_t)g);
        }
        memset(allowed, 0, (size_t)E);
        for (int t = 0; t < n_kept; t++) memset(allowed + g_id[t] * gs, 1, (size_t)gs);
    }
    double best_s[CPU_MAX_EXPERTS], w[CPU_MAX_EXPERTS];
    int32_t id[CPU_MAX_EXPERTS];
    int n = 0;
    for (int64_t e = 0; e < E; e++)
        if (allowed[e]) n = keep_best(best_s, id, n, (int)k, choice[e], (int32_t)e);

    /* the weights: from the logits, never from the bias */
    if (j->mode == RAD_ROUTER_SOFTMAX_TOPK) {
        double mx = l[0], sum = 0.0;
        for (int64_t e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        for (int64_t e = 0; e < E; e++) sum += exp((double)l[e] - mx);
        for (int64_t i = 0; i < k; i++) w[i] = exp((double)l[id[i]] - mx) / sum;
    } else if (j->mode == RAD_ROUTER_TOPK_SOFTMAX) {
        double mx = l[id[0]], sum = 0.0;
        for (int64_t i = 1; i < k; i++) mx = l[id[i]] > mx ? l[id[i]] : mx;
        for (int64_t i = 0; i < k; i++) sum += exp((double)l[id[i]] - mx);
        for (int64_t i = 0; i < k; i++) w[i] = exp((double)l[id[i]] - mx) / sum;
    } else {
        for (int64_t i = 0; i < k; i++) w[i] = 1.0 / (1.0 + exp(-(double)l[id[i]]));
    }
    if (j->renorm == RAD_ROUTER_RENORM_ON) {
        double sum = 0.0;
        for (int64_t i = 0; i < k; i++) sum += w[i];
        for (int64_t i = 0; i < k; i++) w[i] /= sum;
    }
    int32_t *ids = rad_i32_row(&j->a->operand[RAD_ROUTER_IDS], m);
    float *wts = rad_act_row(&j->a->operand[RAD_ROUTER_WEIGHTS], m);
    for (int64_t i = 0; i < k; i++) {
        ids[i] = id[i];
        wts[i] = (float)(w[i] * j->scale);
    }
}

static void route_task(void *ctx, int t)
{
    const RouteJob *j = ctx;
    double choice[CPU_MAX_EXPERTS];
    unsigned char allowed[CPU_MAX_EXPERTS];
    for (int64_t m = cpu_task_start(j->M, j->n_tasks, t); m < cpu_task_start(j->M, j->n_tasks, t + 1); m++)
        route_row(j, m, choice, allowed);
}

int cpu_router_topk(const RadKernelArgs *a)
{
    int rc = rad_check_router(a);
    if (rc) return rc;
    RouteJob j = {
        .a = a, .M = rad_op_rows(a), .E = a->param[RAD_ROUTER_N_EXPERT].i, .k = a->param[RAD_ROUTER_K].i,
        .mode = a->param[RAD_ROUTER_MODE].i, .renorm = a->param[RAD_ROUTER_RENORM].i,
        .n_group = a->param[RAD_ROUTER_N_GROUP].i, .topk_group = a->param[RAD_ROUTER_TOPK_GROUP].i,
        .scale = a->param[RAD_ROUTER_SCALE].f, .bias = a->operand[RAD_ROUTER_BIAS].data,
    };
    if (j.E > CPU_MAX_EXPERTS) return RAD_E_UNSUPPORTED;    /* the row's constraint keeps such a router on ref */
    /* a NaN logit has no place in an order: refuse before writing */
    for (int64_t m = 0; m < j.M; m++) {
        const float *l = rad_act_row(&a->operand[RAD_ROUTER_LOGITS], m);
        for (int64_t e = 0; e < j.E; e++)
            if (isnan(l[e])) return RAD_E_ARG;
    }
    j.n_tasks = cpu_task_count(a, j.M, 8 * j.E, ROUTE_MIN_WORK);
    cpu_parallel(a, j.n_tasks, route_task, &j);
    return RAD_OK;
}

/* ----------------------------------------------------------- moe_combine */

typedef struct CombineJob {
    const RadTensor *y, *weights, *out;
    int64_t M, k, N;
    int n_tasks;
} CombineJob;

static void combine_task(void *ctx, int t)
{
    const CombineJob *j = ctx;
    double acc[COMBINE_CHUNK];
    for (int64_t m = cpu_task_start(j->M, j->n_tasks, t); m < cpu_task_start(j->M, j->n_tasks, t + 1); m++) {
        const float *w = rad_act_row(j->weights, m);
        float *o = rad_act_row(j->out, m);
        for (int64_t n0 = 0; n0 < j->N; n0 += COMBINE_CHUNK) {
            int64_t n = j->N - n0 < COMBINE_CHUNK ? j->N - n0 : COMBINE_CHUNK;
            for (int64_t i = 0; i < n; i++) acc[i] = 0.0;
            for (int64_t s = 0; s < j->k; s++) {
                const double ws = (double)w[s];
                const float *y = rad_act_row(j->y, m * j->k + s) + n0;
                for (int64_t i = 0; i < n; i++) acc[i] += ws * (double)y[i];
            }
            for (int64_t i = 0; i < n; i++) o[n0 + i] = (float)acc[i];
        }
    }
}

int cpu_moe_combine(const RadKernelArgs *a)
{
    int rc = rad_check_moe_combine(a);
    if (rc) return rc;
    CombineJob j = {
        .y = &a->operand[RAD_MOE_COMBINE_Y], .weights = &a->operand[RAD_MOE_COMBINE_WEIGHTS],
        .out = &a->operand[RAD_MOE_COMBINE_OUT], .M = rad_op_rows(a), .k = a->param[RAD_MOE_COMBINE_K].i,
        .N = a->param[RAD_MOE_COMBINE_N].i,
    };
    j.n_tasks = cpu_task_count(a, j.M, j.k * j.N, ROUTE_MIN_WORK);
    cpu_parallel(a, j.n_tasks, combine_task, &j);
    return RAD_OK;
}
