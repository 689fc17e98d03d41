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
import logging
import math
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._abort import AbortSignal
from ._asyncio_host import require_trio
from ._content import TextContent, ToolCall, ToolResult
from ._errors import ExecutionDeniedError
from ._events import (
    BlockedReason,
    EventSink,
    ToolExecutionBlocked,
    ToolExecutionError,
    ToolExecutionFinished,
    ToolExecutionStarted,
)
from ._ledger import RunLedger, ToolCallStatus, json_safe, snapshot_json
from ._ledger_decision import (
    DecisionGate,
    DecisionNote,
    blocked_decision,
    current_note,
    decision_from_result,
)
from ._middleware import MiddlewareRegistry
from ._policy import PermissionDecision, PermissionPolicy, PermissionRequest
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

    from ._json import JsonObject, JsonValue

__all__ = ["BlockedReason", "DispatchOptions", "cancelled_result", "dispatch_tool_call"]

_log = logging.getLogger("prism.core")


_MAX_ERROR_CHARS = 2000


def _check_registry(_instance: object, _attribute: object, value: Any) -> None:
    if not isinstance(value, ToolRegistry):
        raise TypeError(f"DispatchOptions.registry must be a ToolRegistry, got {value!r}")


def _check_callable(name: str) -> Any:
    def check(_instance: object, _attribute: object, value: Any) -> None:
        if value is not None and not callable(value):
            raise TypeError(f"DispatchOptions.{name} must be callable or None, got {value!r}")

    return check


def _check_instance(name: str, kind: type) -> Any:
    def check(_instance: object, _attribute: object, value: Any) -> None:
        if value is not None and not isinstance(value, kind):
            raise TypeError(
                f"DispatchOptions.{name} must be a {kind.__name__} or None, got {value!r}"
            )

    return check


def _check_policy(_instance: object, _attribute: object, value: Any) -> None:
    if value is not None and not callable(getattr(value, "check", None)):
        raise TypeError(
            f"DispatchOptions.permission must have a check() method or be None, got {value!r}"
        )


def _filters(value: Sequence[ToolFilter]) -> tuple[ToolFilter, ...]:
    if isinstance(value, ToolFilter):
        return (value,)
    items = tuple(value)
    for item in items:
        if not isinstance(item, ToolFilter):
            raise TypeError(f"DispatchOptions.filters takes ToolFilter values, got {item!r}")
    return items


def _read_only(value: Mapping[str, object]) -> Mapping[str, object]:
    # Every call's tools share it: a tool must not be able to change what the next one sees.
    if isinstance(value, MappingProxyType):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"DispatchOptions.metadata must be a mapping, got {value!r}")
    return MappingProxyType(dict(value))


@attrs.frozen(kw_only=True)
class DispatchOptions:
    """Everything a dispatch needs besides the call.

    Build one per run (or once, and share it): it holds no per-call state.

    Attributes:
        registry: where tools are looked up.
        filters: name filters; every one must allow the tool.
        permission: checked as ``tool:<name>:execute``; ``None`` allows.
        validate: argument validator; ``None`` skips validation.
        middleware: call and result hooks.
        events: receives every event; a sink that raises is logged, never fatal.
        ledger: receives one record per call.
        signal: aborting it cancels the running call; a pre-aborted signal runs nothing.
        metadata: handed to tools as ``context.metadata`` (a read-only copy).

    Raises:
        TypeError: an option has the wrong type (the message names the option).
    """

    registry: ToolRegistry = attrs.field(validator=_check_registry)
    filters: tuple[ToolFilter, ...] = attrs.field(default=(), converter=_filters)
    permission: PermissionPolicy | None = attrs.field(default=None, validator=_check_policy)
    validate: ToolValidator | None = attrs.field(
        default=None, validator=_check_callable("validate")
    )
    middleware: MiddlewareRegistry | None = attrs.field(
        default=None, validator=_check_instance("middleware", MiddlewareRegistry)
    )
    events: EventSink | None = attrs.field(default=None, validator=_check_callable("events"))
    ledger: RunLedger | None = attrs.field(
        default=None, validator=_check_instance("ledger", RunLedger)
    )
    signal: AbortSignal | None = attrs.field(
        default=None, validator=_check_instance("signal", AbortSignal)
    )
    metadata: Mapping[str, object] = attrs.field(factory=dict, converter=_read_only)


class _Blocked(Exception):
    """Internal: a gate refused the call (never escapes the dispatcher)."""

    def __init__(
        self,
        reason: BlockedReason,
        message: str,
        result: ToolResult | None = None,
        info: ErrorInfo | None = None,
        gate: DecisionGate | None = None,
    ) -> None:
        self.reason = reason
        self.message = message
        self.result = result
        self.info = info
        self.gate = gate


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return _clip(text)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


