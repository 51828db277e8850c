#!/usr/bin/env python3
"""gguf_edit.py: copy a GGUF file with metadata keys set, for the e2e tests.

Standard library only (CI runs it without the gguf package).  The tensor
data is copied as it is; only the key/value section changes, and the data
region is re-aligned after it (tensor offsets are relative to that region,
so they stay valid).

  gguf_edit.py SRC DST KEY=TYPE:VALUE ...

TYPE is str, bytes, bpe, repeat (N:TEXT, TEXT N times), f32, u32, i32 or
bool.  A key that exists is replaced, a new one appended.  VALUE may use
Python escapes (\\x1b, \\a, \\r, \\u009b) so a test can plant control
characters in a string.  KEY[N] sets element N of an array
(tokenizer.ggml.tokens[733]=bpe:...), KEY[N]=drop removes it (N always
counts in the array as it was), and N at or past the end appends (so a
test can lengthen tokenizer.ggml.tokens and token_type together).  "bpe" is
VALUE's UTF-8 bytes spelled in byte-level BPE's alphabet (GPT-2's byte to
character table), so the token decodes to exactly those bytes.
tensor:NAME=NEW renames tensor NAME to NEW (Python escapes too), so a test
can plant control characters in a tensor name.  experts=N gives every
expert stack (*_exps.*, f32 or f16, experts its last dimension) and router
(ffn_gate_inp) N experts, the file's own cycled, and sets ARCH.expert_count
to N: the data region is laid out again.
"""
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, blob):
        self.b, self.at = blob, 0

    def take(self, n):
        s = self.b[self.at:self.at + n]
        self.at += n
        return s

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u64())

    def value(self, t):
        """The raw bytes of one value of type t."""
        start = self.at
        if t == 8:
            self.string()
        elif t == 9:
            et, n = self.u32(), self.u64()
            for _ in range(n):
                self.value(et)
        else:
            self.take(SIZES[t])
        return self.b[start:self.at]


