"""The host's loop runs the host's code: an asyncio program's callbacks run on asyncio.

Under an asyncio host, every callable the application hands to Prism (a tool's
``execute``, a permission policy, middleware, a validator, a scripted provider
turn, an extension's setup) runs as a task of the host's loop, unless it is
marked ``trio_native``. Each test is real asyncio code: a loopback TCP server
opened with ``asyncio.start_server``, ``asyncio.Queue``\\ s fed by other tasks,
``asyncio.wait_for``, ``asyncio.timeout``. Cancellation is checked from both
sides. Warnings are errors in this suite: no "never retrieved", no unclosed
transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.lowlevel

from prism.core import (
    AbortController,
    AgentEvent,
    AssistantMessage,
    AsyncioHost,
    DispatchOptions,
    ErrorInfo,
    ExecutionAction,
    ExecutionDecision,
    MiddlewareRegistry,
    PermissionDecision,
    PermissionRequest,
    ScriptedProvider,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolResult,
    TrioRequiredError,
    assert_execution_allowed,
    await_callback,
    create_agent,
    create_tool_registry,
    dispatch_tool_call,
    is_trio_native,
    open_asyncio_host,
    trio_native,
)
from prism.core.ledger import RunLedger

if TYPE_CHECKING:
    from collections.abc import Iterator

    from prism.core import JsonObject, ModelRequest, ToolExecutionContext
    from prism.core.ledger import FinishedCall, ModelReport

caller_name: contextvars.ContextVar[str] = contextvars.ContextVar("caller_name", default="-")


async def open_echo_server() -> tuple[asyncio.Server, int]:
    """A loopback TCP server that answers each line with it upper-cased."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                writer.write(line.upper())
                await writer.drain()
        finally:
            writer.close()
            await writer.wait_closed()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, port


def fetch_tool(port: int, *, seen: list[str] | None = None) -> ToolDefinition:
    """An asyncio tool: a TCP round trip with asyncio's streams, under asyncio.wait_for."""

    async def fetch(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        assert asyncio.current_task() is not None  # a real asyncio task
        if seen is not None:
            seen.append(caller_name.get())
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(f"{args['text']}\n".encode())
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), timeout=30)
        finally:
            writer.close()
            await writer.wait_closed()
        return ToolResult.text(line.decode().strip())

    return ToolDefinition(name="fetch", execute=fetch, parameters={"type": "object"})


def test_an_asyncio_tool_runs_on_the_hosts_loop_with_the_callers_context() -> None:
    ledger = RunLedger()
    seen: list[str] = []

    async def main() -> list[str]:
        server, port = await open_echo_server()
        async with server, open_asyncio_host() as host:
            options = DispatchOptions(
                registry=create_tool_registry([fetch_tool(port, seen=seen)]), ledger=ledger
            )

            async def one(i: int) -> str:
                caller_name.set(f"caller-{i}")
                call = ToolCall(id=str(i), name="fetch", arguments={"text": f"hello {i}"})
                return (await host.dispatch_tool_call(call, options)).joined_text

            return await asyncio.gather(*(one(i) for i in range(5)))

    assert asyncio.run(main()) == [f"HELLO {i}" for i in range(5)]
    assert sorted(seen) == [f"caller-{i}" for i in range(5)]
    assert [r.status for r in ledger.records] == ["ok"] * 5


