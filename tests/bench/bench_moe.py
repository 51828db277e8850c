#!/usr/bin/env python3
"""bench_moe.py: mixture-of-experts models in memory, radiance and llama.cpp
side by side on the same GGUF file and thread count; the table goes into
docs/BENCHMARKS.md between the bench_moe marker comments.

    make all build/tests/bench/moe_routing
    /work/venv/bin/python tests/bench/fetch_bench_models.py --only olmoe-q4_k_m[,qwen3moe-q4_k_m]
    /work/bin/quiet /work/venv/bin/python tests/bench/bench_moe.py --rows olmoe-q4_k_m
        [--reps 3] [--threads 2] [-p 512] [-n 128] [--llama-bench PATH] [--dry-run]

Each row (one model) in one go:

  1. the machine's read bandwidth at the thread count (tests/bench/read_bandwidth.c,
     best of 10 passes over 1 GiB), just before the row;
  2. `radiance bench -m FILE -p P -n N -r R -t T -o json` (docs/BENCHMARKS.md,
     "Model throughput": pp is one step of P rows, tg N one-row steps);
  3. llama.cpp's own `llama-bench -m FILE -p P -n N -r R -t T -o json` on the
     same file (its defaults otherwise: n_batch 2048, n_ubatch 512, f16 KV, flash
     attention auto, mmap, one warm-up run), the same tests;
  4. routing statistics: build/tests/bench/moe_routing (one prefill step of P
     pseudo-random ids and one decode step, the cpu library recording how many
     experts each moe_gemm launch touched).

t/s: the median of the R samples per side; ratio = radiance / llama.cpp.  Decode
reads, per token, every tensor but the token embedding (gathered, one row) in
full, except the routed experts' stacks (`*_exps`), of which it reads the k
chosen slices of n_expert; that byte count (from the GGUF's tensor table) times
the median tg t/s is the decode GB/s, shown against the machine's read
bandwidth.  KV-cache reads are not counted.  A previous row's files stay in
the page cache: both programs read the same mapped file, radiance then makes
its relayout copies at load (not timed by either bench).
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent
sys.path.insert(0, str(HERE))
import bench_vs_llamacpp as common  # noqa: E402  (machine_info, read_bandwidth, git_commit)

CACHE = Path(os.environ.get("RADIANCE_MODELS", Path.home() / ".cache/radiance/models"))
DOC = SRC / "docs/BENCHMARKS.md"
BEGIN = "<!-- bench_moe:begin (tests/bench/bench_moe.py writes this part) -->"
END = "<!-- bench_moe:end -->"

ROWS = {
    "olmoe-q4_k_m": ("OLMoE-1B-7B geometry Q4_K_M (random weights)", "olmoe-1b-7b-geometry-random.Q4_K_M.gguf"),
    "qwen3moe-q4_k_m": ("Qwen3-30B-A3B geometry Q4_K_M (random weights)",
                        "qwen3-30b-a3b-geometry-random.Q4_K_M.gguf"),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def decode_bytes(path):
    """Bytes one decode token reads: dense tensors in full (not the gathered
    embedding unless it is also the output), k of n_expert slices of each
    expert stack; and the whole file's tensor bytes, for reference."""
    import gguf
    r = gguf.GGUFReader(str(path))
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def field(name):
        f = r.fields.get(f"{arch}.{name}")
        return int(f.parts[-1][0]) if f else None

    n_expert, n_used = field("expert_count"), field("expert_used_count")
    names = {t.name for t in r.tensors}
    dense = experts = 0
    for t in r.tensors:
        nb = int(t.n_bytes)
        if t.name == "token_embd.weight" and "output.weight" in names:
            continue
        if "_exps." in t.name:
            experts += nb
        else:
            dense += nb
    per_token = dense + experts * n_used // n_expert
    return {"dense": dense, "experts": experts, "n_expert": n_expert, "n_used": n_used, "per_token": per_token,
            "file_tensors": sum(int(t.n_bytes) for t in r.tensors)}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{Path(cmd[0]).name} failed ({r.returncode}): {r.stderr.strip()[-600:]}")
    return r.stdout


