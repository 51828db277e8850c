/*
** rad_core.h: what an architecture plugin may call, and the data it sees.
**
** A plugin describes a model in two phases.  Declare (once, at load) names
** every weight, buffer, KV group and op against the model's metadata and the
** deployment (RadBuildCtx); the core then selects a kernel for every op, plans
** one activation arena from the buffers' liveness, and maps the weights.  Step
** (once per batch) issues the declared ops, in declaration order, over the
** rows of the batch.  Everything here is C with plain handles, so a plugin is
** an ordinary .so built against these headers and nothing else.
**
** The functions below are exported by the radiance binary (and by the
** recording builder in tests/arch); a plugin resolves them at dlopen.
*/
#ifndef RAD_CORE_H
#define RAD_CORE_H

#include "../../base/rad_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Handles are small integers into the builder's tables; -1 is "none". */
typedef int32_t rad_weight;
typedef int32_t rad_buf;
typedef int32_t rad_op;
typedef int32_t rad_kv;

typedef struct RadBuilder RadBuilder;   /* the declare-time builder */
typedef struct RadCtx RadCtx;           /* the step-time context */

/* The size field a plugin sets in each declaration struct it fills:
**   RadWeightDecl d = {RAD_SIZED(RadWeightDecl), .enc = ..., .rank = 2, ...};
** The core reads only what lies inside it (rad_arch.h, how this ABI grows). */
#define RAD_SIZED(T) .struct_size = (int)sizeof(T)

/* --------------------------------------------------------------- metadata */

/* What the loader read from the container before any plugin ran.  The
** dimensions are read, never derived (head_dim in particular); everything
** the core does not name travels in the key/value table. */
typedef struct RadModelMeta {
    int struct_size;
    const char *arch_id;        /* "llama" */
    const char *quant;          /* the container's descriptor: "f32", "bf16", "q8_0" */
    const char *hf_arch;        /* "LlamaForCausalLM", or "" */
    const char *name;
    int n_layers, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    int n_ctx_train;
    int n_expert, n_expert_used;
    double rms_eps, rope_theta;
    int n_kv;
    const RadMetaKV *kv;        /* every other key, e.g. "rope_scaling.factor" */
} RadModelMeta;

/* Free-form lookups; the default is returned when the key is absent. */
int64_t     rad_meta_geti(const RadModelMeta *m, const char *key, int64_t dflt);
double      rad_meta_getf(const RadModelMeta *m, const char *key, double dflt);
const char *rad_meta_gets(const RadModelMeta *m, const char *key, const char *dflt);
int         rad_meta_has(const RadModelMeta *m, const char *key);

/* The deployment a plugin declares against. */
typedef struct RadBuildCtx {
    int struct_size;
    int rank, world_size;       /* tensor parallelism; dimensions already divided */
    int max_tok;                /* most rows in one step (prefill chunk) */
    int max_seqs;               /* most sequences in one step */
    int max_ctx;                /* most positions one sequence holds */
    int max_out_rows;           /* most logits rows one step returns */
    int kv_enc;                 /* KV cache encoding: RAD_ENC_F16 (default) or RAD_ENC_F32 */
    const char *scope;          /* prefix of declared names ("" for the main model) */
    int is_draft;
    int shape_probe;            /* a sizing declare, on an instance of its own */
    int max_spec;               /* positions a step may later roll back (speculation) */
    int max_mixed_tok;          /* most prefill rows a step carries beside decode rows */
} RadBuildCtx;

/* ---------------------------------------------------------------- weights */

typedef enum RadAccess {
    RAD_ACCESS_PER_TOKEN = 1,   /* dense: read every step */
    RAD_ACCESS_PER_REQUEST = 2, /* an encoder tower: read once a request */
    RAD_ACCESS_CONDITIONAL = 3, /* routed experts: read when selected */
    RAD_ACCESS_RARE = 4,
    RAD_ACCESS_VOCAB = 5        /* embedding / lm_head */
} RadAccess;

typedef enum RadShard {
    RAD_SHARD_NONE = 0,         /* replicated */
    RAD_SHARD_ROW = 1,          /* dim 0 split across ranks */
    RAD_SHARD_COL = 2           /* dim 1 split; needs an all_reduce after */
} RadShard;

