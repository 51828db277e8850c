/*
** ops_moe.c: moe_gemm, the expert products of a mixture-of-experts layer
** (docs/OPS.md, moe_gemm): out[m * k + j] = x_row . W[ids[m][j]]^T + bias.
**
** A launch runs in four stages, each over the pool.
**
**  1. Sort.  The step's M * k slots are ordered by expert (a stable radix
**     sort on the ids, so slot order is kept inside an expert); each run of
**     one expert is a *group*.  Decode (M = 1) has k groups of one slot;
**     prefill has up to n_expert groups of many.
**  2. Convert.  Each activation row is converted once into the format its
**     weight's encoding pairs with (cpu_enc[].act_fmt, as cpu_gemm.c does):
**     the rows of x when the slots of a row share it (x_per_slot = 0), then
**     copied into slot order; each slot's own row when x_per_slot = 1,
**     converted straight into its place in slot order.  One row shared by
**     every slot (M = 1, shared input) is not copied at all: its groups
**     read it with stride 0.
**  3. Products.  Tasks are (group, block of weight rows): a group's expert
**     slice is read once per step, its block of rows staying in cache while
**     every slot of the group passes over it a tile at a time.  Decode cuts
**     the k experts' rows into about four tasks per thread so every weight
**     byte is read once, by one thread; prefill caps a block at about
**     32 KiB of weights, as cpu_gemm.c does.  A tile's outputs go to a
**     small buffer and then to their slots' rows, which are not evenly
**     spaced in slot order.
**  4. The bias (f32, added per element after the product, as cpu_gemm.c).
**
** Determinism.  Each output element is one dot or tile call (whose result
** is the canonical order of its encoding: cpu_internal.h), so a slot's
** result is bit for bit cpu gemm_nt of its row against its expert's slice,
** whatever the other slots, the grouping, the thread count or the layout
** of the slice (stored, or the x8 copy of x8.c, which computes the same
** order).  Experts may live apart (RadTensor.slices, streamed experts),
** each in its own layout (slice_layout).
**
** No allocation: the sort, the converted rows and the groups live in
** args->scratch, sized by cpu_moe_gemm_scratch when the model opens.
**
** Routing statistics (rad_cpu_moe_stats, for tests/bench/moe_routing.c):
** when switched on, each launch records its rows, slots, experts and how
** many of them the step touched; off (the default) it costs one load.
*/
#include <stdatomic.h>
#include <string.h>

#include "../ops/rad_op_checks.h"
#include "cpu_internal.h"

#define ROW_ALIGN 64
#define TASKS_PER_THREAD 4
#define WEIGHT_BLOCK_BYTES (32 * 1024)
#define MAX_TILE 64                     /* tile_act * tile_w of any kernel, at most */

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The activation format for weights of `enc`: the stored layout's and the
** x8 copy's are the same for every encoding (cpu_fill_x8_avx2 pairs each
** x8 tile with its stored dot's format), which lets one step mix slices in
** both layouts; the launch refuses a table where they would differ. */
static int act_format(int64_t enc)
{
    return cpu_enc[enc].act_fmt;
}

static size_t act_stride(int fmt, int64_t K) { return round_up(cpu_act_row_bytes(fmt, K), ROW_ALIGN); }

/* Where each part of the scratch starts, for M rows of k slots. */
typedef struct MoeScratch {
    size_t conv, sorted, order, tmp, group, total;
} MoeScratch;

