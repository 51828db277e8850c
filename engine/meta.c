/*
** meta.c: the model's metadata as a plugin and the core read it.
**
** The container's key/value table becomes RadModelMeta: the canonical keys
** ("model.n_layers", "model.head_dim", ...) fill its fields, and every key
** travels on in the table for the plugin's free-form lookups.  The lookups
** are here, apart from the builder, because the recording builder of
** tests/arch links them too: a plugin sees the same answers under test as
** in the engine.
*/
#include "engine_internal.h"

#include "rad_limits.h"

#include <string.h>

static const RadMetaKV *meta_find(const RadModelMeta *m, const char *key)
{
    for (int i = 0; i < m->n_kv; i++)
        if (strcmp(m->kv[i].key, key) == 0) return &m->kv[i];
    return NULL;
}

int64_t rad_meta_geti(const RadModelMeta *m, const char *key, int64_t dflt)
{
    const RadMetaKV *kv = meta_find(m, key);
    return kv && kv->type != RAD_META_STRING ? kv->i : dflt;
}

double rad_meta_getf(const RadModelMeta *m, const char *key, double dflt)
{
    const RadMetaKV *kv = meta_find(m, key);
    return kv && kv->type != RAD_META_STRING ? kv->f : dflt;
}

const char *rad_meta_gets(const RadModelMeta *m, const char *key, const char *dflt)
{
    const RadMetaKV *kv = meta_find(m, key);
    return kv && kv->type == RAD_META_STRING ? kv->s : dflt;
}

int rad_meta_has(const RadModelMeta *m, const char *key) { return meta_find(m, key) != NULL; }

int rad_meta_from_table(const RadMetaTable *t, RadModelMeta *m, const char *path)
{
    memset(m, 0, sizeof *m);
    m->struct_size = sizeof *m;
    m->n_kv = t->n;
    m->kv = t->kv;
    m->arch_id = rad_meta_gets(m, "arch.id", NULL);
    m->quant = rad_meta_gets(m, "arch.quant", NULL);
    m->hf_arch = rad_meta_gets(m, "arch.hf_name", "");
    m->name = rad_meta_gets(m, "model.name", "");
    if (!m->arch_id || !m->quant)
        return rad_error_set(RAD_E_FORMAT, "%s: metadata key '%s' is missing: convert the model again",
                             path, !m->arch_id ? "arch.id" : "arch.quant");
    struct { const char *key; int *dst; int required; } ints[] = {
        {"model.n_layers", &m->n_layers, 1}, {"model.n_embd", &m->n_embd, 1},
        {"model.n_head", &m->n_head, 1},     {"model.n_head_kv", &m->n_head_kv, 1},
        {"model.head_dim", &m->head_dim, 1}, {"model.n_ff", &m->n_ff, 0},
        {"model.n_vocab", &m->n_vocab, 1},   {"model.n_ctx_train", &m->n_ctx_train, 0},
        {"model.n_expert", &m->n_expert, 0}, {"model.n_expert_used", &m->n_expert_used, 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        int64_t v = rad_meta_geti(m, ints[i].key, -1);
        if (v < 0 && ints[i].required)
            return rad_error_set(RAD_E_FORMAT, "%s: metadata key '%s' is missing or negative", path,
                                 ints[i].key);
        if (v > RAD_LIMIT_META_INT)
            return rad_error_set(RAD_E_FORMAT, "%s: metadata key '%s' = %lld is over the limit of %d "
                                 "(RAD_LIMIT_META_INT): the file is damaged", path, ints[i].key, (long long)v,
                                 RAD_LIMIT_META_INT);
        *ints[i].dst = v < 0 ? 0 : (int)v;
    }
    m->rms_eps = rad_meta_getf(m, "model.rms_eps", 1e-6);
    m->rope_theta = rad_meta_getf(m, "model.rope_theta", 10000.0);
    return RAD_OK;
}

