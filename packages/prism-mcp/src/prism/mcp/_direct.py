"""A stdio server's ``tools/call`` written and answered past the SDK's dispatcher.

The bridge's plain ``tools/call`` (see ``_fastcall``) on a stdio session is
written to the server's stdin by the calling task itself, under an id the SDK
never mints (``prism:<n>``: a string, where the SDK's own ids are integers),
and its answer, once the transport and the gate have checked it as they check
any answer (the line's size and price, the JSON-RPC model, the caps on blocks
and objects, a large ``structuredContent`` carried apart), is handed to that
task instead of the SDK's dispatcher: no table of pending requests, memory
channel, OpenTelemetry span or request clock per call. A progress
notification naming the call goes to it too, in order with its answer (and
on to the SDK as before, which finds no request of its own for it). The
server's requests, its other notifications and every other answer go to the
SDK unchanged, so its questions, logging and listings are the SDK's.

Cancelled, a call that was written tells the server (``notifications/cancelled``
as the SDK words it, shielded, for a few seconds at most); when the session's
read side ends, every call still waiting fails with ``CONNECTION_CLOSED``, as
the SDK fails its own.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types
import pydantic_core
import trio

from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from ._requests import DIRECT_ID_PREFIX, past_float

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp.shared.dispatcher import ProgressFnT

    from ._requests import SentRequests

__all__ = ["CLOSED", "DIRECT_ID_PREFIX", "DirectCalls", "DirectRequest", "outcome"]


class _CallRecords(Protocol):
    """What the connection's shared state keeps of the calls sent (``_wire.WireState``)."""

    @property
    def sent(self) -> SentRequests: ...

    @property
    def calls(self) -> set[int | str]: ...

    streams_closed: bool


_log = logging.getLogger("prism.mcp")

_ABANDON_WRITE_S = 5.0  # as the SDK bounds its courtesy cancel
CLOSED = object()
"""What a waiting call gets when the session's read side ended."""


class _Waiter:
    """What the server sent one waiting call, in order: progress, then its answer."""

    __slots__ = ("_event", "_items")

    def __init__(self) -> None:
        self._items: deque[object] = deque()
        self._event = trio.Event()

    def put(self, item: object) -> None:
        self._items.append(item)
        self._event.set()

    async def get(self) -> object:
        while not self._items:
            await self._event.wait()
            self._event = trio.Event()
        return self._items.popleft()


class _Hook:
    """A call started with :meth:`DirectCalls.start`: what the server sends it, to a callback.

    Called in the task that read it (the session's reader), at once.
    """

    __slots__ = ("put",)

    def __init__(self, put: Callable[[object], None]) -> None:
        self.put = put


def outcome(item: object) -> dict[str, Any]:
    """A call's result from its answer (an item :meth:`DirectCalls.start`'s callback got).

    Raises:
        MCPError: the server's error answer (or the gate's refusal of its
            result), or ``CONNECTION_CLOSED``.
    """
    if item is CLOSED:
        raise MCPError(code=mcp_types.CONNECTION_CLOSED, message="Connection closed")
    if isinstance(item, mcp_types.JSONRPCError):
        error = item.error
        raise MCPError(code=error.code, message=error.message, data=error.data)
    assert isinstance(item, mcp_types.JSONRPCResponse)
    return item.result


class DirectRequest:
    """A direct call's request: what the SDK's ``JSONRPCRequest`` of it would hold.

    Only read (its id, method and params) by :meth:`DirectCalls.call` and the
    gate's record of what was sent; a plain object, not a pydantic model.
    """

    __slots__ = ("id", "method", "params")

    def __init__(self, request_id: str, params: dict[str, Any]) -> None:
        self.id = request_id
        self.method = "tools/call"
        self.params = params


