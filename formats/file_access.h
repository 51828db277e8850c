/*
** file_access.h: how radiance reads model files.
**
** Every byte of a model file the engine touches comes through here: the
** read-only maps the containers and GGUF parts are read from, the release
** of mapped pages a run no longer reads (a weight whose kernel copy exists,
** docs/RESIDENCY.md), exact reads at an offset, and the O_DIRECT reads that
** expert streaming will issue.  Keeping them in one module keeps the rules
** in one place: maps are private and read-only, a short read is an error
** naming the file and the offset, never zeros.
*/
#ifndef RAD_FILE_ACCESS_H
#define RAD_FILE_ACCESS_H

#include <stddef.h>
#include <stdint.h>

/* Map `size` bytes of the open regular file `fd` read-only and take the
** descriptor over (closed by rad_file_unmap); `path` names it in messages.
** NULL with errno set when the map fails (fd is closed then too). */
const uint8_t *rad_file_map_fd(int fd, uint64_t size, const char *path);
void rad_file_unmap(const void *map, uint64_t size);

/* The pages inside [p, p + n) are not going to be read again: give them
** back to the system (this process's mapping and, where no other process
** maps them, the page cache).  Only whole pages strictly inside the range;
** a range outside every map is ignored. */
void rad_file_drop(const void *p, uint64_t n);

/* Exactly n bytes of the mapped file that holds `map` from `offset`, by
** pread: RAD_E_IO naming the file and the offset on a short read or an
** error. */
int rad_file_read_at(const void *map, void *dst, uint64_t offset, size_t n);

/* The bytes of mapped files released so far by rad_file_drop. */
uint64_t rad_file_dropped_bytes(void);

/* A descriptor for reading `path` around the page cache (O_DIRECT), and in
** *align the alignment its reads need (of the offset, the length and the
** buffer).  Where the file system refuses O_DIRECT (tmpfs, some FUSE file
** systems) the descriptor is a plain buffered one and *direct is 0.
** -1 with a message when the file cannot be opened. */
int rad_file_open_direct(const char *path, int *direct, size_t *align);
/* Exactly n bytes at offset into dst by pread: RAD_E_IO naming `path` and
** the offset on an error or a short read (a file that shrank under us). */
int rad_file_pread(int fd, void *dst, uint64_t offset, size_t n, const char *path);

#endif /* RAD_FILE_ACCESS_H */
