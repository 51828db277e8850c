/*
** ref_moe.c: the mixture-of-experts ops.
**
**   router_topk  per row: score every expert, choose k, weight them
**   moe_gemm     out[m*k + j] = x_row . W[ids[m][j]]^T + bias[ids[m][j]]
**   moe_combine  out[m] = sum_j weights[m][j] * y[m*k + j]
**
** A MoE layer in these terms (Qwen3-MoE, Mixtral, OLMoE):
**     logits    = gemm_nt(h, W_router)
**     ids, wts  = router_topk(logits)
**     g, u      = moe_gemm(h, ids, W_gate), moe_gemm(h, ids, W_up)
**     a         = silu_mul(g, u)                  over M * k rows
**     y         = moe_gemm(a, ids, W_down)         one input row per slot
**     out       = moe_combine(y, wts)
** docs/OPS.md gives the exact rules; this file is them as loops.  Every
** sum is in double, rounded once at the store, as in the rest of ref.  A
** stacked weight's slice e is found through rad_slice_data, so experts
** that live apart (streamed into cache slots) read the same as a
** contiguous stack.
*/
#include <math.h>
#include <string.h>

#include "ref_internal.h"

/* --------------------------------------------------------- router_topk */

/* The best of the candidates in `allowed` not yet `taken` by score, the
** lower index on a tie (a strict > while walking up). */
static int64_t best_of(const double *score, const unsigned char *allowed, const unsigned char *taken, int64_t n)
{
    int64_t best = -1;
    for (int64_t e = 0; e < n; e++)
        if (allowed[e] && !taken[e] && (best < 0 || score[e] > score[best])) best = e;
    return best;
}

