/*
** scheduler.h: which rows go into the next step.
**
** A call to rad_engine_decode hands the engine several pieces of work, one
** per sequence: a decode row (one token after a sequence that already holds
** positions), a prompt to prefill, or a draft to verify.  The scheduler cuts
** them into steps, each one RadBatch for the plugin:
**
**   - decode rows first, then prefill chunks (the plugins' decode and
**     prefill halves rely on this order: docs/SCHEDULING.md);
**   - at most max_tok rows in a step; beside decode rows, at most
**     max_mixed_tok prefill rows, so a long prompt does not stall the
**     sequences that are generating;
**   - at most max_out rows whose logits are wanted (the logits buffer's
**     rows): a chunk is shortened to fit;
**   - a sequence appears at most once in a step, its rows in position order.
**
** It is plain logic over counts, with no engine, so tests/unit/test_scheduler.c
** drives it directly.
*/
#ifndef RAD_SCHEDULER_H
#define RAD_SCHEDULER_H

#include <stdint.h>

/* One piece of work as the scheduler sees it. */
typedef struct RadSchedWork {
    int n;                      /* rows in all */
    int done;                   /* rows already run (or attached from a shared prefix) */
    int decode;                 /* a decode row: one token on a sequence that holds positions */
    int logits;                 /* RadLogitsWanted (radiance.h) */
    const uint8_t *mask;        /* RAD_LOGITS_MASK: [n] */
} RadSchedWork;

/* A step's share of one piece of work: rows [start, start + n). */
typedef struct RadSchedItem {
    int work;
    int start, n;
    int out;                    /* of those, the rows whose logits are wanted */
} RadSchedItem;

typedef struct RadSchedLimits {
    int max_tok;                /* rows a step holds */
    int max_mixed_tok;          /* prefill rows beside decode rows */
    int max_out;                /* logits rows a step returns */
    int max_seqs;               /* sequences a step holds */
} RadSchedLimits;

/* Whether row r (0-based) of work w wants its logits. */
int rad_sched_wants(const RadSchedWork *w, int r);

/* Plan the next step over work[0..n_work): fills items (at most
** lim->max_seqs) and returns how many, 0 when every piece is done.  A
** negative return is RAD_E_RANGE: a row that wants logits cannot fit at all
** (max_out is 0). */
int rad_sched_next(const RadSchedWork *work, int n_work, const RadSchedLimits *lim, RadSchedItem *items);

#endif /* RAD_SCHEDULER_H */
