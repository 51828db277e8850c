/*
** recording_builder.h: a test double for the core, for architecture-plugin
** tests.
**
** An architecture plugin talks to the core only through the functions in
** engine/include/rad_core.h.  recording_builder.c implements every one of
** them, but instead of selecting kernels, planning an arena or running
** anything, it writes down what the plugin asked for: each declaration and
** each issue becomes one canonical line of text in a log, and the same facts
** are kept in small tables a test can query.  A test binary links this file
** and no engine code, so a plugin it dlopens resolves rad_decl_*, rad_issue,
** rad_meta_* and the rest here.
**
** The answers it gives are the simplest a real core could give: every op
** resolves and is declared (unless a test says an op has no kernel), every
** weight is present with the encoding it was declared with, and the KV block
** size is 16.
**
** Log lines, one per call, in call order:
**   weight <name> enc=<enc> shape=[d0,d1] access=<access> group=<g> optional=<0|1>
**          [shard=<row|col>] [row_parts=a,b] [source=<viewed weight>]
**   map <weight> <COPY|CONCAT>[+transposed][+rows_even|+rows_odd] <source> [<source> ...]
**   buffer <name> kind=<transient|persist|derived> enc=<enc> rows=<r> cols=<c> [derive=<what>]
**   kv_group <name> kind=<full|window|...> n_head_kv=<n> head_dim=<d> window=<w>
**   bind_kv layer=<l> group=<name>
**   op <index> <name> <param>=<value> ... [weights=<name>,<name>]
**   reads <op index> <buffer>,<buffer>
**   writes <op index> <buffer>,<buffer>
**   logits <buffer>
**   note <text>
**   fail <text>
**   issue <op index> <op name> rows=<n> operands=<kind>:<what>,...
**   step_fail <code> <text>
** A RANGE parameter prints as lo..hi, a float in the shortest form that
** reads back to the same double.  Operands print as buf:<name>,
** weight:<name>, kv:<layer>, idx:<count> or none.  A handle that names
** nothing prints as #<number>, so a plugin bug shows in the log instead of
** crashing the recorder.
*/
#ifndef RECORDING_BUILDER_H
#define RECORDING_BUILDER_H

#include "../../arch/rad_arch.h"

/* A fresh, empty builder and the step context that records into its log. */
RadBuilder *rec_builder_new(void);
void rec_builder_free(RadBuilder *b);
/* The instance the plugin's declare returned, released (with `release`)
** when the builder is freed, as the core does when a model closes. */
void rec_builder_own_instance(RadBuilder *b, void *instance, RadArchReleaseFn release);
void *rec_builder_instance(const RadBuilder *b);
RadCtx *rec_ctx_new(RadBuilder *b);
void rec_ctx_free(RadCtx *c);

/* Make rad_op_resolved answer 0 for every op with this name, as a core
** with no kernel for it would.  Call before declare. */
void rec_set_unresolved(RadBuilder *b, const char *op_name);

/* ------------------------------------------------------------------ log */

int rec_log_count(const RadBuilder *b);
const char *rec_log_line(const RadBuilder *b, int i);
/* The whole log, one line per entry, each ending in '\n'.  Caller frees. */
char *rec_log_text(const RadBuilder *b);

/* -------------------------------------------------------- declarations */

int rec_weight_count(const RadBuilder *b);
const char *rec_weight_name(const RadBuilder *b, rad_weight w);
/* The declaration as the plugin passed it; its source is the copy kept here. */
const RadWeightDecl *rec_weight_decl(const RadBuilder *b, rad_weight w);
/* The weight called `name`, or -1. */
rad_weight rec_find_weight(const RadBuilder *b, const char *name);

/* The name-map entry of a weight: 0 when it has none, else its mode, with
** the number of sources in *n_sources and the first source in *first. */
int rec_weight_map(const RadBuilder *b, rad_weight w, int *n_sources, const char **first);

int rec_op_count(const RadBuilder *b);
const char *rec_op_name(const RadBuilder *b, rad_op op);
/* The op's parameter called `name`, or NULL. */
const RadParam *rec_op_param(const RadBuilder *b, rad_op op, const char *name);
int rec_op_weight_count(const RadBuilder *b, rad_op op);
rad_weight rec_op_weight(const RadBuilder *b, rad_op op, int i);
/* 1 when the op named the buffer in rad_op_reads or rad_op_writes. */
int rec_op_uses(const RadBuilder *b, rad_op op, rad_buf buf);

int rec_buffer_count(const RadBuilder *b);
const char *rec_buffer_name(const RadBuilder *b, rad_buf buf);

int rec_fail_count(const RadBuilder *b);
const char *rec_fail(const RadBuilder *b, int i);
int rec_note_count(const RadBuilder *b);
const char *rec_note(const RadBuilder *b, int i);

/* --------------------------------------------------------------- issues */

int rec_issue_count(const RadBuilder *b);
rad_op rec_issue_op(const RadBuilder *b, int i);
int64_t rec_issue_rows(const RadBuilder *b, int i);
int rec_issue_operand_count(const RadBuilder *b, int i);
/* The operand as issued; an INDEX operand's data pointer is not kept. */
RadOperand rec_issue_operand(const RadBuilder *b, int i, int k);
/* How many issues named an op called `op_name`. */
int rec_issues_named(const RadBuilder *b, const char *op_name);

#endif /* RECORDING_BUILDER_H */
