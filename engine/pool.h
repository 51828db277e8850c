/*
** pool.h: the core's thread pool, lent to host kernels through
** RadKernelArgs.parallel_for.
**
** Created once when an engine opens (-t N threads, the caller included) and
** kept for its life: a step creates no thread and allocates nothing.  A call
** hands out task numbers from one atomic counter, so a fast thread takes more
** tasks than a slow one, and returns when every task has finished.  Idle
** workers spin briefly (decode issues hundreds of small ops per token, and a
** sleep/wake costs more than the op), then sleep on a futex.
*/
#ifndef RAD_POOL_H
#define RAD_POOL_H

typedef struct RadPool RadPool;

/* A pool of n_threads (1 = no worker threads; the caller runs everything).
** NULL when out of memory or a thread cannot be started. */
RadPool *rad_pool_new(int n_threads);
void rad_pool_free(RadPool *p);
int rad_pool_threads(const RadPool *p);

/* The process's shared pool of n_threads, made on first use; engines take
** theirs here so that several engines share one set of threads.  Release
** once per acquire; the last release frees it.  NULL when it cannot start. */
RadPool *rad_pool_acquire(int n_threads);
void rad_pool_release(RadPool *p);

/* The RadKernelArgs.parallel_for contract: fn(ctx, t) for t in [0, n_tasks),
** on the pool's threads and the caller's; returns when all are done.  pool
** may be NULL (run serially).  Callers on several threads take turns; a
** task must not call it (not reentrant). */
void rad_pool_parallel_for(void *pool, int n_tasks, void (*fn)(void *ctx, int task), void *ctx);

/* The number of physical cores (distinct core ids in /proc/cpuinfo or
** sysfs), at least 1; the default for -t. */
int rad_physical_cores(void);

#endif /* RAD_POOL_H */
