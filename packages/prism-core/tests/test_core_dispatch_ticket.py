"""begin_tool_call / finish_tool_call: the dispatch's two halves, recorded as dispatch_tool_call."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from prism.core import (
    AbortController,
    CallTicket,
    DispatchOptions,
    ErrorInfo,
    JsonObject,
    MiddlewareRegistry,
    PermissionDecision,
    PermissionRequest,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    begin_tool_call,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
    finish_tool_call,
)
from prism.core.ledger import RunLedger


async def _echo(arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text(str(arguments.get("text")))


async def _fails(_arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.error("it failed")


TOOLS = [
    ToolDefinition(name="echo", execute=_echo, parameters={"type": "object"}),
    ToolDefinition(name="fails", execute=_fails),
    ToolDefinition(name="denied", execute=_echo),
]


def _validator(_tool: ToolDefinition, arguments: JsonObject, _ctx: Any) -> ErrorInfo | None:
    return ErrorInfo(message="text must be a string", code="bad") if "bad" in arguments else None


async def _slow_validator(tool: ToolDefinition, arguments: JsonObject, ctx: Any) -> Any:
    await trio.lowlevel.checkpoint()
    return _validator(tool, arguments, ctx)


def _options(**kwargs: Any) -> tuple[DispatchOptions, list[Any], RunLedger]:
    events: list[Any] = []
    ledger = RunLedger()
    given: dict[str, Any] = {
        "registry": create_tool_registry(TOOLS),
        "permission": create_rule_permission_policy(allow=["tool:echo:*", "tool:fails:*"]),
        "validator": _validator,
        "metadata": {"client": "t"},
    }
    options = DispatchOptions(on_event=events.append, ledger=ledger, **(given | kwargs))
    return options, events, ledger


_CLOCKS = ("timestamp", "duration_s", "started_at", "finished_at", "run_id")


def _shapes(events: list[Any], ledger: RunLedger) -> tuple[list[Any], list[Any]]:
    """The events and records with their clocks left out (two runs never share them)."""
    seen = [
        {k: v for k, v in attrs.asdict(e, recurse=False).items() if k not in _CLOCKS}
        | {"kind": type(e).__name__}
        for e in events
    ]
    records = [
        {k: v for k, v in attrs.asdict(r, recurse=False).items() if k not in _CLOCKS}
        for r in ledger.records
    ]
    return seen, records


async def _ticketed(call: ToolCall, options: DispatchOptions) -> ToolResult | None:
    """The call through the two halves, the tool's execute run by the caller in between."""
    ticket = begin_tool_call(call, options)
    assert ticket is not None
    if isinstance(ticket, ToolResult):
        return ticket
    if ticket.waiting:
        refused = await ticket.pass_gates()
        if refused is not None:
            return refused
    assert ticket.tool is not None
    assert ticket.arguments is not None
    assert not ticket.waiting
    result = await ticket.tool.execute(ticket.arguments, ticket.context)
    return finish_tool_call(ticket, result)


CALLS = [
    ToolCall(id="a", name="echo", arguments={"text": "hi"}),
    ToolCall(id="b", name="fails", arguments={}),
    ToolCall(id="c", name="denied", arguments={}),
    ToolCall(id="d", name="nope", arguments={}),
    ToolCall(id="e", name="echo", arguments={"bad": 1}),
    ToolCall.from_json(id="f", name="echo", arguments='{"text": "parsed"}'),
]


@pytest.mark.parametrize("slow", [False, True], ids=["sync-gates", "awaited-validator"])
async def test_the_two_halves_give_what_dispatch_gives(slow: bool) -> None:
    extra = {"validator": _slow_validator} if slow else {}
    theirs, their_events, their_ledger = _options(**extra)
    ours, our_events, our_ledger = _options(**extra)
    for call in CALLS:
        assert await _ticketed(call, ours) == await dispatch_tool_call(call, theirs)
    assert _shapes(our_events, our_ledger) == _shapes(their_events, their_ledger)
    statuses = [record.status for record in our_ledger.records]
    assert statuses == ["ok", "error", "blocked", "blocked", "blocked", "ok"]


