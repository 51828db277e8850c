/*
** test_cpu_ops.c: the cpu library's non-GEMM ops against ref.
**
** Every op runs through the cpu library's exported row (dlopen of
** build/plugins/kernels/cpu.so) on the same inputs as ref's row (linked in
** statically), and must meet docs/OPS.md's bound: bit-identical output for
** add, mul, scale_rows, rmsnorm_add's residual, the copies and kv_store;
** NMSE <= 1e-6 for the norms, rope and the gated activations; <= 5e-4 for
** attention.  Each comparison is repeated on every ISA level the machine
** runs (rad_cpu_set_isa), and at each level under four ways of running
** tasks (none: serial; a pthread pool of 2 and of 3 threads; a "pool" that
** runs tasks in reverse order), whose outputs must agree to the bit: no
** result may depend on the thread count or on the order tasks run in.
**
** Shapes are chosen for the kernels' edges: ragged widths (not multiples of
** 8), one row and many, positions past a cache block, GQA ratios 1, 4 and
** 8, windows, soft-caps, sinks, head_dim 64 to 1024, f16 and f32 caches,
** several sequences in one step, block tables with holes, and contexts long
** enough for decode to split its key range.  The largest NMSE seen per op is
** printed at the end.
*/
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_common.h"
#include "ref_harness.h"

#include "../../base/rad_half.h"
#include "../../kernels/ops/rad_ops.h"
#include "../../kernels/ops/rad_op_values.h"

/* ------------------------------------------------------- the library */

static const RadKernelLibrary *cpu_lib;
static int (*cpu_set_isa)(const char *name);
#define isa_levels ops_isa_levels
enum { N_LEVELS = OPS_N_LEVELS };
static int level_ok[N_LEVELS];

static const RadKernelRow *cpu_find_row(const char *op)
{
    for (int i = 0; i < cpu_lib->n_rows; i++)
        if (strcmp(cpu_lib->rows[i].op, op) == 0) return &cpu_lib->rows[i];
    fail_msg("the cpu library has no row for %s", op);
    return NULL;
}

static int load_cpu(void **state)
{
    (void)state;
    if (!(cpu_lib = ops_open_cpu(NULL, &cpu_set_isa, NULL))) return -1;
    for (int i = 0; i < N_LEVELS; i++) {
        level_ok[i] = cpu_set_isa(isa_levels[i]) == 0;
        if (!level_ok[i]) printf("[ NOTE     ] ISA level %s: not on this machine, skipped\n", isa_levels[i]);
    }
    return 0;
}

/* ----------------------------------------------------- ways to run tasks */

/* 0: no pool; 1, 2: real threads; 3: reverse order, claiming 4 threads */
static TestPool pools[] = {{1, 0}, {2, 0}, {3, 0}, {4, 1}};
enum { N_POOLS = 4 };
static const char *pool_names[] = {"serial", "2 threads", "3 threads", "reverse order"};

/* ------------------------------------------------------------ sweeps */

typedef struct Region {
    void *p;
    size_t n;
} Region;

/* A check of the cpu result against ref's, called once per ISA level. */
typedef void (*CheckFn)(void *ctx, const char *isa);

/* Run the cpu call `c` at every ISA level and under every pool.  Before each
** run the regions `io` (the call's in-place inputs and its outputs) get
** their first contents back; after the serial run `check` compares with
** ref, and every other run must leave `io` bit-identical to it. */
static void cpu_sweep(Call *c, Region *io, int n_io, CheckFn check, void *ctx)
{
    void *init[8], *first[8];
    assert_true(n_io <= 8);
    for (int r = 0; r < n_io; r++) {
        init[r] = malloc(io[r].n);
        first[r] = malloc(io[r].n);
        assert_non_null(init[r]);
        assert_non_null(first[r]);
        memcpy(init[r], io[r].p, io[r].n);
    }
    for (int l = 0; l < N_LEVELS; l++) {
        if (!level_ok[l]) continue;
        assert_int_equal(cpu_set_isa(isa_levels[l]), 0);
        for (int pi = 0; pi < N_POOLS; pi++) {
            for (int r = 0; r < n_io; r++) memcpy(io[r].p, init[r], io[r].n);
            c->args.pool = pi ? &pools[pi] : NULL;
            c->args.parallel_for = pi ? pool_parallel_for : NULL;
            c->args.n_threads = pools[pi].n_threads;
            void *scratch = NULL;
            if (c->row->scratch_bytes) {
                size_t need = c->row->scratch_bytes(&c->args);
                scratch = need ? malloc(need) : NULL;
                if (need) memset(scratch, 0xff, need);     /* NaN garbage: must be written before read */
            }
            c->args.scratch = scratch;
            int rc = c->row->launch(&c->args);
            free(scratch);
            c->args.scratch = NULL;
            if (rc) fail_msg("%s at %s, %s: rc %d", c->args.schema->op, isa_levels[l], pool_names[pi], rc);
            if (pi == 0) {
                check(ctx, isa_levels[l]);
                for (int r = 0; r < n_io; r++) memcpy(first[r], io[r].p, io[r].n);
            } else {
                for (int r = 0; r < n_io; r++)
                    if (memcmp(first[r], io[r].p, io[r].n) != 0)
                        fail_msg("%s at %s: %s differs from serial (region %d)", c->args.schema->op,
                                 isa_levels[l], pool_names[pi], r);
            }
        }
    }
    for (int r = 0; r < n_io; r++) {
        free(init[r]);
        free(first[r]);
    }
}

/* A call of op through the cpu library's row. */
static Call cpu_call(const char *op, int64_t M)
{
    Call c = call_new(op, M);
    c.row = cpu_find_row(op);
    return c;
}

/* The largest NMSE seen, per op, for the summary. */
static struct { const char *op; double worst; } worst[24];

static void note_nmse(const char *op, double v)
{
    for (int i = 0; i < 24; i++) {
        if (!worst[i].op) worst[i].op = op;
        if (strcmp(worst[i].op, op) == 0) {
            if (v > worst[i].worst) worst[i].worst = v;
            return;
        }
    }
}

/* NMSE of got against want over n floats; fails on a NaN in one only. */
static double nmse(const char *what, const float *want, const float *got, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i]) != isnan(got[i]))
            fail_msg("%s: element %lld is %g, ref %g", what, (long long)i, got[i], want[i]);
        if (isnan(want[i])) continue;
        if (isinf(want[i]) || isinf(got[i])) {
            if (want[i] != got[i]) fail_msg("%s: element %lld is %g, ref %g", what, (long long)i, got[i], want[i]);
            continue;
        }
        double d = (double)want[i] - (double)got[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? num / den : num;
}

static void check_nmse(const char *op, const char *isa, const float *want, const float *got, int64_t n,
                       double bound)
{
    char what[128];
    snprintf(what, sizeof what, "%s at %s", op, isa);
    double e = nmse(what, want, got, n);
    note_nmse(op, e);
    if (!(e <= bound)) fail_msg("%s: NMSE %.3g over the bound %.1g", what, e, bound);
}