#define RAD_MAX_ROW_PARTS 4

typedef struct RadWeightDecl {
    int struct_size;            /* RAD_SIZED(RadWeightDecl) */
    int enc;                    /* RadEncoding of the stored tensor */
    int rank;
    int64_t shape[4];           /* outermost first: [out, in] for a linear */
    int access;                 /* RadAccess */
    int shard;                  /* RadShard */
    int32_t group;              /* unit of movement (a layer, an expert) */
    int optional;               /* absent in the checkpoint is fine (a bias) */
    int n_row_parts;            /* what a ROW-sharded weight stacks along dim 0 */
    int64_t row_parts[RAD_MAX_ROW_PARTS];
    const char *source;         /* view of another declared weight; NULL = own name */
    /* grown in ABI 2 (zero = off) */
    int64_t n_slices;           /* a stack of n_slices equal slices along dim 0 (a MoE layer's experts,
                                ** [n_expert, rows, cols]); slice e moves as unit group + e */
} RadWeightDecl;

/* Movement groups from here up are routed experts' units (a stack's slice e
** is group + e); below it a group is a layer (or -1, none), as a container
** counts its layers by them. */
#define RAD_GROUP_EXPERTS (1 << 20)

rad_weight rad_decl_weight(RadBuilder *b, const char *name, const RadWeightDecl *d);

/* The encoding the container holds (or the converter will write) for w. */
int rad_weight_encoding(RadBuilder *b, rad_weight w);
/* 1 when an optional weight is present in the container. */
int rad_weight_present(RadBuilder *b, rad_weight w);

/* The name map: how checkpoint tensors become declared weights.  It is the
** only place that knows checkpoint names; the converter reads it and knows no
** model.  COPY takes the first source present; CONCAT stacks every source
** along dim 0 and requires all of them. */
typedef enum RadMapMode {
    RAD_MAP_COPY = 1,
    RAD_MAP_CONCAT = 2
} RadMapMode;

/* Flags or'ed into RAD_MAP_COPY (grown in ABI 2; none = 0) for a checkpoint
** that keeps a weight in another layout than the one declared:
**   TRANSPOSED  the source holds each matrix (each slice of a stack) as
**               [in, out], the layout of x @ W (gpt-oss's experts);
**   ROWS_EVEN,  the weight is every second entry of the source's output
**   ROWS_ODD    dimension, from 0 or from 1: two projections interleaved in
**               one tensor (gpt-oss's gate_up_proj: gate even, up odd).
** The output dimension is dim 1 of a stacked weight (n_slices), else dim 0.
** A COPY source may also be found in Hugging Face's MXFP4 form, NAME_blocks
** (u8 [..., out, in / 32, 16]) with NAME_scales (u8 [..., out, in / 32]):
** stored [out, in] already, so TRANSPOSED does not apply to it.  The
** converter reads both forms (engine/convert_view.c). */
enum {
    RAD_MAP_TRANSPOSED = 0x100,
    RAD_MAP_ROWS_EVEN = 0x200,
    RAD_MAP_ROWS_ODD = 0x400
};

int rad_decl_name_map(RadBuilder *b, const char *weight, int mode,
                      const char *const *sources, int n_sources);

/* Alternative checkpoint roots.  A multimodal checkpoint nests its language
** model under another root ("model.language_model.layers.3..." where a
** text-only one has "model.layers.3..."), and older exports of it use a
** third.  After this call, every name-map source that starts with `from`
** also accepts `to` + the rest, as a later COPY source.  Set the aliases
** before declaring the weights they concern; they belong to this builder. */
int rad_decl_name_alias(RadBuilder *b, const char *from, const char *to);

/* ---------------------------------------------------------------- buffers */

typedef enum RadBufKind {
    RAD_BUF_TRANSIENT = 1,      /* lives between its first and last use in a step */
    RAD_BUF_PERSIST = 2,        /* keeps its bytes across steps */
    RAD_BUF_DERIVED = 3         /* filled by the core from the batch each step */
} RadBufKind;