_SCALARS = frozenset({str, int, bool, type(None)})


def _arguments_error(arguments: object) -> str | None:
    """Why ``arguments`` is not a JSON object, or ``None`` when it is one.

    Walks the whole value without recursion (hostile nesting cannot blow the
    stack): keys must be strings, leaves must be JSON scalars, floats finite.
    """
    if type(arguments) is dict:
        # Fast path for the usual flat object of scalars.
        for key, item in arguments.items():
            if type(key) is not str:
                break
            kind = type(item)
            if kind is str or kind is int or kind is bool or item is None:
                continue
            if kind is float and item - item == 0:  # finite: inf - inf and nan are nan
                continue
            break
        else:
            return None
    elif not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    stack: list[object] = [arguments]
    pop = stack.pop
    push = stack.append
    while stack:
        value = pop()
        kind = type(value)
        if kind in _SCALARS:
            continue
        if kind is float:
            if not math.isfinite(value):  # type: ignore[arg-type]
                return f"arguments must be finite JSON numbers, got {value!r}"
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                if type(key) is not str:
                    return f"arguments must have string keys, got key {key!r}"
                push(item)
            continue
        if isinstance(value, list):
            for item in value:
                push(item)
            continue
        if isinstance(value, (str, int)):  # subclasses (IntEnum, str enums) are JSON too
            continue
        if isinstance(value, float):
            push(float(value))
            continue
        return f"arguments must hold only JSON values, got {type(value).__name__}"
    return None


_requests: dict[str, PermissionRequest] = {}


def _tool_request(name: str) -> PermissionRequest:
    """The (immutable, so shareable) ``tool:<name>:execute`` request."""
    request = _requests.get(name)
    if request is None:
        if len(_requests) >= 1024:
            _requests.clear()
        request = PermissionRequest(kind="tool", target=name, action="execute")
        _requests[name] = request
    return request


async def _run_call_hooks(
    middleware: MiddlewareRegistry, call: ToolCall, ctx: ToolExecutionContext
) -> ToolCall:
    for hook in middleware.call_hooks:
        try:
            outcome = hook(call, ctx)
            if outcome is not None and inspect.isawaitable(outcome):
                outcome = await outcome
        except trio.Cancelled:
            raise
        except Exception as exc:
            raise _Blocked("tool_denied", f"call middleware failed: {_describe(exc)}") from exc
        if outcome is None:
            continue
        if isinstance(outcome, ToolResult):
            message = outcome.joined_text or f"tool call {call.name} was blocked by middleware"
            result = outcome if outcome.is_error else attrs.evolve(outcome, is_error=True)
            if not result.content:
                result = attrs.evolve(result, content=(TextContent(text=message),))
            raise _Blocked("tool_denied", message, result)
        if isinstance(outcome, ToolCall):
            # The id belongs to the provider's transcript; a rewrite cannot move it.
            call = outcome if outcome.id == call.id else attrs.evolve(outcome, id=call.id)
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
    middleware = options.middleware
    if middleware is not None and middleware.call_hooks:
        call = await _run_call_hooks(middleware, call, ctx)
    name = call.name
    tool = options.registry.get(name)
    if tool is None:
        raise _Blocked("unknown_tool", f"unknown tool: {_clip(repr(name))}")
    filters = options.filters
    if filters and not is_tool_allowed(name, *filters):
        raise _Blocked("tool_denied", f"tool {name} is not allowed here", gate="filter")
    problem = _arguments_error(call.arguments)
    if problem is not None:
        raise _Blocked("invalid_arguments", f"invalid arguments for {name}: {problem}")
    arguments: JsonObject = call.arguments  # type: ignore[assignment]
    permission = options.permission
    if permission is not None:
        request = _tool_request(name)
        try:
            decision = permission.check(request)
            if type(decision) is not PermissionDecision and inspect.isawaitable(decision):
                decision = await decision
        except trio.Cancelled:
            raise
        except Exception as exc:
            raise _Blocked(
                "permission_denied", f"permission check failed: {_describe(exc)}"
            ) from exc
        if type(decision) is not PermissionDecision and not isinstance(
            decision, PermissionDecision
        ):
            raise _Blocked(
                "permission_denied",
                f"permission policy returned {type(decision).__name__}, not a PermissionDecision",
            )
        if not decision.allowed:
            reason = f": {decision.reason}" if decision.reason else ""
            raise _Blocked("permission_denied", f"permission denied for {request.key}{reason}")
    validate = options.validate
    if validate is not None:
        try:
            outcome = validate(tool, arguments, ctx)
            if outcome is not None and inspect.isawaitable(outcome):
                outcome = await outcome
        except trio.Cancelled:
            raise
        except Exception as exc:
            raise _Blocked("validation_failed", f"validator failed: {_describe(exc)}") from exc
        if outcome is not None:
            if isinstance(outcome, ErrorInfo):
                raise _Blocked("validation_failed", _clip(outcome.message), info=outcome)
            if isinstance(outcome, str):
                raise _Blocked("validation_failed", _clip(outcome or "arguments were refused"))
            raise _Blocked(
                "validation_failed",
                f"validator returned {type(outcome).__name__}, not None, str or ErrorInfo",
            )
    return call, tool, arguments


