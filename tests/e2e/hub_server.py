#!/usr/bin/env python3
"""hub_server.py: a fake Hugging Face Hub on 127.0.0.1 for tests/e2e/test_hub.sh.

Python 3 standard library only.  Two HTTP servers on free ports:

  hub  the API and the resolve URLs:
         GET  /api/models/ORG/NAME/revision/REV       {"id", "sha", "siblings"}
         GET  /api/models/ORG/NAME/tree/REV?recursive=true[&cursor=N]
                                                      two items a page, Link: <...>; rel="next"
         HEAD/GET /ORG/NAME/resolve/REV/PATH          small files: 200 (Range honoured),
                                                      ETag = git blob sha1, X-Repo-Commit;
                                                      LFS files: 302 to the cdn, X-Linked-Etag =
                                                      sha256, X-Linked-Size
  cdn  GET /cdn/SHA256?sig=...                        the LFS bytes (Range honoured)

The repositories (built at start-up from tests/golden/fixtures, hashes
computed then):

  test/tiny-llama   the llama fixture: config.json, generation_config.json,
                    model.safetensors (LFS), tokenizer.json when the fixture
                    has one, plus README.md, .gitattributes and onnx/ that a
                    client must not need
  test/sharded      the llama3_scaled fixture: four LFS shards and an index
  test/gated        tiny-llama behind a gate: 401 GatedRepo without the token
  test/private      tiny-llama, private: 401 RepoNotFound without the token
  test/escape       a listing naming ../../escape.txt
  test/absolute     a listing naming /tmp/absolute.txt
  test/evil-link    a listing whose next page is on another host
  test/qwen2-gguf   real GGUF files from tests/models/llamacpp: the tiny Qwen2
                    at q8_0 (qwen2-tiny-Q8_0.gguf), the f32 one split in two
                    (qwen2-tiny-F32-0000N-of-00002.gguf, cut here as gguf-split
                    cuts), an mmproj file and a README a client must not take
  test/many-gguf    a listing of GGUF names only (contents never fetched): no
                    Q4_K_M or Q8_0, and the same quant in two folders
  Qwen/Qwen3-0.6B-GGUF  the tiny Qwen2 under the file name the shipped alias
                    qwen3:0.6b-gguf picks, so the alias is tested end to end
  test/evil-names   the tiny Qwen2 under a file name holding C1 controls and a
                    bidirectional override (tests/e2e/test_output.sh)
  test/wide-llama   a llama checkpoint generated here (bf16, 8 layers, rows
                    of 256 and 512): wide enough for the k-quants, so a
                    Q4_K_M recipe has every choice to make
  anything else     404 RepoNotFound

Failures on purpose come from the control file (JSON, re-read on every
request; counters restart whenever its content changes):

  {"drop": N, "drop_after": B}   cut the next N file bodies longer than B after B bytes
  {"ignore_range": N}            answer the next N Range requests with 200
  {"corrupt": ["model.safetensors"]}  flip one byte of these files
  {"status": [[SUBSTRING, CODE, N]]}  answer CODE to the next N requests whose
                                 path holds SUBSTRING
  {"rate": BYTES_PER_SECOND}     throttle file bodies

Every request is appended to the log as one JSON line: server, method,
path, headers (lower-case names), status, bytes of body sent.  The server
exits by itself after --lifetime seconds.
"""

import argparse
import hashlib
import json
import os
import random
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_THRESHOLD = 64 * 1024
PAGE = 2
GOOD_TOKEN = "hf_testtokenthatopensthegate0123456789"


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, rid, files, gate=None, listing_extra=(), evil_link=False):
        self.id = rid
        self.files = {}          # path -> bytes
        self.meta = {}           # path -> listing item
        self.gate = gate         # None, "gated" or "private"
        self.evil_link = evil_link
        for path, data in files.items():
            self.add(path, data)
        for path in listing_extra:
            self.add(path, b"you should not have this\n")
        names = "\n".join(f"{p} {self.meta[p]['oid']}" for p in sorted(self.meta))
        self.commit = hashlib.sha1((rid + "\n" + names).encode()).hexdigest()

    def add(self, path, data):
        self.files[path] = data
        item = {"type": "file", "path": path, "size": len(data)}
        if len(data) >= LFS_THRESHOLD:
            sha = hashlib.sha256(data).hexdigest()
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n".encode()
            item["oid"] = git_sha1(pointer)
            item["lfs"] = {"oid": sha, "size": len(data), "pointerSize": len(pointer)}
        else:
            item["oid"] = git_sha1(data)
        self.meta[path] = item

    def listing(self):
        items, dirs = [], set()
        for path in sorted(self.meta):
            parts = path.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in dirs and not d.startswith("..") and d:
                    dirs.add(d)
                    items.append({"type": "directory", "path": d, "oid": "0" * 40, "size": 0})
            items.append(self.meta[path])
        return items


