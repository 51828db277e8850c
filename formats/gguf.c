/*
** gguf.c: map a GGUF file and check every number in it before use.
**
** Layout (all little-endian):
**
**     "GGUF"  u32 version  u64 n_tensors  u64 n_kv
**     n_kv   x { string key, u32 type, value }
**     n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
**     zero padding to the alignment
**     tensor data: tensor i at data_start + offset_i
**
** where a string is a u64 byte length and the bytes, and an array value is
** a u32 element type, a u64 element count and the elements.
**
** Files come from the internet, so the whole file is treated as hostile.
** The rules this reader enforces, in the order it meets them:
**   - the magic, a version of 2 or 3 (1 and byte-swapped files are refused
**     by name), counts of keys and tensors the file has room for;
**   - every length and count is compared with the bytes left in the file
**     before it is used, by division, so no product can overflow and no
**     allocation is larger than a small multiple of the file itself;
**   - value types are 0..12, booleans are 0 or 1, arrays nest at most
**     NEST_MAX deep, keys are at most 65535 bytes with no NUL, each key once;
**   - `general.alignment`, when present, is a u32 power of two (default 32);
**   - tensor names are non-empty, at most NAME_MAX bytes, no NUL, each once;
**     at most 4 dimensions, each at most INT64_MAX, their product too;
**     the type is a ggml type radiance serves (others are named and
**     refused); ne[0] is a whole number of the type's blocks;
**   - the data section starts at the first aligned offset after the tensor
**     table; the tensors lie in it packed in table order, each at the
**     running total of the previous sizes rounded up to the alignment (the
**     rule ggml's own reader enforces, which also rules out overlaps), each
**     offset aligned, and each tensor's bytes end inside the file.
** A split set is opened part by part under the same rules, and the parts
** must agree on split.count and number themselves 0..N-1 with split.no.
*/
#include "gguf.h"
#include "file_access.h"
#include "rad_limits.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_HEADER_BYTES 24    /* magic, version, n_tensors, n_kv */
/* The limits (base/rad_limits.h, docs/LIMITS.md) under this file's names. */
#define KEY_MAX           RAD_LIMIT_GGUF_KEY_BYTES
#define NAME_MAX_BYTES    RAD_LIMIT_TENSOR_NAME_BYTES
#define NEST_MAX          RAD_LIMIT_GGUF_NEST
#define DEFAULT_ALIGNMENT 32
#define SPLIT_MAX         RAD_LIMIT_GGUF_SPLITS

/* The smallest encodings of a key/value pair (8-byte key length, u32 type,
** a one-byte value) and of a tensor description (8-byte name length, u32
** n_dims, u32 type, u64 offset): used to refuse counts the file cannot hold. */
#define MIN_KV_BYTES     13
#define MIN_TENSOR_BYTES 24

/* ------------------------------------------------------- type tables */

static const char *const value_type_names[] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};
#define N_VALUE_TYPES 13

/* Bytes of one element of each value type; 0 for the variable-sized ones. */
static const uint8_t value_type_size[N_VALUE_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* ggml's tensor type names by id, for messages about types we do not serve
** (and for tools).  Ids marked retired were removed from ggml's file format. */
static const struct {
    const char *name;
    int retired;
} ggml_types[] = {
    [0] = {"f32", 0},         [1] = {"f16", 0},         [2] = {"q4_0", 0},        [3] = {"q4_1", 0},
    [4] = {"q4_2", 1},        [5] = {"q4_3", 1},        [6] = {"q5_0", 0},        [7] = {"q5_1", 0},
    [8] = {"q8_0", 0},        [9] = {"q8_1", 0},        [10] = {"q2_k", 0},       [11] = {"q3_k", 0},
    [12] = {"q4_k", 0},       [13] = {"q5_k", 0},       [14] = {"q6_k", 0},       [15] = {"q8_k", 0},
    [16] = {"iq2_xxs", 0},    [17] = {"iq2_xs", 0},     [18] = {"iq3_xxs", 0},    [19] = {"iq1_s", 0},
    [20] = {"iq4_nl", 0},     [21] = {"iq3_s", 0},      [22] = {"iq2_s", 0},      [23] = {"iq4_xs", 0},
    [24] = {"i8", 0},         [25] = {"i16", 0},        [26] = {"i32", 0},        [27] = {"i64", 0},
    [28] = {"f64", 0},        [29] = {"iq1_m", 0},      [30] = {"bf16", 0},       [31] = {"q4_0_4_4", 1},
    [32] = {"q4_0_4_8", 1},   [33] = {"q4_0_8_8", 1},   [34] = {"tq1_0", 0},      [35] = {"tq2_0", 0},
    [36] = {"iq4_nl_4_4", 1}, [37] = {"iq4_nl_4_8", 1}, [38] = {"iq4_nl_8_8", 1}, [39] = {"mxfp4", 0},
    [40] = {"nvfp4", 0},      [41] = {"q1_0", 0},       [42] = {"q2_0", 0},
};
#define N_GGML_TYPES ((int)(sizeof ggml_types / sizeof ggml_types[0]))

const char *rad_gguf_type_name(int type)
{
    return type >= 0 && type < N_VALUE_TYPES ? value_type_names[type] : "?";
}

const char *rad_gguf_ggml_type_name(int id)
{
    return id >= 0 && id < N_GGML_TYPES ? ggml_types[id].name : NULL;
}

/* ------------------------------------------------------------- arena */

/* Everything decoded from the metadata (strings, element tables) lives in
** one arena of large blocks, freed at close.  Allocation never moves what
** was handed out before. */
typedef struct Block {
    struct Block *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} Block;

typedef struct Arena {
    Block *head;
} Arena;

#define ARENA_BLOCK (1u << 20)

/* `n` bytes aligned to 16, or NULL when out of memory. */
static void *arena_alloc(Arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    Block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        if (cap > SIZE_MAX - sizeof(Block)) return NULL;
        b = malloc(sizeof(Block) + cap);
        if (!b) return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->mem + b->used;
    b->used += n;
    return p;
}

/* `count` elements of `size` bytes, or NULL (out of memory or overflow). */
static void *arena_array(Arena *a, uint64_t count, size_t size)
{
    if (count > SIZE_MAX / size) return NULL;
    return arena_alloc(a, (size_t)count * size);
}

static void arena_free(Arena *a)
{
    while (a->head) {
        Block *next = a->head->next;
        free(a->head);
        a->head = next;
    }
}

/* ------------------------------------------------------ name index */

/* An open-addressing hash from a name to its position in a table, for the
** metadata keys and for the tensor names.  Slots hold position + 1; 0 is
** empty.  The table never fills past half. */
typedef struct Index {
    size_t cap; /* a power of two, or 0 */
    int32_t *slot;
} Index;

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 1099511628211ull;
    return h;
}

