/*
** test_quantize.c: the converter's encoders (formats/quantize*.c): rounding
** of f16 and bf16, q8_0 bytes, every block quantizer's bytes against
** gguf-py's (tests/ops/encoding_vectors.h) where ours follow ggml's
** reference, q4_k, q5_k and q6_k bytes against ggml's own reference
** quantizer (tests/unit/kquant_vectors.h), and every quantizer's round-trip
** error through the reference decoder (kernels/ops/dequant*.c) against
** llama.cpp's limits.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantize.h"
#include "quantize_recipe.h"
#include "rad_dequant.h"
#include "rad_half.h"

#include "../ops/encoding_vectors.h"
#include "kquant_vectors.h"

/* f32 -> 16-bit through rad_convert_row, one element. */
static uint16_t narrow_one(int enc, uint32_t f32_bits)
{
    float x = rad_bits_to_f32(f32_bits);
    uint16_t h = 0xdead;
    assert_int_equal(rad_convert_row(RAD_ENC_F32, &x, enc, &h, 1), 0);
    return h;
}

/* 16-bit -> other encoding through rad_convert_row, one element. */
static uint16_t convert16(int enc_in, uint16_t h, int enc_out)
{
    uint16_t out = 0xdead;
    assert_int_equal(rad_convert_row(enc_in, &h, enc_out, &out, 1), 0);
    return out;
}

/* f32 -> bf16 rounds to nearest, ties to even; NaN stays NaN; overflow goes to inf. */
static void test_bf16_rounding(void **state)
{
    (void)state;
    assert_int_equal(narrow_one(RAD_ENC_BF16, 0x3f800000), 0x3f80);   /* 1.0 exact */
    assert_int_equal(narrow_one(RAD_ENC_BF16, 0x3f808000), 0x3f80);   /* 1 + 2^-8: tie, to even (down) */
    assert_int_equal(narrow_one(RAD_ENC_BF16, 0x3f818000), 0x3f82);   /* 1 + 3*2^-8: tie, to even (up) */
    assert_int_equal(narrow_one(RAD_ENC_BF16, 0x3f808001), 0x3f81);   /* just above the tie */
    assert_int_equal(narrow_one(RAD_ENC_BF16, 0x3f807fff), 0x3f80);   /* just below the tie */
    assert_int_equal(narrow_one(RAD_ENC_BF16, 0xbf808000), 0xbf80);   /* sign does not matter */
    assert_int_equal(narrow_one(RAD_ENC_BF16, 0x7f7fffff), 0x7f80);   /* FLT_MAX rounds to inf */
    assert_int_equal(narrow_one(RAD_ENC_BF16, 0xff800000), 0xff80);   /* -inf */
    uint16_t nan = narrow_one(RAD_ENC_BF16, 0x7f800001);              /* signalling NaN */
    assert_int_equal(nan & 0x7f80, 0x7f80);
    assert_true((nan & 0x007f) != 0);
    /* bf16 -> f32 is exact */
    float f;
    uint16_t h = 0x3f81;
    assert_int_equal(rad_convert_row(RAD_ENC_BF16, &h, RAD_ENC_F32, &f, 1), 0);
    assert_true(f == 1.0f + 1.0f / 128);
}

/* f32 -> f16 rounds to nearest, ties to even, through normals, subnormals and overflow. */
static void test_f16_rounding(void **state)
{
    (void)state;
    assert_int_equal(narrow_one(RAD_ENC_F16, 0x3f800000), 0x3c00);   /* 1.0 */
    assert_int_equal(narrow_one(RAD_ENC_F16, 0x3f801000), 0x3c00);   /* 1 + 2^-11: tie, to even (down) */
    assert_int_equal(narrow_one(RAD_ENC_F16, 0x3f803000), 0x3c02);   /* 1 + 3*2^-11: tie, to even (up) */
    assert_int_equal(narrow_one(RAD_ENC_F16, 0x3f801001), 0x3c01);   /* just above the tie */
    assert_int_equal(narrow_one(RAD_ENC_F16, rad_f32_to_bits(65504.0f)), 0x7bff);
    assert_int_equal(narrow_one(RAD_ENC_F16, rad_f32_to_bits(65519.0f)), 0x7bff);
    assert_int_equal(narrow_one(RAD_ENC_F16, rad_f32_to_bits(65520.0f)), 0x7c00);   /* tie past max: inf */
    assert_int_equal(narrow_one(RAD_ENC_F16, rad_f32_to_bits(-1e10f)), 0xfc00);
    /* subnormals: 2^-24 is the smallest */
    assert_int_equal(narrow_one(RAD_ENC_F16, rad_f32_to_bits(0x1p-24f)), 0x0001);
    assert_int_equal(narrow_one(RAD_ENC_F16, rad_f32_to_bits(0x1p-25f)), 0x0000);   /* tie, to even (0) */
    assert_int_equal(narrow_one(RAD_ENC_F16, rad_f32_to_bits(0x3p-25f)), 0x0002);   /* tie, to even (2) */
    assert_int_equal(narrow_one(RAD_ENC_F16, rad_f32_to_bits(-0x1p-26f)), 0x8000);  /* to -0 */
    assert_int_equal(narrow_one(RAD_ENC_F16, 0x7fc00000) & 0x7e00, 0x7e00);         /* NaN */
    /* f16 -> f32 is exact */
    float f;
    uint16_t h = 0x0001;
    assert_int_equal(rad_convert_row(RAD_ENC_F16, &h, RAD_ENC_F32, &f, 1), 0);
    assert_true(f == 0x1p-24f);
}

