/*
** test_gemma3_graph.c: the graph the gemma3 plugin declares and issues, read
** through the recording builder (the pattern of test_llama_graph.c).
**
** The plugin (arch/gemma3/gemma3.c with the blocks in arch/common) is loaded
** from $RADIANCE_HOME/plugins/arch the way the engine loads it; its
** rad_decl_* and rad_issue calls land in recording_builder.c, which writes
** each one down as a line of text.
**
**   golden test   declares a two-layer Gemma 3 (one sliding-window layer, one
**                 global layer with linear RoPE scaling) as transformers 5
**                 writes its config, issues one 5-row prefill step, and
**                 compares the whole log with tests/arch/expected/gemma3_f32.txt.
**                 After an intended change, rerun with RADIANCE_UPDATE_GOLDEN=1,
**                 read the diff and commit it.
**   focused tests pin single behaviours (the post-sublayer norms, the two
**                 RoPE bases, the window, the score scale, the embedding scale,
**                 the (1 + w) norm offset, older and multimodal configs, the
**                 nested checkpoint names, ...) so they still say what broke
**                 when the expected file is rewritten.
**
** No kernel runs, so these tests need no weights and no GPU.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/rad_half.h"
#include "recording_builder.h"

/* ------------------------------------------------------------ the plugin */

typedef struct Plugin {
    const char *quant;
    void *handle;
    RadPluginInfoFn info;
    RadArchDeclareFn declare;
    RadArchStepFn step;
    RadArchHfNamesFn hf_names;
    RadArchReleaseFn release;
} Plugin;

/* Each plugin is opened once, on first use, and stays open until every test
** has run; a plugin serves one model at a time, so each declare replaces the
** last. */
static Plugin plugins[] = {{.quant = "f32"}, {.quant = "bf16"}, {.quant = "q8_0"}};

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
    snprintf(path, sizeof path, "%s/plugins/arch/gemma3_%s.so", home, quant);
    p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle) fail_msg("cannot load %s: %s (run `make all` first)", path, dlerror());
    p->info = (RadPluginInfoFn)dlsym(p->handle, "rad_plugin_info");
    p->declare = (RadArchDeclareFn)dlsym(p->handle, "rad_arch_declare");
    p->step = (RadArchStepFn)dlsym(p->handle, "rad_arch_step");
    p->hf_names = (RadArchHfNamesFn)dlsym(p->handle, "rad_arch_hf_names");
    p->release = (RadArchReleaseFn)dlsym(p->handle, "rad_arch_release");
    assert_non_null(p->info);
    assert_non_null(p->declare);
    assert_non_null(p->step);
    return p;
}

/* Unload as the engine does: release, then close, so a leak checker sees
** anything the plugin forgets. */
static int close_plugins(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof plugins / sizeof *plugins; i++) {
        Plugin *p = &plugins[i];
        if (!p->handle) continue;
        dlclose(p->handle);
        p->handle = NULL;
    }
    return 0;
}

/* ------------------------------------------------------------ the models */

#define KV_INT(k, v) ((RadMetaKV){.key = (k), .type = RAD_META_INT, .i = (v), .f = (double)(v)})
#define KV_FLOAT(k, v) ((RadMetaKV){.key = (k), .type = RAD_META_FLOAT, .i = (int64_t)(v), .f = (v)})
#define KV_STR(k, v) ((RadMetaKV){.key = (k), .type = RAD_META_STRING, .s = (v)})

#define MAX_KV 24

/* The metadata the loader would hand the plugin, with room for its table
** (keys are copied, so a test may build them with a prefix). */
typedef struct Model {
    RadModelMeta meta;
    RadMetaKV kv[MAX_KV];
    char keys[MAX_KV][96];
} Model;

static void add_kv(Model *m, RadMetaKV kv)
{
    assert_true(m->meta.n_kv < MAX_KV);
    snprintf(m->keys[m->meta.n_kv], sizeof m->keys[0], "%s", kv.key);
    kv.key = m->keys[m->meta.n_kv];
    m->kv[m->meta.n_kv++] = kv;
}

/* Replace the value of a key the model already has, or add it. */
static void set_kv(Model *m, RadMetaKV kv)
{
    for (int i = 0; i < m->meta.n_kv; i++)
        if (strcmp(m->keys[i], kv.key) == 0) {
            kv.key = m->keys[i];
            m->kv[i] = kv;
            return;
        }
    add_kv(m, kv);
}

