"""Host callbacks a server may ask for: elicitation, sampling, roots, and log messages."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import attrs
import mcp_types

from prism.core import ConfigurationError, JsonObject, JsonValue, await_callback
from prism.core.text import clip

from ._content import to_json_value

if TYPE_CHECKING:
    from mcp.client.session import (
        ClientRequestContext,
        ElicitationFnT,
        ListRootsFnT,
        LoggingFnT,
        SamplingFnT,
    )

__all__ = [
    "McpElicitCallback",
    "McpElicitation",
    "McpElicitationAnswer",
    "McpElicitationComplete",
    "McpElicitationCompleteCallback",
    "McpLogCallback",
    "McpLogMessage",
    "McpRootsCallback",
    "McpRootsRequest",
    "McpSampleCallback",
    "McpSamplingAnswer",
    "McpSamplingRequest",
]

_log = logging.getLogger("prism.mcp")
_MAX_TEXT = 8192
_MAX_ROOTS = 256

# The id of the Prism tool call whose ``tools/call`` is being sent or answered. The
# SDK carries the sending task's context variables to what the server sends back on
# that request's own stream (a Streamable HTTP POST's response, a 2026-07-28
# input_required round), so a callback run for it sees the call; the session's own
# tasks (a stdio pipe, the standalone HTTP stream) start with none.
_calling: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "prism_mcp_calling", default=None
)


class calling:  # (lower case: used as the function it was, ``with calling(call_id):``)
    """Mark what the server sends for the request made in this block as ``call_id``'s."""

    __slots__ = ("_call_id", "_token")

    def __init__(self, call_id: str | None) -> None:
        self._call_id = call_id

    def __enter__(self) -> None:
        self._token = _calling.set(self._call_id)

    def __exit__(self, *_exc: object) -> None:
        _calling.reset(self._token)


def current_call() -> str | None:
    """The call the current task sends for (see :func:`calling`), if any."""
    return _calling.get()


def call_in(context: object) -> str | None:
    """The call a message was sent for, from its sender's context (``None`` if none says)."""
    if isinstance(context, contextvars.Context):
        return context.get(_calling)
    return None


def forget_calls() -> None:
    """Start the current task's context with no call (a session's own tasks)."""
    _calling.set(None)


@attrs.frozen(kw_only=True)
class McpElicitation:
    """A server asks the user for input; show it as coming from ``server_id``.

    In ``"url"`` mode the server wants the user to visit ``url`` (to sign in,
    say): the bridge never fetches or opens it; a host that offers it to the
    user should show the full URL and the server's name, and open it only when
    the user says so.

    Attributes:
        server_id: the bridge's ``server_id``: who asks.
        mode: ``"form"`` (answer ``requested_schema``) or ``"url"``.
        message: what the server says it wants (clipped, untrusted).
        requested_schema: the form's JSON Schema (form mode).
        url: the URL to offer the user (URL mode).
        elicitation_id: the server's id for a URL elicitation.
        call_id: the id of the tool call (``ToolCall.id``) whose request the
            server asked on, when the transport says so (see
            :func:`~prism.mcp.open_mcp_tools`); ``None`` when it cannot be told.
    """

    server_id: str
    mode: Literal["form", "url"]
    message: str
    requested_schema: JsonObject | None = attrs.field(default=None, eq=False)
    url: str | None = None
    elicitation_id: str | None = None
    call_id: str | None = None


@attrs.frozen(kw_only=True)
class McpElicitationAnswer:
    """The user's answer to an :class:`McpElicitation`.

    Attributes:
        action: ``"accept"`` (with ``content`` in form mode), ``"decline"`` or ``"cancel"``.
        content: the form's values when accepted.
    """

    action: Literal["accept", "decline", "cancel"]
    content: JsonObject | None = None


McpElicitCallback = Callable[[McpElicitation], Awaitable[McpElicitationAnswer]]
"""``async elicit(request) -> McpElicitationAnswer``; raising declines with an error."""


@attrs.frozen(kw_only=True)
class McpElicitationComplete:
    """A server says a URL elicitation is over (``notifications/elicitation/complete``).

    Only 2025-11-25 sessions carry it (2026-07-28 has no elicitation ids).
    The id is the server's word: it may name an elicitation the server never
    sent, or another server's; match it against the ``elicitation_id`` of the
    :class:`McpElicitation` values this same bridge handed over.

    Attributes:
        server_id: who says so.
        elicitation_id: the id the server gave the elicitation (clipped to 256 characters).
        call_id: the tool call it was sent for, when the transport says (as for
            :class:`McpElicitation`); usually ``None``.
    """

    server_id: str
    elicitation_id: str
    call_id: str | None = None


McpElicitationCompleteCallback = Callable[[McpElicitationComplete], None]
"""``on_elicitation_complete(notice)``, called on the event loop; keep it quick, never raise."""


