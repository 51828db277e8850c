/*
** test_llama_graph.c: the graph the llama plugin declares and issues, read
** through the recording builder.
**
** The plugin (arch/llama/llama.c with the blocks in arch/common) is loaded
** from $RADIANCE_HOME/plugins/arch the way the engine loads it, but the
** rad_decl_* and rad_issue calls it makes land in recording_builder.c, which
** writes each one down as a line of text.  Two kinds of test read that log:
**
**   golden tests  declare a tiny Qwen3 and a tiny Llama with llama3 RoPE
**                 scaling, issue one 5-row prefill step, and compare the whole
**                 log with tests/arch/expected/<case>.txt.  Any change to what
**                 the plugin or a block declares shows up as a diff, printed
**                 with its line number.  After an intended change, rerun with
**                 RADIANCE_UPDATE_GOLDEN=1 to rewrite the files, read the diff
**                 and commit it.
**   focused tests pin single behaviours (Qwen3's q/k norms, the tied lm_head,
**                 issue order, RoPE scaling, ...) without the expected files,
**                 so they still say what broke when the files are rewritten.
**
** No kernel runs, so these tests need no weights and no GPU.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

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
static Plugin plugins[] = {{.quant = "f32"}, {.quant = "q8_0"}};

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
    snprintf(path, sizeof path, "%s/plugins/arch/llama_%s.so", home, quant);
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

/* Unload as the engine does: let the plugin free what declare kept, then
** close it, so a leak checker sees anything a plugin forgets. */
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

/* The metadata the loader would hand the plugin, with room for its table. */
typedef struct Model {
    RadModelMeta meta;
    RadMetaKV kv[16];
} Model;

static void add_kv(Model *m, RadMetaKV kv)
{
    assert_true(m->meta.n_kv < (int)(sizeof m->kv / sizeof *m->kv));
    m->kv[m->meta.n_kv++] = kv;
}

/* A Qwen3 the size of the golden fixtures: head_dim 32 is not n_embd / heads,
** and lm_head is tied to the embedding. */
static void qwen3_model(Model *m, const char *quant)
{
    memset(m, 0, sizeof *m);
    m->meta = (RadModelMeta){
        .struct_size = sizeof(RadModelMeta), .arch_id = "llama", .quant = quant,
        .hf_arch = "Qwen3ForCausalLM", .name = "tiny-qwen3",
        .n_layers = 2, .n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 32, .n_ff = 128,
        .n_vocab = 1000, .n_ctx_train = 512, .rms_eps = 1e-6, .rope_theta = 1e6, .kv = m->kv,
    };
    add_kv(m, KV_INT("tie_word_embeddings", 1));
    add_kv(m, KV_STR("rope_parameters.rope_type", "default"));
    add_kv(m, KV_FLOAT("rope_parameters.rope_theta", 1e6));
}

/* llama3 RoPE scaling as transformers 5 writes it.  The frequency factors
** and original context differ from the plugin's fallbacks (1, 4, 8192), so a
** key the plugin fails to read shows in the rope ops. */
#define LLAMA3_FACTOR 8.0
#define LLAMA3_LOW_FREQ 2.0
#define LLAMA3_HIGH_FREQ 6.0
#define LLAMA3_ORIG_CTX 4096

/* A Llama 3 with an untied lm_head; rope_type is a parameter so a test can
** ask for one the plugin does not serve. */
static void llama3_model(Model *m, const char *rope_type)
{
    memset(m, 0, sizeof *m);
    m->meta = (RadModelMeta){
        .struct_size = sizeof(RadModelMeta), .arch_id = "llama", .quant = "f32",
        .hf_arch = "LlamaForCausalLM", .name = "tiny-llama3",
        .n_layers = 2, .n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 128,
        .n_vocab = 1000, .n_ctx_train = 512, .rms_eps = 1e-5, .rope_theta = 500000.0, .kv = m->kv,
    };
    add_kv(m, KV_INT("tie_word_embeddings", 0));
    add_kv(m, KV_STR("rope_parameters.rope_type", rope_type));
    add_kv(m, KV_FLOAT("rope_parameters.rope_theta", 500000.0));
    add_kv(m, KV_FLOAT("rope_parameters.factor", LLAMA3_FACTOR));
    add_kv(m, KV_FLOAT("rope_parameters.low_freq_factor", LLAMA3_LOW_FREQ));
    add_kv(m, KV_FLOAT("rope_parameters.high_freq_factor", LLAMA3_HIGH_FREQ));
    add_kv(m, KV_INT("rope_parameters.original_max_position_embeddings", LLAMA3_ORIG_CTX));
}

