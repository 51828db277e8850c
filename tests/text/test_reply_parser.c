/*
** test_reply_parser.c: the incremental reply parser gives the same parts
** however the reply is cut.
**
** For every format, a reply holding reasoning, content and tool calls (the
** markup each model really writes) is parsed fed whole, and the parts are
** checked against what a reader of the markup expects.  Then the same reply
** is fed cut at every byte position, at every pair of positions, one byte at
** a time and in random pieces, and each run must give exactly the parts of
** the whole feed, the same stop result, no piece that ends inside a UTF-8
** character, and no marker text in content or reasoning.  Smaller cases pin
** one rule each: text that only looks like the start of a marker, a reply
** that ends inside reasoning or a tool call, white space around reasoning.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../arch/common/rad_chat_formats.h"
#include "text/rad_chat.h"

/* ------------------------------------------------------------ collecting */

#define MAX_PARTS 16

typedef struct Part {
    int kind;
    char text[1024];
    size_t n;
} Part;

typedef struct Parts {
    Part part[MAX_PARTS];
    int n;
    int bad_utf8; /* a content/reasoning piece ended inside a character */
    int stopped;
} Parts;

/* 1 when s[0..n) is whole UTF-8 characters (the test replies are valid). */
static int whole_utf8(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
        if (!len || i + len > n) return 0;
        for (size_t k = 1; k < len; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return 0;
        i += len;
    }
    return 1;
}

/* Content and reasoning pieces join into one part while the kind stays;
** every tool-call emit is a part of its own (one emit is one call). */
static void collect(void *user, RadReplyPart kind, const char *text, size_t n)
{
    Parts *ps = user;
    assert_true(n > 0);
    if (kind != RAD_REPLY_TOOL_CALL && !whole_utf8(text, n)) ps->bad_utf8 = 1;
    Part *last = ps->n ? &ps->part[ps->n - 1] : NULL;
    if (!last || last->kind != (int)kind || kind == RAD_REPLY_TOOL_CALL) {
        assert_true(ps->n < MAX_PARTS);
        last = &ps->part[ps->n++];
        last->kind = (int)kind;
        last->n = 0;
    }
    assert_true(last->n + n < sizeof last->text);
    memcpy(last->text + last->n, text, n);
    last->n += n;
    last->text[last->n] = 0;
}

/* Feed text cut at the given positions (sorted, n_cuts of them). */
static void parse_cut(const RadChatFormat *f, int in_reasoning, const char *text, const size_t *cuts,
                      int n_cuts, Parts *ps)
{
    memset(ps, 0, sizeof *ps);
    RadReplyParser *p = rad_reply_parser_new(f, in_reasoning);
    assert_non_null(p);
    size_t len = strlen(text), from = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        int r = rad_reply_parser_feed(p, text + from, to - from, collect, ps);
        if (r) ps->stopped = 1;
        assert_true(!ps->stopped || r); /* once stopped, stopped */
        from = to;
    }
    rad_reply_parser_finish(p, collect, ps);
    rad_reply_parser_free(p);
}

static void parse_whole(const RadChatFormat *f, int in_reasoning, const char *text, Parts *ps)
{
    parse_cut(f, in_reasoning, text, NULL, 0, ps);
}

static const char *kind_name(int k)
{
    return k == RAD_REPLY_CONTENT ? "content" : k == RAD_REPLY_REASONING ? "reasoning" : "tool_call";
}

static void print_parts(const char *who, const Parts *ps)
{
    fprintf(stdout, "    %s (%d parts, stopped %d):\n", who, ps->n, ps->stopped);
    for (int i = 0; i < ps->n; i++)
        fprintf(stdout, "      %-9s [%s]\n", kind_name(ps->part[i].kind), ps->part[i].text);
}

static int same_parts(const Parts *a, const Parts *b)
{
    if (a->n != b->n || a->stopped != b->stopped) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->part[i].kind != b->part[i].kind || a->part[i].n != b->part[i].n ||
            memcmp(a->part[i].text, b->part[i].text, a->part[i].n))
            return 0;
    return 1;
}

