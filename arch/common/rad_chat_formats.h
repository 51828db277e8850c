/*
** rad_chat_formats.h: the chat formats of the model lines we serve, as data,
** and the rules that choose among them.
**
** A plugin's rad_arch_chat_format returns one of these.  Each format is the
** marker text and layout rules (RadChatFormat in rad_arch.h) that reproduce
** its model's own Jinja template byte for byte; tests/text/test_chat.c
** renders the same conversations through both (docs/CHAT.md lists each
** template and what was checked).  A plugin that serves several model lines
** (the llama plugin: Llama 2 and 3, Mistral, Qwen 2.5 and 3, SmolLM2, the
** DeepSeek-R1 distillations) returns a chooser: rules that name the tokens
** the model's vocabulary must hold and, where one vocabulary carries several
** lines, a string its chat template contains.  A plugin sees only the
** container's metadata, not the vocabulary, so the engine evaluates the
** rules (rad_chat_format_resolve in engine/text/rad_chat.h); nothing here
** ever looks at a file name.
**
** The formats are static const objects (rad_chat_fmt_qwen3, ...) marked unused,
** so a plugin that includes this header for one of them builds without
** warnings; the few hundred bytes of the others are the price of one list.
*/
#ifndef RAD_CHAT_FORMATS_H
#define RAD_CHAT_FORMATS_H

#include <stddef.h>
#include <string.h>

#include "../rad_arch.h"

/* Every object here is used by some includer and unused by the others. */
#define RAD_CHAT_DATA static const __attribute__((unused))

#define RAD_CHATML_TURNS                                                                                     \
    .bos = "", .system_open = "<|im_start|>system\n", .system_close = "<|im_end|>\n",                        \
    .user_open = "<|im_start|>user\n", .user_close = "<|im_end|>\n",                                         \
    .assistant_open = "<|im_start|>assistant\n", .assistant_close = "<|im_end|>\n",                          \
    .generation_prompt = "<|im_start|>assistant\n"

RAD_CHAT_DATA char *const rad_chatml_stops_[] = {"<|im_end|>", "<|endoftext|>", NULL};

/* ChatML with no default system text (models that only share the markers). */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_chatml = {.struct_size = sizeof(RadChatFormat),
                                                   .name = "chatml",
                                                   RAD_CHATML_TURNS,
                                                   .stop_strings = rad_chatml_stops_,
                                                   .style = RAD_CHAT_STYLE_TURNS};

