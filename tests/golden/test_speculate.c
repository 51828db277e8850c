/*
** test_speculate.c: speculative decoding is byte-identical to plain decoding.
**
** Tiny checkpoints from tests/golden/fixtures, converted here, generate a
** reply twice: plain (pick, run, pick...) and through rad_spec_step with a
** drafter, and the tokens must be the same, bit for bit, for every drafter:
**
**   ngram      prompt lookup over a prompt that repeats itself
**   self       the target as its own draft model (a second instance of the
**              same file): every guess is accepted, the verify step's real
**              cost is what is left
**   wrong      a drafter that guesses tokens the model never picks
**   abstain    a drafter that never guesses: exactly one token a step
**
** with greedy picks and with sampling at temperature 0.9 under fixed seeds
** (the picks' distribution is then the same because the picks are), with a
** repeat penalty (the picks' history includes accepted guesses), f32 and
** f16 KV, and on a model with a sliding window across the window's edge.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../engine/include/radiance.h"
#include "../../engine/sample.h"
#include "../../engine/speculate.h"

static char fixtures[4096], workdir[4096];

enum { PROMPT = 24, GEN = 40, K_MAX = 6 };

static const char *model(const char *name)
{
    static char paths[8][4300];
    static const char *names[8];
    for (int i = 0; i < 8; i++) {
        if (names[i] && strcmp(names[i], name) == 0) return paths[i];
        if (names[i]) continue;
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", fixtures, name);
        snprintf(paths[i], sizeof paths[i], "%s/%s.rad", workdir, name);
        if (rad_convert_hf(dir, paths[i], "f32", NULL, NULL)) fail_msg("convert %s: %s", name, rad_error_message());
        names[i] = name;
        return paths[i];
    }
    fail_msg("too many models");
    return NULL;
}

static RadEngine *open_engine(const char *path, const char *kv, int max_spec)
{
    RadEngineOptions opt = {.model_path = path, .kv_type = kv, .max_spec = max_spec, .max_ctx = 128, .max_tok = 16};
    RadEngine *e = NULL;
    if (rad_engine_open(&opt, &e)) fail_msg("open %s: %s", path, rad_error_message());
    return e;
}

/* A prompt that repeats a phrase of 8 tokens, so prompt lookup has matches. */
static void make_prompt(int32_t *p, int vocab)
{
    for (int i = 0; i < PROMPT; i++) p[i] = (int32_t)(((i % 8) * 131 + 7) % (vocab - 1)) + 1;
}

typedef struct Picker {
    RadSampler *sampler;
    const int32_t *reply;       /* the reply so far: the repeat penalty's history */
    int n_reply;
    int32_t scratch[GEN + K_MAX + 2];
} Picker;

static int pick(void *ctx, const float *logits, const int32_t *guessed, int n_guessed, int64_t position)
{
    Picker *p = ctx;
    memcpy(p->scratch, p->reply, (size_t)p->n_reply * sizeof *p->reply);
    memcpy(p->scratch + p->n_reply, guessed, (size_t)n_guessed * sizeof *guessed);
    return rad_sampler_pick(p->sampler, logits, p->scratch, p->n_reply + n_guessed, position);
}

static RadSamplerParams sampling(float temperature, uint64_t seed, float penalty)
{
    RadSamplerParams s;
    rad_sampler_defaults(&s);
    s.temperature = temperature;
    s.seed = seed;
    s.repeat_penalty = penalty;
    return s;
}

/* Plain decoding: GEN tokens after the prompt. */
static void plain(const char *path, const char *kv, const RadSamplerParams *sp, int32_t *reply)
{
    RadEngine *e = open_engine(path, kv, 0);
    int vocab = rad_engine_n_vocab(e), seq;
    RadSampler *s;
    assert_int_equal(rad_sampler_create(sp, vocab, &s), 0);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    int32_t p[PROMPT];
    make_prompt(p, vocab);
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    if (rad_engine_eval(e, seq, p, PROMPT, logits)) fail_msg("%s", rad_error_message());
    for (int n = 0; n < GEN; n++) {
        reply[n] = rad_sampler_pick(s, logits, reply, n, PROMPT + n);
        if (n + 1 < GEN && rad_engine_eval(e, seq, &reply[n], 1, logits)) fail_msg("%s", rad_error_message());
    }
    free(logits);
    rad_sampler_free(s);
    rad_engine_close(e);
}

/* Drafters of the test. */
static int abstain(void *self, const int32_t *h, int n, int max, int32_t *out)
{
    (void)self, (void)h, (void)n, (void)max, (void)out;
    return 0;
}

static int wrong(void *self, const int32_t *h, int n, int max, int32_t *out)
{
    (void)self;
    for (int i = 0; i < max; i++) out[i] = (h[n - 1] + 1 + i * 17) % 97;
    return max;
}

static void no_free(void *self) { (void)self; }

enum { D_NGRAM, D_SELF, D_WRONG, D_ABSTAIN };
static const char *drafter_names[] = {"ngram", "self", "wrong", "abstain"};

