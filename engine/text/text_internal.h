/*
** text_internal.h: what the files of engine/text share and nobody else sees.
**
** A RadText is the tokenizer data of formats/tokenizer.h plus the indexes that
** make encoding fast: the vocabulary hashed by text, the merges hashed by the
** pair of ids they join, the byte-level alphabet as a 256-entry table, the
** compiled pre-tokenizer regexes and two byte tries of added tokens.  All of
** it is built once by rad_text_create (text_create.c) and only read after, so
** one RadText serves any number of threads at once; each encode call keeps
** its own scratch (text_encode.c).
**
**   text_create.c   building and freeing the indexes
**   text_utf8.c     UTF-8 reading, the invalid-input rule, character classes
**   text_norm.c     normalizers and the pre-tokenizer splits
**   text_bpe.c      the BPE model: initial symbols, merges by rank, the cache
**   text_encode.c   rad_text_encode: added tokens, the pipeline, specials
**   text_decode.c   rad_text_decode and the streaming RadDetok
*/
#ifndef RAD_TEXT_INTERNAL_H
#define RAD_TEXT_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rad_text.h"

/* ------------------------------------------------------------ hash tables */

/* Token text -> id.  Open addressing; a slot holds the text's hash and its
** id (-1 when empty), the text itself lives in the RadTokenizer.  Hash and id
** share a slot so a probe costs one cache miss. */
typedef struct VocabSlot {
    uint32_t hash;
    int32_t id;
} VocabSlot;

typedef struct TextVocab {
    uint32_t mask; /* slots - 1, slots a power of two */
    VocabSlot *slot;
} TextVocab;

/* One merge by its rank: the pair it joins and the token it makes. */
typedef struct TextMerge {
    int32_t left, right, result;
} TextMerge;

/* (left id, right id) -> rank, the table BPE probes for every adjacent pair.
** Keys are stored +1 so that 0 marks an empty slot. */
typedef struct PairSlot {
    uint64_t key; /* ((left << 32) | right) + 1 */
    int32_t rank;
    int32_t unused;
} PairSlot;

typedef struct TextPairs {
    uint32_t mask;
    PairSlot *slot;
} TextPairs;

/* A byte trie of added-token texts, for leftmost-longest matching.  Edges
** are a hash (node, byte) -> child; `term[node]` is the index into
** RadTokenizer.added of the token ending there, or -1. */
typedef struct TextTrie {
    uint32_t mask;
    uint64_t *edge; /* [slots] (node << 8 | byte) + 1, 0 = empty */
    int32_t *child; /* [slots] */
    int32_t *term;  /* [n_nodes] */
    int32_t n_nodes;
    uint8_t first[256]; /* 1 when some token starts with this byte */
} TextTrie;

/* ------------------------------------------------------------- the runtime */

typedef struct TextScratch TextScratch;

struct RadText {
    RadTokenizer *d;
    uint32_t *len;       /* [n_vocab] byte length of each token (0 for holes) */
    TextVocab vocab;     /* every token, including added ones */
    uint8_t *is_added;   /* [n_vocab] 1 for added tokens, 2 for those with a normalized text */
    uint8_t *is_special; /* [n_vocab] 1 for special added tokens (skipped by SKIP_SPECIAL) */
    /* Ids at or past n_model that are added tokens lie outside the BPE
    ** model's own vocabulary, which HF keeps apart from the added ones. */
    int32_t n_model;
    TextMerge *merge; /* [n_merges] by rank */
    TextPairs pairs;

    /* What the BPE model starts from (-1 where the vocabulary lacks it). */
    int32_t byte_sym[256];     /* byte-level: the one-character token of each byte */
    int32_t fallback_sym[256]; /* the <0xNN> byte-fallback tokens */
    int32_t ascii_sym[128];    /* each ASCII character as a token */
    uint16_t byte_char[256];   /* the byte-level alphabet: byte -> code point */
    int16_t char_byte[512];    /* and back: code point (< 512) -> byte, -1 outside it */

    pcre2_code **re;     /* [n_pre] compiled Split regex (NULL for other steps) */
    pcre2_code *gpt2;    /* ByteLevel's own split, when a ByteLevel step has use_regex */
    int jit;             /* the regexes were JIT-compiled */
    TextTrie raw;        /* added tokens matched in the raw text (normalized = 0) */
    TextTrie norm;       /* and in normalized text (normalized = 1), by their normalized form */
    char **norm_content; /* [n_added] normalized form of each added token, NULL unless normalized */
    int32_t *norm_added; /* [n_norm_added] indexes into added[] of normalized tokens, sorted by id */
    int n_norm_added;
    size_t max_token_bytes; /* the longest decoded token, for rad_detok_max_bytes */

    /* The one thing that changes after create: an encode call's scratch
    ** (with its word cache), left here for the next call.  A call takes it
    ** with an atomic exchange, so concurrent calls never share one; a call
    ** that finds none makes its own. */
    _Atomic(TextScratch *) spare;
};

