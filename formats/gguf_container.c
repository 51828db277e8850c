/*
** gguf_container.c: a GGUF file seen as a radiance container.
**
** The engine reads models through RadContainer (metadata table, tensor table,
** named blobs).  A GGUF holds the same things under other names, so instead
** of a second loading path this file translates once, at open:
**
**   - metadata: `<arch>.block_count` and friends, GGUF's own keys for every
**     architecture, become the canonical keys (model.n_layers,
**     model.head_dim, ...); `arch.gguf` names the architecture and
**     arch.quant is "gguf", served by plugins that take each weight's
**     encoding as stored; every scalar key is also kept as "gguf.<key>";
**   - tensors: names are already ours (we use GGUF's), dimensions are
**     reversed into outermost-first order, encodings are ggml ids, and the
**     data pointers point into the GGUF's own read-only map: no copy;
**   - the tokenizer (tokenizer.ggml.*) becomes the "tokenizer.bin" blob,
**     read from the tokenizer cache when it has this file's (building it
**     costs about half a second for a 262k vocabulary).
**
** Which kind a file is (GGUF or .rad) is told by its first bytes, never by
** its name: a Hugging Face cache blob or an ollama blob has no extension.
**
** Nothing here knows a model family: which plugin serves an architecture,
** the Hugging Face class its files mirror and the conventions llama.cpp's
** converter follows for it (RoPE pairing, Gemma's norms) are the plugins'
** (rad_arch_gguf_families, RadGgufFamily), applied by the engine when it
** opens the file (engine/plugin.c, rad_plugins_resolve_gguf).
*/
#include "gguf_container.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_cache.h"
#include "tokenizer_gguf.h"

/* What a GGUF container holds besides its tables: the file, and where its
** tokenizer blob came from (the cache's mapping, or a malloc'd build). */
typedef struct GgufHold {
    RadGguf *g;
    char *cache;           /* the tokenizer cache folder, or NULL */
    unsigned char key[32]; /* the cache key, when `keyed` */
    int keyed;
    void *map;             /* the cache entry the blob points into, or NULL */
    size_t map_len;
} GgufHold;

static void release(RadContainer *c)
{
    GgufHold *h = c->release_arg;
    if (!h) return;
    for (int i = 0; i < c->n_blobs; i++)
        if (!h->map) free((void *)c->blobs[i].data);
    if (h->map) munmap(h->map, h->map_len);
    rad_gguf_close(h->g);
    free(h->cache);
    free(h);
}

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp(((const RadContainerTensor *)a)->name, ((const RadContainerTensor *)b)->name);
}

/* Copy the scalar metadata verbatim under "gguf.<key>", for plugins that
** want a key this translation does not name.  GGUF keys are unique (gguf.c
** refuses repeats), so they are appended without a search: n keys cost
** O(n), not O(n^2).  A key too long for the buffer is no key a plugin reads,
** and is left out rather than cut (two cut keys could collide). */
static int copy_scalars(const RadGguf *g, RadMetaTable *t)
{
    char key[512];
    for (int i = 0; i < rad_gguf_n_keys(g); i++) {
        const RadGgufValue *v = rad_gguf_value(g, i);
        if ((size_t)snprintf(key, sizeof key, "gguf.%s", rad_gguf_key(g, i)) >= sizeof key) continue;
        RadMetaKV kv = {.key = key};
        switch (v->type) {
        case RAD_GGUF_U8: case RAD_GGUF_U16: case RAD_GGUF_U32: case RAD_GGUF_U64: case RAD_GGUF_BOOL:
            kv.type = RAD_META_INT;
            kv.i = v->u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v->u;
            break;
        case RAD_GGUF_I8: case RAD_GGUF_I16: case RAD_GGUF_I32: case RAD_GGUF_I64:
            kv.type = RAD_META_INT;
            kv.i = v->i;
            break;
        case RAD_GGUF_F32: case RAD_GGUF_F64:
            kv.type = RAD_META_FLOAT;
            kv.f = v->f;
            break;
        case RAD_GGUF_STRING:
            if (strlen(v->str.s) != v->str.len || v->str.len >= 4096) continue;
            kv.type = RAD_META_STRING;
            kv.s = v->str.s;
            break;
        default:
            continue;           /* arrays (the vocabulary...) are not metadata for plugins */
        }
        int rc = rad_meta_table_append(t, &kv);
        if (rc) return rc;
    }
    return RAD_OK;
}

