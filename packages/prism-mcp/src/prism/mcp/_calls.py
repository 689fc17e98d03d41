"""Tool calls: one ``tools/call`` under the bridge's deadlines, byte limit and output check."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import attrs
import mcp_types
import trio

from mcp.shared.exceptions import MCPError
from prism.core import JsonObject, JsonValue, ToolResult
from prism.core.text import clip, describe_exception

from ._callbacks import calling, url_elicitations
from ._content import map_call_result, map_plain_result
from ._errors import TELLING_ERRORS, McpBridgeError
from ._fastcall import plain_answer
from ._gate import attach, attach_raw
from ._options import BridgeOptions
from ._output import OutputChecker
from ._session import Sessions
from ._tasks import call_progress, run_legacy_task

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp import Client
    from mcp.shared.dispatcher import ProgressFnT
    from prism.core import ToolExecutionContext

    from ._annotations import McpToolInfo
    from ._fastcall import RawCalls
    from ._session import Connection

__all__ = ["Caller", "McpStartedCall"]

_otel: object = None  # the OpenTelemetry API modules once looked up; False: not installed


def trace_meta() -> mcp_types.RequestParamsMeta | None:
    """The W3C trace context of the current span, for a request's ``_meta``.

    ``traceparent`` (and ``tracestate``) go in ``params._meta`` as the
    OpenTelemetry conventions for MCP say, on every transport; ``None`` when
    OpenTelemetry is not installed or no span is current.
    """
    global _otel
    if _otel is None:
        try:
            from opentelemetry import propagate, trace
        except ImportError:
            _otel = False
        else:
            _otel = (propagate, trace)
    if _otel is False:
        return None
    propagate, trace = _otel  # type: ignore[misc]
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return mcp_types.RequestParamsMeta(**carrier) if carrier else None  # type: ignore[typeddict-item]


_log = logging.getLogger("prism.mcp")
_CHECK_ON_THREAD = 4096
"""A result of more objects and arrays than this is mapped and checked on a worker thread."""


@attrs.define(eq=False)
class Caller:
    """Runs the bridge's tool calls on its current session."""

    options: BridgeOptions
    sessions: Sessions
    checker: OutputChecker
    # The calls started (Caller.start) whose answer has not come, and the scope of the
    # task that watches their deadlines (None: no task does)
    _started: dict[McpStartedCall, None] = attrs.field(factory=dict, init=False)
    _watching: trio.CancelScope | None = attrs.field(default=None, init=False)

    async def call(
        self,
        remote: str,
        arguments: JsonObject,
        ctx: ToolExecutionContext,
        output_schema: JsonObject | None,
        info: McpToolInfo,
    ) -> ToolResult:
        """Call ``remote`` on the server; every failure is an error result, never raised.

        ``output_schema`` (when the bridge can check it) is checked against the
        result's ``structuredContent``; a task-required tool runs as a task.
        """
        options = self.options
        details: dict[str, JsonValue] = {
            "mcp_server": options.server_id,
            "mcp_tool": remote,
            "mcp_definition_hash": info.definition_hash,
        }
        if self.sessions.closed:
            return ToolResult.error(
                f"MCP server {options.server_id} is closed", mcp_error="closed", **details
            )
        try:
            conn = await self.sessions.connection()
        except McpBridgeError as exc:
            return ToolResult.error(
                f"MCP tool {remote} could not run: {exc.reason}", mcp_error="connect", **details
            )
        client = conn.client
        if client is None:
            return ToolResult.error(
                f"MCP tool {remote} could not run: the session closed", **details
            )
        run = McpStartedCall(
            self, conn, client, remote, arguments, ctx, output_schema, info, details
        )
        run.raw_calls = conn.raw if info.task_support != "required" else None
        with trio.CancelScope(deadline=run.deadline) as scope:
            run.scope = scope
            # A 2026-07-28 server may answer with a task: the SDK hands it to the
            # tasks extension's claim, which reports its polls here.
            progress = call_progress.set(run.on_progress)
            try:
                with calling(ctx.call.id):
                    await run.send()
            except Exception as exc:
                run.failure = exc
            finally:
                run.ended = True
                call_progress.reset(progress)
        return await run.finish(scope.cancelled_caught)

    def start(
        self,
        remote: str,
        arguments: JsonObject,
        ctx: ToolExecutionContext,
        output_schema: JsonObject | None,
        info: McpToolInfo,
        done: Callable[[ToolResult], None],
    ) -> McpStartedCall | None:
        """:meth:`call`, written now without waiting, its result to ``done`` (once).

        Only a call :meth:`call` would send past the SDK's client on a live
        stdio session, its line written at once; ``None`` for any other, with
        nothing sent (:meth:`call` it). What the server sends for it is taken
        by the session's reader: a plain answer's result goes to ``done``
        from there; anything else (another answer, an error, the session
        ending) is finished as :meth:`call` finishes it, in a task of the
        bridge, and so is a call past its deadline (the server told first).
        """
        sessions = self.sessions
        conn = sessions.current
        if sessions.closed or conn is None or not conn.alive or info.task_support == "required":
            return None
        client = conn.client
        if client is None or conn.raw is None:
            return None
        details: dict[str, JsonValue] = {
            "mcp_server": self.options.server_id,
            "mcp_tool": remote,
            "mcp_definition_hash": info.definition_hash,
        }
        run = McpStartedCall(
            self, conn, client, remote, arguments, ctx, output_schema, info, details
        )
        run.raw_calls = conn.raw
        return run if run.start(done) else None

    def can_start(self) -> bool:
        """Whether :meth:`start` can start calls now (a live stdio session)."""
        sessions = self.sessions
        conn = sessions.current
        return not sessions.closed and conn is not None and conn.alive and conn.raw is not None

    def _watch(self, run: McpStartedCall) -> None:
        """Watch ``run``'s deadline (one task watches every started call's)."""
        self._started[run] = None
        scope = self._watching
        if scope is None:
            self._watching = trio.CancelScope(deadline=run.deadline)
            self.sessions.nursery.start_soon(self._watch_deadlines)
        elif run.deadline < scope.deadline:
            scope.deadline = run.deadline

    async def _watch_deadlines(self) -> None:
        """Time out each started call whose deadline passed, until none is left."""
        started = self._started
        try:
            while started:
                scope = self._watching
                assert scope is not None
                with scope:
                    await trio.sleep_forever()
                now = trio.current_time()
                for run in [run for run in started if run.deadline <= now]:
                    del started[run]
                    run.timed_out()
                if started:
                    self._watching = trio.CancelScope(deadline=min(run.deadline for run in started))
        finally:
            self._watching = None

    async def _sdk_call(
        self,
        client: Client,
        remote: str,
        arguments: JsonObject,
        info: McpToolInfo,
        on_progress: ProgressFnT,
        meta: mcp_types.RequestParamsMeta | None,
    ) -> mcp_types.CallToolResult:
        """The call through the SDK's client (a task-required tool as a task)."""
        if info.task_support == "required":
            return await run_legacy_task(
                client.session, remote, arguments, self.options.max_call_s, on_progress
            )
        return await client.call_tool(remote, arguments, progress_callback=on_progress, meta=meta)

    def _finish(
        self,
        remote: str,
        name: str,
        output_schema: JsonObject | None,
        result: mcp_types.CallToolResult,
        details: dict[str, JsonValue],
    ) -> ToolResult:
        given = result.structured_content is not None or (
            "structured_content" in result.model_fields_set
        )
        return self._checked(
            remote,
            name,
            output_schema,
            map_call_result(result, details),
            result.structured_content is not None,
            given,
            details,
        )

    def _finish_plain(
        self,
        remote: str,
        name: str,
        output_schema: JsonObject | None,
        plain: dict[str, Any],
        details: dict[str, JsonValue],
    ) -> ToolResult:
        """:meth:`_finish` of a plain answer (``_fastcall.plain_answer``), from its dict."""
        return self._checked(
            remote,
            name,
            output_schema,
            map_plain_result(plain, details),
            plain.get("structuredContent") is not None,
            "structuredContent" in plain,
            details,
        )

    def _checked(
        self,
        remote: str,
        name: str,
        output_schema: JsonObject | None,
        mapped: ToolResult,
        structured: bool,
        given: bool,
        details: dict[str, JsonValue],
    ) -> ToolResult:
        """The mapped result, refused as a non-finite ``structuredContent`` or by the output check.

        ``structured``: the answer's ``structuredContent`` is not null;
        ``given``: the answer has the member at all.
        """
        if mapped.structured is None and structured:
            # NaN, Infinity or a number past a float's range (1e400): the parsers take
            # them, no JSON holds them. Refused, never passed on without its
            # structured part as if it were what the server said.
            return ToolResult.error(
                f"MCP tool {remote} failed: result refused: its structuredContent holds "
                "a non-finite number (NaN, Infinity, or past a float's range), which no "
                "JSON holds",
                mcp_error="server_error",
                **details,
            )
        if output_schema is not None and not mapped.is_error:
            return self._check_output(remote, name, output_schema, mapped, given, details)
        return mapped

    def _check_output(
        self,
        remote: str,
        name: str,
        schema: JsonObject,
        mapped: ToolResult,
        given: bool,
        details: dict[str, JsonValue],
    ) -> ToolResult:
        if not given:
            return ToolResult.error(
                f"MCP tool {remote} declares an outputSchema but returned no structuredContent",
                mcp_error="output_invalid",
                **details,
            )
        mismatch = self.checker.check(schema, mapped.structured, tool=name)
        if mismatch is None:
            return mapped
        where = mismatch.path or "$"
        return ToolResult.error(
            f"MCP tool {remote} returned structuredContent that does not match its "
            f"outputSchema at {where}: {clip(mismatch.message, 500)}",
            mcp_error="output_invalid",
            path=where,
            **details,
        )

    def _call_failed(
        self,
        conn: Connection,
        remote: str,
        failure: BaseException | None,
        details: dict[str, JsonValue],
    ) -> ToolResult:
        state = conn.state
        if self.sessions.closed:
            return ToolResult.error(
                f"MCP tool {remote} was interrupted: the bridge to {self.options.server_id} closed",
                mcp_error="closed",
                **details,
            )
        if state.fault is not None:
            # The transport refused the session (too large, garbage, server gone):
            # close it; the next call starts a fresh one.
            conn.stop.set()
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
                f"MCP tool {remote} failed: {conn.fault_reason(failure, stderr=False)}; "
                "the session was closed and the next call reconnects",
                mcp_error="connection_lost",
                **details,
            )
        if (
            isinstance(failure, MCPError)
            and failure.code == mcp_types.CONNECTION_CLOSED
            and state.streams_closed
        ):
            # The SDK's own code for a session gone. Alone, the same code is the
            # server's answer (its generic error, often): a failed call, not the session's end.
            conn.stop.set()
            return ToolResult.error(
                f"MCP tool {remote} failed: the connection to the server closed; "
                "the next call reconnects",
                mcp_error="connection_lost",
                **details,
            )
        if isinstance(failure, MCPError) and failure.code == mcp_types.URL_ELICITATION_REQUIRED:
            wanted = url_elicitations(failure.data)
            if wanted:
                return ToolResult.error(
                    f"MCP tool {remote} needs the user to complete {len(wanted)} URL "
                    "elicitation(s) first (a sign-in, say); the call may be retried after",
                    mcp_error="url_elicitation_required",
                    elicitations=wanted,
                    **details,
                )
        text = (
            describe_exception(failure, prefer=TELLING_ERRORS)
            if failure is not None
            else "no result"
        )
        return ToolResult.error(
            f"MCP tool {remote} failed: {text}", mcp_error="server_error", **details
        )


