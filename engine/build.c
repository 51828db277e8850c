/*
** build.c: the builder behind rad_decl_*.
**
** A plugin's declare calls land here and become tables: weights (bound to the
** container's bytes when running, to the name map when converting), buffers
** with their liveness, KV groups, and ops with a kernel chosen for every band
** of their row range.  Declare never stops at the first problem: each one is
** recorded, and rad_builder_finish reports them all at once, so a user sees
** every missing tensor or kernel in one run.
*/
#include "engine_internal.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The smallest declaration structs of architecture ABI 2: every field the
** version began with.  A plugin built against a later header of the same
** version may pass a larger struct; the fields past what this core knows
** are ignored, and the fields past what the plugin knew read as zero. */
#define WEIGHT_DECL_MIN (offsetof(RadWeightDecl, source) + sizeof(const char *))
#define BUFFER_DECL_MIN (offsetof(RadBufferDecl, derive) + sizeof(const char *))
#define KV_DECL_MIN (offsetof(RadKvGroupDecl, state_cols) + sizeof(int64_t))

/* Room for a name in a message. */
#define RAD_NAME_LIMIT 512

static void problem(RadBuilder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copy a plugin's declaration struct into `full` zero-filled bytes.  0, or
** -1 with a problem naming `what` when its struct_size is below `min` (a
** plugin that forgot RAD_SIZED, or one built for an older ABI that the
** version check let through). */
static int read_decl(RadBuilder *b, const char *what, const char *type, void *dst, size_t full, const void *src,
                     size_t min)
{
    int size = *(const int *)src;
    memset(dst, 0, full);
    if (size < (int)min) {
        problem(b, "%s: its %s has struct_size %d, below this ABI's %zu (set it with RAD_SIZED)", what, type, size, min);
        return -1;
    }
    memcpy(dst, src, (size_t)size < full ? (size_t)size : full);
    return 0;
}

/* ------------------------------------------------------------ helpers */

/* Grow a declaration table by doubling.  An allocation that fails marks the
** builder out of memory: declare goes on (its calls then do nothing that
** needs the table) and finish reports RAD_E_NOMEM, so a plugin never sees a
** crash for a failed allocation. */
#define GROW(b, arr, n, cap, fail)                                            \
    do {                                                                      \
        if ((n) == (cap)) {                                                   \
            int new_cap = (cap) ? (cap) * 2 : 16;                             \
            void *grown = (cap) > INT32_MAX / 4 ? NULL                        \
                        : realloc((arr), (size_t)new_cap * sizeof *(arr));    \
            if (!grown) {                                                     \
                (b)->oom = 1;                                                 \
                return (fail);                                                \
            }                                                                 \
            (arr) = grown;                                                    \
            (cap) = new_cap;                                                  \
        }                                                                     \
    } while (0)

/* Append a formatted line to a list of lines.  The list grows by doubling
** (its capacity is implied by n: 16, then the next power of two), so a
** declaration with a problem per tensor of thousands of layers stays linear. */
static void add_line(RadBuilder *b, char ***lines, int *n, const char *fmt, va_list ap)
{
    char *line = NULL;
    if (vasprintf(&line, fmt, ap) < 0) {
        b->oom = 1;
        return;
    }
    if (*n == 0 || (*n >= 16 && (*n & (*n - 1)) == 0)) {
        size_t cap = *n == 0 ? 16 : (size_t)*n * 2;
        char **grown = *n > INT32_MAX / 4 ? NULL : realloc(*lines, cap * sizeof **lines);
        if (!grown) {
            free(line);
            b->oom = 1;
            return;
        }
        *lines = grown;
    }
    (*lines)[(*n)++] = line;
}

static void problem(RadBuilder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_line(b, &b->problems, &b->n_problems, fmt, ap);
    va_end(ap);
}

int rad_decl_fail(RadBuilder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_line(b, &b->problems, &b->n_problems, fmt, ap);
    va_end(ap);
    return RAD_E_ARG;
}

void rad_note(RadBuilder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_line(b, &b->notes, &b->n_notes, fmt, ap);
    va_end(ap);
}

void rad_builder_init(RadBuilder *b, int mode, const RadModelMeta *meta, const RadBuildCtx *ctx)
{
    memset(b, 0, sizeof *b);
    b->mode = mode;
    b->meta = meta;
    b->ctx = ctx;
    b->logits = -1;
}

void rad_builder_free(RadBuilder *b)
{
    for (int i = 0; i < b->n_weights; i++) {
        RadWeightEntry *w = &b->weights[i];
        free(w->name);
        free(w->source);
        for (int s = 0; s < w->n_map_sources; s++) free(w->map_sources[s]);
        free(w->map_sources);
        for (int c = 0; c < w->n_copies; c++) free(w->copies[c].data);
        free(w->copies);
        free(w->slice_data);
    }
    for (int i = 0; i < b->n_buffers; i++) {
        free(b->buffers[i].name);
        free(b->buffers[i].derive);
    }
    for (int i = 0; i < b->n_kv; i++) free(b->kv[i].name);
    for (int i = 0; i < b->n_ops; i++) {
        free(b->ops[i].op);
        free(b->ops[i].weights);
        free(b->ops[i].uses);
    }
    for (int i = 0; i < b->n_problems; i++) free(b->problems[i]);
    for (int i = 0; i < b->n_notes; i++) free(b->notes[i]);
    for (int i = 0; i < b->n_aliases; i++) { free(b->alias_from[i]); free(b->alias_to[i]); }
    free(b->alias_from);
    free(b->alias_to);
    rad_name_index_free(&b->weight_index);
    rad_name_index_free(&b->buffer_index);
    free(b->weights);
    free(b->buffers);
    free(b->kv);
    free(b->ops);
    free(b->layer_kv);
    free(b->problems);
    free(b->notes);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------ weights */

rad_weight rad_builder_find_weight(const RadBuilder *b, const char *name)
{
    return rad_name_index_get(&b->weight_index, name);
}

static void shape_text(const int64_t *shape, int rank, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

int rad_slice_name(char *buf, size_t size, const char *name, int64_t e)
{
    int n = snprintf(buf, size, "%s%c%lld", name, RAD_SLICE_SEPARATOR, (long long)e);
    return n < 0 || (size_t)n >= size ? -1 : n;
}

/* Bind a stack the file holds slice by slice (NAME@0 .. NAME@n-1): every
** slice present, each of the stack's shape less dim 0, all in one encoding.
** Returns 0 when the file has no NAME@0 (the caller reports the stack
** missing), 1 when bound or a problem was reported. */
static int bind_slices(RadBuilder *b, RadWeightEntry *w, const char *stored)
{
    const size_t cap = strlen(stored) + 24;
    char *slice = malloc(cap);
    if (!slice) {
        problem(b, "%s: out of memory binding '%s'", b->container->path, stored);
        return 1;
    }
    if (rad_slice_name(slice, cap, stored, 0) < 0 || !rad_container_find(b->container, slice)) {
        free(slice);
        return 0;
    }
    const int64_t n = w->d.n_slices;
    const void **data = calloc((size_t)n, sizeof *data);
    if (!data) {
        problem(b, "%s: out of memory binding the %lld slices of '%s'", b->container->path, (long long)n, stored);
        free(slice);
        return 1;
    }
    int enc = -1;
    for (int64_t e = 0; e < n; e++) {
        rad_slice_name(slice, cap, stored, e);
        const RadContainerTensor *t = rad_container_find(b->container, slice);
        if (!t) {
            problem(b, "%s: tensor '%s' is missing (slice %lld of %lld of '%s'): the file is damaged; convert it again",
                    b->container->path, slice, (long long)e, (long long)n, stored);
            free(data);
            free(slice);
            return 1;
        }
        int same_shape = t->rank == w->d.rank - 1;
        for (int i = 0; same_shape && i < t->rank; i++) same_shape = t->shape[i] == w->d.shape[i + 1];
        if (!same_shape || (enc >= 0 && t->enc != enc) || (w->d.enc >= 0 && t->enc != w->d.enc)) {
            char want[96], have[96];
            shape_text(w->d.shape + 1, w->d.rank - 1, want, sizeof want);
            shape_text(t->shape, t->rank, have, sizeof have);
            const RadEncodingInfo *got = rad_encoding_info(t->enc);
            problem(b, "%s: tensor '%s' has shape %s as %s; each slice of '%s' must be %s in one encoding",
                    b->container->path, slice, have, got ? got->name : "?", stored, want);
            free(data);
            free(slice);
            return 1;
        }
        enc = t->enc;
        data[e] = t->data;
    }
    w->present = 1;
    w->enc = enc;
    w->data = NULL;
    w->slice_data = data;
    free(slice);
    w->row_bytes = rad_encoding_row_bytes(enc, w->d.shape[w->d.rank - 1]);
    return 1;
}

/* Bind a declared weight to the container's tensor, checking what the plugin
** expects against what the file holds. */
static void bind_to_container(RadBuilder *b, RadWeightEntry *w)
{
    const char *stored = w->source ? w->source : w->name;
    const RadContainerTensor *t = rad_container_find(b->container, stored);
    if (!t && w->d.n_slices > 0 && bind_slices(b, w, stored)) return;
    if (!t) {
        if (!w->d.optional)
            problem(b, "%s: tensor '%s' is missing: the file was converted for another model or is damaged; convert it again",
                    b->container->path, stored);
        return;
    }
    char want[96], have[96];
    int same_shape = t->rank == w->d.rank;
    for (int i = 0; same_shape && i < t->rank; i++) same_shape = t->shape[i] == w->d.shape[i];
    if (!same_shape) {
        shape_text(w->d.shape, w->d.rank, want, sizeof want);
        shape_text(t->shape, t->rank, have, sizeof have);
        problem(b, "%s: tensor '%s' has shape %s, the model's metadata needs %s", b->container->path,
                stored, have, want);
        return;
    }
    if (w->d.enc >= 0 && t->enc != w->d.enc) {
        const RadEncodingInfo *e = rad_encoding_info(t->enc), *d = rad_encoding_info(w->d.enc);
        problem(b, "%s: tensor '%s' is stored as %s, plugin expects %s", b->container->path, stored,
                e ? e->name : "?", d ? d->name : "?");
        return;
    }
    w->present = 1;
    w->enc = t->enc;
    w->data = t->data;
    w->row_bytes = t->rank >= 2 ? rad_encoding_row_bytes(t->enc, t->shape[t->rank - 1])
                                : (int64_t)t->size;
}

rad_weight rad_decl_weight(RadBuilder *b, const char *name, const RadWeightDecl *decl)
{
    RadWeightDecl full;
    const RadWeightDecl *d = &full;
    char what[RAD_NAME_LIMIT];
    snprintf(what, sizeof what, "weight '%s'", name);
    if (read_decl(b, what, "RadWeightDecl", &full, sizeof full, decl, WEIGHT_DECL_MIN) != 0) return -1;
    if (rad_builder_find_weight(b, name) >= 0) {
        problem(b, "plugin declares weight '%s' twice", name);
        return -1;
    }
    if (d->rank < 1 || d->rank > 4) {
        problem(b, "weight '%s': rank %d is not 1..4", name, d->rank);
        return -1;
    }
    for (int i = 0; i < d->rank; i++)
        if (d->shape[i] <= 0) {
            problem(b, "weight '%s': dimension %d is %lld (the model's metadata is missing or wrong)",
                    name, i, (long long)d->shape[i]);
            return -1;
        }
    /* A stack of slices is its dim 0: each slice is one expert's matrix (or
    ** vector) and moves as group + e, so the groups must not wrap. */
    if (d->n_slices < 0 || (d->n_slices > 0 && (d->rank < 2 || d->shape[0] != d->n_slices ||
                                                d->group < 0 || d->group > INT32_MAX - d->n_slices))) {
        problem(b, "weight '%s': a stack of %lld slices needs rank 2..4 with dim 0 of %lld and a group "
                "in 0..%lld (has rank %d, dim 0 of %lld, group %d)", name, (long long)d->n_slices,
                (long long)d->n_slices, (long long)(INT32_MAX - d->n_slices), d->rank, (long long)d->shape[0],
                (int)d->group);
        return -1;
    }
    GROW(b, b->weights, b->n_weights, b->cap_weights, -1);
    RadWeightEntry *w = &b->weights[b->n_weights];
    memset(w, 0, sizeof *w);
    w->name = strdup(name);
    w->d = *d;
    w->d.source = NULL;
    w->source = d->source ? strdup(d->source) : NULL;
    w->enc = d->enc;
    if (!w->name || (d->source && !w->source) || rad_name_index_put(&b->weight_index, w->name, b->n_weights) != RAD_OK) {
        free(w->name);
        free(w->source);
        b->oom = 1;
        problem(b, "out of memory declaring weight '%s'", name);
        return -1;
    }
    if (b->mode == RAD_BUILD_RUN) bind_to_container(b, w);
    return b->n_weights++;
}

int rad_weight_encoding(RadBuilder *b, rad_weight w)
{
    if (w < 0 || w >= b->n_weights) return -1;
    return b->weights[w].enc;
}

int rad_weight_present(RadBuilder *b, rad_weight w)
{
    if (w < 0 || w >= b->n_weights) return 0;
    return b->mode == RAD_BUILD_RUN ? b->weights[w].present : 1;
}

int rad_decl_name_map(RadBuilder *b, const char *weight, int mode, const char *const *sources,
                      int n_sources)
{
    rad_weight id = rad_builder_find_weight(b, weight);
    if (id < 0) return rad_decl_fail(b, "name map names '%s', which is not a declared weight", weight);
    const int flags = mode & (RAD_MAP_TRANSPOSED | RAD_MAP_ROWS_EVEN | RAD_MAP_ROWS_ODD);
    mode &= ~flags;
    if (mode != RAD_MAP_COPY && mode != RAD_MAP_CONCAT)
        return rad_decl_fail(b, "name map for '%s': unknown mode %d", weight, mode);
    if (flags && (mode != RAD_MAP_COPY || (flags & RAD_MAP_ROWS_EVEN && flags & RAD_MAP_ROWS_ODD)))
        return rad_decl_fail(b, "name map for '%s': layout flags 0x%x need COPY and at most one of the row "
                             "selections", weight, flags);
    if (n_sources < 1) return rad_decl_fail(b, "name map for '%s' has no source", weight);
    RadWeightEntry *w = &b->weights[id];
    if (w->map_mode) return rad_decl_fail(b, "name map for '%s' given twice", weight);
    /* COPY sources gain the builder's aliases, after every source as given. */
    int n_alt = 0;
    if (mode == RAD_MAP_COPY)
        for (int i = 0; i < n_sources; i++)
            for (int a = 0; a < b->n_aliases; a++)
                n_alt += strncmp(sources[i], b->alias_from[a], strlen(b->alias_from[a])) == 0;
    w->map_sources = calloc((size_t)(n_sources + n_alt), sizeof *w->map_sources);
    if (!w->map_sources) {
        b->oom = 1;
        return rad_decl_fail(b, "out of memory for the name map of '%s'", weight);
    }
    int n = 0;
    for (int i = 0; i < n_sources; i++) w->map_sources[n++] = strdup(sources[i]);
    for (int i = 0; i < n_sources && n_alt; i++)
        for (int a = 0; a < b->n_aliases; a++) {
            size_t len = strlen(b->alias_from[a]);
            if (strncmp(sources[i], b->alias_from[a], len) != 0) continue;
            char *alt = malloc(strlen(b->alias_to[a]) + strlen(sources[i] + len) + 1);
            if (alt) sprintf(alt, "%s%s", b->alias_to[a], sources[i] + len);
            w->map_sources[n++] = alt;
        }
    w->n_map_sources = n;
    w->map_mode = mode;
    w->map_flags = flags;
    for (int i = 0; i < n; i++)
        if (!w->map_sources[i]) {
            b->oom = 1;
            return rad_decl_fail(b, "out of memory for the name map of '%s'", weight);
        }
    return RAD_OK;
}

int rad_decl_name_alias(RadBuilder *b, const char *from, const char *to)
{
    if (!from || !to || !*from) return rad_decl_fail(b, "name alias: an empty prefix");
    char **f = realloc(b->alias_from, (size_t)(b->n_aliases + 1) * sizeof *f);
    if (f) b->alias_from = f;
    char **t = realloc(b->alias_to, (size_t)(b->n_aliases + 1) * sizeof *t);
    if (t) b->alias_to = t;
    char *from_copy = strdup(from), *to_copy = strdup(to);
    if (!f || !t || !from_copy || !to_copy) {
        free(from_copy);
        free(to_copy);
        b->oom = 1;
        return rad_decl_fail(b, "out of memory for a name alias");
    }
    b->alias_from[b->n_aliases] = from_copy;
    b->alias_to[b->n_aliases] = to_copy;
    b->n_aliases++;
    return RAD_OK;
}

/* ------------------------------------------------------------ buffers */

rad_buf rad_decl_buffer(RadBuilder *b, const char *name, const RadBufferDecl *decl)
{
    RadBufferDecl full;
    const RadBufferDecl *d = &full;
    char what[RAD_NAME_LIMIT];
    snprintf(what, sizeof what, "buffer '%s'", name);
    if (read_decl(b, what, "RadBufferDecl", &full, sizeof full, decl, BUFFER_DECL_MIN) != 0) return -1;
    if (rad_name_index_get(&b->buffer_index, name) >= 0) {
        problem(b, "plugin declares buffer '%s' twice", name);
        return -1;
    }
    int64_t row_bytes = rad_encoding_row_bytes(d->enc, d->cols);
    if (d->rows <= 0 || row_bytes <= 0 || d->rows > (INT64_MAX / 2) / row_bytes) {
        problem(b, "buffer '%s': %lld x %lld of encoding %d is not a valid size", name,
                (long long)d->rows, (long long)d->cols, d->enc);
        return -1;
    }
    if (d->kind == RAD_BUF_DERIVED) {
        static const char *known[] = {"token_ids", "positions", "out_ids"};
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof *known; i++)
            if (d->derive && strcmp(d->derive, known[i]) == 0) ok = 1;
        if (!ok || d->enc != RAD_ENC_I32 || d->cols != 1) {
            problem(b, "buffer '%s': DERIVED needs derive = token_ids|positions|out_ids, i32, one column",
                    name);
            return -1;
        }
    } else if (d->kind != RAD_BUF_TRANSIENT && d->kind != RAD_BUF_PERSIST) {
        problem(b, "buffer '%s': unknown kind %d", name, d->kind);
        return -1;
    }
    GROW(b, b->buffers, b->n_buffers, b->cap_buffers, -1);
    RadBufferEntry *e = &b->buffers[b->n_buffers];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->d = *d;
    e->d.derive = NULL;
    e->derive = d->derive ? strdup(d->derive) : NULL;
    e->row_bytes = row_bytes;
    e->bytes = d->rows * row_bytes;
    e->first = e->last = -1;
    if (!e->name || (d->derive && !e->derive) || rad_name_index_put(&b->buffer_index, e->name, b->n_buffers) != RAD_OK) {
        free(e->name);
        free(e->derive);
        b->oom = 1;
        problem(b, "out of memory declaring buffer '%s'", name);
        return -1;
    }
    return b->n_buffers++;
}

/* ---------------------------------------------------------- KV groups */

rad_kv rad_decl_kv_group(RadBuilder *b, const char *name, const RadKvGroupDecl *decl)
{
    RadKvGroupDecl full;
    const RadKvGroupDecl *d = &full;
    char what[RAD_NAME_LIMIT];
    snprintf(what, sizeof what, "KV group '%s'", name);
    if (read_decl(b, what, "RadKvGroupDecl", &full, sizeof full, decl, KV_DECL_MIN) != 0) return -1;
    switch (d->kind) {
    case RAD_KV_FULL:
    case RAD_KV_WINDOW:
        if (d->n_head_kv <= 0 || d->head_dim <= 0 || (d->kind == RAD_KV_WINDOW && d->window <= 0)) {
            problem(b, "KV group '%s': heads %d, head_dim %d, window %d are not valid", name, d->n_head_kv,
                    d->head_dim, d->window);
            return -1;
        }
        break;
    case RAD_KV_LINEAR:
    case RAD_KV_CONV: {
        int64_t row = rad_encoding_row_bytes(d->state_enc, d->state_cols);
        if (d->state_rows <= 0 || row <= 0 || d->state_rows > (INT64_C(1) << 40) / row ||
            (d->state_enc != RAD_ENC_F32 && d->state_enc != RAD_ENC_F16 && d->state_enc != RAD_ENC_BF16)) {
            problem(b, "KV group '%s': a state of %lld x %lld elements of encoding %d is not valid (f32, f16 or bf16)",
                    name, (long long)d->state_rows, (long long)d->state_cols, d->state_enc);
            return -1;
        }
        break;
    }
    default:
        problem(b, "KV group '%s': kind %d is not served (FULL, WINDOW, LINEAR and CONV are)", name, d->kind);
        return -1;
    }
    GROW(b, b->kv, b->n_kv, b->cap_kv, -1);
    b->kv[b->n_kv].name = strdup(name);
    if (!b->kv[b->n_kv].name) {
        b->oom = 1;
        return -1;
    }
    b->kv[b->n_kv].d = *d;
    return b->n_kv++;
}

int rad_bind_layer_kv(RadBuilder *b, int layer, rad_kv group)
{
    if (group < 0 || group >= b->n_kv || layer < 0 || layer > 1 << 20)
        return rad_decl_fail(b, "rad_bind_layer_kv(layer %d, group %d): invalid", layer, group);
    if (layer >= b->n_layer_kv) {
        rad_kv *grown = realloc(b->layer_kv, (size_t)(layer + 1) * sizeof *grown);
        if (!grown) {
            b->oom = 1;
            return RAD_E_NOMEM;
        }
        for (int i = b->n_layer_kv; i <= layer; i++) grown[i] = -1;
        b->layer_kv = grown;
        b->n_layer_kv = layer + 1;
    }
    if (b->layer_kv[layer] >= 0) return rad_decl_fail(b, "layer %d bound to a KV group twice", layer);
    b->layer_kv[layer] = group;
    return RAD_OK;
}

int rad_kv_block_size(RadBuilder *b, rad_kv group)
{
    (void)group;
    return b->kv_block_size > 0 ? b->kv_block_size : 16;
}

/* ---------------------------------------------------------------- ops */

static int schema_has_kv(const RadOpSchema *s)
{
    for (int i = 0; i < s->n_operands; i++)
        if (s->operands[i].role == RAD_ROLE_KV) return 1;
    return 0;
}

rad_op rad_decl_op(RadBuilder *b, const char *op, const RadParam *params, int n_params,
                   const rad_weight *weights, int n_weights)
{
    GROW(b, b->ops, b->n_ops, b->cap_ops, -1);
    RadOpEntry *e = &b->ops[b->n_ops];
    memset(e, 0, sizeof *e);
    e->op = strdup(op);
    e->range_index = -1;
    if (n_weights > 0) e->weights = malloc((size_t)n_weights * sizeof *weights);
    if (!e->op || (n_weights > 0 && !e->weights)) {
        free(e->op);
        free(e->weights);
        b->oom = 1;
        return -1;
    }
    if (n_weights > 0) {
        memcpy(e->weights, weights, (size_t)n_weights * sizeof *weights);
        e->n_weights = n_weights;
    }
    for (int i = 0; i < n_weights; i++)
        if (weights[i] < 0 || weights[i] >= b->n_weights)
            problem(b, "op %s #%d reads an undeclared weight", op, b->n_ops);
    rad_op id = b->n_ops++;
    if (b->mode != RAD_BUILD_RUN) return id;

    e->schema = rad_select_schema(b->libs, b->n_libs, op);
    if (!e->schema) {
        problem(b, "op %s: no kernel library in the order given knows this op", op);
        return id;
    }
    if (n_params > RAD_MAX_PARAMS) {
        problem(b, "op %s: %d parameters given, at most %d are allowed", op, n_params, RAD_MAX_PARAMS);
        e->schema = NULL;
        return id;
    }
    if (rad_select_bind_params(e->schema, params, n_params, e->params, &e->range_index) != RAD_OK) {
        problem(b, "%s", rad_error_message());
        e->schema = NULL;
        return id;
    }
    e->n_params = e->schema->n_params;
    int n = rad_select_bands(b->libs, b->n_libs, op, e->params, e->n_params, e->range_index, e->bands,
                             RAD_MAX_BANDS);
    if (n < 0) {
        problem(b, "%s", rad_error_message());
        return id;
    }
    e->n_bands = n;
    for (int k = 0; k < n; k++) {
        const RadBand *band = &e->bands[k];
        if (!band->row) {
            e->missing = 1;     /* reported at finish unless the plugin asks */
            continue;
        }
        if (schema_has_kv(e->schema) && band->row->kv_block_size > 0) {
            if (b->kv_block_size && b->kv_block_size != band->row->kv_block_size)
                problem(b, "op %s: kernel %s reads KV blocks of %d, another attention kernel reads %d",
                        op, band->row->name, band->row->kv_block_size, b->kv_block_size);
            else
                b->kv_block_size = band->row->kv_block_size;
        }
    }
    return id;
}

static int add_uses(RadBuilder *b, rad_op op, const rad_buf *bufs, int n)
{
    if (op < 0 || op >= b->n_ops) return rad_decl_fail(b, "reads/writes of an undeclared op %d", op);
    RadOpEntry *e = &b->ops[op];
    rad_buf *grown = n > 0 ? realloc(e->uses, (size_t)(e->n_uses + n) * sizeof *grown) : e->uses;
    if (n > 0 && !grown) {
        b->oom = 1;
        return RAD_E_NOMEM;
    }
    e->uses = grown;
    for (int i = 0; i < n; i++) {
        if (bufs[i] < 0 || bufs[i] >= b->n_buffers) {
            problem(b, "op %s #%d names an undeclared buffer", e->op, op);
            continue;
        }
        e->uses[e->n_uses++] = bufs[i];
        RadBufferEntry *buf = &b->buffers[bufs[i]];
        if (buf->first < 0 || op < buf->first) buf->first = op;
        if (op > buf->last) buf->last = op;
    }
    return RAD_OK;
}

int rad_op_reads(RadBuilder *b, rad_op op, const rad_buf *bufs, int n) { return add_uses(b, op, bufs, n); }
int rad_op_writes(RadBuilder *b, rad_op op, const rad_buf *bufs, int n) { return add_uses(b, op, bufs, n); }

int rad_op_resolved(RadBuilder *b, rad_op op)
{
    if (op < 0 || op >= b->n_ops) return 0;
    if (b->mode != RAD_BUILD_RUN) return 1;
    RadOpEntry *e = &b->ops[op];
    e->asked = 1;
    if (!e->schema || e->n_bands == 0) return 0;
    for (int k = 0; k < e->n_bands; k++)
        if (!e->bands[k].row) return 0;
    return 1;
}

int rad_op_declared(RadBuilder *b, const char *op)
{
    if (b->mode != RAD_BUILD_RUN) return 1;
    return rad_select_schema(b->libs, b->n_libs, op) != NULL;
}

int rad_declare_logits(RadBuilder *b, rad_buf logits)
{
    if (logits < 0 || logits >= b->n_buffers) return rad_decl_fail(b, "logits buffer is not declared");
    b->logits = logits;
    return RAD_OK;
}

/* ------------------------------------------------------------- finish */

/* FNV-1a: the problem lines' hash for counting repeats. */
static uint64_t line_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* For each problem, how many times its text occurs, stored at its first
** occurrence (0 at the repeats): one pass over an open-addressing table of
** first indices, so thousands of layers missing the same tensors cost
** linear time.  NULL when out of memory. */
static int *count_repeats(const RadBuilder *b)
{
    size_t cap = 16;
    while (cap < (size_t)b->n_problems * 2) cap *= 2;
    int *slot = malloc(cap * sizeof *slot);
    int *count = calloc((size_t)b->n_problems, sizeof *count);
    if (!slot || !count) {
        free(slot);
        free(count);
        return NULL;
    }
    for (size_t i = 0; i < cap; i++) slot[i] = -1;
    for (int i = 0; i < b->n_problems; i++) {
        size_t at = (size_t)line_hash(b->problems[i]) & (cap - 1);
        while (slot[at] >= 0 && strcmp(b->problems[slot[at]], b->problems[i]) != 0) at = (at + 1) & (cap - 1);
        if (slot[at] < 0) slot[at] = i;
        count[slot[at]]++;
    }
    free(slot);
    return count;
}

int rad_builder_finish(RadBuilder *b, const char *what)
{
    /* A plugin whose declare failed stopped before its logits: saying so
    ** would hide why it failed. */
    if (b->logits < 0) {
        if (!b->declare_failed) problem(b, "the plugin declared no logits buffer");
    } else if (b->buffers[b->logits].d.cols != b->meta->n_vocab || b->buffers[b->logits].d.enc != RAD_ENC_F32)
        problem(b, "logits buffer '%s' must be f32 with n_vocab (%d) columns", b->buffers[b->logits].name,
                b->meta->n_vocab);
    for (int l = 0; l < b->n_layer_kv; l++)
        if (b->layer_kv[l] < 0) problem(b, "layer %d is bound to no KV group", l);
    for (int i = 0; i < b->n_ops; i++) {
        const RadOpEntry *e = &b->ops[i];
        if (!e->missing || e->asked) continue;
        for (int k = 0; k < e->n_bands; k++)
            if (!e->bands[k].row)
                problem(b, "op %s (%s %lld..%lld): no kernel: %s", e->op,
                        e->schema->params[e->range_index].name, (long long)e->bands[k].lo,
                        (long long)e->bands[k].hi, e->bands[k].why[0] ? e->bands[k].why : "no library has rows for it");
    }
    if (b->oom)
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory while declaring the model", what);
    if (b->n_problems == 0) return RAD_OK;

    /* One line per distinct problem; repeats (the same miss in every layer)
    ** are counted, not listed.  The message stays whole: what does not fit
    ** in about 14 kB is counted. */
    int *count = count_repeats(b);
    char *text = malloc(16384);
    if (!count || !text) {
        free(count);
        free(text);
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory while reporting the model's problems", what);
    }
    size_t at = 0;
    int distinct = 0, untold = 0;
    for (int i = 0; i < b->n_problems; i++) {
        if (!count[i]) continue;
        distinct++;
        size_t len = strlen(b->problems[i]);
        if (at + len + 32 > 14000) {
            untold++;
            continue;
        }
        at += (size_t)sprintf(text + at, "\n  %s", b->problems[i]);
        if (count[i] > 1) at += (size_t)sprintf(text + at, " (x%d)", count[i]);
    }
    if (untold) sprintf(text + at, "\n  ... and %d more", untold);
    free(count);
    int code = RAD_E_UNSUPPORTED;
    for (int i = 0; i < b->n_problems; i++)
        if (strstr(b->problems[i], "no kernel")) code = RAD_E_NOKERNEL;
    rad_error_set(code, "%s: %d problem%s found while declaring the model:%s", what, distinct,
                  distinct == 1 ? "" : "s", text);
    free(text);
    return code;
}

/* ------------------------------------------------------------ printing */

void rad_builder_print_graph(const RadBuilder *b, const RadKernelLibrary *const *libs, FILE *f)
{
    fprintf(f, "graph: %d weights, %d buffers, %d KV groups, %d ops; library order:", b->n_weights,
            b->n_buffers, b->n_kv, b->n_ops);
    for (int l = 0; l < b->n_libs; l++) fprintf(f, " %s", libs[l]->name);
    fprintf(f, "\n");
    for (int i = 0; i < b->n_notes; i++) fprintf(f, "note: %s\n", b->notes[i]);
    for (int i = 0; i < b->n_ops; i++) {
        const RadOpEntry *e = &b->ops[i];
        fprintf(f, "%4d %-13s", i, e->op);
        for (int p = 0; e->schema && p < e->n_params; p++) {
            const RadParam *pr = &e->params[p];
            if (pr->kind == RAD_PK_RANGE) fprintf(f, " %s=%lld..%lld", pr->name, (long long)pr->lo, (long long)pr->hi);
            else if (pr->kind == RAD_PK_FLOAT) fprintf(f, " %s=%g", pr->name, pr->f);
            else fprintf(f, " %s=%lld", pr->name, (long long)pr->i);
        }
        for (int w = 0; w < e->n_weights; w++)
            if (e->weights[w] >= 0) fprintf(f, " w:%s", b->weights[e->weights[w]].name);
        fprintf(f, "\n");
        for (int k = 0; k < e->n_bands; k++)
            fprintf(f, "       band %lld..%lld -> %s\n", (long long)e->bands[k].lo,
                    (long long)e->bands[k].hi, e->bands[k].row ? e->bands[k].why : "NO KERNEL");
    }
}
