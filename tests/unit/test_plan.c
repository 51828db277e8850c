/*
** test_plan.c: the activation arena planner (rad_plan_arena, engine/plan.c).
**
** The planner's one promise is safety: two items whose lifetimes overlap
** (op ranges [first, last] that intersect, or either of them persistent or
** live for the whole step) never share a byte, and every offset is aligned.
** Its economy is pinned on small cases worked by hand: items that are never
** live together share bytes, so the arena is their maximum, not their sum.
** A randomized test with a fixed seed checks the safety promise on every
** pair of a couple of hundred items.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../engine/engine_internal.h"

/* ---------------------------------------------------------------- helpers */

static RadPlanItem item(int64_t bytes, int first, int last, int persist)
{
    return (RadPlanItem){.bytes = bytes, .first = first, .last = last, .persist = persist, .offset = -1};
}

/* The contract's notion of "live at the same time". */
static int live_together(const RadPlanItem *a, const RadPlanItem *b)
{
    if (a->persist || b->persist || a->first < 0 || b->first < 0) return 1;
    return a->first <= b->last && b->first <= a->last;
}

/* Every pair live together occupies disjoint bytes; every item is aligned
** and lies inside the arena. */
static void check_plan(const RadPlanItem *items, int n, int64_t align, int64_t arena)
{
    for (int i = 0; i < n; i++) {
        const RadPlanItem *a = &items[i];
        if (a->offset < 0 || a->offset % align != 0)
            fail_msg("item %d: offset %lld is not %lld-aligned", i, (long long)a->offset, (long long)align);
        if (a->offset + a->bytes > arena)
            fail_msg("item %d: [%lld, %lld) ends past the arena (%lld)", i, (long long)a->offset,
                     (long long)(a->offset + a->bytes), (long long)arena);
        for (int j = i + 1; j < n; j++) {
            const RadPlanItem *b = &items[j];
            if (!live_together(a, b) || a->bytes == 0 || b->bytes == 0) continue;
            if (a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes)
                fail_msg("items %d [%lld, +%lld) ops %d..%d%s and %d [%lld, +%lld) ops %d..%d%s share bytes", i,
                         (long long)a->offset, (long long)a->bytes, a->first, a->last, a->persist ? " persist" : "",
                         j, (long long)b->offset, (long long)b->bytes, b->first, b->last,
                         b->persist ? " persist" : "");
        }
    }
}

