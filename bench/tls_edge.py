#!/usr/bin/env python3
"""The TLS edge's cost, side by side in one run: HTTPS requests through glassbox's intercepting
edge (TLS terminated with the run's CA, every request read in full and answered) against the
same requests to a TLS server on the sandbox's own loopback (no edge: Python's ssl on both
ends), with a new connection each (handshake included) and on one kept-alive connection.
Every variant runs under `glassbox trace` (same sandbox, same recorder), ROUNDS times
interleaved; per-request latency is measured inside the sandbox, CPU of the whole run (glassbox,
its edge and everything in the sandbox, the local server included) with
getrusage(RUSAGE_CHILDREN).

Usage: bench/tls_edge.py [--rounds N] [--n N] [GLASSBOX]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = {
    "local": "TLS server on loopback, new connection each",
    "edge": "through the edge, new connection each",
    "local-keep": "TLS server on loopback, one connection",
    "edge-keep": "through the edge, one connection",
}


def run(glassbox, what, n):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [glassbox, "trace", "--out", "/dev/null", "--", "python3", "bench/tls_client.py", what,
         str(n)], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = json.loads(out.strip().splitlines()[-1])
    r["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("glassbox", nargs="?", default=os.path.join(ROOT, "target/release/glassbox"))
    args = ap.parse_args()
    if not os.path.exists(args.glassbox):
        sys.exit(f"build glassbox first: cargo build --release -p glassbox-cli ({args.glassbox})")
    results = {w: [] for w in VARIANTS}
    for _ in range(args.rounds):
        for w in results:
            results[w].append(run(args.glassbox, w, args.n))
    med = {w: {k: statistics.median(r[k] for r in rs) for k in ("median_us", "p90_us", "cpu_s")}
           for w, rs in results.items()}
    print(f"{args.n} HTTPS GETs per variant, median of {args.rounds} rounds")
    print(f"{'variant':<46} {'median µs':>10} {'p90 µs':>10} {'run CPU s':>10}")
    for w, m in med.items():
        print(f"{VARIANTS[w]:<46} {m['median_us']:>10.0f} {m['p90_us']:>10.0f} {m['cpu_s']:>10.2f}")
    for pair in (("edge", "local"), ("edge-keep", "local-keep")):
        a, b = med[pair[0]], med[pair[1]]
        print(f"{pair[0]} vs {pair[1]}: {a['median_us'] / b['median_us']:.2f}x latency "
              f"({a['median_us'] - b['median_us']:+.0f} µs), {a['cpu_s'] / b['cpu_s']:.2f}x CPU")


main()
