/*
** test_chat.c: chat formats against the models' own templates, and the
** choice of format from a model's vocabulary.
**
** Conformance.  tests/text/chat_expected/<template>.json holds conversations
** and what each real chat template renders for them (transformers'
** apply_chat_template machinery, make_chat_expected.py): with and without a
** system message, multi-turn, with and without the generation prompt,
** thinking on, off and default, assistant turns carrying reasoning, odd
** white space and Unicode.  Every case is rendered with the format the file
** names (arch/common/rad_chat_formats.h) and must equal the template's text
** byte for byte; where the template raised, we must refuse too.  The only
** exceptions are listed in `pinned` below, each with its reason: cases the
** template renders by silently dropping a message, which we refuse instead.
** A pinned case that starts to match, or to fail differently, fails.
**
** Choice.  The llama plugin's rules and the every-format rules resolve
** against the six reference vocabularies (with the templates they carry and
** with others put in their place) and the real SmolLM2 and Gemma 3 GGUFs,
** through the real plugin .so files.  Stop ids come from the same
** vocabularies.  The reference files are found through $RADIANCE_SHARED
** (else $RADIANCE_SRC/../shared) and $RADIANCE_MODELS (else
** ~/.cache/radiance/models); without them those tests say SKIP (fail when
** CI=true).  Conformance needs nothing outside the repository.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../arch/common/rad_chat_formats.h"
#include "text/rad_chat.h"
#include "text/rad_text.h"

#define TODAY "2025-03-05" /* the date make_chat_expected.py pins strftime_now to */

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

static void models_dir(char *out, size_t cap)
{
    const char *s = getenv("RADIANCE_MODELS"), *home = getenv("HOME");
    if (s && *s)
        snprintf(out, cap, "%s", s);
    else
        snprintf(out, cap, "%s/.cache/radiance/models", home ? home : ".");
}

static void missing(const char *what)
{
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true")) fail_msg("chat: %s (CI=true: this must not be skipped)", what);
    fprintf(stdout, "\n*** SKIP: chat: %s; set RADIANCE_SHARED / RADIANCE_MODELS ***\n\n", what);
    fflush(stdout);
    skip();
}

static char *slurp(const char *path)
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
    if (buf) buf[n] = 0;
    return buf;
}

/* ----------------------------------------------------------- conformance */

/* Cases where the template renders and we refuse on purpose: gpt-oss's
** template writes only a first system message (as developer instructions)
** and silently drops any later one.  A chat that loses a system prompt
** without a word is worse than one told to put it first, so we refuse
** (Llama 2, Gemma and Mistral's templates refuse such conversations
** themselves).  A pin that no case meets fails, so it cannot go stale. */
static const struct Pin {
    const char *template, *reason;
} pinned[] = {
    {"gpt-oss", "the template drops a system message that is not the first message"},
};

#define N_PINNED (sizeof pinned / sizeof pinned[0])
static int pin_hits[N_PINNED];

static int has_late_system(const json_t *msgs)
{
    for (size_t i = 1; i < json_array_size(msgs); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(msgs, i), "role")), "system")) return 1;
    return 0;
}

static const struct Pin *pin_for(const char *template, const json_t *msgs)
{
    for (size_t i = 0; i < N_PINNED; i++)
        if (!strcmp(pinned[i].template, template) && has_late_system(msgs)) {
            pin_hits[i]++;
            return &pinned[i];
        }
    return NULL;
}

/* A string with its control and non-ASCII bytes escaped, for messages. */
static void print_escaped(const char *who, const char *s, size_t from, size_t n)
{
    fprintf(stdout, "      %-8s ", who);
    for (size_t i = from; i < from + n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c < 0x20)
            fprintf(stdout, "\\x%02x", c);
        else
            fputc(c, stdout);
    }
    fputc('\n', stdout);
}

