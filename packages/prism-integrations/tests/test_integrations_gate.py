"""The gate the adapters share, and the adapters' edges: ids, refusals, rewrites, misuse."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import attrs
import pytest
from integrations_kit import Approvals, gates
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from prism.core import (
    DispatchOptions,
    ToolCall,
    ToolResult,
    create_rule_permission_policy,
    create_tool_registry,
    open_asyncio_host,
)
from prism.core.ledger import FinishedCall, RunLedger
from prism.core.testing import RecordingLedgerSink
from prism.integrations import FrameworkOutcome, PrismGate
from prism.integrations._gate import result_text, wrapped_tool
from prism.integrations.pydantic_ai import PrismGatedToolset, PrismToolset


def test_each_framework_run_gets_a_ledger_of_its_own_and_old_runs_leave_memory() -> None:
    sink = RecordingLedgerSink()
    template = RunLedger(sinks=[sink])

    async def main() -> PrismGate:
        async with open_asyncio_host() as host:
            gate = PrismGate(host, gates(Approvals(answers={}), template), keep_runs=2)
            for run in ("r1", "r2", "r3"):
                for i in range(2):
                    result = await gate.call(
                        run_id=run, call_id=f"{run}-{i}", name="add", arguments={"a": i, "b": 1}
                    )
                    assert result.joined_text == str(i + 1)
            # No run id: the template ledger itself records the call.
            await gate.call(run_id=None, call_id="plain", name="add", arguments={"a": 0, "b": 0})
            return gate

    gate = asyncio.run(main())
    assert gate.run_ids() == ["r2", "r3"]  # r1 left memory ...
    assert gate.records("r1") == []
    assert [r.call_id for r in gate.records()] == ["r2-0", "r2-1", "r3-0", "r3-1"]
    # ... but every record reached the template's sinks, each with its run's id.
    written = [(e.call_id, e.run_id) for e in sink.entries if hasattr(e, "call_id")]
    assert ("r1-0", "r1") in written
    assert ("plain", template.run_id) in written
    assert [r.call_id for r in template.records] == ["plain"]


def test_a_recorder_that_is_not_a_run_ledger_is_used_as_it_is() -> None:
    recorded: list[str] = []

    class Recorder:
        def record_call(self, call: FinishedCall, /) -> None:
            recorded.append(call.call_id)

    async def main() -> None:
        async with open_asyncio_host() as host:
            options = attrs.evolve(gates(Approvals(answers={}), RunLedger()), ledger=Recorder())
            gate = PrismGate(host, options)
            await gate.call(run_id="r", call_id="c-1", name="add", arguments={"a": 1, "b": 1})
            assert gate.records() == []

    asyncio.run(main())
    assert recorded == ["c-1"]


def test_a_wrapped_tool_dispatched_outside_its_framework_refuses() -> None:
    options = DispatchOptions(registry=create_tool_registry([wrapped_tool("orphan", None, None)]))

    async def main() -> ToolResult:
        async with open_asyncio_host() as host:
            return await host.dispatch_tool_call(
                ToolCall(id="1", name="orphan", arguments={}), options
            )

    result = asyncio.run(main())
    assert result.is_error
    assert "only inside its framework" in result.joined_text


def test_result_text_falls_back_to_the_structured_result() -> None:
    assert result_text(ToolResult(structured={"b": 1, "a": 2})) == '{"a": 2, "b": 1}'
    assert result_text(ToolResult.text("plain")) == "plain"
    assert FrameworkOutcome().ran is False


def test_the_gate_and_the_toolsets_refuse_what_is_not_theirs() -> None:
    async def main() -> None:
        async with open_asyncio_host() as host:
            with pytest.raises(TypeError):
                PrismGate(host, "options")  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="PrismGate"):
                PrismToolset(host)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="PrismGate"):
                PrismGatedToolset(FunctionToolset[Any](), gate=host)  # type: ignore[arg-type]

    asyncio.run(main())


def final_report(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    told = {
        part.tool_call_id: part.model_response_str()
        for message in messages
        for part in getattr(message, "parts", [])
        if isinstance(part, ToolReturnPart)
    }
    return ModelResponse(parts=[TextPart(json.dumps(told))])


@dataclasses.dataclass
class Place:
    name: str
    n: int


def test_pydantic_ai_return_values_are_recorded_as_json() -> None:
    toolset = FunctionToolset[Any]()

    @toolset.tool_plain
    def where() -> Place:
        """Returns a dataclass."""
        return Place(name="Oslo", n=1)

    calls = iter([[ToolCallPart("where", {}, tool_call_id="s-1")]])

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = next(calls, None)
        return ModelResponse(parts=list(turn)) if turn else final_report(messages, info)

    async def main() -> list[str | None]:
        async with open_asyncio_host() as host:
            gate = PrismGate(host, gates(Approvals(answers={}), RunLedger()))
            agent = Agent(FunctionModel(respond), toolsets=[PrismGatedToolset(toolset, gate=gate)])
            result = await agent.run("go")
            return [r.result_preview for r in gate.records(result.run_id)]

    (preview,) = asyncio.run(main())
    assert preview == '{"name":"Oslo","n":1}'


def test_a_prism_tool_without_a_tool_call_id_gets_one() -> None:
    async def main() -> list[str]:
        async with open_asyncio_host() as host:
            gate = PrismGate(host, gates(Approvals(answers={}), RunLedger()))
            toolset = PrismToolset(gate)

            class Ctx:
                run_id = "r-x"
                tool_call_id = None

            tools = await toolset.get_tools(Ctx())  # type: ignore[arg-type]
            answer = await toolset.call_tool("add", {"a": 1, "b": 2}, Ctx(), tools["add"])  # type: ignore[arg-type]
            assert answer == "3"
            return [r.call_id for r in gate.records("r-x")]

    (call_id,) = asyncio.run(main())
    assert call_id.startswith("pydantic-ai-")


def test_options_made_per_call_never_get_another_options_gates() -> None:
    """Options built and dropped call after call (their ids may be reused) keep their own gates."""
    template = RunLedger()

    base = gates(Approvals(answers={}), template)
    allow = create_rule_permission_policy(allow=["tool:*:execute"])
    deny = create_rule_permission_policy(default="deny")

    async def main() -> list[str]:
        async with open_asyncio_host() as host:
            gate = PrismGate(host, base)
            statuses = []
            for i in range(40):
                # One new options object per call, freed after it: CPython hands the
                # next one the same memory, so the same id(), most of the time.
                options = attrs.evolve(base, permission=allow if i % 2 == 0 else deny)
                result = await gate.call(
                    run_id="one-run",
                    call_id=str(i),
                    name="add",
                    arguments={"a": 1, "b": 1},
                    options=options,
                )
                del options
                statuses.append("ok" if not result.is_error else "refused")
            return statuses

    assert asyncio.run(main()) == ["ok", "refused"] * 20


def test_a_wrapped_tool_is_validated_against_the_schema_of_this_step() -> None:
    """A prepare step may change a tool's schema between steps: Prism checks the current one."""
    toolset = FunctionToolset[Any]()

    @toolset.tool_plain
    def pick(n: int) -> str:
        """Pick a number."""
        return f"picked {n}"

    calls = iter(
        [
            [ToolCallPart("pick", {"n": 5}, tool_call_id="p-1")],
            [ToolCallPart("pick", {"n": 5}, tool_call_id="p-2")],
        ]
    )
    steps: list[int] = []

    async def prepare(ctx: Any, tool_defs: list[Any]) -> list[Any]:
        # Step 2 caps n at 3 (a new schema object, as prepare functions make).
        steps.append(1)
        cap = 10 if len(steps) == 1 else 3
        return [
            dataclasses.replace(
                d,
                parameters_json_schema={
                    "type": "object",
                    "properties": {"n": {"type": "integer", "maximum": cap}},
                    "required": ["n"],
                },
            )
            for d in tool_defs
        ]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = next(calls, None)
        return ModelResponse(parts=list(turn)) if turn else final_report(messages, info)

    def at_most(tool: Any, arguments: Any, _ctx: Any) -> str | None:
        schema = tool.parameters or {}
        cap = schema.get("properties", {}).get("n", {}).get("maximum")
        return f"n must be at most {cap}" if arguments.get("n", 0) > cap else None

    async def main() -> dict[str, str]:
        async with open_asyncio_host() as host:
            options = attrs.evolve(gates(Approvals(answers={}), RunLedger()), validator=at_most)
            gate = PrismGate(host, options)
            agent = Agent(
                FunctionModel(respond),
                toolsets=[PrismGatedToolset(toolset.prepared(prepare), gate=gate)],
            )
            told: dict[str, str] = json.loads((await agent.run("go")).output)
            return told

    told = asyncio.run(main())
    assert told["p-1"] == "picked 5"
    assert "n must be at most 3" in told["p-2"]
