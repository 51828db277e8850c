/*
** test_gguf.c: the GGUF reader (formats/gguf.c) and the tokenizer built from
** GGUF metadata (formats/tokenizer_gguf.c).
**
** Every file is built byte by byte here, in a temporary folder: a header,
** the metadata written value by value, the tensor table and the data.  Each
** refusal is a file with exactly one thing wrong, and must come back as a
** negative code with one line naming the file and the field.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "gguf.h"
#include "rad_limits.h"
#include "tokenizer.h"
#include "tokenizer_gguf.h"

/* ------------------------------------------------------------ fixtures */

static char tmpdir[256];

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/rad_test_gguf_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static const char *tpath(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

/* ------------------------------------------------------- byte builders */

enum { T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };

typedef struct Buf {
    uint8_t *p;
    size_t n, cap;
} Buf;

static void put(Buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_le(Buf *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        put(b, &c, 1);
    }
}

static void put_u32(Buf *b, uint32_t v)
{
    put_le(b, v, 4);
}
static void put_u64(Buf *b, uint64_t v)
{
    put_le(b, v, 8);
}

static void put_f32(Buf *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}

static void put_f64(Buf *b, double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    put_u64(b, u);
}

static void put_str(Buf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

/* The metadata section being written, and its key count. */
typedef struct Kvs {
    Buf b;
    uint64_t n;
} Kvs;

static void kv_head(Kvs *k, const char *key, uint32_t type)
{
    put_str(&k->b, key);
    put_u32(&k->b, type);
    k->n++;
}

static void kv_uint(Kvs *k, const char *key, uint32_t type, uint64_t v, int bytes)
{
    kv_head(k, key, type);
    put_le(&k->b, v, bytes);
}

static void kv_u32(Kvs *k, const char *key, uint32_t v)
{
    kv_uint(k, key, T_U32, v, 4);
}
static void kv_bool(Kvs *k, const char *key, uint8_t v)
{
    kv_uint(k, key, T_BOOL, v, 1);
}

static void kv_str(Kvs *k, const char *key, const char *s)
{
    kv_head(k, key, T_STR);
    put_str(&k->b, s);
}

static void kv_arr(Kvs *k, const char *key, uint32_t et, uint64_t n)
{
    kv_head(k, key, T_ARR);
    put_u32(&k->b, et);
    put_u64(&k->b, n);
}

static void kv_strs(Kvs *k, const char *key, const char *const *s, int n)
{
    kv_arr(k, key, T_STR, (uint64_t)n);
    for (int i = 0; i < n; i++) put_str(&k->b, s[i]);
}

static void kv_i32s(Kvs *k, const char *key, const int32_t *v, int n)
{
    kv_arr(k, key, T_I32, (uint64_t)n);
    for (int i = 0; i < n; i++) put_u32(&k->b, (uint32_t)v[i]);
}

static void kv_f32s(Kvs *k, const char *key, const float *v, int n)
{
    kv_arr(k, key, T_F32, (uint64_t)n);
    for (int i = 0; i < n; i++) put_f32(&k->b, v[i]);
}

/* One tensor of a file to build. */
typedef struct Tensor {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[4];
} Tensor;

/* Bytes of a tensor of the types the tests use; unknown types take a byte
** per element (they are refused before their size matters). */
static uint64_t tensor_bytes(const Tensor *t)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims && d < 4; d++) n *= t->ne[d];
    switch (t->type) {
    case 0:
        return n * 4; /* f32 */
    case 1:
    case 30:
        return n * 2; /* f16, bf16 */
    case 8:
        return n / 32 * 34; /* q8_0 */
    case 12:
        return n / 256 * 144; /* q4_k */
    default:
        return n;
    }
}

/* The byte at position i of every data section the builder writes. */
static uint8_t pattern(uint64_t i)
{
    return (uint8_t)(i * 7 + 3);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* A whole GGUF: header, metadata `kv`, the tensor table of `t`, padding to
** `align`, and the data.  Offsets are packed in order unless `offsets` gives
** them.  *data_at (if not NULL) receives where the data section starts. */
static Buf build(uint32_t version, const Kvs *kv, const Tensor *t, int nt, uint32_t align,
                 const uint64_t *offsets, uint64_t *data_at)
{
    Buf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, version);
    put_u64(&b, (uint64_t)nt);
    put_u64(&b, kv ? kv->n : 0);
    if (kv) put(&b, kv->b.p, kv->b.n);
    uint64_t off = 0;
    for (int i = 0; i < nt; i++) {
        put_str(&b, t[i].name);
        put_u32(&b, t[i].n_dims);
        for (uint32_t d = 0; d < t[i].n_dims; d++) put_u64(&b, d < 4 ? t[i].ne[d] : 1);
        put_u32(&b, t[i].type);
        put_u64(&b, offsets ? offsets[i] : off);
        off = align_up(off + tensor_bytes(&t[i]), align);
    }
    uint64_t start = nt ? align_up(b.n, align) : b.n;
    while (b.n < start) put(&b, "", 1);
    if (data_at) *data_at = start;
    uint64_t end = 0;
    off = 0;
    for (int i = 0; i < nt; i++) {
        end = off + tensor_bytes(&t[i]);
        off = align_up(end, align);
    }
    for (uint64_t i = 0; i < end; i++) {
        uint8_t c = pattern(i);
        put(&b, &c, 1);
    }
    return b;
}

static void write_buf(const char *path, const Buf *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b->p, 1, n, f), n);
    fclose(f);
}

static void free_kvs(Kvs *k)
{
    free(k->b.p);
}

/* Expect `path` to be refused with `code` and a one-line message holding `needle`. */
static void expect_refused(const char *path, int code, const char *needle)
{
    RadGguf *g = (RadGguf *)1;
    rad_error_clear();
    int rc = rad_gguf_open(path, &g);
    if (rc != code || !strstr(rad_error_message(), needle))
        print_error("rc %d, message: %s\n", rc, rad_error_message());
    assert_int_equal(rc, code);
    assert_null(g);
    assert_non_null(strstr(rad_error_message(), needle));
    assert_null(strchr(rad_error_message(), '\n'));
    if (getenv("RAD_TEST_VERBOSE")) printf("    %s\n", rad_error_message());
}

/* Write `b` to a file and expect it refused. */
static void expect_buf_refused(const Buf *b, int code, const char *needle)
{
    const char *path = tpath("bad.gguf");
    write_buf(path, b, b->n);
    expect_refused(path, code, needle);
}

/* Two tensors, the usual small fixture. */
static const Tensor two_tensors[] = {
    {"tok_embd.weight", 0, 2, {3, 2}},   /* f32, 24 bytes */
    {"blk.0.ffn.weight", 8, 2, {64, 2}}, /* q8_0, 136 bytes */
};

/* A file with `kv` and the two fixture tensors, for refusal tests. */
static Buf small_file(const Kvs *kv)
{
    return build(3, kv, two_tensors, 2, 32, NULL, NULL);
}

/* ------------------------------------------------------------ reading */

