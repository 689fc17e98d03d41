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

import functools
import inspect
import logging
import math
import time
import types
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs

from ._abort import AbortSignal, cancel_on_abort
from ._content import NO_TEXT_BOUND, TextContent, ToolCall, ToolResult
from ._errors import ExecutionDeniedError
from ._events import BlockedReason, EventSink, build_started, emit_event
from ._host_calls import await_callback, host_runner, is_trio_native
from ._ledger_decision import DecisionGate, DecisionNote, blocked_decision, current_note
from ._ledger_records import CallTracer, LedgerRecorder, ToolCallStatus
from ._middleware import MiddlewareRegistry
from ._options import callable_value, has_method, instance_of, optional
from ._outcome import CallOutcome, cancelled_result, settle
from ._policy import PermissionDecision, PermissionPolicy, PermissionRequest
from ._redaction import json_safe, snapshot_json
from ._text import clip, describe_exception
from ._tools import (
    NO_SIGNAL,
    ToolDefinition,
    ToolExecutionContext,
    ToolFilter,
    ToolRegistry,
    build_context,
    check_filters,
    is_tool_allowed,
)
from ._trio_guard import require_trio
from ._validation import ErrorInfo, ToolValidator

if TYPE_CHECKING:
    from collections.abc import Awaitable, Generator
    from typing import TypeAlias

    from ._json import JsonObject, JsonValue

T = TypeVar("T")
if TYPE_CHECKING:
    # The gates' generator: yields (callable, the awaitable it returned), gets its value
    _Steps: TypeAlias = Generator[tuple[object, Awaitable[Any]], Any, T]

__all__ = [
    "BlockedReason",
    "CallTicket",
    "DispatchOptions",
    "begin_tool_call",
    "dispatch_tool_call",
    "finish_tool_call",
]

_log = logging.getLogger("prism.core")


def _read_only(value: Mapping[str, object]) -> Mapping[str, object]:
    # Every call's tools share it: a tool must not be able to change what the next one sees.
    if isinstance(value, MappingProxyType):
        return value
    return MappingProxyType(dict(_MAPPING.check("DispatchOptions", "metadata", value)))


_MAPPING = instance_of(Mapping, description="a mapping")


def _filters(value: ToolFilter | Iterable[ToolFilter]) -> tuple[ToolFilter, ...]:
    return check_filters("DispatchOptions", value)


@attrs.frozen(kw_only=True)
class DispatchOptions:
    """Everything a dispatch needs besides the call.

    Build one per run (or once, and share it): it holds no per-call state.

    Attributes:
        registry: where tools are looked up.
        filters: name filters; every one must allow the tool.
        permission: checked as ``tool:<name>:execute``; ``None`` allows.
        validator: argument validator; ``None`` skips validation.
        middleware: call and result hooks.
        on_event: receives every event; a sink that raises is logged, never fatal.
        ledger: receives one record per call: a :class:`RunLedger`, or any
            :class:`LedgerRecorder`.
        signal: aborting it cancels the running call; a pre-aborted signal runs nothing.
        metadata: handed to tools as ``context.metadata`` (a read-only copy).
        tracer: wraps each call in a span that is current while the call runs
            (an :class:`~prism.core.ledger.OtelLedgerSink`, say), so spans the
            tool opens nest under it; ``None`` traces nothing.

    Raises:
        ConfigurationError: an option has the wrong type (the message names the
            option and the value).
    """

    registry: ToolRegistry = attrs.field(validator=instance_of(ToolRegistry))
    filters: tuple[ToolFilter, ...] = attrs.field(default=(), converter=_filters)
    permission: PermissionPolicy | None = attrs.field(
        default=None, validator=optional(has_method("check"))
    )
    validator: ToolValidator | None = attrs.field(
        default=None, validator=optional(callable_value())
    )
    middleware: MiddlewareRegistry | None = attrs.field(
        default=None, validator=optional(instance_of(MiddlewareRegistry))
    )
    on_event: EventSink | None = attrs.field(default=None, validator=optional(callable_value()))
    ledger: LedgerRecorder | None = attrs.field(
        default=None, validator=optional(has_method("record_call"))
    )
    signal: AbortSignal | None = attrs.field(
        default=None, validator=optional(instance_of(AbortSignal))
    )
    metadata: Mapping[str, object] = attrs.field(factory=dict, converter=_read_only)
    tracer: CallTracer | None = attrs.field(
        default=None, validator=optional(has_method("trace_call"))
    )
    # The validator as each call invokes it (see _direct_call).
    _validate: ToolValidator | None = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_validate", _direct_call(self.validator))


