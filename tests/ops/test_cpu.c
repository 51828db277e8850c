/*
** test_cpu.c: the cpu kernel library's matrix products against ref.
**
** build/plugins/kernels/cpu.so is opened as the core opens it (dlopen, the
** rad_kernel_library export, init) and its gemm_nt and logits_gemm rows are
** run next to the reference library, which is linked into this binary.  For
** every ISA level this machine has ("portable", "avx2", "avx512", "neon";
** a level the machine lacks is reported as skipped) and for every weight
** encoding ref's gemm rows serve, it checks:
**
**   - cpu has a row and a kernel for the encoding (missing = failure);
**   - the NMSE against ref is at most 5e-4 (docs/OPS.md) over ragged N,
**     K of several blocks, M = 1, 2, 5, 9, 33 (both bands, partial tiles),
**     with strided rows, a bias, and a soft-cap;
**   - determinism: the same bits with no pool, with 1, 2 and 3 threads of a
**     real pthread pool, and with the tasks run in reverse order; and row m
**     of an M-row product equals the 1-row product of row m (tile = dot);
**   - the converted activation rows (Q8_0, Q8_1, Q8_K, F16, BF16) are the
**     same bytes at every level, and Q8_0 / Q8_1 are the bytes of ggml's x86
**     quantizer as this file restates it independently;
**   - where a row relayouts the weight (the x8 layout of q4_0, q4_1, q5_0,
**     q8_0 and q4_k at avx2 and up), all of the above again through the
**     relayouted copy, and the same bits as the stored layout;
**   - the canonical order (docs/OPS.md): a quantized encoding's product is
**     the same bits at every level;
**   - bad calls return error codes.
**
** Plain C with no test framework, so that the same file runs on arm64 under
** qemu-user (make test-neon), where cmocka is not installed.  The path of
** cpu.so is argv[1], else $RADIANCE_HOME/plugins/kernels/cpu.so, else
** build/plugins/kernels/cpu.so.
*/
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/rad_half.h"
#include "../../formats/quantize.h"
#include "../../kernels/rad_kernel.h"
#include "../../kernels/ops/rad_dequant.h"
#include "../../kernels/ops/rad_ops.h"
#include "ops_common.h"

extern const RadKernelLibrary rad_kernel_library; /* ref, linked in */

#define MAX_NMSE 5e-4

static const RadKernelLibrary *ref = &rad_kernel_library, *cpu;
static int (*cpu_set_isa)(const char *);
static int64_t (*cpu_act_row)(int, const float *, void *, int64_t);
static int n_fail, n_check;

#define FAIL(...)                                                   \
    do {                                                            \
        n_fail++;                                                   \
        fprintf(stderr, "FAIL (%s:%d): ", __FILE__, __LINE__);      \
        fprintf(stderr, __VA_ARGS__);                               \
        fputc('\n', stderr);                                        \
    } while (0)

#define CHECK(cond, ...)                    \
    do {                                    \
        n_check++;                          \
        if (!(cond)) FAIL(__VA_ARGS__);     \
    } while (0)

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* ------------------------------------------------------- calling a row */

static const RadOpSchema *schema_of(const RadKernelLibrary *lib, const char *op)
{
    for (int i = 0; i < lib->n_schemas; i++)
        if (strcmp(lib->schemas[i].op, op) == 0) return &lib->schemas[i];
    return NULL;
}

static int param_index(const RadOpSchema *s, const char *name)
{
    for (int i = 0; i < s->n_params; i++)
        if (strcmp(s->params[i].name, name) == 0) return i;
    fprintf(stderr, "op %s has no parameter %s\n", s->op, name);
    exit(2);
}

static int operand_index(const RadOpSchema *s, const char *name)
{
    for (int i = 0; i < s->n_operands; i++)
        if (strcmp(s->operands[i].name, name) == 0) return i;
    fprintf(stderr, "op %s has no operand %s\n", s->op, name);
    exit(2);
}

static const RadKernelRow *pick_row(const RadKernelLibrary *lib, const RadKernelArgs *a)
{
    return ops_pick_row(lib, a);
}

/* One product: out = x W^T (+ bias) (soft-capped), strides in floats. */
typedef struct Gemm {
    const char *op;         /* "gemm_nt" or "logits_gemm" */
    int64_t M, N, K;
    int enc;
    const float *x;
    int64_t x_stride;
    const void *w;
    int64_t w_row_bytes;
    const void *w_kernel;   /* the row's relayout copy of w to launch with, or NULL */
    const float *bias;
    double softcap;
    float *out;
    int64_t out_stride;
} Gemm;

static void set_act(RadTensor *t, const float *data, int64_t rows, int64_t cols, int64_t stride)
{
    t->data = (void *)data;
    t->enc = RAD_ENC_F32;
    t->rank = 2;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->row_bytes = stride * (int64_t)sizeof(float);
}

