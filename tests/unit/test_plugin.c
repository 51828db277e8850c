/*
** test_plugin.c: finding and loading plugins (engine/plugin.c).
**
** The refusals load small, deliberately broken plugins (the sources are in
** tests/unit/plugins/), which the Makefile builds into one folder per case
** under $RADIANCE_HOME/tests/unit/plugins/<case>/{arch,kernels}/.  Each must
** be refused with RAD_E_ABI and the offending file named in the message.
** The rest loads the real $RADIANCE_HOME/plugins folder (llama at every
** built weight format and the ref kernel library) and pins the lookups the
** engine relies on: the exact (id, quant) pair with no fallback, the Hugging
** Face architecture names, and the --kernels order.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../engine/engine_internal.h"

/* ---------------------------------------------------------------- helpers */

/* $RADIANCE_HOME (the build folder), or "build" when run by hand. */
static const char *home(void)
{
    const char *h = getenv("RADIANCE_HOME");
    return h && *h ? h : "build";
}

/* The folder of one refusal case. */
static void case_dir(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/tests/unit/plugins/%s", home(), name);
}

/* Loading the case folder fails with RAD_E_ABI, leaves the set empty, and
** the message names `file` (a path under the case folder) and `also`. */
static void expect_refusal(const char *name, const char *file, const char *also)
{
    char dir[PATH_MAX], path[PATH_MAX + 64];
    case_dir(name, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    struct stat st;
    if (stat(path, &st) != 0)
        fail_msg("fixture %s is missing: build it with `make unit-test`", path);

    RadPluginSet set;
    rad_error_clear();
    int rc = rad_plugins_load(dir, &set);
    const char *msg = rad_error_message();
    if (rc != RAD_E_ABI || !strstr(msg, path) || (also && !strstr(msg, also)))
        fail_msg("case %s: rc %d (%s), message \"%s\"; want RAD_E_ABI naming %s and '%s'", name, rc,
                 rad_strerror(rc), msg, path, also ? also : "");
    /* A refused load owns nothing. */
    assert_int_equal(set.n_arch, 0);
    assert_int_equal(set.n_kernels, 0);
    assert_null(set.arch);
    assert_null(set.kernels);
}

static char tmpdir[256];

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* The real plugins folder, loaded once for the lookup tests. */
static RadPluginSet real;

/* The loaded kernel library called name, or NULL. */
static const RadKernelLibrary *real_library(const char *name)
{
    for (int i = 0; i < real.n_kernels; i++)
        if (strcmp(real.kernels[i].lib->name, name) == 0) return real.kernels[i].lib;
    return NULL;
}

static int setup_real(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/plugins", home());
    int rc = rad_plugins_load(dir, &real);
    if (rc) fprintf(stderr, "loading %s: %s\n", dir, rad_error_message());
    return rc;
}

static int teardown_real(void **state)
{
    (void)state;
    rad_plugins_free(&real);
    return 0;
}

/* ------------------------------------------------------------- refusals */

/* An arch plugin built against the previous ABI is refused by name, with both versions. */
static void test_refuses_arch_wrong_abi(void **state)
{
    (void)state;
    char want[96];
    snprintf(want, sizeof want, "architecture ABI %d, this radiance speaks %d", RAD_ARCH_ABI_VERSION - 1,
             RAD_ARCH_ABI_VERSION);
    expect_refusal("arch_bad_abi", "arch/bad_abi.so", want);
}

/* An arch plugin that does not export rad_arch_step is refused, naming file and symbol. */
static void test_refuses_arch_missing_step(void **state)
{
    (void)state;
    expect_refusal("arch_no_step", "arch/no_step.so", "rad_arch_step");
}

/* Two plugins claiming the same (id, quant) pair are refused with both files named. */
static void test_refuses_duplicate_pair(void **state)
{
    (void)state;
    expect_refusal("arch_duplicate", "arch/dup_a.so", "arch/dup_b.so");
    char dir[PATH_MAX];
    case_dir("arch_duplicate", dir, sizeof dir);
    RadPluginSet set;
    assert_int_equal(rad_plugins_load(dir, &set), RAD_E_ABI);
    assert_non_null(strstr(rad_error_message(), "'dup' at 'f32'"));
}

/* A kernel library built against the previous kernel ABI is refused by name, with both versions. */
static void test_refuses_kernels_wrong_abi(void **state)
{
    (void)state;
    char want[96];
    snprintf(want, sizeof want, "kernel ABI %d, this radiance speaks %d", RAD_KERNEL_ABI_VERSION - 1,
             RAD_KERNEL_ABI_VERSION);
    expect_refusal("kernels_bad_abi", "kernels/bad_abi.so", want);
}

/* A library whose table and rows are smaller (an earlier header of this
** ABI) is loaded: each row read at the library's own stride, and the fields
** past its sizes read as zero, even where its memory holds something. */
static void test_reads_smaller_tables_to_their_size(void **state)
{
    (void)state;
    char dir[PATH_MAX];
    case_dir("kernels_old_row", dir, sizeof dir);
    RadPluginSet set;
    int rc = rad_plugins_load(dir, &set);
    if (rc) fail_msg("load: %s", rad_error_message());
    assert_int_equal(set.n_kernels, 1);
    const RadKernelLibrary *lib = set.kernels[0].lib;
    assert_string_equal(lib->name, "old_row");
    assert_int_equal(lib->preference, 0);           /* past its struct_size */
    assert_int_equal(lib->n_rows, 2);
    assert_string_equal(lib->rows[0].name, "old_first");
    assert_string_equal(lib->rows[1].name, "old_second");
    assert_int_equal(lib->rows[1].priority, 7);
    assert_non_null(lib->rows[1].launch);
    assert_int_equal(lib->rows[0].slices_ok, 0);
    assert_int_equal(lib->rows[1].slices_ok, 0);
    assert_string_equal(lib->schemas[0].op, "old_op");
    assert_string_equal(rad_plugins_default_order(&set), "old_row");
    rad_plugins_free(&set);
}

/* A .so in kernels/ that does not export rad_kernel_library is refused, naming file and symbol. */
static void test_refuses_kernels_without_export(void **state)
{
    (void)state;
    expect_refusal("kernels_no_export", "kernels/no_export.so", RAD_KERNEL_LIBRARY_SYMBOL);
}

/* A file named .so that is not a shared object is refused by name, not skipped. */
static void test_refuses_unloadable_file(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/rad_test_plugin_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    char arch[PATH_MAX], junk[PATH_MAX + 16];
    snprintf(arch, sizeof arch, "%s/arch", tmpdir);
    assert_int_equal(mkdir(arch, 0755), 0);
    snprintf(junk, sizeof junk, "%s/junk.so", arch);
    FILE *f = fopen(junk, "w");
    assert_non_null(f);
    fputs("this is not an ELF file\n", f);
    fclose(f);

    RadPluginSet set;
    int rc = rad_plugins_load(tmpdir, &set);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rad_error_message());
    nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    assert_int_equal(rc, RAD_E_ABI);
    if (!strstr(msg, junk)) fail_msg("message \"%s\" does not name %s", msg, junk);
}

