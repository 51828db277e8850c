#!/usr/bin/env python3
"""Write tests/ops/encoding_vectors.h: GGUF blocks and the f32 values they mean.

Run by hand when the vectors should change, never by the tests:

    /work/venv/bin/python tests/ops/make_encoding_vectors.py > tests/ops/encoding_vectors.h

The oracle is gguf-py's numpy code (gguf.quants), written independently of
ours from ggml's C.  For the encodings gguf-py can quantize (q4_0, q4_1,
q5_0, q5_1, q8_0, mxfp4) a vector is a row of source floats, the blocks
gguf-py makes of it, and the values gguf-py decodes from those blocks; the
C tests check that our decoder gives those values bit for bit and that our
quantizer gives those bytes.  For the others (the k-quants, iq4_nl, and the
float formats) a vector is hand-shaped bytes (every code at its extremes,
zero and negative scales, the largest and a subnormal f16) plus seeded
random bytes, with the values gguf-py decodes.  Scale fields are always
finite f16s, so every expected value is a number, except mxfp4's e = 255
block, which overflows to infinity in ggml too (the vector says so).
"""
import importlib.metadata
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import quants

rng = np.random.default_rng(20240607)

BLOCK = {t: gguf.GGML_QUANT_SIZES[t] for t in T}

# Our encoding ids are ggml's (base/rad_types.h).
ENC_NAME = {
    T.F32: "RAD_ENC_F32", T.F16: "RAD_ENC_F16", T.BF16: "RAD_ENC_BF16",
    T.Q4_0: "RAD_ENC_Q4_0", T.Q4_1: "RAD_ENC_Q4_1", T.Q5_0: "RAD_ENC_Q5_0",
    T.Q5_1: "RAD_ENC_Q5_1", T.Q8_0: "RAD_ENC_Q8_0", T.Q2_K: "RAD_ENC_Q2_K",
    T.Q3_K: "RAD_ENC_Q3_K", T.Q4_K: "RAD_ENC_Q4_K", T.Q5_K: "RAD_ENC_Q5_K",
    T.Q6_K: "RAD_ENC_Q6_K", T.IQ4_NL: "RAD_ENC_IQ4_NL", T.MXFP4: "RAD_ENC_MXFP4",
}

vectors = []   # (qtype, label, blocks: uint8[], values: float32[], source: float32[] | None)


def f16(x):
    """The little-endian bytes of x as an f16."""
    return np.array([x], dtype=np.float16).view(np.uint8)


def add_quantized(qtype, label, source):
    src = np.asarray(source, dtype=np.float32)
    blocks = quants.quantize(src.reshape(1, -1), qtype).reshape(-1)
    values = quants.dequantize(blocks.reshape(1, -1), qtype).reshape(-1).astype(np.float32)
    vectors.append((qtype, label, blocks, values, src))


def add_bytes(qtype, label, blocks):
    blocks = np.asarray(blocks, dtype=np.uint8).reshape(-1)
    n_el, n_by = BLOCK[qtype]
    assert blocks.size % n_by == 0
    if qtype == T.F16:
        values = blocks.view(np.float16).astype(np.float32)
    elif qtype == T.F32:
        values = blocks.view(np.float32)
    else:
        values = quants.dequantize(blocks.reshape(1, -1), qtype).reshape(-1)
    values = np.asarray(values, dtype=np.float32).reshape(-1)
    assert values.size == blocks.size // n_by * n_el
    vectors.append((qtype, label, blocks, values, None))


# ------------------------------------------------ quantized from source rows

def extremes32(nmax_tie):
    """Four 32-element blocks that pin the quantizers' choices."""
    b = []
    # 1: the largest magnitude comes first and is negative; exact ties at
    # code boundaries for a scale of 1 / -1; zeros.
    x = np.zeros(32, dtype=np.float32)
    x[0] = -nmax_tie
    x[1:9] = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 7.5, -7.5]
    x[9] = nmax_tie            # same magnitude as x[0], later: x[0] decides the sign
    x[10:20] = np.arange(-5, 5)
    b.append(x)
    # 2: all equal (d from max - min is 0 for the offset formats).
    b.append(np.full(32, 3.25, dtype=np.float32))
    # 3: all zero.
    b.append(np.zeros(32, dtype=np.float32))
    # 4: one large value among small ones, and a near-tie.
    x = rng.normal(0, 0.01, 32).astype(np.float32)
    x[17] = 1000.0
    x[3] = -999.9
    b.append(x)
    return np.concatenate(b)


