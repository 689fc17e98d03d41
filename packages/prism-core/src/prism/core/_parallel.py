"""Bounded parallel dispatch of one turn's tool calls, results kept in call order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import trio

from ._content import ToolCall, ToolResult
from ._dispatch import DispatchOptions, dispatch_tool_call
from ._options import integer, optional
from ._outcome import cancelled_result, settle_not_started
from ._trio_guard import require_trio

if TYPE_CHECKING:
    from ._tools import ToolRegistry

__all__ = [
    "ResultCallback",
    "dispatch_tool_calls_in_order",
    "resolve_tool_concurrency",
]

ResultCallback = Callable[[int, ToolCall, ToolResult], None]
"""``on_result(index, call, result)``: called in call order as results become final."""


_CONCURRENCY = integer(minimum=1)


def _has_exclusive(calls: Sequence[ToolCall], registry: ToolRegistry) -> bool:
    for call in calls:
        tool = registry.get(call.name)
        if tool is not None and tool.exclusive:
            return True
    return False


def resolve_tool_concurrency(
    requested: int | None, calls: Sequence[ToolCall], registry: ToolRegistry
) -> int:
    """How many of ``calls`` may run at once.

    1 when any call names an ``exclusive`` tool of ``registry``; otherwise
    ``min(requested or 1, len(calls))`` (and at least 1, so an empty turn gives 1).

    Raises:
        ConfigurationError: ``requested`` is 0, negative, or not an integer
            (``None`` means 1).
    """
    wanted = optional(_CONCURRENCY).check("resolve_tool_concurrency", "requested", requested) or 1
    if _has_exclusive(calls, registry):
        return 1
    return max(1, min(wanted, len(calls)))


class _Turn:
    """The shared state of one ``dispatch_tool_calls_in_order`` call."""

    __slots__ = ("calls", "claimed", "emitted", "error", "on_result", "options", "scope", "slots")

    def __init__(
        self,
        calls: Sequence[ToolCall],
        options: DispatchOptions,
        on_result: ResultCallback | None,
    ) -> None:
        self.calls = calls
        self.options = options
        self.on_result = on_result
        self.slots: list[ToolResult | None] = [None] * len(calls)
        self.claimed = 0
        self.emitted = 0
        self.error: Exception | None = None
        self.scope: trio.CancelScope | None = None

    def fill(self, index: int, result: ToolResult) -> None:
        self.slots[index] = result
        while self.emitted < len(self.slots):
            ready = self.slots[self.emitted]
            if ready is None:
                return
            done = self.emitted
            self.emitted += 1
            if self.on_result is not None:
                try:
                    self.on_result(done, self.calls[done], ready)
                except Exception as exc:
                    # A broken callback ends the turn; it is re-raised as it is
                    # (not wrapped in an exception group) once the nursery is closed.
                    self.error = exc
                    self.on_result = None
                    if self.scope is not None:
                        self.scope.cancel()

    async def worker(self) -> None:
        calls = self.calls
        options = self.options
        signal = options.signal
        total = len(calls)
        while self.claimed < total:
            if (signal is not None and signal.aborted) or self.error is not None:
                return
            # A cancelled turn must not start another call, not even the sync
            # part of a hook or a tool that runs before its first checkpoint.
            await trio.lowlevel.checkpoint_if_cancelled()
            index = self.claimed
            self.claimed = index + 1
            call = calls[index]
            # dispatch_tool_call's own abort scope covers the gates and execute, and
            # turns an abort into a cancellation result for this slot.
            self.fill(index, await dispatch_tool_call(call, options))


async def dispatch_tool_calls_in_order(
    calls: Sequence[ToolCall],
    options: DispatchOptions,
    *,
    concurrency: int = 1,
    on_result: ResultCallback | None = None,
) -> list[ToolResult]:
    """Dispatch ``calls`` with at most ``concurrency`` in flight; results in call order.

    Each call goes through :func:`dispatch_tool_call` (every gate, event and
    ledger record). A fixed pool of ``min(concurrency, len(calls))`` workers in
    one nursery claims calls by index, so the bound is enforced, not advisory;
    a turn naming an ``exclusive`` tool runs one call at a time whatever
    ``concurrency`` says. A failing, raising or blocked call fills its own slot
    with its error result and never disturbs its siblings. Events fire in
    completion order; ``on_result(index, call, result)`` fires in call order,
    each as soon as that call and every earlier one are done.

    Abort (``options.signal``): calls in flight are cancelled (they see
    :class:`trio.Cancelled` and ``ctx.signal.aborted``) and get a cancellation
    result; calls not yet started never start (no hook, gate or tool sees them)
    and get a ``cancelled before it started`` result, a
    :class:`ToolExecutionError` event with ``cancelled=True`` and a
    ``cancelled`` ledger record with zero duration. So every slot gets a result
    and the ledger covers every call.

    Cancellation of the caller's scope (not the signal) propagates as
    :class:`trio.Cancelled` after the same bookkeeping: calls in flight and calls
    never started still get their ``cancelled`` events and records. No task
    outlives this function. Always checkpoints.

    Args:
        calls: the turn's calls, in the order the provider gave them.
        options: how each call is dispatched.
        concurrency: the most calls in flight at once (an integer >= 1).
        on_result: called synchronously in call order. If it raises, the turn
            is cancelled (with the same bookkeeping as a caller cancellation)
            and that exception propagates as it is.

    Returns:
        One result per call, in call order.

    Raises:
        ConfigurationError: ``concurrency`` is not an integer >= 1.
        TypeError: an item of ``calls`` is not a :class:`ToolCall`.
        TrioRequiredError: awaited outside a trio task (from asyncio, go
            through :func:`open_asyncio_host`).
    """
    limit = _CONCURRENCY.check("dispatch_tool_calls_in_order", "concurrency", concurrency)
    calls = tuple(calls)
    for call in calls:
        if not isinstance(call, ToolCall):
            raise TypeError(
                f"dispatch_tool_calls_in_order takes ToolCall values, got {type(call).__name__}"
            )
    require_trio("dispatch_tool_calls_in_order()")
    if _has_exclusive(calls, options.registry):
        limit = 1
    turn = _Turn(calls, options, on_result)
    signal = options.signal
    try:
        if calls:
            workers = min(limit, len(calls))
            async with trio.open_nursery() as nursery:
                turn.scope = nursery.cancel_scope
                for _ in range(workers - 1):
                    nursery.start_soon(turn.worker)
                await turn.worker()
        else:
            await trio.lowlevel.checkpoint()
    finally:
        # Whatever ended the turn (abort, caller cancellation, an on_result
        # error), calls that were never claimed still get a result and a record.
        reason = signal.reason if signal is not None else None
        for index in range(turn.claimed, len(calls)):
            result = settle_not_started(options.on_event, options.ledger, calls[index], reason)
            turn.claimed = index + 1
            turn.slots[index] = result
    if turn.error is not None:
        raise turn.error
    results = [
        slot if slot is not None else cancelled_result(calls[index], reason)
        for index, slot in enumerate(turn.slots)
    ]
    if on_result is not None:
        for index in range(turn.emitted, len(calls)):
            on_result(index, calls[index], results[index])
    return results
