/*
** cmd_run.c: `radiance run`: one prompt in, one continuation out, no
** questions asked.  Until the tokenizer lands the prompt is token ids
** (--tokens) and the answer is token ids, comma-separated on stdout.
** --dump-logits writes every prompt row's logits for teacher-forced
** comparison with a reference implementation.
*/
#include "app.h"
#include "../engine/sample.h"
#include "model_store.h"
#include "../engine/text/rad_text.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: radiance run [-m] MODEL [PROMPT...] [options]\n"
    "       radiance run [-m] MODEL --tokens IDS [options]\n"
    "\n"
    "Complete the prompt (raw: no chat template yet) and print the continuation,\n"
    "streamed. The prompt is standard input when it is piped, then the PROMPT\n"
    "arguments. With --tokens the prompt is token ids and so is the answer.\n"
    "\n"
    "MODEL is an alias (share/models.tsv), hf:ORG/REPO[@REV][:QUANT], or a path\n"
    "(.rad, or a Hugging Face folder); a hub model is downloaded and converted once.\n"
    "\n"
    "  -m, --model MODEL        the model\n"
    "      --tokens IDS         the prompt as comma-separated token ids (prints ids back)\n"
    "  -n, --n-predict N        tokens to generate (default 32; 0 = only evaluate the prompt)\n"
    "      --ignore-eos         keep generating past the end-of-sequence token\n"
    "      --dump-logits FILE   write the f32 logits of every prompt position ([n_tokens, vocab], row-major)\n"
    "      --temp T             temperature (default 0.8; 0 = greedy)\n"
    "      --top-k K            keep the K most likely tokens (default 40; 0 = off)\n"
    "      --top-p P            nucleus mass (default 0.95; 1 = off)\n"
    "      --min-p P            drop tokens below P times the top probability (default 0.05)\n"
    "      --repeat-penalty R   penalty for recent tokens (default 1.0 = off)\n"
    "      --repeat-last-n N    how many recent tokens the penalty sees (default 64)\n"
    "      --seed S             sampling seed (default 0)\n"
    "  -c, --ctx N              context length (default: the model's, at most 4096)\n"
    "  -b, --batch N            rows per prefill step (default 256)\n"
    "      --kv-dtype T         KV cache encoding: f16 (default) or f32\n"
    "      --kernels LIST       kernel library order (default: cpu,ref)\n"
    "  -t, --threads N          threads for the CPU kernels (default: the physical cores)\n"
    "      --plugins DIR        plugin folder\n"
    "      --debug-graph        print the resolved program to stderr\n"
    "      --debug-plan         print the memory plan to stderr\n"
    "      --offline            never use the network (as HF_HUB_OFFLINE=1)\n"
    "  -q, --quiet              no download or conversion progress\n"
    "  -h, --help               this help\n";

/* Parse "1,2,3" into a fresh array; RAD_E_ARG with a message on bad input. */
static int parse_ids(const char *text, int32_t **out, int *n_out)
{
    int cap = 16, n = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return RAD_E_NOMEM;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            free(ids);
            return rad_error_set(RAD_E_ARG, "--tokens: '%s' is not a list of token ids (e.g. 1,2,3)", text);
        }
        if (n == cap) {
            int32_t *grown = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!grown) { free(ids); return RAD_E_NOMEM; }
            ids = grown;
        }
        ids[n++] = (int32_t)v;
        p = end;
        if (*p == ',') p++;
        else if (*p) {
            free(ids);
            return rad_error_set(RAD_E_ARG, "--tokens: unexpected '%c' in '%s'", *p, text);
        }
    }
    if (n == 0) {
        free(ids);
        return rad_error_set(RAD_E_ARG, "--tokens: the prompt is empty");
    }
    *out = ids;
    *n_out = n;
    return RAD_OK;
}

