"""Prints log lines, garbage and invalid UTF-8 on stdout between its messages.

Argument: how many extra noise lines to print at start (default 0).
"""
import sys

from mcp_common import error, initialize_result, messages, result, text, write_raw

extra = int(sys.argv[1]) if len(sys.argv) > 1 else 0

write_raw("Starting noisy server v1 on stdio...\n")
write_raw(b"\xff\xfe binary junk \x00\x01\n")
write_raw("\n")
for i in range(extra):
    write_raw("noise line %d\n" % i)

for msg in messages():
    method = msg.get("method")
    msg_id = msg.get("id")
    if msg_id is not None:
        write_raw("DEBUG handling %s\n" % method)
    if method == "initialize":
        result(msg_id, initialize_result(msg))
    elif method == "tools/list":
        result(msg_id, {"tools": [{"name": "noisy_tool", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        result(msg_id, text("done"))
    elif msg_id is not None:
        error(msg_id, -32601, "method not found")

write_raw("bye\n")
