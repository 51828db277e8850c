/*
** experts.c: routed experts read from the file as routing picks them, into
** a cache of slots (RadEngineOptions.stream_experts; docs/RESIDENCY.md,
** "Streaming the experts").
**
** A .rad stores expert e of a MoE layer as one 4 KiB-aligned run, its
** movement group (docs/FORMAT.md, "Experts"): the gate, up and down slices
** (and gpt-oss's biases) one after another.  When the experts are streamed
** their mapped pages are never touched; instead, just before an op reads a
** stack (moe_gemm), the experts its rows chose (the op's ids operand, which
** the router wrote earlier in the same step) are made resident: a hit costs
** nothing; the misses get a free slot each, else the least recently used
** one (the most recently used in a sweep: see place), and are read
** together, one request per run, all in flight at once (expert_io.c).  The op then sees the stack through RadTensor.slices, each
** chosen slice pointing into its slot, in the stored layout (no copy).
**
** Results do not depend on it: a kernel gives the same bits from a slice
** wherever it lives (tests/ops/test_cpu_moe.c), and test_engines.c pins a
** streamed model against the same model held in memory, bit for bit, at
** every queue depth.
**
** The cache holds at least one layer's worth of experts, so that every op
** (a prefill may route to every expert of its layer) finds all it needs at
** once; nothing is evicted while an op runs.  Overlap with compute and
** prefetch come next (issue 15).
*/
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../formats/file_access.h"

typedef struct ExpertRun {
    uint64_t offset, bytes;     /* in the file: the group's run, [offset, offset + bytes) */
    uint64_t pieces, piece_bytes; /* its slices: how many, their bytes summed */
    int slot;                   /* where it is resident, or -1 */
    uint64_t wanted;            /* the op counter of the last op that chose it */
    size_t read_bytes;          /* what its read asks for (the run rounded up for O_DIRECT) */
    int pending;                /* a read into its slot is in flight */
    int ahead;                  /* read ahead of need and not used since: kept from eviction */
} ExpertRun;

typedef struct ExpertSlot {
    int32_t run;                /* index into runs, or -1 when free */
    uint64_t used;              /* the op counter when last needed (LRU) */
    uint64_t pinned;            /* the op counter of the op that needs it now */
    unsigned char *data;
} ExpertSlot;

struct RadExperts {
    int fd, direct, depth;
    size_t align;
    const char *path;
    const unsigned char *map;   /* the container's map: slice_data - map is a file offset */
    int32_t group_lo, n_runs;   /* run i is movement group group_lo + i */
    ExpertRun *runs;
    int n_slots;
    uint64_t slot_bytes, clock;
    ExpertSlot *slots;
    unsigned char **slot_data;  /* the slots' buffers, as registered for reads */
    RadExpertIo *io;
    int io_rc;                  /* the first failed read the op being bound needs */
    int prefetch;               /* a sweep reads the next layer's experts while it computes */
    FILE *trace;                /* opt.expert_trace, or NULL */
    int32_t *missed;            /* per op: the runs to read, [n_slots] */
    int32_t *chosen;            /* per op: every run it chose, [n_slots] */
    const void **slices;        /* per op: [n_weights_streamed][max_slices] pointers */
    int64_t max_slices;
    int max_per_op;             /* stacks one op may read: w and bias */
    int64_t loads, hits, wait_ns, prefetches;
    uint64_t bytes_read;
};

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int streamable(const RadWeightEntry *w)
{
    return w->present && !w->source && w->d.access == RAD_ACCESS_CONDITIONAL && w->d.n_slices > 0;
}

void rad_experts_free(RadExperts *x)
{
    if (!x) return;
    rad_expert_io_free(x->io);
    if (x->fd >= 0) close(x->fd);
    for (int i = 0; i < x->n_slots; i++) free(x->slots[i].data);
    free(x->slots);
    free(x->slot_data);
    free(x->missed);
    free(x->chosen);
    free(x->runs);
    free(x->slices);
    free(x);
}

