/*
** hf_cache.c: the Hugging Face cache layout on disk (see hf_cache.h for the
** picture).  Two rules shape this file:
**
**   - every name that comes from a server (repo, revision, commit, etag, a
**     file path in a listing) is checked before it becomes a path, so a
**     hostile or broken hub can never make us write outside the cache;
**   - every file that other programs read (refs, listings, links, blobs) is
**     made beside its final name and renamed into place, so an interrupted
**     run leaves either the old state or the new one.
*/
#include "hf_cache.h"
#include "safe_fs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LISTED_FILES   100000
#define MAX_SNAPSHOT_DEPTH 16

/* ----------------------------------------------------------- the cache */

static char *join(const char *a, const char *b)
{
    char *s;
    return asprintf(&s, "%s/%s", a, b) < 0 ? NULL : s;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int rad_hf_cache_init(RadHfCache *c)
{
    c->home = c->hub = NULL;
    if (env("HF_HOME")) {
        c->home = strdup(env("HF_HOME"));
    } else if (env("XDG_CACHE_HOME") && env("XDG_CACHE_HOME")[0] == '/') { /* XDG: relative is ignored */
        c->home = join(env("XDG_CACHE_HOME"), "huggingface");
    } else if (env("HOME")) {
        if (asprintf(&c->home, "%s/.cache/huggingface", env("HOME")) < 0) c->home = NULL;
    } else {
        return rad_error_set(RAD_E_NOTFOUND, "cannot place the Hugging Face cache: set HF_HOME or HOME");
    }
    if (!c->home) return rad_error_set(RAD_E_NOMEM, "out of memory");
    if (env("HF_HUB_CACHE"))
        c->hub = strdup(env("HF_HUB_CACHE"));
    else if (env("HUGGINGFACE_HUB_CACHE"))
        c->hub = strdup(env("HUGGINGFACE_HUB_CACHE"));
    else
        c->hub = join(c->home, "hub");
    if (!c->hub) {
        rad_hf_cache_free(c);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    return RAD_OK;
}

void rad_hf_cache_free(RadHfCache *c)
{
    if (!c) return;
    free(c->home);
    free(c->hub);
    c->home = c->hub = NULL;
}

/* ----------------------------------------------------------------- names */

static int repo_part_ok(const char *s, size_t n)
{
    if (n == 0 || n > 96) return 0;
    if (s[0] == '.' || s[0] == '-' || s[n - 1] == '.' || s[n - 1] == '-') return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!isalnum(ch) && ch != '.' && ch != '-' && ch != '_') return 0;
        if (i > 0 && (ch == '.' || ch == '-') && s[i - 1] == ch) return 0; /* ".." and "--" */
    }
    return 1;
}

int rad_hf_repo_id_ok(const char *repo)
{
    if (!repo) return 0;
    const char *slash = strchr(repo, '/');
    if (!slash) return repo_part_ok(repo, strlen(repo));
    if (strchr(slash + 1, '/')) return 0;
    return repo_part_ok(repo, (size_t)(slash - repo)) && repo_part_ok(slash + 1, strlen(slash + 1));
}

int rad_hf_revision_ok(const char *rev)
{
    if (!rev) return 0;
    size_t n = strlen(rev);
    if (n == 0 || n > 255) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)rev[i];
        int start = i == 0 || rev[i - 1] == '/';
        if (ch == '/') {
            if (start || i + 1 == n) return 0; /* leading, trailing or "//" */
        } else if (start && ch == '.') {
            return 0; /* ".", "..", hidden names */
        } else if (!isalnum(ch) && ch != '.' && ch != '_' && ch != '-' && ch != '+') {
            return 0;
        }
    }
    return 1;
}

static int hex_len(const char *s)
{
    int n = 0;
    while (s[n] && ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) n++;
    return s[n] ? -1 : n;
}

int rad_hf_is_commit(const char *s)
{
    return s && hex_len(s) == RAD_HF_COMMIT_LEN;
}

int rad_hf_etag_ok(const char *s)
{
    int n = s ? hex_len(s) : -1;
    return n == RAD_HF_COMMIT_LEN || n == RAD_HF_SHA256_LEN;
}

int rad_hf_relpath_ok(const char *path)
{
    if (!path || !*path) return 0;
    size_t n = strlen(path);
    if (n >= 1024 || path[0] == '/') return 0;
    int parts = 0;
    const char *p = path;
    while (*p) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0) return 0; /* "//" or a trailing '/' */
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) return 0;
        for (size_t i = 0; i < len; i++) {
            unsigned char ch = (unsigned char)p[i];
            if (ch < 0x20 || ch == 0x7f || ch == '\\') return 0;
        }
        if (++parts > 32) return 0;
        if (!end) break;
        p = end + 1;
        if (!*p) return 0;
    }
    return 1;
}

