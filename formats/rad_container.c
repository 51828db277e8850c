/*
** rad_container.c: the .rad writer and reader (docs/FORMAT.md).
**
** The writer streams: each tensor is written where it will stay as soon as
** it is added, and only its description is kept in memory; the header goes
** after the data and the preamble, which points at both, is written last,
** into a temporary file that is renamed into place.  The reader maps the
** file and checks every number in the preamble and the header against the
** file size before handing out a pointer, because a .rad file may have been
** truncated by a full disk, damaged in a copy, or crafted.
*/
#include "rad_container.h"
#include "rad_limits.h"
#include "file_access.h"
#include "../base/rad_cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char MAGIC[8] = {'R', 'A', 'D', 'M', 'O', 'D', 'E', 'L'};

/* Preamble field offsets (all little-endian). */
enum {
    PRE_MAGIC = 0,
    PRE_VERSION = 8,        /* u32 */
    PRE_FLAGS = 12,         /* u32 */
    PRE_HEADER_OFFSET = 16, /* u64 */
    PRE_HEADER_SIZE = 24,   /* u64 */
    PRE_DATA_OFFSET = 32,   /* u64 */
    PRE_DATA_SIZE = 40,     /* u64 */
    PRE_FILE_SIZE = 48,     /* u64 */
    PRE_RESERVED = 56       /* 8 bytes, zero */
};

/* The writer puts the data region right after the preamble's page. */
#define DATA_OFFSET ((uint64_t)RAD_CONTAINER_GROUP_ALIGN)

/* A header larger than this is not one radiance wrote. */
#define HEADER_MAX_BYTES RAD_LIMIT_RAD_HEADER_BYTES

/* Offsets and sizes travel through JSON as signed 64-bit integers. */
#define OFFSET_MAX ((uint64_t)INT64_MAX)

/* ------------------------------------------------------ little helpers */

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* `v` rounded up to a multiple of the power of two `a`; the caller has
** checked that this does not overflow. */
static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* Bytes a tensor of this encoding and shape takes, or -1 when the innermost
** dimension is not a whole number of blocks or the total overflows. */
static int64_t tensor_bytes(int enc, int rank, const int64_t *shape)
{
    int64_t inner = rank > 0 ? shape[rank - 1] : 1;
    int64_t row = rad_encoding_row_bytes(enc, inner);
    if (row < 0) return -1;
    int64_t total = row;
    for (int d = 0; d < rank - 1; d++)
        if (__builtin_mul_overflow(total, shape[d], &total)) return -1;
    return total;
}

/* A set of strings (tensor names) or of non-negative int32 (closed groups):
** open addressing, linear probing, grown at half full.  Strings are
** borrowed, not owned. */
typedef struct Set {
    size_t cap, n;          /* cap is 0 or a power of two */
    const char **names;     /* string sets */
    uint32_t *groups;       /* group sets: group + 1, 0 = empty */
} Set;

static uint64_t hash_bytes(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ull;        /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static size_t set_slot_name(const Set *s, const char *name)
{
    size_t i = (size_t)hash_bytes(name, strlen(name)) & (s->cap - 1);
    while (s->names[i] && strcmp(s->names[i], name) != 0) i = (i + 1) & (s->cap - 1);
    return i;
}

static size_t set_slot_group(const Set *s, uint32_t key)
{
    size_t i = (size_t)hash_bytes(&key, sizeof key) & (s->cap - 1);
    while (s->groups[i] && s->groups[i] != key) i = (i + 1) & (s->cap - 1);
    return i;
}

static int set_has_name(const Set *s, const char *name)
{
    return s->cap && s->names[set_slot_name(s, name)] != NULL;
}

static int set_has_group(const Set *s, int32_t g)
{
    return s->cap && s->groups[set_slot_group(s, (uint32_t)g + 1)] != 0;
}

/* Make room for one more member.  Returns 0 or -1 (out of memory). */
static int set_grow(Set *s, int strings)
{
    if ((s->n + 1) * 2 <= s->cap) return 0;
    size_t cap = s->cap ? s->cap * 2 : 64;
    Set bigger = {.cap = cap};
    if (strings) bigger.names = calloc(cap, sizeof *bigger.names);
    else bigger.groups = calloc(cap, sizeof *bigger.groups);
    if (!bigger.names && !bigger.groups) return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (strings && s->names[i]) bigger.names[set_slot_name(&bigger, s->names[i])] = s->names[i];
        if (!strings && s->groups[i]) bigger.groups[set_slot_group(&bigger, s->groups[i])] = s->groups[i];
    }
    bigger.n = s->n;
    free(s->names);
    free(s->groups);
    *s = bigger;
    return 0;
}

/* Add a member known to be absent.  Returns 0 or -1 (out of memory). */
static int set_add_name(Set *s, const char *name)
{
    if (set_grow(s, 1)) return -1;
    s->names[set_slot_name(s, name)] = name;
    s->n++;
    return 0;
}

static int set_add_group(Set *s, int32_t g)
{
    if (set_grow(s, 0)) return -1;
    s->groups[set_slot_group(s, (uint32_t)g + 1)] = (uint32_t)g + 1;
    s->n++;
    return 0;
}

static void set_free(Set *s)
{
    free(s->names);
    free(s->groups);
    memset(s, 0, sizeof *s);
}

/* ============================================================== writer */

/* What came last in the data region, for the alignment and group rules. */
enum { LAST_NOTHING, LAST_TENSOR, LAST_BLOB };

