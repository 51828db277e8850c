/*
** test_sample.c: unit tests for the sampler chain and its RNG (engine/sample.c).
**
** Each test pins one behaviour docs/SAMPLING.md promises.  The statistical
** tests use fixed seeds, so they are deterministic: a bound that holds once
** holds on every run, and the bounds are set loosely enough that a correct
** sampler passes with a wide margin while a broken stage does not.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

/* ---------------------------------------------------------------- helpers */

/* Parameters with every filter off, so a test switches on only the stage it
** is about. */
static RadSamplerParams plain(float temperature)
{
    RadSamplerParams p;
    rad_sampler_defaults(&p);
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 0;
    p.seed = 1234;
    return p;
}

static RadSampler *make(const RadSamplerParams *p, int n_vocab)
{
    RadSampler *s = NULL;
    assert_int_equal(rad_sampler_create(p, n_vocab, &s), RAD_OK);
    assert_non_null(s);
    return s;
}

/* One pick with no history. */
static int pick1(const RadSamplerParams *p, const float *logits, int n_vocab, int64_t position)
{
    RadSampler *s = make(p, n_vocab);
    int t = rad_sampler_pick(s, logits, NULL, 0, position);
    rad_sampler_free(s);
    return t;
}

/* Pick at positions 0..n_pos-1 and count how often each token comes up. */
static void tally(const RadSamplerParams *p, const float *logits, int n_vocab, int n_pos, int *counts)
{
    RadSampler *s = make(p, n_vocab);
    memset(counts, 0, (size_t)n_vocab * sizeof *counts);
    for (int pos = 0; pos < n_pos; pos++) {
        int t = rad_sampler_pick(s, logits, NULL, 0, pos);
        assert_true(t >= 0 && t < n_vocab);
        counts[t]++;
    }
    rad_sampler_free(s);
}

/* Logits whose softmax (at temperature 1) is exactly `probs`. */
static void logits_from_probs(const double *probs, int n, float *logits)
{
    for (int i = 0; i < n; i++) logits[i] = (float)log(probs[i]);
}

/* The reference ranking: higher logit first, lower id among equals. */
static int ranks_before(const float *z, int a, int b)
{
    return z[a] > z[b] || (a < b && z[a] == z[b]);
}

/* -------------------------------------------------------------- defaults */

/* The defaults are the documented values and pass the range check. */
static void test_defaults(void **state)
{
    (void)state;
    RadSamplerParams p;
    rad_sampler_defaults(&p);
    assert_true(p.temperature == 0.8f);
    assert_int_equal(p.top_k, 40);
    assert_true(p.top_p == 0.95f);
    assert_true(p.min_p == 0.05f);
    assert_true(p.repeat_penalty == 1.0f);
    assert_int_equal(p.repeat_last_n, 64);
    assert_true(p.seed == 0);
    assert_int_equal(rad_sampler_check(&p), RAD_OK);
}

/* ---------------------------------------------------------------- greedy */

/* Temperature 0 picks the argmax, and the lowest id when several tie. */
static void test_greedy_argmax_lowest_id_on_ties(void **state)
{
    (void)state;
    RadSamplerParams p = plain(0.0f);
    const float unique[] = {0.1f, -3.0f, 2.5f, 2.4f, 1.0f};
    const float tied[] = {1.0f, 7.0f, -2.0f, 7.0f, 7.0f};
    for (int pos = 0; pos < 50; pos++) {
        assert_int_equal(pick1(&p, unique, 5, pos), 2);
        assert_int_equal(pick1(&p, tied, 5, pos), 1);
    }
}

/* --------------------------------------------------------------- penalty */

