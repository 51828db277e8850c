/*
** scheduler.c: the step scheduler (scheduler.h says what it guarantees).
*/
#include "scheduler.h"

#include "include/radiance.h"

int rad_sched_wants(const RadSchedWork *w, int r)
{
    switch (w->logits) {
    case RAD_LOGITS_LAST: return r == w->n - 1;
    case RAD_LOGITS_ALL: return 1;
    case RAD_LOGITS_MASK: return w->mask && w->mask[r] != 0;
    default: return 0;
    }
}

/* The longest run of rows [start, start + n) of w, n <= most, whose wanted
** rows fit in `out_room`; *out gets how many it wants. */
static int fit_chunk(const RadSchedWork *w, int start, int most, int out_room, int *out)
{
    int n = 0, wanted = 0;
    while (n < most) {
        int want = rad_sched_wants(w, start + n);
        if (wanted + want > out_room) break;
        wanted += want;
        n++;
    }
    *out = wanted;
    return n;
}

int rad_sched_next(const RadSchedWork *work, int n_work, const RadSchedLimits *lim, RadSchedItem *items)
{
    int n_items = 0, rows = 0, out = 0, prefill = 0, decoding = 0, blocked = 0;
    /* Decode rows first. */
    for (int i = 0; i < n_work && n_items < lim->max_seqs && rows < lim->max_tok; i++) {
        const RadSchedWork *w = &work[i];
        if (!w->decode || w->done >= w->n) continue;
        int wanted = 0;
        if (fit_chunk(w, w->done, 1, lim->max_out - out, &wanted) == 0) { blocked = 1; continue; }
        items[n_items++] = (RadSchedItem){.work = i, .start = w->done, .n = 1, .out = wanted};
        rows++;
        out += wanted;
        decoding = 1;
    }
    /* Then prefill chunks, as far as the limits allow. */
    for (int i = 0; i < n_work && n_items < lim->max_seqs && rows < lim->max_tok; i++) {
        const RadSchedWork *w = &work[i];
        if (w->decode || w->done >= w->n) continue;
        int most = lim->max_tok - rows;
        if (decoding && lim->max_mixed_tok - prefill < most) most = lim->max_mixed_tok - prefill;
        if (most > w->n - w->done) most = w->n - w->done;
        if (most <= 0) break;
        int wanted = 0, n = fit_chunk(w, w->done, most, lim->max_out - out, &wanted);
        if (n == 0) { blocked = 1; continue; }
        items[n_items++] = (RadSchedItem){.work = i, .start = w->done, .n = n, .out = wanted};
        rows += n;
        out += wanted;
        prefill += n;
    }
    /* Nothing fits although work remains: only a logits row larger than
    ** the whole logits buffer can do that. */
    if (n_items == 0 && blocked) return RAD_E_RANGE;
    return n_items;
}
