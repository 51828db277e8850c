/*
** test_llamacpp.c: real GGUF models, ours against llama.cpp on the same file.
**
** tests/models/llamacpp/record.py ran llama.cpp (llama-cpp-python) once and
** recorded, per model: greedy continuations of five prompts (prompt ids from
** llama.cpp's own tokenizer) and, teacher-forced over text2k.txt, each
** position's 64 most likely next tokens with their log-probabilities and the
** log of the remaining mass.  Here the same files run through our engine:
**
**   - our tokenizer gives llama.cpp's prompt ids (exactly);
**   - greedy decoding against llama.cpp's first 32 tokens of every prompt;
**   - teacher-forced, the mean KL divergence of our next-token distribution
**     from llama.cpp's and the top-1 agreement (bounds: see `cases`).
**
** The KL is computed over llama.cpp's top-64 tokens plus one bucket for the
** rest of the vocabulary.  Merging outcomes can only lower a KL divergence,
** so this is a lower bound of the full one; with most of the mass in the top
** 64 (see each model's rest_mass_mean) it is close.  Positions scored:
** $RADIANCE_TF_TOKENS (default 256, `make test-models`; the full 2,000 with
** `make test-models-full`; the tiny MoE recordings hold 512).  The real
** models come from tests/models/fetch.sh; without them the test skips
** visibly, and fails under CI=true.  The tiny files (Qwen2, and the MoE
** families qwen3moe, olmoe, mixtral, gpt-oss, qwen2moe and glm4moe, made
** by llama.cpp's own converter) sit beside the recordings and always run.
*/
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "../../engine/include/radiance.h"
#include "../../engine/text/rad_text.h"

/* The bar is mean KL <= 1e-3, top-1 >= 99% and all five greedy
** runs equal.  With f32 weights we meet it but for one greedy near-tie.
** With quantized weights nobody can: llama.cpp's CPU path rounds activations
** to 8-bit blocks before each quantized dot product, so any difference
** upstream, however small (an exp, a summation order), moves some value
** across a rounding step, and llama.cpp itself differs from llama.cpp by
** KL 3.7e-3 (SmolLM2) and 5.8e-3 (Gemma) between its one-token and batched
** paths (the README's noise floor).  The cpu library quantizes activations
** exactly as llama.cpp does (byte-identical blocks, vec_dot-identical sums),
** which brings qwen2-tiny-q8_0 under 1e-3; the real models stay at
** llama.cpp's own noise level.  These bounds pin what the default kernels
** (cpu, then ref) measured (256 positions, 2026-11-30) with a margin, so a
** regression shows; run_exact below is the tight check.
**
** Greedy agreement is the noisiest of the three: a prompt whose first steps
** are near-ties follows llama.cpp or not on a last-bit difference.  Gemma's
** count went 2/5 (ggml's stored-layout arithmetic, RADIANCE_CPU_RELAYOUT=0),
** 1/5 (the cpu library's x8 layout for q4_k and q8_0: exact integer block
** sums, the same activation rounding) and 3/5 (x8 for q5_0 too), while over
** 2,000 teacher-forced positions the layouts are the same distance from
** llama.cpp (KL 5.64e-3 / 5.56e-3, top-1 95.25% / 96.0% for the first two;
** SmolLM2 2.89e-3 / 2.71e-3, 96.05% / 95.85%).  So Gemma's greedy minimum
** is 1 and its top-1 bound leaves room for another ISA's last bits. */
typedef struct Case {
    const char *name;       /* record.py's NAME: NAME.json, NAME.topk.bin */
    const char *file;       /* the GGUF: in the model cache, or beside the recordings */
    int in_cache;
    double max_kl;          /* measured mean KL x ~1.5 */
    double min_top1;
    int min_greedy;         /* prompts whose 32 greedy tokens all equal llama.cpp's */
    double max_exact_kl;    /* run_exact's bound; 0: EXACT_MAX_KL */
} Case;

