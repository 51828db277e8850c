#!/usr/bin/env python3
"""bench_vs_llamacpp.py: radiance and llama.cpp side by side, in one go, on
the same machine, the same GGUF files and the same thread count; the table
goes into docs/BENCHMARKS.md between the bench_vs_llamacpp marker comments.

    make all && /work/venv/bin/python tests/bench/fetch_bench_models.py
    /work/venv/bin/python tests/bench/bench_vs_llamacpp.py [--rows smollm2-q4_1,gemma3-q4_k_m]
        [--reps 5] [--rounds 1] [--threads 2] [-p 512] [-n 128] [--kernels cpu,ref] [--dry-run]

How each side is measured (the same on both, as llama-bench does it):

  pp512  one decode of 512 pseudo-random token ids (BOS first when the
         vocabulary adds one) into an empty context; only the last row's
         logits are computed.  radiance: `radiance bench -p 512`, one
         rad_engine_eval with --batch 512, so one step.  llama.cpp: one
         llama_decode of a 512-token llama_batch (n_batch = n_ubatch = 512,
         logits flag on the last token only), then llama_synchronize.
  tg128  128 single-token decodes from an empty context, each computing its
         logits.  radiance: 128 rad_engine_eval calls of one token.
         llama.cpp: 128 llama_decode calls of a prebuilt one-token batch,
         each followed by llama_synchronize, as llama-bench's test_gen.

  Both: one untimed warm-up (a 16-token prompt and one decode step) after
  loading, a fresh sequence (radiance) or a cleared KV cache (llama.cpp:
  llama_memory_clear, untimed) before each repetition, each repetition
  timed alone with a monotonic clock around the decode calls only
  (radiance: clock_gettime in C; llama.cpp: time.perf_counter around the
  ctypes calls; the batches are filled before the clock starts, no sampling,
  no logits read back).  t/s per repetition = tokens / seconds; the table
  quotes the median over all repetitions.  llama.cpp runs in a child Python
  process through llama-cpp-python's low-level API (llama_cpp.llama_decode:
  the library built from the package's own vendored sources), with
  n_threads = n_threads_batch = --threads, its default flash-attention and
  an f16 KV cache (radiance's default too).

Decode bandwidth = bytes of weights one decode step reads (every tensor but
the token embedding, which is only gathered, unless the output projection is
tied to it; `radiance bench` computes it from the file) x median tg t/s;
the same bytes serve both programs, since they read the same file.  It is
compared with the machine's read bandwidth measured by read_bandwidth.c at
the same thread count in the same run.
"""

import argparse
import ctypes
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent
CACHE = Path(os.environ.get("RADIANCE_MODELS", Path.home() / ".cache/radiance/models"))
DOC = SRC / "docs/BENCHMARKS.md"
BEGIN = "<!-- bench_vs_llamacpp:begin (tests/bench/bench_vs_llamacpp.py writes this part) -->"
END = "<!-- bench_vs_llamacpp:end -->"
WARM_ROWS = 16
LOADS = []          # 1-minute load averages seen before and after each row

