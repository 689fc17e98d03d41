"""Per-call cost of a tool call through each framework adapter, gated by Prism vs ungated.

For each framework, the same asyncio tool is called the framework's own way, ungated,
and through the adapter's wrapper of it (every Prism gate: a filter, a rule permission
policy, an event sink, a ledger), alternating repetition by repetition in one asyncio
program and one host, so a loaded machine slows both alike. Times are CPU time of the
calling thread per call (``time.thread_time``): other processes on a loaded machine
then cost little.

Two units per framework. The target (a gated call costs at most 1.5x the framework's
own) is set on the first, what the framework runs for one tool call a model asked for:

- pydantic-ai: ``ToolManager.handle_call`` of the tool manager an ``Agent`` run built
  (the run's capabilities, argument validation with pydantic, retries, the tool call),
  for an agent given the plain toolset vs the same agent given ``PrismGatedToolset``
  of it.
- OpenAI Agents SDK: what its runner runs for a turn's function calls
  (``run_internal.tool_execution.execute_function_tool_calls``, one call: the function
  span, approval and guardrail checks, hooks, the tool's task, its output item), inside
  a trace with no processors, for an agent holding the ``@function_tool`` vs its
  ``gate_function_tool``.
- LangChain: ``BaseTool.ainvoke`` of a tool call (what LangGraph's ``ToolNode`` runs
  per call: argument parsing, the callback run, the ``ToolMessage``), for a ``@tool``
  vs its ``gate_langchain_tool``.

The second unit is the bare function call, for pydantic-ai ``FunctionToolset.call_tool``
vs ``PrismGatedToolset.call_tool``, and for the Agents SDK the tool's ``on_invoke_tool``
vs the gated one's: no validation, hooks or tracing of the framework's, only the call of
the tool's function, so the ratio is Prism's whole cost over a few microseconds.

The tool awaits ``asyncio.sleep(0)`` (one turn of the loop, the least I/O costs).

Where a gated call's time goes, measured in the same run: ``Prism dispatch alone``
is :meth:`AsyncioHost.dispatch_tool_call` of an asyncio tool that returns at once,
with no options and with the same gates as the adapters (a filter, a rule
permission policy, an event sink, a ledger). Nothing in either is trio code, so
both run in the calling asyncio task, as the adapters' calls do: the gated row is
the least any gated call costs on top of the tool, whatever the adapter does.

Run: ``uv run python benchmarks/bench_integrations.py [--json] [--quick]``.
"""

from __future__ import annotations

import asyncio
import collections
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import attrs
from _harness import Row, report, row

from prism.core import (
    AgentEvent,
    DispatchOptions,
    ToolFilter,
    create_rule_permission_policy,
    create_tool_registry,
    open_asyncio_host,
)
from prism.core.ledger import RunLedger
from prism.integrations import PrismGate

if TYPE_CHECKING:
    from agents.tool import FunctionTool
    from langchain_core.runnables import RunnableConfig

BENCH = "integrations"
QUICK = "--quick" in sys.argv[1:]
REPEAT = 5 if QUICK else 9
TARGET = 1.5


@dataclass
class Pair:
    """One framework's unit, its own call and the gated one, and how it is reported."""

    name: str
    own: Any
    gated: Any
    inner: int
    target: bool
    note: str


def gate_options() -> DispatchOptions:
    # The sink keeps the latest events, as the ledger keeps the latest records:
    # a list of every event would grow all run long, and its garbage collections
    # would be charged to the gated calls.
    events: collections.deque[AgentEvent] = collections.deque(maxlen=1_000)
    return DispatchOptions(
        registry=create_tool_registry([]),
        filters=(ToolFilter(deny=frozenset({"never"})),),
        permission=create_rule_permission_policy(allow=["tool:*:execute"]),
        on_event=events.append,
        ledger=RunLedger(max_records=1_000),
    )


async def per_call(fn: Any, inner: int) -> float:
    t0 = time.thread_time()
    for _ in range(inner):
        await fn()
    return (time.thread_time() - t0) / inner * 1e6