/* The penalty divides a repeated token's positive logit, enough to lose the argmax. */
static void test_penalty_lowers_repeated_positive_logit(void **state)
{
    (void)state;
    RadSamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 64;
    const float logits[] = {2.0f, -2.0f, 1.5f, 1.0f};
    const int32_t history[] = {3, 0};
    RadSampler *s = make(&p, 4);
    assert_int_equal(rad_sampler_pick(s, logits, NULL, 0, 0), 0);
    assert_int_equal(rad_sampler_pick(s, logits, history, 2, 2), 2); /* 2.0 / 2 < 1.5 */
    rad_sampler_free(s);
}

/* The penalty multiplies a repeated token's negative logit, pushing it further down. */
static void test_penalty_lowers_repeated_negative_logit(void **state)
{
    (void)state;
    RadSamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 64;
    const float logits[] = {-1.0f, -1.5f, -9.0f};
    const int32_t history[] = {0};
    RadSampler *s = make(&p, 3);
    assert_int_equal(rad_sampler_pick(s, logits, NULL, 0, 0), 0);
    assert_int_equal(rad_sampler_pick(s, logits, history, 1, 1), 1); /* -1.0 * 2 < -1.5 */
    rad_sampler_free(s);
}

/* A token repeated many times in the window is penalised once, not once per occurrence. */
static void test_penalty_applies_once_per_distinct_token(void **state)
{
    (void)state;
    RadSamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 64;
    const float logits[] = {2.0f, 0.9f};
    const int32_t history[] = {0, 0, 0, 0};
    RadSampler *s = make(&p, 2);
    /* Once: 2.0 / 2 = 1.0 still beats 0.9.  Four times would give 0.125. */
    assert_int_equal(rad_sampler_pick(s, logits, history, 4, 4), 0);
    rad_sampler_free(s);
}

/* Tokens older than the last repeat_last_n are not penalised, nor are ids outside the vocabulary. */
static void test_penalty_ignores_tokens_older_than_last_n(void **state)
{
    (void)state;
    RadSamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 3;
    const float logits[] = {2.0f, -2.0f, 1.5f, 1.0f};
    const int32_t old[] = {0, 1, 3, -1, 99};    /* token 0 is five back: outside */
    const int32_t recent[] = {1, 3, 0, -1, 99}; /* token 0 is three back: inside */
    RadSampler *s = make(&p, 4);
    assert_int_equal(rad_sampler_pick(s, logits, old, 5, 5), 0);
    assert_int_equal(rad_sampler_pick(s, logits, recent, 5, 5), 2);
    rad_sampler_free(s);

    /* repeat_last_n = 0 switches the penalty off. */
    p.repeat_last_n = 0;
    s = make(&p, 4);
    assert_int_equal(rad_sampler_pick(s, logits, recent, 5, 5), 0);
    rad_sampler_free(s);
}

/* Picking never writes to the caller's logits, whatever stages run. */
static void test_pick_leaves_logits_unmodified(void **state)
{
    (void)state;
    RadSamplerParams p;
    rad_sampler_defaults(&p);
    p.repeat_penalty = 1.3f;
    p.top_k = 3;
    float logits[] = {2.0f, -2.0f, 1.5f, 1.0f, 0.0f, 3.0f};
    float copy[6];
    memcpy(copy, logits, sizeof copy);
    const int32_t history[] = {0, 1, 5};
    RadSampler *s = make(&p, 6);
    for (int pos = 0; pos < 20; pos++) rad_sampler_pick(s, logits, history, 3, pos);
    rad_sampler_free(s);
    assert_memory_equal(logits, copy, sizeof copy);
}

/* ----------------------------------------------------------- temperature */

/* A temperature near 0 sharpens the distribution: the top token wins every time. */
static void test_low_temperature_sharpens(void **state)
{
    (void)state;
    RadSamplerParams p = plain(0.05f);
    const float logits[] = {1.0f, 2.0f, 0.0f, -1.0f};
    int counts[4];
    tally(&p, logits, 4, 2000, counts);
    assert_int_equal(counts[1], 2000); /* the runner-up has odds e^-20 */
}