/* xorshift64*: a fixed, portable sequence whatever the C library. */
static uint64_t rng_state;
static uint64_t next_random(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static int64_t random_in(int64_t lo, int64_t hi) { return lo + (int64_t)(next_random() % (uint64_t)(hi - lo + 1)); }

/* n random items: sizes 1..100000 bytes, lifetimes over 60 ops, about one in
** ten persistent and one in ten live for the whole step. */
static void random_items(RadPlanItem *items, int n, uint64_t seed)
{
    rng_state = seed;
    for (int i = 0; i < n; i++) {
        int64_t bytes = random_in(1, 100000);
        int first = (int)random_in(0, 59);
        int last = first + (int)random_in(0, 12);
        int kind = (int)random_in(0, 9);
        items[i] = item(bytes, kind == 0 ? -1 : first, kind == 0 ? -1 : last, kind == 1);
    }
}

/* ------------------------------------------------------------------ tests */

/* Items never live together share bytes: the arena is the largest, not the sum. */
static void test_disjoint_lifetimes_share(void **state)
{
    (void)state;
    RadPlanItem items[] = {item(1000, 0, 1, 0), item(4000, 2, 3, 0), item(3000, 4, 7, 0)};
    int64_t arena = rad_plan_arena(items, 3, 64);
    assert_int_equal(arena, 4032);          /* 4000 rounded up to 64 */
    for (int i = 0; i < 3; i++) assert_int_equal(items[i].offset, 0);
    check_plan(items, 3, 64, arena);
}

/* Items live together never overlap: two that share op 2 sit side by side. */
static void test_overlapping_lifetimes_do_not_share(void **state)
{
    (void)state;
    RadPlanItem items[] = {item(100, 0, 2, 0), item(200, 2, 4, 0)};
    int64_t arena = rad_plan_arena(items, 2, 64);
    assert_int_equal(arena, 256 + 128);
    check_plan(items, 2, 64, arena);
    assert_int_equal(items[1].offset, 0);   /* largest placed first */
    assert_int_equal(items[0].offset, 256);
}

/* Persistent items never share, not even with items whose op range is disjoint from theirs. */
static void test_persist_never_shares(void **state)
{
    (void)state;
    RadPlanItem items[] = {item(64, 0, 0, 1), item(64, 5, 5, 1), item(64, 9, 9, 0), item(64, 12, 12, 0)};
    int64_t arena = rad_plan_arena(items, 4, 64);
    /* The two transients share; each persistent item has bytes of its own. */
    assert_int_equal(arena, 3 * 64);
    check_plan(items, 4, 64, arena);
    assert_true(items[0].offset != items[1].offset);
    assert_true(items[0].offset != items[2].offset);
    assert_true(items[1].offset != items[3].offset);
    assert_int_equal(items[2].offset, items[3].offset);
}

/* An item with first < 0 (live the whole step) shares with nothing. */
static void test_whole_step_never_shares(void **state)
{
    (void)state;
    RadPlanItem items[] = {item(128, -1, -1, 0), item(128, 0, 0, 0), item(128, 1, 1, 0),
                           item(128, -1, -1, 0)};
    int64_t arena = rad_plan_arena(items, 4, 64);
    assert_int_equal(arena, 3 * 128);
    check_plan(items, 4, 64, arena);
    assert_int_equal(items[1].offset, items[2].offset);
    assert_true(items[0].offset != items[3].offset);
}

/* A small case worked by hand: the arena is the peak of live bytes (208 at op 1). */
static void test_known_arena(void **state)
{
    (void)state;
    /* Sizes rounded to 16: a 112, b 64, c 80, d 32 (persistent).
    ** Live at op 1: a, b, d = 208; at op 2: b, c, d = 176.  Largest first:
    ** a at 0; c at 0 (never live with a); b after a at 112; d after b at 176. */
    RadPlanItem items[] = {item(100, 0, 1, 0), item(50, 1, 2, 0), item(80, 2, 3, 0), item(30, 0, 0, 1)};
    int64_t arena = rad_plan_arena(items, 4, 16);
    assert_int_equal(arena, 208);
    check_plan(items, 4, 16, arena);
    assert_int_equal(items[0].offset, 0);
    assert_int_equal(items[1].offset, 112);
    assert_int_equal(items[2].offset, 0);
    assert_int_equal(items[3].offset, 176);
}

/* A transformer-shaped chain (each buffer read by the next op only) needs two slots, not n. */
static void test_chain_reuses_two_slots(void **state)
{
    (void)state;
    RadPlanItem items[32];
    for (int i = 0; i < 32; i++) items[i] = item(4096, i, i + 1, 0);
    int64_t arena = rad_plan_arena(items, 32, 64);
    assert_int_equal(arena, 2 * 4096);
    check_plan(items, 32, 64, arena);
}

/* Offsets honour the alignment for sizes that are not multiples of it, and align 1 packs tightly. */
static void test_alignment(void **state)
{
    (void)state;
    RadPlanItem items[] = {item(1, 0, 5, 0), item(3, 0, 5, 0), item(65, 0, 5, 0), item(7, 0, 5, 0)};
    int64_t arena = rad_plan_arena(items, 4, 256);
    check_plan(items, 4, 256, arena);
    assert_int_equal(arena, 4 * 256);      /* each item rounds up to 256 */
    arena = rad_plan_arena(items, 4, 1);
    check_plan(items, 4, 1, arena);
    assert_int_equal(arena, 1 + 3 + 65 + 7);
}

/* No items: an empty arena. */
static void test_empty(void **state)
{
    (void)state;
    RadPlanItem none[1];
    assert_int_equal(rad_plan_arena(none, 0, 64), 0);
}

/* ~200 random items (fixed seed): every pair live together is disjoint, offsets aligned, arena >= peak. */
static void test_random_items_never_collide(void **state)
{
    (void)state;
    enum { N = 200 };
    static const uint64_t seeds[] = {0x9e3779b97f4a7c15ull, 42, 0xdeadbeefcafef00dull};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        RadPlanItem items[N];
        random_items(items, N, seeds[s]);
        int64_t arena = rad_plan_arena(items, N, 64);
        check_plan(items, N, 64, arena);

        /* No plan beats the most bytes live at one op; none needs more than the sum. */
        int64_t peak = 0, sum = 0;
        for (int i = 0; i < N; i++) sum += (items[i].bytes + 63) / 64 * 64;
        for (int op = 0; op < 80; op++) {
            int64_t live = 0;
            for (int i = 0; i < N; i++) {
                const RadPlanItem *it = &items[i];
                if (it->persist || it->first < 0 || (it->first <= op && op <= it->last))
                    live += (it->bytes + 63) / 64 * 64;
            }
            if (live > peak) peak = live;
        }
        assert_true(arena >= peak);
        assert_true(arena <= sum);
    }
}

/* The plan is a function of its input: the same items give the same offsets and arena. */
static void test_deterministic(void **state)
{
    (void)state;
    enum { N = 200 };
    RadPlanItem a[N], b[N];
    random_items(a, N, 7);
    memcpy(b, a, sizeof a);
    for (int i = 0; i < N; i++) b[i].offset = 12345;    /* stale outputs must not matter */
    int64_t arena_a = rad_plan_arena(a, N, 64), arena_b = rad_plan_arena(b, N, 64);
    assert_int_equal(arena_a, arena_b);
    for (int i = 0; i < N; i++) assert_int_equal(a[i].offset, b[i].offset);
    /* Planning the planned items again changes nothing. */
    assert_int_equal(rad_plan_arena(a, N, 64), arena_a);
    for (int i = 0; i < N; i++) assert_int_equal(a[i].offset, b[i].offset);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disjoint_lifetimes_share),
        cmocka_unit_test(test_overlapping_lifetimes_do_not_share),
        cmocka_unit_test(test_persist_never_shares),
        cmocka_unit_test(test_whole_step_never_shares),
        cmocka_unit_test(test_known_arena),
        cmocka_unit_test(test_chain_reuses_two_slots),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_random_items_never_collide),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
