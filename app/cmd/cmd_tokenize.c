/*
** cmd_tokenize.c: `radiance tokenize`: text to token ids and back, with a
** model's tokenizer or a bare tokenizer.json, for scripts and for checking
** what the model will see.
*/
#include "../app.h"
#include "../cli.h"
#include "../models/model_open.h"
#include "../models/model_store.h"
#include "../../formats/gguf_container.h"
#include "../../engine/text/rad_text.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: radiance tokenize (-m MODEL | --tokenizer FILE) [--json] [--no-special] [TEXT...]\n"
    "       radiance tokenize (-m MODEL | --tokenizer FILE) --decode IDS\n"
    "\n"
    "Print the token ids of TEXT (or of standard input when no TEXT is given),\n"
    "comma-separated on one line.\n"
    "\n"
    "  -m, --model MODEL     a model (a .rad or .gguf file, an alias, hf:ORG/REPO); its tokenizer\n"
    "      --tokenizer FILE  a tokenizer.json (tokenizer_config.json beside it is read too)\n"
    "      --json            print a JSON array of {\"id\", \"piece\"} objects instead\n"
    "      --no-special      add no BOS/EOS, and read special-token strings in TEXT as plain text\n"
    "      --decode IDS      the other way: print the text of comma-separated ids\n"
    "  -h, --help            this help\n";

/* The whole of standard input, NUL-terminated. */
static char *read_stdin(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, stdin);
        n += got;
        if (got == 0) break;
        if (n + 1 == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) { free(buf); return NULL; }
            buf = grown;
        }
    }
    if (buf) { buf[n] = 0; *len = n; }
    return buf;
}

/* TEXT arguments joined by single spaces. */
static char *join_args(int argc, char **argv, size_t *len)
{
    size_t n = 0;
    for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 1;
    char *s = malloc(n + 1), *at = s;
    if (!s) return NULL;
    for (int i = 0; i < argc; i++) at += sprintf(at, "%s%s", i ? " " : "", argv[i]);
    *len = (size_t)(at - s);
    return s;
}

/* A JSON string; control characters (C0, DEL, C1) escaped, so the output
** is safe on a terminal too. */
static void print_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f) printf("\\u%04x", *p);
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) printf("\\u%04x", *++p);
        else putchar(*p);
    }
    putchar('"');
}

static int decode_ids(const RadText *t, const char *text)
{
    int cap = 64, n = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    const char *p = text;
    while (ids && *p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            free(ids);
            return rad_error_set(RAD_E_ARG, "--decode: '%s' is not a list of token ids", text);
        }
        if (n == cap) {
            int32_t *grown = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!grown) break;
            ids = grown;
        }
        ids[n++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') { free(ids); return rad_error_set(RAD_E_ARG, "--decode: unexpected '%c'", *end); }
    }
    if (!ids) return RAD_E_NOMEM;
    char *out = NULL;
    size_t len = 0;
    int rc = rad_text_decode(t, ids, n, 0, &out, &len);
    free(ids);
    if (rc) return rc;
    /* The text as it is for a pipe; on a terminal, control characters
    ** shown as escapes (cli.h). */
    if (isatty(STDOUT_FILENO)) rad_safe_fwrite(stdout, out, len, RAD_SAFE_TEXT);
    else fwrite(out, 1, len, stdout);
    putchar('\n');
    free(out);
    return RAD_OK;
}

/* A model's tokenizer as run opens it: a GGUF's prepared tokenizer comes
** from the tokenizer cache (Gemma 3's 262k entries take about a second to
** build); a tokenizer.json is read as it is. */
static int open_text(const char *path, RadText **out)
{
    int kind = rad_model_file_kind(path);
    if (kind < 0) return kind;
    if (kind == RAD_FILE_OTHER) return rad_text_open_path(path, out);
    char *cache = rad_tokenizer_cache_dir();
    RadContainer *c = NULL;
    int rc = rad_container_open_model(path, cache, &c);
    free(cache);
    if (!rc) rc = rad_text_from_container(c, out);
    rad_container_close(c);
    return rc;
}

int rad_cmd_tokenize(int argc, char **argv)
{
    enum { TOKENIZER = 256, JSON, NOSPECIAL, DECODE };
    static const struct option options[] = {
        {"model", required_argument, 0, 'm'}, {"tokenizer", required_argument, 0, TOKENIZER},
        {"json", no_argument, 0, JSON}, {"no-special", no_argument, 0, NOSPECIAL},
        {"decode", required_argument, 0, DECODE}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *model = NULL, *decode = NULL;
    int json = 0, special = 1, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:h", options, NULL)) != -1) {
        switch (c) {
        case 'm': case TOKENIZER: model = optarg; break;
        case JSON: json = 1; break;
        case NOSPECIAL: special = 0; break;
        case DECODE: decode = optarg; break;
        case 'h': fputs(usage, stdout); return RAD_EXIT_OK;
        default: fputs(usage, stderr); return RAD_EXIT_USAGE;
        }
    }
    if (!model) {
        fprintf(stderr, "radiance tokenize: give -m MODEL or --tokenizer FILE\n%s", usage);
        return RAD_EXIT_USAGE;
    }
    RadText *t = NULL;
    char *resolved = NULL;
    int rc = RAD_OK;
    /* A file is read as it is; any other MODEL is resolved as run resolves it. */
    if (access(model, F_OK) != 0) {
        RadResolveOptions o = {.quiet = 1};
        rc = rad_model_resolve(model, &o, &resolved);
    }
    if (!rc) rc = open_text(resolved ? resolved : model, &t);
    free(resolved);
    if (rc) return rad_app_fail(rc);
    if (decode) {
        rc = decode_ids(t, decode);
        rad_text_free(t);
        return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
    }
    size_t len = 0;
    char *text = optind < argc ? join_args(argc - optind, argv + optind, &len) : read_stdin(&len);
    if (!text) {
        rad_text_free(t);
        return rad_app_fail(rad_error_set(RAD_E_NOMEM, "out of memory reading the text"));
    }
    int32_t *ids = NULL;
    int n = 0;
    rc = rad_text_encode(t, text, len, special ? RAD_ENCODE_ADD_SPECIAL | RAD_ENCODE_PARSE_SPECIAL : 0, &ids, &n);
    if (rc == RAD_OK && json) {
        printf("[");
        const RadTokenizer *data = rad_text_data(t);
        for (int i = 0; i < n; i++) {
            /* The piece as the vocabulary spells it ("Ġhello", "<0x0A>"): always
            ** whole UTF-8, unlike the bytes one token decodes to. */
            const char *piece = ids[i] >= 0 && ids[i] < data->n_vocab ? data->token[ids[i]] : NULL;
            printf("%s{\"id\":%d,\"piece\":", i ? "," : "", ids[i]);
            if (piece) print_json_string(piece);
            else printf("null");
            printf("}");
        }
        printf("]\n");
    } else if (rc == RAD_OK) {
        for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
        printf("\n");
    }
    free(ids);
    free(text);
    rad_text_free(t);
    return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
}
