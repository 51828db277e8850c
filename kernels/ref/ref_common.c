/*
** ref_common.c: argument checks and weight decoding for the reference
** kernels.
**
** The core validates shapes when a model is declared, so in a correct
** program none of these checks fire.  They exist because the reference is
** also what a new kernel, a new plugin or a fuzzer is first run against, and
** a clear error code there is worth far more than the few comparisons it
** costs.  Checks only read the RadTensor fields; they never touch data.
*/
#include "ref_internal.h"

#include <assert.h>

#include "../../base/rad_types.h"
#include "rad_dequant.h"

int ref_check_act(const RadTensor *t, int64_t rows, int64_t cols)
{
    if (!t->data) return RAD_E_ARG;
    if (t->enc != RAD_ENC_F32) return RAD_E_UNSUPPORTED;
    if (t->row_bytes % (int64_t)sizeof(float)) return RAD_E_SHAPE;
    /* A single row needs no stride; more rows must not overlap. */
    if (rows > 1 && t->row_bytes < cols * (int64_t)sizeof(float)) return RAD_E_SHAPE;
    /* rank 0 means the core did not state a shape; trust the parameters. */
    if (t->rank >= 1 && t->shape[0] < rows) return RAD_E_SHAPE;
    return RAD_OK;
}

int ref_check_index(const RadTensor *t, int64_t n)
{
    if (!t->data) return RAD_E_ARG;
    if (t->enc != RAD_ENC_I32) return RAD_E_UNSUPPORTED;
    if (t->rank >= 1 && t->shape[0] < n) return RAD_E_SHAPE;
    return RAD_OK;
}

int ref_check_weight(const RadTensor *w, int64_t rows, int64_t cols)
{
    if (!w->data) return RAD_E_ARG;
    if (!rad_dequant_supported(w->enc)) return RAD_E_UNSUPPORTED;
    if (w->rank == 1) {
        if (rows != 1 || w->shape[0] != cols) return RAD_E_SHAPE;
    } else if (w->rank == 2) {
        if (w->shape[0] != rows || w->shape[1] != cols) return RAD_E_SHAPE;
    } else {
        return RAD_E_SHAPE;
    }
    int64_t need = rad_encoding_row_bytes(w->enc, cols);
    if (need < 0) return RAD_E_SHAPE;               /* not whole blocks */
    if (rows > 1 && w->row_bytes < need) return RAD_E_SHAPE;
    return RAD_OK;
}

void ref_weight_decode(const RadTensor *w, int64_t row, int64_t k0, int64_t n, float *dst)
{
    const char *src = (const char *)w->data + row * w->row_bytes +
                      rad_encoding_row_bytes(w->enc, k0);
    /* The caller checked the weight with ref_check_weight, so this cannot
    ** fail; a failure here is a bug in a kernel, not bad input. */
    int rc = rad_dequant_row(w->enc, src, dst, n);
    assert(rc == RAD_OK);
    (void)rc;
}

double ref_weight_dot(const RadTensor *w, int64_t row, const float *x, int64_t K)
{
    float buf[REF_CHUNK];
    double acc = 0.0;

    for (int64_t k0 = 0; k0 < K; k0 += REF_CHUNK) {
        int64_t n = K - k0 < REF_CHUNK ? K - k0 : REF_CHUNK;
        ref_weight_decode(w, row, k0, n, buf);
        for (int64_t k = 0; k < n; k++) acc += (double)buf[k] * (double)x[k0 + k];
    }
    return acc;
}
