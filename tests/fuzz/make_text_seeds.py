#!/usr/bin/env python3
"""Write the seed inputs of the text fuzz targets from real files.

    python3 tests/fuzz/make_text_seeds.py [SHARED]

tokenizer_blob: each reference tokenizer.json (SHARED/tokenizers/*, default
../shared beside the repository) cut down to its first 400 tokens, the merges
among them and up to 8 added tokens (ids moved to follow), every pipeline
component kept as it is; then imported and stored by radiance itself
(tests/fuzz/blob_seed.c, built against build/libradcore.a: run `make`
first), so each seed is the tokenizer.bin a real model's .rad would carry,
only smaller (a few KB).

reply: the replies of tests/text/test_reply_parser.c (the markup each model
writes), byte 0 the format's index in fuzz_reply.c's list, byte 1 the
in-reasoning flag.  Deterministic: running it again writes the same bytes.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "..", "shared")
KEEP = 400
LIBS = "-ljansson -lpcre2-8 -lutf8proc -lcurl -lsqlite3 -lcrypto -lzstd -lreadline -lncursesw -lmd4c -lpthread -ldl -lm"


def cut_down(tok):
    model = tok["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < KEEP}
    remap = {}
    added = []
    for a in tok.get("added_tokens") or []:
        if len(added) == 8:
            break
        new = a["id"] if a["id"] < KEEP else KEEP + len(remap)
        if a["id"] >= KEEP:
            remap[a["id"]] = new
        added.append(dict(a, id=new))
        if a["content"] in model["vocab"]:
            vocab[a["content"]] = new
    merges = []
    for m in model["merges"]:
        left, right = m.split(" ", 1) if isinstance(m, str) else m
        if left in vocab and right in vocab and left + right in vocab:
            merges.append(m)
    model = dict(model, vocab=vocab, merges=merges)
    out = dict(tok, model=model, added_tokens=added)
    pp = json.dumps(tok.get("post_processor"))
    for old, new in remap.items():
        pp = pp.replace("[%d]" % old, "[%d]" % new)
    out["post_processor"] = json.loads(pp)
    return out


def blobs():
    out_dir = os.path.join(HERE, "seeds", "tokenizer_blob")
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        helper = os.path.join(work, "blob_seed")
        subprocess.check_call(
            "cc -O1 -std=c11 -D_GNU_SOURCE -I%s/base -I%s/formats -o %s %s/blob_seed.c "
            "-Wl,--whole-archive %s/build/libradcore.a -Wl,--no-whole-archive %s"
            % (SRC, SRC, helper, HERE, SRC, LIBS), shell=True)
        for name in sorted(os.listdir(os.path.join(SHARED, "tokenizers"))):
            path = os.path.join(SHARED, "tokenizers", name, "tokenizer.json")
            small = os.path.join(work, name + ".json")
            with open(path, encoding="utf-8") as f:
                json.dump(cut_down(json.load(f)), open(small, "w", encoding="utf-8"), ensure_ascii=False)
            r = subprocess.run([helper, small, os.path.join(out_dir, name + ".bin")])
            print("%s: %s" % (name, "ok" if r.returncode == 0 else "refused"))


def replies():
    # (format index in fuzz_reply.c, in_reasoning, reply)
    cases = [
        (3, 0, b"<think>\nThe user greets.\n</think>\n\nHello! <tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call><|im_end|>"),
        (2, 0, b"Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>"),
        (5, 0, b"<|python_tag|>{\"name\": \"f\", \"parameters\": {}}<|eom_id|>"),
        (10, 0, b"Hi there \xc3\xa9\xe4\xb8\xad<end_of_turn>"),
        (7, 0, b" Hi there! [INST] stays text.</s>"),
        (8, 0, b"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]</s>"),
        (11, 0, b"<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.get <|constrain|>json<|message|>{\"a\": 1}<|call|>"),
        (11, 0, b"<|channel|>final<|message|>Done.<|return|>"),
        (13, 1, b"\nonly thoughts\n</think>\n\nAnswer.<\xef\xbd\x9cend\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"),
        (12, 0, b"<\xef\xbd\x9ctool\xe2\x96\x81calls\xe2\x96\x81begin\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81call\xe2\x96\x81begin\xef\xbd\x9c>function<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>get\n```json\n{}\n```<\xef\xbd\x9ctool\xe2\x96\x81call\xe2\x96\x81end\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81calls\xe2\x96\x81end\xef\xbd\x9c>"),
    ]
    out_dir = os.path.join(HERE, "seeds", "reply")
    os.makedirs(out_dir, exist_ok=True)
    for i, (fmt, in_reasoning, text) in enumerate(cases):
        data = bytes([fmt, in_reasoning]) + text
        with open(os.path.join(out_dir, "reply%02d.bin" % i), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    blobs()
    replies()
