"""The bounded transports: the stdio line splitter and hostile HTTP response bodies."""

from __future__ import annotations

import gzip
import json
import socket
from contextlib import suppress
from functools import partial

import httpx2
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from prism.core import ToolCall, ToolExecutionContext
from prism.mcp import StreamableHttpTransport, open_mcp_tools
from prism.mcp._wire import LineSplitter, LineTooLong, WireState, _LimitedTransport

LIMIT = 64


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for point in [*points, len(data)]:
        pieces.append(data[last:point])
        last = point
    return pieces


line_text = st.binary(max_size=LIMIT).map(lambda b: b.replace(b"\n", b"a").strip())


@settings(max_examples=300)
@given(st.lists(line_text, max_size=20), st.lists(st.integers(0, 10_000), max_size=30))
def test_line_splitter_yields_the_same_lines_however_the_stream_is_cut(
    lines: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(line + b"\r\n" for line in lines)
    splitter = LineSplitter(LIMIT)
    seen: list[bytes] = []
    for chunk in _chunks(stream, cuts):
        seen.extend(splitter.feed(chunk))
    assert seen == [line for line in lines if line]


@settings(max_examples=200)
@given(st.integers(LIMIT + 1, 5 * LIMIT), st.lists(st.integers(0, 10_000), max_size=30))
def test_line_splitter_refuses_a_long_line_before_holding_it_whole(
    length: int, cuts: list[int]
) -> None:
    splitter = LineSplitter(LIMIT)
    refused = False
    for chunk in _chunks(b"x" * length, cuts):
        try:
            splitter.feed(chunk)
        except LineTooLong:
            refused = True
            break
        # Never more than the limit is kept while waiting for the newline.
        assert len(splitter._partial) <= LIMIT
    assert refused


def test_line_splitter_accepts_a_line_of_exactly_the_limit() -> None:
    assert LineSplitter(LIMIT).feed(b"y" * LIMIT + b"\n") == [b"y" * LIMIT]


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
                assert not bridge.connected
        nursery.cancel_scope.cancel()


async def _answer_once(stream: trio.SocketStream) -> None:
    data = b""
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while b"\r\n\r\n" not in data:
            more = await stream.receive_some(65536)
            if not more:
                return
            data += more
        await _respond(
            stream, "200 OK", {"Content-Type": "application/json", "Content-Length": "2"}, b"{}"
        )
    await stream.aclose()


async def test_the_bridge_http_client_socket_has_nagle_off() -> None:
    # The SDK writes each request as two sends (headers, then body); with Nagle on, the
    # body would wait for the server's delayed ACK, ~40 ms per call on 127.0.0.1.
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, _answer_once, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        transport = _LimitedTransport(limit=1000, state=WireState())
        with trio.fail_after(10):
            request = httpx2.Request("POST", f"http://127.0.0.1:{port}/mcp", content=b"{}")
            response = await transport.handle_async_request(request)
            sock = response.extensions["network_stream"].get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            assert await response.aread() == b"{}"
            await response.aclose()
            await transport.aclose()
        nursery.cancel_scope.cancel()
