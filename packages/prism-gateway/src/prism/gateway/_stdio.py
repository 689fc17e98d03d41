"""MCP over this process's stdin and stdout, on trio's own pipes (no worker threads).

The SDK's ``stdio_server`` reads and writes through anyio's file wrapper, which
runs every ``readline``, ``write`` and ``flush`` in a worker thread: three
thread round trips per tool call, a large share of a bridged call's cost on a
busy machine. Here the protocol pipe is read and written with
``trio.lowlevel.FdStream`` in the event loop, one ``write`` per message, and
in the tasks of the SDK that read and write messages: a message is parsed by
the task that asked for it and written by the task that sends it, with no
hand-off through a channel to a reader or writer task of its own (a task
only takes over a write the pipe could not take at once).

While serving, fd 0 reads the null device and fd 1 writes to stderr, so a
child process (a shell command) that reads stdin gets EOF and one that prints
cannot corrupt the wire; both are put back when serving ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sys
import threading
from collections import deque
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
import trio
from anyio.abc import ObjectReceiveStream
from mcp.shared.message import SessionMessage

from prism.mcp import mcp_message_refusal

from ._errors import GatewayError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from typing import Self

    from ._fast import StdioFastPath

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "LineReader", "LineWriter", "stdio_streams"]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The longest message line read from stdin by default; a longer one gets a parse error."""

_CHUNK = 256 * 1024
_DRAIN_S = 5.0
_claimed = threading.Lock()
_TOOLS_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'
_logger = logging.getLogger("prism.gateway")


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


def _parse_error(why: str, code: int = types.PARSE_ERROR) -> SessionMessage:
    error = types.ErrorData(code=code, message=why)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


_BAD_ID = "Invalid Request: a request id must be a string or an integer"


def _has_id(line: bytes) -> bool:
    """Whether the message ``line`` (parsed as a notification by the SDK) has an ``id``.

    Such a line is a request whose id is neither a string nor an integer
    (``1.5``, ``true``, ``null``, an object): the SDK takes it for a
    notification and answers nothing, so its client would wait for ever.
    """
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # (the SDK parsed it: not reached)
        return False
    return type(message) is dict and "id" in message


