/*
** convert.c: a Hugging Face folder becomes a .rad container.
**
** The converter knows no model.  config.json's common keys become the
** canonical metadata every plugin reads (model.n_layers, model.head_dim...),
** every other key is carried along verbatim for the plugin; which plugin
** serves the checkpoint is the plugin's to say (rad_arch_hf_names); what
** tensors to write, under which names, in which encoding and shape, comes
** from running the plugin's own declare against that metadata and following
** its name map.  Every problem is collected before anything is reported, and
** the output appears only when everything succeeded.
*/
#include "engine_internal.h"
#include "convert_view.h"
#include "../formats/checkpoint.h"
#include "../formats/quantize.h"
#include "../formats/quantize_recipe.h"
#include "../formats/tokenizer.h"
#include "../formats/gguf_container.h"
#include "rad_limits.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------- metadata */

/* A config key, looked up at the top level or inside text_config (where
** multimodal checkpoints keep their language model's keys). */
static const RadMetaKV *config_key(const RadMetaTable *cfg, const char *key)
{
    const RadMetaKV *kv = rad_meta_table_find(cfg, key);
    if (kv) return kv;
    char nested[128];
    snprintf(nested, sizeof nested, "text_config.%s", key);
    return rad_meta_table_find(cfg, nested);
}

static int config_int(const RadMetaTable *cfg, const char *key, int64_t dflt, int required, int64_t *out,
                      const char *path)
{
    const RadMetaKV *kv = config_key(cfg, key);
    if (!kv || kv->type == RAD_META_STRING) {
        if (required)
            return rad_error_set(RAD_E_FORMAT, "%s: key '%s' is missing or not a number", path, key);
        *out = dflt;
        return RAD_OK;
    }
    if (kv->type == RAD_META_FLOAT && !(kv->f == floor(kv->f)))
        return rad_error_set(RAD_E_FORMAT, "%s: key '%s' = %g is not a whole number", path, key, kv->f);
    if (kv->i <= 0 || kv->i > RAD_LIMIT_META_INT)
        return rad_error_set(RAD_E_FORMAT, "%s: key '%s' = %lld is not a plausible size (1 to %d, RAD_LIMIT_META_INT)",
                             path, key, (long long)kv->i, RAD_LIMIT_META_INT);
    *out = kv->i;
    return RAD_OK;
}

/* Fill the canonical keys from config.json; the rest is copied verbatim. */
static int meta_from_config(const RadMetaTable *cfg, RadMetaTable *out, const char *config_path)
{
    /* config.json's keys are unique (hf_config.c settles repeats): appended
    ** without a search, so a config of many keys costs linear time. */
    for (int i = 0; i < cfg->n; i++) {
        int rc = rad_meta_table_append(out, &cfg->kv[i]);
        if (rc) return rc;
    }
    int64_t layers, embd, heads, kv_heads, head_dim, ff, vocab, ctx;
    int rc = config_int(cfg, "num_hidden_layers", 0, 1, &layers, config_path);
    if (!rc) rc = config_int(cfg, "hidden_size", 0, 1, &embd, config_path);
    if (!rc) rc = config_int(cfg, "num_attention_heads", 0, 1, &heads, config_path);
    if (!rc) rc = config_int(cfg, "num_key_value_heads", heads, 0, &kv_heads, config_path);
    if (!rc) rc = config_int(cfg, "vocab_size", 0, 1, &vocab, config_path);
    if (!rc) rc = config_int(cfg, "intermediate_size", 0, 0, &ff, config_path);
    if (!rc) rc = config_int(cfg, "max_position_embeddings", 0, 0, &ctx, config_path);
    if (rc) return rc;
    /* head_dim is written down here, once, so no later reader derives it. */
    if (config_key(cfg, "head_dim")) {
        rc = config_int(cfg, "head_dim", 0, 1, &head_dim, config_path);
        if (rc) return rc;
    } else {
        if (embd % heads)
            return rad_error_set(RAD_E_FORMAT, "%s: hidden_size %lld is not a multiple of num_attention_heads %lld and head_dim is absent",
                                 config_path, (long long)embd, (long long)heads);
        head_dim = embd / heads;
    }
    const RadMetaKV *eps = config_key(cfg, "rms_norm_eps");
    const RadMetaKV *theta = config_key(cfg, "rope_theta");
    if (!theta) theta = config_key(cfg, "rope_parameters.rope_theta");
    struct { const char *key; int64_t v; } canon[] = {
        {"model.n_layers", layers}, {"model.n_embd", embd},   {"model.n_head", heads},
        {"model.n_head_kv", kv_heads}, {"model.head_dim", head_dim}, {"model.n_ff", ff},
        {"model.n_vocab", vocab},   {"model.n_ctx_train", ctx},
    };
    for (size_t i = 0; !rc && i < sizeof canon / sizeof *canon; i++)
        rc = rad_meta_table_set_int(out, canon[i].key, canon[i].v);
    /* Routed experts: the count, how many a token uses and their size,
    ** whichever spelling the family's config uses (Mixtral's
    ** num_local_experts; GLM-4.5's and DeepSeek's n_routed_experts;
    ** moe_intermediate_size where the family has it, else the experts are
    ** intermediate_size wide).  No experts: the keys stay absent and the
    ** model is dense. */
    const RadMetaKV *n_expert = config_key(cfg, "num_experts");
    if (!n_expert) n_expert = config_key(cfg, "num_local_experts");
    if (!n_expert) n_expert = config_key(cfg, "n_routed_experts");
    if (!rc && n_expert && n_expert->type == RAD_META_INT && n_expert->i > 0) {
        int64_t used, ff_expert;
        if (n_expert->i > (1 << 20))
            return rad_error_set(RAD_E_FORMAT, "%s: key '%s' = %lld is not a plausible expert count", config_path,
                                 n_expert->key, (long long)n_expert->i);
        rc = config_int(cfg, "num_experts_per_tok", 0, 1, &used, config_path);
        if (!rc) rc = config_int(cfg, "moe_intermediate_size", ff, 0, &ff_expert, config_path);
        if (rc) return rc;
        rc = rad_meta_table_set_int(out, "model.n_expert", n_expert->i);
        if (!rc) rc = rad_meta_table_set_int(out, "model.n_expert_used", used);
        if (!rc) rc = rad_meta_table_set_int(out, "model.n_ff_expert", ff_expert);
    }
    if (!rc) rc = rad_meta_table_set_float(out, "model.rms_eps", eps && eps->type != RAD_META_STRING ? eps->f : 1e-6);
    if (!rc)
        rc = rad_meta_table_set_float(out, "model.rope_theta",
                                      theta && theta->type != RAD_META_STRING ? theta->f : 10000.0);
    return rc;
}