def _exception_result(tool: ToolDefinition, exc: Exception) -> tuple[ToolResult, str]:
    error = _describe(exc)
    details: dict[str, JsonValue] = {}
    extra = getattr(exc, "details", None)
    if isinstance(extra, dict):
        safe = json_safe(extra)
        if isinstance(safe, dict):
            details.update(safe)
    details["error"] = error
    if isinstance(exc, ExecutionDeniedError):
        details["execution_denied"] = True
        text = f"tool {tool.name} was denied: {_clip(exc.reason)}"
    else:
        text = f"tool {tool.name} failed: {error}"
    return ToolResult(content=(TextContent(text=text),), is_error=True, details=details), error


async def _execute(
    tool: ToolDefinition, arguments: JsonObject, ctx: ToolExecutionContext
) -> tuple[ToolResult, str | None]:
    """Run the handler; return the result and, if it raised, the error text."""
    try:
        result = await tool.execute(arguments, ctx)
    except trio.Cancelled:
        raise
    except Exception as exc:
        return _exception_result(tool, exc)
    if type(result) is not ToolResult and not isinstance(result, ToolResult):
        error = f"tool {tool.name} returned {type(result).__name__}, not a ToolResult"
        return ToolResult.error(error, error=error), error
    return result, None


async def _run_result_hooks(
    middleware: MiddlewareRegistry, call: ToolCall, result: ToolResult, ctx: ToolExecutionContext
) -> ToolResult:
    for hook in middleware.result_hooks:
        try:
            outcome = hook(call, result, ctx)
            if outcome is not None and inspect.isawaitable(outcome):
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


def _blocked_result(blocked: _Blocked) -> ToolResult:
    if blocked.result is not None:
        return blocked.result
    details: dict[str, JsonValue] = {"blocked_reason": blocked.reason}
    info = blocked.info
    if info is not None:
        if info.code is not None:
            details["code"] = info.code
        if info.details:
            details["details"] = dict(info.details)
    return ToolResult(content=(TextContent(text=blocked.message),), is_error=True, details=details)


# What _run hands back: the result, its ledger status, the blocked reason, the
# error text (for ToolExecutionError), the final call, and the ledger's copy of
# the arguments taken before execute (_UNSET when there was none).
_Outcome = tuple[ToolResult, ToolCallStatus, "BlockedReason | None", "str | None", ToolCall, object]
_UNSET: Any = object()


async def _run(call: ToolCall, options: DispatchOptions, ctx: ToolExecutionContext) -> _Outcome:
    try:
        call, tool, arguments = await _gate(call, options, ctx)
    except _Blocked as blocked:
        note = current_note.get()
        if note is not None:
            note.decision = blocked_decision(blocked.reason, blocked.message, blocked.gate)
        return (
            _blocked_result(blocked),
            "blocked",
            blocked.reason,
            blocked.message,
            ctx.call,
            _UNSET,
        )
    # The ledger's copy is taken before execute, so a tool that mutates its
    # arguments cannot change what the record says it was asked to do.
    snapshot = _UNSET if options.ledger is None else snapshot_json(arguments)
    events = options.events
    if events is not None:
        emit_event(
            events,
            ToolExecutionStarted(call_id=call.id, tool_name=tool.name, arguments=arguments),
        )
    result, error = await _execute(tool, arguments, ctx)
    middleware = options.middleware
    if middleware is not None and middleware.result_hooks:
        result = await _run_result_hooks(middleware, call, result, ctx)
    return result, "error" if result.is_error else "ok", None, error, call, snapshot


