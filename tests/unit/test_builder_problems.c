/*
** test_builder_problems.c: the builder reports a declaration's problems once
** each, counted, in time linear in their number (engine/build.c).
**
** A file declaring thousands of layers over a checkpoint of two used to make
** the builder compare every problem with every earlier one: 4,000 layers
** took three minutes.  Here 100,000 distinct problems, each twice, must be
** reported (the first ones listed with "(x2)", the rest counted) within the
** alarm: quadratic counting takes hours of CPU on this many.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/engine_internal.h"

static void test_many_problems_linear(void **state)
{
    (void)state;
    RadModelMeta meta = {.struct_size = sizeof meta, .n_layers = 1, .n_vocab = 4};
    RadBuilder b;
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, NULL);
    alarm(60);                  /* the old quadratic count never gets here */
    for (int rep = 0; rep < 2; rep++)
        for (int l = 0; l < 100000; l++) rad_decl_fail(&b, "layer %d: tensor 'blk.%d.w' is missing", l, l);
    int rc = rad_builder_finish(&b, "m.gguf");
    alarm(0);
    assert_int_equal(rc, RAD_E_UNSUPPORTED);
    const char *msg = rad_error_message();
    /* 100,000 distinct, plus the missing logits buffer */
    assert_non_null(strstr(msg, "m.gguf: 100001 problems found"));
    assert_non_null(strstr(msg, "\n  layer 0: tensor 'blk.0.w' is missing (x2)"));
    assert_non_null(strstr(msg, "more"));
    rad_builder_free(&b);
}

/* A declare that failed is reported as such, not as "no logits buffer": the
** plugin stopped before declaring it. */
static void test_failed_declare_no_logits_line(void **state)
{
    (void)state;
    RadModelMeta meta = {.struct_size = sizeof meta, .n_layers = 1, .n_vocab = 4};
    RadBuilder b;
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, NULL);
    b.declare_failed = 1;
    assert_int_equal(rad_builder_finish(&b, "m.gguf"), RAD_OK);
    rad_builder_free(&b);
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, NULL);
    assert_int_equal(rad_builder_finish(&b, "m.gguf"), RAD_E_UNSUPPORTED);
    assert_non_null(strstr(rad_error_message(), "no logits buffer"));
    rad_builder_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_problems_linear),
        cmocka_unit_test(test_failed_declare_no_logits_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