def run_radiance(path, a):
    out = run([str(a.radiance), "bench", "-m", str(path), "-p", str(a.p), "-n", str(a.n), "-r", str(a.reps),
               "-t", str(a.threads), "-o", "json"])
    return {t["test"]: t for t in json.loads(out)}


def run_llama_bench(path, a):
    out = run([a.llama_bench, "-m", str(path), "-p", str(a.p), "-n", str(a.n), "-r", str(a.reps), "-t",
               str(a.threads), "-o", "json"])
    res = {}
    for t in json.loads(out):
        name = f"pp{t['n_prompt']}" if t["n_prompt"] else f"tg{t['n_gen']}"
        res[name] = t
    return res


def run_routing(path, a):
    exe = SRC / "build/tests/bench/moe_routing"
    env = dict(os.environ, RADIANCE_HOME=str(SRC / "build"))
    r = subprocess.run([str(exe), str(path), "-p", str(a.p), "-t", str(a.threads)], capture_output=True, text=True,
                       env=env)
    if r.returncode:
        raise RuntimeError(f"moe_routing failed: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout)


def median(xs):
    return statistics.median(xs) if xs else None


def sd(xs):
    return statistics.stdev(xs) if xs and len(xs) > 1 else 0.0


def table(rows):
    lines = ["| model | test | radiance t/s | llama.cpp t/s | ratio | experts touched per layer (of E), busiest expert's rows "
             "| decode GB/s: radiance / llama.cpp | machine read GB/s | of it: radiance / llama.cpp |",
             "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['label']} | - | - | - | - | {row['error']} | - | - | - |")
            continue
        for name in (f"pp{row['p']}", f"tg{row['n']}"):
            rs, ls = row["radiance"].get(name), row["llamacpp"].get(name)
            rm, lm = median(rs), median(ls)
            ratio = f"**{rm / lm:.2f}x**" if rm and lm else "-"
            route = gbs = mbw = pct = "-"
            rt = row.get("routing") or {}
            if name.startswith("pp") and rt.get("prefill"):
                s = rt["prefill"]
                route = (f"{s['touched_mean']:.1f} ({s['touched_min']}-{s['touched_max']}) of {s['experts']}; "
                         f"{s['busiest_mean']:.0f} (max {s['busiest_max']}) of {s['rows']}, uniform {s['uniform_share']:.0f}")
            if name.startswith("tg"):
                if rt.get("decode"):
                    route = f"{rt['decode']['touched_mean']:.0f} of {rt['decode']['experts']}"
                b = row["bytes"]["per_token"]
                if rm and lm:
                    gr, gl = b * rm / 1e9, b * lm / 1e9
                    gbs = f"{gr:.2f} / {gl:.2f}"
                    if row.get("read_gbs"):
                        mbw = f"{row['read_gbs']:.1f}"
                        pct = f"{100 * gr / row['read_gbs']:.0f}% / {100 * gl / row['read_gbs']:.0f}%"
            lines.append(f"| {row['label']} | {name} | {rm:.2f} ± {sd(rs):.2f} | {lm:.2f} ± {sd(ls):.2f} | {ratio} "
                         f"| {route} | {gbs} | {mbw} | {pct} |" if rm and lm else
                         f"| {row['label']} | {name} | - | - | - | {route} | - | - | - |")
    return "\n".join(lines)


def report(rows, a, mach, lb_build):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    loads = [x for r in rows for x in r.get("loads", [])]
    head = [
        BEGIN, "",
        f"Measured {now} by `tests/bench/bench_moe.py --rows {','.join(r['id'] for r in rows)} --threads {a.threads} "
        f"-p {a.p} -n {a.n} --reps {a.reps}` under `/work/bin/quiet`.", "",
        f"- machine: {mach['cpu']}, {mach['logical_cpus']} logical CPUs ({mach['isa']}), {mach['memory']}, "
        f"Linux {mach['kernel']}; both programs on {a.threads} threads",
        f"- radiance: commit {common.git_commit()}, default kernel order (cpu, ref)",
        f"- llama.cpp: `llama-bench` {lb_build} (llama-cpp-python 0.3.36's vendored sources, built on this machine)",
        "- 1-minute load average around the rows: " + (f"{min(loads):.1f} to {max(loads):.1f}" if loads else "-"),
        f"- t/s: median ± standard deviation of {a.reps} repetitions per side",
    ]
    for r in rows:
        if "bytes" in r:
            b = r["bytes"]
            head.append(f"- {r['label']}: {b['file_tensors'] / 2**30:.2f} GiB of tensors; a decode token reads "
                        f"{b['dense'] / 2**20:.0f} MiB of dense weights + {b['n_used']} of {b['n_expert']} experts "
                        f"({b['experts'] * b['n_used'] // b['n_expert'] / 2**20:.0f} MiB) = "
                        f"{b['per_token'] / 2**20:.0f} MiB")
    head.append("")
    return "\n".join(head) + "\n" + table(rows) + "\n\n" + END


def write_doc(text):
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"bench_moe: {DOC} lacks the marker comments:\n{BEGIN}\n{END}")
    before, rest = doc.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    DOC.write_text(before + text + after)
    log(f"wrote the table into {DOC}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="olmoe-q4_k_m", help="comma-separated rows: " + ", ".join(ROWS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--radiance", default=str(SRC / "build/radiance"))
    ap.add_argument("--llama-bench", default="/work/llamacpp/build/bin/llama-bench")
    ap.add_argument("--json-in", help="merge these rows (an earlier --json-out) into the table")
    ap.add_argument("--json-out", help="write every sample as JSON here")
    ap.add_argument("--dry-run", action="store_true", help="print the table; leave docs/BENCHMARKS.md alone")
    a = ap.parse_args()
    rows_wanted = [r for r in a.rows.split(",") if r]
    for r in rows_wanted:
        if r not in ROWS:
            sys.exit(f"bench_moe: unknown row '{r}'; rows: {', '.join(ROWS)}")
    for exe in (a.radiance, a.llama_bench, str(SRC / "build/tests/bench/moe_routing")):
        if not Path(exe).is_file():
            sys.exit(f"bench_moe: {exe} not found (make all build/tests/bench/moe_routing; --llama-bench)")
    mach = common.machine_info(a.threads)
    tmp = tempfile.TemporaryDirectory()
    bw_exe = common.build_read_bandwidth(tmp.name)
    lb_build = "?"
    rows = json.loads(Path(a.json_in).read_text())["rows"] if a.json_in else []
    rows = [r for r in rows if r["id"] not in rows_wanted]
    for rid in rows_wanted:
        label, file = ROWS[rid]
        path = CACHE / file
        row = {"id": rid, "label": label, "p": a.p, "n": a.n, "loads": [os.getloadavg()[0]]}
        if not path.is_file():
            row["error"] = f"{file} missing: tests/bench/fetch_bench_models.py --only {rid}"
            rows.append(row)
            continue
        try:
            row["bytes"] = decode_bytes(path)
            row["read_gbs"] = common.read_bandwidth(bw_exe, a.threads)
            log(f"{rid}: machine read bandwidth {row['read_gbs']} GB/s; radiance bench")
            rad = run_radiance(path, a)
            row["radiance"] = {k: v["samples_ts"] for k, v in rad.items()}
            row["kernels"] = {k: v["kernels"] for k, v in rad.items()}
            log(f"{rid}: llama-bench")
            lcp = run_llama_bench(path, a)
            row["llamacpp"] = {k: v["samples_ts"] for k, v in lcp.items()}
            lb_build = next(iter(lcp.values())).get("build_commit", "?")
            log(f"{rid}: routing statistics")
            row["routing"] = run_routing(path, a)
        except RuntimeError as e:
            row["error"] = str(e).splitlines()[-1][:200]
            log(f"{rid}: {e}")
        row["loads"].append(os.getloadavg()[0])
        for name in (f"pp{a.p}", f"tg{a.n}"):
            if "radiance" in row and "llamacpp" in row:
                log(f"{rid} {name}: radiance {median(row['radiance'].get(name))} t/s, "
                    f"llama.cpp {median(row['llamacpp'].get(name))} t/s")
        rows.append(row)
    rows.sort(key=lambda r: list(ROWS).index(r["id"]))
    text = report(rows, a, mach, lb_build)
    print(text)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"machine": mach, "rows": rows}, indent=1))
    if not a.dry_run:
        write_doc(text)


if __name__ == "__main__":
    main()