def inner(n: int) -> int:
    return max(20, n // 5) if QUICK else n


async def pydantic_ai_pairs(gate: PrismGate) -> list[Pair]:
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    from prism.integrations.pydantic_ai import PrismGatedToolset

    toolset = FunctionToolset[None]()

    @toolset.tool_plain
    async def lookup(city: str) -> str:
        """Look a city up."""
        await asyncio.sleep(0)
        return city

    gated_toolset = PrismGatedToolset(toolset, gate=gate)
    ctx = RunContext(
        deps=None, model=TestModel(), usage=RunUsage(), run_id="bench", tool_call_id="c"
    )
    tool = (await toolset.get_tools(ctx))["lookup"]
    args = {"city": "Oslo"}

    async def own_function() -> Any:
        return await toolset.call_tool("lookup", args, ctx, tool)

    async def gated_function() -> Any:
        return await gated_toolset.call_tool("lookup", args, ctx, tool)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", '{"city": "Oslo"}', "c0")])
        return ModelResponse(parts=[TextPart("done")])

    async def tool_manager(agent: Agent[None, str]) -> Any:
        # The manager the run built for its tool call step (its toolset, the
        # run's capabilities and context), used after the run as a model's next
        # call would use it.
        async with agent.iter("go") as run:
            async for _node in run:
                pass
        return run.ctx.deps.tool_manager

    own_manager = await tool_manager(Agent(FunctionModel(model), toolsets=[toolset]))
    gated_manager = await tool_manager(Agent(FunctionModel(model), toolsets=[gated_toolset]))
    part = ToolCallPart("lookup", '{"city": "Oslo"}', "c1")

    async def own_call() -> Any:
        return await own_manager.handle_call(part)

    async def gated_call() -> Any:
        return await gated_manager.handle_call(part)

    return [
        Pair(
            "pydantic-ai, per model tool call",
            own_call,
            gated_call,
            inner(1_000),
            True,
            "ToolManager.handle_call of an Agent run's manager, JSON arguments",
        ),
        Pair(
            "pydantic-ai, function call only",
            own_function,
            gated_function,
            inner(2_000),
            False,
            "FunctionToolset.call_tool vs PrismGatedToolset.call_tool",
        ),
    ]


async def openai_agents_pairs(gate: PrismGate) -> list[Pair]:
    from agents import Agent, RunConfig, RunContextWrapper, RunHooks, function_tool, trace
    from agents.run_internal.agent_bindings import bind_public_agent
    from agents.run_internal.run_steps import ToolRunFunction
    from agents.run_internal.tool_execution import execute_function_tool_calls
    from agents.tool_context import ToolContext
    from agents.tracing import set_trace_processors
    from openai.types.responses import ResponseFunctionToolCall

    from prism.integrations.openai_agents import gate_function_tool

    @function_tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        await asyncio.sleep(0)
        return city

    gated = gate_function_tool(lookup, gate)
    text = '{"city": "Oslo"}'
    ctx = ToolContext(context=None, tool_name="lookup", tool_call_id="c", tool_arguments=text)

    async def own_function() -> Any:
        return await lookup.on_invoke_tool(ctx, text)

    async def gated_function() -> Any:
        return await gated.on_invoke_tool(ctx, text)

    # Spans are made as in a run, and handed to no processor (nothing is exported).
    set_trace_processors([])
    call = ResponseFunctionToolCall(
        arguments=text, call_id="c", name="lookup", type="function_call", id="fc"
    )
    hooks: RunHooks[Any] = RunHooks()
    config = RunConfig()

    def runner_call(tool: FunctionTool) -> Any:
        bindings = bind_public_agent(Agent(name="bench", tools=[tool]))

        async def once() -> Any:
            with trace("bench", trace_id="trace_bench"):
                results, _, _ = await execute_function_tool_calls(
                    bindings=bindings,
                    tool_runs=[ToolRunFunction(tool_call=call, function_tool=tool)],
                    hooks=hooks,
                    context_wrapper=RunContextWrapper(context=None),
                    config=config,
                )
            return results[0].output

        return once

    return [
        Pair(
            "openai-agents, per model tool call",
            runner_call(lookup),
            runner_call(gated),
            inner(400),
            True,
            "the runner's execute_function_tool_calls for one call, in a trace",
        ),
        Pair(
            "openai-agents, function call only",
            own_function,
            gated_function,
            inner(2_000),
            False,
            "the tool's on_invoke_tool vs gate_function_tool's",
        ),
    ]


async def langchain_pairs(gate: PrismGate) -> list[Pair]:
    from langchain_core.tools import tool

    from prism.integrations.langchain import gate_langchain_tool

    @tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        await asyncio.sleep(0)
        return city

    gated = gate_langchain_tool(lookup, gate)
    call = {"name": "lookup", "args": {"city": "Oslo"}, "id": "c", "type": "tool_call"}
    config: RunnableConfig = {"configurable": {"thread_id": "bench"}}

    async def ungated() -> Any:
        return await lookup.ainvoke(call, config=config)

    async def through_prism() -> Any:
        return await gated.ainvoke(call, config=config)

    return [
        Pair(
            "langchain, per model tool call",
            ungated,
            through_prism,
            inner(300),
            True,
            "BaseTool.ainvoke of a tool call (what ToolNode runs per call)",
        )
    ]


async def prism_pairs(gate: PrismGate) -> list[Pair]:
    from prism.core import ToolCall, ToolDefinition, ToolResult

    answer = ToolResult.text("Oslo")

    async def lookup(args: Any, ctx: Any) -> ToolResult:
        return answer

    registry = create_tool_registry([ToolDefinition(name="lookup", execute=lookup)])
    bare = DispatchOptions(registry=registry)
    gated = attrs.evolve(gate.options, registry=registry)
    call = ToolCall(id="c", name="lookup", arguments={"city": "Oslo"})
    host = gate.host

    async def no_gates() -> Any:
        return await host.dispatch_tool_call(call, bare)

    async def every_gate() -> Any:
        return await host.dispatch_tool_call(call, gated)

    return [Pair("prism", no_gates, every_gate, inner(2_000), False, "")]


MAKERS = (pydantic_ai_pairs, openai_agents_pairs, langchain_pairs, prism_pairs)


async def measure() -> list[tuple[Pair, list[float], list[float]]]:
    taken: list[tuple[Pair, list[float], list[float]]] = []
    async with open_asyncio_host() as host:
        gate = PrismGate(host, gate_options())
        for make in MAKERS:
            for pair in await make(gate):
                for _ in range(max(10, pair.inner // 10)):  # warm both paths
                    await pair.own()
                    await pair.gated()
                own: list[float] = []
                gated: list[float] = []
                for _ in range(REPEAT):
                    own.append(await per_call(pair.own, pair.inner))
                    gated.append(await per_call(pair.gated, pair.inner))
                taken.append((pair, own, gated))
    return taken


def main() -> list[Row]:
    rows: list[Row] = []
    for pair, own, gated in asyncio.run(measure()):
        if pair.name == "prism":
            base = row(
                BENCH,
                "Prism dispatch alone, no gates",
                own,
                note="host.dispatch_tool_call; the tool returns at once",
            )
            rows += [
                base,
                row(
                    BENCH,
                    "Prism dispatch alone, every gate",
                    gated,
                    baseline=base,
                    note="the adapters' gates and ledger: the least a gated call adds",
                ),
            ]
            continue
        base = row(BENCH, f"{pair.name}: the framework's own", own, note=pair.note)
        through = row(
            BENCH,
            f"{pair.name}: through Prism's gates",
            gated,
            baseline=base,
            target=f"<= {TARGET}x" if pair.target else None,
            note="the adapter's wrapper of the same tool",
        )
        if pair.target:
            ok = through.ratio is not None and through.ratio <= TARGET
            through.note += "; meets target" if ok else "; MISSES target"
        else:
            through.note += "; no target (the bare function call, not the framework's unit)"
        rows += [base, through]
    return rows


if __name__ == "__main__":
    report(main())