static RadKernelArgs gemm_args(const RadKernelLibrary *lib, const Gemm *g)
{
    RadKernelArgs a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.schema = schema_of(lib, g->op);
    if (!a.schema) {
        fprintf(stderr, "library %s has no schema %s\n", lib->name, g->op);
        exit(2);
    }
    a.param[RAD_P_M].i = g->M;
    a.param[param_index(a.schema, "N")].i = g->N;
    a.param[param_index(a.schema, "K")].i = g->K;
    a.param[param_index(a.schema, "enc")].i = g->enc;
    if (strcmp(g->op, "logits_gemm") == 0) a.param[param_index(a.schema, "softcap")].f = g->softcap;
    set_act(&a.operand[operand_index(a.schema, "x")], g->x, g->M, g->K, g->x_stride);
    RadTensor *w = &a.operand[operand_index(a.schema, "w")];
    w->data = (void *)g->w;
    w->enc = g->enc;
    w->rank = 2;
    w->shape[0] = g->N;
    w->shape[1] = g->K;
    w->row_bytes = g->w_row_bytes;
    if (g->w_kernel) {
        w->data = (void *)g->w_kernel;
        w->layout = RAD_LAYOUT_KERNEL;
    }
    if (g->bias) {
        RadTensor *b = &a.operand[operand_index(a.schema, "bias")];
        b->data = (void *)g->bias;
        b->enc = RAD_ENC_F32;
        b->rank = 1;
        b->shape[0] = g->N;
    }
    set_act(&a.operand[operand_index(a.schema, "out")], g->out, g->M, g->N, g->out_stride);
    return a;
}

/* Run g on lib's row (with the given pool, or none), scratch sized by the
** row's hook for M as the band's upper edge would be.  Returns the launch's
** code, or 1 when lib has no row for it. */
static int run_gemm(const RadKernelLibrary *lib, const Gemm *g, TestPool *pool)
{
    RadKernelArgs a = gemm_args(lib, g);
    const RadKernelRow *row = pick_row(lib, &a);
    if (!row) return 1;
    if (pool) {
        a.pool = pool;
        a.n_threads = pool->n_threads;
        a.parallel_for = pool_parallel_for;
    }
    void *scratch = NULL;
    if (row->scratch_bytes) {
        RadKernelArgs s;
        memset(&s, 0, sizeof s);
        s.struct_size = sizeof s;
        s.schema = a.schema;
        memcpy(s.param, a.param, sizeof s.param);
        s.n_threads = a.n_threads;
        size_t n = row->scratch_bytes(&s);
        if (n) scratch = xmalloc(n);
    }
    a.scratch = scratch;
    int rc = row->launch(&a);
    free(scratch);
    return rc;
}

/* ---------------------------------------------------------------- data */

static float rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

/* Activations: uniform in [-1, 1), as llama.cpp's test-backend-ops draws
** them for the same tolerance, with a 4x spike every 97 elements (real
** activations have outliers, the block maximum must find them), and row 5
** (when present) all zeros (blocks with d = 0).  Padding past K is NaN, so
** reading it would show. */
static float *make_x(int64_t M, int64_t K, int64_t stride, uint32_t seed)
{
    float *x = xmalloc((size_t)(M * stride) * sizeof(float));
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < stride; k++) {
            float v = rnd(&seed);
            if ((m * K + k) % 97 == 13) v *= 4.0f;
            x[m * stride + k] = (m == 5 || k >= K) ? (k >= K ? NAN : 0.0f) : v;
        }
    return x;
}

static int is_block32(int enc)
{
    return enc == RAD_ENC_Q8_0 || enc == RAD_ENC_Q4_0 || enc == RAD_ENC_Q4_1 || enc == RAD_ENC_Q5_0 ||
           enc == RAD_ENC_Q5_1 || enc == RAD_ENC_IQ4_NL || enc == RAD_ENC_MXFP4;
}

static int is_float(int enc) { return enc == RAD_ENC_F32 || enc == RAD_ENC_F16 || enc == RAD_ENC_BF16; }

