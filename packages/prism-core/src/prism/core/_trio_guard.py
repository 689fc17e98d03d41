"""The trio guard: Prism's async entry points refuse to run anywhere but in a trio task.

A module of its own, with no import of the asyncio host, so that the dispatcher
and the agent (which the host serves) can use it without an import cycle.
"""

from __future__ import annotations

import contextlib
import sys

import trio

from ._errors import TrioRequiredError

__all__ = ["require_trio"]

_HOW_TO = (
    "Prism runs on trio; from asyncio, open one host and go through it: "
    "`async with prism.core.open_asyncio_host() as host: await host.run(fn, *args)` "
    "(or host.dispatch_tool_call / host.run_agent / host.enter). See docs/agent-runtime.md, "
    "'asyncio hosts'."
)


def require_trio(what: str) -> None:
    """Raise a clear error unless the caller runs inside a trio task.

    Called first by Prism's async entry points, so that awaiting one on asyncio
    (or any other loop) fails at once with an error that says what to do,
    rather than with a trio-internal error further down.

    Args:
        what: the entry point, as the user would name it (for the message).

    Raises:
        TrioRequiredError: the current thread is not running a trio task.
    """
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        pass
    else:
        return
    library = "no async library"
    asyncio = sys.modules.get("asyncio")  # never imported here: only asked if loaded
    if asyncio is not None:
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            library = "asyncio"
    raise TrioRequiredError(f"{what} was awaited on {library}, not in a trio task. {_HOW_TO}")
