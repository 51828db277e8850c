/*
** ops_elementwise.c: add, mul, scale_rows, silu_mul, gelu_mul, clamp and
** sigmoid_gate, and the portable streaming loops every non-GEMM op uses
** (cpu_vec_portable).
**
**   add         out = a + b
**   mul         out = a * b
**   scale_rows  x = x * f32(scale)
**   silu_mul    out = silu(gate) * up,      silu(x) = x / (1 + e^-x)
**   gelu_mul    out = gelu_tanh(gate) * up
**   clamp       x = min(max(x, lo), hi), a NaN kept (OLMoE's clip_qkv)
**   sigmoid_gate out = sigmoid(g[m]) * x, one gate per row (Qwen2-MoE)
**
** The work is the M x N elements, cut into column blocks of ELT_BLOCK
** within each row and handed out to at most one task per thread, and only
** when there is enough of it (ELT_MIN_WORK) to repay the pool's dispatch:
** a decode step's M = 1, N = 576 add runs on the calling thread.  Blocks
** start at multiples of ELT_BLOCK inside a row, so an element is computed
** by the same instruction (vector lane or scalar tail) whatever the task
** split: results never depend on the thread count.
**
** Both gated activations are x * sigmoid(z): silu with z = x, and the tanh
** GELU with z = 2 sqrt(2/pi) (x + 0.044715 x^3), because
** 0.5 (1 + tanh(y)) = 1 / (1 + e^(-2y)).  That form has no cancellation
** (unlike 1 + tanh near -1), gives 0 for large negative gates (x / inf), and
** needs one exponential.  The portable loop uses libm's expf; the AVX2 one a
** vectorised exp within 2 ulp (cpu_exp256 in cpu_ops.h).
*/
#include <math.h>
#include <string.h>

#include "../../base/rad_half.h"
#include "cpu_ops.h"

#define ELT_BLOCK 256           /* task boundaries fall on these inside a row */
#define ELT_MIN_WORK 16384      /* elements a task should carry (~2-4 us) */

/* ------------------------------------------------- portable loops */

static void add_portable(const float *a, const float *b, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void mul_portable(const float *a, const float *b, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

static void scale_portable(float *x, float s, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = x[i] * s;
}

static void silu_mul_portable(const float *g, const float *u, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* 2 sqrt(2 / pi) and 2 sqrt(2 / pi) * 0.044715 */
#define GELU_K1 1.5957691216057308f
#define GELU_K3 0.07135481627159119f

static void gelu_mul_portable(const float *g, const float *u, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        float z = x * (GELU_K1 + GELU_K3 * x * x);
        out[i] = x / (1.0f + expf(-z)) * u[i];
    }
}

static double sum_squares_portable(const float *x, int64_t n)
{
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    return ss;
}

static double add_sum_squares_portable(float *x, const float *d, int64_t n)
{
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = x[i] + d[i];
        ss += (double)x[i] * (double)x[i];
    }
    return ss;
}

static void norm_apply_portable(const float *x, float r, const float *w, float w_offset, float *out,
                                int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = (x[i] * r) * (w[i] + w_offset);
}

void cpu_sincos_portable(const float *angle, float *c, float *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++) cpu_sincos1(angle[i], &c[i], &s[i]);
}

void cpu_rope_neox_portable(float *x, const float *c, const float *s, int64_t half)
{
    float *b = x + half;
    for (int64_t i = 0; i < half; i++) {
        float xa = x[i], xb = b[i];
        x[i] = xa * c[i] - xb * s[i];
        b[i] = xb * c[i] + xa * s[i];
    }
}

void cpu_rope_adjacent_portable(float *x, const float *c, const float *s, int64_t half)
{
    for (int64_t i = 0; i < half; i++) {
        float xa = x[2 * i], xb = x[2 * i + 1];
        x[2 * i] = xa * c[i] - xb * s[i];
        x[2 * i + 1] = xb * c[i] + xa * s[i];
    }
}

static void to_f16_portable(const float *x, uint16_t *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = rad_f32_to_f16(x[i]);
}

static void from_f16_portable(const uint16_t *x, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = rad_f16_to_f32(x[i]);
}

