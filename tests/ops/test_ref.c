/*
** test_ref.c: the semantics of every op, pinned on the reference kernels.
**
** kernels/ref defines what each op of docs/OPS.md computes, and every fast
** kernel is later measured against it; so these tests check ref itself
** against hand-computed values and naive formulas on shapes small enough to
** reason about.  Every call goes through the exported rad_kernel_library
** table (ref_harness.h), as the core's would.  The rope, attention, GEMM,
** weight-encoding and mixture-of-experts tests live in test_ref_rope.h,
** test_ref_attention.h, test_ref_gemm.h, test_ref_encodings.h and
** test_ref_moe.h, included below, so this one
** file is still the whole test program.
*/
#include <math.h>

#include "ref_harness.h"

#include "../../base/rad_half.h"
#include "../../kernels/ops/rad_dequant.h"
#include "../../kernels/ops/rad_ops.h"

/* ------------------------------------------------------------- library */

/* The export: ABI version, name, one schema and one row per op, M ranged and
** first everywhere, constraints naming real parameters. */
static void test_library_shape(void **state)
{
    (void)state;
    const RadKernelLibrary *lib = &rad_kernel_library;
    assert_int_equal(lib->abi_version, RAD_KERNEL_ABI_VERSION);
    assert_string_equal(lib->name, "ref");
    assert_int_equal(lib->n_schemas, rad_op_schema_count);
    assert_int_equal(lib->n_rows, lib->n_schemas);       /* one row per op */
    for (int i = 0; i < lib->n_schemas; i++) {
        const RadOpSchema *s = &lib->schemas[i];
        int ranged = 0;
        for (int p = 0; p < s->n_params; p++) ranged += s->params[p].type == RAD_PARAM_RANGE;
        assert_int_equal(ranged, 1);
        assert_string_equal(s->params[0].name, "M");
        assert_int_equal(s->params[0].type, RAD_PARAM_RANGE);
        const RadKernelRow *r = find_row(s->op);
        assert_int_equal(r->priority, 0);
        assert_int_equal(r->domain, RAD_DOMAIN_HOST);
        assert_non_null(r->launch);
        Call c = call_new(s->op, 1);
        for (int k = 0; k < r->n_constraints; k++) param_at(&c, r->constraints[k].param);
    }
    /* every row: an op with a schema, a name no other row has, and the
    ** launch find_row found for its op */
    for (int i = 0; i < lib->n_rows; i++) {
        const RadKernelRow *r = &lib->rows[i];
        assert_non_null(find_schema(r->op));
        assert_int_equal(r->priority, 0);
        assert_int_equal(r->domain, RAD_DOMAIN_HOST);
        assert_true(r->launch == find_row(r->op)->launch);
        for (int j = 0; j < i; j++) assert_string_not_equal(r->name, lib->rows[j].name);
    }
    assert_int_equal(find_row("attn_paged")->kv_block_size, 16);
    assert_int_equal(find_row("gemm_nt")->n_constraints, 1);
    assert_int_equal(find_row("logits_gemm")->constraints[0].kind, RAD_C_IN);
}

