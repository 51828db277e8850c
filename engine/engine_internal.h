/*
** engine_internal.h: the engine's own structures, shared by its modules and
** by the unit tests that pin them.  Nothing here is ABI: plugins see only
** rad_core.h, rad_arch.h and rad_kernel.h.
**
**   plugin.c   finding and loading .so files, the (id, quant) registry
**   build.c    the builder behind rad_decl_*: weights, buffers, KV, ops
**   select.c   kernel selection per band, the missing-kernel report
**   plan.c     the activation arena from liveness
**   kv.c       the paged KV cache
**   meta.c     RadModelMeta from the container's table; the metadata lookups
**   open.c     engine open/close and what can be asked of an engine
**   issue.c    rad_issue: operands bound, the band's kernel launched
**   sequence.c sequences, truncation, KV snapshots
**   step.c     rad_engine_eval: tokens into steps
**   convert.c  Hugging Face folder -> .rad, driven by the name map
*/
#ifndef RAD_ENGINE_INTERNAL_H
#define RAD_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "../arch/rad_arch.h"
#include "../formats/meta_table.h"
#include "../formats/rad_container.h"
#include "../kernels/rad_kernel.h"
#include "include/radiance.h"
#include "name_index.h"

/* ----------------------------------------------------------- plugin.c */

typedef struct RadArchPlugin {
    char *path;
    void *handle;
    const RadPluginInfo *info;          /* &info_copy */
    RadPluginInfo info_copy;            /* what the plugin's info holds, zero past its size */
    RadArchDeclareFn declare;
    RadArchStepFn step;
    RadArchReleaseFn release;
    RadArchHfNamesFn hf_names;          /* optional */
    RadArchGgufFamiliesFn gguf_families;/* optional */
    RadArchProbeFn probe;               /* optional */
    RadArchChatFormatFn chat_format;    /* optional */
} RadArchPlugin;

typedef struct RadKernelLib {
    char *path;
    void *handle;
    const RadKernelLibrary *lib;
} RadKernelLib;

typedef struct RadPluginSet {
    char *dir;
    int n_arch;
    RadArchPlugin *arch;
    int n_kernels;
    RadKernelLib *kernels;
} RadPluginSet;

/* The plugin folder: plugin_dir if given, else $RADIANCE_HOME/plugins, else
** the folder "plugins" beside the running binary, else ../lib/radiance/plugins
** relative to it.  Caller frees. */
char *rad_plugin_dir_resolve(const char *plugin_dir);
/* Load every arch/ *.so and kernels/ *.so under dir; a bad file is refused by
** name (ABI version, missing export, a pair claimed twice). */
int  rad_plugins_load(const char *dir, RadPluginSet *set);
void rad_plugins_free(RadPluginSet *set);
/* The process's shared set for dir, loaded on first use (see plugin.c):
** what engines use.  Release once per acquire; the last unloads it. */
int  rad_plugins_acquire(const char *dir, const RadPluginSet **out);
void rad_plugins_release(const RadPluginSet *set);
const RadArchPlugin *rad_plugins_find(const RadPluginSet *set, const char *id, const char *quant);
/* The plugin whose rad_arch_hf_names lists hf_arch, or NULL. */
const RadArchPlugin *rad_plugins_find_hf(const RadPluginSet *set, const char *hf_arch);
/* A GGUF file's table names its architecture (arch.gguf) but no plugin
** family: set arch.id and arch.hf_name from the plugin that lists that
** architecture in rad_arch_gguf_families, and the keys its files imply.
** RAD_E_UNSUPPORTED, naming it, when no plugin does; a table that already
** names its family is left alone. */
int rad_plugins_resolve_gguf(const RadPluginSet *set, RadMetaTable *t, const char *path);
/* The order used when none is asked for: every installed library, by its
** `preference` (higher first; cpu,ref today).  The string lives until the
** next call on this thread. */
const char *rad_plugins_default_order(const RadPluginSet *set);
/* Resolve a comma-separated library order ("cpu,ref") to libraries. */
int  rad_plugins_kernel_order(const RadPluginSet *set, const char *order,
                              const RadKernelLibrary **libs, int max, int *n);