/* An optional size key that is present must be above zero: a file that
** writes context_length 0 is damaged, not silent about it. */
static int positive_if_present(const RadGguf *g, const char *path, const char *key, int64_t v)
{
    if (!rad_gguf_get(g, key) || v > 0) return RAD_OK;
    return rad_error_set(RAD_E_FORMAT, "%s: metadata %s = %lld: must be above 0: the file is damaged", path, key,
                         (long long)v);
}

/* The canonical model keys from `<arch>.*`. */
static int translate_meta(const RadGguf *g, const char *path, const char *arch, RadMetaTable *t, int tied)
{
    char key[160];
#define ARCH_KEY(k) (snprintf(key, sizeof key, "%s.%s", arch, k), key)
    int64_t layers, embd, heads, kv_heads, head_dim, ff, ctx, rot, window;
    double eps, theta;
    int rc = rad_gguf_get_int(g, ARCH_KEY("block_count"), -1, &layers);
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("embedding_length"), -1, &embd);
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("attention.head_count"), -1, &heads);
    if (rc) return rc;
    if (layers <= 0 || embd <= 0 || heads <= 0)
        return rad_error_set(RAD_E_FORMAT, "%s: a required key is missing: %s.block_count, .embedding_length and .attention.head_count must be set",
                             path, arch);
    const RadGgufValue *kv_value = rad_gguf_get(g, ARCH_KEY("attention.head_count_kv"));
    if (kv_value && kv_value->type == RAD_GGUF_ARRAY)
        return rad_error_set(RAD_E_UNSUPPORTED, "%s: %s.attention.head_count_kv varies per layer; not served yet", path, arch);
    rc = rad_gguf_get_int(g, ARCH_KEY("attention.head_count_kv"), heads, &kv_heads);
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("attention.key_length"), embd / heads, &head_dim);
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("feed_forward_length"), 0, &ff);
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("context_length"), 0, &ctx);
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("rope.dimension_count"), head_dim, &rot);
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("attention.sliding_window"), 0, &window);
    if (!rc) rc = rad_gguf_get_float(g, ARCH_KEY("attention.layer_norm_rms_epsilon"), 1e-6, &eps);
    if (!rc) rc = rad_gguf_get_float(g, ARCH_KEY("rope.freq_base"), 10000.0, &theta);
    if (!rc) rc = positive_if_present(g, path, ARCH_KEY("attention.head_count_kv"), kv_heads);
    if (!rc) rc = positive_if_present(g, path, ARCH_KEY("attention.key_length"), head_dim);
    if (!rc) rc = positive_if_present(g, path, ARCH_KEY("context_length"), ctx);
    if (!rc) rc = positive_if_present(g, path, ARCH_KEY("rope.dimension_count"), rot);
    if (rc) return rc;

    int64_t vocab = 0;
    const RadGgufValue *tokens = rad_gguf_get(g, "tokenizer.ggml.tokens");
    const RadGgufTensor *embd_t = rad_gguf_find_tensor(g, "token_embd.weight");
    if (tokens && tokens->type == RAD_GGUF_ARRAY) vocab = (int64_t)tokens->arr.n;
    if (embd_t && embd_t->n_dims == 2) vocab = embd_t->ne[1];      /* the model's rows rule */
    rad_gguf_get_int(g, ARCH_KEY("vocab_size"), vocab, &vocab);

    rc = rad_meta_table_set_string(t, "arch.gguf", arch);
    if (!rc) rc = rad_meta_table_set_string(t, "arch.quant", "gguf");
    const char *name = NULL;
    rad_gguf_get_string(g, "general.name", NULL, &name);
    if (!rc) rc = rad_meta_table_set_string(t, "model.name", name ? name : path);
    struct { const char *k; int64_t v; } ints[] = {
        {"model.n_layers", layers}, {"model.n_embd", embd}, {"model.n_head", heads},
        {"model.n_head_kv", kv_heads}, {"model.head_dim", head_dim}, {"model.n_ff", ff},
        {"model.n_vocab", vocab}, {"model.n_ctx_train", ctx}, {"model.n_rot", rot},
        {"tie_word_embeddings", tied},
    };
    for (size_t i = 0; !rc && i < sizeof ints / sizeof *ints; i++) rc = rad_meta_table_set_int(t, ints[i].k, ints[i].v);
    if (!rc) rc = rad_meta_table_set_float(t, "model.rms_eps", eps);
    if (!rc) rc = rad_meta_table_set_float(t, "model.rope_theta", theta);
    if (!rc && window > 0) rc = rad_meta_table_set_int(t, "sliding_window", window);
    /* Routed experts (llama.cpp's expert_* keys), in the canonical names the
    ** Hugging Face import writes. */
    int64_t n_expert = 0, n_used = 0, ff_expert = 0;
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("expert_count"), 0, &n_expert);
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("expert_used_count"), 0, &n_used);
    if (!rc) rc = rad_gguf_get_int(g, ARCH_KEY("expert_feed_forward_length"), ff, &ff_expert);
    if (!rc && n_expert > 0) {
        rc = rad_meta_table_set_int(t, "model.n_expert", n_expert);
        if (!rc) rc = rad_meta_table_set_int(t, "model.n_expert_used", n_used);
        if (!rc) rc = rad_meta_table_set_int(t, "model.n_ff_expert", ff_expert);
    }
    /* A shared expert's size (Qwen2-MoE), under config.json's name for it. */
    int64_t ff_shared = 0;
    if (!rc && rad_gguf_get(g, ARCH_KEY("expert_shared_feed_forward_length"))) {
        rc = rad_gguf_get_int(g, ARCH_KEY("expert_shared_feed_forward_length"), 0, &ff_shared);
        if (!rc) rc = rad_meta_table_set_int(t, "shared_expert_intermediate_size", ff_shared);
    }

    /* RoPE scaling, in the spelling the plugins read from config.json. */
    const char *scaling = NULL;
    double factor = 1.0;
    rad_gguf_get_string(g, ARCH_KEY("rope.scaling.type"), "none", &scaling);
    rad_gguf_get_float(g, ARCH_KEY("rope.scaling.factor"), 1.0, &factor);
    if (!rc && strcmp(scaling, "none") != 0) {
        rc = rad_meta_table_set_string(t, "rope_scaling.rope_type", scaling);
        if (!rc) rc = rad_meta_table_set_float(t, "rope_scaling.factor", factor);
        /* YaRN's original context and ramp bounds, when the converter wrote
        ** them (the betas only in newer llama.cpp files; absent is 32 and 1) */
        int64_t orig_ctx;
        double beta;
        if (!rc && rad_gguf_get(g, ARCH_KEY("rope.scaling.original_context_length")) &&
            rad_gguf_get_int(g, ARCH_KEY("rope.scaling.original_context_length"), 0, &orig_ctx) == RAD_OK)
            rc = rad_meta_table_set_int(t, "rope_scaling.original_max_position_embeddings", orig_ctx);
        if (!rc && rad_gguf_get(g, ARCH_KEY("rope.scaling.yarn_beta_fast")) &&
            rad_gguf_get_float(g, ARCH_KEY("rope.scaling.yarn_beta_fast"), 0, &beta) == RAD_OK)
            rc = rad_meta_table_set_float(t, "rope_scaling.beta_fast", beta);
        if (!rc && rad_gguf_get(g, ARCH_KEY("rope.scaling.yarn_beta_slow")) &&
            rad_gguf_get_float(g, ARCH_KEY("rope.scaling.yarn_beta_slow"), 0, &beta) == RAD_OK)
            rc = rad_meta_table_set_float(t, "rope_scaling.beta_slow", beta);
    }
    /* llama.cpp's converter writes Llama 3.1+'s llama3 scaling as a table of
    ** per-pair divisors, the tensor rope_freqs.weight, and no scaling keys. */
    if (!rc && rad_gguf_find_tensor(g, "rope_freqs.weight")) rc = rad_meta_table_set_int(t, "rope_freq_factors", 1);

    /* The sampling the model's makers recommend (llama.cpp's converter writes
    ** general.sampling.* from generation_config.json); the app applies it
    ** under the user's own settings (docs/SAMPLING.md). */
    static const char *const sampling_float[] = {"general.sampling.temp", "general.sampling.top_p",
                                                 "general.sampling.min_p", "general.sampling.penalty_repeat"};
    static const char *const sampling_int[] = {"general.sampling.top_k", "general.sampling.penalty_last_n"};
    for (size_t i = 0; !rc && i < sizeof sampling_float / sizeof *sampling_float; i++) {
        double v;
        if (rad_gguf_get(g, sampling_float[i]) && rad_gguf_get_float(g, sampling_float[i], 0, &v) == RAD_OK)
            rc = rad_meta_table_set_float(t, sampling_float[i], v);
        else rad_error_clear();
    }
    for (size_t i = 0; !rc && i < sizeof sampling_int / sizeof *sampling_int; i++) {
        int64_t v;
        if (rad_gguf_get(g, sampling_int[i]) && rad_gguf_get_int(g, sampling_int[i], 0, &v) == RAD_OK)
            rc = rad_meta_table_set_int(t, sampling_int[i], v);
        else rad_error_clear();
    }

    /* End of sequence, for generation to stop. */
    int64_t eos = -1;
    rad_gguf_get_int(g, "tokenizer.ggml.eos_token_id", -1, &eos);
    if (!rc && eos >= 0) rc = rad_meta_table_set_int(t, "eos_token_id", eos);

