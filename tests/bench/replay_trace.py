#!/usr/bin/env python3
"""replay_trace.py: the hit rate an expert cache policy gets on a recorded
routing trace, beside Bélády's optimum, at several cache sizes.

    radiance bench -m MODEL.rad --stream-experts --trace trace.jsonl -p 64 -n 32 -r 2
    python3 tests/bench/replay_trace.py trace.jsonl [--slots 256,512,768]

The trace (`--trace FILE` of `radiance bench`, engine/experts.c) is one JSON
line per op that read streamed experts: the experts it chose, and whether
it was a sweep (it chose more than half of its layer's experts: a prefill
chunk).  Each op is a request for all of its chosen experts at once; none
of them may be evicted to make room for another of the same op.  Replayed:

  lru      evict the least recently used
  radiance what engine/experts.c does: least recently used, but a sweep
           evicts the most recently used (reading ahead is not replayed:
           it moves reads earlier, not how many there are)
  belady   evict the expert whose next request lies farthest ahead (the
           optimum for a known future; no real cache can do better)

and the uniform share (slots / experts), what any policy gets when routing
is uniform and independent.  A hit is a chosen expert already resident, as
radiance counts it (RadEngineStats.expert_hits).  Standard library only.
"""
import argparse
import json
import sys


def load(path):
    head, ops = None, []
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            if "op" not in j:
                head = j
            elif not j.get("failed"):
                ops.append((j["chosen"], j["sweep"]))
    if head is None:
        sys.exit(f"replay_trace: {path} has no header line (is it a radiance --trace file?)")
    return head, ops


def replay(ops, slots, policy):
    resident = {}       # expert -> last use (op index), or next use for belady
    hits = total = 0
    nxt = None
    if policy == "belady":
        # next_use[i][e]: the op after i that requests e, per op i and chosen e
        last = {}
        nxt = [None] * len(ops)
        for i in range(len(ops) - 1, -1, -1):
            nxt[i] = {e: last.get(e, float("inf")) for e in ops[i][0]}
            for e in ops[i][0]:
                last[e] = i
    for i, (chosen, sweep) in enumerate(ops):
        need = set(chosen)
        for e in chosen:
            total += 1
            if e in resident:
                hits += 1
        for e in chosen:
            if e not in resident and len(resident) >= slots:
                victims = [v for v in resident if v not in need]
                if policy == "lru" or (policy == "radiance" and not sweep):
                    v = min(victims, key=lambda v: resident[v])
                elif policy == "radiance":
                    v = max(victims, key=lambda v: resident[v])
                else:
                    v = max(victims, key=lambda v: resident[v])     # farthest next use
                del resident[v]
            resident[e] = nxt[i][e] if policy == "belady" else i
        if policy == "belady":
            for e in chosen:
                resident[e] = nxt[i][e]
    return hits / total if total else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--slots", default="", help="cache sizes in experts (default: the run's, and 25/50/75%%)")
    a = ap.parse_args()
    head, ops = load(a.trace)
    n, least = head["experts"], head["least"]
    sizes = [int(s) for s in a.slots.split(",") if s] or sorted({head["slots"], n // 4, n // 2, 3 * n // 4})
    sizes = [s for s in sizes if least <= s <= n]
    sweeps = sum(1 for _, s in ops if s)
    print(f"{a.trace}: {len(ops)} ops ({sweeps} sweeps), {n} experts, the least cache {least}")
    print("| slots | uniform share | lru | radiance | belady |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for s in sizes:
        r = [replay(ops, s, p) for p in ("lru", "radiance", "belady")]
        print(f"| {s} | {100 * s / n:.0f}% | {100 * r[0]:.1f}% | {100 * r[1]:.1f}% | {100 * r[2]:.1f}% |")


if __name__ == "__main__":
    main()
