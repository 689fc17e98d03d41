"""The gateway: Prism's gated tools offered as an MCP server (the SDK's low-level ``Server``)."""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import inspect
import itertools
import json
import logging
import math
import os
import re
import time
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, cast

import attrs
import mcp_types as types
import trio
from mcp.server.connection import allowed_log_levels
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from prism.core import (
    CallTicket,
    ConfigurationError,
    DispatchOptions,
    EventSink,
    MiddlewareRegistry,
    ParsedJson,
    PermissionPolicy,
    ToolCall,
    ToolDefinition,
    ToolExecutionProgress,
    ToolFilter,
    ToolNameMap,
    ToolResult,
    ToolValidator,
    begin_tool_call,
    create_tool_name_map,
    create_tool_registry,
    dispatch_tool_call,
    filter_tools,
    finish_tool_call,
    provider_safe_name,
)
from prism.core.ledger import FinishedCall, RunLedger
from prism.core.options import (
    OptionCheck,
    callable_value,
    has_method,
    instance_of,
    integer,
    number,
    optional,
    sequence_of,
)
from prism.core.text import NAME_LIMIT, clip, describe_exception, has_lone_surrogate
from prism.mcp import McpBridgeError, McpStartedCall, McpToolBridge, open_mcp_tools

from ._approval import (
    QUESTION_TTL_S,
    CallScope,
    Eviction,
    OpenQuestions,
    StaleStateError,
    current_call,
    declares_elicitation,
    principal_of,
)
from ._content import call_tool_result_json, lone_surrogate_in
from ._errors import GatewayConfigurationError, GatewayError
from ._fast import current_link
from ._forward import UNANSWERED_CALL_S, Forwarder
from ._hints import ToolHints
from ._rounds import ROUND_STATE_PREFIX, CallSlots, Round
from ._servers import DownstreamServer, ServerState
from ._sessions import shown
from ._tracing import incoming_trace

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext
    from mcp.server.models import InitializationOptions

    from prism.core import AgentEvent, BlockedReason

    from ._upstream import InlineCall

__all__ = ["Gateway", "open_gateway"]

_log = logging.getLogger("prism.gateway")
_RELISTS = 3
_RELIST_WINDOW_S = 10.0
"""A downstream server's tools are re-listed at most ``_RELISTS`` times in any
``_RELIST_WINDOW_S`` seconds, however often it announces a change."""
_NO_SCOPE: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
"""A block that changes nothing (a nullcontext keeps no state: one serves every call)."""
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9_.@+:|-]")
_PROGRESS_BACKLOG = 64
_OPTIONS_CACHE = 256
CALLS_WAITING_ERROR = -32029
"""The JSON-RPC error code of a call refused because too many calls wait (its client's, or all)."""
LONE_SURROGATE = (
    "the tool returned a string with a lone surrogate (U+D800 to U+DFFF), which no UTF-8 holds"
)
QUESTION_TOOL = "prism:question"
"""The tool name the ledger records a waiting call's eviction under (and unanswered calls' cap)."""


def _label(text: str, limit: int = 48) -> str:
    return _LABEL_UNSAFE.sub("_", text)[:limit] or "-"


def _whole(text: str, limit: int = 64) -> str:
    """``text`` as a label part that stands for all of it.

    Kept as it is when it is short and plain; otherwise its readable start and
    a digest of the whole (after ``~``, which plain text never holds), so two
    different texts never give one part.
    """
    if text and len(text) <= limit and not _LABEL_UNSAFE.search(text):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return f"{_LABEL_UNSAFE.sub('_', text)[: limit - 21]}~{digest}"


def client_label(ctx: ServerRequestContext[Any, Any]) -> str:
    """Who is calling: ``<principal>/<client name>/<session>``, recorded with each call.

    Over HTTP the principal (bearer token id, or OAuth client, issuer and
    subject) and the session id are the ones the HTTP guard checked; each is
    kept whole (or digested whole), so two principals or two sessions never
    share a label. Over stdio: ``stdio/<client name>/-``.
    """
    scope = getattr(ctx.request, "scope", None)
    params = ctx.session.client_params  # None for a 2026-07-28 client (no initialize)
    name = "client" if params is None else params.client_info.name
    if not isinstance(scope, Mapping):
        # (the labels of short names kept: a long one is not held, whatever its length)
        return _stdio_label(name) if len(name) <= _CACHED_NAME else f"stdio/{_label(name)}/-"
    principal = str(scope.get("prism.principal") or scope.get("prism.identity") or "http")
    checked = scope.get("prism.session")
    session_id = checked if isinstance(checked, str) else "-"
    return f"{_whole(principal)}/{_label(name)}/{_whole(session_id)}"


_CACHED_NAME = 64


@functools.lru_cache(maxsize=_OPTIONS_CACHE)
def _stdio_label(name: str) -> str:
    """:func:`client_label` of a client of ``name`` with no HTTP scope (stdio, in-process)."""
    return f"stdio/{_label(name)}/-"


def _share_key(ctx: ServerRequestContext[Any, Any]) -> str:
    """Whose share of the calls (``max_calls_per_client``) a call counts in.

    What the sender cannot vary from one request to the next: over HTTP the
    principal and session the guard checked; otherwise the connection (the
    stdio pipe, an in-process client). Never the client name: a 2026-07-28
    request declares its own in its envelope, so counting by it would make
    every call its own client.
    """
    scope = getattr(ctx.request, "scope", None)
    if isinstance(scope, Mapping):
        principal = str(scope.get("prism.principal") or scope.get("prism.identity") or "http")
        checked = scope.get("prism.session")
        session_id = checked if isinstance(checked, str) else "-"
        return f"{_whole(principal)}/{_whole(session_id)}"
    # The connection's dispatcher (a 2026-07-28 request's context wraps the
    # dispatcher's), else an in-process pair's transport, else the connection.
    outbound: Any = getattr(ctx.session, "_request_outbound", None)
    inner = getattr(outbound, "_inner", outbound)
    anchor = getattr(inner, "_dispatcher", None)
    if anchor is None and ctx.session.client_params is None:
        anchor = getattr(inner, "transport", None)
    if anchor is None:
        anchor = getattr(ctx.session, "_connection", ctx.session)
    # (alive while any of its calls runs, so its id is no other connection's meanwhile)
    return f"local/{id(anchor):x}"


def _parsed_arguments(ctx: ServerRequestContext[Any, Any]) -> ParsedJson | None:
    """The arguments of this HTTP ``tools/call`` as the guard parsed them from its body."""
    scope = getattr(ctx.request, "scope", None)
    parsed = scope.get("prism.arguments") if isinstance(scope, Mapping) else None
    return parsed if type(parsed) is ParsedJson else None


def _call_key(ctx: ServerRequestContext[Any, Any]) -> object:
    """The key the HTTP guard cancels this call by when its connection drops (else ``None``)."""
    scope = getattr(ctx.request, "scope", None)
    return scope.get("prism.call") if isinstance(scope, Mapping) else None


