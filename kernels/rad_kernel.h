/*
** rad_kernel.h: the kernel-library ABI.
**
** A kernel library is a .so that exports two tables: the op schemas it knows
** (the vocabulary of docs/OPS.md: typed parameters, operands with roles) and
** its kernel rows (which op, under which constraints on the parameters, at
** what priority, and the function that runs it).  The core owns selection:
** libraries are tried in a fixed order (cuda, cpu, ref by default) and the
** first library with a matching row supplies the op; inside one library the
** highest priority wins.  A kernel never allocates activations; it receives
** resolved tensors and writes its outputs in place.
**
** The one RAD_PARAM_RANGE parameter of an op (the row count M) is banded: the
** core cuts its declared range at every edge the rows' constraints name and
** resolves each band separately, so decode (M = 1) and prefill (M = 512) may
** run different kernels.  EQ/LE/GE constraints may name the ranged parameter;
** DIV and IN may not (they do not cut a range into bands).
**
** How this ABI grows (the same rule as rad_arch.h's):
**   - RAD_KERNEL_ABI_VERSION changes only for a change that breaks libraries
**     already built: a field moved or changed meaning, a limit below changed.
**     The core refuses a library of any other version, naming both numbers.
**   - Everything else grows at the end of a struct.  A struct the library
**     hands the core says how big it was when the library was built
**     (RadKernelLibrary.struct_size; rows[] and schemas[] are strided by
**     row_size and schema_size), and the core reads only that much, treating
**     the rest as zero: a new field's zero must mean "absent" or "off".  A
**     struct the core hands a kernel (RadKernelArgs, RadKvView) carries the
**     core's struct_size; a kernel built earlier reads its own prefix.
**   - Structs embedded by value in an array of their parent (RadTensor in
**     RadKernelArgs, RadConstraint, RadParamSchema, RadOperandSchema) are
**     frozen within a version.
*/
#ifndef RAD_KERNEL_H
#define RAD_KERNEL_H

#include "../base/rad_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RAD_KERNEL_ABI_VERSION 3
/* Room for the largest op known (rope with YaRN has 15 parameters; a row
** that lists every encoding needs 16 IN values). */
#define RAD_MAX_PARAMS 24
#define RAD_MAX_OPERANDS 12
#define RAD_MAX_CONSTRAINTS 8
#define RAD_MAX_IN_VALUES 32

/* ------------------------------------------------------------- schemas */

typedef enum RadParamType {
    RAD_PARAM_INT = 1,      /* fixed at declare time */
    RAD_PARAM_FLOAT = 2,    /* fixed at declare time */
    RAD_PARAM_RANGE = 3     /* an int known per step within [lo, hi]: the rows */
} RadParamType;

typedef enum RadOperandRole {
    RAD_ROLE_IN = 1,        /* an activation the op reads */
    RAD_ROLE_OUT = 2,       /* an activation the op writes */
    RAD_ROLE_INOUT = 3,     /* read and written in place */
    RAD_ROLE_WEIGHT = 4,    /* a weight from the container */
    RAD_ROLE_KV = 5,        /* a layer's view of the paged KV cache */
    RAD_ROLE_INDEX = 6      /* host int32 data from the batch (ids, positions) */
} RadOperandRole;

typedef struct RadParamSchema {
    const char *name;
    int type;               /* RadParamType */
} RadParamSchema;

typedef struct RadOperandSchema {
    const char *name;
    int role;               /* RadOperandRole */
    int optional;           /* may be absent (a bias) */
} RadOperandSchema;

typedef struct RadOpSchema {
    const char *op;                         /* "gemm_nt" */
    int n_params;
    RadParamSchema params[RAD_MAX_PARAMS];
    int n_operands;
    RadOperandSchema operands[RAD_MAX_OPERANDS];
} RadOpSchema;

/* ------------------------------------------------------------ launching */

