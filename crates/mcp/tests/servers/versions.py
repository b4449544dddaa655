"""A stdio server that speaks only the protocol versions in $MCP_VERSIONS (comma-separated),
with the tools of mcp_logic. With $MCP_LATE_DISCOVER=1 it answers server/discover only once
`initialize` has arrived (a slow server: the client gave up waiting for the probe), then answers
`initialize` too."""
import os

from mcp_common import messages, send
from mcp_logic import Logic, RpcError

logic = Logic(os.environ["MCP_VERSIONS"].split(","))
late = os.environ.get("MCP_LATE_DISCOVER") == "1"
state = {}
held = []


def answer(msg):
    try:
        result = logic.handle(msg, state)
    except RpcError as e:
        send(e.response(msg.get("id")))
        return
    if result is not None:
        send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


for msg in messages(discover=True):
    if late and msg.get("method") == "server/discover":
        held.append(msg)
        continue
    if msg.get("method") == "initialize":
        for early in held:
            answer(early)
        held.clear()
    answer(msg)
