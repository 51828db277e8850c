/*
** test_kv.c: the paged KV cache (engine/kv.c).
**
** The fixture declares what a plugin would, through the builder in CONVERT
** mode (no kernel selection): a FULL group and a sliding-window group of 32
** positions, three layers bound to them, blocks of 16 positions.  The tests
** pin how blocks are lent and given back as sequences grow, commit and end;
** the refusals (past the context, out of blocks, out of sequences); the
** block tables, against the slot formula of RadKvView in rad_kernel.h; the
** slack a WINDOW group keeps for a rollback; prefix sharing (reference
** counts, copy on divergence, the cache of freed blocks); the LINEAR and
** CONV state groups (checkpoints, the truncations they refuse); and
** snapshots of every group kind.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../engine/engine_internal.h"

/* ---------------------------------------------------------------- fixture */

enum { BS = 16, WINDOW = 32, MAX_SEQS = 2, MAX_CTX = 128, MAX_TOK = 16, MAX_BLOCKS = MAX_CTX / BS };
enum { G_FULL = 0, G_SWA = 1 };

typedef struct Fixture {
    RadModelMeta meta;
    RadBuilder b;
    RadKvPool p;
} Fixture;

/* Groups full (2 heads x 4) and swa (2 x 4, window 32); layers 0 and 2 on
** full, layer 1 on swa. */
static void declare(Fixture *f, int mode, int block_size)
{
    memset(f, 0, sizeof *f);
    f->meta.struct_size = sizeof f->meta;
    f->meta.n_layers = 3;
    rad_builder_init(&f->b, mode, &f->meta, NULL);
    const RadKvGroupDecl full = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_FULL, .n_head_kv = 2, .head_dim = 4};
    const RadKvGroupDecl swa = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_WINDOW, .n_head_kv = 2, .head_dim = 4,
                                .window = WINDOW};
    assert_int_equal(rad_decl_kv_group(&f->b, "full", &full), G_FULL);
    assert_int_equal(rad_decl_kv_group(&f->b, "swa", &swa), G_SWA);
    assert_int_equal(rad_bind_layer_kv(&f->b, 0, G_FULL), RAD_OK);
    assert_int_equal(rad_bind_layer_kv(&f->b, 1, G_SWA), RAD_OK);
    assert_int_equal(rad_bind_layer_kv(&f->b, 2, G_FULL), RAD_OK);
    assert_int_equal(f->b.n_problems, 0);
    f->b.kv_block_size = block_size;
}

static int setup(void **state)
{
    Fixture *f = malloc(sizeof *f);
    if (!f) return -1;
    declare(f, RAD_BUILD_CONVERT, BS);
    *state = f;
    return rad_kv_pool_init(&f->p, &f->b, &(RadKvOptions){.max_seqs = MAX_SEQS, .max_ctx = MAX_CTX, .max_tok = MAX_TOK,
                                                         .kv_enc = RAD_ENC_F16});
}

static int teardown(void **state)
{
    Fixture *f = *state;
    rad_kv_pool_free(&f->p);
    rad_builder_free(&f->b);
    free(f);
    return 0;
}

static int32_t entry(const RadKvPool *p, int seq, int g, int blk) { return p->seqs[seq].table[g][blk]; }

static int mapped_blocks(const RadKvPool *p, int seq, int g)
{
    int n = 0;
    for (int i = 0; i < p->max_blocks; i++) n += entry(p, seq, g, i) >= 0;
    return n;
}

static int new_seq(RadKvPool *p)
{
    int seq = -1;
    assert_int_equal(rad_kv_seq_new(p, &seq), RAD_OK);
    assert_in_range(seq, 0, p->max_seqs - 1);
    return seq;
}

/* The tokens a test sequence holds: position i of "text" t is token t * 1000 + i. */
static const int32_t *text(int t)
{
    static int32_t tokens[4][MAX_CTX];
    for (int i = 0; i < MAX_CTX; i++) tokens[t][i] = t * 1000 + i;
    return tokens[t];
}

/* Reserve, then commit: one step that grows seq to new_len with text t. */
static void grow_text(RadKvPool *p, int seq, int new_len, int t)
{
    int len = p->seqs[seq].len;
    assert_int_equal(rad_kv_reserve(p, seq, new_len), RAD_OK);
    rad_kv_commit(p, seq, text(t) + len, new_len - len);
}

static void grow(RadKvPool *p, int seq, int new_len) { grow_text(p, seq, new_len, seq); }

/* ------------------------------------------------------------------ tests */

/* The pool is sized at init: FULL by the context, WINDOW by window + max_tok; storage per bound layer. */
static void test_pool_layout(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    assert_int_equal(p->n_groups, 2);
    assert_int_equal(p->max_blocks, MAX_BLOCKS);
    assert_int_equal(p->n_layers, 3);
    assert_int_equal(p->layer_group[0], G_FULL);
    assert_int_equal(p->layer_group[1], G_SWA);
    assert_int_equal(p->layer_group[2], G_FULL);
    assert_int_equal(p->layer_slot[0], 0);
    assert_int_equal(p->layer_slot[1], 0);
    assert_int_equal(p->layer_slot[2], 1);

    const RadKvGroupState *full = &p->groups[G_FULL], *swa = &p->groups[G_SWA];
    assert_int_equal(full->block_size, BS);
    assert_int_equal(full->row_bytes, 2 * 4 * 2);       /* two heads of 4 f16 */
    assert_int_equal(full->n_blocks, MAX_BLOCKS * MAX_SEQS);
    assert_int_equal(full->n_free, full->n_blocks);
    assert_int_equal(full->n_layers, 2);
    /* A window of 32 plus a 16-row step spans at most 4 blocks of 16 (one misaligned). */
    assert_int_equal(swa->n_blocks, 4 * MAX_SEQS);
    assert_int_equal(swa->n_layers, 1);
    int64_t want = 2 * (2 * (int64_t)full->n_blocks * BS * 16) + 2 * ((int64_t)swa->n_blocks * BS * 16);
    assert_int_equal(p->bytes, want);
}

