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
**
** When.  A row that gives the same bits from the stored weight as from its
** copy (RadKernelRow.relayout_same_bits) runs on the stored bytes until the
** copy is written, and its copies are written after the model opens, by a
** thread of their own (RadEngineOptions.copies): a copy is mostly fresh
** pages, and on the machines this runs on those cost more than the copying,
** so opening waits only for copies whose rows need them.  A copy marked
** ready is whole; issue.c hands it out only then.  A large copy whose row
** is row-local (relayout_rows) is cut into pieces that the pool's threads
** write at once.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

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
    ** shape[0] equal runs of rows, contiguous where the container stores
    ** the stack whole (a GGUF), each in its own record where it stores
    ** them apart (a .rad: one expert's gate, up and down together). */
    if (w->d.n_slices > 0) {
        int64_t rows = 1;
        for (int d = 1; d + 1 < w->d.rank; d++) rows *= w->d.shape[d];
        t->n_slices = w->d.n_slices;
        t->slice_bytes = rows * w->row_bytes;
        t->slices = w->slice_data;
    }
}

/* Give the mapped pages of w's stored bytes back (its copies replace them). */
static void drop_stored(const RadWeightEntry *w, uint64_t bytes)
{
    if (!w->slice_data) {
        rad_file_drop(w->data, bytes);
        return;
    }
    const uint64_t one = bytes / (uint64_t)w->d.n_slices;
    for (int64_t e = 0; e < w->d.n_slices; e++) rad_file_drop(w->slice_data[e], one);
}

