"""What the agent runtime adds per tool call, and how close bounded parallel dispatch gets to ideal.

Rows (medians over repetitions, measured in one run):

1. Per-call cost of an agent run. A ``ScriptedProvider`` answers either at once
   (0 calls: one provider turn) or with one turn of 100 trivial calls followed by
   a final answer. Per-call cost = (t100 - t0) / 100, from paired samples; the
   100-call run also pays for its extra provider turn, so the figure is slightly
   pessimistic. Both the default agent (ledger on, no gates) and a fully gated
   one (rule permission, validator, event sink, ledger) are measured.
   Target: <= 25 µs per call. Other toolkits are not quoted here: ``bench_peers.py``
   measures their tool-call entry points against Prism's in the same process.
2. 50 calls that each ``trio.sleep(0.02)``, unbounded (concurrency 50) against the
   ideal 20 ms (target <= 1.10x), and at concurrency 4 against the ideal
   13 x 20 ms = 260 ms (target <= 1.03x); measured both through
   ``dispatch_tool_calls_in_order`` alone (with a ledger) and through a whole
   agent run (which adds two provider turns and the transcript).
   The largest number of calls seen in flight is printed. "trio floor" rows run
   the same sleeps as bare trio tasks (no Prism), interleaved with the measured
   runs, to show what trio's timers cost on this machine.

Run: ``uv run python benchmarks/bench_agent.py [--json] [--quick] [--cpu]``.
``--cpu`` times the per-call rows (1.) in CPU time of this process
(``time.process_time``) instead of wall time, so that other processes on a
loaded machine cost nothing; the sleep rows (2.) are always wall time.
"""

from __future__ import annotations

import functools
import math
import sys
import time
from typing import TYPE_CHECKING

import trio
from _harness import Row, row, run

from prism.core import (
    AgentEvent,
    AssistantMessage,
    DispatchOptions,
    JsonObject,
    Limits,
    RunOptions,
    ScriptedProvider,
    SingleShotLoop,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_agent,
    create_rule_permission_policy,
    create_tool_registry,
    dispatch_tool_calls_in_order,
)
from prism.core.ledger import RunLedger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

BENCH = "agent"
QUICK = "--quick" in sys.argv[1:]
INNER = 10 if QUICK else 20
REPEAT = 9 if QUICK else 21
SLEEP_REPEAT = 7 if QUICK else 15
SHORT_SLEEP_REPEAT = 11 if QUICK else 41  # the unbounded runs are short: take more
CALLS = 100
SLEEP_CALLS = 50
SLEEP_S = 0.02
# The per-call rows' clock (see --cpu above).
CLOCK = time.process_time if "--cpu" in sys.argv[1:] else time.perf_counter

_RESULT = ToolResult.text("ok")
_FINAL = AssistantMessage(content=(TextContent(text="done"),))
_TURN = AssistantMessage(
    tool_calls=tuple(
        ToolCall(id=f"call_{i}", name="echo", arguments={"q": "prism", "n": i})
        for i in range(CALLS)
    )
)


