/*
** test_conformance.c: our ids against HF tokenizers' on the real vocabularies.
**
** For each vocabulary in ../shared/tokenizers (llama2, llama3, qwen3, gemma3,
** gptoss, deepseek_v3) this imports tokenizer.json and tokenizer_config.json,
** and for every case of tests/text/corpus.jsonl compares our ids with the ones
** tests/text/expected/<vocab>.jsonl recorded from HF (make_expected.py):
**
**   ids          encode, special tokens parsed, nothing added
**   ids_special  the same plus what the post-processor adds
**   ids_plain    special-token strings as plain text, nothing added
**
** and, where HF's decode gives the text back ("roundtrip": true), that ours
** does too, whole and streamed token by token.  Every comparison runs twice:
** on the tokenizer as imported, and on it after rad_tokenizer_serialize and
** rad_tokenizer_load, so the store is held to the same ids.
**
** The vocabularies are found through $RADIANCE_SHARED, else
** $RADIANCE_SRC/../shared.  Without them the test fails when CI=true and
** otherwise says SKIP loudly and skips.
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

#include "text/rad_text.h"

static const char *const vocabs[] = {"llama2", "llama3", "qwen3", "gemma3", "gptoss", "deepseek_v3"};
static const char *const modes[] = {"ids", "ids_special", "ids_plain"};
static const int mode_flags[] = {RAD_ENCODE_PARSE_SPECIAL, RAD_ENCODE_PARSE_SPECIAL | RAD_ENCODE_ADD_SPECIAL,
                                 0};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The whole file, NUL-terminated; NULL when it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = (size_t)n;
    }
    return buf;
}

/* Where the repository and the shared vocabularies are. */
static const char *src_dir(void)
{
    const char *s = getenv("RADIANCE_SRC");
    return s && *s ? s : ".";
}

static void shared_dir(char *out, size_t cap)
{
    const char *s = getenv("RADIANCE_SHARED");
    if (s && *s)
        snprintf(out, cap, "%s", s);
    else
        snprintf(out, cap, "%s/../shared", src_dir());
}

/* Skip with a message nobody can miss, or fail under CI. */
static void missing(const char *what)
{
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0)
        fail_msg("tokenizer conformance: %s (CI=true: this must not be skipped)", what);
    fprintf(stdout,
            "\n*** SKIP: tokenizer conformance: %s; set RADIANCE_SHARED to the folder holding tokenizers/ "
            "***\n\n",
            what);
    fflush(stdout);
    skip();
}

