#!/usr/bin/env python3
"""Generate the chat-format conformance expectations under tests/text/chat_expected/.

Run BY HAND, never by CI; `make test` only reads the files this writes (they
are committed).  Regenerate with:

    /work/venv/bin/python tests/text/make_chat_expected.py

Needs transformers (its apply_chat_template machinery renders the templates,
exactly as a user of the model would get them), gguf (to read the template a
GGUF carries) and the reference tokenizers.  Options:

    --tokenizers DIR   folder holding <vocab>/tokenizer_config.json
                       (default: $RADIANCE_TOKENIZERS or /work/shared/tokenizers)
    --models DIR       folder holding the real GGUF files
                       (default: $RADIANCE_MODELS or ~/.cache/radiance/models)
    --only ID...       write only these templates' files (ids as in TEMPLATES)

Which templates (TEMPLATES below), and where each comes from:

  - the chat_template of every reference tokenizer_config.json that has one
    (qwen3, llama3, gemma3, deepseek_v3; llama2's and gptoss's have none);
  - the template inside the real SmolLM2-135M-Instruct GGUF (the Gemma 3
    270M GGUF is a base model and carries none);
  - for the model lines whose reference tokenizer carries no template, or
    whose newer releases changed it, the models' published templates, copied
    into chat_expected/templates/ (see templates/SOURCES.md).

Each template is rendered with transformers' render_jinja_template, the
function apply_chat_template calls, with the tokenizer's special tokens as
apply_chat_template passes them (bos_token, eos_token, ...).  strftime_now is
pinned to 2025-03-05 so dated templates (Llama 3.2, gpt-oss) render
reproducibly; the C test passes the same date.

Output: chat_expected/<template>.json:

    {"template": id, "source": where it came from, "sha256": of the template,
     "format": the radiance format expected to render it (arch/common/rad_chat_formats.h),
     "conversations": {name: [{"role", "content", "reasoning"?}...]},
     "cases": [{"conv": name, "add_generation_prompt": bool, "thinking": -1|0|1,
                "reasoning_effort": str?, "expected": text} or {..., "error": message}]}

"thinking" is radiance's switch (RadChatRender.thinking) and maps onto the
templates' own arguments: -1 passes nothing (the template's default), 0
passes enable_thinking=False and reasoning_effort="low", 1 passes
enable_thinking=True and reasoning_effort="medium".  A message's "reasoning"
is passed as reasoning_content (transformers copies it to "thinking" for
gpt-oss).  "error" records that the template raised, which our renderer must
refuse too.
"""

import argparse
import datetime as dt
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUTDIR = os.path.join(HERE, "chat_expected")
TEMPLATE_DIR = os.path.join(OUTDIR, "templates")
TODAY = dt.datetime(2025, 3, 5, 12, 0, 0)

SYSTEM = "You are a terse assistant."
CONVERSATIONS = {
    "single": [{"role": "user", "content": "Hello!"}],
    "sys_single": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello!"}],
    "multi": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4."},
        {"role": "user", "content": "And 3+3?"},
    ],
    "sys_multi": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4."},
        {"role": "user", "content": "And 3+3?"},
    ],
    "long": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another."},
        {"role": "assistant", "content": "Green.\n\nOr red."},
        {"role": "user", "content": "Thanks.\nBye."},
    ],
    "ends_assistant": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
    ],
    "reasoning_history": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4.", "reasoning": "Two plus two.\nThat is four."},
        {"role": "user", "content": "Sure?"},
    ],
    "reasoning_last": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4.", "reasoning": "\nTwo plus two.\n"},
    ],
    "reasoning_empty_last": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "\nHello.", "reasoning": ""},
    ],
    "think_in_content": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4."},
    ],
    "think_in_content_history": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>add</think>4."},
        {"role": "user", "content": "Why?"},
    ],
    "whitespace": [
        {"role": "system", "content": "  Be brief.\n"},
        {"role": "user", "content": "\n  Hi there  \n\t"},
        {"role": "assistant", "content": "  Hello.  \n"},
        {"role": "user", "content": " Bye "},
    ],
    "unicode": [
        {"role": "user", "content": "Gr\u00fc\u00dfe, \u4e16\u754c! \U0001f44b\U0001f3fd caf\u00e9\u00a0"},
        {"role": "assistant", "content": "\u3000\u00c7a va \u2713\u2028"},
        {"role": "user", "content": "\U0001d518\U0001d52b\U0001d526 \u0645\u0631\u062d\u0628\u0627\u0085"},
    ],
    "empty_content": [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "x"},
    ],
    "system_only": [{"role": "system", "content": SYSTEM}],
    "not_alternating": [
        {"role": "user", "content": "One."},
        {"role": "user", "content": "Two."},
    ],
    "assistant_first": [
        {"role": "assistant", "content": "Hi, how can I help?"},
        {"role": "user", "content": "Hello."},
    ],
    "late_system": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": "Now answer in French."},
        {"role": "user", "content": "Bye"},
    ],
    "two_systems": [
        {"role": "system", "content": SYSTEM},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Bye"},
    ],
}

