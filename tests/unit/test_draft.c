/*
** test_draft.c: the n-gram drafter (engine/draft.c), on token ids alone.
**
** Pins what it proposes: what followed the most recent earlier occurrence
** of the history's last n tokens, the longest n first; nothing when the
** suffix never occurred; never past the history's end or more than asked;
** only inside the window when one is set.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../engine/draft.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const RadNgramParams plain = {.min_n = 2, .max_n = 4};

static void test_proposes_what_followed(void **state)
{
    (void)state;
    /* "a b c d e ... a b" -> c d e */
    const int32_t h[] = {1, 2, 3, 4, 5, 9, 9, 1, 2};
    int32_t out[8];
    int k = rad_ngram_propose(&plain, h, N(h), 3, out);
    assert_int_equal(k, 3);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 4);
    assert_int_equal(out[2], 5);
}

static void test_most_recent_and_longest_match(void **state)
{
    (void)state;
    /* 7 8 occurs twice before: the later one (followed by 6) wins for n = 2,
    ** but 5 7 8 occurs once (followed by 4), and longer matches come first */
    const int32_t h[] = {5, 7, 8, 4, 0, 7, 8, 6, 0, 5, 7, 8};
    int32_t out[4];
    int k = rad_ngram_propose(&plain, h, N(h), 1, out);
    assert_int_equal(k, 1);
    assert_int_equal(out[0], 4);
    const RadNgramParams two = {.min_n = 2, .max_n = 2};
    assert_int_equal(rad_ngram_propose(&two, h, N(h), 1, out), 1);
    assert_int_equal(out[0], 6);
}

static void test_no_match_abstains(void **state)
{
    (void)state;
    const int32_t h[] = {1, 2, 3, 4, 5, 6};
    int32_t out[4];
    assert_int_equal(rad_ngram_propose(&plain, h, N(h), 4, out), 0);
    assert_int_equal(rad_ngram_propose(&plain, h, 1, 4, out), 0);
    assert_int_equal(rad_ngram_propose(&plain, h, N(h), 0, out), 0);
}

static void test_stops_at_history_end(void **state)
{
    (void)state;
    /* 3 4 ... 3 4: the match ends right before the suffix, so only what lies
    ** between can be proposed */
    const int32_t h[] = {3, 4, 8, 3, 4};
    int32_t out[8];
    int k = rad_ngram_propose(&plain, h, N(h), 8, out);
    assert_int_equal(k, 3);
    assert_int_equal(out[0], 8);
    assert_int_equal(out[1], 3);
    assert_int_equal(out[2], 4);
}

static void test_window_limits_the_search(void **state)
{
    (void)state;
    const int32_t h[] = {1, 2, 7, 0, 0, 0, 0, 0, 0, 1, 2};
    int32_t out[2];
    const RadNgramParams near = {.min_n = 2, .max_n = 4, .window = 6};
    assert_int_equal(rad_ngram_propose(&near, h, N(h), 1, out), 0);
    assert_int_equal(rad_ngram_propose(&plain, h, N(h), 1, out), 1);
    assert_int_equal(out[0], 7);
}

static void test_drafter_interface(void **state)
{
    (void)state;
    RadDrafter d;
    assert_int_equal(rad_draft_ngram(&plain, &d), RAD_OK);
    assert_string_equal(d.name, "ngram");
    const int32_t h[] = {1, 2, 3, 1, 2};
    int32_t out[2];
    assert_int_equal(d.propose(d.self, h, N(h), 2, out), 2);
    assert_int_equal(out[0], 3);
    d.accepted(d.self, h, N(h));
    d.free(d.self);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proposes_what_followed),
        cmocka_unit_test(test_most_recent_and_longest_match),
        cmocka_unit_test(test_no_match_abstains),
        cmocka_unit_test(test_stops_at_history_end),
        cmocka_unit_test(test_window_limits_the_search),
        cmocka_unit_test(test_drafter_interface),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