/* No marker of the format in content or reasoning. */
static void check_no_markup(const RadChatFormat *f, const Parts *ps)
{
    const char *marks[32];
    int n = 0;
    const char *fixed[] = {f->reasoning_open, f->reasoning_close, f->tool_call_open, f->tool_call_close,
                           "<|channel|>",     "<|message|>",      "<|start|>",       "<|end|>"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (fixed[i] && (f->style == RAD_CHAT_STYLE_HARMONY || i < 4)) marks[n++] = fixed[i];
    for (const char *const *s = f->stop_strings; s && *s && n < 32; s++) marks[n++] = *s;
    for (int i = 0; i < ps->n; i++) {
        if (ps->part[i].kind == RAD_REPLY_TOOL_CALL) continue;
        for (int k = 0; k < n; k++)
            if (strstr(ps->part[i].text, marks[k])) {
                print_parts("parts", ps);
                fail_msg("markup '%s' reached %s", marks[k], kind_name(ps->part[i].kind));
            }
    }
}

/* ------------------------------------------------------- the split check */

static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;

static unsigned rng(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng_state >> 33);
}

static int compare_run(const char *name, const char *how, const Parts *whole, const Parts *cut)
{
    if (same_parts(whole, cut) && !cut->bad_utf8) return 1;
    fprintf(stdout, "  MISMATCH %s fed %s%s\n", name, how,
            cut->bad_utf8 ? " (a piece ended inside a character)" : "");
    print_parts("whole", whole);
    print_parts("cut", cut);
    return 0;
}

/* Every way of cutting the reply gives the parts of the whole feed. */
static void check_splits(const char *name, const RadChatFormat *f, int in_reasoning, const char *text)
{
    Parts whole, cut;
    parse_whole(f, in_reasoning, text, &whole);
    assert_false(whole.bad_utf8);
    check_no_markup(f, &whole);
    size_t len = strlen(text), cuts[4096] = {0};
    char how[128];
    int runs = 0, bad = 0;
    for (size_t a = 1; a < len && bad < 3; a++) { /* one cut, everywhere */
        cuts[0] = a;
        parse_cut(f, in_reasoning, text, cuts, 1, &cut);
        snprintf(how, sizeof how, "in two at byte %zu", a);
        bad += !compare_run(name, how, &whole, &cut), runs++;
        for (size_t b = a + 1; b < len && bad < 3; b++) { /* two cuts, everywhere */
            cuts[1] = b;
            parse_cut(f, in_reasoning, text, cuts, 2, &cut);
            snprintf(how, sizeof how, "in three at bytes %zu and %zu", a, b);
            bad += !compare_run(name, how, &whole, &cut), runs++;
        }
    }
    assert_true(len < 4096);
    for (size_t i = 0; i + 1 < len; i++) cuts[i] = i + 1; /* one byte at a time */
    parse_cut(f, in_reasoning, text, cuts, len ? (int)len - 1 : 0, &cut);
    bad += !compare_run(name, "one byte at a time", &whole, &cut), runs++;
    for (int r = 0; r < 300 && bad < 3; r++) { /* random pieces */
        int n = 0;
        for (size_t at = 1 + rng() % 7; at < len; at += 1 + rng() % 7) cuts[n++] = at;
        parse_cut(f, in_reasoning, text, cuts, n, &cut);
        snprintf(how, sizeof how, "in %d random pieces (run %d)", n + 1, r);
        bad += !compare_run(name, how, &whole, &cut), runs++;
    }
    fprintf(stdout, "  %-24s %6d cut feeds, %d mismatches\n", name, runs, bad);
    assert_int_equal(bad, 0);
}

/* The whole feed gives exactly these parts (kind, text; kind -1 ends). */
static void expect_parts(const char *name, const RadChatFormat *f, int in_reasoning, const char *text,
                         int stopped, const int *kinds, const char *const *texts)
{
    Parts ps;
    parse_whole(f, in_reasoning, text, &ps);
    int n = 0;
    while (kinds[n] >= 0) n++;
    int ok = ps.n == n && ps.stopped == stopped;
    for (int i = 0; ok && i < n; i++) ok = ps.part[i].kind == kinds[i] && !strcmp(ps.part[i].text, texts[i]);
    if (!ok) {
        fprintf(stdout, "  WRONG PARTS %s (want %d parts, stopped %d)\n", name, n, stopped);
        for (int i = 0; i < n; i++) fprintf(stdout, "      want %-9s [%s]\n", kind_name(kinds[i]), texts[i]);
        print_parts("got", &ps);
    }
    assert_true(ok);
    check_splits(name, f, in_reasoning, text);
}

