/*
** tokenizer_json.c: import a Hugging Face tokenizer.json (and its
** tokenizer_config.json) into the RadTokenizer of tokenizer.h.
**
** tokenizer.json describes a pipeline of named components.  We read the
** handful that the supported models use and refuse every other kind by name,
** so a model whose tokenizer we cannot reproduce exactly fails at import with
** one line ("tokenizer.json: model type 'Unigram' is not supported (BPE is)")
** instead of producing ids that quietly differ from the reference:
**
**   normalizer      NFC, Prepend, Replace (literal pattern), Sequence of them
**   pre_tokenizer   Split (Regex or String pattern, any behaviour, invert),
**                   ByteLevel (last), Sequence of them
**   model           BPE: vocab, merges ("a b" strings or [a, b] pairs),
**                   byte_fallback, fuse_unk, unk_token, ignore_merges
**   post_processor  TemplateProcessing (one special before and/or after the
**                   sequence), ByteLevel (ids unchanged), Sequence of them
**   decoder         ByteLevel; or Sequence [Replace "▁"->" ", ByteFallback,
**                   Fuse, optional Strip of leading spaces]
**
** What add_special_tokens adds follows the post_processor alone, as HF
** tokenizers does: tokenizer_config.json's add_bos_token is not consulted
** (deepseek_v3 says true, yet neither tokenizers nor transformers adds a BOS,
** its post_processor being ByteLevel).  The config supplies bos/eos/pad ids
** and the chat template.
*/
#include "tokenizer.h"
#include "rad_limits.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ids beyond this are refused: it bounds the token table we allocate from
** numbers a hostile file chooses. */
#define TOK_MAX_VOCAB  (1 << 24)
#define TOK_MAX_MERGES (1 << 26)
#define TOK_MAX_ADDED  (1 << 20)

/* The import in progress: the file's name for messages and the result. */
typedef struct Import {
    const char *name;
    RadTokenizer *t;
    int32_t model_unk; /* unk id from the model section, -1 when none */
} Import;

/* Set "PREFIX: <message>" and return `code`.  Token texts go into messages
** and may hold newlines or other control characters ("\n\n" is a token),
** so those are written as escapes: a message stays one line. */
static int fail_as(const char *prefix, int code, const char *fmt, va_list ap)
{
    char what[512], line[2048];
    vsnprintf(what, sizeof what, fmt, ap);
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)what; *p && o + 5 < sizeof line; p++) {
        if (*p == '\n')
            o += (size_t)snprintf(line + o, sizeof line - o, "\\n");
        else if (*p < 0x20 || *p == 0x7F)
            o += (size_t)snprintf(line + o, sizeof line - o, "\\x%02x", *p);
        else
            line[o++] = (char)*p;
    }
    line[o] = 0;
    return rad_error_set(code, "%s: %s", prefix, line);
}

static int fail(const Import *im, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(const Import *im, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = fail_as(im->name, code, fmt, ap);
    va_end(ap);
    return rc;
}

/* The same for tokenizer_config.json. */
static int fail_config(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_config(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = fail_as("tokenizer_config.json", code, fmt, ap);
    va_end(ap);
    return rc;
}

/* A malloc'd copy of a JSON string value (NUL bytes inside are refused by
** the caller through json_string_length), or NULL on allocation failure. */
static char *dup_string(const json_t *s)
{
    size_t n = json_string_length(s);
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, json_string_value(s), n);
    p[n] = 0;
    return p;
}

/* True when the JSON string holds a NUL byte, which our C strings cannot. */
static int has_nul(const json_t *s)
{
    return strlen(json_string_value(s)) != json_string_length(s);
}

/* A boolean member, `dflt` when absent or null. */
static int get_bool(const json_t *obj, const char *key, int dflt)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return dflt;
    return json_is_true(v);
}

/* The "type" member of a component, or "" when it has none. */
static const char *type_of(const json_t *obj)
{
    const char *s = json_string_value(json_object_get(obj, "type"));
    return s ? s : "";
}

/* ---------------------------------------------------------------- steps */

/* Append an empty step to (*steps, *n) and return it, or NULL when out of
** memory.  Arrays stay small (a pipeline has a few steps). */
static RadTokStep *push_step(RadTokStep **steps, int *n)
{
    RadTokStep *grown = realloc(*steps, (size_t)(*n + 1) * sizeof **steps);
    if (!grown) return NULL;
    *steps = grown;
    memset(&grown[*n], 0, sizeof **steps);
    return &grown[(*n)++];
}

