"""A small MCP server the prism-mcp tests launch as a script (stdio or Streamable HTTP).

Usage: ``python mcp_fixture_server.py stdio`` or ``python mcp_fixture_server.py http``
(binds 127.0.0.1 on a free port and prints ``PORT <n>`` on stdout first).
Some tools misbehave on purpose (crash, flood, garbage, sleep forever).
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import mcp_types
from mcp.server.mcpserver import Context, MCPServer

# An MCPServer moves fd 1 away from the protocol pipe once it runs; keep the original
# so the raw_* tools can write bytes straight onto the protocol stream.
RAW_STDOUT = os.dup(1)

server = MCPServer("prism-fixture", version="1.2.3")

PNG_1X1 = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def fail(message: str = "boom") -> str:
    """Raise, so the server answers with is_error."""
    raise ValueError(message)


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable in the server, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def spawn_child() -> int:
    """Start a long-lived child process in the server's process group; return its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return child.pid


def _touch(marker: str) -> None:
    Path(marker).write_text("cancelled")


@server.tool()
async def sleep(seconds: float, marker: str = "") -> str:
    """Sleep; if cancelled (the client sent notifications/cancelled), touch ``marker``."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if marker:
            _touch(marker)
        raise
    return f"slept {seconds}"


@server.tool()
async def progress(steps: int, interval: float, ctx: Context) -> str:
    """Report progress ``steps`` times, ``interval`` seconds apart, then answer."""
    for step in range(1, steps + 1):
        await anyio.sleep(interval)
        await ctx.report_progress(step, steps, f"step {step}")
    return f"done after {steps} steps"


@server.tool()
def rich() -> mcp_types.CallToolResult:
    """One of every content block, plus structured content."""
    return mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="hello"),
            mcp_types.ImageContent(data=PNG_1X1, mime_type="image/png"),
            mcp_types.AudioContent(data="UklGRg==", mime_type="audio/wav"),
            mcp_types.EmbeddedResource(
                resource=mcp_types.TextResourceContents(
                    uri="file:///notes.txt", mime_type="text/plain", text="notes"
                )
            ),
            mcp_types.EmbeddedResource(
                resource=mcp_types.BlobResourceContents(
                    uri="file:///blob.bin", mime_type="application/octet-stream", blob="AAE="
                )
            ),
            mcp_types.ResourceLink(
                uri="file:///linked.txt",
                name="linked",
                mime_type="text/plain",
                description="a link",
            ),
        ],
        structured_content={"answer": 42, "items": [1, 2]},
    )


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool and announce the change on both protocol eras."""

    def added() -> str:
        return "added"

    server.add_tool(added, name=name, description="added at run time")
    try:
        await ctx.session.send_tool_list_changed()
    except Exception as exc:
        print(f"legacy list_changed not sent: {exc!r}", file=sys.stderr)
    await ctx.notify_tools_changed()
    return f"added {name}"


@server.tool()
async def ask_model(prompt: str, ctx: Context) -> str:
    """Ask the client's model (sampling); say what came back, or why not."""
    message = mcp_types.SamplingMessage(
        role="user", content=mcp_types.TextContent(type="text", text=prompt)
    )
    try:
        result = await ctx.session.create_message(messages=[message], max_tokens=16)
    except Exception as exc:
        return f"refused: {exc}"
    content = result.content
    return f"model said: {getattr(content, 'text', content)}"


@server.tool()
async def ask_user(question: str, ctx: Context) -> str:
    """Ask the user (form elicitation); say what came back, or why not."""
    schema: dict[str, object] = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    try:
        result = await ctx.session.elicit(message=question, requested_schema=schema)
    except Exception as exc:
        return f"refused: {exc}"
    return f"user: {result.action} {result.content}"


@server.tool()
async def needs_sign_in(elicitations: list[object]) -> str:
    """Answer with a URLElicitationRequiredError (-32042) whose data names ``elicitations``."""
    from mcp.shared.exceptions import MCPError

    raise MCPError(
        mcp_types.URL_ELICITATION_REQUIRED, "sign in first", {"elicitations": elicitations}
    )


