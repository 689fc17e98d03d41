"""The asyncio host: Prism from asyncio through trio guest mode.

The asyncio tests are plain functions that call ``asyncio.run`` (the suite runs
every ``async def`` test under trio); the trio tests check the host refuses to
be used where it makes no sense.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio
import trio.lowlevel

from prism.core import (
    AssistantMessage,
    AsyncioHostClosedError,
    DispatchOptions,
    RunLedger,
    ScriptedProvider,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolResult,
    TrioRequiredError,
    create_agent,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
    dispatch_tool_calls_in_order,
    open_asyncio_host,
    require_trio,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from prism.core import JsonObject, ToolExecutionContext


async def add(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    await trio.lowlevel.checkpoint()
    a, b = args["a"], args["b"]
    assert isinstance(a, int)
    assert isinstance(b, int)
    return ToolResult.text(str(a + b))


def options_for(*tools: ToolDefinition, ledger: RunLedger | None = None) -> DispatchOptions:
    return DispatchOptions(
        registry=create_tool_registry(tools),
        permission=create_rule_permission_policy(allow=["tool:*:execute"]),
        ledger=ledger,
    )


ADD = ToolDefinition(name="add", execute=add)


class Blocker:
    """A tool that tells asyncio when it started, then waits forever (or until cancelled)."""

    def __init__(self) -> None:
        self.started: asyncio.Event | None = None
        self.cancelled = False

    async def execute(self, _args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        assert self.started is not None
        self.started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


def test_dispatch_from_asyncio_runs_every_gate_and_records_the_call() -> None:
    ledger = RunLedger()

    async def main() -> ToolResult:
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="add", arguments={"a": 2, "b": 3})
            return await host.dispatch_tool_call(call, options_for(ADD, ledger=ledger))

    result = asyncio.run(main())
    assert result.joined_text == "5"
    assert [(r.call_id, r.status) for r in ledger.records] == [("1", "ok")]


def test_one_host_serves_many_concurrent_asyncio_callers() -> None:
    options = options_for(ADD)

    async def main() -> list[str]:
        async with open_asyncio_host() as host:

            async def one(i: int) -> str:
                call = ToolCall(id=str(i), name="add", arguments={"a": i, "b": 1})
                return (await host.dispatch_tool_call(call, options)).joined_text

            return list(await asyncio.gather(*(one(i) for i in range(20))))

    assert asyncio.run(main()) == [str(i + 1) for i in range(20)]


def test_denied_call_is_blocked_from_asyncio_too() -> None:
    options = DispatchOptions(
        registry=create_tool_registry([ADD]),
        permission=create_rule_permission_policy(deny=["tool:add:execute"]),
    )

    async def main() -> ToolResult:
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="add", arguments={"a": 1, "b": 1})
            return await host.dispatch_tool_call(call, options)

    result = asyncio.run(main())
    assert result.is_error
    assert result.details["blocked_reason"] == "permission_denied"


def test_cancelling_the_asyncio_task_cancels_the_trio_tool() -> None:
    blocker = Blocker()
    ledger = RunLedger()
    options = options_for(ToolDefinition(name="block", execute=blocker.execute), ledger=ledger)

    async def main() -> None:
        blocker.started = asyncio.Event()
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="block", arguments={})
            task = asyncio.create_task(host.dispatch_tool_call(call, options))
            await blocker.started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The trio side finished its bookkeeping before the task ended.
            assert blocker.cancelled
            assert [r.status for r in ledger.records] == ["cancelled"]

    asyncio.run(main())


def test_trio_failure_surfaces_as_the_same_exception_object() -> None:
    error = ValueError("boom")

    async def fails() -> None:
        await trio.lowlevel.checkpoint()
        raise error

    async def main() -> None:
        async with open_asyncio_host() as host:
            with pytest.raises(ValueError, match="boom") as caught:
                await host.run(fails)
            assert caught.value is error

    asyncio.run(main())


def test_run_returns_the_trio_functions_value() -> None:
    async def in_trio(x: int) -> tuple[int, str]:
        await trio.lowlevel.checkpoint()
        return x * 2, type(trio.lowlevel.current_task()).__name__

    async def main() -> tuple[int, str]:
        async with open_asyncio_host() as host:
            return await host.run(in_trio, 21)

    assert asyncio.run(main()) == (42, "Task")


def test_dispatch_on_asyncio_without_the_host_says_what_to_do() -> None:
    call = ToolCall(id="1", name="add", arguments={"a": 1, "b": 1})

    async def main() -> None:
        await dispatch_tool_call(call, options_for(ADD))

    with pytest.raises(TrioRequiredError, match=r"asyncio.*open_asyncio_host"):
        asyncio.run(main())


def test_parallel_dispatch_on_asyncio_without_the_host_says_what_to_do() -> None:
    call = ToolCall(id="1", name="add", arguments={"a": 1, "b": 1})

    async def main() -> None:
        await dispatch_tool_calls_in_order([call], options_for(ADD))

    with pytest.raises(TrioRequiredError, match="open_asyncio_host"):
        asyncio.run(main())


def test_agent_run_on_asyncio_without_the_host_says_what_to_do() -> None:
    agent = create_agent(model="m", provider=ScriptedProvider([AssistantMessage()]))

    async def main() -> None:
        await agent.session().run("hi")

    with pytest.raises(TrioRequiredError, match=r"AgentSession\.run"):
        asyncio.run(main())


def test_agent_run_through_the_host_calls_tools_in_parallel() -> None:
    provider = ScriptedProvider(
        [
            AssistantMessage(
                tool_calls=(
                    ToolCall(id="a", name="add", arguments={"a": 1, "b": 2}),
                    ToolCall(id="b", name="add", arguments={"a": 3, "b": 4}),
                )
            ),
            AssistantMessage(content=(TextContent(text="3 and 7"),)),
        ]
    )
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[ADD],
        permission=create_rule_permission_policy(allow=["tool:add:execute"]),
    )

    async def main() -> None:
        async with open_asyncio_host() as host:
            result = await host.run_agent(agent.session(), "add things")
        assert result.final.content == (TextContent(text="3 and 7"),)
        assert result.rounds == 1
        assert [r.status for r in result.records] == ["ok", "ok"]

    asyncio.run(main())


def test_parallel_dispatch_through_the_host_keeps_call_order() -> None:
    calls = [ToolCall(id=str(i), name="add", arguments={"a": i, "b": 0}) for i in range(5)]
    seen: list[int] = []

    async def main() -> list[ToolResult]:
        async with open_asyncio_host() as host:
            return await host.dispatch_tool_calls_in_order(
                calls, options_for(ADD), concurrency=3, on_result=lambda i, _c, _r: seen.append(i)
            )

    results = asyncio.run(main())
    assert [r.joined_text for r in results] == [str(i) for i in range(5)]
    assert seen == [0, 1, 2, 3, 4]


@asynccontextmanager
async def open_background(log: list[str]) -> AsyncIterator[trio.Nursery]:
    """A trio resource that owns a task, like open_mcp_tools does."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.sleep_forever)
        log.append("entered")
        try:
            yield nursery
        finally:
            log.append("exiting")
            nursery.cancel_scope.cancel()


