/*
** quantize_kquants.c: f32 to q2_k, q3_k and iq4_nl (q4_k, q5_k and q6_k,
** the k-quants llama.cpp's recipes use, follow ggml's own quantizer in
** quantize_kref.c).
**
** These encodings have more freedom than one scale per block: a k-quant
** super-block of 256 has a small integer scale (and offset) per sub-block
** of 16 or 32, multiplying one or two f16 factors; iq4_nl maps its codes
** through a non-uniform grid.  The best choice is a search, and this file's
** search is our own, written from the formats (kernels/ops/dequant*.c
** define what the bytes mean).  It is not llama.cpp's make_qkx2_quants /
** make_qx_quants family, so the bytes differ from llama.cpp's, but every
** block is valid GGUF and decodes anywhere; the round-trip error is within
** llama.cpp's own test limits (tests/unit/test_quantize.c measures it).
**
** The steps, for each super-block:
**
**  1. Fit each sub-block on its own, in full precision:
**     - with offset (q2_k): x ~ s * q - o, q in 0..nmax,
**       s >= 0, o >= 0.  The grid starts at min(0, min x) and ends at max x;
**       candidate grids of nmax + t/10 steps over that span (t = -10..10)
**       assign codes by rounding, then s and o are refitted by least squares
**       on those codes (o clamped at 0, refitting s alone); the candidate
**       with the least squared error wins.
**     - symmetric (q3_k): x ~ s * q, q in qlo..qhi (qlo = -qhi - 1).
**       Candidates map the element of largest magnitude to qlo + t/10
**       (t = -10..10), round, refit s = sum(qx) / sum(q^2), keep the best.
**  2. Quantize the sub-block scales to the format's integers: the largest
**     scale (offset) sets the super-block factor, d = max / top (dmin
**     likewise; for the signed scales d = smax / qlo_scale, so the largest
**     magnitude takes the extra negative level), stored as f16; each
**     integer is round(s / d) with d as stored, clamped to its range.
**  3. Give every element the nearest code under the scales as stored,
**     computed the way the decoder will: (d * sc) and (dmin * m) in f32.
**
** iq4_nl (32 elements, one f16 d, codes into the grid g) tries inverse
** scales that map the element of largest magnitude to each end of the grid
** (-127 and 113) give or take 7 grid units, picks the nearest grid point
** for each element, refits d = sum(g x) / sum(g^2) and keeps the best; the
** final codes are the nearest grid points under d as stored.
**
** Rounding is to nearest with halves away from zero (roundf); the grid's
** nearest point takes the lower of two equidistant ones.  Inputs are
** finite (quantize.c checks).  A factor that overflows f16 is refused.
*/
#include "quantize_internal.h"

#include <math.h>
#include <string.h>

#include "rad_types.h"

#define QK_K  256
#define NSTEP 10   /* candidates t = -NSTEP..NSTEP */
#define STEP  0.1f /* in codes */

/* ------------------------------------------------------- sub-block fits */

/* Fit x[0..n) ~ s * q - o with q in 0..nmax, s >= 0, o >= 0 (step 1). */
static void fit_offset(const float *x, int n, int nmax, float *s_out, float *o_out)
{
    float lo = 0.0f, hi = x[0];
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *s_out = 0.0f;
    *o_out = -lo;
    if (!(hi > lo)) return; /* all equal (to lo <= 0) */

    double sx = 0, sxx = 0, best_err = -1.0;
    for (int j = 0; j < n; j++) {
        sx += x[j];
        sxx += (double)x[j] * x[j];
    }
    for (int t = -NSTEP; t <= NSTEP; t++) {
        float iscale = ((float)nmax + STEP * (float)t) / (hi - lo);
        int sq = 0, sqq = 0; /* exact: at most 32 * 31^2 */
        double sqx = 0;
        for (int j = 0; j < n; j++) {
            int q = rad_qz_round((x[j] - lo) * iscale, 0, nmax);
            sq += q;
            sqq += q * q;
            sqx += (double)q * x[j];
        }
        /* least squares x ~ a q + b over these codes, with b = -o <= 0 */
        double den = (double)n * sqq - (double)sq * sq, a, b;
        if (den <= 0) continue; /* every code equal */
        a = (n * sqx - sq * sx) / den;
        b = (sx - a * sq) / n;
        if (b > 0) {
            b = 0;
            a = sqx / sqq;
        }
        if (!(a >= 0)) continue;
        /* sum (a q + b - x)^2, expanded */
        double err = a * a * sqq + 2 * a * b * sq + n * b * b - 2 * a * sqx - 2 * b * sx + sxx;
        if (best_err < 0 || err < best_err) {
            best_err = err;
            *s_out = (float)a;
            *o_out = (float)-b;
        }
    }
    if (best_err < 0) { /* no candidate spread the codes: the plain grid */
        *s_out = (hi - lo) / (float)nmax;
        *o_out = -lo;
    }
}

