/*
** convert_view.c: checkpoint tensors kept in another layout than the weight
** they become, for the converter (convert.c).
**
** Two things a plain copy of rows cannot do, both for gpt-oss:
**   - a name map entry with layout flags (rad_core.h: RAD_MAP_TRANSPOSED,
**     RAD_MAP_ROWS_EVEN / _ODD): the checkpoint keeps a stack of matrices
**     as [E, in, out] for x @ W, and gate and up interleaved in one tensor
**     (gate_up_proj, gate at the even columns), so the weight is a
**     transposed, every-second-row view of it;
**   - Hugging Face's MXFP4 form of a tensor NAME: NAME_blocks, u8
**     [..., R, G, 16], and NAME_scales, u8 [..., R, G], a matrix of R rows
**     of G * 32 elements stored [out, in].  Element 2i of a block is the low
**     nibble of byte i, element 2i + 1 the high nibble (transformers'
**     convert_moe_packed_tensors); the value is E2M1[nibble] * 2^(scale -
**     127).  GGUF's mxfp4 has the same scale byte and codes, but byte i
**     holds elements i and i + 16, so a block is repacked, never
**     requantized, when the weight is mxfp4 too.
** The view is read element by element (an index map, no copy of the whole
** tensor), one output row at a time, then encoded as the weight asks.
*/
#include "engine_internal.h"
#include "convert_view.h"
#include "../formats/checkpoint.h"
#include "../formats/quantize.h"
#include "rad_half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MX_BLOCK 32       /* elements per MXFP4 block */
#define MX_BYTES 17       /* GGUF's block: the scale byte, 16 code bytes */

/* E2M1's sixteen values, in code order (sign in the top bit). */
static const float e2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

typedef struct View {
    const char *name;           /* the map's source name */
    const RadStTensor *t;       /* the float tensor, or the blocks */
    const RadStTensor *scales;  /* MXFP4 form: the scales; else NULL */
    int rank;
    int64_t shape[8];           /* as read: after the transpose */
    int transposed;
} View;

/* A checkpoint tensor NAME + suffix, or NULL. */
static const RadStTensor *suffixed(const RadCheckpoint *ck, const char *name, const char *suffix)
{
    char full[512];
    if ((size_t)snprintf(full, sizeof full, "%s%s", name, suffix) >= sizeof full) return NULL;
    return rad_checkpoint_tensor(ck, full);
}

int rad_convert_view_applies(const RadCheckpoint *ck, const RadWeightEntry *w)
{
    if (w->map_flags) return 1;
    if (w->map_mode != RAD_MAP_COPY) return 0;
    for (int i = 0; i < w->n_map_sources; i++)
        if (rad_checkpoint_tensor(ck, w->map_sources[i])) return 0;
    for (int i = 0; i < w->n_map_sources; i++)
        if (suffixed(ck, w->map_sources[i], "_blocks")) return 1;
    return 0;
}