/* Conversions between the 16-bit formats go through f32 and round once. */
static void test_16bit_cross(void **state)
{
    (void)state;
    assert_int_equal(convert16(RAD_ENC_BF16, 0x3f81, RAD_ENC_F16), 0x3c08);   /* 1 + 2^-7, exact */
    assert_int_equal(convert16(RAD_ENC_F16, 0x3c01, RAD_ENC_BF16), 0x3f80);   /* 1 + 2^-10 -> 1.0 */
    assert_int_equal(convert16(RAD_ENC_F16, 0x3c03, RAD_ENC_BF16), 0x3f80);   /* 1 + 3*2^-10 -> 1.0 */
    assert_int_equal(convert16(RAD_ENC_F16, 0x3c04, RAD_ENC_BF16), 0x3f80);   /* 1 + 2^-8: tie, even */
    assert_int_equal(convert16(RAD_ENC_F16, 0x3c0c, RAD_ENC_BF16), 0x3f82);   /* 1 + 3*2^-8: tie, even */
    assert_int_equal(convert16(RAD_ENC_BF16, 0x4780, RAD_ENC_F16), 0x7c00);   /* 65536 -> inf */
    /* the same encoding in and out copies bytes, NaN payloads included */
    assert_int_equal(convert16(RAD_ENC_BF16, 0x7fc1, RAD_ENC_BF16), 0x7fc1);
    assert_int_equal(convert16(RAD_ENC_F16, 0x7e01, RAD_ENC_F16), 0x7e01);

    /* a long row crosses the internal chunk boundary */
    enum { N = 1000 };
    float src[N], back[N];
    uint16_t mid[N];
    for (int i = 0; i < N; i++) src[i] = (float)(i - 500) * 0.25f;   /* exact in f16 */
    assert_int_equal(rad_convert_row(RAD_ENC_F32, src, RAD_ENC_F16, mid, N), 0);
    assert_int_equal(rad_convert_row(RAD_ENC_F16, mid, RAD_ENC_F32, back, N), 0);
    assert_memory_equal(src, back, sizeof src);
}

