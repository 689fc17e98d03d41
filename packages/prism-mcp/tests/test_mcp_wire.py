"""The bounded HTTP transport: hostile response bodies, and Nagle off.

(The stdio line splitter is tested through a server that cuts its lines:
``test_mcp_tasks.py``.)
"""

from __future__ import annotations

import gzip
import json
import socket
from functools import partial
from typing import Any

import pytest
import trio

from prism.core import ToolCall, ToolExecutionContext
from prism.mcp import StreamableHttpTransport, open_mcp_tools

# A hand-written Streamable HTTP server whose tools/call answers are hostile.


async def _respond(
    stream: trio.SocketStream, status: str, headers: dict[str, str], body: bytes = b""
) -> None:
    head = f"HTTP/1.1 {status}\r\nConnection: close\r\n"
    head += "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    await stream.send_all(head.encode() + b"\r\n" + body)


async def _rpc(stream: trio.SocketStream, message: dict[str, object]) -> None:
    body = json.dumps(message).encode()
    await _respond(
        stream,
        "200 OK",
        {"Content-Type": "application/json", "Content-Length": str(len(body))},
        body,
    )


async def _hostile_call(stream: trio.SocketStream, mode: str, request_id: object) -> None:
    if mode == "gzip":
        text = "z" * 10_000_000
        payload = {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": [{"type": "text", "text": text}]},
        }
        body = gzip.compress(json.dumps(payload).encode())
        headers = {
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
            "Content-Length": str(len(body)),
        }
        await _respond(stream, "200 OK", headers, body)
    elif mode in ("utf-7", "utf-16", "UTF-8"):
        # An event stream declared in a charset where "data:" is not those bytes: the
        # field name is hidden from a reader of UTF-8 bytes, not from one that decodes.
        payload = {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": [{"type": "text", "text": "smuggled"}]},
        }
        data = json.dumps(payload)
        if mode == "UTF-8":
            body = f"event: message\ndata: {data}\n\n".encode()
        elif mode == "utf-7":
            body = b"event: message\n+AGQAYQB0AGE-: " + data.encode() + b"\n\n"
        else:
            body = f"event: message\ndata: {data}\n\n".encode("utf-16-le")
        headers = {
            "Content-Type": f"text/event-stream; charset={mode}",
            "Content-Length": str(len(body)),
        }
        await _respond(stream, "200 OK", headers, body)
    elif mode == "comments":
        # 20,000 comment lines, then 10,000 more each followed by a blank line, then
        # the answer: legal SSE the SDK's reader ignores.
        payload = {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": [{"type": "text", "text": "after comments"}]},
        }
        body = b":\n" * 20_000 + b": x\n\n" * 10_000
        body += b"event: message\ndata: " + json.dumps(payload).encode() + b"\n\n"
        headers = {"Content-Type": "text/event-stream", "Content-Length": str(len(body))}
        await _respond(stream, "200 OK", headers, body)
    elif mode == "declared":
        headers = {"Content-Type": "application/json", "Content-Length": "50000000"}
        await _respond(stream, "200 OK", headers, b'{"jsonrpc":"2.0"')
        await trio.sleep_forever()
    else:  # endless chunked JSON; "malformed" also gets the chunk framing wrong
        await _respond(
            stream, "200 OK", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
        )
        chunk = b"x" * 65536
        opening = b'{"jsonrpc":"2.0",'
        size = len(opening) - (1 if mode == "malformed" else 0)
        await stream.send_all(f"{size:x}\r\n".encode() + opening + b"\r\n")
        while True:
            await stream.send_all(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")


async def _serve(mode: str, stream: trio.SocketStream) -> None:
    try:
        data = b""
        while b"\r\n\r\n" not in data:
            more = await stream.receive_some(65536)
            if not more:
                return
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        request_line, *header_lines = head.decode().split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, value in (line.split(":", 1) for line in header_lines)
        }
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            body += await stream.receive_some(65536)
        if not request_line.startswith("POST "):
            await _respond(stream, "405 Method Not Allowed", {"Content-Length": "0"})
            return
        message = json.loads(body)
        if "id" not in message:
            await _respond(stream, "202 Accepted", {"Content-Length": "0"})
            return
        method, request_id = message["method"], message["id"]
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-http", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "flood", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            await _hostile_call(stream, mode, request_id)
            return
        else:
            await _rpc(
                stream,
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": "method not found"},
                },
            )
            return
        await _rpc(stream, {"jsonrpc": "2.0", "id": request_id, "result": result})
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return
    finally:
        await stream.aclose()


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("declared", "result_too_large"),
        ("chunked", "result_too_large"),
        ("gzip", "connection_lost"),
        ("malformed", "connection_lost"),
        ("utf-7", "connection_lost"),
        ("utf-16", "connection_lost"),
    ],
)
async def test_hostile_http_bodies_are_refused_while_they_arrive(mode: str, expected: str) -> None:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, partial(_serve, mode), 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")
        with trio.fail_after(20):
            async with open_mcp_tools(
                server_id="hostile", transport=transport, max_result_bytes=100_000
            ) as bridge:
                assert bridge.protocol_version == "2025-11-25"
                (flood,) = bridge.tools
                ctx = ToolExecutionContext(ToolCall(id="h", name=flood.name, arguments={}))
                result = await flood.execute({}, ctx)
                assert result.is_error
                assert result.details["mcp_error"] == expected, result.joined_text
                if mode == "gzip":
                    assert "gzip" in result.joined_text
                if mode.startswith("utf"):
                    assert "smuggled" not in result.joined_text
                    assert f"charset '{mode}'" in result.joined_text
                assert not bridge.connected
        nursery.cancel_scope.cancel()


