/*
** draft.h: drafters, which guess the tokens a model is about to produce.
**
** Speculative decoding (engine/speculate.c) asks a drafter for up to k
** tokens that should follow the sequence so far, runs them through the
** target model in one step, and keeps the longest run the model agrees with.
** A guess costs almost nothing to verify on a CPU (a decode step reads every
** weight once, however many rows it carries), so every accepted token is
** nearly free, and a wrong guess costs only its rows.
**
** A drafter is a small interface over token ids, so the verify loop knows
** none of them:
**   - n-gram (prompt lookup, rad_draft_ngram): the longest suffix of the
**     sequence that occurred earlier in it, and what followed it there.  No
**     model at all; it pays when the reply repeats its input (code edits,
**     summaries that quote, structured output).
**   - a draft model (rad_draft_model): a smaller model with the same
**     vocabulary, run greedily as a second engine.
*/
#ifndef RAD_DRAFT_H
#define RAD_DRAFT_H

#include <stdint.h>

#include "include/radiance.h"

typedef struct RadDrafter {
    void *self;
    const char *name;           /* "ngram", "draft model" */
    /* Up to `max` tokens expected after history[0..n), into out; returns
    ** how many (0: the drafter abstains).  history ends with the token the
    ** target sampled last. */
    int (*propose)(void *self, const int32_t *history, int n, int max, int32_t *out);
    /* The target now holds history[0..n) for good (after a verify step), so
    ** a drafter with state of its own can drop what it guessed past it. */
    void (*accepted)(void *self, const int32_t *history, int n);
    void (*free)(void *self);
} RadDrafter;

/* ------------------------------------------------------------- n-gram */

typedef struct RadNgramParams {
    int min_n, max_n;           /* the suffix lengths tried, longest first (default 2..4) */
    int window;                 /* how far back matches are looked for; 0 = the whole history */
} RadNgramParams;

/* The n-gram drafter: pure, over token ids, no engine.  For n from max_n
** down to min_n, the most recent earlier occurrence of the history's last n
** tokens; the tokens that followed it (up to max, stopping at the history's
** end) are the proposal.  Ties between lengths go to the longer match. */
int rad_draft_ngram(const RadNgramParams *p, RadDrafter *out);

/* The proposal alone, for tests and callers with no drafter to hold:
** what rad_draft_ngram's propose returns. */
int rad_ngram_propose(const RadNgramParams *p, const int32_t *history, int n, int max, int32_t *out);

/* --------------------------------------------------------- draft model */

/* A draft model: `draft` (an open engine, owned by the caller, freed
** after the drafter) proposes greedily, keeping one sequence in step with
** the target's history.  RAD_E_UNSUPPORTED, naming both models, unless its
** vocabulary is the target's, token for token. */
int rad_draft_model(RadEngine *draft, const RadEngine *target, RadDrafter *out);

#endif /* RAD_DRAFT_H */