static float *falloc(int64_t n)
{
    float *p = calloc((size_t)n, sizeof(float));
    assert_non_null(p);
    return p;
}

/* Random values times `amp`. */
static void fill_amp(float *x, int64_t n, uint32_t seed, float amp)
{
    fill(x, n, seed);
    for (int64_t i = 0; i < n; i++) x[i] *= amp;
}

/* ---------------------------------------------------------- library */

/* The ops the cpu library leaves to ref for now (the core then selects
** ref's row: the default order is cpu,ref), NULL-terminated.  When one
** gains a cpu row it leaves this list, or this test fails.  None today. */
static const char *const left_to_ref[] = {NULL};

static int is_left_to_ref(const char *op)
{
    for (size_t i = 0; left_to_ref[i]; i++)
        if (strcmp(op, left_to_ref[i]) == 0) return 1;
    return 0;
}

/* A row for every op ref serves but the ones listed above, which have
** none; attention's cache block and scratch hook. */
static void test_rows(void **state)
{
    (void)state;
    for (int i = 0; i < cpu_lib->n_schemas; i++) {
        const char *op = cpu_lib->schemas[i].op;
        int has = 0;
        for (int r = 0; r < cpu_lib->n_rows; r++) has |= strcmp(cpu_lib->rows[r].op, op) == 0;
        if (has == is_left_to_ref(op)) fail_msg("op %s: cpu row %s, expected %s", op, has ? "present" : "missing",
                                                 has ? "none (update left_to_ref)" : "one");
    }
    const RadKernelRow *r = cpu_find_row("attn_paged");
    assert_int_equal(r->kv_block_size, 16);
    assert_non_null(r->scratch_bytes);
    Call c = cpu_call("attn_paged", 0);
    assert_int_equal(c.row->launch(&c.args), RAD_E_SHAPE);
}

/* -------------------------------------------------- add, mul, scale */

typedef struct BinCase {
    const float *want;
    const float *got;
    int64_t n;
    const char *op;
    int exact;
    double bound;
} BinCase;

static void check_bin(void *ctx, const char *isa)
{
    BinCase *b = ctx;
    if (b->exact) {
        if (memcmp(b->want, b->got, (size_t)b->n * sizeof(float)) != 0)
            fail_msg("%s at %s: not bit-identical to ref", b->op, isa);
        note_nmse(b->op, 0);
    } else {
        check_nmse(b->op, isa, b->want, b->got, b->n, b->bound);
    }
}

static const int64_t ew_shapes[][2] = {{1, 1}, {1, 7}, {1, 576}, {3, 1000}, {17, 2051}, {64, 4100}};

/* op over a (M x N) shape with rows `stride` floats apart; alias: out = a. */
static void binary_case(const char *op, int64_t M, int64_t N, int64_t stride, int alias, float amp,
                        uint32_t seed)
{
    int swiglu = strcmp(op, "swiglu_oai") == 0;      /* limit 1.5: gates and ups both cross it */
    int gated = strcmp(op, "silu_mul") == 0 || strcmp(op, "gelu_mul") == 0 || swiglu;
    int64_t n = M * stride;
    float *a = falloc(n), *b = falloc(n), *out = falloc(n), *ra = falloc(n), *rout = falloc(n);
    fill_amp(a, n, seed, amp);
    fill_amp(b, n, seed + 1, 2.0f);
    fill(out, n, seed + 2);
    if (gated && N >= 8) {      /* gates far out in both tails */
        a[0] = -100, a[1] = 100, a[2] = -1e4f, a[3] = 1e4f, a[4] = 0, a[5] = -0.0f, a[6] = 1e-30f, a[7] = -20;
    }
    memcpy(ra, a, (size_t)n * sizeof(float));
    memcpy(rout, out, (size_t)n * sizeof(float));
    const char *an = gated ? "gate" : "a", *bn = gated ? "up" : "b";

    Call r = call_new(op, M);
    set_i(&r, "N", N);
    if (swiglu) set_f(&r, "alpha", 1.702), set_f(&r, "limit", 1.5);
    set_act_strided(&r, an, ra, M, N, stride);
    set_act_strided(&r, bn, b, M, N, stride);
    set_act_strided(&r, "out", alias ? ra : rout, M, N, stride);
    assert_int_equal(run(&r), RAD_OK);

    Call c = cpu_call(op, M);
    set_i(&c, "N", N);
    if (swiglu) set_f(&c, "alpha", 1.702), set_f(&c, "limit", 1.5);
    set_act_strided(&c, an, a, M, N, stride);
    set_act_strided(&c, bn, b, M, N, stride);
    set_act_strided(&c, "out", alias ? a : out, M, N, stride);
    BinCase bc = {alias ? ra : rout, alias ? a : out, n, op, !gated, 1e-6};
    Region io[] = {{a, (size_t)n * 4}, {out, (size_t)n * 4}};
    cpu_sweep(&c, io, 2, check_bin, &bc);
    free(a), free(b), free(out), free(ra), free(rout);
}

static void test_add_mul(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof ew_shapes / sizeof ew_shapes[0]; s++) {
        int64_t M = ew_shapes[s][0], N = ew_shapes[s][1];
        binary_case("add", M, N, N, 0, 3.0f, 100 + (uint32_t)s);
        binary_case("mul", M, N, N, 0, 3.0f, 200 + (uint32_t)s);
    }
    binary_case("add", 5, 37, 45, 1, 1.0f, 300);
    binary_case("mul", 5, 37, 45, 1, 1.0f, 301);
}

static void test_gated(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof ew_shapes / sizeof ew_shapes[0]; s++) {
        int64_t M = ew_shapes[s][0], N = ew_shapes[s][1];
        binary_case("silu_mul", M, N, N, 0, 8.0f, 400 + (uint32_t)s);
        binary_case("gelu_mul", M, N, N, 0, 8.0f, 500 + (uint32_t)s);
    }
    binary_case("silu_mul", 4, 21, 29, 1, 5.0f, 600);
    binary_case("gelu_mul", 4, 21, 29, 1, 5.0f, 601);
    for (size_t s = 0; s < sizeof ew_shapes / sizeof ew_shapes[0]; s++)
        binary_case("swiglu_oai", ew_shapes[s][0], ew_shapes[s][1], ew_shapes[s][1], 0, 8.0f, 650 + (uint32_t)s);
    binary_case("swiglu_oai", 4, 21, 29, 1, 5.0f, 660);
}

static void test_scale_rows(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof ew_shapes / sizeof ew_shapes[0]; s++) {
        int64_t M = ew_shapes[s][0], N = ew_shapes[s][1], stride = N + (s & 1) * 3, n = M * stride;
        float *x = falloc(n), *rx = falloc(n);
        fill_amp(x, n, 700 + (uint32_t)s, 4.0f);
        memcpy(rx, x, (size_t)n * 4);
        Call r = call_new("scale_rows", M);
        set_i(&r, "N", N);
        set_f(&r, "scale", 25.298221281347036);     /* sqrt(640): Gemma's embedding scale */
        set_act_strided(&r, "x", rx, M, N, stride);
        assert_int_equal(run(&r), RAD_OK);
        Call c = cpu_call("scale_rows", M);
        c.args = r.args;
        set_act_strided(&c, "x", x, M, N, stride);
        BinCase bc = {rx, x, n, "scale_rows", 1, 0};
        Region io[] = {{x, (size_t)n * 4}};
        cpu_sweep(&c, io, 1, check_bin, &bc);
        free(x), free(rx);
    }
}

