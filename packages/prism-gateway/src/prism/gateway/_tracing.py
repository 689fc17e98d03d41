"""A client's W3C trace context (``traceparent``), current while the gateway runs its call.

A client puts its trace context in ``params._meta`` (the MCP convention, on
every transport) or, over Streamable HTTP, in the request's ``traceparent`` /
``tracestate`` headers. While the call runs, that context is the current one
(OpenTelemetry context), so the call's ``execute_tool`` span and the request
the gateway sends downstream belong to the client's trace.

OpenTelemetry's API is looked up once; without it nothing is done.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mcp.server.context import ServerRequestContext

__all__ = ["incoming_trace"]

_FIELDS = ("traceparent", "tracestate")
_HEADERS = {name.encode(): name for name in _FIELDS}
# A traceparent is 55 characters; a tracestate at most 32 members of 256.
_MAX_VALUE = 8192
_otel: Any = None  # (context, propagate, trace) once looked up; False: not installed


def _api() -> Any:
    global _otel
    if _otel is None:
        try:
            from opentelemetry import context, propagate, trace
        except ImportError:  # pragma: no cover - the MCP SDK requires opentelemetry-api
            _otel = False
        else:
            _otel = (context, propagate, trace)
    return _otel


def _from_meta(ctx: ServerRequestContext[Any, Any]) -> dict[str, str]:
    meta: object = ctx.meta  # params._meta, on every transport
    if not isinstance(meta, Mapping):
        return {}
    return {
        name: value
        for name in _FIELDS
        if isinstance(value := meta.get(name), str) and len(value) <= _MAX_VALUE
    }


def _from_headers(ctx: ServerRequestContext[Any, Any]) -> dict[str, str]:
    scope = getattr(ctx.request, "scope", None)
    if not isinstance(scope, Mapping):
        return {}  # stdio: no request headers
    carrier: dict[str, str] = {}
    for key, value in scope.get("headers", ()):
        name = _HEADERS.get(key)
        if name is not None and name not in carrier and len(value) <= _MAX_VALUE:
            carrier[name] = value.decode("latin-1")
    return carrier


_UNTRACED: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


def incoming_trace(ctx: ServerRequestContext[Any, Any]) -> contextlib.AbstractContextManager[None]:
    """While the block runs, the calling client's trace context is the current one.

    From ``params._meta`` when it holds a valid ``traceparent``, else from the
    HTTP request's headers. A current span already in that trace (the MCP
    SDK's own server span for the request, when a tracer provider records
    it) stays current, so the call nests under it. A missing or malformed
    ``traceparent`` changes nothing (nor, at once, does a request that has
    neither a ``traceparent`` in its ``_meta`` nor HTTP headers).
    """
    meta: object = ctx.meta
    if (not isinstance(meta, Mapping) or "traceparent" not in meta) and not isinstance(
        getattr(ctx.request, "scope", None), Mapping
    ):
        return _UNTRACED
    return _incoming_trace(ctx)


@contextlib.contextmanager
def _incoming_trace(ctx: ServerRequestContext[Any, Any]) -> Iterator[None]:
    api = _api()
    if not api:  # pragma: no cover - see _api
        yield
        return
    context, propagate, trace = api
    found = None
    for carrier in (_from_meta(ctx), _from_headers(ctx)):
        if "traceparent" not in carrier:
            continue
        try:
            extracted = propagate.extract(carrier)
        except (ValueError, TypeError):
            continue
        remote = trace.get_current_span(extracted).get_span_context()
        if remote.is_valid:
            found = (extracted, remote)
            break
    if found is None:
        yield
        return
    extracted, remote = found
    if trace.get_current_span().get_span_context().trace_id == remote.trace_id:
        yield  # already in the client's trace (under the SDK's span for this request)
        return
    token = context.attach(extracted)
    try:
        yield
    finally:
        context.detach(token)