@server.tool()
async def error_answer(code: int, message: str) -> str:
    """Answer with a JSON-RPC error of ``code`` (-32000: the code of the SDK's closed session)."""
    from mcp.shared.exceptions import MCPError

    raise MCPError(code, message)


@server.tool()
async def sign_in(elicitation_id: str, done: list[str], ctx: Context) -> str:
    """Ask the user to visit a page (URL elicitation ``elicitation_id``), then say each
    of ``done`` is complete (``notifications/elicitation/complete``)."""
    answer = await ctx.elicit_url("sign in", "https://auth.example/login", elicitation_id)
    for each in done:
        await ctx.session.send_elicit_complete(each)
    return f"user: {answer.action}"


@server.tool()
async def call_roots(ctx: Context) -> str:
    """List the client's roots on this call's own stream; say them, or why not."""
    from mcp.shared.message import ServerMessageMetadata

    try:
        listed = await ctx.session.send_request(
            mcp_types.ListRootsRequest(),
            mcp_types.ListRootsResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
    except Exception as exc:
        return f"refused: {exc}"
    return "roots: " + " ".join(str(root.uri) for root in listed.roots)


@server.tool()
async def log_line(text: str, ctx: Context, structured: bool = False) -> str:
    """Send one log message at info level (``{"line": text}`` if structured), then answer."""
    await ctx.info({"line": text} if structured else text)
    return "logged"


@server.tool()
async def ping_flood(count: int, ctx: Context, wait_s: float = 5.0) -> str:
    """Send ``count`` pings to the client at once; say how many were answered in ``wait_s``."""
    answered = 0
    refused = 0

    async def one() -> None:
        nonlocal answered, refused
        with anyio.move_on_after(wait_s):
            try:
                await ctx.session.send_ping()
            except Exception:
                refused += 1
            else:
                answered += 1

    async with anyio.create_task_group() as tasks:
        for _ in range(count):
            tasks.start_soon(one)
    return f"answered={answered} refused={refused}"


@server.tool()
def many_blocks(count: int) -> mcp_types.CallToolResult:
    """A result of ``count`` empty text blocks."""
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(text="")] * count)


@server.tool()
def big(size: int) -> str:
    """A text result of ``size`` bytes."""
    return "x" * size


@server.tool()
def exit_soon() -> str:
    """Answer, then exit the server a moment later (it dies while the client is idle)."""
    threading.Timer(0.1, os._exit, (0,)).start()
    return "bye"


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


@server.tool()
async def raw_flood(size: int) -> str:
    """Write one unterminated message line of ``size`` bytes onto the protocol stream."""
    head = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"'
    chunk = b"y" * 65536
    written = 0
    with os.fdopen(os.dup(RAW_STDOUT), "wb", buffering=0) as raw:
        raw.write(head)
        while written < size:
            raw.write(chunk)
            written += len(chunk)
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def raw_garbage() -> str:
    """Write a line that is not JSON onto the protocol stream, then never answer."""
    os.write(RAW_STDOUT, b"this is not JSON-RPC\n")
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def raw_answer(member: str, value: str, ctx: Context) -> str:
    """Answer this call with ``{member: value}``, ``value`` raw JSON (escapes and all)."""
    line = f'{{"jsonrpc":"2.0","id":"{ctx.request_id}","{member}":{value}}}\n'
    os.write(RAW_STDOUT, line.encode())
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def raw_first(line: str, text: str) -> str:
    """Write ``line`` (raw JSON, escapes and all) to the client, then answer ``text``."""
    os.write(RAW_STDOUT, line.encode() + b"\n")
    return text


def _serve_http() -> None:
    import uvicorn

    # Name the protocol: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto is
    # IPPROTO_TCP, and an accepted socket copies the listener's proto. With proto 0 every
    # response uvicorn writes as two sends (headers, then body) waits ~40 ms for the
    # client's delayed ACK. uvicorn's own bind (getaddrinfo) names the protocol too.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    os.write(RAW_STDOUT, f"PORT {sock.getsockname()[1]}\n".encode())
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn_server = uvicorn.Server(config)
    anyio.run(lambda: uvicorn_server.serve(sockets=[sock]))


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        _serve_http()
    else:
        server.run()
