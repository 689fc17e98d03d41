"""The gated dispatcher: one call through the fixed lifecycle.

::

    middleware on_tool_call        (may rewrite or block)
    -> lookup + filters + "arguments are a JSON object"   (again after a rewrite)
    -> permission  tool:<name>:execute
    -> validator
    -> tool.execute                (its execution policy runs inside)
    -> middleware on_tool_result
    -> events + ledger
"""

from __future__ import annotations

import inspect
import time
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._abort import AbortSignal
from ._content import ToolCall, ToolResult
from ._events import (
    BlockedReason,
    EventSink,
    ToolExecutionBlocked,
    ToolExecutionError,
    ToolExecutionFinished,
    ToolExecutionStarted,
)
from ._ledger import RunLedger, ToolCallStatus
from ._middleware import MiddlewareRegistry
from ._policy import PermissionPolicy, PermissionRequest
from ._tools import (
    ToolDefinition,
    ToolExecutionContext,
    ToolFilter,
    ToolRegistry,
    emit_event,
    is_tool_allowed,
)
from ._validation import ErrorInfo, ToolValidator

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._json import JsonObject

__all__ = ["BlockedReason", "DispatchOptions", "dispatch_tool_call"]


_MAX_ERROR_CHARS = 2000


def _check_registry(_instance: object, _attribute: object, value: Any) -> None:
    if not isinstance(value, ToolRegistry):
        raise TypeError(f"DispatchOptions.registry must be a ToolRegistry, got {value!r}")


def _filters(value: Sequence[ToolFilter]) -> tuple[ToolFilter, ...]:
    items = tuple(value)
    for item in items:
        if not isinstance(item, ToolFilter):
            raise TypeError(f"DispatchOptions.filters takes ToolFilter values, got {item!r}")
    return items


@attrs.frozen(kw_only=True)
class DispatchOptions:
    """Everything a dispatch needs besides the call.

    Attributes:
        registry: where tools are looked up.
        filters: name filters; every one must allow the tool.
        permission: checked as ``tool:<name>:execute``; ``None`` allows.
        validate: argument validator; ``None`` skips validation.
        middleware: call and result hooks.
        events: receives every event.
        ledger: receives one record per call.
        signal: aborting it cancels the running tool; a pre-aborted signal runs nothing.
        metadata: handed to tools as ``context.metadata``.
    """

    registry: ToolRegistry = attrs.field(validator=_check_registry)
    filters: tuple[ToolFilter, ...] = attrs.field(default=(), converter=_filters)
    permission: PermissionPolicy | None = None
    validate: ToolValidator | None = None
    middleware: MiddlewareRegistry | None = None
    events: EventSink | None = None
    ledger: RunLedger | None = None
    signal: AbortSignal | None = None
    metadata: dict[str, object] = attrs.field(factory=dict)


class _Blocked(Exception):
    def __init__(
        self, reason: BlockedReason, message: str, result: ToolResult | None = None
    ) -> None:
        self.reason = reason
        self.message = message
        self.result = result


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def _arguments_error(arguments: object) -> str | None:
    if type(arguments) is not dict:
        if isinstance(arguments, dict):
            return None if all(type(k) is str for k in arguments) else "keys must be strings"
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    for key in arguments:
        if type(key) is not str:
            return f"arguments must be a JSON object with string keys, got key {key!r}"
    return None


async def _run_call_hooks(
    middleware: MiddlewareRegistry, call: ToolCall, ctx: ToolExecutionContext
) -> ToolCall:
    for hook in middleware.call_hooks:
        try:
            outcome = hook(call, ctx)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except trio.Cancelled:
            raise
        except Exception as exc:
            raise _Blocked("tool_denied", f"call middleware failed: {_describe(exc)}") from exc
        if outcome is None:
            continue
        if isinstance(outcome, ToolResult):
            message = outcome.joined_text or "blocked by middleware"
            result = outcome if outcome.is_error else attrs.evolve(outcome, is_error=True)
            raise _Blocked("tool_denied", message, result)
        if isinstance(outcome, ToolCall):
            call = outcome
            ctx.call = call
            continue
        raise _Blocked(
            "tool_denied",
            f"call middleware returned {type(outcome).__name__}, "
            "not a ToolCall, ToolResult or None",
        )
    return call


