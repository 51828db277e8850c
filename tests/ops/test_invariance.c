/*
** test_invariance.c: batch and placement invariance (docs/OPS.md), for every
** op of the vocabulary, in ref and in cpu.
**
** The contract: a row's output depends only on that row's own inputs (its
** activations, its position, its KV contents), not on how many rows share
** the step or which, not on the thread count or the task split, and not on
** whether a weight is in the stored layout or a kernel's relayouted copy.
** So for each op and each M in {1, 2, 5, 9, 33, 512} this test runs the op
** once over M rows (serially and on pools of 2 and 3 threads: the same bits)
** and then each row alone (M = 1, its own position, sequence and cache), and
** requires every output row to be bit-identical to the row computed alone.
** Inputs cover the kernels' edges: ragged widths, every weight encoding ref
** decodes (and the cpu library's relayouted copy of each weight it offers
** to relayout, whose products must also equal the stored layout's), f16 and
** f32 KV caches, positions from 0 and past a cache block and a sliding
** window's edge, long contexts (several attention parts), two sequences
** interleaved in one step, rope's scaling kinds, and the mixture-of-experts
** ops (router modes, stacked experts in every encoding).  Every cpu ISA level
** the machine runs is covered, and the ones it lacks are named as skipped.
**
** `quick` as argv[1] (the NEON run under qemu) leaves out M = 512.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops_common.h"
#include "ref_harness.h"

#include "../../base/rad_half.h"
#include "../../formats/quantize.h"
#include "../../kernels/ops/rad_op_values.h"

static const RadKernelLibrary *cpu_lib;
static int (*cpu_set_isa)(const char *name);
#define isa_levels ops_isa_levels
enum { N_LEVELS = OPS_N_LEVELS };
static int level_ok[N_LEVELS];
static int quick;

static const int64_t Ms_all[] = {1, 2, 5, 9, 33, 512};
#define M_MAX 512
static int n_Ms;

static int n_fail;
#define INV_FAIL(...)                                                       \
    do {                                                                    \
        if (n_fail++ < 20) {                                                \
            fprintf(stderr, "FAIL: ");                                      \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
        }                                                                   \
    } while (0)

/* ------------------------------------------------------ running a call */

/* Launch args on lib's row with pool (NULL: serially) and the scratch the
** row asks for; the row's code, or -1000 when lib has no row. */
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
        for (int i = 0; i < RAD_MAX_OPERANDS; i++) memset(&s.operand[i], 0, sizeof s.operand[i]);
        s.kv = NULL;
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

/* --------------------------------------------------------- the check */

/* One op's inputs for M_MAX rows.  Every activation and index operand is
** per row (row m at data + m * row_bytes) except gather_rows' x; the
** activations are restored from `init` before each run. */
typedef struct Case {
    const char *what;
    Call call;                      /* the args for M_MAX rows */
    RadKvView kv;                   /* the call's cache view (attn_paged, kv_store) */
    int has_kv;
    void *act[RAD_MAX_OPERANDS];    /* per-row activation buffers, by operand */
    void *init[RAD_MAX_OPERANDS];
    size_t act_bytes[RAD_MAX_OPERANDS];
    unsigned char *cache;           /* kv_store: the cache's bytes (k then v), compared */
    size_t cache_bytes;
    unsigned char *cache_init;
    int mult[RAD_MAX_OPERANDS];     /* buffer rows per step row (moe ops' M * k slot rows); 0 = 1 */
} Case;

static int64_t mult_of(const Case *c, int o) { return c->mult[o] ? c->mult[o] : 1; }

static int per_row(const Case *c, int o)
{
    const RadOperandSchema *s = &c->call.args.schema->operands[o];
    if (strcmp(c->call.args.schema->op, "gather_rows") == 0 && strcmp(s->name, "x") == 0) return 0;
    return s->role == RAD_ROLE_IN || s->role == RAD_ROLE_OUT || s->role == RAD_ROLE_INOUT ||
           s->role == RAD_ROLE_INDEX;
}

static int is_output(const Case *c, int o)
{
    int role = c->call.args.schema->operands[o].role;
    return role == RAD_ROLE_OUT || role == RAD_ROLE_INOUT;
}

static void restore(Case *c)
{
    for (int o = 0; o < c->call.args.schema->n_operands; o++)
        if (c->init[o]) memcpy(c->act[o], c->init[o], c->act_bytes[o]);
    if (c->cache) memcpy(c->cache, c->cache_init, c->cache_bytes);
}

/* Keep a copy of every activation (and the cache) as the inputs. */
static void case_ready(Case *c)
{
    for (int o = 0; o < c->call.args.schema->n_operands; o++) {
        RadTensor *t = &c->call.args.operand[o];
        if (!t->data || !per_row(c, o)) continue;
        c->act[o] = t->data;
        c->act_bytes[o] = (size_t)(t->row_bytes * M_MAX * mult_of(c, o));
        c->init[o] = malloc(c->act_bytes[o]);
        memcpy(c->init[o], t->data, c->act_bytes[o]);
    }
    if (c->cache) {
        c->cache_init = malloc(c->cache_bytes);
        memcpy(c->cache_init, c->cache, c->cache_bytes);
    }
}

