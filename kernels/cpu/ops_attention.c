/*
** ops_attention.c: attention over the paged KV cache (attn_paged), the
** portable tile loops (cpu_attn_portable), and nothing else: kv_store is in
** ops_copy.c.  The semantics are kernels/ref/ref_attention.c's:
**
**   for row m (sequence s, position p) and head h, kv head g = h / (n_head / n_head_kv)
**     visible j:  j <= p, and j > p - window when window > 0
**     l_j = scale * (q . k_j), then softcap * tanh(l_j / softcap) when softcap > 0
**     out = sum_j e^l_j v_j / (sum_j e^l_j + e^sink_h)
**
** How the work is cut.  A task is (a tile of up to R consecutive rows) x
** (one KV head g) x (a run of up to HC of g's query heads), so every query
** head that reads g's keys in those rows shares one pass over them (GQA):
** the task's R x HC query vectors are copied (pre-multiplied by `scale`)
** into a local block, and the visible key range is walked in chunks of at
** most KC keys.  For each chunk the keys are read once: a task with more
** than ATTN_F16_DIRECT queries widens an f16 chunk into a local f32 block
** first (gathered across cache blocks, so a small head still gets long
** chunks); otherwise keys are read in place, f16 widened in the loop, and a
** chunk stays inside one cache block.  The whole [queries x keys] score
** tile is formed
** (register-blocked, ops_attention_avx2.c), and each query's online
** softmax (flash attention: a running max, a running sum, an accumulator
** rescaled when the max grows) takes the chunk, so no [M x context] score
** matrix exists anywhere.  Tiles are handed out heaviest (latest) first, so
** the causal triangle's uneven tasks balance over the threads.  Rows
** of different sequences in one tile are handled as separate runs; chunks
** no query of a run can see are never read (a window leaves holes).
**
** Decode (M = 1) has too few (row, head) tasks to fill the threads on a
** model with few KV heads, so a step of at most ATTN_SPLIT_ROWS rows whose
** key ranges are longer than ATTN_SPLIT_MIN also cuts each run's range into
** at most ATTN_SPLITS parts of at least ATTN_SPLIT_MIN positions.  Each part
** leaves its partial (max, sum, accumulator) in scratch, and a second pass
** combines the parts of each (row, head) in part order.  The cut depends
** only on the rows' positions, never on the thread count, so neither do the
** results; a short context is not cut at all, and a step with little work
** (ATTN_MIN_PARALLEL) runs on the calling thread.
**
** Determinism: every value is computed by the same operations in the same
** order whichever thread runs a task or in which order tasks run (the
** chunk grid is fixed by positions and the cache's block size).
**
** Accuracy: scores and sums in f32 (8-lane partial sums), exponentials
** within 2 ulp, f16 keys and values converted exactly.  NMSE against ref
** is orders of magnitude below the 5e-4 bound (test_cpu_ops.c prints it).
** A key that some query of a tile sees but another does not enters the
** other's weighted sum with weight exactly 0; a NaN or inf stored there
** (only a broken model writes one) would leak into it.
*/
#include <math.h>
#include <string.h>

#include "../../base/rad_half.h"
#include "cpu_ops.h"

#define ATTN_QCAP 8192          /* floats of query vectors (and of accumulators) per task */
#define ATTN_MAX_Q 64           /* query vectors per task */
#define ATTN_KCAP 4096          /* floats of one chunk of keys (or values) */
#define ATTN_MAX_KC 64          /* keys per chunk */
#define ATTN_MAX_HEAD_DIM 1024  /* as ref */
#define ATTN_F16_DIRECT 8       /* tasks with at most this many queries read f16 in place */
#define ATTN_MIN_PARALLEL 65536 /* (key, dim) products below which a step runs on one thread */
#define ATTN_SPLIT_ROWS 8       /* steps of at most this many rows split the key range */
#define ATTN_SPLITS 16          /* into at most this many parts */
#define ATTN_SPLIT_MIN 256      /* of at least this many positions */

