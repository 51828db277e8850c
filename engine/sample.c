/*
** sample.c: the sampler chain and the counter-based RNG that drives it.
**
** Every generated token passes through here once.  This file owns three
** things: the order of the stages (DESIGN.md section 7, docs/SAMPLING.md),
** the tie-breaking rules that make a pick a pure function of (parameters,
** logits, history, position), and the scratch memory the stages work in.
** It keeps no other state between calls, so replaying a sequence, or
** batching its steps differently, gives the same tokens.
**
** The stages, in order:
**   1. repeat penalty      over distinct tokens among the last repeat_last_n
**   2. greedy              temperature 0: argmax, lowest id on ties, stop
**   3. temperature         z / T
**   4. top-k               keep the k largest, lowest id on ties
**   5. softmax
**   6. top-p               keep the smallest sorted prefix with mass >= top_p
**   7. min-p               drop p < min_p * p_max
**   8. pick                renormalise, draw u = rad_rng_uniform(stream seed, position)
**
** The code takes three shortcuts that change the cost but not the answer,
** each argued where it is taken: temperature is folded into the softmax's
** exponent; min-p filters before top-p cuts; and top-p sorts only the head of
** the ranking that can hold the nucleus, never the whole vocabulary.
*/
#include "sample.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ parameters */

void rad_sampler_defaults(RadSamplerParams *p)
{
    memset(p, 0, sizeof *p);    /* fields added later default to zero, "off" */
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0;
}