/* A weight [N, K] in `enc` with rows `pad` bytes longer than packed: random
** values, each row its own scale, quantized by the converter's quantizers
** (formats/quantize.c); mxfp4, which it does not write, gets random codes
** under a random power-of-two scale. */
static void *make_w(int enc, int64_t N, int64_t K, int64_t pad, uint32_t seed, int64_t *row_bytes)
{
    int64_t packed = rad_encoding_row_bytes(enc, K);
    if (packed < 0) return NULL;
    *row_bytes = packed + pad;
    unsigned char *w = xmalloc((size_t)(N * *row_bytes));
    float *v = xmalloc((size_t)K * sizeof(float));
    for (int64_t n = 0; n < N; n++) {
        unsigned char *row = w + n * *row_bytes;
        float scale = 0.05f + 0.5f * (1.0f + rnd(&seed));
        for (int64_t k = 0; k < K; k++) v[k] = scale * rnd(&seed) * ((k % 61 == 7) ? 4.0f : 1.0f);
        if (enc == RAD_ENC_F32) {
            memcpy(row, v, (size_t)K * 4);
        } else if (enc == RAD_ENC_F16 || enc == RAD_ENC_BF16) {
            for (int64_t k = 0; k < K; k++) {
                uint16_t h = enc == RAD_ENC_F16 ? rad_f32_to_f16(v[k]) : rad_f32_to_bf16(v[k]);
                memcpy(row + 2 * k, &h, 2);
            }
        } else if (enc == RAD_ENC_MXFP4) {
            for (int64_t b = 0; b < K / 32; b++) {
                unsigned char *blk = row + b * 17;
                blk[0] = (unsigned char)(122 + (int)((rnd(&seed) + 1.0f) * 3.0f)); /* 2^-6 .. 2^-1 */
                for (int j = 1; j < 17; j++) blk[j] = (unsigned char)((rnd(&seed) + 1.0f) * 127.9f);
            }
        } else if (rad_quantize_supported(enc)) {
            if (rad_quantize_row(enc, v, row, K) != 0) {
                free(v);
                free(w);
                return NULL;
            }
        } else {
            free(v);
            free(w);
            return NULL;
        }
    }
    free(v);
    return w;
}

/* NMSE of b against a over M rows of N (strides in floats); -1 when one
** has a NaN where the other has none. */
static double nmse(const float *a, int64_t as, const float *b, int64_t bs, int64_t M, int64_t N)
{
    double num = 0, den = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double x = a[m * as + n], y = b[m * bs + n];
            if (isnan(x) != isnan(y)) return -1;
            if (isnan(x)) continue;
            num += (x - y) * (x - y);
            den += x * x;
        }
    return den > 0 ? num / den : num;
}

static int same_bits(const float *a, int64_t as, const float *b, int64_t bs, int64_t M, int64_t N)
{
    for (int64_t m = 0; m < M; m++)
        if (memcmp(a + m * as, b + m * bs, (size_t)N * sizeof(float)) != 0) return 0;
    return 1;
}

static const char *enc_name(int enc)
{
    const RadEncodingInfo *e = rad_encoding_info(enc);
    return e ? e->name : "?";
}

/* ------------------------------------------------- activation formats */

/* ggml's x86 AVX2 quantize_row_q8_0 / q8_1, restated from its description
** (kernels/cpu/act_q8.c): d = amax / 127, id = 127 / amax, codes rounded
** half to even, s = d * sum(q). */
static void ggml_q8(const float *x, unsigned char *y, int64_t K, int with_sum)
{
    int bytes = with_sum ? 36 : 34;
    for (int64_t b = 0; b < K / 32; b++, x += 32, y += bytes) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            float r = nearbyintf(x[j] * id); /* default mode: nearest, ties to even */
            int q = (int)r;
            y[(with_sum ? 4 : 2) + j] = (unsigned char)(int8_t)q;
            sum += q;
        }
        uint16_t h = rad_f32_to_f16(d);
        memcpy(y, &h, 2);
        if (with_sum) {
            h = rad_f32_to_f16(d * (float)sum);
            memcpy(y + 2, &h, 2);
        }
    }
}

#define isas ops_isa_levels
#define N_ISA OPS_N_LEVELS

