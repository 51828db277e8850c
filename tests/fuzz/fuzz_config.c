/*
** fuzz_config.c: libFuzzer target for config.json (formats/hf_config.c)
** and what the converter makes of it (the canonical metadata and its checks,
** engine/meta.c and engine/meta_check.c).
**
** Each input is the text of a config.json.  The flattened table must hold
** unique, non-empty keys; a table the reader accepts is then read as a
** model's metadata (with an architecture named, as the converter names it)
** and checked.  A refusal at any stage must leave a one-line message.
**
** Seeds (tests/fuzz/seeds/config) are the test fixtures' config.json files.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf_config.h"
#include "../../engine/engine_internal.h"

static void one_line(void)
{
    const char *msg = rad_error_message();
    if (!msg[0] || strchr(msg, '\n')) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    RadMetaTable t;
    rad_meta_table_init(&t);
    rad_error_clear();
    if (rad_hf_config_load_string(text, "config.json", &t) != 0) {
        if (t.n) __builtin_trap();
        one_line();
    } else {
        for (int i = 0; i < t.n; i++) {
            if (!t.kv[i].key[0] || rad_meta_table_find(&t, t.kv[i].key) != &t.kv[i]) __builtin_trap();
            if (t.kv[i].type == RAD_META_STRING && !t.kv[i].s) __builtin_trap();
        }
        RadModelMeta m;
        if (rad_meta_table_set_string(&t, "arch.id", "llama") == 0 &&
            rad_meta_table_set_string(&t, "arch.quant", "f32") == 0) {
            rad_error_clear();
            if (rad_meta_from_table(&t, &m, "config.json") != 0 || rad_meta_check(&m, "config.json") != 0)
                one_line();
        }
    }
    rad_meta_table_free(&t);
    free(text);
    return 0;
}
