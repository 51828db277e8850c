/*
** cpu_gemm.c: the matrix-product driver of the cpu library, for gemm_nt
** (x W^T + bias) and logits_gemm (x W^T, then the soft-cap).
**
** A product runs in two stages.
**
**  1. Each activation row is converted once into the format its weight's
**     encoding pairs with (cpu_enc[enc].act_fmt: int8 blocks for quantized
**     weights, f16/bf16 rows for f16/bf16 weights; act_q8.c says why these
**     are llama.cpp's choices), into the launch's scratch.  f32 weights read
**     the f32 activations where they lie.
**  2. The (activation rows x weight rows) outputs are cut into tasks for
**     the pool.  Decode (M = 1) splits the N weight rows into chunks, four
**     per thread so uneven cores still finish together, each a multiple of
**     the tile width; every weight byte is read once, by one thread.
**     Prefill (M >= 2) cuts the weight rows into blocks of about 32 KiB,
**     which stay in L1/L2 while every activation row of the task passes
**     over them a tile (tile_act x tile_w outputs) at a time; when there are
**     too few weight blocks to keep every thread busy the activation rows
**     are split too.
**
** Determinism.  Each output element is computed by exactly one dot or tile
** call, whose result does not depend on which (cpu_internal.h's rule), and
** the bias and soft-cap are applied per element.  So the output is the same
** bits for any thread count, task order or split.
**
** No allocation: the converted activations live in args->scratch, sized by
** cpu_gemm_nt_scratch / cpu_logits_gemm_scratch when the model opens.
*/
#include <math.h>
#include <string.h>

#include "../ops/rad_op_checks.h"
#include "cpu_internal.h"

#define ROW_ALIGN 64                    /* converted rows start on cache lines */
#define TASKS_PER_THREAD 4
#define WEIGHT_BLOCK_BYTES (32 * 1024)  /* prefill: weight rows a task keeps in cache */

size_t cpu_act_row_bytes(int fmt, int64_t K)
{
    switch (fmt) {
    case CPU_ACT_F32: return (size_t)K * 4;
    case CPU_ACT_F16:
    case CPU_ACT_BF16: return (size_t)K * 2;
    case CPU_ACT_Q8_0: return (size_t)(K / 32) * CPU_Q8_0_BYTES;
    case CPU_ACT_Q8_1: return (size_t)(K / 32) * CPU_Q8_1_BYTES;
    case CPU_ACT_Q8_K: return (size_t)(K / 256) * 292;
    case CPU_ACT_Q8_0_SUMS: return cpu_act_sums_offset(K) + (size_t)(K / 32) * 4;
    default: return 0;
    }
}

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* Bytes from one converted activation row to the next in scratch. */
static size_t act_stride(int fmt, int64_t K) { return round_up(cpu_act_row_bytes(fmt, K), ROW_ALIGN); }

/* The scratch a product of M rows needs: the converted rows (none for f32
** weights, whose activations are read in place), plus room to align. */
static size_t gemm_scratch(int64_t M, int64_t K, int64_t enc)
{
    if (M <= 0 || K <= 0 || M > INT32_MAX / 2 || K > INT32_MAX || enc < 0 || enc >= RAD_ENC_COUNT) return 0;
    const CpuEncKernels *k = &cpu_enc[enc], *x8 = &cpu_enc_x8[enc];
    size_t row = k->dot && k->act_fmt != CPU_ACT_F32 ? act_stride(k->act_fmt, K) : 0;
    if (x8->tile && act_stride(x8->act_fmt, K) > row) row = act_stride(x8->act_fmt, K);    /* relayouted weights */
    return row ? (size_t)M * row + ROW_ALIGN : 0;
}

size_t cpu_gemm_nt_scratch(const RadKernelArgs *a)
{
    return gemm_scratch(a->param[RAD_P_M].i, a->param[RAD_GEMM_NT_K].i, a->param[RAD_GEMM_NT_ENC].i);
}

size_t cpu_logits_gemm_scratch(const RadKernelArgs *a)
{
    return gemm_scratch(a->param[RAD_P_M].i, a->param[RAD_LOGITS_GEMM_K].i,
                        a->param[RAD_LOGITS_GEMM_ENC].i);
}

/* ------------------------------------------------------------ checks */

/* the shared checks and codes (kernels/ops/rad_op_checks.h); a weight is served
** when this library has a dot product for its encoding. */
static int check_weight(const RadTensor *w, int64_t rows, int64_t cols)
{
    int served = w->enc >= 0 && w->enc < RAD_ENC_COUNT && cpu_enc[w->enc].dot;
    return rad_check_weight_served(w, served, rows, cols);
}

/* --------------------------------------------------------------- jobs */

typedef struct GemmJob {
    const CpuEncKernels *k;
    int64_t M, N, K;
    /* the source activations, f32 */
    const char *x;
    size_t x_stride;
    /* the converted activations the dots read (x itself for f32 weights) */
    char *act;
    size_t act_stride;
    const char *w;
    size_t w_stride;
    float *out;
    size_t out_stride;                  /* in floats */
    const float *bias;                  /* or NULL */
    float softcap;                      /* 0: none */
    /* the split: rows [mb * m_block, ...) x [nb * n_block, ...) per task */
    int64_t m_block, n_block;
    int n_mb, n_nb;
    int64_t rows_per_convert_task;
} GemmJob;

