/*
** fuzz_snapshot.c: libFuzzer target for KV snapshot restore (engine/kv.c).
**
** A snapshot comes back from the session database, and a database is a
** file anyone may have edited: its bytes are hostile.  The target builds
** one small pool of every group kind (FULL, WINDOW, LINEAR, CONV, bound to
** five layers, two sequences, blocks of 16) and restores each input into an
** empty sequence.  A refusal must leave the sequence empty and holding no
** block, with a one-line message; an acceptance must leave a sequence that
** grows, snapshots and is freed like any other, every block back in its
** pool afterwards.
**
** `make fuzz-smoke` builds it with the core library.  Its seed,
** tests/fuzz/seeds/snapshot/valid.bin, is a valid snapshot of this pool
** (40 positions, every state stamped), written by this file built with
** -DFUZZ_WRITE_SEED and no fuzzer:
**     cc -DFUZZ_WRITE_SEED -D_GNU_SOURCE -Ibase tests/fuzz/fuzz_snapshot.c \
**         -Wl,--whole-archive build/libradcore.a -Wl,--no-whole-archive $(LDLIBS) -o /tmp/seed && /tmp/seed OUT
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/engine_internal.h"

static RadModelMeta meta = {.struct_size = sizeof(RadModelMeta), .n_layers = 5};
static RadBuilder builder;
static RadKvPool pool;

static void declare(void)
{
    rad_builder_init(&builder, RAD_BUILD_CONVERT, &meta, NULL);
    const RadKvGroupDecl g[] = {
        {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_FULL, .n_head_kv = 2, .head_dim = 4},
        {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_WINDOW, .n_head_kv = 2, .head_dim = 4, .window = 24},
        {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_LINEAR, .state_rows = 3, .state_cols = 5},
        {RAD_SIZED(RadKvGroupDecl), .kind = RAD_KV_CONV, .state_enc = RAD_ENC_F16, .state_rows = 4, .state_cols = 6},
    };
    for (int i = 0; i < 4; i++) rad_decl_kv_group(&builder, "g", &g[i]);
    static const int layer_group[] = {0, 1, 0, 2, 3};
    for (int l = 0; l < 5; l++) rad_bind_layer_kv(&builder, l, layer_group[l]);
    builder.kv_block_size = 16;
    const RadKvOptions o = {.max_seqs = 2, .max_ctx = 128, .max_tok = 16, .max_spec = 4, .kv_enc = RAD_ENC_F16};
    if (builder.n_problems || rad_kv_pool_init(&pool, &builder, &o)) abort();
}

static int blocks_in_use(void)
{
    int n = 0;
    for (int g = 0; g < pool.n_groups; g++) n += rad_kv_blocks_in_use(&pool, g);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!pool.groups) declare();
    int seq = -1;
    if (rad_kv_seq_new(&pool, &seq)) __builtin_trap();
    rad_error_clear();
    int rc = rad_kv_restore(&pool, seq, data, (int64_t)size);
    if (rc) {
        const char *msg = rad_error_message();
        if (pool.seqs[seq].len != 0 || blocks_in_use() != 0 || !msg[0] || strchr(msg, '\n')) __builtin_trap();
    } else {
        /* a restored sequence goes on as any other */
        int len = pool.seqs[seq].len;
        int32_t more[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        if (len + 8 <= pool.max_ctx && rad_kv_reserve(&pool, seq, len + 8) == RAD_OK)
            rad_kv_commit(&pool, seq, more, 8);
        int64_t n = rad_kv_snapshot_bytes(&pool, seq);
        void *copy = malloc((size_t)n);
        if (!copy || rad_kv_snapshot(&pool, seq, copy, n)) __builtin_trap();
        free(copy);
    }
    rad_kv_seq_free(&pool, seq);
    if (blocks_in_use() != 0) __builtin_trap();
    return 0;
}

#ifdef FUZZ_WRITE_SEED
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    declare();
    int seq = -1;
    if (rad_kv_seq_new(&pool, &seq)) return 1;
    int32_t tokens[40];
    for (int i = 0; i < 40; i++) tokens[i] = i * 3 + 1;
    if (rad_kv_reserve(&pool, seq, 40)) return 1;
    rad_kv_commit(&pool, seq, tokens, 40);
    for (int g = 0; g < pool.n_groups; g++)
        for (int l = 0; l < pool.groups[g].n_layers; l++)
            if (pool.groups[g].d.kind == RAD_KV_LINEAR || pool.groups[g].d.kind == RAD_KV_CONV)
                memset(pool.groups[g].k[l], 0x5a, (size_t)pool.groups[g].state_bytes);
    int64_t n = rad_kv_snapshot_bytes(&pool, seq);
    void *blob = malloc((size_t)n);
    if (!blob || rad_kv_snapshot(&pool, seq, blob, n)) return 1;
    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(blob, 1, (size_t)n, f) != (size_t)n || fclose(f)) return 1;
    printf("%s: %lld bytes\n", argv[1], (long long)n);
    return 0;
}
#endif
