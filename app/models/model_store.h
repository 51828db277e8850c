/*
** model_store.h: the converted models, and the one call that turns any
** MODEL spec into a .rad file on disk.
**
** Converted models live beside the database, in $XDG_DATA_HOME/radiance/
** (~/.local/share/radiance/):
**
**   radiance.db            SQLite (WAL); this module owns its `models` table
**   models/NAME.QUANT.rad  one container per (name, quant)
**
** The `models` table (one row per converted model; docs/HUB.md):
**
**   name       TEXT     the spec's name: an alias, "hf:ORG/REPO[@REV]", or a folder's path
**   quant      TEXT     the quant: an encoding or recipe converted to (q4_k_m, q8_0, bf16,
**                       ...), or a GGUF's own ("Q4_K_M", as its file name says it)
**   source     TEXT     "ORG/REPO", or the folder converted
**   revision   TEXT     the revision asked for ("main"); '' for a folder
**   commit_sha TEXT     the commit converted (40 hex); '' for a folder
**   file       TEXT     the .rad file, relative to the store folder (unique); for a GGUF
**                       run in place, "cache:TAG:" + its absolute path in the HF cache
**   size       INTEGER  bytes of the .rad file
**   sha256     TEXT     digest of the .rad file, hex
**   created    INTEGER  unix seconds of the conversion
**   last_used  INTEGER  unix seconds of the last run, NULL if never
**   PRIMARY KEY (name, quant)
*/
#ifndef RAD_MODEL_STORE_H
#define RAD_MODEL_STORE_H

#include <stdint.h>
#include <stdio.h>

#include "model_spec.h"

/* ------------------------------------------------------------ resolving */

typedef struct RadResolveOptions {
    const char *quant;      /* NULL: the spec's ":QUANT", else the alias's, else q4_k_m (safetensors)
                            ** or Q4_K_M, then Q8_0 (GGUF) */
    int offline;            /* 1: never use the network (HF_HUB_OFFLINE=1 does the same) */
    int quiet;              /* 1: no progress lines */
    int pull;               /* 0 (run): a model already converted is used as it is, with no request,
                            **   and its last use is recorded;
                            ** 1 (pull): ask the hub what the revision points at now, download and
                            **   convert when that commit is not the one converted */
    const char *plugin_dir; /* for the converter; NULL: the default */
    FILE *log;              /* progress; NULL: stderr */
} RadResolveOptions;

/* What rad_model_resolve_ex did. */
typedef struct RadResolved {
    char *path;                   /* the .rad file (malloc'd) */
    char name[RAD_SPEC_PATH_MAX]; /* the store's name ("" for a .rad path) */
    char quant[32];
    char commit[RAD_HF_COMMIT_LEN + 1]; /* hub models; "" otherwise */
    int converted;                      /* 1 when this call converted it */
    int downloaded;                     /* files this call downloaded */
} RadResolved;

/* Turn MODEL into a local .rad path that rad_engine_open can take.
**
**   - a .rad path is returned as it is (absolute);
**   - a Hugging Face folder is converted into the store once, and again
**     when a file in it is newer than the conversion;
**   - an alias or hf:ORG/REPO is looked up in the store; when absent (or
**     with o->pull) it is fetched into the Hugging Face cache (hub.h: a
**     cold cache downloads, a warm one makes no request for a pinned
**     commit, offline never does), converted with rad_convert_hf and
**     recorded; a GGUF repository is not converted: its file is checked,
**     recorded and returned where the cache holds it (no second copy);
**   - a GGUF path is returned as it is (the engine maps it). 
**
** o may be NULL (the defaults: run, online, progress on stderr).  On
** success *rad_path is a malloc'd absolute path the caller frees.
** Returns 0, or RAD_E_ARG (a malformed spec or quant), RAD_E_NOTFOUND
** (no such alias, path, repository or revision; offline and not cached),
** RAD_E_UNSUPPORTED (a model no plugin serves), RAD_E_FORMAT (a hostile listing, a hash
** mismatch, a checkpoint the converter refuses), RAD_E_IO (network,
** access, disk) or RAD_E_NOMEM, with a one-line message naming the model,
** the file or URL, and what to do. */
int rad_model_resolve(const char *spec, const RadResolveOptions *o, char **rad_path);

/* The same, telling what happened (for `radiance pull`).  Free out->path. */
int rad_model_resolve_ex(const char *spec, const RadResolveOptions *o, RadResolved *out);

/* ------------------------------------------------------------ the store */

typedef struct RadStore RadStore;

typedef struct RadStoredModel {
    char *name, *quant, *source, *revision, *commit_sha;
    char *path; /* absolute path of the .rad file */
    char *file; /* the same, relative to the store folder */
    int64_t size;
    char sha256[65];
    int64_t created;
    int64_t last_used; /* 0: never */
} RadStoredModel;

/* Open (creating the folder, the database and the table as needed)
** $XDG_DATA_HOME/radiance/radiance.db.  Returns 0, RAD_E_NOTFOUND (neither
** XDG_DATA_HOME nor HOME), RAD_E_IO (naming the file) or RAD_E_NOMEM. */
int rad_store_open(RadStore **out);
void rad_store_close(RadStore *s);

/* The same, without making anything: when no database exists yet the store
** is empty (find says not found, list gives nothing) and no folder, file or
** HOME is created.  For the commands that only read (list, show, rm). */
int rad_store_open_existing(RadStore **out);

/* A row's file that is not in the store but in the Hugging Face cache (a
** GGUF run in place) is written "cache:TAG:/absolute/path": the path, or
** NULL for a file of the store. */
const char *rad_store_cache_path(const char *file);

/* The store folder ($XDG_DATA_HOME/radiance). */
const char *rad_store_dir(const RadStore *s);

/* The row for (name, quant); with quant NULL, the row of that name used
** (else converted) most recently.  Returns 0, RAD_E_NOTFOUND or RAD_E_IO. */
int rad_store_find(RadStore *s, const char *name, const char *quant, RadStoredModel *out);

/* Every row, by name then quant.  Free with rad_stored_models_free. */
int rad_store_list(RadStore *s, RadStoredModel **rows, int *n);

/* Insert or replace the row for (m->name, m->quant); m->file is used,
** m->path ignored.  Returns 0 or RAD_E_IO. */
int rad_store_put(RadStore *s, const RadStoredModel *m);

/* Delete the row.  Returns 0 or RAD_E_IO. */
int rad_store_delete(RadStore *s, const char *name, const char *quant);

/* Record a use now. */
int rad_store_touch(RadStore *s, const char *name, const char *quant);

/* The file name a new conversion of (name, quant) gets, relative to the
** store folder: "models/" + the name with every character outside
** [A-Za-z0-9._-] made '-' (and, when that changed it, 8 hex digits of its
** sha256 so that names stay distinct) + "." QUANT ".rad".  malloc'd. */
char *rad_store_file_for(const char *name, const char *quant);

void rad_stored_model_free(RadStoredModel *m);
void rad_stored_models_free(RadStoredModel *rows, int n);

/* sha256 of a file as lowercase hex, and its size.  Returns 0 or RAD_E_IO. */
int rad_file_sha256(const char *path, char hex[65], int64_t *size);

#endif /* RAD_MODEL_STORE_H */