/* ----------------------------------------------------------- select.c */

#define RAD_MAX_BANDS 16

/* One band [lo, hi] of an op's ranged parameter and the row serving it. */
typedef struct RadBand {
    int64_t lo, hi;
    const RadKernelRow *row;            /* NULL: no library serves this band */
    int lib;                            /* index into the library order */
    char why[160];                      /* how it was chosen, or why nothing was */
} RadBand;

/* The schema for op in the first library that has one, or NULL. */
const RadOpSchema *rad_select_schema(const RadKernelLibrary *const *libs, int n_libs,
                                     const char *op);
/* Check params against schema (names, kinds, exactly one RANGE).  Fills
** values[] in schema order and *range_index; message set on failure. */
int rad_select_bind_params(const RadOpSchema *s, const RadParam *params, int n,
                           RadParam *ordered, int *range_index);
/* Cut the ranged parameter into bands at every edge the candidate rows name
** and resolve each: library order first, then priority.  Returns the number
** of bands (>= 1) or a negative code. */
int rad_select_bands(const RadKernelLibrary *const *libs, int n_libs, const char *op,
                     const RadParam *ordered, int n_params, int range_index,
                     RadBand *bands, int max_bands);

/* ------------------------------------------------------------- plan.c */

typedef struct RadPlanItem {
    int64_t bytes;
    int first, last;        /* op indices of first and last use; first < 0 = whole step */
    int persist;            /* never shares bytes */
    int64_t offset;         /* out: where it lives in the arena */
} RadPlanItem;

/* Give every item an offset so that items whose lifetimes overlap never
** share bytes; returns the arena size.  Offsets are `align`-aligned. */
int64_t rad_plan_arena(RadPlanItem *items, int n, int64_t align);

/* -------------------------------------------------------------- build.c */

/* One kernel layout of a weight (rad_kernel.h, relayout), made at load. */
typedef struct RadRelayoutCopy {
    int (*relayout)(const RadTensor *weight, void *dst);    /* which layout */
    void *data;
    size_t bytes;
    atomic_int ready;                   /* written in full: until then launches get the stored bytes */
} RadRelayoutCopy;

typedef struct RadWeightEntry {
    char *name;
    RadWeightDecl d;
    char *source;                       /* view of this weight, or NULL */
    int map_mode;                       /* 0 = no map entry */
    char **map_sources;
    int n_map_sources;
    int map_flags;                      /* RAD_MAP_TRANSPOSED, RAD_MAP_ROWS_* (COPY only) */
    int present;                        /* found in the container */
    int enc;                            /* as stored */
    const void *data;                   /* mapped bytes (NULL when stored as slices) */
    const void **slice_data;            /* a stack stored slice by slice (NAME@e records of a
                                        ** .rad: each expert apart, in its own group), or NULL */
    int64_t row_bytes;
    RadRelayoutCopy *copies;            /* kernels' private layouts of it */
    int n_copies;
    int streamed;                       /* its slices are read into expert slots as chosen (experts.c) */
} RadWeightEntry;

typedef struct RadBufferEntry {
    char *name;
    RadBufferDecl d;
    char *derive;
    int64_t row_bytes, bytes;
    int first, last;                    /* op indices from reads/writes; -1 = none */
    int64_t offset;
    void *data;
} RadBufferEntry;

typedef struct RadKvGroupEntry {
    char *name;
    RadKvGroupDecl d;
} RadKvGroupEntry;