@attrs.frozen(kw_only=True)
class McpSamplingRequest:
    """A server asks the host's model for a completion.

    Attributes:
        server_id: who asks.
        messages: the conversation, each as its MCP wire JSON (``role``, ``content``).
        system_prompt: the server's system prompt, if any (untrusted).
        max_tokens: the most tokens the server wants.
        params: the whole request as JSON (temperature, stop sequences, tools...).
        call_id: the tool call the server asked for, when known (as for
            :class:`McpElicitation`).
    """

    server_id: str
    messages: tuple[JsonObject, ...] = attrs.field(eq=False)
    system_prompt: str | None
    max_tokens: int
    params: JsonObject = attrs.field(eq=False, repr=False)
    call_id: str | None = None


@attrs.frozen(kw_only=True)
class McpSamplingAnswer:
    """The host model's reply to an :class:`McpSamplingRequest`.

    Attributes:
        text: the reply.
        model: the model that wrote it.
        stop_reason: why it stopped (``"endTurn"``, ``"maxTokens"``, ...).
    """

    text: str
    model: str
    stop_reason: str | None = "endTurn"


McpSampleCallback = Callable[[McpSamplingRequest], Awaitable[McpSamplingAnswer]]
"""``async sample(request) -> McpSamplingAnswer``; raising refuses with an error."""


@attrs.frozen(kw_only=True)
class McpLogMessage:
    """A log message a server sent (``notifications/message``).

    Attributes:
        server_id: who sent it.
        level: its syslog level (``"debug"`` ... ``"emergency"``).
        logger: the server's logger name, if any.
        data: the message (any JSON, untrusted).
        call_id: the tool call the server logged for, when known (as for
            :class:`McpElicitation`).
    """

    server_id: str
    level: str
    logger: str | None
    data: JsonValue = attrs.field(eq=False)
    call_id: str | None = None


McpLogCallback = Callable[[McpLogMessage], None]
"""``on_log(message)``, called on the event loop; keep it quick and never raise."""


@attrs.frozen(kw_only=True)
class McpRootsRequest:
    """A server asks for the client's roots (``roots/list``).

    Attributes:
        server_id: who asks.
        call_id: the tool call the server asked for, when known (as for
            :class:`McpElicitation`).
    """

    server_id: str
    call_id: str | None = None


McpRootsCallback = Callable[[McpRootsRequest], Awaitable[Sequence[str]]]
"""``async roots(request) -> paths``: absolute paths or ``file://`` URIs; raising refuses."""


def root_uris(roots: Sequence[str], option: str = "open_mcp_tools.roots") -> tuple[str, ...]:
    """``file://`` URIs for ``roots`` (absolute paths or ``file://`` URIs).

    Raises:
        ConfigurationError: a root is neither (the message names ``option``).
    """

    def refuse(what: str, shown: object) -> ConfigurationError:
        return ConfigurationError(
            f"{option} {what}, got {shown!r}",
            option=option,
            value=roots,
        )

    if isinstance(roots, (str, bytes)) or not isinstance(roots, Iterable):
        raise refuse("must be a sequence of absolute paths or file:// URIs", roots)
    out: list[str] = []
    for root in roots:
        if isinstance(root, str) and root.startswith("file://"):
            out.append(root)
        elif isinstance(root, (str, Path)) and Path(root).is_absolute():
            out.append(Path(root).as_uri())
        else:
            raise refuse("must hold absolute paths or file:// URIs", root)
    if len(out) > _MAX_ROOTS:
        raise refuse(f"may hold at most {_MAX_ROOTS} entries", len(out))
    return tuple(out)


def _error(message: str) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=message)


