/*
** runtime.c: opening a model and running steps.
**
** Open does the whole of "declare, plan, load" before the first token: read
** the container's metadata, pick the plugin for its exact (arch, quant) pair,
** let it declare against the deployment, select kernels, size the activation
** arena and the KV pool, and bind every weight to its mapped bytes.  After
** that a step allocates nothing and reads no file: rad_engine_eval cuts the
** tokens into chunks of at most max_tok rows, fills one RadBatch per chunk and
** the plugin's step issues ops, which rad_issue hands to the chosen kernels.
*/
#include "engine_internal.h"
#include "text/rad_chat.h"
#include "text/rad_text.h"
#include "../formats/gguf_container.h"
#include "pool.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIBS 8

struct RadEngine {
    RadEngineOptions opt;
    RadPluginSet plugins;
    const RadKernelLibrary *libs[MAX_LIBS];
    int n_libs;
    RadContainer *container;
    RadModelMeta meta;
    const RadArchPlugin *plugin;
    RadBuildCtx ctx;
    RadBuilder b;
    uint8_t *arena;
    int64_t arena_bytes;
    RadKvPool kv;
    RadText *text;              /* NULL when the model has no tokenizer */
    /* Step scratch, sized at open so a step never allocates. */
    int32_t *positions, *token_seq, *out_ids, *cu_seqlens, *seq_ids, *kv_tables;
    RadKvView *views;
    RadPool *pool;              /* -t threads for host kernels */
    void *scratch;              /* the largest scratch any selected row asks for */
    char model_id[65];          /* sha256 hex of what makes this model this model */
    size_t scratch_bytes;
    int64_t relayout_bytes;             /* kernels' private weight layouts */
    char relayout_skipped[160];         /* why there are none, when they were skipped */
};

struct RadCtx {
    RadEngine *e;
    const RadBatch *batch;
    int status;
    rad_op last_op;
};

/* ---------------------------------------------------------------- issue */

