/*
** speculate.h: speculative decoding, one verify step at a time.
**
** Plain decoding runs one token a step: pick a token from the logits, run
** it, pick the next.  A speculative step runs the token just picked and up
** to k tokens a drafter guessed after it (draft.h) in one step of k + 1 rows,
** then walks the rows: row j's logits give the pick that plain decoding
** would have made after the j-th guess, with the same sampler, the same
** history and the same position, so the same token.  While the pick equals
** the next guess the guess is accepted; the first pick that differs (or the
** one after the last guess) ends the step.  The rows past it are rolled
** back (rad_engine_seq_truncate; the engine keeps max_spec positions of
** slack for it).
**
** Because a row's logits do not depend on the rows beside it (docs/OPS.md)
** and the sampler's draw is keyed on the position (docs/SAMPLING.md), the
** picks are exactly plain decoding's, at any temperature and seed: the
** output is byte-identical with speculation on or off.  With a drafter that
** guesses one token (n-gram, a greedy draft model) this "accept while the
** pick matches" rule is the standard rejection rule (accept the guess with
** probability p(guess), else draw from p without it), so nothing is lost to
** a weaker rule.  docs/SPECULATION.md says more.
**
** The depth adapts: all guesses accepted doubles k (up to k_max), a miss
** sets it to one more than what was accepted.  Speculation switches itself
** off for a while when it does not pay: the verify steps' measured time per
** token they produce, against a plain step's, over the last few steps.
*/
#ifndef RAD_SPECULATE_H
#define RAD_SPECULATE_H

#include <stdint.h>

#include "draft.h"

/* The caller's sampler: the token plain decoding would pick from `logits`
** at `position` (the tokens the sequence holds when it picks), with the
** caller's own history (a repeat penalty's) extended by the guesses this
** step accepted so far, guessed[0..n_guessed). */
typedef int (*RadPickFn)(void *ctx, const float *logits, const int32_t *guessed, int n_guessed, int64_t position);

typedef struct RadSpecStats {
    int64_t steps;              /* verify steps (each ran at least the picked token) */
    int64_t drafted;            /* guesses run */
    int64_t accepted;           /* guesses the target agreed with */
    int64_t picked;             /* tokens produced */
    int64_t plain_steps;        /* steps with no guess: the drafter abstained or speculation was off */
    int64_t off_steps;          /* of them, while speculation was switched off */
} RadSpecStats;

typedef struct RadSpec {
    RadDrafter drafter;
    int k_max, k;
    int off_for;                /* plain steps left before speculation is tried again */
    double plain_ns;            /* measured time of a plain step (running mean) */
    double verify_ns_per_token; /* recent verify steps' time per token produced */
    int n_timed;
    RadSpecStats stats;
    int vocab;
    float *logits;              /* [k_max + 1, vocab] */
    uint8_t *mask;              /* [k_max + 1] */
    int32_t *rows;              /* [k_max + 1] the step's tokens */
    int32_t *context;           /* [max_ctx + k_max + 1] the sequence's tokens with the accepted guesses */
    int context_cap;
} RadSpec;

/* Take `drafter` over (freed by rad_spec_free) for speculation on engine e,
** at most k_max guesses a step; e must have been opened with max_spec >=
** k_max.  RAD_E_ARG naming max_spec otherwise. */
int  rad_spec_init(RadSpec *s, RadDrafter drafter, const RadEngine *e, int k_max);
void rad_spec_free(RadSpec *s);

/* One step.  The sequence holds context[0..n-1); context[n-1] is the
** token picked last, not yet run.  Runs it and the guesses, writes the picks
** (at least one) to out (room for k_max + 1) and returns their count, or a
** negative RAD_E_*.  Afterwards the sequence holds context[0..n) and every
** pick but the last (which is picked, not run: the next step's
** context[n-1]), and `logits` (when not NULL) holds the row the last pick
** came from. */
int  rad_spec_step(RadSpec *s, RadEngine *e, int seq, const int32_t *context, int n, RadPickFn pick, void *pick_ctx,
                   int32_t *out, float *logits);

#endif /* RAD_SPECULATE_H */