/* Drop a key the model has. */
static void remove_kv(Model *m, const char *key)
{
    for (int i = 0; i < m->meta.n_kv; i++)
        if (strcmp(m->keys[i], key) == 0) {
            for (int j = i + 1; j < m->meta.n_kv; j++) {
                memcpy(m->keys[j - 1], m->keys[j], sizeof m->keys[j]);
                m->kv[j - 1] = m->kv[j];
                m->kv[j - 1].key = m->keys[j - 1];
            }
            m->meta.n_kv--;
            return;
        }
    fail_msg("the model has no key '%s' to remove", key);
}

#define WINDOW 16
#define QPAS 48.0               /* query_pre_attn_scalar, not head_dim 32 */
#define GLOBAL_THETA 1e6
#define LOCAL_THETA 10000.0
#define GLOBAL_FACTOR 8.0
#define FINAL_SOFTCAP 30.0

static void base_meta(Model *m, const char *quant, const char *hf_arch)
{
    memset(m, 0, sizeof *m);
    m->meta = (RadModelMeta){
        .struct_size = sizeof(RadModelMeta), .arch_id = "gemma3", .quant = quant,
        .hf_arch = hf_arch, .name = "tiny-gemma3",
        .n_layers = 2, .n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 32, .n_ff = 128,
        .n_vocab = 1000, .n_ctx_train = 512, .rms_eps = 1e-6,
        /* what the converter writes when the config has no top-level
        ** rope_theta: the plugin must read rope_parameters instead */
        .rope_theta = 10000.0, .kv = m->kv,
    };
}

/* A Gemma 3 as transformers 5 writes it: layer_types, per-type
** rope_parameters (linear scaling on the global layer), final soft-cap.  The
** keys sit under `prefix` ("" or "text_config."), as a multimodal config
** nests them. */
static void gemma3_model_at(Model *m, const char *quant, const char *hf_arch, const char *prefix)
{
    base_meta(m, quant, hf_arch);
    static const struct { const char *key; int type; double v; const char *s; } keys[] = {
        {"tie_word_embeddings", RAD_META_INT, 1, NULL},
        {"hidden_activation", RAD_META_STRING, 0, "gelu_pytorch_tanh"},
        {"query_pre_attn_scalar", RAD_META_INT, QPAS, NULL},
        {"sliding_window", RAD_META_INT, WINDOW, NULL},
        {"layer_types.0", RAD_META_STRING, 0, "sliding_attention"},
        {"layer_types.1", RAD_META_STRING, 0, "full_attention"},
        {"layer_types.length", RAD_META_INT, 2, NULL},
        {"rope_parameters.sliding_attention.rope_type", RAD_META_STRING, 0, "default"},
        {"rope_parameters.sliding_attention.rope_theta", RAD_META_FLOAT, LOCAL_THETA, NULL},
        {"rope_parameters.full_attention.rope_type", RAD_META_STRING, 0, "linear"},
        {"rope_parameters.full_attention.rope_theta", RAD_META_FLOAT, GLOBAL_THETA, NULL},
        {"rope_parameters.full_attention.factor", RAD_META_FLOAT, GLOBAL_FACTOR, NULL},
        {"final_logit_softcapping", RAD_META_FLOAT, FINAL_SOFTCAP, NULL},
        {"use_bidirectional_attention", RAD_META_INT, 0, NULL},
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s%s", prefix, keys[i].key);
        RadMetaKV kv = keys[i].type == RAD_META_STRING ? KV_STR(key, keys[i].s)
                     : keys[i].type == RAD_META_INT ? KV_INT(key, (int64_t)keys[i].v)
                     : KV_FLOAT(key, keys[i].v);
        add_kv(m, kv);
    }
}

static void gemma3_model(Model *m, const char *quant)
{
    gemma3_model_at(m, quant, "Gemma3ForCausalLM", "");
}

/* The same model as an older (transformers 4) config writes it: no
** layer_types (every 3rd layer global), rope_theta / rope_local_base_freq /
** rope_scaling.  Three layers, so layers 0 and 1 are local, 2 global. */
static void gemma3_legacy_model(Model *m)
{
    base_meta(m, "f32", "Gemma3ForCausalLM");
    m->meta.n_layers = 3;
    m->meta.rope_theta = GLOBAL_THETA;
    add_kv(m, KV_INT("query_pre_attn_scalar", (int64_t)QPAS));
    add_kv(m, KV_INT("sliding_window", WINDOW));
    add_kv(m, KV_INT("sliding_window_pattern", 3));
    add_kv(m, KV_FLOAT("rope_theta", GLOBAL_THETA));
    add_kv(m, KV_FLOAT("rope_local_base_freq", LOCAL_THETA));
    add_kv(m, KV_STR("rope_scaling.rope_type", "linear"));
    add_kv(m, KV_FLOAT("rope_scaling.factor", GLOBAL_FACTOR));
}

