/*
** cmd_run.c: `radiance run`: one prompt in, one answer out, no questions
** asked -- the pipe contract (radiance(1), RUN).
**
** The prompt goes through the model's chat format (conversation.h) unless
** --raw sends it as is; the answer alone goes to stdout, streamed; reasoning
** only with --show-thinking and only to stderr; --json / --jsonl for
** machines.  Never interactive: with no prompt and a terminal on stdin it is
** a usage error.  Interrupts: the first SIGINT stops the reply, which is
** flushed as it stands, and the exit status is 130; a second one exits at
** once.  --tokens and --dump-logits keep the raw token-id path that the
** reference comparisons drive.
*/
#include "../app.h"
#include "../config.h"
#include "../chat/conversation.h"
#include "../models/model_store.h"
#include "../../engine/text/rad_text.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: radiance run [-m] MODEL [PROMPT...] [options]\n"
    "       radiance run [-m] MODEL --tokens IDS [options]\n"
    "\n"
    "Answer one prompt and exit. The prompt is the PROMPT arguments joined by\n"
    "spaces, then, when standard input is not a terminal, a blank line and\n"
    "standard input. It goes through the model's chat format (a model without\n"
    "one, or --raw, gets it as is). The answer alone is streamed to stdout.\n"
    "\n"
    "MODEL is an alias (share/models.tsv), hf:ORG/REPO[@REV][:QUANT], or a path\n"
    "(.rad, .gguf, or a Hugging Face folder); a hub model is downloaded and\n"
    "converted once. Without MODEL, the config's `model` (or RADIANCE_MODEL).\n"
    "\n"
    "  -m, --model MODEL        the model\n"
    "      --raw                send the prompt as is, no chat format (plain completion)\n"
    "  -s, --system TEXT        the system prompt\n"
    "      --no-think           ask the model not to reason (when its format can say so)\n"
    "      --think              ask the model to reason (when its format can say so)\n"
    "      --show-thinking      stream the model's reasoning to stderr (dropped otherwise)\n"
    "      --json               print one JSON object at the end (content, reasoning,\n"
    "                           tool_calls, tokens, usage, timings, finish_reason)\n"
    "      --jsonl              print JSON events while streaming, then a \"done\" event\n"
    "      --color WHEN         auto (default), always or never; NO_COLOR turns it off\n"
    "      --tokens IDS         the prompt as comma-separated token ids (prints ids back; raw)\n"
    "  -n, --n-predict N        most tokens to generate (default -1: until the model stops\n"
    "                           or the context is full; 0 = only evaluate the prompt)\n"
    "      --ignore-eos         keep generating past the end-of-sequence token\n"
    "      --dump-logits FILE   write the f32 logits of every prompt position ([n_tokens, vocab],\n"
    "                           row-major; raw)\n"
    "      --temp T             temperature (default 0.8; 0 = greedy)\n"
    "      --top-k K            keep the K most likely tokens (default 40; 0 = off)\n"
    "      --top-p P            nucleus mass (default 0.95; 1 = off)\n"
    "      --min-p P            drop tokens below P times the top probability (default 0.05)\n"
    "      --repeat-penalty R   penalty for recent tokens (default 1.0 = off)\n"
    "      --repeat-last-n N    how many recent tokens the penalty sees (default 64)\n"
    "      --seed S             sampling seed (default 0)\n"
    "  -c, --ctx N              context length (default: the model's, at most 4096)\n"
    "      --context-policy P   when prompt and reply outgrow the context: drop-oldest\n"
    "                           (default; drops the oldest turns, with a notice) or refuse\n"
    "      --reply-reserve N    room kept for the reply when -n is -1 (default min(512, ctx/4))\n"
    "  -b, --batch N            rows per prefill step (default 256)\n"
    "      --kv-dtype T         KV cache encoding: f16 (default) or f32\n"
    "      --kernels LIST       kernel library order (default: cpu,ref)\n"
    "  -t, --threads N          threads for the CPU kernels (default: the physical cores)\n"
    "      --plugins DIR        plugin folder\n"
    "      --debug-graph        print the resolved program to stderr\n"
    "      --debug-plan         print the memory plan to stderr\n"
    "      --offline            never use the network (as HF_HUB_OFFLINE=1)\n"
    "  -q, --quiet              no download or conversion progress\n"
    "  -h, --help               this help\n"
    "\n"
    "Exit status: 0 done, 2 usage, 3 model not found, 4 model invalid, 5 the prompt\n"
    "does not fit the context, 130 interrupted (the partial answer is written).\n"
    "Defaults come from ~/.config/radiance/config (radiance.conf(5)).\n";

