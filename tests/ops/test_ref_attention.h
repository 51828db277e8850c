/*
** test_ref_attention.h: kv_store and attn_paged, part of test_ref.c.
**
** A TestKv is a small paged cache whose block table deliberately maps a
** sequence's blocks out of order, so slot arithmetic mistakes show.  Keys
** and values go in through kv_store, as in a real step; attention is
** checked against a naive dense computation and against hand-made cases for
** each rule: causality, the window, GQA, soft-capping and sinks.
*/

enum { KV_BLOCK = 4, KV_MAX_BLOCKS = 4, KV_MAX_SEQ = 2, KV_MAX_TOK = 16 };

typedef struct TestKv {
    RadKvView view;
    unsigned char k[KV_MAX_SEQ * KV_MAX_BLOCKS * KV_BLOCK * 64];
    unsigned char v[KV_MAX_SEQ * KV_MAX_BLOCKS * KV_BLOCK * 64];
    int32_t table[KV_MAX_SEQ * KV_MAX_BLOCKS];
    int32_t seq[KV_MAX_TOK], pos[KV_MAX_TOK];
} TestKv;

/* A cache for heads of `width` = n_head_kv * head_dim elements.  Sequence s
** owns blocks in reverse order: its block b is pool block
** s * KV_MAX_BLOCKS + (KV_MAX_BLOCKS - 1 - b). */
static void kv_init(TestKv *t, int enc, int n_head_kv, int head_dim)
{
    memset(t, 0, sizeof *t);
    size_t esize = enc == RAD_ENC_F16 ? 2 : 4;
    assert_true((size_t)(n_head_kv * head_dim) * esize <= 64);
    for (int s = 0; s < KV_MAX_SEQ; s++)
        for (int b = 0; b < KV_MAX_BLOCKS; b++)
            t->table[s * KV_MAX_BLOCKS + b] = s * KV_MAX_BLOCKS + (KV_MAX_BLOCKS - 1 - b);
    t->view = (RadKvView){
        .k = t->k, .v = t->v, .enc = enc, .block_size = KV_BLOCK,
        .n_head_kv = n_head_kv, .head_dim = head_dim,
        .kv_row_bytes = (int64_t)(n_head_kv * head_dim) * (int64_t)esize,
        .n_seq = KV_MAX_SEQ, .max_blocks = KV_MAX_BLOCKS, .block_table = t->table,
        .token_seq = t->seq, .positions = t->pos,
    };
}

/* This step's rows: row m is sequence seq, position first + m. */
static void kv_rows(TestKv *t, int seq, int first, int n)
{
    t->view.n_tok = n;
    for (int m = 0; m < n; m++) {
        t->seq[m] = seq;
        t->pos[m] = first + m;
    }
}

static int kv_store(TestKv *t, float *k, float *v, int64_t M)
{
    Call c = call_new("kv_store", M);
    set_i(&c, "n_head_kv", t->view.n_head_kv);
    set_i(&c, "head_dim", t->view.head_dim);
    set_act(&c, "k", k, M, t->view.n_head_kv * t->view.head_dim);
    set_act(&c, "v", v, M, t->view.n_head_kv * t->view.head_dim);
    c.args.kv = &t->view;
    return run(&c);
}

typedef struct AttnCfg {
    int64_t n_head, n_head_kv, head_dim, window;
    double scale, softcap;
    float *sinks;
} AttnCfg;

static int attn(TestKv *t, const AttnCfg *a, float *q, float *out, int64_t M)
{
    int64_t width = a->n_head * a->head_dim;
    Call c = call_new("attn_paged", M);
    set_i(&c, "n_head", a->n_head);
    set_i(&c, "n_head_kv", a->n_head_kv);
    set_i(&c, "head_dim", a->head_dim);
    set_f(&c, "scale", a->scale);
    set_i(&c, "window", a->window);
    set_f(&c, "softcap", a->softcap);
    set_act(&c, "q", q, M, width);
    set_act(&c, "out", out, M, width);
    if (a->sinks) set_weight(&c, "sinks", a->sinks, RAD_ENC_F32, 0, a->n_head, 0);
    c.args.kv = &t->view;
    return run(&c);
}

