/*
** ops_rope.c: rotary position embedding, as kernels/ref/ref_rope.c defines
** it (docs/OPS.md, rope).
**
** Rope is defined to the bit by the order of its f32 operations (an ulp of
** inv_freq moves the angle at position 8000 by 5e-4 rad), so this kernel
** repeats ref's: inv_freq, its scaling and the angle pos * inv_freq in f32
** one rounding per operation; cos and sin evaluated in double and rounded
** once (cpu_sincos1 in cpu_ops.h: a Cody-Waite reduction and Taylor series,
** within a few double ulp, so the f32 is ref's in all but the rarest ties);
** the rotation as ref's two products and a sum, never fused; YaRN's
** factor on cos and sin one f32 product each, as ref.  In practice
** the output is ref's, bit for bit (tests/ops/test_cpu_ops.c counts).
**
** inv_freq costs a pow per pair; a decode step calls rope twice a layer with
** the same parameters, so each thread keeps the last table it computed.
** Work splits by rows (each row's angles are computed once and applied to
** all its heads), only when there are enough rows to repay a dispatch.
*/
#include <math.h>
#include <string.h>

#include "../ops/rad_rope.h"
#include "cpu_ops.h"

#define ROPE_MAX_HALF 2048      /* n_rot up to 4096 */
#define ROPE_MIN_WORK 8192

typedef struct RopeKey {
    int64_t n_rot;
    int64_t scaling, orig_ctx, truncate;
    double theta, factor, low_ff, high_ff, beta_fast, beta_slow;
} RopeKey;

typedef struct RopeTable {
    int valid;
    RopeKey key;
    float inv[ROPE_MAX_HALF];
} RopeTable;

static _Thread_local RopeTable rope_cache;

/* inv_freq of pair i in f32 step by step, as ref_rope.c's rope_inv_freq
** (which follows transformers' rope init functions operation by operation;
** see there for why each cast and each reciprocal is where it is). */
static float inv_freq(int64_t i, const RopeKey *k)
{
    float e = (float)(2 * i) / (float)k->n_rot;
    float inv = 1.0f / (float)pow((double)(float)k->theta, (double)e);
    float factor = (float)k->factor;

    if (k->scaling == RAD_ROPE_SCALING_LINEAR) return inv / factor;
    if (k->scaling == RAD_ROPE_SCALING_YARN) {
        double lo, hi;
        rad_rope_yarn_range(k->theta, k->n_rot, k->orig_ctx, k->beta_fast, k->beta_slow,
                            k->truncate == RAD_ROPE_TRUNCATE_ON, &lo, &hi);
        float pos_freq = (float)pow((double)(float)k->theta, (double)e);
        float interp = 1.0f / (factor * pos_freq);
        float ramp = ((float)i - (float)lo) / (float)(hi - lo);
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        float extrap_share = 1.0f - ramp;
        return interp * (1.0f - extrap_share) + inv * extrap_share;
    }
    if (k->scaling != RAD_ROPE_SCALING_LLAMA3) return inv;

    const float two_pi = (float)6.28318530717958647692;
    double orig = (double)k->orig_ctx;
    float wavelen = (1.0f / inv) * two_pi;
    int is_low = wavelen > (float)(orig / k->low_ff);
    int is_high = wavelen < (float)(orig / k->high_ff);
    float scaled = is_low ? inv / factor : inv;
    if (is_low || is_high) return scaled;

    float s = ((1.0f / wavelen) * (float)k->orig_ctx - (float)k->low_ff) / (float)(k->high_ff - k->low_ff);
    return (1.0f - s) * scaled / factor + s * scaled;
}

static const float *inv_freq_table(const RopeKey *k)
{
    RopeTable *t = &rope_cache;
    if (!t->valid || memcmp(&t->key, k, sizeof *k) != 0) {
        for (int64_t i = 0; i < k->n_rot / 2; i++) t->inv[i] = inv_freq(i, k);
        t->key = *k;
        t->valid = 1;
    }
    return t->inv;
}

typedef struct RopeJob {
    const RadTensor *x;
    const int32_t *pos;
    const float *inv;
    float attn;                 /* YaRN's factor on cos and sin, else 1 */
    int64_t M, n_head, hd, half;
    int neox;
    int n_tasks;
    const CpuVecOps *vec;
} RopeJob;

