/*
** tokenizer_cache.h: prepared tokenizers kept on disk, so a GGUF opens fast.
**
** A GGUF carries its tokenizer as metadata (tokens, scores, merges or none),
** and turning that into what the runtime wants costs time every open: for
** Gemma 3's 262k tokens, deriving 515k merges from the scores takes about
** half a second.  The result, in the compact form tokenizer_store.c writes
** ("tokenizer.bin"), is kept in a cache folder the application names
** ($XDG_CACHE_HOME/radiance/tokenizers), one file per tokenizer:
**
**   KEY.tok      "RADTOKC1", the 32-byte key, u64 length, the blob
**
** The key is a sha256 over the running program's build id and the GGUF's
** first part up to its tensor data (header, every metadata key and value,
** the tensor table): the same file under any name, path or link shares an
** entry, a changed file or another build of radiance never meets an old
** one.  An entry is mapped, not read, and its blob is checked by the loader
** that uses it (tokenizer_store.c checks every count, offset and id), so a
** damaged or foreign file is rebuilt, not trusted.
**
** The cache is an optimisation and never an error: a folder that cannot be
** made or written, a link where an entry should be (never followed), a full
** disk, all cost only the rebuild.  Entries are written through a temporary
** file with an unpredictable name, created exclusively, and renamed into
** place; at most RAD_TOKCACHE_MAX_ENTRIES are kept, the least recently used
** going first.
*/
#ifndef RAD_TOKENIZER_CACHE_H
#define RAD_TOKENIZER_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define RAD_TOKCACHE_MAX_ENTRIES 32

/* The key of the GGUF at `path` (its first part): 0, or a negative code
** (the file cannot be read) with no message set. */
int rad_tokcache_key(const char *path, uint64_t data_start, unsigned char key[32]);

/* The blob cached under `key` in `dir`, mapped read-only: *blob and *len
** point into the mapping *map of *map_len bytes (munmap it when done).  0
** on a hit; RAD_E_NOTFOUND otherwise (a miss, an unreadable entry, one whose
** header or size is wrong), never with a message.  The blob itself is
** checked by its reader (rad_tokenizer_load, which refuses any damage), and
** a caller whose load fails rebuilds and puts a fresh entry. */
int rad_tokcache_map(const char *dir, const unsigned char key[32], const void **blob, size_t *len, void **map,
                     size_t *map_len);

/* Keep `blob` under `key` in `dir` (made when missing, its parent must
** exist).  Best effort: failures are silent and leave no file behind. */
void rad_tokcache_put(const char *dir, const unsigned char key[32], const void *blob, size_t len);

#endif /* RAD_TOKENIZER_CACHE_H */
