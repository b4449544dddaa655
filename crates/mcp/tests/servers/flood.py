"""Floods stdout before serving: 4 lines of 40 MB without a newline until their end, then
500,000 short garbage lines (about 170 MB in all). Then it serves one tool normally."""
from mcp_common import error, initialize_result, messages, result, text, write_raw

chunk = b"A" * 40_000_000
for _ in range(4):
    write_raw(chunk)
    write_raw(b"\n")
del chunk
block = b"".join(b"garbage line %d\n" % i for i in range(500_000))
write_raw(block)
del block

for msg in messages():
    method = msg.get("method")
    msg_id = msg.get("id")
    if method == "initialize":
        result(msg_id, initialize_result(msg))
    elif method == "tools/list":
        result(msg_id, {"tools": [{"name": "after_flood", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        result(msg_id, text("survived"))
    elif msg_id is not None:
        error(msg_id, -32601, "method not found")