/* The functions below name their case by its index here: add at the end. */
static const Case cases[] = {
    {"smollm2-135m-q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf", 1, 5.5e-3, 0.92, 2},   /* 3.7e-3, 93.7%, 2/5 */
    {"gemma3-270m-q4_k_m", "gemma-3-270m-q4_k_m.gguf", 1, 8e-3, 0.92, 1},          /* 5.4e-3, 94.1%, 3/5 */
    {"qwen2-tiny-f32", "qwen2-tiny-f32.gguf", 0, 1e-5, 0.99, 4},                   /* 1.1e-6, 100%, 4/5 */
    {"qwen2-tiny-q8_0", "qwen2-tiny-q8_0.gguf", 0, 1.2e-3, 0.94, 2},               /* 7.8e-4, 96.1%, 2/5 */
    /* The tiny mixture-of-experts files (issue 14), recorded over 512
    ** positions; measured 2026-12-02 over 255 and (RADIANCE_TF_TOKENS=512)
    ** 511 positions, the larger of the two given.  At f32 llama.cpp differs
    ** from itself (one token per decode against batches) by KL 6e-9..2e-7,
    ** and we from it by 6e-7..2.5e-6: its f16 KV cache, which we keep too,
    ** and summation order.  The quantized files meet llama.cpp's activation
    ** rounding as the dense ones do, and routing multiplies it: a token
    ** whose k-th and (k+1)-th experts are close takes the other one after a
    ** rounding step.  llama.cpp's default run differs from its own run on
    ** the dequantized weights by KL 1.2e-2 (qwen3moe, olmoe), 2.3e-2
    ** (mixtral) and 1.5e-3 (gpt-oss mxfp4), several times what we measure
    ** against it.  Greedy: f32 as measured, quantized one below it. */
    {"qwen3moe-tiny-f32", "qwen3moe-tiny-f32.gguf", 0, 3e-6, 0.99, 5, 0},          /* 7.1e-7, 100%, 5/5 */
    {"qwen3moe-tiny-q8_0", "qwen3moe-tiny-q8_0.gguf", 0, 4e-3, 0.95, 1, 1.2e-4},   /* 2.7e-3, 96.9%, 2/5 */
    {"olmoe-tiny-f32", "olmoe-tiny-f32.gguf", 0, 3e-6, 0.99, 5, 0},                /* 6.8e-7, 99.8%, 5/5 */
    {"olmoe-tiny-q8_0", "olmoe-tiny-q8_0.gguf", 0, 1.6e-3, 0.95, 1, 2.5e-4},       /* 1.1e-3, 96.9%, 2/5 */
    {"mixtral-tiny-f32", "mixtral-tiny-f32.gguf", 0, 5e-6, 0.99, 4, 0},            /* 2.5e-6, 99.6%, 4/5 */
    {"mixtral-tiny-q8_0", "mixtral-tiny-q8_0.gguf", 0, 3.5e-3, 0.95, 1, 1.2e-5},   /* 2.4e-3, 97.3%, 1/5 */
    {"gpt-oss-tiny-f32", "gpt-oss-tiny-f32.gguf", 0, 4e-6, 0.99, 5, 0},            /* 2.1e-6, 99.8%, 5/5 */
    {"gpt-oss-mxfp4-tiny-auto", "gpt-oss-mxfp4-tiny-auto.gguf", 0, 5.5e-3, 0.94, 1, 0}, /* 3.5e-3, 96.5%, 2/5 */
    {"qwen2moe-tiny-f32", "qwen2moe-tiny-f32.gguf", 0, 1e-5, 0.99, 4, 0},          /* 1.1e-6, 100%, 4/5 */
    {"glm4moe-tiny-f32", "glm4moe-tiny-f32.gguf", 0, 1.5e-6, 0.99, 5, 0},         /* 3.3e-7, 99.6%, 5/5 */
    {"glm4moe-tiny-q8_0", "glm4moe-tiny-q8_0.gguf", 0, 3e-2, 0.90, 0, 0},         /* 2.0e-2, 92.2%, 0/5 */
    {"glm4moe-air-tiny-f32", "glm4moe-air-tiny-f32.gguf", 0, 3e-6, 0.99, 5, 0},   /* 8.0e-7, 100%, 5/5 */
};

static char recordings[4096], cache[4096];

static int model_path(const Case *c, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", c->in_cache ? cache : recordings, c->file);
    if (access(out, R_OK) == 0) return 1;
    if (getenv("CI") && strcmp(getenv("CI"), "true") == 0)
        fail_msg("%s is missing: run tests/models/fetch.sh (CI must not skip the real models)", out);
    print_message("SKIP %s: %s not found (run tests/models/fetch.sh)\n", c->name, out);
    return 0;
}