/* The runs of every expert group, from the slices' places in the file. */
static int find_runs(RadExperts *x, const RadBuilder *b, const char *path)
{
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    for (int i = 0; i < b->n_weights; i++) {
        const RadWeightEntry *w = &b->weights[i];
        if (!streamable(w)) continue;
        if (!w->slice_data)
            return rad_error_set(RAD_E_UNSUPPORTED,
                                 "%s: streaming experts needs each expert stored apart, as `radiance convert` "
                                 "writes a .rad; '%s' is one stacked tensor (a GGUF file): make a .rad with "
                                 "`radiance convert FILE.gguf -o OUT.rad`, or run without --stream-experts",
                                 path, w->name);
        if (w->d.group < lo) lo = w->d.group;
        if (w->d.group + (int32_t)w->d.n_slices - 1 > hi) hi = w->d.group + (int32_t)w->d.n_slices - 1;
        if (w->d.n_slices > x->max_slices) x->max_slices = w->d.n_slices;
    }
    if (hi < lo) return 0;
    x->group_lo = lo;
    x->n_runs = hi - lo + 1;
    x->runs = calloc((size_t)x->n_runs, sizeof *x->runs);
    if (!x->runs) return RAD_E_NOMEM;
    for (int r = 0; r < x->n_runs; r++) x->runs[r] = (ExpertRun){.offset = UINT64_MAX, .bytes = 0, .slot = -1};
    for (int i = 0; i < b->n_weights; i++) {
        const RadWeightEntry *w = &b->weights[i];
        if (!streamable(w)) continue;
        int64_t rows = 1;
        for (int d = 1; d + 1 < w->d.rank; d++) rows *= w->d.shape[d];
        const uint64_t one = (uint64_t)(rows * w->row_bytes);
        for (int64_t e = 0; e < w->d.n_slices; e++) {
            ExpertRun *run = &x->runs[w->d.group + e - lo];
            uint64_t at = (uint64_t)((const unsigned char *)w->slice_data[e] - x->map);
            uint64_t end = run->offset == UINT64_MAX ? at + one : run->offset + run->bytes;
            if (at + one > end) end = at + one;
            if (at < run->offset) run->offset = at;
            run->bytes = end - run->offset;
            run->pieces++;
            run->piece_bytes += one;
        }
    }
    for (int r = 0; r < x->n_runs; r++) {
        ExpertRun *run = &x->runs[r];
        if (run->offset == UINT64_MAX) continue;      /* a group number no stack uses */
        if (run->offset % 4096)
            return rad_error_set(RAD_E_FORMAT, "%s: expert group %d starts at byte %llu, not on a 4 KiB boundary: "
                                 "the file is damaged; convert it again", path, lo + r,
                                 (unsigned long long)run->offset);
        /* One run holds its slices and the 64-byte gaps between them, no
        ** more: a file that scatters an expert would make every slot huge. */
        if (run->bytes > run->piece_bytes + 64 * run->pieces)
            return rad_error_set(RAD_E_FORMAT, "%s: expert group %d is spread over %llu bytes for %llu bytes of "
                                 "slices, not stored as one run: the file is damaged; convert it again", path,
                                 lo + r, (unsigned long long)run->bytes, (unsigned long long)run->piece_bytes);
        uint64_t need = round_up(run->bytes, 4096);
        if (need > x->slot_bytes) x->slot_bytes = need;
    }
    return 0;
}

int rad_experts_open(RadEngine *e, RadExperts **out)
{
    *out = NULL;
    RadBuilder *b = &e->b;
    int n = 0;
    for (int i = 0; i < b->n_weights; i++) n += streamable(&b->weights[i]);
    if (!n) return 0;               /* a dense model: nothing to stream */
    RadExperts *x = calloc(1, sizeof *x);
    if (!x) return RAD_E_NOMEM;
    x->fd = -1;
    x->path = e->opt.model_path;
    x->map = e->container->map;
    x->max_per_op = 2;
    int rc = find_runs(x, b, x->path);
    if (rc) { rad_experts_free(x); return rc; }
    for (int i = 0; i < b->n_weights; i++)
        if (streamable(&b->weights[i])) b->weights[i].streamed = 1;
    *out = x;
    return 0;
}

