/*
** test_config.c: the owning metadata table (formats/meta_table.c) and the
** config.json flattener (formats/hf_config.c).
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf_config.h"
#include "rad_limits.h"

/* Find `key` and check it has `type`; returns the entry. */
static const RadMetaKV *get(const RadMetaTable *t, const char *key, int type)
{
    const RadMetaKV *kv = rad_meta_table_find(t, key);
    if (!kv) print_error("key '%s' is absent\n", key);
    assert_non_null(kv);
    assert_int_equal(kv->type, type);
    return kv;
}

/* ---------------------------------------------------------- meta table */

/* set_* replaces a key in place, copies strings, and fills the numeric field the type does not carry. */
static void test_meta_table_set_replace(void **state)
{
    (void)state;
    RadMetaTable t;
    rad_meta_table_init(&t);
    assert_null(rad_meta_table_find(&t, "a"));
    assert_int_equal(rad_meta_table_set_int(&t, "a", 7), 0);
    assert_int_equal(rad_meta_table_set_float(&t, "b", -2.75), 0);
    char s[] = "hello";
    assert_int_equal(rad_meta_table_set_string(&t, "c", s), 0);
    s[0] = 'j';   /* the table holds its own copy */
    assert_int_equal(t.n, 3);

    const RadMetaKV *a = get(&t, "a", RAD_META_INT);
    assert_int_equal(a->i, 7);
    assert_true(a->f == 7.0);
    const RadMetaKV *b = get(&t, "b", RAD_META_FLOAT);
    assert_true(b->f == -2.75);
    assert_int_equal(b->i, -2);   /* truncated toward zero */
    assert_string_equal(get(&t, "c", RAD_META_STRING)->s, "hello");

    /* replacing keeps the position and may change the type */
    assert_int_equal(rad_meta_table_set_string(&t, "a", "now a string"), 0);
    assert_int_equal(t.n, 3);
    assert_string_equal(t.kv[0].key, "a");
    assert_string_equal(get(&t, "a", RAD_META_STRING)->s, "now a string");
    assert_int_equal(rad_meta_table_set_int(&t, "c", 1), 0);
    assert_null(get(&t, "c", RAD_META_INT)->s);

    /* floats out of the int64 range saturate; NaN gives 0 */
    assert_int_equal(rad_meta_table_set_float(&t, "huge", 1e300), 0);
    assert_true(get(&t, "huge", RAD_META_FLOAT)->i == INT64_MAX);
    assert_int_equal(rad_meta_table_set_float(&t, "nan", NAN), 0);
    assert_int_equal(get(&t, "nan", RAD_META_FLOAT)->i, 0);

    /* bad arguments */
    assert_int_equal(rad_meta_table_set_int(&t, "", 1), RAD_E_ARG);
    assert_int_equal(rad_meta_table_set_int(&t, NULL, 1), RAD_E_ARG);
    assert_int_equal(rad_meta_table_set_string(&t, "x", NULL), RAD_E_ARG);
    RadMetaKV bad = {.key = "x", .type = 9};
    assert_int_equal(rad_meta_table_append(&t, &bad), RAD_E_ARG);

    /* append adds without searching, and fixes up the other numeric field */
    RadMetaKV kv = {.key = "d", .type = RAD_META_INT, .i = 3, .f = 99.0};
    assert_int_equal(rad_meta_table_append(&t, &kv), 0);
    assert_true(get(&t, "d", RAD_META_INT)->f == 3.0);

    /* many keys grow the table */
    for (int i = 0; i < 1000; i++) {
        char k[32];
        snprintf(k, sizeof k, "k%d", i);
        assert_int_equal(rad_meta_table_set_int(&t, k, i), 0);
    }
    assert_int_equal(get(&t, "k999", RAD_META_INT)->i, 999);

    rad_meta_table_free(&t);
    assert_int_equal(t.n, 0);
    assert_null(t.kv);
    rad_meta_table_free(&t);   /* twice is harmless */
    rad_meta_table_free(NULL);
}

/* ----------------------------------------------------------- flattening */

