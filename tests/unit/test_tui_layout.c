/*
** test_tui_layout.c: the chat TUI's layout code, without a terminal:
** word wrap by display width (ASCII, CJK, emoji, combining marks, control
** characters), the markdown renderer's styles, code-block lookup for /copy,
** and the property that makes streaming calm: rendering a reply as it
** arrives only ever adds lines at the bottom (lines already shown keep their
** text), checked at every byte boundary of a realistic reply.
**
** The app's layout files have no terminal dependency, so they are compiled
** straight into this test.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../app/term_safe.c"
#include "../../app/tui/tui_text.c"
#include "../../app/tui/tui_markdown.c"
#include "../../app/tui/tui_transcript.c"

static RadRich rich(const char *s)
{
    RadRich r = {0};
    rad_rich_adds(&r, 0, s);
    return r;
}

static void wrap_words(RadLines *out, const char *s, int width)
{
    RadRich body = rich(s);
    rad_wrap(out, NULL, NULL, &body, width, RAD_WRAP_WORD);
    rad_rich_free(&body);
}

static void test_wrap_ascii(void **state)
{
    (void)state;
    RadLines l = {0};
    wrap_words(&l, "hello world foo", 11);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.v[0].text, "hello world");
    assert_string_equal(l.v[1].text, "foo");
    rad_lines_clear(&l);
    wrap_words(&l, "abcdefghijkl", 5);      /* no space: cut by width */
    assert_int_equal(l.n, 3);
    assert_string_equal(l.v[2].text, "kl");
    rad_lines_free(&l);
}

static void test_wrap_wide(void **state)
{
    (void)state;
    RadLines l = {0};
    /* 8 CJK characters, 2 columns each: breaks between any two of them */
    wrap_words(&l, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88", 11);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[0].width, 10);     /* 5 characters; a sixth would need column 12 */
    assert_int_equal(l.v[1].width, 6);
    rad_lines_clear(&l);
    /* emoji are wide too */
    wrap_words(&l, "\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80", 5);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[0].width, 4);
    assert_int_equal(l.v[1].width, 2);
    rad_lines_clear(&l);
    /* a combining acute accent rides on its letter: "e\u0301" is one column */
    wrap_words(&l, "e\xcc\x81", 10);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.v[0].width, 1);
    assert_string_equal(l.v[0].text, "e\xcc\x81");
    rad_lines_free(&l);
}

static void test_wrap_sanitizes(void **state)
{
    (void)state;
    RadLines l = {0};
    wrap_words(&l, "a\033[31mb\x01\xff" "c\td", 40);
    assert_int_equal(l.n, 1);
    assert_null(strchr(l.v[0].text, '\033'));
    assert_null(strchr(l.v[0].text, '\x01'));
    assert_null(strchr(l.v[0].text, '\t'));
    /* ESC, ^A and the invalid byte each become their visible escape, as
    ** `run` on a terminal prints them (term_safe.c); the tab pads to column 20 */
    assert_non_null(strstr(l.v[0].text, "a\\x1b[31mb\\x01\\xffc"));
    assert_int_equal(l.v[0].width, 1 + 4 + 5 + 4 + 4 + 1 + 1 + 1);
    rad_lines_free(&l);
}

/* The text of out's lines joined with '\n' (styles dropped). */
static char *lines_text(const RadLines *l, int from, int to)
{
    size_t cap = 16;
    for (int i = from; i < to; i++) cap += strlen(l->v[i].text) + 1;
    char *s = malloc(cap), *p = s;
    *p = 0;
    for (int i = from; i < to; i++) p += sprintf(p, "%s\n", l->v[i].text);
    return s;
}

static RadMdOptions md_opts(int width, int final)
{
    RadMdOptions o = {0};
    o.width = width;
    o.final = final;
    o.code_base = 1;
    o.indent = "  ";
    return o;
}

