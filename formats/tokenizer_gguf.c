/*
** tokenizer_gguf.c: import the tokenizer.ggml.* metadata of a GGUF file into
** the RadTokenizer of tokenizer.h.
**
** The goal is the RadTokenizer the model's own tokenizer.json would give,
** so that engine/text runs a GGUF tokenizer exactly like an imported one:
**
**   gpt2 (byte-level BPE)   vocabulary and "left right" merges as stored;
**       the pre-tokenizer is rebuilt from its llama.cpp name
**       (tokenizer.ggml.pre) as a sequence of Isolated regex Splits followed
**       by a ByteLevel step without a regex of its own; decoder ByteLevel.
**       The regexes are the ones the models' tokenizer.json files spell
**       (llama.cpp rewrites some for std::regex; PCRE2 takes the originals).
**
**   llama (SentencePiece BPE)   the file stores scores, not merges.  A
**       SentencePiece BPE model merges, at each step, the adjacent pair whose
**       concatenation is the vocabulary entry with the highest score.  The
**       same result comes from ordinary ranked BPE when the merges are every
**       split of every token into two tokens, ranked by the score of the
**       token they make: that is the list built here (spm_merges below, and
**       docs/GGUF.md), ordered as Hugging Face's converters order it, so
**       ties break the same way.  Normalizer: Prepend "\u2581" (when
**       add_space_prefix) then Replace " " -> "\u2581"; no pre-tokenizer;
**       decoder SentencePiece, dropping the prefix space it added; byte
**       fallback when the vocabulary has <0xNN> byte tokens.
**
** Token types: control (3) and unknown (2) tokens become special added
** tokens, user-defined (4) ones non-special added tokens; all match the raw
** text (normalized = 0), as llama.cpp matches them.
**
** Where a key is absent the import uses llama.cpp's defaults for the format
** (SentencePiece: bos 1, eos 2, unk 0, add_bos, add_space_prefix), listed in
** docs/GGUF.md; a key that is present but wrong is refused, never replaced.
*/
#include "tokenizer_gguf.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The same bound tokenizer_json.c puts on a vocabulary. */
#define TOK_MAX_VOCAB (1 << 24)

/* tokenizer.ggml.token_type values. */
enum {
    TT_UNDEFINED = 0,
    TT_NORMAL = 1,
    TT_UNKNOWN = 2,
    TT_CONTROL = 3,
    TT_USER_DEFINED = 4,
    TT_UNUSED = 5,
    TT_BYTE = 6
};

#define SPACE_MARK "\xe2\x96\x81" /* U+2581, SentencePiece's visible space */

/* ---------------------------------------------------- pre-tokenizers */

/* Regexes, as the models' tokenizer.json files write them.  Each list is
** applied in order, every regex splitting the pieces the previous ones left
** (HF's Split with behaviour Isolated: matches and the gaps between them
** both become pieces), which is also what llama.cpp does with its lists. */

/* GPT-2's regex, as HF's ByteLevel pre-tokenizer uses it. */
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* The same without the final |\s+, as llama.cpp writes it in its lists
** (whitespace it leaves unmatched becomes a gap piece, so the result is the
** same). */
#define RX_GPT2_SHORT "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"

#define RX_LLAMA3                                                                                            \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define RX_QWEN2                                                                                             \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"      \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define RX_QWEN35                                                                                            \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"  \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define RX_GPT4O                                                                                             \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"              \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"              \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"          \
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define RX_TEKKEN                                                                                            \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"             \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}|"      \
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* CJK ideographs U+4E00-U+9FA5, hiragana U+3040-U+309F, katakana U+30A0-U+30FF. */
#define RX_DEEPSEEK3_CJK "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"

#define RX_DEEPSEEK3_MAIN                                                                                    \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"     \
    " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* DeepSeek LLM's letters: the cased letters (Lu, Ll, Lt) of its Unicode
