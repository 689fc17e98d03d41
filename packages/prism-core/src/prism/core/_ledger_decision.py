"""The typed decision a ledger record carries: which gate or policy decided, and how.

The dispatcher knows which gate refused a call. What an execution policy
decided (inside ``execute``) is noted by :func:`assert_execution_allowed` into
a per-call holder that the dispatcher installs in a context variable; a tool
that reports a denial only in its result (``details["execution_denied"]``) is
read from there instead. Policy details are read by well-known keys
(``policy``, ``decision``, ``rule``, ``approval``, ``remembered``,
``needs_approval``, ``sandbox``, ``confined``, ``escalation``, ``access``,
``approver_reason``, ``model``),
so no policy package is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Literal, TypeAlias, get_args

import attrs

if TYPE_CHECKING:
    from ._content import ToolResult
    from ._events import BlockedReason

__all__ = [
    "ApprovalAnswer",
    "DecisionGate",
    "ToolCallDecision",
    "decision_from_details",
]

DecisionGate: TypeAlias = Literal[
    "middleware",
    "registry",
    "filter",
    "arguments",
    "permission",
    "validator",
    "execution_policy",
    "containment",
]
"""The gate that decided a call: the five dispatch gates, the execution policy, or
path containment (a tool refused a path that resolves outside every root)."""

ApprovalAnswer: TypeAlias = Literal[
    "approved", "denied", "timed_out", "cached", "unavailable", "error"
]
"""What became of an approval: asked and approved, denied or timed out; remembered
from an earlier approval (``cached``); no approver configured (``unavailable``);
the approver failed (``error``)."""

_ANSWERS = frozenset(get_args(ApprovalAnswer))
_ASKED = frozenset({"approved", "denied", "timed_out", "error"})

_GATE_OF_REASON: dict[str, DecisionGate] = {
    "unknown_tool": "registry",
    "tool_denied": "middleware",
    "invalid_arguments": "arguments",
    "permission_denied": "permission",
    "validation_failed": "validator",
}


@attrs.frozen(kw_only=True)
class ToolCallDecision:
    """Why a call was allowed or refused, as the ledger records it.

    Attributes:
        gate: the gate that decided: a dispatch gate for a blocked call,
            ``execution_policy`` when the tool's execution policy ruled, or
            ``containment`` when a tool refused a path outside its roots.
        allowed: whether the gate let the call (or its action) through.
        policy: the policy's name, when it gave one (``coding_approval``).
        rule: the rule that decided, when the policy names one.
        model: the model that decided, for a policy that asks a model.
        reason: the gate's or policy's own words (redacted, bounded).
        approval_needed: the policy wanted a person's approval.
        approval_asked: an approver was actually asked.
        approval: what became of the approval, if one was needed.
        remembered: the approval was remembered for later identical actions.
        timed_out: the approver did not answer in time (the action was denied).
        sandbox: the sandbox backend the command ran under, if any.
        confined: the command was allowed because the sandbox confines it.
        escalation: the command needed more than the sandbox allows.
        access: for an escalation, the extra access it named, in words (what an
            approval grants that one call, or what the sandbox could not grant).
        approver: the approver's own words with its answer (``approved by the
            client ...``), when it gave some.
    """

    gate: DecisionGate
    allowed: bool
    policy: str | None = None
    rule: str | None = None
    model: str | None = None
    reason: str | None = None
    approval_needed: bool = False
    approval_asked: bool = False
    approval: ApprovalAnswer | None = None
    remembered: bool = False
    timed_out: bool = False
    sandbox: str | None = None
    confined: bool = False
    escalation: bool = False
    access: str | None = None
    approver: str | None = None

    @property
    def label(self) -> str:
        """A short account for tables: ``execution_policy:denied rule=... approval=timed_out``."""
        verdict = "allowed" if self.allowed else "denied"
        if self.approval == "approved" or (self.approval == "cached" and self.allowed):
            verdict = "approved"
        parts = [f"{self.policy or self.gate}:{verdict}"]
        if self.rule:
            parts.append(f"rule={self.rule}")
        if self.model:
            parts.append(f"model={self.model}")
        if self.approval is not None:
            parts.append(f"approval={self.approval}")
        if self.remembered:
            parts.append("remembered")
        if self.sandbox:
            parts.append(f"sandbox={self.sandbox}")
        if self.confined:
            parts.append("confined")
        if self.escalation:
            parts.append("escalation")
        return " ".join(parts)


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    return str(value)


def decision_from_details(
    allowed: bool, reason: str | None, details: Mapping[str, object]
) -> ToolCallDecision:
    """Map an execution policy's decision (its ``details``) to a :class:`ToolCallDecision`.

    Unknown keys are ignored; values of the wrong type are shown as text or
    dropped, never trusted.
    """
    approval_value = details.get("approval")
    approval: ApprovalAnswer | None = (
        approval_value  # type: ignore[assignment]
        if isinstance(approval_value, str) and approval_value in _ANSWERS
        else None
    )
    verdict = details.get("decision")
    timed_out = approval == "timed_out" or verdict == "timed_out"
    sandbox = details.get("sandbox")
    return ToolCallDecision(
        gate="execution_policy",
        allowed=allowed,
        policy=_text(details.get("policy")),
        rule=_text(details.get("rule")),
        model=_text(details.get("model")),
        reason=reason,
        approval_needed=details.get("needs_approval") is True or approval is not None,
        approval_asked=approval in _ASKED,
        approval=approval,
        remembered=details.get("remembered") is True or approval == "cached",
        timed_out=timed_out,
        sandbox=_text(sandbox) if sandbox else None,
        confined=details.get("confined") is True,
        escalation=details.get("escalation") is True,
        access=_text(details.get("access")),
        approver=_text(details.get("approver_reason")),
    )


def blocked_decision(
    reason: BlockedReason, message: str, gate: DecisionGate | None = None
) -> ToolCallDecision:
    """The decision of a dispatch gate that refused a call."""
    return ToolCallDecision(
        gate=gate or _GATE_OF_REASON.get(reason, "middleware"), allowed=False, reason=message
    )


def decision_from_result(result: ToolResult | None) -> ToolCallDecision | None:
    """The execution-policy denial a result reports in its details, if it reports one."""
    if result is None or not result.is_error:
        return None
    details = result.details
    if not details:
        return None
    if details.get("error") == "PathEscapeError":
        # Coding tools refuse a path outside the roots when they open it.
        return ToolCallDecision(
            gate="containment", allowed=False, reason=result.joined_text or None
        )
    if details.get("execution_denied") is not True:
        return None
    nested = details.get("decision")
    facts: Mapping[str, object] = nested if isinstance(nested, Mapping) else details
    reason = details.get("reason")
    if not isinstance(reason, str):
        reason = _text(details.get("error"))
    return decision_from_details(False, reason, facts)


class DecisionNote:
    """Holds the execution-policy decision noted during one dispatched call."""

    __slots__ = ("decision",)

    def __init__(self) -> None:
        self.decision: ToolCallDecision | None = None


current_note: ContextVar[DecisionNote | None] = ContextVar("prism_decision_note", default=None)


def note_execution_decision(
    allowed: bool, reason: str | None, details: Mapping[str, object]
) -> None:
    """Remember an execution policy's decision for the call being dispatched, if any.

    A denial is kept over later allowances (it is what decided the call).
    """
    note = current_note.get()
    if note is None:
        return
    previous = note.decision
    if previous is not None and not previous.allowed and allowed:
        return
    note.decision = decision_from_details(allowed, reason, details)
