"""The asyncio host: one long-lived trio runtime in guest mode on a running asyncio loop.

This is the only module of ``prism.core`` that imports :mod:`asyncio` (the ruff
ban has a per-file exemption for it). Everything Prism does still runs on trio:
the host starts trio with :func:`trio.lowlevel.start_guest_run` on the asyncio
loop's thread, and each awaitable wrapper queues a call that a worker task of
the host's nursery serves, and waits for it from asyncio.

Cost: a call is one asyncio future and a share of one step of a worker task
that is already runnable (the worker that served the previous call spins a
few ticks before parking), so a caller pays one loop iteration and one guest
tick, and no task spawn. A worker serves the calls queued when it runs one
after another in that step, as long as each returns without blocking; a call
that blocks (yields to trio) with calls queued behind it wakes another worker
for them, unless one is already about to look at the queue. So calls queued
in the same loop iteration share one worker step, and a call that blocks
never holds up the calls behind it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import logging
import math
import types
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

import attrs
import trio

from ._errors import AsyncioHostClosedError, TrioRequiredError
from ._host_calls import set_loop_runner, trio_native, trio_side

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Generator, Sequence
    from contextlib import AbstractAsyncContextManager

    import outcome

    from ._agent import AgentSession, RunOptions, RunResult
    from ._content import ToolCall, ToolResult, UserMessage
    from ._dispatch import DispatchOptions

__all__ = ["AsyncioHost", "open_asyncio_host"]

T = TypeVar("T")

_log = logging.getLogger("prism.core")

# A worker with nothing to do stays runnable for this many trio ticks before it
# parks, so an asyncio caller's next call finds trio ticking on the loop instead
# of parked in its I/O thread (that thread round trip would be most of the cost
# of a call). One worker spins at a time; bounded, so an idle host sleeps.
_SPIN_TICKS = 4
# Parked workers kept for the next burst of concurrent calls; more exit.
_MAX_PARKED = 64
# A trio task waiting for an asyncio callback's task looks at it for this many
# ticks (each one turn of the loop) before it parks (see _await_on_loop).
_CALLBACK_SPIN_TICKS = 6


# dispatch_tool_call, imported on first use rather than per call (an import
# statement costs about a microsecond even when the module is loaded); at the
# top it would load the whole dispatcher with the host.
@functools.cache
def _dispatch_tool_call() -> Callable[[ToolCall, DispatchOptions], Awaitable[ToolResult]]:
    from ._dispatch import dispatch_tool_call

    return dispatch_tool_call


@functools.cache
def _loop_dispatch() -> tuple[
    Callable[[ToolCall, DispatchOptions], bool],
    Callable[[ToolCall, DispatchOptions], Awaitable[ToolResult]],
]:
    from ._dispatch import dispatch_from_loop, needs_trio

    return needs_trio, dispatch_from_loop


@trio_native
async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


@types.coroutine
def _in_context(context: contextvars.Context, awaitable: Awaitable[T]) -> Generator[Any, Any, T]:
    """Await ``awaitable`` in the awaiting asyncio task, every step of it in ``context``.

    What the task's loop sends or throws in (a future's result, the task's
    :class:`asyncio.CancelledError`) goes to the awaitable, in ``context``.
    """
    run = context.run
    steps = run(awaitable.__await__)
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        try:
            yielded = run(steps.send, sent) if thrown is None else run(steps.throw, thrown)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            sent = yield yielded
            thrown = None
        except BaseException as exc:
            sent = None
            thrown = exc


@attrs.define(eq=False)
class _Call(Generic[T]):
    """One call from an asyncio caller: queued, then served by one worker task."""

    future: asyncio.Future[T]
    fn: Callable[..., Awaitable[T]]
    args: tuple[object, ...]
    context: contextvars.Context
    started: bool = False
    ended: bool = False
    scope: trio.CancelScope | None = None
    # What the call raised besides trio.Cancelled, for a caller that cancelled it.
    error: BaseException | None = None
    ended_waiter: asyncio.Future[None] | None = None

    def cancel(self) -> None:
        # Runs in the trio runtime (through the token). The scope is the
        # serving worker's, and is only set while this call is being served.
        if self.scope is not None:
            self.scope.cancel()

    def end(self) -> None:
        self.ended = True
        waiter = self.ended_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _split_cancelled(exc: BaseException) -> tuple[BaseException | None, BaseException | None]:
    # (trio's cancellation, the call's own failure) in what a call raised: a
    # group such as [ValueError, Cancelled] (a nursery child that failed while
    # being cancelled) holds both.
    if isinstance(exc, trio.Cancelled):
        return exc, None
    if isinstance(exc, BaseExceptionGroup):
        cancelled, rest = exc.split(trio.Cancelled)
        if cancelled is not None:
            return cancelled, rest
    return None, exc


@types.coroutine
def _serve(
    host: AsyncioHost, call: _Call[T], scope: trio.CancelScope
) -> Generator[object, object, None]:
    """Serve one call in the worker task that awaits this, and settle its future.

    Every step of ``fn(*args)`` runs in the call's own context (a copy of the
    asyncio caller's): a worker task serves many calls one after another, and
    each call's context variables stay its own. Whenever the call blocks
    (yields to trio), calls still queued get a worker of their own if no other
    worker is about to look at the queue.

    Whatever the call raises, :class:`BaseException` too, goes to its caller
    and to no one else; only trio's cancellation of this worker
    (``trio.Cancelled`` while a cancellation applies to it, also out of a
    group) goes on up, to the worker's scope or the host's nursery.
    """
    call.started = True
    call.scope = scope
    future = call.future
    run = call.context.run
    thrown: BaseException | None = None
    try:
        try:
            awaitable = run(call.fn, *call.args)
        except StopIteration as stop:
            # Not a return: only the awaitable's own StopIteration is one.
            raise RuntimeError(f"{call.fn!r} raised StopIteration") from stop
        try:
            steps = awaitable.__await__()
        except AttributeError:
            if hasattr(awaitable, "__await__"):
                raise
            raise TypeError(
                f"AsyncioHost.run takes an async function: {call.fn!r} returned "
                f"{type(awaitable).__name__}, not an awaitable"
            ) from None
        sent: object = None
        while True:
            try:
                yielded = run(steps.send, sent) if thrown is None else run(steps.throw, thrown)
            except StopIteration as stop:
                if not future.done():
                    future.set_result(stop.value)
                return
            if host._queue and not host._ready:
                host._wake()
            try:
                sent = yield yielded
                thrown = None
            except BaseException as exc:  # thrown in: GeneratorExit when closed
                sent = None
                thrown = exc
    except BaseException as exc:
        if exc is thrown and isinstance(exc, GeneratorExit):
            raise  # the worker's coroutine is being closed: not the call's to deliver
        cancelled, failure = _split_cancelled(exc)
        if cancelled is not None and trio.current_effective_deadline() != -math.inf:
            # No cancellation applies to this worker (its scope and the host's
            # are not cancelled): the call raised a Cancelled of its own, from
            # some other scope. That is the call's failure, its caller's alone.
            cancelled, failure = None, exc
        if failure is not None:
            call.error = failure
            if not future.done():
                future.set_exception(failure)
        if cancelled is exc:
            raise
        if cancelled is not None:
            raise cancelled from None
    finally:
        call.scope = None
        if not future.done():
            # Cancelled: by the asyncio caller (it raises CancelledError
            # itself) or by the host closing under it.
            future.set_exception(
                AsyncioHostClosedError("the call was cancelled because its AsyncioHost closed")
            )
        call.end()


@attrs.define(eq=False)
class _InTask:
    """A dispatch running in its caller's asyncio task, for the host to cancel when it closes."""

    task: asyncio.Task[Any]
    closing: bool = False
    # Made by the closing host only (most calls never need one).
    ended: asyncio.Future[None] | None = None


