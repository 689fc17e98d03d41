"""Per-call cost of a tool call through each framework adapter, gated by Prism vs ungated.

For each framework, the same asyncio tool is called the framework's own way, ungated,
and through the adapter's wrapper of it (every Prism gate: a filter, a rule permission
policy, an event sink, a ledger), alternating repetition by repetition in one asyncio
program and one host, so a loaded machine slows both alike:

- pydantic-ai: ``FunctionToolset.call_tool`` vs ``PrismGatedToolset.call_tool``.
- OpenAI Agents SDK: a ``@function_tool``'s ``on_invoke_tool`` vs ``gate_function_tool``'s.
- LangChain: a ``@tool``'s ``ainvoke`` vs ``gate_langchain_tool``'s.

The tool awaits ``asyncio.sleep(0)`` (one turn of the loop, the least I/O costs).
Target: a gated call costs at most 1.5x the framework's own call.

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
import sys
import time
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
    from langchain_core.runnables import RunnableConfig

BENCH = "integrations"
QUICK = "--quick" in sys.argv[1:]
INNER = 200 if QUICK else 1_000
REPEAT = 5 if QUICK else 9


def gate_options() -> DispatchOptions:
    events: list[AgentEvent] = []
    return DispatchOptions(
        registry=create_tool_registry([]),
        filters=(ToolFilter(deny=frozenset({"never"})),),
        permission=create_rule_permission_policy(allow=["tool:*:execute"]),
        on_event=events.append,
        ledger=RunLedger(max_records=1_000),
    )


async def per_call(fn: Any) -> float:
    t0 = time.perf_counter()
    for _ in range(INNER):
        await fn()
    return (time.perf_counter() - t0) / INNER * 1e6


async def pydantic_ai_pair(gate: PrismGate) -> tuple[Any, Any]:
    from pydantic_ai import RunContext
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

    gated = PrismGatedToolset(toolset, gate=gate)
    ctx = RunContext(
        deps=None, model=TestModel(), usage=RunUsage(), run_id="bench", tool_call_id="c"
    )
    tool = (await toolset.get_tools(ctx))["lookup"]
    args = {"city": "Oslo"}

    async def ungated() -> Any:
        return await toolset.call_tool("lookup", args, ctx, tool)

    async def through_prism() -> Any:
        return await gated.call_tool("lookup", args, ctx, tool)

    return ungated, through_prism


async def openai_agents_pair(gate: PrismGate) -> tuple[Any, Any]:
    from agents import function_tool
    from agents.tool_context import ToolContext

    from prism.integrations.openai_agents import gate_function_tool

    @function_tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        await asyncio.sleep(0)
        return city

    gated = gate_function_tool(lookup, gate)
    text = '{"city": "Oslo"}'
    ctx = ToolContext(context=None, tool_name="lookup", tool_call_id="c", tool_arguments=text)

    async def ungated() -> Any:
        return await lookup.on_invoke_tool(ctx, text)

    async def through_prism() -> Any:
        return await gated.on_invoke_tool(ctx, text)

    return ungated, through_prism


async def langchain_pair(gate: PrismGate) -> tuple[Any, Any]:
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

    return ungated, through_prism


async def prism_pair(gate: PrismGate) -> tuple[Any, Any]:
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

    return no_gates, every_gate


PAIRS = {
    "pydantic-ai": pydantic_ai_pair,
    "openai-agents": openai_agents_pair,
    "langchain": langchain_pair,
    "prism": prism_pair,
}


async def measure() -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = {}
    async with open_asyncio_host() as host:
        gate = PrismGate(host, gate_options())
        for name, make in PAIRS.items():
            ungated, gated = await make(gate)
            await ungated()
            await gated()  # warm both paths
            taken = samples[name] = {"ungated": [], "gated": []}
            for _ in range(REPEAT):
                taken["ungated"].append(await per_call(ungated))
                taken["gated"].append(await per_call(gated))
    return samples


def main() -> list[Row]:
    rows: list[Row] = []
    for name, taken in asyncio.run(measure()).items():
        if name == "prism":
            base = row(
                BENCH,
                "Prism dispatch alone, no gates",
                taken["ungated"],
                note="host.dispatch_tool_call; the tool returns at once",
            )
            rows += [
                base,
                row(
                    BENCH,
                    "Prism dispatch alone, every gate",
                    taken["gated"],
                    baseline=base,
                    note="the adapters' gates and ledger: the least a gated call adds",
                ),
            ]
            continue
        base = row(BENCH, f"{name}: the framework's own call", taken["ungated"], note="ungated")
        gated = row(
            BENCH,
            f"{name}: through Prism's gates",
            taken["gated"],
            baseline=base,
            target="<= 1.5x",
            note="the adapter's wrapper of the same tool",
        )
        ok = gated.ratio is not None and gated.ratio <= 1.5
        gated.note += "; meets target" if ok else "; MISSES target"
        rows += [base, gated]
    return rows


if __name__ == "__main__":
    report(main())
