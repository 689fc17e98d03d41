"""The asyncio host under misuse and hostile calls: each call's failure stays its own.

Like ``test_core_asyncio_host.py``, the tests are plain functions that call
``asyncio.run``. Waits are bounded by events and loop iterations;
``asyncio.wait_for`` appears only as a guard that turns a hang into a failure.
"""

from __future__ import annotations

# The asyncio host's own tests: asyncio is their subject (as in test_core_asyncio_host.py).
import asyncio
import contextvars
import gc
import inspect
import weakref
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import trio
import trio.lowlevel

from prism.core import (
    AsyncioHost,
    AsyncioHostClosedError,
    DispatchOptions,
    ToolCall,
    TrioRequiredError,
    create_tool_registry,
    open_asyncio_host,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Generator

T = TypeVar("T")

# A hang guard only: a regression that hangs fails instead of stalling the suite.
GUARD = 30


async def settled(task: asyncio.Task[T]) -> asyncio.Task[T]:
    """The task once done; a hang guard that keeps its CancelledError as raised."""
    done, _ = await asyncio.wait((task,), timeout=GUARD)
    assert done, "the task hung"
    return task


async def make_event() -> trio.Event:
    return trio.Event()


async def nothing() -> str:
    return "served"


class Custom(BaseException):
    """A BaseException of the application's own."""


@pytest.mark.parametrize(
    "error",
    [SystemExit(3), KeyboardInterrupt(), GeneratorExit(), Custom("mine")],
    ids=["SystemExit", "KeyboardInterrupt", "GeneratorExit", "custom"],
)
def test_a_base_exception_goes_to_its_caller_alone_and_the_host_serves_on(
    error: BaseException,
) -> None:
    async def raises() -> None:
        await trio.lowlevel.checkpoint()
        raise error

    async def main() -> None:
        async with open_asyncio_host() as host:
            release = await host.run(make_event)
            started = asyncio.Event()

            async def bystander() -> str:
                started.set()
                await release.wait()
                return "bystander done"

            other = asyncio.create_task(host.run(bystander))
            await started.wait()
            with pytest.raises(type(error)) as caught:
                await host.run(raises)
            assert caught.value is error
            assert not host.closed
            await host.run(trio_set, release)
            assert await asyncio.wait_for(other, GUARD) == "bystander done"
            assert await host.run(nothing) == "served"
        assert host.closed

    asyncio.run(main())


async def trio_set(event: trio.Event) -> None:
    event.set()


async def stray_cancelled() -> trio.Cancelled:
    """A trio.Cancelled caught in a scope of its own, so no cancellation is pending."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            return exc
    raise AssertionError("the checkpoint was not cancelled")  # pragma: no cover


@pytest.mark.parametrize("grouped", [False, True], ids=["bare", "nested group"])
def test_a_cancelled_raised_by_a_call_nobody_cancelled_is_that_calls_failure(
    grouped: bool,
) -> None:
    # Re-raising a Cancelled from another scope is the call's own doing: it
    # goes to its caller like any exception, and the host serves on.
    async def raises() -> None:
        cancelled = await stray_cancelled()
        if grouped:
            raise BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [cancelled])])
        raise cancelled

    async def main() -> None:
        async with open_asyncio_host() as host:
            release = await host.run(make_event)
            started = asyncio.Event()

            async def bystander() -> str:
                started.set()
                await release.wait()
                return "bystander done"

            other = asyncio.create_task(host.run(bystander))
            await started.wait()
            expected = BaseExceptionGroup if grouped else trio.Cancelled
            with pytest.raises(expected) as caught:
                await host.run(raises)
            if isinstance(caught.value, BaseExceptionGroup):
                assert caught.value.subgroup(trio.Cancelled) is not None
            assert not host.closed
            await host.run(trio_set, release)
            assert await asyncio.wait_for(other, GUARD) == "bystander done"
            assert await host.run(nothing) == "served"
        assert host.closed

    asyncio.run(main())


class FailsInCleanup:
    """A trio function whose nursery child fails while being cancelled."""

    def __init__(self) -> None:
        self.error = ValueError("cleanup failed")
        self.started: asyncio.Event | None = None

    async def child(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise self.error

    async def execute(self) -> None:
        assert self.started is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.child)
            await trio.lowlevel.checkpoint()
            self.started.set()
            await trio.sleep_forever()


def test_a_cancelled_call_whose_nursery_child_fails_raises_that_failure_to_its_caller() -> None:
    # The call ends with [ValueError, Cancelled]: the caller gets the ValueError
    # (in its group), trio's Cancelled stays in trio, the host serves on.
    fails = FailsInCleanup()

    async def main() -> None:
        fails.started = asyncio.Event()
        async with open_asyncio_host() as host:
            release = await host.run(make_event)

            async def bystander() -> str:
                await release.wait()
                return "bystander done"

            other = asyncio.create_task(host.run(bystander))
            task = asyncio.create_task(host.run(fails.execute))
            await fails.started.wait()
            task.cancel()
            with pytest.raises(ExceptionGroup) as caught:
                await asyncio.wait_for(task, GUARD)
            assert list(caught.value.exceptions) == [fails.error]
            assert caught.value.exceptions[0] is fails.error
            assert not host.closed
            await host.run(trio_set, release)
            assert await asyncio.wait_for(other, GUARD) == "bystander done"
            assert await host.run(nothing) == "served"

    asyncio.run(main())


def test_a_call_whose_nursery_child_fails_as_the_host_closes_raises_that_failure() -> None:
    fails = FailsInCleanup()

    async def main() -> None:
        fails.started = asyncio.Event()
        async with open_asyncio_host() as host:
            task = asyncio.create_task(host.run(fails.execute))
            await fails.started.wait()
        # The block exited without an error of its own; the call's went to its caller.
        with pytest.raises(ExceptionGroup) as caught:
            await task
        assert caught.value.exceptions[0] is fails.error

    asyncio.run(main())


def test_a_keyboard_interrupt_left_uncaught_leaves_the_block_after_trio_cleans_up() -> None:
    # KeyboardInterrupt goes to the caller's task as on plain asyncio: uncaught,
    # it leaves the host's block (which ends the trio side first) and asyncio.run.
    log: list[str] = []

    async def job() -> None:
        try:
            await trio.sleep_forever()
        finally:
            log.append("job cleaned up")

    async def interrupt() -> None:
        raise KeyboardInterrupt

    async def main() -> None:
        started = asyncio.Event()

        async def marked() -> None:
            started.set()
            await job()

        tasks: list[asyncio.Task[None]] = []
        try:
            async with open_asyncio_host() as host:
                tasks.append(asyncio.create_task(host.run(marked)))
                await started.wait()
                try:
                    await host.run(interrupt)
                finally:
                    assert not host.closed
        finally:
            # The block ended the other call's trio side before the interrupt left it.
            assert host.closed
            assert isinstance(tasks[0].exception(), AsyncioHostClosedError)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert log == ["job cleaned up"]


def test_calls_after_the_runtime_ended_inside_the_block_fail_at_once() -> None:
    async def end_the_runtime() -> None:
        # What a trio-level failure of the host's own task does: its nursery ends.
        nursery = trio.lowlevel.current_task().parent_nursery
        assert nursery is not None
        nursery.cancel_scope.cancel()
        await trio.sleep_forever()

    async def main() -> list[str]:
        seen: list[str] = []
        async with open_asyncio_host() as host:
            with pytest.raises(AsyncioHostClosedError):
                await asyncio.wait_for(host.run(end_the_runtime), GUARD)
            # Calls made while the runtime ends and after: each fails, none hangs.
            for _ in range(20):
                with pytest.raises(AsyncioHostClosedError):
                    await asyncio.wait_for(host.run(nothing), GUARD)
                seen.append("closed" if host.closed else "open")
                await asyncio.sleep(0)
            assert host.closed
            with pytest.raises(AsyncioHostClosedError):
                async with host.enter(nothing_to_enter()):
                    pass  # pragma: no cover
        return seen

    seen = asyncio.run(main())
    assert seen[-1] == "closed"


@asynccontextmanager
async def nothing_to_enter() -> AsyncIterator[None]:
    yield  # pragma: no cover


class ClosedNursery:
    """A nursery stand-in that, like a nursery whose tasks all ended, takes no new task."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.refused = 0

    def start_soon(self, *_args: object) -> None:
        self.refused += 1
        raise RuntimeError("Nursery is closed to new arrivals")


def test_a_call_queued_as_the_nursery_closes_fails_and_trio_sees_no_error() -> None:
    # Between the host's nursery closing (its runtime ending early) and the
    # runtime noticing, a call needs a new worker: both doors refuse it.
    async def main() -> int:
        async with open_asyncio_host() as host:
            release = await host.run(make_event)
            started = asyncio.Event()

            async def busy() -> None:
                started.set()
                await release.wait()

            # The only worker is busy: the next call needs a new one.
            running = asyncio.create_task(host.run(busy))
            await started.wait()
            stand_in = ClosedNursery(host._nursery)
            host._nursery = stand_in  # type: ignore[assignment]
            with pytest.raises(AsyncioHostClosedError):
                await asyncio.wait_for(host.run(nothing), GUARD)
            assert host.closed
            with pytest.raises(AsyncioHostClosedError):
                await host.run(nothing)
            host._nursery = stand_in.nursery
        with pytest.raises(AsyncioHostClosedError):
            await running
        return stand_in.refused

    # Refused from the loop, then through the token inside trio; the block
    # exits without a TrioInternalError.
    assert asyncio.run(main()) == 2


def test_cancelling_enter_while_its_holder_is_queued_never_enters() -> None:
    log: list[str] = []

    @asynccontextmanager
    async def resource() -> AsyncIterator[None]:
        log.append("entered")  # pragma: no cover
        yield  # pragma: no cover

    async def main() -> None:
        async with open_asyncio_host() as host:
            # What asyncio does when it cancels a task inside enter() before
            # any trio tick took the holder, done within one step.
            entering = host.enter(resource()).__aenter__()
            assert isinstance(entering.send(None), asyncio.Future)
            cancelled = asyncio.CancelledError("shutdown")
            with pytest.raises(asyncio.CancelledError) as caught:
                entering.throw(cancelled)
            assert caught.value is cancelled
            for _ in range(5):
                await host.run(trio.lowlevel.checkpoint)
            assert log == []

    asyncio.run(main())
    assert log == []


def test_cancelling_enter_after_the_entry_failed_raises_that_failure_once() -> None:
    # The entry fails in trio, then the task is cancelled before it resumed:
    # the caller gets the entry's error, and asyncio logs no unretrieved one.
    error = OSError("cannot connect")
    logged: list[dict[str, Any]] = []

    @asynccontextmanager
    async def broken() -> AsyncIterator[None]:
        await trio.lowlevel.checkpoint()
        raise error
        yield  # pragma: no cover

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, c: logged.append(c))
        async with open_asyncio_host() as host:
            entering = host.enter(broken()).__aenter__()
            assert isinstance(entering.send(None), asyncio.Future)
            holder = host._queue[-1]
            for _ in range(5):
                await host.run(trio.lowlevel.checkpoint)
            assert holder.ended
            with pytest.raises(OSError, match="cannot connect") as caught:
                entering.throw(asyncio.CancelledError())
            assert caught.value is error
            # What collecting the holder's future does: it logs an exception
            # that no one retrieved.
            holder.future.__del__()

    asyncio.run(main())
    assert logged == []


