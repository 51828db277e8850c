/*
** rad_arch.h: the architecture-plugin ABI.
**
** An architecture plugin is a .so that describes one model family at one
** weight format: the engine chooses it by the exact (rad_arch_id,
** rad_arch_quant) pair, with no fallback, so "llama at q8_0" and "llama at
** bf16" are two files built from one source.  The plugin exports:
**
**   rad_plugin_info        ABI version, kind, name, id, quant (RAD_ARCH_PLUGIN)
**   rad_arch_declare       name every weight, buffer, KV group and op, and
**                          hand back the instance that holds the handles
**   rad_arch_step          issue the ops for one batch, on one instance
**   rad_arch_release       free an instance declare made
**   rad_arch_hf_names      optional: the Hugging Face architectures it serves
**   rad_arch_gguf_families optional: the GGUF architectures it serves, and
**                          what their files imply (see RadGgufFamily)
**   rad_arch_probe         optional: what deployment switches it honours
**   rad_arch_chat_format   optional: role markers, stops, reasoning markup
**
** Instances.  A plugin keeps no state of its own between calls: everything a
** declare works out (op and weight handles, the layer list) lives in an
** instance the plugin allocates in declare and returns through *instance.
** The core owns it from then on, passes it to every step of that model and
** to rad_arch_release exactly once when the model closes (also when declare
** failed, if it set one).  So two models of one family, a model and its
** draft, or a model and its own shape probe live in one process side by
** side, each as if it were alone.  A plugin whose declare keeps nothing may
** leave *instance NULL.
**
** How this ABI grows (the same rule as rad_kernel.h's):
**   - RAD_ARCH_ABI_VERSION changes only for a change that breaks plugins
**     already built (a function's signature, a field that moved or changed
**     meaning).  The core refuses a plugin of any other version by name.
**   - Everything else grows at the end of a struct.  Every struct that
**     crosses carries struct_size, set by the side that fills it, and the
**     reader takes only what lies inside it, the rest as zero: a new field's
**     zero must mean "absent" or "off".  A plugin fills its declaration
**     structs with RAD_SIZED(Type); the core fills RadModelMeta, RadBuildCtx,
**     RadBatch and RadArchProbe's size before the plugin sees them.
**   - RadParam and RadOperand travel in arrays the macros of rad_core.h
**     build; they are frozen within a version.
*/
#ifndef RAD_ARCH_H
#define RAD_ARCH_H

#include "../engine/include/rad_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RAD_ARCH_ABI_VERSION 2
#define RAD_PLUGIN_ARCH 1

typedef struct RadPluginInfo {
    int abi_version;            /* RAD_ARCH_ABI_VERSION at build time */
    int kind;                   /* RAD_PLUGIN_ARCH */
    int struct_size;            /* sizeof(RadPluginInfo) at build time */
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
    int max_spec;               /* positions of speculation its state can roll back; 0 = as many as
                                ** the core asks (attention KV only) */
} RadArchProbe;

/* A GGUF architecture a plugin serves ("llama", "qwen3", "gemma3") and what
** its files imply beyond GGUF's own keys: the Hugging Face class it mirrors
** and canonical keys set by the family's conventions (llama.cpp's converter
** permutes llama q/k rows, so llama files want model.rope_mode = 1; it folds
** Gemma's 1 + w into the norms, so gemma3 files want model.norm_offset = 0).
** The GGUF import knows no family: it reads GGUF's generic keys and applies
** what the plugin that claims the architecture lists here.  A list ends with
** a NULL gguf_arch. */
typedef struct RadGgufFamily {
    int struct_size;
    const char *gguf_arch;          /* general.architecture */
    const char *hf_arch;            /* the Hugging Face class its files mirror */
    int n_implied;
    const RadMetaKV *implied;       /* canonical keys the family's files imply */
} RadGgufFamily;

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
    RAD_CHAT_STYLE_DEEPSEEK = 5, /* the system text first, then <｜User｜>/<｜Assistant｜> turns */
    RAD_CHAT_STYLE_GLM = 6      /* GLM-4.5: [gMASK]<sop>, open-only turns, a think block on every reply */
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
typedef int (*RadArchDeclareFn)(RadBuilder *b, const RadModelMeta *meta, const RadBuildCtx *ctx, void **instance);
typedef void (*RadArchStepFn)(void *instance, RadCtx *c, const RadBatch *batch);
typedef void (*RadArchReleaseFn)(void *instance);
typedef const char *const *(*RadArchHfNamesFn)(void);
typedef const RadGgufFamily *(*RadArchGgufFamiliesFn)(void);
typedef int (*RadArchProbeFn)(const RadModelMeta *meta, RadArchProbe *out);
typedef const RadChatFormat *(*RadArchChatFormatFn)(const RadModelMeta *meta);

/* Emits the export block.  Use once, at the bottom of the plugin source:
**   RAD_ARCH_PLUGIN(llama, "llama", RAD_QUANT, "1.0", "Llama, Qwen2, Qwen3, Mistral")
** NS names the plugin (made unique per quant by the build), ID the family,
** QUANT the weight format. */
#define RAD_ARCH_PLUGIN(NS, ID, QUANT, VERSION, DESC)                          \
    const RadPluginInfo *rad_plugin_info(void)                                 \
    {                                                                          \
        static const RadPluginInfo info = {                                    \
            RAD_ARCH_ABI_VERSION, RAD_PLUGIN_ARCH, (int)sizeof(RadPluginInfo), \
            #NS "_" QUANT, ID, QUANT, VERSION, DESC};                          \
        return &info;                                                          \
    }                                                                          \
    const char *rad_arch_id(void) { return ID; }                               \
    const char *rad_arch_quant(void) { return QUANT; }

#ifdef __cplusplus
}
#endif
#endif /* RAD_ARCH_H */