enum { C = RAD_REPLY_CONTENT, R = RAD_REPLY_REASONING, T = RAD_REPLY_TOOL_CALL, END = -1 };

/* ------------------------------------------------------------ the formats */

static void test_qwen3(void **state)
{
    (void)state;
    const char *reply =
        "<think>\nThe user wants 2+2. Nombres: \xc3\xa9, \xe6\x97\xa5\xe6\x9c\xac, "
        "\xf0\x9f\x99\x82.\n</think>\n\n"
        "It is 4 \xe2\x80\x94 \xc2\xabquatre\xc2\xbb.\n"
        "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"log\", \"arguments\": {}}\n</tool_call><|im_end|>dropped <think>x";
    static const int kinds[] = {R, C, T, T, END};
    static const char *const texts[] = {
        "The user wants 2+2. Nombres: \xc3\xa9, \xe6\x97\xa5\xe6\x9c\xac, \xf0\x9f\x99\x82.",
        "It is 4 \xe2\x80\x94 \xc2\xabquatre\xc2\xbb.\n",
        "{\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}}", "{\"name\": \"log\", \"arguments\": {}}"};
    expect_parts("qwen3", &rad_chat_fmt_qwen3, 0, reply, 1, kinds, texts);
}

/* With thinking off the prompt already holds the empty think block. */
static void test_qwen3_no_think(void **state)
{
    (void)state;
    static const int kinds[] = {C, END};
    static const char *const texts[] = {"Plain answer, no <thought>.\n\nTwo lines."};
    expect_parts("qwen3 no-think", &rad_chat_fmt_qwen3, 0,
                 "Plain answer, no <thought>.\n\nTwo lines.<|endoftext|>", 1, kinds, texts);
}

static void test_qwen25(void **state)
{
    (void)state;
    static const int kinds[] = {C, T, END};
    static const char *const texts[] = {"Sure.\n",
                                        "{\"name\": \"get\", \"arguments\": {\"q\": \"<think>\"}}"};
    expect_parts("qwen2.5", &rad_chat_fmt_qwen25, 0,
                 "Sure.\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"q\": "
                 "\"<think>\"}}\n</tool_call><|im_end|>",
                 1, kinds, texts);
}

static void test_llama31(void **state)
{
    (void)state;
    static const int kinds[] = {C, T, END};
    static const char *const texts[] = {"Let me search.",
                                        "brave_search.call(query=\"weather in K\xc3\xb6ln\")"};
    expect_parts("llama3.1", &rad_chat_fmt_llama31, 0,
                 "Let me search.<|python_tag|>brave_search.call(query=\"weather in K\xc3\xb6ln\")<|eom_id|>",
                 1, kinds, texts);
}

static void test_llama3_plain(void **state)
{
    (void)state;
    static const int kinds[] = {C, END};
    static const char *const texts[] = {"Hi! <|start_header_id> is not a marker here \xf0\x9f\x91\x8b"};
    expect_parts("llama3", &rad_chat_fmt_llama3, 0,
                 "Hi! <|start_header_id> is not a marker here \xf0\x9f\x91\x8b<|eot_id|>", 1, kinds, texts);
}

static void test_gemma(void **state)
{
    (void)state;
    static const int kinds[] = {C, END};
    static const char *const texts[] = {
        "Hello <b>there</b> <end_of_tur\n\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "};
    expect_parts("gemma", &rad_chat_fmt_gemma, 0,
                 "Hello <b>there</b> <end_of_tur\n\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e <end_of_turn>more", 1,
                 kinds, texts);
}

static void test_llama2(void **state)
{
    (void)state;
    static const int kinds[] = {C, END};
    static const char *const texts[] = {" Hi there! [INST] stays text."};
    expect_parts("llama2", &rad_chat_fmt_llama2, 0, " Hi there! [INST] stays text.</s>", 1, kinds, texts);
}

static void test_mistral(void **state)
{
    (void)state;
    static const int kinds[] = {C, T, END};
    static const char *const texts[] = {"Calling.", "[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]"};
    expect_parts("mistral", &rad_chat_fmt_mistral, 0,
                 "Calling.[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}]</s>", 1, kinds, texts);
    /* The stop token is often not fed at all: the call ends with the reply. */
    expect_parts("mistral unclosed", &rad_chat_fmt_mistral, 0,
                 "Calling.[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", 0, kinds, texts);
}