/* ----------------------------------------------------------------- paths */

/* "ORG/NAME" -> "models--ORG--NAME". */
static char *folder_name(const char *repo)
{
    size_t n = strlen(repo);
    char *s = malloc(8 + 2 * n + 1);
    if (!s) return NULL;
    char *o = s + sprintf(s, "models--");
    for (const char *p = repo; *p; p++) {
        if (*p == '/') {
            *o++ = '-';
            *o++ = '-';
        } else
            *o++ = *p;
    }
    *o = 0;
    return s;
}

static char *repo_path(const RadHfCache *c, const char *repo, const char *fmt_tail, const char *a,
                       const char *b)
{
    char *folder = folder_name(repo), *s = NULL;
    if (!folder) return NULL;
    char tail[512];
    snprintf(tail, sizeof tail, fmt_tail, a ? a : "", b ? b : "");
    if (asprintf(&s, "%s/%s%s", c->hub, folder, tail) < 0) s = NULL;
    free(folder);
    return s;
}

char *rad_hf_repo_dir(const RadHfCache *c, const char *repo)
{
    return repo_path(c, repo, "%s%s", "", "");
}

char *rad_hf_blob_path(const RadHfCache *c, const char *repo, const char *etag, const char *suffix)
{
    return repo_path(c, repo, "/blobs/%s%s", etag, suffix);
}

char *rad_hf_snapshot_dir(const RadHfCache *c, const char *repo, const char *commit)
{
    return repo_path(c, repo, "/snapshots/%s%s", commit, "");
}

char *rad_hf_tree_path(const RadHfCache *c, const char *repo, const char *commit)
{
    return repo_path(c, repo, "/trees/%s%s", commit, ".json");
}

char *rad_hf_lock_path(const RadHfCache *c, const char *repo, const char *etag)
{
    char *folder = folder_name(repo), *s = NULL;
    if (!folder) return NULL;
    if (asprintf(&s, "%s/.locks/%s/%s.lock", c->hub, folder, etag) < 0) s = NULL;
    free(folder);
    return s;
}

int rad_hf_mkdirs(const char *dir)
{
    char buf[PATH_MAX];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) return rad_error_set(RAD_E_IO, "%s: path too long", dir);
    memcpy(buf, dir, n + 1);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char saved = *p;
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return rad_error_set(RAD_E_IO, "%s: cannot create the folder: %s", buf, strerror(errno));
            *p = saved;
            if (!saved) break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return rad_error_set(RAD_E_IO, "%s: exists but is not a folder", dir);
    return RAD_OK;
}

/* --------------------------------------------------------------- listing */

void rad_hf_tree_init(RadHfTree *t)
{
    memset(t, 0, sizeof *t);
}

void rad_hf_tree_free(RadHfTree *t)
{
    if (!t) return;
    for (int i = 0; i < t->n; i++) free(t->files[i].path);
    free(t->files);
    rad_hf_tree_init(t);
}

const char *rad_hf_file_etag(const RadHfFile *f)
{
    return f->sha256[0] ? f->sha256 : f->blob_id;
}

const RadHfFile *rad_hf_tree_find(const RadHfTree *t, const char *path)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->files[i].path, path) == 0) return &t->files[i];
    return NULL;
}

/* Lowercase a hash in place into dst (size 65); 0 when it is not one of
** `want` hex digits. */
static int take_hash(char *dst, const char *src, int want)
{
    int n = 0;
    for (; n < 64 && src[n]; n++) dst[n] = (char)tolower((unsigned char)src[n]);
    dst[n] = 0;
    return !src[n] && hex_len(dst) == want;
}

