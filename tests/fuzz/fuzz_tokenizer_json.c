/*
** fuzz_tokenizer_json.c: libFuzzer target for tokenizer.json import
** (formats/tokenizer_json.c) and the compact store (formats/tokenizer_store.c).
**
** Each input is a tokenizer.json.  When import accepts it, the tokenizer is
** serialized, loaded back, built into a runtime (regexes compiled) and used
** once, so every stage a real model's tokenizer passes through is reached
** from hostile input.  A refusal must leave a one-line message.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/rad_text.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    RadTokenizer *t = NULL;
    rad_error_clear();
    if (rad_tokenizer_from_json((const char *)data, size, NULL, 0, "fuzz.json", &t) != 0) {
        if (t || strchr(rad_error_message(), '\n') || !rad_error_message()[0]) __builtin_trap();
        return 0;
    }
    void *blob = NULL;
    size_t len = 0;
    if (rad_tokenizer_serialize(t, &blob, &len) != 0) __builtin_trap();
    rad_tokenizer_free(t);
    RadTokenizer *back = NULL;
    if (rad_tokenizer_load(blob, len, "fuzz.bin", &back) != 0) __builtin_trap();
    free(blob);
    RadText *text = NULL;
    if (rad_text_create(back, &text) != 0) return 0;      /* e.g. a regex PCRE2 refuses */
    int32_t *ids = NULL;
    int n = 0;
    if (rad_text_encode(text, "Hello, world! 123 <s>", 21, RAD_ENCODE_ADD_SPECIAL | RAD_ENCODE_PARSE_SPECIAL,
                        &ids, &n) == 0) {
        char *out = NULL;
        size_t out_len = 0;
        if (rad_text_decode(text, ids, n, 0, &out, &out_len) == 0) free(out);
    }
    free(ids);
    rad_text_free(text);
    return 0;
}
