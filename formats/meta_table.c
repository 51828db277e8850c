/*
** meta_table.c: the owning RadMetaKV table behind meta_table.h.
**
** One job: keep a list of typed key/value pairs and own their memory.  The
** loaders (hf_config.c, rad_container.c) and the converter fill tables; the
** engine reads them.  Nothing here knows what any key means.
*/
#include "meta_table.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void rad_meta_table_init(RadMetaTable *t)
{
    t->n = 0;
    t->cap = 0;
    t->kv = NULL;
}

/* Release what one entry owns. */
static void entry_free(RadMetaKV *kv)
{
    free((char *)kv->key);
    free((char *)kv->s);
    kv->key = NULL;
    kv->s = NULL;
}

void rad_meta_table_free(RadMetaTable *t)
{
    if (!t) return;
    for (int i = 0; i < t->n; i++) entry_free(&t->kv[i]);
    free(t->kv);
    rad_meta_table_init(t);
}

/* Truncate a double toward zero into an int64, saturating instead of
** invoking undefined behaviour for values out of range; NaN gives 0. */
static int64_t truncate_to_int64(double v)
{
    if (isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;   /* 2^63 */
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

/* Make room for one more entry.  Returns 0 or RAD_E_NOMEM. */
static int reserve_one(RadMetaTable *t)
{
    if (t->n < t->cap) return 0;
    if (t->cap > INT_MAX / 2) return rad_error_set(RAD_E_NOMEM, "metadata table: too many keys");
    int cap = t->cap ? t->cap * 2 : 16;
    RadMetaKV *kv = realloc(t->kv, (size_t)cap * sizeof *kv);
    if (!kv) return rad_error_set(RAD_E_NOMEM, "metadata table: out of memory");
    t->kv = kv;
    t->cap = cap;
    return 0;
}

/* Build a fully owned entry from (key, type, i, f, s) into *out: copies the
** key and string and fills the numeric field the type does not carry.
** Returns 0, RAD_E_ARG or RAD_E_NOMEM; *out is untouched on failure. */
static int entry_make(RadMetaKV *out, const char *key, int type, int64_t i, double f, const char *s)
{
    if (!key || !key[0]) return rad_error_set(RAD_E_ARG, "metadata table: a key is empty");
    RadMetaKV kv = {0};
    kv.type = type;
    switch (type) {
    case RAD_META_INT:
        kv.i = i;
        kv.f = (double)i;
        break;
    case RAD_META_FLOAT:
        kv.f = f;
        kv.i = truncate_to_int64(f);
        break;
    case RAD_META_STRING:
        if (!s) return rad_error_set(RAD_E_ARG, "metadata table: key '%s': string value is NULL", key);
        break;
    default:
        return rad_error_set(RAD_E_ARG, "metadata table: key '%s': unknown value type %d", key, type);
    }
    char *key_copy = strdup(key);
    char *s_copy = type == RAD_META_STRING ? strdup(s) : NULL;
    if (!key_copy || (type == RAD_META_STRING && !s_copy)) {
        free(key_copy);
        free(s_copy);
        return rad_error_set(RAD_E_NOMEM, "metadata table: out of memory");
    }
    kv.key = key_copy;
    kv.s = s_copy;
    *out = kv;
    return 0;
}

/* Linear search; returns the index of `key` or -1. */
static int index_of(const RadMetaTable *t, const char *key)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->kv[i].key, key) == 0) return i;
    return -1;
}

/* The common body of the three setters: replace in place or append. */
static int set_entry(RadMetaTable *t, const char *key, int type, int64_t i, double f, const char *s)
{
    RadMetaKV kv;
    int rc = entry_make(&kv, key, type, i, f, s);
    if (rc) return rc;
    int at = index_of(t, key);
    if (at >= 0) {
        entry_free(&t->kv[at]);
        t->kv[at] = kv;
        return 0;
    }
    if ((rc = reserve_one(t))) {
        entry_free(&kv);
        return rc;
    }
    t->kv[t->n++] = kv;
    return 0;
}

int rad_meta_table_set_int(RadMetaTable *t, const char *key, int64_t v)
{
    return set_entry(t, key, RAD_META_INT, v, 0.0, NULL);
}

int rad_meta_table_set_float(RadMetaTable *t, const char *key, double v)
{
    return set_entry(t, key, RAD_META_FLOAT, 0, v, NULL);
}

int rad_meta_table_set_string(RadMetaTable *t, const char *key, const char *v)
{
    return set_entry(t, key, RAD_META_STRING, 0, 0.0, v);
}

int rad_meta_table_append(RadMetaTable *t, const RadMetaKV *in)
{
    if (!in) return rad_error_set(RAD_E_ARG, "metadata table: entry is NULL");
    RadMetaKV kv;
    int rc = entry_make(&kv, in->key, in->type, in->i, in->f, in->s);
    if (rc) return rc;
    if ((rc = reserve_one(t))) {
        entry_free(&kv);
        return rc;
    }
    t->kv[t->n++] = kv;
    return 0;
}

const RadMetaKV *rad_meta_table_find(const RadMetaTable *t, const char *key)
{
    if (!t || !key) return NULL;
    int at = index_of(t, key);
    return at < 0 ? NULL : &t->kv[at];
}