static RadEngine *open_model(const char *path, int logits_all, const char *kernels)
{
    RadEngineOptions opt = {.model_path = path, .max_ctx = 2100, .max_tok = 256, .logits_all = logits_all,
                            .kernels = kernels};
    RadEngine *e = NULL;
    if (rad_engine_open(&opt, &e)) fail_msg("open %s: %s", path, rad_error_message());
    return e;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int32_t *json_ids(json_t *arr, int *n)
{
    *n = (int)json_array_size(arr);
    int32_t *ids = malloc((size_t)(*n ? *n : 1) * sizeof *ids);
    for (int i = 0; i < *n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(arr, (size_t)i));
    return ids;
}

/* Our tokenizer and greedy decoding against llama.cpp's, prompt by prompt. */
static void greedy_matches(const Case *c, json_t *rec, const char *path, int *tok_ok, int *greedy_full, int *n_out)
{
    RadEngine *e = open_model(path, 0, NULL);
    const RadText *tok = rad_engine_text(e);
    assert_non_null(tok);
    const int vocab = rad_engine_n_vocab(e);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    json_t *prompts = json_object_get(rec, "prompts");
    size_t i;
    json_t *p;
    int tokenizer_ok = 0, greedy_ok = 0, n_prompts = (int)json_array_size(prompts);
    json_array_foreach(prompts, i, p) {
        int n_prompt, n_expect;
        int32_t *prompt = json_ids(json_object_get(p, "prompt_ids"), &n_prompt);
        int32_t *expect = json_ids(json_object_get(p, "output_ids"), &n_expect);
        const char *text = json_string_value(json_object_get(p, "text"));
        int32_t *ours = NULL;
        int n_ours = 0;
        assert_int_equal(rad_text_encode(tok, text, strlen(text), RAD_ENCODE_ADD_SPECIAL | RAD_ENCODE_PARSE_SPECIAL,
                                         &ours, &n_ours), 0);
        int same = n_ours == n_prompt && memcmp(ours, prompt, (size_t)n_ours * sizeof *ours) == 0;
        tokenizer_ok += same;
        if (!same) print_message("%s/%s: our prompt ids differ from llama.cpp's\n", c->name,
                                 json_string_value(json_object_get(p, "name")));
        int seq, match = 0;
        assert_int_equal(rad_engine_seq_new(e, &seq), 0);
        if (rad_engine_eval(e, seq, prompt, n_prompt, logits)) fail_msg("%s", rad_error_message());
        for (; match < n_expect; match++) {
            int32_t next = argmax(logits, vocab);
            if (next != expect[match]) break;
            if (rad_engine_eval(e, seq, &next, 1, logits)) fail_msg("%s", rad_error_message());
        }
        rad_engine_seq_free(e, seq);
        greedy_ok += match == n_expect;
        print_message("%-20s %-12s greedy: %d/%d tokens equal llama.cpp's\n", c->name,
                      json_string_value(json_object_get(p, "name")), match, n_expect);
        free(prompt);
        free(expect);
        free(ours);
    }
    free(logits);
    rad_engine_close(e);
    *tok_ok = tokenizer_ok == n_prompts;
    *greedy_full = greedy_ok;
    *n_out = n_prompts;
}

/* Teacher forcing: KL over llama.cpp's top-64 plus the rest, and top-1. */
static void teacher_forced_agrees(const Case *c, const char *path, const char *recording, const char *kernels,
                                  double *mean_kl_out, double *top1_out)
{
    char bin[4300];
    snprintf(bin, sizeof bin, "%s/%s.%s", recordings, c->name, recording);
    FILE *f = fopen(bin, "rb");
    assert_non_null(f);
    char magic[8];
    uint32_t head[4];
    assert_int_equal(fread(magic, 1, 8, f), 8);
    assert_memory_equal(magic, "RADLCTK1", 8);
    assert_int_equal(fread(head, 4, 4, f), 4);
    const int n_text = (int)head[1], k = (int)head[2];
    int32_t *ids = malloc((size_t)n_text * sizeof *ids);
    assert_int_equal(fread(ids, 4, (size_t)n_text, f), (size_t)n_text);

    int n = n_text;
    const char *want = getenv("RADIANCE_TF_TOKENS");
    if (want && atoi(want) > 0 && atoi(want) < n) n = atoi(want);
    else if (!want && n > 256) n = 256;

    RadEngine *e = open_model(path, 1, kernels);
    const int vocab = rad_engine_n_vocab(e);
    assert_int_equal((int)head[0], vocab);
    float *logits = malloc((size_t)n * vocab * sizeof *logits);
    int seq;
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    if (rad_engine_eval(e, seq, ids, n, logits)) fail_msg("%s", rad_error_message());

    int32_t *top = malloc((size_t)k * sizeof *top);
    float *top_lp = malloc((size_t)k * sizeof *top_lp);
    double kl_sum = 0, kl_max = 0;
    int agree = 0, scored = 0;
    for (int t = 0; t < n - 1; t++) {
        float log_rest;
        assert_int_equal(fread(top, 4, (size_t)k, f), (size_t)k);
        assert_int_equal(fread(top_lp, 4, (size_t)k, f), (size_t)k);
        assert_int_equal(fread(&log_rest, 4, 1, f), 1);
        const float *row = logits + (size_t)t * vocab;
        double mx = row[0], z = 0;
        for (int v = 1; v < vocab; v++) if (row[v] > mx) mx = row[v];
        for (int v = 0; v < vocab; v++) z += exp(row[v] - mx);
        double lz = mx + log(z), ours_top = 0, kl = 0;
        for (int j = 0; j < k; j++) {
            double q = row[top[j]] - lz;            /* our log-probability */
            ours_top += exp(q);
            kl += exp(top_lp[j]) * (top_lp[j] - q);
        }
        double ours_rest = 1.0 - ours_top;
        if (ours_rest < 1e-12) ours_rest = 1e-12;
        kl += exp(log_rest) * (log_rest - log(ours_rest));
        kl_sum += kl;
        if (kl > kl_max) kl_max = kl;
        agree += argmax(row, vocab) == top[0];
        scored++;
    }
    fclose(f);
    double mean_kl = kl_sum / scored, top1 = (double)agree / scored;
    print_message("%-20s teacher-forced over %d positions vs %s (kernels %s): mean KL %.3g (max %.3g), "
                  "top-1 agreement %.2f%%\n", c->name, scored, recording, kernels ? kernels : "default", mean_kl,
                  kl_max, 100 * top1);
    free(ids); free(logits); free(top); free(top_lp);
    rad_engine_close(e);
    *mean_kl_out = mean_kl;
    *top1_out = top1;
}

static void run_case(const Case *c)
{
    char path[4300], json_path[4300];
    if (!model_path(c, path, sizeof path)) { skip(); }
    snprintf(json_path, sizeof json_path, "%s/%s.json", recordings, c->name);
    json_error_t err;
    json_t *rec = json_load_file(json_path, JSON_ALLOW_NUL, &err);   /* a random model may generate byte 0 */
    if (!rec) fail_msg("%s: %s", json_path, err.text);
    int tok_ok, greedy_ok, n_prompts;
    double mean_kl, top1;
    teacher_forced_agrees(c, path, "topk.bin", NULL, &mean_kl, &top1);
    greedy_matches(c, rec, path, &tok_ok, &greedy_ok, &n_prompts);
    json_decref(rec);
    int bar = mean_kl <= 1e-3 && top1 >= 0.99 && greedy_ok == n_prompts;
    print_message("%-20s %s the issue's bar (KL <= 1e-3, top-1 >= 99%%, %d/%d greedy): KL %.3g, top-1 %.2f%%, %d/%d\n",
                  c->name, bar ? "meets" : "does not yet meet", n_prompts, n_prompts, mean_kl, 100 * top1, greedy_ok,
                  n_prompts);
    assert_true(tok_ok);
    assert_true(mean_kl <= c->max_kl);
    assert_true(top1 >= c->min_top1);
    assert_true(greedy_ok >= c->min_greedy);
}

/* Exactness: the reference kernels (f32 activations, weights decoded
** exactly) on the quantized file against llama.cpp run on the same weights
** dequantized to f32 (NAME.deq-f32.topk.bin), where llama.cpp does not
** quantize activations either.  What is left is summation order and the f16
** KV cache both sides keep: KL about 1e-6.  This is the tight check that our
** model math is llama.cpp's; the comparison above is bounded by llama.cpp's
** own activation-quantization noise (tests/models/llamacpp/README.md).
** The MoE files measure 7e-7..8e-6 over the first 255 positions; over 511
** one or two positions of qwen3moe and olmoe take another expert on
** llama.cpp's f16 KV rounding (KL 0.035 and 0.08 there), which lifts their
** means to 7e-5 and 1.6e-4: their own bounds, in `cases`. */
#define EXACT_MAX_KL 1e-5
static void run_exact(const Case *c)
{
    char path[4300];
    if (!model_path(c, path, sizeof path)) { skip(); }
    double mean_kl, top1;
    teacher_forced_agrees(c, path, "deq-f32.topk.bin", "ref", &mean_kl, &top1);
    assert_true(mean_kl <= (c->max_exact_kl > 0 ? c->max_exact_kl : EXACT_MAX_KL));
    assert_true(top1 >= 0.99);
}

/* Each model: tokenizer, greedy 32 tokens, teacher-forced KL and top-1. */
static void smollm2(void **state) { (void)state; run_case(&cases[0]); }
static void gemma3(void **state) { (void)state; run_case(&cases[1]); }
static void qwen2_f32(void **state) { (void)state; run_case(&cases[2]); }
static void qwen2_q8_0(void **state) { (void)state; run_case(&cases[3]); }
static void qwen2moe_f32(void **state) { (void)state; run_case(&cases[12]); }
static void smollm2_exact(void **state) { (void)state; run_exact(&cases[0]); }
static void gemma3_exact(void **state) { (void)state; run_exact(&cases[1]); }
static void qwen2_q8_0_exact(void **state) { (void)state; run_exact(&cases[3]); }
static void qwen3moe_f32(void **state) { (void)state; run_case(&cases[4]); }
static void qwen3moe_q8_0(void **state) { (void)state; run_case(&cases[5]); }
static void olmoe_f32(void **state) { (void)state; run_case(&cases[6]); }
static void olmoe_q8_0(void **state) { (void)state; run_case(&cases[7]); }
static void mixtral_f32(void **state) { (void)state; run_case(&cases[8]); }
static void mixtral_q8_0(void **state) { (void)state; run_case(&cases[9]); }
static void gpt_oss_f32(void **state) { (void)state; run_case(&cases[10]); }
static void gpt_oss_mxfp4(void **state) { (void)state; run_case(&cases[11]); }
static void qwen3moe_q8_0_exact(void **state) { (void)state; run_exact(&cases[5]); }
static void olmoe_q8_0_exact(void **state) { (void)state; run_exact(&cases[7]); }
static void mixtral_q8_0_exact(void **state) { (void)state; run_exact(&cases[9]); }
static void gpt_oss_mxfp4_exact(void **state) { (void)state; run_exact(&cases[11]); }
static void glm4moe_f32(void **state) { (void)state; run_case(&cases[13]); }
static void glm4moe_q8_0(void **state) { (void)state; run_case(&cases[14]); }
static void glm4moe_q8_0_exact(void **state) { (void)state; run_exact(&cases[14]); }
static void glm4moe_air_f32(void **state) { (void)state; run_case(&cases[15]); }

int main(void)
{
    const char *src = getenv("RADIANCE_SRC");
    snprintf(recordings, sizeof recordings, "%s/tests/models/llamacpp", src ? src : ".");
    const char *models = getenv("RADIANCE_MODELS"), *home = getenv("HOME");
    if (models) snprintf(cache, sizeof cache, "%s", models);
    else snprintf(cache, sizeof cache, "%s/.cache/radiance/models", home ? home : ".");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(qwen2_f32),
        cmocka_unit_test(qwen2_q8_0),
        cmocka_unit_test(qwen2moe_f32),
        cmocka_unit_test(glm4moe_f32),
        cmocka_unit_test(glm4moe_q8_0),
        cmocka_unit_test(glm4moe_q8_0_exact),
        cmocka_unit_test(glm4moe_air_f32),
        cmocka_unit_test(qwen3moe_f32),
        cmocka_unit_test(qwen3moe_q8_0),
        cmocka_unit_test(olmoe_f32),
        cmocka_unit_test(olmoe_q8_0),
        cmocka_unit_test(mixtral_f32),
        cmocka_unit_test(mixtral_q8_0),
        cmocka_unit_test(gpt_oss_f32),
        cmocka_unit_test(gpt_oss_mxfp4),
        cmocka_unit_test(qwen3moe_q8_0_exact),
        cmocka_unit_test(olmoe_q8_0_exact),
        cmocka_unit_test(mixtral_q8_0_exact),
        cmocka_unit_test(gpt_oss_mxfp4_exact),
        cmocka_unit_test(smollm2),
        cmocka_unit_test(gemma3),
        cmocka_unit_test(qwen2_q8_0_exact),
        cmocka_unit_test(smollm2_exact),
        cmocka_unit_test(gemma3_exact),
    };
    return cmocka_run_group_tests_name("llama.cpp agreement", tests, NULL, NULL);
}
