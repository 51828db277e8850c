/*
** cpu_library.c: the cpu kernel library's export.
**
** Rows for every op of docs/OPS.md at priority 10, so that with the default
** order "cpu,ref" the cpu library serves everything it has a row for.  The
** two GEMMs have a decode row (M = 1) and a prefill row (M >= 2), each
** listing every encoding the library multiplies.
**
** init picks the ISA level (cpu_features.c) and fills the dispatch tables:
** portable kernels for everything, then each ISA level's files over them.
** The GEMM rows relayout q4_0, q4_1, q5_0, q8_0 and q4_k weights whose N is a multiple of 8
** into the x8 layout (x8.c) when the level has x8 tiles (AVX2 and up); the
** decode and prefill rows share the one copy.  The moe_gemm rows do the
** same for stacked expert weights, slice by slice.
** Launch functions are referenced weakly: a row whose kernel is not built
** into this library is left out of the table at init (the core then uses ref
** for that op, and tests/ops/test_cpu.c fails, since it requires every op).
*/
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define WEAK __attribute__((weak))
WEAK int cpu_gemm_nt_decode(const RadKernelArgs *a);
WEAK int cpu_gemm_nt_prefill(const RadKernelArgs *a);
WEAK int cpu_logits_gemm_decode(const RadKernelArgs *a);
WEAK int cpu_logits_gemm_prefill(const RadKernelArgs *a);
WEAK size_t cpu_gemm_nt_scratch(const RadKernelArgs *a);
WEAK size_t cpu_logits_gemm_scratch(const RadKernelArgs *a);
WEAK int cpu_embed_lookup(const RadKernelArgs *a);
WEAK int cpu_gather_rows(const RadKernelArgs *a);
WEAK int cpu_rmsnorm(const RadKernelArgs *a);
WEAK int cpu_rmsnorm_add(const RadKernelArgs *a);
WEAK int cpu_qk_norm(const RadKernelArgs *a);
WEAK int cpu_add(const RadKernelArgs *a);
WEAK int cpu_mul(const RadKernelArgs *a);
WEAK int cpu_scale_rows(const RadKernelArgs *a);
WEAK int cpu_silu_mul(const RadKernelArgs *a);
WEAK int cpu_gelu_mul(const RadKernelArgs *a);
WEAK int cpu_swiglu_oai(const RadKernelArgs *a);
WEAK int cpu_rope(const RadKernelArgs *a);
WEAK int cpu_kv_store(const RadKernelArgs *a);
WEAK int cpu_attn_paged(const RadKernelArgs *a);
WEAK size_t cpu_attn_paged_scratch(const RadKernelArgs *a);
WEAK int cpu_clamp(const RadKernelArgs *a);
WEAK int cpu_sigmoid_gate(const RadKernelArgs *a);
WEAK int cpu_router_topk(const RadKernelArgs *a);
WEAK int cpu_moe_gemm(const RadKernelArgs *a);
WEAK size_t cpu_moe_gemm_scratch(const RadKernelArgs *a);
WEAK int cpu_moe_combine(const RadKernelArgs *a);
WEAK void cpu_fill_float_portable(void);
WEAK void cpu_fill_q32_portable(void);
WEAK void cpu_fill_kquants_portable(void);
#if defined(__x86_64__)
WEAK void cpu_fill_float_avx2(void);
WEAK void cpu_fill_q32_avx2(void);
WEAK void cpu_fill_kquants_avx2(void);
WEAK void cpu_fill_float_avx512(void);
WEAK void cpu_fill_q32_avx512(void);
WEAK void cpu_fill_kquants_avx512(void);
WEAK void cpu_fill_x8_avx2(void);
WEAK void cpu_fill_q8_0_rows8_avx2(void);
#endif
#if defined(__aarch64__)
WEAK void cpu_fill_float_neon(void);
WEAK void cpu_fill_q32_neon(void);
WEAK void cpu_fill_kquants_neon(void);
#endif

int cpu_isa;
CpuEncKernels cpu_enc[RAD_ENC_COUNT];
CpuActQuantFn cpu_act_quant[CPU_ACT_COUNT];

#define PRIORITY 10
#define KV_BLOCK 16

