/*
** select.c: which kernel runs each op.
**
** The rule is short and absolute.  Libraries are tried in the order the user
** gave (cuda, cpu, ref by default); the first library with a row whose
** constraints hold supplies the op; inside that library the highest priority
** wins, and among equal priorities the row listed first.  The op's one ranged
** parameter (the row count M) is cut into bands at every edge the candidate
** rows' EQ/LE/GE constraints name, and each band is resolved on its own, so
** a library may serve decode with one kernel and prefill with another.
**
** Selection happens at declare time; a band nobody serves is recorded with
** the reason and the whole list is reported when declare ends.
*/
#include "engine_internal.h"

#include <stdlib.h>
#include <string.h>

const RadOpSchema *rad_select_schema(const RadKernelLibrary *const *libs, int n_libs, const char *op)
{
    for (int l = 0; l < n_libs; l++)
        for (int s = 0; s < libs[l]->n_schemas; s++)
            if (strcmp(libs[l]->schemas[s].op, op) == 0) return &libs[l]->schemas[s];
    return NULL;
}

static int kind_matches(int schema_type, int kind)
{
    switch (schema_type) {
    case RAD_PARAM_INT: return kind == RAD_PK_INT;
    case RAD_PARAM_FLOAT: return kind == RAD_PK_FLOAT;
    case RAD_PARAM_RANGE: return kind == RAD_PK_RANGE;
    }
    return 0;
}

static const char *type_name(int t)
{
    return t == RAD_PARAM_INT ? "an int" : t == RAD_PARAM_FLOAT ? "a float" : "a range";
}

int rad_select_bind_params(const RadOpSchema *s, const RadParam *params, int n,
                           RadParam *ordered, int *range_index)
{
    *range_index = -1;
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int j = 0; j < s->n_params; j++)
            if (strcmp(s->params[j].name, params[i].name) == 0) found = 1;
        if (!found)
            return rad_error_set(RAD_E_ARG, "op %s has no parameter '%s' (see docs/OPS.md)",
                                 s->op, params[i].name);
    }
    for (int j = 0; j < s->n_params; j++) {
        const RadParam *given = NULL;
        for (int i = 0; i < n; i++)
            if (strcmp(s->params[j].name, params[i].name) == 0) {
                if (given)
                    return rad_error_set(RAD_E_ARG, "op %s: parameter '%s' given twice", s->op,
                                         params[i].name);
                given = &params[i];
            }
        if (!given)
            return rad_error_set(RAD_E_ARG, "op %s: parameter '%s' missing", s->op, s->params[j].name);
        if (!kind_matches(s->params[j].type, given->kind))
            return rad_error_set(RAD_E_ARG, "op %s: parameter '%s' must be %s", s->op,
                                 s->params[j].name, type_name(s->params[j].type));
        ordered[j] = *given;
        if (given->kind == RAD_PK_RANGE) {
            if (*range_index >= 0)
                return rad_error_set(RAD_E_ARG, "op %s: parameters '%s' and '%s' are both ranges; one is allowed",
                                     s->op, s->params[*range_index].name, given->name);
            if (given->lo < 0 || given->hi < given->lo)
                return rad_error_set(RAD_E_ARG, "op %s: range %s = [%lld, %lld] is empty", s->op,
                                     given->name, (long long)given->lo, (long long)given->hi);
            *range_index = j;
        }
    }
    if (*range_index < 0)
        return rad_error_set(RAD_E_ARG, "op %s: no ranged parameter", s->op);
    return RAD_OK;
}

static int param_index(const RadOpSchema *s, const char *name)
{
    for (int j = 0; j < s->n_params; j++)
        if (strcmp(s->params[j].name, name) == 0) return j;
    return -1;
}

/* Does constraint c hold when the parameter has value v? */
static int constraint_holds(const RadConstraint *c, int64_t v)
{
    switch (c->kind) {
    case RAD_C_EQ: return v == c->v;
    case RAD_C_LE: return v <= c->v;
    case RAD_C_GE: return v >= c->v;
    case RAD_C_DIV: return c->v != 0 && v % c->v == 0;
    case RAD_C_IN:
        for (int i = 0; i < c->n_values && i < RAD_MAX_IN_VALUES; i++)
            if (c->values[i] == v) return 1;
        return 0;
    }
    return 0;
}

static const char *constraint_text(const RadConstraint *c, char *buf, size_t len)
{
    static const char *ops[] = {"?", "==", "<=", ">=", "divisible by", "in"};
    int k = c->kind >= 1 && c->kind <= 5 ? c->kind : 0;
    if (c->kind == RAD_C_IN) {
        size_t at = (size_t)snprintf(buf, len, "%s in {", c->param);
        for (int i = 0; i < c->n_values && at < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? "," : "", (long long)c->values[i]);
        if (at < len) snprintf(buf + at, len - at, "}");
    } else {
        snprintf(buf, len, "%s %s %lld", c->param, ops[k], (long long)c->v);
    }
    return buf;
}

/* The first constraint of row that fails in a band starting at m, or NULL if
** all hold.  A constraint on a parameter the schema lacks, or a DIV/IN on the
** ranged one, is treated as failing: the row is a library bug. */
static const RadConstraint *first_failure(const RadOpSchema *s, const RadKernelRow *row,
                                          const RadParam *ordered, int range_index, int64_t m)
{
    for (int i = 0; i < row->n_constraints; i++) {
        const RadConstraint *c = &row->constraints[i];
        int j = param_index(s, c->param);
        if (j < 0) return c;
        int64_t v;
        if (j == range_index) {
            if (c->kind == RAD_C_DIV || c->kind == RAD_C_IN) return c;
            v = m;
        } else {
            v = ordered[j].kind == RAD_PK_FLOAT ? (int64_t)ordered[j].f : ordered[j].i;
        }
        if (!constraint_holds(c, v)) return c;
    }
    return NULL;
}

