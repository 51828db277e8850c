/*
** test_cpu_moe.c: the cpu library's expert products (moe_gemm) against ref
** and against its own dense product.
**
** build/plugins/kernels/cpu.so is opened as the core opens it and its
** moe_gemm rows (decode, M = 1; prefill, M >= 2) run next to ref's (linked
** in), at every ISA level the machine has, for every weight encoding ref's
** gemm_nt serves.  Stacks of 6 experts, k = 3 slots per row, ids drawn with
** repeats (several slots of a step on one expert, and now and then two
** slots of one row), M = 1, 2, 9, 33, shared and per-slot inputs, with and
** without a stacked bias, N ragged (21) and a multiple of 8 (24, the x8
** layout).  It pins:
**
**   - NMSE against ref at most 5e-4 (docs/OPS.md, the dense GEMM's bound);
**   - each slot's output row is bit for bit cpu gemm_nt of its input row
**     against its expert's slice (the contract that makes grouping slots by
**     expert invisible), and the same bits with no pool, pools of 2 and 3
**     threads and tasks in reverse order;
**   - where the row relayouts the stack (x8, slice by slice), the copy gives
**     the stored layout's bits, and so do experts handed over one by one
**     through RadTensor.slices, some in the copy's layout, some stored
**     (slice_layout), as streamed experts will arrive;
**   - bad calls: an id outside the stack is RAD_E_RANGE with the output
**     untouched; no scratch is RAD_E_ARG.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_common.h"
#include "ref_harness.h"

#include "../../base/rad_half.h"
#include "../../formats/quantize.h"
#include "../../kernels/ops/rad_dequant.h"

static const RadKernelLibrary *cpu_lib;
static int (*cpu_set_isa)(const char *name);
static int level_ok[OPS_N_LEVELS];

enum { E = 6, KU = 3, M_MAX = 33 };
static const int64_t Ms[] = {1, 2, 9, 33};
static TestPool pools[] = {{2, 0}, {3, 0}, {4, 1}};

/* -------------------------------------------------------------- data */

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    assert_non_null(p);
    return p;
}

/* [rows, cols] of `enc`: random rows of their own scale, quantized by the
** converter's quantizers (mxfp4: random codes under a power-of-two scale). */
static void *make_w(int enc, int64_t rows, int64_t cols, uint32_t seed, int64_t *row_bytes)
{
    *row_bytes = rad_encoding_row_bytes(enc, cols);
    unsigned char *w = xmalloc((size_t)(rows * *row_bytes));
    float *v = xmalloc((size_t)cols * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        unsigned char *row = w + r * *row_bytes;
        float scale = 0.05f + 0.5f * (1.0f + rnd(&seed));
        for (int64_t k = 0; k < cols; k++) v[k] = scale * rnd(&seed) * ((k % 61 == 7) ? 4.0f : 1.0f);
        if (enc == RAD_ENC_F32) {
            memcpy(row, v, (size_t)cols * 4);
        } else if (enc == RAD_ENC_F16 || enc == RAD_ENC_BF16) {
            for (int64_t k = 0; k < cols; k++) {
                uint16_t h = enc == RAD_ENC_F16 ? rad_f32_to_f16(v[k]) : rad_f32_to_bf16(v[k]);
                memcpy(row + 2 * k, &h, 2);
            }
        } else if (enc == RAD_ENC_MXFP4) {
            for (int64_t b = 0; b < cols / 32; b++) {
                unsigned char *blk = row + b * 17;
                blk[0] = (unsigned char)(122 + (int)((rnd(&seed) + 1.0f) * 3.0f));
                for (int j = 1; j < 17; j++) blk[j] = (unsigned char)((rnd(&seed) + 1.0f) * 127.9f);
            }
        } else {
            assert_int_equal(rad_quantize_row(enc, v, row, cols), 0);
        }
    }
    free(v);
    return w;
}

