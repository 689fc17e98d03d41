"""Events: what happened to each tool call, and to each agent turn and run.

Every event is a frozen value with a stable ``type`` string. Tool events carry
``call_id`` and ``tool_name`` (the registry name). A dispatched call emits
exactly one terminal event: :class:`ToolExecutionBlocked`,
:class:`ToolExecutionFinished` or :class:`ToolExecutionError`.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import ClassVar, Literal, TypeAlias

import attrs

from ._content import ToolResult
from ._fast import frozen_builder
from ._host_calls import start_callback
from ._json import JsonObject

BlockedReason: TypeAlias = Literal[
    "unknown_tool", "tool_denied", "invalid_arguments", "permission_denied", "validation_failed"
]
"""Which gate refused a call."""

__all__ = [
    "AgentEvent",
    "BlockedReason",
    "EventSink",
    "RunFinished",
    "ToolEvent",
    "ToolExecutionBlocked",
    "ToolExecutionError",
    "ToolExecutionFinished",
    "ToolExecutionProgress",
    "ToolExecutionStarted",
    "TurnFinished",
    "TurnStarted",
    "emit_event",
]

_log = logging.getLogger("prism.core")


@attrs.frozen(kw_only=True)
class ToolExecutionBlocked:
    """A gate stopped the call before ``execute``."""

    type: ClassVar[str] = "tool_execution_blocked"
    call_id: str
    tool_name: str
    reason: BlockedReason
    message: str
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class ToolExecutionStarted:
    """Every gate passed; ``execute`` is about to run."""

    type: ClassVar[str] = "tool_execution_started"
    call_id: str
    tool_name: str
    arguments: JsonObject
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class ToolExecutionProgress:
    """A running tool reported progress."""

    type: ClassVar[str] = "tool_execution_progress"
    call_id: str
    tool_name: str
    message: str | None
    progress: float | None
    total: float | None
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class ToolExecutionFinished:
    """``execute`` returned a result (which may itself be an error result)."""

    type: ClassVar[str] = "tool_execution_finished"
    call_id: str
    tool_name: str
    result: ToolResult
    duration_s: float
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class ToolExecutionError:
    """``execute`` raised, returned something that is not a result, or was cancelled."""

    type: ClassVar[str] = "tool_execution_error"
    call_id: str
    tool_name: str
    error: str
    duration_s: float
    cancelled: bool = False
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class TurnStarted:
    """The agent is about to ask the provider for turn ``turn`` (1-based)."""

    type: ClassVar[str] = "turn_started"
    turn: int
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class TurnFinished:
    """Turn ``turn`` is done: the provider answered and its tool calls have results."""

    type: ClassVar[str] = "turn_finished"
    turn: int
    tool_calls: int
    timestamp: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class RunFinished:
    """A run ended."""

    type: ClassVar[str] = "run_finished"
    rounds: int
    aborted: bool
    timestamp: float = attrs.field(factory=time.time)


ToolEvent: TypeAlias = (
    ToolExecutionBlocked
    | ToolExecutionStarted
    | ToolExecutionProgress
    | ToolExecutionFinished
    | ToolExecutionError
)
AgentEvent: TypeAlias = ToolEvent | TurnStarted | TurnFinished | RunFinished
EventSink: TypeAlias = Callable[[AgentEvent], "Awaitable[None] | None"]
"""Receives events, synchronously; under an asyncio host it may be an asyncio ``async def``."""


def emit_event(sink: EventSink, event: AgentEvent) -> None:
    """Deliver ``event``; a sink that raises is logged, never allowed to break a call.

    A sink is synchronous. Under an asyncio host, an ``async def`` sink (asyncio
    code) is started as a task of the host's loop instead, in event order; the
    host waits for those tasks when it closes.
    """
    try:
        outcome = sink(event)
    except Exception:
        _log.exception("an event sink raised on %s", type(event).__name__)
        return
    if outcome is not None and inspect.isawaitable(outcome):
        start_callback(sink, outcome)


# The two events of every call that ran (call_id, tool_name, arguments or
# result and duration, timestamp: positionally, in field order).
build_started = frozen_builder(ToolExecutionStarted)
build_finished = frozen_builder(ToolExecutionFinished)
