"""Random agent runs: the transcript stays valid and the ledger covers every call."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism.core import (
    AbortController,
    AssistantMessage,
    JsonObject,
    Limits,
    Message,
    RunOptions,
    RunResult,
    ScriptedProvider,
    SingleShotLoop,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    ToolResultMessage,
    create_agent,
    create_rule_permission_policy,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

NAMES = ["mcp__srv__work", "fail", "missing", "denied", "shell"]


def tools() -> list[ToolDefinition]:
    async def work(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        tenths = args.get("tenths", 0)
        assert isinstance(tenths, int)
        await trio.sleep(tenths / 10)
        if ctx.call.name == "fail":
            raise RuntimeError("planned")
        return ToolResult.text("ok")

    return [
        ToolDefinition(name="mcp:srv:work", execute=work),
        ToolDefinition(name="fail", execute=work),
        ToolDefinition(name="denied", execute=work),
        ToolDefinition(name="shell", execute=work, exclusive=True),
    ]


turn_calls = st.lists(
    st.tuples(st.sampled_from(NAMES), st.integers(min_value=0, max_value=15)),
    max_size=6,
)


def assert_transcript_valid(messages: Sequence[Message]) -> None:
    pending: list[str] = []
    for message in messages:
        if isinstance(message, ToolResultMessage):
            assert message.call_id in pending
            pending.remove(message.call_id)
            continue
        assert pending == []
        if isinstance(message, AssistantMessage):
            pending = [call.id for call in message.tool_calls]
    assert pending == []


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(turn_calls, min_size=1, max_size=4),
    rounds=st.integers(min_value=0, max_value=3),
    concurrency=st.integers(min_value=1, max_value=4),
    abort_tenths=st.one_of(st.none(), st.integers(min_value=0, max_value=40)),
)
def test_random_runs_keep_the_transcript_valid_and_the_ledger_complete(
    script: list[list[tuple[str, int]]],
    rounds: int,
    concurrency: int,
    abort_tenths: int | None,
) -> None:
    turns = [
        AssistantMessage(
            tool_calls=tuple(
                ToolCall(id=f"t{t}c{i}", name=name, arguments={"tenths": tenths})
                for i, (name, tenths) in enumerate(calls)
            )
        )
        for t, calls in enumerate(script)
    ]
    # Enough answers that the script never runs dry: a final plain answer after all.
    turns.append(AssistantMessage(content=(TextContent(text="final"),)))
    provider = ScriptedProvider(turns)
    agent = create_agent(
        model="m",
        provider=provider,
        tools=tools(),
        permission=create_rule_permission_policy(deny=["tool:denied:*"], default="allow"),
        loop=SingleShotLoop(concurrency=concurrency),
        limits=Limits(max_tool_rounds=rounds),
    )
    controller = AbortController()

    async def main() -> RunResult:
        async with trio.open_nursery() as nursery:
            if abort_tenths is not None:

                async def abort() -> None:
                    await trio.sleep(abort_tenths / 10)
                    controller.abort("random")

                nursery.start_soon(abort)
            result = await agent.session().run("go", RunOptions(signal=controller.signal))
            nursery.cancel_scope.cancel()
        return result

    result = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    assert_transcript_valid(result.messages)
    assert result.rounds <= rounds
    offered_calls = [
        call for m in result.messages if isinstance(m, AssistantMessage) for call in m.tool_calls
    ]
    assert Counter(r.call_id for r in result.records) == Counter(c.id for c in offered_calls)
    assert Counter(r.call_id for r in agent.ledger.records) == Counter(c.id for c in offered_calls)
    # Once the round limit was hit, the last provider request offered no tools.
    if not result.aborted and result.rounds == rounds:
        assert provider.requests[-1].tools == ()
    # Ledger and events speak registry names, never the provider alias.
    assert all(r.tool_name != "mcp__srv__work" for r in result.records)
    for record in result.records:
        if record.tool_name == "denied":
            assert record.status in ("blocked", "cancelled")
        if record.tool_name == "missing":
            assert record.status in ("blocked", "cancelled")
