"""Per-call cost of a gated dispatch from asyncio (through the asyncio host) vs from trio.

Rows (medians over repetitions, same options and tool):

- ``gated dispatch from trio``: ``await dispatch_tool_call(...)`` inside ``trio.run``.
- ``... from trio, inside the host``: the same loop run as one trio task of the host
  (``host.run``), measured interleaved with the asyncio rows below, repetition by
  repetition, so that a loaded machine slows both sides alike. The asyncio rows'
  ratios are to this row: the baseline.
- ``gated dispatch from asyncio (host)``: ``await host.dispatch_tool_call(...)`` inside
  ``asyncio.run``, one long-lived host. Each call crosses into the trio guest run and
  back: one asyncio loop iteration and one trio guest tick per call, which by
  themselves cost about as much as the dispatch (see ``host crossing alone``), so
  this row stays above the 2x target (docs/agent-runtime.md, "asyncio hosts").
  Target: at most 2x the baseline.
- ``... 8 concurrent asyncio callers``: eight asyncio tasks share the host; the time is
  per call (wall time / calls). Calls queued in one loop iteration are served one
  after another in one step of one worker task, so the loop iteration and the guest
  tick are shared by eight calls. Target: at most 2x the baseline.
- ``host crossing alone``: ``await host.run(f)`` of a trio function that returns at
  once: what a call costs besides the dispatch itself (one loop iteration, one guest
  tick, one step of a worker task).
- ``asyncio tool, called directly``: the application's own asyncio tool (it awaits
  ``asyncio.sleep(0)``, one turn of the loop, as the least I/O does) awaited in a
  plain asyncio loop: the baseline of the next row.
- ``asyncio tool, gated through the host``: the same tool dispatched through the
  host with every gate. Nothing in the call is trio code (the tool is unmarked,
  so asyncio code, and so are the gates), so the host runs the whole dispatch in
  the calling asyncio task: no crossing into trio, no task of its own. Measured
  interleaved with the baseline.

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
    ToolCall,
    ToolExecutionContext,
    ToolFilter,
    ToolResult,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_call,
    open_asyncio_host,
    trio_native,
)
from prism.core import ToolDefinition as Tool
from prism.core.ledger import RunLedger

BENCH = "asyncio-host"
QUICK = "--quick" in sys.argv[1:]
INNER = 1_000 if QUICK else 3_000
REPEAT = 5 if QUICK else 11
CONCURRENT = 8

_RESULT = ToolResult.text("ok")


@trio_native  # the trio rows' tool: stays on trio under the host
async def echo(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return _RESULT


async def asyncio_echo(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    await asyncio.sleep(0)
    return _RESULT


def gated_options() -> DispatchOptions:
    events: list[AgentEvent] = []
    return DispatchOptions(
        registry=create_tool_registry(
            [Tool(name="echo", execute=echo), Tool(name="aecho", execute=asyncio_echo)]
        ),
        filters=(ToolFilter(deny=frozenset({"never"})),),
        permission=create_rule_permission_policy(allow=["tool:*echo:execute"]),
        on_event=events.append,
        ledger=RunLedger(),
    )


CALL = ToolCall(id="1", name="echo", arguments={"q": "x"})
ASYNCIO_CALL = ToolCall(id="2", name="aecho", arguments={"q": "x"})


async def from_trio() -> list[float]:
    options = gated_options()
    return await time_async(lambda: dispatch_tool_call(CALL, options), inner=INNER, repeat=REPEAT)


def per_call(t0: float, calls: int) -> float:
    return (time.perf_counter() - t0) / calls * 1e6


async def nothing() -> None:
    return None


async def from_asyncio() -> dict[str, list[float]]:
    options = gated_options()
    samples: dict[str, list[float]] = {
        "trio": [],
        "serial": [],
        "concurrent": [],
        "crossing": [],
        "asyncio direct": [],
        "asyncio gated": [],
    }
    per_caller = INNER // CONCURRENT

    async def trio_loop() -> float:
        t0 = time.perf_counter()
        for _ in range(INNER):
            await dispatch_tool_call(CALL, options)
        return per_call(t0, INNER)

    async with open_asyncio_host() as host:

        async def caller(n: int) -> None:
            for _ in range(n):
                await host.dispatch_tool_call(CALL, options)

        for _ in range(REPEAT):
            samples["trio"].append(await host.run(trio_loop))
            t0 = time.perf_counter()
            for _ in range(INNER):
                await host.dispatch_tool_call(CALL, options)
            samples["serial"].append(per_call(t0, INNER))
            t0 = time.perf_counter()
            await asyncio.gather(*(caller(per_caller) for _ in range(CONCURRENT)))
            samples["concurrent"].append(per_call(t0, per_caller * CONCURRENT))
            t0 = time.perf_counter()
            for _ in range(INNER):
                await host.run(nothing)
            samples["crossing"].append(per_call(t0, INNER))
            ctx = ToolExecutionContext(ASYNCIO_CALL)
            arguments: JsonObject = {"q": "x"}
            t0 = time.perf_counter()
            for _ in range(INNER):
                await asyncio_echo(arguments, ctx)
            samples["asyncio direct"].append(per_call(t0, INNER))
            t0 = time.perf_counter()
            for _ in range(INNER):
                await host.dispatch_tool_call(ASYNCIO_CALL, options)
            samples["asyncio gated"].append(per_call(t0, INNER))
    return samples


def verdict(r: Row, bound: float) -> Row:
    """Note whether ``r``'s ratio to its baseline is at most ``bound``."""
    ok = r.ratio is not None and r.ratio <= bound
    r.note = f"{r.note}; meets target" if ok else f"{r.note}; MISSES target"
    return r


def main() -> list[Row]:
    import trio

    trio_samples = trio.run(from_trio)
    samples = asyncio.run(from_asyncio())
    inside = row(
        BENCH,
        "... from trio, inside the host",
        samples["trio"],
        note="interleaved with the rows below",
    )
    direct = row(
        BENCH,
        "asyncio tool, called directly",
        samples["asyncio direct"],
        note="awaits asyncio.sleep(0); plain asyncio",
    )
    return [
        row(BENCH, "gated dispatch from trio", trio_samples, note="trio.run"),
        inside,
        verdict(
            row(
                BENCH,
                "gated dispatch from asyncio (host)",
                samples["serial"],
                baseline=inside,
                target="<= 2x",
                note="one caller, one call at a time",
            ),
            2.0,
        ),
        verdict(
            row(
                BENCH,
                f"... {CONCURRENT} concurrent asyncio callers",
                samples["concurrent"],
                baseline=inside,
                target="<= 2x",
                note="per call (wall / calls)",
            ),
            2.0,
        ),
        row(
            BENCH,
            "host crossing alone",
            samples["crossing"],
            baseline=inside,
            note="host.run of a function that returns at once",
        ),
        direct,
        row(
            BENCH,
            "asyncio tool, gated through the host",
            samples["asyncio gated"],
            baseline=direct,
            note="every gate; no trio code, so all of it runs in the caller's task",
        ),
    ]


if __name__ == "__main__":
    report(main())