/* A folder without arch/ or kernels/ holds no plugins and is not an error. */
static void test_empty_folder_loads_nothing(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/rad_test_plugin_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    RadPluginSet set;
    int rc = rad_plugins_load(tmpdir, &set);
    rmdir(tmpdir);
    assert_int_equal(rc, RAD_OK);
    assert_int_equal(set.n_arch, 0);
    assert_int_equal(set.n_kernels, 0);
    assert_null(rad_plugins_find(&set, "llama", "f32"));
    rad_plugins_free(&set);
}

/* ------------------------------------------------ the real plugins folder */

/* The built folder loads: llama at f32, f16, bf16, q8_0 and the ref library, nothing refused. */
static void test_real_folder_loads(void **state)
{
    (void)state;
    assert_true(real.n_arch >= 4);
    const RadKernelLibrary *ref = real_library("ref");
    assert_non_null(ref);
    assert_int_equal(ref->abi_version, RAD_KERNEL_ABI_VERSION);
    assert_true(ref->n_rows > 0);
    assert_true(ref->n_schemas > 0);
    for (int i = 0; i < real.n_arch; i++) {
        const RadArchPlugin *p = &real.arch[i];
        assert_non_null(p->handle);
        assert_non_null(p->declare);
        assert_non_null(p->step);
        assert_int_equal(p->info->abi_version, RAD_ARCH_ABI_VERSION);
        assert_non_null(strstr(p->path, "/arch/"));
    }
}

