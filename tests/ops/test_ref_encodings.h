/*
** test_ref_encodings.h: every weight encoding ref decodes, part of
** test_ref.c.
**
** The blocks and their values come from encoding_vectors.h, written by
** make_encoding_vectors.py with gguf-py's numpy dequantizers as the
** oracle, so "the values the format defines" are someone else's reading of
** ggml, not ours.  Values compare as bit patterns: decoding is exact (or
** rounds as ggml does), so anything short of the same bits is a bug.
*/
#include <stdlib.h>

#include "encoding_vectors.h"

/* The encodings ref decodes, by ggml type id. */
static const int ref_encodings[] = {
    RAD_ENC_F32,  RAD_ENC_F16,  RAD_ENC_BF16, RAD_ENC_Q8_0,   RAD_ENC_Q4_0,
    RAD_ENC_Q4_1, RAD_ENC_Q5_0, RAD_ENC_Q5_1, RAD_ENC_Q2_K,   RAD_ENC_Q3_K,
    RAD_ENC_Q4_K, RAD_ENC_Q5_K, RAD_ENC_Q6_K, RAD_ENC_IQ4_NL, RAD_ENC_MXFP4,
};
enum { N_REF_ENCODINGS = sizeof ref_encodings / sizeof ref_encodings[0] };

static int is_ref_encoding(int enc)
{
    for (int i = 0; i < N_REF_ENCODINGS; i++)
        if (ref_encodings[i] == enc) return 1;
    return 0;
}

/* Compare n decoded floats with a vector's bit patterns, naming the first
** element that differs. */
static void assert_bits(const EncodingVector *v, const float *got, const uint32_t *want, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t g;
        memcpy(&g, &got[i], 4);
        if (g != want[i])
            fail_msg("%s: element %d decodes to 0x%08x (%.9g), want 0x%08x", v->label, i, g, (double)got[i],
                     want[i]);
    }
}

/* rad_dequant_supported answers yes for exactly the fifteen encodings, each
** of which base/encoding.c knows; every id past them is RAD_E_UNSUPPORTED. */
static void test_dequant_coverage(void **state)
{
    (void)state;
    float out[256];
    unsigned char zero[256] = {0};
    for (int enc = -1; enc <= RAD_ENC_COUNT; enc++) {
        int want = is_ref_encoding(enc);
        assert_int_equal(rad_dequant_supported(enc), want);
        if (want) {
            assert_non_null(rad_encoding_info(enc));
        } else {
            assert_int_equal(rad_dequant_row(enc, zero, out, 0), RAD_E_UNSUPPORTED);
        }
    }
    /* every encoding has a vector */
    for (int i = 0; i < N_REF_ENCODINGS; i++) {
        int found = 0;
        for (int v = 0; v < N_ENCODING_VECTORS; v++) found |= encoding_vectors[v].enc == ref_encodings[i];
        if (!found) fail_msg("no vector for encoding %d", ref_encodings[i]);
    }
}

/* Each vector's blocks decode to exactly gguf-py's values, as one row and
** block by block from an unaligned copy; the vector's size agrees with
** base/encoding.c's block geometry. */
static void test_dequant_vectors(void **state)
{
    (void)state;
    for (int v = 0; v < N_ENCODING_VECTORS; v++) {
        const EncodingVector *e = &encoding_vectors[v];
        const RadEncodingInfo *info = rad_encoding_info(e->enc);
        assert_non_null(info);
        assert_int_equal(rad_encoding_row_bytes(e->enc, e->n), e->n_bytes);

        float *out = malloc((size_t)e->n * sizeof *out);
        assert_int_equal(rad_dequant_row(e->enc, e->blocks, out, e->n), RAD_OK);
        assert_bits(e, out, e->values, e->n);

        /* one block at a time, each from an odd address */
        unsigned char *copy = malloc((size_t)e->n_bytes + 1);
        memcpy(copy + 1, e->blocks, (size_t)e->n_bytes);
        memset(out, 0xab, (size_t)e->n * sizeof *out);
        for (int b = 0; b < e->n / info->block_elems; b++)
            assert_int_equal(rad_dequant_row(e->enc, copy + 1 + b * info->block_bytes,
                                             out + b * info->block_elems, info->block_elems),
                             RAD_OK);
        assert_bits(e, out, e->values, e->n);

        /* a part block is refused and writes nothing */
        if (info->block_elems > 1) {
            out[0] = 42.0f;
            assert_int_equal(rad_dequant_row(e->enc, e->blocks, out, info->block_elems - 1), RAD_E_SHAPE);
            assert_true(out[0] == 42.0f);
        }
        free(copy);
        free(out);
    }
}

