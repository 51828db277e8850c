/*
** recording_builder.c: the core's plugin-facing functions, as a recorder.
**
** This is a test double that stands in for the core (engine/build.c and
** engine/issue.c) when an architecture plugin is tested on its own.  Every
** function rad_core.h declares is implemented here; each call a plugin makes
** is written to a log as one canonical line (recording_builder.h lists the
** forms) and kept in tables the tests query.  Nothing is selected, planned,
** mapped or run, so a test sees exactly what the plugin declared and issued,
** and a change to a plugin or a block shows up as a changed line.
**
** The few checks made here are the ones the real builder makes on the same
** calls (a weight declared twice, a name map for an undeclared weight);
** they are recorded as failures, as the core would report them.
*/
#include "recording_builder.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- tables */

typedef struct RecWeight {
    char *name;
    RadWeightDecl d;            /* d.source points at `source` below */
    char *source;
    int map_mode;               /* 0 until rad_decl_name_map names it */
    int n_map_sources;
    char *first_map_source;
} RecWeight;

typedef struct RecBuffer {
    char *name;
    RadBufferDecl d;
} RecBuffer;

typedef struct RecKv {
    char *name;
    RadKvGroupDecl d;
} RecKv;

typedef struct RecOp {
    char *name;
    RadParam *params;           /* names copied */
    int n_params;
    rad_weight *weights;
    int n_weights;
    rad_buf *uses;              /* reads and writes, in call order */
    int n_uses;
} RecOp;

typedef struct RecIssue {
    rad_op op;
    int64_t rows;
    RadOperand *operands;       /* index pointers cleared */
    int n_operands;
} RecIssue;

/* A list of owned strings: the log, the failures, the notes. */
typedef struct RecLines {
    char **line;
    int n, cap;
} RecLines;

struct RadBuilder {
    RecLines log, fails, notes, unresolved;
    RecWeight *weights;
    int n_weights, cap_weights;
    RecBuffer *buffers;
    int n_buffers, cap_buffers;
    RecKv *kv;
    int n_kv, cap_kv;
    RecOp *ops;
    int n_ops, cap_ops;
    RecIssue *issues;
    int n_issues, cap_issues;
    void *instance;             /* the plugin's, released with the builder */
    RadArchReleaseFn release;
};

struct RadCtx {
    RadBuilder *b;
    int status;                 /* the first rad_step_fail's code, or 0 */
};

/* ------------------------------------------------------------ helpers */

/* Memory trouble in a test double is not worth recovering from. */
static void *must(void *p)
{
    if (!p) {
        fprintf(stderr, "recording_builder: out of memory\n");
        abort();
    }
    return p;
}

static char *copy_text(const char *s) { return s ? must(strdup(s)) : NULL; }

/* Make room for one more element in a growing array. */
static void *grow(void *array, int n, int *cap, size_t elem)
{
    if (n < *cap) return array;
    *cap = *cap ? *cap * 2 : 16;
    return must(realloc(array, (size_t)*cap * elem));
}

static void lines_add(RecLines *l, char *owned)
{
    l->line = grow(l->line, l->n, &l->cap, sizeof *l->line);
    l->line[l->n++] = owned;
}

static void lines_free(RecLines *l)
{
    for (int i = 0; i < l->n; i++) free(l->line[i]);
    free(l->line);
    memset(l, 0, sizeof *l);
}

/* A line is written to a memory stream, then handed to the log whole. */
typedef struct Line {
    FILE *f;
    char *text;
    size_t len;
} Line;

static FILE *line_open(Line *l)
{
    l->text = NULL;
    l->len = 0;
    l->f = must(open_memstream(&l->text, &l->len));
    return l->f;
}

static void line_to_log(RadBuilder *b, Line *l)
{
    fclose(l->f);
    lines_add(&b->log, l->text);
}

static char *vformat(const char *fmt, va_list ap)
{
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0) must(NULL);
    return text;
}

/* The shortest %g form that reads back as the same double, so 1e-06 prints
** as "1e-06" and 1/sqrt(32) keeps every digit it needs. */
static void put_double(FILE *f, double v)
{
    char text[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, v);
        if (strtod(text, NULL) == v) break;
    }
    fputs(text, f);
}