/* Fit x[0..n) ~ s * q with q in qlo..qhi (qlo < 0 < qhi); s may be
** negative (the largest magnitude lands on the qlo side). */
static float fit_signed(const float *x, int n, int qlo, int qhi)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax == 0.0f) return 0.0f;

    double best_gain = -1.0;
    float best = 0.0f;
    for (int t = -NSTEP; t <= NSTEP; t++) {
        float iscale = ((float)qlo + STEP * (float)t) / max;
        double sqx = 0;
        int sqq = 0; /* exact: at most 16 * 32^2 */
        for (int j = 0; j < n; j++) {
            int q = rad_qz_round(x[j] * iscale, qlo, qhi);
            sqx += (double)q * x[j];
            sqq += q * q;
        }
        /* the least-squares s = sqx / sqq leaves sum x^2 - sqx^2 / sqq */
        if (sqq > 0 && sqx * sqx / sqq > best_gain) {
            best_gain = sqx * sqx / sqq;
            best = (float)(sqx / sqq);
        }
    }
    return best;
}

/* ------------------------------------------------- super-block factors */

/* The factor for integers in 0..top that multiply scales s[0..n) (all
** >= 0), stored as f16 at out; the integers go to `ints`.  Returns 0 or the
** f16 overflow refusal. */
static int unsigned_factor(const float *s, int n, int top, uint8_t *out, int *ints, const char *enc,
                           const float *x, int64_t first, double limit)
{
    float max = 0.0f;
    for (int j = 0; j < n; j++) max = s[j] > max ? s[j] : max;
    int rc = rad_qz_put_half(out, max / (float)top, enc, x, QK_K, first, limit);
    if (rc) return rc;
    float d = rad_qz_get_half(out);
    for (int j = 0; j < n; j++) ints[j] = d > 0.0f ? rad_qz_round(s[j] / d, 0, top) : 0;
    return 0;
}

/* The factor for integers in lo..hi (lo = -hi - 1) that multiply signed
** scales s[0..n): d = (scale of largest magnitude) / lo. */
static int signed_factor(const float *s, int n, int lo, int hi, uint8_t *out, int *ints, const char *enc,
                         const float *x, int64_t first, double limit)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(s[j]) > amax) {
            amax = fabsf(s[j]);
            max = s[j];
        }
    int rc = rad_qz_put_half(out, max / (float)lo, enc, x, QK_K, first, limit);
    if (rc) return rc;
    float d = rad_qz_get_half(out);
    for (int j = 0; j < n; j++) ints[j] = d != 0.0f ? rad_qz_round(s[j] / d, lo, hi) : 0;
    return 0;
}

/* Codes for x[0..n) under the stored scale d * sc and offset dmin * m,
** formed as the decoder forms them. */
static void offset_codes(const float *x, int n, float d, int sc, float dmin, int m, int nmax, int *q)
{
    float s = d * (float)sc, o = dmin * (float)m;
    for (int j = 0; j < n; j++) q[j] = s > 0.0f ? rad_qz_round((x[j] + o) / s, 0, nmax) : 0;
}

static void signed_codes(const float *x, int n, float d, int sc, int qlo, int qhi, int *q)
{
    float s = d * (float)sc;
    for (int j = 0; j < n; j++) q[j] = s != 0.0f ? rad_qz_round(x[j] / s, qlo, qhi) : 0;
}

/* ------------------------------------------------------------ q2_k */

/* Layout (kernels/ops/dequant_kquants.c): scales[16] (scale | offset << 4),
** qs[64], d, dmin.  Element e = 128h + 32j + l: 2 bits at qs[32h + l],
** shift 2j; group e / 16. */
int rad_qz_block_q2_k(const float *x, uint8_t *out, int64_t first)
{
    float s[16], o[16];
    int sc[16], m[16], q[QK_K];
    for (int g = 0; g < 16; g++) fit_offset(x + 16 * g, 16, 3, &s[g], &o[g]);
    int rc = unsigned_factor(s, 16, 15, out + 80, sc, "q2_k", x, first, 65504.0 * 15 * 3);
    if (!rc) rc = unsigned_factor(o, 16, 15, out + 82, m, "q2_k", x, first, 65504.0 * 15);
    if (rc) return rc;
    float d = rad_qz_get_half(out + 80), dmin = rad_qz_get_half(out + 82);
    for (int g = 0; g < 16; g++) {
        offset_codes(x + 16 * g, 16, d, sc[g], dmin, m[g], 3, q + 16 * g);
        out[g] = (uint8_t)(sc[g] | m[g] << 4);
    }
    memset(out + 16, 0, 64);
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, j = e % 128 / 32, l = e % 32;
        out[16 + 32 * h + l] |= (uint8_t)(q[e] << (2 * j));
    }
    return 0;
}

