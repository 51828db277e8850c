/*
** rad_block_util.h: small helpers the header-only blocks share.
**
** Declaring a weight takes a struct and a name map entry; these helpers say
** it in one line, and format the per-layer names ("blk.3.attn_q.weight",
** "model.layers.3.self_attn.q_proj.weight") that every family repeats.
** Nothing here keeps state: a plugin's state is its instance (rad_arch.h).
*/
#ifndef RAD_BLOCK_UTIL_H
#define RAD_BLOCK_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../rad_arch.h"

#define RAD_NAME_MAX 160

static inline const char *rad_fmt(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline const char *rad_fmt(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, RAD_NAME_MAX, fmt, ap);
    va_end(ap);
    return buf;
}

/* The encoding a matrix of `cols` columns gets in a plugin built for `enc`.
** Block encodings need whole blocks per row (32 elements, 256 for k-quants):
** a row that does not divide falls back to q8_0, then f16, as llama.cpp's
** quantizer does.  Deterministic in the shape, so convert and load agree.
** enc < 0 ("as stored", GGUF) stays as it is. */
static inline int rad_enc_for_cols(int enc, int64_t cols)
{
    if (enc < 0 || rad_encoding_row_bytes(enc, cols) > 0) return enc;
    if (rad_encoding_row_bytes(RAD_ENC_Q8_0, cols) > 0) return RAD_ENC_Q8_0;
    return RAD_ENC_F16;
}

/* Declare a weight and map it from one checkpoint name (COPY; the core adds
** the builder's name aliases, rad_decl_name_alias).  `hf` may be NULL when
** the weight has no checkpoint source of its own (a view). */
static inline rad_weight rad_weight_mapped(RadBuilder *b, const char *name, const char *hf, int enc,
                                           int rank, int64_t d0, int64_t d1, int access, int32_t group,
                                           int optional)
{
    RadWeightDecl d = {
        RAD_SIZED(RadWeightDecl), .enc = rank == 2 ? rad_enc_for_cols(enc, d1) : enc, .rank = rank,
        .shape = {d0, d1}, .access = access, .shard = RAD_SHARD_NONE, .group = group, .optional = optional,
    };
    rad_weight w = rad_decl_weight(b, name, &d);
    if (w >= 0 && hf) rad_decl_name_map(b, name, RAD_MAP_COPY, &hf, 1);
    return w;
}

/* A transient f32 activation buffer of `cols` columns and `rows` rows. */
static inline rad_buf rad_activation(RadBuilder *b, const char *name, int64_t rows, int64_t cols)
{
    RadBufferDecl d = {RAD_SIZED(RadBufferDecl), .kind = RAD_BUF_TRANSIENT, .enc = RAD_ENC_F32, .rows = rows,
                       .cols = cols};
    return rad_decl_buffer(b, name, &d);
}

/* A buffer the core fills from the batch each step ("token_ids", ...). */
static inline rad_buf rad_derived(RadBuilder *b, const char *name, const char *derive, int64_t rows)
{
    RadBufferDecl d = {RAD_SIZED(RadBufferDecl), .kind = RAD_BUF_DERIVED, .enc = RAD_ENC_I32, .rows = rows,
                       .cols = 1, .derive = derive};
    return rad_decl_buffer(b, name, &d);
}

#endif /* RAD_BLOCK_UTIL_H */