async def dispatch_tool_call(call: ToolCall, options: DispatchOptions) -> ToolResult:
    """Run one call through every gate and return its result; never raises for tool failures.

    The order is fixed: ``on_tool_call`` middleware (which may rewrite or block
    the call), then lookup, filters and the JSON-object check (on the rewritten
    call), permission ``tool:<name>:execute``, the validator, ``execute``,
    ``on_tool_result`` middleware, and finally events and the ledger.

    A blocked call never reaches ``execute``: it gets an error result the model
    can read (``details["blocked_reason"]`` names the gate), exactly one
    :class:`ToolExecutionBlocked` event and a ``blocked`` ledger record. A tool
    that raises, or returns something that is not a :class:`ToolResult`, gives
    an error result and a :class:`ToolExecutionError` event. Exceptions from
    hooks, policies and validators block the call instead of escaping.

    Checkpoints only where a hook, policy, validator or the tool does (a plain
    sync-gated call to a tool that does not checkpoint never yields).

    Cancellation: a pre-aborted ``options.signal`` returns a cancellation result
    without running anything. Aborting the signal mid-call cancels whatever is
    running (the tool sees :class:`trio.Cancelled`) and returns a cancellation
    result with a ``cancelled`` ledger record. If the *caller's* scope is
    cancelled instead, :class:`trio.Cancelled` propagates, after the event sink
    and the ledger got their ``cancelled`` entries.

    Raises:
        TypeError: ``call`` is not a :class:`ToolCall`.
        TrioRequiredError: awaited outside a trio task (from asyncio, go
            through :func:`open_asyncio_host`).
        trio.Cancelled: the caller's own scope was cancelled.
    """
    if type(call) is not ToolCall and not isinstance(call, ToolCall):
        raise TypeError(f"dispatch_tool_call takes a ToolCall, got {type(call).__name__}")
    require_trio("dispatch_tool_call()")
    started_at = time.time()
    t0 = time.perf_counter()
    signal = options.signal
    ctx = ToolExecutionContext(call, events=options.events, metadata=options.metadata)
    if signal is not None:
        ctx.signal = signal
        if signal.aborted:
            result = cancelled_result(call, signal.reason)
            _finish(
                options, call, result, "cancelled", None, result.joined_text, started_at, t0, _UNSET
            )
            return result
    finished = False
    # Gates and the execution policy note what decided the call here, for the ledger.
    note = token = None
    if options.ledger is not None:
        note = DecisionNote()
        token = current_note.set(note)
    try:
        if signal is None:
            outcome = await _run(call, options, ctx)
        else:
            try:
                with trio.CancelScope() as scope:
                    remove = signal.add_callback(scope.cancel)
                    try:
                        outcome = await _run(call, options, ctx)
                    finally:
                        remove()
            except Exception as exc:
                # A tool whose tasks failed while being aborted raises a group of
                # Cancelled and errors; the scope strips the Cancelled and the
                # errors are left. The call was still aborted.
                if not scope.cancel_called:
                    raise
                result = cancelled_result(ctx.call, signal.reason)
                outcome = (
                    result,
                    "cancelled",
                    None,
                    f"{result.joined_text} ({_describe(exc)})",
                    ctx.call,
                    _UNSET,
                )
            else:
                if scope.cancelled_caught:
                    result = cancelled_result(ctx.call, signal.reason)
                    outcome = (result, "cancelled", None, result.joined_text, ctx.call, _UNSET)
        result, status, reason, error, call, snapshot = outcome
        finished = True
        _finish(options, call, result, status, reason, error, started_at, t0, snapshot, note)
        return result
    finally:
        if token is not None:
            current_note.reset(token)
        if not finished:
            # The caller's scope was cancelled mid-dispatch: the record still lands.
            _finish(
                options,
                ctx.call,
                None,
                "cancelled",
                None,
                "cancelled",
                started_at,
                t0,
                _UNSET,
                note,
            )


def _finish(
    options: DispatchOptions,
    call: ToolCall,
    result: ToolResult | None,
    status: ToolCallStatus,
    blocked_reason: BlockedReason | None,
    error: str | None,
    started_at: float,
    t0: float,
    snapshot: object,
    note: DecisionNote | None = None,
) -> None:
    duration = time.perf_counter() - t0
    events = options.events
    if events is not None:
        event: object
        if status == "blocked":
            event = ToolExecutionBlocked(
                call_id=call.id,
                tool_name=call.name,
                reason=blocked_reason,  # type: ignore[arg-type]
                message=error or "",
            )
        elif error is None and result is not None:
            event = ToolExecutionFinished(
                call_id=call.id, tool_name=call.name, result=result, duration_s=duration
            )
        else:
            event = ToolExecutionError(
                call_id=call.id,
                tool_name=call.name,
                error=error or "",
                duration_s=duration,
                cancelled=status == "cancelled",
            )
        emit_event(events, event)
    ledger = options.ledger
    if ledger is not None:
        try:
            decision = note.decision if note is not None else None
            if decision is None or decision.allowed:
                # A tool may report a policy's denial only in its result.
                decision = decision_from_result(result) or decision
            extra = {} if decision is None else {"decision": decision}
            ledger.record(
                call_id=call.id,
                tool_name=call.name,
                arguments=call.arguments if snapshot is _UNSET else snapshot,
                status=status,
                blocked_reason=blocked_reason,
                started_at=started_at,
                finished_at=started_at + duration,
                duration_s=duration,
                result=result,
                **extra,
            )
        except Exception:
            # A host's redactor or ledger subclass must not turn a finished call
            # into an exception (or replace a propagating Cancelled).
            _log.exception("the ledger failed to record call %r", call.id)