def test_cancelling_enter_after_the_holder_started_cancels_the_entry() -> None:
    # The holder is running: the task's own CancelledError is raised once
    # the entry has been cancelled.
    log: list[str] = []
    entering = asyncio.Event()

    @asynccontextmanager
    async def slow() -> AsyncIterator[None]:
        entering.set()
        try:
            await trio.sleep_forever()
        finally:
            log.append("entry cancelled")
        yield  # pragma: no cover

    async def main() -> None:
        async with open_asyncio_host() as host:

            async def enter() -> None:
                async with host.enter(slow()):
                    pass  # pragma: no cover

            task = asyncio.create_task(enter())
            await entering.wait()
            task.cancel("shutdown")
            with pytest.raises(asyncio.CancelledError) as caught:
                (await settled(task)).result()
            assert caught.value.args == ("shutdown",)
            assert log == ["entry cancelled"]

    asyncio.run(main())


async def no_tool(_args: object, _ctx: object) -> None:
    raise AssertionError("never runs")  # pragma: no cover


@pytest.mark.parametrize("method", ["run", "dispatch_tool_call", "enter"])
def test_host_methods_awaited_from_a_host_call_are_refused_before_anything_runs(
    method: str,
) -> None:
    ran: list[str] = []

    async def inner() -> None:
        ran.append("inner")  # pragma: no cover

    @asynccontextmanager
    async def resource() -> AsyncIterator[None]:
        ran.append("entered")  # pragma: no cover
        yield  # pragma: no cover

    def reenter(host: AsyncioHost) -> Callable[[], Awaitable[object]]:
        async def outer() -> object:
            if method == "run":
                return await host.run(inner)
            if method == "dispatch_tool_call":
                options = DispatchOptions(registry=create_tool_registry([]))
                call = ToolCall(id="1", name="x", arguments={})
                return await host.dispatch_tool_call(call, options)
            async with host.enter(resource()):
                pass  # pragma: no cover
            return None  # pragma: no cover

        return outer

    async def main() -> None:
        async with open_asyncio_host() as host:
            with pytest.raises(TrioRequiredError, match="inside trio, call Prism directly"):
                await host.run(reenter(host))
            for _ in range(5):
                await host.run(trio.lowlevel.checkpoint)
            assert await host.run(nothing) == "served"

    asyncio.run(main())
    assert ran == []