# row id -> (what it is, file in the cache); fetch_bench_models.py makes them.
ROWS = {
    "smollm2-q4_1": ("SmolLM2-135M-Instruct Q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3-q4_k_m": ("Gemma 3 270M Q4_K_M", "gemma-3-270m-q4_k_m.gguf"),
    "llama1b-q4_0": ("Llama 3.2 1B geometry Q4_0 (random weights)", "llama-3.2-1b-geometry-random.Q4_0.gguf"),
    "llama1b-q8_0": ("Llama 3.2 1B geometry Q8_0 (random weights)", "llama-3.2-1b-geometry-random.Q8_0.gguf"),
    "qwen7b-q4_k_m": ("DeepSeek-R1-Distill-Qwen-7B Q4_K_M layout (random weights)",
                      "deepseek-r1-distill-qwen-7b-random.Q4_K_M.gguf"),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------- llama.cpp side

def llamacpp_worker(a):
    """Runs in a child process: load the model, time pp and tg, print JSON."""
    import random
    import time

    import llama_cpp as L

    quiet = L.llama_log_callback(lambda level, text, user: None)
    L.llama_log_set(quiet, ctypes.c_void_p(0))
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(a.model.encode(), mp)
    if not model:
        sys.exit(f"llama.cpp could not load {a.model}")
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    bos = L.llama_vocab_bos(vocab) if L.llama_vocab_get_add_bos(vocab) else -1
    rng = random.Random(0x5EED)
    ids = [bos if i == 0 and bos >= 0 else rng.randrange(n_vocab) for i in range(max(a.p, a.n, WARM_ROWS) + 1)]

    def new_context(n_ctx):
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = cp.n_ubatch = max(a.p, 1)
        cp.n_threads = cp.n_threads_batch = a.t
        cp.embeddings = False
        ctx = L.llama_init_from_model(model, cp)
        if not ctx:
            sys.exit("llama.cpp could not create a context")
        return ctx

    def make_batch(tokens, pos0, n_alloc=None):
        b = L.llama_batch_init(n_alloc or len(tokens), 0, 1)
        for i, tok in enumerate(tokens):
            b.token[i] = tok
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = i == len(tokens) - 1      # the last row's logits only
        b.n_tokens = len(tokens)
        return b

    def decode(ctx, b):
        rc = L.llama_decode(ctx, b)
        if rc != 0:
            sys.exit(f"llama_decode returned {rc}")
        L.llama_synchronize(ctx)

    def clear(ctx):
        L.llama_memory_clear(L.llama_get_memory(ctx), True)

    results = {}
    for test in ("pp", "tg"):
        n = a.p if test == "pp" else a.n
        if n == 0:
            continue
        ctx = new_context(max(n, WARM_ROWS + 1))
        warm_prompt = make_batch(ids[:min(WARM_ROWS, n)], 0)
        warm_step = make_batch([ids[min(WARM_ROWS, n)]], min(WARM_ROWS, n))
        if test == "pp":
            batches = [make_batch(ids[:n], 0)]
        else:
            batches = [make_batch([ids[i]], i) for i in range(n)]
        decode(ctx, warm_prompt)
        decode(ctx, warm_step)
        samples = []
        for _ in range(a.r):
            clear(ctx)
            t0 = time.perf_counter()
            for b in batches:
                decode(ctx, b)
            samples.append(time.perf_counter() - t0)
        results[f"{test}{n}"] = [n / s for s in samples]
        for b in batches + [warm_prompt, warm_step]:
            L.llama_batch_free(b)
        L.llama_free(ctx)
    L.llama_model_free(model)
    print(json.dumps({"ts": results}))


def run_llamacpp(model, a):
    cmd = [sys.executable, __file__, "--llamacpp-worker", str(model), "-p", str(a.p), "-n", str(a.n),
           "-r", str(a.reps), "-t", str(a.threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"llama.cpp worker failed: {r.stderr.strip()[-600:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["ts"]


def llamacpp_info():
    import llama_cpp as L
    info = L.llama_print_system_info().decode(errors="replace").strip()
    return L.__version__, info


# -------------------------------------------------------- radiance side

def run_radiance(model, a):
    cmd = [str(a.radiance), "bench", "-m", str(model), "-p", str(a.p), "-n", str(a.n), "-r", str(a.reps),
           "-t", str(a.threads), "-o", "json", "--kernels", a.kernels]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"radiance bench failed: {r.stderr.strip()[-600:]}")
    return json.loads(r.stdout)


# ------------------------------------------------------------- machine

def machine_info(threads):
    cpu = "unknown CPU"
    flags = set()
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        cpu = m.group(1).strip() if m else cpu
        m = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
        flags = set(m.group(1).split()) if m else set()
    except OSError:
        pass
    isa = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile")
           if f in flags]
    mem = ""
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f"{kb / 2**20:.0f} GiB"
    except (OSError, AttributeError):
        pass
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "isa": " ".join(isa), "memory": mem,
            "kernel": platform.release(), "threads": threads}


def build_read_bandwidth(tmp):
    """tests/bench/read_bandwidth.c built for this machine, or None."""
    exe = Path(tmp) / "read_bandwidth"
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-O3", "-march=native", "-pthread", "-o", str(exe), str(HERE / "read_bandwidth.c")],
                       capture_output=True, text=True)
    if r.returncode:
        log(f"read_bandwidth.c did not build: {r.stderr[-300:]}")
        return None
    return exe