/* Read a {"String": s} or {"Regex": r} pattern into step->pattern and say
** which it was (*is_regex). */
static int read_pattern(Import *im, const json_t *pat, const char *where, RadTokStep *step, int *is_regex)
{
    const json_t *s = json_object_get(pat, "String"), *r = json_object_get(pat, "Regex");
    const json_t *v = json_is_string(s) ? s : json_is_string(r) ? r : NULL;
    if (!json_is_object(pat) || !v)
        return fail(im, RAD_E_FORMAT, "%s: 'pattern' must be {\"String\": ...} or {\"Regex\": ...}", where);
    if (has_nul(v))
        return fail(im, RAD_E_UNSUPPORTED, "%s: a pattern holding a NUL byte is not supported", where);
    *is_regex = v == r;
    step->pattern = dup_string(v);
    return step->pattern ? RAD_OK : RAD_E_NOMEM;
}

/* Read one normalizer (flattening Sequences) into t->norm. */
static int read_normalizer(Import *im, const json_t *n)
{
    RadTokenizer *t = im->t;
    const char *type = type_of(n);
    if (!json_is_object(n)) return fail(im, RAD_E_FORMAT, "normalizer must be an object");
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(n, "normalizers");
        size_t i;
        const json_t *item;
        if (!json_is_array(list))
            return fail(im, RAD_E_FORMAT, "normalizer Sequence without a 'normalizers' list");
        json_array_foreach(list, i, item)
        {
            int rc = read_normalizer(im, item);
            if (rc) return rc;
        }
        return RAD_OK;
    }
    RadTokStep *step = push_step(&t->norm, &t->n_norm);
    if (!step) return RAD_E_NOMEM;
    if (strcmp(type, "NFC") == 0) {
        step->kind = RAD_TOK_NORM_NFC;
        return RAD_OK;
    }
    if (strcmp(type, "Prepend") == 0) {
        const json_t *p = json_object_get(n, "prepend");
        if (!json_is_string(p) || has_nul(p))
            return fail(im, RAD_E_FORMAT, "normalizer Prepend needs a 'prepend' string");
        step->kind = RAD_TOK_NORM_PREPEND;
        step->arg = dup_string(p);
        return step->arg ? RAD_OK : RAD_E_NOMEM;
    }
    if (strcmp(type, "Replace") == 0) {
        const json_t *c = json_object_get(n, "content");
        int is_regex = 0, rc;
        if (!json_is_string(c) || has_nul(c))
            return fail(im, RAD_E_FORMAT, "normalizer Replace needs a 'content' string");
        step->kind = RAD_TOK_NORM_REPLACE;
        if ((rc = read_pattern(im, json_object_get(n, "pattern"), "normalizer Replace", step, &is_regex)))
            return rc;
        if (is_regex)
            return fail(im, RAD_E_UNSUPPORTED,
                        "normalizer Replace with a Regex pattern is not supported (a String pattern is)");
        if (!step->pattern[0])
            return fail(im, RAD_E_UNSUPPORTED, "normalizer Replace with an empty pattern is not supported");
        step->arg = dup_string(c);
        return step->arg ? RAD_OK : RAD_E_NOMEM;
    }
    t->n_norm--; /* drop the step we pushed: it was not one we serve */
    return fail(im, RAD_E_UNSUPPORTED,
                "normalizer type '%s' is not supported (NFC, Prepend, Replace, Sequence are)", type);
}

/* The behaviour names of a Split pre-tokenizer. */
static int split_behavior(const char *s)
{
    static const struct {
        const char *name;
        int b;
    } names[] = {
        {"Isolated", RAD_SPLIT_ISOLATED},
        {"MergedWithPrevious", RAD_SPLIT_MERGED_WITH_PREVIOUS},
        {"MergedWithNext", RAD_SPLIT_MERGED_WITH_NEXT},
        {"Removed", RAD_SPLIT_REMOVED},
        {"Contiguous", RAD_SPLIT_CONTIGUOUS},
    };
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) return names[i].b;
    return 0;
}

