/*
** test_text_limits.c: hostile tokenizer data is refused with one line, and
** the pre-tokenizer's regex matching is bounded (issue 12, items 1 and 6).
**
** UTF-8 (item 1): a tokenizer blob whose split regex holds one ill-formed
** byte used to crash rad_text_create (PCRE2 compiled it without checking);
** now load refuses it naming the file, "tokenizer.bin" and the field, and
** so it does for every other string used as text: normalizer patterns and
** arguments, a Split string, an added token, the chat template, in the blob,
** through rad_text_create and in a GGUF's tokenizer.  Raw bytes
** in vocabulary entries stay accepted: they are only compared and decoded.
**
** Bounds (item 6): a pattern that backtracks exponentially is refused by
** RAD_LIMIT_REGEX_MATCH; a pattern that is slow at every position (the
** quadratic kind, under the match limit at each one) is stopped by the
** per-encode CPU budget in about its time, not after minutes; a match too
** deep for the JIT stack falls back to the interpreter and succeeds; one
** too deep for the interpreter meets RAD_LIMIT_REGEX_DEPTH, or, with many
** captures, RAD_LIMIT_REGEX_HEAP_KIB; a
** pattern past RAD_LIMIT_REGEX_PATTERN_BYTES is refused at create.  Every
** refusal is one line naming the limit and the tokenizer's file.
**
** Size (item 9): a chat template past RAD_LIMIT_CHAT_TEMPLATE_BYTES is
** refused wherever a tokenizer is loaded, not only at GGUF import and
** convert: from a .rad's tokenizer.bin blob (before it is copied), from a
** tokenizer_config.json beside a tokenizer.json, and by rad_text_create
** whatever produced the data.
**
** The tokenizer is the llama fixture's (tests/golden/fixtures/llama:
** Split regex + ByteLevel, 1024 tokens), edited in memory.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rad_container.h"
#include "rad_limits.h"
#include "text/rad_text.h"
#include "tokenizer.h"

/* ------------------------------------------------------------ helpers */

static char *fixture_json;
static size_t fixture_len;

static int setup(void **state)
{
    (void)state;
    const char *src = getenv("RADIANCE_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/fixtures/llama/tokenizer.json", src ? src : ".");
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (run through make test)\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    fixture_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    fixture_json = malloc(fixture_len + 1);
    size_t got = fread(fixture_json, 1, fixture_len, f);
    fclose(f);
    if (got != fixture_len) return -1;
    fixture_json[fixture_len] = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(fixture_json);
    return 0;
}

/* The fixture's tokenizer data, freshly imported. */
static RadTokenizer *fixture(void)
{
    RadTokenizer *t = NULL;
    assert_int_equal(rad_tokenizer_from_json(fixture_json, fixture_len, NULL, 0, "llama/tokenizer.json", &t), 0);
    assert_non_null(t);
    return t;
}

/* The fixture's tokenizer.json with its Split regex replaced by `regex`. */
static char *json_with_regex(const char *regex)
{
    json_error_t err;
    json_t *root = json_loadb(fixture_json, fixture_len, 0, &err);
    assert_non_null(root);
    json_t *split = json_array_get(json_object_get(json_object_get(root, "pre_tokenizer"), "pretokenizers"), 0);
    assert_string_equal(json_string_value(json_object_get(split, "type")), "Split");
    json_object_set_new(json_object_get(split, "pattern"), "Regex", json_string(regex));
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    assert_non_null(s);
    return s;
}

/* A runtime for the fixture with its Split regex replaced. */
static RadText *text_with_regex(const char *regex)
{
    char *json = json_with_regex(regex);
    RadTokenizer *d = NULL;
    assert_int_equal(rad_tokenizer_from_json(json, strlen(json), NULL, 0, "hostile/tokenizer.json", &d), 0);
    free(json);
    RadText *t = NULL;
    int rc = rad_text_create(d, &t);
    if (rc) fprintf(stderr, "create: %s\n", rad_error_message());
    assert_int_equal(rc, 0);
    return t;
}

/* The message is one line and holds every one of the NULL-ended needles. */
static void expect_message(const char *first, ...)
{
    const char *msg = rad_error_message();
    if (strchr(msg, '\n')) fail_msg("message is not one line: %s", msg);
    va_list ap;
    va_start(ap, first);
    for (const char *needle = first; needle; needle = va_arg(ap, const char *))
        if (!strstr(msg, needle)) fail_msg("message lacks '%s': %s", needle, msg);
    va_end(ap);
}

