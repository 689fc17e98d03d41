"""How a call ends: one outcome value, and one place that reports it.

Every path that ends a call (dispatched, refused by a gate, refused before
dispatch, cancelled mid-call, never started) builds a :class:`CallOutcome` and
hands it to :func:`settle`, which emits the call's terminal event and writes
its ledger record. The results of cancelled calls are built here too.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, NamedTuple

from ._content import ToolCall, ToolResult
from ._events import (
    BlockedReason,
    EventSink,
    ToolExecutionBlocked,
    ToolExecutionError,
    ToolExecutionFinished,
    build_finished,
    emit_event,
)
from ._ledger_decision import ToolCallDecision, blocked_decision, decision_from_result
from ._ledger_records import FinishedCall

if TYPE_CHECKING:
    from ._json import JsonObject
    from ._ledger_records import LedgerRecorder, ToolCallStatus

__all__ = [
    "CallOutcome",
    "cancelled_result",
    "not_started_result",
    "refuse",
    "settle",
    "settle_not_started",
]

_log = logging.getLogger("prism.core")


class CallOutcome(NamedTuple):
    """How one call ended, as its event and ledger record will tell it.

    A named tuple: frozen, typed, and about half the cost of an attrs value to
    build, which every dispatched call does once (positionally, on that path).

    Attributes:
        call: the call as it ended (after any middleware rewrite).
        result: its result; ``None`` when the caller's scope was cancelled
            before one was made.
        status: the ledger status.
        blocked_reason: which gate refused it, for ``blocked``.
        error: the error text: the refusal for ``blocked``, what the tool
            raised for ``error``, why it was cancelled for ``cancelled``;
            ``None`` for a result that ``execute`` returned.
        arguments: the ledger's own copy of the arguments, taken before
            ``execute`` ran; nothing else holds it (``None``: record
            ``call.arguments``).
        decision: what ruled on the call, if anything did.
        definition_hash: the definition the call ran against.
    """

    call: ToolCall
    result: ToolResult | None
    status: ToolCallStatus
    blocked_reason: BlockedReason | None = None
    error: str | None = None
    arguments: JsonObject | None = None
    decision: ToolCallDecision | None = None
    definition_hash: str | None = None


def settle(
    events: EventSink | None,
    ledger: LedgerRecorder | None,
    outcome: CallOutcome,
    started_at: float,
    duration_s: float,
) -> None:
    """Emit ``outcome``'s terminal event and write its ledger record; never raises."""
    call = outcome.call
    status = outcome.status
    if events is not None:
        event: ToolExecutionBlocked | ToolExecutionFinished | ToolExecutionError
        if status == "blocked":
            event = ToolExecutionBlocked(
                call_id=call.id,
                tool_name=call.name,
                reason=outcome.blocked_reason or "tool_denied",
                message=outcome.error or "",
            )
        elif outcome.error is None and outcome.result is not None:
            event = build_finished(call.id, call.name, outcome.result, duration_s, time.time())
        else:
            event = ToolExecutionError(
                call_id=call.id,
                tool_name=call.name,
                error=outcome.error or "",
                duration_s=duration_s,
                cancelled=status == "cancelled",
            )
        emit_event(events, event)
    if ledger is None:
        return
    try:
        decision = outcome.decision
        result = outcome.result
        if result is not None and result.is_error and (decision is None or decision.allowed):
            # A tool may report a policy's denial only in its (error) result.
            decision = decision_from_result(result) or decision
        arguments = outcome.arguments
        ledger.record_call(
            FinishedCall(
                call.id,
                call.name,
                call.arguments if arguments is None else arguments,
                status,
                outcome.blocked_reason,
                started_at,
                started_at + duration_s,
                duration_s,
                result,
                decision,
                outcome.definition_hash,
                # The dispatcher's own snapshot: nothing else holds it, so a
                # RunLedger may keep it and redact it when the record is read.
                arguments is not None,
            )
        )
    except Exception:
        # A host's redactor or recorder must not turn a finished call into an
        # exception (or replace a propagating Cancelled).
        _log.exception("the ledger failed to record call %r", call.id)


def cancelled_result(call: ToolCall, reason: str | None) -> ToolResult:
    """The result a call gets when a run is aborted before it finished."""
    why = f": {reason}" if reason else ""
    return ToolResult.error(f"tool call {call.name} was cancelled{why}", cancelled=True)


def not_started_result(call: ToolCall, reason: str | None) -> ToolResult:
    """The result of a call that was never started because the run was aborted."""
    why = f": {reason}" if reason else ""
    return ToolResult.error(
        f"tool call {call.name} was cancelled before it started{why}",
        cancelled=True,
        started=False,
    )


def settle_not_started(
    events: EventSink | None, ledger: LedgerRecorder | None, call: ToolCall, reason: str | None
) -> ToolResult:
    """End a call that never started: its result, its event and its ``cancelled`` record."""
    result = not_started_result(call, reason)
    outcome = CallOutcome(call=call, result=result, status="cancelled", error=result.joined_text)
    settle(events, ledger, outcome, time.time(), 0.0)
    return result


def refuse(
    events: EventSink | None,
    ledger: LedgerRecorder | None,
    call: ToolCall,
    reason: BlockedReason,
    message: str,
) -> ToolResult:
    """Refuse ``call`` without dispatching it: one blocked event, one ``blocked`` record."""
    result = ToolResult.error(message, blocked_reason=reason)
    outcome = CallOutcome(
        call=call,
        result=result,
        status="blocked",
        blocked_reason=reason,
        error=message,
        decision=blocked_decision(reason, message),
    )
    settle(events, ledger, outcome, time.time(), 0.0)
    return result