/* A high temperature flattens the distribution toward uniform. */
static void test_high_temperature_flattens(void **state)
{
    (void)state;
    RadSamplerParams p = plain(100.0f);
    const float logits[] = {1.0f, 2.0f, 0.0f, -1.0f};
    int counts[4];
    tally(&p, logits, 4, 4000, counts);
    for (int i = 0; i < 4; i++) assert_in_range(counts[i], 800, 1200); /* about 1000 each */
}

/* At temperature 1 with no filters, pick frequencies follow the softmax. */
static void test_frequencies_follow_softmax(void **state)
{
    (void)state;
    RadSamplerParams p = plain(1.0f);
    const double probs[] = {0.1, 0.4, 0.2, 0.3};
    float logits[4];
    logits_from_probs(probs, 4, logits);
    int counts[4];
    tally(&p, logits, 4, 10000, counts);
    for (int i = 0; i < 4; i++) {
        double f = counts[i] / 10000.0;
        assert_true(fabs(f - probs[i]) < 0.02); /* the sd is at most 0.005 */
    }
}

/* ----------------------------------------------------------------- top-k */

/* Top-k = 1 picks exactly what greedy picks, ties included, at any temperature. */
static void test_top_k_1_equals_greedy(void **state)
{
    (void)state;
    enum { V = 50 };
    RadSamplerParams greedy = plain(0.0f);
    RadSamplerParams k1 = plain(1.5f);
    k1.top_k = 1;
    RadSampler *g = make(&greedy, V), *s = make(&k1, V);
    float logits[V];
    for (int trial = 0; trial < 200; trial++) {
        /* Few distinct values, so the maximum is often tied. */
        for (int i = 0; i < V; i++)
            logits[i] = (float)floor(rad_rng_uniform(77, (uint64_t)(trial * V + i)) * 6.0);
        assert_int_equal(rad_sampler_pick(s, logits, NULL, 0, trial),
                         rad_sampler_pick(g, logits, NULL, 0, trial));
    }
    rad_sampler_free(g);
    rad_sampler_free(s);
}

/* Top-k keeps the k largest logits, breaking ties by lower id, and no others. */
static void test_top_k_keeps_k_largest_ties_by_lower_id(void **state)
{
    (void)state;
    RadSamplerParams p = plain(1.0f);
    p.top_k = 2;
    const float logits[] = {0.0f, 3.0f, 3.0f, 3.0f, 1.0f};
    int counts[5];
    tally(&p, logits, 5, 2000, counts);
    assert_true(counts[1] > 0 && counts[2] > 0);
    assert_int_equal(counts[1] + counts[2], 2000);

    /* A larger vocabulary, so the partial selection really has to evict. */
    enum { V = 1000, K = 5 };
    float big[V];
    for (int i = 0; i < V; i++) big[i] = (float)(i % 97) * 0.01f; /* max 0.96 */
    big[400] = 2.0f;
    big[13] = 1.9f;
    big[999] = 1.8f;
    /* Slots 4 and 5 go to 0.96, held by ids 96, 193, 290, ...: the lowest two. */
    int in[V] = {0};
    in[400] = in[13] = in[999] = in[96] = in[193] = 1;
    int *bigcounts = calloc(V, sizeof *bigcounts);
    assert_non_null(bigcounts);
    p.top_k = K;
    p.temperature = 0.3f;
    tally(&p, big, V, 3000, bigcounts);
    for (int i = 0; i < V; i++) {
        if (in[i]) assert_true(bigcounts[i] > 0);
        else assert_int_equal(bigcounts[i], 0);
    }
    free(bigcounts);
}

/* ----------------------------------------------------------------- top-p */