int rad_step_fail(RadCtx *c, int code, const char *fmt, ...)
{
    if (c->status) return c->status;
    char text[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    c->status = code < 0 ? code : RAD_E_STATE;
    rad_error_set(c->status, "%s", text);
    return c->status;
}

int rad_step_status(const RadCtx *c) { return c->status; }

static int bind_operand(RadCtx *c, const RadOpEntry *e, const RadKernelRow *row, rad_op op, int i,
                        const RadOperand *o, int64_t rows, RadKernelArgs *a)
{
    RadEngine *eng = c->e;
    const RadOperandSchema *s = &e->schema->operands[i];
    RadTensor *t = &a->operand[i];
    memset(t, 0, sizeof *t);
    if (o->kind == RAD_OPND_NONE) {
        if (!s->optional)
            return rad_step_fail(c, RAD_E_ARG, "op %s: operand '%s' is required", e->op, s->name);
        return RAD_OK;
    }
    switch (s->role) {
    case RAD_ROLE_WEIGHT: {
        if (o->kind != RAD_OPND_WEIGHT || o->id < 0 || o->id >= eng->b.n_weights)
            return rad_step_fail(c, RAD_E_ARG, "op %s: operand '%s' must be a weight", e->op, s->name);
        const RadWeightEntry *w = &eng->b.weights[o->id];
        if (!w->present) {
            if (!s->optional)
                return rad_step_fail(c, RAD_E_ARG, "op %s: weight '%s' is absent", e->op, w->name);
            return RAD_OK;      /* an optional weight the file lacks: operand stays absent */
        }
        rad_weight_tensor(w, t);
        const RadRelayoutCopy *copy = rad_relayout_copy(w, row);
        if (copy) {
            t->data = copy->data;
            t->layout = RAD_LAYOUT_KERNEL;
        }
        return RAD_OK;
    }
    case RAD_ROLE_KV:
        if (o->kind != RAD_OPND_KV || o->id < 0 || o->id >= eng->kv.n_layers)
            return rad_step_fail(c, RAD_E_ARG, "op %s: operand '%s' must be a KV layer", e->op, s->name);
        a->kv = &eng->views[o->id];
        return RAD_OK;
    case RAD_ROLE_INDEX:
        if (o->kind == RAD_OPND_INDEX) {
            if (o->n_index < rows)
                return rad_step_fail(c, RAD_E_SHAPE, "op %s: index '%s' has %lld entries for %lld rows",
                                     e->op, s->name, (long long)o->n_index, (long long)rows);
            t->data = (void *)o->index;
            t->enc = RAD_ENC_I32;
            t->rank = 1;
            t->shape[0] = o->n_index;
            t->row_bytes = 4;
            return RAD_OK;
        }
        /* a DERIVED i32 buffer serves as an index too */
        __attribute__((fallthrough));
    default: {
        if (o->kind != RAD_OPND_BUF || o->id < 0 || o->id >= eng->b.n_buffers)
            return rad_step_fail(c, RAD_E_ARG, "op %s: operand '%s' must be a buffer", e->op, s->name);
        const RadBufferEntry *buf = &eng->b.buffers[o->id];
        /* The arena plan trusted the declared reads/writes; an undeclared
        ** use could land on bytes another buffer owns at this point. */
        if (buf->first >= 0 && buf->d.kind == RAD_BUF_TRANSIENT && (op < buf->first || op > buf->last))
            return rad_step_fail(c, RAD_E_STATE,
                                 "op %s #%d uses buffer '%s' without declaring it (rad_op_reads/rad_op_writes)",
                                 e->op, op, buf->name);
        if ((s->role == RAD_ROLE_OUT || s->role == RAD_ROLE_INOUT) && rows > buf->d.rows)
            return rad_step_fail(c, RAD_E_SHAPE, "op %s: %lld rows into buffer '%s' of %lld", e->op,
                                 (long long)rows, buf->name, (long long)buf->d.rows);
        t->data = buf->data;
        t->enc = buf->d.enc;
        t->rank = 2;
        t->shape[0] = buf->d.rows;
        t->shape[1] = buf->d.cols;
        t->row_bytes = buf->row_bytes;
        return RAD_OK;
    }
    }
}

int rad_issue(RadCtx *c, rad_op op, int64_t rows, const RadOperand *operands, int n)
{
    if (c->status) return c->status;
    RadEngine *eng = c->e;
    if (op < 0 || op >= eng->b.n_ops) return rad_step_fail(c, RAD_E_ARG, "issue of undeclared op %d", op);
    const RadOpEntry *e = &eng->b.ops[op];
    if (rows <= 0) return RAD_E_SHAPE;          /* not a call; the step goes on */
    if (op < c->last_op)
        return rad_step_fail(c, RAD_E_STATE, "op %s #%d issued after #%d: ops must be issued in declaration order",
                             e->op, op, c->last_op);
    c->last_op = op;
    const RadBand *band = NULL;
    for (int k = 0; k < e->n_bands; k++)
        if (rows >= e->bands[k].lo && rows <= e->bands[k].hi) band = &e->bands[k];
    if (!band || !band->row)
        return rad_step_fail(c, RAD_E_RANGE, "op %s #%d: %lld rows is outside its declared range", e->op, op,
                             (long long)rows);
    if (n != e->schema->n_operands)
        return rad_step_fail(c, RAD_E_ARG, "op %s: %d operands given, its schema has %d", e->op, n,
                             e->schema->n_operands);

    RadKernelArgs a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.schema = e->schema;
    for (int p = 0; p < e->n_params; p++) {
        const RadParam *pr = &e->params[p];
        if (pr->kind == RAD_PK_FLOAT) a.param[p].f = pr->f;
        else a.param[p].i = p == e->range_index ? rows : pr->i;
    }
    for (int i = 0; i < n; i++)
        if (bind_operand(c, e, band->row, op, i, &operands[i], rows, &a)) return c->status;
    a.pool = eng->pool;
    a.n_threads = rad_pool_threads(eng->pool);
    a.parallel_for = rad_pool_parallel_for;
    a.scratch = eng->scratch;
    int rc = band->row->launch(&a);
    if (rc)
        return rad_step_fail(c, rc, "op %s #%d (kernel %s, %lld rows) failed: %s", e->op, op, band->row->name,
                             (long long)rows, rad_strerror(rc));
    return RAD_OK;
}

/* ----------------------------------------------------------------- open */

static int fail_open(RadEngine *e, int rc)
{
    rad_engine_close(e);
    return rc;
}

static int plan_arena(RadEngine *e)
{
    RadBuilder *b = &e->b;
    RadPlanItem *items = calloc((size_t)(b->n_buffers ? b->n_buffers : 1), sizeof *items);
    if (!items) return RAD_E_NOMEM;
    for (int i = 0; i < b->n_buffers; i++) {
        items[i].bytes = b->buffers[i].bytes;
        items[i].first = b->buffers[i].first;
        items[i].last = b->buffers[i].last;
        items[i].persist = b->buffers[i].d.kind != RAD_BUF_TRANSIENT;
    }
    e->arena_bytes = rad_plan_arena(items, b->n_buffers, 64);
    if (e->arena_bytes < 0) { free(items); return RAD_E_NOMEM; }
    e->arena = aligned_alloc(64, (size_t)(e->arena_bytes > 0 ? e->arena_bytes : 64));
    if (!e->arena) {
        free(items);
        return rad_error_set(RAD_E_NOMEM, "out of memory for the %lld-byte activation arena: lower --batch",
                             (long long)e->arena_bytes);
    }
    memset(e->arena, 0, (size_t)e->arena_bytes);
    for (int i = 0; i < b->n_buffers; i++) {
        b->buffers[i].offset = items[i].offset;
        b->buffers[i].data = e->arena + items[i].offset;
    }
    free(items);
    return RAD_OK;
}

/* One scratch area serves every op, since ops run one after another.  Its
** size is the largest any selected row asks for, asked with the op's
** parameters at the band's upper edge (the operands are not known before a
** step issues them; rad_kernel.h says so). */
static int plan_scratch(RadEngine *e)
{
    size_t most = 0;
    for (int i = 0; i < e->b.n_ops; i++) {
        const RadOpEntry *op = &e->b.ops[i];
        for (int k = 0; k < op->n_bands; k++) {
            const RadBand *band = &op->bands[k];
            if (!band->row || !band->row->scratch_bytes) continue;
            RadKernelArgs a;
            memset(&a, 0, sizeof a);
            a.struct_size = sizeof a;
            a.schema = op->schema;
            for (int p = 0; p < op->n_params; p++) {
                if (op->params[p].kind == RAD_PK_FLOAT) a.param[p].f = op->params[p].f;
                else a.param[p].i = p == op->range_index ? band->hi : op->params[p].i;
            }
            a.n_threads = rad_pool_threads(e->pool);
            size_t need = band->row->scratch_bytes(&a);
            if (need > most) most = need;
        }
    }
    e->scratch_bytes = most;
    if (!most) return RAD_OK;
    e->scratch = aligned_alloc(64, (most + 63) / 64 * 64);
    if (!e->scratch)
        return rad_error_set(RAD_E_NOMEM, "out of memory for %zu bytes of kernel scratch", most);
    return RAD_OK;
}

/* The model's identity for KV snapshots: a sha256 over the architecture,
** the weight format, and every tensor's name, encoding, shape, size and
** first 256 bytes.  Another model, another quantization or another build of
** the same model differs in at least one of these; hashing all the weights
** would cost seconds for a large model at every start. */
static int compute_model_id(RadEngine *e)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) { EVP_MD_CTX_free(md); return RAD_E_NOMEM; }
    EVP_DigestUpdate(md, e->meta.arch_id, strlen(e->meta.arch_id) + 1);
    EVP_DigestUpdate(md, e->meta.quant, strlen(e->meta.quant) + 1);
    for (int i = 0; i < e->container->n_tensors; i++) {
        const RadContainerTensor *t = &e->container->tensors[i];
        int64_t fixed[7] = {t->enc, t->rank, t->shape[0], t->shape[1], t->shape[2], t->shape[3], (int64_t)t->size};
        EVP_DigestUpdate(md, t->name, strlen(t->name) + 1);
        EVP_DigestUpdate(md, fixed, sizeof fixed);
        EVP_DigestUpdate(md, t->data, t->size < 256 ? (size_t)t->size : 256);
    }
    unsigned char digest[32];
    unsigned len = 0;
    EVP_DigestFinal_ex(md, digest, &len);
    EVP_MD_CTX_free(md);
    for (int i = 0; i < 32; i++) snprintf(e->model_id + 2 * i, 3, "%02x", digest[i]);
    return RAD_OK;
}