async def test_gates_run_at_once_unless_one_returns_something_to_await() -> None:
    options, _, _ = _options()
    ticket = begin_tool_call(CALLS[0], options)
    assert isinstance(ticket, CallTicket)
    assert not ticket.waiting
    assert ticket.arguments == {"text": "hi"}
    slow, _, _ = _options(validator=_slow_validator)
    waiting = begin_tool_call(CALLS[0], slow)
    assert isinstance(waiting, CallTicket)
    assert waiting.waiting
    assert waiting.tool is None
    assert await waiting.pass_gates() is None
    assert waiting.tool is not None
    assert not waiting.waiting


async def test_a_call_hook_rewrite_is_what_the_ticket_carries() -> None:
    middleware = MiddlewareRegistry()
    rewrite = ToolCall(id="x", name="echo", arguments={"text": "r"})
    middleware.on_tool_call(lambda _call, _ctx: rewrite)
    options, _, ledger = _options(middleware=middleware)
    ticket = begin_tool_call(ToolCall(id="a", name="fails", arguments={}), options)
    assert isinstance(ticket, CallTicket)
    assert (ticket.call.id, ticket.call.name, ticket.arguments) == ("a", "echo", {"text": "r"})
    finish_tool_call(ticket, ToolResult.text("r"))
    assert [(r.call_id, r.tool_name, r.status) for r in ledger.records] == [("a", "echo", "ok")]


@pytest.mark.parametrize("kind", ["signal", "tracer", "result-hook"])
async def test_options_with_more_than_gates_begin_nothing(kind: str) -> None:
    class _Tracer:
        def trace_call(self, _call: ToolCall) -> Any:
            raise AssertionError("never traced")

    middleware = MiddlewareRegistry()
    middleware.on_tool_result(lambda _call, result, _ctx: result)
    extras: dict[str, dict[str, Any]] = {
        "signal": {"signal": AbortController().signal},
        "tracer": {"tracer": _Tracer()},
        "result-hook": {"middleware": middleware},
    }
    extra = extras[kind]
    checked: list[PermissionRequest] = []

    class _Counting:
        def check(self, request: PermissionRequest) -> PermissionDecision:
            checked.append(request)
            return PermissionDecision(allowed=True)

    options, events, ledger = _options(permission=_Counting(), **extra)
    assert begin_tool_call(CALLS[0], options) is None
    assert (checked, events, ledger.records) == ([], [], [])


async def test_a_call_cancelled_before_its_result_is_recorded_cancelled() -> None:
    ours, our_events, our_ledger = _options()
    theirs, their_events, their_ledger = _options(
        registry=create_tool_registry([ToolDefinition(name="echo", execute=_forever)])
    )
    ticket = begin_tool_call(CALLS[0], ours)
    assert isinstance(ticket, CallTicket)
    assert finish_tool_call(ticket, None) is None
    with trio.move_on_after(0) as scope:
        scope.deadline = -1
        await dispatch_tool_call(CALLS[0], theirs)
    assert our_ledger.records[0].status == their_ledger.records[0].status == "cancelled"
    assert _shapes(our_events, our_ledger)[0] == _shapes(their_events, their_ledger)[0]


async def _forever(_arguments: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    await trio.sleep_forever()
    raise AssertionError


async def test_a_waiting_gate_cancelled_records_the_call_cancelled() -> None:
    async def _stuck(_tool: ToolDefinition, _arguments: JsonObject, _ctx: Any) -> None:
        await trio.sleep_forever()

    options, events, ledger = _options(validator=_stuck)
    ticket = begin_tool_call(CALLS[0], options)
    assert isinstance(ticket, CallTicket)
    assert ticket.waiting
    with trio.CancelScope() as scope:
        scope.cancel()
        await ticket.pass_gates()
    assert [r.status for r in ledger.records] == ["cancelled"]
    assert [type(e).__name__ for e in events] == ["ToolExecutionError"]
