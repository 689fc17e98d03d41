"""What a record keeps of odd arguments, of arguments a tool mutates, and of decisions."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import pytest

from prism.core import (
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    ExecutionDeniedError,
    ToolCall,
    ToolDefinition,
    ToolResult,
    assert_execution_allowed,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import FinishedCall, RunLedger, ToolCallDecision, default_redactor

if TYPE_CHECKING:
    from prism.core import JsonObject, ToolExecutionContext, ToolHandler
    from prism.core.ledger import ToolCallRecord


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Ratio(float):
    pass


def test_the_default_redactor_says_what_it_is() -> None:
    assert repr(default_redactor()) == "default_redactor()"


def test_subclasses_of_json_scalars_are_recorded_as_plain_json() -> None:
    record = (
        RunLedger()
        .record_call(
            FinishedCall(
                call_id="c",
                tool_name="t",
                arguments={"colour": Colour.RED, "level": Level.HIGH, "ratio": Ratio(0.5)},
                status="ok",
                blocked_reason=None,
                started_at=1.0,
                finished_at=2.0,
                duration_s=1.0,
                result=None,
            )
        )
        .record()
    )
    assert record.arguments == {"colour": "red", "level": 3, "ratio": 0.5}
    assert isinstance(record.arguments, dict)
    assert [type(v) for v in record.arguments.values()] == [str, int, float]


async def _mutate(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    # A tool may change what it was given; the record must keep what it was asked.
    args["many"].append("late")  # type: ignore[union-attr]
    args["wide"]["late"] = 1  # type: ignore[index,call-overload]
    args["deep"][0][0] = "changed"  # type: ignore[index]
    return ToolResult.text("ok")


async def _record_of(
    execute: ToolHandler, arguments: JsonObject, ledger: RunLedger | None = None
) -> ToolCallRecord:
    """The one record a dispatched call to ``execute`` leaves."""
    ledger = RunLedger() if ledger is None else ledger
    registry = create_tool_registry([ToolDefinition(name="tool", execute=execute)])
    options = DispatchOptions(registry=registry, ledger=ledger)
    await dispatch_tool_call(ToolCall(id="c", name="tool", arguments=arguments), options)
    [record] = ledger.records
    return record


async def test_a_tool_that_mutates_big_arguments_cannot_change_its_record() -> None:
    arguments: JsonObject = {
        "many": [str(i) for i in range(250)],
        "wide": {f"k{i}": [i] for i in range(250)},
        "deep": [["original"]],
    }
    record = await _record_of(_mutate, arguments, RunLedger(redact=None))
    assert isinstance(record.arguments, dict)
    many = record.arguments["many"]
    assert isinstance(many, list)
    assert many[-1] == "[50 more items]"
    wide = record.arguments["wide"]
    assert isinstance(wide, dict)
    assert "late" not in wide
    assert wide["..."] == "[50 more keys]"
    assert record.arguments["deep"] == [["original"]]


def test_a_decision_label_names_every_fact_it_has() -> None:
    decision = ToolCallDecision(
        gate="execution_policy",
        allowed=True,
        policy="sandboxed",
        model="judge",
        sandbox="bwrap",
        confined=True,
        escalation=True,
    )
    assert decision.label == "sandboxed:allowed model=judge sandbox=bwrap confined escalation"


class _Policy:
    def __init__(self, *decisions: ExecutionDecision) -> None:
        self._decisions = list(decisions)

    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return self._decisions.pop(0)


async def test_a_denial_noted_first_is_what_the_record_keeps() -> None:
    denied = ExecutionDecision(
        allowed=False, reason="no", details={"policy": "p", "rule": 7, "model": ""}
    )
    allowed = ExecutionDecision(allowed=True, details={"policy": "p"})
    policy = _Policy(allowed, denied, allowed)
    action = ExecutionAction(kind="shell", operation="shell", command="ls")

    async def checks(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        await assert_execution_allowed(policy, action)
        with pytest.raises(ExecutionDeniedError):
            await assert_execution_allowed(policy, action)
        await assert_execution_allowed(policy, action)
        return ToolResult.text("done")

    record = await _record_of(checks, {})
    assert record.decision is not None
    assert (record.decision.allowed, record.decision.rule, record.decision.model) == (
        False,
        "7",
        None,
    )


async def test_a_denial_reported_only_by_an_error_result_without_a_reason_uses_the_error() -> None:
    async def denied(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        return ToolResult.error(
            "refused", execution_denied=True, error="ExecutionDeniedError: nope", reason=5
        )

    record = await _record_of(denied, {})
    assert record.decision is not None
    assert record.decision.reason == "ExecutionDeniedError: nope"
