"""Ledger records say why: the typed decision, its redaction, and schema versions."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs
import pytest

from prism.core import (
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    ExecutionPolicy,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolFilter,
    ToolResult,
    assert_execution_allowed,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import (
    FinishedCall,
    LedgerFormatError,
    RunLedger,
    ToolCallDecision,
    ToolCallRecord,
    read_ledger_text,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

REDACTED = "[REDACTED]"


class _Policy:
    """An execution policy that answers with fixed details."""

    def __init__(self, allowed: bool, reason: str, details: Mapping[str, object]) -> None:
        self.decision = ExecutionDecision(allowed=allowed, reason=reason, details=dict(details))

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return self.decision


def _shell_tool(policy: ExecutionPolicy) -> ToolDefinition:
    async def execute(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        action = ExecutionAction(kind="shell", operation="shell", command=str(args["cmd"]))
        await assert_execution_allowed(policy, action)
        return ToolResult.text("ran")

    return ToolDefinition(name="shell", execute=execute)


async def _dispatch(
    tool: ToolDefinition, ledger: RunLedger, arguments: JsonObject | None = None, **options: object
) -> ToolCallRecord:
    call = ToolCall(id="c1", name=tool.name, arguments=arguments or {"cmd": "ls"})
    dispatch = DispatchOptions(
        registry=create_tool_registry([tool]),
        ledger=ledger,
        **options,  # type: ignore[arg-type]
    )
    await dispatch_tool_call(call, dispatch)
    return ledger.records[-1]


async def _ok(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return ToolResult.text("fine")


async def test_an_execution_policy_denial_is_typed_not_just_text() -> None:
    policy = _Policy(
        False,
        "command 'rm -rf /': approval timed_out after 30s, so it is denied",
        {
            "policy": "coding_approval",
            "decision": "timed_out",
            "rule": "rm *",
            "approval": "timed_out",
            "needs_approval": True,
        },
    )
    record = await _dispatch(_shell_tool(policy), RunLedger())
    assert record.status == "error"
    assert record.decision is not None
    assert record.decision.gate == "execution_policy"
    assert not record.decision.allowed
    assert record.decision.policy == "coding_approval"
    assert record.decision.rule == "rm *"
    assert record.decision.approval == "timed_out"
    assert record.decision.timed_out
    assert record.decision.approval_asked
    assert record.decision.approval_needed


async def test_a_tool_error_has_no_policy_decision() -> None:
    async def boom(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        raise RuntimeError("disk on fire")

    record = await _dispatch(ToolDefinition(name="shell", execute=boom), RunLedger())
    assert record.status == "error"
    assert record.decision is None


async def test_an_approved_call_leaves_a_trace_of_its_approval() -> None:
    policy = _Policy(
        True,
        "command 'git push': approved",
        {
            "policy": "coding_approval",
            "decision": "approved",
            "rule": "git push *",
            "approval": "approved",
            "remembered": True,
            "needs_approval": True,
            "sandbox": "bubblewrap",
        },
    )
    record = await _dispatch(_shell_tool(policy), RunLedger())
    assert record.status == "ok"
    assert record.decision == ToolCallDecision(
        gate="execution_policy",
        allowed=True,
        policy="coding_approval",
        rule="git push *",
        reason="command 'git push': approved",
        approval_needed=True,
        approval_asked=True,
        approval="approved",
        remembered=True,
        sandbox="bubblewrap",
    )
    assert "approval=approved" in record.decision.label


async def test_a_cached_approval_is_remembered_but_not_asked() -> None:
    policy = _Policy(True, "approved earlier", {"approval": "cached", "decision": "approved"})
    record = await _dispatch(_shell_tool(policy), RunLedger())
    assert record.decision is not None
    assert record.decision.remembered
    assert not record.decision.approval_asked


async def test_a_confined_command_names_its_sandbox() -> None:
    policy = _Policy(True, "runs confined", {"sandbox": "landlock", "confined": True})
    record = await _dispatch(_shell_tool(policy), RunLedger())
    assert record.decision is not None
    assert (record.decision.sandbox, record.decision.confined) == ("landlock", True)


async def test_a_denial_after_an_allowance_is_what_the_record_keeps() -> None:
    allow = _Policy(True, "read ok", {"policy": "p"})
    deny = _Policy(False, "write refused", {"policy": "p", "rule": "no-writes"})

    async def two_actions(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        await assert_execution_allowed(allow, ExecutionAction(kind="read", operation="read"))
        await assert_execution_allowed(deny, ExecutionAction(kind="write", operation="write"))
        return ToolResult.text("unreachable")

    record = await _dispatch(ToolDefinition(name="t", execute=two_actions), RunLedger())
    assert record.decision is not None
    assert (record.decision.allowed, record.decision.rule) == (False, "no-writes")


async def test_a_denial_reported_only_in_the_result_is_read_from_its_details() -> None:
    async def denies(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.error(
            "shell: denied by the execution policy",
            execution_denied=True,
            reason="outside the roots",
            decision={"policy": "coding_approval", "approval": "unavailable"},
        )

    record = await _dispatch(ToolDefinition(name="shell", execute=denies), RunLedger())
    assert record.decision is not None
    assert record.decision.gate == "execution_policy"
    assert record.decision.reason == "outside the roots"
    assert record.decision.approval == "unavailable"
    assert not record.decision.approval_asked


@pytest.mark.parametrize(
    ("options", "arguments", "gate"),
    [
        ({"permission": create_rule_permission_policy(deny=["*"])}, None, "permission"),
        ({"filters": (ToolFilter(deny=("ok",)),)}, None, "filter"),
        ({}, {"cmd": float("nan")}, "arguments"),
        ({"validator": lambda tool, args, ctx: "no"}, None, "validator"),
    ],
)
async def test_a_blocked_call_names_the_gate_that_refused_it(
    options: dict[str, object], arguments: JsonObject | None, gate: str
) -> None:
    record = await _dispatch(
        ToolDefinition(name="ok", execute=_ok), RunLedger(), arguments, **options
    )
    assert record.status == "blocked"
    assert record.decision is not None
    assert (record.decision.gate, record.decision.allowed) == (gate, False)


async def test_an_unknown_tool_is_refused_by_the_registry() -> None:
    ledger = RunLedger()
    options = DispatchOptions(registry=create_tool_registry([]), ledger=ledger)
    await dispatch_tool_call(ToolCall(id="c", name="nope", arguments={}), options)
    (record,) = ledger.records
    assert record.decision is not None
    assert record.decision.gate == "registry"


async def test_a_plain_allowed_call_has_no_decision() -> None:
    record = await _dispatch(ToolDefinition(name="ok", execute=_ok), RunLedger())
    assert (record.status, record.decision) == ("ok", None)


# --- redaction -------------------------------------------------------------------------


async def test_decision_text_is_redacted_by_default() -> None:
    policy = _Policy(
        False,
        "command 'curl -H \"Authorization: Bearer abcdefghijklmnop\"' denied",
        {"rule": "curl password=hunter2secret"},
    )
    record = await _dispatch(_shell_tool(policy), RunLedger())
    assert record.decision is not None
    assert "abcdefghijklmnop" not in (record.decision.reason or "")
    assert "hunter2secret" not in (record.decision.rule or "")
    assert REDACTED in (record.decision.rule or "")


async def test_a_custom_redactor_sees_decision_text_and_non_strings_become_redacted() -> None:
    seen: list[object] = []

    def redact(value: object) -> object:
        seen.append(value)
        if isinstance(value, dict) and "reason" in value:
            return {**value, "reason": "hidden", "rule": 7}
        return value

    ledger = RunLedger(redact=redact)  # type: ignore[arg-type]
    policy = _Policy(False, "secret stuff", {"rule": "r", "policy": "p"})
    record = await _dispatch(_shell_tool(policy), ledger)
    assert record.decision is not None
    assert record.decision.reason == "hidden"
    assert record.decision.rule == REDACTED
    assert record.decision.policy == "p"


async def test_redaction_off_keeps_decision_text_but_bounds_it() -> None:
    policy = _Policy(False, "x" * 5000, {})
    record = await _dispatch(_shell_tool(policy), RunLedger(redact=None))
    assert record.decision is not None
    assert record.decision.reason is not None
    assert len(record.decision.reason) < 400


# --- schema versions -------------------------------------------------------------------


async def test_a_record_with_a_decision_round_trips_through_jsonl() -> None:
    policy = _Policy(False, "no", {"policy": "p", "approval": "denied", "escalation": True})
    ledger = RunLedger()
    await _dispatch(_shell_tool(policy), ledger)
    text = ledger.to_jsonl()
    assert json.loads(text)["schema_version"] == 2
    assert RunLedger.from_jsonl(text).records == ledger.records


async def test_an_escalation_records_its_access_and_approver_redacted_and_round_trips() -> None:
    details = {
        "policy": "coding_approval",
        "approval": "approved",
        "escalation": True,
        "access": "write the protected file .envrc and connect to a.example:443",
        "approver_reason": "approved by token:abc123",
    }
    ledger = RunLedger()
    record = await _dispatch(_shell_tool(_Policy(True, "ok", details)), ledger)
    decision = record.decision
    assert decision is not None
    assert decision.access == details["access"]
    assert decision.approver is not None
    assert "abc123" not in decision.approver  # the default redactor sees it
    assert RunLedger.from_jsonl(ledger.to_jsonl()).records == ledger.records


def test_decisions_are_written_without_their_defaults() -> None:
    ledger = RunLedger()
    ledger.record_call(
        FinishedCall(
            call_id="c",
            tool_name="t",
            arguments={},
            status="blocked",
            blocked_reason="permission_denied",
            started_at=1.0,
            finished_at=1.0,
            duration_s=0.0,
            result=None,
            decision=ToolCallDecision(gate="permission", allowed=False),
        )
    ).record()
    line = json.loads(ledger.to_jsonl())
    assert line["decision"] == {"gate": "permission", "allowed": False}


def _v1_line(**extra: object) -> str:
    return json.dumps(
        {
            "type": "tool_call",
            "schema_version": 1,
            "call_id": "old",
            "tool_name": "t",
            "arguments": {},
            "status": "error",
            "blocked_reason": None,
            "started_at": 1.0,
            "finished_at": 2.0,
            "duration_s": 1.0,
            "result_preview": "tool t was denied",
            **extra,
        }
    )


def test_a_version_1_ledger_is_still_readable() -> None:
    (record,) = RunLedger.from_jsonl(_v1_line() + "\n").records
    assert (record.call_id, record.decision, record.run_id) == ("old", None, None)
    assert read_ledger_text(_v1_line() + "\n").records == (record,)


def test_a_version_1_line_cannot_carry_version_2_fields() -> None:
    with pytest.raises(LedgerFormatError, match="schema_version 1"):
        RunLedger.from_jsonl(_v1_line(decision=None))


@pytest.mark.parametrize(
    "decision",
    [
        {"gate": "somewhere", "allowed": False},
        {"gate": "permission", "allowed": "no"},
        {"gate": "permission", "allowed": False, "approval": "maybe"},
        {"gate": "permission", "allowed": False, "colour": "red"},
        {"allowed": False},
    ],
)
def test_a_bad_decision_is_refused_with_the_line_number(decision: object) -> None:
    line = json.loads(_v1_line())
    line.update(schema_version=2, decision=decision, run_id="r")
    with pytest.raises(LedgerFormatError, match="line 1"):
        RunLedger.from_jsonl(json.dumps(line))


async def test_a_path_escape_is_refused_by_containment() -> None:
    async def escapes(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.error("read: ../x: outside the roots", error="PathEscapeError")

    record = await _dispatch(ToolDefinition(name="read", execute=escapes), RunLedger())
    assert record.decision is not None
    assert (record.decision.gate, record.decision.allowed) == ("containment", False)
    assert record.decision.label == "containment:denied"


@pytest.mark.parametrize(
    "decision",
    [
        None,
        ToolCallDecision(gate="permission", allowed=False, reason="no"),
        ToolCallDecision(
            gate="execution_policy",
            allowed=True,
            policy="p",
            rule="r",
            model="m",
            reason="why",
            approval_needed=True,
            approval_asked=True,
            approval="approved",
            remembered=True,
            sandbox="bwrap",
            confined=True,
            escalation=True,
        ),
    ],
)
def test_a_line_holds_every_field_and_the_decision_compactly(
    decision: ToolCallDecision | None,
) -> None:
    ledger = RunLedger()
    record = ledger.record_call(
        FinishedCall(
            call_id="c",
            tool_name="t",
            arguments={"a": [1, 2.5, None]},
            status="error",
            blocked_reason=None,
            started_at=1.25,
            finished_at=2.5,
            duration_s=1.25,
            result=ToolResult.text("x"),
            decision=decision,
        )
    ).record()
    text = ledger.to_jsonl()
    line = json.loads(text)
    assert list(line) == [
        "type",
        "schema_version",
        "call_id",
        "tool_name",
        "arguments",
        "status",
        "blocked_reason",
        "started_at",
        "finished_at",
        "duration_s",
        "result_preview",
        "decision",
        "run_id",
    ]
    if decision is None:
        assert line["decision"] is None
    else:
        # Fields at their defaults are left out.
        defaults = ToolCallDecision(gate=decision.gate, allowed=decision.allowed)
        written = {
            name: value
            for name, value in attrs.asdict(decision).items()
            if value != getattr(defaults, name) or name in ("gate", "allowed")
        }
        assert line["decision"] == written
    assert RunLedger.from_jsonl(text).records == [record]