static void case_free(Case *c)
{
    for (int o = 0; o < RAD_MAX_OPERANDS; o++) free(c->init[o]);
    free(c->cache_init);
}

/* The args for rows [m, m + n) of the case. */
static RadKernelArgs rows_of(Case *c, int64_t m, int64_t n, RadKvView *kv)
{
    RadKernelArgs a = c->call.args;
    a.param[0].i = n;
    for (int o = 0; o < a.schema->n_operands; o++) {
        RadTensor *t = &a.operand[o];
        if (!t->data || !per_row(c, o)) continue;
        t->data = (char *)t->data + m * mult_of(c, o) * t->row_bytes;
        t->shape[0] = n * mult_of(c, o);
    }
    if (c->has_kv) {
        *kv = c->kv;
        kv->n_tok = (int)n;
        kv->token_seq += m;
        kv->positions += m;
        a.kv = kv;
    }
    return a;
}

/* What a run wrote: every output operand's first M rows, then the cache. */
static size_t result_bytes(const Case *c, int64_t M)
{
    size_t n = c->cache ? c->cache_bytes : 0;
    for (int o = 0; o < c->call.args.schema->n_operands; o++)
        if (c->act[o] && is_output(c, o)) n += (size_t)(c->call.args.operand[o].row_bytes * M * mult_of(c, o));
    return n;
}

static void result_of(const Case *c, int64_t M, unsigned char *dst)
{
    for (int o = 0; o < c->call.args.schema->n_operands; o++)
        if (c->act[o] && is_output(c, o)) {
            size_t n = (size_t)(c->call.args.operand[o].row_bytes * M * mult_of(c, o));
            memcpy(dst, c->act[o], n);
            dst += n;
        }
    if (c->cache) memcpy(dst, c->cache, c->cache_bytes);
}

/* The check itself at lib's current level: for every M, the M-row run on
** three pools agrees with itself and with each row run alone.  Rows are
** compared over their output columns only (row padding is not output). */
static void check_case(const RadKernelLibrary *lib, const char *level, Case *c)
{
    TestPool pools[] = {{2, 0}, {3, 0}};
    size_t max_bytes = result_bytes(c, M_MAX);
    unsigned char *full = malloc(max_bytes), *again = malloc(max_bytes), *alone = malloc(max_bytes);
    for (int mi = 0; mi < n_Ms; mi++) {
        int64_t M = Ms_all[mi];
        RadKvView kv;
        size_t bytes = result_bytes(c, M);
        restore(c);
        int rc = launch(lib, rows_of(c, 0, M, &kv), NULL);
        if (rc) {
            INV_FAIL("%s %s: %s M=%lld: rc %d", lib->name, level, c->what, (long long)M, rc);
            continue;
        }
        result_of(c, M, full);
        for (size_t p = 0; p < sizeof pools / sizeof pools[0]; p++) {
            restore(c);
            rc = launch(lib, rows_of(c, 0, M, &kv), &pools[p]);
            result_of(c, M, again);
            if (rc || memcmp(full, again, bytes) != 0)
                INV_FAIL("%s %s: %s M=%lld: %d threads change the result", lib->name, level, c->what,
                         (long long)M, pools[p].n_threads);
        }
        /* each row alone, into the same buffers (a cache op: one after the other) */
        restore(c);
        for (int64_t m = 0; m < M && !rc; m++) rc = launch(lib, rows_of(c, m, 1, &kv), NULL);
        result_of(c, M, alone);
        if (rc) {
            INV_FAIL("%s %s: %s alone: rc %d", lib->name, level, c->what, rc);
            continue;
        }
        /* compare row by row over the output columns */
        const unsigned char *f = full, *s = alone;
        for (int o = 0; o < c->call.args.schema->n_operands; o++) {
            if (!c->act[o] || !is_output(c, o)) continue;
            const RadTensor *t = &c->call.args.operand[o];
            size_t cols = (size_t)t->shape[1] * sizeof(float);      /* i32 outputs: the same width */
            for (int64_t m = 0; m < M * mult_of(c, o); m++)
                if (memcmp(f + m * t->row_bytes, s + m * t->row_bytes, cols) != 0) {
                    INV_FAIL("%s %s: %s M=%lld: row %lld differs from the row computed alone", lib->name, level,
                             c->what, (long long)M, (long long)(m / mult_of(c, o)));
                    break;
                }
            f += (size_t)(t->row_bytes * M * mult_of(c, o));
            s += (size_t)(t->row_bytes * M * mult_of(c, o));
        }
        if (c->cache && memcmp(f, s, c->cache_bytes) != 0)
            INV_FAIL("%s %s: %s M=%lld: the cache differs from the rows stored one by one", lib->name, level,
                     c->what, (long long)M);
    }
    free(full);
    free(again);
    free(alone);
}