/* One sequence, up to 32 rows a step, 128 positions, one logits row. */
static RadBuildCtx deployment(void)
{
    return (RadBuildCtx){
        .struct_size = sizeof(RadBuildCtx), .rank = 0, .world_size = 1, .max_tok = 32, .max_seqs = 1,
        .max_ctx = 128, .max_out_rows = 1, .kv_enc = RAD_ENC_F16, .scope = "",
    };
}

static const int32_t prompt_ids[5] = {11, 22, 33, 44, 55};
static const int32_t prompt_positions[5] = {0, 1, 2, 3, 4};
static const int32_t prompt_cu_seqlens[2] = {0, 5};
static const int32_t prompt_seq_ids[1] = {0};
static const int32_t prompt_token_seq[5] = {0, 0, 0, 0, 0};
static const int32_t prompt_out_ids[1] = {4};

static RadBatch prefill(int n_out)
{
    return (RadBatch){
        .struct_size = sizeof(RadBatch), .phase = RAD_PHASE_PREFILL, .n_tok = 5, .n_seq = 1,
        .n_seq_decode = 0, .token_ids = prompt_ids, .positions = prompt_positions,
        .cu_seqlens = prompt_cu_seqlens, .seq_ids = prompt_seq_ids, .token_seq = prompt_token_seq,
        .n_out = n_out, .out_ids = n_out ? prompt_out_ids : NULL,
    };
}

/* ------------------------------------------------------------ running */

static RadBuilder *declare(const char *quant, const Model *m, int *rc, const char *unresolved_op)
{
    const Plugin *p = plugin(quant);
    RadBuilder *b = rec_builder_new();
    if (unresolved_op) rec_set_unresolved(b, unresolved_op);
    RadBuildCtx ctx = deployment();
    void *instance = NULL;
    *rc = p->declare(b, &m->meta, &ctx, &instance);
    rec_builder_own_instance(b, instance, p->release);
    return b;
}

static RadBuilder *declare_and_step(const char *quant, const Model *m, int n_out, const char *unresolved_op)
{
    int rc;
    RadBuilder *b = declare(quant, m, &rc, unresolved_op);
    if (rc != RAD_OK || rec_fail_count(b) > 0)
        fail_msg("declare returned %d; first failure: %s", rc, rec_fail_count(b) ? rec_fail(b, 0) : "(none)");
    RadCtx *c = rec_ctx_new(b);
    RadBatch batch = prefill(n_out);
    plugin(quant)->step(rec_builder_instance(b), c, &batch);
    assert_int_equal(rad_step_status(c), RAD_OK);
    rec_ctx_free(c);
    return b;
}

static RadBuilder *gemma3_run(int n_out)
{
    Model m;
    gemma3_model(&m, "f32");
    return declare_and_step("f32", &m, n_out, NULL);
}

/* --------------------------------------------------------- golden file */

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, n, out);
    fclose(out);
    fclose(f);
    return text;
}

/* The length of the line at `at` (without its newline). */
static int line_len(const char *at)
{
    const char *end = strchr(at, '\n');
    return end ? (int)(end - at) : (int)strlen(at);
}

/* Compare the recorded log with tests/arch/expected/<name>.txt, or write it
** when RADIANCE_UPDATE_GOLDEN=1; the first differing line is printed. */
static void compare_with_expected(const RadBuilder *b, const char *name)
{
    const char *src = getenv("RADIANCE_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/arch/expected/%s.txt", src ? src : ".", name);
    char *actual = rec_log_text(b);

    const char *update = getenv("RADIANCE_UPDATE_GOLDEN");
    if (update && strcmp(update, "1") == 0) {
        FILE *f = fopen(path, "wb");
        if (!f) fail_msg("cannot write %s (does tests/arch/expected exist?)", path);
        fputs(actual, f);
        fclose(f);
        printf("RADIANCE_UPDATE_GOLDEN=1: wrote %s\n", path);
        free(actual);
        return;
    }
    char *expected = read_text(path);
    if (!expected) {
        free(actual);
        fail_msg("cannot read %s: create it with RADIANCE_UPDATE_GOLDEN=1 and review it", path);
    }
    const char *e = expected, *a = actual;
    for (int line = 1; *e || *a; line++) {
        int el = line_len(e), al = line_len(a);
        if (el == al && memcmp(e, a, (size_t)el) == 0) {
            e += el + (e[el] ? 1 : 0);
            a += al + (a[al] ? 1 : 0);
            continue;
        }
        print_error("%s differs from the recorded log at line %d:\n  expected: %.*s\n  recorded: %.*s\n"
                    "(if the change is intended, rerun with RADIANCE_UPDATE_GOLDEN=1 and review the diff)\n",
                    path, line, el, *e ? e : "<end of file>", al, *a ? a : "<end of log>");
        free(expected);
        free(actual);
        fail();
    }
    free(expected);
    free(actual);
}