def load_dir(path, names=None):
    out = {}
    for name in sorted(os.listdir(path)):
        if names is not None and name not in names:
            continue
        full = os.path.join(path, name)
        if os.path.isfile(full):
            out[name] = open(full, "rb").read()
    return out


# A file name a hostile repository may choose: C1 controls (CSI, OSC, ST)
# and a right-to-left override, all of which a listing may hold (C0 bytes
# are refused as paths).
EVIL_NAME = "m\u009b31m\u009d0;C1TITLE\u009c\u202eevil-Q8_0.gguf"


def build_repos(fixtures, gguf_dir):
    wanted = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
              "tokenizer_config.json", "model.safetensors.index.json"}
    llama = load_dir(os.path.join(fixtures, "llama"), wanted)
    extras = {"README.md": b"# tiny llama\nrandom weights for tests\n",
              ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
              "onnx/model.onnx": os.urandom(70000)}
    sharded = load_dir(os.path.join(fixtures, "llama3_scaled"))
    sharded = {k: v for k, v in sharded.items()
               if k.endswith(".safetensors") or k in ("config.json", "generation_config.json",
                                                      "model.safetensors.index.json")}
    q8 = open(os.path.join(gguf_dir, "qwen2-tiny-q8_0.gguf"), "rb").read()
    f32_parts = split_gguf(open(os.path.join(gguf_dir, "qwen2-tiny-f32.gguf"), "rb").read(), 2)
    gguf = {"qwen2-tiny-Q8_0.gguf": q8,
            "qwen2-tiny-F32-00001-of-00002.gguf": f32_parts[0],
            "qwen2-tiny-F32-00002-of-00002.gguf": f32_parts[1],
            "mmproj-qwen2-tiny-Q8_0.gguf": b"GGUF not a model\n",
            "README.md": b"# gguf\n"}
    many = {"m-Q2_K.gguf": b"GGUF", "m-Q3_K_S.gguf": b"GGUF", "a/m-Q5_K_M.gguf": b"GGUF",
            "b/m-Q5_K_M.gguf": b"GGUF", "m-IQ4_XS.gguf": b"GGUF"}
    repos = [
        Repo("test/tiny-llama", {**llama, **extras}),
        Repo("test/sharded", sharded),
        Repo("test/gated", llama, gate="gated"),
        Repo("test/private", llama, gate="private"),
        Repo("test/escape", {"config.json": llama["config.json"]}, listing_extra=["../../escape.txt"]),
        Repo("test/absolute", {"config.json": llama["config.json"]}, listing_extra=["/tmp/absolute.txt"]),
        Repo("test/evil-link", llama, evil_link=True),
        Repo("test/qwen2-gguf", gguf),
        Repo("test/many-gguf", many),
        Repo("Qwen/Qwen3-0.6B-GGUF", {"Qwen3-0.6B-Q8_0.gguf": q8}),
        Repo("test/evil-names", {EVIL_NAME: q8}),
        Repo("test/wide-llama", wide_llama()),
    ]
    return {r.id: r for r in repos}


# ------------------------------------------------------------ GGUF splitting

def _gguf_read_value(buf, pos, vtype):
    """Skip one metadata value of type vtype at pos; return the position after it."""
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    if vtype in fixed:
        return pos + fixed[vtype]
    if vtype == 8:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if vtype == 9:
        etype, n = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        for _ in range(n):
            pos = _gguf_read_value(buf, pos, etype)
        return pos
    raise ValueError("GGUF value type %d" % vtype)