/* The encodings ref's gemm_nt row serves. */
static int gemm_encodings(int *out)
{
    int n = 0;
    for (int i = 0; i < rad_kernel_library.n_rows; i++) {
        const RadKernelRow *r = &rad_kernel_library.rows[i];
        if (strcmp(r->op, "gemm_nt") != 0) continue;
        for (int k = 0; k < r->n_constraints; k++)
            if (strcmp(r->constraints[k].param, "enc") == 0)
                for (int j = 0; j < r->constraints[k].n_values && n < 64; j++)
                    out[n++] = (int)r->constraints[k].values[j];
    }
    return n;
}

/* ---------------------------------------------------------- launching */

/* Launch on lib's row for the args (pool NULL: serially), scratch from the
** row's hook with M at the row's band edge; -1000 when lib has no row. */
static int launch(const RadKernelLibrary *lib, RadKernelArgs a, TestPool *pool)
{
    const RadKernelRow *row = ops_pick_row(lib, &a);
    if (!row) return -1000;
    a.pool = pool;
    a.parallel_for = pool ? pool_parallel_for : NULL;
    a.n_threads = pool ? pool->n_threads : 1;
    void *scratch = NULL;
    if (row->scratch_bytes) {
        RadKernelArgs s = a;
        memset(s.operand, 0, sizeof s.operand);
        size_t need = row->scratch_bytes(&s);
        if (need) {
            scratch = malloc(need);
            memset(scratch, 0xff, need);        /* NaN garbage: must be written before it is read */
        }
    }
    a.scratch = scratch;
    int rc = row->launch(&a);
    free(scratch);
    return rc;
}

/* One moe_gemm case: the stack, its inputs and ids for M_MAX rows. */
typedef struct Moe {
    int enc, per_slot, bias;
    int64_t N, K, wrb;
    unsigned char *w;
    float *b, *x, *out;
    int64_t xs, os;                 /* strides in floats (rows padded) */
    int32_t *ids;
} Moe;

static RadKernelArgs moe_args(const Moe *c, int64_t M, const void *w_data, int layout)
{
    Call call = call_new("moe_gemm", M);
    set_i(&call, "k", KU);
    set_i(&call, "N", c->N);
    set_i(&call, "K", c->K);
    set_i(&call, "enc", c->enc);
    set_i(&call, "x_per_slot", c->per_slot);
    RadTensor *w = &call.args.operand[operand_at(&call, "w")];
    *w = (RadTensor){.data = (void *)w_data, .enc = c->enc, .rank = 3, .shape = {E, c->N, c->K},
                     .row_bytes = c->wrb, .layout = layout, .n_slices = E, .slice_bytes = c->N * c->wrb};
    if (c->bias) {
        RadTensor *b = &call.args.operand[operand_at(&call, "bias")];
        *b = (RadTensor){.data = c->b, .enc = RAD_ENC_F32, .rank = 2, .shape = {E, c->N}, .row_bytes = c->N * 4,
                         .n_slices = E, .slice_bytes = c->N * 4};
    }
    set_act_strided(&call, "x", c->x, c->per_slot ? M * KU : M, c->K, c->xs);
    RadTensor *ids = &call.args.operand[operand_at(&call, "ids")];
    *ids = (RadTensor){.data = c->ids, .enc = RAD_ENC_I32, .rank = 2, .shape = {M, KU}, .row_bytes = KU * 4};
    set_act_strided(&call, "out", c->out, M * KU, c->N, c->os);
    return call.args;
}