/* ---------------------------------------------------------- small helpers */

static int issued_op_is(const RadBuilder *b, int i, const char *op_name)
{
    const char *name = rec_op_name(b, rec_issue_op(b, i));
    return name && strcmp(name, op_name) == 0;
}

/* The n-th declared op (0-based) called op_name, or -1. */
static rad_op nth_op(const RadBuilder *b, const char *op_name, int n)
{
    for (rad_op op = 0; op < rec_op_count(b); op++)
        if (strcmp(rec_op_name(b, op), op_name) == 0 && n-- == 0) return op;
    return -1;
}

static int count_ops(const RadBuilder *b, const char *op_name)
{
    int n = 0;
    for (rad_op op = 0; op < rec_op_count(b); op++) n += strcmp(rec_op_name(b, op), op_name) == 0;
    return n;
}

/* The log line that starts with `start`, or NULL. */
static const char *log_line_starting(const RadBuilder *b, const char *start)
{
    for (int i = 0; i < rec_log_count(b); i++)
        if (strncmp(rec_log_line(b, i), start, strlen(start)) == 0) return rec_log_line(b, i);
    return NULL;
}

static int noted(const RadBuilder *b, const char *text)
{
    for (int i = 0; i < rec_note_count(b); i++)
        if (strstr(rec_note(b, i), text)) return 1;
    return 0;
}

static const char *weight_of(const RadBuilder *b, rad_op op, int i)
{
    return rec_weight_name(b, rec_op_weight(b, op, i));
}

/* ------------------------------------------------------------ the tests */

/* Pins the whole two-layer graph: every declaration and issue, line by line. */
static void test_gemma3_matches_expected(void **state)
{
    (void)state;
    RadBuilder *b = gemma3_run(1);
    compare_with_expected(b, "gemma3_f32");
    rec_builder_free(b);
}

/* Pins a layer's issue order: norm, attention with q/k norms, the post-attention
** norm of delta in place, the fused residual add + pre-feed-forward norm, GeGLU,
** the post-feed-forward norm of delta in place. */
static void test_layer_issues_post_norms_around_each_sublayer(void **state)
{
    (void)state;
    RadBuilder *b = gemma3_run(1);
    static const char *const order[] = {
        "embed_lookup", "scale_rows",
        /* layer 0 */
        "rmsnorm", "gemm_nt", "gemm_nt", "gemm_nt", "qk_norm", "qk_norm", "rope", "rope", "kv_store", "attn_paged",
        "gemm_nt", "rmsnorm", "rmsnorm_add", "gemm_nt", "gemm_nt", "gelu_mul", "gemm_nt", "rmsnorm",
        /* layer 1 */
        "rmsnorm_add", "gemm_nt", "gemm_nt", "gemm_nt", "qk_norm", "qk_norm", "rope", "rope", "kv_store",
        "attn_paged", "gemm_nt", "rmsnorm", "rmsnorm_add", "gemm_nt", "gemm_nt", "gelu_mul", "gemm_nt", "rmsnorm",
        /* head */
        "rmsnorm_add", "gather_rows", "logits_gemm",
    };
    const int n = (int)(sizeof order / sizeof *order);
    assert_int_equal(rec_issue_count(b), n);
    for (int i = 0; i < n; i++)
        if (!issued_op_is(b, i, order[i]))
            fail_msg("issue %d is %s, expected %s", i, rec_op_name(b, rec_issue_op(b, i)), order[i]);

    /* the post norms read and write delta, with their own weights */
    static const char *const post[4] = {"blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight",
                                        "blk.1.post_attention_norm.weight", "blk.1.post_ffw_norm.weight"};
    static const int post_issue[4] = {13, 19, 31, 37};
    for (int i = 0; i < 4; i++) {
        int at = post_issue[i];
        assert_int_equal(rec_issue_operand_count(b, at), 3);
        RadOperand in = rec_issue_operand(b, at, 0), w = rec_issue_operand(b, at, 1), out = rec_issue_operand(b, at, 2);
        assert_int_equal(in.kind, RAD_OPND_BUF);
        assert_string_equal(rec_buffer_name(b, in.id), "delta");
        assert_int_equal(out.kind, RAD_OPND_BUF);
        assert_string_equal(rec_buffer_name(b, out.id), "delta");
        assert_int_equal(w.kind, RAD_OPND_WEIGHT);
        assert_string_equal(rec_weight_name(b, w.id), post[i]);
    }
    /* the fused adds carry the pre-norms: ffn_norm after attention, attn_norm of the next layer */
    assert_string_equal(weight_of(b, rec_issue_op(b, 14), 0), "blk.0.ffn_norm.weight");
    assert_string_equal(weight_of(b, rec_issue_op(b, 20), 0), "blk.1.attn_norm.weight");
    assert_string_equal(weight_of(b, rec_issue_op(b, 38), 0), "output_norm.weight");
    rec_builder_free(b);
}

