"""Helpers shared by the test MCP servers (stdlib only)."""
import json
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


def messages():
    """Every JSON message on stdin, until it closes."""
    for line in sys.stdin.buffer:
        line = line.strip()
        if line:
            yield json.loads(line)


def initialize_result(msg, capabilities=None, name="test-server", version=None):
    return {
        "protocolVersion": version or msg["params"]["protocolVersion"],
        "capabilities": capabilities if capabilities is not None else {"tools": {}},
        "serverInfo": {"name": name, "version": "1.0.0"},
    }


def text(value, is_error=False):
    return {"content": [{"type": "text", "text": value}], "isError": is_error}
