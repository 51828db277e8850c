#!/usr/bin/env python3
"""craft.py: make damaged model files for tests/e2e/test_bad_input.sh.

Standard library only (CI runs it without torch).  Each subcommand copies a
good fixture and damages one thing, so a test can check that radiance names
that one thing.

  craft.py drop-tensor SRC DST NAME       safetensors without tensor NAME
  craft.py reshape-tensor SRC DST NAME    NAME with its dimensions swapped
  craft.py set-shape SRC DST NAME D0,D1   NAME with the dimensions given (same element count)
  craft.py set-byte SRC DST NAME I V      byte I of tensor NAME's data set to V
  craft.py header-len SRC DST N           the 8-byte header length set to N
  craft.py truncate FILE N                cut FILE to N bytes
  craft.py rad-version FILE V             overwrite a .rad's version field
  craft.py rad-magic FILE                 overwrite a .rad's magic
  craft.py rad-offset FILE                move the first tensor past the data region
"""
import json
import shutil
import struct
import sys


def read_st(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    return header, blob[8 + n:]


def write_st(path, header, data):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def rebuild(header, data, drop=None):
    """Re-pack the data buffer so offsets stay contiguous after a drop."""
    out, new = bytearray(), {}
    for name, info in header.items():
        if name == "__metadata__":
            new[name] = info
            continue
        if name == drop:
            continue
        b, e = info["data_offsets"]
        start = len(out)
        out += data[b:e]
        new[name] = dict(info, data_offsets=[start, len(out)])
    return new, bytes(out)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "drop-tensor":
        src, dst, name = args
        header, data = read_st(src)
        assert name in header, name
        write_st(dst, *rebuild(header, data, drop=name))
    elif cmd == "reshape-tensor":
        src, dst, name = args
        header, data = read_st(src)
        header[name]["shape"] = list(reversed(header[name]["shape"]))
        write_st(dst, header, data)
    elif cmd == "set-shape":
        src, dst, name, dims = args
        header, data = read_st(src)
        header[name]["shape"] = [int(d) for d in dims.split(",")]
        write_st(dst, header, data)
    elif cmd == "set-byte":
        src, dst, name, i, v = args
        header, data = read_st(src)
        begin, end = header[name]["data_offsets"]
        assert 0 <= int(i) < end - begin, (name, i)
        data = bytearray(data)
        data[begin + int(i)] = int(v)
        write_st(dst, header, bytes(data))
    elif cmd == "header-len":
        src, dst, n = args
        shutil.copyfile(src, dst)
        with open(dst, "r+b") as f:
            f.write(struct.pack("<Q", int(n)))
    elif cmd == "truncate":
        path, n = args
        with open(path, "r+b") as f:
            f.truncate(int(n))
    elif cmd == "rad-version":
        path, v = args
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(struct.pack("<I", int(v)))
    elif cmd == "rad-magic":
        (path,) = args
        with open(path, "r+b") as f:
            f.write(b"NOTRADIO")
    elif cmd == "rad-offset":
        (path,) = args
        with open(path, "rb") as f:
            blob = bytearray(f.read())
        fields = struct.unpack("<8sIIQQQQQ", blob[:56])
        h_off, h_size, d_size = fields[3], fields[4], fields[6]
        header = json.loads(blob[h_off:h_off + h_size])
        header["tensors"][0]["offset"] = d_size + 4096
        text = json.dumps(header, separators=(",", ":")).encode()
        blob = blob[:h_off] + text
        struct.pack_into("<Q", blob, 24, len(text))
        struct.pack_into("<Q", blob, 48, len(blob))
        with open(path, "wb") as f:
            f.write(blob)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
