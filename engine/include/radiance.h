/*
** radiance.h: the engine API the application uses.
**
** Open a model (a .rad container), evaluate tokens into sequences, read the
** logits, sample.  Everything the app needs from the engine goes through
** here; the plugin and kernel ABIs stay behind it.
*/
#ifndef RADIANCE_H
#define RADIANCE_H

#include <stdio.h>

#include "rad_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct RadEngine RadEngine;

typedef struct RadEngineOptions {
    const char *model_path;     /* a .rad container */
    const char *plugin_dir;     /* NULL: $RADIANCE_HOME/plugins, else beside the binary */
    const char *kernels;        /* library order, comma-separated; NULL = every installed library by
                                ** its preference (cpu,ref) */
    int n_threads;              /* threads for host kernels; 0 = the physical cores */
    int max_ctx;                /* positions per sequence; 0 = min(model's, 4096) */
    int max_tok;                /* rows per step (prefill chunk); 0 = 256 */
    int max_seqs;               /* sequences; 0 = 1 */
    int logits_all;             /* every prompt row's logits wanted (teacher forcing) */
    const char *kv_type;        /* KV cache encoding: "f16" (NULL picks it) or "f32" */
    FILE *debug_graph;          /* print the resolved program here, or NULL */
    FILE *debug_plan;           /* print the memory plan here, or NULL */
    /* grown for several sequences per step (docs/SCHEDULING.md) */
    int max_spec;               /* positions a step may later roll back (speculation); 0 = none */
    int max_mixed_tok;          /* prefill rows a step carries beside decode rows; 0 = max_tok */
    int max_out_rows;           /* logits rows one step returns; 0 = max_tok with logits_all, else
                                ** max_seqs * (1 + max_spec) */
    int64_t kv_size;            /* KV positions shared by all sequences; 0 = max_seqs * max_ctx */
    int no_prefix_cache;        /* 1: never share prompt blocks between sequences */
    int64_t mem_budget;         /* bytes the model may keep in memory; 0 = the smaller of the memory
                                ** available and the cgroup's limit, less a floor (docs/RESIDENCY.md) */
    /* Fields added for opening models fast and visibly (app/models/model_open.c): */
    const char *tokenizer_cache; /* folder of prepared GGUF tokenizers (formats/tokenizer_cache.h);
                                 ** NULL: build a GGUF's tokenizer from its metadata every time */
    void (*progress)(void *arg, const char *stage); /* called as rad_engine_open enters each stage
                                 ** ("reading", "tokenizer", "plugins", "planning", "weights");
                                 ** NULL: not called */
    void *progress_arg;
    int copies;                 /* when kernels' weight copies are made (docs/RESIDENCY.md):
                                ** RAD_COPIES_BACKGROUND (0): the output head's after the model
                                ** opens, on a thread of its own, the rest before; AT_OPEN: all
                                ** before rad_engine_open returns; ON_WAIT: the head's only when
                                ** rad_engine_wait_copies is called (for tests) */
    int stream_experts;         /* RAD_STREAM_*: whether routed experts are read from the file as
                                ** routing picks them, into a cache of slots, never through the
                                ** mapping (a .rad only; docs/RESIDENCY.md, "Streaming the experts").
                                ** AUTO (0): when the model does not fit the memory budget */
    int64_t expert_cache_bytes; /* the slots' bytes; 0: what the budget leaves; too few: one layer's
                                ** experts, the least that streams */
    int expert_io_depth;        /* expert reads in flight at once (io_uring); 0: the default
                                ** (RAD_EXPERT_IO_DEPTH in docs/RESIDENCY.md); -1: one pread at a time */
    int expert_prefetch;        /* 0: a prefill reads the next layer's experts while this one
                                ** computes (with io_uring); -1: never ahead of need */
    FILE *expert_trace;         /* streamed experts: one JSON line per op that reads them (its
                                ** layer, rows, chosen, missed and read-ahead experts, the time
                                ** it waited), for offline study (tests/bench/replay_trace.py) */
} RadEngineOptions;

enum { RAD_COPIES_BACKGROUND = 0, RAD_COPIES_AT_OPEN = 1, RAD_COPIES_ON_WAIT = 2 };
enum { RAD_STREAM_AUTO = 0, RAD_STREAM_ON = 1, RAD_STREAM_OFF = -1 };

