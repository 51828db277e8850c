/*
** rad_limits.h: every limit radiance puts on what a file may ask of it.
**
** Model files, configs and hub listings come from strangers.  Each number a
** file declares (a string's length, a count of layers, keys or tensors) is
** compared with a limit here before anything is allocated or looped over
** for it, so a 33 KB file cannot ask for gigabytes or hours.  Every refusal
** is one line naming the limit, the number the file asked for and the file.
**
** The numbers are far above what any published model needs (the "why" of
** each is in docs/LIMITS.md, which lists them all; keep the two together).
** Raising one is safe where the comment says what it bounds; lowering one
** may refuse real models.  Limits of the text pipeline (regex steps, heap,
** the time budget of an encode) live here too, in their own section.
*/
#ifndef RAD_LIMITS_H
#define RAD_LIMITS_H

/* ------------------------------------------------------------ metadata */

/* The longest metadata string (a GGUF string value or string array element,
** a config.json string): real ones are names, licenses and token texts of a
** few kilobytes.  The chat template has its own limit below. */
#define RAD_LIMIT_META_STRING_BYTES (1u << 20)

/* The longest chat template (GGUF tokenizer.chat_template, chat_template.jinja,
** tokenizer_config.json's chat_template, a .rad's tokenizer.bin; checked
** wherever a tokenizer is loaded): the largest published ones are under
** 64 KiB; a template is parsed and rendered at every turn. */
#define RAD_LIMIT_CHAT_TEMPLATE_BYTES (1u << 20)

/* Metadata keys in one file (GGUF key/value pairs, config.json leaves): real
** files hold tens to a few hundred.  Lookups are linear, so this also bounds
** the cost of every lookup. */
#define RAD_LIMIT_META_KEYS 65536

/* The largest size-like metadata value (n_embd, n_ff, n_vocab, n_ctx_train,
** head counts): a count this large is a damaged file, and every one of them
** must still match the tensors the file holds. */
#define RAD_LIMIT_META_INT (1 << 30)

/* Layers: never more than the file holds tensors for (checked against the
** tensors found, before the plugin declares anything), and never more than
** this, whatever the file holds (the deepest published models have ~130). */
#define RAD_LIMIT_LAYERS 65536

/* RMSNorm's epsilon: above this the norm no longer normalises (real models
** use 1e-6 .. 1e-5); it must also be above zero and finite. */
#define RAD_LIMIT_RMS_EPS_MAX 1e-2

/* ------------------------------------------------------------- tensors */

/* Tensors in one model (all parts of a split GGUF, one .rad, the safetensors
** shards of a checkpoint): the largest mixture-of-experts checkpoints with
** one tensor per expert hold about 100,000. */
#define RAD_LIMIT_TENSORS (1 << 20)

/* Experts in one layer's stack that `convert FILE.gguf` cuts into one record
** each: DeepSeek-V3 and Kimi K2 have 256 and 384.  A stack with more (a
** hostile dim 0 of millions would make millions of records) is copied
** whole and does not stream (nor run: RAD_LIMIT_ROUTED_EXPERTS is lower). */
#define RAD_LIMIT_EXPERTS 4096

/* Experts one router chooses among: the router kernels (ref's and the CPU
** library's router_topk) keep a row's scores on the stack, in arrays this
** long.  A model with more is refused when it is opened (engine/meta_check.c),
** not at its first step; the most any published model has is 384. */
#define RAD_LIMIT_ROUTED_EXPERTS 1024

/* The longest tensor name: ggml stops at 63 bytes, Hugging Face names are
** under 200. */
#define RAD_LIMIT_TENSOR_NAME_BYTES 1024

/* ------------------------------------------------------------ containers */

/* A GGUF key's length (the format's own limit) and how deep arrays of
** arrays may nest, and how many parts a split GGUF may have (a u16 in
** llama.cpp). */
#define RAD_LIMIT_GGUF_KEY_BYTES 65535
#define RAD_LIMIT_GGUF_NEST 8
#define RAD_LIMIT_GGUF_SPLITS 65535

/* A .rad header (JSON, read whole): a few hundred bytes per tensor, so room
** for RAD_LIMIT_TENSORS tensors; the bulk of a model (tensors, the
** tokenizer blob) is in the mapped data region, not here. */
#define RAD_LIMIT_RAD_HEADER_BYTES (256ull << 20)

/* A safetensors JSON header (the reference parser's own limit). */
#define RAD_LIMIT_ST_HEADER_BYTES 100000000ull

/* config.json: a few kilobytes in practice. */
#define RAD_LIMIT_CONFIG_BYTES (64u << 20)

/* model.safetensors.index.json (read whole): it lists tensor names and
** their shards, kilobytes to a few megabytes. */
#define RAD_LIMIT_ST_INDEX_BYTES (64u << 20)

/* A side file of a checkpoint read whole (tokenizer.json, tokenizer_config.json,
** generation_config.json): the largest tokenizer.json published is ~35 MB. */
#define RAD_LIMIT_SIDE_FILE_BYTES (256u << 20)

/* ------------------------------------------------------------- tokenizer */

/* The pre-tokenizer's regular expressions come from tokenizer.json or the
** .rad tokenizer blob and run over every text a user types or pastes.
** PCRE2 backtracks: a hostile pattern can make one match exponential, and
** one merely slow at every position is quadratic over a long text.  The
** enforcement is in engine/text/text_norm.c. */

/* Bytes of one regex pattern (the longest real one, gpt-oss's, is 274). */
#define RAD_LIMIT_REGEX_PATTERN_BYTES 4096

/* PCRE2 match limit: steps of its matching loop at one start position
** (pcre2_set_match_limit; JIT counts in its own way).  PCRE2's default;
** real patterns on megabyte runs of one character stay far below it. */
#define RAD_LIMIT_REGEX_MATCH 10000000u

/* PCRE2 depth limit: nested backtracking points of one match
** (pcre2_set_depth_limit; the interpreter only).  Each point is a heap
** frame of about 200 bytes and more with captures, so the heap limit below
** would stop a match near a million points: this is set under it, so that
** a pattern with few captures meets this limit and one with many meets
** the heap limit (PCRE2's default of ten million could never be met). */
#define RAD_LIMIT_REGEX_DEPTH 500000u

/* PCRE2 heap limit, in KiB: the interpreter's backtracking frames
** (pcre2_set_heap_limit; JIT uses its stack).  PCRE2's default is 20 GB. */
#define RAD_LIMIT_REGEX_HEAP_KIB (256u * 1024u)

/* Start positions one PCRE2 call may try at most (pcre2_set_offset_limit)
** before control comes back and the budget below is checked: a search runs
** in windows that start at 64 positions and double while they find nothing. */
#define RAD_LIMIT_REGEX_WINDOW 4096

/* The CPU time one encode may spend (the calling thread's): a base plus a
** share per byte of text, over ten times what the slowest real case needs
** (a long run of one character, under 400 ns a byte at -O2), so only a
** pathological pattern meets it. */
#define RAD_LIMIT_ENCODE_BASE_MS     1000u
#define RAD_LIMIT_ENCODE_NS_PER_BYTE 5000u

#endif /* RAD_LIMITS_H */