/* Every metadata value type, arrays of each, and nested arrays read back exactly (version 3). */
static void check_all_types(uint32_t version)
{
    Kvs kv = {0};
    kv_uint(&kv, "t.u8", T_U8, 200, 1);
    kv_uint(&kv, "t.i8", T_I8, 0x80, 1); /* -128 */
    kv_uint(&kv, "t.u16", T_U16, 65535, 2);
    kv_uint(&kv, "t.i16", T_I16, 0xfffe, 2); /* -2 */
    kv_u32(&kv, "t.u32", 4000000000u);
    kv_uint(&kv, "t.i32", T_I32, 0xffffff85u, 4); /* -123 */
    kv_head(&kv, "t.f32", T_F32);
    put_f32(&kv.b, 1.5f);
    kv_bool(&kv, "t.bool", 1);
    kv_str(&kv, "t.str", "h\xc3\xa9llo");
    kv_uint(&kv, "t.u64", T_U64, UINT64_MAX, 8);
    kv_uint(&kv, "t.i64", T_I64, (uint64_t)-5, 8);
    kv_head(&kv, "t.f64", T_F64);
    put_f64(&kv.b, -2.25);
    /* arrays of every element type */
    kv_arr(&kv, "a.u8", T_U8, 3);
    put(&kv.b, "\x01\x02\xff", 3);
    kv_arr(&kv, "a.i16", T_I16, 2);
    put_le(&kv.b, 0x8000, 2);
    put_le(&kv.b, 7, 2);
    int32_t i32s[] = {-1, 2, 3};
    kv_i32s(&kv, "a.i32", i32s, 3);
    kv_arr(&kv, "a.u64", T_U64, 1);
    put_u64(&kv.b, UINT64_MAX);
    float f32s[] = {0.5f, -4.0f};
    kv_f32s(&kv, "a.f32", f32s, 2);
    kv_arr(&kv, "a.f64", T_F64, 1);
    put_f64(&kv.b, 3.25);
    kv_arr(&kv, "a.bool", T_BOOL, 2);
    put(&kv.b, "\x00\x01", 2);
    const char *strs[] = {"x", "", "yz"};
    kv_strs(&kv, "a.str", strs, 3);
    kv_arr(&kv, "a.empty", T_I8, 0);
    /* [[1, 2], [], [3]] of u32, and [["a"], ["b", "c"]] */
    kv_arr(&kv, "a.nested", T_ARR, 3);
    put_u32(&kv.b, T_U32), put_u64(&kv.b, 2), put_u32(&kv.b, 1), put_u32(&kv.b, 2);
    put_u32(&kv.b, T_U32), put_u64(&kv.b, 0);
    put_u32(&kv.b, T_U32), put_u64(&kv.b, 1), put_u32(&kv.b, 3);
    kv_arr(&kv, "a.nested_str", T_ARR, 2);
    put_u32(&kv.b, T_STR), put_u64(&kv.b, 1), put_str(&kv.b, "a");
    put_u32(&kv.b, T_STR), put_u64(&kv.b, 2), put_str(&kv.b, "b"), put_str(&kv.b, "c");
    kv_str(&kv, "general.architecture", "llama");

    uint64_t data_at;
    Buf b = build(version, &kv, two_tensors, 2, 32, NULL, &data_at);
    const char *path = tpath("types.gguf");
    write_buf(path, &b, b.n);
    RadGguf *g;
    assert_int_equal(rad_gguf_open(path, &g), 0);
    assert_int_equal(rad_gguf_version(g), version);
    assert_int_equal(rad_gguf_alignment(g), 32);
    assert_int_equal(rad_gguf_n_parts(g), 1);
    assert_string_equal(rad_gguf_path(g), path);
    assert_int_equal(rad_gguf_n_keys(g), (int)kv.n);
    assert_string_equal(rad_gguf_key(g, 0), "t.u8");
    assert_null(rad_gguf_key(g, (int)kv.n));
    assert_int_equal(rad_gguf_find_key(g, "t.str"), 8);
    assert_int_equal(rad_gguf_find_key(g, "nope"), -1);

    const RadGgufValue *v;
    assert_int_equal((v = rad_gguf_get(g, "t.u8"))->type, RAD_GGUF_U8);
    assert_int_equal(v->u, 200);
    assert_int_equal(rad_gguf_get(g, "t.i8")->i, -128);
    assert_int_equal(rad_gguf_get(g, "t.u16")->u, 65535);
    assert_int_equal(rad_gguf_get(g, "t.i16")->i, -2);
    assert_int_equal(rad_gguf_get(g, "t.u32")->u, 4000000000u);
    assert_int_equal(rad_gguf_get(g, "t.i32")->i, -123);
    assert_true(rad_gguf_get(g, "t.f32")->f == 1.5);
    assert_int_equal(rad_gguf_get(g, "t.bool")->u, 1);
    assert_string_equal(rad_gguf_get(g, "t.str")->str.s, "h\xc3\xa9llo");
    assert_int_equal(rad_gguf_get(g, "t.str")->str.len, 6);
    assert_true(rad_gguf_get(g, "t.u64")->u == UINT64_MAX);
    assert_int_equal(rad_gguf_get(g, "t.i64")->i, -5);
    assert_true(rad_gguf_get(g, "t.f64")->f == -2.25);

    int64_t i64;
    uint32_t u32;
    double f;
    int bo;
    const char *s;
    assert_int_equal(rad_gguf_get_int(g, "t.i32", 0, &i64), 0);
    assert_int_equal(i64, -123);
    assert_int_equal(rad_gguf_get_int(g, "t.u16", 0, &i64), 0);
    assert_int_equal(i64, 65535);
    assert_int_equal(rad_gguf_get_u32(g, "t.u32", 0, &u32), 0);
    assert_int_equal(u32, 4000000000u);
    assert_int_equal(rad_gguf_get_float(g, "t.f64", 0, &f), 0);
    assert_true(f == -2.25);
    assert_int_equal(rad_gguf_get_bool(g, "t.bool", 0, &bo), 0);
    assert_int_equal(bo, 1);
    assert_int_equal(rad_gguf_get_string(g, "general.architecture", NULL, &s), 0);
    assert_string_equal(s, "llama");

    const RadGgufValue *a;
    assert_int_equal(rad_gguf_get_array(g, "a.u8", RAD_GGUF_U8, &a), 0);
    assert_int_equal(a->arr.n, 3);
    assert_int_equal(rad_gguf_arr_int(a, 2), 255);
    assert_int_equal(rad_gguf_get_array(g, "a.i16", -1, &a), 0);
    assert_int_equal(rad_gguf_arr_int(a, 0), -32768);
    assert_int_equal(rad_gguf_arr_int(a, 1), 7);
    assert_int_equal(rad_gguf_get_array(g, "a.i32", RAD_GGUF_I32, &a), 0);
    assert_int_equal(rad_gguf_arr_int(a, 0), -1);
    assert_true(rad_gguf_arr_float(a, 2) == 3.0);
    assert_int_equal(rad_gguf_get_array(g, "a.u64", RAD_GGUF_U64, &a), 0);
    assert_int_equal(rad_gguf_arr_int(a, 0), INT64_MAX); /* saturates, as documented */
    assert_int_equal(rad_gguf_get_array(g, "a.f32", RAD_GGUF_F32, &a), 0);
    assert_true(rad_gguf_arr_float(a, 1) == -4.0);
    assert_int_equal(rad_gguf_get_array(g, "a.f64", RAD_GGUF_F64, &a), 0);
    assert_true(rad_gguf_arr_float(a, 0) == 3.25);
    assert_int_equal(rad_gguf_get_array(g, "a.bool", RAD_GGUF_BOOL, &a), 0);
    assert_int_equal(rad_gguf_arr_int(a, 1), 1);
    assert_int_equal(rad_gguf_get_array(g, "a.str", RAD_GGUF_STRING, &a), 0);
    uint64_t len;
    assert_string_equal(rad_gguf_arr_str(a, 0, &len), "x");
    assert_string_equal(rad_gguf_arr_str(a, 1, &len), "");
    assert_int_equal(len, 0);
    assert_string_equal(rad_gguf_arr_str(a, 2, NULL), "yz");
    assert_int_equal(rad_gguf_get_array(g, "a.empty", RAD_GGUF_I8, &a), 0);
    assert_int_equal(a->arr.n, 0);
    assert_int_equal(rad_gguf_get_array(g, "a.nested", RAD_GGUF_ARRAY, &a), 0);
    assert_int_equal(a->arr.n, 3);
    assert_int_equal(rad_gguf_arr_item(a, 0)->arr.n, 2);
    assert_int_equal(rad_gguf_arr_int(rad_gguf_arr_item(a, 0), 1), 2);
    assert_int_equal(rad_gguf_arr_item(a, 1)->arr.n, 0);
    assert_int_equal(rad_gguf_arr_int(rad_gguf_arr_item(a, 2), 0), 3);
    assert_int_equal(rad_gguf_get_array(g, "a.nested_str", RAD_GGUF_ARRAY, &a), 0);
    assert_string_equal(rad_gguf_arr_str(rad_gguf_arr_item(a, 1), 1, NULL), "c");

    /* tensors: GGUF dimension order, sizes, data in place */
    assert_int_equal(rad_gguf_n_tensors(g), 2);
    const RadGgufTensor *t0 = rad_gguf_tensor(g, 0), *t1 = rad_gguf_find_tensor(g, "blk.0.ffn.weight");
    assert_ptr_equal(rad_gguf_find_tensor(g, "tok_embd.weight"), t0);
    assert_null(rad_gguf_find_tensor(g, "nope"));
    assert_null(rad_gguf_tensor(g, 2));
    assert_int_equal(t0->enc, RAD_ENC_F32);
    assert_int_equal(t0->n_dims, 2);
    assert_int_equal(t0->ne[0], 3);
    assert_int_equal(t0->ne[1], 2);
    assert_int_equal(t0->ne[2], 1);
    assert_int_equal(t0->n_elems, 6);
    assert_int_equal(t0->size, 24);
    assert_int_equal(t0->file_offset, data_at);
    assert_int_equal(t0->file_offset % 32, 0);
    assert_int_equal(((const uint8_t *)t0->data)[5], pattern(5));
    assert_int_equal(t1->enc, RAD_ENC_Q8_0);
    assert_int_equal(t1->size, 136);
    assert_int_equal(t1->file_offset, data_at + 32);
    assert_int_equal(((const uint8_t *)t1->data)[0], pattern(32));
    assert_int_equal(((const uint8_t *)t1->data)[135], pattern(32 + 135));
    assert_int_equal(t1->part, 0);
    rad_gguf_close(g);
    rad_gguf_close(NULL);
    free(b.p);
    free_kvs(&kv);
}