class McpStartedCall:
    """A bridged tool call started by :meth:`McpToolBridge.start_call`, its result to come.

    Its result goes to the ``done`` callback given there, once: from the task
    that read the server's answer, or from a task of the bridge (an answer
    that needs more work, a timeout). :meth:`cancel` gives the call up.
    """

    __slots__ = (
        "_caller",
        "_client",
        "_conn",
        "_done",
        "_nodes",
        "_request_id",
        "arguments",
        "ctx",
        "deadline",
        "details",
        "ended",
        "failure",
        "hard",
        "info",
        "output_schema",
        "plain",
        "raw_calls",
        "remote",
        "result",
        "scope",
    )

    def __init__(
        self,
        caller: Caller,
        conn: Connection,
        client: Client,
        remote: str,
        arguments: JsonObject,
        ctx: ToolExecutionContext,
        output_schema: JsonObject | None,
        info: McpToolInfo,
        details: dict[str, JsonValue],
    ) -> None:
        options = caller.options
        now = trio.current_time()
        self._caller = caller
        self._conn = conn
        self._client = client
        self.remote = remote
        self.arguments = arguments
        self.ctx = ctx
        self.output_schema = output_schema
        self.info = info
        self.details = details
        self.hard = now + options.max_call_s if options.max_call_s is not None else math.inf
        self.deadline = min(now + options.call_timeout_s, self.hard)
        self.scope: trio.CancelScope | None = None
        self.raw_calls: RawCalls | None = None
        self.failure: Exception | None = None
        self.result: mcp_types.CallToolResult | None = None
        self.plain: dict[str, Any] | None = None
        self._nodes: int | None = None  # the plain answer's, once attached
        self.ended = False
        self._request_id: str | None = None
        self._done: Callable[[ToolResult], None] | None = None

    def cancel(self) -> None:
        """Give the call up: its ``done`` is not called; the server is told, if it was asked."""
        self._done = None
        if self.scope is not None:  # (the rest of the call runs in a task of the bridge)
            self.scope.cancel()
        if self.ended:
            return
        self.ended = True
        self._caller._started.pop(self, None)
        raw_calls = self.raw_calls
        request_id = self._request_id
        if raw_calls is not None and request_id is not None and raw_calls.abandon(request_id):
            self._caller.sessions.nursery.start_soon(raw_calls.send_cancel, request_id)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The SDK's progress callback of the call (see :meth:`progressed`)."""
        self.progressed(progress, total, message)

    def progressed(self, progress: float, total: float | None, message: str | None) -> None:
        """The server reported progress: the call's deadline moves, the progress is reported."""
        if self.ended:
            return  # (the SDK runs a callback in a task of its own: the call may be over)
        self.deadline = min(trio.current_time() + self._caller.options.call_timeout_s, self.hard)
        if self.scope is not None:
            self.scope.deadline = self.deadline
        self.ctx.report_progress(
            clip(message, 500) if isinstance(message, str) else None,
            progress=progress,
            total=total,
        )

    async def send(self) -> None:
        """Send the call and take its answer, in the calling task (see :meth:`Caller.call`)."""
        caller, raw_calls = self._caller, self.raw_calls
        client, remote, arguments, info = self._client, self.remote, self.arguments, self.info
        if raw_calls is None:
            self.result = await caller._sdk_call(
                client, remote, arguments, info, self.on_progress, trace_meta()
            )
            return
        meta = trace_meta()
        if meta is not None or not raw_calls.usable(remote, arguments):
            self.result = await caller._sdk_call(
                client, remote, arguments, info, self.on_progress, meta
            )
            return
        # Sent past the SDK's client; a plain answer is mapped here.
        outcome: dict[str, Any] | Exception
        try:
            outcome = await raw_calls.send(remote, arguments, self.on_progress)
        except Exception as exc:
            outcome = exc
        await self._take(outcome)

    async def _take(self, outcome: dict[str, Any] | Exception) -> None:
        raw_calls = self.raw_calls
        assert raw_calls is not None
        if type(outcome) is dict:
            self.plain = plain_answer(outcome, raw_calls.version)
        if self.plain is None:
            # Any other answer, or an error: the SDK's, as if it sent it.
            with raw_calls.replay(outcome):
                self.result = await self._caller._sdk_call(
                    self._client, self.remote, self.arguments, self.info, self.on_progress, None
                )

    async def finish(self, timed_out: bool) -> ToolResult:
        """The call's result, once its answer was taken (or ``timed_out``)."""
        caller, remote, details = self._caller, self.remote, self.details
        if timed_out:
            return self._timeout_result()
        plain = self.plain
        name = self.info.tool_name
        if plain is not None and self.failure is None:
            nodes = self._nodes if self._nodes is not None else attach_raw(plain)
            if nodes > _CHECK_ON_THREAD:
                return await trio.to_thread.run_sync(
                    caller._finish_plain, remote, name, self.output_schema, plain, details
                )
            return caller._finish_plain(remote, name, self.output_schema, plain, details)
        result = self.result
        if self.failure is not None or result is None:
            return caller._call_failed(self._conn, remote, self.failure, details)
        if attach(result) > _CHECK_ON_THREAD:
            # Mapping and checking a large structuredContent (a refusal by the
            # schema's instance limits walks it again) would hold the event loop.
            return await trio.to_thread.run_sync(
                caller._finish, remote, name, self.output_schema, result, details
            )
        return caller._finish(remote, name, self.output_schema, result, details)

    def _timeout_result(self) -> ToolResult:
        options = self._caller.options
        if trio.current_time() >= self.hard:
            text = f"MCP tool {self.remote} ran longer than max_call_s={options.max_call_s:g}s"
            limit = "max_call_s"
        else:
            text = (
                f"MCP tool {self.remote} timed out: no result or progress within "
                f"call_timeout_s={options.call_timeout_s:g}s"
            )
            limit = "call_timeout_s"
        return ToolResult.error(
            f"{text}; the server was sent a cancellation",
            mcp_error="timeout",
            limit=limit,
            **self.details,
        )

    def start(self, done: Callable[[ToolResult], None]) -> bool:
        """Write the call now, its result to ``done`` (see :meth:`Caller.start`)."""
        raw_calls = self.raw_calls
        if (
            raw_calls is None
            or trace_meta() is not None
            or not raw_calls.usable(self.remote, self.arguments)
        ):
            return False
        with calling(self.ctx.call.id):  # (the gate notes the request as this call's)
            request_id = raw_calls.start(self.remote, self.arguments, self._put)
        if request_id is None:
            return False
        self._request_id = request_id
        self._done = done
        self._caller._watch(self)
        return True

    def _put(self, item: object) -> None:
        """What the server sent for the call, in the session reader's task."""
        if type(item) is tuple:
            self.progressed(*item)
            return
        if self.ended:
            return
        self._caller._started.pop(self, None)
        raw_calls = self.raw_calls
        assert raw_calls is not None
        outcome: dict[str, Any] | Exception
        try:
            outcome = raw_calls.result(item)
        except Exception as exc:
            outcome = exc
        if type(outcome) is dict:
            plain = self.plain = plain_answer(outcome, raw_calls.version)
            if plain is not None:
                nodes = self._nodes = attach_raw(plain)
                if nodes <= _CHECK_ON_THREAD:
                    self.ended = True
                    self._deliver(
                        self._caller._finish_plain(
                            self.remote,
                            self.info.tool_name,
                            self.output_schema,
                            plain,
                            self.details,
                        )
                    )
                    return
        # Anything else: the rest of the call as the calling task would run it.
        self._caller.sessions.nursery.start_soon(self._rest, outcome)

    async def _rest(self, outcome: dict[str, Any] | Exception) -> None:
        result: ToolResult | None = None
        try:
            with trio.CancelScope(deadline=self.deadline) as scope:
                self.scope = scope
                progress = call_progress.set(self.on_progress)
                try:
                    with calling(self.ctx.call.id):
                        if self.plain is None:
                            await self._take(outcome)
                except Exception as exc:
                    self.failure = exc
                finally:
                    self.ended = True
                    call_progress.reset(progress)
            if self._done is not None:
                result = await self.finish(scope.cancelled_caught)
        except trio.Cancelled:
            result = ToolResult.error(
                f"MCP tool {self.remote} was interrupted: the bridge to "
                f"{self._caller.options.server_id} closed",
                mcp_error="closed",
                **self.details,
            )
            raise
        except Exception as exc:  # (a bug: the call still gets its answer)
            _log.exception("MCP tool %s: finishing its call failed", self.remote)
            result = ToolResult.error(
                f"MCP tool {self.remote} failed: {describe_exception(exc)}",
                mcp_error="server_error",
                **self.details,
            )
        finally:
            if result is not None:
                self._deliver(result)

    def timed_out(self) -> None:
        """Its deadline passed (the deadline watcher): the server is told, then ``done``."""
        if self.ended:
            return
        self.ended = True
        raw_calls = self.raw_calls
        request_id = self._request_id
        assert raw_calls is not None
        assert request_id is not None
        if raw_calls.abandon(request_id):
            self._caller.sessions.nursery.start_soon(self._time_out, raw_calls, request_id)

    async def _time_out(self, raw_calls: RawCalls, request_id: str) -> None:
        await raw_calls.send_cancel(request_id)
        self._deliver(self._timeout_result())

    def _deliver(self, result: ToolResult) -> None:
        done, self._done = self._done, None
        if done is not None:
            try:
                done(result)
            except Exception:
                _log.exception("the done callback of MCP tool %s raised", self.remote)