/* Nested objects, arrays, booleans, null, integers and reals flatten as hf_config.h documents. */
static void test_flatten(void **state)
{
    (void)state;
    const char *json =
        "{\n"
        "  \"model_type\": \"llama\",\n"
        "  \"hidden_size\": 4096,\n"
        "  \"rms_norm_eps\": 1e-05,\n"
        "  \"rope_theta\": 500000.0,\n"
        "  \"big\": 9007199254740993,\n"
        "  \"neg\": -3,\n"
        "  \"tie_word_embeddings\": true,\n"
        "  \"attention_bias\": false,\n"
        "  \"pad_token_id\": null,\n"
        "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,\n"
        "                   \"original_max_position_embeddings\": 8192,\n"
        "                   \"deep\": {\"x\": [1, 2]}},\n"
        "  \"eos_token_id\": [128001, 128008, 128009],\n"
        "  \"mixed\": [true, null, 1.5, \"s\", {\"k\": 1}, []],\n"
        "  \"empty_obj\": {},\n"
        "  \"unicode\": \"caf\\u00e9\"\n"
        "}\n";
    RadMetaTable t;
    rad_meta_table_init(&t);
    assert_int_equal(rad_hf_config_load_string(json, "config.json", &t), 0);

    assert_string_equal(get(&t, "model_type", RAD_META_STRING)->s, "llama");
    assert_int_equal(get(&t, "hidden_size", RAD_META_INT)->i, 4096);
    assert_true(get(&t, "hidden_size", RAD_META_INT)->f == 4096.0);
    assert_true(get(&t, "rms_norm_eps", RAD_META_FLOAT)->f == 1e-05);
    assert_int_equal(get(&t, "rope_theta", RAD_META_FLOAT)->i, 500000);   /* "500000.0" is a real */
    assert_true(get(&t, "big", RAD_META_INT)->i == 9007199254740993LL);  /* exact, not via double */
    assert_int_equal(get(&t, "neg", RAD_META_INT)->i, -3);
    assert_int_equal(get(&t, "tie_word_embeddings", RAD_META_INT)->i, 1);
    assert_int_equal(get(&t, "attention_bias", RAD_META_INT)->i, 0);
    assert_null(rad_meta_table_find(&t, "pad_token_id"));

    assert_string_equal(get(&t, "rope_scaling.rope_type", RAD_META_STRING)->s, "llama3");
    assert_true(get(&t, "rope_scaling.factor", RAD_META_FLOAT)->f == 8.0);
    assert_int_equal(get(&t, "rope_scaling.original_max_position_embeddings", RAD_META_INT)->i, 8192);
    assert_int_equal(get(&t, "rope_scaling.deep.x.1", RAD_META_INT)->i, 2);
    assert_int_equal(get(&t, "rope_scaling.deep.x.length", RAD_META_INT)->i, 2);
    assert_null(rad_meta_table_find(&t, "rope_scaling"));

    assert_int_equal(get(&t, "eos_token_id.length", RAD_META_INT)->i, 3);
    assert_int_equal(get(&t, "eos_token_id.0", RAD_META_INT)->i, 128001);
    assert_int_equal(get(&t, "eos_token_id.2", RAD_META_INT)->i, 128009);
    assert_null(rad_meta_table_find(&t, "eos_token_id.3"));

    assert_int_equal(get(&t, "mixed.length", RAD_META_INT)->i, 6);   /* nulls count in the length */
    assert_int_equal(get(&t, "mixed.0", RAD_META_INT)->i, 1);
    assert_null(rad_meta_table_find(&t, "mixed.1"));
    assert_true(get(&t, "mixed.2", RAD_META_FLOAT)->f == 1.5);
    assert_int_equal(get(&t, "mixed.2", RAD_META_FLOAT)->i, 1);
    assert_string_equal(get(&t, "mixed.3", RAD_META_STRING)->s, "s");
    assert_int_equal(get(&t, "mixed.4.k", RAD_META_INT)->i, 1);
    assert_int_equal(get(&t, "mixed.5.length", RAD_META_INT)->i, 0);
    assert_null(rad_meta_table_find(&t, "empty_obj"));
    assert_string_equal(get(&t, "unicode", RAD_META_STRING)->s, "caf\xc3\xa9");

    /* keys come out in file order */
    assert_string_equal(t.kv[0].key, "model_type");
    assert_string_equal(t.kv[1].key, "hidden_size");
    rad_meta_table_free(&t);
}

/* Two paths that flatten to one key: the later in the file wins. */
static void test_flatten_collision(void **state)
{
    (void)state;
    RadMetaTable t;
    rad_meta_table_init(&t);
    assert_int_equal(rad_hf_config_load_string("{\"a.b\": 1, \"a\": {\"b\": 2}, \"c\": {\"d\": \"x\"}, \"c.d\": 3.5}",
                                               "config.json", &t), 0);
    assert_int_equal(t.n, 2);
    assert_int_equal(get(&t, "a.b", RAD_META_INT)->i, 2);
    assert_true(get(&t, "c.d", RAD_META_FLOAT)->f == 3.5);
    rad_meta_table_free(&t);
}

/* Loading into a table that already has keys replaces those keys and keeps the rest. */
static void test_load_into_nonempty(void **state)
{
    (void)state;
    RadMetaTable t;
    rad_meta_table_init(&t);
    assert_int_equal(rad_meta_table_set_string(&t, "keep", "me"), 0);
    assert_int_equal(rad_meta_table_set_string(&t, "hidden_size", "old"), 0);
    assert_int_equal(rad_hf_config_load_string("{\"hidden_size\": 8, \"new\": false}", "c", &t), 0);
    assert_int_equal(t.n, 3);
    assert_string_equal(get(&t, "keep", RAD_META_STRING)->s, "me");
    assert_int_equal(get(&t, "hidden_size", RAD_META_INT)->i, 8);
    assert_int_equal(get(&t, "new", RAD_META_INT)->i, 0);
    rad_meta_table_free(&t);
}

