/*
** chat_select.c: which chat format a model gets, and which tokens end its
** replies.
**
** A plugin knows its model family but sees only the container's metadata;
** the vocabulary and the chat template the model carries are the engine's
** (the tokenizer).  So a plugin serving several model lines names rules
** (RadChatChoice: tokens the vocabulary must hold, a string the template
** must contain) and this file applies them to the model's tokenizer.  The
** file name of the model is never looked at.
**
** Both questions come down to "is this text one token of the vocabulary":
** an added token with exactly that content, or else text that the tokenizer
** turns into a single id whose decoding gives the text back.
*/
#include <stdlib.h>
#include <string.h>

#include "rad_chat.h"
#include "rad_text.h"

/* The id of the single token whose text is s, or -1. */
static int32_t single_token(const RadText *text, const char *s)
{
    const RadTokenizer *t = rad_text_data(text);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].content && !strcmp(t->added[i].content, s)) return t->added[i].id;
    int32_t *ids = NULL, id = -1;
    int n = 0;
    if (rad_text_encode(text, s, strlen(s), RAD_ENCODE_PARSE_SPECIAL, &ids, &n) == RAD_OK && n == 1) {
        char *back = NULL;
        size_t len = 0;
        if (rad_text_decode(text, ids, 1, 0, &back, &len) == RAD_OK && len == strlen(s) &&
            !memcmp(back, s, len))
            id = ids[0];
        free(back);
    }
    free(ids);
    return id;
}

static int holds_tokens(const RadText *text, const char *const *tokens)
{
    if (!tokens) return 1;
    if (!text) return 0;
    for (; *tokens; tokens++)
        if (single_token(text, *tokens) < 0) return 0;
    return 1;
}

const RadChatFormat *rad_chat_format_resolve(const RadChatFormat *f, const RadText *text)
{
    if (!f || !f->choices) return f;
    const char *tmpl = text ? rad_text_data(text)->chat_template : NULL;
    /* A rule with a template mark is more specific than the vocabulary
    ** alone, so all of those are tried before any rule without one. */
    for (const RadChatChoice *c = f->choices; c->format; c++)
        if (c->template_mark && tmpl && strstr(tmpl, c->template_mark) && holds_tokens(text, c->tokens))
            return c->format;
    for (const RadChatChoice *c = f->choices; c->format; c++)
        if (!c->template_mark && holds_tokens(text, c->tokens)) return c->format;
    return NULL;
}

int rad_chat_stop_ids(const RadChatFormat *f, const RadText *text, int *ids, int max)
{
    int n = 0;
    if (!text || max <= 0) return 0;
    int32_t eos = rad_text_data(text)->eos_id;
    for (const char *const *s = f && !f->choices ? f->stop_strings : NULL; s && *s && n < max; s++) {
        int32_t id = single_token(text, *s);
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= ids[i] == id;
        if (id >= 0 && !dup) ids[n++] = id;
    }
    int dup = 0;
    for (int i = 0; i < n; i++) dup |= ids[i] == eos;
    if (eos >= 0 && !dup && n < max) ids[n++] = eos;
    return n;
}

int rad_chat_prompt_in_reasoning(const RadChatFormat *f, const char *prompt)
{
    if (!f || !prompt || !f->reasoning_open || !f->reasoning_close || f->style == RAD_CHAT_STYLE_HARMONY)
        return 0;
    const char *open = NULL;
    for (const char *p = strstr(prompt, f->reasoning_open); p; p = strstr(p + 1, f->reasoning_open)) open = p;
    return open && !strstr(open + strlen(f->reasoning_open), f->reasoning_close);
}