/* -------------------------------------------------------------- problems */

typedef struct Problems {
    char *text;
    size_t len;
    int n;
} Problems;

static void add_problem(Problems *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_problem(Problems *p, const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    char *grown = realloc(p->text, p->len + (size_t)n + 4);
    if (grown) {
        p->text = grown;
        p->len += (size_t)sprintf(p->text + p->len, "\n  %s", line);
        p->n++;
    }
    free(line);
}

/* ------------------------------------------------------------- tensors */

static void shape_text(const int64_t *shape, int rank, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

/* The checkpoint tensors a weight's map entry selects: the first present for
** COPY, all of them for CONCAT.  Returns how many, 0 when unresolvable, with
** *missing the source that is absent (for CONCAT, the first). */
static int resolve_sources(const RadCheckpoint *ck, const RadWeightEntry *w, const RadStTensor **out, int *missing)
{
    *missing = 0;
    if (w->map_mode == RAD_MAP_COPY) {
        for (int i = 0; i < w->n_map_sources; i++)
            if ((out[0] = rad_checkpoint_tensor(ck, w->map_sources[i]))) return 1;
        return 0;
    }
    for (int i = 0; i < w->n_map_sources; i++)
        if (!(out[i] = rad_checkpoint_tensor(ck, w->map_sources[i]))) {
            *missing = i;
            return 0;
        }
    return w->n_map_sources;
}

/* Encode one declared weight from its checkpoint sources into `enc`;
** returns malloc'd bytes or NULL with a problem added.  The sources stack
** along dim 0: each is either a part of the weight (same rank, its rows)
** or, for a stacked weight (n_slices), one whole slice of rank one less
** (a checkpoint's per-expert matrix, experts.N.gate_proj). */
static void *encode_weight(const RadCheckpoint *ck, const RadWeightEntry *w, int enc, uint64_t *size, Problems *pr)
{
    if (rad_convert_view_applies(ck, w)) {  /* another layout: transposed, interleaved, MXFP4 */
        int absent = 0;
        void *bytes = rad_convert_view(ck, w, enc, size, &absent);
        if (!bytes && !absent) add_problem(pr, "%s", rad_error_message());
        return bytes;
    }
    const RadStTensor **src = calloc((size_t)(w->n_map_sources > 0 ? w->n_map_sources : 1), sizeof *src);
    if (!src) {
        add_problem(pr, "'%s': out of memory", w->name);
        return NULL;
    }
    uint8_t *out = NULL;
    int missing = 0;
    int n = resolve_sources(ck, w, src, &missing);
    if (n == 0) {
        if (!w->d.optional) {
            if (w->map_mode == RAD_MAP_CONCAT && w->n_map_sources > 1)
                add_problem(pr, "tensor '%s' is missing from the checkpoint (needed for '%s', which stacks %d "
                            "tensors): the checkpoint is incomplete; download it again", w->map_sources[missing],
                            w->name, w->n_map_sources);
            else
                add_problem(pr, "tensor '%s'%s is missing from the checkpoint (needed for '%s')", w->map_sources[0],
                            w->n_map_sources > 1 ? " (or an alternative)" : "", w->name);
        }
        goto fail;
    }
    /* The stacked sources must add up to the declared shape. */
    int64_t rows = 0, cols = w->d.rank >= 2 ? w->d.shape[w->d.rank - 1] : w->d.shape[0];
    for (int i = 0; i < n; i++) {
        int64_t src_cols = src[i]->rank >= 1 ? src[i]->shape[src[i]->rank - 1] : 1;
        int as_slice = w->d.n_slices > 0 && src[i]->rank == w->d.rank - 1;
        int ok;
        if (as_slice) {
            ok = 1;
            for (int d = 0; ok && d < src[i]->rank; d++) ok = src[i]->shape[d] == w->d.shape[d + 1];
        } else {
            ok = src[i]->rank == w->d.rank && src_cols == cols;
            for (int d = 1; ok && d + 1 < w->d.rank; d++) ok = src[i]->shape[d] == w->d.shape[d];
            if (ok && n == 1 && w->d.rank >= 2) ok = src[i]->shape[0] == w->d.shape[0];
        }
        if (!ok) {
            char want[96], have[96];
            shape_text(as_slice || (w->d.n_slices > 0 && n > 1) ? w->d.shape + 1 : w->d.shape,
                       as_slice || (w->d.n_slices > 0 && n > 1) ? w->d.rank - 1 : w->d.rank, want, sizeof want);
            shape_text(src[i]->shape, src[i]->rank, have, sizeof have);
            add_problem(pr, "tensor '%s' has shape %s; the config says %s'%s' is %s", src[i]->name, have,
                        w->d.n_slices > 0 && n > 1 ? "each slice of " : "", w->name, want);
            goto fail;
        }
        if (src[i]->enc != RAD_ENC_F32 && src[i]->enc != RAD_ENC_F16 && src[i]->enc != RAD_ENC_BF16) {
            add_problem(pr, "tensor '%s' is %s; only F32, F16 and BF16 checkpoints convert", src[i]->name,
                        src[i]->dtype);
            goto fail;
        }
        rows += w->d.rank == 1 || as_slice ? 1 : src[i]->shape[0];
    }
    if (w->d.rank >= 2 && rows != w->d.shape[0]) {
        add_problem(pr, "'%s': the sources stack to %lld along dim 0, the config says %lld", w->name,
                    (long long)rows, (long long)w->d.shape[0]);
        goto fail;
    }
    int64_t row_bytes = rad_encoding_row_bytes(enc, cols);
    if (row_bytes < 0) {
        const RadEncodingInfo *e = rad_encoding_info(enc);
        add_problem(pr, "'%s': rows of %lld elements cannot be encoded as %s (blocks of %d)", w->name,
                    (long long)cols, e ? e->name : "?", e ? e->block_elems : 0);
        goto fail;
    }
    int64_t total_rows = w->d.rank >= 2 ? rows : 1;
    for (int d = 1; d + 1 < w->d.rank; d++) total_rows *= w->d.shape[d];
    out = malloc((size_t)(total_rows * row_bytes));
    if (!out) {
        add_problem(pr, "'%s': out of memory", w->name);
        goto fail;
    }
    int64_t at_row = 0;
    for (int i = 0; i < n; i++) {
        const RadEncodingInfo *in = rad_encoding_info(src[i]->enc);
        int64_t src_rows = src[i]->size / (uint64_t)(cols * in->block_bytes);
        for (int64_t r = 0; r < src_rows; r++, at_row++) {
            const uint8_t *from = (const uint8_t *)src[i]->data + r * cols * in->block_bytes;
            if (rad_convert_row(src[i]->enc, from, enc, out + at_row * row_bytes, cols)) {
                add_problem(pr, "'%s': cannot convert %s to %s: %s", w->name, src[i]->dtype,
                            rad_encoding_info(enc)->name, rad_error_message());
                goto fail;
            }
        }
    }
    *size = (uint64_t)(total_rows * row_bytes);
    free(src);
    return out;

fail:
    free(out);
    free(src);
    return NULL;
}

/* ---------------------------------------------------------- layers */

/* One more than the largest number that is a whole dotted part of a tensor
** name ("model.layers.27.mlp.up_proj.weight": 28), over the checkpoint: no
** layer past it has a tensor, so a layer count above it is refused before
** the plugin declares a table for every one of them. */
static int64_t layers_bound(const RadCheckpoint *ck)
{
    int64_t most = 0;
    for (int i = 0; i < rad_checkpoint_tensor_count(ck); i++) {
        const char *p = rad_checkpoint_tensor_at(ck, i)->name;
        while (*p) {
            const char *end = p;
            int64_t v = 0;
            while (isdigit((unsigned char)*end) && v < RAD_LIMIT_META_INT) v = v * 10 + (*end++ - '0');
            if (end > p && (*end == '.' || !*end) && v + 1 > most) most = v + 1;
            p = strchr(end, '.');
            if (!p) break;
            p++;
        }
    }
    return most;
}

/* A set of strings (open addressing over FNV-1a), for the check below. */
typedef struct NameSet {
    char **slot;
    size_t cap;
} NameSet;

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int set_init(NameSet *set, size_t n)
{
    set->cap = 16;
    while (set->cap < n * 2) set->cap *= 2;
    set->slot = calloc(set->cap, sizeof *set->slot);
    return set->slot ? RAD_OK : RAD_E_NOMEM;
}

static char **set_find(const NameSet *set, const char *s)
{
    size_t at = (size_t)name_hash(s) & (set->cap - 1);
    while (set->slot[at] && strcmp(set->slot[at], s) != 0) at = (at + 1) & (set->cap - 1);
    return &set->slot[at];
}

/* Add a copy of `s` (taken when the set has it already, freed). */
static int set_add(NameSet *set, char *s)
{
    if (!s) return RAD_E_NOMEM;
    char **at = set_find(set, s);
    if (*at) free(s);
    else *at = s;
    return RAD_OK;
}

static void set_free(NameSet *set)
{
    for (size_t i = 0; set->slot && i < set->cap; i++) free(set->slot[i]);
    free(set->slot);
}

/* A tensor name with its numbers as '#': the same tensor of every layer. */
static char *name_pattern(const char *name)
{
    char *p = malloc(strlen(name) + 1), *o = p;
    if (!p) return NULL;
    for (const char *c = name; *c;) {
        if (isdigit((unsigned char)*c)) {
            *o++ = '#';
            while (isdigit((unsigned char)*c)) c++;
        } else {
            *o++ = *c++;
        }
    }
    *o = 0;
    return p;
}

/* Whether `name` belongs to one of the MTP (multi-token prediction,
** "nextn") layers that config.json's num_nextn_predict_layers puts after
** its num_hidden_layers (GLM-4.5, DeepSeek-V3: model.layers.L.* for L in
** [n_layers, n_layers + n_mtp)).  They are not part of the main forward. */
static int mtp_tensor(const char *name, int n_layers, int64_t n_mtp)
{
    static const char prefix[] = "model.layers.";
    if (n_mtp <= 0 || strncmp(name, prefix, sizeof prefix - 1) != 0) return 0;
    const char *p = name + sizeof prefix - 1;
    if (!isdigit((unsigned char)*p)) return 0;
    char *end;
    long long l = strtoll(p, &end, 10);
    return *end == '.' && l >= n_layers && l - n_layers < n_mtp;
}

/* Tensors the checkpoint holds for layers (or experts) the config does not
** count: a checkpoint tensor that no weight reads although the same tensor
** of another layer is read.  Without this a config.json with fewer layers
** than the checkpoint converts into a smaller model, silently.  The MTP
** layers the config names (mtp_tensor) are not counted: no plugin reads
** them yet (issue 16), and the config says they are there. */
static int dropped_tensors(const RadCheckpoint *ck, const RadBuilder *b, Problems *pr, const char *config_path,
                           int n_layers, int64_t n_mtp)
{
    int n = rad_checkpoint_tensor_count(ck);
    NameSet used = {0}, patterns = {0};
    int rc = set_init(&used, (size_t)n);
    if (!rc) rc = set_init(&patterns, (size_t)n);
    for (int i = 0; !rc && i < b->n_weights; i++) {
        const RadWeightEntry *w = &b->weights[i];
        for (int s = 0; !rc && s < w->n_map_sources; s++) {
            if (!rad_checkpoint_tensor(ck, w->map_sources[s])) continue;
            rc = set_add(&used, strdup(w->map_sources[s]));
            if (!rc) rc = set_add(&patterns, name_pattern(w->map_sources[s]));
        }
    }
    int dropped = 0;
    const char *first = NULL;
    for (int i = 0; !rc && i < n; i++) {
        const char *name = rad_checkpoint_tensor_at(ck, i)->name;
        if (*set_find(&used, name) || mtp_tensor(name, n_layers, n_mtp)) continue;
        char *pattern = name_pattern(name);
        if (!pattern) { rc = RAD_E_NOMEM; break; }
        if (*set_find(&patterns, pattern)) {
            if (!dropped++) first = name;
        }
        free(pattern);
    }
    if (!rc && dropped)
        add_problem(pr, "%d checkpoint tensor%s like '%s' would be left out: %s counts fewer layers (or experts) "
                    "than the checkpoint holds; fix num_hidden_layers", dropped, dropped == 1 ? "" : "s", first,
                    config_path);
    set_free(&used);
    set_free(&patterns);
    return rc ? rad_error_set(RAD_E_NOMEM, "%s: out of memory checking the tensors", config_path) : RAD_OK;
}

/* --------------------------------------------------------------- convert */

static int find_plugin(const RadPluginSet *set, const char *hf_arch, const char *quant, const char *config_path,
                       const RadArchPlugin **out)
{
    const RadArchPlugin *family = rad_plugins_find_hf(set, hf_arch);
    if (!family) {
        char list[1024] = "";
        size_t at = 0;
        for (int i = 0; i < set->n_arch; i++)
            for (const char *const *n = set->arch[i].hf_names ? set->arch[i].hf_names() : NULL; n && *n; n++)
                if (at < sizeof list && !strstr(list, *n))
                    at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", *n);
        return rad_error_set(RAD_E_UNSUPPORTED, "%s: architecture '%s' is not served by any installed plugin (served: %s)",
                             config_path, hf_arch, at ? list : "none");
    }
    *out = rad_plugins_find(set, family->info->arch_id, quant);
    if (*out) return RAD_OK;
    char list[256] = "";
    size_t at = 0;
    for (int i = 0; i < set->n_arch; i++)
        if (strcmp(set->arch[i].info->arch_id, family->info->arch_id) == 0 && at < sizeof list)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", set->arch[i].info->quant);
    return rad_error_set(RAD_E_UNSUPPORTED, "--quant %s: no plugin serves '%s' at that format (available: %s)",
                         quant, family->info->arch_id, list);
}

/* The tokenizer in its compact form ("tokenizer.bin"), so a model loads it
** without parsing JSON.  A checkpoint without tokenizer.json converts without
** one (it then runs from token ids); one whose tokenizer we cannot run is
** refused here, with the reason, rather than at the first prompt. */
static int add_tokenizer(const RadCheckpoint *ck, RadContainerWriter *w, const char *dir, int n_vocab, FILE *log)
{
    char *json = NULL, *config = NULL;
    size_t len = 0, config_len = 0;
    int found = rad_checkpoint_read_file(ck, "tokenizer.json", &json, &len);
    if (found == RAD_E_NOTFOUND) {
        rad_error_clear();
        if (log)
            fprintf(log, "note: %s has no tokenizer.json: the model will take token ids only (run --tokens), "
                         "not text\n", dir);
        return RAD_OK;
    }
    if (found) return found;
    if (rad_checkpoint_read_file(ck, "tokenizer_config.json", &config, &config_len) != RAD_OK) config = NULL;
    char name[4200];
    snprintf(name, sizeof name, "%s/tokenizer.json", dir);
    RadTokenizer *t = NULL;
    void *blob = NULL;
    size_t blob_len = 0;
    int rc = rad_tokenizer_from_json(json, len, config, config_len, name, &t);
    /* Newer checkpoints (gpt-oss, recent Qwen) keep the chat template in its
    ** own file instead of tokenizer_config.json. */
    char *jinja = NULL;
    size_t jinja_len = 0;
    if (rc == RAD_OK && !t->chat_template &&
        rad_checkpoint_read_file(ck, "chat_template.jinja", &jinja, &jinja_len) == RAD_OK) {
        if (jinja_len > RAD_LIMIT_CHAT_TEMPLATE_BYTES)
            rc = rad_error_set(RAD_E_FORMAT, "%s/chat_template.jinja: %zu bytes is over the chat template limit of "
                               "%u bytes (RAD_LIMIT_CHAT_TEMPLATE_BYTES)", dir, jinja_len,
                               RAD_LIMIT_CHAT_TEMPLATE_BYTES);
        else if (memchr(jinja, 0, jinja_len))
            rc = rad_error_set(RAD_E_UNSUPPORTED, "%s/chat_template.jinja: holds a NUL byte", dir);
        else if (!(t->chat_template = strndup(jinja, jinja_len)))
            rc = RAD_E_NOMEM;
        free(jinja);
    }
    if (rc == RAD_OK && t->chat_template && strlen(t->chat_template) > RAD_LIMIT_CHAT_TEMPLATE_BYTES)
        rc = rad_error_set(RAD_E_FORMAT, "%s/tokenizer_config.json: a chat template of %zu bytes is over the "
                           "limit of %u bytes (RAD_LIMIT_CHAT_TEMPLATE_BYTES)", dir, strlen(t->chat_template),
                           RAD_LIMIT_CHAT_TEMPLATE_BYTES);
    if (rc == RAD_OK && t->n_vocab > n_vocab)
        rc = rad_error_set(RAD_E_FORMAT, "%s: the tokenizer has %d tokens, but config.json's vocab_size is %d: "
                           "ids past it cannot be run; the tokenizer belongs to another model", name, t->n_vocab,
                           n_vocab);
    if (rc == RAD_OK) rc = rad_tokenizer_serialize(t, &blob, &blob_len);
    if (rc == RAD_OK) rc = rad_container_add_blob(w, "tokenizer.bin", blob, blob_len);
    free(blob);
    rad_tokenizer_free(t);
    free(json);
    free(config);
    return rc;
}

static int cmp_group(const void *a, const void *b)
{
    const RadWeightEntry *const *x = a, *const *y = b;
    if ((*x)->d.group != (*y)->d.group) return (*x)->d.group < (*y)->d.group ? -1 : 1;
    return *x < *y ? -1 : *x > *y;      /* stable: declaration order within a group */
}

/* What --quant takes: the encodings plugins are built for, then llama.cpp's
** recipes, which the "as stored" plugin (quant "gguf") serves with each
** tensor's encoding chosen by formats/quantize_recipe.c. */
static const char *const plugin_quants[] = {"f32", "f16", "bf16", "q8_0", "q4_k", "q4_0", "mxfp4"};

const char *rad_convert_quant_canonical(const char *quant)
{
    if (!quant) return NULL;
    for (size_t i = 0; i < sizeof plugin_quants / sizeof *plugin_quants; i++)
        if (strcasecmp(quant, plugin_quants[i]) == 0) return plugin_quants[i];
    return rad_quant_recipe_name(quant);
}

const char *rad_convert_quant_list(void)
{
    return "f32, f16, bf16, q8_0, q6_k, q5_k_m, q5_k_s, q4_k_m, q4_k_s, q4_k, q4_0, mxfp4";
}

/* Which encoding weight `w` gets: the plugin's, or under a recipe (the
** plugin declares it "as stored", enc < 0) the recipe's. */
static int weight_enc(const RadBuilder *b, const RadWeightEntry *w, const char *recipe)
{
    if (w->d.enc >= 0 || !recipe) return w->d.enc;
    int tied = rad_builder_find_weight(b, "output.weight") < 0;
    for (int i = 0; i < b->n_weights && !tied; i++)
        tied = !strcmp(b->weights[i].name, "output.weight") && b->weights[i].source &&
               !strcmp(b->weights[i].source, "token_embd.weight");
    RadRecipeTensor t = {
        .name = w->name, .rank = w->d.rank, .cols = w->d.rank ? w->d.shape[w->d.rank - 1] : 1,
        .n_layers = b->meta->n_layers, .n_expert = b->meta->n_expert, .head_tied = tied,
    };
    return rad_quant_recipe_enc(recipe, &t);
}

/* Record NAME@e: slice e (`bytes` long, at `data`) of the stack `name`, in
** movement group `group` (docs/FORMAT.md, "Experts"). */
static int add_slice(RadContainerWriter *w, const char *name, int64_t e, int enc, int rank, const int64_t *shape,
                     int32_t group, const void *data, uint64_t bytes)
{
    size_t cap = strlen(name) + 24;
    char *slice = malloc(cap);
    if (!slice) return RAD_E_NOMEM;
    rad_slice_name(slice, cap, name, e);
    int rc = rad_container_add_tensor(w, slice, enc, rank, shape, group, data, bytes);
    free(slice);
    return rc;
}

/* Encode and write n weights.  One weight is one record.  A run of stacks
** (n > 1, or one stack) is written slice by slice: record NAME@e of each,
** for e = 0, 1, ..., in group + e, so a reader fetches expert e of a layer
** with one read of one 4 KiB-aligned run (docs/FORMAT.md, "Experts").
** Encoding problems are collected in pr and the weight skipped; returns
** nonzero only when the writer fails. */
static int write_weights(RadContainerWriter *w, const RadCheckpoint *ck, const RadBuilder *b,
                         RadWeightEntry *const *we, int n, const char *recipe, const char *canon,
                         const char *plugin_name, Problems *pr, uint64_t *written, int *n_written)
{
    void *bytes[n];
    uint64_t size[n];
    int enc[n], ok = 1, rc = RAD_OK;
    for (int k = 0; k < n; k++) {
        bytes[k] = NULL;
        size[k] = 0;
        enc[k] = -1;
        if (!we[k]->map_mode) {
            add_problem(pr, "plugin %s declares '%s' without a name map entry", plugin_name, we[k]->name);
            ok = 0;
            continue;
        }
        enc[k] = weight_enc(b, we[k], recipe);
        if (enc[k] < 0) {
            add_problem(pr, "plugin %s declares '%s' as stored, and --quant %s is no recipe", plugin_name,
                        we[k]->name, canon);
            ok = 0;
            continue;
        }
        bytes[k] = encode_weight(ck, we[k], enc[k], &size[k], pr);
        if (!bytes[k]) ok = 0;
    }
    if (ok && pr->n == 0) {
        if (we[0]->d.n_slices == 0) {
            rc = rad_container_add_tensor(w, we[0]->name, enc[0], we[0]->d.rank, we[0]->d.shape, we[0]->d.group,
                                          bytes[0], size[0]);
        } else {
            const int64_t slices = we[0]->d.n_slices;
            for (int64_t e = 0; e < slices && rc == RAD_OK; e++)
                for (int k = 0; k < n && rc == RAD_OK; k++) {
                    const RadWeightDecl *d = &we[k]->d;
                    const uint64_t one = size[k] / (uint64_t)slices;
                    rc = add_slice(w, we[k]->name, e, enc[k], d->rank - 1, d->shape + 1, d->group + (int32_t)e,
                                   (const uint8_t *)bytes[k] + e * one, one);
                }
        }
        if (rc == RAD_OK)
            for (int k = 0; k < n; k++) {
                *written += size[k];
                (*n_written)++;
            }
    }
    for (int k = 0; k < n; k++) free(bytes[k]);
    return rc;
}

int rad_convert_hf(const char *dir, const char *out_path, const char *quant, const char *plugin_dir, FILE *log)
{
    return rad_convert_hf_named(dir, out_path, quant, plugin_dir, NULL, log);
}

int rad_convert_hf_named(const char *dir, const char *out_path, const char *quant, const char *plugin_dir,
                         const char *name, FILE *log)
{
    const char *canon = rad_convert_quant_canonical(quant);
    if (!canon) return rad_error_set(RAD_E_ARG, "--quant %s: choose %s", quant, rad_convert_quant_list());
    const char *recipe = rad_quant_recipe_name(canon);
    quant = recipe ? "gguf" : canon;      /* the plugin's format */

    RadCheckpoint *ck = NULL;
    RadPluginSet set = {0};
    RadMetaTable meta_table;
    rad_meta_table_init(&meta_table);
    RadBuilder b;
    memset(&b, 0, sizeof b);
    RadContainerWriter *w = NULL;
    RadWeightEntry **order = NULL;
    Problems pr = {0};
    char config_path[4096];
    snprintf(config_path, sizeof config_path, "%s/config.json", dir);

    int rc = rad_checkpoint_open(dir, &ck);
    if (rc) goto done;
    const RadMetaTable *cfg = rad_checkpoint_config(ck);
    const RadMetaKV *arch = config_key(cfg, "architectures.0");
    if (!arch || arch->type != RAD_META_STRING) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: 'architectures' is missing: cannot tell which model this is",
                           config_path);
        goto done;
    }
    char *pdir = rad_plugin_dir_resolve(plugin_dir);
    rc = rad_plugins_load(pdir, &set);
    free(pdir);
    if (rc) goto done;
    const RadArchPlugin *plugin = NULL;
    rc = find_plugin(&set, arch->s, quant, config_path, &plugin);
    if (rc) goto done;

    rc = meta_from_config(cfg, &meta_table, config_path);
    if (rc) goto done;
    rad_meta_table_set_string(&meta_table, "arch.id", plugin->info->arch_id);
    rad_meta_table_set_string(&meta_table, "arch.quant", quant);
    if (recipe) rad_meta_table_set_string(&meta_table, "model.quant_recipe", recipe);
    rad_meta_table_set_string(&meta_table, "arch.hf_name", arch->s);
    const char *base = strrchr(dir, '/');
    rad_meta_table_set_string(&meta_table, "model.name", name ? name : base && base[1] ? base + 1 : dir);
    RadModelMeta meta;
    rc = rad_meta_from_table(&meta_table, &meta, config_path);
    if (!rc) rc = rad_meta_check(&meta, config_path);
    if (rc) goto done;
    int64_t bound = layers_bound(ck);
    if (meta.n_layers > bound) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: num_hidden_layers = %d, but the checkpoint's tensors are for at "
                           "most %lld layers: the config does not belong to these weights", config_path,
                           meta.n_layers, (long long)bound);
        goto done;
    }

    /* Shapes do not depend on the deployment: declare at the smallest one. */
    RadBuildCtx ctx = {.struct_size = sizeof ctx, .world_size = 1, .max_tok = 1, .max_seqs = 1, .max_ctx = 1,
                       .max_out_rows = 1, .kv_enc = RAD_ENC_F16, .scope = ""};
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, &ctx);
    void *instance = NULL;      /* the converter needs only the builder's tables */
    int declared = plugin->declare(&b, &meta, &ctx, &instance);
    plugin->release(instance);
    rc = rad_builder_finish(&b, config_path);
    if (rc) goto done;
    if (declared) {
        rc = rad_error_set(declared, "%s: plugin %s could not declare the model", config_path, plugin->info->name);
        goto done;
    }

    rad_container_sweep_partials(out_path, log); /* what a killed conversion to out_path left */
    rc = rad_container_create(out_path, &w);
    if (rc) goto done;
    rc = rad_container_set_meta(w, &meta_table);
    if (rc) goto done;

    /* One group's tensors are contiguous in the file: write by group. */
    order = calloc((size_t)(b.n_weights ? b.n_weights : 1), sizeof *order);
    if (!order) { rc = RAD_E_NOMEM; goto done; }
    int n_order = 0;
    for (int i = 0; i < b.n_weights; i++)
        if (!b.weights[i].source) order[n_order++] = &b.weights[i];
    qsort(order, (size_t)n_order, sizeof *order, cmp_group);

    uint64_t written = 0;
    int n_written = 0;
    for (int i = 0; i < n_order;) {
        /* The stacks of one MoE layer (same group, same slice count: its
        ** experts' gate, up, down, biases) are encoded together and written
        ** slice-major, so expert e's pieces sit together in group + e. */
        int run = 1;
        if (order[i]->d.n_slices > 0)
            while (i + run < n_order && order[i + run]->d.group == order[i]->d.group &&
                   order[i + run]->d.n_slices == order[i]->d.n_slices)
                run++;
        rc = write_weights(w, ck, &b, order + i, run, recipe, canon, plugin->info->name, &pr, &written, &n_written);
        if (rc) goto done;
        i += run;
    }
    int64_t n_mtp = 0;
    const RadMetaKV *mtp = config_key(cfg, "num_nextn_predict_layers");
    if (mtp && mtp->type == RAD_META_INT && mtp->i > 0 && mtp->i <= RAD_LIMIT_META_INT) n_mtp = mtp->i;
    rc = dropped_tensors(ck, &b, &pr, config_path, meta.n_layers, n_mtp);
    if (rc) goto done;
    for (int i = 0; i < b.n_weights; i++) {
        const RadWeightEntry *we = &b.weights[i];
        if (we->source && rad_builder_find_weight(&b, we->source) < 0)
            add_problem(&pr, "'%s' is a view of '%s', which is not declared", we->name, we->source);
    }
    if (pr.n) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: %d problem%s converting for plugin %s:%s", dir, pr.n,
                           pr.n == 1 ? "" : "s", plugin->info->name, pr.text);
        goto done;
    }

    rc = add_tokenizer(ck, w, dir, meta.n_vocab, log);
    if (rc) goto done;
    static const char *side_files[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                       "generation_config.json", "chat_template.jinja"};
    for (size_t i = 0; i < sizeof side_files / sizeof *side_files; i++) {
        char *data = NULL;
        size_t len = 0;
        if (rad_checkpoint_read_file(ck, side_files[i], &data, &len) != RAD_OK) continue;
        rc = rad_container_add_blob(w, side_files[i], data, len);
        free(data);
        if (rc) goto done;
    }
    rc = rad_container_finish(w);
    w = NULL;
    if (rc) goto done;
    if (log)
        fprintf(log, "converted %s -> %s: %s, plugin %s, %d tensors, %.1f MB\n", dir, out_path, arch->s,
                plugin->info->name, n_written, (double)written / 1e6);