/* Top-p keeps the smallest high-probability prefix reaching top_p: outside it never, inside it yes. */
static void test_top_p_keeps_nucleus(void **state)
{
    (void)state;
    /* Ranked: id 2 (0.5), id 3 (0.3), id 0 (0.15), id 1 (0.05).  The prefix
    ** reaching 0.75 is {2, 3}: 0.5 falls short, 0.8 reaches it. */
    const double probs[] = {0.15, 0.05, 0.5, 0.3};
    float logits[4];
    logits_from_probs(probs, 4, logits);
    int counts[4];
    for (int top_k = 0; top_k <= 4; top_k += 4) { /* the full sort, then the heap */
        RadSamplerParams p = plain(1.0f);
        p.top_p = 0.75f;
        p.top_k = top_k == 4 ? 3 : 0;
        tally(&p, logits, 4, 2000, counts);
        assert_int_equal(counts[0], 0);
        assert_int_equal(counts[1], 0);
        assert_true(counts[2] > 0 && counts[3] > 0);
        /* Renormalised inside the nucleus: 0.5 / 0.8 = 0.625. */
        assert_true(fabs(counts[2] / 2000.0 - 0.625) < 0.05);
    }

    /* A tiny top_p still keeps one token, the most likely. */
    RadSamplerParams p = plain(1.0f);
    p.top_p = 0.01f;
    tally(&p, logits, 4, 500, counts);
    assert_int_equal(counts[2], 500);
}

/* ----------------------------------------------------------------- min-p */

/* Min-p drops tokens whose probability is below min_p times the top one's, and keeps the rest. */
static void test_min_p_drops_low_tokens(void **state)
{
    (void)state;
    /* With min_p 0.1 the bar is 0.06: id 2 (0.07) stays, id 3 (0.03) goes. */
    const double probs[] = {0.6, 0.3, 0.07, 0.03};
    float logits[4];
    logits_from_probs(probs, 4, logits);
    RadSamplerParams p = plain(1.0f);
    p.min_p = 0.1f;
    int counts[4];
    tally(&p, logits, 4, 3000, counts);
    assert_true(counts[0] > 0 && counts[1] > 0 && counts[2] > 0);
    assert_int_equal(counts[3], 0);
}

/* --------------------------------------------------------- whole chain */

