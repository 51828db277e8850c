/*
** ops_common.h: what the tests of tests/ops that open the cpu library share:
** opening it, picking the row the core would pick, and the thread pools
** kernels run under.
**
** A kernel splits its work over the pool the core passes (args->pool,
** args->parallel_for); a test must see that no result depends on how.  This
** is a real pool: n_threads - 1 pthreads plus the caller take task numbers
** from a shared counter, so tasks run concurrently and in any order; a pool
** with `reverse` set instead runs them serially, last first.  Plain C (the
** NEON builds have no cmocka); included by one test file, all static.
*/
#ifndef OPS_COMMON_H
#define OPS_COMMON_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/rad_kernel.h"

/* The cpu library's ISA levels, as rad_cpu_set_isa names them. */
static const char *const ops_isa_levels[] = {"portable", "avx2", "avx512", "neon"};
enum { OPS_N_LEVELS = 4 };

/* Open the cpu library as the core does (dlopen, the export, init): path,
** else $RADIANCE_HOME/plugins/kernels/cpu.so, else build/...; its table and
** its rad_cpu_set_isa, or NULL after saying why on stderr. */
static inline const RadKernelLibrary *ops_open_cpu(const char *path, int (**set_isa)(const char *), void **handle)
{
    char buf[4096];
    const char *home = getenv("RADIANCE_HOME");
    if (!path) {
        snprintf(buf, sizeof buf, "%s/plugins/kernels/cpu.so", home && *home ? home : "build");
        path = buf;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "cannot open %s: %s\n", path, dlerror());
        return NULL;
    }
    const RadKernelLibrary *lib = dlsym(h, RAD_KERNEL_LIBRARY_SYMBOL);
    *set_isa = (int (*)(const char *))dlsym(h, "rad_cpu_set_isa");
    if (!lib || !*set_isa || lib->abi_version != RAD_KERNEL_ABI_VERSION || (lib->init && lib->init() != 0)) {
        fprintf(stderr, "%s: no library table, no rad_cpu_set_isa, another ABI, or init failed\n", path);
        return NULL;
    }
    if (handle) *handle = h;
    return lib;
}

/* The row the core would pick in lib for these parameters: constraints
** hold, highest priority wins; NULL when none does. */
static inline const RadKernelRow *ops_pick_row(const RadKernelLibrary *lib, const RadKernelArgs *a)
{
    const RadKernelRow *best = NULL;
    for (int i = 0; i < lib->n_rows; i++) {
        const RadKernelRow *r = &lib->rows[i];
        if (strcmp(r->op, a->schema->op) != 0) continue;
        int ok = 1;
        for (int c = 0; c < r->n_constraints && ok; c++) {
            const RadConstraint *k = &r->constraints[c];
            int p = -1;
            for (int j = 0; j < a->schema->n_params; j++)
                if (strcmp(a->schema->params[j].name, k->param) == 0) p = j;
            if (p < 0) return NULL;
            int64_t v = a->param[p].i;
            switch (k->kind) {
            case RAD_C_EQ: ok = v == k->v; break;
            case RAD_C_LE: ok = v <= k->v; break;
            case RAD_C_GE: ok = v >= k->v; break;
            case RAD_C_DIV: ok = k->v && v % k->v == 0; break;
            case RAD_C_IN:
                ok = 0;
                for (int j = 0; j < k->n_values; j++) ok |= v == k->values[j];
                break;
            default: ok = 0;
            }
        }
        if (ok && (!best || r->priority > best->priority)) best = r;
    }
    return best;
}

typedef struct TestPool {
    int n_threads;
    int reverse;            /* run the tasks serially, last first */
} TestPool;

typedef struct PoolJob {
    void (*fn)(void *, int);
    void *ctx;
    int n_tasks;
    atomic_int next;
} PoolJob;

static inline void *pool_worker(void *arg)
{
    PoolJob *j = arg;
    for (int t; (t = atomic_fetch_add(&j->next, 1)) < j->n_tasks;) j->fn(j->ctx, t);
    return NULL;
}

static inline void pool_parallel_for(void *pool, int n_tasks, void (*fn)(void *, int), void *ctx)
{
    TestPool *p = pool;
    if (p->reverse) {
        for (int t = n_tasks - 1; t >= 0; t--) fn(ctx, t);
        return;
    }
    PoolJob j = {.fn = fn, .ctx = ctx, .n_tasks = n_tasks};
    atomic_init(&j.next, 0);
    pthread_t th[8];
    int started = 0;
    for (int i = 1; i < p->n_threads && i < 8; i++) {
        if (pthread_create(&th[started], NULL, pool_worker, &j) != 0) {
            fprintf(stderr, "ops_pool: pthread_create failed\n");
            exit(2);
        }
        started++;
    }
    pool_worker(&j);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}

#endif /* OPS_COMMON_H */