int64_t rad_experts_slot_bytes(const RadExperts *x) { return (int64_t)x->slot_bytes; }
int rad_experts_min_slots(const RadExperts *x) { return (int)(x->max_slices < x->n_runs ? x->max_slices : x->n_runs); }
int rad_experts_count(const RadExperts *x) { return x->n_runs; }
int64_t rad_experts_slots(const RadExperts *x) { return x->n_slots; }

/* A read has finished: the run is resident, or (failed) not, and the op
** being bound fails with it when it chose the run. */
static void landed(void *arg, uint64_t tag, int rc)
{
    RadExperts *x = arg;
    ExpertRun *run = &x->runs[(int32_t)tag];
    run->pending = 0;
    if (rc) {
        if (run->slot >= 0) x->slots[run->slot].run = -1;
        run->slot = -1;
        if (run->wanted == x->clock && !x->io_rc) x->io_rc = rc;
        return;
    }
    x->loads++;
    x->bytes_read += run->read_bytes;
}

int rad_experts_start(RadExperts *x, RadEngine *e, int64_t n_slots)
{
    /* At least a layer's experts (an op may need every one); never more
    ** slots than there are experts. */
    if (n_slots < rad_experts_min_slots(x)) n_slots = rad_experts_min_slots(x);
    if (n_slots > x->n_runs) n_slots = x->n_runs;
    x->n_slots = (int)n_slots;
    x->slots = calloc((size_t)x->n_slots, sizeof *x->slots);
    x->slot_data = calloc((size_t)x->n_slots, sizeof *x->slot_data);
    x->missed = calloc((size_t)x->n_slots, sizeof *x->missed);
    x->chosen = calloc((size_t)x->n_slots, sizeof *x->chosen);
    x->slices = calloc((size_t)(x->max_per_op * x->max_slices), sizeof *x->slices);
    if (!x->slots || !x->slot_data || !x->missed || !x->chosen || !x->slices) return RAD_E_NOMEM;
    for (int s = 0; s < x->n_slots; s++) {
        x->slots[s].run = -1;
        x->slots[s].data = x->slot_data[s] = aligned_alloc(4096, x->slot_bytes);
        if (!x->slots[s].data)
            return rad_error_set(RAD_E_NOMEM, "%s: cannot allocate %d expert slots of %llu bytes", x->path,
                                 x->n_slots, (unsigned long long)x->slot_bytes);
    }
    x->fd = rad_file_open_direct(x->path, &x->direct, &x->align);
    if (x->fd < 0) {
        int rc = x->fd;
        x->fd = -1;
        return rc;
    }
    x->depth = e->opt.expert_io_depth > 0 ? e->opt.expert_io_depth
             : e->opt.expert_io_depth < 0 ? 0 : RAD_EXPERT_IO_DEPTH;
    if (x->depth > x->n_slots) x->depth = x->n_slots;  /* never more in flight than one op can miss */
    x->prefetch = e->opt.expert_prefetch >= 0;
    x->trace = e->opt.expert_trace;
    if (x->trace)
        fprintf(x->trace, "{\"experts\": %d, \"slots\": %d, \"slot_bytes\": %llu, \"least\": %d}\n", x->n_runs,
                x->n_slots, (unsigned long long)x->slot_bytes, rad_experts_min_slots(x));
    return rad_expert_io_open(x->fd, x->path, x->depth, x->slot_data, x->n_slots, x->slot_bytes, landed, x,
                              &x->io);
}

void rad_experts_describe(const RadExperts *x, char *out, size_t n)
{
    const double bytes = (double)x->n_slots * (double)x->slot_bytes;
    snprintf(out, n, "a cache of %d of %d experts (%.*f %s), read %s, %s", x->n_slots, x->n_runs,
             bytes >= 1e9 ? 2 : 1, bytes >= 1e9 ? bytes / 1e9 : bytes / 1e6, bytes >= 1e9 ? "GB" : "MB",
             x->direct ? "with O_DIRECT" : "through the page cache", rad_expert_io_kind(x->io));
}

