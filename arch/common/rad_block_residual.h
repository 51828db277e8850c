/*
** rad_block_residual.h: the residual stream's norms.
**
** A pre-norm decoder adds each block's output back into the residual stream
** and normalises the result for the next block:
**     x = x + delta;  h = rmsnorm(x) * (w + w_offset)
** The two are one op when a kernel fuses them (rmsnorm_add); fusion is
** selection, so when no kernel serves the fused op the plain chain add +
** rmsnorm is declared instead.  The first norm of the stack (of the
** embedding) has nothing to add and is a plain rmsnorm.
*/
#ifndef RAD_BLOCK_RESIDUAL_H
#define RAD_BLOCK_RESIDUAL_H

#include "rad_block_decoder.h"

/* How a family normalises: every norm of one model shares these. */
typedef struct RadNormConfig {
    int64_t n_embd;
    int max_tok;
    double eps;
    double w_offset;            /* 0 for Llama; 1 for Gemma's (1 + w) as HF stores it */
} RadNormConfig;

typedef struct RadResidualNorm {
    rad_weight w;               /* (n_embd) */
    rad_op fused;               /* rmsnorm_add, or -1 */
    rad_op add, norm;           /* the chain when not fused (add is -1 for the first norm) */
} RadResidualNorm;

/* out = rmsnorm(in) * (w + w_offset), over the step's rows. */
static inline rad_op rad_norm_declare(RadBuilder *b, const RadNormConfig *c, rad_weight w, rad_buf in, rad_buf out)
{
    rad_op op = RAD_OP(b, "rmsnorm",
                       RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", c->n_embd), RAD_FLOAT("eps", c->eps),
                                  RAD_FLOAT("w_offset", c->w_offset)),
                       RAD_WEIGHTS(w));
    rad_op_reads(b, op, RAD_BUFS(in));
    rad_op_writes(b, op, RAD_BUFS(out));
    return op;
}

/* x += delta (unless first); h = rmsnorm(x) with weight w. */
static inline void rad_residual_norm_declare(RadBuilder *b, RadResidualNorm *r, const RadNormConfig *c,
                                             const RadDecoderBuffers *io, rad_weight w, int first)
{
    r->w = w;
    r->fused = r->add = r->norm = -1;
    if (!first) {
        r->fused = RAD_OP(b, "rmsnorm_add",
                          RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", c->n_embd),
                                     RAD_FLOAT("eps", c->eps), RAD_FLOAT("w_offset", c->w_offset)),
                          RAD_WEIGHTS(w));
        rad_op_reads(b, r->fused, RAD_BUFS(io->x, io->delta));
        rad_op_writes(b, r->fused, RAD_BUFS(io->x, io->h));
        if (rad_op_resolved(b, r->fused)) return;
        rad_note(b, "no kernel fuses the residual add with rmsnorm: issuing add + rmsnorm");
        r->fused = -1;
        r->add = RAD_OP(b, "add", RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", c->n_embd)),
                        RAD_NO_WEIGHTS);
        rad_op_reads(b, r->add, RAD_BUFS(io->x, io->delta));
        rad_op_writes(b, r->add, RAD_BUFS(io->x));
    }
    r->norm = rad_norm_declare(b, c, w, io->x, io->h);
}

static inline void rad_residual_norm_step(RadCtx *c, const RadResidualNorm *r, int64_t n, const RadDecoderBuffers *io)
{
    if (r->fused >= 0) {
        RAD_ISSUE(c, r->fused, n, RAD_B(io->x), RAD_B(io->delta), RAD_W(r->w), RAD_B(io->h));
        return;
    }
    if (r->add >= 0) RAD_ISSUE(c, r->add, n, RAD_B(io->x), RAD_B(io->delta), RAD_B(io->x));
    RAD_ISSUE(c, r->norm, n, RAD_B(io->x), RAD_W(r->w), RAD_B(io->h));
}

#endif /* RAD_BLOCK_RESIDUAL_H */
