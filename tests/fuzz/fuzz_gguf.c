/*
** fuzz_gguf.c: libFuzzer target for the GGUF reader (formats/gguf.c) and the
** tokenizer import on top of it (formats/tokenizer_gguf.c).
**
** Each input is a whole file.  When the reader accepts it, every value,
** array element and tensor byte range it hands out is touched, so a pointer
** or count that escaped validation shows up under AddressSanitizer, and the
** tokenizer is built from the metadata and freed.  A refusal must leave a
** one-line message.
**
**     clang -g -O1 -fsanitize=fuzzer,address,undefined -Ibase -Iformats \
**         tests/fuzz/fuzz_gguf.c formats/gguf.c formats/tokenizer_gguf.c \
**         formats/tokenizer.c base/error.c base/encoding.c -lm -o build/fuzz_gguf
**     build/fuzz_gguf -max_total_time=60 -dict=tests/fuzz/gguf.dict \
**         build/fuzz-corpus/gguf tests/fuzz/seeds/gguf
*/
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_gguf.h"

static volatile uint64_t sink;

/* Read every element of an array value, recursing into nested arrays. */
static void touch_array(const RadGgufValue *a)
{
    for (uint64_t i = 0; i < a->arr.n; i++) {
        switch (a->arr.type) {
        case RAD_GGUF_STRING: {
            uint64_t len;
            const char *s = rad_gguf_arr_str(a, i, &len);
            if (len) sink += (unsigned char)s[len - 1];
            sink += (unsigned char)s[len]; /* the NUL after it */
            break;
        }
        case RAD_GGUF_ARRAY:
            touch_array(rad_gguf_arr_item(a, i));
            break;
        case RAD_GGUF_F32:
        case RAD_GGUF_F64:
            sink += (uint64_t)(rad_gguf_arr_float(a, i) != 0);
            break;
        default:
            sink += (uint64_t)rad_gguf_arr_int(a, i);
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    if (fd < 0) return 0;
    RadGguf *g = NULL;
    rad_error_clear();
    if (rad_gguf_open(path, &g) != 0) {
        if (g || strchr(rad_error_message(), '\n') || !rad_error_message()[0]) __builtin_trap();
        close(fd);
        return 0;
    }
    for (int i = 0; i < rad_gguf_n_keys(g); i++) {
        const RadGgufValue *v = rad_gguf_value(g, i);
        if (rad_gguf_find_key(g, rad_gguf_key(g, i)) != i) __builtin_trap();
        if (v->type == RAD_GGUF_ARRAY)
            touch_array(v);
        else if (v->type == RAD_GGUF_STRING)
            sink += (unsigned char)v->str.s[v->str.len];
    }
    for (int i = 0; i < rad_gguf_n_tensors(g); i++) {
        const RadGgufTensor *t = rad_gguf_tensor(g, i);
        if (rad_gguf_find_tensor(g, t->name) != t) __builtin_trap();
        if (t->size) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->size - 1];
    }
    RadTokenizer *tok = NULL;
    if (rad_tokenizer_from_gguf(g, &tok) == 0) {
        for (int i = 0; i < tok->n_merges; i++) sink += (unsigned char)tok->merge_left[i][0];
        rad_tokenizer_free(tok);
    } else if (tok) {
        __builtin_trap();
    }
    rad_gguf_close(g);
    close(fd);
    return 0;
}
