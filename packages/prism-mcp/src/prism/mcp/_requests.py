"""The requests a session sent for tool calls: their own progress tokens, and their answers.

Two things the SDK's request ids cannot be trusted with:

* **Progress.** The SDK uses a request's id (1, 2, 3, ...) as its progress
  token and hands a ``notifications/progress`` to whichever request that
  token names. Several callers share one session, so a token guessed (or
  learnt) from another call would put progress into that call. Here every
  request that asks for progress goes out with a token of its own, 128
  random bits; a notification comes back to the SDK under the SDK's token
  only when it names a token of a request still waiting, and, when the
  transport says which request's stream it came on (a Streamable HTTP
  response), only when that stream belongs to the same call. Anything else
  (an unknown token, a finished request's, another call's) is dropped.
* **Answers.** A call's ``tools/call`` (and, when the server ran it as a
  task, the task) counts as unanswered until the server answers it, even
  after the caller gave up on it: the SDK drops a late answer, which here
  is the sign the server is done with that call (see :meth:`SentRequests.unanswered`).
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from mcp.shared.dispatcher import coerce_request_id

from ._callbacks import current_call

if TYPE_CHECKING:
    import mcp_types

__all__ = ["DIRECT_ID_PREFIX", "Outgoing", "SentRequests", "past_float", "request_key"]

_MAX_SENT = 4096
_TERMINAL = frozenset({"completed", "failed", "cancelled"})
_TASK_FOLLOW_UPS = frozenset({"tasks/get", "tasks/result", "tasks/cancel"})
_CANCELLED = "notifications/cancelled"

RequestId = int | str


class Outgoing(Protocol):
    """A request as it is sent: the SDK's ``JSONRPCRequest``, or a direct call's."""

    @property
    def id(self) -> RequestId: ...

    @property
    def method(self) -> str: ...

    @property
    def params(self) -> dict[str, Any] | None: ...


@attrs.define(eq=False, slots=True)
class _Sent:
    """One request sent: for which call, and the progress tokens on each side."""

    call_id: str | None
    method: str
    sdk_token: Any = None  # the token the SDK put in (its request id)
    token: str | None = None  # the token the server was given


@attrs.define(eq=False)
class SentRequests:
    """What one session sent (bounded), written by the transport's gate.

    ``forgot`` is set once entries were dropped to keep the bound (thousands
    of requests never answered): from then on any call counts as unanswered
    (see :meth:`unanswered`), never the other way round.
    """

    _by_id: dict[RequestId, _Sent] = attrs.field(factory=dict)
    _by_token: dict[str, RequestId] = attrs.field(factory=dict)
    # Calls with a tools/call the server has not answered ("call") or that run as a task
    # the server has not said is over ("task").
    _open: dict[str, str] = attrs.field(factory=dict)
    forgot: bool = False

    def unanswered(self, call_id: str) -> bool:
        """Whether the server may still be running call ``call_id`` (it has not answered it)."""
        return self.forgot or call_id in self._open

    def sending(self, message: Outgoing) -> None:
        """Note ``message`` as it is sent (in the sending task).

        A request asking for progress goes with a token of its own: its
        ``_meta`` is replaced (in the message's own ``params``; the SDK's
        ``_meta`` object is left as it was).
        """
        params = message.params
        meta = params.get("_meta") if params is not None else None
        asks = type(meta) is dict and "progressToken" in meta
        call_id = current_call()
        method = message.method
        runs_call = method == "tools/call" or method in _TASK_FOLLOW_UPS
        if not asks and (call_id is None or not runs_call):
            return
        if len(self._by_id) >= _MAX_SENT or len(self._open) >= _MAX_SENT:
            self._by_id.clear()
            self._by_token.clear()
            self._open.clear()
            self.forgot = True
        sent = _Sent(call_id=call_id, method=method)
        key = request_key(message.id)
        self._by_id[key] = sent
        if call_id is not None and method == "tools/call":
            self._open[call_id] = "call"
        if asks:
            assert params is not None
            assert type(meta) is dict
            sent.sdk_token = meta["progressToken"]
            sent.token = token = os.urandom(16).hex()  # (what secrets.token_hex(16) is)
            self._by_token[token] = key
            params["_meta"] = {**meta, "progressToken": token}

    def unsent(self, request_id: RequestId) -> None:
        """``request_id`` was never written (its sender was cancelled while it waited its turn).

        The server cannot be running it: its call no longer counts as unanswered.
        """
        sent = self._by_id.pop(request_key(request_id), None)
        if sent is None:
            return
        if sent.token is not None:
            self._by_token.pop(sent.token, None)
        call_id = sent.call_id
        if (
            sent.method == "tools/call"
            and call_id is not None
            and self._open.get(call_id) == "call"
        ):
            del self._open[call_id]

    def cancelled(self, params: dict[str, Any] | None) -> None:
        """The client cancelled a request: its progress is over (its answer may still come)."""
        request_id = params.get("requestId") if params is not None else None
        if type(request_id) is int or type(request_id) is str:
            sent = self._by_id.get(request_key(request_id))
            if sent is not None and sent.token is not None:
                self._by_token.pop(sent.token, None)
                sent.token = None

    def answered(self, request_id: object, result: object) -> None:
        """The server answered ``request_id`` (``result``: its result, or ``None`` for an error)."""
        if type(request_id) is not int and type(request_id) is not str:
            return
        sent = self._by_id.pop(request_key(request_id), None)
        if sent is None:
            return
        if sent.token is not None:
            self._by_token.pop(sent.token, None)
        call_id = sent.call_id
        if call_id is None or call_id not in self._open:
            return
        method = sent.method
        if method == "tools/call":
            if _is_task(result):
                self._open[call_id] = "task"
            else:
                del self._open[call_id]
        elif method == "tasks/result" or (
            type(result) is dict and result.get("status") in _TERMINAL
        ):
            del self._open[call_id]

    def progress(
        self,
        message: mcp_types.JSONRPCNotification,
        stream_call: str | None,
        *,
        streams_named: bool = False,
    ) -> mcp_types.JSONRPCNotification | None:
        """A server's progress notification as the SDK gets it, or ``None`` to drop it.

        ``streams_named``: the transport says which request's stream each
        message came on (Streamable HTTP), ``stream_call`` being the call of
        that request (``None`` for a stream of no call: the standalone stream,
        a subscription). Progress then counts only on the stream of its own
        call's request; a stdio pipe says nothing, and the token alone decides.
        """
        params = message.params
        token = params.get("progressToken") if params is not None else None
        if type(token) is not str:
            return None
        request_id = self._by_token.get(token)
        sent = self._by_id.get(request_id) if request_id is not None else None
        if sent is None or (streams_named and stream_call != sent.call_id):
            return None
        assert params is not None
        if past_float(params.get("progress")) or past_float(params.get("total")):
            # The SDK's read loop takes float() of both: an integer past any float
            # raised OverflowError there and ended the whole session. A float past
            # any float (1e400 parses as infinity) has no JSON form: relayed, it
            # went out as null, which the schema does not allow.
            return None
        params["progressToken"] = sent.sdk_token  # the notification's own params (parsed)
        return message


DIRECT_ID_PREFIX = "prism:"
"""The start of every direct call's request id (``_direct``; the SDK mints integers)."""


def request_key(request_id: RequestId) -> RequestId:
    """``coerce_request_id(request_id)``: the id answers are correlated by.

    A direct call's id (``prism:<n>``) is never a number (``int()`` of a
    string starting with a letter always fails): it is its own key, without
    the failed ``int()`` and its exception.
    """
    if type(request_id) is str and request_id.startswith(DIRECT_ID_PREFIX):
        return request_id
    return coerce_request_id(request_id)


def past_float(value: object) -> bool:
    """Whether ``value`` is a number no finite float holds.

    An integer too large for a float (``float()`` of it raises), or a float
    that is infinite or not a number.
    """
    if type(value) is float:
        return not math.isfinite(value)
    if type(value) is not int:
        return False
    try:
        float(value)
    except OverflowError:
        return True
    return False


def _is_task(result: object) -> bool:
    """Whether a tools/call answer is a task the server goes on running."""
    if type(result) is not dict:
        return False
    return type(result.get("task")) is dict or result.get("resultType") == "task"
