"""A tool that floods the client with requests (sampling, elicitation, roots, nested inside
each other's waits: it never waits for an answer before the next) and then answers; and a
tool that asks until the client stops answering. Reports how many answers and errors it got."""
import json
import sys

from mcp_common import initialize_result, messages, result, send, text

FLOOD = int(sys.argv[1]) if len(sys.argv) > 1 else 200
METHODS = ["sampling/createMessage", "elicitation/create", "roots/list"]
incoming = messages()
for msg in incoming:
    method = msg.get("method")
    msg_id = msg.get("id")
    if method == "initialize":
        result(msg_id, initialize_result(msg))
    elif method == "tools/list":
        result(msg_id, {"tools": [{"name": "flood", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        for i in range(FLOOD):
            m = METHODS[i % len(METHODS)]
            params = {"messages": [], "maxTokens": 1} if m.startswith("sampling") else (
                {"message": "?", "requestedSchema": {"type": "object"}}
                if m.startswith("elicitation") else None)
            req = {"jsonrpc": "2.0", "id": "q-%d" % i, "method": m}
            if params is not None:
                req["params"] = params
            send(req)
        got = {"result": 0, "error": 0}
        while sum(got.values()) < FLOOD:
            reply = next(incoming)
            if "method" in reply:
                continue
            got["result" if "result" in reply else "error"] += 1
        result(msg_id, text(json.dumps(got)))