typedef struct RadOpEntry {
    char *op;
    const RadOpSchema *schema;
    RadParam params[RAD_MAX_PARAMS];    /* in schema order */
    int n_params, range_index;
    int n_bands;
    RadBand bands[RAD_MAX_BANDS];
    rad_weight *weights;
    int n_weights;
    rad_buf *uses;                      /* declared reads and writes */
    int n_uses;
    int missing;                        /* some band has no kernel */
    int asked;                          /* the plugin asked rad_op_resolved, so a
                                        ** miss is its to handle, not an error */
} RadOpEntry;

typedef enum RadBuildMode {
    RAD_BUILD_RUN = 1,                  /* weights from a container, kernels selected */
    RAD_BUILD_CONVERT = 2               /* weights to be written; no selection */
} RadBuildMode;

struct RadBuilder {
    int mode;
    const RadModelMeta *meta;
    const RadBuildCtx *ctx;
    const RadContainer *container;      /* RUN mode */
    const RadKernelLibrary *const *libs;
    int n_libs;

    RadWeightEntry *weights; int n_weights, cap_weights;
    RadBufferEntry *buffers; int n_buffers, cap_buffers;
    RadKvGroupEntry *kv; int n_kv, cap_kv;
    RadOpEntry *ops; int n_ops, cap_ops;
    rad_kv *layer_kv; int n_layer_kv;
    rad_buf logits;
    int kv_block_size;

    char **problems; int n_problems;    /* reported together when declare ends */
    int oom;                            /* an allocation failed: finish says RAD_E_NOMEM */
    int declare_failed;                 /* the plugin's declare returned an error */
    char **notes; int n_notes;

    RadNameIndex weight_index;          /* name -> weight */
    RadNameIndex buffer_index;          /* name -> buffer */
    char **alias_from, **alias_to;      /* rad_decl_name_alias */
    int n_aliases;
};

void rad_builder_init(RadBuilder *b, int mode, const RadModelMeta *meta, const RadBuildCtx *ctx);
void rad_builder_free(RadBuilder *b);
/* Checks that need the whole declaration (logits declared, every layer bound,
** weights present): adds problems.  Then 0, or RAD_E_* with every problem in
** the message, one per line. */
int  rad_builder_finish(RadBuilder *b, const char *what);
rad_weight rad_builder_find_weight(const RadBuilder *b, const char *name);

/* RadModelMeta from a metadata table (canonical keys "model.n_layers"...). */
int  rad_meta_from_table(const RadMetaTable *t, RadModelMeta *m, const char *path);

/* meta_check.c: the metadata checked before anything is declared from it
** (values, the layers against the container's tensors, the tokenizer against
** the embedding).  0 or RAD_E_FORMAT with one line naming the key and file. */
int  rad_meta_check(const RadModelMeta *m, const char *path);
int  rad_meta_check_layers(const RadModelMeta *m, const RadContainer *c, const char *path);
int  rad_meta_check_vocab(const RadModelMeta *m, int text_vocab, const char *path);

/* The graph for --debug-graph. */
void rad_builder_print_graph(const RadBuilder *b, const RadKernelLibrary *const *libs, FILE *f);


/* ------------------------------------------------------------ relayout.c */

struct RadPool;
/* The stored bytes of weight w as a kernel operand. */
void rad_weight_tensor(const RadWeightEntry *w, RadTensor *t);

