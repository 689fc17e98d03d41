"""pydantic-ai agents with Prism's gates, driven by pydantic-ai's own FunctionModel (offline).

A multi-turn run asks for calls that are allowed, denied by permission, refused by
validation and asked through approval; the run goes on to its final answer, the
model sees each refusal as a failed tool result, and the ledger holds the run's
``run_id`` and each ``tool_call_id``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import pytest
from integrations_kit import Approvals, gates
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from prism.core import (
    MiddlewareRegistry,
    ToolCall,
    ToolResult,
    create_rule_permission_policy,
    open_asyncio_host,
)
from prism.core.ledger import RunLedger, ToolCallRecord
from prism.integrations import PrismGate
from prism.integrations.pydantic_ai import PrismGatedToolset, PrismToolset


def returns_of(messages: list[ModelMessage]) -> dict[str, tuple[str, str]]:
    """tool_call_id -> (kind, content) of every tool answer the model was shown."""
    seen: dict[str, tuple[str, str]] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    outcome = part.outcome
                    kind = {"success": "ok", "retried": "retry"}.get(outcome, "error")
                    seen[part.tool_call_id] = (kind, part.model_response_str())
                elif isinstance(part, RetryPromptPart) and part.tool_call_id:
                    seen[part.tool_call_id] = ("retry", part.model_response())
    return seen


def scripted(turns: list[list[ToolCallPart]]) -> FunctionModel:
    """A model that asks for each turn's calls, then answers with what it was told."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = sum(1 for m in messages if isinstance(m, ModelResponse))
        if asked < len(turns):
            return ModelResponse(parts=list(turns[asked]))
        # The final answer: every tool answer it was shown, as JSON.
        return ModelResponse(parts=[TextPart(json.dumps(returns_of(messages)))])

    return FunctionModel(respond)


def test_prism_toolset_allows_denies_refuses_and_asks() -> None:
    ledger = RunLedger()
    approvals = Approvals(answers={"deploy prod": False, "deploy staging": True})
    model = scripted(
        [
            [
                ToolCallPart("add", {"a": 2, "b": 3}, tool_call_id="c-add"),
                ToolCallPart("secret", {}, tool_call_id="c-secret"),
            ],
            [
                ToolCallPart("add", {"a": -1, "b": 3}, tool_call_id="c-invalid"),
                ToolCallPart("deploy", {"target": "staging"}, tool_call_id="c-yes"),
            ],
            [ToolCallPart("deploy", {"target": "prod"}, tool_call_id="c-no")],
        ]
    )

    async def main() -> tuple[str, str | None, list[ToolCallRecord]]:
        answering = asyncio.create_task(approvals.answer_forever())
        try:
            async with open_asyncio_host() as host:
                gate = PrismGate(host, gates(approvals, ledger))
                agent = Agent(model, toolsets=[PrismToolset(gate)])
                result = await agent.run("do the things")
                return result.output, result.run_id, gate.records(result.run_id)
        finally:
            answering.cancel()
            with pytest.raises(asyncio.CancelledError):
                await answering

    output, run_id, kept = asyncio.run(main())
    told = json.loads(output)
    assert told["c-add"] == ["ok", "5"]
    assert told["c-yes"] == ["ok", "deployed staging"]
    # Refusals reached the model as failed tool results, and the run went on.
    assert {cid: kind for cid, (kind, _) in told.items()} == {
        "c-add": "ok",
        "c-secret": "error",
        "c-invalid": "error",
        "c-yes": "ok",
        "c-no": "error",
    }
    assert "permission denied for tool:secret:execute" in told["c-secret"][1]
    assert "add: a must not be negative" in told["c-invalid"][1]
    assert "the operator said no" in told["c-no"][1]
    assert approvals.asked == ["deploy staging", "deploy prod"]
    # One framework run: its records carry pydantic-ai's run id and each call id.
    assert run_id is not None
    records = {r.call_id: r for r in kept}
    assert {cid: r.status for cid, r in records.items()} == {
        "c-add": "ok",
        "c-secret": "blocked",
        "c-invalid": "blocked",
        "c-yes": "ok",
        "c-no": "error",
    }
    assert records["c-secret"].blocked_reason == "permission_denied"
    assert records["c-invalid"].blocked_reason == "validation_failed"
    assert {r.run_id for r in records.values()} == {run_id}