static void put_encoding(FILE *f, int enc)
{
    const RadEncodingInfo *e = rad_encoding_info(enc);
    if (e) fputs(e->name, f);
    else fprintf(f, "enc#%d", enc);
}

/* A name from one of the enums in rad_core.h, or the number itself. */
static void put_enum(FILE *f, int v, const char *const *names, int n_names)
{
    if (v >= 0 && v < n_names && names[v]) fputs(names[v], f);
    else fprintf(f, "#%d", v);
}

static const char *const access_names[] = {NULL, "per_token", "per_request", "conditional", "rare", "vocab"};
static const char *const shard_names[] = {"none", "row", "col"};
static const char *const buf_kind_names[] = {NULL, "transient", "persist", "derived"};
static const char *const kv_kind_names[] = {NULL, "full", "window", "linear", "conv", "ring"};
static const char *const map_mode_names[] = {NULL, "COPY", "CONCAT"};
#define N_NAMES(a) ((int)(sizeof(a) / sizeof *(a)))

static void put_weight(FILE *f, const RadBuilder *b, rad_weight w)
{
    if (w >= 0 && w < b->n_weights) fputs(b->weights[w].name, f);
    else fprintf(f, "#%d", w);
}

static void put_buffer(FILE *f, const RadBuilder *b, rad_buf buf)
{
    if (buf >= 0 && buf < b->n_buffers) fputs(b->buffers[buf].name, f);
    else fprintf(f, "#%d", buf);
}

static void put_op(FILE *f, const RadBuilder *b, rad_op op)
{
    if (op >= 0 && op < b->n_ops) fprintf(f, "%d %s", op, b->ops[op].name);
    else fprintf(f, "#%d ?", op);
}

/* A failure found here, worded as the real builder words it. */
static void record_fail(RadBuilder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record_fail(RadBuilder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = vformat(fmt, ap);
    va_end(ap);
    Line l;
    fprintf(line_open(&l), "fail %s", text);
    line_to_log(b, &l);
    lines_add(&b->fails, text);
}

/* -------------------------------------------------------- life cycle */

RadBuilder *rec_builder_new(void) { return must(calloc(1, sizeof(RadBuilder))); }

void rec_builder_own_instance(RadBuilder *b, void *instance, RadArchReleaseFn release)
{
    b->instance = instance;
    b->release = release;
}

void *rec_builder_instance(const RadBuilder *b) { return b->instance; }

void rec_builder_free(RadBuilder *b)
{
    if (!b) return;
    if (b->release) b->release(b->instance);
    for (int i = 0; i < b->n_weights; i++) {
        free(b->weights[i].name);
        free(b->weights[i].source);
        free(b->weights[i].first_map_source);
    }
    for (int i = 0; i < b->n_buffers; i++) {
        free(b->buffers[i].name);
        free((char *)b->buffers[i].d.derive);
    }
    for (int i = 0; i < b->n_kv; i++) free(b->kv[i].name);
    for (int i = 0; i < b->n_ops; i++) {
        RecOp *op = &b->ops[i];
        for (int p = 0; p < op->n_params; p++) free((char *)op->params[p].name);
        free(op->name);
        free(op->params);
        free(op->weights);
        free(op->uses);
    }
    for (int i = 0; i < b->n_issues; i++) free(b->issues[i].operands);
    free(b->weights);
    free(b->buffers);
    free(b->kv);
    free(b->ops);
    free(b->issues);
    lines_free(&b->log);
    lines_free(&b->fails);
    lines_free(&b->notes);
    lines_free(&b->unresolved);
    free(b);
}

RadCtx *rec_ctx_new(RadBuilder *b)
{
    RadCtx *c = must(calloc(1, sizeof *c));
    c->b = b;
    return c;
}

void rec_ctx_free(RadCtx *c) { free(c); }

void rec_set_unresolved(RadBuilder *b, const char *op_name) { lines_add(&b->unresolved, copy_text(op_name)); }

/* The metadata lookups are the engine's own (engine/meta.c, linked in). */

/* ------------------------------------------------------------- weights */

rad_weight rec_find_weight(const RadBuilder *b, const char *name)
{
    for (int i = 0; i < b->n_weights; i++)
        if (strcmp(b->weights[i].name, name) == 0) return i;
    return -1;
}

rad_weight rad_decl_weight(RadBuilder *b, const char *name, const RadWeightDecl *d)
{
    if (d->struct_size != (int)sizeof *d) {
        record_fail(b, "weight '%s': struct_size %d, not %zu (RAD_SIZED)", name, d->struct_size, sizeof *d);
        return -1;
    }
    if (rec_find_weight(b, name) >= 0) {
        record_fail(b, "plugin declares weight '%s' twice", name);
        return -1;
    }
    b->weights = grow(b->weights, b->n_weights, &b->cap_weights, sizeof *b->weights);
    RecWeight *w = &b->weights[b->n_weights];
    memset(w, 0, sizeof *w);
    w->name = copy_text(name);
    w->source = copy_text(d->source);
    w->d = *d;
    w->d.source = w->source;

    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "weight %s enc=", name);
    put_encoding(f, d->enc);
    fprintf(f, " shape=[");
    for (int i = 0; i < d->rank && i < 4; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)d->shape[i]);
    fprintf(f, "] access=");
    put_enum(f, d->access, access_names, N_NAMES(access_names));
    fprintf(f, " group=%d optional=%d", d->group, d->optional);
    if (d->shard != RAD_SHARD_NONE) {
        fprintf(f, " shard=");
        put_enum(f, d->shard, shard_names, N_NAMES(shard_names));
    }
    if (d->n_row_parts > 0) {
        fprintf(f, " row_parts=");
        for (int i = 0; i < d->n_row_parts && i < RAD_MAX_ROW_PARTS; i++)
            fprintf(f, "%s%lld", i ? "," : "", (long long)d->row_parts[i]);
    }
    if (d->source) fprintf(f, " source=%s", d->source);
    line_to_log(b, &l);
    return b->n_weights++;
}