/* One sequence, up to 32 rows a step, 128 positions, one logits row. */
static RadBuildCtx deployment(void)
{
    return (RadBuildCtx){
        .struct_size = sizeof(RadBuildCtx), .rank = 0, .world_size = 1, .max_tok = 32, .max_seqs = 1,
        .max_ctx = 128, .max_out_rows = 1, .kv_enc = RAD_ENC_F16, .scope = "",
    };
}

/* A 5-token prompt prefilled in one step; the last row's logits are wanted
** when n_out is 1. */
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

/* Declare `m` with the plugin for `quant` into a fresh recorder; the
** plugin's return code goes to *rc. */
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

/* Declare, then issue one prefill step; both must succeed. */
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

static RadBuilder *qwen3_run(int n_out)
{
    Model m;
    qwen3_model(&m, "f32");
    return declare_and_step("f32", &m, n_out, NULL);
}

static RadBuilder *llama3_run(int n_out)
{
    Model m;
    llama3_model(&m, "llama3");
    return declare_and_step("f32", &m, n_out, NULL);
}

/* --------------------------------------------------------- golden files */

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

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++) n += *text == '\n';
    return n;
}

/* One line of a text, without its newline. */
typedef struct Span {
    const char *text;
    int len;
} Span;

/* The line starting at *at; *at moves past it.  At the end of the text the
** span is `at_end` instead and the result is 0. */
static int next_line(const char **at, Span *line, const char *at_end)
{
    if (!**at) {
        *line = (Span){at_end, (int)strlen(at_end)};
        return 0;
    }
    const char *end = strchr(*at, '\n');
    size_t len = end ? (size_t)(end - *at) : strlen(*at);
    *line = (Span){*at, (int)len};
    *at += len + (end ? 1 : 0);
    return 1;
}

/* Compare the recorded log with tests/arch/expected/<name>.txt, or write it
** when RADIANCE_UPDATE_GOLDEN=1. */
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
        printf("RADIANCE_UPDATE_GOLDEN=1: wrote %s (%d lines)\n", path, count_lines(actual));
        free(actual);
        return;
    }

    char *expected = read_text(path);
    if (!expected) {
        free(actual);
        fail_msg("cannot read %s: create it with RADIANCE_UPDATE_GOLDEN=1 and review it", path);
    }
    const char *e = expected, *a = actual;
    for (int line = 1;; line++) {
        Span want, got;
        int have_want = next_line(&e, &want, "<end of file>");
        int have_got = next_line(&a, &got, "<end of log>");
        if (!have_want && !have_got) break;
        if (have_want && have_got && want.len == got.len && memcmp(want.text, got.text, (size_t)got.len) == 0)
            continue;
        print_error("%s differs from the recorded log at line %d:\n  expected: %.*s\n  recorded: %.*s\n"
                    "(if the change is intended, rerun with RADIANCE_UPDATE_GOLDEN=1 and review the diff)\n",
                    path, line, want.len, want.text, got.len, got.text);
        free(expected);
        free(actual);
        fail();
    }
    free(expected);
    free(actual);
}

/* ---------------------------------------------------------- small helpers */

static rad_weight weight_named(const RadBuilder *b, const char *fmt, int layer)
{
    char name[160];
    snprintf(name, sizeof name, fmt, layer);
    return rec_find_weight(b, name);
}

static int issued_op_is(const RadBuilder *b, int i, const char *op_name)
{
    const char *name = rec_op_name(b, rec_issue_op(b, i));
    return name && strcmp(name, op_name) == 0;
}

/* ------------------------------------------------------------ the tests */

