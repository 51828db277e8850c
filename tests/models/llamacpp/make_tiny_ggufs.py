"""make_tiny_ggufs.py: tiny GGUF files made by llama.cpp's own converter.

Run by hand, never by CI (needs torch, transformers, sentencepiece, which the
converter imports even for BPE tokenizers, and llama.cpp's sources):

    /work/venv/bin/python tests/models/llamacpp/make_tiny_ggufs.py [--llama-cpp DIR]

Checkpoints of tests/golden/fixtures are converted; --only NAME... makes just
those outputs (NAME as in CASES, e.g. olmoe-tiny).

Llama 3 with llama3 RoPE scaling (llama3_scaled: 4 layers, hidden 64, factor
8 over an original context of 64, tied embeddings, vocab 1024) becomes
llama3-scaled-tiny-f32.gguf.  The converter writes the scaling the way every
Llama 3.1+ GGUF carries it: no scaling keys, and a tensor rope_freqs.weight
of per-pair divisors.  tests/golden/test_golden.c runs it against the
checkpoint's HF logits.  It gets the same borrowed tokenizer as below (only
its ids matter: the test feeds ids).

Qwen2-MoE (qwen2moe: 2 layers, 8 experts, 3 per token, a gated shared
expert of 32, vocab 1024, lm_head untied as llama.cpp's qwen2moe requires)
becomes qwen2moe-tiny-f32.gguf
(llama.cpp's qwen2moe: stacked ffn_*_exps, ffn_*_shexp, ffn_gate_inp_shexp);
tests/golden/test_golden.c runs it against the checkpoint's HF logits and
tests/models/test_llamacpp.c against llama.cpp's recording (record.py), with
the same borrowed tokenizer.

There is no small real Qwen2/2.5 GGUF in the package registry, so this
converts the tiny random checkpoint tests/golden/fixtures/qwen2
(Qwen2ForCausalLM: 3 layers, hidden 64, 4 heads / 2 KV heads, q/k/v biases,
tied embeddings, vocab 1100) with llama.cpp's convert_hf_to_gguf.py, once as
f32 and once as q8_0, into this folder:

    qwen2-tiny-f32.gguf    qwen2-tiny-q8_0.gguf

The checkpoint has no tokenizer; the converter needs one.  It gets a copy of
the 1024-id byte-level BPE of tests/golden/fixtures/qwen3 (trained by
tests/golden/make_tokenizer.py with Qwen2's pre-tokenizer regex and ChatML
special tokens 0..2).  Its ids all lie below the checkpoint's 1100, so the
converter pads the vocabulary itself with unused tokens "[PAD1024]" ..
"[PAD1099]" (token type 5), as it does for every real Qwen checkpoint whose
embedding is larger than its tokenizer.

One thing is patched: the converter names the pre-tokenizer by hashing the
token ids of a fixed string, and a retrained vocabulary gives a hash it does
not know.  The tokenizer's split regex is exactly Qwen2's, so
get_vocab_base_pre is made to answer "qwen2" (what it answers for real Qwen2
tokenizers).  Everything else (tensor names and layout, metadata, q8_0
quantization) is the converter's own.  The converter's warning "Unknown RoPE
type: default" is harmless (no rope scaling is written).  The output is
deterministic: see the sha256 sums in README.md.

The mixture-of-experts fixtures (issue 14) are converted the same way, each
as f32 and q8_0 unless said:

    qwen3moe_all_sparse -> qwen3moe-tiny-{f32,q8_0}.gguf     (arch qwen3moe)
    olmoe_mha           -> olmoe-tiny-{f32,q8_0}.gguf        (arch olmoe)
    mixtral             -> mixtral-tiny-{f32,q8_0}.gguf      (arch llama, 8 experts)
    gpt_oss             -> gpt-oss-tiny-f32.gguf             (arch gpt-oss)
    gpt_oss_mxfp4       -> gpt-oss-mxfp4-tiny-auto.gguf      (MXFP4 experts as the
                           checkpoint stores them, f16 embedding and output)

GLM-4.5 (glm4moe: 3 layers, layer 0 dense, 8 experts, 2 per token in the
best 2 of 4 groups, a correction bias, an ungated shared expert of 32,
partial rotary, q/k/v biases and q/k norms, one MTP layer, vocab 1024)
becomes glm4moe-tiny-{f32,q8_0}.gguf (llama.cpp's glm4moe: block_count 4 with
glm4moe.nextn_predict_layers 1, the MTP layer as blk.3.* with
blk.3.nextn.*), and GLM-4.5-Air's form (glm4moe_air: no q/k norms, one
expert group, vocab 512 with the tokenizer cut) glm4moe-air-tiny-f32.gguf.  A second patch: the converter's GLM vocabulary
(_set_vocab_glm) looks up GLM's own special tokens ([gMASK], <|user|>,
<|endoftext|>, <|observation|>) in the tokenizer, which the borrowed one has
not, so Glm4MoeModel.set_vocab is made the plain byte-level BPE path
(_set_vocab_gpt2) every other fixture here takes.

llama.cpp's converter refuses two of the golden MoE fixtures as they are:
qwen3moe has a dense layer (mlp_only_layers), which llama.cpp's qwen3moe
cannot hold, and olmoe has GQA and clip_qkv, which llama.cpp's olmoe does
not know; qwen3moe_all_sparse and olmoe_mha are the same families in the
forms it runs.  Their embeddings have 500 or 512 rows, fewer than the
borrowed tokenizer's 1024 ids, so each gets the tokenizer cut to its rows
(truncated_tokenizer).  In the q8_0 files the expert down stacks stay f16:
their rows are 16 long, under q8_0's block of 32, and the converter falls
back for them, as it says.  Two things the files lose that the checkpoints
have, both llama.cpp's choices: Mixtral's sliding window (no key is
written, llama.cpp's llama runs full attention) and gpt-oss's
swiglu_limit (llama.cpp fixes it at 7; the fixture's is 2).

DIR is a llama.cpp source tree (the vendor/llama.cpp folder of
llama-cpp-python's sdist).  Without --llama-cpp the script downloads the
pinned sdist with pip into ~/.cache/radiance/llama-cpp-python-src and unpacks
it there.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "golden", "fixtures")
LLAMA_CPP_PYTHON = "0.3.36"  # vendors ggml-org/llama.cpp@0c1e57098bba43ac29e6e3b677cdceebdd22334f
OUTTYPES = ("f32", "q8_0")


def fetch_sources():
    """Download and unpack the pinned llama-cpp-python sdist; return its llama.cpp folder."""
    cache = os.path.join(os.path.expanduser("~"), ".cache", "radiance", "llama-cpp-python-src")
    top = os.path.join(cache, "llama_cpp_python-" + LLAMA_CPP_PYTHON)
    src = os.path.join(top, "vendor", "llama.cpp")
    if os.path.isfile(os.path.join(src, "convert_hf_to_gguf.py")):
        return src
    os.makedirs(cache, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                    "-d", cache, "llama-cpp-python==" + LLAMA_CPP_PYTHON], check=True)
    with tarfile.open(os.path.join(cache, "llama_cpp_python-%s.tar.gz" % LLAMA_CPP_PYTHON)) as t:
        t.extractall(cache, filter="data")
    return src


def truncated_tokenizer(tok, n_vocab):
    """The borrowed BPE cut to its first n_vocab ids, for a checkpoint whose
    embedding is smaller than the 1024-id tokenizer (the MoE fixtures have
    500 or 512 rows).  The tokenizer was trained, so merge i made id 259 + i
    (3 special tokens and 256 bytes come first): keeping the ids below
    n_vocab and the merges whose result is kept gives a smaller tokenizer
    that encodes with the same rules and never names a missing row."""
    model = tok["model"]
    keep = {s: i for s, i in model["vocab"].items() if i < n_vocab}
    merges = []
    for m in model["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a + b in keep and a in keep and b in keep:
            merges.append(m)
    assert len(merges) == n_vocab - 259, "merges out of id order: %d kept" % len(merges)
    model["vocab"] = keep
    model["merges"] = merges
    tok["added_tokens"] = [t for t in tok["added_tokens"] if t["id"] < n_vocab]
    return tok


def model_dir(tmp, fixture, name):
    """The checkpoint plus the fixture tokenizer, in a folder named like the model."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    src = os.path.join(FIXTURES, fixture)
    for f in os.listdir(src):
        if f.endswith((".json", ".safetensors")) and f not in ("meta.json",):
            shutil.copy(os.path.join(src, f), d)
    shutil.copy(os.path.join(FIXTURES, "qwen3", "tokenizer_config.json"), d)
    with open(os.path.join(FIXTURES, "qwen3", "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
        n_vocab = json.load(f)["vocab_size"]
    if n_vocab < len(tok["model"]["vocab"]):
        tok = truncated_tokenizer(tok, n_vocab)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    return d


# (fixture, output name, outtypes).  The MoE fixtures (issue 14): "auto"
# keeps the checkpoint's own types, which for gpt_oss_mxfp4 means the
# experts stay MXFP4 (the converter repacks the blocks; everything else
# is f32).
CASES = (("qwen2", "qwen2-tiny", OUTTYPES), ("llama3_scaled", "llama3-scaled-tiny", ("f32",)),
         ("qwen3moe_all_sparse", "qwen3moe-tiny", OUTTYPES), ("olmoe_mha", "olmoe-tiny", OUTTYPES),
         ("mixtral", "mixtral-tiny", OUTTYPES), ("gpt_oss", "gpt-oss-tiny", ("f32",)),
         ("gpt_oss_mxfp4", "gpt-oss-mxfp4-tiny", ("auto",)), ("qwen2moe", "qwen2moe-tiny", ("f32",)),
         ("glm4moe", "glm4moe-tiny", OUTTYPES), ("glm4moe_air", "glm4moe-air-tiny", ("f32",)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", help="llama.cpp source tree holding convert_hf_to_gguf.py")
    ap.add_argument("--out", default=HERE, help="output folder (default: this folder)")
    ap.add_argument("--only", nargs="*", help="output names to make (default: all)")
    args = ap.parse_args()
    src = os.path.abspath(args.llama_cpp or fetch_sources())

    sys.path.insert(0, src)
    sys.path.insert(1, os.path.join(src, "gguf-py"))  # the converter's own gguf-py, not an installed one
    import conversion.base as base  # noqa: E402  (llama.cpp's conversion package)

    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
    import conversion.glm as glm  # noqa: E402
    glm.Glm4MoeModel.set_vocab = base.TextModel._set_vocab_gpt2   # the borrowed BPE has no GLM specials
    import convert_hf_to_gguf  # noqa: E402

    with tempfile.TemporaryDirectory() as tmp:
        for fixture, name, outtypes in CASES:
            if args.only and name not in args.only:
                continue
            d = model_dir(tmp, fixture, name)
            for t in outtypes:
                out = os.path.join(os.path.abspath(args.out), "%s-%s.gguf" % (name, t))
                sys.argv = ["convert_hf_to_gguf.py", "--outtype", t, "--outfile", out, d]
                convert_hf_to_gguf.main()
                print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