/* A new sequence has no blocks; reserving hands out one block per 16 positions, low ids first. */
static void test_blocks_handed_out_as_sequence_grows(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int s = new_seq(p);
    for (int g = 0; g < 2; g++) assert_int_equal(mapped_blocks(p, s, g), 0);
    assert_int_equal(p->seqs[s].len, 0);

    assert_int_equal(rad_kv_reserve(p, s, 1), RAD_OK);
    assert_int_equal(entry(p, s, G_FULL, 0), 0);
    assert_int_equal(entry(p, s, G_SWA, 0), 0);
    assert_int_equal(mapped_blocks(p, s, G_FULL), 1);
    assert_int_equal(p->groups[G_FULL].n_free, p->groups[G_FULL].n_blocks - 1);

    /* Reserving within the block already held takes nothing new. */
    assert_int_equal(rad_kv_reserve(p, s, 16), RAD_OK);
    assert_int_equal(mapped_blocks(p, s, G_FULL), 1);

    assert_int_equal(rad_kv_reserve(p, s, 17), RAD_OK);
    assert_int_equal(entry(p, s, G_FULL, 1), 1);
    assert_int_equal(mapped_blocks(p, s, G_FULL), 2);
    rad_kv_commit(p, s, text(s), 17);
    assert_int_equal(p->seqs[s].len, 17);

    grow(p, s, 33);
    assert_int_equal(mapped_blocks(p, s, G_FULL), 3);
    assert_int_equal(entry(p, s, G_FULL, 2), 2);
    assert_int_equal(entry(p, s, G_FULL, 3), -1);
    assert_int_equal(p->groups[G_FULL].n_free, p->groups[G_FULL].n_blocks - 3);
    rad_kv_seq_free(p, s);
}

/* Reserving past max_ctx is RAD_E_RANGE with a message naming both numbers, and takes no block. */
static void test_reserve_past_context(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int s = new_seq(p);
    rad_error_clear();
    assert_int_equal(rad_kv_reserve(p, s, MAX_CTX + 1), RAD_E_RANGE);
    const char *msg = rad_error_message();
    if (!strstr(msg, "129") || !strstr(msg, "128")) fail_msg("message \"%s\" names neither length", msg);
    assert_int_equal(mapped_blocks(p, s, G_FULL), 0);
    assert_int_equal(p->groups[G_FULL].n_free, p->groups[G_FULL].n_blocks);
    /* Exactly the context is fine. */
    assert_int_equal(rad_kv_reserve(p, s, MAX_CTX), RAD_OK);
    assert_int_equal(mapped_blocks(p, s, G_FULL), MAX_BLOCKS);
    rad_kv_seq_free(p, s);
}

/* Freeing a sequence returns every block it held; a new sequence starts empty. */
static void test_free_returns_blocks(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p), b = new_seq(p);
    grow(p, a, 16);
    grow(p, a, 32);
    grow(p, b, 5);
    grow(p, a, 40);
    assert_int_equal(p->groups[G_FULL].n_free, p->groups[G_FULL].n_blocks - 4);
    rad_kv_seq_free(p, a);
    assert_int_equal(p->groups[G_FULL].n_free, p->groups[G_FULL].n_blocks - 1);
    assert_int_equal(p->groups[G_SWA].n_free, p->groups[G_SWA].n_blocks - 1);
    assert_int_equal(p->seqs[a].used, 0);
    /* Freeing twice, or a sequence that does not exist, changes nothing. */
    rad_kv_seq_free(p, a);
    rad_kv_seq_free(p, -1);
    rad_kv_seq_free(p, MAX_SEQS);
    assert_int_equal(p->groups[G_FULL].n_free, p->groups[G_FULL].n_blocks - 1);

    int c = new_seq(p);
    assert_int_equal(c, a);
    assert_int_equal(p->seqs[c].len, 0);
    for (int g = 0; g < 2; g++) assert_int_equal(mapped_blocks(p, c, g), 0);
    rad_kv_seq_free(p, b);
    rad_kv_seq_free(p, c);
    for (int g = 0; g < 2; g++) assert_int_equal(p->groups[g].n_free, p->groups[g].n_blocks);
}

