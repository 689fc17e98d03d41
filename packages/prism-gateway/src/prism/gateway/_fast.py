"""A stdio client's ``tools/call`` handed to the SDK's request handling without its detours.

Over stdio each request line used to be validated as a JSON-RPC model, passed
through the SDK's replay channel (one task hand-off), wrapped in the SDK's
OpenTelemetry middleware and only then handled. Here the line reader hands a
well-formed ``tools/call`` straight to the SDK dispatcher's own request
runner (``_handle_request``, in the dispatcher's task group, registered in its
in-flight table so ``notifications/cancelled`` reaches it), with the SDK's own
request kernel (``ServerRunner.on_request``: the per-revision request check,
the initialization gate, the parameters' model, the gateway's handler, the
result's check against the revision's schema) and the SDK's own answer
writing. What is skipped: the JSON-RPC model of the line (``json.loads``
instead: the kernel checks the parameters), the replay hop, and the
OpenTelemetry middleware, only while no tracer provider is installed (its
span would record nothing) and the request carries no trace context.

Anything else (another method, a request the SDK would refuse before the
kernel, a 2025-11-25 request carrying the 2026-07-28 envelope, a trace
context, a connection whose era or dispatcher is not known yet) takes the
SDK's whole path. The era, the dispatcher and (for a 2025-11-25 client) the
connection are learned from the first request the SDK hands the gateway.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.runner import (
    ServerRunner,
    _NoServerRequestsDispatchContext,
    aclose_shielded,
    modern_error_data,
)
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import (
    JSONRPCDispatcher,
    _InFlight,
    _JSONRPCDispatchContext,
    progress_token_from_params,
)
from mcp_types import PROTOCOL_VERSION_META_KEY
from opentelemetry import trace
from pydantic import ValidationError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp.server.context import CallNext, ServerRequestContext
    from mcp.server.lowlevel.server import Server

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


def _plain_call(line: bytes, modern: bool) -> tuple[Any, dict[str, Any]] | None:
    """A ``tools/call`` request line's id and params, if the fast path takes it (else ``None``).

    Taken: exactly ``jsonrpc`` ``"2.0"``, an int or string ``id``, ``method``
    and ``params`` (an object of ``name``, ``arguments`` and ``_meta`` only),
    with no trace context in ``_meta`` and, from a 2025-11-25 client, no
    2026-07-28 envelope (the SDK's era check refuses it). The kernel checks
    the rest as the SDK's path does.
    """
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested too deep for the parser
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
        or (meta and any(key in meta for key in _TRACE_KEYS))
        or (meta and not modern and PROTOCOL_VERSION_META_KEY in meta)
    ):
        return None
    return request_id, params


@dataclass(eq=False)
class _Runner(ServerRunner[Any]):
    """The SDK's request kernel without its middleware (its OpenTelemetry span only)."""

    def _compose_server_middleware(self, inner: CallNext) -> CallNext:
        return inner


class StdioFastPath:
    """Hands the stdio client's well-formed ``tools/call`` lines to the SDK dispatcher directly."""

    def __init__(self, server: Server[Any]) -> None:
        self._server = server
        self._dispatcher: JSONRPCDispatcher[Any] | None = None
        self._modern = False
        self._runner: _Runner | None = None  # a 2025-11-25 connection's kernel
        self._lifespan: Any = None
        self._outbound: NotifyOnlyOutbound | None = None
        self._channel: MemoryObjectReceiveStream[Any] | None = None

    @property
    def ready(self) -> bool:
        """Whether the connection's era and dispatcher are known (lines can be taken)."""
        return self._dispatcher is not None

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
        OpenTelemetry middleware) is never learned: its requests all take the
        SDK's whole path.
        """
        outbound: Any = getattr(ctx.session, "_request_outbound", None)
        modern = isinstance(outbound, _NoServerRequestsDispatchContext)  # as the SDK wraps it
        dispatcher = getattr(outbound._inner if modern else outbound, "_dispatcher", None)
        connection = getattr(ctx.session, "_connection", None)
        # The channel the runner relays the reader's messages through, to the read loop
        channel = getattr(getattr(dispatcher, "_read_stream", None), "_inner", None)
        if (
            self._dispatcher is not None
            or not isinstance(dispatcher, JSONRPCDispatcher)
            or not isinstance(channel, MemoryObjectReceiveStream)
            or not isinstance(connection, Connection)
            or not all(isinstance(m, OpenTelemetryMiddleware) for m in self._server.middleware)
        ):
            return
        self._modern = modern
        self._lifespan = ctx.lifespan_context
        self._outbound = NotifyOnlyOutbound(dispatcher) if modern else None
        self._runner = None if modern else _Runner(self._server, connection, ctx.lifespan_context)
        self._channel = channel
        self._dispatcher = dispatcher

    def take(self, line: bytes) -> bool:
        """Start ``line``'s request on the fast path if it can take it (else ``False``)."""
        dispatcher = self._dispatcher
        if dispatcher is None or _METHOD not in line:
            return False
        request = _plain_call(line, self._modern)
        if request is None or dispatcher._tg is None or not dispatcher._running:
            return False
        if _tracing_records():  # the SDK's span would record: keep it
            return False
        self._start(dispatcher, *request)
        return True

    def _start(
        self, dispatcher: JSONRPCDispatcher[Any], request_id: Any, params: dict[str, Any]
    ) -> None:
        # What JSONRPCDispatcher._dispatch_request does for a request (metadata None:
        # a stdio line carries none), with this kernel as the request handler.
        request = types.JSONRPCRequest.model_construct(
            jsonrpc="2.0", id=request_id, method="tools/call", params=params
        )
        dctx = _JSONRPCDispatchContext(
            transport=dispatcher._transport_builder(None),
            _dispatcher=dispatcher,
            _request_id=request_id,
            message_metadata=None,
            _progress_token=progress_token_from_params(params),
        )
        scope = anyio.CancelScope()
        dispatcher._in_flight[coerce_request_id(request_id)] = _InFlight(scope=scope, dctx=dctx)
        on_request = self._modern_request if self._modern else self._legacy_request
        dispatcher._spawn(
            dispatcher._handle_request, request, dctx, scope, on_request, sender_ctx=None
        )

    async def _legacy_request(
        self, dctx: Any, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        assert self._runner is not None
        return await self._runner.on_request(dctx, method, params)

    async def _modern_request(
        self, dctx: Any, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        # As the SDK's 2026-07-28 stream loop answers a request (its on_request).
        route = classify_inbound_request({"method": method, "params": params})
        if isinstance(route, InboundLadderRejection):
            raise MCPError(code=route.code, message=route.message, data=route.data)
        connection = Connection.from_envelope(
            route.protocol_version,
            route.client_info,
            route.client_capabilities,
            outbound=self._outbound,  # type: ignore[arg-type]
        )
        try:
            runner = _Runner(self._server, connection, self._lifespan)
            try:
                return await runner.on_request(
                    _NoServerRequestsDispatchContext(dctx), method, params
                )
            finally:
                if getattr(connection.exit_stack, "_exit_callbacks", True):  # else: none to run
                    await aclose_shielded(connection)
        except (MCPError, ValidationError):
            raise
        except Exception as exc:
            error = modern_error_data(exc)
            raise MCPError(code=error.code, message=error.message, data=error.data) from exc
