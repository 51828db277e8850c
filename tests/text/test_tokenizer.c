/*
** test_tokenizer.c: unit tests for the tokenizer, on tiny tokenizer.json
** files built here, so each rule is pinned on its own: merge order, the
** byte-level alphabet, SentencePiece byte fallback and unknowns, added-token
** options, special tokens parsed or plain, invalid UTF-8, NUL, empty input,
** decode and streaming, the binary store against hostile blobs, and the
** import's refusals.  The expected ids were checked against HF tokenizers
** on the same JSON (tests/text/README.md says how the real vocabularies are
** checked).
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/rad_text.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---------------------------------------------------------------- builders */

/* A growing string. */
typedef struct Str {
    char *p;
    size_t n, cap;
} Str;

static void put(Str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Str *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (s->n + (size_t)k + 1 > s->cap) {
        s->cap = (s->n + (size_t)k + 1) * 2;
        s->p = realloc(s->p, s->cap);
        assert_non_null(s->p);
    }
    va_start(ap, fmt);
    vsnprintf(s->p + s->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    s->n += (size_t)k;
}

/* Append s as a JSON string literal. */
static void put_json_string(Str *out, const char *s)
{
    put(out, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            put(out, "\\%c", c);
        else if (c < 0x20)
            put(out, "\\u%04x", c);
        else
            put(out, "%c", c);
    }
    put(out, "\"");
}

/* GPT-2's byte alphabet: the UTF-8 of the character standing for byte b. */
static void byte_char(int b, char out[4])
{
    int n = 256, cp = -1;
    for (int x = 0; x < 256; x++) {
        int printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
        int c = printable ? x : n++;
        if (x == b) cp = c;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* A byte-level BPE tokenizer.json: ids 0..255 are the byte characters (id =
** byte value), then `extra` tokens from 256 in order; `merges` are "a b"
** strings; `pre` is the pre_tokenizer JSON (NULL: a plain ByteLevel);
** `added` the added_tokens list body (may be ""). */
static char *bytelevel_json(const char *const *extra, int n_extra, const char *const *merges, int n_merges,
                            const char *pre, const char *added, int ignore_merges)
{
    Str s = {0};
    put(&s, "{\"version\":\"1.0\",\"added_tokens\":[%s],\"normalizer\":null,\"pre_tokenizer\":%s,",
        added ? added : "",
        pre ? pre
            : "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":"
              "false}");
    put(&s, "\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,"
            "\"use_regex\":false},\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_"
            "offsets\":false,\"use_regex\":false},");
    put(&s, "\"model\":{\"type\":\"BPE\",\"ignore_merges\":%s,\"vocab\":{", ignore_merges ? "true" : "false");
    for (int b = 0; b < 256; b++) {
        char c[4];
        byte_char(b, c);
        put_json_string(&s, c);
        put(&s, ":%d,", b);
    }
    for (int i = 0; i < n_extra; i++) {
        put_json_string(&s, extra[i]);
        put(&s, ":%d%s", 256 + i, i + 1 < n_extra ? "," : "");
    }
    if (n_extra == 0) s.n--; /* drop the trailing comma */
    put(&s, "},\"merges\":[");
    for (int i = 0; i < n_merges; i++) {
        put_json_string(&s, merges[i]);
        if (i + 1 < n_merges) put(&s, ",");
    }
    put(&s, "]}}");
    return s.p;
}

/* A SentencePiece-style tokenizer.json like Llama 2's: <unk> <s> </s> are
** ids 0..2, <0x00>..<0xFF> ids 3..258, then "▁" 259, "a" 260, "b" 261,
** "▁a" 262, "c" 263; merge "▁ a". */
static char *spm_json(int byte_fallback, int fuse_unk, int with_unk, int strip)
{
    Str s = {0};
    put(&s, "{\"added_tokens\":["
            "{\"id\":0,\"content\":\"<unk>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
            "\"normalized\":false,\"special\":true},"
            "{\"id\":1,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
            "\"normalized\":false,\"special\":true},"
            "{\"id\":2,\"content\":\"</"
            "s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":"
            "true}],");
    put(&s, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":"
            "\"\xe2\x96\x81\"},"
            "{\"type\":\"Replace\",\"pattern\":{\"String\":\" "
            "\"},\"content\":\"\xe2\x96\x81\"}]},\"pre_tokenizer\":null,");
    put(&s, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>"
            "\",\"type_id\":0}},"
            "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<"
            "s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},");
    put(&s,
        "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
        "\"\xe2\x96\x81\"},\"content\":\" \"},"
        "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}%s]},",
        strip ? ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}" : "");
    put(&s,
        "\"model\":{\"type\":\"BPE\",\"unk_token\":%s,\"fuse_unk\":%s,\"byte_fallback\":%s,\"vocab\":{\"<unk>"
        "\":0,\"<s>\":1,\"</s>\":2,",
        with_unk ? "\"<unk>\"" : "null", fuse_unk ? "true" : "false", byte_fallback ? "true" : "false");
    for (int b = 0; b < 256; b++) put(&s, "\"<0x%02X>\":%d,", b, 3 + b);
    put(&s, "\"\xe2\x96\x81\":259,\"a\":260,\"b\":261,\"\xe2\x96\x81"
            "a\":262,\"c\":263},\"merges\":[\"\xe2\x96\x81 a\"]}}");
    return s.p;
}

/* An added_tokens entry. */
static void put_added(Str *s, int id, const char *content, int special, int lstrip, int rstrip,
                      int single_word, int normalized)
{
    if (s->n) put(s, ",");
    put(s, "{\"id\":%d,\"content\":", id);
    put_json_string(s, content);
    put(s, ",\"single_word\":%s,\"lstrip\":%s,\"rstrip\":%s,\"normalized\":%s,\"special\":%s}",
        single_word ? "true" : "false", lstrip ? "true" : "false", rstrip ? "true" : "false",
        normalized ? "true" : "false", special ? "true" : "false");
}

/* Import and build; the test fails with the message if either refuses. */
static RadText *make(const char *json, const char *config)
{
    RadTokenizer *d = NULL;
    RadText *t = NULL;
    int rc = rad_tokenizer_from_json(json, strlen(json), config, config ? strlen(config) : 0,
                                     "tokenizer.json", &d);
    if (rc) fail_msg("import refused: %s", rad_error_message());
    rc = rad_text_create(d, &t);
    if (rc) fail_msg("create refused: %s", rad_error_message());
    return t;
}

/* Encode len bytes from an exact-size heap copy, so any read past the end is
** an AddressSanitizer error; compare with want[0..n). */
static void expect_ids(const RadText *t, const char *text, size_t len, int flags, const int32_t *want, int n)
{
    char *copy = malloc(len ? len : 1);
    memcpy(copy, text, len);
    int32_t *ids = NULL;
    int got = -1;
    assert_int_equal(rad_text_encode(t, copy, len, flags, &ids, &got), RAD_OK);
    if (got != n || (n > 0 && memcmp(ids, want, (size_t)n * sizeof *ids) != 0)) {
        fprintf(stderr, "got %d ids:", got);
        for (int i = 0; i < got; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\nwant %d ids:", n);
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
        fail_msg("ids differ for a %zu-byte text", len);
    }
    free(ids);
    free(copy);
}

#define EXPECT(t, text, flags, ...)                                                                          \
    do {                                                                                                     \
        const int32_t want_[] = {__VA_ARGS__};                                                               \
        expect_ids((t), (text), sizeof(text) - 1, (flags), want_, COUNT(want_));                             \
    } while (0)

/* Decode and compare with want (which may hold NULs). */
static void expect_text(const RadText *t, const int32_t *ids, int n, int flags, const char *want,
                        size_t want_len)
{
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(rad_text_decode(t, ids, n, flags, &out, &len), RAD_OK);
    assert_int_equal(len, want_len);
    assert_memory_equal(out, want, want_len);
    assert_int_equal(out[len], 0);
    free(out);
}

static const int P = RAD_ENCODE_PARSE_SPECIAL;

/* ---------------------------------------------------------------- merges */

/* Pins: the lowest-ranked pair merges first ("b c" ranked first gives a+bc, "a b" first gives abc). */
static void test_merges_by_rank(void **state)
{
    (void)state;
    const char *extra[] = {"ab", "bc", "abc"};
    const char *bc_first[] = {"b c", "a b", "ab c"};
    const char *ab_first[] = {"a b", "b c", "ab c"};
    char *j1 = bytelevel_json(extra, 3, bc_first, 3, NULL, NULL, 0);
    char *j2 = bytelevel_json(extra, 3, ab_first, 3, NULL, NULL, 0);
    RadText *t1 = make(j1, NULL), *t2 = make(j2, NULL);
    EXPECT(t1, "abc", 0, 'a', 257);
    EXPECT(t2, "abc", 0, 258);
    rad_text_free(t1);
    rad_text_free(t2);
    free(j1);
    free(j2);
}

/* Pins: among equal ranks the leftmost pair merges first ("aaa" is aa + a). */
static void test_merges_leftmost(void **state)
{
    (void)state;
    const char *extra[] = {"aa"};
    const char *merges[] = {"a a"};
    char *j = bytelevel_json(extra, 1, merges, 1, NULL, NULL, 0);
    RadText *t = make(j, NULL);
    EXPECT(t, "aaa", 0, 256, 'a');
    EXPECT(t, "aaaa", 0, 256, 256);
    rad_text_free(t);
    free(j);
}

/* Pins: merges written as ["a", "b"] pairs read the same as "a b" strings. */
static void test_merges_as_pairs(void **state)
{
    (void)state;
    const char *extra[] = {"ab"};
    const char *merges[] = {"a b"};
    char *j = bytelevel_json(extra, 1, merges, 1, NULL, NULL, 0);
    char *at = strstr(j, "\"merges\":[\"a b\"]");
    assert_non_null(at);
    Str s = {0};
    put(&s, "%.*s\"merges\":[[\"a\",\"b\"]]}}", (int)(at - j), j);
    RadText *t = make(s.p, NULL);
    EXPECT(t, "xab", 0, 'x', 256);
    rad_text_free(t);
    free(s.p);
    free(j);
}

/* Pins: a one-million-symbol word merges in O(n log n) time and to the right ids. */
static void test_long_word(void **state)
{
    (void)state;
    const char *extra[] = {"aa", "aaaa"};
    const char *merges[] = {"a a", "aa aa"};
    char *j = bytelevel_json(extra, 2, merges, 2, NULL, NULL, 0);
    RadText *t = make(j, NULL);
    size_t n = 1 << 20;
    char *text = malloc(n);
    memset(text, 'a', n);
    int32_t *ids;
    int got;
    clock_t c0 = clock();
    assert_int_equal(rad_text_encode(t, text, n, 0, &ids, &got), RAD_OK);
    double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    assert_int_equal(got, (int)(n / 4));
    for (int i = 0; i < got; i++) assert_int_equal(ids[i], 257);
    assert_true(secs < 10.0);
    free(ids);
    free(text);
    rad_text_free(t);
    free(j);
}

/* Pins: with ignore_merges a pre-token that is a token is taken whole, whatever the merges. */
static void test_ignore_merges(void **state)
{
    (void)state;
    const char *extra[] = {"ab", "abc"};
    const char *merges[] = {"a b"};
    char *j1 = bytelevel_json(extra, 2, merges, 1, NULL, NULL, 1);
    char *j0 = bytelevel_json(extra, 2, merges, 1, NULL, NULL, 0);
    RadText *t1 = make(j1, NULL), *t0 = make(j0, NULL);
    EXPECT(t1, "abc", 0, 257);
    EXPECT(t0, "abc", 0, 256, 'c');
    rad_text_free(t1);
    rad_text_free(t0);
    free(j1);
    free(j0);
}

/* ---------------------------------------------------------------- byte level */

/* Pins: all 256 bytes round-trip through the byte-level alphabet (C0, C1, F5..FF decode to U+FFFD). */
static void test_bytelevel_all_bytes(void **state)
{
    (void)state;
    char *j = bytelevel_json(NULL, 0, NULL, 0, NULL, NULL, 0);
    RadText *t = make(j, NULL);
    int covered[256] = {0};
    for (int b = 0; b < 0x80; b++) {
        char c = (char)b;
        int32_t id = b;
        expect_ids(t, &c, 1, 0, &id, 1);
        expect_text(t, &id, 1, 0, &c, 1);
        covered[b] = 1;
    }
    /* Sequences that between them use every other byte a valid text can hold. */
    unsigned char seqs[256][4];
    int lens[256], n = 0;
    for (int c = 0x80; c <= 0xBF; c++, n++) seqs[n][0] = 0xC2, seqs[n][1] = (unsigned char)c, lens[n] = 2;
    for (int l = 0xC2; l <= 0xDF; l++, n++) seqs[n][0] = (unsigned char)l, seqs[n][1] = 0x80, lens[n] = 2;
    for (int l = 0xE0; l <= 0xEF; l++, n++)
        seqs[n][0] = (unsigned char)l, seqs[n][1] = l == 0xE0 ? 0xA0 : 0x80, seqs[n][2] = 0x80, lens[n] = 3;
    for (int l = 0xF0; l <= 0xF4; l++, n++)
        seqs[n][0] = (unsigned char)l, seqs[n][1] = l == 0xF0 ? 0x90 : 0x80, seqs[n][2] = 0x80,
        seqs[n][3] = 0x80, lens[n] = 4;
    for (int i = 0; i < n; i++) {
        int32_t ids[4];
        for (int k = 0; k < lens[i]; k++) {
            ids[k] = seqs[i][k];
            covered[seqs[i][k]] = 1;
        }
        expect_ids(t, (const char *)seqs[i], (size_t)lens[i], 0, ids, lens[i]);
        expect_text(t, ids, lens[i], 0, (const char *)seqs[i], (size_t)lens[i]);
    }
    int never[] = {0xC0, 0xC1, 0xF5, 0xF6, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF};
    for (int i = 0; i < COUNT(never); i++) {
        int32_t id = never[i];
        expect_text(t, &id, 1, 0, "\xEF\xBF\xBD", 3);
        covered[never[i]] = 1;
    }
    for (int b = 0; b < 256; b++) assert_true(covered[b]);
    rad_text_free(t);
    free(j);
}

/* ---------------------------------------------------------------- SPM */

/* Pins: SPM "▁" prefix, <0xNN> byte fallback, Strip on decode, a bad byte run as U+FFFD per byte. */
static void test_spm_byte_fallback(void **state)
{
    (void)state;
    char *j = spm_json(1, 1, 1, 1);
    RadText *t = make(j, NULL);
    /* "ab€": ▁a b <0xE2> <0x82> <0xAC> */
    EXPECT(t, "ab\xe2\x82\xac", 0, 262, 261, 3 + 0xE2, 3 + 0x82, 3 + 0xAC);
    EXPECT(t, "ab\xe2\x82\xac", RAD_ENCODE_ADD_SPECIAL, 1, 262, 261, 3 + 0xE2, 3 + 0x82, 3 + 0xAC);
    const int32_t ids[] = {262, 261, 3 + 0xE2, 3 + 0x82, 3 + 0xAC};
    expect_text(t, ids, 5, 0, "ab\xe2\x82\xac", 5);
    /* A run of byte tokens that is not valid UTF-8 is one U+FFFD per byte. */
    const int32_t bad[] = {260, 3 + 'A', 3 + 0xE2, 3 + 0x82, 261};
    expect_text(t, bad, 5, 0,
                "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                "b",
                11);
    rad_text_free(t);
    free(j);
}

/* Pins: an unknown character is <unk>, fused by fuse_unk, dropped when there is no unk token. */
static void test_unknown_token(void **state)
{
    (void)state;
    char *jf = spm_json(0, 1, 1, 1), *jn = spm_json(0, 0, 1, 1), *jx = spm_json(0, 0, 0, 1);
    RadText *fused = make(jf, NULL), *plain = make(jn, NULL), *none = make(jx, NULL);
    EXPECT(fused,
           "a\xe2\x82\xac\xe2\x82\xac"
           "b",
           0, 262, 0, 261);
    EXPECT(plain,
           "a\xe2\x82\xac\xe2\x82\xac"
           "b",
           0, 262, 0, 0, 261);
    EXPECT(none,
           "a\xe2\x82\xac\xe2\x82\xac"
           "b",
           0, 262, 261);
    rad_text_free(fused);
    rad_text_free(plain);
    rad_text_free(none);
    free(jf);
    free(jn);
    free(jx);
}

/* Pins: a text whose every byte is unknown, with no unk token and no byte
** fallback, encodes to no ids and no error (the first word of an encode gave
** no ids while the output was still empty: found by fuzz_tokenizer_json as
** pointer arithmetic on NULL, UBSan in make asan and make fuzz). */
static void test_unknown_everything(void **state)
{
    (void)state;
    const char *json = "{\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":null,"
                       "\"post_processor\":null,\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
                       "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},\"content\":\" \"},"
                       "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]},"
                       "\"model\":{\"type\":\"BPE\",\"unk_token\":null,\"byte_fallback\":false,"
                       "\"vocab\":{\"a\":0,\"b\":1},\"merges\":[]}}";
    RadText *t = make(json, NULL);
    expect_ids(t, "\xe2\x82\xac", 3, 0, NULL, 0);
    expect_ids(t, "\xe2\x82\xac\xe2\x82\xac", 6, 0, NULL, 0);
    EXPECT(t, "\xe2\x82\xac" "a", 0, 0);
    rad_text_free(t);
}

/* ---------------------------------------------------------------- added */

/* Pins: lstrip/rstrip take neighbouring white space into an added token, not into the previous one. */
static void test_added_lstrip_rstrip(void **state)
{
    (void)state;
    Str a = {0};
    put_added(&a, 256, "<L>", 1, 1, 0, 0, 0);
    put_added(&a, 257, "<R>", 1, 0, 1, 0, 0);
    put_added(&a, 258, "<B>", 1, 1, 1, 0, 0);
    char *j = bytelevel_json(NULL, 0, NULL, 0, NULL, a.p, 0);
    RadText *t = make(j, NULL);
    EXPECT(t, "x  <L>  y", P, 'x', 256, ' ', ' ', 'y');
    EXPECT(t, "x  <R>  y", P, 'x', ' ', ' ', 257, 'y');
    EXPECT(t, "x \t<B>\n y", P, 'x', 258, 'y');
    EXPECT(t, "<R> <L>", P, 257, 256);
    rad_text_free(t);
    free(j);
    free(a.p);
}

/* Pins: a single_word added token counts only where no word character touches it. */
static void test_added_single_word(void **state)
{
    (void)state;
    Str a = {0};
    put_added(&a, 256, "ab", 0, 0, 0, 1, 0);
    char *j = bytelevel_json(NULL, 0, NULL, 0, NULL, a.p, 0);
    RadText *t = make(j, NULL);
    EXPECT(t, "ab", 0, 256);
    EXPECT(t, "x ab.", 0, 'x', ' ', 256, '.');
    EXPECT(t, "xab ab", 0, 'x', 'a', 'b', ' ', 256);
    EXPECT(t, "ab\xc3\xa9", 0, 'a', 'b', 0xC3, 0xA9);
    rad_text_free(t);
    free(j);
    free(a.p);
}

/* Pins: special tokens are ids with PARSE_SPECIAL, else text; non-special added tokens match always. */
static void test_special_parsed_vs_plain(void **state)
{
    (void)state;
    Str a = {0};
    put_added(&a, 256, "<|s|>", 1, 0, 0, 0, 0);
    put_added(&a, 257, "<t>", 0, 0, 0, 0, 0);
    char *j = bytelevel_json(NULL, 0, NULL, 0, NULL, a.p, 0);
    RadText *t = make(j, NULL);
    EXPECT(t, "a<|s|><t>", P, 'a', 256, 257);
    EXPECT(t, "a<|s|><t>", 0, 'a', '<', '|', 's', '|', '>', 257);
    /* Longest match wins, and a partial token is text. */
    EXPECT(t, "<|s|<|s|>", P, '<', '|', 's', '|', 256);
    const int32_t ids[] = {'a', 256, 257};
    expect_text(t, ids, 3, 0, "a<|s|><t>", 9);
    expect_text(t, ids, 3, RAD_DECODE_SKIP_SPECIAL, "a<t>", 4);
    rad_text_free(t);
    free(j);
    free(a.p);
}

/* Pins: a normalized added token matches its normalized form ("c a" as "▁c▁a") and decodes from it. */
static void test_added_normalized(void **state)
{
    (void)state;
    char *base = spm_json(1, 1, 1, 1);
    char *at = strstr(base, "],\"normalizer\"");
    assert_non_null(at);
    Str s = {0};
    put(&s,
        "%.*s,{\"id\":264,\"content\":\"c a\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
        "\"normalized\":true,\"special\":false}%s",
        (int)(at - base), base, at);
    RadText *t = make(s.p, NULL);
    /* The token's normalized form is "▁c▁a"; "b c a" normalizes to "▁b▁c▁a". */
    EXPECT(t, "b c a", 0, 259, 261, 264);
    EXPECT(t, "bc a", 0, 259, 261, 263, 262);
    const int32_t ids[] = {261, 264};
    expect_text(t, ids, 2, 0, "b c a", 5);
    rad_text_free(t);
    free(s.p);
    free(base);
}

/* ---------------------------------------------------------------- splits */

/* Pins: the five Split behaviours cut "the-final--countdown" as HF documents. */
static void test_split_behaviors(void **state)
{
    (void)state;
    const char *extra[] = {"the", "final", "countdown", "the-", "final-", "-final", "-countdown", "--"};
    enum { DASH = '-', THE = 256, FINAL, COUNTDOWN, THE_, FINAL_, _FINAL, _COUNTDOWN, DASH2 };
    static const struct {
        const char *behavior;
        int32_t want[8];
        int n;
    } cases[] = {
        {"Removed", {THE, FINAL, COUNTDOWN}, 3},
        {"Isolated", {THE, DASH, FINAL, DASH, DASH, COUNTDOWN}, 6},
        {"MergedWithPrevious", {THE_, FINAL_, DASH, COUNTDOWN}, 4},
        {"MergedWithNext", {THE, _FINAL, DASH, _COUNTDOWN}, 4},
        {"Contiguous", {THE, DASH, FINAL, DASH2, COUNTDOWN}, 5},
    };
    for (int i = 0; i < COUNT(cases); i++) {
        char pre[512];
        snprintf(
            pre, sizeof pre,
            "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},"
            "\"behavior\":\"%s\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_"
            "offsets\":false,\"use_regex\":false}]}",
            cases[i].behavior);
        char *j = bytelevel_json(extra, COUNT(extra), NULL, 0, pre, NULL, 1);
        RadText *t = make(j, NULL);
        const char *text = "the-final--countdown";
        expect_ids(t, text, strlen(text), 0, cases[i].want, cases[i].n);
        rad_text_free(t);
        free(j);
    }
}

/* Pins: \s in a Split regex is White_Space as in Oniguruma (U+180E is not space, U+3000 is). */
static void test_split_space_class(void **state)
{
    (void)state;
    const char *pre =
        "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},"
        "\"behavior\":\"Removed\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
        "\"trim_offsets\":false,\"use_regex\":false}]}";
    char *j = bytelevel_json(NULL, 0, NULL, 0, pre, NULL, 0);
    RadText *t = make(j, NULL);
    EXPECT(t,
           "a\xe1\xa0\x8e"
           "b c\xe3\x80\x80"
           "d",
           0, 'a', 0xE1, 0xA0, 0x8E, 'b', 'c', 'd');
    rad_text_free(t);
    free(j);
}

/* ---------------------------------------------------------------- odd input */

/* Pins: invalid UTF-8 reads as one U+FFFD per maximal ill-formed run, without error or over-read. */
static void test_invalid_utf8(void **state)
{
    (void)state;
    char *j = bytelevel_json(NULL, 0, NULL, 0, NULL, NULL, 0);
    RadText *t = make(j, NULL);
#define FFFD 0xEF, 0xBF, 0xBD
    EXPECT(t, "\xff\xfe", 0, FFFD, FFFD); /* never-valid bytes */
    EXPECT(t, "a\xe2\x82", 0, 'a', FFFD); /* truncated at the end */
    EXPECT(t,
           "\xe2\x82"
           "b",
           0, FFFD, 'b');                                     /* truncated mid-text */
    EXPECT(t, "\xf0\x9f\x98", 0, FFFD);                       /* three of four bytes */
    EXPECT(t, "\xc0\xaf", 0, FFFD, FFFD);                     /* overlong '/' */
    EXPECT(t, "\xe0\x80\xaf", 0, FFFD, FFFD, FFFD);           /* overlong, three bytes */
    EXPECT(t, "\xed\xa0\x80", 0, FFFD, FFFD, FFFD);           /* a surrogate */
    EXPECT(t, "\xf4\x90\x80\x80", 0, FFFD, FFFD, FFFD, FFFD); /* past U+10FFFF */
    EXPECT(t, "\x80\xbf", 0, FFFD, FFFD);                     /* lone continuations */
#undef FFFD
    /* Every length of a cut-off 4-byte character, from heap copies. */
    const char emoji[] = "\xf0\x9f\x98\x80";
    for (size_t n = 0; n <= 4; n++) {
        int32_t *ids;
        int got;
        char *copy = malloc(n ? n : 1);
        memcpy(copy, emoji, n);
        assert_int_equal(rad_text_encode(t, copy, n, P, &ids, &got), RAD_OK);
        assert_int_equal(got, n == 0 ? 0 : n < 4 ? 3 : 4);
        free(ids);
        free(copy);
    }
    rad_text_free(t);
    free(j);
}

/* Pins: NUL is an ordinary character for encode and decode. */
static void test_nul_bytes(void **state)
{
    (void)state;
    char *j = bytelevel_json(NULL, 0, NULL, 0, NULL, NULL, 0);
    RadText *t = make(j, NULL);
    EXPECT(t, "a\0b", 0, 'a', 0, 'b');
    const int32_t ids[] = {'a', 0, 'b'};
    expect_text(t, ids, 3, 0, "a\0b", 3);
    rad_text_free(t);
    free(j);
}

/* Pins: the empty text gives no ids, or only the post-processor's BOS with ADD_SPECIAL. */
static void test_empty(void **state)
{
    (void)state;
    char *j = spm_json(1, 1, 1, 1);
    RadText *t = make(j, NULL);
    int32_t *ids = NULL;
    int n = -1;
    assert_int_equal(rad_text_encode(t, "", 0, P, &ids, &n), RAD_OK);
    assert_int_equal(n, 0);
    assert_non_null(ids);
    free(ids);
    assert_int_equal(rad_text_encode(t, NULL, 0, P | RAD_ENCODE_ADD_SPECIAL, &ids, &n), RAD_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
    free(ids);
    expect_text(t, NULL, 0, 0, "", 0);
    rad_text_free(t);
    free(j);
}

/* ---------------------------------------------------------------- decode */

/* Pins: an id outside the vocabulary is RAD_E_RANGE for decode and for streaming. */
static void test_decode_bad_id(void **state)
{
    (void)state;
    char *j = bytelevel_json(NULL, 0, NULL, 0, NULL, NULL, 0);
    RadText *t = make(j, NULL);
    char *out = NULL;
    size_t len;
    const int32_t bad[][2] = {{'a', 256}, {'a', -1}, {'a', INT32_MAX}};
    for (int i = 0; i < COUNT(bad); i++) {
        assert_int_equal(rad_text_decode(t, bad[i], 2, 0, &out, &len), RAD_E_RANGE);
        assert_null(out);
    }
    RadDetok d;
    char buf[64];
    size_t w = 99;
    rad_detok_init(&d, t, 0);
    assert_int_equal(rad_detok_push(&d, 300, buf, sizeof buf, &w), RAD_E_RANGE);
    assert_int_equal(w, 0);
    rad_text_free(t);
    free(j);
}

/* Push the ids one by one and check what each push emits. */
static void stream(const RadText *t, const int32_t *ids, const size_t *emit, int n, const char *want)
{
    RadDetok d;
    char buf[256];
    size_t w, total = 0;
    rad_detok_init(&d, t, 0);
    assert_true(rad_detok_max_bytes(t) <= sizeof buf);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rad_detok_push(&d, ids[i], buf, sizeof buf, &w), RAD_OK);
        assert_int_equal(w, emit[i]);
        assert_memory_equal(buf, want + total, w);
        total += w;
    }
    assert_int_equal(rad_detok_flush(&d, buf, sizeof buf, &w), RAD_OK);
    assert_int_equal(w, 0);
}

/* Pins: streaming emits a byte-token emoji only whole; flush gives U+FFFD; a small cap is RAD_E_ARG. */
static void test_stream_emoji(void **state)
{
    (void)state;
    char *jb = bytelevel_json(NULL, 0, NULL, 0, NULL, NULL, 0), *js = spm_json(1, 1, 1, 1);
    RadText *tb = make(jb, NULL), *ts = make(js, NULL);
    const int32_t bl[] = {'x', 0xF0, 0x9F, 0x98, 0x80, 'y'};
    const size_t bl_emit[] = {1, 0, 0, 0, 4, 1};
    stream(tb, bl, bl_emit, 6, "x\xf0\x9f\x98\x80y");
    const int32_t sp[] = {262, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80, 261};
    const size_t sp_emit[] = {1, 0, 0, 0, 4, 1}; /* "▁a" loses its leading space (Strip) */
    stream(ts, sp, sp_emit, 6,
           "a\xf0\x9f\x98\x80"
           "b");

    RadDetok d;
    char buf[64];
    size_t w;
    rad_detok_init(&d, tb, 0);
    assert_int_equal(rad_detok_push(&d, 0xF0, buf, sizeof buf, &w), RAD_OK);
    assert_int_equal(rad_detok_push(&d, 0x9F, buf, sizeof buf, &w), RAD_OK);
    assert_int_equal(w, 0);
    assert_int_equal(rad_detok_push(&d, 'z', buf, 1, &w), RAD_E_ARG); /* needs 4 bytes: FFFD + z */
    assert_int_equal(d.n_pending, 2);
    assert_int_equal(rad_detok_flush(&d, buf, sizeof buf, &w), RAD_OK);
    assert_int_equal(w, 3);
    assert_memory_equal(buf, "\xEF\xBF\xBD", 3);
    rad_text_free(tb);
    rad_text_free(ts);
    free(jb);
    free(js);
}

/* ---------------------------------------------------------------- threads */

typedef struct Job {
    const RadText *t;
    const char *text;
    size_t len;
    const int32_t *want;
    int n, ok;
} Job;

static void *encode_many(void *arg)
{
    Job *j = arg;
    j->ok = 1;
    for (int r = 0; r < 20 && j->ok; r++) {
        int32_t *ids;
        int n;
        j->ok = rad_text_encode(j->t, j->text, j->len, 0, &ids, &n) == RAD_OK && n == j->n &&
                memcmp(ids, j->want, (size_t)n * sizeof *ids) == 0;
        free(ids);
    }
    return NULL;
}

/* Pins: one RadText encodes from four threads at once, and past the word cache's bound, with the same ids. */
static void test_threads(void **state)
{
    (void)state;
    const char *extra[] = {"w1", "w12"};
    const char *merges[] = {"w 1", "w1 2"};
    const char *pre =
        "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\" "
        "?[a-z0-9]+\"},"
        "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
        "\"trim_offsets\":false,\"use_regex\":false}]}";
    char *j = bytelevel_json(extra, 2, merges, 2, pre, NULL, 0);
    RadText *t = make(j, NULL);
    /* 80,000 distinct words: more than the cache holds, so it empties and refills. */
    Str text = {0};
    for (int i = 0; i < 80000; i++) put(&text, "w%d ", i);
    int32_t *want, *again;
    int n, n2;
    assert_int_equal(rad_text_encode(t, text.p, text.n, 0, &want, &n), RAD_OK);
    assert_int_equal(rad_text_encode(t, text.p, text.n, 0, &again, &n2), RAD_OK);
    assert_int_equal(n, n2);
    assert_memory_equal(want, again, (size_t)n * sizeof *want);
    /* "w0", " w1", " w2" ... " w12": w 0, space w1, space w 2, ... space w12 */
    const int32_t head[] = {'w', '0', ' ', 256, ' ', 'w', '2'};
    assert_memory_equal(want, head, sizeof head);
    int has_w12 = 0;
    for (int i = 0; i < n; i++) has_w12 |= want[i] == 257;
    assert_true(has_w12);
    pthread_t th[4];
    Job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (Job){t, text.p, i % 2 ? text.n : text.n / 2, want, 0, 0};
        if (i % 2 == 0) {
            /* Half the text: its ids are a prefix of the whole's (cut at a space). */
            while (text.p[jobs[i].len - 1] != ' ') jobs[i].len--;
            int32_t *ids;
            assert_int_equal(rad_text_encode(t, text.p, jobs[i].len, 0, &ids, &jobs[i].n), RAD_OK);
            free(ids);
        } else {
            jobs[i].n = n;
        }
        assert_int_equal(pthread_create(&th[i], NULL, encode_many, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_true(jobs[i].ok);
    }
    free(want);
    free(again);
    free(text.p);
    rad_text_free(t);
    free(j);
}

/* ---------------------------------------------------------------- store */

static void same_steps(const RadTokStep *a, const RadTokStep *b, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(a[i].kind, b[i].kind);
        assert_int_equal(a[i].behavior, b[i].behavior);
        assert_int_equal(a[i].invert, b[i].invert);
        assert_int_equal(a[i].add_prefix_space, b[i].add_prefix_space);
        assert_int_equal(a[i].use_regex, b[i].use_regex);
        assert_true((a[i].pattern == NULL) == (b[i].pattern == NULL));
        if (a[i].pattern) assert_string_equal(a[i].pattern, b[i].pattern);
        assert_true((a[i].arg == NULL) == (b[i].arg == NULL));
        if (a[i].arg) assert_string_equal(a[i].arg, b[i].arg);
    }
}

/* Field by field equality of two tokenizers. */
static void same_tokenizer(const RadTokenizer *a, const RadTokenizer *b)
{
    assert_int_equal(a->model, b->model);
    assert_int_equal(a->n_vocab, b->n_vocab);
    for (int i = 0; i < a->n_vocab; i++) {
        assert_true((a->token[i] == NULL) == (b->token[i] == NULL));
        if (a->token[i]) assert_string_equal(a->token[i], b->token[i]);
    }
    assert_int_equal(a->n_merges, b->n_merges);
    for (int i = 0; i < a->n_merges; i++) {
        assert_string_equal(a->merge_left[i], b->merge_left[i]);
        assert_string_equal(a->merge_right[i], b->merge_right[i]);
    }
    assert_int_equal(a->n_norm, b->n_norm);
    same_steps(a->norm, b->norm, a->n_norm);
    assert_int_equal(a->n_pre, b->n_pre);
    same_steps(a->pre, b->pre, a->n_pre);
    assert_int_equal(a->n_added, b->n_added);
    for (int i = 0; i < a->n_added; i++) {
        assert_int_equal(a->added[i].id, b->added[i].id);
        assert_string_equal(a->added[i].content, b->added[i].content);
        assert_int_equal(a->added[i].special, b->added[i].special);
        assert_int_equal(a->added[i].lstrip, b->added[i].lstrip);
        assert_int_equal(a->added[i].rstrip, b->added[i].rstrip);
        assert_int_equal(a->added[i].single_word, b->added[i].single_word);
        assert_int_equal(a->added[i].normalized, b->added[i].normalized);
    }
    assert_int_equal(a->decoder, b->decoder);
    assert_int_equal(a->decode_strip_leading, b->decode_strip_leading);
    assert_int_equal(a->byte_fallback, b->byte_fallback);
    assert_int_equal(a->fuse_unk, b->fuse_unk);
    assert_int_equal(a->ignore_merges, b->ignore_merges);
    assert_int_equal(a->unk_id, b->unk_id);
    assert_int_equal(a->bos_id, b->bos_id);
    assert_int_equal(a->eos_id, b->eos_id);
    assert_int_equal(a->pad_id, b->pad_id);
    assert_int_equal(a->add_bos, b->add_bos);
    assert_int_equal(a->add_eos, b->add_eos);
    assert_true((a->chat_template == NULL) == (b->chat_template == NULL));
    if (a->chat_template) assert_string_equal(a->chat_template, b->chat_template);
}

static const char spm_config[] =
    "{\"bos_token\":\"<s>\",\"eos_token\":{\"__type\":\"AddedToken\",\"content\":\"</s>\"},"
    "\"pad_token\":null,\"add_bos_token\":true,\"model_max_length\":1e30,"
    "\"chat_template\":\"{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}\"}";

/* A small serialized SPM tokenizer, with its source data. */
static void *small_blob(size_t *len, RadTokenizer **src)
{
    char *j = spm_json(1, 1, 1, 1);
    void *blob;
    assert_int_equal(rad_tokenizer_from_json(j, strlen(j), spm_config, strlen(spm_config), "t.json", src),
                     RAD_OK);
    assert_int_equal(rad_tokenizer_serialize(*src, &blob, len), RAD_OK);
    free(j);
    return blob;
}

/* Pins: serialize then load gives the same tokenizer field by field, and the same ids. */
static void test_store_round_trip(void **state)
{
    (void)state;
    RadTokenizer *src, *back;
    size_t len;
    void *blob = small_blob(&len, &src);
    assert_int_equal(rad_tokenizer_load(blob, len, "t.rad", &back), RAD_OK);
    same_tokenizer(src, back);
    assert_int_equal(back->bos_id, 1);
    assert_int_equal(back->eos_id, 2);
    assert_int_equal(back->pad_id, -1);
    assert_int_equal(back->add_bos, 1);
    assert_string_equal(back->chat_template,
                        "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}");
    RadText *t1, *t2;
    assert_int_equal(rad_text_create(src, &t1), RAD_OK);
    assert_int_equal(rad_text_create(back, &t2), RAD_OK);
    const char *text = "a b ab\xe2\x82\xac c</s>";
    int32_t *i1, *i2;
    int n1, n2;
    assert_int_equal(rad_text_encode(t1, text, strlen(text), P | RAD_ENCODE_ADD_SPECIAL, &i1, &n1), RAD_OK);
    assert_int_equal(rad_text_encode(t2, text, strlen(text), P | RAD_ENCODE_ADD_SPECIAL, &i2, &n2), RAD_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(i1, i2, (size_t)n1 * sizeof *i1);
    free(i1);
    free(i2);
    rad_text_free(t1);
    rad_text_free(t2);
    free(blob);
}

/* Pins: a stored blob cut short at every length is refused, never read past. */
static void test_store_truncated(void **state)
{
    (void)state;
    RadTokenizer *src, *back;
    size_t len;
    void *blob = small_blob(&len, &src);
    for (size_t n = 0; n < len; n++) {
        void *cut = malloc(n ? n : 1);
        memcpy(cut, blob, n);
        back = (RadTokenizer *)1;
        assert_int_not_equal(rad_tokenizer_load(cut, n, "t.rad", &back), RAD_OK);
        assert_null(back);
        assert_true(strstr(rad_error_message(), "t.rad") != NULL);
        free(cut);
    }
    rad_tokenizer_free(src);
    free(blob);
}

/* Patch a little-endian u32 into a copy of the blob and try to load it. */
static int load_patched(const void *blob, size_t len, size_t at, uint32_t v)
{
    unsigned char *copy = malloc(len);
    memcpy(copy, blob, len);
    for (int i = 0; i < 4; i++) copy[at + (size_t)i] = (unsigned char)(v >> (8 * i));
    RadTokenizer *t = NULL;
    int rc = rad_tokenizer_load(copy, len, "t.rad", &t);
    rad_tokenizer_free(t);
    free(copy);
    return rc;
}

/* Pins: hostile blobs (counts near 2^32, offsets past the pool, bad ids/magic/version) are refused. */
static void test_store_hostile(void **state)
{
    (void)state;
    RadTokenizer *src;
    size_t len;
    unsigned char *blob = small_blob(&len, &src);
    /* The header's count fields (n_vocab, n_merges, n_added, n_norm, n_pre)
    ** and the pool size. */
    const size_t fields[] = {20, 24, 28, 32, 36, 72};
    const uint32_t values[] = {0xFFFFFFFFu, 0xFFFFFFF0u, 0x80000000u, 0x7FFFFFFFu, 0x10000000u, 0};
    for (int f = 0; f < COUNT(fields); f++)
        for (int v = 0; v < COUNT(values); v++) {
            if (fields[f] >= 28 && fields[f] <= 36 && values[v] == 0)
                continue; /* zero is a fine count there */
            assert_int_not_equal(load_patched(blob, len, fields[f], values[v]), RAD_OK);
        }
    /* First token record: offset or length past the pool. */
    assert_int_equal(load_patched(blob, len, 96, 0xFFFFFFF0u), RAD_E_FORMAT);
    assert_int_equal(load_patched(blob, len, 100, 0x7FFFFFFFu), RAD_E_FORMAT);
    /* First merge: an id past the vocabulary, or negative. */
    size_t merges = 96 + 8 * (size_t)src->n_vocab;
    assert_int_equal(load_patched(blob, len, merges, (uint32_t)src->n_vocab), RAD_E_FORMAT);
    assert_int_equal(load_patched(blob, len, merges + 8, 0xFFFFFFFFu), RAD_E_FORMAT);
    /* Special ids. */
    assert_int_equal(load_patched(blob, len, 44, 0x7FFFFFFFu), RAD_E_FORMAT);
    assert_int_equal(load_patched(blob, len, 0, 0x21212121u), RAD_E_FORMAT);
    assert_int_equal(load_patched(blob, len, 8, 2), RAD_E_UNSUPPORTED);
    /* A pool whose last byte is not NUL. */
    blob[len - 1] = 'x';
    RadTokenizer *t = NULL;
    assert_int_equal(rad_tokenizer_load(blob, len, "t.rad", &t), RAD_E_FORMAT);
    rad_tokenizer_free(src);
    free(blob);
}

/* ---------------------------------------------------------------- refusals */

static void expect_refusal(const char *json, int code, const char *words)
{
    RadTokenizer *t = (RadTokenizer *)1;
    assert_int_equal(rad_tokenizer_from_json(json, strlen(json), NULL, 0, "tokenizer.json", &t), code);
    assert_null(t);
    const char *msg = rad_error_message();
    if (!strstr(msg, words) || !strstr(msg, "tokenizer.json"))
        fail_msg("message '%s' lacks '%s'", msg, words);
    assert_null(strchr(msg, '\n'));
}

/* Pins: tokenizer.json without a "model" section (or not JSON) is refused with a one-line message. */
static void test_refuse_no_model(void **state)
{
    (void)state;
    expect_refusal("{\"added_tokens\":[],\"normalizer\":null}", RAD_E_FORMAT, "\"model\"");
    expect_refusal("{\"model\":null}", RAD_E_FORMAT, "\"model\"");
    expect_refusal("{\"model\": ", RAD_E_FORMAT, "line 1");
}

/* Pins: Unigram and WordPiece models are refused by name. */
static void test_refuse_model_types(void **state)
{
    (void)state;
    expect_refusal("{\"model\":{\"type\":\"Unigram\",\"vocab\":[[\"a\",0.0]]}}", RAD_E_UNSUPPORTED,
                   "model type 'Unigram' is not supported (BPE is)");
    expect_refusal("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}", RAD_E_UNSUPPORTED,
                   "model type 'WordPiece' is not supported (BPE is)");
}

/* Pins: a pre-tokenizer or normalizer we do not implement is refused by name; messages stay one line. */
static void test_refuse_components(void **state)
{
    (void)state;
    const char *pre = "{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\"}";
    char *j = bytelevel_json(NULL, 0, NULL, 0, pre, NULL, 0);
    expect_refusal(j, RAD_E_UNSUPPORTED, "pre_tokenizer type 'Metaspace' is not supported");
    free(j);
    j = bytelevel_json(NULL, 0, NULL, 0, NULL, NULL, 0);
    char *at = strstr(j, "\"normalizer\":null");
    assert_non_null(at);
    Str s = {0};
    put(&s, "%.*s\"normalizer\":{\"type\":\"Lowercase\"}%s", (int)(at - j), j,
        at + strlen("\"normalizer\":null"));
    expect_refusal(s.p, RAD_E_UNSUPPORTED, "normalizer type 'Lowercase' is not supported");
    free(s.p);
    free(j);
    /* A merge naming a token that is not there, shown escaped: the message stays one line. */
    const char *merges[] = {"\n\n \n"};
    j = bytelevel_json(NULL, 0, merges, 1, NULL, NULL, 0);
    expect_refusal(j, RAD_E_FORMAT, "model merges[0] names '\\n\\n', which is not in the vocab");
    free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merges_by_rank),
        cmocka_unit_test(test_merges_leftmost),
        cmocka_unit_test(test_merges_as_pairs),
        cmocka_unit_test(test_long_word),
        cmocka_unit_test(test_ignore_merges),
        cmocka_unit_test(test_unknown_everything),
        cmocka_unit_test(test_bytelevel_all_bytes),
        cmocka_unit_test(test_spm_byte_fallback),
        cmocka_unit_test(test_unknown_token),
        cmocka_unit_test(test_added_lstrip_rstrip),
        cmocka_unit_test(test_added_single_word),
        cmocka_unit_test(test_special_parsed_vs_plain),
        cmocka_unit_test(test_added_normalized),
        cmocka_unit_test(test_split_behaviors),
        cmocka_unit_test(test_split_space_class),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_nul_bytes),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_decode_bad_id),
        cmocka_unit_test(test_stream_emoji),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_store_round_trip),
        cmocka_unit_test(test_store_truncated),
        cmocka_unit_test(test_store_hostile),
        cmocka_unit_test(test_refuse_no_model),
        cmocka_unit_test(test_refuse_model_types),
        cmocka_unit_test(test_refuse_components),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
