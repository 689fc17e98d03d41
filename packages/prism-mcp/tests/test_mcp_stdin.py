"""A stdio server's pipes: stdin written in whole lines, in order, with bounded waits; stdout."""

from __future__ import annotations

import json
import os

import anyio
import mcp_types
import pytest
import trio
import trio.testing
from mcp.shared.message import SessionMessage

from prism.mcp._stdio import ServerStdin, ServerStdout
from prism.mcp._wire import WireState


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


class _PipeReader:
    """A pipe's read end as the byte stream the server's stdout is (anyio's receive)."""

    def __init__(self, fd: int) -> None:
        self.stream = trio.lowlevel.FdStream(fd)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        chunk = await self.stream.receive_some(max_bytes)
        if not chunk:
            raise anyio.EndOfStream
        return chunk


async def _progress_then_result(stdout: ServerStdout) -> bool:
    """Whether the task handling the progress ran before the call's caller woke."""
    ran = trio.Event()
    woke = trio.Event()
    seen: list[bool] = []

    async def progress_callback() -> None:  # the SDK runs it in a task of its own
        ran.set()

    async def caller() -> None:  # waits for the call's result
        await woke.wait()
        seen.append(ran.is_set())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller)
        await trio.testing.wait_all_tasks_blocked()
        first = await stdout.receive()
        nursery.start_soon(progress_callback)
        second = await stdout.receive()
        woke.set()  # the result resolves the caller's request
    assert isinstance(first, SessionMessage)
    assert isinstance(first.message, mcp_types.JSONRPCNotification)
    assert isinstance(second, SessionMessage)
    assert isinstance(second.message, mcp_types.JSONRPCResponse)
    return seen == [True]


async def test_a_progress_read_with_the_result_is_handled_before_the_caller_wakes() -> None:
    # A progress notification and the call's result in one read: the SDK starts a task for
    # the progress, then resolves the call with the result. The progress task must run
    # before the caller wakes (as it did behind a channel), or the call's last progress is
    # overtaken by its result. (Trio orders one scheduling round's tasks at random, so the
    # case runs many times.)
    progress: dict[str, object] = {"jsonrpc": "2.0", "method": "notifications/progress"}
    progress["params"] = {"progressToken": 1, "progress": 3}
    result = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
    wire = (json.dumps(progress) + "\n" + json.dumps(result) + "\n").encode()
    stderr_read = trio.Event()  # (the stream's end then waits for no stderr)
    stderr_read.set()
    with trio.fail_after(30):
        for _ in range(20):
            read_end, write_end = os.pipe()
            os.write(write_end, wire)
            os.close(write_end)
            pipe = _PipeReader(read_end)
            async with pipe.stream:
                stdout = ServerStdout(
                    pipe,  # type: ignore[arg-type]
                    limit=1 << 20,
                    state=WireState(),
                    stderr_done=stderr_read,
                )
                assert await _progress_then_result(stdout)
                with pytest.raises(anyio.EndOfStream):
                    await stdout.receive()


class _PipeOf:
    """A server's stdout as the transport hands it over: anyio's wrapper of a trio pipe."""

    def __init__(self, fd: int) -> None:
        self._stream = trio.lowlevel.FdStream(fd)


async def test_end_wakes_a_read_waiting_on_the_pipe_and_is_no_fault() -> None:
    # A read waits on the pipe itself (no cancel scope per message): end() wakes it.
    read_end, write_end = os.pipe()
    pipe = _PipeOf(read_end)
    state = WireState()
    stdout = ServerStdout(pipe, limit=1 << 20, state=state)  # type: ignore[arg-type]
    os.write(write_end, b'{"jsonrpc": "2.0", "id": 1, "result": {}}\n')
    ended: list[bool] = []

    async def read_on() -> None:
        with pytest.raises(anyio.EndOfStream):
            await stdout.receive()
        ended.append(True)

    try:
        with trio.fail_after(10):
            first = await stdout.receive()
            assert isinstance(first, SessionMessage)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_on)
                await trio.testing.wait_all_tasks_blocked()
                assert not ended
                stdout.end()
        assert ended == [True]
        assert state.fault is None
        assert stdout.done.is_set()
        with pytest.raises(anyio.EndOfStream):
            await stdout.receive()
    finally:
        os.close(write_end)
        await pipe._stream.aclose()
