/*
** ops_copy.c: the ops that move rows without arithmetic, all exact.
**
**   embed_lookup  out[m] = decode(table row ids[m])
**   gather_rows   out[m] = x[idx[m]]
**   kv_store      row m's keys and values into the slot of
**                 (token_seq[m], positions[m]), as kv->enc
**
** Bit-identical to ref by construction: embed_lookup decodes through
** rad_dequant_row (the definition of every encoding), gather_rows copies,
** and kv_store's f16 conversion rounds to nearest even exactly as
** rad_f32_to_f16 (F16C in AVX2, with ref's canonical NaN).  Every index and
** slot is checked before anything is written, with ref's error codes.
** Rows are split over tasks only when a prefill brings enough of them.
*/
#include <string.h>

#include "cpu_ops.h"

#define COPY_MIN_WORK 16384

typedef struct CopyJob {
    const RadKernelArgs *a;
    int64_t M, N;
    int n_tasks;
    const CpuVecOps *vec;
} CopyJob;

/* ------------------------------------------------------- embed_lookup */

static void embed_task(void *ctx, int t)
{
    const CopyJob *j = ctx;
    const RadTensor *table = &j->a->operand[RAD_EMBED_LOOKUP_TABLE];
    const RadTensor *out = &j->a->operand[RAD_EMBED_LOOKUP_OUT];
    const int32_t *id = j->a->operand[RAD_EMBED_LOOKUP_IDS].data;
    int64_t m0 = cpu_task_start(j->M, j->n_tasks, t), m1 = cpu_task_start(j->M, j->n_tasks, t + 1);
    for (int64_t m = m0; m < m1; m++) {
        const char *src = (const char *)table->data + (int64_t)id[m] * table->row_bytes;
        if (table->enc == RAD_ENC_F32) memcpy(rad_act_row(out, m), src, (size_t)j->N * sizeof(float));
        else rad_dequant_row(table->enc, src, rad_act_row(out, m), j->N);
    }
}

int cpu_embed_lookup(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_EMBED_LOOKUP_N].i;
    const RadTensor *table = &a->operand[RAD_EMBED_LOOKUP_TABLE];
    int rc = rad_check_embed_lookup(a);
    if (rc) return rc;

    /* Decoding a block-encoded row costs a few operations per element. */
    CopyJob j = {.a = a, .M = M, .N = N};
    j.n_tasks = cpu_task_count(a, M, table->enc == RAD_ENC_F32 ? N : 4 * N, COPY_MIN_WORK);
    cpu_parallel(a, j.n_tasks, embed_task, &j);
    return RAD_OK;
}

/* -------------------------------------------------------- gather_rows */

int cpu_gather_rows(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_GATHER_ROWS_N].i;
    const RadTensor *x = &a->operand[RAD_GATHER_ROWS_X];
    const RadTensor *idx = &a->operand[RAD_GATHER_ROWS_IDX];
    const RadTensor *out = &a->operand[RAD_GATHER_ROWS_OUT];
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    int64_t x_rows = x->rank >= 1 ? x->shape[0] : -1;
    if ((rc = rad_check_act(x, x_rows >= 0 ? x_rows : 2, N)) || (rc = rad_check_index(idx, M)) ||
        (rc = rad_check_act(out, M, N)))
        return rc;
    const int32_t *ix = idx->data;
    for (int64_t m = 0; m < M; m++)
        if (ix[m] < 0 || (x_rows >= 0 && ix[m] >= x_rows)) return RAD_E_RANGE;

    /* A few rows (the ones whose logits are wanted): no threads. */
    for (int64_t m = 0; m < M; m++)
        memcpy(rad_act_row(out, m), rad_act_row(x, ix[m]), (size_t)N * sizeof(float));
    return RAD_OK;
}

/* ----------------------------------------------------------- kv_store */

static void kv_store_task(void *ctx, int t)
{
    const CopyJob *j = ctx;
    const RadKvView *kv = j->a->kv;
    const RadTensor *k = &j->a->operand[RAD_KV_STORE_K];
    const RadTensor *v = &j->a->operand[RAD_KV_STORE_V];
    int64_t m0 = cpu_task_start(j->M, j->n_tasks, t), m1 = cpu_task_start(j->M, j->n_tasks, t + 1);
    for (int64_t m = m0; m < m1; m++) {
        int64_t slot = rad_kv_slot(kv, kv->token_seq[m], kv->positions[m]);
        char *kd = (char *)kv->k + slot * kv->kv_row_bytes;
        char *vd = (char *)kv->v + slot * kv->kv_row_bytes;
        if (kv->enc == RAD_ENC_F16) {
            j->vec->to_f16(rad_act_row(k, m), (uint16_t *)(void *)kd, j->N);
            j->vec->to_f16(rad_act_row(v, m), (uint16_t *)(void *)vd, j->N);
        } else {
            memcpy(kd, rad_act_row(k, m), (size_t)j->N * sizeof(float));
            memcpy(vd, rad_act_row(v, m), (size_t)j->N * sizeof(float));
        }
    }
}

int cpu_kv_store(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a);
    int64_t n_head_kv = a->param[RAD_KV_STORE_N_HEAD_KV].i, hd = a->param[RAD_KV_STORE_HEAD_DIM].i;
    const RadKvView *kv = a->kv;
    int64_t width = n_head_kv * hd;
    int rc;

    if (M <= 0 || n_head_kv <= 0 || hd <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_kv(kv, M, n_head_kv, hd)) ||
        (rc = rad_check_act(&a->operand[RAD_KV_STORE_K], M, width)) ||
        (rc = rad_check_act(&a->operand[RAD_KV_STORE_V], M, width)))
        return rc;
    /* Every row's slot first, so a missing block writes nothing at all. */
    for (int64_t m = 0; m < M; m++)
        if (rad_kv_slot(kv, kv->token_seq[m], kv->positions[m]) < 0) return RAD_E_RANGE;

    CopyJob j = {.a = a, .M = M, .N = width, .vec = cpu_vec()};
    j.n_tasks = cpu_task_count(a, M, 2 * width, COPY_MIN_WORK);
    cpu_parallel(a, j.n_tasks, kv_store_task, &j);
    return RAD_OK;
}