def _bridge_hints(bridge: McpToolBridge) -> dict[str, ToolHints]:
    hints: dict[str, ToolHints] = {}
    for tool_name, info in bridge.tool_info.items():
        if info.changed:
            # Changed since pinned and not accepted: none of the server's new words
            # (title, annotations, output schema) is offered; the bridge offers the
            # accepted description and inputSchema. Its calls are blocked.
            hints[tool_name] = ToolHints()
            continue
        a = info.annotations
        hints[tool_name] = ToolHints(
            title=info.title,
            read_only=a.read_only_hint,
            destructive=a.destructive_hint,
            idempotent=a.idempotent_hint,
            open_world=a.open_world_hint,
            output_schema=info.output_schema,
        )
    return hints


def _wire_tool(alias: str, tool: ToolDefinition, hints: ToolHints | None) -> types.Tool:
    schema: dict[str, Any] = dict(tool.parameters) if tool.parameters else {"type": "object"}
    annotations = None
    output_schema = None
    title = None
    if hints is not None:
        stated = hints.annotations_json()
        if stated:
            annotations = types.ToolAnnotations.model_validate(stated)
        output_schema = hints.output_schema
        title = hints.title
    return types.Tool(
        name=alias,
        title=title,
        description=tool.description,
        input_schema=schema,
        output_schema=output_schema,
        annotations=annotations,
    )


class _ClientSlot:
    """One client's share of the calls (``max_calls_per_client``), known while a call runs.

    Kept while the client has calls running or waiting, and while idle as long as
    the gateway knows few clients (a limiter per call would be made otherwise).
    """

    __slots__ = ("_client", "_limiter", "_table", "_users", "waiting")

    def __init__(
        self, client: str, limiter: trio.CapacityLimiter, table: dict[str, _ClientSlot]
    ) -> None:
        self._client = client
        self._limiter = limiter
        self._table = table
        self._users = 0  # calls holding or waiting for the limiter
        self.waiting = 0  # calls waiting for their first turn (max_waiting_calls_per_client)

    async def __aenter__(self) -> trio.CapacityLimiter:
        """The client's limiter, not acquired (the call's CallSlots acquire it)."""
        self._users += 1
        return self._limiter

    async def __aexit__(self, *_exc: object) -> None:
        self._leave()

    def _leave(self) -> None:
        self._users -= 1
        if not self._users and len(self._table) > _OPTIONS_CACHE:
            self._table.pop(self._client, None)