static void moe_new(Moe *c, int enc, int64_t N, int per_slot, int bias, uint32_t seed)
{
    memset(c, 0, sizeof *c);
    c->enc = enc, c->N = N, c->per_slot = per_slot, c->bias = bias;
    c->K = rad_encoding_info(enc)->block_elems >= 256 ? 512 : 96;
    c->w = make_w(enc, E * N, c->K, seed, &c->wrb);
    c->b = xmalloc((size_t)(E * N) * sizeof(float));
    fill(c->b, E * N, seed + 1);
    c->xs = c->K + 3, c->os = N + 5;
    int64_t xrows = M_MAX * KU;
    c->x = xmalloc((size_t)(xrows * c->xs) * sizeof(float));
    fill(c->x, xrows * c->xs, seed + 2);
    c->out = xmalloc((size_t)(M_MAX * KU * c->os) * sizeof(float));
    c->ids = xmalloc((size_t)(M_MAX * KU) * sizeof(int32_t));
    uint32_t s = seed + 3;
    for (int64_t i = 0; i < M_MAX * KU; i++) {
        s = s * 1664525u + 1013904223u;
        c->ids[i] = (int32_t)((s >> 8) % E);
    }
}

static void moe_free(Moe *c)
{
    free(c->w), free(c->b), free(c->x), free(c->out), free(c->ids);
}

/* The output's M * KU rows of N, packed. */
static void take(const Moe *c, int64_t M, float *dst)
{
    for (int64_t r = 0; r < M * KU; r++) memcpy(dst + r * c->N, c->out + r * c->os, (size_t)c->N * sizeof(float));
}

static double nmse(const float *want, const float *got, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)want[i] - got[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? num / den : num;
}

/* cpu gemm_nt of slot r's input against its expert's slice: the dense
** product the slot must equal bit for bit. */
static void dense_slot(const Moe *c, int64_t r, float *dst)
{
    int32_t e = c->ids[r];
    const float *xr = c->x + (c->per_slot ? r : r / KU) * c->xs;
    Call g = call_new("gemm_nt", 1);
    set_i(&g, "N", c->N);
    set_i(&g, "K", c->K);
    set_i(&g, "enc", c->enc);
    set_weight(&g, "w", c->w + e * c->N * c->wrb, c->enc, c->N, c->K, c->wrb);
    if (c->bias) set_weight(&g, "bias", c->b + e * c->N, RAD_ENC_F32, 0, c->N, 0);
    set_act(&g, "x", (float *)xr, 1, c->K);
    set_act(&g, "out", dst, 1, c->N);
    assert_int_equal(launch(cpu_lib, g.args, NULL), RAD_OK);
}

/* ------------------------------------------------------------- tests */

static void check_moe_case(const Moe *c, const char *isa, float *want, float *got, float *again, float *dense)
{
    const char *name = rad_encoding_info(c->enc)->name;
    for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
        int64_t M = Ms[mi];
        RadKernelArgs a = moe_args(c, M, c->w, RAD_LAYOUT_STORED);
        assert_int_equal(launch(&rad_kernel_library, a, NULL), RAD_OK);
        take(c, M, want);
        int rc = launch(cpu_lib, a, NULL);
        if (rc) fail_msg("cpu %s: moe_gemm %s N=%lld M=%lld: rc %d", isa, name, (long long)c->N, (long long)M, rc);
        take(c, M, got);
        double e = nmse(want, got, M * KU * c->N);
        if (!(e <= 5e-4))
            fail_msg("cpu %s: moe_gemm %s N=%lld M=%lld%s: NMSE %.3g over 5e-4", isa, name, (long long)c->N,
                     (long long)M, c->per_slot ? " per slot" : "", e);
        for (int64_t r = 0; r < M * KU; r++) {
            dense_slot(c, r, dense);
            if (memcmp(dense, got + r * c->N, (size_t)c->N * sizeof(float)) != 0)
                fail_msg("cpu %s: moe_gemm %s N=%lld M=%lld: slot %lld is not the bits of gemm_nt on its expert", isa,
                         name, (long long)c->N, (long long)M, (long long)r);
        }
        for (size_t p = 0; p < sizeof pools / sizeof pools[0]; p++) {
            memset(c->out, 0, (size_t)(M_MAX * KU * c->os) * sizeof(float));
            assert_int_equal(launch(cpu_lib, a, &pools[p]), RAD_OK);
            take(c, M, again);
            if (memcmp(got, again, (size_t)(M * KU * c->N) * sizeof(float)) != 0)
                fail_msg("cpu %s: moe_gemm %s N=%lld M=%lld: %d threads%s change the bits", isa, name,
                         (long long)c->N, (long long)M, pools[p].n_threads, pools[p].reverse ? " (reverse)" : "");
        }
    }
}

