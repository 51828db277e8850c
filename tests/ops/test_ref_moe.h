/*
** test_ref_moe.h: the mixture-of-experts ops on the reference kernels
** (router_topk, moe_gemm, moe_combine, sigmoid_gate) and clamp, part of test_ref.c.
**
** Each op is checked against a direct computation written here the other
** way round: the router by sorting every expert (qsort, index as the tie
** key) instead of ref's repeated selection; moe_gemm against gemm_nt on
** the chosen slice, bit for bit, since the contract is the same per-row
** accumulation; moe_combine against its sum.
*/
#ifndef TEST_REF_MOE_H
#define TEST_REF_MOE_H

#include <stdlib.h>

#include "../../kernels/ops/rad_op_values.h"

typedef struct Scored {
    double s;
    int e;
} Scored;

/* Larger score first, the lower expert index on a tie. */
static int by_score(const void *a, const void *b)
{
    const Scored *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    return x->e - y->e;
}

static Call router_call(int64_t M, int64_t E, int64_t k, int mode, int renorm, double scale, float *logits,
                        int32_t *ids, float *wts)
{
    Call c = call_new("router_topk", M);
    set_i(&c, "n_expert", E);
    set_i(&c, "k", k);
    set_i(&c, "mode", mode);
    set_i(&c, "renorm", renorm);
    set_f(&c, "scale", scale);
    set_act(&c, "logits", logits, M, E);
    RadTensor *t = &c.args.operand[operand_at(&c, "ids")];
    *t = (RadTensor){.data = ids, .enc = RAD_ENC_I32, .rank = 2, .shape = {M, k}, .row_bytes = k * 4};
    set_act(&c, "weights", wts, M, k);
    return c;
}

/* Softmax then top-k (Qwen3-MoE, OLMoE), with and without the
** renormalisation and a scale, on rows of 8 experts; ids come sorted by
** weight, weights equal the direct softmax within f32 rounding. */
static void test_router_softmax_topk(void **state)
{
    (void)state;
    enum { M = 5, E = 8, K = 3 };
    float logits[M][E];
    int32_t ids[M][K];
    float wts[M][K];
    fill(&logits[0][0], M * E, 71);
    for (int renorm = 0; renorm <= 1; renorm++) {
        double scale = renorm ? 2.5 : 1.0;
        Call c = router_call(M, E, K, RAD_ROUTER_SOFTMAX_TOPK, renorm, scale, &logits[0][0], &ids[0][0], &wts[0][0]);
        assert_int_equal(run(&c), RAD_OK);
        for (int m = 0; m < M; m++) {
            Scored s[E];
            double mx = -INFINITY, sum = 0, chosen = 0;
            for (int e = 0; e < E; e++) mx = fmax(mx, logits[m][e]);
            for (int e = 0; e < E; e++) {
                s[e] = (Scored){exp((double)logits[m][e] - mx), e};
                sum += s[e].s;
            }
            qsort(s, E, sizeof s[0], by_score);
            for (int j = 0; j < K; j++) chosen += s[j].s / sum;
            for (int j = 0; j < K; j++) {
                assert_int_equal(ids[m][j], s[j].e);
                double want = s[j].s / sum / (renorm ? chosen : 1.0) * scale;
                assert_close(wts[m][j], want, 2e-7);
            }
        }
    }
}

/* Top-k then softmax (gpt-oss): the k weights are a softmax over the k
** chosen logits alone and sum to 1. */
static void test_router_topk_softmax(void **state)
{
    (void)state;
    enum { M = 3, E = 6, K = 2 };
    float logits[M][E];
    int32_t ids[M][K];
    float wts[M][K];
    fill(&logits[0][0], M * E, 72);
    Call c = router_call(M, E, K, RAD_ROUTER_TOPK_SOFTMAX, 0, 1.0, &logits[0][0], &ids[0][0], &wts[0][0]);
    assert_int_equal(run(&c), RAD_OK);
    for (int m = 0; m < M; m++) {
        Scored s[E];
        for (int e = 0; e < E; e++) s[e] = (Scored){logits[m][e], e};
        qsort(s, E, sizeof s[0], by_score);
        double d = exp(s[1].s - s[0].s);
        assert_int_equal(ids[m][0], s[0].e);
        assert_int_equal(ids[m][1], s[1].e);
        assert_close(wts[m][0], 1 / (1 + d), 2e-7);
        assert_close(wts[m][1], d / (1 + d), 2e-7);
    }
}