/* The .rad record name of slice e of the stacked weight `name`: "NAME@e".
** A converted MoE layer stores each expert's slices of its stacks as records
** of their own, gate, up and down of one expert together in its movement
** group, so one aligned read fetches one expert (docs/FORMAT.md).  Returns
** the length written, or -1 when buf is too small. */
#define RAD_SLICE_SEPARATOR '@'
int rad_slice_name(char *buf, size_t size, const char *name, int64_t e);
/* The copy of w that `row` made at load, or NULL. */
const RadRelayoutCopy *rad_relayout_copy(const RadWeightEntry *w, const RadKernelRow *row);
/* One copy a selected row asks for: the planner (residency.c) chooses. */
typedef struct RadRelayoutJob {
    const RadKernelRow *row;
    RadWeightEntry *w;
    RadTensor stored;
    size_t bytes;                       /* of the copy */
    int64_t stored_bytes;               /* of the weight as mapped */
    int releases;                       /* on one job per weight: nothing reads it as stored after */
    int next;                           /* the weight's previous job, or -1 */
    int chosen;                         /* the planner's decision */
    void *dst;
    int rc;
    int owner;                          /* the weight's releasing job, or -1: it gives the pages back */
    atomic_int left;                    /* on the releasing job: the weight's copies still being made */
    atomic_int pieces_left;             /* of this copy, still being written (relayout.c splits large ones) */
    atomic_int piece_rc;                /* the first failure among them */
    int later;                          /* made after the model opens (relayout_same_bits rows) */
    int copy;                           /* its entry in w->copies */
} RadRelayoutJob;

/* A run of a copy's rows that one task writes (the whole copy when its row
** cannot split it). */
typedef struct RadRelayoutPiece {
    int job;
    int64_t row0, rows;                 /* rows = 0: the whole weight */
    size_t offset;                      /* into the job's copy */
} RadRelayoutPiece;

typedef struct RadRelayoutList {
    RadRelayoutJob *job;
    int n, cap;
    RadRelayoutPiece *piece;
    int n_pieces;
} RadRelayoutList;

/* The copies made after the model opens: their jobs and pieces, and the
** thread that writes them (relayout.c). */
typedef struct RadRelayoutLater {
    RadRelayoutList list;               /* pieces [first, list.n_pieces) are the later ones */
    int first;
    pthread_t thread;
    int started, joined;
    atomic_int stop;
} RadRelayoutLater;

/* Every copy the selected rows ask for, one per (weight, relayout function). */
int  rad_relayout_list(RadBuilder *b, RadRelayoutList *list);
void rad_relayout_list_free(RadRelayoutList *list);
/* Make the chosen copies on `pool`; a weight that only its copies serve
** gives its mapped pages back as soon as its last copy is written, so the
** load never holds much more than the plan (docs/RESIDENCY.md). */
int  rad_relayout_make(RadBuilder *b, struct RadPool *pool, RadRelayoutList *list, int mode,
                       RadRelayoutLater **later);
/* Stop (stop = 1) or finish the later copies, then free them; NULL is fine. */
void rad_relayout_later_finish(RadRelayoutLater *later, int stop);
void rad_relayout_later_free(RadRelayoutLater *later);

/* ---------------------------------------------------------- residency.c */

/* The memory plan, term by term (residency.c, docs/RESIDENCY.md). */
typedef struct RadResidency {
    int64_t budget;                     /* -1 when nothing says how much memory there is */
    const char *budget_from;
    int64_t system_available, cgroup_limit, floor;
    int64_t weights_total;              /* every tensor the file holds, mapped */
    int64_t experts;                    /* of them, routed experts (CONDITIONAL) */
    int n_expert_slices;                /* their movement units (slices of stacks) */
    int64_t weights_released;           /* mapped bytes given back once their copies exist */
    int64_t copies, copies_skipped;
    int n_copies, n_skipped;
    int64_t kv, arena, scratch;
    int64_t resident;                   /* what the plan keeps in memory */
    char why[320];                      /* why copies were left out, when they were */
    int64_t expert_cache;               /* bytes of expert slots when streaming, else 0 */
    char mode[480];                     /* the one line the user is told (rad_engine_mode), or "" */
} RadResidency;

struct RadEngine;
/* Place the weights under the budget and make the copies chosen. */
int  rad_residency_plan(struct RadEngine *e);
void rad_residency_print(const struct RadEngine *e, FILE *f);


/* ---------------------------------------------------------------- kv.c */

