/*
** ref_copy.c: the ops that move rows without arithmetic.
**
**   embed_lookup  out[m] = decode(table row ids[m])
**   gather_rows   out[m] = x[idx[m]]
**
** Both are exact: a faster kernel must produce the same bits.  Both refuse
** an index outside the source with RAD_E_RANGE before writing anything, so a
** bad token id never leaves a half-written buffer behind.
*/
#include <string.h>

#include "ref_internal.h"
#include "../ops/rad_dequant.h"

int ref_embed_lookup(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_EMBED_LOOKUP_N].i;
    const RadTensor *table = &a->operand[RAD_EMBED_LOOKUP_TABLE];
    const RadTensor *out = &a->operand[RAD_EMBED_LOOKUP_OUT];
    int rc = rad_check_embed_lookup(a);
    if (rc) return rc;
    const int32_t *id = a->operand[RAD_EMBED_LOOKUP_IDS].data;

    for (int64_t m = 0; m < M; m++) {
        const char *src = (const char *)table->data + (int64_t)id[m] * table->row_bytes;
        rc = rad_dequant_row(table->enc, src, rad_act_row(out, m), N);
        if (rc) return rc;
    }
    return RAD_OK;
}

int ref_gather_rows(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_GATHER_ROWS_N].i;
    const RadTensor *x = &a->operand[RAD_GATHER_ROWS_X];
    const RadTensor *idx = &a->operand[RAD_GATHER_ROWS_IDX];
    const RadTensor *out = &a->operand[RAD_GATHER_ROWS_OUT];
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    /* x holds as many rows as its producer wrote: shape[0] when the core
    ** states it (rank >= 1).  Unstated, only negative indices can be refused,
    ** and the stride is checked as if x had several rows. */
    int64_t x_rows = x->rank >= 1 ? x->shape[0] : -1;
    if ((rc = rad_check_act(x, x_rows >= 0 ? x_rows : 2, N)) ||
        (rc = rad_check_index(idx, M)) || (rc = rad_check_act(out, M, N)))
        return rc;

    const int32_t *ix = idx->data;
    for (int64_t m = 0; m < M; m++)
        if (ix[m] < 0 || (x_rows >= 0 && ix[m] >= x_rows)) return RAD_E_RANGE;

    for (int64_t m = 0; m < M; m++)
        memcpy(rad_act_row(out, m), rad_act_row(x, ix[m]), (size_t)N * sizeof(float));
    return RAD_OK;
}