/* Sigmoid scores with a correction bias (DeepSeek-V3): the bias decides
** which experts are chosen but the weights are the plain sigmoids; and
** group-limited choice keeps only the best groups (by their two best). */
static void test_router_sigmoid_groups(void **state)
{
    (void)state;
    enum { E = 8, K = 2 };
    /* expert 1 has the largest logit but a bias that sinks it */
    float logits[E] = {0.5f, 2.0f, 0.1f, -1.0f, 0.4f, 0.3f, 1.0f, 0.2f};
    float bias[E] = {0, -5, 0, 0, 0, 0, 0, 0};
    int32_t ids[K];
    float wts[K];
    Call c = router_call(1, E, K, RAD_ROUTER_SIGMOID, 0, 1.0, logits, ids, wts);
    set_weight(&c, "bias", bias, RAD_ENC_F32, 0, E, 0);
    assert_int_equal(run(&c), RAD_OK);
    assert_int_equal(ids[0], 6);
    assert_int_equal(ids[1], 0);
    assert_close(wts[0], 1 / (1 + exp(-1.0)), 2e-7);
    assert_close(wts[1], 1 / (1 + exp(-0.5)), 2e-7);

    /* four groups of two, the two groups whose best two sum highest kept:
    ** expert 2 has the best score of all, but its partner sinks group 1 */
    set_i(&c, "n_group", 4);
    set_i(&c, "topk_group", 2);
    set_i(&c, "renorm", 1);
    set_f(&c, "scale", 2.0);
    float logits2[E] = {0.0f, 1.5f, 3.0f, -3.0f, 0.8f, 0.7f, 0.6f, 0.5f};
    float bias2[E] = {0, -0.1f, 0, 0, 0, 0, 0.3f, 0.3f};
    set_act(&c, "logits", logits2, 1, E);
    set_weight(&c, "bias", bias2, RAD_ENC_F32, 0, E, 0);
    assert_int_equal(run(&c), RAD_OK);
    double sg[E];
    Scored all[E], groups[4], kept[4];
    for (int e = 0; e < E; e++) {
        sg[e] = 1 / (1 + exp(-(double)logits2[e]));
        all[e] = (Scored){sg[e] + bias2[e], e};
    }
    for (int g = 0; g < 4; g++) groups[g] = (Scored){all[2 * g].s + all[2 * g + 1].s, g};
    qsort(groups, 4, sizeof groups[0], by_score);
    for (int i = 0; i < 2; i++)
        for (int t = 0; t < 2; t++) kept[2 * i + t] = all[2 * groups[i].e + t];
    qsort(kept, 4, sizeof kept[0], by_score);
    Scored *s = kept;
    qsort(all, E, sizeof all[0], by_score);
    assert_int_equal(all[0].e, 2);              /* unlimited, expert 2 would win */
    assert_int_not_equal(ids[0], 2);
    double sum = sg[s[0].e] + sg[s[1].e];
    assert_close(wts[0], sg[s[0].e] / sum * 2.0, 2e-7);
    assert_close(wts[1], sg[s[1].e] / sum * 2.0, 2e-7);
}

/* Ties go to the lower expert index, in choice and in slot order; bad
** parameters are refused before anything is written. */
static void test_router_ties_and_refusals(void **state)
{
    (void)state;
    float logits[6] = {0.25f, 1.0f, 0.25f, 1.0f, -2.0f, 1.0f};
    int32_t ids[3] = {-7, -7, -7};
    float wts[3];
    Call c = router_call(1, 6, 3, RAD_ROUTER_SOFTMAX_TOPK, 1, 1.0, logits, ids, wts);
    assert_int_equal(run(&c), RAD_OK);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 5);
    for (int j = 0; j < 3; j++) assert_close(wts[j], 1.0 / 3.0, 1e-7);
    set_i(&c, "k", 2);
    assert_int_equal(run(&c), RAD_OK);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);

    ids[0] = ids[1] = ids[2] = -7;
    set_i(&c, "k", 7);                          /* more than the experts */
    assert_int_equal(run(&c), RAD_E_SHAPE);
    set_i(&c, "k", 0);
    assert_int_equal(run(&c), RAD_E_SHAPE);
    set_i(&c, "k", 2);
    set_i(&c, "mode", 9);
    assert_int_equal(run(&c), RAD_E_UNSUPPORTED);
    set_i(&c, "mode", RAD_ROUTER_SOFTMAX_TOPK);
    set_f(&c, "scale", 0.0);
    assert_int_equal(run(&c), RAD_E_ARG);
    set_f(&c, "scale", 1.0);
    set_i(&c, "n_group", 4);                    /* 6 experts do not split in 4 */
    set_i(&c, "topk_group", 1);
    assert_int_equal(run(&c), RAD_E_SHAPE);
    set_i(&c, "n_group", 3);
    set_i(&c, "topk_group", 4);                 /* more groups kept than exist */
    assert_int_equal(run(&c), RAD_E_ARG);
    set_i(&c, "n_group", 0);
    logits[4] = NAN;
    assert_int_equal(run(&c), RAD_E_ARG);
    for (int j = 0; j < 3; j++) assert_int_equal(ids[j], -7);      /* nothing written */
}