def read_bandwidth(exe, threads):
    """The machine's read GB/s at `threads` now (best of 10 passes over 1 GiB), or None."""
    if not exe:
        return None
    out = subprocess.run([str(exe), str(threads), "1024", "10"], capture_output=True, text=True).stdout
    m = re.match(r"read_gbs ([\d.]+) ([\d.]+)", out)
    return float(m.group(1)) if m else None


def git_commit():
    try:
        head = subprocess.run(["git", "-C", str(SRC), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(SRC), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# -------------------------------------------------------------- report

def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def table(rows_out, a):
    lines = ["| model | test | radiance t/s | llama.cpp t/s | ratio | radiance kernels (ops per library) "
             "| decode GB/s: radiance / llama.cpp | machine read GB/s | of it: radiance / llama.cpp |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for row in rows_out:
        if "error" in row:
            lines.append(f"| {row['label']} | - | - | - | - | {row['error']} | - | - | - |")
            continue
        bw = row.get("read_gbs")
        for test in row["tests"]:
            rad, lcp = test["radiance"], test["llamacpp"]
            ratio = rad["median"] / lcp["median"] if rad and lcp else None
            gbs = pct = mbw = "-"
            if test["name"].startswith("tg") and rad and lcp:
                g_r, g_l = row["decode_bytes"] * rad["median"] / 1e9, row["decode_bytes"] * lcp["median"] / 1e9
                gbs = f"{g_r:.2f} / {g_l:.2f}"
                if bw:
                    mbw = f"{bw:.1f}"
                    pct = f"{100 * g_r / bw:.0f}% / {100 * g_l / bw:.0f}%"
            lines.append(f"| {row['label']} | {test['name']} | {fmt(rad and rad['median'])} ± {fmt(rad and rad['sd'])} "
                         f"| {fmt(lcp and lcp['median'])} ± {fmt(lcp and lcp['sd'])} | **{fmt(ratio)}x** "
                         f"| {test['kernels']} | {gbs} | {mbw} | {pct} |")
    return "\n".join(lines)


def summarise(samples):
    if not samples:
        return None
    return {"median": statistics.median(samples), "sd": statistics.stdev(samples) if len(samples) > 1 else 0.0,
            "n": len(samples)}


def report(rows_out, a, mach, lcp_version, lcp_sysinfo):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        BEGIN,
        "",
        f"Measured {now} by `tests/bench/bench_vs_llamacpp.py --threads {a.threads} -p {a.p} -n {a.n} "
        f"--reps {a.reps} --rounds {a.rounds} --kernels {a.kernels}`"
        + (f" (rows: {a.rows})" if a.rows else "") + ".",
        "",
        f"- machine: {mach['cpu']}, {mach['logical_cpus']} logical CPUs ({mach['isa']}), {mach['memory']}, "
        f"Linux {mach['kernel']}; both programs on {a.threads} threads, nice {os.nice(0)}",
        f"- radiance: commit {git_commit()}, kernel order `{a.kernels}`",
        f"- llama.cpp: llama-cpp-python {lcp_version} (its vendored llama.cpp, built from source on this "
        f"machine); `{lcp_sysinfo}`",
        "- machine read GB/s: tests/bench/read_bandwidth.c at the same thread count (best of 10 passes over 1 GiB), "
        "measured just before each row, since what other jobs leave of it changes from minute to minute",
        "- 1-minute load average around the rows: " + (f"{min(LOADS):.1f} to {max(LOADS):.1f}" if LOADS else "-")
        + f" on {mach['logical_cpus']} CPUs (other jobs share the machine: above {a.threads} the runs were contended)",
        f"- t/s: median ± standard deviation of {a.reps * a.rounds} repetitions per side; ratio = radiance "
        "median / llama.cpp median (above 1: radiance is faster)",
        "",
    ]
    return "\n".join(head) + "\n" + table(rows_out, a) + "\n\n" + END


def write_doc(text):
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"bench_vs_llamacpp: {DOC} lacks the marker comments:\n{BEGIN}\n{END}")
    before, rest = doc.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    DOC.write_text(before + text + after)
    log(f"wrote the table into {DOC}")


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="", help="comma-separated rows (default: all): " + ", ".join(ROWS))
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per test and side per round")
    ap.add_argument("--rounds", type=int, default=1, help="alternate the two programs this many times per row")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--kernels", default="cpu,ref", help="radiance's kernel library order")
    ap.add_argument("--radiance", default=str(SRC / "build/radiance"))
    ap.add_argument("--json-out", help="also write every sample as JSON here")
    ap.add_argument("--dry-run", action="store_true", help="print the table; leave docs/BENCHMARKS.md alone")
    ap.add_argument("--llamacpp-worker", metavar="MODEL", help=argparse.SUPPRESS)
    ap.add_argument("-r", type=int, default=5, help=argparse.SUPPRESS)
    ap.add_argument("-t", type=int, default=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.llamacpp_worker:
        a.model = a.llamacpp_worker
        return llamacpp_worker(a)

    rows = [r for r in a.rows.split(",") if r] or list(ROWS)
    for r in rows:
        if r not in ROWS:
            sys.exit(f"bench_vs_llamacpp: unknown row '{r}'; rows: {', '.join(ROWS)}")
    if not Path(a.radiance).is_file():
        sys.exit(f"bench_vs_llamacpp: {a.radiance} not found: run make all first")
    mach = machine_info(a.threads)
    lcp_version, lcp_sysinfo = llamacpp_info()
    tmp = tempfile.TemporaryDirectory()
    bw_exe = build_read_bandwidth(tmp.name)

    rows_out = []
    for r in rows:
        label, file = ROWS[r]
        path = CACHE / file
        if not path.is_file():
            rows_out.append({"id": r, "label": label, "error": f"{file} missing: run tests/bench/fetch_bench_models.py"})
            log(f"{r}: {path} missing")
            continue
        rad_ts, lcp_ts, rad_last, error = {}, {}, None, None
        LOADS.append(os.getloadavg()[0])
        bw = read_bandwidth(bw_exe, a.threads)
        log(f"{r}: machine read bandwidth, {a.threads} threads: {bw} GB/s")
        for k in range(a.rounds):
            try:
                log(f"{r}: radiance bench (round {k + 1}/{a.rounds})")
                rad_last = run_radiance(path, a)
                for t in rad_last:
                    rad_ts.setdefault(t["test"], []).extend(t["samples_ts"])
                log(f"{r}: llama.cpp (round {k + 1}/{a.rounds})")
                for name, ts in run_llamacpp(path, a).items():
                    lcp_ts.setdefault(name, []).extend(ts)
            except RuntimeError as e:
                error = str(e).splitlines()[-1][:200]
                log(f"{r}: {e}")
                break
        LOADS.append(os.getloadavg()[0])
        if error and not rad_last:
            rows_out.append({"id": r, "label": label, "error": error})
            continue
        tests = []
        for t in rad_last:
            tests.append({"name": t["test"], "kernels": t["kernels"], "radiance": summarise(rad_ts.get(t["test"])),
                          "llamacpp": summarise(lcp_ts.get(t["test"])),
                          "samples": {"radiance": rad_ts.get(t["test"]), "llamacpp": lcp_ts.get(t["test"])}})
            rs, ls = tests[-1]["radiance"], tests[-1]["llamacpp"]
            log(f"{r} {t['test']}: radiance {fmt(rs and rs['median'])} t/s, llama.cpp {fmt(ls and ls['median'])} t/s")
        rows_out.append({"id": r, "label": label, "file": file, "read_gbs": bw, "decode_bytes": rad_last[0]["decode_bytes"],
                         "tied_embedding": rad_last[0]["tied_embedding"], "tests": tests,
                         **({"error": error} if error and not tests else {})})

    text = report(rows_out, a, mach, lcp_version, lcp_sysinfo)
    print(text)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"machine": mach, "rows": rows_out}, indent=1))
    if not a.dry_run:
        write_doc(text)


if __name__ == "__main__":
    main()