/* After commit(L), a WINDOW group holds exactly the blocks with a position > L - window; FULL holds all. */
static void test_window_frees_full_keeps(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int s = new_seq(p);
    /* Steps of uneven sizes, up to the whole context. */
    static const int steps[] = {16, 16, 16, 16, 5, 11, 7, 9, 13, 3, 15, 1};
    int len = 0;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        len += steps[i];
        grow(p, s, len);
        for (int blk = 0; blk < MAX_BLOCKS; blk++) {
            int first = blk * BS, last = first + BS - 1;
            int stored = first < len;
            assert_int_equal(entry(p, s, G_FULL, blk) >= 0, stored);
            int reachable = stored && last > len - WINDOW;
            if ((entry(p, s, G_SWA, blk) >= 0) != reachable)
                fail_msg("len %d: window block %d (positions %d..%d) is %s", len, blk, first, last,
                         reachable ? "freed but still in reach" : "kept but out of reach");
        }
        assert_int_equal(p->groups[G_SWA].n_free + mapped_blocks(p, s, G_SWA), p->groups[G_SWA].n_blocks);
    }
    assert_int_equal(len, MAX_CTX);
    assert_int_equal(mapped_blocks(p, s, G_FULL), MAX_BLOCKS);
    assert_int_equal(mapped_blocks(p, s, G_SWA), 2);
    rad_kv_seq_free(p, s);
    assert_int_equal(p->groups[G_SWA].n_free, p->groups[G_SWA].n_blocks);
}

/* Two sequences grow to the full context at once within the window pool (it is sized for that). */
static void test_window_pool_serves_every_sequence(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p), b = new_seq(p);
    for (int len = MAX_TOK; len <= MAX_CTX; len += MAX_TOK) {
        grow(p, a, len);
        grow(p, b, len);
    }
    rad_kv_seq_free(p, a);
    rad_kv_seq_free(p, b);
}

/* Running out of blocks is RAD_E_RANGE; blocks taken before the failure are returned by seq_free. */
static void test_out_of_blocks(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p), b = new_seq(p);
    /* Without commits the window group never gives back: a takes all 8 of its blocks. */
    assert_int_equal(rad_kv_reserve(p, a, MAX_CTX), RAD_OK);
    assert_int_equal(p->groups[G_SWA].n_free, 0);
    rad_error_clear();
    assert_int_equal(rad_kv_reserve(p, b, 1), RAD_E_RANGE);
    if (!strstr(rad_error_message(), "KV cache is full")) fail_msg("message: %s", rad_error_message());
    assert_int_equal(mapped_blocks(p, b, G_FULL), 0);           /* the refusal took nothing */
    rad_kv_seq_free(p, b);
    rad_kv_seq_free(p, a);
    for (int g = 0; g < 2; g++) assert_int_equal(p->groups[g].n_free, p->groups[g].n_blocks);
}

/* Every sequence slot in use: rad_kv_seq_new is RAD_E_RANGE. */
static void test_out_of_sequences(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p), b = new_seq(p), c = -1;
    assert_int_not_equal(a, b);
    assert_int_equal(rad_kv_seq_new(p, &c), RAD_E_RANGE);
    rad_kv_seq_free(p, a);
    rad_kv_seq_free(p, b);
}

/* fill_table copies each sequence's table as one row of max_blocks; the view carries the layer's storage and group. */
static void test_fill_table_and_view(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p), b = new_seq(p);
    grow(p, a, 20);
    grow(p, b, 40);
    grow(p, a, 50);
    const int order[2] = {b, a};
    int32_t table[2 * MAX_BLOCKS];
    for (int g = 0; g < 2; g++) {
        memset(table, 0x55, sizeof table);
        rad_kv_fill_table(p, g, order, 2, table);
        for (int i = 0; i < 2; i++)
            for (int blk = 0; blk < MAX_BLOCKS; blk++)
                assert_int_equal(table[i * MAX_BLOCKS + blk], entry(p, order[i], g, blk));
    }

    const int32_t token_seq[2] = {0, 1}, positions[2] = {39, 49};
    const RadBatch batch = {.struct_size = sizeof batch, .phase = RAD_PHASE_DECODE, .n_tok = 2, .n_seq = 2,
                            .n_seq_decode = 2, .token_seq = token_seq, .positions = positions};
    RadKvView v;
    rad_kv_fill_table(p, G_FULL, order, 2, table);
    rad_kv_view(p, 2, table, NULL, 2, &batch, &v);
    assert_ptr_equal(v.k, p->groups[G_FULL].k[1]);
    assert_ptr_equal(v.v, p->groups[G_FULL].v[1]);
    assert_ptr_not_equal(v.k, v.v);
    assert_int_equal(v.enc, RAD_ENC_F16);
    assert_int_equal(v.block_size, BS);
    assert_int_equal(v.n_head_kv, 2);
    assert_int_equal(v.head_dim, 4);
    assert_int_equal(v.kv_row_bytes, 16);
    assert_int_equal(v.window, 0);
    assert_int_equal(v.n_seq, 2);
    assert_int_equal(v.max_blocks, MAX_BLOCKS);
    assert_ptr_equal(v.block_table, table);
    assert_int_equal(v.n_tok, 2);
    assert_ptr_equal(v.token_seq, token_seq);
    assert_ptr_equal(v.positions, positions);

    rad_kv_view(p, 1, table, NULL, 2, &batch, &v);
    assert_ptr_equal(v.k, p->groups[G_SWA].k[0]);
    assert_int_equal(v.window, WINDOW);
    rad_kv_seq_free(p, a);
    rad_kv_seq_free(p, b);
}