static int no_plugin_error(const RadEngine *e)
{
    char list[1024];
    size_t at = 0;
    list[0] = 0;
    for (int i = 0; i < e->plugins.n_arch && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s/%s", i ? ", " : "",
                               e->plugins.arch[i].info->arch_id, e->plugins.arch[i].info->quant);
    return rad_error_set(RAD_E_UNSUPPORTED,
                         "%s: no plugin serves architecture '%s' at '%s' (installed in %s: %s)",
                         e->opt.model_path, e->meta.arch_id, e->meta.quant, e->plugins.dir,
                         at ? list : "none");
}

int rad_engine_open(const RadEngineOptions *opt, RadEngine **out)
{
    *out = NULL;
    RadEngine *e = calloc(1, sizeof *e);
    if (!e) return RAD_E_NOMEM;
    e->opt = *opt;
    int rc = rad_container_open_any(opt->model_path, &e->container);
    if (rc) return fail_open(e, rc);
    rc = rad_meta_from_table(&e->container->meta, &e->meta, opt->model_path);
    if (rc) return fail_open(e, rc);
    rc = rad_text_from_container(e->container, &e->text);
    if (rc == RAD_E_NOTFOUND) rad_error_clear();     /* a model may carry no tokenizer */
    else if (rc) return fail_open(e, rc);

    char *dir = rad_plugin_dir_resolve(opt->plugin_dir);
    rc = rad_plugins_load(dir, &e->plugins);
    free(dir);
    if (rc) return fail_open(e, rc);
    rc = rad_plugins_kernel_order(&e->plugins, opt->kernels ? opt->kernels : rad_plugins_default_order(&e->plugins),
                                  e->libs, MAX_LIBS, &e->n_libs);
    if (rc) return fail_open(e, rc);
    e->plugin = rad_plugins_find(&e->plugins, e->meta.arch_id, e->meta.quant);
    if (!e->plugin) return fail_open(e, no_plugin_error(e));

    RadBuildCtx *ctx = &e->ctx;
    ctx->struct_size = sizeof *ctx;
    ctx->world_size = 1;
    ctx->max_ctx = opt->max_ctx > 0 ? opt->max_ctx
                 : e->meta.n_ctx_train > 0 && e->meta.n_ctx_train < 4096 ? e->meta.n_ctx_train : 4096;
    ctx->max_tok = opt->max_tok > 0 ? opt->max_tok : 256;
    if (ctx->max_tok > ctx->max_ctx) ctx->max_tok = ctx->max_ctx;
    ctx->max_seqs = opt->max_seqs > 0 ? opt->max_seqs : 1;
    ctx->max_out_rows = opt->logits_all ? ctx->max_tok : ctx->max_seqs;
    ctx->kv_enc = opt->kv_type ? rad_encoding_by_name(opt->kv_type) : RAD_ENC_F16;
    if (ctx->kv_enc != RAD_ENC_F16 && ctx->kv_enc != RAD_ENC_F32)
        return fail_open(e, rad_error_set(RAD_E_ARG, "--kv-dtype %s: choose f16 or f32", opt->kv_type));
    ctx->scope = "";

    /* A deployment switch the plugin cannot honour is refused by name. */
    RadArchProbe probe = {.struct_size = sizeof probe};
    if (e->plugin->probe && (rc = e->plugin->probe(&e->meta, &probe)) != RAD_OK)
        return fail_open(e, rad_error_set(rc, "%s: plugin %s refused the model in probe", opt->model_path,
                                          e->plugin->info->name));
    if (ctx->kv_enc == RAD_ENC_F32 && !probe.kv_f32_ok)
        return fail_open(e, rad_error_set(RAD_E_UNSUPPORTED, "--kv-dtype f32: plugin %s does not serve an f32 KV cache",
                                          e->plugin->info->name));

    rad_builder_init(&e->b, RAD_BUILD_RUN, &e->meta, ctx);
    e->b.container = e->container;
    e->b.libs = e->libs;
    e->b.n_libs = e->n_libs;
    rc = e->plugin->declare(&e->b, &e->meta, ctx);
    int finish = rad_builder_finish(&e->b, opt->model_path);
    if (finish) return fail_open(e, finish);
    if (rc) return fail_open(e, rad_error_set(rc, "%s: plugin %s failed to declare the model (%s)",
                                              opt->model_path, e->plugin->info->name, rad_strerror(rc)));
    if (opt->debug_graph) rad_builder_print_graph(&e->b, e->libs, opt->debug_graph);

    rc = plan_arena(e);
    if (rc) return fail_open(e, rc);
    e->pool = rad_pool_new(opt->n_threads > 0 ? opt->n_threads : rad_physical_cores());
    if (!e->pool) return fail_open(e, rad_error_set(RAD_E_NOMEM, "cannot start the thread pool (-t %d)", opt->n_threads));
    rc = plan_scratch(e);
    if (rc) return fail_open(e, rc);
    rc = rad_kv_pool_init(&e->kv, &e->b, ctx->max_seqs, ctx->max_ctx, ctx->max_tok, ctx->kv_enc);
    if (!rc) {
        /* after the KV cache: the copies' memory policy counts it */
        int64_t mapped = 0;
        for (int i = 0; i < e->container->n_tensors; i++) mapped += (int64_t)e->container->tensors[i].size;
        rc = rad_relayout_weights(&e->b, e->pool, mapped, e->arena_bytes + e->kv.bytes + (int64_t)e->scratch_bytes,
                                  &e->relayout_bytes, e->relayout_skipped, sizeof e->relayout_skipped);
    }
    if (rc) return fail_open(e, rc);

    int t = ctx->max_tok, s = ctx->max_seqs;
    e->positions = calloc((size_t)t, sizeof(int32_t));
    e->token_seq = calloc((size_t)t, sizeof(int32_t));
    e->out_ids = calloc((size_t)t, sizeof(int32_t));
    e->cu_seqlens = calloc((size_t)s + 1, sizeof(int32_t));
    e->seq_ids = calloc((size_t)s, sizeof(int32_t));
    e->kv_tables = calloc((size_t)(e->kv.n_groups ? e->kv.n_groups : 1) * (size_t)s * (size_t)e->kv.max_blocks,
                          sizeof(int32_t));
    e->views = calloc((size_t)(e->kv.n_layers ? e->kv.n_layers : 1), sizeof *e->views);
    if (!e->positions || !e->token_seq || !e->out_ids || !e->cu_seqlens || !e->seq_ids || !e->kv_tables || !e->views)
        return fail_open(e, RAD_E_NOMEM);
    rc = compute_model_id(e);
    if (rc) return fail_open(e, rc);
    if (opt->debug_plan) rad_engine_print_plan(e, opt->debug_plan);
    *out = e;
    return RAD_OK;
}

