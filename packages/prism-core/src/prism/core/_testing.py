"""The conformance kit and test doubles behind :mod:`prism.core.testing`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import trio

from ._abort import AbortController
from ._content import ToolCall, ToolResult
from ._dispatch import DispatchOptions, dispatch_tool_call
from ._events import (
    AgentEvent,
    BlockedReason,
    EventSink,
    ToolExecutionBlocked,
    ToolExecutionError,
    ToolExecutionFinished,
    ToolExecutionStarted,
)
from ._host_calls import await_callback, trio_native
from ._json import JsonObject
from ._ledger import RunLedger
from ._ledger_records import FinishedCall, LedgerEntry, LedgerRecorder, ToolCallRecord
from ._policy import (
    ExecutionAction,
    ExecutionDecision,
    PermissionDecision,
    PermissionRequest,
)
from ._tools import ToolDefinition, ToolExecutionContext, ToolFilter, create_tool_registry
from ._validation import ErrorInfo

__all__ = [
    "AllowAllExecutionPolicy",
    "AllowAllPermissionPolicy",
    "BlockingTool",
    "DenyAllExecutionPolicy",
    "DenyAllPermissionPolicy",
    "Dispatcher",
    "FailingTool",
    "RecordingLedgerSink",
    "RecordingSink",
    "RecordingTool",
    "assert_tool_dispatch_conforms",
    "echo_tool",
]

_E = TypeVar("_E")

Dispatcher = Callable[[ToolCall, DispatchOptions], Awaitable[ToolResult]]
"""Something that dispatches one call the way :func:`~prism.core.dispatch_tool_call` does."""


# --- test doubles ----------------------------------------------------------------------


@attrs.define(eq=False)
class RecordingLedgerSink:
    """A :class:`~prism.core.LedgerSink` that keeps every entry it is given.

    Args:
        fail_with: raised by every ``write`` instead of keeping the entry (to
            test how a host handles a sink that fails, a full disk say).
    """

    fail_with: Exception | None = None
    entries: list[LedgerEntry] = attrs.field(factory=list, init=False)
    closed: bool = attrs.field(default=False, init=False)

    def write(self, entry: LedgerEntry) -> None:
        """Keep ``entry`` (or raise ``fail_with``)."""
        if self.fail_with is not None:
            raise self.fail_with
        self.entries.append(entry)

    def close(self) -> None:
        """Remember that the sink was closed."""
        self.closed = True

    @property
    def records(self) -> list[ToolCallRecord]:
        """The call records among the entries, in order."""
        return [entry for entry in self.entries if isinstance(entry, ToolCallRecord)]


@attrs.define(eq=False)
class RecordingSink:
    """An :data:`~prism.core.EventSink` that keeps every event it is given.

    Args:
        forward: another sink to pass each event on to, after recording it.
    """

    forward: EventSink | None = None
    events: list[AgentEvent] = attrs.field(factory=list, init=False)

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        if self.forward is not None:
            self.forward(event)

    def of_type(self, kind: type[_E]) -> list[_E]:
        """The recorded events that are instances of ``kind``, in order."""
        return [event for event in self.events if isinstance(event, kind)]

    def for_call(self, call_id: str) -> list[AgentEvent]:
        """The recorded tool events of one call, in order."""
        return [event for event in self.events if getattr(event, "call_id", None) == call_id]

    @property
    def types(self) -> list[str]:
        """The ``type`` strings of the recorded events, in order."""
        return [event.type for event in self.events]

    def clear(self) -> None:
        """Forget every recorded event."""
        self.events.clear()


@attrs.define(eq=False)
class AllowAllPermissionPolicy:
    """A :class:`~prism.core.PermissionPolicy` that allows everything and remembers what it saw."""

    requests: list[PermissionRequest] = attrs.field(factory=list, init=False)

    def check(self, request: PermissionRequest) -> PermissionDecision:
        """Allow ``request`` (and record it)."""
        self.requests.append(request)
        return PermissionDecision(allowed=True)


@attrs.define(eq=False)
class DenyAllPermissionPolicy:
    """A :class:`~prism.core.PermissionPolicy` that denies everything and remembers what it saw.

    Args:
        reason: the reason given with every denial.
    """

    reason: str = "denied by DenyAllPermissionPolicy"
    requests: list[PermissionRequest] = attrs.field(factory=list, init=False)

    def check(self, request: PermissionRequest) -> PermissionDecision:
        """Deny ``request`` (and record it)."""
        self.requests.append(request)
        return PermissionDecision(allowed=False, reason=self.reason)


@attrs.define(eq=False)
class AllowAllExecutionPolicy:
    """An :class:`~prism.core.ExecutionPolicy` that allows every action and remembers it."""

    actions: list[ExecutionAction] = attrs.field(factory=list, init=False)

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        """Allow ``action`` (and record it)."""
        self.actions.append(action)
        return ExecutionDecision(allowed=True)


@attrs.define(eq=False)
class DenyAllExecutionPolicy:
    """An :class:`~prism.core.ExecutionPolicy` that denies every action and remembers it.

    Args:
        reason: the reason given with every denial.
    """

    reason: str = "denied by DenyAllExecutionPolicy"
    actions: list[ExecutionAction] = attrs.field(factory=list, init=False)

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        """Deny ``action`` (and record it)."""
        self.actions.append(action)
        return ExecutionDecision(allowed=False, reason=self.reason)


@trio_native
async def _echo(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    text = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
    return ToolResult(content=ToolResult.text(text).content, structured=arguments)


def echo_tool(name: str = "echo", *, exclusive: bool = False) -> ToolDefinition:
    """A tool that answers with its arguments as sorted JSON text (and as ``structured``)."""
    return ToolDefinition(
        name=name,
        execute=_echo,
        description="Echo the arguments back as JSON.",
        parameters={"type": "object"},
        exclusive=exclusive,
    )


@trio_native
@attrs.define(eq=False)
class RecordingTool:
    """A tool that records every call and answers with a fixed result.

    Args:
        name: the tool name.
        result: what every call returns.
        parameters: the JSON Schema to advertise.
        exclusive: the ``exclusive`` flag of the definition.

    Attributes:
        calls: ``(arguments, context)`` of every execution, in order.
    """

    name: str = "record"
    result: ToolResult = attrs.field(factory=lambda: ToolResult.text("ok"))
    parameters: JsonObject | None = None
    exclusive: bool = False
    calls: list[tuple[JsonObject, ToolExecutionContext]] = attrs.field(factory=list, init=False)

    @property
    def definition(self) -> ToolDefinition:
        """The :class:`~prism.core.ToolDefinition` to register."""
        return ToolDefinition(
            name=self.name,
            execute=self.execute,
            description="Records its calls.",
            parameters=self.parameters,
            exclusive=self.exclusive,
        )

    async def execute(self, arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        """Record the call and return :attr:`result`. Does not checkpoint."""
        self.calls.append((arguments, ctx))
        return self.result


@trio_native
@attrs.define(eq=False)
class FailingTool:
    """A tool that raises ``exception_type(message)`` on every call, and counts the calls.

    Args:
        name: the tool name.
        message: the exception's message.
        exception_type: the exception class to raise.
    """

    name: str = "fail"
    message: str = "tool failed on purpose"
    exception_type: type[Exception] = RuntimeError
    calls: int = attrs.field(default=0, init=False)

    @property
    def definition(self) -> ToolDefinition:
        """The :class:`~prism.core.ToolDefinition` to register."""
        return ToolDefinition(name=self.name, execute=self.execute, description="Always fails.")

    async def execute(self, arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        """Raise. Does not checkpoint."""
        self.calls += 1
        raise self.exception_type(self.message)


@trio_native
@attrs.define(eq=False)
class BlockingTool:
    """A tool that blocks until released, for cancellation and concurrency tests.

    Each call sets :attr:`started`, then waits for :meth:`release`. Use a fresh
    instance per test (trio events are one-shot).

    Args:
        name: the tool name.
        result: what a released call returns.
        exclusive: the ``exclusive`` flag of the definition.

    Attributes:
        started: set when a call begins executing.
        running: how many calls are executing right now.
        max_running: the most that ever ran at once.
        cancelled: how many calls saw :class:`trio.Cancelled`.
        finished: how many calls returned.
    """

    name: str = "block"
    result: ToolResult = attrs.field(factory=lambda: ToolResult.text("released"))
    exclusive: bool = False
    started: trio.Event = attrs.field(factory=trio.Event, init=False)
    running: int = attrs.field(default=0, init=False)
    max_running: int = attrs.field(default=0, init=False)
    cancelled: int = attrs.field(default=0, init=False)
    finished: int = attrs.field(default=0, init=False)
    _release: trio.Event = attrs.field(factory=trio.Event, init=False)

    @property
    def definition(self) -> ToolDefinition:
        """The :class:`~prism.core.ToolDefinition` to register."""
        return ToolDefinition(
            name=self.name,
            execute=self.execute,
            description="Blocks until released.",
            exclusive=self.exclusive,
        )

    def release(self) -> None:
        """Let every waiting (and future) call return."""
        self._release.set()

    async def execute(self, arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        """Wait for :meth:`release`; counts cancellations, which propagate."""
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        self.started.set()
        try:
            await self._release.wait()
        except trio.Cancelled:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        self.finished += 1
        return self.result


# --- conformance kit -------------------------------------------------------------------


@trio_native
class _Spy:
    """Counts executions of the host's registered tool without changing what it does."""

    def __init__(self, definition: ToolDefinition) -> None:
        self.calls = 0
        self._inner = definition.execute
        self.definition = attrs.evolve(definition, execute=self.execute)

    async def execute(self, arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        self.calls += 1
        inner = self._inner
        return await await_callback(inner, inner(arguments, ctx))


@attrs.frozen
class _Harness:
    options: DispatchOptions
    spy: _Spy
    sink: RecordingSink
    ledger: RunLedger


def _fail(row: str, problem: str) -> AssertionError:
    return AssertionError(f"tool dispatch conformance, row {row!r}: {problem}")


def _harness(
    row: str, make_options: Callable[[], DispatchOptions], tool: ToolDefinition
) -> _Harness:
    options = make_options()
    if not isinstance(options, DispatchOptions):
        raise _fail(row, f"make_options() returned {type(options).__name__}, not DispatchOptions")
    registered = options.registry.get(tool.name) or tool
    spy = _Spy(registered)
    registry = create_tool_registry(duplicate="replace")
    for existing in options.registry.list():
        registry.register(spy.definition if existing.name == tool.name else existing)
    if tool.name not in registry:
        registry.register(spy.definition)
    sink = RecordingSink(forward=options.on_event)
    recorder = _TeeRecorder(forward=options.ledger)
    options = attrs.evolve(options, registry=registry, on_event=sink, ledger=recorder)
    return _Harness(options, spy, sink, recorder.ledger)


@attrs.define(eq=False)
class _TeeRecorder:
    """Records every call in its own ledger and in the host's recorder, if it has one."""

    forward: LedgerRecorder | None
    ledger: RunLedger = attrs.field(factory=lambda: RunLedger(redact=None))

    def record_call(self, call: FinishedCall, /) -> object:
        if self.forward is not None:
            self.forward.record_call(call)
        return self.ledger.record_call(call)


def _new_records(h: _Harness, call_id: str) -> list[ToolCallRecord]:
    return [r for r in h.ledger.records if r.call_id == call_id]


async def _run_row(
    row: str,
    h: _Harness,
    call: ToolCall,
    dispatch: Dispatcher,
) -> ToolResult:
    try:
        result = await dispatch(call, h.options)
    except Exception as exc:
        raise _fail(row, f"dispatch raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, ToolResult):
        raise _fail(row, f"dispatch returned {type(result).__name__}, not a ToolResult")
    return result


async def _blocked_row(
    row: str,
    make_options: Callable[[], DispatchOptions],
    tool: ToolDefinition,
    dispatch: Dispatcher,
    reason: BlockedReason,
    *,
    name: str | None = None,
    arguments: object = None,
    adjust: Callable[[DispatchOptions], DispatchOptions] | None = None,
) -> None:
    h = _harness(row, make_options, tool)
    if adjust is not None:
        h = attrs.evolve(h, options=adjust(h.options))
    call = ToolCall(
        id=f"conformance-{row}",
        name=tool.name if name is None else name,
        arguments=arguments,
    )
    result = await _run_row(row, h, call, dispatch)
    if h.spy.calls:
        raise _fail(row, f"the tool ran {h.spy.calls} time(s); a blocked call must never run")
    if not result.is_error:
        raise _fail(row, "the result is not an error result")
    if not result.joined_text.strip():
        raise _fail(row, "the error result has no text for the model to read")
    events = h.sink.for_call(call.id)
    blocked = [e for e in events if isinstance(e, ToolExecutionBlocked)]
    if len(blocked) != 1:
        raise _fail(row, f"expected exactly one ToolExecutionBlocked event, got {len(blocked)}")
    if blocked[0].reason != reason:
        raise _fail(row, f"blocked reason is {blocked[0].reason!r}, expected {reason!r}")
    others = [e.type for e in events if isinstance(e, ToolExecutionStarted | ToolExecutionFinished)]
    if others:
        raise _fail(row, f"a blocked call emitted {others}")
    records = _new_records(h, call.id)
    if len(records) != 1:
        raise _fail(row, f"expected one ledger record, got {len(records)}")
    if records[0].status != "blocked" or records[0].blocked_reason != reason:
        raise _fail(
            row,
            f"ledger record is {records[0].status!r}/{records[0].blocked_reason!r}, "
            f"expected 'blocked'/{reason!r}",
        )


def _deny_filter(tool: ToolDefinition) -> Callable[[DispatchOptions], DispatchOptions]:
    def adjust(options: DispatchOptions) -> DispatchOptions:
        return attrs.evolve(options, filters=(*options.filters, ToolFilter(deny={tool.name})))

    return adjust


def _deny_permission(options: DispatchOptions) -> DispatchOptions:
    return attrs.evolve(options, permission=DenyAllPermissionPolicy())


def _refusing_validator(
    _tool: ToolDefinition, _arguments: JsonObject, _ctx: ToolExecutionContext
) -> ErrorInfo:
    return ErrorInfo(message="refused by the conformance kit", code="conformance")


def _refuse_validation(options: DispatchOptions) -> DispatchOptions:
    return attrs.evolve(options, validator=_refusing_validator)


async def assert_tool_dispatch_conforms(
    make_options: Callable[[], DispatchOptions],
    tool: ToolDefinition,
    *,
    valid_arguments: JsonObject,
    dispatch: Dispatcher | None = None,
) -> None:
    """Check that a host's dispatch wiring keeps every gate of the lifecycle.

    ``make_options`` builds the host's :class:`~prism.core.DispatchOptions`
    (registry, filters, policies, middleware, ...) afresh for each row; its
    registry should hold ``tool`` (the kit adds it when it does not). The kit
    wraps the registered tool to count executions, records events (forwarding
    them to the host's sink) and reads the host's ledger (or its own). Rows,
    in order:

    - ``success``: ``valid_arguments`` through the host's own options;
    - ``unknown_tool``: a name the registry does not hold;
    - ``tool_denied``: the host's filters plus one that denies ``tool``;
    - ``invalid_arguments``: a list, a string, and an object with a non-string key;
    - ``permission_denied``: the host's options with a deny-all permission policy;
    - ``validation_failed``: the host's options with a refusing validator;
    - ``aborted``: a pre-aborted signal (the tool must not run).

    Each blocked row requires: the tool never ran, an error result with text,
    exactly one :class:`~prism.core.ToolExecutionBlocked` event with the right
    reason (and no started/finished event), and one ``blocked`` ledger record.
    The success row requires one execution, a started event followed by a
    finished event, and an ``ok``/``error`` ledger record.

    Args:
        make_options: builds the host's options; called once per row.
        tool: the tool to drive (as registered, or to register).
        valid_arguments: arguments the host's gates accept for ``tool``.
        dispatch: the host's dispatcher, if it wraps or replaces
            :func:`~prism.core.dispatch_tool_call` (the default).

    Checkpoints (it dispatches calls). Cancellation propagates.

    Raises:
        AssertionError: a row failed; the message names the row and the problem.
    """
    run = dispatch_tool_call if dispatch is None else dispatch
    # Success first: if the host's own gates refuse valid_arguments, every later
    # row would fail for that reason, so say so plainly.
    await _success_row(make_options, tool, run, valid_arguments)
    unknown = f"{tool.name}.prism-conformance-missing"
    await _blocked_row("unknown_tool", make_options, tool, run, "unknown_tool", name=unknown)
    await _blocked_row(
        "tool_denied",
        make_options,
        tool,
        run,
        "tool_denied",
        arguments=valid_arguments,
        adjust=_deny_filter(tool),
    )
    for label, bad in (("list", [valid_arguments]), ("string", "{}"), ("key", {1: "x"})):
        await _blocked_row(
            f"invalid_arguments ({label})",
            make_options,
            tool,
            run,
            "invalid_arguments",
            arguments=bad,
        )
    await _blocked_row(
        "permission_denied",
        make_options,
        tool,
        run,
        "permission_denied",
        arguments=valid_arguments,
        adjust=_deny_permission,
    )
    await _blocked_row(
        "validation_failed",
        make_options,
        tool,
        run,
        "validation_failed",
        arguments=valid_arguments,
        adjust=_refuse_validation,
    )
    await _aborted_row(make_options, tool, run, valid_arguments)


async def _aborted_row(
    make_options: Callable[[], DispatchOptions],
    tool: ToolDefinition,
    dispatch: Dispatcher,
    valid_arguments: JsonObject,
) -> None:
    row = "aborted"
    h = _harness(row, make_options, tool)
    controller = AbortController()
    controller.abort("conformance kit")
    h = attrs.evolve(h, options=attrs.evolve(h.options, signal=controller.signal))
    call = ToolCall(id="conformance-aborted", name=tool.name, arguments=valid_arguments)
    result = await _run_row(row, h, call, dispatch)
    if h.spy.calls:
        raise _fail(row, "the tool ran although the signal was aborted before dispatch")
    if not result.is_error:
        raise _fail(row, "an aborted call did not get an error result")
    records = _new_records(h, call.id)
    if len(records) != 1 or records[0].status != "cancelled":
        raise _fail(row, f"expected one 'cancelled' ledger record, got {records}")


async def _success_row(
    make_options: Callable[[], DispatchOptions],
    tool: ToolDefinition,
    dispatch: Dispatcher,
    valid_arguments: JsonObject,
) -> None:
    row = "success"
    h = _harness(row, make_options, tool)
    call = ToolCall(id="conformance-success", name=tool.name, arguments=valid_arguments)
    result = await _run_row(row, h, call, dispatch)
    events = h.sink.for_call(call.id)
    blocked = [e for e in events if isinstance(e, ToolExecutionBlocked)]
    if blocked:
        raise _fail(
            row,
            f"valid arguments were blocked ({blocked[0].reason}: {blocked[0].message}); "
            "the host's gates must accept valid_arguments",
        )
    if h.spy.calls != 1:
        raise _fail(row, f"the tool ran {h.spy.calls} time(s), expected exactly once")
    kinds = [
        type(e).__name__
        for e in events
        if isinstance(e, ToolExecutionStarted | ToolExecutionFinished | ToolExecutionError)
    ]
    if not kinds or kinds[0] != "ToolExecutionStarted" or len(kinds) != 2:
        raise _fail(row, f"expected a started event then one terminal event, got {kinds}")
    records = _new_records(h, call.id)
    expected = "error" if result.is_error else "ok"
    if len(records) != 1 or records[0].status != expected:
        statuses = [r.status for r in records]
        raise _fail(row, f"expected one {expected!r} ledger record, got {statuses}")
