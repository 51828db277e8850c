#!/usr/bin/env python3
"""Write the seed inputs for the fuzz targets in tests/fuzz/ (stdlib only).

    python3 tests/fuzz/make_seeds.py

writes tests/fuzz/seeds/gguf/*.gguf and tests/fuzz/seeds/safetensors/*.
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