def byte_level(data):
    """GPT-2's table: printable bytes stand for themselves, the others for
    U+0100 onwards in byte order."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return "".join(table[b] for b in data)


def encode(kind, text):
    if kind == "bpe":
        chars = text.encode("latin-1", "backslashreplace").decode("unicode_escape")
        s = byte_level(chars.encode("utf-8")).encode("utf-8")
        return 8, struct.pack("<Q", len(s)) + s
    if kind in ("str", "bytes"):
        # \xNN, \uNNNN, \a ... as Python reads them; "str" writes the code
        # points as UTF-8, "bytes" writes \xNN as the raw byte NN
        chars = text.encode("latin-1", "backslashreplace").decode("unicode_escape")
        s = chars.encode("utf-8") if kind == "str" else chars.encode("latin-1")
        return 8, struct.pack("<Q", len(s)) + s
    if kind == "repeat":
        # N:TEXT, TEXT repeated N times (a long string without a long argv)
        n, piece = text.split(":", 1)
        s = piece.encode("utf-8") * int(n)
        return 8, struct.pack("<Q", len(s)) + s
    if kind == "f32":
        return 6, struct.pack("<f", float(text))
    if kind == "u32":
        return 4, struct.pack("<I", int(text))
    if kind == "i32":
        return 5, struct.pack("<i", int(text))
    if kind == "bool":
        return 7, struct.pack("<B", 1 if text in ("1", "true") else 0)
    raise SystemExit(f"unknown type {kind}")


def set_elements(t, raw, changes):
    """raw (an array of strings or of numbers) with elements replaced,
    dropped or appended: changes maps an index of the array as it was to
    the new value's (type, raw bytes), or to None to drop that element; an
    index at or past the end appends, in index order, with no gap."""
    r = Reader(raw)
    et, n = r.u32(), r.u64()
    if t != 9:
        raise SystemExit("not an array")
    items = [r.value(et) for _ in range(n)]
    for i in sorted(changes):
        v = changes[i]
        if v is not None and v[0] != et:
            raise SystemExit(f"element {i}: type {v[0]}, the array holds type {et}")
        if i < n:
            items[i] = v and v[1]
        elif i == len(items) and v is not None:
            items.append(v[1])
        else:
            raise SystemExit(f"element {i} is past the end of an array of {len(items)}")
    items = [x for x in items if x is not None]
    return struct.pack("<IQ", et, len(items)) + b"".join(items)


def set_experts(kvs, tensors, data, n, alignment):
    """Tile each expert stack and router to n experts; returns the new data."""
    arch = next(raw for key, t, raw in kvs if key == b"general.architecture")
    arch = arch[8:]                                   # a string value: u64 length, bytes
    count_key = arch + b".expert_count"
    old = None
    for kv in kvs:
        if kv[0] == count_key:
            old = struct.unpack("<I", kv[2])[0]
            kv[2] = struct.pack("<I", n)
    assert old, "no expert_count"
    infos = []
    for t in tensors:
        n_dims = struct.unpack("<I", t[1][:4])[0]
        dims = list(struct.unpack("<%dQ" % n_dims, t[1][4:4 + 8 * n_dims]))
        ttype, offset = struct.unpack("<IQ", t[1][4 + 8 * n_dims:])
        infos.append([t, dims, ttype, offset])
    ends = sorted(i[3] for i in infos) + [len(data)]
    out = bytearray()
    for info in sorted(infos, key=lambda i: i[3]):
        t, dims, ttype, offset = info
        size = ends[ends.index(offset) + 1] - offset
        body = data[offset:offset + size]
        name = t[0].decode()
        if ("_exps." in name or "ffn_gate_inp" in name) and dims[-1] == old:
            assert ttype in (0, 1), name + ": only f32 and f16 stacks can be tiled"
            per = 4 if ttype == 0 else 2
            for d in dims[:-1]:
                per *= d
            experts = [body[e * per:(e + 1) * per] for e in range(old)]
            body = b"".join(experts[e % old] for e in range(n))
            dims[-1] = n
        out += b"\0" * (-len(out) % alignment)
        at = len(out)
        out += body
        t[1] = struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<IQ", ttype, at)
    return bytes(out)


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
    blob = open(src, "rb").read()
    r = Reader(blob)
    magic, version = r.take(4), r.u32()
    assert magic == b"GGUF", "not a GGUF file"
    n_tensors, n_kv = r.u64(), r.u64()
    kvs, alignment = [], 32
    for _ in range(n_kv):
        key = r.string()
        t = r.u32()
        raw = r.value(t)
        kvs.append([key, t, raw])
        if key == b"general.alignment":
            alignment = struct.unpack("<I", raw)[0]
    tensors = []            # [name, the rest of its info] in file order
    for _ in range(n_tensors):
        name = r.string()
        at = r.at
        n_dims = r.u32()
        r.take(8 * n_dims + 4 + 8)
        tensors.append([name, blob[at:r.at]])
    data_start = (r.at + alignment - 1) // alignment * alignment
    data = blob[data_start:]
    arrays = {}
    for e in edits:
        key, spec = e.split("=", 1)
        if key == "experts":
            data = set_experts(kvs, tensors, data, int(spec), alignment)
            continue
        if key.startswith("tensor:"):
            old_name = key[len("tensor:"):].encode()
            new_name = spec.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("utf-8")
            for t in tensors:
                if t[0] == old_name:
                    t[0] = new_name
                    break
            else:
                raise SystemExit(f"no tensor {old_name.decode()}")
            continue
        if key.endswith("]") and "[" in key:
            key, index = key[:-1].split("[")
            raw = None if spec == "drop" else encode(*spec.split(":", 1))
            arrays.setdefault(key.encode(), {})[int(index)] = raw
            continue
        kind, value = spec.split(":", 1)
        t, raw = encode(kind, value)
        for kv in kvs:
            if kv[0] == key.encode():
                kv[1], kv[2] = t, raw
                break
        else:
            kvs.append([key.encode(), t, raw])
    for key, changes in arrays.items():
        for kv in kvs:
            if kv[0] == key:
                kv[2] = set_elements(kv[1], kv[2], changes)
                break
        else:
            raise SystemExit(f"no array {key.decode()}")
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, n_tensors, len(kvs)))
    for key, t, raw in kvs:
        out += struct.pack("<Q", len(key)) + key + struct.pack("<I", t) + raw
    for name, rest in tensors:
        out += struct.pack("<Q", len(name)) + name + rest
    out += b"\0" * (-len(out) % alignment)
    out += data
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
