#!/usr/bin/env python3
"""Boot-to-first-output: the same command in glassbox's microVM and in its namespace sandbox.

For each command, runs it N times (default 3) each way and prints the median wall time from
spawning to the first byte of the command's standard output, and to its end, side by side,
with the ratio and the microVM's accelerator (KVM or TCG, and why).

- microVM: `crates/vm/examples/vm_run` (build: cargo build -p glassbox-vm --examples --bins),
  by default with `glassbox vm-agent` as the guest agent (what the CLI will boot), or with
  the small `glassbox-vm-agent` (--small-agent).
- namespaces: `glassbox trace -- CMD` (sandbox and recorder, no MCP).

The first microVM run after a kernel or agent change also extracts the kernel or builds the
initramfs; one warm-up run (not counted) takes that out of the medians.

Then the MCP part (skipped with --no-audit): a whole `glassbox audit` (its default runs) of control fixtures
(a Python and a Node server, both clean), microVM against namespaces, N runs each way: the
median wall time of the audit, and boot-to-first-MCP-response: from the capture run's start
(`manifest.network.runs[0].start_ns`) to the first line the server wrote
(`transcript.jsonl`), on the audit's own clock. In the microVM that span holds the guest's
boot, the guest glassbox's sandbox and recorder, and the server's own start under the guest's
kernel.

Usage: bench/microvm_boot.py [--runs N] [--target DIR] [--small-agent] [--no-audit] [--json FILE] [-- CMD ...]
"""

import argparse
import json
import os
import statistics
import subprocess
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

AUDIT_FIXTURES = ["benign-reads-dotenv-and-own-config", "benign-node-reads-own-files"]

DEFAULT_COMMANDS = [
    ["/bin/echo", "ready"],
    ["/usr/bin/python3", "-c", "print('ready')"],
]