def random32(n_blocks, scale):
    return (rng.normal(0, 1, 32 * n_blocks) * scale).astype(np.float32)


for qt, tie in ((T.Q4_0, 8), (T.Q4_1, 15), (T.Q5_0, 16), (T.Q5_1, 31), (T.Q8_0, 127),
                (T.MXFP4, 6)):
    add_quantized(qt, "extremes", extremes32(tie))
    add_quantized(qt, "random", np.concatenate([random32(1, 0.02), random32(1, 1.0),
                                                random32(1, 300.0),
                                                (0.1 + 2 * np.cos(np.arange(32) + 1.0))
                                                .astype(np.float32)]))


# ------------------------------------------------------ hand-shaped blocks

D_CHOICES = [0x3c00, 0xbc00, 0x7bff, 0x0001, 0x0000, 0x2e66, 0xb4cd, 0x1400]


def half_bits(bits):
    return np.array([bits & 0xff, bits >> 8], dtype=np.uint8)


def rand_bytes(n):
    return rng.integers(0, 256, n, dtype=np.uint8)


def kblock(qtype, fill, d_bits, dmin_bits=None):
    """One block of qtype with every non-scale-factor byte `fill` (an int,
    or "random"), and the f16 factors given as bit patterns."""
    n_by = BLOCK[qtype][1]
    if isinstance(fill, str):
        blk = rand_bytes(n_by)
    else:
        blk = np.full(n_by, fill, dtype=np.uint8)
    # Where the f16 factors sit (formats.md 1.6).
    if qtype == T.Q2_K:
        blk[80:82] = half_bits(d_bits)
        blk[82:84] = half_bits(dmin_bits)
    elif qtype == T.Q3_K:
        blk[108:110] = half_bits(d_bits)
    elif qtype in (T.Q4_K, T.Q5_K):
        blk[0:2] = half_bits(d_bits)
        blk[2:4] = half_bits(dmin_bits)
    elif qtype == T.Q6_K:
        blk[208:210] = half_bits(d_bits)
    elif qtype == T.IQ4_NL:
        blk[0:2] = half_bits(d_bits)
    return blk


def hb(x):
    return int(f16(np.float32(x)).view(np.uint16)[0])


for qt in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K):
    # every code and scale at its top, with the largest f16 d; then every
    # byte zero with a negative d and a subnormal dmin.
    ext = np.concatenate([kblock(qt, 0xff, 0x7bff, 0x3c00), kblock(qt, 0x00, 0xbc00, 0x0001)])
    add_bytes(qt, "extremes", ext)
    add_bytes(qt, "random", kblock(qt, "random", hb(rng.normal(0, 0.05)), hb(rng.normal(0, 0.05))))

blocks = [kblock(T.IQ4_NL, 0xff, 0x7bff), kblock(T.IQ4_NL, 0x00, 0xbc00)]
for d in D_CHOICES:
    blocks.append(kblock(T.IQ4_NL, "random", d))
add_bytes(T.IQ4_NL, "extremes and random", np.concatenate(blocks))

# mxfp4: every exponent class (the two subnormal scales, 2^-127 .. 2^126),
# codes covering the whole table; e = 254 and 255 alone, where codes of
# magnitude 12 (and at 255 all of 2 and more) overflow, in ggml too.
blocks = []
for e in (0, 1, 2, 127, 128, 200, 250):
    blocks.append(np.concatenate([[e], rand_bytes(16)]).astype(np.uint8))
blocks.append(np.concatenate([[128], np.arange(16, dtype=np.uint8) * 0x11]).astype(np.uint8))
add_bytes(T.MXFP4, "every scale class", np.concatenate(blocks))
with np.errstate(over="ignore"):
    add_bytes(T.MXFP4, "e = 254 and 255 overflow",
              np.concatenate([[254], np.arange(16, dtype=np.uint8) | 0x80,
                              [255], np.arange(16, dtype=np.uint8) | 0x80]).astype(np.uint8))

