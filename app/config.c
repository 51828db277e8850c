/*
** config.c: the config file, the RADIANCE_* environment, and the one table
** of setting keys both feed (contract in config.h; every key documented in
** man/radiance.conf.5, which a test keeps in step with this table).
**
** Values are checked where they are read, by the same parsers the flags
** use, so `temp = hot` fails at load with the file and line rather than
** later with a flag name the user never typed.
*/
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef struct ConfigEntry {
    char *key, *value;
    int line;
} ConfigEntry;

struct RadConfig {
    char path[4096];
    ConfigEntry *entries;
    int n, cap;
};

/* ------------------------------------------------------------ parsers */

int rad_parse_int(const char *what, const char *text, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi)
        return rad_error_set(RAD_E_ARG, "%s: '%s' is not a whole number in %ld..%ld", what, text, lo, hi);
    *out = (int)v;
    return RAD_OK;
}

int rad_parse_bytes(const char *what, const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    int shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (end == text || *end || errno || v <= 0 || v > (INT64_MAX >> shift))
        return rad_error_set(RAD_E_ARG, "%s: '%s' is not a size (a whole number, optionally with K, M, G or T)",
                             what, text);
    *out = (int64_t)v << shift;
    return RAD_OK;
}

int rad_parse_float(const char *what, const char *text, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (end == text || *end || errno || !isfinite(v))
        return rad_error_set(RAD_E_ARG, "%s: '%s' is not a number", what, text);
    *out = v;
    return RAD_OK;
}

int rad_parse_bool(const char *what, const char *text, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(text, yes[i])) { *out = 1; return RAD_OK; }
        if (!strcasecmp(text, no[i])) { *out = 0; return RAD_OK; }
    }
    return rad_error_set(RAD_E_ARG, "%s: '%s' is not true or false (also yes/no, on/off, 1/0)", what, text);
}

int rad_parse_think(const char *what, const char *text, int *out)
{
    if (!strcasecmp(text, "default")) { *out = -1; return RAD_OK; }
    int on;
    if (rad_parse_bool(what, text, &on))
        return rad_error_set(RAD_E_ARG, "%s: '%s'; choose on, off or default", what, text);
    *out = on;
    return RAD_OK;
}

int rad_parse_color(const char *what, const char *text, int *out)
{
    if (!strcmp(text, "auto")) *out = RAD_COLOR_AUTO;
    else if (!strcmp(text, "always")) *out = RAD_COLOR_ALWAYS;
    else if (!strcmp(text, "never")) *out = RAD_COLOR_NEVER;
    else return rad_error_set(RAD_E_ARG, "%s: '%s'; choose auto, always or never", what, text);
    return RAD_OK;
}

static int parse_in(const char *what, const char *text, float lo, int lo_open, float hi, int hi_open, float *out)
{
    float v;
    if (rad_parse_float(what, text, &v)) return RAD_E_ARG;
    int low_ok = lo_open ? v > lo : v >= lo, high_ok = hi_open ? v < hi : v <= hi;
    if (!low_ok || !high_ok)
        return rad_error_set(RAD_E_ARG, "%s: %s is outside %c%g, %g%c", what, text, lo_open ? '(' : '[', (double)lo,
                             (double)hi, hi_open ? ')' : ']');
    *out = v;
    return RAD_OK;
}

int rad_use_color(int color, int fd)
{
    if (color == RAD_COLOR_NEVER || getenv("NO_COLOR")) return 0;
    if (color == RAD_COLOR_ALWAYS) return 1;
    const char *term = getenv("TERM");
    return isatty(fd) && term && term[0] && strcmp(term, "dumb") != 0;
}

