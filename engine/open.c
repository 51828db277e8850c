/*
** open.c: opening a model, closing it, and what can be asked of it.
**
** Open does the whole of "declare, plan, load" before the first token: read
** the container's metadata, pick the plugin for its exact (arch, quant) pair,
** let it declare against the deployment, select kernels, size the activation
** arena and the KV pool, and bind every weight to its bytes.  After that a
** step allocates nothing and reads no file.
*/
#include "engine_internal.h"
#include "text/rad_chat.h"
#include "text/rad_text.h"
#include "../formats/gguf_container.h"
#include "scheduler.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

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
    for (int i = 0; i < e->plugins->n_arch && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s/%s", i ? ", " : "",
                               e->plugins->arch[i].info->arch_id, e->plugins->arch[i].info->quant);
    return rad_error_set(RAD_E_UNSUPPORTED,
                         "%s: no plugin serves architecture '%s' at '%s' (installed in %s: %s)",
                         e->opt.model_path, e->meta.arch_id, e->meta.quant, e->plugins->dir,
                         at ? list : "none");
}

#define PROGRESS(stage) (opt->progress ? opt->progress(opt->progress_arg, stage) : (void)0)

int rad_engine_open(const RadEngineOptions *opt, RadEngine **out)
{
    *out = NULL;
    RadEngine *e = calloc(1, sizeof *e);
    if (!e) return RAD_E_NOMEM;
    e->opt = *opt;
    PROGRESS("reading");
    int rc = rad_container_open_model(opt->model_path, opt->tokenizer_cache, &e->container);
    if (rc) return fail_open(e, rc);
    PROGRESS("plugins");
    char *dir = rad_plugin_dir_resolve(opt->plugin_dir);
    rc = rad_plugins_acquire(dir, &e->plugins);
    free(dir);
    if (rc) return fail_open(e, rc);
    rc = rad_plugins_resolve_gguf(e->plugins, &e->container->meta, opt->model_path);
    if (rc) return fail_open(e, rc);
    rc = rad_meta_from_table(&e->container->meta, &e->meta, opt->model_path);
    if (!rc) rc = rad_meta_check(&e->meta, opt->model_path);
    if (!rc) rc = rad_meta_check_layers(&e->meta, e->container, opt->model_path);
    if (rc) return fail_open(e, rc);
    PROGRESS("tokenizer");
    rc = rad_text_from_container(e->container, &e->text);
    if (rc == RAD_E_NOTFOUND) rad_error_clear();     /* a model may carry no tokenizer */
    else if (rc) return fail_open(e, rc);
    if (e->text && (rc = rad_meta_check_vocab(&e->meta, rad_text_data(e->text)->n_vocab, opt->model_path)))
        return fail_open(e, rc);
    rc = rad_plugins_kernel_order(e->plugins, opt->kernels ? opt->kernels : rad_plugins_default_order(e->plugins),
                                  e->libs, MAX_LIBS, &e->n_libs);
    if (rc) return fail_open(e, rc);
    e->plugin = rad_plugins_find(e->plugins, e->meta.arch_id, e->meta.quant);
    if (!e->plugin) return fail_open(e, no_plugin_error(e));

    RadBuildCtx *ctx = &e->ctx;
    ctx->struct_size = sizeof *ctx;
    ctx->world_size = 1;
    ctx->max_ctx = opt->max_ctx > 0 ? opt->max_ctx
                 : e->meta.n_ctx_train > 0 && e->meta.n_ctx_train < 4096 ? e->meta.n_ctx_train : 4096;
    ctx->max_tok = opt->max_tok > 0 ? opt->max_tok : 256;
    if (ctx->max_tok > ctx->max_ctx) ctx->max_tok = ctx->max_ctx;
    ctx->max_seqs = opt->max_seqs > 0 ? opt->max_seqs : 1;
    ctx->max_spec = opt->max_spec > 0 ? opt->max_spec : 0;
    ctx->max_mixed_tok = opt->max_mixed_tok > 0 && opt->max_mixed_tok < ctx->max_tok ? opt->max_mixed_tok : ctx->max_tok;
    ctx->max_out_rows = opt->max_out_rows > 0 ? opt->max_out_rows
                      : opt->logits_all ? ctx->max_tok : ctx->max_seqs * (1 + ctx->max_spec);
    if (ctx->max_out_rows > ctx->max_tok) ctx->max_out_rows = ctx->max_tok;
    ctx->kv_enc = opt->kv_type ? rad_encoding_by_name(opt->kv_type) : RAD_ENC_F16;
    if (ctx->kv_enc != RAD_ENC_F16 && ctx->kv_enc != RAD_ENC_F32)
        return fail_open(e, rad_error_set(RAD_E_ARG, "--kv-dtype %s: choose f16 or f32", opt->kv_type));
    ctx->scope = "";

    /* A deployment switch the plugin cannot honour is refused by name. */
    RadArchProbe probe;
    memset(&probe, 0, sizeof probe);
    probe.struct_size = sizeof probe;
    if (e->plugin->probe && (rc = e->plugin->probe(&e->meta, &probe)) != RAD_OK)
        return fail_open(e, rad_error_set(rc, "%s: plugin %s refused the model in probe", opt->model_path,
                                          e->plugin->info->name));
    if (ctx->kv_enc == RAD_ENC_F32 && !probe.kv_f32_ok)
        return fail_open(e, rad_error_set(RAD_E_UNSUPPORTED, "--kv-dtype f32: plugin %s does not serve an f32 KV cache",
                                          e->plugin->info->name));

    PROGRESS("planning");
    rad_builder_init(&e->b, RAD_BUILD_RUN, &e->meta, ctx);
    e->b.container = e->container;
    e->b.libs = e->libs;
    e->b.n_libs = e->n_libs;
    rc = e->plugin->declare(&e->b, &e->meta, ctx, &e->instance);
    e->b.declare_failed = rc != RAD_OK;
    int finish = rad_builder_finish(&e->b, opt->model_path);
    if (finish) return fail_open(e, finish);
    if (rc) return fail_open(e, rad_error_set(rc, "%s: plugin %s failed to declare the model (%s)",
                                              opt->model_path, e->plugin->info->name, rad_strerror(rc)));
    if (opt->debug_graph) rad_builder_print_graph(&e->b, e->libs, opt->debug_graph);

    rc = plan_arena(e);
    if (rc) return fail_open(e, rc);
    e->pool = rad_pool_acquire(opt->n_threads > 0 ? opt->n_threads : rad_physical_cores());
    if (!e->pool) return fail_open(e, rad_error_set(RAD_E_NOMEM, "cannot start the thread pool (-t %d)", opt->n_threads));
    rc = plan_scratch(e);
    if (rc) return fail_open(e, rc);
    const RadKvOptions kv_opt = {.max_seqs = ctx->max_seqs, .max_ctx = ctx->max_ctx, .max_tok = ctx->max_tok,
                                 .max_spec = ctx->max_spec, .kv_enc = ctx->kv_enc, .positions = opt->kv_size};
    rc = rad_kv_pool_init(&e->kv, &e->b, &kv_opt);
    if (!rc) PROGRESS("weights");
    if (!rc) rc = rad_residency_plan(e);     /* after the KV cache: the budget counts it */
    if (rc) return fail_open(e, rc);

    int t = ctx->max_tok, s = ctx->max_seqs;
    e->step_tokens = calloc((size_t)t, sizeof(int32_t));
    e->positions = calloc((size_t)t, sizeof(int32_t));
    e->token_seq = calloc((size_t)t, sizeof(int32_t));
    e->out_ids = calloc((size_t)t, sizeof(int32_t));
    e->cu_seqlens = calloc((size_t)s + 1, sizeof(int32_t));
    e->seq_ids = calloc((size_t)s, sizeof(int32_t));
    e->state_slots = calloc((size_t)s, sizeof(int32_t));
    e->step_items = calloc((size_t)s, sizeof *e->step_items);
    e->kv_tables = calloc((size_t)(e->kv.n_groups ? e->kv.n_groups : 1) * (size_t)s * (size_t)e->kv.max_blocks,
                          sizeof(int32_t));
    e->views = calloc((size_t)(e->kv.n_layers ? e->kv.n_layers : 1), sizeof *e->views);
    if (!e->step_tokens || !e->positions || !e->token_seq || !e->out_ids || !e->cu_seqlens || !e->seq_ids ||
        !e->state_slots || !e->step_items || !e->kv_tables || !e->views)
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
    rad_relayout_later_free(e->copies_later);      /* its thread writes into the weights' copies */
    rad_experts_free(e->experts);
    rad_trunk_free(e);
    rad_kv_pool_free(&e->kv);
    rad_text_free(e->text);
    if (e->plugin) e->plugin->release(e->instance);     /* before its tables go */
    rad_builder_free(&e->b);
    rad_plugins_release(e->plugins);
    if (e->container) rad_container_close(e->container);
    rad_pool_release(e->pool);
    free(e->scratch);
    free(e->arena);
    free(e->step_tokens); free(e->positions); free(e->token_seq); free(e->out_ids); free(e->cu_seqlens);
    free(e->seq_ids); free(e->state_slots); free(e->step_items); free(e->kv_tables); free(e->views);
    free(e);
}