/* Read one pre-tokenizer (flattening Sequences) into t->pre. */
static int read_pre_tokenizer(Import *im, const json_t *p)
{
    RadTokenizer *t = im->t;
    const char *type = type_of(p);
    if (!json_is_object(p)) return fail(im, RAD_E_FORMAT, "pre_tokenizer must be an object");
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(p, "pretokenizers");
        size_t i;
        const json_t *item;
        if (!json_is_array(list))
            return fail(im, RAD_E_FORMAT, "pre_tokenizer Sequence without a 'pretokenizers' list");
        json_array_foreach(list, i, item)
        {
            int rc = read_pre_tokenizer(im, item);
            if (rc) return rc;
        }
        return RAD_OK;
    }
    if (t->n_pre > 0 && t->pre[t->n_pre - 1].kind == RAD_TOK_PRE_BYTELEVEL)
        return fail(im, RAD_E_UNSUPPORTED,
                    "pre_tokenizer '%s' after ByteLevel is not supported (ByteLevel must be last)", type);
    RadTokStep *step = push_step(&t->pre, &t->n_pre);
    if (!step) return RAD_E_NOMEM;
    if (strcmp(type, "Split") == 0) {
        const char *b = json_string_value(json_object_get(p, "behavior"));
        int is_regex = 0, rc;
        if ((rc = read_pattern(im, json_object_get(p, "pattern"), "pre_tokenizer Split", step, &is_regex)))
            return rc;
        step->kind = is_regex ? RAD_TOK_PRE_SPLIT_REGEX : RAD_TOK_PRE_SPLIT_STRING;
        step->behavior = split_behavior(b);
        step->invert = get_bool(p, "invert", 0);
        if (!step->behavior)
            return fail(im, RAD_E_UNSUPPORTED, "pre_tokenizer Split behavior '%s' is not supported",
                        b ? b : "(missing)");
        return RAD_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        step->kind = RAD_TOK_PRE_BYTELEVEL;
        step->add_prefix_space = get_bool(p, "add_prefix_space", 1);
        step->use_regex = get_bool(p, "use_regex", 1);
        return RAD_OK;
    }
    t->n_pre--;
    return fail(im, RAD_E_UNSUPPORTED,
                "pre_tokenizer type '%s' is not supported (Split, ByteLevel, Sequence are)", type);
}

/* ---------------------------------------------------------------- model */

/* Store `text` (n bytes) as the token of `id`, refusing two different texts
** for one id (the model's vocab and the added tokens must agree). */
static int set_token(Import *im, int32_t id, const char *text, size_t n, int from_added)
{
    RadTokenizer *t = im->t;
    if (strlen(text) != n)
        return fail(im, RAD_E_UNSUPPORTED, "token %d holds a NUL byte, which is not supported", (int)id);
    if (t->token[id]) {
        if (strcmp(t->token[id], text) == 0) return RAD_OK;
        if (from_added)
            return fail(im, RAD_E_UNSUPPORTED, "added token '%s' reuses id %d of vocabulary token '%s'", text,
                        (int)id, t->token[id]);
        return fail(im, RAD_E_FORMAT, "model vocab gives id %d to both '%s' and '%s'", (int)id, t->token[id],
                    text);
    }
    t->token[id] = strndup(text, n);
    return t->token[id] ? RAD_OK : RAD_E_NOMEM;
}

/* Split one merges entry into its two halves (malloc'd into *l, *r). */
static int read_merge(Import *im, const json_t *m, size_t rank, char **l, char **r)
{
    if (json_is_string(m)) {
        /* "a b": exactly one space, as HF requires. */
        const char *s = json_string_value(m), *sp = strchr(s, ' ');
        if (has_nul(m) || !sp || strchr(sp + 1, ' '))
            return fail(im, RAD_E_FORMAT, "model merges[%zu] '%s' is not two tokens separated by one space",
                        rank, s);
        *l = strndup(s, (size_t)(sp - s));
        *r = strdup(sp + 1);
    } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
               json_is_string(json_array_get(m, 1))) {
        if (has_nul(json_array_get(m, 0)) || has_nul(json_array_get(m, 1)))
            return fail(im, RAD_E_UNSUPPORTED, "model merges[%zu] holds a NUL byte, which is not supported",
                        rank);
        *l = dup_string(json_array_get(m, 0));
        *r = dup_string(json_array_get(m, 1));
    } else {
        return fail(im, RAD_E_FORMAT, "model merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", rank);
    }
    return *l && *r ? RAD_OK : RAD_E_NOMEM;
}