/* Dense causal attention over packed K, V [T, n_head_kv * hd] in double:
** the definition written the obvious way. */
static void naive_attn(const AttnCfg *a, const float *q, const float *K, const float *V,
                       int T, double *out)
{
    int64_t hd = a->head_dim, kvw = a->n_head_kv * hd;
    for (int t = 0; t < T; t++)
        for (int64_t h = 0; h < a->n_head; h++) {
            int64_t g = h / (a->n_head / a->n_head_kv);
            double logit[KV_MAX_TOK], top = a->sinks ? a->sinks[h] : -INFINITY, denom = 0;
            int first = a->window && t - a->window + 1 > 0 ? t - (int)a->window + 1 : 0;
            for (int j = first; j <= t; j++) {
                double d = 0;
                for (int64_t i = 0; i < hd; i++)
                    d += (double)q[t * a->n_head * hd + h * hd + i] * K[j * kvw + g * hd + i];
                logit[j] = a->scale * d;
                if (a->softcap > 0) logit[j] = a->softcap * tanh(logit[j] / a->softcap);
                top = fmax(top, logit[j]);
            }
            if (a->sinks) denom = exp(a->sinks[h] - top);
            for (int j = first; j <= t; j++) denom += exp(logit[j] - top);
            for (int64_t i = 0; i < hd; i++) {
                double s = 0;
                for (int j = first; j <= t; j++) s += exp(logit[j] - top) * V[j * kvw + g * hd + i];
                out[t * a->n_head * hd + h * hd + i] = s / denom;
            }
        }
}

/* Prefill T rows of sequence 1 (spanning blocks) and compare attention
** with the naive definition, for a config. */
static void check_against_naive(const AttnCfg *a, int T, uint32_t seed)
{
    TestKv t;
    float K[KV_MAX_TOK * 16], V[KV_MAX_TOK * 16], q[KV_MAX_TOK * 32], out[KV_MAX_TOK * 32];
    double want[KV_MAX_TOK * 32];
    int64_t kvw = a->n_head_kv * a->head_dim, qw = a->n_head * a->head_dim;
    assert_true(kvw <= 16 && qw <= 32 && T <= KV_MAX_TOK);

    kv_init(&t, RAD_ENC_F32, (int)a->n_head_kv, (int)a->head_dim);
    fill(K, T * kvw, seed);
    fill(V, T * kvw, seed + 1);
    fill(q, T * qw, seed + 2);
    kv_rows(&t, 1, 0, T);
    assert_int_equal(kv_store(&t, K, V, T), RAD_OK);
    assert_int_equal(attn(&t, a, q, out, T), RAD_OK);
    naive_attn(a, q, K, V, T, want);
    for (int64_t i = 0; i < T * qw; i++) assert_close(out[i], want[i], 1e-6);
}

/* kv_store puts row m at the slot of (seq, pos) through the block table,
** converting to f16 with round-to-nearest-even; a missing block is
** RAD_E_RANGE and writes nothing. */
static void test_kv_store(void **state)
{
    (void)state;
    TestKv t;
    float k[2][2] = {{1.0f + 0x1p-11f, 1.0f + 0x3p-11f}, {65520.0f, 0x1p-24f}};
    float v[2][2] = {{-2.0f, 1e-8f}, {0.1f, -0.0f}};
    kv_init(&t, RAD_ENC_F16, 1, 2);
    t.seq[0] = 0, t.pos[0] = 5; /* block 1 -> pool block 2, slot 9 */
    t.seq[1] = 1, t.pos[1] = 0; /* block 0 -> pool block 7, slot 28 */
    t.view.n_tok = 2;
    assert_int_equal(kv_store(&t, &k[0][0], &v[0][0], 2), RAD_OK);

    const uint16_t *K = (const uint16_t *)t.k, *V = (const uint16_t *)t.v;
    assert_int_equal(K[9 * 2 + 0], 0x3C00); /* tie rounds to even: 1.0 */
    assert_int_equal(K[9 * 2 + 1], 0x3C02); /* tie rounds to even: 1 + 2^-9 */
    assert_int_equal(K[28 * 2 + 0], 0x7C00); /* past 65504 rounds to inf */
    assert_int_equal(K[28 * 2 + 1], 0x0001); /* smallest subnormal */
    assert_int_equal(V[9 * 2 + 0], 0xC000);
    assert_int_equal(V[9 * 2 + 1], 0x0000);   /* below half a subnormal */
    assert_int_equal(V[28 * 2 + 0], 0x2E66);  /* 0.1 */
    assert_int_equal(V[28 * 2 + 1], 0x8000);

    unsigned char before[sizeof t.k];
    memcpy(before, t.k, sizeof before);
    t.table[0 * KV_MAX_BLOCKS + 1] = -1;
    k[0][0] = 42.0f;
    assert_int_equal(kv_store(&t, &k[0][0], &v[0][0], 2), RAD_E_RANGE);
    assert_memory_equal(before, t.k, sizeof before);
}