static void shape_text(const int64_t *shape, int rank, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

/* Check an MXFP4 pair and fill the view's shape from it. */
static int open_mxfp4(View *v, const RadStTensor *blocks, const RadStTensor *scales)
{
    char have[96], want[96];
    if (!scales)
        return rad_error_set(RAD_E_FORMAT, "tensor '%s' has no '%s_scales' beside it: the MXFP4 checkpoint is "
                             "incomplete; download it again", blocks->name, v->name);
    if (strcmp(blocks->dtype, "U8") != 0 || strcmp(scales->dtype, "U8") != 0)
        return rad_error_set(RAD_E_FORMAT, "MXFP4 tensors '%s' (%s) and '%s' (%s) must both be U8: the checkpoint "
                             "is damaged", blocks->name, blocks->dtype, scales->name, scales->dtype);
    int ok = blocks->rank >= 3 && blocks->shape[blocks->rank - 1] == MX_BLOCK / 2 &&
             scales->rank == blocks->rank - 1;
    for (int d = 0; ok && d < scales->rank; d++) ok = scales->shape[d] == blocks->shape[d];
    if (!ok) {
        shape_text(blocks->shape, blocks->rank, have, sizeof have);
        shape_text(blocks->shape, blocks->rank - 1, want, sizeof want);
        char got[96];
        shape_text(scales->shape, scales->rank, got, sizeof got);
        return rad_error_set(RAD_E_FORMAT, "MXFP4 tensor '%s' has shape %s, so its blocks %s want scales %s, but "
                             "'%s' has %s: the checkpoint is damaged", blocks->name, have, have, want, scales->name,
                             got);
    }
    /* E8M0's 0xFF is NaN: no weight holds one */
    const uint8_t *s = scales->data;
    for (uint64_t i = 0; i < scales->size; i++)
        if (s[i] == 0xFF)
            return rad_error_set(RAD_E_FORMAT, "MXFP4 scale tensor '%s' holds 0xFF (NaN) at element %llu: the "
                                 "checkpoint is damaged", scales->name, (unsigned long long)i);
    v->t = blocks;
    v->scales = scales;
    v->rank = blocks->rank - 1;
    memcpy(v->shape, blocks->shape, sizeof v->shape);
    v->shape[v->rank - 1] = blocks->shape[blocks->rank - 2] * MX_BLOCK;
    return RAD_OK;
}

/* Find the weight's source in either form; RAD_E_NOTFOUND when none. */
static int open_view(const RadCheckpoint *ck, const RadWeightEntry *w, View *v)
{
    memset(v, 0, sizeof *v);
    for (int i = 0; i < w->n_map_sources; i++) {
        const RadStTensor *t = rad_checkpoint_tensor(ck, w->map_sources[i]);
        if (!t) continue;
        v->name = w->map_sources[i];
        if (t->enc != RAD_ENC_F32 && t->enc != RAD_ENC_F16 && t->enc != RAD_ENC_BF16)
            return rad_error_set(RAD_E_FORMAT, "tensor '%s' is %s; only F32, F16, BF16 and MXFP4 (_blocks and "
                                 "_scales) checkpoints convert", t->name, t->dtype);
        v->t = t;
        v->rank = t->rank;
        memcpy(v->shape, t->shape, sizeof v->shape);
        v->transposed = (w->map_flags & RAD_MAP_TRANSPOSED) && t->rank >= 2;
        if (v->transposed) {
            v->shape[t->rank - 1] = t->shape[t->rank - 2];
            v->shape[t->rank - 2] = t->shape[t->rank - 1];
        }
        return RAD_OK;
    }
    for (int i = 0; i < w->n_map_sources; i++) {
        const RadStTensor *blocks = suffixed(ck, w->map_sources[i], "_blocks");
        if (!blocks) continue;
        v->name = w->map_sources[i];
        return open_mxfp4(v, blocks, suffixed(ck, w->map_sources[i], "_scales"));
    }
    return RAD_E_NOTFOUND;
}

/* Element `col` of row `row` (a flat index over all dims but the last) of
** the view as read. */
static float view_at(const View *v, int64_t row, int64_t col)
{
    const int64_t cols = v->shape[v->rank - 1];
    if (v->scales) {
        const int64_t groups = cols / MX_BLOCK, g = col / MX_BLOCK, i = col % MX_BLOCK;
        const uint8_t byte = ((const uint8_t *)v->t->data)[(row * groups + g) * (MX_BLOCK / 2) + i / 2];
        const int scale = ((const uint8_t *)v->scales->data)[row * groups + g];
        return ldexpf(e2m1[i & 1 ? byte >> 4 : byte & 15], scale - 127);
    }
    int64_t at = row * cols + col;
    if (v->transposed) {
        /* row = outer * rows + r of the transposed view: (outer, col, r) as stored */
        const int64_t rows = v->shape[v->rank - 2], outer = row / rows, r = row % rows;
        at = (outer * cols + col) * rows + r;
    }
    uint16_t h;
    switch (v->t->enc) {
    case RAD_ENC_F32: {
        float f;
        memcpy(&f, (const uint8_t *)v->t->data + at * 4, 4);
        return f;
    }
    case RAD_ENC_F16:
        memcpy(&h, (const uint8_t *)v->t->data + at * 2, 2);
        return rad_f16_to_f32(h);
    default:
        memcpy(&h, (const uint8_t *)v->t->data + at * 2, 2);
        return rad_bf16_to_f32(h);
    }
}

/* An MXFP4 view's block g of `row`, repacked into GGUF's layout at out. */
static void repack_block(const View *v, int64_t row, int64_t g, uint8_t *out)
{
    const int64_t groups = v->shape[v->rank - 1] / MX_BLOCK;
    const uint8_t *b = (const uint8_t *)v->t->data + (row * groups + g) * (MX_BLOCK / 2);
    uint8_t code[MX_BLOCK];
    for (int i = 0; i < MX_BLOCK / 2; i++) {
        code[2 * i] = b[i] & 15;
        code[2 * i + 1] = b[i] >> 4;
    }
    out[0] = ((const uint8_t *)v->scales->data)[row * groups + g];
    for (int j = 0; j < MX_BLOCK / 2; j++) out[1 + j] = (uint8_t)(code[j] | code[j + MX_BLOCK / 2] << 4);
}

void *rad_convert_view(const RadCheckpoint *ck, const RadWeightEntry *w, int enc, uint64_t *size, int *absent)
{
    View v;
    *absent = 0;
    int rc = open_view(ck, w, &v);
    if (rc == RAD_E_NOTFOUND) {
        rad_error_clear();
        if (w->d.optional) {
            *absent = 1;
            return NULL;
        }
        rad_error_set(RAD_E_FORMAT, "tensor '%s' (or its MXFP4 form '%s_blocks' + '_scales') is missing from the "
                      "checkpoint (needed for '%s')", w->map_sources[0], w->map_sources[0], w->name);
        return NULL;
    }
    if (rc) return NULL;

    /* The selection: every second entry of the output dimension. */
    const int parity = w->map_flags & RAD_MAP_ROWS_ODD ? 1 : 0;
    const int select = (w->map_flags & (RAD_MAP_ROWS_EVEN | RAD_MAP_ROWS_ODD)) != 0;
    const int od = w->d.n_slices > 0 && w->d.rank >= 2 ? 1 : 0;
    int ok = v.rank == w->d.rank;
    for (int d = 0; ok && d < v.rank; d++) ok = v.shape[d] == (select && d == od ? 2 : 1) * w->d.shape[d];
    if (!ok) {
        /* name the shape the checkpoint's tensor should have, in its own layout */
        int64_t src[8];
        int src_rank = w->d.rank;
        memcpy(src, w->d.shape, sizeof w->d.shape);
        if (select) src[od] *= 2;
        if (v.transposed) {
            int64_t t = src[src_rank - 1];
            src[src_rank - 1] = src[src_rank - 2];
            src[src_rank - 2] = t;
        }
        if (v.scales) {                     /* blocks: [..., rows, cols / 32, 16] */
            src[src_rank] = MX_BLOCK / 2;
            src[src_rank - 1] /= MX_BLOCK;
            src_rank++;
        }
        char have[96], want[96], decl[96];
        shape_text(v.t->shape, v.t->rank, have, sizeof have);
        shape_text(src, src_rank, want, sizeof want);
        shape_text(w->d.shape, w->d.rank, decl, sizeof decl);
        rad_error_set(RAD_E_FORMAT, "tensor '%s' has shape %s; the config makes '%s' %s, read from a tensor of shape "
                      "%s%s%s%s", v.t->name, have, w->name, decl, want, v.transposed ? " (stored [in, out])" : "",
                      select ? (parity ? " (its odd entries of dim 1)" : " (its even entries of dim 1)") : "",
                      v.scales ? " (MXFP4 blocks)" : "");
        return NULL;
    }

    const int rank = w->d.rank;
    const int64_t cols = w->d.shape[rank - 1];
    int64_t rows = 1;
    for (int d = 0; d + 1 < rank; d++) rows *= w->d.shape[d];
    const int64_t row_bytes = rad_encoding_row_bytes(enc, cols);
    if (row_bytes < 0) {
        rad_error_set(RAD_E_FORMAT, "'%s': rows of %lld elements cannot be encoded as %s", w->name, (long long)cols,
                      rad_encoding_info(enc) ? rad_encoding_info(enc)->name : "?");
        return NULL;
    }
    /* The selection on a row dimension moves whole rows; on the last
    ** dimension (a stacked bias [E, 2N]) it picks within a row. */
    const int select_cols = select && od == rank - 1;
    const int repack = v.scales && enc == RAD_ENC_MXFP4 && !select_cols;
    uint8_t *out = malloc((size_t)(rows * row_bytes));
    float *buf = malloc((size_t)cols * sizeof *buf);
    if (!out || !buf) {
        free(out);
        free(buf);
        rad_error_set(RAD_E_NOMEM, "'%s': out of memory", w->name);
        return NULL;
    }
    for (int64_t r = 0; r < rows; r++) {
        /* the source row: dim od's index doubled (plus the parity) when it selects rows */
        int64_t src_row = r;
        if (select && !select_cols) {
            int64_t inner = 1;
            for (int d = od + 1; d + 1 < rank; d++) inner *= w->d.shape[d];
            const int64_t n = w->d.shape[od], outer = r / (n * inner), i = r / inner % n, rest = r % inner;
            src_row = (outer * 2 * n + 2 * i + parity) * inner + rest;
        }
        uint8_t *dst = out + r * row_bytes;
        if (repack) {
            for (int64_t g = 0; g < cols / MX_BLOCK; g++) repack_block(&v, src_row, g, dst + g * MX_BYTES);
            continue;
        }
        for (int64_t c = 0; c < cols; c++) buf[c] = view_at(&v, src_row, select_cols ? 2 * c + parity : c);
        if (rad_convert_row(RAD_ENC_F32, buf, enc, dst, cols)) {
            rad_error_prefix(RAD_E_FORMAT, "'%s' from '%s': ", w->name, v.t->name);
            free(out);
            free(buf);
            return NULL;
        }
    }
    free(buf);
    *size = (uint64_t)(rows * row_bytes);
    return out;
}
