/*
** sample.h: the sampler, which turns one row of logits into one token id.
**
** The chain is fixed and documented (docs/SAMPLING.md): repeat penalty,
** greedy when the temperature is 0, temperature, top-k, softmax, top-p,
** min-p, then a pick driven by a counter-based RNG keyed on (seed, stream,
** position).
** Keying the draw on the position rather than on a running stream is what
** makes a sequence's tokens independent of how steps were batched.
**
** A sampler owns its scratch memory, sized once for the vocabulary, so
** picking never allocates.  It is not shared between threads: give each
** sequence, or each thread, its own.
*/
#ifndef RAD_SAMPLE_H
#define RAD_SAMPLE_H

#include <stdint.h>

#include "rad_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct RadSamplerParams {
    float temperature;      /* 0 = greedy (argmax; ties -> lowest id) */
    int   top_k;            /* 0 = off */
    float top_p;            /* 1 = off */
    float min_p;            /* 0 = off */
    float repeat_penalty;   /* 1 = off */
    int   repeat_last_n;    /* how many recent tokens the penalty looks at; 0 = off */
    uint64_t seed;
    uint64_t stream;        /* which sequence draws: 0 = the seed's own stream; two sequences
                            ** sampling with one seed give each a stream, so they do not
                            ** draw the same numbers (the draw is keyed on seed, stream,
                            ** position) */
} RadSamplerParams;

/* Fill `p` with the defaults: temperature 0.8, top_k 40, top_p 0.95,
** min_p 0.05, repeat_penalty 1.0 (off), repeat_last_n 64, seed 0. */
void rad_sampler_defaults(RadSamplerParams *p);

/* Return 0 when every field of `p` is in range, else RAD_E_ARG with a
** message naming the command-line flag at fault (--temp, --top-k, --top-p,
** --min-p, --repeat-penalty, --repeat-last-n) and the value it had. */
int rad_sampler_check(const RadSamplerParams *p);

typedef struct RadSampler RadSampler;

/* Check `p`, copy it, and allocate all scratch for a vocabulary of `n_vocab`
** tokens, storing the new sampler in *out.  Returns 0, RAD_E_ARG (bad
** parameters or n_vocab <= 0) or RAD_E_NOMEM; *out is untouched on failure.
** The caller frees the sampler with rad_sampler_free. */
int rad_sampler_create(const RadSamplerParams *p, int n_vocab, RadSampler **out);

/* Pick the next token from `logits` (n_vocab floats, not modified), given
** the tokens so far (`history`, for the penalty; may be NULL when n_history
** is 0; ids outside the vocabulary are ignored) and the absolute position of
** the token being picked, which keys the RNG.  Returns the token id (>= 0).
** Never allocates and cannot fail.  NaN logits are treated as -inf; if any
** logit is +inf, or none is finite, the greedy token is returned. */
int rad_sampler_pick(RadSampler *s, const float *logits, const int32_t *history,
                     int n_history, int64_t position);

/* Release a sampler and its scratch.  NULL is a no-op. */
void rad_sampler_free(RadSampler *s);

/* The seed a sampler's stream draws from: `seed` itself for stream 0 (so a
** single sequence draws what it always drew), else a seed derived from
** both, as far from `seed` as splitmix64 makes it. */
uint64_t rad_rng_stream_seed(uint64_t seed, uint64_t stream);

/* The counter-based RNG: a uniform double in [0,1) from (seed, counter)
** alone, no state, so a result does not depend on batching or on how many
** draws came before.  The value is the counter-th output (from 0) of the
** splitmix64 generator started at state `seed`, keeping its top 53 bits. */
double rad_rng_uniform(uint64_t seed, uint64_t counter);

#ifdef __cplusplus
}
#endif
#endif /* RAD_SAMPLE_H */
