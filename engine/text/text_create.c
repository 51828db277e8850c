/*
** text_create.c: turning tokenizer data into a RadText ready to encode.
**
** Everything encode looks up is indexed here, once: token text -> id, the
** merge pair -> rank with each rank's result, the byte-level alphabet, the
** single-byte and single-ASCII-character tokens the BPE model starts from,
** the Split regexes (PCRE2, JIT when the platform has it) and the two tries
** that find added tokens.  After rad_text_create returns, nothing in the
** RadText changes but the spare scratch encode calls pass along (taken and
** returned atomically), which is what lets threads share one.
**
** The tables are open-addressing hashes with linear probing, sized to a power
** of two at least twice their entries (the pair table, whose slots are
** larger, four thirds), so a 262k vocabulary with 515k merges builds with a
** few million probes and no per-entry allocation.
*/
#include "text_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- hashing */

uint32_t text_hash(const char *s, size_t n)
{
    /* Eight bytes at a time through a multiply-xorshift mix: tokens are
    ** short, and this is most of what a lookup costs. */
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
    return (uint32_t)h;
}

static uint32_t mix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    k ^= k >> 33;
    return (uint32_t)k;
}

/* The power of two at least twice `n` (and at least 16). */
static uint32_t table_size(size_t n)
{
    uint32_t s = 16;
    while (s < 2 * n) s *= 2;
    return s;
}

/* ---------------------------------------------------------------- vocab */

int32_t text_vocab_find(const RadText *t, const char *s, size_t n)
{
    uint32_t h = text_hash(s, n);
    for (uint32_t i = h & t->vocab.mask;; i = (i + 1) & t->vocab.mask) {
        VocabSlot v = t->vocab.slot[i];
        if (v.id < 0) return -1;
        if (v.hash == h && t->len[v.id] == n && memcmp(t->d->token[v.id], s, n) == 0) return v.id;
    }
}

int32_t text_model_find(const RadText *t, const char *s, size_t n)
{
    int32_t id = text_vocab_find(t, s, n);
    return id >= t->n_model && t->is_added[id] ? -1 : id;
}

/* Index every token; where two ids share a text the lower id wins. */
static int build_vocab(RadText *t)
{
    const RadTokenizer *d = t->d;
    size_t count = 0;
    t->len = calloc((size_t)d->n_vocab + 1, sizeof *t->len);
    if (!t->len) return RAD_E_NOMEM;
    for (int i = 0; i < d->n_vocab; i++)
        if (d->token[i]) {
            t->len[i] = (uint32_t)strlen(d->token[i]);
            if (t->len[i] > t->max_token_bytes) t->max_token_bytes = t->len[i];
            count++;
        }
    uint32_t slots = table_size(count);
    t->vocab.mask = slots - 1;
    t->vocab.slot = malloc(slots * sizeof *t->vocab.slot);
    if (!t->vocab.slot) return RAD_E_NOMEM;
    memset(t->vocab.slot, 0xFF, slots * sizeof *t->vocab.slot);
    /* Hash everything first, so the insert loop can fetch the slot a few
    ** tokens ahead while it places this one (the table outgrows the caches). */
    uint32_t *hash = malloc(((size_t)d->n_vocab + 1) * sizeof *hash);
    if (!hash) return RAD_E_NOMEM;
    for (int32_t id = 0; id < d->n_vocab; id++)
        hash[id] = d->token[id] ? text_hash(d->token[id], t->len[id]) : 0;
    enum { AHEAD = 8 };
    for (int32_t id = 0; id < d->n_vocab; id++) {
        if (id + AHEAD < d->n_vocab) __builtin_prefetch(&t->vocab.slot[hash[id + AHEAD] & t->vocab.mask], 1);
        if (!d->token[id]) continue;
        uint32_t h = hash[id];
        uint32_t i = h & t->vocab.mask;
        for (;; i = (i + 1) & t->vocab.mask) {
            int32_t o = t->vocab.slot[i].id;
            if (o < 0) break;
            if (t->vocab.slot[i].hash == h && t->len[o] == t->len[id] &&
                memcmp(d->token[o], d->token[id], t->len[id]) == 0)
                break;
        }
        if (t->vocab.slot[i].id < 0) t->vocab.slot[i] = (VocabSlot){h, id};
    }
    free(hash);
    return RAD_OK;
}

