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
#ifndef RAD_CHAT_H
#define RAD_CHAT_H

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
} RadChatRender;

/* Render messages[0..n) to text, as the model's template would (special
** tokens written as their text; tokenize the result with special-token
** parsing on).  *out is malloc'd.  RAD_E_ARG with a message for a role the
** format cannot express. */
int rad_chat_render(const RadChatFormat *f, const RadChatMessage *messages, int n,
                    const RadChatRender *opt, char **out);

/* The token ids that end a reply (the format's stop strings that are single
** tokens of this vocabulary, plus the tokenizer's end-of-sequence), at most
** max of them; returns the count. */
int rad_chat_stop_ids(const RadChatFormat *f, const struct RadText *text, int *ids, int max);

/* ------------------------------------------------------- reply parser */

typedef enum RadReplyPart {
    RAD_REPLY_CONTENT = 0,
    RAD_REPLY_REASONING = 1,
    RAD_REPLY_TOOL_CALL = 2     /* the text inside the tool-call markup (JSON as the model wrote it) */
} RadReplyPart;

typedef void (*RadReplyEmit)(void *user, RadReplyPart part, const char *text, size_t n);

typedef struct RadReplyParser RadReplyParser;

/* A parser for one reply.  in_reasoning: the rendered prompt already opened
** the reasoning block (some templates end the generation prompt inside it). */
RadReplyParser *rad_reply_parser_new(const RadChatFormat *f, int in_reasoning);
void rad_reply_parser_free(RadReplyParser *p);

/* Feed the next piece of decoded reply text (any split, even inside a
** marker or a UTF-8 sequence).  Complete text is passed to emit as soon as
** it cannot be the start of a marker.  Returns 1 once a stop string has been
** seen (the text from it on is dropped), else 0. */
int rad_reply_parser_feed(RadReplyParser *p, const char *text, size_t n, RadReplyEmit emit, void *user);

/* The reply ended: emit whatever is held back.  A reasoning or tool-call
** block left open is emitted as what it was (reasoning stays reasoning). */
void rad_reply_parser_finish(RadReplyParser *p, RadReplyEmit emit, void *user);

#endif /* RAD_CHAT_H */
