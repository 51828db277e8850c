/*
** name_index.h: names to small integers, in constant time.
**
** The builder looks weights and buffers up by name on every declaration and
** every bind; a MoE model declares tens of thousands of weights, so a linear
** scan would make declare quadratic.  This is an open-addressing hash table
** (FNV-1a, linear probing, at most half full) over keys it does not own: the
** caller keeps each key alive as long as the index.
*/
#ifndef RAD_NAME_INDEX_H
#define RAD_NAME_INDEX_H

typedef struct RadNameIndex {
    int cap;                    /* slots, a power of two (0 before the first put) */
    int n;                      /* keys held */
    const char **keys;          /* [cap] NULL = empty */
    int *values;                /* [cap] */
} RadNameIndex;

/* Map key to value (value >= 0), replacing an earlier value.  0, or
** RAD_E_NOMEM (the index is unchanged). */
int  rad_name_index_put(RadNameIndex *x, const char *key, int value);
/* The value of key, or -1. */
int  rad_name_index_get(const RadNameIndex *x, const char *key);
void rad_name_index_free(RadNameIndex *x);

#endif /* RAD_NAME_INDEX_H */