/* The vocabulary itself: each op's parameter and operand names, in order. */
static void test_schema_table(void **state)
{
    (void)state;
    static const char *want[][2] = {
        {"embed_lookup", "M N | ids table out"},
        {"rmsnorm", "M N eps w_offset | x w out"},
        {"rmsnorm_add", "M N eps w_offset | x d w out"},
        {"add", "M N | a b out"},
        {"mul", "M N | a b out"},
        {"scale_rows", "M N scale | x"},
        {"silu_mul", "M N | gate up out"},
        {"gelu_mul", "M N | gate up out"},
        {"rope", "M n_head head_dim n_rot mode theta scaling factor low_freq_factor "
                 "high_freq_factor orig_ctx beta_fast beta_slow attn_factor truncate | x positions freq_factors"},
        {"qk_norm", "M n_head head_dim eps w_offset | x w"},
        {"kv_store", "M n_head_kv head_dim | k v kv"},
        {"attn_paged", "M n_head n_head_kv head_dim scale window softcap | q kv out sinks"},
        {"gemm_nt", "M N K enc | x w bias out"},
        {"gather_rows", "M N | x idx out"},
        {"logits_gemm", "M N K enc softcap | x w out"},
        {"router_topk", "M n_expert k mode renorm scale n_group topk_group | logits bias ids weights"},
        {"moe_gemm", "M k N K enc x_per_slot | x ids w bias out"},
        {"moe_combine", "M k N | y weights out"},
        {"clamp", "M N lo hi | x"},
        {"swiglu_oai", "M N alpha limit | gate up out"},
        {"sigmoid_gate", "M N | x g out"},
    };
    assert_int_equal(sizeof want / sizeof want[0], rad_op_schema_count);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const RadOpSchema *s = &rad_op_schemas[i];
        char got[256] = "";
        for (int p = 0; p < s->n_params; p++) {
            strcat(got, s->params[p].name);
            strcat(got, p + 1 < s->n_params ? " " : " |");
        }
        for (int o = 0; o < s->n_operands; o++) {
            strcat(got, " ");
            strcat(got, s->operands[o].name);
        }
        assert_string_equal(s->op, want[i][0]);
        assert_string_equal(got, want[i][1]);
    }
    assert_int_equal(find_schema("attn_paged")->operands[3].optional, 1);
    assert_int_equal(find_schema("gemm_nt")->operands[2].optional, 1);
    assert_int_equal(find_schema("router_topk")->operands[1].optional, 1);
    assert_int_equal(find_schema("moe_gemm")->operands[3].optional, 1);
    assert_int_equal(find_schema("moe_gemm")->operands[1].role, RAD_ROLE_INDEX);
}

/* Zero rows is not a call: every op refuses M == 0 with RAD_E_SHAPE. */
static void test_zero_rows(void **state)
{
    (void)state;
    for (int i = 0; i < rad_kernel_library.n_rows; i++) {
        Call c = call_new(rad_kernel_library.rows[i].op, 0);
        assert_int_equal(run(&c), RAD_E_SHAPE);
    }
}

/* ------------------------------------------------------------- dequant */

/* f16 and bf16 decode to the exact values their bits name. */
static void test_dequant_halves(void **state)
{
    (void)state;
    const uint16_t h[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x3555, 0x7C00};
    const float hv[] = {1.0f, -2.0f, 65504.0f, 0x1p-24f, 0.333251953125f, INFINITY};
    const uint16_t b[] = {0x3F80, 0xC040, 0x4049, 0x0000};
    const float bv[] = {1.0f, -3.0f, 3.140625f, 0.0f};
    float out[6];

    assert_int_equal(rad_dequant_row(RAD_ENC_F16, h, out, 6), RAD_OK);
    for (int i = 0; i < 6; i++) assert_true(out[i] == hv[i]);
    assert_int_equal(rad_dequant_row(RAD_ENC_BF16, b, out, 4), RAD_OK);
    for (int i = 0; i < 4; i++) assert_true(out[i] == bv[i]);
}

/* Build one q8_0 block: d as f16 (little-endian), then 32 int8 quants. */
static void q8_0_block(unsigned char *blk, uint16_t d, const int8_t *qs)
{
    blk[0] = (unsigned char)(d & 0xff);
    blk[1] = (unsigned char)(d >> 8);
    memcpy(blk + 2, qs, 32);
}

/* q8_0 is d * q exactly; part blocks and other encodings are refused. */
static void test_dequant_q8_0(void **state)
{
    (void)state;
    unsigned char blk[34];
    int8_t qs[32];
    float out[32];
    for (int j = 0; j < 32; j++) qs[j] = (int8_t)(j == 0 ? -128 : j == 31 ? 127 : j - 16);
    q8_0_block(blk, 0x3800, qs); /* d = 0.5 */

    assert_int_equal(rad_dequant_row(RAD_ENC_Q8_0, blk, out, 32), RAD_OK);
    assert_true(out[0] == -64.0f);
    assert_true(out[31] == 63.5f);
    for (int j = 1; j < 31; j++) assert_true(out[j] == 0.5f * (float)(j - 16));
    assert_int_equal(rad_dequant_row(RAD_ENC_Q8_0, blk, out, 31), RAD_E_SHAPE);
    assert_int_equal(rad_dequant_row(RAD_ENC_FP8_E4M3, blk, out, 32), RAD_E_UNSUPPORTED);
}