/* A seed: a whole number in 0..2^64-1, or -1 for a fresh random seed per reply. */
static int parse_seed(const char *what, const char *text, RadConvSettings *conv)
{
    if (!strcmp(text, "-1") || !strcmp(text, "random")) {
        conv->seed_random = 1;
        return RAD_OK;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end || errno || text[0] == '-' || text[0] == '+')
        return rad_error_set(RAD_E_ARG, "%s: '%s' is not a seed: a whole number in 0..18446744073709551615, "
                                        "or -1 for a random one",
                             what, text);
    conv->sampler.seed = (uint64_t)v;
    conv->seed_random = 0;
    return RAD_OK;
}

/* ------------------------------------------------------------ the keys */

int rad_settings_set(RadSettings *s, const char *key, const char *value, const char *where)
{
    /* Name what the user wrote: the flag itself, else file:line and key. */
    char what[600];
    if (where && where[0] == '-') snprintf(what, sizeof what, "%s", where);
    else snprintf(what, sizeof what, "%s%s%s", where ? where : "", where ? ": " : "", key);
    RadSamplerParams *sp = &s->conv.sampler;
    static const struct { const char *key; unsigned bit; } sampler_keys[] = {
        {"temp", RAD_SET_TEMP}, {"top_k", RAD_SET_TOP_K}, {"top_p", RAD_SET_TOP_P}, {"min_p", RAD_SET_MIN_P},
        {"repeat_penalty", RAD_SET_REPEAT_PENALTY}, {"repeat_last_n", RAD_SET_REPEAT_LAST_N}, {"seed", RAD_SET_SEED},
    };
    for (size_t k = 0; k < sizeof sampler_keys / sizeof *sampler_keys; k++)
        if (!strcmp(key, sampler_keys[k].key)) s->sampler_set |= sampler_keys[k].bit;
    if (!strcmp(key, "model")) s->model = value[0] ? value : NULL;
    else if (!strcmp(key, "system")) s->system = value[0] ? value : NULL;
    else if (!strcmp(key, "temp")) return parse_in(what, value, 0, 0, 1e6f, 0, &sp->temperature);
    else if (!strcmp(key, "top_k")) return rad_parse_int(what, value, 0, INT_MAX, &sp->top_k);
    else if (!strcmp(key, "top_p")) return parse_in(what, value, 0, 1, 1, 0, &sp->top_p);
    else if (!strcmp(key, "min_p")) return parse_in(what, value, 0, 0, 1, 1, &sp->min_p);
    else if (!strcmp(key, "repeat_penalty")) return parse_in(what, value, 0, 1, 1e6f, 0, &sp->repeat_penalty);
    else if (!strcmp(key, "repeat_last_n")) return rad_parse_int(what, value, 0, INT_MAX, &sp->repeat_last_n);
    else if (!strcmp(key, "seed")) return parse_seed(what, value, &s->conv);
    else if (!strcmp(key, "n_predict")) return rad_parse_int(what, value, -1, 1 << 24, &s->conv.n_predict);
    else if (!strcmp(key, "reply_reserve")) return rad_parse_int(what, value, 0, 1 << 24, &s->conv.reply_reserve);
    else if (!strcmp(key, "think")) return rad_parse_think(what, value, &s->conv.thinking);
    else if (!strcmp(key, "ignore_eos")) return rad_parse_bool(what, value, &s->conv.ignore_eos);
    else if (!strcmp(key, "context_policy")) {
        int p = rad_context_policy_parse(value);
        if (p < 0) return rad_error_set(RAD_E_ARG, "%s: '%s'; choose drop-oldest or refuse", what, value);
        s->conv.context_policy = (RadContextPolicy)p;
    } else if (!strcmp(key, "ctx")) return rad_parse_int(what, value, 1, 1 << 24, &s->ctx);
    else if (!strcmp(key, "batch")) return rad_parse_int(what, value, 1, 1 << 16, &s->batch);
    else if (!strcmp(key, "threads")) return rad_parse_int(what, value, 1, 256, &s->threads);
    else if (!strcmp(key, "mem_budget")) return rad_parse_bytes(what, value, &s->mem_budget);
    else if (!strcmp(key, "stream_experts")) {
        if (!strcmp(value, "auto")) {
            s->stream_experts = RAD_STREAM_AUTO;
            return RAD_OK;
        }
        int on = 0, rc = rad_parse_bool(what, value, &on);
        if (rc) return rad_error_set(RAD_E_ARG, "%s: '%s'; choose auto, true or false", what, value);
        s->stream_experts = on ? RAD_STREAM_ON : RAD_STREAM_OFF;
    } else if (!strcmp(key, "io_depth")) {
        int depth = 0, rc = rad_parse_int(what, value, 0, 256, &depth);
        if (rc) return rc;
        s->io_depth = depth ? depth : -1;       /* 0 asked: one pread at a time */
    }
    else if (!strcmp(key, "expert_cache")) return rad_parse_bytes(what, value, &s->expert_cache);
    else if (!strcmp(key, "draft")) s->draft = value[0] && strcmp(value, "off") ? value : NULL;
    else if (!strcmp(key, "draft_max")) return rad_parse_int(what, value, 1, 16, &s->draft_max);
    else if (!strcmp(key, "kernels")) s->kernels = value[0] ? value : NULL;
    else if (!strcmp(key, "kv_dtype")) {
        if (strcmp(value, "f16") && strcmp(value, "f32"))
            return rad_error_set(RAD_E_ARG, "%s: '%s'; choose f16 or f32", what, value);
        s->kv_dtype = value;
    } else if (!strcmp(key, "plugins")) s->plugins = value[0] ? value : NULL;
    else if (!strcmp(key, "show_thinking")) return rad_parse_bool(what, value, &s->show_thinking);
    else if (!strcmp(key, "offline")) return rad_parse_bool(what, value, &s->offline);
    else if (!strcmp(key, "quiet")) return rad_parse_bool(what, value, &s->quiet);
    else if (!strcmp(key, "plain")) return rad_parse_bool(what, value, &s->plain);
    else if (!strcmp(key, "color")) return rad_parse_color(what, value, &s->color);
    else if (!strcmp(key, "log")) return rad_parse_bool(what, value, &s->log);
    else if (!strcmp(key, "allow_special")) return rad_parse_bool(what, value, &s->conv.allow_special);
    else return rad_error_set(RAD_E_ARG, "%s: unknown key (see radiance.conf(5))", what);
    return RAD_OK;
}