void rad_engine_close(RadEngine *e)
{
    if (!e) return;
    rad_kv_pool_free(&e->kv);
    rad_text_free(e->text);
    rad_builder_free(&e->b);
    if (e->plugins.dir) rad_plugins_free(&e->plugins);
    if (e->container) rad_container_close(e->container);
    rad_pool_free(e->pool);
    free(e->scratch);
    free(e->arena);
    free(e->positions); free(e->token_seq); free(e->out_ids); free(e->cu_seqlens);
    free(e->seq_ids); free(e->kv_tables); free(e->views);
    free(e);
}

const RadModelMeta *rad_engine_meta(const RadEngine *e) { return &e->meta; }
const RadText *rad_engine_text(const RadEngine *e) { return e->text; }
int rad_engine_n_vocab(const RadEngine *e) { return e->meta.n_vocab; }
int rad_engine_max_ctx(const RadEngine *e) { return e->ctx.max_ctx; }
int rad_engine_threads(const RadEngine *e) { return rad_pool_threads(e->pool); }

const char *rad_engine_model_id(const RadEngine *e) { return e->model_id; }

const RadChatFormat *rad_engine_chat_format(const RadEngine *e)
{
    const RadChatFormat *f = e->plugin->chat_format ? e->plugin->chat_format(&e->meta) : NULL;
    return rad_chat_format_resolve(f, e->text);     /* a plugin's choices need the vocabulary */
}

