/*
** test_pool.c: the thread pool host kernels run on (engine/pool.c).
**
** Pins the parallel_for contract of rad_kernel.h: every task runs exactly
** once, the call returns only when all have finished (their writes are
** visible), a NULL pool runs serially in order, and a pool serves many small
** jobs in a row (the decode pattern) without losing one.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/pool.h"

typedef struct Job {
    atomic_int runs[1000];
    int order[1000];
    atomic_int n_order;
} Job;

static void count(void *ctx, int t)
{
    Job *j = ctx;
    atomic_fetch_add(&j->runs[t], 1);
    j->order[atomic_fetch_add(&j->n_order, 1)] = t;
}

/* Each task once, for task counts around the thread count. */
static void test_every_task_once(void **state)
{
    (void)state;
    static Job job;
    for (int threads = 1; threads <= 4; threads++) {
        RadPool *p = rad_pool_new(threads);
        assert_non_null(p);
        assert_int_equal(rad_pool_threads(p), threads);
        int sizes[] = {1, 2, 3, 7, 64, 1000};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            memset(&job, 0, sizeof job);
            rad_pool_parallel_for(p, sizes[s], count, &job);
            for (int t = 0; t < sizes[s]; t++) assert_int_equal(atomic_load(&job.runs[t]), 1);
            assert_int_equal(atomic_load(&job.n_order), sizes[s]);
        }
        rad_pool_free(p);
    }
}

/* Without a pool the tasks run on the caller, in order. */
static void test_null_pool_is_serial(void **state)
{
    (void)state;
    static Job job;
    memset(&job, 0, sizeof job);
    rad_pool_parallel_for(NULL, 10, count, &job);
    for (int t = 0; t < 10; t++) assert_int_equal(job.order[t], t);
}

typedef struct Sum { int64_t part[8]; const int *data; int n; } Sum;

static void add_part(void *ctx, int t)
{
    Sum *s = ctx;
    int64_t acc = 0;
    for (int i = t; i < s->n; i += 8) acc += s->data[i];
    s->part[t] = acc;
}

/* Many small jobs back to back (as decode issues them): each sees the
** previous one's results, none is lost; also after workers fell asleep. */
static void test_many_small_jobs(void **state)
{
    (void)state;
    static int data[4096];
    for (int i = 0; i < 4096; i++) data[i] = i;
    RadPool *p = rad_pool_new(3);
    assert_non_null(p);
    for (int round = 0; round < 4000; round++) {
        Sum s = {.data = data, .n = 1 + round % 4096};
        rad_pool_parallel_for(p, 8, add_part, &s);
        int64_t total = 0;
        for (int t = 0; t < 8; t++) total += s.part[t];
        assert_int_equal(total, (int64_t)s.n * (s.n - 1) / 2);
        if (round == 2000) usleep(200000);     /* let the workers sleep, then wake them */
    }
    rad_pool_free(p);
}

static void test_physical_cores(void **state)
{
    (void)state;
    assert_true(rad_physical_cores() >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_task_once),
        cmocka_unit_test(test_null_pool_is_serial),
        cmocka_unit_test(test_many_small_jobs),
        cmocka_unit_test(test_physical_cores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
