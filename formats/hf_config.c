/*
** hf_config.c: read a Hugging Face config.json into a RadMetaTable.
**
** jansson parses (and reports line and column when the text is not JSON);
** this file only walks the tree and names its leaves.  The walk first
** collects every leaf in file order, then settles keys that flatten to the
** same name (the later one wins), and only then touches the caller's table,
** so a failure leaves an empty table empty and loading n keys costs
** O(n log n) however hostile the document.
*/
#include "hf_config.h"
#include "rad_limits.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A config.json is a few kilobytes; anything past this is not one. */
#define CONFIG_MAX_BYTES RAD_LIMIT_CONFIG_BYTES

/* ------------------------------------------------------------ the walk */

/* One leaf of the document, in file order.  `s` points into the json_t
** tree, which outlives the list. */
typedef struct Leaf {
    char *key;
    int type;
    int64_t i;
    double f;
    const char *s;
    size_t seq;             /* position in file order */
    int keep;               /* 0 when a later leaf has the same key */
} Leaf;

typedef struct Walk {
    const char *name;       /* for messages */
    Leaf *leaves;
    size_t n, cap;
    char *key;              /* the path of the value being visited */
    size_t klen, kcap;
} Walk;

/* Append `part` to the current key, preceded by a dot unless the key is
** empty.  Returns 0 or RAD_E_NOMEM. */
static int key_push(Walk *w, const char *part)
{
    size_t plen = strlen(part);
    size_t need = w->klen + 1 + plen + 1;
    if (need > w->kcap) {
        size_t cap = w->kcap ? w->kcap : 64;
        while (cap < need) cap *= 2;
        char *k = realloc(w->key, cap);
        if (!k) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", w->name);
        w->key = k;
        w->kcap = cap;
    }
    if (w->klen) w->key[w->klen++] = '.';
    memcpy(w->key + w->klen, part, plen + 1);
    w->klen += plen;
    return 0;
}

/* Cut the current key back to `len` characters. */
static void key_pop(Walk *w, size_t len)
{
    w->klen = len;
    w->key[len] = 0;
}

/* Record a leaf under the current key.  Returns 0, RAD_E_FORMAT or NOMEM. */
static int add_leaf(Walk *w, int type, int64_t i, double f, const char *s)
{
    if (w->klen == 0)
        return rad_error_set(RAD_E_FORMAT, "%s: a top-level key is the empty string: "
                             "not a Hugging Face config.json", w->name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        Leaf *l = cap > SIZE_MAX / sizeof *l ? NULL : realloc(w->leaves, cap * sizeof *l);
        if (!l) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", w->name);
        w->leaves = l;
        w->cap = cap;
    }
    if (w->n >= RAD_LIMIT_META_KEYS)
        return rad_error_set(RAD_E_FORMAT, "%s: more than %d keys, over the limit (RAD_LIMIT_META_KEYS): "
                             "not a model configuration", w->name, RAD_LIMIT_META_KEYS);
    if (s && strlen(s) > RAD_LIMIT_META_STRING_BYTES)
        return rad_error_set(RAD_E_FORMAT, "%s: key '%.200s': a string of %zu bytes, over the limit of %u "
                             "(RAD_LIMIT_META_STRING_BYTES): not a model configuration", w->name, w->key,
                             strlen(s), RAD_LIMIT_META_STRING_BYTES);
    Leaf *l = &w->leaves[w->n];
    l->key = strdup(w->key);
    if (!l->key) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", w->name);
    l->type = type;
    l->i = i;
    l->f = f;
    l->s = s;
    l->seq = w->n;
    l->keep = 1;
    w->n++;
    return 0;
}

/* Visit `v` under the current key.  jansson bounds the nesting depth of what
** it parses, so the recursion is bounded too. */
static int walk_value(Walk *w, json_t *v)
{
    size_t mark = w->klen;
    int rc = 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *child;
        json_object_foreach(v, k, child) {
            if ((rc = key_push(w, k))) return rc;
            rc = walk_value(w, child);
            key_pop(w, mark);
            if (rc) return rc;
        }
        return 0;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        char num[32];
        for (size_t idx = 0; idx < n; idx++) {
            snprintf(num, sizeof num, "%zu", idx);
            if ((rc = key_push(w, num))) return rc;
            rc = walk_value(w, json_array_get(v, idx));
            key_pop(w, mark);
            if (rc) return rc;
        }
        if ((rc = key_push(w, "length"))) return rc;
        rc = add_leaf(w, RAD_META_INT, (int64_t)n, 0.0, NULL);
        key_pop(w, mark);
        return rc;
    }
    case JSON_STRING:
        return add_leaf(w, RAD_META_STRING, 0, 0.0, json_string_value(v));
    case JSON_INTEGER:
        return add_leaf(w, RAD_META_INT, (int64_t)json_integer_value(v), 0.0, NULL);
    case JSON_REAL:
        return add_leaf(w, RAD_META_FLOAT, 0, json_real_value(v), NULL);
    case JSON_TRUE:
        return add_leaf(w, RAD_META_INT, 1, 0.0, NULL);
    case JSON_FALSE:
        return add_leaf(w, RAD_META_INT, 0, 0.0, NULL);
    case JSON_NULL:
        return 0;   /* null means "not set": leave the key absent */
    }
    return 0;
}

