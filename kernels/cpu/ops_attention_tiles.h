/*
** ops_attention_tiles.h: how attention's SIMD files (ops_attention_avx2.c,
** ops_attention_neon.c) walk a [queries x keys] tile and a [queries x dims]
** accumulator with their register blocks.
**
**   scores   blocks of three queries (four left over go as two and two: a
**            lone query reads a key for one FMA) by four keys, then the
**            keys left over one at a time
**   pv       the same query blocks, by 4 vectors of dims, then one vector,
**            then the row's last dims (fewer than a vector)
**
** The ISA file includes this after defining ATTN_LANES (f32 lanes per
** vector), INLINE, and its always-inlined block kernels
**   score_block(q, hd, NQ, k, k_stride, j, NK, f16, s, s_stride)
**   pv_block(p, p_stride, NQ, v, v_stride, nk, hd, f16, acc, d0, W, n)
** for NQ in 1..3, NK in {1, 4}, W in {1, 4}; it gets scores_f32,
** scores_f16, pv_f32 and pv_f16 for its CpuAttnOps table, compiled with its
** own ISA flags.  Every block shape gives a dot or a sum the same
** operations, so how the tile is cut never changes a result.
*/
#ifndef CPU_OPS_ATTENTION_TILES_H
#define CPU_OPS_ATTENTION_TILES_H

INLINE void scores_rows(const float *q, int NQ, int64_t hd, const void *k, size_t k_stride, int nk, int f16,
                        float *s, int s_stride)
{
    int j = 0;
    for (; j + 4 <= nk; j += 4) score_block(q, hd, NQ, k, k_stride, j, 4, f16, s, s_stride);
    for (; j < nk; j++) score_block(q, hd, NQ, k, k_stride, j, 1, f16, s, s_stride);
}

/* Queries in blocks of three, except that four left over go as two and two
** (a single query reads a key for one FMA). */
#define FOR_QUERY_BLOCKS(nq, i, body3, body2, body1)      \
    do {                                                  \
        int i = 0;                                        \
        for (; nq - i >= 3 && nq - i != 4; i += 3) body3; \
        for (; nq - i >= 2; i += 2) body2;                \
        for (; i < nq; i++) body1;                        \
    } while (0)

INLINE void scores_any(const float *q, int nq, int64_t hd, const void *k, size_t k_stride, int nk, int f16,
                       float *s, int s_stride)
{
    FOR_QUERY_BLOCKS(nq, i,
                     scores_rows(q + i * hd, 3, hd, k, k_stride, nk, f16, s + i * s_stride, s_stride),
                     scores_rows(q + i * hd, 2, hd, k, k_stride, nk, f16, s + i * s_stride, s_stride),
                     scores_rows(q + i * hd, 1, hd, k, k_stride, nk, f16, s + i * s_stride, s_stride));
}

static void scores_f32(const float *q, int nq, int64_t hd, const float *k, size_t k_stride, int nk,
                       float *s, int s_stride)
{
    scores_any(q, nq, hd, k, k_stride, nk, 0, s, s_stride);
}

static void scores_f16(const float *q, int nq, int64_t hd, const void *k, size_t k_stride, int nk,
                       float *s, int s_stride)
{
    scores_any(q, nq, hd, k, k_stride, nk, 1, s, s_stride);
}

INLINE void pv_rows(const float *p, int p_stride, int NQ, const void *v, size_t v_stride, int nk, int64_t hd,
                    int f16, float *acc)
{
    int64_t d = 0;
    for (; d + 4 * ATTN_LANES <= hd; d += 4 * ATTN_LANES)
        pv_block(p, p_stride, NQ, v, v_stride, nk, hd, f16, acc, d, 4, ATTN_LANES);
    for (; d + ATTN_LANES <= hd; d += ATTN_LANES)
        pv_block(p, p_stride, NQ, v, v_stride, nk, hd, f16, acc, d, 1, ATTN_LANES);
    if (d < hd) pv_block(p, p_stride, NQ, v, v_stride, nk, hd, f16, acc, d, 1, hd - d);
}

INLINE void pv_any(const float *p, int p_stride, int nq, const void *v, size_t v_stride, int nk, int64_t hd,
                   int f16, float *acc)
{
    FOR_QUERY_BLOCKS(nq, i,
                     pv_rows(p + i * p_stride, p_stride, 3, v, v_stride, nk, hd, f16, acc + i * hd),
                     pv_rows(p + i * p_stride, p_stride, 2, v, v_stride, nk, hd, f16, acc + i * hd),
                     pv_rows(p + i * p_stride, p_stride, 1, v, v_stride, nk, hd, f16, acc + i * hd));
}

static void pv_f32(const float *p, int p_stride, int nq, const float *v, size_t v_stride, int nk,
                   int64_t hd, float *acc)
{
    pv_any(p, p_stride, nq, v, v_stride, nk, hd, 0, acc);
}

static void pv_f16(const float *p, int p_stride, int nq, const void *v, size_t v_stride, int nk,
                   int64_t hd, float *acc)
{
    pv_any(p, p_stride, nq, v, v_stride, nk, hd, 1, acc);
}

#undef FOR_QUERY_BLOCKS

#endif /* CPU_OPS_ATTENTION_TILES_H */