# float formats: specials and a few random values
h = np.array([0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xc000, 0x7bff, 0xfbff, 0x7c00,
              0xfc00, 0x7e00, 0x3555, 0x1234], dtype=np.uint16)
add_bytes(T.F16, "specials", np.concatenate([h, rng.integers(0, 0x7c00, 2, dtype=np.uint16)])
          .astype(np.uint16).view(np.uint8))
b = np.array([0x0000, 0x8000, 0x0001, 0x3f80, 0xc040, 0x4049, 0x7f7f, 0xff7f, 0x7f80, 0xff80,
              0x7fc0, 0x0080, 0x007f, 0x3eaa], dtype=np.uint16)
add_bytes(T.BF16, "specials", b.view(np.uint8))
f = np.array([0.0, -0.0, 1.0, -2.5, 3.4028235e38, 1e-45, np.inf, -np.inf], dtype=np.float32)
add_bytes(T.F32, "specials", f.view(np.uint8))


# ------------------------------------------------------------------ output

def c_float(v):
    """An exact C literal for the f32 v: a hex float without trailing zeros."""
    if not np.isfinite(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    mant, exp = float(v).hex().split("p")
    mant = mant.rstrip("0").rstrip(".")
    return mant + "p" + exp + "f"


def c_floats(a):
    return ", ".join(c_float(v) for v in a)


def wrap(items, per_line):
    lines = []
    for i in range(0, len(items), per_line):
        lines.append("    " + ", ".join(items[i:i + per_line]) + ",")
    return "\n".join(lines)


out = []
w = out.append
w("/*")
w("** encoding_vectors.h: GGUF blocks and the f32 values they decode to.")
w("**")
w("** GENERATED by tests/ops/make_encoding_vectors.py with gguf-py %s (gguf.quants)"
  % importlib.metadata.version("gguf"))
w("** as the oracle; do not edit.")
w("** Values are f32 bit patterns, compared bit for bit.  `source`, when set,")
w("** is the row gguf-py quantized into `blocks`.")
w("*/")
w("#ifndef ENCODING_VECTORS_H")
w("#define ENCODING_VECTORS_H")
w("")
w("#include <math.h>")
w("#include <stdint.h>")
w("")
w("typedef struct EncodingVector {")
w("    int enc;                      /* RadEncoding (= ggml type id) */")
w("    const char *label;")
w("    int n;                        /* elements */")
w("    int n_bytes;                  /* bytes of blocks */")
w("    int finite;                   /* 1 when every value is finite */")
w("    const unsigned char *blocks;  /* the encoded row */")
w("    const uint32_t *values;       /* n f32 bit patterns */")
w("    const float *source;          /* n floats gguf-py quantized, or NULL */")
w("} EncodingVector;")
w("")
table = []
for i, (qt, label, blocks, values, src) in enumerate(vectors):
    name = "ev%d" % i
    w("/* %s, %s */" % (qt.name.lower(), label))
    w("static const unsigned char %s_blocks[] = {" % name)
    w(wrap(["0x%02x" % v for v in blocks], 16))
    w("};")
    w("static const uint32_t %s_values[] = {" % name)
    w(wrap(["0x%08x" % v for v in values.view(np.uint32)], 8))
    w("};")
    if src is not None:
        w("static const float %s_source[] = {" % name)
        w(wrap(c_floats(src).split(", "), 6))
        w("};")
    finite = int(np.all(np.isfinite(values)))
    table.append('    {%s, "%s %s", %d, %d, %d, %s_blocks, %s_values, %s},' % (
        ENC_NAME[qt], qt.name.lower(), label, values.size, blocks.size, finite, name, name,
        name + "_source" if src is not None else "NULL"))
    w("")
w("static const EncodingVector encoding_vectors[] = {")
out.extend(table)
w("};")
w("")
w("#define N_ENCODING_VECTORS ((int)(sizeof encoding_vectors / sizeof encoding_vectors[0]))")
w("")
w("#endif /* ENCODING_VECTORS_H */")
sys.stdout.write("\n".join(out) + "\n")