async def _gate(
    call: ToolCall, options: DispatchOptions, ctx: ToolExecutionContext
) -> tuple[ToolCall, ToolDefinition, JsonObject]:
    """Run every gate before execute; raise _Blocked with the first refusal."""
    if options.middleware is not None and options.middleware.call_hooks:
        call = await _run_call_hooks(options.middleware, call, ctx)
    tool = options.registry.get(call.name)
    if tool is None:
        raise _Blocked("unknown_tool", f"unknown tool: {call.name}")
    if options.filters and not is_tool_allowed(call.name, *options.filters):
        raise _Blocked("tool_denied", f"tool {call.name} is not allowed here")
    problem = _arguments_error(call.arguments)
    if problem is not None:
        raise _Blocked("invalid_arguments", f"invalid arguments for {call.name}: {problem}")
    arguments: JsonObject = call.arguments  # type: ignore[assignment]
    if options.permission is not None:
        request = PermissionRequest(kind="tool", target=call.name, action="execute")
        try:
            decision = options.permission.check(request)
            if inspect.isawaitable(decision):
                decision = await decision
        except trio.Cancelled:
            raise
        except Exception as exc:
            raise _Blocked(
                "permission_denied", f"permission check failed: {_describe(exc)}"
            ) from exc
        if not decision.allowed:
            reason = f": {decision.reason}" if decision.reason else ""
            raise _Blocked("permission_denied", f"permission denied for {request.key}{reason}")
    if options.validate is not None:
        try:
            outcome = options.validate(tool, arguments, ctx)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except trio.Cancelled:
            raise
        except Exception as exc:
            raise _Blocked("validation_failed", f"validator failed: {_describe(exc)}") from exc
        if outcome is not None:
            if isinstance(outcome, ErrorInfo):
                raise _Blocked("validation_failed", outcome.message)
            if isinstance(outcome, str):
                raise _Blocked("validation_failed", outcome)
            raise _Blocked(
                "validation_failed",
                f"validator returned {type(outcome).__name__}, not None, str or ErrorInfo",
            )
    return call, tool, arguments


async def _execute(
    tool: ToolDefinition, arguments: JsonObject, ctx: ToolExecutionContext
) -> tuple[ToolResult, str | None]:
    """Run the handler; return the result and, if it raised, the error text."""
    try:
        result = await tool.execute(arguments, ctx)
    except trio.Cancelled:
        raise
    except Exception as exc:
        error = _describe(exc)
        details = getattr(exc, "details", None)
        extra = details if isinstance(details, dict) else {}
        return ToolResult.error(f"tool {tool.name} failed: {error}", error=error, **extra), error
    if not isinstance(result, ToolResult):
        error = f"tool {tool.name} returned {type(result).__name__}, not a ToolResult"
        return ToolResult.error(error, error=error), error
    return result, None


async def _run_result_hooks(
    middleware: MiddlewareRegistry, call: ToolCall, result: ToolResult, ctx: ToolExecutionContext
) -> ToolResult:
    for hook in middleware.result_hooks:
        try:
            outcome = hook(call, result, ctx)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except trio.Cancelled:
            raise
        except Exception as exc:
            return ToolResult.error(f"result middleware failed: {_describe(exc)}")
        if outcome is None:
            continue
        if not isinstance(outcome, ToolResult):
            return ToolResult.error(
                f"result middleware returned {type(outcome).__name__}, not a ToolResult or None"
            )
        result = outcome
    return result


def cancelled_result(call: ToolCall, reason: str | None) -> ToolResult:
    """The result a call gets when a run is aborted before it finished."""
    why = f": {reason}" if reason else ""
    return ToolResult.error(f"tool call {call.name} was cancelled{why}", cancelled=True)


