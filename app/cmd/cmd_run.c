/*
** cmd_run.c: `radiance run`: one prompt in, one answer out, no questions
** asked -- the pipe contract (radiance(1), RUN).
**
** The prompt goes through the model's chat format (conversation.h) unless
** --raw sends it as is; the answer alone goes to stdout, streamed; reasoning
** only with --show-thinking and only to stderr; --json / --jsonl for
** machines.  Never interactive: with no prompt and a terminal on stdin it is
** a usage error.  Interrupts (interrupt.h): the first SIGINT or SIGTERM
** stops the reply, which is flushed as it stands (the --json object too),
** and the exit status is 130 or 143; a second one exits at once.  A failed
** write to stdout stops the reply and is exit status 1 with the reason.
** --tokens and --dump-logits keep the raw token-id path that the reference
** comparisons drive.
**
** The command line: `run [MODEL] [PROMPT...]`.  With -m, or without a
** default model, the first word is the model.  With a default model
** (config `model`, RADIANCE_MODEL) the first word is the model only when it
** names one (rad_word_is_model: an alias, hf:..., a path), so `run "What is
** the capital of France?"` asks the default model; `--` before the prompt
** makes every word prompt text.
**
** Every exchange is logged in the session database as a session of kind
** "run" (`radiance logs`), unless --no-log or `log = false`; --continue
** takes the last logged exchange up again.
*/
#include "../app.h"
#include "../cli.h"
#include "../config.h"
#include "../interrupt.h"
#include "../chat/conversation.h"
#include "../chat/draft_setup.h"
#include "../chat/model_sampling.h"
#include "../models/model_open.h"
#include "../models/model_store.h"
#include "../sessions/session_db.h"
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
    "       radiance run PROMPT... [options]          (with a default model configured)\n"
    "       radiance run --continue [PROMPT...] [options]\n"
    "       radiance run [-m] MODEL --tokens IDS [options]\n"
    "\n"
    "Answer one prompt and exit. The prompt is the PROMPT arguments joined by\n"
    "spaces, then, when standard input is not a terminal, a blank line and\n"
    "standard input. It goes through the model's chat format (a model without\n"
    "one, or --raw, gets it as is). The answer alone is streamed to stdout.\n"
    "\n"
    "MODEL is an alias (share/models.tsv), hf:ORG/REPO[@REV][:QUANT], or a path\n"
    "(.rad, .gguf, or a Hugging Face folder); a hub model is downloaded and\n"
    "converted once. Without MODEL, the config's `model` (or RADIANCE_MODEL); then\n"
    "the first word is the model only when it names one (-- before the prompt:\n"
    "never). Each exchange is logged (radiance logs) unless --no-log.\n"
    "\n"
    "  -m, --model MODEL        the model\n"
    "      --continue           follow up the last logged exchange (its model by default)\n"
    "      --no-log             do not record this exchange in the database\n"
    "      --allow-special      let special-token strings in the prompt act as control tokens\n"
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
    "      --temp T             temperature (default: the model's, else 0.8; 0 = greedy)\n"
    "      --top-k K            keep the K most likely tokens (default: the model's, else 40)\n"
    "      --top-p P            nucleus mass (default: the model's, else 0.95; 1 = off)\n"
    "      --min-p P            drop tokens below P times the top probability (default 0.05)\n"
    "      --repeat-penalty R   penalty for recent tokens (default: the model's, else 1.1; 1 = off)\n"
    "      --repeat-last-n N    how many recent tokens the penalty sees (default 64)\n"
    "      --seed S             sampling seed, 0..2^64-1 (default -1: random, reported by --json)\n"
    "  -c, --ctx N              context length (default: the model's, at most 4096)\n"
    "      --context-policy P   when prompt and reply outgrow the context: drop-oldest\n"
    "                           (default; drops the oldest turns, with a notice) or refuse\n"
    "      --reply-reserve N    room kept for the reply when -n is -1 (default min(512, ctx/4))\n"
    "  -b, --batch N            rows per prefill step (default 256)\n"
    "      --kv-dtype T         KV cache encoding: f16 (default) or f32\n"
    "      --mem-budget SIZE    memory the model may keep (e.g. 8G; default: what is available)\n"
    "      --stream-experts     read a MoE model's routed experts from the file as chosen (.rad;\n"
    "                           default: when the model does not fit the memory budget)\n"
    "      --no-stream-experts  never stream them: page them from the file\n"
    "      --expert-cache SIZE  memory for streamed experts (default: what the budget leaves)\n"
    "      --io-depth N         expert reads in flight at once (default 8; 0: one at a time)\n"
    "      --draft D            speculative decoding: ngram (prompt lookup) or a draft model\n"
    "                           with the same vocabulary; the output is the same, faster\n"
    "      --draft-max K        most tokens guessed per step (default 8, 1..16)\n"
    "      --kernels LIST       kernel library order (default: cpu,ref)\n"
    "  -t, --threads N          threads for the CPU kernels (default: the physical cores)\n"
    "      --plugins DIR        plugin folder\n"
    "      --debug-graph        print the resolved program to stderr\n"
    "      --debug-plan         print the memory plan to stderr\n"
    "      --offline            never use the network (as HF_HUB_OFFLINE=1)\n"
    "  -q, --quiet              no download or conversion progress\n"
    "  -h, --help               this help\n"
    "\n"
    "Exit status: 0 done, 1 output failed, 2 usage, 3 model not found, 4 model invalid,\n"
    "5 the prompt does not fit the context, 130 (SIGINT) or 143 (SIGTERM) interrupted\n"
    "(the partial answer is written). Defaults come from ~/.config/radiance/config\n"
    "(radiance.conf(5)).\n";