def _direct_call(validator: ToolValidator | None) -> ToolValidator | None:
    """``validator``, or the bound ``__call__`` of an object whose class defines one.

    The same call either way; calling an object goes through its type's call
    slot, which packs the arguments into a tuple first: about 0.15 us on every
    call, as much as the engine's whole check of a small tool's arguments.
    """
    # The class's own __call__ (what calling the object runs), not callable().
    method = getattr(type(validator), "__call__", None)  # noqa: B004
    if isinstance(method, types.FunctionType):
        return cast("ToolValidator", types.MethodType(method, validator))
    return validator


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


def _arguments_error(arguments: object, *, shallow: bool = False) -> str | None:
    """Why ``arguments`` is not a JSON object, or ``None`` when it is one.

    Walks the whole value without recursion (hostile nesting cannot blow the
    stack): keys must be strings, leaves must be JSON scalars, floats finite.
    Each container is walked once: one met again (a list holding itself, or
    one list shared a thousand times a thousand levels deep) is refused.
    ``shallow`` checks the object and its keys only.
    """
    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    if shallow:
        for key in arguments:
            if type(key) is not str:
                return f"arguments must have string keys, got key {key!r}"
        return None
    pending: list[dict[object, object] | list[object]] = [arguments]
    walked = {id(arguments)}  # every container stays alive (held by arguments)
    while pending:
        container = pending.pop()
        values: Iterable[object] = container
        if isinstance(container, dict):
            for key in container:
                if type(key) is not str:
                    return f"arguments must have string keys, got key {key!r}"
            values = container.values()
        for value in values:
            kind = type(value)
            if kind is str or kind is int or kind is bool or value is None:
                continue
            if isinstance(value, (str, int)):  # subclasses (IntEnum, str enums) are JSON too
                continue
            if isinstance(value, float):
                if not math.isfinite(value):
                    return f"arguments must be finite JSON numbers, got {value!r}"
            elif isinstance(value, (dict, list)):
                if id(value) in walked:
                    return (
                        f"arguments must be a tree of JSON values, got a {type(value).__name__} "
                        "held twice (a cycle or a shared value)"
                    )
                walked.add(id(value))
                pending.append(value)
            else:
                return f"arguments must hold only JSON values, got {type(value).__name__}"
    return None


@functools.lru_cache(maxsize=1024)
def _tool_request(name: str) -> PermissionRequest:
    """The (immutable, so shareable) ``tool:<name>:execute`` request."""
    return PermissionRequest(kind="tool", target=name, action="execute")


def _run_call_hooks(
    middleware: MiddlewareRegistry, call: ToolCall, ctx: ToolExecutionContext
) -> _Steps[ToolCall]:
    for hook in middleware.call_hooks:
        try:
            outcome = hook(call, ctx)
            if outcome is not None and inspect.isawaitable(outcome):
                outcome = yield hook, outcome
        except Exception as exc:
            raise _Blocked(
                "tool_denied", f"call middleware failed: {describe_exception(exc)}"
            ) from exc
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