/* Room for `n` names.  Returns 0 or -1 (out of memory). */
static int index_init(Index *ix, uint64_t n)
{
    size_t cap = 16;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 4 / sizeof(int32_t)) return -1;
        cap *= 2;
    }
    ix->slot = calloc(cap, sizeof *ix->slot);
    if (!ix->slot) return -1;
    ix->cap = cap;
    return 0;
}

/* The slot where `name` is, or where it would go.  `names[i]` is the name
** at position i. */
static size_t index_slot(const Index *ix, const void *names, size_t stride, const char *name)
{
    size_t i = (size_t)hash_name(name) & (ix->cap - 1);
    for (;;) {
        int32_t at = ix->slot[i];
        if (at == 0) return i;
        const char *have = *(const char *const *)((const char *)names + (size_t)(at - 1) * stride);
        if (strcmp(have, name) == 0) return i;
        i = (i + 1) & (ix->cap - 1);
    }
}

/* Position of `name`, or -1.  Names are read through `names` with `stride`
** bytes between entries, so the index works over any table whose entries
** start with (or hold at a fixed place) a `const char *` name. */
static int32_t index_find(const Index *ix, const void *names, size_t stride, const char *name)
{
    if (!ix->cap) return -1;
    int32_t at = ix->slot[index_slot(ix, names, stride, name)];
    return at ? at - 1 : -1;
}

/* Add position `pos`, whose name is not yet present; the caller checked. */
static void index_add(Index *ix, const void *names, size_t stride, const char *name, int32_t pos)
{
    ix->slot[index_slot(ix, names, stride, name)] = pos + 1;
}

static void index_free(Index *ix)
{
    free(ix->slot);
    ix->slot = NULL;
    ix->cap = 0;
}

/* ----------------------------------------------------------- the object */

/* One metadata entry of one part. */
typedef struct Kv {
    const char *key; /* first, so an Index can read it */
    RadGgufValue value;
} Kv;

/* One file of the set. */
typedef struct Part {
    char *path;
    const uint8_t *map;
    uint64_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_start;
    int n_kv;
    Kv *kv;
    Index kv_index;
} Part;

struct RadGguf {
    char *path;
    int n_parts;
    Part *parts;
    int n_tensors, cap_tensors;
    RadGgufTensor *tensors; /* name first, so an Index can read it */
    Index tensor_index;
    Arena arena;
};

/* ------------------------------------------------------ little helpers */

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* A name from the file made safe for a one-line message: at most 120 bytes,
** control bytes shown as '?', "..." when cut. */
static const char *shown(const char *s, uint64_t len, char *buf, size_t cap)
{
    size_t n = 0;
    uint64_t i = 0;
    for (; i < len && n + 4 < cap && i < 120; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[n++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (i < len && n + 4 <= cap) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = 0;
    return buf;
}

/* ------------------------------------------------------------- reading */

/* A cursor over one mapped part.  `what` names what is being read, for
** messages: "key 'general.name'", "tensor 'blk.0.attn_q.weight'". */
typedef struct Parser {
    const char *path;
    const uint8_t *base;
    uint64_t size, pos;
    Arena *arena;
    char what[200];
    uint64_t str_max;       /* the longest string value or element read now */
    const char *str_limit;  /* its name in rad_limits.h, for messages */
} Parser;

/* Refuse a read of `n` bytes at the cursor that runs past the end. */
static int need(Parser *ps, uint64_t n, const char *field)
{
    if (n <= ps->size - ps->pos) return 0;
    return rad_error_set(RAD_E_FORMAT,
                         "%s: %s: the %s (%llu bytes at offset %llu) runs past the end of "
                         "the file (%llu bytes): the file is truncated or damaged; download it again",
                         ps->path, ps->what, field, (unsigned long long)n, (unsigned long long)ps->pos,
                         (unsigned long long)ps->size);
}

static int read_u32(Parser *ps, uint32_t *v, const char *field)
{
    int rc = need(ps, 4, field);
    if (rc) return rc;
    *v = le32(ps->base + ps->pos);
    ps->pos += 4;
    return 0;
}

static int read_u64(Parser *ps, uint64_t *v, const char *field)
{
    int rc = need(ps, 8, field);
    if (rc) return rc;
    *v = le64(ps->base + ps->pos);
    ps->pos += 8;
    return 0;
}

/* Read a string (u64 length + bytes) of at most `max` bytes (`limit`, its
** name in rad_limits.h, for the refusal) into *out,
** copied into the arena with a NUL after it.  `field` (and `elem` unless it
** is UINT64_MAX) name it in messages. */
static int read_str(Parser *ps, RadGgufStr *out, uint64_t max, const char *limit, const char *field,
                    uint64_t elem)
{
    /* The labels are only for messages: formatting them for every one of
    ** a vocabulary's 262k strings cost more than the rest of the open. */
    char where[96], length[112];
    uint64_t len;
    int short_read = ps->size - ps->pos < 8, bad = 0;
    if (!short_read) {
        len = le64(ps->base + ps->pos);
        ps->pos += 8;
        bad = len > ps->size - ps->pos || len > max;
    }
    if (short_read || bad) {
        if (elem == UINT64_MAX)
            snprintf(where, sizeof where, "%s", field);
        else
            snprintf(where, sizeof where, "%s %llu", field, (unsigned long long)elem);
    }
    if (short_read) {
        snprintf(length, sizeof length, "length of the %s", where);
        int rc = read_u64(ps, &len, length);
        if (rc) return rc;
    }
    if (len > ps->size - ps->pos)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: %s: length %llu at offset %llu runs past the end of the "
                             "file (%llu bytes): the file is truncated or damaged; download it again",
                             ps->path, ps->what, where, (unsigned long long)len,
                             (unsigned long long)(ps->pos - 8), (unsigned long long)ps->size);
    if (len > max)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: %s: length %llu is over the limit of %llu bytes (%s): the "
                             "file is damaged or hostile",
                             ps->path, ps->what, where, (unsigned long long)len, (unsigned long long)max,
                             limit);
    char *s = arena_alloc(ps->arena, (size_t)len + 1);
    if (!s)
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory for a %llu-byte string", ps->path,
                             (unsigned long long)len);
    memcpy(s, ps->base + ps->pos, (size_t)len);
    s[len] = 0;
    ps->pos += len;
    out->s = s;
    out->len = len;
    return 0;
}

