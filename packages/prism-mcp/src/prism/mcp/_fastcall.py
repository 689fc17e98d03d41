"""A session's ``tools/call`` sent as JSON and its usual answer checked once.

The SDK's ``ClientSession.call_tool`` builds the request as pydantic models
and dumps them again, then checks the answer twice (against the revision's
schema, then into the result model). For the answer nearly every tool gives
(text blocks, an optional ``isError`` and ``structuredContent`` object) one
pass over the parsed JSON proves both checks would pass, and the result model
is built from it directly. Any other answer (images, annotations, ``_meta``,
an ``input_required`` round, a claimed shape, anything malformed) takes the
SDK's own checks unchanged, and so does any call with input responses or a
request state or ``_meta`` (a trace context). The request's bytes are the
SDK's: the same params, stamped by the session's own stamp (the 2026-07-28
envelope, headers), the same timeout and progress callback.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
from typing import TYPE_CHECKING, Any

import mcp_types
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp.client import session as _sdk_session

from ._direct import outcome

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pydantic import TypeAdapter

    from mcp.client.session import ClientSession
    from mcp.shared.dispatcher import CallOptions, ProgressFnT

    from ._direct import DirectCalls

__all__ = [
    "RawCalls",
    "call_params",
    "install_fast_call_tool",
    "plain_answer",
    "sdk_result",
    "simple_call_result",
]

_METHOD = "tools/call"
_RESULT_KEYS = frozenset({"content", "isError", "structuredContent", "resultType", "_meta"})
_TEXT_KEYS = frozenset({"type", "text"})
_MAX_SIMPLE_DEPTH = 64
_SCALARS = (int, bool, type(None))
_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: str) -> bool:
    """Whether ``value`` has a UTF-8 form (no lone surrogate, which a JSON parse can make)."""
    return value.isascii() or _SURROGATE.search(value) is None


def _plain(value: object, depth: int = 0) -> bool:
    """Whether ``value`` is exactly what a JSON parse makes (finite numbers, str keys).

    And writable as UTF-8: no string holds a lone surrogate.
    """
    kind = type(value)
    if kind is dict:
        if depth > _MAX_SIMPLE_DEPTH:
            return False
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not _text(key) or not _plain(item, depth + 1):
                return False
        return True
    if kind is list:
        if depth > _MAX_SIMPLE_DEPTH:
            return False
        return all(_plain(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is str:
        return _text(value)  # type: ignore[arg-type]
    return kind in _SCALARS


def plain_answer(raw: dict[str, Any], version: str) -> dict[str, Any] | None:
    """A plain answer (text blocks only) as the result model takes it, else ``None``.

    Plain: no key but ``content`` (a list of ``{"type": "text", "text": str}``),
    ``isError`` (a bool), ``structuredContent`` and ``_meta`` (JSON objects)
    and ``resultType`` (``"complete"``, which the 2026-07-28 revision
    requires). Such an answer passes the SDK's checks at protocol revision
    ``version``. Returned: ``raw`` itself, or a copy without a later
    revision's ``resultType``, which the SDK leaves out.
    """
    if type(raw) is not dict or not _RESULT_KEYS.issuperset(raw):
        return None
    content = raw.get("content")
    if type(content) is not list:
        return None
    for block in content:
        if type(block) is not dict or block.keys() != _TEXT_KEYS or block["type"] != "text":
            return None
        if type(block["text"]) is not str:
            return None
    if "isError" in raw and type(raw["isError"]) is not bool:
        return None
    if "structuredContent" in raw and type(raw["structuredContent"]) is not dict:
        return None  # (parsed from JSON: plain already)
    if "_meta" in raw and type(raw["_meta"]) is not dict:
        return None
    if version in MODERN_PROTOCOL_VERSIONS:
        if raw.get("resultType") != "complete":  # required at this revision
            return None
    elif "resultType" in raw:
        if raw["resultType"] != "complete":
            return None  # a later revision's field the SDK drops; only the plain value here
        raw = {key: value for key, value in raw.items() if key != "resultType"}
    return raw


def simple_call_result(raw: dict[str, Any], version: str) -> mcp_types.CallToolResult | None:
    """The result model of a plain answer (see :func:`plain_answer`), or ``None`` for any other.

    The model built here equals the one the SDK's checks build: the result
    model validates it in one call (pydantic-core's, faster than constructing
    each model in Python).
    """
    plain = plain_answer(raw, version)
    if plain is None:
        return None
    return mcp_types.CallToolResult.model_validate(plain, by_name=False)


def sdk_result(raw: dict[str, Any], version: str, adapter: TypeAdapter[Any]) -> Any:
    """The SDK's checks of a ``tools/call`` answer, as ``ClientSession.send_request`` makes them.

    Raises:
        pydantic.ValidationError: the answer fails them.
    """
    with contextlib.suppress(KeyError):
        _methods.validate_server_result(_METHOD, version, raw)
    foreign = _sdk_session._later_revision_fields(_METHOD, version)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return adapter.validate_python(raw, by_name=False)


def call_params(name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """A ``tools/call``'s params as the SDK dumps them (plain JSON arguments dump as themselves)."""
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return params