def test_every_gate_may_be_asyncio_code() -> None:
    """Permission, middleware on both sides, the validator: each awaits an asyncio.Queue."""
    ledger = RunLedger()
    asked: list[str] = []

    async def main() -> list[ToolResult]:
        server, port = await open_echo_server()
        questions: asyncio.Queue[tuple[str, asyncio.Future[bool]]] = asyncio.Queue()

        async def answer_questions() -> None:
            # Another asyncio task (the application's UI, say) answers each question.
            while True:
                key, reply = await questions.get()
                asked.append(key)
                reply.set_result("deny" not in key)

        async def ask(key: str) -> bool:
            reply: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            await questions.put((key, reply))
            return await asyncio.wait_for(reply, timeout=30)

        class QueuePolicy:
            async def check(self, request: PermissionRequest) -> PermissionDecision:
                allowed = await ask(f"{request.key}:{caller_name.get()}")
                return PermissionDecision(allowed=allowed, reason=None if allowed else "said no")

        middleware = MiddlewareRegistry()

        @middleware.on_tool_call
        async def tag(call: ToolCall, _ctx: ToolExecutionContext) -> ToolCall | None:
            await asyncio.sleep(0)
            if call.arguments == {"text": "rewrite me"}:
                return ToolCall(id=call.id, name=call.name, arguments={"text": "rewritten"})
            return None

        @middleware.on_tool_result
        async def suffix(
            _call: ToolCall, result: ToolResult, _ctx: ToolExecutionContext
        ) -> ToolResult:
            async with asyncio.timeout(30):
                await asyncio.sleep(0)
            return ToolResult.text(result.joined_text + "!")

        async def validate(
            _tool: ToolDefinition, arguments: JsonObject, _ctx: ToolExecutionContext
        ) -> ErrorInfo | None:
            await asyncio.sleep(0)
            if arguments.get("text") == "invalid":
                return ErrorInfo(message="text must not be 'invalid'")
            return None

        answering = asyncio.create_task(answer_questions())
        try:
            async with server, open_asyncio_host() as host:
                options = DispatchOptions(
                    registry=create_tool_registry([fetch_tool(port)]),
                    permission=QueuePolicy(),
                    middleware=middleware,
                    validator=validate,
                    ledger=ledger,
                )
                caller_name.set("app")
                results = []
                for i, text in enumerate(["hi", "rewrite me", "invalid"]):
                    call = ToolCall(id=str(i), name="fetch", arguments={"text": text})
                    results.append(await host.dispatch_tool_call(call, options))
                denied = DispatchOptions(
                    registry=options.registry, permission=DenyingQueuePolicy(ask), ledger=ledger
                )
                call = ToolCall(id="3", name="fetch", arguments={"text": "hi"})
                results.append(await host.dispatch_tool_call(call, denied))
                return results
        finally:
            answering.cancel()
            with pytest.raises(asyncio.CancelledError):
                await answering

    results = asyncio.run(main())
    assert [r.joined_text for r in results[:2]] == ["HI!", "REWRITTEN!"]
    assert results[2].is_error
    assert "text must not be 'invalid'" in results[2].joined_text
    assert results[3].is_error
    assert results[3].details["blocked_reason"] == "permission_denied"
    assert asked == ["tool:fetch:execute:app"] * 3 + ["deny:tool:fetch:execute"]
    assert [r.status for r in ledger.records] == ["ok", "ok", "blocked", "blocked"]
    assert ledger.records[2].blocked_reason == "validation_failed"


class DenyingQueuePolicy:
    """A policy asking a question its answerer refuses."""

    def __init__(self, ask: object) -> None:
        self.ask = ask

    async def check(self, request: PermissionRequest) -> PermissionDecision:
        assert callable(self.ask)
        allowed = await self.ask(f"deny:{request.key}")
        return PermissionDecision(allowed=bool(allowed), reason="said no")


