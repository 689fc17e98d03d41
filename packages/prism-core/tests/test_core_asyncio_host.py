"""The asyncio host: Prism from asyncio through trio guest mode.

The asyncio tests are plain functions that call ``asyncio.run`` (the suite runs
every ``async def`` test under trio); the trio tests check the host refuses to
be used where it makes no sense.
"""

from __future__ import annotations

import asyncio
import contextvars
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio
import trio.lowlevel

from prism.core import (
    AssistantMessage,
    AsyncioHost,
    AsyncioHostClosedError,
    DispatchOptions,
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
    trio_native,
)
from prism.core.ledger import RunLedger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from prism.core import JsonObject, ToolExecutionContext


@trio_native  # trio code handed to an asyncio host is marked
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


@trio_native
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


def test_calls_started_together_run_concurrently_in_trio() -> None:
    # Each call waits until every call has arrived: served one after another,
    # they would wait forever. Two bursts: the second reuses parked workers;
    # the burst is larger than the host keeps parked.
    count = 80

    async def main() -> list[int]:
        async with open_asyncio_host() as host:
            results: list[int] = []
            for _ in range(2):
                arrived = 0
                everyone = await host.run(make_event)

                async def meet(i: int, everyone: trio.Event = everyone) -> int:
                    nonlocal arrived
                    arrived += 1
                    if arrived == count:
                        everyone.set()
                    await everyone.wait()
                    return i

                results += await asyncio.gather(*(host.run(meet, i) for i in range(count)))
            return results

    assert asyncio.run(main()) == list(range(count)) * 2


async def make_event() -> trio.Event:
    return trio.Event()


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="unset")


def test_each_call_sees_its_own_copy_of_the_callers_context_variables() -> None:
    async def read_then_set() -> str:
        seen = REQUEST_ID.get()
        await trio.lowlevel.checkpoint()
        REQUEST_ID.set("set in trio")
        await trio.lowlevel.checkpoint()
        return f"{seen} -> {REQUEST_ID.get()}"

    async def main() -> list[tuple[str, str, str]]:
        async with open_asyncio_host() as host:

            async def caller(name: str) -> tuple[str, str, str]:
                REQUEST_ID.set(name)
                first = await host.run(read_then_set)
                second = await host.run(read_then_set)
                return first, second, REQUEST_ID.get()

            return list(await asyncio.gather(caller("a"), caller("b")))

    assert asyncio.run(main()) == [
        ("a -> set in trio", "a -> set in trio", "a"),
        ("b -> set in trio", "b -> set in trio", "b"),
    ]


def test_a_call_cancelled_before_trio_takes_it_never_starts() -> None:
    ran: list[str] = []

    async def record() -> None:
        ran.append("ran")

    async def main() -> None:
        async with open_asyncio_host() as host:
            # What asyncio does when it cancels a task awaiting the call, done
            # here within one step so that no trio tick can take the call first.
            waiting = host.run(record)
            future = waiting.send(None)
            assert isinstance(future, asyncio.Future)
            future.cancel()
            with pytest.raises(asyncio.CancelledError):
                waiting.send(None)
            for _ in range(3):
                await host.run(trio.lowlevel.checkpoint)

    asyncio.run(main())
    assert ran == []


def test_a_caller_cancelled_after_its_call_finished_still_raises_cancelled() -> None:
    async def main() -> None:
        async with open_asyncio_host() as host:
            waiting = host.run(make_event)
            future = waiting.send(None)
            assert isinstance(future, asyncio.Future)
            while not future.done():
                await host.run(trio.lowlevel.checkpoint)
            # asyncio cancels a task whose awaited future is already done by
            # throwing CancelledError in: the result is dropped.
            with pytest.raises(asyncio.CancelledError):
                waiting.throw(asyncio.CancelledError())

    asyncio.run(main())


