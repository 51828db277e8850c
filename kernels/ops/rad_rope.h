/*
** rad_rope.h: the parameter arithmetic of rope that every library must do
** the same way, to the bit, because an ulp of an inverse frequency moves
** the angle at position 8000 by 5e-4 rad (docs/OPS.md, rope): YaRN's
** correction range and its attention factor, evaluated in double as
** transformers evaluates them in Python floats.  The per-pair f32 steps are
** each library's own (kernels/ref/ref_rope.c states them).
*/
#ifndef RAD_ROPE_H
#define RAD_ROPE_H

#include <math.h>
#include <stdint.h>

/* YaRN's correction range, as transformers' _compute_yarn_parameters finds
** it, in double (Python floats): the dim at which pair frequencies turn
** `rot` times over the original context,
**   dim(rot) = n_rot * ln(orig_ctx / (rot * 2 pi)) / (2 ln theta),
** low = dim(beta_fast), high = dim(beta_slow), floored and ceiled when
** truncating, clamped to [0, n_rot - 1]; equal ends are moved 0.001 apart.
** The ramp then runs from pair `low` (kept) to pair `high` (stretched). */
static inline void rad_rope_yarn_range(double theta, int64_t n_rot, int64_t orig_ctx, double beta_fast,
                                       double beta_slow, int truncate, double *low, double *high)
{
    const double pi = 3.14159265358979323846;
    double bf = beta_fast > 0 ? beta_fast : 32.0, bs = beta_slow > 0 ? beta_slow : 1.0;
    double lo = ((double)n_rot * log((double)orig_ctx / (bf * 2.0 * pi))) / (2.0 * log(theta));
    double hi = ((double)n_rot * log((double)orig_ctx / (bs * 2.0 * pi))) / (2.0 * log(theta));
    if (truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    if (lo < 0) lo = 0;
    if (hi > (double)(n_rot - 1)) hi = (double)(n_rot - 1);
    if (lo == hi) hi += 0.001;
    *low = lo;
    *high = hi;
}

/* YaRN's factor on cos and sin: the given attn_factor, or when 0 the
** paper's 0.1 ln(factor) + 1 (1 for factor <= 1), as transformers' default. */
static inline double rad_rope_yarn_attn(double attn_factor, double factor)
{
    if (attn_factor > 0) return attn_factor;
    return factor <= 1.0 ? 1.0 : 0.1 * log(factor) + 1.0;
}

#endif /* RAD_ROPE_H */
