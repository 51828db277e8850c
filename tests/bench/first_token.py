#!/usr/bin/env python3
"""first_token.py: the time from `radiance run` to its first token, and how
much of it is the application's (everything but prefill and decode).

Each run starts `radiance run MODEL PROMPT -n 1 --temp 0 --jsonl` with
stdout on a pipe, notes the wall time from just before exec to the first
streamed token event, and reads the run's own prefill time from its final
"done" event:

    app_ms = (first token event - exec) - prefill_ms

which is the process start, the dynamic linker, argument parsing, the
model spec, opening the engine (reading the file, the tokenizer, plugins,
planning, weight copies) and rendering the prompt.  One warm-up run first
(the page cache, and the tokenizer cache the run fills), then --runs timed
runs; the median and the spread are printed.  Standard library only.

    python3 tests/bench/first_token.py --radiance build/radiance \\
        --model ~/.cache/radiance/models/gemma-3-270m-q4_k_m.gguf --runs 11
"""
import argparse
import json
import statistics
import subprocess
import sys
import time


def one_run(binary, model, prompt, extra):
    argv = [binary, "run", model, prompt, "-n", "1", "--temp", "0", "--jsonl"] + extra
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    first = None
    done = None
    for line in p.stdout:
        now = time.perf_counter()
        event = json.loads(line)
        if first is None and event.get("type") == "content":
            first = now
        if event.get("type") == "done":
            done = event
    end = time.perf_counter()
    p.wait()
    if p.returncode != 0 or first is None or done is None:
        sys.exit("radiance run failed (exit %d): %s" % (p.returncode, " ".join(argv)))
    t = done["timings"]
    to_first = (first - start) * 1000
    return {"to_first_ms": to_first, "prefill_ms": t["prefill_ms"], "app_ms": to_first - t["prefill_ms"],
            "load_ms": t["load_ms"], "wall_ms": (end - start) * 1000}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--radiance", default="build/radiance")
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", default="Hi")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("extra", nargs="*", help="more flags for radiance run")
    args = ap.parse_args()
    one_run(args.radiance, args.model, args.prompt, args.extra)  # warm-up
    rows = [one_run(args.radiance, args.model, args.prompt, args.extra) for _ in range(args.runs)]
    for key in ("app_ms", "to_first_ms", "prefill_ms", "load_ms"):
        v = sorted(r[key] for r in rows)
        print("%-12s median %8.1f   min %8.1f   max %8.1f" % (key, statistics.median(v), v[0], v[-1]))
    print(json.dumps({"runs": rows}))


if __name__ == "__main__":
    main()