def _gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def split_gguf(buf, n_parts):
    """Cut a GGUF v3 file into n_parts the way llama.cpp's gguf-split does:
    the first part keeps all the metadata, every part gets split.no,
    split.count and split.tensors.count, the tensors are shared out in
    order, each part packed and aligned on its own."""
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF" and version == 3
    pos, kvs, align = 24, [], 32
    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + klen].decode()
        (vtype,) = struct.unpack_from("<I", buf, pos + 8 + klen)
        end = _gguf_read_value(buf, pos + 12 + klen, vtype)
        if key == "general.alignment":
            (align,) = struct.unpack_from("<I", buf, pos + 12 + klen)
        kvs.append(buf[pos:end])
        pos = end
    infos = []
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", buf, pos)
        name = buf[pos + 8:pos + 8 + nlen]
        (ndims,) = struct.unpack_from("<I", buf, pos + 8 + nlen)
        dims = struct.unpack_from("<%dQ" % ndims, buf, pos + 12 + nlen)
        ttype, off = struct.unpack_from("<IQ", buf, pos + 12 + nlen + 8 * ndims)
        infos.append([name, ndims, dims, ttype, off])
        pos += 12 + nlen + 8 * ndims + 12
    data_start = pos + (-pos % align)
    sizes = [infos[i + 1][4] - infos[i][4] for i in range(n_tensors - 1)]
    last = len(buf) - data_start - infos[-1][4]
    sizes.append(last + (-last % align))
    per = (n_tensors + n_parts - 1) // n_parts
    parts = []
    for p in range(n_parts):
        chunk = list(range(p * per, min(n_tensors, (p + 1) * per)))
        split_kv = [_gguf_str("split.no") + struct.pack("<IH", 2, p),
                    _gguf_str("split.count") + struct.pack("<IH", 2, n_parts),
                    _gguf_str("split.tensors.count") + struct.pack("<Ii", 5, n_tensors)]
        meta = (kvs if p == 0 else []) + split_kv
        out = bytearray(struct.pack("<4sIQQ", b"GGUF", 3, len(chunk), len(meta)))
        for kv in meta:
            out += kv
        off = 0
        for i in chunk:
            name, ndims, dims, ttype, _ = infos[i]
            out += struct.pack("<Q", len(name)) + name + struct.pack("<I", ndims)
            out += struct.pack("<%dQ" % ndims, *dims) + struct.pack("<IQ", ttype, off)
            off += sizes[i]
        out += bytes(-len(out) % align)
        for i in chunk:
            start = data_start + infos[i][4]
            piece = buf[start:start + sizes[i]]
            out += piece + bytes(sizes[i] - len(piece))
        parts.append(bytes(out))
    return parts


# --------------------------------------------- a checkpoint wide enough for k-quants

def wide_llama(seed=7):
    """A LlamaForCausalLM in bf16 with every matrix row a multiple of 256:
    hidden 256, 4 heads of 64, 2 KV heads, feed-forward 512, vocabulary 512,
    8 layers, untied head.  Weights are random with magnitudes 2^-7..2^-4
    (the high byte of each bf16 is forced into that exponent range), norms
    are 1."""
    rnd = random.Random(seed)
    E, F, V, L, KV = 256, 512, 512, 8, 128
    shapes = [("model.embed_tokens.weight", [V, E])]
    for l in range(L):
        p = "model.layers.%d." % l
        shapes += [(p + "input_layernorm.weight", [E]), (p + "post_attention_layernorm.weight", [E]),
                   (p + "self_attn.q_proj.weight", [E, E]), (p + "self_attn.k_proj.weight", [KV, E]),
                   (p + "self_attn.v_proj.weight", [KV, E]), (p + "self_attn.o_proj.weight", [E, E]),
                   (p + "mlp.gate_proj.weight", [F, E]), (p + "mlp.up_proj.weight", [F, E]),
                   (p + "mlp.down_proj.weight", [E, F])]
    shapes += [("model.norm.weight", [E]), ("lm_head.weight", [V, E])]
    squash = bytes([(0x3C, 0x3D, 0xBC, 0xBD)[b & 3] for b in range(256)])
    header, blobs, at = {}, [], 0
    for name, shape in shapes:
        n = 1
        for d in shape:
            n *= d
        if len(shape) == 1:
            data = b"\x80\x3f" * n                       # bf16 1.0
        else:
            data = bytearray(rnd.randbytes(2 * n))
            data[1::2] = bytes(data[1::2]).translate(squash)
            data = bytes(data)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": E,
              "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": V, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "max_position_embeddings": 256, "tie_word_embeddings": False, "hidden_act": "silu",
              "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2}
    return {"config.json": json.dumps(config, indent=1).encode(),
            "model.safetensors": struct.pack("<Q", len(text)) + text + b"".join(blobs)}


