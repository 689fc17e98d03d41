"""The MCP tool bridge: one server's tools as gated Prism tools."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
import mcp_types
import trio
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp import Client
from mcp.shared.exceptions import MCPError
from prism.core import (
    ConfigurationError,
    JsonObject,
    JsonValue,
    ToolDefinition,
    ToolResult,
    require_trio,
)

from ._annotations import (
    McpApprovalCallback,
    McpToolAnnotations,
    McpToolInfo,
    changed_parts,
    definition_hash,
    definition_parts,
)
from ._callbacks import (
    McpElicitCallback,
    McpLogCallback,
    McpSampleCallback,
    make_elicitation_callback,
    make_logging_callback,
    make_roots_callback,
    make_sampling_callback,
    root_uris,
)
from ._content import map_call_result, task_of, to_json_value
from ._errors import McpBridgeError
from ._output import OutputChecker
from ._transports import StdioTransport, StreamableHttpTransport
from ._wire import WireState, open_http_streams, open_stdio_streams

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from mcp.client._transport import TransportStreams
    from mcp.client.session import MessageHandlerFnT
    from mcp.shared.dispatcher import ProgressFnT
    from prism.core import ToolExecutionContext

__all__ = ["McpServerInfo", "McpToolBridge", "open_mcp_tools"]

_log = logging.getLogger("prism.mcp")

_SERVER_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_PREFIX = re.compile(r"[A-Za-z0-9_.:/-]{0,128}")
_MAX_TOOLS = 4096
_MAX_LIST_PAGES_CAP = 1000
_MAX_LIST_BYTES_CAP = 1 << 30
_MAX_SERVER_REQUESTS_CAP = 1024
_MAX_RECHECKS = 3
_MAX_DESCRIPTION_CHARS = 8192
_MAX_ERROR_CHARS = 2000
_MAX_INFO_CHARS = 256
_MAX_RESULT_BYTES_CAP = 1 << 30
_CLOSE_TIMEOUT_S = 10.0
_CLOSE_GRACE_S = 5.0
_LIST_CHANGED = "notifications/tools/list_changed"

Protocol = Literal["auto", "legacy"]


def _clip(text: str, limit: int = _MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _positive_seconds(option: str, value: object, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(
            f"{option} must be a positive, finite number of seconds, got {value!r}"
        )
    return float(value)


DEFAULT_MAX_CALL_S = 600.0


def _max_call(value: object) -> float | None:
    # None (a host that passes its own unset option through) still gets the
    # default ceiling; only an explicit infinity removes it.
    if value is None:
        return DEFAULT_MAX_CALL_S
    if isinstance(value, float) and value == math.inf:
        return None
    return _positive_seconds("max_call_s", value)


@attrs.frozen(kw_only=True)
class McpServerInfo:
    """What the server said about itself (clipped; servers are untrusted).

    Attributes:
        name: the server's implementation name.
        version: its version string.
        title: its display title, if any.
    """

    name: str
    version: str
    title: str | None = None


def _server_info(client: Client) -> McpServerInfo | None:
    info = client.server_info
    if info is None:
        return None
    title = getattr(info, "title", None)
    return McpServerInfo(
        name=_clip(str(info.name), _MAX_INFO_CHARS),
        version=_clip(str(info.version), _MAX_INFO_CHARS),
        title=_clip(str(title), _MAX_INFO_CHARS) if title is not None else None,
    )


@attrs.frozen(kw_only=True)
class _Options:
    server_id: str
    transport: StdioTransport | StreamableHttpTransport
    name_prefix: str
    list_cache_ttl_s: float
    call_timeout_s: float
    connect_timeout_s: float
    max_call_s: float | None
    max_result_bytes: int
    protocol: Protocol
    max_list_bytes: int
    max_list_pages: int
    max_server_requests: int
    elicit: McpElicitCallback | None = None
    sample: McpSampleCallback | None = None
    roots: tuple[str, ...] | None = None
    on_log: McpLogCallback | None = None
    pins_file: str | None = None
    accept_change: McpApprovalCallback | None = None


def _options(
    *,
    server_id: object,
    transport: object,
    name_prefix: object,
    list_cache_ttl_s: object,
    call_timeout_s: object,
    connect_timeout_s: object,
    max_call_s: object,
    max_result_bytes: object,
    protocol: object,
    max_list_bytes: object,
    max_list_pages: object,
    max_server_requests: object,
    elicit: object = None,
    sample: object = None,
    roots: object = None,
    on_log: object = None,
    pins_file: object = None,
    accept_change: object = None,
) -> _Options:
    if not isinstance(server_id, str) or not _SERVER_ID.fullmatch(server_id):
        raise ConfigurationError(
            f"server_id must be 1-64 characters of A-Z a-z 0-9 _ . -, got {server_id!r}"
        )
    if not isinstance(transport, (StdioTransport, StreamableHttpTransport)):
        raise ConfigurationError(
            f"transport must be a StdioTransport or StreamableHttpTransport, got {transport!r}"
        )
    prefix = f"mcp:{server_id}:" if name_prefix is None else name_prefix
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ConfigurationError(
            f"name_prefix must be up to 128 characters of A-Z a-z 0-9 _ . : / -, "
            f"got {name_prefix!r}"
        )
    if (
        isinstance(max_result_bytes, bool)
        or not isinstance(max_result_bytes, int)
        or not 1024 <= max_result_bytes <= _MAX_RESULT_BYTES_CAP
    ):
        raise ConfigurationError(
            f"max_result_bytes must be an int from 1024 to {_MAX_RESULT_BYTES_CAP}, "
            f"got {max_result_bytes!r}"
        )
    for option, value, low, high in (
        ("max_list_bytes", max_list_bytes, 1024, _MAX_LIST_BYTES_CAP),
        ("max_list_pages", max_list_pages, 1, _MAX_LIST_PAGES_CAP),
        ("max_server_requests", max_server_requests, 1, _MAX_SERVER_REQUESTS_CAP),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigurationError(f"{option} must be an int from {low} to {high}, got {value!r}")
    if pins_file is not None and not isinstance(pins_file, (str, os.PathLike)):
        raise ConfigurationError(f"pins_file must be a path or None, got {pins_file!r}")
    for option, value in (
        ("elicit", elicit),
        ("sample", sample),
        ("on_log", on_log),
        ("accept_change", accept_change),
    ):
        if value is not None and not callable(value):
            raise ConfigurationError(f"{option} must be a callable or None, got {value!r}")
    if protocol not in ("auto", "legacy"):
        raise ConfigurationError(f"protocol must be 'auto' or 'legacy', got {protocol!r}")
    ttl = _positive_seconds("list_cache_ttl_s", list_cache_ttl_s)
    call = _positive_seconds("call_timeout_s", call_timeout_s)
    connect = _positive_seconds("connect_timeout_s", connect_timeout_s)
    assert ttl is not None
    assert call is not None
    assert connect is not None
    return _Options(
        server_id=server_id,
        transport=transport,
        name_prefix=prefix,
        list_cache_ttl_s=ttl,
        call_timeout_s=call,
        connect_timeout_s=connect,
        max_call_s=_max_call(max_call_s),
        max_result_bytes=max_result_bytes,
        protocol=protocol,
        max_list_bytes=max_list_bytes,  # type: ignore[arg-type]
        max_list_pages=max_list_pages,  # type: ignore[arg-type]
        max_server_requests=max_server_requests,  # type: ignore[arg-type]
        elicit=elicit,  # type: ignore[arg-type]
        sample=sample,  # type: ignore[arg-type]
        roots=root_uris(roots) if roots is not None else None,  # type: ignore[arg-type]
        on_log=on_log,  # type: ignore[arg-type]
        pins_file=os.fspath(pins_file) if pins_file is not None else None,
        accept_change=accept_change,  # type: ignore[arg-type]
    )


@attrs.define(eq=False)
class _Connection:
    """One live session: owned by a task in the bridge's nursery until ``stop`` is set."""

    state: WireState = attrs.field(factory=WireState)
    client: Client | None = None
    server_info: McpServerInfo | None = None
    protocol_version: str | None = None
    error: McpBridgeError | None = None
    stop: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)

    @property
    def alive(self) -> bool:
        # A transport fault (the server exited while idle, say) retires the session:
        # the next call starts a fresh one instead of failing on the dead one.
        return (
            self.client is not None
            and self.state.fault is None
            and not self.stop.is_set()
            and not self.done.is_set()
        )


