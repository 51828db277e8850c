/*
** safetensors.c: map a .safetensors file and validate every byte of its
** header before anyone reads a tensor.
**
** A safetensors file is three parts: an 8-byte little-endian length N, N
** bytes of JSON naming each tensor's dtype, shape and [begin, end) byte range
** within the data buffer, then the data buffer itself.  Files come from the
** internet, so the header is treated as hostile: every length is checked
** against the file before it is used, every product of sizes is checked for
** overflow, and the tensors must tile the buffer exactly, the way the
** reference parser (huggingface/safetensors) demands.
*/
#include "safetensors.h"
#include "rad_limits.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reference parser's limit on the JSON header, in bytes. */
#define ST_HEADER_MAX RAD_LIMIT_ST_HEADER_BYTES
#define ST_RANK_MAX 8

/* ------------------------------------------------------------- dtypes */

/* Every dtype the safetensors format defines, with its size in bits and
** the RadEncoding whose bytes are identical, or -1 where we have none. */
static const struct {
    const char *name;
    int bits;
    int enc;
} dtypes[] = {
    {"BOOL", 8, -1},     {"U8", 8, -1},
    {"I8", 8, RAD_ENC_I8},   {"F8_E5M2", 8, -1},
    {"F8_E4M3", 8, RAD_ENC_FP8_E4M3}, {"F8_E8M0", 8, -1},
    {"I16", 16, RAD_ENC_I16},  {"U16", 16, -1},
    {"F16", 16, RAD_ENC_F16},  {"BF16", 16, RAD_ENC_BF16},
    {"I32", 32, RAD_ENC_I32},  {"U32", 32, -1},
    {"F32", 32, RAD_ENC_F32},  {"F64", 64, RAD_ENC_F64},
    {"I64", 64, RAD_ENC_I64},  {"U64", 64, -1},
    {"C64", 64, -1},     {"F4", 4, -1},
    {"F6_E2M3", 6, -1},  {"F6_E3M2", 6, -1},
};

/* Bits per element of `dtype` (and its encoding into *enc), or 0 when the
** name is not one the format defines. */
static int dtype_bits(const char *dtype, int *enc)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, dtype) == 0) {
            *enc = dtypes[i].enc;
            return dtypes[i].bits;
        }
    *enc = -1;
    return 0;
}

/* ------------------------------------------------------------ helpers */

static uint64_t read_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Set the message "PATH: tensor 'NAME': <fmt...>" and return `code`. */
static int tensor_error(int code, const char *path, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int tensor_error(int code, const char *path, const char *name, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rad_error_set(code, "%s: tensor '%.200s': %s", path, name, what);
}

/* Read a JSON integer >= 0 into *v.  Returns 0 or -1. */
static int json_uint(const json_t *j, uint64_t *v)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0) return -1;
    *v = (uint64_t)json_integer_value(j);
    return 0;
}

/* ------------------------------------------------------ the tensor table */

/* Where a tensor's bytes lie in the data buffer, kept only while opening. */
typedef struct Span {
    uint64_t begin, end;
    const RadStTensor *t;
} Span;