/* f32 caches store the exact bits. */
static void test_kv_store_f32(void **state)
{
    (void)state;
    TestKv t;
    float k[4] = {0.1f, -3e-40f, 7.0f, 1e30f}, v[4] = {1, 2, 3, 4};
    kv_init(&t, RAD_ENC_F32, 2, 2);
    kv_rows(&t, 0, 6, 1); /* block 1 -> pool block 2, slot 10 */
    assert_int_equal(kv_store(&t, k, v, 1), RAD_OK);
    assert_memory_equal(t.k + 10 * 16, k, sizeof k);
    assert_memory_equal(t.v + 10 * 16, v, sizeof v);
}

/* One visible key: the output is that key's value, whatever the logit. */
static void test_attn_single_key(void **state)
{
    (void)state;
    TestKv t;
    float k[2] = {3, -1}, v[2] = {0.5f, -7}, q[2] = {10, 4}, out[2];
    AttnCfg a = {1, 1, 2, 0, 1.0, 0, NULL};
    kv_init(&t, RAD_ENC_F32, 1, 2);
    kv_rows(&t, 0, 0, 1);
    assert_int_equal(kv_store(&t, k, v, 1), RAD_OK);
    assert_int_equal(attn(&t, &a, q, out, 1), RAD_OK);
    assert_true(out[0] == 0.5f && out[1] == -7.0f);
}

/* Causal: a row never sees a later position, so changing a future key and
** value leaves every earlier row's output bit-identical. */
static void test_attn_causal(void **state)
{
    (void)state;
    TestKv t;
    enum { T = 6, W = 4 };
    float K[T * W], V[T * W], q[T * W], out1[T * W], out2[T * W];
    AttnCfg a = {1, 1, W, 0, 0.5, 0, NULL};
    fill(K, T * W, 10);
    fill(V, T * W, 11);
    fill(q, T * W, 12);
    kv_init(&t, RAD_ENC_F32, 1, W);
    kv_rows(&t, 0, 0, T);
    assert_int_equal(kv_store(&t, K, V, T), RAD_OK);
    assert_int_equal(attn(&t, &a, q, out1, T), RAD_OK);
    for (int i = 0; i < W; i++) K[5 * W + i] = 50.0f, V[5 * W + i] = 99.0f;
    assert_int_equal(kv_store(&t, K, V, T), RAD_OK);
    assert_int_equal(attn(&t, &a, q, out2, T), RAD_OK);
    assert_memory_equal(out1, out2, 5 * W * sizeof(float));
    assert_true(memcmp(out1 + 5 * W, out2 + 5 * W, W * sizeof(float)) != 0);
}

/* Against the naive definition: plain, GQA (4 query heads over 2 KV heads),
** a sliding window of 3, a soft-cap, and sinks; over 3 cache blocks. */
static void test_attn_naive(void **state)
{
    (void)state;
    float sinks[4] = {0.5f, -1.0f, 2.0f, 0.0f};
    check_against_naive(&(AttnCfg){2, 2, 4, 0, 0.5, 0, NULL}, 11, 20);
    check_against_naive(&(AttnCfg){4, 2, 4, 0, 0.7, 0, NULL}, 11, 30);
    check_against_naive(&(AttnCfg){4, 2, 4, 3, 0.7, 0, NULL}, 11, 40);
    check_against_naive(&(AttnCfg){2, 1, 8, 0, 3.0, 1.5, NULL}, 9, 50);
    check_against_naive(&(AttnCfg){4, 2, 4, 0, 0.7, 0, sinks}, 9, 60);
}

/* Sliding window: with window 2 the row at position p sees only p - 1 and
** p, so a change at p - 2 does not reach it. */
static void test_attn_window(void **state)
{
    (void)state;
    TestKv t;
    float K[4 * 2], V[4 * 2], q[4 * 2], out1[4 * 2], out2[4 * 2];
    AttnCfg a = {1, 1, 2, 2, 1.0, 0, NULL};
    fill(K, 8, 70);
    fill(V, 8, 71);
    fill(q, 8, 72);
    kv_init(&t, RAD_ENC_F32, 1, 2);
    kv_rows(&t, 0, 0, 4);
    assert_int_equal(kv_store(&t, K, V, 4), RAD_OK);
    assert_int_equal(attn(&t, &a, q, out1, 4), RAD_OK);
    K[2] = V[2] = 9.0f; /* position 1 */
    assert_int_equal(kv_store(&t, K, V, 4), RAD_OK);
    assert_int_equal(attn(&t, &a, q, out2, 4), RAD_OK);
    assert_memory_equal(out1 + 6, out2 + 6, 2 * sizeof(float)); /* position 3 */
    assert_true(memcmp(out1 + 4, out2 + 4, 2 * sizeof(float)) != 0); /* position 2 */
}

