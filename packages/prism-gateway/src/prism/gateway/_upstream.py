"""A stdio client's plain ``tools/call``, answered without the SDK's server request machinery.

The SDK answers a request in layers: its dispatcher spawns a task through
anyio's task group, runs the request in ``_handle_request`` (the one place a
handler's exception becomes a JSON-RPC error), hands it to the connection's
``ServerRunner`` (a request context, the middleware chain, the per-revision
request check, the initialization gate, the parameters' model, the handler,
the result's check against the revision's schema, a copy of the result), and
writes the answer as a ``JSONRPCResponse`` model through a ``SessionMessage``.
For a 2026-07-28 client each request also gets a ``Connection`` of its own
from its envelope, and a runner for it.

:class:`CallKernel` does the same for one well-formed ``tools/call`` in one
trio task of the dispatcher's own nursery (registered in its in-flight table,
so ``notifications/cancelled`` reaches it): every check and gate of that list
runs, in the same order and with the same errors (the SDK's own functions:
``classify_inbound_request``, ``validate_client_request``, the parameters'
model, the runner's ``_serialize``; the request context as the runner's
``_make_context`` makes it for a line of a pipe), the gateway's handler gets
the arguments as parsed from the line's text (a ``ParsedJson``: validation
does not walk them again), and the answer line is encoded from the result
dict by pydantic's own serializer and written straight to the pipe, byte for
byte what the SDK writes. What it leaves out: the anyio task wrapper, the
middleware chain (taken only while the server has no middleware but the
SDK's OpenTelemetry one and that one would record nothing), a runner per
2026-07-28 request (one shapes every result: only its server is read), the
result's copies and the response model.
"""

from __future__ import annotations

import logging
import math
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types as types
import pydantic_core
import trio
from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.context import ServerRequestContext
from mcp.server.runner import (
    ServerRunner,
    _extract_meta,
    _NoServerRequestsDispatchContext,
    aclose_shielded,
    modern_error_data,
)
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import _InFlight, handler_exception_to_error_data
from mcp_types import SERVER_INFO_META_KEY
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS
from pydantic import ValidationError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

    from mcp.server.lowlevel.server import Server
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher, _JSONRPCDispatchContext

    from prism.core import ParsedJson

    CallTool = Callable[
        [ServerRequestContext[Any, Any], types.CallToolRequestParams, ParsedJson | None],
        Awaitable[Any],
    ]
    # The gateway's inline start of a call (see CallKernel.take_inline): the client's
    # connection and dispatcher, the checked params, the raw params, the parsed
    # arguments, and the call; False: not taken, nothing done.
    InlineBegin = Callable[
        [Connection, Any, types.CallToolRequestParams, dict[str, Any], Any, "InlineCall"], bool
    ]

__all__ = [
    "AnswerWriter",
    "CallKernel",
    "InlineCall",
    "RequestCheck",
    "plain_result",
    "result_line",
]


_RESULT_KEYS = frozenset({"content", "isError", "resultType"})
_STRUCTURED_RESULT_KEYS = _RESULT_KEYS | {"structuredContent"}
_TEXT_KEYS = frozenset({"type", "text"})
_MAX_PLAIN_DEPTH = 64
_SCALARS = frozenset({str, int, bool, type(None)})