/* q8_0 blocks of known values give exactly these bytes: f16 d, then codes rounded half away from zero. */
static void test_q8_0_known_bytes(void **state)
{
    (void)state;
    float x[96] = {0};
    /* block 0: amax 127 -> d = 1.0 exactly */
    const float b0[12] = {127, -127, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 2.49f, 100.7f, -64.2f, 0};
    memcpy(x, b0, sizeof b0);
    for (int i = 12; i < 32; i++) x[i] = (float)(i - 20);
    /* block 1: all zero -> d = 0, codes 0 */
    /* block 2: amax 63.5 -> d = 0.5, 1/d = 2 */
    x[64] = 63.5f;
    x[65] = -0.25f;
    x[66] = 0.75f;
    x[67] = 10.0f;
    x[68] = -63.5f;

    static const uint8_t want[102] = {
        0x00, 0x3c,                                                   /* d = 1.0 */
        0x7f, 0x81, 0x01, 0xff, 0x02, 0xfe, 0x03, 0xfd,               /* 127 -127 1 -1 2 -2 3 -3 */
        0x02, 0x65, 0xc0, 0x00,                                       /* 2 101 -64 0 */
        0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff,               /* -8 .. -1 */
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,               /* 0 .. 7 */
        0x08, 0x09, 0x0a, 0x0b,                                       /* 8 .. 11 */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,         /* block 1 */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0x00, 0x38,                                                   /* d = 0.5 */
        0x7f, 0xff, 0x02, 0x14, 0x81, 0, 0, 0,                        /* 127 -1 2 20 -127 */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    uint8_t got[102];
    memset(got, 0xaa, sizeof got);
    assert_int_equal(rad_quantize_row_q8_0(x, got, 96), 0);
    assert_memory_equal(got, want, sizeof want);

    /* rad_convert_row from f32 gives the same bytes */
    memset(got, 0xaa, sizeof got);
    assert_int_equal(rad_convert_row(RAD_ENC_F32, x, RAD_ENC_Q8_0, got, 96), 0);
    assert_memory_equal(got, want, sizeof want);
}

/* f16 and bf16 sources quantize exactly as their f32 values do. */
static void test_q8_0_from_16bit(void **state)
{
    (void)state;
    enum { N = 320 };   /* more than one internal chunk */
    float x[N];
    uint16_t h[N], b[N];
    for (int i = 0; i < N; i++) {
        h[i] = rad_f32_to_f16(sinf((float)i) * 3.0f);
        b[i] = rad_f32_to_bf16(cosf((float)i) * 5.0f);
    }
    uint8_t want[N / 32 * 34], got[N / 32 * 34];
    for (int i = 0; i < N; i++) x[i] = rad_f16_to_f32(h[i]);
    assert_int_equal(rad_quantize_row_q8_0(x, want, N), 0);
    assert_int_equal(rad_convert_row(RAD_ENC_F16, h, RAD_ENC_Q8_0, got, N), 0);
    assert_memory_equal(got, want, sizeof want);
    for (int i = 0; i < N; i++) x[i] = rad_bf16_to_f32(b[i]);
    assert_int_equal(rad_quantize_row_q8_0(x, want, N), 0);
    assert_int_equal(rad_convert_row(RAD_ENC_BF16, b, RAD_ENC_Q8_0, got, N), 0);
    assert_memory_equal(got, want, sizeof want);
}

/* q8_0 round-trip error on 0.1 + 2cos(i) is within 0.002 by llama.cpp's metric sqrt(sum d^2) / n. */
static void test_q8_0_round_trip_error(void **state)
{
    (void)state;
    enum { N = 32 * 128 };
    float *x = malloc(N * sizeof *x);
    uint8_t *q = malloc(N / 32 * 34);
    for (int i = 0; i < N; i++) x[i] = 0.1f + 2.0f * cosf((float)i);
    assert_int_equal(rad_quantize_row_q8_0(x, q, N), 0);
    double sum = 0, worst = 0;
    for (int b = 0; b < N / 32; b++) {
        uint16_t dh;
        memcpy(&dh, q + 34 * b, 2);
        float d = rad_f16_to_f32(dh);
        for (int j = 0; j < 32; j++) {
            float y = d * (float)(int8_t)q[34 * b + 2 + j];
            double e = (double)x[32 * b + j] - y;
            sum += e * e;
            if (fabs(e) > worst) worst = fabs(e);
        }
    }
    double err = sqrt(sum) / N;
    assert_true(err < 0.002);
    assert_true(worst < 2.1 / 127);   /* about half a step, plus the scale's f16 rounding */
    free(x);
    free(q);
}

/* Tiny scales (subnormal amax) and extreme values never overflow a code. */
static void test_q8_0_extremes(void **state)
{
    (void)state;
    float x[32] = {0};
    uint8_t q[34];
    x[0] = 1e-40f;   /* d = amax/127 is subnormal and 1/d overflows to inf */
    x[1] = -1e-40f;
    assert_int_equal(rad_quantize_row_q8_0(x, q, 32), 0);
    assert_int_equal((int8_t)q[2], 127);
    assert_int_equal((int8_t)q[3], -127);
    assert_int_equal(q[4], 0);   /* 0 * inf is not a code */
    /* the largest block whose scale still fits f16 ... */
    x[0] = 65504.0f * 127.0f;
    x[1] = -x[0];
    assert_int_equal(rad_quantize_row_q8_0(x, q, 32), 0);
    assert_int_equal((int8_t)q[2], 127);
    assert_int_equal((int8_t)q[3], -127);
    uint16_t dh;
    memcpy(&dh, q, 2);
    assert_int_equal(dh, 0x7bff);
    /* ... and one past it, refused rather than written with an inf scale */
    x[32 - 1] = 3.0e38f;
    assert_int_equal(rad_quantize_row_q8_0(x, q, 32), RAD_E_ARG);
    assert_non_null(strstr(rad_error_message(), "past what an f16 scale can carry"));
}

/* Unsupported pairs, partial blocks, NULL buffers and non-finite input are refused. */
static void test_refusals(void **state)
{
    (void)state;
    float x[64] = {0};
    uint8_t out[256];
    assert_int_equal(rad_convert_row(RAD_ENC_I32, x, RAD_ENC_F32, out, 4), RAD_E_UNSUPPORTED);
    assert_int_equal(rad_convert_row(RAD_ENC_F32, x, RAD_ENC_FP8_E4M3, out, 32), RAD_E_UNSUPPORTED);
    assert_int_equal(rad_convert_row(RAD_ENC_Q8_0, x, RAD_ENC_F32, out, 32), RAD_E_UNSUPPORTED);
    assert_int_equal(rad_convert_row(999, x, RAD_ENC_F32, out, 32), RAD_E_UNSUPPORTED);
    assert_non_null(strstr(rad_error_message(), "is not a conversion radiance makes"));
    assert_int_equal(rad_convert_row(RAD_ENC_F32, x, RAD_ENC_Q8_0, out, 31), RAD_E_ARG);
    assert_int_equal(rad_convert_row(RAD_ENC_F32, x, RAD_ENC_F16, out, -1), RAD_E_ARG);
    assert_int_equal(rad_convert_row(RAD_ENC_F32, NULL, RAD_ENC_F16, out, 1), RAD_E_ARG);
    assert_int_equal(rad_convert_row(RAD_ENC_F32, NULL, RAD_ENC_F16, NULL, 0), 0);
    assert_int_equal(rad_quantize_row_q8_0(x, out, 33), RAD_E_ARG);
    assert_int_equal(rad_quantize_row_q8_0(x, NULL, 32), RAD_E_ARG);
    x[40] = NAN;
    assert_int_equal(rad_quantize_row_q8_0(x, out, 64), RAD_E_ARG);
    assert_non_null(strstr(rad_error_message(), "element 40 is NaN"));
    x[40] = -INFINITY;
    assert_int_equal(rad_convert_row(RAD_ENC_F32, x, RAD_ENC_Q8_0, out, 64), RAD_E_ARG);
    assert_non_null(strstr(rad_error_message(), "element 40 is infinite"));
    /* the index is the row's, also when the row is converted in chunks */
    uint16_t h[320] = {0};
    h[300] = 0x7c00;
    assert_int_equal(rad_convert_row(RAD_ENC_F16, h, RAD_ENC_Q8_0, out, 0), 0);
    uint8_t big[320 / 32 * 34];
    assert_int_equal(rad_convert_row(RAD_ENC_F16, h, RAD_ENC_Q8_0, big, 320), RAD_E_ARG);
    assert_non_null(strstr(rad_error_message(), "element 300 is infinite"));
    /* non-finite values are fine for the float formats */
    assert_int_equal(rad_convert_row(RAD_ENC_F32, x, RAD_ENC_BF16, out, 64), 0);
}

/* ------------------------------------------------ the block quantizers */

/* What rad_quantize_row writes, with llama.cpp's round-trip limit for each
** (test-quantize-fns: 0.002, 2-bit 0.0075, 3-bit 0.004). */
static const struct {
    int enc;
    double limit;
} quantizers[] = {
    {RAD_ENC_Q8_0, 0.002},  {RAD_ENC_Q4_0, 0.002}, {RAD_ENC_Q4_1, 0.002},
    {RAD_ENC_Q5_0, 0.002},  {RAD_ENC_Q5_1, 0.002}, {RAD_ENC_IQ4_NL, 0.002},
    {RAD_ENC_Q2_K, 0.0075}, {RAD_ENC_Q3_K, 0.004}, {RAD_ENC_Q4_K, 0.002},
    {RAD_ENC_Q5_K, 0.002},  {RAD_ENC_Q6_K, 0.002}, {RAD_ENC_MXFP4, 0.003},   /* FP4: 0.003 */
};
enum { N_QUANTIZERS = sizeof quantizers / sizeof quantizers[0] };

static const char *name_of(int enc) { return rad_encoding_info(enc)->name; }

/* Quantize n floats to enc and decode them back with the reference decoder. */
static int round_trip(int enc, const float *x, float *y, int64_t n)
{
    uint8_t *q = malloc((size_t)rad_encoding_row_bytes(enc, n));
    int rc = rad_quantize_row(enc, x, q, n);
    if (rc == 0) assert_int_equal(rad_dequant_row(enc, q, y, n), 0);
    free(q);
    return rc;
}

/* rad_quantize_supported says yes to exactly the twelve block encodings. */
static void test_quantize_supported(void **state)
{
    (void)state;
    int n = 0;
    for (int enc = -1; enc <= RAD_ENC_COUNT; enc++) {
        int want = 0;
        for (int i = 0; i < N_QUANTIZERS; i++) want |= quantizers[i].enc == enc;
        assert_int_equal(rad_quantize_supported(enc), want);
        n += want;
    }
    assert_int_equal(n, N_QUANTIZERS);
    float x[32] = {0};
    uint8_t out[64];
    assert_int_equal(rad_quantize_row(RAD_ENC_FP8_E4M3, x, out, 32), RAD_E_UNSUPPORTED);
    assert_int_equal(rad_quantize_row(RAD_ENC_F16, x, out, 32), RAD_E_UNSUPPORTED);
}

/* q8_0, q4_0, q4_1, q5_0, q5_1 and mxfp4 blocks are byte-identical to
** gguf-py's (= ggml's reference quantizers) on the vectors' rows, through
** rad_quantize_row and rad_convert_row alike. */
static void test_vectors_byte_identical(void **state)
{
    (void)state;
    int checked = 0;
    for (int v = 0; v < N_ENCODING_VECTORS; v++) {
        const EncodingVector *e = &encoding_vectors[v];
        if (!e->source || !rad_quantize_supported(e->enc)) continue;
        uint8_t *got = malloc((size_t)e->n_bytes);
        memset(got, 0xaa, (size_t)e->n_bytes);
        assert_int_equal(rad_quantize_row(e->enc, e->source, got, e->n), 0);
        for (int i = 0; i < e->n_bytes; i++)
            if (got[i] != e->blocks[i])
                fail_msg("%s: byte %d is 0x%02x, gguf-py writes 0x%02x", e->label, i, got[i],
                         e->blocks[i]);
        memset(got, 0xaa, (size_t)e->n_bytes);
        assert_int_equal(rad_convert_row(RAD_ENC_F32, e->source, e->enc, got, e->n), 0);
        assert_memory_equal(got, e->blocks, (size_t)e->n_bytes);
        free(got);
        checked |= 1 << (e->enc & 31);
    }
    /* all six have vectors */
    assert_int_equal(checked, 1 << RAD_ENC_Q8_0 | 1 << RAD_ENC_Q4_0 | 1 << RAD_ENC_Q4_1 |
                                  1 << RAD_ENC_Q5_0 | 1 << RAD_ENC_Q5_1 | 1 << (RAD_ENC_MXFP4 & 31));
}

/* q4_k, q5_k and q6_k blocks are byte-identical to what ggml's reference
** quantizer (quantize_row_q*_K_ref, llama-quantize without an imatrix)
** writes, on rows that reach every branch of its search: Gaussian rows at
** three magnitudes, one-signed rows, outliers, ties, constant and zero
** groups, tiny values, integers. */
static void test_kquant_vectors_byte_identical(void **state)
{
    (void)state;
    int seen[3] = {0};
    for (int v = 0; v < N_KQUANT_VECTORS; v++) {
        const KquantVector *k = &kquant_vectors[v];
        size_t bytes = (size_t)rad_encoding_row_bytes(k->enc, k->n);
        float *x = malloc((size_t)k->n * sizeof *x);
        uint8_t *got = malloc(bytes);
        for (int i = 0; i < k->n; i++) x[i] = rad_bits_to_f32(k->source[i]);
        memset(got, 0xaa, bytes);
        assert_int_equal(rad_quantize_row(k->enc, x, got, k->n), 0);
        for (size_t i = 0; i < bytes; i++)
            if (got[i] != k->blocks[i])
                fail_msg("%s: byte %zu (block %zu, offset %zu) is 0x%02x, ggml writes 0x%02x", k->label, i,
                         i / (bytes / ((size_t)k->n / 256)), i % (bytes / ((size_t)k->n / 256)), got[i], k->blocks[i]);
        seen[k->enc - RAD_ENC_Q4_K]++;
        free(x);
        free(got);
    }
    assert_true(seen[0] >= 10 && seen[1] >= 10 && seen[2] >= 10);
}

/* Q4_K_M on Gemma 3 270M's shapes (18 layers, hidden 640, 4 heads of 256,
** 1 KV head, feed-forward 2048, head tied to the embedding) gives what
** llama.cpp's llama-quantize wrote into gemma-3-270m-q4_k_m.gguf: 109 f32,
** 81 q5_0, 27 q4_k, 10 q8_0, 9 q6_k (the fallbacks for rows of 640 do most
** of it).  tests/models/test_gguf_real.c checks the same tensor by tensor
** against the real file. */
static void test_recipe_gemma3_270m(void **state)
{
    (void)state;
    static const struct { const char *kind; int64_t cols; } layer[] = {
        {"attn_q.weight", 640},   {"attn_k.weight", 640},  {"attn_v.weight", 640},   {"attn_output.weight", 1024},
        {"ffn_gate.weight", 640}, {"ffn_up.weight", 640},  {"ffn_down.weight", 2048}, {"attn_norm.weight", 0},
        {"post_attention_norm.weight", 0}, {"ffn_norm.weight", 0}, {"post_ffw_norm.weight", 0},
        {"attn_q_norm.weight", 0}, {"attn_k_norm.weight", 0},
    };
    int count[RAD_ENC_COUNT + 1] = {0};
    char name[64];
    for (int l = 0; l < 18; l++)
        for (size_t k = 0; k < sizeof layer / sizeof *layer; k++) {
            snprintf(name, sizeof name, "blk.%d.%s", l, layer[k].kind);
            RadRecipeTensor t = {name, layer[k].cols ? 2 : 1, layer[k].cols ? layer[k].cols : 640, 18, 0, 1};
            count[rad_quant_recipe_enc("q4_k_m", &t)]++;
        }
    RadRecipeTensor embd = {"token_embd.weight", 2, 640, 18, 0, 1}, norm = {"output_norm.weight", 1, 640, 18, 0, 1};
    count[rad_quant_recipe_enc("q4_k_m", &embd)]++;
    count[rad_quant_recipe_enc("q4_k_m", &norm)]++;
    assert_int_equal(count[RAD_ENC_F32], 109);
    assert_int_equal(count[RAD_ENC_Q5_0], 81);
    assert_int_equal(count[RAD_ENC_Q4_K], 27);
    assert_int_equal(count[RAD_ENC_Q8_0], 10);
    assert_int_equal(count[RAD_ENC_Q6_K], 9);
}

/* With rows the k-quants divide: which layers get more bits (8 layers:
** 0, 3, 6 and 7, as use_more_bits says), the untied head q6_k, the
** embedding the default; Q4_K_S's q5_k in the first layers; the names and
** their case; what stays f32. */
static void test_recipe_rules(void **state)
{
    (void)state;
    char name[64], vname[64];
    int more = 0;
    for (int l = 0; l < 8; l++) {
        snprintf(vname, sizeof vname, "blk.%d.attn_v.weight", l);
        RadRecipeTensor v = {vname, 2, 256, 8, 0, 0};
        int e = rad_quant_recipe_enc("q4_k_m", &v);
        assert_true(e == RAD_ENC_Q6_K || e == RAD_ENC_Q4_K);
        if (e == RAD_ENC_Q6_K) more |= 1 << l;
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        RadRecipeTensor d = {name, 2, 512, 8, 0, 0};
        assert_int_equal(rad_quant_recipe_enc("q4_k_m", &d), e);
        assert_int_equal(rad_quant_recipe_enc("q5_k_m", &d), e == RAD_ENC_Q6_K ? RAD_ENC_Q6_K : RAD_ENC_Q5_K);
        assert_int_equal(rad_quant_recipe_enc("q4_k_s", &v), l < 4 ? RAD_ENC_Q5_K : RAD_ENC_Q4_K);
        assert_int_equal(rad_quant_recipe_enc("q4_k_s", &d), l < 1 ? RAD_ENC_Q5_K : RAD_ENC_Q4_K);
        assert_int_equal(rad_quant_recipe_enc("q5_k_s", &d), RAD_ENC_Q5_K);
        assert_int_equal(rad_quant_recipe_enc("q6_k", &d), RAD_ENC_Q6_K);
    }
    assert_int_equal(more, 1 << 0 | 1 << 3 | 1 << 6 | 1 << 7);
    RadRecipeTensor out = {"output.weight", 2, 256, 8, 0, 0}, embd = {"token_embd.weight", 2, 256, 8, 0, 0};
    assert_int_equal(rad_quant_recipe_enc("q4_k_m", &out), RAD_ENC_Q6_K);
    assert_int_equal(rad_quant_recipe_enc("q4_k_m", &embd), RAD_ENC_Q4_K);
    embd.head_tied = 1;
    assert_int_equal(rad_quant_recipe_enc("q4_k_m", &embd), RAD_ENC_Q6_K);
    RadRecipeTensor odd = {"blk.0.attn_q.weight", 2, 48, 8, 0, 0};   /* 48: no 32-block */
    assert_int_equal(rad_quant_recipe_enc("q4_k_m", &odd), RAD_ENC_F16);
    RadRecipeTensor router = {"blk.0.ffn_gate_inp.weight", 2, 256, 8, 0, 0};
    assert_int_equal(rad_quant_recipe_enc("q4_k_m", &router), RAD_ENC_F32);
    RadRecipeTensor qkv = {"blk.0.attn_qkv.weight", 2, 256, 8, 0, 0};
    assert_int_equal(rad_quant_recipe_enc("q4_k_m", &qkv), RAD_ENC_Q5_K);
    assert_string_equal(rad_quant_recipe_name("Q4_K_M"), "q4_k_m");
    assert_null(rad_quant_recipe_name("q4_k"));
    assert_null(rad_quant_recipe_name("q3_k_m"));
}

/* Every quantizer's round-trip error on llama.cpp's test data 0.1 + 2cos(i + offset),
** by its metric sqrt(sum d^2) / n, is within llama.cpp's limit for its bit width. */
static void test_round_trip_errors(void **state)
{
    (void)state;
    enum { N = 32 * 128 };   /* test-quantize-fns' size */
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N_QUANTIZERS; i++)
        for (int offset = 0; offset < 2; offset++) {
            for (int k = 0; k < N; k++) x[k] = 0.1f + 2.0f * cosf((float)k + (float)offset);
            assert_int_equal(round_trip(quantizers[i].enc, x, y, N), 0);
            double sum = 0;
            for (int k = 0; k < N; k++) sum += ((double)x[k] - y[k]) * ((double)x[k] - y[k]);
            double err = sqrt(sum) / N;
            if (offset == 0)
                print_message("    %-6s round-trip error %.6f (limit %g)\n", name_of(quantizers[i].enc),
                              err, quantizers[i].limit);
            if (!(err < quantizers[i].limit))
                fail_msg("%s: error %g, limit %g", name_of(quantizers[i].enc), err,
                         quantizers[i].limit);
        }
    free(x);
    free(y);
}

