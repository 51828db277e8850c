/*
** test_batched_real.c: several sequences in one step, on real GGUF files.
**
** docs/OPS.md promises that a row's result does not depend on the rows that
** share its step, and docs/SCHEDULING.md builds the multi-sequence step on
** that promise.  tests/golden/test_engines.c checks it on tiny random
** checkpoints; this checks it where users meet it: the real SmolLM2 (llama
** family, Q4_1 with q8_0 and f32 tensors) and Gemma 3 270M (gemma3 family,
** Q4_K_M: q4_k, q5_0, q6_k, q8_0, sliding-window layers) files, with the
** default f16 cache and with f32.
**
** Four prompts of different lengths (one of them longer than a step's chunk,
** so its prefill shares steps with the others' decode rows) are generated
** greedily, all four through rad_engine_decode together, then each alone
** through rad_engine_eval.  Tokens and every logit bit must be equal.
**
** The files come from tests/models/fetch.sh; without them each test says
** SKIPPED, and fails under CI=true.
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

#include "../../engine/include/radiance.h"
#include "text/rad_text.h"
#include "real_file.h"

#define SMOLLM2 "SmolLM2-135M-Instruct.Q4_1.gguf"
#define GEMMA3  "gemma-3-270m-q4_k_m.gguf"

enum { N_SEQS = 4, GEN = 24, CHUNK = 32 };

static const char *const prompts[N_SEQS] = {
    "The capital of France is",
    "Here is a short story about a lighthouse keeper who finds a message in a bottle. It begins on a "
    "stormy night in late autumn, when the wind has torn the last leaves from the trees along the "
    "cliff and the sea is loud against the rocks below the tower. The keeper",
    "def fibonacci(n):",
    "1, 2, 3, 4, 5,",
};

static RadEngine *open_engine(const char *path, const char *kv, int max_seqs)
{
    RadEngineOptions opt = {.model_path = path, .kv_type = kv, .max_seqs = max_seqs, .max_tok = CHUNK,
                            .max_ctx = 256, .n_threads = 2};
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

typedef struct Prompts {
    int32_t *ids[N_SEQS];
    int n[N_SEQS];
} Prompts;

static void encode_prompts(RadEngine *e, Prompts *p)
{
    for (int s = 0; s < N_SEQS; s++) {
        if (rad_text_encode(rad_engine_text(e), prompts[s], strlen(prompts[s]), RAD_ENCODE_ADD_SPECIAL, &p->ids[s], &p->n[s]))
            fail_msg("encode: %s", rad_error_message());
        assert_true(p->n[s] > 0);
    }
    assert_true(p->n[1] > CHUNK);      /* the long prompt needs several steps */
}

/* Greedy tokens of sequence s alone, and the logits of each picked row. */
static void greedy_alone(const char *path, const char *kv, const Prompts *p, int s, int32_t *picked, float *logits)
{
    RadEngine *e = open_engine(path, kv, 1);
    int vocab = rad_engine_n_vocab(e), seq;
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    float *row = logits;
    if (rad_engine_eval(e, seq, p->ids[s], p->n[s], row)) fail_msg("%s", rad_error_message());
    for (int t = 0; t < GEN; t++) {
        picked[t] = argmax(row, vocab);
        if (t + 1 == GEN) break;
        row += vocab;
        if (rad_engine_eval(e, seq, &picked[t], 1, row)) fail_msg("%s", rad_error_message());
    }
    rad_engine_close(e);
}

/* All four through one engine, every call carrying every sequence. */
static void greedy_together(const char *path, const char *kv, const Prompts *p, int32_t picked[N_SEQS][GEN],
                            float *logits[N_SEQS])
{
    RadEngine *e = open_engine(path, kv, N_SEQS);
    int vocab = rad_engine_n_vocab(e), seq[N_SEQS];
    RadSeqWork work[N_SEQS];
    for (int s = 0; s < N_SEQS; s++) {
        assert_int_equal(rad_engine_seq_new(e, &seq[s]), 0);
        work[s] = (RadSeqWork){.seq = seq[s], .tokens = p->ids[s], .n = p->n[s], .logits = RAD_LOGITS_LAST,
                               .out = logits[s]};
    }
    if (rad_engine_decode(e, work, N_SEQS)) fail_msg("%s", rad_error_message());
    for (int t = 0; t < GEN; t++) {
        for (int s = 0; s < N_SEQS; s++) picked[s][t] = argmax(logits[s] + (size_t)t * vocab, vocab);
        if (t + 1 == GEN) break;
        for (int s = 0; s < N_SEQS; s++)
            work[s] = (RadSeqWork){.seq = seq[s], .tokens = &picked[s][t], .n = 1, .logits = RAD_LOGITS_LAST,
                                   .out = logits[s] + (size_t)(t + 1) * vocab};
        if (rad_engine_decode(e, work, N_SEQS)) fail_msg("%s", rad_error_message());
    }
    RadEngineStats st;
    rad_engine_stats(e, &st);
    assert_true(st.steps < (int64_t)N_SEQS * GEN);     /* the sequences really shared steps */
    rad_engine_close(e);
}

static void batched_equals_alone(const char *file, const char *kv)
{
    const char *path = real_file(file);
    RadEngine *probe = open_engine(path, kv, 1);
    int vocab = rad_engine_n_vocab(probe);
    Prompts p;
    encode_prompts(probe, &p);
    rad_engine_close(probe);

    int32_t together[N_SEQS][GEN], alone[GEN];
    float *logits[N_SEQS], *solo = malloc((size_t)GEN * vocab * sizeof *solo);
    for (int s = 0; s < N_SEQS; s++) logits[s] = malloc((size_t)GEN * vocab * sizeof(float));
    greedy_together(path, kv, &p, together, logits);
    for (int s = 0; s < N_SEQS; s++) {
        greedy_alone(path, kv, &p, s, alone, solo);
        for (int t = 0; t < GEN; t++)
            if (together[s][t] != alone[t])
                fail_msg("%s kv %s: sequence %d token %d: %d batched, %d alone", file, kv, s, t, together[s][t], alone[t]);
        for (int t = 0; t < GEN; t++)
            if (memcmp(logits[s] + (size_t)t * vocab, solo + (size_t)t * vocab, (size_t)vocab * sizeof(float)))
                fail_msg("%s kv %s: sequence %d step %d: logits differ batched and alone", file, kv, s, t);
        printf("    %s kv %s: sequence %d (%d prompt tokens): %d tokens and their logits identical\n", file, kv, s,
               p.n[s], GEN);
        free(logits[s]);
        free(p.ids[s]);
    }
    free(solo);
}

/* Pins batch invariance on the llama family's real file. */
static void smollm2_batched_equals_alone(void **state)
{
    (void)state;
    batched_equals_alone(SMOLLM2, "f16");
    batched_equals_alone(SMOLLM2, "f32");
}

/* Pins it on the gemma3 family's (sliding-window layers, k-quants). */
static void gemma3_batched_equals_alone(void **state)
{
    (void)state;
    batched_equals_alone(GEMMA3, "f16");
    batched_equals_alone(GEMMA3, "f32");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(smollm2_batched_equals_alone),
        cmocka_unit_test(gemma3_batched_equals_alone),
    };
    return cmocka_run_group_tests_name("batched_real", tests, NULL, NULL);
}