/* Version 3: every value type, arrays of each type, nested arrays and the tensor table read back exactly. */
static void test_v3_all_types(void **state)
{
    (void)state;
    check_all_types(3);
}

/* Version 2 files (u64 counts, little-endian) read the same as version 3. */
static void test_v2_all_types(void **state)
{
    (void)state;
    check_all_types(2);
}

/* general.alignment 64 moves the data section and every tensor to multiples of 64. */
static void test_alignment_64(void **state)
{
    (void)state;
    Kvs kv = {0};
    kv_u32(&kv, "general.alignment", 64);
    Tensor t[] = {{"a", 0, 1, {5}}, {"b", 1, 1, {3}}, {"c", 30, 3, {2, 2, 2}}};
    uint64_t data_at;
    Buf b = build(3, &kv, t, 3, 64, NULL, &data_at);
    const char *path = tpath("a64.gguf");
    write_buf(path, &b, b.n);
    RadGguf *g;
    assert_int_equal(rad_gguf_open(path, &g), 0);
    assert_int_equal(rad_gguf_alignment(g), 64);
    assert_int_equal(data_at % 64, 0);
    for (int i = 0; i < 3; i++) assert_int_equal(rad_gguf_tensor(g, i)->file_offset % 64, 0);
    assert_int_equal(rad_gguf_tensor(g, 1)->file_offset, data_at + 64);
    assert_int_equal(rad_gguf_tensor(g, 2)->file_offset, data_at + 128);
    assert_int_equal(rad_gguf_tensor(g, 2)->enc, RAD_ENC_BF16);
    assert_int_equal(rad_gguf_tensor(g, 2)->n_elems, 8);
    rad_gguf_close(g);
    free(b.p);
    free_kvs(&kv);
}

/* A file with metadata and no tensors at all, ending right after the metadata, is fine. */
static void test_no_tensors(void **state)
{
    (void)state;
    Kvs kv = {0};
    kv_str(&kv, "general.architecture", "x");
    Buf b = build(3, &kv, NULL, 0, 32, NULL, NULL);
    const char *path = tpath("empty.gguf");
    write_buf(path, &b, b.n);
    RadGguf *g;
    assert_int_equal(rad_gguf_open(path, &g), 0);
    assert_int_equal(rad_gguf_n_tensors(g), 0);
    assert_null(rad_gguf_find_tensor(g, "x"));
    rad_gguf_close(g);
    free(b.p);
    free_kvs(&kv);
}

/* Typed getters: defaults when absent; a present key of the wrong type or range is an error naming the key.
 */
static void test_getters(void **state)
{
    (void)state;
    Kvs kv = {0};
    kv_str(&kv, "s", "text");
    kv_uint(&kv, "big", T_U64, UINT64_MAX, 8);
    kv_uint(&kv, "neg", T_I32, (uint32_t)-1, 4);
    kv_bool(&kv, "b", 0);
    int32_t v[] = {1};
    kv_i32s(&kv, "arr", v, 1);
    Buf b = small_file(&kv);
    const char *path = tpath("get.gguf");
    write_buf(path, &b, b.n);
    RadGguf *g;
    assert_int_equal(rad_gguf_open(path, &g), 0);
    int64_t i = 0;
    uint32_t u = 0;
    double f = 0;
    int bo = 9;
    const char *s = NULL;
    const RadGgufValue *a = (const RadGgufValue *)1;
    assert_int_equal(rad_gguf_get_int(g, "absent", 42, &i), 0);
    assert_int_equal(i, 42);
    assert_int_equal(rad_gguf_get_u32(g, "absent", 7, &u), 0);
    assert_int_equal(u, 7);
    assert_int_equal(rad_gguf_get_float(g, "absent", 0.5, &f), 0);
    assert_true(f == 0.5);
    assert_int_equal(rad_gguf_get_bool(g, "absent", 1, &bo), 0);
    assert_int_equal(bo, 1);
    assert_int_equal(rad_gguf_get_string(g, "absent", "dflt", &s), 0);
    assert_string_equal(s, "dflt");
    assert_int_equal(rad_gguf_get_array(g, "absent", -1, &a), 0);
    assert_null(a);

    assert_int_equal(rad_gguf_get_int(g, "s", 0, &i), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "key 's' is a string; expected an integer"));
    assert_int_equal(rad_gguf_get_int(g, "big", 0, &i), RAD_E_FORMAT);
    assert_int_equal(rad_gguf_get_u32(g, "neg", 0, &u), RAD_E_FORMAT);
    assert_int_equal(rad_gguf_get_int(g, "b", 0, &i), RAD_E_FORMAT); /* a bool is not an integer */
    assert_int_equal(rad_gguf_get_float(g, "neg", 0, &f), RAD_E_FORMAT);
    assert_int_equal(rad_gguf_get_bool(g, "s", 0, &bo), RAD_E_FORMAT);
    assert_int_equal(rad_gguf_get_string(g, "b", NULL, &s), RAD_E_FORMAT);
    assert_int_equal(rad_gguf_get_array(g, "arr", RAD_GGUF_STRING, &a), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "array of i32; expected an array of string"));
    assert_int_equal(rad_gguf_get_array(g, "s", -1, &a), RAD_E_FORMAT);
    assert_string_equal(rad_gguf_type_name(RAD_GGUF_F64), "f64");
    assert_string_equal(rad_gguf_type_name(99), "?");
    assert_string_equal(rad_gguf_ggml_type_name(16), "iq2_xxs");
    assert_null(rad_gguf_ggml_type_name(200));
    rad_gguf_close(g);
    free(b.p);
    free_kvs(&kv);
}

/* ----------------------------------------------------------- split sets */

/* Write part `no` of `count` of a split model holding tensors t[0..nt). */
static void write_part(const char *name, int no, int count, int total, const Tensor *t, int nt)
{
    Kvs kv = {0};
    if (no == 0) kv_str(&kv, "general.architecture", "llama");
    kv_uint(&kv, "split.no", T_U16, (uint64_t)no, 2);
    kv_uint(&kv, "split.count", T_U16, (uint64_t)count, 2);
    kv_uint(&kv, "split.tensors.count", T_I32, (uint64_t)total, 4);
    Buf b = build(3, &kv, t, nt, 32, NULL, NULL);
    write_buf(tpath(name), &b, b.n);
    free(b.p);
    free_kvs(&kv);
}

/* The first part of a split pair opens both: one tensor table, each tensor's data in its own part, first
 * part's metadata. */
