/*
** test_gptoss_graph.c: what the gpt-oss plugin declares and issues, read
** through the recording builder (recording_builder.h).
**
** The golden fixtures (tests/golden) pin the numbers; these tests pin the
** pieces by name, so a failure says which one moved:
**   - the fused, transposed checkpoint tensors reach the expert stacks
**     through the name map's layout flags (gate even, up odd), biases too;
**   - the plugin quant "mxfp4" keeps the experts mxfp4 and the other
**     matrices bf16 (the router, norms, biases and sinks f32);
**   - attention takes each layer's sinks, layers alternate sliding and full,
**     RoPE is YaRN with truncate off, the router's bias is its gemm's bias
**     and routing is top k then softmax, the activation swiglu_oai with the
**     config's alpha and limit;
**   - configurations that make no model are refused at declare;
**   - the chat format is harmony.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recording_builder.h"
#include "../../kernels/ops/rad_op_values.h"

typedef struct Plugin {
    const char *quant;
    void *handle;
    RadArchDeclareFn declare;
    RadArchStepFn step;
    RadArchReleaseFn release;
    RadArchChatFormatFn chat_format;
} Plugin;

static Plugin plugins[] = {{.quant = "f32"}, {.quant = "mxfp4"}};

static const Plugin *plugin(const char *quant)
{
    Plugin *p = NULL;
    for (size_t i = 0; i < sizeof plugins / sizeof *plugins; i++)
        if (strcmp(plugins[i].quant, quant) == 0) p = &plugins[i];
    assert_non_null(p);
    if (p->handle) return p;
    const char *home = getenv("RADIANCE_HOME");
    if (!home) fail_msg("RADIANCE_HOME is not set: run through `make arch-test`, or set it to the build folder");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/arch/gptoss_%s.so", home, quant);
    p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle) fail_msg("cannot load %s: %s (run `make all` first)", path, dlerror());
    p->declare = (RadArchDeclareFn)dlsym(p->handle, "rad_arch_declare");
    p->step = (RadArchStepFn)dlsym(p->handle, "rad_arch_step");
    p->release = (RadArchReleaseFn)dlsym(p->handle, "rad_arch_release");
    p->chat_format = (RadArchChatFormatFn)dlsym(p->handle, "rad_arch_chat_format");
    assert_non_null(p->declare);
    assert_non_null(p->step);
    assert_non_null(p->chat_format);
    return p;
}

static int close_plugins(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof plugins / sizeof *plugins; i++)
        if (plugins[i].handle) {
            dlclose(plugins[i].handle);
            plugins[i].handle = NULL;
        }
    return 0;
}

#define KV_INT(k, v) ((RadMetaKV){.key = (k), .type = RAD_META_INT, .i = (v), .f = (double)(v)})
#define KV_FLOAT(k, v) ((RadMetaKV){.key = (k), .type = RAD_META_FLOAT, .i = (int64_t)(v), .f = (v)})
#define KV_STR(k, v) ((RadMetaKV){.key = (k), .type = RAD_META_STRING, .s = (v)})

typedef struct Model {
    RadModelMeta meta;
    RadMetaKV kv[24];
} Model;

static void add_kv(Model *m, RadMetaKV kv)
{
    assert_true(m->meta.n_kv < (int)(sizeof m->kv / sizeof *m->kv));
    m->kv[m->meta.n_kv++] = kv;
}

/* The golden fixture's geometry: 2 layers (sliding, full), 8 experts of
** 32, top 2, YaRN x4 over 32 positions, swiglu_limit 2. */
static void gpt_oss_model(Model *m, const char *quant)
{
    memset(m, 0, sizeof *m);
    m->meta = (RadModelMeta){
        .struct_size = sizeof(RadModelMeta), .arch_id = "gptoss", .quant = quant,
        .hf_arch = "GptOssForCausalLM", .name = "tiny-gpt-oss",
        .n_layers = 2, .n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 32, .n_ff = 32,
        .n_vocab = 512, .n_ctx_train = 128, .rms_eps = 1e-5, .rope_theta = 150000.0, .kv = m->kv,
        .n_expert = 8, .n_expert_used = 2,
    };
    add_kv(m, KV_INT("model.n_ff_expert", 32));
    add_kv(m, KV_INT("tie_word_embeddings", 0));
    add_kv(m, KV_INT("sliding_window", 16));
    add_kv(m, KV_STR("layer_types.0", "sliding_attention"));
    add_kv(m, KV_STR("layer_types.1", "full_attention"));
    add_kv(m, KV_STR("rope_parameters.rope_type", "yarn"));
    add_kv(m, KV_FLOAT("rope_parameters.rope_theta", 150000.0));
    add_kv(m, KV_FLOAT("rope_parameters.factor", 4.0));
    add_kv(m, KV_INT("rope_parameters.original_max_position_embeddings", 32));
    add_kv(m, KV_FLOAT("rope_parameters.beta_fast", 32.0));
    add_kv(m, KV_FLOAT("rope_parameters.beta_slow", 1.0));
    add_kv(m, KV_INT("rope_parameters.truncate", 0));
    add_kv(m, KV_FLOAT("swiglu_limit", 2.0));
}