/* Serialize t (freeing it), set byte `at` of the first `find` in the blob
** to `byte`, and load it back as "bad.rad". */
static int load_damaged(RadTokenizer *t, const char *find, size_t at, unsigned char byte, RadTokenizer **out)
{
    void *blob = NULL;
    size_t len = 0;
    assert_int_equal(rad_tokenizer_serialize(t, &blob, &len), 0);
    rad_tokenizer_free(t);
    unsigned char *hit = memmem(blob, len, find, strlen(find));
    assert_non_null(hit);
    hit[at] = byte;
    rad_error_clear();
    int rc = rad_tokenizer_load(blob, len, "bad.rad", out);
    free(blob);
    return rc;
}

/* ------------------------------------------------------------ UTF-8 */

/* The reported crash: one byte of the split regex.  Before the fix load
** accepted it and rad_text_create segfaulted in pcre2_compile. */
static void test_blob_regex_byte_refused(void **state)
{
    (void)state;
    RadTokenizer *t = fixture();
    char pattern[64];
    snprintf(pattern, sizeof pattern, "%.20s", t->pre[0].pattern);
    RadTokenizer *back = NULL;
    int rc = load_damaged(t, pattern, 5, 0xFF, &back);
    if (rc == 0) {
        /* What main did next: build the runtime (and crash there). */
        RadText *text = NULL;
        rc = rad_text_create(back, &text);
        rad_text_free(text);
        fail_msg("load accepted an ill-formed regex (create returned %d)", rc);
    }
    assert_int_equal(rc, RAD_E_FORMAT);
    assert_null(back);
    expect_message("bad.rad", "tokenizer.bin", "pre_tokenizer step 0", "pattern", "not valid UTF-8", "0xff",
                   NULL);
}

/* The same for every other string the pipeline uses as text. */
static void test_blob_every_text_field_refused(void **state)
{
    (void)state;
    static const struct {
        const char *field; /* in the message */
        int which;
    } cases[] = {
        {"normalizer step 0: its pattern", 0}, {"normalizer step 0: its replacement", 1},
        {"normalizer step 1: its prepend text", 2}, {"pre_tokenizer step 0: its pattern", 3},
        {"added token 0", 4}, {"the chat template", 5},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        RadTokenizer *t = fixture();
        const char *marker = "MARKER-TEXT";
        char *bad = strdup(marker);
        switch (cases[k].which) {
        case 0:
        case 1:
        case 2:
            t->norm = calloc(2, sizeof *t->norm);
            t->n_norm = 2;
            t->norm[0].kind = RAD_TOK_NORM_REPLACE;
            t->norm[0].pattern = cases[k].which == 0 ? bad : strdup(" ");
            t->norm[0].arg = cases[k].which == 1 ? bad : strdup("_");
            t->norm[1].kind = RAD_TOK_NORM_PREPEND;
            t->norm[1].arg = cases[k].which == 2 ? bad : strdup("_");
            break;
        case 3:
            free(t->pre[0].pattern);
            t->pre[0].kind = RAD_TOK_PRE_SPLIT_STRING;
            t->pre[0].pattern = bad;
            break;
        case 4:
            assert_true(t->n_added > 0);
            free(t->added[0].content);
            t->added[0].content = bad;
            break;
        case 5:
            free(t->chat_template);
            t->chat_template = bad;
            break;
        }
        /* A lone continuation byte: ill-formed anywhere. */
        RadTokenizer *back = NULL;
        int rc = load_damaged(t, marker, 3, 0x80, &back);
        if (rc != RAD_E_FORMAT) fail_msg("%s: load returned %d (%s)", cases[k].field, rc, rad_error_message());
        expect_message("bad.rad: tokenizer.bin", cases[k].field, "not valid UTF-8", NULL);
    }
}

/* rad_text_create applies the same rule to data from any producer. */
static void test_create_refuses_bad_pattern(void **state)
{
    (void)state;
    RadTokenizer *t = fixture();
    t->pre[0].pattern[2] = (char)0xC3; /* a lead byte followed by ASCII */
    RadText *text = NULL;
    rad_error_clear();
    assert_int_equal(rad_text_create(t, &text), RAD_E_FORMAT);
    assert_null(text);
    expect_message("llama/tokenizer.json", "pre_tokenizer step 0: its pattern", "not valid UTF-8", NULL);
}