static void test_split_pair(void **state)
{
    (void)state;
    Tensor a[] = {{"a", 0, 1, {4}}, {"b", 0, 1, {2}}}, c[] = {{"c", 1, 1, {8}}};
    write_part("m-00001-of-00002.gguf", 0, 2, 3, a, 2);
    write_part("m-00002-of-00002.gguf", 1, 2, 3, c, 1);
    RadGguf *g;
    assert_int_equal(rad_gguf_open(tpath("m-00001-of-00002.gguf"), &g), 0);
    assert_int_equal(rad_gguf_n_parts(g), 2);
    assert_string_equal(rad_gguf_part_path(g, 1), tpath("m-00002-of-00002.gguf"));
    assert_null(rad_gguf_part_path(g, 2));
    assert_int_equal(rad_gguf_n_tensors(g), 3);
    const RadGgufTensor *tc = rad_gguf_find_tensor(g, "c"), *tb = rad_gguf_find_tensor(g, "b");
    assert_non_null(tc);
    assert_int_equal(tc->part, 1);
    assert_int_equal(tb->part, 0);
    assert_int_equal(tc->enc, RAD_ENC_F16);
    assert_int_equal(((const uint8_t *)tc->data)[3], pattern(3)); /* from part 2's own data section */
    assert_int_equal(((const uint8_t *)tb->data)[0], pattern(32));
    const char *arch;
    assert_int_equal(rad_gguf_get_string(g, "general.architecture", NULL, &arch), 0);
    assert_string_equal(arch, "llama");
    rad_gguf_close(g);

    /* Opening the second part names the first. */
    expect_refused(tpath("m-00002-of-00002.gguf"), RAD_E_ARG, "open the first part");
    /* A missing part is named. */
    remove(tpath("m-00002-of-00002.gguf"));
    expect_refused(tpath("m-00001-of-00002.gguf"), RAD_E_NOTFOUND, "m-00002-of-00002.gguf");
    /* A part with the wrong number, or a tensor count that does not add up. */
    write_part("m-00002-of-00002.gguf", 0, 2, 3, c, 1);
    expect_refused(tpath("m-00001-of-00002.gguf"), RAD_E_FORMAT, "split.no 0");
    Tensor cd[] = {{"c", 1, 1, {8}}, {"d", 1, 1, {8}}};
    write_part("m-00002-of-00002.gguf", 1, 2, 3, cd, 2); /* 4 tensors in all, not 3 */
    expect_refused(tpath("m-00001-of-00002.gguf"), RAD_E_FORMAT, "split.tensors.count says 3");
    Tensor a2[] = {{"a", 0, 1, {4}}, {"z", 0, 1, {4}}};
    write_part("m-00002-of-00002.gguf", 1, 2, 4, a2, 2);
    write_part("m-00001-of-00002.gguf", 0, 2, 4, a, 2);
    expect_refused(tpath("m-00001-of-00002.gguf"), RAD_E_FORMAT, "tensor 'a' appears twice");
    /* split.count > 1 on a file not named like a first part. */
    write_part("plain.gguf", 0, 2, 2, a, 2);
    expect_refused(tpath("plain.gguf"), RAD_E_FORMAT, "-00001-of-00002.gguf");
}

/* ------------------------------------------------------------ refusals */

/* A file cut at every length short of its end is refused as FORMAT with one line, never read past its end. */
static void test_truncated_everywhere(void **state)
{
    (void)state;
    Kvs kv = {0};
    kv_str(&kv, "general.architecture", "llama");
    const char *strs[] = {"a", "bc", "def"};
    kv_strs(&kv, "a.str", strs, 3);
    kv_arr(&kv, "a.nested", T_ARR, 1);
    put_u32(&kv.b, T_U8), put_u64(&kv.b, 2), put(&kv.b, "\x01\x02", 2);
    kv_head(&kv, "f", T_F64);
    put_f64(&kv.b, 1.0);
    Buf b = small_file(&kv);
    const char *path = tpath("cut.gguf");
    for (size_t n = 0; n < b.n; n++) {
        write_buf(path, &b, n);
        RadGguf *g = (RadGguf *)1;
        int rc = rad_gguf_open(path, &g);
        if (rc != RAD_E_FORMAT)
            print_error("cut at %zu of %zu: rc %d: %s\n", n, b.n, rc, rad_error_message());
        assert_int_equal(rc, RAD_E_FORMAT);
        assert_null(g);
        assert_null(strchr(rad_error_message(), '\n'));
        assert_non_null(strstr(rad_error_message(), path));
    }
    write_buf(path, &b, b.n);
    RadGguf *g;
    assert_int_equal(rad_gguf_open(path, &g), 0);
    rad_gguf_close(g);
    free(b.p);
    free_kvs(&kv);
}

/* A file that does not start with "GGUF" is refused, naming what it starts with. */
static void test_wrong_magic(void **state)
{
    (void)state;
    Buf b = small_file(NULL);
    memcpy(b.p, "GGML", 4);
    expect_buf_refused(&b, RAD_E_FORMAT, "not a GGUF file (it starts with 'GGML'");
    free(b.p);
}

/* Version 1, a byte-swapped (big-endian) file and an unknown version are refused by name. */
static void test_versions_refused(void **state)
{
    (void)state;
    Buf b = build(1, NULL, two_tensors, 2, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_UNSUPPORTED, "GGUF version 1");
    free(b.p);
    b = build(0x03000000, NULL, two_tensors, 2, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_UNSUPPORTED, "big-endian");
    free(b.p);
    b = build(4, NULL, two_tensors, 2, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_UNSUPPORTED, "GGUF version 4 is not supported");
    free(b.p);
}

/* A tensor whose bytes run past the end, or whose offset is past the data, is refused. */
static void test_tensor_past_end(void **state)
{
    (void)state;
    /* size past the end: the last tensor claims more rows than the file holds */
    Buf b = small_file(NULL);
    Tensor big[] = {two_tensors[0], {"blk.0.ffn.weight", 8, 2, {64, 3}}};
    Buf h = build(3, NULL, big, 2, 32, NULL, NULL);
    write_buf(tpath("bad.gguf"), &h, b.n); /* the header of `big` over the data of `small` */
    expect_refused(tpath("bad.gguf"), RAD_E_FORMAT, "run past the end of the file");
    free(h.p);
    /* offset past the end: a single tensor placed far beyond the data */
    uint64_t offs[] = {1ull << 40};
    Buf o = build(3, NULL, two_tensors, 1, 32, offs, NULL);
    expect_buf_refused(&o, RAD_E_FORMAT, "data offset 1099511627776");
    free(o.p);
    /* offset near 2^64 (aligned) cannot wrap around */
    uint64_t wild[] = {UINT64_MAX - 31};
    o = build(3, NULL, two_tensors, 1, 32, wild, NULL);
    expect_buf_refused(&o, RAD_E_FORMAT, "tensor 'tok_embd.weight'");
    free(o.p);
    /* an offset not on the alignment */
    uint64_t odd[] = {0, 40};
    o = build(3, NULL, two_tensors, 2, 32, odd, NULL);
    expect_buf_refused(&o, RAD_E_FORMAT, "not a multiple of the alignment 32");
    free(o.p);
    /* tensors out of order (overlapping): the second starts inside the first */
    uint64_t overlap[] = {0, 0};
    o = build(3, NULL, two_tensors, 2, 32, overlap, NULL);
    expect_buf_refused(&o, RAD_E_FORMAT, "end at 32");
    free(o.p);
    free(b.p);
}

/* String lengths and array counts near 2^64, and impossible key/tensor counts, are refused before any
 * allocation. */