/* Decode one fixed-size scalar of `type` at `p` into *v. */
static void decode_scalar(int type, const uint8_t *p, RadGgufValue *v)
{
    v->type = type;
    switch (type) {
    case RAD_GGUF_U8:
        v->u = p[0];
        break;
    case RAD_GGUF_I8:
        v->i = (int8_t)p[0];
        break;
    case RAD_GGUF_U16:
        v->u = le16(p);
        break;
    case RAD_GGUF_I16:
        v->i = (int16_t)le16(p);
        break;
    case RAD_GGUF_U32:
        v->u = le32(p);
        break;
    case RAD_GGUF_I32:
        v->i = (int32_t)le32(p);
        break;
    case RAD_GGUF_BOOL:
        v->u = p[0];
        break;
    case RAD_GGUF_U64:
        v->u = le64(p);
        break;
    case RAD_GGUF_I64: {
        uint64_t bits = le64(p);
        memcpy(&v->i, &bits, sizeof bits);
        break;
    }
    case RAD_GGUF_F32: {
        uint32_t bits = le32(p);
        float f;
        memcpy(&f, &bits, sizeof f);
        v->f = f;
        break;
    }
    case RAD_GGUF_F64: {
        uint64_t bits = le64(p);
        memcpy(&v->f, &bits, sizeof bits);
        break;
    }
    default:
        assert(0);
    }
}

static int read_value(Parser *ps, int type, RadGgufValue *v, int depth);

/* The body of an ARRAY value (element type, count, elements) into *v. */
static int read_array(Parser *ps, RadGgufValue *v, int depth)
{
    uint32_t et;
    uint64_t n;
    int rc;
    if ((rc = read_u32(ps, &et, "array element type"))) return rc;
    if (et >= N_VALUE_TYPES)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: array element type %u is not a GGUF value type: the "
                             "file is damaged",
                             ps->path, ps->what, et);
    if (et == RAD_GGUF_ARRAY && depth >= NEST_MAX)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: arrays nested more than %d deep (RAD_LIMIT_GGUF_NEST): the "
                             "file is damaged or hostile",
                             ps->path, ps->what, NEST_MAX);
    if ((rc = read_u64(ps, &n, "array count"))) return rc;

    v->type = RAD_GGUF_ARRAY;
    v->arr.type = (int)et;
    v->arr.n = n;
    v->arr.raw = NULL;
    v->arr.str = NULL;
    v->arr.item = NULL;

    /* Every element takes at least `least` bytes of the file. */
    uint64_t room = ps->size - ps->pos;
    uint64_t least = value_type_size[et] ? value_type_size[et] : et == RAD_GGUF_STRING ? 8 : 12;
    if (n > room / least)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: an array of %llu %s elements at offset %llu cannot fit "
                             "in the %llu bytes left in the file: the file is truncated or damaged",
                             ps->path, ps->what, (unsigned long long)n, value_type_names[et],
                             (unsigned long long)(ps->pos - 12), (unsigned long long)room);

    if (value_type_size[et]) {
        v->arr.raw = ps->base + ps->pos;
        if (et == RAD_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (v->arr.raw[i] > 1)
                    return rad_error_set(RAD_E_FORMAT,
                                         "%s: %s: bool element %llu is %u, not 0 or 1: the "
                                         "file is damaged",
                                         ps->path, ps->what, (unsigned long long)i, v->arr.raw[i]);
        ps->pos += n * value_type_size[et];
        return 0;
    }
    if (et == RAD_GGUF_STRING) {
        RadGgufStr *str = arena_array(ps->arena, n, sizeof *str);
        if (!str && n)
            return rad_error_set(RAD_E_NOMEM, "%s: out of memory for %llu strings", ps->path,
                                 (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++)
            if ((rc = read_str(ps, &str[i], ps->str_max, ps->str_limit, "string element", i))) return rc;
        v->arr.str = str;
        return 0;
    }
    RadGgufValue *item = arena_array(ps->arena, n, sizeof *item);
    if (!item && n)
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory for %llu arrays", ps->path,
                             (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++)
        if ((rc = read_value(ps, RAD_GGUF_ARRAY, &item[i], depth + 1))) return rc;
    v->arr.item = item;
    return 0;
}

/* One value of `type` (checked to be < N_VALUE_TYPES) into *v. */
static int read_value(Parser *ps, int type, RadGgufValue *v, int depth)
{
    if (type == RAD_GGUF_STRING) {
        v->type = type;
        return read_str(ps, &v->str, ps->str_max, ps->str_limit, "string value", UINT64_MAX);
    }
    if (type == RAD_GGUF_ARRAY) return read_array(ps, v, depth);
    int rc = need(ps, value_type_size[type], "value");
    if (rc) return rc;
    decode_scalar(type, ps->base + ps->pos, v);
    if (type == RAD_GGUF_BOOL && v->u > 1)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: bool value %llu at offset %llu is not 0 or 1: the file "
                             "is damaged",
                             ps->path, ps->what, (unsigned long long)v->u, (unsigned long long)ps->pos);
    ps->pos += value_type_size[type];
    return 0;
}

/* ------------------------------------------------------------- a part */