/* Blocks at the edges encode and decode sensibly: all zero gives zeros;
** a constant block comes back within one step (mxfp4's E2M1 has one
** mantissa bit: 5 lies halfway between 4 and 6, and the tie goes to the
** lower code, ggml's choice); tiny and subnormal inputs give finite values
** no larger than a step of the scale f16 can carry. */
static void test_quantize_edge_blocks(void **state)
{
    (void)state;
    enum { N = 512 };
    float x[N], y[N];
    for (int i = 0; i < N_QUANTIZERS; i++) {
        int enc = quantizers[i].enc;
        memset(x, 0, sizeof x);
        assert_int_equal(round_trip(enc, x, y, N), 0);
        for (int k = 0; k < N; k++) assert_true(y[k] == 0.0f);

        for (float c = -5.0f; c <= 5.0f; c += 10.0f) {   /* -5, then 5 */
            for (int k = 0; k < N; k++) x[k] = c;
            assert_int_equal(round_trip(enc, x, y, N), 0);
            float step = enc == RAD_ENC_MXFP4 ? 1.0f : 0.02f * 5;
            for (int k = 0; k < N; k++)
                if (!(fabsf(y[k] - c) <= step))
                    fail_msg("%s: constant %g decodes to %g", name_of(enc), (double)c, (double)y[k]);
        }

        for (int k = 0; k < N; k++) x[k] = (k % 3 - 1) * (k % 2 ? 1e-30f : 1e-40f);
        assert_int_equal(round_trip(enc, x, y, N), 0);
        for (int k = 0; k < N; k++) assert_true(isfinite(y[k]) && fabsf(y[k]) < 1e-6f);
    }
}