static void test_huge_lengths(void **state)
{
    (void)state;
    Kvs kv = {0};
    kv_head(&kv, "s", T_STR);
    put_u64(&kv.b, UINT64_MAX - 3);
    put(&kv.b, "abcd", 4);
    Buf b = small_file(&kv);
    expect_buf_refused(&b, RAD_E_FORMAT, "length 18446744073709551612");
    free(b.p);
    free_kvs(&kv);

    Kvs k2 = {0};
    kv_arr(&k2, "a", T_U32, UINT64_MAX);
    b = small_file(&k2);
    expect_buf_refused(&b, RAD_E_FORMAT, "an array of 18446744073709551615 u32 elements");
    free(b.p);
    free_kvs(&k2);

    Kvs k3 = {0};
    kv_arr(&k3, "a", T_STR, 1ull << 61);
    b = small_file(&k3);
    expect_buf_refused(&b, RAD_E_FORMAT, "cannot fit");
    free(b.p);
    free_kvs(&k3);

    Kvs k4 = {0};
    kv_arr(&k4, "a", T_ARR, UINT64_MAX / 2);
    put_u32(&k4.b, T_U8);
    b = small_file(&k4);
    expect_buf_refused(&b, RAD_E_FORMAT, "cannot fit");
    free(b.p);
    free_kvs(&k4);

    /* a key length near 2^64 */
    Kvs k5 = {0};
    put_u64(&k5.b, UINT64_MAX);
    k5.n = 1;
    b = small_file(&k5);
    expect_buf_refused(&b, RAD_E_FORMAT, "metadata key 0");
    free(b.p);
    free_kvs(&k5);

    /* header counts */
    b = small_file(NULL);
    for (int i = 0; i < 8; i++) b.p[8 + i] = 0xff;
    expect_buf_refused(&b, RAD_E_FORMAT, "claims 18446744073709551615 tensors");
    free(b.p);
    b = small_file(NULL);
    b.p[16 + 7] = 0x10;
    expect_buf_refused(&b, RAD_E_FORMAT, "metadata keys, more than the file");
    free(b.p);
}

/* A string of `n` copies of `c`. */
static char *filled(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = 0;
    return s;
}

/* `b` followed by `n` zero bytes: room for a count the header claims, so
** that the limit, not "more than the file can hold", is what refuses it. */
static void pad(Buf *b, size_t n)
{
    uint8_t *z = calloc(1, n);
    put(b, z, n);
    free(z);
}

/* Every limit of base/rad_limits.h a GGUF can ask past is refused by name
** (one line, the file and the limit), and the number at the limit is still
** read.  Before, the key, tensor-name, nesting and split refusals gave the
** number but not the limit's name (RAD_LIMIT_GGUF_KEY_BYTES,
** RAD_LIMIT_TENSOR_NAME_BYTES, RAD_LIMIT_GGUF_NEST, RAD_LIMIT_GGUF_SPLITS),
** and no test reached RAD_LIMIT_META_KEYS or RAD_LIMIT_TENSORS at all. */
static void test_named_limits(void **state)
{
    (void)state;
    RadGguf *g;
    Buf b;

    /* RAD_LIMIT_GGUF_KEY_BYTES: a key of 65535 bytes is read, 65536 refused */
    char *key = filled('k', RAD_LIMIT_GGUF_KEY_BYTES + 1);
    Kvs k1 = {0};
    key[RAD_LIMIT_GGUF_KEY_BYTES] = 0;
    kv_u32(&k1, key, 1);
    b = small_file(&k1);
    write_buf(tpath("key.gguf"), &b, b.n);
    assert_int_equal(rad_gguf_open(tpath("key.gguf"), &g), 0);
    assert_non_null(rad_gguf_get(g, key));
    rad_gguf_close(g);
    free(b.p);
    free_kvs(&k1);
    Kvs k2 = {0};
    key[RAD_LIMIT_GGUF_KEY_BYTES] = 'k';
    kv_u32(&k2, key, 1);
    b = small_file(&k2);
    expect_buf_refused(&b, RAD_E_FORMAT, "metadata key 0: name: length 65536 is over the limit of 65535 bytes "
                                         "(RAD_LIMIT_GGUF_KEY_BYTES)");
    free(b.p);
    free_kvs(&k2);
    free(key);

    /* RAD_LIMIT_TENSOR_NAME_BYTES */
    char *name = filled('t', RAD_LIMIT_TENSOR_NAME_BYTES + 1);
    Tensor t[] = {{name, 0, 1, {4}}};
    name[RAD_LIMIT_TENSOR_NAME_BYTES] = 0;
    b = build(3, NULL, t, 1, 32, NULL, NULL);
    write_buf(tpath("name.gguf"), &b, b.n);
    assert_int_equal(rad_gguf_open(tpath("name.gguf"), &g), 0);
    assert_non_null(rad_gguf_find_tensor(g, name));
    rad_gguf_close(g);
    free(b.p);
    name[RAD_LIMIT_TENSOR_NAME_BYTES] = 't';
    b = build(3, NULL, t, 1, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_FORMAT, "tensor info 0: name: length 1025 is over the limit of 1024 bytes "
                                         "(RAD_LIMIT_TENSOR_NAME_BYTES)");
    free(b.p);
    free(name);

    /* RAD_LIMIT_GGUF_NEST: arrays of arrays `depth` deep, one element each,
    ** the innermost an empty u8 array */
    for (int depth = RAD_LIMIT_GGUF_NEST; depth <= RAD_LIMIT_GGUF_NEST + 1; depth++) {
        Kvs k = {0};
        kv_arr(&k, "nested", T_ARR, 1);
        for (int d = 1; d < depth; d++) {
            put_u32(&k.b, T_ARR);
            put_u64(&k.b, 1);
        }
        put_u32(&k.b, T_U8);
        put_u64(&k.b, 0);
        b = small_file(&k);
        if (depth == RAD_LIMIT_GGUF_NEST) {
            write_buf(tpath("nest.gguf"), &b, b.n);
            rad_error_clear();
            if (rad_gguf_open(tpath("nest.gguf"), &g)) fail_msg("%d deep: %s", depth, rad_error_message());
            rad_gguf_close(g);
        } else {
            expect_buf_refused(&b, RAD_E_FORMAT, "key 'nested': arrays nested more than 8 deep (RAD_LIMIT_GGUF_NEST)");
        }
        free(b.p);
        free_kvs(&k);
    }

    /* RAD_LIMIT_META_KEYS: the header claims one key more, in a file long
    ** enough to hold them */
    Kvs k3 = {0};
    k3.n = RAD_LIMIT_META_KEYS + 1;
    b = build(3, &k3, NULL, 0, 32, NULL, NULL);
    pad(&b, (size_t)k3.n * 16);
    expect_buf_refused(&b, RAD_E_FORMAT, "the header claims 65537 metadata keys, over the limit of 65536 "
                                         "(RAD_LIMIT_META_KEYS)");
    free(b.p);

    /* RAD_LIMIT_TENSORS, the same way (25 MB of room) */
    b = build(3, NULL, NULL, 0, 32, NULL, NULL);
    uint64_t nt = RAD_LIMIT_TENSORS + 1;
    memcpy(b.p + 8, &nt, 8);
    pad(&b, (size_t)nt * 25);
    expect_buf_refused(&b, RAD_E_FORMAT, "1048577 tensors in all parts, over the limit of 1048576 "
                                         "(RAD_LIMIT_TENSORS)");
    free(b.p);
    unlink(tpath("bad.gguf"));

    /* RAD_LIMIT_GGUF_SPLITS: a split.count past it */
    Kvs k4 = {0};
    kv_u32(&k4, "split.count", RAD_LIMIT_GGUF_SPLITS + 1);
    b = small_file(&k4);
    expect_buf_refused(&b, RAD_E_FORMAT, "key 'split.count' is 65536, outside [0, 65535] (RAD_LIMIT_GGUF_SPLITS)");
    free(b.p);
    free_kvs(&k4);
}

/* Two tensors with the same name are refused, naming it. */
static void test_duplicate_tensor(void **state)
{
    (void)state;
    Tensor t[] = {{"w", 0, 1, {4}}, {"w", 0, 1, {4}}};
    Buf b = build(3, NULL, t, 2, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_FORMAT, "tensor 'w' appears twice");
    free(b.p);
}

/* Two metadata entries with the same key are refused, naming it. */
static void test_duplicate_key(void **state)
{
    (void)state;
    Kvs kv = {0};
    kv_u32(&kv, "llama.block_count", 2);
    kv_str(&kv, "general.name", "x");
    kv_u32(&kv, "llama.block_count", 3);
    Buf b = small_file(&kv);
    expect_buf_refused(&b, RAD_E_FORMAT, "key 'llama.block_count' appears twice");
    free(b.p);
    free_kvs(&kv);
}