async def echo(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return _RESULT


def trivial_validator(
    tool: ToolDefinition, args: JsonObject, ctx: ToolExecutionContext
) -> str | None:
    return None if "q" in args else "q is required"


TOOLS = [ToolDefinition(name="echo", execute=echo, description="echo")]
POLICY = create_rule_permission_policy(allow=["tool:*:execute"], deny=["tool:shell:*"])


def sink(event: AgentEvent) -> None:
    return None


async def agent_run(with_calls: bool, *, gated: bool) -> None:
    turns = [_TURN, _FINAL] if with_calls else [_FINAL]
    if gated:
        agent = create_agent(
            model="bench",
            provider=ScriptedProvider(turns),
            tools=TOOLS,
            permission=POLICY,
            validator=trivial_validator,
        )
        result = await agent.session().run("go", RunOptions(on_event=sink))
    else:
        agent = create_agent(model="bench", provider=ScriptedProvider(turns), tools=TOOLS)
        result = await agent.session().run("go")
    assert len(result.records) == (CALLS if with_calls else 0)


async def paired_samples(*, gated: bool) -> tuple[list[float], list[float], list[float]]:
    """Per-run µs for 0 and 100 calls, and the per-call difference, sample by sample."""
    zero: list[float] = []
    hundred: list[float] = []
    per_call: list[float] = []
    for _ in range(REPEAT):
        t = CLOCK()
        for _ in range(INNER):
            await agent_run(False, gated=gated)
        t0 = (CLOCK() - t) / INNER * 1e6
        t = CLOCK()
        for _ in range(INNER):
            await agent_run(True, gated=gated)
        t100 = (CLOCK() - t) / INNER * 1e6
        zero.append(t0)
        hundred.append(t100)
        per_call.append((t100 - t0) / CALLS)
    return zero, hundred, per_call


def fixed_row(name: str, micros: float, note: str) -> Row:
    return Row(bench=BENCH, name=name, median_us=micros, min_us=micros, max_us=micros, note=note)


def judged(r: Row, limit_ratio: float | None = None, limit_us: float | None = None) -> Row:
    ok = True
    if limit_ratio is not None and (r.ratio is None or r.ratio > limit_ratio):
        ok = False
    if limit_us is not None and r.median_us > limit_us:
        ok = False
    r.note = f"{r.note}; meets target" if ok else f"{r.note}; MISSES target"
    r.note = r.note.lstrip("; ")
    return r


async def per_call_rows() -> list[Row]:
    for gated in (False, True):
        for _ in range(30):
            await agent_run(True, gated=gated)
            await agent_run(False, gated=gated)
    rows: list[Row] = []
    for gated, label in ((False, "default agent"), (True, "fully gated agent")):
        zero, hundred, per_call = await paired_samples(gated=gated)
        base = row(BENCH, f"{label}: run, 0 calls", zero)
        rows.append(base)
        rows.append(row(BENCH, f"{label}: run, 100 calls", hundred, baseline=base))
        rows.append(
            judged(
                row(BENCH, f"{label}: per call (t100-t0)/100", per_call, target="<= 25 µs"),
                limit_us=25.0,
            )
        )
    return rows


class InFlight:
    def __init__(self) -> None:
        self.now = 0
        self.peak = 0


def nap_tool(counter: InFlight) -> ToolDefinition:
    async def nap(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
        counter.now += 1
        counter.peak = max(counter.peak, counter.now)
        try:
            await trio.sleep(SLEEP_S)
        finally:
            counter.now -= 1
        return _RESULT

    return ToolDefinition(name="nap", execute=nap)


_NAPS = tuple(ToolCall(id=f"nap_{i}", name="nap", arguments={}) for i in range(SLEEP_CALLS))


async def agent_naps(concurrency: int, counter: InFlight) -> None:
    """A whole agent run: provider turn, 50 sleeping calls, final provider turn."""
    agent = create_agent(
        model="bench",
        provider=ScriptedProvider([AssistantMessage(tool_calls=_NAPS), _FINAL]),
        tools=[nap_tool(counter)],
        loop=SingleShotLoop(concurrency=concurrency),
        limits=Limits(max_tool_rounds=1),
    )
    await agent.session().run("go")


async def dispatch_naps(concurrency: int, counter: InFlight) -> None:
    """The parallel dispatch primitive alone, every call recorded in a ledger."""
    options = DispatchOptions(
        registry=create_tool_registry([nap_tool(counter)]), ledger=RunLedger()
    )
    await dispatch_tool_calls_in_order(_NAPS, options, concurrency=concurrency)


async def timed(fn: Callable[[], Awaitable[None]]) -> float:
    t = time.perf_counter()
    await fn()
    return (time.perf_counter() - t) * 1e6


async def sleep_rows() -> list[Row]:
    rows: list[Row] = []
    waves = math.ceil(SLEEP_CALLS / 4)

    async def bare_tasks() -> None:
        # trio's own floor: the same number of tasks, each just sleeping.
        async with trio.open_nursery() as nursery:
            for _ in range(SLEEP_CALLS):
                nursery.start_soon(trio.sleep, SLEEP_S)

    async def bare_pool() -> None:
        # trio's own floor at concurrency 4: 4 tasks sharing the 50 sleeps.
        left = [SLEEP_CALLS]

        async def one_worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                await trio.sleep(SLEEP_S)

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(one_worker)

    for concurrency, ideal_s, limit, floor_name, floor in (
        (SLEEP_CALLS, SLEEP_S, 1.10, f"trio floor: {SLEEP_CALLS} tasks x sleep", bare_tasks),
        (4, waves * SLEEP_S, 1.03, "trio floor: 4 tasks share 50 sleeps", bare_pool),
    ):
        ideal = fixed_row(
            f"ideal, concurrency {concurrency}",
            ideal_s * 1e6,
            f"theoretical: {math.ceil(SLEEP_CALLS / concurrency)} wave(s) x 20 ms",
        )
        label = "unbounded" if concurrency == SLEEP_CALLS else f"concurrency {concurrency}"
        variants = (
            (f"50 x sleep 20 ms, {label}, dispatch_tool_calls_in_order", dispatch_naps),
            (f"50 x sleep 20 ms, {label}, agent run", agent_naps),
        )
        counters = [InFlight() for _ in variants]
        runs: list[Callable[[], Awaitable[None]]] = [
            functools.partial(fn, concurrency, counter)
            for (_, fn), counter in zip(variants, counters, strict=True)
        ]
        runs.append(floor)
        for fn in runs:
            await fn()
        # Interleave the variants so that machine noise hits them alike.
        samples: list[list[float]] = [[] for _ in runs]
        repeat = SHORT_SLEEP_REPEAT if concurrency == SLEEP_CALLS else SLEEP_REPEAT
        for _ in range(repeat):
            for index, fn in enumerate(runs):
                samples[index].append(await timed(fn))
        rows.append(ideal)
        for (name, _), counter, measured in zip(variants, counters, samples[:-1], strict=True):
            measured_row = row(
                BENCH,
                name,
                measured,
                baseline=ideal,
                target=f"<= {limit:.2f}x ideal",
                note=f"max in flight {counter.peak}",
            )
            rows.append(judged(measured_row, limit_ratio=limit))
        rows.append(row(BENCH, floor_name, samples[-1], baseline=ideal, note="no Prism involved"))
    return rows


async def main() -> list[Row]:
    return [*(await per_call_rows()), *(await sleep_rows())]


if __name__ == "__main__":
    started = time.perf_counter()
    run(main)
    if "--json" not in sys.argv[1:]:
        sys.stdout.write(f"(took {time.perf_counter() - started:.1f} s)\n")