#undef ARCH_KEY
    if (rc && !rad_error_message()[0]) rad_error_set(rc, "%s: out of memory reading the metadata", path);
    return rc;
}

/* Where the first part's tensor data starts (the key of the tokenizer
** cache covers everything before it), 0 when it holds no tensor. */
static uint64_t first_part_data_start(const RadGguf *g)
{
    uint64_t start = 0;
    for (int i = 0; i < rad_gguf_n_tensors(g); i++) {
        const RadGgufTensor *t = rad_gguf_tensor(g, i);
        if (t->part == 0 && (!start || t->file_offset < start)) start = t->file_offset;
    }
    return start;
}

/* The tokenizer built from the metadata, in its compact form (malloc'd);
** kept in the cache when the container has a key for it. */
static int build_tokenizer_blob(GgufHold *h, void **blob, size_t *len)
{
    RadTokenizer *t = NULL;
    int rc = rad_tokenizer_from_gguf(h->g, &t);
    if (rc) return rc;
    rc = rad_tokenizer_serialize(t, blob, len);
    rad_tokenizer_free(t);
    if (!rc && h->keyed) rad_tokcache_put(h->cache, h->key, *blob, *len);
    return rc;
}

/* The tokenizer blob: mapped from the cache when it has this file's, else
** built from the metadata (and kept there). */
static int add_tokenizer_blob(GgufHold *h, RadContainer *c, const char *path)
{
    if (!rad_gguf_get(h->g, "tokenizer.ggml.model")) return RAD_OK;       /* no tokenizer: ids only */
    h->keyed = h->cache && rad_tokcache_key(path, first_part_data_start(h->g), h->key) == RAD_OK;
    void *blob = NULL;
    const void *cached = NULL;
    size_t len = 0;
    int rc = RAD_OK;
    if (h->keyed && rad_tokcache_map(h->cache, h->key, &cached, &len, &h->map, &h->map_len) == RAD_OK)
        blob = (void *)cached;
    else if ((rc = build_tokenizer_blob(h, &blob, &len)))
        return rc;
    c->blobs = calloc(1, sizeof *c->blobs);
    char *name = strdup("tokenizer.bin");
    if (!c->blobs || !name) {
        if (!h->map) free(blob);
        free(name);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    c->blobs[0].name = name;
    c->blobs[0].data = blob;
    c->blobs[0].size = len;
    c->n_blobs = 1;
    return RAD_OK;
}

int rad_container_open_gguf(const char *path, RadContainer **out)
{
    return rad_container_open_gguf_cached(path, NULL, out);
}

int rad_container_open_gguf_cached(const char *path, const char *cache, RadContainer **out)
{
    *out = NULL;
    RadGguf *g = NULL;
    int rc = rad_gguf_open(path, &g);
    if (rc) return rc;
    RadContainer *c = calloc(1, sizeof *c);
    GgufHold *hold = calloc(1, sizeof *hold);
    if (!c || !hold || (cache && !(hold->cache = strdup(cache)))) {
        if (hold) free(hold->cache);
        free(hold);
        free(c);
        rad_gguf_close(g);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    hold->g = g;
    c->path = strdup(path);
    c->release = release;
    c->release_arg = hold;
    rad_meta_table_init(&c->meta);

    const char *arch = NULL;
    rc = rad_gguf_get_string(g, "general.architecture", NULL, &arch);
    if (!rc && !arch) rc = rad_error_set(RAD_E_FORMAT, "%s: general.architecture is missing", path);

    int n = rad_gguf_n_tensors(g);
    c->tensors = calloc((size_t)(n > 0 ? n : 1), sizeof *c->tensors);
    if (!rc && !c->tensors) rc = rad_error_set(RAD_E_NOMEM, "out of memory");
    for (int i = 0; !rc && i < n; i++) {
        const RadGgufTensor *gt = rad_gguf_tensor(g, i);
        RadContainerTensor *ct = &c->tensors[c->n_tensors];
        ct->name = strdup(gt->name);
        if (!ct->name) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); break; }
        c->n_tensors++;
        ct->enc = gt->enc;
        ct->rank = gt->n_dims;
        for (int d = 0; d < gt->n_dims; d++) ct->shape[d] = gt->ne[gt->n_dims - 1 - d];
        ct->size = gt->size;
        ct->offset = gt->file_offset;
        ct->data = gt->data;
        int layer = -1;
        ct->group = sscanf(gt->name, "blk.%d.", &layer) == 1 ? layer : RAD_GROUP_NONE;
    }
    if (!rc) qsort(c->tensors, (size_t)c->n_tensors, sizeof *c->tensors, cmp_tensor);
    if (!rc) rc = copy_scalars(g, &c->meta);
    if (!rc) rc = translate_meta(g, path, arch, &c->meta, rad_gguf_find_tensor(g, "output.weight") == NULL);
    if (!rc) rc = add_tokenizer_blob(hold, c, path);
    if (rc) {
        rad_container_close(c);
        return rc;
    }
    *out = c;
    return RAD_OK;
}