int rad_engine_seq_new(RadEngine *e, int *seq) { return rad_kv_seq_new(&e->kv, seq); }

static int seq_open(const RadEngine *e, int seq)
{
    return seq >= 0 && seq < e->kv.max_seqs && e->kv.seqs[seq].used;
}

int rad_engine_seq_truncate(RadEngine *e, int seq, int n)
{
    if (!seq_open(e, seq)) return rad_error_set(RAD_E_ARG, "sequence %d is not open", seq);
    if (n < 0 || n > e->kv.seqs[seq].len)
        return rad_error_set(RAD_E_ARG, "cannot truncate a sequence of %d positions to %d", e->kv.seqs[seq].len, n);
    int rc = rad_kv_truncate(&e->kv, seq, n);
    if (rc == RAD_E_RANGE)
        return rad_error_set(rc, "the sliding window has already dropped positions needed to resume at %d", n);
    return rc;
}

/* A snapshot is "RADSNAP1", the 64-character model id, then kv.c's bytes. */
#define SNAP_HEAD 72

int rad_engine_seq_snapshot(const RadEngine *e, int seq, void **out, size_t *size)
{
    *out = NULL;
    *size = 0;
    if (!seq_open(e, seq)) return rad_error_set(RAD_E_ARG, "sequence %d is not open", seq);
    int64_t body = rad_kv_snapshot_bytes(&e->kv, seq);
    uint8_t *buf = malloc((size_t)(SNAP_HEAD + body));
    if (!buf) return rad_error_set(RAD_E_NOMEM, "out of memory for a %lld-byte KV snapshot", (long long)body);
    memcpy(buf, "RADSNAP1", 8);
    memcpy(buf + 8, e->model_id, 64);
    int rc = rad_kv_snapshot(&e->kv, seq, buf + SNAP_HEAD, body);
    if (rc) { free(buf); return rc; }
    *out = buf;
    *size = (size_t)(SNAP_HEAD + body);
    return RAD_OK;
}