/* The prompt: standard input when it is piped, then the PROMPT arguments
** joined by spaces, the two separated by a blank line.  NUL-terminated. */
static char *prompt_text(int argc, char **argv, int piped, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf && piped) {
        if (cap - n < 2) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) { free(buf); return NULL; }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, stdin);
        if (got == 0) break;
        n += got;
    }
    for (int i = 0; buf && i < argc; i++) {
        size_t add = strlen(argv[i]);
        if (n + add + 3 > cap) {
            cap = (n + add + 3) * 2;
            char *grown = realloc(buf, cap);
            if (!grown) { free(buf); return NULL; }
            buf = grown;
        }
        if (i == 0 && n > 0) { memcpy(buf + n, "\n\n", 2); n += 2; }
        else if (i > 0) buf[n++] = ' ';
        memcpy(buf + n, argv[i], add);
        n += add;
    }
    if (!buf) return NULL;
    buf[n] = 0;
    *len = n;
    return buf;
}

static int parse_int(const char *flag, const char *text, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi)
        return rad_error_set(RAD_E_ARG, "%s: '%s' is not a whole number in %ld..%ld", flag, text, lo, hi);
    *out = (int)v;
    return RAD_OK;
}

static int parse_float(const char *flag, const char *text, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (end == text || *end || errno) return rad_error_set(RAD_E_ARG, "%s: '%s' is not a number", flag, text);
    *out = v;
    return RAD_OK;
}

/* Write the logits next to path and rename over it, so an interrupted run
** never leaves a half-written file. */
static int write_logits(const char *path, const float *logits, size_t n)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.partial.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return rad_error_set(RAD_E_IO, "--dump-logits %s: %s", path, strerror(errno));
    size_t wrote = fwrite(logits, sizeof *logits, n, f);
    int closed = fclose(f);
    if (wrote != n || closed != 0 || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return rad_error_set(RAD_E_IO, "--dump-logits %s: write failed: %s", path, strerror(err));
    }
    return RAD_OK;
}

/* The model's end-of-sequence ids: the tokenizer's EOS, and config's
** eos_token_id (an int or a list). */
static int is_eos(const RadModelMeta *m, const RadText *tok, int token)
{
    if (tok && rad_text_data(tok)->eos_id == token) return 1;
    if (rad_meta_geti(m, "eos_token_id", -1) == token) return 1;
    int64_t n = rad_meta_geti(m, "eos_token_id.length", 0);
    for (int64_t i = 0; i < n; i++) {
        char key[48];
        snprintf(key, sizeof key, "eos_token_id.%lld", (long long)i);
        if (rad_meta_geti(m, key, -1) == token) return 1;
    }
    return 0;
}