/* A stacked weight [E, N, K] in operand `name`, contiguous. */
static void set_stacked(Call *c, const char *name, const void *data, int enc, int64_t E, int64_t N, int64_t K)
{
    RadTensor *t = &c->args.operand[operand_at(c, name)];
    int64_t rb = rad_encoding_row_bytes(enc, K);
    *t = (RadTensor){.data = (void *)data, .enc = enc, .rank = N ? 3 : 2, .row_bytes = rb, .n_slices = E};
    t->shape[0] = E;
    t->shape[1] = N ? N : K;
    t->shape[2] = N ? K : 0;
    t->slice_bytes = N ? N * rb : rb;
}

static Call moe_gemm_call(int64_t M, int64_t k, int64_t N, int64_t K, int enc, int per_slot, float *x,
                          int32_t *ids, const void *w, int64_t E, float *out)
{
    Call c = call_new("moe_gemm", M);
    set_i(&c, "k", k);
    set_i(&c, "N", N);
    set_i(&c, "K", K);
    set_i(&c, "enc", enc);
    set_i(&c, "x_per_slot", per_slot);
    set_act(&c, "x", x, per_slot ? M * k : M, K);
    RadTensor *t = &c.args.operand[operand_at(&c, "ids")];
    *t = (RadTensor){.data = ids, .enc = RAD_ENC_I32, .rank = 2, .shape = {M, k}, .row_bytes = k * 4};
    set_stacked(&c, "w", w, enc, E, N, K);
    set_act(&c, "out", out, M * k, N);
    return c;
}

/* Row m's slot j is gemm_nt of its input row with slice ids[m][j], bit for
** bit (and plus that slice's bias), for f32 and q8_0 experts, shared and
** per-slot inputs; experts given as separate slices read the same as the
** contiguous stack. */
static void test_moe_gemm(void **state)
{
    (void)state;
    enum { M = 3, KU = 2, E = 4, N = 5, K = 64 };
    static float w[E][N][K], x[M * KU][K], bias[E][N], out[M * KU][N], want[N];
    static unsigned char wq[E][N][2 * 34];
    int32_t ids[M][KU] = {{2, 0}, {3, 2}, {1, 1}};
    fill(&w[0][0][0], E * N * K, 81);
    fill(&x[0][0], M * KU * K, 82);
    fill(&bias[0][0], E * N, 83);
    for (int e = 0; e < E; e++)
        for (int n = 0; n < N; n++)
            for (int b = 0; b < 2; b++) {
                int8_t qs[32];
                for (int i = 0; i < 32; i++) qs[i] = (int8_t)((e * 7 + n * 3 + b + i * 5) % 255 - 127);
                q8_0_block(wq[e][n] + 34 * b, (uint16_t)(0x2000 + 64 * e + n), qs);
            }
    for (int pass = 0; pass < 4; pass++) {
        int enc = pass & 1 ? RAD_ENC_Q8_0 : RAD_ENC_F32;
        int per_slot = pass >= 2;
        const void *wd = enc == RAD_ENC_F32 ? (const void *)w : (const void *)wq;
        int64_t rb = rad_encoding_row_bytes(enc, K);
        Call c = moe_gemm_call(M, KU, N, K, enc, per_slot, &x[0][0], &ids[0][0], wd, E, &out[0][0]);
        if (pass == 3) set_stacked(&c, "bias", bias, RAD_ENC_F32, E, 0, N);
        assert_int_equal(run(&c), RAD_OK);
        for (int m = 0; m < M; m++)
            for (int j = 0; j < KU; j++) {
                Call g = call_new("gemm_nt", 1);
                set_i(&g, "N", N);
                set_i(&g, "K", K);
                set_i(&g, "enc", enc);
                set_act(&g, "x", x[per_slot ? m * KU + j : m], 1, K);
                set_weight(&g, "w", (const char *)wd + ids[m][j] * N * rb, enc, N, K, rb);
                if (pass == 3) set_weight(&g, "bias", bias[ids[m][j]], RAD_ENC_F32, 0, N, 0);
                set_act(&g, "out", want, 1, N);
                assert_int_equal(run(&g), RAD_OK);
                assert_memory_equal(out[m * KU + j], want, sizeof want);
            }
    }

    /* the same experts, each given its own address, in reverse order in memory */
    static float apart[E][N][K], got[M * KU][N];
    const void *slices[E];
    for (int e = 0; e < E; e++) {
        memcpy(apart[E - 1 - e], w[e], sizeof w[e]);
        slices[e] = apart[E - 1 - e];
    }
    Call c = moe_gemm_call(M, KU, N, K, RAD_ENC_F32, 0, &x[0][0], &ids[0][0], w, E, &out[0][0]);
    assert_int_equal(run(&c), RAD_OK);
    c.args.operand[operand_at(&c, "w")].data = NULL;
    c.args.operand[operand_at(&c, "w")].slices = slices;
    set_act(&c, "out", &got[0][0], M * KU, N);
    assert_int_equal(run(&c), RAD_OK);
    assert_memory_equal(got, out, sizeof got);
    assert_int_equal(find_row("moe_gemm")->slices_ok, 1);
}

