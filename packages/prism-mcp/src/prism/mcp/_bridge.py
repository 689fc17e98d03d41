"""The MCP tool bridge: one server's tools as gated Prism tools.

The bridge keeps the listing (and whether it is stale); sessions live in
``_session``, listing and pins in ``_listing``, calls in ``_calls`` and the
options in ``_options``.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from prism.core import (
    JsonObject,
    ToolDefinition,
    ToolResult,
    provider_safe_name,
    require_trio,
    trio_native,
)

from ._annotations import McpApprovalCallback, McpToolInfo, SharedParts
from ._calls import Caller, McpStartedCall
from ._errors import McpBridgeError
from ._gate import CHECKPOINT_TOOLS
from ._listing import Listing, Pins, PreparedTool, list_tools, prepare_tool
from ._options import BridgeOptions, ProtocolMode, bridge_options
from ._output import OutputChecker, load_validator
from ._session import Connection, McpServerInfo, Sessions

if TYPE_CHECKING:
    import os
    from collections.abc import AsyncIterator, Callable, Sequence

    from mcp import Client
    from prism.core import ToolExecutionContext

    from ._callbacks import (
        McpElicitationCompleteCallback,
        McpElicitCallback,
        McpLogCallback,
        McpRootsCallback,
        McpSampleCallback,
    )
    from ._transports import StdioTransport, StreamableHttpTransport

__all__ = ["McpToolBridge", "open_mcp_tools"]

_log = logging.getLogger("prism.mcp")

_MAX_RECHECKS = 3


_PREPARE_ON_THREAD = 65536
_PREPARE_ALL_ON_THREAD = 256
"""A listing of more tools than this is prepared on a worker thread, in one hop."""


def _prepare_all(
    options: BridgeOptions, tools: list[Any], listing: Listing, hashes: SharedParts
) -> list[PreparedTool | None]:
    """Each of ``tools`` prepared (see ``prepare_tool``), with its listing's text."""
    return [
        prepare_tool(options, tool, hashes, entry[0] if type(entry) is tuple else None)
        for tool, entry in zip(tools, listing, strict=False)
    ]


"""A tool whose JSON is longer than this is prepared on a worker thread."""