/* The stack through the row's relayout (made from the stack whole and from
** its slices apart, the same bytes), and slice by slice through
** RadTensor.slices with mixed layouts: the stored layout's bits. */
static int check_relayout(const Moe *c, const char *isa, float *got, float *again)
{
    RadKernelArgs a = moe_args(c, M_MAX, c->w, RAD_LAYOUT_STORED);
    const RadKernelRow *row = ops_pick_row(cpu_lib, &a);
    assert_non_null(row);
    const RadTensor *w = &a.operand[operand_at(&(Call){.args = a}, "w")];
    size_t bytes = row->relayout_bytes ? row->relayout_bytes(w) : 0;
    if (!bytes) return 0;
    const char *name = rad_encoding_info(c->enc)->name;
    unsigned char *copy = aligned_alloc(64, (bytes + 63) / 64 * 64);
    assert_int_equal(row->relayout(w, copy), RAD_OK);
    {
        /* a .rad stores each expert in its own record: the copy made from
        ** slices apart is the copy made from the stack, byte for byte */
        const void *apart[E];
        void *held[E];
        size_t stored_one = (size_t)(c->N * c->wrb);
        for (int e = 0; e < E; e++) {
            held[e] = malloc(stored_one);
            memcpy(held[e], c->w + e * stored_one, stored_one);
            apart[e] = held[e];
        }
        RadTensor sliced = *w;
        sliced.data = NULL;
        sliced.slices = apart;
        assert_int_equal(row->relayout_bytes(&sliced), bytes);
        unsigned char *from_slices = aligned_alloc(64, (bytes + 63) / 64 * 64);
        assert_int_equal(row->relayout(&sliced, from_slices), RAD_OK);
        if (memcmp(copy, from_slices, bytes) != 0)
            fail_msg("cpu %s: moe_gemm %s: the copy made from slices apart differs from the stack's", isa,
                     rad_encoding_info(c->enc)->name);
        free(from_slices);
        for (int e = 0; e < E; e++) free(held[e]);
    }
    assert_int_equal(launch(cpu_lib, a, NULL), RAD_OK);
    take(c, M_MAX, got);
    for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
        int64_t M = Ms[mi];
        RadKernelArgs k = moe_args(c, M, copy, RAD_LAYOUT_KERNEL);
        assert_int_equal(launch(cpu_lib, k, &pools[mi % 3]), RAD_OK);
        take(c, M, again);
        if (memcmp(got, again, (size_t)(M * KU * c->N) * sizeof(float)) != 0)
            fail_msg("cpu %s: moe_gemm %s N=%lld M=%lld: the relayouted stack gives other bits", isa, name,
                     (long long)c->N, (long long)M);
    }
    /* experts apart: even ones in their x8 copy, odd ones as stored, each
    ** in its own allocation */
    const void *slices[E];
    uint8_t layouts[E];
    void *own[E];
    size_t one = bytes / E, stored = (size_t)(c->N * c->wrb);
    for (int e = 0; e < E; e++) {
        layouts[e] = e % 2 ? RAD_LAYOUT_STORED : RAD_LAYOUT_KERNEL;
        own[e] = malloc(e % 2 ? stored : one);
        memcpy(own[e], e % 2 ? c->w + e * stored : copy + e * one, e % 2 ? stored : one);
        slices[e] = own[e];
    }
    RadKernelArgs s = moe_args(c, M_MAX, NULL, RAD_LAYOUT_STORED);
    RadTensor *sw = &s.operand[operand_at(&(Call){.args = s}, "w")];
    sw->slices = slices;
    sw->slice_layout = layouts;
    assert_int_equal(launch(cpu_lib, s, &pools[0]), RAD_OK);
    take(c, M_MAX, again);
    if (memcmp(got, again, (size_t)(M_MAX * KU * c->N) * sizeof(float)) != 0)
        fail_msg("cpu %s: moe_gemm %s: experts apart in mixed layouts give other bits", isa, name);
    for (int e = 0; e < E; e++) free(own[e]);
    free(copy);
    return 1;
}

