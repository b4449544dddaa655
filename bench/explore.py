#!/usr/bin/env python3
"""The plans of calls (`--explore`), side by side: single (one call per tool, as before plans),
quick (the default) and thorough, measured in the same run.

1. A 30-tool server written here (Python, stdlib only: every tool takes a string, a boolean,
   an enum of four values and an optional integer, and answers at once), audited with each
   level (`--network capture`, ROUNDS rounds interleaved, medians kept): the calls made, the
   audit's wall time, and the explorer's calls per second (calls over the time of the call
   phases, from `manifest.timings`).
2. A whole audit (both runs) of @modelcontextprotocol/server-everything@2026.8.31 as glassbox
   installs it (the install is cached by a first audit, not timed), once per level by
   default (`--everything-rounds`).

The ratios to `single` are printed: the issue's target is a 30-tool server's audit within a
few seconds of one call per tool at the default level.

Usage: bench/explore.py [--rounds N] [--everything-rounds N] [--no-everything] [GLASSBOX]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVERYTHING = "npm:@modelcontextprotocol/server-everything@2026.8.31"
LEVELS = ["single", "quick", "thorough"]

SERVER = r'''
import json, sys
TOOLS = [{"name": "tool_%02d" % i, "description": "Tool %d." % i, "inputSchema": {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "verbose": {"type": "boolean"},
        "mode": {"enum": ["a", "b", "c", "d"]},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
    },
    "required": ["text", "mode"]}} for i in range(30)]
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "thirty", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps(msg["params"]["arguments"])}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


def audit(glassbox, level, argv, cwd, state, network="capture"):
    """One audit; (wall seconds, calls made, seconds in call phases)."""
    with tempfile.TemporaryDirectory() as tmp:
        evidence = os.path.join(tmp, "evidence")
        report = os.path.join(tmp, "report.json")
        env = dict(os.environ, GLASSBOX_STATE_DIR=state)
        start = time.monotonic()
        subprocess.run([glassbox, "audit", "--no-selftest", "--quiet", "--network", network,
                        "--explore", level, "--evidence", evidence, "--json", report] + argv,
                       env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        wall = time.monotonic() - start
        with open(report) as f:
            r = json.load(f)
        calls = sum(r.get("call_outcomes", {}).values())
        with open(os.path.join(evidence, "manifest.json")) as f:
            m = json.load(f)
        in_calls = sum(t["end_ns"] - t["start_ns"] for t in m.get("timings", [])
                       if str(t.get("phase", "")).startswith("call:")) / 1e9
        return wall, calls, in_calls, r["verdict"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--everything-rounds", type=int, default=1)
    ap.add_argument("--no-everything", action="store_true")
    ap.add_argument("glassbox", nargs="?",
                    default=os.path.join(ROOT, "target", "release", "glassbox"))
    a = ap.parse_args()
    state = tempfile.mkdtemp(prefix="gb-bench-explore-")
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "server.py"), "w") as f:
            f.write(SERVER)
        rows = {lvl: [] for lvl in LEVELS}
        for _ in range(a.rounds):
            for lvl in LEVELS:
                rows[lvl].append(audit(a.glassbox, lvl, ["--", sys.executable, "server.py"],
                                       work, state))
        print("30-tool server, %d rounds (medians), --network capture" % a.rounds)
        print("%-9s %6s %9s %8s %10s" % ("level", "calls", "audit s", "x single", "calls/s"))
        base = statistics.median(r[0] for r in rows["single"])
        for lvl in LEVELS:
            wall = statistics.median(r[0] for r in rows[lvl])
            calls = statistics.median(r[1] for r in rows[lvl])
            rate = statistics.median(r[1] / r[2] for r in rows[lvl] if r[2] > 0)
            print("%-9s %6d %9.2f %8.2f %10.0f" % (lvl, calls, wall, wall / base, rate))
    if a.no_everything:
        return
    # Warm the install cache: the install is not what is measured.
    audit(a.glassbox, "single", [EVERYTHING], ROOT, state)
    rows = {lvl: [] for lvl in LEVELS}
    for _ in range(a.everything_rounds):
        for lvl in LEVELS:
            rows[lvl].append(audit(a.glassbox, lvl, [EVERYTHING], ROOT, state, network="both"))
    print()
    print("%s, whole audit (both runs), %d round(s)" % (EVERYTHING[4:], a.everything_rounds))
    print("%-9s %6s %9s %8s %s" % ("level", "calls", "audit s", "x single", "verdict"))
    base = statistics.median(r[0] for r in rows["single"])
    for lvl in LEVELS:
        wall = statistics.median(r[0] for r in rows[lvl])
        calls = statistics.median(r[1] for r in rows[lvl])
        print("%-9s %6d %9.2f %8.2f %s" % (lvl, calls, wall, wall / base, rows[lvl][-1][3]))


if __name__ == "__main__":
    main()