/* SmolLM2-Instruct: ChatML; a conversation without a system message gets one. */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_smollm2 = {
    .struct_size = sizeof(RadChatFormat),
    .name = "smollm2",
    RAD_CHATML_TURNS,
    .stop_strings = rad_chatml_stops_,
    .style = RAD_CHAT_STYLE_TURNS,
    .default_system = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"};

/* Qwen2.5-Instruct: ChatML, its own default system text, <tool_call> JSON. */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_qwen25 = {
    .struct_size = sizeof(RadChatFormat),
    .name = "qwen2.5",
    RAD_CHATML_TURNS,
    .stop_strings = rad_chatml_stops_,
    .style = RAD_CHAT_STYLE_TURNS,
    .tool_call_open = "<tool_call>",
    .tool_call_close = "</tool_call>",
    .default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."};

/* Qwen3: ChatML with <think> reasoning; enable_thinking=false in its template
** writes an empty think block after the generation prompt. */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_qwen3 = {.struct_size = sizeof(RadChatFormat),
                                                  .name = "qwen3",
                                                  RAD_CHATML_TURNS,
                                                  .stop_strings = rad_chatml_stops_,
                                                  .style = RAD_CHAT_STYLE_QWEN3,
                                                  .reasoning_open = "<think>",
                                                  .reasoning_close = "</think>",
                                                  .no_think = "<think>\n\n</think>\n\n",
                                                  .tool_call_open = "<tool_call>",
                                                  .tool_call_close = "</tool_call>"};

#define RAD_LLAMA3_TURNS                                                                                     \
    .bos = "<|begin_of_text|>", .system_open = "<|start_header_id|>system<|end_header_id|>\n\n",             \
    .system_close = "<|eot_id|>", .user_open = "<|start_header_id|>user<|end_header_id|>\n\n",               \
    .user_close = "<|eot_id|>", .assistant_open = "<|start_header_id|>assistant<|end_header_id|>\n\n",       \
    .assistant_close = "<|eot_id|>",                                                                         \
    .generation_prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n"

RAD_CHAT_DATA char *const rad_llama3_stops_[] = {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", NULL};

/* Llama 3 (8B/70B-Instruct, first release): its template always ends with
** the assistant header, asked for or not. */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_llama3 = {.struct_size = sizeof(RadChatFormat),
                                                   .name = "llama3",
                                                   RAD_LLAMA3_TURNS,
                                                   .stop_strings = rad_llama3_stops_,
                                                   .style = RAD_CHAT_STYLE_TURNS,
                                                   .flags = RAD_CHAT_TRIM | RAD_CHAT_ALWAYS_PROMPT};

/* Llama 3.1 and 3.3 (one template): a system turn always, opening with the
** knowledge cut-off and the template's default date (its date_string
** argument, never the clock). */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_llama31 = {
    .struct_size = sizeof(RadChatFormat),
    .name = "llama3.1",
    RAD_LLAMA3_TURNS,
    .stop_strings = rad_llama3_stops_,
    .style = RAD_CHAT_STYLE_TURNS,
    .flags = RAD_CHAT_TRIM,
    .system_preamble = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n",
    .tool_call_open = "<|python_tag|>"};

/* Llama 3.2: as 3.1, with today's date (strftime_now). */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_llama32 = {
    .struct_size = sizeof(RadChatFormat),
    .name = "llama3.2",
    RAD_LLAMA3_TURNS,
    .stop_strings = rad_llama3_stops_,
    .style = RAD_CHAT_STYLE_TURNS,
    .flags = RAD_CHAT_TRIM,
    .system_preamble = "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n",
    .date_format = "%d %b %Y",
    .tool_call_open = "<|python_tag|>"};

RAD_CHAT_DATA char *const rad_sentencepiece_stops_[] = {"</s>", NULL};

/* Llama 2 chat: every user turn opens with <s>; the system text sits in
** <<SYS>> inside the first user turn. */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_llama2 = {.struct_size = sizeof(RadChatFormat),
                                                   .name = "llama2",
                                                   .bos = "",
                                                   .system_open = "<<SYS>>\n",
                                                   .system_close = "\n<</SYS>>\n\n",
                                                   .user_open = "<s>[INST] ",
                                                   .user_close = " [/INST]",
                                                   .assistant_open = " ",
                                                   .assistant_close = " </s>",
                                                   .generation_prompt = "",
                                                   .stop_strings = rad_sentencepiece_stops_,
                                                   .style = RAD_CHAT_STYLE_LLAMA2,
                                                   .flags = RAD_CHAT_TRIM | RAD_CHAT_ALTERNATE};

/* Mistral 7B Instruct v0.3 (SentencePiece vocabulary with [INST] tokens):
** the system text goes into the last user turn; assistant text is trimmed. */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_mistral = {.struct_size = sizeof(RadChatFormat),
                                                    .name = "mistral",
                                                    .bos = "<s>",
                                                    .system_open = "",
                                                    .system_close = "\n\n",
                                                    .user_open = "[INST] ",
                                                    .user_close = "[/INST]",
                                                    .assistant_open = " ",
                                                    .assistant_close = "</s>",
                                                    .generation_prompt = "",
                                                    .stop_strings = rad_sentencepiece_stops_,
                                                    .style = RAD_CHAT_STYLE_MISTRAL,
                                                    .flags = RAD_CHAT_TRIM | RAD_CHAT_ALTERNATE,
                                                    .tool_call_open = "[TOOL_CALLS]"};

/* Mistral NeMo (tekken vocabulary): as v0.3 without the spaces or the trim. */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_mistral_tekken = {.struct_size = sizeof(RadChatFormat),
                                                           .name = "mistral-tekken",
                                                           .bos = "<s>",
                                                           .system_open = "",
                                                           .system_close = "\n\n",
                                                           .user_open = "[INST]",
                                                           .user_close = "[/INST]",
                                                           .assistant_open = "",
                                                           .assistant_close = "</s>",
                                                           .generation_prompt = "",
                                                           .stop_strings = rad_sentencepiece_stops_,
                                                           .style = RAD_CHAT_STYLE_MISTRAL,
                                                           .flags = RAD_CHAT_ALTERNATE,
                                                           .tool_call_open = "[TOOL_CALLS]"};

/* Gemma 3: no system role; the system text and a blank line open the
** first user turn; the assistant is "model". */
RAD_CHAT_DATA char *const rad_chat_fmt_gemma_stops_[] = {"<end_of_turn>", "<eos>", NULL};
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_gemma = {.struct_size = sizeof(RadChatFormat),
                                                  .name = "gemma",
                                                  .bos = "<bos>",
                                                  .system_open = "<start_of_turn>system\n",
                                                  .system_close = "<end_of_turn>\n",
                                                  .user_open = "<start_of_turn>user\n",
                                                  .user_close = "<end_of_turn>\n",
                                                  .assistant_open = "<start_of_turn>model\n",
                                                  .assistant_close = "<end_of_turn>\n",
                                                  .generation_prompt = "<start_of_turn>model\n",
                                                  .stop_strings = rad_chat_fmt_gemma_stops_,
                                                  .style = RAD_CHAT_STYLE_TURNS,
                                                  .flags = RAD_CHAT_TRIM | RAD_CHAT_ALTERNATE |
                                                           RAD_CHAT_SYSTEM_IN_USER};

/* gpt-oss (harmony): a system message with the date and reasoning effort, the
** conversation's system text as the developer's instructions, replies on the
** final channel; reasoning is the analysis channel, tool calls the
** commentary channel addressed to=functions.NAME. */
RAD_CHAT_DATA char *const rad_chat_fmt_harmony_stops_[] = {"<|return|>", "<|call|>", "<|endoftext|>", NULL};
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_harmony = {
    .struct_size = sizeof(RadChatFormat),
    .name = "gpt-oss",
    .bos = "",
    .system_open = "<|start|>system<|message|>",
    .system_close = "<|end|>",
    .user_open = "<|start|>user<|message|>",
    .user_close = "<|end|>",
    .assistant_open = "<|start|>assistant<|channel|>final<|message|>",
    .assistant_close = "<|end|>",
    .generation_prompt = "<|start|>assistant",
    .stop_strings = rad_chat_fmt_harmony_stops_,
    .reasoning_open = "<|channel|>analysis<|message|>",
    .reasoning_close = "<|end|>",
    .tool_call_open = "<|channel|>commentary",
    .tool_call_close = "<|call|>",
    .style = RAD_CHAT_STYLE_HARMONY,
    .date_format = "%Y-%m-%d",
    .system_preamble =
        "You are ChatGPT, a large language model trained by OpenAI.\n"
        "Knowledge cutoff: 2024-06\nCurrent date: {date}\n\nReasoning: {effort}\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every message."};

#define RAD_DEEPSEEK_TURNS                                                                                   \
    .bos = "<｜begin▁of▁sentence｜>", .system_open = "", .system_close = "", .user_open = "<｜User｜>",      \
    .user_close = "", .assistant_open = "<｜Assistant｜>", .assistant_close = "<｜end▁of▁sentence｜>",       \
    .tool_call_open = "<｜tool▁calls▁begin｜>", .tool_call_close = "<｜tool▁calls▁end｜>",                   \
    .style = RAD_CHAT_STYLE_DEEPSEEK

/* The DeepSeek markers are written with full-width bars (U+FF5C) and
** U+2581 for spaces. */
RAD_CHAT_DATA char *const rad_deepseek_stops_[] = {"<｜end▁of▁sentence｜>", NULL};

/* DeepSeek-V3: every system message, joined by blank lines, before the turns. */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_deepseek_v3 = {.struct_size = sizeof(RadChatFormat),
                                                        .name = "deepseek-v3",
                                                        RAD_DEEPSEEK_TURNS,
                                                        .generation_prompt = "<｜Assistant｜>",
                                                        .stop_strings = rad_deepseek_stops_};

/* DeepSeek-R1 (and its Llama/Qwen distillations): the last system message
** only; the generation prompt opens <think>; earlier replies keep only the
** text after their </think>. */
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_deepseek_r1 = {.struct_size = sizeof(RadChatFormat),
                                                        .name = "deepseek-r1",
                                                        RAD_DEEPSEEK_TURNS,
                                                        .generation_prompt = "<｜Assistant｜><think>\n",
                                                        .stop_strings = rad_deepseek_stops_,
                                                        .flags = RAD_CHAT_LAST_SYSTEM,
                                                        .reasoning_open = "<think>",
                                                        .reasoning_close = "</think>"};

/* GLM-4.5 / 4.6 (Glm4MoeForCausalLM): "[gMASK]<sop>", then turns that only
** open (<|system|>\n, <|user|>\n, <|assistant|>) and run to the next
** marker; every assistant turn writes a think block, empty unless it follows
** the last user message and has reasoning; thinking off appends "/nothink"
** to each user turn and an empty think block to the generation prompt.  A
** reply ends at the next turn's marker. */
RAD_CHAT_DATA char *const rad_glm_stops_[] = {"<|user|>", "<|observation|>", "<|endoftext|>", NULL};
RAD_CHAT_DATA RadChatFormat rad_chat_fmt_glm45 = {.struct_size = sizeof(RadChatFormat),
                                                  .name = "glm4.5",
                                                  .bos = "[gMASK]<sop>",
                                                  .system_open = "<|system|>\n",
                                                  .system_close = "",
                                                  .user_open = "<|user|>\n",
                                                  .user_close = "",
                                                  .assistant_open = "<|assistant|>",
                                                  .assistant_close = "",
                                                  .generation_prompt = "<|assistant|>",
                                                  .stop_strings = rad_glm_stops_,
                                                  .reasoning_open = "<think>",
                                                  .reasoning_close = "</think>",
                                                  .no_think = "\n<think></think>",
                                                  .tool_call_open = "<tool_call>",
                                                  .tool_call_close = "</tool_call>",
                                                  .style = RAD_CHAT_STYLE_GLM};

/* ------------------------------------------------------------ choosing */

RAD_CHAT_DATA char *const rad_tok_glm_[] = {"[gMASK]", "<sop>", "<|user|>", "<|assistant|>", NULL};
RAD_CHAT_DATA char *const rad_tok_deepseek_[] = {"<｜User｜>", "<｜Assistant｜>", NULL};
RAD_CHAT_DATA char *const rad_tok_qwen3_[] = {"<|im_start|>", "<think>", NULL};
RAD_CHAT_DATA char *const rad_tok_qwen25_[] = {"<|im_start|>", "<tool_call>", NULL};
RAD_CHAT_DATA char *const rad_tok_chatml_[] = {"<|im_start|>", NULL};
RAD_CHAT_DATA char *const rad_tok_llama31_[] = {"<|start_header_id|>", "<|python_tag|>", NULL};
RAD_CHAT_DATA char *const rad_tok_llama3_[] = {"<|start_header_id|>", NULL};
RAD_CHAT_DATA char *const rad_tok_mistral_[] = {"[INST]", NULL};
RAD_CHAT_DATA char *const rad_tok_gemma_[] = {"<start_of_turn>", NULL};
RAD_CHAT_DATA char *const rad_tok_harmony_[] = {"<|start|>", "<|channel|>", "<|message|>", NULL};

/* The rules for the lines the llama plugin runs (LlamaForCausalLM,
** MistralForCausalLM, Qwen2/Qwen3ForCausalLM, Glm4MoeForCausalLM and their
** GGUF names).  GLM's markers are its own; the DeepSeek distillations come
** next: their vocabularies are Llama 3's or Qwen's with DeepSeek's markers
** added. */
/* clang-format off */
#define RAD_CHAT_LLAMA_RULES                                                        \
    {&rad_chat_fmt_glm45, rad_tok_glm_, NULL},                                      \
    {&rad_chat_fmt_deepseek_r1, rad_tok_deepseek_, "<think>"},                      \
    {&rad_chat_fmt_deepseek_v3, rad_tok_deepseek_, NULL},                           \
    {&rad_chat_fmt_qwen3, rad_tok_qwen3_, NULL},                                    \
    {&rad_chat_fmt_smollm2, rad_tok_chatml_, "named SmolLM"},                       \
    {&rad_chat_fmt_qwen25, rad_tok_chatml_, "You are Qwen, created by Alibaba Cloud"}, \
    {&rad_chat_fmt_qwen25, rad_tok_qwen25_, NULL},                                  \
    {&rad_chat_fmt_chatml, rad_tok_chatml_, NULL},                                  \
    {&rad_chat_fmt_llama32, rad_tok_llama3_, "strftime_now(\"%d %b %Y\")"},         \
    {&rad_chat_fmt_llama31, rad_tok_llama3_, "Cutting Knowledge Date"},             \
    {&rad_chat_fmt_llama31, rad_tok_llama31_, NULL},                                \
    {&rad_chat_fmt_llama3, rad_tok_llama3_, NULL},                                  \
    {&rad_chat_fmt_mistral_tekken, rad_tok_mistral_, "\"[INST]\" +"},               \
    {&rad_chat_fmt_mistral, rad_tok_mistral_, NULL},                                \
    {&rad_chat_fmt_llama2, NULL, "<<SYS>>"}
/* clang-format on */

static inline const RadChatFormat *rad_chat_choose_llama(void)
{
    static const RadChatChoice rules[] = {RAD_CHAT_LLAMA_RULES, {NULL, NULL, NULL}};
    static const RadChatFormat f = {
        .struct_size = sizeof(RadChatFormat), .name = "llama-family", .choices = rules};
    return &f;
}

/* Every line we have a format for (the tests use it on all six reference
** vocabularies; a plugin for a new family can start from it). */
static inline const RadChatFormat *rad_chat_choose_any(void)
{
    static const RadChatChoice rules[] = {{&rad_chat_fmt_harmony, rad_tok_harmony_, NULL},
                                          {&rad_chat_fmt_gemma, rad_tok_gemma_, NULL},
                                          RAD_CHAT_LLAMA_RULES,
                                          {NULL, NULL, NULL}};
    static const RadChatFormat f = {.struct_size = sizeof(RadChatFormat), .name = "any", .choices = rules};
    return &f;
}

/* A format by its name ("qwen3", "llama3.1", ...), for tests and for a user
** who overrides the choice; NULL when there is none by that name. */
static inline const RadChatFormat *rad_chat_format_named(const char *name)
{
    const RadChatFormat *all[] = {
        &rad_chat_fmt_chatml,      &rad_chat_fmt_smollm2,        &rad_chat_fmt_qwen25,  &rad_chat_fmt_qwen3,
        &rad_chat_fmt_llama3,      &rad_chat_fmt_llama31,        &rad_chat_fmt_llama32, &rad_chat_fmt_llama2,
        &rad_chat_fmt_mistral,     &rad_chat_fmt_mistral_tekken, &rad_chat_fmt_gemma,   &rad_chat_fmt_harmony,
        &rad_chat_fmt_deepseek_v3, &rad_chat_fmt_deepseek_r1, &rad_chat_fmt_glm45};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (name && !strcmp(all[i]->name, name)) return all[i];
    return NULL;
}

#endif /* RAD_CHAT_FORMATS_H */