/* What a core answers before it has a container: the declared encoding. */
int rad_weight_encoding(RadBuilder *b, rad_weight w)
{
    if (w < 0 || w >= b->n_weights) return -1;
    return b->weights[w].d.enc;
}

int rad_weight_present(RadBuilder *b, rad_weight w)
{
    (void)b;
    (void)w;
    return 1;
}

int rad_decl_name_map(RadBuilder *b, const char *weight, int mode, const char *const *sources, int n_sources)
{
    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "map %s ", weight);
    put_enum(f, mode & 0xff, map_mode_names, N_NAMES(map_mode_names));
    if (mode & RAD_MAP_TRANSPOSED) fputs("+transposed", f);
    if (mode & RAD_MAP_ROWS_EVEN) fputs("+rows_even", f);
    if (mode & RAD_MAP_ROWS_ODD) fputs("+rows_odd", f);
    for (int i = 0; i < n_sources; i++) fprintf(f, " %s", sources[i]);
    line_to_log(b, &l);

    rad_weight id = rec_find_weight(b, weight);
    if (id < 0) {
        record_fail(b, "name map names '%s', which is not a declared weight", weight);
        return RAD_E_ARG;
    }
    RecWeight *w = &b->weights[id];
    if (w->map_mode) {
        record_fail(b, "name map for '%s' given twice", weight);
        return RAD_E_ARG;
    }
    w->map_mode = mode;
    w->n_map_sources = n_sources;
    w->first_map_source = n_sources > 0 ? copy_text(sources[0]) : NULL;
    return RAD_OK;
}

int rad_decl_name_alias(RadBuilder *b, const char *from, const char *to)
{
    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "alias %s %s", from, to);
    line_to_log(b, &l);
    return RAD_OK;
}

/* ------------------------------------------------------------- buffers */