done:
    if (w) rad_container_abort(w);
    free(order);
    free(pr.text);
    rad_builder_free(&b);
    rad_meta_table_free(&meta_table);
    if (set.dir) rad_plugins_free(&set);
    if (ck) rad_checkpoint_close(ck);
    return rc;
}

/* ------------------------------------------------------------------ GGUF */

static int cmp_container_group(const void *a, const void *b)
{
    const RadContainerTensor *const *x = a, *const *y = b;
    if ((*x)->group != (*y)->group) return (*x)->group < (*y)->group ? -1 : 1;
    return strcmp((*x)->name, (*y)->name);
}

/* A stacked expert tensor of a GGUF: blk.N.*_exps.* with a leading expert
** dimension (llama.cpp's ffn_{gate,up,down}_exps and their biases). */
static int is_expert_stack(const RadContainerTensor *t)
{
    return t->group >= 0 && t->rank >= 2 && t->shape[0] > 1 && t->shape[0] <= RAD_LIMIT_EXPERTS &&
           strstr(t->name, "_exps.") != NULL;
}

/* The n stacks of layer `layer` written slice by slice, expert-major, as
** the HF converter writes them (write_weights): NAME@e in a group of its
** own per expert, so a .rad made from a GGUF streams its experts too. */
static int write_expert_slices(RadContainerWriter *w, const RadContainerTensor *const *stack, int n, int32_t layer,
                               const char *path)
{
    const int64_t experts = stack[0]->shape[0];
    const int32_t group = RAD_GROUP_EXPERTS + layer * (int32_t)experts;
    int rc = RAD_OK;
    for (int64_t e = 0; e < experts && !rc; e++)
        for (int k = 0; k < n && !rc; k++) {
            const RadContainerTensor *t = stack[k];
            const uint64_t one = t->size / (uint64_t)experts;
            rc = add_slice(w, t->name, e, t->enc, t->rank - 1, t->shape + 1, group + (int32_t)e,
                           (const uint8_t *)t->data + e * one, one);
            if (rc) rad_error_prefix(rc, "%s: tensor '%s', expert %lld: ", path, t->name, (long long)e);
        }
    return rc;
}

