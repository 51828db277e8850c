/*
** fuzz_common.h: shared by the libFuzzer targets in tests/fuzz/.
**
** The parsers under test open files by path and map them, so each input is
** written to an anonymous memory file (memfd) and opened through
** /proc/self/fd/N: no disk traffic, nothing left behind, and the parser
** exercises exactly the open/fstat/mmap path it uses on real files.
*/
#ifndef RAD_FUZZ_COMMON_H
#define RAD_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Write `size` bytes to a fresh memfd and put its /proc path in `path`.
** Returns the descriptor (close it when done) or -1. */
static int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

#endif /* RAD_FUZZ_COMMON_H */
