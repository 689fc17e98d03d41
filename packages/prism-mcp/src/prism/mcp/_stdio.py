"""The bounded stdio transport: the server's pipes in front of the SDK.

The SDK's own stdio reader holds a whole message in memory before parsing; this
one refuses a line as soon as it grows past ``max_message_bytes``. The server
process is watched, not only its pipe: a child that keeps stdout open cannot
keep a dead server "connected".
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import secrets
import subprocess
from collections import deque
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import mcp_types
import trio
from anyio.abc import ObjectReceiveStream

from mcp.client.stdio import get_default_environment
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from prism.core.process import PROCESS_TREE_ENV_VAR, terminate_process_tree

from ._budget import loads, many_strings, message_refusal, parse_json, utf8_text
from ._gate import (
    MAX_MESSAGE_NODES,
    MAX_RESULT_BLOCKS,
    before_parsing,
    gate_server_requests,
    result_refused,
)
from ._scan import scan

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Mapping
    from typing import Self

    from anyio.abc import ByteReceiveStream, Process

    from mcp.client._transport import TransportStreams

    from ._transports import StdioTransport
    from ._wire import WireState

__all__ = [
    "DEFAULT_ENV_PASSTHROUGH",
    "LineSplitter",
    "ServerStdin",
    "ServerStdout",
    "crowded_refusal",
    "dropped_notification",
    "open_stdio_streams",
    "over_node_cap",
    "server_environment",
]

DEFAULT_ENV_PASSTHROUGH = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
"""Host variables a stdio server always gets when set: where to find CA certificates."""

_READ_CHUNK = 65536
_STDIN_GRACE_S = 1.0
_TERM_GRACE_S = 1.0
_KILL_WAIT_S = 2.0
_EXIT_DRAIN_S = 0.5
_STDERR_DRAIN_S = 0.25
PARSE_ON_THREAD_NODES = 8192
"""A line holding more ``{`` and ``[`` than this (inside strings too) is weighed and
parsed on a worker thread (:func:`_weigh`)."""
# One string literal, or an unterminated one to the end of the line: every quote
# starts a match, so the search never scans past a quote twice (with only
# terminated literals, each quote of an unterminated run scanned to the end again).
_STRING_LITERAL = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
# Everything up to the next literal holding a bracket (or never closed), then its
# opening quote: the text between literals and every literal without a bracket are
# consumed in C, in the order of their quotes (so the pairing is the parser's).
_TO_BRACKETED = re.compile(rb'(?:[^"]++|"[^"\\\[{]*+(?:\\[^\[{][^"\\\[{]*+)*+")*+"', re.DOTALL)
_NODES_REFUSAL = f"more than {MAX_MESSAGE_NODES} objects and arrays"

_log = logging.getLogger("prism.mcp")


class _LineTooLong(Exception):
    """A line grew past the limit before its newline arrived."""


class LineSplitter:
    """Split a byte stream into lines, never holding more than ``limit`` bytes of one line.

    Blank lines are dropped and surrounding whitespace (a carriage return too) is stripped.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes; raises :class:`_LineTooLong` past the limit."""
        lines: list[bytes] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if len(self._partial) + end - start > self._limit:
                raise _LineTooLong
            if newline < 0:
                self._partial += chunk[start:end]
                return lines
            if self._partial:
                self._partial += chunk[start:end]
                line = bytes(self._partial).strip()
                self._partial.clear()
            else:
                line = chunk[start:end].strip()
            start = newline + 1
            if line:
                lines.append(line)


def _decoded(line: bytes) -> str | None:
    """``line`` as UTF-8 text (:func:`._budget.utf8_text`), or ``None``."""
    try:
        return utf8_text(line)
    except UnicodeDecodeError:
        return None


def _parse(held: list[bytes]) -> SessionMessage | None:
    """The message of the one line in ``held`` (taken out of it), or ``None``.

    The values first, then pydantic on them: about 3x faster than pydantic's
    own JSON parsing on a listing of many small schemas (40 ms against 136 ms
    for 600 kB of them). A line of many strings goes to :func:`parse_json`;
    any other is decoded first and the bytes let go, so ``json.loads`` holds
    the text, not both.
    """
    line = held.pop()
    try:
        if many_strings(line):
            value = parse_json(line)
        else:
            text = _decoded(line)
            del line
            if text is None:
                return None
            value = loads(text)
            del text
        message = mcp_types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except (ValueError, RecursionError):
        return None
    return SessionMessage(message)


def _crowded(line: bytes) -> bool:
    """Whether ``line`` may hold more than :data:`PARSE_ON_THREAD_NODES` objects and arrays."""
    return line.count(b"{") + line.count(b"[") > PARSE_ON_THREAD_NODES


def _containers(line: bytes) -> int:
    """How many objects and arrays ``line`` holds: its ``{`` and ``[`` outside strings.

    Only the literals holding a bracket are visited one by one; nothing is built
    but one match at a time (cutting the strings out with ``re.sub`` held a piece
    per literal: 24 times the line for a list of small records).
    """
    count = line.count
    nodes = count(b"{") + count(b"[")
    find = _TO_BRACKETED.match
    literal = _STRING_LITERAL.match
    pos = 0
    while (found := find(line, pos)) is not None:
        start = found.end() - 1
        whole = literal(line, start)
        assert whole is not None  # a quote starts a literal, closed or not
        pos = whole.end()
        nodes -= count(b"{", start, pos) + count(b"[", start, pos)
    return nodes


def over_node_cap(
    line: bytes, answers: frozenset[int | str]
) -> mcp_types.JSONRPCError | int | None:
    """What takes the place of a crowded message (:func:`_crowded`), or ``None`` to parse it.

    Past ``MAX_MESSAGE_NODES`` objects and arrays, counted on the raw bytes
    (strings cut out), a message is not parsed when nothing after the parse
    would keep it: without an id (a notification), the number of its objects
    and arrays (it is dropped); the answer to a request in ``answers`` (a
    ``tools/call``, ``tasks/result`` or ``tasks/get``) with a result, the
    gate's error, as the gate refuses it after parsing.
    """
    nodes = _containers(line)
    if nodes <= MAX_MESSAGE_NODES:
        return None
    layout = scan(line, limit=MAX_RESULT_BLOCKS)
    if layout is None:
        return None  # not JSON the scan reads: the parser refuses it
    request_id: object = None
    if layout.request_id is not None:
        with suppress(ValueError):
            request_id = json.loads(layout.request_id)
    if request_id is None:
        return nodes
    if type(request_id) is str:
        request_id = coerce_request_id(request_id)  # as the SDK correlates it
    answering = type(request_id) is int or type(request_id) is str
    if answering and layout.is_result and request_id in answers:
        return result_refused(request_id, _NODES_REFUSAL)
    return None


async def crowded_refusal(raw: bytes, state: WireState) -> mcp_types.JSONRPCError | int | None:
    """:func:`over_node_cap` for a crowded ``raw``, on a worker thread; else ``None``."""
    if not _crowded(raw):
        return None
    answers = frozenset(state.calls | state.polls)
    return await anyio.to_thread.run_sync(over_node_cap, raw, answers)


def dropped_notification(state: WireState, nodes: int) -> None:
    """Count a notification dropped unparsed; warn at the 1st, 2nd, 4th, 8th... drop."""
    state.dropped_notifications += 1
    dropped = state.dropped_notifications
    if dropped & (dropped - 1) == 0:
        _log.warning(
            "MCP server %s: dropped a notification of %d objects and arrays, more than "
            "%d, unparsed (%d dropped so far)",
            state.server_id or "(unnamed)",
            nodes,
            MAX_MESSAGE_NODES,
            dropped,
        )


def _weigh(
    held: list[bytes], answers: frozenset[int | str]
) -> SessionMessage | mcp_types.JSONRPCError | int | None:
    """The crowded line of ``held`` weighed (:func:`over_node_cap`), else parsed (a worker thread).

    Returns what :func:`over_node_cap` puts in its place, or :func:`_parse`'s message.
    """
    instead = over_node_cap(held[-1], answers)
    if instead is not None:
        held.clear()
        return instead
    return _parse(held)


class ServerStdout(ObjectReceiveStream[SessionMessage | Exception]):
    """The SDK's read stream over a server's stdout, read in the SDK's own task.

    Lines are split with :class:`LineSplitter` (at most ``limit`` bytes each),
    counted for objects and arrays and priced (``message_refusal``) before
    ``json.loads`` builds them, and parsed as JSON-RPC messages; a line over
    the limit, over either bound or that is not JSON-RPC is a fault (recorded
    in ``state``) and ends the stream, as does the end of stdout or
    :meth:`end`. A call's result of too many content blocks is answered with
    the gate's error before it is parsed (``before_parsing``). A line of more
    than :data:`PARSE_ON_THREAD_NODES` ``{`` and ``[`` is weighed and parsed
    on a worker thread (:func:`_weigh`): past ``MAX_MESSAGE_NODES`` objects
    and arrays a notification is dropped unparsed, with a warning naming
    ``server_id``, and a call's result is the gate's error. The messages of a chunk
    read before the end are still delivered. At an end of stdout the session
    did not ask for, ``stderr_done`` (set once the server's stderr is read to
    its end) is awaited for a moment, so the crash's reason is known first.
    :attr:`done` is set once stdout was read to its end or a fault.
    """

    def __init__(
        self,
        stream: ByteReceiveStream,
        *,
        limit: int,
        state: WireState,
        stderr_done: trio.Event | None = None,
        server_id: str = "",
    ) -> None:
        self._stream = stream
        if server_id:
            state.server_id = server_id
        # The pipe's descriptor under anyio's wrapper of trio's pipe stream, read directly
        # (see _read); else the stream is read.
        inner = getattr(stream, "_stream", None)
        self._fd = inner.fileno() if isinstance(inner, trio.lowlevel.FdStream) else None
        self._stderr_done = stderr_done if stderr_done is not None else trio.Event()
        self._limit = limit
        self._lines = LineSplitter(limit)
        self._state = state
        self._ready: deque[SessionMessage] = deque()
        self._ended = False
        self._stopped = False  # end() was called
        self._reading: trio.CancelScope | None = None  # a wait end() cancels
        self._waiting: int | None = None  # the pipe a read waits on (end() wakes it)
        self.closing = False  # the session is closing: the end of stdout is no fault
        self.done = trio.Event()

    def end(self) -> None:
        """No more messages: a read waiting for one ends the stream now."""
        self._ended = self._stopped = True
        if self._reading is not None:
            self._reading.cancel()
        elif self._waiting is not None:
            # Wakes the read waiting on the pipe (with ClosedResourceError): a wait
            # needs no cancel scope of its own, entered and left for every message.
            trio.lowlevel.notify_closing(self._waiting)

    def _fault(self, reason: str, *, oversize: bool = False) -> None:
        self._state.set_fault(reason, oversize=oversize)
        self._ended = True
        self.done.set()

    async def receive(self) -> SessionMessage | Exception:
        if self._ready:
            # As a channel did: the tasks the previous message started (the SDK runs a
            # progress callback in a task of its own) run before the next one is handled,
            # so a call's last progress is not overtaken by its result.
            await trio.lowlevel.checkpoint()
        while not self._ready:
            if self._ended:
                raise anyio.EndOfStream
            chunk = b""
            try:
                if self._fd is None:
                    with trio.CancelScope() as self._reading:
                        chunk = await self._stream.receive(_READ_CHUNK)
                    self._reading = None
                else:
                    chunk = await self._read(self._fd)
                    if self._stopped:  # ended while this read yielded: nothing more is taken
                        chunk = b""
            except (anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                self._reading = None
                self._ended = True
                if not self.closing and not self._stopped:
                    # What the server wrote to stderr as it went (a crash's reason)
                    # is read before the session ends, for a moment at most.
                    with trio.CancelScope() as self._reading:
                        with trio.move_on_after(_STDERR_DRAIN_S):
                            await self._stderr_done.wait()
                    self._reading = None
                    if not self._stopped:
                        self._fault("the server closed its stdout (it exited or crashed)")
            if chunk:
                await self._take(chunk)
            if self._ended:
                self.done.set()
        return self._ready.popleft()

    async def _read(self, fd: int) -> bytes:
        """The next bytes of stdout, waking this task once for them (as the stream reads).

        The stream yields to the scheduler before it reads, then waits for the
        pipe: two turns of this task per message. Here the pipe is read first
        and waited for only when empty (one turn); bytes there already come
        after a checkpoint, so a server flooding its stdout lets every other
        task run. The end of stdout raises ``anyio.EndOfStream``, a pipe closed
        here ``anyio.ClosedResourceError``, as the stream does.
        """
        try:
            data = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            data = None
        else:
            await trio.lowlevel.checkpoint()
        while data is None:
            if self._stopped:
                raise anyio.ClosedResourceError
            self._waiting = fd
            try:
                await trio.lowlevel.wait_readable(fd)
            except (trio.ClosedResourceError, trio.BrokenResourceError) as exc:
                raise anyio.ClosedResourceError from exc
            finally:
                self._waiting = None
            try:
                data = os.read(fd, _READ_CHUNK)
            except BlockingIOError:  # woken with nothing to read after all
                continue
        if not data:
            raise anyio.EndOfStream
        return data

    async def _take(self, chunk: bytes) -> None:
        try:
            complete = self._lines.feed(chunk)
        except _LineTooLong:
            self._fault(
                f"the server sent a message larger than max_result_bytes ({self._limit} bytes)",
                oversize=True,
            )
            return
        for index in range(len(complete)):
            line, complete[index] = complete[index], b""
            refusal = await message_refusal(line)
            if refusal is not None:
                self._fault(refusal, oversize=True)
                return
            early = await before_parsing(line, self._state)
            if not isinstance(early, bytes):
                self._ready.append(SessionMessage(early))
                continue
            # Handed over: the parse holds the line, nothing here does.
            held = [line]
            del line, early
            if _crowded(held[0]):
                state = self._state
                answers = frozenset(state.calls | state.polls)
                message = await anyio.to_thread.run_sync(_weigh, held, answers)
            else:
                message = _parse(held)
            if message is None:
                self._fault("the server wrote a stdout line that is not JSON-RPC")
                return
            if isinstance(message, int):
                dropped_notification(self._state, message)
                continue
            if not isinstance(message, SessionMessage):
                message = SessionMessage(message)
            self._ready.append(message)

    async def aclose(self) -> None:
        """The SDK is done with the stream: :meth:`end`."""
        self.end()


class ServerStdin:
    """The SDK's write stream over a server's stdin: one line per message.

    A message is written in the sender's own task when the pipe takes it whole
    at once (the usual case: no hand-off to a writer task). Otherwise its
    remaining bytes go, in order, to the task running :meth:`drain`, which
    waits for the server to read them, ``write_stall_s`` at most: a write
    that makes no progress that long calls ``on_fault``. Later messages queue
    behind it (one held, the other senders wait their turn). A line begun is
    always finished, so a cancelled sender never tears the wire. Once the
    pipe failed (``on_fault`` was called) nothing more is written; a send
    then, or after :meth:`close`, raises ``anyio.BrokenResourceError``.
    """

    def __init__(
        self,
        stream: trio.lowlevel.FdStream,
        *,
        write_stall_s: float,
        on_fault: Callable[[str], None],
    ) -> None:
        self._stream = stream
        self._fd = stream.fileno()
        self._stall_s = write_stall_s
        self._on_fault = on_fault
        self._backlog_in, self._backlog = trio.open_memory_channel[bytes](1)
        self._queued = 0  # messages handed to drain() and not written yet
        self._gone = False
        self._closed = False

    def _fail(self, reason: str) -> None:
        if not self._gone:
            self._gone = True
            self._on_fault(reason)

    def _write_now(self, item: SessionMessage) -> bytes | None:
        """Write ``item`` if nothing is queued; the bytes still to write, or ``None``."""
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
        return self._write_line(data + b"\n")

    def _write_line(self, data: bytes) -> bytes | None:
        if self._gone or self._closed:
            raise anyio.BrokenResourceError
        if self._queued:
            return data
        try:
            sent = os.write(self._fd, data)
        except BlockingIOError:
            return data
        except OSError:
            self._fail("the server stopped reading its stdin (it exited or crashed)")
            return None
        if sent < len(data):
            # drain() is idle and its one slot free: the rest of the line goes there now.
            self._queued += 1
            self._backlog_in.send_nowait(data[sent:])
        return None

    async def send(self, item: SessionMessage, /) -> None:
        await self._send(self._write_now(item))

    async def send_line(self, line: bytes) -> None:
        """Write one message's line (its JSON and the newline), as :meth:`send` writes."""
        await self._send(self._write_line(line))

    def write_now(self, line: bytes) -> bool:
        """Write one message's line now if no other waits its turn; ``False``: nothing written.

        A line the pipe takes in part is finished by :meth:`drain`, in order.

        Raises:
            anyio.BrokenResourceError: the pipe failed, or :meth:`close` was called.
        """
        return self._write_line(line) is None

    async def _send(self, data: bytes | None) -> None:
        if data is None:
            return
        self._queued += 1
        try:
            await self._backlog_in.send(data)
        except BaseException as exc:  # not handed on (a cancelled wait, or the pipe closed)
            self._queued -= 1
            if isinstance(exc, (trio.BrokenResourceError, trio.ClosedResourceError)):
                raise anyio.BrokenResourceError from None
            raise

    def send_nowait(self, item: SessionMessage) -> None:
        """Write ``item`` now; ``anyio.WouldBlock`` if it would have to wait its turn."""
        if self._write_now(item) is not None:
            raise anyio.WouldBlock

    async def drain(self) -> None:
        """Write what senders could not write at once, in order, until :meth:`close`."""
        async with self._backlog:
            async for data in self._backlog:
                try:
                    if self._gone:
                        continue
                    with trio.move_on_after(self._stall_s) as stalled:
                        await self._stream.send_all(data)
                    if stalled.cancelled_caught:
                        self._fail(
                            f"the server stopped reading its stdin (a write made no progress "
                            f"for {self._stall_s:g}s)"
                        )
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    if not self._closed:
                        self._fail("the server stopped reading its stdin (it exited or crashed)")
                finally:
                    self._queued -= 1

    def close(self) -> None:
        """No more messages: :meth:`drain` returns once the queued ones are written."""
        self._closed = True
        self._backlog_in.close()

    async def close_pipe(self) -> None:
        """Close the server's stdin (it reads EOF); a write still waiting is abandoned."""
        self.close()
        await self._stream.aclose()

    async def aclose(self) -> None:
        """The SDK is done with the stream: :meth:`close`."""
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self.close()


def server_environment(
    passthrough: Iterable[str], extra: Mapping[str, str] | None, host: Mapping[str, str]
) -> dict[str, str]:
    """The environment a stdio server starts with.

    The SDK's safe default (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``,
    ``USER``), then the host variables named by :data:`DEFAULT_ENV_PASSTHROUGH`
    and ``passthrough`` (names or ``fnmatch`` patterns, matched case-sensitively),
    then ``extra``.
    """
    patterns = (*DEFAULT_ENV_PASSTHROUGH, *passthrough)
    env = get_default_environment()
    for name, value in host.items():
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            env[name] = value
    return env | dict(extra or {})


@asynccontextmanager
async def open_stdio_streams(
    transport: StdioTransport,
    *,
    max_message_bytes: int,
    state: WireState,
    write_stall_s: float,
    max_server_requests: int,
    server_id: str = "",
) -> AsyncIterator[TransportStreams]:
    """Spawn the server and yield the SDK's (read, write) streams over its stdio.

    The server runs in a new session with :func:`server_environment` and a
    fresh random :data:`PROCESS_TREE_ENV_VAR` marker. A write to its stdin
    that makes no progress for ``write_stall_s`` (a server that stopped
    reading) closes the session, so no writer waits forever. On exit, shielded
    and bounded by a few seconds: stdin is closed, then the server's whole
    process tree (descendants, session, marked processes) is terminated, so
    none of it outlives the block.
    """
    marker = secrets.token_hex(16)
    env = server_environment(transport.env_passthrough, transport.env, os.environ) | {
        PROCESS_TREE_ENV_VAR: marker
    }
    # The server's stdin is our own pipe: each message is written in the sending task.
    stdin_read, stdin_write = os.pipe()
    try:
        process: Process = await anyio.open_process(
            [transport.command, *transport.args],
            stdin=stdin_read,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=transport.cwd,
            start_new_session=True,
        )
    except BaseException:
        os.close(stdin_write)
        raise
    finally:
        os.close(stdin_read)
    state.pid = process.pid
    closing = False
    assert process.stdout is not None
    stderr_done = trio.Event()
    stdout = ServerStdout(
        process.stdout,
        limit=max_message_bytes,
        state=state,
        stderr_done=stderr_done,
        server_id=server_id,
    )

    def stdin_failed(reason: str) -> None:
        if not closing:
            state.set_fault(reason)
        stdout.end()

    stdin = ServerStdin(
        trio.lowlevel.FdStream(stdin_write), write_stall_s=write_stall_s, on_fault=stdin_failed
    )

    async def watch_exit() -> None:
        # The process, not its pipe: a child that called setsid (or any fork)
        # may hold stdout open long after the server died, and the session
        # would wait out every call's timeout. What the server wrote before it
        # exited is still read, for a moment, then the session ends.
        await process.wait()
        with anyio.move_on_after(_EXIT_DRAIN_S):
            await stdout.done.wait()
        if closing:
            return
        state.returncode = process.returncode
        state.set_fault("the server process exited")
        stdout.end()

    async def read_stderr() -> None:
        assert process.stderr is not None
        try:
            with suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                while True:
                    state.add_stderr(await process.stderr.receive(_READ_CHUNK))
        finally:
            stderr_done.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stdin.drain)
        tasks.start_soon(read_stderr)
        tasks.start_soon(watch_exit)
        try:
            yield gate_server_requests(
                (stdout, stdin),
                limit=max_server_requests,
                state=state,
                send_line=stdin.send_line,
                write_now=stdin.write_now,
            )
        finally:
            closing = stdout.closing = True
            with anyio.CancelScope(shield=True):
                stdin.close()
                await _stop(process, stdin, state, marker)
                stdout.end()
            tasks.cancel_scope.cancel()


async def _wait_exit(process: Process, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        await process.wait()
        return True
    return process.returncode is not None


async def _stop(process: Process, stdin: ServerStdin, state: WireState, marker: str) -> None:
    """Close stdin, then terminate the server's tree (SIGTERM, SIGKILL); each wait is bounded."""
    with suppress(OSError, trio.BrokenResourceError, trio.ClosedResourceError):
        with anyio.move_on_after(_STDIN_GRACE_S):
            await stdin.close_pipe()
    await _wait_exit(process, _STDIN_GRACE_S)
    # Whatever the server left behind goes too, even when it exited on its own: children
    # in its session, and (by the marker) grandchildren that called setsid and were orphaned.
    await terminate_process_tree(
        process.pid,
        marker=marker,
        grace_s=_TERM_GRACE_S,
        root_reaped=process.returncode is not None,
    )
    await _wait_exit(process, _KILL_WAIT_S)
    state.returncode = process.returncode
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()