static void test_moe_gemm(void **state)
{
    (void)state;
    int encs[64], n = gemm_encodings(encs);
    assert_true(n >= 15);
    size_t cap = (size_t)(M_MAX * KU * 24);
    float *want = xmalloc(cap * 4), *got = xmalloc(cap * 4), *again = xmalloc(cap * 4), *dense = xmalloc(24 * 4);
    int relayouted = 0;
    for (int i = 0; i < n; i++) {
        for (int v = 0; v < 4; v++) {
            Moe c;
            moe_new(&c, encs[i], v < 2 ? 21 : 24, v % 2, (v + i) % 2, 500u + (uint32_t)(encs[i] * 13 + v));
            for (int l = 0; l < OPS_N_LEVELS; l++) {
                if (!level_ok[l]) continue;
                cpu_set_isa(ops_isa_levels[l]);
                check_moe_case(&c, ops_isa_levels[l], want, got, again, dense);
                if (c.N % 8 == 0) relayouted += check_relayout(&c, ops_isa_levels[l], got, again);
            }
            moe_free(&c);
        }
    }
    /* x8 stacks exist at avx2 and up: they must have been exercised there */
    if (level_ok[1]) assert_true(relayouted >= 5);
    printf("[ NOTE     ] moe_gemm: %d relayouted stacks checked\n", relayouted);
    free(want), free(got), free(again), free(dense);
}

static void test_moe_gemm_bad(void **state)
{
    (void)state;
    cpu_set_isa("portable");
    Moe c;
    moe_new(&c, RAD_ENC_Q8_0, 24, 0, 0, 900);
    for (int64_t i = 0; i < M_MAX * KU * c.os; i++) c.out[i] = 7.0f;
    c.ids[4] = E;                               /* past the stack */
    RadKernelArgs a = moe_args(&c, 2, c.w, RAD_LAYOUT_STORED);
    assert_int_equal(launch(cpu_lib, a, NULL), RAD_E_RANGE);
    for (int64_t i = 0; i < 2 * KU * c.os; i++)
        if (c.out[i] != 7.0f) fail_msg("a refused call wrote output %lld", (long long)i);
    c.ids[4] = -1;
    assert_int_equal(launch(cpu_lib, a, NULL), RAD_E_RANGE);
    c.ids[4] = 0;
    const RadKernelRow *row = ops_pick_row(cpu_lib, &a);
    assert_non_null(row);
    a.scratch = NULL;
    assert_int_equal(row->launch(&a), RAD_E_ARG);
    moe_free(&c);
}

static int load_cpu(void **state)
{
    (void)state;
    if (!(cpu_lib = ops_open_cpu(NULL, &cpu_set_isa, NULL))) return -1;
    for (int i = 0; i < OPS_N_LEVELS; i++) {
        level_ok[i] = cpu_set_isa(ops_isa_levels[i]) == 0;
        printf("[ %-8s ] cpu ISA level %s%s\n", level_ok[i] ? "LEVEL" : "SKIP", ops_isa_levels[i],
               level_ok[i] ? ": tested" : ": not on this machine, not executed");
    }
    return 0;
}

int main(void)
{
    (void)set_f, (void)set_index;       /* ref_harness.h's, unused here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moe_gemm),
        cmocka_unit_test(test_moe_gemm_bad),
    };
    return cmocka_run_group_tests(tests, load_cpu, NULL);
}