/* For each GEMM op, one row whose enc IN list is the decodable encodings:
** every one is in it, nothing else is.  This is
** what lets the core choose ref for any weight it can decode. */
static void test_gemm_rows_cover_encodings(void **state)
{
    (void)state;
    static const char *ops[] = {"gemm_nt", "logits_gemm"};
    for (int o = 0; o < 2; o++) {
        int n_rows = 0;
        for (int enc = 0; enc < RAD_ENC_COUNT; enc++) {
            int hits = 0;
            for (int r = 0; r < rad_kernel_library.n_rows; r++) {
                const RadKernelRow *row = &rad_kernel_library.rows[r];
                if (strcmp(row->op, ops[o]) != 0) continue;
                if (enc == 0) n_rows++;
                assert_int_equal(row->n_constraints, 1);
                const RadConstraint *c = &row->constraints[0];
                assert_string_equal(c->param, "enc");
                assert_int_equal(c->kind, RAD_C_IN);
                assert_true(c->n_values <= RAD_MAX_IN_VALUES);
                for (int i = 0; i < c->n_values; i++) hits += c->values[i] == enc;
            }
            if (hits != is_ref_encoding(enc))
                fail_msg("%s: encoding %d is in %d rows' lists", ops[o], enc, hits);
        }
        assert_int_equal(n_rows, 1);
    }
}

/* One GEMM over a vector's blocks as N weight rows of K, M = 3 activation
** rows; checks the result against the f64 dot of gguf-py's values. */
static void gemm_vector(const char *op, const EncodingVector *e)
{
    const RadEncodingInfo *info = rad_encoding_info(e->enc);
    int blocks = e->n / info->block_elems;
    int N = blocks % 2 == 0 ? 2 : 1, K = e->n / N, M = 3;
    int64_t row_bytes = rad_encoding_row_bytes(e->enc, K);
    float *x = malloc((size_t)M * K * sizeof *x), out[3 * 2], w[2];
    fill(x, (int64_t)M * K, 7u + (uint32_t)e->n);

    Call c = call_new(op, M);
    set_i(&c, "N", N);
    set_i(&c, "K", K);
    set_i(&c, "enc", e->enc);
    set_act(&c, "x", x, M, K);
    set_weight(&c, "w", e->blocks, e->enc, N, K, row_bytes);
    set_act(&c, "out", out, M, N);
    assert_int_equal(run(&c), RAD_OK);

    double num = 0, den = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            /* the dot of the decoded weights with the f32 activations, in
            ** double, in k order: ref's definition, so the same float */
            double want = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                float wv;
                memcpy(&wv, &e->values[n * K + k], 4);
                want += (double)wv * (double)x[m * K + k];
                mag += fabs((double)wv * (double)x[m * K + k]);
            }
            w[n] = (float)want;
            if (out[m * N + n] != w[n])
                fail_msg("%s %s: out[%d][%d] = %.9g, want %.9g", op, e->label, m, n, (double)out[m * N + n],
                         (double)w[n]);
            /* llama.cpp's vec_dot bound |d| / K <= 0.02, relative to the
            ** size of the terms (our values reach 1e6) */
            assert_true(fabs(out[m * N + n] - want) / K <= 0.02 * (mag / K > 1 ? mag / K : 1));
            num += (out[m * N + n] - want) * (out[m * N + n] - want);
            den += want * want;
        }
    assert_true(den == 0 || num / den <= 5e-4); /* mul_mat's NMSE bound */
    free(x);
}

/* gemm_nt and logits_gemm over every encoding: the f64 dot of the decoded
** weights with unquantized f32 activations, exactly (and so within
** llama.cpp's 5e-4 NMSE and 0.02 per-element dot bounds). */
static void test_gemm_encodings(void **state)
{
    (void)state;
    for (int v = 0; v < N_ENCODING_VECTORS; v++) {
        const EncodingVector *e = &encoding_vectors[v];
        if (!e->finite) continue; /* inf * x is not a dot worth pinning */
        gemm_vector("gemm_nt", e);
        gemm_vector("logits_gemm", e);
    }
}

/* embed_lookup decodes a table in every encoding to the vector's bits, for
** any row order. */
static void test_embed_encodings(void **state)
{
    (void)state;
    for (int v = 0; v < N_ENCODING_VECTORS; v++) {
        const EncodingVector *e = &encoding_vectors[v];
        const RadEncodingInfo *info = rad_encoding_info(e->enc);
        int blocks = e->n / info->block_elems;
        int vocab = blocks % 2 == 0 ? 2 : 1, N = e->n / vocab;
        int32_t ids[3] = {vocab - 1, 0, vocab - 1};
        float *out = malloc((size_t)3 * N * sizeof *out);

        Call c = call_new("embed_lookup", 3);
        set_i(&c, "N", N);
        set_index(&c, "ids", ids, 3);
        set_weight(&c, "table", e->blocks, e->enc, vocab, N, rad_encoding_row_bytes(e->enc, N));
        set_act(&c, "out", out, 3, N);
        assert_int_equal(run(&c), RAD_OK);
        for (int m = 0; m < 3; m++) assert_bits(e, out + m * N, e->values + ids[m] * N, N);
        free(out);
    }
}

#define ENCODING_TESTS                                                                                       \
    cmocka_unit_test(test_dequant_coverage), cmocka_unit_test(test_dequant_vectors),                         \
        cmocka_unit_test(test_gemm_rows_cover_encodings), cmocka_unit_test(test_gemm_encodings),             \
        cmocka_unit_test(test_embed_encodings)
