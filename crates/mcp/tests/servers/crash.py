"""Crashes: `immediately`; `after-init` right after answering initialize; `during-call` when
`boom` is called; `close-stdin` closes its stdin, says so on stdout, and waits."""
import os
import sys
import time

from mcp_common import initialize_result, messages, result, text, write_raw

mode = sys.argv[1]
if mode == "immediately":
    os._exit(2)
if mode == "close-stdin":
    sys.stdin.close()
    os.close(0)
    write_raw("stdin closed\n")
    time.sleep(30)
    sys.exit(0)
TOOLS = [{"name": n, "inputSchema": {"type": "object"}} for n in ("first", "boom", "last")]

for msg in messages():
    method = msg.get("method")
    msg_id = msg.get("id")
    if method == "initialize":
        result(msg_id, initialize_result(msg))
        if mode == "after-init":
            os._exit(3)
    elif method == "tools/list":
        result(msg_id, {"tools": TOOLS})
    elif method == "tools/call":
        if msg["params"]["name"] == "boom":
            os._exit(1)
        result(msg_id, text("fine"))