/* Through the view's slot formula, every stored position of every sequence has its own slot inside the layer's storage. */
static void test_slots_are_distinct_and_in_bounds(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p), b = new_seq(p);
    /* Interleave growth so the two sequences' blocks interleave in the pool. */
    int len[2] = {0, 0};
    static const int steps[][2] = {{16, 3}, {5, 16}, {16, 16}, {11, 2}, {16, 16}, {16, 7}, {3, 16}, {16, 16}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        len[0] += steps[i][0];
        len[1] += steps[i][1];
        grow(p, a, len[0]);
        grow(p, b, len[1]);
    }
    const int seqs[2] = {a, b};
    int32_t table[2 * MAX_BLOCKS];
    const RadBatch batch = {.struct_size = sizeof batch, .n_tok = 0};
    for (int layer = 0; layer < 3; layer++) {
        int g = p->layer_group[layer];
        int window = g == G_SWA ? WINDOW : 0;
        rad_kv_fill_table(p, g, seqs, 2, table);
        RadKvView v;
        rad_kv_view(p, layer, table, NULL, 2, &batch, &v);
        int64_t n_slots = (int64_t)p->groups[g].n_blocks * v.block_size;
        /* Write (sequence, position) into the key row of every reachable position ... */
        for (int s = 0; s < 2; s++)
            for (int pos = window ? len[s] - window + 1 : 0; pos < len[s]; pos++) {
                int32_t blk = v.block_table[s * v.max_blocks + pos / v.block_size];
                if (blk < 0) fail_msg("layer %d seq %d position %d has no block", layer, s, pos);
                int64_t slot = (int64_t)blk * v.block_size + pos % v.block_size;
                assert_in_range(slot, 0, n_slots - 1);
                int32_t mark[2] = {s, pos};
                memcpy((char *)v.k + slot * v.kv_row_bytes, mark, sizeof mark);
                memcpy((char *)v.v + slot * v.kv_row_bytes + v.kv_row_bytes - sizeof mark, mark, sizeof mark);
            }
        /* ... and read them all back: no position overwrote another's. */
        for (int s = 0; s < 2; s++)
            for (int pos = window ? len[s] - window + 1 : 0; pos < len[s]; pos++) {
                int32_t blk = v.block_table[s * v.max_blocks + pos / v.block_size];
                int64_t slot = (int64_t)blk * v.block_size + pos % v.block_size;
                int32_t mark[2];
                memcpy(mark, (char *)v.k + slot * v.kv_row_bytes, sizeof mark);
                if (mark[0] != s || mark[1] != pos)
                    fail_msg("layer %d: seq %d position %d shares slot %lld with seq %d position %d", layer, s, pos,
                             (long long)slot, mark[0], mark[1]);
                memcpy(mark, (char *)v.v + slot * v.kv_row_bytes + v.kv_row_bytes - sizeof mark, sizeof mark);
                assert_int_equal(mark[0], s);
                assert_int_equal(mark[1], pos);
            }
    }
    rad_kv_seq_free(p, a);
    rad_kv_seq_free(p, b);
}

/* The block size comes from the builder (the attention kernel's); 0 means the default 16. In RUN mode with no libraries too. */
static void test_block_size_from_builder(void **state)
{
    (void)state;
    Fixture f;
    declare(&f, RAD_BUILD_RUN, 32);
    assert_int_equal(rad_kv_block_size(&f.b, G_FULL), 32);
    assert_int_equal(rad_kv_pool_init(&f.p, &f.b, &(RadKvOptions){.max_seqs = 1, .max_ctx = 100, .max_tok = 8,
                                                                 .kv_enc = RAD_ENC_F32}), RAD_OK);
    assert_int_equal(f.p.groups[G_FULL].block_size, 32);
    assert_int_equal(f.p.max_blocks, 4);                /* ceil(100 / 32) */
    assert_int_equal(f.p.groups[G_FULL].row_bytes, 2 * 4 * 4);
    int s = new_seq(&f.p);
    for (int len = 8; len < 100; len += 8) grow(&f.p, s, len);
    grow(&f.p, s, 100);
    assert_int_equal(mapped_blocks(&f.p, s, G_FULL), 4);
    assert_int_equal(rad_kv_reserve(&f.p, s, 101), RAD_E_RANGE);
    rad_kv_pool_free(&f.p);
    rad_builder_free(&f.b);

    declare(&f, RAD_BUILD_CONVERT, 0);
    assert_int_equal(rad_kv_block_size(&f.b, G_FULL), 16);
    assert_int_equal(rad_kv_pool_init(&f.p, &f.b, &(RadKvOptions){.max_seqs = 1, .max_ctx = 100, .max_tok = 8,
                                                                 .kv_enc = RAD_ENC_F16}), RAD_OK);
    assert_int_equal(f.p.groups[G_FULL].block_size, 16);
    assert_int_equal(f.p.max_blocks, 7);
    rad_kv_pool_free(&f.p);
    rad_builder_free(&f.b);
}