/* Append one file after checking everything a server could get wrong. */
static int tree_add(RadHfTree *t, const char *path, json_int_t size, const char *blob_id, const char *sha256,
                    const char *what)
{
    if (!path || !rad_hf_relpath_ok(path))
        return rad_error_set(RAD_E_FORMAT,
                             "%s: the listing names the file '%.200s', which would land outside the cache; "
                             "refusing this repository",
                             what, path ? path : "(none)");
    if (size < 0) return rad_error_set(RAD_E_FORMAT, "%s: '%s' has a negative size", what, path);
    if (t->n >= MAX_LISTED_FILES)
        return rad_error_set(RAD_E_FORMAT, "%s: more than %d files listed", what, MAX_LISTED_FILES);
    if (rad_hf_tree_find(t, path)) return rad_error_set(RAD_E_FORMAT, "%s: '%s' is listed twice", what, path);
    RadHfFile f = {.size = (int64_t)size};
    if (blob_id && !take_hash(f.blob_id, blob_id, RAD_HF_COMMIT_LEN))
        return rad_error_set(RAD_E_FORMAT, "%s: '%s' has a malformed git oid '%.80s'", what, path, blob_id);
    if (sha256 && !take_hash(f.sha256, sha256, RAD_HF_SHA256_LEN))
        return rad_error_set(RAD_E_FORMAT, "%s: '%s' has a malformed LFS sha256 '%.80s'", what, path, sha256);
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        RadHfFile *grown = realloc(t->files, (size_t)cap * sizeof *grown);
        if (!grown) return rad_error_set(RAD_E_NOMEM, "out of memory");
        t->files = grown;
        t->cap = cap;
    }
    if (!(f.path = strdup(path))) return rad_error_set(RAD_E_NOMEM, "out of memory");
    t->files[t->n++] = f;
    return RAD_OK;
}

static const char *json_str(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

int rad_hf_tree_add_page(RadHfTree *t, const char *text, size_t len, const char *what)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!root)
        return rad_error_set(RAD_E_FORMAT, "%s: the listing is not JSON (line %d: %s)", what, jerr.line,
                             jerr.text);
    int rc = RAD_OK;
    if (!json_is_array(root)) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: the listing is not a JSON array", what);
        goto done;
    }
    size_t i;
    json_t *item;
    json_array_foreach(root, i, item)
    {
        const char *type = json_str(item, "type");
        if (!json_is_object(item) || !type) {
            rc = rad_error_set(RAD_E_FORMAT, "%s: listing entry %zu has no 'type'", what, i);
            break;
        }
        if (strcmp(type, "file") != 0) continue; /* directories: their files are listed too */
        json_t *lfs = json_object_get(item, "lfs");
        json_t *size = json_object_get(item, "size");
        const char *sha256 = NULL;
        if (json_is_object(lfs)) {
            sha256 = json_str(lfs, "oid");
            if (json_is_integer(json_object_get(lfs, "size"))) size = json_object_get(lfs, "size");
            if (!sha256) sha256 = ""; /* reported as malformed by tree_add */
        }
        if (!json_is_integer(size)) {
            rc = rad_error_set(RAD_E_FORMAT, "%s: '%.200s' has no size", what,
                               json_str(item, "path") ? json_str(item, "path") : "?");
            break;
        }
        const char *oid = json_str(item, "oid");
        rc = tree_add(t, json_str(item, "path"), json_integer_value(size), oid ? oid : "", sha256, what);
        if (rc) break;
    }
done:
    json_decref(root);
    return rc;
}

int rad_hf_tree_load(const RadHfCache *c, const char *path, RadHfTree *t)
{
    rad_hf_tree_init(t);
    int fd = rad_sfs_open_file(c->hub, path, O_RDONLY, 0);
    if (fd == RAD_E_NOTFOUND) return rad_error_set(RAD_E_NOTFOUND, "%s: no saved listing", path);
    if (fd < 0) return fd;
    json_error_t jerr;
    json_t *root = json_loadfd(fd, 0, &jerr);
    close(fd);
    if (!root) return rad_error_set(RAD_E_FORMAT, "%s: line %d: %s", path, jerr.line, jerr.text);
    int rc = RAD_OK;
    json_t *files = json_object_get(root, "files");
    if (json_integer_value(json_object_get(root, "format_version")) != 1 || !json_is_object(files)) {
        rc = rad_error_set(RAD_E_FORMAT, "%s: not a format_version 1 listing", path);
        goto done;
    }
    const char *name;
    json_t *info;
    json_object_foreach(files, name, info)
    {
        json_t *size = json_object_get(info, "size");
        const char *blob = json_str(info, "blob_id"), *sha = json_str(info, "lfs_sha256");
        if (!json_is_integer(size) || !blob) {
            rc = rad_error_set(RAD_E_FORMAT, "%s: '%.200s' lacks size or blob_id", path, name);
            break;
        }
        if ((rc = tree_add(t, name, json_integer_value(size), blob, sha, path))) break;
    }
done:
    json_decref(root);
    if (rc) rad_hf_tree_free(t);
    return rc;
}

