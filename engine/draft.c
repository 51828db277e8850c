/*
** draft.c: the drafters of draft.h.
**
** The n-gram drafter is prompt lookup: find where the sequence's last few
** tokens occurred before and guess that what followed then follows now.
** The draft model runs a second, smaller engine greedily and keeps its one
** sequence equal to a prefix of the target's history.
*/
#include "draft.h"

#include <stdlib.h>
#include <string.h>

#include "text/rad_text.h"

/* -------------------------------------------------------------- n-gram */

int rad_ngram_propose(const RadNgramParams *p, const int32_t *history, int n, int max, int32_t *out)
{
    const int min_n = p->min_n > 0 ? p->min_n : 2, max_n = p->max_n >= min_n ? p->max_n : 4;
    if (max <= 0) return 0;
    const int from = p->window > 0 && n > p->window ? n - p->window : 0;
    for (int len = max_n; len >= min_n; len--) {
        if (n < len + 1) continue;
        const int32_t *suffix = history + n - len;
        /* the most recent earlier occurrence, ending before the suffix itself */
        for (int at = n - len - 1; at >= from; at--) {
            if (memcmp(history + at, suffix, (size_t)len * sizeof *history) != 0) continue;
            int k = 0;
            while (k < max && at + len + k < n) {
                out[k] = history[at + len + k];
                k++;
            }
            if (k > 0) return k;
        }
    }
    return 0;
}

typedef struct Ngram {
    RadNgramParams p;
} Ngram;

static int ngram_propose(void *self, const int32_t *history, int n, int max, int32_t *out)
{
    return rad_ngram_propose(&((Ngram *)self)->p, history, n, max, out);
}

static void ngram_accepted(void *self, const int32_t *history, int n) { (void)self, (void)history, (void)n; }
static void ngram_free(void *self) { free(self); }

int rad_draft_ngram(const RadNgramParams *p, RadDrafter *out)
{
    Ngram *g = calloc(1, sizeof *g);
    if (!g) return rad_error_set(RAD_E_NOMEM, "out of memory for the n-gram drafter");
    g->p = *p;
    *out = (RadDrafter){.self = g, .name = "ngram", .propose = ngram_propose, .accepted = ngram_accepted,
                        .free = ngram_free};
    return RAD_OK;
}

/* --------------------------------------------------------- draft model */

typedef struct DraftModel {
    RadEngine *e;
    int seq;
    int32_t *held;              /* [max_ctx] the tokens the draft sequence holds */
    int n_held;
    float *logits;              /* [n_vocab] */
    int vocab;
} DraftModel;

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Make the draft sequence hold exactly history[0..n), running only what it
** lacks; its logits are then the next token's. */
static int catch_up(DraftModel *d, const int32_t *history, int n)
{
    int same = 0;
    while (same < d->n_held && same < n && d->held[same] == history[same]) same++;
    if (same == n && same > 0) same--;          /* re-run the last token for its logits */
    if (same < d->n_held) {
        if (rad_engine_seq_truncate(d->e, d->seq, same) != RAD_OK) {
            rad_engine_seq_free(d->e, d->seq);
            if (rad_engine_seq_new(d->e, &d->seq)) return RAD_E_STATE;
            same = 0;
        }
        d->n_held = same;
    }
    int rc = rad_engine_eval(d->e, d->seq, history + same, n - same, d->logits);
    if (rc) return rc;
    memcpy(d->held + same, history + same, (size_t)(n - same) * sizeof *history);
    d->n_held = n;
    return RAD_OK;
}

static int model_propose(void *self, const int32_t *history, int n, int max, int32_t *out)
{
    DraftModel *d = self;
    int room = rad_engine_max_ctx(d->e) - n;
    if (max > room) max = room;
    if (max <= 0 || catch_up(d, history, n) != RAD_OK) return 0;
    int k = 0;
    while (k < max) {
        out[k] = argmax(d->logits, d->vocab);
        if (++k == max) break;
        if (rad_engine_eval(d->e, d->seq, &out[k - 1], 1, d->logits) != RAD_OK) break;
        d->held[d->n_held++] = out[k - 1];
    }
    return k;
}

static void model_accepted(void *self, const int32_t *history, int n)
{
    DraftModel *d = self;
    /* keep what agrees with the target; the next proposal runs the rest */
    int same = 0;
    while (same < d->n_held && same < n && d->held[same] == history[same]) same++;
    if (same < d->n_held && rad_engine_seq_truncate(d->e, d->seq, same) == RAD_OK) d->n_held = same;
}

static void model_free(void *self)
{
    DraftModel *d = self;
    if (!d) return;
    rad_engine_seq_free(d->e, d->seq);
    free(d->held);
    free(d->logits);
    free(d);
}

/* Whether two tokenizers have the same tokens under the same ids. */
static int same_vocabulary(const RadEngine *a, const RadEngine *b)
{
    if (rad_engine_n_vocab(a) != rad_engine_n_vocab(b)) return 0;
    const RadText *ta = rad_engine_text(a), *tb = rad_engine_text(b);
    if (!ta || !tb) return !ta && !tb;
    const RadTokenizer *x = rad_text_data(ta), *y = rad_text_data(tb);
    if (x->n_vocab != y->n_vocab) return 0;
    for (int i = 0; i < x->n_vocab; i++) {
        const char *s = x->token[i], *t = y->token[i];
        if ((s == NULL) != (t == NULL) || (s && strcmp(s, t) != 0)) return 0;
    }
    return 1;
}

int rad_draft_model(RadEngine *draft, const RadEngine *target, RadDrafter *out)
{
    if (!same_vocabulary(draft, target))
        return rad_error_set(RAD_E_UNSUPPORTED, "--draft %s: its vocabulary (%d tokens) is not %s's (%d tokens), token "
                             "for token: a draft model must share the target's tokenizer",
                             rad_engine_meta(draft)->name, rad_engine_n_vocab(draft), rad_engine_meta(target)->name,
                             rad_engine_n_vocab(target));
    DraftModel *d = calloc(1, sizeof *d);
    if (!d) return rad_error_set(RAD_E_NOMEM, "out of memory for the draft model");
    d->e = draft;
    d->vocab = rad_engine_n_vocab(draft);
    d->held = malloc((size_t)rad_engine_max_ctx(draft) * sizeof *d->held);
    d->logits = malloc((size_t)d->vocab * sizeof *d->logits);
    if (!d->held || !d->logits || rad_engine_seq_new(draft, &d->seq) != RAD_OK) {
        free(d->held);
        free(d->logits);
        free(d);
        return rad_error_set(RAD_E_NOMEM, "out of memory for the draft model");
    }
    *out = (RadDrafter){.self = d, .name = "draft model", .propose = model_propose, .accepted = model_accepted,
                        .free = model_free};
    return RAD_OK;
}
