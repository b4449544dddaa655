"""An MCP server over HTTP for the tests (stdlib only): streamable HTTP (JSON or SSE
responses, a session id, the optional GET stream, DELETE, server-to-client requests inside a
response stream, resumable streams) or the legacy HTTP+SSE transport, and misbehaviours.

    python3 http_server.py [--versions V,V] [--mode json|sse|chunked] [--legacy-sse]
                           [--bad KIND]

Listens on 127.0.0.1 on an ephemeral port (or --port N) and prints `PORT <n>` on stdout once it does.
Every request it rejects, and why, is printed on stderr (the test shows it on failure).

Streamable HTTP checks what the specification asks of a client and answers 400 otherwise: the
Accept header, the session id once assigned, `MCP-Protocol-Version` (from 2025-06-18 on), and
under 2026-07-28 `Mcp-Method`, `Mcp-Name` and the `Mcp-Param-*` headers of `echo`.

--bad KIND:
  garbage        answers every POST with bytes that are not HTTP
  huge           tools/list answered with a 300,000-byte JSON body
  endless        tools/call answered with an event stream that never ends nor answers
  content-type   tools/list answered with a JSON body labelled text/plain
  bad-chunked    tools/list answered with an invalid chunked body
  status-500     tools/call answered with HTTP 500 and an HTML page
  poll           tools/call: the stream is closed after a priming event (id, retry: 100);
                 the answer comes on the GET that resumes it with Last-Event-ID
  no-answer      tools/list answered with a JSON body that is a notification
"""
import argparse
import base64
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from mcp_logic import META_VERSION, Logic, RpcError

ap = argparse.ArgumentParser()
ap.add_argument("--versions", default="2024-11-05,2025-03-26,2025-06-18,2025-11-25,2026-07-28")
ap.add_argument("--mode", default="sse", choices=["json", "sse", "chunked"])
ap.add_argument("--legacy-sse", action="store_true")
ap.add_argument("--bad", default="")
ap.add_argument("--port", type=int, default=0, help="listen on this port (default: ephemeral)")
ARGS = ap.parse_args()
logic = Logic(ARGS.versions.split(","), name="http-test-server")