/* Tensor types radiance does not serve are refused by number and ggml name; unknown and retired ids too. */
static void test_unknown_tensor_type(void **state)
{
    (void)state;
    static const struct {
        uint32_t type;
        int code;
        const char *needle;
    } cases[] = {
        {16, RAD_E_UNSUPPORTED, "type 16 (iq2_xxs) is not supported"},
        {15, RAD_E_UNSUPPORTED, "type 15 (q8_k) is not supported"},
        {31, RAD_E_UNSUPPORTED, "type 31 (q4_0_4_4) was retired"},
        {4, RAD_E_UNSUPPORTED, "type 4 (q4_2) was retired"},
        {99, RAD_E_UNSUPPORTED, "type 99 is not a ggml tensor type"},
        {200, RAD_E_UNSUPPORTED,
         "type 200 is not a ggml tensor type"}, /* radiance's own fp8 id is not ggml's */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Tensor t[] = {{"blk.0.attn_q.weight", cases[i].type, 1, {256}}};
        Buf b = build(3, NULL, t, 1, 32, NULL, NULL);
        expect_buf_refused(&b, cases[i].code, cases[i].needle);
        assert_non_null(strstr(rad_error_message(), "tensor 'blk.0.attn_q.weight'"));
        free(b.p);
    }
}

/* A tensor with 5 dimensions is refused (GGUF has at most 4). */
static void test_n_dims_5(void **state)
{
    (void)state;
    Tensor t[] = {{"w", 0, 5, {1, 1, 1, 1}}};
    Buf b = build(3, NULL, t, 1, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_FORMAT, "tensor 'w': 5 dimensions");
    free(b.p);
}

/* ne[0] not a whole number of blocks, dimensions past 2^63 and element-count overflow are refused. */
static void test_bad_shapes(void **state)
{
    (void)state;
    Tensor t[] = {{"q", 8, 2, {33, 2}}};
    Buf b = build(3, NULL, t, 1, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_FORMAT, "ne[0] = 33 is not a multiple of q8_0's block of 32");
    free(b.p);
    Tensor n[] = {{"n", 0, 1, {1ull << 63}}};
    b = build(3, NULL, n, 1, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_FORMAT, "past 2^63 - 1");
    free(b.p);
    Tensor o[] = {{"o", 0, 3, {1ull << 31, 1ull << 31, 4}}};
    b = build(3, NULL, o, 1, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_FORMAT, "overflows 64 bits");
    free(b.p);
    Tensor e[] = {{"", 0, 1, {4}}};
    b = build(3, NULL, e, 1, 32, NULL, NULL);
    expect_buf_refused(&b, RAD_E_FORMAT, "empty name");
    free(b.p);
}

/* A bool of 2, as a value or as an array element, is refused. */
static void test_bool_2(void **state)
{
    (void)state;
    Kvs kv = {0};
    kv_bool(&kv, "tokenizer.ggml.add_bos_token", 2);
    Buf b = small_file(&kv);
    expect_buf_refused(&b, RAD_E_FORMAT, "key 'tokenizer.ggml.add_bos_token': bool value 2");
    free(b.p);
    free_kvs(&kv);
    Kvs k2 = {0};
    kv_arr(&k2, "flags", T_BOOL, 3);
    put(&k2.b, "\x01\x00\x02", 3);
    b = small_file(&k2);
    expect_buf_refused(&b, RAD_E_FORMAT, "bool element 2 is 2");
    free(b.p);
    free_kvs(&k2);
}

/* general.alignment must be a u32 power of two: 3, 0 and a u64 are refused. */
static void test_bad_alignment(void **state)
{
    (void)state;
    Kvs kv = {0};
    kv_u32(&kv, "general.alignment", 3);
    Buf b = small_file(&kv);
    expect_buf_refused(&b, RAD_E_FORMAT, "general.alignment 3 is not a power of two");
    free(b.p);
    free_kvs(&kv);
    Kvs k0 = {0};
    kv_u32(&k0, "general.alignment", 0);
    b = small_file(&k0);
    expect_buf_refused(&b, RAD_E_FORMAT, "general.alignment 0");
    free(b.p);
    free_kvs(&k0);
    Kvs k64 = {0};
    kv_uint(&k64, "general.alignment", T_U64, 32, 8);
    b = small_file(&k64);
    expect_buf_refused(&b, RAD_E_FORMAT, "is a u64; it must be a u32");
    free(b.p);
    free_kvs(&k64);
}

/* Value types past 12, array element types past 12, arrays nested past the limit, and keys with NUL are
 * refused. */
static void test_bad_values(void **state)
{
    (void)state;
    Kvs kv = {0};
    kv_head(&kv, "x", 13);
    put_u32(&kv.b, 0);
    Buf b = small_file(&kv);
    expect_buf_refused(&b, RAD_E_FORMAT, "key 'x': value type 13");
    free(b.p);
    free_kvs(&kv);

    Kvs k2 = {0};
    kv_arr(&k2, "x", 77, 1);
    b = small_file(&k2);
    expect_buf_refused(&b, RAD_E_FORMAT, "array element type 77");
    free(b.p);
    free_kvs(&k2);

    Kvs k3 = {0};
    kv_arr(&k3, "deep", T_ARR, 1);
    for (int i = 0; i < 20; i++) put_u32(&k3.b, T_ARR), put_u64(&k3.b, 1);
    put_u32(&k3.b, T_U8), put_u64(&k3.b, 0);
    b = small_file(&k3);
    expect_buf_refused(&b, RAD_E_FORMAT, "nested more than");
    free(b.p);
    free_kvs(&k3);

    Kvs k4 = {0};
    put_u64(&k4.b, 3);
    put(&k4.b, "a\0b", 3);
    put_u32(&k4.b, T_U8);
    put(&k4.b, "\x01", 1);
    k4.n = 1;
    b = small_file(&k4);
    expect_buf_refused(&b, RAD_E_FORMAT, "NUL byte");
    free(b.p);
    free_kvs(&k4);
}

/* Files that are not files: a missing path, a folder, and a NULL argument. */
static void test_not_files(void **state)
{
    (void)state;
    expect_refused(tpath("missing.gguf"), RAD_E_NOTFOUND, "not found");
    expect_refused(tmpdir, RAD_E_IO, "not a regular file");
    RadGguf *g = (RadGguf *)1;
    assert_int_equal(rad_gguf_open(NULL, &g), RAD_E_ARG);
    assert_null(g);
    assert_int_equal(rad_gguf_open("x", NULL), RAD_E_ARG);
}

/* ----------------------------------------------------------- tokenizer */

/* Open `kv` (with no tensors) as a GGUF and import its tokenizer. */
static int import_kv(const Kvs *kv, RadGguf **g, RadTokenizer **t)
{
    Buf b = build(3, kv, NULL, 0, 32, NULL, NULL);
    const char *path = tpath("tok.gguf");
    write_buf(path, &b, b.n);
    free(b.p);
    assert_int_equal(rad_gguf_open(path, g), 0);
    *t = (RadTokenizer *)1;
    rad_error_clear();
    int rc = rad_tokenizer_from_gguf(*g, t);
    if (rc) {
        assert_null(*t);
        assert_null(strchr(rad_error_message(), '\n'));
        if (getenv("RAD_TEST_VERBOSE")) printf("    %s\n", rad_error_message());
    }
    return rc;
}

static const char *const bpe_tokens[] = {"<|endoftext|>", "a",         "b",      "ab",
                                         "\xc4\xa0",      "\304\240a", "<tool>", "c"};
static const int32_t bpe_types[] = {3, 1, 1, 1, 1, 1, 4, 1};
static const char *const bpe_merges[] = {"a b", "\xc4\xa0 a"};