class DirectCalls:
    """The ``tools/call`` requests of one stdio session sent past the SDK's dispatcher.

    ``send_line`` writes a request line (the server's stdin, as the SDK's
    writes go), ``send`` a message through the session's (gated) write
    stream, and ``track`` notes a call id as the gate notes the SDK's.
    """

    def __init__(
        self,
        *,
        send_line: Callable[[bytes], Awaitable[None]],
        write_now: Callable[[bytes], bool] | None = None,
        send: Callable[[SessionMessage], Awaitable[None]],
        track: Callable[[int | str], None],
        state: _CallRecords,
    ) -> None:
        self._send_line = send_line
        self._write_now = write_now
        self._send = send
        self._track = track
        self._state = state
        self._waiting: dict[str, _Waiter | _Hook] = {}
        self._ids = itertools.count(1)
        self.closed = False

    def awaits(self, request_id: object) -> bool:
        """Whether ``request_id`` is the id of a direct call waiting for its answer."""
        return type(request_id) is str and request_id in self._waiting

    def answer(self, request_id: str, message: object) -> None:
        """Hand the waiting call ``request_id`` (see :meth:`awaits`) its checked answer."""
        self._waiting.pop(request_id).put(message)

    def progress(self, params: dict[str, Any] | None) -> None:
        """Hand a waiting call the progress the server reported for it (as the SDK reads it)."""
        if not self._waiting or not params:
            return
        token = params.get("progressToken")
        progress: Any = params.get("progress")
        waiter = self._waiting.get(token) if type(token) is str else None
        if waiter is None or type(progress) not in (int, float):
            return
        total = params.get("total")
        if past_float(progress) or past_float(total):
            return  # no finite float holds it: no progress to report
        message = params.get("message")
        waiter.put(
            (
                float(progress),
                float(total) if isinstance(total, int | float) else None,
                message if isinstance(message, str) else None,
            )
        )

    def close(self) -> None:
        """The session's read side ended: every waiting call fails, and so does any later one."""
        self.closed = self._state.streams_closed = True
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter.put(CLOSED)

    def request(self, params: dict[str, Any], progress: bool) -> DirectRequest:
        """A new call's request: the params as given (stamped by the session).

        With ``progress`` its id is its progress token too, as the SDK makes
        it (the gate gives the server a token of its own when it is sent).
        The params must be plain JSON a UTF-8 line can carry (``_fastcall``
        checks them).
        """
        request_id = f"{DIRECT_ID_PREFIX}{next(self._ids)}"
        out = dict(params)
        meta = dict(out.get("_meta") or {})
        if progress:
            meta["progressToken"] = request_id
        if meta:
            out["_meta"] = meta
        else:
            out.pop("_meta", None)
        return DirectRequest(request_id, out)

    async def call(self, request: DirectRequest, on_progress: ProgressFnT | None) -> dict[str, Any]:
        """Write ``request`` (from :meth:`request`) and wait for its answer's result.

        Raises:
            MCPError: the server's error answer (or the gate's refusal of its
                result), or ``CONNECTION_CLOSED``.
        """
        if self.closed:
            raise MCPError(code=mcp_types.CONNECTION_CLOSED, message="Connection closed")
        request_id = request.id
        waiter = _Waiter()
        self._waiting[request_id] = waiter
        self._track(request_id)
        written = False
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            # As the gate notes what the SDK sends: the call it is for, its own token.
            self._state.sent.sending(request)
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
            message["params"] = request.params
            # The bytes the SDK's write of the request's model gives (pydantic's JSON)
            line = pydantic_core.to_json(message)
            try:
                await self._send_line(line + b"\n")
            except trio.Cancelled:
                # Cancelled while the line waited its turn: not a byte of it was
                # written (a line begun is always finished), so the server never saw it.
                self._state.sent.unsent(request_id)
                raise
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._state.streams_closed = True
                raise MCPError(
                    code=mcp_types.CONNECTION_CLOSED, message="Connection closed"
                ) from None
            written = True
            while True:
                item = await waiter.get()
                if type(item) is not tuple:
                    break
                if on_progress is not None:
                    try:
                        await on_progress(*item)
                    except Exception:
                        _log.exception("progress callback raised")
        except trio.Cancelled:
            if written:
                await self.send_cancel(request_id)
            raise
        finally:
            self._waiting.pop(request_id, None)
            self._state.calls.discard(request_id)
        return outcome(item)

    def start(self, request: DirectRequest, put: Callable[[object], None]) -> bool:
        """Write ``request`` now, without waiting; what the server sends for it goes to ``put``.

        ``put`` gets, in the session reader's task and in order, each
        progress the server reports for the call (a tuple of progress, total,
        message), then its answer (see :func:`outcome`); or :data:`CLOSED`.
        ``False``: nothing was written (the pipe has a line waiting, or is
        gone) and nothing is kept: :meth:`call` it instead. A call started
        ends with its answer, or with :meth:`abandon`.
        """
        write_now = self._write_now
        if self.closed or write_now is None:
            return False
        request_id = request.id
        self._waiting[request_id] = _Hook(put)
        self._track(request_id)
        # As the gate notes what the SDK sends: the call it is for, its own token.
        self._state.sent.sending(request)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
        message["params"] = request.params
        try:
            written = write_now(pydantic_core.to_json(message) + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            written = False
        if not written:
            self._state.sent.unsent(request_id)
            self._waiting.pop(request_id, None)
            self._state.calls.discard(request_id)
        return written

    def abandon(self, request_id: str) -> bool:
        """Stop waiting for a started call's answer (its caller gave up); whether it waited.

        The server is not told: :meth:`send_cancel` tells it.
        """
        self._state.calls.discard(request_id)
        return self._waiting.pop(request_id, None) is not None

    async def send_cancel(self, request_id: str) -> None:
        """Tell the server a call written was given up (shielded, a few seconds at most)."""
        with trio.move_on_after(_ABANDON_WRITE_S, shield=True):
            await self._cancel(request_id)

    async def _cancel(self, request_id: str) -> None:
        notification = mcp_types.JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/cancelled",
            params={"requestId": request_id, "reason": "caller cancelled"},
        )
        try:
            await self._send(SessionMessage(notification))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            _log.debug("dropped notifications/cancelled: write stream closed")
