"""OpenAI Agents SDK agents with Prism's gates, driven by the SDK's own ScriptedModel (offline).

A multi-turn run asks for calls that are allowed, denied by permission, refused by
validation and asked through approval; each refusal reaches the model as the
tool's output (the SDK's way of reporting a tool error), the run goes on to its
final answer, and the ledger holds the run's trace id and each call id.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import pytest
from agents import Agent, RunConfig, RunContextWrapper, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from integrations_kit import Approvals, gates

from prism.core import (
    JsonObject,
    MiddlewareRegistry,
    ToolExecutionContext,
    ToolResult,
    create_rule_permission_policy,
    open_asyncio_host,
)
from prism.core._content import NO_TEXT_BOUND
from prism.core.ledger import RunLedger, ToolCallRecord
from prism.integrations import PrismGate
from prism.integrations.openai_agents import gate_function_tool, prism_function_tools

set_tracing_disabled(True)  # offline: nothing is exported


def outputs_of(call: ModelCall) -> dict[str, str]:
    """call_id -> the tool output the model was given."""
    items = call.input if isinstance(call.input, list) else []
    return {
        item["call_id"]: str(item["output"])
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def final_step() -> ModelStep:
    """The model's last turn: every tool output it saw, as JSON."""
    return ModelStep.respond(
        lambda call: [assistant_message(json.dumps(outputs_of(call), sort_keys=True))]
    )


def test_prism_function_tools_allow_deny_refuse_and_ask() -> None:
    ledger = RunLedger()
    approvals = Approvals(answers={"deploy staging": True, "deploy prod": False})
    model = ScriptedModel(
        [
            [
                function_call("add", {"a": 2, "b": 3}, call_id="c-add"),
                function_call("secret", {}, call_id="c-secret"),
            ],
            [
                function_call("add", {"a": -1, "b": 3}, call_id="c-invalid"),
                function_call("deploy", {"target": "staging"}, call_id="c-yes"),
                function_call("add", "{not json", call_id="c-garbled"),
            ],
            [function_call("deploy", {"target": "prod"}, call_id="c-no")],
            final_step(),
        ]
    )

    async def main() -> tuple[str, list[ToolCallRecord]]:
        answering = asyncio.create_task(approvals.answer_forever())
        try:
            async with open_asyncio_host() as host:
                gate = PrismGate(host, gates(approvals, ledger))
                agent = Agent(name="ops", model=model, tools=list(prism_function_tools(gate)))
                result = await Runner.run(
                    agent, "do the things", run_config=RunConfig(trace_id="trace_run_1")
                )
                return str(result.final_output), gate.records("trace_run_1")
        finally:
            answering.cancel()
            with pytest.raises(asyncio.CancelledError):
                await answering

    output, kept = asyncio.run(main())
    told = json.loads(output)
    assert told["c-add"] == "5"
    assert told["c-yes"] == "deployed staging"
    assert "permission denied for tool:secret:execute" in told["c-secret"]
    assert "add: a must not be negative" in told["c-invalid"]
    assert "the operator said no" in told["c-no"]
    assert "not JSON" in told["c-garbled"]
    assert approvals.asked == ["deploy staging", "deploy prod"]
    records = {r.call_id: r for r in kept}
    assert {cid: r.status for cid, r in records.items()} == {
        "c-add": "ok",
        "c-secret": "blocked",
        "c-invalid": "blocked",
        "c-yes": "ok",
        "c-no": "error",
    }
    assert {r.run_id for r in kept} == {"trace_run_1"}


def test_gate_function_tool_wraps_existing_function_tools() -> None:
    ran: list[str] = []

    @function_tool
    async def weather(city: str) -> str:
        """The weather in a city."""
        await asyncio.sleep(0)
        ran.append(city)
        return f"sunny in {city}"

    @function_tool
    def shutdown() -> str:
        """Never allowed."""
        raise AssertionError("denied")

    @function_tool
    def broken(n: int) -> str:
        """Fails; the SDK turns the failure into the tool's output."""
        raise ValueError("broken on purpose")

    model = ScriptedModel(
        [
            [
                function_call("weather", {"city": "Oslo"}, call_id="w-weather"),
                function_call("shutdown", {}, call_id="w-shutdown"),
                function_call("broken", {"n": 1}, call_id="w-broken"),
                function_call("broken", {"n": -1}, call_id="w-invalid"),
            ],
            final_step(),
        ]
    )

    async def main() -> tuple[str, list[ToolCallRecord]]:
        async with open_asyncio_host() as host:
            options = attrs.evolve(
                gates(Approvals(answers={}), RunLedger()),
                permission=create_rule_permission_policy(
                    allow=["tool:*:execute"], deny=["tool:shutdown:execute"]
                ),
            )
            gate = PrismGate(host, options)
            tools: list[Any] = [gate_function_tool(t, gate) for t in (weather, shutdown, broken)]
            agent = Agent(name="ops", model=model, tools=tools)
            result = await Runner.run(agent, "go", run_config=RunConfig(trace_id="trace_w"))
            return str(result.final_output), gate.records("trace_w")

    output, kept = asyncio.run(main())
    told = json.loads(output)
    assert told["w-weather"] == "sunny in Oslo"
    assert ran == ["Oslo"]
    assert "permission denied for tool:shutdown:execute" in told["w-shutdown"]
    assert "An error occurred while running the tool" in told["w-broken"]  # the SDK's own words
    assert "broken: n must not be negative" in told["w-invalid"]
    assert {r.call_id: r.status for r in kept} == {
        "w-weather": "ok",
        "w-shutdown": "blocked",
        "w-broken": "ok",  # the SDK's own error handler answered: a result, not a raise
        "w-invalid": "blocked",
    }