/* Mark added and special ids, and find where the model's own vocabulary
** ends: HF keeps added tokens outside the model when their ids follow it,
** and only the tail of ids that are all added tokens can be such. */
static int mark_added(RadText *t)
{
    const RadTokenizer *d = t->d;
    t->is_added = calloc((size_t)d->n_vocab + 1, 1);
    t->is_special = calloc((size_t)d->n_vocab + 1, 1);
    if (!t->is_added || !t->is_special) return RAD_E_NOMEM;
    for (int i = 0; i < d->n_added; i++) {
        int32_t id = d->added[i].id;
        if (id < 0 || id >= d->n_vocab || !d->added[i].content || !d->added[i].content[0])
            return rad_error_set(RAD_E_FORMAT, "tokenizer: added token %d has id %d outside the vocabulary",
                                 i, (int)id);
        t->is_added[id] = 1;
        if (d->added[i].special) t->is_special[id] = 1;
    }
    t->n_model = d->n_vocab;
    while (t->n_model > 0 && (!d->token[t->n_model - 1] || t->is_added[t->n_model - 1])) t->n_model--;
    return RAD_OK;
}

/* ---------------------------------------------------------------- merges */

const char *text_token_text(const RadText *t, int32_t id, size_t *len)
{
    if (t->is_added[id] == 2) {
        int lo = 0, hi = t->n_norm_added - 1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2, k = t->norm_added[mid];
            int32_t mid_id = t->d->added[k].id;
            if (mid_id == id) {
                *len = strlen(t->norm_content[k]);
                return t->norm_content[k];
            }
            if (mid_id < id)
                lo = mid + 1;
            else
                hi = mid - 1;
        }
    }
    *len = t->len[id];
    return t->d->token[id];
}

int32_t text_pair_rank(const RadText *t, int32_t left, int32_t right)
{
    uint64_t key = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    for (uint32_t i = mix64(key) & t->pairs.mask;; i = (i + 1) & t->pairs.mask) {
        const PairSlot *p = &t->pairs.slot[i];
        if (p->key == key) return p->rank;
        if (p->key == 0) return -1;
    }
}

/* Resolve every merge to ids and index it by pair.  A pair listed twice
** keeps its later rank, as HF's map does. */
static int build_merges(RadText *t)
{
    const RadTokenizer *d = t->d;
    char joined[2048];
    /* Filled to at most three quarters: the slots are 16 bytes, and there
    ** are half a million of them for the largest vocabularies. */
    uint32_t slots = 16;
    while (slots < (uint64_t)d->n_merges * 4 / 3 + 1) slots *= 2;
    t->merge = malloc(((size_t)d->n_merges + 1) * sizeof *t->merge);
    t->pairs.mask = slots - 1;
    t->pairs.slot = calloc(slots, sizeof *t->pairs.slot);
    if (!t->merge || !t->pairs.slot) return RAD_E_NOMEM;
    for (int r = 0; r < d->n_merges; r++) {
        TextMerge *m = &t->merge[r];
        if (d->merge_ids) {
            /* Ids the producer resolved already; they need only be in range
            ** (a hole would decode as RAD_E_RANGE, never be read). */
            m->left = d->merge_ids[3 * (size_t)r];
            m->right = d->merge_ids[3 * (size_t)r + 1];
            m->result = d->merge_ids[3 * (size_t)r + 2];
            if ((uint32_t)m->left >= (uint32_t)d->n_vocab || (uint32_t)m->right >= (uint32_t)d->n_vocab ||
                (uint32_t)m->result >= (uint32_t)d->n_vocab)
                return rad_error_set(RAD_E_FORMAT, "tokenizer: merge %d names an id outside the vocabulary",
                                     r);
        } else {
            const char *l = d->merge_left[r], *rt = d->merge_right[r];
            size_t nl = l ? strlen(l) : 0, nr = rt ? strlen(rt) : 0;
            if (!l || !rt || nl + nr >= sizeof joined)
                return rad_error_set(RAD_E_FORMAT, "tokenizer: merge %d is missing or too long", r);
            memcpy(joined, l, nl);
            memcpy(joined + nl, rt, nr);
            m->left = text_vocab_find(t, l, nl);
            m->right = text_vocab_find(t, rt, nr);
            m->result = text_vocab_find(t, joined, nl + nr);
            if (m->left < 0 || m->right < 0 || m->result < 0)
                return rad_error_set(RAD_E_FORMAT, "tokenizer: merge %d names a token not in the vocabulary",
                                     r);
        }
    }
    /* Index by pair.  The table is far larger than the caches, so the slot a
    ** few merges ahead is fetched while this one is placed. */
    enum { AHEAD = 8 };
    for (int r = 0; r < d->n_merges; r++) {
        if (r + AHEAD < d->n_merges) {
            const TextMerge *f = &t->merge[r + AHEAD];
            uint64_t fk = (((uint64_t)(uint32_t)f->left << 32) | (uint32_t)f->right) + 1;
            __builtin_prefetch(&t->pairs.slot[mix64(fk) & t->pairs.mask], 1);
        }
        const TextMerge *m = &t->merge[r];
        uint64_t key = (((uint64_t)(uint32_t)m->left << 32) | (uint32_t)m->right) + 1;
        uint32_t i = mix64(key) & t->pairs.mask;
        while (t->pairs.slot[i].key != 0 && t->pairs.slot[i].key != key) i = (i + 1) & t->pairs.mask;
        t->pairs.slot[i].key = key;
        t->pairs.slot[i].rank = r;
    }
    return RAD_OK;
}

