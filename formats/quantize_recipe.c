/*
** quantize_recipe.c: which encoding each tensor gets under llama.cpp's
** mixed recipes (quantize_recipe.h says why and where the facts come from).
**
** The rules, for a dense model without an importance matrix (n layers,
** layer i; "more bits" is use_more_bits(i, n): i < n/8, i >= 7n/8, or
** (i - n/8) % 3 == 2):
**
**   tensor             q4_k_m          q4_k_s          q5_k_m          q5_k_s   q6_k
**   default            q4_k            q4_k            q5_k            q5_k     q6_k
**   output head        q6_k            q6_k            q6_k            q6_k     q6_k
**   attn_v             q6_k more bits  q5_k if i < 4   q6_k more bits  -        -
**   ffn_down           q6_k more bits  q5_k if i < n/8 q6_k more bits  -        -
**   attn_qkv (fused)   q5_k            -               q6_k            -        -
**
** The output head is output.weight, or token_embd.weight when the head is
** tied to it; a head whose rows do not divide into 256 is q8_0.  With 8
** experts llama.cpp also gives attn_v and attn_k q8_0 and, under the q4_k
** recipes, attn_output q5_k.  Then the fallback for rows a block does not
** divide: q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, and f16 when even 32
** does not divide.
*/
#include "quantize_recipe.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rad_types.h"

typedef struct Recipe {
    const char *name;
    int dflt; /* RadEncoding */
} Recipe;

static const Recipe recipes[] = {
    {"q4_k_m", RAD_ENC_Q4_K}, {"q4_k_s", RAD_ENC_Q4_K}, {"q5_k_m", RAD_ENC_Q5_K},
    {"q5_k_s", RAD_ENC_Q5_K}, {"q6_k", RAD_ENC_Q6_K},
};

static const Recipe *find(const char *name)
{
    for (size_t i = 0; name && i < sizeof recipes / sizeof *recipes; i++)
        if (strcasecmp(name, recipes[i].name) == 0) return &recipes[i];
    return NULL;
}

const char *rad_quant_recipe_name(const char *name)
{
    const Recipe *r = find(name);
    return r ? r->name : NULL;
}

static int more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* "blk.12.ffn_down.weight" ends in kind ".ffn_down.weight"?  And its layer. */
static int is_kind(const char *name, const char *kind)
{
    size_t n = strlen(name), k = strlen(kind);
    return n > k && strcmp(name + n - k, kind) == 0 && name[n - k - 1] == '.';
}

static int layer_of(const char *name)
{
    int layer = -1;
    return sscanf(name, "blk.%d.", &layer) == 1 ? layer : -1;
}

static int block_of(int enc)
{
    const RadEncodingInfo *e = rad_encoding_info(enc);
    return e ? e->block_elems : 1;
}

/* llama.cpp's tensor_type_fallback. */
static int fallback(int enc, int64_t cols)
{
    if (cols % block_of(enc) == 0) return enc;
    switch (enc) {
    case RAD_ENC_Q4_K: enc = RAD_ENC_Q5_0; break;
    case RAD_ENC_Q5_K: enc = RAD_ENC_Q5_1; break;
    case RAD_ENC_Q6_K: enc = RAD_ENC_Q8_0; break;
    default: break;
    }
    return cols % block_of(enc) == 0 ? enc : RAD_ENC_F16;
}

int rad_quant_recipe_enc(const char *name, const RadRecipeTensor *t)
{
    const Recipe *r = find(name);
    if (!r || t->rank < 2 || strstr(t->name, "ffn_gate_inp")) return RAD_ENC_F32;
    const int m = !strcmp(r->name, "q4_k_m") || !strcmp(r->name, "q5_k_m");
    const int q4s = !strcmp(r->name, "q4_k_s"), q4 = r->dflt == RAD_ENC_Q4_K;
    const int i = layer_of(t->name), n = t->n_layers;
    int enc = r->dflt;
    int head = !strcmp(t->name, "output.weight") || (t->head_tied && !strcmp(t->name, "token_embd.weight"));
    if (head) {
        /* decided on the default's block, then the fallback as for any */
        return fallback(t->cols % block_of(r->dflt) ? RAD_ENC_Q8_0 : RAD_ENC_Q6_K, t->cols);
    }
    if (is_kind(t->name, "attn_v.weight")) {
        if (m && i >= 0 && more_bits(i, n)) enc = RAD_ENC_Q6_K;
        else if (q4s && i >= 0 && i < 4) enc = RAD_ENC_Q5_K;
        if (t->n_expert == 8) enc = RAD_ENC_Q8_0;
    } else if (is_kind(t->name, "attn_k.weight")) {
        if (t->n_expert == 8) enc = RAD_ENC_Q8_0;
    } else if (is_kind(t->name, "ffn_down.weight") || is_kind(t->name, "ffn_down_exps.weight")) {
        if (m && i >= 0 && more_bits(i, n)) enc = RAD_ENC_Q6_K;
        else if (q4s && i >= 0 && i < n / 8) enc = RAD_ENC_Q5_K;
    } else if (is_kind(t->name, "attn_output.weight")) {
        if (t->n_expert == 8 && q4) enc = RAD_ENC_Q5_K;
    } else if (is_kind(t->name, "attn_qkv.weight")) {
        if (!strcmp(r->name, "q4_k_m")) enc = RAD_ENC_Q5_K;
        else if (!strcmp(r->name, "q5_k_m")) enc = RAD_ENC_Q6_K;
    }
    return fallback(enc, t->cols);
}