/* A resolved operand.  Activations are row-major [rows, cols] with rows
** `row_bytes` apart; shape[0] is the buffer's capacity in rows, and the
** step's row count is the op's ranged parameter M.  Weights use GGUF's convention
** inverted to PyTorch's: shape[0] is the output dimension (rows), shape[1]
** the input dimension; a row of a quantized weight is whole blocks. */
typedef struct RadTensor {
    void *data;             /* NULL for an absent optional operand */
    int enc;                /* RadEncoding */
    int rank;
    int64_t shape[4];       /* outermost first, as PyTorch */
    int64_t row_bytes;      /* bytes from one row (dim 0 index) to the next */
    int layout;             /* weights: RAD_LAYOUT_STORED, or RAD_LAYOUT_KERNEL when the
                            ** data is the launching row's own relayout copy */
    /* Stacked weights ([n_slices, rows, cols]: a MoE layer's experts).  NULL
    ** slices: slice e is at data + e * slice_bytes.  Otherwise slices[e] is
    ** where slice e lives (streamed experts sit in cache slots, not in one
    ** run), and slice_layout[e] (when not NULL) its RAD_LAYOUT_*, since
    ** resident and streamed experts of one step may be laid out differently. */
    int64_t n_slices;
    int64_t slice_bytes;
    const void *const *slices;
    const uint8_t *slice_layout;
} RadTensor;

enum { RAD_LAYOUT_STORED = 0, RAD_LAYOUT_KERNEL = 1 };

/* One layer's view of the paged KV cache, prepared by the core each step.
** Position p of batch sequence s lives in slot
**   block_table[s * max_blocks + p / block_size] * block_size + p % block_size
** and a slot's key is k + slot * kv_row_bytes (n_head_kv * head_dim elements
** of encoding `enc`), its value likewise in v. */
typedef struct RadKvView {
    int struct_size;                /* the core's sizeof(RadKvView) */
    void *k, *v;
    int enc;                        /* RAD_ENC_F16 or RAD_ENC_F32 */
    int block_size;
    int n_head_kv, head_dim;
    int64_t kv_row_bytes;
    int window;                     /* the group's window (0 = all); informational: the
                                    ** attention op's own `window` parameter decides */
    int n_seq;                      /* sequences in this step */
    int max_blocks;                 /* columns of block_table */
    const int32_t *block_table;     /* [n_seq, max_blocks]; -1 = not allocated */
    int n_tok;                      /* rows in this step */
    const int32_t *token_seq;       /* [n_tok] batch sequence of each row */
    const int32_t *positions;       /* [n_tok] absolute position of each row */
    /* LINEAR and CONV groups (k, v, block_table unused): batch sequence s
    ** reads and writes its state at state + state_slot[s] * state_bytes,
    ** state_rows x state_cols elements of state_enc.  The state describes
    ** the sequence at the position of its first row in this step. */
    int kind;                       /* the group's RadKvKind (rad_core.h) */
    void *state;
    int64_t state_bytes;
    const int32_t *state_slot;      /* [n_seq] */
    int state_enc;
    int64_t state_rows, state_cols;
} RadKvView;

/* The argument block a kernel receives.  Parameters arrive in schema order
** (ints as `i`, floats as `f`, the ranged one resolved to this step's value);
** operands in schema order too.  Host kernels may split their work over
** `pool` (NULL: run on the calling thread); device kernels get `stream`. */
typedef struct RadKernelArgs {
    int struct_size;
    const RadOpSchema *schema;
    union { int64_t i; double f; } param[RAD_MAX_PARAMS];
    RadTensor operand[RAD_MAX_OPERANDS];
    const RadKvView *kv;            /* the RAD_ROLE_KV operand's view, if any */
    void *scratch;                  /* `scratch_bytes(args)` bytes, or NULL */
    void *pool;                     /* the core's thread pool (host domain) */
    int n_threads;
    /* Run fn(ctx, t) for t in [0, n_tasks) on the pool and return when all
    ** are done; with pool == NULL it runs them in order on this thread. */
    void (*parallel_for)(void *pool, int n_tasks,
                         void (*fn)(void *ctx, int task), void *ctx);
    void *stream;                   /* device domain */
    /* Every RAD_ROLE_KV operand's view, by operand index (NULL for the
    ** others); `kv` above is the first of them. */
    const RadKvView *kv_operand[RAD_MAX_OPERANDS];
} RadKernelArgs;

typedef int (*RadKernelLaunch)(const RadKernelArgs *args);

/* ---------------------------------------------------------- kernel rows */

typedef enum RadConstraintKind {
    RAD_C_EQ = 1,           /* param == v */
    RAD_C_LE = 2,           /* param <= v */
    RAD_C_GE = 3,           /* param >= v */
    RAD_C_DIV = 4,          /* param % v == 0 */
    RAD_C_IN = 5            /* param is one of values[0..n_values) */
} RadConstraintKind;