static void test_markdown_styles(void **state)
{
    (void)state;
    const char *md = "# Title\n"
                     "Some **bold** and `code` here.\n"
                     "- one\n"
                     "- two\n"
                     "> quoted\n"
                     "```python\n"
                     "def f():\n"
                     "    return 1\n"
                     "```\n";
    RadLines l = {0};
    RadMdOptions o = md_opts(60, 1);
    int blocks = rad_md_render(&l, md, strlen(md), &o);
    assert_int_equal(blocks, 1);
    char *text = lines_text(&l, 0, l.n);
    assert_string_equal(text, "  # Title\n"
                              "  Some bold and code here.\n"
                              "  \xe2\x80\xa2 one\n"
                              "  \xe2\x80\xa2 two\n"
                              "  \xe2\x94\x82 quoted\n"
                              "  \xe2\x94\x8c [1] python\n"
                              "  \xe2\x94\x82 def f():\n"
                              "  \xe2\x94\x82     return 1\n"
                              "  \xe2\x94\x94\n");
    free(text);
    /* "bold" is bold; "def" (a python keyword) is highlighted once closed */
    int saw_bold = 0, saw_keyword = 0;
    for (int i = 0; i < l.n; i++)
        for (int k = 0; k < l.v[i].n_spans; k++) {
            const RadSpan *sp = &l.v[i].spans[k];
            if (!strncmp(l.v[i].text + sp->off, "bold", 4) && (RAD_STYLE_ATTRS(sp->style) & RAD_ST_BOLD)) saw_bold = 1;
            if (!strncmp(l.v[i].text + sp->off, "def", 3) && RAD_STYLE_ROLE(sp->style) == RAD_ROLE_KEYWORD) saw_keyword = 1;
        }
    assert_true(saw_bold);
    assert_true(saw_keyword);
    rad_lines_free(&l);

    char *code = NULL, *lang = NULL;
    assert_int_equal(rad_md_code_block(md, strlen(md), 0, &code, &lang), 0);
    assert_string_equal(code, "def f():\n    return 1\n");
    assert_string_equal(lang, "python");
    free(code);
    free(lang);
    assert_int_equal(rad_md_code_block(md, strlen(md), 1, &code, NULL), -1);
}

/* A reply that streams in: at every byte, the lines of its complete source
** lines are a prefix (by text) of the final rendering, and the lines of the
** whole prefix start with them. */
static void test_markdown_only_grows(void **state)
{
    (void)state;
    const char *reply =
        "Sure! Here is **a plan** with `code` and a [link](http://example.com):\n"
        "\n"
        "## Steps\n"
        "\n"
        "1. Install the *package* (it is ~~old~~ new).\n"
        "2. Run it:\n"
        "   ```sh\n"
        "   radiance chat model --temp 0\n"
        "   ```\n"
        "3. Read the output, which can be a rather long line that has to wrap over several rows of the terminal.\n"
        "\n"
        "> A quote with **emphasis**\n"
        "\n"
        "---\n"
        "| a | b |\n"
        "|---|---|\n"
        "| 1 | 2 |\n"
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 done.";
    size_t n = strlen(reply);
    for (int width = 20; width <= 80; width += 30) {
        RadLines full = {0};
        RadMdOptions fo = md_opts(width, 1);
        rad_md_render(&full, reply, n, &fo);
        char *full_text = lines_text(&full, 0, full.n);
        for (size_t k = 1; k <= n; k++) {
            if (((unsigned char)reply[k - 1] & 0xc0) == 0x80 && k < n && ((unsigned char)reply[k] & 0xc0) == 0x80) continue;
            size_t complete = k;
            while (complete > 0 && reply[complete - 1] != '\n') complete--;
            RadMdOptions so = md_opts(width, 0);
            RadLines done = {0}, part = {0};
            rad_md_render(&done, reply, complete, &so);
            rad_md_render(&part, reply, k, &so);
            char *done_text = lines_text(&done, 0, done.n);
            char *part_head = lines_text(&part, 0, done.n <= part.n ? done.n : part.n);
            if (strncmp(full_text, done_text, strlen(done_text)) != 0)
                fail_msg("width %d, %zu bytes: settled lines changed later:\n%s\n--- final:\n%s", width, k, done_text,
                         full_text);
            if (done.n > part.n || strcmp(done_text, part_head) != 0)
                fail_msg("width %d, %zu bytes: the partial line moved lines above it", width, k);
            free(done_text);
            free(part_head);
            rad_lines_free(&done);
            rad_lines_free(&part);
        }
        free(full_text);
        rad_lines_free(&full);
    }
}