/* f16 and bf16 rows quantize exactly as their f32 values do, across the
** converter's internal chunks. */
static void test_quantize_from_16bit(void **state)
{
    (void)state;
    enum { N = 512 };
    float x[N];
    uint16_t h[N], b[N];
    uint8_t want[N * 2], got[N * 2];
    for (int k = 0; k < N; k++) {
        h[k] = rad_f32_to_f16(sinf((float)k * 0.7f) * 3.0f);
        b[k] = rad_f32_to_bf16(cosf((float)k) * 5.0f - 1.0f);
    }
    for (int i = 0; i < N_QUANTIZERS; i++) {
        int enc = quantizers[i].enc;
        size_t bytes = (size_t)rad_encoding_row_bytes(enc, N);
        for (int k = 0; k < N; k++) x[k] = rad_f16_to_f32(h[k]);
        assert_int_equal(rad_quantize_row(enc, x, want, N), 0);
        assert_int_equal(rad_convert_row(RAD_ENC_F16, h, enc, got, N), 0);
        assert_memory_equal(got, want, bytes);
        for (int k = 0; k < N; k++) x[k] = rad_bf16_to_f32(b[k]);
        assert_int_equal(rad_quantize_row(enc, x, want, N), 0);
        assert_int_equal(rad_convert_row(RAD_ENC_BF16, b, enc, got, N), 0);
        assert_memory_equal(got, want, bytes);
    }
}