/* ------------------------------------------- settling duplicate keys */

static int leaf_by_key_then_seq(const void *a, const void *b)
{
    const Leaf *x = *(const Leaf *const *)a, *y = *(const Leaf *const *)b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Clear `keep` on every leaf that a later leaf of the same key overrides. */
static int mark_overridden(Walk *w)
{
    if (w->n < 2) return 0;
    Leaf **order = malloc(w->n * sizeof *order);
    if (!order) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", w->name);
    for (size_t i = 0; i < w->n; i++) order[i] = &w->leaves[i];
    qsort(order, w->n, sizeof *order, leaf_by_key_then_seq);
    for (size_t i = 0; i + 1 < w->n; i++)
        if (strcmp(order[i]->key, order[i + 1]->key) == 0) order[i]->keep = 0;
    free(order);
    return 0;
}

/* Move the kept leaves, in file order, into `out`. */
static int store_leaves(const Walk *w, RadMetaTable *out)
{
    RadMetaTable fresh;
    rad_meta_table_init(&fresh);
    for (size_t i = 0; i < w->n; i++) {
        const Leaf *l = &w->leaves[i];
        if (!l->keep) continue;
        RadMetaKV kv = {.key = l->key, .type = l->type, .i = l->i, .f = l->f, .s = l->s};
        int rc = rad_meta_table_append(&fresh, &kv);
        if (rc) {
            rad_meta_table_free(&fresh);
            return rad_error_prefix(rc, "%s: ", w->name);
        }
    }
    if (out->n == 0) {          /* the usual case: hand the table over whole */
        rad_meta_table_free(out);
        *out = fresh;
        return 0;
    }
    int rc = 0;
    for (int i = 0; i < fresh.n && !rc; i++) {
        const RadMetaKV *kv = &fresh.kv[i];
        if (kv->type == RAD_META_INT) rc = rad_meta_table_set_int(out, kv->key, kv->i);
        else if (kv->type == RAD_META_FLOAT) rc = rad_meta_table_set_float(out, kv->key, kv->f);
        else rc = rad_meta_table_set_string(out, kv->key, kv->s);
    }
    rad_meta_table_free(&fresh);
    return rc ? rad_error_prefix(rc, "%s: ", w->name) : 0;
}

/* --------------------------------------------------------- the loaders */

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* Parse `len` bytes of JSON text and flatten it into `out`. */
static int load_text(const char *text, size_t len, const char *name, RadMetaTable *out)
{
    json_error_t err;
    json_t *root = json_loadb(text, len, 0, &err);
    if (!root) {
        if (err.line > 0)
            return rad_error_set(RAD_E_FORMAT, "%s: not valid JSON at line %d, column %d: %s: "
                                 "repair the file or download it again",
                                 name, err.line, err.column, err.text);
        return rad_error_set(RAD_E_FORMAT, "%s: not valid JSON: %s: repair the file or download "
                             "it again", name, err.text);
    }
    if (!json_is_object(root)) {
        int rc = rad_error_set(RAD_E_FORMAT, "%s: the top level is %s, not an object: "
                               "not a Hugging Face config.json", name, json_type_name(root));
        json_decref(root);
        return rc;
    }
    Walk w = {.name = name};
    int rc = key_push(&w, "");          /* allocates the key buffer */
    if (!rc) rc = walk_value(&w, root);
    if (!rc) rc = mark_overridden(&w);
    if (!rc) rc = store_leaves(&w, out);
    for (size_t i = 0; i < w.n; i++) free(w.leaves[i].key);
    free(w.leaves);
    free(w.key);
    json_decref(root);
    return rc;
}

int rad_hf_config_load_string(const char *json, const char *name_for_messages, RadMetaTable *out)
{
    const char *name = name_for_messages ? name_for_messages : "config.json";
    if (!json || !out) return rad_error_set(RAD_E_ARG, "%s: no JSON text or no table given", name);
    return load_text(json, strlen(json), name, out);
}

int rad_hf_config_load(const char *path, RadMetaTable *out)
{
    if (!path || !out) return rad_error_set(RAD_E_ARG, "config.json: no path or no table given");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return rad_error_set(RAD_E_NOTFOUND, "%s: not found: is this a Hugging Face model folder?", path);
        return rad_error_set(RAD_E_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return rad_error_set(RAD_E_IO, "%s: not a regular file: expected a Hugging Face config.json", path);
    }
    if ((uint64_t)st.st_size > CONFIG_MAX_BYTES) {
        close(fd);
        return rad_error_set(RAD_E_FORMAT, "%s: %lld bytes is far too large for a config.json "
                             "(the limit is %u MiB, RAD_LIMIT_CONFIG_BYTES): not a model configuration",
                             path, (long long)st.st_size, CONFIG_MAX_BYTES >> 20);
    }
    size_t size = (size_t)st.st_size;
    char *text = malloc(size + 1);
    if (!text) {
        close(fd);
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, text + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int rc = rad_error_set(RAD_E_IO, "%s: read failed: %s", path,
                                   r < 0 ? strerror(errno) : "the file shrank while being read");
            free(text);
            close(fd);
            return rc;
        }
        got += (size_t)r;
    }
    close(fd);
    text[size] = 0;
    int rc = load_text(text, size, path, out);
    free(text);
    return rc;
}