SERVER_REQUESTS = [
    {"jsonrpc": "2.0", "id": "s-ping", "method": "ping"},
    {"jsonrpc": "2.0", "id": "s-sampling", "method": "sampling/createMessage",
     "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 10}},
    {"jsonrpc": "2.0", "id": "s-roots", "method": "roots/list"},
    {"jsonrpc": "2.0", "id": "s-elicit", "method": "elicitation/create",
     "params": {"message": "password?", "requestedSchema": {"type": "object"}}},
]

lock = threading.Condition()
sessions = {}  # session id -> {"version": ..., "deleted": bool}
replies = {}  # id of a server request -> the client's reply
pending_polls = {}  # event id -> the answer to deliver on the resuming GET
legacy_streams = {}  # legacy SSE session id -> list of messages to send


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def sse_event(data, event_id=None, event=None):
    out = ""
    if event:
        out += "event: %s\n" % event
    if event_id is not None:
        out += "id: %s\n" % event_id
    for line in data.split("\n"):
        out += "data: %s\n" % line
    return (out + "\n").encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    # -- helpers ------------------------------------------------------------------------

    def reject(self, status, why, msg_id=None, code=-32600):
        log("rejected:", status, why)
        self.send_json({"jsonrpc": "2.0", "id": msg_id,
                        "error": {"code": code, "message": why}}, status)

    def send_json(self, obj, status=200, headers=()):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in headers:
            self.send_header(name, value)
        if ARGS.mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 7):
                part = body[i:i + 7]
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        self.close_connection = True

    def start_sse(self, headers=()):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True

    def write(self, data):
        self.wfile.write(data)
        self.wfile.flush()

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length)

    # -- legacy HTTP+SSE transport --------------------------------------------------------

    def legacy_get(self):
        sid = uuid.uuid4().hex
        with lock:
            legacy_streams[sid] = []
        self.start_sse()
        self.write(sse_event("/messages/?session_id=" + sid, event="endpoint"))
        try:
            while True:
                with lock:
                    lock.wait_for(lambda: legacy_streams[sid], timeout=0.5)
                    out = legacy_streams[sid][:]
                    legacy_streams[sid].clear()
                for msg in out:
                    self.write(sse_event(json.dumps(msg), event="message"))
                if not out:
                    self.write(b": keep-alive\n\n")
        except OSError:
            return

    def legacy_post(self):
        sid = parse_qs(urlparse(self.path).query).get("session_id", [""])[0]
        msg = json.loads(self.read_body())
        with lock:
            if sid not in legacy_streams:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        body = b"Accepted"
        self.send_response(202)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        state = sessions.setdefault(sid, {})
        try:
            result = logic.handle(msg, state)
            answer = None if result is None else {"jsonrpc": "2.0", "id": msg["id"],
                                                  "result": result}
        except RpcError as e:
            answer = e.response(msg.get("id"))
        with lock:
            if msg.get("method") == "tools/call":
                legacy_streams[sid].append({"jsonrpc": "2.0", "method": "notifications/message",
                                            "params": {"level": "info", "data": "calling"}})
            if answer is not None:
                legacy_streams[sid].append(answer)
            lock.notify_all()

    # -- streamable HTTP ------------------------------------------------------------------

    def do_GET(self):
        if ARGS.legacy_sse:
            if urlparse(self.path).path != "/sse":
                self.send_error(404)
                return
            self.legacy_get()
            return
        if "text/event-stream" not in (self.headers.get("Accept") or ""):
            self.reject(406, "GET must accept text/event-stream")
            return
        last = self.headers.get("Last-Event-ID")
        if last is not None:
            with lock:
                answer = pending_polls.pop(last, None)
            if answer is None:
                self.reject(404, "no stream to resume at %r" % last)
                return
            self.start_sse()
            self.write(sse_event(json.dumps(answer), event_id=last + "-done"))
            return
        sid = self.headers.get("Mcp-Session-Id")
        with lock:
            session = sessions.get(sid)
        if session is None or "version" not in session:
            self.reject(405, "no GET stream without a session")
            return
        self.start_sse()
        try:
            self.write(sse_event(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                             "params": {"level": "info",
                                                        "data": "hello from the GET stream"}})))
            while not session.get("deleted"):
                time.sleep(0.2)
                self.write(b": keep-alive\n\n")
        except OSError:
            return

    def do_DELETE(self):
        sid = self.headers.get("Mcp-Session-Id")
        with lock:
            session = sessions.get(sid)
            if session is not None:
                session["deleted"] = True
        self.send_response(200 if session is not None else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        if ARGS.legacy_sse:
            self.legacy_post()
            return
        if ARGS.bad == "garbage":
            self.wfile.write(b"HELLO THERE\r\nthis is not http\r\n\r\n")
            self.close_connection = True
            return
        accept = self.headers.get("Accept") or ""
        if "application/json" not in accept or "text/event-stream" not in accept:
            self.reject(406, "Accept must list application/json and text/event-stream")
            return
        try:
            msg = json.loads(self.read_body())
        except ValueError:
            self.reject(400, "body is not JSON", code=-32700)
            return
        method = msg.get("method")
        msg_id = msg.get("id")
        if method is None:
            # A reply to a server request.
            with lock:
                replies[json.dumps(msg.get("id"))] = msg
                lock.notify_all()
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        modern = isinstance(params.get("_meta"), dict) and META_VERSION in params["_meta"]
        headers = []
        state = {}
        if modern:
            if not self.modern_headers_ok(msg, params):
                return
        elif method == "initialize":
            pass
        elif method == "server/discover":
            # What a legacy-only server does with a request before initialize.
            pass
        else:
            sid = self.headers.get("Mcp-Session-Id")
            with lock:
                state = sessions.get(sid)
            if state is None or state.get("deleted"):
                self.reject(404 if sid else 400, "unknown or missing session id %r" % sid, msg_id)
                return
            version = state.get("version", "")
            if version >= "2025-06-18" and self.headers.get("MCP-Protocol-Version") != version:
                self.reject(400, "MCP-Protocol-Version %r, negotiated %r"
                            % (self.headers.get("MCP-Protocol-Version"), version), msg_id)
                return
            if version < "2025-06-18" and self.headers.get("MCP-Protocol-Version"):
                self.reject(400, "MCP-Protocol-Version sent for %s" % version, msg_id)
                return
        if "id" not in msg:
            # A notification.
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "server/discover" and not logic.modern:
            body = b"Bad Request: No valid session ID provided"
            self.send_response(400)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if method == "initialize":
            state = {}
        try:
            result = logic.handle(msg, state)
        except RpcError as e:
            self.send_json(e.response(msg_id), e.status)
            return
        if method == "initialize":
            sid = uuid.uuid4().hex
            with lock:
                sessions[sid] = state
            headers.append(("Mcp-Session-Id", sid))
        answer = {"jsonrpc": "2.0", "id": msg_id, "result": result}
        self.answer(msg, answer, headers, modern)

    def modern_headers_ok(self, msg, params):
        method = msg.get("method")
        want = {"MCP-Protocol-Version": params["_meta"].get(META_VERSION), "Mcp-Method": method}
        if method == "tools/call":
            want["Mcp-Name"] = params.get("name")
            args = params.get("arguments") or {}
            if params.get("name") == "echo":
                want["Mcp-Param-Text"] = args.get("text")
                want["Mcp-Param-Loud"] = json.dumps((args.get("opts") or {}).get("loud"))
        for name, value in want.items():
            got = self.headers.get(name)
            if got is not None and got.startswith("=?base64?") and got.endswith("?="):
                got = base64.b64decode(got[9:-2]).decode()
            if got != value:
                self.reject(400, "header mismatch: %s is %r, body says %r" % (name, got, value),
                            msg.get("id"), code=-32020)
                return False
        if self.headers.get("Mcp-Session-Id"):
            self.reject(400, "Mcp-Session-Id sent under 2026-07-28", msg.get("id"))
            return False
        return True

    def answer(self, msg, answer, headers, modern):
        method = msg.get("method")
        if method == "tools/list" and ARGS.bad in ("huge", "content-type", "bad-chunked",
                                                    "no-answer"):
            self.misbehave_list(answer)
            return
        if method == "tools/call" and ARGS.bad in ("endless", "status-500", "poll"):
            self.misbehave_call(answer)
            return
        name = (msg.get("params") or {}).get("name")
        if ARGS.mode != "sse":
            self.send_json(answer, headers=headers)
            return
        # An event stream: priming event, notifications and server requests (legacy) of a
        # tool call, the answer.
        self.start_sse(headers)
        self.write(b"id: prime-%s\ndata: \n\n" % str(msg["id"]).encode())
        self.write(b": a comment\r\n")
        if method == "tools/call":
            for note in ({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": 1, "progress": 0.5}},
                         {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}):
                self.write(sse_event(json.dumps(note)))
        if name == "ask" and not modern:
            for request in SERVER_REQUESTS:
                self.write(sse_event(json.dumps(request)))
            keys = [json.dumps(r["id"]) for r in SERVER_REQUESTS]
            with lock:
                got = lock.wait_for(lambda: all(k in replies for k in keys), timeout=10)
                answers = {k: replies.get(k) for k in keys}
            ok = (got and answers['"s-ping"'].get("result") == {}
                  and answers['"s-sampling"']["result"]["role"] == "assistant"
                  and isinstance(answers['"s-roots"']["result"]["roots"], list)
                  and answers['"s-elicit"']["result"]["action"] in ("decline", "accept"))
            answer["result"] = {"content": [{"type": "text", "text": json.dumps(answers)}],
                                "isError": not ok}
        # Two messages in one event's data would be a batch; keep one per event.
        self.write(sse_event(json.dumps(answer)))

    def misbehave_list(self, answer):
        if ARGS.bad == "huge":
            answer["result"]["padding"] = "x" * 300000
            self.send_json(answer)
        elif ARGS.bad == "content-type":
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif ARGS.bad == "bad-chunked":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"zz\r\n{}\r\n0\r\n\r\n")
        elif ARGS.bad == "no-answer":
            self.send_json({"jsonrpc": "2.0", "method": "notifications/message",
                            "params": {"level": "info", "data": "no answer here"}})
        self.close_connection = True

    def misbehave_call(self, answer):
        if ARGS.bad == "status-500":
            body = b"<html><body>Internal Server Error</body></html>"
            self.send_response(500)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if ARGS.bad == "poll":
            event_id = "poll-%s" % answer["id"]
            with lock:
                pending_polls[event_id] = answer
            self.start_sse()
            self.write(b"id: %s\nretry: 100\ndata: \n\n" % event_id.encode())
            return
        self.start_sse()
        try:
            n = 0
            while True:
                n += 1
                self.write(sse_event(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                                                 "params": {"progressToken": 1, "progress": n}})))
                time.sleep(0.1)
        except OSError:
            return


def main():
    server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever()


main()