int rad_settings_option(RadSettings *s, int c, const char *arg, int *rc)
{
    static const struct { int c; const char *key, *flag; } by_key[] = {
        {'n', "n_predict", "-n"},
        {RAD_OPT_TEMP, "temp", "--temp"},
        {RAD_OPT_TOP_K, "top_k", "--top-k"},
        {RAD_OPT_TOP_P, "top_p", "--top-p"},
        {RAD_OPT_MIN_P, "min_p", "--min-p"},
        {RAD_OPT_REPEAT_PENALTY, "repeat_penalty", "--repeat-penalty"},
        {RAD_OPT_REPEAT_LAST_N, "repeat_last_n", "--repeat-last-n"},
        {RAD_OPT_SEED, "seed", "--seed"},
        {'c', "ctx", "--ctx"},
        {RAD_OPT_CONTEXT_POLICY, "context_policy", "--context-policy"},
        {RAD_OPT_REPLY_RESERVE, "reply_reserve", "--reply-reserve"},
        {'b', "batch", "--batch"},
        {RAD_OPT_KV_DTYPE, "kv_dtype", "--kv-dtype"},
        {'t', "threads", "--threads"},
        {RAD_OPT_COLOR, "color", "--color"},
        {RAD_OPT_MEM_BUDGET, "mem_budget", "--mem-budget"},
        {RAD_OPT_EXPERT_CACHE, "expert_cache", "--expert-cache"},
        {RAD_OPT_IO_DEPTH, "io_depth", "--io-depth"},
        {RAD_OPT_DRAFT, "draft", "--draft"},
        {RAD_OPT_DRAFT_MAX, "draft_max", "--draft-max"},
    };
    for (size_t i = 0; i < sizeof by_key / sizeof by_key[0]; i++)
        if (by_key[i].c == c) {
            *rc = rad_settings_set(s, by_key[i].key, arg, by_key[i].flag);
            return 1;
        }
    switch (c) {
    case RAD_OPT_KERNELS: s->kernels = arg; break;
    case RAD_OPT_PLUGINS: s->plugins = arg; break;
    case RAD_OPT_OFFLINE: s->offline = 1; break;
    case 'q': s->quiet = 1; break;
    case RAD_OPT_THINK: s->conv.thinking = 1; break;
    case RAD_OPT_NO_THINK: s->conv.thinking = 0; break;
    case RAD_OPT_ALLOW_SPECIAL: s->conv.allow_special = 1; break;
    case RAD_OPT_STREAM_EXPERTS: s->stream_experts = RAD_STREAM_ON; break;
    case RAD_OPT_NO_STREAM_EXPERTS: s->stream_experts = RAD_STREAM_OFF; break;
    default: return 0;
    }
    *rc = RAD_OK;
    return 1;
}

