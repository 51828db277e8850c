/*
** ref_elementwise.c: the ops that combine activations element by element.
**
**   add         out = a + b
**   mul         out = a * b
**   scale_rows  x = x * (float)scale
**   silu_mul    out = silu(gate) * up,       silu(x) = x / (1 + e^-x)
**   gelu_mul    out = gelu_tanh(gate) * up,
**               gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
**   clamp       x = min(max(x, lo), hi), NaN kept (OLMoE's clip_qkv)
**   swiglu_oai  out = g sigmoid(alpha g) (u + 1), g = min(gate, limit),
**               u = clamp(up, -limit, limit) (gpt-oss's experts)
**   sigmoid_gate out = f32(sigmoid(g[m])) * x, one gate per row (Qwen2-MoE's
**               shared expert)
**
** add, mul and scale_rows are single f32 operations, which IEEE rounds
** identically everywhere, so a faster kernel must match them exactly.
** scale_rows rounds its factor to f32 first, as PyTorch does when it scales
** an f32 tensor by a Python float (Gemma's sqrt(hidden) embedding scale).
** The gated activations are evaluated in double and rounded once; faster
** kernels meet them within 1e-6 NMSE.
**
** Each output element depends only on the inputs at the same index, so out
** may alias any input.  (silu_mul is the SwiGLU of Llama, Qwen and Mistral;
** gelu_mul the GeGLU of Gemma, which uses the tanh approximation.)
*/
#include <math.h>

#include "ref_internal.h"

/* The shared frame of the three-operand ops: check, then walk rows. */
typedef double (*combine_fn)(double a, double b);

static int binary_rows(const RadKernelArgs *a, int64_t N, const RadTensor *x,
                       const RadTensor *y, const RadTensor *out, combine_fn f)
{
    int64_t M = rad_op_rows(a);
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, N)) || (rc = rad_check_act(y, M, N)) ||
        (rc = rad_check_act(out, M, N)))
        return rc;

    for (int64_t m = 0; m < M; m++) {
        const float *xr = rad_act_row(x, m), *yr = rad_act_row(y, m);
        float *o = rad_act_row(out, m);
        for (int64_t i = 0; i < N; i++) o[i] = (float)f(xr[i], yr[i]);
    }
    return RAD_OK;
}

/* add and mul go through double only to share the frame above: double
** carries more than twice f32's precision, so rounding the double sum or
** product to f32 gives exactly the f32 operation's result (double rounding
** is harmless for + and * at these widths). */
static double combine_add(double x, double y) { return x + y; }
static double combine_mul(double x, double y) { return x * y; }

static double combine_silu(double g, double u) { return g / (1.0 + exp(-g)) * u; }

static double combine_gelu(double g, double u)
{
    const double k = 0.79788456080286535588;      /* sqrt(2 / pi) */
    return 0.5 * g * (1.0 + tanh(k * (g + 0.044715 * g * g * g))) * u;
}

int ref_add(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return binary_rows(a, a->param[RAD_BINARY_N].i, &o[RAD_BINARY_A], &o[RAD_BINARY_B],
                       &o[RAD_BINARY_OUT], combine_add);
}

int ref_mul(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return binary_rows(a, a->param[RAD_BINARY_N].i, &o[RAD_BINARY_A], &o[RAD_BINARY_B],
                       &o[RAD_BINARY_OUT], combine_mul);
}

int ref_silu_mul(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return binary_rows(a, a->param[RAD_GATED_N].i, &o[RAD_GATED_GATE], &o[RAD_GATED_UP],
                       &o[RAD_GATED_OUT], combine_silu);
}

int ref_gelu_mul(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return binary_rows(a, a->param[RAD_GATED_N].i, &o[RAD_GATED_GATE], &o[RAD_GATED_UP],
                       &o[RAD_GATED_OUT], combine_gelu);
}

