"""Whose loop runs a callback: trio, or the asyncio loop of the host Prism runs under.

Prism awaits code it was handed (a tool's ``execute``, a permission policy, an
approver, middleware, a validator, an MCP callback, a provider turn). Under
``trio.run`` all of it is trio code. Under an asyncio host (trio in guest mode
on an asyncio loop), the application's own async functions are asyncio code:
they await asyncio futures, httpx's ``AsyncClient``, asyncpg, an
``asyncio.Queue``. Such code cannot run in a trio task, so the host runs it as
a task of its asyncio loop and the trio side waits for that task.

The rule: under a host, an awaitable returned by a callback runs on the host's
asyncio loop unless the callback is marked :func:`trio_native`. Prism marks its
own trio callables; outside a host nothing changes.

This module imports no asyncio: the host registers its runner here (a trio
``RunVar`` of its run), so the dispatcher and the callers do not import it.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import types
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from ._errors import TrioRequiredError

_log = logging.getLogger("prism.core")

__all__ = [
    "await_callback",
    "is_trio_native",
    "set_loop_runner",
    "start_callback",
    "trio_native",
    "trio_side",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__prism_trio_native__"

# The runner of the asyncio host whose trio run this is: it awaits an awaitable
# as a task of the host's loop. Unset under a plain trio.run.
_loop_runner: trio.lowlevel.RunVar[Callable[[Awaitable[Any]], Awaitable[Any]] | None] = (
    trio.lowlevel.RunVar("prism.core.loop_runner", default=None)
)


def trio_native(fn: F) -> F:
    """Mark a callable as trio code, so that an asyncio host runs it on trio.

    Under :func:`open_asyncio_host`, whatever an unmarked callback returns to
    be awaited (a tool's ``execute``, an approver, a policy, middleware, an
    MCP ``elicit`` callback, ...) runs as a task of the host's asyncio loop;
    a marked one is awaited in the host's trio task, as under ``trio.run``.
    Mark a function, a method, or a class (every instance and bound method
    of it is then trio-native). Outside a host the mark changes nothing.

    Returns:
        ``fn`` itself, marked.
    """
    setattr(fn, _MARK, True)
    return fn


def is_trio_native(fn: object) -> bool:
    """Whether ``fn`` is marked :func:`trio_native`.

    The mark is found on the function, on a bound method's object or class,
    through :func:`functools.partial`, and on a callable object's class.
    """
    for _ in range(8):  # partials nest; a hostile chain is bounded
        if type(fn) is _METHOD:
            # Read on the method's function and object, not through the method
            # (whose failed lookup costs a microsecond): the same two places.
            return (
                getattr(fn.__func__, _MARK, False) is True
                or getattr(fn.__self__, _MARK, False) is True
            )
        if getattr(fn, _MARK, False) is True:
            return True
        owner = getattr(fn, "__self__", None)
        if owner is not None and getattr(owner, _MARK, False) is True:
            return True
        if isinstance(fn, functools.partial):
            fn = fn.func
            continue
        return False
    return False


_METHOD = types.MethodType


# How the host starts an asyncio callback nobody awaits (an async event sink).
_loop_starter: trio.lowlevel.RunVar[Callable[[Awaitable[Any]], None] | None] = trio.lowlevel.RunVar(
    "prism.core.loop_starter", default=None
)

# Inside a callback the host runs on its loop (asyncio code calling Prism, such
# as an asyncio tool asking assert_execution_allowed with Prism's own policy):
# how to await a trio-native awaitable from there, through the host.
trio_side: contextvars.ContextVar[Callable[[Awaitable[Any]], Awaitable[Any]] | None] = (
    contextvars.ContextVar("prism.core.trio_side", default=None)
)


def set_loop_runner(
    runner: Callable[[Awaitable[Any]], Awaitable[Any]],
    starter: Callable[[Awaitable[Any]], None],
) -> None:
    """Register the running host's asyncio runner and starter for this trio run (the host does)."""
    _loop_runner.set(runner)
    _loop_starter.set(starter)


def host_runner() -> Callable[[Awaitable[Any]], Awaitable[Any]] | None:
    """The runner of the asyncio host whose trio run this is; ``None`` under a plain ``trio.run``.

    Also ``None`` with no trio run on this thread.
    """
    try:
        return _loop_runner.get(None)
    except RuntimeError:
        return None


def start_callback(fn: object, awaitable: Awaitable[Any]) -> None:
    """Start what a synchronous callback (an event sink) returned to be awaited.

    Under an asyncio host, an unmarked callback's awaitable becomes a task of
    the host's loop. Anywhere else nothing can await it: it is closed, and the
    mistake is logged.
    """
    try:
        starter = _loop_starter.get(None)
    except RuntimeError:
        starter = None
    if starter is not None and not is_trio_native(fn):
        starter(awaitable)
        return
    if inspect.iscoroutine(awaitable):
        awaitable.close()  # never awaited, and it says so no more
    _log.error(
        "%r returned an awaitable: event sinks are synchronous (an async sink runs only "
        "under an asyncio host, as asyncio code)",
        fn,
    )


async def await_callback(fn: object, awaitable: Awaitable[T]) -> T:
    """Await what ``fn`` returned, on the loop its code belongs to.

    Under an asyncio host and unless ``fn`` is :func:`trio_native`, the
    awaitable runs as a task of the host's asyncio loop (in a copy of the
    current context variables), and this waits for it from trio: its result
    or exception (the same object) comes back; cancelling this trio task
    cancels the asyncio task and waits for it to end. Anywhere else the
    awaitable is awaited here, in trio. Called from asyncio code the host
    runs on its loop, an unmarked callback's awaitable is awaited right
    there, and a :func:`trio_native` one goes through the host to trio.

    Args:
        fn: the callable that returned ``awaitable`` (only its mark is read).
        awaitable: what it returned.

    Returns:
        What the awaitable returned.

    Raises:
        TrioRequiredError: ``fn`` is trio-native and this runs neither in trio
            nor in a callback of an asyncio host.
    """
    runner = host_runner()
    if runner is None:
        return await awaitable  # trio.run, or no trio at all: nothing to route
    if not trio.lowlevel.in_trio_task():
        # Asyncio code that the host runs on its loop called Prism, which
        # hands it another callback.
        if not is_trio_native(fn):
            return await awaitable
        to_trio = trio_side.get()
        if to_trio is None:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never awaited, and it says so no more
            raise TrioRequiredError(
                f"{fn!r} is trio code (marked trio_native), awaited on the host's loop "
                "outside any call of the host"
            )
        result: T = await to_trio(awaitable)
        return result
    if is_trio_native(fn):
        return await awaitable
    ran: T = await runner(awaitable)
    return ran
