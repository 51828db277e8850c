/*
** cmd_show.c: `radiance show MODEL`: what the store knows of a converted
** model (source, commit, file, digest, dates) and what its .rad container
** holds (architecture, sizes, and the encoding of each kind of tensor),
** read from the container's header without loading the engine.
*/
#include "../app.h"
#include "../cli.h"
#include "../chat/model_sampling.h"
#include "../../engine/text/rad_text.h"
#include "../../formats/gguf_container.h"
#include "../models/hub.h"
#include "../models/model_open.h"
#include "../models/model_store.h"
#include "../../formats/rad_container.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char usage[] =
    "usage: radiance show MODEL [--quant Q]\n"
    "\n"
    "Describe a model (a name that radiance list shows, a .rad or a GGUF file): its source and\n"
    "digest, its architecture and sizes, and the encoding of each kind of tensor.\n"
    "\n"
    "      --quant Q   which quantization, when several are converted\n"
    "  -h, --help      this help\n";

static void date(const char *label, int64_t t)
{
    char buf[64] = "never";
    if (t) {
        time_t tt = (time_t)t;
        struct tm tm;
        localtime_r(&tt, &tm);
        strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
    }
    printf("%-14s%s\n", label, buf);
}

static int64_t meta_int(const RadContainer *c, const char *key)
{
    const RadMetaKV *kv = rad_meta_table_find(&c->meta, key);
    return kv && kv->type != RAD_META_STRING ? kv->i : 0;
}

static const char *meta_str(const RadContainer *c, const char *key)
{
    const RadMetaKV *kv = rad_meta_table_find(&c->meta, key);
    return kv && kv->type == RAD_META_STRING ? rad_safe(kv->s) : "?";
}

/* "blk.12.attn_q.weight" -> "attn_q.weight": a kind of tensor, per layer. */
static const char *kind_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0) return name;
    const char *dot = strchr(name + 4, '.');
    return dot ? dot + 1 : name;
}

typedef struct Kind {
    char name[96];
    int enc, count;
    const RadContainerTensor *first;
    uint64_t bytes;
} Kind;

/* What show found wrong with the tokenizer, kept until the metadata has
** been checked too: run reports a metadata problem first, and show reports
** the same one line run would. */
typedef struct TokenizerCheck {
    int rc;             /* 0, or why run would refuse the tokenizer */
    char why[16384];    /* that error's message (base/error.c keeps as much) */
    int n_vocab;        /* the tokenizer's tokens, -1 when it has none */
} TokenizerCheck;

/* The tokenizer and chat template, when the model carries them.  One that
** does not load is shown as invalid, not as absent: run refuses the model. */
static void show_tokenizer(const RadContainer *c, TokenizerCheck *check)
{
    RadText *t = NULL;
    int rc = rad_text_from_container(c, &t);
    check->n_vocab = -1;
    if (rc == RAD_E_NOTFOUND) {
        printf("%-14s%s\n", "tokenizer", "none (the model runs from token ids)");
        rad_error_clear();
        return;
    }
    if (rc != RAD_OK) {
        printf("%-14s%s\n", "tokenizer", "invalid: radiance run refuses this model (the reason is on stderr)");
        check->rc = rc;
        snprintf(check->why, sizeof check->why, "%s", rad_error_message());
        rad_error_clear();
        return;
    }
    const RadTokenizer *d = rad_text_data(t);
    printf("%-14s%s, %d tokens, %d merges, %d added", "tokenizer",
           d->model == RAD_TOK_BPE_SPM ? "SentencePiece BPE" : "byte-level BPE", d->n_vocab, d->n_merges, d->n_added);
    if (d->bos_id >= 0) printf(", bos %d%s", d->bos_id, d->add_bos ? " (added)" : "");
    if (d->eos_id >= 0) printf(", eos %d", d->eos_id);
    printf("\n");
    check->n_vocab = d->n_vocab;
    if (d->chat_template) {
        /* The first line, enough to recognise the format. */
        const char *nl = strchr(d->chat_template, '\n');
        int n = nl ? (int)(nl - d->chat_template) : (int)strlen(d->chat_template);
        char first[128];
        snprintf(first, sizeof first, "%.*s", n > 100 ? 100 : n, d->chat_template);
        printf("%-14s%s%s (%zu bytes)\n", "chat template", rad_safe(first), n > 100 || nl ? " ..." : "",
               strlen(d->chat_template));
    } else {
        printf("%-14s%s\n", "chat template", "none");
    }
    rad_text_free(t);
}