def test_an_asyncio_execution_policy_and_a_scripted_asyncio_turn() -> None:
    """assert_execution_allowed and a provider turn, both asyncio code, in an agent run."""
    ledger = RunLedger()
    approvals: list[str] = []

    async def main() -> str:
        decisions: asyncio.Queue[bool] = asyncio.Queue()

        class QueueApprover:
            async def check(self, action: ExecutionAction) -> ExecutionDecision:
                approvals.append(action.operation)
                allowed = await asyncio.wait_for(decisions.get(), timeout=30)
                return ExecutionDecision(allowed=allowed, reason="asked the queue")

        approver = QueueApprover()

        async def guarded(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
            await assert_execution_allowed(
                approver, ExecutionAction(kind="custom", operation=str(args["op"]))
            )
            return ToolResult.text(f"did {args['op']}")

        async def first_turn(_request: ModelRequest) -> AssistantMessage:
            await asyncio.sleep(0)
            return AssistantMessage(
                tool_calls=[
                    ToolCall(id="a", name="guarded", arguments={"op": "one"}),
                    ToolCall(id="b", name="guarded", arguments={"op": "two"}),
                ]
            )

        provider = ScriptedProvider(
            [first_turn, AssistantMessage(content=[TextContent(text="done")])]
        )
        agent = create_agent(
            model="scripted",
            provider=provider,
            tools=[ToolDefinition(name="guarded", execute=guarded)],
            ledger=ledger,
        )
        async with open_asyncio_host() as host:
            decisions.put_nowait(True)
            decisions.put_nowait(False)
            result = await host.run_agent(agent.session(), "go")
            return "".join(
                block.text for block in result.final.content if isinstance(block, TextContent)
            )

    assert asyncio.run(main()) == "done"
    assert approvals == ["one", "two"]
    statuses = [(r.call_id, r.status) for r in ledger.records]
    assert statuses == [("a", "ok"), ("b", "error")]
    assert "asked the queue" in (ledger.records[1].result_preview or "")


def test_trio_native_callables_keep_running_on_trio() -> None:
    @trio_native
    async def on_trio(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        assert asyncio.current_task() is None  # a trio task, stepped by the guest run
        await trio.lowlevel.checkpoint()
        return ToolResult.text("trio")

    class Marked:
        async def execute(self, _args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
            await trio.lowlevel.checkpoint()
            return ToolResult.text("method")

    marked = trio_native(Marked)()

    async def main() -> list[str]:
        tools = [
            ToolDefinition(name="fn", execute=on_trio),
            ToolDefinition(name="method", execute=marked.execute),
            ToolDefinition(name="partial", execute=functools.partial(on_trio)),
        ]
        options = DispatchOptions(registry=create_tool_registry(tools))
        async with open_asyncio_host() as host:
            return [
                (
                    await host.dispatch_tool_call(ToolCall(id="1", name=n, arguments={}), options)
                ).joined_text
                for n in ("fn", "method", "partial")
            ]

    assert asyncio.run(main()) == ["trio", "method", "trio"]
    assert is_trio_native(marked.execute)
    assert not is_trio_native(fetch_tool)


def test_a_mark_is_found_wherever_it_may_be() -> None:
    # is_trio_native reads a bound method's function and object without going
    # through the method (a fast path): every place a mark can be is still read.
    async def plain(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.text("plain")

    marked_fn = trio_native(functools.partial(plain))  # the partial itself

    class OnFunction:
        @trio_native
        async def execute(self, _args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
            return ToolResult.text("f")

        async def other(self, _args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
            return ToolResult.text("o")

    @trio_native
    class OnClass:
        def method(self) -> None: ...

        def __call__(self) -> None: ...

    @trio_native
    class Items(list[int]):
        """Its builtin methods (append) are bound to a marked object."""

    class OnInstance:
        def method(self) -> None: ...

        def __call__(self) -> None: ...

    on_instance = trio_native(OnInstance())
    later = OnFunction()
    assert is_trio_native(OnFunction().execute)
    assert not is_trio_native(later.other)
    trio_native(OnFunction.other)  # marked after the bound method's class was made
    assert is_trio_native(later.other)
    assert is_trio_native(OnClass().method)
    assert is_trio_native(OnClass())
    assert is_trio_native(on_instance.method)
    assert not is_trio_native(OnInstance().method)
    assert is_trio_native(marked_fn)
    assert is_trio_native(functools.partial(functools.partial(OnClass().method)))
    assert not is_trio_native(functools.partial(plain))
    assert not is_trio_native([].append)
    assert is_trio_native(Items().append)
    assert not is_trio_native(len)
    deep: Any = OnClass()
    for depth in range(8):  # up to the bound on nested partials, then past it
        assert is_trio_native(deep), depth
        deep = functools.partial(deep)
        deep.depth = depth  # (a partial with a __dict__ is not flattened)
    assert not is_trio_native(deep)


async def test_without_a_host_callbacks_run_on_trio_as_before() -> None:
    # Under trio.run (this test), an unmarked callback is trio code and awaited in place.
    async def plain() -> str:
        await trio.lowlevel.checkpoint()
        return "trio"

    assert await await_callback(plain, plain()) == "trio"


class Blocking:
    """An asyncio tool that says when it started, then waits until cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cleaned_up = asyncio.Event()
        self.cancelled_with: list[str] = []

    async def execute(self, _args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled_with.append("cancelled")
            await asyncio.sleep(0)  # asyncio cleanup runs before the call ends
            self.cleaned_up.set()
            raise
        raise AssertionError("unreachable")


def test_cancelling_the_asyncio_caller_cancels_the_asyncio_tool_and_waits_for_it() -> None:
    tool = Blocking()
    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="block", execute=tool.execute)]),
        ledger=ledger,
    )

    async def main() -> None:
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="block", arguments={})
            task = asyncio.create_task(host.dispatch_tool_call(call, options))
            await tool.started.wait()
            task.cancel("shutdown")
            with pytest.raises(asyncio.CancelledError, match="shutdown"):
                await task
            assert tool.cleaned_up.is_set()
            assert [r.status for r in ledger.records] == ["cancelled"]

    asyncio.run(main())
    assert tool.cancelled_with == ["cancelled"]


def test_aborting_the_trio_side_cancels_the_asyncio_tool() -> None:
    tool = Blocking()
    ledger = RunLedger()
    controller = AbortController()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="block", execute=tool.execute)]),
        ledger=ledger,
        signal=controller.signal,
    )

    async def main() -> ToolResult:
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="block", arguments={})
            task = asyncio.create_task(host.dispatch_tool_call(call, options))
            await tool.started.wait()
            controller.abort("user pressed stop")
            result = await task
            assert tool.cleaned_up.is_set()
            return result

    result = asyncio.run(main())
    assert result.is_error
    assert "user pressed stop" in result.joined_text
    assert [r.status for r in ledger.records] == ["cancelled"]


def test_a_trio_timeout_around_an_asyncio_approver_cancels_it() -> None:
    """trio.move_on_after on the trio side (an approval timeout) reaches the asyncio task."""
    waiting = []

    async def main() -> str:
        never: asyncio.Queue[bool] = asyncio.Queue()

        async def approve() -> bool:
            try:
                return await never.get()
            except asyncio.CancelledError:
                waiting.append("cancelled")
                raise

        @trio_native
        async def ask_with_timeout() -> str:
            with trio.move_on_after(0.01):
                await await_callback(approve, approve())
                return "answered"
            return "timed out"

        async with open_asyncio_host() as host:
            return await host.run(ask_with_timeout)

    assert asyncio.run(main()) == "timed out"
    assert waiting == ["cancelled"]


def test_closing_the_host_cancels_asyncio_tools_still_running() -> None:
    tool = Blocking()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="block", execute=tool.execute)])
    )

    async def main() -> None:
        task = None
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="block", arguments={})
            task = asyncio.create_task(host.dispatch_tool_call(call, options))
            await tool.started.wait()
        # Leaving the block waited for the asyncio tool's cleanup.
        assert tool.cleaned_up.is_set()
        with pytest.raises(Exception, match="closed"):
            await task

    asyncio.run(main())


class Oops(BaseException):
    """A BaseException subclass of the application's own."""


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit, Oops, ValueError])
def test_what_an_asyncio_callable_raises_reaches_its_caller_and_the_loop_survives(
    exc_type: type[BaseException],
) -> None:
    error = exc_type("from the tool")

    async def raises() -> None:
        await asyncio.sleep(0)
        raise error

    @trio_native
    async def through_trio() -> None:
        await await_callback(raises, raises())

    async def main() -> str:
        async with open_asyncio_host() as host:
            with pytest.raises(exc_type) as caught:
                await host.run(through_trio)
            assert caught.value is error
            # The host and the loop go on.
            return await host.run(trio_native(echo), "still here")

    assert asyncio.run(main()) == "still here"


async def echo(value: str) -> str:
    return value


def test_an_asyncio_tool_raising_a_base_exception_is_the_callers() -> None:
    async def interrupt(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        await asyncio.sleep(0)
        raise KeyboardInterrupt

    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="ki", execute=interrupt)]),
        ledger=ledger,
    )

    async def main() -> None:
        async with open_asyncio_host() as host:
            with pytest.raises(KeyboardInterrupt):
                await host.dispatch_tool_call(ToolCall(id="1", name="ki", arguments={}), options)

    asyncio.run(main())
    assert [r.status for r in ledger.records] == ["cancelled"]


def test_an_asyncio_task_cancelled_by_someone_else_crosses_as_its_cancellation() -> None:
    async def cancels_itself(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        task = asyncio.current_task()
        assert task is not None
        task.cancel("gave up")
        await asyncio.sleep(0)
        raise AssertionError("unreachable")

    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="quit", execute=cancels_itself)]),
        ledger=ledger,
    )

    async def main() -> None:
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="quit", arguments={})
            with pytest.raises(asyncio.CancelledError, match="gave up"):
                await host.dispatch_tool_call(call, options)
            # Not this task's cancellation: it goes on.
            assert (await host.run(trio_native(echo), "ok")) == "ok"

    asyncio.run(main())
    assert [r.status for r in ledger.records] == ["cancelled"]