typedef struct RadConstraint {
    const char *param;      /* a parameter name of the op's schema */
    int kind;               /* RadConstraintKind */
    int64_t v;
    int n_values;
    int64_t values[RAD_MAX_IN_VALUES];
} RadConstraint;

typedef enum RadDomain { RAD_DOMAIN_HOST = 1, RAD_DOMAIN_DEVICE = 2 } RadDomain;

typedef struct RadKernelRow {
    const char *op;                 /* the op it serves */
    const char *name;               /* unique within the library: "gemm_nt_q8_0" */
    int n_constraints;
    RadConstraint constraints[RAD_MAX_CONSTRAINTS];
    int priority;                   /* higher wins inside one library */
    int domain;                     /* RadDomain */
    int kv_block_size;              /* attention rows: the KV block they read; 0 = none */
    RadKernelLaunch launch;
    /* Optional: the scratch bytes a launch needs.  Asked once, when the model
    ** opens, for each band the row serves, with the parameters filled (M at
    ** the band's upper edge), n_threads set and no operands; a launch then
    ** gets at least that much in args->scratch, shared by its tasks. */
    size_t (*scratch_bytes)(const RadKernelArgs *args);
    /* Optional weight relayout: at load the core gives each weight an op
    ** declares (RAD_OP's weights) to the relayout_bytes of every row selected
    ** for the op (0 = keep as stored), then to relayout, which writes the
    ** kernel's own layout into `dst` (64-byte aligned).  The row's launches
    ** then get that copy with layout = RAD_LAYOUT_KERNEL.  Rows sharing one
    ** relayout function share one copy; other ops reading the same weight
    ** (an embedding tied to the output) still get the stored bytes.  The
    ** copies are counted in the memory plan; the container stays canonical. */
    size_t (*relayout_bytes)(const RadTensor *weight);
    int (*relayout)(const RadTensor *weight, void *dst);
    /* grown in ABI 3 (zero = off) */
    int slices_ok;                  /* reads a stacked weight's slices through RadTensor.slices,
                                    ** wherever each lives (streamed experts); 0 = contiguous only */
    int relayout_rows;              /* the relayout is row-local in runs of this many rows: the
                                    ** copy of rows [a, b) of a 2-D weight (a, b multiples of it)
                                    ** is bytes relayout_bytes(rows [0, a)) .. relayout_bytes(rows
                                    ** [0, b)) of the whole copy, so the core may write one large
                                    ** copy on every thread at once; 0 = whole weights only */
    int relayout_same_bits;         /* a launch gives the same bits from the stored weight as
                                    ** from this row's copy of it, so the core may launch on the
                                    ** stored bytes until the copy is made (a large copy is then
                                    ** made after the model opens); 0 = the copy comes first */
} RadKernelRow;

/* What a library exports, as one symbol: `rad_kernel_library`. */
typedef struct RadKernelLibrary {
    int abi_version;                /* RAD_KERNEL_ABI_VERSION */
    int struct_size;                /* sizeof(RadKernelLibrary) as built */
    int schema_size;                /* sizeof(RadOpSchema): the stride of schemas[] */
    int row_size;                   /* sizeof(RadKernelRow): the stride of rows[] */
    const char *name;               /* "ref", "cpu", "cuda" */
    const char *description;
    int n_schemas;
    const RadOpSchema *schemas;
    int n_rows;
    const RadKernelRow *rows;
    int (*init)(void);              /* optional: once, after dlopen */
    void (*fini)(void);             /* optional */
    /* grown in ABI 3 (zero = unset) */
    int preference;                 /* where it goes in the default order: higher first (a GPU
                                    ** library 100, a SIMD one 50, the reference 1); 0 counts as 10 */
} RadKernelLibrary;

#define RAD_KERNEL_LIBRARY_SYMBOL "rad_kernel_library"

/* The first four fields of a library table, as this header builds them:
**   const RadKernelLibrary rad_kernel_library = { RAD_KERNEL_LIBRARY_SIZES, .name = "ref", ... }; */
#define RAD_KERNEL_LIBRARY_SIZES                                                    \
    .abi_version = RAD_KERNEL_ABI_VERSION, .struct_size = (int)sizeof(RadKernelLibrary), \
    .schema_size = (int)sizeof(RadOpSchema), .row_size = (int)sizeof(RadKernelRow)

#ifdef __cplusplus
}
#endif
#endif /* RAD_KERNEL_H */
