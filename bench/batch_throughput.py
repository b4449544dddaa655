#!/usr/bin/env python3
"""Audits per minute of `glassbox batch` at -j1 and at -j2, side by side, on a batch of the
control fixtures (the release binary).

The batch: the fixtures whose audits complete (no inconclusive, no hostile and no C control,
which needs its helper built), the first N of them in manifest order (--cases, default 16;
--cases 0: all). They are copied with fixtures/lib into a temporary folder that also holds
each run's store and evidence, and audited with both network runs (capture, then denied), as
`glassbox audit` does by default, without the selftest (proofs change no timing). Each -j runs
ROUNDS times, alternating, with a fresh store each time; the median is printed.

On two cores -j2 should approach twice -j1: the two sandboxes share nothing but the CPUs. On a
machine shared with other work they do not have both CPUs: each round also measures what the
machine gives two CPU-bound processes at once (same work, one after the other, then two at a
time), the ceiling -j2 can reach there and then.

Usage: bench/batch_throughput.py [--cases N] [--rounds N] [--jobs 1,2] [GLASSBOX]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "fixtures")


def cases(n):
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        manifest = json.load(f)
    chosen = [c for c in manifest["cases"]
              if c["verdict"] != "inconclusive" and not c.get("hostile")
              and not os.path.exists(os.path.join(FIXTURES, c["dir"], "control.c"))]
    return chosen if n == 0 else chosen[:n]


def run(glassbox, work, jobs, label):
    state = os.path.join(work, "state-" + label)
    evidence = os.path.join(work, "evidence-" + label)
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(evidence, ignore_errors=True)
    env = dict(os.environ, GLASSBOX_STATE_DIR=state)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    out = subprocess.run(
        [glassbox, "batch", "-j", str(jobs), "--no-selftest", "--quiet",
         "--store", os.path.join(state, "store.sqlite"), "--evidence", evidence,
         os.path.join(work, "targets.txt")],
        cwd=work, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode == 2:
        sys.exit("glassbox batch failed:\n" + out.stdout + out.stderr)
    rows = [line for line in out.stdout.splitlines()[1:] if line.split()[:1] and line.split()[0].isdigit()]
    errors = [r for r in rows if " error " in r]
    if errors:
        sys.exit("audits failed:\n" + "\n".join(errors))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "audits": len(rows), "cpu": cpu}


def calibration(n=8):
    """The machine's own speed-up on two CPU-bound processes at once (the same n short Python
    loops, one after the other, then two at a time): what -j2 can reach here, now. On a
    machine shared with other work it is below 2."""
    loop = [sys.executable, "-S", "-c", "sum(range(3_000_000))"]

    def stream(k):
        for _ in range(k):
            subprocess.run(loop, check=True)

    t = time.monotonic()
    stream(n)
    serial = time.monotonic() - t
    t = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys\n"
                               f"for _ in range({n // 2}): subprocess.run({loop!r}, check=True)"])
             for _ in range(2)]
    for p in procs:
        p.wait()
    return serial / (time.monotonic() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=16, help="fixtures in the batch (0: all)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--jobs", default="1,2", help="the -j values, comma-separated")
    ap.add_argument("glassbox", nargs="?", default=os.path.join(ROOT, "target/release/glassbox"))
    args = ap.parse_args()
    if not os.path.exists(args.glassbox):
        sys.exit(f"build glassbox first: cargo build --release -p glassbox-cli ({args.glassbox})")
    glassbox = os.path.abspath(args.glassbox)
    jobs = [int(j) for j in args.jobs.split(",")]
    chosen = cases(args.cases)
    work = tempfile.mkdtemp(prefix="glassbox-bench-batch-")
    # The sandbox user is another uid: it must be able to enter the folder.
    os.chmod(work, 0o755)
    try:
        shutil.copytree(os.path.join(FIXTURES, "lib"), os.path.join(work, "lib"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        lines = []
        for c in chosen:
            shutil.copytree(os.path.join(FIXTURES, c["dir"]), os.path.join(work, c["dir"]),
                            ignore=shutil.ignore_patterns("__pycache__"))
            interpreter, server = c["command"]
            lines.append(f"-- {interpreter} {c['dir']}/{server}")
        with open(os.path.join(work, "targets.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        results = {j: [] for j in jobs}
        machine = []
        for r in range(args.rounds):
            machine.append(calibration())
            for j in jobs:
                results[j].append(run(glassbox, work, j, f"j{j}-{r}"))
        print(f"{len(chosen)} fixtures, both network runs each, {os.cpu_count()} CPUs, "
              f"median of {args.rounds} round(s)")
        print(f"{'':<5} {'wall s':>8} {'audits/min':>11} {'CPU s/audit':>12} {'speed-up':>9}")
        base = None
        for j in jobs:
            wall = statistics.median(x["wall"] for x in results[j])
            n = results[j][0]["audits"]
            per_min = n / wall * 60
            cpu = statistics.median(x["cpu"] for x in results[j]) / n
            base = base or per_min
            print(f"-j{j:<3} {wall:>8.1f} {per_min:>11.1f} {cpu:>12.2f} {per_min / base:>8.2f}x")
        print(f"this machine, meanwhile: {statistics.median(machine):.2f}x on two CPU-bound "
              "processes at once against one after the other")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
