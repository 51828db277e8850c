/*
** test_alloc_fail.c: every allocation of the format readers and the builder
** may fail, and each failure is a clean error.
**
** SQLite's habit: run an operation once with no failure to count its
** allocations, then again and again with the n-th allocation failing, for
** every n, until it succeeds with no failure injected.  Each failed run must
** return a negative RAD_E_* code with a message (or, where a reader does not
** need the failed allocation, succeed), never crash; `make asan` runs this
** file too, and LeakSanitizer then says whether a failed run leaked.
**
** The hook is the link line, not the code under test: this test is linked
** with -Wl,--wrap for malloc, calloc, realloc, strdup, strndup, vasprintf
** and asprintf (Makefile, TESTLIBS of this target), so every call the core
** library makes lands in the __wrap_ functions below.  The shared libraries
** (jansson, PCRE2, utf8proc) allocate on their own and are not failed:
** routing jansson here with json_set_alloc_funcs was tried, and jansson
** 2.14 itself aborts on a failed allocation (assert in load.c's
** lex_scan_string), so only our own code's allocations are tested.
**
** What runs: the .rad writer and reader, the GGUF reader (as a container,
** tokenizer blob included), safetensors, config.json, a Hugging Face folder
** (rad_checkpoint_open), the tokenizer.json importer on its own, the text
** runtime (rad_text_create, then an encode and a decode), and the builder
** through a small declaration.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "gguf_container.h"
#include "hf_config.h"
#include "rad_container.h"
#include "safetensors.h"
#include "tokenizer.h"
#include "text/rad_text.h"
#include "../../engine/engine_internal.h"

/* ------------------------------------------------------------ the hook */

static long alloc_count;    /* allocations seen while armed */
static long fail_at = -1;   /* the allocation that fails (1-based), or -1 */
static int armed;

/* Whether this allocation is the one to fail. */
static int fail_now(void)
{
    if (!armed) return 0;
    return ++alloc_count == fail_at;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_vasprintf(char **out, const char *fmt, va_list ap);

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return fail_now() ? NULL : __real_strndup(s, n); }

int __wrap_vasprintf(char **out, const char *fmt, va_list ap)
{
    if (fail_now()) {
        *out = NULL;
        return -1;
    }
    return __real_vasprintf(out, fmt, ap);
}

