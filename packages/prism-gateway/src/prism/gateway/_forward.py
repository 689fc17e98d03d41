"""A downstream server's requests (elicitation, sampling, roots) and logs, sent to its caller."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs
import mcp_types as types
import trio
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, ValidationError

from prism.core import ToolResult
from prism.core.text import clip, escape_controls
from prism.mcp import (
    McpElicitation,
    McpElicitationAnswer,
    McpElicitationComplete,
    McpElicitationCompleteCallback,
    McpElicitCallback,
    McpLogCallback,
    McpLogMessage,
    McpRootsCallback,
    McpRootsRequest,
    McpSampleCallback,
    McpSamplingAnswer,
    McpSamplingRequest,
)

from ._approval import CallScope, declares_elicitation
from ._errors import GatewayError
from ._rounds import UnansweredError, ask_apart
from ._urlids import UrlElicitations

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Forwarder", "UpstreamCannotAnswerError"]

_log = logging.getLogger("prism.gateway")
_EMPTY_FORM: dict[str, Any] = {"type": "object", "properties": {}}
_LOG_BACKLOG = 64
_COMPLETION_BACKLOG = 32
"""Completions waiting to be sent, at most, for one call (on its stream) or one session."""
UNANSWERED_CALL_S = 120.0
"""How long at most a call that ended before its server answered it counts as running there."""
_MAX_LEFT_CALLS = 64
_WARNED_DROPS = 8
_NOTIFY_S = 5.0
"""How long sending one forwarded notification may take before the rest waiting for
that call (or session) is dropped: its client is not reading."""


class UpstreamCannotAnswerError(GatewayError):
    """A downstream server asked something the calling client cannot be asked."""


@attrs.define(eq=False, slots=True)
class _Left:
    """One client's calls that ended before a server answered them (see ``Forwarder``)."""

    until: float
    calls: set[str] = attrs.field(factory=set)
    # More calls than are kept by id (or one without an id): the client counts
    # until ``until`` whatever the server answers.
    overflow: bool = False


UnansweredLookup = Callable[[str], bool]
"""Whether a server may still run a call (by its id): ``McpToolBridge.unanswered``."""
CappedSink = Callable[[str, str, int, float], None]
"""Told ``(server_id, client, calls, cap_s)`` when a client's unanswered calls stop counting
at the cap (``calls`` is -1 when there were more than are kept by id)."""


_Answer = TypeVar("_Answer", types.ElicitResult, types.CreateMessageResult, types.ListRootsResult)


def _answer_as(kind: type[_Answer], answer: Any) -> _Answer:
    """A client's answer in an ``input_required`` retry, as the result its question wants."""
    if isinstance(answer, kind):
        return answer
    try:  # the SDK parsed it as another arm of the answer union: read it as this one
        return kind.model_validate(_wire(answer) if isinstance(answer, BaseModel) else answer)
    except ValidationError:
        raise UpstreamCannotAnswerError(f"the client's answer is not a {kind.__name__}") from None