static RadBuildCtx deployment(void)
{
    return (RadBuildCtx){
        .struct_size = sizeof(RadBuildCtx), .world_size = 1, .max_tok = 32, .max_seqs = 1, .max_ctx = 128,
        .max_out_rows = 1, .kv_enc = RAD_ENC_F16, .scope = "",
    };
}

static RadBuilder *declare(const char *quant, const Model *m, int *rc)
{
    const Plugin *p = plugin(quant);
    RadBuilder *b = rec_builder_new();
    RadBuildCtx ctx = deployment();
    void *instance = NULL;
    *rc = p->declare(b, &m->meta, &ctx, &instance);
    rec_builder_own_instance(b, instance, p->release);
    return b;
}

static RadBuilder *declare_ok(const char *quant)
{
    Model m;
    gpt_oss_model(&m, quant);
    int rc;
    RadBuilder *b = declare(quant, &m, &rc);
    if (rc != RAD_OK || rec_fail_count(b) > 0)
        fail_msg("declare returned %d; first failure: %s", rc, rec_fail_count(b) ? rec_fail(b, 0) : "(none)");
    return b;
}

static const RadWeightDecl *weight(const RadBuilder *b, const char *name)
{
    rad_weight w = rec_find_weight(b, name);
    if (w < 0) fail_msg("no weight %s", name);
    return rec_weight_decl(b, w);
}

/* The map mode (with flags) and first source of a weight. */
static int map_of(const RadBuilder *b, const char *name, const char **first)
{
    int n = 0;
    int mode = rec_weight_map(b, rec_find_weight(b, name), &n, first);
    assert_int_equal(n, 1);
    return mode;
}

/* The i-th op called `name`, or -1. */
static rad_op nth_op(const RadBuilder *b, const char *name, int i)
{
    for (rad_op op = 0; op < rec_op_count(b); op++)
        if (strcmp(rec_op_name(b, op), name) == 0 && i-- == 0) return op;
    return -1;
}

static int64_t param_i(const RadBuilder *b, rad_op op, const char *name)
{
    const RadParam *p = rec_op_param(b, op, name);
    if (!p) fail_msg("op %s has no parameter %s", rec_op_name(b, op), name);
    return p->i;
}

static double param_f(const RadBuilder *b, rad_op op, const char *name)
{
    const RadParam *p = rec_op_param(b, op, name);
    if (!p) fail_msg("op %s has no parameter %s", rec_op_name(b, op), name);
    return p->f;
}

/* ----------------------------------------------------------------- tests */