/* tokenizer.json: jansson reads UTF-8 only, so a raw byte is refused as a
** JSON error naming the file. */
static void test_json_raw_byte_refused(void **state)
{
    (void)state;
    char *json = json_with_regex("ab");
    char *at = strstr(json, "\"Regex\":\"ab\"");
    assert_non_null(at);
    at[10] = (char)0xFF;
    RadTokenizer *t = NULL;
    rad_error_clear();
    assert_int_equal(rad_tokenizer_from_json(json, strlen(json), NULL, 0, "hostile/tokenizer.json", &t),
                     RAD_E_FORMAT);
    assert_null(t);
    expect_message("hostile/tokenizer.json", NULL);
    free(json);
}

/* GGUF: an added token (a control or user-defined token) or the chat
** template with an ill-formed byte is refused naming the file and field.
** The file is the fuzz seed tok_gpt2.gguf with one byte changed. */
static void test_gguf_text_fields_refused(void **state)
{
    (void)state;
    static const struct {
        const char *find, *field;
    } cases[] = {{"<tool>", "added token 1 (id 6): its content"}, {"{{ x }}", "the chat template"}};
    const char *src = getenv("RADIANCE_SRC");
    char path[4096], out[64];
    snprintf(path, sizeof path, "%s/tests/fuzz/seeds/gguf/tok_gpt2.gguf", src ? src : ".");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        unsigned char copy[4096];
        memcpy(copy, buf, n);
        unsigned char *hit = memmem(copy, n, cases[k].find, strlen(cases[k].find));
        assert_non_null(hit);
        hit[2] = 0xFE;
        snprintf(out, sizeof out, "/tmp/radiance-test-%d-%zu.gguf", (int)getpid(), k);
        FILE *o = fopen(out, "wb");
        assert_non_null(o);
        assert_int_equal(fwrite(copy, 1, n, o), n);
        fclose(o);
        RadText *t = NULL;
        rad_error_clear();
        int rc = rad_text_open_path(out, &t);
        unlink(out);
        if (rc != RAD_E_FORMAT) fail_msg("%s: open returned %d (%s)", cases[k].find, rc, rad_error_message());
        expect_message(out, cases[k].field, "not valid UTF-8", "0xfe", NULL);
    }
}

/* 1 when s[0..n) is valid UTF-8. */
static int valid_utf8(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        if (!len || i + len > n) return 0;
        for (size_t k = 1; k < len; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return 0;
        i += len;
    }
    return 1;
}

/* A vocabulary entry of raw bytes is not refused: byte-level vocabularies
** may hold them, and they are only compared and decoded. */
static void test_vocab_raw_bytes_accepted(void **state)
{
    (void)state;
    RadTokenizer *t = fixture();
    /* The last token that is not an added one. */
    int id = t->n_vocab - 1;
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; i < t->n_added; i++)
            if (t->added[i].id == id) again = 1;
        if (again) id--;
    }
    char find[256];
    size_t tl = strlen(t->token[id]);
    assert_true(tl > 0 && tl + 2 < sizeof find);
    find[0] = 0;
    memcpy(find + 1, t->token[id], tl + 1);
    void *blob = NULL;
    size_t len = 0;
    assert_int_equal(rad_tokenizer_serialize(t, &blob, &len), 0);
    rad_tokenizer_free(t);
    unsigned char *hit = memmem(blob, len, find, tl + 2);
    assert_non_null(hit);
    hit[1] = 0xFF;
    RadTokenizer *back = NULL;
    int rc = rad_tokenizer_load(blob, len, "bytes.rad", &back);
    free(blob);
    if (rc) fail_msg("a raw byte in the vocabulary was refused: %s", rad_error_message());
    RadText *text = NULL;
    assert_int_equal(rad_text_create(back, &text), 0);
    int32_t *ids = NULL;
    int n = 0;
    assert_int_equal(rad_text_encode(text, "hello world", 11, 0, &ids, &n), 0);
    assert_true(n > 0);
    free(ids);
    int32_t one = id;
    char *out = NULL;
    size_t out_len = 0;
    assert_int_equal(rad_text_decode(text, &one, 1, 0, &out, &out_len), 0);
    assert_true(valid_utf8(out, out_len)); /* the raw byte decodes as U+FFFD */
    free(out);
    rad_text_free(text);
}