struct RadContainerWriter {
    char *path;             /* where the finished file goes */
    char *tmp_path;         /* PATH.partial.XXXXXX, while writing; locked (flock) while it is written */
    int cleanup;            /* its rad_cleanup slot: removed if a signal stops the process */
    int fd;
    int failed;             /* a write failed: only abort remains */
    uint64_t pos;           /* bytes of the data region written so far */
    int last;               /* LAST_* */
    int32_t last_group;     /* the previous tensor's group, when last == LAST_TENSOR */
    json_t *meta;           /* "meta" object */
    json_t *tensors;        /* "tensors" array */
    json_t *blobs;          /* "blobs" array */
    Set names;              /* tensor names (borrowed from the json_t entries) */
    Set closed;             /* groups that were left and may not be resumed */
};

/* Write all `n` bytes of `p` at the current file position. */
static int write_all(RadContainerWriter *w, const void *p, uint64_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t r = write(w->fd, b, chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            w->failed = 1;
            return rad_error_set(RAD_E_IO, "%s: write failed: %s", w->tmp_path,
                                 r < 0 ? strerror(errno) : "no progress (is the disk full?)");
        }
        b += r;
        n -= (uint64_t)r;
    }
    return 0;
}

/* Write `n` zero bytes. */
static int write_zeros(RadContainerWriter *w, uint64_t n)
{
    static const uint8_t zeros[4096];
    while (n > 0) {
        uint64_t chunk = n < sizeof zeros ? n : sizeof zeros;
        int rc = write_all(w, zeros, chunk);
        if (rc) return rc;
        n -= chunk;
    }
    return 0;
}

/* Pad the data region to `align` and write `size` bytes there; on success
** *offset is where they start, relative to the data region. */
static int write_item(RadContainerWriter *w, uint64_t align, const void *data, uint64_t size,
                      uint64_t *offset)
{
    if (w->pos > OFFSET_MAX - align || size > OFFSET_MAX - align_up(w->pos, align) ||
        DATA_OFFSET + align_up(w->pos, align) + size > OFFSET_MAX - RAD_CONTAINER_GROUP_ALIGN)
        return rad_error_set(RAD_E_ARG, "%s: the model is too large for a .rad file", w->path);
    uint64_t at = align_up(w->pos, align);
    int rc = write_zeros(w, at - w->pos);
    if (!rc) rc = write_all(w, data, size);
    if (rc) return rc;
    *offset = at;
    w->pos = at + size;
    return 0;
}