/* Open and prepare a model: load the kernel libraries and the plugin for its
** (arch, quant) pair, declare, select kernels, plan the arena and KV pool,
** map the weights.  On failure returns a RAD_E_* code with the message set
** (every declare problem at once) and *out stays NULL. */
int  rad_engine_open(const RadEngineOptions *opt, RadEngine **out);
void rad_engine_close(RadEngine *e);
/* Wait until every weight copy is made (and make the held ones, with
** RAD_COPIES_ON_WAIT).  Results never depend on it; speed may, so a
** benchmark waits before it measures.  rad_engine_copies_pending: copies
** not made yet. */
void rad_engine_wait_copies(RadEngine *e);
int  rad_engine_copies_pending(const RadEngine *e);

/* One line on how the model is held when it is not simply in memory (its
** experts streamed, and with what cache and reads; or paged from the file
** and why), for the app to print as "mode: ..."; NULL when there is
** nothing to say. */
const char *rad_engine_mode(const RadEngine *e);

const RadModelMeta *rad_engine_meta(const RadEngine *e);

/* The model's tokenizer (engine/text/rad_text.h), or NULL when the model
** carries none (it then runs from token ids only). */
struct RadText;
const struct RadText *rad_engine_text(const RadEngine *e);
int  rad_engine_n_vocab(const RadEngine *e);
int  rad_engine_max_ctx(const RadEngine *e);
int  rad_engine_threads(const RadEngine *e);
/* Positions a step may roll back (RadEngineOptions.max_spec). */
int  rad_engine_max_spec(const RadEngine *e);

/* Sequences.  A new sequence holds no positions. */
int  rad_engine_seq_new(RadEngine *e, int *seq);
void rad_engine_seq_free(RadEngine *e, int seq);
int  rad_engine_seq_len(const RadEngine *e, int seq);
/* Keep only the first n positions of a sequence (a conversation's shared
** prefix).  RAD_E_RANGE when a sliding-window layer already dropped what
** position n needs; then free the sequence and evaluate it again. */
int  rad_engine_seq_truncate(RadEngine *e, int seq, int n);

/* KV snapshots.  snapshot: a malloc'd blob (the model identity, then the
** cache of every position a later token can see) the caller frees.
** restore: into an empty sequence; RAD_E_FORMAT with a message when the blob
** is corrupt, truncated, from another model or build of it, or another KV
** encoding, and then nothing is changed.  The tokens the positions hold are
** the caller's to keep beside the blob. */
int  rad_engine_seq_snapshot(const RadEngine *e, int seq, void **out, size_t *size);
int  rad_engine_seq_restore(RadEngine *e, int seq, const void *data, size_t size);

/* A sha256 (64 hex characters) of what makes the model this model: its
** architecture, format, and every tensor's name, encoding, shape, size and
** leading bytes.  Keys snapshots and sessions. */
const char *rad_engine_model_id(const RadEngine *e);

/* The model's chat format, from its plugin (NULL when the plugin has none:
** the model is then used for raw completion only). */
struct RadChatFormat;
const struct RadChatFormat *rad_engine_chat_format(const RadEngine *e);

/* Append n tokens to a sequence and run them through the model in chunks of
** at most max_tok rows.  logits receives the last row's logits (n_vocab
** floats), or with logits_all every row's ([n, n_vocab]); NULL skips them.
** RAD_E_RANGE when the sequence would outgrow max_ctx (nothing is run). */
int  rad_engine_eval(RadEngine *e, int seq, const int32_t *tokens, int n, float *logits);

/* Which rows of a piece of work want their logits. */
typedef enum RadLogitsWanted {
    RAD_LOGITS_NONE = 0,
    RAD_LOGITS_LAST = 1,        /* the last row's: the next token */
    RAD_LOGITS_ALL = 2,         /* every row's (teacher forcing) */
    RAD_LOGITS_MASK = 3         /* the rows `mask` marks (verifying drafted tokens) */
} RadLogitsWanted;

/* Tokens to append to one sequence.  `out` receives the wanted rows'
** logits, in row order, n_vocab floats each. */
typedef struct RadSeqWork {
    int seq;
    const int32_t *tokens;
    int n;
    int logits;                 /* RadLogitsWanted */
    const uint8_t *mask;        /* RAD_LOGITS_MASK: [n], nonzero = wanted */
    float *out;
} RadSeqWork;