/* Pins the whole Qwen3 graph: every declaration and issue, line by line. */
static void test_qwen3_matches_expected(void **state)
{
    (void)state;
    RadBuilder *b = qwen3_run(1);
    compare_with_expected(b, "qwen3_f32");
    rec_builder_free(b);
}

/* Pins the whole untied Llama graph with llama3 RoPE scaling, line by line. */
static void test_llama3_matches_expected(void **state)
{
    (void)state;
    RadBuilder *b = llama3_run(1);
    compare_with_expected(b, "llama3_rope_f32");
    rec_builder_free(b);
}

/* Pins Qwen3's per-head q/k norms: declared per layer, mapped, issued; Llama has none. */
static void test_qwen3_declares_and_issues_qk_norm(void **state)
{
    (void)state;
    RadBuilder *b = qwen3_run(1);
    for (int l = 0; l < 2; l++) {
        static const char *const kinds[2] = {"q", "k"};
        for (int k = 0; k < 2; k++) {
            char name[64], hf[96];
            snprintf(name, sizeof name, "blk.%d.attn_%s_norm.weight", l, kinds[k]);
            snprintf(hf, sizeof hf, "model.layers.%d.self_attn.%s_norm.weight", l, kinds[k]);
            rad_weight w = rec_find_weight(b, name);
            assert_true(w >= 0);
            const RadWeightDecl *d = rec_weight_decl(b, w);
            assert_int_equal(d->enc, RAD_ENC_F32);
            assert_int_equal(d->rank, 1);
            assert_int_equal(d->shape[0], 32);         /* one weight per head_dim, shared by heads */
            const char *source = NULL;
            assert_int_equal(rec_weight_map(b, w, NULL, &source), RAD_MAP_COPY);
            assert_string_equal(source, hf);
        }
    }
    assert_int_equal(rec_issues_named(b, "qk_norm"), 4);    /* q and k in each of 2 layers */
    rec_builder_free(b);

    b = llama3_run(1);
    assert_int_equal(weight_named(b, "blk.%d.attn_q_norm.weight", 0), -1);
    assert_int_equal(rec_issues_named(b, "qk_norm"), 0);
    rec_builder_free(b);
}

/* Pins the tied lm_head: a view of token_embd.weight with no name map of its own. */
static void test_tied_output_is_a_view_of_the_embedding(void **state)
{
    (void)state;
    RadBuilder *b = qwen3_run(1);
    rad_weight out = rec_find_weight(b, "output.weight");
    assert_true(out >= 0);
    assert_non_null(rec_weight_decl(b, out)->source);
    assert_string_equal(rec_weight_decl(b, out)->source, "token_embd.weight");
    assert_int_equal(rec_weight_map(b, out, NULL, NULL), 0);

    rad_weight embd = rec_find_weight(b, "token_embd.weight");
    const char *source = NULL;
    assert_int_equal(rec_weight_map(b, embd, NULL, &source), RAD_MAP_COPY);
    assert_string_equal(source, "model.embed_tokens.weight");

    /* the logits are computed from the view */
    int last = rec_issue_count(b) - 1;
    assert_true(issued_op_is(b, last, "logits_gemm"));
    assert_int_equal(rec_op_weight(b, rec_issue_op(b, last), 0), out);
    rec_builder_free(b);
}

/* Pins the untied lm_head: its own weight, mapped from lm_head.weight. */
static void test_untied_output_is_mapped_from_lm_head(void **state)
{
    (void)state;
    RadBuilder *b = llama3_run(1);
    rad_weight out = rec_find_weight(b, "output.weight");
    assert_true(out >= 0);
    assert_null(rec_weight_decl(b, out)->source);
    int n_sources = 0;
    const char *source = NULL;
    assert_int_equal(rec_weight_map(b, out, &n_sources, &source), RAD_MAP_COPY);
    assert_int_equal(n_sources, 1);
    assert_string_equal(source, "lm_head.weight");
    rec_builder_free(b);
}