/* The highest id among model.vocab and added_tokens, checking each is a
** non-negative integer below TOK_MAX_VOCAB. */
static int max_id(Import *im, const json_t *vocab, const json_t *added, int32_t *out)
{
    const char *key;
    const json_t *v;
    size_t i;
    int64_t hi = -1;
    json_object_foreach((json_t *)vocab, key, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= TOK_MAX_VOCAB)
            return fail(im, RAD_E_FORMAT, "model vocab id of '%s' is not an integer in [0, %d)", key,
                        TOK_MAX_VOCAB);
        if (json_integer_value(v) > hi) hi = json_integer_value(v);
    }
    json_array_foreach(added, i, v)
    {
        const json_t *id = json_object_get(v, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= TOK_MAX_VOCAB)
            return fail(im, RAD_E_FORMAT, "added_tokens[%zu] id is not an integer in [0, %d)", i,
                        TOK_MAX_VOCAB);
        if (json_integer_value(id) > hi) hi = json_integer_value(id);
    }
    *out = (int32_t)hi;
    return RAD_OK;
}

/* Read the BPE model section: options, vocab and merges. */
static int read_model(Import *im, const json_t *model, const json_t *added)
{
    RadTokenizer *t = im->t;
    const char *type = type_of(model);
    const json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    int rc;

    if (!json_is_object(model)) return fail(im, RAD_E_FORMAT, "no \"model\" section");
    /* Old files leave "type" out; HF then recognises BPE by its fields. */
    if (!*type && json_is_object(vocab) && json_is_array(merges)) type = "BPE";
    if (strcmp(type, "BPE") != 0)
        return fail(im, RAD_E_UNSUPPORTED, "model type '%s' is not supported (BPE is)",
                    *type ? type : "(missing)");
    if (!json_is_object(vocab)) return fail(im, RAD_E_FORMAT, "model vocab must be an object");
    if (!json_is_array(merges)) return fail(im, RAD_E_FORMAT, "model merges must be a list");

    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return fail(im, RAD_E_UNSUPPORTED, "model BPE dropout is not supported");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const json_t *a = json_object_get(model, affixes[i]);
        if (a && !json_is_null(a) && !(json_is_string(a) && json_string_length(a) == 0))
            return fail(im, RAD_E_UNSUPPORTED, "model BPE %s is not supported", affixes[i]);
    }
    t->byte_fallback = get_bool(model, "byte_fallback", 0);
    t->fuse_unk = get_bool(model, "fuse_unk", 0);
    t->ignore_merges = get_bool(model, "ignore_merges", 0);

    int32_t hi = -1;
    if ((rc = max_id(im, vocab, added, &hi))) return rc;
    if (hi < 0) return fail(im, RAD_E_FORMAT, "model vocab is empty");
    t->n_vocab = hi + 1;
    t->token = calloc((size_t)t->n_vocab, sizeof *t->token);
    if (!t->token) return RAD_E_NOMEM;

    const json_t *v;
    void *it;
    for (it = json_object_iter((json_t *)vocab); it; it = json_object_iter_next((json_t *)vocab, it)) {
        v = json_object_iter_value(it);
        rc = set_token(im, (int32_t)json_integer_value(v), json_object_iter_key(it),
                       json_object_iter_key_len(it), 0);
        if (rc) return rc;
    }

    const json_t *unk = json_object_get(model, "unk_token");
    im->model_unk = -1;
    if (json_is_string(unk)) {
        const json_t *id = json_object_get(vocab, json_string_value(unk));
        if (!id)
            return fail(im, RAD_E_FORMAT, "model unk_token '%s' is not in the vocab", json_string_value(unk));
        im->model_unk = (int32_t)json_integer_value(id);
    }

    size_t n = json_array_size(merges);
    if (n > TOK_MAX_MERGES)
        return fail(im, RAD_E_UNSUPPORTED, "model has %zu merges, more than %d", n, TOK_MAX_MERGES);
    t->merge_left = calloc(n ? n : 1, sizeof *t->merge_left);
    t->merge_right = calloc(n ? n : 1, sizeof *t->merge_right);
    t->merge_ids = malloc(3 * (n ? n : 1) * sizeof *t->merge_ids);
    if (!t->merge_left || !t->merge_right || !t->merge_ids) return RAD_E_NOMEM;
    t->n_merges = (int)n;
    char joined[1024];
    for (size_t i = 0; i < n; i++) {
        if ((rc = read_merge(im, json_array_get(merges, i), i, &t->merge_left[i], &t->merge_right[i])))
            return rc;
        /* HF refuses a merge whose halves or result are not tokens; so do we,
        ** which also lets the store keep merges as token ids. */
        const char *l = t->merge_left[i], *r = t->merge_right[i];
        size_t nl = strlen(l), nr = strlen(r);
        if (nl + nr >= sizeof joined)
            return fail(im, RAD_E_UNSUPPORTED, "model merges[%zu] is longer than %zu bytes", i,
                        sizeof joined);
        memcpy(joined, l, nl);
        memcpy(joined + nl, r, nr + 1);
        const char *part[3] = {l, r, joined};
        for (int k = 0; k < 3; k++) {
            const json_t *id = json_object_get(vocab, part[k]);
            if (!id)
                return fail(im, RAD_E_FORMAT, "model merges[%zu] names '%s', which is not in the vocab", i,
                            part[k]);
            t->merge_ids[3 * i + (size_t)k] = (int32_t)json_integer_value(id);
        }
    }
    return RAD_OK;
}

