/*
** gguf_dump.c: print what a GGUF file holds, as radiance's reader sees it.
**
**     gguf_dump FILE.gguf [--keys] [--tensors]
**
** Prints the architecture, the version, alignment and parts, the metadata
** keys (with their types and short values when --keys), the tensor count and
** a histogram of tensor types (each tensor when --tensors), and the tokenizer
** that rad_tokenizer_from_gguf builds: model, pre-tokenizer, vocabulary size,
** merges, added tokens and special ids.  A file the reader refuses prints the
** one-line reason and exits 1.  Used by tests/models/fetch.sh on the real
** files it fetches; handy by hand on any GGUF.
**
** Build: make build/libradcore.a, then
**     cc -std=c11 -D_GNU_SOURCE -Ibase -Iformats tests/models/gguf_dump.c \
**        build/libradcore.a -ljansson -lpcre2-8 -lutf8proc -ldl -lm -o build/gguf_dump
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_gguf.h"

/* A short, one-line rendering of a value. */
static void print_value(const RadGgufValue *v)
{
    switch (v->type) {
    case RAD_GGUF_U8:
    case RAD_GGUF_U16:
    case RAD_GGUF_U32:
    case RAD_GGUF_U64:
        printf("%llu", (unsigned long long)v->u);
        break;
    case RAD_GGUF_BOOL:
        printf("%s", v->u ? "true" : "false");
        break;
    case RAD_GGUF_I8:
    case RAD_GGUF_I16:
    case RAD_GGUF_I32:
    case RAD_GGUF_I64:
        printf("%lld", (long long)v->i);
        break;
    case RAD_GGUF_F32:
    case RAD_GGUF_F64:
        printf("%g", v->f);
        break;
    case RAD_GGUF_STRING: {
        putchar('"');
        for (uint64_t i = 0; i < v->str.len && i < 60; i++) {
            unsigned char c = (unsigned char)v->str.s[i];
            if (c == '\n')
                fputs("\\n", stdout);
            else
                putchar(c < 0x20 ? '?' : c);
        }
        printf("%s\"", v->str.len > 60 ? "..." : "");
        break;
    }
    case RAD_GGUF_ARRAY:
        printf("[%llu x %s]", (unsigned long long)v->arr.n, rad_gguf_type_name(v->arr.type));
        if (v->arr.type == RAD_GGUF_STRING && v->arr.n)
            printf(" first \"%.40s\"", rad_gguf_arr_str(v, 0, NULL));
        break;
    }
}

static void dump_tokenizer(const RadGguf *g)
{
    const char *model = NULL, *pre = NULL;
    rad_gguf_get_string(g, "tokenizer.ggml.model", NULL, &model);
    rad_gguf_get_string(g, "tokenizer.ggml.pre", NULL, &pre);
    printf("tokenizer: model %s, pre %s\n", model ? model : "(none)", pre ? pre : "(none)");
    RadTokenizer *t;
    if (rad_tokenizer_from_gguf(g, &t) != 0) {
        printf("  import refused: %s\n", rad_error_message());
        return;
    }
    int special = 0;
    for (int i = 0; i < t->n_added; i++) special += t->added[i].special;
    printf(
        "  imported: %s, %d tokens, %d merges, %d added (%d special), byte_fallback %d, ignore_merges %d\n",
        t->model == RAD_TOK_BPE_SPM ? "SentencePiece BPE" : "byte-level BPE", t->n_vocab, t->n_merges,
        t->n_added, special, t->byte_fallback, t->ignore_merges);
    printf("  bos %d (%s)  eos %d (%s)  unk %d  pad %d  add_bos %d  add_eos %d\n", t->bos_id,
           t->bos_id >= 0 && t->token[t->bos_id] ? t->token[t->bos_id] : "-", t->eos_id,
           t->eos_id >= 0 && t->token[t->eos_id] ? t->token[t->eos_id] : "-", t->unk_id, t->pad_id,
           t->add_bos, t->add_eos);
    for (int i = 0; i < t->n_norm; i++)
        printf("  normalizer %d: kind %d pattern %s arg %s\n", i, t->norm[i].kind,
               t->norm[i].pattern ? t->norm[i].pattern : "-", t->norm[i].arg ? t->norm[i].arg : "-");
    for (int i = 0; i < t->n_pre; i++)
        printf("  pre %d: kind %d %.70s%s\n", i, t->pre[i].kind, t->pre[i].pattern ? t->pre[i].pattern : "",
               t->pre[i].pattern && strlen(t->pre[i].pattern) > 70 ? "..." : "");
    for (int i = 0; i < 3 && i < t->n_merges; i++)
        printf("  merge %d: \"%s\" + \"%s\"\n", i, t->merge_left[i], t->merge_right[i]);
    printf("  chat template: %s\n", t->chat_template ? "yes" : "no");
    rad_tokenizer_free(t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gguf_dump FILE.gguf [--keys] [--tensors]\n");
        return 2;
    }
    int keys = 0, tensors = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--keys") == 0)
            keys = 1;
        else if (strcmp(argv[i], "--tensors") == 0)
            tensors = 1;
    }
    RadGguf *g;
    if (rad_gguf_open(argv[1], &g) != 0) {
        printf("refused: %s\n", rad_error_message());
        return 1;
    }
    const char *arch = NULL;
    rad_gguf_get_string(g, "general.architecture", NULL, &arch);
    printf("file: %s\n", rad_gguf_path(g));
    printf("architecture: %s\n", arch ? arch : "(none)");
    printf("version %u, alignment %u, %d part%s\n", rad_gguf_version(g), rad_gguf_alignment(g),
           rad_gguf_n_parts(g), rad_gguf_n_parts(g) == 1 ? "" : "s");
    printf("metadata keys: %d\n", rad_gguf_n_keys(g));
    for (int i = 0; i < rad_gguf_n_keys(g); i++) {
        const RadGgufValue *v = rad_gguf_value(g, i);
        printf("  %-44s %-7s", rad_gguf_key(g, i), rad_gguf_type_name(v->type));
        if (keys || v->type != RAD_GGUF_ARRAY) {
            putchar(' ');
            print_value(v);
        } else {
            printf(" [%llu x %s]", (unsigned long long)v->arr.n, rad_gguf_type_name(v->arr.type));
        }
        putchar('\n');
    }

    int hist[256] = {0};
    uint64_t bytes = 0;
    for (int i = 0; i < rad_gguf_n_tensors(g); i++) {
        const RadGgufTensor *t = rad_gguf_tensor(g, i);
        hist[t->enc & 255]++;
        bytes += t->size;
        if (tensors)
            printf("  %-40s %-6s [%lld, %lld, %lld, %lld] %llu bytes\n", t->name,
                   rad_gguf_ggml_type_name(t->enc), (long long)t->ne[0], (long long)t->ne[1],
                   (long long)t->ne[2], (long long)t->ne[3], (unsigned long long)t->size);
    }
    printf("tensors: %d (%.1f MiB)\n", rad_gguf_n_tensors(g), bytes / 1048576.0);
    printf("tensor types:");
    for (int e = 0; e < 256; e++)
        if (hist[e]) printf(" %s %d", rad_gguf_ggml_type_name(e), hist[e]);
    putchar('\n');
    dump_tokenizer(g);
    rad_gguf_close(g);
    return 0;
}