/* Check one header entry and fill *t and *span from it.  `buffer_size` is
** the number of bytes after the header. */
static int parse_tensor(const char *path, const char *name, json_t *entry, uint64_t buffer_size,
                        RadStTensor *t, Span *span)
{
    if (!json_is_object(entry))
        return tensor_error(RAD_E_FORMAT, path, name, "entry is not an object: the file is damaged");

    /* dtype */
    json_t *jd = json_object_get(entry, "dtype");
    if (!json_is_string(jd))
        return tensor_error(RAD_E_FORMAT, path, name, "\"dtype\" is missing or not a string: "
                            "the file is damaged");
    const char *dtype = json_string_value(jd);
    if (strlen(dtype) >= sizeof t->dtype || !dtype[0])
        return tensor_error(RAD_E_FORMAT, path, name, "dtype '%.40s' is not a safetensors dtype: "
                            "the file is damaged", dtype);
    memcpy(t->dtype, dtype, strlen(dtype) + 1);
    int bits = dtype_bits(dtype, &t->enc);

    /* shape */
    json_t *js = json_object_get(entry, "shape");
    if (!json_is_array(js))
        return tensor_error(RAD_E_FORMAT, path, name, "\"shape\" is missing or not an array: "
                            "the file is damaged");
    size_t rank = json_array_size(js);
    if (rank > ST_RANK_MAX)
        return tensor_error(RAD_E_UNSUPPORTED, path, name, "shape has %zu dimensions; radiance "
                            "reads at most %d", rank, ST_RANK_MAX);
    t->rank = (int)rank;
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t d = 0; d < rank; d++) {
        uint64_t dim;
        if (json_uint(json_array_get(js, d), &dim) != 0)
            return tensor_error(RAD_E_FORMAT, path, name, "shape[%zu] is not an integer >= 0: "
                                "the file is damaged", d);
        t->shape[d] = (int64_t)dim;
        if (__builtin_mul_overflow(numel, dim, &numel)) overflow = 1;
    }
    /* A zero dimension makes any overflow of the others harmless. */
    for (size_t d = 0; d < rank && overflow; d++)
        if (t->shape[d] == 0) overflow = 0, numel = 0;
    if (overflow)
        return tensor_error(RAD_E_FORMAT, path, name, "the product of the shape overflows 64 bits: "
                            "the file is damaged or hostile");

    /* data_offsets */
    json_t *jo = json_object_get(entry, "data_offsets");
    uint64_t begin, end;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || json_uint(json_array_get(jo, 0), &begin) ||
        json_uint(json_array_get(jo, 1), &end))
        return tensor_error(RAD_E_FORMAT, path, name, "\"data_offsets\" is missing or not two "
                            "integers >= 0: the file is damaged");
    if (end < begin)
        return tensor_error(RAD_E_FORMAT, path, name, "data_offsets [%llu, %llu] end before they "
                            "begin: the file is damaged", (unsigned long long)begin,
                            (unsigned long long)end);
    if (end > buffer_size)
        return tensor_error(RAD_E_FORMAT, path, name, "data_offsets [%llu, %llu] run past the end "
                            "of the file (%llu bytes of tensor data): the file is truncated; "
                            "download it again", (unsigned long long)begin,
                            (unsigned long long)end, (unsigned long long)buffer_size);
    if (bits) {
        uint64_t total_bits;
        if (__builtin_mul_overflow(numel, (uint64_t)bits, &total_bits))
            return tensor_error(RAD_E_FORMAT, path, name, "%llu elements of %s overflow 64 bits: "
                                "the file is damaged or hostile", (unsigned long long)numel, dtype);
        if (total_bits % 8)
            return tensor_error(RAD_E_FORMAT, path, name, "%llu elements of %s are not a whole "
                                "number of bytes: the file is damaged",
                                (unsigned long long)numel, dtype);
        if (total_bits / 8 != end - begin)
            return tensor_error(RAD_E_FORMAT, path, name, "data_offsets [%llu, %llu] hold %llu "
                                "bytes, but %llu elements of %s take %llu: the file is damaged",
                                (unsigned long long)begin, (unsigned long long)end,
                                (unsigned long long)(end - begin), (unsigned long long)numel,
                                dtype, (unsigned long long)(total_bits / 8));
    }
    t->size = end - begin;
    span->begin = begin;
    span->end = end;
    span->t = t;
    return 0;
}

/* "__metadata__" must be an object of strings; we keep none of it. */
static int check_metadata(const char *path, json_t *meta)
{
    const char *k;
    json_t *v;
    if (!json_is_object(meta))
        return rad_error_set(RAD_E_FORMAT, "%s: \"__metadata__\" is not an object: the file is "
                             "damaged", path);
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v))
            return rad_error_set(RAD_E_FORMAT, "%s: \"__metadata__\" key '%.200s' is not a string: "
                                 "the file is damaged", path, k);
    }
    return 0;
}

static int span_by_offset(const void *a, const void *b)
{
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int tensor_by_name(const void *a, const void *b)
{
    return strcmp(((const RadStTensor *)a)->name, ((const RadStTensor *)b)->name);
}

/* The tensors must tile [0, buffer_size) exactly, as the reference parser
** requires: sorted by offset, each begins where the previous one ended. */
static int check_tiling(const char *path, Span *spans, size_t n, uint64_t buffer_size)
{
    qsort(spans, n, sizeof *spans, span_by_offset);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (spans[i].begin < at)
            return tensor_error(RAD_E_FORMAT, path, spans[i].t->name, "data_offsets [%llu, %llu] "
                                "overlap tensor '%.200s': the file is damaged",
                                (unsigned long long)spans[i].begin, (unsigned long long)spans[i].end,
                                spans[i - 1].t->name);
        if (spans[i].begin > at)
            return rad_error_set(RAD_E_FORMAT, "%s: the header does not cover the data buffer: bytes "
                                 "[%llu, %llu) belong to no tensor: the file is damaged", path,
                                 (unsigned long long)at, (unsigned long long)spans[i].begin);
        at = spans[i].end;
    }
    if (at != buffer_size)
        return rad_error_set(RAD_E_FORMAT, "%s: the header does not cover the data buffer: bytes "
                             "[%llu, %llu) at its end belong to no tensor: the file is damaged",
                             path, (unsigned long long)at, (unsigned long long)buffer_size);
    return 0;
}

