"""Random turns through dispatch_tool_calls_in_order: order, coverage and the bound hold."""

from __future__ import annotations

from collections import Counter
from typing import Literal

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.core import (
    AbortController,
    AgentEvent,
    DispatchOptions,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionBlocked,
    ToolExecutionContext,
    ToolExecutionError,
    ToolExecutionFinished,
    ToolResult,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_calls_in_order,
)
from prism.core.ledger import RunLedger

Kind = Literal["ok", "fail", "unknown", "denied", "exclusive"]


@attrs.frozen
class Spec:
    kind: Kind
    tenths: int


specs = st.builds(
    Spec,
    kind=st.sampled_from(["ok", "ok", "ok", "fail", "unknown", "denied", "exclusive"]),
    tenths=st.integers(min_value=0, max_value=20),
)


@attrs.define
class World:
    in_flight: int = 0
    max_in_flight: int = 0
    started_at: dict[str, float] = attrs.field(factory=dict)


def build(world: World) -> list[ToolDefinition]:
    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        world.in_flight += 1
        world.max_in_flight = max(world.max_in_flight, world.in_flight)
        world.started_at[ctx.call.id] = trio.current_time()
        try:
            tenths = args["tenths"]
            assert isinstance(tenths, int)
            await trio.sleep(tenths / 10)
            if args.get("fail"):
                raise ValueError("planned failure")
            return ToolResult.text(f"ok {ctx.call.id}")
        finally:
            world.in_flight -= 1

    return [
        ToolDefinition(name="work", execute=execute),
        ToolDefinition(name="guarded", execute=execute),
        ToolDefinition(name="shell", execute=execute, exclusive=True),
    ]


def to_call(index: int, spec: Spec) -> ToolCall:
    name = {"unknown": "missing", "denied": "guarded", "exclusive": "shell"}.get(spec.kind, "work")
    arguments: JsonObject = {"tenths": spec.tenths, "fail": spec.kind == "fail"}
    return ToolCall(id=f"c{index}", name=name, arguments=arguments)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(specs, min_size=1, max_size=12),
    concurrency=st.integers(min_value=1, max_value=6),
    abort_tenths=st.one_of(st.none(), st.integers(min_value=0, max_value=40)),
)
def test_random_turns_keep_order_coverage_and_bound(
    batch: list[Spec], concurrency: int, abort_tenths: int | None
) -> None:
    world = World()
    calls = [to_call(i, spec) for i, spec in enumerate(batch)]
    controller = AbortController()
    ledger = RunLedger()
    events: list[AgentEvent] = []
    reported: list[int] = []
    options = DispatchOptions(
        registry=create_tool_registry(build(world)),
        permission=create_rule_permission_policy(allow=["tool:work:execute", "tool:shell:execute"]),
        ledger=ledger,
        on_event=events.append,
        signal=controller.signal,
    )
    aborted_at: list[float] = []

    async def main() -> list[ToolResult]:
        async with trio.open_nursery() as nursery:
            if abort_tenths is not None:

                async def abort() -> None:
                    await trio.sleep(abort_tenths / 10)
                    aborted_at.append(trio.current_time())
                    controller.abort("random abort")

                nursery.start_soon(abort)
            results = await dispatch_tool_calls_in_order(
                calls,
                options,
                concurrency=concurrency,
                on_result=lambda index, _call, _result: reported.append(index),
            )
            nursery.cancel_scope.cancel()
        return results

    results = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    # One result per call, reported in call order.
    assert len(results) == len(calls)
    assert reported == list(range(len(calls)))
    # The bound was never exceeded; an exclusive call serialises the whole turn.
    limit = 1 if any(s.kind == "exclusive" for s in batch) else concurrency
    assert world.max_in_flight <= limit
    # No call started after the abort.
    if aborted_at:
        assert all(t <= aborted_at[0] for t in world.started_at.values())
    # Every result is the one its call deserves.
    for spec, call, result in zip(batch, calls, results, strict=True):
        if result.details.get("cancelled"):
            assert aborted_at, f"{call.id} cancelled without an abort"
            continue
        if spec.kind == "unknown":
            assert result.details["blocked_reason"] == "unknown_tool"
        elif spec.kind == "denied":
            assert result.details["blocked_reason"] == "permission_denied"
        elif spec.kind == "fail":
            assert result.is_error
            assert "planned failure" in result.joined_text
        else:
            assert result.joined_text == f"ok {call.id}"
    # The ledger and the terminal events cover every call exactly once.
    assert Counter(r.call_id for r in ledger.records) == Counter(c.id for c in calls)
    terminal = Counter(
        e.call_id
        for e in events
        if isinstance(e, (ToolExecutionFinished, ToolExecutionError, ToolExecutionBlocked))
    )
    assert terminal == Counter(c.id for c in calls)
