#!/usr/bin/env python3
"""A whole MCP session of a real server, traced against untraced, side by side.

The server is @modelcontextprotocol/server-memory@2026.8.31 as glassbox installs it (one
`glassbox audit npm:...` first, which also warms the install cache and records the session).
The session is the one that audit ran: its transcript's client messages (initialize, the
listings, one call of every tool, the final listing) are replayed, each request waiting for
its answer, against

  untraced: the server's executable run directly, no sandbox, no recorder;
  traced:   the same executable under `glassbox trace` (namespace sandbox, seccomp recorder,
            eBPF where available, fanotify on the planted secrets, the network edge answering:
            the run's CA made and trusted in the sandbox, TLS terminated);
  refuse:   the same with `--responder refuse`, the edge before it answered (no CA, no trust
            store laid out): what answering costs a session.

Wall time from start to exit (stdin closed after the last answer), ROUNDS rounds interleaved,
the median kept; the ratio traced/untraced is printed with the 1.3x target. Both runs keep
the server's memory file in a fresh temporary folder (MEMORY_FILE_PATH).

Usage: bench/session_overhead.py [--rounds N] [GLASSBOX]
"""
import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "npm:@modelcontextprotocol/server-memory@2026.8.31"
TARGET = 1.3


def record_session(glassbox, state, evidence):
    """Audits the package once (installing it, warm cache after) and returns the server's
    command line and the client's messages of that session."""
    env = dict(os.environ, GLASSBOX_STATE_DIR=state)
    subprocess.run([glassbox, "audit", "--no-selftest", "--quiet", "--network", "capture",
                    "--evidence", evidence, PACKAGE],
                   env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    with open(os.path.join(evidence, "manifest.json")) as f:
        manifest = json.load(f)
    command = manifest["target"]["command"]
    install_dir = manifest["install"]["dir"]
    messages = []
    with open(os.path.join(evidence, "transcript.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e["dir"] == "client_to_server":
                messages.append(e["raw"])
    return command, install_dir, messages


def session(argv, messages, env):
    """Runs argv, replays messages (a request waits for its answer), closes stdin; returns
    the wall time to exit and the number of answers."""
    start = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    buf = b""
    answers = 0
    for raw in messages:
        p.stdin.write(raw.encode() + b"\n")
        p.stdin.flush()
        msg = json.loads(raw)
        if "id" not in msg:
            continue
        want = msg["id"]
        got = False
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            while b"\n" in buf and not got:
                line, buf = buf.split(b"\n", 1)
                try:
                    reply = json.loads(line)
                except ValueError:
                    continue
                if reply.get("id") == want and "method" not in reply:
                    got = True
                    answers += 1
            if got:
                break
            r, _, _ = select.select([p.stdout], [], [], 1)
            if r:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
        if not got:
            break
    p.stdin.close()
    p.wait(timeout=30)
    return time.monotonic() - start, answers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("glassbox", nargs="?", default=os.path.join(ROOT, "target/release/glassbox"))
    args = ap.parse_args()
    if not os.path.exists(args.glassbox):
        sys.exit(f"build glassbox first: cargo build --release -p glassbox-cli ({args.glassbox})")
    work = tempfile.mkdtemp(prefix="gb-session-bench-")
    state = os.environ.get("GLASSBOX_STATE_DIR", os.path.join(work, "state"))
    command, install_dir, messages = record_session(args.glassbox, state, os.path.join(work, "evidence"))
    requests = sum(1 for m in messages if "id" in json.loads(m))
    print(f"server: {PACKAGE} ({command[0]})")
    print(f"session: {len(messages)} client messages, {requests} requests "
          f"(initialize, listings, every tool called once)")
    times = {"untraced": [], "traced": [], "refuse": []}
    for i in range(args.rounds):
        for variant in ("untraced", "traced", "refuse"):
            mem = os.path.join(work, f"{variant}-{i}")
            os.makedirs(mem)
            env = dict(os.environ, MEMORY_FILE_PATH=os.path.join(mem, "memory.jsonl"))
            if variant == "untraced":
                argv = command
            else:
                # Inside the sandbox, /tmp is its own: the file goes there.
                argv = [args.glassbox, "trace", "--out", os.path.join(mem, "events.jsonl"),
                        "--ro", install_dir, "--responder",
                        "refuse" if variant == "refuse" else "ok",
                        "--env", "MEMORY_FILE_PATH=/tmp/memory.jsonl", "--"] + command
            wall, answers = session(argv, messages, env)
            if answers != requests:
                sys.exit(f"{variant}: {answers} of {requests} requests answered")
            times[variant].append(wall)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["traced"] / med["untraced"]
    print(f"{'variant':10} {'median wall':>12}  rounds")
    for k, v in times.items():
        print(f"{k:10} {med[k]:10.3f} s  " + " ".join(f"{x:.3f}" for x in v))
    verdict = "met" if ratio <= TARGET else "NOT met"
    print(f"traced / untraced: {ratio:.2f}x (target <= {TARGET}x: {verdict})")
    print(f"answering edge / refusing edge: {med['traced'] / med['refuse']:.2f}x "
          f"({(med['traced'] - med['refuse']) * 1000:+.0f} ms a session)")


if __name__ == "__main__":
    main()
