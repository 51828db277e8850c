/*
** config.h: the user's preferences for `run` and `chat`, from the config
** file and the environment, under the command line.
**
** Precedence, highest first: a command-line flag, a RADIANCE_* environment
** variable, the config file, the built-in default.  rad_settings_load
** applies the lower three in order (default, then file, then environment);
** the command then parses its flags over the result.
**
** The file is $RADIANCE_CONFIG when set, else $XDG_CONFIG_HOME/radiance/config,
** else ~/.config/radiance/config; a missing default file is no error.  Its
** syntax: one `key = value` per line; blank lines and lines whose first
** non-blank character is '#' are ignored; a value in double quotes keeps
** its spaces and reads \n, \t, \" and \\ as escapes.  Every key and its
** values are documented in radiance.conf(5); an unknown key or a bad value
** is RAD_E_ARG with one line naming file:line and the key (exit 2), so a
** typo never goes unnoticed.
*/
#ifndef RAD_CONFIG_H
#define RAD_CONFIG_H

#include "chat/conversation.h"

typedef struct RadConfig RadConfig;

/* What run and chat take from config and environment.  Strings point into
** the RadConfig (or the environment) and live as long as it does. */
/* Which sampler fields the user set (a flag, a RADIANCE_* variable, a
** config key or /set), so a model's recommendation never overrides them. */
enum {
    RAD_SET_TEMP = 1 << 0, RAD_SET_TOP_K = 1 << 1, RAD_SET_TOP_P = 1 << 2, RAD_SET_MIN_P = 1 << 3,
    RAD_SET_REPEAT_PENALTY = 1 << 4, RAD_SET_REPEAT_LAST_N = 1 << 5, RAD_SET_SEED = 1 << 6
};

typedef struct RadSettings {
    const char *model;          /* the default model (key model, RADIANCE_MODEL); NULL = none */
    const char *system;         /* system prompt; NULL = none */
    RadConvSettings conv;       /* sampler, n_predict, thinking, context policy */
    int ctx;                    /* context length; 0 = the engine's default */
    int batch;                  /* prefill rows per step; 0 = the engine's default */
    int threads;                /* 0 = the physical cores */
    int64_t mem_budget;         /* bytes the model may keep in memory; 0 = the engine's default */
    int stream_experts;         /* RAD_STREAM_AUTO/ON/OFF: routed experts read from the file as chosen
                                ** (a .rad's MoE model); auto: when the model does not fit */
    int64_t expert_cache;       /* bytes of expert slots; 0 = what the memory budget leaves */
    int io_depth;               /* expert reads in flight; 0 = the engine's default, -1 = pread */
    const char *draft;          /* speculative decoding: "ngram" or a draft model's spec; NULL = off */
    int draft_max;              /* most tokens guessed per step; 0 = RAD_DRAFT_MAX_DEFAULT */
    const char *kernels;        /* kernel library order; NULL = the engine's default */
    const char *kv_dtype;       /* "f16", "f32"; NULL = the engine's default */
    const char *plugins;        /* plugin folder; NULL = RADIANCE_HOME / beside the binary */
    int show_thinking;          /* run: reasoning to stderr */
    int offline;                /* never use the network */
    int quiet;                  /* no download or conversion progress */
    int plain;                  /* chat: line mode instead of the full-screen UI */
    int color;                  /* RAD_COLOR_AUTO, _ALWAYS, _NEVER */
    unsigned sampler_set;       /* RAD_SET_* bits: fields the user gave */
    int log;                    /* run: record the exchange in the database (key log, --no-log) */
} RadSettings;

enum { RAD_COLOR_AUTO = 0, RAD_COLOR_ALWAYS = 1, RAD_COLOR_NEVER = 2 };

/* Read the config file (see above) into *out.  path NULL = the default
** place.  RAD_E_ARG naming file:line on a syntax error, an unknown key or
** a bad value; RAD_E_NOTFOUND when $RADIANCE_CONFIG names a missing file;
** RAD_E_IO when it cannot be read. */
int  rad_config_load(const char *path, RadConfig **out);
void rad_config_free(RadConfig *c);

/* Where the config file is looked for (the default place, or
** $RADIANCE_CONFIG), written into buf; "" when no home is known. */
const char *rad_config_path(char *buf, size_t size);

/* Defaults, then the config file, then the environment, into *s; the
** RadConfig that backs the strings is returned in *cfg (free it after s).
** Errors as rad_config_load, and RAD_E_ARG naming the variable for a bad
** environment value. */
int rad_settings_load(RadSettings *s, RadConfig **cfg);

/* Colour decision for a stream: never with NO_COLOR set (any value, even
** over RAD_COLOR_ALWAYS) or RAD_COLOR_NEVER; with RAD_COLOR_AUTO only when
** fd is a terminal and TERM is not dumb (or unset). */
int rad_use_color(int color, int fd);