/* ------------------------------------------------------------ q3_k */

/* Layout: hmask[32], qs[64], scales[12] (16 six-bit scale + 32), d.
** Element e = 128h + 32j + l has u = code + 4 (0..7): u & 3 at qs[32h + l]
** shift 2j, u >> 2 at hmask[l] bit 4h + j. */
int rad_qz_block_q3_k(const float *x, uint8_t *out, int64_t first)
{
    float s[16];
    int sc[16], q[QK_K];
    for (int g = 0; g < 16; g++) s[g] = fit_signed(x + 16 * g, 16, -4, 3);
    int rc = signed_factor(s, 16, -32, 31, out + 108, sc, "q3_k", x, first, 65504.0 * 32 * 4);
    if (rc) return rc;
    float d = rad_qz_get_half(out + 108);
    for (int g = 0; g < 16; g++) signed_codes(x + 16 * g, 16, d, sc[g], -4, 3, q + 16 * g);

    memset(out, 0, 108);
    uint8_t *hmask = out, *qs = out + 32, *scales = out + 96;
    for (int e = 0; e < QK_K; e++) {
        int h = e / 128, j = e % 128 / 32, l = e % 32, u = q[e] + 4;
        qs[32 * h + l] |= (uint8_t)((u & 3) << (2 * j));
        hmask[l] |= (uint8_t)((u >> 2) << (4 * h + j));
    }
    for (int g = 0; g < 16; g++) {
        int u = sc[g] + 32;
        scales[g < 8 ? g : g - 8] |= (uint8_t)((u & 15) << (g < 8 ? 0 : 4));
        scales[8 + g % 4] |= (uint8_t)((u >> 4) << (2 * (g / 4)));
    }
    return 0;
}

/* ---------------------------------------------------------- iq4_nl */

static const int8_t iq4_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* The index of the grid point nearest v, the lower of two equidistant:
** the number of midpoints between neighbours that v is past (the grid is
** of integers, so the midpoints are exact; NaN is past none). */
static const float iq4_mid[15] = {-115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f, -4.5f,
                                  7.0f,    19.0f,  31.5f,  45.5f,  61.0f,  79.0f,  101.0f};

static int nearest_grid(float v)
{
    int k = 0;
    for (int i = 0; i < 15; i++) k += v > iq4_mid[i];
    return k;
}

/* Layout: d (f16), 16 code bytes (byte j: element j low nibble, j + 16
** high).  x = d * grid[q]. */
int rad_qz_block_iq4_nl(const float *x, uint8_t *out, int64_t first)
{
    enum { N = 32, TRIES = 7 };
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < N; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    float best = 0.0f;
    if (amax > 0.0f) {
        static const int ends[2] = {-127, 113};
        double best_gain = -1.0;
        for (int e = 0; e < 2; e++)
            for (int t = -TRIES; t <= TRIES; t++) {
                float id = (float)(ends[e] + t) / max;
                /* nearest_grid for all 32 at once: the loops vectorize */
                float v[N];
                int k[N] = {0};
                for (int j = 0; j < N; j++) v[j] = x[j] * id;
                for (int i = 0; i < 15; i++)
                    for (int j = 0; j < N; j++) k[j] += v[j] > iq4_mid[i];
                double sgx = 0;
                int sgg = 0; /* exact: at most 32 * 127^2 */
                for (int j = 0; j < N; j++) {
                    int g = iq4_grid[k[j]];
                    sgx += (double)g * x[j];
                    sgg += g * g;
                }
                if (sgx * sgx / sgg > best_gain) { /* sgg >= 1: no grid point is 0 */
                    best_gain = sgx * sgx / sgg;
                    best = (float)(sgx / sgg);
                }
            }
    }
    int rc = rad_qz_put_half(out, best, "iq4_nl", x, N, first, 65504.0 * 127);
    if (rc) return rc;
    float d = rad_qz_get_half(out);
    int q[N];
    for (int j = 0; j < N; j++) q[j] = d != 0.0f ? nearest_grid(x[j] / d) : 8;
    for (int j = 0; j < N / 2; j++) out[2 + j] = (uint8_t)(q[j] | q[j + N / 2] << 4);
    return 0;
}
