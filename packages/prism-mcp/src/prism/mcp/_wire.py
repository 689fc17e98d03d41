"""What one connection's transport saw, shared by the bounded transports and the bridge.

The transports in front of the MCP SDK (``_stdio``: the server's pipes;
``_http``: Streamable HTTP bodies; ``_gate``: the server-request flood gate and
the listing check) refuse what would make the host allocate or wait without
bound, and record why in a :class:`WireState`, which the bridge reads to turn
the resulting closed connection into a clear error result.
"""

from __future__ import annotations

import attrs

from ._direct import DirectCalls
from ._requests import SentRequests

__all__ = ["WireState"]

_STDERR_TAIL_BYTES = 4096


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
        calls: ids of the ``tools/call`` and ``tasks/result`` requests sent and
            not answered yet (bounded: forgotten in bulk past a few thousand).
        polls: ids of the ``tasks/get`` requests sent and not answered yet
            (bounded the same way).
        detached: ``structuredContent`` values the transport parsed apart, by
            the token of the marker it put in their place (bounded).
        sent: the requests sent for tool calls: their own progress tokens,
            and which calls the server has not answered yet.
        direct: a stdio session's calls past the SDK's dispatcher (see ``_direct``).
        server_id: the server's id, for warnings.
        dropped_notifications: notifications dropped unparsed (too many objects and arrays).
        streams_closed: the session's streams are gone (its read side was closed, or
            a write found it broken): a ``CONNECTION_CLOSED`` a call fails with is
            then the connection's end, where otherwise it is the server's own error
            code (-32000, JSON-RPC's first "server error", which servers use freely).
    """

    fault: str | None = None
    oversize: bool = False
    pid: int | None = None
    returncode: int | None = None
    refused_requests: int = 0
    dropped_tools: list[tuple[str, str]] = attrs.field(factory=list)
    calls: set[int | str] = attrs.field(factory=set)
    polls: set[int | str] = attrs.field(factory=set)
    detached: dict[str, object] = attrs.field(factory=dict)
    sent: SentRequests = attrs.field(factory=SentRequests)
    direct: DirectCalls | None = None
    server_id: str = ""
    dropped_notifications: int = 0
    streams_closed: bool = False
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