def _gate_steps(
    call: ToolCall, options: DispatchOptions, ctx: ToolExecutionContext
) -> _Steps[tuple[ToolCall, ToolDefinition, JsonObject]]:
    """Every gate before execute, in order; raises _Blocked with the first refusal.

    A generator: each awaitable a hook, policy or validator returns is yielded
    (with the callable that returned it) to whoever drives the gates, who
    awaits it and sends back its value or throws in its exception, at the
    point where an ``await`` would have been: :func:`_gate` awaits them,
    :func:`begin_tool_call` runs the gates that yield none without a task.
    """
    middleware = options.middleware
    if middleware is not None and middleware.call_hooks:
        # A hook holds the call's arguments and may change them in place: what
        # the model's text proved of them (ToolCall.from_json) no longer holds.
        if call._text_bound != NO_TEXT_BOUND:
            ctx.call = call = attrs.evolve(call)
        call = yield from _run_call_hooks(middleware, call, ctx)
    name = call.name
    tool = options.registry.get(name)
    if tool is None:
        raise _Blocked("unknown_tool", f"unknown tool: {clip(repr(name))}")
    filters = options.filters
    if filters and not is_tool_allowed(name, *filters):
        raise _Blocked("tool_denied", f"tool {name} is not allowed here", gate="filter")
    validate = options._validate
    if validate is None:
        _check_arguments(name, call.arguments)
    else:
        # Only the top level before the validator, which bounds the rest.
        _check_arguments(name, call.arguments, shallow=True)
    arguments: JsonObject = call.arguments  # type: ignore[assignment]
    permission = options.permission
    if permission is not None:
        request = _tool_request(name)
        try:
            # Awaited only when the policy is async: a helper coroutine would
            # cost one on every call of a synchronous policy.
            decision = permission.check(request)
            if not isinstance(decision, PermissionDecision) and inspect.isawaitable(decision):
                decision = yield permission.check, decision
        except Exception as exc:
            raise _Blocked(
                "permission_denied", f"permission check failed: {describe_exception(exc)}"
            ) from exc
        if not isinstance(decision, PermissionDecision):
            raise _Blocked(
                "permission_denied",
                f"permission policy returned {type(decision).__name__}, not a PermissionDecision",
            )
        if not decision.allowed:
            reason = f": {decision.reason}" if decision.reason else ""
            raise _Blocked("permission_denied", f"permission denied for {request.key}{reason}")
    if validate is not None:
        # The validator bounds the arguments (size, depth, types) before anything
        # walks them: the whole-value walk below runs on what it let through, so
        # a 2,000,000-item argument it refuses at once is never walked here.
        try:
            outcome = validate(tool, arguments, ctx)
            if outcome is not None and inspect.isawaitable(outcome):
                outcome = yield options.validator, outcome
        except Exception as exc:
            raise _Blocked(
                "validation_failed", f"validator failed: {describe_exception(exc)}"
            ) from exc
        if outcome is not None:
            if isinstance(outcome, ErrorInfo):
                raise _Blocked("validation_failed", clip(outcome.message), info=outcome)
            if isinstance(outcome, str):
                raise _Blocked("validation_failed", clip(outcome or "arguments were refused"))
            raise _Blocked(
                "validation_failed",
                f"validator returned {type(outcome).__name__}, not None, str or ErrorInfo",
            )
        _check_arguments(name, arguments)
    return call, tool, arguments


async def _gate(
    call: ToolCall, options: DispatchOptions, ctx: ToolExecutionContext
) -> tuple[ToolCall, ToolDefinition, JsonObject]:
    """Run every gate before execute (:func:`_gate_steps`), awaiting what they return."""
    return await _drive(_gate_steps(call, options, ctx))


async def _drive(steps: _Steps[T]) -> T:
    """Run ``steps`` to its end, awaiting each awaitable it yields on its callable's loop."""
    try:
        fn, awaitable = steps.send(None)
    except StopIteration as done:
        return cast("T", done.value)
    return await _drive_from(steps, fn, awaitable)


async def _drive_from(steps: _Steps[T], fn: object, awaitable: Awaitable[Any]) -> T:
    """:func:`_drive` of ``steps`` from the awaitable ``fn`` returned, which it yielded."""
    try:
        while True:
            try:
                value = await await_callback(fn, awaitable)
            except BaseException as exc:  # (Cancelled too: raised where the await was)
                fn, awaitable = steps.throw(exc)
            else:
                fn, awaitable = steps.send(value)
    except StopIteration as done:
        return cast("T", done.value)
    finally:
        steps.close()


def _check_arguments(name: str, arguments: object, *, shallow: bool = False) -> None:
    problem = _arguments_error(arguments, shallow=shallow)
    if problem is not None:
        raise _Blocked("invalid_arguments", f"invalid arguments for {name}: {problem}")


