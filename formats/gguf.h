/*
** gguf.h: read-only access to a GGUF file, llama.cpp's model format, or to
** the parts of a split GGUF presented as one file.
**
** A GGUF file is a small header, a table of typed metadata (key -> value),
** a table of tensor descriptions, and the tensor bytes, each tensor aligned.
** rad_gguf_open maps the file read-only and checks every count, length,
** offset and size in it against the file before anything is handed out, so
** a truncated, damaged or crafted file is refused with one line naming the
** file and the field (docs/GGUF.md lists what is accepted and refused).
** Nothing is converted: a tensor's `data` points into the map and its `enc`
** is the ggml type id, which is radiance's encoding id (rad_types.h).
**
** Metadata values are decoded once at open: numbers into C numbers, strings
** into NUL-terminated copies, arrays into an element table; all of it lives
** as long as the RadGguf.  Versions 2 and 3 are read (they are the same on a
** little-endian file); version 1 and byte-swapped (big-endian) files are
** refused by name.
**
** Split files: when the file is the first part of a set written by
** llama.cpp's gguf-split (`X-00001-of-0000N.gguf`, with `split.count` = N),
** every part is opened and checked, and the tensor table spans all parts;
** the metadata is the first part's, which is where gguf-split puts it.
*/
#ifndef RAD_GGUF_H
#define RAD_GGUF_H

#include <stdint.h>

#include "rad_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Metadata value types, as numbered in the file. */
typedef enum RadGgufType {
    RAD_GGUF_U8 = 0,
    RAD_GGUF_I8 = 1,
    RAD_GGUF_U16 = 2,
    RAD_GGUF_I16 = 3,
    RAD_GGUF_U32 = 4,
    RAD_GGUF_I32 = 5,
    RAD_GGUF_F32 = 6,
    RAD_GGUF_BOOL = 7, /* one byte, 0 or 1 */
    RAD_GGUF_STRING = 8,
    RAD_GGUF_ARRAY = 9,
    RAD_GGUF_U64 = 10,
    RAD_GGUF_I64 = 11,
    RAD_GGUF_F64 = 12
} RadGgufType;

#define RAD_GGUF_MAX_DIMS 4

/* A string from the file: `s` is a NUL-terminated copy of the `len` bytes.
** Metadata strings may hold NUL bytes; `len` is then the real length. */
typedef struct RadGgufStr {
    const char *s;
    uint64_t len;
} RadGgufStr;

/* One decoded metadata value.  Which member is valid follows `type`. */
typedef struct RadGgufValue {
    int type; /* RadGgufType */
    union {
        uint64_t u;     /* U8, U16, U32, U64, and BOOL (0 or 1) */
        int64_t i;      /* I8, I16, I32, I64 */
        double f;       /* F32, F64 */
        RadGgufStr str; /* STRING */
        struct {
            int type;                        /* element type (RadGgufType) */
            uint64_t n;                      /* element count */
            const uint8_t *raw;              /* numeric and BOOL elements: n little-endian
                                                values in the map, unaligned; read them with
                                                rad_gguf_arr_int / rad_gguf_arr_float */
            const RadGgufStr *str;           /* STRING elements: [n] */
            const struct RadGgufValue *item; /* ARRAY elements: [n], each an ARRAY */
        } arr;                               /* ARRAY */
    };
} RadGgufValue;

/* One tensor.  Everything here is checked at open: ne[0] is a whole number of
** the encoding's blocks, `size` bytes from `data` lie inside the file. */
typedef struct RadGgufTensor {
    const char *name;              /* NUL-terminated */
    int enc;                       /* ggml type id == RadEncoding; always one
                                      rad_encoding_info knows */
    int n_dims;                    /* 0..4 as written */
    int64_t ne[RAD_GGUF_MAX_DIMS]; /* GGUF order: ne[0] innermost (contiguous);
                                      entries past n_dims are 1 */
    int64_t n_elems;               /* product of ne */
    uint64_t size;                 /* bytes */
    const void *data;              /* points into its part's read-only map */
    uint64_t file_offset;          /* where `data` starts within its part's file */
    int part;                      /* 0-based index of the part holding it */
} RadGgufTensor;

typedef struct RadGguf RadGguf;

/* ------------------------------------------------------------ open/close */

/* Map the GGUF at `path` (and, when it is the first part of a split set, the
** other parts beside it) and validate everything listed in docs/GGUF.md.
** On success *out owns the maps and tables; close it with rad_gguf_close.
** Returns 0, RAD_E_ARG (a NULL argument, or a split part other than the
** first: the message names the first), RAD_E_NOTFOUND (no such file, or a
** split part is missing: the message names it), RAD_E_IO, RAD_E_FORMAT
** (truncated, damaged or hostile: the message names the file, the field and
** the byte offset), RAD_E_UNSUPPORTED (version 1, big-endian, a tensor type
** radiance does not serve: named by number and name) or RAD_E_NOMEM.  *out
** is NULL on failure. */
int rad_gguf_open(const char *path, RadGguf **out);