/* ------------------------------------------------------------ interrupts */

static volatile sig_atomic_t interrupted;

/* The first Ctrl-C asks the reply to stop; a second one means now. */
static void on_sigint(int sig)
{
    (void)sig;
    if (interrupted) _exit(RAD_EXIT_INTERRUPTED);
    interrupted = 1;
}

static void catch_interrupts(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);   /* no SA_RESTART: a blocked read of stdin returns */
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------ the prompt */

typedef RadConvBuf Text;

static int text_add(Text *t, const char *s, size_t n)
{
    if (rad_conv_buf_add(t, s, n)) return rad_error_set(RAD_E_NOMEM, "out of memory reading the prompt");
    return RAD_OK;
}

/* The prompt: the PROMPT arguments joined by spaces, then (stdin not a
** terminal) a blank line and standard input.  RAD_E_INTERRUPT when Ctrl-C
** came while reading. */
static int prompt_text(int argc, char **argv, int piped, Text *t)
{
    int rc = text_add(t, "", 0);
    for (int i = 0; rc == RAD_OK && i < argc; i++) {
        if (i) rc = text_add(t, " ", 1);
        if (rc == RAD_OK) rc = text_add(t, argv[i], strlen(argv[i]));
    }
    if (rc || !piped) return rc;
    char buf[1 << 16];
    size_t args_len = t->len;
    for (;;) {
        ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
        if (got < 0 && errno == EINTR && !interrupted) continue;
        if (interrupted) return rad_error_set(RAD_E_INTERRUPT, "interrupted");
        if (got < 0) return rad_error_set(RAD_E_IO, "reading standard input: %s", strerror(errno));
        if (got == 0) break;
        if (t->len == args_len && args_len > 0 && (rc = text_add(t, "\n\n", 2))) return rc;
        if ((rc = text_add(t, buf, (size_t)got))) return rc;
    }
    return RAD_OK;
}

/* ------------------------------------------------------------ token ids */

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

/* The raw path for reference comparisons: a prompt of ids (--tokens) or raw
** text, every prompt row's logits to a file (--dump-logits), greedy/sampled
** continuation as ids (--tokens) or text.  No chat format, no parser. */
static int run_raw_ids(RadEngine *e, const RadSettings *s, const char *tokens_text, const Text *prompt_in,
                       const char *dump)
{
    RadSampler *sampler = NULL;
    float *logits = NULL;
    int32_t *history = NULL, *prompt = NULL;
    char *piece = NULL;
    int n_prompt = 0, seq = -1, rc;
    const RadText *tok = rad_engine_text(e);
    if (tokens_text) {
        rc = parse_ids(tokens_text, &prompt, &n_prompt);
    } else if (!tok) {
        rc = rad_error_set(RAD_E_NOTFOUND, "the model has no tokenizer: give the prompt as --tokens IDS");
    } else {
        rc = rad_text_encode(tok, prompt_in->data, prompt_in->len, RAD_ENCODE_ADD_SPECIAL | RAD_ENCODE_PARSE_SPECIAL,
                             &prompt, &n_prompt);
        if (rc == RAD_OK && n_prompt == 0) rc = rad_error_set(RAD_E_ARG, "the prompt is empty");
    }
    if (rc) goto done;

    const int vocab = rad_engine_n_vocab(e), ctx = rad_engine_max_ctx(e);
    int n_predict = s->conv.n_predict < 0 ? ctx : s->conv.n_predict;
    logits = malloc((size_t)(dump ? n_prompt : 1) * (size_t)vocab * sizeof *logits);
    history = malloc(((size_t)n_prompt + (size_t)n_predict + 1) * sizeof *history);
    if (!logits || !history) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); goto done; }
    if ((rc = rad_sampler_create(&s->conv.sampler, vocab, &sampler))) goto done;
    if ((rc = rad_engine_seq_new(e, &seq))) goto done;
    if ((rc = rad_engine_eval(e, seq, prompt, n_prompt, logits))) goto done;
    if (dump && (rc = write_logits(dump, logits, (size_t)n_prompt * vocab))) goto done;

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
    for (int i = 0; i < n_predict && !interrupted; i++) {
        int token = rad_sampler_pick(sampler, last, history, n_history, n_history);
        history[n_history++] = token;
        int stop = !s->conv.ignore_eos && is_eos(rad_engine_meta(e), tok, token);
        if (tokens_text) {
            printf("%s%d", i ? "," : "", token);
        } else if (!stop) {
            size_t wrote = 0;
            if ((rc = rad_detok_push(&detok, token, piece, piece_cap, &wrote))) break;
            fwrite(piece, 1, wrote, stdout);
        }
        fflush(stdout);
        if (stop || i + 1 == n_predict || n_history > ctx) break;
        if ((rc = rad_engine_eval(e, seq, &history[n_history - 1], 1, logits))) break;
        last = logits;
    }
    if (!tokens_text && piece) {
        size_t wrote = 0;
        if (rad_detok_flush(&detok, piece, piece_cap, &wrote) == RAD_OK) fwrite(piece, 1, wrote, stdout);
    }
    if (n_predict > 0) printf("\n");
    fflush(stdout);
    if (rc == RAD_OK && interrupted) rc = rad_error_set(RAD_E_INTERRUPT, "interrupted");

