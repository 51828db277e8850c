/*
** ref_rope.c: rotary position embedding, as Hugging Face transformers
** computes it.
**
** Each head's first n_rot dims form n_rot/2 pairs; pair i turns by the angle
** pos * inv_freq_i, with inv_freq_i = theta^(-2i/n_rot):
**
**   mode 0 (NEOX)     pairs (i, i + n_rot/2), HF's rotate_half layout
**   mode 1 (adjacent) pairs (2i, 2i + 1), the layout of GGUF llama q/k rows
**
**   x'_a = x_a cos - x_b sin,   x'_b = x_b cos + x_a sin
**
** Dims past n_rot pass through (partial rotary).  Scaling changes inv_freq:
** linear divides it by `factor`; llama3 divides the low frequencies by
** `factor`, keeps the high ones, and blends in between (below); factors
** divides pair i's by freq_factors[i], a table the model file carries
** (GGUF's rope_freqs.weight: llama.cpp's converter writes llama3 scaling
** that way, the blend precomputed per pair); yarn blends each pair between
** its own frequency and the frequency divided by `factor` along a ramp over
** the pairs, and multiplies cos and sin by an attention factor.
**
** Why the float32 care: an angle is pos * inv_freq, so one ulp of inv_freq
** moves the angle at position 8000 by about 5e-4 rad, far more than the
** tolerance.  HF computes inv_freq, the scaling and the angle in float32,
** one rounding per operation, and we repeat those operations in the same
** order.  Where HF calls a vectorised pow, cos or sin (accurate to about an
** ulp) we evaluate in double and round once to f32: the correctly rounded
** value, which is what those routines aim for.
*/
#include <math.h>

#include "../ops/rad_rope.h"
#include "ref_internal.h"

typedef struct RopeScale {
    int kind;                   /* RAD_ROPE_SCALING_* */
    const float *freq_factors;  /* FACTORS: n_rot / 2 of them */
    float factor;
    float low_freq_factor, high_freq_factor;
    float orig_ctx;
    double low_wavelen, high_wavelen;   /* orig_ctx / low_ff, orig_ctx / high_ff */
    double ff_span;                     /* high_ff - low_ff */
    /* YARN: the ramp between the dims kept (extrapolated) and the dims
    ** stretched (interpolated), and the factor on cos and sin */
    float ramp_lo, ramp_span;           /* f32(low), f32(high - low) */
    float attn;
} RopeScale;

/* inv_freq of pair i, in float32 step by step as HF's rope init functions:
**   inv = 1 / theta^(2i / n_rot)                        (default)
**   inv = inv / factor                                  (linear)
**   llama3: wavelen = 2 pi / inv;
**     wavelen > orig/low_ff          -> inv / factor   (low frequency)
**     wavelen < orig/high_ff         -> inv            (high frequency)
**     otherwise s = (orig / wavelen - low_ff) / (high_ff - low_ff),
**               inv = (1 - s) * inv / factor + s * inv
**   yarn: with p = theta^(2i / n_rot) and the ramp r = clamp((i - low) /
**     (high - low), 0, 1) (rope_scale computes low and high),
**     e = 1 - r,  inv = (1 / (factor * p)) * (1 - e) + (1 / p) * e
** PyTorch evaluates `c / t` for a Python scalar c as reciprocal(t) * c, and
** casts Python scalars to float32 before each operation; both are mirrored. */
static float rope_inv_freq(int64_t i, int64_t n_rot, float theta, const RopeScale *sc)
{
    float e = (float)(2 * i) / (float)n_rot;
    float pos_freq = (float)pow((double)theta, (double)e);
    float inv = 1.0f / pos_freq;

    if (sc->kind == RAD_ROPE_SCALING_LINEAR) return inv / sc->factor;
    if (sc->kind == RAD_ROPE_SCALING_FACTORS) return inv / sc->freq_factors[i];
    if (sc->kind == RAD_ROPE_SCALING_YARN) {
        float interp = 1.0f / (sc->factor * pos_freq);
        float ramp = ((float)i - sc->ramp_lo) / sc->ramp_span;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        float extrap_share = 1.0f - ramp;
        return interp * (1.0f - extrap_share) + inv * extrap_share;
    }
    if (sc->kind != RAD_ROPE_SCALING_LLAMA3) return inv;

    const float two_pi = (float)6.28318530717958647692;
    float wavelen = (1.0f / inv) * two_pi;
    int is_low = wavelen > (float)sc->low_wavelen;
    int is_high = wavelen < (float)sc->high_wavelen;
    float scaled = is_low ? inv / sc->factor : inv;
    if (is_low || is_high) return scaled;

    float s = ((1.0f / wavelen) * sc->orig_ctx - sc->low_freq_factor) / (float)sc->ff_span;
    return (1.0f - s) * scaled / sc->factor + s * scaled;
}

