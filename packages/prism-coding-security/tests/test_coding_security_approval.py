"""Approval: awaited with a timeout, cached per exact action, cancellable."""

from __future__ import annotations

import inspect
import math
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing

from prism.coding.security import ApprovalDecision, CommandRules, create_coding_approval_policy
from prism.core import (
    ConfigurationError,
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    ExecutionDeniedError,
    ExecutionPolicy,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    assert_execution_allowed,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger

if TYPE_CHECKING:
    from pathlib import Path


def needs_approval(root: Path, command: str = "make && make install") -> ExecutionAction:
    return ExecutionAction(kind="shell", operation="shell", command=command, paths=(str(root),))


async def decide(policy: ExecutionPolicy, action: ExecutionAction) -> ExecutionDecision:
    result = policy.check(action)
    if inspect.isawaitable(result):
        return await result
    return result


class Approver:
    def __init__(self, answer: bool | ApprovalDecision = True) -> None:
        self.answer = answer
        self.calls: list[ExecutionAction] = []

    async def __call__(self, action: ExecutionAction) -> bool | ApprovalDecision:
        self.calls.append(action)
        await trio.lowlevel.checkpoint()
        return self.answer


async def test_approved_action_is_allowed_and_recorded(root: Path) -> None:
    approver = Approver(True)
    policy = create_coding_approval_policy(roots=[str(root)], approve=approver)
    decision = await decide(policy, needs_approval(root))
    assert decision.allowed
    assert decision.details["approval"] == "approved"
    [asked] = approver.calls
    original = needs_approval(root)
    assert (asked.kind, asked.command, asked.paths) == (
        original.kind,
        original.command,
        original.paths,
    )
    assert isinstance(asked.metadata["approval_reason"], str)  # why it is asked


async def test_refusal_is_denied_with_the_approvers_reason(root: Path) -> None:
    approver = Approver(ApprovalDecision(approved=False, reason="not on a Friday"))
    policy = create_coding_approval_policy(roots=[str(root)], approve=approver)
    decision = await decide(policy, needs_approval(root))
    assert not decision.allowed
    assert decision.details["approval"] == "denied"
    assert "not on a Friday" in (decision.reason or "")


async def test_timeout_denies_and_is_recorded_as_timed_out(
    root: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def never(action: ExecutionAction) -> bool:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    policy = create_coding_approval_policy(roots=[str(root)], approve=never, approval_timeout_s=5)
    start = trio.current_time()
    decision = await decide(policy, needs_approval(root))
    assert trio.current_time() - start == pytest.approx(5)
    assert not decision.allowed
    assert decision.details["approval"] == "timed_out"
    assert decision.details["decision"] == "timed_out"
    assert "timed_out" in (decision.reason or "")


async def test_timeout_differs_from_a_denial(
    root: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def slow(action: ExecutionAction) -> bool:
        await trio.sleep(10)
        return True

    timed = create_coding_approval_policy(roots=[str(root)], approve=slow, approval_timeout_s=1)
    denied = create_coding_approval_policy(roots=[str(root)], approve=Approver(False))
    a = await decide(timed, needs_approval(root))
    b = await decide(denied, needs_approval(root))
    assert (a.details["approval"], b.details["approval"]) == ("timed_out", "denied")


async def test_timed_out_decision_reaches_the_tool_result_and_ledger(
    root: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def never(action: ExecutionAction) -> bool:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    policy = create_coding_approval_policy(roots=[str(root)], approve=never, approval_timeout_s=2)
    ran: list[str] = []

    async def run(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        await assert_execution_allowed(policy, needs_approval(root, str(args["command"])))
        ran.append("ran")
        return ToolResult.text("done")

    ledger = RunLedger()
    options = DispatchOptions(
        registry=create_tool_registry([ToolDefinition(name="shell", execute=run)]), ledger=ledger
    )
    call = ToolCall(id="1", name="shell", arguments={"command": "a; b"})
    result = await dispatch_tool_call(call, options)
    assert result.is_error
    assert ran == []
    assert result.details["approval"] == "timed_out"
    assert "timed_out" in result.joined_text
    assert "timed_out" in ledger.to_jsonl()


async def test_cancelling_the_caller_cancels_the_wait(root: Path) -> None:
    started = trio.Event()
    cancelled = trio.Event()

    async def waits(action: ExecutionAction) -> bool:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    policy = create_coding_approval_policy(roots=[str(root)], approve=waits)
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def check() -> None:
                await decide(policy, needs_approval(root))
                raise AssertionError("the check must not finish")

            nursery.start_soon(check)
            await started.wait()
            scope.cancel()
    assert cancelled.is_set()
    assert scope.cancelled_caught


async def test_approvals_are_cached_per_exact_action(root: Path) -> None:
    approver = Approver(True)
    policy = create_coding_approval_policy(roots=[str(root)], approve=approver)
    first = await decide(policy, needs_approval(root))
    second = policy.check(needs_approval(root))
    assert isinstance(second, ExecutionDecision), "a cached approval needs no await"
    assert first.allowed
    assert second.allowed
    assert second.details["approval"] == "cached"
    assert len(approver.calls) == 1
    other = await decide(policy, needs_approval(root, "make && make check"))
    assert other.allowed
    assert len(approver.calls) == 2


async def test_remember_false_opts_out_of_the_cache(root: Path) -> None:
    approver = Approver(ApprovalDecision(approved=True, remember=False))
    policy = create_coding_approval_policy(roots=[str(root)], approve=approver)
    await decide(policy, needs_approval(root))
    await decide(policy, needs_approval(root))
    assert len(approver.calls) == 2


async def test_cache_approvals_false_asks_every_time(root: Path) -> None:
    approver = Approver(True)
    policy = create_coding_approval_policy(
        roots=[str(root)], approve=approver, cache_approvals=False
    )
    await decide(policy, needs_approval(root))
    await decide(policy, needs_approval(root))
    assert len(approver.calls) == 2


async def test_denials_are_not_cached(root: Path) -> None:
    approver = Approver(False)
    policy = create_coding_approval_policy(roots=[str(root)], approve=approver)
    await decide(policy, needs_approval(root))
    await decide(policy, needs_approval(root))
    assert len(approver.calls) == 2


async def test_deny_rules_win_over_an_approval(root: Path) -> None:
    approver = Approver(True)
    policy = create_coding_approval_policy(
        roots=[str(root)], approve=approver, command_rules=CommandRules(deny=["make install"])
    )
    decision = await decide(policy, needs_approval(root))
    assert not decision.allowed
    assert approver.calls == []


async def test_an_approver_that_raises_denies(root: Path) -> None:
    async def broken(action: ExecutionAction) -> bool:
        raise RuntimeError("approval service down")

    policy = create_coding_approval_policy(roots=[str(root)], approve=broken)
    decision = await decide(policy, needs_approval(root))
    assert not decision.allowed
    assert decision.details["approval"] == "error"
    assert "approval service down" in (decision.reason or "")


async def test_an_approver_returning_garbage_denies(root: Path) -> None:
    async def odd(action: ExecutionAction) -> str:
        return "yes"

    policy = create_coding_approval_policy(roots=[str(root)], approve=odd)  # type: ignore[arg-type]
    decision = await decide(policy, needs_approval(root))
    assert not decision.allowed


def test_allow_rule_decision_is_synchronous(root: Path) -> None:
    approver = Approver(True)
    policy = create_coding_approval_policy(
        roots=[str(root)], approve=approver, command_rules=CommandRules(allow=["make *"])
    )
    decision = policy.check(needs_approval(root))
    assert isinstance(decision, ExecutionDecision)
    assert decision.allowed
    assert approver.calls == []


async def test_denied_action_never_runs_through_assert_execution_allowed(root: Path) -> None:
    policy = create_coding_approval_policy(roots=[str(root)])
    with pytest.raises(ExecutionDeniedError) as info:
        await assert_execution_allowed(policy, needs_approval(root))
    assert info.value.details["approval"] == "unavailable"


async def test_unknown_action_kinds_need_approval(root: Path) -> None:
    approver = Approver(True)
    policy = create_coding_approval_policy(roots=[str(root)], approve=approver)
    decision = await decide(policy, ExecutionAction(kind="network", operation="fetch"))
    assert decision.allowed
    assert len(approver.calls) == 1


@pytest.mark.parametrize(
    ("option", "value"),
    [("approval_timeout_s", 0), ("approval_timeout_s", -1), ("approval_timeout_s", math.inf),
     ("approval_timeout_s", math.nan), ("approval_timeout_s", True), ("approve", "yes"),
     ("command_rules", {"allow": []}), ("read_only", "no"), ("cache_approvals", None)],
)  # fmt: skip
def test_bad_options_raise_naming_the_option(root: Path, option: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=option):
        create_coding_approval_policy(roots=[str(root)], **{option: value})  # type: ignore[arg-type]