class State:
    def __init__(self, args):
        self.args = args
        self.repos = build_repos(args.fixtures, args.gguf)
        self.by_sha = {}
        for r in self.repos.values():
            for path, item in r.meta.items():
                if "lfs" in item:
                    self.by_sha[item["lfs"]["oid"]] = (r, path)
        self.lock = threading.Lock()
        self.control_text = None
        self.control = {}
        self.ports = {}

    def refresh(self):
        """Re-read the control file; counters restart when it changed."""
        try:
            text = open(self.args.control).read()
        except OSError:
            text = ""
        with self.lock:
            if text != self.control_text:
                self.control_text = text
                try:
                    self.control = json.loads(text) if text.strip() else {}
                except ValueError:
                    self.control = {}

    def take(self, key):
        """Use one of the count-limited failures; True when one was left."""
        with self.lock:
            n = self.control.get(key, 0)
            if n > 0:
                self.control[key] = n - 1
                return True
            return False

    def take_status(self, path):
        with self.lock:
            for rule in self.control.get("status", []):
                if rule[0] in path and rule[2] > 0:
                    rule[2] -= 1
                    return rule[1]
        return None

    def log(self, record):
        with self.lock:
            with open(self.args.log, "a") as f:
                f.write(json.dumps(record) + "\n")


