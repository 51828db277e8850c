#!/usr/bin/env python3
"""Token ids a GGUF file's tokenizer must produce, for tests/unit/test_gguf_real.c.

Run BY HAND, never in CI (it needs transformers, tokenizers and gguf from the
package registry, and the real file from tests/models/fetch.sh):

    tests/models/fetch.sh
    /work/venv/bin/python tests/models/make_gguf_expected.py

Writes tests/models/expected/smollm2_gguf.jsonl: one line per case of
tests/text/corpus.jsonl, in the format of tests/text/expected/ (see
tests/text/README.md):

    {"case":..., "ids":[...], "ids_special":[...], "ids_plain":[...], "roundtrip":bool}

    ids          encode(text, add_special_tokens=False)
    ids_special  encode(text, add_special_tokens=True)
    ids_plain    ids with encode_special_tokens=True (special added tokens in
                 the text are not matched; non-special ones still are)
    roundtrip    decode(ids, skip_special_tokens=False) == text

and tests/models/expected/VERSIONS.txt (package versions, the GGUF's sha256).

How the reference tokenizer is built.  transformers turns a GGUF's metadata
into a fast tokenizer (AutoTokenizer.from_pretrained(dir, gguf_file=...)),
reading the same keys llama.cpp reads: the vocabulary, merges and token types
come straight from the file, so those are trustworthy.  The pre-tokenizer is
not in the file, only its llama.cpp name (tokenizer.ggml.pre), and
transformers 5.24 knows few of those names: for 'smollm' it falls back to
plain GPT-2 splitting, while llama.cpp (and SmolLM2's own tokenizer.json)
first split every digit apart.  So the script replaces the pre-tokenizer with
the one the name stands for, Sequence[Digits(individual_digits=True),
ByteLevel(use_regex=True)], and prints how many cases the unpatched
conversion would get differently (with SmolLM2's vocabulary, which has no
multi-digit tokens, it is expected to be none).  The script also checks that
the converted vocabulary and merges equal the file's, and fails if not.
"""

import hashlib
import importlib.metadata
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("RADIANCE_MODELS", os.path.expanduser("~/.cache/radiance/models"))
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = os.path.join(HERE, "expected", "smollm2_gguf.jsonl")
VERSIONS = os.path.join(HERE, "expected", "VERSIONS.txt")


def corpus_path():
    return os.path.join(ROOT, "tests", "text", "corpus.jsonl")


def load_corpus(path):
    cases = []
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("utf-8")
            if line.strip():
                obj = json.loads(line)
                cases.append((obj["case"], obj["text"]))
    assert len({c for c, _ in cases}) == len(cases), "duplicate case names"
    return cases


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def expectations(tok, text):
    ids = tok.encode(text, add_special_tokens=False).ids
    special = tok.encode(text, add_special_tokens=True).ids
    tok.encode_special_tokens = True
    plain = tok.encode(text, add_special_tokens=False).ids
    tok.encode_special_tokens = False
    return ids, special, plain, tok.decode(ids, skip_special_tokens=False) == text


def main():
    warnings.filterwarnings("ignore")
    import gguf
    import tokenizers
    import transformers
    from tokenizers import Tokenizer, pre_tokenizers
    from transformers import AutoTokenizer

    path = os.path.join(CACHE, GGUF_NAME)
    if not os.path.exists(path):
        sys.exit("make_gguf_expected.py: %s is missing; run tests/models/fetch.sh first" % path)

    # The file's own vocabulary and merges, to check the conversion against.
    reader = gguf.GGUFReader(path)
    field = reader.fields["tokenizer.ggml.tokens"]
    file_tokens = [field.contents(i) for i in range(len(field.data))]
    field = reader.fields["tokenizer.ggml.merges"]
    file_merges = [field.contents(i) for i in range(len(field.data))]
    pre = reader.fields["tokenizer.ggml.pre"].contents()
    assert pre == "smollm", "this script knows the 'smollm' pre-tokenizer only, the file says %r" % pre

    converted = AutoTokenizer.from_pretrained(CACHE, gguf_file=GGUF_NAME).backend_tokenizer
    spec = json.loads(converted.to_str())
    vocab = spec["model"]["vocab"]
    if [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])] != file_tokens:
        sys.exit("make_gguf_expected.py: transformers' vocabulary differs from the file's")
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    if merges != file_merges:
        sys.exit("make_gguf_expected.py: transformers' merges differ from the file's")

    reference = Tokenizer.from_str(converted.to_str())
    reference.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])

    cases = load_corpus(corpus_path())
    differ = 0
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        for name, text in cases:
            ids, special, plain, roundtrip = expectations(reference, text)
            if expectations(converted, text)[0] != ids:
                differ += 1
                print("  transformers' own pre-tokenizer differs on", name)
            f.write(json.dumps({"case": name, "ids": ids, "ids_special": special, "ids_plain": plain,
                                "roundtrip": roundtrip}, ensure_ascii=False, separators=(",", ":")) + "\n")
    with open(VERSIONS, "w") as f:
        f.write("transformers %s\ntokenizers %s\ngguf %s\npython %s\n" % (
            transformers.__version__, tokenizers.__version__, importlib.metadata.version("gguf"),
            sys.version.split()[0]))
        f.write("%s sha256 %s\n" % (GGUF_NAME, sha256(path)))
        f.write("%s sha256 %s (%d cases)\n" % (os.path.relpath(corpus_path(), ROOT), sha256(corpus_path()),
                                               len(cases)))
    print("wrote %s: %d cases; transformers' unpatched conversion differs on %d" % (
        os.path.relpath(OUT, ROOT), len(cases), differ))


if __name__ == "__main__":
    main()