/* ------------------------------------------------- portable tile loops */

static void scores_portable(const float *q, int nq, int64_t hd, const float *k, size_t k_stride, int nk,
                            float *s, int s_stride)
{
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < nk; j++) {
            const float *kj = (const float *)(const void *)((const char *)k + (size_t)j * k_stride);
            const float *qi = q + i * hd;
            float acc = 0.0f;
            for (int64_t d = 0; d < hd; d++) acc += qi[d] * kj[d];
            s[i * s_stride + j] = acc;
        }
}

static void softcap_portable(float *x, int n, float cap)
{
    for (int j = 0; j < n; j++) x[j] = cap * tanhf(x[j] / cap);
}

static float exp_sum_portable(float *x, int n, float m)
{
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        x[j] = expf(x[j] - m);
        sum += x[j];
    }
    return sum;
}

static void pv_portable(const float *p, int p_stride, int nq, const float *v, size_t v_stride, int nk,
                        int64_t hd, float *acc)
{
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < nk; j++) {
            float w = p[i * p_stride + j];
            const float *vj = (const float *)(const void *)((const char *)v + (size_t)j * v_stride);
            float *a = acc + i * hd;
            for (int64_t d = 0; d < hd; d++) a[d] += w * vj[d];
        }
}

static void rows_from_f16_portable(const void *src, size_t stride, int n, int64_t hd, float *dst)
{
    for (int j = 0; j < n; j++) {
        const unsigned char *row = (const unsigned char *)src + (size_t)j * stride;
        for (int64_t d = 0; d < hd; d++) {
            uint16_t h;
            memcpy(&h, row + 2 * d, 2);
            dst[j * hd + d] = rad_f16_to_f32(h);
        }
    }
}

const CpuAttnOps cpu_attn_portable = {
    .isa = "portable",
    .scores = scores_portable,
    .softcap = softcap_portable,
    .exp_sum = exp_sum_portable,
    .pv = pv_portable,
    .rows_from_f16 = rows_from_f16_portable,
};

/* --------------------------------------------------------- the job */

typedef struct AttnJob {
    const RadKvView *kv;
    const RadTensor *q, *out;
    const float *sinks;             /* [n_head] or NULL */
    float *partial;                 /* split mode: scratch, else NULL */
    int64_t M, n_head, n_kv, hd, group, window;
    float scale, softcap;
    int64_t esize;                  /* bytes per cached element */
    /* the cut: tasks are (tile, kv head, head run, part), heaviest tiles first */
    int64_t R;                      /* rows per tile */
    int64_t HC;                     /* query heads per task */
    int n_tiles, n_hc, n_parts;
    int KC;                         /* keys per chunk */
    int n_comb_tasks;
    const CpuAttnOps *ops;
    const CpuVecOps *vec;
} AttnJob;

