"""An MCP server built with the official Python SDK (`mcp`: 2.x's MCPServer, or 1.x's FastMCP),
for interoperability tests.

    python sdk_server.py stdio
    python sdk_server.py http [--json] [--stateless]   streamable HTTP at /mcp
    python sdk_server.py sse                             the legacy HTTP+SSE transport at /sse

Over HTTP it binds 127.0.0.1 on an ephemeral port and prints `PORT <n>` once it listens.
"""
import asyncio
import socket
import sys

from pydantic import BaseModel

try:
    from mcp.server.mcpserver import Context, MCPServer
except ImportError:  # 1.x
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("sdk-test-server")


@server.tool(description="Echo text back")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Logs and reports progress while it works")
async def work(steps: int, ctx: Context) -> str:
    await ctx.info("working")
    await ctx.report_progress(1, 2)
    return "worked"


class Answer(BaseModel):
    ok: bool


@server.tool(description="Asks the user")
async def ask(ctx: Context) -> str:
    try:
        result = await ctx.elicit("Proceed?", Answer)
        return "elicitation: %s" % result.action
    except Exception as e:  # the client cannot elicit: the tool says so
        return "elicitation refused: %s" % type(e).__name__


@server.resource("config://settings", description="The server's settings")
def settings() -> str:
    return "theme=dark"


@server.resource("notes://{name}", description="A note, by its name")
def note(name: str) -> str:
    return "note " + name


@server.prompt(description="Review a piece of code")
def review(code: str, language: str = "python") -> str:
    return "Review this %s code:\n%s" % (language, code)


@server.completion()
async def complete(ref, argument, context):
    return None


def main():
    mode = sys.argv[1]
    if mode == "stdio":
        server.run()
        return
    import uvicorn

    json_response, stateless = "--json" in sys.argv, "--stateless" in sys.argv
    if mode == "sse":
        app = server.sse_app()
    elif hasattr(server, "settings") and hasattr(server.settings, "stateless_http"):  # 1.x
        server.settings.json_response = json_response
        server.settings.stateless_http = stateless
        app = server.streamable_http_app()
    else:
        app = server.streamable_http_app(json_response=json_response, stateless_http=stateless)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print("PORT %d" % sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


main()
