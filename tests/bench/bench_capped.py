#!/usr/bin/env python3
"""bench_capped.py: a MoE model larger than its memory cap, radiance (experts
streamed) and llama.cpp (mmap) side by side under the same cgroup memory
limit, judged against the drive's bound (issue 15, amended by issue 20); the
table goes into docs/BENCHMARKS.md between the bench_capped marker comments.

    make all && /work/venv/bin/python tests/bench/fetch_bench_models.py --only olmoe-q4_k_m
    sudo /work/venv/bin/python tests/bench/bench_capped.py --rows olmoe-q4_k_m:2.5G
        [--rows qwen3moe-q4_k_m:10G,olmoe-q4_k_m:2.5G] [--threads 2] [-p 64] [-n 32] [--reps 2]
        [--fio-seconds 30] [--llama-bench PATH] [--no-doc]

Needs root (cgroup v1's memory controller at /sys/fs/cgroup/memory, and
/proc/sys/vm/drop_caches).  For each row, in one go:

  1. the .rad beside the GGUF (`radiance convert GGUF -o GGUF.rad`, once): its
     experts are stored one record each, which is what streams;
  2. compute in memory: `radiance bench` on the .rad, uncapped, experts held
     (`--no-stream-experts`), the median tg -> seconds per token;
  3. under the cap (a fresh cgroup of the row's limit, the page cache dropped
     before each program): llama.cpp's own `llama-bench -lm mmap --repack 0`
     (f16 KV, its defaults otherwise) on the GGUF, and `radiance bench` on the
     .rad, which streams its experts by itself (the budget is the cgroup's);
     the cgroup's peak usage and OOM kills after each;
  4. the bound per token = max(compute in memory, missed bytes per token /
     the drive's bandwidth), where missed bytes are what radiance itself read
     per decode token (its per_token.expert_bytes_read) and the bandwidth is
     fio's random-read rate at one expert record per request (io_uring,
     O_DIRECT, depth 8, --fio-seconds long: a virtual disk serves a burst
     well above its sustained rate, so the run must be long), measured once
     on the largest file of the run and used for every row; every fio result
     is printed;
  5. decode target = min(3 x llama.cpp's capped decode, 1 / (1.15 x bound));
     prefill target = 2 x llama.cpp's capped prefill; whether each holds.

The hit rate is printed beside the uniform expectation (the cache's share of
the experts, from radiance's mode line).  Bélády's optimum on a recorded
trace is not computed yet (radiance has no --trace yet).
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent
sys.path.insert(0, str(HERE))
import bench_moe  # noqa: E402  (ROWS, decode_bytes)
import bench_vs_llamacpp as common  # noqa: E402  (machine_info, git_commit)

CACHE = Path(os.environ.get("RADIANCE_MODELS", Path.home() / ".cache/radiance/models"))
DOC = SRC / "docs/BENCHMARKS.md"
BEGIN = "<!-- bench_capped:begin (tests/bench/bench_capped.py writes this part) -->"
END = "<!-- bench_capped:end -->"
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_size(text):
    m = re.fullmatch(r"([0-9.]+)([KMGT]?)", text.strip().upper())
    if not m:
        sys.exit(f"bench_capped: '{text}' is not a size (2.5G, 10G)")
    return int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " "))


def drop_caches():
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


class Cgroup:
    """A cgroup v1 memory group of its own, with a limit; programs start in it."""

    def __init__(self, limit):
        self.path = CGROUP_ROOT / f"radiance-capped-{os.getpid()}"
        self.path.mkdir()
        (self.path / "memory.limit_in_bytes").write_text(str(limit))
        self.limit = limit

    def run(self, cmd, env=None):
        """cmd inside the group; (stdout, stderr, seconds, peak bytes, OOM kills)."""
        for f in ("memory.max_usage_in_bytes", "memory.failcnt"):
            try:
                (self.path / f).write_text("0")
            except OSError:
                pass
        oom0 = self.oom_kills()
        wrapped = ["sh", "-c", f'echo $$ > {self.path}/cgroup.procs && exec "$@"', "sh"] + [str(c) for c in cmd]
        t0 = time.monotonic()
        r = subprocess.run(wrapped, capture_output=True, text=True, env=env)
        secs = time.monotonic() - t0
        peak = int((self.path / "memory.max_usage_in_bytes").read_text())
        kills = self.oom_kills() - oom0
        if r.returncode:
            raise RuntimeError(f"{Path(str(cmd[0])).name} failed under the cap ({r.returncode}, {kills} OOM kills): "
                               f"{r.stderr.strip()[-600:]}")
        return r.stdout, r.stderr, secs, peak, kills

    def oom_kills(self):
        for line in (self.path / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def close(self):
        try:
            self.path.rmdir()
        except OSError as e:
            log(f"bench_capped: cannot remove {self.path}: {e}")


def fio(path, block, depth, seconds):
    out = subprocess.run(["fio", "--name=expert", f"--filename={path}", "--rw=randread", f"--bs={block}",
                          "--direct=1", "--ioengine=io_uring", f"--iodepth={depth}", f"--runtime={seconds}",
                          "--time_based", "--readonly", "--output-format=json"], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"fio failed: {out.stderr.strip()[-400:]}")
    j = json.loads(out.stdout)["jobs"][0]["read"]
    return {"depth": depth, "block": block, "seconds": seconds, "mib_s": j["bw"] / 1024, "iops": j["iops"],
            "lat_ms": j["clat_ns"]["mean"] / 1e6}


def radiance_bench(a, model, extra, cgroup=None):
    cmd = [a.radiance, "bench", "-m", model, "-p", a.p, "-n", a.n, "-r", a.reps, "-t", a.threads, "-o", "json"] + extra
    env = dict(os.environ, RADIANCE_HOME=str(SRC / "build"))
    if cgroup:
        out, err, secs, peak, kills = cgroup.run(cmd, env)
    else:
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
        if r.returncode:
            raise RuntimeError(f"radiance bench failed: {r.stderr.strip()[-600:]}")
        out, err, secs, peak, kills = r.stdout, r.stderr, None, None, 0
    tests = {t["test"]: t for t in json.loads(out)}
    mode = next((line for line in err.splitlines() if line.startswith("mode: ")), "")
    return {"tests": tests, "mode": mode, "seconds": secs, "peak": peak, "oom_kills": kills}


def llama_bench(a, model, cgroup):
    cmd = [a.llama_bench, "-m", model, "-p", a.p, "-n", a.n, "-r", a.reps, "-t", a.threads, "-lm", "mmap",
           "--repack", "0", "-o", "json"]
    out, err, secs, peak, kills = cgroup.run(cmd)
    tests = {}
    for t in json.loads(out):
        tests[f"pp{t['n_prompt']}" if t["n_prompt"] else f"tg{t['n_gen']}"] = t
    return {"tests": tests, "seconds": secs, "peak": peak, "oom_kills": kills}


def ensure_rad(a, gguf):
    rad = Path(str(gguf) + ".rad")
    if rad.exists() and rad.stat().st_mtime >= gguf.stat().st_mtime:
        return rad
    log(f"converting {gguf.name} to a .rad (experts one record each)")
    r = subprocess.run([a.radiance, "convert", str(gguf), "-o", str(rad), "-q"], capture_output=True, text=True,
                       env=dict(os.environ, RADIANCE_HOME=str(SRC / "build")))
    if r.returncode:
        raise RuntimeError(f"convert failed: {r.stderr.strip()[-400:]}")
    return rad


def median_ts(t):
    return t["ts_median"] if "ts_median" in t else statistics.median(t["samples_ts"])


def llama_ts(t):
    return statistics.median(t["samples_ts"]) if t.get("samples_ts") else t["avg_ts"]


def one_row(a, row_id, cap, bandwidth):
    label, name = bench_moe.ROWS[row_id]
    gguf = CACHE / name
    if not gguf.exists():
        raise RuntimeError(f"{gguf} is missing: run tests/bench/fetch_bench_models.py --only {row_id}")
    rad = ensure_rad(a, gguf)
    b = bench_moe.decode_bytes(gguf)
    tg, pp = f"tg{a.n}", f"pp{a.p}"
    log(f"{row_id}: compute in memory (uncapped, experts held)")
    held = radiance_bench(a, rad, ["--no-stream-experts"])
    compute_s = 1.0 / median_ts(held["tests"][tg])
    cg = Cgroup(cap)
    try:
        drop_caches()
        log(f"{row_id}: llama.cpp under {cap / 2**30:.2f} GiB")
        lc = llama_bench(a, gguf, cg)
        drop_caches()
        log(f"{row_id}: radiance under {cap / 2**30:.2f} GiB")
        rs = radiance_bench(a, rad, [], cg)
    finally:
        cg.close()
    t = rs["tests"][tg]["per_token"]
    missed = t["expert_bytes_read"]
    bound = max(compute_s, missed / bandwidth)
    lc_tg, lc_pp = llama_ts(lc["tests"][tg]), llama_ts(lc["tests"][pp])
    rs_tg, rs_pp = median_ts(rs["tests"][tg]), median_ts(rs["tests"][pp])
    target_tg = min(3 * lc_tg, 1 / (1.15 * bound))
    m = re.search(r"a cache of (\d+) of (\d+) experts", rs["mode"])
    uniform = int(m.group(1)) / int(m.group(2)) if m else None
    return {"id": row_id, "label": label, "cap": cap, "bytes": b, "compute_s": compute_s, "missed": missed,
            "bound": bound, "bound_by": "compute" if compute_s >= missed / bandwidth else "drive",
            "llama": {"tg": lc_tg, "pp": lc_pp, "peak": lc["peak"], "oom": lc["oom_kills"]},
            "radiance": {"tg": rs_tg, "pp": rs_pp, "peak": rs["peak"], "oom": rs["oom_kills"], "mode": rs["mode"],
                         "hit_rate": t["expert_hit_rate"], "io_wait_ms": t["io_wait_ms"],
                         "faults": t["page_faults"], "pp_per_token": rs["tests"][pp]["per_token"]},
            "uniform": uniform, "target_tg": target_tg, "target_pp": 2 * lc_pp,
            "holds_tg": rs_tg >= target_tg, "holds_pp": rs_pp >= 2 * lc_pp}


def report(a, rows, fios, bandwidth, mach):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [BEGIN, "",
             f"Measured {now} by `tests/bench/bench_capped.py --rows {a.rows} --threads {a.threads} -p {a.p} "
             f"-n {a.n} --reps {a.reps} --fio-seconds {a.fio_seconds}`, radiance {common.git_commit()}.", "",
             f"- machine: {mach['cpu']}, {mach['logical_cpus']} logical CPUs, {mach['memory']}, "
             f"Linux {mach['kernel']}; both programs on {a.threads} threads",
             "- drive (fio, random reads of one expert record, io_uring, O_DIRECT): " +
             "; ".join(f"depth {f['depth']}, {f['block'] // 1024} KiB: {f['mib_s']:.0f} MiB/s over {f['seconds']} s"
                       for f in fios) + f"; the bound uses {bandwidth / 2**20:.0f} MiB/s",
             ""]
    lines += ["| model, cap | test | llama.cpp (mmap) | radiance (streamed) | ratio | bound per token "
              "(compute in memory; missed bytes / drive) | target | holds | hit rate (uniform share) | peak usage "
              "llama.cpp / radiance |",
              "| --- | --- | ---: | ---: | ---: | --- | ---: | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['label']} | - | - | - | - | {r['error']} | - | - | - | - |")
            continue
        cap = f"{r['label']}, {r['cap'] / 2**30:.2f} GiB"
        L, R = r["llama"], r["radiance"]
        uni = f" ({100 * r['uniform']:.0f}%)" if r["uniform"] is not None else ""
        hit = f"{100 * R['hit_rate']:.0f}%{uni}" if R["hit_rate"] is not None else "-"
        peaks = f"{L['peak'] / 2**30:.2f} / {R['peak'] / 2**30:.2f} GiB, OOM kills {L['oom']} / {R['oom']}"
        bound = (f"{r['bound']:.3f} s, by the {r['bound_by']} ({r['compute_s']:.3f} s; "
                 f"{r['missed'] / 2**20:.0f} MiB / {bandwidth / 2**20:.0f} MiB/s = {r['missed'] / bandwidth:.3f} s)")
        lines.append(f"| {cap} | tg{a.n} | {L['tg']:.3f} | {R['tg']:.3f} | {R['tg'] / L['tg']:.2f}x | {bound} "
                     f"| {r['target_tg']:.3f} | {'yes' if r['holds_tg'] else '**no**'} | {hit} | {peaks} |")
        lines.append(f"| {cap} | pp{a.p} | {L['pp']:.2f} | {R['pp']:.2f} | {R['pp'] / L['pp']:.2f}x | - "
                     f"| {r['target_pp']:.2f} | {'yes' if r['holds_pp'] else '**no**'} | - | |")
    lines.append("")
    for r in rows:
        if "error" not in r:
            lines.append(f"- {r['label']}: radiance's {r['radiance']['mode']}; decode waited "
                         f"{r['radiance']['io_wait_ms']:.1f} ms per token for reads, "
                         f"{r['radiance']['faults']:.1f} page faults per token.")
    lines += ["", END]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="olmoe-q4_k_m:2.5G", help="ROW:CAP,... (rows of bench_moe.py)")
    ap.add_argument("--threads", default="2")
    ap.add_argument("-p", default="64")
    ap.add_argument("-n", default="32")
    ap.add_argument("--reps", default="2")
    ap.add_argument("--fio-seconds", type=int, default=30)
    ap.add_argument("--radiance", default=str(SRC / "build/radiance"))
    ap.add_argument("--llama-bench", default=os.environ.get("LLAMA_BENCH", "/work/llamacpp/build/bin/llama-bench"))
    ap.add_argument("--no-doc", action="store_true", help="print the table, leave BENCHMARKS.md alone")
    a = ap.parse_args()
    if os.geteuid() != 0 or not CGROUP_ROOT.is_dir():
        sys.exit("bench_capped: needs root and cgroup v1's memory controller at /sys/fs/cgroup/memory")
    wanted = [(r.split(":")[0], parse_size(r.split(":")[1])) for r in a.rows.split(",")]
    # The drive, once, on the largest file, with one expert record per read.
    files = [CACHE / bench_moe.ROWS[r][1] for r, _ in wanted if (CACHE / bench_moe.ROWS[r][1]).exists()]
    if not files:
        sys.exit("bench_capped: no model of the rows is in the cache (tests/bench/fetch_bench_models.py)")
    largest = max(files, key=lambda f: f.stat().st_size)
    b = bench_moe.decode_bytes(largest)
    import gguf
    n_layer = sum(1 for t in gguf.GGUFReader(str(largest)).tensors if t.name.endswith("ffn_gate_exps.weight"))
    record = (b["experts"] // (n_layer * b["n_expert"]) + 4095) // 4096 * 4096
    drop_caches()
    fios = [fio(largest, record, d, s) for d, s in ((1, 10), (8, a.fio_seconds))]
    for f in fios:
        log(f"fio on {largest.name}: depth {f['depth']}, {f['block']} B: {f['mib_s']:.0f} MiB/s, "
            f"{f['lat_ms']:.2f} ms per read")
    bandwidth = fios[-1]["mib_s"] * 2**20
    rows = []
    for row_id, cap in wanted:
        try:
            rows.append(one_row(a, row_id, cap, bandwidth))
        except RuntimeError as e:
            log(f"{row_id}: {e}")
            rows.append({"id": row_id, "label": bench_moe.ROWS[row_id][0], "error": str(e)[:200]})
    text = report(a, rows, fios, bandwidth, common.machine_info(int(a.threads)))
    print(text)
    if not a.no_doc:
        doc = DOC.read_text()
        if BEGIN not in doc:
            doc += "\n\n## MoE models larger than memory: experts streamed, under a cgroup cap\n\n" + BEGIN + "\n" + END + "\n"
        before, rest = doc.split(BEGIN, 1)
        _, after = rest.split(END, 1)
        DOC.write_text(before + text + after)


if __name__ == "__main__":
    main()