#define ENCS \
    {.param = "enc", .kind = RAD_C_IN, .n_values = 15, \
     .values = {RAD_ENC_F32, RAD_ENC_F16, RAD_ENC_BF16, RAD_ENC_Q8_0, RAD_ENC_Q4_0, \
                RAD_ENC_Q4_1, RAD_ENC_Q5_0, RAD_ENC_Q5_1, RAD_ENC_Q2_K, RAD_ENC_Q3_K, \
                RAD_ENC_Q4_K, RAD_ENC_Q5_K, RAD_ENC_Q6_K, RAD_ENC_IQ4_NL, RAD_ENC_MXFP4}}
#define DECODE {.param = "M", .kind = RAD_C_LE, .v = 1}
#define PREFILL {.param = "M", .kind = RAD_C_GE, .v = 2}

#define ROW(opname, fn) \
    {.op = opname, .name = opname, .priority = PRIORITY, .domain = RAD_DOMAIN_HOST, .launch = fn}
#define GEMM(opname, rowname, band, encs, fn, scratch) \
    {.op = opname, .name = rowname, .n_constraints = 2, .constraints = {band, encs}, \
     .priority = PRIORITY, .domain = RAD_DOMAIN_HOST, .launch = fn, .scratch_bytes = scratch, \
     .relayout_bytes = cpu_relayout_bytes, .relayout = cpu_relayout, \
     .relayout_rows = CPU_X8_ROWS, .relayout_same_bits = 1}

/* The expert products: one launch for both bands (ops_moe.c), the x8
** layout made per expert slice (x8.c), experts read wherever they live.
** Stored and copied slices give the same bits (tests/ops/test_cpu_moe.c
** mixes them in one launch), so the copies are made after the open. */
#define MOE_GEMM(rowname, band) \
    {.op = "moe_gemm", .name = rowname, .n_constraints = 2, .constraints = {band, ENCS}, \
     .priority = PRIORITY, .domain = RAD_DOMAIN_HOST, .launch = cpu_moe_gemm, \
     .scratch_bytes = cpu_moe_gemm_scratch, .relayout_bytes = cpu_relayout_stack_bytes, \
     .relayout = cpu_relayout_stack, .slices_ok = 1, .relayout_same_bits = 1}

/* Every row this library can offer; init copies those whose launch exists. */
static const RadKernelRow all_rows[] = {
    ROW("embed_lookup", cpu_embed_lookup),
    ROW("gather_rows", cpu_gather_rows),
    ROW("rmsnorm", cpu_rmsnorm),
    ROW("rmsnorm_add", cpu_rmsnorm_add),
    ROW("qk_norm", cpu_qk_norm),
    ROW("add", cpu_add),
    ROW("mul", cpu_mul),
    ROW("scale_rows", cpu_scale_rows),
    ROW("silu_mul", cpu_silu_mul),
    ROW("gelu_mul", cpu_gelu_mul),
    ROW("swiglu_oai", cpu_swiglu_oai),
    ROW("rope", cpu_rope),
    ROW("kv_store", cpu_kv_store),
    {.op = "attn_paged", .name = "attn_paged", .priority = PRIORITY, .domain = RAD_DOMAIN_HOST,
     .kv_block_size = KV_BLOCK, .launch = cpu_attn_paged, .scratch_bytes = cpu_attn_paged_scratch},
    GEMM("gemm_nt", "gemm_nt_decode", DECODE, ENCS, cpu_gemm_nt_decode, cpu_gemm_nt_scratch),
    GEMM("gemm_nt", "gemm_nt_prefill", PREFILL, ENCS, cpu_gemm_nt_prefill, cpu_gemm_nt_scratch),
    GEMM("logits_gemm", "logits_gemm_decode", DECODE, ENCS, cpu_logits_gemm_decode, cpu_logits_gemm_scratch),
    GEMM("logits_gemm", "logits_gemm_prefill", PREFILL, ENCS, cpu_logits_gemm_prefill, cpu_logits_gemm_scratch),
    ROW("clamp", cpu_clamp),
    {.op = "router_topk", .name = "router_topk", .n_constraints = 1,
     .constraints = {{.param = "n_expert", .kind = RAD_C_LE, .v = CPU_MAX_EXPERTS}}, .priority = PRIORITY,
     .domain = RAD_DOMAIN_HOST, .launch = cpu_router_topk},
    MOE_GEMM("moe_gemm_decode", DECODE),
    MOE_GEMM("moe_gemm_prefill", PREFILL),
    ROW("moe_combine", cpu_moe_combine),
    ROW("sigmoid_gate", cpu_sigmoid_gate),
};
#define N_ALL ((int)(sizeof all_rows / sizeof all_rows[0]))

