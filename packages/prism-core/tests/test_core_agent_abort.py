"""Aborting an agent run: the transcript stays valid and the ledger covers every call."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
import trio.testing

from prism.core import (
    AbortController,
    AgentEvent,
    AssistantMessage,
    JsonObject,
    Limits,
    Message,
    ModelRequest,
    RunFinished,
    RunOptions,
    ScriptedProvider,
    SingleShotLoop,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    ToolResultMessage,
    create_agent,
)

if TYPE_CHECKING:
    from collections.abc import Sequence


def assert_transcript_valid(messages: Sequence[Message]) -> None:
    """Every tool call has exactly one result, right after its assistant turn."""
    pending: list[str] = []
    for message in messages:
        if isinstance(message, ToolResultMessage):
            assert message.call_id in pending, f"result for unknown call {message.call_id}"
            pending.remove(message.call_id)
            continue
        assert pending == [], f"calls {pending} were never answered"
        if isinstance(message, AssistantMessage):
            pending = [call.id for call in message.tool_calls]
    assert pending == [], f"calls {pending} were never answered"


def five_calls() -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(
            ToolCall(id=f"c{i}", name="work", arguments={"s": s})
            for i, s in enumerate([0.1, 10, 10, 10, 10])
        )
    )


def worker(ran: list[str], cancelled: list[str]) -> ToolDefinition:
    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        ran.append(ctx.call.id)
        seconds = args["s"]
        assert isinstance(seconds, float | int)
        try:
            await trio.sleep(seconds)
        except trio.Cancelled:
            cancelled.append(ctx.call.id)
            raise
        return ToolResult.text(f"done {ctx.call.id}")

    return ToolDefinition(name="work", execute=execute)


async def test_abort_mid_turn_leaves_a_valid_transcript(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    cancelled: list[str] = []
    controller = AbortController()
    events: list[AgentEvent] = []
    provider = ScriptedProvider([five_calls(), AssistantMessage()])
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[worker(ran, cancelled)],
        loop=SingleShotLoop(concurrency=2),
    )

    async def abort_soon() -> None:
        await trio.sleep(1)
        controller.abort("stop")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_soon)
        result = await agent.session().run(
            "go", RunOptions(signal=controller.signal, on_event=events.append)
        )

    assert result.aborted
    assert result.rounds == 1
    assert ran == ["c0", "c1", "c2"]
    assert sorted(cancelled) == ["c1", "c2"]
    assert_transcript_valid(result.messages)
    answers = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [m.call_id for m in answers] == ["c0", "c1", "c2", "c3", "c4"]
    assert answers[0].result.joined_text == "done c0"
    assert all(m.result.details["cancelled"] for m in answers[1:])
    # The provider is not asked again after the abort.
    assert len(provider.requests) == 1
    assert {(r.call_id, r.status) for r in result.records} == {
        ("c0", "ok"),
        *((f"c{i}", "cancelled") for i in range(1, 5)),
    }
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.aborted


async def test_transcript_after_abort_can_be_sent_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    cancelled: list[str] = []
    controller = AbortController()
    provider = ScriptedProvider(
        [five_calls(), AssistantMessage(content=(TextContent(text="resumed"),))]
    )
    agent = create_agent(model="m", provider=provider, tools=[worker(ran, cancelled)])
    session = agent.session()

    async def abort_soon() -> None:
        await trio.sleep(1)
        controller.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_soon)
        await session.run("go", RunOptions(signal=controller.signal))
    result = await session.run("try again")
    assert result.final.content == (TextContent(text="resumed"),)
    assert_transcript_valid(provider.requests[1].messages)


async def test_abort_during_the_provider_request_cancels_it() -> None:
    controller = AbortController()
    waiting = trio.Event()
    cancelled: list[bool] = []

    async def hang(request: ModelRequest) -> AssistantMessage:
        waiting.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(True)
            raise
        raise AssertionError("unreachable")

    agent = create_agent(model="m", provider=ScriptedProvider([hang]))
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def abort_when_waiting() -> None:
                await waiting.wait()
                controller.abort()

            nursery.start_soon(abort_when_waiting)
            result = await agent.session().run("go", RunOptions(signal=controller.signal))
    assert cancelled == [True]
    assert result.aborted
    assert result.final == AssistantMessage()
    assert result.rounds == 0
    assert_transcript_valid(result.messages)


async def test_pre_aborted_signal_asks_the_provider_nothing() -> None:
    controller = AbortController()
    controller.abort()
    provider = ScriptedProvider([AssistantMessage()])
    agent = create_agent(model="m", provider=provider)
    result = await agent.session().run("go", RunOptions(signal=controller.signal))
    assert result.aborted
    assert provider.requests == []


async def test_caller_cancellation_still_leaves_the_session_valid(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    cancelled: list[str] = []
    provider = ScriptedProvider([five_calls(), AssistantMessage()])
    agent = create_agent(model="m", provider=provider, tools=[worker(ran, cancelled)])
    session = agent.session()
    with trio.move_on_after(1):
        await session.run("go")
    assert cancelled == ["c1"]
    assert_transcript_valid(session.messages)
    assert sorted(r.call_id for r in agent.ledger.records) == [f"c{i}" for i in range(5)]
    # The session is usable again.
    result = await session.run("again")
    assert_transcript_valid(result.messages)


async def test_caller_cancellation_with_a_capped_turn_answers_every_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []
    cancelled: list[str] = []
    provider = ScriptedProvider([five_calls(), AssistantMessage()])
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[worker(ran, cancelled)],
        limits=Limits(max_tool_calls_per_turn=2),
    )
    session = agent.session()
    with trio.move_on_after(1):
        await session.run("go")
    assert cancelled == ["c1"]
    assert_transcript_valid(session.messages)
    assert sorted((r.call_id, r.status) for r in agent.ledger.records) == [
        ("c0", "ok"),
        ("c1", "cancelled"),
        ("c2", "blocked"),
        ("c3", "blocked"),
        ("c4", "blocked"),
    ]