/* Read added_tokens: each becomes a RadTokAdded and the token text of its id. */
static int read_added(Import *im, const json_t *added, const json_t *vocab)
{
    RadTokenizer *t = im->t;
    size_t i;
    const json_t *a;
    if (json_array_size(added) > TOK_MAX_ADDED)
        return fail(im, RAD_E_UNSUPPORTED, "%zu added_tokens are more than %d", json_array_size(added),
                    TOK_MAX_ADDED);
    t->added = calloc(json_array_size(added) + 1, sizeof *t->added);
    if (!t->added) return RAD_E_NOMEM;
    json_array_foreach(added, i, a)
    {
        const json_t *content = json_object_get(a, "content");
        if (!json_is_string(content) || json_string_length(content) == 0)
            return fail(im, RAD_E_FORMAT, "added_tokens[%zu] has no 'content' string", i);
        int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
        /* HF gives an added token that the model already has the model's id,
        ** whatever the file says; a file that disagrees is not one HF wrote. */
        const json_t *in_vocab = json_object_get(vocab, json_string_value(content));
        if (in_vocab && json_integer_value(in_vocab) != id)
            return fail(im, RAD_E_UNSUPPORTED, "added token '%s' has id %d but the model vocab gives it %lld",
                        json_string_value(content), (int)id, (long long)json_integer_value(in_vocab));
        int rc = set_token(im, id, json_string_value(content), json_string_length(content), 1);
        if (rc) return rc;
        RadTokAdded *at = &t->added[t->n_added];
        at->id = id;
        at->special = get_bool(a, "special", 0);
        at->lstrip = get_bool(a, "lstrip", 0);
        at->rstrip = get_bool(a, "rstrip", 0);
        at->single_word = get_bool(a, "single_word", 0);
        at->normalized = get_bool(a, "normalized", !at->special);
        at->content = dup_string(content);
        if (!at->content) return RAD_E_NOMEM;
        t->n_added++;
    }
    return RAD_OK;
}

/* ------------------------------------------------- decoder, post-processor */

/* Is this decoder step exactly Replace "▁" -> " "? */
static int is_space_replace(const json_t *d)
{
    const json_t *pat = json_object_get(d, "pattern");
    const char *s = json_string_value(json_object_get(pat, "String"));
    const char *c = json_string_value(json_object_get(d, "content"));
    return strcmp(type_of(d), "Replace") == 0 && s && c && strcmp(s, "\xe2\x96\x81") == 0 &&
           strcmp(c, " ") == 0;
}

