/*
** ref_attention.c: the paged KV cache, written (kv_store) and read
** (attn_paged).
**
** The cache is a pool of blocks of block_size token slots; each batch
** sequence owns a row of block_table naming its blocks in position order
** (rad_kernel.h states the slot arithmetic).  A slot holds one token's keys
** for every KV head, n_head_kv * head_dim elements, and its values likewise.
**
** attn_paged is causal attention over that cache:
**
**   for row m (sequence s, position p) and head h, with kv head
**   g = h / (n_head / n_head_kv)                           (GQA)
**     visible j:  j <= p, and j > p - window when window > 0
**     logit_j  =  scale * (q_h . k_{g,j})
**                 then softcap * tanh(logit_j / softcap) when softcap > 0
**     out_h    =  sum_j e^logit_j v_{g,j} / (sum_j e^logit_j + e^sink_h)
**
** The sink term (gpt-oss) only enters the denominator.  The reference makes
** two passes over the visible keys: the first finds the largest logit (the
** sink included), which the second subtracts before exponentiating, so no
** exponential overflows.  Logits, the softmax and the weighted sum of values
** are all in double: the reference's error is then negligible against the
** 5e-4 NMSE asked of fast kernels, which keep everything in f32 or below.
*/
#include <math.h>
#include <string.h>

#include "../../base/rad_half.h"
#include "ref_internal.h"

/* Element i of head g in a slot of the K or V plane `plane`, as f32. */
static float kv_read(const RadKvView *kv, const void *plane, int64_t slot, int64_t g, int64_t i)
{
    const char *p = (const char *)plane + slot * kv->kv_row_bytes +
                    (g * kv->head_dim + i) * rad_kv_elem_bytes(kv);
    if (kv->enc == RAD_ENC_F16) {
        uint16_t h;
        memcpy(&h, p, sizeof h);
        return rad_f16_to_f32(h);
    }
    float f;
    memcpy(&f, p, sizeof f);
    return f;
}

int ref_kv_store(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a);
    int64_t n_head_kv = a->param[RAD_KV_STORE_N_HEAD_KV].i, hd = a->param[RAD_KV_STORE_HEAD_DIM].i;
    const RadTensor *k = &a->operand[RAD_KV_STORE_K];
    const RadTensor *v = &a->operand[RAD_KV_STORE_V];
    const RadKvView *kv = a->kv;
    int64_t width = n_head_kv * hd;
    int rc;

    if (M <= 0 || n_head_kv <= 0 || hd <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_kv(kv, M, n_head_kv, hd)) || (rc = rad_check_act(k, M, width)) ||
        (rc = rad_check_act(v, M, width)))
        return rc;

    /* Every row's slot first, so a missing block writes nothing at all. */
    for (int64_t m = 0; m < M; m++)
        if (rad_kv_slot(kv, kv->token_seq[m], kv->positions[m]) < 0) return RAD_E_RANGE;

    for (int64_t m = 0; m < M; m++) {
        int64_t slot = rad_kv_slot(kv, kv->token_seq[m], kv->positions[m]);
        char *kd = (char *)kv->k + slot * kv->kv_row_bytes;
        char *vd = (char *)kv->v + slot * kv->kv_row_bytes;
        const float *ks = rad_act_row(k, m), *vs = rad_act_row(v, m);
        for (int64_t i = 0; i < width; i++) {
            if (kv->enc == RAD_ENC_F16) {
                uint16_t hk = rad_f32_to_f16(ks[i]), hv = rad_f32_to_f16(vs[i]);
                memcpy(kd + 2 * i, &hk, 2);
                memcpy(vd + 2 * i, &hv, 2);
            } else {
                memcpy(kd + 4 * i, &ks[i], 4);
                memcpy(vd + 4 * i, &vs[i], 4);
            }
        }
    }
    return RAD_OK;
}

/* The parameters one (row, head) of attention needs. */
typedef struct AttnHead {
    const RadKvView *kv;
    int64_t seq, pos;           /* the row's sequence and position */
    int64_t first;              /* the earliest visible position */
    int64_t g;                  /* kv head */
    int64_t hd;
    double scale, softcap;
} AttnHead;

