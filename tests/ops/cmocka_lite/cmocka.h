/*
** cmocka.h (lite): the few cmocka calls tests/ops/test_cpu_ops.c,
** test_invariance.c and ref_harness.h use, for building those tests where
** cmocka is not installed: the arm64 cross build run under qemu-user, with
** -Itests/ops/cmocka_lite (the Makefile's test-neon: every .c of
** kernels/ref and kernels/ops, base/encoding.c and base/error.c with the
** test, -lpthread -ldl -lm).
**
** A failed assertion prints its message and abandons the test (longjmp);
** the run goes on with the next test and exits 1 if any failed.
*/
#ifndef CMOCKA_LITE_H
#define CMOCKA_LITE_H

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

struct CMUnitTest {
    const char *name;
    void (*fn)(void **state);
};

#define cmocka_unit_test(f) {#f, f}

static jmp_buf cml_abandon;

#define fail_msg(...)                                                      \
    do {                                                                   \
        fprintf(stderr, "ERROR: " __VA_ARGS__);                            \
        fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);                 \
        longjmp(cml_abandon, 1);                                           \
    } while (0)

#define assert_true(c)                                       \
    do {                                                     \
        if (!(c)) fail_msg("%s is false", #c);               \
    } while (0)
#define assert_non_null(p) assert_true((p) != NULL)
#define assert_memory_equal(a, b, n) assert_true(memcmp((a), (b), (n)) == 0)
#define assert_int_equal(a, b)                                                     \
    do {                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                        \
        if (a_ != b_) fail_msg("%s == %lld, want %lld", #a, a_, b_);               \
    } while (0)
#define assert_int_not_equal(a, b)                                                 \
    do {                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                        \
        if (a_ == b_) fail_msg("%s == %lld", #a, a_);                              \
    } while (0)

static int cml_run(const struct CMUnitTest *t, size_t n, int (*setup)(void **), int (*teardown)(void **))
{
    void *state = NULL;
    volatile int failed = 0;
    if (setup && setup(&state) != 0) {
        printf("[  FAILED  ] GROUP SETUP\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        printf("[ RUN      ] %s\n", t[i].name);
        fflush(stdout);
        if (setjmp(cml_abandon) == 0) {
            t[i].fn(&state);
            printf("[       OK ] %s\n", t[i].name);
        } else {
            printf("[  FAILED  ] %s\n", t[i].name);
            failed++;
        }
    }
    if (teardown) teardown(&state);
    printf("[==========] %zu test(s) run, %d failed.\n", n, failed);
    return failed ? 1 : 0;
}

#define cmocka_run_group_tests(tests, setup, teardown) \
    cml_run(tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)

#endif /* CMOCKA_LITE_H */