/* The KV cache and the other per-sequence state (kv.c says how it works).
** A paged group (FULL, WINDOW) owns a pool of blocks shared by the layers
** bound to it (block b of layer l lives in that layer's storage at b) and by
** every sequence; a state group (LINEAR, CONV) owns two slots per sequence
** and bound layer, the live state and a checkpoint. */
typedef struct RadKvGroupState {
    RadKvGroupDecl d;
    int enc;                        /* the K/V or the state encoding */
    int n_layers;
    int *layers;                    /* model layers bound here */
    void **k, **v;                  /* per bound layer: paged [n_blocks * block_size, row]; state: k = slots */
    /* paged groups */
    int block_size;
    int64_t row_bytes;              /* one position's K (or V): n_head_kv * head_dim */
    int n_blocks;
    int32_t *refs;                  /* [n_blocks] sequences holding each block */
    uint64_t *hash;                 /* [n_blocks] prefix hash of a full block; 0 = none */
    uint64_t *parent;               /* [n_blocks] the hash of the prefix before it */
    int32_t *tokens;                /* [n_blocks, block_size] the tokens it holds, to confirm a hit */
    int32_t *free_next, *free_prev; /* free blocks, oldest first */
    int free_head, free_tail, n_free;
    int index_cap;                  /* the hash -> block index, open addressing */
    uint64_t *index_key;
    int32_t *index_block;
    /* state groups */
    int64_t state_bytes;            /* one slot */
    int n_slots;                    /* 2 * max_seqs: sequence q's state, then its checkpoint at max_seqs + q */
} RadKvGroupState;

typedef struct RadKvSeq {
    int used;
    int len;                        /* positions stored */
    int32_t **table;                /* per paged group: [max_blocks] block ids, -1 = none */
    int32_t *tokens;                /* [max_ctx] what the positions hold */
    uint64_t *block_hashes;         /* [max_blocks] prefix hash of each full block */
    int hashable;                   /* 0 after a restore: the tokens are not known */
    int checkpoint_len;             /* the length the state checkpoint describes; -1 = none */
} RadKvSeq;

typedef struct RadKvPool {
    int n_groups;
    RadKvGroupState *groups;
    int block_size;
    int max_seqs, max_ctx, max_blocks, max_spec;
    RadKvSeq *seqs;
    int n_layers;
    int *layer_group;               /* model layer -> group */
    int *layer_slot;                /* model layer -> index in its group's layers */
    int64_t bytes;                  /* everything allocated, for the plan */
    int64_t attached;               /* positions served by shared prefixes so far */
} RadKvPool;

typedef struct RadKvOptions {
    int max_seqs, max_ctx, max_tok;
    int max_spec;                   /* positions a rollback may undo */
    int kv_enc;
    int64_t positions;              /* paged positions shared by all sequences; 0 = max_seqs * max_ctx */
} RadKvOptions;