/* The builder refuses KV groups the pool cannot serve (a state group with no state, a window of 0) and layers bound twice. */
static void test_builder_refuses_bad_groups(void **state)
{
    (void)state;
    RadModelMeta meta = {.struct_size = sizeof meta};
    RadBuilder b;
    rad_builder_init(&b, RAD_BUILD_CONVERT, &meta, NULL);
    const RadKvGroupDecl linear = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_LINEAR, .n_head_kv = 2, .head_dim = 4};
    const RadKvGroupDecl no_window = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_WINDOW, .n_head_kv = 2, .head_dim = 4};
    const RadKvGroupDecl ok = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_FULL, .n_head_kv = 2, .head_dim = 4};
    assert_int_equal(rad_decl_kv_group(&b, "linear", &linear), -1);    /* a state of no size */
    assert_int_equal(rad_decl_kv_group(&b, "no_window", &no_window), -1);
    rad_kv g = rad_decl_kv_group(&b, "ok", &ok);
    assert_int_equal(g, 0);
    assert_int_equal(rad_bind_layer_kv(&b, 0, g), RAD_OK);
    assert_int_not_equal(rad_bind_layer_kv(&b, 0, g), RAD_OK);
    assert_int_not_equal(rad_bind_layer_kv(&b, 1, 5), RAD_OK);
    assert_int_equal(b.n_problems, 4);
    rad_builder_free(&b);
}


/* ------------------------------------------------- truncate and snapshot */

/* Fill every stored position of every layer with bytes derived from
** (layer, position, half), so a restored cache can be checked row by row. */
static void stamp(RadKvPool *p, int seq, int len)
{
    for (int l = 0; l < p->n_layers; l++) {
        RadKvGroupState *grp = &p->groups[p->layer_group[l]];
        if (grp->d.kind == RAD_KV_LINEAR || grp->d.kind == RAD_KV_CONV) continue;
        for (int half = 0; half < 2; half++) {
            uint8_t *base = half ? grp->v[p->layer_slot[l]] : grp->k[p->layer_slot[l]];
            for (int pos = 0; pos < len; pos++) {
                int32_t blk = p->seqs[seq].table[p->layer_group[l]][pos / grp->block_size];
                if (blk < 0) continue;
                uint8_t *row = base + ((int64_t)blk * grp->block_size + pos % grp->block_size) * grp->row_bytes;
                memset(row, (l * 64 + pos * 2 + half) & 0xff, (size_t)grp->row_bytes);
            }
        }
    }
}

static int stamped(const RadKvPool *p, int seq, int layer, int pos, int half)
{
    const RadKvGroupState *grp = &p->groups[p->layer_group[layer]];
    int32_t blk = p->seqs[seq].table[p->layer_group[layer]][pos / grp->block_size];
    if (blk < 0) return -1;
    const uint8_t *base = half ? grp->v[p->layer_slot[layer]] : grp->k[p->layer_slot[layer]];
    const uint8_t *row = base + ((int64_t)blk * grp->block_size + pos % grp->block_size) * grp->row_bytes;
    for (int64_t i = 1; i < grp->row_bytes; i++)
        if (row[i] != row[0]) return -2;
    return row[0];
}

/* Truncating gives back the blocks past the new end, in every group, and
** refuses (changing nothing) when the window already dropped what the new end needs. */
static void test_truncate(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int s = new_seq(p);
    grow(p, s, 40);                                 /* blocks 0..2 */
    assert_int_equal(rad_kv_truncate(p, s, 20), RAD_OK);
    assert_int_equal(p->seqs[s].len, 20);
    assert_int_equal(mapped_blocks(p, s, G_FULL), 2);
    assert_int_equal(entry(p, s, G_FULL, 2), -1);
    assert_int_equal(p->groups[G_FULL].n_free, p->groups[G_FULL].n_blocks - 2);
    assert_int_equal(rad_kv_truncate(p, s, 21), RAD_E_ARG);    /* cannot grow */

    for (int len = 36; len <= 100; len += 16) grow(p, s, len < 100 ? len : 100);   /* steps of MAX_TOK */
    grow(p, s, 100);                                /* the window has let go of blocks 0..3 */
    assert_int_equal(entry(p, s, G_SWA, 0), -1);
    assert_int_equal(rad_kv_truncate(p, s, 40), RAD_E_RANGE);
    assert_int_equal(p->seqs[s].len, 100);
    assert_int_equal(mapped_blocks(p, s, G_FULL), 7);
    assert_int_equal(rad_kv_truncate(p, s, 90), RAD_E_RANGE);   /* needs 59.., block 3 is gone */
    assert_int_equal(rad_kv_truncate(p, s, 96), RAD_OK);        /* needs 65.., blocks 4.. held */
    assert_int_equal(p->seqs[s].len, 96);
}