/* ---------------------------------------------------------------- bytes */

/* GPT-2's byte-to-unicode alphabet: printable Latin-1 bytes stand for
** themselves, the other 68 bytes take code points 256, 257, ... in order. */
static void build_alphabet(RadText *t)
{
    int next = 256;
    for (int i = 0; i < 512; i++) t->char_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        t->byte_char[b] = (uint16_t)(printable ? b : next++);
        t->char_byte[t->byte_char[b]] = (int16_t)b;
    }
}

/* The tokens the model starts from: for byte-level BPE the one-character
** token of each byte; the <0xNN> byte-fallback tokens; the single ASCII
** characters (SentencePiece style looks characters up). */
static void build_symbols(RadText *t)
{
    char buf[8];
    for (int b = 0; b < 256; b++) {
        int n = text_utf8_put(buf, t->byte_char[b]);
        t->byte_sym[b] = t->d->model == RAD_TOK_BPE_BYTELEVEL ? text_model_find(t, buf, (size_t)n) : -1;
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        t->fallback_sym[b] = text_model_find(t, buf, 6);
    }
    for (int c = 0; c < 128; c++) {
        buf[0] = (char)c;
        t->ascii_sym[c] = text_model_find(t, buf, 1);
    }
}

/* ---------------------------------------------------------------- tries */

/* The child of `node` along byte `b`, creating it when `create`; -1 when
** absent (or out of memory, *nomem set). */
static int32_t trie_child(TextTrie *tr, int32_t node, unsigned b, int create, int *nomem)
{
    uint64_t key = (((uint64_t)node << 8) | b) + 1;
    uint32_t i = mix64(key) & tr->mask;
    for (; tr->edge[i] != 0; i = (i + 1) & tr->mask)
        if (tr->edge[i] == key) return tr->child[i];
    if (!create) return -1;
    if ((tr->n_nodes & (tr->n_nodes - 1)) == 0) { /* at a power of two: double */
        int32_t *term = realloc(tr->term, 2 * (size_t)tr->n_nodes * sizeof *term);
        if (!term) {
            *nomem = 1;
            return -1;
        }
        tr->term = term;
    }
    tr->term[tr->n_nodes] = -1;
    tr->edge[i] = key;
    tr->child[i] = tr->n_nodes;
    return tr->n_nodes++;
}

int32_t text_trie_step(const TextTrie *tr, int32_t node, unsigned byte)
{
    uint64_t key = (((uint64_t)node << 8) | byte) + 1;
    for (uint32_t i = mix64(key) & tr->mask; tr->edge[i] != 0; i = (i + 1) & tr->mask)
        if (tr->edge[i] == key) return tr->child[i];
    return -1;
}

/* Build a trie over the added tokens whose text[i] is not NULL. */
static int build_trie(TextTrie *tr, const RadTokenizer *d, char *const *text)
{
    size_t bytes = 1;
    int nomem = 0;
    for (int i = 0; i < d->n_added; i++)
        if (text[i]) bytes += strlen(text[i]);
    uint32_t slots = table_size(bytes);
    tr->mask = slots - 1;
    tr->edge = calloc(slots, sizeof *tr->edge);
    tr->child = malloc(slots * sizeof *tr->child);
    tr->term = malloc(sizeof *tr->term);
    if (!tr->edge || !tr->child || !tr->term) return RAD_E_NOMEM;
    tr->term[0] = -1;
    tr->n_nodes = 1;
    for (int i = 0; i < d->n_added; i++) {
        const unsigned char *s = (const unsigned char *)text[i];
        if (!s || !*s) continue;
        int32_t node = 0;
        tr->first[s[0]] = 1;
        for (; *s; s++) {
            node = trie_child(tr, node, *s, 1, &nomem);
            if (nomem) return RAD_E_NOMEM;
        }
        if (tr->term[node] < 0) tr->term[node] = i;
    }
    return RAD_OK;
}