int  rad_kv_pool_init(RadKvPool *p, const RadBuilder *b, const RadKvOptions *o);
void rad_kv_pool_free(RadKvPool *p);
int  rad_kv_seq_new(RadKvPool *p, int *seq);
void rad_kv_seq_free(RadKvPool *p, int seq);
/* Make room for positions [len, new_len) of seq: blocks taken from the
** shared pool, a shared block copied before it is written.  RAD_E_RANGE
** (nothing changed) past max_ctx or when the pool is out of blocks. */
int  rad_kv_reserve(RadKvPool *p, int seq, int new_len);
/* Record that seq now holds n more positions, `tokens`: full blocks are
** hashed and become shareable; WINDOW groups give back blocks out of reach
** of every query after a rollback of up to max_spec positions. */
void rad_kv_commit(RadKvPool *p, int seq, const int32_t *tokens, int n);
/* Drop positions [new_len, len) of seq.  RAD_E_RANGE (nothing changed)
** when a sliding window already let go of a position a query at new_len
** would need, or a state group cannot be rewound there (only to 0, or to
** the length of its checkpoint): the caller must re-run the sequence. */
int  rad_kv_truncate(RadKvPool *p, int seq, int new_len);
/* Keep a copy of seq's state (LINEAR/CONV) at its current length. */
int  rad_kv_checkpoint(RadKvPool *p, int seq);
/* 1 when the model keeps state that cannot be shared or cut (LINEAR/CONV). */
int  rad_kv_has_state(const RadKvPool *p);
/* An empty seq about to hold `tokens`: attach the longest run of whole
** blocks other sequences (or freed, still cached blocks) computed for the
** same prefix.  Returns the positions attached (a multiple of the block
** size, 0 when none); seq then holds them. */
int  rad_kv_attach_prefix(RadKvPool *p, int seq, const int32_t *tokens, int n);
int  rad_kv_blocks_in_use(const RadKvPool *p, int group);
/* A sequence's cache as bytes (every position a later query can see, per
** layer; every state) and back into an empty sequence.  Restore checks the
** whole blob against this pool before writing anything. */
int64_t rad_kv_snapshot_bytes(const RadKvPool *p, int seq);
int  rad_kv_snapshot(const RadKvPool *p, int seq, void *out, int64_t size);
int  rad_kv_restore(RadKvPool *p, int seq, const void *data, int64_t size);
/* Copy paged group g's block tables of sequences seqs[0..n_seq) into table
** (n_seq * max_blocks entries); once per group per step. */
void rad_kv_fill_table(const RadKvPool *p, int g, const int *seqs, int n_seq, int32_t *table);
/* A layer's view for a step, over its group's filled table (paged) or the
** step's sequences' state slots (state groups). */
void rad_kv_view(const RadKvPool *p, int layer, const int32_t *table, const int32_t *state_slots, int n_seq,
                 const RadBatch *batch, RadKvView *out);

/* ------------------------------------------------ the engine (open.c) */

#include "pool.h"
#include "text/rad_text.h"

#define MAX_LIBS 8

struct RadEngine {
    RadEngineOptions opt;
    const RadPluginSet *plugins;        /* shared by the process's engines */
    const RadKernelLibrary *libs[MAX_LIBS];
    int n_libs;
    RadContainer *container;
    RadModelMeta meta;
    const RadArchPlugin *plugin;
    void *instance;             /* the plugin's state for this model (rad_arch.h) */
    RadBuildCtx ctx;
    RadBuilder b;
    uint8_t *arena;
    int64_t arena_bytes;
    RadKvPool kv;
    RadText *text;              /* NULL when the model has no tokenizer */
    /* Step scratch, sized at open so a step never allocates. */
    int32_t *step_tokens, *positions, *token_seq, *out_ids;    /* [max_tok] */
    int32_t *cu_seqlens;                                        /* [max_seqs + 1] */
    int32_t *seq_ids, *state_slots;                             /* [max_seqs] */
    int32_t *kv_tables;             /* [n_groups, max_seqs, max_blocks] */
    struct RadSchedItem *step_items;/* [max_seqs] */
    RadKvView *views;               /* [n_layers] */
    RadEngineStats stats;
    RadPool *pool;              /* -t threads for host kernels, shared by the engines asking that many */
    void *scratch;              /* the largest scratch any selected row asks for */
    char model_id[65];          /* sha256 hex of what makes this model this model */
    size_t scratch_bytes;
    RadResidency residency;             /* where the bytes live (residency.c) */
    RadRelayoutLater *copies_later;     /* copies still being made after open (relayout.c) */
    struct RadExperts *experts;         /* the expert cache when streaming, or NULL (experts.c) */
    void *trunk;                        /* the dense part read into memory when streaming (trunk.c) */
    size_t trunk_bytes;                 /* its mapping's length (the file's size) */
    uint64_t trunk_read;                /* bytes read into it */
};

/* ------------------------------------------- streamed experts (experts.c) */

