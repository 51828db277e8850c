/*
** test_ref_gemm.h: gemm_nt and logits_gemm, part of test_ref.c.
**
** Small products whose results are exact in f32 (integers and short binary
** fractions), so the tests compare with == and any decoding or indexing
** mistake shows as a wrong number, not a tolerance question.
*/

/* out = x W^T over M rows with weight `w` of N rows in `enc`. */
static int gemm(const char *op, float *x, int64_t x_stride, const void *w, int enc,
                int64_t w_row_bytes, float *bias, float *out, int64_t M, int64_t N, int64_t K)
{
    Call c = call_new(op, M);
    set_i(&c, "N", N);
    set_i(&c, "K", K);
    set_i(&c, "enc", enc);
    set_act_strided(&c, "x", x, M, K, x_stride);
    set_weight(&c, "w", w, enc, N, K, w_row_bytes);
    if (bias) set_weight(&c, "bias", bias, RAD_ENC_F32, 0, N, 0);
    set_act(&c, "out", out, M, N);
    return run(&c);
}

/* gemm_nt with f32 weights and a bias, honouring padded row strides of x
** and of the weight. */
static void test_gemm_f32_bias(void **state)
{
    (void)state;
    float x[2][4] = {{1, 2, 3, -99}, {-1, 0.5f, 2, -99}};    /* K = 3, stride 4 */
    float w[2][5] = {{1, 0, -1, -99, -99}, {2, 2, 2, -99, -99}}; /* N = 2, stride 5 */
    float bias[2] = {0.25f, -1}, out[2][2];
    assert_int_equal(gemm("gemm_nt", &x[0][0], 4, w, RAD_ENC_F32, sizeof w[0], bias, &out[0][0],
                          2, 2, 3),
                     RAD_OK);
    assert_true(out[0][0] == 1 - 3 + 0.25f);
    assert_true(out[0][1] == 12 - 1);
    assert_true(out[1][0] == -1 - 2 + 0.25f);
    assert_true(out[1][1] == 3 - 1);
    assert_int_equal(gemm("gemm_nt", &x[0][0], 4, w, RAD_ENC_F32, sizeof w[0], NULL, &out[0][0],
                          2, 2, 3),
                     RAD_OK);
    assert_true(out[0][1] == 12);
}

/* q8_0 weights: a hand-built block per row decodes to d * q exactly and
** the product is the f32 dot with those values (activations unquantized). */
static void test_gemm_q8_0(void **state)
{
    (void)state;
    unsigned char w[2][34];
    int8_t q0[32], q1[32];
    float x[32], out[2], dq[32];
    for (int j = 0; j < 32; j++) {
        q0[j] = (int8_t)(j - 16);
        q1[j] = (int8_t)(j % 2 ? -127 : 127);
        x[j] = (float)j + 0.5f;
    }
    q8_0_block(w[0], 0x3800, q0); /* d = 0.5 */
    q8_0_block(w[1], 0x3400, q1); /* d = 0.25 */
    assert_int_equal(rad_dequant_row(RAD_ENC_Q8_0, w[1], dq, 32), RAD_OK);
    for (int j = 0; j < 32; j++) assert_true(dq[j] == (j % 2 ? -31.75f : 31.75f));

    assert_int_equal(gemm("gemm_nt", x, 32, w, RAD_ENC_Q8_0, 34, NULL, out, 1, 2, 32), RAD_OK);
    double want0 = 0;
    for (int j = 0; j < 32; j++) want0 += 0.5 * (j - 16) * (j + 0.5);
    assert_true(out[0] == (float)want0);
    assert_true(out[1] == 16 * -31.75f); /* each even/odd pair gives 31.75 * -1 */
}

/* f16 and bf16 weights holding exactly representable values give the same
** products as f32; a weight whose encoding is not `enc` is RAD_E_ARG. */
static void test_gemm_halves(void **state)
{
    (void)state;
    const float wf[2][3] = {{1.5f, -2, 0.25f}, {3, 0.125f, -0.5f}};
    uint16_t wh[2][3], wb[2][3];
    float x[3] = {2, -1, 4}, want[2], out[2];
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 3; k++) {
            wh[n][k] = rad_f32_to_f16(wf[n][k]);
            wb[n][k] = rad_f32_to_bf16(wf[n][k]);
        }
    assert_int_equal(gemm("gemm_nt", x, 3, wf, RAD_ENC_F32, sizeof wf[0], NULL, want, 1, 2, 3),
                     RAD_OK);
    assert_int_equal(gemm("gemm_nt", x, 3, wh, RAD_ENC_F16, sizeof wh[0], NULL, out, 1, 2, 3),
                     RAD_OK);
    assert_memory_equal(out, want, sizeof out);
    assert_int_equal(gemm("logits_gemm", x, 3, wb, RAD_ENC_BF16, sizeof wb[0], NULL, out, 1, 2, 3),
                     RAD_OK);
    assert_memory_equal(out, want, sizeof out);
    assert_true(want[0] == 6 && want[1] == 3.875f);

    Call c = call_new("gemm_nt", 1);
    set_i(&c, "N", 2);
    set_i(&c, "K", 3);
    set_i(&c, "enc", RAD_ENC_F16);
    set_act(&c, "x", x, 1, 3);
    set_weight(&c, "w", wf, RAD_ENC_F32, 2, 3, sizeof wf[0]);
    set_act(&c, "out", out, 1, 2);
    assert_int_equal(run(&c), RAD_E_ARG);
}

/* logits_gemm applies the final soft-cap c * tanh(logit / c) when c > 0. */
static void test_logits_softcap(void **state)
{
    (void)state;
    float w[2][2] = {{1, 1}, {-4, 0}}, x[2] = {1, 2}, out[2];
    Call c = call_new("logits_gemm", 1);
    set_i(&c, "N", 2);
    set_i(&c, "K", 2);
    set_i(&c, "enc", RAD_ENC_F32);
    set_f(&c, "softcap", 2.0);
    set_act(&c, "x", x, 1, 2);
    set_weight(&c, "w", w, RAD_ENC_F32, 2, 2, sizeof w[0]);
    set_act(&c, "out", out, 1, 2);
    assert_int_equal(run(&c), RAD_OK);
    assert_close(out[0], 2 * tanh(1.5), 1e-7);
    assert_close(out[1], 2 * tanh(-2.0), 1e-7);
}

#define GEMM_TESTS                                                                    \
    cmocka_unit_test(test_gemm_f32_bias), cmocka_unit_test(test_gemm_q8_0),         \
        cmocka_unit_test(test_gemm_halves), cmocka_unit_test(test_logits_softcap)