/* ------------------------------------------------------------ stopping */

/* Set by a signal (interrupt.h) or by a failed write to stdout: the reply
** stops, keeping what it wrote. */
static volatile sig_atomic_t stop_reply;
static int stdout_failed;       /* errno of the first failed write to stdout, 0 none */

/* Check a write to stdout; on failure remember why and stop generating. */
static void check_stdout(void)
{
    if (stdout_failed) return;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        stdout_failed = errno ? errno : EIO;
        stop_reply = 1;
    }
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
        if (got < 0 && errno == EINTR && !stop_reply) continue;
        if (stop_reply) return rad_error_set(RAD_E_INTERRUPT, "interrupted");
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

/* Write the logits under a temporary name and rename it into place
** (cli.h), so an interrupted or failed run never leaves a partial file. */
static int write_logits(const char *path, const float *logits, size_t n)
{
    RadOutFile f;
    int rc = rad_outfile_open(&f, path);
    if (rc) return rc;
    if (fwrite(logits, sizeof *logits, n, f.f) != n) {
        int err = errno;
        rad_outfile_abort(&f);
        return rad_error_set(RAD_E_IO, "--dump-logits %s: write failed: %s", path, strerror(err));
    }
    return rad_outfile_commit(&f);
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
    RadSamplerParams params;
    rad_settings_plain_sampler(s, &params);
    if (s->conv.seed_random) params.seed = rad_conv_random_seed();
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
        rc = rad_text_encode(tok, prompt_in->data, prompt_in->len,
                             RAD_ENCODE_ADD_SPECIAL | (s->conv.allow_special ? RAD_ENCODE_PARSE_SPECIAL : 0), &prompt,
                             &n_prompt);
        if (rc == RAD_OK && n_prompt == 0) rc = rad_error_set(RAD_E_ARG, "the prompt is empty");
    }
    if (rc) goto done;

    const int vocab = rad_engine_n_vocab(e), ctx = rad_engine_max_ctx(e);
    int n_predict = s->conv.n_predict < 0 ? ctx : s->conv.n_predict;
    logits = malloc((size_t)(dump ? n_prompt : 1) * (size_t)vocab * sizeof *logits);
    history = malloc(((size_t)n_prompt + (size_t)n_predict + 1) * sizeof *history);
    if (!logits || !history) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); goto done; }
    if ((rc = rad_sampler_create(&params, vocab, &sampler))) goto done;
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
    for (int i = 0; i < n_predict && !stop_reply; i++) {
        /* the penalty sees the generated tokens only, as in conversations */
        int token = rad_sampler_pick(sampler, last, history + n_prompt, n_history - n_prompt, n_history);
        history[n_history++] = token;
        int stop = !s->conv.ignore_eos && is_eos(rad_engine_meta(e), tok, token);
        if (tokens_text) {
            printf("%s%d", i ? "," : "", token);
        } else if (!stop) {
            size_t wrote = 0;
            if ((rc = rad_detok_push(&detok, token, piece, piece_cap, &wrote))) break;
            fwrite(piece, 1, wrote, stdout);
        }
        check_stdout();
        if (stop || i + 1 == n_predict || n_history > ctx) break;
        if ((rc = rad_engine_eval(e, seq, &history[n_history - 1], 1, logits))) break;
        last = logits;
    }
    if (!tokens_text && piece) {
        size_t wrote = 0;
        if (rad_detok_flush(&detok, piece, piece_cap, &wrote) == RAD_OK) fwrite(piece, 1, wrote, stdout);
    }
    if (n_predict > 0) printf("\n");
    check_stdout();
    if (rc == RAD_OK && stdout_failed)
        rc = rad_error_set(RAD_E_IO, "writing standard output: %s", strerror(stdout_failed));
    if (rc == RAD_OK && stop_reply) rc = rad_error_set(RAD_E_INTERRUPT, "interrupted");

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
    int stdout_tty;             /* make the answer safe for the terminal (cli.h) */
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
    if (stdout_failed) return;
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "text", json_text(text, n));
    if (rad_json_print(o, stdout)) check_stdout();
}