/* An id outside the stack is RAD_E_RANGE with nothing written; a stack
** whose slices do not match the parameters is RAD_E_SHAPE; the encoding
** must be the one `enc` names. */
static void test_moe_gemm_refusals(void **state)
{
    (void)state;
    enum { E = 3, N = 2, K = 4 };
    float w[E][N][K] = {{{0}}}, x[2][K] = {{0}}, out[4][N];
    int32_t ids[2][2] = {{0, 2}, {3, 1}};
    for (int i = 0; i < 4 * N; i++) (&out[0][0])[i] = 7;
    Call c = moe_gemm_call(2, 2, N, K, RAD_ENC_F32, 0, &x[0][0], &ids[0][0], w, E, &out[0][0]);
    assert_int_equal(run(&c), RAD_E_RANGE);
    for (int i = 0; i < 4 * N; i++) assert_true((&out[0][0])[i] == 7);
    ids[1][0] = -1;
    assert_int_equal(run(&c), RAD_E_RANGE);
    ids[1][0] = 1;
    assert_int_equal(run(&c), RAD_OK);
    set_i(&c, "N", 3);                          /* slices are [2, 4] */
    assert_int_equal(run(&c), RAD_E_SHAPE);
    set_i(&c, "N", N);
    c.args.operand[operand_at(&c, "w")].n_slices = 0;   /* a stack must state its slices */
    assert_int_equal(run(&c), RAD_E_SHAPE);
    c.args.operand[operand_at(&c, "w")].n_slices = E;
    set_i(&c, "enc", RAD_ENC_F16);
    assert_int_equal(run(&c), RAD_E_ARG);
}

/* moe_combine: each row is the weighted sum of its k slot rows. */
static void test_moe_combine(void **state)
{
    (void)state;
    enum { M = 3, KU = 4, N = 7 };
    float y[M * KU][N], wts[M][KU], out[M][N];
    fill(&y[0][0], M * KU * N, 91);
    fill(&wts[0][0], M * KU, 92);
    Call c = call_new("moe_combine", M);
    set_i(&c, "k", KU);
    set_i(&c, "N", N);
    set_act(&c, "y", &y[0][0], M * KU, N);
    set_act(&c, "weights", &wts[0][0], M, KU);
    set_act(&c, "out", &out[0][0], M, N);
    assert_int_equal(run(&c), RAD_OK);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double want = 0;
            for (int j = 0; j < KU; j++) want += (double)wts[m][j] * y[m * KU + j][n];
            assert_true(out[m][n] == (float)want);
        }
    set_act(&c, "y", &y[0][0], M * KU - 1, N);  /* too few slot rows */
    assert_int_equal(run(&c), RAD_E_SHAPE);
}

