"""Helpers shared by the test MCP servers (stdlib only)."""
import json
import os
import sys

OUT = sys.stdout.buffer


def write_raw(data):
    """Write bytes (or text) to stdout as they are, and flush."""
    if isinstance(data, str):
        data = data.encode()
    OUT.write(data)
    OUT.flush()


def send(obj):
    # json.dumps with its default separators (", ", ": "): the spaces let tests check that the
    # transcript keeps the server's bytes, not a re-serialization.
    write_raw(json.dumps(obj) + "\n")


def result(msg_id, value):
    send({"jsonrpc": "2.0", "id": msg_id, "result": value})


def error(msg_id, code, message):
    send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


def messages(discover=False):
    """Every JSON message on stdin, until it closes.

    Unless `discover`, a `server/discover` request is answered with -32601 "method not found"
    and not yielded: the servers that use this are of the legacy (initialize) era, and that is
    how most of those answer the probe of a 2026-07-28 client. With $MCP_SILENT_DISCOVER=1 it
    is ignored instead, as some legacy servers do."""
    silent = os.environ.get("MCP_SILENT_DISCOVER") == "1"
    for line in sys.stdin.buffer:
        line = line.strip()
        if line:
            msg = json.loads(line)
            if not discover and isinstance(msg, dict) and msg.get("method") == "server/discover":
                if not silent:
                    error(msg.get("id"), -32601, "Method not found: server/discover")
                continue
            yield msg


def initialize_result(msg, capabilities=None, name="test-server", version=None):
    return {
        "protocolVersion": version or msg["params"]["protocolVersion"],
        "capabilities": capabilities if capabilities is not None else {"tools": {}},
        "serverInfo": {"name": name, "version": "1.0.0"},
    }


def text(value, is_error=False):
    return {"content": [{"type": "text", "text": value}], "isError": is_error}