/* The full chain picks only from the set a literal, stage-by-stage reading of the spec keeps. */
static void test_chain_matches_literal_reading(void **state)
{
    (void)state;
    enum { V = 64, POS = 3000 };
    float logits[V];
    int32_t history[16];
    int counts[V], order[V];
    double prob[V];
    for (int trial = 0; trial < 40; trial++) {
        uint64_t k = (uint64_t)trial * 1000;
        RadSamplerParams p = plain(0.5f + 1.5f * (float)rad_rng_uniform(5, k));
        int r = (int)(rad_rng_uniform(6, k) * 40);
        p.top_k = r < 20 ? 0 : r - 19; /* off half the time, else 1 .. 20 */
        p.top_p = 0.5f + 0.5f * (float)rad_rng_uniform(7, k);
        p.min_p = 0.2f * (float)rad_rng_uniform(8, k);
        p.repeat_penalty = 1.5f;
        p.repeat_last_n = 8;
        p.seed = k;
        for (int i = 0; i < V; i++) logits[i] = (float)(rad_rng_uniform(9, k + i) * 8.0 - 4.0);
        for (int i = 0; i < 16; i++) history[i] = (int32_t)(rad_rng_uniform(10, k + i) * V);

        /* The reference: penalise, rank (lowest id on ties), take k, softmax,
        ** cut to the top-p prefix, then drop what min-p drops. */
        float z[V];
        memcpy(z, logits, sizeof z);
        int seen[V] = {0};
        for (int i = 16 - p.repeat_last_n; i < 16; i++) {
            int t = history[i];
            if (seen[t]++) continue;
            z[t] = z[t] > 0 ? z[t] / p.repeat_penalty : z[t] * p.repeat_penalty;
        }
        for (int i = 0; i < V; i++) order[i] = i;
        for (int i = 1; i < V; i++) /* insertion sort: plain and obviously right */
            for (int j = i; j > 0; j--) {
                if (ranks_before(z, order[j], order[j - 1])) {
                    int t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
            }
        int n = p.top_k > 0 && p.top_k < V ? p.top_k : V;
        double sum = 0;
        for (int i = 0; i < n; i++) sum += prob[i] = exp(z[order[i]] / p.temperature);
        for (int i = 0; i < n; i++) prob[i] /= sum;
        double mass = 0;
        for (int i = 0; i < n; i++) {
            mass += prob[i];
            if (mass >= p.top_p) {
                n = i + 1;
                break;
            }
        }
        int keep[V] = {0};
        double kept = 0;
        for (int i = 0; i < n; i++)
            if (prob[i] >= p.min_p * prob[0]) {
                keep[order[i]] = 1;
                kept += prob[i];
            }

        RadSampler *s = make(&p, V);
        memset(counts, 0, sizeof counts);
        for (int pos = 0; pos < POS; pos++) counts[rad_sampler_pick(s, logits, history, 16, pos)]++;
        rad_sampler_free(s);
        for (int i = 0; i < n; i++) {
            int t = order[i];
            if (!keep[t]) continue;
            /* Anything with a 1% share shows up in 3000 draws all but surely. */
            if (prob[i] / kept > 0.01) assert_true(counts[t] > 0);
        }
        for (int t = 0; t < V; t++)
            if (!keep[t]) assert_int_equal(counts[t], 0);
    }
}

/* ----------------------------------------------------------- determinism */

/* The same seed and position give the same token, whatever order positions are picked in. */
static void test_same_seed_and_position_same_token(void **state)
{
    (void)state;
    enum { V = 8, N = 200 };
    const float logits[V] = {0.1f, 0.2f, 0.0f, 0.3f, -0.1f, 0.25f, 0.05f, 0.15f};
    RadSamplerParams p;
    rad_sampler_defaults(&p);
    p.seed = 42;
    int forward[N];
    RadSampler *a = make(&p, V), *b = make(&p, V);
    for (int pos = 0; pos < N; pos++) forward[pos] = rad_sampler_pick(a, logits, NULL, 0, pos);
    for (int pos = N - 1; pos >= 0; pos--) /* another sampler, backwards, twice */
        for (int rep = 0; rep < 2; rep++)
            assert_int_equal(rad_sampler_pick(b, logits, NULL, 0, pos), forward[pos]);
    rad_sampler_free(a);
    rad_sampler_free(b);
}

/* Different seeds give a different token at some position. */
static void test_different_seeds_differ(void **state)
{
    (void)state;
    enum { V = 8, N = 100 };
    const float logits[V] = {0};
    RadSamplerParams p = plain(1.0f);
    p.seed = 1;
    RadSampler *a = make(&p, V);
    p.seed = 2;
    RadSampler *b = make(&p, V);
    int differ = 0;
    for (int pos = 0; pos < N; pos++)
        differ += rad_sampler_pick(a, logits, NULL, 0, pos) != rad_sampler_pick(b, logits, NULL, 0, pos);
    assert_true(differ > N / 2); /* independent uniform picks from 8 agree 1 time in 8 */
    rad_sampler_free(a);
    rad_sampler_free(b);
}

/* Two sequences sampling with one seed draw from their own streams: their
** picks at the same positions differ, stream 0 is the seed's plain stream,
** and a stream repeats itself. */
static void test_streams_of_one_seed_differ(void **state)
{
    (void)state;
    enum { V = 8, N = 100 };
    const float logits[V] = {0};
    RadSamplerParams p = plain(1.0f);
    p.seed = 7;
    RadSampler *plain_stream = make(&p, V);
    p.stream = 0;
    RadSampler *s0 = make(&p, V);
    p.stream = 1;
    RadSampler *s1 = make(&p, V);
    p.stream = 2;
    RadSampler *s2 = make(&p, V);
    int differ = 0;
    for (int pos = 0; pos < N; pos++) {
        int a = rad_sampler_pick(s1, logits, NULL, 0, pos), b = rad_sampler_pick(s2, logits, NULL, 0, pos);
        differ += a != b;
        assert_int_equal(rad_sampler_pick(s0, logits, NULL, 0, pos), rad_sampler_pick(plain_stream, logits, NULL, 0, pos));
        assert_int_equal(rad_sampler_pick(s1, logits, NULL, 0, pos), a);
    }
    assert_true(differ > N / 2);
    assert_true(rad_rng_stream_seed(7, 0) == 7);
    assert_true(rad_rng_stream_seed(7, 1) != rad_rng_stream_seed(7, 2));
    rad_sampler_free(plain_stream);
    rad_sampler_free(s0);
    rad_sampler_free(s1);
    rad_sampler_free(s2);
}

/* ------------------------------------------------------------------- RNG */

/* rad_rng_uniform stays in [0,1) and fills 100 equal buckets evenly (chi-square over 100k draws). */
static void test_rng_in_range_and_uniform(void **state)
{
    (void)state;
    enum { BUCKETS = 100, DRAWS = 100000 };
    static const uint64_t seeds[] = {0, 1, 0xdeadbeef};
    for (int k = 0; k < 3; k++) {
        int counts[BUCKETS] = {0};
        for (uint64_t c = 0; c < DRAWS; c++) {
            double u = rad_rng_uniform(seeds[k], c);
            assert_true(u >= 0.0 && u < 1.0);
            counts[(int)(u * BUCKETS)]++;
        }
        double expected = (double)DRAWS / BUCKETS, chi2 = 0;
        for (int i = 0; i < BUCKETS; i++)
            chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
        /* 99 degrees of freedom: mean 99, sd 14; 200 is seven sd out. */
        assert_true(chi2 < 200.0);
    }
}

/* rad_rng_uniform is splitmix64: seed 0, counter 0 gives its well-known first output. */
static void test_rng_is_splitmix64(void **state)
{
    (void)state;
    assert_true(rad_rng_uniform(0, 0) == (double)(0xe220a8397b1dcdafull >> 11) * 0x1.0p-53);
    /* Stateless: asking again, or after other draws, changes nothing. */
    double u = rad_rng_uniform(99, 12345);
    for (uint64_t c = 0; c < 10; c++) (void)rad_rng_uniform(99, c);
    assert_true(rad_rng_uniform(99, 12345) == u);
}

/* --------------------------------------------------------------- checks */

static void expect_rejected(const RadSamplerParams *p, const char *flag)
{
    rad_error_clear();
    assert_int_equal(rad_sampler_check(p), RAD_E_ARG);
    assert_non_null(strstr(rad_error_message(), flag));
    RadSampler *s = NULL;
    assert_int_equal(rad_sampler_create(p, 10, &s), RAD_E_ARG);
    assert_null(s);
}

/* rad_sampler_check rejects each out-of-range value with a message naming its flag. */
static void test_check_rejects_each_bad_value(void **state)
{
    (void)state;
    RadSamplerParams good, p;
    rad_sampler_defaults(&good);

    const float bad_temp[] = {-0.1f, NAN, INFINITY};
    for (int i = 0; i < 3; i++) {
        p = good;
        p.temperature = bad_temp[i];
        expect_rejected(&p, "--temp");
    }
    p = good;
    p.top_k = -1;
    expect_rejected(&p, "--top-k");
    const float bad_top_p[] = {0.0f, -0.5f, 1.01f, NAN};
    for (int i = 0; i < 4; i++) {
        p = good;
        p.top_p = bad_top_p[i];
        expect_rejected(&p, "--top-p");
    }
    const float bad_min_p[] = {-0.01f, 1.0f, NAN};
    for (int i = 0; i < 3; i++) {
        p = good;
        p.min_p = bad_min_p[i];
        expect_rejected(&p, "--min-p");
    }
    const float bad_penalty[] = {0.0f, -1.0f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        p = good;
        p.repeat_penalty = bad_penalty[i];
        expect_rejected(&p, "--repeat-penalty");
    }
    p = good;
    p.repeat_last_n = -1;
    expect_rejected(&p, "--repeat-last-n");

    /* The edges of each range are accepted. */
    p = good;
    p.temperature = 0.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_last_n = 0;
    assert_int_equal(rad_sampler_check(&p), RAD_OK);
}

/* rad_sampler_create refuses an empty vocabulary and leaves *out alone. */
static void test_create_rejects_empty_vocabulary(void **state)
{
    (void)state;
    RadSamplerParams p;
    rad_sampler_defaults(&p);
    RadSampler *s = NULL;
    assert_int_equal(rad_sampler_create(&p, 0, &s), RAD_E_ARG);
    assert_null(s);
    assert_int_equal(rad_sampler_create(&p, -5, &s), RAD_E_ARG);
    assert_null(s);
    rad_sampler_free(NULL); /* a no-op */
}

/* --------------------------------------------------------------- edges */

/* NaN logits are never picked, +inf wins outright, and an all -inf row still yields a token. */
static void test_non_finite_logits(void **state)
{
    (void)state;
    RadSamplerParams p;
    rad_sampler_defaults(&p);
    p.top_k = 0;
    const float with_nan[] = {NAN, 0.0f, NAN, 0.5f};
    const float with_inf[] = {0.0f, INFINITY, 3.0f, INFINITY};
    const float none[] = {-INFINITY, -INFINITY, NAN};
    int counts[4];
    tally(&p, with_nan, 4, 500, counts);
    assert_int_equal(counts[0] + counts[2], 0);
    for (int pos = 0; pos < 50; pos++) {
        assert_int_equal(pick1(&p, with_inf, 4, pos), 1);
        assert_int_equal(pick1(&p, none, 3, pos), 0);
    }
}

/* A single-token vocabulary always yields token 0. */
static void test_single_token_vocabulary(void **state)
{
    (void)state;
    RadSamplerParams p;
    rad_sampler_defaults(&p);
    const float one[] = {-3.0f};
    for (int pos = 0; pos < 20; pos++) assert_int_equal(pick1(&p, one, 1, pos), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_greedy_argmax_lowest_id_on_ties),
        cmocka_unit_test(test_penalty_lowers_repeated_positive_logit),
        cmocka_unit_test(test_penalty_lowers_repeated_negative_logit),
        cmocka_unit_test(test_penalty_applies_once_per_distinct_token),
        cmocka_unit_test(test_penalty_ignores_tokens_older_than_last_n),
        cmocka_unit_test(test_pick_leaves_logits_unmodified),
        cmocka_unit_test(test_low_temperature_sharpens),
        cmocka_unit_test(test_high_temperature_flattens),
        cmocka_unit_test(test_frequencies_follow_softmax),
        cmocka_unit_test(test_top_k_1_equals_greedy),
        cmocka_unit_test(test_top_k_keeps_k_largest_ties_by_lower_id),
        cmocka_unit_test(test_top_p_keeps_nucleus),
        cmocka_unit_test(test_min_p_drops_low_tokens),
        cmocka_unit_test(test_chain_matches_literal_reading),
        cmocka_unit_test(test_same_seed_and_position_same_token),
        cmocka_unit_test(test_different_seeds_differ),
        cmocka_unit_test(test_streams_of_one_seed_differ),
        cmocka_unit_test(test_rng_in_range_and_uniform),
        cmocka_unit_test(test_rng_is_splitmix64),
        cmocka_unit_test(test_check_rejects_each_bad_value),
        cmocka_unit_test(test_create_rejects_empty_vocabulary),
        cmocka_unit_test(test_non_finite_logits),
        cmocka_unit_test(test_single_token_vocabulary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
