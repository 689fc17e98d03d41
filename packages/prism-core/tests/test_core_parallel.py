"""Bounded, in-order parallel dispatch of one turn's tool calls."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from prism.core import (
    AbortController,
    AgentEvent,
    ConfigurationError,
    DispatchOptions,
    JsonObject,
    PermissionDecision,
    PermissionRequest,
    ToolCall,
    ToolDefinition,
    ToolExecutionBlocked,
    ToolExecutionContext,
    ToolExecutionError,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolResult,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_calls_in_order,
    resolve_tool_concurrency,
)
from prism.core.ledger import RunLedger


@attrs.define
class Probe:
    """Counts calls in flight and remembers what the tools saw."""

    in_flight: int = 0
    max_in_flight: int = 0
    started: list[str] = attrs.field(factory=list)
    finished: list[str] = attrs.field(factory=list)
    cancelled: list[str] = attrs.field(factory=list)
    saw_abort: list[bool] = attrs.field(factory=list)


def sleeper(probe: Probe, name: str = "sleep", *, exclusive: bool = False) -> ToolDefinition:
    """A tool that sleeps ``args['s']`` seconds (fails when ``args['fail']``)."""

    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        probe.in_flight += 1
        probe.max_in_flight = max(probe.max_in_flight, probe.in_flight)
        probe.started.append(ctx.call.id)
        try:
            seconds = args.get("s", 0)
            assert isinstance(seconds, (int, float))
            await trio.sleep(seconds)
            if args.get("fail"):
                raise RuntimeError(f"boom {ctx.call.id}")
        except trio.Cancelled:
            probe.cancelled.append(ctx.call.id)
            probe.saw_abort.append(ctx.signal.aborted)
            raise
        finally:
            probe.in_flight -= 1
        probe.finished.append(ctx.call.id)
        return ToolResult.text(f"done {ctx.call.id}")

    return ToolDefinition(name=name, execute=execute, exclusive=exclusive)


def calls_of(*seconds: float, name: str = "sleep") -> list[ToolCall]:
    return [ToolCall(id=f"c{i}", name=name, arguments={"s": s}) for i, s in enumerate(seconds)]


def options_for(*tools: ToolDefinition, **kwargs: object) -> DispatchOptions:
    return DispatchOptions(registry=create_tool_registry(tools), **kwargs)  # type: ignore[arg-type]


async def test_in_flight_never_exceeds_concurrency(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    calls = calls_of(*[0.1 * (i % 5 + 1) for i in range(20)])
    results = await dispatch_tool_calls_in_order(calls, options_for(sleeper(probe)), concurrency=3)
    assert probe.max_in_flight == 3
    assert [r.joined_text for r in results] == [f"done c{i}" for i in range(20)]


async def test_concurrency_above_call_count_runs_everything_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    start = trio.current_time()
    await dispatch_tool_calls_in_order(
        calls_of(1, 1, 1), options_for(sleeper(probe)), concurrency=50
    )
    assert probe.max_in_flight == 3
    assert trio.current_time() - start == pytest.approx(1.0)


async def test_default_concurrency_is_sequential(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    await dispatch_tool_calls_in_order(calls_of(0.3, 0.2, 0.1), options_for(sleeper(probe)))
    assert probe.max_in_flight == 1
    assert probe.finished == ["c0", "c1", "c2"]


async def test_results_keep_call_order_under_reversed_completion(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    events: list[AgentEvent] = []
    seen: list[tuple[int, str]] = []
    calls = calls_of(0.5, 0.4, 0.3, 0.2, 0.1)
    results = await dispatch_tool_calls_in_order(
        calls,
        options_for(sleeper(probe), on_event=events.append),
        concurrency=5,
        on_result=lambda i, call, result: seen.append((i, call.id)),
    )
    assert probe.finished == ["c4", "c3", "c2", "c1", "c0"]
    finished_events = [e.call_id for e in events if isinstance(e, ToolExecutionFinished)]
    assert finished_events == ["c4", "c3", "c2", "c1", "c0"]
    assert seen == [(i, f"c{i}") for i in range(5)]
    assert [r.joined_text for r in results] == [f"done c{i}" for i in range(5)]


async def test_on_result_waits_for_every_earlier_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    reported_at: dict[int, float] = {}

    def on_result(index: int, call: ToolCall, result: ToolResult) -> None:
        reported_at[index] = trio.current_time()

    await dispatch_tool_calls_in_order(
        calls_of(1.0, 0.1, 0.2),
        options_for(sleeper(probe)),
        concurrency=3,
        on_result=on_result,
    )
    assert reported_at[0] == reported_at[1] == reported_at[2]
    assert probe.finished == ["c1", "c2", "c0"]


async def test_on_result_fires_before_later_calls_finish() -> None:
    gate = trio.Event()
    order: list[str] = []

    async def first(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.text("first")

    async def second(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        # Finishes only once the first call's result has been reported.
        await gate.wait()
        order.append("second finished")
        return ToolResult.text("second")

    def on_result(index: int, call: ToolCall, result: ToolResult) -> None:
        order.append(f"reported {index}")
        if index == 0:
            gate.set()

    registry_tools = (
        ToolDefinition(name="first", execute=first),
        ToolDefinition(name="second", execute=second),
    )
    calls = [
        ToolCall(id="a", name="first", arguments={}),
        ToolCall(id="b", name="second", arguments={}),
    ]
    with trio.fail_after(5):
        await dispatch_tool_calls_in_order(
            calls, options_for(*registry_tools), concurrency=2, on_result=on_result
        )
    assert order == ["reported 0", "second finished", "reported 1"]


async def test_exclusive_tool_runs_its_turn_one_at_a_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    tools = (sleeper(probe), sleeper(probe, "shell", exclusive=True))
    calls = [*calls_of(0.1, 0.1), ToolCall(id="x", name="shell", arguments={"s": 0.1})]
    await dispatch_tool_calls_in_order(calls, options_for(*tools), concurrency=8)
    assert probe.max_in_flight == 1


async def test_failing_and_blocked_calls_never_cancel_siblings(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    ledger = RunLedger()
    calls = [
        ToolCall(id="slow", name="sleep", arguments={"s": 2}),
        ToolCall(id="raises", name="sleep", arguments={"s": 0.1, "fail": True}),
        ToolCall(id="unknown", name="nope", arguments={}),
        ToolCall(id="bad-args", name="sleep", arguments=["not", "an", "object"]),
        ToolCall(id="denied", name="sleep", arguments={"s": 0}),
    ]

    results = await dispatch_tool_calls_in_order(
        calls, options_for(sleeper(probe), ledger=ledger), concurrency=5
    )
    assert results[0].joined_text == "done slow"
    assert results[1].is_error
    assert "boom raises" in results[1].joined_text
    assert results[2].details["blocked_reason"] == "unknown_tool"
    assert results[3].details["blocked_reason"] == "invalid_arguments"
    assert not results[4].is_error
    assert probe.cancelled == []
    assert sorted(r.call_id for r in ledger.records) == sorted(c.id for c in calls)


async def test_permission_blocked_call_fills_its_own_slot() -> None:
    probe = Probe()
    policy = create_rule_permission_policy(allow=["tool:sleep:execute"])
    tools = (sleeper(probe), sleeper(probe, "secret"))
    calls = [
        ToolCall(id="a", name="sleep", arguments={}),
        ToolCall(id="b", name="secret", arguments={}),
        ToolCall(id="c", name="sleep", arguments={}),
    ]
    results = await dispatch_tool_calls_in_order(
        calls, options_for(*tools, permission=policy), concurrency=2
    )
    assert [r.is_error for r in results] == [False, True, False]
    assert results[1].details["blocked_reason"] == "permission_denied"
    assert probe.started == ["a", "c"]


async def test_abort_cancels_in_flight_and_never_starts_the_rest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    controller = AbortController()
    ledger = RunLedger()
    events: list[AgentEvent] = []
    reported: list[int] = []
    options = options_for(
        sleeper(probe), signal=controller.signal, ledger=ledger, on_event=events.append
    )
    calls = calls_of(0.5, 10, 10, 10, 10, 10)

    async def abort_later() -> None:
        await trio.sleep(1)
        controller.abort("user pressed stop")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        results = await dispatch_tool_calls_in_order(
            calls, options, concurrency=2, on_result=lambda i, _c, _r: reported.append(i)
        )

    assert probe.finished == ["c0"]
    assert probe.started == ["c0", "c1", "c2"]
    assert sorted(probe.cancelled) == ["c1", "c2"]
    assert probe.saw_abort == [True, True]
    assert results[0].joined_text == "done c0"
    for result in results[1:]:
        assert result.is_error
        assert result.details["cancelled"] is True
        assert "user pressed stop" in result.joined_text
    assert [r.details.get("started") for r in results[3:]] == [False, False, False]
    assert reported == [0, 1, 2, 3, 4, 5]
    statuses = {r.call_id: r.status for r in ledger.records}
    assert statuses == {"c0": "ok", **{f"c{i}": "cancelled" for i in range(1, 6)}}
    terminal = [
        e.call_id
        for e in events
        if isinstance(e, (ToolExecutionFinished, ToolExecutionError, ToolExecutionBlocked))
    ]
    assert sorted(terminal) == [c.id for c in calls]
    started = [e.call_id for e in events if isinstance(e, ToolExecutionStarted)]
    assert started == ["c0", "c1", "c2"]


async def test_pre_aborted_signal_starts_nothing() -> None:
    probe = Probe()
    controller = AbortController()
    controller.abort()
    ledger = RunLedger()
    results = await dispatch_tool_calls_in_order(
        calls_of(0, 0, 0),
        options_for(sleeper(probe), signal=controller.signal, ledger=ledger),
        concurrency=2,
    )
    assert probe.started == []
    assert all(r.is_error and r.details["cancelled"] for r in results)
    assert [r.status for r in ledger.records] == ["cancelled"] * 3


async def test_abort_reaches_a_call_waiting_in_a_permission_gate() -> None:
    controller = AbortController()
    probe = Probe()
    waiting = trio.Event()

    class SlowApproval:
        async def check(self, request: PermissionRequest) -> PermissionDecision:
            waiting.set()
            await trio.sleep_forever()
            raise AssertionError("unreachable")

    ledger = RunLedger()
    options = options_for(
        sleeper(probe), permission=SlowApproval(), signal=controller.signal, ledger=ledger
    )
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def abort_when_waiting() -> None:
                await waiting.wait()
                controller.abort("gave up")

            nursery.start_soon(abort_when_waiting)
            results = await dispatch_tool_calls_in_order(calls_of(0, 0), options)
    assert probe.started == []
    assert all(r.details["cancelled"] for r in results)
    assert [r.status for r in ledger.records] == ["cancelled", "cancelled"]


async def test_caller_cancellation_propagates_and_ledger_covers_every_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    ledger = RunLedger()
    options = options_for(sleeper(probe), ledger=ledger)
    with trio.move_on_after(1) as scope:
        await dispatch_tool_calls_in_order(calls_of(10, 10, 10, 10), options, concurrency=2)
    assert scope.cancelled_caught
    assert sorted(probe.cancelled) == ["c0", "c1"]
    assert sorted((r.call_id, r.status) for r in ledger.records) == [
        (f"c{i}", "cancelled") for i in range(4)
    ]


def count_tasks() -> int:
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(child) for n in task.child_nurseries for child in n.child_tasks)

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return walk(root)


async def test_no_task_outlives_the_turn(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    controller = AbortController()
    before = count_tasks()
    inside: list[int] = []

    def on_result(index: int, call: ToolCall, result: ToolResult) -> None:
        inside.append(count_tasks())
        if index == 1:
            controller.abort()

    await dispatch_tool_calls_in_order(
        calls_of(0.1, 0.2, 5, 5, 5),
        options_for(sleeper(probe), signal=controller.signal),
        concurrency=3,
        on_result=on_result,
    )
    assert max(inside) > before
    assert count_tasks() == before


async def test_empty_turn_returns_no_results() -> None:
    probe = Probe()
    assert await dispatch_tool_calls_in_order([], options_for(sleeper(probe)), concurrency=4) == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
async def test_bad_concurrency_is_refused_with_its_value(bad: object) -> None:
    probe = Probe()
    with pytest.raises(ConfigurationError, match="concurrency") as info:
        await dispatch_tool_calls_in_order(
            calls_of(0),
            options_for(sleeper(probe)),
            concurrency=bad,  # type: ignore[arg-type]
        )
    assert repr(bad) in str(info.value)
    assert probe.started == []


async def test_non_tool_call_items_are_refused() -> None:
    probe = Probe()
    with pytest.raises(TypeError, match="ToolCall"):
        await dispatch_tool_calls_in_order(
            [{"id": "x", "name": "sleep"}],  # type: ignore[list-item]
            options_for(sleeper(probe)),
        )


def resolve(requested: int | None, names: list[str], registry_tools: list[ToolDefinition]) -> int:
    calls = [ToolCall(id=str(i), name=n, arguments={}) for i, n in enumerate(names)]
    return resolve_tool_concurrency(requested, calls, create_tool_registry(registry_tools))


def make_tools() -> list[ToolDefinition]:
    probe = Probe()
    return [sleeper(probe, "a"), sleeper(probe, "shell", exclusive=True)]


@pytest.mark.parametrize(
    ("requested", "names", "expected"),
    [
        (None, ["a", "a", "a"], 1),
        (4, ["a", "a", "a"], 3),
        (2, ["a", "a", "a"], 2),
        (4, ["a", "shell", "a"], 1),
        (4, ["a", "missing", "a"], 3),
        (4, [], 1),
    ],
)
def test_resolve_tool_concurrency(requested: int | None, names: list[str], expected: int) -> None:
    assert resolve(requested, names, make_tools()) == expected


@pytest.mark.parametrize("bad", [0, -3, 2.0, False, "4"])
def test_resolve_rejects_bad_requests(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"resolve_tool_concurrency\.requested must be"):
        resolve(bad, ["a"], make_tools())  # type: ignore[arg-type]


async def test_a_raising_on_result_propagates_after_full_bookkeeping(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    ledger = RunLedger()

    def explode(index: int, call: ToolCall, result: ToolResult) -> None:
        raise LookupError("host bug")

    with pytest.raises(LookupError, match="host bug"):
        await dispatch_tool_calls_in_order(
            calls_of(0.1, 5, 5, 5),
            options_for(sleeper(probe), ledger=ledger),
            concurrency=2,
            on_result=explode,
        )
    assert sorted(r.call_id for r in ledger.records) == ["c0", "c1", "c2", "c3"]
    assert probe.cancelled == ["c1"]


async def test_a_cancelled_turn_starts_no_further_call() -> None:
    started: list[str] = []

    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        # Side effect before the first checkpoint: must never happen once cancelled.
        started.append(ctx.call.id)
        if ctx.call.id == "c0":
            outer.cancel()
        await trio.sleep(1)
        return ToolResult.text("late")

    ledger = RunLedger()
    options = options_for(ToolDefinition(name="sleep", execute=execute), ledger=ledger)
    with trio.CancelScope() as outer:
        await dispatch_tool_calls_in_order(calls_of(0, 0, 0, 0), options, concurrency=3)
    assert started == ["c0"]
    assert sorted((r.call_id, r.status) for r in ledger.records) == [
        (f"c{i}", "cancelled") for i in range(4)
    ]
