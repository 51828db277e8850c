/*
** relayout.c: kernels' private copies of weights (rad_kernel.h, relayout).
**
** At open, after selection, each weight an op declares is offered to the
** rows selected for the op; a row that wants its own layout says how many
** bytes, and gets a copy, made once per (weight, relayout function) so the
** rows of one library that share a layout share the copy.  At issue time
** issue.c hands a row its copy (layout = RAD_LAYOUT_KERNEL) and every
** other row the mapped bytes.  Why a copy at all: a kernel can read eight
** interleaved rows as one stream and keep their sums in one register
** (kernels/cpu/x8.c); the file keeps the canonical layout.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine_internal.h"
#include "pool.h"
#include "../formats/file_access.h"

/* The stored bytes of weight w as an operand. */
void rad_weight_tensor(const RadWeightEntry *w, RadTensor *t)
{
    memset(t, 0, sizeof *t);
    t->data = (void *)w->data;
    t->enc = w->enc;
    t->rank = w->d.rank;
    memcpy(t->shape, w->d.shape, sizeof t->shape);
    t->row_bytes = w->row_bytes;
    /* A stack of slices (a MoE layer's experts): slice e is the e-th of
    ** shape[0] equal runs of rows, contiguous as the container stores it. */
    if (w->d.n_slices > 0) {
        int64_t rows = 1;
        for (int d = 1; d + 1 < w->d.rank; d++) rows *= w->d.shape[d];
        t->n_slices = w->d.n_slices;
        t->slice_bytes = rows * w->row_bytes;
    }
}

/* The copy of w that `row` made at load, or NULL. */
const RadRelayoutCopy *rad_relayout_copy(const RadWeightEntry *w, const RadKernelRow *row)
{
    if (!row->relayout) return NULL;
    for (int c = 0; c < w->n_copies; c++)
        if (w->copies[c].relayout == row->relayout) return &w->copies[c];
    return NULL;
}

/* A relayout copy: 64-byte aligned; a large one on 2 MiB boundaries and
** asking for transparent huge pages, since a decode step streams through
** all of it (fewer TLB misses, fewer page faults while it is written). */
static void *alloc_copy(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge) return aligned_alloc(64, (bytes + 63) / 64 * 64);
    size_t rounded = (bytes + huge - 1) / huge * huge;
    void *data = aligned_alloc(huge, rounded);
    if (data) (void)madvise(data, rounded, MADV_HUGEPAGE);   /* advice only: fine if refused */
    return data;
}

/* One copy; the weight's last one to finish gives its mapped pages back,
** while the other copies are still being written, so the peak of a load is
** the plan's figure plus the weights in flight, not the file plus every copy. */
static void relayout_task(void *ctx, int i)
{
    RadRelayoutList *list = ctx;
    RadRelayoutJob *j = &list->job[i];
    if (!j->chosen) return;
    j->rc = j->row->relayout(&j->stored, j->dst);
    if (j->rc || j->owner < 0) return;
    RadRelayoutJob *owner = &list->job[j->owner];
    if (atomic_fetch_sub(&owner->left, 1) == 1) rad_file_drop(owner->w->data, (uint64_t)owner->stored_bytes);
}

/* Whether every band of every op reading w runs a row that wants its own
** layout of w: then, once the copies exist, no step reads w as stored. */
static int only_copies_read(const RadBuilder *b, rad_weight id)
{
    const RadWeightEntry *w = &b->weights[id];
    for (int i = 0; i < b->n_ops; i++) {
        const RadOpEntry *op = &b->ops[i];
        int reads = 0;
        for (int n = 0; n < op->n_weights; n++) reads |= op->weights[n] == id;
        if (!reads) continue;
        for (int k = 0; k < op->n_bands; k++) {
            const RadKernelRow *row = op->bands[k].row;
            if (!row || !row->relayout_bytes || !row->relayout) return 0;
            RadTensor t;
            rad_weight_tensor(w, &t);
            if (!row->relayout_bytes(&t)) return 0;
        }
    }
    /* Bytes another weight also names (a tied head is a view of the
    ** embedding, which embed_lookup reads as stored) are not this weight's
    ** to give back. */
    if (w->source) return 0;
    for (int i = 0; i < b->n_weights; i++)
        if (b->weights[i].source && strcmp(b->weights[i].source, w->name) == 0) return 0;
    return 1;
}

