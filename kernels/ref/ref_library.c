/*
** ref_library.c: the reference kernel library's export.
**
** A row per op, priority 0, host domain, no
** constraint on M: whatever else is loaded, ref can serve every op of
** docs/OPS.md at every row count, so a model always runs, and every faster
** kernel has something to be compared against.  The core tries ref last by default.
**
** The only constraints are the weight encodings of the GEMMs, which the
** core can check when a model is declared.  embed_lookup has no encoding
** parameter (the table's encoding is read from the operand), so an
** undecodable table is refused when the op first runs, by rad_dequant_row.
**
** One IN list names every encoding rad_dequant_row decodes.  A GE/LE range
** on `enc` would be shorter but wrong: the ids are not contiguous (9,
** 15..19, 21..29 are encodings ref does not decode), and a range would
** accept those at declare time only to fail when the op first ran.  A test
** checks that the list is exactly what rad_dequant_supported answers yes
** to.
*/
#include "ref_internal.h"

/* The weight encodings rad_dequant_row decodes (at most RAD_MAX_IN_VALUES). */
#define ENC_DECODABLE \
    {.param = "enc", .kind = RAD_C_IN, .n_values = 15, \
     .values = {RAD_ENC_F32, RAD_ENC_F16, RAD_ENC_BF16, RAD_ENC_Q8_0, RAD_ENC_Q4_0, \
                RAD_ENC_Q4_1, RAD_ENC_Q5_0, RAD_ENC_Q5_1, RAD_ENC_Q2_K, RAD_ENC_Q3_K, \
                RAD_ENC_Q4_K, RAD_ENC_Q5_K, RAD_ENC_Q6_K, RAD_ENC_IQ4_NL, RAD_ENC_MXFP4}}

/* The block size attn_paged assumes when the core sizes the cache.  The
** kernel itself reads any block size from the view. */
#define REF_KV_BLOCK 16

#define ROW(opname, fn) \
    {.op = opname, .name = opname, .priority = 0, .domain = RAD_DOMAIN_HOST, .launch = fn}

static const RadKernelRow rows[] = {
    ROW("embed_lookup", ref_embed_lookup),
    ROW("rmsnorm", ref_rmsnorm),
    ROW("rmsnorm_add", ref_rmsnorm_add),
    ROW("add", ref_add),
    ROW("mul", ref_mul),
    ROW("scale_rows", ref_scale_rows),
    ROW("silu_mul", ref_silu_mul),
    ROW("gelu_mul", ref_gelu_mul),
    ROW("rope", ref_rope),
    ROW("qk_norm", ref_qk_norm),
    ROW("kv_store", ref_kv_store),
    {.op = "attn_paged", .name = "attn_paged", .priority = 0, .domain = RAD_DOMAIN_HOST,
     .kv_block_size = REF_KV_BLOCK, .launch = ref_attn_paged},
    {.op = "gemm_nt", .name = "gemm_nt", .n_constraints = 1, .constraints = {ENC_DECODABLE},
     .priority = 0, .domain = RAD_DOMAIN_HOST, .launch = ref_gemm_nt},
    ROW("gather_rows", ref_gather_rows),
    {.op = "logits_gemm", .name = "logits_gemm", .n_constraints = 1,
     .constraints = {ENC_DECODABLE}, .priority = 0, .domain = RAD_DOMAIN_HOST,
     .launch = ref_logits_gemm},
    ROW("router_topk", ref_router_topk),
    /* reads a stacked weight's slices wherever each lives */
    {.op = "moe_gemm", .name = "moe_gemm", .n_constraints = 1, .constraints = {ENC_DECODABLE},
     .priority = 0, .domain = RAD_DOMAIN_HOST, .launch = ref_moe_gemm, .slices_ok = 1},
    ROW("moe_combine", ref_moe_combine),
    ROW("clamp", ref_clamp),
    ROW("swiglu_oai", ref_swiglu_oai),
    ROW("sigmoid_gate", ref_sigmoid_gate),
};

const RadKernelLibrary rad_kernel_library = {
    RAD_KERNEL_LIBRARY_SIZES,
    .name = "ref",
    .description = "reference kernels: plain C loops that define each op's semantics",
    .n_schemas = RAD_OP_SCHEMA_COUNT,
    .schemas = rad_op_schemas,
    .n_rows = (int)(sizeof rows / sizeof rows[0]),
    .rows = rows,
    .preference = 1,           /* the last resort in the default order */
};