def test_awaiting_asyncio_inside_the_host_fails_with_trios_error() -> None:
    async def main() -> None:
        async with open_asyncio_host() as host:
            loop = asyncio.get_running_loop()

            async def awaits_asyncio() -> None:
                await loop.create_future()

            with pytest.raises(TypeError, match="other framework like asyncio"):
                await host.run(awaits_asyncio)

    asyncio.run(main())


def test_host_methods_refuse_another_loop() -> None:
    async def main() -> None:
        async with open_asyncio_host() as host:
            elsewhere = host.run(trio.lowlevel.checkpoint)
            with pytest.raises(TrioRequiredError, match="loop that opened the host"):
                await asyncio.to_thread(asyncio.run, elsewhere)
            no_loop = host.run(trio.lowlevel.checkpoint)
            with pytest.raises(TrioRequiredError, match="loop that opened the host"):
                await asyncio.to_thread(no_loop.send, None)

    asyncio.run(main())


def test_no_second_host_inside_the_first() -> None:
    async def nested() -> None:
        async with open_asyncio_host():
            pass  # pragma: no cover

    async def main() -> None:
        async with open_asyncio_host() as host:
            with pytest.raises(TrioRequiredError, match="already active"):
                await host.run(nested)

    asyncio.run(main())


class Stubborn:
    """A trio function that, cancelled, finishes anyway (swallowing it) or fails."""

    def __init__(self, failure: Exception | None) -> None:
        self.failure = failure
        self.started: asyncio.Event | None = None

    async def execute(self) -> str:
        assert self.started is not None
        self.started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await trio.lowlevel.checkpoint()
            if self.failure is not None:
                raise self.failure from None
        return "finished anyway"


@pytest.mark.parametrize("failure", [None, OSError("cleanup failed")])
def test_a_cancelled_call_that_finishes_anyway_or_fails_in_cleanup(
    failure: Exception | None,
) -> None:
    stubborn = Stubborn(failure)

    async def main() -> None:
        stubborn.started = asyncio.Event()
        async with open_asyncio_host() as host:
            task = asyncio.create_task(host.run(stubborn.execute))
            await stubborn.started.wait()
            task.cancel()
            expected = asyncio.CancelledError if failure is None else OSError
            with pytest.raises(expected) as caught:
                await task
            if failure is not None:
                assert caught.value is failure
            # The host goes on serving calls.
            assert not (await host.run(make_event)).is_set()

    asyncio.run(main())


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
            # The host goes on serving calls.
            again = ToolCall(id="2", name="add", arguments={"a": 1, "b": 1})
            assert (await host.dispatch_tool_call(again, options_for(ADD))).joined_text == "2"

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


def test_cancelling_the_task_leaving_the_host_waits_for_trio_then_raises() -> None:
    log: list[str] = []

    async def main() -> None:
        cleanup_started = asyncio.Event()
        gate: list[trio.Event] = []

        async def slow_cleanup() -> None:
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    cleanup_started.set()
                    await gate[0].wait()
                log.append("trio cleaned up")

        calls: list[asyncio.Task[None]] = []

        async def use_host() -> None:
            async with open_asyncio_host() as host:
                gate.append(await host.run(make_event))
                calls.append(asyncio.create_task(host.run(slow_cleanup)))
                await asyncio.sleep(0)

        user = asyncio.create_task(use_host())
        await cleanup_started.wait()
        # The block is exiting and trio's cleanup is still running: cancel it.
        user.cancel()
        await asyncio.sleep(0)
        assert not user.done()
        gate[0].set()
        with pytest.raises(asyncio.CancelledError):
            await user
        with pytest.raises(AsyncioHostClosedError):
            await calls[0]

    asyncio.run(main())
    assert log == ["trio cleaned up"]


