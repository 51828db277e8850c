/*
** tokenizer.h: a tokenizer as data, and everything that produces or stores it.
**
** A RadTokenizer is the whole description a model's tokenizer needs at run
** time: the vocabulary with each token's bytes, the BPE merge ranks, the added
** and special tokens, and the small pipeline of normalizer, pre-tokenizer,
** post-processor and decoder steps that Hugging Face's tokenizer.json spells
** out (only the kinds the supported models use; any other kind is refused by
** name at import).  It is imported from tokenizer.json (+ tokenizer_config.json)
** or from GGUF metadata, stored in the .rad container in a compact binary form
** that loads without parsing JSON, and run by engine/text (encode, decode).
**
** formats/ owns the data and its import/storage; engine/text owns the
** algorithms that read it.
*/
#ifndef RAD_TOKENIZER_H
#define RAD_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "rad_types.h"

typedef enum RadTokModel {
    RAD_TOK_BPE_BYTELEVEL = 1,  /* GPT-2 style: bytes mapped to printable code points */
    RAD_TOK_BPE_SPM = 2         /* SentencePiece style: "▁" for spaces, <0xNN> byte fallback */
} RadTokModel;

/* One step of the normalizer or pre-tokenizer pipeline, as tokenizer.json
** lists them. */
typedef enum RadTokStepKind {
    RAD_TOK_NORM_NFC = 1,
    RAD_TOK_NORM_PREPEND = 2,       /* text = arg + text (when non-empty) */
    RAD_TOK_NORM_REPLACE = 3,       /* every `pattern` -> arg (literal strings) */
    RAD_TOK_PRE_SPLIT_REGEX = 10,   /* Split with a regex; behaviour below */
    RAD_TOK_PRE_SPLIT_STRING = 11,  /* Split on a literal string */
    RAD_TOK_PRE_BYTELEVEL = 12      /* the byte-to-unicode map (and the GPT-2 regex if use_regex) */
} RadTokStepKind;

typedef enum RadTokSplitBehavior {
    RAD_SPLIT_ISOLATED = 1,
    RAD_SPLIT_MERGED_WITH_PREVIOUS = 2,
    RAD_SPLIT_MERGED_WITH_NEXT = 3,
    RAD_SPLIT_REMOVED = 4,
    RAD_SPLIT_CONTIGUOUS = 5
} RadTokSplitBehavior;

typedef struct RadTokStep {
    int kind;                   /* RadTokStepKind */
    char *pattern;              /* regex or literal (UTF-8) */
    char *arg;                  /* replacement / prepend text */
    int behavior;               /* RadTokSplitBehavior */
    int invert;
    int add_prefix_space;       /* BYTELEVEL */
    int use_regex;              /* BYTELEVEL */
} RadTokStep;

typedef struct RadTokAdded {
    int32_t id;
    char *content;
    int special;                /* special tokens are skipped by decode's skip-special */
    int lstrip, rstrip, single_word, normalized;
} RadTokAdded;

typedef enum RadTokDecoder {
    RAD_TOK_DECODE_BYTELEVEL = 1,   /* undo the byte-to-unicode map */
    RAD_TOK_DECODE_SPM = 2          /* "▁" -> " ", <0xNN> -> byte, fuse; strip_leading as set */
} RadTokDecoder;

typedef struct RadTokenizer {
    int model;                      /* RadTokModel */
    int n_vocab;                    /* ids are 0..n_vocab-1, including added tokens */
    char **token;                   /* [n_vocab] token text as in the vocabulary (UTF-8; NULL for holes) */
    float *score;                   /* [n_vocab] or NULL (GGUF llama-style scores) */
    int n_merges;
    char **merge_left, **merge_right;   /* [n_merges] in rank order */
    int n_norm;
    RadTokStep *norm;
    int n_pre;
    RadTokStep *pre;
    int n_added;
    RadTokAdded *added;
    int decoder;                    /* RadTokDecoder */
    int decode_strip_leading;       /* SPM: drop one leading space (Llama 2's Strip) */
    int byte_fallback;              /* SPM: unknown bytes as <0xNN> tokens */
    int fuse_unk;
    int ignore_merges;              /* a whole pre-token in the vocabulary wins */
    int32_t unk_id, bos_id, eos_id, pad_id;   /* -1 when absent */
    int add_bos, add_eos;           /* what the post-processor / tokenizer_config adds */
    char *chat_template;            /* from tokenizer_config.json or GGUF, or NULL */
    /* Optional, NULL when absent; producers may leave both out.  They let a
    ** stored 262k-token vocabulary open without a million small allocations
    ** or string lookups (tokenizer_store.c sets both, the JSON import the first). */
    int32_t *merge_ids;             /* [n_merges * 3] ids of each merge's left, right and merged token */
    void *pool;                     /* when set, token[i], merge_left[i] and merge_right[i] point into
                                    ** this one block: free releases it, not each string */
    char *source;                   /* the file it came from, for messages (owned; NULL: unknown);
                                    ** set by each producer, not stored */
} RadTokenizer;

/* Import from tokenizer.json text (and tokenizer_config.json text, or NULL).
** `name` is used in messages ("tokenizer.json: model type 'Unigram' is not
** supported").  The result is owned by the caller: rad_tokenizer_free. */
int rad_tokenizer_from_json(const char *json, size_t len, const char *config_json, size_t config_len,
                            const char *name, RadTokenizer **out);

/* The compact form stored in a .rad container (blob "tokenizer.bin"):
** serialize writes a malloc'd buffer; load validates every length and offset
** against `len` and builds a tokenizer. */
int rad_tokenizer_serialize(const RadTokenizer *t, void **data, size_t *len);
int rad_tokenizer_load(const void *data, size_t len, const char *name, RadTokenizer **out);

void rad_tokenizer_free(RadTokenizer *t);

/* Check that every string of `t` the pipeline uses as text is valid UTF-8:
** the normalizer and pre-tokenizer patterns and arguments, the added tokens'
** contents and the chat template.  These reach PCRE2 (which matches without
** checking, for speed), are inserted into or cut out of the text, or are
** rendered into prompts, and one ill-formed byte there would make valid text
** invalid.  Vocabulary entries are not checked: a byte-level vocabulary may
** hold raw bytes, and they are only compared and decoded, never matched.
** RAD_E_FORMAT with "NAME: FIELD is not valid UTF-8 ..." naming the first
** bad string.  The chat template's length is checked here too
** (rad_tokenizer_check_template_size).  Every producer calls it; so does
** rad_text_create. */
int rad_tokenizer_check_text(const RadTokenizer *t, const char *name);

/* A chat template of `len` bytes against RAD_LIMIT_CHAT_TEMPLATE_BYTES (a
** template is parsed and rendered at every turn): 0, or RAD_E_FORMAT with
** "NAME: the chat template is N bytes, over the limit ...".  A loader calls
** it before it copies a template; rad_tokenizer_check_text calls it too, so
** no producer hands on a longer one. */
int rad_tokenizer_check_template_size(size_t len, const char *name);

#endif /* RAD_TOKENIZER_H */
