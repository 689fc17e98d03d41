"""Per-call cost of a gated dispatch from asyncio (through the asyncio host) vs from trio.

Rows (medians over repetitions, measured in one run, same options and tool):

- ``gated dispatch from trio``: ``await dispatch_tool_call(...)`` inside ``trio.run``,
  the baseline.
- ``gated dispatch from asyncio (host)``: ``await host.dispatch_tool_call(...)`` inside
  ``asyncio.run``, one long-lived host. Each call crosses into the trio guest run and
  back. Target: at most 2x the trio row.
- ``... 8 concurrent asyncio callers``: eight asyncio tasks share the host; the time is
  per call (wall time / calls), so it shows what batching across callers recovers.

Run: ``uv run python benchmarks/bench_asyncio_host.py [--json] [--quick]``.
"""

from __future__ import annotations

import asyncio
import sys
import time

from _harness import Row, report, row, time_async

from prism.core import (
    AgentEvent,
    DispatchOptions,
    JsonObject,
    RunLedger,
    ToolCall,
    ToolExecutionContext,
    ToolFilter,
    ToolResult,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
    open_asyncio_host,
)
from prism.core import ToolDefinition as Tool

BENCH = "asyncio-host"
QUICK = "--quick" in sys.argv[1:]
INNER = 1_000 if QUICK else 3_000
REPEAT = 5 if QUICK else 11
CONCURRENT = 8

_RESULT = ToolResult.text("ok")


async def echo(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return _RESULT


def gated_options() -> DispatchOptions:
    events: list[AgentEvent] = []
    return DispatchOptions(
        registry=create_tool_registry([Tool(name="echo", execute=echo)]),
        filters=(ToolFilter(deny=frozenset({"never"})),),
        permission=create_rule_permission_policy(allow=["tool:echo:execute"]),
        events=events.append,
        ledger=RunLedger(),
    )


CALL = ToolCall(id="1", name="echo", arguments={"q": "x"})


async def from_trio() -> list[float]:
    options = gated_options()
    return await time_async(lambda: dispatch_tool_call(CALL, options), inner=INNER, repeat=REPEAT)


async def from_asyncio() -> tuple[list[float], list[float]]:
    options = gated_options()
    serial: list[float] = []
    concurrent: list[float] = []
    async with open_asyncio_host() as host:
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            for _ in range(INNER):
                await host.dispatch_tool_call(CALL, options)
            serial.append((time.perf_counter() - t0) / INNER * 1e6)

        async def caller(n: int) -> None:
            for _ in range(n):
                await host.dispatch_tool_call(CALL, options)

        per_caller = INNER // CONCURRENT
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            await asyncio.gather(*(caller(per_caller) for _ in range(CONCURRENT)))
            concurrent.append((time.perf_counter() - t0) / (per_caller * CONCURRENT) * 1e6)
    return serial, concurrent


def main() -> list[Row]:
    import trio

    trio_samples = trio.run(from_trio)
    serial, concurrent = asyncio.run(from_asyncio())
    base = row(BENCH, "gated dispatch from trio", trio_samples)
    return [
        base,
        row(
            BENCH,
            "gated dispatch from asyncio (host)",
            serial,
            baseline=base,
            target="<= 2x",
            note="one caller, one call at a time",
        ),
        row(
            BENCH,
            f"... {CONCURRENT} concurrent asyncio callers",
            concurrent,
            baseline=base,
            note="per call (wall / calls)",
        ),
    ]


if __name__ == "__main__":
    report(main())
