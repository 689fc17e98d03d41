"""Abort signals and cancellation through the dispatcher."""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING

import trio
import trio.testing

from prism.core import (
    AbortController,
    DispatchOptions,
    JsonObject,
    MiddlewareRegistry,
    PermissionDecision,
    PermissionRequest,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolExecutionError,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger
from prism.core.testing import BlockingTool, RecordingSink, RecordingTool

if TYPE_CHECKING:
    import pytest


def _options(*tools: ToolDefinition, **kwargs: object) -> DispatchOptions:
    return DispatchOptions(registry=create_tool_registry(tools), **kwargs)  # type: ignore[arg-type]


def _call(name: str = "block") -> ToolCall:
    return ToolCall(id="c1", name=name, arguments={})


# --- AbortSignal / AbortController -----------------------------------------------------


def test_new_signal_is_not_aborted() -> None:
    controller = AbortController()
    assert not controller.signal.aborted
    assert controller.signal.reason is None


def test_abort_sets_reason_once() -> None:
    controller = AbortController()
    controller.abort("first")
    controller.abort("second")
    assert controller.signal.aborted
    assert controller.signal.reason == "first"


def test_callbacks_fire_once_in_order_and_can_be_removed() -> None:
    controller = AbortController()
    fired: list[str] = []
    controller.signal.add_callback(lambda: fired.append("a"))
    remove_b = controller.signal.add_callback(lambda: fired.append("b"))
    controller.signal.add_callback(lambda: fired.append("c"))
    remove_b()
    remove_b()  # harmless twice
    controller.abort()
    controller.abort()
    assert fired == ["a", "c"]


def test_callback_added_after_abort_runs_at_once() -> None:
    controller = AbortController()
    controller.abort()
    fired: list[bool] = []
    remove = controller.signal.add_callback(lambda: fired.append(True))
    remove()
    assert fired == [True]


def test_a_raising_callback_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    controller = AbortController()
    fired: list[str] = []

    def broken() -> None:
        raise RuntimeError("listener bug")

    controller.signal.add_callback(broken)
    controller.signal.add_callback(lambda: fired.append("after"))
    with caplog.at_level(logging.ERROR, logger="prism.core"):
        controller.abort()
    assert fired == ["after"]
    assert "abort callback raised" in caplog.text


async def test_wait_returns_once_aborted() -> None:
    controller = AbortController()
    woke: list[str | None] = []

    async def waiter() -> None:
        await controller.signal.wait()
        woke.append(controller.signal.reason)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert woke == []
        controller.abort("stop")
    assert woke == ["stop"]


async def test_wait_on_an_aborted_signal_still_checkpoints() -> None:
    controller = AbortController()
    controller.abort()
    with trio.CancelScope() as scope:
        scope.cancel()
        await controller.signal.wait()
    assert scope.cancelled_caught


# --- dispatch and abort ----------------------------------------------------------------


async def test_pre_aborted_signal_never_runs_anything() -> None:
    tool = RecordingTool(name="block")
    middleware = MiddlewareRegistry()
    hooks: list[str] = []
    middleware.on_tool_call(lambda call, ctx: hooks.append("call"))
    controller = AbortController()
    controller.abort("user pressed stop")
    sink, ledger = RecordingSink(), RunLedger()
    options = _options(
        tool.definition,
        middleware=middleware,
        on_event=sink,
        ledger=ledger,
        signal=controller.signal,
    )

    result = await dispatch_tool_call(_call(), options)

    assert tool.calls == []
    assert hooks == []
    assert result.is_error
    assert result.details["cancelled"] is True
    assert "user pressed stop" in result.joined_text
    assert [r.status for r in ledger.records] == ["cancelled"]
    assert [e.cancelled for e in sink.of_type(ToolExecutionError)] == [True]


async def test_abort_mid_call_cancels_the_tool_and_returns_a_cancellation_result() -> None:
    tool = BlockingTool()
    controller = AbortController()
    sink, ledger = RecordingSink(), RunLedger()
    options = _options(tool.definition, on_event=sink, ledger=ledger, signal=controller.signal)
    results: list[ToolResult] = []

    async def run() -> None:
        results.append(await dispatch_tool_call(_call(), options))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await tool.started.wait()
        controller.abort("budget exceeded")

    assert tool.cancelled == 1
    assert tool.finished == 0
    (result,) = results
    assert result.is_error
    assert "cancelled" in result.joined_text
    assert "budget exceeded" in result.joined_text
    assert [r.status for r in ledger.records] == ["cancelled"]
    assert sink.types == ["tool_execution_started", "tool_execution_error"]
    assert sink.of_type(ToolExecutionError)[0].cancelled


async def test_abort_during_an_async_permission_check_cancels_before_execute() -> None:
    tool = RecordingTool(name="block")
    entered = trio.Event()

    class SlowPolicy:
        async def check(self, request: PermissionRequest) -> PermissionDecision:
            entered.set()
            await trio.sleep_forever()
            raise AssertionError("unreachable")  # pragma: no cover

    controller = AbortController()
    ledger = RunLedger()
    options = _options(
        tool.definition, permission=SlowPolicy(), ledger=ledger, signal=controller.signal
    )
    results: list[ToolResult] = []

    async def run() -> None:
        results.append(await dispatch_tool_call(_call(), options))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await entered.wait()
        controller.abort()

    assert tool.calls == []
    assert results[0].is_error
    assert [r.status for r in ledger.records] == ["cancelled"]


async def test_callers_cancellation_propagates_and_is_still_recorded() -> None:
    tool = BlockingTool()
    sink, ledger = RecordingSink(), RunLedger()
    options = _options(tool.definition, on_event=sink, ledger=ledger)
    outcome: list[str] = []

    async def run(scope_box: list[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            scope_box.append(scope)
            await dispatch_tool_call(_call(), options)
            outcome.append("returned")  # pragma: no cover
        outcome.append("cancelled" if scope.cancelled_caught else "not cancelled")

    box: list[trio.CancelScope] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, box)
        await tool.started.wait()
        box[0].cancel()

    assert outcome == ["cancelled"]
    assert tool.cancelled == 1
    assert [r.status for r in ledger.records] == ["cancelled"]
    assert sink.of_type(ToolExecutionError)[0].cancelled


async def test_callers_timeout_with_a_signal_present_still_propagates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tool = BlockingTool()
    controller = AbortController()
    ledger = RunLedger()
    options = _options(tool.definition, ledger=ledger, signal=controller.signal)
    with trio.move_on_after(5) as scope:
        await dispatch_tool_call(_call(), options)
    assert scope.cancelled_caught
    assert not controller.signal.aborted
    assert [r.status for r in ledger.records] == ["cancelled"]


async def test_tool_can_clean_up_shielded_before_cancellation_propagates() -> None:
    cleaned = trio.Event()
    started = trio.Event()

    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await trio.lowlevel.checkpoint()
                cleaned.set()
        raise AssertionError("unreachable")  # pragma: no cover

    controller = AbortController()
    options = _options(ToolDefinition(name="t", execute=execute), signal=controller.signal)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(dispatch_tool_call, _call("t"), options)
        await started.wait()
        controller.abort()
    assert cleaned.is_set()


async def test_tool_sees_the_signal_abort_in_its_context() -> None:
    seen: list[bool] = []
    started = trio.Event()

    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        started.set()
        try:
            await ctx.signal.wait()
        finally:
            seen.append(ctx.signal.aborted)
        return ToolResult.text("saw the abort")

    controller = AbortController()
    options = _options(ToolDefinition(name="t", execute=execute), signal=controller.signal)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(dispatch_tool_call, _call("t"), options)
        await started.wait()
        controller.abort()
    assert seen == [True]


async def test_dispatch_removes_its_abort_callback_when_done() -> None:
    tool = RecordingTool(name="t")
    controller = AbortController()
    options = _options(tool.definition, signal=controller.signal)
    for _ in range(50):
        await dispatch_tool_call(_call("t"), options)
    fired: list[bool] = []
    controller.signal.add_callback(lambda: fired.append(True))
    controller.abort()
    assert fired == [True]


async def test_finished_dispatches_leave_nothing_registered_on_the_signal() -> None:
    # A callback left behind would keep its dispatch's cancel scope alive.
    tool = RecordingTool(name="t")
    controller = AbortController()
    options = _options(tool.definition, signal=controller.signal)
    await dispatch_tool_call(_call("t"), options)
    gc.collect()
    before = _cancel_scopes_alive()
    for _ in range(50):
        await dispatch_tool_call(_call("t"), options)
    gc.collect()
    assert _cancel_scopes_alive() - before < 50


def _cancel_scopes_alive() -> int:
    return sum(isinstance(item, trio.CancelScope) for item in gc.get_objects())


async def test_abort_after_the_call_finished_changes_nothing() -> None:
    tool = RecordingTool(name="t")
    controller = AbortController()
    ledger = RunLedger()
    result = await dispatch_tool_call(
        _call("t"), _options(tool.definition, signal=controller.signal, ledger=ledger)
    )
    controller.abort()
    assert not result.is_error
    assert [r.status for r in ledger.records] == ["ok"]


async def test_a_tool_whose_tasks_fail_during_the_abort_still_gives_a_cancellation_result() -> None:
    started = trio.Event()

    async def child() -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise ValueError("cleanup failed")

    async def execute(arguments: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
            started.set()
            await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    controller = AbortController()
    ledger = RunLedger()
    options = _options(
        ToolDefinition(name="t", execute=execute), ledger=ledger, signal=controller.signal
    )
    results: list[ToolResult] = []

    async def run() -> None:
        results.append(await dispatch_tool_call(_call("t"), options))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await started.wait()
        controller.abort("stop")
    assert results[0].is_error
    assert results[0].details["cancelled"] is True
    assert [r.status for r in ledger.records] == ["cancelled"]
