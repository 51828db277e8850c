/*
** cmd_bench.c: `radiance bench`: prompt-processing and generation
** throughput, measured the way llama-bench measures it, so that the two
** programs' numbers can stand side by side (tests/bench/bench_vs_llamacpp.py
** does that, docs/BENCHMARKS.md holds the result).
**
**   ppN  one rad_engine_eval of N tokens into a fresh sequence, cut into
**        steps of at most --batch rows (default N: one step), the last
**        row's logits computed and copied out, as llama.cpp computes the
**        last row's logits of a batch.
**   tgN  N single-token evals into a fresh sequence, starting from an
**        empty context (llama-bench's tg128 does the same), each one a
**        whole step with its logits.
**
** Token ids are pseudo-random from a fixed seed (BOS first when the
** tokenizer adds one), so every run feeds the same ids.  One untimed
** warm-up (a few prompt rows, then one decode step) comes first: it pages
** in the mapped weights.  Each repetition is timed alone; t/s is worked out
** per repetition and summarised as mean, sample standard deviation and
** median.
**
** Memory bandwidth in decode: the bytes of weights a decode step reads
** times the median tg tokens/s.  A step reads every tensor of the container
** in full except the token embedding, of which it gathers one row; when the
** output projection is tied to the embedding (the container holds no
** output.weight) the embedding IS read in full each step, as the lm_head.
** KV-cache reads (which grow with the position) are not counted, so the
** figure is a slight underestimate.
**
** --parallel N,M,...: aggregate throughput with N sequences at once, as
** llama.cpp's llama-batched-bench measures it: N different prompts of -p
** tokens run together (PP: N x p tokens over the time of that prefill, in
** steps of at most --batch rows, default 512), then -n steps in which each
** of the N sequences decodes one token (TG: N x n tokens over their time),
** from a cleared cache each repetition.  The prompts differ, so no prefix is
** shared, and the prefix cache is off.
**
** --draft ngram|MODEL with --prompt-file FILE: speculative decoding on real
** text.  The file's text (used as it is: write the chat markup into it for
** an instruct model) is prefilled untimed; then -n tokens are generated
** greedily, plain and with the drafter, each timed alone; the row says both
** rates, the speedup, how many guesses were accepted, the tokens a verify
** step produced, and whether the two replies were the same tokens (they
** must be).
*/
#include "../app.h"
#include "../config.h"
#include "../chat/draft_setup.h"
#include "../../engine/speculate.h"
#include "../models/model_open.h"
#include "../models/model_store.h"
#include "../../engine/text/rad_text.h"
#include "../../formats/gguf_container.h"
#include "../../formats/rad_container.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static const char usage[] =
    "usage: radiance bench -m MODEL [-p N] [-n N] [-r REPS] [-t N] [-o md|csv|json] [options]\n"
    "\n"
    "Prompt processing (ppN: one evaluation of N tokens) and generation (tgN: N\n"
    "single-token steps from an empty context) throughput, as llama-bench measures\n"
    "them: tokens/s as mean +/- standard deviation and median over the repetitions,\n"
    "and the memory bandwidth a decode step achieves.\n"
    "\n"
    "  -m, --model MODEL     the model (any MODEL spec, as for run)\n"
    "  -p, --n-prompt N      prompt tokens for the pp test (default 512; 0 = no pp test)\n"
    "  -n, --n-gen N         generated tokens for the tg test (default 128; 0 = no tg test)\n"
    "  -r, --repetitions R   timed repetitions of each test (default 5)\n"
    "  -t, --threads N       threads for the CPU kernels (default: the physical cores)\n"
    "  -b, --batch N         rows per prefill step (default: -p, so the prompt is one step)\n"
    "  -o, --output FMT      md (default), csv or json\n"
    "      --parallel LIST   N sequences at once, for each N of LIST (1,4,8): aggregate pp and tg\n"
    "                        t/s as llama-batched-bench measures them\n"
    "      --mem-budget SIZE memory the model may keep (e.g. 8G; default: what is available)\n"
    "      --stream-experts  read a MoE model's routed experts from the file as chosen (.rad;\n"
    "                        default: when the model does not fit the memory budget)\n"
    "      --no-stream-experts  never stream them: page them from the file\n"
    "      --expert-cache SIZE memory for streamed experts (default: what the budget leaves)\n"
    "      --io-depth N      expert reads in flight at once (default 8; 0: one at a time)\n"
    "      --no-read-ahead   streamed experts: never read the next layer's during a prefill\n"
    "      --trace FILE      streamed experts: one JSON line per op (chosen, missed, read ahead,\n"
    "                        time waited), for tests/bench/replay_trace.py\n"
    "      --draft D         with --prompt-file: greedy generation plain and with speculative\n"
    "                        decoding (D: ngram, or a draft model), side by side\n"
    "      --draft-max K     most tokens guessed per step (default 8)\n"
    "      --prompt-file F   the text the --draft test continues\n"
    "      --kernels LIST    kernel library order (default: cpu,ref)\n"
    "      --kv-dtype T      KV cache encoding: f16 (default) or f32\n"
    "      --plugins DIR     plugin folder\n"
    "  -h, --help            this help\n";

enum { OUT_MD, OUT_CSV, OUT_JSON };

/* One test's timings and what served it. */
typedef struct BenchResult {
    char name[32];              /* "pp512", "tg128" */
    int n_prompt, n_gen;        /* one of them is 0 */
    int rows;                   /* rows per step: the band the kernels were chosen for */
    int rows_computed;          /* rows the engine computed in each repetition (all of them) */
    int reps;
    double *ns;                 /* [reps] wall time of each repetition */
    double *ts;                 /* [reps] tokens/s of each repetition */
    double mean, sd, median, min, max;
    char kernels[256];          /* "cpu:300 ref:124": ops per library at `rows` */
    char *kernel_detail;        /* JSON object: "lib:kernel" -> ops, malloc'd */
    /* over every repetition: streamed experts (read, found resident, bytes,
    ** time waited for reads) and the process's page faults */
    int64_t expert_loads, expert_hits, expert_bytes, expert_wait_ns, faults, major_faults;
} BenchResult;