/* The answer.  Piped, the model's bytes as they are (the pipe contract);
** on a terminal, every control character shown as a visible escape, so
** model output can never move the cursor or change the terminal's state. */
static void write_answer(RunOutput *o, const char *text, size_t n)
{
    if (stdout_failed) return;
    if (!o->stdout_tty) fwrite(text, 1, n, stdout);
    else rad_safe_fwrite(stdout, text, n, RAD_SAFE_TEXT);
    check_stdout();
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
            rad_safe_fwrite(stderr, text, n, RAD_SAFE_TEXT);
            fflush(stderr);
        }
        break;
    case RAD_REPLY_TOOL_CALL:   /* one whole call */
        if (o->mode == OUT_JSONL) emit_event("tool_call", text, n);
        else if (o->mode == OUT_TEXT) {
            fputs("radiance: tool call: ", stderr);
            rad_safe_fwrite(stderr, text, n, RAD_SAFE_LINE);
            fputc('\n', stderr);
        }
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
    json_object_set_new(t, "load_ms", rad_json_ms(load_ms));
    json_object_set_new(t, "render_ms", rad_json_ms(st->render_ms));
    json_object_set_new(t, "prefill_ms", rad_json_ms(st->prefill_ms));
    json_object_set_new(t, "ttft_ms", rad_json_ms(st->ttft_ms));
    json_object_set_new(t, "decode_ms", rad_json_ms(st->decode_ms));
    json_object_set_new(t, "prefill_tps", rad_json_ms(st->prefill_tps));
    json_object_set_new(t, "decode_tps", rad_json_ms(st->decode_tps));
    if (st->draft_steps > 0) {
        json_t *d = json_object();
        json_object_set_new(d, "steps", json_integer(st->draft_steps));
        json_object_set_new(d, "proposed", json_integer(st->draft_proposed));
        json_object_set_new(d, "accepted", json_integer(st->draft_accepted));
        json_object_set_new(d, "acceptance", rad_json_f32(st->draft_proposed ? (float)st->draft_accepted /
                                                                                   (float)st->draft_proposed : 0.0f));
        json_object_set_new(d, "tokens_per_step", rad_json_f32((float)st->completion_tokens / (float)st->draft_steps));
        json_object_set_new(t, "speculation", d);
    }
    return t;
}

/* The sampler a reply was made with, the seed it drew included. */
static json_t *sampler_json(const RadSamplerParams *p, uint64_t seed)
{
    json_t *o = json_object();
    json_object_set_new(o, "temperature", rad_json_f32(p->temperature));
    json_object_set_new(o, "top_k", json_integer(p->top_k));
    json_object_set_new(o, "top_p", rad_json_f32(p->top_p));
    json_object_set_new(o, "min_p", rad_json_f32(p->min_p));
    json_object_set_new(o, "repeat_penalty", rad_json_f32(p->repeat_penalty));
    json_object_set_new(o, "repeat_last_n", json_integer(p->repeat_last_n));
    if (seed > (uint64_t)INT64_MAX) {
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
        json_object_set_new(o, "seed", json_string(buf));
    } else {
        json_object_set_new(o, "seed", json_integer((json_int_t)seed));
    }
    return o;
}

/* A tool call as JSON when the model wrote valid JSON, else as its text. */
static json_t *tool_call_json(const char *text)
{
    json_t *parsed = json_loads(text, JSON_DECODE_ANY, NULL);
    return parsed ? parsed : json_text(text, strlen(text));
}

