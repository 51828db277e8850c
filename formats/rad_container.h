/*
** rad_container.h: the .rad model file, written once by the converter and
** mapped read-only by the engine.  docs/FORMAT.md describes the bytes.
**
** A .rad file is a 64-byte preamble, a data region of tensors and named
** blobs (tokenizer.json and friends), and a JSON header written last, so
** that the writer streams tensors to disk as it converts them without
** knowing them in advance.  Tensors are 64-byte aligned; a change of
** movement group starts a fresh 4 KiB page, so each group (one expert's
** gate, up and down) is one contiguous, aligned run that a single O_DIRECT
** read can fetch.
*/
#ifndef RAD_CONTAINER_H
#define RAD_CONTAINER_H

#include "meta_table.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RAD_CONTAINER_VERSION 1
#define RAD_CONTAINER_PREAMBLE 64        /* bytes */
#define RAD_CONTAINER_TENSOR_ALIGN 64    /* every tensor and blob offset */
#define RAD_CONTAINER_GROUP_ALIGN 4096   /* data_offset, group starts, blobs, data_size */
#define RAD_CONTAINER_RANK_MAX 4

/* The group of a tensor that is not part of any movement unit (dense
** weights, norms, embeddings).  Real groups are numbered from 0. */
#define RAD_GROUP_NONE (-1)

/* ----------------------------------------------------------------- writing */

typedef struct RadContainerWriter RadContainerWriter;

/* Start writing the .rad file `path`.  The bytes go to a temporary file in
** the same directory ("PATH.partial.XXXXXX") that rad_container_finish
** renames over `path`, so a reader never sees a half-written model and an
** existing file at `path` survives a failed conversion.
** Returns 0, RAD_E_IO ("PATH: directory 'D' does not exist", and nothing is
** created; or the temporary file cannot be made) or RAD_E_NOMEM. */
int rad_container_create(const char *path, RadContainerWriter **out);

/* Store a copy of `meta` as the model's metadata (a second call replaces
** the first).  Returns 0, RAD_E_ARG (a FLOAT that is NaN or infinite: JSON
** cannot carry it) or RAD_E_NOMEM. */
int rad_container_set_meta(RadContainerWriter *w, const RadMetaTable *meta);

/* Write `size` bytes of `data` as the blob `name` (tokenizer.json, a chat
** template, ...).  The blob starts a fresh 4 KiB page and ends the current
** movement group (see add_tensor).  Names are unique among blobs.
** Returns 0, RAD_E_ARG (empty or duplicate name), RAD_E_STATE (an earlier
** write failed), RAD_E_IO or RAD_E_NOMEM. */
int rad_container_add_blob(RadContainerWriter *w, const char *name, const void *data, uint64_t size);

/* Write one tensor: `rank` (0..4) dimensions `shape`, outermost first (the
** last is contiguous; rank 0 is a scalar), encoded as `enc`, `size` bytes
** at `data`.  `size` must equal rad_encoding_row_bytes(enc, shape[rank-1])
** times the product of the other dimensions.  `group` is the tensor's
** movement group, or RAD_GROUP_NONE.  Tensors are laid out in the order
** added, each 64-byte aligned; whenever the group differs from the previous
** tensor's (or a blob came between), the tensor starts 4 KiB aligned.  The
** tensors of one group must be added one after another: a group that was
** left (by another group, RAD_GROUP_NONE, or a blob) cannot be resumed.
** Returns 0, RAD_E_ARG (empty or duplicate name, unknown encoding, bad
** rank or shape, size mismatch, group < -1, group resumed), RAD_E_STATE,
** RAD_E_IO or RAD_E_NOMEM.  An RAD_E_ARG leaves the writer usable. */
int rad_container_add_tensor(RadContainerWriter *w, const char *name, int enc, int rank,
                             const int64_t *shape, int32_t group, const void *data, uint64_t size);

/* Write the header and the preamble, fsync, and rename the temporary file
** over the path given to create.  Frees `w` whatever happens; on failure
** the temporary file is removed and nothing is left at `path` that was not
** there before.  Returns 0, RAD_E_STATE, RAD_E_IO or RAD_E_NOMEM. */
int rad_container_finish(RadContainerWriter *w);

/* Give up: remove the temporary file and free `w`.  NULL is allowed. */
void rad_container_abort(RadContainerWriter *w);

/* Remove the partial files PATH.partial.XXXXXX that earlier writers of path
** left when they were killed: each is locked while written, so one whose
** lock can be taken (and that has not been touched for a few seconds) has
** no writer.  Each removal is one line on log (may be NULL).  Returns how
** many were removed. */
int rad_container_sweep_partials(const char *path, FILE *log);

/* ----------------------------------------------------------------- reading */

typedef struct RadContainerTensor {
    const char *name;
    int enc;                    /* RadEncoding */
    int rank;                   /* 0..4 */
    int64_t shape[4];           /* outermost first; unused entries are 0 */
    uint64_t offset, size;      /* bytes, offset relative to the data region */
    int32_t group;              /* movement group, or RAD_GROUP_NONE */
    const void *data;           /* into the read-only map */
} RadContainerTensor;

typedef struct RadContainer {
    const char *path; const uint8_t *map; uint64_t file_size;
    RadMetaTable meta;
    int n_tensors; RadContainerTensor *tensors;     /* sorted by name (strcmp) */
    int n_blobs; struct RadContainerBlob { const char *name; const void *data; uint64_t size; } *blobs;
    uint64_t data_offset, data_size;                /* the data region, in file bytes */
    /* A container built over another file (a GGUF, formats/gguf_container.c)
    ** frees what it owns here; NULL for a .rad. */
    void (*release)(struct RadContainer *c);
    void *release_arg;
} RadContainer;

/* Map the .rad file `path` read-only (PROT_READ, MAP_PRIVATE) and validate
** the preamble, the header and every tensor and blob entry against the
** file before returning.  Everything in *out is owned by it and lives until
** rad_container_close.  Returns 0, RAD_E_NOTFOUND, RAD_E_IO, RAD_E_FORMAT
** (bad magic, truncated, regions past the end or overlapping, an offset or
** size out of bounds or overflowing, a shape whose product overflows or
** disagrees with the size, an unknown encoding name, rank over 4,
** duplicate names, malformed JSON), RAD_E_UNSUPPORTED (another version, or
** flags this reader does not know) or RAD_E_NOMEM; *out is NULL on failure. */
int rad_container_open(const char *path, RadContainer **out);

/* The tensor called `name`, or NULL.  O(log n). */
const RadContainerTensor *rad_container_find(const RadContainer *c, const char *name);

/* The bytes of the blob called `name` (and their count in *size, which may
** be NULL), or NULL when there is no such blob. */
const void *rad_container_blob(const RadContainer *c, const char *name, uint64_t *size);

/* Unmap and free everything.  NULL is allowed. */
void rad_container_close(RadContainer *c);

#ifdef __cplusplus
}
#endif
#endif /* RAD_CONTAINER_H */
