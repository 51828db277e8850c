/*
** model_sampling.c: a model's recommended sampling, read from its file, and
** the order in which it meets the user's settings (model_sampling.h).
*/
#include "model_sampling.h"

#include "../../formats/rad_container.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const RadMetaKV *find_kv(const RadMetaKV *kv, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (kv[i].key && !strcmp(kv[i].key, key)) return &kv[i];
    return NULL;
}

/* Take v for field bit when it is in the sampler's range. */
static void take_float(RadModelSampling *m, unsigned bit, double v)
{
    if (!isfinite(v)) return;
    float f = (float)v;
    RadSamplerParams *p = &m->p;
    switch (bit) {
    case RAD_SET_TEMP: if (f < 0) return; p->temperature = f; break;
    case RAD_SET_TOP_P: if (f <= 0 || f > 1) return; p->top_p = f; break;
    case RAD_SET_MIN_P: if (f < 0 || f >= 1) return; p->min_p = f; break;
    case RAD_SET_REPEAT_PENALTY: if (f <= 0) return; p->repeat_penalty = f; break;
    default: return;
    }
    m->has |= bit;
}

static void take_int(RadModelSampling *m, unsigned bit, int64_t v)
{
    if (v < 0 || v > 1 << 24) return;
    if (bit == RAD_SET_TOP_K) m->p.top_k = (int)v;
    else if (bit == RAD_SET_REPEAT_LAST_N) m->p.repeat_last_n = (int)v;
    else return;
    m->has |= bit;
}

void rad_model_sampling_from(const RadMetaKV *kv, int n_kv, const char *gen_config, size_t len,
                             RadModelSampling *out)
{
    memset(out, 0, sizeof *out);
    rad_sampler_defaults(&out->p);
    static const struct { const char *key; unsigned bit; int is_int; } gguf[] = {
        {"general.sampling.temp", RAD_SET_TEMP, 0},
        {"general.sampling.top_k", RAD_SET_TOP_K, 1},
        {"general.sampling.top_p", RAD_SET_TOP_P, 0},
        {"general.sampling.min_p", RAD_SET_MIN_P, 0},
        {"general.sampling.penalty_repeat", RAD_SET_REPEAT_PENALTY, 0},
        {"general.sampling.penalty_last_n", RAD_SET_REPEAT_LAST_N, 1},
    };
    for (size_t i = 0; kv && i < sizeof gguf / sizeof *gguf; i++) {
        const RadMetaKV *e = find_kv(kv, n_kv, gguf[i].key);
        if (!e || e->type == RAD_META_STRING) continue;
        if (gguf[i].is_int) take_int(out, gguf[i].bit, e->i);
        else take_float(out, gguf[i].bit, e->f);
    }
    if (out->has) snprintf(out->source, sizeof out->source, "general.sampling");
    if (!gen_config || !len) return;

    json_error_t err;
    json_t *j = json_loadb(gen_config, len, 0, &err);
    if (!json_is_object(j)) {
        json_decref(j);
        return;
    }
    json_t *sample = json_object_get(j, "do_sample");
    if (!json_is_false(sample)) {
        unsigned before = out->has;
        static const struct { const char *key; unsigned bit; int is_int; } hf[] = {
            {"temperature", RAD_SET_TEMP, 0}, {"top_k", RAD_SET_TOP_K, 1},
            {"top_p", RAD_SET_TOP_P, 0},      {"min_p", RAD_SET_MIN_P, 0},
            {"repetition_penalty", RAD_SET_REPEAT_PENALTY, 0},
        };
        for (size_t i = 0; i < sizeof hf / sizeof *hf; i++) {
            json_t *v = json_object_get(j, hf[i].key);
            if (!json_is_number(v)) continue;
            if (hf[i].is_int) {
                if (json_is_integer(v)) take_int(out, hf[i].bit, json_integer_value(v));
            } else {
                take_float(out, hf[i].bit, json_number_value(v));
            }
        }
        if (out->has != before) snprintf(out->source, sizeof out->source, "generation_config.json");
    }
    json_decref(j);
}

/* A file that starts with GGUF's magic carries no blobs. */
static int is_gguf_file(const char *path)
{
    char magic[4] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    ssize_t got = read(fd, magic, sizeof magic);
    close(fd);
    return got == 4 && !memcmp(magic, "GGUF", 4);
}

void rad_model_sampling_of(const char *model_path, const RadEngine *e, RadModelSampling *out)
{
    const RadModelMeta *meta = rad_engine_meta(e);
    RadContainer *c = NULL;
    const char *blob = NULL;
    uint64_t size = 0;
    if (model_path && !is_gguf_file(model_path) && rad_container_open(model_path, &c) == RAD_OK)
        blob = rad_container_blob(c, "generation_config.json", &size);
    rad_error_clear();
    rad_model_sampling_from(meta ? meta->kv : NULL, meta ? meta->n_kv : 0, blob, (size_t)size, out);
    rad_container_close(c);
}