/* ------------------------------------------------------------ bounds */

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A text of n bytes repeating `unit`. */
static char *repeat(const char *unit, size_t n)
{
    size_t u = strlen(unit);
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = unit[i % u];
    s[n] = 0;
    return s;
}

/* Exponential backtracking at one position: RAD_LIMIT_REGEX_MATCH, at once.
** Before, PCRE2's own default stopped it too, but the message named neither
** the limit nor the file. */
static void test_backtracking_meets_match_limit(void **state)
{
    (void)state;
    RadText *t = text_with_regex("(?:a|a)*c|[^a]+");
    char *s = repeat("a", 40);
    int32_t *ids = NULL;
    int n = 0;
    double t0 = cpu_s();
    rad_error_clear();
    int rc = rad_text_encode(t, s, 40, 0, &ids, &n);
    double took = cpu_s() - t0;
    assert_int_equal(rc, RAD_E_UNSUPPORTED);
    assert_null(ids);
    expect_message("hostile/tokenizer.json", "pre_tokenizer regex of step 0", "RAD_LIMIT_REGEX_MATCH", NULL);
    if (took > 5) fail_msg("the match limit took %.1f s", took);
    free(s);
    rad_text_free(t);
}

/* The half-hour kind: under the match limit at every position, but every
** position scans the rest of the text, so n positions cost n^2.  200 KB
** took over ten seconds before (and 1 MB over five minutes); now the budget
** (1 s + 5 us a byte: 2 s here) stops it in about that. */
static void test_slow_pattern_meets_encode_budget(void **state)
{
    (void)state;
    RadText *t = text_with_regex("a(?=[ab]*(?:y|z))|[^ab]+");
    size_t len = 200000;
    char *s = repeat("ab", len);
    int32_t *ids = NULL;
    int n = 0;
    alarm(60); /* before the fix this ran to completion; never let it run away */
    double t0 = cpu_s();
    rad_error_clear();
    int rc = rad_text_encode(t, s, len, 0, &ids, &n);
    double took = cpu_s() - t0;
    alarm(0);
    if (rc == 0) fail_msg("the slow pattern was not stopped (%.1f s of CPU)", took);
    assert_int_equal(rc, RAD_E_UNSUPPORTED);
    expect_message("hostile/tokenizer.json", "RAD_LIMIT_ENCODE_BASE_MS", "RAD_LIMIT_ENCODE_NS_PER_BYTE",
                   "200000 bytes", NULL);
    double budget = RAD_LIMIT_ENCODE_BASE_MS / 1e3 + (double)len * RAD_LIMIT_ENCODE_NS_PER_BYTE / 1e9;
    if (took < budget) fail_msg("stopped after %.2f s, before its budget of %.2f s", took, budget);
    if (took > budget + 3) fail_msg("stopped after %.2f s, long past its budget of %.2f s", took, budget);
    free(s);
    rad_text_free(t);
}

/* A match deeper than the JIT stack: the interpreter takes over and the
** encode succeeds.  Before, the fallback ran the JIT code again (no
** PCRE2_NO_JIT) and the encode failed with "JIT stack limit reached". */
static void test_jit_stack_falls_back(void **state)
{
    (void)state;
    RadText *t = text_with_regex("(?:(a)|b)+|[^ab]+");
    size_t len = 50000;
    char *s = repeat("ab", len);
    int32_t *ids = NULL;
    int n = 0;
    rad_error_clear();
    int rc = rad_text_encode(t, s, len, 0, &ids, &n);
    if (rc) fail_msg("encode failed: %s", rad_error_message());
    char *out = NULL;
    size_t out_len = 0;
    assert_int_equal(rad_text_decode(t, ids, n, 0, &out, &out_len), 0);
    assert_int_equal(out_len, len);
    assert_memory_equal(out, s, len);
    free(out);
    free(ids);
    free(s);
    rad_text_free(t);
}

/* Encode `len` bytes of "abab..." with `regex` as the Split step: the
** refusal's code, with its message checked for `limit`. */
static void expect_deep_match_refused(const char *regex, size_t len, const char *limit)
{
    RadText *t = text_with_regex(regex);
    char *s = repeat("ab", len);
    int32_t *ids = NULL;
    int n = 0;
    rad_error_clear();
    int rc = rad_text_encode(t, s, len, 0, &ids, &n);
    if (rc == 0) fail_msg("%zu bytes of 'ab' under '%s' were encoded, not refused", len, regex);
    assert_int_equal(rc, RAD_E_UNSUPPORTED);
    assert_null(ids);
    expect_message("hostile/tokenizer.json", "pre_tokenizer regex of step 0", limit, NULL);
    free(s);
    rad_text_free(t);
}

