"""Bounded transports in front of the MCP SDK.

The SDK's own stdio reader holds a whole message in memory before parsing and
its HTTP client reads JSON bodies whole, so a hostile server could make the
host allocate without bound. These transports refuse a message as soon as it
grows past ``max_message_bytes`` and record why in a :class:`WireState`,
which the bridge reads to turn the resulting closed connection into a clear
error result.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import secrets
import socket
import subprocess
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import httpx2
import mcp_types
from mcp_types import methods as _methods

from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from prism.core.process import PROCESS_TREE_ENV_VAR, terminate_process_tree

from ._content import TASK_META_KEY

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Mapping
    from types import TracebackType
    from typing import Self

    from anyio.abc import Process

    from mcp.client._transport import TransportStreams

    from ._transports import StdioTransport, StreamableHttpTransport

__all__ = [
    "DEFAULT_ENV_PASSTHROUGH",
    "LineSplitter",
    "LineTooLong",
    "WireState",
    "gate_server_requests",
    "open_http_streams",
    "open_stdio_streams",
    "server_environment",
]

DEFAULT_ENV_PASSTHROUGH = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
"""Host variables a stdio server always gets when set: where to find CA certificates."""

_READ_CHUNK = 65536
_STDERR_TAIL_BYTES = 4096
_STDIN_GRACE_S = 1.0
_TERM_GRACE_S = 1.0
_KILL_WAIT_S = 2.0
_EXIT_DRAIN_S = 0.5


@attrs.define(eq=False)
class WireState:
    """What one connection's transport saw; written by the transport, read by the bridge.

    Attributes:
        fault: why the transport closed the connection (first reason wins), or ``None``.
        oversize: the fault was a message over the byte limit.
        pid: the server process id (stdio only).
        returncode: the server's exit status once known (stdio only).
        refused_requests: server requests refused by the flood gate.
        dropped_tools: (name, reason) of listed tools the SDK would have refused,
            dropped from their ``tools/list`` page; the listing takes them.
    """

    fault: str | None = None
    oversize: bool = False
    pid: int | None = None
    returncode: int | None = None
    refused_requests: int = 0
    dropped_tools: list[tuple[str, str]] = attrs.field(factory=list)
    _stderr: bytearray = attrs.field(factory=bytearray)

    def set_fault(self, reason: str, *, oversize: bool = False) -> None:
        """Record ``reason`` unless an earlier fault is already recorded."""
        if self.fault is None:
            self.fault = reason
            self.oversize = oversize

    def add_stderr(self, chunk: bytes) -> None:
        """Keep the last few KiB of the server's stderr."""
        self._stderr += chunk
        if len(self._stderr) > _STDERR_TAIL_BYTES:
            del self._stderr[: len(self._stderr) - _STDERR_TAIL_BYTES]

    def stderr_tail(self, limit: int = 800) -> str:
        """The end of the server's stderr, decoded leniently and stripped."""
        text = bytes(self._stderr[-limit:]).decode("utf-8", "replace").strip()
        return text


class LineTooLong(Exception):
    """A line grew past the limit before its newline arrived."""


class LineSplitter:
    """Split a byte stream into lines, never holding more than ``limit`` bytes of one line.

    Blank lines are dropped and surrounding whitespace (a carriage return too) is stripped.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes; raises :class:`LineTooLong` past the limit."""
        lines: list[bytes] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if len(self._partial) + end - start > self._limit:
                raise LineTooLong
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