** version, spelled out as ranges. */
#define RX_DEEPSEEK_LETTERS                                                                                  \
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"        \
    "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"        \
    "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA"            \
    "\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45"            \
    "\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"              \
    "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC"            \
    "\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"         \
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3"        \
    "\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06"            \
    "\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"                      \
    "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"                   \
    "\U0001E900-\U0001E943]+"

/* ASCII and full-width punctuation, curly quotes U+2018-U+201F, U+3000-U+3002. */
#define RX_DEEPSEEK_PUNCT "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+"

/* CJK U+4E00-U+9FA5, U+0800-U+4E00, Hangul U+AC00-U+D7FF. */
#define RX_DEEPSEEK_CJK "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"

static const char *const splits_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2_SHORT, "\\p{N}+",
                                             "[0-9][0-9][0-9]", NULL};
static const char *const splits_gpt2[] = {RX_GPT2, NULL};
static const char *const splits_llama3[] = {RX_LLAMA3, NULL};
static const char *const splits_qwen2[] = {RX_QWEN2, NULL};
static const char *const splits_qwen35[] = {RX_QWEN35, NULL};
static const char *const splits_digits_gpt2[] = {"\\p{N}", RX_GPT2, NULL};
static const char *const splits_gpt4o[] = {RX_GPT4O, NULL};
static const char *const splits_tekken[] = {RX_TEKKEN, NULL};
static const char *const splits_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2_SHORT, "[0-9][0-9][0-9]",
                                            NULL};
static const char *const splits_deepseek_llm[] = {
    "[\\r\\n]", RX_DEEPSEEK_LETTERS, RX_DEEPSEEK_PUNCT, "\\s+$", RX_DEEPSEEK_CJK, "\\p{N}+", NULL};
static const char *const splits_deepseek_coder[] = {"[\\r\\n]",      "\\s?\\p{L}+", "\\s?\\p{P}+",
                                                    RX_DEEPSEEK_CJK, "\\p{N}",      NULL};
static const char *const splits_deepseek3[] = {"\\p{N}{1,3}", RX_DEEPSEEK3_CJK, RX_DEEPSEEK3_MAIN, NULL};

/* What one tokenizer.ggml.pre value stands for. */
typedef struct PreSpec {
    const char *name;
    const char *const *splits; /* Isolated regex Splits, in order */
    int nfc;                   /* the model's tokenizer.json normalizes to NFC first */
    int ignore_merges;         /* a whole pre-token in the vocabulary wins over merges */
    int add_bos;               /* llama.cpp's default when add_bos_token is absent */
} PreSpec;

/* Names and their meaning, from llama.cpp's src/llama-vocab.cpp (the name
** -> pre-type mapping and each pre-type's regex list).  Names not listed are
** refused: guessing a pre-tokenizer gives wrong ids without any error. */
static const PreSpec pre_specs[] = {
    {"default", splits_default, 0, 0, 0},
    {"gpt-2", splits_gpt2, 0, 0, 0},
    {"phi-2", splits_gpt2, 0, 0, 0},
    {"mpt", splits_gpt2, 0, 0, 0},
    {"olmo", splits_gpt2, 0, 0, 0},
    {"llama3", splits_llama3, 0, 1, 1},
    {"llama-v3", splits_llama3, 0, 1, 1},
    {"llama-bpe", splits_llama3, 0, 1, 1},
    {"falcon3", splits_llama3, 0, 1, 1},
    {"pixtral", splits_llama3, 0, 1, 1},
    {"dbrx", splits_llama3, 0, 0, 0},
    {"smaug-bpe", splits_llama3, 0, 0, 0},
    {"qwen2", splits_qwen2, 1, 0, 0},
    {"deepseek-r1-qwen", splits_qwen2, 1, 0, 0},
    {"qwen35", splits_qwen35, 1, 0, 0},
    {"smollm", splits_digits_gpt2, 0, 0, 0},
    {"starcoder", splits_digits_gpt2, 0, 0, 0},
    {"refact", splits_digits_gpt2, 0, 0, 0},
    {"command-r", splits_digits_gpt2, 0, 0, 0},
    {"gpt-4o", splits_gpt4o, 0, 0, 0},
    {"llama4", splits_gpt4o, 0, 0, 0},
    {"tekken", splits_tekken, 0, 1, 1},
    {"falcon", splits_falcon, 0, 0, 0},
    {"deepseek-llm", splits_deepseek_llm, 0, 0, 0},
    {"deepseek-coder", splits_deepseek_coder, 0, 0, 0},
    {"deepseek-v3", splits_deepseek3, 0, 0, 0},
};