def test_a_tool_that_swallows_its_cancellation_still_ends_cancelled() -> None:
    started = asyncio.Event()

    async def stubborn(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return ToolResult.text("finished anyway")
        raise AssertionError("unreachable")

    controller = AbortController()
    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="stubborn", execute=stubborn)]),
        ledger=ledger,
        signal=controller.signal,
    )

    async def main() -> ToolResult:
        async with open_asyncio_host() as host:
            task = asyncio.create_task(
                host.dispatch_tool_call(ToolCall(id="1", name="stubborn", arguments={}), options)
            )
            await started.wait()
            controller.abort()
            return await task

    result = asyncio.run(main())
    assert result.is_error
    assert [r.status for r in ledger.records] == ["cancelled"]


def test_a_call_that_fails_while_being_cancelled_reports_the_failure() -> None:
    started = asyncio.Event()

    async def fails_on_cancel(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ValueError("cleanup failed") from None
        raise AssertionError("unreachable")

    controller = AbortController()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="f", execute=fails_on_cancel)]),
        signal=controller.signal,
    )

    async def main() -> ToolResult:
        async with open_asyncio_host() as host:
            task = asyncio.create_task(
                host.dispatch_tool_call(ToolCall(id="1", name="f", arguments={}), options)
            )
            await started.wait()
            controller.abort()
            return await task

    result = asyncio.run(main())
    assert result.is_error
    assert "cleanup failed" in result.joined_text