done:
    free(piece);
    rad_sampler_free(sampler);
    free(prompt);
    free(logits);
    free(history);
    return rc;
}

/* ------------------------------------------------------------ output */

enum { OUT_TEXT = 0, OUT_JSON, OUT_JSONL };

typedef struct RunOutput {
    int mode;                   /* OUT_* */
    int show_thinking;
    int color_err;              /* dim the reasoning on stderr */
    int stdout_tty;             /* filter control bytes from the answer */
    int last_part;              /* the part written last, -1 none */
    char last_byte;             /* the answer's last byte, for the closing newline */
    size_t content_bytes;
} RunOutput;

/* A JSON string of n bytes; bytes that are not UTF-8 (which the decoder
** should never give) become U+FFFD rather than lose the whole value. */
static json_t *json_text(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    if (j) return j;
    Text t = {0};
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x80) text_add(&t, s + i, 1);
        else text_add(&t, "\xef\xbf\xbd", 3);
    }
    j = json_stringn(t.data ? t.data : "", t.len);
    free(t.data);
    return j;
}

static void emit_event(const char *type, const char *text, size_t n)
{
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "text", json_text(text, n));
    json_dumpf(o, stdout, JSON_COMPACT);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(o);
}

/* The answer on a terminal: drop C0 control bytes but tab and newline, so
** model output can never move the cursor or change the terminal's state. */
static void write_answer(RunOutput *o, const char *text, size_t n)
{
    if (!o->stdout_tty) {
        fwrite(text, 1, n, stdout);
    } else {
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)text[i];
            if (ch >= 0x20 || ch == '\n' || ch == '\t') fputc(ch, stdout);
        }
    }
    fflush(stdout);
}

static void on_part(void *user, RadReplyPart part, const char *text, size_t n)
{
    RunOutput *o = user;
    if ((int)part != o->last_part && o->mode == OUT_TEXT && o->show_thinking) {
        if (o->last_part == RAD_REPLY_REASONING) fputs(o->color_err ? "\033[0m\n" : "\n", stderr);
        if (part == RAD_REPLY_REASONING && o->color_err) fputs("\033[2m", stderr);
        fflush(stderr);
    }
    o->last_part = (int)part;
    switch (part) {
    case RAD_REPLY_CONTENT:
        if (o->mode == OUT_JSONL) emit_event("content", text, n);
        else if (o->mode == OUT_TEXT) write_answer(o, text, n);
        if (n) o->last_byte = text[n - 1];
        o->content_bytes += n;
        break;
    case RAD_REPLY_REASONING:
        if (o->mode == OUT_JSONL) emit_event("reasoning", text, n);
        else if (o->mode == OUT_TEXT && o->show_thinking) {
            fwrite(text, 1, n, stderr);
            fflush(stderr);
        }
        break;
    case RAD_REPLY_TOOL_CALL:   /* one whole call */
        if (o->mode == OUT_JSONL) emit_event("tool_call", text, n);
        else if (o->mode == OUT_TEXT) fprintf(stderr, "radiance: tool call: %.*s\n", (int)n, text);
        break;
    }
}

