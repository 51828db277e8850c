/*
** checkpoint.c: one Hugging Face model folder as one config and one tensor
** namespace.
**
** This module decides which files make up the weights (a single
** model.safetensors, or the shards a model.safetensors.index.json lists),
** opens them through safetensors.c, and checks that the index and the
** shards agree.  It does not interpret config keys or tensor names; that is
** the architecture plugin's job through its name map.
*/
#include "checkpoint.h"

#include "hf_config.h"
#include "rad_limits.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WEIGHTS_FILE "model.safetensors"
#define INDEX_FILE "model.safetensors.index.json"

/* One tensor and the shard it lives in. */
typedef struct Entry {
    const RadStTensor *t;
    int shard;
} Entry;

struct RadCheckpoint {
    char *dir;
    RadMetaTable config;
    int n_shards;
    RadSafetensors **shards;    /* owned; shards[i]->path names the file */
    int n_tensors;
    Entry *tensors;             /* sorted by tensor name */
};

/* ------------------------------------------------------------ helpers */

/* A malloc'd "DIR/NAME", or NULL when out of memory. */
static char *join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    int slash = dl > 0 && dir[dl - 1] != '/';
    char *p = malloc(dl + (size_t)slash + nl + 1);
    if (!p) return NULL;
    memcpy(p, dir, dl);
    if (slash) p[dl] = '/';
    memcpy(p + dl + (size_t)slash, name, nl + 1);
    return p;
}

/* A name that stays inside the folder: not empty, not absolute, and with
** no ".." component. */
static int is_inside_name(const char *name)
{
    if (!name[0] || name[0] == '/') return 0;
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.') return 0;
        p += len;
        if (*p == '/') p++;
    }
    return 1;
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Read the regular file `path` whole (at most `max` bytes) into a malloc'd,
** NUL-terminated buffer.  Returns 0, RAD_E_NOTFOUND, RAD_E_IO, RAD_E_FORMAT
** (too large) or RAD_E_NOMEM. */
static int slurp(const char *path, uint64_t max, const char *limit, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return rad_error_set(RAD_E_NOTFOUND, "%s: not found", path);
        return rad_error_set(RAD_E_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rad_error_set(RAD_E_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > max) {
        close(fd);
        return rad_error_set(RAD_E_FORMAT, "%s: %lld bytes is more than the %llu this file may "
                             "have (%s): it is not what its name says", path, (long long)sb.st_size,
                             (unsigned long long)max, limit);
    }
    size_t size = (size_t)sb.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int rc = rad_error_set(RAD_E_IO, "%s: read failed: %s", path,
                                   r < 0 ? strerror(errno) : "the file shrank while being read");
            free(buf);
            close(fd);
            return rc;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[size] = 0;
    *data = buf;
    *len = size;
    return 0;
}

/* ----------------------------------------------------------- the shards */

/* Open DIR/`file` as shard number ck->n_shards.  `listed_in` names the index
** that listed it, or NULL for a lone model.safetensors. */
static int add_shard(RadCheckpoint *ck, const char *file, const char *listed_in)
{
    char *path = join(ck->dir, file);
    if (!path) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", ck->dir);
    RadSafetensors *st;
    int rc = rad_safetensors_open(path, &st);
    if (rc == RAD_E_NOTFOUND && listed_in)
        rad_error_set(rc, "%s: not found, but %s lists it: the download is incomplete; download "
                      "the model again", path, listed_in);
    free(path);
    if (rc) return rc;
    ck->shards[ck->n_shards++] = st;
    return 0;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Open every shard that the index at DIR/model.safetensors.index.json
** names, and check that each tensor it maps is where it says. */
static int open_indexed(RadCheckpoint *ck, const char *index_path)
{
    char *text;
    size_t len;
    int rc = slurp(index_path, RAD_LIMIT_ST_INDEX_BYTES, "RAD_LIMIT_ST_INDEX_BYTES", &text, &len);
    if (rc) return rc;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root)
        return rad_error_set(RAD_E_FORMAT, "%s: not valid JSON at line %d, column %d: %s: download "
                             "the model again", index_path, jerr.line, jerr.column, jerr.text);
    json_t *map = json_object_get(root, "weight_map");
    const char **files = NULL;
    size_t n_map = json_is_object(map) ? json_object_size(map) : 0;
    if (!json_is_object(map) || n_map == 0) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: no \"weight_map\" object naming the shards: the "
                           "file is damaged; download the model again", index_path);
        goto done;
    }
    if (n_map > INT32_MAX) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: too many tensors", index_path);
        goto done;
    }

    /* The distinct shard names, sorted. */
    files = malloc(n_map * sizeof *files);
    if (!files) {
        rc = rad_error_set(RAD_E_NOMEM, "%s: out of memory", index_path);
        goto done;
    }
    const char *tensor;
    json_t *file;
    size_t n_files = 0;
    json_object_foreach(map, tensor, file) {
        if (!json_is_string(file) || !is_inside_name(json_string_value(file))) {
            rc = rad_error_set(RAD_E_FORMAT, "%s: tensor '%.200s' maps to something that is not a "
                               "file name inside the folder: the file is damaged or hostile",
                               index_path, tensor);
            goto done;
        }
        files[n_files++] = json_string_value(file);
    }
    qsort(files, n_files, sizeof *files, compare_strings);
    size_t n_unique = 0;
    for (size_t i = 0; i < n_files; i++)
        if (n_unique == 0 || strcmp(files[n_unique - 1], files[i]) != 0) files[n_unique++] = files[i];

    ck->shards = calloc(n_unique, sizeof *ck->shards);
    if (!ck->shards) {
        rc = rad_error_set(RAD_E_NOMEM, "%s: out of memory", index_path);
        goto done;
    }
    for (size_t i = 0; i < n_unique && !rc; i++) rc = add_shard(ck, files[i], INDEX_FILE);
    if (rc) goto done;

    /* Every tensor the index maps must be in the shard it names. */
    json_object_foreach(map, tensor, file) {
        const char *name = json_string_value(file);
        const char **hit = bsearch(&name, files, n_unique, sizeof *files, compare_strings);
        assert(hit);   /* every name in the map went into `files` */
        if (!rad_safetensors_find(ck->shards[hit - files], tensor)) {
            rc = rad_error_set(RAD_E_FORMAT, "%s: tensor '%.200s' is mapped to '%.200s', but that "
                               "file has no such tensor: the download is incomplete or mixes two "
                               "versions; download the model again", index_path, tensor, name);
            goto done;
        }
    }