/* Pins the step contract: declared ops are issued in nondecreasing declaration order. */
static void test_ops_are_issued_in_declaration_order(void **state)
{
    (void)state;
    RadBuilder *runs[2] = {qwen3_run(1), llama3_run(1)};
    for (int r = 0; r < 2; r++) {
        RadBuilder *b = runs[r];
        assert_true(rec_issue_count(b) > 0);
        assert_true(issued_op_is(b, 0, "embed_lookup"));
        for (int i = 0; i < rec_issue_count(b); i++) {
            rad_op op = rec_issue_op(b, i);
            assert_true(op >= 0 && op < rec_op_count(b));
            if (i > 0 && op < rec_issue_op(b, i - 1))
                fail_msg("issue %d (op %d %s) comes after op %d", i, op, rec_op_name(b, op), rec_issue_op(b, i - 1));
        }
        rec_builder_free(b);
    }
}

/* Pins liveness: every buffer an op is issued with was named in its reads or writes. */
static void test_issued_buffers_are_declared_uses(void **state)
{
    (void)state;
    RadBuilder *runs[2] = {qwen3_run(1), llama3_run(1)};
    for (int r = 0; r < 2; r++) {
        RadBuilder *b = runs[r];
        for (int i = 0; i < rec_issue_count(b); i++) {
            rad_op op = rec_issue_op(b, i);
            for (int k = 0; k < rec_issue_operand_count(b, i); k++) {
                RadOperand o = rec_issue_operand(b, i, k);
                if (o.kind == RAD_OPND_BUF && !rec_op_uses(b, op, o.id))
                    fail_msg("op %d %s is issued with buffer '%s' it never declared reading or writing", op,
                             rec_op_name(b, op), rec_buffer_name(b, o.id));
            }
        }
        rec_builder_free(b);
    }
}

/* Pins llama3 RoPE scaling: every rope op carries scaling=2 and the configured factors. */
static void test_llama3_rope_ops_carry_the_scaling(void **state)
{
    (void)state;
    RadBuilder *b = llama3_run(1);
    int n_rope = 0;
    for (rad_op op = 0; op < rec_op_count(b); op++) {
        if (strcmp(rec_op_name(b, op), "rope") != 0) continue;
        n_rope++;
        assert_int_equal(rec_op_param(b, op, "scaling")->i, 2);
        assert_true(rec_op_param(b, op, "factor")->f == LLAMA3_FACTOR);
        assert_true(rec_op_param(b, op, "low_freq_factor")->f == LLAMA3_LOW_FREQ);
        assert_true(rec_op_param(b, op, "high_freq_factor")->f == LLAMA3_HIGH_FREQ);
        assert_int_equal(rec_op_param(b, op, "orig_ctx")->i, LLAMA3_ORIG_CTX);
        assert_true(rec_op_param(b, op, "theta")->f == 500000.0);
    }
    assert_int_equal(n_rope, 4);        /* q and k in each of 2 layers */
    rec_builder_free(b);

    /* and the default type asks for no scaling at all */
    b = qwen3_run(1);
    for (rad_op op = 0; op < rec_op_count(b); op++) {
        if (strcmp(rec_op_name(b, op), "rope") != 0) continue;
        assert_int_equal(rec_op_param(b, op, "scaling")->i, 0);
        assert_true(rec_op_param(b, op, "factor")->f == 1.0);
    }
    rec_builder_free(b);
}

/* Pins a chunk that finishes no sequence: no gather_rows or logits_gemm, the final norm still runs. */
static void test_no_output_rows_issue_no_logits(void **state)
{
    (void)state;
    RadBuilder *with = qwen3_run(1), *without = qwen3_run(0);
    assert_int_equal(rec_issues_named(without, "gather_rows"), 0);
    assert_int_equal(rec_issues_named(without, "logits_gemm"), 0);
    assert_int_equal(rec_issue_count(without), rec_issue_count(with) - 2);
    assert_true(issued_op_is(without, rec_issue_count(without) - 1, "rmsnorm_add"));
    assert_int_equal(rec_issues_named(with, "gather_rows"), 1);
    assert_int_equal(rec_issue_rows(with, rec_issue_count(with) - 1), 1);    /* logits for one row */
    rec_builder_free(with);
    rec_builder_free(without);
}