/* Run r chosen by op `tick`: found where it is (pinned for the op), or
** -1 when it must be read. */
static int pin(RadExperts *x, int32_t r, uint64_t tick)
{
    ExpertRun *run = &x->runs[r];
    if (run->wanted == tick) return 1;          /* a second stack or row of the same expert */
    run->wanted = tick;
    if (run->slot < 0) return -1;
    run->ahead = 0;
    x->hits++;
    x->slots[run->slot].used = x->slots[run->slot].pinned = tick;
    return 1;
}

/* Missed run r of op `tick` queued to be read into a free slot, else one
** this op does not hold: the least recently used, or in a sweep the most
** recently used.  A sweep is an op that chose most of its layer's experts
** (a prefill chunk): layer after layer it asks for nearly everything, in
** the same order every step, and least recently used would evict exactly
** the experts the next step needs first, for no hits at all once the
** model's experts exceed the cache; evicting the newest instead keeps the
** earlier layers' experts resident and lets the sweep pass through the
** rest (about the cache's share of hits, the best a cycle allows). */
static int place(RadExperts *x, int32_t r, uint64_t tick, int sweep, int pin_it, RadExpertRead *read)
{
    ExpertRun *run = &x->runs[r];
    int best = -1;
    /* A slot read ahead is kept until an op uses it (else the next guess,
    ** the newest slot, would evict the last); a demand read takes one when
    ** nothing else is left, once its read has landed. */
    for (int keep_ahead = 1; best < 0;) {
        for (int s = 0; s < x->n_slots; s++) {
            const ExpertSlot *slot = &x->slots[s];
            if (slot->pinned == tick) continue;
            if (slot->run >= 0 && (x->runs[slot->run].pending || (keep_ahead && x->runs[slot->run].ahead))) continue;
            if (slot->run < 0) { best = s; break; }
            if (best < 0 || (sweep ? slot->used > x->slots[best].used : slot->used < x->slots[best].used)) best = s;
        }
        if (best >= 0 || !pin_it) break;
        if (keep_ahead) keep_ahead = 0;
        else if (!rad_expert_io_busy(x->io) || rad_expert_io_wait(x->io)) break;
    }
    if (best < 0)
        return rad_error_set(RAD_E_STATE, "%s: expert cache of %d slots is full within one op", x->path, x->n_slots);
    ExpertSlot *slot = &x->slots[best];
    if (slot->run >= 0) {
        x->runs[slot->run].slot = -1;
        x->runs[slot->run].ahead = 0;
    }
    slot->run = r;
    slot->used = tick;
    if (pin_it) slot->pinned = tick;
    run->slot = best;
    /* The run rounded up to the alignment O_DIRECT needs (the padding the
    ** container writes after the run makes it readable). */
    run->read_bytes = (size_t)round_up(run->bytes, x->align > 1 ? x->align : 1);
    *read = (RadExpertRead){.dst = slot->data, .offset = run->offset, .bytes = run->read_bytes, .buffer = best};
    return RAD_OK;
}

/* Start the read of run r (placed): pending until it lands. */
static int start(RadExperts *x, int32_t r, const RadExpertRead *read)
{
    x->runs[r].pending = 1;
    int rc = rad_expert_io_start(x->io, read, (uint64_t)r);
    ExpertRun *run = &x->runs[r];
    if (rc && run->pending) {       /* never started: not resident */
        run->pending = 0;
        x->slots[run->slot].run = -1;
        run->slot = -1;
    }
    return rc;
}