rad_buf rad_decl_buffer(RadBuilder *b, const char *name, const RadBufferDecl *d)
{
    if (d->struct_size != (int)sizeof *d) {
        record_fail(b, "buffer '%s': struct_size %d, not %zu (RAD_SIZED)", name, d->struct_size, sizeof *d);
        return -1;
    }
    b->buffers = grow(b->buffers, b->n_buffers, &b->cap_buffers, sizeof *b->buffers);
    RecBuffer *buf = &b->buffers[b->n_buffers];
    buf->name = copy_text(name);
    buf->d = *d;
    buf->d.derive = copy_text(d->derive);

    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "buffer %s kind=", name);
    put_enum(f, d->kind, buf_kind_names, N_NAMES(buf_kind_names));
    fprintf(f, " enc=");
    put_encoding(f, d->enc);
    fprintf(f, " rows=%lld cols=%lld", (long long)d->rows, (long long)d->cols);
    if (d->derive) fprintf(f, " derive=%s", d->derive);
    line_to_log(b, &l);
    return b->n_buffers++;
}

/* ----------------------------------------------------------- KV groups */

rad_kv rad_decl_kv_group(RadBuilder *b, const char *name, const RadKvGroupDecl *d)
{
    if (d->struct_size != (int)sizeof *d) {
        record_fail(b, "KV group '%s': struct_size %d, not %zu (RAD_SIZED)", name, d->struct_size, sizeof *d);
        return -1;
    }
    b->kv = grow(b->kv, b->n_kv, &b->cap_kv, sizeof *b->kv);
    b->kv[b->n_kv].name = copy_text(name);
    b->kv[b->n_kv].d = *d;

    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "kv_group %s kind=", name);
    put_enum(f, d->kind, kv_kind_names, N_NAMES(kv_kind_names));
    fprintf(f, " n_head_kv=%d head_dim=%d window=%d", d->n_head_kv, d->head_dim, d->window);
    line_to_log(b, &l);
    return b->n_kv++;
}

int rad_bind_layer_kv(RadBuilder *b, int layer, rad_kv group)
{
    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "bind_kv layer=%d group=", layer);
    if (group >= 0 && group < b->n_kv) fputs(b->kv[group].name, f);
    else fprintf(f, "#%d", group);
    line_to_log(b, &l);
    return RAD_OK;
}

int rad_kv_block_size(RadBuilder *b, rad_kv group)
{
    (void)b;
    (void)group;
    return 16;
}

/* ----------------------------------------------------------------- ops */

rad_op rad_decl_op(RadBuilder *b, const char *op, const RadParam *params, int n_params,
                   const rad_weight *weights, int n_weights)
{
    b->ops = grow(b->ops, b->n_ops, &b->cap_ops, sizeof *b->ops);
    RecOp *e = &b->ops[b->n_ops];
    memset(e, 0, sizeof *e);
    e->name = copy_text(op);
    if (n_params > 0) {
        e->params = must(calloc((size_t)n_params, sizeof *e->params));
        for (int p = 0; p < n_params; p++) {
            e->params[p] = params[p];
            e->params[p].name = copy_text(params[p].name);
        }
        e->n_params = n_params;
    }
    if (n_weights > 0) {
        e->weights = must(calloc((size_t)n_weights, sizeof *e->weights));
        memcpy(e->weights, weights, (size_t)n_weights * sizeof *weights);
        e->n_weights = n_weights;
    }

    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "op %d %s", b->n_ops, op);
    for (int p = 0; p < n_params; p++) {
        const RadParam *pr = &params[p];
        fprintf(f, " %s=", pr->name);
        if (pr->kind == RAD_PK_INT) fprintf(f, "%lld", (long long)pr->i);
        else if (pr->kind == RAD_PK_RANGE) fprintf(f, "%lld..%lld", (long long)pr->lo, (long long)pr->hi);
        else if (pr->kind == RAD_PK_FLOAT) put_double(f, pr->f);
        else fprintf(f, "?kind%d", pr->kind);
    }
    for (int i = 0; i < n_weights; i++) {
        fputs(i ? "," : " weights=", f);
        put_weight(f, b, weights[i]);
    }
    line_to_log(b, &l);
    return b->n_ops++;
}

static int record_uses(RadBuilder *b, const char *verb, rad_op op, const rad_buf *bufs, int n)
{
    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "%s %d ", verb, op);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', f);
        put_buffer(f, b, bufs[i]);
    }
    line_to_log(b, &l);

    if (op < 0 || op >= b->n_ops) {
        record_fail(b, "reads/writes of an undeclared op %d", op);
        return RAD_E_ARG;
    }
    RecOp *e = &b->ops[op];
    e->uses = must(realloc(e->uses, (size_t)(e->n_uses + n + 1) * sizeof *e->uses));
    for (int i = 0; i < n; i++) e->uses[e->n_uses++] = bufs[i];
    return RAD_OK;
}