def _exception_result(tool: ToolDefinition, exc: Exception) -> tuple[ToolResult, str]:
    error = describe_exception(exc)
    details: dict[str, JsonValue] = {}
    extra = getattr(exc, "details", None)
    if isinstance(extra, dict):
        safe = json_safe(extra)
        if isinstance(safe, dict):
            details.update(safe)
    details["error"] = error
    if isinstance(exc, ExecutionDeniedError):
        details["execution_denied"] = True
        text = f"tool {tool.name} was denied: {clip(exc.reason)}"
    else:
        text = f"tool {tool.name} failed: {error}"
    return ToolResult(content=(TextContent(text=text),), is_error=True, details=details), error


async def _run_result_hooks(
    middleware: MiddlewareRegistry, call: ToolCall, result: ToolResult, ctx: ToolExecutionContext
) -> ToolResult:
    for hook in middleware.result_hooks:
        try:
            outcome = hook(call, result, ctx)
            if outcome is not None and inspect.isawaitable(outcome):
                outcome = await await_callback(hook, outcome)
        except Exception as exc:
            return ToolResult.error(f"result middleware failed: {describe_exception(exc)}")
        if outcome is None:
            continue
        if not isinstance(outcome, ToolResult):
            return ToolResult.error(
                f"result middleware returned {type(outcome).__name__}, not a ToolResult or None"
            )
        result = outcome
    return result


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


class _CallNotes(DecisionNote):
    """What the ledger learns about a call while it runs (one per recorded call).

    Execution policies note their decision here (through ``current_note``);
    once the gates pass, the dispatcher notes the definition and the owned
    copy of the arguments, so a call cancelled mid-execute is recorded with
    them like any other.
    """

    __slots__ = ("arguments", "definition_hash")

    def __init__(self) -> None:
        super().__init__()
        self.arguments: JsonObject | None = None
        self.definition_hash: str | None = None


def _refused(ctx: ToolExecutionContext, blocked: _Blocked) -> CallOutcome:
    """The outcome of a call a gate refused (as ``ctx.call``: after any rewrite)."""
    return CallOutcome(
        ctx.call,
        _blocked_result(blocked),
        "blocked",
        blocked.reason,
        blocked.message,
        None,
        blocked_decision(blocked.reason, blocked.message, blocked.gate),
    )


def _passed(
    call: ToolCall,
    tool: ToolDefinition,
    arguments: JsonObject,
    options: DispatchOptions,
    notes: _CallNotes | None,
) -> None:
    """A call through its gates: the ledger's notes of it, its started event."""
    if notes is not None:
        # The ledger's copy is taken before execute, so a tool that mutates its
        # arguments cannot change what the record says it was asked to do.
        notes.arguments = cast("JsonObject", snapshot_json(arguments))
        notes.definition_hash = tool.definition_hash
    events = options.on_event
    if events is not None:
        emit_event(events, build_started(call.id, tool.name, arguments, time.time()))


def _execute_failed(tool: ToolDefinition, result: object) -> tuple[ToolResult, str | None]:
    """What ``execute`` returned as a result: itself, or an error for anything else."""
    if isinstance(result, ToolResult):
        return result, None
    error = f"tool {tool.name} returned {type(result).__name__}, not a ToolResult"
    return ToolResult.error(error, error=error), error


async def _run(
    call: ToolCall,
    options: DispatchOptions,
    ctx: ToolExecutionContext,
    notes: _CallNotes | None,
    side: int,
) -> CallOutcome:
    try:
        call, tool, arguments = await _gate(call, options, ctx)
    except _Blocked as blocked:
        return _refused(ctx, blocked)
    _passed(call, tool, arguments, options, notes)
    error: str | None = None
    try:
        execute = tool.execute
        running = execute(arguments, ctx)
        # Awaited right here when it is code of the side this dispatch runs on
        # (no host, or a handler of this side's kind); else through the host.
        if side == _NO_HOST or is_trio_native(execute) is (side == _HOST_TRIO):
            result = await running
        else:
            result = await await_callback(execute, running)
    except Exception as exc:
        result, error = _exception_result(tool, exc)
    else:
        result, error = _execute_failed(tool, result)
    middleware = options.middleware
    if middleware is not None and middleware.result_hooks:
        result = await _run_result_hooks(middleware, call, result, ctx)
    return _ended(call, result, "error" if result.is_error else "ok", error, notes)


