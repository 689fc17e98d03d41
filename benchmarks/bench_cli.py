"""What the ``prism`` command costs: startup, ledger rendering, live event rendering, the demo.

Rows (medians over repetitions, all measured in this run):

- ``python -c pass``: a fresh interpreter, the baseline for process rows.
- ``prism --version``: CLI startup (click, rich and prism.core imported). Target <= 600 ms.
- ``prism --help``: the help text; nothing heavy imported. Target <= 600 ms.
- ``prism run missing.json``: a file error, reported before the MCP SDK, the model SDKs
  or the agent's tools are imported. Target <= 600 ms.
- ``prism ledger show`` (1,000 records): read, parse and draw a table. Target <= 1.5 s.
- ``event sink, no-op``: the baseline for the next row (per event).
- ``EventView, plain lines``: the CLI's event sink drawing one line per event
  into a buffer (per event). Target <= 100 µs.
- ``prism demo``: the whole demo end to end, MCP server start included, with the slow
  tool's pause set to 0. Target <= 5 s.

Run: ``uv run python benchmarks/bench_cli.py [--json] [--quick]``.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import Row, row, run

from prism.cli._render import EventView
from prism.core import AgentEvent, ToolExecutionFinished, ToolExecutionStarted, ToolResult
from prism.core.ledger import FinishedCall, RunLedger

BENCH = "cli"
QUICK = "--quick" in sys.argv[1:]
PROCESS_REPEAT = 3 if QUICK else 5
DEMO_REPEAT = 1 if QUICK else 3


def _process_samples(
    argv: list[str], repeat: int, cwd: str | None = None, *, check: bool = True
) -> list[float]:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(
            argv,
            check=check,
            capture_output=True,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        samples.append((time.perf_counter() - t0) * 1e6)
    return samples


def _ledger_file(folder: Path, records: int) -> Path:
    ledger = RunLedger()
    for index in range(records):
        status = ("ok", "error", "blocked")[index % 3]
        ledger.record_call(
            FinishedCall(
                call_id=f"c{index}",
                tool_name="mcp:docs:search_docs",
                arguments={"query": f"term {index}", "limit": 3},
                status=status,  # type: ignore[arg-type]
                blocked_reason="validation_failed" if status == "blocked" else None,
                started_at=1.0,
                finished_at=1.5,
                duration_s=0.5,
                result=ToolResult.text(f"result {index} " * 8),
            )
        ).record()
    path = folder / "ledger.jsonl"
    path.write_text(ledger.to_jsonl(), encoding="utf-8")
    return path


def _events(count: int) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    result = ToolResult.text("some result text that is a little long " * 3)
    for index in range(count // 2):
        call_id = f"c{index}"
        events.append(
            ToolExecutionStarted(call_id=call_id, tool_name="read", arguments={"path": "a.txt"})
        )
        events.append(
            ToolExecutionFinished(
                call_id=call_id, tool_name="read", result=result, duration_s=0.001
            )
        )
    return events


def _per_event(sink_factory: object, events: list[AgentEvent], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        sink = sink_factory()  # type: ignore[operator]
        t0 = time.perf_counter()
        for event in events:
            sink(event)
        samples.append((time.perf_counter() - t0) / len(events) * 1e6)
    return samples


async def main() -> list[Row]:
    from rich.console import Console

    python = sys.executable
    rows: list[Row] = []
    base = row(BENCH, "python -c pass", _process_samples([python, "-c", "pass"], PROCESS_REPEAT))
    rows.append(base)
    startup = _process_samples([python, "-m", "prism.cli", "--version"], PROCESS_REPEAT)
    rows.append(
        row(BENCH, "prism --version", startup, baseline=base, target="<= 600 ms", note="startup")
    )
    fast = {"prism --help": ["--help"], "prism run missing.json": ["run", "missing.json"]}
    with tempfile.TemporaryDirectory() as folder:
        for name, args in fast.items():
            samples = _process_samples(
                [python, "-m", "prism.cli", *args], PROCESS_REPEAT, cwd=folder, check=False
            )
            rows.append(row(BENCH, name, samples, baseline=base, target="<= 600 ms"))
    with tempfile.TemporaryDirectory() as folder:
        ledger = _ledger_file(Path(folder), 1_000)
        show = _process_samples(
            [python, "-m", "prism.cli", "ledger", "show", str(ledger)], PROCESS_REPEAT
        )
        rows.append(
            row(
                BENCH,
                "prism ledger show (1,000 records)",
                show,
                baseline=base,
                target="<= 1.5 s",
            )
        )

    events = _events(2_000)

    def noop() -> object:
        return lambda event: None

    def view() -> object:
        console = Console(file=io.StringIO(), width=140, force_terminal=False)
        return EventView(console, live=False)

    sink_base = row(BENCH, "event sink, no-op", _per_event(noop, events, 5), note="per event")
    rows.append(sink_base)
    rows.append(
        row(
            BENCH,
            "EventView, plain lines",
            _per_event(view, events, 5),
            baseline=sink_base,
            target="<= 100 µs",
            note="per event",
        )
    )

    with tempfile.TemporaryDirectory() as folder:
        demo = _process_samples(
            [python, "-m", "prism.cli", "demo", "--step-seconds", "0", "--json"],
            DEMO_REPEAT,
            cwd=folder,
        )
    rows.append(
        row(
            BENCH,
            "prism demo (19 calls, real MCP server)",
            demo,
            baseline=base,
            target="<= 5 s",
            note="end to end",
        )
    )
    for r in rows:
        limit = {
            "prism --version": 600e3,
            "prism --help": 600e3,
            "prism run missing.json": 600e3,
            "EventView, plain lines": 100.0,
        }.get(r.name)
        if r.name.startswith("prism ledger show"):
            limit = 1.5e6
        if r.name.startswith("prism demo"):
            limit = 5e6
        if limit is not None:
            r.note = (r.note + "; " if r.note else "") + (
                "meets target" if r.median_us <= limit else "MISSES target"
            )
    return rows


if __name__ == "__main__":
    run(main)