/* ------------------------------------------------------------- norms */

typedef struct NormCase {
    const char *op;
    const float *rx, *x, *rout, *out;
    int64_t n;
} NormCase;

static void check_norm(void *ctx, const char *isa)
{
    NormCase *k = ctx;
    if (k->rx && memcmp(k->rx, k->x, (size_t)k->n * 4) != 0)
        fail_msg("%s at %s: the residual is not bit-identical to ref", k->op, isa);
    check_nmse(k->op, isa, k->rout, k->out, k->n, 1e-6);
}

/* A norm weight of n elements in enc (f32, f16 or q8_0), values near 1 or
** near 0 (with_offset: Gemma's stored w - 1). */
static void *norm_weight(int enc, int64_t n, uint32_t seed, int64_t *row_bytes)
{
    float *w = falloc(n);
    fill_amp(w, n, seed, 0.5f);
    *row_bytes = rad_encoding_row_bytes(enc, n);
    if (enc == RAD_ENC_F32) return w;
    unsigned char *out = calloc(1, (size_t)*row_bytes);
    assert_non_null(out);
    if (enc == RAD_ENC_F16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = rad_f32_to_f16(w[i]);
            memcpy(out + 2 * i, &h, 2);
        }
    } else {        /* q8_0: d = 1/64, codes from the values */
        for (int64_t b = 0; b < n / 32; b++) {
            uint16_t d = rad_f32_to_f16(1.0f / 64);
            memcpy(out + 34 * b, &d, 2);
            for (int i = 0; i < 32; i++) out[34 * b + 2 + i] = (unsigned char)(int8_t)(w[32 * b + i] * 64);
        }
    }
    free(w);
    return out;
}

static void norm_case(const char *op, int64_t M, int64_t N, int enc, double w_offset, int alias, uint32_t seed)
{
    int add = strcmp(op, "rmsnorm_add") == 0;
    int64_t n = M * N, wrb;
    void *w = norm_weight(enc, N, seed, &wrb);
    float *x = falloc(n), *d = falloc(n), *out = falloc(n), *rx = falloc(n), *rd = falloc(n), *rout = falloc(n);
    fill_amp(x, n, seed + 1, 3.0f);
    fill_amp(d, n, seed + 2, 1.0f);
    fill(out, n, seed + 3);
    memcpy(rx, x, (size_t)n * 4), memcpy(rd, d, (size_t)n * 4), memcpy(rout, out, (size_t)n * 4);

    Call r = call_new(op, M);
    set_i(&r, "N", N);
    set_f(&r, "eps", 1e-6);
    set_f(&r, "w_offset", w_offset);
    set_weight(&r, "w", w, enc, 0, N, wrb);
    Call c = cpu_call(op, M);
    c.args = r.args;
    /* alias: rmsnorm writes over x, rmsnorm_add over d */
    float *rdst = alias ? (add ? rd : rx) : rout, *dst = alias ? (add ? d : x) : out;
    set_act(&r, "x", rx, M, N);
    set_act(&r, "out", rdst, M, N);
    set_act(&c, "x", x, M, N);
    set_act(&c, "out", dst, M, N);
    if (add) {
        set_act(&r, "d", rd, M, N);
        set_act(&c, "d", d, M, N);
    }
    assert_int_equal(run(&r), RAD_OK);
    NormCase k = {op, add ? rx : NULL, x, rdst, dst, n};
    Region io[] = {{x, (size_t)n * 4}, {d, (size_t)n * 4}, {out, (size_t)n * 4}};
    cpu_sweep(&c, io, 3, check_norm, &k);
    free(w), free(x), free(d), free(out), free(rx), free(rd), free(rout);
}

static void test_norms(void **state)
{
    (void)state;
    static const int64_t shapes[][2] = {{1, 1}, {1, 7}, {1, 576}, {5, 640}, {33, 2051}, {70, 2048}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1];
        uint32_t seed = 1000 + 10 * (uint32_t)s;
        norm_case("rmsnorm", M, N, RAD_ENC_F32, 0.0, 0, seed);
        norm_case("rmsnorm", M, N, RAD_ENC_F32, 1.0, 1, seed + 1);
        norm_case("rmsnorm_add", M, N, RAD_ENC_F32, 0.0, 0, seed + 2);
        norm_case("rmsnorm_add", M, N, RAD_ENC_F32, 1.0, 1, seed + 3);
        norm_case("rmsnorm", M, N, RAD_ENC_F16, 0.0, 0, seed + 4);
        if (N % 32 == 0) norm_case("rmsnorm_add", M, N, RAD_ENC_Q8_0, 1.0, 0, seed + 5);
    }
}

static void test_qk_norm(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 64}, {1, 4, 256}, {9, 8, 128}, {3, 3, 80}, {40, 4, 256}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], H = shapes[s][1], hd = shapes[s][2], n = M * H * hd, wrb;
        for (int off = 0; off <= 1; off++) {
            void *w = norm_weight(RAD_ENC_F32, hd, 1100 + (uint32_t)s, &wrb);
            float *x = falloc(n), *rx = falloc(n);
            fill_amp(x, n, 1200 + (uint32_t)s, 2.0f);
            memcpy(rx, x, (size_t)n * 4);
            Call r = call_new("qk_norm", M);
            set_i(&r, "n_head", H);
            set_i(&r, "head_dim", hd);
            set_f(&r, "eps", 1e-6);
            set_f(&r, "w_offset", off);
            set_weight(&r, "w", w, RAD_ENC_F32, 0, hd, wrb);
            set_act(&r, "x", rx, M, H * hd);
            assert_int_equal(run(&r), RAD_OK);
            Call c = cpu_call("qk_norm", M);
            c.args = r.args;
            set_act(&c, "x", x, M, H * hd);
            NormCase k = {"qk_norm", NULL, x, rx, x, n};
            Region io[] = {{x, (size_t)n * 4}};
            cpu_sweep(&c, io, 1, check_norm, &k);
            free(w), free(x), free(rx);
        }
    }
}

/* -------------------------------------------------------------- rope */

typedef struct RopeCase {
    const float *want, *got;
    int64_t n;
    int64_t *differ;
} RopeCase;

static void check_rope(void *ctx, const char *isa)
{
    RopeCase *k = ctx;
    check_nmse("rope", isa, k->want, k->got, k->n, 1e-6);
    for (int64_t i = 0; i < k->n; i++) *k->differ += memcmp(&k->want[i], &k->got[i], 4) != 0;
}