done:
    free(files);
    json_decref(root);
    return rc;
}

static int entry_by_name(const void *a, const void *b)
{
    return strcmp(((const Entry *)a)->t->name, ((const Entry *)b)->t->name);
}

/* Gather the tensors of every shard into one sorted namespace. */
static int build_namespace(RadCheckpoint *ck)
{
    size_t total = 0;
    for (int s = 0; s < ck->n_shards; s++) total += (size_t)ck->shards[s]->n_tensors;
    if (total > INT32_MAX) return rad_error_set(RAD_E_FORMAT, "%s: too many tensors", ck->dir);
    ck->tensors = malloc((total ? total : 1) * sizeof *ck->tensors);
    if (!ck->tensors) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", ck->dir);
    for (int s = 0; s < ck->n_shards; s++)
        for (int i = 0; i < ck->shards[s]->n_tensors; i++)
            ck->tensors[ck->n_tensors++] = (Entry){&ck->shards[s]->tensors[i], s};
    qsort(ck->tensors, (size_t)ck->n_tensors, sizeof *ck->tensors, entry_by_name);
    for (int i = 1; i < ck->n_tensors; i++) {
        const Entry *a = &ck->tensors[i - 1], *b = &ck->tensors[i];
        if (strcmp(a->t->name, b->t->name) == 0)
            return rad_error_set(RAD_E_FORMAT, "%s: tensor '%.200s' is in both %s and %s: the "
                                 "folder mixes two downloads; download the model again", ck->dir,
                                 a->t->name, ck->shards[a->shard]->path, ck->shards[b->shard]->path);
    }
    return 0;
}

/* ---------------------------------------------------------- open/close */