def test_calls_queued_together_that_never_block_share_one_worker() -> None:
    # One worker takes every call that was queued in the same loop iteration
    # and returns without blocking; no other worker is woken or started for
    # them (that is what makes concurrent callers cheap).
    async def nothing(i: int) -> int:
        return i

    async def worker_count(host: AsyncioHost) -> int:
        return len(host._nursery.child_tasks)

    async def main() -> tuple[list[int], list[int]]:
        async with open_asyncio_host() as host:
            counts = [await host.run(worker_count, host)]
            results: list[int] = []
            for _ in range(3):
                results += await asyncio.gather(*(host.run(nothing, i) for i in range(8)))
                counts.append(await host.run(worker_count, host))
            return results, counts

    results, counts = asyncio.run(main())
    assert results == list(range(8)) * 3
    assert counts == [1, 1, 1, 1]


@pytest.mark.parametrize("blocks_on", ["event", "socket"])
def test_a_call_that_blocks_never_holds_up_the_calls_queued_behind_it(blocks_on: str) -> None:
    # Three calls queued in one loop iteration, so that one worker could take
    # them one after another: a watchdog that checkpoints, a call that blocks
    # (on a trio event, or reading a trio socket) until the third call
    # releases it, and the third call. Were calls queued behind a blocked call
    # left waiting for its worker, the watchdog would release the second call
    # after its 50 trio ticks, and the second call's answer would say so.
    async def main() -> list[str]:
        async with open_asyncio_host() as host:
            released = await host.run(make_event)
            sender, receiver = await host.run(socket_pair)
            by: list[str] = []

            async def release(who: str) -> None:
                if by:
                    return
                by.append(who)
                released.set()
                await sender.send(b"x")

            async def watchdog() -> str:
                for _ in range(50):
                    await trio.lowlevel.checkpoint()
                await release("the watchdog")
                return "watchdog done"

            async def blocked() -> str:
                if blocks_on == "event":
                    await released.wait()
                else:
                    assert await receiver.recv(1) == b"x"
                return f"released by {by[0]}"

            async def third() -> str:
                await release("the third call")
                return "third done"

            try:
                return list(
                    await asyncio.gather(host.run(watchdog), host.run(blocked), host.run(third))
                )
            finally:
                await host.run(close_sockets, sender, receiver)

    assert asyncio.run(main()) == ["watchdog done", "released by the third call", "third done"]


async def socket_pair() -> tuple[trio.socket.SocketType, trio.socket.SocketType]:
    return trio.socket.socketpair()


async def close_sockets(*sockets: trio.socket.SocketType) -> None:
    for sock in sockets:
        sock.close()


def test_a_call_cancelled_while_queued_among_others_never_starts() -> None:
    ran: list[str] = []

    async def record(name: str) -> str:
        ran.append(name)
        return name

    async def main() -> list[object]:
        async with open_asyncio_host() as host:
            # Three calls queued in one step, the middle one's task cancelled
            # before any trio tick: one worker would take all three in turn.
            first, middle, last = (host.run(record, n) for n in ("first", "middle", "last"))
            futures = [first.send(None), middle.send(None), last.send(None)]
            assert all(isinstance(f, asyncio.Future) for f in futures)
            futures[1].cancel()
            with pytest.raises(asyncio.CancelledError):
                middle.send(None)
            await asyncio.wait([futures[0], futures[2]])
            values: list[object] = []
            for waiting in (first, last):
                with pytest.raises(StopIteration) as stop:
                    waiting.send(None)
                values.append(stop.value.value)
            return values

    assert asyncio.run(main()) == ["first", "last"]
    assert ran == ["first", "last"]


def test_cancelling_one_call_of_those_served_together_leaves_the_others() -> None:
    blocker = Blocker()
    log: list[str] = []

    async def quick() -> str:
        return "quick"

    async def main() -> None:
        blocker.started = asyncio.Event()
        third_started = asyncio.Event()
        async with open_asyncio_host() as host:
            go_on = await host.run(make_event)

            async def waits() -> str:
                third_started.set()
                await go_on.wait()
                return "third"

            async def set_go_on() -> None:
                go_on.set()

            # Queued in one loop iteration: one worker takes the first call,
            # then the second, which blocks; the third gets another worker.
            first = asyncio.create_task(host.run(quick))
            second = asyncio.create_task(host.run(blocker.execute, {}, None))
            third = asyncio.create_task(host.run(waits))
            await blocker.started.wait()
            await third_started.wait()
            second.cancel()
            with pytest.raises(asyncio.CancelledError):
                await second
            assert blocker.cancelled
            assert not third.done()
            await host.run(set_go_on)
            log.extend([await first, await third, await host.run(quick)])

    asyncio.run(main())
    assert log == ["quick", "third", "quick"]


