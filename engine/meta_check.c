/*
** meta_check.c: a model's metadata checked before anything is built from it.
**
** Every number a plugin turns into a table size, a loop bound or an op
** parameter comes from a file a stranger wrote.  These checks run when a
** model is opened (rad_engine_open, `radiance show`) and when one is
** converted, before the plugin declares anything, so a bad value is one
** line naming the key and the file, with the "malformed model" code
** (RAD_E_FORMAT, exit 4), instead of a hang, a mid-run failure with the
** wrong code, or an answer of nothing.  What is checked:
**
**   - the canonical sizes: whole numbers, above zero where the model needs
**     them, at most RAD_LIMIT_META_INT; n_head a multiple of n_head_kv;
**   - the layer count: at most RAD_LIMIT_LAYERS, and exactly the layers the
**     file holds tensors for (a container's tensor groups are its layers;
**     the experts' units, from RAD_GROUP_EXPERTS up, are not counted),
**     so 100,000 declared layers over a file of two are refused at once and
**     tensors of layers past the count are never silently dropped;
**   - RMSNorm's epsilon (finite, above zero, at most RAD_LIMIT_RMS_EPS_MAX),
**     every RoPE base frequency and scaling factor (finite, above zero):
**     the values the kernels refuse at the first step;
**   - the tokenizer's vocabulary against the embedding's rows.
**
** The limits are base/rad_limits.h's; docs/LIMITS.md lists them.
*/
#include "engine_internal.h"
#include "rad_limits.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* How a message names a canonical key: the GGUF key a GGUF file spells it
** with, else the canonical key and the config.json key it came from. */
static const struct {
    const char *key, *gguf, *hf;
} names[] = {
    {"model.n_layers", "block_count", "num_hidden_layers"},
    {"model.n_embd", "embedding_length", "hidden_size"},
    {"model.n_head", "attention.head_count", "num_attention_heads"},
    {"model.n_head_kv", "attention.head_count_kv", "num_key_value_heads"},
    {"model.head_dim", "attention.key_length", "head_dim"},
    {"model.n_ff", "feed_forward_length", "intermediate_size"},
    {"model.n_vocab", "vocab_size (the rows of token_embd.weight)", "vocab_size"},
    {"model.n_ctx_train", "context_length", "max_position_embeddings"},
    {"model.n_expert", "expert_count", "num_experts"},
    {"model.n_expert_used", "expert_used_count", "num_experts_per_tok"},
    {"model.rms_eps", "attention.layer_norm_rms_epsilon", "rms_norm_eps"},
    {"model.rope_theta", "rope.freq_base", "rope_theta"},
};

static void field_name(const RadModelMeta *m, const char *key, char *buf, size_t len)
{
    const char *gguf_arch = rad_meta_gets(m, "arch.gguf", NULL);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (strcmp(names[i].key, key) != 0) continue;
        if (gguf_arch) snprintf(buf, len, "%s.%s", gguf_arch, names[i].gguf);
        else snprintf(buf, len, "%s (%s in config.json)", key, names[i].hf);
        return;
    }
    /* a GGUF key as the GGUF spells it, without the "gguf." of its copy */
    snprintf(buf, len, "%s", strncmp(key, "gguf.", 5) == 0 ? key + 5 : key);
}

static int bad(const RadModelMeta *m, const char *path, const char *key, const char *fmt, double v)
{
    char field[160], value[64];
    field_name(m, key, field, sizeof field);
    if (v == floor(v) && fabs(v) < 1e18) snprintf(value, sizeof value, "%lld", (long long)v);
    else snprintf(value, sizeof value, "%g", v);
    return rad_error_set(RAD_E_FORMAT, "%s: metadata %s = %s: %s", path, field, value, fmt);
}

static const RadMetaKV *find(const RadModelMeta *m, const char *key)
{
    for (int i = 0; i < m->n_kv; i++)
        if (strcmp(m->kv[i].key, key) == 0) return &m->kv[i];
    return NULL;
}

/* Whether a free-form key is a RoPE base frequency or scaling factor, which
** the rope op takes as a parameter and refuses at or below zero. */
static int is_rope_positive(const char *key)
{
    if (!strstr(key, "rope")) return 0;
    const char *last = strrchr(key, '.');
    last = last ? last + 1 : key;
    static const char *const exact[] = {"factor", "low_freq_factor", "high_freq_factor", "rope_theta",
                                        "freq_base", "freq_base_swa", "rope_local_base_freq",
                                        "original_max_position_embeddings"};
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
        if (strcmp(last, exact[i]) == 0) return 1;
    return 0;
}

