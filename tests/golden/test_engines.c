/*
** test_engines.c: several models and several sequences in one process.
**
** The engine is opened on tiny checkpoints from tests/golden/fixtures
** (converted here with the real converter) and every comparison is bit for
** bit, because these are contracts, not tolerances:
**
**   instances   two models of one plugin family (llama, qwen3) and one of
**               another (gemma3) open at once, their steps interleaved and
**               their closes in another order than their opens, give the
**               logits each gives alone (docs/ABI.md, instances);
**   batching    N sequences decoded together, with prompts of different
**               lengths so that decode rows share steps with prefill
**               chunks, give the tokens and logits each gives alone
**               (docs/OPS.md, batch invariance), with f32 and f16 KV;
**   prefixes    a prompt that starts like one already run shares its blocks
**               and still gives the logits of a fresh run;
**   recurrent   a snapshot of the previous format is refused by name;
**   copies      kernels' weight copies made after the model opens change no
**               bit: steps run on the stored weights before the copies land
**               and on the copies after give the logits of an engine that
**               made every copy before its first step (docs/RESIDENCY.md);
**   streaming   routed experts read from the file into a small cache of
**               slots as routing picks them give the logits of the same
**               model held in memory (docs/RESIDENCY.md, streaming).
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
#include <liburing.h>

#include <cmocka.h>

#include "../../engine/include/radiance.h"

static char fixtures[4096], workdir[4096];

/* The fixture `name` converted to `quant` once, as workdir/name.quant.rad. */
static const char *model_as(const char *name, const char *quant)
{
    static char paths[16][4300];
    static const char *names[16], *quants[16];
    for (int i = 0; i < 16; i++) {
        if (names[i] && strcmp(names[i], name) == 0 && strcmp(quants[i], quant) == 0) return paths[i];
        if (names[i]) continue;
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", fixtures, name);
        snprintf(paths[i], sizeof paths[i], "%s/%s.%s.rad", workdir, name, quant);
        if (rad_convert_hf(dir, paths[i], quant, NULL, NULL)) fail_msg("convert %s: %s", name, rad_error_message());
        names[i] = name;
        quants[i] = quant;
        return paths[i];
    }
    fail_msg("too many models");
    return NULL;
}

static const char *model(const char *name) { return model_as(name, "f32"); }

static RadEngine *open_engine(const char *path, const char *kv, int max_seqs, int max_tok)
{
    RadEngineOptions opt = {.model_path = path, .kv_type = kv, .max_seqs = max_seqs, .max_tok = max_tok,
                            .max_ctx = 256};
    RadEngine *e = NULL;
    if (rad_engine_open(&opt, &e)) fail_msg("open %s: %s", path, rad_error_message());
    return e;
}

