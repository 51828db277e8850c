/*
** quantize_kref.c: f32 to q4_k, q5_k and q6_k exactly as llama.cpp writes
** them.
**
** These three are what llama.cpp's mixed recipes (Q4_K_M and friends) are
** made of, so a model converted here should be the model llama-quantize
** makes from the same weights: not just valid blocks, the same blocks.  The
** search below is therefore ggml's reference quantizer without an
** importance matrix (quantize_row_q{4,5,6}_K_ref in ggml-quants.c, which
** is what llama-quantize runs when no imatrix is given), restated step for
** step in f32 with the same order of operations; tests/unit/test_quantize.c
** compares our bytes with vectors ggml itself wrote
** (tests/unit/kquant_vectors.h, made by tests/unit/make_kquant_vectors.py).
**
** q4_k and q5_k (256 elements, 8 groups of 32, offset form x ~ s*q - m):
**   1. per group, weights w = sqrt(mean x^2) + |x|; the grid runs from
**      min(0, min x) to max x, nmax steps (15 or 31); the codes of the plain
**      grid, then of nstep + 1 stretched grids (nmax + rmin + rdelta*k steps:
**      q4_k -1.0 + 0.1k, k = 0..20; q5_k -0.5 + 0.1k, k = 0..15), each
**      refitted by weighted least squares (an offset above 0 is clamped and
**      the scale refitted alone); the least weighted squared error wins;
**   2. the 8 scales and 8 offsets become 6-bit integers of the largest:
**      d = max s / 63, dmin = max m / 63 (stored f16), integer
**      round(63 / max * s);
**   3. every element's code is round((x + dmin*m) / (d*sc)) under the
**      stored factors, clamped to 0..nmax.
** q6_k (256 elements, 16 groups of 16, symmetric x ~ s*q, q in -32..31):
**   1. per group, the element of largest magnitude maps to -32 (then
**      -32 + 0.1k, k = -9..9, k != 0), codes by rounding, scale refitted by
**      least squares weighted by x^2; the best fit wins;
**   2. the 16 scales become int8 of the largest: d = -max / 128 (f16),
**      integer min(127, round(-128 / max * s));
**   3. codes round(x / (d*sc)), clamped to -32..31.
** "round" is ggml's nearest_int: to nearest, halves to even, by adding
** 1.5 * 2^23 in f32.  A block whose factor overflows f16 is refused, as
** everywhere in quantize.c (ggml would store an infinity).
*/
#include "quantize_internal.h"

#include <math.h>
#include <string.h>

#include "rad_types.h"

#define QK_K 256
#define GROUP_MAX_EPS 1e-15f /* ggml's "all zero" threshold */

