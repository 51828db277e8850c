"""make_tiny_ggufs.py: tiny GGUF files made by llama.cpp's own converter.

Run by hand, never by CI (needs torch, transformers, sentencepiece, which the
converter imports even for BPE tokenizers, and llama.cpp's sources):

    /work/venv/bin/python tests/models/llamacpp/make_tiny_ggufs.py [--llama-cpp DIR]

Three checkpoints of tests/golden/fixtures are converted.

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

DIR is a llama.cpp source tree (the vendor/llama.cpp folder of
llama-cpp-python's sdist).  Without --llama-cpp the script downloads the
pinned sdist with pip into ~/.cache/radiance/llama-cpp-python-src and unpacks
it there.
"""
import argparse
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


def model_dir(tmp, fixture, name):
    """The checkpoint plus the fixture tokenizer, in a folder named like the model."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    src = os.path.join(FIXTURES, fixture)
    for f in os.listdir(src):
        if f.endswith((".json", ".safetensors")) and f not in ("meta.json",):
            shutil.copy(os.path.join(src, f), d)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(FIXTURES, "qwen3", f), d)
    return d


# (fixture, output name, outtypes)
CASES = (("qwen2", "qwen2-tiny", OUTTYPES), ("llama3_scaled", "llama3-scaled-tiny", ("f32",)),
         ("qwen2moe", "qwen2moe-tiny", ("f32",)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", help="llama.cpp source tree holding convert_hf_to_gguf.py")
    ap.add_argument("--out", default=HERE, help="output folder (default: this folder)")
    args = ap.parse_args()
    src = os.path.abspath(args.llama_cpp or fetch_sources())

    sys.path.insert(0, src)
    sys.path.insert(1, os.path.join(src, "gguf-py"))  # the converter's own gguf-py, not an installed one
    import conversion.base as base  # noqa: E402  (llama.cpp's conversion package)

    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
    import convert_hf_to_gguf  # noqa: E402

    with tempfile.TemporaryDirectory() as tmp:
        for fixture, name, outtypes in CASES:
            d = model_dir(tmp, fixture, name)
            for t in outtypes:
                out = os.path.join(os.path.abspath(args.out), "%s-%s.gguf" % (name, t))
                sys.argv = ["convert_hf_to_gguf.py", "--outtype", t, "--outfile", out, d]
                convert_hf_to_gguf.main()
                print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
