/*
** schemas.c: the op schemas of docs/OPS.md, as the table kernel libraries
** export.
**
** One table, compiled into every library that serves these ops, so the core
** sees the same parameter names and operand roles whichever library it asks.
** Order matters: a kernel finds its arguments by position (rad_ops.h names
** the positions), and an architecture plugin finds them by name.  Entries
** are only appended; changing a name or an order is an ABI change.
**
** Every op's first parameter is M, the ranged row count of the step.
*/
#include "rad_ops.h"

/* Shorthands that keep each schema on a few lines a reader can scan. */
#define RANGE(n) {n, RAD_PARAM_RANGE}
#define INT(n) {n, RAD_PARAM_INT}
#define FLOAT(n) {n, RAD_PARAM_FLOAT}
#define IN(n) {n, RAD_ROLE_IN, 0}
#define OUT(n) {n, RAD_ROLE_OUT, 0}
#define INOUT(n) {n, RAD_ROLE_INOUT, 0}
#define WEIGHT(n) {n, RAD_ROLE_WEIGHT, 0}
#define OPTIONAL_WEIGHT(n) {n, RAD_ROLE_WEIGHT, 1}
#define KV(n) {n, RAD_ROLE_KV, 0}
#define INDEX(n) {n, RAD_ROLE_INDEX, 0}

const RadOpSchema rad_op_schemas[] = {
    {"embed_lookup",
     2, {RANGE("M"), INT("N")},
     3, {INDEX("ids"), WEIGHT("table"), OUT("out")}},

    {"rmsnorm",
     4, {RANGE("M"), INT("N"), FLOAT("eps"), FLOAT("w_offset")},
     3, {IN("x"), WEIGHT("w"), OUT("out")}},

    {"rmsnorm_add",
     4, {RANGE("M"), INT("N"), FLOAT("eps"), FLOAT("w_offset")},
     4, {INOUT("x"), IN("d"), WEIGHT("w"), OUT("out")}},

    {"add",
     2, {RANGE("M"), INT("N")},
     3, {IN("a"), IN("b"), OUT("out")}},

    {"mul",
     2, {RANGE("M"), INT("N")},
     3, {IN("a"), IN("b"), OUT("out")}},

    {"scale_rows",
     3, {RANGE("M"), INT("N"), FLOAT("scale")},
     1, {INOUT("x")}},

    {"silu_mul",
     2, {RANGE("M"), INT("N")},
     3, {IN("gate"), IN("up"), OUT("out")}},

    {"gelu_mul",
     2, {RANGE("M"), INT("N")},
     3, {IN("gate"), IN("up"), OUT("out")}},

    {"rope",
     15, {RANGE("M"), INT("n_head"), INT("head_dim"), INT("n_rot"), INT("mode"),
          FLOAT("theta"), INT("scaling"), FLOAT("factor"), FLOAT("low_freq_factor"),
          FLOAT("high_freq_factor"), INT("orig_ctx"), FLOAT("beta_fast"), FLOAT("beta_slow"),
          FLOAT("attn_factor"), INT("truncate")},
     3, {INOUT("x"), INDEX("positions"), OPTIONAL_WEIGHT("freq_factors")}},

    {"qk_norm",
     5, {RANGE("M"), INT("n_head"), INT("head_dim"), FLOAT("eps"), FLOAT("w_offset")},
     2, {INOUT("x"), WEIGHT("w")}},

    {"kv_store",
     3, {RANGE("M"), INT("n_head_kv"), INT("head_dim")},
     3, {IN("k"), IN("v"), KV("kv")}},

    {"attn_paged",
     7, {RANGE("M"), INT("n_head"), INT("n_head_kv"), INT("head_dim"), FLOAT("scale"),
         INT("window"), FLOAT("softcap")},
     4, {IN("q"), KV("kv"), OUT("out"), OPTIONAL_WEIGHT("sinks")}},

    {"gemm_nt",
     4, {RANGE("M"), INT("N"), INT("K"), INT("enc")},
     4, {IN("x"), WEIGHT("w"), OPTIONAL_WEIGHT("bias"), OUT("out")}},

    {"gather_rows",
     2, {RANGE("M"), INT("N")},
     3, {IN("x"), INDEX("idx"), OUT("out")}},

    {"logits_gemm",
     5, {RANGE("M"), INT("N"), INT("K"), INT("enc"), FLOAT("softcap")},
     3, {IN("x"), WEIGHT("w"), OUT("out")}},

    /* Mixture of experts: route, run the chosen experts, combine. */
    {"router_topk",
     8, {RANGE("M"), INT("n_expert"), INT("k"), INT("mode"), INT("renorm"), FLOAT("scale"),
         INT("n_group"), INT("topk_group")},
     4, {IN("logits"), OPTIONAL_WEIGHT("bias"), OUT("ids"), OUT("weights")}},

    {"moe_gemm",
     6, {RANGE("M"), INT("k"), INT("N"), INT("K"), INT("enc"), INT("x_per_slot")},
     5, {IN("x"), INDEX("ids"), WEIGHT("w"), OPTIONAL_WEIGHT("bias"), OUT("out")}},

    {"moe_combine",
     3, {RANGE("M"), INT("k"), INT("N")},
     3, {IN("y"), IN("weights"), OUT("out")}},

    {"clamp",
     4, {RANGE("M"), INT("N"), FLOAT("lo"), FLOAT("hi")},
     1, {INOUT("x")}},

    /* gpt-oss's clamped SwiGLU */
    {"swiglu_oai",
     4, {RANGE("M"), INT("N"), FLOAT("alpha"), FLOAT("limit")},
     3, {IN("gate"), IN("up"), OUT("out")}},

    /* a shared expert's gate (Qwen2-MoE): rows scaled by sigmoid(g) */
    {"sigmoid_gate",
     2, {RANGE("M"), INT("N")},
     3, {IN("x"), IN("g"), OUT("out")}},
};

_Static_assert(sizeof rad_op_schemas / sizeof rad_op_schemas[0] == RAD_OP_SCHEMA_COUNT,
               "RAD_OP_SCHEMA_COUNT must match the table");

const int rad_op_schema_count = RAD_OP_SCHEMA_COUNT;
