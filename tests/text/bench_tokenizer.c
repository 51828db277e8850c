/*
** bench_tokenizer.c: how fast one thread encodes a text, and how fast a
** stored tokenizer opens.
**
**   bench_tokenizer DIR TEXT [REPEATS]
**
** DIR holds tokenizer.json (and tokenizer_config.json); TEXT is any file.
** Prints one line:
**
**   vocab=NAME bytes=N tokens=T checksum=C encode_s=S mb_per_s=R
**   docs_tokens=T2 docs_checksum=C2 docs_mb_per_s=R2 load_ms=L create_ms=K
**
** where encode_s is the best of REPEATS (default 3) encodes of the whole file
** in one call (special tokens parsed, nothing added, as HF's
** encode(text, add_special_tokens=False)); docs_* the same text cut after
** every blank line ("\n\n") into documents encoded one call each; checksums
** are FNV-1a hashes of the ids so that bench_tokenizer.sh can check they
** equal HF's; load_ms/create_ms the best times to open the serialized form
** (rad_tokenizer_load) and build the runtime from it (rad_text_create).
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/rad_text.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* FNV-1a over the ids' little-endian bytes, continuing from h. */
#define FNV_START 1469598103934665603ull
static uint64_t checksum(uint64_t h, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t v = (uint32_t)ids[i];
        for (int k = 0; k < 4; k++) h = (h ^ ((v >> (8 * k)) & 0xFF)) * 1099511628211ull;
    }
    return h;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = (size_t)n;
    }
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR TEXT_FILE [REPEATS]\n", argv[0]);
        return 2;
    }
    int repeats = argc > 3 ? atoi(argv[3]) : 3;
    char path[4096];
    size_t json_len, cfg_len = 0, text_len;
    snprintf(path, sizeof path, "%s/tokenizer.json", argv[1]);
    char *json = slurp(path, &json_len);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", argv[1]);
    char *cfg = slurp(path, &cfg_len);
    char *text = slurp(argv[2], &text_len);
    if (!json || !text) {
        fprintf(stderr, "%s: cannot read %s/tokenizer.json or %s\n", argv[0], argv[1], argv[2]);
        return 1;
    }

    /* Import once, then time opening the stored form, as radiance does. */
    RadTokenizer *data;
    void *blob;
    size_t blob_len;
    if (rad_tokenizer_from_json(json, json_len, cfg, cfg_len, "tokenizer.json", &data) ||
        rad_tokenizer_serialize(data, &blob, &blob_len)) {
        fprintf(stderr, "%s\n", rad_error_message());
        return 1;
    }
    rad_tokenizer_free(data);
    double load_best = 1e9, create_best = 1e9;
    RadText *t = NULL;
    for (int i = 0; i < 5; i++) {
        RadTokenizer *d;
        rad_text_free(t);
        double t0 = now_s();
        if (rad_tokenizer_load(blob, blob_len, "tokenizer.bin", &d)) {
            fprintf(stderr, "%s\n", rad_error_message());
            return 1;
        }
        double t1 = now_s();
        if (rad_text_create(d, &t)) {
            fprintf(stderr, "%s\n", rad_error_message());
            return 1;
        }
        double t2 = now_s();
        if (t1 - t0 < load_best) load_best = t1 - t0;
        if (t2 - t1 < create_best) create_best = t2 - t1;
    }

    double best = 1e9;
    int32_t *ids = NULL;
    int n = 0;
    for (int r = 0; r < repeats; r++) {
        free(ids);
        double t0 = now_s();
        if (rad_text_encode(t, text, text_len, RAD_ENCODE_PARSE_SPECIAL, &ids, &n)) {
            fprintf(stderr, "%s\n", rad_error_message());
            return 1;
        }
        double s = now_s() - t0;
        if (s < best) best = s;
    }
    int n_whole = n;
    uint64_t h = checksum(FNV_START, ids, n);
    free(ids);

    /* The same text as documents, each ending at a blank line, one call each. */
    double docs_best = 1e9;
    uint64_t docs_h = FNV_START;
    long docs_n = 0;
    for (int r = 0; r < repeats; r++) {
        double t0 = now_s();
        uint64_t hh = FNV_START;
        long nn = 0;
        for (size_t at = 0; at < text_len;) {
            const char *cut = memmem(text + at, text_len - at, "\n\n", 2);
            size_t end = cut ? (size_t)(cut - text) + 2 : text_len;
            if (rad_text_encode(t, text + at, end - at, RAD_ENCODE_PARSE_SPECIAL, &ids, &n)) {
                fprintf(stderr, "%s\n", rad_error_message());
                return 1;
            }
            hh = checksum(hh, ids, n);
            nn += n;
            free(ids);
            at = end;
        }
        double s = now_s() - t0;
        if (s < docs_best) docs_best = s;
        docs_h = hh;
        docs_n = nn;
    }

    const char *name = strrchr(argv[1], '/');
    name = name && name[1] ? name + 1 : argv[1];
    printf("vocab=%s bytes=%zu tokens=%d checksum=%016llx encode_s=%.3f mb_per_s=%.2f "
           "docs_tokens=%ld docs_checksum=%016llx docs_mb_per_s=%.2f load_ms=%.2f create_ms=%.2f\n",
           name, text_len, n_whole, (unsigned long long)h, best, text_len / best / 1e6, docs_n,
           (unsigned long long)docs_h, text_len / docs_best / 1e6, load_best * 1e3, create_best * 1e3);
    rad_text_free(t);
    free(blob);
    free(json);
    free(cfg);
    free(text);
    return 0;
}
