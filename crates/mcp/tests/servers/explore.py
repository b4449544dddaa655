"""A server whose tools act on their arguments, for the plans of calls.

- `copy`: `includeSecrets` (a boolean, default false) decides a branch; reports what it got.
- `config`: an `action` enum; only `dump` answers "dumped".
- `fetch`: exactly one of `url` or `alexandria` (a oneOf); both at once is an error naming
  the constraint, as a real server's; neither is a -32602.
- `strict`: rejects its first call with -32602 whatever it is sent, then accepts.
- `picky`: wants `mode` fast or slow and a `query` its schema does not require; says so in
  zod's issues (as the TypeScript SDK does, -32602), accepts once both are right.
- `list_items` returns its items' ids as JSON; `get_item` finds only an id it returned.
- `net`: a tool error as Node's fetch writes one.
- `slow`: its first call answers at once, every later one after 3 s.
"""
import json
import time

from mcp_common import error, initialize_result, messages, result, text

TOOLS = [
    {
        "name": "copy",
        "inputSchema": {
            "type": "object",
            "properties": {
                "source": {"type": "string"},
                "includeSecrets": {"type": "boolean", "default": False},
            },
            "required": ["source"],
        },
    },
    {
        "name": "config",
        "inputSchema": {
            "type": "object",
            "properties": {"action": {"enum": ["get", "list", "dump"]}},
            "required": ["action"],
        },
    },
    {
        "name": "fetch",
        "inputSchema": {
            "type": "object",
            "properties": {"url": {"type": "string"}, "alexandria": {"type": "string"}},
            "oneOf": [{"required": ["url"]}, {"required": ["alexandria"]}],
        },
    },
    {"name": "strict", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
    {
        "name": "picky",
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "mode": {"type": "string"}},
        },
    },
    {"name": "list_items", "inputSchema": {"type": "object"}},
    {
        "name": "get_item",
        "inputSchema": {
            "type": "object",
            "properties": {"item_id": {"type": "string"}},
            "required": ["item_id"],
        },
    },
    {"name": "net", "inputSchema": {"type": "object"}},
    {"name": "slow", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
]

calls = {}
for msg in messages():
    method = msg.get("method")
    msg_id = msg.get("id")
    params = msg.get("params") or {}
    if method == "initialize":
        result(msg_id, initialize_result(msg, name="explore-test-server"))
    elif method == "tools/list":
        result(msg_id, {"tools": TOOLS})
    elif method == "tools/call":
        name = params.get("name")
        args = params.get("arguments") or {}
        calls[name] = calls.get(name, 0) + 1
        if name == "copy":
            branch = "with secrets" if args.get("includeSecrets") is True else "plain"
            result(msg_id, text(branch))
        elif name == "config":
            result(msg_id, text("dumped" if args.get("action") == "dump" else "ok"))
        elif name == "fetch":
            if "url" in args and "alexandria" in args:
                result(msg_id, text("Provide exactly one of url or alexandria", True))
            elif "url" not in args and "alexandria" not in args:
                error(msg_id, -32602, "Invalid params: url or alexandria")
            else:
                result(msg_id, text("fetched"))
        elif name == "strict":
            if calls[name] == 1:
                error(msg_id, -32602, "Invalid params")
            else:
                result(msg_id, text("accepted " + json.dumps(args, sort_keys=True)))
        elif name == "picky":
            issues = []
            if "query" not in args:
                issues.append({"code": "invalid_type", "expected": "string",
                               "received": "undefined", "path": ["query"], "message": "Required"})
            if args.get("mode") not in ("fast", "slow"):
                issues.append({"received": args.get("mode"), "code": "invalid_enum_value",
                               "options": ["fast", "slow"], "path": ["mode"],
                               "message": "Invalid enum value"})
            if issues:
                error(msg_id, -32602, "Invalid arguments for tool picky: "
                      + json.dumps(issues, indent=2))
            else:
                result(msg_id, text("picked " + args["mode"]))
        elif name == "list_items":
            result(msg_id, text(json.dumps({"items": [{"id": "it-42", "title": "first"}]})))
        elif name == "get_item":
            if args.get("item_id") == "it-42":
                result(msg_id, text("item it-42"))
            else:
                result(msg_id, text("no such item: %s" % args.get("item_id"), True))
        elif name == "net":
            result(msg_id, text("TypeError: fetch failed", True))
        elif name == "slow":
            if calls[name] > 1:
                time.sleep(3)
            result(msg_id, text("slow"))
        else:
            error(msg_id, -32602, "Unknown tool")
    elif msg_id is not None:
        result(msg_id, {})
