#!/usr/bin/env python3
"""bench_parallel.py: several sequences at once, radiance next to llama.cpp's
llama-batched-bench, in one go, on the same GGUF files and thread count; the
table goes into docs/BENCHMARKS.md between the bench_parallel marker comments.

    make all && /work/venv/bin/python tests/bench/fetch_bench_models.py
    /work/venv/bin/python tests/bench/bench_parallel.py --batched-bench PATH/llama-batched-bench
        [--rows smollm2-q4_1,gemma3-q4_k_m,llama1b-q4_0] [--parallel 1,4,8]
        [-p 128] [-n 128] [--reps 3] [--threads 2] [--dry-run]

What each side runs, with the same meaning (llama-batched-bench's):

  N sequences, each with its own prompt of p tokens (no shared prefix), are
  prefilled together (PP t/s = N x p tokens over the time of that prefill),
  then n steps follow in which each of the N sequences decodes one token
  (TG t/s = N x n tokens over their time).  Aggregate tokens/s over all
  sequences; from an empty cache each time.

  radiance:  `radiance bench -m FILE --parallel LIST -p P -n N -r REPS -t T
             -o json` (prefix cache off, f16 KV, prefill steps of 512 rows).
  llama.cpp: `llama-batched-bench -m FILE -npp P -ntg N -npl LIST -t T
             -c N_max x (P + N) -b 2048 -ub 512 --output-format jsonl`, its
             default flash attention and f16 KV, run REPS times (it measures
             each configuration once per run).

The tables quote medians over the repetitions and radiance / llama.cpp
ratios, and "TG vs 1": the aggregate decode rate at N sequences over the
single-sequence rate of the same program (decode is memory-bound, so
batching should pay: the same weights serve N rows).
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent
CACHE = Path(os.environ.get("RADIANCE_MODELS", Path.home() / ".cache/radiance/models"))
DOC = SRC / "docs/BENCHMARKS.md"
BEGIN, END = "<!-- bench_parallel:begin -->", "<!-- bench_parallel:end -->"

ROWS = {
    "smollm2-q4_1": ("SmolLM2-135M Q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3-q4_k_m": ("Gemma 3 270M Q4_K_M", "gemma-3-270m-q4_k_m.gguf"),
    "llama1b-q4_0": ("1B Llama geometry Q4_0", "llama-3.2-1b-geometry-random.Q4_0.gguf"),
    "llama1b-q8_0": ("1B Llama geometry Q8_0", "llama-3.2-1b-geometry-random.Q8_0.gguf"),
}


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"bench_parallel: {' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return p.stdout


def radiance_rows(path, counts, args):
    cmd = [str(SRC / "build/radiance"), "bench", "-m", str(path), "--parallel", ",".join(map(str, counts)),
           "-p", str(args.p), "-n", str(args.n), "-r", str(args.reps), "-t", str(args.threads), "-o", "json"]
    env = dict(os.environ, RADIANCE_HOME=str(SRC / "build"))
    rows = json.loads(run(cmd, env))
    return {r["n_seq"]: (r["pp_ts"], r["tg_ts"]) for r in rows}


def llamacpp_rows(path, counts, args):
    cmd = [args.batched_bench, "-m", str(path), "-npp", str(args.p), "-ntg", str(args.n),
           "-npl", ",".join(map(str, counts)), "-t", str(args.threads), "-tb", str(args.threads),
           "-c", str(max(counts) * (args.p + args.n)), "-b", "2048", "-ub", "512", "--output-format", "jsonl"]
    samples = {c: ([], []) for c in counts}
    for _ in range(args.reps):
        for line in run(cmd).splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            pp, tg = samples[r["pl"]]
            pp.append(r["speed_pp"])
            tg.append(r["speed_tg"])
    return {c: (statistics.median(pp), statistics.median(tg)) for c, (pp, tg) in samples.items()}


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def table(results, counts, args):
    out = []
    out.append(f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by "
               f"`tests/bench/bench_parallel.py --parallel {','.join(map(str, counts))} -p {args.p} -n {args.n} "
               f"--reps {args.reps} --threads {args.threads}`, on {cpu_name()} ({os.cpu_count()} logical CPUs), "
               f"load {os.getloadavg()[0]:.2f} at the start. Aggregate tokens/s, medians of {args.reps}.")
    out.append("")
    out.append("| model | sequences | PP t/s radiance | PP t/s llama.cpp | PP ratio | TG t/s radiance | "
               "TG t/s llama.cpp | TG ratio | TG vs 1, radiance | TG vs 1, llama.cpp |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, rad, cpp in results:
        for c in counts:
            rpp, rtg = rad[c]
            lpp, ltg = cpp[c]
            out.append(f"| {label} | {c} | {rpp:.1f} | {lpp:.1f} | **{rpp / lpp:.2f}x** | {rtg:.1f} | {ltg:.1f} | "
                       f"**{rtg / ltg:.2f}x** | {rtg / rad[counts[0]][1]:.2f}x | {ltg / cpp[counts[0]][1]:.2f}x |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batched-bench", required=True, help="llama.cpp's llama-batched-bench binary")
    ap.add_argument("--rows", default="smollm2-q4_1,gemma3-q4_k_m,llama1b-q4_0")
    ap.add_argument("--parallel", default="1,4,8")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dry-run", action="store_true", help="print the table, leave docs/BENCHMARKS.md alone")
    args = ap.parse_args()
    counts = [int(c) for c in args.parallel.split(",")]
    if counts[0] != 1:
        sys.exit("bench_parallel: the first count must be 1 (the single-sequence rate the gains are relative to)")
    results = []
    for key in args.rows.split(","):
        if key not in ROWS:
            sys.exit(f"bench_parallel: unknown row {key} (known: {', '.join(ROWS)})")
        label, name = ROWS[key]
        path = CACHE / name
        if not path.exists():
            sys.exit(f"bench_parallel: {path} is missing: run tests/bench/fetch_bench_models.py --only {key}")
        print(f"{label}: radiance ...", file=sys.stderr, flush=True)
        rad = radiance_rows(path, counts, args)
        print(f"{label}: llama.cpp ...", file=sys.stderr, flush=True)
        cpp = llamacpp_rows(path, counts, args)
        results.append((label, rad, cpp))
    text = table(results, counts, args)
    print(text)
    if args.dry_run:
        return
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"bench_parallel: {DOC} has no {BEGIN} ... {END} block")
    doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: f"{BEGIN}\n{text}\n{END}", doc, flags=re.S)
    DOC.write_text(doc)
    print(f"wrote {DOC}", file=sys.stderr)


if __name__ == "__main__":
    main()
