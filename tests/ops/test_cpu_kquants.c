/*
** test_cpu_kquants.c: the cpu library's k-quant dot products and their
** Q8_K activation quantizer, called directly (they are hidden inside
** cpu.so, so the Makefile links their objects into this program).
**
** What is pinned:
**  - Q8_K bytes: hand-made blocks, the quantizer against the formula
**    written independently here (nearbyintf in place of ggml's bit trick),
**    and every ISA's quantizer writing the very bytes the portable one does.
**  - Each dot, on every ISA level this machine runs, against a double sum
**    of the dequantized weight (rad_dequant_row, ref's definition) times
**    the dequantized Q8_K activation: equal to within f32 rounding of the
**    block scale products, a bound derived below, not a fitted tolerance.
**  - Against the exact f32 activations (what ref computes): NMSE at most
**    5e-4 over a realistic matrix (docs/OPS.md's matmul limit).
**  - Tiles give, element for element, the single dot's bits.
**  - Weights from the real quantizers (formats/quantize_kquants.c), from
**    random bytes (every code and scale pattern, the int16 sums at their
**    extremes), and from the real Gemma 3 270M Q4_K_M file when it is in
**    the model cache (skipped with a message otherwise; CI=true fails).
*/
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../formats/gguf.h"
#include "../../formats/quantize.h"
#include "../../kernels/cpu/cpu_internal.h"
#include "../../kernels/cpu/kquants.h"
#include "../../kernels/ops/rad_dequant.h"

/* The dispatch tables, which cpu_library.c owns inside the library. */
CpuEncKernels cpu_enc[RAD_ENC_COUNT];
CpuActQuantFn cpu_act_quant[CPU_ACT_COUNT];

/* ISA files are linked when built; weak so a missing one reads as NULL. */
#if defined(__x86_64__)
__attribute__((weak)) void cpu_fill_kquants_avx2(void);
__attribute__((weak)) void cpu_fill_kquants_avx512(void);
#endif
#if defined(__aarch64__)
__attribute__((weak)) void cpu_fill_kquants_neon(void);
#endif

static const int ENCS[] = {RAD_ENC_Q2_K, RAD_ENC_Q3_K, RAD_ENC_Q4_K, RAD_ENC_Q5_K, RAD_ENC_Q6_K};
#define N_ENCS 5

static const char *enc_name(int enc)
{
    switch (enc) {
    case RAD_ENC_Q2_K:
        return "q2_k";
    case RAD_ENC_Q3_K:
        return "q3_k";
    case RAD_ENC_Q4_K:
        return "q4_k";
    case RAD_ENC_Q5_K:
        return "q5_k";
    default:
        return "q6_k";
    }
}

/* ------------------------------------------------------------ ISA levels */

typedef struct Isa {
    const char *name;
    int level;
    void (*fill)(void); /* the ISA's own file */
} Isa;

static Isa isas[4];
static int n_isas;

/* Fill the tables as cpu_library.c does for `isa`: portable, then each
** level up to it. */
static void use_isa(const Isa *isa)
{
    memset(cpu_enc, 0, sizeof cpu_enc);
    memset(cpu_act_quant, 0, sizeof cpu_act_quant);
    cpu_fill_kquants_portable();
#if defined(__x86_64__)
    if (isa->level >= CPU_ISA_AVX2) cpu_fill_kquants_avx2();
    if (isa->level >= CPU_ISA_AVX512) cpu_fill_kquants_avx512();
#elif defined(__aarch64__)
    if (isa->level == CPU_ISA_NEON) cpu_fill_kquants_neon();
#endif
}

/* The levels this machine runs whose file is built; says which it skips. */
static int setup_isas(void **state)
{
    (void)state;
    int have = cpu_isa_detect();
    isas[n_isas++] = (Isa){"portable", CPU_ISA_PORTABLE, cpu_fill_kquants_portable};
#if defined(__x86_64__)
    Isa x86[] = {{"avx2", CPU_ISA_AVX2, cpu_fill_kquants_avx2},
                 {"avx512", CPU_ISA_AVX512, cpu_fill_kquants_avx512}};
    for (int i = 0; i < 2; i++) {
        if (!x86[i].fill)
            printf("# %s: no kernel file built\n", x86[i].name);
        else if (have < x86[i].level)
            printf("# %s: compiled, not run (this machine lacks it)\n", x86[i].name);
        else
            isas[n_isas++] = x86[i];
    }
#elif defined(__aarch64__)
    if (!cpu_fill_kquants_neon)
        printf("# neon: no kernel file built\n");
    else if (have != CPU_ISA_NEON)
        printf("# neon: compiled, not run (no dotprod)\n");
    else
        isas[n_isas++] = (Isa){"neon", CPU_ISA_NEON, cpu_fill_kquants_neon};
#endif
    return 0;
}