/* Pins the two layer kinds: the local layer has the window, a WINDOW KV group
** and the local RoPE base unscaled; the global layer full attention and the
** global base with linear scaling. */
static void test_local_and_global_layers(void **state)
{
    (void)state;
    RadBuilder *b = gemma3_run(1);
    assert_int_equal(count_ops(b, "attn_paged"), 2);
    assert_int_equal(rec_op_param(b, nth_op(b, "attn_paged", 0), "window")->i, WINDOW);
    assert_int_equal(rec_op_param(b, nth_op(b, "attn_paged", 1), "window")->i, 0);
    assert_non_null(log_line_starting(b, "kv_group kv_window kind=window n_head_kv=2 head_dim=32 window=16"));
    assert_non_null(log_line_starting(b, "kv_group kv kind=full n_head_kv=2 head_dim=32 window=0"));
    assert_non_null(log_line_starting(b, "bind_kv layer=0 group=kv_window"));
    assert_non_null(log_line_starting(b, "bind_kv layer=1 group=kv"));

    assert_int_equal(count_ops(b, "rope"), 4);          /* q and k of each layer */
    for (int i = 0; i < 4; i++) {
        rad_op op = nth_op(b, "rope", i);
        int global = i >= 2;
        assert_true(rec_op_param(b, op, "theta")->f == (global ? GLOBAL_THETA : LOCAL_THETA));
        assert_int_equal(rec_op_param(b, op, "scaling")->i, global ? 1 : 0);
        assert_true(rec_op_param(b, op, "factor")->f == (global ? GLOBAL_FACTOR : 1.0));
        assert_int_equal(rec_op_param(b, op, "mode")->i, 0);        /* HF's rotate_half */
        assert_int_equal(rec_op_param(b, op, "n_rot")->i, 32);
    }
    rec_builder_free(b);
}

/* Pins the score scale (query_pre_attn_scalar^-0.5, not head_dim^-0.5), the
** final logit soft-cap, and attention without a soft-cap even when the config
** sets one: transformers' Gemma 3 never applies attn_logit_softcapping. */
static void test_score_scale_and_softcaps(void **state)
{
    (void)state;
    Model m;
    gemma3_model(&m, "f32");
    add_kv(&m, KV_FLOAT("attn_logit_softcapping", 50.0));
    RadBuilder *b = declare_and_step("f32", &m, 1, NULL);
    for (int i = 0; i < 2; i++) {
        rad_op op = nth_op(b, "attn_paged", i);
        assert_true(rec_op_param(b, op, "scale")->f == pow(QPAS, -0.5));
        assert_true(rec_op_param(b, op, "softcap")->f == 0.0);
    }
    assert_true(noted(b, "attn_logit_softcapping 50 is ignored"));
    assert_true(rec_op_param(b, nth_op(b, "logits_gemm", 0), "softcap")->f == FINAL_SOFTCAP);
    rec_builder_free(b);

    /* no final_logit_softcapping (null in the released configs): no cap */
    gemma3_model(&m, "f32");
    remove_kv(&m, "final_logit_softcapping");
    b = declare_and_step("f32", &m, 1, NULL);
    assert_true(rec_op_param(b, nth_op(b, "logits_gemm", 0), "softcap")->f == 0.0);
    rec_builder_free(b);
}