/* ------------------------------------------------------- copies by index */

/* embed_lookup copies f32 rows exactly and decodes f16 rows, honouring the
** table's row stride. */
static void test_embed_lookup(void **state)
{
    (void)state;
    float table[4][5]; /* vocab 4, N 3, padded to 5 */
    uint16_t table16[4][3];
    int32_t ids[3] = {2, 0, 2};
    float out[3][3];
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 3; k++) {
            table[r][k] = (float)(10 * r + k) + 0.25f;
            table16[r][k] = rad_f32_to_f16(table[r][k]);
        }

    Call c = call_new("embed_lookup", 3);
    set_i(&c, "N", 3);
    set_index(&c, "ids", ids, 3);
    set_weight(&c, "table", table, RAD_ENC_F32, 4, 3, sizeof table[0]);
    set_act(&c, "out", &out[0][0], 3, 3);
    assert_int_equal(run(&c), RAD_OK);
    for (int m = 0; m < 3; m++) assert_memory_equal(out[m], table[ids[m]], 3 * sizeof(float));

    set_weight(&c, "table", table16, RAD_ENC_F16, 4, 3, sizeof table16[0]);
    assert_int_equal(run(&c), RAD_OK);
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 3; k++) assert_true(out[m][k] == table[ids[m]][k]);
}

/* A token id outside [0, vocab) is RAD_E_RANGE, and nothing is written. */
static void test_embed_out_of_range(void **state)
{
    (void)state;
    float table[4][2] = {{0}}, out[2][2] = {{7, 7}, {7, 7}};
    int32_t ids[2] = {1, 4};

    Call c = call_new("embed_lookup", 2);
    set_i(&c, "N", 2);
    set_index(&c, "ids", ids, 2);
    set_weight(&c, "table", table, RAD_ENC_F32, 4, 2, sizeof table[0]);
    set_act(&c, "out", &out[0][0], 2, 2);
    assert_int_equal(run(&c), RAD_E_RANGE);
    ids[1] = -1;
    assert_int_equal(run(&c), RAD_E_RANGE);
    assert_true(out[0][0] == 7 && out[1][1] == 7);
    ids[1] = 3;
    set_weight(&c, "table", table, RAD_ENC_FP8_E4M3, 4, 2, sizeof table[0]);
    assert_int_equal(run(&c), RAD_E_UNSUPPORTED);
}

/* gather_rows picks rows by index, exactly; an index past x is RAD_E_RANGE. */
static void test_gather_rows(void **state)
{
    (void)state;
    float x[4][2] = {{1, 2}, {3, 4}, {5, 6}, {7, 8}}, out[2][2];
    int32_t idx[2] = {3, 1};

    Call c = call_new("gather_rows", 2);
    set_i(&c, "N", 2);
    set_act(&c, "x", &x[0][0], 4, 2);
    set_index(&c, "idx", idx, 2);
    set_act(&c, "out", &out[0][0], 2, 2);
    assert_int_equal(run(&c), RAD_OK);
    assert_memory_equal(out[0], x[3], sizeof out[0]);
    assert_memory_equal(out[1], x[1], sizeof out[1]);
    idx[0] = 4;
    assert_int_equal(run(&c), RAD_E_RANGE);
}

/* --------------------------------------------------------------- norms */

/* Run rmsnorm over M rows of N with an f32 weight; out may be x. */
static int rmsnorm(float *x, float *out, int64_t M, int64_t N, const void *w, int enc, double eps,
                   double w_offset)
{
    Call c = call_new("rmsnorm", M);
    set_i(&c, "N", N);
    set_f(&c, "eps", eps);
    set_f(&c, "w_offset", w_offset);
    set_act(&c, "x", x, M, N);
    set_weight(&c, "w", w, enc, 0, N, 0);
    set_act(&c, "out", out, M, N);
    return run(&c);
}