/* Converted rows for weights of each activation format, at each level,
** against the portable level's bytes (and ggml's for Q8_0 / Q8_1). */
static void test_act_formats(void)
{
    static const int encs[] = {RAD_ENC_Q8_0, RAD_ENC_Q4_1, RAD_ENC_Q4_K, RAD_ENC_F16, RAD_ENC_BF16, RAD_ENC_F32};
    const int64_t K = 512;
    float *x = xmalloc((size_t)K * 4 * sizeof(float));
    uint32_t seed = 7;
    for (int64_t i = 0; i < 4 * K; i++) x[i] = rnd(&seed) * ((i % 37 == 3) ? 20.0f : 1.0f);
    /* ties: a block whose maximum is 127 has id = 1, so x.5 must round to even */
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) + 0.5f;
    x[31] = 127.0f;
    for (int j = 32; j < 64; j++) x[j] = 0.0f;          /* an all-zero block */
    for (int j = 64; j < 96; j++) x[j] = 1e-30f * (float)(j - 80); /* tiny, subnormal d */
    unsigned char *want = xmalloc(4 * 1024 + K * 8), *got = xmalloc(4 * 1024 + K * 8);
    unsigned char *gg = xmalloc(K * 8);

    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++) {
        int enc = encs[e];
        if (cpu_set_isa("portable") != 0) FAIL("portable level refused");
        int64_t n_want = cpu_act_row(enc, x, want, K);
        if (n_want < 0) {
            if (enc == RAD_ENC_Q4_K) FAIL("cpu converts no activations for %s weights (Q8_K)", enc_name(enc));
            else FAIL("cpu converts no activations for %s weights", enc_name(enc));
            continue;
        }
        if (enc == RAD_ENC_Q8_0 || enc == RAD_ENC_Q4_1) {
            int with_sum = enc == RAD_ENC_Q4_1;
            ggml_q8(x, gg, K, with_sum);
            CHECK(n_want == K / 32 * (with_sum ? 36 : 34) && memcmp(gg, want, (size_t)n_want) == 0,
                  "portable %s activations differ from ggml's x86 quantizer", with_sum ? "Q8_1" : "Q8_0");
        }
        for (int i = 1; i < N_ISA; i++) {
            if (cpu_set_isa(isas[i]) != 0) continue;
            memset(got, 0xa5, (size_t)n_want);
            int64_t n_got = cpu_act_row(enc, x, got, K);
            CHECK(n_got == n_want && memcmp(got, want, (size_t)n_want) == 0,
                  "%s: activations for %s weights differ from the portable bytes", isas[i], enc_name(enc));
        }
    }
    free(x);
    free(want);
    free(got);
    free(gg);
}

/* ----------------------------------------------------------- products */

typedef struct Shape {
    int64_t N, K;
} Shape;

/* The encodings ref's gemm rows serve: every value of their enc lists. */
static int ref_encodings(int *out)
{
    int n = 0;
    for (int i = 0; i < ref->n_rows; i++) {
        const RadKernelRow *r = &ref->rows[i];
        if (strcmp(r->op, "gemm_nt") != 0) continue;
        for (int c = 0; c < r->n_constraints; c++) {
            const RadConstraint *k = &r->constraints[c];
            if (strcmp(k->param, "enc") != 0 || k->kind != RAD_C_IN) continue;
            for (int j = 0; j < k->n_values; j++) {
                int seen = 0;
                for (int t = 0; t < n; t++) seen |= out[t] == (int)k->values[j];
                if (!seen && n < 64) out[n++] = (int)k->values[j];
            }
        }
    }
    return n;
}

static const int64_t Ms[] = {1, 2, 5, 9, 33};
#define N_M 5

/* Bytes of a Q8_0 row followed by its blocks' int32 code sums (4-aligned),
** the activation format of q4_0 and q5_0 weights. */
static int64_t q8_0_sums_bytes(int64_t K) { return (K / 32 * 34 + 3) / 4 * 4 + K / 32 * 4; }

/* What the product must be once the activations are rounded as the cpu
** library rounds them: the activation row converted at the current level
** (rad_cpu_act_row) and decoded back, times the decoded weight, summed in
** double.  For q4_1 / q5_1 the offset term is m * s with the stored s, as
** in the kernels (and ggml).  This pins the kernels' arithmetic far more
** tightly than the 5e-4 against ref, which is mostly the activation
** rounding itself. */
static void same_rounding_product(const Gemm *g, float *out)
{
    const int64_t K = g->K;
    unsigned char *conv = xmalloc((size_t)K * 8 + 64);
    float *a = xmalloc((size_t)K * sizeof(float)), *wd = xmalloc((size_t)K * sizeof(float));
    double *ms = xmalloc((size_t)(K / 32 + 1) * sizeof(double));
    int has_min = g->enc == RAD_ENC_Q4_1 || g->enc == RAD_ENC_Q5_1;
    int64_t wrow = rad_encoding_row_bytes(g->enc, K);
    unsigned char *wcopy = xmalloc((size_t)wrow + 1);
    for (int64_t m = 0; m < g->M; m++) {
        int64_t n_conv = cpu_act_row(g->enc, g->x + m * g->x_stride, conv, K);
        if (n_conv == K * 4) memcpy(a, conv, (size_t)K * 4);
        else if (n_conv == K * 2) {
            for (int64_t k = 0; k < K; k++) {
                uint16_t h;
                memcpy(&h, conv + 2 * k, 2);
                a[k] = g->enc == RAD_ENC_BF16 ? rad_bf16_to_f32(h) : rad_f16_to_f32(h);
            }
        } else if (n_conv == K / 32 * 34 || n_conv == K / 32 * 36 || n_conv == q8_0_sums_bytes(K)) {
            int bytes = n_conv == K / 32 * 36 ? 36 : 34, at = bytes == 34 ? 2 : 4;
            for (int64_t b = 0; b < K / 32; b++) {
                uint16_t h;
                memcpy(&h, conv + b * bytes, 2);
                float d = rad_f16_to_f32(h);
                for (int j = 0; j < 32; j++) a[b * 32 + j] = d * (float)(int8_t)conv[b * bytes + at + j];
            }
        } else if (n_conv == K / 256 * 292) {
            for (int64_t b = 0; b < K / 256; b++) {
                float d;
                memcpy(&d, conv + b * 292, 4);
                for (int j = 0; j < 256; j++) a[b * 256 + j] = d * (float)(int8_t)conv[b * 292 + 4 + j];
            }
        } else {
            FAIL("%s: cannot read back a converted activation row of %lld bytes", enc_name(g->enc), (long long)n_conv);
            break;
        }
        for (int64_t n = 0; n < g->N; n++) {
            const unsigned char *w = (const unsigned char *)g->w + n * g->w_row_bytes;
            double acc = 0;
            if (has_min) {
                /* decode with m = 0 (d * q exactly), then add m * s per block */
                int bytes = g->enc == RAD_ENC_Q4_1 ? 20 : 24;
                memcpy(wcopy, w, (size_t)wrow);
                for (int64_t b = 0; b < K / 32; b++) {
                    uint16_t mh, sh;
                    memcpy(&mh, w + b * bytes + 2, 2);
                    memcpy(&sh, conv + b * 36 + 2, 2);
                    ms[b] = (double)rad_f16_to_f32(mh) * rad_f16_to_f32(sh);
                    acc += ms[b];
                    wcopy[b * bytes + 2] = wcopy[b * bytes + 3] = 0;
                }
                w = wcopy;
            }
            rad_dequant_row(g->enc, w, wd, K);
            for (int64_t k = 0; k < K; k++) acc += (double)wd[k] * a[k];
            if (g->bias) acc += g->bias[n];
            if (g->softcap > 0) acc = g->softcap * tanh(acc / g->softcap);
            out[m * g->out_stride + n] = (float)acc;
        }
    }
    free(conv);
    free(a);
    free(wd);
    free(ms);
    free(wcopy);
}