static void convert_task(void *ctx, int t)
{
    const GemmJob *j = ctx;
    CpuActQuantFn conv = cpu_act_quant[j->k->act_fmt];
    int64_t m0 = (int64_t)t * j->rows_per_convert_task, m1 = m0 + j->rows_per_convert_task;
    if (m1 > j->M) m1 = j->M;
    for (int64_t m = m0; m < m1; m++)
        conv((const float *)(const void *)(j->x + (size_t)m * j->x_stride), j->act + (size_t)m * j->act_stride, j->K);
}

/* Bias and soft-cap over outputs [n0, n1) of rows [m0, m1). */
static void finish(const GemmJob *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    if (!j->bias && !(j->softcap > 0)) return;
    for (int64_t m = m0; m < m1; m++) {
        float *o = j->out + (size_t)m * j->out_stride;
        if (j->bias)
            for (int64_t n = n0; n < n1; n++) o[n] += j->bias[n];
        if (j->softcap > 0) {
            const float cap = j->softcap;
            for (int64_t n = n0; n < n1; n++) o[n] = cap * tanhf(o[n] / cap);
        }
    }
}

/* Outputs [m0, m1) x [n0, n1), a tile at a time: for each group of
** activation rows, sweep the whole weight block (which stays in cache). */
static void run_block(const GemmJob *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    const CpuEncKernels *k = j->k;
    if (!k->tile) {
        for (int64_t m = m0; m < m1; m++)
            for (int64_t n = n0; n < n1; n++)
                k->dot(j->K, j->w + (size_t)n * j->w_stride, j->act + (size_t)m * j->act_stride,
                       j->out + (size_t)m * j->out_stride + n);
        return;
    }
    for (int64_t m = m0; m < m1; m += k->tile_act) {
        int n_act = m1 - m < k->tile_act ? (int)(m1 - m) : k->tile_act;
        for (int64_t n = n0; n < n1; n += k->tile_w) {
            int n_w = n1 - n < k->tile_w ? (int)(n1 - n) : k->tile_w;
            k->tile(j->K, j->w + (size_t)n * j->w_stride, j->w_stride, n_w,
                    j->act + (size_t)m * j->act_stride, j->act_stride, n_act,
                    j->out + (size_t)m * j->out_stride + n, j->out_stride);
        }
    }
}