def _tracing_records() -> bool:
    """Whether an OpenTelemetry tracer provider is installed (the SDK's spans would record)."""
    global _otel_trace
    if _otel_trace is None:
        try:
            from opentelemetry import trace
        except ImportError:  # pragma: no cover - OpenTelemetry comes with the MCP SDK
            _otel_trace = False
        else:
            _otel_trace = trace
    if _otel_trace is False:  # pragma: no cover
        return False
    provider = _otel_trace.get_tracer_provider()
    return not isinstance(
        provider, (_otel_trace.ProxyTracerProvider, _otel_trace.NoOpTracerProvider)
    )


_otel_trace: Any = None

# The SDK's stamps whose ``_meta`` is the same for every ``tools/call`` (RawCalls.send)
_SDK_STAMPS = frozenset(
    {
        "_preconnect_stamp",
        "_make_handshake_stamp.<locals>.stamp",
        "_make_modern_stamp.<locals>.stamp",
    }
)


class _Replay:
    """The answer a session's next plain ``call_tool`` takes instead of sending (once)."""

    __slots__ = ("outcome", "session")

    def __init__(self, session: ClientSession, outcome: dict[str, Any] | Exception) -> None:
        self.session = session
        self.outcome: dict[str, Any] | Exception | None = outcome


_replay: contextvars.ContextVar[_Replay | None] = contextvars.ContextVar(
    "prism_mcp_replay", default=None
)


class RawCalls:
    """A stdio session's plain ``tools/call`` sent past the SDK's client, its answer kept raw.

    The bridge (``_calls``) sends a call here when the SDK's ``call_tool``
    would send it past the dispatcher (see :func:`install_fast_call_tool`):
    the same request, stamped by the session's own stamp, written by the
    session's :class:`DirectCalls`, its answer checked by the gate. A plain
    answer (:func:`plain_answer`) the bridge maps to its result itself; any
    other answer, or an error, it hands to the SDK's ``Client.call_tool``
    with :meth:`replay`, whose first send then takes it instead of writing
    the call again, so input rounds, claimed shapes and a ``HEADER_MISMATCH``
    retry are the SDK's own.
    """

    __slots__ = ("_direct", "_session", "_stamp_meta", "_stamped_by")

    def __init__(self, session: ClientSession, direct: DirectCalls) -> None:
        self._session = session
        self._direct = direct
        # The session's stamp last used, and the _meta it gives a call's params (None: none)
        self._stamped_by: object = None
        self._stamp_meta: dict[str, Any] | None = None

    @property
    def version(self) -> str:
        """The revision the session's answers are checked at (as the SDK's ``call_tool``)."""
        return self._session._negotiated_version or "2025-11-25"

    def usable(self, name: str, arguments: dict[str, Any] | None) -> bool:
        """Whether the SDK's ``call_tool`` (no timeout, _meta or input) would send it directly."""
        return (
            type(name) is str
            and _text(name)
            and (arguments is None or (type(arguments) is dict and _plain(arguments)))
            and self._session._session_read_timeout_seconds is None
            and not _tracing_records()
        )

    async def send(
        self, name: str, arguments: dict[str, Any] | None, on_progress: ProgressFnT | None
    ) -> dict[str, Any]:
        """Send the call (see :meth:`usable`); its answer's result as the gate passed it.

        Raises:
            MCPError: the server's error answer (or the gate's refusal), or
                ``CONNECTION_CLOSED``.
        """
        request = self._request(name, arguments, on_progress is not None)
        raw = await self._direct.call(request, on_progress)
        _sdk_session._clamp_inbound_ttl(raw)
        return raw

    def start(
        self, name: str, arguments: dict[str, Any] | None, put: Callable[[object], None]
    ) -> str | None:
        """:meth:`send` the call without waiting: what the server sends for it goes to ``put``.

        The request is :meth:`send`'s with a progress callback (its progress
        token given). ``put`` gets what ``DirectCalls.start`` describes;
        :meth:`result` makes the answer what :meth:`send` returns. Returns
        the request's id, or ``None`` when nothing was written (see
        ``DirectCalls.start``).
        """
        request = self._request(name, arguments, True)
        return request.id if self._direct.start(request, put) else None

    @staticmethod
    def result(item: object) -> dict[str, Any]:
        """What :meth:`send` returns for the answer a started call got (``put``'s last item).

        Raises:
            MCPError: as :meth:`send`.
        """
        raw = outcome(item)
        _sdk_session._clamp_inbound_ttl(raw)
        return raw

    def abandon(self, request_id: str) -> bool:
        """Stop waiting for a started call (see ``DirectCalls.abandon``)."""
        return self._direct.abandon(request_id)

    async def send_cancel(self, request_id: str) -> None:
        """Tell the server a started call was given up (see ``DirectCalls.send_cancel``)."""
        await self._direct.send_cancel(request_id)

    def _request(self, name: str, arguments: dict[str, Any] | None, progress: bool) -> Any:
        """The call's request, stamped by the session's stamp (its ``_meta`` kept once learned)."""
        params = call_params(name, arguments)
        stamp = self._session._stamp
        if stamp is self._stamped_by:
            if self._stamp_meta is not None:
                params["_meta"] = dict(self._stamp_meta)
        else:
            data: dict[str, Any] = {"method": _METHOD, "params": params}
            stamp(data, {})
            self._learn_stamp(stamp, params)
        return self._direct.request(params, progress)

    def _learn_stamp(self, stamp: object, params: dict[str, Any]) -> None:
        """Keep what ``stamp`` (the session's) put in a call's params, if it is the SDK's own.

        The SDK's stamps of a ``tools/call`` add only headers (unused on a
        pipe) and, after a 2026-07-28 handshake, the same ``_meta`` members to
        every call (the revision, the client's info and capabilities, its log
        level): the same values, whatever the call. Any other stamp is run on
        every call.
        """
        if (
            getattr(stamp, "__module__", None) != _sdk_session.__name__
            or getattr(stamp, "__qualname__", None) not in _SDK_STAMPS
        ):
            return
        meta = params.get("_meta")
        if params.keys() - {"name", "arguments", "_meta"} or not (
            meta is None or type(meta) is dict
        ):
            return
        self._stamp_meta = dict(meta) if meta is not None else None
        self._stamped_by = stamp

    @contextlib.contextmanager
    def replay(self, outcome: dict[str, Any] | Exception) -> Iterator[None]:
        """Within the block, the session's next plain ``call_tool`` answers with ``outcome``.

        ``outcome``: what :meth:`send` returned or raised for the same call.
        """
        token = _replay.set(_Replay(self._session, outcome))
        try:
            yield
        finally:
            _replay.reset(token)