/* A GGUF becomes a .rad by copying: the same tensors, bytes and encodings
** (nothing is requantized), the translated metadata and the tokenizer blob.
** Tensors are written layer by layer so each layer is one movement group,
** but for the routed experts: each expert of a layer is a group of its own
** (docs/FORMAT.md, "Experts"). */
int rad_convert_gguf(const char *path, const char *out_path, FILE *log)
{
    RadContainer *c = NULL;
    RadContainerWriter *w = NULL;
    const RadContainerTensor **order = NULL;
    int rc = rad_container_open_gguf(path, &c);
    if (rc) return rc;
    rad_container_sweep_partials(out_path, log); /* what a killed conversion to out_path left */
    rc = rad_container_create(out_path, &w);
    if (!rc) rc = rad_container_set_meta(w, &c->meta);
    if (!rc && !(order = calloc((size_t)(c->n_tensors ? c->n_tensors : 1), sizeof *order)))
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
    uint64_t bytes = 0;
    if (!rc) {
        for (int i = 0; i < c->n_tensors; i++) order[i] = &c->tensors[i];
        qsort(order, (size_t)c->n_tensors, sizeof *order, cmp_container_group);
    }
    for (int i = 0; !rc && i < c->n_tensors;) {
        /* One layer (or the ungrouped tensors): its other tensors, then its
        ** expert stacks slice by slice, each expert a group of its own. */
        int end = i + 1;
        while (end < c->n_tensors && order[end]->group == order[i]->group) end++;
        const RadContainerTensor *stack[16];
        int n = 0;
        for (int j = i; !rc && j < end; j++) {
            const RadContainerTensor *t = order[j];
            if (is_expert_stack(t) && n < 16 && (n == 0 || t->shape[0] == stack[0]->shape[0])) {
                stack[n++] = t;
                continue;
            }
            rc = rad_container_add_tensor(w, t->name, t->enc, t->rank, t->shape, t->group, t->data, t->size);
            if (rc) rad_error_prefix(rc, "%s: tensor '%s': ", path, t->name);
            bytes += t->size;
        }
        if (!rc && n) rc = write_expert_slices(w, stack, n, order[i]->group, path);
        for (int k = 0; k < n; k++) bytes += stack[k]->size;
        i = end;
    }
    for (int i = 0; !rc && i < c->n_blobs; i++)
        rc = rad_container_add_blob(w, c->blobs[i].name, c->blobs[i].data, c->blobs[i].size);
    if (!rc) {
        rc = rad_container_finish(w);
        w = NULL;
    }
    if (!rc && log)
        fprintf(log, "converted %s -> %s: %d tensors copied as stored, %.1f MB\n", path, out_path, c->n_tensors,
                (double)bytes / 1e6);
    if (w) rad_container_abort(w);
    free(order);
    rad_container_close(c);
    return rc;
}