int rad_sampler_check(const RadSamplerParams *p)
{
    if (!p) return rad_error_set(RAD_E_ARG, "sampler: no parameters given");

    /* Each test is written as !(in range) so that NaN, which fails every
    ** comparison, is rejected along with the plainly wrong values. */
    if (!(p->temperature >= 0 && isfinite(p->temperature)))
        return rad_error_set(RAD_E_ARG,
                             "--temp must be a finite number >= 0, 0 for greedy (got %g)",
                             (double)p->temperature);
    if (p->top_k < 0)
        return rad_error_set(RAD_E_ARG, "--top-k must be >= 0, 0 for off (got %d)", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return rad_error_set(RAD_E_ARG, "--top-p must be in (0, 1], 1 for off (got %g)",
                             (double)p->top_p);
    if (!(p->min_p >= 0 && p->min_p < 1))
        return rad_error_set(RAD_E_ARG, "--min-p must be in [0, 1), 0 for off (got %g)",
                             (double)p->min_p);
    if (!(p->repeat_penalty > 0 && isfinite(p->repeat_penalty)))
        return rad_error_set(RAD_E_ARG,
                             "--repeat-penalty must be a finite number > 0, 1 for off (got %g)",
                             (double)p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return rad_error_set(RAD_E_ARG, "--repeat-last-n must be >= 0, 0 for off (got %d)",
                             p->repeat_last_n);
    return RAD_OK;
}

/* ------------------------------------------------------------------- RNG */

/* splitmix64 (Steele, Lea and Flood, "Fast Splittable Pseudorandom Number
** Generators", OOPSLA 2014).  Its state advances by a fixed odd increment,
** 2^64 divided by the golden ratio, and each output is the state pushed
** through a bijective mix of xor-shifts and multiplies.  Since the n-th
** state is simply seed + (n + 1) * increment, any output can be computed
** directly from (seed, n): that is what makes the generator counter-based,
** and why a draw never depends on the draws before it. */
#define RAD_SPLITMIX_INCREMENT 0x9e3779b97f4a7c15ull

static uint64_t splitmix_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t rad_rng_stream_seed(uint64_t seed, uint64_t stream)
{
    return stream == 0 ? seed : splitmix_mix(seed ^ splitmix_mix(stream * RAD_SPLITMIX_INCREMENT));
}

double rad_rng_uniform(uint64_t seed, uint64_t counter)
{
    /* Unsigned arithmetic wraps by definition, which is the modulus we want. */
    uint64_t z = splitmix_mix(seed + (counter + 1) * RAD_SPLITMIX_INCREMENT);

    /* The top 53 bits fill a double's mantissa: k / 2^53 for k < 2^53 is
    ** exact, evenly spaced, and strictly below 1. */
    return (double)(z >> 11) * 0x1.0p-53;
}

/* --------------------------------------------------------------- sampler */

/* One token still in the running. */
typedef struct RadCand {
    float logit;    /* after the penalty */
    float w;        /* exp((logit - max) / T): probability times Z; 1 for the top token */
    int32_t id;
} RadCand;

struct RadSampler {
    RadSamplerParams p;
    int n_vocab;
    float *logit;       /* (n_vocab) the caller's row after the penalty */
    RadCand *cand;      /* (n_vocab) the candidates the stages narrow down */
    uint8_t *seen;      /* (n_vocab) 1 for a token penalised in this call; all 0 between calls */
};

int rad_sampler_create(const RadSamplerParams *p, int n_vocab, RadSampler **out)
{
    int rc = rad_sampler_check(p);
    if (rc) return rc;
    if (n_vocab <= 0)
        return rad_error_set(RAD_E_ARG, "sampler: vocabulary size must be > 0 (got %d)", n_vocab);
    if (!out) return rad_error_set(RAD_E_ARG, "sampler: nowhere to store the sampler");

    RadSampler *s = calloc(1, sizeof *s);
    if (s) {
        s->logit = malloc((size_t)n_vocab * sizeof *s->logit);
        s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
        s->seen = calloc((size_t)n_vocab, sizeof *s->seen);
    }
    if (!s || !s->logit || !s->cand || !s->seen) {
        rad_sampler_free(s);
        return rad_error_set(RAD_E_NOMEM, "sampler: out of memory for a vocabulary of %d tokens",
                             n_vocab);
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    *out = s;
    return RAD_OK;
}

void rad_sampler_free(RadSampler *s)
{
    if (!s) return;
    free(s->logit);
    free(s->cand);
    free(s->seen);
    free(s);
}

/* Stage 1.  Copy the caller's row into scratch and apply the repeat penalty
** to each distinct token among the last repeat_last_n of history, once
** however often it occurs there.  The rule is the CTRL paper's as llama.cpp
** applies it: a positive logit is divided by the penalty, a negative one
** multiplied, so a penalty above 1 always moves the token down.  NaN becomes
** -inf on the way in, so every later comparison is a total order. */
static void penalise(RadSampler *s, const float *logits, const int32_t *history, int n_history)
{
    int n_vocab = s->n_vocab;
    for (int i = 0; i < n_vocab; i++)
        s->logit[i] = isnan(logits[i]) ? -INFINITY : logits[i];

    float penalty = s->p.repeat_penalty;
    int last_n = s->p.repeat_last_n;
    if (penalty == 1.0f || last_n == 0 || n_history == 0) return;

    int first = n_history > last_n ? n_history - last_n : 0;
    for (int i = first; i < n_history; i++) {
        int32_t t = history[i];
        if (t < 0 || t >= n_vocab || s->seen[t]) continue;
        s->seen[t] = 1;
        s->logit[t] = s->logit[t] > 0 ? s->logit[t] / penalty : s->logit[t] * penalty;
    }

    /* Clear just the marks this call set: O(last_n), not O(n_vocab). */
    for (int i = first; i < n_history; i++) {
        int32_t t = history[i];
        if (t >= 0 && t < n_vocab) s->seen[t] = 0;
    }
}

/* The one order every stage ranks by: the higher logit first and, among
** equal logits, the lower id.  Because it is total, no result depends on the
** sort algorithm or on the order candidates arrived in. */
static int ahead(const RadCand *a, const RadCand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int compare_cand(const void *pa, const void *pb)
{
    const RadCand *a = pa, *b = pb;
    return ahead(a, b) ? -1 : ahead(b, a) ? 1 : 0;
}

/* Restore the heap below slot i of h[0..n), where every parent ranks behind
** its children, so that h[0] is the weakest candidate kept. */
static void sift_down(RadCand *h, int n, int i)
{
    for (;;) {
        int weakest = i, left = 2 * i + 1, right = left + 1;
        if (left < n && ahead(&h[weakest], &h[left])) weakest = left;
        if (right < n && ahead(&h[weakest], &h[right])) weakest = right;
        if (weakest == i) return;
        RadCand t = h[i];
        h[i] = h[weakest];
        h[weakest] = t;
        i = weakest;
    }
}

/* Stage 4, for 0 < k < n_vocab.  Stream the vocabulary past a heap of the k
** best seen so far, rooted at the weakest of them: each token costs one
** comparison, and a token that displaces the root at most log k swaps, so
** the pass is O(n_vocab log k).  Then heapsort the k in place; moving the
** weakest to the back each round leaves them best first.  Fills
** s->cand[0..k) in rank order. */
static void select_top_k(RadSampler *s, int k)
{
    RadCand *h = s->cand;
    int n = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        RadCand c = {s->logit[i], 0.0f, i};
        if (n < k) {
            h[n++] = c;
            if (n == k)
                for (int j = k / 2 - 1; j >= 0; j--) sift_down(h, k, j);
        } else if (ahead(&c, &h[0])) {
            h[0] = c;
            sift_down(h, k, 0);
        }
    }
    for (int end = k - 1; end > 0; end--) {
        RadCand t = h[0];
        h[0] = h[end];
        h[end] = t;
        sift_down(h, end, 0);
    }
}

/* Stage 6's helper, for when no top-k has ranked the candidates.  Top-p
** needs the ranking only as far down as the mass reaches top_p, and on real
** logits that head is a small part of the vocabulary, so sorting all of it
** would waste most of the work.  Try falling weight floors; the candidates at
** or above a floor are a prefix of the ranking, so once their mass reaches
** `need` the nucleus lies inside them and the rest can go unsorted.  Each try
** is one pass; the floors fall a thousandfold at a time.  Returns how many
** candidates remain at the front of c. */
static int keep_head(RadCand *c, int n, double need)
{
    float bar = 0.1f;
    for (int tries = 0; tries < 10; tries++, bar *= 1e-3f) { /* down to 1e-28 */
        double mass = 0;
        int above = 0;
        for (int i = 0; i < n; i++)
            if (c[i].w >= bar) {
                mass += c[i].w;
                above++;
            }
        if (above == n) return n; /* a lower floor cannot drop anything either */
        if (mass < need) continue;
        int m = 0;
        for (int i = 0; i < n; i++)
            if (c[i].w >= bar) c[m++] = c[i];
        return m;
    }
    return n;
}

int rad_sampler_pick(RadSampler *s, const float *logits, const int32_t *history, int n_history,
                     int64_t position)
{
    assert(s && logits);
    assert(n_history >= 0 && (history || n_history == 0));
    const RadSamplerParams *p = &s->p;
    int n_vocab = s->n_vocab;

    /* 1. Repeat penalty. */
    penalise(s, logits, history, n_history);

    /* 2. Greedy.  The argmax is wanted either way: it is the answer at
    ** temperature 0, and its logit anchors the softmax below.  A strict >
    ** keeps the lowest id among equals.  When the top logit is +inf that
    ** token is certain (and inf - inf would poison the softmax); when no
    ** logit is finite there is no distribution to draw from.  Both fall back
    ** to the greedy token, so the answer stays defined. */
    int best = 0;
    for (int i = 1; i < n_vocab; i++)
        if (s->logit[i] > s->logit[best]) best = i;
    float max = s->logit[best];
    if (p->temperature == 0 || !isfinite(max)) return best;

    /* 4. Top-k, ahead of stage 3: dividing by T > 0 keeps the ranking, so
    ** the same k survive either way.  Off (or k >= n_vocab) keeps everyone,
    ** in id order. */
    int n = n_vocab;
    int sorted = 0;
    if (p->top_k > 0 && p->top_k < n_vocab) {
        select_top_k(s, p->top_k);
        n = p->top_k;
        sorted = 1;
    } else {
        for (int32_t i = 0; i < n_vocab; i++) s->cand[i] = (RadCand){s->logit[i], 0.0f, i};
    }

    /* 3 and 5. Temperature and softmax.  exp((z - max) / T) is
    ** exp(z / T) / exp(max / T): the same distribution as dividing first,
    ** but the exponent is never positive, so a small T cannot overflow it.
    ** The normaliser Z is summed in double so a long tail of small weights
    ** is not rounded away. */
    float t = p->temperature;
    double z = 0;
    for (int i = 0; i < n; i++) {
        s->cand[i].w = expf((s->cand[i].logit - max) / t);
        z += s->cand[i].w;
    }

    /* 7, ahead of 6.  Min-p drops p < min_p * p_max; since p / p_max = w,
    ** that is w < min_p.  Weights that underflowed to 0 go too: they could
    ** never be drawn.  Top-p and min-p each keep a prefix of the ranked
    ** candidates, and two prefixes intersect in the shorter, so filtering
    ** here first keeps the same tokens and leaves top-p fewer to sort. The
    ** top token has w = 1 > min_p, so at least one survives. */
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (s->cand[i].w > 0 && s->cand[i].w >= p->min_p) s->cand[kept++] = s->cand[i];
    n = kept;
    assert(n >= 1);

    /* 6. Top-p: the smallest ranked prefix whose share of Z reaches top_p,
    ** at least one token.  Mass is measured against the whole softmax of
    ** stage 5, not just what min-p left.  If the survivors never reach
    ** top_p, the nucleus is longer than they are and all of them stay. */
    if (p->top_p < 1.0f) {
        double need = (double)p->top_p * z, mass = 0;
        if (!sorted) {
            n = keep_head(s->cand, n, need);
            qsort(s->cand, (size_t)n, sizeof *s->cand, compare_cand);
        }
        for (int i = 0; i < n; i++) {
            mass += s->cand[i].w;
            if (mass >= need) {
                n = i + 1;
                break;
            }
        }
    }

    /* 8. Renormalise and pick.  Scaling u by the kept mass is the same
    ** renormalisation as dividing every weight by it.  The walk follows the
    ** candidates' current order, ranked or by id, both fixed by the
    ** parameters; the last candidate takes whatever rounding leaves over. */
    double total = 0;
    for (int i = 0; i < n; i++) total += s->cand[i].w;
    double target = rad_rng_uniform(rad_rng_stream_seed(p->seed, p->stream), (uint64_t)position) * total;
    double run = 0;
    for (int i = 0; i < n - 1; i++) {
        run += s->cand[i].w;
        if (target < run) return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