const CpuVecOps cpu_vec_portable = {
    .isa = "portable",
    .add = add_portable,
    .mul = mul_portable,
    .scale = scale_portable,
    .silu_mul = silu_mul_portable,
    .gelu_mul = gelu_mul_portable,
    .sum_squares = sum_squares_portable,
    .add_sum_squares = add_sum_squares_portable,
    .norm_apply = norm_apply_portable,
    .sincos = cpu_sincos_portable,
    .rope_neox = cpu_rope_neox_portable,
    .rope_adjacent = cpu_rope_adjacent_portable,
    .to_f16 = to_f16_portable,
    .from_f16 = from_f16_portable,
};

/* -------------------------------------------------------- launches */

enum { ELT_ADD, ELT_MUL, ELT_SCALE, ELT_SILU, ELT_GELU, ELT_CLAMP, ELT_SIGMOID_GATE };

typedef struct EltJob {
    int kind;
    const RadTensor *a, *b, *out;       /* scale: a is x, the only operand; sigmoid_gate: b is g */
    int64_t N, blocks_per_row, n_blocks;
    float scale;
    float lo, hi;                       /* clamp */
    int n_tasks;
    const CpuVecOps *vec;
} EltJob;

/* Run the op over blocks [b0, b1) of the M x ceil(N / ELT_BLOCK) grid. */
static void elt_task(void *ctx, int t)
{
    const EltJob *j = ctx;
    int64_t b0 = cpu_task_start(j->n_blocks, j->n_tasks, t);
    int64_t b1 = cpu_task_start(j->n_blocks, j->n_tasks, t + 1);
    while (b0 < b1) {
        int64_t row = b0 / j->blocks_per_row, first = b0 % j->blocks_per_row;
        int64_t last = first + (b1 - b0);
        if (last > j->blocks_per_row) last = j->blocks_per_row;
        int64_t i0 = first * ELT_BLOCK, i1 = last * ELT_BLOCK < j->N ? last * ELT_BLOCK : j->N;
        float *x = rad_act_row(j->a, row) + i0;
        int64_t n = i1 - i0;
        if (j->kind == ELT_SCALE) {
            j->vec->scale(x, j->scale, n);
        } else if (j->kind == ELT_CLAMP) {
            /* comparisons, not fminf/fmaxf: a NaN stays NaN, as torch.clamp keeps it */
            const float lo = j->lo, hi = j->hi;
            for (int64_t i = 0; i < n; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
        } else if (j->kind == ELT_SIGMOID_GATE) {
            /* every block of the row computes the row's factor the same way */
            const float s = 1.0f / (1.0f + expf(-rad_act_row(j->b, row)[0]));
            float *o = rad_act_row(j->out, row) + i0;
            for (int64_t i = 0; i < n; i++) o[i] = s * x[i];
        } else {
            const float *y = rad_act_row(j->b, row) + i0;
            float *o = rad_act_row(j->out, row) + i0;
            switch (j->kind) {
            case ELT_ADD: j->vec->add(x, y, o, n); break;
            case ELT_MUL: j->vec->mul(x, y, o, n); break;
            case ELT_SILU: j->vec->silu_mul(x, y, o, n); break;
            case ELT_GELU: j->vec->gelu_mul(x, y, o, n); break;
            }
        }
        b0 += last - first;
    }
}

static int elt_run(const RadKernelArgs *a, int kind, int64_t N, const RadTensor *x, const RadTensor *y,
                   const RadTensor *out, float scale, int64_t work_per_elem)
{
    int64_t M = rad_op_rows(a);
    int rc;

    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, N))) return rc;
    if (kind != ELT_SCALE && kind != ELT_CLAMP && ((rc = rad_check_act(y, M, N)) || (rc = rad_check_act(out, M, N))))
        return rc;

    EltJob j = {
        .kind = kind, .a = x, .b = y, .out = out, .N = N, .scale = scale, .vec = cpu_vec(),
        .blocks_per_row = (N + ELT_BLOCK - 1) / ELT_BLOCK,
    };
    j.n_blocks = M * j.blocks_per_row;
    j.n_tasks = cpu_task_count(a, j.n_blocks, ELT_BLOCK * work_per_elem, ELT_MIN_WORK);
    cpu_parallel(a, j.n_tasks, elt_task, &j);
    return RAD_OK;
}

