/*
** file_access.c: model files, mapped and read (file_access.h).
**
** The maps live on a short list with their descriptors, so that a range of
** mapped bytes handed out as a tensor's `data` can be given back with
** posix_fadvise, which wants a descriptor and a file offset, as well as
** madvise, which wants the address.
*/
#include "file_access.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rad_types.h"

typedef struct Mapped {
    const uint8_t *base;
    uint64_t size;
    int fd;
    char *path;
    struct Mapped *next;
} Mapped;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Mapped *maps;
static atomic_uint_fast64_t dropped;

const uint8_t *rad_file_map_fd(int fd, uint64_t size, const char *path)
{
    Mapped *m = calloc(1, sizeof *m);
    char *copy = strdup(path ? path : "?");
    void *base = m && copy ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    int err = m && copy ? errno : ENOMEM;
    if (base == MAP_FAILED) {
        free(m);
        free(copy);
        close(fd);
        errno = err;
        return NULL;
    }
    m->base = base;
    m->size = size;
    m->fd = fd;
    m->path = copy;
    pthread_mutex_lock(&lock);
    m->next = maps;
    maps = m;
    pthread_mutex_unlock(&lock);
    return base;
}

void rad_file_unmap(const void *map, uint64_t size)
{
    if (!map) return;
    pthread_mutex_lock(&lock);
    for (Mapped **at = &maps; *at; at = &(*at)->next)
        if ((*at)->base == map) {
            Mapped *m = *at;
            *at = m->next;
            close(m->fd);
            free(m->path);
            free(m);
            break;
        }
    pthread_mutex_unlock(&lock);
    munmap((void *)map, (size_t)size);
}

/* The map holding [p, p + n), or NULL; the caller holds the lock. */
static const Mapped *holding(const void *p, uint64_t n)
{
    const uint8_t *b = p;
    for (const Mapped *m = maps; m; m = m->next)
        if (b >= m->base && b - m->base + n <= m->size) return m;
    return NULL;
}

void rad_file_drop(const void *p, uint64_t n)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    pthread_mutex_lock(&lock);
    const Mapped *m = holding(p, n);
    if (m) {
        uint64_t off = (uint64_t)((const uint8_t *)p - m->base);
        uint64_t first = (off + page - 1) / page * page, end = (off + n) / page * page;
        if (end > first) {
            (void)madvise((void *)(m->base + first), (size_t)(end - first), MADV_DONTNEED);
            (void)posix_fadvise(m->fd, (off_t)first, (off_t)(end - first), POSIX_FADV_DONTNEED);
            atomic_fetch_add(&dropped, end - first);
        }
    }
    pthread_mutex_unlock(&lock);
}

int rad_file_read_at(const void *map, void *dst, uint64_t offset, size_t n)
{
    pthread_mutex_lock(&lock);
    const Mapped *m = holding(map, 0);
    int fd = m ? m->fd : -1;
    char path[512];
    snprintf(path, sizeof path, "%s", m ? m->path : "?");
    pthread_mutex_unlock(&lock);
    if (fd < 0) return rad_error_set(RAD_E_ARG, "rad_file_read_at: not a mapped model file");
    return rad_file_pread(fd, dst, offset, n, path);
}

int rad_file_pread(int fd, void *dst, uint64_t offset, size_t n, const char *path)
{
    for (size_t done = 0; done < n;) {
        ssize_t got = pread(fd, (uint8_t *)dst + done, n - done, (off_t)(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            return rad_error_set(RAD_E_IO, "%s: reading %zu bytes at offset %llu: %s", path, n,
                                 (unsigned long long)(offset + done), got < 0 ? strerror(errno) : "the file ends there");
        done += (size_t)got;
    }
    return RAD_OK;
}

uint64_t rad_file_dropped_bytes(void) { return atomic_load(&dropped); }

int rad_file_open_direct(const char *path, int *direct, size_t *align)
{
    *direct = 0;
    *align = 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd >= 0) {
        *direct = 1;
        /* The device's logical block is what O_DIRECT needs; 4 KiB covers
        ** every drive this runs on and is what a page-aligned buffer gives. */
        *align = 4096;
        return fd;
    }
    if (errno != EINVAL && errno != EOPNOTSUPP)
        return rad_error_set(errno == ENOENT ? RAD_E_NOTFOUND : RAD_E_IO, "%s: cannot open: %s", path, strerror(errno));
    fd = open(path, O_RDONLY | O_CLOEXEC);      /* tmpfs and friends refuse O_DIRECT: read through the cache */
    if (fd < 0)
        return rad_error_set(errno == ENOENT ? RAD_E_NOTFOUND : RAD_E_IO, "%s: cannot open: %s", path, strerror(errno));
    return fd;
}
