"""What every adapter's tests share: Prism's gates over a few asyncio tools.

The gates are real: a rule permission policy (``secret`` is denied), a
validator (``add`` refuses negative numbers), an execution policy asked
through an asyncio approver (``deploy``: the application's "UI" task answers
from an ``asyncio.Queue``), a ledger. The tools are the application's own
asyncio code.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import attrs

from prism.core import (
    DispatchOptions,
    ErrorInfo,
    ExecutionAction,
    ExecutionDecision,
    ToolDefinition,
    ToolResult,
    assert_execution_allowed,
    create_rule_permission_policy,
    create_tool_registry,
)

if TYPE_CHECKING:
    from prism.core import JsonObject, ToolExecutionContext
    from prism.core.ledger import RunLedger

ADD_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


async def add(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    await asyncio.sleep(0)  # asyncio code: the host runs it on its loop
    a, b = args["a"], args["b"]
    assert isinstance(a, int)
    assert isinstance(b, int)
    return ToolResult.text(str(a + b))


async def secret(_args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
    raise AssertionError("a denied tool never runs")


def no_negatives(
    tool: ToolDefinition, arguments: JsonObject, _ctx: ToolExecutionContext
) -> ErrorInfo | None:
    """The validation gate: numbers must not be negative."""
    for key, value in arguments.items():
        if isinstance(value, int) and value < 0:
            return ErrorInfo(message=f"{tool.name}: {key} must not be negative")
    return None


@attrs.define(eq=False)
class Approvals:
    """An asyncio approver: each question goes to a queue that another task answers."""

    answers: dict[str, bool]
    asked: list[str] = attrs.field(factory=list)
    queue: asyncio.Queue[tuple[str, asyncio.Future[bool]]] | None = None

    async def check(self, action: ExecutionAction) -> ExecutionDecision:
        assert self.queue is not None
        reply: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        await self.queue.put((action.operation, reply))
        allowed = await reply
        return ExecutionDecision(
            allowed=allowed, reason="the operator approved" if allowed else "the operator said no"
        )

    async def answer_forever(self) -> None:
        self.queue = asyncio.Queue()
        while True:
            operation, reply = await self.queue.get()
            self.asked.append(operation)
            reply.set_result(self.answers.get(operation, False))


def deploy_tool(approvals: Approvals) -> ToolDefinition:
    async def deploy(args: JsonObject, _ctx: ToolExecutionContext) -> ToolResult:
        action = ExecutionAction(kind="custom", operation=f"deploy {args.get('target')}")
        await assert_execution_allowed(approvals, action)
        return ToolResult.text(f"deployed {args.get('target')}")

    return ToolDefinition(
        name="deploy",
        execute=deploy,
        description="Deploy a target (asks the operator).",
        parameters={"type": "object", "properties": {"target": {"type": "string"}}},
    )


def gates(approvals: Approvals, ledger: RunLedger) -> DispatchOptions:
    """Prism's tools and gates for the adapters' tests."""
    return DispatchOptions(
        registry=create_tool_registry(
            [
                ToolDefinition(name="add", execute=add, description="Add.", parameters=ADD_SCHEMA),
                ToolDefinition(name="secret", execute=secret, description="Never allowed."),
                deploy_tool(approvals),
            ]
        ),
        permission=create_rule_permission_policy(
            allow=["tool:*:execute"], deny=["tool:secret:execute"]
        ),
        validator=no_negatives,
        ledger=ledger,
    )
