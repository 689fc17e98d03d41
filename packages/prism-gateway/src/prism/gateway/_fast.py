"""A stdio client's ``tools/call`` line taken off the SDK's path, for :class:`CallKernel`.

Over stdio each request line used to be validated as a JSON-RPC model, passed
through the SDK's replay channel (one task hand-off), wrapped in the SDK's
OpenTelemetry middleware and handled by the SDK's request machinery. Here the
line reader hands a well-formed ``tools/call`` to the connection's
:class:`CallKernel` (``_upstream``): the line's bytes are parsed once (a
``ParsedJson``, so validation does not walk the arguments again), the request
is registered in the SDK dispatcher's in-flight table (so
``notifications/cancelled`` reaches it) and answered in one task of the
dispatcher's nursery, with every check the SDK's path makes.

Whether a line is taken is decided before anything runs for it, from the
line alone: anything else (another method, a request the SDK would refuse
before its kernel, a 2025-11-25 request carrying the 2026-07-28 envelope, a
trace context, an installed tracer provider, a connection whose era or
dispatcher is not known yet, a server with middleware of its own) takes the
SDK's whole path. The era, the dispatcher and (for a 2025-11-25 client) the
connection are learned from the first request the SDK hands the gateway.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
import trio
from anyio._backends._trio import Event as _TrioEvent
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import Connection
from mcp.server.runner import _NoServerRequestsDispatchContext
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import (
    JSONRPCDispatcher,
    _default_transport_builder,
    _InFlight,
    _JSONRPCDispatchContext,
    progress_token_from_params,
)
from mcp_types import PROTOCOL_VERSION_META_KEY
from opentelemetry import trace

from prism.core import ParsedJson

from ._upstream import CallKernel

if TYPE_CHECKING:
    import anyio
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import Server

    from ._upstream import AnswerWriter, CallTool, InlineBegin

__all__ = ["StdioFastPath", "current_link"]

current_link: contextvars.ContextVar[StdioFastPath | None] = contextvars.ContextVar(
    "prism_gateway_stdio_link", default=None
)
"""The fast path of the stdio connection whose SDK tasks run (set by ``serve_stdio``)."""

_METHOD = b'"tools/call"'
_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_TRACE_KEYS = ("traceparent", "tracestate")


def _tracing_records() -> bool:
    """Whether an OpenTelemetry tracer provider is installed (the SDK's spans would record)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _handles_calls(server: Server[Any]) -> bool:
    """Whether ``server`` answers ``tools/call`` with the parameters' model the kernel uses."""
    entry = server.get_request_handler("tools/call")
    return entry is not None and entry.params_type is types.CallToolRequestParams


def _plain_call(line: bytes, modern: bool) -> tuple[Any, dict[str, Any], ParsedJson | None] | None:
    """A ``tools/call`` request line's id, params and parsed arguments, if taken (else ``None``).

    Taken: exactly ``jsonrpc`` ``"2.0"``, an int or string ``id``, ``method``
    and ``params`` (an object of ``name``, ``arguments`` and ``_meta`` only),
    with no trace context in ``_meta`` and, from a 2025-11-25 client, no
    2026-07-28 envelope (the SDK's era check refuses it). The kernel checks
    the rest as the SDK's path does. The line was priced on its bytes (size,
    depth) before: it is parsed once, here.
    """
    try:
        parsed = ParsedJson.parse(line)
    except (ValueError, RecursionError):  # not JSON, or nested too deep for the parser
        return None
    message = parsed.value
    if not parsed.proved:
        # a lone surrogate (which the SDK's parser refuses and no answer could
        # carry), a number past 64 bits, a long line: the SDK's path decides
        return None
    if type(message) is not dict or message.keys() != _REQUEST_KEYS:
        return None
    request_id = message["id"]
    params = message["params"]
    meta = params.get("_meta") if type(params) is dict else None
    if (
        message["jsonrpc"] != "2.0"
        or message["method"] != "tools/call"
        or type(request_id) not in (int, str)
        or type(params) is not dict
        or not _PARAM_KEYS.issuperset(params)
        or (meta is not None and type(meta) is not dict)
        or (meta and ("traceparent" in meta or "tracestate" in meta))  # (_TRACE_KEYS)
        or (meta and not modern and PROTOCOL_VERSION_META_KEY in meta)
    ):
        return None
    arguments = parsed.member("params")
    return request_id, params, arguments.member("arguments") if arguments is not None else None


class StdioFastPath:
    """Hands the stdio client's well-formed ``tools/call`` lines to :class:`CallKernel`."""

    def __init__(
        self, server: Server[Any], call_tool: CallTool, inline: InlineBegin | None = None
    ) -> None:
        self._server = server
        self._call_tool = call_tool
        self._inline = inline
        self._writer: AnswerWriter | None = None
        self._dispatcher: JSONRPCDispatcher[Any] | None = None
        self._kernel: CallKernel | None = None
        self._modern = False
        self._channel: MemoryObjectReceiveStream[Any] | None = None
        # The transport context of a line (no metadata), when the dispatcher's builder
        # is the SDK's default: a frozen value, the same for every line.
        self._transport: Any = None
        self.ready = False
        """Whether the connection's era and dispatcher are known (lines can be taken)."""

    def attach(self, writer: AnswerWriter) -> None:
        """The connection's answer writer (the SDK's write stream): answers go there."""
        self._writer = writer

    def caught_up(self) -> bool:
        """Whether the SDK's read loop has dispatched every message handed to it.

        True only while the loop waits for its next message on the channel the
        SDK's runner relays the reader's messages through: everything before
        was dispatched (a ``notifications/cancelled`` applied to the requests
        in flight, a request registered there).
        """
        assert self._channel is not None  # known with the dispatcher
        seen = self._channel.statistics()
        return seen.tasks_waiting_receive > 0 and seen.current_buffer_used == 0

    def learn(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Learn the connection's era and dispatcher from a request the SDK handed over.

        A connection whose server has middleware of its own (not the SDK's
        OpenTelemetry middleware), or whose dispatcher does not write to this
        connection's writer, is never learned: its requests all take the
        SDK's whole path.
        """
        outbound: Any = getattr(ctx.session, "_request_outbound", None)
        modern = isinstance(outbound, _NoServerRequestsDispatchContext)  # as the SDK wraps it
        dispatcher = getattr(outbound._inner if modern else outbound, "_dispatcher", None)
        connection = getattr(ctx.session, "_connection", None)
        # The channel the runner relays the reader's messages through, to the read loop
        channel = getattr(getattr(dispatcher, "_read_stream", None), "_inner", None)
        # The trio nursery of the dispatcher's task group (where the SDK runs requests)
        nursery = getattr(getattr(dispatcher, "_tg", None), "_nursery", None)
        writer = self._writer
        if (
            self._kernel is not None
            or writer is None
            or not isinstance(dispatcher, JSONRPCDispatcher)
            or getattr(dispatcher, "_write_stream", None) is not writer
            or not isinstance(nursery, trio.Nursery)
            or not isinstance(channel, MemoryObjectReceiveStream)
            or not isinstance(connection, Connection)
            or not all(isinstance(m, OpenTelemetryMiddleware) for m in self._server.middleware)
            or not _handles_calls(self._server)
        ):
            return
        self._modern = modern
        self._channel = channel
        self._dispatcher = dispatcher
        if dispatcher._transport_builder is _default_transport_builder:
            self._transport = _default_transport_builder(None)
        assert writer is not None  # (checked above)
        self._kernel = CallKernel(
            self._server,
            self._call_tool,
            dispatcher,
            writer,
            nursery,
            connection=None if modern else connection,
            lifespan=ctx.lifespan_context,
            inline=self._inline,
        )
        self.ready = True

    def take(self, line: bytes) -> bool:
        """Start ``line``'s request on the fast path if it can take it (else ``False``)."""
        dispatcher = self._dispatcher
        if dispatcher is None or self._kernel is None or _METHOD not in line:
            return False
        request = _plain_call(line, self._modern)
        if request is None or dispatcher._tg is None or not dispatcher._running:
            return False
        if _tracing_records():  # the SDK's span would record: keep it
            return False
        if self._kernel.take_inline(*request):
            return True  # answered by the pipes' readers (a bridged call), no task
        self._start(dispatcher, self._kernel, *request)
        return True

    def _start(
        self,
        dispatcher: JSONRPCDispatcher[Any],
        kernel: CallKernel,
        request_id: Any,
        params: dict[str, Any],
        parsed: ParsedJson | None,
    ) -> None:
        # What JSONRPCDispatcher._dispatch_request does for a request (metadata None:
        # a stdio line carries none), with the kernel answering it. (Its event is
        # what anyio.Event() makes in trio, made directly.)
        transport = self._transport
        dctx = _JSONRPCDispatchContext(
            transport=dispatcher._transport_builder(None) if transport is None else transport,
            _dispatcher=dispatcher,
            _request_id=request_id,
            message_metadata=None,
            _progress_token=progress_token_from_params(params),
            cancel_requested=_TrioEvent(),
        )
        # A trio scope (what the SDK's anyio one wraps): the dispatcher only cancels it.
        scope = trio.CancelScope()
        dispatcher._in_flight[coerce_request_id(request_id)] = _InFlight(
            scope=cast("anyio.CancelScope", scope), dctx=dctx
        )
        kernel.start(request_id, params, parsed, dctx, scope)