int rad_hf_tree_save(const RadHfCache *c, const char *path, const RadHfTree *t)
{
    json_t *root = json_object(), *files = json_object();
    int rc = RAD_OK;
    if (!root || !files) {
        json_decref(root);
        json_decref(files);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    json_object_set_new(root, "format_version", json_integer(1));
    json_object_set_new(root, "files", files);
    for (int i = 0; i < t->n && !rc; i++) {
        const RadHfFile *f = &t->files[i];
        json_t *info = json_pack("{s:I,s:s}", "size", (json_int_t)f->size, "blob_id", f->blob_id);
        if (info && f->sha256[0]) {
            json_object_set_new(info, "lfs_sha256", json_string(f->sha256));
            json_object_set_new(info, "lfs_size", json_integer(f->size));
        }
        if (!info || json_object_set_new(files, f->path, info) != 0)
            rc = rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    char *text = rc ? NULL : json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(root);
    if (rc) return rc;
    if (!text) return rad_error_set(RAD_E_NOMEM, "out of memory");
    rc = rad_sfs_write_file(c->hub, path, text, strlen(text));
    free(text);
    return rc;
}

/* The relative target a snapshot link at depth `depth` below
** snapshots/COMMIT must have: "../" once per folder level plus two, then
** "blobs/ETAG". */
static int link_target(const char *rel_path, const char *etag, char *out, size_t cap)
{
    size_t depth = 2, used = 0;
    for (const char *p = rel_path; *p; p++) depth += *p == '/';
    if (depth * 3 + 7 + strlen(etag) >= cap) return -1;
    for (size_t i = 0; i < depth; i++) used += (size_t)snprintf(out + used, cap - used, "../");
    snprintf(out + used, cap - used, "blobs/%s", etag);
    return 0;
}

/* The blob a snapshot link points at, when it points into this repo's
** blobs/ as huggingface_hub and we make them; else NULL. */
static const char *link_etag(const char *rel_path, const char *target)
{
    const char *slash = strrchr(target, '/');
    const char *name = slash ? slash + 1 : target;
    char want[PATH_MAX];
    if (!rad_hf_etag_ok(name) || link_target(rel_path, name, want, sizeof want) != 0) return NULL;
    return strcmp(target, want) == 0 ? name : NULL;
}

/* What snapshots/COMMIT/REL is: 1 a file of `size` bytes (any size when
** size < 0: its size in *got) that stays in the cache, 0 absent (or a link
** to a missing blob), negative a refusal: a link out of the cache, a hard
** link, a link where a folder should be. */
static int snapshot_entry(const RadHfCache *c, const char *snap, const char *rel, int64_t size, int64_t *got,
                          char etag_out[65])
{
    char *full = join(snap, rel), target[PATH_MAX] = "";
    if (!full) return rad_error_set(RAD_E_NOMEM, "out of memory");
    struct stat st;
    int rc = rad_sfs_lstat(c->hub, full, &st);
    if (etag_out) etag_out[0] = 0;
    if (rc == RAD_E_NOTFOUND) {
        rad_error_clear();
        free(full);
        return 0;
    }
    if (rc) goto done;
    if (S_ISLNK(st.st_mode)) {
        const char *etag = NULL;
        if (rad_sfs_readlink(c->hub, full, target, sizeof target) > 0) etag = link_etag(rel, target);
        if (!etag) {
            rc = rad_error_set(RAD_E_IO,
                               "%s: a link to '%.200s', outside this repository's blobs; refusing to read the "
                               "model through it: remove it and pull again",
                               full, target);
            goto done;
        }
        if (etag_out) snprintf(etag_out, 65, "%.64s", etag);
        /* snapshots/COMMIT/REL -> ../../blobs/ETAG: the blob beside snapshots/ */
        char *blob = NULL;
        size_t snap_len = strlen(snap);
        const char *cut = snap + snap_len;
        for (int up = 0; up < 2 && cut > snap; up++)
            do cut--; while (cut > snap && *cut != '/');
        if (asprintf(&blob, "%.*s/blobs/%s", (int)(cut - snap), snap, etag) < 0) {
            rc = rad_error_set(RAD_E_NOMEM, "out of memory");
            goto done;
        }
        rc = rad_sfs_lstat(c->hub, blob, &st);
        if (rc == RAD_E_NOTFOUND) {
            rad_error_clear();
            free(blob);
            free(full);
            return 0; /* a link to a blob not downloaded (yet) */
        }
        if (!rc && S_ISLNK(st.st_mode)) rc = rad_sfs_refuse_link(blob, "a downloaded file");
        else if (!rc && (!S_ISREG(st.st_mode) || st.st_nlink != 1))
            rc = rad_error_set(RAD_E_IO, "%s: not a plain file (%s); refusing it: remove it and pull again", blob,
                               S_ISREG(st.st_mode) ? "it has other hard links" : "not a regular file");
        free(blob);
        if (rc) goto done;
    } else if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
        rc = rad_error_set(RAD_E_IO, "%s: not a plain file; refusing it: remove it and pull again", full);
        goto done;
    }
    if (got) *got = st.st_size;
    rc = size < 0 || st.st_size == size;
done:
    free(full);
    return rc;
}

static int walk_snapshot(const RadHfCache *c, const char *root, const char *rel, int depth, RadHfTree *t)
{
    char *dir = rel[0] ? join(root, rel) : strdup(root);
    if (!dir) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int fd = rad_sfs_open_dir(c->hub, dir, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    int rc = RAD_OK;
    if (!d) {
        if (fd >= 0) close(fd);
        rc = fd < 0 && fd != RAD_E_NOTFOUND ? fd
             : depth == 0                   ? rad_error_set(RAD_E_NOTFOUND, "%s: no such snapshot", dir)
                                            : RAD_OK;
        free(dir);
        return rc;
    }
    struct dirent *e;
    while (rc == RAD_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        char *sub = rel[0] ? join(rel, e->d_name) : strdup(e->d_name);
        struct stat st;
        if (!sub) {
            rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        } else if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) { /* vanished */
        } else if (S_ISDIR(st.st_mode)) {
            if (depth < MAX_SNAPSHOT_DEPTH) rc = walk_snapshot(c, root, sub, depth + 1, t);
        } else if (rad_hf_relpath_ok(sub)) {
            int64_t size = -1;
            char etag[65];
            int have = snapshot_entry(c, root, sub, -1, &size, etag);
            if (have < 0)
                rc = have;
            else if (have) {
                int lfs = strlen(etag) == RAD_HF_SHA256_LEN;
                rc = tree_add(t, sub, (json_int_t)size, etag[0] && !lfs ? etag : NULL, lfs ? etag : NULL, dir);
            }
        }
        free(sub);
    }
    closedir(d);
    free(dir);
    return rc;
}

int rad_hf_tree_from_snapshot(const RadHfCache *c, const char *snapshot_dir, RadHfTree *t)
{
    rad_hf_tree_init(t);
    int rc = walk_snapshot(c, snapshot_dir, "", 0, t);
    if (rc) rad_hf_tree_free(t);
    return rc;
}

/* ----------------------------------------------------------- refs, links */

int rad_hf_ref_read(const RadHfCache *c, const char *repo, const char *ref,
                    char commit[RAD_HF_COMMIT_LEN + 1])
{
    char *path = repo_path(c, repo, "/refs/%s%s", ref, "");
    if (!path) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int fd = rad_sfs_open_file(c->hub, path, O_RDONLY, 0);
    int rc = RAD_OK;
    if (fd == RAD_E_NOTFOUND) {
        rc = rad_error_set(RAD_E_NOTFOUND, "%s: no such ref in the cache", path);
    } else if (fd < 0) {
        rc = fd;
    } else {
        char buf[128] = "";
        ssize_t got = read(fd, buf, sizeof buf - 1);
        size_t n = got > 0 ? (size_t)got : 0;
        close(fd);
        buf[n] = 0;
        while (n && isspace((unsigned char)buf[n - 1])) buf[--n] = 0;
        if (!rad_hf_is_commit(buf))
            rc = rad_error_set(RAD_E_FORMAT, "%s: does not hold a commit", path);
        else
            memcpy(commit, buf, RAD_HF_COMMIT_LEN + 1);
    }
    free(path);
    return rc;
}

int rad_hf_ref_write(const RadHfCache *c, const char *repo, const char *ref, const char *commit)
{
    char *path = repo_path(c, repo, "/refs/%s%s", ref, "");
    if (!path) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int rc = rad_sfs_write_file(c->hub, path, commit, strlen(commit));
    free(path);
    return rc;
}

int rad_hf_link(const RadHfCache *c, const char *repo, const char *commit, const char *path, const char *etag)
{
    char *blob = rad_hf_blob_path(c, repo, etag, ""), *snap = rad_hf_snapshot_dir(c, repo, commit);
    char *link = snap ? join(snap, path) : NULL, target[PATH_MAX];
    int rc = RAD_OK;
    struct stat st;
    if (!blob || !link) {
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
    } else if ((rc = rad_sfs_lstat(c->hub, blob, &st)) == RAD_E_NOTFOUND) {
        rc = rad_error_set(RAD_E_NOTFOUND, "%s: blob missing, cannot link %s", blob, path);
    } else if (!rc && S_ISLNK(st.st_mode)) {
        rc = rad_sfs_refuse_link(blob, "a downloaded file");
    } else if (!rc && link_target(path, etag, target, sizeof target) != 0) {
        rc = rad_error_set(RAD_E_IO, "%s: path too deep", link);
    } else if (!rc) {
        /* snapshots/COMMIT/a/b/file -> ../../../../blobs/ETAG: two levels
        ** for snapshots/COMMIT, one more per folder in the path */
        rc = rad_sfs_symlink(c->hub, link, target);
    }
    free(blob);
    free(snap);
    free(link);
    return rc;
}

int rad_hf_snapshot_has(const RadHfCache *c, const char *repo, const char *commit, const RadHfFile *f)
{
    char *snap = rad_hf_snapshot_dir(c, repo, commit);
    if (!snap) return rad_error_set(RAD_E_NOMEM, "out of memory");
    int rc = snapshot_entry(c, snap, f->path, f->size, NULL, NULL);
    free(snap);
    return rc;
}

int rad_hf_make_dir(const RadHfCache *c, const char *dir)
{
    int fd = rad_sfs_open_dir(c->hub, dir, 1);
    if (fd < 0) return fd;
    close(fd);
    return RAD_OK;
}

/* ----------------------------------------------------------------- locks */

int rad_hf_lock(const RadHfCache *c, const char *path, int wait, int *fd)
{
    *fd = -1;
    int f = rad_sfs_open_file(c->hub, path, O_RDWR | O_CREAT, 0644), rc;
    if (f < 0) return f;
    while (flock(f, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
        if (errno == EINTR) continue;
        int busy = errno == EWOULDBLOCK;
        rc = busy ? rad_error_set(RAD_E_STATE, "%s: held by another process", path)
                  : rad_error_set(RAD_E_IO, "%s: cannot lock: %s", path, strerror(errno));
        close(f);
        return rc;
    }
    *fd = f;
    return RAD_OK;
}

void rad_hf_unlock(int fd)
{
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd);
}

/* ---------------------------------------------------------- partials */

static int cmp_partial(const void *a, const void *b)
{
    const RadHfPartial *x = a, *y = b;
    int c = strcmp(x->repo, y->repo);
    if (c) return c;
    return strcmp(x->path ? x->path : x->etag, y->path ? y->path : y->etag);
}

/* "models--ORG--NAME" -> "ORG/NAME", or NULL for other folders. */
static char *repo_of_folder(const char *name)
{
    if (strncmp(name, "models--", 8) != 0) return NULL;
    char *s = strdup(name + 8), *sep;
    if (!s) return NULL;
    if ((sep = strstr(s, "--"))) {
        *sep = '/';
        memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
    }
    if (!rad_hf_repo_id_ok(s)) {
        free(s);
        return NULL;
    }
    return s;
}

/* Look etag up in every saved listing of the repo, to name the file. */
static void name_partial(const RadHfCache *c, RadHfPartial *p)
{
    char *trees = repo_path(c, p->repo, "/trees%s%s", "", "");
    DIR *d = trees ? opendir(trees) : NULL;
    struct dirent *e;
    while (d && !p->path && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char *file = join(trees, e->d_name);
        RadHfTree t;
        if (file && rad_hf_tree_load(c, file, &t) == RAD_OK) {
            for (int i = 0; i < t.n && !p->path; i++)
                if (strcmp(rad_hf_file_etag(&t.files[i]), p->etag) == 0) {
                    p->path = strdup(t.files[i].path);
                    p->size = t.files[i].size;
                }
            rad_hf_tree_free(&t);
        }
        free(file);
    }
    if (d) closedir(d);
    free(trees);
    rad_error_clear();
}

int rad_hf_scan_partials(const RadHfCache *c, RadHfPartial **out, int *n_out)
{
    *out = NULL;
    *n_out = 0;
    DIR *top = opendir(c->hub);
    if (!top) return RAD_OK;
    RadHfPartial *list = NULL;
    int n = 0, cap = 0, rc = RAD_OK;
    struct dirent *e;
    while (rc == RAD_OK && (e = readdir(top))) {
        char *repo = repo_of_folder(e->d_name);
        if (!repo) continue;
        char *blobs = repo_path(c, repo, "/blobs%s%s", "", "");
        DIR *d = blobs ? opendir(blobs) : NULL;
        struct dirent *b;
        while (d && rc == RAD_OK && (b = readdir(d))) {
            size_t len = strlen(b->d_name);
            if (len <= 11 || strcmp(b->d_name + len - 11, ".incomplete") != 0 || len - 11 > 64) continue;
            char etag[65];
            memcpy(etag, b->d_name, len - 11);
            etag[len - 11] = 0;
            if (!rad_hf_etag_ok(etag)) continue;
            char *full = join(blobs, b->d_name);
            struct stat st;
            if (!full || lstat(full, &st) != 0 || !S_ISREG(st.st_mode)) {
                free(full);
                continue;
            }
            free(full);
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                RadHfPartial *grown = realloc(list, (size_t)cap * sizeof *grown);
                if (!grown) {
                    rc = rad_error_set(RAD_E_NOMEM, "out of memory");
                    break;
                }
                list = grown;
            }
            RadHfPartial *p = &list[n];
            memset(p, 0, sizeof *p);
            if (!(p->repo = strdup(repo))) {
                rc = rad_error_set(RAD_E_NOMEM, "out of memory");
                break;
            }
            n++;
            memcpy(p->etag, etag, sizeof etag);
            p->bytes = st.st_size;
            p->size = -1;
            name_partial(c, p);
        }
        if (d) closedir(d);
        free(blobs);
        free(repo);
    }
    closedir(top);
    if (rc) {
        rad_hf_partials_free(list, n);
        return rc;
    }
    if (n > 1) qsort(list, (size_t)n, sizeof *list, cmp_partial);
    *out = list;
    *n_out = n;
    return RAD_OK;
}