static void test_rope(void **state)
{
    (void)state;
    static const int64_t dims[][2] = {{64, 64}, {128, 128}, {256, 256}, {80, 80}, {128, 64}, {96, 32}};
    static const int32_t fixed_pos[] = {0, 1, 2, 15, 16, 8191, 100000, 131071, 524287, 1000000, 3000000};
    int64_t differ = 0, total = 0;
    uint32_t seed = 2000;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int mode = 0; mode <= 1; mode++)
            for (int scaling = 0; scaling <= 4; scaling++) {
                int64_t hd = dims[d][0], n_rot = dims[d][1], H = 4;
                int64_t M = (d + (size_t)mode + (size_t)scaling) % 3 == 0 ? 1 : 11 + (int64_t)d * 7;
                int64_t n = M * H * hd;
                float *x = falloc(n), *rx = falloc(n);
                int32_t *pos = calloc((size_t)M, sizeof *pos);
                uint32_t ps = seed;
                for (int64_t m = 0; m < M; m++)
                    pos[m] = m < (int64_t)(sizeof fixed_pos / sizeof fixed_pos[0]) && M > 1
                                 ? fixed_pos[m]
                                 : (int32_t)((rnd(&ps) + 1.0f) * 50000.0f);
                fill_amp(x, n, seed++, 2.0f);
                memcpy(rx, x, (size_t)n * 4);
                Call r = call_new("rope", M);
                set_i(&r, "n_head", H);
                set_i(&r, "head_dim", hd);
                set_i(&r, "n_rot", n_rot);
                set_i(&r, "mode", mode);
                set_f(&r, "theta", scaling == 2 ? 500000.0 : d & 1 ? 1000000.0 : 10000.0);
                set_i(&r, "scaling", scaling);
                set_f(&r, "factor", scaling == 2 ? 8.0 : scaling == 4 && d & 1 ? 32.0 : 4.0);
                set_f(&r, "low_freq_factor", 1.0);
                set_f(&r, "high_freq_factor", 4.0);
                set_i(&r, "orig_ctx", 8192);
                set_f(&r, "beta_fast", d % 3 == 1 ? 24.0 : 0.0);   /* YaRN: given or default */
                set_f(&r, "beta_slow", d % 3 == 1 ? 2.0 : 0.0);
                set_f(&r, "attn_factor", d % 3 == 2 ? 1.3 : 0.0);
                set_i(&r, "truncate", d & 1);
                set_index(&r, "positions", pos, M);
                set_act(&r, "x", rx, M, H * hd);
                float factors[256];     /* scaling 3: per-pair divisors from 1 to 8 */
                for (int64_t i = 0; i < n_rot / 2; i++) factors[i] = 1.0f + 7.0f * (float)i / (float)(n_rot / 2);
                if (scaling == 3) set_weight(&r, "freq_factors", factors, RAD_ENC_F32, 0, n_rot / 2, 0);
                assert_int_equal(run(&r), RAD_OK);
                Call c = cpu_call("rope", M);
                c.args = r.args;
                set_act(&c, "x", x, M, H * hd);
                RopeCase k = {rx, x, n, &differ};
                Region io[] = {{x, (size_t)n * 4}};
                cpu_sweep(&c, io, 1, check_rope, &k);
                total += n;
                free(x), free(rx), free(pos);
            }
    printf("[ INFO     ] rope: %lld of %lld outputs (over all ISA levels) differ from ref's bits\n",
           (long long)differ, (long long)total * (level_ok[0] + level_ok[1] + level_ok[2] + level_ok[3]));
}

/* ------------------------------------------------------------ copies */

typedef struct ExactCase {
    const char *op;
    const void *want, *got;
    size_t n;
} ExactCase;

static void check_exact(void *ctx, const char *isa)
{
    ExactCase *k = ctx;
    if (memcmp(k->want, k->got, k->n) != 0) fail_msg("%s at %s: not bit-identical to ref", k->op, isa);
    note_nmse(k->op, 0);
}

/* Random bytes for a table, except f32 tables get finite values. */
static void fill_bytes(unsigned char *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (unsigned char)(seed >> 24);
    }
}

static void test_embed_lookup(void **state)
{
    (void)state;
    static const int encs[] = {RAD_ENC_F32, RAD_ENC_F16, RAD_ENC_BF16, RAD_ENC_Q8_0,
                               RAD_ENC_Q4_0, RAD_ENC_Q4_1, RAD_ENC_Q4_K, RAD_ENC_Q6_K};
    static const int64_t Ms[] = {1, 9, 100};
    const int64_t vocab = 50, N = 512;
    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++)
        for (size_t s = 0; s < sizeof Ms / sizeof Ms[0]; s++) {
            int64_t M = Ms[s], rb = rad_encoding_row_bytes(encs[e], N);
            unsigned char *table = malloc((size_t)(vocab * rb));
            assert_non_null(table);
            if (encs[e] == RAD_ENC_F32) fill_amp((float *)(void *)table, vocab * N, 3000, 10.0f);
            else fill_bytes(table, (size_t)(vocab * rb), 3001 + (uint32_t)e);
            int32_t *ids = calloc((size_t)M, sizeof *ids);
            for (int64_t m = 0; m < M; m++) ids[m] = (int32_t)((m * 37 + 11) % vocab);
            float *out = falloc(M * N), *rout = falloc(M * N);
            Call r = call_new("embed_lookup", M);
            set_i(&r, "N", N);
            set_index(&r, "ids", ids, M);
            set_weight(&r, "table", table, encs[e], vocab, N, rb);
            set_act(&r, "out", rout, M, N);
            assert_int_equal(run(&r), RAD_OK);
            Call c = cpu_call("embed_lookup", M);
            c.args = r.args;
            set_act(&c, "out", out, M, N);
            ExactCase k = {"embed_lookup", rout, out, (size_t)(M * N) * 4};
            Region io[] = {{out, (size_t)(M * N) * 4}};
            cpu_sweep(&c, io, 1, check_exact, &k);
            /* an id past the table: RAD_E_RANGE, nothing written */
            ids[M - 1] = (int32_t)vocab;
            memset(out, 0x5a, (size_t)(M * N) * 4);
            memcpy(rout, out, (size_t)(M * N) * 4);
            assert_int_equal(c.row->launch(&c.args), RAD_E_RANGE);
            assert_memory_equal(out, rout, (size_t)(M * N) * 4);
            free(table), free(ids), free(out), free(rout);
        }
}

static void test_gather_rows(void **state)
{
    (void)state;
    const int64_t rows = 20, N = 577, M = 6;
    float *x = falloc(rows * N), *out = falloc(M * N), *rout = falloc(M * N);
    int32_t idx[6] = {19, 0, 7, 7, 3, 18};
    fill(x, rows * N, 3100);
    Call r = call_new("gather_rows", M);
    set_i(&r, "N", N);
    set_act(&r, "x", x, rows, N);
    set_index(&r, "idx", idx, M);
    set_act(&r, "out", rout, M, N);
    assert_int_equal(run(&r), RAD_OK);
    Call c = cpu_call("gather_rows", M);
    c.args = r.args;
    set_act(&c, "out", out, M, N);
    ExactCase k = {"gather_rows", rout, out, (size_t)(M * N) * 4};
    Region io[] = {{out, (size_t)(M * N) * 4}};
    cpu_sweep(&c, io, 1, check_exact, &k);
    idx[2] = 20;
    assert_int_equal(c.row->launch(&c.args), RAD_E_RANGE);
    idx[2] = -1;
    assert_int_equal(c.row->launch(&c.args), RAD_E_RANGE);
    free(x), free(out), free(rout);
}