static void show_container(const RadContainer *c, TokenizerCheck *check)
{
    char b[32];
    printf("%-14s%s (%s plugin, %s)\n", "architecture", rad_safe(meta_str(c, "arch.hf_name")),
           rad_safe(meta_str(c, "arch.id")), rad_safe(meta_str(c, "arch.quant")));
    /* MTP (next-token prediction) layers after the decoder (GLM-4.5,
    ** DeepSeek-V3): config.json does not count them in num_hidden_layers,
    ** a GGUF's block_count does; no plugin runs them yet (issue 16). */
    int64_t layers = meta_int(c, "model.n_layers"), mtp = meta_int(c, "num_nextn_predict_layers");
    char key[200];
    if (rad_meta_table_find(&c->meta, "arch.gguf")) {
        snprintf(key, sizeof key, "gguf.%s.nextn_predict_layers", meta_str(c, "arch.gguf"));
        mtp = meta_int(c, key);
        if (mtp > 0 && mtp < layers) layers -= mtp;
        else mtp = 0;
    }
    printf("%-14s%lld layers", "size", (long long)layers);
    if (mtp > 0) printf(" (and %lld MTP layer%s, not run)", (long long)mtp, mtp > 1 ? "s" : "");
    printf(", embedding %lld, feed-forward %lld\n", (long long)meta_int(c, "model.n_embd"),
           (long long)meta_int(c, "model.n_ff"));
    printf("%-14s%lld heads, %lld KV heads, head dim %lld\n", "attention",
           (long long)meta_int(c, "model.n_head"), (long long)meta_int(c, "model.n_head_kv"),
           (long long)meta_int(c, "model.head_dim"));
    printf("%-14s%lld tokens, trained context %lld\n", "vocabulary", (long long)meta_int(c, "model.n_vocab"),
           (long long)meta_int(c, "model.n_ctx_train"));
    if (meta_int(c, "model.n_expert"))
        printf("%-14s%lld, %lld per token\n", "experts", (long long)meta_int(c, "model.n_expert"),
               (long long)meta_int(c, "model.n_expert_used"));

    Kind *kinds = calloc((size_t)c->n_tensors + 1, sizeof *kinds);
    int nk = 0;
    uint64_t total = 0;
    for (int i = 0; kinds && i < c->n_tensors; i++) {
        const RadContainerTensor *t = &c->tensors[i];
        const char *k = kind_of(t->name);
        int j = 0;
        while (j < nk && (strcmp(kinds[j].name, k) != 0 || kinds[j].enc != t->enc)) j++;
        if (j == nk) {
            snprintf(kinds[nk].name, sizeof kinds[nk].name, "%s", k);
            kinds[nk].enc = t->enc;
            kinds[nk].first = t;
            nk++;
        }
        kinds[j].count++;
        kinds[j].bytes += t->size;
        total += t->size;
    }
    printf("%-14s%d, %s\n", "tensors", c->n_tensors, rad_hub_format_bytes((int64_t)total, b, sizeof b));
    printf("  %-28s %5s  %-9s %-16s %10s\n", "KIND", "COUNT", "ENCODING", "SHAPE", "BYTES");
    for (int j = 0; j < nk; j++) {
        const RadEncodingInfo *e = rad_encoding_info(kinds[j].enc);
        char shape[64] = "";
        size_t used = 0;
        for (int d = 0; d < kinds[j].first->rank && used < sizeof shape; d++)
            used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%lld", d ? "x" : "",
                                     (long long)kinds[j].first->shape[d]);
        printf("  %-28s %5d  %-9s %-16s %10s\n", rad_safe(kinds[j].name), kinds[j].count, e ? e->name : "?",
               shape[0] ? shape : "scalar", rad_hub_format_bytes((int64_t)kinds[j].bytes, b, sizeof b));
    }
    free(kinds);
    if (c->n_blobs) {
        printf("%-14s", "files");
        for (int i = 0; i < c->n_blobs; i++) printf("%s%s", i ? ", " : "", rad_safe(c->blobs[i].name));
        printf("\n");
    }
    show_tokenizer(c, check);
    /* The sampling the model's makers recommend (model_sampling.h). */
    uint64_t gen_size = 0;
    const char *gen = rad_container_blob(c, "generation_config.json", &gen_size);
    RadModelSampling rec;
    rad_model_sampling_from(c->meta.kv, c->meta.n, gen, (size_t)gen_size, &rec);
    char line[256];
    rad_model_sampling_line(&rec, line, sizeof line);
    printf("%-14s%s\n", "sampling", line);
}

