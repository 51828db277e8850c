/*
** issue.c: rad_issue, the one door from a plugin's step to a kernel.
**
** A step issues its declared ops in declaration order; each issue finds the
** band its row count falls in, binds every operand to bytes (buffers in the
** arena, weights mapped or relayouted, a layer's KV view, host index data),
** checks what the arena plan assumed, and launches the chosen row.  The first
** failure sticks: every later issue of the step returns the same code.
*/
#include "engine_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- issue */

int rad_step_fail(RadCtx *c, int code, const char *fmt, ...)
{
    if (c->status) return c->status;
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    c->status = code < 0 ? code : RAD_E_STATE;
    rad_error_set(c->status, "%s", text);
    return c->status;
}

int rad_step_status(const RadCtx *c) { return c->status; }

static int bind_operand(RadCtx *c, const RadOpEntry *e, const RadKernelRow *row, rad_op op, int i,
                        const RadOperand *o, int64_t rows, RadKernelArgs *a)
{
    RadEngine *eng = c->e;
    const RadOperandSchema *s = &e->schema->operands[i];
    RadTensor *t = &a->operand[i];
    memset(t, 0, sizeof *t);
    if (o->kind == RAD_OPND_NONE) {
        if (!s->optional)
            return rad_step_fail(c, RAD_E_ARG, "op %s: operand '%s' is required", e->op, s->name);
        return RAD_OK;
    }
    switch (s->role) {
    case RAD_ROLE_WEIGHT: {
        if (o->kind != RAD_OPND_WEIGHT || o->id < 0 || o->id >= eng->b.n_weights)
            return rad_step_fail(c, RAD_E_ARG, "op %s: operand '%s' must be a weight", e->op, s->name);
        const RadWeightEntry *w = &eng->b.weights[o->id];
        if (!w->present) {
            if (!s->optional)
                return rad_step_fail(c, RAD_E_ARG, "op %s: weight '%s' is absent", e->op, w->name);
            return RAD_OK;      /* an optional weight the file lacks: operand stays absent */
        }
        rad_weight_tensor(w, t);
        const RadRelayoutCopy *copy = rad_relayout_copy(w, row);
        if (copy) {
            t->data = copy->data;
            t->slices = NULL;   /* the copy holds every slice, end to end */
            t->layout = RAD_LAYOUT_KERNEL;
        }
        return RAD_OK;
    }
    case RAD_ROLE_KV:
        if (o->kind != RAD_OPND_KV || o->id < 0 || o->id >= eng->kv.n_layers)
            return rad_step_fail(c, RAD_E_ARG, "op %s: operand '%s' must be a KV layer", e->op, s->name);
        a->kv_operand[i] = &eng->views[o->id];
        if (!a->kv) a->kv = a->kv_operand[i];
        return RAD_OK;
    case RAD_ROLE_INDEX:
        if (o->kind == RAD_OPND_INDEX) {
            if (o->n_index < rows)
                return rad_step_fail(c, RAD_E_SHAPE, "op %s: index '%s' has %lld entries for %lld rows",
                                     e->op, s->name, (long long)o->n_index, (long long)rows);
            t->data = (void *)o->index;
            t->enc = RAD_ENC_I32;
            t->rank = 1;
            t->shape[0] = o->n_index;
            t->row_bytes = 4;
            return RAD_OK;
        }
        /* a DERIVED i32 buffer serves as an index too */
        __attribute__((fallthrough));
    default: {
        if (o->kind != RAD_OPND_BUF || o->id < 0 || o->id >= eng->b.n_buffers)
            return rad_step_fail(c, RAD_E_ARG, "op %s: operand '%s' must be a buffer", e->op, s->name);
        const RadBufferEntry *buf = &eng->b.buffers[o->id];
        /* The arena plan trusted the declared reads/writes; an undeclared
        ** use could land on bytes another buffer owns at this point. */
        if (buf->first >= 0 && buf->d.kind == RAD_BUF_TRANSIENT && (op < buf->first || op > buf->last))
            return rad_step_fail(c, RAD_E_STATE,
                                 "op %s #%d uses buffer '%s' without declaring it (rad_op_reads/rad_op_writes)",
                                 e->op, op, buf->name);
        if ((s->role == RAD_ROLE_OUT || s->role == RAD_ROLE_INOUT) && rows > buf->d.rows)
            return rad_step_fail(c, RAD_E_SHAPE, "op %s: %lld rows into buffer '%s' of %lld", e->op,
                                 (long long)rows, buf->name, (long long)buf->d.rows);
        t->data = buf->data;
        t->enc = buf->d.enc;
        t->rank = 2;
        t->shape[0] = buf->d.rows;
        t->shape[1] = buf->d.cols;
        t->row_bytes = buf->row_bytes;
        return RAD_OK;
    }
    }
}

int rad_issue(RadCtx *c, rad_op op, int64_t rows, const RadOperand *operands, int n)
{
    if (c->status) return c->status;
    RadEngine *eng = c->e;
    if (op < 0 || op >= eng->b.n_ops) return rad_step_fail(c, RAD_E_ARG, "issue of undeclared op %d", op);
    const RadOpEntry *e = &eng->b.ops[op];
    if (rows <= 0) return RAD_E_SHAPE;          /* not a call; the step goes on */
    if (op < c->last_op)
        return rad_step_fail(c, RAD_E_STATE, "op %s #%d issued after #%d: ops must be issued in declaration order",
                             e->op, op, c->last_op);
    c->last_op = op;
    const RadBand *band = NULL;
    for (int k = 0; k < e->n_bands; k++)
        if (rows >= e->bands[k].lo && rows <= e->bands[k].hi) band = &e->bands[k];
    if (!band || !band->row)
        return rad_step_fail(c, RAD_E_RANGE, "op %s #%d: %lld rows is outside its declared range", e->op, op,
                             (long long)rows);
    if (n != e->schema->n_operands)
        return rad_step_fail(c, RAD_E_ARG, "op %s: %d operands given, its schema has %d", e->op, n,
                             e->schema->n_operands);

    RadKernelArgs a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.schema = e->schema;
    for (int p = 0; p < e->n_params; p++) {
        const RadParam *pr = &e->params[p];
        if (pr->kind == RAD_PK_FLOAT) a.param[p].f = pr->f;
        else a.param[p].i = p == e->range_index ? rows : pr->i;
    }
    for (int i = 0; i < n; i++)
        if (bind_operand(c, e, band->row, op, i, &operands[i], rows, &a)) return c->status;
    if (eng->experts) {
        int rc = rad_experts_bind(eng->experts, &eng->b, operands, n, rows, &a);
        if (rc) return rad_step_fail(c, rc, "op %s #%d: %s", e->op, op, rad_error_message());
    }
    a.pool = eng->pool;
    a.n_threads = rad_pool_threads(eng->pool);
    a.parallel_for = rad_pool_parallel_for;
    a.scratch = eng->scratch;
    int rc = band->row->launch(&a);
    if (rc)
        return rad_step_fail(c, rc, "op %s #%d (kernel %s, %lld rows) failed: %s", e->op, op, band->row->name,
                             (long long)rows, rad_strerror(rc));
    return RAD_OK;
}
