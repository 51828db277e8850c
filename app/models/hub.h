/*
** hub.h: the Hugging Face Hub client (libcurl).
**
** It answers one question, "make the files this model needs present in the
** cache", in four steps: find the commit a revision names (refs/ offline,
** the revision API online), list the repository at that commit (the saved
** trees/COMMIT.json, else the tree API, paginated), choose the files
** (model_spec.c), and download what is missing:
**
**   - several files at once (curl multi), each into blobs/ETAG.incomplete
**     under an flock, resumed with Range after a dropped connection, a
**     crash or a kill; a server that answers a Range with 200 starts over;
**   - hashed while the bytes arrive (sha256 for LFS files against the
**     listing's LFS oid, git blob sha1 for small files); a mismatch deletes
**     the download and says so; a match is renamed into place and linked;
**   - retried with backoff on 408, 429, 5xx and dropped connections;
**   - the Authorization header only ever goes to the hub's own origin
**     (scheme, host, port): redirects are followed by us, not by curl, and
**     the header is set per request;
**   - never started without the free space for it.
**
** A pinned commit already complete in the cache is served without any
** network request; offline mode (HF_HUB_OFFLINE=1 or --offline) never
** makes one.  docs/HUB.md explains the choices.
*/
#ifndef RAD_HUB_H
#define RAD_HUB_H

#include <stdio.h>

#include "hf_cache.h"
#include "model_spec.h"

typedef struct RadHubOptions {
    int offline; /* 1: never use the network (HF_HUB_OFFLINE=1 sets it too) */
    int quiet;   /* 1: no progress lines, only errors */
    FILE *log;   /* progress: a live display on a terminal, plain lines otherwise;
                 ** NULL: stderr */
    int jobs;    /* transfers at once; 0: 4 */
} RadHubOptions;

typedef struct RadHub RadHub;

/* Read the environment (HF_ENDPOINT, HF_TOKEN, HUGGING_FACE_HUB_TOKEN, the
** token file at HF_TOKEN_PATH or HF_HOME/token, HF_HUB_OFFLINE, the cache
** variables of hf_cache.h) and prepare the client.  No request is made.
** Returns 0, RAD_E_ARG (HF_ENDPOINT is not an http(s) URL, a token holds a
** character that cannot go in a header), RAD_E_NOTFOUND (no cache
** location) or RAD_E_NOMEM. */
int rad_hub_open(const RadHubOptions *o, RadHub **out);
void rad_hub_close(RadHub *h);

const RadHfCache *rad_hub_cache(const RadHub *h);
int rad_hub_is_offline(const RadHub *h);

/* What rad_hub_fetch made present. */
typedef struct RadHubFetch {
    char commit[RAD_HF_COMMIT_LEN + 1];
    char *snapshot;   /* HUB/models--ORG--NAME/snapshots/COMMIT */
    int kind;         /* RadRepoKind */
    char *gguf_path;  /* GGUF: the file (first part) inside the snapshot, else NULL */
    char quant[32];   /* GGUF: the quant of the file chosen ("Q4_K_M"), upper case */
    char sha256[65];  /* GGUF: the LFS sha256 of the file (its first part), "" when not LFS */
    int64_t bytes;    /* the size of every file the model needs, together */
    int n_files;      /* files the model needs */
    int n_downloaded; /* of which were transferred by this call */
} RadHubFetch;

/* Make every file the model needs present under snapshots/COMMIT/ of repo
** at revision (a branch, tag or commit).  quant and file choose among GGUF
** files (see rad_model_select); both may be NULL.
**
** Returns 0 with *out filled (free it with rad_hub_fetch_free), or
** RAD_E_ARG (a bad repo id or revision), RAD_E_NOTFOUND (404, or offline
** and not cached), RAD_E_FORMAT (a malformed or hostile listing, a hash
** mismatch), RAD_E_UNSUPPORTED (not a model repository), RAD_E_IO (the
** network, access refused, no space, a file system error) or RAD_E_NOMEM.
** The message names the repository or file, what happened and what to do.
** Unfinished downloads stay as .incomplete files for the next call. */
int rad_hub_fetch(RadHub *h, const char *repo, const char *revision, const char *quant, const char *file,
                  RadHubFetch *out);
void rad_hub_fetch_free(RadHubFetch *f);

/* "1.5 GiB", "812.0 KiB", "17 B" into buf. */
const char *rad_hub_format_bytes(int64_t n, char *buf, size_t cap);

#endif /* RAD_HUB_H */