/* gate_up_proj [E, hidden, 2 n_ff] becomes the gate stack (even rows) and
** the up stack (odd rows), both read transposed; down_proj transposed; the
** fused bias split the same way; every stack has a slice per expert. */
static void test_expert_name_maps(void **state)
{
    (void)state;
    RadBuilder *b = declare_ok("f32");
    const char *src = NULL;
    struct { const char *w, *src; int flags; } want[] = {
        {"blk.1.ffn_gate_exps.weight", "model.layers.1.mlp.experts.gate_up_proj", RAD_MAP_TRANSPOSED | RAD_MAP_ROWS_EVEN},
        {"blk.1.ffn_up_exps.weight", "model.layers.1.mlp.experts.gate_up_proj", RAD_MAP_TRANSPOSED | RAD_MAP_ROWS_ODD},
        {"blk.1.ffn_down_exps.weight", "model.layers.1.mlp.experts.down_proj", RAD_MAP_TRANSPOSED},
        {"blk.1.ffn_gate_exps.bias", "model.layers.1.mlp.experts.gate_up_proj_bias", RAD_MAP_ROWS_EVEN},
        {"blk.1.ffn_up_exps.bias", "model.layers.1.mlp.experts.gate_up_proj_bias", RAD_MAP_ROWS_ODD},
        {"blk.1.ffn_down_exps.bias", "model.layers.1.mlp.experts.down_proj_bias", 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        assert_int_equal(map_of(b, want[i].w, &src), RAD_MAP_COPY | want[i].flags);
        assert_string_equal(src, want[i].src);
        const RadWeightDecl *d = weight(b, want[i].w);
        assert_int_equal(d->n_slices, 8);
        assert_int_equal(d->access, RAD_ACCESS_CONDITIONAL);
        assert_int_equal(d->group, (int32_t)RAD_GROUP_EXPERTS + 8);     /* layer 1's first expert unit */
    }
    const RadWeightDecl *g = weight(b, "blk.1.ffn_gate_exps.weight"), *d = weight(b, "blk.1.ffn_down_exps.weight");
    assert_true(g->rank == 3 && g->shape[0] == 8 && g->shape[1] == 32 && g->shape[2] == 64);
    assert_true(d->rank == 3 && d->shape[0] == 8 && d->shape[1] == 64 && d->shape[2] == 32);
    assert_int_equal(map_of(b, "blk.0.ffn_gate_inp.bias", &src), RAD_MAP_COPY);
    assert_string_equal(src, "model.layers.0.mlp.router.bias");
    assert_int_equal(map_of(b, "blk.0.attn_sinks.weight", &src), RAD_MAP_COPY);
    assert_string_equal(src, "model.layers.0.self_attn.sinks");
    rec_builder_free(b);
}

/* --quant mxfp4: the experts mxfp4, the other matrices bf16, the router,
** biases, sinks and norms f32. */
static void test_mxfp4_encodings(void **state)
{
    (void)state;
    RadBuilder *b = declare_ok("mxfp4");
    static const char *mxfp4[] = {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight"};
    static const char *bf16[] = {"token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.1.attn_output.weight"};
    static const char *f32[] = {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_inp.bias", "blk.0.ffn_gate_exps.bias",
                                "blk.1.attn_sinks.weight", "blk.1.attn_q.bias", "blk.0.attn_norm.weight"};
    for (size_t i = 0; i < sizeof mxfp4 / sizeof *mxfp4; i++) assert_int_equal(weight(b, mxfp4[i])->enc, RAD_ENC_MXFP4);
    for (size_t i = 0; i < sizeof bf16 / sizeof *bf16; i++) assert_int_equal(weight(b, bf16[i])->enc, RAD_ENC_BF16);
    for (size_t i = 0; i < sizeof f32 / sizeof *f32; i++) assert_int_equal(weight(b, f32[i])->enc, RAD_ENC_F32);
    rad_op gate = nth_op(b, "moe_gemm", 0);
    assert_int_equal(param_i(b, gate, "enc"), RAD_ENC_MXFP4);
    rec_builder_free(b);
}

/* The layer's ops: sinks into attention, windows alternating, YaRN with
** truncate off, the router's bias in its gemm, top-k-then-softmax without
** renormalisation, biased expert products, swiglu_oai with the config's
** limit and alpha's default; the step issues the sinks. */
static void test_layer_ops(void **state)
{
    (void)state;
    RadBuilder *b = declare_ok("f32");
    for (int l = 0; l < 2; l++) {
        rad_op attn = nth_op(b, "attn_paged", l);
        assert_true(attn >= 0);
        assert_int_equal(rec_op_weight_count(b, attn), 1);
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_sinks.weight", l);
        assert_int_equal(rec_op_weight(b, attn, 0), rec_find_weight(b, name));
        assert_int_equal(param_i(b, attn, "window"), l == 0 ? 16 : 0);
    }
    rad_op rope = nth_op(b, "rope", 0);
    assert_int_equal(param_i(b, rope, "scaling"), RAD_ROPE_SCALING_YARN);
    assert_int_equal(param_i(b, rope, "truncate"), RAD_ROPE_TRUNCATE_OFF);
    assert_int_equal(param_i(b, rope, "orig_ctx"), 32);
    assert_true(param_f(b, rope, "factor") == 4.0 && param_f(b, rope, "theta") == 150000.0);

    rad_op router = -1;
    for (int i = 0; (router = nth_op(b, "gemm_nt", i)) >= 0; i++)
        if (param_i(b, router, "N") == 8) break;
    assert_true(router >= 0);
    assert_int_equal(rec_op_weight_count(b, router), 2);
    assert_int_equal(rec_op_weight(b, router, 1), rec_find_weight(b, "blk.0.ffn_gate_inp.bias"));
    rad_op route = nth_op(b, "router_topk", 0);
    assert_int_equal(param_i(b, route, "mode"), RAD_ROUTER_TOPK_SOFTMAX);
    assert_int_equal(param_i(b, route, "renorm"), RAD_ROUTER_RENORM_OFF);
    assert_int_equal(param_i(b, route, "k"), 2);
    for (int i = 0; i < 3; i++) assert_int_equal(rec_op_weight_count(b, nth_op(b, "moe_gemm", i)), 2);
    rad_op act = nth_op(b, "swiglu_oai", 0);
    assert_true(act >= 0 && nth_op(b, "silu_mul", 0) < 0);
    assert_true(param_f(b, act, "limit") == 2.0 && param_f(b, act, "alpha") == 1.702);

    static const int32_t ids[3] = {1, 2, 3}, pos[3] = {0, 1, 2}, cu[2] = {0, 3}, seq[1] = {0}, tseq[3] = {0},
                         out[1] = {2};
    RadBatch batch = {.struct_size = sizeof(RadBatch), .phase = RAD_PHASE_PREFILL, .n_tok = 3, .n_seq = 1,
                      .token_ids = ids, .positions = pos, .cu_seqlens = cu, .seq_ids = seq, .token_seq = tseq,
                      .n_out = 1, .out_ids = out};
    RadCtx *c = rec_ctx_new(b);
    plugin("f32")->step(rec_builder_instance(b), c, &batch);
    assert_int_equal(rad_step_status(c), RAD_OK);
    rec_ctx_free(c);
    int seen = 0;
    for (int i = 0; i < rec_issue_count(b); i++) {
        if (strcmp(rec_op_name(b, rec_issue_op(b, i)), "attn_paged") != 0) continue;
        RadOperand s = rec_issue_operand(b, i, 3);
        assert_int_equal(s.kind, RAD_OPND_WEIGHT);
        assert_string_equal(rec_weight_name(b, s.id), seen ? "blk.1.attn_sinks.weight" : "blk.0.attn_sinks.weight");
        seen++;
    }
    assert_int_equal(seen, 2);
    assert_int_equal(rec_issues_named(b, "swiglu_oai"), 2);
    rec_builder_free(b);
}

/* Configurations that make no model fail at declare with a message. */
static void test_refusals(void **state)
{
    (void)state;
    Model m;
    int rc;
    gpt_oss_model(&m, "f32");
    m.meta.n_expert_used = 9;
    RadBuilder *b = declare("f32", &m, &rc);
    assert_true(rc != RAD_OK && rec_fail_count(b) > 0 && strstr(rec_fail(b, 0), "num_experts_per_tok = 9"));
    rec_builder_free(b);

    gpt_oss_model(&m, "f32");
    m.kv[m.meta.n_kv - 1] = KV_FLOAT("swiglu_limit", 0.0);
    b = declare("f32", &m, &rc);
    assert_true(rc != RAD_OK && rec_fail_count(b) > 0 && strstr(rec_fail(b, 0), "swiglu_limit = 0"));
    rec_builder_free(b);

    gpt_oss_model(&m, "f32");
    m.kv[5] = KV_STR("rope_parameters.rope_type", "llama3");
    b = declare("f32", &m, &rc);
    assert_true(rc != RAD_OK && rec_fail_count(b) > 0 && strstr(rec_fail(b, 0), "'llama3' is not served"));
    rec_builder_free(b);
}

/* The plugin hands the harmony format (rendering and parsing it are
** tests/text's: test_chat.c against gpt-oss's own template, test_reply_parser.c
** for the analysis and final channels and tool calls). */
static void test_chat_format(void **state)
{
    (void)state;
    Model m;
    gpt_oss_model(&m, "f32");
    const RadChatFormat *f = plugin("f32")->chat_format(&m.meta);
    assert_non_null(f);
    assert_string_equal(f->name, "gpt-oss");
    assert_int_equal(f->style, RAD_CHAT_STYLE_HARMONY);
    assert_null(f->choices);
    assert_string_equal(f->reasoning_open, "<|channel|>analysis<|message|>");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expert_name_maps), cmocka_unit_test(test_mxfp4_encodings),
        cmocka_unit_test(test_layer_ops),        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_chat_format),
    };
    return cmocka_run_group_tests_name("gptoss_graph", tests, NULL, close_plugins);
}