#define MAX_NMSE_SAME_ROUNDING 1e-10
#define MIN_OUTPUTS 64      /* fewer outputs: only the pooled NMSE is meaningful */

/* One (encoding, shape, op) case at the current ISA level.  ref_out holds
** ref's result for the largest M (rows are independent, so smaller M are
** its first rows).  An NMSE over a handful of outputs says little (one dot
** near zero dominates it), so the 5e-4 bound applies per M from
** MIN_OUTPUTS outputs on, and always to the outputs of all five M pooled. */
static void check_case(const char *isa, const char *op, int enc, Shape s, const float *x, int64_t xs,
                       const void *w, int64_t wrb, const void *w_kernel, const float *bias, double softcap,
                       const float *ref_out, int64_t os)
{
    int64_t Mmax = Ms[N_M - 1];
    float *out = xmalloc((size_t)(Mmax * os) * sizeof(float));
    float *again = xmalloc((size_t)(Mmax * os) * sizeof(float));
    float *one = xmalloc((size_t)(Mmax * os) * sizeof(float));
    float *exact = xmalloc((size_t)(Mmax * os) * sizeof(float));
    Gemm g = {.op = op, .N = s.N, .K = s.K, .enc = enc, .x = x, .x_stride = xs, .w = w, .w_row_bytes = wrb,
              .w_kernel = w_kernel, .bias = bias, .softcap = softcap, .out = out, .out_stride = os};
    double pooled_num = 0, pooled_den = 0;
    int ran = 0;
    const char *extra = bias ? " +bias" : softcap > 0 ? " +softcap" : "";
    for (int mi = 0; mi < N_M; mi++) {
        g.M = Ms[mi];
        g.out = out;
        for (int64_t i = 0; i < Mmax * os; i++) out[i] = -77.0f;
        int rc = run_gemm(cpu, &g, NULL);
        n_check++;
        if (rc == 1) {
            FAIL("%s: cpu has no %s row for %s, M=%lld", isa, op, enc_name(enc), (long long)g.M);
            break;
        }
        if (rc != 0) {
            FAIL("%s: cpu %s %s M=%lld N=%lld K=%lld returned %d%s", isa, op, enc_name(enc), (long long)g.M,
                 (long long)s.N, (long long)s.K, rc, rc == RAD_E_UNSUPPORTED ? " (no kernel for the encoding)" : "");
            break;
        }
        ran++;
        double e = nmse(ref_out, os, out, os, g.M, s.N);
        for (int64_t m = 0; m < g.M; m++)
            for (int64_t n = 0; n < s.N; n++) {
                double r = ref_out[m * os + n], c = out[m * os + n];
                pooled_num += (r - c) * (r - c);
                pooled_den += r * r;
            }
        if (g.M * s.N >= MIN_OUTPUTS)
            CHECK(e >= 0 && e <= MAX_NMSE, "%s: %s %s M=%lld N=%lld K=%lld%s: NMSE %.3g against ref (max %g)", isa,
                  op, enc_name(enc), (long long)g.M, (long long)s.N, (long long)s.K, extra, e, MAX_NMSE);
        else CHECK(e >= 0, "%s: %s %s M=%lld: NaN where ref has none", isa, op, enc_name(enc), (long long)g.M);

        g.out = exact;
        same_rounding_product(&g, exact);
        g.out = out;
        e = nmse(exact, os, out, os, g.M, s.N);
        CHECK(e >= 0 && e <= MAX_NMSE_SAME_ROUNDING,
              "%s: %s %s M=%lld N=%lld K=%lld%s: NMSE %.3g against the product of the same rounded activations "
              "(max %g)", isa, op, enc_name(enc), (long long)g.M, (long long)s.N, (long long)s.K, extra, e,
              MAX_NMSE_SAME_ROUNDING);

        /* padding past N is not written */
        int pad_ok = 1;
        for (int64_t m = 0; m < g.M; m++)
            for (int64_t n = s.N; n < os; n++) pad_ok &= out[m * os + n] == -77.0f;
        CHECK(pad_ok, "%s: %s %s M=%lld wrote past N", isa, op, enc_name(enc), (long long)g.M);

        /* thread counts and task orders give the same bits */
        TestPool pools[] = {{1, 0}, {2, 0}, {3, 0}, {4, 1}};
        for (size_t p = 0; p < sizeof pools / sizeof pools[0]; p++) {
            g.out = again;
            memset(again, 0, (size_t)(Mmax * os) * sizeof(float));
            rc = run_gemm(cpu, &g, &pools[p]);
            CHECK(rc == 0 && same_bits(out, os, again, os, g.M, s.N),
                  "%s: %s %s M=%lld N=%lld K=%lld: %d threads%s changed the result", isa, op, enc_name(enc),
                  (long long)g.M, (long long)s.N, (long long)s.K, pools[p].n_threads,
                  pools[p].reverse ? " (reverse order)" : "");
        }
        /* row m of a prefill equals the decode product of row m alone */
        if (g.M > 1) {
            int same = 1;
            for (int64_t m = 0; m < g.M; m++) {
                Gemm d1 = g;
                d1.M = 1;
                d1.x = x + m * xs;
                d1.out = one;
                if (run_gemm(cpu, &d1, NULL) != 0) same = 0;
                else same &= same_bits(out + m * os, os, one, os, 1, s.N);
            }
            CHECK(same, "%s: %s %s M=%lld N=%lld K=%lld: a prefill row differs from its decode product", isa, op,
                  enc_name(enc), (long long)g.M, (long long)s.N, (long long)s.K);
        }
    }
    if (ran == N_M) {
        double e = pooled_den > 0 ? pooled_num / pooled_den : pooled_num;
        CHECK(e <= MAX_NMSE, "%s: %s %s N=%lld K=%lld%s: NMSE %.3g against ref over all M (max %g)", isa, op,
              enc_name(enc), (long long)s.N, (long long)s.K, extra, e, MAX_NMSE);
    }
    free(out);
    free(again);
    free(one);
    free(exact);
}