async def dispatch_tool_call(call: ToolCall, options: DispatchOptions) -> ToolResult:
    """Run one call through every gate and return its result; never raises for tool failures.

    A blocked call never reaches ``execute``: it gets an error result that names
    the gate, one :class:`ToolExecutionBlocked` event and a ``blocked`` ledger
    record. A tool that raises gives an error result and a
    :class:`ToolExecutionError` event.

    Cancellation: when ``options.signal`` aborts, the running tool is cancelled
    and the call returns a cancellation error result. If the *caller's* scope is
    cancelled instead, the ledger still gets a ``cancelled`` record and
    :class:`trio.Cancelled` propagates. Checkpoints only where a hook, policy,
    validator or the tool does.
    """
    if not isinstance(call, ToolCall):
        raise TypeError(f"dispatch_tool_call takes a ToolCall, got {type(call).__name__}")
    started_at = time.time()
    t0 = time.perf_counter()
    events = options.events
    ledger = options.ledger
    signal = options.signal
    ctx = ToolExecutionContext(call, events=events, metadata=options.metadata)
    if signal is not None:
        ctx.signal = signal
    if signal is not None and signal.aborted:
        result = cancelled_result(call, signal.reason)
        _finish(options, call, call.arguments, result, "cancelled", None, started_at, t0, None)
        return result
    tool_name = call.name
    arguments: object = call.arguments
    recorded = False
    try:
        try:
            call, tool, checked = await _gate(call, options, ctx)
        except _Blocked as blocked:
            tool_name = ctx.call.name
            result = blocked.result or ToolResult.error(
                blocked.message, blocked_reason=blocked.reason
            )
            if events is not None:
                emit_event(
                    events,
                    ToolExecutionBlocked(
                        call_id=call.id,
                        tool_name=tool_name,
                        reason=blocked.reason,
                        message=blocked.message,
                    ),
                )
            recorded = True
            _finish(
                options,
                ctx.call,
                ctx.call.arguments,
                result,
                "blocked",
                blocked.reason,
                started_at,
                t0,
                None,
                emit=False,
            )
            return result
        tool_name = tool.name
        arguments = checked
        if events is not None:
            emit_event(
                events,
                ToolExecutionStarted(call_id=call.id, tool_name=tool_name, arguments=checked),
            )
        error: str | None = None
        if signal is None:
            result, error = await _execute(tool, checked, ctx)
        else:
            remove = None
            with trio.CancelScope() as scope:
                remove = signal.add_callback(scope.cancel)
                try:
                    result, error = await _execute(tool, checked, ctx)
                finally:
                    remove()
            if scope.cancelled_caught:
                result = cancelled_result(call, signal.reason)
                recorded = True
                _finish(
                    options,
                    call,
                    checked,
                    result,
                    "cancelled",
                    None,
                    started_at,
                    t0,
                    result.joined_text,
                )
                return result
        if options.middleware is not None and options.middleware.result_hooks:
            result = await _run_result_hooks(options.middleware, call, result, ctx)
        status: ToolCallStatus = "error" if result.is_error else "ok"
        recorded = True
        _finish(options, call, checked, result, status, None, started_at, t0, error)
        return result
    finally:
        if not recorded:
            # The caller's scope was cancelled mid-dispatch: the record still lands.
            now = time.time()
            if options.events is not None:
                emit_event(
                    options.events,
                    ToolExecutionError(
                        call_id=call.id,
                        tool_name=tool_name,
                        error="cancelled",
                        duration_s=time.perf_counter() - t0,
                        cancelled=True,
                    ),
                )
            if ledger is not None:
                ledger.record(
                    call_id=call.id,
                    tool_name=tool_name,
                    arguments=arguments,
                    status="cancelled",
                    blocked_reason=None,
                    started_at=started_at,
                    finished_at=now,
                    duration_s=time.perf_counter() - t0,
                    result=None,
                )


def _finish(
    options: DispatchOptions,
    call: ToolCall,
    arguments: object,
    result: ToolResult,
    status: ToolCallStatus,
    blocked_reason: BlockedReason | None,
    started_at: float,
    t0: float,
    error: str | None,
    *,
    emit: bool = True,
) -> None:
    duration = time.perf_counter() - t0
    if emit and options.events is not None:
        if error is None and status != "cancelled":
            event: object = ToolExecutionFinished(
                call_id=call.id, tool_name=call.name, result=result, duration_s=duration
            )
        else:
            event = ToolExecutionError(
                call_id=call.id,
                tool_name=call.name,
                error=error or result.joined_text,
                duration_s=duration,
                cancelled=status == "cancelled",
            )
        emit_event(options.events, event)
    if options.ledger is not None:
        options.ledger.record(
            call_id=call.id,
            tool_name=call.name,
            arguments=arguments,
            status=status,
            blocked_reason=blocked_reason,
            started_at=started_at,
            finished_at=time.time(),
            duration_s=duration,
            result=result,
        )