/* The case in ref, then in cpu at every level the machine has. */
static void check_everywhere(Case *c)
{
    check_case(&rad_kernel_library, "ref", c);
    for (int l = 0; l < N_LEVELS; l++) {
        if (!level_ok[l]) continue;
        cpu_set_isa(isa_levels[l]);
        check_case(cpu_lib, isa_levels[l], c);
    }
}

/* ----------------------------------------------------------- inputs */

static float *falloc_fill(int64_t n, uint32_t seed, float amp)
{
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = amp * rnd(&seed);
    return x;
}

/* An activation operand of M_MAX rows of cols, rows padded by 3 floats. */
static float *act(Case *c, const char *name, int64_t cols, uint32_t seed, float amp)
{
    float *x = falloc_fill(M_MAX * (cols + 3), seed, amp);
    set_act_strided(&c->call, name, x, M_MAX, cols, cols + 3);
    return x;
}

static int32_t *index_of(Case *c, const char *name, int32_t lo, int32_t hi, uint32_t seed)
{
    int32_t *v = malloc(M_MAX * sizeof(int32_t));
    for (int m = 0; m < M_MAX; m++) {
        seed = seed * 1664525u + 1013904223u;
        v[m] = lo + (int32_t)((seed >> 8) % (uint32_t)(hi - lo));
    }
    set_index(&c->call, name, v, M_MAX);
    return v;
}

static void free_ops(Case *c)
{
    for (int o = 0; o < c->call.args.schema->n_operands; o++)
        if (per_row(c, o)) free(c->call.args.operand[o].data);
}