/* rad_plugins_find returns the plugin for exactly (id, quant), and NULL for any other pair. */
static void test_find_exact_pair_only(void **state)
{
    (void)state;
    static const char *quants[] = {"f32", "f16", "bf16", "q8_0"};
    for (int i = 0; i < 4; i++) {
        const RadArchPlugin *p = rad_plugins_find(&real, "llama", quants[i]);
        if (!p) fail_msg("no plugin for (llama, %s)", quants[i]);
        assert_string_equal(p->info->quant, quants[i]);
        assert_string_equal(p->info->arch_id, "llama");
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(p, rad_plugins_find(&real, "llama", quants[j]));
    }
    /* No fallback to another weight format, another family, or a prefix. */
    assert_null(rad_plugins_find(&real, "llama", "q2_k"));     /* no plugin built for it */
    assert_null(rad_plugins_find(&real, "llama", "F32"));
    assert_null(rad_plugins_find(&real, "llama", "f"));
    assert_null(rad_plugins_find(&real, "llama", ""));
    assert_null(rad_plugins_find(&real, "qwen3", "f32"));
    assert_null(rad_plugins_find(&real, "llam", "f32"));
}

/* rad_plugins_find_hf finds a listed Hugging Face architecture and nothing unlisted. */
static void test_find_hf_architecture(void **state)
{
    (void)state;
    const RadArchPlugin *p = rad_plugins_find_hf(&real, "Qwen3ForCausalLM");
    assert_non_null(p);
    assert_string_equal(p->info->arch_id, "llama");
    assert_non_null(rad_plugins_find_hf(&real, "LlamaForCausalLM"));
    assert_null(rad_plugins_find_hf(&real, "GPT2LMHeadModel"));
    assert_null(rad_plugins_find_hf(&real, "Qwen3ForCausalLm"));
    assert_null(rad_plugins_find_hf(&real, ""));
}

/* rad_plugins_kernel_order resolves known names in order and refuses an unknown one by name. */
static void test_kernel_order(void **state)
{
    (void)state;
    const RadKernelLibrary *libs[4] = {0};
    int n = -1;
    assert_int_equal(rad_plugins_kernel_order(&real, "ref", libs, 4, &n), RAD_OK);
    assert_int_equal(n, 1);
    assert_ptr_equal(libs[0], real_library("ref"));

    /* NULL means the default order, which is ref here. */
    n = -1;
    assert_int_equal(rad_plugins_kernel_order(&real, NULL, libs, 4, &n), RAD_OK);
    assert_int_equal(n, 1);
    assert_ptr_equal(libs[0], real_library("ref"));

    n = -1;
    int rc = rad_plugins_kernel_order(&real, "ref,cuda_nonesuch", libs, 4, &n);
    assert_int_equal(rc, RAD_E_NOTFOUND);
    if (!strstr(rad_error_message(), "'cuda_nonesuch'"))
        fail_msg("message \"%s\" does not name the unknown library", rad_error_message());

    /* An order that names nothing is refused too. */
    assert_int_equal(rad_plugins_kernel_order(&real, ",", libs, 4, &n), RAD_E_ARG);
    assert_int_equal(n, 0);
}

/* rad_plugin_dir_resolve prefers the explicit folder, then $RADIANCE_HOME/plugins. */
static void test_plugin_dir_resolve(void **state)
{
    (void)state;
    char *d = rad_plugin_dir_resolve("/some/where");
    assert_string_equal(d, "/some/where");
    free(d);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/plugins", home());
    if (getenv("RADIANCE_HOME")) {
        d = rad_plugin_dir_resolve(NULL);
        assert_string_equal(d, want);
        free(d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_arch_wrong_abi),
        cmocka_unit_test(test_refuses_arch_missing_step),
        cmocka_unit_test(test_refuses_duplicate_pair),
        cmocka_unit_test(test_refuses_kernels_wrong_abi),
        cmocka_unit_test(test_refuses_kernels_without_export),
        cmocka_unit_test(test_reads_smaller_tables_to_their_size),
        cmocka_unit_test(test_refuses_unloadable_file),
        cmocka_unit_test(test_empty_folder_loads_nothing),
        cmocka_unit_test(test_plugin_dir_resolve),
    };
    const struct CMUnitTest real_tests[] = {
        cmocka_unit_test(test_real_folder_loads),
        cmocka_unit_test(test_find_exact_pair_only),
        cmocka_unit_test(test_find_hf_architecture),
        cmocka_unit_test(test_kernel_order),
    };
    int failed = cmocka_run_group_tests_name("refusals", tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("real plugins", real_tests, setup_real, teardown_real);
    return failed;
}
