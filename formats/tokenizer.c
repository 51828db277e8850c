/*
** tokenizer.c: owning and freeing the tokenizer data of tokenizer.h.
**
** Import (tokenizer_json.c, tokenizer_gguf.c) and storage (tokenizer_store.c)
** live beside this file; here is only what every producer shares.
*/
#include "tokenizer.h"

#include <stdlib.h>

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
    free(t);
}
