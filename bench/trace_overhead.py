#!/usr/bin/env python3
"""glassbox trace against the same command untraced and under strace, side by side.

(a) python3 opening and closing a file 200,000 times;
(b) a Node MCP server starting, answering initialize and listing its tools;
(c) Node opening and closing a file 200,000 times (openSync/closeSync).

Each variant runs ROUNDS times, interleaved; the CPU time (user + system) of the variant's
whole process tree is measured with getrusage(RUSAGE_CHILDREN), the median is kept, and the
ratio to the untraced run is printed. Usage: bench/trace_overhead.py [--rounds N] [GLASSBOX]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_of(argv, stdin_bytes=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, input=stdin_bytes, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=ROOT, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def mcp_messages():
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    return "".join(json.dumps(m) + "\n" for m in msgs).encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("glassbox", nargs="?", default=os.path.join(ROOT, "target/release/glassbox"))
    args = ap.parse_args()
    if not os.path.exists(args.glassbox):
        sys.exit(f"build glassbox first: cargo build --release -p glassbox-cli ({args.glassbox})")
    python = subprocess.run(["python3", "-c", "import sys; print(sys.executable)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    node = shutil.which("node")
    workloads = {
        "(a) python3 open/close x200000": ([python, "bench/openloop.py"], None),
        "(b) node MCP server: initialize + tools/list":
            ([node, "fixtures/benign-node-reads-own-files/server.js"], mcp_messages()),
        "(c) node openSync/closeSync x200000": ([node, "bench/openloop.js"], None),
    }
    variants = {
        "untraced": [],
        "glassbox trace": [args.glassbox, "trace", "--out", "/dev/null", "--"],
        "strace -f": ["strace", "-f", "-qq", "-o", "/dev/null"],
        "strace -f --seccomp-bpf (same calls)": [
            "strace", "-f", "-qq", "--seccomp-bpf", "-o", "/dev/null", "-e",
            "trace=execve,execveat,open,openat,openat2,creat,stat,lstat,newfstatat,statx,"
            "access,faccessat,faccessat2,readlink,readlinkat,connect,sendto,sendmsg,sendmmsg,"
            "bind,socket"],
    }
    if not shutil.which("strace"):
        variants = {k: v for k, v in variants.items() if not k.startswith("strace")}
    # glassbox's fixed cost per run (sandbox, fresh secrets: the RSA key dominates), measured
    # in the same run, to tell it apart from the recorder's cost per traced call.
    setup = statistics.median(
        cpu_of([args.glassbox, "trace", "--out", "/dev/null", "--", "/bin/true"])
        for _ in range(args.rounds))
    print(f"glassbox per-run set-up (trace -- /bin/true): {setup:.3f}s CPU")
    for name, (cmd, stdin) in workloads.items():
        samples = {v: [] for v in variants}
        for _ in range(args.rounds):
            for v, prefix in variants.items():
                samples[v].append(cpu_of(prefix + cmd, stdin))
        base = statistics.median(samples["untraced"])
        print(f"{name}")
        for v in variants:
            med = statistics.median(samples[v])
            print(f"  {v:40s} {med:7.3f}s CPU  {med / base:5.2f}x")
        med = statistics.median(samples["glassbox trace"])
        print(f"  {'glassbox trace, set-up excluded':40s} {med - setup:7.3f}s CPU  "
              f"{(med - setup) / base:5.2f}x")
    # The honeytoken ground truth's cost: the same loop on a planted secret (a marked file:
    # the kernel queues an event per open the recorder drains) against (a)'s unmarked file.
    marked = [statistics.median(
        cpu_of([args.glassbox, "trace", "--out", "/dev/null", "--", python, "bench/openloop.py",
                p]) for _ in range(args.rounds)) for p in ("/etc/hostname", "~/.aws/credentials")]
    print("(d) the honeytoken ground truth: (a) under glassbox trace on a planted secret")
    print(f"  {'unmarked file (/etc/hostname)':40s} {marked[0]:7.3f}s CPU")
    print(f"  {'planted secret (~/.aws/credentials)':40s} {marked[1]:7.3f}s CPU  "
          f"{(marked[1] - marked[0]) * 1e6 / 200_000:6.2f} us more per open")
    print("the static filter alone: cargo bench -p glassbox-sandbox --bench filter")
    print("target: glassbox trace at most 2.0x on (a), at most 4.0x on (c)")


if __name__ == "__main__":
    main()