def _ended(
    call: ToolCall,
    result: ToolResult | None,
    status: ToolCallStatus,
    error: str | None,
    notes: _CallNotes | None,
) -> CallOutcome:
    """The outcome of a call that began, with what the ledger noted while it ran.

    It began: it ran, or it was cancelled (by its signal or the caller's scope).
    """
    if notes is None:
        return CallOutcome(call, result, status, None, error)
    return CallOutcome(
        call, result, status, None, error, notes.arguments, notes.decision, notes.definition_hash
    )


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
    if not isinstance(call, ToolCall):
        raise TypeError(f"dispatch_tool_call takes a ToolCall, got {type(call).__name__}")
    require_trio("dispatch_tool_call()")
    side = _NO_HOST if host_runner() is None else _HOST_TRIO
    if options.tracer is None:
        return await _dispatch(call, options, side)
    return await _traced(call, options, side)


def needs_trio(call: ToolCall, options: DispatchOptions) -> bool:
    """Whether a dispatch of ``call`` has trio code to run, for an asyncio host's caller.

    An asyncio host runs a dispatch in its caller's asyncio task when nothing
    in it is trio code (:func:`dispatch_from_loop`): no abort signal (its
    cancel scope is trio's), and no gate and no tool marked :func:`trio_native`.
    Unmarked callables are the application's asyncio code, awaited right there.
    """
    if not isinstance(call, ToolCall) or options.signal is not None:
        return True  # not a call: dispatch_tool_call says so, on trio
    tool = options.registry.get(call.name)
    if tool is not None and is_trio_native(tool.execute):
        return True
    permission = options.permission
    if permission is not None and is_trio_native(permission.check):
        return True
    validator = options.validator
    if validator is not None and is_trio_native(validator):
        return True
    sink = options.on_event
    if sink is not None and is_trio_native(sink):
        return True
    middleware = options.middleware
    if middleware is not None:
        for hook in (*middleware.call_hooks, *middleware.result_hooks):
            if is_trio_native(hook):
                return True
    return False


async def dispatch_from_loop(call: ToolCall, options: DispatchOptions) -> ToolResult:
    """:func:`dispatch_tool_call` for an asyncio host's caller, in its asyncio task.

    Only for a dispatch that :func:`needs_trio` says has no trio code: every
    gate, the events and the ledger run as under trio, and :func:`await_callback`
    awaits the (asyncio) callbacks right there. The caller's cancellation
    (:class:`asyncio.CancelledError`) is recorded as a cancelled call and goes on up.
    """
    if options.tracer is None:
        return await _dispatch(call, options, _HOST_LOOP)
    return await _traced(call, options, _HOST_LOOP)


# Where a dispatch runs, for awaiting what its tool returns: under a plain
# trio.run (or no host), in a host's trio task, or in an asyncio task of a host.
_NO_HOST = 0
_HOST_TRIO = 1
_HOST_LOOP = 2


async def _traced(call: ToolCall, options: DispatchOptions, side: int) -> ToolResult:
    tracer = options.tracer
    assert tracer is not None
    # The call's span is current from here to its ledger record (written inside).
    with tracer.trace_call(call):
        return await _dispatch(call, options, side)


