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
    from mcp import Client
    from mcp.shared.dispatcher import ProgressFnT
    from prism.core import ToolExecutionContext

    from ._annotations import McpToolInfo
    from ._session import Connection

__all__ = ["Caller"]

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
        raw_calls = conn.raw if info.task_support != "required" else None
        now = trio.current_time()
        hard = now + options.max_call_s if options.max_call_s is not None else math.inf
        failure: Exception | None = None
        result: mcp_types.CallToolResult | None = None
        plain: dict[str, Any] | None = None
        ended = False
        with trio.CancelScope(deadline=min(now + options.call_timeout_s, hard)) as scope:

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                if ended:  # the SDK runs a callback in a task of its own: the call may be over
                    return
                scope.deadline = min(trio.current_time() + options.call_timeout_s, hard)
                ctx.report_progress(
                    clip(message, 500) if isinstance(message, str) else None,
                    progress=progress,
                    total=total,
                )

            # A 2026-07-28 server may answer with a task: the SDK hands it to the
            # tasks extension's claim, which reports its polls here.
            progress = call_progress.set(on_progress)
            try:
                with calling(ctx.call.id):
                    if raw_calls is None:
                        result = await self._sdk_call(
                            client, remote, arguments, info, on_progress, trace_meta()
                        )
                    else:
                        meta = trace_meta()
                        if meta is not None or not raw_calls.usable(remote, arguments):
                            result = await self._sdk_call(
                                client, remote, arguments, info, on_progress, meta
                            )
                        else:
                            # Sent past the SDK's client; a plain answer is mapped here.
                            outcome: dict[str, Any] | Exception
                            try:
                                outcome = await raw_calls.send(remote, arguments, on_progress)
                            except Exception as exc:
                                outcome = exc
                            if type(outcome) is dict:
                                plain = plain_answer(outcome, raw_calls.version)
                            if plain is None:
                                # Any other answer, or an error: the SDK's, as if it sent it.
                                with raw_calls.replay(outcome):
                                    result = await self._sdk_call(
                                        client, remote, arguments, info, on_progress, None
                                    )
            except Exception as exc:
                failure = exc
            finally:
                ended = True
                call_progress.reset(progress)
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
        if plain is not None and failure is None:
            nodes = attach_raw(plain)
            if nodes > _CHECK_ON_THREAD:
                return await trio.to_thread.run_sync(
                    self._finish_plain, remote, info.tool_name, output_schema, plain, details
                )
            return self._finish_plain(remote, info.tool_name, output_schema, plain, details)
        if failure is not None or result is None:
            return self._call_failed(conn, remote, failure, details)
        if attach(result) > _CHECK_ON_THREAD:
            # Mapping and checking a large structuredContent (a refusal by the
            # schema's instance limits walks it again) would hold the event loop.
            return await trio.to_thread.run_sync(
                self._finish, remote, info.tool_name, output_schema, result, details
            )
        return self._finish(remote, info.tool_name, output_schema, result, details)

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
        if isinstance(failure, MCPError) and failure.code == mcp_types.CONNECTION_CLOSED:
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