/* Map `p->path` read-only into p->map / p->size. */
static int map_part(Part *p)
{
    int fd = open(p->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return rad_error_set(RAD_E_NOTFOUND, "%s: not found", p->path);
        return rad_error_set(RAD_E_IO, "%s: cannot open: %s", p->path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rad_error_set(RAD_E_IO, "%s: not a regular file", p->path);
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 4) {
        close(fd);
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %llu bytes is too short for a GGUF file: the file is "
                             "truncated; download it again",
                             p->path, (unsigned long long)size);
    }
    if (size > SIZE_MAX) {
        close(fd);
        return rad_error_set(RAD_E_UNSUPPORTED, "%s: too large to map on this machine", p->path);
    }
    const uint8_t *map = rad_file_map_fd(fd, size, p->path);     /* takes fd over */
    if (!map) return rad_error_set(RAD_E_IO, "%s: cannot map: %s", p->path, strerror(errno));
    p->map = map;
    p->size = size;
    return 0;
}

/* The magic and the version. */
static int check_header(Part *p)
{
    if (memcmp(p->map, "GGUF", 4) != 0) {
        char got[16];
        return rad_error_set(RAD_E_FORMAT, "%s: not a GGUF file (it starts with '%s', not 'GGUF')", p->path,
                             shown((const char *)p->map, 4, got, sizeof got));
    }
    if (p->size < GGUF_HEADER_BYTES)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: the GGUF header needs %d bytes but the file has %llu: the "
                             "file is truncated; download it again",
                             p->path, GGUF_HEADER_BYTES, (unsigned long long)p->size);
    uint32_t version = le32(p->map + 4);
    if (version != 0 && (version & 0xffff) == 0)
        return rad_error_set(RAD_E_UNSUPPORTED,
                             "%s: a big-endian (byte-swapped) GGUF file (version field "
                             "0x%08x); radiance reads little-endian files: convert it again without "
                             "--bigendian",
                             p->path, version);
    if (version == 1)
        return rad_error_set(RAD_E_UNSUPPORTED,
                             "%s: GGUF version 1 (the format before August 2023) is not "
                             "supported: convert the model again with a current llama.cpp",
                             p->path);
    if (version != 2 && version != 3)
        return rad_error_set(RAD_E_UNSUPPORTED,
                             "%s: GGUF version %u is not supported; radiance reads "
                             "versions 2 and 3",
                             p->path, version);
    p->version = version;
    return 0;
}

/* The value of a part's `key`, or NULL. */
static const RadGgufValue *part_get(const Part *p, const char *key)
{
    int32_t i = index_find(&p->kv_index, p->kv, sizeof *p->kv, key);
    return i < 0 ? NULL : &p->kv[i].value;
}

/* Read the n_kv key/value pairs of part `p`. */
static int read_kvs(Part *p, Parser *ps, uint64_t n_kv)
{
    char name[160];
    int rc;
    p->kv = arena_array(ps->arena, n_kv, sizeof *p->kv);
    if ((!p->kv && n_kv) || index_init(&p->kv_index, n_kv))
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory for %llu metadata keys", p->path,
                             (unsigned long long)n_kv);
    for (uint64_t k = 0; k < n_kv; k++) {
        Kv *kv = &p->kv[k];
        RadGgufStr key;
        snprintf(ps->what, sizeof ps->what, "metadata key %llu", (unsigned long long)k);
        if ((rc = read_str(ps, &key, KEY_MAX, "RAD_LIMIT_GGUF_KEY_BYTES", "name", UINT64_MAX))) return rc;
        snprintf(ps->what, sizeof ps->what, "key '%s'", shown(key.s, key.len, name, sizeof name));
        if (strlen(key.s) != key.len)
            return rad_error_set(RAD_E_FORMAT, "%s: %s: the name holds a NUL byte: the file is damaged",
                                 p->path, ps->what);
        if (index_find(&p->kv_index, p->kv, sizeof *p->kv, key.s) >= 0)
            return rad_error_set(RAD_E_FORMAT, "%s: %s appears twice: the file is damaged", p->path,
                                 ps->what);
        kv->key = key.s;
        uint32_t type;
        if ((rc = read_u32(ps, &type, "value type"))) return rc;
        if (type >= N_VALUE_TYPES)
            return rad_error_set(RAD_E_FORMAT,
                                 "%s: %s: value type %u is not a GGUF value type: the file "
                                 "is damaged",
                                 p->path, ps->what, type);
        /* A chat template is the one long string a model carries. */
        int is_template = strncmp(key.s, "tokenizer.chat_template", 23) == 0;
        ps->str_max = is_template ? RAD_LIMIT_CHAT_TEMPLATE_BYTES : RAD_LIMIT_META_STRING_BYTES;
        ps->str_limit = is_template ? "RAD_LIMIT_CHAT_TEMPLATE_BYTES" : "RAD_LIMIT_META_STRING_BYTES";
        if ((rc = read_value(ps, (int)type, &kv->value, 0))) return rc;
        index_add(&p->kv_index, p->kv, sizeof *p->kv, kv->key, (int32_t)k);
        p->n_kv = (int)k + 1;
    }
    return 0;
}

/* general.alignment: a u32 power of two, or the default. */
static int read_alignment(Part *p)
{
    const RadGgufValue *v = part_get(p, "general.alignment");
    p->alignment = DEFAULT_ALIGNMENT;
    if (!v) return 0;
    if (v->type != RAD_GGUF_U32)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: key 'general.alignment' is a %s; it must be a u32: the file "
                             "is damaged",
                             p->path, rad_gguf_type_name(v->type));
    if (v->u == 0 || (v->u & (v->u - 1)) != 0)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: general.alignment %llu is not a power of two: the file is "
                             "damaged",
                             p->path, (unsigned long long)v->u);
    p->alignment = (uint32_t)v->u;
    return 0;
}

/* Make room for one more tensor in g's table. */
static int grow_tensors(RadGguf *g, const char *path)
{
    if (g->n_tensors < g->cap_tensors) return 0;
    int cap = g->cap_tensors ? g->cap_tensors * 2 : 64;
    if (g->cap_tensors > INT32_MAX / 2) cap = INT32_MAX;
    RadGgufTensor *t = realloc(g->tensors, (size_t)cap * sizeof *t);
    if (!t) return rad_error_set(RAD_E_NOMEM, "%s: out of memory for the tensor table", path);
    g->tensors = t;
    g->cap_tensors = cap;
    return 0;
}

