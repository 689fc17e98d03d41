"""How much the gated dispatcher adds to a tool call, and how long ``import prism.core`` takes.

Rows (medians over repetitions, measured in one run):

- ``bare await``: ``await handler(args, ctx)``, the baseline.
- ``dispatch, no options``: ``dispatch_tool_call`` with only a registry.
- ``dispatch, fully gated``: filters + rule permission + a trivial validator + an
  event sink + a ledger (no schema validation). Target: <= 10 µs median.
- ``fully gated + abort signal``: the same with an ``AbortSignal`` (one cancel scope per call).
- ``gated + jsonschema validator + ledger``: the fully gated call with the JSON
  Schema validator of prism-validation-jsonschema in place of the trivial one
  (goal 1 as named: a schema gate plus the ledger). Target: <= 10 µs median.
- ``import prism.core`` / ``import trio``: fresh interpreters, the baseline is trio alone;
  bytecode is compiled (one untimed import) before the timed ones.

Run: ``uv run python benchmarks/bench_dispatch.py [--json] [--quick] [--cpu]``.
``--cpu`` times the per-call rows in CPU time of this process
(``time.process_time``) instead of wall time: on a loaded machine other
processes then cost nothing, so before/after runs compare better.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING

import attrs
from _harness import Row, row, run, time_async

from prism.core import (
    AbortController,
    DispatchOptions,
    JsonObject,
    ToolCall,
    ToolDefinition,
    ToolEvent,
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

BENCH = "dispatch"
QUICK = "--quick" in sys.argv[1:]
INNER = 2_000 if QUICK else 5_000
REPEAT = 7 if QUICK else 15
IMPORT_REPEAT = 5 if QUICK else 11
CPU = "--cpu" in sys.argv[1:]

_RESULT = ToolResult.text("ok")


async def echo(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    return _RESULT


def trivial_validator(
    tool: ToolDefinition, args: JsonObject, ctx: ToolExecutionContext
) -> str | None:
    return None if "q" in args else "q is required"


def _import_us(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return float(out) * 1e6


def compile_bytecode(*modules: str) -> None:
    """Import each module once, untimed, writing bytecode for everything it imports.

    A fresh environment (``uv sync`` does not compile bytecode) would otherwise
    pay for compiling every module in the first timed import. Writing is switched
    on explicitly, so ``PYTHONDONTWRITEBYTECODE`` cannot leave it undone.
    """
    code = "import sys; sys.dont_write_bytecode = False; " + "; ".join(
        f"import {module}" for module in modules
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def import_times_us(*modules: str) -> list[list[float]]:
    """Import time of each module in fresh interpreters, interleaved so load hits all alike.

    Bytecode is compiled first, so every sample times a warm import.
    """
    compile_bytecode(*modules)
    samples: list[list[float]] = [[] for _ in modules]
    for _ in range(IMPORT_REPEAT):
        for index, module in enumerate(modules):
            samples[index].append(_import_us(module))
    return samples


async def _per_call(fn: Callable[[], Awaitable[object]]) -> list[float]:
    """Per-call µs of ``await fn()``: wall time, or CPU time with ``--cpu``."""
    if not CPU:
        return await time_async(fn, inner=INNER, repeat=REPEAT)
    samples = []
    for _ in range(REPEAT):
        t0 = time.process_time()
        for _ in range(INNER):
            await fn()
        samples.append((time.process_time() - t0) / INNER * 1e6)
    return samples


def _within_10_us(r: Row) -> Row:
    r.note = "meets target" if r.median_us <= 10 else "MISSES target"
    return r


async def main() -> list[Row]:
    call = ToolCall(id="c1", name="echo", arguments={"q": "prism", "limit": 5})
    tool = ToolDefinition(
        name="echo",
        execute=echo,
        description="echo",
        parameters={
            "type": "object",
            "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
            "required": ["q"],
            "additionalProperties": False,
        },
    )
    registry = create_tool_registry([tool, ToolDefinition(name="other", execute=echo)])
    ctx = ToolExecutionContext(call=call)
    args: JsonObject = {"q": "prism", "limit": 5}

    async def bare() -> ToolResult:
        return await echo(args, ctx)

    plain = DispatchOptions(registry=registry)

    async def no_options() -> ToolResult:
        return await dispatch_tool_call(call, plain)

    seen: list[ToolEvent] = []

    def sink(event: object) -> None:
        if len(seen) > 1000:
            seen.clear()
        seen.append(event)  # type: ignore[arg-type]

    # Keeps the newest 1000 records in memory, like a long-running host would.
    ledger = RunLedger(max_records=1000)
    gated = DispatchOptions(
        registry=registry,
        filters=(ToolFilter(allow=frozenset({"echo", "other"})), ToolFilter(deny={"shell"})),
        permission=create_rule_permission_policy(allow=["tool:*:execute"], deny=["tool:shell:*"]),
        validator=trivial_validator,
        on_event=sink,
        ledger=ledger,
    )

    async def fully_gated() -> ToolResult:
        return await dispatch_tool_call(call, gated)

    with_signal = attrs.evolve(gated, signal=AbortController().signal)

    async def gated_with_signal() -> ToolResult:
        return await dispatch_tool_call(call, with_signal)

    with_schema = attrs.evolve(gated, validator=create_json_schema_tool_validator())

    async def gated_with_schema() -> ToolResult:
        return await dispatch_tool_call(call, with_schema)

    # Warm up every path once (regex caches, attrs classes, compiled schemas).
    for fn in (bare, no_options, fully_gated, gated_with_signal, gated_with_schema):
        for _ in range(500):
            await fn()
    assert (await fully_gated()).joined_text == "ok"

    base = row(BENCH, "bare await", await _per_call(bare))
    rows = [base]
    rows.append(
        row(
            BENCH,
            "dispatch, no options",
            await _per_call(no_options),
            baseline=base,
        )
    )
    rows.append(
        _within_10_us(
            row(
                BENCH,
                "dispatch, fully gated",
                await _per_call(fully_gated),
                baseline=base,
                target="<= 10 µs",
            )
        )
    )
    rows.append(
        row(
            BENCH,
            "fully gated + abort signal",
            await _per_call(gated_with_signal),
            baseline=base,
            note="adds a cancel scope per call",
        )
    )
    rows.append(
        _within_10_us(
            row(
                BENCH,
                "gated + jsonschema validator + ledger",
                await _per_call(gated_with_schema),
                baseline=base,
                target="<= 10 µs",
            )
        )
    )

    trio_samples, core_samples = import_times_us("trio", "prism.core")
    trio_row = row(BENCH, "import trio", trio_samples, note="fresh interpreter")
    core_row = row(
        BENCH,
        "import prism.core",
        core_samples,
        baseline=trio_row,
        target="<= 150 ms",
    )
    core_row.note = "meets target" if core_row.median_us <= 150_000 else "MISSES target"
    rows += [trio_row, core_row]
    return rows


if __name__ == "__main__":
    t0 = time.perf_counter()
    run(main)
    if "--json" not in sys.argv[1:]:
        sys.stdout.write(f"(took {time.perf_counter() - t0:.1f} s)\n")
