/*
** test_build_abi.c: the builder's side of the architecture ABI's growth rule
** (arch/rad_arch.h), and the name aliases (engine/build.c).
**
** A plugin built against an earlier header of this ABI passes smaller
** declaration structs; the builder must accept any struct_size from the
** version's first layout on, read the fields inside it and take the rest as
** zero, even when the bytes after it are not zero (they belong to the
** plugin, not to the struct).  A struct_size below that, or 0 (RAD_SIZED
** forgotten), is a problem named at finish.  Aliases add alternative
** checkpoint roots to COPY sources, after the sources given.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../engine/engine_internal.h"

static RadModelMeta meta = {.struct_size = sizeof(RadModelMeta), .n_vocab = 8};

/* A declaration struct followed by bytes that are not its own. */
typedef struct Padded {
    RadWeightDecl d;
    unsigned char junk[64];
} Padded;

static int has_problem(const RadBuilder *b, const char *needle)
{
    for (int i = 0; i < b->n_problems; i++)
        if (strstr(b->problems[i], needle)) return 1;
    return 0;
}

static void test_smaller_weight_decl_read_to_its_size(void **state)
{
    (void)state;
    RadBuilder b;
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, NULL);
    Padded p;
    memset(&p, 0xff, sizeof p);             /* every byte past the old size is junk */
    p.d.struct_size = (int)(offsetof(RadWeightDecl, source) + sizeof(const char *));
    p.d.enc = RAD_ENC_F32;
    p.d.rank = 2;
    p.d.shape[0] = 4;
    p.d.shape[1] = 8;
    p.d.shape[2] = p.d.shape[3] = 0;
    p.d.access = RAD_ACCESS_PER_TOKEN;
    p.d.shard = RAD_SHARD_NONE;
    p.d.group = 0;
    p.d.optional = 0;
    p.d.n_row_parts = 0;
    p.d.source = NULL;
    rad_weight w = rad_decl_weight(&b, "w", &p.d);
    assert_int_equal(w, 0);
    assert_int_equal(b.n_problems, 0);
    assert_int_equal(b.weights[w].d.n_slices, 0);   /* past the plugin's struct: zero, not 0xff.. */
    assert_int_equal(b.weights[w].d.shape[1], 8);
    rad_builder_free(&b);
}

static void test_unsized_structs_refused_by_name(void **state)
{
    (void)state;
    RadBuilder b;
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, NULL);
    const RadWeightDecl w = {.enc = RAD_ENC_F32, .rank = 1, .shape = {4}};
    const RadBufferDecl buf = {.kind = RAD_BUF_TRANSIENT, .enc = RAD_ENC_F32, .rows = 1, .cols = 4};
    const RadKvGroupDecl kv = {.kind = RAD_KV_FULL, .n_head_kv = 1, .head_dim = 4};
    assert_int_equal(rad_decl_weight(&b, "w", &w), -1);
    assert_int_equal(rad_decl_buffer(&b, "buf", &buf), -1);
    assert_int_equal(rad_decl_kv_group(&b, "kv", &kv), -1);
    assert_int_equal(b.n_problems, 3);
    assert_true(has_problem(&b, "weight 'w': its RadWeightDecl has struct_size 0"));
    assert_true(has_problem(&b, "buffer 'buf': its RadBufferDecl has struct_size 0"));
    assert_true(has_problem(&b, "KV group 'kv': its RadKvGroupDecl has struct_size 0"));
    assert_true(has_problem(&b, "RAD_SIZED"));
    rad_builder_free(&b);
}

static void test_aliases_follow_the_sources_given(void **state)
{
    (void)state;
    RadBuilder b;
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, NULL);
    assert_int_equal(rad_decl_name_alias(&b, "model.", "model.language_model."), RAD_OK);
    assert_int_equal(rad_decl_name_alias(&b, "lm_head.", "language_model.lm_head."), RAD_OK);
    const RadWeightDecl d = {RAD_SIZED(RadWeightDecl), .enc = RAD_ENC_F32, .rank = 1, .shape = {4}};
    rad_weight w = rad_decl_weight(&b, "norm", &d);
    const char *src[] = {"model.norm.weight", "other.norm.weight"};
    assert_int_equal(rad_decl_name_map(&b, "norm", RAD_MAP_COPY, src, 2), RAD_OK);
    const RadWeightEntry *e = &b.weights[w];
    assert_int_equal(e->n_map_sources, 3);
    assert_string_equal(e->map_sources[0], "model.norm.weight");
    assert_string_equal(e->map_sources[1], "other.norm.weight");
    assert_string_equal(e->map_sources[2], "model.language_model.norm.weight");
    /* CONCAT sources must all be present as given: no alternatives */
    rad_weight c = rad_decl_weight(&b, "stack", &d);
    assert_int_equal(rad_decl_name_map(&b, "stack", RAD_MAP_CONCAT, src, 2), RAD_OK);
    assert_int_equal(b.weights[c].n_map_sources, 2);
    assert_int_equal(b.n_problems, 0);
    rad_builder_free(&b);
}

/* Lookups by name are hashed: a model with tens of thousands of weights
** declares in linear time, and every name still finds its own weight. */
static void test_many_weights_found_by_name(void **state)
{
    (void)state;
    RadBuilder b;
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, NULL);
    const RadWeightDecl d = {RAD_SIZED(RadWeightDecl), .enc = RAD_ENC_F32, .rank = 1, .shape = {4}};
    char name[64];
    for (int i = 0; i < 50000; i++) {
        snprintf(name, sizeof name, "blk.%d.ffn_gate.%d.weight", i / 128, i % 128);
        assert_int_equal(rad_decl_weight(&b, name, &d), i);
    }
    for (int i = 0; i < 50000; i += 997) {
        snprintf(name, sizeof name, "blk.%d.ffn_gate.%d.weight", i / 128, i % 128);
        assert_int_equal(rad_builder_find_weight(&b, name), i);
    }
    assert_int_equal(rad_builder_find_weight(&b, "absent"), -1);
    assert_int_equal(rad_decl_weight(&b, "blk.0.ffn_gate.0.weight", &d), -1);     /* twice */
    rad_builder_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smaller_weight_decl_read_to_its_size),
        cmocka_unit_test(test_unsized_structs_refused_by_name),
        cmocka_unit_test(test_aliases_follow_the_sources_given),
        cmocka_unit_test(test_many_weights_found_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