static int scratch_layout(int64_t M, int64_t k, int64_t K, int64_t enc, int per_slot, MoeScratch *s)
{
    if (M <= 0 || k <= 0 || K <= 0 || enc < 0 || enc >= RAD_ENC_COUNT || !cpu_enc[enc].dot) return -1;
    if (M > INT32_MAX / 4 / k || K > INT32_MAX) return -1;
    const int64_t slots = M * k;
    size_t row = act_stride(act_format(enc), K);
    size_t at = 0;
    s->conv = at;
    at += per_slot ? 0 : (size_t)M * row;
    s->sorted = at;
    at += (size_t)slots * row;
    s->order = at;
    at += round_up((size_t)slots * 4, ROW_ALIGN);
    s->tmp = at;
    at += round_up((size_t)slots * 4, ROW_ALIGN);
    s->group = at;                                          /* group starts, then their experts */
    at += round_up((size_t)(2 * slots + 1) * 4, ROW_ALIGN);
    s->total = at + ROW_ALIGN;                              /* room to align the base */
    return 0;
}

size_t cpu_moe_gemm_scratch(const RadKernelArgs *a)
{
    MoeScratch s;
    if (scratch_layout(a->param[RAD_P_M].i, a->param[RAD_MOE_GEMM_K_USED].i, a->param[RAD_MOE_GEMM_K].i,
                       a->param[RAD_MOE_GEMM_ENC].i, a->param[RAD_MOE_GEMM_X_PER_SLOT].i == RAD_MOE_X_PER_SLOT,
                       &s))
        return 0;
    return s.total;
}

/* --------------------------------------------------------------- the job */

typedef struct MoeJob {
    const RadTensor *x, *w, *bias, *out, *ids;
    int64_t M, k, N, K, slots;
    int per_slot;
    int fmt;
    CpuActQuantFn conv;
    char *conv_rows;                    /* x's rows converted (shared input) */
    char *sorted;                       /* one converted row per slot, in slot order */
    size_t stride;                      /* of both */
    int shared_row;                     /* M = 1, shared input: every slot reads conv_rows */
    const int32_t *order;               /* position in slot order -> slot */
    const int32_t *g_start;             /* group g is positions [g_start[g], g_start[g + 1]) */
    const int32_t *g_expert;
    int n_groups;
    int64_t x8_slice_bytes;             /* a slice of the copy, when the whole stack is one */
    int64_t n_block;                    /* weight rows per task */
    int n_cb;                           /* blocks per group */
    int convert_tasks;
    int64_t per_convert_task;
} MoeJob;

static int32_t slot_expert(const MoeJob *j, int32_t slot)
{
    return rad_i32_row(j->ids, slot / j->k)[slot % j->k];
}

/* Stable LSD radix sort of the slots by expert, 8 bits a pass: order[p] is
** the slot at position p.  The passes needed are those of the largest id. */
static void sort_slots(MoeJob *j, int32_t *order, int32_t *tmp, int64_t n_expert)
{
    const int64_t n = j->slots;
    for (int32_t s = 0; s < n; s++) order[s] = s;
    for (int shift = 0; shift < 32 && (n_expert - 1) >> shift; shift += 8) {
        int64_t count[257];
        memset(count, 0, sizeof count);
        for (int64_t p = 0; p < n; p++) count[((slot_expert(j, order[p]) >> shift) & 255) + 1]++;
        for (int d = 0; d < 256; d++) count[d + 1] += count[d];
        for (int64_t p = 0; p < n; p++) tmp[count[(slot_expert(j, order[p]) >> shift) & 255]++] = order[p];
        memcpy(order, tmp, (size_t)n * sizeof *order);
    }
}

/* Groups: the runs of one expert in slot order. */
static void find_groups(MoeJob *j, int32_t *start, int32_t *expert)
{
    int g = 0;
    for (int64_t p = 0; p < j->slots; p++) {
        int32_t e = slot_expert(j, j->order[p]);
        if (p == 0 || e != expert[g - 1]) {
            start[g] = (int32_t)p;
            expert[g++] = e;
        }
    }
    start[g] = (int32_t)j->slots;
    j->n_groups = g;
    j->g_start = start;
    j->g_expert = expert;
}

static const float *x_row(const MoeJob *j, int64_t r)
{
    return (const float *)(const void *)((const char *)j->x->data + r * j->x->row_bytes);
}