int rad_container_gguf_rebuild_tokenizer(const RadContainer *c, void **blob, size_t *len)
{
    *blob = NULL;
    *len = 0;
    if (c->release != release || !c->release_arg) return RAD_E_NOTFOUND;
    GgufHold *h = c->release_arg;
    if (!h->map) return RAD_E_NOTFOUND; /* built here: rebuilding gives the same */
    return build_tokenizer_blob(h, blob, len);
}

int rad_model_file_kind(const char *path)
{
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return rad_error_set(errno == ENOENT || errno == ENOTDIR ? RAD_E_NOTFOUND : RAD_E_IO, "%s: %s", path,
                             strerror(errno));
    struct stat st;
    unsigned char magic[8] = {0};
    int rc = RAD_OK;
    if (fstat(fd, &st) != 0)
        rc = rad_error_set(RAD_E_IO, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = rad_error_set(RAD_E_FORMAT, "%s: not a regular file (%s): a model is a .rad or a GGUF file", path,
                           S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
    else if (pread(fd, magic, sizeof magic, 0) < 0)
        rc = rad_error_set(RAD_E_IO, "%s: %s", path, strerror(errno));
    close(fd);
    if (rc) return rc;
    if (memcmp(magic, "GGUF", 4) == 0) return RAD_FILE_GGUF;
    if (memcmp(magic, "RADMODEL", 8) == 0) return RAD_FILE_RAD;
    return RAD_FILE_OTHER;
}

int rad_container_open_model(const char *path, const char *tokenizer_cache, RadContainer **out)
{
    *out = NULL;
    int kind = rad_model_file_kind(path);
    if (kind < 0) return kind;
    if (kind == RAD_FILE_OTHER)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: not a model: its magic (first bytes) is neither RADMODEL (a .rad container) "
                             "nor GGUF; check the path, or convert the model with radiance convert",
                             path);
    return kind == RAD_FILE_GGUF ? rad_container_open_gguf_cached(path, tokenizer_cache, out)
                                 : rad_container_open(path, out);
}

int rad_container_open_any(const char *path, RadContainer **out)
{
    return rad_container_open_model(path, NULL, out);
}