typedef struct RadBufferDecl {
    int struct_size;            /* RAD_SIZED(RadBufferDecl) */
    int kind;                   /* RadBufKind */
    int enc;                    /* RAD_ENC_F32 for activations, RAD_ENC_I32 for ids */
    int64_t rows;               /* capacity in rows (usually ctx->max_tok) */
    int64_t cols;               /* elements per row */
    const char *derive;         /* DERIVED only: "token_ids", "positions", "out_ids" */
} RadBufferDecl;

rad_buf rad_decl_buffer(RadBuilder *b, const char *name, const RadBufferDecl *d);

/* -------------------------------------------------------------- KV groups */

typedef enum RadKvKind {
    RAD_KV_FULL = 1,            /* paged attention K/V, grows with the sequence */
    RAD_KV_WINDOW = 2,          /* paged, only the last `window` positions are read */
    RAD_KV_LINEAR = 3,          /* a fixed state per sequence (a recurrent layer's matrix) */
    RAD_KV_CONV = 4,            /* a rolling window of the last inputs (a short convolution) */
    RAD_KV_RING = 5             /* reserved */
} RadKvKind;

/* A KV group.  FULL and WINDOW hold one K and one V row of n_head_kv x
** head_dim per position, paged.  LINEAR and CONV hold, per sequence and per
** bound layer, one state of state_rows x state_cols elements of state_enc
** (RAD_ENC_F32, the zero value, by default): it describes the sequence at
** its current length only, so it cannot be cut back to an earlier position
** unless a checkpoint was taken there (docs/KV.md). */
typedef struct RadKvGroupDecl {
    int struct_size;            /* RAD_SIZED(RadKvGroupDecl) */
    int kind;                   /* RadKvKind */
    int n_head_kv, head_dim;    /* FULL and WINDOW */
    int window;                 /* WINDOW only */
    int state_enc;              /* LINEAR and CONV */
    int64_t state_rows, state_cols;
} RadKvGroupDecl;

rad_kv rad_decl_kv_group(RadBuilder *b, const char *name, const RadKvGroupDecl *d);
int    rad_bind_layer_kv(RadBuilder *b, int layer, rad_kv group);
/* The block size the resolved attention kernel reads this group in; known
** once an op reading the group is declared. */
int    rad_kv_block_size(RadBuilder *b, rad_kv group);

/* -------------------------------------------------------------------- ops */

typedef enum RadParamKind { RAD_PK_INT = 1, RAD_PK_FLOAT = 2, RAD_PK_RANGE = 3 } RadParamKind;

typedef struct RadParam {
    const char *name;
    int kind;                   /* RadParamKind */
    int64_t i, lo, hi;
    double f;
} RadParam;

#define RAD_INT(n, v)        ((RadParam){ .name = (n), .kind = RAD_PK_INT, .i = (v) })
#define RAD_FLOAT(n, v)      ((RadParam){ .name = (n), .kind = RAD_PK_FLOAT, .f = (v) })
#define RAD_RANGE(n, l, h)   ((RadParam){ .name = (n), .kind = RAD_PK_RANGE, .lo = (l), .hi = (h) })

/* Declare one op.  Parameter names come from docs/OPS.md and are checked
** against the kernel libraries' schemas; `weights` lists the weights it reads
** (so their relayout and placement are known at load).  Selection happens
** here: a miss is recorded and reported with every other miss when declare
** ends, so declare always completes. */
rad_op rad_decl_op(RadBuilder *b, const char *op, const RadParam *params, int n_params,
                   const rad_weight *weights, int n_weights);

#define RAD_PARAMS(...)  (const RadParam[]){ __VA_ARGS__ }, \
                         (int)(sizeof((const RadParam[]){ __VA_ARGS__ }) / sizeof(RadParam))
#define RAD_WEIGHTS(...) (const rad_weight[]){ __VA_ARGS__ }, \
                         (int)(sizeof((const rad_weight[]){ __VA_ARGS__ }) / sizeof(rad_weight))
#define RAD_NO_WEIGHTS   NULL, 0
#define RAD_OP(b, name, params, weights) rad_decl_op((b), (name), params, weights)

