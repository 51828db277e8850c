/*
** tokenizer.c: owning, freeing and checking the tokenizer data of
** tokenizer.h.
**
** Import (tokenizer_json.c, tokenizer_gguf.c) and storage (tokenizer_store.c)
** live beside this file; here is only what every producer shares: freeing,
** and the check that the strings used as text are UTF-8 (and the chat
** template within its limit).
*/
#include "tokenizer.h"
#include "rad_limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static void free_steps(RadTokStep *steps, int n)
{
    for (int i = 0; i < n; i++) {
        free(steps[i].pattern);
        free(steps[i].arg);
    }
    free(steps);
}

void rad_tokenizer_free(RadTokenizer *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_vocab && t->token && !t->pool; i++) free(t->token[i]);
    free(t->token);
    free(t->score);
    for (int i = 0; i < t->n_merges && !t->pool; i++) {
        free(t->merge_left ? t->merge_left[i] : NULL);
        free(t->merge_right ? t->merge_right[i] : NULL);
    }
    free(t->merge_left);
    free(t->merge_right);
    free_steps(t->norm, t->n_norm);
    free_steps(t->pre, t->n_pre);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    free(t->chat_template);
    free(t->merge_ids);
    free(t->pool);
    free(t->source);
    free(t);
}

/* The offset of the first ill-formed byte of s, or -1 when it is valid
** UTF-8 (utf8proc's rule: no overlong forms, no surrogates, nothing past
** U+10FFFF, which is PCRE2's too). */
static long bad_utf8_at(const char *s)
{
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    size_t n = strlen(s), at = 0;
    while (at < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + at, (utf8proc_ssize_t)(n - at), &cp);
        if (k <= 0) return (long)at;
        at += (size_t)k;
    }
    return -1;
}

static int not_utf8(const char *name, const char *field, const char *s, long at)
{
    return rad_error_set(RAD_E_FORMAT,
                         "%s: %s is not valid UTF-8 (byte 0x%02x at offset %ld): the file is damaged or "
                         "hostile; convert or download the model again",
                         name, field, (unsigned char)s[at], at);
}

static int check_steps(const RadTokStep *steps, int n, const char *kind, const char *name)
{
    char field[96];
    long at;
    for (int i = 0; steps && i < n; i++) {
        if (steps[i].pattern && (at = bad_utf8_at(steps[i].pattern)) >= 0) {
            snprintf(field, sizeof field, "%s step %d: its pattern", kind, i);
            return not_utf8(name, field, steps[i].pattern, at);
        }
        if (steps[i].arg && (at = bad_utf8_at(steps[i].arg)) >= 0) {
            snprintf(field, sizeof field, "%s step %d: its %s", kind, i,
                     steps[i].kind == RAD_TOK_NORM_PREPEND ? "prepend text" : "replacement");
            return not_utf8(name, field, steps[i].arg, at);
        }
    }
    return RAD_OK;
}

int rad_tokenizer_check_text(const RadTokenizer *t, const char *name)
{
    char field[96];
    long at;
    int rc;
    if (!t) return RAD_OK;
    if (!name) name = "tokenizer";
    if ((rc = check_steps(t->norm, t->n_norm, "normalizer", name)) ||
        (rc = check_steps(t->pre, t->n_pre, "pre_tokenizer", name)))
        return rc;
    for (int i = 0; t->added && i < t->n_added; i++)
        if (t->added[i].content && (at = bad_utf8_at(t->added[i].content)) >= 0) {
            snprintf(field, sizeof field, "added token %d (id %d): its content", i, (int)t->added[i].id);
            return not_utf8(name, field, t->added[i].content, at);
        }
    if (t->chat_template && (rc = rad_tokenizer_check_template_size(strlen(t->chat_template), name)))
        return rc;
    if (t->chat_template && (at = bad_utf8_at(t->chat_template)) >= 0)
        return not_utf8(name, "the chat template", t->chat_template, at);
    return RAD_OK;
}

int rad_tokenizer_check_template_size(size_t len, const char *name)
{
    if (len <= RAD_LIMIT_CHAT_TEMPLATE_BYTES) return RAD_OK;
    return rad_error_set(RAD_E_FORMAT, "%s: the chat template is %zu bytes, over the limit of %u bytes "
                         "(RAD_LIMIT_CHAT_TEMPLATE_BYTES): the file is damaged or hostile; convert or download "
                         "the model again", name ? name : "tokenizer", len, RAD_LIMIT_CHAT_TEMPLATE_BYTES);
}