static const PreSpec *find_pre(const char *name)
{
    for (size_t i = 0; i < sizeof pre_specs / sizeof pre_specs[0]; i++)
        if (strcmp(pre_specs[i].name, name) == 0) return &pre_specs[i];
    return NULL;
}

/* ------------------------------------------------------- the import */

/* The import in progress. */
typedef struct Import {
    const RadGguf *g;
    const char *path;
    RadTokenizer *t;
    size_t *len;   /* [n_vocab] byte length of each token (0 for holes) */
    size_t cap;    /* vocabulary hash: a power of two */
    int32_t *slot; /* id + 1, 0 empty */
} Import;

/* Set "PATH: <message>" and return `code`. */
static int fail(const Import *im, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(const Import *im, int code, const char *fmt, ...)
{
    char what[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rad_error_set(code, "%s: %s", im->path, what);
}

static int nomem(const Import *im)
{
    return fail(im, RAD_E_NOMEM, "out of memory building the tokenizer");
}

/* A token's text made safe for a one-line message. */
static const char *shown(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    for (; s && *s && n + 4 < cap && n < 60; s++)
        buf[n++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
    if (s && *s && n + 4 <= cap) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = 0;
    return buf;
}

/* --------------------------------------------------- vocabulary hash */

/* Tokens are hashed as polynomials, h = sum of byte[i] * B^(n-1-i) (mod 2^64),
** so the hashes of every prefix and every suffix of a token come out of one
** pass each (spm_merges): a hostile file with one enormous token costs time
** linear in its length, not quadratic.  `mix` spreads the bits before the
** low ones pick a slot. */
#define HASH_B 0x100000001b3ull

static uint64_t poly_hash(const char *s, size_t n)
{
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) h = h * HASH_B + (unsigned char)s[i];
    return h;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* The slot holding the token with these bytes (whose poly_hash is `h`), or
** the empty slot where it would go. */
static size_t vocab_slot(const Import *im, const char *s, size_t n, uint64_t h)
{
    size_t i = (size_t)mix(h) & (im->cap - 1);
    for (;;) {
        int32_t at = im->slot[i];
        if (!at) return i;
        if (im->len[at - 1] == n && memcmp(im->t->token[at - 1], s, n) == 0) return i;
        i = (i + 1) & (im->cap - 1);
    }
}

/* The id of the token with these bytes and hash, or -1. */
static int32_t vocab_find(const Import *im, const char *s, size_t n, uint64_t h)
{
    return im->slot[vocab_slot(im, s, n, h)] - 1;
}

/* ------------------------------------------------------- vocabulary */

/* Copy tokenizer.ggml.tokens into t->token and index it; a token twice or
** holding a NUL byte is refused, an empty one is a hole (NULL). */
static int read_tokens(Import *im, const RadGgufValue *tokens)
{
    RadTokenizer *t = im->t;
    int n = t->n_vocab;
    char buf[80];
    t->token = calloc((size_t)n, sizeof *t->token);
    im->len = calloc((size_t)n, sizeof *im->len);
    im->cap = 16;
    while (im->cap / 2 < (size_t)n) im->cap *= 2;
    im->slot = calloc(im->cap, sizeof *im->slot);
    if (!t->token || !im->len || !im->slot) return nomem(im);
    for (int i = 0; i < n; i++) {
        uint64_t len;
        const char *s = rad_gguf_arr_str(tokens, (uint64_t)i, &len);
        if (len == 0) continue;
        if (strlen(s) != len)
            return fail(im, RAD_E_FORMAT,
                        "tokenizer.ggml.tokens: token %d holds a NUL byte: the file is damaged", i);
        size_t slot = vocab_slot(im, s, (size_t)len, poly_hash(s, (size_t)len));
        if (im->slot[slot])
            return fail(im, RAD_E_FORMAT,
                        "tokenizer.ggml.tokens: token '%s' has ids %d and %d: the file is damaged",
                        shown(s, buf, sizeof buf), im->slot[slot] - 1, i);
        if (!(t->token[i] = malloc((size_t)len + 1))) return nomem(im);
        memcpy(t->token[i], s, (size_t)len + 1);
        im->len[i] = (size_t)len;
        im->slot[slot] = i + 1;
    }
    return 0;
}

/* An optional per-token array `key` of numbers: NULL when absent; refused
** when it is not numbers or its length is not the vocabulary's. */
static int per_token_array(Import *im, const char *key, int want_int, const RadGgufValue **out)
{
    int rc = rad_gguf_get_array(im->g, key, -1, out);
    if (rc || !*out) return rc;
    int et = (*out)->arr.type;
    int is_int = et == RAD_GGUF_I8 || et == RAD_GGUF_U8 || et == RAD_GGUF_I16 || et == RAD_GGUF_U16 ||
                 et == RAD_GGUF_I32 || et == RAD_GGUF_U32 || et == RAD_GGUF_I64 || et == RAD_GGUF_U64;
    int is_float = et == RAD_GGUF_F32 || et == RAD_GGUF_F64;
    if (want_int ? !is_int : !(is_int || is_float))
        return fail(im, RAD_E_FORMAT, "%s is an array of %s; expected %s", key, rad_gguf_type_name(et),
                    want_int ? "integers" : "numbers");
    if ((*out)->arr.n != (uint64_t)im->t->n_vocab)
        return fail(im, RAD_E_FORMAT,
                    "%s has %llu entries but tokenizer.ggml.tokens has %d: the file is damaged", key,
                    (unsigned long long)(*out)->arr.n, im->t->n_vocab);
    return 0;
}

/* Control, unknown and user-defined tokens become added tokens. */
static int read_added(Import *im, const RadGgufValue *types)
{
    RadTokenizer *t = im->t;
    int n = 0;
    if (!types) return 0;
    for (int i = 0; i < t->n_vocab; i++) {
        int64_t ty = rad_gguf_arr_int(types, (uint64_t)i);
        if (ty < TT_UNDEFINED || ty > TT_BYTE)
            return fail(im, RAD_E_FORMAT,
                        "tokenizer.ggml.token_type: token %d has type %lld, not a GGUF token "
                        "type (0..6): the file is damaged",
                        i, (long long)ty);
        if (ty == TT_CONTROL || ty == TT_UNKNOWN || ty == TT_USER_DEFINED) n++;
        if (ty == TT_BYTE) t->byte_fallback = 1;
    }
    if (!n) return 0;
    if (!(t->added = calloc((size_t)n, sizeof *t->added))) return nomem(im);
    for (int i = 0; i < t->n_vocab; i++) {
        int64_t ty = rad_gguf_arr_int(types, (uint64_t)i);
        if (ty != TT_CONTROL && ty != TT_UNKNOWN && ty != TT_USER_DEFINED) continue;
        if (!t->token[i])
            return fail(im, RAD_E_FORMAT,
                        "tokenizer.ggml.tokens: token %d is empty but marked %s: the file is "
                        "damaged",
                        i, ty == TT_USER_DEFINED ? "user-defined" : "special");
        RadTokAdded *a = &t->added[t->n_added];
        if (!(a->content = strdup(t->token[i]))) return nomem(im);
        a->id = i;
        a->special = ty != TT_USER_DEFINED;
        t->n_added++;
    }
    return 0;
}

/* ---------------------------------------------------------- merges */

/* Copy "left right" strings from tokenizer.ggml.merges. */
static int read_merges(Import *im, const RadGgufValue *merges)
{
    RadTokenizer *t = im->t;
    char buf[80];
    if (merges->arr.n > INT32_MAX)
        return fail(im, RAD_E_FORMAT, "tokenizer.ggml.merges has %llu entries, too many",
                    (unsigned long long)merges->arr.n);
    int n = (int)merges->arr.n;
    t->merge_left = calloc((size_t)n + 1, sizeof *t->merge_left);
    t->merge_right = calloc((size_t)n + 1, sizeof *t->merge_right);
    if (!t->merge_left || !t->merge_right) return nomem(im);
    t->n_merges = n;
    for (int i = 0; i < n; i++) {
        uint64_t len;
        const char *s = rad_gguf_arr_str(merges, (uint64_t)i, &len);
        /* The separator is the first space after the first byte, as llama.cpp
        ** reads it (a token may itself be a space only as its first byte). */
        const char *sp = len > 1 ? memchr(s + 1, ' ', (size_t)len - 1) : NULL;
        if (strlen(s) != len || !sp || sp == s + len - 1)
            return fail(im, RAD_E_FORMAT,
                        "tokenizer.ggml.merges: entry %d ('%s') is not two tokens joined by a "
                        "space: the file is damaged",
                        i, shown(s, buf, sizeof buf));
        if (!(t->merge_left[i] = strndup(s, (size_t)(sp - s))) || !(t->merge_right[i] = strdup(sp + 1)))
            return nomem(im);
    }
    return 0;
}

/* One candidate merge of the SentencePiece vocabulary: token `tok` split into
** tokens `left` + `right`. */
typedef struct SpmMerge {
    float score; /* the score of `tok` */
    int32_t tok, left, right;
    int32_t left_chars, right_chars; /* lengths in code points */
} SpmMerge;

/* Best first: higher score; then longer left part, longer right part; then
** the order of enumeration (token id, then left id, right id).  This is the
** order HF's SentencePiece converters give the merges they extract, so ties
** between equal scores break as in the model's tokenizer.json. */
static int spm_merge_order(const void *a, const void *b)
{
    const SpmMerge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->left_chars != y->left_chars) return x->left_chars > y->left_chars ? -1 : 1;
    if (x->right_chars != y->right_chars) return x->right_chars > y->right_chars ? -1 : 1;
    if (x->tok != y->tok) return x->tok < y->tok ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

/* Code points in n bytes of UTF-8 (bytes that do not continue a character). */
static int32_t utf8_chars(const char *s, size_t n)
{
    int32_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* Derive the merge list of a SentencePiece BPE vocabulary from its scores:
** every split of every token, at a character boundary, into two tokens of
** the vocabulary is a merge, ranked by the score of the token it makes. */
static int spm_merges(Import *im)
{
    RadTokenizer *t = im->t;
    SpmMerge *m = NULL;
    size_t n = 0, cap = 0, longest = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (im->len[i] > longest) longest = im->len[i];
    /* suffix[k] = poly_hash of token[k..len), for the token at hand */
    uint64_t *suffix = malloc((longest + 1) * sizeof *suffix);
    if (!suffix) return nomem(im);
    int rc = 0;
    for (int32_t i = 0; i < t->n_vocab && !rc; i++) {
        const char *s = t->token[i];
        size_t len = im->len[i];
        if (len < 2) continue;
        uint64_t power = 1;
        suffix[len] = 0;
        for (size_t k = len; k-- > 0; power *= HASH_B)
            suffix[k] = suffix[k + 1] + (unsigned char)s[k] * power;
        uint64_t prefix = (unsigned char)s[0];
        for (size_t k = 1; k < len; prefix = prefix * HASH_B + (unsigned char)s[k], k++) {
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue; /* inside a character */
            int32_t l = vocab_find(im, s, k, prefix);
            if (l < 0) continue;
            int32_t r = vocab_find(im, s + k, len - k, suffix[k]);
            if (r < 0) continue;
            if (n == cap) {
                size_t c = cap ? cap * 2 : 4096;
                SpmMerge *grown = realloc(m, c * sizeof *m);
                if (!grown) {
                    rc = nomem(im);
                    break;
                }
                m = grown;
                cap = c;
            }
            m[n++] = (SpmMerge){t->score ? t->score[i] : 0.0f, i, l, r, utf8_chars(s, k),
                                utf8_chars(s + k, len - k)};
        }
    }
    free(suffix);
    if (!rc && n > INT32_MAX)
        rc = fail(im, RAD_E_FORMAT, "tokenizer.ggml.tokens implies %zu merges, too many", n);
    if (!rc && n) qsort(m, n, sizeof *m, spm_merge_order);
    if (!rc) {
        t->merge_left = calloc(n + 1, sizeof *t->merge_left);
        t->merge_right = calloc(n + 1, sizeof *t->merge_right);
        if (!t->merge_left || !t->merge_right) rc = nomem(im);
    }
    if (!rc) {
        t->n_merges = (int)n;
        for (size_t k = 0; k < n && !rc; k++)
            if (!(t->merge_left[k] = strdup(t->token[m[k].left])) ||
                !(t->merge_right[k] = strdup(t->token[m[k].right])))
                rc = nomem(im);
    }
    free(m);
    return rc;
}

/* ----------------------------------------------------------- steps */

/* Append a step of `kind` to *steps.  Returns 0 or RAD_E_NOMEM. */
static int add_step(Import *im, RadTokStep **steps, int *n, int kind, const char *pattern, const char *arg)
{
    RadTokStep *grown = realloc(*steps, ((size_t)*n + 1) * sizeof **steps);
    if (!grown) return nomem(im);
    *steps = grown;
    RadTokStep *s = &grown[*n];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    (*n)++;
    if (kind == RAD_TOK_PRE_SPLIT_REGEX || kind == RAD_TOK_PRE_SPLIT_STRING) s->behavior = RAD_SPLIT_ISOLATED;
    if ((pattern && !(s->pattern = strdup(pattern))) || (arg && !(s->arg = strdup(arg)))) return nomem(im);
    return 0;
}

/* The byte-level pipeline named by tokenizer.ggml.pre. */
static int bytelevel_pipeline(Import *im, const PreSpec *spec)
{
    RadTokenizer *t = im->t;
    int rc;
    if (spec->nfc && (rc = add_step(im, &t->norm, &t->n_norm, RAD_TOK_NORM_NFC, NULL, NULL))) return rc;
    for (const char *const *rx = spec->splits; *rx; rx++)
        if ((rc = add_step(im, &t->pre, &t->n_pre, RAD_TOK_PRE_SPLIT_REGEX, *rx, NULL))) return rc;
    /* ByteLevel without a regex of its own: the Splits above did the splitting. */
    if ((rc = add_step(im, &t->pre, &t->n_pre, RAD_TOK_PRE_BYTELEVEL, NULL, NULL))) return rc;
    t->decoder = RAD_TOK_DECODE_BYTELEVEL;
    t->ignore_merges = spec->ignore_merges;
    return 0;
}

/* The SentencePiece pipeline: spaces become U+2581, after an optional one in front. */
static int spm_pipeline(Import *im, int add_space_prefix)
{
    RadTokenizer *t = im->t;
    int rc;
    if (add_space_prefix && (rc = add_step(im, &t->norm, &t->n_norm, RAD_TOK_NORM_PREPEND, NULL, SPACE_MARK)))
        return rc;
    if ((rc = add_step(im, &t->norm, &t->n_norm, RAD_TOK_NORM_REPLACE, " ", SPACE_MARK))) return rc;
    t->decoder = RAD_TOK_DECODE_SPM;
    t->decode_strip_leading = add_space_prefix;
    t->fuse_unk = 1;
    return 0;
}

/* ------------------------------------------------------ special ids */

/* tokenizer.ggml.<key>: an id in the vocabulary, or `dflt` when absent (-1
** when the default is past the vocabulary).  -1, and its u32 spelling
** 4294967295, mean "none". */
static int read_id(Import *im, const char *key, int32_t dflt, int32_t *out)
{
    int64_t v;
    int rc = rad_gguf_get_int(im->g, key, INT64_MIN, &v);
    if (rc) return rc;
    if (v == INT64_MIN) {
        *out = dflt < im->t->n_vocab ? dflt : -1;
        return 0;
    }
    if (v == -1 || v == UINT32_MAX) {
        *out = -1;
        return 0;
    }
    if (v < 0 || v >= im->t->n_vocab)
        return fail(im, RAD_E_FORMAT, "%s is %lld, outside the vocabulary of %d tokens: the file is damaged",
                    key, (long long)v, im->t->n_vocab);
    *out = (int32_t)v;
    return 0;
}

/* --------------------------------------------------------------- main */

/* Fill im->t from the file.  Everything allocated hangs off im->t. */
static int import(Import *im)
{
    const RadGguf *g = im->g;
    RadTokenizer *t = im->t;
    const char *model, *pre_name, *tmpl;
    const RadGgufValue *tokens, *types, *scores, *merges;
    int rc, spm, add_space_prefix;

    if ((rc = rad_gguf_get_string(g, "tokenizer.ggml.model", NULL, &model))) return rc;
    if (!model) return fail(im, RAD_E_NOTFOUND, "no tokenizer in the file (tokenizer.ggml.model is missing)");
    if (strcmp(model, "llama") == 0)
        spm = 1;
    else if (strcmp(model, "gpt2") == 0)
        spm = 0;
    else
        return fail(im, RAD_E_UNSUPPORTED,
                    "tokenizer.ggml.model '%.60s' is not supported (radiance reads 'gpt2' "
                    "and 'llama')",
                    model);
    t->model = spm ? RAD_TOK_BPE_SPM : RAD_TOK_BPE_BYTELEVEL;

    if ((rc = rad_gguf_get_array(g, "tokenizer.ggml.tokens", RAD_GGUF_STRING, &tokens))) return rc;
    if (!tokens) return fail(im, RAD_E_FORMAT, "tokenizer.ggml.tokens is missing: the file is damaged");
    if (tokens->arr.n == 0 || tokens->arr.n > TOK_MAX_VOCAB)
        return fail(im, RAD_E_FORMAT, "tokenizer.ggml.tokens has %llu entries; radiance reads 1 to %d",
                    (unsigned long long)tokens->arr.n, TOK_MAX_VOCAB);
    t->n_vocab = (int)tokens->arr.n;
    if ((rc = read_tokens(im, tokens))) return rc;
    if ((rc = per_token_array(im, "tokenizer.ggml.token_type", 1, &types))) return rc;
    if ((rc = read_added(im, types))) return rc;
    if (!spm) t->byte_fallback = 0; /* byte tokens mean nothing to a byte-level vocabulary */

    if (spm) {
        if ((rc = per_token_array(im, "tokenizer.ggml.scores", 0, &scores))) return rc;
        if (scores) {
            if (!(t->score = malloc((size_t)t->n_vocab * sizeof *t->score))) return nomem(im);
            for (int i = 0; i < t->n_vocab; i++) {
                t->score[i] = (float)rad_gguf_arr_float(scores, (uint64_t)i);
                if (isnan(t->score[i]))
                    return fail(im, RAD_E_FORMAT,
                                "tokenizer.ggml.scores: token %d has score NaN: the file is "
                                "damaged",
                                i);
            }
        }
        if ((rc = spm_merges(im))) return rc;
        if ((rc = rad_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", 1, &add_space_prefix))) return rc;
        if ((rc = spm_pipeline(im, add_space_prefix))) return rc;
    } else {
        if ((rc = rad_gguf_get_string(g, "tokenizer.ggml.pre", NULL, &pre_name))) return rc;
        if (!pre_name)
            return fail(im, RAD_E_UNSUPPORTED,
                        "tokenizer.ggml.pre is missing: the file predates pre-tokenizer "
                        "names and its pre-tokenizer cannot be known; convert the model again with a current "
                        "llama.cpp");
        const PreSpec *spec = find_pre(pre_name);
        if (!spec)
            return fail(im, RAD_E_UNSUPPORTED,
                        "tokenizer.ggml.pre '%.60s' is not a pre-tokenizer radiance knows "
                        "(see docs/GGUF.md)",
                        pre_name);
        if ((rc = rad_gguf_get_array(g, "tokenizer.ggml.merges", RAD_GGUF_STRING, &merges))) return rc;
        if (!merges) return fail(im, RAD_E_FORMAT, "tokenizer.ggml.merges is missing: the file is damaged");
        if ((rc = read_merges(im, merges))) return rc;
        if ((rc = bytelevel_pipeline(im, spec))) return rc;
        t->add_bos = spec->add_bos;
    }

    if ((rc = read_id(im, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, &t->bos_id)) ||
        (rc = read_id(im, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, &t->eos_id)) ||
        (rc = read_id(im, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, &t->unk_id)) ||
        (rc = read_id(im, "tokenizer.ggml.padding_token_id", -1, &t->pad_id)))
        return rc;
    if ((rc = rad_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", spm ? 1 : t->add_bos, &t->add_bos)) ||
        (rc = rad_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", 0, &t->add_eos)))
        return rc;
    if (t->add_bos && t->bos_id < 0)
        return fail(im, RAD_E_FORMAT,
                    "tokenizer.ggml.add_bos_token is true but there is no bos_token_id: the "
                    "file is damaged");
    if (t->add_eos && t->eos_id < 0)
        return fail(im, RAD_E_FORMAT,
                    "tokenizer.ggml.add_eos_token is true but there is no eos_token_id: the "
                    "file is damaged");

    if ((rc = rad_gguf_get_string(g, "tokenizer.chat_template", NULL, &tmpl))) return rc;
    if (tmpl && !(t->chat_template = strdup(tmpl))) return nomem(im);
    return 0;
}

int rad_tokenizer_from_gguf(const RadGguf *g, RadTokenizer **out)
{
    if (!out) return rad_error_set(RAD_E_ARG, "rad_tokenizer_from_gguf: out is NULL");
    *out = NULL;
    if (!g) return rad_error_set(RAD_E_ARG, "rad_tokenizer_from_gguf: no GGUF");
    Import im = {.g = g, .path = rad_gguf_path(g)};
    if (!(im.t = calloc(1, sizeof *im.t))) return rad_error_set(RAD_E_NOMEM, "%s: out of memory", im.path);
    im.t->unk_id = im.t->bos_id = im.t->eos_id = im.t->pad_id = -1;
    int rc = import(&im);
    free(im.len);
    free(im.slot);
    /* GGUF strings are meant to be UTF-8; those used as text must be (tokenizer.h). */
    const char *name = im.path ? im.path : "GGUF";
    if (!rc) rc = rad_tokenizer_check_text(im.t, name);
    if (!rc && !(im.t->source = strdup(name))) rc = rad_error_set(RAD_E_NOMEM, "%s: out of memory", name);
    if (rc) {
        rad_tokenizer_free(im.t);
        return rc;
    }
    *out = im.t;
    return 0;
}