/* Unmap and free everything; every pointer handed out becomes invalid.
** NULL is allowed. */
void rad_gguf_close(RadGguf *g);

/* The path given to rad_gguf_open. */
const char *rad_gguf_path(const RadGguf *g);

/* The file's format version (2 or 3; the first part's for a split set). */
uint32_t rad_gguf_version(const RadGguf *g);

/* The tensor data alignment of the first part: `general.alignment`, or 32. */
uint32_t rad_gguf_alignment(const RadGguf *g);

/* How many files make up this model: 1, or `split.count`. */
int rad_gguf_n_parts(const RadGguf *g);

/* The path of part `i` (0 <= i < n_parts), or NULL when out of range. */
const char *rad_gguf_part_path(const RadGguf *g, int i);

/* -------------------------------------------------------------- metadata */

/* The number of metadata keys (the first part's, for a split set). */
int rad_gguf_n_keys(const RadGguf *g);

/* The name of key `i` in file order, or NULL when `i` is out of range. */
const char *rad_gguf_key(const RadGguf *g, int i);

/* The value of key `i`, or NULL when `i` is out of range. */
const RadGgufValue *rad_gguf_value(const RadGguf *g, int i);

/* The index of `key`, or -1 when the file has no such key.  O(1). */
int rad_gguf_find_key(const RadGguf *g, const char *key);

/* The value of `key`, or NULL when the file has no such key. */
const RadGgufValue *rad_gguf_get(const RadGguf *g, const char *key);

/* Typed getters.  Each stores the value of `key` in *out, or `dflt` when the
** key is absent, and returns 0; when the key is present with a type that
** does not fit it returns RAD_E_FORMAT (also for a number out of
** range) with a message naming the file, the key and both types, and leaves
** *out untouched.
**   get_int:    any integer type (not BOOL); a U64 above INT64_MAX is FORMAT.
**   get_u32:    any integer type whose value is in [0, UINT32_MAX].
**   get_float:  F32 or F64.
**   get_bool:   BOOL.
**   get_string: STRING; *out points at the NUL-terminated copy.
**   get_array:  ARRAY whose elements have type `elem_type` (-1: any type);
**               an absent key stores NULL (there is no default array). */
int rad_gguf_get_int(const RadGguf *g, const char *key, int64_t dflt, int64_t *out);
int rad_gguf_get_u32(const RadGguf *g, const char *key, uint32_t dflt, uint32_t *out);
int rad_gguf_get_float(const RadGguf *g, const char *key, double dflt, double *out);
int rad_gguf_get_bool(const RadGguf *g, const char *key, int dflt, int *out);
int rad_gguf_get_string(const RadGguf *g, const char *key, const char *dflt, const char **out);
int rad_gguf_get_array(const RadGguf *g, const char *key, int elem_type, const RadGgufValue **out);

/* Array elements.  `a` is an ARRAY value and `i` < a->arr.n (checked by
** assert; out of range or the wrong element type yields 0 / NULL).
**   arr_int:   integer and BOOL elements (a U64 above INT64_MAX reads as INT64_MAX).
**   arr_float: F32, F64 and integer elements, as a double.
**   arr_str:   STRING elements; *len (if not NULL) gets the byte length.
**   arr_item:  ARRAY elements (nested arrays). */
int64_t rad_gguf_arr_int(const RadGgufValue *a, uint64_t i);
double rad_gguf_arr_float(const RadGgufValue *a, uint64_t i);
const char *rad_gguf_arr_str(const RadGgufValue *a, uint64_t i, uint64_t *len);
const RadGgufValue *rad_gguf_arr_item(const RadGgufValue *a, uint64_t i);

/* --------------------------------------------------------------- tensors */

/* The number of tensors, over all parts. */
int rad_gguf_n_tensors(const RadGguf *g);

/* Tensor `i` (file order, part by part), or NULL when out of range. */
const RadGgufTensor *rad_gguf_tensor(const RadGguf *g, int i);

/* The tensor called `name`, or NULL.  O(1). */
const RadGgufTensor *rad_gguf_find_tensor(const RadGguf *g, const char *name);

/* ----------------------------------------------------------------- names */

/* "u8", "i32", "f32", "bool", "string", "array", ...; "?" for an unknown type. */
const char *rad_gguf_type_name(int type);

/* ggml's name for tensor type `id` ("q4_k", "iq2_xxs", "q4_0_4_4"), including
** types radiance does not serve and ids ggml has retired; NULL when the id is
** not one ggml has used. */
const char *rad_gguf_ggml_type_name(int id);

#ifdef __cplusplus
}
#endif
#endif /* RAD_GGUF_H */