/* One match nested a million backtracking points deep (a repeated group over
** 1.2 MB: one point per character), too deep for the JIT stack, so it runs in
** the interpreter: RAD_LIMIT_REGEX_DEPTH stops it, by name.  Before, the depth
** limit was PCRE2's default of ten million, which the heap limit always came
** before (a point is a heap frame of about 200 bytes, so 256 MiB is met near
** 1.3 million): the depth limit could never be met, and this text was
** encoded after a million nested points and some 200 MB of frames. */
static void test_deep_match_meets_depth_limit(void **state)
{
    (void)state;
    expect_deep_match_refused("(?:a|b)+|[^ab]+", 1200000, "RAD_LIMIT_REGEX_DEPTH");
}

/* The same depth with forty captures: each frame holds their offsets (about
** 850 bytes), so RAD_LIMIT_REGEX_HEAP_KIB comes first and stops it by name;
** without the heap limit (PCRE2's default is 20 GB) the depth limit would. */
static void test_capture_heavy_match_meets_heap_limit(void **state)
{
    (void)state;
    char regex[256] = "(?:(a)|b)+|";
    for (int i = 0; i < 40; i++) strcat(regex, "(c)");
    strcat(regex, "[^ab]+");
    expect_deep_match_refused(regex, 1200000, "RAD_LIMIT_REGEX_HEAP_KIB");
}

/* A pattern longer than RAD_LIMIT_REGEX_PATTERN_BYTES is refused by name. */
static void test_pattern_length_limit(void **state)
{
    (void)state;
    char *pat = repeat("a", RAD_LIMIT_REGEX_PATTERN_BYTES + 1);
    char *json = json_with_regex(pat);
    RadTokenizer *d = NULL;
    assert_int_equal(rad_tokenizer_from_json(json, strlen(json), NULL, 0, "long/tokenizer.json", &d), 0);
    RadText *t = NULL;
    rad_error_clear();
    assert_int_equal(rad_text_create(d, &t), RAD_E_UNSUPPORTED);
    expect_message("long/tokenizer.json", "pre_tokenizer step 0", "RAD_LIMIT_REGEX_PATTERN_BYTES", NULL);
    free(json);
    free(pat);
}

/* Real patterns on long runs of what they backtrack over stay far inside
** the limits (a limit must never refuse an ordinary text). */
static void test_real_patterns_inside_limits(void **state)
{
    (void)state;
    RadTokenizer *d = fixture();
    RadText *t = NULL;
    assert_int_equal(rad_text_create(d, &t), 0);
    static const char *const units[] = {" ", "\n", " \n", "\r\n", "a", "1", "!", "\xe4\xb8\xad", " a"};
    size_t len = 1 << 20;
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++) {
        char *s = repeat(units[k], len - len % strlen(units[k]));
        int32_t *ids = NULL;
        int n = 0;
        int rc = rad_text_encode(t, s, strlen(s), 0, &ids, &n);
        if (rc) fail_msg("1 MiB of '%s': %s", units[k], rad_error_message());
        free(ids);
        free(s);
    }
    rad_text_free(t);
}

/* ------------------------------------------------------------ size */

/* The fixture's tokenizer with a chat template of `len` bytes, as a blob. */
static void *blob_with_template(size_t len, size_t *blob_len)
{
    RadTokenizer *t = fixture();
    free(t->chat_template);
    t->chat_template = repeat("x", len);
    void *blob = NULL;
    assert_int_equal(rad_tokenizer_serialize(t, &blob, blob_len), 0);
    rad_tokenizer_free(t);
    return blob;
}