/* ------------------------------------------------------------ test data */

static uint64_t rng;

/* Each test starts from its own seed, so its data do not depend on which
** tests or ISA levels ran before it. */
static void seed(uint64_t s)
{
    rng = 0x9e3779b97f4a7c15ull * (s + 1);
}

static uint64_t next_u64(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(void)
{
    return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

static float gauss(void)
{
    double u = uniform(), v = uniform();
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

/* An activation row as a transformer's matmul inputs look: heavy-tailed
** (Student's t, 4 degrees of freedom) with a row scale.  The tail decides
** the Q8_K block scale and so the activation rounding error: on such rows
** Q8_K alone costs an NMSE of about 1.6e-4 (1.2e-4 .. 2.6e-4 over sets of 8
** rows) against exact f32 activations, as on Gemma 3 270M's real ffn_down
** inputs (1.7e-4, measured with gguf-py); plain gaussians would flatter it
** (5e-5), 3 degrees of freedom would be harsher than the model (3e-4). */
static void activation_row(float *x, int64_t K)
{
    float scale = 0.2f + 3.0f * (float)uniform();
    for (int64_t k = 0; k < K; k++) {
        float chi2 = 0;
        for (int i = 0; i < 4; i++) {
            float g = gauss();
            chi2 += g * g;
        }
        x[k] = scale * gauss() / sqrtf(chi2 / 4.0f + 1e-12f);
    }
}

/* A weight row: gaussian, a per-row scale, a mean offset on some rows (so
** the offsets of q2/q4/q5_k matter). */
static void weight_row(float *w, int64_t K)
{
    float scale = 0.01f + 0.05f * (float)uniform(), mean = (next_u64() % 3 == 0) ? 0.5f * scale : 0.0f;
    for (int64_t k = 0; k < K; k++) w[k] = mean + scale * gauss();
}

static size_t wbytes(int enc, int64_t K)
{
    return (size_t)rad_encoding_row_bytes(enc, K);
}
static size_t abytes(int64_t K)
{
    return (size_t)(K / KQ_N) * Q8K_BYTES;
}

/* N quantized weight rows of K, made by the real quantizer. */
static uint8_t *quantized_rows(int enc, int64_t N, int64_t K)
{
    uint8_t *w = malloc(wbytes(enc, K) * N);
    float *f = malloc(sizeof(float) * K);
    for (int64_t n = 0; n < N; n++) {
        weight_row(f, K);
        assert_int_equal(rad_quantize_row(enc, f, w + n * wbytes(enc, K), K), 0);
    }
    free(f);
    return w;
}

/* --------------------------------------------------- the double reference */

/* The offsets part of each weight element, -dmin * m (0 for q3_k and
** q6_k): the row decoded with every code set to zero. */
static void offsets(int enc, const uint8_t *row, int64_t K, float *o)
{
    size_t rb = wbytes(enc, K), bb = rb / (size_t)(K / KQ_N);
    uint8_t *z = malloc(rb);
    memcpy(z, row, rb);
    for (int64_t b = 0; b < K / KQ_N; b++) {
        uint8_t *blk = z + b * bb;
        if (enc == RAD_ENC_Q2_K)
            memset(blk + Q2K_QS, 0, 64);
        else if (enc == RAD_ENC_Q4_K)
            memset(blk + Q4K_QS, 0, 128);
        else if (enc == RAD_ENC_Q5_K)
            memset(blk + Q5K_QH, 0, 160);
    }
    if (enc == RAD_ENC_Q3_K || enc == RAD_ENC_Q6_K)
        memset(o, 0, sizeof(float) * K);
    else
        assert_int_equal(rad_dequant_row(enc, z, o, K), 0);
    free(z);
}

/* The dequantized Q8_K activation, d * q, exact in double. */
static void act_values(const uint8_t *a, int64_t K, double *v)
{
    for (int64_t b = 0; b < K / KQ_N; b++, a += Q8K_BYTES) {
        float d = kq_f32(a + Q8K_D);
        for (int j = 0; j < KQ_N; j++) v[b * KQ_N + j] = (double)d * ((const int8_t *)(a + Q8K_QS))[j];
    }
}

typedef struct Ref {
    double sum;   /* sum_k w_k a_k */
    double bound; /* how far an f32 kernel may be from it */
} Ref;

/* The weight row as ref decodes it times the Q8_K activation, in double,
** and the rounding bound for a kernel.  A kernel forms per block
** t = (d_w d_a) * isum and u = (dmin_w d_a) * msum from exact integers,
** each with at most three f32 roundings, and adds the blocks' t - u in
** f32 (ISA kernels in up to 8 lanes, then a sum of the lanes); ref's
** decoded weights round once each.  With u = 2^-24 and
** M = sum_k |a_k| (|q part of w_k| + |offset part of w_k|) >= sum_b |t_b| + |u_b|,
** the error is below (n_blocks + 8) u M; the bound allows twice that. */
static Ref reference(int enc, const uint8_t *w, const uint8_t *a, int64_t K)
{
    float *wf = malloc(sizeof(float) * K), *o = malloc(sizeof(float) * K);
    double *av = malloc(sizeof(double) * K);
    assert_int_equal(rad_dequant_row(enc, w, wf, K), 0);
    offsets(enc, w, K, o);
    act_values(a, K, av);
    double s = 0, m = 0;
    for (int64_t k = 0; k < K; k++) {
        s += (double)wf[k] * av[k];
        m += fabs(av[k]) * (fabs((double)wf[k] - o[k]) + fabs((double)o[k]));
    }
    free(wf), free(o), free(av);
    return (Ref){s, 2.0 * (double)(K / KQ_N + 8) * m * 0x1p-24};
}

/* --------------------------------------------------------------- Q8_K */

static void q8k(const float *x, uint8_t *dst, int64_t K)
{
    cpu_quantize_row_q8k(x, dst, K);
}

static int8_t code(const uint8_t *a, int j)
{
    return ((const int8_t *)(a + Q8K_QS))[j];
}

/* Blocks worked by hand. */
static void test_q8k_by_hand(void **state)
{
    (void)state;
    float x[2 * KQ_N];
    uint8_t a[2 * Q8K_BYTES];
    /* block 0: x_j = j - 100, the extreme is +155 at j = 255: iscale =
    ** -127/155, so q_255 = -127 and q_100 = 0; d = -155/127 */
    for (int j = 0; j < KQ_N; j++) x[j] = (float)(j - 100);
    /* block 1: zero but for -127/64 at 3 and +127/64 at 10: the first
    ** extreme wins, max = -127/64, iscale = 64 (exact), so q_3 = -127 and
    ** q_10 = +127; 0.5, 1.5 and 2.5 after scaling round to even: 0, 2, 2 */
    memset(x + KQ_N, 0, sizeof(float) * KQ_N);
    x[KQ_N + 3] = -127.0f / 64;
    x[KQ_N + 10] = 127.0f / 64;
    x[KQ_N + 4] = 0.5f / 64;
    x[KQ_N + 5] = 1.5f / 64;
    x[KQ_N + 6] = 2.5f / 64;
    q8k(x, a, 2 * KQ_N);
    assert_true(kq_f32(a) == 1.0f / (-127.0f / 155.0f));
    assert_int_equal(code(a, 255), -127);
    assert_int_equal(code(a, 100), 0);
    assert_int_equal(code(a, 0), 82); /* -100 * -127/155 = 81.94 */
    const uint8_t *b1 = a + Q8K_BYTES;
    assert_true(kq_f32(b1) == 1.0f / 64);
    assert_int_equal(code(b1, 3), -127);
    assert_int_equal(code(b1, 10), 127);
    assert_int_equal(code(b1, 4), 0);
    assert_int_equal(code(b1, 5), 2);
    assert_int_equal(code(b1, 6), 2);
    assert_int_equal(kq_bsum(b1, 0), -127 + 127 + 0 + 2 + 2);
    for (int g = 1; g < 16; g++) assert_int_equal(kq_bsum(b1, g), 0);
    /* an all-zero block: d = 0, codes and sums 0 */
    memset(x, 0, sizeof(float) * KQ_N);
    memset(a, 0x55, sizeof a);
    q8k(x, a, KQ_N);
    assert_true(kq_f32(a) == 0.0f);
    for (int j = 0; j < KQ_N; j++) assert_int_equal(code(a, j), 0);
    for (int g = 0; g < 16; g++) assert_int_equal(kq_bsum(a, g), 0);
}

/* The quantizer against ggml's rule written another way: nearbyintf
** (round to nearest even, the default mode) in place of the bit trick. */
static void test_q8k_formula(void **state)
{
    (void)state;
    seed(1);
    enum { K = 8 * KQ_N };
    float x[K];
    uint8_t a[K / KQ_N * Q8K_BYTES];
    for (int rep = 0; rep < 50; rep++) {
        activation_row(x, K);
        q8k(x, a, K);
        for (int b = 0; b < K / KQ_N; b++) {
            const float *xb = x + b * KQ_N;
            const uint8_t *ab = a + b * Q8K_BYTES;
            int first = 0;
            for (int j = 1; j < KQ_N; j++)
                if (fabsf(xb[j]) > fabsf(xb[first])) first = j;
            float iscale = -127.0f / xb[first];
            assert_true(kq_f32(ab) == 1.0f / iscale);
            for (int g = 0; g < 16; g++) {
                int sum = 0;
                for (int j = 16 * g; j < 16 * g + 16; j++) {
                    float v = nearbyintf(iscale * xb[j]);
                    int q = v > 127.0f ? 127 : (int)v;
                    assert_int_equal(code(ab, j), q);
                    sum += q;
                }
                assert_int_equal(kq_bsum(ab, g), sum);
            }
        }
    }
}

/* Rows that probe the quantizer's corners: ties for the extreme, halves
** after scaling, zeros, denormals, a NaN and an infinity. */
static void tricky_row(float *x, int64_t K, int kind)
{
    activation_row(x, K);
    for (int64_t b = 0; b < K / KQ_N; b++) {
        float *xb = x + b * KQ_N;
        switch ((kind + b) % 6) {
        case 0:
            xb[7] = 4.0f, xb[200] = -4.0f, xb[31] = 4.0f;
            break; /* +max first */
        case 1:
            xb[9] = -4.0f, xb[12] = 4.0f;
            break; /* -max first */
        case 2:    /* exact halves */
            xb[0] = 127.0f;
            for (int j = 1; j < KQ_N; j++) xb[j] = (float)((j % 40) - 20) + 0.5f;
            break;
        case 3:
            memset(xb, 0, sizeof(float) * KQ_N);
            xb[100] = 1e-42f;
            xb[101] = -3e-42f;
            break;
        case 4:
            xb[50] = NAN;
            break;
        case 5:
            xb[77] = INFINITY;
            xb[78] = -INFINITY;
            break;
        }
    }
}

/* Every ISA's quantizer writes the portable one's bytes. */
static void test_q8k_isa_bytes(void **state)
{
    (void)state;
    seed(2);
    enum { K = 12 * KQ_N };
    float x[K];
    uint8_t want[K / KQ_N * Q8K_BYTES], got[sizeof want];
    for (int i = 0; i < n_isas; i++) {
        use_isa(&isas[i]);
        CpuActQuantFn fn = cpu_act_quant[CPU_ACT_Q8_K];
        assert_non_null(fn);
        for (int rep = 0; rep < 60; rep++) {
            if (rep % 2)
                tricky_row(x, K, rep);
            else
                activation_row(x, K);
            cpu_quantize_row_q8k(x, want, K);
            memset(got, 0xa5, sizeof got);
            fn(x, got, K);
            assert_memory_equal(got, want, sizeof want);
        }
    }
}

/* ---------------------------------------------------------------- dots */

/* The tables: every k-quant served, paired with Q8_K, by the ISA's file
** where it has a kernel; a tile's limits are set when it has one. */
static void test_tables(void **state)
{
    (void)state;
    for (int i = 0; i < n_isas; i++) {
        use_isa(&isas[i]);
        assert_non_null(cpu_act_quant[CPU_ACT_Q8_K]);
        for (int e = 0; e < N_ENCS; e++) {
            const CpuEncKernels *k = &cpu_enc[ENCS[e]];
            assert_int_equal(k->act_fmt, CPU_ACT_Q8_K);
            assert_non_null(k->dot);
            assert_non_null(k->isa);
            if (k->tile) assert_true(k->tile_act >= 1 && k->tile_w >= 1);
            printf("# %-8s %s: %s%s\n", isas[i].name, enc_name(ENCS[e]), k->isa, k->tile ? " + tile" : "");
        }
    }
}

/* dot(w, a) on the current tables against the double reference. */
static double check_dot(int enc, const uint8_t *w, const uint8_t *a, int64_t K, float *got)
{
    Ref r = reference(enc, w, a, K);
    float y = NAN;
    cpu_enc[enc].dot(K, w, a, &y);
    if (!(fabs((double)y - r.sum) <= r.bound))
        fail_msg("%s K=%lld: dot %.9g, reference %.9g, bound %.3g", enc_name(enc), (long long)K, (double)y,
                 r.sum, r.bound);
    if (got) *got = y;
    return r.bound > 0 ? fabs((double)y - r.sum) / r.bound : 0.0;
}

static const int64_t SHAPES[] = {256, 512, 768, 2816, 4096};
#define N_SHAPES 5

/* Quantizer-made rows, ragged K, every ISA: within the rounding bound; and
** every ISA within twice that bound of portable. */
static void test_dot_exact(void **state)
{
    (void)state;
    seed(3);
    enum { N = 24 };
    for (int e = 0; e < N_ENCS; e++) {
        int enc = ENCS[e];
        double worst[4] = {0};
        for (int s = 0; s < N_SHAPES; s++) {
            int64_t K = SHAPES[s];
            uint8_t *w = quantized_rows(enc, N, K), *a = malloc(abytes(K) * N);
            float *x = malloc(sizeof(float) * K), port[N];
            for (int n = 0; n < N; n++) {
                activation_row(x, K);
                q8k(x, a + n * abytes(K), K);
            }
            for (int i = 0; i < n_isas; i++) {
                use_isa(&isas[i]);
                for (int n = 0; n < N; n++) {
                    const uint8_t *wn = w + n * wbytes(enc, K), *an = a + n * abytes(K);
                    float y;
                    double ratio = check_dot(enc, wn, an, K, &y);
                    if (ratio > worst[i]) worst[i] = ratio;
                    if (i == 0)
                        port[n] = y;
                    else {
                        Ref r = reference(enc, wn, an, K);
                        assert_true(fabs((double)y - port[n]) <= 2.0 * r.bound);
                    }
                }
            }
            free(w), free(a), free(x);
        }
        for (int i = 0; i < n_isas; i++)
            printf("# %s %-8s worst |dot - ref| / bound = %.3f\n", enc_name(enc), isas[i].name, worst[i]);
    }
}

/* Random bytes as weight blocks (finite scales): every code and scale
** pattern, with activations at +-127 so the int16 pair sums reach their
** largest.  Catches saturation and bit-position slips a smooth row hides. */
static void test_dot_random_bytes(void **state)
{
    (void)state;
    seed(4);
    enum { K = 8 * KQ_N };
    uint8_t w[8 * 210], a[K / KQ_N * Q8K_BYTES];
    float x[K];
    for (int e = 0; e < N_ENCS; e++) {
        int enc = ENCS[e];
        size_t bb = wbytes(enc, KQ_N);
        for (int rep = 0; rep < 40; rep++) {
            for (size_t i = 0; i < sizeof w; i++) w[i] = (uint8_t)next_u64();
            for (int b = 0; b < K / KQ_N; b++) {
                uint8_t *blk = w + b * bb;
                /* f16 scales of either sign, exponent 9..20: finite, normal */
                int d_at = enc == RAD_ENC_Q2_K   ? Q2K_D
                           : enc == RAD_ENC_Q3_K ? Q3K_D
                           : enc == RAD_ENC_Q6_K ? Q6K_D
                                                 : 0;
                int n_d = enc == RAD_ENC_Q3_K || enc == RAD_ENC_Q6_K ? 1 : 2;
                for (int i = 0; i < n_d; i++) {
                    uint16_t h = (uint16_t)((next_u64() & 0x83ff) | (9 + next_u64() % 12) << 10);
                    blk[d_at + 2 * i] = (uint8_t)h;
                    blk[d_at + 2 * i + 1] = (uint8_t)(h >> 8);
                }
            }
            for (int k = 0; k < K; k++) x[k] = (rep % 3 == 0) ? ((next_u64() & 1) ? 1.0f : -1.0f) : gauss();
            q8k(x, a, K);
            for (int i = 0; i < n_isas; i++) {
                use_isa(&isas[i]);
                check_dot(enc, w, a, K, NULL);
            }
        }
    }
}

/* Against the exact f32 activations (what ref computes): a realistic
** matrix, NMSE at most 5e-4 on every ISA. */
static void test_dot_nmse(void **state)
{
    (void)state;
    seed(5);
    enum { M = 8, N = 128, K = 2816 };
    float *x = malloc(sizeof(float) * K * M), *wf = malloc(sizeof(float) * K);
    double *want = malloc(sizeof(double) * M * N);
    uint8_t *a = malloc(abytes(K) * M);
    for (int m = 0; m < M; m++) {
        activation_row(x + m * K, K);
        q8k(x + m * K, a + m * abytes(K), K);
    }
    for (int e = 0; e < N_ENCS; e++) {
        int enc = ENCS[e];
        uint8_t *w = quantized_rows(enc, N, K);
        for (int n = 0; n < N; n++) {
            assert_int_equal(rad_dequant_row(enc, w + n * wbytes(enc, K), wf, K), 0);
            for (int m = 0; m < M; m++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)wf[k] * x[m * K + k];
                want[m * N + n] = s;
            }
        }
        for (int i = 0; i < n_isas; i++) {
            use_isa(&isas[i]);
            double num = 0, den = 0;
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    float y;
                    cpu_enc[enc].dot(K, w + n * wbytes(enc, K), a + m * abytes(K), &y);
                    double d = y - want[m * N + n];
                    num += d * d;
                    den += want[m * N + n] * want[m * N + n];
                }
            printf("# %s %-8s NMSE vs f32 activations %.2e (%dx%dx%d)\n", enc_name(enc), isas[i].name,
                   num / den, M, N, K);
            assert_true(num / den <= 5e-4);
        }
        free(w);
    }
    free(x), free(wf), free(want), free(a);
}

/* Tiles: each output bit for bit the single dot's, for every tile size up
** to the entry's limits, with padded strides. */
static void test_tiles(void **state)
{
    (void)state;
    seed(6);
    enum { K = 1280, NW = 9, NA = 9 };
    float x[K];
    int tested = 0;
    for (int e = 0; e < N_ENCS; e++) {
        int enc = ENCS[e];
        size_t ws = wbytes(enc, K) + 6, as = abytes(K) + 8; /* padded strides */
        uint8_t *w = calloc(NW, ws), *a = calloc(NA, as), *tmp = quantized_rows(enc, NW, K);
        for (int n = 0; n < NW; n++) memcpy(w + n * ws, tmp + n * wbytes(enc, K), wbytes(enc, K));
        for (int r = 0; r < NA; r++) {
            activation_row(x, K);
            q8k(x, a + r * as, K);
        }
        for (int i = 0; i < n_isas; i++) {
            use_isa(&isas[i]);
            const CpuEncKernels *k = &cpu_enc[enc];
            if (!k->tile) continue;
            tested++;
            float want[NA][NW];
            for (int r = 0; r < NA; r++)
                for (int c = 0; c < NW; c++) k->dot(K, w + c * ws, a + r * as, &want[r][c]);
            for (int na = 1; na <= k->tile_act && na <= NA; na++)
                for (int nw = 1; nw <= k->tile_w && nw <= NW; nw++) {
                    float out[NA][NW + 3];
                    memset(out, 0, sizeof out);
                    /* tile at offset (1, 1) of the matrix: unaligned rows */
                    k->tile(K, w + ws, ws, nw, a + as, as, na, &out[0][0], NW + 3);
                    for (int r = 0; r < na; r++)
                        for (int c = 0; c < nw; c++)
                            if (memcmp(&out[r][c], &want[r + 1][c + 1], 4) != 0)
                                fail_msg("%s %s tile %dx%d: (%d,%d) %.9g, dot %.9g", isas[i].name,
                                         enc_name(enc), na, nw, r, c, (double)out[r][c],
                                         (double)want[r + 1][c + 1]);
                }
        }
        free(w), free(a), free(tmp);
    }
    printf("# %d (ISA, encoding) tiles checked\n", tested);
}

/* ------------------------------------------------------ real model rows */

static const char *model_path(char *buf, size_t n)
{
    const char *dir = getenv("RADIANCE_MODELS"), *home = getenv("HOME");
    if (dir && *dir)
        snprintf(buf, n, "%s/gemma-3-270m-q4_k_m.gguf", dir);
    else
        snprintf(buf, n, "%s/.cache/radiance/models/gemma-3-270m-q4_k_m.gguf", home ? home : "");
    return buf;
}

/* Rows of the real Gemma 3 270M Q4_K_M: its q4_k and q6_k tensors, the
** bound and NMSE checks above on every ISA. */
static void test_gguf_rows(void **state)
{
    (void)state;
    seed(7);
    char path[1024];
    RadGguf *g = NULL;
    if (rad_gguf_open(model_path(path, sizeof path), &g) != 0) {
        const char *ci = getenv("CI");
        if (ci && strcmp(ci, "true") == 0) fail_msg("%s: missing (run tests/models/fetch.sh)", path);
        printf("# SKIPPED real model rows: %s not found (tests/models/fetch.sh fetches it)\n", path);
        skip();
    }
    static const struct {
        const char *name;
        int enc;
    } want[] = {
        {"blk.0.attn_output.weight", RAD_ENC_Q4_K},
        {"blk.0.ffn_down.weight", RAD_ENC_Q6_K},
        {"blk.2.ffn_down.weight", RAD_ENC_Q4_K},
    };
    for (size_t t = 0; t < sizeof want / sizeof want[0]; t++) {
        const RadGgufTensor *tt = rad_gguf_find_tensor(g, want[t].name);
        assert_non_null(tt);
        assert_int_equal(tt->enc, want[t].enc);
        int enc = tt->enc;
        enum { M = 16 };
        int64_t K = tt->ne[0], N = tt->ne[1] < 96 ? tt->ne[1] : 96;
        float *x = malloc(sizeof(float) * K * M), *wf = malloc(sizeof(float) * K);
        uint8_t *a = malloc(abytes(K) * M);
        for (int m = 0; m < M; m++) {
            activation_row(x + m * K, K);
            q8k(x + m * K, a + m * abytes(K), K);
        }
        for (int i = 0; i < n_isas; i++) {
            use_isa(&isas[i]);
            double num = 0, den = 0, worst = 0;
            for (int64_t n = 0; n < N; n++) {
                const uint8_t *wn = (const uint8_t *)tt->data + n * wbytes(enc, K);
                assert_int_equal(rad_dequant_row(enc, wn, wf, K), 0);
                for (int m = 0; m < M; m++) {
                    float y;
                    double ratio = check_dot(enc, wn, a + m * abytes(K), K, &y);
                    if (ratio > worst) worst = ratio;
                    double exact = 0;
                    for (int64_t k = 0; k < K; k++) exact += (double)wf[k] * x[m * K + k];
                    num += (y - exact) * (y - exact);
                    den += exact * exact;
                }
            }
            printf("# %s (%s, K=%lld, %lld rows x %d) %-8s worst/bound %.3f, NMSE vs f32 %.2e\n",
                   want[t].name, enc_name(enc), (long long)K, (long long)N, M, isas[i].name, worst,
                   num / den);
            assert_true(num / den <= 5e-4);
        }
        free(x), free(wf), free(a);
    }
    rad_gguf_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8k_by_hand),   cmocka_unit_test(test_q8k_formula),
        cmocka_unit_test(test_q8k_isa_bytes), cmocka_unit_test(test_tables),
        cmocka_unit_test(test_dot_exact),     cmocka_unit_test(test_dot_random_bytes),
        cmocka_unit_test(test_dot_nmse),      cmocka_unit_test(test_tiles),
        cmocka_unit_test(test_gguf_rows),
    };
    return cmocka_run_group_tests(tests, setup_isas, NULL);
}
