/*
** rad_arch.h: the architecture-plugin ABI.
**
** An architecture plugin is a .so that describes one model family at one
** weight format: the engine chooses it by the exact (rad_arch_id,
** rad_arch_quant) pair, with no fallback, so "llama at q8_0" and "llama at
** bf16" are two files built from one source.  The plugin exports:
**
**   rad_plugin_info        ABI version, kind, name, id, quant (RAD_ARCH_PLUGIN)
**   rad_arch_declare       name every weight, buffer, KV group and op
**   rad_arch_step          issue the ops for one batch
**   rad_arch_hf_names      optional: the Hugging Face architectures it serves
**   rad_arch_probe         optional: what deployment switches it honours
**   rad_arch_chat_format   optional: role markers, stops, reasoning markup
**   rad_arch_release       optional: free what declare kept, before unload
**
** What a plugin may call is in rad_core.h.  Structs that cross the boundary
** carry struct_size and grow only at their end.
*/
#ifndef RAD_ARCH_H
#define RAD_ARCH_H

#include "../engine/include/rad_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RAD_ARCH_ABI_VERSION 1
#define RAD_PLUGIN_ARCH 1

typedef struct RadPluginInfo {
    int abi_version;            /* RAD_ARCH_ABI_VERSION at build time */
    int kind;                   /* RAD_PLUGIN_ARCH */
    const char *name;           /* unique: "llama_q8_0" */
    const char *arch_id;        /* "llama" */
    const char *quant;          /* "f32", "bf16", "q8_0", ... */
    const char *version;        /* the plugin's own version string */
    const char *description;
} RadPluginInfo;

/* Deployment switches a plugin honours; a switch whose bit is 0 is refused
** by name at start-up, never silently dropped. */
typedef struct RadArchProbe {
    int struct_size;
    int shape_probe_ok;         /* tolerates a sizing declare */
    int kv_f32_ok;              /* declares correctly with an f32 KV cache */
} RadArchProbe;

/* How a format lays a conversation out beyond its markers.  The models'
** Jinja templates differ in more than marker text (where the system text
** goes, what is trimmed, what an assistant turn's reasoning becomes), so
** engine/text/chat_render.c has one small function per layout; everything
** else about a format is the data below.  docs/CHAT.md lists each rule. */
typedef enum RadChatStyle {
    RAD_CHAT_STYLE_TURNS = 0,   /* open + text + close per message: ChatML, Llama 3, Gemma */
    RAD_CHAT_STYLE_QWEN3 = 1,   /* TURNS, plus Qwen3's <think> rules for assistant turns */
    RAD_CHAT_STYLE_LLAMA2 = 2,  /* <s>[INST] ... [/INST], <<SYS>> inside the first user turn */
    RAD_CHAT_STYLE_MISTRAL = 3, /* [INST] ... [/INST], the system text inside the last user turn */
    RAD_CHAT_STYLE_HARMONY = 4, /* gpt-oss: system + developer messages, channels */
    RAD_CHAT_STYLE_DEEPSEEK = 5 /* the system text first, then <｜User｜>/<｜Assistant｜> turns */
} RadChatStyle;

/* RadChatFormat.flags */
enum {
    RAD_CHAT_TRIM = 1,              /* message text loses surrounding white space (Jinja's trim) */
    RAD_CHAT_ALTERNATE = 2,         /* after one optional system message, user/assistant must alternate */
    RAD_CHAT_SYSTEM_IN_USER = 4,    /* no system turn: its text + "\n\n" opens the first turn after it */
    RAD_CHAT_ALWAYS_PROMPT = 8,     /* the generation prompt is written even when not asked for */
    RAD_CHAT_LAST_SYSTEM = 16       /* DEEPSEEK: only the last system message counts (else all, joined) */
};

struct RadChatFormat;

/* One rule of a chooser: the format a model gets when its vocabulary holds
** every one of `tokens` as a single token and, when template_mark is set,
** the chat template the model carries contains it.  engine/text evaluates
** the rules (rad_chat_format_resolve): first every rule with a mark, in
** order, then the rules without one, so a mark refines and the vocabulary
** decides alone only when no mark matched. */
typedef struct RadChatChoice {
    const struct RadChatFormat *format;
    const char *const *tokens;      /* NULL-terminated, or NULL */
    const char *template_mark;      /* or NULL */
} RadChatChoice;

/* The chat format as data (used by the app's renderer and reply parser).
** A plugin serving several model lines returns a chooser instead: a format
** whose `choices` is set and whose other fields are unused; the engine
** resolves it against the model's vocabulary and template. */
typedef struct RadChatFormat {
    int struct_size;
    const char *name;                   /* "chatml", "llama3", "gemma", ... */
    const char *bos;                    /* text that opens a conversation, or "" */
    const char *system_open, *system_close;
    const char *user_open, *user_close;
    const char *assistant_open, *assistant_close;
    const char *generation_prompt;      /* appended to ask for a reply */
    const char *const *stop_strings;    /* NULL-terminated */
    const char *reasoning_open, *reasoning_close;   /* NULL when none */
    const char *no_think;               /* appended after the generation prompt to switch thinking off, or NULL */
    const char *tool_call_open, *tool_call_close;   /* NULL when none; a NULL close runs to the reply's end */
    /* grown for engine/text/chat_render.c and chat_reply.c */
    int style;                          /* RadChatStyle */
    int flags;                          /* RAD_CHAT_* */
    const char *default_system;         /* the system turn's text when the conversation has none, or NULL */
    const char *system_preamble;        /* written at the start of the system text, always; "{date}" and
                                        ** "{effort}" are filled in; NULL when none */
    const char *date_format;            /* how "{date}" is written: %Y %m %d %b (English month); or NULL */
    const RadChatChoice *choices;       /* a chooser's rules, ending with a NULL format; NULL for a format */
} RadChatFormat;

typedef const RadPluginInfo *(*RadPluginInfoFn)(void);
typedef int (*RadArchDeclareFn)(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx);
typedef void (*RadArchStepFn)(RadCtx *c, const RadBatch *batch);
typedef const char *const *(*RadArchHfNamesFn)(void);
typedef int (*RadArchProbeFn)(const RadModelMeta *meta, RadArchProbe *out);
typedef const RadChatFormat *(*RadArchChatFormatFn)(const RadModelMeta *meta);
typedef void (*RadArchReleaseFn)(void);

/* Emits the export block.  Use once, at the bottom of the plugin source:
**   RAD_ARCH_PLUGIN(llama, "llama", RAD_QUANT, "1.0", "Llama, Qwen2, Qwen3, Mistral")
** NS names the plugin (made unique per quant by the build), ID the family,
** QUANT the weight format. */
#define RAD_ARCH_PLUGIN(NS, ID, QUANT, VERSION, DESC)                          \
    const RadPluginInfo *rad_plugin_info(void)                                 \
    {                                                                          \
        static const RadPluginInfo info = {                                    \
            RAD_ARCH_ABI_VERSION, RAD_PLUGIN_ARCH, #NS "_" QUANT, ID, QUANT,   \
            VERSION, DESC};                                                    \
        return &info;                                                          \
    }                                                                          \
    const char *rad_arch_id(void) { return ID; }                               \
    const char *rad_arch_quant(void) { return QUANT; }

#ifdef __cplusplus
}
#endif
#endif /* RAD_ARCH_H */
