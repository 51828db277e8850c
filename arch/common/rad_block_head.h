/*
** rad_block_head.h: the two ends of a decoder stack.
**
** In PyTorch terms:
**     x = embed_tokens(ids)                      the token embedding (a gather)
**     ...
**     logits = lm_head(h[out_ids])               only the rows the step wants
** The head runs only over the rows whose logits are wanted (the last row of
** each finishing sequence, or several when drafts are verified): gathering
** them first keeps a 262k-vocabulary head from running over a whole prompt.
** lm_head is a view of the embedding when the model ties them.
*/
#ifndef RAD_BLOCK_HEAD_H
#define RAD_BLOCK_HEAD_H

#include "rad_block_decoder.h"

typedef struct RadHead {
    rad_weight tok_embd;        /* (n_vocab, n_embd) */
    rad_weight output;          /* (n_vocab, n_embd), or a view of tok_embd */
    rad_op op_embed, op_gather, op_logits;
} RadHead;

/* The embedding lookup into io->x. */
static inline void rad_head_declare_embedding(RadBuilder *b, RadHead *h, const RadDecoderBuffers *io, int enc,
                                              int64_t n_vocab, int64_t n_embd, int max_tok)
{
    h->tok_embd = rad_weight_mapped(b, "token_embd.weight", "model.embed_tokens.weight", enc, 2, n_vocab, n_embd,
                                    RAD_ACCESS_VOCAB, -1, 0);
    h->op_embed = RAD_OP(b, "embed_lookup", RAD_PARAMS(RAD_RANGE("M", 1, max_tok), RAD_INT("N", n_embd)),
                         RAD_WEIGHTS(h->tok_embd));
    rad_op_reads(b, h->op_embed, RAD_BUFS(io->ids));
    rad_op_writes(b, h->op_embed, RAD_BUFS(io->x));
}

/* The output head over io->h's wanted rows into io->logits; softcap 0 = none. */
static inline void rad_head_declare_output(RadBuilder *b, RadHead *h, const RadDecoderBuffers *io, int enc,
                                           int64_t n_vocab, int64_t n_embd, int tied, double softcap, int max_out)
{
    if (tied) {
        RadWeightDecl d = {RAD_SIZED(RadWeightDecl), .enc = rad_enc_for_cols(enc, n_embd), .rank = 2,
                           .shape = {n_vocab, n_embd}, .access = RAD_ACCESS_VOCAB, .group = -1,
                           .source = "token_embd.weight"};
        h->output = rad_decl_weight(b, "output.weight", &d);
        rad_note(b, "lm_head is tied to the token embedding");
    } else {
        h->output = rad_weight_mapped(b, "output.weight", "lm_head.weight", enc, 2, n_vocab, n_embd,
                                      RAD_ACCESS_VOCAB, -1, 0);
    }
    h->op_gather = RAD_OP(b, "gather_rows", RAD_PARAMS(RAD_RANGE("M", 1, max_out), RAD_INT("N", n_embd)),
                          RAD_NO_WEIGHTS);
    rad_op_reads(b, h->op_gather, RAD_BUFS(io->h, io->out_ids));
    rad_op_writes(b, h->op_gather, RAD_BUFS(io->sel));
    h->op_logits = RAD_OP(b, "logits_gemm",
                          RAD_PARAMS(RAD_RANGE("M", 1, max_out), RAD_INT("N", n_vocab), RAD_INT("K", n_embd),
                                     RAD_INT("enc", rad_weight_encoding(b, h->output)),
                                     RAD_FLOAT("softcap", softcap > 0 ? softcap : 0.0)),
                          RAD_WEIGHTS(h->output));
    rad_op_reads(b, h->op_logits, RAD_BUFS(io->sel));
    rad_op_writes(b, h->op_logits, RAD_BUFS(io->logits));
}

static inline void rad_head_step_embedding(RadCtx *c, const RadHead *h, const RadBatch *batch,
                                           const RadDecoderBuffers *io)
{
    RAD_ISSUE(c, h->op_embed, batch->n_tok, RAD_B(io->ids), RAD_W(h->tok_embd), RAD_B(io->x));
}

static inline void rad_head_step_output(RadCtx *c, const RadHead *h, const RadBatch *batch,
                                        const RadDecoderBuffers *io)
{
    if (batch->n_out == 0) return;      /* a chunk that finishes no sequence */
    RAD_ISSUE(c, h->op_gather, batch->n_out, RAD_B(io->h), RAD_B(io->out_ids), RAD_B(io->sel));
    RAD_ISSUE(c, h->op_logits, batch->n_out, RAD_B(io->sel), RAD_W(h->output), RAD_B(io->logits));
}

#endif /* RAD_BLOCK_HEAD_H */