typedef struct RadExperts RadExperts;
/* The expert runs of the file, for streaming them (residency.c decides
** when): marks the streamed weights, which get no kernel copies.  *out stays
** NULL for a model without routed experts; RAD_E_UNSUPPORTED for stacks
** stored whole (GGUF), RAD_E_FORMAT for a damaged layout. */
int  rad_experts_open(RadEngine *e, RadExperts **out);
/* Streaming on: n_slots slots (at least rad_experts_min_slots, one layer's
** experts; at most one per expert), the file opened for reads and the reads
** set up (opt.expert_io_depth). */
int  rad_experts_start(RadExperts *x, RadEngine *e, int64_t n_slots);
int64_t rad_experts_slot_bytes(const RadExperts *x);
int  rad_experts_min_slots(const RadExperts *x);
int  rad_experts_count(const RadExperts *x);        /* experts in the file */
int64_t rad_experts_slots(const RadExperts *x);     /* slots made by rad_experts_start */
void rad_experts_describe(const RadExperts *x, char *out, size_t n);     /* cache, O_DIRECT, reads */
void rad_experts_free(RadExperts *x);
/* Before an op runs: the experts its first `rows` rows chose made resident,
** and its streamed stack operands pointed at them through RadTensor.slices. */
int  rad_experts_bind(RadExperts *x, const RadBuilder *b, const RadOperand *operands, int n, int64_t rows,
                      RadKernelArgs *a);
void rad_experts_stats(const RadExperts *x, RadEngineStats *s);
void rad_experts_print(const RadExperts *x, FILE *f);

/* ------------------------------------------------- the trunk (trunk.c) */

/* With the experts streamed: every other weight's bytes read once into
** anonymous memory (O_DIRECT where taken) and its data pointed there. */
int  rad_trunk_read(RadEngine *e);
void rad_trunk_free(RadEngine *e);

/* ------------------------------------------- expert reads (expert_io.c) */

/* Expert reads in flight by default: enough to keep a drive's queue full
** for one op's misses (docs/RESIDENCY.md, "Streaming the experts"). */
#define RAD_EXPERT_IO_DEPTH 8

typedef struct RadExpertIo RadExpertIo;
typedef struct RadExpertRead {
    unsigned char *dst;                 /* inside slot `buffer` (or any buffer when -1) */
    uint64_t offset;
    size_t bytes;
    int buffer;                         /* index among the buffers given to open, or -1 */
} RadExpertRead;
/* Called once per read started: rc 0 when all its bytes landed, else
** RAD_E_IO with the message set (the file, the offset, the cause). */
typedef void (*RadExpertIoDone)(void *arg, uint64_t tag, int rc);
/* Reads from fd with up to `depth` requests in flight through io_uring (the
** buffers registered as its fixed buffers when the kernel allows); depth 0,
** or no io_uring, reads each with pread() inside start.  Never fails for
** lack of io_uring: rad_expert_io_kind says which was had. */
int  rad_expert_io_open(int fd, const char *path, int depth, unsigned char *const *buffers, int n_buffers,
                        size_t buffer_bytes, RadExpertIoDone done, void *arg, RadExpertIo **out);
/* Waits for the reads in flight first: no read lands after the call. */
void rad_expert_io_free(RadExpertIo *io);
/* Start one read (waiting for one in flight to finish when `depth` are). */
int  rad_expert_io_start(RadExpertIo *io, const RadExpertRead *read, uint64_t tag);
/* Wait until one read in flight finishes (its callback has run); at once
** when none is in flight.  An error only when the ring itself fails. */
int  rad_expert_io_wait(RadExpertIo *io);
int  rad_expert_io_busy(const RadExpertIo *io);     /* reads in flight */
const char *rad_expert_io_kind(const RadExpertIo *io);
int  rad_expert_io_depth(const RadExpertIo *io);    /* requests in flight at most; 0: pread */

struct RadCtx {
    RadEngine *e;
    const RadBatch *batch;
    int status;
    rad_op last_op;
};

#endif /* RAD_ENGINE_INTERNAL_H */
