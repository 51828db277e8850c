/*
** test_file_access.c: model files mapped and read (formats/file_access.c).
**
** Pins: a map reads the file's bytes; exact reads at an offset, and a read
** past the end refused naming the file and the offset (never zeros); pages
** given back are counted, whole pages inside the range only, and the bytes
** still read correctly afterwards (the kernel pages them in again); O_DIRECT
** where the file system allows it, a buffered descriptor where it does not
** (tmpfs, /dev/shm).
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../base/rad_types.h"
#include "../../formats/file_access.h"

enum { SIZE = 5 * 4096 + 123 };

static void write_file(const char *path, uint8_t *bytes)
{
    for (int i = 0; i < SIZE; i++) bytes[i] = (uint8_t)(i * 7 + 3);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, SIZE, f), SIZE);
    assert_int_equal(fclose(f), 0);
}

static void test_map_read_and_drop(void **state)
{
    (void)state;
    char path[] = "/tmp/radiance-file-access-XXXXXX";
    int tmp = mkstemp(path);
    assert_true(tmp >= 0);
    close(tmp);
    static uint8_t bytes[SIZE];
    write_file(path, bytes);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    const uint8_t *map = rad_file_map_fd(fd, SIZE, path);
    assert_non_null(map);
    assert_memory_equal(map, bytes, SIZE);

    uint8_t got[300];
    assert_int_equal(rad_file_read_at(map, got, 4000, sizeof got), RAD_OK);
    assert_memory_equal(got, bytes + 4000, sizeof got);
    rad_error_clear();
    assert_int_equal(rad_file_read_at(map, got, SIZE - 10, sizeof got), RAD_E_IO);
    if (!strstr(rad_error_message(), path) || !strstr(rad_error_message(), "offset"))
        fail_msg("message: %s", rad_error_message());

    uint64_t before = rad_file_dropped_bytes();
    rad_file_drop(map + 100, 3 * 4096);             /* whole pages inside: 4096..12287 */
    assert_int_equal(rad_file_dropped_bytes() - before, 2 * 4096);
    rad_file_drop(bytes, 4096);                      /* not a map: ignored */
    assert_int_equal(rad_file_dropped_bytes() - before, 2 * 4096);
    assert_memory_equal(map, bytes, SIZE);           /* paged in again */
    rad_file_unmap(map, SIZE);
    unlink(path);
}

static void test_direct_where_allowed(void **state)
{
    (void)state;
    static uint8_t bytes[SIZE];
    const char *dirs[] = {"/var/tmp", "/dev/shm"};
    for (int d = 0; d < 2; d++) {
        struct stat st;
        if (stat(dirs[d], &st) != 0) continue;
        char path[64];
        snprintf(path, sizeof path, "%s/radiance-direct-XXXXXX", dirs[d]);
        int tmp = mkstemp(path);
        if (tmp < 0) continue;
        close(tmp);
        write_file(path, bytes);
        int direct = -1;
        size_t align = 0;
        int fd = rad_file_open_direct(path, &direct, &align);
        assert_true(fd >= 0);
        if (direct) {
            assert_int_equal(align, 4096);
            void *buf = aligned_alloc(4096, 8192);
            assert_int_equal(rad_file_pread(fd, buf, 4096, 8192, path), RAD_OK);
            assert_memory_equal(buf, bytes + 4096, 8192);
            free(buf);
        } else {
            uint8_t got[100];
            assert_int_equal(rad_file_pread(fd, got, 10, sizeof got, path), RAD_OK);
            assert_memory_equal(got, bytes + 10, sizeof got);
        }
        print_message("%s: %s\n", dirs[d], direct ? "O_DIRECT" : "buffered (O_DIRECT refused)");
        close(fd);
        unlink(path);
    }
    int direct;
    size_t align;
    assert_true(rad_file_open_direct("/nonexistent/radiance", &direct, &align) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_read_and_drop),
        cmocka_unit_test(test_direct_where_allowed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
