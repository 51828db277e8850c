/*
** hf_config.h: a Hugging Face config.json, flattened into a RadMetaTable.
**
** The converter and the architecture plugins never walk JSON; they ask the
** table for "hidden_size" or "rope_scaling.factor".  The flattening rules:
**
**   nested objects   joined with dots:        rope_scaling.factor
**   arrays           one key per element:     eos_token_id.0, eos_token_id.1
**                    plus their length (INT): eos_token_id.length
**   true / false     INT 1 / 0
**   null             skipped: the key is absent, as if never written
**   numbers          a JSON integer (no '.', no exponent) is INT,
**                    anything else is FLOAT
**   strings          STRING
**
** Should two paths flatten to the same key ({"a.b": 1, "a": {"b": 2}}), the
** one written later in the file wins, as a later duplicate key does in
** Python's json module.
*/
#ifndef RAD_HF_CONFIG_H
#define RAD_HF_CONFIG_H

#include "meta_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read the config.json at `path` and add its flattened keys to `out`, an
** initialised table (existing keys with the same names are replaced).
** Returns 0 or:
**   RAD_E_NOTFOUND  no such file ("PATH: not found: is this a Hugging Face
**                   model folder?")
**   RAD_E_IO        the file could not be read
**   RAD_E_FORMAT    not JSON (the message gives jansson's line and column),
**                   or the top level is not an object
**   RAD_E_NOMEM
** On failure `out` is unchanged when it was empty on entry (the usual case);
** a non-empty table may have received some keys. */
int rad_hf_config_load(const char *path, RadMetaTable *out);

/* The same for a NUL-terminated JSON text already in memory;
** `name_for_messages` stands in for the path in error messages. */
int rad_hf_config_load_string(const char *json, const char *name_for_messages, RadMetaTable *out);

#ifdef __cplusplus
}
#endif
#endif /* RAD_HF_CONFIG_H */
