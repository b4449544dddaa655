#!/usr/bin/env python3
"""Dual execution's cost, side by side in one run: whole audits (both network runs) of two
control fixtures, each with dual execution on (the default) and off (`--no-dual-execution`),
ROUNDS rounds interleaved, medians kept.

- `reads-ssh-key-in-call`: reads a planted secret and sends nothing: no call qualifies, so
  dual execution must cost nothing (no run is made; one pass over the capture run's events);
- `xor-ssh-key-posts-https`: reads the SSH key and posts it XOR-ed over HTTPS: the call is
  made again twice (fresh secrets, same secrets), two more runs of the server.

Usage: bench/dual.py [--rounds N] [GLASSBOX]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")
CASES = ["reads-ssh-key-in-call", "xor-ssh-key-posts-https"]


def audit(glassbox, case, dual, state):
    """One audit; (wall seconds, dual records, verdict)."""
    folder = os.path.join(FIXTURES, case)
    server = "server.py" if os.path.exists(os.path.join(folder, "server.py")) else "server.js"
    cmd = ["python3", server] if server.endswith(".py") else ["node", server]
    with tempfile.TemporaryDirectory() as tmp:
        evidence = os.path.join(tmp, "evidence")
        report = os.path.join(tmp, "report.json")
        args = [glassbox, "audit", "--no-selftest", "--quiet", "--ro", FIXTURES,
                "--evidence", evidence, "--json", report]
        if not dual:
            args.append("--no-dual-execution")
        start = time.monotonic()
        subprocess.run(args + ["--"] + cmd, cwd=folder, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False,
                       env=dict(os.environ, GLASSBOX_STATE_DIR=state))
        wall = time.monotonic() - start
        with open(report) as f:
            verdict = json.load(f)["verdict"]
        with open(os.path.join(evidence, "manifest.json")) as f:
            records = len(json.load(f).get("dual", []))
        return wall, records, verdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("glassbox", nargs="?",
                    default=os.path.join(ROOT, "target", "release", "glassbox"))
    a = ap.parse_args()
    state = tempfile.mkdtemp(prefix="gb-bench-dual-")
    rows = {(c, d): [] for c in CASES for d in (False, True)}
    for _ in range(a.rounds):
        for c in CASES:
            for d in (False, True):
                rows[(c, d)].append(audit(a.glassbox, c, d, state))
    print("whole audits (both runs), %d rounds (medians)" % a.rounds)
    print("%-26s %-5s %8s %9s %8s" % ("fixture", "dual", "records", "audit s", "x off"))
    for c in CASES:
        base = statistics.median(r[0] for r in rows[(c, False)])
        for d in (False, True):
            wall = statistics.median(r[0] for r in rows[(c, d)])
            n = rows[(c, d)][-1][1]
            print("%-26s %-5s %8d %9.2f %8.2f" % (c, "on" if d else "off", n, wall, wall / base))


if __name__ == "__main__":
    main()
