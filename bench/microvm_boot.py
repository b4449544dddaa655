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

Usage: bench/microvm_boot.py [--runs N] [--target DIR] [--small-agent] [--json FILE] [-- CMD ...]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--target", default=os.path.join(ROOT, "target", "debug"))
    ap.add_argument("--small-agent", action="store_true", help="boot glassbox-vm-agent instead of glassbox vm-agent")
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
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"accel": accel[0], "accel_reason": accel[1], "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
