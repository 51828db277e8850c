/*
** tokenizer_gguf.h: a RadTokenizer built from a GGUF file's tokenizer.ggml.*
** metadata.
**
** A GGUF carries no tokenizer.json: it stores the vocabulary, token types,
** scores or merges, special ids and a pre-tokenizer *name* (llama.cpp's
** tokenizer.ggml.pre).  The import rebuilds the same RadTokenizer that
** importing the model's own tokenizer.json would give, so the runtime
** (engine/text) runs it with no GGUF special case: a Split-regex sequence and
** a ByteLevel step for `gpt2` vocabularies, a Replace " " -> "\u2581" normalizer
** (after an optional Prepend) for `llama` (SentencePiece) ones, whose merges
** are derived from the token scores.  docs/GGUF.md gives the rules.
*/
#ifndef RAD_TOKENIZER_GGUF_H
#define RAD_TOKENIZER_GGUF_H

#include "gguf.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Build a tokenizer from the metadata of `g`:
**   tokenizer.ggml.model   "gpt2" -> RAD_TOK_BPE_BYTELEVEL (merges from
**                          tokenizer.ggml.merges, "left right" strings; the
**                          pre-tokenizer from tokenizer.ggml.pre, whose value
**                          must be one radiance knows), or "llama" ->
**                          RAD_TOK_BPE_SPM (merge ranks derived from
**                          tokenizer.ggml.scores; byte fallback when the
**                          vocabulary has <0xNN> byte tokens);
**   tokenizer.ggml.tokens  the vocabulary (every id, no duplicates);
**   tokenizer.ggml.token_type  control (3) and unknown (2) tokens become
**                          special added tokens, user-defined (4) ones
**                          non-special added tokens;
**   bos/eos/unknown/padding_token_id, add_bos_token, add_eos_token,
**   add_space_prefix and tokenizer.chat_template.
** On success *out is owned by the caller (rad_tokenizer_free).  Returns 0,
** RAD_E_NOTFOUND (no tokenizer in the file), RAD_E_UNSUPPORTED (a tokenizer
** model or pre-tokenizer name radiance does not serve, named), RAD_E_FORMAT
** (a key of the wrong type or inconsistent with the vocabulary: the message
** names the file and key) or RAD_E_NOMEM; *out is NULL on failure. */
int rad_tokenizer_from_gguf(const RadGguf *g, RadTokenizer **out);

#ifdef __cplusplus
}
#endif
#endif /* RAD_TOKENIZER_GGUF_H */
