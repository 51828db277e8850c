/*
** ref_common.c: weight decoding for the reference kernels, and why they
** check their arguments (the checks are inline in ref_internal.h).
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
#include "../ops/rad_dequant.h"

void ref_weight_decode(const RadTensor *w, int64_t row, int64_t k0, int64_t n, float *dst)
{
    const char *src = (const char *)w->data + row * w->row_bytes +
                      rad_encoding_row_bytes(w->enc, k0);
    /* The caller checked the weight with rad_check_weight, so this cannot
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