/* Stage 2: task t converts its share of the rows (x's rows, or the slots'
** rows in slot order), then (shared input) copies rows into slot order. */
static void convert_task(void *ctx, int t)
{
    const MoeJob *j = ctx;
    int64_t n = j->per_slot ? j->slots : j->M;
    int64_t r0 = (int64_t)t * j->per_convert_task, r1 = r0 + j->per_convert_task;
    if (r1 > n) r1 = n;
    for (int64_t r = r0; r < r1; r++) {
        if (j->per_slot) j->conv(x_row(j, j->order[r]), j->sorted + (size_t)r * j->stride, j->K);
        else j->conv(x_row(j, r), j->conv_rows + (size_t)r * j->stride, j->K);
    }
}

static void gather_task(void *ctx, int t)
{
    const MoeJob *j = ctx;
    int64_t p0 = (int64_t)t * j->per_convert_task, p1 = p0 + j->per_convert_task;
    if (p1 > j->slots) p1 = j->slots;
    size_t bytes = cpu_act_row_bytes(j->fmt, j->K);
    for (int64_t p = p0; p < p1; p++)
        memcpy(j->sorted + (size_t)p * j->stride, j->conv_rows + (size_t)(j->order[p] / j->k) * j->stride, bytes);
}

/* Expert e's slice and whether it is in the x8 layout. */
static const char *slice_of(const MoeJob *j, int32_t e, int *x8)
{
    const RadTensor *w = j->w;
    int layout = w->slices && w->slice_layout ? w->slice_layout[e] : w->layout;
    *x8 = layout == RAD_LAYOUT_KERNEL;
    if (w->slices) return w->slices[e];
    return (const char *)w->data + e * (*x8 ? j->x8_slice_bytes : w->slice_bytes);
}

static float *out_row(const MoeJob *j, int32_t slot)
{
    return (float *)(void *)((char *)j->out->data + (int64_t)slot * j->out->row_bytes);
}

/* Stage 3: weight rows [n0, n1) of group g's expert against every slot of
** the group, a tile at a time; then the bias of those outputs. */
static void product_task(void *ctx, int t)
{
    const MoeJob *j = ctx;
    int g = t / j->n_cb;
    int64_t n0 = (int64_t)(t % j->n_cb) * j->n_block, n1 = n0 + j->n_block;
    if (n1 > j->N) n1 = j->N;
    if (n0 >= n1) return;
    const int32_t e = j->g_expert[g];
    int x8;
    const char *w = slice_of(j, e, &x8);
    const CpuEncKernels *k = x8 ? &cpu_enc_x8[j->w->enc] : &cpu_enc[j->w->enc];
    const size_t w_stride = x8 ? (size_t)cpu_x8_row_bytes(j->w->enc, j->K) : (size_t)j->w->row_bytes;
    const int32_t p0 = j->g_start[g], p1 = j->g_start[g + 1];
    const size_t a_stride = j->shared_row ? 0 : j->stride;
    const char *act = j->shared_row ? j->conv_rows : j->sorted;
    float tile_out[MAX_TILE];

    if (!k->tile || k->tile_act * k->tile_w > MAX_TILE) {
        for (int32_t p = p0; p < p1; p++) {
            float *o = out_row(j, j->order[p]);
            for (int64_t n = n0; n < n1; n++) k->dot(j->K, w + (size_t)n * w_stride, act + (size_t)p * a_stride, o + n);
        }
    } else {
        for (int32_t p = p0; p < p1; p += k->tile_act) {
            int n_act = p1 - p < k->tile_act ? p1 - p : k->tile_act;
            for (int64_t n = n0; n < n1; n += k->tile_w) {
                int n_w = n1 - n < k->tile_w ? (int)(n1 - n) : k->tile_w;
                k->tile(j->K, w + (size_t)n * w_stride, w_stride, n_w, act + (size_t)p * a_stride, a_stride, n_act,
                        tile_out, (size_t)k->tile_w);
                for (int r = 0; r < n_act; r++)
                    memcpy(out_row(j, j->order[p + r]) + n, tile_out + r * k->tile_w, (size_t)n_w * sizeof(float));
            }
        }
    }
    if (j->bias->data || j->bias->slices) {
        const float *b = rad_slice_data(j->bias, e);
        for (int32_t p = p0; p < p1; p++) {
            float *o = out_row(j, j->order[p]);
            for (int64_t n = n0; n < n1; n++) o[n] += b[n];
        }
    }
}