async def test_comment_lines_reach_the_sdk_reader_as_a_few_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each comment line was handed on as two pieces, taken with list.pop(0) and run
    # through the SDK's decoders one by one: seconds of frozen loop for 900 kB.
    from httpx2 import _sse

    decoded: list[int] = []
    decode = _sse._SSEParser.decode

    def counted(self: Any, text: str) -> Any:
        decoded.append(len(text))
        return decode(self, text)

    monkeypatch.setattr(_sse._SSEParser, "decode", counted)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, partial(_serve, "comments"), 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")
        with trio.fail_after(60):
            async with open_mcp_tools(server_id="hostile", transport=transport) as bridge:
                (flood,) = bridge.tools
                ctx = ToolExecutionContext(ToolCall(id="h", name=flood.name, arguments={}))
                decoded.clear()
                result = await flood.execute({}, ctx)
        nursery.cancel_scope.cancel()
    assert result.joined_text == "after comments"
    assert len(decoded) < 50, len(decoded)


async def test_an_event_stream_declared_utf8_is_read() -> None:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, partial(_serve, "UTF-8"), 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")
        with trio.fail_after(20):
            async with open_mcp_tools(server_id="hostile", transport=transport) as bridge:
                (flood,) = bridge.tools
                ctx = ToolExecutionContext(ToolCall(id="h", name=flood.name, arguments={}))
                result = await flood.execute({}, ctx)
                assert not result.is_error, result.joined_text
                assert result.joined_text == "smuggled"
        nursery.cancel_scope.cancel()


class _Recording(trio.abc.SocketFactory):
    """Trio's public hook for socket creation: keeps every socket the run opens."""

    def __init__(self) -> None:
        self.sockets: list[trio.socket.SocketType] = []

    def socket(
        self, family: int | None = None, type: int | None = None, proto: int | None = None
    ) -> trio.socket.SocketType:
        sock = trio.socket.from_stdlib_socket(
            socket.socket(family or socket.AF_INET, type or socket.SOCK_STREAM, proto or 0)
        )
        self.sockets.append(sock)
        return sock


async def test_the_bridge_http_client_socket_has_nagle_off(fixture_http_url: str) -> None:
    # The SDK writes each request as two sends (headers, then body); with Nagle on, the
    # body would wait for the server's delayed ACK, ~40 ms per call on 127.0.0.1.
    recording = _Recording()
    trio.socket.set_custom_socket_factory(recording)
    try:
        with trio.fail_after(20):
            async with open_mcp_tools(
                server_id="fx", transport=StreamableHttpTransport(fixture_http_url)
            ) as bridge:
                tool = next(t for t in bridge.tools if t.name == "mcp:fx:echo")
                ctx = ToolExecutionContext(ToolCall(id="n", name=tool.name, arguments={}))
                result = await tool.execute({"text": "quick"}, ctx)
                live = [s for s in recording.sockets if s.fileno() >= 0]
                assert live
                for sock in live:
                    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        trio.socket.set_custom_socket_factory(None)
    assert result.joined_text == "quick"
