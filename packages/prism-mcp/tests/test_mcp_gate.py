"""The bound on server-to-client requests handled at once (in front of the SDK)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

import anyio
import mcp_types
import trio
from mcp.shared.message import SessionMessage

from prism.mcp._wire import WireState, gate_server_requests

if TYPE_CHECKING:
    from collections.abc import Iterator

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream


@contextmanager
def pipes(
    inbound: int, outbound: int
) -> Iterator[
    tuple[
        MemoryObjectSendStream[SessionMessage | Exception],
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
        MemoryObjectReceiveStream[SessionMessage],
    ]
]:
    in_send, in_recv = anyio.create_memory_object_stream[SessionMessage | Exception](inbound)
    out_send, out_recv = anyio.create_memory_object_stream[SessionMessage](outbound)
    with in_send, in_recv, out_send, out_recv:
        yield in_send, in_recv, out_send, out_recv


def ping(request_id: int) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))


def answer(request_id: int) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={}))


async def test_requests_past_the_limit_are_answered_with_an_error_when_the_writer_is_free() -> None:
    state = WireState()
    with pipes(100, 100) as (in_send, in_recv, out_send, out_recv):
        read, _write = gate_server_requests((in_recv, out_send), limit=2, state=state)
        for n in range(5):
            in_send.send_nowait(ping(n))
        in_send.close()
        admitted = [item async for item in read]
        assert [m.message.id for m in admitted if isinstance(m, SessionMessage)] == [0, 1]  # type: ignore[union-attr]
        refusals = [out_recv.receive_nowait() for _ in range(3)]
        assert [m.message.id for m in refusals] == [2, 3, 4]  # type: ignore[union-attr]
        assert all(isinstance(m.message, mcp_types.JSONRPCError) for m in refusals)
        assert state.refused_requests == 3


async def test_a_slot_frees_once_its_answer_is_written() -> None:
    state = WireState()
    with pipes(100, 100) as (in_send, in_recv, out_send, out_recv):
        read, write = gate_server_requests((in_recv, out_send), limit=1, state=state)
        in_send.send_nowait(ping(1))
        assert (await read.receive()).message.id == 1  # type: ignore[union-attr]
        await write.send(answer(1))
        in_send.send_nowait(ping(2))
        assert (await read.receive()).message.id == 2  # type: ignore[union-attr]
        assert state.refused_requests == 0
        assert out_recv.receive_nowait().message.id == 1  # type: ignore[union-attr]


async def test_excess_requests_are_dropped_not_queued_when_the_writer_is_stuck() -> None:
    state = WireState()
    with pipes(10_000, 0) as (in_send, in_recv, out_send, _out_recv):
        read, _write = gate_server_requests((in_recv, out_send), limit=4, state=state)
        for n in range(10_000):
            in_send.send_nowait(ping(n))
        in_send.close()
        admitted = [item async for item in read]
        assert len(admitted) == 4
        assert state.refused_requests == 9_996
        assert out_send.statistics().tasks_waiting_send == 0
        await trio.lowlevel.checkpoint()


async def test_a_repeated_request_id_in_flight_is_refused() -> None:
    state = WireState()
    with pipes(10, 10) as (in_send, in_recv, out_send, _out_recv):
        read, _write = gate_server_requests((in_recv, out_send), limit=8, state=state)
        in_send.send_nowait(ping(7))
        in_send.send_nowait(ping(7))
        in_send.close()
        admitted = [item async for item in read]
        assert len(admitted) == 1
        assert state.refused_requests == 1