int ref_router_topk(const RadKernelArgs *a)
{
    int rc = rad_check_router(a);
    if (rc) return rc;
    const int64_t M = rad_op_rows(a), E = a->param[RAD_ROUTER_N_EXPERT].i, k = a->param[RAD_ROUTER_K].i;
    const int64_t mode = a->param[RAD_ROUTER_MODE].i, renorm = a->param[RAD_ROUTER_RENORM].i;
    const int64_t n_group = a->param[RAD_ROUTER_N_GROUP].i, topk_group = a->param[RAD_ROUTER_TOPK_GROUP].i;
    const double scale = a->param[RAD_ROUTER_SCALE].f;
    const RadTensor *logits = &a->operand[RAD_ROUTER_LOGITS];
    const float *bias = a->operand[RAD_ROUTER_BIAS].data;
    if (E > REF_MAX_EXPERTS) return RAD_E_UNSUPPORTED;
    /* A NaN logit has no place in an order: refuse before writing. */
    for (int64_t m = 0; m < M; m++) {
        const float *l = rad_act_row(logits, m);
        for (int64_t e = 0; e < E; e++)
            if (isnan(l[e])) return RAD_E_ARG;
    }

    double choice[REF_MAX_EXPERTS], group_score[REF_MAX_EXPERTS], w[REF_MAX_EXPERTS];
    unsigned char allowed[REF_MAX_EXPERTS], taken[REF_MAX_EXPERTS], all[REF_MAX_EXPERTS];
    int64_t id[REF_MAX_EXPERTS];
    memset(all, 1, sizeof all);
    for (int64_t m = 0; m < M; m++) {
        const float *l = rad_act_row(logits, m);
        for (int64_t e = 0; e < E; e++) {
            double s = mode == RAD_ROUTER_SIGMOID ? 1.0 / (1.0 + exp(-(double)l[e])) : (double)l[e];
            choice[e] = s + (bias ? (double)bias[e] : 0.0);
        }
        /* Group-limited: only the topk_group groups whose best two choice
        ** scores sum highest stay eligible. */
        memset(allowed, 1, (size_t)E);
        if (n_group > 1) {
            const int64_t gs = E / n_group;
            for (int64_t g = 0; g < n_group; g++) {
                memset(taken, 0, (size_t)gs);
                int64_t b1 = best_of(choice + g * gs, all, taken, gs);
                taken[b1] = 1;
                int64_t b2 = best_of(choice + g * gs, all, taken, gs);
                group_score[g] = choice[g * gs + b1] + choice[g * gs + b2];
            }
            unsigned char kept[REF_MAX_EXPERTS];
            memset(kept, 0, (size_t)n_group);
            for (int64_t t = 0; t < topk_group; t++) kept[best_of(group_score, all, kept, n_group)] = 1;
            for (int64_t e = 0; e < E; e++) allowed[e] = kept[e / gs];
        }
        memset(taken, 0, (size_t)E);
        for (int64_t j = 0; j < k; j++) {
            id[j] = best_of(choice, allowed, taken, E);
            taken[id[j]] = 1;
        }

        /* The weights: from the logits, never from the bias. */
        if (mode == RAD_ROUTER_SOFTMAX_TOPK) {
            double mx = l[0], sum = 0.0;
            for (int64_t e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
            for (int64_t e = 0; e < E; e++) sum += exp((double)l[e] - mx);
            for (int64_t j = 0; j < k; j++) w[j] = exp((double)l[id[j]] - mx) / sum;
        } else if (mode == RAD_ROUTER_TOPK_SOFTMAX) {
            double mx = l[id[0]], sum = 0.0;
            for (int64_t j = 1; j < k; j++) mx = l[id[j]] > mx ? l[id[j]] : mx;
            for (int64_t j = 0; j < k; j++) sum += exp((double)l[id[j]] - mx);
            for (int64_t j = 0; j < k; j++) w[j] = exp((double)l[id[j]] - mx) / sum;
        } else {
            for (int64_t j = 0; j < k; j++) w[j] = 1.0 / (1.0 + exp(-(double)l[id[j]]));
        }
        if (renorm == RAD_ROUTER_RENORM_ON) {
            double sum = 0.0;
            for (int64_t j = 0; j < k; j++) sum += w[j];
            for (int64_t j = 0; j < k; j++) w[j] /= sum;
        }
        int32_t *ids = rad_i32_row(&a->operand[RAD_ROUTER_IDS], m);
        float *wts = rad_act_row(&a->operand[RAD_ROUTER_WEIGHTS], m);
        for (int64_t j = 0; j < k; j++) {
            ids[j] = (int32_t)id[j];
            wts[j] = (float)(w[j] * scale);
        }
    }
    return RAD_OK;
}

/* ------------------------------------------------------------ moe_gemm */

int ref_moe_gemm(const RadKernelArgs *a)
{
    int rc = rad_check_moe_gemm(a);
    if (rc) return rc;
    const int64_t M = rad_op_rows(a), k = a->param[RAD_MOE_GEMM_K_USED].i;
    const int64_t N = a->param[RAD_MOE_GEMM_N].i, K = a->param[RAD_MOE_GEMM_K].i;
    const int per_slot = a->param[RAD_MOE_GEMM_X_PER_SLOT].i == RAD_MOE_X_PER_SLOT;
    const RadTensor *x = &a->operand[RAD_MOE_GEMM_X], *w = &a->operand[RAD_MOE_GEMM_W];
    const RadTensor *bias = &a->operand[RAD_MOE_GEMM_BIAS], *out = &a->operand[RAD_MOE_GEMM_OUT];
    const int has_bias = bias->data || bias->slices;

    for (int64_t m = 0; m < M; m++) {
        const int32_t *ids = rad_i32_row(&a->operand[RAD_MOE_GEMM_IDS], m);
        for (int64_t j = 0; j < k; j++) {
            /* Slice ids[m][j] as a plain [N, K] weight. */
            RadTensor slice = *w;
            slice.data = (void *)rad_slice_data(w, ids[j]);
            slice.rank = 2;
            slice.shape[0] = N;
            slice.shape[1] = K;
            slice.slices = NULL;
            const float *b = has_bias ? rad_slice_data(bias, ids[j]) : NULL;
            const float *xr = rad_act_row(x, per_slot ? m * k + j : m);
            float *o = rad_act_row(out, m * k + j);
            for (int64_t n = 0; n < N; n++) {
                double acc = ref_weight_dot(&slice, n, xr, K);
                if (b) acc += (double)b[n];
                o[n] = (float)acc;
            }
        }
    }
    return RAD_OK;
}

/* --------------------------------------------------------- moe_combine */

int ref_moe_combine(const RadKernelArgs *a)
{
    int rc = rad_check_moe_combine(a);
    if (rc) return rc;
    const int64_t M = rad_op_rows(a), k = a->param[RAD_MOE_COMBINE_K].i, N = a->param[RAD_MOE_COMBINE_N].i;
    const RadTensor *y = &a->operand[RAD_MOE_COMBINE_Y];

    for (int64_t m = 0; m < M; m++) {
        const float *wts = rad_act_row(&a->operand[RAD_MOE_COMBINE_WEIGHTS], m);
        float *o = rad_act_row(&a->operand[RAD_MOE_COMBINE_OUT], m);
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            for (int64_t j = 0; j < k; j++) acc += (double)wts[j] * (double)rad_act_row(y, m * k + j)[n];
            o[n] = (float)acc;
        }
    }
    return RAD_OK;
}