/* Read the scaling parameters (rad_check_rope has checked them). */
static void rope_scale(const RadKernelArgs *a, RopeScale *sc)
{
    sc->kind = (int)a->param[RAD_ROPE_SCALING].i;
    sc->factor = (float)a->param[RAD_ROPE_FACTOR].f;
    sc->low_freq_factor = (float)a->param[RAD_ROPE_LOW_FREQ_FACTOR].f;
    sc->high_freq_factor = (float)a->param[RAD_ROPE_HIGH_FREQ_FACTOR].f;
    sc->orig_ctx = (float)a->param[RAD_ROPE_ORIG_CTX].i;
    sc->attn = 1.0f;

    double orig = (double)a->param[RAD_ROPE_ORIG_CTX].i;
    double low_ff = a->param[RAD_ROPE_LOW_FREQ_FACTOR].f;
    double high_ff = a->param[RAD_ROPE_HIGH_FREQ_FACTOR].f;

    switch (sc->kind) {
    case RAD_ROPE_SCALING_FACTORS:
        sc->freq_factors = a->operand[RAD_ROPE_FREQ_FACTORS].data;
        break;
    case RAD_ROPE_SCALING_LLAMA3:
        /* HF computes these from Python numbers, so they stay double. */
        sc->low_wavelen = orig / low_ff;
        sc->high_wavelen = orig / high_ff;
        sc->ff_span = high_ff - low_ff;
        break;
    case RAD_ROPE_SCALING_YARN: {
        double lo, hi;
        rad_rope_yarn_range(a->param[RAD_ROPE_THETA].f, a->param[RAD_ROPE_N_ROT].i, a->param[RAD_ROPE_ORIG_CTX].i,
                            a->param[RAD_ROPE_BETA_FAST].f, a->param[RAD_ROPE_BETA_SLOW].f,
                            a->param[RAD_ROPE_TRUNCATE].i == RAD_ROPE_TRUNCATE_ON, &lo, &hi);
        sc->ramp_lo = (float)lo;
        sc->ramp_span = (float)(hi - lo);
        sc->attn = (float)rad_rope_yarn_attn(a->param[RAD_ROPE_ATTN_FACTOR].f, a->param[RAD_ROPE_FACTOR].f);
        break;
    }
    default:
        break;
    }
}

int ref_rope(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a);
    int64_t n_head = a->param[RAD_ROPE_N_HEAD].i, hd = a->param[RAD_ROPE_HEAD_DIM].i;
    int64_t n_rot = a->param[RAD_ROPE_N_ROT].i, mode = a->param[RAD_ROPE_MODE].i;
    float theta = (float)a->param[RAD_ROPE_THETA].f;
    const RadTensor *x = &a->operand[RAD_ROPE_X];
    const RadTensor *positions = &a->operand[RAD_ROPE_POSITIONS];
    RopeScale sc = {0};
    int rc;

    if ((rc = rad_check_rope(a))) return rc;
    rope_scale(a, &sc);

    const int32_t *pos = positions->data;
    int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; i++) {
        float inv = rope_inv_freq(i, n_rot, theta, &sc);
        /* The two members of pair i within a head. */
        int64_t ia = mode == RAD_ROPE_MODE_NEOX ? i : 2 * i;
        int64_t ib = mode == RAD_ROPE_MODE_NEOX ? i + half : 2 * i + 1;

        for (int64_t m = 0; m < M; m++) {
            float angle = (float)pos[m] * inv;
            float c = (float)cos((double)angle), s = (float)sin((double)angle);
            /* YaRN scales cos and sin (HF: emb.cos() * attention_scaling) */
            if (sc.kind == RAD_ROPE_SCALING_YARN) {
                c *= sc.attn;
                s *= sc.attn;
            }
            for (int64_t h = 0; h < n_head; h++) {
                float *head = rad_act_row(x, m) + h * hd;
                float xa = head[ia], xb = head[ib];
                head[ia] = xa * c - xb * s;
                head[ib] = xb * c + xa * s;
            }
        }
    }
    return RAD_OK;
}