def _plain_json(value: object, depth: int = 0) -> bool:
    """Whether ``value`` dumps as itself in the SDK's JSON mode.

    Dicts with string keys, lists, strings, ints, bools, ``None`` and finite
    floats, exactly those types (no subclass, no tuple), at most 64 deep. The
    members of a large dict or list are sorted by type at C speed first
    (:func:`_plain_members`): a flat array of 475,000 numbers costs no Python
    step per member.
    """
    kind = type(value)
    if kind is dict:
        if depth >= _MAX_PLAIN_DEPTH:
            return False
        if len(value) >= _BULK:  # type: ignore[arg-type]
            return set(map(type, value)) <= _KEYS and _plain_members(  # type: ignore[call-overload]
                value.values(),  # type: ignore[attr-defined]
                depth,
            )
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not _plain_json(item, depth + 1):
                return False
        return True
    if kind is list:
        if depth >= _MAX_PLAIN_DEPTH:
            return False
        if len(value) >= _BULK:  # type: ignore[arg-type]
            return _plain_members(value, depth)  # type: ignore[arg-type]
        return all(_plain_json(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    return kind in _SCALARS


_BULK = 32
"""Members of one dict or list past which :func:`_plain_json` sorts them by type first."""
_KEYS = frozenset({str})
_PLAIN = _SCALARS | {float, dict, list}
_NUMBERS = frozenset({int, float, bool})


def _plain_members(members: Collection[object], depth: int) -> bool:
    """:func:`_plain_json` of each of ``members`` (of a dict or list ``depth`` deep)."""
    kinds = set(map(type, members))
    if not kinds <= _PLAIN:
        return False
    if float in kinds:
        floats = members if kinds <= _NUMBERS else [m for m in members if type(m) is float]
        try:
            # A NaN or an infinity anywhere makes the exact sum one of them (or raises).
            if not math.isfinite(math.fsum(floats)):  # type: ignore[arg-type]
                return False
        except ValueError:  # an infinity of each sign
            return False
        except OverflowError:  # finite numbers whose sum passes a float's range
            if not all(math.isfinite(m) for m in floats if type(m) is float):
                return False
    if dict in kinds or list in kinds:
        return all(
            _plain_json(member, depth + 1)
            for member in members
            if type(member) is dict or type(member) is list
        )
    return True


def plain_result(version: str, result: object) -> dict[str, Any] | None:
    """What the SDK's result check makes of a plain ``tools/call`` result, or ``None``.

    Plain: the gateway's own result JSON (``call_tool_result_json``) of text
    blocks, ``isError``, ``resultType`` ``"complete"`` and a plain JSON
    ``structuredContent`` other than null (an object before 2026-07-28). Such a result passes
    the revision's schema, and the dict returned here is the one the SDK's
    ``serialize_server_result`` returns for it, keys in its order (a test
    holds the two equal, byte for byte, at every revision). Anything else:
    ``None``, and the SDK checks it.
    """
    if type(result) is not dict or version not in SUPPORTED_PROTOCOL_VERSIONS:
        return None
    keys = result.keys()
    if keys != _RESULT_KEYS and keys != _STRUCTURED_RESULT_KEYS:
        return None
    content = result["content"]
    is_error = result["isError"]
    if type(content) is not list or type(is_error) is not bool:
        return None
    if result["resultType"] != "complete":
        return None
    blocks: list[dict[str, Any]] = []
    for block in content:
        if type(block) is not dict or block.keys() != _TEXT_KEYS or block["type"] != "text":
            return None
        text = block["text"]
        if type(text) is not str:
            return None
        blocks.append({"text": text, "type": "text"})
    modern = version in MODERN_PROTOCOL_VERSIONS
    out: dict[str, Any] = {"content": blocks, "isError": is_error}
    if modern:
        out["resultType"] = "complete"
    if "structuredContent" in result:
        structured = result["structuredContent"]
        if structured is None or not (modern or type(structured) is dict):
            return None  # (the SDK leaves out a null; an array before 2026-07-28 is refused)
        if not _plain_json(structured):
            return None
        out["structuredContent"] = structured
    return out


_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})


class RequestCheck:
    """The SDK's per-revision check of a ``tools/call`` request, its ``_meta`` checked once.

    The revision's request model checks each of the params' members on its
    own (no check ties two together): ``name`` a string, ``arguments`` an
    object or null, ``_meta`` (the 2026-07-28 envelope, a progress token) as
    the revision says. So once the SDK has passed a request, a later one of
    the same revision with the same ``_meta`` (its exact JSON), a string
    name and object or null arguments, and no other member, passes too: only
    those are checked here. Anything else is checked by the SDK (and its
    error raised).
    """

    __slots__ = ("_passed",)

    def __init__(self) -> None:
        # The last passed request's revision, whether it had _meta, and that _meta's JSON
        self._passed: tuple[str, bool, bytes | None] | None = None

    def check(self, version: str, params: dict[str, Any], meta: bytes | None = None) -> None:
        """Check ``params`` of a ``tools/call`` at ``version`` as ``validate_client_request``.

        ``meta``: the JSON of ``params``' ``_meta`` (``null`` when absent), if known.

        Raises:
            ValueError: ``version`` is not a known protocol version.
            pydantic.ValidationError: the request fails the revision's schema.
        """
        arguments = params.get("arguments")
        plain = (
            type(params.get("name")) is str
            and (arguments is None or type(arguments) is dict)
            and _PARAM_KEYS.issuperset(params)
        )
        if plain and meta is None:
            meta = pydantic_core.to_json(params.get("_meta"))
        key = (version, "_meta" in params, meta) if plain else None
        if key is not None and key == self._passed:
            return
        _methods.validate_client_request(_METHOD, version, params)
        if key is not None:
            self._passed = key


