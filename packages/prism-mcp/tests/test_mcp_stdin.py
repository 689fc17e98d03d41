"""The writer of a stdio server's stdin: whole lines, in order, bounded waits."""

from __future__ import annotations

import json
import os

import anyio
import mcp_types
import pytest
import trio
import trio.testing
from mcp.shared.message import SessionMessage

from prism.mcp._stdio import ServerStdin


def _ping(request_id: int, pad: int = 0) -> SessionMessage:
    params = {"pad": "x" * pad} if pad else None
    return SessionMessage(
        mcp_types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping", params=params)
    )


async def _lines(stream: trio.lowlevel.FdStream, count: int) -> list[dict[str, object]]:
    data = b""
    while data.count(b"\n") < count:
        chunk = await stream.receive_some()
        assert chunk
        data += chunk
    return [json.loads(line) for line in data.splitlines()]


async def test_lines_stay_whole_and_in_order() -> None:
    read_end, write_end = os.pipe()
    faults: list[str] = []
    stdin = ServerStdin(trio.lowlevel.FdStream(write_end), write_stall_s=30, on_fault=faults.append)
    waiting = trio.CancelScope()

    async def third() -> None:
        with waiting:
            await stdin.send(_ping(3))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery, trio.lowlevel.FdStream(read_end) as server:
            nursery.start_soon(stdin.drain)
            await stdin.send(_ping(1, 200_000))  # more than the pipe takes: begun, then drained
            with pytest.raises(anyio.WouldBlock):
                stdin.send_nowait(_ping(9))  # a refusal never waits its turn
            await stdin.send(_ping(2))  # held behind it
            nursery.start_soon(third)  # waits its turn...
            await trio.testing.wait_all_tasks_blocked()
            waiting.cancel()  # ...and is cancelled before it was handed on: never written
            lines = await _lines(server, 2)
            await stdin.send(_ping(4))
            lines += await _lines(server, 1)
            await stdin.aclose()
            with pytest.raises(anyio.BrokenResourceError):
                await stdin.send(_ping(5))
    assert [line["id"] for line in lines] == [1, 2, 4]
    assert faults == []


async def test_a_server_that_stops_reading_is_a_fault_after_write_stall_s() -> None:
    read_end, write_end = os.pipe()
    faults: list[str] = []
    stalled = trio.Event()

    def fault(reason: str) -> None:
        faults.append(reason)
        stalled.set()

    stdin = ServerStdin(trio.lowlevel.FdStream(write_end), write_stall_s=0.2, on_fault=fault)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stdin.drain)
            await stdin.send(_ping(1, 200_000))  # never read
            await stalled.wait()
            with pytest.raises(anyio.BrokenResourceError):
                await stdin.send(_ping(2))
            await stdin.close_pipe()
    os.close(read_end)
    assert faults == ["the server stopped reading its stdin (a write made no progress for 0.2s)"]


async def test_a_server_gone_is_a_fault_and_nothing_more_is_written() -> None:
    read_end, write_end = os.pipe()
    faults: list[str] = []
    stdin = ServerStdin(trio.lowlevel.FdStream(write_end), write_stall_s=30, on_fault=faults.append)
    os.close(read_end)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stdin.drain)
        stdin.send_nowait(_ping(1))  # the broken pipe
        with pytest.raises(anyio.BrokenResourceError):
            await stdin.send(_ping(2))
        stdin.close()
    assert faults == ["the server stopped reading its stdin (it exited or crashed)"]
