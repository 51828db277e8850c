/*
** trunk.c: when the routed experts stream, the rest of the model (the
** trunk: embeddings, attention, norms, routers, shared experts, the head)
** is read once into anonymous memory, and its weights point there.
**
** Why not leave it mapped: a model that does not fit is exactly the case
** where the page cache is under pressure.  Mapped pages of the trunk would
** be evicted along with everything else and faulted back a page at a time
** (BigMoeOnEdge measured faults at three times the cost of reading), and a
** cgroup counts the page cache against its limit all the same.  Read into
** private memory with O_DIRECT, the trunk costs its size once and never
** again, and the only reads left while the model runs are the experts'.
** It also means a model file shortened or damaged under a running model
** can only fail an expert's read, which says so, instead of killing the
** process with SIGBUS on a mapped page.
**
** The memory is one anonymous mapping the size of the file, so a weight's
** new address is the anonymous base plus its offset in the file; only the
** trunk's pages are ever written, so the experts' stretches of it cost
** nothing.  Files other than a .rad never get here: their experts do not
** stream (residency.c).
**
** A weight whose kernel copies replace it keeps its bytes here all the
** same (residency.c plans no release): a copy made in the background is
** switched to while a step may still be reading the stored bytes, which is
** harmless for a file's pages (dropped, they are read again) but would be
** zeros for private memory given back.
*/
#include "engine_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../formats/file_access.h"
#include "../formats/rad_container.h"

typedef struct Range { uint64_t lo, hi; } Range;

static int by_address(const void *a, const void *b)
{
    const uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static int by_start(const void *a, const void *b)
{
    const Range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int held(const RadWeightEntry *w) { return w->present && !w->streamed; }

/* Does any of the n sorted addresses fall in [lo, hi)? */
static int holds_one(const uintptr_t *at, size_t n, uintptr_t lo, uintptr_t hi)
{
    size_t a = 0, b = n;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (at[m] < lo) a = m + 1;
        else b = m;
    }
    return a < n && at[a] < hi;
}

void rad_trunk_free(RadEngine *e)
{
    if (e->trunk) munmap(e->trunk, e->trunk_bytes);
    e->trunk = NULL;
}

int rad_trunk_read(RadEngine *e)
{
    RadBuilder *b = &e->b;
    const RadContainer *c = e->container;
    const unsigned char *map = c->map;
    /* Every address a held weight reads (a stack stored as slices reads
    ** each of them). */
    size_t n_at = 0, cap = 0;
    for (int i = 0; i < b->n_weights; i++)
        if (held(&b->weights[i])) cap += b->weights[i].slice_data ? (size_t)b->weights[i].d.n_slices : 1;
    uintptr_t *at = malloc((cap ? cap : 1) * sizeof *at);
    Range *ranges = malloc(((size_t)c->n_tensors + 1) * sizeof *ranges);
    if (!at || !ranges) {
        free(at);
        free(ranges);
        return RAD_E_NOMEM;
    }
    for (int i = 0; i < b->n_weights; i++) {
        const RadWeightEntry *w = &b->weights[i];
        if (!held(w)) continue;
        if (w->slice_data)
            for (int64_t s = 0; s < w->d.n_slices; s++) at[n_at++] = (uintptr_t)w->slice_data[s];
        else if (w->data)
            at[n_at++] = (uintptr_t)w->data;
    }
    qsort(at, n_at, sizeof *at, by_address);
    /* The file's stretches that hold them, a tensor at a time, in pages. */
    const uint64_t page = 4096;
    int n_ranges = 0;
    for (int t = 0; t < c->n_tensors; t++) {
        const RadContainerTensor *ct = &c->tensors[t];
        const uintptr_t lo = (uintptr_t)ct->data;
        if (!ct->size || !holds_one(at, n_at, lo, lo + ct->size)) continue;
        const uint64_t off = (uint64_t)((const unsigned char *)ct->data - map);
        ranges[n_ranges++] = (Range){off / page * page, (off + ct->size + page - 1) / page * page};
    }
    free(at);
    qsort(ranges, (size_t)n_ranges, sizeof *ranges, by_start);
    int merged = 0;
    for (int r = 0; r < n_ranges; r++) {
        if (merged && ranges[r].lo <= ranges[merged - 1].hi) {
            if (ranges[r].hi > ranges[merged - 1].hi) ranges[merged - 1].hi = ranges[r].hi;
        } else {
            ranges[merged++] = ranges[r];
        }
    }
    e->trunk_bytes = (size_t)c->file_size;
    void *mem = mmap(NULL, e->trunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        free(ranges);
        return rad_error_set(RAD_E_NOMEM, "%s: cannot reserve memory for the model's dense part", e->opt.model_path);
    }
    e->trunk = mem;
    int direct = 0;
    size_t align = 1;
    int fd = rad_file_open_direct(e->opt.model_path, &direct, &align);
    int rc = fd < 0 ? fd : RAD_OK;
    for (int r = 0; r < merged && !rc; r++) {
        /* The data region is padded to whole pages (docs/FORMAT.md), so a
        ** stretch rounded out to pages stays inside the file. */
        const uint64_t hi = ranges[r].hi < c->file_size ? ranges[r].hi : c->file_size;
        rc = rad_file_pread(fd, (unsigned char *)mem + ranges[r].lo, ranges[r].lo, (size_t)(hi - ranges[r].lo),
                            e->opt.model_path);
        e->trunk_read += hi - ranges[r].lo;
    }
    if (fd >= 0) {
        if (!direct) (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);     /* read once: not kept twice */
        close(fd);
    }
    free(ranges);
    if (rc) return rc;
    const unsigned char *base = mem;
    for (int i = 0; i < b->n_weights; i++) {
        RadWeightEntry *w = &b->weights[i];
        if (!held(w)) continue;
        if (w->slice_data)
            for (int64_t s = 0; s < w->d.n_slices; s++)
                w->slice_data[s] = base + ((const unsigned char *)w->slice_data[s] - map);
        else if (w->data)
            w->data = base + ((const unsigned char *)w->data - map);
    }
    return RAD_OK;
}