/* What the model is, from its container. */
typedef struct BenchModel {
    const char *path;
    const char *file;           /* the path's last component */
    char name[128];             /* the model's own name (general.name) */
    char arch[64];
    char main_enc[16];          /* the encoding holding the most bytes */
    int64_t tensor_bytes;       /* every tensor */
    int64_t params;             /* elements of every tensor */
    int64_t decode_bytes;       /* read by one decode step */
    int tied;                   /* lm_head is the token embedding */
} BenchModel;

/* ------------------------------------------------------------ helpers */

static int parse_count(const char *flag, const char *text, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi)
        return rad_error_set(RAD_E_ARG, "bench %s: '%s' is not a whole number in %ld..%ld", flag, text, lo, hi);
    *out = (int)v;
    return RAD_OK;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* xorshift64*: the same ids on every run and every machine. */
static uint64_t next_random(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* mean, sample standard deviation (n - 1, as llama-bench), median, min, max. */
static void summarise(BenchResult *r)
{
    double sum = 0, sq = 0;
    for (int i = 0; i < r->reps; i++) sum += r->ts[i];
    r->mean = sum / r->reps;
    for (int i = 0; i < r->reps; i++) sq += (r->ts[i] - r->mean) * (r->ts[i] - r->mean);
    r->sd = r->reps > 1 ? sqrt(sq / (r->reps - 1)) : 0;
    double *sorted = malloc((size_t)r->reps * sizeof *sorted);
    if (!sorted) { r->median = r->min = r->max = r->mean; return; }
    memcpy(sorted, r->ts, (size_t)r->reps * sizeof *sorted);
    qsort(sorted, (size_t)r->reps, sizeof *sorted, cmp_double);
    r->median = r->reps % 2 ? sorted[r->reps / 2] : (sorted[r->reps / 2 - 1] + sorted[r->reps / 2]) / 2;
    r->min = sorted[0];
    r->max = sorted[r->reps - 1];
    free(sorted);
}

/* s as a JSON string, quotes included. */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* s as one CSV field: quoted, inner quotes doubled. */
static void csv_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* ------------------------------------------------------ the model */

/* Sizes from the container the engine maps.  Tensor names are the GGUF
** names both for .gguf and .rad files (docs/FORMAT.md), so the embedding is
** token_embd.weight and an untied head is output.weight. */
static int describe_model(const char *path, const RadModelMeta *meta, BenchModel *m)
{
    RadContainer *c = NULL;
    int rc = rad_container_open_any(path, &c);
    if (rc) return rc;
    memset(m, 0, sizeof *m);
    m->path = path;
    m->file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(m->name, sizeof m->name, "%s", meta->name && meta->name[0] ? meta->name : "?");
    snprintf(m->arch, sizeof m->arch, "%s", meta->arch_id ? meta->arch_id : "?");
    int64_t by_enc[64] = {0};
    const RadContainerTensor *embd = rad_container_find(c, "token_embd.weight");
    m->tied = embd && !rad_container_find(c, "output.weight");
    for (int i = 0; i < c->n_tensors; i++) {
        const RadContainerTensor *t = &c->tensors[i];
        int64_t elems = 1;
        for (int d = 0; d < t->rank; d++) elems *= t->shape[d];
        m->params += elems;
        m->tensor_bytes += (int64_t)t->size;
        if (t->enc >= 0 && t->enc < 64) by_enc[t->enc] += (int64_t)t->size;
    }
    m->decode_bytes = m->tensor_bytes;
    if (embd && !m->tied) m->decode_bytes -= (int64_t)embd->size;
    int best = -1;
    for (int e = 0; e < 64; e++)
        if (by_enc[e] && (best < 0 || by_enc[e] > by_enc[best])) best = e;
    const RadEncodingInfo *info = best >= 0 ? rad_encoding_info(best) : NULL;
    snprintf(m->main_enc, sizeof m->main_enc, "%s", info && info->name ? info->name : "?");
    rad_container_close(c);
    return RAD_OK;
}

/* ---------------------------------------------------- which kernels */

/* Ops per library and per kernel, counted into the result. */
typedef struct KernelTally {
    char names[64][96];         /* "lib:kernel" */
    int counts[64], n_names;
    char libs[8][32];
    int lib_counts[8], n_libs;
} KernelTally;

static void tally(KernelTally *k, const char *lib, const char *kernel)
{
    char full[96];
    snprintf(full, sizeof full, "%s:%s", lib, kernel);
    int i = 0;
    while (i < k->n_names && strcmp(k->names[i], full)) i++;
    if (i == k->n_names && k->n_names < 64) {
        snprintf(k->names[k->n_names], sizeof k->names[0], "%s", full);
        k->counts[k->n_names++] = 0;
    }
    if (i < k->n_names) k->counts[i]++;
    int l = 0;
    while (l < k->n_libs && strcmp(k->libs[l], lib)) l++;
    if (l == k->n_libs && k->n_libs < 8) {
        snprintf(k->libs[k->n_libs], sizeof k->libs[0], "%s", lib);
        k->lib_counts[k->n_libs++] = 0;
    }
    if (l < k->n_libs) k->lib_counts[l]++;
}

/* Which library and kernel serve each op in a step of `rows` rows, read from
** the resolved program rad_engine_print_graph prints: an op line, then one
** line per band ("band LO..HI -> LIB:KERNEL, why"); the engine has no other
** API for it.  An op whose range ends below `rows` (the logits head, which
** sees only the output rows) is counted at its top band, where it runs.
** Fills r->kernels with ops per library and r->kernel_detail with ops per
** kernel (a JSON object). */
static void kernels_at(RadEngine *e, int rows, BenchResult *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    snprintf(r->kernels, sizeof r->kernels, "?");
    if (!f) return;
    rad_engine_print_graph(e, f);
    fclose(f);
    KernelTally *k = calloc(1, sizeof *k);
    if (!k) { free(text); return; }
    /* The current op's chosen band: the one holding rows, else its top one. */
    char lib[32] = "", kernel[64] = "", top_lib[32] = "", top_kernel[64] = "";
    long long top_hi = -1;
    int in_op = 0;
    for (char *line = strtok(text, "\n");; line = strtok(NULL, "\n")) {
        long long lo, hi;
        char l[32], kn[64];
        int op_index;
        int is_op = line && sscanf(line, "%d", &op_index) == 1;
        if ((!line || is_op) && in_op) {
            if (lib[0]) tally(k, lib, kernel);
            else if (top_lib[0]) tally(k, top_lib, top_kernel);
            in_op = 0;
        }
        if (!line) break;
        if (is_op) {
            in_op = 1;
            lib[0] = top_lib[0] = 0;
            top_hi = -1;
            continue;
        }
        if (!in_op || sscanf(line, " band %lld..%lld -> %31[^:,\n]:%63[^,\n]", &lo, &hi, l, kn) != 4) continue;
        if (rows >= lo && rows <= hi) {
            snprintf(lib, sizeof lib, "%s", l);
            snprintf(kernel, sizeof kernel, "%s", kn);
        }
        if (hi > top_hi && hi < rows) {
            top_hi = hi;
            snprintf(top_lib, sizeof top_lib, "%s", l);
            snprintf(top_kernel, sizeof top_kernel, "%s", kn);
        }
    }
    free(text);
    size_t at = 0;
    r->kernels[0] = 0;
    for (int i = 0; i < k->n_libs && at < sizeof r->kernels; i++)
        at += (size_t)snprintf(r->kernels + at, sizeof r->kernels - at, "%s%s:%d", i ? " " : "", k->libs[i],
                               k->lib_counts[i]);
    FILE *d = open_memstream(&r->kernel_detail, &len);
    if (d) {
        fputc('{', d);
        for (int i = 0; i < k->n_names; i++) {
            fprintf(d, "%s", i ? ", " : "");
            json_string(d, k->names[i]);
            fprintf(d, ": %d", k->counts[i]);
        }
        fputc('}', d);
        fclose(d);
    }
    free(k);
}

/* ---------------------------------------------------------- the tests */

/* Time one test: n_prompt tokens in one eval, or n_gen single-token evals,
** each repetition in a fresh sequence. */
static int run_test(RadEngine *e, const int32_t *ids, int n_prompt, int n_gen, float *logits, BenchResult *r)
{
    for (int rep = 0; rep < r->reps; rep++) {
        int seq = -1, rc = rad_engine_seq_new(e, &seq);
        if (rc) return rc;
        RadEngineStats before, after;
        struct rusage use0, use1;
        rad_engine_stats(e, &before);
        getrusage(RUSAGE_SELF, &use0);
        double t0 = now_ns();
        if (n_prompt > 0) {
            rc = rad_engine_eval(e, seq, ids, n_prompt, logits);
        } else {
            for (int i = 0; i < n_gen && !rc; i++) rc = rad_engine_eval(e, seq, &ids[i], 1, logits);
        }
        double t1 = now_ns();
        getrusage(RUSAGE_SELF, &use1);
        rad_engine_stats(e, &after);
        r->expert_loads += after.expert_loads - before.expert_loads;
        r->expert_hits += after.expert_hits - before.expert_hits;
        r->expert_bytes += after.expert_bytes_read - before.expert_bytes_read;
        r->expert_wait_ns += after.expert_wait_ns - before.expert_wait_ns;
        r->faults += (use1.ru_minflt - use0.ru_minflt) + (use1.ru_majflt - use0.ru_majflt);
        r->major_faults += use1.ru_majflt - use0.ru_majflt;
        rad_engine_seq_free(e, seq);
        if (rc) return rc;
        /* every repetition computes every row: one served from cached blocks
        ** would time a lookup, not the model */
        if (after.rows - before.rows != n_prompt + n_gen || after.prefix_rows != before.prefix_rows)
            return rad_error_set(RAD_E_STATE, "bench %s: repetition %d computed %lld of %d rows", r->name, rep + 1,
                                 (long long)(after.rows - before.rows), n_prompt + n_gen);
        r->rows_computed = (int)(after.rows - before.rows);
        r->ns[rep] = t1 - t0;
        r->ts[rep] = (double)(n_prompt + n_gen) * 1e9 / (t1 - t0);
    }
    summarise(r);
    return RAD_OK;
}

/* ------------------------------------------------------------ parallel */

/* One --parallel row: N sequences, prompts of n_prompt, n_gen steps. */
typedef struct ParallelResult {
    int n_seq, n_prompt, n_gen, reps;
    double pp_ts, tg_ts;        /* medians over the repetitions, aggregate tokens/s */
    double pp_ns, tg_ns;        /* the median repetition's times */
    int64_t steps;              /* engine steps in one repetition */
} ParallelResult;

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run_parallel(RadEngine *e, const int32_t *ids, int n_ids, ParallelResult *r)
{
    const int N = r->n_seq, vocab = rad_engine_n_vocab(e);
    int seq[256];
    RadSeqWork work[256];
    int32_t next[256];
    double *pp = calloc((size_t)r->reps, sizeof *pp), *tg = calloc((size_t)r->reps, sizeof *tg);
    float *logits = malloc((size_t)N * vocab * sizeof *logits);
    int rc = pp && tg && logits ? RAD_OK : rad_error_set(RAD_E_NOMEM, "out of memory");
    for (int rep = 0; rep < r->reps && !rc; rep++) {
        int opened = 0;
        for (; opened < N && !rc; opened++) rc = rad_engine_seq_new(e, &seq[opened]);
        for (int s = 0; s < N && !rc; s++)
            work[s] = (RadSeqWork){.seq = seq[s], .tokens = ids + (size_t)s * r->n_prompt % (size_t)(n_ids - r->n_prompt),
                                   .n = r->n_prompt, .logits = RAD_LOGITS_LAST, .out = logits + (size_t)s * vocab};
        RadEngineStats before, after;
        rad_engine_stats(e, &before);
        double t0 = now_ns();
        if (!rc && r->n_prompt > 0) rc = rad_engine_decode(e, work, N);
        double t1 = now_ns();
        for (int i = 0; i < r->n_gen && !rc; i++) {
            for (int s = 0; s < N; s++) {
                next[s] = ids[(i * 31 + s * 7 + 1) % n_ids];
                work[s] = (RadSeqWork){.seq = seq[s], .tokens = &next[s], .n = 1, .logits = RAD_LOGITS_LAST,
                                       .out = logits + (size_t)s * vocab};
            }
            rc = rad_engine_decode(e, work, N);
        }
        double t2 = now_ns();
        rad_engine_stats(e, &after);
        for (int s = 0; s < opened; s++) rad_engine_seq_free(e, seq[s]);
        pp[rep] = t1 - t0;
        tg[rep] = t2 - t1;
        r->steps = after.steps - before.steps;
    }
    if (!rc) {
        r->pp_ns = median_of(pp, r->reps);
        r->tg_ns = median_of(tg, r->reps);
        r->pp_ts = r->n_prompt ? (double)N * r->n_prompt * 1e9 / r->pp_ns : 0;
        r->tg_ts = r->n_gen ? (double)N * r->n_gen * 1e9 / r->tg_ns : 0;
    }
    free(pp);
    free(tg);
    free(logits);
    return rc;
}

static void print_parallel(FILE *f, int format, const BenchModel *m, int threads, const ParallelResult *res, int n)
{
    if (format == OUT_JSON) {
        fprintf(f, "[\n");
        for (int i = 0; i < n; i++) {
            const ParallelResult *r = &res[i];
            fprintf(f, "  {\"file\": ");
            json_string(f, m->file);
            fprintf(f, ", \"threads\": %d, \"n_seq\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"reps\": %d, "
                       "\"pp_ts\": %.4f, \"tg_ts\": %.4f, \"pp_ms\": %.3f, \"tg_ms\": %.3f, \"steps\": %lld}%s\n",
                    threads, r->n_seq, r->n_prompt, r->n_gen, r->reps, r->pp_ts, r->tg_ts, r->pp_ns / 1e6,
                    r->tg_ns / 1e6, (long long)r->steps, i + 1 < n ? "," : "");
        }
        fprintf(f, "]\n");
        return;
    }
    if (format == OUT_CSV) {
        fprintf(f, "file,threads,n_seq,n_prompt,n_gen,reps,pp_ts,tg_ts,pp_ms,tg_ms,steps\n");
        for (int i = 0; i < n; i++)
            fprintf(f, "%s,%d,%d,%d,%d,%d,%.4f,%.4f,%.3f,%.3f,%lld\n", m->file, threads, res[i].n_seq,
                    res[i].n_prompt, res[i].n_gen, res[i].reps, res[i].pp_ts, res[i].tg_ts, res[i].pp_ns / 1e6,
                    res[i].tg_ns / 1e6, (long long)res[i].steps);
        return;
    }
    fprintf(f, "| model | threads | sequences | PP | TG | PP t/s | TG t/s | TG vs 1 sequence |\n");
    fprintf(f, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n; i++) {
        char gain[32] = "";
        if (res[0].n_seq == 1 && res[0].tg_ts > 0) snprintf(gain, sizeof gain, "%.2fx", res[i].tg_ts / res[0].tg_ts);
        fprintf(f, "| %s | %d | %d | %d | %d | %.2f | %.2f | %s |\n", m->file, threads, res[i].n_seq, res[i].n_prompt,
                res[i].n_gen, res[i].pp_ts, res[i].tg_ts, gain);
    }
    fprintf(f, "\nmedian of %d repetitions; aggregate tokens/s over all sequences; PP: N prompts of the given "
               "length together, TG: then that many steps of N tokens.\n", n ? res[0].reps : 0);
}

/* ------------------------------------------------------------- draft */

typedef struct DraftResult {
    int n_prompt, n_gen, reps, k_max;
    double plain_ts, draft_ts;          /* medians */
    RadSpecStats stats;                 /* of the last repetition */
    int identical;
} DraftResult;

/* A whole file into a malloc'd, NUL-terminated buffer. */
static int read_whole(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return rad_error_set(errno == ENOENT ? RAD_E_NOTFOUND : RAD_E_IO, "%s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) { free(buf); buf = NULL; }
            buf = grown;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (!buf) return rad_error_set(RAD_E_NOMEM, "out of memory reading %s", path);
    if (failed) { free(buf); return rad_error_set(RAD_E_IO, "%s: read failed", path); }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return RAD_OK;
}

static int argmax_row(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int greedy_pick(void *ctx, const float *logits, const int32_t *guessed, int n_guessed, int64_t position)
{
    (void)guessed, (void)n_guessed, (void)position;
    return argmax_row(logits, *(const int *)ctx);
}

/* Generate n_gen greedy tokens after prompt, plain (spec NULL) or
** speculative; the tokens go to out. */
static int generate(RadEngine *e, RadSpec *spec, const int32_t *prompt, int n_prompt, int n_gen, int32_t *out,
                    double *ns)
{
    const int vocab = rad_engine_n_vocab(e);
    int seq = -1, rc = rad_engine_seq_new(e, &seq);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    int32_t *context = malloc((size_t)(n_prompt + n_gen + 32) * sizeof *context), picks[32];
    if (!rc && (!logits || !context)) rc = rad_error_set(RAD_E_NOMEM, "out of memory");
    if (!rc) rc = rad_engine_eval(e, seq, prompt, n_prompt, logits);
    double t0 = now_ns();
    int n = 0;
    if (!rc) {
        memcpy(context, prompt, (size_t)n_prompt * sizeof *prompt);
        out[n] = argmax_row(logits, vocab);
        context[n_prompt + n++] = out[0];
    }
    while (!rc && n < n_gen) {
        if (!spec) {
            rc = rad_engine_eval(e, seq, &out[n - 1], 1, logits);
            if (!rc) context[n_prompt + n] = out[n] = argmax_row(logits, vocab), n++;
            continue;
        }
        int got = rad_spec_step(spec, e, seq, context, n_prompt + n, greedy_pick, (void *)&vocab, picks, NULL);
        if (got < 0) { rc = got; break; }
        for (int i = 0; i < got && n < n_gen; i++) context[n_prompt + n] = out[n] = picks[i], n++;
    }
    *ns = now_ns() - t0;
    rad_engine_seq_free(e, seq);
    free(logits);
    free(context);
    return rc;
}

static int run_draft(RadEngine *e, RadDrafter drafter, const int32_t *prompt, DraftResult *r)
{
    int32_t *plain = malloc((size_t)r->n_gen * sizeof *plain), *drafted = malloc((size_t)r->n_gen * sizeof *drafted);
    double *pt = calloc((size_t)r->reps, sizeof *pt), *dt = calloc((size_t)r->reps, sizeof *dt);
    RadSpec spec;
    int rc = plain && drafted && pt && dt ? rad_spec_init(&spec, drafter, e, r->k_max)
                                          : rad_error_set(RAD_E_NOMEM, "out of memory");
    r->identical = 1;
    for (int rep = 0; rep < r->reps && !rc; rep++) {
        rc = generate(e, NULL, prompt, r->n_prompt, r->n_gen, plain, &pt[rep]);
        /* each repetition starts speculation afresh, as a new conversation would */
        RadSpecStats before = spec.stats;
        spec.k = spec.k_max < 4 ? spec.k_max : 4;
        spec.off_for = 0;
        spec.plain_ns = 0;
        spec.n_timed = 0;
        if (!rc) rc = generate(e, &spec, prompt, r->n_prompt, r->n_gen, drafted, &dt[rep]);
        if (!rc && memcmp(plain, drafted, (size_t)r->n_gen * sizeof *plain)) r->identical = 0;
        r->stats = spec.stats;
        r->stats.steps -= before.steps;
        r->stats.drafted -= before.drafted;
        r->stats.accepted -= before.accepted;
        r->stats.picked -= before.picked;
        r->stats.plain_steps -= before.plain_steps;
        r->stats.off_steps -= before.off_steps;
    }
    if (!rc) {
        r->plain_ts = (r->n_gen - 1) * 1e9 / median_of(pt, r->reps);
        r->draft_ts = (r->n_gen - 1) * 1e9 / median_of(dt, r->reps);
    }
    if (plain && drafted && pt && dt && !rc) rad_spec_free(&spec);
    free(plain);
    free(drafted);
    free(pt);
    free(dt);
    return rc;
}

static void print_draft(FILE *f, int format, const BenchModel *m, int threads, const char *draft, const DraftResult *r)
{
    const RadSpecStats *s = &r->stats;
    double acceptance = s->drafted ? (double)s->accepted / s->drafted : 0;
    double per_step = s->steps ? (double)s->picked / s->steps : 0;
    if (format == OUT_JSON) {
        fprintf(f, "[{\"file\": ");
        json_string(f, m->file);
        fprintf(f, ", \"threads\": %d, \"draft\": ", threads);
        json_string(f, draft);
        fprintf(f, ", \"draft_max\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"reps\": %d, \"plain_ts\": %.4f, "
                   "\"draft_ts\": %.4f, \"speedup\": %.4f, \"steps\": %lld, \"proposed\": %lld, \"accepted\": %lld, "
                   "\"acceptance\": %.4f, \"tokens_per_step\": %.4f, \"identical\": %s}]\n",
                r->k_max, r->n_prompt, r->n_gen, r->reps, r->plain_ts, r->draft_ts, r->draft_ts / r->plain_ts,
                (long long)s->steps, (long long)s->drafted, (long long)s->accepted, acceptance, per_step,
                r->identical ? "true" : "false");
        return;
    }
    fprintf(f, "| model | threads | draft | k max | prompt | tokens | plain t/s | draft t/s | speedup | accepted "
               "| tokens a step | same tokens |\n");
    fprintf(f, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    fprintf(f, "| %s | %d | %s | %d | %d | %d | %.2f | %.2f | %.2fx | %lld of %lld (%.0f%%) | %.2f | %s |\n", m->file,
            threads, draft, r->k_max, r->n_prompt, r->n_gen, r->plain_ts, r->draft_ts, r->draft_ts / r->plain_ts,
            (long long)s->accepted, (long long)s->drafted, 100 * acceptance, per_step, r->identical ? "yes" : "NO");
    fprintf(f, "\ngreedy; median of %d repetitions; tokens a step: tokens produced per verify step.\n", r->reps);
}

/* --------------------------------------------------------- reporting */

static void print_md(FILE *f, const BenchModel *m, int threads, const BenchResult *res, int n)
{
    fprintf(f, "| model | size | params | threads | kernels | test | t/s | median t/s | decode GB/s |\n");
    fprintf(f, "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n; i++) {
        const BenchResult *r = &res[i];
        char bw[32] = "";
        if (r->n_gen > 0) snprintf(bw, sizeof bw, "%.2f", (double)m->decode_bytes * r->median / 1e9);
        fprintf(f, "| %s (%s %s) | %.2f MiB | %.2f M | %d | %s | %s | %.2f ± %.2f | %.2f | %s |\n", m->file,
                m->arch, m->main_enc, (double)m->tensor_bytes / (1 << 20), (double)m->params / 1e6, threads,
                r->kernels, r->name, r->mean, r->sd, r->median, bw);
    }
    fprintf(f, "\n%d repetitions each after one untimed warm-up; t/s is mean ± sample standard deviation.\n",
            n ? res[0].reps : 0);
    fprintf(f, "kernels: ops served per library at the test's rows per step (pp: the prompt chunk; tg: 1).\n");
    fprintf(f, "decode GB/s = %.2f MiB of weights read per decode step x median tg t/s; %s; KV-cache reads not "
               "counted.\n",
            (double)m->decode_bytes / (1 << 20),
            m->tied ? "the output projection is tied to the token embedding, so the whole embedding is read "
                      "each step"
                    : "the token embedding is excluded (a step gathers one row of it)");
}

static void print_csv(FILE *f, const BenchModel *m, int threads, const BenchResult *res, int n)
{
    fprintf(f, "file,model,arch,main_encoding,path,tensor_bytes,params,decode_bytes,tied_embedding,threads,kernels,"
               "test,n_prompt,n_gen,rows_per_step,reps,ts_mean,ts_sd,ts_median,ts_min,ts_max,decode_gbs\n");
    for (int i = 0; i < n; i++) {
        const BenchResult *r = &res[i];
        csv_string(f, m->file);
        fputc(',', f);
        csv_string(f, m->name);
        fprintf(f, ",%s,%s,", m->arch, m->main_enc);
        csv_string(f, m->path);
        fprintf(f, ",%lld,%lld,%lld,%d,%d,", (long long)m->tensor_bytes, (long long)m->params,
                (long long)m->decode_bytes, m->tied, threads);
        csv_string(f, r->kernels);
        fprintf(f, ",%s,%d,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f,", r->name, r->n_prompt, r->n_gen, r->rows, r->reps,
                r->mean, r->sd, r->median, r->min, r->max);
        if (r->n_gen > 0) fprintf(f, "%.4f", (double)m->decode_bytes * r->median / 1e9);
        fputc('\n', f);
    }
}

static void print_json(FILE *f, const BenchModel *m, int threads, const BenchResult *res, int n)
{
    fprintf(f, "[\n");
    for (int i = 0; i < n; i++) {
        const BenchResult *r = &res[i];
        fprintf(f, "  {\"file\": ");
        json_string(f, m->file);
        fprintf(f, ", \"model\": ");
        json_string(f, m->name);
        fprintf(f, ", \"arch\": ");
        json_string(f, m->arch);
        fprintf(f, ", \"main_encoding\": ");
        json_string(f, m->main_enc);
        fprintf(f, ", \"path\": ");
        json_string(f, m->path);
        fprintf(f, ",\n   \"tensor_bytes\": %lld, \"params\": %lld, \"decode_bytes\": %lld, \"tied_embedding\": %s,"
                   " \"threads\": %d,\n   \"kernels\": ",
                (long long)m->tensor_bytes, (long long)m->params, (long long)m->decode_bytes,
                m->tied ? "true" : "false", threads);
        json_string(f, r->kernels);
        fprintf(f, ", \"kernel_detail\": %s,\n", r->kernel_detail ? r->kernel_detail : "{}");
        fprintf(f, "   \"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"rows_per_step\": %d, \"reps\": %d, "
                   "\"rows_computed\": %d,\n",
                r->name, r->n_prompt, r->n_gen, r->rows, r->reps, r->rows_computed);
        fprintf(f, "   \"ts_mean\": %.4f, \"ts_sd\": %.4f, \"ts_median\": %.4f, \"ts_min\": %.4f, \"ts_max\": %.4f,",
                r->mean, r->sd, r->median, r->min, r->max);
        if (r->n_gen > 0) fprintf(f, " \"decode_gbs\": %.4f,", (double)m->decode_bytes * r->median / 1e9);
        else fprintf(f, " \"decode_gbs\": null,");
        /* per token, over every repetition */
        const double tokens = (double)(r->n_prompt + r->n_gen) * r->reps;
        const int64_t chosen = r->expert_loads + r->expert_hits;
        fprintf(f, "\n   \"per_token\": {\"page_faults\": %.2f, \"major_faults\": %.2f, \"expert_bytes_read\": %.0f, "
                   "\"expert_reads\": %.3f, \"expert_hit_rate\": ",
                r->faults / tokens, r->major_faults / tokens, r->expert_bytes / tokens, r->expert_loads / tokens);
        if (chosen) fprintf(f, "%.4f", (double)r->expert_hits / (double)chosen);
        else fprintf(f, "null");
        double total_ns = 0;
        for (int k = 0; k < r->reps; k++) total_ns += r->ns[k];
        fprintf(f, ", \"io_wait_ms\": %.3f, \"other_ms\": %.3f},", r->expert_wait_ns / tokens / 1e6,
                (total_ns - (double)r->expert_wait_ns) / tokens / 1e6);
        fprintf(f, "\n   \"samples_ns\": [");
        for (int k = 0; k < r->reps; k++) fprintf(f, "%s%.0f", k ? ", " : "", r->ns[k]);
        fprintf(f, "], \"samples_ts\": [");
        for (int k = 0; k < r->reps; k++) fprintf(f, "%s%.4f", k ? ", " : "", r->ts[k]);
        fprintf(f, "]}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "]\n");
}

/* ------------------------------------------------------------ command */

int rad_cmd_bench(int argc, char **argv)
{
    enum { KERNELS = 256, KVD, PLUGINS, PARALLEL, MEM_BUDGET, DRAFT, DRAFT_MAX, PROMPT_FILE, STREAM, CACHE, NO_STREAM, IO_DEPTH,
           NO_AHEAD, TRACE };
    static const struct option options[] = {
        {"model", required_argument, 0, 'm'}, {"n-prompt", required_argument, 0, 'p'},
        {"n-gen", required_argument, 0, 'n'}, {"repetitions", required_argument, 0, 'r'},
        {"threads", required_argument, 0, 't'}, {"batch", required_argument, 0, 'b'},
        {"output", required_argument, 0, 'o'}, {"kernels", required_argument, 0, KERNELS},
        {"kv-dtype", required_argument, 0, KVD}, {"plugins", required_argument, 0, PLUGINS},
        {"parallel", required_argument, 0, PARALLEL}, {"mem-budget", required_argument, 0, MEM_BUDGET},
        {"stream-experts", no_argument, 0, STREAM}, {"expert-cache", required_argument, 0, CACHE},
        {"no-stream-experts", no_argument, 0, NO_STREAM}, {"io-depth", required_argument, 0, IO_DEPTH},
        {"no-read-ahead", no_argument, 0, NO_AHEAD}, {"trace", required_argument, 0, TRACE},
        {"draft", required_argument, 0, DRAFT}, {"draft-max", required_argument, 0, DRAFT_MAX},
        {"prompt-file", required_argument, 0, PROMPT_FILE},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    RadEngineOptions opt = {0};
    const char *spec = NULL;
    int n_prompt = 512, n_gen = 128, reps = 5, batch = 0, format = OUT_MD, c, rc = RAD_OK;
    int parallel[16], n_parallel = 0, draft_max = RAD_DRAFT_MAX_DEFAULT;
    const char *draft = NULL, *prompt_file = NULL, *trace_path = NULL;
    optind = 1;
    opterr = 0;     /* one line of our own instead of getopt's line plus the usage */
    while (rc == RAD_OK && (c = getopt_long(argc, argv, ":m:p:n:r:t:b:o:h", options, NULL)) != -1) {
        switch (c) {
        case 'm': spec = optarg; break;
        case 'p': rc = parse_count("-p", optarg, 0, 1 << 20, &n_prompt); break;
        case 'n': rc = parse_count("-n", optarg, 0, 1 << 20, &n_gen); break;
        case 'r': rc = parse_count("-r", optarg, 1, 10000, &reps); break;
        case 't': rc = parse_count("-t", optarg, 1, 256, &opt.n_threads); break;
        case 'b': rc = parse_count("-b", optarg, 1, 1 << 20, &batch); break;
        case 'o':
            if (!strcmp(optarg, "md")) format = OUT_MD;
            else if (!strcmp(optarg, "csv")) format = OUT_CSV;
            else if (!strcmp(optarg, "json")) format = OUT_JSON;
            else rc = rad_error_set(RAD_E_ARG, "bench -o: '%s'; choose md, csv or json", optarg);
            break;
        case KERNELS: opt.kernels = optarg; break;
        case KVD:
            opt.kv_type = optarg;
            if (strcmp(optarg, "f16") && strcmp(optarg, "f32"))
                rc = rad_error_set(RAD_E_ARG, "bench --kv-dtype: '%s'; choose f16 or f32", optarg);
            break;
        case PLUGINS: opt.plugin_dir = optarg; break;
        case MEM_BUDGET: rc = rad_parse_bytes("bench --mem-budget", optarg, &opt.mem_budget); break;
        case STREAM: opt.stream_experts = RAD_STREAM_ON; break;
        case NO_STREAM: opt.stream_experts = RAD_STREAM_OFF; break;
        case NO_AHEAD: opt.expert_prefetch = -1; break;
        case TRACE: trace_path = optarg; break;
        case IO_DEPTH:
            rc = parse_count("--io-depth", optarg, 0, 256, &opt.expert_io_depth);
            if (!rc && opt.expert_io_depth == 0) opt.expert_io_depth = -1;     /* one pread at a time */
            break;
        case CACHE: rc = rad_parse_bytes("bench --expert-cache", optarg, &opt.expert_cache_bytes); break;
        case DRAFT: draft = optarg; break;
        case DRAFT_MAX: rc = parse_count("--draft-max", optarg, 1, 16, &draft_max); break;
        case PROMPT_FILE: prompt_file = optarg; break;
        case PARALLEL: {
            char *copy = strdup(optarg), *save = NULL;
            n_parallel = 0;
            for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
                if (n_parallel == 16) rc = rad_error_set(RAD_E_ARG, "bench --parallel: at most 16 counts");
                else rc = parse_count("--parallel", t, 1, 256, &parallel[n_parallel++]);
            }
            free(copy);
            if (!rc && n_parallel == 0) rc = rad_error_set(RAD_E_ARG, "bench --parallel: name a count (1,4,8)");
            break;
        }
        case 'h': fputs(usage, stdout); return RAD_EXIT_OK;
        case ':':
            rc = rad_error_set(RAD_E_ARG, "bench: %s needs a value (see radiance bench --help)", argv[optind - 1]);
            break;
        default:
            if (optopt) rc = rad_error_set(RAD_E_ARG, "bench: unknown option '-%c' (see radiance bench --help)", optopt);
            else rc = rad_error_set(RAD_E_ARG, "bench: unknown option '%s' (see radiance bench --help)", argv[optind - 1]);
            break;
        }
    }
    if (rc) return rad_app_fail(rc);
    if (!spec && optind < argc) spec = argv[optind++];
    if (!spec) return rad_app_fail(rad_error_set(RAD_E_ARG, "bench: a model is required (-m MODEL)"));
    if (optind < argc)
        return rad_app_fail(rad_error_set(RAD_E_ARG, "bench: unexpected argument '%s'", argv[optind]));
    if (n_prompt == 0 && n_gen == 0)
        return rad_app_fail(rad_error_set(RAD_E_ARG, "bench: -p and -n are both 0: nothing to measure"));
    if ((draft != NULL) != (prompt_file != NULL))
        return rad_app_fail(rad_error_set(RAD_E_ARG, "bench: --draft and --prompt-file go together"));
    if (draft && n_parallel)
        return rad_app_fail(rad_error_set(RAD_E_ARG, "bench: --draft and --parallel are separate tests"));

    enum { WARM_ROWS = 16 };
    char *model_path = NULL;
    RadResolveOptions resolve = {.plugin_dir = opt.plugin_dir};
    if ((rc = rad_model_resolve(spec, &resolve, &model_path))) return rad_app_fail(rc);
    opt.model_path = model_path;
    /* The prompt is one step unless --batch says otherwise; every test
    ** starts from an empty sequence, so the context holds the longest. */
    opt.max_tok = batch > 0 ? batch : n_prompt > 0 ? n_prompt : 1;
    int longest = n_prompt > n_gen ? n_prompt : n_gen;
    opt.max_ctx = longest > WARM_ROWS + 1 ? longest : WARM_ROWS + 1;
    int most_seqs = 1;
    for (int i = 0; i < n_parallel; i++) most_seqs = parallel[i] > most_seqs ? parallel[i] : most_seqs;
    if (draft) {
        opt.max_spec = draft_max;
        opt.max_tok = batch > 0 ? batch : 256;
        opt.max_ctx = 0;        /* the model's, up to 4096: the prompt's length is known only later */
    }
    if (n_parallel) {
        /* a sequence holds its prompt and then its generated tokens */
        longest = n_prompt + n_gen;
        opt.max_ctx = longest > WARM_ROWS + 1 ? longest : WARM_ROWS + 1;
        opt.max_seqs = most_seqs;
        opt.max_tok = batch > 0 ? batch : 512;
    }
    /* Every test feeds the same ids again each repetition; the prefix cache
    ** would serve the second one from the first's blocks. */
    opt.no_prefix_cache = 1;

    RadEngine *e = NULL;
    BenchModel model;
    BenchResult res[2];
    int n_res = 0;
    int32_t *ids = NULL;
    float *logits = NULL;
    memset(res, 0, sizeof res);
    if (trace_path && !(opt.expert_trace = fopen(trace_path, "w"))) {
        rc = rad_error_set(RAD_E_IO, "bench --trace %s: %s", trace_path, strerror(errno));
        goto done;
    }
    if ((rc = rad_engine_open(&opt, &e))) goto done;
    rad_model_say_mode(e, 0);
    /* Throughput is measured on the weights as they will stay: the kernels'
    ** copies that an engine makes after it opens are made first. */
    rad_engine_wait_copies(e);
    /* A test past the trained context measures nothing a user would run
    ** (and a huge -p would prefill for minutes): refuse it. */
    const int trained = rad_engine_meta(e)->n_ctx_train;
    if (trained > 0 && longest > trained) {
        rc = rad_error_set(RAD_E_RANGE, "bench: %s %d is past %s's trained context of %d positions",
                           n_prompt >= n_gen ? "-p" : "-n", longest, spec, trained);
        goto done;
    }
    if ((rc = describe_model(model_path, rad_engine_meta(e), &model))) goto done;
    const int vocab = rad_engine_n_vocab(e);
    const RadText *tok = rad_engine_text(e);
    const int bos = tok && rad_text_data(tok)->add_bos ? rad_text_data(tok)->bos_id : -1;
    const int n_ids = (longest > WARM_ROWS ? longest : WARM_ROWS) + 1 + (n_parallel ? most_seqs * n_prompt : 0);
    ids = malloc((size_t)n_ids * sizeof *ids);
    logits = malloc((size_t)vocab * sizeof *logits);
    if (!ids || !logits) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); goto done; }
    uint64_t state = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < n_ids; i++)
        ids[i] = i == 0 && bos >= 0 ? bos : (int32_t)(next_random(&state) % (uint64_t)vocab);

    /* Warm-up, untimed: a short prompt step and one decode step touch every
    ** weight page and every kernel's first-call paths. */
    int seq = -1;
    if ((rc = rad_engine_seq_new(e, &seq))) goto done;
    int warm = n_prompt > 0 ? (n_prompt < WARM_ROWS ? n_prompt : WARM_ROWS) : 1;
    rc = rad_engine_eval(e, seq, ids, warm, logits);
    if (!rc) rc = rad_engine_eval(e, seq, &ids[warm], 1, logits);
    rad_engine_seq_free(e, seq);
    if (rc) goto done;

    if (draft) {
        char *text = NULL;
        size_t len = 0;
        int32_t *prompt = NULL;
        int n_tokens = 0;
        RadEngine *draft_engine = NULL;
        RadDrafter drafter;
        if (!tok) rc = rad_error_set(RAD_E_UNSUPPORTED, "bench --draft: the model has no tokenizer");
        if (!rc) rc = read_whole(prompt_file, &text, &len);
        if (!rc) rc = rad_text_encode(tok, text, len, RAD_ENCODE_ADD_SPECIAL | RAD_ENCODE_PARSE_SPECIAL, &prompt, &n_tokens);
        if (!rc && n_tokens + n_gen + draft_max + 1 > rad_engine_max_ctx(e))
            rc = rad_error_set(RAD_E_RANGE, "bench --draft: %d prompt tokens and %d generated exceed the context of %d",
                               n_tokens, n_gen, rad_engine_max_ctx(e));
        if (!rc) rc = rad_draft_open(draft, e, &opt, 0, 1, &drafter, &draft_engine);
        DraftResult dr = {.n_prompt = n_tokens, .n_gen = n_gen, .reps = reps, .k_max = draft_max};
        if (!rc) rc = run_draft(e, drafter, prompt, &dr);
        if (!rc) print_draft(stdout, format, &model, rad_engine_threads(e), draft, &dr);
        rad_engine_close(draft_engine);
        free(text);
        free(prompt);
        fflush(stdout);
        goto done;
    }
    if (n_parallel) {
        ParallelResult pres[16];
        for (int i = 0; i < n_parallel && !rc; i++) {
            pres[i] = (ParallelResult){.n_seq = parallel[i], .n_prompt = n_prompt, .n_gen = n_gen, .reps = reps};
            rc = run_parallel(e, ids, n_ids, &pres[i]);
        }
        if (!rc) print_parallel(stdout, format, &model, rad_engine_threads(e), pres, n_parallel);
        fflush(stdout);
        goto done;
    }
    for (int t = 0; t < 2; t++) {
        int np = t == 0 ? n_prompt : 0, ng = t == 1 ? n_gen : 0;
        if (np + ng == 0) continue;
        BenchResult *r = &res[n_res++];
        snprintf(r->name, sizeof r->name, "%s%d", np ? "pp" : "tg", np + ng);
        r->n_prompt = np;
        r->n_gen = ng;
        r->reps = reps;
        r->rows = np ? (np < opt.max_tok ? np : opt.max_tok) : 1;
        r->ns = calloc((size_t)reps, sizeof *r->ns);
        r->ts = calloc((size_t)reps, sizeof *r->ts);
        if (!r->ns || !r->ts) { rc = rad_error_set(RAD_E_NOMEM, "out of memory"); goto done; }
        kernels_at(e, r->rows, r);
        if ((rc = run_test(e, ids, np, ng, logits, r))) goto done;
    }
    const int threads = rad_engine_threads(e);
    if (format == OUT_MD) print_md(stdout, &model, threads, res, n_res);
    else if (format == OUT_CSV) print_csv(stdout, &model, threads, res, n_res);
    else print_json(stdout, &model, threads, res, n_res);
    fflush(stdout);

done:
    for (int i = 0; i < 2; i++) {
        free(res[i].ns);
        free(res[i].ts);
        free(res[i].kernel_detail);
    }
    free(ids);
    free(logits);
    rad_engine_close(e);
    if (opt.expert_trace && fclose(opt.expert_trace) && !rc)
        rc = rad_error_set(RAD_E_IO, "bench --trace %s: %s", trace_path, strerror(errno));
    free(model_path);
    return rc ? rad_app_fail(rc) : RAD_EXIT_OK;
}