/* Round to nearest, ties to even, as ggml's nearest_int: the addition puts
** the integer in the mantissa's low bits (valid for |v| < 2^22). */
static inline int nearest_int(float v)
{
    float shifted = v + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

static inline int clamp_int(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ------------------------------------------------------ q4_k and q5_k */

/* Fit x[0..n) ~ scale * L - min_out with weights w (step 1 above);
** returns the scale, *min_out the offset (>= 0), L the codes. */
static float fit_offset_group(const float *x, const float *w, int n, int nmax, float rmin, float rdelta, int nstep,
                              uint8_t *L, float *min_out)
{
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *min_out = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min), scale = 1 / iscale, best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clamp_int(l, 0, nmax);
        float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    uint8_t aux[32];
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * (float)k + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
            aux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * aux[i] + this_min - x[i];
            err += w[i] * (diff * diff);
        }
        if (err < best_error) {
            memcpy(L, aux, (size_t)n);
            best_error = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *min_out = -min;
    return scale;
}

/* The 6-bit scale and offset of group j from the 12 packed bytes. */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* q4_k (nmax 15): d, dmin, scales[12], qs[128].  q5_k (nmax 31): d, dmin,
** scales[12], qh[32], qs[128].  Element 64c + 32t + l sits in the low
** (t = 0) or high (t = 1) nibble of qs[32c + l]; q5_k's fifth bit is bit
** 2c + t of qh[l]. */
/* Whether every |x| of the block stays under `limit`; else the refusal
** quantize.c gives for a scale f16 cannot carry (past this bound ggml's
** sums overflow f32 or its factor overflows f16). */
static int in_range(const float *x, uint8_t *scratch, const char *enc, int64_t first, float limit)
{
    for (int i = 0; i < QK_K; i++)
        if (fabsf(x[i]) > limit) return rad_qz_put_half(scratch, INFINITY, enc, x, QK_K, first, limit);
    return 0;
}

static int block_k4(const float *x, uint8_t *out, int64_t first, int nmax, const char *enc)
{
    /* d = (range / nmax) / 63 must fit an f16 */
    int rc = in_range(x, out, enc, first, 65504.0f * 63 * (float)nmax);
    if (rc) return rc;
    const float rmin = nmax == 15 ? -1.0f : -0.5f;
    const int nstep = nmax == 15 ? 20 : 15;
    uint8_t L[QK_K];
    float scales[8], mins[8], w[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = fit_offset_group(x + 32 * j, w, 32, nmax, rmin, 0.1f, nstep, L + 32 * j, &mins[j]);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t *sc12 = out + 4;
    memset(sc12, 0, 12);
    for (int j = 0; j < 8; j++) {
        /* ggml stores the rounded value in a uint8_t before capping it */
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]), lm = (uint8_t)nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            sc12[j] = ls;
            sc12[j + 4] = lm;
        } else {
            sc12[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            sc12[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc12[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    rc = rad_qz_put_half(out, max_scale / 63.0f, enc, x, QK_K, first, 65504.0 * 63 * nmax);
    if (!rc) rc = rad_qz_put_half(out + 2, max_min / 63.0f, enc, x, QK_K, first, 65504.0 * 63);
    if (rc) return rc;
    float d_all = rad_qz_get_half(out), dmin_all = rad_qz_get_half(out + 2);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        scale_min_k4(j, sc12, &sc, &m);
        const float d = d_all * (float)sc;
        if (!d) continue;
        const float dm = dmin_all * (float)m;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clamp_int(nearest_int((x[32 * j + i] + dm) / d), 0, nmax);
    }
    uint8_t *qh = nmax > 15 ? out + 16 : NULL, *qs = nmax > 15 ? out + 48 : out + 16;
    if (qh) memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
            if (qh) {
                qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
                lo &= 15;
                hi &= 15;
            }
            qs[32 * c + l] = (uint8_t)(lo | hi << 4);
        }
    return 0;
}

int rad_qz_block_q4_k(const float *x, uint8_t *out, int64_t first)
{
    return block_k4(x, out, first, 15, "q4_k");
}

int rad_qz_block_q5_k(const float *x, uint8_t *out, int64_t first)
{
    return block_k4(x, out, first, 31, "q5_k");
}

/* ------------------------------------------------------------ q6_k */

/* Fit x[0..n) ~ s * (L - nmax), L in 0..2 nmax - 1, weights x^2 (step 1). */
static float fit_signed_group(const float *x, int n, int nmax, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -(float)nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int k = -9; k <= 9; k++) {
        if (k == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)k) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Layout: ql[128], qh[64], scales[16] (int8), d.  Element 128h + 32k + l
** has u = code + 32 (0..63): u & 15 in the low (k < 2) or high nibble of
** ql[64h + l + 32 (k & 1)], u >> 4 at bits 2k of qh[32h + l]. */
int rad_qz_block_q6_k(const float *x, uint8_t *out, int64_t first)
{
    /* d = (amax / 32) / 128 must fit an f16 */
    int rc = in_range(x, out, "q6_k", first, 65504.0f * 4096);
    if (rc) return rc;
    int8_t L[QK_K];
    float scales[16], max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < 16; g++) {
        scales[g] = fit_signed_group(x + 16 * g, 16, 32, L + 16 * g);
        if (fabsf(scales[g]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[g]);
            max_scale = scales[g];
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(out, 0, 210);
        return 0;
    }
    float iscale = -128.0f / max_scale;
    rc = rad_qz_put_half(out + 208, 1 / iscale, "q6_k", x, QK_K, first, 65504.0 * 128 * 32);
    if (rc) return rc;
    int8_t *sc = (int8_t *)(out + 192);
    for (int g = 0; g < 16; g++) {
        int v = nearest_int(iscale * scales[g]);
        sc[g] = (int8_t)(v < 127 ? v : 127);
    }
    float d_all = rad_qz_get_half(out + 208);
    for (int g = 0; g < 16; g++) {
        float d = d_all * (float)sc[g];
        if (!d) continue;
        for (int i = 0; i < 16; i++) L[16 * g + i] = (int8_t)(clamp_int(nearest_int(x[16 * g + i] / d), -32, 31) + 32);
    }
    uint8_t *ql = out, *qh = out + 128;
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int8_t *b = L + 128 * h + l;
            ql[64 * h + l] = (uint8_t)((b[0] & 0xF) | (b[64] & 0xF) << 4);
            ql[64 * h + l + 32] = (uint8_t)((b[32] & 0xF) | (b[96] & 0xF) << 4);
            qh[32 * h + l] = (uint8_t)((b[0] >> 4) | (b[32] >> 4) << 2 | (b[64] >> 4) << 4 | (b[96] >> 4) << 6);
        }
    return 0;
}