void rad_settings_apply_model(RadSettings *s, const RadModelSampling *m)
{
    /* Fields the user did not set start from radiance's defaults again (a
    ** model switched to in a chat must not keep the last one's advice). */
    RadConvSettings d;
    rad_conv_settings_defaults(&d);
    RadSamplerParams *p = &s->conv.sampler;
    unsigned unset = ~s->sampler_set;
    if (unset & RAD_SET_TEMP) p->temperature = d.sampler.temperature;
    if (unset & RAD_SET_TOP_K) p->top_k = d.sampler.top_k;
    if (unset & RAD_SET_TOP_P) p->top_p = d.sampler.top_p;
    if (unset & RAD_SET_MIN_P) p->min_p = d.sampler.min_p;
    if (unset & RAD_SET_REPEAT_PENALTY) p->repeat_penalty = d.sampler.repeat_penalty;
    if (unset & RAD_SET_REPEAT_LAST_N) p->repeat_last_n = d.sampler.repeat_last_n;
    if (!m) return;
    unsigned take = m->has & unset;
    if (take & RAD_SET_TEMP) p->temperature = m->p.temperature;
    if (take & RAD_SET_TOP_K) p->top_k = m->p.top_k;
    if (take & RAD_SET_TOP_P) p->top_p = m->p.top_p;
    if (take & RAD_SET_MIN_P) p->min_p = m->p.min_p;
    if (take & RAD_SET_REPEAT_PENALTY) p->repeat_penalty = m->p.repeat_penalty;
    if (take & RAD_SET_REPEAT_LAST_N) p->repeat_last_n = m->p.repeat_last_n;
}

static const char *origin(const RadSettings *s, const RadModelSampling *m, unsigned bit)
{
    if (s->sampler_set & bit) return "";
    if (m && (m->has & bit)) return " (model)";
    return " (default)";
}

void rad_sampling_describe(const RadSettings *s, const RadModelSampling *m, unsigned long long seed, char *buf,
                           size_t cap)
{
    const RadSamplerParams *p = &s->conv.sampler;
    snprintf(buf, cap,
             "temp %g%s \xc2\xb7 top_k %d%s \xc2\xb7 top_p %g%s \xc2\xb7 min_p %g%s \xc2\xb7 repeat_penalty %g%s "
             "(last %d) \xc2\xb7 seed %llu%s",
             (double)p->temperature, origin(s, m, RAD_SET_TEMP), p->top_k, origin(s, m, RAD_SET_TOP_K),
             (double)p->top_p, origin(s, m, RAD_SET_TOP_P), (double)p->min_p, origin(s, m, RAD_SET_MIN_P),
             (double)p->repeat_penalty, origin(s, m, RAD_SET_REPEAT_PENALTY), p->repeat_last_n, seed,
             s->conv.seed_random ? " (random)" : "");
}

void rad_model_sampling_line(const RadModelSampling *m, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    if (!m->has) {
        snprintf(buf, cap, "none (radiance's defaults apply)");
        return;
    }
#define PART(bit, ...)                                                                     \
    if ((m->has & (bit)) && n < cap) {                                                      \
        n += (size_t)snprintf(buf + n, cap - n, "%s", n ? ", " : "");                       \
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                  \
    }
    PART(RAD_SET_TEMP, "temp %g", (double)m->p.temperature)
    PART(RAD_SET_TOP_K, "top_k %d", m->p.top_k)
    PART(RAD_SET_TOP_P, "top_p %g", (double)m->p.top_p)
    PART(RAD_SET_MIN_P, "min_p %g", (double)m->p.min_p)
    PART(RAD_SET_REPEAT_PENALTY, "repeat_penalty %g", (double)m->p.repeat_penalty)
    PART(RAD_SET_REPEAT_LAST_N, "repeat_last_n %d", m->p.repeat_last_n)
#undef PART
    if (n < cap) snprintf(buf + n, cap - n, " (%s)", m->source);
}

void rad_settings_plain_sampler(const RadSettings *s, RadSamplerParams *out)
{
    const RadSamplerParams *p = &s->conv.sampler;
    rad_sampler_defaults(out);
    if (s->sampler_set & RAD_SET_TEMP) out->temperature = p->temperature;
    if (s->sampler_set & RAD_SET_TOP_K) out->top_k = p->top_k;
    if (s->sampler_set & RAD_SET_TOP_P) out->top_p = p->top_p;
    if (s->sampler_set & RAD_SET_MIN_P) out->min_p = p->min_p;
    if (s->sampler_set & RAD_SET_REPEAT_PENALTY) out->repeat_penalty = p->repeat_penalty;
    if (s->sampler_set & RAD_SET_REPEAT_LAST_N) out->repeat_last_n = p->repeat_last_n;
    out->seed = p->seed;
}