/* Find and open the weights of ck->dir. */
static int open_weights(RadCheckpoint *ck)
{
    char *single = join(ck->dir, WEIGHTS_FILE), *index = join(ck->dir, INDEX_FILE);
    int rc = 0;
    if (!single || !index) {
        rc = rad_error_set(RAD_E_NOMEM, "%s: out of memory", ck->dir);
    } else if (file_exists(single)) {
        ck->shards = calloc(1, sizeof *ck->shards);
        rc = ck->shards ? add_shard(ck, WEIGHTS_FILE, NULL)
                        : rad_error_set(RAD_E_NOMEM, "%s: out of memory", ck->dir);
    } else if (file_exists(index)) {
        rc = open_indexed(ck, index);
    } else {
        char *bin = join(ck->dir, "pytorch_model.bin"), *bin_index = join(ck->dir, "pytorch_model.bin.index.json");
        if (bin && bin_index && (file_exists(bin) || file_exists(bin_index)))
            rc = rad_error_set(RAD_E_UNSUPPORTED, "%s: the weights are PyTorch .bin files, which "
                               "radiance does not read (loading them can run code); use a "
                               "repository that has model.safetensors", ck->dir);
        else
            rc = rad_error_set(RAD_E_NOTFOUND, "%s: no weights: looked for %s and %s: is the "
                               "download complete?", ck->dir, WEIGHTS_FILE, INDEX_FILE);
        free(bin);
        free(bin_index);
    }
    free(single);
    free(index);
    return rc;
}

void rad_checkpoint_close(RadCheckpoint *ck)
{
    if (!ck) return;
    for (int s = 0; s < ck->n_shards; s++) rad_safetensors_close(ck->shards[s]);
    free(ck->shards);
    free(ck->tensors);
    rad_meta_table_free(&ck->config);
    free(ck->dir);
    free(ck);
}

int rad_checkpoint_open(const char *dir, RadCheckpoint **out)
{
    if (!out) return rad_error_set(RAD_E_ARG, "rad_checkpoint_open: out is NULL");
    *out = NULL;
    if (!dir || !dir[0]) return rad_error_set(RAD_E_ARG, "rad_checkpoint_open: no folder given");
    RadCheckpoint *ck = calloc(1, sizeof *ck);
    if (!ck || !(ck->dir = strdup(dir))) {
        free(ck);
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory", dir);
    }
    rad_meta_table_init(&ck->config);
    char *config = join(dir, "config.json");
    int rc = config ? rad_hf_config_load(config, &ck->config)
                    : rad_error_set(RAD_E_NOMEM, "%s: out of memory", dir);
    free(config);
    if (!rc) rc = open_weights(ck);
    if (!rc) rc = build_namespace(ck);
    if (rc) {
        rad_checkpoint_close(ck);
        return rc;
    }
    *out = ck;
    return 0;
}

/* ------------------------------------------------------------ queries */

const RadMetaTable *rad_checkpoint_config(const RadCheckpoint *ck)
{
    return ck ? &ck->config : NULL;
}

const RadStTensor *rad_checkpoint_tensor(const RadCheckpoint *ck, const char *name)
{
    if (!ck || !name || ck->n_tensors == 0) return NULL;
    RadStTensor probe = {.name = (char *)name};
    Entry key = {&probe, 0};
    const Entry *e = bsearch(&key, ck->tensors, (size_t)ck->n_tensors, sizeof *ck->tensors, entry_by_name);
    return e ? e->t : NULL;
}

int rad_checkpoint_tensor_count(const RadCheckpoint *ck)
{
    return ck ? ck->n_tensors : 0;
}

const RadStTensor *rad_checkpoint_tensor_at(const RadCheckpoint *ck, int i)
{
    if (!ck || i < 0 || i >= ck->n_tensors) return NULL;
    return ck->tensors[i].t;
}

int rad_checkpoint_read_file(const RadCheckpoint *ck, const char *name, char **data, size_t *len)
{
    if (!data || !len) return rad_error_set(RAD_E_ARG, "rad_checkpoint_read_file: NULL output");
    *data = NULL;
    *len = 0;
    if (!ck || !name || !is_inside_name(name))
        return rad_error_set(RAD_E_ARG, "rad_checkpoint_read_file: '%s' is not a file name inside "
                             "the model folder", name ? name : "(null)");
    char *path = join(ck->dir, name);
    if (!path) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", ck->dir);
    int rc = slurp(path, RAD_LIMIT_SIDE_FILE_BYTES, "RAD_LIMIT_SIDE_FILE_BYTES", data, len);
    free(path);
    return rc;
}

const char *rad_checkpoint_dir(const RadCheckpoint *ck)
{
    return ck ? ck->dir : NULL;
}
