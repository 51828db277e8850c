/*
** blob_seed.c: tokenizer.json -> the tokenizer.bin blob radiance stores,
** for tests/fuzz/make_text_seeds.py (not part of any build).
**
**   blob_seed IN.json OUT.bin
*/
#include <stdio.h>
#include <stdlib.h>

#include "tokenizer.h"

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *json = malloc((size_t)n + 1);
    if (!json || fread(json, 1, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    RadTokenizer *t = NULL;
    void *blob = NULL;
    size_t len = 0;
    if (rad_tokenizer_from_json(json, (size_t)n, NULL, 0, argv[1], &t) || rad_tokenizer_serialize(t, &blob, &len)) {
        fprintf(stderr, "%s\n", rad_error_message());
        return 1;
    }
    FILE *o = fopen(argv[2], "wb");
    if (!o || fwrite(blob, 1, len, o) != len || fclose(o)) return 1;
    rad_tokenizer_free(t);
    free(blob);
    free(json);
    return 0;
}
