"""The protocol side of the version-negotiation test servers (stdlib only), shared by
`versions.py` (stdio) and `http_server.py` (HTTP).

A server speaks the versions it is given. Legacy versions (2025-11-25 and earlier) negotiate
with `initialize`: an offered version it speaks is echoed, otherwise it answers with its latest.
The modern version (2026-07-28) answers `server/discover` and serves requests that carry it in
`_meta` (one that names another version gets -32022 with the supported list). A server with no
legacy version rejects `initialize`; one with no modern version rejects `server/discover` the
way legacy servers do (-32601, or over HTTP whatever the transport decides).
"""

LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
MODERN = ["2026-07-28"]
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"


class RpcError(Exception):
    def __init__(self, code, message, data=None, status=200):
        super().__init__(message)
        self.code, self.message, self.data, self.status = code, message, data, status

    def response(self, msg_id):
        error = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def tools(era):
    """The tools: `echo` (its `text` mirrored into a header under 2026-07-28 over HTTP),
    `ask` (legacy: server-to-client requests; the transport implements it), `confirm`
    (modern: asks for input with an InputRequiredResult)."""
    echo = {
        "name": "echo",
        "description": "Echo text back",
        "inputSchema": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1, "x-mcp-header": "Text"},
                "opts": {"type": "object", "properties": {
                    "loud": {"type": "boolean", "x-mcp-header": "Loud"}},
                    "required": ["loud"]},
            },
            "required": ["text", "opts"],
        },
    }
    second = {"name": "ask" if era == "legacy" else "confirm",
              "inputSchema": {"type": "object"}}
    return [echo, second]


class Logic:
    def __init__(self, versions, name="versions-test-server"):
        self.versions = list(versions)
        self.legacy = [v for v in self.versions if v in LEGACY]
        # Any later version is stateless too (a server from the future).
        self.modern = [v for v in self.versions if v >= MODERN[0]]
        self.name = name
        self.server_info = {"name": name, "version": "1.0.0"}

    def capabilities(self):
        return {"tools": {"listChanged": True}, "logging": {}}

    def initialize(self, msg):
        if not self.legacy:
            # A modern-only server names what it speaks in its error.
            raise RpcError(-32601, "initialize is not supported: this server speaks %s"
                           % ", ".join(self.modern), status=400)
        offered = (msg.get("params") or {}).get("protocolVersion")
        version = offered if offered in self.legacy else self.legacy[-1]
        return version, {
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "serverInfo": self.server_info,
        }

    def check_modern(self, msg):
        """The version a modern request carries, or the error to answer with."""
        params = msg.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(meta, dict) or META_VERSION not in meta or META_CAPS not in meta:
            raise RpcError(-32602, "missing _meta protocol version or client capabilities",
                           status=400)
        requested = meta[META_VERSION]
        if requested not in self.modern:
            raise RpcError(-32022, "Unsupported protocol version",
                           {"supported": self.versions, "requested": requested}, status=400)
        return requested

    def discover(self, msg):
        if not self.modern:
            raise RpcError(-32601, "Method not found: server/discover", status=404)
        self.check_modern(msg)
        return {
            "resultType": "complete",
            "supportedVersions": self.versions,
            "capabilities": self.capabilities(),
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": self.server_info},
        }

    def call(self, msg, era):
        params = msg.get("params") or {}
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "echo":
            text = args.get("text")
            if not isinstance(text, str) or not text:
                raise RpcError(-32602, "text must be a non-empty string")
            return complete({"content": [{"type": "text", "text": text}], "isError": False}, era)
        if name == "ask" and era == "legacy":
            # Over HTTP with event streams, the transport sends server requests instead.
            return complete({"content": [{"type": "text", "text": "asked nothing"}]}, era)
        if name == "confirm" and era == "modern":
            responses = params.get("inputResponses")
            state = params.get("requestState")
            if responses is None:
                return {
                    "resultType": "input_required",
                    "inputRequests": {
                        "ok": {"method": "elicitation/create", "params": {
                            "mode": "form", "message": "Proceed?",
                            "requestedSchema": {"type": "object", "properties": {}}}},
                        "dirs": {"method": "roots/list"},
                        "llm": {"method": "sampling/createMessage", "params": {
                            "messages": [], "maxTokens": 5}},
                    },
                    "requestState": "state-1",
                }
            good = (state == "state-1"
                    and responses.get("ok", {}).get("action") in ("decline", "accept")
                    and responses.get("dirs") == {"roots": []}
                    and responses.get("llm", {}).get("role") == "assistant")
            return complete({"content": [{"type": "text", "text": "declined" if good
                                          else "unexpected answers: %r" % (responses,)}],
                             "isError": not good}, era)
        raise RpcError(-32602, "unknown tool %r" % (name,))

    def handle(self, msg, state):
        """The answer to one request (`None` for notifications and responses). `state` is the
        legacy session: {"version": ...} once initialized. Raises RpcError."""
        method = msg.get("method")
        if not isinstance(method, str) or "id" not in msg:
            return None
        if method == "server/discover":
            return self.discover(msg)
        if method == "initialize":
            version, result = self.initialize(msg)
            state["version"] = version
            return result
        params = msg.get("params")
        modern_request = isinstance(params, dict) and isinstance(params.get("_meta"), dict) \
            and META_VERSION in params["_meta"]
        if modern_request:
            self.check_modern(msg)
            era = "modern"
        elif "version" in state:
            era = "legacy"
        else:
            raise RpcError(-32600, "not initialized", status=400)
        if method == "tools/list":
            return complete({"tools": tools(era)}, era)
        if method == "tools/call":
            return self.call(msg, era)
        if method == "ping":
            return {}
        raise RpcError(-32601, "method not found: %s" % method, status=404)


def complete(result, era):
    if era == "modern":
        result = dict(result, resultType="complete")
    return result