static void test_transcript_numbers_code_blocks(void **state)
{
    (void)state;
    RadTranscript t = {0};
    rad_tr_add(&t, RAD_ENTRY_USER, "two blocks please");
    RadEntry *a = rad_tr_add(&t, RAD_ENTRY_ASSISTANT, "```c\nint x;\n```\ntext\n```\nplain\n```\n");
    rad_tr_add(&t, RAD_ENTRY_USER, "one more");
    rad_tr_add(&t, RAD_ENTRY_ASSISTANT, "```py\nprint(1)\n```");
    int total = rad_tr_layout(&t, 40);
    assert_true(total > 8);
    assert_int_equal(a->n_code, 2);
    assert_int_equal(rad_tr_code_count(&t), 3);
    char *lang = NULL, *code = rad_tr_code_block(&t, 3, &lang);
    assert_non_null(code);
    assert_string_equal(code, "print(1)\n");
    assert_string_equal(lang, "py");
    free(code);
    free(lang);
    /* the label shown is the number /copy takes */
    int found = 0;
    for (int i = 0; i < total; i++) found |= strstr(rad_tr_line(&t, i)->text, "[3] py") != NULL;
    assert_true(found);
    /* a narrower terminal re-wraps: more lines, none wider than it */
    int narrow = rad_tr_layout(&t, 12);
    assert_true(narrow >= total);
    for (int i = 0; i < narrow; i++) assert_true(rad_tr_line(&t, i)->width <= 12);
    rad_tr_free(&t);
}

/* Reasoning is one folded line (a live word count while it streams) until
** expanded; tool calls show as such; an interrupted reply says so. */
static void test_reasoning_and_tools(void **state)
{
    (void)state;
    RadTranscript t = {0};
    RadEntry *e = rad_tr_add(&t, RAD_ENTRY_ASSISTANT, NULL);
    e->streaming = 1;
    rad_buf_adds(&e->reasoning, "First I add the numbers, then I check the sum.");
    int n = rad_tr_layout(&t, 60);
    assert_int_equal(n, 1);
    assert_non_null(strstr(rad_tr_line(&t, 0)->text, "thinking"));
    assert_non_null(strstr(rad_tr_line(&t, 0)->text, "10 words"));
    t.view |= RAD_VIEW_THINKING;
    n = rad_tr_layout(&t, 60);
    assert_int_equal(n, 2);
    assert_non_null(strstr(rad_tr_line(&t, 1)->text, "First I add the numbers"));
    assert_int_not_equal(RAD_STYLE_ATTRS(rad_tr_line(&t, 1)->spans[rad_tr_line(&t, 1)->n_spans - 1].style) & RAD_ST_DIM, 0);
    t.view = 0;
    e->streaming = 0;
    rad_buf_adds(&e->text, "The sum is 5.");
    rad_buf_adds(&e->tools, "{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}");
    e->n_tools = 1;
    e->interrupted = 1;
    rad_tr_touch(e);
    n = rad_tr_layout(&t, 60);
    char *text = lines_text(&e->lines, 0, e->lines.n);
    assert_non_null(strstr(text, "thought (10 words"));
    assert_non_null(strstr(text, "The sum is 5."));
    assert_non_null(strstr(text, "tool call"));
    assert_non_null(strstr(text, "\"name\": \"add\""));
    assert_non_null(strstr(text, "interrupted"));
    assert_null(strstr(text, "First I add"));
    free(text);
    rad_tr_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrap_ascii),
        cmocka_unit_test(test_wrap_wide),
        cmocka_unit_test(test_wrap_sanitizes),
        cmocka_unit_test(test_markdown_styles),
        cmocka_unit_test(test_markdown_only_grows),
        cmocka_unit_test(test_transcript_numbers_code_blocks),
        cmocka_unit_test(test_reasoning_and_tools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
