/*
** rad_block_decoder.h: the activation buffers a plain decoder stack shares.
**
** Every layer of a llama- or gemma-shaped model reads and writes the same
** handful of activations: the residual stream x, the normed h, q/k/v, the
** attention output, the MLP's gate/up/act, the delta added back to x, and at
** the end the selected rows and their logits.  Declared once here, in one
** order, so each family's plugin keeps only what differs.
*/
#ifndef RAD_BLOCK_DECODER_H
#define RAD_BLOCK_DECODER_H

#include "rad_block_attn.h"
#include "rad_block_mlp.h"

typedef struct RadDecoderBuffers {
    rad_buf ids, positions, out_ids;    /* DERIVED from the batch */
    rad_buf x;                          /* [T, n_embd] the residual stream */
    rad_buf h;                          /* [T, n_embd] normed input of a block */
    rad_buf q, k, v, att;               /* attention scratch */
    rad_buf delta;                      /* [T, n_embd] a block's output, added to x */
    rad_buf gate, up, act;              /* [T, n_ff] MLP scratch */
    rad_buf sel;                        /* [max_out, n_embd] rows whose logits are wanted */
    rad_buf logits;                     /* [max_out, n_vocab] */
    RadAttnBuffers attn;                /* views for the shared blocks */
    RadMlpBuffers mlp;
} RadDecoderBuffers;

/* Declare the buffers for max_tok rows (T) and max_out logits rows, and the
** logits buffer the sampler reads. */
static inline void rad_decoder_buffers_declare(RadBuilder *b, RadDecoderBuffers *io, int T, int max_out,
                                               int n_embd, int q_width, int kv_width, int n_ff, int n_vocab)
{
    io->ids = rad_derived(b, "token_ids", "token_ids", T);
    io->positions = rad_derived(b, "positions", "positions", T);
    io->out_ids = rad_derived(b, "out_ids", "out_ids", max_out);
    io->x = rad_activation(b, "x", T, n_embd);
    io->h = rad_activation(b, "h", T, n_embd);
    io->q = rad_activation(b, "q", T, q_width);
    io->k = rad_activation(b, "k", T, kv_width);
    io->v = rad_activation(b, "v", T, kv_width);
    io->att = rad_activation(b, "att", T, q_width);
    io->delta = rad_activation(b, "delta", T, n_embd);
    io->gate = rad_activation(b, "gate", T, n_ff);
    io->up = rad_activation(b, "up", T, n_ff);
    io->act = rad_activation(b, "act", T, n_ff);
    io->sel = rad_activation(b, "selected", max_out, n_embd);
    io->logits = rad_activation(b, "logits", max_out, n_vocab);
    rad_declare_logits(b, io->logits);
    io->attn = (RadAttnBuffers){.h = io->h, .q = io->q, .k = io->k, .v = io->v,
                                .att = io->att, .out = io->delta, .positions = io->positions};
    io->mlp = (RadMlpBuffers){.h = io->h, .gate = io->gate, .up = io->up, .act = io->act, .out = io->delta};
}

#endif /* RAD_BLOCK_DECODER_H */