def _parse(line: bytes) -> SessionMessage | None:
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        return None
    return SessionMessage(message)


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
    process: Process = await anyio.open_process(
        [transport.command, *transport.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=transport.cwd,
        start_new_session=True,
    )
    state.pid = process.pid
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    closing = False
    stdout_done = anyio.Event()

    async def read_stdout() -> None:
        try:
            await _read_stdout()
        finally:
            stdout_done.set()

    async def _read_stdout() -> None:
        assert process.stdout is not None
        lines = LineSplitter(max_message_bytes)
        try:
            async with read_send:
                while True:
                    try:
                        chunk = await process.stdout.receive(_READ_CHUNK)
                    except (anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                        if not closing:
                            state.set_fault("the server closed its stdout (it exited or crashed)")
                        return
                    try:
                        complete = lines.feed(chunk)
                    except LineTooLong:
                        state.set_fault(
                            f"the server sent a message larger than max_result_bytes "
                            f"({max_message_bytes} bytes)",
                            oversize=True,
                        )
                        return
                    for line in complete:
                        message = _parse(line)
                        if message is None:
                            state.set_fault("the server wrote a stdout line that is not JSON-RPC")
                            return
                        await read_send.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for item in write_recv:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    with anyio.move_on_after(write_stall_s) as stalled:
                        await process.stdin.send(data.encode("utf-8") + b"\n")
                    if stalled.cancelled_caught:
                        state.set_fault(
                            f"the server stopped reading its stdin (a write made no progress "
                            f"for {write_stall_s:g}s)"
                        )
                        read_send.close()
                        return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            if not closing:
                state.set_fault("the server stopped reading its stdin (it exited or crashed)")
            read_send.close()

    async def watch_exit() -> None:
        # The process, not its pipe: a child that called setsid (or any fork)
        # may hold stdout open long after the server died, and the session
        # would wait out every call's timeout. What the server wrote before it
        # exited is still read, for a moment, then the session ends.
        await process.wait()
        with anyio.move_on_after(_EXIT_DRAIN_S):
            await stdout_done.wait()
        if closing:
            return
        state.returncode = process.returncode
        state.set_fault("the server process exited")
        read_send.close()

    async def read_stderr() -> None:
        assert process.stderr is not None
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
            while True:
                state.add_stderr(await process.stderr.receive(_READ_CHUNK))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        tasks.start_soon(write_stdin)
        tasks.start_soon(read_stderr)
        tasks.start_soon(watch_exit)
        try:
            yield gate_server_requests(
                (read_recv, write_send), limit=max_server_requests, state=state
            )
        finally:
            closing = True
            with anyio.CancelScope(shield=True):
                await _stop(process, state, marker)
                for stream in (read_recv, write_send, read_send, write_recv):
                    stream.close()
            tasks.cancel_scope.cancel()


async def _wait_exit(process: Process, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        await process.wait()
        return True
    return process.returncode is not None


async def _stop(process: Process, state: WireState, marker: str) -> None:
    """Close stdin, then terminate the server's tree (SIGTERM, SIGKILL); each wait is bounded."""
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            with anyio.move_on_after(_STDIN_GRACE_S):
                await process.stdin.aclose()
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


_TEARDOWN_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream)
_SDK_HTTP_LOGGER = "mcp.client.streamable_http"


class _QuietTeardown(logging.Filter):
    """Demote the SDK's tracebacks for an expected teardown to DEBUG.

    When a session closes while the server is still streaming (after a
    ``max_call_s`` timeout, say, or when the bridge closes), the SDK's HTTP
    reader keeps handing events to a stream that is already closed and logs
    each failure at ERROR with a traceback. The bridge has already turned the
    fault into one error result; the record stays available at DEBUG.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.levelno >= logging.ERROR and isinstance(exc, _TEARDOWN_ERRORS):
            record.levelno = logging.DEBUG
            record.levelname = "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_QUIET = _QuietTeardown()


def _quiet_sdk_teardown() -> None:
    sdk = logging.getLogger(_SDK_HTTP_LOGGER)
    if _QUIET not in sdk.filters:
        sdk.addFilter(_QUIET)


class _MessageTooLarge(httpx2.StreamError):
    """Raised inside the SDK's response reading; the SDK turns it into an error reply."""


class _LimitedStream(httpx2.AsyncByteStream):
    def __init__(
        self, inner: httpx2.AsyncByteStream, *, limit: int, events: bool, state: WireState
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._events = events
        self._state = state

    def _refuse(self) -> _MessageTooLarge:
        reason = f"the server sent a message larger than max_result_bytes ({self._limit} bytes)"
        self._state.set_fault(reason, oversize=True)
        return _MessageTooLarge(reason)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        tail = b""
        async for chunk in self._inner:
            if self._events:
                # Count bytes since the last blank line: one server-sent event at a time.
                data = tail + chunk
                cut = max(data.rfind(b"\n\n") + 2, data.rfind(b"\r\n\r\n") + 4, 0)
                size = len(data) - cut if cut > 0 else size + len(chunk)
                tail = data[-3:]
            else:
                size += len(chunk)
            if size > self._limit:
                raise self._refuse()
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _EmptyRefusal(httpx2.AsyncByteStream):
    def __init__(self, error: _MessageTooLarge) -> None:
        self._error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise self._error
        yield b""  # pragma: no cover


class _LimitedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, *, limit: int, state: WireState) -> None:
        # Nagle's algorithm off, whatever the network backend: the SDK writes a request
        # as two sends (headers, then body), and with Nagle on the second would wait for
        # the server's delayed ACK (~40 ms per call). trio already sets this by default.
        self._inner = httpx2.AsyncHTTPTransport(
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        )
        self._limit = limit
        self._state = state

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        content_type = response.headers.get("content-type", "").lower()
        events = content_type.startswith("text/event-stream")
        declared = response.headers.get("content-length", "")
        inner = response.stream
        assert isinstance(inner, httpx2.AsyncByteStream)
        stream: httpx2.AsyncByteStream
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            # Decompression happens after this byte count, so a small compressed body
            # could still expand without bound: refuse it (we asked for identity).
            await inner.aclose()
            reason = f"the server sent a {encoding!r}-encoded body; only identity is accepted"
            self._state.set_fault(reason)
            stream = _EmptyRefusal(_MessageTooLarge(reason))
        elif not events and declared.isdigit() and int(declared) > self._limit:
            await inner.aclose()
            stream = _EmptyRefusal(
                _LimitedStream(inner, limit=self._limit, events=False, state=self._state)._refuse()
            )
        else:
            stream = _LimitedStream(inner, limit=self._limit, events=events, state=self._state)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def open_http_streams(
    transport: StreamableHttpTransport,
    *,
    max_message_bytes: int,
    connect_timeout_s: float,
    state: WireState,
    max_server_requests: int,
) -> AsyncIterator[TransportStreams]:
    """Yield the SDK's (read, write) streams over Streamable HTTP, with bounded bodies."""
    _quiet_sdk_teardown()
    client = httpx2.AsyncClient(
        transport=_LimitedTransport(limit=max_message_bytes, state=state),
        headers={**dict(transport.headers), "accept-encoding": "identity"},
        auth=transport.auth,
        timeout=httpx2.Timeout(connect_timeout_s, read=None),
        follow_redirects=False,
    )
    async with (
        client,
        streamable_http_client(
            transport.url, http_client=client, max_sse_event_size=max_message_bytes
        ) as streams,
    ):
        yield gate_server_requests(streams, limit=max_server_requests, state=state)


_TOO_MANY_REQUESTS = -32000
_MAX_TRACKED_CALLS = 4096


class _GatedRead:
    """The SDK's read stream, admitting at most ``limit`` server requests at a time.

    The SDK starts a task for every request a server sends and keeps it until its
    answer is written; a server that floods requests (and never reads the answers)
    would grow those without bound. Past the limit a request is answered with an
    error when the writer can take it at once, and dropped otherwise.
    """

    def __init__(self, inner: Any, gate: _Gate) -> None:
        self._inner = inner
        self._gate = gate

    @property
    def last_context(self) -> object:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item: SessionMessage | Exception = await self._inner.receive()
            if isinstance(item, SessionMessage):
                message = item.message
                if isinstance(message, mcp_types.JSONRPCRequest) and not self._gate.admit(
                    message.id
                ):
                    continue
                if isinstance(message, mcp_types.JSONRPCResponse) and self._gate.pending:
                    self._gate.answered(message)
                if (
                    self._gate.calls
                    and isinstance(message, mcp_types.JSONRPCResponse)
                    and message.id in self._gate.calls
                ):
                    self._gate.calls.discard(message.id)
                    result = message.result
                    # A result with only structuredContent is valid; the 2025-11-25
                    # schema still requires content, so give it an empty one.
                    if "content" not in result and "structuredContent" in result:
                        result["content"] = []
                    elif "content" not in result and isinstance(result.get("task"), dict):
                        # A task-augmented call answers with a CreateTaskResult; the SDK
                        # only knows CallToolResult here, so carry the task in _meta.
                        meta = result.get("_meta")
                        meta = dict(meta) if isinstance(meta, dict) else {}
                        meta[TASK_META_KEY] = result.pop("task")
                        result["_meta"] = meta
                        result["content"] = []
            return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _GatedWrite:
    """The SDK's write stream; an answer to an admitted server request frees its slot."""

    def __init__(self, inner: Any, gate: _Gate) -> None:
        self._inner = inner
        self._gate = gate

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if type(message) is mcp_types.JSONRPCRequest:
            if message.method == "tools/call":
                self._gate.track_call(message.id)
            elif message.method in _WATCHED:
                self._gate.track(message.id, message.method)
        if not self._gate.inflight or not isinstance(
            message, (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)
        ):
            await self._inner.send(item)
            return
        try:
            await self._inner.send(item)
        finally:
            # The slot frees only once the answer is handed on: a task still waiting
            # to write is a task the flood made.
            self._gate.inflight.discard(message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


# Requests whose answers the gate reads: the handshake (for the protocol
# version) and tool listings (to drop a tool the SDK would refuse).
_WATCHED = frozenset({"initialize", "tools/list"})
_MAX_DROPPED = 64
_LATEST = "2026-07-28"


def _page_refusal(page: dict[str, Any], version: str) -> str | None:
    """Why the SDK would refuse a ``tools/list`` page, or ``None`` (one check per page)."""
    try:
        with suppress(KeyError):
            _methods.validate_server_result("tools/list", version, page)
        mcp_types.ListToolsResult.model_validate(page, by_name=False)
    except ValueError as exc:
        return str(exc)[:300]
    return None


def _sdk_refusal(page: dict[str, Any], tool: object, version: str) -> str | None:
    """Why the SDK would refuse ``tool`` in a ``tools/list`` page, or ``None``.

    The SDK validates a whole page against the negotiated revision's schema
    (through 2025-11-25 an ``outputSchema`` must say ``"type": "object"``) and
    then its own model: one bad tool would fail the listing of every tool.
    """
    try:
        with suppress(KeyError):
            _methods.validate_server_result("tools/list", version, {**page, "tools": [tool]})
        mcp_types.Tool.model_validate(tool, by_name=False)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        errors = getattr(exc, "errors", None)
        if callable(errors):
            with suppress(Exception):
                first = errors()[0]
                where = ".".join(str(part) for part in first.get("loc", ()))
                return f"{where}: {first.get('msg', '')}"[:300]
        return str(exc)[:300]
    return None


@attrs.define(eq=False)
class _Gate:
    limit: int
    state: WireState
    write: Any
    inflight: set[int | str] = attrs.field(factory=set)
    calls: set[int | str] = attrs.field(factory=set)
    pending: dict[int | str, str] = attrs.field(factory=dict)
    version: str | None = None

    def track(self, request_id: int | str, method: str) -> None:
        if len(self.pending) >= _MAX_TRACKED_CALLS:
            self.pending.clear()
        self.pending[request_id] = method

    def answered(self, message: mcp_types.JSONRPCResponse) -> None:
        method = self.pending.pop(message.id, None)
        result = message.result
        if method == "initialize":
            version = result.get("protocolVersion")
            self.version = version if isinstance(version, str) else None
        elif method == "tools/list" and isinstance(result.get("tools"), list):
            version = self.version or _LATEST
            if _page_refusal(result, version) is None:
                return
            kept: list[object] = []
            for tool in result["tools"]:
                reason = _sdk_refusal(result, tool, version)
                if reason is None:
                    kept.append(tool)
                    continue
                name = tool.get("name") if isinstance(tool, dict) else None
                if len(self.state.dropped_tools) < _MAX_DROPPED:
                    self.state.dropped_tools.append((repr(name)[:130], reason))
            result["tools"] = kept

    def track_call(self, request_id: int | str) -> None:
        # Bounded: ids of calls abandoned without an answer are forgotten in bulk.
        if len(self.calls) >= _MAX_TRACKED_CALLS:
            self.calls.clear()
        self.calls.add(request_id)

    def admit(self, request_id: int | str) -> bool:
        if request_id not in self.inflight and len(self.inflight) < self.limit:
            self.inflight.add(request_id)
            return True
        self.state.refused_requests += 1
        refusal = SessionMessage(
            mcp_types.JSONRPCError(
                jsonrpc="2.0",
                id=request_id,
                error=mcp_types.ErrorData(
                    code=_TOO_MANY_REQUESTS,
                    message=f"too many concurrent requests (at most {self.limit})",
                ),
            )
        )
        send_nowait = getattr(self.write, "send_nowait", None)
        if send_nowait is not None:
            # Never wait: a server that does not read its answers just loses this one.
            with suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                send_nowait(refusal)
        return False


def gate_server_requests(
    streams: TransportStreams, *, limit: int, state: WireState
) -> TransportStreams:
    """Wrap ``streams`` so at most ``limit`` server-to-client requests are handled at once."""
    read, write = streams
    gate = _Gate(limit=limit, state=state, write=write)
    return _GatedRead(read, gate), _GatedWrite(write, gate)