/* A snapshot restored into a fresh sequence gives back every row a later
** query can see, in a window group only those; a damaged one changes nothing. */
static void test_snapshot_round_trip(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p);
    for (int len = 16; len < 70; len += 16) grow(p, a, len);
    grow(p, a, 70);
    stamp(p, a, 70);
    int64_t n = rad_kv_snapshot_bytes(p, a);
    uint8_t *blob = malloc((size_t)n);
    assert_non_null(blob);
    assert_int_equal(rad_kv_snapshot(p, a, blob, n), RAD_OK);
    rad_kv_seq_free(p, a);

    int b = new_seq(p);
    /* Truncated, trailing bytes, bad magic: refused, the sequence stays empty. */
    assert_int_equal(rad_kv_restore(p, b, blob, n - 1), RAD_E_FORMAT);
    blob[0] ^= 1;
    assert_int_equal(rad_kv_restore(p, b, blob, n), RAD_E_FORMAT);
    blob[0] ^= 1;
    assert_int_equal(p->seqs[b].len, 0);
    assert_int_equal(mapped_blocks(p, b, G_FULL), 0);

    assert_int_equal(rad_kv_restore(p, b, blob, n), RAD_OK);
    assert_int_equal(p->seqs[b].len, 70);
    for (int pos = 0; pos < 70; pos++)
        for (int half = 0; half < 2; half++) {
            assert_int_equal(stamped(p, b, 0, pos, half), (0 * 64 + pos * 2 + half) & 0xff);
            assert_int_equal(stamped(p, b, 2, pos, half), (2 * 64 + pos * 2 + half) & 0xff);
            if (pos >= 70 - WINDOW + 1)             /* the window's reach */
                assert_int_equal(stamped(p, b, 1, pos, half), (1 * 64 + pos * 2 + half) & 0xff);
        }
    assert_int_equal(rad_kv_restore(p, b, blob, n), RAD_E_STATE);   /* not empty any more */
    /* The restored sequence goes on growing as any other. */
    grow(p, b, 80);
    free(blob);
}


/* ---------------------------------------------- rollback slack, sharing */

/* With max_spec, a WINDOW group keeps max_spec more positions than a query
** needs, so a rollback of that many positions still finds its blocks. */
static void test_window_keeps_rollback_slack(void **state)
{
    (void)state;
    Fixture f;
    declare(&f, RAD_BUILD_CONVERT, BS);
    assert_int_equal(rad_kv_pool_init(&f.p, &f.b, &(RadKvOptions){.max_seqs = 1, .max_ctx = MAX_CTX, .max_tok = MAX_TOK,
                                                                 .max_spec = 8, .kv_enc = RAD_ENC_F16}), RAD_OK);
    RadKvPool *p = &f.p;
    int s = new_seq(p);
    for (int len = 16; len <= 80; len += 16) grow(p, s, len);
    /* at 80 a query needs 49..; after a rollback of 8 it needs 41..: block 2 (32..47) stays */
    assert_true(entry(p, s, G_SWA, 2) >= 0);
    assert_int_equal(entry(p, s, G_SWA, 1), -1);
    assert_int_equal(rad_kv_truncate(p, s, 72), RAD_OK);
    rad_kv_pool_free(&f.p);
    rad_builder_free(&f.b);

    /* Without the slack the same rollback is refused. */
    declare(&f, RAD_BUILD_CONVERT, BS);
    assert_int_equal(rad_kv_pool_init(&f.p, &f.b, &(RadKvOptions){.max_seqs = 1, .max_ctx = MAX_CTX, .max_tok = MAX_TOK,
                                                                 .kv_enc = RAD_ENC_F16}), RAD_OK);
    p = &f.p;
    s = new_seq(p);
    for (int len = 16; len <= 80; len += 16) grow(p, s, len);
    assert_int_equal(entry(p, s, G_SWA, 2), -1);
    assert_int_equal(rad_kv_truncate(p, s, 72), RAD_E_RANGE);
    rad_kv_pool_free(&f.p);
    rad_builder_free(&f.b);
}

/* A second sequence with the same leading tokens gets the first one's full
** blocks (not a partial one), counted twice; its own tokens go to new blocks. */
static void test_prefix_shared_by_reference(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p), b = new_seq(p);
    grow_text(p, a, 40, 0);                            /* blocks 0, 1 full, 2 partial */
    const int free_before = p->groups[G_FULL].n_free;
    assert_int_equal(rad_kv_attach_prefix(p, b, text(0), 40), 32);
    assert_int_equal(p->seqs[b].len, 32);
    for (int blk = 0; blk < 2; blk++) {
        assert_int_equal(entry(p, b, G_FULL, blk), entry(p, a, G_FULL, blk));
        assert_int_equal(p->groups[G_FULL].refs[entry(p, a, G_FULL, blk)], 2);
    }
    assert_int_equal(p->groups[G_FULL].n_free, free_before);   /* nothing was taken */
    /* the window group shares only what a query at 32 can reach: blocks 0 and 1 */
    assert_int_equal(entry(p, b, G_SWA, 1), entry(p, a, G_SWA, 1));
    grow_text(p, b, 48, 0);
    assert_int_not_equal(entry(p, b, G_FULL, 2), entry(p, a, G_FULL, 2));

    /* Other tokens share nothing; the same tokens after another block do not either. */
    int32_t other[40];
    memcpy(other, text(0), sizeof other);
    other[3] = 99999;
    rad_kv_seq_free(p, b);
    b = new_seq(p);
    assert_int_equal(rad_kv_attach_prefix(p, b, other, 40), 0);
    memcpy(other, text(0), sizeof other);
    other[20] = 99999;
    assert_int_equal(rad_kv_attach_prefix(p, b, other, 40), 16);   /* block 0 only */
    rad_kv_seq_free(p, a);
    rad_kv_seq_free(p, b);
    for (int g = 0; g < 2; g++) assert_int_equal(p->groups[g].n_free, p->groups[g].n_blocks);
}

