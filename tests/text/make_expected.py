#!/usr/bin/env python3
"""Generate the tokenizer conformance expectations under tests/text/expected/.

This script is run BY HAND, never by CI.  CI only consumes the files it
writes (they are committed).  Regenerate with:

    /work/venv/bin/python tests/text/make_expected.py

(any Python with the `tokenizers` package works; paths are relative to this
file, so it can be run from anywhere).  Options:

    --tokenizers DIR   folder holding <vocab>/tokenizer.json
                       (default: $RADIANCE_TOKENIZERS or /work/shared/tokenizers)
    VOCAB ...          regenerate only these vocabularies, e.g. `qwen3 gemma3`
                       (VERSIONS.txt keeps the other vocabularies' lines; if
                       the corpus changed, regenerate all of them)

Input: tests/text/corpus.jsonl, one JSON object per line,
{"case": "<name>", "text": "<string>"}.

Output, for every vocabulary V in VOCABS: tests/text/expected/<V>.jsonl with
one line per corpus case, in corpus order:

    {"case": name,
     "ids":         encode(text, add_special_tokens=False).ids,
     "ids_special": encode(text, add_special_tokens=True).ids,
     "ids_plain":   encode(text, add_special_tokens=False).ids with
                    tokenizer.encode_special_tokens = True (special added
                    tokens written in the text are NOT matched as such;
                    non-special added tokens still are),
     "roundtrip":   decode(ids, skip_special_tokens=False) == text}

and tests/text/expected/VERSIONS.txt: the `tokenizers` version and the
sha256 of every tokenizer.json used.  The tokenizer is always
`tokenizers.Tokenizer.from_file(<V>/tokenizer.json)` (not transformers'
AutoTokenizer, which may rebuild the post-processor from
tokenizer_config.json).
"""

import argparse
import hashlib
import json
import os
import sys

import tokenizers

VOCABS = ["llama2", "llama3", "qwen3", "gemma3", "gptoss", "deepseek_v3"]
HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus.jsonl")
OUTDIR = os.path.join(HERE, "expected")
MAX_TOTAL_BYTES = 5 * 1024 * 1024  # whole tests/text/ tree


def load_corpus():
    cases = []
    with open(CORPUS, "rb") as f:
        for n, raw in enumerate(f, 1):
            line = raw.decode("utf-8")  # strict: the corpus must be UTF-8
            if not line.strip():
                continue
            obj = json.loads(line)
            assert set(obj) == {"case", "text"}, (n, obj.keys())
            assert isinstance(obj["text"], str)
            obj["text"].encode("utf-8")  # raises on lone surrogates
            cases.append((obj["case"], obj["text"]))
    names = [c for c, _ in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    return cases


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def generate(vocab, path, cases):
    tok = tokenizers.Tokenizer.from_file(path)
    lines = []
    for name, text in cases:
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=False).ids
        ids_special = tok.encode(text, add_special_tokens=True).ids
        tok.encode_special_tokens = True
        ids_plain = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        rt = tok.decode(ids, skip_special_tokens=False) == text
        lines.append(dumps({"case": name, "ids": ids, "ids_special": ids_special,
                            "ids_plain": ids_plain, "roundtrip": rt}))
    out = os.path.join(OUTDIR, vocab + ".jsonl")
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizers", default=os.environ.get(
        "RADIANCE_TOKENIZERS", "/work/shared/tokenizers"))
    ap.add_argument("vocabs", nargs="*", default=VOCABS)
    args = ap.parse_args()
    for v in args.vocabs:
        if v not in VOCABS:
            sys.exit("unknown vocabulary %r (known: %s)" % (v, ", ".join(VOCABS)))

    cases = load_corpus()
    os.makedirs(OUTDIR, exist_ok=True)
    versions_path = os.path.join(OUTDIR, "VERSIONS.txt")
    tok_lines = {}  # vocab -> line; keep the lines of vocabularies not redone
    if os.path.exists(versions_path):
        with open(versions_path, encoding="utf-8") as f:
            for line in f:
                head = line.split("/tokenizer.json", 1)[0]
                if head in VOCABS:
                    tok_lines[head] = line.rstrip("\n")
    for v in args.vocabs:
        path = os.path.join(args.tokenizers, v, "tokenizer.json")
        out = generate(v, path, cases)
        tok_lines[v] = "%s/tokenizer.json sha256 %s" % (v, sha256(path))
        print("%-12s %8d bytes  %s" % (v, os.path.getsize(out), out))
    versions = ["tokenizers %s" % tokenizers.__version__,
                "python %s" % sys.version.split()[0],
                "corpus.jsonl sha256 %s (%d cases)" % (sha256(CORPUS), len(cases))]
    versions += [tok_lines[v] for v in VOCABS if v in tok_lines]
    with open(versions_path, "w", encoding="utf-8") as f:
        f.write("\n".join(versions) + "\n")

    total = 0
    for root, _, files in os.walk(HERE):
        if "__pycache__" in root:
            continue
        total += sum(os.path.getsize(os.path.join(root, n)) for n in files)
    print("tests/text/ total: %d bytes" % total)
    if total > MAX_TOTAL_BYTES:
        sys.exit("tests/text/ is over %d bytes: shorten the long case" % MAX_TOTAL_BYTES)


if __name__ == "__main__":
    main()