/* rmsnorm: x / sqrt(mean(x^2) + eps) * w, on a hand-worked row. */
static void test_rmsnorm_value(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 0.5f, 2, -1}, out[4];
    assert_int_equal(rmsnorm(x, out, 1, 4, w, RAD_ENC_F32, 0.0, 0.0), RAD_OK);
    double r = 1.0 / sqrt(7.5); /* mean of squares = 30 / 4 */
    for (int i = 0; i < 4; i++) assert_close(out[i], x[i] * r * w[i], 1e-7);

    float z[4] = {0}, zo[4];
    assert_int_equal(rmsnorm(z, zo, 1, 4, w, RAD_ENC_F32, 1e-5, 0.0), RAD_OK);
    for (int i = 0; i < 4; i++) assert_true(zo[i] == 0.0f);
}

/* w_offset = 1 is Gemma's (1 + w): zero weights then act as ones; bf16
** weights decode before use; out may alias x. */
static void test_rmsnorm_offset_alias(void **state)
{
    (void)state;
    float x[2][3] = {{1, -2, 0.5f}, {3, 3, 3}}, ones[3] = {1, 1, 1}, zeros[3] = {0};
    uint16_t ones16[3] = {0x3F80, 0x3F80, 0x3F80};
    float a[2][3], b[2][3], y[2][3];

    assert_int_equal(rmsnorm(&x[0][0], &a[0][0], 2, 3, ones, RAD_ENC_F32, 1e-6, 0.0), RAD_OK);
    assert_int_equal(rmsnorm(&x[0][0], &b[0][0], 2, 3, zeros, RAD_ENC_F32, 1e-6, 1.0), RAD_OK);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(rmsnorm(&x[0][0], &b[0][0], 2, 3, ones16, RAD_ENC_BF16, 1e-6, 0.0), RAD_OK);
    assert_memory_equal(a, b, sizeof a);
    memcpy(y, x, sizeof y);
    assert_int_equal(rmsnorm(&y[0][0], &y[0][0], 2, 3, ones, RAD_ENC_F32, 1e-6, 0.0), RAD_OK);
    assert_memory_equal(a, y, sizeof a);
    assert_close(a[1][0], 1.0, 1e-6); /* a constant row normalises to ones */
}

/* rmsnorm_add: the residual becomes x + d (exact f32 adds) and out is its
** rmsnorm. */
static void test_rmsnorm_add(void **state)
{
    (void)state;
    float x[2][4], d[2][4], sum[2][4], w[4] = {0.5f, 1, 1.5f, 2}, out[2][4], want[2][4];
    fill(&x[0][0], 8, 1);
    fill(&d[0][0], 8, 2);
    for (int i = 0; i < 8; i++) (&sum[0][0])[i] = (&x[0][0])[i] + (&d[0][0])[i];

    Call c = call_new("rmsnorm_add", 2);
    set_i(&c, "N", 4);
    set_f(&c, "eps", 1e-5);
    set_f(&c, "w_offset", 0.0);
    set_act(&c, "x", &x[0][0], 2, 4);
    set_act(&c, "d", &d[0][0], 2, 4);
    set_weight(&c, "w", w, RAD_ENC_F32, 0, 4, 0);
    set_act(&c, "out", &out[0][0], 2, 4);
    assert_int_equal(run(&c), RAD_OK);
    assert_memory_equal(x, sum, sizeof x);
    assert_int_equal(rmsnorm(&sum[0][0], &want[0][0], 2, 4, w, RAD_ENC_F32, 1e-5, 0.0), RAD_OK);
    assert_memory_equal(out, want, sizeof out);
}

/* qk_norm normalises each head's slice on its own, with the shared
** head_dim weight. */
static void test_qk_norm(void **state)
{
    (void)state;
    float x[8] = {1, 2, 3, 4, 10, 20, 30, 40}, w[4] = {1, 2, 3, 4}, want[4];
    assert_int_equal(rmsnorm(x, want, 1, 4, w, RAD_ENC_F32, 0.0, 0.0), RAD_OK);

    Call c = call_new("qk_norm", 1);
    set_i(&c, "n_head", 2);
    set_i(&c, "head_dim", 4);
    set_f(&c, "eps", 0.0);
    set_f(&c, "w_offset", 0.0);
    set_act(&c, "x", x, 1, 8);
    set_weight(&c, "w", w, RAD_ENC_F32, 0, 4, 0);
    assert_int_equal(run(&c), RAD_OK);
    for (int i = 0; i < 4; i++) {
        assert_true(x[i] == want[i]);
        assert_close(x[4 + i], want[i], 1e-7); /* scale-invariant: same row */
    }
}