def test_gated_toolset_wraps_an_existing_pydantic_ai_toolset() -> None:
    ledger = RunLedger()
    ran: list[str] = []
    toolset = FunctionToolset[Any]()

    @toolset.tool
    async def lookup(ctx: RunContext[Any], city: str) -> dict[str, object]:
        """Look a city up."""
        await asyncio.sleep(0)
        ran.append(city)
        return {"city": city, "population": 3}

    @toolset.tool_plain
    def flaky(n: int) -> str:
        """Asks the model to retry (pydantic-ai's own signal)."""
        raise ModelRetry("try a smaller n")

    @toolset.tool_plain
    def shutdown() -> str:
        """Never allowed."""
        raise AssertionError("denied")

    middleware = MiddlewareRegistry()

    @middleware.on_tool_call
    def capitalise(call: ToolCall, _ctx: object) -> ToolCall | None:
        args = call.arguments
        if call.name == "lookup" and isinstance(args, dict) and args.get("city") == "paris":
            return ToolCall(id=call.id, name=call.name, arguments={"city": "Paris"})
        return None

    model = scripted(
        [
            [
                ToolCallPart("lookup", {"city": "paris"}, tool_call_id="w-lookup"),
                ToolCallPart("shutdown", {}, tool_call_id="w-shutdown"),
                ToolCallPart("flaky", {"n": 5}, tool_call_id="w-flaky"),
            ],
            [ToolCallPart("flaky", {"n": -2}, tool_call_id="w-invalid")],
        ]
    )

    async def main() -> tuple[str, str | None, list[ToolCallRecord]]:
        async with open_asyncio_host() as host:
            options = attrs.evolve(
                gates(Approvals(answers={}), ledger),
                permission=create_rule_permission_policy(
                    allow=["tool:*:execute"], deny=["tool:shutdown:execute"]
                ),
                middleware=middleware,
            )
            gate = PrismGate(host, options)
            agent = Agent(model, toolsets=[PrismGatedToolset(toolset, gate=gate)])
            result = await agent.run("look around")
            return result.output, result.run_id, gate.records(result.run_id)

    output, run_id, kept = asyncio.run(main())
    assert run_id is not None
    # The middleware's rewrite reached the real tool, and its dict reached the model.
    assert ran == ["Paris"]
    told = json.loads(output)
    assert told["w-lookup"][0] == "ok"
    assert json.loads(told["w-lookup"][1]) == {"city": "Paris", "population": 3}
    assert told["w-shutdown"][0] == "error"
    assert "permission denied for tool:shutdown:execute" in told["w-shutdown"][1]
    # The wrapped tool's own ModelRetry reached pydantic-ai as a retry prompt.
    assert told["w-flaky"][0] == "retry"
    assert "try a smaller n" in told["w-flaky"][1]
    assert told["w-invalid"][0] == "error"
    assert "flaky: n must not be negative" in told["w-invalid"][1]
    records = {r.call_id: r for r in kept}
    assert {cid: r.status for cid, r in records.items()} == {
        "w-lookup": "ok",
        "w-shutdown": "blocked",
        "w-flaky": "error",
        "w-invalid": "blocked",
    }
    assert records["w-lookup"].arguments == {"city": "Paris"}


def test_cancelling_the_agent_run_cancels_a_gated_tool() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []
    toolset = FunctionToolset[Any]()

    @toolset.tool_plain
    async def wait_forever() -> str:
        """Blocks."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("tool")
            raise
        return "unreachable"

    ledger = RunLedger()
    model = scripted([[ToolCallPart("wait_forever", {}, tool_call_id="w-1")]])

    async def main() -> None:
        async with open_asyncio_host() as host:
            gate = PrismGate(host, gates(Approvals(answers={}), ledger))
            agent = Agent(model, toolsets=[PrismGatedToolset(toolset, gate=gate)])
            task = asyncio.create_task(agent.run("wait"))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            (record,) = gate.records()
            assert record.status == "cancelled"

    asyncio.run(main())
    assert cancelled == ["tool"]


def test_a_result_middleware_replacement_reaches_the_model_as_text() -> None:
    toolset = FunctionToolset[Any]()

    @toolset.tool_plain
    def greet() -> str:
        """Greets."""
        return "hello"

    middleware = MiddlewareRegistry()

    @middleware.on_tool_result
    def redact(_call: ToolCall, result: ToolResult, _ctx: object) -> ToolResult:
        return ToolResult.text(result.joined_text.replace("hello", "[redacted]"))

    model = scripted([[ToolCallPart("greet", {}, tool_call_id="g-1")]])

    async def main() -> str:
        async with open_asyncio_host() as host:
            options = attrs.evolve(gates(Approvals(answers={}), RunLedger()), middleware=middleware)
            gate = PrismGate(host, options)
            agent = Agent(model, toolsets=[PrismGatedToolset(toolset, gate=gate)])
            return (await agent.run("hi")).output

    assert json.loads(asyncio.run(main()))["g-1"] == ["ok", "[redacted]"]