/* The directory part of `path` ("." when there is none), malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static void writer_free(RadContainerWriter *w)
{
    rad_cleanup_drop(w->cleanup);
    if (w->fd >= 0) close(w->fd);
    json_decref(w->meta);
    json_decref(w->tensors);
    json_decref(w->blobs);
    set_free(&w->names);
    set_free(&w->closed);
    free(w->tmp_path);
    free(w->path);
    free(w);
}

void rad_container_abort(RadContainerWriter *w)
{
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->tmp_path) unlink(w->tmp_path);
    writer_free(w);
}

int rad_container_create(const char *path, RadContainerWriter **out)
{
    if (!out) return rad_error_set(RAD_E_ARG, "rad_container_create: out is NULL");
    *out = NULL;
    if (!path || !path[0]) return rad_error_set(RAD_E_ARG, "rad_container_create: no path given");

    char *dir = dir_of(path);
    if (!dir) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", path);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        int rc = rad_error_set(RAD_E_IO, "%s: directory '%s' %s", path, dir,
                               stat(dir, &sb) != 0 ? "does not exist" : "is not a directory");
        free(dir);
        return rc;
    }
    free(dir);
    /* The output is renamed over PATH at the end: a device or a FIFO there
    ** (convert -o /dev/null, as root) would be replaced by the file. */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return rad_error_set(RAD_E_IO, "%s: exists and is not a regular file (%s): a .rad is written only to "
                             "a file; name a file", path, S_ISDIR(sb.st_mode) ? "a directory" :
                             S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" :
                             "not a file");

    RadContainerWriter *w = calloc(1, sizeof *w);
    if (!w) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", path);
    w->fd = -1;
    w->cleanup = -1;
    w->last = LAST_NOTHING;
    size_t len = strlen(path);
    w->path = strdup(path);
    w->tmp_path = malloc(len + sizeof ".partial.XXXXXX");
    w->meta = json_object();
    w->tensors = json_array();
    w->blobs = json_array();
    if (!w->path || !w->tmp_path || !w->meta || !w->tensors || !w->blobs) {
        free(w->tmp_path);
        w->tmp_path = NULL;
        writer_free(w);
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory", path);
    }
    memcpy(w->tmp_path, path, len);
    memcpy(w->tmp_path + len, ".partial.XXXXXX", sizeof ".partial.XXXXXX");
    w->fd = mkostemp(w->tmp_path, O_CLOEXEC);
    if (w->fd < 0) {
        int rc = rad_error_set(RAD_E_IO, "%s: cannot create a temporary file beside it: %s",
                               path, strerror(errno));
        free(w->tmp_path);
        w->tmp_path = NULL;
        writer_free(w);
        return rc;
    }
    /* While the lock is held the partial file is ours; one whose lock nobody
    ** holds was left by a writer that died (SIGKILL, a crash) and may be
    ** swept (rad_container_sweep_partials).  A signal the app catches
    ** removes it at once (rad_cleanup.h). */
    flock(w->fd, LOCK_EX | LOCK_NB);
    w->cleanup = rad_cleanup_add(w->tmp_path);
    /* The preamble's page, zero until finish fills in the preamble. */
    int rc = write_zeros(w, DATA_OFFSET);
    if (rc) {
        rad_container_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* One metadata entry as a type-tagged JSON value, or NULL. */
static json_t *meta_value(const RadMetaKV *kv)
{
    switch (kv->type) {
    case RAD_META_INT: return json_pack("{s:I}", "i", (json_int_t)kv->i);
    case RAD_META_FLOAT: return isfinite(kv->f) ? json_pack("{s:f}", "f", kv->f) : NULL;
    case RAD_META_STRING: return kv->s ? json_pack("{s:s}", "s", kv->s) : NULL;
    }
    return NULL;
}

int rad_container_set_meta(RadContainerWriter *w, const RadMetaTable *meta)
{
    if (!w || !meta) return rad_error_set(RAD_E_ARG, "rad_container_set_meta: NULL argument");
    json_t *obj = json_object();
    if (!obj) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", w->path);
    for (int i = 0; i < meta->n; i++) {
        const RadMetaKV *kv = &meta->kv[i];
        json_t *v = meta_value(kv);
        if (!v || json_object_set_new(obj, kv->key, v) != 0) {
            json_decref(obj);
            if (kv->type == RAD_META_FLOAT && !isfinite(kv->f))
                return rad_error_set(RAD_E_ARG, "%s: metadata key '%.200s' is %g, which a .rad "
                                     "file cannot store", w->path, kv->key, kv->f);
            return rad_error_set(RAD_E_ARG, "%s: metadata key '%.200s' cannot be stored: the key "
                                 "or string is not valid UTF-8, or the type %d is unknown",
                                 w->path, kv->key, kv->type);
        }
    }
    json_decref(w->meta);
    w->meta = obj;
    return 0;
}

/* Refuse further work after a failed write. */
static int check_usable(const RadContainerWriter *w)
{
    if (w->failed)
        return rad_error_set(RAD_E_STATE, "%s: an earlier write failed; abort this file", w->path);
    return 0;
}

/* The current group run ends: remember it so it cannot be resumed. */
static int close_current_group(RadContainerWriter *w)
{
    if (w->last != LAST_TENSOR || w->last_group < 0 || set_has_group(&w->closed, w->last_group))
        return 0;
    if (set_add_group(&w->closed, w->last_group))
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory", w->path);
    return 0;
}

int rad_container_add_blob(RadContainerWriter *w, const char *name, const void *data, uint64_t size)
{
    if (!w) return rad_error_set(RAD_E_ARG, "rad_container_add_blob: no writer");
    int rc = check_usable(w);
    if (rc) return rc;
    if (!name || !name[0]) return rad_error_set(RAD_E_ARG, "%s: a blob has no name", w->path);
    if (size > 0 && !data)
        return rad_error_set(RAD_E_ARG, "%s: blob '%.200s': no data", w->path, name);
    for (size_t i = 0; i < json_array_size(w->blobs); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(w->blobs, i), "name")), name) == 0)
            return rad_error_set(RAD_E_ARG, "%s: blob '%.200s' was already added", w->path, name);
    json_t *entry = json_pack("{s:s}", "name", name);
    if (!entry)
        return rad_error_set(RAD_E_ARG, "%s: blob name '%.200s' is not valid UTF-8", w->path, name);
    if ((rc = close_current_group(w))) {
        json_decref(entry);
        return rc;
    }
    uint64_t offset = 0;
    if ((rc = write_item(w, RAD_CONTAINER_GROUP_ALIGN, data, size, &offset))) {
        json_decref(entry);
        return rc;
    }
    w->last = LAST_BLOB;
    if (json_object_set_new(entry, "offset", json_integer((json_int_t)offset)) ||
        json_object_set_new(entry, "size", json_integer((json_int_t)size)) ||
        json_array_append_new(w->blobs, entry)) {
        w->failed = 1;   /* the bytes are written but not described */
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory", w->path);
    }
    return 0;
}