/* GQA: query heads 0, 1 read KV head 0 and heads 2, 3 read KV head 1; with
** constant values per KV head the outputs are those constants exactly. */
static void test_attn_gqa(void **state)
{
    (void)state;
    TestKv t;
    float K[3 * 4], V[3 * 4], q[3 * 8], out[3 * 8];
    AttnCfg a = {4, 2, 2, 0, 1.0, 0, NULL};
    fill(K, 12, 80);
    fill(q, 24, 81);
    for (int j = 0; j < 3; j++) V[4 * j] = V[4 * j + 1] = 1.0f, V[4 * j + 2] = V[4 * j + 3] = 2.0f;
    kv_init(&t, RAD_ENC_F32, 2, 2);
    kv_rows(&t, 0, 0, 3);
    assert_int_equal(kv_store(&t, K, V, 3), RAD_OK);
    assert_int_equal(attn(&t, &a, q, out, 3), RAD_OK);
    for (int m = 0; m < 3; m++)
        for (int i = 0; i < 8; i++) assert_true(out[8 * m + i] == (i < 4 ? 1.0f : 2.0f));
}

/* Soft-cap: logits become c * tanh(l / c) before the softmax; with values
** 1 and 0 the output is the first key's weight. */
static void test_attn_softcap(void **state)
{
    (void)state;
    TestKv t;
    float K[2] = {2, -1}, V[2] = {1, 0}, q[2] = {0, 1}, out[2];
    AttnCfg a = {1, 1, 1, 0, 1.0, 1.5, NULL};
    kv_init(&t, RAD_ENC_F32, 1, 1);
    kv_rows(&t, 0, 0, 2);
    assert_int_equal(kv_store(&t, K, V, 2), RAD_OK);
    assert_int_equal(attn(&t, &a, q, out, 2), RAD_OK);
    double l0 = 1.5 * tanh(2 / 1.5), l1 = 1.5 * tanh(-1 / 1.5);
    assert_close(out[1], exp(l0) / (exp(l0) + exp(l1)), 1e-7);
}

/* Sinks only add to the denominator: one key with logit 0 and a sink of
** ln 3 gives a quarter of the value; no sinks gives all of it. */
static void test_attn_sinks(void **state)
{
    (void)state;
    TestKv t;
    float K[2] = {0, 0}, V[2] = {4, -8}, q[2] = {1, 1}, out[2], sinks[1] = {(float)log(3.0)};
    AttnCfg a = {1, 1, 2, 0, 1.0, 0, sinks};
    kv_init(&t, RAD_ENC_F32, 1, 2);
    kv_rows(&t, 0, 0, 1);
    assert_int_equal(kv_store(&t, K, V, 1), RAD_OK);
    assert_int_equal(attn(&t, &a, q, out, 1), RAD_OK);
    assert_close(out[0], 1.0, 1e-6);
    assert_close(out[1], -2.0, 1e-6);
}

/* An f16 cache attends over the f16-rounded keys and values; a visible
** position without a block is RAD_E_RANGE. */
static void test_attn_f16_and_missing(void **state)
{
    (void)state;
    TestKv t;
    float K[2] = {0.1f, 0.3f}, V[2] = {0.1f, 0.2f}, q[2] = {1, 1}, out[2];
    AttnCfg a = {1, 1, 1, 0, 1.0, 0, NULL};
    kv_init(&t, RAD_ENC_F16, 1, 1);
    kv_rows(&t, 0, 0, 2);
    assert_int_equal(kv_store(&t, K, V, 2), RAD_OK);
    assert_int_equal(attn(&t, &a, q, out, 2), RAD_OK);
    double k0 = rad_f16_to_f32(rad_f32_to_f16(0.1f)), k1 = rad_f16_to_f32(rad_f32_to_f16(0.3f));
    double v0 = rad_f16_to_f32(rad_f32_to_f16(0.1f)), v1 = rad_f16_to_f32(rad_f32_to_f16(0.2f));
    assert_close(out[1], (exp(k0) * v0 + exp(k1) * v1) / (exp(k0) + exp(k1)), 1e-7);
    t.table[0] = -1;
    assert_int_equal(attn(&t, &a, q, out, 2), RAD_E_RANGE);
}

#define ATTENTION_TESTS                                                                     \
    cmocka_unit_test(test_kv_store), cmocka_unit_test(test_kv_store_f32),                 \
        cmocka_unit_test(test_attn_single_key), cmocka_unit_test(test_attn_causal),       \
        cmocka_unit_test(test_attn_naive), cmocka_unit_test(test_attn_window),            \
        cmocka_unit_test(test_attn_gqa), cmocka_unit_test(test_attn_softcap),             \
        cmocka_unit_test(test_attn_sinks), cmocka_unit_test(test_attn_f16_and_missing)