int rad_op_reads(RadBuilder *b, rad_op op, const rad_buf *bufs, int n) { return record_uses(b, "reads", op, bufs, n); }
int rad_op_writes(RadBuilder *b, rad_op op, const rad_buf *bufs, int n) { return record_uses(b, "writes", op, bufs, n); }

int rad_op_resolved(RadBuilder *b, rad_op op)
{
    if (op < 0 || op >= b->n_ops) return 0;
    for (int i = 0; i < b->unresolved.n; i++)
        if (strcmp(b->unresolved.line[i], b->ops[op].name) == 0) return 0;
    return 1;
}

int rad_op_declared(RadBuilder *b, const char *op)
{
    (void)b;
    (void)op;
    return 1;
}

int rad_declare_logits(RadBuilder *b, rad_buf logits)
{
    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "logits ");
    put_buffer(f, b, logits);
    line_to_log(b, &l);
    return RAD_OK;
}

int rad_decl_fail(RadBuilder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = vformat(fmt, ap);
    va_end(ap);
    Line l;
    fprintf(line_open(&l), "fail %s", text);
    line_to_log(b, &l);
    lines_add(&b->fails, text);
    return RAD_E_ARG;           /* what the real builder returns */
}

void rad_note(RadBuilder *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = vformat(fmt, ap);
    va_end(ap);
    Line l;
    fprintf(line_open(&l), "note %s", text);
    line_to_log(b, &l);
    lines_add(&b->notes, text);
}

/* --------------------------------------------------------------- steps */

int rad_issue(RadCtx *c, rad_op op, int64_t rows, const RadOperand *operands, int n)
{
    RadBuilder *b = c->b;
    Line l;
    FILE *f = line_open(&l);
    fprintf(f, "issue ");
    put_op(f, b, op);
    fprintf(f, " rows=%lld operands=", (long long)rows);
    for (int i = 0; i < n; i++) {
        const RadOperand *o = &operands[i];
        if (i) fputc(',', f);
        switch (o->kind) {
        case RAD_OPND_NONE: fputs("none", f); break;
        case RAD_OPND_BUF: fputs("buf:", f); put_buffer(f, b, o->id); break;
        case RAD_OPND_WEIGHT: fputs("weight:", f); put_weight(f, b, o->id); break;
        case RAD_OPND_KV: fprintf(f, "kv:%d", o->id); break;
        case RAD_OPND_INDEX: fprintf(f, "idx:%lld", (long long)o->n_index); break;
        default: fprintf(f, "?kind%d:%d", o->kind, o->id); break;
        }
    }
    line_to_log(b, &l);

    b->issues = grow(b->issues, b->n_issues, &b->cap_issues, sizeof *b->issues);
    RecIssue *is = &b->issues[b->n_issues++];
    is->op = op;
    is->rows = rows;
    is->n_operands = n;
    is->operands = must(calloc((size_t)(n > 0 ? n : 1), sizeof *is->operands));
    for (int i = 0; i < n; i++) {
        is->operands[i] = operands[i];
        is->operands[i].index = NULL;   /* the plugin's memory; not ours to keep */
    }

    if (c->status) return c->status;
    if (rows <= 0) return RAD_E_SHAPE;  /* "zero rows is not a call" */
    return RAD_OK;
}

int rad_step_fail(RadCtx *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = vformat(fmt, ap);
    va_end(ap);
    Line l;
    fprintf(line_open(&l), "step_fail %d %s", code, text);
    line_to_log(c->b, &l);
    free(text);
    if (!c->status) c->status = code < 0 ? code : RAD_E_STATE;
    return c->status;
}

int rad_step_status(const RadCtx *c) { return c->status; }

/* ------------------------------------------------------------- queries */

int rec_log_count(const RadBuilder *b) { return b->log.n; }
const char *rec_log_line(const RadBuilder *b, int i) { return i >= 0 && i < b->log.n ? b->log.line[i] : NULL; }