/* Every quantizer refuses NaN and infinity naming the element (also from a
** chunked f16 row), a value its f16 scales cannot carry, part blocks and
** NULL buffers. */
static void test_quantize_refusals(void **state)
{
    (void)state;
    enum { N = 512 };
    float x[N];
    uint16_t h[N];
    uint8_t out[N * 2];
    char want[64];
    for (int i = 0; i < N_QUANTIZERS; i++) {
        int enc = quantizers[i].enc;
        const char *name = name_of(enc);
        for (int k = 0; k < N; k++) x[k] = 0.5f;

        x[300] = NAN;
        assert_int_equal(rad_quantize_row(enc, x, out, N), RAD_E_ARG);
        snprintf(want, sizeof want, "%s: element 300 is NaN", name);
        assert_non_null(strstr(rad_error_message(), want));

        x[300] = -INFINITY;
        assert_int_equal(rad_convert_row(RAD_ENC_F32, x, enc, out, N), RAD_E_ARG);
        snprintf(want, sizeof want, "%s: element 300 is infinite", name);
        assert_non_null(strstr(rad_error_message(), want));

        for (int k = 0; k < N; k++) h[k] = 0x3800;   /* 0.5 */
        h[301] = 0x7c00;
        assert_int_equal(rad_convert_row(RAD_ENC_F16, h, enc, out, N), RAD_E_ARG);
        snprintf(want, sizeof want, "%s: element 301 is infinite", name);
        assert_non_null(strstr(rad_error_message(), want));

        x[300] = -3.0e38f;   /* finite, but no f16 scale reaches it */
        if (enc == RAD_ENC_MXFP4) {
            /* an E8M0 scale does: the block's largest code, -12 * 2^124 */
            float y[N];
            assert_int_equal(rad_quantize_row(enc, x, out, N), 0);
            assert_int_equal(rad_dequant_row(enc, out, y, N), 0);
            assert_true(y[300] == -12.0f * 0x1p124f && y[299] == 0.0f);
        } else {
            assert_int_equal(rad_quantize_row(enc, x, out, N), RAD_E_ARG);
            assert_non_null(strstr(rad_error_message(), "past what an f16 scale can carry"));
        }
        x[300] = 0.5f;

        assert_int_equal(rad_quantize_row(enc, x, out, N - 16), RAD_E_ARG);
        assert_int_equal(rad_quantize_row(enc, x, out, -32), RAD_E_ARG);
        assert_int_equal(rad_quantize_row(enc, NULL, out, N), RAD_E_ARG);
        assert_int_equal(rad_quantize_row(enc, x, NULL, N), RAD_E_ARG);
        assert_int_equal(rad_quantize_row(enc, NULL, NULL, 0), 0);
    }
    /* q4_1 and q5_1 store the block's minimum as an f16: -70000 does not fit */
    for (int k = 0; k < 32; k++) x[k] = -70000.0f + (float)k;
    assert_int_equal(rad_quantize_row(RAD_ENC_Q4_1, x, out, 32), RAD_E_ARG);
    assert_int_equal(rad_quantize_row(RAD_ENC_Q5_1, x, out, 32), RAD_E_ARG);
    assert_int_equal(rad_quantize_row(RAD_ENC_Q4_0, x, out, 32), 0);   /* a scale of 8750 does */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_f16_rounding),
        cmocka_unit_test(test_16bit_cross),
        cmocka_unit_test(test_q8_0_known_bytes),
        cmocka_unit_test(test_q8_0_from_16bit),
        cmocka_unit_test(test_q8_0_round_trip_error),
        cmocka_unit_test(test_q8_0_extremes),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_quantize_supported),
        cmocka_unit_test(test_vectors_byte_identical),
        cmocka_unit_test(test_kquant_vectors_byte_identical),
        cmocka_unit_test(test_recipe_gemma3_270m),
        cmocka_unit_test(test_recipe_rules),
        cmocka_unit_test(test_round_trip_errors),
        cmocka_unit_test(test_quantize_edge_blocks),
        cmocka_unit_test(test_quantize_from_16bit),
        cmocka_unit_test(test_quantize_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