/* The texts each trie matches: the raw trie takes tokens that are not
** normalized as they are; the normalized trie takes the others after the
** normalizer has run over them, since HF matches those in normalized text. */
static int build_tries(RadText *t)
{
    const RadTokenizer *d = t->d;
    char **raw = calloc((size_t)d->n_added + 1, sizeof *raw);
    t->norm_content = calloc((size_t)d->n_added + 1, sizeof *t->norm_content);
    if (!raw || !t->norm_content) {
        free(raw);
        return RAD_E_NOMEM;
    }
    int rc = RAD_OK;
    TextBuf buf = {0};
    for (int i = 0; i < d->n_added && rc == RAD_OK; i++) {
        const RadTokAdded *a = &d->added[i];
        if (!a->normalized) {
            raw[i] = a->content;
            continue;
        }
        rc = text_normalize(t, a->content, strlen(a->content), &buf);
        if (rc == RAD_OK && !(t->norm_content[i] = strndup(buf.p, buf.n))) rc = RAD_E_NOMEM;
    }
    free(buf.p);
    /* Normalized added tokens by id, for decoding. */
    t->norm_added = malloc(((size_t)d->n_added + 1) * sizeof *t->norm_added);
    if (rc == RAD_OK && !t->norm_added) rc = RAD_E_NOMEM;
    for (int i = 0; i < d->n_added && rc == RAD_OK; i++) {
        if (!t->norm_content[i] || t->is_added[d->added[i].id] == 2) continue;
        int j = t->n_norm_added++;
        while (j > 0 && d->added[t->norm_added[j - 1]].id > d->added[i].id) {
            t->norm_added[j] = t->norm_added[j - 1];
            j--;
        }
        t->norm_added[j] = i;
        t->is_added[d->added[i].id] = 2;
        size_t n = strlen(t->norm_content[i]);
        if (n > t->max_token_bytes) t->max_token_bytes = n;
    }
    if (rc == RAD_OK) rc = build_trie(&t->raw, d, raw);
    if (rc == RAD_OK) rc = build_trie(&t->norm, d, t->norm_content);
    free(raw);
    return rc;
}

/* ---------------------------------------------------------------- regexes */

static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int build_regexes(RadText *t)
{
    const RadTokenizer *d = t->d;
    char what[512];
    const char *src = d->source ? d->source : "tokenizer";
    int jit_all = 1, jit;
    t->re = calloc((size_t)d->n_pre + 1, sizeof *t->re);
    if (!t->re) return RAD_E_NOMEM;
    for (int i = 0; i < d->n_pre; i++) {
        const RadTokStep *st = &d->pre[i];
        if (st->kind == RAD_TOK_PRE_SPLIT_REGEX) {
            snprintf(what, sizeof what, "%.400s: pre_tokenizer step %d (Split)", src, i);
            if (!st->pattern || !(t->re[i] = text_regex_compile(st->pattern, what, &jit)))
                return RAD_E_UNSUPPORTED;
            jit_all &= jit;
        } else if (st->kind == RAD_TOK_PRE_SPLIT_STRING) {
            if (!st->pattern)
                return rad_error_set(RAD_E_FORMAT, "tokenizer: Split step %d has no pattern", i);
        } else if (st->kind == RAD_TOK_PRE_BYTELEVEL) {
            if (st->use_regex && !t->gpt2) {
                snprintf(what, sizeof what, "%.400s: ByteLevel pre_tokenizer", src);
                if (!(t->gpt2 = text_regex_compile(gpt2_pattern, what, &jit)))
                    return RAD_E_UNSUPPORTED;
                jit_all &= jit;
            }
        } else {
            return rad_error_set(RAD_E_UNSUPPORTED, "tokenizer: pre_tokenizer step kind %d is not supported",
                                 st->kind);
        }
        if (st->kind != RAD_TOK_PRE_BYTELEVEL &&
            (st->behavior < RAD_SPLIT_ISOLATED || st->behavior > RAD_SPLIT_CONTIGUOUS))
            return rad_error_set(RAD_E_FORMAT, "tokenizer: Split step %d has behavior %d", i, st->behavior);
    }
    t->jit = jit_all;
    return RAD_OK;
}

/* ---------------------------------------------------------------- create */