def test_enter_keeps_a_trio_resource_open_for_the_asyncio_block() -> None:
    log: list[str] = []

    async def main() -> None:
        async with open_asyncio_host() as host:
            async with host.enter(open_background(log)) as nursery:
                assert log == ["entered"]

                async def child_count() -> int:
                    await trio.lowlevel.checkpoint()
                    return len(nursery.child_tasks)

                assert await host.run(child_count) == 1
            assert log == ["entered", "exiting"]

    asyncio.run(main())


def test_enter_raises_what_entering_raised() -> None:
    @asynccontextmanager
    async def broken() -> AsyncIterator[None]:
        await trio.lowlevel.checkpoint()
        raise OSError("cannot connect")
        yield  # pragma: no cover

    async def main() -> None:
        async with open_asyncio_host() as host:
            with pytest.raises(OSError, match="cannot connect"):
                async with host.enter(broken()):
                    pass  # pragma: no cover

    asyncio.run(main())


def test_closing_the_host_ends_calls_still_running() -> None:
    blocker = Blocker()
    options = options_for(ToolDefinition(name="block", execute=blocker.execute))

    async def main() -> None:
        blocker.started = asyncio.Event()
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="block", arguments={})
            task = asyncio.create_task(host.dispatch_tool_call(call, options))
            await blocker.started.wait()
        with pytest.raises(AsyncioHostClosedError):
            await task
        assert blocker.cancelled
        assert host.closed
        with pytest.raises(AsyncioHostClosedError):
            await host.run(trio.lowlevel.checkpoint)

    asyncio.run(main())


def test_two_hosts_in_sequence_on_one_loop() -> None:
    async def main() -> list[str]:
        texts = []
        for i in range(2):
            async with open_asyncio_host() as host:
                call = ToolCall(id="1", name="add", arguments={"a": i, "b": i})
                texts.append((await host.dispatch_tool_call(call, options_for(ADD))).joined_text)
        return texts

    assert asyncio.run(main()) == ["0", "2"]


def test_host_refuses_to_start_without_a_running_asyncio_loop() -> None:
    async def enter() -> None:
        async with open_asyncio_host():
            pass  # pragma: no cover

    coro = enter()
    with pytest.raises(TrioRequiredError, match="asyncio loop"):
        coro.send(None)
    coro.close()


async def test_host_refuses_to_start_inside_trio() -> None:
    with pytest.raises(TrioRequiredError):
        async with open_asyncio_host():
            pass  # pragma: no cover


async def test_require_trio_passes_inside_a_trio_task() -> None:
    require_trio("anything")
    result = await dispatch_tool_call(
        ToolCall(id="1", name="add", arguments={"a": 1, "b": 1}), options_for(ADD)
    )
    assert result.joined_text == "2"


class SpawnOnlyInsideTrio:
    """A nursery stand-in that refuses spawns from outside a trio task (an older trio)."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.refused = 0

    def start_soon(self, *args: object) -> None:
        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            self.refused += 1
            raise RuntimeError("must be called from async context") from None
        self.nursery.start_soon(*args)  # type: ignore[arg-type]


def test_calls_go_through_the_token_when_trio_refuses_a_spawn_from_the_loop() -> None:
    async def main() -> tuple[str, int]:
        async with open_asyncio_host() as host:
            stand_in = SpawnOnlyInsideTrio(host._nursery)
            host._nursery = stand_in  # type: ignore[assignment]
            call = ToolCall(id="1", name="add", arguments={"a": 2, "b": 2})
            result = await host.dispatch_tool_call(call, options_for(ADD))
            host._nursery = stand_in.nursery
            return result.joined_text, stand_in.refused

    assert asyncio.run(main()) == ("4", 1)