class _Runner(ServerRunner[Any]):
    """The SDK's request kernel, for ``tools/call`` answers written at once.

    The SDK deep-copies the ``serverInfo`` stamp into every 2026-07-28 result
    so a caller keeping the result cannot change the next one's; here each
    result is encoded to its answer line at once and dropped, so the stamp is
    shared. A plain result (see :func:`plain_result`) is shaped without the
    SDK's schema models: what they would return is built directly.
    """

    def _serialize(self, method: str, version: str, result: Any) -> dict[str, Any]:
        # (tools/call takes no cache hints: not one of the SDK's CACHEABLE_METHODS)
        if method == _METHOD:
            plain = plain_result(version, result)
            if plain is not None:
                return self._stamp_server_info(version, plain)
        return super()._serialize(method, version, result)

    def _stamp_server_info(self, version: str, result: dict[str, Any]) -> dict[str, Any]:
        if version not in MODERN_PROTOCOL_VERSIONS:
            return result
        stamp = self.server._server_info_stamp_source
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: stamp}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: stamp}
        return result


class AnswerWriter(Protocol):
    """Where the connection's answers are written (the stdio ``LineWriter``)."""

    async def send_line(self, data: bytes) -> None:
        """Write one encoded message (its JSON and the newline)."""

    def write_now(self, data: bytes) -> bool:
        """Write one encoded message now if no other waits its turn (``False``: not written)."""


class _Flag:
    """The SDK's ``cancel_requested`` of an inline call: set when the client cancels it."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class InlineCall:
    """A stdio client's ``tools/call`` answered by the pipes' readers, with no task of its own.

    The gateway (``InlineBegin``) begins it from the client's line and ends
    it from the bridged server's answer: :meth:`answer` writes its answer.
    In the SDK dispatcher's table of requests in flight it stands for both
    the request's scope and its context: the client's
    ``notifications/cancelled`` sets :attr:`cancel_requested` (its answer is
    then never written) and, when the dispatcher interrupts cancelled
    requests, calls :meth:`cancel`, which ends the call (``on_abort``).
    """

    __slots__ = (
        "_kernel",
        "cancel_requested",
        "modern",
        "on_abort",
        "over",
        "request_id",
        "version",
    )

    def __init__(self, kernel: CallKernel, request_id: int | str, version: str) -> None:
        self._kernel = kernel
        self.request_id = request_id
        self.version = version
        self.modern = version in MODERN_PROTOCOL_VERSIONS
        """Whether the call's client speaks 2026-07-28 (any ``structuredContent``)."""
        self.cancel_requested = _Flag()
        self.on_abort: Callable[[], None] | None = None
        self.over = False

    def cancel(self) -> None:
        """The client cancelled the call (the dispatcher's interrupt): it ends unanswered."""
        self.cancel_requested.set()
        self.abort()

    def abort(self) -> None:
        """End the call now, unanswered (the gateway's ``on_abort`` ends its parts)."""
        if self.over:
            return
        self.over = True
        self._kernel.settled(self)
        on_abort, self.on_abort = self.on_abort, None
        if on_abort is not None:
            on_abort()

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run ``fn(*args)`` in a task of the connection's dispatcher (its requests' nursery)."""
        self._kernel._nursery.start_soon(fn, *args)

    def answer(self, wire: dict[str, Any]) -> None:
        """The handler's result: written as the call's answer, unless the client cancelled it."""
        if self.over:
            return
        self.over = True
        self.on_abort = None
        self._kernel.settled(self)
        if not self.cancel_requested.is_set():
            self._kernel.write_answer(self, wire)


# The SDK dispatcher's logger: a handler's crash is logged where the SDK's path logs it.
_sdk_log = logging.getLogger("mcp.shared.jsonrpc_dispatcher")
_METHOD = "tools/call"
_SHUTDOWN_WRITE_S = 2.0
_PER_CONNECTION = frozenset({"state", "exit_stack"})
"""A ``Connection``'s attributes each one has its own of (the rest an envelope decides)."""
_CLOSED = types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed")


