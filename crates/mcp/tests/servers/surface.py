"""A server with the whole MCP surface: resources over two pages, two resource templates, a
prompt with arguments and completions, a tool that asks the user (elicitation) and a prompt
that asks the model (sampling). Every request it gets and every answer to its own requests is
reported back in the results, so that the tests can see what the client sent."""
import json

from mcp_common import error, initialize_result, messages, result, send, text

CAPABILITIES = {"tools": {}, "resources": {}, "prompts": {}, "completions": {}}
incoming = messages()
asked = 0


def ask(method, params):
    """Sends a request to the client and returns its answer (other messages are not expected
    while it waits)."""
    global asked
    asked += 1
    request_id = "srv-%d" % asked
    send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    for msg in incoming:
        if msg.get("id") == request_id and "method" not in msg:
            return msg
    raise SystemExit(0)


for msg in incoming:
    method = msg.get("method")
    msg_id = msg.get("id")
    params = msg.get("params") or {}
    if msg_id is None:
        continue
    if method == "initialize":
        result(msg_id, initialize_result(msg, CAPABILITIES))
    elif method == "tools/list":
        result(msg_id, {"tools": [{"name": "ask_user", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        answer = ask("elicitation/create", {
            "message": "Connect your account",
            "requestedSchema": {"type": "object", "properties": {
                "token": {"type": "string", "title": "API token"},
                "format": {"type": "string", "enum": ["markdown", "html"]},
            }, "required": ["token"]},
        })
        result(msg_id, text(json.dumps(answer.get("result"))))
    elif method == "resources/list":
        if params.get("cursor") == "2":
            result(msg_id, {"resources": [{"uri": "res://b", "name": "b"}]})
        else:
            result(msg_id, {"resources": [{"uri": "res://a", "name": "a"}], "nextCursor": "2"})
    elif method == "resources/templates/list":
        result(msg_id, {"resourceTemplates": [
            {"uriTemplate": "file:///{path}", "name": "file"},
            {"uriTemplate": "notes://{name}{?q}", "name": "notes"},
        ]})
    elif method == "resources/read":
        uri = params.get("uri", "")
        if uri == "res://missing":
            error(msg_id, -32002, "Resource not found")
        else:
            result(msg_id, {"contents": [{"uri": uri, "text": "read " + uri}]})
    elif method == "prompts/list":
        result(msg_id, {"prompts": [{"name": "review", "arguments": [
            {"name": "code", "required": True}, {"name": "language"}]}]})
    elif method == "prompts/get":
        answer = ask("sampling/createMessage", {"messages": [
            {"role": "user", "content": {"type": "text", "text": "hello"}}], "maxTokens": 5})
        result(msg_id, {"messages": [{"role": "user", "content": {
            "type": "text", "text": json.dumps({"arguments": params.get("arguments"),
                                                "sampled": answer.get("result")})}}]})
    elif method == "completion/complete":
        result(msg_id, {"completion": {"values": ["python"], "total": 1, "hasMore": False}})
    else:
        error(msg_id, -32601, "Method not found")
