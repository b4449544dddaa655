"""Sends notifications and server-to-client requests in the middle of a tool call, checks the
answers (a ping answered, a sampling request given an assistant message, the roots listed, an
elicitation declined or accepted), and reports what it got as the tool result."""
import json

from mcp_common import initialize_result, messages, result, send, text

REQUESTS = [
    {"jsonrpc": "2.0", "id": "p-1", "method": "ping"},
    {"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage",
     "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 10}},
    {"jsonrpc": "2.0", "id": "r-1", "method": "roots/list"},
    {"jsonrpc": "2.0", "id": 8, "method": "elicitation/create",
     "params": {"message": "password?", "requestedSchema": {"type": "object"}}},
]

incoming = messages()
for msg in incoming:
    method = msg.get("method")
    msg_id = msg.get("id")
    if method == "initialize":
        result(msg_id, initialize_result(msg))
    elif method == "tools/list":
        result(msg_id, {"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "method": "notifications/progress",
              "params": {"progressToken": 1, "progress": 0.5}})
        send({"jsonrpc": "2.0", "method": "notifications/message",
              "params": {"level": "info", "data": "working"}})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        for request in REQUESTS:
            send(request)
        answers = {}
        while len(answers) < len(REQUESTS):
            reply = next(incoming)
            answers[json.dumps(reply["id"])] = reply
        ok = (
            answers['"p-1"'].get("result") == {}
            and answers["7"]["result"]["role"] == "assistant"
            and answers["7"]["result"]["content"]["type"] == "text"
            and isinstance(answers['"r-1"']["result"]["roots"], list)
            and answers["8"]["result"]["action"] in ("decline", "accept")
        )
        result(msg_id, text(json.dumps(sorted(answers)), is_error=not ok))