static void test_harmony_tool(void **state)
{
    (void)state;
    static const int kinds[] = {R, T, END};
    static const char *const texts[] = {
        "Need the weather in S\xc3\xa3o Paulo.",
        "{\"name\": \"get_weather\", \"arguments\": {\"city\":\"S\xc3\xa3o Paulo\"}}"};
    expect_parts(
        "gpt-oss tool", &rad_chat_fmt_harmony, 0,
        "<|channel|>analysis<|message|>Need the weather in S\xc3\xa3o Paulo.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        "{\"city\":\"S\xc3\xa3o Paulo\"}<|call|>",
        1, kinds, texts);
}

static void test_harmony_final(void **state)
{
    (void)state;
    static const int kinds[] = {R, C, END};
    static const char *const texts[] = {"Think: 6*7.", "Answer: 42 \xe2\x9c\x93 (<|ch is text)"};
    expect_parts(
        "gpt-oss final", &rad_chat_fmt_harmony, 0,
        "<|channel|>analysis<|message|>Think: 6*7.<|end|><|start|>assistant<|channel|>final<|message|>"
        "Answer: 42 \xe2\x9c\x93 (<|ch is text)<|return|>",
        1, kinds, texts);
    /* The recipient may sit in the role part of the header. */
    static const int kinds2[] = {T, END};
    static const char *const texts2[] = {"{\"name\": \"lookup\", \"arguments\": {}}"};
    expect_parts("gpt-oss recipient first", &rad_chat_fmt_harmony, 0,
                 " to=functions.lookup<|channel|>commentary json<|message|><|call|>", 1, kinds2, texts2);
}

static void test_deepseek_r1(void **state)
{
    (void)state;
    static const int kinds[] = {R, C, T, T, END};
    static const char *const texts[] = {"Hmm, weather.", "Checking.",
                                        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
                                        "{\"name\": \"get_time\", \"arguments\": {}}"};
    expect_parts(
        "deepseek-r1", &rad_chat_fmt_deepseek_r1, 1,
        "Hmm, "
        "weather.\n</think>\n\nChecking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
        "get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function"
        "<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><"
        "｜end▁of▁sentence｜>",
        1, kinds, texts);
}

static void test_deepseek_v3(void **state)
{
    (void)state;
    static const int kinds[] = {C, END};
    static const char *const texts[] = {"No <think> here: V3 does not reason."};
    expect_parts("deepseek-v3", &rad_chat_fmt_deepseek_v3, 0,
                 "No <think> here: V3 does not reason.<｜end▁of▁sentence｜>", 1, kinds, texts);
}

/* GLM-4.5: the reply opens "\n<think>"; the think block and the text after
** it, its tool call, and the next turn's marker ends the reply. */
static void test_glm45(void **state)
{
    (void)state;
    static const int kinds[] = {R, C, T, END};
    static const char *const texts[] = {"Two plus two.", "4.", "add\n<arg_key>a</arg_key>"};
    expect_parts("glm4.5", &rad_chat_fmt_glm45, 0,
                 "\n<think>Two plus two.</think>\n4.<tool_call>add\n<arg_key>a</arg_key></tool_call><|user|>\n",
                 1, kinds, texts);
}

/* ------------------------------------------------------------ one rule each */

/* Text that starts like a marker but is not one stays content, even when
** the lookalike is cut off by the end of the reply. */
static void test_false_prefixes(void **state)
{
    (void)state;
    const char *reply = "a <thinker> b </thin c <tool d <|im_en e <|im_end";
    static const int kinds[] = {C, END};
    const char *const texts[] = {reply};
    expect_parts("false prefixes", &rad_chat_fmt_qwen3, 0, reply, 0, kinds, texts);
}

/* A reply that ends inside reasoning is reasoning (its trailing white space
** dropped as the close would); one that ends inside a tool call is a call. */
static void test_unfinished_blocks(void **state)
{
    (void)state;
    static const int kinds[] = {C, R, END};
    static const char *const texts[] = {"Intro ", "Still thinking about \xe6\x97\xa5\xe6\x9c\xac"};
    expect_parts("ends in reasoning", &rad_chat_fmt_qwen3, 0,
                 "Intro <think>\nStill thinking about \xe6\x97\xa5\xe6\x9c\xac  \n", 0, kinds, texts);
    static const int kinds2[] = {R, END};
    static const char *const texts2[] = {"only thoughts"};
    expect_parts("r1 ends in reasoning", &rad_chat_fmt_deepseek_r1, 1, "\nonly thoughts\n", 0, kinds2,
                 texts2);
    static const int kinds3[] = {T, END};
    static const char *const texts3[] = {"{\"name\": \"x\""};
    expect_parts("ends in tool call", &rad_chat_fmt_qwen3, 0, "<tool_call>\n{\"name\": \"x\"", 0, kinds3,
                 texts3);
}

/* White space inside reasoning survives; only its ends go. */
static void test_reasoning_whitespace(void **state)
{
    (void)state;
    static const int kinds[] = {R, C, END};
    static const char *const texts[] = {"one  \n\n  two", "three \n"};
    expect_parts("reasoning white space", &rad_chat_fmt_qwen3, 0,
                 "<think> \n one  \n\n  two \n</think> \n three \n", 0, kinds, texts);
}

/* UTF-8 cut inside characters, fed one byte at a time: pieces are whole
** characters (check_splits checks every emit). */
static void test_utf8_pieces(void **state)
{
    (void)state;
    const char *reply = "\xf0\x9f\x99\x82\xe6\x97\xa5\xc3\xa9<think>\xf0\x9f\xa4\x94</think>\xe2\x9c\x93";
    static const int kinds[] = {C, R, C, END};
    static const char *const texts[] = {"\xf0\x9f\x99\x82\xe6\x97\xa5\xc3\xa9", "\xf0\x9f\xa4\x94",
                                        "\xe2\x9c\x93"};
    expect_parts("utf-8", &rad_chat_fmt_qwen3, 0, reply, 0, kinds, texts);
}

/* Emits arrive as soon as they cannot be a marker: only a marker's possible
** start is held back. */
static void test_holds_back_only_prefixes(void **state)
{
    (void)state;
    Parts ps;
    memset(&ps, 0, sizeof ps);
    RadReplyParser *p = rad_reply_parser_new(&rad_chat_fmt_qwen3, 0);
    assert_int_equal(rad_reply_parser_feed(p, "Hello <thi", 10, collect, &ps), 0);
    assert_int_equal(ps.n, 1);
    assert_string_equal(ps.part[0].text, "Hello ");
    assert_int_equal(rad_reply_parser_feed(p, "s", 1, collect, &ps), 0);
    assert_string_equal(ps.part[0].text, "Hello <this");
    assert_int_equal(rad_reply_parser_feed(p, " \xe6\x97", 3, collect, &ps), 0);
    assert_string_equal(ps.part[0].text, "Hello <this "); /* half a character waits */
    assert_int_equal(rad_reply_parser_feed(p, "\xa5<|im_end|>tail", 15, collect, &ps), 1);
    assert_string_equal(ps.part[0].text, "Hello <this \xe6\x97\xa5");
    assert_int_equal(rad_reply_parser_feed(p, "more", 4, collect, &ps), 1);
    rad_reply_parser_finish(p, collect, &ps);
    assert_int_equal(ps.n, 1);
    assert_string_equal(ps.part[0].text, "Hello <this \xe6\x97\xa5");
    rad_reply_parser_free(p);
}

static void test_needs_a_format(void **state)
{
    (void)state;
    assert_null(rad_reply_parser_new(NULL, 0));
    assert_null(rad_reply_parser_new(rad_chat_choose_llama(), 0)); /* a chooser is not a format */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_qwen3_no_think),
        cmocka_unit_test(test_qwen25),
        cmocka_unit_test(test_llama31),
        cmocka_unit_test(test_llama3_plain),
        cmocka_unit_test(test_gemma),
        cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_harmony_tool),
        cmocka_unit_test(test_harmony_final),
        cmocka_unit_test(test_deepseek_r1),
        cmocka_unit_test(test_deepseek_v3),
        cmocka_unit_test(test_glm45),
        cmocka_unit_test(test_false_prefixes),
        cmocka_unit_test(test_unfinished_blocks),
        cmocka_unit_test(test_reasoning_whitespace),
        cmocka_unit_test(test_utf8_pieces),
        cmocka_unit_test(test_holds_back_only_prefixes),
        cmocka_unit_test(test_needs_a_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