@attrs.define(eq=False)
class Gateway:
    """Prism's gated tools, served to MCP clients; build one with :func:`open_gateway`.

    Every ``tools/call`` goes through ``prism.core.dispatch_tool_call`` with the
    gateway's gates (filters, permission, validator, middleware, ledger); a
    blocked or denied call is an error result the model can read. Tools are
    offered under provider-safe names (``mcp:docs:search`` as
    ``mcp__docs__search``).
    """

    _local: tuple[ToolDefinition, ...]
    _bridges: list[McpToolBridge]
    _filters: tuple[ToolFilter, ...]
    _options: DispatchOptions
    _hints: Mapping[str, ToolHints]
    _on_event: EventSink | None
    _limiter: trio.CapacityLimiter
    _per_client_limit: int
    _max_waiting: int = 64
    _max_waiting_all: int = 1024
    _waiting_all: int = 0  # calls waiting for their first turn, of every client
    _clients_waiting: int = 0  # clients with at least one such call
    _seq: Iterator[int] = attrs.field(factory=lambda: itertools.count(1))
    _names: ToolNameMap = attrs.field(init=False)
    # registry name -> the bridge whose tool it is
    _owners: dict[str, McpToolBridge] = attrs.field(init=False, factory=dict)
    _wire: list[types.Tool] = attrs.field(init=False)
    # The SDK's per-client Connection objects (kept weakly: a closed client goes).
    _connections: weakref.WeakSet[Any] = attrs.field(factory=weakref.WeakSet)
    server: Server[Any] = attrs.field(init=False)
    _bus: InMemorySubscriptionBus = attrs.field(factory=InMemorySubscriptionBus)
    _listen: ListenHandler = attrs.field(init=False)
    # share key (see _share_key) -> (its limiter, calls holding or waiting for it)
    _per_client: dict[str, _ClientSlot] = attrs.field(factory=dict)
    # The HTTP guard's key of each call's request -> the call's cancel scope, while it runs
    _running: dict[object, trio.CancelScope] = attrs.field(factory=dict)
    # server id -> the state of each downstream server the gateway starts itself
    _servers: dict[str, ServerState] = attrs.field(factory=dict)
    # Whom each downstream server's questions go to (the client whose call it serves).
    _forward: Forwarder = attrs.field(factory=Forwarder)
    # client label -> the dispatch options of its calls (made once, not per call; reset
    # when the tools change)
    _client_options: dict[str, DispatchOptions] = attrs.field(factory=dict)
    # Whether calls with these options (each client's, which differ in their event sink
    # and metadata only) begin at once (see _at_once)
    _at_once: tuple[DispatchOptions, bool] | None = attrs.field(default=None, init=False)
    # 2026-07-28 clients' calls waiting for answers to their servers' questions (one use each)
    _parked: OpenQuestions = attrs.field(factory=OpenQuestions)
    # Where such calls run (open_gateway's nursery)
    _nursery: trio.Nursery | None = None

    def __attrs_post_init__(self) -> None:
        self._parked.closed = self._evicted
        self._listen = ListenHandler(self._bus)
        self.server = Server(
            "prism-gateway",
            version="0.1.0",
            instructions="Prism: every tool call passes Prism's gates (permission, "
            "validation, execution policy, sandbox) before it runs.",
            on_list_tools=self._on_list_tools,
            # The handler answers with the result's JSON, which the SDK checks once (a
            # request handler may return a dict: the SDK's HandlerResult).
            on_call_tool=cast("Any", self._on_call_tool),
            on_subscriptions_listen=self._listen,
        )
        self._rebuild()

    @property
    def tools(self) -> tuple[ToolDefinition, ...]:
        """The tools offered now (local ones, then each bridge's), under registry names."""
        return tuple(self._options.registry.list())

    @property
    def offered_names(self) -> Mapping[str, str]:
        """Each offered tool's MCP name (its provider-safe alias) by registry name."""
        return {tool.name: self._names.alias(tool.name) for tool in self.tools}

    @property
    def ledger(self) -> RunLedger | None:
        """The ledger every call is recorded in, if one was given."""
        ledger = self._options.ledger
        return ledger if isinstance(ledger, RunLedger) else None

    def initialization_options(self) -> InitializationOptions:
        """What the server announces at the handshake (tools, with ``listChanged``)."""
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    def _rebuild(self) -> None:
        tools = list(self._local)
        hints = dict(self._hints)
        owners: dict[str, McpToolBridge] = {}
        for bridge in self._bridges:
            tools.extend(bridge.tools)
            hints.update(_bridge_hints(bridge))
            owners.update((tool.name, bridge) for tool in bridge.tools)
        offered = filter_tools(tools, *self._filters)
        try:
            registry = create_tool_registry(offered, duplicate="error")
            names = create_tool_name_map(tool.name for tool in offered)
        except ValueError as exc:  # two tools share a name, or a provider-safe alias
            raise GatewayConfigurationError(
                f"open_gateway.tools: {exc}",
                option="open_gateway.tools",
                value=[tool.name for tool in offered],
            ) from exc
        self._options = attrs.evolve(self._options, registry=registry)
        self._client_options.clear()
        self._names = names
        self._owners = owners
        # Hints are typed (ToolHints checks them; prism-mcp reads a bridged server's leniently).
        self._wire = [_wire_tool(names.alias(t.name), t, hints.get(t.name)) for t in offered]

    def server_status(self) -> Mapping[str, tuple[str, str | None]]:
        """Each downstream server's ``(status, reason)``: ``starting``, ``up`` or ``failed``."""
        return {sid: (state.status, state.reason) for sid, state in self._servers.items()}

    def _unavailable(self, alias: str) -> str | None:
        """Why a tool of a downstream server that is not up cannot be called (else ``None``)."""
        for server_id, state in self._servers.items():
            if state.status == "up" or not alias.startswith(_alias_prefix(server_id)):
                continue
            if state.status == "starting":
                return (
                    f"MCP server {server_id!r} is still starting: its tools are offered "
                    "(notifications/tools/list_changed) once it is up"
                )
            return f"MCP server {server_id!r} is unavailable: {state.reason}"
        return None

    async def _run_server(self, state: ServerState) -> None:
        """Start one downstream server, offer its tools, watch it; report a failure."""
        server = state.server
        try:
            async with open_mcp_tools(
                server_id=server.server_id,
                transport=server.transport,
                elicit=self._forward.elicit(server.server_id),
                sample=self._forward.sample(server.server_id),
                roots=self._forward.roots(server.server_id),
                on_log=self._forward.log(server.server_id),
                on_elicitation_complete=self._forward.completed(server.server_id),
                **server.options,
            ) as bridge:
                self._bridges.append(bridge)
                try:
                    self._rebuild()
                except GatewayConfigurationError:
                    self._bridges.remove(bridge)
                    self._rebuild()
                    raise
                self._forward.watch(server.server_id, bridge.unanswered)
                state.status = "up"
                _log.info("MCP server %r is up (%d tools)", server.server_id, len(bridge.tools))
                state.ready.set()
                await self.notify_tools_changed()
                try:
                    await self._watch(bridge)
                finally:
                    self._bridges.remove(bridge)
                    self._forward.watch(server.server_id, None)
        except Exception as exc:
            self._server_failed(state, exc)
        except BaseExceptionGroup as group:
            # A start that fails while the gateway closes: the failure (the server
            # exited, say) and the gateway's cancellation arrive together, as one group
            # that is no Exception. The failure is the server's; only the cancellation
            # goes on (its scope ends it), so the failure never raises out of the gateway.
            cancelled, failure = group.split(trio.Cancelled)
            if cancelled is None or not isinstance(failure, Exception):
                raise  # no cancellation, or more than errors (KeyboardInterrupt)
            self._server_failed(state, failure)
            raise cancelled from None
        finally:
            state.ready.set()

    def _server_failed(self, state: ServerState, exc: Exception) -> None:
        state.status = "failed"
        state.reason = _reason(exc)
        _log.warning("MCP server %r did not start: %s", state.server.server_id, state.reason)
        with contextlib.suppress(Exception):
            self._rebuild()

    async def wait_servers(self) -> None:
        """Wait until every downstream server given to ``open_gateway`` is up or has failed.

        Checkpoints; cancellation just stops the wait.
        """
        for state in self._servers.values():
            await state.ready.wait()

    async def _wait_required(self) -> GatewayError | None:
        """Wait for the required downstream servers; the error if one did not start."""
        for state in self._servers.values():
            if state.server.required:
                await state.ready.wait()
                if state.status != "up":
                    return GatewayError(
                        f"required MCP server {state.server.server_id!r} did not start: "
                        f"{state.reason}"
                    )
        return None

    def _remember(self, ctx: ServerRequestContext[Any, Any]) -> None:
        link = current_link.get()
        if link is not None and not link.ready:  # a stdio connection: its fast path learns it
            link.learn(ctx)
        # ServerSession is made per request; the connection behind it lasts (mcp<3 keeps
        # it as ``_connection``; there is no public handle on the low-level context).
        connection = getattr(ctx.session, "_connection", None)
        if connection is not None:
            try:
                self._connections.add(connection)
            except TypeError:  # (not weakly referenceable)
                return

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any, Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember(ctx)
        return types.ListToolsResult(tools=list(self._wire))

    async def _on_call_tool(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        parsed: ParsedJson | None = None,
    ) -> dict[str, Any] | types.InputRequiredResult:
        """Answer a ``tools/call``; ``parsed``: its arguments as parsed from the request's text.

        ``parsed`` comes from the stdio line (``_upstream``); over HTTP the
        guard leaves the body's in the request's scope.
        """
        self._remember(ctx)
        client = client_label(ctx)
        state = params.request_state
        if state is not None:  # a retry answering a waiting call's questions
            # Resumed by its state before any look-up: the waiting call holds its tool
            # (and is bound to this name and these arguments), so a listing changed
            # since it started does not strand it.
            return await self._resume_round(ctx, params, client, state)
        name = self._names.registry_name(params.name)
        if name is None:
            unavailable = self._unavailable(params.name)
            self._record_refused(ctx, params, unavailable)
            if unavailable is None:
                raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name!r}")
            return call_tool_result_json(ToolResult.error(unavailable), any_structured=False)
        if parsed is None:
            parsed = _parsed_arguments(ctx)
        call = _tool_call(f"{client}#{next(self._seq)}", name, params, parsed)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        meta = _meta(ctx)  # (as _wants_progress reads it)
        scope = CallScope(
            session=ctx.session,
            request_id=ctx.request_id,
            client=client,
            tool_name=name,
            modern=modern,
            arguments=call.arguments,
            call_id=call.id,
            log_levels=allowed_log_levels(ctx.protocol_version, meta),
            progress=ctx.session
            if meta is not None and meta.get("progressToken") is not None
            else None,
        )
        owner = self._owners.get(name)
        caps = ctx.session.client_capabilities
        if modern and (
            _may_be_approved(caps)
            or (
                owner is not None
                and self._forward.forwards(owner.server_id)
                and _may_be_asked(caps)
            )
        ):  # its approvals and its server's questions go to the client as input_required
            return await self._start_round(ctx, params, scope, call, owner)
        return await self._execute(ctx, scope, call, owner, _call_key(ctx))

    def _begin_inline(
        self,
        connection: Connection,
        dispatcher: object,
        params: types.CallToolRequestParams,
        raw: dict[str, Any],
        parsed: ParsedJson | None,
        answer: InlineCall,
    ) -> bool:
        """Begin a stdio client's bridged call with no task of its own; ``False``: not taken.

        What :meth:`_on_call_tool` and :meth:`_execute` do for a call of a
        bridged tool, from the reader of the client's pipe: the call's
        concurrency slots taken without waiting, its gates
        (``begin_tool_call``), the bridge's request written
        (``McpToolBridge.start_call``); the bridged server's answer ends it
        from that pipe's reader (:meth:`_end_inline`). Taken only when
        nothing of it would wait or ask: a known bridged tool whose server's
        questions are not forwarded, no waiting call's retry, no progress
        asked, no approval round, the slots free, gates that answer at once
        and a live session. Otherwise nothing is done (no call id is used)
        and the request takes the general path.
        """
        if params.request_state is not None:
            return False
        name = self._names.registry_name(params.name)
        if name is None:
            return False
        owner = self._owners.get(name)
        if owner is None or not owner.starts_calls or self._forward.forwards(owner.server_id):
            return False
        meta = raw.get("_meta")
        if type(meta) is dict and meta.get("progressToken") is not None:
            return False
        modern = answer.modern
        if modern and _may_be_approved(connection.client_capabilities):
            return False
        client_params = connection.client_params
        label = "client" if client_params is None else client_params.client_info.name
        client = _stdio_label(label) if len(label) <= _CACHED_NAME else f"stdio/{_label(label)}/-"
        options = self._options_for(client)
        at_once = self._at_once
        if at_once is None or at_once[0] is not self._options:
            at_once = self._at_once = (self._options, _at_once(self._options))
        if not at_once[1]:
            return False
        share = self._client_slot(f"local/{id(dispatcher):x}")  # (as _share_key says)
        if share.waiting >= self._max_waiting:
            return False
        slots = CallSlots((share._limiter, self._limiter))
        if not slots.take_now():
            return False
        # Taken: from here on the call is this path's.
        with contextlib.suppress(TypeError):  # (not weakly referenceable)
            self._connections.add(connection)
        share._users += 1
        call = _tool_call(f"{client}#{next(self._seq)}", name, params, parsed)
        inline = _Inline(self, owner, answer, share, slots)
        answer.on_abort = inline.abort
        ticket = begin_tool_call(call, options)
        if isinstance(ticket, CallTicket) and not ticket.waiting:
            inline.ticket = ticket
            assert ticket.tool is not None
            assert ticket.arguments is not None
            started = owner.start_call(ticket.tool, ticket.arguments, ticket.context, inline.done)
            if started is not None:
                inline.started = started
                return True
        inline.later(call, options, ticket)
        return True

    async def _execute(
        self,
        ctx: ServerRequestContext[Any, Any],
        scope: CallScope,
        call: ToolCall,
        owner: McpToolBridge | None,
        key: object,
    ) -> dict[str, Any] | types.InputRequiredResult:
        """Run ``call`` through the gates; its answer (``key``: see :meth:`client_gone`)."""
        client = scope.client
        token = current_call.set(scope)
        result = None
        forwarding = (
            self._forward.calling(owner.server_id, scope) if owner is not None else _NO_SCOPE
        )
        # Over HTTP its guard may end the call (client_gone): a scope of its own for that
        running = trio.CancelScope() if key is not None else None
        try:
            with incoming_trace(ctx), forwarding, running or _NO_SCOPE:
                if running is not None:
                    self._running[key] = running
                share = self._client_slot(_share_key(ctx))
                if share.waiting >= self._max_waiting:
                    self._refuse_waiting(ctx, call, everyone=False)
                async with share as slot:
                    # The client's slot first: a call waiting for its own client's turn
                    # holds none of the gateway's (one client's queue would hold them all).
                    slots = scope.slots = CallSlots((slot, self._limiter))
                    if (
                        self._waiting_all >= self._max_waiting_all
                        and share.waiting >= self._fair_share(share)
                        and not slots.free()
                    ):
                        self._refuse_waiting(ctx, call, everyone=True)
                    try:
                        # (counted only while it waits: a call with its slots free takes
                        # them without yielding)
                        share.waiting += 1
                        self._waiting_all += 1
                        self._clients_waiting += share.waiting == 1
                        try:
                            await slots.take()
                        finally:
                            share.waiting -= 1
                            self._waiting_all -= 1
                            self._clients_waiting -= share.waiting == 0
                        if scope.progress is not None or scope.round is not None:
                            # (a waiting call's later requests may ask for progress)
                            result = await self._dispatch_with_progress(scope, call, client)
                        else:
                            result = await dispatch_tool_call(call, self._options_for(client))
                        # Only a result the server gave: a timed-out call, or one ended
                        # by its round's abort (its question expired or was pushed out),
                        # may still run on the server, which may still ask for it.
                        scope.server_answered = (
                            result.details.get("mcp_error") != "timeout"
                            and result.details.get("cancelled") is not True
                        )
                    finally:
                        slots.close()
                if owner is not None and self._forward.forwards(owner.server_id):
                    # A log message the server sent just before its result is handled by
                    # a task of its own: let it run while the call still counts as running.
                    await trio.lowlevel.checkpoint()
            await self._forward.flush(scope)  # the server's log messages, before the result
        finally:
            self._forward.drop(scope)
            if key is not None and self._running.get(key) is running:
                del self._running[key]
            current_call.reset(token)
        if result is None:  # the client went away (see client_gone); nobody reads this
            result = ToolResult.error("cancelled: the client disconnected")
        if owner is not None:
            result = self._server_went_away(owner, result)
        if (
            owner is not None
            and result.details.get("mcp_error") == "url_elicitation_required"
            and self._forward.forwards(owner.server_id)
        ):  # to a client that can be shown them, the server's -32042 itself (raised)
            result = self._forward.url_required(owner.server_id, scope, result)
        wire = call_tool_result_json(result, any_structured=scope.modern)
        # (a server's result was checked so by the bridge's answer gate already)
        if owner is None and lone_surrogate_in(wire):
            _log.warning("refused the result of %s (%s): %s", call.id, call.name, LONE_SURROGATE)
            reason = f"result refused: {LONE_SURROGATE}"
            wire = call_tool_result_json(ToolResult.error(reason), any_structured=False)
        return wire

    def _server_went_away(self, owner: McpToolBridge, result: ToolResult) -> ToolResult:
        """``result``, said as the server going away when its session ended during the call."""
        if not result.is_error or owner.connected:
            return result
        said = result.joined_text[:500]
        _log.warning(
            "MCP server %r went away during a call (restarted on the next one): %s",
            owner.server_id,
            said,
        )
        self._forward.server_gone(owner.server_id)
        return ToolResult.error(f"MCP server {owner.server_id!r} went away: {said}")

    async def _start_round(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        scope: CallScope,
        call: ToolCall,
        owner: McpToolBridge | None,
    ) -> dict[str, Any] | types.InputRequiredResult:
        """Run a 2026-07-28 client's call apart; the first answer of the call.

        The call runs in the gateway's nursery, so its approvals and its
        server's questions can go to the client as ``input_required`` while it
        waits for the retry (it is never run again).
        """
        round_ = Round(
            owner=_round_owner(scope.client, params),
            timeout_s=self._parked.ttl_s,
            call=scope,
            expired=self._round_expired,
        )
        scope.round = round_
        assert self._nursery is not None  # set by open_gateway

        async def run() -> None:
            result: Any = None
            try:
                with round_.scope:
                    result = await self._execute(ctx, scope, call, owner, None)
            except Exception as exc:  # the waiting request's error, as it would be in-line
                result = exc
            finally:
                if result is None:  # cancelled: the client went away, or the gateway closed
                    result = call_tool_result_json(
                        ToolResult.error("cancelled: the client disconnected"),
                        any_structured=False,
                    )
                round_.finish(result)

        self._nursery.start_soon(run)
        return await self._wait_round(ctx, round_)

    async def _resume_round(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        client: str,
        state: str,
    ) -> dict[str, Any] | types.InputRequiredResult:
        """A retry answering the questions of a call that waits (see :meth:`_start_round`)."""
        try:
            if not state.startswith(ROUND_STATE_PREFIX):
                raise StaleStateError("its question is unknown or was answered already")
            nonce = state[len(ROUND_STATE_PREFIX) :]
            round_: Round = self._parked.take(nonce, _round_owner(client, params))
        except StaleStateError as exc:
            reason = (
                f"the request state is not applied: {exc} (a call's questions are answered "
                "once, by the client that made it, in a retry of that same call); call again "
                "without it"
            )
            _log.warning("refused a retry of %s: %s", client, exc)
            self._record_refused(ctx, params, reason, "permission_denied")
            return call_tool_result_json(ToolResult.error(reason), any_structured=False)
        waiting = round_.call
        if waiting is not None:  # its log messages and progress go with this request now
            waiting.session = ctx.session
            waiting.request_id = ctx.request_id
            waiting.progress = ctx.session if _wants_progress(ctx) else None
        round_.answer(params.input_responses)
        return await self._wait_round(ctx, round_)

    async def _wait_round(
        self, ctx: ServerRequestContext[Any, Any], round_: Round
    ) -> dict[str, Any] | types.InputRequiredResult:
        """Wait for the call's next word: its result, or questions (then the call is parked)."""
        key = _call_key(ctx)
        if key is not None:  # over HTTP: dropping this request's connection ends the call
            self._running[key] = round_.scope
        try:
            asked = await round_.next()
        except trio.Cancelled:  # this request was cancelled: so is the call
            round_.scope.cancel()
            raise
        finally:
            if key is not None and self._running.get(key) is round_.scope:
                del self._running[key]
            waiting = round_.call
            if waiting is not None and waiting.session is ctx.session:
                waiting.progress = None  # this request is answered: no progress after it
        if asked is None:
            result = round_.result
            if isinstance(result, Exception):
                raise result
            return cast("dict[str, Any] | types.InputRequiredResult", result)
        waiting = round_.call
        assert isinstance(waiting, CallScope)
        nonce = round_.nonce = self._parked.open(round_.owner, round_, principal_of(waiting.client))
        return types.InputRequiredResult.model_validate(
            {
                "resultType": "input_required",
                "inputRequests": asked,
                "requestState": ROUND_STATE_PREFIX + nonce,
            }
        )

    def _round_expired(self, round_: Round) -> None:
        """A waiting call's question was not answered within ``question_ttl_s``: end it."""
        if round_.nonce is None or not self._parked.expire(round_.nonce):
            # not parked now (asked while its questions were out): ended all the same
            self._evicted(round_, "expired", self._parked.reason("expired"))

    def _evicted(self, value: object, why: Eviction, reason: str) -> None:
        """End a waiting call whose question was closed unanswered, and record it.

        The record (tool ``prism:question``, event ``evicted``) names the call's
        principal, session and call, and ``why``; the call itself ends as
        cancelled with ``reason`` (its own ledger record), and its client's
        retry is told the reason.
        """
        if not isinstance(value, Round) or value.abort.signal.aborted:
            return
        waiting = value.call
        assert isinstance(waiting, CallScope)
        call_id = waiting.call_id or "-"
        _log.warning("ended the waiting call %s: %s", call_id, reason)
        self._record_question(
            waiting.client,
            {"event": "evicted", "why": why},
            {"call": shown(call_id), "tool": waiting.tool_name},
            reason,
        )
        value.abort.abort(reason)

    def _unanswered_capped(self, server_id: str, client: str, calls: int, cap_s: float) -> None:
        """Record that ``client``'s calls ended unanswered on ``server_id`` reached the cap.

        The record (tool ``prism:question``, event ``unanswered``) names the
        server, the client's principal and session, and how many calls.
        """
        counted = "more than 64" if calls < 0 else str(calls)
        reason = (
            f"MCP server {server_id!r} did not answer {counted} call(s) of this client that "
            f"ended before it answered, within unanswered_call_s ({cap_s:g} s), nor did its "
            "session end: its requests that do not say which call they are for may go to "
            "other clients again"
        )
        self._record_question(
            client, {"event": "unanswered", "server": server_id}, {"calls": calls}, reason
        )

    def _record_question(
        self,
        client: str,
        head: dict[str, object],
        tail: dict[str, object],
        reason: str,
    ) -> None:
        """Write a ``prism:question`` record about ``client``'s calls, if there is a ledger.

        Its arguments are ``head``, then the client's principal and session, then ``tail``.
        """
        ledger = self._options.ledger
        if ledger is None:
            return
        principal, _, rest = client.partition("/")
        arguments = {
            **head,
            "principal": shown(principal),
            "session": rest.rpartition("/")[2][:16],
            **tail,
        }
        now = time.time()
        with contextlib.suppress(Exception):  # the ledger reports its own failures
            ledger.record_call(
                FinishedCall(
                    call_id=f"{principal}/question/{next(self._seq)}",
                    tool_name=QUESTION_TOOL,
                    arguments=arguments,
                    status="ok",
                    blocked_reason=None,
                    started_at=now,
                    finished_at=now,
                    duration_s=0.0,
                    result=ToolResult.text(reason),
                    arguments_owned=True,
                )
            )

    def _record_refused(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        unavailable: str | None,
        blocked: BlockedReason = "unknown_tool",
    ) -> None:
        """Record a refused call (an unknown tool, a server not up, a stale state) as blocked."""
        ledger = self._options.ledger
        if ledger is None:
            return
        reason = unavailable or f"unknown tool: {clip(repr(params.name), NAME_LIMIT)}"
        now = time.time()
        with contextlib.suppress(Exception):  # the ledger reports its own failures
            ledger.record_call(
                FinishedCall(
                    call_id=f"{client_label(ctx)}#{next(self._seq)}",
                    tool_name=clip(params.name, NAME_LIMIT),
                    arguments=params.arguments if params.arguments is not None else {},
                    status="blocked",
                    blocked_reason=blocked,
                    started_at=now,
                    finished_at=now,
                    duration_s=0.0,
                    result=ToolResult.error(reason),
                )
            )

    def _fair_share(self, share: _ClientSlot) -> int:
        """A client's share of ``max_waiting_calls`` among the clients with calls waiting.

        Past the gateway-wide cap a client's call may still wait while the
        client has fewer waiting than its share (so one principal's many
        sessions filling the cap never lock every other client out); the
        calls waiting stay under about twice the cap.
        """
        clients = self._clients_waiting + (share.waiting == 0)  # this one among them
        return max(1, self._max_waiting_all // clients)

    def _refuse_waiting(
        self, ctx: ServerRequestContext[Any, Any], call: ToolCall, *, everyone: bool
    ) -> NoReturn:
        """Refuse ``call``: too many calls wait (its client's, or with ``everyone`` all).

        Its client has ``max_waiting_calls_per_client`` calls waiting, or the
        gateway's clients have ``max_waiting_calls`` in all. Recorded as blocked
        (``tool_denied``), and answered with a JSON-RPC error.
        """
        if everyone:
            reason = (
                f"too many calls waiting: the gateway has {self._max_waiting_all} calls of "
                "its clients waiting for their turn (max_waiting_calls), and this client its "
                "share of them; call again when one has ended"
            )
        else:
            reason = (
                f"too many calls waiting: this client has {self._max_waiting} calls waiting "
                "for their turn (max_waiting_calls_per_client); call again when one has ended"
            )
        _log.warning("refused a call of %s: %s", client_label(ctx), reason)
        ledger = self._options.ledger
        if ledger is not None:
            now = time.time()
            with contextlib.suppress(Exception):  # the ledger reports its own failures
                ledger.record_call(
                    FinishedCall(
                        call_id=call.id,
                        tool_name=call.name,
                        arguments=call.arguments,
                        status="blocked",
                        blocked_reason="tool_denied",
                        started_at=now,
                        finished_at=now,
                        duration_s=0.0,
                        result=ToolResult.error(reason),
                    )
                )
        raise MCPError(CALLS_WAITING_ERROR, reason)

    def _options_for(self, client: str) -> DispatchOptions:
        """The dispatch options of ``client``'s calls (its label in their metadata)."""
        options = self._client_options.get(client)
        if options is None:
            if len(self._client_options) >= _OPTIONS_CACHE:
                self._client_options.clear()
            options = self._client_options[client] = attrs.evolve(
                self._options, on_event=self._on_event, metadata={"client": client}
            )
        return options

    async def _dispatch_with_progress(
        self, scope: CallScope, call: ToolCall, client: str
    ) -> ToolResult:
        send, receive = trio.open_memory_channel[ToolExecutionProgress](_PROGRESS_BACKLOG)
        user_events = self._on_event

        def sink(event: AgentEvent) -> None:
            if isinstance(event, ToolExecutionProgress):
                with contextlib.suppress(trio.WouldBlock, trio.ClosedResourceError):
                    send.send_nowait(event)
            if user_events is not None:
                user_events(event)

        round_ = scope.round
        options = attrs.evolve(
            self._options,
            on_event=sink,
            metadata={"client": client},
            # a waiting call whose question is closed unanswered is ended by its round
            signal=round_.abort.signal if round_ is not None else None,
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_forward_progress, scope, receive)
            with send:
                return await dispatch_tool_call(call, options)

    def _client_slot(self, client: str) -> _ClientSlot:
        slot = self._per_client.get(client)
        if slot is None:
            slot = self._per_client[client] = _ClientSlot(
                client, trio.CapacityLimiter(self._per_client_limit), self._per_client
            )
        return slot

    def session_ended(self, session_id: str) -> None:
        """The HTTP session ``session_id`` is over: forget what was kept for its calls."""
        self._forward.session_ended(f"/{_whole(session_id)}")

    def client_gone(self, key: object) -> None:
        """Cancel the call whose HTTP request the guard marked with ``key`` (``prism.call``).

        The HTTP guard calls this when the client drops the connection that
        waits for the call's result: without an event store the result could
        never reach it, so the call (and any process tree it runs) ends. The
        key is the guard's own object for that one request, so no client can
        name another's call.
        """
        running = self._running.get(key)
        if running is not None:
            running.cancel()

    async def _watch(self, bridge: McpToolBridge) -> None:
        # When the last few re-listings were: a server that announces a change after
        # every listing is re-listed at most _RELISTS times per _RELIST_WINDOW_S (the
        # bridge's own budget of three, then stale, is undone by a refresh()).
        recent: collections.deque[float] = collections.deque(maxlen=_RELISTS)
        while True:
            await bridge.wait_stale()
            if len(recent) == _RELISTS:
                wait = recent[0] + _RELIST_WINDOW_S - trio.current_time()
                if wait > 0:
                    _log.warning(
                        "MCP server %s keeps changing its tool list: re-listed %d times in "
                        "%gs; the next re-listing waits %.1fs",
                        bridge.server_id,
                        _RELISTS,
                        _RELIST_WINDOW_S,
                        wait,
                    )
                    await trio.sleep(wait)
            recent.append(trio.current_time())
            try:
                await bridge.refresh()
            except Exception as exc:  # a server that cannot be listed keeps its old tools
                _log.warning("cannot refresh MCP server %s: %s", bridge.server_id, exc)
                await trio.sleep(1.0)
                continue
            offered = self._wire
            try:
                self._rebuild()
            except Exception as exc:  # e.g. a new tool's alias collides: keep the old list
                _log.warning("cannot offer MCP server %s's new tools: %s", bridge.server_id, exc)
                continue
            if self._wire != offered:
                await self.notify_tools_changed()

    async def notify_tools_changed(self) -> None:
        """Tell every connected client that the tool list changed.

        Clients of the 2025-11-25 era get ``notifications/tools/list_changed``
        on their standalone channel; 2026-07-28 clients get it on their
        ``subscriptions/listen`` streams. Checkpoints; a client that cannot be
        reached is skipped. Cancellation stops the round.
        """
        with contextlib.suppress(Exception):
            await self._bus.publish(ToolsListChanged())
        for connection in list(self._connections):
            with contextlib.suppress(Exception):
                await connection.send_tool_list_changed()


def _tool_call(
    call_id: str, name: str, params: types.CallToolRequestParams, parsed: ParsedJson | None
) -> ToolCall:
    """The call a ``tools/call`` asks for (``parsed``: its arguments as parsed from its text)."""
    if parsed is not None and params.arguments is not None and type(parsed.value) is dict:
        # The same request's arguments, parsed from the request's text: the
        # call keeps what the text proves (no walk to validate it).
        return ToolCall.from_parsed(id=call_id, name=name, arguments=parsed)
    return ToolCall(
        id=call_id, name=name, arguments=params.arguments if params.arguments is not None else {}
    )


def _at_once(options: DispatchOptions) -> bool:
    """Whether a dispatch with ``options`` begins at once (``begin_tool_call``, no task).

    Nothing but the gates around the tool, and no gate that is a coroutine
    function (its check would wait).
    """
    middleware = options.middleware
    permission = options.permission
    validator = options.validator
    return (
        options.signal is None
        and options.tracer is None
        and (middleware is None or not (middleware.call_hooks or middleware.result_hooks))
        and (permission is None or not inspect.iscoroutinefunction(permission.check))
        and (
            validator is None
            or not (
                inspect.iscoroutinefunction(validator)
                or inspect.iscoroutinefunction(getattr(validator, "__call__", None))  # noqa: B004
            )
        )
    )


def _may_be_asked(caps: Any) -> bool:
    """Whether a client that declared ``caps`` declared one its call's server may ask through."""
    return caps is not None and any(
        getattr(caps, name, None) is not None for name in ("elicitation", "sampling", "roots")
    )


def _may_be_approved(caps: Any) -> bool:
    """Whether a client that declared ``caps`` declared elicitation (approvals ask through it)."""
    return declares_elicitation(caps, "form")


def _round_owner(client: str, params: types.CallToolRequestParams) -> str:
    """Whose call a waiting call is: the client (principal, name, session), tool, arguments."""
    bound = json.dumps(
        [client, params.name, params.arguments], sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(bound.encode("utf-8", "surrogatepass")).hexdigest()


def _alias_prefix(server_id: str) -> str:
    """The provider-safe prefix of server ``server_id``'s tool names (``mcp__<id>__``)."""
    return provider_safe_name(f"mcp:{server_id}:x")[:-1]


def _reason(exc: BaseException) -> str:
    """An exception (a group's first leaf) in a few words."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    said = getattr(exc, "reason", None) if isinstance(exc, McpBridgeError) else None
    text = said if isinstance(said, str) else (str(exc) or type(exc).__name__)
    return text if len(text) <= 500 else text[:499] + "…"


def _meta(ctx: ServerRequestContext[Any, Any]) -> Mapping[str, Any] | None:
    """The request's ``_meta``, if it is a JSON object."""
    params = ctx.params
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return meta if isinstance(meta, Mapping) else None


def _wants_progress(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client asked for progress on this request (``_meta.progressToken``)."""
    meta = _meta(ctx)
    return meta is not None and meta.get("progressToken") is not None


async def _forward_progress(
    scope: CallScope, receive: trio.MemoryReceiveChannel[ToolExecutionProgress]
) -> None:
    """Send the call's progress to the request waiting for it (``scope.progress``), if any.

    A waiting call's retry brings a progress token of its own: what the call
    reports after the retry goes with it. The numbers rise over the whole call,
    so they rise for each token too.
    """
    last = 0.0
    async with receive:
        async for event in receive:
            session = scope.progress
            if session is None:  # no request waiting for the call asked for progress
                continue
            progress = event.progress
            if progress is None or not math.isfinite(progress) or progress <= last:
                progress = last + 1.0
            last = progress
            total = event.total
            if total is not None and not math.isfinite(total):
                total = None  # no JSON form (it went out as null, which the schema refuses)
            message = event.message
            if message is not None and has_lone_surrogate(message):
                message = None  # no answer can carry it: the progress goes without it
            with contextlib.suppress(Exception):
                await session.report_progress(progress, total, message)


def _items(value: object) -> object:
    """An iterable (not a string) as a tuple; anything else as given, to be refused."""
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        return tuple(value)
    return value


_OWNER = "open_gateway"
_LIMIT = integer(minimum=1)
_HINTS = OptionCheck(
    "a mapping of tool names to ToolHints",
    lambda value: (
        isinstance(value, Mapping)
        and all(isinstance(k, str) and isinstance(v, ToolHints) for k, v in value.items())
    ),
)
_CHECKS: dict[str, OptionCheck] = {
    "tools": sequence_of(instance_of(ToolDefinition)),
    "bridges": sequence_of(instance_of(McpToolBridge)),
    "servers": sequence_of(instance_of(DownstreamServer)),
    "permission": optional(has_method("check", description="a PermissionPolicy")),
    "validator": optional(callable_value()),
    "filters": sequence_of(instance_of(ToolFilter)),
    "middleware": optional(instance_of(MiddlewareRegistry)),
    "on_event": optional(callable_value()),
    "ledger": optional(has_method("record_call", description="a RunLedger (record_call())")),
    "hints": optional(_HINTS),
    "max_concurrent_calls": _LIMIT,
    "max_calls_per_client": _LIMIT,
    "max_waiting_calls_per_client": _LIMIT,
    "max_waiting_calls": _LIMIT,
    "question_ttl_s": number(minimum=1.0, maximum=7 * 24 * 3600.0),
    "unanswered_call_s": number(minimum=1.0, maximum=7 * 24 * 3600.0),
    "roots": sequence_of(
        OptionCheck(
            "an absolute path or file:// URI",
            lambda value: (
                isinstance(value, str) and (value.startswith("file://") or os.path.isabs(value))
            ),
        )
    ),
}


@contextlib.asynccontextmanager
async def open_gateway(
    *,
    tools: Iterable[ToolDefinition] = (),
    bridges: Sequence[McpToolBridge] = (),
    servers: Sequence[DownstreamServer] = (),
    permission: PermissionPolicy | None = None,
    validator: ToolValidator | None = None,
    filters: Sequence[ToolFilter] = (),
    middleware: MiddlewareRegistry | None = None,
    on_event: EventSink | None = None,
    ledger: RunLedger | None = None,
    hints: Mapping[str, ToolHints] | None = None,
    max_concurrent_calls: int = 32,
    max_calls_per_client: int = 8,
    max_waiting_calls_per_client: int = 64,
    max_waiting_calls: int = 1024,
    roots: Sequence[str] = (),
    question_ttl_s: float = QUESTION_TTL_S,
    unanswered_call_s: float = UNANSWERED_CALL_S,
) -> AsyncIterator[Gateway]:
    """Build a gateway over ``tools``, the tools of ``bridges`` and of ``servers``, gated.

    ``bridges`` are open already; ``servers`` are started here, in parallel
    and in the background: the gateway serves at once, and each server's
    tools are offered (clients get ``notifications/tools/list_changed``) as
    soon as it is up. A server that does not start is reported (logged on
    ``prism.gateway``; :meth:`Gateway.server_status`) and its tools answer
    with an error naming it and why, while every other tool serves. Only the
    servers marked ``required`` are waited for before the block is entered.

    ``hints`` gives annotations for local tools by registry name (for the
    coding tools, :data:`CODING_TOOL_HINTS`); bridged tools carry their
    server's hints and output schemas. At most ``max_concurrent_calls`` calls
    run at once, at most ``max_calls_per_client`` of them for one client (its
    principal and session over HTTP, its connection otherwise; never the name
    it declares); the rest wait their turn, holding none of the gateway's
    slots, at most ``max_waiting_calls_per_client`` of one client and
    ``max_waiting_calls`` of all clients (past it, a client still under its
    share of it may add one): one more is refused at once with a JSON-RPC
    error (code -32029) and recorded in the ledger as blocked
    (``tool_denied``). While the block is open, a bridge
    that announces a tool-list change is re-listed and connected clients are
    told.
    Serve the gateway with :func:`serve_stdio` or :func:`serve_http`.

    A downstream server's requests are forwarded to the client whose call
    it sent them for (elicitation, sampling, ``roots/list``, log messages),
    when the client declared the capability; ``roots`` (absolute paths or
    ``file://`` URIs) answer a ``roots/list`` no client can answer. A
    2026-07-28 client, which cannot be sent a request mid-call, gets such a
    question (and the gateway's own approval question) as an
    ``input_required`` result; its call waits in the gateway for the retry
    that answers it, at most ``question_ttl_s`` seconds (600 by default). A
    call whose question expires, or is pushed out by the caps on waiting
    questions, ends cancelled with the reason, and the ledger records why
    (tool ``prism:question``).

    A server that cannot say which call a request is for (a stdio pipe)
    has it put to a client only when no other client's call may still run
    there. A call that ended before its server answered it (cancelled,
    timed out) still counts until the server answers it (late), the
    session that carried it ends, or ``unanswered_call_s`` seconds after
    its client's latest such call (120 by default; reaching it is
    recorded in the ledger, tool ``prism:question``, event ``unanswered``).

    Cancellation: leaving the block stops watching the bridges; the bridges
    themselves belong to the caller.

    Raises:
        ConfigurationError: an option of the wrong type, or a limit below 1
            (the message names the option and the value).
        GatewayConfigurationError: two tools share a name or a provider-safe
            alias.
        GatewayError: a ``required`` server did not start.
    """
    given = {
        "tools": _items(tools),
        "bridges": _items(bridges),
        "servers": _items(servers),
        "permission": permission,
        "validator": validator,
        "filters": _items(filters),
        "middleware": middleware,
        "on_event": on_event,
        "ledger": ledger,
        "hints": hints,
        "max_concurrent_calls": max_concurrent_calls,
        "max_calls_per_client": max_calls_per_client,
        "max_waiting_calls_per_client": max_waiting_calls_per_client,
        "max_waiting_calls": max_waiting_calls,
        "roots": _items(roots),
        "question_ttl_s": question_ttl_s,
        "unanswered_call_s": unanswered_call_s,
    }
    for option, value in given.items():
        _CHECKS[option].check(_OWNER, option, value)
    options = DispatchOptions(
        registry=create_tool_registry(),
        permission=permission,
        validator=validator,
        middleware=middleware,
        ledger=ledger,
        # Its OTel sink's execute_tool spans are current while calls run, in the client's trace.
        tracer=ledger.tracer if isinstance(ledger, RunLedger) else None,
    )
    downstream = cast("tuple[DownstreamServer, ...]", given["servers"])
    ids = [server.server_id for server in downstream]
    twice = sorted({sid for sid in ids if ids.count(sid) > 1})
    if twice:
        raise ConfigurationError(
            f"open_gateway.servers: two servers share the id {twice[0]!r}",
            option="open_gateway.servers",
            value=ids,
        )
    gateway = Gateway(
        local=cast("tuple[ToolDefinition, ...]", given["tools"]),
        bridges=list(cast("tuple[McpToolBridge, ...]", given["bridges"])),
        filters=cast("tuple[ToolFilter, ...]", given["filters"]),
        options=options,
        hints=dict(hints or {}),
        on_event=on_event,
        limiter=trio.CapacityLimiter(max_concurrent_calls),
        per_client_limit=max_calls_per_client,
        max_waiting=max_waiting_calls_per_client,
        max_waiting_all=max_waiting_calls,
        forward=Forwarder(
            roots=cast("tuple[str, ...]", given["roots"]),
            unanswered_call_s=unanswered_call_s,
            url_ttl_s=question_ttl_s,
        ),
        parked=OpenQuestions(ttl_s=question_ttl_s),
    )
    gateway._servers.update((server.server_id, ServerState(server)) for server in downstream)
    gateway._forward.on_capped = gateway._unanswered_capped
    async with trio.open_nursery() as nursery:
        gateway._nursery = nursery
        for bridge in gateway._bridges:
            nursery.start_soon(gateway._watch, bridge)
        for state in gateway._servers.values():
            nursery.start_soon(gateway._run_server, state)
        if gateway._servers:
            nursery.start_soon(gateway._forward.send_logs)
            nursery.start_soon(gateway._forward.expire_unanswered)
        try:
            failed = await gateway._wait_required()
            if failed is None:
                yield gateway
        finally:
            gateway._listen.close()
            nursery.cancel_scope.cancel()
    if failed is not None:
        raise failed


class _Inline:
    """A bridged call begun by :meth:`Gateway._begin_inline`: its parts, and how it ends.

    Ended once: by :meth:`done` (the bridge's result, from the server pipe's
    reader or a task of the bridge), or by :meth:`abort` (the client
    cancelled it, or serving ended: unanswered, recorded as cancelled).
    What could not run at once (a gate that awaits, a bridge that cannot
    write the request now) runs in a task of the connection (:meth:`later`).
    """

    __slots__ = (
        "_answer",
        "_gateway",
        "_later",
        "_over",
        "_owner",
        "_share",
        "_slots",
        "started",
        "ticket",
    )

    def __init__(
        self,
        gateway: Gateway,
        owner: McpToolBridge,
        answer: InlineCall,
        share: _ClientSlot,
        slots: CallSlots,
    ) -> None:
        self._gateway = gateway
        self._owner = owner
        self._answer = answer
        self._share = share
        self._slots = slots
        self.ticket: CallTicket | None = None
        self.started: McpStartedCall | None = None
        self._later: trio.CancelScope | None = None
        self._over = False

    def done(self, result: ToolResult) -> None:
        """The bridge's result: the call's record, then its answer."""
        if self._over:
            return
        ticket = self.ticket
        assert ticket is not None
        finish_tool_call(ticket, result)
        self._end(result)

    def _end(self, result: ToolResult) -> None:
        """The call is over (recorded): its slots given back, its answer written."""
        self._over = True
        self._slots.close()
        self._share._leave()
        result = self._gateway._server_went_away(self._owner, result)
        self._answer.answer(call_tool_result_json(result, any_structured=self._answer.modern))

    def abort(self) -> None:
        """End the call unanswered (the client cancelled it, or serving ended)."""
        if self._over:
            return
        self._over = True
        if self._later is not None:  # (that task records the call)
            self._later.cancel()
        else:
            if self.started is not None:
                self.started.cancel()
            if self.ticket is not None:
                finish_tool_call(self.ticket, None)
        self._slots.close()
        self._share._leave()

    def later(
        self, call: ToolCall, options: DispatchOptions, ticket: CallTicket | ToolResult | None
    ) -> None:
        """Go on with what could not run at once: a refusal answered now, the rest in a task."""
        if isinstance(ticket, ToolResult):  # refused by a gate (recorded)
            self._end(ticket)
            return
        self._later = trio.CancelScope()
        self._answer.start_soon(self._run_later, call, options, ticket)

    async def _run_later(
        self, call: ToolCall, options: DispatchOptions, ticket: CallTicket | None
    ) -> None:
        scope = self._later
        assert scope is not None
        result: ToolResult | None = None
        with scope:
            if ticket is None:  # (options that do not begin at once: dispatched whole)
                result = await dispatch_tool_call(call, options)
            else:
                self.ticket = ticket
                if ticket.waiting:
                    result = await ticket.pass_gates()  # (a refusal: recorded)
                if result is None:
                    result = await self._execute(ticket)
        if result is None or self._over:
            return  # aborted (recorded as cancelled by whoever ran)
        self._later = None
        self._end(result)

    async def _execute(self, ticket: CallTicket) -> ToolResult | None:
        """The bridge's call of a ticket: started (its result to :meth:`done`), else executed."""
        assert ticket.tool is not None
        assert ticket.arguments is not None
        started = self._owner.start_call(ticket.tool, ticket.arguments, ticket.context, self.done)
        if started is not None:
            self._later = None
            self.started = started
            return None
        try:
            result = await ticket.tool.execute(ticket.arguments, ticket.context)
        except trio.Cancelled:
            finish_tool_call(ticket, None)
            raise
        except Exception as exc:  # (the bridge's execute gives every failure as a result)
            result = ToolResult.error(f"tool {ticket.tool.name} failed: {describe_exception(exc)}")
        finish_tool_call(ticket, result)
        return result
