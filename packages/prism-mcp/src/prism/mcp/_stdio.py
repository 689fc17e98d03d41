"""The bounded stdio transport: the server's pipes in front of the SDK.

The SDK's own stdio reader holds a whole message in memory before parsing; this
one refuses a line as soon as it grows past ``max_message_bytes``. The server
process is watched, not only its pipe: a child that keeps stdout open cannot
keep a dead server "connected".
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import secrets
import subprocess
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING

import anyio
import mcp_types

from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
from prism.core.process import PROCESS_TREE_ENV_VAR, terminate_process_tree

from ._budget import message_refusal
from ._gate import gate_server_requests

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Mapping

    from anyio.abc import Process

    from mcp.client._transport import TransportStreams

    from ._transports import StdioTransport
    from ._wire import WireState

__all__ = [
    "DEFAULT_ENV_PASSTHROUGH",
    "LineSplitter",
    "open_stdio_streams",
    "server_environment",
]

DEFAULT_ENV_PASSTHROUGH = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
"""Host variables a stdio server always gets when set: where to find CA certificates."""

_READ_CHUNK = 65536
_STDIN_GRACE_S = 1.0
_TERM_GRACE_S = 1.0
_KILL_WAIT_S = 2.0
_EXIT_DRAIN_S = 0.5


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


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BYTES_PER_NODE = 16
_FREE_NODES = 65536


def _too_many_nodes(line: bytes) -> int | None:
    """The objects and arrays in ``line`` when more than its bytes allow, else ``None``.

    Counted before ``json.loads`` builds them: ``{}`` is two bytes of JSON but a
    64-byte Python dict. A line may hold one object or array per 16 bytes plus
    65,536 (about 5 MB of them); brackets inside strings are not counted (a
    regex pass, only when the plain count is over).
    """
    allowed = len(line) // _BYTES_PER_NODE + _FREE_NODES
    if line.count(b"{") + line.count(b"[") <= allowed:
        return None
    bare = _STRINGS.sub(b"", line)
    nodes = bare.count(b"{") + bare.count(b"[")
    return nodes if nodes > allowed else None


def _parse(line: bytes) -> SessionMessage | None:
    # The json module, then pydantic on the Python values: about 3x faster than
    # pydantic's own JSON parsing on a listing of many small schemas (40 ms
    # against 136 ms for 600 kB of them).
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False)
    except (ValueError, RecursionError):
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
                    except _LineTooLong:
                        state.set_fault(
                            f"the server sent a message larger than max_result_bytes "
                            f"({max_message_bytes} bytes)",
                            oversize=True,
                        )
                        return
                    for line in complete:
                        nodes = _too_many_nodes(line)
                        if nodes is not None:
                            state.set_fault(
                                f"the server sent a message of {nodes} objects and arrays in "
                                f"{len(line)} bytes (at most one per {_BYTES_PER_NODE} bytes "
                                f"plus {_FREE_NODES})",
                                oversize=True,
                            )
                            return
                        refusal = await message_refusal(line)
                        if refusal is not None:
                            state.set_fault(refusal, oversize=True)
                            return
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