def timed(argv, env=None):
    """(seconds to the first stdout byte or None, seconds to exit, exit code, stderr)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    first = None
    while True:
        b = p.stdout.read1(65536) if hasattr(p.stdout, "read1") else p.stdout.read(1)
        if not b:
            break
        if first is None:
            first = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    code = p.wait()
    return first, time.monotonic() - t0, code, err


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x):
    return "   n/a" if x is None else f"{x:6.2f}"


def audit_once(glassbox, fixture_dir, command, isolation, scratch, env):
    """(wall seconds, seconds from the capture run's start to the server's first line, verdict)."""
    evidence = os.path.join(scratch, "evidence")
    shutil.rmtree(evidence, ignore_errors=True)
    report = os.path.join(scratch, "report.json")
    argv = [glassbox, "audit", "--no-selftest", "-q", "--ro", "../lib", "--isolation", isolation,
            "--evidence", evidence, "--json", report, "--"] + command
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=fixture_dir, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    wall = time.monotonic() - t0
    try:
        with open(os.path.join(evidence, "manifest.json")) as f:
            manifest = json.load(f)
        with open(report) as f:
            verdict = json.load(f).get("verdict")
        start = manifest["network"]["runs"][0]["start_ns"]
        first = None
        with open(os.path.join(evidence, "transcript.jsonl")) as f:
            for line in f:
                t = json.loads(line)
                if t.get("dir") == "server_to_client":
                    first = (t["t_ns"] - start) / 1e9
                    break
    except (OSError, KeyError, IndexError, ValueError) as e:
        sys.exit(f"microvm_boot: audit --isolation {isolation} of {fixture_dir} left no usable bundle ({e}); exit {p.returncode}:\n{p.stderr[-2000:]}")
    return wall, first, verdict


def audits(glassbox, runs):
    """The MCP part: whole audits of the fixtures both ways."""
    fixtures = os.path.join(ROOT, "fixtures")
    with open(os.path.join(fixtures, "manifest.json")) as f:
        cases = {c["name"]: c for c in json.load(f)["cases"]}
    scratch = tempfile.mkdtemp(prefix="glassbox-bench-microvm-")
    # A state folder of the bench's own: no selftest record, the same in both backends.
    env = dict(os.environ, GLASSBOX_STATE_DIR=os.path.join(scratch, "state"))
    results = []
    try:
        for name in AUDIT_FIXTURES:
            case = cases[name]
            d = os.path.join(fixtures, case["dir"])
            audit_once(glassbox, d, case["command"], "microvm", scratch, env)  # warm-up
            got = {"namespace": [], "microvm": []}
            for _ in range(runs):
                for iso in ("microvm", "namespace"):
                    got[iso].append(audit_once(glassbox, d, case["command"], iso, scratch, env))
            r = {"fixture": name, "command": case["command"], "runs": runs}
            for iso, xs in got.items():
                r[f"{iso}_audit_s"] = median([w for w, _, _ in xs])
                r[f"{iso}_first_response_s"] = median([f for _, f, _ in xs])
                r[f"{iso}_verdicts"] = sorted({v for _, _, v in xs})
            r["added_first_response_s"] = r["microvm_first_response_s"] - r["namespace_first_response_s"]
            r["ratio_audit"] = r["microvm_audit_s"] / r["namespace_audit_s"]
            results.append(r)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(f"MCP: glassbox audit (its default runs: capture, denied, trigger), median of {runs} runs, seconds")
    print(f"{'fixture':30} {'VM 1st resp':>11} {'NS 1st resp':>11} {'added':>6} {'VM audit':>8} {'NS audit':>8} {'ratio':>6}")
    for r in results:
        print(
            f"{r['fixture']:30} {fmt(r['microvm_first_response_s']):>11} {fmt(r['namespace_first_response_s']):>11} "
            f"{fmt(r['added_first_response_s']):>6} {fmt(r['microvm_audit_s']):>8} {fmt(r['namespace_audit_s']):>8} "
            f"{r['ratio_audit']:5.1f}x"
        )
        if r["microvm_verdicts"] != r["namespace_verdicts"]:
            print(f"  verdicts differ: microvm {r['microvm_verdicts']}, namespace {r['namespace_verdicts']}")
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--target", default=os.path.join(ROOT, "target", "debug"))
    ap.add_argument("--small-agent", action="store_true", help="boot glassbox-vm-agent instead of glassbox vm-agent")
    ap.add_argument("--no-audit", action="store_true", help="skip the MCP part (whole audits of fixtures)")
    ap.add_argument("--json", help="also write the results to FILE")
    ap.add_argument("cmd", nargs="*", help="one command (after --); default: echo and python3")
    a = ap.parse_args()

    vm_run = os.path.join(a.target, "examples", "vm_run")
    glassbox = os.path.join(a.target, "glassbox")
    for path, how in [(vm_run, "cargo build -p glassbox-vm --examples --bins"), (glassbox, "cargo build -p glassbox-cli")]:
        if not os.path.exists(path):
            sys.exit(f"microvm_boot: {path} is missing: {how}")
    agent = os.path.join(a.target, "glassbox-vm-agent") if a.small_agent else glassbox
    commands = [a.cmd] if a.cmd else DEFAULT_COMMANDS

    results = []
    accel = None
    for cmd in commands:
        vm_argv = [vm_run, "--agent", agent, "--"] + cmd
        ns_argv = [glassbox, "trace", "--"] + cmd
        # Warm-up: kernel extraction, initramfs, KVM probe; the page cache.
        timed(vm_argv)
        timed(ns_argv)
        vm, ns, facts = [], [], []
        for _ in range(a.runs):
            first, total, code, err = timed(vm_argv)
            if code != 0 or first is None:
                sys.exit(f"microvm_boot: {' '.join(cmd)} in the microVM failed ({code}):\n{err}")
            line = next((l for l in err.splitlines() if l.startswith("{")), "{}")
            facts.append(json.loads(line))
            vm.append((first, total))
            first, total, code, err = timed(ns_argv)
            if code != 0 or first is None:
                sys.exit(f"microvm_boot: glassbox trace {' '.join(cmd)} failed ({code}):\n{err[-2000:]}")
            ns.append((first, total))
        accel = facts[-1].get("accel"), facts[-1].get("accel_reason")
        r = {
            "command": cmd,
            "runs": a.runs,
            "microvm_first_output_s": median([f for f, _ in vm]),
            "microvm_total_s": median([t for _, t in vm]),
            "microvm_agent_ready_s": median([f.get("ready_ms", 0) / 1000 for f in facts]),
            "microvm_prepare_s": median([f.get("prepared_ms", 0) / 1000 for f in facts]),
            "namespace_first_output_s": median([f for f, _ in ns]),
            "namespace_total_s": median([t for _, t in ns]),
        }
        r["ratio_first_output"] = r["microvm_first_output_s"] / r["namespace_first_output_s"]
        results.append(r)

    print(f"accelerator: {accel[0]} ({accel[1]})")
    print(f"agent: {'glassbox-vm-agent' if a.small_agent else 'glassbox vm-agent'}; median of {a.runs} runs, seconds")
    print(f"{'command':36} {'VM first':>8} {'VM end':>7} {'VM ready':>8} {'NS first':>8} {'NS end':>7} {'ratio':>7}")
    for r in results:
        c = " ".join(r["command"])
        c = c if len(c) <= 36 else c[:33] + "..."
        print(
            f"{c:36} {fmt(r['microvm_first_output_s']):>8} {fmt(r['microvm_total_s']):>7} "
            f"{fmt(r['microvm_agent_ready_s']):>8} {fmt(r['namespace_first_output_s']):>8} "
            f"{fmt(r['namespace_total_s']):>7} {r['ratio_first_output']:6.1f}x"
        )
    audit_results = [] if a.no_audit else audits(glassbox, a.runs)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"accel": accel[0], "accel_reason": accel[1], "results": results, "audits": audit_results}, f, indent=2)


if __name__ == "__main__":
    main()