int rad_engine_seq_restore(RadEngine *e, int seq, const void *data, size_t size)
{
    if (!seq_open(e, seq)) return rad_error_set(RAD_E_ARG, "sequence %d is not open", seq);
    const uint8_t *d = data;
    if (size < SNAP_HEAD || memcmp(d, "RADSNAP1", 8) != 0)
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: not a radiance snapshot");
    if (memcmp(d + 8, e->model_id, 64) != 0)
        return rad_error_set(RAD_E_FORMAT, "KV snapshot: made by another model or another build of it");
    return rad_kv_restore(&e->kv, seq, d + SNAP_HEAD, (int64_t)(size - SNAP_HEAD));
}
void rad_engine_seq_free(RadEngine *e, int seq) { rad_kv_seq_free(&e->kv, seq); }

int rad_engine_seq_len(const RadEngine *e, int seq)
{
    if (seq < 0 || seq >= e->kv.max_seqs || !e->kv.seqs[seq].used) return -1;
    return e->kv.seqs[seq].len;
}

/* ----------------------------------------------------------------- steps */

static void fill_derived(RadEngine *e, const RadBatch *batch)
{
    for (int i = 0; i < e->b.n_buffers; i++) {
        RadBufferEntry *buf = &e->b.buffers[i];
        if (buf->d.kind != RAD_BUF_DERIVED) continue;
        const int32_t *src = NULL;
        int n = 0;
        if (strcmp(buf->derive, "token_ids") == 0) { src = batch->token_ids; n = batch->n_tok; }
        else if (strcmp(buf->derive, "positions") == 0) { src = batch->positions; n = batch->n_tok; }
        else { src = batch->out_ids; n = batch->n_out; }
        if (n > buf->d.rows) n = (int)buf->d.rows;
        if (n > 0) memcpy(buf->data, src, (size_t)n * sizeof(int32_t));
    }
}

