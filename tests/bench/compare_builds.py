#!/usr/bin/env python3
"""compare_builds.py: two builds of radiance on the same files, alternated, to
tell a change's effect on speed from the machine's noise.

    git worktree add --detach /tmp/old COMMIT && make -C /tmp/old all
    /work/venv/bin/python tests/bench/compare_builds.py /tmp/old/build build \
        [--rows smollm2-q4_1,gemma3-q4_k_m,llama1b-q4_0] [--rounds 3] [--reps 3] [-p 512] [-n 128]

Each round runs `radiance bench -p P -n N -r REPS -t T -o json` of the old
build, then of the new, on every row, so both see the same load as nearly as
a shared machine allows. It prints per row the median pp and tg t/s of each
build over all repetitions of all rounds, the new/old ratio, and the spread
of the old build's own rounds (max/min of their medians): a ratio inside
that spread is noise, not a change.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("RADIANCE_MODELS", Path.home() / ".cache/radiance/models"))
ROWS = {
    "smollm2-q4_1": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3-q4_k_m": "gemma-3-270m-q4_k_m.gguf",
    "llama1b-q4_0": "llama-3.2-1b-geometry-random.Q4_0.gguf",
    "llama1b-q8_0": "llama-3.2-1b-geometry-random.Q8_0.gguf",
    "qwen7b-q4_k_m": "DeepSeek-R1-Distill-Qwen-7B-layout-random.Q4_K_M.gguf",
}


def bench(build, path, args):
    cmd = [str(Path(build) / "radiance"), "bench", "-m", str(path), "-p", str(args.p), "-n", str(args.n),
           "-r", str(args.reps), "-t", str(args.threads), "-o", "json"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, RADIANCE_HOME=str(build)))
    if p.returncode != 0:
        sys.exit(f"compare_builds: {' '.join(cmd)} failed:\n{p.stderr[-1500:]}")
    out = {}
    for r in json.loads(p.stdout):
        key = "pp" if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0 else "tg"
        out[key] = r["samples_ts"] if "samples_ts" in r else [r["ts_median"]]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rows", default="smollm2-q4_1,gemma3-q4_k_m,llama1b-q4_0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    args = ap.parse_args()
    builds = [Path(args.old).resolve(), Path(args.new).resolve()]
    rows = args.rows.split(",")
    samples = {(row, b, t): [] for row in rows for b in (0, 1) for t in ("pp", "tg")}
    rounds = {(row, t): [] for row in rows for t in ("pp", "tg")}
    for rnd in range(args.rounds):
        for row in rows:
            path = CACHE / ROWS[row]
            if not path.exists():
                sys.exit(f"compare_builds: {path} is missing (tests/bench/fetch_bench_models.py --only {row})")
            for b in (0, 1):
                print(f"round {rnd + 1}: {row}: {'old' if b == 0 else 'new'}", file=sys.stderr, flush=True)
                res = bench(builds[b], path, args)
                for t in ("pp", "tg"):
                    samples[(row, b, t)] += res[t]
                    if b == 0:
                        rounds[(row, t)].append(statistics.median(res[t]))
    print(f"old: {builds[0]}\nnew: {builds[1]}\n")
    print(f"| model | test | old t/s | new t/s | new / old | old's own spread (max/min of {args.rounds} rounds) |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        for t, name in (("pp", f"pp{args.p}"), ("tg", f"tg{args.n}")):
            o = statistics.median(samples[(row, 0, t)])
            n = statistics.median(samples[(row, 1, t)])
            spread = max(rounds[(row, t)]) / min(rounds[(row, t)])
            print(f"| {row} | {name} | {o:.2f} | {n:.2f} | {n / o:.3f} | {spread:.3f} |")


if __name__ == "__main__":
    main()
