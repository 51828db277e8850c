/*
** fuzz_encode.c: libFuzzer target for encoding and decoding (engine/text)
** with a real vocabulary.
**
** The tokenizer is the one in $RADIANCE_FUZZ_TOKENIZER (default: Qwen3's in
** ../shared, which exercises NFC, the split regex and byte-level BPE).  Each
** input is arbitrary bytes: encoded with and without special-token parsing,
** decoded whole and streamed one token at a time; the streamed text must
** equal the whole decode, and every id must lie in the vocabulary.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/rad_text.h"

static RadText *text;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    const char *path = getenv("RADIANCE_FUZZ_TOKENIZER");
    if (!path) path = "../shared/tokenizers/qwen3/tokenizer.json";
    if (rad_text_open_path(path, &text) != 0) {
        fprintf(stderr, "fuzz_encode: %s\n", rad_error_message());
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int n_vocab = rad_text_data(text)->n_vocab;
    for (int mode = 0; mode < 2; mode++) {
        int32_t *ids = NULL;
        int n = 0;
        int flags = mode ? RAD_ENCODE_ADD_SPECIAL | RAD_ENCODE_PARSE_SPECIAL : 0;
        if (rad_text_encode(text, (const char *)data, size, flags, &ids, &n) != 0) __builtin_trap();
        for (int i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= n_vocab) __builtin_trap();
        char *whole = NULL;
        size_t whole_len = 0;
        if (rad_text_decode(text, ids, n, 0, &whole, &whole_len) != 0) __builtin_trap();
        /* Streaming gives the same text. */
        RadDetok d;
        rad_detok_init(&d, text, 0);
        size_t cap = rad_detok_max_bytes(text) + 16, at = 0, wrote = 0;
        char *streamed = malloc(whole_len + cap * 2 + 1), *piece = malloc(cap);
        for (int i = 0; i < n; i++) {
            if (rad_detok_push(&d, ids[i], piece, cap, &wrote) != 0) __builtin_trap();
            memcpy(streamed + at, piece, wrote);
            at += wrote;
            if (at > whole_len + cap) __builtin_trap();
        }
        if (rad_detok_flush(&d, piece, cap, &wrote) != 0) __builtin_trap();
        memcpy(streamed + at, piece, wrote);
        at += wrote;
        if (at != whole_len || memcmp(streamed, whole, at) != 0) __builtin_trap();
        free(streamed);
        free(piece);
        free(whole);
        free(ids);
    }
    return 0;
}