int __wrap_asprintf(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = __wrap_vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

/* Run `op` with allocation 1, 2, ... failing until a run completes without
** reaching the failing allocation; each failed run must return a negative
** code with a message.  Returns how many allocations a clean run makes. */
typedef int (*Op)(void *arg);

static long every_failure(const char *what, Op op, void *arg)
{
    armed = 1;
    alloc_count = 0;
    fail_at = -1;
    int rc = op(arg);
    long total = alloc_count;
    if (rc != 0) {
        armed = 0;
        fail_msg("%s: fails with no failure injected: %d %s", what, rc, rad_error_message());
    }
    for (long n = 1; n <= total + 1; n++) {
        alloc_count = 0;
        fail_at = n;
        rad_error_clear();
        rc = op(arg);
        if (alloc_count < n) break;     /* it no longer reached allocation n: done */
        if (rc > 0 || (rc < 0 && !rad_error_message()[0] && rc != RAD_E_NOMEM)) {
            armed = 0;
            fail_msg("%s: allocation %ld of %ld failed: code %d with no message", what, n, total, rc);
        }
    }
    armed = 0;
    fail_at = -1;
    if (getenv("RAD_TEST_VERBOSE")) printf("    %s: %ld allocations, each failed once\n", what, total);
    return total;
}

/* ------------------------------------------------------------ fixtures */

static char tmpdir[256];

static const char *tpath(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static char *src_path(const char *rel)
{
    const char *src = getenv("RADIANCE_SRC");
    char *p = NULL;
    if (asprintf(&p, "%s/%s", src ? src : ".", rel) < 0) return NULL;
    return p;
}

static int setup(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/rad_test_alloc_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ the operations */

static int write_rad(void *arg)
{
    (void)arg;
    RadContainerWriter *w = NULL;
    int rc = rad_container_create(tpath("a.rad"), &w);
    if (rc) return rc;
    RadMetaTable t;
    rad_meta_table_init(&t);
    rc = rad_meta_table_set_string(&t, "arch.id", "llama");
    if (!rc) rc = rad_meta_table_set_int(&t, "model.n_layers", 2);
    if (!rc) rc = rad_meta_table_set_float(&t, "model.rms_eps", 1e-5);
    if (!rc) rc = rad_container_set_meta(w, &t);
    rad_meta_table_free(&t);
    float v[16] = {1, 2, 3};
    const int64_t shape[2] = {2, 8};
    if (!rc) rc = rad_container_add_tensor(w, "blk.0.w", RAD_ENC_F32, 2, shape, 0, v, sizeof v);
    if (!rc) rc = rad_container_add_tensor(w, "blk.1.w", RAD_ENC_F32, 2, shape, 1, v, sizeof v);
    if (!rc) rc = rad_container_add_blob(w, "tokenizer_config.json", "{}", 2);
    if (rc) {
        rad_container_abort(w);
        return rc;
    }
    return rad_container_finish(w);
}

static int read_rad(void *arg)
{
    RadContainer *c = NULL;
    int rc = rad_container_open(arg, &c);
    if (!rc) rad_container_close(c);
    return rc;
}

static int read_gguf(void *arg)
{
    RadContainer *c = NULL;
    int rc = rad_container_open_gguf(arg, &c);
    if (!rc) rad_container_close(c);
    return rc;
}

static int read_safetensors(void *arg)
{
    RadSafetensors *st = NULL;
    int rc = rad_safetensors_open(arg, &st);
    if (!rc) rad_safetensors_close(st);
    return rc;
}

static int read_config(void *arg)
{
    RadMetaTable t;
    rad_meta_table_init(&t);
    int rc = rad_hf_config_load(arg, &t);
    rad_meta_table_free(&t);
    return rc;
}

static int read_checkpoint(void *arg)
{
    RadCheckpoint *ck = NULL;
    int rc = rad_checkpoint_open(arg, &ck);
    char *data = NULL;
    size_t len = 0;
    if (!rc) rc = rad_checkpoint_read_file(ck, "tokenizer_config.json", &data, &len);
    free(data);
    rad_checkpoint_close(ck);
    return rc;
}

/* A tokenizer.json and its tokenizer_config.json, read whole before the
** runs (reading the file is not what is tested). */
typedef struct TokFiles {
    char *json, *config;
    size_t json_len, config_len;
} TokFiles;

static char *slurp(const char *rel, size_t *len)
{
    char *path = src_path(rel);
    FILE *f = path ? fopen(path, "rb") : NULL;
    free(path);
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) p[n] = 0;
    *len = (size_t)n;
    return p;
}

static int import_tokenizer(void *arg)
{
    TokFiles *tf = arg;
    RadTokenizer *t = NULL;
    int rc = rad_tokenizer_from_json(tf->json, tf->json_len, tf->config, tf->config_len, "llama/tokenizer.json", &t);
    rad_tokenizer_free(t);
    return rc;
}

/* rad_text_create on a freshly imported tokenizer (imported with no
** failure injected: that is import_tokenizer's case), then one encode and
** one decode of a text that meets the added tokens, the merges and the
** byte fallback. */
static int text_runtime(void *arg)
{
    TokFiles *tf = arg;
    RadTokenizer *d = NULL;
    armed = 0;
    int rc = rad_tokenizer_from_json(tf->json, tf->json_len, tf->config, tf->config_len, "llama/tokenizer.json", &d);
    armed = 1;
    if (rc) return rc;
    RadText *t = NULL;
    if ((rc = rad_text_create(d, &t))) return rc;
    static const char text[] = "Hello, world! caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87\n\n  12345 <|endoftext|>";
    int32_t *ids = NULL;
    int n = 0;
    char *out = NULL;
    size_t out_len = 0;
    rc = rad_text_encode(t, text, sizeof text - 1, 1, &ids, &n);
    if (!rc) rc = rad_text_decode(t, ids, n, 0, &out, &out_len);
    free(ids);
    free(out);
    rad_text_free(t);
    return rc;
}

/* A declaration with every kind of table the builder keeps, in convert
** mode (no container, no kernels): weights with name maps and aliases,
** buffers, KV groups bound to layers, ops reading and writing, the logits,
** and a problem repeated in every layer. */
static int declare(void *arg)
{
    (void)arg;
    RadModelMeta meta = {.struct_size = sizeof meta, .n_layers = 3, .n_vocab = 16};
    RadBuildCtx ctx = {.struct_size = sizeof ctx, .world_size = 1, .max_tok = 1, .max_seqs = 1, .max_ctx = 1};
    RadBuilder b;
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, &ctx);
    rad_decl_name_alias(&b, "model.", "model.language_model.");
    const RadKvGroupDecl g = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_FULL, .n_head_kv = 2, .head_dim = 4};
    rad_kv kv = rad_decl_kv_group(&b, "kv", &g);
    const RadBufferDecl x = {RAD_SIZED(RadBufferDecl), .kind = RAD_BUF_TRANSIENT, .enc = RAD_ENC_F32, .rows = 1, .cols = 8};
    const RadBufferDecl logits = {RAD_SIZED(RadBufferDecl), .kind = RAD_BUF_TRANSIENT, .enc = RAD_ENC_F32, .rows = 1,
                                  .cols = 16};
    rad_buf bx = rad_decl_buffer(&b, "x", &x), bl = rad_decl_buffer(&b, "logits", &logits);
    for (int l = 0; l < meta.n_layers; l++) {
        char name[64], src[96];
        snprintf(name, sizeof name, "blk.%d.w", l);
        snprintf(src, sizeof src, "model.layers.%d.w", l);
        const RadWeightDecl wd = {RAD_SIZED(RadWeightDecl), .enc = RAD_ENC_F32, .rank = 2, .shape = {8, 8}, .group = l};
        rad_weight w = rad_decl_weight(&b, name, &wd);
        const char *const sources[] = {src};
        rad_decl_name_map(&b, name, RAD_MAP_COPY, sources, 1);
        rad_op op = rad_decl_op(&b, "mul_mat", NULL, 0, &w, 1);
        rad_op_reads(&b, op, &bx, 1);
        rad_op_writes(&b, op, &bx, 1);
        rad_bind_layer_kv(&b, l, kv);
        rad_decl_fail(&b, "the same problem in every layer");
    }
    rad_declare_logits(&b, bl);
    int rc = rad_builder_finish(&b, "declare");
    rad_builder_free(&b);
    /* the repeated problem is the expected outcome: only out of memory is a
    ** different one, and it must say so */
    if (rc == RAD_E_NOMEM) return rc;
    if (rc == RAD_E_UNSUPPORTED && strstr(rad_error_message(), "(x3)")) return 0;
    return rc ? rc : -100;
}