int rad_cmd_run(int argc, char **argv)
{
    enum { TOKENS = 256, DUMP, TEMP, TOPK, TOPP, MINP, PENALTY, LASTN, SEED, KVD, KERNELS, PLUGINS,
           GRAPH, PLAN, NOEOS, OFFLINE };
    static const struct option options[] = {
        {"model", required_argument, 0, 'm'}, {"tokens", required_argument, 0, TOKENS},
        {"n-predict", required_argument, 0, 'n'}, {"dump-logits", required_argument, 0, DUMP},
        {"temp", required_argument, 0, TEMP}, {"top-k", required_argument, 0, TOPK},
        {"top-p", required_argument, 0, TOPP}, {"min-p", required_argument, 0, MINP},
        {"repeat-penalty", required_argument, 0, PENALTY}, {"repeat-last-n", required_argument, 0, LASTN},
        {"seed", required_argument, 0, SEED}, {"ctx", required_argument, 0, 'c'},
        {"batch", required_argument, 0, 'b'}, {"kv-dtype", required_argument, 0, KVD},
        {"kernels", required_argument, 0, KERNELS}, {"threads", required_argument, 0, 't'}, {"plugins", required_argument, 0, PLUGINS},
        {"debug-graph", no_argument, 0, GRAPH}, {"debug-plan", no_argument, 0, PLAN},
        {"ignore-eos", no_argument, 0, NOEOS}, {"offline", no_argument, 0, OFFLINE},
        {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    RadEngineOptions opt = {0};
    RadSamplerParams sp;
    rad_sampler_defaults(&sp);
    const char *tokens_text = NULL, *dump = NULL;
    int n_predict = 32, ignore_eos = 0, c, rc = RAD_OK, seed = 0;
    RadResolveOptions resolve = {0};
    optind = 1;
    while (rc == RAD_OK && (c = getopt_long(argc, argv, "m:n:c:b:qt:h", options, NULL)) != -1) {
        switch (c) {
        case 'm': opt.model_path = optarg; break;
        case TOKENS: tokens_text = optarg; break;
        case 'n': rc = parse_int("-n", optarg, 0, 1 << 24, &n_predict); break;
        case DUMP: dump = optarg; break;
        case TEMP: rc = parse_float("--temp", optarg, &sp.temperature); break;
        case TOPK: rc = parse_int("--top-k", optarg, 0, INT_MAX, &sp.top_k); break;
        case TOPP: rc = parse_float("--top-p", optarg, &sp.top_p); break;
        case MINP: rc = parse_float("--min-p", optarg, &sp.min_p); break;
        case PENALTY: rc = parse_float("--repeat-penalty", optarg, &sp.repeat_penalty); break;
        case LASTN: rc = parse_int("--repeat-last-n", optarg, 0, INT_MAX, &sp.repeat_last_n); break;
        case SEED: rc = parse_int("--seed", optarg, 0, INT_MAX, &seed); sp.seed = (uint64_t)seed; break;
        case 'c': rc = parse_int("--ctx", optarg, 1, 1 << 24, &opt.max_ctx); break;
        case 'b': rc = parse_int("--batch", optarg, 1, 1 << 16, &opt.max_tok); break;
        case KVD:
            opt.kv_type = optarg;
            if (strcmp(optarg, "f16") && strcmp(optarg, "f32"))
                rc = rad_error_set(RAD_E_ARG, "--kv-dtype: '%s'; choose f16 or f32", optarg);
            break;
        case KERNELS: opt.kernels = optarg; break;
        case 't': rc = parse_int("--threads", optarg, 1, 256, &opt.n_threads); break;
        case PLUGINS: opt.plugin_dir = optarg; break;
        case GRAPH: opt.debug_graph = stderr; break;
        case PLAN: opt.debug_plan = stderr; break;
        case NOEOS: ignore_eos = 1; break;
        case OFFLINE: resolve.offline = 1; break;
        case 'q': resolve.quiet = 1; break;
        case 'h': fputs(usage, stdout); return RAD_EXIT_OK;
        default: fputs(usage, stderr); return RAD_EXIT_USAGE;
        }
    }
    if (rc) return rad_app_fail(rc);
    if (!opt.model_path && optind < argc) opt.model_path = argv[optind++];
    int have_args = optind < argc, piped = !isatty(STDIN_FILENO);
    if (!opt.model_path || (!tokens_text && !have_args && !piped)) {
        fprintf(stderr, "radiance run: %s\n%s", !opt.model_path ? "a model is required (-m MODEL)"
                : "a prompt is required: PROMPT arguments, standard input, or --tokens IDS", usage);
        return RAD_EXIT_USAGE;
    }
    if (tokens_text && have_args) {
        fprintf(stderr, "radiance run: give the prompt as text or as --tokens, not both\n");
        return RAD_EXIT_USAGE;
    }
    if ((rc = rad_sampler_check(&sp))) return rad_app_fail(rc);
    /* Any spec becomes a local .rad: downloaded and converted on first use. */
    char *model_path = NULL;
    resolve.plugin_dir = opt.plugin_dir;
    if ((rc = rad_model_resolve(opt.model_path, &resolve, &model_path))) return rad_app_fail(rc);
    opt.model_path = model_path;
    opt.logits_all = dump != NULL;

    RadEngine *e = NULL;
    RadSampler *sampler = NULL;
    float *logits = NULL;
    int32_t *history = NULL, *prompt = NULL;
    char *text = NULL, *piece = NULL;
    int n_prompt = 0, seq = -1;
    rc = rad_engine_open(&opt, &e);
    if (rc) goto done;
    const RadText *tok = rad_engine_text(e);
    if (tokens_text) {
        rc = parse_ids(tokens_text, &prompt, &n_prompt);
    } else {
        size_t len = 0;
        if (!tok) {
            rc = rad_error_set(RAD_E_NOTFOUND, "%s: the model has no tokenizer: give the prompt as --tokens IDS",
                               model_path);
            goto done;
        }
        if (!(text = prompt_text(argc - optind, argv + optind, piped, &len))) {
            rc = rad_error_set(RAD_E_NOMEM, "out of memory reading the prompt");
            goto done;
        }
        rc = rad_text_encode(tok, text, len, RAD_ENCODE_ADD_SPECIAL | RAD_ENCODE_PARSE_SPECIAL, &prompt, &n_prompt);
        if (rc == RAD_OK && n_prompt == 0) rc = rad_error_set(RAD_E_ARG, "the prompt is empty");
    }
    if (rc) goto done;

    const int vocab = rad_engine_n_vocab(e);
    logits = malloc((size_t)(dump ? n_prompt : 1) * (size_t)vocab * sizeof *logits);
    history = malloc(((size_t)n_prompt + (size_t)n_predict + 1) * sizeof *history);
    if (!logits || !history) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); goto done; }
    if ((rc = rad_sampler_create(&sp, vocab, &sampler))) goto done;
    if ((rc = rad_engine_seq_new(e, &seq))) goto done;
    if ((rc = rad_engine_eval(e, seq, prompt, n_prompt, logits))) goto done;
    if (dump && (rc = write_logits(dump, logits, (size_t)n_prompt * vocab))) goto done;

    /* Text prompts get text back, streamed a whole character at a time; token
    ** prompts get ids. */
    RadDetok detok;
    size_t piece_cap = 0;
    if (!tokens_text) {
        rad_detok_init(&detok, tok, RAD_DECODE_SKIP_SPECIAL);
        piece_cap = rad_detok_max_bytes(tok) + 16;
        if (!(piece = malloc(piece_cap))) { rc = RAD_E_NOMEM; goto done; }
    }
    memcpy(history, prompt, (size_t)n_prompt * sizeof *history);
    int n_history = n_prompt;
    const float *last = dump ? logits + (size_t)(n_prompt - 1) * vocab : logits;
    for (int i = 0; i < n_predict; i++) {
        int token = rad_sampler_pick(sampler, last, history, n_history, n_history);
        history[n_history++] = token;
        int stop = !ignore_eos && is_eos(rad_engine_meta(e), tok, token);
        if (tokens_text) {
            printf("%s%d", i ? "," : "", token);
        } else if (!stop) {
            size_t wrote = 0;
            if ((rc = rad_detok_push(&detok, token, piece, piece_cap, &wrote))) break;
            fwrite(piece, 1, wrote, stdout);
        }
        fflush(stdout);
        if (stop || i + 1 == n_predict) break;
        if ((rc = rad_engine_eval(e, seq, &history[n_history - 1], 1, logits))) break;
        last = logits;
    }
    if (!tokens_text && piece) {
        size_t wrote = 0;
        if (rad_detok_flush(&detok, piece, piece_cap, &wrote) == RAD_OK) fwrite(piece, 1, wrote, stdout);
    }
    if (n_predict > 0) printf("\n");

done:
    free(text);
    free(piece);
    rad_sampler_free(sampler);
    rad_engine_close(e);
    free(prompt);
    free(logits);
    free(history);
    free(model_path);
    return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
}