def test_a_callback_returning_an_asyncio_future() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()

        def returns_a_future(_args: JsonObject, _ctx: ToolExecutionContext) -> object:
            # Not a coroutine: an asyncio future the application settles later.
            future: asyncio.Future[ToolResult] = loop.create_future()
            loop.call_soon(future.set_result, ToolResult.text("from a future"))
            return future

        options = DispatchOptions(
            registry=create_tool_registry(
                [ToolDefinition(name="future", execute=returns_a_future)]  # type: ignore[arg-type]
            )
        )
        async with open_asyncio_host() as host:
            result = await host.dispatch_tool_call(
                ToolCall(id="1", name="future", arguments={}), options
            )
            assert result.joined_text == "from a future"
            return len(asyncio.all_tasks())

    # Only main is left: every task Prism made for a callback ended.
    assert asyncio.run(main()) == 1


def test_asyncio_code_calling_prism_with_a_trio_policy_goes_back_to_trio() -> None:
    """An asyncio tool asks Prism's execution gate with a trio-native (Prism) policy."""

    @trio_native
    class TrioPolicy:
        async def check(self, action: ExecutionAction) -> ExecutionDecision:
            assert asyncio.current_task() is None  # in trio, through the host
            await trio.lowlevel.checkpoint()
            return ExecutionDecision(allowed=action.operation == "ok", reason="trio said so")

    async def asks(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        assert asyncio.current_task() is not None
        await assert_execution_allowed(
            TrioPolicy(), ExecutionAction(kind="custom", operation=str(args["op"]))
        )
        return ToolResult.text("allowed")

    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="asks", execute=asks)]), ledger=ledger
    )

    async def main() -> list[ToolResult]:
        async with open_asyncio_host() as host:
            return [
                await host.dispatch_tool_call(
                    ToolCall(id=op, name="asks", arguments={"op": op}), options
                )
                for op in ("ok", "no")
            ]

    ok, denied = asyncio.run(main())
    assert ok.joined_text == "allowed"
    assert denied.is_error
    assert "trio said so" in denied.joined_text
    assert [r.status for r in ledger.records] == ["ok", "error"]


