/*
** gguf_container.h: open a GGUF file as a RadContainer (no copy: tensor data
** points into the GGUF's map), so the engine runs GGUF and .rad alike.
*/
#ifndef RAD_GGUF_CONTAINER_H
#define RAD_GGUF_CONTAINER_H

#include "rad_container.h"

/* Map a GGUF (all parts of a split set, given the first) and translate its
** metadata into the canonical keys, its tensors into the container's table
** and its tokenizer into the "tokenizer.bin" blob.  Errors as rad_gguf_open,
** plus RAD_E_UNSUPPORTED for conventions not served yet (named). */
int rad_container_open_gguf(const char *path, RadContainer **out);

/* The same, with the tokenizer taken from (and kept in) the cache folder
** `tokenizer_cache` (tokenizer_cache.h); NULL builds it from the metadata. */
int rad_container_open_gguf_cached(const char *path, const char *tokenizer_cache, RadContainer **out);

/* The tokenizer blob of a GGUF container whose blob came from the tokenizer
** cache, built again from the metadata (and put back in the cache): for a
** reader whose load of the cached blob failed.  *blob is malloc'd.  Returns
** 0, RAD_E_NOTFOUND (not such a container), or the import's error. */
int rad_container_gguf_rebuild_tokenizer(const RadContainer *c, void **blob, size_t *len);

/* What kind of file `path` is, by its first bytes, never by its name (a
** Hugging Face blob, an ollama blob or a copy has none): RAD_FILE_GGUF,
** RAD_FILE_RAD, or RAD_FILE_OTHER (a regular file with neither magic; no
** message).  Anything but a regular file (a FIFO named x.gguf, a device)
** is refused before it is read, so nothing blocks.  Negative:
** RAD_E_NOTFOUND or RAD_E_IO (cannot open), RAD_E_FORMAT (not a regular
** file), with the message naming the path. */
enum { RAD_FILE_OTHER = 0, RAD_FILE_GGUF = 1, RAD_FILE_RAD = 2 };
int rad_model_file_kind(const char *path);

/* A GGUF or a .rad, told apart by rad_model_file_kind; a GGUF's tokenizer
** through `tokenizer_cache` (may be NULL). */
int rad_container_open_model(const char *path, const char *tokenizer_cache, RadContainer **out);

/* rad_container_open_model without a tokenizer cache. */
int rad_container_open_any(const char *path, RadContainer **out);

#endif
