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

/* The chat format as data (used by the app's renderer and reply parser). */
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
    const char *no_think;               /* how to switch thinking off, or NULL */
    const char *tool_call_open, *tool_call_close;   /* NULL when none */
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