/* ------------------------------------------- mixture of experts, routing */

typedef struct RouteCase {
    const int32_t *want_ids, *got_ids;
    const float *want_w, *got_w;
    int64_t n;
} RouteCase;

static void check_route(void *ctx, const char *isa)
{
    RouteCase *r = ctx;
    if (memcmp(r->want_ids, r->got_ids, (size_t)r->n * sizeof(int32_t)) != 0)
        fail_msg("router_topk at %s: the chosen experts differ from ref's", isa);
    check_nmse("router_topk", isa, r->want_w, r->got_w, r->n, 1e-6);
}

/* One router over M rows of E logits: every mode, the renormalisation, a
** scale, the sigmoid mode with a correction bias and groups (DeepSeek-V3's
** 8 groups of 32, 4 kept), ties (logits rounded to a coarse grid, so ties
** are common and must go to the lower index). */
static void router_case(int64_t M, int64_t E, int64_t k, int mode, int renorm, double scale, int n_group,
                        int topk_group, int with_bias, int coarse, uint32_t seed)
{
    float *logits = falloc(M * E), *bias = falloc(E), *w = falloc(M * k), *rw = falloc(M * k);
    int32_t *ids = calloc((size_t)(M * k), 4), *rids = calloc((size_t)(M * k), 4);
    fill_amp(logits, M * E, seed, 4.0f);
    if (coarse)
        for (int64_t i = 0; i < M * E; i++) logits[i] = roundf(logits[i]);
    fill_amp(bias, E, seed + 1, 0.5f);
    Call r = call_new("router_topk", M);
    set_i(&r, "n_expert", E);
    set_i(&r, "k", k);
    set_i(&r, "mode", mode);
    set_i(&r, "renorm", renorm);
    set_f(&r, "scale", scale);
    set_i(&r, "n_group", n_group);
    set_i(&r, "topk_group", topk_group);
    set_act(&r, "logits", logits, M, E);
    if (with_bias) set_weight(&r, "bias", bias, RAD_ENC_F32, 0, E, 0);
    RadTensor *t = &r.args.operand[operand_at(&r, "ids")];
    *t = (RadTensor){.data = rids, .enc = RAD_ENC_I32, .rank = 2, .shape = {M, k}, .row_bytes = k * 4};
    set_act(&r, "weights", rw, M, k);
    assert_int_equal(run(&r), RAD_OK);
    Call c = cpu_call("router_topk", M);
    c.args = r.args;
    c.args.operand[operand_at(&c, "ids")].data = ids;
    set_act(&c, "weights", w, M, k);
    RouteCase rc = {rids, ids, rw, w, M * k};
    Region io[] = {{ids, (size_t)(M * k) * 4}, {w, (size_t)(M * k) * 4}};
    cpu_sweep(&c, io, 2, check_route, &rc);
    free(logits), free(bias), free(w), free(rw), free(ids), free(rids);
}

static void test_router_topk(void **state)
{
    (void)state;
    router_case(1, 8, 2, RAD_ROUTER_SOFTMAX_TOPK, 1, 1.0, 0, 0, 0, 0, 8000);        /* Mixtral decode */
    router_case(37, 64, 8, RAD_ROUTER_SOFTMAX_TOPK, 0, 1.0, 0, 0, 0, 0, 8001);      /* OLMoE */
    router_case(512, 128, 8, RAD_ROUTER_SOFTMAX_TOPK, 1, 1.0, 0, 0, 0, 1, 8002);    /* Qwen3-MoE, ties */
    router_case(9, 32, 4, RAD_ROUTER_TOPK_SOFTMAX, 0, 1.0, 0, 0, 0, 1, 8003);       /* gpt-oss */
    router_case(33, 256, 8, RAD_ROUTER_SIGMOID, 1, 2.5, 8, 4, 1, 0, 8004);         /* DeepSeek-V3 */
    router_case(5, 160, 8, RAD_ROUTER_SIGMOID, 1, 1.0, 1, 1, 1, 1, 8005);          /* GLM-4.5, one group */
    /* refused before anything is written, as ref refuses */
    Call c = cpu_call("router_topk", 1);
    float logits[4] = {1, NAN, 0, 2}, w[2] = {7, 7};
    int32_t ids[2] = {-5, -5};
    set_i(&c, "n_expert", 4);
    set_i(&c, "k", 2);
    set_f(&c, "scale", 1.0);
    set_act(&c, "logits", logits, 1, 4);
    RadTensor *t = &c.args.operand[operand_at(&c, "ids")];
    *t = (RadTensor){.data = ids, .enc = RAD_ENC_I32, .rank = 2, .shape = {1, 2}, .row_bytes = 8};
    set_act(&c, "weights", w, 1, 2);
    assert_int_equal(c.row->launch(&c.args), RAD_E_ARG);        /* a NaN logit */
    assert_true(ids[0] == -5 && w[0] == 7);
    logits[1] = 0.5f;
    set_i(&c, "k", 5);
    assert_int_equal(c.row->launch(&c.args), RAD_E_SHAPE);      /* k above the expert count */
    set_i(&c, "k", 2);
    assert_int_equal(c.row->launch(&c.args), RAD_OK);
    assert_true(ids[0] == 3 && ids[1] == 0);
}

static void test_moe_combine(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 8, 2048}, {7, 2, 577}, {64, 8, 300}};     /* M, k, N */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], k = shapes[s][1], N = shapes[s][2], ys = N + 3;
        float *y = falloc(M * k * ys), *w = falloc(M * k), *out = falloc(M * N), *rout = falloc(M * N);
        fill_amp(y, M * k * ys, 8100 + (uint32_t)s, 3.0f);
        fill(w, M * k, 8110 + (uint32_t)s);
        Call r = call_new("moe_combine", M);
        set_i(&r, "k", k);
        set_i(&r, "N", N);
        set_act_strided(&r, "y", y, M * k, N, ys);
        set_act(&r, "weights", w, M, k);
        set_act(&r, "out", rout, M, N);
        assert_int_equal(run(&r), RAD_OK);
        Call c = cpu_call("moe_combine", M);
        c.args = r.args;
        set_act(&c, "out", out, M, N);
        /* the same sum in double, slot by slot, as ref: the same bits */
        ExactCase kc = {"moe_combine", rout, out, (size_t)(M * N) * 4};
        Region io[] = {{out, (size_t)(M * N) * 4}};
        cpu_sweep(&c, io, 1, check_exact, &kc);
        free(y), free(w), free(out), free(rout);
    }
}