def test_closing_the_host_with_calls_running_and_queued_ends_every_one() -> None:
    blocker = Blocker()
    started: list[int] = []
    cancelled: list[int] = []

    async def sleeper(i: int) -> None:
        started.append(i)
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(i)
            raise

    async def main() -> None:
        blocker.started = asyncio.Event()
        async with open_asyncio_host() as host:
            running = asyncio.create_task(host.run(blocker.execute, {}, None))
            await blocker.started.wait()
            # Queued in the step that leaves the block: no trio tick took them yet.
            queued = [host.run(sleeper, i) for i in range(5)]
            futures = [waiting.send(None) for waiting in queued]
        with pytest.raises(AsyncioHostClosedError):
            await running
        assert blocker.cancelled
        for waiting, future in zip(queued, futures, strict=True):
            assert isinstance(future, asyncio.Future)
            assert isinstance(future.exception(), AsyncioHostClosedError)
            with pytest.raises(AsyncioHostClosedError):
                waiting.send(None)

    asyncio.run(main())
    # Whatever started was cancelled: nothing outlives the host.
    assert sorted(started) == sorted(cancelled)


def test_calls_that_raise_among_calls_served_together_raise_to_their_own_callers() -> None:
    errors = [ValueError("first"), KeyError("third")]

    async def maybe_fails(i: int) -> int:
        if i % 2 == 0:
            raise errors[i // 2]
        return i

    async def main() -> list[object]:
        async with open_asyncio_host() as host:
            results = await asyncio.gather(
                *(host.run(maybe_fails, i) for i in range(4)), return_exceptions=True
            )
            results.append(await host.run(maybe_fails, 5))
            return list(results)

    results = asyncio.run(main())
    assert results[0] is errors[0]
    assert results[2] is errors[1]
    assert [results[1], results[3], results[4]] == [1, 3, 5]


def test_many_callers_at_once_some_blocking_some_not() -> None:
    # 200 callers queued together: the 100 odd ones block until all 100 have
    # arrived (so each needs a worker of its own), the even ones return at
    # once; each caller reads back its own context variable.
    count = 200
    blocking = count // 2

    async def main() -> list[str]:
        async with open_asyncio_host() as host:
            everyone = await host.run(make_event)
            arrived = 0

            async def call(i: int) -> str:
                nonlocal arrived
                if i % 2:
                    arrived += 1
                    if arrived == blocking:
                        everyone.set()
                    await everyone.wait()
                return f"{i}:{REQUEST_ID.get()}"

            async def caller(i: int) -> str:
                REQUEST_ID.set(f"caller {i}")
                return await host.run(call, i)

            return list(await asyncio.gather(*(caller(i) for i in range(count))))

    assert asyncio.run(main()) == [f"{i}:caller {i}" for i in range(count)]


def test_cancelling_while_leaving_an_entered_block_cancels_the_exit_and_waits_for_it() -> None:
    log: list[str] = []
    exiting = asyncio.Event()

    @asynccontextmanager
    async def slow_exit() -> AsyncIterator[None]:
        yield
        exiting.set()
        try:
            await trio.sleep_forever()
        finally:
            log.append("exit cancelled")

    async def main() -> None:
        async with open_asyncio_host() as host:

            async def use() -> None:
                async with host.enter(slow_exit()):
                    pass

            task = asyncio.create_task(use())
            await exiting.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The exit ended (cancelled) before the task did.
            assert log == ["exit cancelled"]

    asyncio.run(main())