def test_the_wrappers_refuse_what_is_not_theirs() -> None:
    async def main() -> None:
        async with open_asyncio_host() as host:
            gate = PrismGate(host, gates(Approvals(answers={}), RunLedger()))
            with pytest.raises(TypeError, match="FunctionTool"):
                gate_function_tool("weather", gate)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="PrismGate"):
                prism_function_tools(host)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="PrismGate"):
                gate_function_tool(prism_function_tools(gate)[0], host)  # type: ignore[arg-type]

    asyncio.run(main())


def test_without_a_trace_id_the_calls_are_recorded_in_the_gates_own_ledger() -> None:
    ledger = RunLedger()
    model = ScriptedModel([[function_call("add", {"a": 1, "b": 1}, call_id="n-1")], final_step()])

    async def main() -> None:
        async with open_asyncio_host() as host:
            gate = PrismGate(host, gates(Approvals(answers={}), ledger))
            agent = Agent(name="ops", model=model, tools=list(prism_function_tools(gate)))
            await Runner.run(agent, "go", context=RunContextWrapper(context=None).context)

    asyncio.run(main())
    assert [(r.call_id, r.status) for r in ledger.records] == [("n-1", "ok")]


def test_without_a_run_config_trace_id_the_runs_trace_id_is_the_run_id() -> None:
    from agents.tracing import set_trace_processors

    model = ScriptedModel([[function_call("add", {"a": 1, "b": 2}, call_id="t-1")], final_step()])
    set_trace_processors([])  # traces are made, and exported nowhere
    set_tracing_disabled(False)
    try:

        async def main() -> tuple[str, list[str]]:
            async with open_asyncio_host() as host:
                gate = PrismGate(host, gates(Approvals(answers={}), RunLedger()))
                agent = Agent(name="ops", model=model, tools=list(prism_function_tools(gate)))
                await Runner.run(agent, "go")
                (run_id,) = gate.run_ids()
                return run_id, [r.call_id for r in gate.records(run_id)]

        run_id, calls = asyncio.run(main())
    finally:
        set_tracing_disabled(True)
    assert run_id.startswith("trace_")
    assert calls == ["t-1"]


def test_a_gated_function_tool_with_arguments_that_are_not_json_or_rewritten() -> None:
    @function_tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    middleware = MiddlewareRegistry()

    @middleware.on_tool_result
    def shout(_call: object, result: ToolResult, _ctx: object) -> ToolResult:
        return ToolResult.text(result.joined_text.upper())

    model = ScriptedModel(
        [
            [
                function_call("echo", "{not json", call_id="g-bad"),
                function_call("echo", {"text": "hi"}, call_id="g-ok"),
            ],
            final_step(),
        ]
    )

    async def main() -> str:
        async with open_asyncio_host() as host:
            options = attrs.evolve(gates(Approvals(answers={}), RunLedger()), middleware=middleware)
            gate = PrismGate(host, options)
            agent = Agent(name="ops", model=model, tools=[gate_function_tool(echo, gate)])
            result = await Runner.run(agent, "go", run_config=RunConfig(trace_id="trace_g"))
            return str(result.final_output)

    told = json.loads(asyncio.run(main()))
    assert "arguments must be a JSON object" in told["g-bad"]
    assert told["g-ok"] == "HI"


def test_both_wrappers_build_the_call_from_the_models_json_text() -> None:
    """The SDK hands its tools the model's text: Prism parses it, and the call keeps its proof."""

    @function_tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    seen: dict[str, tuple[bool, object]] = {}

    def observe(_tool: object, arguments: JsonObject, ctx: ToolExecutionContext) -> str | None:
        call = ctx.call
        # The proof is kept only beside the very object parsed from the text.
        seen[call.id] = (call._text_bound != NO_TEXT_BOUND, arguments is call.arguments)
        return "too long" if len(json.dumps(arguments)) > 40 else None

    model = ScriptedModel(
        [
            [
                function_call("add", {"a": 2, "b": 3}, call_id="p-ok"),
                function_call("add", {"a": 2, "b": 3, "pad": "x" * 40}, call_id="p-long"),
                function_call("add", '{"a": 1, "b": 12345678901234567890}', call_id="p-big"),
                function_call("echo", {"text": "hi"}, call_id="g-ok"),
                function_call("echo", "", call_id="g-blank"),
            ],
            final_step(),
        ]
    )

    async def main() -> str:
        async with open_asyncio_host() as host:
            options = attrs.evolve(gates(Approvals(answers={}), RunLedger()), validator=observe)
            gate = PrismGate(host, options)
            tools: list[Any] = [*prism_function_tools(gate), gate_function_tool(echo, gate)]
            agent = Agent(name="ops", model=model, tools=list(tools))
            result = await Runner.run(agent, "go", run_config=RunConfig(trace_id="trace_t"))
            return str(result.final_output)

    told = json.loads(asyncio.run(main()))
    assert told["p-ok"] == "5"
    assert told["g-ok"] == "hi"
    assert "too long" in told["p-long"]
    # From text, with the proof; a 20-digit integer proves nothing (walked); blank is {}.
    assert seen == {
        "p-ok": (True, True),
        "p-long": (True, True),
        "p-big": (False, True),
        "g-ok": (True, True),
        "g-blank": (False, True),
    }