static int run_chunk(RadEngine *e, int seq, const int32_t *tokens, int start_pos, int m, int want_all,
                     int want_last)
{
    RadBatch batch;
    memset(&batch, 0, sizeof batch);
    batch.struct_size = sizeof batch;
    batch.phase = m == 1 && start_pos > 0 ? RAD_PHASE_DECODE : RAD_PHASE_PREFILL;
    batch.n_tok = m;
    batch.n_seq = 1;
    batch.n_seq_decode = batch.phase == RAD_PHASE_DECODE;
    for (int i = 0; i < m; i++) {
        e->positions[i] = start_pos + i;
        e->token_seq[i] = 0;
    }
    e->cu_seqlens[0] = 0;
    e->cu_seqlens[1] = m;
    e->seq_ids[0] = seq;
    batch.token_ids = tokens;
    batch.positions = e->positions;
    batch.cu_seqlens = e->cu_seqlens;
    batch.seq_ids = e->seq_ids;
    batch.token_seq = e->token_seq;
    if (want_all) {
        batch.n_out = m;
        for (int i = 0; i < m; i++) e->out_ids[i] = i;
    } else if (want_last) {
        batch.n_out = 1;
        e->out_ids[0] = m - 1;
    }
    batch.out_ids = e->out_ids;

    int rc = rad_kv_reserve(&e->kv, seq, start_pos + m);
    if (rc) return rc;
    fill_derived(e, &batch);
    for (int g = 0; g < e->kv.n_groups; g++)
        rad_kv_fill_table(&e->kv, g, &seq, 1, e->kv_tables + (size_t)g * e->kv.max_blocks * e->kv.max_seqs);
    for (int l = 0; l < e->kv.n_layers; l++) {
        int g = e->kv.layer_group[l];
        rad_kv_view(&e->kv, l, e->kv_tables + (size_t)g * e->kv.max_blocks * e->kv.max_seqs, 1, &batch,
                    &e->views[l]);
    }
    RadCtx c = {.e = e, .batch = &batch, .status = 0, .last_op = 0};
    e->plugin->step(&c, &batch);
    if (c.status) return rad_error_prefix(c.status, "%s: step failed: ", e->opt.model_path);
    rad_kv_commit(&e->kv, seq, start_pos + m);
    return RAD_OK;
}