/* Refuse data this runtime cannot run, before building anything. */
static int check_data(const RadTokenizer *d)
{
    if (d->model != RAD_TOK_BPE_BYTELEVEL && d->model != RAD_TOK_BPE_SPM)
        return rad_error_set(RAD_E_UNSUPPORTED, "tokenizer: model kind %d is not supported", d->model);
    if (d->decoder != RAD_TOK_DECODE_BYTELEVEL && d->decoder != RAD_TOK_DECODE_SPM)
        return rad_error_set(RAD_E_UNSUPPORTED, "tokenizer: decoder kind %d is not supported", d->decoder);
    if (d->n_vocab <= 0 || !d->token) return rad_error_set(RAD_E_FORMAT, "tokenizer: empty vocabulary");
    /* Whoever built the data checked its text already (with the file's
    ** name); this is the last word before a regex or the pipeline sees it. */
    int rc = rad_tokenizer_check_text(d, d->source ? d->source : "tokenizer");
    if (rc) return rc;
    /* The store's limits; they also keep every table size within 32 bits. */
    if (d->n_vocab > (1 << 24) || d->n_merges < 0 || d->n_merges > (1 << 26) || d->n_norm < 0 ||
        d->n_pre < 0 || d->n_added < 0 || d->n_added > (1 << 20))
        return rad_error_set(RAD_E_FORMAT, "tokenizer: a count is negative or too large");
    for (int i = 0; i < d->n_norm; i++) {
        const RadTokStep *st = &d->norm[i];
        int ok = st->kind == RAD_TOK_NORM_NFC || (st->kind == RAD_TOK_NORM_PREPEND && st->arg) ||
                 (st->kind == RAD_TOK_NORM_REPLACE && st->pattern && st->pattern[0] && st->arg);
        if (!ok)
            return rad_error_set(RAD_E_UNSUPPORTED,
                                 "tokenizer: normalizer step %d (kind %d) is not supported", i, st->kind);
    }
    int32_t ids[] = {d->unk_id, d->bos_id, d->eos_id, d->pad_id};
    for (int i = 0; i < 4; i++)
        if (ids[i] < -1 || ids[i] >= d->n_vocab || (ids[i] >= 0 && !d->token[ids[i]]))
            return rad_error_set(RAD_E_FORMAT, "tokenizer: special id %d is not a token", (int)ids[i]);
    if ((d->add_bos && d->bos_id < 0) || (d->add_eos && d->eos_id < 0))
        return rad_error_set(RAD_E_FORMAT, "tokenizer: adds a BOS/EOS token it does not name");
    return RAD_OK;
}

int rad_text_create(RadTokenizer *data, RadText **out)
{
    *out = NULL;
    if (!data) return rad_error_set(RAD_E_ARG, "rad_text_create: no tokenizer data");
    int rc = check_data(data);
    if (rc) {
        rad_tokenizer_free(data);
        return rc;
    }
    RadText *t = calloc(1, sizeof *t);
    if (!t) {
        rad_tokenizer_free(data);
        return rad_error_set(RAD_E_NOMEM, "tokenizer: out of memory");
    }
    t->d = data;
    build_alphabet(t);
    if (!(rc = build_vocab(t)) && !(rc = mark_added(t)) && !(rc = build_merges(t)) &&
        !(rc = build_regexes(t)) && !(rc = build_tries(t))) {
        build_symbols(t);
        *out = t;
        return RAD_OK;
    }
    if (rc == RAD_E_NOMEM) rad_error_set(rc, "tokenizer: out of memory building the runtime");
    rad_text_free(t);
    return rc;
}

static void free_trie(TextTrie *tr)
{
    free(tr->edge);
    free(tr->child);
    free(tr->term);
}

void rad_text_free(RadText *t)
{
    if (!t) return;
    text_scratch_free(atomic_load(&t->spare));
    if (t->re)
        for (int i = 0; i < t->d->n_pre; i++) pcre2_code_free(t->re[i]);
    free(t->re);
    pcre2_code_free(t->gpt2);
    free_trie(&t->raw);
    free_trie(&t->norm);
    if (t->norm_content)
        for (int i = 0; i < t->d->n_added; i++) free(t->norm_content[i]);
    free(t->norm_content);
    free(t->norm_added);
    free(t->merge);
    free(t->pairs.slot);
    free(t->vocab.slot);
    free(t->len);
    free(t->is_added);
    free(t->is_special);
    rad_tokenizer_free(t->d);
    free(t);
}

const RadTokenizer *rad_text_data(const RadText *t)
{
    return t ? t->d : NULL;
}