static void print_difference(const char *want, const char *got)
{
    size_t i = 0;
    while (want[i] && want[i] == got[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stdout, "    first difference at byte %zu (want %zu bytes, got %zu):\n", i, strlen(want),
            strlen(got));
    print_escaped("template", want, from, 140);
    print_escaped("ours", got, from, 140);
}

typedef struct Tally {
    int cases, equal, refused, pinned, failed;
} Tally;

/* Render one case of one template file and compare. */
static void check_case(const char *tid, const RadChatFormat *f, const json_t *convs, const json_t *c,
                       Tally *t)
{
    const char *conv = json_string_value(json_object_get(c, "conv"));
    const json_t *msgs = json_object_get(convs, conv);
    size_t n = json_array_size(msgs);
    RadChatMessage *m = calloc(n ? n : 1, sizeof *m);
    for (size_t i = 0; i < n; i++) {
        const json_t *j = json_array_get(msgs, i);
        m[i].role = json_string_value(json_object_get(j, "role"));
        m[i].content = json_string_value(json_object_get(j, "content"));
        m[i].reasoning = json_string_value(json_object_get(j, "reasoning")); /* NULL when absent */
    }
    RadChatRender opt = {
        .add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt")),
        .thinking = (int)json_integer_value(json_object_get(c, "thinking")),
        .today = TODAY,
        .reasoning_effort = json_string_value(json_object_get(c, "reasoning_effort")),
    };
    const char *want = json_string_value(json_object_get(c, "expected"));
    const json_t *error = json_object_get(c, "error");
    const struct Pin *pin = pin_for(tid, msgs);
    char *got = NULL;
    int rc = rad_chat_render(f, m, (int)n, &opt, &got);
    t->cases++;
    char label[160];
    snprintf(label, sizeof label, "%s: %s, generation prompt %s, thinking %d%s%s", tid, conv,
             opt.add_generation_prompt ? "on" : "off", opt.thinking, opt.reasoning_effort ? ", effort " : "",
             opt.reasoning_effort ? opt.reasoning_effort : "");
    if (pin) {
        if (rc == RAD_E_ARG && want)
            t->pinned++;
        else {
            fprintf(stdout, "  PINNED CASE CHANGED %s: want our refusal (%s), got rc %d\n", label,
                    pin->reason, rc);
            t->failed++;
        }
    } else if (error) {
        if (rc == RAD_E_ARG)
            t->refused++;
        else {
            fprintf(stdout, "  MISMATCH %s: the template refuses (%s) but we rendered (rc %d)\n", label,
                    json_string_value(error), rc);
            if (got) print_escaped("ours", got, 0, 200);
            t->failed++;
        }
    } else if (rc != RAD_OK) {
        fprintf(stdout, "  MISMATCH %s: we refused (%s)\n", label, rad_error_message());
        t->failed++;
    } else if (strcmp(want, got)) {
        fprintf(stdout, "  MISMATCH %s\n", label);
        print_difference(want, got);
        t->failed++;
    } else {
        t->equal++;
    }
    free(got);
    free(m);
}

static void test_conformance(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/text/chat_expected", src_dir());
    DIR *d = opendir(dir);
    assert_non_null(d);
    char *names[64];
    int n_files = 0;
    for (struct dirent *e; (e = readdir(d)) && n_files < 64;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json")) names[n_files++] = strdup(e->d_name);
    }
    closedir(d);
    assert_true(n_files >= 13);
    Tally all = {0};
    for (int i = 0; i < n_files; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        json_error_t err;
        json_t *doc = json_load_file(path, 0, &err);
        if (!doc) fail_msg("%s:%d: %s", path, err.line, err.text);
        const char *tid = json_string_value(json_object_get(doc, "template"));
        const char *fname = json_string_value(json_object_get(doc, "format"));
        const RadChatFormat *f = rad_chat_format_named(fname);
        if (!f) fail_msg("%s names the format '%s', which does not exist", path, fname);
        const json_t *cases = json_object_get(doc, "cases"), *c;
        size_t k;
        Tally t = {0};
        json_array_foreach(cases, k, c) check_case(tid, f, json_object_get(doc, "conversations"), c, &t);
        fprintf(stdout,
                "  %-20s %-15s %4d cases: %4d byte-equal, %2d refused as the template refuses, "
                "%d pinned, %d wrong\n",
                tid, fname, t.cases, t.equal, t.refused, t.pinned, t.failed);
        all.cases += t.cases, all.equal += t.equal, all.refused += t.refused, all.pinned += t.pinned;
        all.failed += t.failed;
        json_decref(doc);
        free(names[i]);
    }
    fprintf(stdout,
            "  chat conformance: %d templates, %d cases: %d byte-equal, %d refused as the template "
            "refuses, %d pinned, %d wrong\n",
            n_files, all.cases, all.equal, all.refused, all.pinned, all.failed);
    assert_int_equal(all.failed, 0);
    for (size_t i = 0; i < N_PINNED; i++) /* a pin that no case meets is stale */
        if (!pin_hits[i])
            fail_msg("the pin for %s (%s) matched no case", pinned[i].template, pinned[i].reason);
}

/* ----------------------------------------------------------- rendering */

static void test_render_refusals(void **state)
{
    (void)state;
    RadChatMessage user = {"user", "hi", NULL}, tool = {"tool", "{}", NULL}, nul = {"user", NULL, NULL};
    RadChatRender opt = {1, -1, TODAY, NULL};
    char *out = (char *)1;
    assert_int_equal(rad_chat_render(NULL, &user, 1, &opt, &out), RAD_E_ARG);
    assert_null(out);
    assert_int_equal(rad_chat_render(rad_chat_choose_llama(), &user, 1, &opt, &out), RAD_E_ARG);
    assert_non_null(strstr(rad_error_message(), "rad_chat_format_resolve"));
    assert_int_equal(rad_chat_render(&rad_chat_fmt_qwen3, &user, 0, &opt, &out), RAD_E_ARG);
    assert_int_equal(rad_chat_render(&rad_chat_fmt_qwen3, &tool, 1, &opt, &out), RAD_E_ARG);
    assert_non_null(strstr(rad_error_message(), "'tool'"));
    RadChatRender bad_date = {1, -1, "5 March", NULL};
    assert_int_equal(rad_chat_render(&rad_chat_fmt_llama32, &user, 1, &bad_date, &out), RAD_E_ARG);
    /* NULL content reads as "", and NULL options as a generation prompt with the model's defaults. */
    assert_int_equal(rad_chat_render(&rad_chat_fmt_chatml, &nul, 1, NULL, &out), RAD_OK);
    assert_string_equal(out, "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    /* Without a date the local date is written, in the format's shape. */
    RadChatRender today = {1, -1, NULL, NULL};
    assert_int_equal(rad_chat_render(&rad_chat_fmt_harmony, &user, 1, &today, &out), RAD_OK);
    const char *d = strstr(out, "Current date: ");
    assert_non_null(d);
    d += 14;
    assert_true(d[4] == '-' && d[7] == '-' && d[10] == '\n' && d[0] == '2');
    free(out);
}

static void test_prompt_in_reasoning(void **state)
{
    (void)state;
    RadChatMessage user = {"user", "hi", NULL};
    char *out;
    RadChatRender on = {1, -1, NULL, NULL}, off = {1, 0, NULL, NULL};
    assert_int_equal(rad_chat_render(&rad_chat_fmt_deepseek_r1, &user, 1, &on, &out), RAD_OK);
    assert_int_equal(rad_chat_prompt_in_reasoning(&rad_chat_fmt_deepseek_r1, out), 1);
    free(out);
    assert_int_equal(rad_chat_render(&rad_chat_fmt_qwen3, &user, 1, &off, &out), RAD_OK);
    assert_int_equal(rad_chat_prompt_in_reasoning(&rad_chat_fmt_qwen3, out),
                     0); /* the empty block is closed */
    free(out);
    assert_int_equal(rad_chat_render(&rad_chat_fmt_qwen3, &user, 1, &on, &out), RAD_OK);
    assert_int_equal(rad_chat_prompt_in_reasoning(&rad_chat_fmt_qwen3, out), 0);
    free(out);
    assert_int_equal(rad_chat_prompt_in_reasoning(&rad_chat_fmt_gemma, "<start_of_turn>model\n"), 0);
}

/* -------------------------------------------------- choosing a format */

static const char *const vocabs[] = {"llama2", "llama3", "qwen3", "gemma3", "gptoss", "deepseek_v3"};
static RadText *texts[6];

static RadText *vocab_text(int i)
{
    if (texts[i]) return texts[i];
    char shared[1024], path[1200];
    shared_dir(shared, sizeof shared);
    snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer.json", shared, vocabs[i]);
    FILE *f = fopen(path, "rb");
    if (!f) {
        char what[1300];
        snprintf(what, sizeof what, "%s is missing", path);
        missing(what);
    }
    fclose(f);
    if (rad_text_open_path(path, &texts[i]) != RAD_OK) fail_msg("%s: %s", path, rad_error_message());
    return texts[i];
}

static const char *resolved_name(const RadChatFormat *chooser, const RadText *t)
{
    const RadChatFormat *f = rad_chat_format_resolve(chooser, t);
    return f ? f->name : "(none)";
}

/* The template the model carries, replaced for one question.  Only the
** choice reads it, so the vocabulary's data may lend its pointer. */
static const char *resolved_with_template(const RadChatFormat *chooser, RadText *t, const char *template_file)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/tests/text/chat_expected/templates/%s", src_dir(), template_file);
    char *tmpl = slurp(path);
    if (!tmpl) fail_msg("cannot read %s", path);
    RadTokenizer *data = (RadTokenizer *)rad_text_data(t);
    char *own = data->chat_template;
    data->chat_template = tmpl;
    const char *name = resolved_name(chooser, t);
    data->chat_template = own;
    free(tmpl);
    return name;
}

static void test_choice_from_vocabulary(void **state)
{
    (void)state;
    const RadChatFormat *any = rad_chat_choose_any(), *llama = rad_chat_choose_llama();
    /* The reference tokenizers with the templates they carry (llama2's and
    ** gptoss's tokenizer_config.json carry none). */
    static const char *const want_any[] = {"(none)", "llama3", "qwen3", "gemma", "gpt-oss", "deepseek-v3"};
    static const char *const want_llama[] = {"(none)", "llama3", "qwen3", "(none)", "(none)", "deepseek-v3"};
    for (int i = 0; i < 6; i++) {
        RadText *t = vocab_text(i);
        fprintf(stdout, "  %-12s any -> %-12s llama plugin -> %s\n", vocabs[i], resolved_name(any, t),
                resolved_name(llama, t));
        assert_string_equal(resolved_name(any, t), want_any[i]);
        assert_string_equal(resolved_name(llama, t), want_llama[i]);
    }
    /* The same vocabularies carrying other lines' templates. */
    RadText *llama3 = vocab_text(1), *qwen3 = vocab_text(2), *llama2 = vocab_text(0), *ds = vocab_text(5);
    assert_string_equal(resolved_with_template(llama, llama3, "meta-llama-Llama-3.1-8B-Instruct.jinja"),
                        "llama3.1");
    assert_string_equal(resolved_with_template(llama, llama3, "meta-llama-Llama-3.2-3B-Instruct.jinja"),
                        "llama3.2");
    assert_string_equal(resolved_with_template(llama, qwen3, "Qwen-Qwen2.5-7B-Instruct.jinja"), "qwen2.5");
    assert_string_equal(resolved_with_template(llama, llama2, "meta-llama-Llama-2-7b-chat-hf.jinja"),
                        "llama2");
    /* A template mark is never enough alone: Llama 2's vocabulary has no [INST] token. */
    assert_string_equal(resolved_with_template(llama, llama2, "mistralai-Mistral-7B-Instruct-v0.3.jinja"),
                        "(none)");
    assert_string_equal(resolved_with_template(llama, ds, "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"),
                        "deepseek-r1");
    /* No tokenizer at all: only a rule without tokens and mark could fit. */
    assert_null(rad_chat_format_resolve(llama, NULL));
    assert_ptr_equal(rad_chat_format_resolve(&rad_chat_fmt_gemma, NULL), &rad_chat_fmt_gemma);
    assert_null(rad_chat_format_resolve(NULL, NULL));
}

static void test_stop_ids(void **state)
{
    (void)state;
    static const int want[6][4] = {{2, -1},      {128009, 128001, -1},         {151645, 151643, -1},
                                   {106, 1, -1}, {200002, 200012, 199999, -1}, {1, -1}};
    static const RadChatFormat *const formats[6] = {&rad_chat_fmt_llama2,  &rad_chat_fmt_llama3,
                                                    &rad_chat_fmt_qwen3,   &rad_chat_fmt_gemma,
                                                    &rad_chat_fmt_harmony, &rad_chat_fmt_deepseek_v3};
    for (int i = 0; i < 6; i++) {
        int ids[8], n = rad_chat_stop_ids(formats[i], vocab_text(i), ids, 8), k = 0;
        while (want[i][k] >= 0) k++;
        fprintf(stdout, "  %-12s %-12s stop ids:", vocabs[i], formats[i]->name);
        for (int j = 0; j < n; j++) fprintf(stdout, " %d", ids[j]);
        fputc('\n', stdout);
        assert_int_equal(n, k);
        for (int j = 0; j < n; j++) assert_int_equal(ids[j], want[i][j]);
    }
    int one[1];
    assert_int_equal(rad_chat_stop_ids(&rad_chat_fmt_qwen3, vocab_text(2), one, 1), 1);
    assert_int_equal(one[0], 151645);
    /* A chooser has no stop strings of its own: only the end-of-sequence. */
    assert_int_equal(rad_chat_stop_ids(rad_chat_choose_llama(), vocab_text(2), one, 1), 1);
}

/* The real plugins, on the real GGUF models' tokenizers: the whole path a
** chat takes to its format, file names never consulted. */
static void test_plugins_on_real_models(void **state)
{
    (void)state;
    const char *home = getenv("RADIANCE_HOME");
    char models[1024], path[1400];
    models_dir(models, sizeof models);
    static const struct {
        const char *plugin, *model, *want;
    } cases[] = {
        {"llama_gguf", "SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2"},
        {"gemma3_gguf", "gemma-3-270m-q4_k_m.gguf", "gemma"},
    };
    if (!home || !*home) missing("RADIANCE_HOME (the build folder with plugins/) is not set");
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", models, cases[i].model);
        FILE *file = fopen(path, "rb");
        if (!file) {
            char what[1500];
            snprintf(what, sizeof what, "%s is missing (tests/models/fetch.sh)", path);
            missing(what);
        }
        fclose(file);
        RadText *t = NULL;
        if (rad_text_open_path(path, &t) != RAD_OK) fail_msg("%s: %s", path, rad_error_message());
        snprintf(path, sizeof path, "%s/plugins/arch/%s.so", home, cases[i].plugin);
        void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!so) fail_msg("%s", dlerror());
        RadArchChatFormatFn fn = (RadArchChatFormatFn)dlsym(so, "rad_arch_chat_format");
        assert_non_null(fn);
        RadModelMeta meta = {
            .struct_size = sizeof meta, .arch_id = "", .quant = "gguf", .hf_arch = "", .name = ""};
        const RadChatFormat *f = rad_chat_format_resolve(fn(&meta), t);
        fprintf(stdout, "  %-12s on %-34s -> %s\n", cases[i].plugin, cases[i].model, f ? f->name : "(none)");
        assert_non_null(f);
        assert_string_equal(f->name, cases[i].want);
        /* and it renders, with stop ids from the model's own vocabulary */
        RadChatMessage m = {"user", "Hi", NULL};
        char *out = NULL;
        assert_int_equal(rad_chat_render(f, &m, 1, NULL, &out), RAD_OK);
        int ids[8];
        assert_true(rad_chat_stop_ids(f, t, ids, 8) >= 1);
        free(out);
        dlclose(so);
        rad_text_free(t);
    }
}

static int free_texts(void **state)
{
    (void)state;
    for (int i = 0; i < 6; i++) rad_text_free(texts[i]), texts[i] = NULL;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conformance),
        cmocka_unit_test(test_render_refusals),
        cmocka_unit_test(test_prompt_in_reasoning),
        cmocka_unit_test(test_choice_from_vocabulary),
        cmocka_unit_test(test_stop_ids),
        cmocka_unit_test(test_plugins_on_real_models),
    };
    return cmocka_run_group_tests(tests, NULL, free_texts);
}