/* Why ggml type `type` cannot be read, in a message about tensor `what`. */
static int refuse_type(const Part *p, const char *what, uint32_t type)
{
    const char *name = (int64_t)type < N_GGML_TYPES ? ggml_types[type].name : NULL;
    if (!name)
        return rad_error_set(RAD_E_UNSUPPORTED,
                             "%s: %s: type %u is not a ggml tensor type radiance knows: "
                             "the file is damaged, or newer than this radiance",
                             p->path, what, type);
    if (ggml_types[type].retired)
        return rad_error_set(RAD_E_UNSUPPORTED,
                             "%s: %s: type %u (%s) was retired from GGUF files by ggml "
                             "and is not supported: convert the model again",
                             p->path, what, type, name);
    return rad_error_set(RAD_E_UNSUPPORTED, "%s: %s: type %u (%s) is not supported by radiance", p->path,
                         what, type, name);
}

/* Read one tensor description into *t (data not yet placed). */
static int read_tensor_info(const Part *p, Parser *ps, uint64_t k, RadGgufTensor *t)
{
    char name[160];
    RadGgufStr s;
    int rc;
    snprintf(ps->what, sizeof ps->what, "tensor info %llu", (unsigned long long)k);
    if ((rc = read_str(ps, &s, NAME_MAX_BYTES, "RAD_LIMIT_TENSOR_NAME_BYTES", "name", UINT64_MAX))) return rc;
    if (s.len == 0)
        return rad_error_set(RAD_E_FORMAT, "%s: tensor info %llu has an empty name: the file is damaged",
                             p->path, (unsigned long long)k);
    snprintf(ps->what, sizeof ps->what, "tensor '%s'", shown(s.s, s.len, name, sizeof name));
    if (strlen(s.s) != s.len)
        return rad_error_set(RAD_E_FORMAT, "%s: %s: the name holds a NUL byte: the file is damaged", p->path,
                             ps->what);
    t->name = s.s;

    uint32_t n_dims;
    if ((rc = read_u32(ps, &n_dims, "dimension count"))) return rc;
    if (n_dims > RAD_GGUF_MAX_DIMS)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: %u dimensions; GGUF tensors have at most %d: the file "
                             "is damaged",
                             p->path, ps->what, n_dims, RAD_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t n_elems = 1;
    int overflow = 0;
    for (int d = 0; d < RAD_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if ((uint32_t)d < n_dims && (rc = read_u64(ps, &ne, "dimension"))) return rc;
        if (ne > (uint64_t)INT64_MAX)
            return rad_error_set(RAD_E_FORMAT,
                                 "%s: %s: dimension %d is %llu, past 2^63 - 1: the file is "
                                 "damaged or hostile",
                                 p->path, ps->what, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        if (__builtin_mul_overflow(n_elems, t->ne[d], &n_elems)) overflow = 1;
    }
    /* A zero dimension makes the overflow of the others harmless. */
    for (int d = 0; d < RAD_GGUF_MAX_DIMS && overflow; d++)
        if (t->ne[d] == 0) overflow = 0, n_elems = 0;
    if (overflow)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: the element count %lld x %lld x %lld x %lld overflows "
                             "64 bits: the file is damaged or hostile",
                             p->path, ps->what, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                             (long long)t->ne[3]);
    t->n_elems = n_elems;

    uint32_t type;
    if ((rc = read_u32(ps, &type, "type"))) return rc;
    const RadEncodingInfo *info = (int64_t)type < N_GGML_TYPES ? rad_encoding_info((int)type) : NULL;
    if (!info) return refuse_type(p, ps->what, type);
    t->enc = (int)type;
    if (t->ne[0] % info->block_elems)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: ne[0] = %lld is not a multiple of %s's block of %d "
                             "elements: the file is damaged",
                             p->path, ps->what, (long long)t->ne[0], info->name, info->block_elems);
    /* Bytes: whole blocks per row, times the rows, checked for overflow. */
    int64_t size = 0;
    int too_big = __builtin_mul_overflow(t->ne[0] / info->block_elems, (int64_t)info->block_bytes, &size);
    for (int d = 1; d < RAD_GGUF_MAX_DIMS && !too_big; d++)
        too_big = __builtin_mul_overflow(size, t->ne[d], &size);
    if (too_big)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: %s: the size in bytes overflows 64 bits: the file is damaged "
                             "or hostile",
                             p->path, ps->what);
    t->size = (uint64_t)size;

    /* The offset is checked once the data section's start is known. */
    if ((rc = read_u64(ps, &t->file_offset, "data offset"))) return rc;
    return 0;
}

/* Place the part's tensors, g->tensors[first .. g->n_tensors), in its data
** section: aligned, packed in table order, inside the file. */
static int place_tensors(RadGguf *g, Part *p, int first)
{
    uint64_t expected = 0;
    for (int i = first; i < g->n_tensors; i++) {
        RadGgufTensor *t = &g->tensors[i];
        uint64_t offset = t->file_offset;
        char name[160];
        const char *nm = shown(t->name, strlen(t->name), name, sizeof name);
        if (offset % p->alignment)
            return rad_error_set(RAD_E_FORMAT,
                                 "%s: tensor '%s': data offset %llu is not a multiple of the "
                                 "alignment %u: the file is damaged",
                                 p->path, nm, (unsigned long long)offset, p->alignment);
        if (offset != expected)
            return rad_error_set(RAD_E_FORMAT,
                                 "%s: tensor '%s': data offset %llu, but the tensors before it "
                                 "end at %llu (GGUF packs tensors in table order): the file is damaged",
                                 p->path, nm, (unsigned long long)offset, (unsigned long long)expected);
        if (p->data_start > p->size || offset > p->size - p->data_start ||
            t->size > p->size - p->data_start - offset)
            return rad_error_set(RAD_E_FORMAT,
                                 "%s: tensor '%s': %llu bytes at data offset %llu (file offset "
                                 "%llu) run past the end of the file (%llu bytes): the file is truncated; "
                                 "download it again",
                                 p->path, nm, (unsigned long long)t->size, (unsigned long long)offset,
                                 (unsigned long long)(p->data_start + offset), (unsigned long long)p->size);
        t->file_offset = p->data_start + offset;
        t->data = p->map + t->file_offset;
        /* t->size <= p->size, so neither the sum nor the rounding can overflow. */
        expected = align_up(offset + t->size, p->alignment);
    }
    return 0;
}