/* The ids of a JSON array. */
static int32_t *json_ids(const json_t *a, int *n)
{
    *n = (int)json_array_size(a);
    int32_t *v = malloc(((size_t)*n + 1) * sizeof *v);
    for (int i = 0; i < *n; i++) v[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

static void print_window(const char *who, const int32_t *v, int n, int at)
{
    fprintf(stdout, "      %-4s [%d..]:", who, at > 5 ? at - 5 : 0);
    for (int i = at > 5 ? at - 5 : 0; i < n && i < at + 6; i++)
        fprintf(stdout, i == at ? " >%d<" : " %d", v[i]);
    fprintf(stdout, "%s (%d ids)\n", at + 6 < n ? " ..." : "", n);
}

/* Compare one encoding; print where it first differs. */
static int check_ids(const char *vocab, const char *which, const char *name, const char *mode,
                     const int32_t *ours, int n_ours, const int32_t *want, int n_want)
{
    int i = 0;
    while (i < n_ours && i < n_want && ours[i] == want[i]) i++;
    if (i == n_ours && i == n_want) return 1;
    fprintf(stdout, "  MISMATCH %s (%s) case '%s' mode %s: first difference at index %d\n", vocab, which,
            name, mode, i);
    print_window("ours", ours, n_ours, i);
    print_window("hf", want, n_want, i);
    return 0;
}

/* Decode ids whole and streamed; both must give `text` back. */
static int check_roundtrip(const RadText *t, const char *vocab, const char *which, const char *name,
                           const int32_t *ids, int n, const char *text, size_t len)
{
    char *out = NULL;
    size_t out_len = 0;
    int ok = rad_text_decode(t, ids, n, 0, &out, &out_len) == RAD_OK && out_len == len &&
             memcmp(out, text, len) == 0;
    if (!ok)
        fprintf(stdout, "  MISMATCH %s (%s) case '%s': decode does not give the text back\n", vocab, which,
                name);
    free(out);

    size_t cap = rad_detok_max_bytes(t), got = 0, w;
    char *buf = malloc(cap);
    RadDetok d;
    int sok = 1;
    rad_detok_init(&d, t, 0);
    for (int i = 0; i <= n && sok; i++) {
        int rc = i < n ? rad_detok_push(&d, ids[i], buf, cap, &w) : rad_detok_flush(&d, buf, cap, &w);
        sok = rc == RAD_OK && got + w <= len && memcmp(text + got, buf, w) == 0;
        got += w;
    }
    sok = sok && got == len;
    if (!sok)
        fprintf(stdout, "  MISMATCH %s (%s) case '%s': streamed decode does not give the text back\n", vocab,
                which, name);
    free(buf);
    return ok && sok;
}

/* One vocabulary: every case, every mode, imported and stored. */
static void run_vocab(const char *vocab)
{
    char shared[4096], path[4608];
    size_t len, cfg_len = 0, corpus_len, exp_len;
    shared_dir(shared, sizeof shared);
    snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer.json", shared, vocab);
    char *json = slurp(path, &len);
    if (!json) {
        char what[5000];
        snprintf(what, sizeof what, "%s is missing", path);
        missing(what);
        return;
    }
    snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer_config.json", shared, vocab);
    char *cfg = slurp(path, &cfg_len);
    snprintf(path, sizeof path, "%s/tests/text/corpus.jsonl", src_dir());
    char *corpus = slurp(path, &corpus_len);
    if (!corpus) fail_msg("cannot read %s", path);
    snprintf(path, sizeof path, "%s/tests/text/expected/%s.jsonl", src_dir(), vocab);
    char *expected = slurp(path, &exp_len);
    if (!expected) fail_msg("cannot read %s", path);

    /* Import, then store and load a second copy. */
    RadTokenizer *data, *stored;
    RadText *imported, *loaded;
    void *blob;
    size_t blob_len;
    double t0 = now_ms();
    if (rad_tokenizer_from_json(json, len, cfg, cfg_len, "tokenizer.json", &data))
        fail_msg("%s: import refused: %s", vocab, rad_error_message());
    double t1 = now_ms();
    if (rad_tokenizer_serialize(data, &blob, &blob_len))
        fail_msg("%s: serialize: %s", vocab, rad_error_message());
    double t2 = now_ms();
    if (rad_tokenizer_load(blob, blob_len, "tokenizer.bin", &stored))
        fail_msg("%s: load: %s", vocab, rad_error_message());
    double t3 = now_ms();
    if (rad_text_create(stored, &loaded)) fail_msg("%s: create (stored): %s", vocab, rad_error_message());
    double t4 = now_ms();
    if (rad_text_create(data, &imported)) fail_msg("%s: create: %s", vocab, rad_error_message());

    /* Walk the corpus and the expectations line by line, in step. */
    char *cl = corpus, *el = expected;
    int cases = 0, passed = 0;
    while (*cl) {
        char *cn = strchr(cl, '\n'), *en = strchr(el, '\n');
        if (cn) *cn = 0;
        if (en) *en = 0;
        if (*cl == 0) {
            cl = cn ? cn + 1 : cl + strlen(cl);
            continue;
        }
        json_error_t err;
        json_t *c = json_loads(cl, 0, &err), *e = json_loads(el, 0, &err);
        if (!c || !e)
            fail_msg("%s: corpus or expected line %d does not parse: %s", vocab, cases + 1, err.text);
        const char *name = json_string_value(json_object_get(c, "case"));
        const json_t *tx = json_object_get(c, "text");
        if (!name || !json_is_string(tx) || !json_string_value(json_object_get(e, "case")) ||
            strcmp(name, json_string_value(json_object_get(e, "case"))) != 0)
            fail_msg("%s: expected/%s.jsonl line %d is not corpus case '%s' (regenerate it)", vocab, vocab,
                     cases + 1, name ? name : "?");
        const char *text = json_string_value(tx);
        size_t text_len = json_string_length(tx);
        int ok = 1;
        int32_t *ids_for_rt = NULL;
        int n_rt = 0;
        for (int m = 0; m < 3; m++) {
            int n_want;
            int32_t *want = json_ids(json_object_get(e, modes[m]), &n_want);
            for (int which = 0; which < 2; which++) {
                const RadText *t = which ? loaded : imported;
                int32_t *ids = NULL;
                int n = 0;
                if (rad_text_encode(t, text, text_len, mode_flags[m], &ids, &n))
                    fail_msg("%s: encode '%s': %s", vocab, name, rad_error_message());
                ok &= check_ids(vocab, which ? "stored" : "imported", name, modes[m], ids, n, want, n_want);
                free(ids);
            }
            if (m == 0) {
                ids_for_rt = want;
                n_rt = n_want;
            } else {
                free(want);
            }
        }
        if (json_is_true(json_object_get(e, "roundtrip"))) {
            ok &= check_roundtrip(imported, vocab, "imported", name, ids_for_rt, n_rt, text, text_len);
            ok &= check_roundtrip(loaded, vocab, "stored", name, ids_for_rt, n_rt, text, text_len);
        }
        free(ids_for_rt);
        json_decref(c);
        json_decref(e);
        cases++;
        passed += ok;
        cl = cn ? cn + 1 : cl + strlen(cl);
        el = en ? en + 1 : el + strlen(el);
    }
    fprintf(stdout,
            "  %-12s %d/%d cases pass (3 modes, imported and stored, round trips); "
            "import %.0f ms, serialize %.1f ms, load %.1f ms, create %.1f ms\n",
            vocab, passed, cases, t1 - t0, t2 - t1, t3 - t2, t4 - t3);
    fflush(stdout);
    rad_text_free(imported);
    rad_text_free(loaded);
    free(blob);
    free(json);
    free(cfg);
    free(corpus);
    free(expected);
    if (cases == 0) fail_msg("%s: the corpus is empty", vocab);
    if (passed != cases)
        fail_msg("%s: %d of %d cases differ from HF tokenizers", vocab, cases - passed, cases);
}

static void test_vocab(void **state)
{
    run_vocab((const char *)*state);
}

int main(void)
{
    struct CMUnitTest tests[sizeof vocabs / sizeof vocabs[0]];
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        struct CMUnitTest t = {vocabs[i], test_vocab, NULL, NULL, (void *)vocabs[i]};
        tests[i] = t;
    }
    return cmocka_run_group_tests_name("tokenizer conformance", tests, NULL, NULL);
}