static RadKernelRow rows[N_ALL];

static void fill(void (*fn)(void))
{
    if (fn) fn();
}

/* Fill the dispatch tables for `isa`: portable first, then the ISA's own
** files over it. */
static void fill_tables(int isa)
{
    memset(cpu_enc, 0, sizeof cpu_enc);
    memset(cpu_act_quant, 0, sizeof cpu_act_quant);
    memset(cpu_enc_x8, 0, sizeof cpu_enc_x8);
    fill(cpu_fill_float_portable);
    fill(cpu_fill_q32_portable);
    fill(cpu_fill_kquants_portable);
#if defined(__x86_64__)
    if (isa >= CPU_ISA_AVX2) {
        fill(cpu_fill_float_avx2);
        fill(cpu_fill_q32_avx2);
        fill(cpu_fill_kquants_avx2);
        /* RADIANCE_CPU_RELAYOUT=0 keeps every weight as stored: no copies
        ** (less memory), ggml's stored-layout arithmetic everywhere */
        const char *relayout = getenv("RADIANCE_CPU_RELAYOUT");
        if (!relayout || strcmp(relayout, "0") != 0) fill(cpu_fill_x8_avx2);
    }
    if (isa >= CPU_ISA_AVX512) {
        fill(cpu_fill_float_avx512);
        fill(cpu_fill_q32_avx512);
        fill(cpu_fill_kquants_avx512);
    }
    if (isa >= CPU_ISA_AVX2) fill(cpu_fill_q8_0_rows8_avx2);
#elif defined(__aarch64__)
    if (isa == CPU_ISA_NEON) {
        fill(cpu_fill_float_neon);
        fill(cpu_fill_q32_neon);
        fill(cpu_fill_kquants_neon);
    }
#endif
    cpu_isa = isa;
}

int cpu_set_isa(int isa)
{
    int have = cpu_isa_detect();
    if (isa != CPU_ISA_PORTABLE && isa > have) return -1;
#if defined(__aarch64__)
    if (isa != CPU_ISA_PORTABLE && isa != CPU_ISA_NEON) return -1;
#else
    if (isa == CPU_ISA_NEON) return -1;
#endif
    fill_tables(isa);
    return 0;
}

RadKernelLibrary rad_kernel_library;

static int init(void)
{
    fill_tables(cpu_isa_detect());
    int n = 0;
    for (int i = 0; i < N_ALL; i++)
        if (all_rows[i].launch) rows[n++] = all_rows[i];
    rad_kernel_library.n_rows = n;
    return 0;
}

/* Exported for tests/ops/test_cpu.c, which runs every row at every ISA level
** the machine has: "portable", "avx2", "avx512", "neon".  0, or -1 when the
** machine lacks the level. */
__attribute__((visibility("default"))) int rad_cpu_set_isa(const char *name)
{
    for (int i = CPU_ISA_PORTABLE; i <= CPU_ISA_NEON; i++)
        if (strcmp(name, cpu_isa_name(i)) == 0) return cpu_set_isa(i);
    return -1;
}

__attribute__((visibility("default"))) const char *rad_cpu_isa(void) { return cpu_isa_name(cpu_isa); }

RadKernelLibrary rad_kernel_library = {
    RAD_KERNEL_LIBRARY_SIZES,
    .name = "cpu",
    .description = "SIMD, multithreaded kernels: AVX2/AVX-512/NEON chosen at run time, portable C otherwise",
    .n_schemas = RAD_OP_SCHEMA_COUNT,
    .schemas = rad_op_schemas,
    .n_rows = 0,
    .rows = rows,
    .init = init,
    .preference = 50,          /* before the reference library in the default order */
};