/* clamp bounds every element, keeps NaN, refuses lo > hi. */
static void test_clamp(void **state)
{
    (void)state;
    float x[6] = {-9, -1.5f, 0.25f, 1.5f, 9, NAN};
    Call c = call_new("clamp", 1);
    set_i(&c, "N", 6);
    set_f(&c, "lo", -1.5);
    set_f(&c, "hi", 1.0);
    set_act(&c, "x", x, 1, 6);
    assert_int_equal(run(&c), RAD_OK);
    assert_true(x[0] == -1.5f && x[1] == -1.5f && x[2] == 0.25f && x[3] == 1.0f && x[4] == 1.0f);
    assert_true(isnan(x[5]));
    set_f(&c, "lo", 2.0);
    assert_int_equal(run(&c), RAD_E_ARG);
}

/* swiglu_oai: the gate clamped from above only, the up clamped both ways,
** alpha inside the sigmoid, the + 1 on the up; a NaN passes; a limit that
** is not positive is refused. */
static void test_swiglu_oai(void **state)
{
    (void)state;
    float g[7] = {-40, -2, -0.5f, 0, 1.25f, 6.5f, 9}, u[7] = {-9, -3, 0.5f, 2, -1, 8, NAN}, out[7];
    const double alpha = 1.702, limit = 7.0;
    Call c = call_new("swiglu_oai", 1);
    set_i(&c, "N", 7);
    set_f(&c, "alpha", alpha);
    set_f(&c, "limit", limit);
    set_act(&c, "gate", g, 1, 7);
    set_act(&c, "up", u, 1, 7);
    set_act(&c, "out", out, 1, 7);
    assert_int_equal(run(&c), RAD_OK);
    for (int i = 0; i < 6; i++) {
        double x = g[i] > limit ? limit : g[i], y = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        assert_close(out[i], x / (1 + exp(-(double)(float)alpha * x)) * (y + 1), 1e-7);
    }
    assert_true(isnan(out[6]));                 /* a NaN up: NaN out */
    assert_true(out[5] == (float)(6.5 / (1 + exp(-(double)(float)alpha * 6.5)) * 8.0));  /* up clamped to 7 */
    set_f(&c, "limit", 0.0);
    assert_int_equal(run(&c), RAD_E_ARG);
}

/* sigmoid_gate: each row times f32(sigmoid(its gate)), one f32 multiply;
** -inf and +inf gates give 0 and the row itself, a NaN gate NaN; in place
** is allowed; a gate operand with fewer rows than M is refused. */
static void test_sigmoid_gate(void **state)
{
    (void)state;
    float x[4][3] = {{1, -2, 0.5f}, {3, 4, -5}, {-1, 2, 7}, {6, -0.25f, 1}}, out[4][3];
    float g[4][2] = {{0.75f, 99}, {-INFINITY, 99}, {INFINITY, 99}, {NAN, 99}};   /* stride 2: column 1 unread */
    Call c = call_new("sigmoid_gate", 4);
    set_i(&c, "N", 3);
    set_act(&c, "x", &x[0][0], 4, 3);
    set_act_strided(&c, "g", &g[0][0], 4, 1, 2);
    set_act(&c, "out", &out[0][0], 4, 3);
    assert_int_equal(run(&c), RAD_OK);
    const float s = (float)(1.0 / (1.0 + exp(-0.75)));
    for (int i = 0; i < 3; i++) {
        assert_true(out[0][i] == s * x[0][i]);
        assert_true(out[1][i] == 0.0f);
        assert_true(out[2][i] == x[2][i]);
        assert_true(isnan(out[3][i]));
    }
    set_act(&c, "out", &x[0][0], 4, 3);         /* in place */
    assert_int_equal(run(&c), RAD_OK);
    assert_true(x[0][1] == s * -2.0f && x[2][2] == 7.0f);
    set_act_strided(&c, "g", &g[0][0], 3, 1, 2);
    assert_int_equal(run(&c), RAD_E_SHAPE);
}

#define MOE_TESTS                                                                              \
    cmocka_unit_test(test_router_softmax_topk), cmocka_unit_test(test_router_topk_softmax),    \
        cmocka_unit_test(test_router_sigmoid_groups), cmocka_unit_test(test_router_ties_and_refusals), \
        cmocka_unit_test(test_moe_gemm), cmocka_unit_test(test_moe_gemm_refusals),             \
        cmocka_unit_test(test_moe_combine), cmocka_unit_test(test_clamp), \
        cmocka_unit_test(test_swiglu_oai), cmocka_unit_test(test_sigmoid_gate)

#endif /* TEST_REF_MOE_H */
