/*
** bench_cpu_kquants.c: single-thread speed of the k-quant dot products on a
** decode-shaped product (one activation row times N weight rows), in GB/s
** of weights streamed, next to llama.cpp's own kernels on the same bytes.
** Not part of `make test`; build and run by hand:
**
**   make build/tests/ops/test_cpu_kquants        (builds the objects)
**   cc -O2 -std=c11 -D_GNU_SOURCE -Ibase -o build/bench_cpu_kquants \
**      tests/ops/bench_cpu_kquants.c build/obj/kernels/cpu/dot_kquants*.o \
**      build/obj/kernels/cpu/act_q8k*.o build/obj/kernels/cpu/cpu_features.o -ldl -lm
**   build/bench_cpu_kquants [path/to/libggml-cpu.so]
**
** With a libggml-cpu.so (llama-cpp-python ships one) it also times ggml's
** vec_dot for the same rows, and checks that ggml's Q8_K quantizer writes
** our bytes and that its dot products agree with ours.
**
** "hot": the same matrix again and again (16 x 2048 sits in L1, so that
** row measures the arithmetic alone; larger ones in L2/L3); "cold": a ring
** of copies larger than the last-level cache, so every byte comes from
** DRAM as in real decoding.  Times are the thread's CPU time, so other
** processes on a shared machine do not count against the kernels.
*/
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../kernels/cpu/cpu_internal.h"
#include "../../kernels/cpu/kquants.h"

CpuEncKernels cpu_enc[RAD_ENC_COUNT];
CpuActQuantFn cpu_act_quant[CPU_ACT_COUNT];

#if defined(__x86_64__)
__attribute__((weak)) void cpu_fill_kquants_avx2(void);
__attribute__((weak)) void cpu_fill_kquants_avx512(void);
#endif

typedef void (*GgmlVecDot)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by,
                           int nrc);
typedef void (*GgmlFromFloat)(const float *x, void *y, int64_t k);
struct GgmlTraitsCpu {
    GgmlFromFloat from_float;
    GgmlVecDot vec_dot;
    int vec_dot_type;
    int64_t nrows;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Random weight blocks with finite f16 scales (speed does not depend on values). */
static void fill_weights(int enc, uint8_t *w, size_t bytes)
{
    size_t bb = enc == RAD_ENC_Q4_K ? Q4K_BYTES : Q6K_BYTES;
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)next_u64();
    for (size_t b = 0; b + bb <= bytes; b += bb) {
        if (enc == RAD_ENC_Q4_K) {
            w[b + 0] = 0x00, w[b + 1] = 0x20; /* d = 2^-7 */
            w[b + 2] = 0x00, w[b + 3] = 0x1c; /* dmin = 2^-8 */
        } else {
            w[b + Q6K_D] = 0x00, w[b + Q6K_D + 1] = 0x20;
        }
    }
}

typedef void (*Gemv)(int enc, int64_t N, int64_t K, const uint8_t *w, const uint8_t *a, float *y, void *ctx);

static void gemv_ours(int enc, int64_t N, int64_t K, const uint8_t *w, const uint8_t *a, float *y, void *ctx)
{
    (void)ctx;
    size_t rb = (size_t)(K / KQ_N) * (enc == RAD_ENC_Q4_K ? Q4K_BYTES : Q6K_BYTES);
    CpuDotFn dot = cpu_enc[enc].dot;
    for (int64_t n = 0; n < N; n++) dot(K, w + n * rb, a, y + n);
}

static void gemv_ggml(int enc, int64_t N, int64_t K, const uint8_t *w, const uint8_t *a, float *y, void *ctx)
{
    GgmlVecDot dot = (GgmlVecDot)ctx;
    size_t rb = (size_t)(K / KQ_N) * (enc == RAD_ENC_Q4_K ? Q4K_BYTES : Q6K_BYTES);
    for (int64_t n = 0; n < N; n++) dot((int)K, y + n, 0, w + n * rb, 0, a, 0, 1);
}