def test_trio_code_awaited_on_a_loop_outside_any_host_call_is_refused_clearly() -> None:
    @trio_native
    async def on_trio() -> None:
        await trio.lowlevel.checkpoint()

    async def main() -> None:
        async with open_asyncio_host():
            # Plain asyncio code of the application, not a callback of a host call.
            with pytest.raises(TrioRequiredError, match="trio_native"):
                await await_callback(on_trio, on_trio())
        # No host, no trio: an unmarked awaitable is simply awaited.
        assert await await_callback(echo, echo("plain")) == "plain"

    asyncio.run(main())


def test_an_async_event_sink_runs_on_the_loop_in_order_and_the_host_waits_for_it() -> None:
    seen: list[str] = []

    async def sink(event: AgentEvent) -> None:
        assert asyncio.current_task() is not None
        await asyncio.sleep(0)
        seen.append(f"{event.type}:{caller_name.get()}")

    async def failing_sink(event: AgentEvent) -> None:
        raise ValueError("a broken sink")

    async def main() -> None:
        caller_name.set("app")
        tool = ToolDefinition(name="echo", execute=trio_native(echo_tool))
        async with open_asyncio_host() as host:
            for events in (sink, failing_sink):
                options = DispatchOptions(registry=create_tool_registry([tool]), on_event=events)
                result = await host.dispatch_tool_call(
                    ToolCall(id="1", name="echo", arguments={}), options
                )
                assert result.joined_text == "echoed"
        # Leaving the host's block waited for the sink's tasks.

    asyncio.run(main())
    assert seen == ["tool_execution_started:app", "tool_execution_finished:app"]


async def echo_tool(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("echoed")


async def test_an_async_event_sink_outside_a_host_is_closed_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def sink(event: AgentEvent) -> None:
        raise AssertionError("never runs: nothing outside a host can await it")

    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="echo", execute=echo_tool)]),
        on_event=sink,
    )
    result = await dispatch_tool_call(ToolCall(id="1", name="echo", arguments={}), options)
    assert result.joined_text == "echoed"
    assert "event sinks are synchronous" in caplog.text


def test_a_callback_that_ends_at_once_and_one_that_takes_many_turns() -> None:
    """Both sides of the host's short wait: found done while spinning, or parked and woken."""

    async def quick(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.text("quick")

    async def slow(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        for _ in range(50):
            await asyncio.sleep(0)
        return ToolResult.text("slow")

    async def raises_at_once(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        raise KeyError("at once")

    options = DispatchOptions(
        registry=create_tool_registry(
            [
                ToolDefinition(name="quick", execute=quick),
                ToolDefinition(name="slow", execute=slow),
                ToolDefinition(name="raises", execute=raises_at_once),
            ]
        )
    )

    async def main() -> list[str]:
        async with open_asyncio_host() as host:
            return [
                (
                    await host.dispatch_tool_call(ToolCall(id="1", name=n, arguments={}), options)
                ).joined_text
                for n in ("quick", "slow", "raises")
            ]

    assert asyncio.run(main()) == ["quick", "slow", "tool raises failed: KeyError: 'at once'"]


def test_an_abort_landing_after_the_asyncio_tool_finished_keeps_its_result() -> None:
    """The race: the abort comes in the loop step after the tool's task ended, before trio saw it.

    The tool finished, so its result stands (as a trio call that returns before
    its next checkpoint), and the ledger says ``ok``: nothing ran that was not recorded.
    """
    controller = AbortController()
    ledger = RunLedger()

    async def finishes_then_aborts(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        asyncio.get_running_loop().call_soon(controller.abort, "too late")
        return ToolResult.text("done")

    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="race", execute=finishes_then_aborts)]),
        ledger=ledger,
        signal=controller.signal,
    )

    async def main() -> ToolResult:
        async with open_asyncio_host() as host:
            return await host.dispatch_tool_call(
                ToolCall(id="1", name="race", arguments={}), options
            )

    result = asyncio.run(main())
    assert controller.signal.aborted
    assert result.joined_text == "done"
    assert [r.status for r in ledger.records] == ["ok"]