/* Encodings whose relayouted products ran at the avx2 level. */
static unsigned long long relayout_tested;

static void test_products(void)
{
    int encs[64];
    int n_enc = ref_encodings(encs);
    CHECK(n_enc >= 15, "ref serves %d encodings, expected at least 15", n_enc);
    int64_t Mmax = Ms[N_M - 1];
    for (int e = 0; e < n_enc; e++) {
        int enc = encs[e];
        /* ragged N, a strided shape, N = 1, and N a multiple of 8 (the x8 layout) */
        Shape shapes[4];
        if (is_float(enc))
            shapes[0] = (Shape){13, 75}, shapes[1] = (Shape){67, 512}, shapes[2] = (Shape){1, 40}, shapes[3] = (Shape){16, 64};
        else if (is_block32(enc))
            shapes[0] = (Shape){13, 96}, shapes[1] = (Shape){67, 512}, shapes[2] = (Shape){1, 64}, shapes[3] = (Shape){24, 160};
        else
            shapes[0] = (Shape){13, 256}, shapes[1] = (Shape){67, 768}, shapes[2] = (Shape){1, 512}, shapes[3] = (Shape){16, 512};
        int enc_fail = n_fail;
        for (int si = 0; si < 4; si++) {
            Shape s = shapes[si];
            int64_t xs = s.K + (si == 1 ? 5 : 0), os = s.N + (si == 1 ? 3 : 0);
            float *x = make_x(Mmax, s.K, xs, 100u + (uint32_t)(enc * 7 + si));
            int64_t wrb;
            void *w = make_w(enc, s.N, s.K, si == 1 ? 16 : 0, 200u + (uint32_t)(enc * 11 + si), &wrb);
            if (!w) {
                FAIL("cannot make %s weights of K=%lld for the test", enc_name(enc), (long long)s.K);
                free(x);
                continue;
            }
            float *bias = xmalloc((size_t)s.N * sizeof(float));
            uint32_t bs = 5;
            for (int64_t n = 0; n < s.N; n++) bias[n] = 2.0f * rnd(&bs);
            float *want = xmalloc((size_t)(Mmax * os) * sizeof(float));
            float *canon = xmalloc((size_t)(Mmax * os) * sizeof(float));
            float *stored = xmalloc((size_t)(Mmax * os) * sizeof(float));
            float *kernel_layout = xmalloc((size_t)(Mmax * os) * sizeof(float));
            struct {
                const char *op;
                const float *bias;
                double softcap;
            } variants[] = {{"gemm_nt", NULL, 0}, {"gemm_nt", bias, 0}, {"logits_gemm", NULL, 0}, {"logits_gemm", NULL, 3.0}};
            for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
                if (si != 1 && v > 0) break; /* bias and soft-cap on the strided shape */
                Gemm g = {.op = variants[v].op, .M = Mmax, .N = s.N, .K = s.K, .enc = enc, .x = x, .x_stride = xs,
                          .w = w, .w_row_bytes = wrb, .bias = variants[v].bias, .softcap = variants[v].softcap,
                          .out = want, .out_stride = os};
                int rc = run_gemm(ref, &g, NULL);
                if (rc != 0) {
                    FAIL("ref %s %s returned %d", g.op, enc_name(enc), rc);
                    continue;
                }
                /* The canonical order (docs/OPS.md): a quantized encoding's
                ** product has the same bits at every level and in both
                ** layouts; a float encoding's in both layouts of a level. */
                const char *canon_isa = NULL;
                for (int i = 0; i < N_ISA; i++) {
                    if (cpu_set_isa(isas[i]) != 0) continue;
                    check_case(isas[i], g.op, enc, s, x, xs, w, wrb, NULL, g.bias, g.softcap, want, os);
                    Gemm full = g;
                    full.out = stored;
                    if (run_gemm(cpu, &full, NULL) != 0) continue;
                    if (!is_float(enc)) {
                        if (!canon_isa) {
                            memcpy(canon, stored, (size_t)(Mmax * os) * sizeof(float));
                            canon_isa = isas[i];
                        } else {
                            CHECK(same_bits(canon, os, stored, os, Mmax, s.N),
                                  "%s: %s %s N=%lld K=%lld: not the bits of level %s (canonical order)", isas[i], g.op,
                                  enc_name(enc), (long long)s.N, (long long)s.K, canon_isa);
                        }
                    }
                    /* the same through the row's own weight layout, where it makes one */
                    RadKernelArgs a = gemm_args(cpu, &g);
                    const RadKernelRow *row = pick_row(cpu, &a);
                    const RadTensor *wt = &a.operand[operand_index(a.schema, "w")];
                    size_t bytes = row && row->relayout_bytes ? row->relayout_bytes(wt) : 0;
                    if (!bytes) continue;
                    void *copy = xmalloc(bytes);
                    char label[64];
                    snprintf(label, sizeof label, "%s relayout", isas[i]);
                    if (row->relayout(wt, copy) != RAD_OK) {
                        FAIL("%s: relayout of %s failed", label, enc_name(enc));
                    } else {
                        check_case(label, g.op, enc, s, x, xs, w, wrb, copy, g.bias, g.softcap, want, os);
                        full.out = kernel_layout;
                        full.w_kernel = copy;
                        CHECK(run_gemm(cpu, &full, NULL) == 0 && same_bits(stored, os, kernel_layout, os, Mmax, s.N),
                              "%s: %s %s N=%lld K=%lld: the relayouted weight gives other bits than the stored one",
                              label, g.op, enc_name(enc), (long long)s.N, (long long)s.K);
                    }
                    if (strcmp(isas[i], "avx2") == 0 && enc < 64) relayout_tested |= 1ull << enc;
                    free(copy);
                }
            }
            free(want);
            free(canon);
            free(stored);
            free(kernel_layout);
            free(bias);
            free(w);
            free(x);
        }
        printf("  %-7s %s\n", enc_name(enc), n_fail == enc_fail ? "ok" : "FAILED");
    }
}