void rad_hf_partials_free(RadHfPartial *p, int n)
{
    for (int i = 0; p && i < n; i++) {
        free(p[i].repo);
        free(p[i].path);
    }
    free(p);
}

/* ------------------------------------------------------------- purging */

/* A growable set of blob names. */
typedef struct Names {
    int n, cap;
    char (*v)[65];
} Names;

static int names_add(Names *s, const char *etag)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], etag) == 0) return RAD_OK;
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        char(*grown)[65] = realloc(s->v, (size_t)cap * sizeof *grown);
        if (!grown) return rad_error_set(RAD_E_NOMEM, "out of memory");
        s->v = grown;
        s->cap = cap;
    }
    snprintf(s->v[s->n++], 65, "%s", etag);
    return RAD_OK;
}

static int names_has(const Names *s, const char *etag)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i], etag) == 0) return 1;
    return 0;
}

/* Collect the blobs a snapshot's links point at. */
static int collect_links(const char *dir, int depth, Names *out)
{
    DIR *d = opendir(dir);
    if (!d) return RAD_OK;
    struct dirent *e;
    int rc = RAD_OK;
    while (rc == RAD_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        char *full = join(dir, e->d_name);
        if (!full) {
            rc = rad_error_set(RAD_E_NOMEM, "out of memory");
            break;
        }
        struct stat st;
        char target[PATH_MAX];
        if (lstat(full, &st) != 0) {
            /* vanished meanwhile */
        } else if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlink(full, target, sizeof target - 1);
            if (n > 0) {
                /* any link naming .../blobs/ETAG: its blob is this repo's ETAG */
                target[n] = 0;
                const char *slash = strrchr(target, '/');
                const char *etag = slash && slash - target >= 5 && !strncmp(slash - 5, "blobs", 5) ? slash + 1 : NULL;
                if (etag && rad_hf_etag_ok(etag)) rc = names_add(out, etag);
            }
        } else if (S_ISDIR(st.st_mode) && depth < MAX_SNAPSHOT_DEPTH) {
            rc = collect_links(full, depth + 1, out);
        }
        free(full);
    }
    closedir(d);
    return rc;
}

