/*
** model_sampling.h: the sampling a model's makers recommend, and how it
** meets the user's settings.
**
** A model may say how it should be sampled: a Hugging Face checkpoint in
** its generation_config.json (temperature, top_k, top_p, min_p,
** repetition_penalty; only when do_sample is not false, since HF otherwise
** decodes greedily and ignores them), a GGUF in general.sampling.* (temp,
** top_k, top_p, min_p, penalty_repeat, penalty_last_n, written by llama.cpp's
** converter).  A .rad converted from either keeps it (the blob, or the
** keys in its metadata).
**
** Each sampler field is then taken from the first of: a flag, a RADIANCE_*
** variable or a config key (what the user said: RadSettings.sampler_set),
** the model's recommendation, radiance's default (docs/SAMPLING.md).  The
** seed is random for every reply unless the user gives one.
*/
#ifndef RAD_MODEL_SAMPLING_H
#define RAD_MODEL_SAMPLING_H

#include <stddef.h>

#include "../config.h"

typedef struct RadModelSampling {
    unsigned has;               /* RAD_SET_* bits of the fields the model recommends */
    RadSamplerParams p;         /* those fields' values */
    char source[48];            /* "generation_config.json", "general.sampling", or "" */
} RadModelSampling;

/* Read the recommendation from a model's free-form metadata (kv[0..n_kv),
** the GGUF keys) and its generation_config.json (may be NULL).  Values out
** of the sampler's ranges are ignored.  Never fails. */
void rad_model_sampling_from(const RadMetaKV *kv, int n_kv, const char *gen_config, size_t len,
                             RadModelSampling *out);

/* The recommendation of an open model: its metadata, and for a .rad at
** model_path its generation_config.json blob. */
void rad_model_sampling_of(const char *model_path, const RadEngine *e, RadModelSampling *out);

/* Fill every sampler field of s the user did not set from m (NULL: none). */
void rad_settings_apply_model(RadSettings *s, const RadModelSampling *m);

/* One line: each sampler field, its value and where it came from, e.g.
** "temp 0.6 (model) · top_k 20 (model) · top_p 0.95 (model) · min_p 0.05 ·
** repeat_penalty 1.1 · seed 1234 (random)". */
void rad_sampling_describe(const RadSettings *s, const RadModelSampling *m, unsigned long long seed,
                           char *buf, size_t cap);

/* What the model recommends, for `radiance show`: "temp 0.6, top_k 20,
** top_p 0.95 (generation_config.json)", or "none" when it says nothing. */
void rad_model_sampling_line(const RadModelSampling *m, char *buf, size_t cap);

/* The sampler of the token-id path (run --tokens, --dump-logits): the
** engine's plain defaults (docs/SAMPLING.md) under what the user set; no
** model recommendation and no chat default, so reference comparisons see
** the sampler they ask for. */
void rad_settings_plain_sampler(const RadSettings *s, RadSamplerParams *out);

#endif /* RAD_MODEL_SAMPLING_H */
