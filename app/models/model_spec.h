/*
** model_spec.h: what the user means by MODEL, and which files of a
** repository that takes.
**
** A spec is one of
**
**   ALIAS[:QUANT]            a name from models.tsv ("qwen3:0.6b", "qwen3:0.6b:q8_0")
**   hf:ORG/REPO[@REV][:QUANT] a Hugging Face repository at a branch, tag or commit
**   PATH                     a local .rad container, .gguf file or Hugging Face folder
**
**   hf.co/ORG/REPO[:QUANT]   the same (ollama's spelling; also huggingface.co/)
**
** QUANT means two things, by repository: for a safetensors repository it
** is what we convert to (an encoding or one of llama.cpp's recipes,
** default q4_k_m); for a GGUF repository it picks the file (Q4_K_M, else
** Q8_0, by default).  It may also name a GGUF file of the repository
** ("sub/model-Q4_K_M.gguf").  Case does not matter.  A bare ORG/REPO that is
** no local path is refused with the hf: spelling as the hint.
**
** The alias files are TSV: name, repository, revision, quant or GGUF file,
** licence note; '#' starts a comment.  They are read in this order, the
** first match winning: $RADIANCE_ALIASES, $XDG_CONFIG_HOME/radiance/models.tsv
** (~/.config/radiance/models.tsv), then the list that ships with radiance
** (PREFIX/share/radiance/models.tsv, or share/models.tsv in a source tree).
** Only an absolute XDG_CONFIG_HOME counts (the XDG specification).
**
** Nothing here touches the network or the cache; this module is plain
** parsing and choosing, unit-tested in tests/unit/test_model_spec.c.
*/
#ifndef RAD_MODEL_SPEC_H
#define RAD_MODEL_SPEC_H

#include <stddef.h>

#include "hf_cache.h"

#define RAD_SPEC_PATH_MAX      4096
#define RAD_DEFAULT_QUANT      "q4_k_m" /* safetensors repositories: llama.cpp's Q4_K_M recipe */
#define RAD_DEFAULT_GGUF_QUANT "Q4_K_M" /* GGUF repositories (then Q8_0) */

typedef enum RadSpecKind {
    RAD_SPEC_HUB = 1,   /* a Hugging Face repository: an alias or hf:ORG/REPO */
    RAD_SPEC_RAD = 2,   /* a local .rad container */
    RAD_SPEC_GGUF = 3,  /* a local GGUF file (known by its content, whatever its name) */
    RAD_SPEC_HF_DIR = 4 /* a local Hugging Face folder (config.json + safetensors) */
} RadSpecKind;

typedef struct RadModelSpec {
    int kind;                     /* RadSpecKind */
    char name[RAD_SPEC_PATH_MAX]; /* the model's name in the store: the alias, "hf:ORG/REPO[@REV]"
                                   ** (the revision only when given), or the absolute path */
    char repo[200];               /* HUB: "ORG/REPO" */
    char revision[256];           /* HUB: branch, tag or commit; "main" unless named */
    char quant[32];               /* the spec's ":QUANT", else the alias's; "" when neither */
    int quant_from_spec;          /* 1 when the user wrote the quant (or a file) in the spec */
    char file[256];               /* HUB: a GGUF file the spec or the alias names, else "" */
    char licence[256];            /* HUB: the alias's licence note, else "" */
    char path[RAD_SPEC_PATH_MAX]; /* local kinds: the absolute path */
} RadModelSpec;

/* Parse `text` against the alias files found as described above.  Returns
** 0, RAD_E_ARG (malformed: bad characters, an empty part, a name that
** climbs out with "..", a quant that is not [A-Za-z0-9_]), or
** RAD_E_NOTFOUND (not an alias, not hf:, not an existing path). */
int rad_model_spec_parse(const char *text, RadModelSpec *out);

/* The same against the given alias files (missing files are skipped). */
int rad_model_spec_parse_in(const char *text, const char *const *alias_files, int n_files, RadModelSpec *out);

/* The alias files in search order, existing or not, into files[0..max);
** returns how many were written.  Each path is malloc'd: free them. */
int rad_model_alias_files(char **files, int max);

/* 1 when q is a quant token: 1..31 characters of [A-Za-z0-9_]. */
int rad_model_quant_ok(const char *q);

/* The quant a GGUF file name carries, as llama.cpp reads it: the last part
** of the name, after '-' or '.', before .gguf and a split suffix
** ("Qwen3-0.6B-Q8_0.gguf" -> "Q8_0"), upper-cased into out. */
void rad_model_gguf_tag(const char *path, char *out, size_t cap);

/* ----------------------------------------------------- choosing files */

typedef enum RadRepoKind {
    RAD_REPO_SAFETENSORS = 1, /* config.json + model.safetensors or an index and its shards */
    RAD_REPO_GGUF = 2         /* one GGUF file, or the parts of a split one */
} RadRepoKind;

typedef struct RadSelection {
    int kind; /* RadRepoKind */
    int n;
    int *idx;       /* indices into the tree, in listing order */
    char quant[32]; /* GGUF: the quant the file was chosen for */
    int first;      /* GGUF: the tree index of the file (its first part) */
} RadSelection;

/* Choose what to download from a listing.
**
** Safetensors (top-level config.json and weights): config.json, the
** tokenizer and generation files that exist (tokenizer.json,
** tokenizer_config.json, tokenizer.model, special_tokens_map.json,
** vocab.json, merges.txt, added_tokens.json, generation_config.json,
** chat_template.jinja, chat_template.json), and the weights: with
** model.safetensors.index.json, it and every other top-level *.safetensors
** (but consolidated*.safetensors, a duplicate some repositories carry);
** otherwise model.safetensors.  Folders (original/, onnx/) are skipped.
**
** GGUF (*.gguf anywhere, no safetensors weights): the file `file` names, or
** else the model files whose name holds `quant` as a whole token,
** case-insensitive, the shallowest first (two at one depth: refused as
** ambiguous, naming them); without a quant Q4_K_M, else Q8_0, else the
** only model.  mmproj and imatrix files are never models; a split file
** (NAME-00001-of-00003.gguf) brings all its parts.  docs/HUB.md has the
** rules and why.
**
** `what` names the repository in messages ("ORG/REPO@COMMIT").  Returns 0,
** RAD_E_NOTFOUND (no file for the quant, or several: the message lists the
** quants there are; a missing shard or part), RAD_E_UNSUPPORTED (neither
** kind) or RAD_E_NOMEM. */
int rad_model_select(const RadHfTree *t, const char *quant, const char *file, const char *what,
                     RadSelection *out);
void rad_selection_free(RadSelection *s);

#endif /* RAD_MODEL_SPEC_H */
