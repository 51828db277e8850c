/*
** model_text.c: finding a model's tokenizer.
**
** A converted model carries its tokenizer in the container, in the compact
** form (blob "tokenizer.bin") that loads without parsing JSON.  Containers
** written before that blob existed, bare tokenizer.json files and GGUF files
** are imported on the spot.  Files are told apart by their first bytes, not
** their names.
*/
#include "rad_text.h"
#include "../../formats/gguf.h"
#include "../../formats/gguf_container.h"
#include "../../formats/rad_container.h"
#include "../../formats/tokenizer_gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rad_text_from_container(const RadContainer *c, RadText **out)
{
    *out = NULL;
    RadTokenizer *data = NULL;
    uint64_t size = 0, config_size = 0;
    const void *blob = rad_container_blob(c, "tokenizer.bin", &size);
    int rc;
    if (blob) {
        rc = rad_tokenizer_load(blob, (size_t)size, c->path, &data);
        /* A GGUF's blob from the tokenizer cache that does not load (a
        ** damaged entry) is built again from the file, not trusted. */
        void *fresh = NULL;
        size_t fresh_len = 0;
        if (rc && rad_container_gguf_rebuild_tokenizer(c, &fresh, &fresh_len) == RAD_OK) {
            rad_error_clear();
            rc = rad_tokenizer_load(fresh, fresh_len, c->path, &data);
            free(fresh);
        }
    } else {
        const char *json = rad_container_blob(c, "tokenizer.json", &size);
        const char *config = rad_container_blob(c, "tokenizer_config.json", &config_size);
        if (!json)
            return rad_error_set(RAD_E_NOTFOUND,
                                 "%s: the model has no tokenizer: convert it from a folder with tokenizer.json, or pass --tokens",
                                 c->path);
        rc = rad_tokenizer_from_json(json, (size_t)size, config, (size_t)config_size, c->path, &data);
    }
    if (rc) return rc;
    return rad_text_create(data, out);
}

/* Read a whole file; NUL-terminated; NULL with errno on failure. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = (n + 65536 + 1) * 2;
            char *grown = realloc(buf, cap);
            if (!grown) { free(buf); fclose(f); errno = ENOMEM; return NULL; }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, 65536, f);
        n += got;
        if (got < 65536) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) { free(buf); errno = EIO; return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

int rad_text_open_path(const char *path, RadText **out)
{
    *out = NULL;
    /* A model is known by its first bytes (a GGUF blob has no extension);
    ** anything else is a tokenizer.json.  A FIFO or device is refused here,
    ** before a read could block. */
    int kind = rad_model_file_kind(path);
    if (kind < 0) return kind;
    if (kind == RAD_FILE_GGUF) {
        RadGguf *g = NULL;
        int rc = rad_gguf_open(path, &g);
        if (rc) return rc;
        RadTokenizer *data = NULL;
        rc = rad_tokenizer_from_gguf(g, &data);
        rad_gguf_close(g);
        return rc ? rc : rad_text_create(data, out);
    }
    if (kind == RAD_FILE_RAD) {
        RadContainer *c = NULL;
        int rc = rad_container_open(path, &c);
        if (rc) return rc;
        rc = rad_text_from_container(c, out);
        rad_container_close(c);
        return rc;
    }
    size_t len = 0, config_len = 0;
    char *json = read_file(path, &len);
    if (!json) return rad_error_set(RAD_E_NOTFOUND, "%s: %s", path, strerror(errno));
    /* tokenizer_config.json beside it says which BOS/EOS to add. */
    char config_path[4096];
    const char *slash = strrchr(path, '/');
    snprintf(config_path, sizeof config_path, "%.*stokenizer_config.json",
             slash ? (int)(slash - path + 1) : 0, path);
    char *config = read_file(config_path, &config_len);
    RadTokenizer *data = NULL;
    int rc = rad_tokenizer_from_json(json, len, config, config_len, path, &data);
    free(json);
    free(config);
    if (rc) return rc;
    return rad_text_create(data, out);
}