int rad_container_add_tensor(RadContainerWriter *w, const char *name, int enc, int rank,
                             const int64_t *shape, int32_t group, const void *data, uint64_t size)
{
    if (!w) return rad_error_set(RAD_E_ARG, "rad_container_add_tensor: no writer");
    int rc = check_usable(w);
    if (rc) return rc;
    if (!name || !name[0]) return rad_error_set(RAD_E_ARG, "%s: a tensor has no name", w->path);

    /* Everything about the arguments is checked before a byte is written. */
    const RadEncodingInfo *info = rad_encoding_info(enc);
    if (!info)
        return rad_error_set(RAD_E_ARG, "%s: tensor '%.200s': encoding %d is unknown", w->path, name, enc);
    if (rank < 0 || rank > RAD_CONTAINER_RANK_MAX || (rank > 0 && !shape))
        return rad_error_set(RAD_E_ARG, "%s: tensor '%.200s': rank %d; a .rad tensor has 0 to %d "
                             "dimensions", w->path, name, rank, RAD_CONTAINER_RANK_MAX);
    for (int d = 0; d < rank; d++)
        if (shape[d] < 0)
            return rad_error_set(RAD_E_ARG, "%s: tensor '%.200s': shape[%d] is %lld", w->path,
                                 name, d, (long long)shape[d]);
    int64_t want = tensor_bytes(enc, rank, shape);
    if (want < 0)
        return rad_error_set(RAD_E_ARG, "%s: tensor '%.200s': the shape does not fit %s (the last "
                             "dimension must be a multiple of %d, the size must fit 63 bits)",
                             w->path, name, info->name, info->block_elems);
    if ((uint64_t)want != size)
        return rad_error_set(RAD_E_ARG, "%s: tensor '%.200s': %llu bytes given, but its shape in "
                             "%s takes %lld", w->path, name, (unsigned long long)size, info->name,
                             (long long)want);
    if (size > 0 && !data)
        return rad_error_set(RAD_E_ARG, "%s: tensor '%.200s': no data", w->path, name);
    if (group < RAD_GROUP_NONE)
        return rad_error_set(RAD_E_ARG, "%s: tensor '%.200s': group %d is negative", w->path,
                             name, (int)group);
    if (set_has_name(&w->names, name))
        return rad_error_set(RAD_E_ARG, "%s: tensor '%.200s' was already added", w->path, name);
    int same_run = w->last == LAST_TENSOR && w->last_group == group;
    if (group >= 0 && !same_run && set_has_group(&w->closed, group))
        return rad_error_set(RAD_E_ARG, "%s: tensor '%.200s': group %d was already written and "
                             "left; add the tensors of a group one after another", w->path, name,
                             (int)group);

    json_t *shp = json_array();
    for (int d = 0; shp && d < rank; d++)
        if (json_array_append_new(shp, json_integer((json_int_t)shape[d]))) {
            json_decref(shp);
            shp = NULL;
        }
    json_t *entry = shp ? json_pack("{s:s,s:s,s:o,s:i}", "name", name, "enc", info->name, "shape",
                                    shp, "group", (int)group)
                        : NULL;
    if (!entry)
        return rad_error_set(RAD_E_ARG, "%s: tensor name '%.200s' is not valid UTF-8 (or out of "
                             "memory)", w->path, name);
    if (!same_run && (rc = close_current_group(w))) {
        json_decref(entry);
        return rc;
    }
    uint64_t offset = 0;
    uint64_t align = same_run ? RAD_CONTAINER_TENSOR_ALIGN : RAD_CONTAINER_GROUP_ALIGN;
    if (w->last == LAST_NOTHING) align = RAD_CONTAINER_GROUP_ALIGN;
    if ((rc = write_item(w, align, data, size, &offset))) {
        json_decref(entry);
        return rc;
    }
    w->last = LAST_TENSOR;
    w->last_group = group;
    if (json_object_set_new(entry, "offset", json_integer((json_int_t)offset)) ||
        json_object_set_new(entry, "size", json_integer((json_int_t)size)) ||
        json_array_append_new(w->tensors, entry) ||
        set_add_name(&w->names, json_string_value(json_object_get(entry, "name")))) {
        w->failed = 1;   /* the bytes are written but not described */
        return rad_error_set(RAD_E_NOMEM, "%s: out of memory", w->path);
    }
    return 0;
}

/* Make the rename durable; a directory that cannot be synced is not an
** error (some file systems refuse). */
static void sync_dir_of(const char *path)
{
    char *dir = dir_of(path);
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

int rad_container_sweep_partials(const char *path, FILE *log)
{
    char *dir = dir_of(path);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char prefix[1024];
    if (!dir) return 0;
    snprintf(prefix, sizeof prefix, "%s.partial.", base);
    size_t plen = strlen(prefix);
    DIR *d = opendir(dir);
    int removed = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, prefix, plen) != 0 || strlen(e->d_name) != plen + 6) continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        int fd = open(full, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) continue;
        struct stat st;
        /* A regular file of ours, not touched for a few seconds (one just
        ** made may not hold its lock yet), whose lock nobody holds. */
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            time(NULL) - st.st_mtime >= 3 && flock(fd, LOCK_EX | LOCK_NB) == 0 && unlink(full) == 0) {
            removed++;
            if (log)
                fprintf(log, "radiance: removed %s (%.1f MB), left by an interrupted conversion\n", full,
                        (double)st.st_size / 1e6);
        }
        close(fd);
    }
    if (d) closedir(d);
    free(dir);
    return removed;
}

int rad_container_finish(RadContainerWriter *w)
{
    if (!w) return rad_error_set(RAD_E_ARG, "rad_container_finish: no writer");
    int rc = check_usable(w);
    if (rc) {
        rad_container_abort(w);
        return rc;
    }
    /* The data region ends on a page, so the last group can be read with
    ** O_DIRECT without running into the header. */
    uint64_t data_size = align_up(w->pos, RAD_CONTAINER_GROUP_ALIGN);
    rc = write_zeros(w, data_size - w->pos);

    json_t *root = NULL;
    char *header = NULL;
    if (!rc) {
        root = json_pack("{s:O,s:O,s:O}", "meta", w->meta, "tensors", w->tensors, "blobs", w->blobs);
        header = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
        if (!header) rc = rad_error_set(RAD_E_NOMEM, "%s: out of memory writing the header", w->path);
    }
    uint64_t header_size = header ? strlen(header) : 0;
    if (!rc) rc = write_all(w, header, header_size);

    uint8_t pre[RAD_CONTAINER_PREAMBLE] = {0};
    memcpy(pre + PRE_MAGIC, MAGIC, sizeof MAGIC);
    put_le32(pre + PRE_VERSION, RAD_CONTAINER_VERSION);
    put_le32(pre + PRE_FLAGS, 0);
    put_le64(pre + PRE_HEADER_OFFSET, DATA_OFFSET + data_size);
    put_le64(pre + PRE_HEADER_SIZE, header_size);
    put_le64(pre + PRE_DATA_OFFSET, DATA_OFFSET);
    put_le64(pre + PRE_DATA_SIZE, data_size);
    put_le64(pre + PRE_FILE_SIZE, DATA_OFFSET + data_size + header_size);
    if (!rc && pwrite(w->fd, pre, sizeof pre, 0) != (ssize_t)sizeof pre)
        rc = rad_error_set(RAD_E_IO, "%s: writing the preamble failed: %s", w->tmp_path, strerror(errno));
    free(header);
    json_decref(root);

    if (!rc && fchmod(w->fd, 0644) != 0)
        rc = rad_error_set(RAD_E_IO, "%s: chmod failed: %s", w->tmp_path, strerror(errno));
    if (!rc && fsync(w->fd) != 0)
        rc = rad_error_set(RAD_E_IO, "%s: fsync failed: %s", w->tmp_path, strerror(errno));
    if (!rc) {
        int fd = w->fd;
        w->fd = -1;
        if (close(fd) != 0)
            rc = rad_error_set(RAD_E_IO, "%s: close failed: %s", w->tmp_path, strerror(errno));
    }
    if (!rc && rename(w->tmp_path, w->path) != 0)
        rc = rad_error_set(RAD_E_IO, "%s: cannot rename %s into place: %s", w->path, w->tmp_path,
                           strerror(errno));
    if (rc) {
        rad_container_abort(w);
        return rc;
    }
    sync_dir_of(w->path);
    writer_free(w);
    return 0;
}