static void rope_task(void *ctx, int t)
{
    const RopeJob *j = ctx;
    float angle[ROPE_MAX_HALF], c[ROPE_MAX_HALF], s[ROPE_MAX_HALF];
    int64_t m0 = cpu_task_start(j->M, j->n_tasks, t), m1 = cpu_task_start(j->M, j->n_tasks, t + 1);
    for (int64_t m = m0; m < m1; m++) {
        float p = (float)j->pos[m];
        for (int64_t i = 0; i < j->half; i++) angle[i] = p * j->inv[i];
        j->vec->sincos(angle, c, s, j->half);
        if (j->attn != 1.0f)
            for (int64_t i = 0; i < j->half; i++) {
                c[i] *= j->attn;
                s[i] *= j->attn;
            }
        float *row = rad_act_row(j->x, m);
        for (int64_t h = 0; h < j->n_head; h++) {
            if (j->neox) j->vec->rope_neox(row + h * j->hd, c, s, j->half);
            else j->vec->rope_adjacent(row + h * j->hd, c, s, j->half);
        }
    }
}

int cpu_rope(const RadKernelArgs *a)
{
    int64_t M = rad_op_rows(a);
    int64_t n_head = a->param[RAD_ROPE_N_HEAD].i, hd = a->param[RAD_ROPE_HEAD_DIM].i;
    int64_t n_rot = a->param[RAD_ROPE_N_ROT].i, mode = a->param[RAD_ROPE_MODE].i;
    const RadTensor *x = &a->operand[RAD_ROPE_X];
    const RadTensor *positions = &a->operand[RAD_ROPE_POSITIONS];
    RopeKey key;
    int rc;

    /* The checks and codes every library makes (kernels/ops). */
    if ((rc = rad_check_rope(a))) return rc;
    memset(&key, 0, sizeof key);        /* padding too: the key is compared with memcmp */
    key.n_rot = n_rot;
    key.theta = a->param[RAD_ROPE_THETA].f;
    key.scaling = a->param[RAD_ROPE_SCALING].i;
    key.factor = a->param[RAD_ROPE_FACTOR].f;
    key.low_ff = a->param[RAD_ROPE_LOW_FREQ_FACTOR].f;
    key.high_ff = a->param[RAD_ROPE_HIGH_FREQ_FACTOR].f;
    key.orig_ctx = a->param[RAD_ROPE_ORIG_CTX].i;
    if (key.scaling == RAD_ROPE_SCALING_YARN) {
        key.beta_fast = a->param[RAD_ROPE_BETA_FAST].f;
        key.beta_slow = a->param[RAD_ROPE_BETA_SLOW].f;
        key.truncate = a->param[RAD_ROPE_TRUNCATE].i;
    }
    if (n_rot / 2 > ROPE_MAX_HALF) return RAD_E_UNSUPPORTED;

    /* FACTORS: the unscaled table (cached), then pair i divided by its factor */
    float scaled[ROPE_MAX_HALF];
    const float *inv;
    if (key.scaling == RAD_ROPE_SCALING_FACTORS) {
        const float *f = a->operand[RAD_ROPE_FREQ_FACTORS].data;
        key.scaling = RAD_ROPE_SCALING_NONE;
        const float *base = inv_freq_table(&key);
        for (int64_t i = 0; i < n_rot / 2; i++) scaled[i] = base[i] / f[i];
        inv = scaled;
    } else {
        inv = inv_freq_table(&key);
    }
    RopeJob j = {
        .x = x, .pos = positions->data, .inv = inv, .M = M, .n_head = n_head,
        .hd = hd, .half = n_rot / 2, .neox = mode == RAD_ROPE_MODE_NEOX, .vec = cpu_vec(), .attn = 1.0f,
    };
    if (key.scaling == RAD_ROPE_SCALING_YARN)
        j.attn = (float)rad_rope_yarn_attn(a->param[RAD_ROPE_ATTN_FACTOR].f, key.factor);
    j.n_tasks = cpu_task_count(a, M, n_head * n_rot + 16 * j.half, ROPE_MIN_WORK);
    cpu_parallel(a, j.n_tasks, rope_task, &j);
    return RAD_OK;
}
