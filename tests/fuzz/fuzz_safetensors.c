/*
** fuzz_safetensors.c: libFuzzer target for the safetensors reader
** (formats/safetensors.c).
**
** Each input is a whole file.  When the reader accepts it, every tensor's
** first and last byte is read and every name looked up again, so a range
** that escaped validation shows up under AddressSanitizer.  A refusal must
** leave a one-line message.
**
**     clang -g -O1 -fsanitize=fuzzer,address,undefined -Ibase -Iformats \
**         tests/fuzz/fuzz_safetensors.c formats/safetensors.c base/error.c \
**         base/encoding.c -ljansson -o build/fuzz_safetensors
**     build/fuzz_safetensors -max_total_time=60 -dict=tests/fuzz/safetensors.dict \
**         build/fuzz-corpus/safetensors tests/fuzz/seeds/safetensors
*/
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "safetensors.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    if (fd < 0) return 0;
    RadSafetensors *st = NULL;
    rad_error_clear();
    if (rad_safetensors_open(path, &st) != 0) {
        if (st || strchr(rad_error_message(), '\n') || !rad_error_message()[0]) __builtin_trap();
        close(fd);
        return 0;
    }
    for (int i = 0; i < st->n_tensors; i++) {
        const RadStTensor *t = &st->tensors[i];
        if (rad_safetensors_find(st, t->name) != t) __builtin_trap();
        if (t->size) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->size - 1];
    }
    rad_safetensors_close(st);
    close(fd);
    return 0;
}