/* Read the decoder: ByteLevel, or the SentencePiece-style Sequence. */
static int read_decoder(Import *im, const json_t *d)
{
    RadTokenizer *t = im->t;
    const char *type = type_of(d);
    if (!d || json_is_null(d))
        return fail(im, RAD_E_UNSUPPORTED,
                    "a missing decoder is not supported (ByteLevel or the SentencePiece Sequence is)");
    if (strcmp(type, "ByteLevel") == 0) {
        t->decoder = RAD_TOK_DECODE_BYTELEVEL;
        return RAD_OK;
    }
    if (strcmp(type, "Sequence") != 0)
        return fail(im, RAD_E_UNSUPPORTED, "decoder type '%s' is not supported (ByteLevel, Sequence are)",
                    type);
    const json_t *list = json_object_get(d, "decoders");
    size_t n = json_array_size(list);
    if (n == 1 && strcmp(type_of(json_array_get(list, 0)), "ByteLevel") == 0) {
        t->decoder = RAD_TOK_DECODE_BYTELEVEL;
        return RAD_OK;
    }
    /* The one Sequence we serve: Replace("▁", " "), ByteFallback, Fuse, then
    ** optionally Strip(" ", start=N, stop=0). */
    static const char *const want[] = {"Replace", "ByteFallback", "Fuse", "Strip"};
    for (size_t i = 0; i < n; i++) {
        const json_t *step = json_array_get(list, i);
        const char *st = type_of(step);
        if (i >= 4 || strcmp(st, want[i]) != 0)
            return fail(im, RAD_E_UNSUPPORTED,
                        "decoder Sequence step %zu '%s' is not supported (Replace \"\xe2\x96\x81\", "
                        "ByteFallback, Fuse, Strip are, in that order)",
                        i, st);
        if (i == 0 && !is_space_replace(step))
            return fail(im, RAD_E_UNSUPPORTED,
                        "decoder Replace other than \"\xe2\x96\x81\" -> \" \" is not supported");
        if (i == 3) {
            const char *c = json_string_value(json_object_get(step, "content"));
            json_int_t start = json_integer_value(json_object_get(step, "start"));
            json_int_t stop = json_integer_value(json_object_get(step, "stop"));
            if (!c || strcmp(c, " ") != 0 || stop != 0 || start < 0 || start > 64)
                return fail(
                    im, RAD_E_UNSUPPORTED,
                    "decoder Strip other than leading spaces (content \" \", stop 0) is not supported");
            t->decode_strip_leading = (int)start;
        }
    }
    if (n < 3) return fail(im, RAD_E_UNSUPPORTED, "decoder Sequence of %zu steps is not supported", n);
    t->decoder = RAD_TOK_DECODE_SPM;
    return RAD_OK;
}

/* The single id a TemplateProcessing special token stands for. */
static int template_special_id(Import *im, const json_t *pp, const char *name, int32_t *id)
{
    const json_t *sp = json_object_get(json_object_get(pp, "special_tokens"), name);
    const json_t *ids = json_object_get(sp, "ids");
    if (!json_is_array(ids) || json_array_size(ids) != 1 || !json_is_integer(json_array_get(ids, 0)))
        return fail(im, RAD_E_UNSUPPORTED, "post_processor special token '%s' must stand for exactly one id",
                    name);
    json_int_t v = json_integer_value(json_array_get(ids, 0));
    if (v < 0 || v >= im->t->n_vocab)
        return fail(im, RAD_E_FORMAT, "post_processor special token '%s' has id %lld outside the vocabulary",
                    name, (long long)v);
    *id = (int32_t)v;
    return RAD_OK;
}

/* Read the post-processor: what add_special_tokens adds around a sequence. */
static int read_post_processor(Import *im, const json_t *pp)
{
    RadTokenizer *t = im->t;
    const char *type = type_of(pp);
    if (!pp || json_is_null(pp) || strcmp(type, "ByteLevel") == 0) return RAD_OK; /* adds nothing */
    if (strcmp(type, "Sequence") == 0) {
        size_t i;
        const json_t *item;
        json_array_foreach(json_object_get(pp, "processors"), i, item)
        {
            int rc = read_post_processor(im, item);
            if (rc) return rc;
        }
        return RAD_OK;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return fail(im, RAD_E_UNSUPPORTED,
                    "post_processor type '%s' is not supported (TemplateProcessing, ByteLevel, Sequence are)",
                    type);
    const json_t *single = json_object_get(pp, "single");
    size_t i, seq_at = (size_t)-1, n = json_array_size(single);
    const json_t *item;
    json_array_foreach(single, i, item)
    {
        const json_t *sp = json_object_get(item, "SpecialToken"), *sq = json_object_get(item, "Sequence");
        if (sq) {
            if (seq_at != (size_t)-1)
                return fail(im, RAD_E_UNSUPPORTED, "post_processor template with two sequences");
            seq_at = i;
            continue;
        }
        const char *name = json_string_value(json_object_get(sp, "id"));
        if (!name)
            return fail(im, RAD_E_FORMAT,
                        "post_processor template item %zu is neither SpecialToken nor Sequence", i);
        int32_t id = -1;
        int rc = template_special_id(im, pp, name, &id);
        if (rc) return rc;
        if (seq_at == (size_t)-1 && i == 0) {
            t->add_bos = 1;
            t->bos_id = id;
        } else if (seq_at != (size_t)-1 && i == n - 1 && i == seq_at + 1) {
            t->add_eos = 1;
            t->eos_id = id;
        } else {
            return fail(im, RAD_E_UNSUPPORTED,
                        "post_processor template other than [special] $A [special] is not supported");
        }
    }
    if (seq_at == (size_t)-1) return fail(im, RAD_E_FORMAT, "post_processor template has no $A sequence");
    return RAD_OK;
}

/* ---------------------------------------------------------------- config */

/* The text of a config token entry: a string or an AddedToken object. */
static const char *config_token_text(const json_t *v)
{
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v)) return json_string_value(json_object_get(v, "content"));
    return NULL;
}