/* The earliest key position a query at p sees. */
static int64_t visible_from(int64_t p, int64_t window)
{
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

/* The key range [*lo, *hi] a run of rows [m0, m1) of one sequence sees: the
** union of its rows' ranges. */
static void run_range(const RadKvView *kv, int64_t window, int64_t m0, int64_t m1, int64_t *lo, int64_t *hi)
{
    *lo = INT64_MAX;
    *hi = -1;
    for (int64_t m = m0; m < m1; m++) {
        int64_t p = kv->positions[m], first = visible_from(p, window);
        if (first < *lo) *lo = first;
        if (p > *hi) *hi = p;
    }
}

/* The end of the run of rows starting at m: rows of one sequence, within the
** tile that ends at r1. */
static int64_t run_end(const RadKvView *kv, int64_t m, int64_t r1)
{
    int64_t e = m + 1;
    while (e < r1 && kv->token_seq[e] == kv->token_seq[m]) e++;
    return e;
}

/* The length of each part when a run's key range of L positions is split:
** a function of L alone. */
static int64_t part_len(int64_t L)
{
    int64_t len = (L + ATTN_SPLITS - 1) / ATTN_SPLITS;
    return len < ATTN_SPLIT_MIN ? ATTN_SPLIT_MIN : len;
}

/* Where partial (row m, head h, part s) lives in scratch: max, sum, then hd floats. */
static float *partial_at(const AttnJob *j, int64_t m, int64_t h, int s)
{
    return j->partial + ((m * j->n_head + h) * ATTN_SPLITS + s) * (j->hd + 2);
}

/* The task's local blocks, on its stack (about 114 KiB). */
typedef struct AttnLocal {
    float q[ATTN_QCAP];                 /* [nq][hd], pre-scaled */
    float acc[ATTN_QCAP];               /* [nq][hd] */
    float s[ATTN_MAX_Q * ATTN_MAX_KC];  /* [nq][KC] scores, then probabilities */
    float k[ATTN_KCAP], v[ATTN_KCAP];   /* a chunk widened from f16 (gather mode) */
    float mx[ATTN_MAX_Q], sum[ATTN_MAX_Q];
    int64_t lo[ATTN_MAX_Q], hi[ATTN_MAX_Q];     /* per row of the run: visible keys */
} AttnLocal;

/* Whether any row of the run sees a key in [c, end). */
static int seen_by(const AttnLocal *L, int64_t nr, int64_t c, int64_t end)
{
    for (int64_t r = 0; r < nr; r++)
        if (L->lo[r] < end && L->hi[r] >= c) return 1;
    return 0;
}

/* Where kv head g's key and value of position p of sequence seq start. */
static void kv_at(const AttnJob *j, int64_t seq, int64_t p, int64_t g, const char **k, const char **v)
{
    const RadKvView *kv = j->kv;
    int64_t slot = (int64_t)kv->block_table[seq * kv->max_blocks + p / kv->block_size] * kv->block_size +
                   p % kv->block_size;
    int64_t at = slot * kv->kv_row_bytes + g * j->hd * j->esize;
    *k = (const char *)kv->k + at;
    *v = (const char *)kv->v + at;
}

/* One run: rows [m0, m1) of one sequence, query heads [h0, h1) of kv head g,
** keys of part `part` (or all of them when not splitting). */
static void attn_run(const AttnJob *j, AttnLocal *L, int64_t m0, int64_t m1, int64_t g, int64_t h0,
                     int64_t h1, int part)
{
    const RadKvView *kv = j->kv;
    const int64_t hd = j->hd, nh = h1 - h0, nr = m1 - m0;
    const int nq = (int)(nr * nh), KC = j->KC;
    const int64_t seq = kv->token_seq[m0], bs = kv->block_size;
    /* Few queries per key: read f16 keys and values in place rather than
    ** converting each chunk first (a choice by shape, so deterministic). */
    const int direct_f16 = kv->enc == RAD_ENC_F16 && j->ops->scores_f16 && nq <= ATTN_F16_DIRECT;
    /* Otherwise an f16 chunk is widened into L->k / L->v, gathered across
    ** blocks, so its keys need not share one. */
    const int gather = kv->enc == RAD_ENC_F16 && !direct_f16;

    int64_t lo, hi;
    run_range(kv, j->window, m0, m1, &lo, &hi);
    for (int64_t r = 0; r < nr; r++) {
        L->hi[r] = kv->positions[m0 + r];
        L->lo[r] = visible_from(L->hi[r], j->window);
    }
    if (j->partial) {
        int64_t len = part_len(hi - lo + 1), a = lo + part * len;
        lo = a;
        if (a + len - 1 < hi) hi = a + len - 1;
    }

    for (int64_t r = 0; r < nr; r++) {
        const float *qrow = rad_act_row(j->q, m0 + r);
        for (int64_t hh = 0; hh < nh; hh++) {
            const float *src = qrow + (h0 + hh) * hd;
            float *dst = L->q + (r * nh + hh) * hd;
            for (int64_t d = 0; d < hd; d++) dst[d] = src[d] * j->scale;
        }
    }
    memset(L->acc, 0, (size_t)nq * (size_t)hd * sizeof(float));
    for (int i = 0; i < nq; i++) {
        L->mx[i] = -INFINITY;
        L->sum[i] = 0.0f;
    }

    for (int64_t c = lo; c <= hi;) {
        /* The chunk [c, end): at most KC keys on a grid of KC positions, and,
        ** when read in place, within one block. */
        int64_t end = c - c % KC + KC;
        if (!gather && end > c - c % bs + bs) end = c - c % bs + bs;
        if (end > hi + 1) end = hi + 1;
        int nk = (int)(end - c);

        if (!seen_by(L, nr, c, end)) {
            c = end;
            continue;
        }

        const float *K, *V;
        const char *kp = NULL, *vp = NULL;
        size_t stride;
        if (gather) {
            /* widen the chunk's keys and values, block by block, into the
            ** local block; a block no row sees (a hole) reads as zeros */
            for (int64_t p = c; p < end;) {
                int64_t seg = p - p % bs + bs < end ? p - p % bs + bs : end;
                float *kd = L->k + (p - c) * hd, *vd = L->v + (p - c) * hd;
                if (seen_by(L, nr, p, seg)) {
                    kv_at(j, seq, p, g, &kp, &vp);
                    j->ops->rows_from_f16(kp, (size_t)kv->kv_row_bytes, (int)(seg - p), hd, kd);
                    j->ops->rows_from_f16(vp, (size_t)kv->kv_row_bytes, (int)(seg - p), hd, vd);
                } else {
                    memset(kd, 0, (size_t)((seg - p) * hd) * sizeof(float));
                    memset(vd, 0, (size_t)((seg - p) * hd) * sizeof(float));
                }
                p = seg;
            }
            K = L->k;
            V = L->v;
            stride = (size_t)hd * sizeof(float);
        } else {
            kv_at(j, seq, c, g, &kp, &vp);
            K = (const float *)(const void *)kp;
            V = (const float *)(const void *)vp;
            stride = (size_t)kv->kv_row_bytes;
        }
        if (direct_f16) j->ops->scores_f16(L->q, nq, hd, kp, stride, nk, L->s, KC);
        else j->ops->scores(L->q, nq, hd, K, stride, nk, L->s, KC);

        for (int i = 0; i < nq; i++) {
            float *s = L->s + i * KC;
            int64_t r = i / nh;
            int a = (int)((L->lo[r] > c ? L->lo[r] : c) - c);
            int b = (int)((L->hi[r] < end - 1 ? L->hi[r] : end - 1) - c + 1);
            if (a >= b) {               /* this query sees nothing here */
                memset(s, 0, (size_t)nk * sizeof(float));
                continue;
            }
            if (j->softcap > 0) j->ops->softcap(s + a, b - a, j->softcap);
            float top = s[a];
            for (int k = a + 1; k < b; k++) top = s[k] > top ? s[k] : top;
            for (int k = 0; k < a; k++) s[k] = -INFINITY;
            for (int k = b; k < nk; k++) s[k] = -INFINITY;
            if (top > L->mx[i]) {
                if (L->mx[i] > -INFINITY) {
                    float alpha = expf(L->mx[i] - top);
                    L->sum[i] *= alpha;
                    j->vec->scale(L->acc + i * hd, alpha, hd);
                }
                L->mx[i] = top;
            }
            L->sum[i] += j->ops->exp_sum(s, nk, L->mx[i]);
        }

        if (direct_f16) j->ops->pv_f16(L->s, KC, nq, vp, stride, nk, hd, L->acc);
        else j->ops->pv(L->s, KC, nq, V, stride, nk, hd, L->acc);
        c = end;
    }

    for (int i = 0; i < nq; i++) {
        int64_t m = m0 + i / nh, h = h0 + i % nh;
        const float *acc = L->acc + i * hd;
        if (j->partial) {
            float *p = partial_at(j, m, h, part);
            p[0] = L->mx[i];
            p[1] = L->sum[i];
            memcpy(p + 2, acc, (size_t)hd * sizeof(float));
            continue;
        }
        float f;
        if (j->sinks) {
            float sink = j->sinks[h], top = sink > L->mx[i] ? sink : L->mx[i];
            float e = expf(L->mx[i] - top);
            f = e / (L->sum[i] * e + expf(sink - top));
        } else {
            f = 1.0f / L->sum[i];
        }
        float *o = rad_act_row(j->out, m) + h * hd;
        for (int64_t d = 0; d < hd; d++) o[d] = acc[d] * f;
    }
}

static void attn_task(void *ctx, int t)
{
    const AttnJob *j = ctx;
    AttnLocal L;
    int part = t % j->n_parts;
    t /= j->n_parts;
    int64_t hc = t % j->n_hc;
    t /= j->n_hc;
    int64_t g = t % j->n_kv;
    t /= (int)j->n_kv;
    int64_t tile = j->n_tiles - 1 - t;

    int64_t r0 = tile * j->R, r1 = r0 + j->R < j->M ? r0 + j->R : j->M;
    int64_t h0 = g * j->group + hc * j->HC;
    int64_t h1 = h0 + j->HC < (g + 1) * j->group ? h0 + j->HC : (g + 1) * j->group;
    for (int64_t m = r0; m < r1;) {
        int64_t e = run_end(j->kv, m, r1);
        attn_run(j, &L, m, e, g, h0, h1, part);
        m = e;
    }
}

/* Split mode, second pass: each (row, head)'s parts (max mx_s, sum l_s,
** accumulator acc_s), combined in part order.  With T the largest max, the
** sink included:  out = sum_s acc_s e^(mx_s - T) / (sum_s l_s e^(mx_s - T)
** + e^(sink - T)). */
static void combine_task(void *ctx, int t)
{
    const AttnJob *j = ctx;
    int64_t n = j->M * j->n_head;
    int64_t i0 = cpu_task_start(n, j->n_comb_tasks, t), i1 = cpu_task_start(n, j->n_comb_tasks, t + 1);
    for (int64_t i = i0; i < i1; i++) {
        int64_t m = i / j->n_head, h = i % j->n_head;
        float top = j->sinks ? j->sinks[h] : -INFINITY;
        for (int s = 0; s < j->n_parts; s++) {
            float mx = partial_at(j, m, h, s)[0];
            if (mx > top) top = mx;
        }
        float *o = rad_act_row(j->out, m) + h * j->hd;
        float denom = j->sinks ? expf(j->sinks[h] - top) : 0.0f;
        memset(o, 0, (size_t)j->hd * sizeof(float));
        for (int s = 0; s < j->n_parts; s++) {
            const float *p = partial_at(j, m, h, s);
            if (!(p[0] > -INFINITY)) continue;          /* an empty part */
            float e = expf(p[0] - top);
            denom += p[1] * e;
            for (int64_t d = 0; d < j->hd; d++) o[d] += p[2 + d] * e;
        }
        j->vec->scale(o, 1.0f / denom, j->hd);
    }
}

/* ------------------------------------------------------------ launch */

/* The cut of the work, from the shape alone. */
static void attn_geometry(AttnJob *j)
{
    int64_t per_task = ATTN_QCAP / j->hd;
    j->HC = j->group < per_task ? j->group : per_task;
    if (j->HC > ATTN_MAX_Q) j->HC = ATTN_MAX_Q;
    if (j->HC < 1) j->HC = 1;
    j->R = ATTN_MAX_Q / j->HC;
    if (j->R > ATTN_QCAP / (j->HC * j->hd)) j->R = ATTN_QCAP / (j->HC * j->hd);
    if (j->R < 1) j->R = 1;
    j->n_hc = (int)((j->group + j->HC - 1) / j->HC);
    j->n_tiles = (int)((j->M + j->R - 1) / j->R);
    int64_t kc = ATTN_KCAP / j->hd;
    j->KC = (int)(kc > ATTN_MAX_KC ? ATTN_MAX_KC : kc < 1 ? 1 : kc);
}

size_t cpu_attn_paged_scratch(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), n_head = a->param[RAD_ATTN_N_HEAD].i, hd = a->param[RAD_ATTN_HEAD_DIM].i;
    if (M <= 0 || n_head <= 0 || hd <= 0) return 0;
    if (M > ATTN_SPLIT_ROWS) M = ATTN_SPLIT_ROWS;
    return (size_t)(M * n_head * ATTN_SPLITS * (hd + 2)) * sizeof(float);
}