/* --------------------------------------------------------- elementwise */

/* Run a three-operand elementwise op over one row of n. */
static int binary(const char *op, float *a, float *b, float *out, int64_t n)
{
    int gated = strcmp(op, "silu_mul") == 0 || strcmp(op, "gelu_mul") == 0;
    Call c = call_new(op, 1);
    set_i(&c, "N", n);
    set_act(&c, gated ? "gate" : "a", a, 1, n);
    set_act(&c, gated ? "up" : "b", b, 1, n);
    set_act(&c, "out", out, 1, n);
    return run(&c);
}

/* add and mul are the f32 operations exactly, with out aliasing an input;
** scale_rows multiplies by the scale rounded to f32. */
static void test_add_mul_scale(void **state)
{
    (void)state;
    float a[6], b[6], out[6], y[6];
    fill(a, 6, 3);
    fill(b, 6, 4);
    assert_int_equal(binary("add", a, b, out, 6), RAD_OK);
    for (int i = 0; i < 6; i++) assert_true(out[i] == a[i] + b[i]);
    memcpy(y, a, sizeof y);
    assert_int_equal(binary("mul", y, b, y, 6), RAD_OK);
    for (int i = 0; i < 6; i++) assert_true(y[i] == a[i] * b[i]);

    float x[2][4];
    fill(&x[0][0], 8, 5);
    memcpy(y, x, sizeof y);
    Call c = call_new("scale_rows", 2);
    set_i(&c, "N", 3);
    set_f(&c, "scale", 0.1);
    set_act_strided(&c, "x", &x[0][0], 2, 3, 4);
    assert_int_equal(run(&c), RAD_OK);
    for (int i = 0; i < 3; i++) assert_true(x[0][i] == y[i] * 0.1f);
    assert_true(x[0][3] == y[3]); /* padding between rows is untouched */
}

/* silu_mul and gelu_mul (tanh form) against the formulas, including gates
** large enough to overflow a naive exp. */
static void test_gated(void **state)
{
    (void)state;
    float g[6] = {-100, -3, -0.5f, 0, 0.7f, 100}, u[6] = {2, -1, 3, 5, 0.25f, -2}, out[6];

    assert_int_equal(binary("silu_mul", g, u, out, 6), RAD_OK);
    for (int i = 0; i < 6; i++) assert_close(out[i], g[i] / (1 + exp(-(double)g[i])) * u[i], 1e-7);
    assert_true(isfinite(out[0]));

    assert_int_equal(binary("gelu_mul", g, u, out, 6), RAD_OK);
    for (int i = 0; i < 6; i++) {
        double x = g[i];
        double k = sqrt(2 / 3.14159265358979323846);
        double want = 0.5 * x * (1 + tanh(k * (x + 0.044715 * x * x * x))) * u[i];
        assert_close(out[i], want, 1e-7);
    }
}

#include "test_ref_rope.h"
#include "test_ref_attention.h"
#include "test_ref_gemm.h"
#include "test_ref_encodings.h"
#include "test_ref_moe.h"

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_shape),
        cmocka_unit_test(test_schema_table),
        cmocka_unit_test(test_zero_rows),
        cmocka_unit_test(test_dequant_halves),
        cmocka_unit_test(test_dequant_q8_0),
        cmocka_unit_test(test_embed_lookup),
        cmocka_unit_test(test_embed_out_of_range),
        cmocka_unit_test(test_gather_rows),
        cmocka_unit_test(test_rmsnorm_value),
        cmocka_unit_test(test_rmsnorm_offset_alias),
        cmocka_unit_test(test_rmsnorm_add),
        cmocka_unit_test(test_qk_norm),
        cmocka_unit_test(test_add_mul_scale),
        cmocka_unit_test(test_gated),
        ROPE_TESTS,
        ATTENTION_TESTS,
        GEMM_TESTS,
        ENCODING_TESTS,
        MOE_TESTS,
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
