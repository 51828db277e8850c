/*
** fuzz_tokenizer_blob.c: libFuzzer target for the compact tokenizer blob
** ("tokenizer.bin" inside a .rad; formats/tokenizer_store.c) and everything
** a loaded blob reaches: rad_text_create (regexes compiled from the blob's
** patterns), encode, decode and streaming decode.
**
** Each input is the bytes of a blob.  Load must accept it or refuse it with
** a one-line message; an accepted blob that rad_text_create refuses must say
** why in one line too.  A runtime that builds encodes a fixed text and the
** tail of the input itself (both special-token modes), and every id it gives
** must lie in the vocabulary and decode, whole and streamed, without error.
** A pre-tokenizer regex from the blob runs under the limits of
** base/rad_limits.h, so a slow one is a refusal, not a libFuzzer timeout.
** The seeds (tests/fuzz/seeds/tokenizer_blob) are real tokenizers, cut down
** (tests/fuzz/make_text_seeds.py).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/rad_text.h"
#include "tokenizer.h"

/* A refusal has a message, and the message is one line. */
static void check_refusal(void)
{
    const char *m = rad_error_message();
    if (!m[0] || strchr(m, '\n')) __builtin_trap();
}

static void use(const RadText *text, const char *s, size_t n, int flags)
{
    const int n_vocab = rad_text_data(text)->n_vocab;
    int32_t *ids = NULL;
    int k = 0;
    rad_error_clear();
    if (rad_text_encode(text, s, n, flags, &ids, &k) != 0) {
        check_refusal(); /* a limit met */
        return;
    }
    for (int i = 0; i < k; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) __builtin_trap();
    char *out = NULL;
    size_t out_len = 0;
    /* An id may name a hole of the vocabulary (RAD_E_RANGE); anything else decodes. */
    int rc = rad_text_decode(text, ids, k, RAD_DECODE_SKIP_SPECIAL, &out, &out_len);
    if (rc == 0)
        free(out);
    else if (rc != RAD_E_RANGE)
        __builtin_trap();
    RadDetok d;
    rad_detok_init(&d, text, 0);
    size_t cap = rad_detok_max_bytes(text) + 16, wrote = 0;
    char *piece = malloc(cap);
    for (int i = 0; i < k; i++) {
        rc = rad_detok_push(&d, ids[i], piece, cap, &wrote);
        if (rc != 0 && rc != RAD_E_RANGE) __builtin_trap();
        if (wrote > cap) __builtin_trap();
    }
    if (rad_detok_flush(&d, piece, cap, &wrote) != 0) __builtin_trap();
    free(piece);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    RadTokenizer *t = NULL;
    rad_error_clear();
    if (rad_tokenizer_load(data, size, "fuzz.bin", &t) != 0) {
        if (t) __builtin_trap();
        check_refusal();
        return 0;
    }
    RadText *text = NULL;
    rad_error_clear();
    if (rad_text_create(t, &text) != 0) {
        if (text) __builtin_trap();
        check_refusal();
        return 0;
    }
    static const char fixed[] = "Hello, world! 123 <s></s><|im_end|> \xe4\xb8\xad\xe6\x96\x87 caf\xc3\xa9 \xff\n\n";
    use(text, fixed, sizeof fixed - 1, 0);
    use(text, fixed, sizeof fixed - 1, RAD_ENCODE_ADD_SPECIAL | RAD_ENCODE_PARSE_SPECIAL);
    size_t tail = size < 512 ? size : 512;
    use(text, (const char *)data + size - tail, tail, RAD_ENCODE_PARSE_SPECIAL);
    rad_text_free(text);
    return 0;
}
