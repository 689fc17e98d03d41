"""Running trio from synchronous command code."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import TYPE_CHECKING, TypeVar

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

__all__ = ["only_leaf", "run_trio"]

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