/* A .rad's tokenizer.bin whose chat template is one byte past the limit is
** refused at load, naming the file, the blob and the limit; one at the
** limit loads.  (Before, only GGUF import and convert checked the size: a
** .rad written by anything else handed a template of any size on.) */
static void test_blob_chat_template_limit(void **state)
{
    (void)state;
    size_t len = 0;
    void *blob = blob_with_template(RAD_LIMIT_CHAT_TEMPLATE_BYTES, &len);
    RadTokenizer *back = NULL;
    assert_int_equal(rad_tokenizer_load(blob, len, "big.rad", &back), 0);
    assert_int_equal(strlen(back->chat_template), RAD_LIMIT_CHAT_TEMPLATE_BYTES);
    rad_tokenizer_free(back);
    free(blob);

    blob = blob_with_template(RAD_LIMIT_CHAT_TEMPLATE_BYTES + 1, &len);
    back = NULL;
    rad_error_clear();
    assert_int_equal(rad_tokenizer_load(blob, len, "big.rad", &back), RAD_E_FORMAT);
    assert_null(back);
    expect_message("big.rad: tokenizer.bin", "chat template", "1048577 bytes", "RAD_LIMIT_CHAT_TEMPLATE_BYTES", NULL);
    free(blob);
}

/* The same through a whole .rad file, the way run, chat and tokenize open
** a model's tokenizer (rad_text_open_path -> rad_text_from_container). */
static void test_rad_file_chat_template_limit(void **state)
{
    (void)state;
    char dir[] = "/tmp/rad-text-limits-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/big.rad", dir);
    size_t len = 0;
    void *blob = blob_with_template(RAD_LIMIT_CHAT_TEMPLATE_BYTES + 1, &len);
    RadContainerWriter *w = NULL;
    assert_int_equal(rad_container_create(path, &w), 0);
    assert_int_equal(rad_container_add_blob(w, "tokenizer.bin", blob, len), 0);
    assert_int_equal(rad_container_finish(w), 0);
    free(blob);
    RadText *t = NULL;
    rad_error_clear();
    int rc = rad_text_open_path(path, &t);
    if (rc != RAD_E_FORMAT) fail_msg("open returned %d (%s)", rc, rad_error_message());
    assert_null(t);
    expect_message(path, "tokenizer.bin", "chat template", "RAD_LIMIT_CHAT_TEMPLATE_BYTES", NULL);
    unlink(path);
    rmdir(dir);
}

/* tokenizer_config.json's chat_template, read beside a tokenizer.json (a
** bare tokenizer, or a .rad written before tokenizer.bin existed), is
** refused before it is copied; and rad_text_create refuses a template past
** the limit from any producer. */
static void test_json_and_create_chat_template_limit(void **state)
{
    (void)state;
    char *tpl = repeat("x", RAD_LIMIT_CHAT_TEMPLATE_BYTES + 1);
    json_t *config = json_pack("{s:s}", "chat_template", tpl);
    char *cj = json_dumps(config, JSON_COMPACT);
    json_decref(config);
    RadTokenizer *d = NULL;
    rad_error_clear();
    assert_int_equal(rad_tokenizer_from_json(fixture_json, fixture_len, cj, strlen(cj), "big/tokenizer.json", &d),
                     RAD_E_FORMAT);
    assert_null(d);
    expect_message("tokenizer_config.json", "big/tokenizer.json", "chat_template", "RAD_LIMIT_CHAT_TEMPLATE_BYTES",
                   NULL);
    free(cj);

    d = fixture();
    free(d->chat_template);
    d->chat_template = tpl;
    free(d->source);
    d->source = strdup("made/by/hand");
    RadText *t = NULL;
    rad_error_clear();
    assert_int_equal(rad_text_create(d, &t), RAD_E_FORMAT);
    assert_null(t);
    expect_message("made/by/hand", "chat template", "RAD_LIMIT_CHAT_TEMPLATE_BYTES", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blob_regex_byte_refused),
        cmocka_unit_test(test_blob_every_text_field_refused),
        cmocka_unit_test(test_create_refuses_bad_pattern),
        cmocka_unit_test(test_json_raw_byte_refused),
        cmocka_unit_test(test_gguf_text_fields_refused),
        cmocka_unit_test(test_vocab_raw_bytes_accepted),
        cmocka_unit_test(test_backtracking_meets_match_limit),
        cmocka_unit_test(test_slow_pattern_meets_encode_budget),
        cmocka_unit_test(test_jit_stack_falls_back),
        cmocka_unit_test(test_deep_match_meets_depth_limit),
        cmocka_unit_test(test_capture_heavy_match_meets_heap_limit),
        cmocka_unit_test(test_pattern_length_limit),
        cmocka_unit_test(test_real_patterns_inside_limits),
        cmocka_unit_test(test_blob_chat_template_limit),
        cmocka_unit_test(test_rad_file_chat_template_limit),
        cmocka_unit_test(test_json_and_create_chat_template_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