# Random conversations, the same for every template (a fixed seed): roles in
# any order, texts from a pool of the awkward (empty, white space only,
# Unicode spaces, markup of every format, reasoning split inside the text).
# Many break a template's rules; then the template refuses and so must we.
TEXT_POOL = [
    "", " ", "\n", "\n\n", "Hello.", "  padded  ", "\u00a0nbsp\u3000", "line one\nline two\n",
    "<think>inner</think>after", "</think>", "<think>\nA\n</think>\n\nB", "x</think>y</think>z",
    "<tool_response>\nr\n</tool_response>", "<|im_end|>", "[INST] fake [/INST]", "<end_of_turn>",
    "\U0001f642 \u65e5\u672c", "tab\tend\t", "<<SYS>>", "{\"a\": 1}",
]
N_RANDOM = 24


def random_conversations():
    import random

    rng = random.Random(20250305)
    convs = {}
    for k in range(N_RANDOM):
        n = rng.randint(1, 6)
        roles = []
        for i in range(n):
            r = rng.random()
            if i == 0 and r < 0.4:
                roles.append("system")
            elif r < 0.1:
                roles.append("system")
            else:
                roles.append("user" if (i % 2 == 0) != (rng.random() < 0.15) else "assistant")
        msgs = []
        for role in roles:
            m = {"role": role, "content": rng.choice(TEXT_POOL)}
            if role == "assistant" and rng.random() < 0.5:
                m["reasoning"] = rng.choice(TEXT_POOL)
            msgs.append(m)
        convs[f"random_{k:02d}"] = msgs
    return convs


CONVERSATIONS.update(random_conversations())

# id, where the template is, the tokenizer whose special tokens it is rendered
# with, the radiance format that must reproduce it, and whether the template
# has a thinking switch (then thinking 0 and 1 are rendered for every case,
# else only for a few, to show that they change nothing).
TEMPLATES = [
    ("qwen3", "tokenizer:qwen3", "qwen3", "qwen3", True),
    ("llama3", "tokenizer:llama3", "llama3", "llama3", False),
    ("gemma3", "tokenizer:gemma3", "gemma3", "gemma", False),
    ("deepseek_v3", "tokenizer:deepseek_v3", "deepseek_v3", "deepseek-v3", False),
    ("smollm2", "gguf:SmolLM2-135M-Instruct.Q4_1.gguf", "gguf", "smollm2", False),
    ("llama-2-chat", "file:meta-llama-Llama-2-7b-chat-hf.jinja", "llama2", "llama2", False),
    ("llama-3.1", "file:meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3", "llama3.1", False),
    ("llama-3.2", "file:meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3", "llama3.2", False),
    ("qwen2.5", "file:Qwen-Qwen2.5-7B-Instruct.jinja", "qwen3", "qwen2.5", False),
    ("mistral-v0.3", "file:mistralai-Mistral-7B-Instruct-v0.3.jinja", "llama2", "mistral", False),
    ("mistral-nemo", "file:mistralai-Mistral-Nemo-Instruct-2407.jinja", "llama2", "mistral-tekken", False),
    ("gpt-oss", "file:openai-gpt-oss-120b.jinja", "gptoss", "gpt-oss", True),
    ("deepseek-r1-distill", "file:deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek_v3", "deepseek-r1", False),
    # GLM-4.6's template (GLM-4.5's line, Glm4MoeForCausalLM); it names no
    # special token variable, so any tokenizer's map renders it the same
    ("glm4.6", "file:zai-org-GLM-4.6.jinja", "qwen3", "glm4.5", True),
]

THINKING_KWARGS = {
    -1: {},
    0: {"enable_thinking": False, "reasoning_effort": "low"},
    1: {"enable_thinking": True, "reasoning_effort": "medium"},
}


class FixedDatetime(dt.datetime):
    """datetime whose now() is TODAY: strftime_now reads the clock through it."""

    @classmethod
    def now(cls, tz=None):
        return TODAY


def sha256(data):
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def load_template(source, tokenizers_dir, models_dir):
    kind, _, name = source.partition(":")
    if kind == "tokenizer":
        with open(os.path.join(tokenizers_dir, name, "tokenizer_config.json"), encoding="utf-8") as f:
            tmpl = json.load(f).get("chat_template")
        if not isinstance(tmpl, str):
            sys.exit(f"{name}/tokenizer_config.json: no chat_template string")
        return tmpl, f"{name}/tokenizer_config.json chat_template"
    if kind == "gguf":
        import gguf

        reader = gguf.GGUFReader(os.path.join(models_dir, name))
        field = reader.fields.get("tokenizer.chat_template")
        if field is None:
            sys.exit(f"{name}: no tokenizer.chat_template")
        return field.contents(), f"{name} tokenizer.chat_template"
    if kind == "file":
        with open(os.path.join(TEMPLATE_DIR, name), encoding="utf-8") as f:
            return f.read(), f"templates/{name}"
    sys.exit(f"unknown template source {source}")