def test_a_keyboard_interrupt_in_an_async_event_sink_is_logged_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def interrupting(event: AgentEvent) -> None:
        raise KeyboardInterrupt

    async def main() -> str:
        options = DispatchOptions(
            registry=create_tool_registry(
                [ToolDefinition(name="echo", execute=trio_native(echo_tool))]
            ),
            on_event=interrupting,
        )
        async with open_asyncio_host() as host:
            result = await host.dispatch_tool_call(
                ToolCall(id="1", name="echo", arguments={}), options
            )
        return result.joined_text

    assert asyncio.run(main()) == "echoed"
    assert "an asyncio event sink raised" in caplog.text


class TaskProbe:
    """An asyncio tool that notes the task it runs in and sets a context variable."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[object] | None] = []

    async def execute(self, _args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        self.tasks.append(asyncio.current_task())
        caller_name.set("changed by the tool")
        await asyncio.sleep(0)
        return ToolResult.text("probed")


class TrioAllowAll:
    """A synchronous permission policy marked as trio code: its call takes the trio side."""

    @trio_native
    def check(self, _request: PermissionRequest) -> PermissionDecision:
        trio.lowlevel.current_task()  # raises outside a trio task
        return PermissionDecision(allowed=True)


def test_a_dispatch_with_no_trio_code_runs_the_tool_in_the_callers_task() -> None:
    # No crossing: the gates and the asyncio tool run right in the awaiting task,
    # in a copy of its context; trio code anywhere in the call (a signal's scope,
    # a trio-native gate) sends the whole dispatch to the trio side instead.
    probe = TaskProbe()
    ledger = RunLedger()
    events: list[AgentEvent] = []
    registry = create_tool_registry([ToolDefinition(name="probe", execute=probe.execute)])
    plain = DispatchOptions(registry=registry, ledger=ledger, on_event=events.append)
    with_signal = DispatchOptions(registry=registry, signal=AbortController().signal)
    trio_gate = DispatchOptions(registry=registry, permission=TrioAllowAll())

    async def main() -> list[bool]:
        async with open_asyncio_host() as host:
            caller_name.set("caller")
            here = asyncio.current_task()
            same = []
            for options in (plain, with_signal, trio_gate):
                call = ToolCall(id="1", name="probe", arguments={})
                assert (await host.dispatch_tool_call(call, options)).joined_text == "probed"
                same.append(probe.tasks[-1] is here)
                assert caller_name.get() == "caller"  # the tool changed its copy only
            return same

    assert asyncio.run(main()) == [True, False, False]
    assert [r.status for r in ledger.records] == ["ok"]
    assert [e.type for e in events] == ["tool_execution_started", "tool_execution_finished"]


class SpanTracer:
    """A tracer whose spans are names on a stack (what is current, and when)."""

    def __init__(self) -> None:
        self.open: list[str] = []
        self.seen: list[tuple[str, list[str]]] = []

    @contextlib.contextmanager
    def _span(self, name: str) -> Iterator[None]:
        self.open.append(name)
        try:
            yield None
        finally:
            self.open.pop()

    def trace_run(self, name: str) -> contextlib.AbstractContextManager[None]:
        return self._span(name)

    def trace_call(self, call: ToolCall) -> contextlib.AbstractContextManager[None]:
        return self._span(f"call {call.id}")

    def trace_model(self, model: str) -> contextlib.AbstractContextManager[ModelReport]:
        raise AssertionError("no model in a dispatch")

    def record_call(self, call: FinishedCall) -> None:
        self.seen.append(("record", list(self.open)))


def test_a_traced_dispatch_in_the_callers_task_is_in_its_span_to_its_record() -> None:
    tracer = SpanTracer()

    async def traced(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        tracer.seen.append(("execute", list(tracer.open)))
        await asyncio.sleep(0)
        return ToolResult.text("traced")

    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="t", execute=traced)]),
        tracer=tracer,
        ledger=tracer,
    )

    async def main() -> str:
        async with open_asyncio_host() as host:
            call = ToolCall(id="7", name="t", arguments={})
            return (await host.dispatch_tool_call(call, options)).joined_text

    assert asyncio.run(main()) == "traced"
    assert tracer.seen == [("execute", ["call 7"]), ("record", ["call 7"])]
    assert tracer.open == []


def test_trio_code_reached_from_a_call_in_the_callers_task_runs_on_trio() -> None:
    # Asyncio middleware rewrites the call to a trio-native tool: the dispatch
    # began in the caller's task (the named tool was asyncio code), and the
    # trio tool still runs in a trio task of the host.
    @trio_native
    async def on_trio(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        trio.lowlevel.current_task()
        await trio.lowlevel.checkpoint()
        return ToolResult.text("ran on trio")

    async def asyncio_tool(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        raise AssertionError("rewritten away")

    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    def reroute(call: ToolCall, _ctx: ToolExecutionContext) -> ToolCall:
        return ToolCall(id=call.id, name="trio", arguments={})

    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry(
            [
                ToolDefinition(name="asyncio", execute=asyncio_tool),
                ToolDefinition(name="trio", execute=on_trio),
            ]
        ),
        middleware=middleware,
        ledger=ledger,
    )

    async def main() -> str:
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="asyncio", arguments={})
            return (await host.dispatch_tool_call(call, options)).joined_text

    assert asyncio.run(main()) == "ran on trio"
    assert [(r.tool_name, r.status) for r in ledger.records] == [("trio", "ok")]


def test_closing_the_host_under_calls_in_their_callers_tasks() -> None:
    # One call ignores the host's cancellation and ends with its result (its task
    # is left with no pending cancellation); one whose task is also cancelled by
    # its own side raises that task's CancelledError, not the host's closing.
    started = asyncio.Event()

    async def stubborn(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return ToolResult.text("finished anyway")
        raise AssertionError("unreachable")

    blocking = Blocking()
    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry(
            [
                ToolDefinition(name="stubborn", execute=stubborn),
                ToolDefinition(name="block", execute=blocking.execute),
            ]
        ),
        ledger=ledger,
    )

    async def stubborn_caller(host: AsyncioHost) -> tuple[str, int]:
        call = ToolCall(id="s", name="stubborn", arguments={})
        result = await host.dispatch_tool_call(call, options)
        task = asyncio.current_task()
        assert task is not None
        return result.joined_text, task.cancelling()

    async def main() -> None:
        async with open_asyncio_host() as host:
            first = asyncio.create_task(stubborn_caller(host))
            second = asyncio.create_task(
                host.dispatch_tool_call(ToolCall(id="b", name="block", arguments={}), options)
            )
            await started.wait()
            await blocking.started.wait()
            second.cancel("its own side")
        assert await first == ("finished anyway", 0)
        with pytest.raises(asyncio.CancelledError, match="its own side"):
            await second

    asyncio.run(main())
    assert sorted((r.call_id, r.status) for r in ledger.records) == [
        ("b", "cancelled"),
        ("s", "ok"),
    ]


@trio_native
def trio_sink(_event: AgentEvent) -> None:
    trio.lowlevel.current_task()  # raises outside a trio task


@trio_native
def trio_validator(
    _tool: ToolDefinition, _arguments: JsonObject, _ctx: ToolExecutionContext
) -> None:
    trio.lowlevel.current_task()


@trio_native
def trio_hook(_call: ToolCall, _ctx: ToolExecutionContext) -> None:
    trio.lowlevel.current_task()


@pytest.mark.parametrize("gate", ["validator", "on_event", "middleware", "permission"])
def test_a_trio_native_gate_sends_the_dispatch_to_the_trio_side(gate: str) -> None:
    probe = TaskProbe()
    middleware = MiddlewareRegistry()
    middleware.on_tool_call(trio_hook)
    extra: dict[str, object] = {
        "validator": trio_validator,
        "on_event": trio_sink,
        "middleware": middleware,
        "permission": TrioAllowAll(),  # marked on its method's function
    }
    extra = {gate: extra[gate]}
    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="probe", execute=probe.execute)]),
        ledger=ledger,
        **extra,  # type: ignore[arg-type]
    )

    async def main() -> bool:
        async with open_asyncio_host() as host:
            call = ToolCall(id="1", name="probe", arguments={})
            assert (await host.dispatch_tool_call(call, options)).joined_text == "probed"
            with pytest.raises(TypeError, match="takes a ToolCall"):
                await host.dispatch_tool_call("probe", options)  # type: ignore[arg-type]
            return probe.tasks[-1] is asyncio.current_task()

    assert asyncio.run(main()) is False  # the tool ran as a task of its own, from trio
    assert [r.status for r in ledger.records] == ["ok"]