/* Pins the embedding scale: scale_rows right after the lookup, by sqrt(n_embd)
** rounded to the embedding's encoding as transformers does (a bf16 model
** multiplies by bf16(sqrt(48)) = 6.9375, an f32 one by f32(sqrt(48))). */
static void test_embedding_is_scaled_by_sqrt_hidden(void **state)
{
    (void)state;
    RadBuilder *b = gemma3_run(1);
    assert_true(issued_op_is(b, 0, "embed_lookup"));
    assert_true(issued_op_is(b, 1, "scale_rows"));
    assert_true(rec_op_param(b, rec_issue_op(b, 1), "scale")->f == 8.0);
    rec_builder_free(b);

    static const char *const quants[] = {"f32", "bf16"};
    for (int q = 0; q < 2; q++) {
        Model m;
        gemma3_model(&m, quants[q]);
        m.meta.n_embd = 48;
        int rc;
        b = declare(quants[q], &m, &rc, NULL);
        assert_int_equal(rc, RAD_OK);
        double want = q == 0 ? (double)(float)sqrt(48.0) : (double)rad_bf16_to_f32(rad_f32_to_bf16((float)sqrt(48.0)));
        assert_true(rec_op_param(b, nth_op(b, "scale_rows", 0), "scale")->f == want);
        if (q == 1) assert_true(want == 6.9375);
        rec_builder_free(b);
    }
}

/* Pins (1 + w): every norm (the four per layer, q/k, final) has w_offset 1 for
** HF weights, and model.norm_offset = 0 (GGUF, where llama.cpp folded the 1
** into the weights) turns every one to 0. */
static void test_norm_offset_is_one_unless_the_metadata_says_otherwise(void **state)
{
    (void)state;
    static const char *const norm_ops[] = {"rmsnorm", "rmsnorm_add", "qk_norm"};
    for (int variant = 0; variant < 2; variant++) {
        Model m;
        gemma3_model(&m, "f32");
        if (variant == 1) add_kv(&m, KV_FLOAT("model.norm_offset", 0.0));
        RadBuilder *b = declare_and_step("f32", &m, 1, NULL);
        int n = 0;
        for (rad_op op = 0; op < rec_op_count(b); op++)
            for (size_t k = 0; k < sizeof norm_ops / sizeof *norm_ops; k++)
                if (strcmp(rec_op_name(b, op), norm_ops[k]) == 0) {
                    n++;
                    assert_true(rec_op_param(b, op, "w_offset")->f == (variant == 0 ? 1.0 : 0.0));
                }
        /* per layer 4 norms + 2 q/k norms, plus the final norm */
        assert_int_equal(n, 2 * 6 + 1);
        rec_builder_free(b);
    }
}

/* Pins an older config: sliding_window_pattern (every 3rd layer global),
** rope_theta for the global layers with rope_scaling, rope_local_base_freq for
** the local ones. */
static void test_legacy_config_keys(void **state)
{
    (void)state;
    Model m;
    gemma3_legacy_model(&m);
    RadBuilder *b = declare_and_step("f32", &m, 1, NULL);
    static const int window[3] = {WINDOW, WINDOW, 0};
    for (int l = 0; l < 3; l++) {
        assert_int_equal(rec_op_param(b, nth_op(b, "attn_paged", l), "window")->i, window[l]);
        rad_op rope = nth_op(b, "rope", 2 * l);
        assert_true(rec_op_param(b, rope, "theta")->f == (window[l] ? LOCAL_THETA : GLOBAL_THETA));
        assert_int_equal(rec_op_param(b, rope, "scaling")->i, window[l] ? 0 : 1);
        assert_true(rec_op_param(b, rope, "factor")->f == (window[l] ? 1.0 : GLOBAL_FACTOR));
        assert_true(rec_op_param(b, nth_op(b, "attn_paged", l), "scale")->f == pow(QPAS, -0.5));
    }
    /* tie_word_embeddings absent: Gemma ties by default */
    assert_non_null(rec_weight_decl(b, rec_find_weight(b, "output.weight"))->source);
    rec_builder_free(b);
}

/* Pins a multimodal config: the same keys under text_config give the very same
** graph as the text-only config. */
static void test_text_config_keys_give_the_same_graph(void **state)
{
    (void)state;
    Model flat, nested;
    gemma3_model(&flat, "f32");
    gemma3_model_at(&nested, "f32", "Gemma3ForConditionalGeneration", "text_config.");
    RadBuilder *a = declare_and_step("f32", &flat, 1, NULL);
    RadBuilder *b = declare_and_step("f32", &nested, 1, NULL);
    char *ta = rec_log_text(a), *tb = rec_log_text(b);
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
    rec_builder_free(a);
    rec_builder_free(b);
}

