/*
** rad_chat.h: conversations as text, and replies back into parts.
**
** A chat format (RadChatFormat, arch/rad_arch.h) is data a plugin gives for
** the model it serves.  This module does the two things the app needs with
** it: render a conversation into the exact text the model was trained on
** (tested byte for byte against the model's own Jinja template), and split
** a streamed reply into content, reasoning and tool calls with one
** incremental parser, so markup never reaches the content.
*/
#ifndef RAD_TEXT_CHAT_H
#define RAD_TEXT_CHAT_H

#include <stddef.h>

#include "../../arch/rad_arch.h"

struct RadText;

typedef struct RadChatMessage {
    const char *role;           /* "system", "user", "assistant", "tool" */
    const char *content;        /* never NULL ("" when empty) */
    const char *reasoning;      /* an assistant turn's thinking, or NULL */
} RadChatMessage;

typedef struct RadChatRender {
    int add_generation_prompt;  /* end with the assistant's opening, ready for a reply */
    int thinking;               /* 1 on, 0 off (the format's no_think), -1 the model's default */
    /* added with the renderer; zero/NULL keeps the template's defaults */
    const char *today;          /* "YYYY-MM-DD" for formats that write the date; NULL: today, local time */
    const char *reasoning_effort;   /* gpt-oss: "low" | "medium" | "high"; NULL: "low" when
                                    ** thinking is 0, else the template's default "medium" */
} RadChatRender;

/* Render messages[0..n) to text, as the model's template would (special
** tokens written as their text, the BOS included where the template writes
** it: tokenize the result with RAD_ENCODE_PARSE_SPECIAL and without
** RAD_ENCODE_ADD_SPECIAL).  *out is malloc'd.  RAD_E_ARG with a message for
** a role the format cannot express ("tool" is not rendered yet), for what
** the template itself refuses (roles that must alternate), for a system
** message after the first where the format has no place for it, and for a
** chooser that was not resolved.  opt NULL: a generation prompt, defaults. */
int rad_chat_render(const RadChatFormat *f, const RadChatMessage *messages, int n,
                    const RadChatRender *opt, char **out);

/* rad_chat_render, also saying which bytes of *out are the messages' own
** text (contents, reasoning, system text) rather than the template's
** markup: *spans (malloc'd, sorted, caller frees; NULL when there are none)
** gets n_spans byte ranges.  Tokenize with rad_text_encode_spans and those
** spans so that nothing a user wrote or pasted becomes a control token. */
struct RadTextSpan;
int rad_chat_render_spans(const RadChatFormat *f, const RadChatMessage *messages, int n, const RadChatRender *opt,
                          char **out, struct RadTextSpan **spans, int *n_spans);

/* The format a model gets: f itself when it is a format, or, when f is a
** chooser (f->choices set, as the llama plugin returns: it serves Llama,
** Mistral, Qwen and SmolLM lines), the first of its choices the model's
** vocabulary and chat template agree with (RadChatChoice in rad_arch.h).
** NULL when f is NULL or no choice fits (the model has no chat format we
** know: use it raw).  text may be NULL: then only choices that name no
** token and no mark can fit. */
const RadChatFormat *rad_chat_format_resolve(const RadChatFormat *f, const struct RadText *text);

/* 1 when a rendered prompt ends inside an open reasoning block (DeepSeek-R1
** opens <think> in its generation prompt), the value rad_reply_parser_new
** wants for in_reasoning; else 0. */
int rad_chat_prompt_in_reasoning(const RadChatFormat *f, const char *prompt);

/* The token ids that end a reply (the format's stop strings that are single
** tokens of this vocabulary, plus the tokenizer's end-of-sequence), at most
** max of them; returns the count. */
int rad_chat_stop_ids(const RadChatFormat *f, const struct RadText *text, int *ids, int max);

/* ------------------------------------------------------- reply parser */

typedef enum RadReplyPart {
    RAD_REPLY_CONTENT = 0,
    RAD_REPLY_REASONING = 1,
    RAD_REPLY_TOOL_CALL = 2     /* one whole tool call per emit (see below) */
} RadReplyPart;

/* Tool calls are held until their markup closes (or the reply ends) and
** then emitted once each, so every RAD_REPLY_TOOL_CALL emit is exactly one
** call.  Its text is the inside of the markup without surrounding white
** space, as the model wrote it ({"name": ..., "arguments": ...} for Qwen,
** the [...] list for Mistral, the code for Llama 3's <|python_tag|>); where
** the markup carries the name outside the JSON (gpt-oss's recipient,
** DeepSeek's <｜tool▁sep｜>NAME) it is written as
** {"name": "NAME", "arguments": ARGS} with ARGS as the model wrote them. */

typedef void (*RadReplyEmit)(void *user, RadReplyPart part, const char *text, size_t n);

typedef struct RadReplyParser RadReplyParser;

/* A parser for one reply.  in_reasoning: the rendered prompt already opened
** the reasoning block (some templates end the generation prompt inside it). */
RadReplyParser *rad_reply_parser_new(const RadChatFormat *f, int in_reasoning);
void rad_reply_parser_free(RadReplyParser *p);

/* Feed the next piece of decoded reply text (any split, even inside a
** marker or a UTF-8 sequence).  Complete text is passed to emit as soon as
** it cannot be the start of a marker (never part of a UTF-8 character;
** white space next to reasoning markup waits until it is known not to end
** the block, as the template drops it).  Returns 1 once a stop string has
** been seen (the text from it on is dropped), else 0.  Decode the reply
** with special tokens kept (rad_detok_init flags 0): the markup is made of
** them. */
int rad_reply_parser_feed(RadReplyParser *p, const char *text, size_t n, RadReplyEmit emit, void *user);

/* The reply ended: emit whatever is held back.  A reasoning or tool-call
** block left open is emitted as what it was (reasoning stays reasoning). */
void rad_reply_parser_finish(RadReplyParser *p, RadReplyEmit emit, void *user);

#endif /* RAD_TEXT_CHAT_H */