/* Stage 3's split (module comment). */
static void plan(MoeJob *j, int n_threads)
{
    /* the tile width and row bytes of the first group stand for all: the
    ** x8 and stored widths differ (8 and 4), and 8 is a multiple of both */
    int x8;
    (void)slice_of(j, j->g_expert[0], &x8);
    const CpuEncKernels *k = x8 ? &cpu_enc_x8[j->w->enc] : &cpu_enc[j->w->enc];
    int64_t tw = k->tile ? k->tile_w : 1;
    if (tw < CPU_X8_ROWS && CPU_X8_ROWS % tw == 0 && j->N % CPU_X8_ROWS == 0) tw = CPU_X8_ROWS;
    int64_t want = n_threads > 1 ? (int64_t)n_threads * TASKS_PER_THREAD : 1;
    int64_t fair = (int64_t)round_up((size_t)cdiv((int64_t)j->n_groups * j->N, want), (size_t)tw);
    if (fair > j->N) fair = j->N;
    j->n_block = fair;
    if (j->slots > j->n_groups) {
        /* several slots share an expert: keep its block in cache for them */
        int64_t rows = (int64_t)(WEIGHT_BLOCK_BYTES / (size_t)(j->w->row_bytes ? j->w->row_bytes : 1)) / tw * tw;
        if (rows < tw) rows = tw;
        if (rows < j->n_block) j->n_block = rows;
    }
    if (j->n_block < 1) j->n_block = 1;
    j->n_cb = (int)cdiv(j->N, j->n_block);
}

/* ------------------------------------------------------- statistics */

#define STATS_CAP 65536
static int64_t stats[STATS_CAP][5];     /* M, slots, n_expert, groups, largest group */
static atomic_int stats_on, stats_n;

static void record(const MoeJob *j, int64_t n_expert)
{
    int largest = 0;
    for (int g = 0; g < j->n_groups; g++)
        if (j->g_start[g + 1] - j->g_start[g] > largest) largest = j->g_start[g + 1] - j->g_start[g];
    int i = atomic_fetch_add(&stats_n, 1);
    if (i >= STATS_CAP) return;
    stats[i][0] = j->M, stats[i][1] = j->slots, stats[i][2] = n_expert;
    stats[i][3] = j->n_groups, stats[i][4] = largest;
}

/* on = 1: forget what was recorded and record every launch from now; 0:
** stop.  Copies up to cap records of 5 int64 (rows, slots, experts in the
** stack, experts touched, slots of the busiest expert) into out, oldest
** first, and returns how many there are. */
__attribute__((visibility("default"))) int rad_cpu_moe_stats(int on, int64_t (*out)[5], int cap)
{
    int n = atomic_load(&stats_n);
    if (n > STATS_CAP) n = STATS_CAP;
    for (int i = 0; i < n && i < cap; i++) memcpy(out[i], stats[i], sizeof stats[i]);
    if (on) atomic_store(&stats_n, 0);
    atomic_store(&stats_on, on);
    return n;
}

/* ----------------------------------------------------------- launch */