/* Parse part `index` of `g` (already mapped): metadata, tensor table, data. */
static int parse_part(RadGguf *g, int index)
{
    Part *p = &g->parts[index];
    int rc = check_header(p);
    if (rc) return rc;

    Parser ps = {
        .path = p->path, .base = p->map, .size = p->size, .pos = GGUF_HEADER_BYTES, .arena = &g->arena};
    uint64_t n_tensors = le64(p->map + 8), n_kv = le64(p->map + 16);
    uint64_t room = p->size - GGUF_HEADER_BYTES;
    if (n_kv > room / MIN_KV_BYTES || n_kv > INT32_MAX)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: the header claims %llu metadata keys, more than the file "
                             "(%llu bytes) can hold: the file is truncated or damaged",
                             p->path, (unsigned long long)n_kv, (unsigned long long)p->size);
    if (n_tensors > room / MIN_TENSOR_BYTES || n_tensors > INT32_MAX)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: the header claims %llu tensors, more than the file (%llu "
                             "bytes) can hold: the file is truncated or damaged",
                             p->path, (unsigned long long)n_tensors, (unsigned long long)p->size);
    if (n_kv > RAD_LIMIT_META_KEYS)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: the header claims %llu metadata keys, over the limit of %d "
                             "(RAD_LIMIT_META_KEYS): the file is damaged or hostile",
                             p->path, (unsigned long long)n_kv, RAD_LIMIT_META_KEYS);

    if ((rc = read_kvs(p, &ps, n_kv))) return rc;
    if ((rc = read_alignment(p))) return rc;

    int first = g->n_tensors;
    if ((uint64_t)g->n_tensors + n_tensors > RAD_LIMIT_TENSORS)
        return rad_error_set(RAD_E_FORMAT, "%s: %llu tensors in all parts, over the limit of %d "
                             "(RAD_LIMIT_TENSORS): the file is damaged or hostile", p->path,
                             (unsigned long long)((uint64_t)g->n_tensors + n_tensors), RAD_LIMIT_TENSORS);
    for (uint64_t k = 0; k < n_tensors; k++) {
        if ((rc = grow_tensors(g, p->path))) return rc;
        RadGgufTensor *t = &g->tensors[g->n_tensors];
        memset(t, 0, sizeof *t);
        t->part = index;
        if ((rc = read_tensor_info(p, &ps, k, t))) return rc;
        g->n_tensors++;
    }
    p->data_start = align_up(ps.pos, p->alignment);
    return place_tensors(g, p, first);
}

/* --------------------------------------------------------------- split */

/* The integer value of a part's `key`, or `dflt` when absent.  A value that
** is not an integer in [lo, hi] is refused. */
static int part_int(const Part *p, const char *key, int64_t dflt, int64_t lo, int64_t hi, int64_t *out)
{
    const RadGgufValue *v = part_get(p, key);
    *out = dflt;
    if (!v) return 0;
    int64_t x;
    switch (v->type) {
    case RAD_GGUF_U8:
    case RAD_GGUF_U16:
    case RAD_GGUF_U32:
    case RAD_GGUF_U64:
        x = v->u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v->u;
        break;
    case RAD_GGUF_I8:
    case RAD_GGUF_I16:
    case RAD_GGUF_I32:
    case RAD_GGUF_I64:
        x = v->i;
        break;
    default:
        return rad_error_set(RAD_E_FORMAT, "%s: key '%s' is a %s; it must be an integer: the file is damaged",
                             p->path, key, rad_gguf_type_name(v->type));
    }
    if (x < lo || x > hi)
        return rad_error_set(RAD_E_FORMAT, "%s: key '%s' is %lld, outside [%lld, %lld]%s: the file is damaged",
                             p->path, key, (long long)x, (long long)lo, (long long)hi,
                             hi == SPLIT_MAX ? " (RAD_LIMIT_GGUF_SPLITS)" : "");
    *out = x;
    return 0;
}

/* For "X-00001-of-00004.gguf" and count 4: the length of "X" (the prefix
** shared by all parts), or -1 when the name is not the first of `count`. */
static long split_prefix(const char *path, int64_t count)
{
    static const char tail[] = "-00001-of-00000.gguf";
    size_t len = strlen(path), n = sizeof tail - 1;
    if (len < n) return -1;
    const char *s = path + len - n;
    for (size_t i = 0; i < n; i++) {
        int digit = tail[i] == '0' || tail[i] == '1';
        if (digit ? (s[i] < '0' || s[i] > '9') : s[i] != tail[i]) return -1;
    }
    if (strncmp(s + 1, "00001", 5) != 0) return -1;
    if (strtol(s + 10, NULL, 10) != count) return -1;
    return (long)(len - n);
}

/* Open and parse parts 1..count-1 of the set whose first part is g->parts[0]. */
static int open_other_parts(RadGguf *g, int64_t count)
{
    Part *first = &g->parts[0];
    long prefix = split_prefix(first->path, count);
    if (prefix < 0)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: split.count says the model is in %lld parts, but the name "
                             "does not end in -00001-of-%05lld.gguf, so the other parts cannot be found; "
                             "keep the names gguf-split gave them",
                             first->path, (long long)count, (long long)count);
    Part *parts = realloc(g->parts, (size_t)count * sizeof *parts);
    if (!parts) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", first->path);
    g->parts = parts;
    first = &g->parts[0];
    for (int i = 1; i < (int)count; i++) {
        Part *p = &g->parts[i];
        memset(p, 0, sizeof *p);
        g->n_parts = i + 1;
        size_t cap = (size_t)prefix + 32;
        if (!(p->path = malloc(cap))) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", first->path);
        snprintf(p->path, cap, "%.*s-%05d-of-%05lld.gguf", (int)prefix, first->path, i + 1, (long long)count);
        int rc = map_part(p);
        if (rc == RAD_E_NOTFOUND)
            return rad_error_set(RAD_E_NOTFOUND,
                                 "%s: part %d of %lld of this split model is missing (%s); "
                                 "download every part",
                                 first->path, i + 1, (long long)count, p->path);
        if (rc || (rc = parse_part(g, i))) return rc;
        int64_t no, n;
        if ((rc = part_int(p, "split.count", -1, 0, SPLIT_MAX, &n)) ||
            (rc = part_int(p, "split.no", -1, 0, SPLIT_MAX, &no)))
            return rc;
        if (n != count || no != i)
            return rad_error_set(RAD_E_FORMAT,
                                 "%s: split.no %lld / split.count %lld, but this is part %d of "
                                 "%lld by name: the parts are from different models or renamed",
                                 p->path, (long long)no, (long long)n, i + 1, (long long)count);
    }
    return 0;
}

