"""Running trio from synchronous command code."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import TYPE_CHECKING, TypeVar

import attrs
import trio

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

__all__ = ["Interrupts", "only_leaf", "run_trio", "watch_interrupts"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_T = TypeVar("_T")


def only_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception inside ``group`` (however nested), or ``None`` if there are several."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseExceptionGroup):
            stack.extend(item.exceptions)
        else:
            leaves.append(item)
    return leaves[0] if len(leaves) == 1 else None


def run_trio(fn: Callable[[], Awaitable[_T]], *, sigterm_as_interrupt: bool = False) -> _T:
    """``trio.run(fn)``; a group holding one error (from a nursery) is raised as that error.

    With ``sigterm_as_interrupt``, SIGTERM is handled as Ctrl-C (SIGINT) while
    it runs: a ``kill``, a service manager's stop or a container's shutdown
    ends the command the way Ctrl-C does, so the ledger gets its end marker.
    """
    guard = _sigterm_as_interrupt() if sigterm_as_interrupt else contextlib.nullcontext()
    with guard:
        try:
            return trio.run(fn)
        except BaseExceptionGroup as group:
            leaf = only_leaf(group)
            if leaf is None:
                raise
            raise leaf from group


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals
        return

    def interrupt(signum: int, frame: object) -> None:
        # trio's own SIGINT handler turns this into KeyboardInterrupt (or the
        # command's Ctrl-C watcher sees it), exactly as a Ctrl-C would.
        signal.raise_signal(signal.SIGINT)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@attrs.define(eq=False)
class Interrupts:
    """The stop signals (SIGINT, SIGTERM) a :func:`watch_interrupts` block received, in order."""

    received: list[int] = attrs.Factory(list)


@contextlib.asynccontextmanager
async def watch_interrupts(
    on_interrupt: Callable[[int], bool],
) -> AsyncIterator[Interrupts]:
    """Call ``on_interrupt(signum)`` on each SIGINT (Ctrl-C) or SIGTERM while the block runs.

    When it returns false, the block is cancelled and :class:`KeyboardInterrupt`
    is raised as it ends (the usual Ctrl-C, once the block cleaned up: a run
    ledger inside sees the cancellation and writes ``aborted``). The signal is
    taken here, in one task, never raised in whichever task happened to run,
    where a background task could swallow it and let the run end as if
    finished. After that, the signals are handled as before the block again
    (a second Ctrl-C interrupts a shutdown that hangs). Off the main thread
    (an embedding host), signals never arrive: nothing is watched.
    """
    interrupts = Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return
    stopped = False
    async with trio.open_nursery() as nursery:

        async def watch(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            nonlocal stopped
            with trio.open_signal_receiver(*STOP_SIGNALS) as received:
                task_status.started()
                async for signum in received:
                    interrupts.received.append(signum)
                    if not on_interrupt(signum):
                        stopped = True
                        nursery.cancel_scope.cancel()
                        return

        await nursery.start(watch)
        yield interrupts
        nursery.cancel_scope.cancel()
    if stopped:
        raise KeyboardInterrupt