int rad_meta_check(const RadModelMeta *m, const char *path)
{
    struct { const char *key; int v, least; } ints[] = {
        {"model.n_layers", m->n_layers, 1},   {"model.n_embd", m->n_embd, 1},
        {"model.n_head", m->n_head, 1},       {"model.n_head_kv", m->n_head_kv, 1},
        {"model.head_dim", m->head_dim, 1},   {"model.n_vocab", m->n_vocab, 1},
        {"model.n_ff", m->n_ff, 0},           {"model.n_ctx_train", m->n_ctx_train, 0},
        {"model.n_expert", m->n_expert, 0},   {"model.n_expert_used", m->n_expert_used, 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        const RadMetaKV *kv = find(m, ints[i].key);
        if (kv && kv->type == RAD_META_FLOAT && !(kv->f == floor(kv->f)))
            return bad(m, path, ints[i].key, "not a whole number: the file is damaged", kv->f);
        if (ints[i].v < ints[i].least)
            return bad(m, path, ints[i].key, "must be at least 1: the file is damaged", ints[i].v);
    }
    if (m->n_layers > RAD_LIMIT_LAYERS) {
        char field[160];
        field_name(m, "model.n_layers", field, sizeof field);
        return rad_error_set(RAD_E_FORMAT, "%s: metadata %s = %d, over the limit of %d layers "
                             "(RAD_LIMIT_LAYERS): the file is damaged or hostile", path, field, m->n_layers,
                             RAD_LIMIT_LAYERS);
    }
    if (m->n_head % m->n_head_kv)
        return bad(m, path, "model.n_head", "not a multiple of the KV heads: the file is damaged", m->n_head);
    if (m->n_expert_used > m->n_expert)
        return bad(m, path, "model.n_expert_used", "more than the experts: the file is damaged", m->n_expert_used);
    if (m->n_expert > RAD_LIMIT_ROUTED_EXPERTS) {
        char field[160];
        field_name(m, "model.n_expert", field, sizeof field);
        return rad_error_set(RAD_E_FORMAT, "%s: metadata %s = %d, over the limit of %d experts "
                             "(RAD_LIMIT_ROUTED_EXPERTS): the router kernels choose among at most that many",
                             path, field, m->n_expert, RAD_LIMIT_ROUTED_EXPERTS);
    }
    if (!(m->rms_eps > 0) || !(m->rms_eps <= RAD_LIMIT_RMS_EPS_MAX)) {
        char field[160];
        field_name(m, "model.rms_eps", field, sizeof field);
        return rad_error_set(RAD_E_FORMAT, "%s: metadata %s = %g: RMSNorm's epsilon must be above 0 and at "
                             "most %g (RAD_LIMIT_RMS_EPS_MAX): the file is damaged", path, field,
                             m->rms_eps, RAD_LIMIT_RMS_EPS_MAX);
    }
    if (!(m->rope_theta > 0) || !(m->rope_theta <= FLT_MAX))
        return bad(m, path, "model.rope_theta", "RoPE's base frequency must be above 0: the file is damaged",
                   m->rope_theta);
    for (int i = 0; i < m->n_kv; i++) {
        const RadMetaKV *kv = &m->kv[i];
        if (kv->type == RAD_META_STRING || !is_rope_positive(kv->key)) continue;
        if (!(kv->f > 0) || !(kv->f <= FLT_MAX))
            return bad(m, path, kv->key, "a RoPE frequency or factor must be above 0: the file is damaged", kv->f);
    }
    return RAD_OK;
}

int rad_meta_check_layers(const RadModelMeta *m, const RadContainer *c, const char *path)
{
    int found = 0;      /* layers the file holds tensors for: its groups */
    const char *last = NULL;
    for (int i = 0; i < c->n_tensors; i++)
        if (c->tensors[i].group != RAD_GROUP_NONE && c->tensors[i].group < RAD_GROUP_EXPERTS &&
            c->tensors[i].group + 1 > found) {
            found = c->tensors[i].group + 1;
            last = c->tensors[i].name;
        }
    char field[160];
    field_name(m, "model.n_layers", field, sizeof field);
    if (m->n_layers > found)
        return rad_error_set(RAD_E_FORMAT, "%s: metadata %s = %d, but the file holds tensors for %d layer%s: "
                             "the file is damaged or was edited; download or convert it again",
                             path, field, m->n_layers, found, found == 1 ? "" : "s");
    if (m->n_layers < found)
        return rad_error_set(RAD_E_FORMAT, "%s: metadata %s = %d, but the file holds tensors for %d layers "
                             "('%s'): they would be ignored; download or convert it again",
                             path, field, m->n_layers, found, last);
    return RAD_OK;
}

int rad_meta_check_vocab(const RadModelMeta *m, int text_vocab, const char *path)
{
    if (text_vocab <= m->n_vocab) return RAD_OK;
    char field[160];
    field_name(m, "model.n_vocab", field, sizeof field);
    return rad_error_set(RAD_E_FORMAT, "%s: the tokenizer has %d tokens, but the model's embedding has %d rows "
                         "(%s): ids past it cannot be run; the file is damaged or mixes two models",
                         path, text_vocab, m->n_vocab, field);
}

int rad_container_check_model(const RadContainer *c)
{
    RadModelMeta m;
    int rc = rad_meta_from_table(&c->meta, &m, c->path);
    if (!rc) rc = rad_meta_check(&m, c->path);
    if (!rc) rc = rad_meta_check_layers(&m, c, c->path);
    return rc;
}

int rad_container_check_vocab(const RadContainer *c, int text_vocab)
{
    RadModelMeta m;
    int rc = rad_meta_from_table(&c->meta, &m, c->path);
    return rc ? rc : rad_meta_check_vocab(&m, text_vocab, c->path);
}