/* While a sweep of layer runs [first, first + n) computes, the next
** layer's experts (a sweep wants nearly all of them next) are read into
** slots no op holds, ahead of need: the drive works while the cores do.
** As many as there are such slots (evicting the newest first, as a sweep
** does); nothing waits for them here. */
static void read_ahead(RadExperts *x, int32_t first, int n, uint64_t tick)
{
    if (x->trace) fprintf(x->trace, ", \"ahead\": [");
    int traced = 0;
    int32_t r = first + n;
    while (r < x->n_runs && x->runs[r].offset == UINT64_MAX) r++;  /* a dense layer between */
    if (r >= x->n_runs) r = 0;                                      /* the next step starts over */
    for (int k = 0; k < n && r < x->n_runs; k++, r++) {
        ExpertRun *run = &x->runs[r];
        if (run->offset == UINT64_MAX || run->slot >= 0) continue;
        RadExpertRead read;
        if (place(x, r, tick, 1, 0, &read) || start(x, r, &read)) {
            rad_error_clear();      /* no slot free, or the ring refused: read on demand instead */
            return;
        }
        run->ahead = run->slot >= 0;
        x->prefetches++;
        if (x->trace) fprintf(x->trace, "%s%d", traced++ ? "," : "", (int)r);
    }
    if (x->trace) fprintf(x->trace, "]");
}

/* The op's line of the trace, up to its reads ahead (read_ahead adds them). */
static void trace_op(const RadExperts *x, uint64_t tick, int32_t first, int layer, int64_t rows, int sweep,
                     int n_chosen, int n_missed, int64_t wait_ns)
{
    fprintf(x->trace, "{\"op\": %llu, \"layer\": %d, \"experts\": %d, \"rows\": %lld, \"sweep\": %d, \"chosen\": [",
            (unsigned long long)tick, (int)first, layer, (long long)rows, sweep);
    for (int i = 0; i < n_chosen; i++) fprintf(x->trace, "%s%d", i ? "," : "", (int)x->chosen[i]);
    fprintf(x->trace, "], \"missed\": [");
    for (int i = 0; i < n_missed; i++) fprintf(x->trace, "%s%d", i ? "," : "", (int)x->missed[i]);
    fprintf(x->trace, "], \"wait_ns\": %lld", (long long)wait_ns);
}