async def _dispatch(call: ToolCall, options: DispatchOptions, side: int) -> ToolResult:
    started_at = time.time()
    t0 = time.perf_counter()
    signal = options.signal
    ctx = build_context(
        call, NO_SIGNAL if signal is None else signal, options.metadata, options.on_event
    )
    if signal is not None and signal.aborted:
        result = cancelled_result(call, signal.reason)
        aborted = CallOutcome(call, result, "cancelled", None, result.joined_text)
        settle(options.on_event, options.ledger, aborted, started_at, time.perf_counter() - t0)
        return result
    # Gates and the execution policy note what decided the call here, for the ledger.
    notes = token = None
    if options.ledger is not None:
        notes = _CallNotes()
        token = current_note.set(notes)
    outcome: CallOutcome | None = None
    try:
        if signal is None:
            outcome = await _run(call, options, ctx, notes, side)
        else:
            outcome = await _run_abortable(call, options, ctx, notes, signal, side)
        final = outcome.result
        assert final is not None  # only the caller's own cancellation leaves none
        return final
    finally:
        if token is not None:
            current_note.reset(token)
        if outcome is None:
            # The caller's scope was cancelled mid-dispatch: the record still lands.
            outcome = _ended(ctx.call, None, "cancelled", "cancelled", notes)
        settle(options.on_event, options.ledger, outcome, started_at, time.perf_counter() - t0)


async def _run_abortable(
    call: ToolCall,
    options: DispatchOptions,
    ctx: ToolExecutionContext,
    notes: _CallNotes | None,
    signal: AbortSignal,
    side: int,
) -> CallOutcome:
    """:func:`_run` inside a scope that ``signal`` cancels; an abort gives a cancelled outcome."""
    error: str | None = None
    try:
        with cancel_on_abort(signal) as scope:
            return await _run(call, options, ctx, notes, side)
    except Exception as exc:
        # A tool whose tasks failed while being aborted raises a group of
        # Cancelled and errors; the scope strips the Cancelled and the errors
        # are left. The call was still aborted.
        if not scope.cancel_called:
            raise
        error = describe_exception(exc)
    result = cancelled_result(ctx.call, signal.reason)
    text = result.joined_text if error is None else f"{result.joined_text} ({error})"
    return _ended(ctx.call, result, "cancelled", text, notes)


class CallTicket:
    """A call begun by :func:`begin_tool_call`, whose work its caller does itself.

    For a caller that cannot wait in a task of its own for each call (a proxy
    that answers a call from the task that reads the reply, say): the gates
    ran in :func:`begin_tool_call`, the caller does what the tool's
    ``execute`` would do, and :func:`finish_tool_call` records how it ended.
    Every gate, event and ledger record is the one :func:`dispatch_tool_call`
    makes.

    Attributes:
        call: the call as the gates passed it (after any middleware rewrite).
        tool: the tool it runs; ``None`` while :attr:`waiting`.
        arguments: its arguments, as the gates passed them; ``None`` while
            :attr:`waiting`.
        context: the call's execution context (its ``report_progress``
            reports to the options' event sink).
        waiting: a gate returned something to await: :meth:`pass_gates`
            awaits it and runs the rest.
    """

    __slots__ = (
        "_notes",
        "_options",
        "_started_at",
        "_steps",
        "_t0",
        "arguments",
        "call",
        "context",
        "tool",
    )

    def __init__(
        self,
        call: ToolCall,
        options: DispatchOptions,
        context: ToolExecutionContext,
        notes: _CallNotes | None,
        started_at: float,
        t0: float,
    ) -> None:
        self.call = call
        self.tool: ToolDefinition | None = None
        self.arguments: JsonObject | None = None
        self.context = context
        self._options = options
        self._notes = notes
        self._started_at = started_at
        self._t0 = t0
        # The gates' generator and what it yielded, while a gate's awaitable waits
        self._steps: tuple[_Steps[tuple[ToolCall, ToolDefinition, JsonObject]], object, Any] | None
        self._steps = None

    @property
    def waiting(self) -> bool:
        """Whether a gate waits for something to be awaited (see :meth:`pass_gates`)."""
        return self._steps is not None

    def _passed(self, gated: tuple[ToolCall, ToolDefinition, JsonObject]) -> None:
        call, tool, arguments = gated
        self.call, self.tool, self.arguments = call, tool, arguments
        _passed(call, tool, arguments, self._options, self._notes)

    def _refused(self, blocked: _Blocked) -> ToolResult:
        outcome = _refused(self.context, blocked)
        self._settle(outcome)
        result = outcome.result
        assert result is not None  # (a refusal always has its result)
        return result

    def _settle(self, outcome: CallOutcome) -> None:
        options = self._options
        duration_s = time.perf_counter() - self._t0
        settle(options.on_event, options.ledger, outcome, self._started_at, duration_s)

    async def pass_gates(self) -> ToolResult | None:
        """Await what a gate returned, then run the rest of the gates (a :attr:`waiting` ticket).

        Returns:
            ``None`` once the gates passed (:attr:`tool` and :attr:`arguments`
            are set, the started event is out); the refusal's result when a
            gate refused (its event and ``blocked`` record written: the call
            is over).

        Raises:
            trio.Cancelled: the caller's scope was cancelled; the call is
                recorded as ``cancelled`` and over.
        """
        waiting = self._steps
        if waiting is None:
            return None
        self._steps = None
        steps, fn, awaitable = waiting
        notes = self._notes
        token = current_note.set(notes) if notes is not None else None
        try:
            try:
                gated = await _drive_from(steps, fn, awaitable)
            except _Blocked as blocked:
                return self._refused(blocked)
            except BaseException:
                self._settle(_ended(self.context.call, None, "cancelled", "cancelled", notes))
                raise
        finally:
            if token is not None:
                current_note.reset(token)
        self._passed(gated)
        return None