/* -------------------------------------------------------------- refusals */

/* A parse error names the file, jansson's line and column, and leaves the table empty. */
static void test_parse_error_position(void **state)
{
    (void)state;
    RadMetaTable t;
    rad_meta_table_init(&t);
    int rc = rad_hf_config_load_string("{\n  \"a\": 1,\n  \"b\": [1, 2,, 3]\n}", "m/config.json", &t);
    assert_int_equal(rc, RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "m/config.json: not valid JSON at line 3, column 14"));
    assert_int_equal(t.n, 0);

    /* Python's NaN is not JSON either */
    rc = rad_hf_config_load_string("{\"x\": NaN}", "config.json", &t);
    assert_int_equal(rc, RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "line 1, column"));
    assert_int_equal(rad_hf_config_load_string("", "config.json", &t), RAD_E_FORMAT);
    assert_int_equal(t.n, 0);
}

/* A top level that is not an object is refused. */
static void test_top_level_not_object(void **state)
{
    (void)state;
    RadMetaTable t;
    rad_meta_table_init(&t);
    assert_int_equal(rad_hf_config_load_string("[1, 2]", "config.json", &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "config.json: the top level is an array, not an object"));
    assert_int_equal(rad_hf_config_load_string("42", "config.json", &t), RAD_E_FORMAT);
    assert_int_equal(rad_hf_config_load_string("{\"\": 1}", "config.json", &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "empty string"));
    assert_int_equal(t.n, 0);
}

/* A missing file is RAD_E_NOTFOUND with the folder hint; a real file loads. */
static void test_missing_file(void **state)
{
    (void)state;
    RadMetaTable t;
    rad_meta_table_init(&t);
    assert_int_equal(rad_hf_config_load("/nonexistent/dir/config.json", &t), RAD_E_NOTFOUND);
    assert_string_equal(rad_error_message(),
                        "/nonexistent/dir/config.json: not found: is this a Hugging Face model folder?");
    assert_int_equal(rad_hf_config_load("/tmp", &t), RAD_E_IO);

    char path[] = "/tmp/rad_test_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "{\"vocab_size\": 32000, \"rope_scaling\": {\"factor\": 2.0}}";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(rad_hf_config_load(path, &t), 0);
    assert_int_equal(get(&t, "vocab_size", RAD_META_INT)->i, 32000);
    assert_true(get(&t, "rope_scaling.factor", RAD_META_FLOAT)->f == 2.0);
    unlink(path);
    rad_meta_table_free(&t);
}

/* A config.json of `keys` integer leaves, half at the top and half in a
** nested object (the limit counts leaves, not top-level keys). */
static char *config_with_keys(size_t keys)
{
    char *s = malloc(keys * 24 + 64);
    assert_non_null(s);
    size_t n = 0;
    n += (size_t)sprintf(s + n, "{\"nested\": {");
    for (size_t i = 0; i < keys / 2; i++) n += (size_t)sprintf(s + n, "%s\"n%zu\": %zu", i ? ", " : "", i, i);
    n += (size_t)sprintf(s + n, "}");
    for (size_t i = keys / 2; i < keys; i++) n += (size_t)sprintf(s + n, ", \"k%zu\": %zu", i, i);
    sprintf(s + n, "}");
    return s;
}

/* RAD_LIMIT_META_KEYS over config.json's leaves: at the limit it loads, one
** more is refused by the limit's name (no test reached it before). */
static void test_key_limit(void **state)
{
    (void)state;
    RadMetaTable t;
    rad_meta_table_init(&t);
    char *text = config_with_keys(RAD_LIMIT_META_KEYS);
    int rc = rad_hf_config_load_string(text, "wide/config.json", &t);
    if (rc) fail_msg("%d keys refused: %s", RAD_LIMIT_META_KEYS, rad_error_message());
    assert_int_equal(t.n, RAD_LIMIT_META_KEYS);
    assert_int_equal(get(&t, "nested.n7", RAD_META_INT)->i, 7);
    rad_meta_table_free(&t);
    free(text);

    rad_meta_table_init(&t);
    text = config_with_keys(RAD_LIMIT_META_KEYS + 1);
    rad_error_clear();
    assert_int_equal(rad_hf_config_load_string(text, "wide/config.json", &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "wide/config.json: more than 65536 keys, over the limit "
                                                "(RAD_LIMIT_META_KEYS)"));
    assert_int_equal(t.n, 0);
    rad_meta_table_free(&t);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meta_table_set_replace),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_flatten_collision),
        cmocka_unit_test(test_load_into_nonempty),
        cmocka_unit_test(test_parse_error_position),
        cmocka_unit_test(test_top_level_not_object),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_key_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