/* The copy of w that `row` made at load, or NULL. */
const RadRelayoutCopy *rad_relayout_copy(const RadWeightEntry *w, const RadKernelRow *row)
{
    if (!row->relayout) return NULL;
    for (int c = 0; c < w->n_copies; c++)
        if (w->copies[c].relayout == row->relayout)
            return atomic_load_explicit(&w->copies[c].ready, memory_order_acquire) ? &w->copies[c] : NULL;
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

/* A copy larger than this is written by several tasks at once, when its
** row allows (RadKernelRow.relayout_rows): a model's largest weight (the
** vocabulary's head, often half the file) would otherwise keep one thread
** copying while the others wait, and a load is mostly that wait. */
#define PIECE_BYTES ((size_t)4 << 20)

/* One piece of one copy.  The piece that finishes a copy counts it off its
** weight; the weight's last copy to finish gives its mapped pages back,
** while the other copies are still being written, so the peak of a load is
** the plan's figure plus the weights in flight, not the file plus every copy. */
static void relayout_task(void *ctx, int i)
{
    RadRelayoutList *list = ctx;
    const RadRelayoutPiece *p = &list->piece[i];
    RadRelayoutJob *j = &list->job[p->job];
    int rc;
    if (p->rows) {
        RadTensor part = j->stored;
        part.data = (unsigned char *)part.data + p->row0 * part.row_bytes;
        part.shape[0] = p->rows;
        rc = j->row->relayout(&part, (unsigned char *)j->dst + p->offset);
    } else {
        rc = j->row->relayout(&j->stored, j->dst);
    }
    if (rc) {
        int none = 0;
        atomic_compare_exchange_strong(&j->piece_rc, &none, rc);
    }
    if (atomic_fetch_sub(&j->pieces_left, 1) != 1) return;
    j->rc = atomic_load(&j->piece_rc);
    if (!j->rc) atomic_store_explicit(&j->w->copies[j->copy].ready, 1, memory_order_release);
    if (j->rc || j->owner < 0) return;
    RadRelayoutJob *owner = &list->job[j->owner];
    if (atomic_fetch_sub(&owner->left, 1) == 1) drop_stored(owner->w, (uint64_t)owner->stored_bytes);
}

/* The pieces of job j, appended to list->piece (sized for the worst case). */
static void add_pieces(RadRelayoutList *list, int job)
{
    RadRelayoutJob *j = &list->job[job];
    const int64_t unit = j->row->relayout_rows, N = j->stored.shape[0];
    int64_t rows = 0;
    if (unit > 0 && j->stored.rank == 2 && !j->stored.n_slices && N % unit == 0 && j->bytes > PIECE_BYTES) {
        int64_t units_per_piece = (int64_t)(PIECE_BYTES / (j->bytes / (size_t)(N / unit)));
        rows = (units_per_piece > 0 ? units_per_piece : 1) * unit;
    }
    if (!rows || rows >= N) {
        list->piece[list->n_pieces++] = (RadRelayoutPiece){.job = job};
        atomic_init(&j->pieces_left, 1);
        return;
    }
    int count = 0;
    for (int64_t row0 = 0; row0 < N; row0 += rows, count++) {
        RadTensor head = j->stored;
        head.shape[0] = row0;
        size_t offset = row0 ? j->row->relayout_bytes(&head) : 0;
        list->piece[list->n_pieces++] =
            (RadRelayoutPiece){.job = job, .row0 = row0, .rows = row0 + rows <= N ? rows : N - row0, .offset = offset};
    }
    atomic_init(&j->pieces_left, count);
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
                if (b->weights[id].streamed) continue;  /* read into slots as stored (experts.c) */
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
                /* every row of the tensor: a stack's slices too (rank 3) */
                int64_t rows = 1;
                for (int d = 0; d + 1 < t.rank; d++) rows *= t.shape[d];
                int64_t stored = t.row_bytes * rows;
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

#ifndef LATER_NICE
#define LATER_NICE 10
#endif
static void *later_thread(void *arg);

void rad_relayout_later_finish(RadRelayoutLater *later, int stop)
{
    if (!later || later->joined) return;
    if (stop) atomic_store(&later->stop, 1);
    if (later->started) pthread_join(later->thread, NULL);
    else if (!stop) later_thread(later);
    later->joined = 1;
}

void rad_relayout_later_free(RadRelayoutLater *later)
{
    if (!later) return;
    rad_relayout_later_finish(later, 1);
    rad_relayout_list_free(&later->list);
    free(later);
}

void rad_relayout_list_free(RadRelayoutList *list)
{
    free(list->job);
    free(list->piece);
    memset(list, 0, sizeof *list);
}

/* Whether job i may be made after the model opens: its row gives the same
** bits from the stored weight, so nothing a step computes depends on when
** the copy lands, and until then the row runs on the stored bytes.  Every
** such copy is: a fresh page costs more than the copying on a virtual
** machine (first touches are faults the host serves), and a model's first
** prompt needs its weights once, stored or not (docs/RESIDENCY.md).  A
** weight whose copies give its pages back does so when the last one lands,
** which is safe while a step still reads it: the mapping is of the file,
** read-only, and refaults. */
static int may_wait(const RadRelayoutList *list, int i)
{
    return list->job[i].row->relayout_same_bits;
}

static void *later_thread(void *arg)
{
    RadRelayoutLater *later = arg;
    if (later->started) (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), LATER_NICE);
    for (int i = later->first; i < later->list.n_pieces && !atomic_load(&later->stop); i++)
        relayout_task(&later->list, i);
    return NULL;
}

int rad_relayout_make(RadBuilder *b, RadPool *pool, RadRelayoutList *list, int mode, RadRelayoutLater **later)
{
    (void)b;
    *later = NULL;
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
        j->copy = j->w->n_copies++;
        j->w->copies[j->copy] = (RadRelayoutCopy){.relayout = j->row->relayout, .data = j->dst, .bytes = j->bytes};
        atomic_init(&j->w->copies[j->copy].ready, 0);
        j->later = mode != RAD_COPIES_AT_OPEN && may_wait(list, i);
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
    /* The pieces: at most one per PIECE_BYTES of a copy, plus one per copy. */
    size_t most = 0;
    for (int i = 0; i < list->n && !rc; i++)
        if (list->job[i].chosen) most += list->job[i].bytes / PIECE_BYTES + 2;
    if (!rc && most) {
        list->piece = malloc(most * sizeof *list->piece);
        if (!list->piece) rc = rad_error_set(RAD_E_NOMEM, "out of memory listing the weight copies");
    }
    /* the copies made now first, then the later ones */
    for (int i = 0; i < list->n && !rc; i++) {
        atomic_init(&list->job[i].piece_rc, 0);
        if (list->job[i].chosen && !list->job[i].later) add_pieces(list, i);
    }
    int now = list->n_pieces;
    for (int i = 0; i < list->n && !rc; i++)
        if (list->job[i].chosen && list->job[i].later) add_pieces(list, i);
    if (!rc && now) rad_pool_parallel_for(pool, now, relayout_task, list);
    if (!rc && list->n_pieces > now) {
        RadRelayoutLater *l = calloc(1, sizeof *l);
        if (!l) return rad_error_set(RAD_E_NOMEM, "out of memory for the weight copies made after open");
        l->list = *list;                    /* the jobs and pieces move to the thread */
        memset(list, 0, sizeof *list);
        l->first = now;
        atomic_init(&l->stop, 0);
        *later = l;
        if (mode == RAD_COPIES_BACKGROUND) {
            if (pthread_create(&l->thread, NULL, later_thread, l) == 0) l->started = 1;
            else later_thread(l);           /* no thread to be had: make them now */
        }
        return RAD_OK;
    }
    for (int i = 0; i < list->n && !rc; i++)
        if (list->job[i].chosen && list->job[i].rc)
            rc = rad_error_set(list->job[i].rc, "kernel %s could not relayout weight '%s' (%s)", list->job[i].row->name,
                               list->job[i].w->name, rad_strerror(list->job[i].rc));
    return rc;
}
