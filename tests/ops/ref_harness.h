/*
** ref_harness.h: building kernel calls by hand for tests/ops.
**
** A test names the op, sets parameters and operands by their schema names
** and launches the row the library exports for that op: exactly the path the
** core takes, so a test pins what the core will get.  Looking arguments up
** by name (not by the positions in rad_ops.h) means a mistake in those
** positions shows up here instead of being repeated by the test.
**
** Included by one test file; everything is static.
*/
#ifndef REF_HARNESS_H
#define REF_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../kernels/rad_kernel.h"

extern const RadKernelLibrary rad_kernel_library;

typedef struct Call {
    const RadKernelRow *row;
    RadKernelArgs args;
} Call;

static const RadOpSchema *find_schema(const char *op)
{
    for (int i = 0; i < rad_kernel_library.n_schemas; i++)
        if (strcmp(rad_kernel_library.schemas[i].op, op) == 0) return &rad_kernel_library.schemas[i];
    fail_msg("no schema for op %s", op);
    return NULL;
}

static const RadKernelRow *find_row(const char *op)
{
    for (int i = 0; i < rad_kernel_library.n_rows; i++)
        if (strcmp(rad_kernel_library.rows[i].op, op) == 0) return &rad_kernel_library.rows[i];
    fail_msg("no row for op %s", op);
    return NULL;
}

/* A call of `op` with M rows and everything else zero. */
static Call call_new(const char *op, int64_t M)
{
    Call c;
    memset(&c, 0, sizeof c);
    c.row = find_row(op);
    c.args.struct_size = (int)sizeof c.args;
    c.args.schema = find_schema(op);
    c.args.param[0].i = M;
    return c;
}

static int param_at(const Call *c, const char *name)
{
    for (int i = 0; i < c->args.schema->n_params; i++)
        if (strcmp(c->args.schema->params[i].name, name) == 0) return i;
    fail_msg("op %s has no parameter %s", c->args.schema->op, name);
    return -1;
}

static int operand_at(const Call *c, const char *name)
{
    for (int i = 0; i < c->args.schema->n_operands; i++)
        if (strcmp(c->args.schema->operands[i].name, name) == 0) return i;
    fail_msg("op %s has no operand %s", c->args.schema->op, name);
    return -1;
}

static void set_i(Call *c, const char *name, int64_t v)
{
    int i = param_at(c, name);
    assert_int_not_equal(c->args.schema->params[i].type, RAD_PARAM_FLOAT);
    c->args.param[i].i = v;
}

static void set_f(Call *c, const char *name, double v)
{
    int i = param_at(c, name);
    assert_int_equal(c->args.schema->params[i].type, RAD_PARAM_FLOAT);
    c->args.param[i].f = v;
}

/* An f32 activation of `rows` rows, `stride` floats apart (>= cols). */
static void set_act_strided(Call *c, const char *name, float *data, int64_t rows, int64_t cols,
                            int64_t stride)
{
    RadTensor *t = &c->args.operand[operand_at(c, name)];
    t->data = data;
    t->enc = RAD_ENC_F32;
    t->rank = 2;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->row_bytes = stride * (int64_t)sizeof(float);
}

static void set_act(Call *c, const char *name, float *data, int64_t rows, int64_t cols)
{
    set_act_strided(c, name, data, rows, cols, cols);
}

static void set_index(Call *c, const char *name, int32_t *data, int64_t n)
{
    RadTensor *t = &c->args.operand[operand_at(c, name)];
    t->data = data;
    t->enc = RAD_ENC_I32;
    t->rank = 1;
    t->shape[0] = n;
    t->row_bytes = sizeof(int32_t);
}

/* A weight [rows, cols] in `enc`, rows `row_bytes` apart; rows == 0 makes it
** a vector of cols (rank 1), as a norm's weight is stored. */
static void set_weight(Call *c, const char *name, const void *data, int enc, int64_t rows,
                       int64_t cols, int64_t row_bytes)
{
    RadTensor *t = &c->args.operand[operand_at(c, name)];
    t->data = (void *)data;
    t->enc = enc;
    t->rank = rows ? 2 : 1;
    t->shape[0] = rows ? rows : cols;
    t->shape[1] = rows ? cols : 0;
    t->row_bytes = row_bytes;
}

static inline int run(Call *c) { return c->row->launch(&c->args); }

/* A tiny deterministic generator: uniform in [-1, 1). */
static float rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

static inline void fill(float *x, int64_t n, uint32_t seed)
{
    for (int64_t i = 0; i < n; i++) x[i] = rnd(&seed);
}

/* |got - want| within tol relative to max(1, |want|). */
#define assert_close(got, want, tol)                                                          \
    do {                                                                                      \
        double g_ = (got), w_ = (want), s_ = fabs(w_) > 1 ? fabs(w_) : 1;                     \
        if (!(fabs(g_ - w_) <= (tol) * s_))                                                   \
            fail_msg("%s = %.9g, want %.9g (line %d)", #got, g_, w_, __LINE__);                \
    } while (0)

#endif /* REF_HARNESS_H */