int cpu_attn_paged(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a);
    int64_t n_head = a->param[RAD_ATTN_N_HEAD].i, n_kv = a->param[RAD_ATTN_N_HEAD_KV].i;
    int64_t hd = a->param[RAD_ATTN_HEAD_DIM].i, window = a->param[RAD_ATTN_WINDOW].i;
    const RadTensor *q = &a->operand[RAD_ATTN_Q];
    const RadTensor *out = &a->operand[RAD_ATTN_OUT];
    const RadTensor *sinks = &a->operand[RAD_ATTN_SINKS];
    const RadKvView *kv = a->kv;
    int rc;

    if ((rc = rad_check_attn(a, ATTN_MAX_HEAD_DIM))) return rc;
    /* Every visible key must have a slot; refuse before writing anything.
    ** A block is checked once per row, not once per position. */
    for (int64_t m = 0; m < M; m++) {
        int64_t p = kv->positions[m];
        if (p < 0) return RAD_E_RANGE;
        int64_t first = visible_from(p, window);
        for (int64_t b = first / kv->block_size; b <= p / kv->block_size; b++) {
            int64_t at = b * kv->block_size < first ? first : b * kv->block_size;
            if (rad_kv_slot(kv, kv->token_seq[m], at) < 0) return RAD_E_RANGE;
        }
    }

    AttnJob j = {
        .kv = kv, .q = q, .out = out, .sinks = sinks->data, .M = M, .n_head = n_head, .n_kv = n_kv,
        .hd = hd, .group = n_head / n_kv, .window = window, .scale = (float)a->param[RAD_ATTN_SCALE].f,
        .softcap = (float)a->param[RAD_ATTN_SOFTCAP].f, .esize = rad_kv_elem_bytes(kv),
        .ops = cpu_attn(), .vec = cpu_vec(), .n_parts = 1,
    };
    attn_geometry(&j);
    /* A small step over a long context splits its key ranges: into as many
    ** parts as its longest run needs (a function of the positions only). */
    if (M <= ATTN_SPLIT_ROWS && a->scratch) {
        int parts = 1;
        for (int64_t r0 = 0; r0 < M; r0 += j.R)
            for (int64_t m = r0, r1 = r0 + j.R < M ? r0 + j.R : M; m < r1;) {
                int64_t e = run_end(kv, m, r1), lo, hi;
                run_range(kv, window, m, e, &lo, &hi);
                int64_t len = hi - lo + 1, n = (len + part_len(len) - 1) / part_len(len);
                if (n > parts) parts = (int)n;
                m = e;
            }
        if (parts > 1) {
            j.partial = a->scratch;
            j.n_parts = parts;
        }
    }
    /* A short decode step is a few microseconds of work: it runs on this
    ** thread (which task runs where never changes a result). */
    int64_t work = 0;
    for (int64_t m = 0; m < M; m++) work += kv->positions[m] - visible_from(kv->positions[m], window) + 1;
    work *= n_head * hd;
    int n_tasks = j.n_tiles * (int)n_kv * j.n_hc * j.n_parts;
    if (work < ATTN_MIN_PARALLEL) {
        for (int t = 0; t < n_tasks; t++) attn_task(&j, t);
    } else {
        cpu_parallel(a, n_tasks, attn_task, &j);
    }
    if (j.partial) {
        j.n_comb_tasks = cpu_task_count(a, M * n_head, 4 * j.n_parts * hd, 65536);
        cpu_parallel(a, j.n_comb_tasks, combine_task, &j);
    }
    return RAD_OK;
}