void rad_engine_wait_copies(RadEngine *e) { rad_relayout_later_finish(e->copies_later, 0); }

int rad_engine_copies_pending(const RadEngine *e)
{
    int n = 0;
    for (int i = 0; i < e->b.n_weights; i++)
        for (int c = 0; c < e->b.weights[i].n_copies; c++)
            n += !atomic_load(&e->b.weights[i].copies[c].ready);
    return n;
}

const char *rad_engine_mode(const RadEngine *e) { return e->residency.mode[0] ? e->residency.mode : NULL; }

const RadModelMeta *rad_engine_meta(const RadEngine *e) { return &e->meta; }
const RadText *rad_engine_text(const RadEngine *e) { return e->text; }
int rad_engine_n_vocab(const RadEngine *e) { return e->meta.n_vocab; }
int rad_engine_max_ctx(const RadEngine *e) { return e->ctx.max_ctx; }
int rad_engine_threads(const RadEngine *e) { return rad_pool_threads(e->pool); }
int rad_engine_max_spec(const RadEngine *e) { return e->ctx.max_spec; }

const char *rad_engine_model_id(const RadEngine *e) { return e->model_id; }

const RadChatFormat *rad_engine_chat_format(const RadEngine *e)
{
    const RadChatFormat *f = e->plugin->chat_format ? e->plugin->chat_format(&e->meta) : NULL;
    return rad_chat_format_resolve(f, e->text);     /* a plugin's choices need the vocabulary */
}

