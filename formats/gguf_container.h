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

/* A .gguf path through rad_container_open_gguf, anything else as a .rad. */
int rad_container_open_any(const char *path, RadContainer **out);

#endif