/* -------------------------------------------------------------- text_create.c */

uint32_t text_hash(const char *s, size_t n);
/* The id of the token whose text is s[0..n), or -1. */
int32_t text_vocab_find(const RadText *t, const char *s, size_t n);
/* The same, restricted to the BPE model's own vocabulary (HF's model
** lookups never see added tokens that lie outside it). */
int32_t text_model_find(const RadText *t, const char *s, size_t n);
/* The child of trie node `node` along `byte`, or -1. */
int32_t text_trie_step(const TextTrie *tr, int32_t node, unsigned byte);
/* The text a token decodes from: its vocabulary text, except that an added
** token with `normalized` set reads as its normalized form (as in HF, where
** Llama 2's added "foo" decodes through "▁foo"). */
const char *text_token_text(const RadText *t, int32_t id, size_t *len);
/* The rank of merging (left, right), or -1. */
int32_t text_pair_rank(const RadText *t, int32_t left, int32_t right);

/* ---------------------------------------------------------------- text_utf8.c */

/* Length of the valid UTF-8 character at s[0..n) (1..4), or 0 when the bytes
** there are ill-formed; *cp receives the code point. */
int text_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
/* How many bytes at s[0..n) form one maximal ill-formed subsequence (>= 1):
** each such run reads as one U+FFFD, the rule Python's errors="replace" and
** Rust's from_utf8_lossy share. */
size_t text_utf8_bad_run(const unsigned char *s, size_t n);
/* A malloc'd copy of s[0..n) with every ill-formed run replaced by U+FFFD, or
** NULL (with *out_n = n) when s is valid and may be used as it is. */
char *text_utf8_sanitize(const char *s, size_t n, size_t *out_n, int *nomem);
/* Append the UTF-8 of cp to p; returns bytes written (1..4). */
int text_utf8_put(char *p, uint32_t cp);
/* Unicode White_Space (Rust's and Oniguruma's \s). */
int text_is_space(uint32_t cp);
/* Rust regex's \w: alphabetic, marks, decimal digits, connector punctuation,
** join controls. */
int text_is_word(uint32_t cp);

/* ---------------------------------------------------------------- text_norm.c */

/* A growable byte buffer. */
typedef struct TextBuf {
    char *p;
    size_t n, cap;
} TextBuf;
int text_buf_reserve(TextBuf *b, size_t extra);
int text_buf_put(TextBuf *b, const void *src, size_t n);

/* Run the normalizer steps over s[0..n) into out (replacing its contents). */
int text_normalize(const RadText *t, const char *s, size_t n, TextBuf *out);

/* Called with each pre-token the pre-tokenizer produces, in order. */
typedef int (*TextPieceFn)(void *ctx, const char *s, size_t n);
/* Regex matching state one encode call owns.  The match context carries
** the PCRE2 limits of base/rad_limits.h and the offset limit of each call's
** window; between calls the encode's CPU-time budget is checked (text_norm.c). */
typedef struct TextMatch {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    TextBuf prefixed;      /* ByteLevel add_prefix_space copies */
    uint64_t cpu_deadline; /* this thread's CPU time past which the encode stops; 0: none */
    uint64_t wall_next;    /* monotonic time before which that cannot have come */
    uint64_t budget_ns;    /* the budget, for the message */
    size_t text_bytes;     /* the length of the text being encoded, for the message */
    unsigned tried;        /* PCRE2 calls since the clocks were last read */
} TextMatch;
/* Set up m->md and m->mc (once per scratch); RAD_E_NOMEM. */
int text_match_init(TextMatch *m);
void text_match_free(TextMatch *m);
/* Start the budget of an encode of `bytes` bytes of text. */
void text_match_start(TextMatch *m, size_t bytes);
/* Split s[0..n) by the pre-tokenizer steps and call fn on each piece. */
int text_pre_tokenize(const RadText *t, TextMatch *m, const char *s, size_t n, TextPieceFn fn, void *ctx);

/* Compile a Split or ByteLevel regex; NULL with the message set on failure. */
pcre2_code *text_regex_compile(const char *pattern, const char *what, int *jit);

/* ------------------------------------------------------------------ text_bpe.c */

/* The ids, growable. */
typedef struct TextIds {
    int32_t *v;
    size_t n, cap;
} TextIds;
int text_ids_push(TextIds *ids, int32_t id);

typedef struct TextBpe TextBpe;
TextBpe *text_bpe_new(void);
void text_bpe_free(TextBpe *b);
/* Tokenize one pre-token s[0..n) (normalized text, not yet byte-mapped) and
** append its ids. */
int text_bpe_word(const RadText *t, TextBpe *b, const char *s, size_t n, TextIds *out);
/* Give back the working arrays a very long word made large (the cache stays). */
void text_bpe_trim(TextBpe *b);

/* ---------------------------------------------------------------- text_encode.c */

void text_scratch_free(TextScratch *s);

#endif /* RAD_TEXT_INTERNAL_H */
