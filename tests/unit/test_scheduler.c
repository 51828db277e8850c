/*
** test_scheduler.c: how work becomes steps (engine/scheduler.c).
**
** Plain counts, no engine: the rules scheduler.h promises (decode rows
** first, at most max_tok rows, at most max_mixed_tok prefill rows beside
** decode rows, at most max_out logits rows, one piece of a sequence per
** step) and that every row is scheduled once, in order.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../engine/include/radiance.h"
#include "../../engine/scheduler.h"

static RadSchedWork prefill(int n, int logits) { return (RadSchedWork){.n = n, .logits = logits}; }
static RadSchedWork decode(void) { return (RadSchedWork){.n = 1, .decode = 1, .logits = RAD_LOGITS_LAST}; }

/* Run the scheduler to the end, checking each step; returns the steps. */
static int drain(RadSchedWork *w, int n, const RadSchedLimits *lim)
{
    RadSchedItem items[16];
    int steps = 0;
    for (;;) {
        int k = rad_sched_next(w, n, lim, items);
        assert_true(k >= 0);
        if (k == 0) break;
        int rows = 0, out = 0, prefill_rows = 0, saw_prefill = 0, decodes = 0;
        for (int i = 0; i < k; i++) {
            const RadSchedItem *it = &items[i];
            for (int j = 0; j < i; j++) assert_int_not_equal(items[j].work, it->work);   /* once a step */
            assert_int_equal(it->start, w[it->work].done);                             /* in order */
            if (w[it->work].decode) { assert_false(saw_prefill); decodes++; }          /* decode first */
            else { saw_prefill = 1; prefill_rows += it->n; }
            int wanted = 0;
            for (int r = 0; r < it->n; r++) wanted += rad_sched_wants(&w[it->work], it->start + r);
            assert_int_equal(wanted, it->out);
            rows += it->n;
            out += it->out;
        }
        assert_true(rows <= lim->max_tok);
        assert_true(out <= lim->max_out);
        assert_true(k <= lim->max_seqs);
        if (decodes) assert_true(prefill_rows <= lim->max_mixed_tok);
        for (int i = 0; i < k; i++) w[items[i].work].done += items[i].n;
        steps++;
    }
    for (int i = 0; i < n; i++) assert_int_equal(w[i].done, w[i].n);
    return steps;
}

static void test_decode_rows_first_and_mixed_bound(void **state)
{
    (void)state;
    RadSchedWork w[] = {prefill(100, RAD_LOGITS_LAST), decode(), decode(), prefill(5, RAD_LOGITS_LAST)};
    const RadSchedLimits lim = {.max_tok = 32, .max_mixed_tok = 8, .max_out = 4, .max_seqs = 4};
    RadSchedItem items[4];
    int k = rad_sched_next(w, 4, &lim, items);
    assert_int_equal(k, 3);                     /* the mixed bound leaves no room for work 3 */
    assert_int_equal(items[0].work, 1);
    assert_int_equal(items[1].work, 2);
    assert_int_equal(items[2].work, 0);
    assert_int_equal(items[2].n, 8);            /* max_mixed_tok beside decode rows */
    int steps = drain(w, 4, &lim);
    assert_true(steps >= 4);
}

static void test_prefill_fills_max_tok(void **state)
{
    (void)state;
    RadSchedWork w[] = {prefill(100, RAD_LOGITS_LAST), prefill(30, RAD_LOGITS_LAST)};
    const RadSchedLimits lim = {.max_tok = 64, .max_mixed_tok = 64, .max_out = 2, .max_seqs = 2};
    assert_int_equal(drain(w, 2, &lim), 3);     /* 64 | 36 + 28 | 2 */
}

/* Teacher forcing wants every row's logits: a chunk is cut to the logits rows. */
static void test_logits_rows_shorten_chunks(void **state)
{
    (void)state;
    RadSchedWork w[] = {prefill(40, RAD_LOGITS_ALL)};
    const RadSchedLimits lim = {.max_tok = 32, .max_mixed_tok = 32, .max_out = 10, .max_seqs = 1};
    assert_int_equal(drain(w, 1, &lim), 4);     /* 10, 10, 10, 10 */
    uint8_t mask[20] = {0};
    mask[3] = mask[4] = mask[5] = mask[19] = 1;
    RadSchedWork m[] = {{.n = 20, .logits = RAD_LOGITS_MASK, .mask = mask}};
    const RadSchedLimits two = {.max_tok = 32, .max_mixed_tok = 32, .max_out = 2, .max_seqs = 1};
    assert_int_equal(drain(m, 1, &two), 2);     /* rows 0..4 (two wanted), then 5..19 */
}

static void test_no_logits_room_is_refused(void **state)
{
    (void)state;
    RadSchedWork w[] = {prefill(4, RAD_LOGITS_LAST)};
    const RadSchedLimits lim = {.max_tok = 32, .max_mixed_tok = 32, .max_out = 0, .max_seqs = 1};
    RadSchedItem items[1];
    /* rows before the wanted one can run; then nothing fits */
    int k = rad_sched_next(w, 1, &lim, items);
    assert_int_equal(k, 1);
    assert_int_equal(items[0].n, 3);
    w[0].done = 3;
    assert_int_equal(rad_sched_next(w, 1, &lim, items), RAD_E_RANGE);
}

static void test_max_seqs_per_step(void **state)
{
    (void)state;
    RadSchedWork w[] = {decode(), decode(), decode(), decode(), decode()};
    const RadSchedLimits lim = {.max_tok = 32, .max_mixed_tok = 32, .max_out = 8, .max_seqs = 3};
    assert_int_equal(drain(w, 5, &lim), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_rows_first_and_mixed_bound),
        cmocka_unit_test(test_prefill_fills_max_tok),
        cmocka_unit_test(test_logits_rows_shorten_chunks),
        cmocka_unit_test(test_no_logits_room_is_refused),
        cmocka_unit_test(test_max_seqs_per_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
