/*
** pool.c: the thread pool (see pool.h for the contract).
**
** One job at a time.  The caller publishes the job (function, context, task
** count) and a ticket that packs the job's number with its next task index,
** then bumps a generation number and wakes sleepers.  Every thread, the
** caller too, claims task indices by compare-and-swap on the ticket until
** they run out, and counts each finished task.  The caller returns when all
** tasks are finished, not when all threads have checked in: on a busy
** machine a worker the scheduler has parked would otherwise hold up every
** op until its next time slice.  A late worker that wakes into a newer job
** simply helps with that one; the ticket's job number makes sure it never
** claims an index of a job it did not read the fields of.
*/
#include "pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

/* How long an idle worker spins before it sleeps, in pause instructions:
** on the order of 100 microseconds, longer than the gap between two ops of a
** decode step, far shorter than the gap between two tokens typed by a user. */
#define SPIN_LIMIT 20000

/* A ticket index no task count reaches: the ticket of a job being published. */
#define TICKET_CLOSED 0xffffffffu

struct RadPool {
    int n_threads;
    pthread_t *threads;
    /* the job */
    /* The job: atomics only because a late worker may read them while the
    ** next job is being published (its claim then fails; see run_tasks). */
    _Atomic(void (*)(void *, int)) fn;
    _Atomic(void *) ctx;
    atomic_int n_tasks;
    _Atomic uint64_t ticket;    /* job number << 32 | the next task index */
    atomic_int done;            /* tasks of this job finished */
    atomic_uint generation;     /* bumped once per job; workers wait on it */
    atomic_int sleepers;        /* workers asleep on `generation` */
    atomic_int stop;
    /* One caller at a time: engines sharing the pool may be stepped from two
    ** threads, and a job is one set of fields. */
    pthread_mutex_t caller;
    /* Sharing (rad_pool_acquire): how many engines hold it, and the list of
    ** shared pools it is on. */
    int refs;
    struct RadPool *next;
};

static long futex(atomic_uint *addr, int op, unsigned val)
{
    return syscall(SYS_futex, (unsigned *)addr, op, val, NULL, NULL, 0);
}

static void run_tasks(RadPool *p)
{
    for (;;) {
        uint64_t cur = atomic_load_explicit(&p->ticket, memory_order_acquire);
        /* The fields read now belong to the job `cur` names, or the ticket
        ** has moved on (closed for a new job, or a task claimed) and the
        ** exchange below fails. */
        uint32_t t = (uint32_t)cur, n = (uint32_t)atomic_load_explicit(&p->n_tasks, memory_order_acquire);
        void (*fn)(void *, int) = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        if (t >= n) break;
        if (!atomic_compare_exchange_weak_explicit(&p->ticket, &cur, cur + 1, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        fn(ctx, (int)t);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

static void *worker(void *arg)
{
    RadPool *p = arg;
    /* Jobs are counted from 0, the generation when the pool was made.  Reading
    ** it here instead would miss a job published before this thread ran. */
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
            if (++spins < SPIN_LIMIT) {
                if (spins % 1024) cpu_relax();
                else sched_yield();     /* let a parked thread run if cores are short */
                continue;
            }
            atomic_fetch_add(&p->sleepers, 1);
            futex(&p->generation, FUTEX_WAIT_PRIVATE, seen);
            atomic_fetch_sub(&p->sleepers, 1);
            spins = 0;
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
        run_tasks(p);
    }
}

RadPool *rad_pool_new(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    RadPool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->caller, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) { free(p); return NULL; }
    for (int i = 1; i < n_threads; i++)
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
            p->n_threads = i;       /* free() joins the ones that started */
            rad_pool_free(p);
            return NULL;
        }
    return p;
}

void rad_pool_free(RadPool *p)
{
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->generation, 1);
    futex(&p->generation, FUTEX_WAKE_PRIVATE, (unsigned)p->n_threads);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->caller);
    free(p->threads);
    free(p);
}

/* The engines of a process share their pools: one pool per thread count,
** made on first use, freed when the last engine using it lets go.  Two
** pools of the same size would only fight for the same cores. */
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static RadPool *shared_pools;

RadPool *rad_pool_acquire(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    pthread_mutex_lock(&shared_lock);
    RadPool *p = shared_pools;
    while (p && p->n_threads != n_threads) p = p->next;
    if (!p && (p = rad_pool_new(n_threads))) {
        p->next = shared_pools;
        shared_pools = p;
    }
    if (p) p->refs++;
    pthread_mutex_unlock(&shared_lock);
    return p;
}

void rad_pool_release(RadPool *pool)
{
    if (!pool) return;
    pthread_mutex_lock(&shared_lock);
    for (RadPool **at = &shared_pools; *at; at = &(*at)->next)
        if (*at == pool) {
            if (--pool->refs == 0) {
                *at = pool->next;
                rad_pool_free(pool);
            }
            break;
        }
    pthread_mutex_unlock(&shared_lock);
}

int rad_pool_threads(const RadPool *p) { return p ? p->n_threads : 1; }

void rad_pool_parallel_for(void *pool, int n_tasks, void (*fn)(void *ctx, int task), void *ctx)
{
    RadPool *p = pool;
    if (!p || p->n_threads == 1 || n_tasks <= 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t);
        return;
    }
    /* Close the ticket before the fields change: a straggler that read the
    ** last job's ticket and is about to read the new task count must not
    ** be able to claim with it (its exchange fails against the closed
    ** value, and a closed ticket hands out nothing). */
    pthread_mutex_lock(&p->caller);
    uint64_t job = (atomic_load_explicit(&p->ticket, memory_order_relaxed) >> 32) + 1;
    atomic_store_explicit(&p->ticket, job << 32 | TICKET_CLOSED, memory_order_seq_cst);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n_tasks, n_tasks, memory_order_release);   /* after the close */
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->ticket, job << 32, memory_order_release);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    if (atomic_load(&p->sleepers) > 0) futex(&p->generation, FUTEX_WAKE_PRIVATE, (unsigned)p->n_threads);
    run_tasks(p);
    /* A task still running on a worker that the scheduler has parked needs
    ** this core: after a short spin, give it up between checks. */
    for (int spins = 0; atomic_load_explicit(&p->done, memory_order_acquire) < n_tasks; spins++) {
        if (spins < 2000) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&p->caller);
}

int rad_physical_cores(void)
{
    /* Count distinct (physical id, core id) pairs; fall back to the online
    ** CPU count when /proc/cpuinfo says nothing about cores. */
    FILE *f = fopen("/proc/cpuinfo", "r");
    int ids[1024], n = 0, phys = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            int v;
            if (sscanf(line, "physical id : %d", &v) == 1) phys = v;
            else if (sscanf(line, "core id : %d", &v) == 1) {
                int key = phys * 4096 + v, seen = 0;
                for (int i = 0; i < n; i++) seen |= ids[i] == key;
                if (!seen && n < 1024) ids[n++] = key;
            }
        }
        fclose(f);
    }
    if (n > 0) return n;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}
