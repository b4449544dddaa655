#!/usr/bin/env python3
"""The trigger run's cost: audits without it (`--triggers none`) and with it (`--triggers all`,
the default), side by side in one run, and the trigger run against the denied run it sits
beside (both runs of one audit, from its manifest's `network.runs`).

1. A control fixture (fixtures/benign-tells-the-date: a Python server whose tool tells the
   date), ROUNDS rounds interleaved, medians kept.
2. A whole audit of @modelcontextprotocol/server-everything@2026.8.31 as glassbox installs it
   (the install is cached by a first audit, not timed), once per setting by default.

The issue's target: the trigger run costs no more than the denied run does (the last column at
most about 1.0: one more session of the same plan).

Usage: bench/triggers.py [--rounds N] [--everything-rounds N] [--no-everything] [GLASSBOX]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVERYTHING = "npm:@modelcontextprotocol/server-everything@2026.8.31"
FIXTURE = os.path.join(ROOT, "fixtures", "benign-tells-the-date")
SETTINGS = ["none", "all"]


def audit(glassbox, triggers, argv, cwd, state, extra=()):
    """One audit: (wall seconds, denied run seconds, trigger run seconds or None, verdict)."""
    with tempfile.TemporaryDirectory() as tmp:
        evidence = os.path.join(tmp, "evidence")
        report = os.path.join(tmp, "report.json")
        env = dict(os.environ, GLASSBOX_STATE_DIR=state)
        start = time.monotonic()
        subprocess.run([glassbox, "audit", "--no-selftest", "--quiet", "--triggers", triggers,
                        "--evidence", evidence, "--json", report] + list(extra) + argv,
                       env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        wall = time.monotonic() - start
        with open(report) as f:
            r = json.load(f)
        with open(os.path.join(evidence, "manifest.json")) as f:
            m = json.load(f)
        runs = {run["mode"]: (run["end_ns"] - run["start_ns"]) / 1e9
                for run in m["network"]["runs"]}
        return wall, runs.get("denied", 0.0), runs.get("trigger"), r["verdict"]


def table(title, rows):
    print(title)
    print("%-9s %9s %9s %10s %10s %16s %s" % ("triggers", "audit s", "x none", "denied s",
                                               "trigger s", "trigger/denied", "verdict"))
    base = statistics.median(r[0] for r in rows["none"])
    for s in SETTINGS:
        wall = statistics.median(r[0] for r in rows[s])
        denied = statistics.median(r[1] for r in rows[s])
        trig = [r[2] for r in rows[s] if r[2] is not None]
        if trig:
            t = statistics.median(trig)
            shown = "%10.2f %16.2f" % (t, t / denied if denied else float("nan"))
        else:
            shown = "%10s %16s" % ("-", "-")
        print("%-9s %9.2f %9.2f %10.2f %s %s" % (s, wall, wall / base, denied, shown,
                                                  rows[s][-1][3]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--everything-rounds", type=int, default=1)
    ap.add_argument("--no-everything", action="store_true")
    ap.add_argument("glassbox", nargs="?",
                    default=os.path.join(ROOT, "target", "release", "glassbox"))
    a = ap.parse_args()
    a.glassbox = os.path.abspath(a.glassbox)
    state = tempfile.mkdtemp(prefix="gb-bench-triggers-")
    lib = ["--ro", os.path.join(ROOT, "fixtures", "lib")]
    rows = {s: [] for s in SETTINGS}
    for _ in range(a.rounds):
        for s in SETTINGS:
            rows[s].append(audit(a.glassbox, s, ["--", "python3", "server.py"], FIXTURE, state,
                                 lib))
    table("fixtures/benign-tells-the-date, %d rounds (medians), --explore quick" % a.rounds,
          rows)
    if a.no_everything:
        return
    audit(a.glassbox, "none", [EVERYTHING], ROOT, state)
    rows = {s: [] for s in SETTINGS}
    for _ in range(a.everything_rounds):
        for s in SETTINGS:
            rows[s].append(audit(a.glassbox, s, [EVERYTHING], ROOT, state))
    print()
    table("%s, whole audit, %d round(s)" % (EVERYTHING[4:], a.everything_rounds), rows)


if __name__ == "__main__":
    main()
