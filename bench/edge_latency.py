#!/usr/bin/env python3
"""The network edge's cost, measured side by side in one run: 1,000 TCP connects to a
documentation address (accepted by glassbox's edge) against 1,000 connects to a listener on
the sandbox's own loopback, and 1,000 DNS lookups answered by the edge. Every variant runs
under `glassbox trace` (same sandbox, same recorder), ROUNDS times interleaved; per-connect
latency is measured inside the sandbox, CPU of the whole run with getrusage(RUSAGE_CHILDREN).

Target: at most 100 µs median added per connect compared with loopback.
Usage: bench/edge_latency.py [--rounds N] [--n N] [GLASSBOX]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(glassbox, what, n):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [glassbox, "trace", "--out", "/dev/null", "--", "python3", "bench/edge_client.py", what, str(n)],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    r = json.loads(out.strip().splitlines()[-1])
    r["cpu_s"] = cpu
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("glassbox", nargs="?", default=os.path.join(ROOT, "target/release/glassbox"))
    args = ap.parse_args()
    if not os.path.exists(args.glassbox):
        sys.exit(f"build glassbox first: cargo build --release -p glassbox-cli ({args.glassbox})")
    results = {"loopback": [], "edge": [], "dns": []}
    for _ in range(args.rounds):
        for what in results:
            results[what].append(run(args.glassbox, what, args.n))
    med = {w: {k: statistics.median(r[k] for r in rs) for k in ("median_us", "p90_us", "cpu_s")}
           for w, rs in results.items()}
    print(f"{args.n} per variant, median of {args.rounds} rounds (per-flow latency inside the sandbox)")
    print(f"{'variant':<34} {'median µs':>10} {'p90 µs':>10} {'run CPU s':>10} {'CPU µs/flow':>12}")
    names = {"loopback": "TCP connect, sandbox loopback", "edge": "TCP connect through the edge",
             "dns": "DNS lookup through the edge"}
    for w, m in med.items():
        print(f"{names[w]:<34} {m['median_us']:>10.1f} {m['p90_us']:>10.1f} {m['cpu_s']:>10.2f} "
              f"{m['cpu_s'] * 1e6 / args.n:>12.0f}")
    added = med["edge"]["median_us"] - med["loopback"]["median_us"]
    extra_cpu = (med["edge"]["cpu_s"] - med["loopback"]["cpu_s"]) * 1e6 / args.n
    verdict = "met" if added <= 100 else "NOT met"
    print(f"added per connect: {added:.1f} µs median (target ≤ 100 µs: {verdict}); "
          f"extra CPU per connect: {extra_cpu:.0f} µs")


main()