static void test_clamp(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof ew_shapes / sizeof ew_shapes[0]; s++) {
        int64_t M = ew_shapes[s][0], N = ew_shapes[s][1], stride = N + (s & 1) * 3, n = M * stride;
        float *x = falloc(n), *rx = falloc(n);
        fill_amp(x, n, 8200 + (uint32_t)s, 10.0f);
        if (N >= 4) x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = -0.0f;
        memcpy(rx, x, (size_t)n * 4);
        Call r = call_new("clamp", M);
        set_i(&r, "N", N);
        set_f(&r, "lo", -8.0);
        set_f(&r, "hi", 7.5);
        set_act_strided(&r, "x", rx, M, N, stride);
        assert_int_equal(run(&r), RAD_OK);
        Call c = cpu_call("clamp", M);
        c.args = r.args;
        set_act_strided(&c, "x", x, M, N, stride);
        ExactCase kc = {"clamp", rx, x, (size_t)n * 4};
        Region io[] = {{x, (size_t)n * 4}};
        cpu_sweep(&c, io, 1, check_exact, &kc);
        if (N >= 4) assert_true(isnan(x[0]) && x[1] == 7.5f && x[2] == -8.0f);
        free(x), free(rx);
    }
    Call c = cpu_call("clamp", 1);
    float x[4] = {0};
    set_i(&c, "N", 4);
    set_f(&c, "lo", 1.0);
    set_f(&c, "hi", -1.0);
    set_act(&c, "x", x, 1, 4);
    assert_int_equal(c.row->launch(&c.args), RAD_E_ARG);       /* lo above hi */
}

/* sigmoid_gate: rows of x scaled by the sigmoid of their one gate, within
** 1e-6 NMSE of ref (expf against double) over strided rows, in place and
** not, with gates in both tails (-inf and +inf give 0 and x) and a NaN
** gate giving a NaN row. */
static void sigmoid_gate_case(int64_t M, int64_t N, int64_t stride, int alias, uint32_t seed)
{
    int64_t n = M * stride;
    float *x = falloc(n), *rx = falloc(n), *out = falloc(n), *rout = falloc(n), *g = falloc(M * 2);
    fill_amp(x, n, seed, 4.0f);
    fill_amp(g, M * 2, seed + 1, 6.0f);
    static const float tails[] = {-INFINITY, INFINITY, -100.0f, 100.0f, 0.0f, -0.0f, NAN};
    for (int64_t m = 0; m < M && m < (int64_t)(sizeof tails / sizeof *tails); m++) g[m * 2] = tails[m];
    memcpy(rx, x, (size_t)n * 4);
    Call r = call_new("sigmoid_gate", M);
    set_i(&r, "N", N);
    set_act_strided(&r, "x", rx, M, N, stride);
    set_act_strided(&r, "g", g, M, 1, 2);
    set_act_strided(&r, "out", alias ? rx : rout, M, N, stride);
    assert_int_equal(run(&r), RAD_OK);
    Call c = cpu_call("sigmoid_gate", M);
    c.args = r.args;
    set_act_strided(&c, "x", x, M, N, stride);
    set_act_strided(&c, "g", g, M, 1, 2);
    set_act_strided(&c, "out", alias ? x : out, M, N, stride);
    BinCase bc = {alias ? rx : rout, alias ? x : out, n, "sigmoid_gate", 0, 1e-6};
    Region io[] = {{x, (size_t)n * 4}, {out, (size_t)n * 4}};
    cpu_sweep(&c, io, 2, check_bin, &bc);
    const float *got = alias ? x : out;
    if (M >= 7) {
        for (int64_t i = 0; i < N; i++) {
            assert_true(got[i] == 0.0f);                                    /* gate -inf */
            assert_true(got[stride + i] == x[stride + i] || alias);          /* gate +inf: x itself */
            assert_true(isnan(got[6 * stride + i]));                         /* NaN gate */
        }
    }
    free(x), free(rx), free(out), free(rout), free(g);
}

static void test_sigmoid_gate(void **state)
{
    (void)state;
    for (size_t s = 0; s < sizeof ew_shapes / sizeof ew_shapes[0]; s++)
        sigmoid_gate_case(ew_shapes[s][0], ew_shapes[s][1], ew_shapes[s][1] + (int64_t)(s & 1) * 3, 0,
                          8300 + (uint32_t)s);
    sigmoid_gate_case(9, 37, 45, 1, 8310);
    sigmoid_gate_case(7, 300, 300, 0, 8311);
    Call c = cpu_call("sigmoid_gate", 2);
    float x[8] = {0}, g[2] = {0};
    set_i(&c, "N", 4);
    set_act(&c, "x", x, 2, 4);
    set_act_strided(&c, "g", g, 1, 1, 1);                /* one gate row for two rows */
    set_act(&c, "out", x, 2, 4);
    assert_int_equal(c.row->launch(&c.args), RAD_E_SHAPE);
}

/* ------------------------------------------------------- the KV cache */

/* A paged cache: n_seq sequences of ctx[s] positions each, blocks handed out
** in a shuffled order, rows padded past their width (kv_row_bytes), every
** slot filled with random values (rounded to f16 for an f16 cache). */
typedef struct Cache {
    RadKvView view;
    unsigned char *k, *v;
    int32_t *table;
    int32_t seq[1024], pos[1024];
    int64_t n_slots;
} Cache;

static void cache_new(Cache *c, int enc, int bs, int n_kv, int hd, int n_seq, const int *ctx, uint32_t seed)
{
    memset(c, 0, sizeof *c);
    int max_blocks = 1, n_blocks = 0;
    for (int s = 0; s < n_seq; s++) {
        int b = (ctx[s] + bs - 1) / bs;
        if (b > max_blocks) max_blocks = b;
        n_blocks += b;
    }
    int64_t esize = enc == RAD_ENC_F16 ? 2 : 4, row_bytes = n_kv * hd * esize + 16;
    c->n_slots = (int64_t)n_blocks * bs;
    c->k = malloc((size_t)(c->n_slots * row_bytes));
    c->v = malloc((size_t)(c->n_slots * row_bytes));
    c->table = malloc((size_t)(n_seq * max_blocks) * sizeof(int32_t));
    assert_true(c->k && c->v && c->table);
    /* pool block ids in a scrambled order: id i -> (i * 7919) mod n_blocks is a permutation when gcd = 1 */
    int next = 0, stride = 7919 % n_blocks ? 7919 : 7907;
    for (int s = 0; s < n_seq; s++)
        for (int b = 0; b < max_blocks; b++)
            c->table[s * max_blocks + b] = b * bs < ctx[s] ? (int32_t)(((int64_t)next++ * stride) % n_blocks) : -1;
    float *row = falloc(n_kv * hd);
    for (int64_t slot = 0; slot < c->n_slots; slot++)
        for (int plane = 0; plane < 2; plane++) {
            fill(row, n_kv * hd, seed + (uint32_t)(slot * 2 + plane));
            unsigned char *dst = (plane ? c->v : c->k) + slot * row_bytes;
            memset(dst, 0xff, (size_t)row_bytes);       /* padding: NaN bytes */
            for (int64_t i = 0; i < n_kv * hd; i++) {
                if (enc == RAD_ENC_F16) {
                    uint16_t h = rad_f32_to_f16(row[i]);
                    memcpy(dst + 2 * i, &h, 2);
                } else {
                    memcpy(dst + 4 * i, &row[i], 4);
                }
            }
        }
    free(row);
    c->view = (RadKvView){
        .k = c->k, .v = c->v, .enc = enc, .block_size = bs, .n_head_kv = n_kv, .head_dim = hd,
        .kv_row_bytes = row_bytes, .n_seq = n_seq, .max_blocks = max_blocks, .block_table = c->table,
        .token_seq = c->seq, .positions = c->pos,
    };
}