_MIN_POLL_S = 0.05
_MAX_POLL_S = 5.0


def _poll_seconds(interval_ms: object, default: float = 0.5) -> float:
    if (
        isinstance(interval_ms, (int, float))
        and not isinstance(interval_ms, bool)
        and math.isfinite(interval_ms)
    ):
        return min(max(interval_ms / 1000.0, _MIN_POLL_S), _MAX_POLL_S)
    return default


def _forget_sdk_output_schemas(client: Client) -> None:
    """Drop the output schemas the SDK's session keeps from every listing page.

    The session adds each page's schemas to a dict that only a complete
    single-page listing prunes, so repeated paged listings with fresh names would
    grow it without bound. The bridge checks output itself and never uses them.
    """
    try:
        session = client.session
    except RuntimeError:
        return
    for attribute in ("_tool_output_schemas", "_tool_output_validators"):
        kept = getattr(session, attribute, None)
        if isinstance(kept, dict):
            kept.clear()


async def _skip_sdk_validation(_name: str, _result: mcp_types.CallToolResult) -> None:
    return None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        found: list[BaseException] = []
        for inner in exc.exceptions:
            found.extend(_leaves(inner))
        return found
    return [exc]


def _describe(exc: BaseException) -> str:
    leaves = _leaves(exc)
    # The most telling leaf: an MCP error, then an OS error, then whatever came first.
    leaf: BaseException | None = next((e for e in leaves if isinstance(e, MCPError)), None)
    leaf = leaf or next((e for e in leaves if isinstance(e, OSError)), None) or leaves[0]
    text = str(leaf)
    return _clip(f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__)