int cpu_add(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return elt_run(a, ELT_ADD, a->param[RAD_BINARY_N].i, &o[RAD_BINARY_A], &o[RAD_BINARY_B],
                   &o[RAD_BINARY_OUT], 0.0f, 1);
}

int cpu_mul(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return elt_run(a, ELT_MUL, a->param[RAD_BINARY_N].i, &o[RAD_BINARY_A], &o[RAD_BINARY_B],
                   &o[RAD_BINARY_OUT], 0.0f, 1);
}

int cpu_scale_rows(const RadKernelArgs *a)
{
    /* The factor rounds to f32 first, as PyTorch scales an f32 tensor. */
    return elt_run(a, ELT_SCALE, a->param[RAD_SCALE_ROWS_N].i, &a->operand[RAD_SCALE_ROWS_X], NULL,
                   NULL, (float)a->param[RAD_SCALE_ROWS_SCALE].f, 1);
}

/* An exponential and a division cost about four adds. */
int cpu_silu_mul(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return elt_run(a, ELT_SILU, a->param[RAD_GATED_N].i, &o[RAD_GATED_GATE], &o[RAD_GATED_UP],
                   &o[RAD_GATED_OUT], 0.0f, 4);
}

int cpu_gelu_mul(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return elt_run(a, ELT_GELU, a->param[RAD_GATED_N].i, &o[RAD_GATED_GATE], &o[RAD_GATED_UP],
                   &o[RAD_GATED_OUT], 0.0f, 4);
}

/* lo and hi round to f32 first, as ref compares them. */
int cpu_clamp(const RadKernelArgs *a)
{
    float lo = (float)a->param[RAD_CLAMP_LO].f, hi = (float)a->param[RAD_CLAMP_HI].f;
    if (rad_op_rows(a) <= 0 || a->param[RAD_CLAMP_N].i <= 0) return RAD_E_SHAPE;
    if (isnan(lo) || isnan(hi) || lo > hi) return RAD_E_ARG;
    const RadTensor *x = &a->operand[RAD_CLAMP_X];
    int64_t M = rad_op_rows(a), N = a->param[RAD_CLAMP_N].i;
    int rc = rad_check_act(x, M, N);
    if (rc) return rc;
    EltJob j = {.kind = ELT_CLAMP, .a = x, .N = N, .lo = lo, .hi = hi, .vec = cpu_vec(),
                .blocks_per_row = (N + ELT_BLOCK - 1) / ELT_BLOCK};
    j.n_blocks = M * j.blocks_per_row;
    j.n_tasks = cpu_task_count(a, j.n_blocks, ELT_BLOCK, ELT_MIN_WORK);
    cpu_parallel(a, j.n_tasks, elt_task, &j);
    return RAD_OK;
}

/* The gate has one column, so the operands are checked here rather than by
** elt_run's [M, N] rule; the work is a multiply per element and an
** exponential per block. */
int cpu_sigmoid_gate(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    const RadTensor *x = &o[RAD_SIGMOID_GATE_X], *g = &o[RAD_SIGMOID_GATE_G], *out = &o[RAD_SIGMOID_GATE_OUT];
    int64_t M = rad_op_rows(a), N = a->param[RAD_SIGMOID_GATE_N].i;
    int rc;
    if (M <= 0 || N <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, N)) || (rc = rad_check_act(g, M, 1)) || (rc = rad_check_act(out, M, N)))
        return rc;
    EltJob j = {.kind = ELT_SIGMOID_GATE, .a = x, .b = g, .out = out, .N = N, .vec = cpu_vec(),
                .blocks_per_row = (N + ELT_BLOCK - 1) / ELT_BLOCK};
    j.n_blocks = M * j.blocks_per_row;
    j.n_tasks = cpu_task_count(a, j.n_blocks, ELT_BLOCK, ELT_MIN_WORK);
    cpu_parallel(a, j.n_tasks, elt_task, &j);
    return RAD_OK;
}