/* ----------------------------------------------------------------- print */

void rad_engine_print_graph(const RadEngine *e, FILE *f) { rad_builder_print_graph(&e->b, e->libs, f); }

void rad_engine_print_plan(const RadEngine *e, FILE *f)
{
    int64_t sum_buffers = 0;
    for (int i = 0; i < e->b.n_buffers; i++) sum_buffers += e->b.buffers[i].bytes;
    fprintf(f, "memory plan for %s (%s/%s, plugin %s):\n", e->opt.model_path, e->meta.arch_id,
            e->meta.quant, e->plugin->info->name);
    rad_residency_print(e, f);
    rad_experts_print(e->experts, f);
    fprintf(f, "  arena: %d buffers, %lld bytes if none shared\n", e->b.n_buffers, (long long)sum_buffers);
    fprintf(f, "  KV: %d groups, %d layers, blocks of %d, %s, %lld blocks shared by %d sequences of %d positions\n",
            e->kv.n_groups, e->kv.n_layers, e->kv.block_size, rad_encoding_info(e->ctx.kv_enc)->name,
            e->kv.n_groups ? (long long)e->kv.groups[0].n_blocks : 0LL, e->ctx.max_seqs, e->ctx.max_ctx);
    for (int i = 0; i < e->b.n_buffers; i++) {
        const RadBufferEntry *b = &e->b.buffers[i];
        fprintf(f, "    %-16s %10lld bytes at %10lld, ops %d..%d%s\n", b->name, (long long)b->bytes,
                (long long)b->offset, b->first, b->last,
                b->d.kind == RAD_BUF_PERSIST ? " persist" : b->d.kind == RAD_BUF_DERIVED ? " derived" : "");
    }
}
