/*
** meta_table.h: an owning table of RadMetaKV entries.
**
** A model's free-form metadata (config.json flattened, or the "meta" object
** of a .rad header) travels as a RadMetaTable.  The table owns every key and
** every string value; entries keep the order in which keys were first added,
** so a listing of the table reads like the file it came from.
**
** Lookups are linear: tables hold tens to a few thousand keys and are read
** once, at load time.  Loaders that add many keys they have already made
** unique use rad_meta_table_append, which does not search.
*/
#ifndef RAD_META_TABLE_H
#define RAD_META_TABLE_H

#include "rad_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct RadMetaTable {
    int n, cap;             /* entries in use, entries allocated */
    RadMetaKV *kv;          /* kv[0..n): owned, as are kv[i].key and kv[i].s */
} RadMetaTable;

/* Make `t` an empty table.  No allocation happens until the first set. */
void rad_meta_table_init(RadMetaTable *t);

/* Free every key, string and the entry array; `t` is left empty and may be
** used again.  NULL is allowed. */
void rad_meta_table_free(RadMetaTable *t);

/* Set `key` to an integer, a float or a copy of the string `v`.  An existing
** entry with the same key is replaced in place (it keeps its position, and
** may change type); otherwise a new entry is appended.  The key and string
** are copied.  An INT entry gets f = (double)v; a FLOAT entry gets i = v
** truncated toward zero (0 for NaN, saturated at the int64 limits).
** Returns 0, RAD_E_ARG (NULL or empty key, NULL string) or RAD_E_NOMEM. */
int rad_meta_table_set_int(RadMetaTable *t, const char *key, int64_t v);
int rad_meta_table_set_float(RadMetaTable *t, const char *key, double v);
int rad_meta_table_set_string(RadMetaTable *t, const char *key, const char *v);

/* Append a copy of `kv` (its type, and i, f or s as that type requires; the
** other numeric field is recomputed as set_* does) without looking for an
** existing entry with the same key.  The caller guarantees the key is not
** in the table yet: for loaders that have already made their keys unique,
** so that loading n keys costs O(n) rather than O(n^2).
** Returns 0, RAD_E_ARG (bad key, unknown type, NULL string) or RAD_E_NOMEM. */
int rad_meta_table_append(RadMetaTable *t, const RadMetaKV *kv);

/* The entry for `key`, or NULL when absent.  The pointer stays valid until
** the table is next modified or freed. */
const RadMetaKV *rad_meta_table_find(const RadMetaTable *t, const char *key);

#ifdef __cplusplus
}
#endif
#endif /* RAD_META_TABLE_H */
