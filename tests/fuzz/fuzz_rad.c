/*
** fuzz_rad.c: libFuzzer target for the .rad reader (formats/rad_container.c)
** and the metadata checks every open makes (engine/meta_check.c).
**
** Each input is a whole .rad file.  When the reader accepts it, every
** tensor's and blob's first and last byte is read and every name looked up
** again, so a range that escaped validation shows up under AddressSanitizer;
** then the container goes through rad_container_check_model, as `show` and
** `run` put it.  A refusal, of either, must leave a one-line message.
**
** `make fuzz-smoke` builds it against the core built for fuzzing; the seeds
** (tests/fuzz/seeds/rad) are the test fixtures converted (make_seeds.py).
*/
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "rad_container.h"
#include "../../engine/include/radiance.h"

static volatile uint64_t sink;

static void one_line(void)
{
    const char *msg = rad_error_message();
    if (!msg[0] || strchr(msg, '\n')) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    if (fd < 0) return 0;
    RadContainer *c = NULL;
    rad_error_clear();
    if (rad_container_open(path, &c) != 0) {
        if (c) __builtin_trap();
        one_line();
        close(fd);
        return 0;
    }
    for (int i = 0; i < c->n_tensors; i++) {
        const RadContainerTensor *t = &c->tensors[i];
        if (rad_container_find(c, t->name) != t) __builtin_trap();
        if (t->size) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->size - 1];
    }
    for (int i = 0; i < c->n_blobs; i++) {
        uint64_t n = 0;
        const uint8_t *b = rad_container_blob(c, c->blobs[i].name, &n);
        if (!b && n) __builtin_trap();
        if (n) sink += b[0] + b[n - 1];
    }
    for (int i = 0; i < c->meta.n; i++)
        if (c->meta.kv[i].type == RAD_META_STRING) sink += strlen(c->meta.kv[i].s);
    rad_error_clear();
    if (rad_container_check_model(c) != 0) one_line();
    rad_container_close(c);
    close(fd);
    return 0;
}