def special_tokens(which, tokenizers_dir, models_dir):
    """What apply_chat_template passes the template: the tokenizer's special tokens map."""
    if which == "gguf":
        import gguf

        reader = gguf.GGUFReader(os.path.join(models_dir, "SmolLM2-135M-Instruct.Q4_1.gguf"))
        tokens = reader.fields["tokenizer.ggml.tokens"].contents()
        out = {}
        for key, name in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"), ("pad_token", "padding")):
            field = reader.fields.get(f"tokenizer.ggml.{name}_token_id")
            if field is not None:
                out[key] = tokens[field.contents()]
        return out
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(os.path.join(tokenizers_dir, which))
    return dict(tok.special_tokens_map)


def to_template_messages(conv):
    out = []
    for m in conv:
        msg = {"role": m["role"], "content": m["content"]}
        if "reasoning" in m:
            msg["reasoning_content"] = m["reasoning"]
        out.append(msg)
    return out


def render(tmpl, conv, agp, kwargs, specials):
    from transformers.utils import chat_template_utils as ctu

    try:
        return {"expected": ctu.render_jinja_template(
            conversations=[to_template_messages(conv)], chat_template=tmpl,
            add_generation_prompt=agp, **{**specials, **kwargs})[0][0]}
    except Exception as e:  # the template refused the conversation (raise_exception, a bad index)
        return {"error": f"{type(e).__name__}: {e}"}


def dump(doc):
    """The document as JSON with one conversation and one case per line."""
    line = lambda v: json.dumps(v, ensure_ascii=False)
    out = ["{"]
    for key in ("template", "source", "sha256", "format", "today", "rendered_with"):
        out.append(f" {line(key)}: {line(doc[key])},")
    out.append(' "conversations": {')
    items = list(doc["conversations"].items())
    out += [f"  {line(k)}: {line(v)}{',' if i + 1 < len(items) else ''}" for i, (k, v) in enumerate(items)]
    out.append(" },")
    out.append(' "cases": [')
    out += [f"  {line(c)}{',' if i + 1 < len(doc['cases']) else ''}" for i, c in enumerate(doc["cases"])]
    out.append(" ]")
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizers", default=os.environ.get("RADIANCE_TOKENIZERS", "/work/shared/tokenizers"))
    ap.add_argument("--models", default=os.environ.get("RADIANCE_MODELS",
                                                         os.path.expanduser("~/.cache/radiance/models")))
    ap.add_argument("--only", nargs="*", help="template ids to write (default: all)")
    args = ap.parse_args()

    import transformers
    from transformers.utils import chat_template_utils as ctu

    ctu.datetime = FixedDatetime       # strftime_now looks datetime up at call time
    os.makedirs(OUTDIR, exist_ok=True)
    total = 0
    for tid, source, tok, fmt, has_switch in TEMPLATES:
        if args.only and tid not in args.only:
            continue
        tmpl, where = load_template(source, args.tokenizers, args.models)
        specials = special_tokens(tok, args.tokenizers, args.models)
        cases = []
        for conv_name, conv in CONVERSATIONS.items():
            for agp in (True, False):
                if conv_name.startswith("random_"):
                    thinkings = (-1, 0) if has_switch else (-1,)
                elif has_switch or conv_name in ("sys_multi", "reasoning_last"):
                    thinkings = (-1, 0, 1)
                else:
                    thinkings = (-1,)
                for thinking in thinkings:
                    case = {"conv": conv_name, "add_generation_prompt": agp, "thinking": thinking}
                    case.update(render(tmpl, conv, agp, THINKING_KWARGS[thinking], specials))
                    cases.append(case)
        if has_switch and "reasoning_effort" in tmpl:
            for conv_name in ("sys_multi", "reasoning_last"):
                case = {"conv": conv_name, "add_generation_prompt": True, "thinking": -1, "reasoning_effort": "high"}
                case.update(render(tmpl, CONVERSATIONS[conv_name], True, {"reasoning_effort": "high"}, specials))
                cases.append(case)
        doc = {
            "template": tid,
            "source": where,
            "sha256": sha256(tmpl),
            "format": fmt,
            "today": TODAY.strftime("%Y-%m-%d"),
            "rendered_with": f"transformers {transformers.__version__} render_jinja_template",
            "conversations": CONVERSATIONS,
            "cases": cases,
        }
        path = os.path.join(OUTDIR, f"{tid}.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(dump(doc))
        errors = sum(1 for c in cases if "error" in c)
        print(f"{tid:22} {len(cases):4} cases ({errors} refused by the template) -> {os.path.relpath(path)}")
        total += len(cases)
    print(f"{total} cases in {len(TEMPLATES)} templates")


if __name__ == "__main__":
    main()