/* A byte-level GGUF vocabulary with `pre`, merges and types, plus `extra` keys. */
static void bpe_kvs(Kvs *kv, const char *pre)
{
    kv_str(kv, "tokenizer.ggml.model", "gpt2");
    if (pre) kv_str(kv, "tokenizer.ggml.pre", pre);
    kv_strs(kv, "tokenizer.ggml.tokens", bpe_tokens, 8);
    kv_i32s(kv, "tokenizer.ggml.token_type", bpe_types, 8);
    kv_strs(kv, "tokenizer.ggml.merges", bpe_merges, 2);
}

/* gpt2 + llama-bpe: Split(llama3 regex) then ByteLevel, merges as stored, control/user-defined tokens added,
 * llama3 defaults. */
static void test_tok_bpe(void **state)
{
    (void)state;
    Kvs kv = {0};
    bpe_kvs(&kv, "llama-bpe");
    kv_u32(&kv, "tokenizer.ggml.bos_token_id", 0);
    kv_u32(&kv, "tokenizer.ggml.eos_token_id", 0);
    kv_str(&kv, "tokenizer.chat_template", "{{ messages }}");
    RadGguf *g;
    RadTokenizer *t;
    assert_int_equal(import_kv(&kv, &g, &t), 0);
    assert_int_equal(t->model, RAD_TOK_BPE_BYTELEVEL);
    assert_int_equal(t->n_vocab, 8);
    assert_string_equal(t->token[5], "\304\240a");
    assert_int_equal(t->n_merges, 2);
    assert_string_equal(t->merge_left[1], "\xc4\xa0");
    assert_string_equal(t->merge_right[1], "a");
    assert_int_equal(t->n_norm, 0);
    assert_int_equal(t->n_pre, 2);
    assert_int_equal(t->pre[0].kind, RAD_TOK_PRE_SPLIT_REGEX);
    assert_int_equal(t->pre[0].behavior, RAD_SPLIT_ISOLATED);
    assert_non_null(strstr(t->pre[0].pattern, "\\p{N}{1,3}"));
    assert_int_equal(t->pre[1].kind, RAD_TOK_PRE_BYTELEVEL);
    assert_int_equal(t->pre[1].use_regex, 0);
    assert_int_equal(t->pre[1].add_prefix_space, 0);
    assert_int_equal(t->decoder, RAD_TOK_DECODE_BYTELEVEL);
    assert_int_equal(t->ignore_merges, 1);
    assert_int_equal(t->add_bos, 1); /* llama.cpp's default for llama3 vocabularies */
    assert_int_equal(t->add_eos, 0);
    assert_int_equal(t->bos_id, 0);
    assert_int_equal(t->unk_id, -1);
    assert_int_equal(t->n_added, 2);
    assert_int_equal(t->added[0].id, 0);
    assert_int_equal(t->added[0].special, 1);
    assert_int_equal(t->added[1].id, 6);
    assert_int_equal(t->added[1].special, 0);
    assert_int_equal(t->added[1].normalized, 0);
    assert_string_equal(t->chat_template, "{{ messages }}");
    assert_null(t->score);
    rad_tokenizer_free(t);
    rad_gguf_close(g);
    free_kvs(&kv);
}

/* Unknown, missing and mistyped pre-tokenizer names and tokenizer models are refused by name. */
static void test_tok_refusals(void **state)
{
    (void)state;
    RadGguf *g;
    RadTokenizer *t;
    Kvs kv = {0};
    bpe_kvs(&kv, "my-new-pre");
    assert_int_equal(import_kv(&kv, &g, &t), RAD_E_UNSUPPORTED);
    assert_non_null(strstr(rad_error_message(), "tokenizer.ggml.pre 'my-new-pre' is not a pre-tokenizer"));
    rad_gguf_close(g);
    free_kvs(&kv);

    Kvs k2 = {0};
    bpe_kvs(&k2, NULL);
    assert_int_equal(import_kv(&k2, &g, &t), RAD_E_UNSUPPORTED);
    assert_non_null(strstr(rad_error_message(), "tokenizer.ggml.pre is missing"));
    rad_gguf_close(g);
    free_kvs(&k2);

    Kvs k3 = {0};
    kv_str(&k3, "tokenizer.ggml.model", "bert");
    assert_int_equal(import_kv(&k3, &g, &t), RAD_E_UNSUPPORTED);
    assert_non_null(strstr(rad_error_message(), "'bert' is not supported"));
    rad_gguf_close(g);
    free_kvs(&k3);

    Kvs k4 = {0};
    kv_str(&k4, "general.architecture", "llama");
    assert_int_equal(import_kv(&k4, &g, &t), RAD_E_NOTFOUND);
    rad_gguf_close(g);
    free_kvs(&k4);

    /* a merge without a separating space */
    Kvs k5 = {0};
    kv_str(&k5, "tokenizer.ggml.model", "gpt2");
    kv_str(&k5, "tokenizer.ggml.pre", "gpt-2");
    kv_strs(&k5, "tokenizer.ggml.tokens", bpe_tokens, 8);
    const char *bad_merges[] = {"a b", "ab"};
    kv_strs(&k5, "tokenizer.ggml.merges", bad_merges, 2);
    assert_int_equal(import_kv(&k5, &g, &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "entry 1 ('ab') is not two tokens"));
    rad_gguf_close(g);
    free_kvs(&k5);

    /* a token twice */
    Kvs k6 = {0};
    kv_str(&k6, "tokenizer.ggml.model", "gpt2");
    kv_str(&k6, "tokenizer.ggml.pre", "gpt-2");
    const char *dup[] = {"a", "b", "a"};
    kv_strs(&k6, "tokenizer.ggml.tokens", dup, 3);
    kv_strs(&k6, "tokenizer.ggml.merges", bpe_merges, 1);
    assert_int_equal(import_kv(&k6, &g, &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "token 'a' has ids 0 and 2"));
    rad_gguf_close(g);
    free_kvs(&k6);

    /* bos id outside the vocabulary; token_type of the wrong length; add_bos without bos */
    Kvs k7 = {0};
    bpe_kvs(&k7, "gpt-2");
    kv_u32(&k7, "tokenizer.ggml.bos_token_id", 8);
    assert_int_equal(import_kv(&k7, &g, &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "bos_token_id is 8, outside the vocabulary of 8"));
    rad_gguf_close(g);
    free_kvs(&k7);

    Kvs k8 = {0};
    kv_str(&k8, "tokenizer.ggml.model", "gpt2");
    kv_str(&k8, "tokenizer.ggml.pre", "gpt-2");
    kv_strs(&k8, "tokenizer.ggml.tokens", bpe_tokens, 8);
    kv_i32s(&k8, "tokenizer.ggml.token_type", bpe_types, 7);
    kv_strs(&k8, "tokenizer.ggml.merges", bpe_merges, 2);
    assert_int_equal(import_kv(&k8, &g, &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "token_type has 7 entries"));
    rad_gguf_close(g);
    free_kvs(&k8);

    Kvs k9 = {0};
    bpe_kvs(&k9, "gpt-2");
    kv_bool(&k9, "tokenizer.ggml.add_bos_token", 1);
    assert_int_equal(import_kv(&k9, &g, &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "add_bos_token is true but there is no bos_token_id"));
    rad_gguf_close(g);
    free_kvs(&k9);

    Kvs k10 = {0};
    bpe_kvs(&k10, "gpt-2");
    kv_str(&k10, "tokenizer.ggml.eos_token_id", "2");
    assert_int_equal(import_kv(&k10, &g, &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "eos_token_id' is a string"));
    rad_gguf_close(g);
    free_kvs(&k10);
}

/* Every pre-tokenizer name radiance documents is accepted, and each of its regexes compiles in PCRE2 (UTF,
 * UCP). */
