/*
** rad_types.h: the vocabulary every layer of radiance shares.
**
** This header sits below everything else (app -> engine -> formats -> base)
** and depends on nothing but the C library.  It owns three things:
**
**   1. error codes: every function that can fail returns 0 or a negative
**      RAD_E_* value; the human sentence lives in a thread-local message
**      (rad_error_set / rad_error_message) written where the context is known,
**      so the edge of the program prints one line naming file, field, remedy.
**   2. encodings: how a tensor's bytes are laid out.  The ids are ggml's type
**      ids wherever ggml has the encoding, so a GGUF import copies bytes and
**      ids alike; ids of our own start at 200.
**   3. RadMetaKV: one entry of a model's free-form metadata table, the shape
**      in which config.json keys travel from the converter, through the .rad
**      container, to the architecture plugin.
**
** Plugins and kernel libraries may include this header; it is part of both
** ABIs, so entries are only ever appended.
*/
#ifndef RAD_TYPES_H
#define RAD_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

#define RAD_OK            0
#define RAD_E_NOMEM      -1   /* an allocation failed */
#define RAD_E_IO         -2   /* a read, write, open or map failed */
#define RAD_E_FORMAT     -3   /* a file is malformed, truncated or hostile */
#define RAD_E_UNSUPPORTED -4  /* well-formed, but something we do not serve */
#define RAD_E_SHAPE      -5   /* dimensions disagree, or zero rows issued */
#define RAD_E_NOTFOUND   -6   /* a file, tensor, key or plugin is missing */
#define RAD_E_ABI        -7   /* a plugin built against another ABI */
#define RAD_E_ARG        -8   /* a caller passed an invalid argument */
#define RAD_E_NOKERNEL   -9   /* no kernel library serves an op */
#define RAD_E_RANGE     -10   /* a count or size past a limit (context full) */
#define RAD_E_STATE     -11   /* a call made in the wrong order */
#define RAD_E_INTERRUPT -12   /* the user interrupted */

/* A short constant name for a code ("RAD_E_FORMAT"); never NULL. */
const char *rad_strerror(int code);

/* Record the message for the error about to be returned, printf-style.
** Returns `code` so a failing path reads `return rad_error_set(RAD_E_IO, ...)`.
** The message is per thread and overwritten by the next call. */
int rad_error_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix the current message with more context ("model.rad: " + message). */
int rad_error_prefix(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The last message set on this thread, or "" when none. */
const char *rad_error_message(void);
void rad_error_clear(void);

/* ------------------------------------------------------------- encodings */

typedef enum RadEncoding {
    RAD_ENC_F32    = 0,
    RAD_ENC_F16    = 1,
    RAD_ENC_Q4_0   = 2,
    RAD_ENC_Q4_1   = 3,
    RAD_ENC_Q5_0   = 6,
    RAD_ENC_Q5_1   = 7,
    RAD_ENC_Q8_0   = 8,
    RAD_ENC_Q2_K   = 10,
    RAD_ENC_Q3_K   = 11,
    RAD_ENC_Q4_K   = 12,
    RAD_ENC_Q5_K   = 13,
    RAD_ENC_Q6_K   = 14,
    RAD_ENC_IQ4_NL = 20,
    RAD_ENC_I8     = 24,
    RAD_ENC_I16    = 25,
    RAD_ENC_I32    = 26,
    RAD_ENC_I64    = 27,
    RAD_ENC_F64    = 28,
    RAD_ENC_BF16   = 30,
    RAD_ENC_MXFP4  = 39,
    RAD_ENC_FP8_E4M3 = 200,   /* ours: e4m3 codes; scales are a second plane */
    RAD_ENC_COUNT  = 256      /* ids are below this */
} RadEncoding;

/* Fixed facts about one encoding: a block of `block_elems` elements takes
** `block_bytes` bytes.  Plain types have block_elems == 1. */
typedef struct RadEncodingInfo {
    const char *name;       /* "q8_0", "bf16"; NULL for an unknown id */
    int block_elems;
    int block_bytes;
} RadEncodingInfo;

/* The info for `enc`, or NULL when the id names no encoding we know. */
const RadEncodingInfo *rad_encoding_info(int enc);

/* The id for a name ("q8_0"), or -1. */
int rad_encoding_by_name(const char *name);

/* Bytes one row of `n` elements takes; -1 when `n` is not a whole number of
** blocks or the encoding is unknown. */
int64_t rad_encoding_row_bytes(int enc, int64_t n);

/* ------------------------------------------------------ metadata entries */

typedef enum RadMetaType {
    RAD_META_INT = 1,
    RAD_META_FLOAT = 2,
    RAD_META_STRING = 3
} RadMetaType;

/* One key of a model's free-form metadata.  Nested config.json objects are
** flattened with dots ("rope_scaling.factor"); arrays become "key.0",
** "key.1", ... plus "key.length".  Booleans are ints 0/1.  A FLOAT entry has
** `i` set to the truncated value, an INT entry has `f` set too, so a reader
** may ask for either. */
typedef struct RadMetaKV {
    const char *key;
    int type;               /* RadMetaType */
    int64_t i;
    double f;
    const char *s;          /* STRING only; NUL-terminated UTF-8 */
} RadMetaKV;

#ifdef __cplusplus
}
#endif
#endif /* RAD_TYPES_H */