/* ------------------------------------------------------------ tests */

static void test_rad_writer(void **state)
{
    (void)state;
    assert_true(every_failure("rad writer", write_rad, NULL) > 0);
    /* no failed run left a partial file beside the output */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c partial >/dev/null", tmpdir);
    assert_int_not_equal(system(cmd), 0);
}

static void test_rad_reader(void **state)
{
    (void)state;
    assert_int_equal(write_rad(NULL), 0);
    assert_true(every_failure("rad reader", read_rad, (void *)tpath("a.rad")) > 0);
}

static void test_gguf_reader(void **state)
{
    (void)state;
    char *p = src_path("tests/models/llamacpp/qwen2-tiny-q8_0.gguf");
    assert_true(every_failure("gguf container", read_gguf, p) > 0);
    free(p);
}

static void test_safetensors_reader(void **state)
{
    (void)state;
    char *p = src_path("tests/golden/fixtures/llama/model.safetensors");
    assert_true(every_failure("safetensors", read_safetensors, p) > 0);
    free(p);
}

static void test_config_reader(void **state)
{
    (void)state;
    char *p = src_path("tests/golden/fixtures/gemma3/config.json");
    assert_true(every_failure("config.json", read_config, p) > 0);
    free(p);
}

static void test_checkpoint(void **state)
{
    (void)state;
    char *p = src_path("tests/golden/fixtures/llama");
    assert_true(every_failure("checkpoint", read_checkpoint, p) > 0);
    free(p);
}

/* The tokenizer.json importer on its own (the GGUF case above goes through
** the GGUF importer and the blob), and the text runtime built from it. */
static void test_tokenizer_json(void **state)
{
    (void)state;
    TokFiles tf = {0};
    tf.json = slurp("tests/golden/fixtures/llama/tokenizer.json", &tf.json_len);
    tf.config = slurp("tests/golden/fixtures/llama/tokenizer_config.json", &tf.config_len);
    assert_non_null(tf.json);
    assert_non_null(tf.config);
    assert_true(every_failure("tokenizer.json", import_tokenizer, &tf) > 0);
    free(tf.json);
    free(tf.config);
}

static void test_text_runtime(void **state)
{
    (void)state;
    TokFiles tf = {0};
    tf.json = slurp("tests/golden/fixtures/llama/tokenizer.json", &tf.json_len);
    tf.config = slurp("tests/golden/fixtures/llama/tokenizer_config.json", &tf.config_len);
    assert_non_null(tf.json);
    assert_true(every_failure("rad_text_create", text_runtime, &tf) > 0);
    free(tf.json);
    free(tf.config);
}

static void test_builder(void **state)
{
    (void)state;
    assert_true(every_failure("builder", declare, NULL) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rad_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rad_reader, setup, teardown),
        cmocka_unit_test(test_gguf_reader),
        cmocka_unit_test(test_safetensors_reader),
        cmocka_unit_test(test_config_reader),
        cmocka_unit_test(test_checkpoint),
        cmocka_unit_test(test_tokenizer_json),
        cmocka_unit_test(test_text_runtime),
        cmocka_unit_test(test_builder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