/* A sequence cut back into a shared block and written again copies the
** block first: the other sequence's rows are untouched. */
static void test_copy_on_divergence(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p), b = new_seq(p);
    grow_text(p, a, 32, 0);
    stamp(p, a, 32);
    assert_int_equal(rad_kv_attach_prefix(p, b, text(0), 32), 32);
    int32_t shared = entry(p, a, G_FULL, 1);
    assert_int_equal(rad_kv_truncate(p, b, 20), RAD_OK);
    assert_int_equal(entry(p, b, G_FULL, 1), shared);           /* still shared until written */
    assert_int_equal(rad_kv_reserve(p, b, 24), RAD_OK);
    assert_int_not_equal(entry(p, b, G_FULL, 1), shared);
    assert_int_equal(p->groups[G_FULL].refs[shared], 1);
    /* the copy holds a's rows before the cut; a keeps its own */
    assert_int_equal(stamped(p, b, 0, 19, 0), stamped(p, a, 0, 19, 0));
    assert_int_equal(stamped(p, a, 0, 25, 1), (0 * 64 + 25 * 2 + 1) & 0xff);
    rad_kv_seq_free(p, a);
    rad_kv_seq_free(p, b);
}

/* A freed sequence's full blocks stay findable until their memory is needed. */
static void test_freed_prefix_cached(void **state)
{
    Fixture *f = *state;
    RadKvPool *p = &f->p;
    int a = new_seq(p);
    grow_text(p, a, 48, 1);
    rad_kv_seq_free(p, a);
    int b = new_seq(p);
    assert_int_equal(rad_kv_attach_prefix(p, b, text(1), 48), 48);
    /* attached blocks left the free list */
    assert_int_equal(p->groups[G_FULL].n_free, p->groups[G_FULL].n_blocks - 3);
    rad_kv_seq_free(p, b);
    /* Reusing a block for other contents forgets its hash. */
    int c = new_seq(p);
    for (int len = 16; len <= MAX_CTX; len += 16) grow_text(p, c, len, 2);
    int d = new_seq(p);
    for (int len = 16; len <= MAX_CTX; len += 16) grow_text(p, d, len, 3);
    rad_kv_seq_free(p, c);
    rad_kv_seq_free(p, d);
    int e = new_seq(p);
    assert_int_equal(rad_kv_attach_prefix(p, e, text(1), 48), 0);
    rad_kv_seq_free(p, e);
}

/* ------------------------------------------------------------ state groups */

enum { G_LINEAR = 2, G_CONV = 3 };

/* The fixture's groups plus a LINEAR state (3 x 5 f32) on layer 3 and a
** CONV window (4 x 6 f16) on layer 4. */
static void declare_states(Fixture *f)
{
    declare(f, RAD_BUILD_CONVERT, BS);
    f->meta.n_layers = 5;
    const RadKvGroupDecl linear = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_LINEAR, .state_rows = 3, .state_cols = 5};
    const RadKvGroupDecl conv = {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_CONV, .state_enc = RAD_ENC_F16,
                                 .state_rows = 4, .state_cols = 6};
    assert_int_equal(rad_decl_kv_group(&f->b, "linear", &linear), G_LINEAR);
    assert_int_equal(rad_decl_kv_group(&f->b, "conv", &conv), G_CONV);
    assert_int_equal(rad_bind_layer_kv(&f->b, 3, G_LINEAR), RAD_OK);
    assert_int_equal(rad_bind_layer_kv(&f->b, 4, G_CONV), RAD_OK);
    assert_int_equal(f->b.n_problems, 0);
    assert_int_equal(rad_kv_pool_init(&f->p, &f->b, &(RadKvOptions){.max_seqs = MAX_SEQS, .max_ctx = MAX_CTX,
                                                                   .max_tok = MAX_TOK, .kv_enc = RAD_ENC_F16}),
                     RAD_OK);
}

static uint8_t *state_of(RadKvPool *p, int layer, int slot)
{
    RadKvGroupState *g = &p->groups[p->layer_group[layer]];
    return (uint8_t *)g->k[p->layer_slot[layer]] + (size_t)slot * g->state_bytes;
}

/* A state group holds one slot per sequence; a view names each batch
** sequence's slot; a new sequence starts from zeros. */
static void test_state_groups_planned_and_viewed(void **state)
{
    (void)state;
    Fixture f;
    declare_states(&f);
    RadKvPool *p = &f.p;
    assert_int_equal(p->groups[G_LINEAR].state_bytes, 3 * 5 * 4);
    assert_int_equal(p->groups[G_CONV].state_bytes, 4 * 6 * 2);
    assert_int_equal(rad_kv_has_state(p), 1);
    int a = new_seq(p), b = new_seq(p);
    memset(state_of(p, 3, b), 7, 60);
    rad_kv_seq_free(p, b);
    b = new_seq(p);
    for (int i = 0; i < 60; i++) assert_int_equal(state_of(p, 3, b)[i], 0);
    const int32_t slots[2] = {b, a};
    const RadBatch batch = {.struct_size = sizeof batch, .n_tok = 0};
    RadKvView v;
    rad_kv_view(p, 4, NULL, slots, 2, &batch, &v);
    assert_int_equal(v.kind, RAD_KV_CONV);
    assert_ptr_equal(v.state, p->groups[G_CONV].k[0]);
    assert_int_equal(v.state_bytes, 48);
    assert_ptr_equal(v.state_slot, slots);
    assert_int_equal(v.state_enc, RAD_ENC_F16);
    assert_int_equal(v.state_rows, 4);
    assert_int_equal(v.state_cols, 6);
    assert_null(v.block_table);
    /* state cannot be shared: no prefix attach */
    grow(p, a, 32);
    assert_int_equal(rad_kv_attach_prefix(p, b, text(a), 32), 0);
    rad_kv_pool_free(&f.p);
    rad_builder_free(&f.b);
}

