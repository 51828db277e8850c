/*
** checkpoint.h: a Hugging Face model folder, opened as one thing.
**
** A folder holds config.json, the weights (model.safetensors, or a
** model.safetensors.index.json that spreads them over shards) and optional
** side files (tokenizer.json, tokenizer_config.json, generation_config.json).
** The converter sees one flattened config and one tensor namespace,
** whatever the sharding.
*/
#ifndef RAD_CHECKPOINT_H
#define RAD_CHECKPOINT_H

#include <stddef.h>

#include "meta_table.h"
#include "safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct RadCheckpoint RadCheckpoint;    /* opaque */

/* Open the folder `dir`: DIR/config.json (required, flattened as
** hf_config.h describes), then DIR/model.safetensors if it exists, else
** DIR/model.safetensors.index.json and every shard its "weight_map" names.
** With an index, a tensor the index maps to a shard that lacks it is an
** error; tensors in shards are also kept when the index does not mention
** them.  Tensor names must be unique across shards.
** Returns 0 or RAD_E_NOTFOUND (no config.json; no weights: the message
** names what was looked for; a shard the index names is missing),
** RAD_E_UNSUPPORTED (only PyTorch .bin weights), RAD_E_FORMAT, RAD_E_IO,
** RAD_E_NOMEM.  *out is NULL on failure; close with rad_checkpoint_close. */
int rad_checkpoint_open(const char *dir, RadCheckpoint **out);

/* The flattened config.json; owned by the checkpoint. */
const RadMetaTable *rad_checkpoint_config(const RadCheckpoint *ck);

/* The tensor called `name` in whichever shard holds it, or NULL.  O(log n).
** Owned by the checkpoint; its data lives while the checkpoint is open. */
const RadStTensor *rad_checkpoint_tensor(const RadCheckpoint *ck, const char *name);

/* The number of tensors, and the i-th in name order (0 <= i < count;
** NULL outside). */
int rad_checkpoint_tensor_count(const RadCheckpoint *ck);
const RadStTensor *rad_checkpoint_tensor_at(const RadCheckpoint *ck, int i);

/* Read the optional side file DIR/`name` whole.  On success *data is a
** malloc'd copy the caller frees, with a NUL byte after the *len bytes (so a
** JSON text may be handed to a parser as a string).  Returns 0,
** RAD_E_NOTFOUND (no such file), RAD_E_ARG (a name with '/' or ".."),
** RAD_E_IO or RAD_E_NOMEM; *data is NULL and *len 0 on failure. */
int rad_checkpoint_read_file(const RadCheckpoint *ck, const char *name, char **data, size_t *len);

/* The folder, as passed to rad_checkpoint_open. */
const char *rad_checkpoint_dir(const RadCheckpoint *ck);

/* Close every shard and free everything.  NULL is allowed. */
void rad_checkpoint_close(RadCheckpoint *ck);

#ifdef __cplusplus
}
#endif
#endif /* RAD_CHECKPOINT_H */
