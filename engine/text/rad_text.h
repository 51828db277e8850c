/*
** rad_text.h: running a tokenizer: text to token ids and back.
**
** Built from the data in formats/tokenizer.h, a RadText holds what encoding
** needs at speed: a hash of the vocabulary, the merge ranks keyed by pair,
** the compiled pre-tokenizer regexes (PCRE2, UTF and Unicode properties),
** and a matcher for added tokens.  The results equal Hugging Face tokenizers'
** on the same tokenizer.json (tests/text checks every supported vocabulary).
**
** Text is UTF-8.  Invalid UTF-8 in the input is not an error: each maximal
** ill-formed subsequence is read as one U+FFFD, as Python's
** decode(errors="replace") does (a stray byte is one U+FFFD; a multi-byte
** character cut short is one U+FFFD for its bytes), so encode never reads past
** the buffer and always succeeds on any bytes; NUL bytes are ordinary characters.
** The one exception is the tokenizer's own fault: a pre-tokenizer regex that
** meets a limit of base/rad_limits.h on some text (backtracking without
** bound, or slow enough to spend the encode's CPU budget) makes encode fail
** with RAD_E_UNSUPPORTED and a message naming the limit and the file.
*/
#ifndef RAD_TEXT_H
#define RAD_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "../../formats/tokenizer.h"

typedef struct RadText RadText;

/* Build the runtime from tokenizer data; takes ownership of `data` (freed by
** rad_text_free, also on failure).  Fails with a message when a regex does not
** compile. */
int  rad_text_create(RadTokenizer *data, RadText **out);
void rad_text_free(RadText *t);
const RadTokenizer *rad_text_data(const RadText *t);

enum {
    RAD_ENCODE_ADD_SPECIAL = 1,     /* BOS/EOS as the post-processor / config says */
    RAD_ENCODE_PARSE_SPECIAL = 2    /* special-token strings in the text become their ids;
                                    ** without it they are plain text (for untrusted input) */
};

/* Encode len bytes of text.  *ids is malloc'd (caller frees); *n may be 0.
** RAD_E_UNSUPPORTED when the tokenizer's regex meets a limit (above). */
int rad_text_encode(const RadText *t, const char *text, size_t len, int flags, int32_t **ids, int *n);

/* A byte range of a text. */
typedef struct RadTextSpan {
    size_t off, len;
} RadTextSpan;

/* rad_text_encode, except that special-token strings overlapping any of
** plain[0..n_plain) (sorted by offset) are plain text even with
** RAD_ENCODE_PARSE_SPECIAL: a rendered chat prompt's markup becomes control
** tokens, the user's words inside it never do (rad_chat_render_spans gives
** the spans).  With no spans it is rad_text_encode.  RAD_E_ARG for a span
** outside the text. */
int rad_text_encode_spans(const RadText *t, const char *text, size_t len, int flags, const RadTextSpan *plain,
                          int n_plain, int32_t **ids, int *n);

enum { RAD_DECODE_SKIP_SPECIAL = 1 };

/* Decode ids to text (malloc'd, NUL-terminated; caller frees).  An id outside
** the vocabulary is RAD_E_RANGE. */
int rad_text_decode(const RadText *t, const int32_t *ids, int n, int flags, char **out, size_t *len);

/* Streaming decode: one token at a time, never emitting half of a multi-byte
** character.  Bytes that do not yet form a complete character are held until
** the next token completes them (or flush emits them as U+FFFD). */
typedef struct RadDetok {
    const RadText *t;
    int flags;
    int n_emitted;              /* the leading-space rule: spaces stripped so far, -1 once text was emitted */
    unsigned char pending[8];
    int n_pending;
} RadDetok;

void rad_detok_init(RadDetok *d, const RadText *t, int flags);
/* Append the text that token `id` completes to out (at most cap bytes);
** *written is set to the number of bytes appended.  RAD_E_RANGE for a bad id,
** RAD_E_ARG when cap is too small (64 bytes always suffice per token plus
** pending bytes... use rad_detok_max_bytes). */
int  rad_detok_push(RadDetok *d, int32_t id, char *out, size_t cap, size_t *written);
int  rad_detok_flush(RadDetok *d, char *out, size_t cap, size_t *written);
/* The most bytes one push can produce for this tokenizer. */
size_t rad_detok_max_bytes(const RadText *t);

/* ------------------------------------------------ finding a model's tokenizer */

struct RadContainer;

/* The tokenizer a .rad container carries: the compact "tokenizer.bin" blob,
** else its tokenizer.json (+ tokenizer_config.json) blobs.  RAD_E_NOTFOUND
** with a message when the model has none. */
int rad_text_from_container(const struct RadContainer *c, RadText **out);

/* A tokenizer from a path: a .rad model, a .gguf file (its tokenizer.ggml.*
** metadata), or a tokenizer.json (tokenizer_config.json beside it is read). */
int rad_text_open_path(const char *path, RadText **out);

#endif /* RAD_TEXT_H */