int rad_experts_bind(RadExperts *x, const RadBuilder *b, const RadOperand *operands, int n, int64_t rows,
                     RadKernelArgs *a)
{
    /* The op's chosen experts: the first `rows` rows of its INDEX operand,
    ** [rows, k] int32 (the buffer may be declared taller). */
    const RadTensor *ids = NULL;
    int streamed[4], n_streamed = 0;
    for (int i = 0; i < n; i++) {
        if (a->schema->operands[i].role == RAD_ROLE_INDEX) ids = &a->operand[i];
        if (operands[i].kind == RAD_OPND_WEIGHT && operands[i].id >= 0 && operands[i].id < b->n_weights &&
            b->weights[operands[i].id].streamed && n_streamed < x->max_per_op)
            streamed[n_streamed++] = i;
    }
    if (!n_streamed) return RAD_OK;
    if (!ids || !ids->data) return rad_error_set(RAD_E_STATE, "%s: a streamed stack read without its expert ids", x->path);
    const uint64_t tick = ++x->clock;
    const int32_t *id = ids->data;
    if (rows > ids->shape[0]) return rad_error_set(RAD_E_SHAPE, "%s: %lld rows of expert ids, %lld held", x->path,
                                                   (long long)rows, (long long)ids->shape[0]);
    const int64_t count = rows * (ids->rank > 1 ? ids->shape[1] : 1);
    /* First every chosen run: the resident ones pinned, the others listed,
    ** so that no hit is evicted by a miss and all the misses go out
    ** together. */
    int n_missed = 0, n_chosen = 0, layer = 0;
    int32_t first = 0;
    for (int s = 0; s < n_streamed; s++) {
        const RadWeightEntry *w = &b->weights[operands[streamed[s]].id];
        if (w->d.n_slices > layer) layer = (int)w->d.n_slices;
        first = w->d.group - x->group_lo;
        for (int64_t j = 0; j < count; j++) {
            int32_t e = id[j];
            if (e < 0 || e >= w->d.n_slices)
                return rad_error_set(RAD_E_RANGE, "%s: expert id %d outside 0..%lld of '%s'", x->path, e,
                                     (long long)w->d.n_slices - 1, w->name);
            const int32_t r = w->d.group + e - x->group_lo;
            if (x->runs[r].wanted == tick) continue;
            x->chosen[n_chosen++] = r;
            if (pin(x, r, tick) < 0) x->missed[n_missed++] = r;
        }
    }
    const int sweep = 2 * n_chosen > layer;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    x->io_rc = 0;
    int rc = RAD_OK;
    for (int i = 0; i < n_missed && !rc; i++) {
        RadExpertRead read;
        rc = place(x, x->missed[i], tick, sweep, 1, &read);
        if (!rc) rc = start(x, x->missed[i], &read);
    }
    /* Every chosen run landed: the misses just started, and hits whose
    ** read ahead is still in flight. */
    for (int i = 0; i < n_chosen && !rc; i++)
        while (!rc && x->runs[x->chosen[i]].pending) rc = rad_expert_io_wait(x->io);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const int64_t waited = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
    x->wait_ns += waited;
    if (x->trace) trace_op(x, tick, first, layer, rows, sweep, n_chosen, n_missed, waited);
    if (!rc && x->io_rc) rc = x->io_rc;     /* the message is the failed read's */
    for (int i = 0; i < n_chosen && !rc; i++)
        if (x->runs[x->chosen[i]].slot < 0)
            rc = rad_error_set(RAD_E_IO, "%s: an expert's read failed", x->path);
    if (rc) {
        for (int i = 0; i < n_chosen; i++) x->runs[x->chosen[i]].wanted = 0;
        if (x->trace) fprintf(x->trace, ", \"failed\": true}\n");
        return rc;
    }
    /* Reading ahead needs room for two layers: with less it evicts what
    ** this step still wants. */
    if (sweep && x->prefetch && rad_expert_io_depth(x->io) > 0 && x->n_slots >= 2 * layer)
        read_ahead(x, first, layer, tick);
    if (x->trace) fprintf(x->trace, "}\n");
    for (int s = 0; s < n_streamed; s++) {
        const int i = streamed[s];
        const RadWeightEntry *w = &b->weights[operands[i].id];
        const void **slices = x->slices + (size_t)s * (size_t)x->max_slices;
        memset(slices, 0, (size_t)w->d.n_slices * sizeof *slices);
        for (int64_t j = 0; j < count; j++) {
            const int32_t e = id[j];
            if (slices[e]) continue;
            const ExpertRun *run = &x->runs[w->d.group + e - x->group_lo];
            uint64_t at = (uint64_t)((const unsigned char *)w->slice_data[e] - x->map) - run->offset;
            slices[e] = x->slots[run->slot].data + at;
        }
        RadTensor *t = &a->operand[i];
        t->data = NULL;
        t->slices = slices;
        t->slice_layout = NULL;         /* every slice in the stored layout */
        t->layout = RAD_LAYOUT_STORED;
    }
    return RAD_OK;
}

void rad_experts_stats(const RadExperts *x, RadEngineStats *s)
{
    if (!x) return;
    s->expert_loads = x->loads;
    s->expert_hits = x->hits;
    s->expert_bytes_read = (int64_t)x->bytes_read;
    s->expert_slots = x->n_slots;
    s->expert_io_depth = rad_expert_io_depth(x->io);
    s->expert_wait_ns = x->wait_ns;
    s->expert_prefetches = x->prefetches;
}

void rad_experts_print(const RadExperts *x, FILE *f)
{
    if (!x) return;
    fprintf(f, "  streamed experts: %d runs of at most %llu bytes, a cache of %d slots (%.2f MB), read %s, %s\n",
            x->n_runs, (unsigned long long)x->slot_bytes, x->n_slots, (double)x->n_slots * x->slot_bytes / 1e6,
            x->direct ? "with O_DIRECT" : "through the page cache (the file system refuses O_DIRECT)",
            rad_expert_io_kind(x->io));
}