/* Pins the refusal of an unserved RoPE type: declare records a failure that names it. */
static void test_unsupported_rope_type_fails_by_name(void **state)
{
    (void)state;
    Model m;
    llama3_model(&m, "longrope");
    int rc = RAD_OK;
    RadBuilder *b = declare("f32", &m, &rc, NULL);
    assert_int_not_equal(rc, RAD_OK);
    assert_int_equal(rec_fail_count(b), 1);
    assert_non_null(strstr(rec_fail(b, 0), "'longrope'"));
    rec_builder_free(b);
}

/* Pins YaRN: scaling 4 with the config's factor, original context, betas and
** truncate; an absent attention factor stays 0 (the op's default), DeepSeek's
** mscale pair becomes its quotient, and a missing original context is the
** trained one, as transformers fills it in. */
static void test_yarn_rope_ops_carry_the_config(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        Model m;
        llama3_model(&m, "yarn");
        if (variant == 0) {
            add_kv(&m, KV_FLOAT("rope_parameters.beta_fast", 16.0));
            add_kv(&m, KV_FLOAT("rope_parameters.beta_slow", 2.0));
            add_kv(&m, KV_INT("rope_parameters.truncate", 0));
        } else if (variant == 1) {
            add_kv(&m, KV_FLOAT("rope_parameters.mscale", 0.707));
            add_kv(&m, KV_FLOAT("rope_parameters.mscale_all_dim", 0.707));
        } else {
            add_kv(&m, KV_FLOAT("rope_parameters.mscale", 1.0));
            add_kv(&m, KV_FLOAT("rope_parameters.mscale_all_dim", 0.5));
        }
        if (variant == 2) {     /* no original context: the trained one */
            for (int i = 0; i < m.meta.n_kv; i++)
                if (!strcmp(m.kv[i].key, "rope_parameters.original_max_position_embeddings"))
                    m.kv[i].key = "rope_parameters.unrelated";
        }
        RadBuilder *b = declare_and_step("f32", &m, 1, NULL);
        int n_rope = 0;
        for (rad_op op = 0; op < rec_op_count(b); op++) {
            if (strcmp(rec_op_name(b, op), "rope") != 0) continue;
            n_rope++;
            assert_int_equal(rec_op_param(b, op, "scaling")->i, 4);
            assert_true(rec_op_param(b, op, "factor")->f == LLAMA3_FACTOR);
            assert_int_equal(rec_op_param(b, op, "orig_ctx")->i, variant == 2 ? 512 : LLAMA3_ORIG_CTX);
            assert_true(rec_op_param(b, op, "beta_fast")->f == (variant == 0 ? 16.0 : 0.0));
            assert_true(rec_op_param(b, op, "beta_slow")->f == (variant == 0 ? 2.0 : 0.0));
            assert_int_equal(rec_op_param(b, op, "truncate")->i, variant == 0 ? 0 : 1);
            double want = variant == 2 ? (0.1 * log(LLAMA3_FACTOR) + 1.0) / (0.05 * log(LLAMA3_FACTOR) + 1.0) : variant == 1 ? 1.0 : 0.0;
            assert_true(fabs(rec_op_param(b, op, "attn_factor")->f - want) < 1e-12);
        }
        assert_int_equal(n_rope, 4);
        rec_builder_free(b);
    }
}