static void test_tok_pre_names_compile(void **state)
{
    (void)state;
    static const char *const names[] = {
        "default",     "gpt-2",  "llama3",         "llama-bpe",        "qwen2",  "smollm", "deepseek-llm",
        "deepseek-v3", "gpt-4o", "deepseek-coder", "deepseek-r1-qwen", "qwen35", "tekken", "falcon",
        "starcoder",   "dbrx",   "llama4",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        Kvs kv = {0};
        bpe_kvs(&kv, names[i]);
        kv_u32(&kv, "tokenizer.ggml.bos_token_id", 0); /* llama3-style vocabularies add a BOS */
        RadGguf *g;
        RadTokenizer *t;
        if (import_kv(&kv, &g, &t)) print_error("%s: %s\n", names[i], rad_error_message());
        assert_non_null(t);
        assert_true(t->n_pre >= 2);
        assert_int_equal(t->pre[t->n_pre - 1].kind, RAD_TOK_PRE_BYTELEVEL);
        for (int s = 0; s + 1 < t->n_pre; s++) {
            int err;
            PCRE2_SIZE off;
            pcre2_code *re = pcre2_compile((PCRE2_SPTR)t->pre[s].pattern, PCRE2_ZERO_TERMINATED,
                                           PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
            if (!re)
                print_error("%s: regex %d does not compile at %zu: %s\n", names[i], s, (size_t)off,
                            t->pre[s].pattern);
            assert_non_null(re);
            pcre2_code_free(re);
        }
        rad_tokenizer_free(t);
        rad_gguf_close(g);
        free_kvs(&kv);
    }
}

/* qwen2 adds NFC as its tokenizer.json does; smollm splits digits before GPT-2's regex; deepseek-v3 is three
 * Splits. */
static void test_tok_pre_shapes(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int n_norm, n_pre;
        const char *first;
    } cases[] = {
        {"qwen2", 1, 2, "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?"},
        {"smollm", 0, 3, "\\p{N}"},
        {"deepseek-v3", 0, 4, "\\p{N}{1,3}"},
        {"deepseek-llm", 0, 7, "[\\r\\n]"},
        {"default", 0, 5, "[\\p{P}\\$\\+<=>\\^~\\|]+"},
        {"gpt-2", 0, 2, "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Kvs kv = {0};
        bpe_kvs(&kv, cases[i].name);
        RadGguf *g;
        RadTokenizer *t;
        assert_int_equal(import_kv(&kv, &g, &t), 0);
        assert_int_equal(t->n_norm, cases[i].n_norm);
        if (cases[i].n_norm) assert_int_equal(t->norm[0].kind, RAD_TOK_NORM_NFC);
        assert_int_equal(t->n_pre, cases[i].n_pre);
        assert_memory_equal(t->pre[0].pattern, cases[i].first, strlen(cases[i].first));
        assert_int_equal(t->ignore_merges, 0);
        assert_int_equal(t->add_bos, 0);
        rad_tokenizer_free(t);
        rad_gguf_close(g);
        free_kvs(&kv);
    }
}

/* llama (SentencePiece): merges derived from scores in HF's order, Prepend+Replace normalizer, byte fallback,
 * llama.cpp defaults. */
static void test_tok_spm(void **state)
{
    (void)state;
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "<0x41>",        "\xe2\x96\x81",
                                       "a",     "b",   "ab",   "\342\226\201a", "\342\226\201ab",
                                       "ba",    "<u>", "  "};
    static const int32_t types[] = {2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 4, 4};
    static const float scores[] = {0, 0, 0, 0, -1, -2, -3, -4, -5, -6, -4, 0, 0};
    Kvs kv = {0};
    kv_str(&kv, "tokenizer.ggml.model", "llama");
    kv_strs(&kv, "tokenizer.ggml.tokens", toks, 13);
    kv_i32s(&kv, "tokenizer.ggml.token_type", types, 13);
    kv_f32s(&kv, "tokenizer.ggml.scores", scores, 13);
    RadGguf *g;
    RadTokenizer *t;
    assert_int_equal(import_kv(&kv, &g, &t), 0);
    assert_int_equal(t->model, RAD_TOK_BPE_SPM);
    assert_int_equal(t->n_vocab, 13);
    assert_non_null(t->score);
    assert_true(t->score[9] == -6.0f);
    /* Best score first; equal scores (ab, ba: -4) by token id; among the
    ** splits of one token (▁ab), the longer left part first. */
    static const char *const want[][2] = {
        {"a", "b"}, {"b", "a"}, {"\xe2\x96\x81", "a"}, {"\342\226\201a", "b"}, {"\xe2\x96\x81", "ab"},
    };
    assert_int_equal(t->n_merges, 5);
    for (int i = 0; i < 5; i++) {
        assert_string_equal(t->merge_left[i], want[i][0]);
        assert_string_equal(t->merge_right[i], want[i][1]);
    }
    assert_int_equal(t->n_norm, 2); /* add_space_prefix defaults to true */
    assert_int_equal(t->norm[0].kind, RAD_TOK_NORM_PREPEND);
    assert_string_equal(t->norm[0].arg, "\xe2\x96\x81");
    assert_int_equal(t->norm[1].kind, RAD_TOK_NORM_REPLACE);
    assert_string_equal(t->norm[1].pattern, " ");
    assert_string_equal(t->norm[1].arg, "\xe2\x96\x81");
    assert_int_equal(t->n_pre, 0);
    assert_int_equal(t->decoder, RAD_TOK_DECODE_SPM);
    assert_int_equal(t->decode_strip_leading, 1);
    assert_int_equal(t->byte_fallback, 1);
    assert_int_equal(t->fuse_unk, 1);
    assert_int_equal(t->unk_id, 0); /* llama.cpp's SentencePiece defaults */
    assert_int_equal(t->bos_id, 1);
    assert_int_equal(t->eos_id, 2);
    assert_int_equal(t->add_bos, 1);
    /* unknown and control tokens are special; user-defined ones, including a run of spaces, are not */
    assert_int_equal(t->n_added, 5);
    assert_int_equal(t->added[0].id, 0);
    assert_int_equal(t->added[0].special, 1);
    assert_int_equal(t->added[3].id, 11);
    assert_int_equal(t->added[3].special, 0);
    assert_string_equal(t->added[4].content, "  ");
    rad_tokenizer_free(t);
    rad_gguf_close(g);
    free_kvs(&kv);

    /* add_space_prefix false: Replace only, nothing stripped; explicit ids win. */
    Kvs k2 = {0};
    kv_str(&k2, "tokenizer.ggml.model", "llama");
    kv_strs(&k2, "tokenizer.ggml.tokens", toks, 13);
    kv_f32s(&k2, "tokenizer.ggml.scores", scores, 13);
    kv_bool(&k2, "tokenizer.ggml.add_space_prefix", 0);
    kv_u32(&k2, "tokenizer.ggml.bos_token_id", 2);
    kv_u32(&k2, "tokenizer.ggml.padding_token_id", 0xffffffffu); /* "none" */
    kv_bool(&k2, "tokenizer.ggml.add_bos_token", 0);
    assert_int_equal(import_kv(&k2, &g, &t), 0);
    assert_int_equal(t->n_norm, 1);
    assert_int_equal(t->norm[0].kind, RAD_TOK_NORM_REPLACE);
    assert_int_equal(t->decode_strip_leading, 0);
    assert_int_equal(t->byte_fallback, 0); /* no token_type, so no byte tokens known */
    assert_int_equal(t->bos_id, 2);
    assert_int_equal(t->pad_id, -1);
    assert_int_equal(t->add_bos, 0);
    assert_int_equal(t->n_added, 0);
    rad_tokenizer_free(t);
    rad_gguf_close(g);
    free_kvs(&k2);

    /* NaN scores are refused */
    Kvs k3 = {0};
    float nan_scores[13];
    memcpy(nan_scores, scores, sizeof scores);
    nan_scores[7] = NAN;
    kv_str(&k3, "tokenizer.ggml.model", "llama");
    kv_strs(&k3, "tokenizer.ggml.tokens", toks, 13);
    kv_f32s(&k3, "tokenizer.ggml.scores", nan_scores, 13);
    assert_int_equal(import_kv(&k3, &g, &t), RAD_E_FORMAT);
    assert_non_null(strstr(rad_error_message(), "token 7 has score NaN"));
    rad_gguf_close(g);
    free_kvs(&k3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_v3_all_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_all_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alignment_64, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_tensors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_getters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_pair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_magic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_versions_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tensor_past_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_lengths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_named_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_tensor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_tensor_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_n_dims_5, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bool_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_alignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tok_bpe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tok_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tok_pre_names_compile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tok_pre_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tok_spm, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
