/*
** speculate.c: the verify loop of speculative decoding (speculate.h).
*/
#include "speculate.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How many verify steps the switch-off rule looks back over, and how long
** speculation stays off once it did not pay. */
enum { TIMED_STEPS = 8, OFF_STEPS = 32 };

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int rad_spec_init(RadSpec *s, RadDrafter drafter, const RadEngine *e, int k_max)
{
    memset(s, 0, sizeof *s);
    s->drafter = drafter;
    if (k_max < 1) k_max = 1;
    if (k_max > rad_engine_max_spec(e)) {
        if (drafter.free) drafter.free(drafter.self);
        return rad_error_set(RAD_E_ARG, "speculation of %d tokens needs an engine opened with max_spec >= %d (it has %d)",
                             k_max, k_max, rad_engine_max_spec(e));
    }
    s->k_max = k_max;
    s->k = k_max < 4 ? k_max : 4;
    s->vocab = rad_engine_n_vocab(e);
    s->context_cap = rad_engine_max_ctx(e) + k_max + 1;
    s->logits = malloc((size_t)(k_max + 1) * (size_t)s->vocab * sizeof *s->logits);
    s->mask = malloc((size_t)(k_max + 1));
    s->rows = malloc((size_t)(k_max + 1) * sizeof *s->rows);
    s->context = malloc((size_t)s->context_cap * sizeof *s->context);
    if (!s->logits || !s->mask || !s->rows || !s->context) {
        rad_spec_free(s);
        return rad_error_set(RAD_E_NOMEM, "out of memory for speculative decoding");
    }
    return RAD_OK;
}

void rad_spec_free(RadSpec *s)
{
    if (s->drafter.free) s->drafter.free(s->drafter.self);
    free(s->logits);
    free(s->mask);
    free(s->rows);
    free(s->context);
    memset(s, 0, sizeof *s);
}

/* After a verify step of `drafted` guesses, `accepted` of them good, that
** took `ns` for accepted + 1 tokens: the next depth, and whether to stop
** for a while.  The rule compares time per token produced with a plain
** step's time: rows are cheap on a CPU but not free, and a drafter that is
** mostly wrong costs its rows for nothing. */
static void adapt(RadSpec *s, int drafted, int accepted, double ns)
{
    if (drafted > 0) s->k = accepted == drafted ? (2 * s->k < s->k_max ? 2 * s->k : s->k_max) : accepted + 1;
    if (s->k > s->k_max) s->k = s->k_max;
    if (drafted == 0 || s->plain_ns <= 0) return;
    double per_token = ns / (accepted + 1);
    s->verify_ns_per_token = s->n_timed ? 0.75 * s->verify_ns_per_token + 0.25 * per_token : per_token;
    if (++s->n_timed >= TIMED_STEPS && s->verify_ns_per_token > s->plain_ns) {
        s->off_for = OFF_STEPS;         /* it does not pay now; try again later, gently */
        s->n_timed = 0;
        s->k = 1;
    }
}

int rad_spec_step(RadSpec *s, RadEngine *e, int seq, const int32_t *context, int n, RadPickFn pick, void *pick_ctx,
                  int32_t *out, float *logits)
{
    if (n <= 0 || n > s->context_cap - s->k_max - 1 || rad_engine_seq_len(e, seq) != n - 1)
        return rad_error_set(RAD_E_ARG, "speculation: the sequence holds %d tokens, the step was given %d",
                             rad_engine_seq_len(e, seq), n);
    int room = rad_engine_max_ctx(e) - n;       /* the guesses must fit the context too */
    int want = s->off_for > 0 ? 0 : s->k < room ? s->k : room;
    if (s->plain_ns <= 0 && s->stats.steps == 1) want = 0;     /* one plain step, to know what a step costs */
    int drafted = want > 0 ? s->drafter.propose(s->drafter.self, context, n, want, s->rows + 1) : 0;
    if (drafted < 0 || drafted > want) drafted = 0;
    s->rows[0] = context[n - 1];
    const int m = drafted + 1;
    RadSeqWork w = {.seq = seq, .tokens = s->rows, .n = m, .logits = RAD_LOGITS_ALL, .out = s->logits};
    double t0 = now_ns();
    int rc = rad_engine_decode(e, &w, 1);
    if (rc) return rc;

    memcpy(s->context, context, (size_t)n * sizeof *context);
    int count = 0;
    for (int j = 0; j < m; j++) {
        int token = pick(pick_ctx, s->logits + (size_t)j * s->vocab, s->rows + 1, j, (int64_t)n + j);
        out[count++] = token;
        if (j == drafted || token != s->rows[1 + j]) break;
        s->context[n + j] = token;              /* accepted: the sequence keeps it */
    }
    const int accepted = count - 1;
    if (accepted < drafted && (rc = rad_engine_seq_truncate(e, seq, n + accepted)) != RAD_OK) return rc;
    double ns = now_ns() - t0;
    if (logits) memcpy(logits, s->logits + (size_t)accepted * s->vocab, (size_t)s->vocab * sizeof *logits);
    if (s->drafter.accepted) s->drafter.accepted(s->drafter.self, s->context, n + accepted);

    s->stats.steps++;
    s->stats.drafted += drafted;
    s->stats.accepted += accepted;
    s->stats.picked += count;
    if (drafted == 0) {
        s->stats.plain_steps++;
        if (s->off_for > 0) { s->off_for--; s->stats.off_steps++; }
        s->plain_ns = s->plain_ns > 0 ? 0.9 * s->plain_ns + 0.1 * ns : ns;
    }
    adapt(s, drafted, accepted, ns);
    return count;
}