/* The id of token text `s`, or -1.  Added tokens first (they win in HF), then
** a linear scan of the vocabulary, which runs only a few times per import. */
static int32_t find_token(const RadTokenizer *t, const char *s)
{
    for (int i = 0; i < t->n_added; i++)
        if (strcmp(t->added[i].content, s) == 0) return t->added[i].id;
    for (int i = 0; i < t->n_vocab; i++)
        if (t->token[i] && strcmp(t->token[i], s) == 0) return i;
    return -1;
}

/* Read bos/eos/pad and the chat template from tokenizer_config.json. */
static int read_config(Import *im, const char *config_json, size_t config_len)
{
    RadTokenizer *t = im->t;
    json_error_t err;
    /* model_max_length is often 1e30, past a 64-bit integer: read numbers as reals. */
    json_t *c = json_loadb(config_json, config_len, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &err);
    if (!c) return fail_config(RAD_E_FORMAT, "line %d: %s", err.line, err.text);
    int rc = RAD_OK;
    if (!json_is_object(c)) {
        rc = fail_config(RAD_E_FORMAT, "not a JSON object");
        goto done;
    }
    static const char *const keys[] = {"bos_token", "eos_token", "pad_token"};
    int32_t *dst[] = {&t->bos_id, &t->eos_id, &t->pad_id};
    for (int k = 0; k < 3; k++) {
        const json_t *v = json_object_get(c, keys[k]);
        const char *s = config_token_text(v);
        if (!s) continue;
        int32_t id = find_token(t, s);
        if (id < 0 && k == 2) continue; /* padding plays no part in inference */
        if (id < 0) {
            rc = fail_config(RAD_E_FORMAT, "%s '%s' is not a token of %s", keys[k], s, im->name);
            goto done;
        }
        /* The post-processor's own BOS/EOS is what encode adds; a config that
        ** names another token would make one id mean two things. */
        if ((k == 0 && t->add_bos && id != t->bos_id) || (k == 1 && t->add_eos && id != t->eos_id)) {
            rc = fail_config(RAD_E_UNSUPPORTED, "%s '%s' differs from the token %s's post_processor adds",
                             keys[k], s, im->name);
            goto done;
        }
        *dst[k] = id;
    }
    const json_t *tpl = json_object_get(c, "chat_template");
    if (json_is_array(tpl)) {
        /* A list of named templates: the one named "default" is the chat template. */
        size_t i;
        const json_t *item, *found = NULL;
        json_array_foreach(tpl, i, item)
        {
            const char *nm = json_string_value(json_object_get(item, "name"));
            if (nm && strcmp(nm, "default") == 0) found = json_object_get(item, "template");
        }
        tpl = found;
    }
    if (json_is_string(tpl)) {
        if (json_string_length(tpl) > RAD_LIMIT_CHAT_TEMPLATE_BYTES) {
            rc = fail_config(RAD_E_FORMAT, "the chat_template for %s is %zu bytes, over the limit of %u bytes "
                             "(RAD_LIMIT_CHAT_TEMPLATE_BYTES): the file is damaged or hostile", im->name,
                             json_string_length(tpl), RAD_LIMIT_CHAT_TEMPLATE_BYTES);
            goto done;
        }
        if (has_nul(tpl)) {
            rc = fail_config(RAD_E_UNSUPPORTED, "a chat_template holding a NUL byte is not supported");
            goto done;
        }
        t->chat_template = dup_string(tpl);
        if (!t->chat_template) rc = RAD_E_NOMEM;
    }
done:
    json_decref(c);
    return rc;
}

