"""Session lifecycle: connect to one MCP server, keep the session, reconnect, close."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs
import mcp_types
import trio
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp import Client
from prism.core.text import clip, describe_exception

from ._callbacks import (
    elicitation_complete,
    forget_calls,
    make_elicitation_callback,
    make_logging_callback,
    make_roots_callback,
    make_sampling_callback,
)
from ._errors import TELLING_ERRORS, McpBridgeError
from ._fastcall import RawCalls, install_fast_call_tool
from ._http import open_http_streams
from ._options import BridgeOptions
from ._stdio import open_stdio_streams
from ._tasks import TasksExtension
from ._transports import StdioTransport
from ._wire import WireState

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from mcp.client._transport import TransportStreams
    from mcp.client.session import MessageHandlerFnT


__all__ = ["Connection", "McpServerInfo", "Sessions"]

_log = logging.getLogger("prism.mcp")

_MAX_INFO_CHARS = 256
_CLOSE_TIMEOUT_S = 10.0
_CLOSE_GRACE_S = 5.0
_LIST_CHANGED = "notifications/tools/list_changed"
_ELICITATION_COMPLETE = "notifications/elicitation/complete"


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
        name=clip(str(info.name), _MAX_INFO_CHARS),
        version=clip(str(info.version), _MAX_INFO_CHARS),
        title=clip(str(title), _MAX_INFO_CHARS) if title is not None else None,
    )


async def _skip_sdk_validation(_name: str, _result: mcp_types.CallToolResult) -> None:
    return None


@attrs.define(eq=False)
class Connection:
    """One live session: owned by a task in the bridge's nursery until ``stop`` is set."""

    state: WireState = attrs.field(factory=WireState)
    client: Client | None = None
    # The session's plain calls past the SDK's client (a stdio session's), see _fastcall
    raw: RawCalls | None = None
    server_info: McpServerInfo | None = None
    protocol_version: str | None = None
    error: McpBridgeError | None = None
    stop: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)

    @property
    def alive(self) -> bool:
        """Whether calls may use this session now."""
        # A transport fault (the server exited while idle, say) retires the session:
        # the next call starts a fresh one instead of failing on the dead one.
        return (
            self.client is not None
            and self.state.fault is None
            and not self.stop.is_set()
            and not self.done.is_set()
        )

    def fault_reason(self, exc: BaseException | None, *, stderr: bool = True) -> str:
        """Why the session failed: the transport's fault or ``exc``, exit status, stderr."""
        state = self.state
        reason = state.fault or (
            describe_exception(exc, prefer=TELLING_ERRORS)
            if exc is not None
            else "the session ended"
        )
        if state.returncode is not None:
            reason = f"{reason}; exit status {state.returncode}"
        tail = state.stderr_tail() if stderr else ""
        if tail:
            reason = f"{reason}; stderr: {tail}"
        return clip(reason)


def _transport_cm(
    options: BridgeOptions, state: WireState
) -> AbstractAsyncContextManager[TransportStreams]:
    state.server_id = options.server_id
    if isinstance(options.transport, StdioTransport):
        return open_stdio_streams(
            options.transport,
            max_message_bytes=options.max_result_bytes,
            state=state,
            write_stall_s=options.connect_timeout_s,
            max_server_requests=options.max_server_requests,
            server_id=options.server_id,
        )
    return open_http_streams(
        options.transport,
        max_message_bytes=options.max_result_bytes,
        connect_timeout_s=options.connect_timeout_s,
        state=state,
        max_server_requests=options.max_server_requests,
    )


def _client(options: BridgeOptions, conn: Connection, message_handler: MessageHandlerFnT) -> Client:
    sid = options.server_id
    # Each capability is declared only when its callback is given.
    return Client(
        _transport_cm(options, conn.state),
        mode=options.protocol,
        message_handler=message_handler,
        cache=None,
        client_info=mcp_types.Implementation(name="prism-mcp", version="0.1.0"),
        elicitation_callback=make_elicitation_callback(sid, options.elicit)
        if options.elicit is not None
        else None,
        sampling_callback=make_sampling_callback(sid, options.sample)
        if options.sample is not None
        else None,
        list_roots_callback=make_roots_callback(sid, options.roots)
        if options.roots is not None
        else None,
        logging_callback=make_logging_callback(sid, options.on_log)
        if options.on_log is not None
        else None,
        log_level="info" if options.on_log is not None else None,
        extensions=[TasksExtension()],
    )


