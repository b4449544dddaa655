#!/usr/bin/env python3
"""The whole MCP surface (`--surface all`, the default) against tools only (`--surface tools`),
side by side in one run, at the default `--explore quick`.

1. A server written here (Python, stdlib only) with 10 tools, 20 resources, 10 resource
   templates and 10 prompts (every prompt with two arguments), answering at once; audited
   with each setting (`--network capture`, ROUNDS rounds interleaved, medians kept): the
   audit's wall time, the requests made (tool calls, reads, gets), and the ratio.
2. A whole audit (both runs) of @modelcontextprotocol/server-everything@2026.8.31 (tools,
   resources, templates, prompts and completions) as glassbox installs it (the install is
   cached by a first audit, not timed), once per setting by default (`--everything-rounds`).

The issue's target: the whole surface costs no more than the tool calls it sits beside, at
most 1.5x the audit time of tools alone.

Usage: bench/surface.py [--rounds N] [--everything-rounds N] [--no-everything] [GLASSBOX]
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
SETTINGS = ["tools", "all"]

SERVER = r'''
import json, sys
TOOLS = [{"name": "tool_%02d" % i, "description": "Tool %d." % i, "inputSchema": {
    "type": "object", "properties": {"text": {"type": "string"}, "verbose": {"type": "boolean"}},
    "required": ["text"]}} for i in range(10)]
RESOURCES = [{"uri": "mem://doc/%02d" % i, "name": "doc %d" % i} for i in range(20)]
TEMPLATES = [{"uriTemplate": "mem://t%02d/{name}" % i, "name": "t%d" % i} for i in range(10)]
PROMPTS = [{"name": "prompt_%02d" % i, "arguments": [{"name": "topic", "required": True},
                                                     {"name": "style"}]} for i in range(10)]
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    method, params = msg["method"], msg.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": params["protocolVersion"],
                  "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                  "serverInfo": {"name": "surface", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps(params.get("arguments"))}]}
    elif method == "resources/list":
        result = {"resources": RESOURCES}
    elif method == "resources/templates/list":
        result = {"resourceTemplates": TEMPLATES}
    elif method == "resources/read":
        result = {"contents": [{"uri": params.get("uri"), "text": "contents"}]}
    elif method == "prompts/list":
        result = {"prompts": PROMPTS}
    elif method == "prompts/get":
        result = {"messages": [{"role": "user", "content": {"type": "text",
                                                             "text": json.dumps(params)}}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


def audit(glassbox, surface, argv, cwd, state, network="capture"):
    """One audit; (wall seconds, requests made, verdict)."""
    with tempfile.TemporaryDirectory() as tmp:
        evidence = os.path.join(tmp, "evidence")
        report = os.path.join(tmp, "report.json")
        env = dict(os.environ, GLASSBOX_STATE_DIR=state)
        start = time.monotonic()
        subprocess.run([glassbox, "audit", "--no-selftest", "--quiet", "--network", network,
                        "--surface", surface, "--evidence", evidence, "--json", report] + argv,
                       env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        wall = time.monotonic() - start
        with open(report) as f:
            r = json.load(f)
        calls = sum(r.get("call_outcomes", {}).values())
        with open(os.path.join(evidence, "manifest.json")) as f:
            m = json.load(f)
        reads = sum(len(s.get("reads", [])) for s in m.get("session", {}).get("surface", []))
        return wall, calls + reads, r["verdict"]


def table(title, rows):
    print(title)
    print("%-6s %9s %9s %10s %s" % ("surface", "requests", "audit s", "x tools", "verdict"))
    base = statistics.median(r[0] for r in rows["tools"])
    for s in SETTINGS:
        wall = statistics.median(r[0] for r in rows[s])
        n = statistics.median(r[1] for r in rows[s])
        print("%-6s %9d %9.2f %10.2f %s" % (s, n, wall, wall / base, rows[s][-1][2]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--everything-rounds", type=int, default=1)
    ap.add_argument("--no-everything", action="store_true")
    ap.add_argument("glassbox", nargs="?",
                    default=os.path.join(ROOT, "target", "release", "glassbox"))
    a = ap.parse_args()
    state = tempfile.mkdtemp(prefix="gb-bench-surface-")
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "server.py"), "w") as f:
            f.write(SERVER)
        rows = {s: [] for s in SETTINGS}
        for _ in range(a.rounds):
            for s in SETTINGS:
                rows[s].append(audit(a.glassbox, s, ["--", sys.executable, "server.py"], work,
                                     state))
        table("10 tools, 20 resources, 10 templates, 10 prompts; %d rounds (medians), "
              "--network capture, --explore quick" % a.rounds, rows)
    if a.no_everything:
        return
    audit(a.glassbox, "tools", [EVERYTHING], ROOT, state)
    rows = {s: [] for s in SETTINGS}
    for _ in range(a.everything_rounds):
        for s in SETTINGS:
            rows[s].append(audit(a.glassbox, s, [EVERYTHING], ROOT, state, network="both"))
    print()
    table("%s, whole audit (both runs), %d round(s)" % (EVERYTHING[4:], a.everything_rounds),
          rows)


if __name__ == "__main__":
    main()
