"""The agent runtime: provider turns, tool rounds, limits, names, events and the ledger."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from prism.core import (
    AgentEvent,
    AssistantMessage,
    ConfigurationError,
    JsonObject,
    Limits,
    Message,
    ModelProviderError,
    ModelRequest,
    RunFinished,
    RunOptions,
    ScriptedProvider,
    ScriptExhaustedError,
    SessionBusyError,
    SingleShotLoop,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecutionBlocked,
    ToolExecutionContext,
    ToolExecutionFinished,
    ToolExecutionProgress,
    ToolExecutionStarted,
    ToolFilter,
    ToolResult,
    ToolResultMessage,
    TurnFinished,
    TurnStarted,
    UserMessage,
    create_agent,
    create_rule_permission_policy,
    create_tool_registry,
)
from prism.core.ledger import RunLedger

if TYPE_CHECKING:
    from collections.abc import Sequence


def answer(text: str) -> AssistantMessage:
    return AssistantMessage(content=(TextContent(text=text),))


def calling(*calls: tuple[str, str, object]) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(ToolCall(id=i, name=n, arguments=a) for i, n, a in calls)
    )


async def echo(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text(f"{ctx.call.name}:{args.get('x')}")


def echo_tool(name: str = "echo", **kwargs: object) -> ToolDefinition:
    return ToolDefinition(name=name, execute=echo, **kwargs)  # type: ignore[arg-type]


def assert_transcript_valid(messages: Sequence[Message]) -> None:
    """Every tool call is answered exactly once, right after its assistant turn."""
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


async def test_answer_without_tool_calls_ends_the_run() -> None:
    provider = ScriptedProvider([answer("hello")])
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()])
    result = await agent.session().run("hi")
    assert result.final == answer("hello")
    assert result.rounds == 0
    assert not result.aborted
    assert result.messages == (UserMessage(content=(TextContent(text="hi"),)), answer("hello"))
    assert [t.name for t in provider.requests[0].tools] == ["echo"]
    assert provider.requests[0].model == "m"


async def test_tool_round_appends_results_in_call_order_then_asks_for_final_answer() -> None:
    provider = ScriptedProvider(
        [calling(("1", "echo", {"x": 1}), ("2", "echo", {"x": 2})), answer("done")]
    )
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()])
    result = await agent.session().run("go")
    tool_messages = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(m.call_id, m.result.joined_text) for m in tool_messages] == [
        ("1", "echo:1"),
        ("2", "echo:2"),
    ]
    assert result.rounds == 1
    assert result.final == answer("done")
    final_request = provider.requests[1]
    assert final_request.tools == ()
    assert final_request.messages == result.messages[:-1]
    assert_transcript_valid(result.messages)


async def test_max_tool_rounds_allows_that_many_rounds() -> None:
    provider = ScriptedProvider(
        [
            calling(("1", "echo", {"x": 1})),
            calling(("2", "echo", {"x": 2})),
            calling(("3", "echo", {"x": 3})),
            answer("done"),
        ]
    )
    agent = create_agent(
        model="m", provider=provider, tools=[echo_tool()], limits=Limits(max_tool_rounds=3)
    )
    result = await agent.session().run("go")
    assert result.rounds == 3
    assert [bool(r.tools) for r in provider.requests] == [True, True, True, False]


async def test_calls_made_after_the_limit_are_refused_not_run() -> None:
    ran: list[str] = []

    async def tool(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        ran.append(ctx.call.id)
        return ToolResult.text("ran")

    provider = ScriptedProvider([calling(("1", "t", {})), calling(("2", "t", {}))])
    events: list[AgentEvent] = []
    agent = create_agent(
        model="m", provider=provider, tools=[ToolDefinition(name="t", execute=tool)]
    )
    result = await agent.session().run("go", RunOptions(on_event=events.append))
    assert ran == ["1"]
    refused = result.messages[-1]
    assert isinstance(refused, ToolResultMessage)
    assert refused.result.is_error
    assert "tool-round limit (1)" in refused.result.joined_text
    assert [(r.call_id, r.status, r.blocked_reason) for r in result.records] == [
        ("1", "ok", None),
        ("2", "blocked", "tool_denied"),
    ]
    assert any(isinstance(e, ToolExecutionBlocked) and e.call_id == "2" for e in events)
    assert_transcript_valid(result.messages)


async def test_zero_tool_rounds_offers_no_tools() -> None:
    provider = ScriptedProvider([answer("plain")])
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()])
    result = await agent.session().run("hi", RunOptions(limits=Limits(max_tool_rounds=0)))
    assert provider.requests[0].tools == ()
    assert result.rounds == 0


async def test_events_cover_turns_tools_and_the_run_in_order() -> None:
    provider = ScriptedProvider([calling(("1", "echo", {"x": 1})), answer("done")])
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()])
    events: list[AgentEvent] = []
    await agent.session().run("go", RunOptions(on_event=events.append))
    assert [type(e) for e in events] == [
        TurnStarted,
        ToolExecutionStarted,
        ToolExecutionFinished,
        TurnFinished,
        TurnStarted,
        TurnFinished,
        RunFinished,
    ]
    assert [e.turn for e in events if isinstance(e, TurnFinished)] == [1, 2]
    assert [e.tool_calls for e in events if isinstance(e, TurnFinished)] == [1, 0]
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert (last.rounds, last.aborted) == (1, False)


async def test_a_raising_event_sink_never_breaks_the_run() -> None:
    def broken(event: AgentEvent) -> None:
        raise RuntimeError("sink down")

    provider = ScriptedProvider([calling(("1", "echo", {"x": 1})), answer("done")])
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()])
    result = await agent.session().run("go", RunOptions(on_event=broken))
    assert result.final == answer("done")


async def test_offered_names_are_provider_safe_and_calls_map_back() -> None:
    provider = ScriptedProvider([calling(("1", "mcp__docs__search", {"x": "q"})), answer("ok")])
    events: list[AgentEvent] = []
    agent = create_agent(model="m", provider=provider, tools=[echo_tool("mcp:docs:search")])
    result = await agent.session().run("go", RunOptions(on_event=events.append))
    assert [t.name for t in provider.requests[0].tools] == ["mcp__docs__search"]
    tool_message = result.messages[2]
    assert isinstance(tool_message, ToolResultMessage)
    # The tool ran under its registry name; the transcript keeps the model's name.
    assert tool_message.result.joined_text == "mcp:docs:search:q"
    assert tool_message.tool_name == "mcp__docs__search"
    assert [r.tool_name for r in result.records] == ["mcp:docs:search"]
    assert {e.tool_name for e in events if isinstance(e, ToolExecutionStarted)} == {
        "mcp:docs:search"
    }


async def test_unknown_safe_name_is_blocked_under_the_name_the_model_used() -> None:
    provider = ScriptedProvider([calling(("1", "mcp__docs__nothing", {})), answer("ok")])
    agent = create_agent(model="m", provider=provider, tools=[echo_tool("mcp:docs:search")])
    result = await agent.session().run("go")
    (record,) = result.records
    assert (record.tool_name, record.status, record.blocked_reason) == (
        "mcp__docs__nothing",
        "blocked",
        "unknown_tool",
    )


def test_alias_collision_is_refused_at_create_agent_naming_both_tools() -> None:
    with pytest.raises(ConfigurationError) as info:
        create_agent(
            model="m",
            provider=ScriptedProvider([]),
            tools=[echo_tool("mcp:docs:search"), echo_tool("mcp__docs__search")],
        )
    assert "'mcp:docs:search'" in str(info.value)
    assert "'mcp__docs__search'" in str(info.value)


async def test_a_registry_changed_to_hold_a_colliding_alias_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A refreshed MCP listing can bring a name offered under another tool's alias
    # (a server's tool x beside a local mcp__docs__x): the name map raised on
    # every run after, so one server's listing took down every tool.
    provider = ScriptedProvider([calling(("1", "mcp__docs__x", {"x": "q"})), answer("ok")])
    registry = create_tool_registry([echo_tool("mcp__docs__x")])
    agent = create_agent(model="m", provider=provider, tools=registry)
    registry.register(echo_tool("mcp:docs:x"))
    result = await agent.session().run("go")
    assert [t.name for t in provider.requests[0].tools] == ["mcp__docs__x"]
    assert [r.tool_name for r in result.records] == ["mcp__docs__x"]
    assert "tool 'mcp:docs:x' is not offered" in caplog.text
    assert "like 'mcp__docs__x'" in caplog.text


async def test_filtered_tools_are_neither_offered_nor_run() -> None:
    provider = ScriptedProvider([calling(("1", "hidden", {})), answer("ok")])
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[echo_tool(), echo_tool("hidden")],
        filters=[ToolFilter(deny=frozenset({"hidden"}))],
    )
    result = await agent.session().run("go")
    assert [t.name for t in provider.requests[0].tools] == ["echo"]
    assert result.records[0].blocked_reason == "tool_denied"


async def test_permission_policy_gates_agent_calls() -> None:
    provider = ScriptedProvider([calling(("1", "echo", {"x": 1})), answer("ok")])
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[echo_tool()],
        permission=create_rule_permission_policy(deny=["tool:echo:execute"], default="allow"),
    )
    result = await agent.session().run("go")
    assert result.records[0].blocked_reason == "permission_denied"


async def test_run_options_override_the_validator() -> None:
    def refuse(tool: ToolDefinition, args: JsonObject, ctx: ToolExecutionContext) -> str:
        return "per-run validator refused"

    provider = ScriptedProvider([calling(("1", "echo", {"x": 1})), answer("ok")])
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()])
    result = await agent.session().run("go", RunOptions(validator=refuse))
    assert result.records[0].blocked_reason == "validation_failed"


async def test_loop_concurrency_and_exclusive_clamp_apply_per_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    in_flight = 0
    peaks: list[int] = []

    async def slow(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        nonlocal in_flight
        in_flight += 1
        peaks.append(in_flight)
        await trio.sleep(1)
        in_flight -= 1
        return ToolResult.text("ok")

    tools = [
        ToolDefinition(name="slow", execute=slow),
        ToolDefinition(name="shell", execute=slow, exclusive=True),
    ]
    four = calling(*[(f"a{i}", "slow", {}) for i in range(4)])
    with_shell = calling(("b0", "slow", {}), ("b1", "shell", {}), ("b2", "slow", {}))
    provider = ScriptedProvider([four, with_shell, four, answer("done")])
    agent = create_agent(
        model="m",
        provider=provider,
        tools=tools,
        loop=SingleShotLoop(concurrency=4),
        limits=Limits(max_tool_rounds=3),
    )
    await agent.session().run("go")
    assert peaks[:4] == [1, 2, 3, 4]
    assert peaks[4:7] == [1, 1, 1]
    assert max(peaks[7:]) == 4


async def test_run_options_loop_overrides_the_agent_loop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    starts: list[float] = []

    async def slow(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        starts.append(trio.current_time())
        await trio.sleep(1)
        return ToolResult.text("ok")

    provider = ScriptedProvider([calling(("1", "slow", {}), ("2", "slow", {})), answer("done")])
    agent = create_agent(
        model="m", provider=provider, tools=[ToolDefinition(name="slow", execute=slow)]
    )
    await agent.session().run("go", RunOptions(loop=SingleShotLoop(concurrency=2)))
    assert starts[0] == starts[1]


async def test_session_keeps_the_conversation_across_runs() -> None:
    provider = ScriptedProvider([answer("first"), answer("second")])
    agent = create_agent(model="m", provider=provider)
    session = agent.session()
    await session.run("one")
    result = await session.run(UserMessage(content=(TextContent(text="two"),)))
    assert len(result.messages) == 4
    assert provider.requests[1].messages == result.messages[:3]
    assert session.messages == result.messages


async def test_records_are_per_run_and_the_agent_ledger_keeps_them_all() -> None:
    ledger = RunLedger()
    provider = ScriptedProvider(
        [
            calling(("1", "echo", {"x": 1})),
            answer("a"),
            calling(("1", "echo", {"x": 2})),
            answer("b"),
        ]
    )
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()], ledger=ledger)
    first = await agent.session().run("go")
    second = await agent.session().run("go")
    assert [r.arguments for r in first.records] == [{"x": 1}]
    assert [r.arguments for r in second.records] == [{"x": 2}]
    assert [r.arguments for r in ledger.records] == [{"x": 1}, {"x": 2}]
    assert agent.ledger is ledger


async def test_concurrent_runs_on_one_session_are_refused() -> None:
    release = trio.Event()
    entered = trio.Event()

    async def wait_turn(request: ModelRequest) -> AssistantMessage:
        entered.set()
        await release.wait()
        return answer("late")

    agent = create_agent(model="m", provider=ScriptedProvider([wait_turn]))
    session = agent.session()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.run, "one")
        await entered.wait()
        with pytest.raises(SessionBusyError):
            await session.run("two")
        release.set()
    assert session.messages[-1] == answer("late")


async def test_provider_exception_is_translated_and_chained() -> None:
    class Broken:
        async def complete(self, request: ModelRequest) -> AssistantMessage:
            raise KeyError("upstream")

    agent = create_agent(model="m", provider=Broken())
    with pytest.raises(ModelProviderError, match="Broken raised KeyError") as info:
        await agent.session().run("go")
    assert isinstance(info.value.__cause__, KeyError)


async def test_provider_returning_nonsense_is_an_error() -> None:
    class Nonsense:
        async def complete(self, request: ModelRequest) -> AssistantMessage:
            return "just a string"  # type: ignore[return-value]

    agent = create_agent(model="m", provider=Nonsense())
    with pytest.raises(ModelProviderError, match="returned str"):
        await agent.session().run("go")


async def test_malformed_tool_calls_from_the_provider_are_an_error() -> None:
    bad = AssistantMessage(tool_calls=({"id": "1", "name": "echo"},))
    agent = create_agent(model="m", provider=ScriptedProvider([bad]), tools=[echo_tool()])
    with pytest.raises(ModelProviderError, match="malformed tool call"):
        await agent.session().run("go")


async def test_hostile_arguments_are_blocked_not_run() -> None:
    provider = ScriptedProvider(
        [calling(("1", "echo", "rm -rf /"), ("2", "echo", {1: "int key"})), answer("ok")]
    )
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()])
    result = await agent.session().run("go")
    assert [r.blocked_reason for r in result.records] == ["invalid_arguments", "invalid_arguments"]


async def test_scripted_provider_runs_out_with_a_clear_error() -> None:
    provider = ScriptedProvider([calling(("1", "echo", {"x": 1}))])
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()])
    with pytest.raises(ScriptExhaustedError, match=r"held 1 turn\(s\) and was asked for turn 2"):
        await agent.session().run("go")


async def test_scripted_callable_turns_see_the_request() -> None:
    seen: list[int] = []

    def reply(request: ModelRequest) -> AssistantMessage:
        seen.append(len(request.messages))
        return answer(f"{len(request.tools)} tools")

    provider = ScriptedProvider([reply])
    agent = create_agent(model="m", provider=provider, tools=[echo_tool()])
    result = await agent.session().run("go")
    assert seen == [1]
    assert result.final == answer("1 tools")
    assert provider.remaining == 0


async def test_scripted_callable_that_raises_is_a_provider_error() -> None:
    def reply(request: ModelRequest) -> AssistantMessage:
        raise ValueError("bad script")

    agent = create_agent(model="m", provider=ScriptedProvider([reply]))
    with pytest.raises(ModelProviderError, match="turn 1 raised ValueError: bad script"):
        await agent.session().run("go")


@pytest.mark.parametrize("turns", ["text", [42], None])
def test_scripted_provider_refuses_bad_turns(turns: object) -> None:
    with pytest.raises(ConfigurationError, match="ScriptedProvider turns"):
        ScriptedProvider(turns)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("model", ""),
        ("model", 3),
        ("provider", object()),
        ("loop", {"concurrency": 2}),
        ("limits", 3),
        ("ledger", []),
        ("validator", "yes"),
        ("permission", "allow"),
        ("filters", ["echo"]),
        ("tools", "echo"),
    ],
)
def test_create_agent_refuses_bad_options_naming_them(option: str, value: object) -> None:
    kwargs: dict[str, object] = {"model": "m", "provider": ScriptedProvider([])}
    kwargs[option] = value
    with pytest.raises(ConfigurationError, match=option):
        create_agent(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -1, 1.0, True, "2"])
def test_single_shot_loop_refuses_bad_concurrency(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"SingleShotLoop\.concurrency"):
        SingleShotLoop(concurrency=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1, 1.5, None, False])
def test_limits_refuse_bad_rounds(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"Limits\.max_tool_rounds"):
        Limits(max_tool_rounds=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value"),
    [("signal", "stop"), ("limits", 1), ("loop", 2), ("validator", 3), ("on_event", 4)],
)
def test_run_options_refuse_bad_values(option: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"RunOptions.{option}"):
        RunOptions(**{option: value})  # type: ignore[arg-type]


async def test_prompt_must_be_text_or_a_user_message() -> None:
    agent = create_agent(model="m", provider=ScriptedProvider([answer("x")]))
    with pytest.raises(TypeError, match="prompt"):
        await agent.session().run(42)  # type: ignore[arg-type]


async def test_live_registry_offers_tools_added_later() -> None:
    registry = create_tool_registry([echo_tool()])
    provider = ScriptedProvider([answer("a"), answer("b")])
    agent = create_agent(model="m", provider=provider, tools=registry)
    await agent.session().run("go")
    registry.register(echo_tool("mcp:late:tool"))
    await agent.session().run("go")
    assert [t.name for t in provider.requests[1].tools] == ["echo", "mcp__late__tool"]


async def test_calls_beyond_the_per_turn_cap_are_refused_not_run() -> None:
    ran: list[str] = []

    async def tool(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        ran.append(ctx.call.id)
        return ToolResult.text("ran")

    flood = calling(*[(f"c{i}", "t", {}) for i in range(5)])
    provider = ScriptedProvider([flood, answer("done")])
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[ToolDefinition(name="t", execute=tool)],
        limits=Limits(max_tool_calls_per_turn=2),
    )
    result = await agent.session().run("go")
    assert ran == ["c0", "c1"]
    answers = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [m.call_id for m in answers] == [f"c{i}" for i in range(5)]
    assert all("at most 2 are run per turn" in m.result.joined_text for m in answers[2:])
    assert [r.status for r in result.records] == ["ok", "ok", "blocked", "blocked", "blocked"]
    assert_transcript_valid(result.messages)


@pytest.mark.parametrize("value", [0, -1, 2.5, None])
def test_limits_refuse_a_bad_per_turn_cap(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"Limits\.max_tool_calls_per_turn"):
        Limits(max_tool_calls_per_turn=value)  # type: ignore[arg-type]


async def test_tool_progress_reaches_the_run_event_sink() -> None:
    async def working(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        ctx.report_progress("halfway", progress=1, total=2)
        return ToolResult.text("done")

    provider = ScriptedProvider([calling(("1", "w", {})), answer("ok")])
    agent = create_agent(
        model="m", provider=provider, tools=[ToolDefinition(name="w", execute=working)]
    )
    events: list[AgentEvent] = []
    await agent.session().run("go", RunOptions(on_event=events.append))
    progress = [e for e in events if isinstance(e, ToolExecutionProgress)]
    assert [(e.call_id, e.message, e.progress, e.total) for e in progress] == [
        ("1", "halfway", 1, 2)
    ]


async def test_sessions_of_one_agent_run_concurrently() -> None:
    both_waiting = trio.Event()
    arrived = 0

    async def rendezvous(request: ModelRequest) -> AssistantMessage:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both_waiting.set()
        await both_waiting.wait()
        return answer("together")

    agent = create_agent(model="m", provider=ScriptedProvider([rendezvous, rendezvous]))
    results: list[AssistantMessage] = []

    async def one() -> None:
        results.append((await agent.session().run("go")).final)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one)
            nursery.start_soon(one)
    assert results == [answer("together"), answer("together")]