static void cache_free(Cache *c)
{
    free(c->k), free(c->v), free(c->table);
}

static void test_kv_store(void **state)
{
    (void)state;
    for (int enc = 0; enc <= 1; enc++) {
        int e = enc ? RAD_ENC_F16 : RAD_ENC_F32, ctx[2] = {70, 40};
        Cache c, rc_;
        cache_new(&c, e, 16, 2, 128, 2, ctx, 3200);
        cache_new(&rc_, e, 16, 2, 128, 2, ctx, 3200);
        const int64_t M = 45, W = 2 * 128;
        for (int m = 0; m < M; m++) {
            c.seq[m] = rc_.seq[m] = m % 3 == 2;
            c.pos[m] = rc_.pos[m] = m % 3 == 2 ? m / 3 : 20 + m;
        }
        c.view.n_tok = rc_.view.n_tok = (int)M;
        float *k = falloc(M * W), *v = falloc(M * W);
        fill_amp(k, M * W, 3300, 4.0f);
        fill_amp(v, M * W, 3301, 4.0f);
        /* the f16 edges: ties, overflow, subnormals, NaN, infinities */
        float special[] = {1.0f + 0x1p-11f, 65504.0f, 65519.0f, 65520.0f, 1e6f, 0x1p-24f, 0x1p-25f,
                           0x3p-26f, 1e-8f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 6.1e-5f, -3e-7f};
        memcpy(k + 5, special, sizeof special);
        memcpy(v + W + 3, special, sizeof special);
        uint32_t payload_nan[2] = {0x7fa00000u, 0xffb00001u};    /* F16C would keep these payloads */
        memcpy(k + 2 * W + 9, payload_nan, sizeof payload_nan);
        memcpy(v + 3 * W + 17, payload_nan, sizeof payload_nan);
        size_t bytes = (size_t)(c.n_slots * c.view.kv_row_bytes);
        Call r = call_new("kv_store", M);
        set_i(&r, "n_head_kv", 2);
        set_i(&r, "head_dim", 128);
        set_act(&r, "k", k, M, W);
        set_act(&r, "v", v, M, W);
        r.args.kv = &rc_.view;
        assert_int_equal(run(&r), RAD_OK);
        Call cc = cpu_call("kv_store", M);
        cc.args = r.args;
        cc.args.kv = &c.view;
        ExactCase kk = {"kv_store", rc_.k, c.k, bytes}, vv = {"kv_store", rc_.v, c.v, bytes};
        Region io[] = {{c.k, bytes}, {c.v, bytes}};
        cpu_sweep(&cc, io, 2, check_exact, &kk);
        check_exact(&vv, "the last level");
        /* a row whose block is missing: RAD_E_RANGE and nothing written */
        c.pos[7] = 16 * c.view.max_blocks;
        memcpy(rc_.k, c.k, bytes);
        assert_int_equal(cc.row->launch(&cc.args), RAD_E_RANGE);
        assert_memory_equal(rc_.k, c.k, bytes);
        free(k), free(v);
        cache_free(&c), cache_free(&rc_);
    }
}

/* --------------------------------------------------------- attention */

typedef struct AttnSpec {
    int n_head, n_kv, hd, window;
    double softcap;
    int sinks, enc, bs;
} AttnSpec;

typedef struct AttnCheck {
    const float *want, *got;
    int64_t n;
} AttnCheck;

static void check_attn(void *ctx, const char *isa)
{
    AttnCheck *k = ctx;
    check_nmse("attn_paged", isa, k->want, k->got, k->n, 5e-4);
}

/* Attention for rows (seq[m], pos[m]) over a cache of n_seq sequences with
** ctx[s] positions; `holes` drops (to -1) every block no row can see. */
static void attn_case(const AttnSpec *sp, int n_seq, const int *ctx, int M, const int32_t *seq,
                      const int32_t *pos, int holes, uint32_t seed)
{
    Cache c;
    cache_new(&c, sp->enc, sp->bs, sp->n_kv, sp->hd, n_seq, ctx, seed);
    for (int m = 0; m < M; m++) c.seq[m] = seq[m], c.pos[m] = pos[m];
    c.view.n_tok = M;
    if (holes)
        for (int s = 0; s < n_seq; s++)
            for (int b = 0; b < c.view.max_blocks; b++) {
                int seen = 0;
                for (int m = 0; m < M; m++) {
                    int first = sp->window && pos[m] - sp->window + 1 > 0 ? pos[m] - sp->window + 1 : 0;
                    seen |= seq[m] == s && b * sp->bs <= pos[m] && (b + 1) * sp->bs > first;
                }
                if (!seen) c.table[s * c.view.max_blocks + b] = -1;
            }
    int64_t W = (int64_t)sp->n_head * sp->hd;
    float *q = falloc(M * W), *out = falloc(M * W), *rout = falloc(M * W), *sinks = falloc(sp->n_head);
    fill_amp(q, M * W, seed + 1, 2.0f);
    fill_amp(sinks, sp->n_head, seed + 2, 3.0f);
    fill(out, M * W, seed + 3);

    Call r = call_new("attn_paged", M);
    set_i(&r, "n_head", sp->n_head);
    set_i(&r, "n_head_kv", sp->n_kv);
    set_i(&r, "head_dim", sp->hd);
    set_f(&r, "scale", 1.0 / sqrt(sp->hd));
    set_i(&r, "window", sp->window);
    set_f(&r, "softcap", sp->softcap);
    if (sp->sinks) set_weight(&r, "sinks", sinks, RAD_ENC_F32, 0, sp->n_head, 0);
    set_act(&r, "q", q, M, W);
    set_act(&r, "out", rout, M, W);
    r.args.kv = &c.view;
    assert_int_equal(run(&r), RAD_OK);

    Call cc = cpu_call("attn_paged", M);
    cc.args = r.args;
    set_act(&cc, "out", out, M, W);
    AttnCheck k = {rout, out, M * W};
    Region io[] = {{out, (size_t)(M * W) * 4}};
    cpu_sweep(&cc, io, 1, check_attn, &k);

    /* out aliasing q gives the same bits as separate buffers */
    float *alias = falloc(M * W);
    memcpy(alias, q, (size_t)(M * W) * 4);
    set_act(&cc, "q", alias, M, W);
    set_act(&cc, "out", alias, M, W);
    void *scratch = malloc(cc.row->scratch_bytes(&cc.args) + 1);
    cc.args.scratch = scratch;
    assert_int_equal(cc.row->launch(&cc.args), RAD_OK);
    assert_memory_equal(alias, out, (size_t)(M * W) * 4);
    free(scratch), free(alias);
    free(q), free(out), free(rout), free(sinks);
    cache_free(&c);
}