/* The --json object, or the --jsonl "done" event: one line. */
static void print_result(const RunOutput *o, const RadConvMessage *m, const RadConvStats *st, RadFinish finish,
                         const char *format, const RadSamplerParams *sampler, double load_ms, const char *session)
{
    if (stdout_failed) return;
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
    json_object_set_new(r, "sampler", sampler_json(sampler, st->seed));
    json_object_set_new(r, "usage", usage_json(st));
    json_object_set_new(r, "timings", timings_json(st, load_ms));
    json_object_set_new(r, "session", session && session[0] ? json_string(session) : json_null());
    if (rad_json_print(r, stdout)) check_stdout();
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

/* ------------------------------------------------------------ the log */

/* The exchange being continued (--continue), or the one being logged. */
typedef struct RunLog {
    RadSessionDb *db;
    char id[RAD_SESSION_ID_LEN + 1];    /* "" until there is a session */
    RadSession info;                    /* --continue: the session taken up */
    RadMessageList messages;            /* --continue: its messages along the current branch */
} RunLog;

static void run_log_free(RunLog *l)
{
    rad_message_list_free(&l->messages);
    rad_session_free(&l->info);
    rad_sdb_close(l->db);
    memset(l, 0, sizeof *l);
}

/* --continue: the last logged exchange and its messages. */
static int run_log_last(RunLog *l)
{
    int rc = rad_sdb_open(NULL, &l->db);
    if (!rc) rc = rad_session_latest_kind(l->db, "run", l->id);
    if (rc == RAD_E_NOTFOUND)
        return rad_error_set(RAD_E_NOTFOUND, "no logged exchange to continue yet (radiance logs lists them)");
    if (!rc) rc = rad_session_get(l->db, l->id, &l->info);
    if (!rc) rc = rad_session_branch(l->db, l->id, 0, &l->messages);
    return rc;
}

/* Record the prompt and its reply: in the continued session, else in a new
** one of kind "run".  A failure is one line on stderr; the answer stands. */
static void run_log_write(RunLog *l, const RadSettings *s, const char *model_spec, const RadEngine *e,
                          const char *system, const char *prompt, const RadConvMessage *reply,
                          const RadSamplerParams *sampler, uint64_t seed)
{
    RadSamplerParams used = *sampler;
    used.seed = seed;
    char *sampler_text = rad_session_sampler_json(&used), *tools = NULL;
    int rc = l->db ? RAD_OK : rad_sdb_open(NULL, &l->db);
    if (!rc && !l->id[0]) {
        RadSessionFields f = {.title = "", .model_id = rad_engine_model_id(e), .model_name = model_spec,
                              .system_prompt = system, .sampler_json = sampler_text, .kind = "run"};
        rc = rad_session_create(l->db, &f, l->id);
    } else if (!rc) {
        RadSessionFields f = {.model_id = rad_engine_model_id(e), .model_name = model_spec};
        rc = rad_session_update(l->db, l->id, &f);
    }
    RadMessage user = {.role = "user", .content = prompt};
    if (!rc) rc = rad_session_add_message(l->db, l->id, RAD_PARENT_LEAF, &user, NULL);
    if (!rc && reply) {
        if (reply->n_tool_calls) {
            json_t *a = json_array();
            for (int k = 0; k < reply->n_tool_calls; k++) json_array_append_new(a, json_string(reply->tool_calls[k]));
            tools = json_dumps(a, JSON_COMPACT);
            json_decref(a);
        }
        RadMessage m = {
            .role = "assistant", .content = reply->content, .reasoning = reply->reasoning, .tool_calls_json = tools,
            .n_tokens = reply->n_tokens, .prompt_tokens = reply->stats.prompt_tokens,
            .prompt_evaluated = reply->stats.prompt_evaluated, .completion_tokens = reply->stats.completion_tokens,
            .prefill_ms = reply->stats.prefill_ms, .ttft_ms = reply->stats.ttft_ms, .decode_ms = reply->stats.decode_ms,
            .finish = rad_finish_name(reply->finish), .sampler_json = sampler_text,
            .model_id = rad_engine_model_id(e), .model_name = model_spec,
        };
        rc = rad_session_add_message(l->db, l->id, RAD_PARENT_LEAF, &m, NULL);
    }
    (void)s;
    if (rc) fprintf(stderr, "radiance: the exchange was not logged: %s\n", rad_safe(rad_error_message()));
    free(tools);
    free(sampler_text);
}

/* ------------------------------------------------------------ the command */

int rad_cmd_run(int argc, char **argv)
{
    double t_start = rad_now_ms();
    rad_interrupt_install();    /* until the reply starts, a signal exits (removing partial files) */
    enum { TOKENS = 256, DUMP, GRAPH, PLAN, NOEOS, RAW, SHOWTHINK, JSON, JSONL, CONTINUE, NOLOG };
    static const struct option options[] = {
        {"model", required_argument, 0, 'm'}, {"tokens", required_argument, 0, TOKENS},
        {"dump-logits", required_argument, 0, DUMP}, RAD_SETTINGS_OPTIONS,
        {"debug-graph", no_argument, 0, GRAPH}, {"debug-plan", no_argument, 0, PLAN},
        {"ignore-eos", no_argument, 0, NOEOS}, {"raw", no_argument, 0, RAW},
        {"system", required_argument, 0, 's'}, {"show-thinking", no_argument, 0, SHOWTHINK},
        {"json", no_argument, 0, JSON}, {"jsonl", no_argument, 0, JSONL},
        {"continue", no_argument, 0, CONTINUE}, {"no-log", no_argument, 0, NOLOG},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    /* Flags go over the config file and the environment. */
    RadSettings s;
    RadConfig *cfg = NULL;
    int rc = rad_settings_load(&s, &cfg);
    if (rc) return rad_app_fail(rc);
    const char *tokens_text = NULL, *dump = NULL, *model_flag = NULL;
    int raw = 0, mode = OUT_TEXT, system_flag = 0, debug_graph = 0, debug_plan = 0, want_continue = 0, c;
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
        case CONTINUE: want_continue = 1; break;
        case NOLOG: s.log = 0; break;
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

    /* MODEL: -m; else the first word when it names a model, or always when
    ** there is no default to fall back on; else the configured default (or
    ** with --continue the model of the exchange taken up). */
    const char *model_spec = model_flag;
    int prompt_only = optind > 1 && !strcmp(argv[optind - 1], "--");
    const char *problem = NULL;
    char problem_buf[512];
    if (!model_spec && optind < argc && !prompt_only) {
        int no_default = !s.model && !want_continue;
        if (rad_word_is_model(argv[optind]) || (no_default && (optind + 1 < argc || tokens_text || dump)))
            model_spec = argv[optind++];
        else if (no_default) {
            snprintf(problem_buf, sizeof problem_buf,
                     "'%.60s%s' is not a model (no such file, alias or hf: repository), and no default model is "
                     "configured: radiance run MODEL PROMPT, or `model = ...` in radiance.conf(5)",
                     argv[optind], strlen(argv[optind]) > 60 ? "..." : "");
            problem = problem_buf;
        }
    }
    RunLog log;
    memset(&log, 0, sizeof log);
    if (!problem && want_continue) {
        if (tokens_text || dump) problem = "--continue needs a text prompt, not --tokens or --dump-logits";
        else if ((rc = run_log_last(&log))) {
            rc = rad_app_fail(rc);
            run_log_free(&log);
            rad_config_free(cfg);
            return rc;
        }
    }
    if (!model_spec && want_continue && !problem) model_spec = log.info.model_name[0] ? log.info.model_name : s.model;
    if (!model_spec && !problem) model_spec = s.model;
    int have_args = optind < argc, piped = !isatty(STDIN_FILENO);
    if (problem) {
    } else if (!model_spec) problem = "a model is required (radiance run MODEL PROMPT, or `model` in the config)";
    else if (!tokens_text && !have_args && !piped)
        problem = "a prompt is required: PROMPT arguments or standard input (for a conversation: radiance chat)";
    else if (tokens_text && have_args) problem = "give the prompt as text or as --tokens, not both";
    else if (raw && system_flag) problem = "--system needs the chat format; --raw has none";
    else if ((tokens_text || dump) && mode != OUT_TEXT) problem = "--json and --jsonl need a text prompt without --tokens or --dump-logits";
    if (problem) {
        fprintf(stderr, "radiance run: %s\n", rad_safe(problem));
        run_log_free(&log);
        rad_config_free(cfg);
        return RAD_EXIT_USAGE;
    }
    if ((rc = rad_sampler_check(&s.conv.sampler))) {
        run_log_free(&log);
        rad_config_free(cfg);
        return rad_app_fail(rc);
    }

    RadEngine *e = NULL, *draft_engine = NULL;
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
        .max_ctx = s.ctx, .max_tok = s.batch, .kv_type = s.kv_dtype, .mem_budget = s.mem_budget,
        .stream_experts = s.stream_experts, .expert_cache_bytes = s.expert_cache, .expert_io_depth = s.io_depth,
        .logits_all = dump != NULL,
        .max_spec = s.draft ? (s.draft_max > 0 ? s.draft_max : RAD_DRAFT_MAX_DEFAULT) : 0,
        .debug_graph = debug_graph ? stderr : NULL, .debug_plan = debug_plan ? stderr : NULL,
    };
    RadModelOpen loading;
    rad_model_open_prepare(&loading, &opt, model_spec, s.quiet || debug_graph || debug_plan);
    rc = rad_engine_open(&opt, &e);
    rad_model_open_done(&loading);
    if (rc) goto done;
    rad_model_say_mode(e, s.quiet);
    double load_ms = rad_now_ms() - t_start;
    /* From here a signal stops the reply and the answer is still written. */
    rad_interrupt_arm(&stop_reply, 2);
    if (tokens_text || dump) {
        rc = run_raw_ids(e, &s, tokens_text, &prompt, dump);
        goto done;
    }

    RadModelSampling recommended;
    rad_model_sampling_of(model_path, e, &recommended);
    rad_settings_apply_model(&s, &recommended);
    if ((rc = replace_nul_bytes(&prompt))) goto done;
    if ((rc = rad_conv_new(e, raw ? NULL : rad_engine_chat_format(e), &conv))) goto done;
    if (s.draft) {
        RadDrafter drafter;
        if ((rc = rad_draft_open(s.draft, e, &opt, s.offline, s.quiet, &drafter, &draft_engine))) goto done;
        if ((rc = rad_conv_set_drafter(conv, drafter, rad_engine_max_spec(e)))) goto done;
    }
    const RadChatFormat *format = rad_conv_format(conv);
    const char *system = s.system;
    if (want_continue && !system_flag) system = log.info.system_prompt;
    if (format) {
        trim_trailing_newlines(&prompt);
        if (prompt.len == 0) {
            rc = rad_error_set(RAD_E_ARG, "the prompt is empty");
            goto done;
        }
        if ((rc = rad_conv_set_system(conv, system))) goto done;
    }
    for (int i = 0; want_continue && i < log.messages.n; i++) {
        const RadMessage *m = &log.messages.v[i];
        if (!strcmp(m->role, "system")) continue;
        if ((rc = rad_conv_add(conv, m->role, m->content, m->reasoning))) goto done;
    }
    if ((rc = rad_conv_add(conv, "user", prompt.data, NULL))) goto done;

    RadConvCallbacks cb = {.on_part = on_part, .on_notice = on_notice, .user = &out, .stop = &stop_reply};
    RadConvStats st;
    memset(&st, 0, sizeof st);
    rc = rad_conv_reply(conv, &s.conv, &cb, &st);
    const RadConvMessage *reply = NULL;
    RadFinish finish = RAD_FINISH_INTERRUPTED;
    if (rc == RAD_OK) {
        reply = rad_conv_message(conv, rad_conv_count(conv) - 1);
        finish = reply->finish;
        if (stdout_failed && finish == RAD_FINISH_INTERRUPTED) finish = RAD_FINISH_LENGTH;
    } else if (rc != RAD_E_INTERRUPT) {
        goto done;
    }
    if (s.log && (reply || finish == RAD_FINISH_INTERRUPTED))
        run_log_write(&log, &s, model_spec, e, format ? system : NULL, prompt.data, reply, &s.conv.sampler, st.seed);
    if (mode == OUT_TEXT) {
        if (out.last_part == RAD_REPLY_REASONING && s.show_thinking)
            fputs(out.color_err ? "\033[0m\n" : "\n", stderr);
        if (out.content_bytes && out.last_byte != '\n' && !stdout_failed) fputc('\n', stdout);
        check_stdout();
    } else {
        print_result(&out, reply, &st, finish, format ? format->name : "raw", &s.conv.sampler, load_ms,
                     s.log ? log.id : NULL);
    }
    if (stdout_failed) {
        rc = rad_error_set(RAD_E_IO, "writing the answer to standard output: %s", strerror(stdout_failed));
        goto done;
    }
    if (finish == RAD_FINISH_INTERRUPTED) {
        rc = rad_error_set(RAD_E_INTERRUPT, "interrupted; the partial answer was written");
        goto done;
    }
    rc = RAD_OK;

done:
    if (rc) exit_status = rad_app_fail(rc);
    if (rc == RAD_E_INTERRUPT) exit_status = rad_interrupt_status();
    free(prompt.data);
    rad_conv_free(conv);
    rad_engine_close(draft_engine);       /* after the conversation's drafter */
    rad_engine_close(e);
    free(model_path);
    run_log_free(&log);
    rad_config_free(cfg);
    return exit_status;
}