/* rm -r for a folder we own (links are removed, never followed). */
static int remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? RAD_OK : rad_error_set(RAD_E_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return rad_error_set(RAD_E_IO, "%s: %s", path, strerror(errno));
        struct dirent *e;
        int rc = RAD_OK;
        while (rc == RAD_OK && (e = readdir(d))) {
            if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
            char *sub = join(path, e->d_name);
            rc = sub ? remove_tree(sub) : rad_error_set(RAD_E_NOMEM, "out of memory");
            free(sub);
        }
        closedir(d);
        if (rc) return rc;
        if (rmdir(path) != 0) return rad_error_set(RAD_E_IO, "%s: cannot remove: %s", path, strerror(errno));
        return RAD_OK;
    }
    if (unlink(path) != 0) return rad_error_set(RAD_E_IO, "%s: cannot remove: %s", path, strerror(errno));
    return RAD_OK;
}

/* Remove every file under refs/ that holds commit; then empty folders. */
static void remove_refs_to(const char *dir, const char *commit, int depth)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        char *full = join(dir, e->d_name);
        struct stat st;
        if (!full || lstat(full, &st) != 0) {
            free(full);
            continue;
        }
        if (S_ISDIR(st.st_mode) && depth < MAX_SNAPSHOT_DEPTH) {
            remove_refs_to(full, commit, depth + 1);
            rmdir(full); /* only succeeds when empty */
        } else if (S_ISREG(st.st_mode)) {
            char buf[128] = "";
            FILE *f = fopen(full, "r");
            size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
            if (f) fclose(f);
            buf[n] = 0;
            while (n && isspace((unsigned char)buf[n - 1])) buf[--n] = 0;
            if (strcmp(buf, commit) == 0) unlink(full);
        }
        free(full);
    }
    closedir(d);
}

