/*
** hf_cache.h: the Hugging Face cache on disk, laid out the way
** huggingface_hub lays it out, so that files other tools downloaded are
** reused and the files we download are visible to them.
**
**   HF_HUB_CACHE/                       default HF_HOME/hub; HF_HOME defaults to
**     models--ORG--NAME/                $XDG_CACHE_HOME/huggingface, ~/.cache/huggingface
**       blobs/ETAG                      a file's bytes; ETAG is the sha256 of an LFS
**                                       file or the git blob sha1 of a small one
**       blobs/ETAG.incomplete           a download in progress, resumed with Range
**       refs/REVISION                   the commit a branch or tag pointed at
**       snapshots/COMMIT/PATH           a relative symlink to ../../blobs/ETAG
**       trees/COMMIT.json               the file listing at COMMIT (never changes)
**     .locks/models--ORG--NAME/ETAG.lock  flock()ed while ETAG downloads
**
** This module owns the paths, the name checks that keep a hostile listing
** inside the cache, the listing file, links, refs, locks, the scan for
** partial downloads, and purging a snapshot.  The cache may be shared
** (HF_HOME on a group disk): every file it writes or reads below the hub
** folder goes through safe_fs.h, so a link planted there is refused, never
** followed.  It does no network I/O (that
** is hub.c) and knows nothing of models (model_spec.c picks the files).
**
** Every function returns 0 or a negative RAD_E_* code with the message set;
** paths returned are malloc'd and owned by the caller.
*/
#ifndef RAD_HF_CACHE_H
#define RAD_HF_CACHE_H

#include <stdint.h>

#include "../../base/rad_types.h"

#define RAD_HF_COMMIT_LEN 40 /* hex digits of a git commit or blob sha1 */
#define RAD_HF_SHA256_LEN 64

typedef struct RadHfCache {
    char *home; /* HF_HOME: where the token file lives */
    char *hub;  /* the hub cache, the folder holding models--* */
} RadHfCache;

/* Find the cache from the environment: HF_HUB_CACHE (or the older
** HUGGINGFACE_HUB_CACHE), else HF_HOME/hub, where HF_HOME defaults to
** $XDG_CACHE_HOME/huggingface (when absolute: the XDG specification ignores
** a relative one), then ~/.cache/huggingface.  Creates nothing.
** Returns 0, RAD_E_NOTFOUND (neither HF_HOME nor HOME is set) or RAD_E_NOMEM. */
int rad_hf_cache_init(RadHfCache *c);
void rad_hf_cache_free(RadHfCache *c);

/* ------------------------------------------------------------------ names */

/* 1 when repo is "NAME" or "ORG/NAME", each part 1..96 characters of
** [A-Za-z0-9._-], not starting or ending with '.' or '-', with no "--" or
** ".." anywhere (the cache folder name joins the parts with "--"). */
int rad_hf_repo_id_ok(const char *repo);

/* 1 when rev is a branch, tag or commit we accept: 1..255 characters of
** [A-Za-z0-9._+/-], components separated by single '/', none starting
** with '.'.  It becomes a file under refs/, so nothing may climb out. */
int rad_hf_revision_ok(const char *rev);

/* 1 when s is exactly 40 lowercase hex digits (a commit). */
int rad_hf_is_commit(const char *s);

/* 1 when s is 40 or 64 lowercase hex digits (a blob name). */
int rad_hf_etag_ok(const char *s);

/* 1 when path, a file name from a repository listing, stays inside the
** snapshot folder: relative, components separated by single '/', none
** empty, "." or "..", no backslash or control character, under 1024 bytes
** and 32 components. */
int rad_hf_relpath_ok(const char *path);

/* ------------------------------------------------------------------ paths */

/* HUB/models--ORG--NAME.  The repo must have passed rad_hf_repo_id_ok.
** NULL when out of memory. */
char *rad_hf_repo_dir(const RadHfCache *c, const char *repo);
/* HUB/models--ORG--NAME/blobs/ETAG + suffix ("" or ".incomplete"). */
char *rad_hf_blob_path(const RadHfCache *c, const char *repo, const char *etag, const char *suffix);
/* HUB/models--ORG--NAME/snapshots/COMMIT */
char *rad_hf_snapshot_dir(const RadHfCache *c, const char *repo, const char *commit);
/* HUB/models--ORG--NAME/trees/COMMIT.json */
char *rad_hf_tree_path(const RadHfCache *c, const char *repo, const char *commit);
/* HUB/.locks/models--ORG--NAME/ETAG.lock */
char *rad_hf_lock_path(const RadHfCache *c, const char *repo, const char *etag);

/* mkdir -p, mode 0755.  RAD_E_IO naming the folder on failure.  For
** folders of our own; inside the cache use rad_hf_make_dir. */
int rad_hf_mkdirs(const char *dir);

/* Make `dir` (inside the hub cache) and its missing parents, refusing a
** symlink on the way (safe_fs.h).  Returns 0 or RAD_E_IO naming it. */
int rad_hf_make_dir(const RadHfCache *c, const char *dir);

/* ---------------------------------------------------------------- listing */

/* One file of a repository at a commit. */
typedef struct RadHfFile {
    char *path;       /* relative to the repo root; passed rad_hf_relpath_ok */
    int64_t size;     /* bytes of the real file (the LFS object's for LFS files) */
    char blob_id[41]; /* git blob sha1 of what git stores (the pointer for LFS) */
    char sha256[65];  /* the LFS object's sha256, or "" for a file kept in git */
} RadHfFile;

