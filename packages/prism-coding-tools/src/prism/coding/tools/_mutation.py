"""Per-path serialisation of writes and edits (the file mutation queue)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import trio

from prism.core import ExecutionAction, ExecutionPolicy, PrismError, ToolResult

from ._common import policy_check

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from ._protocols import FileOperations

__all__ = ["FileMutationQueue", "default_mutation_queue", "run_checked_mutation"]


@attrs.define(eq=False)
class _Slot:
    lock: trio.Lock = attrs.field(factory=trio.Lock)
    users: int = 0


@attrs.define(eq=False)
class FileMutationQueue:
    """One FIFO lock per resolved path; a path's entry lives only while someone holds or waits.

    Every write and edit tool running in one trio run shares
    :func:`default_mutation_queue`, so a ``write`` and an ``edit`` of the same
    file never interleave. A queue belongs to one trio run.
    """

    _slots: dict[str, _Slot] = attrs.field(factory=dict, init=False)

    @asynccontextmanager
    async def hold(self, path: str) -> AsyncIterator[None]:
        """Hold ``path``'s lock for the ``async with`` body (waiters are served in order).

        Checkpoints. Cancellation while waiting gives up the place in line.
        """
        slot = self._slots.get(path)
        if slot is None:
            slot = self._slots[path] = _Slot()
        slot.users += 1
        try:
            async with slot.lock:
                yield
        finally:
            slot.users -= 1
            if slot.users == 0 and self._slots.get(path) is slot:
                del self._slots[path]

    def __len__(self) -> int:
        return len(self._slots)


_QUEUE: trio.lowlevel.RunVar[FileMutationQueue] = trio.lowlevel.RunVar("prism_mutation_queue")


def default_mutation_queue() -> FileMutationQueue:
    """The queue shared by every write and edit tool in the current trio run.

    Each ``trio.run`` gets its own (trio locks belong to one run); call this
    from inside a run.

    Raises:
        RuntimeError: called outside a trio run.
    """
    try:
        return _QUEUE.get()
    except LookupError:
        queue = FileMutationQueue()
        _QUEUE.set(queue)
        return queue


async def run_checked_mutation(
    *,
    tool: str,
    queue: FileMutationQueue | None,
    policy: ExecutionPolicy | None,
    files: FileOperations,
    cwd: str,
    resolved: str,
    build_action: Callable[[str], ExecutionAction],
    body: Callable[[str], Awaitable[ToolResult]],
) -> ToolResult:
    """Check the policy and run ``body(target)`` inside ``target``'s critical section.

    The check happens under the lock, so nothing can change the file between
    the decision and the mutation. A policy that redirects the action to
    another path is honoured: that path is locked and checked in turn; a
    second redirect is refused. ``queue=None`` means the current run's
    :func:`default_mutation_queue`.
    """
    if queue is None:
        queue = default_mutation_queue()
    key = resolved
    for _ in range(2):
        async with queue.hold(key):
            checked = await policy_check(tool, policy, build_action(key))
            if isinstance(checked, ToolResult):
                return checked
            target = checked.paths[0] if checked.paths else key
            if target != key:
                try:
                    target = await files.resolve(target, cwd=cwd)
                except (OSError, PrismError, ValueError) as exc:
                    return ToolResult.error(f"{tool}: {target}: {exc}", path=target)
            if target == key:
                return await body(target)
        key = target
    return ToolResult.error(
        f"{tool}: the execution policy redirected {resolved} more than once; refused",
        path=resolved,
    )