static int dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return 1;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d)))
        if (!(e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))) empty = 0;
    closedir(d);
    return empty;
}

int rad_hf_purge(const RadHfCache *c, const char *repo, const char *commit, uint64_t *freed)
{
    if (freed) *freed = 0;
    char *repo_dir = rad_hf_repo_dir(c, repo), *snap = rad_hf_snapshot_dir(c, repo, commit);
    char *snaps = NULL, *refs = NULL, *tree = NULL, *noexist = NULL, *blobs = NULL;
    Names mine = {0}, others = {0};
    int rc = RAD_OK;
    if (!repo_dir || !snap || !(snaps = join(repo_dir, "snapshots")) || !(refs = join(repo_dir, "refs")) ||
        !(tree = rad_hf_tree_path(c, repo, commit)) || !(blobs = join(repo_dir, "blobs")) ||
        asprintf(&noexist, "%s/.no_exist/%s", repo_dir, commit) < 0) {
        noexist = NULL;
        rc = rad_error_set(RAD_E_NOMEM, "out of memory");
        goto done;
    }
    struct stat st;
    if (stat(snap, &st) != 0) {
        rc = rad_error_set(RAD_E_NOTFOUND, "%s: no such snapshot in the cache", snap);
        goto done;
    }
    /* Removal goes by path: every folder it goes through must be a real
    ** one, or a planted link would make us delete elsewhere. */
    const char *const dirs[] = {repo_dir, snaps, snap, refs, blobs};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        int fd = rad_sfs_open_dir(c->hub, dirs[i], 0);
        if (fd >= 0)
            close(fd);
        else if (fd != RAD_E_NOTFOUND) {
            rc = fd;
            goto done;
        }
    }
    rad_error_clear();
    if ((rc = collect_links(snap, 0, &mine))) goto done;
    if ((rc = remove_tree(snap))) goto done;
    unlink(tree);
    remove_tree(noexist);
    remove_refs_to(refs, commit, 0);

    /* A blob stays while any other snapshot still links it. */
    DIR *d = opendir(snaps);
    struct dirent *e;
    int left = 0;
    while (d && rc == RAD_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *other = join(snaps, e->d_name);
        left++;
        rc = other ? collect_links(other, 0, &others) : rad_error_set(RAD_E_NOMEM, "out of memory");
        free(other);
    }
    if (d) closedir(d);
    if (rc) goto done;
    for (int i = 0; i < mine.n; i++) {
        if (names_has(&others, mine.v[i])) continue;
        char *blob = join(blobs, mine.v[i]);
        if (blob && stat(blob, &st) == 0 && unlink(blob) == 0 && freed) *freed += (uint64_t)st.st_size;
        free(blob);
    }
    if (left == 0) {
        /* Nothing of this repo is used any more: partial downloads, the
        ** listings and the lock folder go with it. */
        d = opendir(blobs);
        while (d && (e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n > 11 && strcmp(e->d_name + n - 11, ".incomplete") == 0) {
                char *blob = join(blobs, e->d_name);
                if (blob && stat(blob, &st) == 0 && unlink(blob) == 0 && freed)
                    *freed += (uint64_t)st.st_size;
                free(blob);
            }
        }
        if (d) closedir(d);
        char *locks = rad_hf_lock_path(c, repo, "x");
        if (locks) {
            *strrchr(locks, '/') = 0;
            remove_tree(locks);
            free(locks);
        }
        if (dir_is_empty(blobs)) {
            char *trees = join(repo_dir, "trees"), *noex = join(repo_dir, ".no_exist");
            if (trees) remove_tree(trees);
            if (noex) remove_tree(noex);
            free(trees);
            free(noex);
            rmdir(blobs);
            rmdir(snaps);
            if (dir_is_empty(refs)) rmdir(refs);
            rmdir(repo_dir);
        }
    }
    rad_error_clear();
done:
    free(mine.v);
    free(others.v);
    free(repo_dir);
    free(snap);
    free(snaps);
    free(refs);
    free(tree);
    free(noexist);
    free(blobs);
    return rc;
}
