#!/usr/bin/env python3
"""Write the seed inputs for the fuzz targets in tests/fuzz/ (stdlib only).

    python3 tests/fuzz/make_seeds.py

writes tests/fuzz/seeds/{gguf,safetensors,rad,config}/*.
Each seed is a small valid file that reaches deep into its parser: every GGUF
value type, nested arrays, alignment 64, a byte-level and a SentencePiece
tokenizer; safetensors files with several dtypes.  The fuzzer mutates from
there.  Deterministic: running it again writes the same bytes.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
       U64: "<Q", I64: "<q", F64: "<d"}
BLOCK = {0: (1, 4), 1: (1, 2), 8: (32, 34), 12: (256, 144), 30: (1, 2)}


def gstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(FMT[t], v)


def gguf(kvs, tensors, version=3, align=32):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + value(t, v)
    off, sizes = 0, []
    for name, typ, ne in tensors:
        n = 1
        for d in ne:
            n *= d
        blk, byt = BLOCK[typ]
        size = n // blk * byt
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", typ, off)
        sizes.append(size)
        off = (off + size + align - 1) // align * align
    if tensors:
        out += b"\0" * (-len(out) % align)
    for i, size in enumerate(sizes):
        out += bytes((j * 7 + i) & 0xFF for j in range(size))
        if i + 1 < len(sizes):
            out += b"\0" * (-size % align)
    return out


def write(sub, name, data):
    d = os.path.join(HERE, "seeds", sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


every_type = [
    ("general.architecture", STR, "llama"), ("a.u8", U8, 7), ("a.i8", I8, -7), ("a.u16", U16, 700),
    ("a.i16", I16, -700), ("a.u32", U32, 70000), ("a.i32", I32, -70000), ("a.f32", F32, 0.5),
    ("a.bool", BOOL, 1), ("a.u64", U64, 1 << 40), ("a.i64", I64, -(1 << 40)), ("a.f64", F64, 0.25),
    ("a.strs", ARR, (STR, ["x", "", "yz"])), ("a.ints", ARR, (I32, [1, -2, 3])),
    ("a.nested", ARR, (ARR, [(U8, [1, 2]), (U8, [])])),
]
write("gguf", "every_type.gguf", gguf(every_type, [("tok_embd.weight", 0, [3, 2]), ("blk.0.w", 8, [64, 2])]))
write("gguf", "align64_v2.gguf", gguf([("general.alignment", U32, 64)],
                                      [("a", 0, [5]), ("b", 1, [3]), ("c", 30, [2, 2, 2])], version=2, align=64))
write("gguf", "split_first.gguf", gguf([("split.no", U16, 0), ("split.count", U16, 1),
                                        ("split.tensors.count", I32, 1)], [("a", 12, [256])]))

bpe = ["<|endoftext|>", "a", "b", "ab", "\u0120", "\u0120a", "<tool>", "1"]
write("gguf", "tok_gpt2.gguf", gguf([
    ("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, "llama-bpe"),
    ("tokenizer.ggml.tokens", ARR, (STR, bpe)), ("tokenizer.ggml.token_type", ARR, (I32, [3, 1, 1, 1, 1, 1, 4, 1])),
    ("tokenizer.ggml.merges", ARR, (STR, ["a b", "\u0120 a"])), ("tokenizer.ggml.bos_token_id", U32, 0),
    ("tokenizer.ggml.eos_token_id", U32, 0), ("tokenizer.chat_template", STR, "{{ x }}"),
], []))
spm = ["<unk>", "<s>", "</s>", "<0x41>", "\u2581", "a", "b", "ab", "\u2581a", "\u2581ab", "ba", "<u>"]
write("gguf", "tok_spm.gguf", gguf([
    ("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, spm)),
    ("tokenizer.ggml.token_type", ARR, (I32, [2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 4])),
    ("tokenizer.ggml.scores", ARR, (F32, [0, 0, 0, 0, -1, -2, -3, -4, -5, -6, -4, 0])),
    ("tokenizer.ggml.add_space_prefix", BOOL, 1), ("tokenizer.ggml.add_bos_token", BOOL, 1),
], []))


def safetensors(tensors, meta=None):
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, nbytes in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + nbytes]}
        data += bytes((len(data) + j) & 0xFF for j in range(nbytes))
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


write("safetensors", "two.safetensors", safetensors(
    [("w", "BF16", [2, 3], 12), ("b", "F32", [4], 16)], {"format": "pt"}))
write("safetensors", "mixed.safetensors", safetensors(
    [("s", "I64", [], 8), ("z", "F16", [0, 5], 0), ("e", "F8_E4M3", [3], 3), ("f", "F4", [2, 3], 3)]))


def rad(meta, tensors, blobs):
    """A .rad container (formats/rad_container.c's layout): the preamble's
    page, the data region (tensors of a group contiguous, each group and blob
    on a 4096-byte boundary), then the JSON header."""
    data, entries, blob_entries, group = b"", [], [], None
    for name, enc, shape, group_id, nbytes in tensors:
        if group_id != group or len(data) % 64:
            data += b"\0" * (-len(data) % (4096 if group_id != group else 64))
        group = group_id
        entries.append({"name": name, "enc": enc, "shape": shape, "group": group_id,
                        "offset": len(data), "size": nbytes})
        data += bytes((len(data) + j) & 0x7F for j in range(nbytes))
    for name, payload in blobs:
        data += b"\0" * (-len(data) % 4096)
        blob_entries.append({"name": name, "offset": len(data), "size": len(payload)})
        data += payload
    data += b"\0" * (-len(data) % 4096)
    typed = {k: ({"i": v} if isinstance(v, int) else {"f": v} if isinstance(v, float) else {"s": v})
             for k, v in meta.items()}
    header = json.dumps({"meta": typed, "tensors": entries, "blobs": blob_entries},
                        separators=(",", ":")).encode()
    pre = b"RADMODEL" + struct.pack("<IIQQQQQ", 1, 0, 4096 + len(data), len(header), 4096, len(data),
                                    4096 + len(data) + len(header))
    pre += b"\0" * (4096 - len(pre))
    return pre + data + header


tiny_meta = {"arch.id": "llama", "arch.quant": "f32", "model.name": "tiny", "model.n_layers": 2,
             "model.n_embd": 8, "model.n_head": 2, "model.n_head_kv": 1, "model.head_dim": 4,
             "model.n_ff": 16, "model.n_vocab": 4, "model.n_ctx_train": 64, "model.rms_eps": 1e-5,
             "model.rope_theta": 10000.0, "rope_scaling.factor": 2.0}
write("rad", "tiny.rad", rad(tiny_meta, [
    ("token_embd.weight", "f32", [4, 8], -1, 128), ("blk.0.attn_q.weight", "f32", [8, 8], 0, 256),
    ("blk.0.attn_norm.weight", "f16", [8], 0, 16), ("blk.1.attn_q.weight", "q8_0", [8, 32], 1, 272),
], [("tokenizer_config.json", b'{"chat_template": "{{ x }}"}')]))
write("rad", "empty.rad", rad({"arch.id": "llama", "arch.quant": "f32"}, [], []))

# config.json: the shapes the converter meets (nested text_config, rope
# parameters, arrays, nulls).
write("config", "llama.json", json.dumps({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 160,
    "vocab_size": 1024, "max_position_embeddings": 512, "rms_norm_eps": 1e-05, "pad_token_id": None,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "llama3", "factor": 8.0,
                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192},
    "tie_word_embeddings": False}, indent=1).encode())
write("config", "gemma3.json", json.dumps({
    "architectures": ["Gemma3ForConditionalGeneration"],
    "text_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                    "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 1000, "rope_theta": 1e6,
                    "rope_local_base_freq": 1e4, "sliding_window": 8,
                    "layer_types": ["sliding_attention", "full_attention"],
                    "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
    "eos_token_id": [1, 106]}).encode())