/* The same reply through speculation; the stats go to *st. */
static void speculative(const char *path, const char *kv, const RadSamplerParams *sp, int kind, int32_t *reply,
                        RadSpecStats *st)
{
    RadEngine *e = open_engine(path, kv, K_MAX), *draft = NULL;
    int vocab = rad_engine_n_vocab(e), seq;
    RadDrafter d;
    if (kind == D_NGRAM) {
        const RadNgramParams np = {.min_n = 2, .max_n = 4};
        assert_int_equal(rad_draft_ngram(&np, &d), 0);
    } else if (kind == D_SELF) {
        draft = open_engine(path, kv, 0);
        if (rad_draft_model(draft, e, &d)) fail_msg("%s", rad_error_message());
    } else {
        d = (RadDrafter){.name = drafter_names[kind], .propose = kind == D_WRONG ? wrong : abstain, .free = no_free};
    }
    RadSpec spec;
    assert_int_equal(rad_spec_init(&spec, d, e, K_MAX), 0);
    RadSampler *s;
    assert_int_equal(rad_sampler_create(sp, vocab, &s), 0);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    int32_t context[PROMPT + GEN + K_MAX + 1], out[K_MAX + 1];
    make_prompt(context, vocab);
    assert_int_equal(rad_engine_seq_new(e, &seq), 0);
    if (rad_engine_eval(e, seq, context, PROMPT, logits)) fail_msg("%s", rad_error_message());
    int n = 0;
    reply[n] = rad_sampler_pick(s, logits, reply, 0, PROMPT);
    context[PROMPT + n++] = reply[0];
    Picker pk = {.sampler = s, .reply = reply};
    while (n < GEN) {
        pk.n_reply = n;
        int got = rad_spec_step(&spec, e, seq, context, PROMPT + n, pick, &pk, out, NULL);
        if (got <= 0) fail_msg("spec step: %s", rad_error_message());
        for (int i = 0; i < got && n < GEN; i++) {
            reply[n] = out[i];
            context[PROMPT + n++] = out[i];
        }
    }
    *st = spec.stats;
    rad_spec_free(&spec);
    free(logits);
    rad_sampler_free(s);
    rad_engine_close(e);
    rad_engine_close(draft);
}

static void same_reply(const char *name, const char *kv, float temperature, uint64_t seed, float penalty)
{
    const char *path = model(name);
    RadSamplerParams sp = sampling(temperature, seed, penalty);
    int32_t want[GEN], got[GEN];
    plain(path, kv, &sp, want);
    for (int kind = D_NGRAM; kind <= D_ABSTAIN; kind++) {
        RadSpecStats st;
        speculative(path, kv, &sp, kind, got, &st);
        for (int i = 0; i < GEN; i++)
            if (got[i] != want[i])
                fail_msg("%s kv %s temp %.1f seed %llu, drafter %s: token %d is %d, plain decoding gave %d", name, kv,
                         temperature, (unsigned long long)seed, drafter_names[kind], i, got[i], want[i]);
        if (kind == D_ABSTAIN) assert_int_equal(st.drafted, 0);
        if (kind == D_ABSTAIN) assert_int_equal(st.steps, GEN - 1);    /* one token a step */
        /* the draft model guesses by argmax: with plain greedy picks it is always right */
        if (kind == D_SELF && temperature == 0 && penalty == 1.0f) assert_int_equal(st.accepted, st.drafted);
        if (temperature == 0 && seed == 1)
            print_message("%-14s kv %s penalty %.1f %-8s steps %lld, drafted %lld, accepted %lld\n", name, kv, penalty,
                          drafter_names[kind], (long long)st.steps, (long long)st.drafted, (long long)st.accepted);
    }
}

static void greedy_identical(void **state)
{
    (void)state;
    /* every family; mistral_window (64 positions, window 20) and gemma3
    ** (window 16) cross their window's edge */
    static const char *names[] = {"llama", "mistral_window", "qwen2", "qwen3", "gemma3"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        same_reply(names[i], "f32", 0, 1, 1.0f);
        same_reply(names[i], "f32", 0, 1, 1.1f);
        same_reply(names[i], "f16", 0, 1, 1.0f);
    }
}

/* Sampling: the same seeds give the same tokens, so the distribution over
** many seeds is the same too (each seed is a sample of it). */
static void sampled_identical(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 12; seed++) same_reply("llama", "f32", 0.9f, seed, 1.1f);
}

/* A draft model of another vocabulary is refused by name. */
static void other_vocabulary_refused(void **state)
{
    (void)state;
    RadEngine *a = open_engine(model("llama"), "f32", K_MAX), *b = open_engine(model("qwen2"), "f32", 0);
    RadDrafter d;
    rad_error_clear();
    assert_int_equal(rad_draft_model(b, a, &d), RAD_E_UNSUPPORTED);
    if (!strstr(rad_error_message(), "vocabulary")) fail_msg("message: %s", rad_error_message());
    rad_engine_close(a);
    rad_engine_close(b);
    /* and a depth past the engine's max_spec */
    a = open_engine(model("llama"), "f32", 2);
    const RadNgramParams np = {0};
    assert_int_equal(rad_draft_ngram(&np, &d), 0);
    RadSpec s;
    assert_int_equal(rad_spec_init(&s, d, a, 4), RAD_E_ARG);
    if (!strstr(rad_error_message(), "max_spec")) fail_msg("message: %s", rad_error_message());
    rad_engine_close(a);
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
    snprintf(workdir, sizeof workdir, "/tmp/radiance-spec-XXXXXX");
    return mkdtemp(workdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greedy_identical),
        cmocka_unit_test(sampled_identical),
        cmocka_unit_test(other_vocabulary_refused),
    };
    return cmocka_run_group_tests_name("speculate", tests, setup, teardown);
}