/* The logit of key position j for query q, or NAN when j has no slot. */
static double attn_logit(const AttnHead *ah, const float *q, int64_t j, int64_t *slot)
{
    *slot = rad_kv_slot(ah->kv, ah->seq, j);
    if (*slot < 0) return NAN;
    double dot = 0.0;
    for (int64_t i = 0; i < ah->hd; i++)
        dot += (double)q[i] * (double)kv_read(ah->kv, ah->kv->k, *slot, ah->g, i);
    double logit = ah->scale * dot;
    if (ah->softcap > 0) logit = ah->softcap * tanh(logit / ah->softcap);
    return logit;
}

/* Attention of one query head; has_sink says whether `sink` counts. */
static int attn_head(const AttnHead *ah, const float *q, float *out, int has_sink, double sink)
{
    double acc[REF_MAX_HEAD_DIM];
    int64_t slot;

    /* Pass 1: the largest logit, so that every exponent below is <= 0. */
    double top = has_sink ? sink : -INFINITY;
    for (int64_t j = ah->first; j <= ah->pos; j++) {
        double l = attn_logit(ah, q, j, &slot);
        if (slot < 0) return RAD_E_RANGE;
        if (l > top) top = l;
    }

    /* Pass 2: the softmax weights and the weighted sum of values. */
    double denom = has_sink ? exp(sink - top) : 0.0;
    for (int64_t i = 0; i < ah->hd; i++) acc[i] = 0.0;
    for (int64_t j = ah->first; j <= ah->pos; j++) {
        double e = exp(attn_logit(ah, q, j, &slot) - top);
        denom += e;
        for (int64_t i = 0; i < ah->hd; i++)
            acc[i] += e * (double)kv_read(ah->kv, ah->kv->v, slot, ah->g, i);
    }

    for (int64_t i = 0; i < ah->hd; i++) out[i] = (float)(acc[i] / denom);
    return RAD_OK;
}

/* The earliest key position a query at p sees: the last `window` positions
** (p itself included), or all of them when window is 0. */
static int64_t visible_from(int64_t p, int64_t window)
{
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

int ref_attn_paged(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a);
    int64_t n_head = a->param[RAD_ATTN_N_HEAD].i, n_head_kv = a->param[RAD_ATTN_N_HEAD_KV].i;
    int64_t hd = a->param[RAD_ATTN_HEAD_DIM].i, window = a->param[RAD_ATTN_WINDOW].i;
    const RadTensor *q = &a->operand[RAD_ATTN_Q];
    const RadTensor *out = &a->operand[RAD_ATTN_OUT];
    const RadTensor *sinks = &a->operand[RAD_ATTN_SINKS];
    const RadKvView *kv = a->kv;
    int rc;

    if ((rc = rad_check_attn(a, REF_MAX_HEAD_DIM))) return rc;

    AttnHead ah = {
        .kv = kv, .hd = hd,
        .scale = a->param[RAD_ATTN_SCALE].f, .softcap = a->param[RAD_ATTN_SOFTCAP].f,
    };
    /* Every visible key must have a slot; refuse before writing anything. */
    for (int64_t m = 0; m < M; m++) {
        int64_t p = kv->positions[m];
        if (p < 0) return RAD_E_RANGE;
        for (int64_t j = visible_from(p, window); j <= p; j++)
            if (rad_kv_slot(kv, kv->token_seq[m], j) < 0) return RAD_E_RANGE;
    }

    const float *sink = sinks->data;
    int64_t group = n_head / n_head_kv;
    for (int64_t m = 0; m < M; m++) {
        ah.seq = kv->token_seq[m];
        ah.pos = kv->positions[m];
        ah.first = visible_from(ah.pos, window);
        /* Each head reads only its own slice of q before writing its own
        ** slice of out, so out may alias q. */
        for (int64_t h = 0; h < n_head; h++) {
            ah.g = h / group;
            rc = attn_head(&ah, rad_act_row(q, m) + h * hd, rad_act_row(out, m) + h * hd,
                           sink != NULL, sink ? (double)sink[h] : 0.0);
            if (rc) return rc;
        }
    }
    return RAD_OK;
}