@attrs.define(eq=False)
class AsyncioHost:
    """A trio runtime living on an asyncio loop, and awaitable doors into it.

    Obtain one from :func:`open_asyncio_host`. Every method is awaited from
    asyncio tasks of the loop that opened the host (not from trio, not from a
    host call, and not from another thread). Many asyncio tasks may use one
    host at once. Each call on the trio side (all but a dispatch with no trio
    code, see :meth:`dispatch_tool_call`) is served, for its whole duration,
    by one trio task that serves no other call meanwhile: a pooled worker task of the
    host's nursery, which goes on to serve later calls one after another (so
    ``trio.lowlevel.current_task()`` may be the same task in sequential calls).
    Task-owned trio primitives (:class:`trio.Lock`, a
    :class:`trio.CapacityLimiter` token, ...) must therefore be acquired and
    released within one call, never held from one call to the next. Each
    call sees a copy of the calling asyncio task's context variables; a
    worker task's own context holds none of any caller's.

    Cancellation crosses the boundary both ways: cancelling the asyncio task
    that awaits a method cancels the trio side (the method returns only once
    the trio side has finished its cleanup, then raises the task's
    :class:`asyncio.CancelledError`, or what the trio side raised besides
    ``trio.Cancelled``); an exception raised on the trio side is raised to the
    asyncio caller as the same exception object, a :class:`BaseException`
    such as :class:`KeyboardInterrupt` too, and the host goes on serving
    other calls.
    """

    _loop: asyncio.AbstractEventLoop
    _token: trio.lowlevel.TrioToken
    _nursery: trio.Nursery
    _closed: bool = attrs.field(default=False, init=False)
    # Calls waiting for a worker, and the workers: parked ones, and how many
    # will look at the queue without being woken (spinning, woken or new).
    _queue: collections.deque[_Call[Any]] = attrs.field(factory=collections.deque, init=False)
    _parked: list[trio.lowlevel.Task] = attrs.field(factory=list, init=False)
    _ready: int = attrs.field(default=0, init=False)
    _spinning: int = attrs.field(default=0, init=False)
    # Asyncio tasks of async event sinks, waited for when the host closes.
    _started: set[asyncio.Task[None]] = attrs.field(factory=set, init=False)
    # Dispatches running in their caller's task (no trio code): cancelled and
    # waited for when the host closes.
    _in_tasks: set[_InTask] = attrs.field(factory=set, init=False)

    @property
    def closed(self) -> bool:
        """Whether the host's ``async with`` block has been left, or its trio runtime has ended.

        Once closed, every call fails at once with :class:`AsyncioHostClosedError`.
        """
        return self._closed

    def _check_caller(self) -> None:
        self._caller_task()

    def _caller_task(self) -> asyncio.Task[Any] | None:
        """Check the caller (an asyncio task of the host's loop), and return its task."""
        if self._closed:
            raise AsyncioHostClosedError("this AsyncioHost is closed; open a new one")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self._loop:
            raise TrioRequiredError(
                "AsyncioHost methods are awaited from asyncio tasks of the loop that opened "
                "the host; inside trio, call Prism directly"
            )
        # Trio's steps run in a loop callback, outside any asyncio task; asking
        # asyncio first is the cheap test (in_trio_task costs a raised AttributeError).
        task = asyncio.current_task(running)
        if task is None and trio.lowlevel.in_trio_task():
            # Awaited from trio (a host call, say): the asyncio loop is
            # running on this thread too, but nothing would serve this call.
            raise TrioRequiredError(
                "AsyncioHost methods are awaited from asyncio tasks, not from trio (this runs "
                "in a trio task, such as a host call): inside trio, call Prism directly, "
                "`await fn(*args)`"
            )
        return task

    def _start(self, fn: Callable[..., Awaitable[T]], args: tuple[object, ...]) -> _Call[T]:
        self._check_caller()
        call: _Call[T] = _Call(self._loop.create_future(), fn, args, contextvars.copy_context())
        self._queue.append(call)
        if not self._ready:
            # No worker will look at the queue by itself: wake or start one.
            try:
                # In guest mode trio keeps this thread's run context for the
                # whole run, so this is done right here: no round trip through
                # the token's wakeup socket and a system task.
                self._wake()
            except (RuntimeError, AttributeError):
                # A trio that keeps no run context between guest ticks, or a
                # nursery closed because the runtime is ending: the
                # documented, slower door (the worker is counted as ready now).
                self._ready += 1
                try:
                    self._token.run_sync_soon(self._add_worker_soon)
                except trio.RunFinishedError:
                    self._ready -= 1
                    self._queue.pop()
                    self._closed = True
                    raise AsyncioHostClosedError(
                        "this AsyncioHost's trio runtime has ended"
                    ) from None
        return call

    def _wake(self) -> None:
        # Wake or start one worker, counted in _ready until it looks at the queue.
        self._add_worker()
        self._ready += 1

    def _add_worker(self) -> None:
        if self._parked:
            trio.lowlevel.reschedule(self._parked[-1])
            self._parked.pop()
        else:
            # Started in an empty context, so that the worker's own context
            # holds none of the variables of the caller that happens to start
            # it (each call runs in a copy of its own caller's).
            contextvars.Context().run(self._nursery.start_soon, self._worker)

    def _add_worker_soon(self) -> None:
        # _add_worker through the token, in the trio runtime; the worker was
        # counted in _ready when this was queued.
        try:
            self._add_worker()
        except RuntimeError:
            # The nursery is closed: the runtime is ending, and no worker will come.
            self._ready -= 1
            self._closed = True
            self._fail_queued()

    async def _worker(self) -> None:
        # Whoever woke or started this worker counted it in _ready. The queue
        # never holds calls with no worker about to look at it: a caller that
        # queues one wakes a worker if none is ready, and so does a call that
        # blocks (in _serve) with calls queued behind it.
        spins = 0
        with trio.CancelScope() as scope:
            while True:
                self._ready -= 1
                while self._queue:
                    spins = 0
                    await _serve(self, self._queue.popleft(), scope)
                    if scope.cancel_called:
                        # A caller cancelled its call: this worker's scope is
                        # spent, so it leaves (another serves what is queued).
                        return
                if spins < _SPIN_TICKS and not self._spinning:
                    spins += 1
                    self._ready += 1
                    self._spinning += 1
                    try:
                        # A schedule point only: a spinning worker always comes
                        # back to take what was queued for it, even when the
                        # nursery is being cancelled (the call then sees that).
                        await trio.lowlevel.cancel_shielded_checkpoint()
                    finally:
                        self._spinning -= 1
                    continue
                spins = 0
                if len(self._parked) >= _MAX_PARKED:
                    return
                await self._park()

    async def _park(self) -> None:
        task = trio.lowlevel.current_task()
        self._parked.append(task)

        def abort(_: object) -> trio.lowlevel.Abort:
            self._parked.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def _fail_queued(self) -> None:
        # The trio runtime is ending and no worker is left. The queue never
        # holds calls with no worker about to look at it, and a worker takes a
        # call before its first cancel point, so nothing should be left; if
        # something is (a trio whose scheduling differs), its caller gets what
        # a call cancelled by the host closing gets rather than waiting forever.
        while self._queue:
            call = self._queue.popleft()
            if not call.future.done():
                call.future.set_exception(
                    AsyncioHostClosedError("the call was cancelled because its AsyncioHost closed")
                )
            call.end()

    async def _wait(self, call: _Call[T]) -> T:
        try:
            return await call.future
        except asyncio.CancelledError as cancelled:
            return await self._cancelled(call, cancelled)

    async def _cancelled(self, call: _Call[T], cancelled: asyncio.CancelledError) -> T:
        # Awaiting the call's future raised CancelledError (run and
        # dispatch_tool_call await it themselves, one coroutine less per call).
        if not call.future.cancelled():
            # The future was settled, then asyncio threw CancelledError in (the
            # task was cancelled in the same loop step). As in _cancel, an error
            # of the trio side is raised, not dropped; a result gives way.
            error = call.future.exception()
            if error is not None:
                raise error
            raise cancelled
        # This task was cancelled (asyncio cancelled the future it awaited).
        return await self._cancel(call, cancelled)

    async def _cancel(self, call: _Call[Any], cancelled: asyncio.CancelledError) -> NoReturn:
        # The caller's task was cancelled: end the call, and raise the task's
        # CancelledError (its message too), or what the trio side raised.
        if not call.started and not call.ended:
            # No worker took it yet: it never starts.
            self._queue.remove(call)
            call.end()
            raise cancelled
        # Cancel the trio side and wait for it to end, so nothing outlives the call.
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(call.cancel)
        while not call.ended:
            call.ended_waiter = self._loop.create_future()
            with contextlib.suppress(asyncio.CancelledError):
                await call.ended_waiter
        if call.error is not None:
            raise call.error
        raise cancelled

    async def _await_on_loop(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` as a task of the host's asyncio loop, from a trio task of the host.

        The runner :func:`await_callback` uses for the application's asyncio
        callbacks. The task runs in a copy of the current context variables;
        its result, or the exception it raised (the same object, a
        :class:`KeyboardInterrupt` too, which would otherwise stop the loop),
        comes back here. Cancelling the trio task cancels the asyncio task and
        waits for it to end, then raises ``trio.Cancelled`` (also when the task
        swallowed its cancellation and returned), or what the task raised
        meanwhile; an asyncio task cancelled by someone else raises its
        :class:`asyncio.CancelledError` here.
        """
        values: list[T] = []
        errors: list[BaseException] = []

        async def guarded() -> None:
            try:
                values.append(await awaitable)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                # Kept here: asyncio re-raises KeyboardInterrupt and SystemExit
                # out of the loop itself, which would end the application.
                errors.append(exc)

        context = contextvars.copy_context()
        # Asyncio code in the task that calls Prism back with trio code goes through the host.
        context.run(trio_side.set, self._await_on_trio)
        try:
            task = self._loop.create_task(guarded(), context=context)
        except BaseException:
            if isinstance(awaitable, types.CoroutineType):
                awaitable.close()  # never started: no never-awaited warning
            raise
        waiter = trio.lowlevel.current_task()
        token = self._token

        def done(_: object) -> None:
            try:
                trio.lowlevel.reschedule(waiter)
            except (RuntimeError, AttributeError):
                # A trio that keeps no run context between guest ticks.
                with contextlib.suppress(trio.RunFinishedError):
                    token.run_sync_soon(trio.lowlevel.reschedule, waiter)

        # Most callbacks end within a few turns of the loop (a queue answered, a
        # request to a fast server): stay runnable for a few trio ticks (each one
        # turn of the loop) before parking, so trio does not go to wait in its
        # I/O thread, which the task's end would then have to wake.
        for _ in range(_CALLBACK_SPIN_TICKS):
            if task.done():
                break
            await trio.lowlevel.cancel_shielded_checkpoint()
        if task.done():
            if errors:
                raise errors.pop()
            if task.cancelled():
                task.result()  # raises the task's CancelledError, with its message
            return values[0]
        task.add_done_callback(done)
        raise_cancel: Callable[[], NoReturn] | None = None

        def abort(how: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
            nonlocal raise_cancel
            if raise_cancel is None:
                raise_cancel = how
                task.cancel()
            # Failed: this task waits for the asyncio task to end, then raises.
            return trio.lowlevel.Abort.FAILED

        await trio.lowlevel.wait_task_rescheduled(abort)
        if errors:
            # Also when cancelled: an error raised while cancelling is not dropped.
            raise errors.pop()
        if raise_cancel is not None:
            raise_cancel()
        if task.cancelled():
            task.result()  # raises the task's CancelledError, with its message
        return values[0]

    def _start_on_loop(self, awaitable: Awaitable[Any]) -> None:
        # An async event sink's awaitable: a task of the loop that nobody awaits;
        # its failure is logged, and the host waits for it when it closes.
        async def guarded() -> None:
            try:
                await awaitable
            except asyncio.CancelledError:
                raise
            except BaseException:
                # KeyboardInterrupt too: asyncio would re-raise it out of the loop.
                _log.exception("an asyncio event sink raised")

        context = contextvars.copy_context()
        context.run(trio_side.set, self._await_on_trio)
        try:
            task = self._loop.create_task(guarded(), context=context)
        except BaseException:
            if isinstance(awaitable, types.CoroutineType):
                awaitable.close()
            raise
        self._started.add(task)
        task.add_done_callback(self._started.discard)

    async def _await_on_trio(self, awaitable: Awaitable[T]) -> T:
        # From a callback task of this host's loop: await a trio-native awaitable in trio.
        return await self.run(_await, awaitable)

    async def run(self, fn: Callable[..., Awaitable[T]], *args: object) -> T:
        """Run ``await fn(*args)`` in a trio task of the host and return its result.

        ``fn`` may be any trio async function: a Prism entry point, a tool's
        ``execute``, or your own code using trio. The task is a pooled worker
        that serves this call alone until it ends, then later calls: hold no
        task-owned primitive (:class:`trio.Lock`, ...) from one call to the next.

        Cancellation: cancelling the awaiting asyncio task cancels the trio
        task; this returns once the trio task has ended, then raises the
        task's :class:`asyncio.CancelledError` (or what ``fn`` raised besides
        ``trio.Cancelled`` while it was cancelled).

        Raises:
            AsyncioHostClosedError: the host is closed, or closed during the call.
            TrioRequiredError: awaited from trio (inside trio, call ``fn`` directly),
                or from another loop or thread.
            TypeError: ``fn`` is not an async function (a coroutine object, or a
                function that returns no awaitable).
            BaseException: whatever ``fn`` raised, the same object (a
                :class:`KeyboardInterrupt` or :class:`SystemExit` too: it goes to
                this caller, and the host goes on serving others).
        """
        if not callable(fn):
            what = f"an object of type {type(fn).__name__}"
            if isinstance(fn, types.CoroutineType):
                fn.close()  # never awaited, and it says so no more
                what = "a coroutine object: pass fn, not fn()"
            raise TypeError(
                "AsyncioHost.run takes an async function and its arguments, "
                f"host.run(fn, *args), not {what}"
            )
        call = self._start(fn, args)
        try:
            return await call.future
        except asyncio.CancelledError as cancelled:
            return await self._cancelled(call, cancelled)

    async def dispatch_tool_call(self, call: ToolCall, options: DispatchOptions) -> ToolResult:
        """:func:`dispatch_tool_call` through the host.

        A dispatch with no trio code in it (no ``options.signal``, and no gate,
        event sink or tool marked :func:`trio_native`) runs right in the
        awaiting asyncio task, in a copy of its context: every gate, the
        events and the ledger as always, and the asyncio tool awaited there,
        with no crossing into trio. Any other dispatch runs in a trio task of
        the host (the asyncio callbacks in it as tasks of the loop).

        Cancellation: as :meth:`run`; the call's trio task sees
        :class:`trio.Cancelled` (a call in the caller's task, its
        :class:`asyncio.CancelledError`) and the call is recorded as
        cancelled. The host closing cancels a call running in its caller's
        task too, and waits for it: its caller gets
        :class:`AsyncioHostClosedError`, unless the tool swallowed that
        cancellation and returned (its result stands).
        """
        needs_trio, dispatch_from_loop = _loop_dispatch()
        if needs_trio(call, options):
            started = self._start(_dispatch_tool_call(), (call, options))
            try:
                return await started.future
            except asyncio.CancelledError as cancelled:
                return await self._cancelled(started, cancelled)
        # Nothing in this call is trio code: it runs in this asyncio task, with
        # no crossing (the asyncio tool is awaited right here), in a copy of the
        # task's context, as a host call would. (One coroutine, not two: each
        # frame costs on every step of the call.)
        task = self._caller_task()
        assert task is not None  # an asyncio task of the host's loop
        entry = _InTask(task)
        self._in_tasks.add(entry)
        context = contextvars.copy_context()
        # Asyncio code of this call that calls Prism back with trio code goes through the host.
        context.run(trio_side.set, self._await_on_trio)
        try:
            result = await _in_context(context, dispatch_from_loop(call, options))
        except asyncio.CancelledError:
            if entry.closing and task.uncancel() == 0:
                # Cancelled by the host closing, and by no one else.
                raise AsyncioHostClosedError(
                    "the call was cancelled because its AsyncioHost closed"
                ) from None
            raise
        finally:
            self._in_tasks.discard(entry)
            if entry.ended is not None:
                entry.ended.set_result(None)
        if entry.closing:
            task.uncancel()  # the call swallowed the host's cancellation and ended
        return result

    def _cancel_in_tasks(self) -> list[asyncio.Future[None]]:
        # The host closes: cancel the dispatches running in their callers' tasks.
        current = asyncio.current_task()
        waiting = []
        for entry in self._in_tasks:
            if entry.task is current:
                continue  # closed from inside a call: that call ends by itself
            if not entry.closing:
                entry.closing = True
                entry.ended = self._loop.create_future()
                entry.task.cancel()
            assert entry.ended is not None
            waiting.append(entry.ended)
        return waiting

    async def dispatch_tool_calls_in_order(
        self,
        calls: Sequence[ToolCall],
        options: DispatchOptions,
        *,
        concurrency: int = 1,
        on_result: Callable[[int, ToolCall, ToolResult], None] | None = None,
    ) -> list[ToolResult]:
        """:func:`dispatch_tool_calls_in_order` through the host.

        ``on_result`` runs in the host's trio task, on the loop's thread.

        Cancellation: as :meth:`run`; calls in flight are cancelled and calls
        not started never start.
        """
        from ._parallel import dispatch_tool_calls_in_order

        async def dispatch() -> list[ToolResult]:
            return await dispatch_tool_calls_in_order(
                calls, options, concurrency=concurrency, on_result=on_result
            )

        return await self._wait(self._start(dispatch, ()))

    async def run_agent(
        self,
        session: AgentSession,
        prompt: str | UserMessage,
        options: RunOptions | None = None,
    ) -> RunResult:
        """:meth:`AgentSession.run` through the host.

        Event sinks (``options.on_event``) run in the host's trio task, on the
        loop's thread. To abort the run and still get a result, abort
        ``options.signal``'s controller (from asyncio, that is a plain
        synchronous call).

        Cancellation: as :meth:`run`; the session's transcript is left valid
        (every call answered) and the ledger covers every call.
        """
        return await self._wait(self._start(session.run, (prompt, options)))

    @contextlib.asynccontextmanager
    async def enter(self, context: AbstractAsyncContextManager[T]) -> AsyncIterator[T]:
        """Enter a trio async context manager inside the host, for an asyncio ``async with``.

        For resources that own trio tasks, such as ``open_mcp_tools(...)``: the
        context manager is entered and exited by one trio task that lives as
        long as the asyncio block, so its nursery stays valid::

            async with host.enter(open_mcp_tools(server_id="docs", transport=t)) as bridge:
                result = await host.dispatch_tool_call(call, options)

        An exception raised in the asyncio block is not passed to the trio
        context manager: it is exited normally, then the exception continues.

        Cancellation: cancelling the asyncio task while entering cancels the
        entry (if no trio task took it yet, the context manager is never
        entered), then raises the task's :class:`asyncio.CancelledError`;
        leaving the block (for any reason) exits the context manager and waits
        for that exit to finish.

        Raises:
            AsyncioHostClosedError: the host is closed, or closed meanwhile.
            TrioRequiredError: used from trio, or from another loop or thread.
            BaseException: whatever entering or exiting the context manager raised.
        """
        entered: asyncio.Future[T] = self._loop.create_future()
        release = trio.Event()

        async def hold() -> None:
            async with context as value:
                if not entered.done():
                    entered.set_result(value)
                await release.wait()

        holder = self._start(hold, ())
        try:
            await asyncio.wait((entered, holder.future), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError as cancelled:
            # A holder still queued never starts, one entering is cancelled,
            # one that entered exits; no one waits for their futures.
            entered.cancel()
            holder.future.cancel()  # done already: no longer logged as unretrieved
            await self._cancel(holder, cancelled)
        if not entered.done():
            # The holder ended without entering: raise its exception.
            await self._wait(holder)
            raise AsyncioHostClosedError("the context manager ended before it was entered")
        try:
            yield entered.result()
        finally:
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(release.set)
            await self._wait(holder)


@contextlib.asynccontextmanager
async def open_asyncio_host() -> AsyncIterator[AsyncioHost]:
    """Start one Prism (trio) runtime on the running asyncio loop, for the block's duration.

    Trio runs in guest mode on the loop's thread; open one host for the
    application's lifetime and share it between tasks::

        async def main() -> None:
            async with open_asyncio_host() as host:
                result = await host.dispatch_tool_call(call, options)

        asyncio.run(main())

    Leaving the block cancels trio tasks still running and dispatches running
    in their callers' asyncio tasks (their asyncio callers get
    :class:`AsyncioHostClosedError`), and waits for them and for the runtime to end.

    Cancellation: cancelling the task while the block exits still waits for the
    trio runtime to finish (it is already cancelled), then re-raises.

    Raises:
        TrioRequiredError: not called from a running asyncio loop, or a trio
            run is already active on this thread.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise TrioRequiredError(
            "open_asyncio_host() must be used inside a running asyncio loop"
        ) from None
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        pass
    else:
        raise TrioRequiredError(
            "a trio run is already active on this thread: inside trio, call Prism directly; "
            "an asyncio loop needs only one AsyncioHost"
        )
    started: asyncio.Future[tuple[AsyncioHost, trio.Event]] = loop.create_future()
    finished: asyncio.Future[outcome.Outcome[None]] = loop.create_future()

    async def main() -> None:
        stop = trio.Event()
        host: AsyncioHost | None = None
        try:
            async with trio.open_nursery() as nursery:
                host = AsyncioHost(
                    loop=loop, token=trio.lowlevel.current_trio_token(), nursery=nursery
                )
                # The application's asyncio callbacks run on this loop (await_callback).
                set_loop_runner(host._await_on_loop, host._start_on_loop)
                started.set_result((host, stop))
                await stop.wait()
                nursery.cancel_scope.cancel()
        finally:
            if host is not None:
                # Also when the runtime ends early, inside the open block.
                host._closed = True
                host._fail_queued()

    def done(result: outcome.Outcome[None]) -> None:
        if not finished.done():
            finished.set_result(result)

    trio.lowlevel.start_guest_run(
        main,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=loop.call_soon,
        done_callback=done,
        host_uses_signal_set_wakeup_fd=True,
    )
    await asyncio.wait((started, finished), return_when=asyncio.FIRST_COMPLETED)
    if not started.done():
        finished.result().unwrap()
        raise AsyncioHostClosedError("the trio runtime ended before it started")
    host, stop = started.result()
    try:
        yield host
    finally:
        host._closed = True
        cancelled = False
        while waiting := host._cancel_in_tasks():
            # Dispatches running in their callers' tasks (no trio code) end first.
            try:
                await asyncio.wait(waiting)
            except asyncio.CancelledError:
                cancelled = True
        with contextlib.suppress(trio.RunFinishedError):
            host._token.run_sync_soon(stop.set)
        while not finished.done():
            try:
                await asyncio.wait((finished,))
            except asyncio.CancelledError:
                cancelled = True
        while host._started:
            # Async event sinks still running: they see the host's last events.
            try:
                await asyncio.wait(tuple(host._started))
            except asyncio.CancelledError:
                cancelled = True
        finished.result().unwrap()
        if cancelled:
            raise asyncio.CancelledError