def test_calls_in_flight_together_each_have_a_trio_task_of_their_own() -> None:
    # Pooled workers serve one call at a time: calls running at once never
    # share a task (sequential calls may: see the next test).
    count = 5

    async def main() -> set[int]:
        async with open_asyncio_host() as host:
            everyone = await host.run(make_event)
            arrived = 0

            async def task_id() -> int:
                nonlocal arrived
                arrived += 1
                if arrived == count:
                    everyone.set()
                await everyone.wait()
                return id(trio.lowlevel.current_task())

            return set(await asyncio.gather(*(host.run(task_id) for _ in range(count))))

    assert len(asyncio.run(main())) == 5


def test_a_trio_lock_taken_and_released_within_each_call_serialises_the_calls() -> None:
    # The documented way to use task-owned primitives through the host.
    log: list[str] = []

    async def main() -> None:
        async with open_asyncio_host() as host:
            lock = await host.run(make_lock)
            first_in = asyncio.Event()
            release = await host.run(make_event)

            async def holds(name: str) -> None:
                async with lock:
                    log.append(f"{name} in")
                    first_in.set()
                    await release.wait()
                    log.append(f"{name} out")

            async def waits(name: str) -> None:
                async with lock:
                    log.append(f"{name} in")
                    log.append(f"{name} out")

            first = asyncio.create_task(host.run(holds, "a"))
            await first_in.wait()
            second = asyncio.create_task(host.run(waits, "b"))
            for _ in range(5):
                await host.run(trio.lowlevel.checkpoint)
            assert log == ["a in"]
            await host.run(trio_set, release)
            await asyncio.wait_for(asyncio.gather(first, second), GUARD)

    asyncio.run(main())
    assert log == ["a in", "a out", "b in", "b out"]