char *rec_log_text(const RadBuilder *b)
{
    Line l;
    FILE *f = line_open(&l);
    for (int i = 0; i < b->log.n; i++) fprintf(f, "%s\n", b->log.line[i]);
    fclose(f);
    return l.text;
}

int rec_weight_count(const RadBuilder *b) { return b->n_weights; }

const char *rec_weight_name(const RadBuilder *b, rad_weight w)
{
    return w >= 0 && w < b->n_weights ? b->weights[w].name : NULL;
}

const RadWeightDecl *rec_weight_decl(const RadBuilder *b, rad_weight w)
{
    return w >= 0 && w < b->n_weights ? &b->weights[w].d : NULL;
}

int rec_weight_map(const RadBuilder *b, rad_weight w, int *n_sources, const char **first)
{
    if (w < 0 || w >= b->n_weights) return 0;
    if (n_sources) *n_sources = b->weights[w].n_map_sources;
    if (first) *first = b->weights[w].first_map_source;
    return b->weights[w].map_mode;
}

int rec_op_count(const RadBuilder *b) { return b->n_ops; }
const char *rec_op_name(const RadBuilder *b, rad_op op) { return op >= 0 && op < b->n_ops ? b->ops[op].name : NULL; }

const RadParam *rec_op_param(const RadBuilder *b, rad_op op, const char *name)
{
    if (op < 0 || op >= b->n_ops) return NULL;
    for (int p = 0; p < b->ops[op].n_params; p++)
        if (strcmp(b->ops[op].params[p].name, name) == 0) return &b->ops[op].params[p];
    return NULL;
}

int rec_op_weight_count(const RadBuilder *b, rad_op op) { return op >= 0 && op < b->n_ops ? b->ops[op].n_weights : 0; }

rad_weight rec_op_weight(const RadBuilder *b, rad_op op, int i)
{
    if (op < 0 || op >= b->n_ops || i < 0 || i >= b->ops[op].n_weights) return -1;
    return b->ops[op].weights[i];
}

int rec_op_uses(const RadBuilder *b, rad_op op, rad_buf buf)
{
    if (op < 0 || op >= b->n_ops) return 0;
    for (int i = 0; i < b->ops[op].n_uses; i++)
        if (b->ops[op].uses[i] == buf) return 1;
    return 0;
}

int rec_buffer_count(const RadBuilder *b) { return b->n_buffers; }

const char *rec_buffer_name(const RadBuilder *b, rad_buf buf)
{
    return buf >= 0 && buf < b->n_buffers ? b->buffers[buf].name : NULL;
}

int rec_fail_count(const RadBuilder *b) { return b->fails.n; }
const char *rec_fail(const RadBuilder *b, int i) { return i >= 0 && i < b->fails.n ? b->fails.line[i] : NULL; }
int rec_note_count(const RadBuilder *b) { return b->notes.n; }
const char *rec_note(const RadBuilder *b, int i) { return i >= 0 && i < b->notes.n ? b->notes.line[i] : NULL; }

int rec_issue_count(const RadBuilder *b) { return b->n_issues; }
rad_op rec_issue_op(const RadBuilder *b, int i) { return i >= 0 && i < b->n_issues ? b->issues[i].op : -1; }
int64_t rec_issue_rows(const RadBuilder *b, int i) { return i >= 0 && i < b->n_issues ? b->issues[i].rows : -1; }

int rec_issue_operand_count(const RadBuilder *b, int i)
{
    return i >= 0 && i < b->n_issues ? b->issues[i].n_operands : 0;
}

RadOperand rec_issue_operand(const RadBuilder *b, int i, int k)
{
    if (i < 0 || i >= b->n_issues || k < 0 || k >= b->issues[i].n_operands) return RAD_NONE;
    return b->issues[i].operands[k];
}

int rec_issues_named(const RadBuilder *b, const char *op_name)
{
    int count = 0;
    for (int i = 0; i < b->n_issues; i++) {
        const char *name = rec_op_name(b, b->issues[i].op);
        count += name && strcmp(name, op_name) == 0;
    }
    return count;
}