def make_handler(state, server_name):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        # ---------------------------------------------------------- plumbing

        def record(self, status, sent):
            state.log({"t": time.time(), "server": server_name, "method": self.command, "path": self.path,
                       "headers": {k.lower(): v for k, v in self.headers.items()}, "status": status,
                       "sent": sent})

        def reply(self, status, body=b"", headers=None, error_code=None):
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if error_code:
                self.send_header("X-Error-Code", error_code)
                self.send_header("X-Error-Message", error_code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            sent = 0
            if self.command != "HEAD":
                self.wfile.write(body)
                sent = len(body)
            self.record(status, sent)

        def json_reply(self, obj, headers=None):
            self.reply(200, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})

        def send_file(self, data, headers, name):
            """The bytes of a file, honouring Range and the failure switches."""
            if name in state.control.get("corrupt", []):
                mid = len(data) // 2
                data = data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:]
            start, status = 0, 200
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes=") and not state.take("ignore_range"):
                first = rng[6:].split("-")[0]
                start = int(first) if first else 0
                if start >= len(data):
                    self.reply(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                    return
                status = 206
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            body = data[start:]
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "HEAD":
                self.record(status, 0)
                return
            cut = len(body)
            drop_after = state.control.get("drop_after")
            if drop_after is not None and len(body) > int(drop_after) and state.take("drop"):
                cut = int(drop_after)
            rate = state.control.get("rate")
            sent = 0
            try:
                while sent < cut:
                    chunk = body[sent:min(cut, sent + 16384)]
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    sent += len(chunk)
                    if rate:
                        time.sleep(len(chunk) / float(rate))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                self.record(status, sent)
                return
            if cut < len(body):
                # Drop the connection halfway: the client sees a short body.
                self.close_connection = True
                try:
                    self.wfile.flush()
                    self.connection.shutdown(2)
                except OSError:
                    pass
            self.record(status, sent)

        # ---------------------------------------------------------- the hub

        def repo_or_refuse(self, rid):
            repo = state.repos.get(rid)
            if repo is None:
                self.reply(404, b'{"error":"Repository not found"}', error_code="RepoNotFound")
                return None
            auth = self.headers.get("Authorization", "")
            if repo.gate and auth != "Bearer " + GOOD_TOKEN:
                if repo.gate == "gated":
                    code = 401 if not auth else 403
                    self.reply(code, b'{"error":"Access to this model is restricted"}', error_code="GatedRepo")
                else:
                    self.reply(401, b'{"error":"Repository not found"}', error_code="RepoNotFound")
                return None
            return repo

        def revision_ok(self, repo, rev):
            if rev in ("main", "v1", repo.commit):
                return True
            self.reply(404, b'{"error":"Invalid rev id"}', error_code="RevisionNotFound")
            return False

        def hub_get(self):
            url = urllib.parse.urlsplit(self.path)
            parts = url.path.split("/")
            query = urllib.parse.parse_qs(url.query)
            code = state.take_status(url.path)
            if code:
                self.reply(code, b'{"error":"injected"}', {"Retry-After": "0"})
                return
            # /api/models/ORG/NAME/(revision|tree)/REV
            if len(parts) >= 7 and parts[1] == "api" and parts[2] == "models":
                repo = self.repo_or_refuse(parts[3] + "/" + parts[4])
                if repo is None:
                    return
                rev = urllib.parse.unquote("/".join(parts[6:]))
                if not self.revision_ok(repo, rev):
                    return
                if parts[5] == "revision":
                    self.json_reply({"id": repo.id, "sha": repo.commit,
                                     "siblings": [{"rfilename": p} for p in sorted(repo.meta)]})
                    return
                if parts[5] == "tree":
                    items = repo.listing()
                    cursor = int(query.get("cursor", ["0"])[0])
                    page = items[cursor:cursor + PAGE]
                    headers = {}
                    if cursor + PAGE < len(items):
                        port = state.ports["cdn"] if repo.evil_link else state.ports["hub"]
                        nxt = (f"http://127.0.0.1:{port}/api/models/{repo.id}/tree/"
                               f"{urllib.parse.quote(rev, safe='')}?recursive=true&cursor={cursor + PAGE}")
                        headers["Link"] = f'<{nxt}>; rel="next"'
                    self.json_reply(page, headers)
                    return
            # /ORG/NAME/resolve/REV/PATH
            if len(parts) >= 6 and parts[3] == "resolve":
                repo = self.repo_or_refuse(parts[1] + "/" + parts[2])
                if repo is None:
                    return
                rev = urllib.parse.unquote(parts[4])
                if not self.revision_ok(repo, rev):
                    return
                path = urllib.parse.unquote("/".join(parts[5:]))
                item = repo.meta.get(path)
                if item is None:
                    self.reply(404, b'{"error":"Entry not found"}', error_code="EntryNotFound")
                    return
                headers = {"X-Repo-Commit": repo.commit}
                if "lfs" in item:
                    sha = item["lfs"]["oid"]
                    headers.update({"X-Linked-Etag": f'"{sha}"', "X-Linked-Size": str(item["size"]),
                                    "ETag": f'"{item["oid"]}"',
                                    "Location": f"http://127.0.0.1:{state.ports['cdn']}/cdn/{sha}?sig=abc"})
                    self.reply(302, b"", headers)
                    return
                headers["ETag"] = f'"{item["oid"]}"'
                self.send_file(repo.files[path], headers, path)
                return
            self.reply(404, b'{"error":"no such route"}')

        def cdn_get(self):
            url = urllib.parse.urlsplit(self.path)
            code = state.take_status("cdn")
            if code:
                self.reply(code, b"injected", {"Retry-After": "0"})
                return
            sha = url.path.rsplit("/", 1)[-1]
            found = state.by_sha.get(sha)
            if not url.path.startswith("/cdn/") or found is None:
                self.reply(404, b"no such object")
                return
            repo, path = found
            self.send_file(repo.files[path], {"ETag": '"cdn-etag"'}, path)

        def do_GET(self):
            state.refresh()
            try:
                (self.hub_get if server_name == "hub" else self.cdn_get)()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_HEAD = do_GET

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--gguf", help="the GGUF fixtures (default: FIXTURES/../../models/llamacpp)")
    ap.add_argument("--dir", required=True, help="writes ports, commits.json here")
    ap.add_argument("--log", required=True)
    ap.add_argument("--control", required=True)
    ap.add_argument("--lifetime", type=float, default=180)
    args = ap.parse_args()
    if not args.gguf:
        args.gguf = os.path.join(args.fixtures, "..", "..", "models", "llamacpp")
    state = State(args)
    servers = {}
    for name in ("hub", "cdn"):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state, name))
        srv.daemon_threads = True
        servers[name] = srv
        state.ports[name] = srv.server_address[1]
    for srv in servers.values():
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    with open(os.path.join(args.dir, "commits.json"), "w") as f:
        json.dump({rid: r.commit for rid, r in state.repos.items()}, f)
    with open(os.path.join(args.dir, "token"), "w") as f:
        f.write(GOOD_TOKEN)
    tmp = os.path.join(args.dir, "ports.tmp")
    with open(tmp, "w") as f:
        f.write(f"{state.ports['hub']} {state.ports['cdn']}\n")
    os.rename(tmp, os.path.join(args.dir, "ports"))
    time.sleep(args.lifetime)      # bounded: the server always stops by itself
    os._exit(0)


if __name__ == "__main__":
    main()