/* Read the split keys of the first part and open the rest of the set. */
static int open_split(RadGguf *g)
{
    Part *first = &g->parts[0];
    int64_t count, no, want;
    int rc;
    if ((rc = part_int(first, "split.count", 1, 0, SPLIT_MAX, &count)) ||
        (rc = part_int(first, "split.no", 0, 0, SPLIT_MAX, &no)) ||
        (rc = part_int(first, "split.tensors.count", -1, 0, INT32_MAX, &want)))
        return rc;
    if (count == 0)
        return rad_error_set(RAD_E_FORMAT, "%s: split.count is 0: the file is damaged", first->path);
    if (no >= count)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: split.no %lld is not below split.count %lld: the file is "
                             "damaged",
                             first->path, (long long)no, (long long)count);
    if (no != 0)
        return rad_error_set(RAD_E_ARG,
                             "%s: this is part %lld of %lld of a split model; open the first "
                             "part (the name ending in -00001-of-%05lld.gguf)",
                             first->path, (long long)no + 1, (long long)count, (long long)count);
    if (count > 1 && (rc = open_other_parts(g, count))) return rc;
    /* open_other_parts moved the parts array: `first` is stale. */
    if (want >= 0 && want != g->n_tensors)
        return rad_error_set(RAD_E_FORMAT,
                             "%s: split.tensors.count says %lld tensors, but the %d part%s "
                             "hold %d: a part is damaged or from another model",
                             g->parts[0].path, (long long)want, g->n_parts, g->n_parts == 1 ? "" : "s",
                             g->n_tensors);
    return 0;
}

/* Index the tensor names over all parts; a name twice is refused. */
static int index_tensors(RadGguf *g)
{
    if (index_init(&g->tensor_index, (uint64_t)g->n_tensors))
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory for %d tensor names", g->path, g->n_tensors);
    for (int i = 0; i < g->n_tensors; i++) {
        const RadGgufTensor *t = &g->tensors[i];
        int32_t j = index_find(&g->tensor_index, g->tensors, sizeof *g->tensors, t->name);
        if (j >= 0) {
            char name[160];
            return rad_error_set(RAD_E_FORMAT, "%s: tensor '%s' appears twice: the file is damaged",
                                 g->parts[t->part].path, shown(t->name, strlen(t->name), name, sizeof name));
        }
        index_add(&g->tensor_index, g->tensors, sizeof *g->tensors, t->name, i);
    }
    return 0;
}

/* ---------------------------------------------------------- open/close */

void rad_gguf_close(RadGguf *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_parts; i++) {
        Part *p = &g->parts[i];
        if (p->map) rad_file_unmap(p->map, p->size);
        index_free(&p->kv_index);
        free(p->path);
    }
    free(g->parts);
    free(g->tensors);
    index_free(&g->tensor_index);
    arena_free(&g->arena);
    free(g->path);
    free(g);
}

