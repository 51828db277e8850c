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
** The canonical order (docs/OPS.md, batch and placement invariance).  A
** row's result is a function of its position, window and keys alone: its
** visible keys are cut at fixed absolute positions into chunks of KC keys
** (a power of two) and parts of part_len() keys (a power of two, at least
** ATTN_PART_MIN, at most ATTN_SPLITS + 1 parts over the row's own range).
** Inside a part the chunks go in order through an online softmax (flash
** attention: a running max, a running sum, an accumulator rescaled when the
** max grows), each chunk's score row laid out from its grid edge, so the
** lanes of every sum are fixed by positions; the parts are folded in order
** by fold_part(), and the sink and the division come last (finish_head).
** Every cut below is a choice of how to compute that, never of what.
**
** How the work is cut.  A task is (a tile of up to R consecutive rows) x
** (one KV head g) x (a run of up to HC of g's query heads), so every query
** head that reads g's keys in those rows shares one pass over them (GQA):
** the task's R x HC query vectors are copied (pre-multiplied by `scale`)
** into a local block and the union of its rows' keys is walked chunk by
** chunk; each query takes the keys it sees (the others' enter with weight
** exactly 0) and folds a part when it crosses the part's end.  For each
** chunk the keys are read once: a task with more than ATTN_F16_DIRECT
** queries widens an f16 chunk into a local f32 block first (gathered across
** cache blocks); otherwise keys are read in place, f16 widened in the loop,
** a cache block at a time.  Widening is exact and both paths sum in the
** same order, so they agree to the bit.  The whole [queries x keys] score
** tile is formed (register-blocked, ops_attention_avx2.c), so no
** [M x context] score matrix exists anywhere.  Tiles are handed out
** heaviest (latest) first, so the causal triangle's uneven tasks balance
** over the threads.  Rows of different sequences in one tile are handled
** as separate runs; chunks no query of a run can see are never read (a
** window leaves holes).
**
** Decode (M = 1) has too few (row, head) tasks to fill the threads on a
** model with few KV heads, so a step of at most ATTN_SPLIT_ROWS rows whose
** keys span several parts computes each part slot on its own task: each
** leaves its partial (max, sum, accumulator) in scratch, and a second pass
** folds the slots of each (row, head) in order, with the same fold_part()
** the tasks use when they do not split.  A step with little work
** (ATTN_MIN_PARALLEL) runs on the calling thread.
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
#define ATTN_SPLIT_ROWS 8       /* steps of at most this many rows compute parts in parallel */
#define ATTN_SPLITS 16          /* a row's keys are cut into at most this many parts (+1) */
#define ATTN_PART_MIN 256       /* of at least this many positions */

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

static void fold_portable(float *acc, const float *part, float a, float b, int64_t n)
{
    for (int64_t d = 0; d < n; d++) acc[d] = fmaf(part[d], b, acc[d] * a);
}

const CpuAttnOps cpu_attn_portable = {
    .isa = "portable",
    .scores = scores_portable,
    .softcap = softcap_portable,
    .exp_sum = exp_sum_portable,
    .pv = pv_portable,
    .rows_from_f16 = rows_from_f16_portable,
    .fold = fold_portable,
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
    /* the cut: tasks are (tile, kv head, head run, part slot), heaviest tiles first */
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

/* The part length of a row whose visible keys are [lo, p]: a power of two
** of at least ATTN_PART_MIN positions, so the range has at most
** ATTN_SPLITS + 1 parts on the grid of that length.  A function of the
** row alone, as every step of the canonical order (module comment). */
static int64_t part_len(int64_t lo, int64_t p)
{
    int64_t want = (p - lo + 1 + ATTN_SPLITS - 1) / ATTN_SPLITS, len = ATTN_PART_MIN;
    while (len < want) len *= 2;
    return len;
}

/* The number of parts of a row's visible keys. */
static int parts_of(int64_t lo, int64_t p)
{
    int64_t len = part_len(lo, p);
    return (int)(p / len - lo / len + 1);
}

/* The end of the run of rows starting at m: rows of one sequence, within the
** tile that ends at r1. */
static int64_t run_end(const RadKvView *kv, int64_t m, int64_t r1)
{
    int64_t e = m + 1;
    while (e < r1 && kv->token_seq[e] == kv->token_seq[m]) e++;
    return e;
}

/* Where partial (row m, head h, part slot s) lives in scratch: max, sum,
** then hd floats. */
static float *partial_at(const AttnJob *j, int64_t m, int64_t h, int s)
{
    return j->partial + ((m * j->n_head + h) * (ATTN_SPLITS + 1) + s) * (j->hd + 2);
}

/* The task's local blocks, on its stack (about 150 KiB). */
typedef struct AttnLocal {
    float q[ATTN_QCAP];                 /* [nq][hd], pre-scaled */
    float acc[ATTN_QCAP];               /* [nq][hd]: this part's sum of values */
    float cacc[ATTN_QCAP];              /* [nq][hd]: the parts folded so far */
    float s[ATTN_MAX_Q * ATTN_MAX_KC];  /* [nq][KC] scores, then probabilities */
    float k[ATTN_KCAP], v[ATTN_KCAP];   /* a chunk widened from f16 (gather mode) */
    float mx[ATTN_MAX_Q], sum[ATTN_MAX_Q];      /* this part's running max and sum */
    float cmx[ATTN_MAX_Q], csum[ATTN_MAX_Q];    /* the folded parts' */
    int64_t lo[ATTN_MAX_Q], hi[ATTN_MAX_Q];     /* per row of the run: keys it takes here */
    int64_t plen[ATTN_MAX_Q];                   /* per row: its part length */
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

/* Fold a part (mx, sum, acc) into the combined state (cmx, csum, cacc), the
** canonical step of the module comment; the same function for split mode's
** second pass, so both give the same bits. */
static void fold_part(const AttnJob *j, float *cmx, float *csum, float *cacc, float mx, float sum,
                      const float *acc)
{
    if (!(mx > -INFINITY)) return;              /* an empty part */
    if (!(*cmx > -INFINITY)) {
        *cmx = mx;
        *csum = sum;
        memcpy(cacc, acc, (size_t)j->hd * sizeof(float));
        return;
    }
    float top = mx > *cmx ? mx : *cmx;
    float a = expf(*cmx - top), b = expf(mx - top);
    *csum = fmaf(sum, b, *csum * a);
    j->ops->fold(cacc, acc, a, b, j->hd);
    *cmx = top;
}

/* The output of (row m, head h) from its folded state. */
static void finish_head(const AttnJob *j, int64_t m, int64_t h, float cmx, float csum, const float *cacc)
{
    float f;
    if (j->sinks) {
        float sink = j->sinks[h], top = sink > cmx ? sink : cmx;
        float e = expf(cmx - top);
        f = e / (csum * e + expf(sink - top));
    } else {
        f = 1.0f / csum;
    }
    float *o = rad_act_row(j->out, m) + h * j->hd;
    for (int64_t d = 0; d < j->hd; d++) o[d] = cacc[d] * f;
}

/* The chunk's keys [ka, kb) (inside [c, c + KC): the keys some row takes)
** against the run's queries: their scores into columns ka - c .. of L->s
** (values = 0), or, after the softmax step, the probability-weighted values
** into L->acc (values = 1).  Keys are read in place (f32, or f16 through the
** *_f16 loops) a cache block at a time, or from the widened chunk (gather).
** Every path gives each score and each sum the same operations
** (ops_attention_tiles.h), so the choice, made by shape, never changes a bit. */
static void chunk_pass(const AttnJob *j, AttnLocal *L, int nq, int64_t seq, int64_t g, int64_t c, int64_t ka,
                       int64_t kb, int gather, int values)
{
    const RadKvView *kv = j->kv;
    const int64_t hd = j->hd, bs = kv->block_size;
    const int KC = j->KC, f16 = kv->enc == RAD_ENC_F16;
    for (int64_t p = ka; p < kb;) {
        int64_t seg = gather ? kb : p - p % bs + bs < kb ? p - p % bs + bs : kb;
        const char *kp, *vp;
        size_t stride = (size_t)kv->kv_row_bytes;
        if (gather) {
            kp = (const char *)(L->k + (p - c) * hd);
            vp = (const char *)(L->v + (p - c) * hd);
            stride = (size_t)hd * sizeof(float);
        } else {
            kv_at(j, seq, p, g, &kp, &vp);
        }
        float *s = L->s + (p - c);
        int n = (int)(seg - p);
        if (!values && f16 && !gather) j->ops->scores_f16(L->q, nq, hd, kp, stride, n, s, KC);
        else if (!values) j->ops->scores(L->q, nq, hd, (const float *)(const void *)kp, stride, n, s, KC);
        else if (f16 && !gather) j->ops->pv_f16(s, KC, nq, vp, stride, n, hd, L->acc);
        else j->ops->pv(s, KC, nq, (const float *)(const void *)vp, stride, n, hd, L->acc);
        p = seg;
    }
}

/* One run: rows [m0, m1) of one sequence, query heads [h0, h1) of kv head g.
** part < 0: every visible key, each query folding its parts as it crosses
** their edges, and the outputs written; part >= 0 (split mode): only each
** row's part slot `part`, left in scratch for combine_task. */
static void attn_run(const AttnJob *j, AttnLocal *L, int64_t m0, int64_t m1, int64_t g, int64_t h0,
                     int64_t h1, int part)
{
    const RadKvView *kv = j->kv;
    const int64_t hd = j->hd, nh = h1 - h0, nr = m1 - m0;
    const int nq = (int)(nr * nh), KC = j->KC;
    const int64_t seq = kv->token_seq[m0];
    /* Many queries per key: widen each f16 chunk once into L->k / L->v;
    ** few: read the cache in place (a choice by shape; the bits are the same). */
    const int gather = kv->enc == RAD_ENC_F16 && (!j->ops->scores_f16 || nq > ATTN_F16_DIRECT);

    /* each row's keys here: all it sees, or its part slot `part` of them */
    int64_t lo = INT64_MAX, hi = -1;
    for (int64_t r = 0; r < nr; r++) {
        int64_t p = kv->positions[m0 + r], first = visible_from(p, j->window);
        L->plen[r] = part_len(first, p);
        L->lo[r] = first;
        L->hi[r] = p;
        if (part >= 0) {
            int64_t at = (first / L->plen[r] + part) * L->plen[r];
            if (at > L->lo[r]) L->lo[r] = at;
            if (at + L->plen[r] - 1 < L->hi[r]) L->hi[r] = at + L->plen[r] - 1;
        }
        if (L->lo[r] <= L->hi[r]) {
            if (L->lo[r] < lo) lo = L->lo[r];
            if (L->hi[r] > hi) hi = L->hi[r];
        }
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
        L->mx[i] = L->cmx[i] = -INFINITY;
        L->sum[i] = L->csum[i] = 0.0f;
    }

    /* Chunks on the grid of KC positions, from the one holding lo; the
    ** score row of a chunk always starts at its grid edge c. */
    for (int64_t c = lo < 0 ? 0 : lo - lo % KC; hi >= 0 && c <= hi; c += KC) {
        const int64_t end = c + KC;
        if (!seen_by(L, nr, c, end)) continue;

        /* a query whose part ends before this chunk folds it first */
        if (part < 0)
            for (int i = 0; i < nq; i++) {
                int64_t r = i / nh;
                if (c % L->plen[r] == 0 && L->mx[i] > -INFINITY) {
                    fold_part(j, &L->cmx[i], &L->csum[i], L->cacc + i * hd, L->mx[i], L->sum[i], L->acc + i * hd);
                    L->mx[i] = -INFINITY;
                    L->sum[i] = 0.0f;
                    memset(L->acc + i * hd, 0, (size_t)hd * sizeof(float));
                }
            }

        /* the keys some row takes from this chunk: [ka, kb) */
        int64_t ka = end, kb = c;
        for (int64_t r = 0; r < nr; r++) {
            if (L->lo[r] > L->hi[r] || L->lo[r] >= end || L->hi[r] < c) continue;
            int64_t a = L->lo[r] > c ? L->lo[r] : c, b = L->hi[r] + 1 < end ? L->hi[r] + 1 : end;
            if (a < ka) ka = a;
            if (b > kb) kb = b;
        }
        if (gather) {
            /* widen the chunk's keys and values, block by block; a block no
            ** row sees (a hole) reads as zeros */
            for (int64_t p = ka; p < kb;) {
                int64_t seg = p - p % kv->block_size + kv->block_size < kb ? p - p % kv->block_size + kv->block_size
                                                                           : kb;
                float *kd = L->k + (p - c) * hd, *vd = L->v + (p - c) * hd;
                if (seen_by(L, nr, p, seg)) {
                    const char *kp, *vp;
                    kv_at(j, seq, p, g, &kp, &vp);
                    j->ops->rows_from_f16(kp, (size_t)kv->kv_row_bytes, (int)(seg - p), hd, kd);
                    j->ops->rows_from_f16(vp, (size_t)kv->kv_row_bytes, (int)(seg - p), hd, vd);
                } else {
                    memset(kd, 0, (size_t)((seg - p) * hd) * sizeof(float));
                    memset(vd, 0, (size_t)((seg - p) * hd) * sizeof(float));
                }
                p = seg;
            }
        }
        chunk_pass(j, L, nq, seq, g, c, ka, kb, gather, 0);

        for (int i = 0; i < nq; i++) {
            float *s = L->s + i * KC;
            int64_t r = i / nh;
            int a = (int)((L->lo[r] > c ? L->lo[r] : c) - c);
            int b = (int)((L->hi[r] < end - 1 ? L->hi[r] : end - 1) - c + 1);
            if (L->lo[r] > L->hi[r] || a >= b) {      /* this query takes nothing here */
                memset(s, 0, (size_t)KC * sizeof(float));
                continue;
            }
            if (j->softcap > 0) j->ops->softcap(s + a, b - a, j->softcap);
            float top = s[a];
            for (int k = a + 1; k < b; k++) top = s[k] > top ? s[k] : top;
            for (int k = 0; k < a; k++) s[k] = -INFINITY;
            for (int k = b; k < KC; k++) s[k] = -INFINITY;
            if (top > L->mx[i]) {
                if (L->mx[i] > -INFINITY) {
                    float alpha = expf(L->mx[i] - top);
                    L->sum[i] *= alpha;
                    j->vec->scale(L->acc + i * hd, alpha, hd);
                }
                L->mx[i] = top;
            }
            L->sum[i] += j->ops->exp_sum(s, KC, L->mx[i]);
        }
        chunk_pass(j, L, nq, seq, g, c, ka, kb, gather, 1);
    }

    for (int i = 0; i < nq; i++) {
        int64_t m = m0 + i / nh, h = h0 + i % nh;
        if (part >= 0) {
            float *p = partial_at(j, m, h, part);
            p[0] = L->mx[i];
            p[1] = L->sum[i];
            memcpy(p + 2, L->acc + i * hd, (size_t)hd * sizeof(float));
            continue;
        }
        fold_part(j, &L->cmx[i], &L->csum[i], L->cacc + i * hd, L->mx[i], L->sum[i], L->acc + i * hd);
        finish_head(j, m, h, L->cmx[i], L->csum[i], L->cacc + i * hd);
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
        attn_run(j, &L, m, e, g, h0, h1, j->partial ? part : -1);
        m = e;
    }
}

/* Split mode, second pass: each (row, head)'s part slots folded in order,
** exactly as attn_run folds them when it does not split. */
static void combine_task(void *ctx, int t)
{
    const AttnJob *j = ctx;
    int64_t n = j->M * j->n_head;
    int64_t i0 = cpu_task_start(n, j->n_comb_tasks, t), i1 = cpu_task_start(n, j->n_comb_tasks, t + 1);
    float cacc[ATTN_MAX_HEAD_DIM];
    for (int64_t i = i0; i < i1; i++) {
        int64_t m = i / j->n_head, h = i % j->n_head;
        float cmx = -INFINITY, csum = 0.0f;
        for (int s = 0; s < j->n_parts; s++) {
            const float *p = partial_at(j, m, h, s);
            fold_part(j, &cmx, &csum, cacc, p[0], p[1], p + 2);
        }
        finish_head(j, m, h, cmx, csum, cacc);
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
    /* keys per chunk: a power of two, so part edges (powers of two of at
    ** least ATTN_PART_MIN) are chunk edges */
    int64_t cap = ATTN_KCAP / j->hd;
    j->KC = 1;
    while (j->KC * 2 <= ATTN_MAX_KC && j->KC * 2 <= cap) j->KC *= 2;
}

size_t cpu_attn_paged_scratch(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a), n_head = a->param[RAD_ATTN_N_HEAD].i, hd = a->param[RAD_ATTN_HEAD_DIM].i;
    if (M <= 0 || n_head <= 0 || hd <= 0) return 0;
    if (M > ATTN_SPLIT_ROWS) M = ATTN_SPLIT_ROWS;
    return (size_t)(M * n_head * (ATTN_SPLITS + 1) * (hd + 2)) * sizeof(float);
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
    /* A small step over a long context has its parts computed by separate
    ** tasks (a choice that changes no bit): as many slots as the row with
    ** the most parts has. */
    if (M <= ATTN_SPLIT_ROWS && a->scratch) {
        int parts = 1;
        for (int64_t m = 0; m < M; m++) {
            int64_t p = kv->positions[m];
            int n = parts_of(visible_from(p, window), p);
            if (n > parts) parts = n;
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