/* A deterministic prompt of n tokens for sequence s of a vocabulary. */
static void prompt(int32_t *out, int n, int s, int vocab)
{
    for (int i = 0; i < n; i++) out[i] = (int32_t)((i * 7919 + s * 104729 + 13) % (vocab - 1)) + 1;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* ------------------------------------------------------------ instances */

enum { CHUNKS = 6, CHUNK = 7 };

/* Each chunk's last-row logits of `path` fed CHUNKS chunks of CHUNK tokens. */
static float *solo_run(const char *path)
{
    RadEngine *e = open_engine(path, "f16", 1, 16);
    int vocab = rad_engine_n_vocab(e), seq;
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    float *out = malloc((size_t)CHUNKS * vocab * sizeof *out);
    int32_t tokens[CHUNKS * CHUNK];
    prompt(tokens, CHUNKS * CHUNK, 0, vocab);
    for (int c = 0; c < CHUNKS; c++)
        if (rad_engine_eval(e, seq, tokens + c * CHUNK, CHUNK, out + (size_t)c * vocab))
            fail_msg("eval: %s", rad_error_message());
    rad_engine_close(e);
    return out;
}

typedef struct Live {
    const char *name;
    RadEngine *e;
    int seq, vocab;
    int32_t tokens[CHUNKS * CHUNK];
    float *solo, *row;
} Live;

static void live_open(Live *m, const char *name)
{
    m->name = name;
    m->solo = solo_run(model(name));
    m->e = open_engine(model(name), "f16", 1, 16);
    m->vocab = rad_engine_n_vocab(m->e);
    assert_int_equal(rad_engine_seq_new(m->e, &m->seq), 0);
    prompt(m->tokens, CHUNKS * CHUNK, 0, m->vocab);
    m->row = malloc((size_t)m->vocab * sizeof *m->row);
}

static void live_step(Live *m, int c)
{
    if (rad_engine_eval(m->e, m->seq, m->tokens + c * CHUNK, CHUNK, m->row))
        fail_msg("%s: eval: %s", m->name, rad_error_message());
    if (memcmp(m->row, m->solo + (size_t)c * m->vocab, (size_t)m->vocab * sizeof(float)) != 0)
        fail_msg("%s chunk %d: logits differ from the model run alone", m->name, c);
}

static void live_close(Live *m)
{
    rad_engine_close(m->e);
    m->e = NULL;
    free(m->solo);
    free(m->row);
}

/* Three engines, two of the llama plugin and one of gemma3, interleaved;
** closing two of them leaves the third stepping exactly as alone. */
static void instances_interleave_bit_identically(void **state)
{
    (void)state;
    Live a, b, g;
    live_open(&a, "llama");
    live_open(&b, "qwen3");
    live_open(&g, "gemma3");
    for (int c = 0; c < CHUNKS / 2; c++) {
        live_step(&a, c);
        live_step(&g, c);
        live_step(&b, c);
    }
    live_close(&a);                 /* the first opened closes first ... */
    for (int c = CHUNKS / 2; c < CHUNKS - 1; c++) {
        live_step(&g, c);
        live_step(&b, c);
    }
    live_close(&b);                 /* ... the last family member next */
    live_step(&g, CHUNKS - 1);
    live_close(&g);
}

/* ------------------------------------------------------------- batching */

enum { N_SEQS = 4, GEN = 12 };
static const int prompt_len[N_SEQS] = {5, 23, 1, 40};

/* Greedy tokens of sequence s alone, and the logits of each picked row. */
static void greedy_alone(const char *path, const char *kv, int s, int32_t *picked, float *logits)
{
    RadEngine *e = open_engine(path, kv, 1, 16);
    int vocab = rad_engine_n_vocab(e), seq;
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    int32_t p[64];
    prompt(p, prompt_len[s], s, vocab);
    float *row = logits;
    if (rad_engine_eval(e, seq, p, prompt_len[s], row)) fail_msg("%s", rad_error_message());
    for (int t = 0; t < GEN; t++) {
        picked[t] = argmax(row, vocab);
        if (t + 1 == GEN) break;
        row += vocab;
        if (rad_engine_eval(e, seq, &picked[t], 1, row)) fail_msg("%s", rad_error_message());
    }
    rad_engine_close(e);
}

/* The same N sequences through one engine, every call carrying every
** sequence that has work: the long prompt's chunks share steps with the
** others' decode rows. */
static void greedy_together(const char *path, const char *kv, int32_t picked[N_SEQS][GEN], float *logits[N_SEQS])
{
    RadEngine *e = open_engine(path, kv, N_SEQS, 16);
    int vocab = rad_engine_n_vocab(e), seq[N_SEQS];
    int32_t p[N_SEQS][64];
    RadSeqWork work[N_SEQS];
    for (int s = 0; s < N_SEQS; s++) {
        assert_int_equal(rad_engine_seq_new(e, &seq[s]), 0);
        prompt(p[s], prompt_len[s], s, vocab);
        work[s] = (RadSeqWork){.seq = seq[s], .tokens = p[s], .n = prompt_len[s], .logits = RAD_LOGITS_LAST,
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

static void batched_equals_alone(const char *name, const char *kv)
{
    const char *path = model(name);
    RadEngine *probe = open_engine(path, kv, 1, 16);
    int vocab = rad_engine_n_vocab(probe);
    rad_engine_close(probe);
    int32_t together[N_SEQS][GEN], alone[GEN];
    float *logits[N_SEQS], *solo = malloc((size_t)GEN * vocab * sizeof *solo);
    for (int s = 0; s < N_SEQS; s++) logits[s] = malloc((size_t)GEN * vocab * sizeof(float));
    greedy_together(path, kv, together, logits);
    for (int s = 0; s < N_SEQS; s++) {
        greedy_alone(path, kv, s, alone, solo);
        for (int t = 0; t < GEN; t++)
            if (together[s][t] != alone[t]) fail_msg("%s kv %s: sequence %d token %d: %d batched, %d alone", name, kv, s, t,
                                                     together[s][t], alone[t]);
        for (int t = 0; t < GEN; t++)
            if (memcmp(logits[s] + (size_t)t * vocab, solo + (size_t)t * vocab, (size_t)vocab * sizeof(float)))
                fail_msg("%s kv %s: sequence %d step %d: logits differ batched and alone", name, kv, s, t);
        free(logits[s]);
    }
    free(solo);
}

/* Pins batch invariance end to end (docs/OPS.md): every family, with an f32
** and the default f16 cache, sliding windows and routed experts included,
** gives the same tokens and the same logits bits batched as alone (GLM-4.5's
** grouped sigmoid routing with its correction bias among them). */
static void batched_sequences_equal_solo(void **state)
{
    (void)state;
    static const char *names[] = {"llama", "qwen2", "qwen3", "mistral_window", "gemma3",
                                  "qwen3moe", "qwen3moe_sparse_step", "olmoe", "mixtral", "gpt_oss", "glm4moe"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        batched_equals_alone(names[i], "f32");
        batched_equals_alone(names[i], "f16");
    }
}

/* ------------------------------------------------------------- prefixes */

/* A second sequence whose prompt starts like the first's attaches the
** first's full blocks and gets exactly the logits of a fresh engine. */
static void shared_prefix_gives_fresh_logits(void **state)
{
    (void)state;
    const char *path = model("llama");
    RadEngine *e = open_engine(path, "f16", 2, 16);
    int vocab = rad_engine_n_vocab(e), a, b;
    int32_t first[60], second[60];
    prompt(first, 60, 0, vocab);
    memcpy(second, first, sizeof second);
    second[50] = (second[50] + 1) % vocab;             /* diverges inside the fourth block */
    float *row = malloc((size_t)vocab * sizeof *row), *fresh = malloc((size_t)vocab * sizeof *fresh);
    assert_int_equal(rad_engine_seq_new(e, &a), 0);
    assert_int_equal(rad_engine_seq_new(e, &b), 0);
    if (rad_engine_eval(e, a, first, 60, row)) fail_msg("%s", rad_error_message());
    if (rad_engine_eval(e, b, second, 60, row)) fail_msg("%s", rad_error_message());
    RadEngineStats st;
    rad_engine_stats(e, &st);
    assert_int_equal(st.prefix_rows, 48);              /* three whole blocks of 16 */
    rad_engine_close(e);

    RadEngineOptions opt = {.model_path = path, .kv_type = "f16", .max_tok = 16, .max_ctx = 256, .no_prefix_cache = 1};
    assert_int_equal(rad_engine_open(&opt, &e), 0);
    assert_int_equal(rad_engine_seq_new(e, &b), 0);
    if (rad_engine_eval(e, b, second, 60, fresh)) fail_msg("%s", rad_error_message());
    rad_engine_stats(e, &st);
    assert_int_equal(st.prefix_rows, 0);
    rad_engine_close(e);
    if (memcmp(row, fresh, (size_t)vocab * sizeof(float)) != 0)
        fail_msg("logits after a shared prefix differ from a fresh run");
    free(row);
    free(fresh);
}

/* ------------------------------------------------------------ snapshots */

/* A snapshot of the previous format (before the KV state kinds) is refused
** by name, and the sequence stays empty. */
static void old_snapshot_refused_by_name(void **state)
{
    (void)state;
    RadEngine *e = open_engine(model("llama"), "f16", 1, 16);
    int seq;
    int32_t p[20];
    prompt(p, 20, 0, rad_engine_n_vocab(e));
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    assert_int_equal(rad_engine_eval(e, seq, p, 20, NULL), 0);
    void *blob;
    size_t size;
    assert_int_equal(rad_engine_seq_snapshot(e, seq, &blob, &size), 0);
    int fresh;
    assert_int_equal(rad_engine_seq_new(e, &fresh), RAD_E_RANGE);     /* one sequence: reuse it */
    rad_engine_seq_free(e, seq);
    assert_int_equal(rad_engine_seq_new(e, &fresh), 0);
    ((char *)blob)[7] = '1';
    assert_int_equal(rad_engine_seq_restore(e, fresh, blob, size), RAD_E_FORMAT);
    if (!strstr(rad_error_message(), "format 1")) fail_msg("message: %s", rad_error_message());
    assert_int_equal(rad_engine_seq_len(e, fresh), 0);
    ((char *)blob)[7] = '2';
    assert_int_equal(rad_engine_seq_restore(e, fresh, blob, size), 0);
    assert_int_equal(rad_engine_seq_len(e, fresh), 20);
    free(blob);
    rad_engine_close(e);
}

static int setup(void **state)
{
    (void)state;
    const char *src = getenv("RADIANCE_SRC");
    snprintf(fixtures, sizeof fixtures, "%s/tests/golden/fixtures", src ? src : ".");
    if (access(fixtures, R_OK) != 0) {
        fprintf(stderr, "golden fixtures not found at %s\n", fixtures);
        return -1;
    }
    snprintf(workdir, sizeof workdir, "/tmp/radiance-engines-XXXXXX");
    return mkdtemp(workdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ copies */

/* Each chunk's last-row logits of qwen3 at q8_0 (the cpu library copies its
** q8_0 weights into its x8 layout), the copies made as `copies` says; with
** RAD_COPIES_ON_WAIT they are made between chunk `wait_at - 1` and
** `wait_at`, so the first chunks run on the stored weights. */
static float *copies_run(const char *model, int copies, int wait_at)
{
    const char *path = model_as(model, "q8_0");
    RadEngineOptions opt = {.model_path = path, .kv_type = "f16", .max_seqs = 1, .max_tok = 16, .max_ctx = 256,
                            .kernels = "cpu,ref", .copies = copies};
    RadEngine *e = NULL;
    if (rad_engine_open(&opt, &e)) fail_msg("open %s: %s", path, rad_error_message());
    if (copies == RAD_COPIES_AT_OPEN && rad_engine_copies_pending(e) != 0)
        fail_msg("RAD_COPIES_AT_OPEN: %d copies still pending after open", rad_engine_copies_pending(e));
    if (copies == RAD_COPIES_ON_WAIT && rad_engine_copies_pending(e) < 1)
        fail_msg("%s RAD_COPIES_ON_WAIT: no copy left for later, so this test would test nothing "
                 "(does the cpu library still copy q8_0 weights?)", model);
    int vocab = rad_engine_n_vocab(e), seq;
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    float *out = malloc((size_t)CHUNKS * vocab * sizeof *out);
    int32_t tokens[CHUNKS * CHUNK];
    prompt(tokens, CHUNKS * CHUNK, 3, vocab);
    for (int c = 0; c < CHUNKS; c++) {
        if (c == wait_at) {
            rad_engine_wait_copies(e);
            if (rad_engine_copies_pending(e) != 0) fail_msg("copies still pending after rad_engine_wait_copies");
        }
        if (rad_engine_eval(e, seq, tokens + c * CHUNK, CHUNK, out + (size_t)c * vocab))
            fail_msg("eval: %s", rad_error_message());
    }
    rad_engine_close(e);
    return out;
}

static void copies_later_same_bits(const char *model)
{
    const char *path = model_as(model, "q8_0");
    RadEngine *probe = open_engine(path, "f16", 1, 16);
    int vocab = rad_engine_n_vocab(probe);
    rad_engine_close(probe);
    float *first = copies_run(model, RAD_COPIES_AT_OPEN, -1);
    float *held = copies_run(model, RAD_COPIES_ON_WAIT, CHUNKS / 2);
    float *background = copies_run(model, RAD_COPIES_BACKGROUND, -1);
    for (int c = 0; c < CHUNKS; c++) {
        if (memcmp(first + (size_t)c * vocab, held + (size_t)c * vocab, (size_t)vocab * sizeof(float)))
            fail_msg("%s chunk %d (%s the copies): logits differ from the engine that made its copies at open",
                     model, c, c < CHUNKS / 2 ? "before" : "after");
        if (memcmp(first + (size_t)c * vocab, background + (size_t)c * vocab, (size_t)vocab * sizeof(float)))
            fail_msg("%s chunk %d: copies made in the background changed the logits", model, c);
    }
    free(first);
    free(held);
    free(background);
}

/* Pins: a dense model (qwen3) and a mixture of experts (gpt-oss: its expert
** stacks, stored one record per expert, get the cpu library's x8 copies
** too) give the same logits whether the copies are made at open, after
** half the prompt, or in the background. */
static void copies_made_later_change_no_bit(void **state)
{
    (void)state;
    copies_later_same_bits("qwen3");
    copies_later_same_bits("gpt_oss");
}

/* Logits of every chunk of a prompt: the model held in memory, or with its
** experts streamed through a cache of cache_bytes (0: what the budget
** leaves; 1: the fewest slots, one layer's experts, so that each layer
** evicts the one before), read with
** `depth` requests in flight (RadEngineOptions.expert_io_depth). */
static float *stream_run(const char *path, int stream, int depth, int64_t cache_bytes, int prefetch,
                         RadEngineStats *stats)
{
    RadEngineOptions opt = {.model_path = path, .kv_type = "f16", .max_seqs = 1, .max_tok = 16, .max_ctx = 256,
                            .kernels = "cpu,ref", .copies = RAD_COPIES_AT_OPEN, .stream_experts = stream,
                            .expert_io_depth = depth, .expert_cache_bytes = cache_bytes,
                            .expert_prefetch = prefetch};
    RadEngine *e = NULL;
    if (rad_engine_open(&opt, &e)) fail_msg("open %s: %s", path, rad_error_message());
    int vocab = rad_engine_n_vocab(e), seq;
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    /* a prefill chunk (many experts per layer), then decode steps (few) */
    enum { STREAM_STEPS = 6 };
    float *out = malloc((size_t)STREAM_STEPS * vocab * sizeof *out);
    int32_t tokens[CHUNK + STREAM_STEPS];
    prompt(tokens, CHUNK + STREAM_STEPS, 5, vocab);
    if (rad_engine_eval(e, seq, tokens, CHUNK, out)) fail_msg("eval: %s", rad_error_message());
    for (int i = 1; i < STREAM_STEPS; i++)
        if (rad_engine_eval(e, seq, tokens + CHUNK + i, 1, out + (size_t)i * vocab))
            fail_msg("eval: %s", rad_error_message());
    rad_engine_stats(e, stats);
    rad_engine_close(e);
    return out;
}

/* Pins: streamed experts change no bit, for gpt-oss (q8_0 stacks with
** biases), Qwen3-MoE (f32), OLMoE (q8_0) and GLM-4.5 (q8_0): runs are read
** and found resident, and at least one model reads more runs than the cache holds
** (evictions happen).  The same holds however the reads go: one pread at a
** time, one io_uring request in flight, the default depth (each with the
** least cache: 1 byte asked, too small to read ahead), and with the cache
** the budget gives (here every expert: nothing is read twice), the next
** layer read ahead during a prefill and not; and the depth changes what is
** read not at all (the same runs, the same bytes). */
static void streamed_experts_change_no_bit(void **state)
{
    (void)state;
    const char *models[][2] = {{"gpt_oss", "q8_0"}, {"qwen3moe", "f32"}, {"olmoe", "q8_0"}, {"glm4moe", "q8_0"}};
    const struct { int depth; int64_t cache; int prefetch; const char *name; } ways[] = {
        {-1, 1, 0, "pread"}, {1, 1, 0, "depth 1"}, {0, 1, 0, "default depth"},
        {0, 0, -1, "budget's cache, not ahead"}, {0, 0, 0, "cache from the budget"}};
    int64_t ahead = 0;
    int evicted = 0;
    struct io_uring ring;
    const int uring_allowed = io_uring_queue_init(1, &ring, 0) == 0;
    if (uring_allowed) io_uring_queue_exit(&ring);
    else print_message("io_uring is refused here: every depth reads with pread\n");
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        const char *path = model_as(models[m][0], models[m][1]);
        RadEngine *probe = open_engine(path, "f16", 1, 16);
        int vocab = rad_engine_n_vocab(probe);
        rad_engine_close(probe);
        RadEngineStats held, first;
        float *a = stream_run(path, 0, 0, 0, 0, &held);
        assert_int_equal(held.expert_loads, 0);
        for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
            RadEngineStats streamed;
            float *b = stream_run(path, 1, ways[w].depth, ways[w].cache, ways[w].prefetch, &streamed);
            if (memcmp(a, b, (size_t)6 * vocab * sizeof(float)))
                fail_msg("%s %s, %s: streamed experts change the logits", models[m][0], models[m][1], ways[w].name);
            print_message("%-8s streamed, %-22s %lld runs read (%lld bytes, %lld ahead), %lld found resident, "
                          "%lld slots\n", models[m][0], ways[w].name, (long long)streamed.expert_loads,
                          (long long)streamed.expert_bytes_read, (long long)streamed.expert_prefetches,
                          (long long)streamed.expert_hits, (long long)streamed.expert_slots);
            if (ways[w].prefetch < 0 || ways[w].depth < 0) assert_int_equal(streamed.expert_prefetches, 0);
            if (ways[w].cache == 1) assert_int_equal(streamed.expert_prefetches, 0);  /* no room to read ahead */
            else if (ways[w].prefetch == 0) ahead += streamed.expert_prefetches;
            assert_true(streamed.expert_loads > 0 && streamed.expert_hits > 0);
            /* io_uring is used where the kernel gives it, not quietly skipped */
            if (ways[w].depth < 0 || !uring_allowed)
                assert_int_equal(streamed.expert_io_depth, 0);
            else
                assert_true(streamed.expert_io_depth > 0 &&
                            streamed.expert_io_depth <= (ways[w].depth ? ways[w].depth : 8));
            if (w == 0) {
                first = streamed;
                evicted += streamed.expert_loads > streamed.expert_slots;
            } else if (ways[w].cache == 1) {
                assert_int_equal(streamed.expert_loads, first.expert_loads);
                assert_int_equal(streamed.expert_bytes_read, first.expert_bytes_read);
            } else if (ways[w].cache == 0) {
                assert_true(streamed.expert_loads <= streamed.expert_slots);   /* nothing read twice */
            }
            free(b);
        }
        free(a);
    }
    assert_true(evicted > 0);       /* some model read more runs than the cache holds */
    if (uring_allowed) assert_true(ahead > 0);      /* reads ahead happened, and changed no bit */
}

/* Pins: a model file shortened under a running model whose experts stream
** fails the next expert read with RAD_E_IO naming the file and the offset,
** instead of computing from bytes that never arrived or dying of SIGBUS
** (the dense part was read into memory at open, so nothing else touches
** the file).  The engine still closes cleanly. */
static void shortened_file_fails_the_read(void **state)
{
    (void)state;
    const char *src = model_as("gpt_oss", "q8_0");
    char path[4400];
    snprintf(path, sizeof path, "%s/shortened.rad", workdir);
    FILE *in = fopen(src, "rb"), *out = fopen(path, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
    RadEngineOptions opt = {.model_path = path, .kv_type = "f16", .max_seqs = 1, .max_tok = 16, .max_ctx = 256,
                            .kernels = "cpu,ref", .copies = RAD_COPIES_AT_OPEN, .stream_experts = RAD_STREAM_ON,
                            .expert_cache_bytes = 1};
    RadEngine *e = NULL;
    if (rad_engine_open(&opt, &e)) fail_msg("open %s: %s", path, rad_error_message());
    int vocab = rad_engine_n_vocab(e), seq;
    float *logits = malloc((size_t)vocab * sizeof *logits);
    int32_t tokens[CHUNK];
    prompt(tokens, CHUNK, 5, vocab);
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    assert_int_equal(rad_engine_eval(e, seq, tokens, CHUNK / 2, logits), 0);
    assert_int_equal(truncate(path, 4096), 0);      /* the preamble alone is left */
    int rc = rad_engine_eval(e, seq, tokens + CHUNK / 2, CHUNK / 2, logits);
    const char *msg = rad_error_message();
    print_message("after the file was shortened: %s\n", msg);
    assert_int_equal(rc, RAD_E_IO);
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, "at offset"));
    rad_engine_close(e);
    free(logits);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(instances_interleave_bit_identically),
        cmocka_unit_test(shared_prefix_gives_fresh_logits),
        cmocka_unit_test(old_snapshot_refused_by_name),
        cmocka_unit_test(batched_sequences_equal_solo),
        cmocka_unit_test(copies_made_later_change_no_bit),
        cmocka_unit_test(streamed_experts_change_no_bit),
        cmocka_unit_test(shortened_file_fails_the_read),
    };
    return cmocka_run_group_tests_name("engines", tests, setup, teardown);
}