/* Pins the name map: GGUF names mapped from the HF text names, and the two
** roots of Gemma3ForConditionalGeneration (both generations) declared as
** name aliases before any weight, so the core tries them after the text
** names (the expansion itself is the builder's, pinned in
** tests/unit/test_build_abi.c). */
static void test_names_map_text_then_nested_checkpoints(void **state)
{
    (void)state;
    RadBuilder *b = gemma3_run(1);
    static const char *const aliases[] = {
        "alias model. model.language_model.",
        "alias model. language_model.model.",
        "alias lm_head. language_model.lm_head.",
    };
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++) {
        const char *line = rec_log_line(b, (int)i);
        if (!line || strcmp(line, aliases[i]) != 0)
            fail_msg("log line %zu is '%s', expected '%s'", i, line ? line : "(none)", aliases[i]);
    }
    static const char *const maps[] = {
        "map token_embd.weight COPY model.embed_tokens.weight",
        "map blk.1.attn_norm.weight COPY model.layers.1.input_layernorm.weight",
        "map blk.1.post_attention_norm.weight COPY model.layers.1.post_attention_layernorm.weight",
        "map blk.1.ffn_norm.weight COPY model.layers.1.pre_feedforward_layernorm.weight",
        "map blk.1.post_ffw_norm.weight COPY model.layers.1.post_feedforward_layernorm.weight",
        "map blk.1.attn_q_norm.weight COPY model.layers.1.self_attn.q_norm.weight",
        "map blk.1.attn_k.weight COPY model.layers.1.self_attn.k_proj.weight",
        "map blk.1.ffn_down.weight COPY model.layers.1.mlp.down_proj.weight",
        "map output_norm.weight COPY model.norm.weight",
    };
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++)
        if (!log_line_starting(b, maps[i])) fail_msg("no log line starts with: %s", maps[i]);
    /* tied: output.weight is a view with no map */
    rad_weight out = rec_find_weight(b, "output.weight");
    assert_string_equal(rec_weight_decl(b, out)->source, "token_embd.weight");
    assert_int_equal(rec_weight_map(b, out, NULL, NULL), 0);
    rec_builder_free(b);

    /* untied: lm_head.weight, or the nested model's */
    Model m;
    gemma3_model(&m, "f32");
    set_kv(&m, KV_INT("tie_word_embeddings", 0));
    b = declare_and_step("f32", &m, 1, NULL);
    assert_non_null(log_line_starting(b, "map output.weight COPY lm_head.weight"));
    rec_builder_free(b);
}

/* Pins the step contract: ops issued in nondecreasing declaration order, and
** every buffer an op is issued with was named in its reads or writes. */
static void test_issue_order_and_declared_uses(void **state)
{
    (void)state;
    RadBuilder *b = gemma3_run(1);
    for (int i = 0; i < rec_issue_count(b); i++) {
        rad_op op = rec_issue_op(b, i);
        assert_true(op >= 0 && op < rec_op_count(b));
        if (i > 0 && op < rec_issue_op(b, i - 1))
            fail_msg("issue %d (op %d %s) comes after op %d", i, op, rec_op_name(b, op), rec_issue_op(b, i - 1));
        for (int k = 0; k < rec_issue_operand_count(b, i); k++) {
            RadOperand o = rec_issue_operand(b, i, k);
            if (o.kind == RAD_OPND_BUF && !rec_op_uses(b, op, o.id))
                fail_msg("op %d %s is issued with buffer '%s' it never declared reading or writing", op,
                         rec_op_name(b, op), rec_buffer_name(b, o.id));
        }
    }
    rec_builder_free(b);
}

/* Pins a chunk that finishes no sequence: no gather_rows or logits_gemm. */
static void test_no_output_rows_issue_no_logits(void **state)
{
    (void)state;
    RadBuilder *with = gemma3_run(1), *without = gemma3_run(0);
    assert_int_equal(rec_issues_named(without, "gather_rows"), 0);
    assert_int_equal(rec_issues_named(without, "logits_gemm"), 0);
    assert_int_equal(rec_issue_count(without), rec_issue_count(with) - 2);
    assert_true(issued_op_is(without, rec_issue_count(without) - 1, "rmsnorm_add"));
    rec_builder_free(with);
    rec_builder_free(without);
}

/* Pins fusion as selection: with no rmsnorm_add kernel, add then rmsnorm. */
static void test_unfused_norm_falls_back_to_add_and_rmsnorm(void **state)
{
    (void)state;
    Model m;
    gemma3_model(&m, "f32");
    RadBuilder *b = declare_and_step("f32", &m, 1, "rmsnorm_add");
    assert_int_equal(rec_issues_named(b, "rmsnorm_add"), 0);
    /* residual adds: layer 1's attention norm, both ffn norms, the output norm */
    assert_int_equal(rec_issues_named(b, "add"), 4);
    /* those 4 + layer 0's attention norm + 4 post norms */
    assert_int_equal(rec_issues_named(b, "rmsnorm"), 9);
    for (int i = 0; i < rec_issue_count(b); i++)
        if (issued_op_is(b, i, "add")) assert_true(issued_op_is(b, i + 1, "rmsnorm"));
    assert_true(noted(b, "add + rmsnorm"));
    rec_builder_free(b);
}