int ref_scale_rows(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_SCALE_ROWS_N].i;
    float scale = (float)a->param[RAD_SCALE_ROWS_SCALE].f;
    const RadTensor *x = &a->operand[RAD_SCALE_ROWS_X];
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, N))) return rc;

    for (int64_t m = 0; m < M; m++) {
        float *r = rad_act_row(x, m);
        for (int64_t i = 0; i < N; i++) r[i] = r[i] * scale;
    }
    return RAD_OK;
}

int ref_clamp(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_CLAMP_N].i;
    float lo = (float)a->param[RAD_CLAMP_LO].f, hi = (float)a->param[RAD_CLAMP_HI].f;
    const RadTensor *x = &a->operand[RAD_CLAMP_X];
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if (isnan(lo) || isnan(hi) || lo > hi) return RAD_E_ARG;
    if ((rc = rad_check_act(x, M, N))) return rc;

    for (int64_t m = 0; m < M; m++) {
        float *r = rad_act_row(x, m);
        /* comparisons, not fminf/fmaxf: a NaN stays NaN, as torch.clamp keeps it */
        for (int64_t i = 0; i < N; i++) r[i] = r[i] < lo ? lo : r[i] > hi ? hi : r[i];
    }
    return RAD_OK;
}

/* gpt-oss's activation.  The clamps are comparisons, so a NaN passes
** through as torch.clamp lets it; the rest in double, rounded once.  The
** limit and alpha come from the config (swiglu_limit, swiglu_alpha) and are
** rounded to f32 first, as PyTorch uses them against an f32 tensor. */
int ref_swiglu_oai(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_SWIGLU_OAI_N].i;
    const double alpha = (float)a->param[RAD_SWIGLU_OAI_ALPHA].f;
    const float limit = (float)a->param[RAD_SWIGLU_OAI_LIMIT].f;
    const RadTensor *o = a->operand;
    const RadTensor *gate = &o[RAD_GATED_GATE], *up = &o[RAD_GATED_UP], *out = &o[RAD_GATED_OUT];
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if (!(limit > 0) || !isfinite(limit) || !isfinite(alpha)) return RAD_E_ARG;
    if ((rc = rad_check_act(gate, M, N)) || (rc = rad_check_act(up, M, N)) || (rc = rad_check_act(out, M, N)))
        return rc;

    for (int64_t m = 0; m < M; m++) {
        const float *gr = rad_act_row(gate, m), *ur = rad_act_row(up, m);
        float *r = rad_act_row(out, m);
        for (int64_t i = 0; i < N; i++) {
            double g = gr[i] > limit ? limit : gr[i];
            double u = ur[i] < -limit ? -limit : ur[i] > limit ? limit : ur[i];
            r[i] = (float)(g / (1.0 + exp(-alpha * g)) * (u + 1.0));
        }
    }
    return RAD_OK;
}

/* Qwen2-MoE's shared-expert gate: F.sigmoid(gate(h)) * shared(h) on f32
** tensors, so the sigmoid is rounded to f32 (here from double, once) and
** the product is one f32 multiply.  1 / (1 + e^-g) is 0 at g = -inf and
** 1 at +inf, and NaN stays NaN. */
int ref_sigmoid_gate(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), N = a->param[RAD_SIGMOID_GATE_N].i;
    const RadTensor *o = a->operand;
    const RadTensor *x = &o[RAD_SIGMOID_GATE_X], *g = &o[RAD_SIGMOID_GATE_G], *out = &o[RAD_SIGMOID_GATE_OUT];
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, N)) || (rc = rad_check_act(g, M, 1)) || (rc = rad_check_act(out, M, N)))
        return rc;

    for (int64_t m = 0; m < M; m++) {
        const float s = (float)(1.0 / (1.0 + exp(-(double)rad_act_row(g, m)[0])));
        const float *xr = rad_act_row(x, m);
        float *r = rad_act_row(out, m);
        for (int64_t i = 0; i < N; i++) r[i] = s * xr[i];
    }
    return RAD_OK;
}