def make_elicitation_callback(server_id: str, elicit: McpElicitCallback) -> ElicitationFnT:
    """The SDK callback that asks ``elicit``."""

    async def callback(
        context: ClientRequestContext, params: Any
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        mode: Literal["form", "url"] = "url" if getattr(params, "mode", None) == "url" else "form"
        schema: JsonValue = None
        if mode == "form":
            try:
                schema = to_json_value(getattr(params, "requested_schema", None))
            except ValueError:
                schema = None
        url = getattr(params, "url", None)
        elicitation_id = getattr(params, "elicitation_id", None)
        request = McpElicitation(
            server_id=server_id,
            mode=mode,
            message=clip(str(getattr(params, "message", "")), _MAX_TEXT),
            requested_schema=schema if isinstance(schema, dict) else None,
            url=clip(url, 4096) if isinstance(url, str) else None,
            elicitation_id=clip(elicitation_id, 256) if isinstance(elicitation_id, str) else None,
            call_id=_calling.get(),
        )
        try:
            # An asyncio callback under an asyncio host runs on its loop.
            answer = await await_callback(elicit, elicit(request))
        except Exception as exc:
            # The server only learns the exception's type: the host's log says the rest.
            _log.warning("the elicitation callback raised", exc_info=True)
            return _error(f"the host could not answer: {type(exc).__name__}")
        if not isinstance(answer, McpElicitationAnswer):
            return _error("the host gave no answer")
        content = answer.content if answer.action == "accept" and mode == "form" else None
        return mcp_types.ElicitResult(action=answer.action, content=content)  # type: ignore[arg-type]

    return callback


def make_sampling_callback(server_id: str, sample: McpSampleCallback) -> SamplingFnT:
    """The SDK callback that asks ``sample``."""

    async def callback(
        context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        try:
            raw = to_json_value(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        except ValueError:
            return _error("the sampling request is not JSON")
        assert isinstance(raw, dict)
        messages = raw.get("messages")
        request = McpSamplingRequest(
            server_id=server_id,
            messages=tuple(m for m in messages if isinstance(m, dict))
            if isinstance(messages, list)
            else (),
            system_prompt=clip(params.system_prompt, _MAX_TEXT) if params.system_prompt else None,
            max_tokens=int(params.max_tokens),
            params=raw,
            call_id=_calling.get(),
        )
        try:
            # An asyncio callback under an asyncio host runs on its loop.
            answer = await await_callback(sample, sample(request))
        except Exception as exc:
            # The server only learns the exception's type: the host's log says the rest.
            _log.warning("the sampling callback raised", exc_info=True)
            return _error(f"the host could not sample: {type(exc).__name__}")
        if not isinstance(answer, McpSamplingAnswer):
            return _error("the host gave no answer")
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=answer.text),
            model=answer.model,
            stop_reason=answer.stop_reason,
        )

    return callback


def _roots(uris: Sequence[str]) -> mcp_types.ListRootsResult:
    return mcp_types.ListRootsResult(
        roots=[
            mcp_types.Root(uri=uri, name=Path(urlsplit(uri).path).name or uri)  # type: ignore[arg-type]
            for uri in uris
        ]
    )


def make_roots_callback(server_id: str, roots: tuple[str, ...] | McpRootsCallback) -> ListRootsFnT:
    """The SDK callback that lists ``roots`` (fixed URIs, or what a callback says)."""
    if isinstance(roots, tuple):
        fixed = _roots(roots)

        async def listed(
            context: ClientRequestContext,
        ) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
            return fixed.model_copy()

        return listed
    ask = roots

    async def callback(
        context: ClientRequestContext,
    ) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
        request = McpRootsRequest(server_id=server_id, call_id=_calling.get())
        try:
            # An asyncio callback under an asyncio host runs on its loop.
            given = await await_callback(ask, ask(request))
            uris = root_uris(given, option="roots callback")
        except Exception as exc:
            _log.warning("the roots callback raised", exc_info=True)
            return _error(f"the host could not list its roots: {type(exc).__name__}")
        return _roots(uris)

    return callback


MAX_URL_ELICITATIONS = 16
"""The most URL elicitations kept from one URLElicitationRequiredError (-32042)."""


def url_elicitations(data: object) -> list[JsonValue]:
    """The URL elicitations a ``-32042`` error's ``data`` names (clipped, at most 16).

    Each as ``{"url", "message", "elicitation_id"}``; an entry that is not a
    URL elicitation with a string ``url`` and ``elicitationId`` is left out.
    """
    listed = data.get("elicitations") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return []
    out: list[JsonValue] = []
    for entry in listed:
        if not isinstance(entry, dict) or entry.get("mode") != "url":
            continue
        url, elicitation_id, message = (
            entry.get("url"),
            entry.get("elicitationId"),
            entry.get("message"),
        )
        if isinstance(url, str) and isinstance(elicitation_id, str):
            out.append(
                {
                    "url": clip(url, 4096),
                    "message": clip(message, _MAX_TEXT) if isinstance(message, str) else "",
                    "elicitation_id": clip(elicitation_id, 256),
                }
            )
            if len(out) == MAX_URL_ELICITATIONS:
                break
    return out


def elicitation_complete(
    server_id: str, params: object, on_complete: McpElicitationCompleteCallback
) -> None:
    """Tell ``on_complete`` of a ``notifications/elicitation/complete`` (``params``)."""
    elicitation_id = getattr(params, "elicitation_id", None)
    if not isinstance(elicitation_id, str):
        return
    notice = McpElicitationComplete(
        server_id=server_id, elicitation_id=clip(elicitation_id, 256), call_id=_calling.get()
    )
    try:
        on_complete(notice)
    except Exception:
        _log.exception("the on_elicitation_complete callback raised")


def make_logging_callback(server_id: str, on_log: McpLogCallback) -> LoggingFnT:
    """The SDK callback that turns log notifications into :class:`McpLogMessage` values."""

    async def callback(params: mcp_types.LoggingMessageNotificationParams) -> None:
        try:
            data = to_json_value(params.data)
        except ValueError:
            data = None
        if isinstance(data, str):
            data = clip(data, _MAX_TEXT)
        message = McpLogMessage(
            server_id=server_id,
            level=str(params.level),
            logger=clip(params.logger, 256) if params.logger else None,
            data=data,
            call_id=_calling.get(),
        )
        try:
            on_log(message)
        except Exception:
            _log.exception("the on_log callback raised")

    return callback
