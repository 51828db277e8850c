/*
** rad_block_mlp.h: the gated feed-forward block of a decoder layer.
**
** In PyTorch terms: out = down(act(gate(h)) * up(h)), with act = SiLU
** (Llama, Qwen, Mistral: "SwiGLU") or GELU-tanh (Gemma: "GeGLU").
** The same block serves a mixture-of-experts layer's shared expert
** (rad_block_moe.h), whose weights carry GGUF's "_shexp" suffix.
*/
#ifndef RAD_BLOCK_MLP_H
#define RAD_BLOCK_MLP_H

#include "rad_block_util.h"

typedef struct RadMlpConfig {
    int layer;
    int n_embd, n_ff;
    int weight_enc;
    int gelu;                   /* 0 = SiLU gate, 1 = GELU-tanh gate */
    const char *hf_prefix;      /* "model.layers.3.mlp" */
    const char *suffix;         /* after "ffn_gate" etc. in our (GGUF's) names: NULL, or "_shexp" */
    int max_tok;
} RadMlpConfig;

typedef struct RadMlpBuffers {
    rad_buf h;                  /* in [T, n_embd] */
    rad_buf gate, up;           /* scratch [T, n_ff] */
    rad_buf act;                /* scratch [T, n_ff] */
    rad_buf out;                /* out [T, n_embd] */
} RadMlpBuffers;

typedef struct RadMlp {
    RadMlpConfig cfg;
    rad_weight w_gate, w_up, w_down, b_gate, b_up, b_down;
    rad_op op_gate, op_up, op_act, op_down;
} RadMlp;

static inline rad_op rad_mlp_gemm(RadBuilder *b, const RadMlpConfig *c, rad_weight w, rad_weight bias,
                                  int64_t n_out, int64_t n_in, rad_buf in, rad_buf out)
{
    rad_op op = RAD_OP(b, "gemm_nt",
                       RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", n_out), RAD_INT("K", n_in),
                                  RAD_INT("enc", rad_weight_encoding(b, w))),
                       RAD_WEIGHTS(w, bias));
    rad_op_reads(b, op, RAD_BUFS(in));
    rad_op_writes(b, op, RAD_BUFS(out));
    return op;
}

static inline void rad_mlp_declare(RadMlp *m, RadBuilder *b, const RadMlpConfig *c, const RadMlpBuffers *io)
{
    char name[RAD_NAME_MAX], hf[RAD_NAME_MAX];
    const int l = c->layer, enc = c->weight_enc, acc = RAD_ACCESS_PER_TOKEN;
    const char *sx = c->suffix ? c->suffix : "";
    m->cfg = *c;
    m->w_gate = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_gate%s.weight", l, sx),
                                  rad_fmt(hf, "%s.gate_proj.weight", c->hf_prefix), enc, 2, c->n_ff, c->n_embd, acc, l, 0);
    m->w_up = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_up%s.weight", l, sx),
                                rad_fmt(hf, "%s.up_proj.weight", c->hf_prefix), enc, 2, c->n_ff, c->n_embd, acc, l, 0);
    m->w_down = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_down%s.weight", l, sx),
                                  rad_fmt(hf, "%s.down_proj.weight", c->hf_prefix), enc, 2, c->n_embd, c->n_ff, acc, l, 0);
    m->b_gate = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_gate%s.bias", l, sx),
                                  rad_fmt(hf, "%s.gate_proj.bias", c->hf_prefix), RAD_ENC_F32, 1, c->n_ff, 0, acc, l, 1);
    m->b_up = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_up%s.bias", l, sx),
                                rad_fmt(hf, "%s.up_proj.bias", c->hf_prefix), RAD_ENC_F32, 1, c->n_ff, 0, acc, l, 1);
    m->b_down = rad_weight_mapped(b, rad_fmt(name, "blk.%d.ffn_down%s.bias", l, sx),
                                  rad_fmt(hf, "%s.down_proj.bias", c->hf_prefix), RAD_ENC_F32, 1, c->n_embd, 0, acc, l, 1);

    m->op_gate = rad_mlp_gemm(b, c, m->w_gate, m->b_gate, c->n_ff, c->n_embd, io->h, io->gate);
    m->op_up = rad_mlp_gemm(b, c, m->w_up, m->b_up, c->n_ff, c->n_embd, io->h, io->up);
    m->op_act = RAD_OP(b, c->gelu ? "gelu_mul" : "silu_mul",
                       RAD_PARAMS(RAD_RANGE("M", 1, c->max_tok), RAD_INT("N", c->n_ff)), RAD_NO_WEIGHTS);
    rad_op_reads(b, m->op_act, RAD_BUFS(io->gate, io->up));
    rad_op_writes(b, m->op_act, RAD_BUFS(io->act));
    m->op_down = rad_mlp_gemm(b, c, m->w_down, m->b_down, c->n_embd, c->n_ff, io->act, io->out);
}

static inline void rad_mlp_step(const RadMlp *m, RadCtx *c, const RadBatch *batch, const RadMlpBuffers *io)
{
    const int64_t n = batch->n_tok;
    RAD_ISSUE(c, m->op_gate, n, RAD_B(io->h), RAD_W(m->w_gate), RAD_W(m->b_gate), RAD_B(io->gate));
    RAD_ISSUE(c, m->op_up, n, RAD_B(io->h), RAD_W(m->w_up), RAD_W(m->b_up), RAD_B(io->up));
    RAD_ISSUE(c, m->op_act, n, RAD_B(io->gate), RAD_B(io->up), RAD_B(io->act));
    RAD_ISSUE(c, m->op_down, n, RAD_B(io->act), RAD_W(m->w_down), RAD_W(m->b_down), RAD_B(io->out));
}

#endif /* RAD_BLOCK_MLP_H */
