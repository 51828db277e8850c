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

/* The stored bytes of weight w as an operand. */
void rad_weight_tensor(const RadWeightEntry *w, RadTensor *t)
{
    memset(t, 0, sizeof *t);
    t->data = (void *)w->data;
    t->enc = w->enc;
    t->rank = w->d.rank;
    memcpy(t->shape, w->d.shape, sizeof t->shape);
    t->row_bytes = w->row_bytes;
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

/* One copy to write: the pool writes them in parallel (a 7B model's 3 GB
** took a second on one thread). */
typedef struct RelayoutJob {
    const RadKernelRow *row;
    RadWeightEntry *w;
    RadTensor stored;
    size_t bytes;
    void *dst;
    int rc;
} RelayoutJob;

typedef struct RelayoutJobs {
    RelayoutJob *job;
    int n, cap;
} RelayoutJobs;

static void relayout_task(void *ctx, int i)
{
    RelayoutJob *j = &((RelayoutJobs *)ctx)->job[i];
    j->rc = j->row->relayout(&j->stored, j->dst);
}

/* Bytes of memory the system can still give (MemAvailable: free memory
** plus what it can reclaim), or -1 when unknown.  RADIANCE_MEM_AVAILABLE
** (bytes) stands in for it, so the policy below can be tried on any machine. */
static int64_t memory_available(void)
{
    const char *forced = getenv("RADIANCE_MEM_AVAILABLE");
    if (forced && *forced) {
        char *end;
        long long v = strtoll(forced, &end, 10);
        if (*end == 0 && v >= 0) return v;  /* anything else is not a byte count: the system's figure */
    }
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb >= 0 ? (int64_t)kb * 1024 : -1;
}

/* Give every selected row that relayouts weights its copies (rad_kernel.h):
** one per (weight, relayout function), however many bands or ops share it.
**
** First the copies are listed and sized.  They are made only when what the
** model then keeps resident (the copies, the weights still read where they
** are mapped, the arena, the KV cache, the scratch) fits in 80% of the
** memory available: on a machine too small for that, a copy would push the
** mapped weights out of the page cache or the process into swap, so the
** weights are read as stored instead (slower kernels, no copy), and the
** plan says so.  Then the copies are allocated and the pool writes them in
** parallel. */
int rad_relayout_weights(RadBuilder *b, RadPool *pool, int64_t mapped, int64_t other, int64_t *made,
                         char *skipped, size_t skipped_len)
{
    RelayoutJobs jobs = {0};
    int rc = RAD_OK;
    int64_t copies = 0, replaced = 0;
    for (int i = 0; i < b->n_ops && !rc; i++) {
        const RadOpEntry *op = &b->ops[i];
        for (int k = 0; k < op->n_bands && !rc; k++) {
            const RadKernelRow *row = op->bands[k].row;
            if (!row || !row->relayout_bytes || !row->relayout) continue;
            for (int n = 0; n < op->n_weights; n++) {
                if (op->weights[n] < 0 || op->weights[n] >= b->n_weights) continue;
                RadWeightEntry *w = &b->weights[op->weights[n]];
                int listed = 0, weight_listed = 0;
                for (int j = 0; j < jobs.n; j++) {
                    weight_listed |= jobs.job[j].w == w;
                    listed |= jobs.job[j].w == w && jobs.job[j].row->relayout == row->relayout;
                }
                if (!w->present || listed) continue;
                RadTensor t;
                rad_weight_tensor(w, &t);
                size_t bytes = row->relayout_bytes(&t);
                if (!bytes) continue;
                if (jobs.n == jobs.cap) {
                    int cap = jobs.cap ? 2 * jobs.cap : 64;
                    RelayoutJob *more = realloc(jobs.job, (size_t)cap * sizeof *more);
                    if (!more) { rc = RAD_E_NOMEM; break; }
                    jobs.job = more;
                    jobs.cap = cap;
                }
                jobs.job[jobs.n++] = (RelayoutJob){.row = row, .w = w, .stored = t, .bytes = bytes};
                copies += (int64_t)bytes;
                if (!weight_listed) replaced += t.row_bytes * (t.rank == 2 ? t.shape[0] : 1);
            }
        }
    }
    if (!rc && jobs.n) {
        int64_t need = copies + (mapped - replaced) + other;
        int64_t available = memory_available();
        if (available >= 0 && need > available / 10 * 8) {
            snprintf(skipped, skipped_len,
                     "skipped: %.2f GB of copies would make %.2f GB resident, over 80%% of the %.2f GB available",
                     copies / 1e9, need / 1e9, available / 1e9);
            jobs.n = 0;
        }
    }
    for (int i = 0; i < jobs.n && !rc; i++) {
        RelayoutJob *j = &jobs.job[i];
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
        *made += (int64_t)j->bytes;
    }
    if (!rc && jobs.n) rad_pool_parallel_for(pool, jobs.n, relayout_task, &jobs);
    for (int i = 0; i < jobs.n && !rc; i++)
        if (jobs.job[i].rc)
            rc = rad_error_set(jobs.job[i].rc, "kernel %s could not relayout weight '%s' (%s)", jobs.job[i].row->name,
                               jobs.job[i].w->name, rad_strerror(jobs.job[i].rc));
    free(jobs.job);
    return rc;
}