/* Build the tensor table of `st` from its parsed header `root`. */
static int load_table(RadSafetensors *st, json_t *root, uint64_t header_len)
{
    const char *path = st->path;
    const uint8_t *buffer = st->map + 8 + header_len;
    uint64_t buffer_size = st->file_size - 8 - header_len;

    size_t n = json_object_size(root);
    if (json_object_get(root, "__metadata__")) {
        int rc = check_metadata(path, json_object_get(root, "__metadata__"));
        if (rc) return rc;
        n--;
    }
    if (n > (size_t)INT32_MAX)
        return rad_error_set(RAD_E_FORMAT, "%s: too many tensors", path);
    st->tensors = calloc(n ? n : 1, sizeof *st->tensors);
    Span *spans = calloc(n ? n : 1, sizeof *spans);
    if (!st->tensors || !spans) {
        free(spans);
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory for %zu tensors", path, n);
    }

    const char *key;
    json_t *entry;
    int rc = 0;
    json_object_foreach(root, key, entry) {
        if (strcmp(key, "__metadata__") == 0) continue;
        RadStTensor *t = &st->tensors[st->n_tensors];
        t->name = strdup(key);
        if (!t->name) {
            rc = rad_error_set(RAD_E_NOMEM, "%s: out of memory", path);
            break;
        }
        st->n_tensors++;
        if ((rc = parse_tensor(path, key, entry, buffer_size, t, &spans[st->n_tensors - 1]))) break;
    }
    if (!rc) rc = check_tiling(path, spans, (size_t)st->n_tensors, buffer_size);
    if (!rc) {
        /* Pointers last: the spans refer to tensors by address until sorted. */
        for (int i = 0; i < st->n_tensors; i++) {
            RadStTensor *t = (RadStTensor *)spans[i].t;
            t->data = buffer + spans[i].begin;
        }
        qsort(st->tensors, (size_t)st->n_tensors, sizeof *st->tensors, tensor_by_name);
        for (int i = 1; i < st->n_tensors && !rc; i++)   /* jansson refused these; make sure */
            if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0)
                rc = tensor_error(RAD_E_FORMAT, path, st->tensors[i].name, "appears twice: "
                                  "the file is damaged");
    }
    free(spans);
    return rc;
}

/* ---------------------------------------------------------- open/close */

void rad_safetensors_close(RadSafetensors *st)
{
    if (!st) return;
    for (int i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    free(st->tensors);
    if (st->map) munmap((void *)st->map, (size_t)st->file_size);
    free(st->path);
    free(st);
}

/* Map `path` into st->map / st->file_size. */
static int map_file(RadSafetensors *st, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return rad_error_set(RAD_E_NOTFOUND, "%s: not found", path);
        return rad_error_set(RAD_E_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rad_error_set(RAD_E_IO, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8) {
        close(fd);
        return rad_error_set(RAD_E_FORMAT, "%s: %llu bytes is too short for a safetensors file "
                             "(the 8-byte header length is missing): the file is truncated; "
                             "download it again", path, (unsigned long long)size);
    }
    if (size > SIZE_MAX) {
        close(fd);
        return rad_error_set(RAD_E_UNSUPPORTED, "%s: too large to map on this machine", path);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) return rad_error_set(RAD_E_IO, "%s: cannot map: %s", path, strerror(err));
    st->map = map;
    st->file_size = size;
    return 0;
}

int rad_safetensors_open(const char *path, RadSafetensors **out)
{
    if (!out) return rad_error_set(RAD_E_ARG, "rad_safetensors_open: out is NULL");
    *out = NULL;
    if (!path) return rad_error_set(RAD_E_ARG, "rad_safetensors_open: path is NULL");
    RadSafetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory", path);
    }
    int rc = map_file(st, path);
    if (rc) goto fail;

    uint64_t header_len = read_le64(st->map);
    if (header_len > ST_HEADER_MAX) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: header length %llu is over the 100 MB limit (RAD_LIMIT_ST_HEADER_BYTES): not a "
                           "safetensors file, or a damaged one", path, (unsigned long long)header_len);
        goto fail;
    }
    if (header_len > st->file_size - 8) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: header length %llu runs past the end of the file "
                           "(%llu bytes): the file is truncated; download it again", path,
                           (unsigned long long)header_len, (unsigned long long)st->file_size);
        goto fail;
    }
    if (header_len == 0 || st->map[8] != '{') {
        rc = rad_error_set(RAD_E_FORMAT, "%s: the header does not start with '{': not a "
                           "safetensors file", path);
        goto fail;
    }
    json_error_t jerr;
    json_t *root = json_loadb((const char *)st->map + 8, (size_t)header_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: header is not valid JSON at line %d, column %d: "
                           "%s%s: the file is damaged; download it again", path, jerr.line,
                           jerr.column, jerr.text,
                           json_error_code(&jerr) == json_error_duplicate_key
                               ? " (every tensor name must appear once)" : "");
        goto fail;
    }
    if (!json_is_object(root)) {   /* cannot happen after '{', but costs nothing */
        json_decref(root);
        rc = rad_error_set(RAD_E_FORMAT, "%s: the header is not a JSON object", path);
        goto fail;
    }
    rc = load_table(st, root, header_len);
    json_decref(root);
    if (rc) goto fail;
    *out = st;
    return 0;

fail:
    rad_safetensors_close(st);
    return rc;
}

const RadStTensor *rad_safetensors_find(const RadSafetensors *st, const char *name)
{
    if (!st || !name || st->n_tensors == 0) return NULL;
    RadStTensor key = {.name = (char *)name};
    return bsearch(&key, st->tensors, (size_t)st->n_tensors, sizeof *st->tensors, tensor_by_name);
}