/* The work of several sequences, run together: one RadBatch per step over
** all of them, decode rows first, then prefill chunks (docs/SCHEDULING.md).
** Each sequence at most once.  A prompt whose leading blocks another
** sequence already computed shares them instead of running them again.  A
** row's result does not depend on which rows share its step (docs/OPS.md).
** RAD_E_RANGE before anything runs when a sequence would outgrow max_ctx;
** on a later failure the sequences keep what ran (rad_engine_seq_len). */
int  rad_engine_decode(RadEngine *e, RadSeqWork *work, int n_work);

/* Keep a checkpoint of a sequence's recurrent state (LINEAR and CONV
** groups) at its current length, so a later truncate to exactly this length
** works; attention KV needs none.  A conversation takes one at each turn's
** end. */
int  rad_engine_seq_checkpoint(RadEngine *e, int seq);

/* What the step scheduler has done so far: steps run, rows, and positions
** served by shared prefix blocks instead of being computed. */
typedef struct RadEngineStats {
    int64_t steps, rows, prefix_rows;
    /* streamed experts: runs read from the file, found in a slot, bytes read, slots */
    int64_t expert_loads, expert_hits, expert_bytes_read, expert_slots;
    /* their reads: requests in flight at most (0: one pread at a time), and
    ** the time steps waited for them, in nanoseconds */
    int64_t expert_io_depth, expert_wait_ns;
    int64_t expert_prefetches;  /* runs read ahead of need (counted in loads when they land) */
} RadEngineStats;
void rad_engine_stats(const RadEngine *e, RadEngineStats *out);

/* The whole resolved program (every op, its kernel per band, and why) and
** the memory plan term by term. */
void rad_engine_print_graph(const RadEngine *e, FILE *f);
void rad_engine_print_plan(const RadEngine *e, FILE *f);

/* Conversion of a Hugging Face folder into a .rad container at `quant`, any
** case: an encoding ("f32", "f16", "bf16", "q8_0", "q4_k", "q4_0") or one of
** llama.cpp's recipes ("q4_k_m", "q4_k_s", "q5_k_m", "q5_k_s", "q6_k"),
** driven by the plugin's name map.  Writes nothing at out_path unless it
** succeeds.  Progress lines go to `log`. */
int rad_convert_hf(const char *dir, const char *out_path, const char *quant,
                   const char *plugin_dir, FILE *log);
/* The same, recording `name` as the model's name (NULL: the folder's name). */
int rad_convert_hf_named(const char *dir, const char *out_path, const char *quant,
                         const char *plugin_dir, const char *name, FILE *log);

/* The canonical (lower-case) spelling of a --quant rad_convert_hf takes,
** or NULL; and the list of them, for messages. */
const char *rad_convert_quant_canonical(const char *quant);
const char *rad_convert_quant_list(void);

/* A GGUF file (all parts of a split set) into a .rad, tensors copied as
** stored: nothing is requantized. */
int rad_convert_gguf(const char *path, const char *out_path, FILE *log);

/* A GGUF container names its architecture (arch.gguf) but not the plugin
** family that serves it: fill arch.id and arch.hf_name, and the keys the
** family's files imply, from the installed plugins (rad_arch_gguf_families),
** as rad_engine_open does.  Other containers are left as they are.
** RAD_E_UNSUPPORTED, naming the architecture, when no plugin serves it. */
struct RadContainer;
int rad_container_resolve_family(struct RadContainer *c, const char *plugin_dir);

/* Check a container's metadata as rad_engine_open does before it declares
** anything (engine/meta_check.c): values, limits, layers against tensors.
** 0, or RAD_E_FORMAT with one line naming the key and the file.  A GGUF
** must have been through rad_container_resolve_family first. */
int rad_container_check_model(const struct RadContainer *c);

/* The tokenizer's vocabulary (text_vocab tokens) against the container's
** embedding rows, as rad_engine_open checks it once the tokenizer loaded:
** 0, or RAD_E_FORMAT naming the file (ids past the rows cannot be run). */
int rad_container_check_vocab(const struct RadContainer *c, int text_vocab);

/* The installed plugins and kernel libraries, one per line. */
int rad_list_plugins(const char *plugin_dir, FILE *f);
int rad_list_kernels(const char *plugin_dir, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* RADIANCE_H */
