"""Answers with invalid or unusual JSON-RPC, depending on its argument."""
import sys

from mcp_common import error, initialize_result, messages, result, send, text, write_raw

mode = sys.argv[1]

JUNK = [
    "[1, 2]",
    "42",
    '"just a string"',
    "null",
    '{"foo": 1}',
    '{"jsonrpc": "2.0", "id": {"x": 1}, "result": {}}',
    '{"jsonrpc": "2.0", "id": "1", "result": {}}',
    '{"jsonrpc": "2.0", "id": 999, "result": {}}',
    '{"jsonrpc": "2.0", "method": 5}',
    '{"jsonrpc": "2.0", "id": 1}',
    '{"jsonrpc": "2.0", "id": null, "method": "ping"}',
    "[]",
]

TOOLS = [
    {"name": "not_object", "inputSchema": {"type": "object"}},
    {"name": "rpc_error", "inputSchema": {"type": "object"}},
    {"name": "hang", "inputSchema": {"type": "object"}},
    {"name": "both", "inputSchema": {"type": "object"}},
    {"name": "ok", "inputSchema": {"type": "object"}},
    {"description": "no name"},
    {"name": 12},
    "not a tool",
    {"name": "ok", "description": "a duplicate"},
]

page = 0
for msg in messages():
    method = msg.get("method")
    msg_id = msg.get("id")
    params = msg.get("params") or {}
    if method == "initialize":
        if mode == "init-not-object":
            result(msg_id, "hello")
        elif mode == "bad-version":
            result(msg_id, initialize_result(msg, version="1999-01-01"))
        elif mode == "init-error":
            error(msg_id, -32600, "nope")
        elif mode == "wrong-id":
            send({"jsonrpc": "2.0", "id": str(msg_id), "result": initialize_result(msg)})
        else:
            if mode == "junk-then-ok":
                for line in JUNK:
                    write_raw(line + "\n")
            result(msg_id, initialize_result(msg))
    elif method == "tools/list":
        if mode == "junk-then-ok":
            result(msg_id, {"tools": TOOLS})
        elif mode == "loop-cursor":
            result(msg_id, {"tools": [{"name": "looped"}], "nextCursor": "again"})
        elif mode == "endless-pages":
            page += 1
            result(msg_id, {"tools": [{"name": "t%d" % page}], "nextCursor": "c%d" % page})
        elif mode == "slow-tools":
            result(msg_id, {"tools": [{"name": n} for n in ("t1", "t2", "t3")]})
        elif mode == "list-not-object":
            result(msg_id, [1, 2, 3])
    elif method == "tools/call":
        name = params.get("name")
        if mode in ("loop-cursor", "endless-pages"):
            result(msg_id, text("fine"))
        elif name == "not_object":
            result(msg_id, "oops")
        elif name == "rpc_error":
            error(msg_id, -32000, "tool exploded")
        elif name == "both":
            send({"jsonrpc": "2.0", "id": msg_id, "result": {}, "error": {"code": 1}})
        elif name == "ok":
            result(msg_id, text("fine"))
        # `hang` and the slow tools never answer.