/* ============================================================== reader */

/* Set "PATH: <fmt...>" and return `code`. */
static int file_error(int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int file_error(int code, const char *path, const char *fmt, ...)
{
    char what[896];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rad_error_set(code, "%s: %s", path, what);
}

#define DAMAGED "the file is damaged; convert the model again"

/* Read a JSON integer >= 0 into *v.  Returns 0 or -1. */
static int json_uint(const json_t *j, uint64_t *v)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0) return -1;
    *v = (uint64_t)json_integer_value(j);
    return 0;
}

/* One stretch of the data region, kept while checking the layout. */
typedef struct Span {
    uint64_t begin, end;
    int64_t group;          /* a tensor's group, or BLOB_GROUP */
    const char *name;
    int is_blob;
} Span;

#define BLOB_GROUP INT64_MIN

static int span_by_offset(const void *a, const void *b)
{
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int tensor_by_name(const void *a, const void *b)
{
    return strcmp(((const RadContainerTensor *)a)->name, ((const RadContainerTensor *)b)->name);
}

/* Read the type-tagged "meta" object into c->meta. */
static int load_meta(RadContainer *c, json_t *meta)
{
    if (!json_is_object(meta))
        return file_error(RAD_E_FORMAT, c->path, "header: \"meta\" is missing or not an object: " DAMAGED);
    if (json_object_size(meta) > RAD_LIMIT_META_KEYS)
        return file_error(RAD_E_FORMAT, c->path, "header: %zu metadata keys, over the limit of %d "
                          "(RAD_LIMIT_META_KEYS): " DAMAGED, json_object_size(meta), RAD_LIMIT_META_KEYS);
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v) {
        json_t *x;
        RadMetaKV kv = {.key = key};
        if (!key[0] || !json_is_object(v) || json_object_size(v) != 1)
            return file_error(RAD_E_FORMAT, c->path, "header: meta '%.200s' has an empty key or "
                              "is not a one-member object: " DAMAGED, key);
        if ((x = json_object_get(v, "i")) && json_is_integer(x)) {
            kv.type = RAD_META_INT;
            kv.i = (int64_t)json_integer_value(x);
        } else if ((x = json_object_get(v, "f")) && json_is_number(x)) {
            kv.type = RAD_META_FLOAT;
            kv.f = json_number_value(x);
        } else if ((x = json_object_get(v, "s")) && json_is_string(x)) {
            if (json_string_length(x) > RAD_LIMIT_META_STRING_BYTES)
                return file_error(RAD_E_FORMAT, c->path, "header: meta '%.200s' is a string of %zu bytes, over "
                                  "the limit of %u (RAD_LIMIT_META_STRING_BYTES): " DAMAGED, key,
                                  json_string_length(x), RAD_LIMIT_META_STRING_BYTES);
            kv.type = RAD_META_STRING;
            kv.s = json_string_value(x);
        } else {
            return file_error(RAD_E_FORMAT, c->path, "header: meta '%.200s' is not {\"i\": integer}, "
                              "{\"f\": number} or {\"s\": string}: " DAMAGED, key);
        }
        int rc = rad_meta_table_append(&c->meta, &kv);   /* jansson refused duplicate keys */
        if (rc) return rad_error_prefix(rc, "%s: ", c->path);
    }
    return 0;
}