static void product_task(void *ctx, int t)
{
    const GemmJob *j = ctx;
    int nb = t / j->n_mb, mb = t % j->n_mb;
    int64_t n0 = nb * j->n_block, n1 = n0 + j->n_block;
    int64_t m0 = mb * j->m_block, m1 = m0 + j->m_block;
    if (n1 > j->N) n1 = j->N;
    if (m1 > j->M) m1 = j->M;
    if (m0 >= m1 || n0 >= n1) return;
    run_block(j, m0, m1, n0, n1);
    finish(j, m0, m1, n0, n1);
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Choose the task split (module comment). */
static void plan(GemmJob *j, int n_threads)
{
    const CpuEncKernels *k = j->k;
    int64_t tw = k->tile ? k->tile_w : 1, ta = k->tile ? k->tile_act : 1;
    int64_t want = n_threads > 1 ? (int64_t)n_threads * TASKS_PER_THREAD : 1;
    if (j->M == 1) {
        j->n_block = round_up((size_t)cdiv(j->N, want), (size_t)tw);
        j->m_block = 1;
    } else {
        int64_t rows = (int64_t)(WEIGHT_BLOCK_BYTES / (j->w_stride ? j->w_stride : 1));
        rows = rows / tw * tw;
        if (rows < tw) rows = tw;
        /* with few weight rows, keep enough blocks for the threads */
        int64_t fair = round_up((size_t)cdiv(j->N, want), (size_t)tw);
        j->n_block = rows < fair ? rows : fair;
        int64_t n_nb = cdiv(j->N, j->n_block);
        int64_t n_mb = n_nb >= want ? 1 : cdiv(want, n_nb);
        if (n_mb > cdiv(j->M, ta)) n_mb = cdiv(j->M, ta);
        j->m_block = round_up((size_t)cdiv(j->M, n_mb), (size_t)ta);
    }
    if (j->n_block < 1) j->n_block = 1;
    j->n_nb = (int)cdiv(j->N, j->n_block);
    j->n_mb = (int)cdiv(j->M, j->m_block);
}

static int gemm(const RadKernelArgs *a, int64_t N, int64_t K, int64_t enc, const RadTensor *x,
                const RadTensor *w, const RadTensor *bias, const RadTensor *out, double softcap)
{
    int64_t M = a->param[RAD_P_M].i;
    int rc;

    if (M <= 0 || N <= 0 || K <= 0) return RAD_E_SHAPE;
    if ((rc = rad_check_act(x, M, K)) || (rc = check_weight(w, N, K)) || (rc = rad_check_act(out, M, N))) return rc;
    if (w->enc != enc) return RAD_E_ARG;
    /* our own copy (x8.c) comes only from our relayout, so it has its shape */
    const int x8 = w->layout == RAD_LAYOUT_KERNEL;
    if (x8 && (!cpu_enc_x8[enc].tile || N % CPU_X8_ROWS)) return RAD_E_ARG;
    if (bias && bias->data) {
        if (bias->enc != RAD_ENC_F32) return RAD_E_UNSUPPORTED;
        if (bias->rank != 1 || bias->shape[0] != N) return RAD_E_SHAPE;
    }
    /* task numbers are ints, and M x (converted row) must fit a size_t */
    if (N > INT32_MAX / 2 || M > INT32_MAX / 2 || K > INT32_MAX) return RAD_E_RANGE;

    GemmJob j;
    memset(&j, 0, sizeof j);
    j.k = x8 ? &cpu_enc_x8[enc] : &cpu_enc[enc];
    j.M = M;
    j.N = N;
    j.K = K;
    j.x = x->data;
    j.x_stride = (size_t)x->row_bytes;
    j.w = w->data;
    j.w_stride = (size_t)w->row_bytes;
    j.out = out->data;
    j.out_stride = (size_t)out->row_bytes / sizeof(float);
    j.bias = bias && bias->data ? bias->data : NULL;
    j.softcap = (float)softcap;
    if (N == 1 || w->rank == 1) j.w_stride = (size_t)rad_encoding_row_bytes(enc, K);
    if (x8) j.w_stride = (size_t)cpu_x8_row_bytes(enc, K);
    if (M == 1) j.out_stride = (size_t)N;

    int n_threads = a->parallel_for && a->n_threads > 1 ? a->n_threads : 1;
    if (j.k->act_fmt == CPU_ACT_F32) {
        j.act = (char *)(void *)x->data;
        j.act_stride = j.x_stride;
    } else {
        CpuActQuantFn conv = cpu_act_quant[j.k->act_fmt];
        if (!conv) return RAD_E_UNSUPPORTED;
        if (!a->scratch) return RAD_E_ARG;
        j.act = (char *)round_up((size_t)(uintptr_t)a->scratch, ROW_ALIGN);
        j.act_stride = act_stride(j.k->act_fmt, K);
        /* Converting a row costs about as much as one weight row's dots: in
        ** parallel only when there are rows enough to share. */
        int conv_tasks = M >= 2 * n_threads ? n_threads * 2 : (M >= n_threads ? n_threads : 1);
        j.rows_per_convert_task = cdiv(M, conv_tasks);
        conv_tasks = (int)cdiv(M, j.rows_per_convert_task);
        cpu_parallel(a, conv_tasks, convert_task, &j);
    }
    if (M == 1) j.act_stride = 0;

    plan(&j, n_threads);
    cpu_parallel(a, j.n_nb * j.n_mb, product_task, &j);
    return RAD_OK;
}

/* The launches: both bands run the same driver, whose plan() tells them apart. */
static int gemm_nt(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return gemm(a, a->param[RAD_GEMM_NT_N].i, a->param[RAD_GEMM_NT_K].i, a->param[RAD_GEMM_NT_ENC].i,
                &o[RAD_GEMM_NT_X], &o[RAD_GEMM_NT_W], &o[RAD_GEMM_NT_BIAS], &o[RAD_GEMM_NT_OUT], 0.0);
}

static int logits_gemm(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    return gemm(a, a->param[RAD_LOGITS_GEMM_N].i, a->param[RAD_LOGITS_GEMM_K].i,
                a->param[RAD_LOGITS_GEMM_ENC].i, &o[RAD_LOGITS_GEMM_X], &o[RAD_LOGITS_GEMM_W], NULL,
                &o[RAD_LOGITS_GEMM_OUT], a->param[RAD_LOGITS_GEMM_SOFTCAP].f);
}

int cpu_gemm_nt_decode(const RadKernelArgs *a) { return gemm_nt(a); }
int cpu_gemm_nt_prefill(const RadKernelArgs *a) { return gemm_nt(a); }
int cpu_logits_gemm_decode(const RadKernelArgs *a) { return logits_gemm(a); }
int cpu_logits_gemm_prefill(const RadKernelArgs *a) { return logits_gemm(a); }

/* Exported for tests/ops/test_cpu.c, which checks that every ISA level
** converts activations to the same bytes: row x of K elements converted for
** a weight of encoding `enc`, as the products at the current level do.
** Returns the bytes written, or -1 when the level serves no such weight. */
__attribute__((visibility("default"))) int64_t rad_cpu_act_row(int enc, const float *x, void *dst, int64_t K)
{
    if (enc < 0 || enc >= RAD_ENC_COUNT || !cpu_enc[enc].dot || K <= 0) return -1;
    CpuActQuantFn conv = cpu_act_quant[cpu_enc[enc].act_fmt];
    if (!conv) return -1;
    conv(x, dst, K);
    return (int64_t)cpu_act_row_bytes(cpu_enc[enc].act_fmt, K);
}