/* Pins the q8_0 plugin's encodings: 2-D weights (projections, embedding) q8_0, norms and biases f32. */
static void test_q8_0_plugin_quantizes_matrices_only(void **state)
{
    (void)state;
    assert_string_equal(plugin("q8_0")->info()->quant, "q8_0");
    Model m;
    qwen3_model(&m, "q8_0");
    RadBuilder *b = declare_and_step("q8_0", &m, 1, NULL);
    static const char *const projections[] = {
        "blk.%d.attn_q.weight", "blk.%d.attn_k.weight", "blk.%d.attn_v.weight", "blk.%d.attn_output.weight",
        "blk.%d.ffn_gate.weight", "blk.%d.ffn_up.weight", "blk.%d.ffn_down.weight",
    };
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < sizeof projections / sizeof *projections; i++) {
            rad_weight w = weight_named(b, projections[i], l);
            assert_true(w >= 0);
            assert_int_equal(rec_weight_decl(b, w)->enc, RAD_ENC_Q8_0);
        }
    for (rad_weight w = 0; w < rec_weight_count(b); w++) {
        const RadWeightDecl *d = rec_weight_decl(b, w);
        if (strstr(rec_weight_name(b, w), "norm")) assert_int_equal(d->enc, RAD_ENC_F32);
        assert_int_equal(d->enc, d->rank == 2 ? RAD_ENC_Q8_0 : RAD_ENC_F32);
    }
    /* every gemm asks for a q8_0 kernel */
    for (rad_op op = 0; op < rec_op_count(b); op++)
        if (strcmp(rec_op_name(b, op), "gemm_nt") == 0 || strcmp(rec_op_name(b, op), "logits_gemm") == 0)
            assert_int_equal(rec_op_param(b, op, "enc")->i, RAD_ENC_Q8_0);
    rec_builder_free(b);
}

/* Pins fusion as selection: with no rmsnorm_add kernel the step issues add then rmsnorm instead. */
static void test_unfused_norm_falls_back_to_add_and_rmsnorm(void **state)
{
    (void)state;
    Model m;
    qwen3_model(&m, "f32");
    RadBuilder *b = declare_and_step("f32", &m, 1, "rmsnorm_add");
    assert_int_equal(rec_issues_named(b, "rmsnorm_add"), 0);
    /* residual adds: layer 1's attention norm, both ffn norms, the output norm */
    assert_int_equal(rec_issues_named(b, "add"), 4);
    assert_int_equal(rec_issues_named(b, "rmsnorm"), 5);
    for (int i = 0; i < rec_issue_count(b); i++)
        if (issued_op_is(b, i, "add")) assert_true(issued_op_is(b, i + 1, "rmsnorm"));
    int noted = 0;
    for (int i = 0; i < rec_note_count(b); i++) noted += strstr(rec_note(b, i), "add + rmsnorm") != NULL;
    assert_true(noted > 0);
    rec_builder_free(b);
}

/* Pins the plugin's identity: ABI version, name per quant, and the HF architectures it claims. */
static void test_plugin_identifies_itself(void **state)
{
    (void)state;
    const RadPluginInfo *info = plugin("f32")->info();
    assert_int_equal(info->abi_version, RAD_ARCH_ABI_VERSION);
    assert_int_equal(info->kind, RAD_PLUGIN_ARCH);
    assert_string_equal(info->name, "llama_f32");
    assert_string_equal(info->arch_id, "llama");
    assert_string_equal(info->quant, "f32");
    assert_non_null(plugin("f32")->hf_names);
    int qwen3 = 0, llama = 0;
    for (const char *const *n = plugin("f32")->hf_names(); *n; n++) {
        qwen3 += strcmp(*n, "Qwen3ForCausalLM") == 0;
        llama += strcmp(*n, "LlamaForCausalLM") == 0;
    }
    assert_int_equal(qwen3, 1);
    assert_int_equal(llama, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3_matches_expected),
        cmocka_unit_test(test_llama3_matches_expected),
        cmocka_unit_test(test_qwen3_declares_and_issues_qk_norm),
        cmocka_unit_test(test_tied_output_is_a_view_of_the_embedding),
        cmocka_unit_test(test_untied_output_is_mapped_from_lm_head),
        cmocka_unit_test(test_ops_are_issued_in_declaration_order),
        cmocka_unit_test(test_issued_buffers_are_declared_uses),
        cmocka_unit_test(test_llama3_rope_ops_carry_the_scaling),
        cmocka_unit_test(test_no_output_rows_issue_no_logits),
        cmocka_unit_test(test_unsupported_rope_type_fails_by_name),
        cmocka_unit_test(test_yarn_rope_ops_carry_the_config),
        cmocka_unit_test(test_q8_0_plugin_quantizes_matrices_only),
        cmocka_unit_test(test_unfused_norm_falls_back_to_add_and_rmsnorm),
        cmocka_unit_test(test_plugin_identifies_itself),
    };
    return cmocka_run_group_tests(tests, NULL, close_plugins);
}