typedef struct RadHfTree {
    int n, cap;
    RadHfFile *files; /* in the order listed */
} RadHfTree;

void rad_hf_tree_init(RadHfTree *t);
void rad_hf_tree_free(RadHfTree *t);

/* The blob name of f in the cache: its sha256 when it is an LFS file, else
** its git blob sha1.  "" when neither is known (a snapshot we did not list). */
const char *rad_hf_file_etag(const RadHfFile *f);

/* The entry for path, or NULL. */
const RadHfFile *rad_hf_tree_find(const RadHfTree *t, const char *path);

/* Add the files of one page of the hub's tree listing (a JSON array of
** {"type","path","size","oid","lfs":{"oid","size"}}; directories are
** skipped).  `what` names the listing in messages ("ORG/NAME@COMMIT").
** Returns 0, RAD_E_FORMAT (not the expected JSON, a bad hash or size, a
** duplicate, and above all a path that would leave the cache: the whole
** listing is refused, naming the path) or RAD_E_NOMEM. */
int rad_hf_tree_add_page(RadHfTree *t, const char *json, size_t len, const char *what);

/* Read trees/COMMIT.json (huggingface_hub's format_version 1:
** {"format_version":1,"files":{PATH:{"size","blob_id","lfs_sha256","lfs_size"}}}),
** with the same checks as add_page; the file is never read through a link.
** Returns 0, RAD_E_NOTFOUND (no file), RAD_E_FORMAT, RAD_E_IO (a link on
** the way) or RAD_E_NOMEM; on failure t is left empty. */
int rad_hf_tree_load(const RadHfCache *c, const char *path, RadHfTree *t);

/* Write t as trees/COMMIT.json in the same format, through a temporary file
** renamed into place.  Returns 0, RAD_E_IO or RAD_E_NOMEM. */
int rad_hf_tree_save(const RadHfCache *c, const char *path, const RadHfTree *t);

/* Describe what a snapshot folder holds when no listing was saved (another
** tool downloaded it): every regular file, or link to a blob of the repo,
** with its size and blob name.  A link that leads anywhere else is refused.
** Returns 0, RAD_E_NOTFOUND (no such folder), RAD_E_IO or RAD_E_NOMEM. */
int rad_hf_tree_from_snapshot(const RadHfCache *c, const char *snapshot_dir, RadHfTree *t);

/* ----------------------------------------------------------- refs, links */

/* The commit refs/REF holds.  Returns 0, RAD_E_NOTFOUND (no such ref) or
** RAD_E_FORMAT (the file does not hold a commit). */
int rad_hf_ref_read(const RadHfCache *c, const char *repo, const char *ref,
                    char commit[RAD_HF_COMMIT_LEN + 1]);

/* Write commit to refs/REF (atomically).  Returns 0 or RAD_E_IO. */
int rad_hf_ref_write(const RadHfCache *c, const char *repo, const char *ref, const char *commit);

/* Make snapshots/COMMIT/PATH a relative symlink to blobs/ETAG, replacing
** the link or file that was there.  The blob must exist.  Returns 0,
** RAD_E_NOTFOUND or RAD_E_IO. */
int rad_hf_link(const RadHfCache *c, const char *repo, const char *commit, const char *path,
                const char *etag);

/* 1 when snapshots/COMMIT/F->path is a regular file, or the link to this
** repo's blob that huggingface_hub and we make, of F->size bytes (any size
** when F->size < 0); 0 when absent; negative (RAD_E_IO, naming it) when it
** is a link leading anywhere else, a file with other hard links, or the
** folders on the way hold a link: the model is never read from outside. */
int rad_hf_snapshot_has(const RadHfCache *c, const char *repo, const char *commit, const RadHfFile *f);

/* ------------------------------------------------------------------ locks */

/* Take the exclusive lock at path inside the cache (creating its folder
** and file, never through a link).  With wait == 0 a lock held by another
** process returns RAD_E_STATE at once.  *fd receives the descriptor to give
** to rad_hf_unlock.  Returns 0, RAD_E_STATE or RAD_E_IO. */
int rad_hf_lock(const RadHfCache *c, const char *path, int wait, int *fd);
void rad_hf_unlock(int fd);

/* --------------------------------------------------- partials and purging */

/* A download left unfinished: blobs/ETAG.incomplete. */
typedef struct RadHfPartial {
    char *repo; /* "ORG/NAME" */
    char etag[65];
    int64_t bytes; /* on disk */
    char *path;    /* the file's name from a saved listing, or NULL */
    int64_t size;  /* its full size from that listing, or -1 */
} RadHfPartial;

/* Every *.incomplete blob under the cache, sorted by repo then path.
** Returns 0 (an absent cache has none) or RAD_E_NOMEM. */
int rad_hf_scan_partials(const RadHfCache *c, RadHfPartial **out, int *n);
void rad_hf_partials_free(RadHfPartial *p, int n);

/* Remove snapshots/COMMIT, trees/COMMIT.json, .no_exist/COMMIT and every
** ref pointing at COMMIT; then each blob that snapshot linked and no other
** snapshot links.  When no snapshot is left, the partial downloads and the
** repo folder go too.  *freed (may be NULL) receives the bytes of the blobs
** removed.  Returns 0, RAD_E_NOTFOUND (no such snapshot) or RAD_E_IO. */
int rad_hf_purge(const RadHfCache *c, const char *repo, const char *commit, uint64_t *freed);

#endif /* RAD_HF_CACHE_H */