@attrs.define(eq=False)
class McpToolBridge:
    """One MCP server's tools, ready to register and dispatch like local tools.

    Get one from :func:`open_mcp_tools`; it is valid inside that ``async with``.
    Each tool in :attr:`tools` forwards its call to the server with the
    bridge's deadlines and byte limit; failures become error results.
    """

    _options: BridgeOptions = attrs.field(alias="options")
    _nursery: trio.Nursery = attrs.field(alias="nursery")
    _tools: tuple[ToolDefinition, ...] = ()
    _info: dict[str, McpToolInfo] = attrs.field(factory=dict)
    # Each tool's definition as last offered while it matched its pin (its parts,
    # and what the model was offered): a changed tool is offered so until accepted.
    # An unchanged tool's is its info's parts and its definition (see _offer); only
    # a changed tool's is kept here, so a listing keeps no object per tool for it.
    _kept: dict[str, tuple[Mapping[str, str], ToolDefinition]] = attrs.field(factory=dict)
    _by_name: dict[str, ToolDefinition] = attrs.field(factory=dict)
    _pins: Pins = attrs.field(init=False)
    _sessions: Sessions = attrs.field(init=False)
    _caller: Caller = attrs.field(init=False)
    _listing: Listing = ()
    _listed_at: float = -math.inf
    _stale: bool = False
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _listing_lock: trio.Lock = attrs.field(factory=trio.Lock)
    _verifying: bool = False
    _verified: trio.Event = attrs.field(factory=trio.Event)
    _recheck: bool = False
    # Re-listings after announcements since the last listing the bridge made its own,
    # counted across verification tasks: a server that announces after every listing
    # gets at most _MAX_RECHECKS of them, then the bridge is stale until refresh().
    _rechecks: int = 0

    def __attrs_post_init__(self) -> None:
        options = self._options
        self._pins = Pins(options)
        self._sessions = Sessions(
            options, self._nursery, on_announce=self._announced, on_reconnect=self._reconnected
        )
        self._caller = Caller(options, self._sessions, OutputChecker())

    @property
    def server_id(self) -> str:
        """The ``server_id`` this bridge was opened with."""
        return self._options.server_id

    @property
    def tools(self) -> tuple[ToolDefinition, ...]:
        """The server's tools as of the last listing; ``parameters`` is each ``inputSchema``."""
        return self._tools

    @property
    def tool_info(self) -> Mapping[str, McpToolInfo]:
        """What the server said about each tool in :attr:`tools`, by Prism tool name.

        Titles, annotations (untrusted hints), output schemas and the hash of each
        definition; :func:`create_mcp_permission_policy` reads it.
        """
        return self._info

    @property
    def stale(self) -> bool:
        """Whether the listing may be out of date; :meth:`refresh` re-lists and clears it.

        True once the server said its tool list changed (on either protocol era),
        or once the listing is older than ``list_cache_ttl_s``.
        """
        expired = trio.current_time() - self._listed_at > self._options.list_cache_ttl_s
        return self._stale or expired

    @property
    def server_info(self) -> McpServerInfo | None:
        """The server's name and version as of the latest session, if it gave them."""
        conn = self._sessions.current
        return conn.server_info if conn is not None else None

    @property
    def protocol_version(self) -> str | None:
        """The MCP protocol version negotiated by the latest session."""
        conn = self._sessions.current
        return conn.protocol_version if conn is not None else None

    @property
    def server_pid(self) -> int | None:
        """The stdio server's process id while a session is live (``None`` over HTTP)."""
        conn = self._sessions.current
        return conn.state.pid if conn is not None and conn.alive else None

    @property
    def refused_server_requests(self) -> int:
        """Server-to-client requests the latest session refused (over ``max_server_requests``)."""
        conn = self._sessions.current
        return conn.state.refused_requests if conn is not None else 0

    def unanswered(self, call_id: str) -> bool:
        """Whether the server may still be running the tool call ``call_id`` it was sent.

        ``call_id`` is the call's ``ToolCall.id``. True while the live
        session holds a ``tools/call`` of that call the server has not
        answered, also after the caller gave up on it (cancelled, timed out:
        a server may run on, and ask for it, after a cancellation), or a task
        it became that the server has not said is over. False once the server
        answered it (an answer after the caller left counts), and once the
        session that carried it ended (the server's process exited, the
        session closed or was replaced). Past a few thousand requests never
        answered on one session, every call counts as unanswered.
        """
        conn = self._sessions.current
        return (
            conn is not None
            and conn.alive
            and not self._sessions.closed
            and conn.state.sent.unanswered(call_id)
        )

    @property
    def connected(self) -> bool:
        """Whether a session is live now (a call reconnects when it is not)."""
        conn = self._sessions.current
        return conn is not None and conn.alive

    async def wait_stale(self) -> None:
        """Wait until the server's tool list is known to differ from :attr:`tools`.

        Returns at once if that happened since the last listing. The age limit
        (``list_cache_ttl_s``) does not wake it. Checkpoints; cancellation just
        stops the wait.
        """
        await self._changed.wait()

    def _announced(self, conn: Connection) -> None:
        # A retired session's news is old; the current one's (or the one still
        # connecting, whose listing is yet to come) counts.
        if conn.stop.is_set() or self._sessions.closed:
            return
        _log.debug("MCP server %s announced a tool list change", self._options.server_id)
        if self._stale:
            # Already stale: nothing to check until refresh() lists again.
            return
        # An announcement is checked against our listing before it marks us stale:
        # server-everything announces a change right after initialize, which the
        # bridge's first listing may already include.
        if self._verifying:
            self._recheck = True
            return
        self._verifying = True
        self._verified = trio.Event()
        self._nursery.start_soon(self._verify_change, conn)

    async def _verify_change(self, conn: Connection) -> None:
        try:
            while self._rechecks < _MAX_RECHECKS:
                self._rechecks += 1
                self._recheck = False
                async with self._listing_lock:
                    client = conn.client
                    if conn.stop.is_set() or client is None or not conn.alive:
                        return
                    try:
                        _, listing = await list_tools(
                            self._options, conn, client, self._options.call_timeout_s
                        )
                    except McpBridgeError:
                        _log.debug("listing after an announcement failed", exc_info=True)
                        self._mark_changed(conn)
                        return
                    if listing != self._listing:
                        self._mark_changed(conn)
                        return
                if not self._recheck:
                    _log.debug(
                        "MCP server %s: the announced change is already in the listing",
                        self._options.server_id,
                    )
                    return
            # Announcements keep coming: say stale rather than list forever.
            _log.warning(
                "MCP server %s keeps announcing tool list changes; the bridge is stale "
                "until refresh()",
                self._options.server_id,
            )
            self._mark_changed(conn)
        finally:
            self._verifying = False
            self._verified.set()

    async def _settle(self, limit_s: float) -> None:
        """Let an announcement that came in during the first listing be checked."""
        await trio.lowlevel.checkpoint()
        if self._verifying:
            with trio.move_on_after(limit_s):
                await self._verified.wait()

    def _mark_changed(self, conn: Connection) -> None:
        if conn.stop.is_set():
            return
        self._stale = True
        self._changed.set()

    def _clear_changed(self) -> None:
        self._stale = False
        if self._changed.is_set():
            self._changed = trio.Event()

    async def refresh(self) -> None:
        """Re-list the server's tools, replace :attr:`tools` and clear :attr:`stale`.

        Reconnects first if the session was closed. Calls already running keep
        the tool they started with. Each tool is checked against its pin (see
        ``pins_file`` and ``accept_change`` on :func:`open_mcp_tools`); the pins
        file is read again first, so a host accepts a change by writing it
        there. Checkpoints. Cancellation leaves the old listing in place.

        Raises:
            McpBridgeError: the bridge is closed, the server could not be
                reached or listed within ``connect_timeout_s`` / ``call_timeout_s``,
                or the pins file cannot be read.
        """
        conn = await self._sessions.connection()
        await self._relist(conn, self._options.call_timeout_s)

    async def aclose(self) -> None:
        """Close the session and stop the server; idempotent.

        Shielded and bounded: a stdio server gets its stdin closed, then
        SIGTERM, then SIGKILL for its whole process group. Calls still running
        get an error result.
        """
        await self._sessions.close()

    async def _reconnected(self, conn: Connection) -> None:
        # A new session: compare its listing with ours. Tools never change under
        # the caller; a difference marks stale.
        try:
            await self._relist(conn, self._options.call_timeout_s, replace=False)
        except McpBridgeError:
            _log.debug("relisting after reconnect failed", exc_info=True)

    async def _relist(self, conn: Connection, limit_s: float, *, replace: bool = True) -> None:
        client = conn.client
        if client is None or not conn.alive:
            raise McpBridgeError(self._options.server_id, "the session closed while listing")
        if not replace:
            # After a reconnect: the SDK learns the tools; ours stay, marked stale if different.
            _, listing = await list_tools(self._options, conn, client, limit_s)
            if listing != self._listing:
                self._mark_changed(conn)
            return
        async with self._listing_lock:
            await self._replace_listing(conn, client, limit_s)

    async def _replace_listing(self, conn: Connection, client: Client, limit_s: float) -> None:
        changed_before = self._stale
        # Cleared before listing; a change announced while the list is in flight is
        # checked against this listing once it is in place (the lock orders them).
        self._clear_changed()
        try:
            listed, listing = await list_tools(self._options, conn, client, limit_s)
        except BaseException:
            if changed_before:
                self._mark_changed(conn)
            raise
        self._rechecks = 0
        await self._pins.load()
        kept: dict[str, tuple[Mapping[str, str], ToolDefinition]] = {}
        pinned_any = False
        tools: dict[str, ToolDefinition] = {}
        infos: dict[str, McpToolInfo] = {}
        aliases: dict[str, str] = {}
        hashes = SharedParts()
        run = self._execute  # one bound method for every tool's partial
        ready: list[PreparedTool | None] | None = None
        if len(listed) > _PREPARE_ALL_ON_THREAD:
            # A long listing is prepared on a worker thread in one hop (as the
            # gate checked its page): the plain schemas, hashes and infos of
            # tools that share nothing cost the loop nothing.
            ready = await trio.to_thread.run_sync(
                _prepare_all, self._options, listed, listing, hashes
            )
        for index, tool in enumerate(listed):
            if index % CHECKPOINT_TOOLS == CHECKPOINT_TOOLS - 1:
                await trio.lowlevel.checkpoint()
            # Let go of the SDK's model once read (its schemas, when shared
            # with an earlier tool's, go with it).
            listed[index] = None
            entry = listing[index]
            # The gate's text of the tool but its free text: tools written the
            # same share the parts made from it.
            written = entry[0] if type(entry) is tuple else None
            if ready is not None:
                prepared = ready[index]
                ready[index] = None
            # (the written text stands for what preparing the tool walks and hashes)
            elif len(entry if written is None else written) > _PREPARE_ON_THREAD:
                # One large tool (its plain copy and hashes) would hold the loop:
                # prepared on a worker thread (nothing else uses this listing's hashes).
                prepared = await trio.to_thread.run_sync(
                    prepare_tool, self._options, tool, hashes, written
                )
            else:
                prepared = prepare_tool(self._options, tool, hashes, written)
            if prepared is None:
                continue
            if prepared.info.tool_name in tools:
                _log.warning("skipping a second MCP tool named %s", prepared.info.tool_name)
                continue
            # Two names of one listing offered to the model under one alias would
            # make every name map of the registry refuse it: the later one goes.
            alias = provider_safe_name(prepared.info.tool_name)
            first = aliases.setdefault(alias, prepared.info.tool_name)
            if first != prepared.info.tool_name:
                _log.warning(
                    "skipping MCP tool %s: it would be offered to the model as %s, like %s",
                    prepared.info.tool_name,
                    alias,
                    first,
                )
                continue
            settled = self._pins.settled(prepared.info)
            info, pinned = settled or await self._pins.check(prepared.info)
            pinned_any = pinned_any or pinned
            definition = self._definition(info, prepared, run)
            if info.changed:
                definition = self._accepted(info, definition)
                offer = self._offer(info.tool_name)
                if offer is not None:
                    kept[info.tool_name] = offer
            tools[info.tool_name] = definition
            infos[info.tool_name] = info
        if pinned_any:
            await self._pins.save()
        self._tools = tuple(tools.values())
        self._by_name = tools
        self._info = infos
        self._kept = kept
        self._listing = listing
        self._listed_at = trio.current_time()

    def _offer(self, name: str) -> tuple[Mapping[str, str], ToolDefinition] | None:
        """The parts and definition of tool ``name`` as last offered while it matched its pin.

        From the listing in place: a changed tool's kept offer, else an
        unchanged tool's own parts and definition; ``None`` when it was never
        offered so.
        """
        kept = self._kept.get(name)
        if kept is not None:
            return kept
        info = self._info.get(name)
        definition = self._by_name.get(name)
        if info is None or definition is None or info.changed:
            return None
        return info.definition_parts, definition

    def _accepted(self, info: McpToolInfo, definition: ToolDefinition) -> ToolDefinition:
        """``definition`` of a changed tool, offered as last accepted, never as changed.

        The new text is what the pin exists to stop (a description that instructs
        the model): the model is offered the description and ``inputSchema`` the
        bridge offered while the definition matched its pin, or, when it never
        saw that definition, none and an empty object schema. Its calls stay blocked.
        """
        offer = self._offer(info.tool_name)
        if offer is not None and dict(offer[0]) == self._pins.pinned(info.name):
            return attrs.evolve(
                definition, description=offer[1].description, parameters=offer[1].parameters
            )
        return attrs.evolve(definition, description=None, parameters={"type": "object"})

    def _definition(
        self, info: McpToolInfo, prepared: PreparedTool, run: Callable[..., Any]
    ) -> ToolDefinition:
        # A partial of one bound method (``run``, this bridge's _execute), not a
        # closure: a listing of thousands of tools keeps two objects per tool for
        # it instead of eight.
        return ToolDefinition(
            name=info.tool_name,
            execute=functools.partial(run, info, prepared.checked),
            description=prepared.description,
            parameters=prepared.schema,
            definition_hash=info.definition_hash,
        )

    @property
    def starts_calls(self) -> bool:
        """Whether :meth:`start_call` can start calls now (a live stdio session)."""
        return self._caller.can_start()

    def start_call(
        self,
        tool: ToolDefinition,
        arguments: JsonObject,
        context: ToolExecutionContext,
        done: Callable[[ToolResult], None],
    ) -> McpStartedCall | None:
        """Start a call of ``tool`` (one of :attr:`tools`) without waiting for its answer.

        What the tool's ``execute`` does, for a caller with no task to wait
        in: the request is written at once and ``done`` gets the result,
        the one ``execute`` would return, once, from the task that reads the
        server's answer (or a task of the bridge: a timeout, an answer that
        needs the SDK's checks). ``context`` is the call's (its progress is
        reported there). Only a call that ``execute`` would write straight
        to a stdio server's live session starts so: for any other (a server
        not connected yet or over HTTP, a task-required tool, a changed
        definition, arguments that are not plain JSON, a tracer recording,
        a pipe with a line waiting) ``None``, nothing sent: run ``execute``.
        Cancel a started call with :meth:`McpStartedCall.cancel`.
        """
        execute = tool.execute
        if type(execute) is not functools.partial or execute.func != self._execute:
            return None
        info, checked = execute.args
        if info.changed or not isinstance(info, McpToolInfo):
            return None
        return self._caller.start(info.name, arguments, context, checked, info, done)

    @trio_native  # the bridge's own trio code
    async def _execute(
        self,
        info: McpToolInfo,
        checked: JsonObject | None,
        arguments: JsonObject,
        ctx: ToolExecutionContext,
    ) -> ToolResult:
        remote = info.name
        if info.changed:
            return ToolResult.error(
                f"MCP tool {remote} is blocked: its definition changed since it was "
                f"pinned ({', '.join(info.changed)}); the host has not accepted it",
                mcp_error="definition_changed",
                mcp_server=self._options.server_id,
                mcp_tool=remote,
                changed=list(info.changed),
            )
        return await self._caller.call(remote, arguments, ctx, checked, info)