async def make_lock() -> trio.Lock:
    return trio.Lock()


SECRET: contextvars.ContextVar[Any] = contextvars.ContextVar("SECRET", default=None)


class Big:
    """An object whose lifetime the test watches."""


def test_a_worker_tasks_own_context_holds_no_callers_variables() -> None:
    async def peek() -> object:
        return trio.lowlevel.current_task().context.get(SECRET)

    async def main() -> tuple[object, bool]:
        async with open_asyncio_host() as host:

            async def alice() -> weakref.ref[Big]:
                big = Big()
                SECRET.set(("alice's key", big))
                # Alice's call starts the host's first worker task.
                await host.run(peek)
                return weakref.ref(big)

            ref = await asyncio.create_task(alice())

            async def bob() -> object:
                return await host.run(peek)

            seen_by_bob = await asyncio.create_task(bob())
            gc.collect()
            return seen_by_bob, ref() is not None

    assert asyncio.run(main()) == (None, False)


def test_stop_iteration_raised_before_the_awaitable_is_an_error_not_a_result() -> None:
    stop = StopIteration("empty")

    def fn() -> Awaitable[None]:
        raise stop

    async def main() -> None:
        async with open_asyncio_host() as host:
            with pytest.raises(RuntimeError, match="raised StopIteration") as caught:
                await host.run(fn)
            assert caught.value.__cause__ is stop
            assert await host.run(nothing) == "served"

    asyncio.run(main())


def test_the_cancel_message_reaches_the_caller() -> None:
    async def main() -> list[tuple[object, ...]]:
        async with open_asyncio_host() as host:
            messages: list[tuple[object, ...]] = []
            started = asyncio.Event()

            async def sleeps() -> None:
                started.set()
                await trio.sleep_forever()

            # Cancelled while running in trio.
            task = asyncio.create_task(host.run(sleeps))
            await started.wait()
            task.cancel("shutdown")
            with pytest.raises(asyncio.CancelledError) as caught:
                (await settled(task)).result()
            messages.append(caught.value.args)
            # Cancelled while queued: what asyncio does, within one step.
            waiting = host.run(nothing)
            future = waiting.send(None)
            assert isinstance(future, asyncio.Future)
            future.cancel("queued shutdown")
            with pytest.raises(asyncio.CancelledError) as caught:
                waiting.send(None)
            messages.append(caught.value.args)
            return messages

    assert asyncio.run(main()) == [("shutdown",), ("queued shutdown",)]