/* The variables that stand in for a key (radiance(1), ENVIRONMENT). */
static const struct { const char *var, *key; } environment_keys[] = {
    {"RADIANCE_MODEL", "model"},     {"RADIANCE_CTX", "ctx"},   {"RADIANCE_THREADS", "threads"},
    {"RADIANCE_KERNELS", "kernels"}, {"RADIANCE_TEMP", "temp"}, {"RADIANCE_SEED", "seed"},
};

/* ------------------------------------------------------------ the file */

const char *rad_config_path(char *buf, size_t size)
{
    const char *explicit_path = getenv("RADIANCE_CONFIG");
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (explicit_path && explicit_path[0]) snprintf(buf, size, "%s", explicit_path);
    else if (xdg && xdg[0] == '/') snprintf(buf, size, "%s/radiance/config", xdg);
    else if (home && home[0]) snprintf(buf, size, "%s/.config/radiance/config", home);
    else buf[0] = 0;
    return buf;
}

void rad_config_free(RadConfig *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->entries[i].key);
        free(c->entries[i].value);
    }
    free(c->entries);
    free(c);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) s[--n] = 0;
    return s;
}

/* Undo the quotes of a "quoted value" in place; RAD_E_ARG on a bad escape
** or a missing closing quote. */
static int unquote(char *v, const char *where)
{
    size_t n = strlen(v);
    if (n < 2 || v[n - 1] != '"') return rad_error_set(RAD_E_ARG, "%s: a quoted value must end with '\"'", where);
    char *out = v;
    for (size_t i = 1; i < n - 1; i++) {
        char ch = v[i];
        if (ch == '\\') {
            if (i + 1 >= n - 1) return rad_error_set(RAD_E_ARG, "%s: '\\' at the end of the value", where);
            char e = v[++i];
            ch = e == 'n' ? '\n' : e == 't' ? '\t' : e == '"' ? '"' : e == '\\' ? '\\' : 0;
            if (!ch) return rad_error_set(RAD_E_ARG, "%s: unknown escape '\\%c' (use \\n \\t \\\" \\\\)", where, e);
        } else if (ch == '"') {
            return rad_error_set(RAD_E_ARG, "%s: a '\"' inside a quoted value must be written \\\"", where);
        }
        *out++ = ch;
    }
    *out = 0;
    return RAD_OK;
}