@asynccontextmanager
async def open_mcp_tools(
    *,
    server_id: str,
    transport: StdioTransport | StreamableHttpTransport,
    name_prefix: str | None = None,
    list_cache_ttl_s: float = 60.0,
    call_timeout_s: float = 60.0,
    connect_timeout_s: float = 30.0,
    max_call_s: float | None = 600.0,
    max_result_bytes: int = 1_000_000,
    protocol: ProtocolMode = "auto",
    max_list_bytes: int = 4_000_000,
    max_list_pages: int = 32,
    max_server_requests: int = 16,
    elicit: McpElicitCallback | None = None,
    sample: McpSampleCallback | None = None,
    roots: Sequence[str] | McpRootsCallback | None = None,
    on_log: McpLogCallback | None = None,
    on_elicitation_complete: McpElicitationCompleteCallback | None = None,
    pins_file: str | os.PathLike[str] | None = None,
    accept_change: McpApprovalCallback | None = None,
) -> AsyncIterator[McpToolBridge]:
    """Connect to an MCP server and yield its tools as a :class:`McpToolBridge`.

    Nothing launches before this is entered; a stdio server is stopped (its
    whole process group) when the block exits, shielded and bounded.

    Args:
        server_id: names the server in tool names and errors (``[A-Za-z0-9_.-]{1,64}``).
        transport: a :class:`StdioTransport` or :class:`StreamableHttpTransport`.
        name_prefix: tool names are ``<name_prefix><name>``; default ``mcp:<server_id>:``.
        list_cache_ttl_s: how long a listing counts as fresh (see :attr:`McpToolBridge.stale`).
        call_timeout_s: a call fails when the server sends neither a result nor a
            progress notification for this long.
        connect_timeout_s: bound on starting, connecting and the first listing.
        max_call_s: hard ceiling on one call, progress or not (default 600 s,
            also when ``None`` is passed; only ``math.inf`` removes it, which
            lets a server that sends progress forever keep a call alive).
        max_result_bytes: largest message accepted from the server; a larger one
            is refused while it arrives, the call fails and the session is closed.
        protocol: ``"auto"`` (2026-07-28 when the server speaks it, otherwise the
            2025-11-25 handshake) or ``"legacy"`` (always the handshake).
        max_list_bytes: bound on the tools kept from one listing, summed over its
            pages (each tool counted as its JSON); the rest is ignored with a warning.
        max_list_pages: bound on the pages of one listing; the rest is ignored.
        max_server_requests: server-to-client requests (``ping``, sampling,
            elicitation, roots) handled at once; more are answered with an error
            when the server reads its input, dropped when it does not.
        elicit: answers the server's elicitation requests (form and URL mode);
            the capability is declared only when given. The request names the
            server; the bridge never opens a URL.
        sample: answers the server's sampling requests with the host's model;
            declared only when given.
        roots: absolute paths or ``file://`` URIs offered as the client's roots
            (a coding host passes its workspace roots), or an async callback
            asked with an :class:`McpRootsRequest` each time the server lists
            them (it returns such paths or URIs); declared only when given.
        on_log: receives the server's log messages as :class:`McpLogMessage`
            (at ``info`` and above on 2026-07-28 sessions).
        on_elicitation_complete: told of each ``notifications/elicitation/complete``
            the server sends (2025-11-25 sessions) as an :class:`McpElicitationComplete`.

    Which call a server's request is for: elicitation, sampling, roots and log
    messages carry ``call_id``, the id of the tool call whose request the
    server sent them on, when the transport tells: a Streamable HTTP server
    sends them on that request's response stream, and a 2026-07-28 server
    inside that call's result (``input_required``). A stdio pipe, or the
    standalone HTTP stream, carries nothing that says which call a message
    belongs to: ``call_id`` is ``None`` there.
        pins_file: a JSON file of tool definition pins, read at every listing
            and written when a tool is pinned. Each tool is pinned (by the hash
            of each part of its definition) when first listed; a tool that
            later lists with a different definition is refused
            (``definition_changed``) until accepted, by ``accept_change`` or by
            writing its new pin into this file.
        accept_change: asked with the tool's :class:`McpToolInfo` (``changed``
            names the parts) when a pinned tool changed; ``True`` re-pins it.

    Raises:
        ConfigurationError: an option is invalid (raised before anything starts).
        McpBridgeError: the server could not be started, reached or listed in time.
        TrioRequiredError: entered outside a trio task (from asyncio, enter it
            through ``prism.core.open_asyncio_host()``: ``host.enter(open_mcp_tools(...))``).

    Cancellation: cancelling while connecting stops the server and propagates.
    """
    require_trio("open_mcp_tools()")
    options = bridge_options(
        server_id=server_id,
        transport=transport,
        name_prefix=name_prefix,
        list_cache_ttl_s=list_cache_ttl_s,
        call_timeout_s=call_timeout_s,
        connect_timeout_s=connect_timeout_s,
        max_call_s=max_call_s,
        max_result_bytes=max_result_bytes,
        protocol=protocol,
        max_list_bytes=max_list_bytes,
        max_list_pages=max_list_pages,
        max_server_requests=max_server_requests,
        elicit=elicit,
        sample=sample,
        roots=roots,
        on_log=on_log,
        on_elicitation_complete=on_elicitation_complete,
        pins_file=pins_file,
        accept_change=accept_change,
    )
    await load_validator()
    try:
        async with trio.open_nursery() as nursery:
            bridge = McpToolBridge(options=options, nursery=nursery)
            try:
                conn = await bridge._sessions.connection()
                await bridge._relist(conn, options.connect_timeout_s)
                # A change announced right after initialize (server-everything does) is
                # checked before the bridge is handed out, so it is not stale from the start.
                await bridge._settle(options.connect_timeout_s)
                yield bridge
            finally:
                await bridge.aclose()
    except BaseExceptionGroup as group:
        # The bridge's own tasks never raise, so a group here holds what the caller's
        # block (or the connect) raised: hand back that exception itself, unwrapped.
        if len(group.exceptions) == 1:
            only = group.exceptions[0]
            raise only from only.__cause__
        raise