int rad_engine_eval(RadEngine *e, int seq, const int32_t *tokens, int n, float *logits)
{
    if (n <= 0) return rad_error_set(RAD_E_ARG, "nothing to evaluate");
    int len = rad_engine_seq_len(e, seq);
    if (len < 0) return rad_error_set(RAD_E_ARG, "sequence %d is not open", seq);
    if ((int64_t)len + n > e->ctx.max_ctx)
        return rad_error_set(RAD_E_RANGE, "%d tokens after %d already held exceed the context of %d: raise --ctx",
                             n, len, e->ctx.max_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= e->meta.n_vocab)
            return rad_error_set(RAD_E_RANGE, "token id %d at index %d is outside the vocabulary (0..%d)",
                                 tokens[i], i, e->meta.n_vocab - 1);
    const int64_t vocab = e->meta.n_vocab;
    const float *out = (const float *)e->b.buffers[e->b.logits].data;
    for (int start = 0; start < n; start += e->ctx.max_tok) {
        int m = n - start < e->ctx.max_tok ? n - start : e->ctx.max_tok;
        int last = start + m == n;
        int rc = run_chunk(e, seq, tokens + start, len + start, m, e->opt.logits_all && logits != NULL,
                           last && logits != NULL);
        if (rc) return rc;
        if (!logits) continue;
        if (e->opt.logits_all) memcpy(logits + (size_t)start * vocab, out, (size_t)m * vocab * sizeof(float));
        else if (last) memcpy(logits, out, (size_t)vocab * sizeof(float));
    }
    return RAD_OK;
}

/* ----------------------------------------------------------------- print */

void rad_engine_print_graph(const RadEngine *e, FILE *f) { rad_builder_print_graph(&e->b, e->libs, f); }

void rad_engine_print_plan(const RadEngine *e, FILE *f)
{
    int64_t weights = 0;
    for (int i = 0; i < e->container->n_tensors; i++) weights += (int64_t)e->container->tensors[i].size;
    int64_t sum_buffers = 0;
    for (int i = 0; i < e->b.n_buffers; i++) sum_buffers += e->b.buffers[i].bytes;
    fprintf(f, "memory plan for %s (%s/%s, plugin %s):\n", e->opt.model_path, e->meta.arch_id,
            e->meta.quant, e->plugin->info->name);
    fprintf(f, "  weights (mapped read-only)  %12lld bytes\n", (long long)weights);
    fprintf(f, "  activation arena            %12lld bytes (%d buffers, %lld if none shared)\n",
            (long long)e->arena_bytes, e->b.n_buffers, (long long)sum_buffers);
    fprintf(f, "  KV cache                    %12lld bytes (%d groups, %d layers, blocks of %d, %s, %d x %d positions)\n",
            (long long)e->kv.bytes, e->kv.n_groups, e->kv.n_layers,
            e->kv.n_groups ? e->kv.groups[0].block_size : 0, rad_encoding_info(e->ctx.kv_enc)->name,
            e->ctx.max_seqs, e->ctx.max_ctx);
    fprintf(f, "  kernel scratch              %12lld bytes\n", (long long)e->scratch_bytes);
    fprintf(f, "  relayouted weights          %12lld bytes (%s)\n", (long long)e->relayout_bytes,
            e->relayout_skipped[0] ? e->relayout_skipped : "kernels' own layouts, copied at load");
    fprintf(f, "  total                       %12lld bytes\n",
            (long long)(weights + e->arena_bytes + e->kv.bytes + (int64_t)e->scratch_bytes + e->relayout_bytes));
    for (int i = 0; i < e->b.n_buffers; i++) {
        const RadBufferEntry *b = &e->b.buffers[i];
        fprintf(f, "    %-16s %10lld bytes at %10lld, ops %d..%d%s\n", b->name, (long long)b->bytes,
                (long long)b->offset, b->first, b->last,
                b->d.kind == RAD_BUF_PERSIST ? " persist" : b->d.kind == RAD_BUF_DERIVED ? " derived" : "");
    }
}
