"""What writing the ledger as a run goes costs per call, against the in-memory ledger.

Rows (medians over repetitions, measured in one run; each row dispatches a call
to a tool whose execution policy allows it, so every record carries a decision):

- ``in-memory ledger``: ``RunLedger()`` with no sinks, the baseline.
- ``JSONL sink, fsync never``: one ``os.write`` of one line per call.
  Target: at most 20 µs per call more than the baseline.
- ``JSONL sink, fsync never, max_bytes``: plus the ``stat`` that checks for rotation.
- ``JSONL sink, fsync always``: plus an ``fsync`` per call (the disk decides).
- ``SQLite sink, synchronous=OFF / NORMAL``: one autocommit ``INSERT`` per call (WAL).
- ``SQLite sink, synchronous=FULL``: plus a WAL sync per call.

Run: ``uv run python benchmarks/bench_ledger.py [--json] [--quick]``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from _harness import Row, row, run, time_async

from prism.core import (
    DispatchOptions,
    ExecutionAction,
    ExecutionDecision,
    JsonlLedgerSink,
    JsonObject,
    LedgerSink,
    RunLedger,
    SqliteLedgerSink,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    assert_execution_allowed,
    create_tool_registry,
    dispatch_tool_call,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

BENCH = "ledger"
QUICK = "--quick" in sys.argv[1:]
INNER = 1_000 if QUICK else 3_000
REPEAT = 5 if QUICK else 11
SLOW_INNER = 20 if QUICK else 50
SLOW_REPEAT = 3 if QUICK else 5
TARGET_US = 20.0

_RESULT = ToolResult.text("ok")
_DECISION = ExecutionDecision(
    allowed=True,
    reason="command 'ls -la src': proved read-only",
    details={"policy": "coding_approval", "decision": "allowed", "rule": "model:ls"},
)


class _Policy:
    def check(self, action: ExecutionAction) -> ExecutionDecision:
        return _DECISION


_POLICY = _Policy()
_ACTION = ExecutionAction(kind="shell", operation="shell", command="ls -la src")


async def shell(args: JsonObject, ctx: ToolExecutionContext) -> ToolResult:
    await assert_execution_allowed(_POLICY, _ACTION)
    return _RESULT


def _dispatcher(ledger: RunLedger) -> Callable[[], Awaitable[ToolResult]]:
    registry = create_tool_registry([ToolDefinition(name="shell", execute=shell)])
    options = DispatchOptions(registry=registry, ledger=ledger)
    call = ToolCall(id="c1", name="shell", arguments={"command": "ls -la src", "timeout": 30})

    async def once() -> ToolResult:
        if len(ledger._records) > 1000:
            ledger._records.clear()
        return await dispatch_tool_call(call, options)

    return once


async def _measure(name: str, sink: LedgerSink | None, *, slow: bool = False) -> list[float]:
    ledger = RunLedger(sinks=() if sink is None else (sink,))
    once = _dispatcher(ledger)
    for _ in range(20 if slow else 300):
        await once()
    inner, repeat = (SLOW_INNER, SLOW_REPEAT) if slow else (INNER, REPEAT)
    try:
        return await time_async(once, inner=inner, repeat=repeat)
    finally:
        ledger.close()


async def main() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="prism-bench-ledger-") as scratch:
        folder = Path(scratch)
        base = row(BENCH, "in-memory ledger", await _measure("memory", None))
        rows = [base]
        jsonl = row(
            BENCH,
            "JSONL sink, fsync never",
            await _measure("jsonl", JsonlLedgerSink(folder / "a.jsonl")),
            baseline=base,
            target=f"<= +{TARGET_US:.0f} µs/call",
        )
        added = jsonl.median_us - base.median_us
        verdict = "meets target" if added <= TARGET_US else "MISSES target"
        jsonl.note = f"+{added:.1f} µs/call, {verdict}"
        rows.append(jsonl)
        rotating = JsonlLedgerSink(folder / "b.jsonl", max_bytes=64 * 1024 * 1024)
        capped = row(
            BENCH,
            "JSONL sink, fsync never, max_bytes",
            await _measure("jsonl-capped", rotating),
            baseline=base,
        )
        capped.note = f"+{capped.median_us - base.median_us:.1f} µs/call (a stat per write)"
        rows.append(capped)
        always = row(
            BENCH,
            "JSONL sink, fsync always",
            await _measure(
                "jsonl-fsync", JsonlLedgerSink(folder / "c.jsonl", fsync="always"), slow=True
            ),
            baseline=base,
            note="an fsync per call: the disk decides",
        )
        rows.append(always)
        for label, fsync, slow in (
            ("OFF", "never", False),
            ("NORMAL", "run", False),
            ("FULL", "always", True),
        ):
            sink = SqliteLedgerSink(folder / f"{label}.db", fsync=fsync)  # type: ignore[arg-type]
            sqlite = row(
                BENCH,
                f"SQLite sink, synchronous={label}",
                await _measure(f"sqlite-{label}", sink, slow=slow),
                baseline=base,
            )
            sqlite.note = f"+{sqlite.median_us - base.median_us:.1f} µs/call"
            rows.append(sqlite)
    return rows


if __name__ == "__main__":
    t0 = time.perf_counter()
    run(main)
    if "--json" not in sys.argv[1:]:
        sys.stdout.write(f"(took {time.perf_counter() - t0:.1f} s)\n")