class LineWriter:
    """The SDK's write stream over the protocol pipe: one line per message.

    A message is written in the sender's own task when the pipe takes it whole
    at once (the usual case: no hand-off to another task). Otherwise its
    remaining bytes go, in order, to the task running :meth:`drain`, which
    waits for the client to read them; later messages queue behind it (one
    held, the other senders wait their turn). A line begun is always
    finished, so a cancelled sender never tears the wire. Once the client is
    gone (a broken pipe) nothing more is written; a send then, or after
    :meth:`finish`, raises ``anyio.BrokenResourceError``.
    """

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self._stream = stream
        self._fd = stream.fileno()
        self._backlog_in, self._backlog = trio.open_memory_channel[bytes](1)
        self._queued = 0  # messages handed to drain() and not written yet
        self._gone = False  # the client went away: nothing more is written
        self._closed = False
        self._drained: trio.Event | None = None  # set once nothing is queued (see caught_up)
        # The answers already written before serving began (see answered()), by their
        # request's id (and its type): the SDK's own answers to them are not written.
        self._answered: dict[tuple[type, object], bytes] = {}

    def answered(self, answers: bytes) -> None:
        """``answers`` (JSON-RPC response lines) are on the wire already: skip the SDK's.

        The SDK's answer to each one's request id is dropped once instead of
        written (a client takes only one answer per id). One that differs is
        never written either: a ``tools/list`` answer that differs (the tools
        changed since the early one) is replaced by
        ``notifications/tools/list_changed``, so the client lists again; any
        other is logged.
        """
        for line in answers.splitlines():
            if line.strip():
                request_id = json.loads(line)["id"]
                self._answered[(type(request_id), request_id)] = line

    def answered_early(self, line: bytes) -> bool:
        """Whether ``line`` cancels a request answered already (see :meth:`answered`).

        A cancellation of a request whose answer was written is moot (the
        protocol says to ignore one for a request that completed): passed on, the
        SDK would drop its answer unwritten, and its early one would then stand
        in for the answer of a later request that reuses the id.
        """
        if not self._answered or b"notifications/cancelled" not in line:
            return False
        try:
            message = json.loads(line)
            request_id = message["params"]["requestId"]
        except (ValueError, KeyError, TypeError):
            return False
        return message.get("method") == "notifications/cancelled" and (
            (type(request_id), request_id) in self._answered
        )

    async def send(self, item: SessionMessage, /) -> None:
        if self._gone or self._closed:
            raise anyio.BrokenResourceError
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
        if self._answered:
            instead = self._instead(item, data)
            if instead is not None:
                if instead:
                    await self.send_line(instead)
                return
        await self.send_line(data + b"\n")

    def _instead(self, item: SessionMessage, data: bytes) -> bytes | None:
        """What to write for ``data``, an answer to a request answered already (else None)."""
        message = item.message
        if not isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            return None
        answer = self._answered.pop((type(message.id), message.id), None)
        if answer is None or answer == data:
            return None if answer is None else b""
        early = json.loads(answer).get("result")
        if isinstance(early, dict) and "tools" in early:
            return _TOOLS_CHANGED
        _logger.error(
            "an answer written before serving differs from the gateway's: %s, not %s",
            answer[:500].decode("utf-8", "replace"),
            data[:500].decode("utf-8", "replace"),
        )
        return b""

    async def send_line(self, data: bytes) -> None:
        """Write one message already encoded (its JSON and the newline), as :meth:`send` does."""
        if self.write_now(data):
            return
        self._queued += 1
        try:
            await self._backlog_in.send(data)
        except BaseException as exc:  # not handed on (a cancelled wait, or serving ended)
            self._queued -= 1
            if isinstance(exc, (trio.BrokenResourceError, trio.ClosedResourceError)):
                raise anyio.BrokenResourceError from None
            raise

    def write_now(self, data: bytes) -> bool:
        """:meth:`send_line` without waiting: ``False`` (nothing written) if it would wait.

        A line the pipe takes in part is finished by :meth:`drain`, in order.

        Raises:
            anyio.BrokenResourceError: the client is gone, or :meth:`finish` was called.
        """
        if self._gone or self._closed:
            raise anyio.BrokenResourceError
        if self._queued:
            return False
        try:
            sent = os.write(self._fd, data)
        except BlockingIOError:
            return False
        except OSError:
            self._gone = True
            return True
        if sent < len(data):
            # A line begun: drain() is idle, its one slot free; the rest goes there now.
            self._queued += 1
            self._backlog_in.send_nowait(data[sent:])
        return True

    async def drain(self) -> None:
        """Write what senders could not write at once, in order, until :meth:`finish`."""
        async with self._backlog:
            async for data in self._backlog:
                if not self._gone:
                    try:
                        await self._stream.send_all(data)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        self._gone = True
                self._queued -= 1
                if not self._queued and self._drained is not None:
                    self._drained.set()
                    self._drained = None

    @property
    def behind(self) -> bool:
        """Whether :meth:`caught_up` would wait (messages sent are not all written)."""
        return bool(self._queued) and not self._gone and not self._closed

    async def caught_up(self) -> None:
        """Wait until every message sent so far is written (at once when none waits).

        The reader waits here before it takes the client's next message, so a
        client that does not read its answers is not read either: the
        answers waiting for the pipe stay few, whatever the client sends.
        """
        if not self._queued or self._gone or self._closed:
            return  # (the usual case: no yield, the reader's own reads checkpoint)
        if self._drained is None:
            self._drained = trio.Event()
        await self._drained.wait()

    def finish(self) -> None:
        """No more messages: :meth:`drain` returns once the queued ones are written."""
        self._closed = True
        self._backlog_in.close()
        if self._drained is not None:  # nothing more will be read
            self._drained.set()
            self._drained = None

    async def aclose(self) -> None:
        """The SDK is done with the stream (nothing to release: :meth:`finish` does)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()


class LineReader(ObjectReceiveStream[SessionMessage | Exception]):
    """The SDK's read stream over the protocol pipe, read in the SDK's own task.

    Each newline-delimited message becomes a ``SessionMessage``; a line that is
    not JSON-RPC, or longer than ``limit`` bytes (dropped to its end without
    being held), is answered with a parse error through ``writer`` and skipped.
    No message is taken while an answer waits for the client to read it
    (``writer.caught_up``): a client that stops reading stops being read.
    Ends (``anyio.EndOfStream``) at EOF or once the pipe is closed.
    """

    def __init__(
        self,
        stream: trio.lowlevel.FdStream,
        writer: LineWriter,
        limit: int,
        fast: StdioFastPath | None = None,
    ) -> None:
        self._stream = stream
        self._fast = fast
        self._writer = writer
        self._limit = limit
        self._buffer = bytearray()
        self._scanned = 0
        self._skipping = False  # inside a line already refused for its length
        self._items: deque[tuple[bool, SessionMessage]] = deque()  # (a reply?, message)
        self._lines: deque[bytes | None] = deque()  # split, not yet parsed (None: too long)
        # A message was handed to the SDK that its read loop may not have dispatched yet
        self._unsettled = False
        self._eof = False
        self._too_long = _parse_error(f"message longer than {limit} bytes")

    async def receive(self) -> SessionMessage | Exception:
        if self._items or self._lines:
            # As a channel did: the tasks the previous message started run before the
            # next one (of the same chunk) is handled.
            await trio.lowlevel.checkpoint()
        while True:
            while self._items:
                reply, message = self._items[0]
                if not reply:
                    self._items.popleft()
                    self._unsettled = True
                    return message
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await self._writer.send(message)
                self._items.popleft()
            # Backpressure: no next message while answers wait for the client to read
            # (they would pile up without bound: each held by a task of its own).
            if self._writer.behind:
                await self._writer.caught_up()
            if self._lines:
                await self._parse(self._lines.popleft())
                continue
            if self._eof:
                raise anyio.EndOfStream
            try:
                chunk = await self._read()
            except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                chunk = b""
            self._split(chunk)
            if not chunk:
                self._eof = True

    async def _read(self) -> bytes:
        """The next bytes from the pipe (``b""`` at EOF), waking this task once for them.

        ``FdStream.receive_some`` yields to the scheduler before it reads, then
        waits for the pipe: two turns of this task per client message. Here
        the pipe is read first, and waited for only when it is empty (one
        turn); bytes that were there already are returned after a checkpoint,
        so a client that floods the pipe still lets every other task run.
        """
        fd = self._stream.fileno()
        try:
            data = os.read(fd, _CHUNK)
        except BlockingIOError:
            pass
        else:
            await trio.lowlevel.checkpoint()
            return data
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                return os.read(fd, _CHUNK)
            except BlockingIOError:  # woken with nothing to read after all
                continue

    def _split(self, chunk: bytes) -> None:
        buffer = self._buffer
        limit = self._limit
        buffer += chunk
        lines: list[bytes | None] = []  # None: a line refused for its length
        while (end := buffer.find(b"\n", self._scanned)) >= 0:
            if not self._skipping:
                lines.append(bytes(buffer[:end]) if end <= limit else None)
            self._skipping = False
            del buffer[: end + 1]
            self._scanned = 0
        if not chunk and buffer and not self._skipping:
            lines.append(bytes(buffer) if len(buffer) <= limit else None)  # no last newline
            buffer.clear()
        self._scanned = len(buffer)
        if len(buffer) > limit:
            if not self._skipping:
                lines.append(None)
            self._skipping = True
            buffer.clear()
            self._scanned = 0
        self._lines.extend([line for line in lines if line is None or line.strip()])

    async def _parse(self, line: bytes | None) -> None:
        """Price ``line`` on its bytes, then parse it: queue the message or the error."""
        if line is None:
            self._items.append((True, self._too_long))
            return
        # 16 MB of '[]' would take about 940 MB and seconds of the event loop to build
        refusal = await mcp_message_refusal(line, sender="the client")
        if refusal is not None:
            self._items.append((True, _parse_error(refusal)))
            return
        if self._writer.answered_early(line):
            return  # (its request was answered before serving began: nothing to cancel)
        # Only once the SDK dispatched every message handed to it before this line, so
        # a line never overtakes an earlier one (a notifications/cancelled, say), of
        # this read or an earlier one: the SDK's runner relays them through a channel
        # of its own, and its read loop may not have run since.
        fast = self._fast
        if fast is not None and fast.ready:
            if self._unsettled and fast.caught_up():
                self._unsettled = False
            if not self._unsettled and fast.take(line):
                return  # handed to the SDK dispatcher directly
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            why = f"not a JSON-RPC message: {exc}"[:500]
            self._items.append((True, _parse_error(why)))
        else:
            if isinstance(message, types.JSONRPCNotification) and _has_id(line):
                # Refused as over HTTP (by its guard), not dropped unanswered.
                self._items.append((True, _parse_error(_BAD_ID, types.INVALID_REQUEST)))
                return
            self._items.append((False, SessionMessage(message)))

    async def aclose(self) -> None:
        self._eof = True
        self._items.clear()
        self._lines.clear()


@contextlib.asynccontextmanager
async def stdio_streams(
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    fast: StdioFastPath | None = None,
    *,
    read_ahead: bytes = b"",
    answered: bytes | None = None,
) -> AsyncIterator[tuple[LineReader, LineWriter]]:
    """The read and write streams of an MCP session over this process's stdin and stdout.

    The read stream ends when stdin does; a line longer than
    ``max_message_bytes`` or that is not JSON-RPC is answered with a parse
    error (``-32700``) and skipped. Leaving the block stops reading, lets what
    is queued for the client be written (for a few seconds at most) and gives
    fd 0 and fd 1 back. ``read_ahead`` (bytes already read from stdin) is
    read first; ``answered`` holds answers already written to stdout for
    requests among them (see :meth:`LineWriter.answered`).

    Raises:
        GatewayError: another ``serve_stdio`` runs in this process, or the
            descriptors cannot be duplicated.
    """
    with _claim_std_fds() as (wire_in, wire_out):
        async with (
            trio.lowlevel.FdStream(wire_in) as pipe_in,
            trio.lowlevel.FdStream(wire_out) as pipe_out,
            trio.open_nursery() as nursery,
        ):
            writer = LineWriter(pipe_out)
            if answered:
                writer.answered(answered)
            if fast is not None:
                fast.attach(writer)
            reader = LineReader(pipe_in, writer, max_message_bytes, fast)
            if read_ahead:
                reader._split(read_ahead)
            nursery.start_soon(writer.drain)
            try:
                yield reader, writer
            finally:
                writer.finish()
                nursery.cancel_scope.deadline = trio.current_time() + _DRAIN_S