/* ----------------------------------------------------------- bad calls */

static void test_bad_calls(void)
{
    cpu_set_isa("portable");
    const int64_t K = 64, N = 4;
    float x[2 * 64], out[2 * 4];
    int64_t wrb;
    void *w = make_w(RAD_ENC_Q8_0, N, K, 0, 1, &wrb);
    for (int i = 0; i < 2 * 64; i++) x[i] = (float)i / 100.0f;
    Gemm ok = {.op = "gemm_nt", .M = 2, .N = N, .K = K, .enc = RAD_ENC_Q8_0, .x = x, .x_stride = K,
               .w = w, .w_row_bytes = wrb, .out = out, .out_stride = N};
    CHECK(run_gemm(cpu, &ok, NULL) == RAD_OK, "a good call failed");

    Gemm g = ok;
    g.M = 0;
    RadKernelArgs a = gemm_args(cpu, &ok);
    const RadKernelRow *row = pick_row(cpu, &a);
    if (!row) {
        FAIL("cpu has no gemm_nt row for q8_0");
        free(w);
        return;
    }
    a.param[RAD_P_M].i = 0;
    CHECK(row->launch(&a) == RAD_E_SHAPE, "M = 0 is not RAD_E_SHAPE");
    a = gemm_args(cpu, &ok);
    a.scratch = NULL;
    CHECK(row->launch(&a) == RAD_E_ARG, "no scratch for a quantized weight is not RAD_E_ARG");
    g = ok;
    g.x = NULL;
    CHECK(run_gemm(cpu, &g, NULL) == RAD_E_ARG, "a missing x is not RAD_E_ARG");
    a = gemm_args(cpu, &ok);
    const int W = operand_index(a.schema, "w"), B = operand_index(a.schema, "bias");
    const int ENC = param_index(a.schema, "enc");
    a.operand[W].enc = RAD_ENC_Q4_0;            /* the weight is not what enc said */
    CHECK(row->launch(&a) != RAD_OK, "a weight of another encoding was accepted");
    a = gemm_args(cpu, &ok);
    a.param[ENC].i = 999;                       /* enc out of range */
    a.operand[W].enc = 999;
    CHECK(row->launch(&a) == RAD_E_UNSUPPORTED, "enc 999 is not RAD_E_UNSUPPORTED");
    a = gemm_args(cpu, &ok);
    a.operand[W].shape[1] = K + 32;             /* weight shape disagrees with K */
    CHECK(row->launch(&a) == RAD_E_SHAPE, "a weight of the wrong width is not RAD_E_SHAPE");
    g = ok;
    g.K = 48;                                   /* not whole blocks */
    CHECK(run_gemm(cpu, &g, NULL) != RAD_OK, "K = 48 with q8_0 was accepted");
    g = ok;
    g.x_stride = K - 1;                         /* rows overlap */
    CHECK(run_gemm(cpu, &g, NULL) == RAD_E_SHAPE, "overlapping x rows are not RAD_E_SHAPE");
    a = gemm_args(cpu, &ok);
    float bias[3] = {0};
    a.operand[B].data = bias;
    a.operand[B].enc = RAD_ENC_F32;
    a.operand[B].rank = 1;
    a.operand[B].shape[0] = 3;                  /* a bias of the wrong length */
    CHECK(row->launch(&a) == RAD_E_SHAPE, "a bias of the wrong length is not RAD_E_SHAPE");
    free(w);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    void *h = NULL;
    const char *path = argc > 1 ? argv[1] : NULL;
    if (!(cpu = ops_open_cpu(path, &cpu_set_isa, &h))) {
        fprintf(stderr, "FAIL: the cpu library did not open\n");
        return 1;
    }
    cpu_act_row = (int64_t(*)(int, const float *, void *, int64_t))dlsym(h, "rad_cpu_act_row");
    const char *(*cpu_isa)(void) = (const char *(*)(void))dlsym(h, "rad_cpu_isa");
    if (!cpu_act_row || !cpu_isa) {
        fprintf(stderr, "FAIL: the cpu library lacks rad_cpu_act_row or rad_cpu_isa\n");
        return 1;
    }
    printf("cpu library %s, machine level %s\n", path ? path : "(RADIANCE_HOME or build)", cpu_isa());
    for (int i = 0; i < N_ISA; i++)
        if (cpu_set_isa(isas[i]) != 0) printf("SKIP: level %s (this machine does not have it)\n", isas[i]);
        else printf("testing level %s\n", isas[i]);

    test_act_formats();
    test_products();
    if (cpu_set_isa("avx2") == 0) {
        n_check++;
        CHECK((relayout_tested >> RAD_ENC_Q4_0 & 1) && (relayout_tested >> RAD_ENC_Q4_1 & 1) &&
                  (relayout_tested >> RAD_ENC_Q5_0 & 1) && (relayout_tested >> RAD_ENC_Q8_0 & 1) &&
                  (relayout_tested >> RAD_ENC_Q4_K & 1),
              "avx2: the q4_0, q4_1, q5_0, q8_0 and q4_k products were not all run through the x8 relayout");
    }
    test_bad_calls();

    printf("%d checks, %d failed\n", n_check, n_fail);
    return n_fail ? 1 : 0;
}