def test_run_refuses_a_function_that_is_not_async_with_a_clear_type_error() -> None:
    def sync() -> int:
        return 1

    async def main() -> None:
        async with open_asyncio_host() as host:
            with pytest.raises(TypeError, match=r"takes an async function.*returned int"):
                await host.run(sync)  # type: ignore[arg-type]
            assert await host.run(nothing) == "served"

    asyncio.run(main())


def test_run_refuses_a_coroutine_object_closing_it_and_any_other_non_callable() -> None:
    async def main() -> None:
        async with open_asyncio_host() as host:
            coro = nothing()
            with pytest.raises(TypeError, match=r"takes an async function.*not fn\(\)"):
                await host.run(coro)  # type: ignore[arg-type]
            # Closed: no "never awaited" warning (the suite makes warnings errors).
            assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED
            with pytest.raises(TypeError, match=r"not an object of type int$"):
                await host.run(1)  # type: ignore[arg-type]
            assert await host.run(nothing) == "served"

    asyncio.run(main())


class FinishedToken:
    """A trio token stand-in for a runtime that has finished."""

    def run_sync_soon(self, *_args: object) -> None:
        raise trio.RunFinishedError("the run has finished")


def test_a_call_that_finds_the_runtime_finished_fails_and_leaves_nothing_counted() -> None:
    async def main() -> None:
        async with open_asyncio_host() as host:
            release = await host.run(make_event)
            started = asyncio.Event()

            async def busy() -> None:
                started.set()
                await release.wait()

            running = asyncio.create_task(host.run(busy))
            await started.wait()
            nursery, token = host._nursery, host._token
            host._nursery = ClosedNursery(nursery)  # type: ignore[assignment]
            host._token = FinishedToken()  # type: ignore[assignment]
            with pytest.raises(AsyncioHostClosedError, match="runtime has ended"):
                await host.run(nothing)
            assert (host.closed, host._ready, len(host._queue)) == (True, 0, 0)
            host._nursery, host._token = nursery, token
        with pytest.raises(AsyncioHostClosedError):
            await running

    asyncio.run(main())


class AwaitFails:
    """An awaitable whose ``__await__`` itself raises AttributeError."""

    def __init__(self, error: AttributeError) -> None:
        self.error = error

    def __await__(self) -> Generator[object, object, None]:
        raise self.error


def test_an_attribute_error_from_an_awaitables_own_await_is_raised_as_it_is() -> None:
    error = AttributeError("inside __await__")

    async def main() -> None:
        async with open_asyncio_host() as host:
            with pytest.raises(AttributeError) as caught:
                await host.run(AwaitFails, error)
            assert caught.value is error

    asyncio.run(main())


class HostStub:
    """What _serve reads of its host: the queue and the count of ready workers."""

    def __init__(self) -> None:
        self._queue: list[object] = []
        self._ready = 1


def test_closing_a_workers_coroutine_closes_the_call_instead_of_answering_it() -> None:
    # Trio closes a task's coroutine (GeneratorExit at its yield) only when a run
    # is abandoned; that is not the call's failure to deliver, and the worker
    # must see it to end.
    from prism.core._asyncio_host import _Call, _serve

    async def fn() -> None:
        await trio.lowlevel.checkpoint()

    async def main() -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        call = _Call(future, fn, (), contextvars.copy_context())
        serving = _serve(HostStub(), call, trio.CancelScope())  # type: ignore[arg-type]
        serving.send(None)
        serving.close()
        assert call.ended
        assert isinstance(future.exception(), AsyncioHostClosedError)

    asyncio.run(main())


def test_an_error_settled_in_the_step_its_caller_is_cancelled_is_raised_not_dropped() -> None:
    error = ValueError("failed as its caller was cancelled")

    async def main() -> None:
        async with open_asyncio_host() as host:
            loop = asyncio.get_running_loop()
            tasks: list[asyncio.Task[None]] = []

            async def fails() -> None:
                await trio.lowlevel.checkpoint()
                loop.call_soon(tasks[0].cancel)
                raise error

            tasks.append(asyncio.create_task(host.run(fails)))
            with pytest.raises(ValueError, match="failed as its caller") as caught:
                await asyncio.wait_for(tasks[0], GUARD)
            assert caught.value is error
            assert await host.run(nothing) == "served"

    asyncio.run(main())