/* Pins refusals by name: RoPE scaling other than linear, an exact-erf GELU,
** bidirectional attention. */
static void test_unserved_configs_fail_by_name(void **state)
{
    (void)state;
    static const struct { RadMetaKV kv; const char *needle; } cases[] = {
        {KV_STR("rope_parameters.full_attention.rope_type", "yarn"), "'yarn'"},
        {KV_STR("hidden_activation", "gelu"), "'gelu'"},
        {KV_INT("use_bidirectional_attention", 1), "use_bidirectional_attention"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Model m;
        gemma3_model(&m, "f32");
        set_kv(&m, cases[i].kv);
        int rc = RAD_OK;
        RadBuilder *b = declare("f32", &m, &rc, NULL);
        assert_int_not_equal(rc, RAD_OK);
        assert_int_equal(rec_fail_count(b), 1);
        if (!strstr(rec_fail(b, 0), cases[i].needle)) fail_msg("failure '%s' does not name %s", rec_fail(b, 0), cases[i].needle);
        rec_builder_free(b);
    }
}

/* Pins the q8_0 plugin's encodings: matrices q8_0, every norm f32. */
static void test_q8_0_plugin_quantizes_matrices_only(void **state)
{
    (void)state;
    Model m;
    gemma3_model(&m, "q8_0");
    RadBuilder *b = declare_and_step("q8_0", &m, 1, NULL);
    for (rad_weight w = 0; w < rec_weight_count(b); w++) {
        const RadWeightDecl *d = rec_weight_decl(b, w);
        assert_int_equal(d->enc, d->rank == 2 ? RAD_ENC_Q8_0 : RAD_ENC_F32);
    }
    for (rad_op op = 0; op < rec_op_count(b); op++)
        if (strcmp(rec_op_name(b, op), "gemm_nt") == 0 || strcmp(rec_op_name(b, op), "logits_gemm") == 0)
            assert_int_equal(rec_op_param(b, op, "enc")->i, RAD_ENC_Q8_0);
    rec_builder_free(b);
}

/* Pins the plugin's identity and the HF architectures it claims. */
static void test_plugin_identifies_itself(void **state)
{
    (void)state;
    const RadPluginInfo *info = plugin("f32")->info();
    assert_int_equal(info->abi_version, RAD_ARCH_ABI_VERSION);
    assert_int_equal(info->kind, RAD_PLUGIN_ARCH);
    assert_string_equal(info->name, "gemma3_f32");
    assert_string_equal(info->arch_id, "gemma3");
    assert_string_equal(info->quant, "f32");
    assert_non_null(plugin("f32")->hf_names);
    int text = 0, multimodal = 0;
    for (const char *const *n = plugin("f32")->hf_names(); *n; n++) {
        text += strcmp(*n, "Gemma3ForCausalLM") == 0;
        multimodal += strcmp(*n, "Gemma3ForConditionalGeneration") == 0;
    }
    assert_int_equal(text, 1);
    assert_int_equal(multimodal, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemma3_matches_expected),
        cmocka_unit_test(test_layer_issues_post_norms_around_each_sublayer),
        cmocka_unit_test(test_local_and_global_layers),
        cmocka_unit_test(test_score_scale_and_softcaps),
        cmocka_unit_test(test_embedding_is_scaled_by_sqrt_hidden),
        cmocka_unit_test(test_norm_offset_is_one_unless_the_metadata_says_otherwise),
        cmocka_unit_test(test_legacy_config_keys),
        cmocka_unit_test(test_text_config_keys_give_the_same_graph),
        cmocka_unit_test(test_names_map_text_then_nested_checkpoints),
        cmocka_unit_test(test_issue_order_and_declared_uses),
        cmocka_unit_test(test_no_output_rows_issue_no_logits),
        cmocka_unit_test(test_unfused_norm_falls_back_to_add_and_rmsnorm),
        cmocka_unit_test(test_unserved_configs_fail_by_name),
        cmocka_unit_test(test_q8_0_plugin_quantizes_matrices_only),
        cmocka_unit_test(test_plugin_identifies_itself),
    };
    return cmocka_run_group_tests(tests, NULL, close_plugins);
}