/* Notices (the context policy at work) stand out on a terminal. */
static void on_notice(void *user, const char *message)
{
    const RunOutput *o = user;
    if (o->color_err) fprintf(stderr, "\033[33mradiance: %s\033[0m\n", message);
    else fprintf(stderr, "radiance: %s\n", message);
}

static json_t *usage_json(const RadConvStats *st)
{
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(st->prompt_tokens));
    json_object_set_new(u, "prompt_evaluated", json_integer(st->prompt_evaluated));
    json_object_set_new(u, "completion_tokens", json_integer(st->completion_tokens));
    json_object_set_new(u, "total_tokens", json_integer(st->prompt_tokens + st->completion_tokens));
    return u;
}

static json_t *timings_json(const RadConvStats *st, double load_ms)
{
    json_t *t = json_object();
    json_object_set_new(t, "load_ms", json_real(load_ms));
    json_object_set_new(t, "render_ms", json_real(st->render_ms));
    json_object_set_new(t, "prefill_ms", json_real(st->prefill_ms));
    json_object_set_new(t, "ttft_ms", json_real(st->ttft_ms));
    json_object_set_new(t, "decode_ms", json_real(st->decode_ms));
    json_object_set_new(t, "prefill_tps", json_real(st->prefill_tps));
    json_object_set_new(t, "decode_tps", json_real(st->decode_tps));
    return t;
}

/* A tool call as JSON when the model wrote valid JSON, else as its text. */
static json_t *tool_call_json(const char *text)
{
    json_t *parsed = json_loads(text, JSON_DECODE_ANY, NULL);
    return parsed ? parsed : json_text(text, strlen(text));
}

/* The --json object, or the --jsonl "done" event. */
static void print_result(const RunOutput *o, const RadConvMessage *m, const RadConvStats *st, RadFinish finish,
                         const char *format, double load_ms)
{
    json_t *r = json_object();
    if (o->mode == OUT_JSONL) json_object_set_new(r, "type", json_string("done"));
    if (o->mode == OUT_JSON) {
        json_object_set_new(r, "content", m ? json_text(m->content, strlen(m->content)) : json_string(""));
        json_object_set_new(r, "reasoning", m && m->reasoning ? json_text(m->reasoning, strlen(m->reasoning))
                                                              : json_null());
        json_t *calls = json_array();
        for (int i = 0; m && i < m->n_tool_calls; i++) json_array_append_new(calls, tool_call_json(m->tool_calls[i]));
        json_object_set_new(r, "tool_calls", calls);
    }
    json_t *ids = json_array();
    for (int i = 0; m && i < m->n_tokens; i++) json_array_append_new(ids, json_integer(m->tokens[i]));
    json_object_set_new(r, "tokens", ids);
    json_object_set_new(r, "finish_reason", json_string(rad_finish_name(finish)));
    json_object_set_new(r, "format", json_string(format));
    json_object_set_new(r, "usage", usage_json(st));
    json_object_set_new(r, "timings", timings_json(st, load_ms));
    json_dumpf(r, stdout, o->mode == OUT_JSON ? JSON_INDENT(2) : JSON_COMPACT);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(r);
}

/* Messages are C strings (the chat format renders them as such), so a NUL
** byte in the prompt becomes U+FFFD, as the tokenizer reads any byte that
** cannot be text. */
static int replace_nul_bytes(Text *t)
{
    size_t nuls = 0;
    for (size_t i = 0; i < t->len; i++) nuls += t->data[i] == 0;
    if (!nuls) return RAD_OK;
    Text out = {0};
    int rc = text_add(&out, "", 0);
    for (size_t i = 0, from = 0; rc == RAD_OK && i <= t->len; i++) {
        if (i < t->len && t->data[i]) continue;
        rc = text_add(&out, t->data + from, i - from);
        if (rc == RAD_OK && i < t->len) rc = text_add(&out, "\xef\xbf\xbd", 3);
        from = i + 1;
    }
    if (rc) { free(out.data); return rc; }
    free(t->data);
    *t = out;
    return RAD_OK;
}

