/*
** moe_routing.c: routing statistics of a mixture-of-experts model, for
** docs/BENCHMARKS.md ("Mixture of experts in memory").
**
**     build/tests/bench/moe_routing MODEL [-p 512] [-t 2] [-v]
**
** Opens MODEL as `radiance bench` does, switches on the cpu library's
** routing record (rad_cpu_moe_stats in kernels/cpu/ops_moe.c: each
** moe_gemm launch notes how many experts its step touched), runs one
** prefill step of P pseudo-random ids and one decode step, and prints one
** JSON object: per step kind, over every moe_gemm launch (three a layer:
** gate, up, down), the experts in a stack, the experts touched (mean, min,
** max), and the slots of the busiest expert (mean, max) next to the
** uniform share (slots / experts); -v adds each launch on stderr.  Needs the cpu library to serve
** moe_gemm (the default kernel order).
*/
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/include/radiance.h"

typedef int (*StatsFn)(int on, int64_t (*out)[5], int cap);

enum { CAP = 65536 };
static int64_t rec[CAP][5];

static void summary(const char *name, int n, int64_t rows)
{
    double touched = 0, busiest = 0;
    int64_t lo = INT64_MAX, hi = 0, b_hi = 0, slots = 0, experts = 0, launches = 0;
    for (int i = 0; i < n && i < CAP; i++) {
        if (rec[i][0] != rows) continue;
        launches++;
        slots = rec[i][1], experts = rec[i][2];
        touched += (double)rec[i][3];
        busiest += (double)rec[i][4];
        lo = rec[i][3] < lo ? rec[i][3] : lo;
        hi = rec[i][3] > hi ? rec[i][3] : hi;
        b_hi = rec[i][4] > b_hi ? rec[i][4] : b_hi;
    }
    if (!launches) {
        printf("\"%s\": null", name);
        return;
    }
    printf("\"%s\": {\"rows\": %lld, \"launches\": %lld, \"slots\": %lld, \"experts\": %lld, "
           "\"touched_mean\": %.2f, \"touched_min\": %lld, \"touched_max\": %lld, "
           "\"busiest_mean\": %.2f, \"busiest_max\": %lld, \"uniform_share\": %.2f}",
           name, (long long)rows, (long long)launches, (long long)slots, (long long)experts, touched / launches,
           (long long)lo, (long long)hi, busiest / launches, (long long)b_hi, (double)slots / (double)experts);
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    int p = 512, t = 2, verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) p = atoi(argv[++i]);
        else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) t = atoi(argv[++i]);
        else if (strcmp(argv[i], "-v") == 0) verbose = 1;
        else model = argv[i];
    }
    if (!model || p < 2) {
        fprintf(stderr, "usage: moe_routing MODEL [-p ROWS (>= 2)] [-t THREADS]\n");
        return 2;
    }
    const char *home = getenv("RADIANCE_HOME");
    char so[4096];
    snprintf(so, sizeof so, "%s/plugins/kernels/cpu.so", home && *home ? home : "build");
    RadEngineOptions opt = {.model_path = model, .n_threads = t, .max_tok = p, .max_ctx = p + 1,
                            .no_prefix_cache = 1};
    RadEngine *e = NULL;
    if (rad_engine_open(&opt, &e)) {
        fprintf(stderr, "moe_routing: %s: %s\n", model, rad_error_message());
        return 1;
    }
    /* the engine opened the library already: this finds that copy */
    void *h = dlopen(so, RTLD_NOW | RTLD_NOLOAD);
    StatsFn stats = h ? (StatsFn)(uintptr_t)dlsym(h, "rad_cpu_moe_stats") : NULL;
    if (!stats) {
        fprintf(stderr, "moe_routing: %s is not loaded or lacks rad_cpu_moe_stats (set RADIANCE_HOME)\n", so);
        rad_engine_close(e);
        return 1;
    }
    int vocab = rad_engine_n_vocab(e), seq = -1;
    int32_t *ids = malloc((size_t)(p + 1) * sizeof *ids);
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i <= p; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        ids[i] = (int32_t)((s >> 33) % (uint64_t)vocab);
    }
    stats(1, NULL, 0);
    if (rad_engine_seq_new(e, &seq) || rad_engine_eval(e, seq, ids, p, NULL) ||
        rad_engine_eval(e, seq, ids + p, 1, NULL)) {
        fprintf(stderr, "moe_routing: eval failed: %s\n", rad_error_message());
        return 1;
    }
    int n = stats(0, rec, CAP);
    for (int i = 0; verbose && i < n && i < CAP; i++)
        fprintf(stderr, "launch %d: rows %lld, experts touched %lld of %lld, busiest %lld slots\n", i,
                (long long)rec[i][0], (long long)rec[i][3], (long long)rec[i][2], (long long)rec[i][4]);
    printf("{\"model\": \"%s\", ", model);
    summary("prefill", n, p);
    printf(", ");
    summary("decode", n, 1);
    printf("}\n");
    free(ids);
    rad_engine_close(e);
    return 0;
}