/* State cannot be cut back except to 0 or to a checkpoint; the checkpoint
** brings back the state it saved. */
static void test_state_truncation(void **state)
{
    (void)state;
    Fixture f;
    declare_states(&f);
    RadKvPool *p = &f.p;
    int s = new_seq(p);
    grow(p, s, 20);
    memset(state_of(p, 3, s), 1, 60);
    assert_int_equal(rad_kv_truncate(p, s, 10), RAD_E_RANGE);
    assert_int_equal(p->seqs[s].len, 20);
    assert_int_equal(rad_kv_checkpoint(p, s), RAD_OK);
    grow(p, s, 30);
    memset(state_of(p, 3, s), 2, 60);
    assert_int_equal(rad_kv_truncate(p, s, 25), RAD_E_RANGE);
    assert_int_equal(rad_kv_truncate(p, s, 20), RAD_OK);
    assert_int_equal(p->seqs[s].len, 20);
    assert_int_equal(state_of(p, 3, s)[0], 1);
    assert_int_equal(rad_kv_truncate(p, s, 0), RAD_OK);
    assert_int_equal(state_of(p, 3, s)[0], 0);
    rad_kv_pool_free(&f.p);
    rad_builder_free(&f.b);
}

/* A snapshot of every group kind restores bit for bit into another pool of
** the same model; a format-1 snapshot and another layout are refused by name. */
static void test_snapshot_every_kind(void **state)
{
    (void)state;
    Fixture f, g;
    declare_states(&f);
    declare_states(&g);
    RadKvPool *p = &f.p, *q = &g.p;
    int a = new_seq(p);
    for (int len = 16; len < 70; len += 16) grow(p, a, len);
    grow(p, a, 70);
    stamp(p, a, 70);
    for (int i = 0; i < 60; i++) state_of(p, 3, a)[i] = (uint8_t)(i * 3 + 1);
    for (int i = 0; i < 48; i++) state_of(p, 4, a)[i] = (uint8_t)(200 - i);
    int64_t n = rad_kv_snapshot_bytes(p, a);
    uint8_t *blob = malloc((size_t)n);
    assert_non_null(blob);
    assert_int_equal(rad_kv_snapshot(p, a, blob, n), RAD_OK);

    int b = new_seq(q);
    assert_int_equal(rad_kv_restore(q, b, blob, n), RAD_OK);
    assert_int_equal(q->seqs[b].len, 70);
    for (int pos = 0; pos < 70; pos++)
        for (int half = 0; half < 2; half++)
            assert_int_equal(stamped(q, b, 2, pos, half), (2 * 64 + pos * 2 + half) & 0xff);
    assert_memory_equal(state_of(q, 3, b), state_of(p, 3, a), 60);
    assert_memory_equal(state_of(q, 4, b), state_of(p, 4, a), 48);
    rad_kv_seq_free(q, b);

    b = new_seq(q);
    memcpy(blob, "RADKVSN1", 8);
    rad_error_clear();
    assert_int_equal(rad_kv_restore(q, b, blob, n), RAD_E_FORMAT);
    if (!strstr(rad_error_message(), "format 1")) fail_msg("message: %s", rad_error_message());
    assert_int_equal(q->seqs[b].len, 0);
    free(blob);

    /* a pool without the state groups refuses this model's snapshot */
    Fixture h;
    declare(&h, RAD_BUILD_CONVERT, BS);
    assert_int_equal(rad_kv_pool_init(&h.p, &h.b, &(RadKvOptions){.max_seqs = 1, .max_ctx = MAX_CTX, .max_tok = MAX_TOK,
                                                                 .kv_enc = RAD_ENC_F16}), RAD_OK);
    n = rad_kv_snapshot_bytes(p, a);
    blob = malloc((size_t)n);
    assert_int_equal(rad_kv_snapshot(p, a, blob, n), RAD_OK);
    int c = new_seq(&h.p);
    assert_int_equal(rad_kv_restore(&h.p, c, blob, n), RAD_E_FORMAT);
    free(blob);
    rad_kv_pool_free(&h.p);
    rad_builder_free(&h.b);
    rad_kv_pool_free(&f.p);
    rad_builder_free(&f.b);
    rad_kv_pool_free(&g.p);
    rad_builder_free(&g.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pool_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocks_handed_out_as_sequence_grows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserve_past_context, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_returns_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_frees_full_keeps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_pool_serves_every_sequence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_sequences, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fill_table_and_view, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slots_are_distinct_and_in_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefix_shared_by_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_on_divergence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_freed_prefix_cached, setup, teardown),
        cmocka_unit_test(test_window_keeps_rollback_slack),
        cmocka_unit_test(test_state_groups_planned_and_viewed),
        cmocka_unit_test(test_state_truncation),
        cmocka_unit_test(test_snapshot_every_kind),
        cmocka_unit_test(test_block_size_from_builder),
        cmocka_unit_test(test_builder_refuses_bad_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