/* Parsers shared with the flag parsers, so a flag and its key accept the
** same values.  `what` names the flag or file:line key in the message. */
int rad_parse_int(const char *what, const char *text, long lo, long hi, int *out);
/* A byte count: a whole number with an optional K, M, G or T (powers of
** 1024; "8G", "512M"). */
int rad_parse_bytes(const char *what, const char *text, int64_t *out);
int rad_parse_float(const char *what, const char *text, float *out);
int rad_parse_bool(const char *what, const char *text, int *out);
/* "on" 1, "off" 0, "default" -1. */
int rad_parse_think(const char *what, const char *text, int *out);
int rad_parse_color(const char *what, const char *text, int *out);

/* One setting by key, as a flag or the config gives it (the key names of
** radiance.conf(5)); RAD_E_ARG for an unknown key or a bad value. */
int rad_settings_set(RadSettings *s, const char *key, const char *value, const char *where);

/* ------------------------------------------------------------ shared flags */

/* The flags run and chat share, each over the setting of the same meaning:
** RAD_SETTINGS_OPTIONS goes into a command's getopt_long table (its short
** letters n c b t q into the optstring), and rad_settings_option applies
** what getopt_long returned for one of them. */
enum {
    RAD_OPT_TEMP = 1000, RAD_OPT_TOP_K, RAD_OPT_TOP_P, RAD_OPT_MIN_P, RAD_OPT_REPEAT_PENALTY,
    RAD_OPT_REPEAT_LAST_N, RAD_OPT_SEED, RAD_OPT_CONTEXT_POLICY, RAD_OPT_REPLY_RESERVE, RAD_OPT_KV_DTYPE,
    RAD_OPT_KERNELS, RAD_OPT_PLUGINS, RAD_OPT_COLOR, RAD_OPT_OFFLINE, RAD_OPT_THINK, RAD_OPT_NO_THINK,
    RAD_OPT_MEM_BUDGET, RAD_OPT_ALLOW_SPECIAL, RAD_OPT_DRAFT, RAD_OPT_DRAFT_MAX, RAD_OPT_STREAM_EXPERTS,
    RAD_OPT_EXPERT_CACHE, RAD_OPT_NO_STREAM_EXPERTS, RAD_OPT_IO_DEPTH
};

#define RAD_SETTINGS_OPTIONS                                                                                 \
    {"n-predict", required_argument, 0, 'n'}, {"temp", required_argument, 0, RAD_OPT_TEMP},                  \
        {"top-k", required_argument, 0, RAD_OPT_TOP_K}, {"top-p", required_argument, 0, RAD_OPT_TOP_P},     \
        {"min-p", required_argument, 0, RAD_OPT_MIN_P},                                                      \
        {"repeat-penalty", required_argument, 0, RAD_OPT_REPEAT_PENALTY},                                    \
        {"repeat-last-n", required_argument, 0, RAD_OPT_REPEAT_LAST_N},                                      \
        {"seed", required_argument, 0, RAD_OPT_SEED}, {"ctx", required_argument, 0, 'c'},                    \
        {"context-policy", required_argument, 0, RAD_OPT_CONTEXT_POLICY},                                    \
        {"reply-reserve", required_argument, 0, RAD_OPT_REPLY_RESERVE}, {"batch", required_argument, 0, 'b'}, \
        {"kv-dtype", required_argument, 0, RAD_OPT_KV_DTYPE}, {"kernels", required_argument, 0, RAD_OPT_KERNELS}, \
        {"threads", required_argument, 0, 't'}, {"plugins", required_argument, 0, RAD_OPT_PLUGINS},          \
        {"color", required_argument, 0, RAD_OPT_COLOR}, {"offline", no_argument, 0, RAD_OPT_OFFLINE},        \
        {"quiet", no_argument, 0, 'q'}, {"think", no_argument, 0, RAD_OPT_THINK},                            \
        {"no-think", no_argument, 0, RAD_OPT_NO_THINK}, {"mem-budget", required_argument, 0, RAD_OPT_MEM_BUDGET}, \
        {"allow-special", no_argument, 0, RAD_OPT_ALLOW_SPECIAL}, {"draft", required_argument, 0, RAD_OPT_DRAFT}, \
        {"draft-max", required_argument, 0, RAD_OPT_DRAFT_MAX},                                              \
        {"stream-experts", no_argument, 0, RAD_OPT_STREAM_EXPERTS},                                          \
        {"expert-cache", required_argument, 0, RAD_OPT_EXPERT_CACHE},                                        \
        {"no-stream-experts", no_argument, 0, RAD_OPT_NO_STREAM_EXPERTS},                                    \
        {"io-depth", required_argument, 0, RAD_OPT_IO_DEPTH}

/* Apply option c with its argument arg (kept as a pointer, as optarg is).
** Returns 1, with *rc the outcome, when c is one of RAD_SETTINGS_OPTIONS;
** 0 (and *rc untouched) otherwise. */
int rad_settings_option(RadSettings *s, int c, const char *arg, int *rc);

#endif /* RAD_CONFIG_H */