@attrs.define(eq=False)
class Sessions:
    """The bridge's sessions: the current one, started lazily, replaced after a fault.

    ``on_announce(conn)`` is called when a session says the tool list changed;
    ``on_reconnect(conn)`` runs after a fresh session replaced a failed one.
    """

    options: BridgeOptions
    nursery: trio.Nursery
    on_announce: Callable[[Connection], None]
    on_reconnect: Callable[[Connection], Awaitable[None]]
    current: Connection | None = None
    closed: bool = False
    _connections: list[Connection] = attrs.field(factory=list)
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    async def connection(self) -> Connection:
        """The live session, connecting first when there is none.

        Raises:
            McpBridgeError: closed, or no session within ``connect_timeout_s``.
        """
        conn = self.current
        if conn is not None and conn.alive:
            return conn
        async with self._lock:
            if self.closed:
                raise McpBridgeError(self.options.server_id, "the bridge is closed")
            conn = self.current
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                conn.stop.set()
            fresh = Connection()
            self._connections.append(fresh)
            self._connections = [c for c in self._connections if not c.done.is_set() or c is fresh]
            await self.nursery.start(self._run, fresh)
            if fresh.error is not None:
                raise fresh.error
            self.current = fresh
            if conn is not None:
                await self.on_reconnect(fresh)
            return fresh

    async def close(self) -> None:
        """Stop every session and wait for them (shielded, bounded); idempotent."""
        if self.closed:
            return
        self.closed = True
        with trio.CancelScope(shield=True):
            for conn in self._connections:
                conn.stop.set()
            with trio.move_on_after(_CLOSE_TIMEOUT_S):
                for conn in list(self._connections):
                    await conn.done.wait()
        self.nursery.cancel_scope.cancel()

    async def _run(
        self, conn: Connection, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        options = self.options
        started = False
        failure: BaseException | None = None
        # This task (and the SDK's tasks it starts: the stdio reader, the standalone
        # HTTP stream) serves no one call, whichever call's task started the session.
        forget_calls()
        try:
            with trio.CancelScope() as connecting:
                connecting.deadline = trio.current_time() + options.connect_timeout_s
                client = _client(options, conn, self._message_handler(conn))
                async with client:
                    # The bridge checks structuredContent itself; the SDK's own check
                    # would re-list tools unbounded for an unlisted name and raise the
                    # whole result away on a mismatch.
                    client.session.validate_tool_result = _skip_sdk_validation  # type: ignore[method-assign,assignment]
                    conn.raw = install_fast_call_tool(client.session, conn.state.direct)
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
                    + (f" ({conn.fault_reason(None)})" if conn.state.fault else ""),
                )
        except Exception as exc:
            failure = exc
            self._ended(conn, exc, started=started)
        except BaseExceptionGroup as group:
            # The session's failure (the server exited, say) and the host's cancellation
            # arrive together, as one group that is no Exception. The failure is the
            # session's and is recorded as any other; only the cancellation goes on (the
            # host's scope ends it), so no MCP error escapes a cancelled block.
            cancelled, rest = group.split(trio.Cancelled)
            if cancelled is None or not isinstance(rest, Exception):
                raise  # no cancellation, or more than errors (KeyboardInterrupt)
            failure = rest
            self._ended(conn, rest, started=started)
            raise cancelled from None
        finally:
            conn.client = None if not started else conn.client
            conn.done.set()
        if not started:
            if conn.error is None:
                conn.error = McpBridgeError(options.server_id, "the session ended during connect")
                conn.error.__cause__ = failure
            task_status.started()

    def _ended(self, conn: Connection, exc: Exception, *, started: bool) -> None:
        """Record why a session failed to connect, or log why a connected one ended."""
        server_id = self.options.server_id
        if not started:
            conn.error = McpBridgeError(server_id, f"could not connect: {conn.fault_reason(exc)}")
            conn.error.__cause__ = exc
        else:
            _log.debug("MCP session for %s ended: %r", server_id, exc)

    def _message_handler(self, conn: Connection) -> MessageHandlerFnT:
        on_complete = self.options.on_elicitation_complete

        async def handle(message: object) -> None:
            root = getattr(message, "root", message)
            method = getattr(root, "method", None)
            if method == _LIST_CHANGED:
                self.on_announce(conn)
            elif method == _ELICITATION_COMPLETE and on_complete is not None:
                params = getattr(root, "params", None)
                elicitation_complete(self.options.server_id, params, on_complete)
            await trio.lowlevel.checkpoint()

        return handle

    async def _listen(
        self,
        conn: Connection,
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
                    self.on_announce(conn)
        except Exception:
            _log.debug("no list-changed subscription on %s", self.options.server_id, exc_info=True)
        if not subscribed:
            task_status.started()