int rad_gguf_open(const char *path, RadGguf **out)
{
    if (!out) return rad_error_set(RAD_E_ARG, "rad_gguf_open: out is NULL");
    *out = NULL;
    if (!path) return rad_error_set(RAD_E_ARG, "rad_gguf_open: path is NULL");
    RadGguf *g = calloc(1, sizeof *g);
    if (g) g->parts = calloc(1, sizeof *g->parts);
    if (!g || !g->parts || !(g->path = strdup(path)) || !(g->parts[0].path = strdup(path))) {
        if (g) {
            free(g->path);
            free(g->parts);
            free(g);
        }
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory", path);
    }
    g->n_parts = 1;
    int rc = map_part(&g->parts[0]);
    if (!rc) rc = parse_part(g, 0);
    if (!rc) rc = open_split(g);
    if (!rc) rc = index_tensors(g);
    if (rc) {
        rad_gguf_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

/* ------------------------------------------------------------ accessors */

const char *rad_gguf_path(const RadGguf *g)
{
    return g->path;
}
uint32_t rad_gguf_version(const RadGguf *g)
{
    return g->parts[0].version;
}
uint32_t rad_gguf_alignment(const RadGguf *g)
{
    return g->parts[0].alignment;
}
int rad_gguf_n_parts(const RadGguf *g)
{
    return g->n_parts;
}

const char *rad_gguf_part_path(const RadGguf *g, int i)
{
    return i >= 0 && i < g->n_parts ? g->parts[i].path : NULL;
}

int rad_gguf_n_keys(const RadGguf *g)
{
    return g->parts[0].n_kv;
}

const char *rad_gguf_key(const RadGguf *g, int i)
{
    return i >= 0 && i < g->parts[0].n_kv ? g->parts[0].kv[i].key : NULL;
}

const RadGgufValue *rad_gguf_value(const RadGguf *g, int i)
{
    return i >= 0 && i < g->parts[0].n_kv ? &g->parts[0].kv[i].value : NULL;
}

int rad_gguf_find_key(const RadGguf *g, const char *key)
{
    if (!g || !key) return -1;
    return index_find(&g->parts[0].kv_index, g->parts[0].kv, sizeof(Kv), key);
}

const RadGgufValue *rad_gguf_get(const RadGguf *g, const char *key)
{
    int i = rad_gguf_find_key(g, key);
    return i < 0 ? NULL : &g->parts[0].kv[i].value;
}

static int is_int_type(int type)
{
    return type == RAD_GGUF_U8 || type == RAD_GGUF_I8 || type == RAD_GGUF_U16 || type == RAD_GGUF_I16 ||
           type == RAD_GGUF_U32 || type == RAD_GGUF_I32 || type == RAD_GGUF_U64 || type == RAD_GGUF_I64;
}

static int is_unsigned_type(int type)
{
    return type == RAD_GGUF_U8 || type == RAD_GGUF_U16 || type == RAD_GGUF_U32 || type == RAD_GGUF_U64 ||
           type == RAD_GGUF_BOOL;
}

static int wrong_type(const RadGguf *g, const char *key, const RadGgufValue *v, const char *want)
{
    return rad_error_set(RAD_E_FORMAT, "%s: key '%s' is a %s; expected %s", g->path, key,
                         rad_gguf_type_name(v->type), want);
}

int rad_gguf_get_int(const RadGguf *g, const char *key, int64_t dflt, int64_t *out)
{
    const RadGgufValue *v = rad_gguf_get(g, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!is_int_type(v->type)) return wrong_type(g, key, v, "an integer");
    if (is_unsigned_type(v->type)) {
        if (v->u > (uint64_t)INT64_MAX)
            return rad_error_set(RAD_E_FORMAT, "%s: key '%s' is %llu, too large", g->path, key,
                                 (unsigned long long)v->u);
        *out = (int64_t)v->u;
    } else {
        *out = v->i;
    }
    return 0;
}

int rad_gguf_get_u32(const RadGguf *g, const char *key, uint32_t dflt, uint32_t *out)
{
    int64_t x;
    int rc = rad_gguf_get_int(g, key, dflt, &x);
    if (rc) return rc;
    if (x < 0 || x > UINT32_MAX)
        return rad_error_set(RAD_E_FORMAT, "%s: key '%s' is %lld, outside [0, 4294967295]", g->path, key,
                             (long long)x);
    *out = (uint32_t)x;
    return 0;
}

int rad_gguf_get_float(const RadGguf *g, const char *key, double dflt, double *out)
{
    const RadGgufValue *v = rad_gguf_get(g, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (v->type != RAD_GGUF_F32 && v->type != RAD_GGUF_F64) return wrong_type(g, key, v, "a float");
    *out = v->f;
    return 0;
}

int rad_gguf_get_bool(const RadGguf *g, const char *key, int dflt, int *out)
{
    const RadGgufValue *v = rad_gguf_get(g, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (v->type != RAD_GGUF_BOOL) return wrong_type(g, key, v, "a bool");
    *out = (int)v->u;
    return 0;
}

int rad_gguf_get_string(const RadGguf *g, const char *key, const char *dflt, const char **out)
{
    const RadGgufValue *v = rad_gguf_get(g, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (v->type != RAD_GGUF_STRING) return wrong_type(g, key, v, "a string");
    *out = v->str.s;
    return 0;
}

int rad_gguf_get_array(const RadGguf *g, const char *key, int elem_type, const RadGgufValue **out)
{
    const RadGgufValue *v = rad_gguf_get(g, key);
    if (!v) {
        *out = NULL;
        return 0;
    }
    if (v->type != RAD_GGUF_ARRAY) return wrong_type(g, key, v, "an array");
    if (elem_type >= 0 && v->arr.type != elem_type)
        return rad_error_set(RAD_E_FORMAT, "%s: key '%s' is an array of %s; expected an array of %s", g->path,
                             key, rad_gguf_type_name(v->arr.type), rad_gguf_type_name(elem_type));
    *out = v;
    return 0;
}

/* Element i of a numeric or BOOL array, decoded. */
static int arr_scalar(const RadGgufValue *a, uint64_t i, RadGgufValue *v)
{
    assert(a && a->type == RAD_GGUF_ARRAY && i < a->arr.n);
    if (!a || a->type != RAD_GGUF_ARRAY || i >= a->arr.n || !a->arr.raw) return -1;
    int size = value_type_size[a->arr.type];
    decode_scalar(a->arr.type, a->arr.raw + i * (uint64_t)size, v);
    return 0;
}

int64_t rad_gguf_arr_int(const RadGgufValue *a, uint64_t i)
{
    RadGgufValue v;
    if (arr_scalar(a, i, &v) || v.type == RAD_GGUF_F32 || v.type == RAD_GGUF_F64) return 0;
    if (is_unsigned_type(v.type)) return v.u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v.u;
    return v.i;
}

double rad_gguf_arr_float(const RadGgufValue *a, uint64_t i)
{
    RadGgufValue v;
    if (arr_scalar(a, i, &v)) return 0;
    if (v.type == RAD_GGUF_F32 || v.type == RAD_GGUF_F64) return v.f;
    return is_unsigned_type(v.type) ? (double)v.u : (double)v.i;
}

const char *rad_gguf_arr_str(const RadGgufValue *a, uint64_t i, uint64_t *len)
{
    assert(a && a->type == RAD_GGUF_ARRAY && a->arr.type == RAD_GGUF_STRING && i < a->arr.n);
    if (!a || a->type != RAD_GGUF_ARRAY || a->arr.type != RAD_GGUF_STRING || i >= a->arr.n) return NULL;
    if (len) *len = a->arr.str[i].len;
    return a->arr.str[i].s;
}

const RadGgufValue *rad_gguf_arr_item(const RadGgufValue *a, uint64_t i)
{
    assert(a && a->type == RAD_GGUF_ARRAY && a->arr.type == RAD_GGUF_ARRAY && i < a->arr.n);
    if (!a || a->type != RAD_GGUF_ARRAY || a->arr.type != RAD_GGUF_ARRAY || i >= a->arr.n) return NULL;
    return &a->arr.item[i];
}

int rad_gguf_n_tensors(const RadGguf *g)
{
    return g->n_tensors;
}

const RadGgufTensor *rad_gguf_tensor(const RadGguf *g, int i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const RadGgufTensor *rad_gguf_find_tensor(const RadGguf *g, const char *name)
{
    if (!g || !name) return NULL;
    int32_t i = index_find(&g->tensor_index, g->tensors, sizeof *g->tensors, name);
    return i < 0 ? NULL : &g->tensors[i];
}