def begin_tool_call(call: ToolCall, options: DispatchOptions) -> CallTicket | ToolResult | None:
    """Run ``call``'s gates now, without a task: the first half of :func:`dispatch_tool_call`.

    The same middleware, lookup, filters, permission and validator, in the
    same order, with the same refusals, events and ledger records; the caller
    then does the work of the tool's ``execute`` itself and ends the call
    with :func:`finish_tool_call`. A gate that returns something to await
    leaves the ticket :attr:`~CallTicket.waiting`: await its
    :meth:`~CallTicket.pass_gates` before anything else.

    Returns:
        The ticket of a call that passed its gates (its started event out);
        the refusal's result of a call a gate refused (its event and
        ``blocked`` record written: nothing more to do); ``None``, with
        nothing run, when the dispatch has more than the gates around the
        tool (an abort signal, a tracer, result middleware): dispatch it
        with :func:`dispatch_tool_call`.
    """
    middleware = options.middleware
    if (
        options.signal is not None
        or options.tracer is not None
        or (middleware is not None and middleware.result_hooks)
        or not isinstance(call, ToolCall)
    ):
        return None
    ticket = CallTicket(
        call,
        options,
        build_context(call, NO_SIGNAL, options.metadata, options.on_event),
        _CallNotes() if options.ledger is not None else None,
        time.time(),
        time.perf_counter(),
    )
    notes = ticket._notes
    token = current_note.set(notes) if notes is not None else None
    steps = _gate_steps(call, options, ticket.context)
    try:
        try:
            fn, awaitable = steps.send(None)
        except StopIteration as done:
            gated: tuple[ToolCall, ToolDefinition, JsonObject] = done.value
        else:
            ticket._steps = (steps, fn, awaitable)
            return ticket
    except _Blocked as blocked:
        return ticket._refused(blocked)
    finally:
        if token is not None:
            current_note.reset(token)
    ticket._passed(gated)
    return ticket


def finish_tool_call(
    ticket: CallTicket, result: ToolResult | None, *, error: str | None = None
) -> ToolResult | None:
    """End a call begun with :func:`begin_tool_call`: its finished event and ledger record.

    Args:
        ticket: the call (its gates passed); finish each ticket once.
        result: what the tool's work gave, as ``execute`` would have
            returned it; ``None``: the call was cancelled before it gave
            one (a ``cancelled`` record and error event, as when the
            caller's scope of :func:`dispatch_tool_call` is cancelled).
        error: the failure the result reports, as the dispatcher words a
            tool that raised (``describe_exception``); ``None`` for a
            result the work returned.

    Returns:
        ``result``.
    """
    if result is None:
        ticket._settle(_ended(ticket.call, None, "cancelled", "cancelled", ticket._notes))
        return None
    status: ToolCallStatus = "error" if result.is_error else "ok"
    ticket._settle(_ended(ticket.call, result, status, error, ticket._notes))
    return result