/* Check one "tensors" entry and fill *t (its name is strdup'd). */
static int load_tensor(RadContainer *c, json_t *e, size_t index, RadContainerTensor *t)
{
    const char *path = c->path;
    json_t *jn = json_object_get(e, "name");
    if (!json_is_object(e) || !json_is_string(jn) || !json_string_value(jn)[0])
        return file_error(RAD_E_FORMAT, path, "header: tensor #%zu has no name: " DAMAGED, index);
    const char *name = json_string_value(jn);

    json_t *je = json_object_get(e, "enc");
    t->enc = json_is_string(je) ? rad_encoding_by_name(json_string_value(je)) : -1;
    if (t->enc < 0)
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': encoding '%.40s' is unknown to this "
                          "radiance: update radiance or convert the model again", name,
                          json_is_string(je) ? json_string_value(je) : "(missing)");

    json_t *js = json_object_get(e, "shape");
    if (!json_is_array(js))
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': \"shape\" is missing: " DAMAGED, name);
    if (json_array_size(js) > RAD_CONTAINER_RANK_MAX)
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': rank %zu is over the limit of %d: "
                          DAMAGED, name, json_array_size(js), RAD_CONTAINER_RANK_MAX);
    t->rank = (int)json_array_size(js);
    for (int d = 0; d < t->rank; d++) {
        uint64_t dim;
        if (json_uint(json_array_get(js, (size_t)d), &dim))
            return file_error(RAD_E_FORMAT, path, "tensor '%.200s': shape[%d] is not an integer "
                              ">= 0: " DAMAGED, name, d);
        t->shape[d] = (int64_t)dim;
    }

    json_t *jg = json_object_get(e, "group");
    if (!json_is_integer(jg) || json_integer_value(jg) < RAD_GROUP_NONE ||
        json_integer_value(jg) > INT32_MAX)
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': \"group\" is missing or out of "
                          "range: " DAMAGED, name);
    t->group = (int32_t)json_integer_value(jg);

    if (json_uint(json_object_get(e, "offset"), &t->offset) ||
        json_uint(json_object_get(e, "size"), &t->size))
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': \"offset\" or \"size\" is missing "
                          "or negative: " DAMAGED, name);
    if (t->offset > c->data_size || t->size > c->data_size - t->offset)
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': bytes [%llu, +%llu) run past the "
                          "end of the data region (%llu bytes): " DAMAGED, name,
                          (unsigned long long)t->offset, (unsigned long long)t->size,
                          (unsigned long long)c->data_size);
    if (t->offset % RAD_CONTAINER_TENSOR_ALIGN)
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': offset %llu is not %d-byte "
                          "aligned: " DAMAGED, name, (unsigned long long)t->offset,
                          RAD_CONTAINER_TENSOR_ALIGN);
    const RadEncodingInfo *info = rad_encoding_info(t->enc);
    int64_t inner = t->rank ? t->shape[t->rank - 1] : 1;
    if (inner % info->block_elems)
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': its last dimension %lld is not a "
                          "whole number of %s blocks of %d: " DAMAGED, name, (long long)inner,
                          info->name, info->block_elems);
    int64_t want = tensor_bytes(t->enc, t->rank, t->shape);
    if (want < 0)
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': the product of its shape "
                          "overflows: " DAMAGED, name);
    if ((uint64_t)want != t->size)
        return file_error(RAD_E_FORMAT, path, "tensor '%.200s': size %llu, but its shape in %s "
                          "takes %lld bytes: " DAMAGED, name, (unsigned long long)t->size,
                          info->name, (long long)want);

    t->name = strdup(name);
    if (!t->name) return file_error(RAD_E_NOMEM, path, "out of memory");
    t->data = c->map + c->data_offset + t->offset;
    return 0;
}

/* Check one "blobs" entry and fill *b (its name is strdup'd). */
static int load_blob(RadContainer *c, json_t *e, size_t index, struct RadContainerBlob *b,
                     uint64_t *offset, Set *seen)
{
    json_t *jn = json_object_get(e, "name");
    uint64_t off, size;
    if (!json_is_object(e) || !json_is_string(jn) || !json_string_value(jn)[0])
        return file_error(RAD_E_FORMAT, c->path, "header: blob #%zu has no name: " DAMAGED, index);
    const char *name = json_string_value(jn);
    if (json_uint(json_object_get(e, "offset"), &off) || json_uint(json_object_get(e, "size"), &size))
        return file_error(RAD_E_FORMAT, c->path, "blob '%.200s': \"offset\" or \"size\" is missing "
                          "or negative: " DAMAGED, name);
    if (off > c->data_size || size > c->data_size - off)
        return file_error(RAD_E_FORMAT, c->path, "blob '%.200s': bytes [%llu, +%llu) run past the "
                          "end of the data region (%llu bytes): " DAMAGED, name,
                          (unsigned long long)off, (unsigned long long)size,
                          (unsigned long long)c->data_size);
    if (off % RAD_CONTAINER_GROUP_ALIGN)
        return file_error(RAD_E_FORMAT, c->path, "blob '%.200s': offset %llu is not %d-byte "
                          "aligned: " DAMAGED, name, (unsigned long long)off, RAD_CONTAINER_GROUP_ALIGN);
    if (set_has_name(seen, name))
        return file_error(RAD_E_FORMAT, c->path, "blob '%.200s' appears twice: " DAMAGED, name);
    b->name = strdup(name);
    if (!b->name || set_add_name(seen, b->name)) {
        free((char *)b->name);      /* not counted in n_blobs yet: close would not free it */
        b->name = NULL;
        return file_error(RAD_E_NOMEM, c->path, "out of memory");
    }
    b->data = c->map + c->data_offset + off;
    b->size = size;
    *offset = off;
    return 0;
}

/* The layout rules the writer follows, checked on the sorted spans of every
** non-empty tensor and blob: no two overlap; each group is one run that no
** other item interrupts; a run (a group, a blob, or a change to or from
** ungrouped tensors) starts on a 4 KiB boundary. */
static int check_layout(RadContainer *c, Span *spans, size_t n)
{
    qsort(spans, n, sizeof *spans, span_by_offset);
    Set closed = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const Span *s = &spans[i], *prev = i ? &spans[i - 1] : NULL;
        const char *kind = s->is_blob ? "blob" : "tensor";
        if (prev && s->begin < prev->end) {
            rc = file_error(RAD_E_FORMAT, c->path, "%s '%.200s' overlaps '%.200s': " DAMAGED, kind,
                            s->name, prev->name);
            break;
        }
        int new_run = !prev || s->is_blob || prev->is_blob || prev->group != s->group;
        if (!new_run) continue;
        if (s->begin % RAD_CONTAINER_GROUP_ALIGN)
            rc = file_error(RAD_E_FORMAT, c->path, "%s '%.200s' starts a run at offset %llu, which "
                            "is not %d-byte aligned: " DAMAGED, kind, s->name,
                            (unsigned long long)s->begin, RAD_CONTAINER_GROUP_ALIGN);
        else if (!s->is_blob && s->group >= 0 && set_has_group(&closed, (int32_t)s->group))
            rc = file_error(RAD_E_FORMAT, c->path, "tensor '%.200s': group %lld is split into "
                            "several runs: " DAMAGED, s->name, (long long)s->group);
        else if (prev && !prev->is_blob && prev->group >= 0 && set_add_group(&closed, (int32_t)prev->group))
            rc = file_error(RAD_E_NOMEM, c->path, "out of memory");
    }
    set_free(&closed);
    return rc;
}