static int add_entry(RadConfig *c, const char *key, const char *value, int line)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        ConfigEntry *grown = realloc(c->entries, (size_t)cap * sizeof *grown);
        if (!grown) return rad_error_set(RAD_E_NOMEM, "out of memory");
        c->entries = grown;
        c->cap = cap;
    }
    ConfigEntry *e = &c->entries[c->n];
    e->key = strdup(key);
    e->value = strdup(value);
    e->line = line;
    if (!e->key || !e->value) {
        free(e->key);
        free(e->value);
        return rad_error_set(RAD_E_NOMEM, "out of memory");
    }
    c->n++;
    return RAD_OK;
}

int rad_config_load(const char *path, RadConfig **out)
{
    *out = NULL;
    RadConfig *c = calloc(1, sizeof *c);
    if (!c) return rad_error_set(RAD_E_NOMEM, "out of memory");
    const char *explicit_path = getenv("RADIANCE_CONFIG");
    int must_exist = path != NULL || (explicit_path && explicit_path[0]);
    if (path) snprintf(c->path, sizeof c->path, "%s", path);
    else rad_config_path(c->path, sizeof c->path);
    FILE *f = c->path[0] ? fopen(c->path, "r") : NULL;
    if (!f) {
        int err = errno;
        if (!c->path[0] || (!must_exist && err == ENOENT)) {
            *out = c;
            return RAD_OK;
        }
        rad_config_free(c);
        char shown[4096];
        snprintf(shown, sizeof shown, "%s", path ? path : explicit_path ? explicit_path : "");
        return rad_error_set(err == ENOENT ? RAD_E_NOTFOUND : RAD_E_IO, "config %s: %s", shown, strerror(err));
    }
    char *buf = NULL;
    size_t cap = 0;
    int line = 0, rc = RAD_OK;
    RadSettings scratch;
    memset(&scratch, 0, sizeof scratch);
    while (rc == RAD_OK && getline(&buf, &cap, f) != -1) {
        line++;
        char *s = trim(buf);
        if (!*s || *s == '#') continue;
        char where[4200];
        snprintf(where, sizeof where, "%s:%d", c->path, line);
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = rad_error_set(RAD_E_ARG, "%s: expected 'key = value', got '%.60s'", where, s);
            break;
        }
        *eq = 0;
        char *key = trim(s), *value = trim(eq + 1);
        if (!*key) {
            rc = rad_error_set(RAD_E_ARG, "%s: a line with no key before '='", where);
            break;
        }
        if (*value == '"' && (rc = unquote(value, where))) break;
        /* Check the key and its value now, against a scratch copy. */
        if ((rc = rad_settings_set(&scratch, key, value, where))) break;
        rc = add_entry(c, key, value, line);
    }
    if (rc == RAD_OK && ferror(f))
        rc = rad_error_set(RAD_E_IO, "config %s: read failed: %s", c->path, strerror(errno));
    free(buf);
    fclose(f);
    if (rc) {
        rad_config_free(c);
        return rc;
    }
    *out = c;
    return RAD_OK;
}

int rad_settings_load(RadSettings *s, RadConfig **cfg)
{
    memset(s, 0, sizeof *s);
    rad_conv_settings_defaults(&s->conv);
    s->log = 1;
    *cfg = NULL;
    RadConfig *c = NULL;
    int rc = rad_config_load(NULL, &c);
    if (rc) return rc;
    for (int i = 0; i < c->n; i++) {
        char where[4200];
        snprintf(where, sizeof where, "%s:%d", c->path, c->entries[i].line);
        if ((rc = rad_settings_set(s, c->entries[i].key, c->entries[i].value, where))) {
            rad_config_free(c);
            return rc;
        }
    }
    for (size_t i = 0; i < sizeof environment_keys / sizeof *environment_keys; i++) {
        const char *v = getenv(environment_keys[i].var);
        if (!v || !v[0]) continue;
        char where[64];
        snprintf(where, sizeof where, "environment %s", environment_keys[i].var);
        if ((rc = rad_settings_set(s, environment_keys[i].key, v, where))) {
            rad_config_free(c);
            return rc;
        }
    }
    *cfg = c;
    return RAD_OK;
}
