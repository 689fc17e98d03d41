"""Prism's gated tool call against the peers' own tool-call entry points, in one process.

The same tool, ``get_weather(city: str, days: int = 1) -> str`` with ``days`` an
integer from 1 to 14, is called with the same arguments (the JSON text
``{"city": "Paris", "days": 3}``, as a model sends it) through:

- ``bare get_weather()``: a plain function call, the floor.
- ``OpenAI Agents SDK on_invoke_tool``: ``FunctionTool.on_invoke_tool(ctx, json)``
  of a ``@function_tool`` (parses the JSON, validates with pydantic, calls the
  function), with a ``ToolContext`` built through its public constructor.
- ``pydantic-ai ToolManager.handle_call``: a ``ToolManager`` over a
  ``FunctionToolset`` prepared for a run step with a real ``RunContext``
  (``TestModel``, no model request), handling a ``ToolCallPart`` (validates
  with pydantic, calls the function).
- ``Prism dispatch_tool_call``: goal 1 as named, the call gated as in
  ``bench_dispatch.py``'s ``gated + jsonschema validator + ledger`` row
  (filters, rule permission, event sink, ``RunLedger``) with the JSON Schema
  validator of prism-validation-jsonschema, the arguments parsed from the same
  JSON text in the timed call (a provider adapter's work).

The peers run on asyncio (``asyncio.run``), Prism on trio (``trio.run``), in
this one process; every repetition runs each case in turn, so machine load hits
them alike. Only the entry point is timed: no agent loop, no model. Each case
reports wall time per call (``time.perf_counter``) and CPU time per call of this
process (``time.process_time``, which other processes cannot inflate). The
Prism rows show their ratio to the Agents SDK in the ratio column and to
pydantic-ai in the note.

Run: ``uv run python benchmarks/bench_peers.py [--json] [--quick]``.
"""

from __future__ import annotations

import asyncio  # noqa: TID251 (the peers run on asyncio; Prism stays on trio)
import functools
import json
import sys
import time
from typing import TYPE_CHECKING, Annotated

import trio
from _harness import Row, report, row
from agents import FunctionTool, function_tool
from agents.tool_context import ToolContext
from pydantic import Field
from pydantic_ai import RunContext, Tool
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.models.test import TestModel
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from prism.core import (
    AgentEvent,
    DispatchOptions,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolFilter,
    ToolResult,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
)
from prism.core.ledger import RunLedger
from prism.validation.jsonschema import create_json_schema_tool_validator

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

BENCH = "peers"
QUICK = "--quick" in sys.argv[1:]
INNER = 1_000 if QUICK else 2_000
REPEAT = 7 if QUICK else 15
WARMUP = 300

ARGUMENTS = '{"city": "Paris", "days": 3}'
EXPECTED = "Paris: sunny for 3 day(s)"

# One sample: (wall µs per call, CPU µs per call).
Sample = tuple[float, float]


def get_weather(city: str, days: Annotated[int, Field(ge=1, le=14)] = 1) -> str:
    """Weather forecast for a city, for 1 to 14 days."""
    return f"{city}: sunny for {days} day(s)"


async def get_weather_async(city: str, days: Annotated[int, Field(ge=1, le=14)] = 1) -> str:
    """Weather forecast for a city, for 1 to 14 days."""
    return get_weather(city, days)


WEATHER_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 1},
    },
    "required": ["city"],
    "additionalProperties": False,
}