/* Parse the header and build the tensor, blob and meta tables. */
static int load_header(RadContainer *c, uint64_t header_offset, uint64_t header_size)
{
    json_error_t jerr;
    json_t *root = json_loadb((const char *)c->map + header_offset, (size_t)header_size,
                             JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return file_error(RAD_E_FORMAT, c->path, "header is not valid JSON (line %d, column %d: "
                          "%s): " DAMAGED, jerr.line, jerr.column, jerr.text);
    json_t *jt = json_object_get(root, "tensors"), *jb = json_object_get(root, "blobs");
    Span *spans = NULL;
    Set blob_names = {0};
    int rc = 0;
    if (!json_is_object(root) || !json_is_array(jt) || !json_is_array(jb)) {
        rc = file_error(RAD_E_FORMAT, c->path, "header: not an object with \"meta\", \"tensors\" "
                        "and \"blobs\": " DAMAGED);
        goto done;
    }
    if ((rc = load_meta(c, json_object_get(root, "meta")))) goto done;

    size_t nt = json_array_size(jt), nb = json_array_size(jb);
    if (nt > RAD_LIMIT_TENSORS || nb > RAD_LIMIT_TENSORS) {
        rc = file_error(RAD_E_FORMAT, c->path, "header: %zu tensors and %zu blobs, over the limit of %d "
                        "(RAD_LIMIT_TENSORS): " DAMAGED, nt, nb, RAD_LIMIT_TENSORS);
        goto done;
    }
    c->tensors = calloc(nt ? nt : 1, sizeof *c->tensors);
    c->blobs = calloc(nb ? nb : 1, sizeof *c->blobs);
    spans = malloc((nt + nb > 0 ? nt + nb : 1) * sizeof *spans);
    if (!c->tensors || !c->blobs || !spans) {
        rc = file_error(RAD_E_NOMEM, c->path, "out of memory for %zu tensors", nt);
        goto done;
    }
    size_t n_spans = 0;
    for (size_t i = 0; i < nt; i++) {
        RadContainerTensor *t = &c->tensors[i];
        if ((rc = load_tensor(c, json_array_get(jt, i), i, t))) goto done;
        c->n_tensors++;
        if (t->size) spans[n_spans++] = (Span){t->offset, t->offset + t->size, t->group, t->name, 0};
    }
    for (size_t i = 0; i < nb; i++) {
        uint64_t off = 0;
        if ((rc = load_blob(c, json_array_get(jb, i), i, &c->blobs[i], &off, &blob_names))) goto done;
        c->n_blobs++;
        if (c->blobs[i].size)
            spans[n_spans++] = (Span){off, off + c->blobs[i].size, BLOB_GROUP, c->blobs[i].name, 1};
    }
    if ((rc = check_layout(c, spans, n_spans))) goto done;

    qsort(c->tensors, (size_t)c->n_tensors, sizeof *c->tensors, tensor_by_name);
    for (int i = 1; i < c->n_tensors; i++)
        if (strcmp(c->tensors[i - 1].name, c->tensors[i].name) == 0) {
            rc = file_error(RAD_E_FORMAT, c->path, "tensor '%.200s' appears twice: " DAMAGED,
                            c->tensors[i].name);
            goto done;
        }
done:
    set_free(&blob_names);
    free(spans);
    json_decref(root);
    return rc;
}

/* Check the preamble of the mapped file and load the header it points at. */
static int load(RadContainer *c)
{
    const uint8_t *p = c->map;
    const char *path = c->path;
    uint32_t version = get_le32(p + PRE_VERSION), flags = get_le32(p + PRE_FLAGS);
    uint64_t header_offset = get_le64(p + PRE_HEADER_OFFSET);
    uint64_t header_size = get_le64(p + PRE_HEADER_SIZE);
    uint64_t data_offset = get_le64(p + PRE_DATA_OFFSET);
    uint64_t data_size = get_le64(p + PRE_DATA_SIZE);
    uint64_t file_size = get_le64(p + PRE_FILE_SIZE);

    if (version != RAD_CONTAINER_VERSION)
        return file_error(RAD_E_UNSUPPORTED, path, "version %u; this radiance reads version %d: "
                          "rebuild radiance or convert the model again", version,
                          RAD_CONTAINER_VERSION);
    if (flags != 0)
        return file_error(RAD_E_UNSUPPORTED, path, "flags 0x%x name features this radiance does "
                          "not know: update radiance or convert the model again", flags);
    if (get_le64(p + PRE_RESERVED) != 0)
        return file_error(RAD_E_FORMAT, path, "the reserved preamble bytes are not zero: " DAMAGED);
    if (c->file_size < file_size)
        return file_error(RAD_E_FORMAT, path, "the file is %llu bytes, but its preamble says %llu: "
                          "the file is truncated; copy or convert it again",
                          (unsigned long long)c->file_size, (unsigned long long)file_size);
    if (c->file_size > file_size)
        return file_error(RAD_E_FORMAT, path, "the file is %llu bytes, but its preamble says %llu: "
                          DAMAGED, (unsigned long long)c->file_size, (unsigned long long)file_size);
    if (data_offset < RAD_CONTAINER_PREAMBLE || data_offset % RAD_CONTAINER_GROUP_ALIGN ||
        data_size % RAD_CONTAINER_GROUP_ALIGN || data_offset > file_size ||
        data_size > file_size - data_offset)
        return file_error(RAD_E_FORMAT, path, "the data region [%llu, +%llu) is misaligned or runs "
                          "past the end of the file (%llu bytes): " DAMAGED,
                          (unsigned long long)data_offset, (unsigned long long)data_size,
                          (unsigned long long)file_size);
    if (header_offset < RAD_CONTAINER_PREAMBLE || header_offset > file_size ||
        header_size > file_size - header_offset || header_size == 0)
        return file_error(RAD_E_FORMAT, path, "the header [%llu, +%llu) runs past the end of the "
                          "file (%llu bytes): " DAMAGED, (unsigned long long)header_offset,
                          (unsigned long long)header_size, (unsigned long long)file_size);
    if (header_offset < data_offset + data_size && data_offset < header_offset + header_size)
        return file_error(RAD_E_FORMAT, path, "the header [%llu, +%llu) overlaps the data region "
                          "[%llu, +%llu): " DAMAGED, (unsigned long long)header_offset,
                          (unsigned long long)header_size, (unsigned long long)data_offset,
                          (unsigned long long)data_size);
    if (header_size > HEADER_MAX_BYTES)
        return file_error(RAD_E_FORMAT, path, "a header of %llu bytes is over the limit of %llu "
                          "(RAD_LIMIT_RAD_HEADER_BYTES): " DAMAGED, (unsigned long long)header_size,
                          (unsigned long long)HEADER_MAX_BYTES);
    c->data_offset = data_offset;
    c->data_size = data_size;
    return load_header(c, header_offset, header_size);
}

void rad_container_close(RadContainer *c)
{
    if (!c) return;
    if (c->release) c->release(c);
    for (int i = 0; i < c->n_tensors; i++) free((char *)c->tensors[i].name);
    free(c->tensors);
    for (int i = 0; i < c->n_blobs; i++) free((char *)c->blobs[i].name);
    free(c->blobs);
    rad_meta_table_free(&c->meta);
    if (c->map) rad_file_unmap(c->map, c->file_size);
    free((char *)c->path);
    free(c);
}

int rad_container_open(const char *path, RadContainer **out)
{
    if (!out) return rad_error_set(RAD_E_ARG, "rad_container_open: out is NULL");
    *out = NULL;
    if (!path) return rad_error_set(RAD_E_ARG, "rad_container_open: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return file_error(RAD_E_NOTFOUND, path, "not found");
        return file_error(RAD_E_IO, path, "cannot open: %s", strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return file_error(RAD_E_IO, path, "not a regular file");
    }
    uint64_t size = (uint64_t)sb.st_size;
    uint8_t head[RAD_CONTAINER_PREAMBLE];
    ssize_t got = pread(fd, head, sizeof head, 0);
    int rc = 0;
    if (got < 0)
        rc = file_error(RAD_E_IO, path, "read failed: %s", strerror(errno));
    else if ((size_t)got < sizeof MAGIC ? size > 0 && memcmp(head, MAGIC, (size_t)got) != 0
                                        : memcmp(head, MAGIC, sizeof MAGIC) != 0)
        rc = file_error(RAD_E_FORMAT, path, "not a radiance model (bad magic); convert it with "
                        "`radiance convert`");
    else if (size < RAD_CONTAINER_PREAMBLE)
        rc = file_error(RAD_E_FORMAT, path, "%llu bytes is shorter than the %d-byte preamble: the "
                        "file is truncated; copy or convert it again", (unsigned long long)size,
                        RAD_CONTAINER_PREAMBLE);
    else if (size > SIZE_MAX)
        rc = file_error(RAD_E_UNSUPPORTED, path, "too large to map on this machine");
    if (rc) {
        close(fd);
        return rc;
    }

    RadContainer *c = calloc(1, sizeof *c);
    char *p = strdup(path);
    if (!c || !p) {
        free(c);
        free(p);
        close(fd);
        return file_error(RAD_E_NOMEM, path, "out of memory");
    }
    c->path = p;
    rad_meta_table_init(&c->meta);
    const uint8_t *map = rad_file_map_fd(fd, size, path);     /* takes fd over */
    if (!map) {
        int err = errno;
        rad_container_close(c);
        return file_error(RAD_E_IO, path, "cannot map: %s", strerror(err));
    }
    c->map = map;
    c->file_size = size;
    if ((rc = load(c))) {
        rad_container_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

const RadContainerTensor *rad_container_find(const RadContainer *c, const char *name)
{
    if (!c || !name || c->n_tensors == 0) return NULL;
    RadContainerTensor key = {.name = name};
    return bsearch(&key, c->tensors, (size_t)c->n_tensors, sizeof *c->tensors, tensor_by_name);
}

const void *rad_container_blob(const RadContainer *c, const char *name, uint64_t *size)
{
    if (size) *size = 0;
    if (!c || !name) return NULL;
    for (int i = 0; i < c->n_blobs; i++)
        if (strcmp(c->blobs[i].name, name) == 0) {
            if (size) *size = c->blobs[i].size;
            return c->blobs[i].data;
        }
    return NULL;
}