/* Trailing newlines of a chat prompt are how a pipe ends, not part of the
** question. */
static void trim_trailing_newlines(Text *t)
{
    while (t->len && (t->data[t->len - 1] == '\n' || t->data[t->len - 1] == '\r')) t->data[--t->len] = 0;
}

/* ------------------------------------------------------------ the command */

int rad_cmd_run(int argc, char **argv)
{
    double t_start = now_ms();
    enum { TOKENS = 256, DUMP, GRAPH, PLAN, NOEOS, RAW, SHOWTHINK, JSON, JSONL };
    static const struct option options[] = {
        {"model", required_argument, 0, 'm'}, {"tokens", required_argument, 0, TOKENS},
        {"dump-logits", required_argument, 0, DUMP}, RAD_SETTINGS_OPTIONS,
        {"debug-graph", no_argument, 0, GRAPH}, {"debug-plan", no_argument, 0, PLAN},
        {"ignore-eos", no_argument, 0, NOEOS}, {"raw", no_argument, 0, RAW},
        {"system", required_argument, 0, 's'}, {"show-thinking", no_argument, 0, SHOWTHINK},
        {"json", no_argument, 0, JSON}, {"jsonl", no_argument, 0, JSONL},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    /* Flags go over the config file and the environment. */
    RadSettings s;
    RadConfig *cfg = NULL;
    int rc = rad_settings_load(&s, &cfg);
    if (rc) return rad_app_fail(rc);
    const char *tokens_text = NULL, *dump = NULL, *model_flag = NULL;
    int raw = 0, mode = OUT_TEXT, system_flag = 0, debug_graph = 0, debug_plan = 0, c;
    optind = 1;
    while (rc == RAD_OK && (c = getopt_long(argc, argv, "m:n:c:b:qt:s:h", options, NULL)) != -1) {
        switch (c) {
        case 'm': model_flag = optarg; break;
        case TOKENS: tokens_text = optarg; break;
        case DUMP: dump = optarg; break;
        case GRAPH: debug_graph = 1; break;
        case PLAN: debug_plan = 1; break;
        case NOEOS: s.conv.ignore_eos = 1; break;
        case RAW: raw = 1; break;
        case 's': s.system = optarg; system_flag = 1; break;
        case SHOWTHINK: s.show_thinking = 1; break;
        case JSON: mode = OUT_JSON; break;
        case JSONL: mode = OUT_JSONL; break;
        case 'h': fputs(usage, stdout); rad_config_free(cfg); return RAD_EXIT_OK;
        default:
            if (rad_settings_option(&s, c, optarg, &rc)) break;
            fputs(usage, stderr);
            rad_config_free(cfg);
            return RAD_EXIT_USAGE;
        }
    }
    if (rc) {
        rc = rad_app_fail(rc);
        rad_config_free(cfg);
        return rc;
    }

    /* MODEL: -m, else the first argument, else the configured default. */
    const char *model_spec = model_flag;
    if (!model_spec && optind < argc) model_spec = argv[optind++];
    if (!model_spec) model_spec = s.model;
    int have_args = optind < argc, piped = !isatty(STDIN_FILENO);
    const char *problem = NULL;
    if (!model_spec) problem = "a model is required (-m MODEL, or `model` in the config)";
    else if (!tokens_text && !have_args && !piped)
        problem = "a prompt is required: PROMPT arguments or standard input (for a conversation: radiance chat)";
    else if (tokens_text && have_args) problem = "give the prompt as text or as --tokens, not both";
    else if (raw && system_flag) problem = "--system needs the chat format; --raw has none";
    else if ((tokens_text || dump) && mode != OUT_TEXT) problem = "--json and --jsonl need a text prompt without --tokens or --dump-logits";
    if (problem) {
        fprintf(stderr, "radiance run: %s\n", problem);
        rad_config_free(cfg);
        return RAD_EXIT_USAGE;
    }
    if ((rc = rad_sampler_check(&s.conv.sampler))) {
        rad_config_free(cfg);
        return rad_app_fail(rc);
    }
    catch_interrupts();

    RadEngine *e = NULL;
    RadConv *conv = NULL;
    char *model_path = NULL;
    Text prompt = {0};
    RunOutput out = {.mode = mode, .show_thinking = s.show_thinking, .last_part = -1};
    out.color_err = rad_use_color(s.color, STDERR_FILENO);
    out.stdout_tty = isatty(STDOUT_FILENO);
    int exit_status = RAD_EXIT_OK;

    /* Read the prompt before loading the model: a producer upstream runs
    ** meanwhile, and a usage problem shows before a long load. */
    if (!tokens_text && (rc = prompt_text(argc - optind, argv + optind, piped, &prompt))) goto done;
    if (!tokens_text && prompt.len == 0) {
        rc = rad_error_set(RAD_E_ARG, "the prompt is empty");
        goto done;
    }

    /* Any spec becomes a local .rad: downloaded and converted on first use. */
    RadResolveOptions resolve = {.offline = s.offline, .quiet = s.quiet, .plugin_dir = s.plugins};
    if ((rc = rad_model_resolve(model_spec, &resolve, &model_path))) goto done;
    RadEngineOptions opt = {
        .model_path = model_path, .plugin_dir = s.plugins, .kernels = s.kernels, .n_threads = s.threads,
        .max_ctx = s.ctx, .max_tok = s.batch, .kv_type = s.kv_dtype, .mem_budget = s.mem_budget, .logits_all = dump != NULL,
        .debug_graph = debug_graph ? stderr : NULL, .debug_plan = debug_plan ? stderr : NULL,
    };
    if ((rc = rad_engine_open(&opt, &e))) goto done;
    double load_ms = now_ms() - t_start;
    if (interrupted) {
        rc = rad_error_set(RAD_E_INTERRUPT, "interrupted");
        goto done;
    }
    if (tokens_text || dump) {
        rc = run_raw_ids(e, &s, tokens_text, &prompt, dump);
        goto done;
    }

    if ((rc = replace_nul_bytes(&prompt))) goto done;
    if ((rc = rad_conv_new(e, raw ? NULL : rad_engine_chat_format(e), &conv))) goto done;
    const RadChatFormat *format = rad_conv_format(conv);
    if (format) {
        trim_trailing_newlines(&prompt);
        if (prompt.len == 0) {
            rc = rad_error_set(RAD_E_ARG, "the prompt is empty");
            goto done;
        }
        if ((rc = rad_conv_set_system(conv, s.system))) goto done;
    }
    if ((rc = rad_conv_add(conv, "user", prompt.data, NULL))) goto done;

    RadConvCallbacks cb = {.on_part = on_part, .on_notice = on_notice, .user = &out, .stop = &interrupted};
    RadConvStats st;
    rc = rad_conv_reply(conv, &s.conv, &cb, &st);
    const RadConvMessage *reply = NULL;
    RadFinish finish = RAD_FINISH_INTERRUPTED;
    if (rc == RAD_OK) {
        reply = rad_conv_message(conv, rad_conv_count(conv) - 1);
        finish = reply->finish;
    } else if (rc != RAD_E_INTERRUPT) {
        goto done;
    }
    if (mode == OUT_TEXT) {
        if (out.last_part == RAD_REPLY_REASONING && s.show_thinking)
            fputs(out.color_err ? "\033[0m\n" : "\n", stderr);
        if (out.content_bytes && out.last_byte != '\n') fputc('\n', stdout);
        fflush(stdout);
    } else {
        print_result(&out, reply, &st, finish, format ? format->name : "raw", load_ms);
    }
    if (finish == RAD_FINISH_INTERRUPTED) {
        rc = rad_error_set(RAD_E_INTERRUPT, "interrupted; the partial answer was written");
        goto done;
    }
    rc = RAD_OK;

done:
    if (rc) exit_status = rad_app_fail(rc);
    free(prompt.data);
    rad_conv_free(conv);
    rad_engine_close(e);
    free(model_path);
    rad_config_free(cfg);
    return exit_status;
}