def result_line(request_id: int | str, result: dict[str, Any]) -> bytes:
    """The answer line the SDK writes for ``result`` (its ``JSONRPCResponse``'s JSON)."""
    message = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return pydantic_core.to_json(message) + b"\n"


class CallKernel:
    """Answers one connection's plain ``tools/call`` requests, each in one task."""

    def __init__(
        self,
        server: Server[Any],
        call_tool: CallTool,
        dispatcher: JSONRPCDispatcher[Any],
        writer: AnswerWriter,
        nursery: trio.Nursery,
        *,
        connection: Connection | None,
        lifespan: Any,
        inline: InlineBegin | None = None,
    ) -> None:
        self._server = server
        self._inline = inline
        # The calls answered by the pipes' readers (InlineCall) not settled yet
        self.inline_calls: dict[InlineCall, None] = {}
        self._guarded = False
        self._call_tool = call_tool
        self._dispatcher = dispatcher
        self._writer = writer
        self._nursery = nursery
        self._lifespan = lifespan
        # A 2025-11-25 client's connection (one for all its requests), else None: a
        # 2026-07-28 client's request brings its connection in its envelope.
        self._connection = connection
        # What shapes each result (only the server matters: see _kernel); made with
        # the first connection.
        self._runner = _Runner(server, connection, lifespan) if connection is not None else None
        self._outbound = NotifyOnlyOutbound(dispatcher) if connection is None else None
        self._requests = RequestCheck()
        # What the last request's _meta gave (see _facts): whether the request had one
        # and its JSON; its model (the request context's meta); for a 2026-07-28
        # client, what a connection made from its envelope holds.
        self._meta_key: tuple[bool, bytes] | None = None
        self._meta: Any = None
        self._envelope: dict[str, Any] | None = None

    def start(
        self,
        request_id: int | str,
        params: dict[str, Any],
        parsed: ParsedJson | None,
        dctx: _JSONRPCDispatchContext[Any],
        scope: trio.CancelScope,
    ) -> None:
        """Run the request in a task of the dispatcher's nursery (registered by the caller)."""
        self._nursery.start_soon(self._run, request_id, params, parsed, dctx, scope)

    async def _run(
        self,
        request_id: int | str,
        params: dict[str, Any],
        parsed: ParsedJson | None,
        dctx: _JSONRPCDispatchContext[Any],
        scope: trio.CancelScope,
    ) -> None:
        # As JSONRPCDispatcher._handle_request settles a request, answer written here.
        dispatcher = self._dispatcher
        answered = False
        failure: BaseException | None = None
        try:
            with scope:
                try:
                    result = await self._answer(dctx, params, parsed)
                finally:
                    dctx.close()
                    key = coerce_request_id(request_id)
                    entry = dispatcher._in_flight.get(key)
                    if entry is not None and entry.dctx is dctx:
                        del dispatcher._in_flight[key]
                if not dctx.cancel_requested.is_set():
                    answered = True
                    line = result_line(request_id, result)
                    try:
                        await self._writer.send_line(line)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return  # a client gone reads nothing (and failure is None here)
        except trio.Cancelled:
            # Shutdown: answer the request so the client is not left waiting, unless
            # an answer's write began or the client cancelled it.
            if not answered and not dctx.cancel_requested.is_set():
                with trio.move_on_after(_SHUTDOWN_WRITE_S) as shielded:
                    shielded.shield = True
                    await dispatcher._write_error(request_id, _CLOSED)
            raise
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                _sdk_log.exception("handler for %r raised", _METHOD)
                error = types.ErrorData(code=0, message=str(exc))
                if dispatcher._raise_handler_exceptions:
                    failure = exc
            if not dctx.cancel_requested.is_set():
                answered = True
                await dispatcher._write_error(request_id, error)
        # Unanswered (cancelled by the client): a stdio line carries no transport
        # metadata, so there is no hook to run.
        if failure is not None:
            raise failure

    def take_inline(self, request_id: int | str, params: dict[str, Any], parsed: Any) -> bool:
        """Answer the request with no task of its own, if the gateway can (see ``InlineCall``).

        The SDK's checks of :meth:`_kernel` before the handler run here, at
        once; a request any of them refuses is left to :meth:`start` (which
        runs them again and answers the refusal), and so is every request
        the gateway's ``inline`` does not take. Nothing of it ran then.
        """
        inline = self._inline
        if inline is None:
            return False
        try:
            meta_json, _meta_model = self._facts(params)
            connection = self._connection
            if connection is None:
                connection = self._envelope_connection(params)
                if self._runner is None:
                    self._runner = _Runner(self._server, connection, self._lifespan)
            version = connection.protocol_version
            self._requests.check(version, params, meta_json)
            if not connection.initialize_accepted:
                return False
            typed = types.CallToolRequestParams.model_validate(params, by_name=False)
        except Exception:
            return False
        call = InlineCall(self, request_id, version)
        # In flight before the gateway begins it (a refusal is answered at once)
        key = coerce_request_id(request_id)
        in_flight = self._dispatcher._in_flight
        held = in_flight.get(key)
        in_flight[key] = _InFlight(scope=call, dctx=call)  # type: ignore[arg-type]
        self.inline_calls[call] = None
        if not inline(connection, self._dispatcher, typed, params, parsed, call):
            self.inline_calls.pop(call, None)
            if held is None:
                del in_flight[key]
            else:
                in_flight[key] = held
            return False
        if not self._guarded:
            self._guarded = True
            self._nursery.start_soon(self._guard)
        return True

    async def _guard(self) -> None:
        """When serving ends (the dispatcher's tasks cancelled), end the calls still running.

        As a request's task does when it is cancelled: the call ends as
        cancelled and, unless the client cancelled it, is answered with
        ``CONNECTION_CLOSED``.
        """
        try:
            await trio.sleep_forever()
        finally:
            calls = list(self.inline_calls)
            self.inline_calls.clear()
            with trio.move_on_after(_SHUTDOWN_WRITE_S) as shielded:
                shielded.shield = True
                for call in calls:
                    if call.over:
                        continue
                    call.abort()
                    if not call.cancel_requested.is_set():
                        await self._dispatcher._write_error(call.request_id, _CLOSED)

    def settled(self, call: InlineCall) -> None:
        """``call`` is over: out of the dispatcher's requests in flight."""
        self.inline_calls.pop(call, None)
        key = coerce_request_id(call.request_id)
        entry = self._dispatcher._in_flight.get(key)
        if entry is not None and entry.scope is call:  # type: ignore[comparison-overlap]
            del self._dispatcher._in_flight[key]

    def write_answer(self, call: InlineCall, wire: dict[str, Any]) -> None:
        """Write ``call``'s answer (the handler's result ``wire``), as :meth:`_run` writes it."""
        runner = self._runner
        assert runner is not None  # (made before)
        line = result_line(call.request_id, runner._serialize(_METHOD, call.version, wire))
        try:
            if self._writer.write_now(line):
                return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # a client gone reads nothing
        self._nursery.start_soon(self._write_later, line)

    async def _write_later(self, line: bytes) -> None:
        try:
            await self._writer.send_line(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return

    def _facts(self, params: dict[str, Any]) -> tuple[bytes, Any]:
        """Learn what ``params``' ``_meta`` gives, once for each distinct one.

        Returns its JSON and its model (the request context's ``meta``).

        The request context's ``meta`` (``_extract_meta``), the envelope check
        (``classify_inbound_request``) and the envelope's typed client params
        and capabilities are each a function of the ``_meta`` alone (its exact
        JSON: ``1`` and ``true`` never share an entry); a client sends the
        same one with every request. The last one's are kept.
        """
        meta = pydantic_core.to_json(params.get("_meta"))
        key = ("_meta" in params, meta)
        if key != self._meta_key:
            self._meta_key = None
            self._meta = _extract_meta(params)
            self._envelope = None  # (learned by the next 2026-07-28 request)
            self._meta_key = key
        return meta, self._meta

    async def _answer(
        self,
        dctx: _JSONRPCDispatchContext[Any],
        params: dict[str, Any],
        parsed: ParsedJson | None,
    ) -> dict[str, Any]:
        meta = self._facts(params)
        connection = self._connection
        if connection is not None:
            return await self._kernel(connection, dctx, params, parsed, meta)
        # As the SDK's 2026-07-28 stream loop answers a request: the envelope's checks,
        # then a connection made from it for this request alone (and a runner for it,
        # of which only the server matters here: see _kernel).
        connection = self._envelope_connection(params)
        if self._runner is None:
            self._runner = _Runner(self._server, connection, self._lifespan)
        try:
            try:
                return await self._kernel(
                    connection, _NoServerRequestsDispatchContext(dctx), params, parsed, meta
                )
            finally:
                if getattr(connection.exit_stack, "_exit_callbacks", True):  # else: none to run
                    await aclose_shielded(connection)
        except (MCPError, ValidationError):
            raise
        except Exception as exc:
            error = modern_error_data(exc)
            raise MCPError(code=error.code, message=error.message, data=error.data) from exc

    def _envelope_connection(self, params: dict[str, Any]) -> Connection:
        """The request's own connection, as ``Connection.from_envelope`` makes it.

        The envelope is checked (``classify_inbound_request``) and its client
        info and capabilities typed by the SDK once for each distinct ``_meta``
        (see :meth:`_facts`). Each request still gets a connection of its own.

        Raises:
            MCPError: the envelope check's refusal.
        """
        typed = self._envelope
        if typed is None:
            route = classify_inbound_request({"method": _METHOD, "params": params})
            if isinstance(route, InboundLadderRejection):
                raise MCPError(code=route.code, message=route.message, data=route.data)
            version = route.protocol_version
            made = Connection.from_envelope(
                version,
                route.client_info,
                route.client_capabilities,
                outbound=self._outbound,  # type: ignore[arg-type]
            )
            if self._meta_key is not None:
                # What every connection from this envelope holds, but its own state and
                # teardown (its `initialized` event, set and never cleared, is shared).
                self._envelope = {
                    name: value for name, value in vars(made).items() if name not in _PER_CONNECTION
                }
            return made
        # As from_envelope makes it, without typing the envelope or making an event again
        connection = object.__new__(Connection)
        vars(connection).update(typed)
        connection.state = {}
        connection.exit_stack = AsyncExitStack()
        return connection

    async def _kernel(
        self,
        connection: Connection,
        dctx: Any,
        params: dict[str, Any],
        parsed: ParsedJson | None,
        meta: tuple[bytes, Any],
    ) -> dict[str, Any]:
        # ServerRunner._on_request for tools/call, in its order, without the middleware
        # chain (none that would record anything: checked before the line was taken).
        version = connection.protocol_version
        meta_json, meta_model = meta  # (see _facts)
        if meta_model is not None:  # (a dict: each request's own, as the SDK's are)
            meta_model = dict(meta_model)
        # As ServerRunner._make_context makes it for a message with no metadata (a
        # line of a pipe: no HTTP request, no SSE stream to close)
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=ServerSession(dctx, connection, request_meta=meta_model),
            lifespan_context=self._lifespan,
            method=_METHOD,
            params=params,
            request_id=dctx.request_id,
            meta=meta_model,
            protocol_version=version,
        )
        # (tools/call is a method of every revision, and has a handler: StdioFastPath.learn)
        self._requests.check(version, params, meta_json)
        if not connection.initialize_accepted:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid request parameters", data="")
        typed = types.CallToolRequestParams.model_validate(params, by_name=False)
        result = await self._call_tool(ctx, typed, parsed)
        # (ServerRunner._serialize reads the runner's server alone, never its connection)
        runner = self._runner
        assert runner is not None  # (made before)
        return runner._serialize(_METHOD, version, result)
