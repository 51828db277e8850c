/*
** name_index.c: the hash table of name_index.h.
*/
#include "name_index.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rad_types.h"

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* The slot holding key, or the empty slot where it would go. */
static int find_slot(const char **keys, int cap, const char *key)
{
    int i = (int)(hash_name(key) & (uint32_t)(cap - 1));
    while (keys[i] && strcmp(keys[i], key) != 0) i = (i + 1) & (cap - 1);
    return i;
}

static int grow(RadNameIndex *x)
{
    int cap = x->cap ? x->cap * 2 : 64;
    const char **keys = calloc((size_t)cap, sizeof *keys);
    int *values = malloc((size_t)cap * sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return RAD_E_NOMEM;
    }
    for (int i = 0; i < x->cap; i++)
        if (x->keys[i]) {
            int at = find_slot(keys, cap, x->keys[i]);
            keys[at] = x->keys[i];
            values[at] = x->values[i];
        }
    free(x->keys);
    free(x->values);
    x->keys = keys;
    x->values = values;
    x->cap = cap;
    return RAD_OK;
}

int rad_name_index_put(RadNameIndex *x, const char *key, int value)
{
    if ((x->n + 1) * 2 > x->cap && grow(x) != RAD_OK) return RAD_E_NOMEM;
    int at = find_slot(x->keys, x->cap, key);
    if (!x->keys[at]) x->n++;
    x->keys[at] = key;
    x->values[at] = value;
    return RAD_OK;
}

int rad_name_index_get(const RadNameIndex *x, const char *key)
{
    if (x->cap == 0) return -1;
    int at = find_slot(x->keys, x->cap, key);
    return x->keys[at] ? x->values[at] : -1;
}

void rad_name_index_free(RadNameIndex *x)
{
    free(x->keys);
    free(x->values);
    memset(x, 0, sizeof *x);
}