def install_fast_call_tool(
    session: ClientSession, direct: DirectCalls | None = None
) -> RawCalls | None:
    """Make ``session.call_tool`` send plain calls as JSON and check plain answers once.

    With ``direct`` (a stdio session's), such a call is written and answered
    past the SDK's dispatcher (see ``_direct``), unless it has a read timeout
    or an OpenTelemetry tracer provider would record the SDK's span of it;
    the :class:`RawCalls` returned then sends such calls for the bridge.
    """
    original = session.call_tool

    async def call_tool(
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
        *,
        input_responses: mcp_types.InputResponses | None = None,
        request_state: str | None = None,
        meta: mcp_types.RequestParamsMeta | None = None,
        allow_input_required: bool = False,
        allow_claimed: bool = False,
    ) -> Any:
        if (
            input_responses is not None
            or request_state is not None
            or not (allow_input_required and allow_claimed)
            or type(name) is not str
            or not _text(name)
            or (arguments is not None and (type(arguments) is not dict or not _plain(arguments)))
            or meta is not None
        ):
            return await original(
                name,
                arguments,
                read_timeout_seconds,
                progress_callback,
                input_responses=input_responses,
                request_state=request_state,
                meta=meta,
                allow_input_required=allow_input_required,
                allow_claimed=allow_claimed,
            )
        data: dict[str, Any] = {"method": _METHOD, "params": call_params(name, arguments)}
        opts: CallOptions = {}
        session._stamp(data, opts)
        opts.setdefault("headers", {})
        timeout = (
            read_timeout_seconds
            if read_timeout_seconds is not None
            else session._session_read_timeout_seconds
        )
        if timeout is not None:
            opts["timeout"] = timeout
        if progress_callback is not None:
            opts["on_progress"] = progress_callback
        replay = _replay.get()
        if replay is not None and replay.session is session and replay.outcome is not None:
            # The bridge sent this call already (RawCalls): its answer, not a second send.
            outcome, replay.outcome = replay.outcome, None
            if isinstance(outcome, Exception):
                raise outcome
            raw = outcome
        elif direct is not None and timeout is None and not _tracing_records():
            request = direct.request(data["params"], progress_callback is not None)
            raw = await direct.call(request, progress_callback)
        else:
            raw = await session._dispatcher.send_raw_request(_METHOD, data.get("params"), opts)
        _sdk_session._clamp_inbound_ttl(raw)
        version = session._negotiated_version or "2025-11-25"
        result: Any = simple_call_result(raw, version)
        if result is None:
            result = sdk_result(raw, version, session._call_tool_adapter)
        if isinstance(result, mcp_types.CallToolResult) and not result.is_error:
            await session.validate_tool_result(name, result)
        return result

    session.call_tool = call_tool  # type: ignore[method-assign]
    return RawCalls(session, direct) if direct is not None else None
