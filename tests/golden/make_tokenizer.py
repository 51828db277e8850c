"""make_tokenizer.py: give two golden fixtures a real tokenizer of their size.

Run by hand, never by CI (needs the `tokenizers` package):
    /work/venv/bin/python tests/golden/make_tokenizer.py

The golden checkpoints have vocabularies of 1024 ids; the real tokenizers in
../shared are far larger, so a text prompt through them would name ids the
tiny models do not have.  This trains a byte-level BPE (Qwen-style regex and
ChatML special tokens) of exactly 1024 ids on the tokenizer test corpus and
writes tokenizer.json + tokenizer_config.json into fixtures/qwen3 and
fixtures/llama, so `radiance run MODEL "text"` can be tested end to end.
The weights and recorded logits are untouched.
"""
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "text", "corpus.jsonl")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def texts():
    with open(CORPUS, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]


def train():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts(), trainer)
    assert tok.get_vocab_size() == 1024, tok.get_vocab_size()
    return tok


def main():
    tok = train()
    config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "model_max_length": 512, "tokenizer_class": "PreTrainedTokenizerFast"}
    for case in ("qwen3", "llama"):
        out = os.path.join(HERE, "fixtures", case)
        tok.save(os.path.join(out, "tokenizer.json"))
        with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
            json.dump(config, f, indent=2)
        print(f"{case}: tokenizer of {tok.get_vocab_size()} ids written")


if __name__ == "__main__":
    main()
