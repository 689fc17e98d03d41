"""serve_stdio in this process, byte by byte, with fd 0 and fd 1 swapped for pipes."""

from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pytest
import trio
import trio.testing
from mcp.shared.message import SessionMessage

from prism.core import JsonObject, ToolDefinition, ToolExecutionContext, ToolResult
from prism.gateway import Gateway, GatewayError, open_gateway, serve_stdio
from prism.gateway._stdio import LineWriter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    Initialize = Callable[..., dict[str, Any]]

LIMIT = 4096
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


async def _stray_output(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    # What a careless tool (or a child process) might do while serving.
    os.write(1, b"stray output\n")
    return ToolResult.text(f"fd 0 reads {os.read(0, 10)!r}")


@contextmanager
def _std_fds_on_pipes() -> Iterator[tuple[int, int]]:
    """fd 0 and fd 1 replaced by pipes; the ends to write to fd 0 and read fd 1 from."""
    to_stdin, stdin = os.pipe()
    stdout, from_stdout = os.pipe()
    saved = [os.dup(0), os.dup(1)]
    os.dup2(to_stdin, 0)
    os.dup2(from_stdout, 1)
    os.close(to_stdin)
    os.close(from_stdout)
    try:
        yield stdin, stdout
    finally:
        for fd, original in enumerate(saved):
            os.dup2(original, fd)
            os.close(original)


class _Peer:
    """The client's side of the pipes."""

    def __init__(self, stdin: int, stdout: int) -> None:
        self.stdin = trio.lowlevel.FdStream(stdin)
        self.stdout = trio.lowlevel.FdStream(stdout)
        self.buffer = b""

    async def send(self, data: bytes | dict[str, Any]) -> None:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode() + b"\n"
        await self.stdin.send_all(raw)

    async def receive(self) -> Any:
        while b"\n" not in self.buffer:
            chunk = await self.stdout.receive_some()
            assert chunk, "the gateway closed its stdout"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


@asynccontextmanager
async def _served(gateway: Gateway, **options: Any) -> AsyncIterator[_Peer]:
    """``serve_stdio(gateway)`` on this process's (swapped) fd 0 and 1; ends at EOF."""
    with _std_fds_on_pipes() as (stdin, stdout):
        peer = _Peer(stdin, stdout)
        async with trio.open_nursery() as nursery, peer.stdout:
            nursery.start_soon(lambda: serve_stdio(gateway, **options))
            with trio.fail_after(30):
                async with peer.stdin:
                    yield peer


async def test_hostile_lines_get_parse_errors_and_the_session_goes_on(
    initialize: Initialize,
) -> None:
    tool = ToolDefinition(name="stray", execute=_stray_output)
    async with (
        open_gateway(tools=[tool]) as gateway,
        _served(gateway, max_message_bytes=LIMIT) as peer,
    ):
        # Not JSON; blank; a line over the limit; a line far over it.
        await peer.send(b"this is not json\n\n")
        await peer.send(b'{"x": "' + b"y" * LIMIT + b'"}\n')
        # (larger than a pipe holds, so the gateway reads it in several pieces)
        await peer.send(b"z" * 200_000 + b"\n")
        await peer.send(initialize())
        bad, long_one, long_split, init = [await peer.receive() for _ in range(4)]
        await peer.send(INITIALIZED)
        call = {"name": "stray", "arguments": {}}
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        result = await peer.receive()
        # A last line without its newline, then EOF: serving ends cleanly.
        await peer.send(json.dumps(INITIALIZED).encode())
    assert bad["id"] is None
    assert bad["error"]["code"] == -32700
    assert "not a JSON-RPC message" in bad["error"]["message"]
    for refused in (long_one, long_split):
        assert refused["error"] == {"code": -32700, "message": f"message longer than {LIMIT} bytes"}
    assert init["id"] == 1
    assert init["result"]["serverInfo"]["name"] == "prism-gateway"
    # The tool's stray write missed the wire, and it read EOF from fd 0.
    assert result["id"] == 2
    assert result["result"]["content"] == [{"type": "text", "text": "fd 0 reads b''"}]


async def _big(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text(str(arguments["fill"]) * 300_000)


async def test_replies_larger_than_the_pipe_arrive_whole(initialize: Initialize) -> None:
    # Each reply is over 64 KiB, more than a pipe takes at once: the sender writes what
    # fits, the writer task the rest, and replies ready meanwhile wait their turn
    # behind it; every line arrives whole.
    tool = ToolDefinition(name="big", execute=_big)
    async with open_gateway(tools=[tool]) as gateway, _served(gateway) as peer:
        await peer.send(initialize())
        assert (await peer.receive())["id"] == 1
        await peer.send(INITIALIZED)
        for request_id, fill in ((2, "a"), (3, "b"), (4, "c")):
            call = {"name": "big", "arguments": {"fill": fill}}
            await peer.send(
                {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}
            )
        await peer.send({"jsonrpc": "2.0", "id": 5, "method": "ping"})
        replies = {reply["id"]: reply for reply in [await peer.receive() for _ in range(4)]}
        await peer.send({"jsonrpc": "2.0", "id": 6, "method": "ping"})
        last = await peer.receive()
    for request_id, fill in ((2, "a"), (3, "b"), (4, "c")):
        content = replies[request_id]["result"]["content"]
        assert content == [{"type": "text", "text": fill * 300_000}]
    assert replies[5]["result"] == {}
    assert last == {"jsonrpc": "2.0", "id": 6, "result": {}}


async def test_a_second_serve_stdio_in_one_process_is_refused(initialize: Initialize) -> None:
    async with open_gateway() as gateway, _served(gateway) as peer:
        await peer.send(initialize())
        assert (await peer.receive())["id"] == 1  # the first one serves
        with pytest.raises(GatewayError, match="already serves"):
            await serve_stdio(gateway)


async def test_explicit_streams_are_served_by_the_sdk_transport(initialize: Initialize) -> None:
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stdin = anyio.wrap_file(os.fdopen(stdin_r, "r", encoding="utf-8"))
    stdout = anyio.wrap_file(os.fdopen(stdout_w, "w", encoding="utf-8"))
    peer = _Peer(stdin_w, stdout_r)
    async with open_gateway() as gateway, trio.open_nursery() as nursery, peer.stdout:
        nursery.start_soon(lambda: serve_stdio(gateway, stdin=stdin, stdout=stdout))
        with trio.fail_after(30):
            async with peer.stdin:
                await peer.send(initialize())
                init = await peer.receive()
    await stdin.aclose()
    await stdout.aclose()
    assert init["result"]["serverInfo"]["name"] == "prism-gateway"


async def test_a_client_that_stops_reading_does_not_stop_the_gateway(
    initialize: Initialize,
) -> None:
    async with open_gateway() as gateway, _served(gateway) as peer:
        await peer.send(initialize())
        assert (await peer.receive())["id"] == 1
        await peer.stdout.aclose()  # gone: the next reply cannot be written
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    # serve_stdio returned when stdin closed, with no error.


async def test_a_closed_stdin_is_a_gateway_error() -> None:
    saved = os.dup(0)
    os.close(0)
    try:
        async with open_gateway() as gateway:
            with pytest.raises(GatewayError, match="cannot serve MCP over stdin and stdout"):
                await serve_stdio(gateway)
    finally:
        os.dup2(saved, 0)
        os.close(saved)


def _ping(request_id: int, pad: int = 0) -> SessionMessage:
    params = {"pad": "x" * pad} if pad else None
    return SessionMessage(
        types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping", params=params)
    )


async def test_the_line_writer_keeps_lines_whole_and_in_order() -> None:
    read_end, write_end = os.pipe()
    writer = LineWriter(trio.lowlevel.FdStream(write_end))
    peer = _Peer(os.open(os.devnull, os.O_WRONLY), read_end)
    waiting = trio.CancelScope()

    async def third() -> None:
        with waiting:
            await writer.send(_ping(3))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery, peer.stdout, peer.stdin:
            nursery.start_soon(writer.drain)
            await writer.send(_ping(1, 200_000))  # more than the pipe takes: begun, then drained
            await writer.send(_ping(2))  # held behind it
            nursery.start_soon(third)  # waits its turn...
            await trio.testing.wait_all_tasks_blocked()
            waiting.cancel()  # ...and is cancelled before it was handed on: never written
            lines = [await peer.receive() for _ in range(2)]
            await writer.send(_ping(4))
            lines.append(await peer.receive())
            writer.finish()
            with pytest.raises(anyio.BrokenResourceError):
                await writer.send(_ping(5))
    assert [line["id"] for line in lines] == [1, 2, 4]
    assert len(lines[0]["params"]["pad"]) == 200_000


async def test_the_line_writer_stops_writing_once_the_client_is_gone() -> None:
    read_end, write_end = os.pipe()
    writer = LineWriter(trio.lowlevel.FdStream(write_end))
    os.close(read_end)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.drain)
        await writer.send(_ping(1))  # the broken pipe: dropped, as the client is gone
        with pytest.raises(anyio.BrokenResourceError):
            await writer.send(_ping(2))
        writer.finish()
