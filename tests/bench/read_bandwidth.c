/*
** read_bandwidth.c: the machine's memory read bandwidth with T threads, the
** ceiling a memory-bound decode step can reach (bytes of weights per token
** times tokens/s cannot exceed it).  tests/bench/bench_vs_llamacpp.py builds
** and runs it beside the two programs, so the ratio is measured on the same
** machine at the same time.
**
**   read_bandwidth THREADS [MiB] [REPS]     prints "read_gbs <best> <median>"
**
** Each thread sums its own contiguous share of one buffer (default 1 GiB,
** far larger than any cache) as 64-bit words in eight independent lanes, so
** the compiler vectorises the loop and the loads, not the adds, set the pace;
** threads start together at a barrier and the pass ends when the last one
** finishes.  Best and median of REPS passes, in 1e9 bytes per second.
*/
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Share {
    const uint64_t *words;
    size_t n;
    uint64_t sum;               /* kept so the reads cannot be optimised away */
} Share;

static pthread_barrier_t start_line, finish_line;
static int passes;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t sum_words(const uint64_t *w, size_t n)
{
    uint64_t lane[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) lane[k] += w[i + k];
    for (; i < n; i++) lane[0] += w[i];
    uint64_t s = 0;
    for (int k = 0; k < 8; k++) s += lane[k];
    return s;
}

static void *reader(void *arg)
{
    Share *s = arg;
    for (int p = 0; p < passes; p++) {
        pthread_barrier_wait(&start_line);
        s->sum += sum_words(s->words, s->n);
        pthread_barrier_wait(&finish_line);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
    passes = argc > 3 ? atoi(argv[3]) : 10;
    if (threads < 1 || threads > 256 || mib < 64 || passes < 1) {
        fprintf(stderr, "usage: read_bandwidth THREADS [MiB >= 64] [REPS]\n");
        return 2;
    }
    size_t bytes = mib << 20, n = bytes / sizeof(uint64_t);
    uint64_t *buf = aligned_alloc(4096, bytes);
    if (!buf) {
        fprintf(stderr, "read_bandwidth: out of memory for %zu MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < n; i++) buf[i] = (i + 1) * 0x9E3779B97F4A7C15ULL ^ (i >> 7);   /* every page is real */

    pthread_barrier_init(&start_line, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&finish_line, NULL, (unsigned)threads + 1);
    Share *shares = calloc((size_t)threads, sizeof *shares);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    double *gbs = calloc((size_t)passes, sizeof *gbs);
    if (!shares || !ids || !gbs) return 1;
    for (int t = 0; t < threads; t++) {
        size_t lo = n * (size_t)t / (size_t)threads, hi = n * (size_t)(t + 1) / (size_t)threads;
        shares[t].words = buf + lo;
        shares[t].n = hi - lo;
        pthread_create(&ids[t], NULL, reader, &shares[t]);
    }
    for (int p = 0; p < passes; p++) {
        pthread_barrier_wait(&start_line);
        double t0 = now_s();
        pthread_barrier_wait(&finish_line);
        gbs[p] = (double)bytes / (now_s() - t0) / 1e9;
    }
    uint64_t check = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        check += shares[t].sum;
    }
    qsort(gbs, (size_t)passes, sizeof *gbs, cmp_double);
    printf("read_gbs %.2f %.2f (threads %d, %zu MiB, %d passes, checksum %llx)\n", gbs[passes - 1],
           gbs[passes / 2], threads, mib, passes, (unsigned long long)check);
    free(buf);
    free(shares);
    free(ids);
    free(gbs);
    return 0;
}