@attrs.define(eq=False)
class McpToolBridge:
    """One MCP server's tools, ready to register and dispatch like local tools.

    Get one from :func:`open_mcp_tools`; it is valid inside that ``async with``.
    Each tool in :attr:`tools` forwards its call to the server with the
    bridge's deadlines and byte limit; failures become error results.
    """

    _options: _Options = attrs.field(alias="options")
    _nursery: trio.Nursery = attrs.field(alias="nursery")
    _tools: tuple[ToolDefinition, ...] = ()
    _info: dict[str, McpToolInfo] = attrs.field(factory=dict)
    _pins: dict[str, dict[str, str]] = attrs.field(factory=dict)
    _checker: OutputChecker = attrs.field(factory=OutputChecker)
    _listing: tuple[tuple[object, ...], ...] = ()
    _listed_at: float = -math.inf
    _stale: bool = False
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _listing_lock: trio.Lock = attrs.field(factory=trio.Lock)
    _verifying: bool = False
    _verified: trio.Event = attrs.field(factory=trio.Event)
    _recheck: bool = False
    _closed: bool = False
    _conn: _Connection | None = None
    _connections: list[_Connection] = attrs.field(factory=list)
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

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
        expired = time.monotonic() - self._listed_at > self._options.list_cache_ttl_s
        return self._stale or expired

    @property
    def server_info(self) -> McpServerInfo | None:
        """The server's name and version as of the latest session, if it gave them."""
        return self._conn.server_info if self._conn is not None else None

    @property
    def protocol_version(self) -> str | None:
        """The MCP protocol version negotiated by the latest session."""
        return self._conn.protocol_version if self._conn is not None else None

    @property
    def server_pid(self) -> int | None:
        """The stdio server's process id while a session is live (``None`` over HTTP)."""
        conn = self._conn
        return conn.state.pid if conn is not None and conn.alive else None

    @property
    def connected(self) -> bool:
        """Whether a session is live now (a call reconnects when it is not)."""
        return self._conn is not None and self._conn.alive

    async def wait_stale(self) -> None:
        """Wait until the server's tool list is known to differ from :attr:`tools`.

        Returns at once if that happened since the last listing. The age limit
        (``list_cache_ttl_s``) does not wake it. Checkpoints; cancellation just
        stops the wait.
        """
        await self._changed.wait()

    def _announced(self, conn: _Connection) -> None:
        # A retired session's news is old; the current one's (or the one still
        # connecting, whose listing is yet to come) counts.
        if conn.stop.is_set() or self._closed:
            return
        _log.debug("MCP server %s announced a tool list change", self._options.server_id)
        # An announcement is checked against our listing before it marks us stale:
        # server-everything announces a change right after initialize, which the
        # bridge's first listing may already include.
        if self._verifying:
            self._recheck = True
            return
        self._verifying = True
        self._verified = trio.Event()
        self._nursery.start_soon(self._verify_change, conn)

    async def _verify_change(self, conn: _Connection) -> None:
        try:
            for _ in range(_MAX_RECHECKS):
                self._recheck = False
                async with self._listing_lock:
                    client = conn.client
                    if conn.stop.is_set() or client is None or not conn.alive:
                        return
                    try:
                        listed = await self._list(conn, client, self._options.call_timeout_s)
                    except McpBridgeError:
                        _log.debug("listing after an announcement failed", exc_info=True)
                        self._mark_changed(conn)
                        return
                    if self._listing_of(listed) != self._listing:
                        self._mark_changed(conn)
                        return
                if not self._recheck:
                    _log.debug(
                        "MCP server %s: the announced change is already in the listing",
                        self._options.server_id,
                    )
                    return
            # Announcements keep coming: say stale rather than list forever.
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

    def _mark_changed(self, conn: _Connection) -> None:
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
        conn = await self._connection()
        await self._relist(conn, self._options.call_timeout_s)

    async def aclose(self) -> None:
        """Close the session and stop the server; idempotent.

        Shielded and bounded: a stdio server gets its stdin closed, then
        SIGTERM, then SIGKILL for its whole process group. Calls still running
        get an error result.
        """
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            for conn in self._connections:
                conn.stop.set()
            with trio.move_on_after(_CLOSE_TIMEOUT_S):
                for conn in list(self._connections):
                    await conn.done.wait()
        self._nursery.cancel_scope.cancel()

    # -- connection -------------------------------------------------------

    def _transport_cm(self, state: WireState) -> AbstractAsyncContextManager[TransportStreams]:
        options = self._options
        if isinstance(options.transport, StdioTransport):
            return open_stdio_streams(
                options.transport,
                max_message_bytes=options.max_result_bytes,
                state=state,
                write_stall_s=options.connect_timeout_s,
                max_server_requests=options.max_server_requests,
            )
        return open_http_streams(
            options.transport,
            max_message_bytes=options.max_result_bytes,
            connect_timeout_s=options.connect_timeout_s,
            state=state,
            max_server_requests=options.max_server_requests,
        )

    def _fault_reason(
        self, conn: _Connection, exc: BaseException | None, *, stderr: bool = True
    ) -> str:
        state = conn.state
        reason = state.fault or (_describe(exc) if exc is not None else "the session ended")
        if state.returncode is not None:
            reason = f"{reason}; exit status {state.returncode}"
        tail = state.stderr_tail() if stderr else ""
        if tail:
            reason = f"{reason}; stderr: {tail}"
        return _clip(reason)

    async def _run_connection(
        self, conn: _Connection, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        options = self._options
        started = False
        failure: BaseException | None = None
        try:
            with trio.CancelScope() as connecting:
                connecting.deadline = trio.current_time() + options.connect_timeout_s
                sid = options.server_id
                # Each capability is declared only when its callback is given.
                client = Client(
                    self._transport_cm(conn.state),
                    mode=options.protocol,
                    message_handler=self._message_handler(conn),
                    cache=None,
                    client_info=mcp_types.Implementation(name="prism-mcp", version="0.1.0"),
                    elicitation_callback=make_elicitation_callback(sid, options.elicit)
                    if options.elicit is not None
                    else None,
                    sampling_callback=make_sampling_callback(sid, options.sample)
                    if options.sample is not None
                    else None,
                    list_roots_callback=make_roots_callback(options.roots)
                    if options.roots is not None
                    else None,
                    logging_callback=make_logging_callback(sid, options.on_log)
                    if options.on_log is not None
                    else None,
                    log_level="info" if options.on_log is not None else None,
                )
                async with client:
                    # The bridge checks structuredContent itself (see _check_output); the
                    # SDK's own check would re-list tools unbounded for an unlisted name
                    # and raise the whole result away on a mismatch.
                    client.session.validate_tool_result = _skip_sdk_validation  # type: ignore[method-assign,assignment]
                    conn.protocol_version = client.protocol_version
                    conn.server_info = _server_info(client)
                    conn.client = client
                    async with trio.open_nursery() as inner:
                        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                            # Subscribe (and wait for the server's answer, within
                            # connect_timeout_s) before the session is handed out, so a
                            # change right after open is not missed and the server's
                            # acknowledgement never races the first call.
                            await inner.start(self._listen, conn, client)
                        connecting.deadline = math.inf
                        started = True
                        task_status.started()
                        await conn.stop.wait()
                        inner.cancel_scope.cancel()
                    # Closing is bounded too (an HTTP server may never answer the DELETE);
                    # the stdio shutdown inside is shielded, so the kill sequence still runs.
                    connecting.deadline = trio.current_time() + _CLOSE_GRACE_S
            if connecting.cancelled_caught and not started:
                failure = TimeoutError()
                conn.error = McpBridgeError(
                    options.server_id,
                    f"no session within connect_timeout_s={options.connect_timeout_s:g}s"
                    + (f" ({self._fault_reason(conn, None)})" if conn.state.fault else ""),
                )
        except Exception as exc:
            failure = exc
            if not started:
                conn.error = McpBridgeError(
                    options.server_id, f"could not connect: {self._fault_reason(conn, exc)}"
                )
                conn.error.__cause__ = exc
            else:
                _log.debug("MCP session for %s ended: %r", options.server_id, exc)
        finally:
            conn.client = None if not started else conn.client
            conn.done.set()
        if not started:
            if conn.error is None:
                conn.error = McpBridgeError(options.server_id, "the session ended during connect")
                conn.error.__cause__ = failure
            task_status.started()

    def _message_handler(self, conn: _Connection) -> MessageHandlerFnT:
        async def handle(message: object) -> None:
            root = getattr(message, "root", message)
            if getattr(root, "method", None) == _LIST_CHANGED:
                self._announced(conn)
            await trio.lowlevel.checkpoint()

        return handle

    async def _listen(
        self,
        conn: _Connection,
        client: Client,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Follow tools/list_changed on a 2026-07-28 session; a server without it is fine.

        Reports started once the server acknowledged the subscription, or refused it.
        """
        subscribed = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                subscribed = True
                task_status.started()
                async for _event in subscription:
                    self._announced(conn)
        except Exception:
            _log.debug("no list-changed subscription on %s", self._options.server_id, exc_info=True)
        if not subscribed:
            task_status.started()

    async def _connection(self) -> _Connection:
        conn = self._conn
        if conn is not None and conn.alive:
            return conn
        async with self._lock:
            if self._closed:
                raise McpBridgeError(self._options.server_id, "the bridge is closed")
            conn = self._conn
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                conn.stop.set()
            fresh = _Connection()
            self._connections.append(fresh)
            self._connections = [c for c in self._connections if not c.done.is_set() or c is fresh]
            await self._nursery.start(self._run_connection, fresh)
            if fresh.error is not None:
                raise fresh.error
            self._conn = fresh
            if conn is not None:
                # A new session: compare its listing with ours (and let the SDK learn the
                # tools). Tools never change under the caller; a difference marks stale.
                try:
                    await self._relist(fresh, self._options.call_timeout_s, replace=False)
                except McpBridgeError:
                    _log.debug("relisting after reconnect failed", exc_info=True)
            return fresh

    def _drop(self, conn: _Connection) -> None:
        conn.stop.set()

    # -- listing ----------------------------------------------------------

    async def _relist(self, conn: _Connection, limit_s: float, *, replace: bool = True) -> None:
        client = conn.client
        if client is None or not conn.alive:
            raise McpBridgeError(self._options.server_id, "the session closed while listing")
        if not replace:
            # After a reconnect: the SDK learns the tools; ours stay, marked stale if different.
            listed = await self._list(conn, client, limit_s)
            if self._listing_of(listed) != self._listing:
                self._mark_changed(conn)
            return
        async with self._listing_lock:
            await self._replace_listing(conn, client, limit_s)

    async def _replace_listing(self, conn: _Connection, client: Client, limit_s: float) -> None:
        changed_before = self._stale
        # Cleared before listing; a change announced while the list is in flight is
        # checked against this listing once it is in place (the lock orders them).
        self._clear_changed()
        try:
            listed = await self._list(conn, client, limit_s)
        except BaseException:
            if changed_before:
                self._mark_changed(conn)
            raise
        listing = self._listing_of(listed)
        await self._load_pins()
        pinned_any = False
        tools: dict[str, ToolDefinition] = {}
        infos: dict[str, McpToolInfo] = {}
        for tool in listed:
            prepared = self._prepare_tool(tool)
            if prepared is None:
                continue
            info = prepared[0]
            if info.tool_name in tools:
                _log.warning("skipping a second MCP tool named %s", info.tool_name)
                continue
            info, pinned = await self._check_pin(info)
            pinned_any = pinned_any or pinned
            tools[info.tool_name] = self._definition(info, *prepared[1:])
            infos[info.tool_name] = info
        if pinned_any:
            await self._save_pins()
        self._tools = tuple(tools.values())
        self._info = infos
        self._listing = listing
        self._listed_at = time.monotonic()

    @staticmethod
    def _listing_of(listed: list[Any]) -> tuple[tuple[object, ...], ...]:
        return tuple(
            (
                tool.name,
                tool.title,
                tool.description,
                repr(tool.input_schema),
                repr(tool.output_schema),
                repr(tool.annotations),
            )
            for tool in listed
        )

    async def _list(self, conn: _Connection, client: Client, limit_s: float) -> list[Any]:
        options = self._options
        tools: list[Any] = []
        cursor: str | None = None
        total = 0
        try:
            with trio.fail_after(limit_s):
                for page_number in range(options.max_list_pages + 1):
                    if page_number == options.max_list_pages:
                        _log.warning(
                            "MCP server %s: tools/list has more than max_list_pages=%d pages; "
                            "the rest is ignored",
                            options.server_id,
                            options.max_list_pages,
                        )
                        break
                    page = await client.list_tools(cursor=cursor)
                    for tool in page.tools:
                        # Count what is kept, not what was sent: a listing of many pages
                        # (each within max_result_bytes) must not add up without bound.
                        total += len(tool.model_dump_json(by_alias=True, exclude_none=True))
                        if total > options.max_list_bytes:
                            break
                        tools.append(tool)
                    if total > options.max_list_bytes:
                        _log.warning(
                            "MCP server %s: tools/list is larger than max_list_bytes=%d; "
                            "the rest is ignored",
                            options.server_id,
                            options.max_list_bytes,
                        )
                        break
                    cursor = page.next_cursor
                    if cursor is None or len(tools) >= _MAX_TOOLS:
                        break
        except trio.TooSlowError as exc:
            raise McpBridgeError(
                self._options.server_id, f"tools/list took longer than {limit_s:g}s"
            ) from exc
        except Exception as exc:
            if conn.state.fault is not None:
                self._drop(conn)
            raise McpBridgeError(
                self._options.server_id, f"tools/list failed: {self._fault_reason(conn, exc)}"
            ) from exc
        finally:
            _forget_sdk_output_schemas(client)
        return tools[:_MAX_TOOLS]

    async def _load_pins(self) -> None:
        path = self._options.pins_file
        if path is None:
            return
        try:
            text = await trio.Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise McpBridgeError(self._options.server_id, f"cannot read pins_file: {exc}") from exc
        try:
            data = json.loads(text)
            tools = data["tools"]
            pins = {
                str(name): {str(k): str(v) for k, v in parts.items()}
                for name, parts in tools.items()
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise McpBridgeError(
                self._options.server_id,
                f'pins_file {path} is not {{"tools": {{name: {{part: sha256}}}}}}',
            ) from exc
        # The file wins: a host accepts a changed tool by writing its new pin there.
        self._pins.update(pins)

    async def _save_pins(self) -> None:
        path = self._options.pins_file
        if path is None:
            return
        data = {"version": 1, "server_id": self._options.server_id, "tools": self._pins}
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"

        def write() -> None:
            target = Path(path)
            temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, target)

        try:
            await trio.to_thread.run_sync(write)
        except OSError:
            _log.warning("could not write pins_file %s", path, exc_info=True)

    async def _check_pin(self, info: McpToolInfo) -> tuple[McpToolInfo, bool]:
        """``info`` marked with what changed since its pin; whether a pin was (re)set."""
        parts = dict(info.definition_parts)
        pinned = self._pins.get(info.name)
        if pinned is None:
            # Trust on first use: the definition seen first is the one approved.
            self._pins[info.name] = parts
            return info, True
        changed = changed_parts(pinned, parts)
        if not changed:
            return info, False
        info = attrs.evolve(info, changed=changed)
        accept = self._options.accept_change
        if accept is not None:
            try:
                answer = accept(info)
                if not isinstance(answer, bool):
                    answer = await answer
            except Exception:
                _log.warning("accept_change raised; the change is not accepted", exc_info=True)
                answer = False
            if answer is True:
                self._pins[info.name] = parts
                return attrs.evolve(info, changed=()), True
        _log.warning(
            "MCP tool %s changed since it was pinned (%s); its calls are refused",
            info.tool_name,
            ", ".join(changed),
        )
        return info, False

    def _definition(
        self,
        info: McpToolInfo,
        schema: JsonObject,
        description: str | None,
        checked: JsonObject | None,
    ) -> ToolDefinition:
        remote = info.name

        async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
            if info.changed:
                return ToolResult.error(
                    f"MCP tool {remote} is blocked: its definition changed since it was "
                    f"pinned ({', '.join(info.changed)}); the host has not accepted it",
                    mcp_error="definition_changed",
                    mcp_server=self._options.server_id,
                    mcp_tool=remote,
                    changed=list(info.changed),
                )
            return await self._call(remote, arguments, ctx, checked, info)

        return ToolDefinition(
            name=info.tool_name, execute=execute, description=description, parameters=schema
        )

    def _prepare_tool(
        self, tool: Any
    ) -> tuple[McpToolInfo, JsonObject, str | None, JsonObject | None] | None:
        name = tool.name
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            _log.warning(
                "skipping MCP tool with an unusable name from %s: %r",
                self._options.server_id,
                _clip(repr(name), 200),
            )
            return None
        try:
            schema = to_json_value(tool.input_schema)
        except ValueError:
            schema = None
        if not isinstance(schema, dict):
            _log.warning("skipping MCP tool %s: inputSchema is not a JSON object", name)
            return None
        description = tool.description if isinstance(tool.description, str) else None
        if description is not None:
            description = _clip(description, _MAX_DESCRIPTION_CHARS)
        full_name = f"{self._options.name_prefix}{name}"
        annotations = McpToolAnnotations.from_mcp(tool.annotations)
        title = tool.title if isinstance(tool.title, str) else annotations.title
        title = _clip(title, _MAX_INFO_CHARS) if title is not None else None
        output_schema: JsonValue = None
        if tool.output_schema is not None:
            try:
                output_schema = to_json_value(tool.output_schema)
            except ValueError:
                output_schema = None
        checked: JsonObject | None = None
        if isinstance(output_schema, dict):
            refused = self._checker.refusal(output_schema)
            if refused is None:
                checked = output_schema
            else:
                _log.warning(
                    "MCP tool %s: outputSchema cannot be used (%s); its structuredContent "
                    "is not checked",
                    full_name,
                    _clip(refused, 300),
                )
        execution = getattr(tool, "execution", None)
        task_support = getattr(execution, "task_support", None)
        parts = definition_parts(description, schema, output_schema, annotations, title)
        info = McpToolInfo(
            server_id=self._options.server_id,
            name=name,
            tool_name=full_name,
            title=title,
            annotations=annotations,
            output_schema=output_schema if isinstance(output_schema, dict) else None,
            task_support=task_support if isinstance(task_support, str) else "forbidden",
            definition_hash=definition_hash(parts),
            definition_parts=parts,
        )
        return info, schema, description, checked

    # -- calls ------------------------------------------------------------

    async def _call(
        self,
        remote: str,
        arguments: JsonObject,
        ctx: ToolExecutionContext,
        output_schema: JsonObject | None,
        info: McpToolInfo,
    ) -> ToolResult:
        options = self._options
        details: dict[str, JsonValue] = {
            "mcp_server": options.server_id,
            "mcp_tool": remote,
            "mcp_definition_hash": info.definition_hash,
        }
        if self._closed:
            return ToolResult.error(
                f"MCP server {options.server_id} is closed", mcp_error="closed", **details
            )
        try:
            conn = await self._connection()
        except McpBridgeError as exc:
            return ToolResult.error(
                f"MCP tool {remote} could not run: {exc.reason}", mcp_error="connect", **details
            )
        client = conn.client
        if client is None:
            return ToolResult.error(
                f"MCP tool {remote} could not run: the session closed", **details
            )
        now = trio.current_time()
        hard = now + options.max_call_s if options.max_call_s is not None else math.inf
        failure: Exception | None = None
        result: mcp_types.CallToolResult | None = None
        with trio.CancelScope(deadline=min(now + options.call_timeout_s, hard)) as scope:

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                scope.deadline = min(trio.current_time() + options.call_timeout_s, hard)
                ctx.report_progress(
                    _clip(message, 500) if isinstance(message, str) else None,
                    progress=progress,
                    total=total,
                )

            try:
                if info.task_support == "required":
                    result = await self._call_as_task(client, remote, arguments, on_progress)
                else:
                    result = await client.call_tool(
                        remote, arguments, progress_callback=on_progress
                    )
            except Exception as exc:
                failure = exc
        if scope.cancelled_caught:
            if trio.current_time() >= hard:
                text = f"MCP tool {remote} ran longer than max_call_s={options.max_call_s:g}s"
                limit = "max_call_s"
            else:
                text = (
                    f"MCP tool {remote} timed out: no result or progress within "
                    f"call_timeout_s={options.call_timeout_s:g}s"
                )
                limit = "call_timeout_s"
            return ToolResult.error(
                f"{text}; the server was sent a cancellation",
                mcp_error="timeout",
                limit=limit,
                **details,
            )
        if failure is not None or result is None:
            return self._call_failed(conn, remote, failure, details)
        mapped = map_call_result(result, details)
        if output_schema is not None and not mapped.is_error:
            return self._check_output(remote, output_schema, result, mapped, details)
        return mapped

    async def _call_as_task(
        self,
        client: Client,
        remote: str,
        arguments: JsonObject,
        on_progress: ProgressFnT,
    ) -> mcp_types.CallToolResult:
        """Run a task-augmented call (2025-11-25 tasks): create, poll ``tasks/get``, fetch.

        Runs under the caller's deadlines; each answered poll counts as progress
        (it restarts ``call_timeout_s``, never past ``max_call_s``). Leaving early
        (timeout, cancellation) sends ``tasks/cancel``, shielded and bounded.
        """
        session = client.session
        options = self._options
        ttl_ms = int(min(options.max_call_s or 3600.0, 86400.0) * 1000)
        created = await session.send_request(
            mcp_types.CallToolRequest(
                params=mcp_types.CallToolRequestParams(
                    name=remote, arguments=arguments, task=mcp_types.TaskMetadata(ttl=ttl_ms)
                )
            ),
            mcp_types.CallToolResult,
            progress_callback=on_progress,
        )
        task = task_of(created)
        if task is None:
            # The server ran it as an ordinary call after all.
            return created
        task_id = task.task_id
        status = task.status
        poll_s = _poll_seconds(task.poll_interval)
        finished = False
        try:
            while status in ("working", "input_required"):
                await trio.sleep(poll_s)
                got = await session.send_request(
                    mcp_types.GetTaskRequest(
                        params=mcp_types.GetTaskRequestParams(task_id=task_id)
                    ),
                    mcp_types.GetTaskResult,
                )
                status = got.status
                poll_s = _poll_seconds(got.poll_interval, poll_s)
                message = got.status_message
                await on_progress(0.0, None, message or f"task {status}")
            payload = await session.send_request(
                mcp_types.GetTaskPayloadRequest(
                    params=mcp_types.GetTaskPayloadRequestParams(task_id=task_id)
                ),
                mcp_types.CallToolResult,
            )
            finished = True
            return payload
        finally:
            if not finished and status in ("working", "input_required"):
                with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_GRACE_S):
                    try:
                        await session.send_request(
                            mcp_types.CancelTaskRequest(
                                params=mcp_types.CancelTaskRequestParams(task_id=task_id)
                            ),
                            mcp_types.CancelTaskResult,
                        )
                    except Exception:
                        _log.debug("tasks/cancel failed", exc_info=True)

    def _check_output(
        self,
        remote: str,
        schema: JsonObject,
        result: mcp_types.CallToolResult,
        mapped: ToolResult,
        details: dict[str, JsonValue],
    ) -> ToolResult:
        if result.structured_content is None and "structured_content" not in (
            result.model_fields_set
        ):
            return ToolResult.error(
                f"MCP tool {remote} declares an outputSchema but returned no structuredContent",
                mcp_error="output_invalid",
                **details,
            )
        mismatch = self._checker.check(schema, mapped.structured)
        if mismatch is None:
            return mapped
        where = mismatch.path or "$"
        return ToolResult.error(
            f"MCP tool {remote} returned structuredContent that does not match its "
            f"outputSchema at {where}: {_clip(mismatch.message, 500)}",
            mcp_error="output_invalid",
            path=where,
            **details,
        )

    def _call_failed(
        self,
        conn: _Connection,
        remote: str,
        failure: BaseException | None,
        details: dict[str, JsonValue],
    ) -> ToolResult:
        state = conn.state
        if self._closed:
            return ToolResult.error(
                f"MCP tool {remote} was interrupted: the bridge to {self._options.server_id} "
                "closed",
                mcp_error="closed",
                **details,
            )
        if state.fault is not None:
            # The transport refused the session (too large, garbage, server gone):
            # close it; the next call starts a fresh one.
            self._drop(conn)
            if state.oversize:
                return ToolResult.error(
                    f"MCP tool {remote} result refused: {state.fault}; the session was closed "
                    "and the next call reconnects",
                    mcp_error="result_too_large",
                    limit="max_result_bytes",
                    **details,
                )
            tail = state.stderr_tail()
            if tail:
                details["stderr_tail"] = tail
            return ToolResult.error(
                f"MCP tool {remote} failed: {self._fault_reason(conn, failure, stderr=False)}; "
                "the session was closed and the next call reconnects",
                mcp_error="connection_lost",
                **details,
            )
        if isinstance(failure, MCPError) and failure.code == mcp_types.CONNECTION_CLOSED:
            self._drop(conn)
            return ToolResult.error(
                f"MCP tool {remote} failed: the connection to the server closed; "
                "the next call reconnects",
                mcp_error="connection_lost",
                **details,
            )
        text = _describe(failure) if failure is not None else "no result"
        return ToolResult.error(
            f"MCP tool {remote} failed: {text}", mcp_error="server_error", **details
        )


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
    protocol: Protocol = "auto",
    max_list_bytes: int = 4_000_000,
    max_list_pages: int = 32,
    max_server_requests: int = 16,
    elicit: McpElicitCallback | None = None,
    sample: McpSampleCallback | None = None,
    roots: Sequence[str] | None = None,
    on_log: McpLogCallback | None = None,
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
            (a coding host passes its workspace roots); declared only when given.
        on_log: receives the server's log messages as :class:`McpLogMessage`
            (at ``info`` and above on 2026-07-28 sessions).
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
    options = _options(
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
        pins_file=pins_file,
        accept_change=accept_change,
    )
    try:
        async with trio.open_nursery() as nursery:
            bridge = McpToolBridge(options=options, nursery=nursery)
            try:
                conn = await bridge._connection()
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