/* A weight [rows, cols] in enc (rows 0: a vector), values of scale amp. */
static void *weight(int enc, int64_t rows, int64_t cols, uint32_t seed, float amp, int64_t *row_bytes)
{
    int64_t n = rows ? rows : 1;
    *row_bytes = rad_encoding_row_bytes(enc, cols);
    unsigned char *w = malloc((size_t)(n * *row_bytes));
    float *v = malloc((size_t)cols * sizeof(float));
    for (int64_t r = 0; r < n; r++) {
        for (int64_t k = 0; k < cols; k++) v[k] = amp * rnd(&seed) * ((k % 61 == 7) ? 4.0f : 1.0f);
        unsigned char *row = w + r * *row_bytes;
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

/* ------------------------------------------------------------- tests */

static void test_rowwise(void **state)
{
    (void)state;
    const int64_t N = 203;
    static const char *binary[] = {"add", "mul", "silu_mul", "gelu_mul"};
    for (int i = 0; i < 4; i++) {
        Case c = {.what = binary[i], .call = call_new(binary[i], M_MAX)};
        int gated = i >= 2;
        set_i(&c.call, "N", N);
        act(&c, gated ? "gate" : "a", N, 10 + i, 4.0f);
        act(&c, gated ? "up" : "b", N, 20 + i, 4.0f);
        act(&c, "out", N, 30 + i, 1.0f);
        case_ready(&c);
        check_everywhere(&c);
        free_ops(&c), case_free(&c);
    }
    Case c = {.what = "scale_rows", .call = call_new("scale_rows", M_MAX)};
    set_i(&c.call, "N", N);
    set_f(&c.call, "scale", 25.3);
    act(&c, "x", N, 40, 1.0f);
    case_ready(&c);
    check_everywhere(&c);
    free_ops(&c), case_free(&c);

    int64_t wrb;
    void *w = weight(RAD_ENC_F32, 0, N, 50, 1.0f, &wrb);
    static const char *norms[] = {"rmsnorm", "rmsnorm_add"};
    for (int i = 0; i < 2; i++) {
        Case n = {.what = norms[i], .call = call_new(norms[i], M_MAX)};
        set_i(&n.call, "N", N);
        set_f(&n.call, "eps", 1e-6);
        set_f(&n.call, "w_offset", i ? 1.0 : 0.0);
        set_weight(&n.call, "w", w, RAD_ENC_F32, 0, N, wrb);
        act(&n, "x", N, 60 + i, 3.0f);
        if (i) act(&n, "d", N, 70, 1.0f);
        act(&n, "out", N, 80, 1.0f);
        case_ready(&n);
        check_everywhere(&n);
        free_ops(&n), case_free(&n);
    }
    free(w);

    const int64_t n_head = 4, hd = 80;
    w = weight(RAD_ENC_F32, 0, hd, 90, 1.0f, &wrb);
    Case q = {.what = "qk_norm", .call = call_new("qk_norm", M_MAX)};
    set_i(&q.call, "n_head", n_head);
    set_i(&q.call, "head_dim", hd);
    set_f(&q.call, "eps", 1e-6);
    set_f(&q.call, "w_offset", 0.0);
    set_weight(&q.call, "w", w, RAD_ENC_F32, 0, hd, wrb);
    act(&q, "x", n_head * hd, 91, 2.0f);
    case_ready(&q);
    check_everywhere(&q);
    free_ops(&q), case_free(&q);
    free(w);
    assert_int_equal(n_fail, 0);
}

static void test_rope(void **state)
{
    (void)state;
    const int64_t n_head = 3, hd = 64;
    static const struct {
        const char *what;
        int mode, scaling, n_rot;
    } kinds[] = {
        {"rope neox", RAD_ROPE_MODE_NEOX, RAD_ROPE_SCALING_NONE, 64},
        {"rope adjacent, partial, llama3", RAD_ROPE_MODE_ADJACENT, RAD_ROPE_SCALING_LLAMA3, 48},
        {"rope neox yarn", RAD_ROPE_MODE_NEOX, RAD_ROPE_SCALING_YARN, 64},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        Case c = {.what = kinds[k].what, .call = call_new("rope", M_MAX)};
        set_i(&c.call, "n_head", n_head);
        set_i(&c.call, "head_dim", hd);
        set_i(&c.call, "n_rot", kinds[k].n_rot);
        set_i(&c.call, "mode", kinds[k].mode);
        set_f(&c.call, "theta", 500000.0);
        set_i(&c.call, "scaling", kinds[k].scaling);
        set_f(&c.call, "factor", 8.0);
        set_f(&c.call, "low_freq_factor", 1.0);
        set_f(&c.call, "high_freq_factor", 4.0);
        set_i(&c.call, "orig_ctx", 8192);
        set_i(&c.call, "truncate", 1);
        act(&c, "x", n_head * hd, 100 + (uint32_t)k, 2.0f);
        index_of(&c, "positions", 0, 40000, 110 + (uint32_t)k);
        case_ready(&c);
        check_everywhere(&c);
        free_ops(&c), case_free(&c);
    }
    assert_int_equal(n_fail, 0);
}

static void test_copies(void **state)
{
    (void)state;
    const int64_t vocab = 300, N = 256;
    static const int encs[] = {RAD_ENC_F32, RAD_ENC_Q8_0, RAD_ENC_Q4_K, RAD_ENC_Q6_K};
    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++) {
        int64_t wrb;
        void *table = weight(encs[e], vocab, N, 120 + (uint32_t)e, 1.0f, &wrb);
        Case c = {.what = "embed_lookup", .call = call_new("embed_lookup", M_MAX)};
        set_i(&c.call, "N", N);
        set_weight(&c.call, "table", table, encs[e], vocab, N, wrb);
        index_of(&c, "ids", 0, (int32_t)vocab, 130);
        act(&c, "out", N, 131, 1.0f);
        case_ready(&c);
        check_everywhere(&c);
        free_ops(&c), case_free(&c);
        free(table);
    }
    const int64_t rows = 700, W = 77;
    float *x = falloc_fill(rows * W, 140, 3.0f);
    Case g = {.what = "gather_rows", .call = call_new("gather_rows", M_MAX)};
    set_i(&g.call, "N", W);
    set_act(&g.call, "x", x, rows, W);
    index_of(&g, "idx", 0, (int32_t)rows, 141);
    act(&g, "out", W, 142, 1.0f);
    case_ready(&g);
    check_everywhere(&g);
    free_ops(&g), case_free(&g);
    free(x);
    assert_int_equal(n_fail, 0);
}

/* ------------------------------------------------------ the KV cache */

/* A paged cache of two sequences of `ctx` positions, blocks of 16 handed
** out scrambled, rows padded, every slot random (rounded for f16). */
typedef struct Cache {
    unsigned char *bytes;           /* k then v */
    size_t plane;                   /* bytes of one of them */
    int32_t *table;
    int max_blocks;
    int64_t row_bytes;
} Cache;

static void cache_new(Cache *c, int enc, int n_kv, int hd, int ctx, uint32_t seed)
{
    const int bs = 16, n_seq = 2;
    c->max_blocks = (ctx + bs - 1) / bs;
    int n_blocks = n_seq * c->max_blocks;
    int64_t esize = enc == RAD_ENC_F16 ? 2 : 4;
    c->row_bytes = n_kv * hd * esize + 16;
    c->plane = (size_t)((int64_t)n_blocks * bs * c->row_bytes);
    c->bytes = malloc(2 * c->plane);
    c->table = malloc((size_t)n_blocks * sizeof(int32_t));
    for (int i = 0; i < n_blocks; i++) c->table[i] = (int32_t)(((int64_t)i * 7919) % n_blocks);
    for (size_t i = 0; i < 2 * c->plane / 4; i++) {
        float v = rnd(&seed) * 3.0f;
        if (enc == RAD_ENC_F16) {
            uint16_t h[2] = {rad_f32_to_f16(v), rad_f32_to_f16(rnd(&seed) * 3.0f)};
            memcpy(c->bytes + 4 * i, h, 4);
        } else {
            memcpy(c->bytes + 4 * i, &v, 4);
        }
    }
}

static RadKvView view_of(const Cache *c, int enc, int n_kv, int hd, int32_t *seq, int32_t *pos)
{
    return (RadKvView){.struct_size = (int)sizeof(RadKvView), .k = c->bytes, .v = c->bytes + c->plane, .enc = enc,
                       .block_size = 16, .n_head_kv = n_kv, .head_dim = hd, .kv_row_bytes = c->row_bytes,
                       .n_seq = 2, .max_blocks = c->max_blocks, .block_table = c->table, .n_tok = M_MAX,
                       .token_seq = seq, .positions = pos};
}

/* Rows' sequences and positions: from `first` on in sequence 0, or (two)
** alternating between the sequences, sequence 1 `first / 2` behind. */
static void rows_at(int32_t *seq, int32_t *pos, int first, int two)
{
    for (int m = 0; m < M_MAX; m++) {
        seq[m] = two ? m % 2 : 0;
        pos[m] = two ? (m % 2 ? first / 2 : first) + m / 2 : first + m;
    }
}

static void test_kv_store(void **state)
{
    (void)state;
    const int n_kv = 2, hd = 64;
    for (int f16 = 0; f16 <= 1; f16++) {
        int enc = f16 ? RAD_ENC_F16 : RAD_ENC_F32;
        Cache cache;
        cache_new(&cache, enc, n_kv, hd, 1300, 150);
        int32_t seq[M_MAX], pos[M_MAX];
        rows_at(seq, pos, 700, 1);
        Case c = {.what = f16 ? "kv_store f16" : "kv_store f32", .call = call_new("kv_store", M_MAX),
                  .has_kv = 1, .cache = cache.bytes, .cache_bytes = 2 * cache.plane};
        c.kv = view_of(&cache, enc, n_kv, hd, seq, pos);
        set_i(&c.call, "n_head_kv", n_kv);
        set_i(&c.call, "head_dim", hd);
        act(&c, "k", n_kv * hd, 151, 4.0f);
        act(&c, "v", n_kv * hd, 152, 4.0f);
        case_ready(&c);
        check_everywhere(&c);
        free_ops(&c), case_free(&c);
        free(cache.bytes), free(cache.table);
    }
    assert_int_equal(n_fail, 0);
}

static void test_attention(void **state)
{
    (void)state;
    const int n_head = 8, n_kv = 2, hd = 64;
    static const struct {
        const char *what;
        int first, two, window, sinks;
        double softcap;
    } shapes[] = {
        {"from 0", 0, 0, 0, 0, 0},
        {"past a block edge, two sequences", 13, 1, 0, 1, 0},
        {"long context, sliding window, soft-cap", 700, 0, 100, 0, 30.0},
        {"long context, two sequences", 900, 1, 0, 0, 0},
    };
    for (int f16 = 0; f16 <= 1; f16++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int enc = f16 ? RAD_ENC_F16 : RAD_ENC_F32;
            Cache cache;
            cache_new(&cache, enc, n_kv, hd, 1300, 160 + (uint32_t)s);
            int32_t seq[M_MAX], pos[M_MAX];
            rows_at(seq, pos, shapes[s].first, shapes[s].two);
            char what[128];
            snprintf(what, sizeof what, "attn_paged %s KV, %s", f16 ? "f16" : "f32", shapes[s].what);
            Case c = {.what = what, .call = call_new("attn_paged", M_MAX), .has_kv = 1};
            c.kv = view_of(&cache, enc, n_kv, hd, seq, pos);
            float *sinks = falloc_fill(n_head, 170, 2.0f);
            set_i(&c.call, "n_head", n_head);
            set_i(&c.call, "n_head_kv", n_kv);
            set_i(&c.call, "head_dim", hd);
            set_f(&c.call, "scale", 0.125);
            set_i(&c.call, "window", shapes[s].window);
            set_f(&c.call, "softcap", shapes[s].softcap);
            if (shapes[s].sinks) set_weight(&c.call, "sinks", sinks, RAD_ENC_F32, 0, n_head, 0);
            act(&c, "q", n_head * hd, 171 + (uint32_t)s, 3.0f);
            act(&c, "out", n_head * hd, 172, 1.0f);
            case_ready(&c);
            check_everywhere(&c);
            free_ops(&c), case_free(&c);
            free(sinks), free(cache.bytes), free(cache.table);
        }
    assert_int_equal(n_fail, 0);
}

/* ------------------------------------------------------------- GEMMs */

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

/* The product's rows at M = 1..512 alone and together, stored and (where
** the cpu row relayouts the weight) relayouted, and the two layouts'
** M_MAX-row products the same bits. */
static void gemm_case(const char *op, int enc, int64_t N, int64_t K, int bias)
{
    int64_t wrb;
    void *w = weight(enc, N, K, 200 + (uint32_t)enc, 0.5f, &wrb);
    float *b = falloc_fill(N, 201, 1.0f);
    char what[96];
    snprintf(what, sizeof what, "%s %s N=%lld K=%lld%s", op, rad_encoding_info(enc)->name, (long long)N,
             (long long)K, bias ? " +bias" : "");
    Case c = {.what = what, .call = call_new(op, M_MAX)};
    set_i(&c.call, "N", N);
    set_i(&c.call, "K", K);
    set_i(&c.call, "enc", enc);
    if (strcmp(op, "logits_gemm") == 0) set_f(&c.call, "softcap", bias ? 30.0 : 0.0);
    else if (bias) set_weight(&c.call, "bias", b, RAD_ENC_F32, 0, N, 0);
    set_weight(&c.call, "w", w, enc, N, K, wrb);
    act(&c, "x", K, 202 + (uint32_t)enc, 1.0f);
    act(&c, "out", N, 203, 1.0f);
    case_ready(&c);
    check_case(&rad_kernel_library, "ref", &c);
    const int W = 1;        /* gemm_nt's and logits_gemm's weight operand */
    size_t out_bytes = result_bytes(&c, M_MAX);
    unsigned char *stored = malloc(out_bytes), *kernel = malloc(out_bytes);
    for (int l = 0; l < N_LEVELS; l++) {
        if (!level_ok[l]) continue;
        cpu_set_isa(isa_levels[l]);
        check_case(cpu_lib, isa_levels[l], &c);
        const RadKernelRow *row = ops_pick_row(cpu_lib, &c.call.args);
        size_t bytes = row && row->relayout_bytes ? row->relayout_bytes(&c.call.args.operand[W]) : 0;
        if (!bytes) continue;
        void *copy = aligned_alloc(64, (bytes + 63) / 64 * 64);
        assert_int_equal(row->relayout(&c.call.args.operand[W], copy), RAD_OK);
        RadKvView kv;
        restore(&c);
        assert_int_equal(launch(cpu_lib, rows_of(&c, 0, M_MAX, &kv), NULL), RAD_OK);
        result_of(&c, M_MAX, stored);
        Case k = c;
        k.call.args.operand[W].data = copy;
        k.call.args.operand[W].layout = RAD_LAYOUT_KERNEL;
        snprintf(what, sizeof what, "%s %s N=%lld K=%lld%s, relayouted", op, rad_encoding_info(enc)->name,
                 (long long)N, (long long)K, bias ? " +bias" : "");
        k.what = what;
        check_case(cpu_lib, isa_levels[l], &k);
        restore(&k);
        assert_int_equal(launch(cpu_lib, rows_of(&k, 0, M_MAX, &kv), NULL), RAD_OK);
        result_of(&k, M_MAX, kernel);
        if (memcmp(stored, kernel, out_bytes) != 0)
            INV_FAIL("cpu %s: %s: the relayouted weight gives other bits than the stored one", isa_levels[l], what);
        free(copy);
    }
    free(stored), free(kernel);
    free_ops(&c), case_free(&c);
    free(w), free(b);
}

static void test_gemm(void **state)
{
    (void)state;
    int encs[64], n = gemm_encodings(encs);
    assert_true(n >= 15);
    for (int e = 0; e < n; e++) {
        int blk = rad_encoding_info(encs[e])->block_elems;
        gemm_case("gemm_nt", encs[e], 40, blk >= 256 ? 512 : 160, 1);
        gemm_case("logits_gemm", encs[e], 24, blk >= 256 ? 256 : 96, encs[e] % 2);
    }
    assert_int_equal(n_fail, 0);
}

/* The mixture-of-experts ops: router_topk in each mode (the sigmoid one
** with a bias and groups), moe_gemm over a stacked weight in every
** encoding (shared and per-slot inputs, with a stacked bias), moe_combine,
** clamp, swiglu_oai and sigmoid_gate.  A step row of these ops owns k buffer rows where the op says
** so (Case.mult).  A library without a row for one of them is skipped
** (tests/ops/test_cpu_ops.c requires the cpu library to have them all). */
static void check_moe(Case *c)
{
    check_case(&rad_kernel_library, "ref", c);
    for (int l = 0; l < N_LEVELS; l++) {
        if (!level_ok[l] || !ops_pick_row(cpu_lib, &c->call.args)) continue;
        cpu_set_isa(isa_levels[l]);
        check_case(cpu_lib, isa_levels[l], c);
    }
}

static int32_t *i32_rows(Case *c, const char *name, int64_t cols, int32_t n_expert, uint32_t seed)
{
    int32_t *v = malloc((size_t)(M_MAX * cols) * sizeof(int32_t));
    for (int64_t i = 0; i < M_MAX * cols; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (int32_t)((seed >> 8) % (uint32_t)n_expert);
    }
    RadTensor *t = &c->call.args.operand[operand_at(&c->call, name)];
    *t = (RadTensor){.data = v, .enc = RAD_ENC_I32, .rank = 2, .shape = {M_MAX, cols}, .row_bytes = cols * 4};
    return v;
}

/* moe_gemm over a stack of E slices of [N, K], k = KU slots a row (ids
** with repeats), shared or per-slot inputs, a stacked bias or none; where
** the cpu row relayouts the stack (the x8 layout, slice by slice) the check
** runs through the copy too, and the copy's M_MAX-row product must be the
** stored layout's bits. */
static void moe_gemm_case(int enc, int64_t N, int per_slot, int with_bias)
{
    const int64_t E = 16, KU = 3;
    int64_t K = rad_encoding_info(enc)->block_elems >= 256 ? 256 : 96, wrb, brb;
    unsigned char *w = weight(enc, E * N, K, 340 + (uint32_t)enc, 0.5f, &wrb);
    float *b = weight(RAD_ENC_F32, E, N, 350, 0.5f, &brb);
    char what[96];
    snprintf(what, sizeof what, "moe_gemm %s N=%lld%s%s", rad_encoding_info(enc)->name, (long long)N,
             per_slot ? " per slot" : "", with_bias ? " +bias" : "");
    Case c = {.what = what, .call = call_new("moe_gemm", M_MAX)};
    set_i(&c.call, "k", KU);
    set_i(&c.call, "N", N);
    set_i(&c.call, "K", K);
    set_i(&c.call, "enc", enc);
    set_i(&c.call, "x_per_slot", per_slot);
    const int W = operand_at(&c.call, "w");
    RadTensor *wt = &c.call.args.operand[W];
    *wt = (RadTensor){.data = w, .enc = enc, .rank = 3, .shape = {E, N, K}, .row_bytes = wrb,
                      .n_slices = E, .slice_bytes = N * wrb};
    if (with_bias) {
        RadTensor *bt = &c.call.args.operand[operand_at(&c.call, "bias")];
        *bt = (RadTensor){.data = b, .enc = RAD_ENC_F32, .rank = 2, .shape = {E, N}, .row_bytes = brb,
                          .n_slices = E, .slice_bytes = brb};
    }
    act(&c, "x", K, 360, 1.0f);
    if (per_slot) {
        free(c.call.args.operand[operand_at(&c.call, "x")].data);
        float *x = falloc_fill(M_MAX * KU * (K + 3), 361, 1.0f);
        set_act_strided(&c.call, "x", x, M_MAX * KU, K, K + 3);
        c.mult[operand_at(&c.call, "x")] = (int)KU;
    }
    i32_rows(&c, "ids", KU, (int32_t)E, 370 + (uint32_t)enc);
    float *out = falloc_fill(M_MAX * KU * (N + 3), 380, 1.0f);
    set_act_strided(&c.call, "out", out, M_MAX * KU, N, N + 3);
    c.mult[operand_at(&c.call, "out")] = (int)KU;
    case_ready(&c);
    check_moe(&c);
    size_t out_bytes = result_bytes(&c, M_MAX);
    unsigned char *stored = malloc(out_bytes), *kernel = malloc(out_bytes);
    for (int l = 0; l < N_LEVELS; l++) {
        const RadKernelRow *row = ops_pick_row(cpu_lib, &c.call.args);
        if (!level_ok[l] || !row) continue;
        cpu_set_isa(isa_levels[l]);
        size_t bytes = row->relayout_bytes ? row->relayout_bytes(&c.call.args.operand[W]) : 0;
        if (!bytes) continue;
        void *copy = aligned_alloc(64, (bytes + 63) / 64 * 64);
        assert_int_equal(row->relayout(&c.call.args.operand[W], copy), RAD_OK);
        RadKvView kv;
        restore(&c);
        assert_int_equal(launch(cpu_lib, rows_of(&c, 0, M_MAX, &kv), NULL), RAD_OK);
        result_of(&c, M_MAX, stored);
        Case k = c;
        k.call.args.operand[W].data = copy;
        k.call.args.operand[W].layout = RAD_LAYOUT_KERNEL;
        char kwhat[128];
        snprintf(kwhat, sizeof kwhat, "%s, relayouted", what);
        k.what = kwhat;
        check_case(cpu_lib, isa_levels[l], &k);
        restore(&k);
        assert_int_equal(launch(cpu_lib, rows_of(&k, 0, M_MAX, &kv), NULL), RAD_OK);
        result_of(&k, M_MAX, kernel);
        if (memcmp(stored, kernel, out_bytes) != 0)
            INV_FAIL("cpu %s: %s: the relayouted stack gives other bits than the stored one", isa_levels[l], kwhat);
        free(copy);
    }
    free(stored), free(kernel);
    free_ops(&c), case_free(&c);
    free(w), free(b);
}

static void test_moe(void **state)
{
    (void)state;
    const int64_t E = 16, KU = 3;
    int64_t brb;
    float *bias = weight(RAD_ENC_F32, 0, E, 300, 0.3f, &brb);
    for (int mode = 0; mode < 3; mode++) {
        char what[96];
        snprintf(what, sizeof what, "router_topk mode %d", mode);
        Case c = {.what = what, .call = call_new("router_topk", M_MAX)};
        set_i(&c.call, "n_expert", E);
        set_i(&c.call, "k", KU);
        set_i(&c.call, "mode", mode);
        set_i(&c.call, "renorm", mode != 1);
        set_f(&c.call, "scale", mode == 2 ? 2.5 : 1.0);
        if (mode == 2) {
            set_i(&c.call, "n_group", 4);
            set_i(&c.call, "topk_group", 2);
            set_weight(&c.call, "bias", bias, RAD_ENC_F32, 0, E, brb);
        }
        act(&c, "logits", E, 310 + (uint32_t)mode, 3.0f);
        i32_rows(&c, "ids", KU, (int32_t)E, 320);
        act(&c, "weights", KU, 330, 1.0f);
        case_ready(&c);
        check_moe(&c);
        free_ops(&c), case_free(&c);
    }
    free(bias);

    int encs[64], n_enc = gemm_encodings(encs);
    for (int ei = 0; ei < n_enc; ei++) {
        /* N ragged, and a multiple of 8 where the cpu row relayouts the stack (x8) */
        moe_gemm_case(encs[ei], 21, ei % 2, ei % 3 == 0);
        moe_gemm_case(encs[ei], 24, (ei + 1) % 2, ei % 3 == 1);
    }

    Case c = {.what = "moe_combine", .call = call_new("moe_combine", M_MAX)};
    set_i(&c.call, "k", KU);
    set_i(&c.call, "N", 203);
    float *y = falloc_fill(M_MAX * KU * 206, 390, 2.0f);
    set_act_strided(&c.call, "y", y, M_MAX * KU, 203, 206);
    c.mult[operand_at(&c.call, "y")] = (int)KU;
    act(&c, "weights", KU, 391, 1.0f);
    act(&c, "out", 203, 392, 1.0f);
    case_ready(&c);
    check_moe(&c);
    free_ops(&c), case_free(&c);

    Case q = {.what = "clamp", .call = call_new("clamp", M_MAX)};
    set_i(&q.call, "N", 203);
    set_f(&q.call, "lo", -0.5);
    set_f(&q.call, "hi", 0.75);
    act(&q, "x", 203, 393, 1.0f);
    case_ready(&q);
    check_moe(&q);
    free_ops(&q), case_free(&q);

    Case g = {.what = "swiglu_oai", .call = call_new("swiglu_oai", M_MAX)};
    set_i(&g.call, "N", 203);
    set_f(&g.call, "alpha", 1.702);
    set_f(&g.call, "limit", 7.0);
    act(&g, "gate", 203, 394, 10.0f);
    act(&g, "up", 203, 395, 10.0f);
    act(&g, "out", 203, 396, 1.0f);
    case_ready(&g);
    check_moe(&g);
    free_ops(&g), case_free(&g);

    Case s = {.what = "sigmoid_gate", .call = call_new("sigmoid_gate", M_MAX)};
    set_i(&s.call, "N", 203);
    act(&s, "x", 203, 397, 2.0f);
    act(&s, "g", 1, 398, 6.0f);
    act(&s, "out", 203, 399, 1.0f);
    case_ready(&s);
    check_moe(&s);
    free_ops(&s), case_free(&s);
    assert_int_equal(n_fail, 0);
}

/* ---------------------------------------------------------------- main */

static int load_cpu(void **state)
{
    (void)state;
    if (!(cpu_lib = ops_open_cpu(NULL, &cpu_set_isa, NULL))) return -1;
    for (int i = 0; i < N_LEVELS; i++) {
        level_ok[i] = cpu_set_isa(isa_levels[i]) == 0;
        printf("[ %-8s ] cpu ISA level %s%s\n", level_ok[i] ? "LEVEL" : "SKIP", isa_levels[i],
               level_ok[i] ? ": tested" : ": not on this machine, not executed");
    }
    return 0;
}

int main(int argc, char **argv)
{
    quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    n_Ms = (int)(sizeof Ms_all / sizeof Ms_all[0]) - (quick ? 1 : 0);
    if (quick) printf("[ NOTE     ] quick: M = 512 left out\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rowwise), cmocka_unit_test(test_rope),      cmocka_unit_test(test_copies),
        cmocka_unit_test(test_kv_store), cmocka_unit_test(test_attention), cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_moe),
    };
    return cmocka_run_group_tests(tests, load_cpu, NULL);
}
