"""Running trio from synchronous command code."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

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


def run_trio(fn: Callable[[], Awaitable[_T]]) -> _T:
    """``trio.run(fn)``; a group holding one error (from a nursery) is raised as that error."""
    try:
        return trio.run(fn)
    except BaseExceptionGroup as group:
        leaf = only_leaf(group)
        if leaf is None:
            raise
        raise leaf from group