/* Do row's constraints on the fixed (non-ranged) parameters hold? */
static int fixed_params_hold(const RadOpSchema *s, const RadKernelRow *row, const RadParam *ordered,
                             int range_index)
{
    for (int i = 0; i < row->n_constraints; i++) {
        int j = param_index(s, row->constraints[i].param);
        if (j < 0) return 0;
        if (j == range_index) continue;
        int64_t v = ordered[j].kind == RAD_PK_FLOAT ? (int64_t)ordered[j].f : ordered[j].i;
        if (!constraint_holds(&row->constraints[i], v)) return 0;
    }
    return 1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void resolve_band(const RadKernelLibrary *const *libs, int n_libs, const RadOpSchema *s,
                         const char *op, const RadParam *ordered, int range_index, RadBand *band)
{
    band->row = NULL;
    band->lib = -1;
    size_t at = 0;
    band->why[0] = 0;
    for (int l = 0; l < n_libs && !band->row; l++) {
        const RadKernelRow *best = NULL;
        int had_rows = 0;
        for (int r = 0; r < libs[l]->n_rows; r++) {
            const RadKernelRow *row = &libs[l]->rows[r];
            if (strcmp(row->op, op) != 0) continue;
            had_rows = 1;
            const RadConstraint *fail = first_failure(s, row, ordered, range_index, band->lo);
            if (fail) {
                char text[96];
                if (at < sizeof band->why)
                    at += (size_t)snprintf(band->why + at, sizeof band->why - at, "%s%s:%s needs %s",
                                           at ? "; " : "", libs[l]->name, row->name,
                                           constraint_text(fail, text, sizeof text));
                continue;
            }
            if (!best || row->priority > best->priority) best = row;
        }
        if (!had_rows && at < sizeof band->why)
            at += (size_t)snprintf(band->why + at, sizeof band->why - at, "%s%s: no %s rows",
                                   at ? "; " : "", libs[l]->name, op);
        if (best) {
            band->row = best;
            band->lib = l;
            snprintf(band->why, sizeof band->why, "%s:%s, priority %d, first library with a match",
                     libs[l]->name, best->name, best->priority);
        }
    }
}

int rad_select_bands(const RadKernelLibrary *const *libs, int n_libs, const char *op,
                     const RadParam *ordered, int n_params, int range_index,
                     RadBand *bands, int max_bands)
{
    const RadOpSchema *s = rad_select_schema(libs, n_libs, op);
    if (!s) return rad_error_set(RAD_E_NOKERNEL, "op %s: no kernel library knows it", op);
    (void)n_params;
    int64_t lo = ordered[range_index].lo, hi = ordered[range_index].hi;
    const char *range_name = s->params[range_index].name;

    /* Every edge a candidate row names inside [lo, hi].  A row whose fixed
    ** parameters already rule it out cuts nothing. */
    enum { MAX_EDGES = 256 };
    int64_t edges[MAX_EDGES];
    int n_edges = 0;
    edges[n_edges++] = lo;
    for (int l = 0; l < n_libs; l++)
        for (int r = 0; r < libs[l]->n_rows; r++) {
            const RadKernelRow *row = &libs[l]->rows[r];
            if (strcmp(row->op, op) != 0 || !fixed_params_hold(s, row, ordered, range_index)) continue;
            for (int i = 0; i < row->n_constraints; i++) {
                const RadConstraint *c = &row->constraints[i];
                if (strcmp(c->param, range_name) != 0) continue;
                int64_t cut[2];
                int n_cut = 0;
                /* v + 1 only when v < hi: past hi it cuts nothing (and cannot overflow). */
                if (c->kind == RAD_C_EQ) { cut[n_cut++] = c->v; if (c->v < hi) cut[n_cut++] = c->v + 1; }
                if (c->kind == RAD_C_LE && c->v < hi) cut[n_cut++] = c->v + 1;
                if (c->kind == RAD_C_GE) cut[n_cut++] = c->v;
                for (int k = 0; k < n_cut; k++) {
                    if (cut[k] <= lo || cut[k] > hi) continue;
                    int seen = 0;
                    for (int e = 0; e < n_edges && !seen; e++) seen = edges[e] == cut[k];
                    if (seen) continue;
                    if (n_edges == MAX_EDGES)
                        return rad_error_set(RAD_E_RANGE, "op %s: the kernel rows name more than %d band edges",
                                             op, MAX_EDGES);
                    edges[n_edges++] = cut[k];
                }
            }
        }
    qsort(edges, (size_t)n_edges, sizeof edges[0], cmp_i64);

    int n_bands = 0;
    for (int e = 0; e < n_edges; e++) {
        int64_t band_hi = e + 1 < n_edges ? edges[e + 1] - 1 : hi;
        RadBand band = {.lo = edges[e], .hi = band_hi};
        resolve_band(libs, n_libs, s, op, ordered, range_index, &band);
        /* Neighbouring bands served by the same row are one band. */
        if (n_bands > 0 && bands[n_bands - 1].row == band.row && band.row) {
            bands[n_bands - 1].hi = band.hi;
            continue;
        }
        if (n_bands == max_bands)
            return rad_error_set(RAD_E_RANGE, "op %s: more than %d kernel bands", op, max_bands);
        bands[n_bands++] = band;
    }
    return n_bands;
}