int rad_relayout_list(RadBuilder *b, RadRelayoutList *list)
{
    memset(list, 0, sizeof *list);
    /* jobs already listed for a weight: first[w] starts its chain in `next` */
    int *first = malloc((size_t)(b->n_weights ? b->n_weights : 1) * sizeof *first);
    if (!first) return RAD_E_NOMEM;
    for (int i = 0; i < b->n_weights; i++) first[i] = -1;
    int rc = RAD_OK;
    for (int i = 0; i < b->n_ops && !rc; i++) {
        const RadOpEntry *op = &b->ops[i];
        for (int k = 0; k < op->n_bands && !rc; k++) {
            const RadKernelRow *row = op->bands[k].row;
            if (!row || !row->relayout_bytes || !row->relayout) continue;
            for (int n = 0; n < op->n_weights; n++) {
                rad_weight id = op->weights[n];
                if (id < 0 || id >= b->n_weights || !b->weights[id].present) continue;
                int listed = 0;
                for (int j = first[id]; j >= 0 && !listed; j = list->job[j].next)
                    listed = list->job[j].row->relayout == row->relayout;
                if (listed) continue;
                RadWeightEntry *w = &b->weights[id];
                RadTensor t;
                rad_weight_tensor(w, &t);
                size_t bytes = row->relayout_bytes(&t);
                if (!bytes) continue;
                if (list->n == list->cap) {
                    int cap = list->cap ? 2 * list->cap : 64;
                    RadRelayoutJob *more = realloc(list->job, (size_t)cap * sizeof *more);
                    if (!more) { rc = RAD_E_NOMEM; break; }
                    list->job = more;
                    list->cap = cap;
                }
                int64_t stored = t.row_bytes * (t.rank == 2 ? t.shape[0] : 1);
                list->job[list->n] = (RadRelayoutJob){.row = row, .w = w, .stored = t, .bytes = bytes,
                                                      .stored_bytes = stored, .next = first[id],
                                                      .releases = first[id] < 0 && only_copies_read(b, id)};
                first[id] = list->n++;
            }
        }
    }
    free(first);
    return rc;
}

void rad_relayout_list_free(RadRelayoutList *list)
{
    free(list->job);
    memset(list, 0, sizeof *list);
}

int rad_relayout_make(RadBuilder *b, RadPool *pool, RadRelayoutList *list)
{
    (void)b;
    int rc = RAD_OK;
    for (int i = 0; i < list->n && !rc; i++) {
        RadRelayoutJob *j = &list->job[i];
        if (!j->chosen) continue;
        RadRelayoutCopy *grown = realloc(j->w->copies, (size_t)(j->w->n_copies + 1) * sizeof *grown);
        if (!grown) { rc = RAD_E_NOMEM; break; }
        j->w->copies = grown;
        j->dst = alloc_copy(j->bytes);
        if (!j->dst) {
            rc = rad_error_set(RAD_E_NOMEM, "out of memory for the %zu-byte %s layout of weight '%s'", j->bytes,
                               j->row->name, j->w->name);
            break;
        }
        /* listed before it is written: a failed job leaves it to the weight's free */
        j->w->copies[j->w->n_copies++] =
            (RadRelayoutCopy){.relayout = j->row->relayout, .data = j->dst, .bytes = j->bytes};
    }
    /* A weight whose every layout is chosen and that nothing reads as stored
    ** gives its pages back once its copies exist. Its jobs chain through
    ** `next` to its first-listed job, the one marked `releases`, which counts
    ** them (relayout_task counts down); one job not chosen sends the count
    ** below zero for good, and then nothing is given back. */
    for (int i = 0; i < list->n; i++) atomic_init(&list->job[i].left, 0);
    for (int i = 0; i < list->n; i++) {
        int root = i;
        while (list->job[root].next >= 0) root = list->job[root].next;
        RadRelayoutJob *r = &list->job[root];
        list->job[i].owner = r->releases ? root : -1;
        if (r->releases) atomic_fetch_add(&r->left, list->job[i].chosen ? 1 : -list->n - 1);
    }
    for (int i = 0; i < list->n; i++)
        if (list->job[i].owner >= 0 && atomic_load(&list->job[list->job[i].owner].left) <= 0) list->job[i].owner = -1;
    if (!rc && list->n) rad_pool_parallel_for(pool, list->n, relayout_task, list);
    for (int i = 0; i < list->n && !rc; i++)
        if (list->job[i].chosen && list->job[i].rc)
            rc = rad_error_set(list->job[i].rc, "kernel %s could not relayout weight '%s' (%s)", list->job[i].row->name,
                               list->job[i].w->name, rad_strerror(list->job[i].rc));
    return rc;
}
