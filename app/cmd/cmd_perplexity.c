/*
** cmd_perplexity.c: `radiance perplexity -m MODEL -f FILE [--ctx N]`.
**
** Teacher-forced perplexity measured the way llama.cpp's llama-perplexity
** measures it, so the two numbers can be put side by side: the text is
** tokenized once and cut into chunks of N tokens; each chunk is evaluated in
** a fresh sequence (its first token replaced by BOS when the tokenizer adds
** one), and only the second half of each chunk is scored, so every scored
** token has at least N/2 tokens of context.  PPL = exp(mean NLL), with the
** standard error of the mean NLL carried through.
*/
#include "../app.h"
#include "../models/model_store.h"
#include "../../engine/text/rad_text.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: radiance perplexity -m MODEL -f FILE [--ctx N] [options]\n"
    "\n"
    "Perplexity of MODEL on the text in FILE, computed as llama.cpp's llama-perplexity does:\n"
    "chunks of N tokens, each scored on its second half.\n"
    "\n"
    "  -m, --model MODEL     the model (any MODEL spec)\n"
    "  -f, --file FILE       the text\n"
    "  -c, --ctx N           tokens per chunk (default 512)\n"
    "  -b, --batch N         rows per step (default 128)\n"
    "      --chunks K        score at most K chunks (default: all)\n"
    "      --kv-dtype T      KV cache encoding: f16 (default) or f32\n"
    "      --kernels LIST    kernel library order (default: cpu,ref)\n"
    "  -t, --threads N   threads for the CPU kernels (default: the physical cores)\n"
    "  -h, --help            this help\n";

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (cap - n < 2) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) { free(buf); buf = NULL; break; }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        if (got == 0) break;
        n += got;
    }
    fclose(f);
    if (buf) { buf[n] = 0; *len = n; }
    return buf;
}

/* -log p(target) under softmax(logits), in double. */
static double nll(const float *logits, int n, int target)
{
    double max = logits[0];
    for (int i = 1; i < n; i++) if (logits[i] > max) max = logits[i];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - max);
    return log(sum) + max - (double)logits[target];
}

int rad_cmd_perplexity(int argc, char **argv)
{
    enum { CHUNKS = 256, KVD, KERNELS };
    static const struct option options[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"ctx", required_argument, 0, 'c'}, {"batch", required_argument, 0, 'b'},
        {"chunks", required_argument, 0, CHUNKS}, {"kv-dtype", required_argument, 0, KVD},
        {"kernels", required_argument, 0, KERNELS}, {"threads", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *spec = NULL, *file = NULL;
    int n_ctx = 512, max_chunks = 0, c;
    RadEngineOptions opt = {.max_tok = 128, .logits_all = 1};
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:f:c:b:t:h", options, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'm': spec = optarg; break;
        case 'f': file = optarg; break;
        case 'c': n_ctx = (int)strtol(optarg, &end, 10); break;
        case 'b': opt.max_tok = (int)strtol(optarg, &end, 10); break;
        case CHUNKS: max_chunks = (int)strtol(optarg, &end, 10); break;
        case KVD: opt.kv_type = optarg; break;
        case KERNELS: opt.kernels = optarg; break;
        case 't': opt.n_threads = (int)strtol(optarg, &end, 10); break;
        case 'h': fputs(usage, stdout); return RAD_EXIT_OK;
        default: fputs(usage, stderr); return RAD_EXIT_USAGE;
        }
        if (end && *end) {
            fprintf(stderr, "radiance perplexity: '%s' is not a number\n", optarg);
            return RAD_EXIT_USAGE;
        }
    }
    if (!spec && optind < argc) spec = argv[optind++];
    if (!spec || !file || n_ctx < 4 || opt.max_tok < 1 || max_chunks < 0) {
        fprintf(stderr, "radiance perplexity: %s\n%s",
                !spec ? "a model is required (-m MODEL)" : !file ? "a text is required (-f FILE)"
                                                          : "--ctx must be at least 4 and --batch at least 1",
                usage);
        return RAD_EXIT_USAGE;
    }

    char *model_path = NULL, *text = NULL;
    int32_t *tokens = NULL;
    float *logits = NULL;
    RadEngine *e = NULL;
    RadResolveOptions resolve = {0};
    int rc = rad_model_resolve(spec, &resolve, &model_path);
    if (rc) return rad_app_fail(rc);
    size_t len = 0;
    if (!(text = read_all(file, &len))) {
        rc = rad_error_set(errno == ENOENT ? RAD_E_NOTFOUND : RAD_E_IO, "%s: %s", file, strerror(errno));
        goto done;
    }
    opt.model_path = model_path;
    opt.max_ctx = n_ctx;
    if (opt.max_tok > n_ctx) opt.max_tok = n_ctx;
    if ((rc = rad_engine_open(&opt, &e))) goto done;
    const RadText *tok = rad_engine_text(e);
    if (!tok) {
        rc = rad_error_set(RAD_E_NOTFOUND, "%s: the model has no tokenizer", model_path);
        goto done;
    }
    int n_tokens = 0;
    if ((rc = rad_text_encode(tok, text, len, RAD_ENCODE_ADD_SPECIAL, &tokens, &n_tokens))) goto done;
    int n_chunks = n_tokens / n_ctx;
    if (max_chunks > 0 && n_chunks > max_chunks) n_chunks = max_chunks;
    if (n_chunks == 0) {
        rc = rad_error_set(RAD_E_RANGE, "%s: %d tokens; need at least --ctx %d for one chunk", file, n_tokens, n_ctx);
        goto done;
    }
    const int vocab = rad_engine_n_vocab(e);
    const RadTokenizer *data = rad_text_data(tok);
    const int bos = data->add_bos ? data->bos_id : -1;
    if (!(logits = malloc((size_t)n_ctx * vocab * sizeof *logits))) {
        rc = rad_error_set(RAD_E_NOMEM, "out of memory for %d x %d logits", n_ctx, vocab);
        goto done;
    }
    fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring the second half of each\n", n_tokens,
            n_chunks, n_ctx);
    double sum = 0, sum_sq = 0;
    long count = 0;
    for (int k = 0; k < n_chunks && !rc; k++) {
        int32_t *chunk = tokens + (size_t)k * n_ctx;
        int32_t first = chunk[0];
        if (bos >= 0) chunk[0] = bos;
        int seq = -1;
        if (!(rc = rad_engine_seq_new(e, &seq))) rc = rad_engine_eval(e, seq, chunk, n_ctx, logits);
        chunk[0] = first;
        rad_engine_seq_free(e, seq);
        if (rc) break;
        for (int j = n_ctx / 2; j < n_ctx - 1; j++) {
            double v = nll(logits + (size_t)j * vocab, vocab, chunk[j + 1]);
            sum += v;
            sum_sq += v * v;
            count++;
        }
        printf("[%d]%.4f%s", k + 1, exp(sum / count), k + 1 < n_chunks ? "," : "\n");
        fflush(stdout);
    }
    if (!rc) {
        double mean = sum / count, var = count > 1 ? (sum_sq / count - mean * mean) * count / (count - 1) : 0;
        double ppl = exp(mean), err = ppl * sqrt(var > 0 ? var / count : 0);
        printf("PPL = %.4f +/- %.5f (%ld tokens scored)\n", ppl, err, count);
    }
done:
    free(logits);
    free(tokens);
    free(text);
    rad_engine_close(e);
    free(model_path);
    return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
}