int rad_cmd_show(int argc, char **argv)
{
    static const struct option options[] = {
        {"quant", required_argument, 0, 'Q'}, /* long only: -q is --quiet in every command */
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *quant = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case 'Q':
            quant = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return RAD_EXIT_OK;
        default:
            fputs(usage, stderr);
            return RAD_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "radiance show: give one MODEL\n%s", usage);
        return RAD_EXIT_USAGE;
    }
    const char *text = argv[optind];
    RadModelSpec *spec = calloc(1, sizeof *spec);
    RadStore *store = NULL;
    RadStoredModel row = {0};
    RadContainer *cont = NULL;
    const char *path = NULL;
    int rc = spec ? RAD_OK : rad_error_set(RAD_E_NOMEM, "out of memory");
    int prc = rc ? rc : rad_model_spec_parse(text, spec), parsed = prc == RAD_OK;
    struct stat st;
    if (!rc && prc != RAD_OK && prc != RAD_E_NOTFOUND && stat(text, &st) == 0) rc = prc; /* a FIFO... */
    if (!rc && parsed && (spec->kind == RAD_SPEC_RAD || spec->kind == RAD_SPEC_GGUF)) {
        path = spec->path;
    } else if (!rc && !(rc = rad_store_open_existing(&store))) {
        rc = rad_store_find(store, text, quant, &row);
        if (rc == RAD_E_NOTFOUND && parsed)
            rc = rad_store_find(store, spec->name,
                                quant                   ? quant
                                : spec->quant_from_spec ? spec->quant
                                                        : NULL,
                                &row);
        if (!rc) path = row.path;
    }
    if (!rc) {
        char b[32];
        if (row.name) {
            printf("%-14s%s\n", "model", rad_safe(row.name));
            printf("%-14s%s\n", "quant", rad_safe(row.quant));
            if (row.commit_sha[0])
                printf("%-14s%s@%s (commit %s)\n", "source", rad_safe(row.source), rad_safe(row.revision),
                       rad_safe(row.commit_sha));
            else
                printf("%-14s%s\n", "source", rad_safe(row.source));
            printf("%-14s%s (%s%s)\n", "file", rad_safe(row.path), rad_hub_format_bytes(row.size, b, sizeof b),
                   rad_store_cache_path(row.file) ? ", run in place from the Hugging Face cache" : "");
            if (row.sha256[0]) printf("%-14s%s\n", "sha256", rad_safe(row.sha256));
            date(rad_store_cache_path(row.file) ? "pulled" : "converted", row.created);
            date("last used", row.last_used);
        } else {
            printf("%-14s%s\n", "file", rad_safe(path));
        }
        char *tokcache = rad_tokenizer_cache_dir();
        rc = rad_container_open_model(path, tokcache, &cont);
        free(tokcache);
        if (!rc) rc = rad_container_resolve_family(cont, NULL);    /* a GGUF's plugin family */
        /* What it holds is shown even when run would refuse it; then why,
        ** in run's order: the metadata, the tokenizer, its vocabulary
        ** against the embedding. */
        TokenizerCheck check = {0};
        if (!rc) show_container(cont, &check);
        if (!rc) rc = rad_container_check_model(cont);
        if (!rc && check.rc) rc = rad_error_set(check.rc, "%s", check.why);
        if (!rc && check.n_vocab >= 0) rc = rad_container_check_vocab(cont, check.n_vocab);
        if (rc) fflush(stdout);
    }
    rad_container_close(cont);
    rad_stored_model_free(&row);
    rad_store_close(store);
    free(spec);
    return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
}