int cpu_moe_gemm(const RadKernelArgs *a)
{
    const RadTensor *o = a->operand;
    const RadTensor *w = &o[RAD_MOE_GEMM_W];
    int enc_ok = w->enc >= 0 && w->enc < RAD_ENC_COUNT && cpu_enc[w->enc].dot;
    int rc = rad_check_moe_gemm_served(a, enc_ok);
    if (rc) return rc;

    MoeJob j;
    memset(&j, 0, sizeof j);
    j.x = &o[RAD_MOE_GEMM_X];
    j.w = w;
    j.bias = &o[RAD_MOE_GEMM_BIAS];
    j.out = &o[RAD_MOE_GEMM_OUT];
    j.ids = &o[RAD_MOE_GEMM_IDS];
    j.M = rad_op_rows(a);
    j.k = a->param[RAD_MOE_GEMM_K_USED].i;
    j.N = a->param[RAD_MOE_GEMM_N].i;
    j.K = a->param[RAD_MOE_GEMM_K].i;
    j.slots = j.M * j.k;
    j.per_slot = a->param[RAD_MOE_GEMM_X_PER_SLOT].i == RAD_MOE_X_PER_SLOT;
    j.fmt = act_format(w->enc);
    j.conv = cpu_act_quant[j.fmt];
    const int64_t n_expert = w->shape[0];

    /* A slice in our x8 layout comes only from our relayout, so it has
    ** the shape the layout needs; the stack's copy holds whole x8 slices. */
    int any_x8 = w->layout == RAD_LAYOUT_KERNEL;
    if (w->slices && w->slice_layout)
        for (int64_t e = 0; e < n_expert; e++) any_x8 |= w->slice_layout[e] == RAD_LAYOUT_KERNEL;
    if (any_x8) {
        if (!cpu_enc_x8[w->enc].tile || j.N % CPU_X8_ROWS) return RAD_E_ARG;
        if (cpu_enc_x8[w->enc].act_fmt != j.fmt) return RAD_E_UNSUPPORTED;   /* act_format's rule */
        j.x8_slice_bytes = j.N * cpu_x8_row_bytes(w->enc, j.K);
    }
    if (!j.conv) return RAD_E_UNSUPPORTED;
    MoeScratch s;
    if (scratch_layout(j.M, j.k, j.K, w->enc, j.per_slot, &s) || !a->scratch) return RAD_E_ARG;
    if (j.N > INT32_MAX / 2) return RAD_E_RANGE;
    char *base = (char *)round_up((size_t)(uintptr_t)a->scratch, ROW_ALIGN);
    j.conv_rows = base + s.conv;
    j.sorted = base + s.sorted;
    j.stride = act_stride(j.fmt, j.K);
    int32_t *order = (int32_t *)(void *)(base + s.order);
    int32_t *group = (int32_t *)(void *)(base + s.group);

    /* 1. sort */
    sort_slots(&j, order, (int32_t *)(void *)(base + s.tmp), n_expert);
    j.order = order;
    find_groups(&j, group, group + j.slots + 1);
    if (atomic_load_explicit(&stats_on, memory_order_relaxed)) record(&j, n_expert);

    /* 2. convert, once per row; a conversion costs about one weight row's
    ** dots, so in parallel only when there are rows enough to share */
    int n_threads = a->parallel_for && a->n_threads > 1 ? a->n_threads : 1;
    int64_t n_conv = j.per_slot ? j.slots : j.M;
    int tasks = n_conv >= 2 * n_threads ? n_threads * 2 : (n_conv >= n_threads ? n_threads : 1);
    j.per_convert_task = cdiv(n_conv, tasks);
    cpu_parallel(a, (int)cdiv(n_conv, j.per_convert_task), convert_task, &j);
    j.shared_row = !j.per_slot && j.M == 1;
    if (!j.per_slot && !j.shared_row) {
        tasks = j.slots >= 2 * n_threads ? n_threads * 2 : 1;
        j.per_convert_task = cdiv(j.slots, tasks);
        cpu_parallel(a, (int)cdiv(j.slots, j.per_convert_task), gather_task, &j);
    }

    /* 3, 4. products and bias */
    plan(&j, n_threads);
    cpu_parallel(a, j.n_groups * j.n_cb, product_task, &j);
    return RAD_OK;
}