/* Liveness for the planner: which buffers an op reads and writes.  A buffer
** no op mentions is live for the whole step. */
int rad_op_reads(RadBuilder *b, rad_op op, const rad_buf *bufs, int n);
int rad_op_writes(RadBuilder *b, rad_op op, const rad_buf *bufs, int n);
#define RAD_BUFS(...) (const rad_buf[]){ __VA_ARGS__ }, \
                      (int)(sizeof((const rad_buf[]){ __VA_ARGS__ }) / sizeof(rad_buf))

/* 1 when every band of op has a kernel (fusion is selection: ask for the fused
** op, emit the chain when this is 0); 1 from rad_op_declared when any library
** has a schema for the op name. */
int rad_op_resolved(RadBuilder *b, rad_op op);
int rad_op_declared(RadBuilder *b, const char *op);

/* The [rows, vocab] buffer the sampler reads after each step. */
int rad_declare_logits(RadBuilder *b, rad_buf logits);

/* A declare-time problem (a missing key, a bad shape): recorded, reported
** with the others, and declare goes on. */
int rad_decl_fail(RadBuilder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line for --debug-graph explaining a choice the plugin made. */
void rad_note(RadBuilder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ steps */

typedef enum RadPhase { RAD_PHASE_PREFILL = 1, RAD_PHASE_DECODE = 2, RAD_PHASE_MIXED = 3 } RadPhase;

/* One step's rows.  Decode rows come first, then prefill chunks; each
** sequence's rows are contiguous and in position order. */
typedef struct RadBatch {
    int struct_size;
    int phase;                  /* RadPhase */
    int n_tok;                  /* rows in this step */
    int n_seq;                  /* sequences in this step */
    int n_seq_decode;           /* the first n_seq_decode sequences are decode rows */
    const int32_t *token_ids;   /* [n_tok] */
    const int32_t *positions;   /* [n_tok] absolute positions */
    const int32_t *cu_seqlens;  /* [n_seq + 1] row offsets of each sequence */
    const int32_t *seq_ids;     /* [n_seq] the engine's sequence ids */
    const int32_t *token_seq;   /* [n_tok] batch sequence index of each row */
    int n_out;                  /* rows whose logits are wanted; 0 = none */
    const int32_t *out_ids;     /* [n_out] ascending row indices */
} RadBatch;

/* An operand at issue time, in the op schema's order. */
typedef enum RadOperandKind {
    RAD_OPND_NONE = 0,          /* an absent optional operand */
    RAD_OPND_BUF = 1,
    RAD_OPND_WEIGHT = 2,
    RAD_OPND_KV = 3,            /* a layer's view of its KV group */
    RAD_OPND_INDEX = 4          /* host int32 data (batch ids) */
} RadOperandKind;

typedef struct RadOperand {
    int kind;
    int32_t id;                 /* buffer, weight or layer */
    const int32_t *index;       /* INDEX only */
    int64_t n_index;
} RadOperand;

#define RAD_B(buf)       ((RadOperand){ .kind = RAD_OPND_BUF, .id = (buf) })
#define RAD_W(w)         ((RadOperand){ .kind = RAD_OPND_WEIGHT, .id = (w) })
#define RAD_KVL(layer)   ((RadOperand){ .kind = RAD_OPND_KV, .id = (layer) })
#define RAD_IDX(p, n)    ((RadOperand){ .kind = RAD_OPND_INDEX, .index = (p), .n_index = (n) })
#define RAD_NONE         ((RadOperand){ .kind = RAD_OPND_NONE, .id = -1 })

/* Run op over `rows` rows (its ranged parameter's value this step).  Zero
** rows is not a call: it returns RAD_E_SHAPE and runs nothing.  After a
** failure every later issue in the step returns the same error. */
int rad_issue(RadCtx *c, rad_op op, int64_t rows, const RadOperand *operands, int n);
#define RAD_ISSUE(c, op, rows, ...) \
    rad_issue((c), (op), (rows), (const RadOperand[]){ __VA_ARGS__ }, \
              (int)(sizeof((const RadOperand[]){ __VA_ARGS__ }) / sizeof(RadOperand)))

/* Fail the step with a message; rad_step_status returns the code after. */
int rad_step_fail(RadCtx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int rad_step_status(const RadCtx *c);

#ifdef __cplusplus
}
#endif
#endif /* RAD_CORE_H */