/* GB/s streaming `copies` matrices in turn for about `seconds`. */
static double measure(Gemv g, void *ctx, int enc, int64_t N, int64_t K, uint8_t **mats, int copies,
                      const uint8_t *a, float *y)
{
    size_t bytes = (size_t)N * (size_t)(K / KQ_N) * (enc == RAD_ENC_Q4_K ? Q4K_BYTES : Q6K_BYTES);
    for (int i = 0; i < copies; i++) g(enc, N, K, mats[i], a, y, ctx); /* warm up */
    int batch = (int)(4.0e6 / (double)bytes) + 1; /* clock reads are system calls: not per product */
    double best = 0;
    for (int trial = 0; trial < 5; trial++) {
        int reps = 0;
        double t0 = now(), t;
        do {
            for (int i = 0; i < batch; i++, reps++) g(enc, N, K, mats[reps % copies], a, y, ctx);
        } while ((t = now() - t0) < 0.1);
        double gbs = (double)bytes * reps / t / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

int main(int argc, char **argv)
{
    struct GgmlTraitsCpu *(*traits)(int) = NULL;
    if (argc > 1) {
        void *lib = dlopen(argv[1], RTLD_NOW);
        if (!lib) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        void (*init)(void) = (void (*)(void))dlsym(lib, "ggml_cpu_init");
        traits = (struct GgmlTraitsCpu * (*)(int)) dlsym(lib, "ggml_get_type_traits_cpu");
        if (init) init();
    }
    int have = cpu_isa_detect();
    struct {
        const char *name;
        int level;
    } levels[] = {{"portable", CPU_ISA_PORTABLE}, {"avx2", CPU_ISA_AVX2}, {"avx512", CPU_ISA_AVX512}};

    const int encs[] = {RAD_ENC_Q4_K, RAD_ENC_Q6_K};
    const int64_t shapes[][2] = {{16, 2048}, {2048, 2048}, {8192, 2048}};
    float *x = malloc(sizeof(float) * 8192);
    for (int k = 0; k < 8192; k++) x[k] = (float)((int)(next_u64() % 2001) - 1000) / 300.0f;
    uint8_t *a = malloc(Q8K_BYTES * 32);
    cpu_quantize_row_q8k(x, a, 8192);

    if (traits) {
        /* ggml's Q8_K bytes against ours */
        uint8_t *ga = malloc(Q8K_BYTES * 32);
        traits(15)->from_float(x, ga, 8192);
        for (int b = 0; b < 32; b++)
            if (memcmp(a + b * Q8K_BYTES, ga + b * Q8K_BYTES, Q8K_BYTES) != 0)
                printf("Q8_K block %d differs from ggml's\n", b);
        printf("Q8_K: ggml's quantize_row_q8_K and ours %s\n",
               memcmp(a, ga, Q8K_BYTES * 32) == 0 ? "write identical bytes (32 blocks)" : "DIFFER");
        free(ga);
    }

    /* the activation quantizer itself, K = 2048 */
    for (int l = 0; l < 2; l++) {
        if (have < levels[l].level) continue;
        memset(cpu_enc, 0, sizeof cpu_enc);
        cpu_fill_kquants_portable();
#if defined(__x86_64__)
        if (levels[l].level >= CPU_ISA_AVX2 && cpu_fill_kquants_avx2) cpu_fill_kquants_avx2();
#endif
        int reps = 0;
        double t0 = now();
        while (now() - t0 < 0.2) cpu_act_quant[CPU_ACT_Q8_K](x, a, 2048), reps++;
        printf("Q8_K quantize K=2048 %-8s %.2f us\n", levels[l].name, (now() - t0) / reps * 1e6);
    }
    cpu_quantize_row_q8k(x, a, 8192);

    printf("\n%-5s %-11s %-9s %10s %10s\n", "enc", "N x K", "kernel", "hot GB/s", "cold GB/s");
    for (int e = 0; e < 2; e++) {
        int enc = encs[e];
        for (int s = 0; s < 3; s++) {
            int64_t N = shapes[s][0], K = shapes[s][1];
            size_t bytes = (size_t)N * (size_t)(K / KQ_N) * (enc == RAD_ENC_Q4_K ? Q4K_BYTES : Q6K_BYTES);
            int copies = (int)(512.0e6 / (double)bytes) + 1; /* far past any cache */
            uint8_t **mats = malloc(sizeof(uint8_t *) * copies);
            for (int i = 0; i < copies; i++) {
                mats[i] = malloc(bytes);
                fill_weights(enc, mats[i], bytes);
            }
            float *y = malloc(sizeof(float) * N), *y_ref = malloc(sizeof(float) * N);
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)N, (long long)K);
            const char *en = enc == RAD_ENC_Q4_K ? "q4_k" : "q6_k";
            GgmlVecDot gdot = traits ? traits(enc)->vec_dot : NULL;
            if (gdot) gemv_ggml(enc, N, K, mats[0], a, y_ref, gdot);
            for (int l = 0; l < 3; l++) {
                if (have < levels[l].level) continue;
                memset(cpu_enc, 0, sizeof cpu_enc);
                cpu_fill_kquants_portable();
#if defined(__x86_64__)
                if (levels[l].level >= CPU_ISA_AVX2 && cpu_fill_kquants_avx2) cpu_fill_kquants_avx2();
                if (levels[l].level >= CPU_ISA_AVX512 && cpu_fill_kquants_avx512) cpu_fill_kquants_avx512();
#endif
                double hot = measure(gemv_ours, NULL, enc, N, K, mats, 1, a, y);
                double cold = measure(gemv_ours, NULL, enc, N, K, mats, copies, a, y);
                gemv_ours(enc, N, K, mats[0], a, y, NULL);
                double maxdiff = 0, sq = 0; /* max |ours - ggml| over the rms of ggml's outputs */
                if (gdot)
                    for (int64_t n = 0; n < N; n++) {
                        double d = fabs((double)y[n] - y_ref[n]);
                        if (d > maxdiff) maxdiff = d;
                        sq += (double)y_ref[n] * y_ref[n];
                    }
                double maxrel = maxdiff / (sqrt(sq / (double)N) + 1e-30);
                printf("%-5s %-11s %-9s %10.1f %10.1f", en, shape, cpu_enc[enc].isa, hot, cold);
                if (gdot) printf("   max |ours - ggml| / rms %.1e", maxrel);
                printf("\n");
            }
            if (gdot) {
                double hot = measure(gemv_ggml, (void *)gdot, enc, N, K, mats, 1, a, y);
                double cold = measure(gemv_ggml, (void *)gdot, enc, N, K, mats, copies, a, y);
                printf("%-5s %-11s %-9s %10.1f %10.1f\n", en, shape, "ggml", hot, cold);
            }
            for (int i = 0; i < copies; i++) free(mats[i]);
            free(mats), free(y), free(y_ref);
        }
    }
    /* prefill: 4 activation rows per weight row, tile against 4 dots */
    printf("\n%-5s %-9s %26s %26s\n", "enc", "kernel", "dot x4 (ns / block / row)",
           "tile 4 (ns / block / row)");
    uint8_t *a4 = malloc(Q8K_BYTES * 8 * 4);
    for (int r = 0; r < 4; r++) cpu_quantize_row_q8k(x + 2048 * r, a4 + r * 8 * Q8K_BYTES, 2048);
    for (int e = 0; e < 2; e++) {
        int enc = encs[e];
        int64_t N = 64, K = 2048;
        size_t rb = (size_t)(K / KQ_N) * (enc == RAD_ENC_Q4_K ? Q4K_BYTES : Q6K_BYTES);
        uint8_t *w = malloc(rb * N);
        fill_weights(enc, w, rb * N);
        float out[4 * 64];
        for (int l = 1; l < 3; l++) {
            if (have < levels[l].level) continue;
            memset(cpu_enc, 0, sizeof cpu_enc);
            cpu_fill_kquants_portable();
#if defined(__x86_64__)
            if (cpu_fill_kquants_avx2) cpu_fill_kquants_avx2();
            if (levels[l].level >= CPU_ISA_AVX512 && cpu_fill_kquants_avx512) cpu_fill_kquants_avx512();
#endif
            const CpuEncKernels *k = &cpu_enc[enc];
            if (!k->tile) continue;
            double t_dot = 1e9, t_tile = 1e9;
            for (int trial = 0; trial < 5; trial++) {
                int reps = 0;
                double t0 = now(), t;
                do {
                    for (int i = 0; i < 50; i++, reps++)
                        for (int64_t n = 0; n < N; n++)
                            for (int r = 0; r < 4; r++)
                                k->dot(K, w + n * rb, a4 + r * 8 * Q8K_BYTES, &out[r * 64 + n]);
                } while ((t = now() - t0) < 0.1);
                if (t / reps < t_dot) t_dot = t / reps;
                reps = 0;
                t0 = now();
                do {
                    for (int i = 0; i < 50; i++, reps++)
                        for (int64_t n = 0; n < N; n += k->tile_w)
                            k->tile(K, w + n * rb, rb, k->tile_w, a4, 8 * Q8K_BYTES, 4, out + n, 64);
                } while ((t = now() - t0) < 0.1);
                if (t / reps < t_tile) t_tile = t / reps;
            }
            double per = (double)N * (double)(K / KQ_N) * 4;
            printf("%-5s %-9s %26.2f %26.2f\n", enc == RAD_ENC_Q4_K ? "q4_k" : "q6_k", k->isa,
                   t_dot / per * 1e9, t_tile / per * 1e9);
        }
        free(w);
    }
    free(a4);
    free(x), free(a);
    return 0;
}