async def _sample(fn: Callable[[], Awaitable[object]]) -> Sample:
    """Wall and CPU µs per call of ``INNER`` awaited calls of ``fn``."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(INNER):
        await fn()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return wall / INNER * 1e6, cpu / INNER * 1e6


async def _measure(fn: Callable[[], Awaitable[object]], result: object, *, warm: bool) -> Sample:
    assert await fn() == result, "the entry point returned something else"
    if warm:
        for _ in range(WARMUP):
            await fn()
    return await _sample(fn)


def bare(*, warm: bool) -> Sample:
    """The floor: ``get_weather`` called directly, the arguments parsed from JSON."""

    async def call() -> str:
        args = json.loads(ARGUMENTS)
        return get_weather(args["city"], args["days"])

    return asyncio.run(_measure(call, EXPECTED, warm=warm))


AGENTS_TOOLS: dict[bool, FunctionTool] = {
    True: function_tool(get_weather_async, name_override="get_weather"),
    False: function_tool(get_weather),
}


def agents_sdk(*, warm: bool, coroutine: bool = True) -> Sample:
    """``FunctionTool.on_invoke_tool`` of the OpenAI Agents SDK, on asyncio."""
    tool = AGENTS_TOOLS[coroutine]
    ctx: ToolContext[None] = ToolContext(
        context=None,
        tool_name=tool.name,
        tool_call_id="call_1",
        tool_arguments=ARGUMENTS,
    )

    def call() -> Awaitable[object]:
        return tool.on_invoke_tool(ctx, ARGUMENTS)

    return asyncio.run(_measure(call, EXPECTED, warm=warm))


def pydantic_ai(*, warm: bool, coroutine: bool = True) -> Sample:
    """``ToolManager.handle_call`` of pydantic-ai, on asyncio."""
    function = Tool(get_weather_async, name="get_weather") if coroutine else Tool(get_weather)

    async def main() -> Sample:
        run_context: RunContext[None] = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        manager = await ToolManager[None](FunctionToolset([function])).for_run_step(run_context)
        part = ToolCallPart(tool_name="get_weather", args=ARGUMENTS, tool_call_id="call_1")

        def call() -> Awaitable[object]:
            return manager.handle_call(part)

        return await _measure(call, EXPECTED, warm=warm)

    return asyncio.run(main())


async def _weather(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    days = args.get("days", 1)
    assert isinstance(days, int)
    return ToolResult.text(get_weather(str(args["city"]), days))


def _sink(event: AgentEvent) -> None:
    return None


# Built once, like a host does; the ledger keeps the newest 1000 records in memory.
PRISM_OPTIONS = DispatchOptions(
    registry=create_tool_registry(
        [
            ToolDefinition(
                name="get_weather",
                execute=_weather,
                description="Weather forecast for a city, for 1 to 14 days.",
                parameters=WEATHER_SCHEMA,
            )
        ]
    ),
    filters=(ToolFilter(allow=frozenset({"get_weather"})), ToolFilter(deny={"shell"})),
    permission=create_rule_permission_policy(allow=["tool:*:execute"], deny=["tool:shell:*"]),
    validator=create_json_schema_tool_validator(),
    on_event=_sink,
    ledger=RunLedger(max_records=1000),
)


# The peers' work only: parse, validate against the schema, call.
PRISM_SCHEMA_ONLY = DispatchOptions(
    registry=PRISM_OPTIONS.registry, validator=create_json_schema_tool_validator()
)


def prism(*, warm: bool, options: DispatchOptions = PRISM_OPTIONS) -> Sample:
    """Prism's ``dispatch_tool_call`` with ``options`` (fully gated by default), on trio."""

    async def call() -> str:
        tool_call = ToolCall(id="call_1", name="get_weather", arguments=json.loads(ARGUMENTS))
        return (await dispatch_tool_call(tool_call, options)).joined_text

    return trio.run(functools.partial(_measure, call, EXPECTED, warm=warm))


CASES: tuple[tuple[str, Callable[..., Sample]], ...] = (
    ("bare get_weather()", bare),
    ("OpenAI Agents SDK on_invoke_tool", agents_sdk),
    ("pydantic-ai ToolManager.handle_call", pydantic_ai),
    ("Prism dispatch_tool_call (jsonschema + ledger)", prism),
    (
        "OpenAI Agents SDK on_invoke_tool, def tool",
        functools.partial(agents_sdk, coroutine=False),
    ),
    (
        "pydantic-ai ToolManager.handle_call, def tool",
        functools.partial(pydantic_ai, coroutine=False),
    ),
    (
        "Prism dispatch_tool_call (jsonschema only)",
        functools.partial(prism, options=PRISM_SCHEMA_ONLY),
    ),
)


def main() -> list[Row]:
    for _, case in CASES:
        case(warm=True)
    samples: list[list[Sample]] = [[] for _ in CASES]
    for repetition in range(REPEAT):
        # Alternate the order too, so no case always runs right after another.
        order = list(enumerate(CASES))
        if repetition % 2:
            order.reverse()
        for index, (_, case) in order:
            samples[index].append(case(warm=False))
    rows: list[Row] = []
    for clock, position in (("wall", 0), ("cpu", 1)):
        measured = [[sample[position] for sample in case] for case in samples]
        floor = row(BENCH, f"{clock}: {CASES[0][0]}", measured[0], note="the floor")
        agents_row = row(BENCH, f"{clock}: {CASES[1][0]}", measured[1], baseline=floor)
        pydantic_row = row(BENCH, f"{clock}: {CASES[2][0]}", measured[2], baseline=floor)
        prism_row = row(
            BENCH,
            f"{clock}: {CASES[3][0]}",
            measured[3],
            baseline=agents_row,
            target="<= 10 µs",
        )
        vs_pydantic = prism_row.median_us / pydantic_row.median_us
        prism_row.extra = {"ratio_to_pydantic_ai": vs_pydantic}
        verdict = "meets target" if prism_row.median_us <= 10 else "MISSES target"
        prism_row.note = f"{vs_pydantic:.2f}x pydantic-ai; {verdict}"
        rows += [floor, agents_row, pydantic_row, prism_row]
        for index in (4, 5):
            rows.append(
                row(
                    BENCH,
                    f"{clock}: {CASES[index][0]}",
                    measured[index],
                    baseline=floor,
                    note="a plain def runs in a worker thread",
                )
            )
        rows.append(
            row(
                BENCH,
                f"{clock}: {CASES[6][0]}",
                measured[6],
                baseline=agents_row,
                note="no filters, permission, events or ledger: the peers' work",
            )
        )
    return rows


if __name__ == "__main__":
    started = time.perf_counter()
    report(main())
    if "--json" not in sys.argv[1:]:
        sys.stdout.write(f"(took {time.perf_counter() - started:.1f} s)\n")
