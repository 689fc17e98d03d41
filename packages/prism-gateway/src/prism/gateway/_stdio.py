"""MCP over this process's stdin and stdout, on trio's own pipes (no worker threads).

The SDK's ``stdio_server`` reads and writes through anyio's file wrapper, which
runs every ``readline``, ``write`` and ``flush`` in a worker thread: three
thread round trips per tool call, a large share of a bridged call's cost on a
busy machine. Here the protocol pipe is read and written with
``trio.lowlevel.FdStream`` in the event loop, one ``write`` per message.

While serving, fd 0 reads the null device and fd 1 writes to stderr, so a
child process (a shell command) that reads stdin gets EOF and one that prints
cannot corrupt the wire; both are put back when serving ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
import trio
from mcp.shared.message import SessionMessage

from ._errors import GatewayError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "stdio_streams"]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The longest message line read from stdin by default; a longer one gets a parse error."""

_CHUNK = 256 * 1024
_DRAIN_S = 5.0
_claimed = threading.Lock()


@contextlib.contextmanager
def _claim_std_fds() -> Iterator[tuple[int, int]]:
    """Duplicates of fd 0 and 1 for the protocol (the caller closes them); 0 and 1 diverted."""
    if not _claimed.acquire(blocking=False):
        raise GatewayError("this process already serves MCP over its stdin and stdout")
    saved: list[int] = []
    wire: list[int] = []
    try:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        for copies in (saved, wire):
            copies.extend(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (0, 1))
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        os.dup2(2, 1)
    except OSError as exc:
        for fd in wire:
            os.close(fd)
        _restore(saved)
        _claimed.release()
        raise GatewayError(f"cannot serve MCP over stdin and stdout: {exc}") from exc
    try:
        yield wire[0], wire[1]
    finally:
        _restore(saved)
        _claimed.release()


def _restore(saved: list[int]) -> None:
    for fd, duplicate in enumerate(saved):
        with contextlib.suppress(OSError):
            os.dup2(duplicate, fd)
        os.close(duplicate)


def _parse_error(why: str) -> SessionMessage:
    error = types.ErrorData(code=types.PARSE_ERROR, message=why)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


async def _read_lines(
    stream: trio.lowlevel.FdStream,
    incoming: MemoryObjectSendStream[SessionMessage | Exception],
    replies: MemoryObjectSendStream[SessionMessage],
    scope: trio.CancelScope,
    limit: int,
) -> None:
    """Each newline-delimited message on ``stream`` to ``incoming``; bad ones get a parse error."""
    with scope:
        await _read_into(stream, incoming, replies, limit)


async def _read_into(
    stream: trio.lowlevel.FdStream,
    incoming: MemoryObjectSendStream[SessionMessage | Exception],
    replies: MemoryObjectSendStream[SessionMessage],
    limit: int,
) -> None:
    buffer = bytearray()
    scanned = 0
    skipping = False  # inside a line already refused for its length: drop it to its end
    too_long = _parse_error(f"message longer than {limit} bytes")
    async with incoming, replies:
        while True:
            chunk = await stream.receive_some(_CHUNK)
            buffer += chunk
            lines: list[bytes | None] = []  # None: a line refused for its length
            while (end := buffer.find(b"\n", scanned)) >= 0:
                if not skipping:
                    lines.append(bytes(buffer[:end]) if end <= limit else None)
                skipping = False
                del buffer[: end + 1]
                scanned = 0
            if not chunk and buffer and not skipping:
                lines.append(bytes(buffer) if len(buffer) <= limit else None)  # no last newline
            scanned = len(buffer)
            if len(buffer) > limit:
                if not skipping:
                    lines.append(None)
                skipping = True
                buffer.clear()
                scanned = 0
            for line in lines:
                if line is None:
                    await replies.send(too_long)
                elif line.strip():
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError as exc:
                        await replies.send(_parse_error(f"not a JSON-RPC message: {exc}"[:500]))
                    else:
                        await incoming.send(SessionMessage(message))
            if not chunk:
                return


async def _write_lines(
    stream: trio.lowlevel.FdStream, outgoing: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    async with outgoing:
        async for item in outgoing:
            data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
            try:
                await stream.send_all(data.encode("utf-8") + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return  # the client went away


@contextlib.asynccontextmanager
async def stdio_streams(
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The read and write streams of an MCP session over this process's stdin and stdout.

    The read stream ends when stdin does; a line longer than
    ``max_message_bytes`` or that is not JSON-RPC is answered with a parse
    error (``-32700``) and skipped. Leaving the block stops reading and
    writing and gives fd 0 and fd 1 back.

    Raises:
        GatewayError: another ``serve_stdio`` runs in this process, or the
            descriptors cannot be duplicated.
    """
    with _claim_std_fds() as (wire_in, wire_out):
        reader = trio.lowlevel.FdStream(wire_in)
        writer = trio.lowlevel.FdStream(wire_out)
        in_send, in_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        out_send, out_receive = anyio.create_memory_object_stream[SessionMessage](0)
        async with reader, writer, trio.open_nursery() as nursery:
            reading = trio.CancelScope()
            nursery.start_soon(
                _read_lines, reader, in_send, out_send.clone(), reading, max_message_bytes
            )
            nursery.start_soon(_write_lines, writer, out_receive)
            try:
                yield in_receive, out_send
            finally:
                # Stop reading; let the writer send what is queued (bounded), then stop.
                reading.cancel()
                out_send.close()
                nursery.cancel_scope.deadline = trio.current_time() + _DRAIN_S