def _wire(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _forwarded(server_id: str, message: str) -> str:
    """A server's question as the client is shown it: said to come from the server.

    So it is never taken for the gateway's own approval question ("Prism asks
    whether the tool ..."): its control characters are shown escaped, or a
    carriage return or an escape sequence would redraw the prefix away on a
    terminal.
    """
    return f"MCP server {server_id!r} asks (forwarded by Prism): {escape_controls(message)}"


_SHOWN_KEYS = frozenset({"title", "description"})


def _shown_schema(schema: Any) -> Any:
    """A requested schema with the text it shows the person (titles, descriptions) escaped."""
    if isinstance(schema, list):
        return [_shown_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    shown: dict[Any, Any] = {}
    for key, value in schema.items():
        if key in _SHOWN_KEYS and isinstance(value, str):
            shown[key] = escape_controls(value)
        elif key == "enumNames" and isinstance(value, list):
            shown[key] = [escape_controls(v) if isinstance(v, str) else v for v in value]
        else:
            shown[key] = _shown_schema(value)
    return shown


_ANSWERED_KEYS = frozenset({"enum", "const", "default", "examples"})


def _answers_unshowable(schema: Any) -> bool:
    """Whether a form's field names or the values it answers with hold control characters."""
    if isinstance(schema, list):
        return any(_answers_unshowable(item) for item in schema)
    if not isinstance(schema, dict):
        return False
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            if any(isinstance(k, str) and escape_controls(k) != k for k in value):
                return True
        elif key in _ANSWERED_KEYS and _holds_controls(value):
            return True
        if _answers_unshowable(value):
            return True
    return False


def _holds_controls(value: Any) -> bool:
    if isinstance(value, str):
        return escape_controls(value) != value
    if isinstance(value, list):
        return any(_holds_controls(item) for item in value)
    return False


def _elicit_request(
    request: McpElicitation, message: str, schema: dict[str, Any]
) -> dict[str, Any]:
    """The ``elicitation/create`` input request (wire form) forwarding ``request``."""
    params: dict[str, Any] = {"message": message}
    if request.mode == "url" and request.url is not None:
        # 2026-07-28 has no elicitationId (nor a completion): the server's own id, if
        # any, stays between it and the gateway.
        params.update(mode="url", url=request.url)
    else:
        params.update(mode="form", requestedSchema=schema)
    return {"method": "elicitation/create", "params": params}


@attrs.define(eq=False)
class Forwarder:
    """The calls running on each downstream server, and whom its requests go to.

    A server's request (``elicitation/create``, ``sampling/createMessage``,
    ``roots/list``) or log message goes to the client whose call it was sent
    for. The bridge says which call that is when the transport tells it (a
    Streamable HTTP server sends it on that call's response stream; a
    2026-07-28 server inside the call's result). When it cannot tell (a stdio
    pipe, the standalone HTTP stream), it goes to the one client with calls
    running on that server; with calls of several clients running there, or
    none, it is refused rather than put to a client it may not belong to. So
    is a request the client did not declare the capability for (for an
    elicitation: in its mode), or cannot receive mid-call (a 2026-07-28 or
    stateless connection); a roots request the client cannot answer gets the
    gateway's own roots instead, if any. A URL elicitation reaches a
    2025-11-25 client under an id of the gateway's own (see ``UrlElicitations``).
    """

    # The gateway's configured roots (file:// URIs), for a roots request no client answers.
    _roots: tuple[str, ...] = ()
    _calls: dict[str, list[CallScope]] = attrs.field(factory=dict)
    _by_id: dict[str, CallScope] = attrs.field(factory=dict)
    # Log messages (and URL elicitations' completions) waiting to be sent, by call (the
    # bridge's callbacks for them cannot wait).
    _pending: dict[CallScope, list[types.ServerNotification]] = attrs.field(factory=dict)
    # Completions for calls that are over: sent to their client's session, not a call's
    # stream. By the session's id: (the session, what waits for it).
    _loose: dict[int, tuple[Any, list[types.ServerNotification]]] = attrs.field(factory=dict)
    _wake: trio.Event = attrs.field(factory=trio.Event)
    # The calls (scopes) and sessions (ids) a task of their own is sending to now.
    _senders: set[CallScope | int] = attrs.field(factory=set)
    # Held while a call's log messages are being sent: its result waits for them.
    _sending: dict[CallScope, trio.Lock] = attrs.field(factory=dict)
    # The servers whose bridges were given this forwarder's callbacks.
    _servers: set[str] = attrs.field(factory=set)
    # Calls that ended before their server answered them (cancelled, timed out): the
    # server may still run them and ask for them. By server, by client: the calls (at
    # most _MAX_LEFT_CALLS ids) and the cap (the client's latest such call plus
    # unanswered_call_s). An entry goes once the server answered each of its calls, the
    # session that carried them is gone, or at the cap; one entry per client and server.
    _leftovers: dict[str, dict[str, _Left]] = attrs.field(factory=dict)
    # Each forwarded server's bridge lookup: does the server still run that call?
    _lookups: dict[str, UnansweredLookup] = attrs.field(factory=dict)
    _left_wake: trio.Event = attrs.field(factory=trio.Event)
    unanswered_call_s: float = UNANSWERED_CALL_S
    on_capped: CappedSink | None = None
    # How long a forwarded URL elicitation's completion may come (the gateway's question_ttl_s).
    url_ttl_s: float = 600.0
    # Completions dropped, by server (the first _WARNED_DROPS of each are warned of).
    _dropped: dict[str, int] = attrs.field(factory=dict)
    _urls: UrlElicitations = attrs.field(
        default=attrs.Factory(lambda self: UrlElicitations(ttl_s=self.url_ttl_s), takes_self=True)
    )

    def forwards(self, server_id: str) -> bool:
        """Whether ``server_id``'s requests and logs come through here (a server it started)."""
        return server_id in self._servers

    def watch(self, server_id: str, lookup: UnansweredLookup | None) -> None:
        """Follow ``server_id``'s answers with ``lookup`` (its bridge's), or stop (``None``).

        Stopping forgets the calls it ended unanswered: the server is gone.
        """
        if lookup is None:
            self._lookups.pop(server_id, None)
            self._leftovers.pop(server_id, None)
            self._urls.server_gone(server_id)
        else:
            self._lookups[server_id] = lookup

    def calling(self, server_id: str, scope: CallScope) -> contextlib.AbstractContextManager[None]:
        """Mark ``scope`` as a call running on ``server_id`` while the block runs."""
        return _Calling(self, server_id, scope)

    def _enter(self, server_id: str, scope: CallScope) -> list[CallScope]:
        running = self._calls.setdefault(server_id, [])
        running.append(scope)
        if scope.call_id is not None:
            self._by_id[scope.call_id] = scope
        return running

    def _exit(self, server_id: str, scope: CallScope, running: list[CallScope]) -> None:
        running.remove(scope)
        if not running:
            del self._calls[server_id]
        # A call that never started was never sent: the server runs nothing of it.
        started = scope.slots is not None and scope.slots.started
        if started and not scope.server_answered:
            self._leave(server_id, scope)
        if scope.call_id is not None:
            self._by_id.pop(scope.call_id, None)

    def _leave(self, server_id: str, scope: CallScope) -> None:
        """``scope``'s call ended before the server answered: it counts as running there."""
        lookup = self._lookups.get(server_id)
        call_id = scope.call_id
        if lookup is None or (call_id is not None and not lookup(call_id)):
            # Its server's requests do not come here, or it answered that call already
            # (or the session that carried it is gone).
            return
        now = trio.current_time()
        table = self._prune(server_id, now)
        left = table.get(scope.client)
        if left is None:
            left = table[scope.client] = _Left(until=now)
        left.until = now + self.unanswered_call_s
        if call_id is None or len(left.calls) >= _MAX_LEFT_CALLS:
            left.overflow = True
        else:
            left.calls.add(call_id)
        self._leftovers[server_id] = table
        self._left_wake.set()

    def session_ended(self, label_end: str) -> None:
        """The session of the clients whose labels end in ``label_end`` is over.

        Its URL elicitations will never be told complete (the client is gone).
        """
        self._urls.clients_gone(label_end)

    def server_gone(self, server_id: str) -> None:
        """``server_id``'s process ended: no call it was running still runs."""
        self._leftovers.pop(server_id, None)
        self._urls.server_gone(server_id)

    def _prune(self, server_id: str, now: float) -> dict[str, _Left]:
        """``server_id``'s table without the calls it answered or that reached the cap."""
        table = self._leftovers.get(server_id)
        if not table:
            return {}
        lookup = self._lookups.get(server_id)
        for client, left in list(table.items()):
            if lookup is not None and left.calls:
                left.calls = {call_id for call_id in left.calls if lookup(call_id)}
            if lookup is None or not (left.calls or left.overflow):
                del table[client]  # the server answered each one, or is gone
            elif left.until <= now:
                del table[client]
                self._capped(server_id, client, left)
        if not table:
            self._leftovers.pop(server_id, None)
        return table

    def _capped(self, server_id: str, client: str, left: _Left) -> None:
        """``client``'s calls on ``server_id`` stop counting, unanswered: say so."""
        calls = -1 if left.overflow else len(left.calls)
        _log.warning(
            "MCP server %r did not answer %s call(s) of %s that ended before it answered, "
            "within %g s: they no longer count as running there",
            server_id,
            "many" if calls < 0 else calls,
            client,
            self.unanswered_call_s,
        )
        if self.on_capped is not None:
            with contextlib.suppress(Exception):  # the sink reports its own failures
                self.on_capped(server_id, client, calls, self.unanswered_call_s)

    def _left_by(self, server_id: str) -> set[str]:
        """The clients of calls that ended unanswered and may still run on ``server_id``."""
        return set(self._prune(server_id, trio.current_time()))

    async def expire_unanswered(self) -> None:
        """End the unanswered calls' count at their cap (runs while the gateway is open)."""
        while True:
            if not self._leftovers:
                await self._left_wake.wait()
                self._left_wake = trio.Event()
                continue
            soonest = min(
                left.until for table in self._leftovers.values() for left in table.values()
            )
            await trio.sleep_until(soonest)
            now = trio.current_time()
            for server_id in list(self._leftovers):
                self._prune(server_id, now)

    def _caller(self, server_id: str, call_id: str | None) -> CallScope:
        """The call a request of ``server_id`` is for (``call_id`` when the bridge knows it)."""
        if call_id is not None:
            scope = self._by_id.get(call_id)
            if scope is None:
                raise UpstreamCannotAnswerError(
                    f"the call MCP server {server_id!r} asked for is over: nobody to ask"
                )
            return scope
        running = self._calls.get(server_id, [])
        if not running:
            raise UpstreamCannotAnswerError(
                f"no client call to MCP server {server_id!r} is running: nobody to ask"
            )
        # Never a call still waiting for its concurrency slots: the server was not
        # sent it yet, so the request is not for it (nor does its client count).
        sent = [scope for scope in running if scope.slots is not None and scope.slots.started]
        clients = {scope.client for scope in sent} | self._left_by(server_id)
        if len(clients) > 1:
            raise UpstreamCannotAnswerError(
                f"calls of {len(clients)} clients are running on MCP server {server_id!r} "
                "and its transport does not say which call the request is for: the gateway "
                "asks none of them"
            )
        if not sent:
            raise UpstreamCannotAnswerError(
                f"no client call to MCP server {server_id!r} has started: nobody to ask"
            )
        return sent[0]

    def _asker(
        self, server_id: str, capability: str, call_id: str | None, mode: str = ""
    ) -> CallScope:
        scope = self._caller(server_id, call_id)
        declared = scope.session.client_capabilities
        if declared is None or getattr(declared, capability, None) is None:
            raise UpstreamCannotAnswerError(f"the client did not declare {capability}")
        if mode and not declares_elicitation(declared, mode):
            raise UpstreamCannotAnswerError(
                f"the client did not declare {capability} in {mode.upper()} mode"
            )
        if scope.round is None and not scope.session.can_send_request:
            raise UpstreamCannotAnswerError(
                "the client's connection cannot carry a request in the middle of a call"
            )
        return scope

    async def _ask_round(self, scope: CallScope, server_id: str, request: dict[str, Any]) -> Any:
        """Put ``request`` to a 2026-07-28 client in an ``input_required`` result; its answer."""
        try:
            return await ask_apart(scope, f"mcp:{server_id}", request)
        except UnansweredError as exc:
            raise UpstreamCannotAnswerError(str(exc)) from None

    def elicit(self, server_id: str) -> McpElicitCallback:
        """The ``elicit`` callback of server ``server_id``'s bridge."""

        async def elicit(request: McpElicitation) -> McpElicitationAnswer:
            url = request.url if request.mode == "url" else None
            mode = "form" if url is None else "url"
            scope = self._asker(server_id, "elicitation", request.call_id, mode)
            # Said to come from the server, so it is never taken for the gateway's own
            # approval question ("Prism asks whether the tool ...").
            message = _forwarded(server_id, request.message)
            schema = _shown_schema(request.requested_schema or _EMPTY_FORM)
            if url is None and _answers_unshowable(schema):
                # the answer must be these very strings: they cannot be shown escaped
                _log.warning(
                    "declined MCP server %r's elicitation: its form's field names or "
                    "values hold control characters",
                    server_id,
                )
                return McpElicitationAnswer(action="decline")
            if scope.round is not None:
                result = _answer_as(
                    types.ElicitResult,
                    await self._ask_round(
                        scope, server_id, _elicit_request(request, message, schema)
                    ),
                )
            elif url is not None:
                # Never the server's own id: an id of the gateway's, which stands for
                # this server's id and this client only (its completion comes back so).
                shown = self._urls.issue(server_id, request.elicitation_id, scope)
                result = await scope.session.elicit_url(
                    message, url, shown, related_request_id=scope.request_id
                )
            else:
                result = await scope.session.elicit_form(
                    message, schema, related_request_id=scope.request_id
                )
            content: Any = result.content if result.action == "accept" else None
            return McpElicitationAnswer(action=result.action, content=content)

        return elicit

    def url_required(self, server_id: str, scope: CallScope, result: ToolResult) -> ToolResult:
        """``scope``'s call got ``server_id``'s URLElicitationRequiredError (``result``).

        A 2025-11-25 client that declared URL mode gets the error itself
        (-32042), each elicitation under an id of the gateway's own (as for a
        URL elicitation request, its completion reaches that client): raises
        ``MCPError``. Any other client gets ``result``, saying why it was
        not shown them.
        """
        # As prism.mcp gives them: {"url", "message", "elicitation_id"}, strings each.
        wanted = cast("list[dict[str, Any]]", result.details.get("elicitations", []))
        if scope.modern or scope.round is not None:
            why = "2026-07-28 has no such error"
        elif not declares_elicitation(scope.session.client_capabilities, "url"):
            why = "it did not declare elicitation in URL mode"
        else:
            elicitations: list[dict[str, Any]] = []
            for each in wanted:
                shown = self._urls.issue(server_id, each["elicitation_id"], scope)
                message = _forwarded(server_id, each["message"])
                elicitations.append(
                    {"mode": "url", "elicitationId": shown, "url": each["url"], "message": message}
                )
            raise MCPError(
                types.URL_ELICITATION_REQUIRED,
                f"MCP server {server_id!r} needs the user to complete {len(elicitations)} "
                "URL elicitation(s) first (forwarded by Prism)",
                {"elicitations": elicitations},
            )
        return ToolResult.error(
            f"{result.joined_text}; the client cannot be shown them: {why}", **result.details
        )

    def sample(self, server_id: str) -> McpSampleCallback:
        """The ``sample`` callback of server ``server_id``'s bridge."""

        async def sample(request: McpSamplingRequest) -> McpSamplingAnswer:
            scope = self._asker(server_id, "sampling", request.call_id)
            # The server's request as it sent it (the SDK's create_message helper is
            # deprecated with sampling itself, and would rebuild it field by field),
            # but for two members. Its _meta is the server's own (a progress token,
            # say): the gateway's request carries the gateway's. And it asks for no
            # context: to the client "this server" is the whole gateway (every
            # server's and the local tools' results), which no one server may read.
            asked = {key: value for key, value in request.params.items() if key != "_meta"}
            if "includeContext" in asked:
                asked["includeContext"] = "none"
            params = types.CreateMessageRequestParams.model_validate(asked)
            if scope.round is not None:
                wire = {"method": "sampling/createMessage", "params": _wire(params)}
                result = _answer_as(
                    types.CreateMessageResult, await self._ask_round(scope, server_id, wire)
                )
            else:
                result = await scope.session.send_request(
                    types.CreateMessageRequest(params=params),
                    types.CreateMessageResult,
                    metadata=ServerMessageMetadata(related_request_id=scope.request_id),
                )
            content = result.content
            if not isinstance(content, types.TextContent):
                raise UpstreamCannotAnswerError("the client's model answered with no text")
            return McpSamplingAnswer(
                text=content.text, model=result.model, stop_reason=result.stop_reason
            )

        return sample

    def roots(self, server_id: str) -> McpRootsCallback:
        """The ``roots`` callback of server ``server_id``'s bridge.

        The roots of the client whose call the request is for, when it
        declared roots and can be asked; otherwise the gateway's own roots;
        with neither, the request is refused. Never another client's.
        """

        async def roots(request: McpRootsRequest) -> Sequence[str]:
            try:
                scope: CallScope | None = self._asker(server_id, "roots", request.call_id)
            except UpstreamCannotAnswerError:
                if not self._roots:
                    raise
                scope = None
            if scope is None:
                return self._roots
            if scope.round is not None:
                wire: dict[str, Any] = {"method": "roots/list"}
                result = _answer_as(
                    types.ListRootsResult, await self._ask_round(scope, server_id, wire)
                )
            else:
                result = await scope.session.send_request(
                    types.ListRootsRequest(),
                    types.ListRootsResult,
                    metadata=ServerMessageMetadata(related_request_id=scope.request_id),
                )
            # Roots are file:// URIs; anything else the client lists is left out.
            return [str(root.uri) for root in result.roots if str(root.uri).startswith("file://")]

        return roots

    def completed(self, server_id: str) -> McpElicitationCompleteCallback:
        """The ``on_elicitation_complete`` callback of server ``server_id``'s bridge.

        A completion is passed on, under the id the client was shown, only
        for a URL elicitation this same server sent through the gateway, to
        the client that got it, once: on the call's stream while that call
        runs (before its result), else on the client's session. Any other
        (an id the server never sent, another server's, one completed,
        forgotten, or sent to a 2026-07-28 client, which has no ids) is
        dropped with a warning (past eight from one server, at debug level).
        """

        def on_complete(notice: McpElicitationComplete) -> None:
            issued = self._urls.complete(server_id, notice.elicitation_id)
            if issued is None:
                # A server that keeps sending them gets its first few warned of, the
                # rest logged at debug level: it cannot flood the gateway's log.
                dropped = self._dropped[server_id] = self._dropped.get(server_id, 0) + 1
                _log.log(
                    logging.WARNING if dropped <= _WARNED_DROPS else logging.DEBUG,
                    "dropped MCP server %r's notifications/elicitation/complete for %r: "
                    "not a URL elicitation of that server still waiting for its completion%s",
                    server_id,
                    clip(notice.elicitation_id, 80),
                    " (more from this server are logged at debug level)"
                    if dropped == _WARNED_DROPS
                    else "",
                )
                return
            scope = issued.scope
            notification = types.ElicitCompleteNotification(
                params=types.ElicitCompleteNotificationParams(elicitation_id=issued.upstream_id)
            )
            if scope in self._calls.get(server_id, ()):
                waiting = self._pending.setdefault(scope, [])
            else:
                waiting = self._loose.setdefault(id(scope.session), (scope.session, []))[1]
            kept = sum(isinstance(each, types.ElicitCompleteNotification) for each in waiting)
            if kept >= _COMPLETION_BACKLOG:  # its client has not taken the ones before
                _log.warning(
                    "dropped MCP server %r's completion of a URL elicitation for %s: "
                    "%d wait to be sent to that client already",
                    server_id,
                    scope.client,
                    kept,
                )
                return
            waiting.append(notification)
            self._wake.set()

        return on_complete

    def log(self, server_id: str) -> McpLogCallback:
        """The ``on_log`` callback of server ``server_id``'s bridge.

        A log message goes, as ``notifications/message`` on the call's stream
        and with the logger named ``mcp:<server>/<logger>``, to the client
        whose call it was sent for (found as for requests): a 2025-11-25
        client gets every level, a 2026-07-28 client only what its call asked
        for (the ``io.modelcontextprotocol/logLevel`` key of the call's
        ``_meta``: that level and above). Otherwise, or past 64 waiting for
        one call, it is dropped. Messages are sent as they come, and those
        still waiting when the call ends are sent before its result.
        """
        self._servers.add(server_id)

        def on_log(message: McpLogMessage) -> None:
            try:
                scope = self._caller(server_id, message.call_id)
            except UpstreamCannotAnswerError:
                return
            if message.level not in scope.log_levels:
                return
            logger = f"mcp:{server_id}/{message.logger}" if message.logger else f"mcp:{server_id}"
            notification = types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(
                    level=message.level,  # type: ignore[arg-type]
                    logger=logger,
                    data=message.data,
                )
            )
            waiting = self._pending.setdefault(scope, [])
            if len(waiting) < _LOG_BACKLOG:
                waiting.append(notification)
                self._wake.set()

        return on_log

    async def send_logs(self) -> None:
        """Send the forwarded log messages and completions as they come (runs while open).

        Each call's, and each session's, are sent by a task of their own: a client
        that stops reading holds up only what waits for it, never another's.
        """
        async with trio.open_nursery() as nursery:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                for scope in list(self._pending):
                    if scope not in self._senders:
                        self._senders.add(scope)
                        nursery.start_soon(self._send_pending, scope)
                for key in list(self._loose):
                    if key not in self._senders:
                        self._senders.add(key)
                        nursery.start_soon(self._send_loose, key)

    async def _send_pending(self, scope: CallScope) -> None:
        try:
            await self.flush(scope, bound_s=_NOTIFY_S)
        finally:
            self._senders.discard(scope)
            if self._pending.get(scope):  # came after its flush looked: another round
                self._wake.set()

    async def _send_loose(self, key: int) -> None:
        """Send what waits for one session (completions of calls that are over)."""
        try:
            while key in self._loose:
                session, waiting = self._loose[key]
                if not waiting:
                    del self._loose[key]
                    break
                notification = waiting.pop(0)
                # Over HTTP to its standalone stream, if it keeps one.
                with trio.move_on_after(_NOTIFY_S) as timer, contextlib.suppress(Exception):
                    await session.send_notification(notification)
                if timer.cancelled_caught:
                    left = self._loose.pop(key, (None, []))[1]
                    _log.warning(
                        "dropped %d forwarded notification(s) for a client's session: it "
                        "took no message within %g s",
                        1 + len(left),
                        _NOTIFY_S,
                    )
        finally:
            self._senders.discard(key)
            if self._loose.get(key, (None, []))[1]:
                self._wake.set()

    def drop(self, scope: CallScope) -> None:
        """Forget the log messages still waiting for ``scope``'s call."""
        self._pending.pop(scope, None)
        self._sending.pop(scope, None)

    async def flush(self, scope: CallScope, bound_s: float = math.inf) -> None:
        """Send the log messages still waiting for ``scope``'s call.

        Waits for a sending already under way, so none is overtaken by the
        result. A message its client does not take within ``bound_s`` is
        dropped with the rest waiting (and said in the log).
        """
        lock = self._sending.get(scope)
        if lock is None:
            if not self._pending.get(scope):
                return  # nothing waits, nothing is being sent
            lock = self._sending[scope] = trio.Lock()
        async with lock:
            while waiting := self._pending.pop(scope, None):
                for sent, notification in enumerate(waiting):
                    # (the call, or the client, may be gone)
                    with trio.move_on_after(bound_s) as timer, contextlib.suppress(Exception):
                        await scope.session.send_notification(
                            notification, related_request_id=scope.request_id
                        )
                    if timer.cancelled_caught:
                        left = len(waiting) - sent + len(self._pending.pop(scope, ()))
                        _log.warning(
                            "dropped %d forwarded notification(s) for %s's call of %r: "
                            "its client took no message within %g s",
                            left,
                            scope.client,
                            scope.tool_name,
                            bound_s,
                        )
                        return


class _Calling:
    """:meth:`Forwarder.calling`'s block (a class: no generator made and run per call)."""

    __slots__ = ("_forwarder", "_running", "_scope", "_server_id")

    def __init__(self, forwarder: Forwarder, server_id: str, scope: CallScope) -> None:
        self._forwarder = forwarder
        self._server_id = server_id
        self._scope = scope
        self._running: list[CallScope] | None = None

    def __enter__(self) -> None:
        self._running = self._forwarder._enter(self._server_id, self._scope)

    def __exit__(self, *_exc: object) -> None:
        running = self._running
        if running is not None:
            self._running = None
            self._forwarder._exit(self._server_id, self._scope, running)