/* Prefill: rows [first, first + M) of sequence 0 with ctx = first + M. */
static void prefill(const AttnSpec *sp, int first, int M, uint32_t seed)
{
    int32_t seq[1024], pos[1024];
    int ctx[1] = {first + M};
    for (int m = 0; m < M; m++) seq[m] = 0, pos[m] = first + m;
    attn_case(sp, 1, ctx, M, seq, pos, 0, seed);
}

/* Decode: one row at the last position of a context of ctx. */
static void decode(const AttnSpec *sp, int ctx, uint32_t seed)
{
    int32_t seq[1] = {0}, pos[1] = {ctx - 1};
    attn_case(sp, 1, &ctx, 1, seq, pos, 0, seed);
}

static void test_attn_decode(void **state)
{
    (void)state;
    static const AttnSpec specs[] = {
        {8, 8, 64, 0, 0, 0, RAD_ENC_F16, 16},       /* GQA 1 */
        {8, 2, 128, 0, 0, 0, RAD_ENC_F16, 16},      /* GQA 4 */
        {16, 2, 256, 0, 0, 0, RAD_ENC_F32, 16},     /* GQA 8 */
        {4, 1, 256, 512, 0, 0, RAD_ENC_F16, 16},    /* Gemma 3 270M, local layer */
        {4, 1, 256, 0, 0, 1, RAD_ENC_F32, 16},      /* sinks */
        {8, 4, 80, 0, 30.0, 0, RAD_ENC_F16, 32},    /* softcap, ragged head_dim, block 32 */
        {4, 2, 64, 7, 0, 1, RAD_ENC_F16, 4},        /* window under a block of 4 */
    };
    static const int ctxs[] = {1, 17, 300, 1000, 5000};
    uint32_t seed = 4000;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (size_t c = 0; c < sizeof ctxs / sizeof ctxs[0]; c++) decode(&specs[s], ctxs[c], seed += 10);
}

static void test_attn_prefill(void **state)
{
    (void)state;
    static const AttnSpec specs[] = {
        {8, 8, 64, 0, 0, 0, RAD_ENC_F16, 16},
        {8, 2, 128, 0, 0, 0, RAD_ENC_F32, 16},
        {16, 2, 256, 0, 0, 0, RAD_ENC_F16, 16},
        {4, 1, 256, 32, 0, 0, RAD_ENC_F16, 16},     /* window */
        {4, 1, 256, 0, 50.0, 1, RAD_ENC_F16, 16},   /* softcap and sinks */
        {6, 3, 72, 5, 0, 0, RAD_ENC_F32, 4},        /* ragged head_dim, window < block */
        {2, 1, 1024, 0, 0, 0, RAD_ENC_F16, 16},     /* ref's largest head */
    };
    uint32_t seed = 5000;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        prefill(&specs[s], 0, 40, seed += 10);          /* a first chunk */
        prefill(&specs[s], 57, 33, seed += 10);         /* a later chunk, past blocks */
        prefill(&specs[s], 300, 5, seed += 10);         /* speculative: few rows, long context */
    }
}

/* Several sequences in one step, in an interleaved order; decode of several
** sequences at once; rows of one sequence far apart with a window, the
** blocks between them dropped from the table. */
static void test_attn_batch(void **state)
{
    (void)state;
    AttnSpec gqa = {8, 2, 128, 0, 0, 0, RAD_ENC_F16, 16};
    int ctx3[3] = {60, 20, 700};
    int32_t seq[12] = {0, 1, 0, 2, 2, 1, 0, 0, 2, 1, 0, 2};
    int32_t pos[12] = {40, 10, 41, 600, 601, 11, 42, 43, 602, 12, 44, 603};
    attn_case(&gqa, 3, ctx3, 12, seq, pos, 0, 6000);
    int32_t dseq[3] = {2, 0, 1}, dpos[3] = {699, 59, 19};
    attn_case(&gqa, 3, ctx3, 3, dseq, dpos, 0, 6010);

    AttnSpec win = {4, 2, 64, 8, 0, 1, RAD_ENC_F16, 4};
    int ctx1[1] = {420};
    int32_t hseq[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    int32_t hpos[10] = {5, 6, 200, 201, 202, 400, 401, 402, 403, 419};
    attn_case(&win, 1, ctx1, 10, hseq, hpos, 1, 6020);     /* one tile, holes inside */
    attn_case(&win, 1, ctx1, 2, hseq + 1, hpos + 1, 1, 6030);   /* split mode, holes */
}

/* A visible position without a block: RAD_E_RANGE, the output untouched. */
static void test_attn_missing_block(void **state)
{
    (void)state;
    int ctx[1] = {50};
    Cache c;
    cache_new(&c, RAD_ENC_F16, 16, 1, 64, 1, ctx, 7000);
    c.seq[0] = 0, c.pos[0] = 49, c.view.n_tok = 1;
    c.table[1] = -1;
    float q[64], out[64], before[64];
    fill(q, 64, 7001);
    fill(out, 64, 7002);
    memcpy(before, out, sizeof out);
    Call cc = cpu_call("attn_paged", 1);
    set_i(&cc, "n_head", 1);
    set_i(&cc, "n_head_kv", 1);
    set_i(&cc, "head_dim", 64);
    set_f(&cc, "scale", 0.125);
    set_act(&cc, "q", q, 1, 64);
    set_act(&cc, "out", out, 1, 64);
    cc.args.kv = &c.view;
    assert_int_equal(cc.row->launch(&cc.args), RAD_E_RANGE);
    assert_memory_equal(before, out, sizeof out);
    set_i(&cc, "window", 18);       /* positions 32..49: the hole is out of sight */
    assert_int_equal(cc.row->launch(&cc.args), RAD_OK);
    cache_free(&c);
}

static int print_summary(void **state)
{
    (void)state;
    for (int i = 0; i < 24 && worst[i].op; i++)
        printf("[ NMSE     ] %-14s worst %.3g\n", worst[i].op, worst[i].worst);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_add_mul),
        cmocka_unit_test(test_scale_rows),
        cmocka_unit_test(test_gated),
        cmocka_unit_test(test_norms),
        cmocka_unit_test(test_qk_norm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_embed_lookup),
        cmocka_unit_test(test_gather_rows),
        cmocka_unit_test(test_router_topk),
        cmocka_unit_test(test_moe_combine),
        cmocka_unit_test(test_clamp),
        cmocka_unit_test(test_sigmoid_gate),
        cmocka_unit_test(test_kv_store),
        cmocka_unit_test(test_attn_decode),
        cmocka_unit_test(test_attn_prefill),
        cmocka_unit_test(test_attn_batch),
        cmocka_unit_test(test_attn_missing_block),
    };
    return cmocka_run_group_tests(tests, load_cpu, print_summary);
}