/* ---------------------------------------------------------------- import */

int rad_tokenizer_from_json(const char *json, size_t len, const char *config_json, size_t config_len,
                            const char *name, RadTokenizer **out)
{
    Import im = {.name = name ? name : "tokenizer.json"};
    json_error_t err;
    int rc;

    *out = NULL;
    json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &err);
    if (!root) return fail(&im, RAD_E_FORMAT, "line %d, column %d: %s", err.line, err.column, err.text);
    im.t = calloc(1, sizeof *im.t);
    if (!im.t) {
        json_decref(root);
        return RAD_E_NOMEM;
    }
    RadTokenizer *t = im.t;
    t->unk_id = t->bos_id = t->eos_id = t->pad_id = -1;

    const json_t *model = json_object_get(root, "model");
    const json_t *added = json_object_get(root, "added_tokens");
    const json_t *norm = json_object_get(root, "normalizer");
    const json_t *pre = json_object_get(root, "pre_tokenizer");
    json_t *empty = NULL;
    if (!json_is_object(root)) {
        rc = fail(&im, RAD_E_FORMAT, "not a JSON object");
        goto fail;
    }
    if (!model || json_is_null(model)) {
        rc = fail(&im, RAD_E_FORMAT, "no \"model\" section");
        goto fail;
    }
    if (!added || json_is_null(added)) added = empty = json_array();
    if (!json_is_array(added)) {
        rc = fail(&im, RAD_E_FORMAT, "added_tokens must be a list");
        goto fail;
    }
    if ((rc = read_model(&im, model, added))) goto fail;
    if ((rc = read_added(&im, added, json_object_get(model, "vocab")))) goto fail;
    t->unk_id = im.model_unk;
    if (norm && !json_is_null(norm) && (rc = read_normalizer(&im, norm))) goto fail;
    if (pre && !json_is_null(pre) && (rc = read_pre_tokenizer(&im, pre))) goto fail;
    if ((rc = read_decoder(&im, json_object_get(root, "decoder")))) goto fail;
    if ((rc = read_post_processor(&im, json_object_get(root, "post_processor")))) goto fail;

    /* Byte-level or SentencePiece style, decided by the components; they
    ** must agree, or encode and decode would not be inverses. */
    int bytelevel_pre = t->n_pre > 0 && t->pre[t->n_pre - 1].kind == RAD_TOK_PRE_BYTELEVEL;
    if (bytelevel_pre != (t->decoder == RAD_TOK_DECODE_BYTELEVEL)) {
        rc = fail(&im, RAD_E_UNSUPPORTED, "a %s pre_tokenizer with a %s decoder is not supported",
                  bytelevel_pre ? "ByteLevel" : "non-ByteLevel",
                  t->decoder == RAD_TOK_DECODE_BYTELEVEL ? "ByteLevel" : "SentencePiece");
        goto fail;
    }
    if (bytelevel_pre && t->byte_fallback) {
        rc = fail(&im, RAD_E_UNSUPPORTED, "byte_fallback with a ByteLevel pre_tokenizer is not supported");
        goto fail;
    }
    t->model = bytelevel_pre ? RAD_TOK_BPE_BYTELEVEL : RAD_TOK_BPE_SPM;

    if (config_json && (rc = read_config(&im, config_json, config_len))) goto fail;
    /* jansson reads only UTF-8, but the rule is every producer's (tokenizer.h). */
    if ((rc = rad_tokenizer_check_text(t, im.name))) goto fail;
    if (!(t->source = strdup(im.name))) {
        rc = RAD_E_NOMEM;
        goto fail;
    }
    json_decref(empty);
    json_decref(root);
    *out = t;
    return RAD_OK;

fail:
    if (rc == RAD_E_NOMEM) rad_error_set(rc, "%s: out of memory", im.name);
    json_decref(empty);
    json_decref(root);
    rad_tokenizer_free(t);
    return rc;
}
